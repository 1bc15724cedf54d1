/* pool.h - a small persistent worker pool for the decode hot loops (mat-vec,
 * dense and sparse decode attention).
 *
 * Why not OpenMP there: a decode token runs a few hundred short parallel
 * regions (tens of microseconds each), and an OpenMP region ends with a
 * barrier that waits for every thread of the team. When another process
 * holds one of the cores, a descheduled team thread stalls every barrier for
 * a scheduler time slice, and decode collapsed ~100x (measured: 955 ms/token
 * instead of 9 with a niced fuzzer running; docs/PERFORMANCE.md).
 *
 * kb_pool_run(n, fn, ctx) runs fn(ctx, chunk, worker) for chunk = 0..n-1.
 * The caller takes part; each participant claims the next chunk with an
 * atomic counter, so a thread that is not running simply claims nothing,
 * and the caller waits only for chunks that were actually claimed. Idle
 * workers spin briefly (the next region usually comes within microseconds),
 * then yield, then sleep on a futex.
 *
 * Participants: omp_get_max_threads() of the calling thread (so --threads,
 * OMP_NUM_THREADS and omp_set_num_threads apply), at most KB_POOL_THREADS_MAX.
 * A call made from inside a pool chunk, from inside an OpenMP parallel
 * region, or while another thread's call is running, runs its chunks on
 * the calling thread in order (no deadlock, no oversubscription). After
 * fork() the child starts with no workers (they are created on first use).
 *
 * `worker` is 0 for the calling thread and 1..KB_POOL_THREADS_MAX-1 for pool
 * threads (indexes per-participant scratch). Chunks run on any thread; they
 * are claimed in increasing order (one atomic counter; the in-order
 * fallbacks too), so a chunk may wait for a lower-numbered one, which a
 * running participant has claimed (methods/hybrid_core.c: a row's attend
 * waits for its select), never for a higher-numbered one. */
#ifndef KB_POOL_H
#define KB_POOL_H

#define KB_POOL_THREADS_MAX 64

typedef void (*kb_pool_fn)(void *ctx, int chunk, int worker);

void kb_pool_run(int n, kb_pool_fn fn, void *ctx);
/* Participants the next kb_pool_run from this thread would use (>= 1). */
int kb_pool_threads(void);

/* Counters for tests and benchmarks (process-wide, since start). */
typedef struct kb_pool_stats {
    long calls;         /* kb_pool_run calls that used the workers */
    long inline_calls;  /* calls run on the calling thread only (nested, busy, 1 thread) */
    long chunks_worker; /* chunks executed by pool threads */
} kb_pool_stats;
void kb_pool_get_stats(kb_pool_stats *s);

#endif
