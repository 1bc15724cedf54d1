/* warm.c - the prefetch queue of warm.h. */
#include "kernels/warm.h"

void kb_warm_reset(kb_warm *w) {
    atomic_store_explicit(&w->n, 0, memory_order_relaxed);
    w->total = 0;
    w->slice = 0;
    atomic_store_explicit(&w->next, 0, memory_order_relaxed);
}

int kb_warm_reserve(kb_warm *w, int n) {
    int m = (n + KB_WARM_GROUP - 1) / KB_WARM_GROUP * KB_WARM_GROUP;
    int first = atomic_fetch_add_explicit(&w->n, m, memory_order_relaxed);
    for (int i = first; i < first + m && i < KB_WARM_RANGES; i++) w->slot[i].lines = 0;
    return first;
}

void kb_warm_put(kb_warm *w, int i, const void *p, size_t bytes) {
    if (i < 0 || i >= KB_WARM_RANGES) return;
    if (!p) bytes = 0;
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)63, b = ((uintptr_t)p + bytes + 63) & ~(uintptr_t)63;
    size_t lines = (b - a) / 64;
    w->slot[i].base = (const char *)a;
    w->slot[i].lines = !bytes ? 0 : lines > UINT32_MAX ? UINT32_MAX : (uint32_t)lines;
}

void kb_warm_add(kb_warm *w, const void *p, size_t bytes) {
    if (p && bytes) kb_warm_put(w, kb_warm_reserve(w, 1), p, bytes);
}

/* The slots taken (the threads that queued have finished their tasks: the
 * job's ordering makes their writes visible to the thread that sizes). */
static int warm_slots(const kb_warm *w) {
    int n = atomic_load_explicit(&w->n, memory_order_relaxed);
    return n < KB_WARM_RANGES ? n : KB_WARM_RANGES;
}

void kb_warm_begin(kb_warm *w, int steps) {
    int n = warm_slots(w);
    atomic_store_explicit(&w->n, n, memory_order_relaxed);
    size_t all = 0;
    int used = 0;
    for (int i = 0; i < n; i++) {
        all += w->slot[i].lines;
        used += w->slot[i].lines > 0;
    }
    uint32_t cut = UINT32_MAX; /* lines per range */
    if (all * 64 > KB_WARM_BYTES && used > 0) {
        size_t share = KB_WARM_BYTES / 64 / (size_t)used;
        cut = share < 1 ? 1 : (uint32_t)share;
    }
    uint32_t t = 0;
    for (int i = 0; i < n; i++) {
        w->slot[i].start = t;
        t += w->slot[i].lines < cut ? w->slot[i].lines : cut;
    }
    w->total = (int)t;
    w->slice = steps > 0 ? (w->total + steps - 1) / steps : w->total;
    atomic_store_explicit(&w->next, 0, memory_order_relaxed);
}

/* The slot holding queue line a (a < total): the last slot whose start is
 * <= a (an empty slot has its successor's start, so the successor, later,
 * is the one found). */
static int warm_find(const kb_warm *w, int a) {
    int n = warm_slots(w), lo = 0, hi = n - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        if ((int)w->slot[mid].start <= a) lo = mid;
        else hi = mid - 1;
    }
    return lo;
}

static int warm_end(const kb_warm *w, int i, int n) { return i + 1 < n ? (int)w->slot[i + 1].start : w->total; }

const char *kb_warm_line(const kb_warm *w, int x) {
    if (x < 0 || x >= w->total) return NULL;
    int i = warm_find(w, x);
    return w->slot[i].base + (size_t)(x - (int)w->slot[i].start) * 64;
}

static void warm_lines(const kb_warm *w, int a, int b) {
    int n = warm_slots(w);
    for (int i = warm_find(w, a), x = a; x < b && i < n; i++) {
        int end = warm_end(w, i, n);
        for (; x < b && x < end; x++) __builtin_prefetch(w->slot[i].base + (size_t)(x - (int)w->slot[i].start) * 64, 0, 2);
    }
}

void kb_warm_step(kb_warm *w) {
    if (w->slice <= 0) return;
    int a = atomic_fetch_add_explicit(&w->next, w->slice, memory_order_relaxed);
    if (a >= w->total) return;
    warm_lines(w, a, a + w->slice < w->total ? a + w->slice : w->total);
}

void kb_warm_finish(kb_warm *w) {
    int a = atomic_exchange_explicit(&w->next, w->total, memory_order_relaxed);
    if (a < w->total) warm_lines(w, a, w->total);
}
