/* test_pool.c - the decode worker pool (kernels/pool.h) runs every chunk
 * exactly once, and mc_select_attend (methods/common.c) runs each row's
 * attend only after that row's select has finished (the attend reads what
 * the select wrote), once each, and returns a select share within the
 * job's wall time. Four participants on any machine (oversubscribed on
 * two cores, which is when a waiting attend must yield). Jobs of different
 * sizes follow each other, which is what exposed a participant claiming a
 * chunk of the next job from the finished job's claim word (pool.c); the
 * sanitizer build's slower threads made it show (2 in 1500 trials). */
#include <omp.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/kernels.h"
#include "kernels/pool.h"
#include "methods/common.h"

double kb_now(void);

#define NMAX 300
#define NBIG ((1 << 20) + 300) /* more chunks than one published job holds (pool.c) */
static atomic_int runs[NBIG];

static void count_chunk(void *ctx, int c, int worker) {
    (void)ctx;
    (void)worker;
    atomic_fetch_add(&runs[c], 1);
}

/* The highest worker index a chunk ran on (ctx: an atomic_int), after a
 * short spin so that every awake pool thread gets a chance to claim. */
static void note_worker(void *ctx, int c, int worker) {
    (void)c;
    atomic_int *mx = ctx;
    double t0 = kb_now();
    while (kb_now() - t0 < 2e-6) {
    }
    int m = atomic_load(mx);
    while (worker > m && !atomic_compare_exchange_weak(mx, &m, worker)) {
    }
}

typedef struct sa_ctx {
    int rows, mode;
    double delay[64];     /* seconds each select spins before writing */
    volatile int val[64]; /* written by select i */
    int seen[64];         /* what attend i read */
    atomic_int sel_runs[64], att_runs[64];
} sa_ctx;

static void spin_for(double s) {
    double t0 = kb_now();
    while (kb_now() - t0 < s) {
    }
}

/* Reports as page-summary upkeep: nothing (mode 0), more than its whole
 * task (1: the split clamps it to the select's share), the first half of
 * its spin (2). */
static double sel_row(void *p, int i, int worker) {
    (void)worker;
    sa_ctx *c = p;
    atomic_fetch_add(&c->sel_runs[i], 1);
    double t0 = kb_now();
    spin_for(c->delay[i] / 2);
    double up = kb_now() - t0;
    spin_for(c->delay[i] / 2);
    c->val[i] = 7 * i + 1;
    return c->mode == 0 ? 0 : c->mode == 1 ? 1e3 : up;
}

static void att_row(void *p, int i, int worker) {
    (void)worker;
    sa_ctx *c = p;
    atomic_fetch_add(&c->att_runs[i], 1);
    c->seen[i] = c->val[i];
}

