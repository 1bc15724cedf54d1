/* pool_dispatch.c - what one job of the decode worker pool (kernels/pool.h)
 * costs beyond its work: kb_pool_run of N chunks, each W iterations of a
 * dependent multiply-add (~4 cycles each), repeated J times on two threads,
 * best of five repetitions. With W = 0 the caller runs every chunk before
 * the worker wakes; with chunks of a few us, the time over N * (one chunk)
 * / 2 is the dispatch, the claims and the join. A standalone
 * microbenchmark (not part of the build or the tests) behind
 * docs/PERFORMANCE-LOG.md, "Fewer chunks, cheaper x". Needs build/libkvbench.a:
 *   make && gcc -O2 -march=native -fopenmp -I. scripts/microbench/pool_dispatch.c \
 *     build/libkvbench.a -lm -lpthread -o build/pool_dispatch
 *   build/pool_dispatch [N [W [J]]]        defaults 4 2000 100000
 *   build/pool_dispatch 1 2000             (one chunk: the work alone, on the caller) */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "kernels/pool.h"

static volatile float sink;
static int work;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void chunk(void *ctx, int i, int worker) {
    (void)ctx;
    (void)worker;
    float a = (float)i;
    for (int k = 0; k < work; k++) a = a * 0.999f + 1.0f;
    sink = a;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    work = argc > 2 ? atoi(argv[2]) : 2000;
    long jobs = argc > 3 ? atol(argv[3]) : 100000;
    if (n < 1 || n > 1000 || work < 0 || jobs < 1) {
        fprintf(stderr, "usage: pool_dispatch [N (1-1000) [W (>= 0) [J (>= 1)]]]\n");
        return 2;
    }
    omp_set_num_threads(2);
    for (int r = 0; r < 1000; r++) kb_pool_run(n, chunk, NULL);
    double best = 1e30;
    for (int rep = 0; rep < 5; rep++) {
        double t0 = now();
        for (long j = 0; j < jobs; j++) kb_pool_run(n, chunk, NULL);
        double dt = (now() - t0) / (double)jobs;
        if (dt < best) best = dt;
    }
    printf("%d chunks of %d iterations: %.3f us per job (best of 5 x %ld jobs)\n", n, work, best * 1e6, jobs);
    return 0;
}
