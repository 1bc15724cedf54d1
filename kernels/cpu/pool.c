/* pool.c - the persistent decode worker pool (kernels/pool.h).
 *
 * One job at a time. The job is published in a single 64-bit claim word
 * (generation, chunk count n, next chunk i), after its other fields (fn,
 * ctx, base, want) were stored; a participant reads the word, reads the
 * fields, and claims chunk i < n by a compare-and-swap from (g, n, i) to
 * (g, n, i + 1). A successful CAS proves the job was still current between
 * the read of the word and the claim (the word only grows within a
 * generation, and a new job's fields are only written after every chunk of
 * the previous one was claimed and finished), so the fields read in
 * between belong to it. n must be in the word: with n read as a field, a
 * participant that read the exhausted word (g, n, n) of a finished job and
 * then the next job's larger n while its word was not yet published could
 * claim (g, n, n) -> (g, n, n + 1) and run a chunk of the new job twice
 * (seen under AddressSanitizer in tests/unit/test_pool.c). Jobs of more
 * than CHUNKS_MAX chunks run as consecutive jobs. Pool threads count the chunks they finish
 * in `done`; the caller runs chunks too, then waits until done equals the
 * number of chunks it did not run itself: it never waits for a thread that
 * claimed nothing.
 *
 * Idle pool threads spin on the futex word `wake` (bumped at every job) for
 * SPIN_PAUSE_S with pause, then yield up to SPIN_YIELD_S (under load the
 * core goes to whoever needs it), then sleep in futex_wait; the caller only
 * makes the wake-up system call when some thread sleeps. */
#include "kernels/pool.h"

#include <immintrin.h>
#include <linux/futex.h>
#include <omp.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "kernels/kb_base.h"

#define SPIN_PAUSE_S 50e-6  /* idle worker: pause-spin this long after a job */
#define SPIN_YIELD_S 2e-3   /* then sched_yield until this long, then futex sleep */
#define WAIT_PAUSE_S 20e-6  /* caller waiting for claimed chunks: pause, then yield */
#define CHUNKS_MAX ((1 << 20) - 1) /* chunks per job in the claim word */
#define CLAIM(g, n, i) ((uint64_t)(g) << 40 | (uint64_t)(n) << 20 | (uint64_t)(i))

static struct {
    _Atomic uint64_t claim;  /* gen << 40 | n << 20 | next unclaimed chunk (CLAIM) */
    _Atomic int done;        /* chunks finished by pool threads in the current job */
    _Atomic(kb_pool_fn) fn;
    _Atomic(void *) ctx;
    _Atomic int base;        /* chunk i of the job is fn's chunk base + i */
    _Atomic int want;        /* participants of the current job (caller included) */
    _Atomic uint32_t wake;   /* futex word, bumped at every job */
    _Atomic int sleepers;    /* pool threads in futex_wait (or about to be) */
    _Atomic int busy;        /* 1 while a call owns the pool */
    _Atomic int nworkers;    /* pool threads created (indexes 1..nworkers) */
    uint32_t gen;            /* written only by the owner of busy */
    _Atomic long calls, inline_calls, chunks_worker;
} P;

static pthread_mutex_t grow_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int tl_in_pool; /* a pool thread, or the caller running chunks */
static int atfork_set;

static void futex_wait(_Atomic uint32_t *w, uint32_t v) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAIT_PRIVATE, v, NULL, NULL, 0);
}
static void futex_wake_all(_Atomic uint32_t *w) {
    syscall(SYS_futex, (uint32_t *)w, FUTEX_WAKE_PRIVATE, INT32_MAX, NULL, NULL, 0);
}

/* Claims and runs chunks of the current job until none is left (or the job
 * is not for this participant). Returns the number of chunks run. */
static int run_chunks(int w) {
    int ran = 0;
    for (;;) {
        uint64_t c = atomic_load_explicit(&P.claim, memory_order_acquire);
        kb_pool_fn fn = atomic_load_explicit(&P.fn, memory_order_relaxed);
        void *ctx = atomic_load_explicit(&P.ctx, memory_order_relaxed);
        int base = atomic_load_explicit(&P.base, memory_order_relaxed);
        int want = atomic_load_explicit(&P.want, memory_order_relaxed);
        int i = (int)(c & CHUNKS_MAX), n = (int)(c >> 20 & CHUNKS_MAX);
        if (w >= want || i >= n) return ran;
        if (!atomic_compare_exchange_weak_explicit(&P.claim, &c, c + 1, memory_order_acq_rel,
                                                   memory_order_relaxed))
            continue;
        fn(ctx, base + i, w);
        ran++;
        if (w) atomic_fetch_add_explicit(&P.done, 1, memory_order_release);
    }
}