int main(void) {
    omp_set_num_threads(4);
    for (int trial = 0; trial < 400; trial++) {
        int n = trial < 300 ? trial : (int)(check_urand() * NMAX);
        for (int i = 0; i < NMAX; i++) atomic_store(&runs[i], 0);
        kb_pool_run(n, count_chunk, NULL);
        int ok = 1;
        for (int i = 0; i < NMAX; i++) ok &= atomic_load(&runs[i]) == (i < n);
        CHECK_MSG(ok, "kb_pool_run n=%d: a chunk ran other than once", n);
    }
    /* short jobs followed by longer ones, many times: the pattern in which
     * a late participant could take the finished job's claim word for the
     * next job's */
    int twice = 0;
    for (int trial = 0; trial < 20000; trial++) {
        int n = trial % 2 ? 2 + trial % 7 : 20 + trial % 40;
        for (int i = 0; i < n; i++) atomic_store(&runs[i], 0);
        kb_pool_run(n, count_chunk, NULL);
        for (int i = 0; i < n; i++) twice += atomic_load(&runs[i]) != 1;
    }
    CHECK_MSG(twice == 0, "alternating job sizes: %d chunks ran other than once", twice);
    for (int i = 0; i < NBIG; i++) atomic_store(&runs[i], 0);
    kb_pool_run(NBIG, count_chunk, NULL);
    int big_ok = 1;
    for (int i = 0; i < NBIG; i++) big_ok &= atomic_load(&runs[i]) == 1;
    CHECK_MSG(big_ok, "kb_pool_run n=%d: a chunk ran other than once", NBIG);
    /* 2^20 chunks: one more than a published job holds (pool.c's
     * CHUNKS_MAX), so the second job has exactly one chunk */
    for (int i = 0; i < NBIG; i++) atomic_store(&runs[i], 0);
    kb_pool_run(1 << 20, count_chunk, NULL);
    big_ok = 1;
    for (int i = 0; i < NBIG; i++) big_ok &= atomic_load(&runs[i]) == (i < (1 << 20));
    CHECK_MSG(big_ok, "kb_pool_run n=%d: a chunk ran other than once", 1 << 20);
    /* fewer participants than pool threads exist (4 were made above): the
     * worker index stays below kb_pool_threads() (pool.h: it indexes
     * per-participant scratch sized for that many) */
    omp_set_num_threads(2);
    atomic_int maxw = 0;
    for (int trial = 0; trial < 300; trial++) kb_pool_run(64, note_worker, &maxw);
    CHECK_MSG(atomic_load(&maxw) < 2, "worker index %d with 2 participants", atomic_load(&maxw));
    /* the participants: omp_get_max_threads(), at most KB_POOL_THREADS_MAX
     * (pool.h), whatever the cores */
    omp_set_num_threads(KB_POOL_THREADS_MAX + 5);
    CHECK_EQ_INT(kb_pool_threads(), KB_POOL_THREADS_MAX);
    omp_set_num_threads(4);
    CHECK_EQ_INT(kb_pool_threads(), 4);
    static sa_ctx c;
    for (int trial = 0; trial < 1500; trial++) {
        c.rows = 1 + trial % 9;
        for (int i = 0; i < c.rows; i++) {
            /* selects of a few to tens of microseconds, some much longer
             * than the attends that wait for them */
            c.delay[i] = check_urand() < 0.3 ? check_urand() * 60e-6 : check_urand() * 3e-6;
            c.val[i] = 0;
            c.seen[i] = -1;
            atomic_store(&c.sel_runs[i], 0);
            atomic_store(&c.att_runs[i], 0);
        }
        double t0 = kb_now();
        double upkeep = -1;
        c.mode = trial % 3;
        double share = mc_select_attend(&kb_kernels_cpu, c.rows, sel_row, att_row, &c, &upkeep);
        double wall = kb_now() - t0;
        int ok = 1;
        for (int i = 0; i < c.rows; i++)
            ok &= c.seen[i] == 7 * i + 1 && atomic_load(&c.sel_runs[i]) == 1 && atomic_load(&c.att_runs[i]) == 1;
        CHECK_MSG(ok, "mc_select_attend rows=%d trial=%d: an attend ran before its select or a task ran "
                      "other than once", c.rows, trial);
        CHECK_MSG(share >= 0 && share <= wall, "select share %g s of a %g s job", share, wall);
        /* upkeep: the part of the select share the selects reported (the
         * same split of the wall time; timings themselves are not checked:
         * 4 threads on this machine's cores are preempted mid-spin) */
        if (c.mode == 0) CHECK_MSG(upkeep == 0, "no upkeep reported, %g s split", upkeep);
        if (c.mode == 1)
            CHECK_MSG(upkeep == share, "upkeep %g s, more than every select reported: the select share %g s expected",
                      upkeep, share);
        /* (>= 0, not > 0: selects of ~0 s can report 0; mode 1 catches an
         * upkeep never written) */
        if (c.mode == 2)
            CHECK_MSG(upkeep >= 0 && upkeep <= share, "upkeep %g s of a select share %g s", upkeep, share);
    }
    return check_summary("test_pool");
}
