/* core_pingpong.c - how long one cache line takes to go from one core to the
 * other: two threads, pinned to CPUs 0 and 1, take turns writing a counter
 * that the other waits for. Every data hand-over between the decode's two
 * threads (a mat-vec's output read by the next step on the other core, a
 * pool chunk's claim, the select/attend job's slots) pays this. A
 * standalone microbenchmark (not part of the build or the tests) behind
 * docs/PERFORMANCE-LOG.md, "Fewer chunks, cheaper x".
 *   gcc -O2 -pthread scripts/microbench/core_pingpong.c -o build/core_pingpong
 *   build/core_pingpong [ROUND_TRIPS]        default 200000
 * Prints the mean round trip and half of it (one way). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static _Atomic long turn __attribute__((aligned(64)));
static long trips;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int pin(int cpu) {
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    return pthread_setaffinity_np(pthread_self(), sizeof s, &s);
}

static void *other(void *arg) {
    (void)arg;
    if (pin(1)) fprintf(stderr, "core_pingpong: cannot pin to CPU 1; the result may be one core's\n");
    for (long i = 0; i < trips; i++) {
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 1) {
        }
        atomic_store_explicit(&turn, 2 * i + 2, memory_order_release);
    }
    return NULL;
}

int main(int argc, char **argv) {
    trips = argc > 1 ? atol(argv[1]) : 200000;
    if (trips < 1 || trips > 100000000) {
        fprintf(stderr, "usage: core_pingpong [ROUND_TRIPS (1-100000000)]\n");
        return 2;
    }
    if (pin(0)) fprintf(stderr, "core_pingpong: cannot pin to CPU 0\n");
    pthread_t t;
    if (pthread_create(&t, NULL, other, NULL)) {
        fprintf(stderr, "core_pingpong: cannot start a thread\n");
        return 1;
    }
    double t0 = now();
    for (long i = 0; i < trips; i++) {
        atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2) {
        }
    }
    double dt = now() - t0;
    pthread_join(t, NULL);
    printf("round trip %.1f ns, one way %.1f ns (%ld round trips)\n", dt / (double)trips * 1e9,
           dt / (double)trips * 1e9 / 2, trips);
    return 0;
}