static void *worker_main(void *arg) {
    int w = (int)(intptr_t)arg;
    tl_in_pool = 1;
    uint32_t seen = atomic_load(&P.wake);
    for (;;) {
        double t0 = kb_now();
        for (long it = 1;; it++) {
            uint32_t v = atomic_load_explicit(&P.wake, memory_order_acquire);
            if (v != seen) {
                seen = v;
                break;
            }
            if (it % 64) {
                _mm_pause();
                continue;
            }
            double t = kb_now() - t0;
            if (t < SPIN_PAUSE_S) continue;
            if (t < SPIN_YIELD_S) {
                sched_yield();
                continue;
            }
            atomic_fetch_add(&P.sleepers, 1);
            if (atomic_load(&P.wake) == seen) futex_wait(&P.wake, seen);
            atomic_fetch_sub(&P.sleepers, 1);
            t0 = kb_now();
        }
        int ran = run_chunks(w);
        if (ran) atomic_fetch_add_explicit(&P.chunks_worker, ran, memory_order_relaxed);
    }
    return NULL;
}

static void after_fork_child(void) {
    /* the pool threads do not exist in the child */
    atomic_store(&P.nworkers, 0);
    atomic_store(&P.busy, 0);
    atomic_store(&P.sleepers, 0);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    grow_lock = fresh;
}

/* Makes sure pool threads 1..k exist; returns how many exist (may be fewer
 * if thread creation fails: the caller then simply does more itself). */
static int ensure_workers(int k) {
    int have = atomic_load_explicit(&P.nworkers, memory_order_acquire);
    if (have >= k) return have;
    pthread_mutex_lock(&grow_lock);
    if (!atfork_set) {
        pthread_atfork(NULL, NULL, after_fork_child);
        atfork_set = 1;
    }
    have = atomic_load(&P.nworkers);
    while (have < k) {
        pthread_t t;
        pthread_attr_t a;
        pthread_attr_init(&a);
        pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&t, &a, worker_main, (void *)(intptr_t)(have + 1));
        pthread_attr_destroy(&a);
        if (rc) break;
        atomic_store_explicit(&P.nworkers, ++have, memory_order_release);
    }
    pthread_mutex_unlock(&grow_lock);
    return have;
}

int kb_pool_threads(void) {
    int t = omp_get_max_threads();
    return t < 1 ? 1 : t > KB_POOL_THREADS_MAX ? KB_POOL_THREADS_MAX : t;
}

static void pool_job(int base, int n, kb_pool_fn fn, void *ctx, int want);

void kb_pool_run(int n, kb_pool_fn fn, void *ctx) {
    if (n <= 0) return;
    int want = kb_pool_threads();
    int expect = 0;
    if (n == 1 || want <= 1 || tl_in_pool || omp_in_parallel() ||
        !atomic_compare_exchange_strong(&P.busy, &expect, 1)) {
        int saved = tl_in_pool;
        tl_in_pool = 1;
        for (int i = 0; i < n; i++) fn(ctx, i, 0);
        tl_in_pool = saved;
        atomic_fetch_add_explicit(&P.inline_calls, 1, memory_order_relaxed);
        return;
    }
    int have = ensure_workers(want - 1);
    if (have + 1 < want) want = have + 1;
    for (int base = 0; base < n; base += CHUNKS_MAX) /* in increasing order, as promised */
        pool_job(base, KB_MIN(CHUNKS_MAX, n - base), fn, ctx, want);
    atomic_fetch_add_explicit(&P.calls, 1, memory_order_relaxed);
    atomic_store_explicit(&P.busy, 0, memory_order_release);
}

/* One published job of n <= CHUNKS_MAX chunks (base..base+n-1 of fn's). */
static void pool_job(int base, int n, kb_pool_fn fn, void *ctx, int want) {
    atomic_store_explicit(&P.done, 0, memory_order_relaxed);
    atomic_store_explicit(&P.fn, fn, memory_order_relaxed);
    atomic_store_explicit(&P.ctx, ctx, memory_order_relaxed);
    atomic_store_explicit(&P.base, base, memory_order_relaxed);
    atomic_store_explicit(&P.want, want, memory_order_relaxed);
    /* 24 bits: a stale claim word could match again only for a participant
     * stopped between its load and its CAS for 2^24 jobs (minutes of decode) */
    P.gen = (P.gen + 1) & ((1u << 24) - 1);
    atomic_store_explicit(&P.claim, CLAIM(P.gen, n, 0), memory_order_release);
    atomic_fetch_add(&P.wake, 1); /* seq_cst: pairs with the sleepers check below */
    if (atomic_load(&P.sleepers) > 0) futex_wake_all(&P.wake);
    tl_in_pool = 1;
    int mine = run_chunks(0);
    tl_in_pool = 0;
    /* wait only for chunks that pool threads claimed */
    double t0 = 0;
    for (long it = 1; atomic_load_explicit(&P.done, memory_order_acquire) < n - mine; it++) {
        if (it % 64) {
            _mm_pause();
            continue;
        }
        if (t0 == 0) t0 = kb_now();
        if (kb_now() - t0 < WAIT_PAUSE_S) continue;
        sched_yield();
    }
}

void kb_pool_get_stats(kb_pool_stats *s) {
    s->calls = atomic_load(&P.calls);
    s->inline_calls = atomic_load(&P.inline_calls);
    s->chunks_worker = atomic_load(&P.chunks_worker);
}
