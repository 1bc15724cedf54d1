/* warm.h - memory a coming step will read, prefetched while other work runs.
 *
 * A decode layer knows its queries before it has computed its keys and
 * values: the engine hands q to the attention backend first
 * (kb_attn_backend.prepare), and a method that selects from q alone (the
 * hybrid methods' dims, hence which page-summary rows its scores will read)
 * queues those rows here. The engine then runs the K and V projections as
 * one mat-vec job whose chunks prefetch the queued lines a slice at a time
 * (kb_matvec_multi_warm in kernels/quant.h), so the rows arrive while the
 * weights stream instead of when the selection waits for them
 * (docs/PERFORMANCE.md, "q before K and V").
 *
 * Only a hint: nothing here changes a value. Lines go to the L2 (prefetch
 * locality 2, prefetcht1 on x86), where the core that scores may not be the
 * one that prefetched. What does not fit KB_WARM_RANGES or the byte budget
 * is left out (each range is cut to an equal share of the budget, so every
 * queued row gets its first lines). Producers (any threads) queue between
 * kb_warm_reset and kb_warm_begin; then any number of pool threads take
 * slices. */
#ifndef KB_WARM_H
#define KB_WARM_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define KB_WARM_RANGES 4096
/* At most this many bytes are prefetched per job: the lines must still be
 * in the cache when the selection runs, a few microseconds later, beside
 * the job's own weights (SmolLM2's 8K RocketKV queues ~100 KB per layer). */
#define KB_WARM_BYTES (256 * 1024)

typedef struct kb_warm_slot {
    const char *base; /* 64-aligned */
    uint32_t lines;   /* 64-byte lines from base (0: an unused slot) */
    uint32_t start;   /* after kb_warm_begin: the first line's index in the queue */
} kb_warm_slot;

/* Slots are taken in groups of KB_WARM_GROUP (one 64-byte line), so
 * threads that queue at once never write the same line. */
#define KB_WARM_GROUP 4

typedef struct kb_warm {
    _Alignas(64) atomic_int n;      /* slots taken (may pass KB_WARM_RANGES) */
    _Alignas(64) atomic_int next;   /* first line not yet taken */
    int total;                      /* lines to prefetch (after the cut) */
    int slice;                      /* lines per kb_warm_step */
    _Alignas(64) kb_warm_slot slot[KB_WARM_RANGES];
} kb_warm;

/* Empty the queue. */
void kb_warm_reset(kb_warm *w);
/* Queue the lines of [p, p + bytes) (thread-safe; the order of ranges
 * queued by different threads is whatever it is; takes a whole group of
 * slots: a thread with many ranges reserves them at once, below). */
void kb_warm_add(kb_warm *w, const void *p, size_t bytes);
/* Take slots for n ranges at once (one atomic operation for a thread's n
 * ranges, rounded up to whole groups: threads adding one range at a time
 * bounce the counter's line and the slots' lines between them) and fill
 * slot first + j, j < n, with kb_warm_put; slots not put (the group's
 * spares) stay empty. */
int kb_warm_reserve(kb_warm *w, int n);
void kb_warm_put(kb_warm *w, int slot, const void *p, size_t bytes);
/* Before the consumer's job (one thread): cut the ranges to the byte budget
 * and size the slices so that `steps` calls of kb_warm_step take every line. */
void kb_warm_begin(kb_warm *w, int steps);
/* Prefetch the next slice (any thread; every line once over all threads). */
void kb_warm_step(kb_warm *w);
/* Prefetch whatever is left (one thread). */
void kb_warm_finish(kb_warm *w);
/* After kb_warm_begin: the address of queue line x < total (NULL outside),
 * the line kb_warm_step prefetches as its x-th (for tests). */
const char *kb_warm_line(const kb_warm *w, int x);

#endif
