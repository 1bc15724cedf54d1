/* core_pingpong.c - how long one cache line takes to go from one core to the
 * other: two threads, pinned to CPUs 0 and 1, take turns writing a counter
 * that the other waits for. Every data hand-over between the decode's two
 * threads (a mat-vec's output read by the next step on the other core, a
 * pool chunk's claim, the select/attend job's slots) pays this. A
 * standalone microbenchmark (not part of the build or the tests) behind
 * docs/PERFORMANCE-LOG.md, "Fewer chunks, cheaper x" and "A Zen 4 EPYC,
 * 2026-12-04 night".
 *   gcc -O2 -pthread scripts/microbench/core_pingpong.c -o build/core_pingpong
 *   build/core_pingpong [ROUND_TRIPS]        default 200000
 * prints the mean round trip and half of it (one way).
 *   build/core_pingpong --watch SECONDS
 * prints, about once a second for SECONDS, a line "t_s rt_ns read_gbps": the
 * round trip of 200,000 hand-overs, then the rate at which two unpinned
 * threads read a 1 GiB buffer (each one half, one 8-byte load per 64-byte
 * line; a few GB/s below kvbench's vector probe). On a VM whose two vCPUs
 * the host moves, the two columns show where they are (the Zen 4 VM of
 * 2026-12-04: ~56 ns with ~33 GB/s, ~330 ns with 45-60 GB/s). */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* the mean round trip in ns over `trips` hand-overs; the calling thread is
 * pinned to CPU 0 meanwhile and gets its affinity back after */
static double pingpong(void) {
    cpu_set_t was;
    pthread_t t;
    if (pthread_getaffinity_np(pthread_self(), sizeof was, &was)) return -1;
    atomic_store(&turn, 0);
    if (pthread_create(&t, NULL, other, NULL)) return -1;
    if (pin(0)) fprintf(stderr, "core_pingpong: cannot pin to CPU 0\n");
    double t0 = now();
    for (long i = 0; i < trips; i++) {
        atomic_store_explicit(&turn, 2 * i + 1, memory_order_release);
        while (atomic_load_explicit(&turn, memory_order_acquire) != 2 * i + 2) {
        }
    }
    double dt = now() - t0;
    pthread_join(t, NULL);
    pthread_setaffinity_np(pthread_self(), sizeof was, &was);
    return dt / (double)trips * 1e9;
}

typedef struct { const uint64_t *p; size_t n; uint64_t sum; } half_t;
static void *read_half(void *arg) {
    half_t *h = arg;
    uint64_t s0 = 0, s1 = 0;
    for (size_t i = 0; i < h->n; i += 8) { /* one 64-byte line a step, two chains */
        s0 += h->p[i];
        s1 += h->p[i + 4];
    }
    h->sum = s0 + s1;
    return NULL;
}

static int watch(double seconds) {
    const size_t bytes = (size_t)1 << 30, words = bytes / 8;
    uint64_t *buf = aligned_alloc(64, bytes);
    if (!buf) {
        fprintf(stderr, "core_pingpong: cannot allocate 1 GiB\n");
        return 1;
    }
    memset(buf, 1, bytes);
    trips = 200000;
    uint64_t sink = 0;
    printf("t_s\trt_ns\tread_gbps\n");
    for (double start = now(), t; (t = now() - start) < seconds;) {
        double rt = pingpong();
        half_t h[2] = {{buf, words / 2, 0}, {buf + words / 2, words / 2, 0}};
        pthread_t r;
        double t0 = now();
        if (rt < 0 || pthread_create(&r, NULL, read_half, &h[1])) {
            fprintf(stderr, "core_pingpong: cannot start a thread\n");
            free(buf);
            return 1;
        }
        read_half(&h[0]);
        pthread_join(r, NULL);
        double gbps = (double)bytes / (now() - t0) / 1e9;
        sink += h[0].sum + h[1].sum;
        printf("%.1f\t%.0f\t%.1f\n", t, rt, gbps);
        fflush(stdout);
        nanosleep(&(struct timespec){0, 500000000}, NULL);
    }
    free(buf);
    return sink == 1; /* keeps the reads */
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "--watch")) {
        double s = argc > 2 ? atof(argv[2]) : 0;
        if (!(s > 0 && s <= 86400)) {
            fprintf(stderr, "usage: core_pingpong --watch SECONDS (0-86400)\n");
            return 2;
        }
        return watch(s);
    }
    trips = argc > 1 ? atol(argv[1]) : 200000;
    if (trips < 1 || trips > 100000000) {
        fprintf(stderr, "usage: core_pingpong [ROUND_TRIPS (1-100000000)] | --watch SECONDS\n");
        return 2;
    }
    double rt = pingpong();
    if (rt < 0) {
        fprintf(stderr, "core_pingpong: cannot start a thread\n");
        return 1;
    }
    printf("round trip %.1f ns, one way %.1f ns (%ld round trips)\n", rt, rt / 2, trips);
    return 0;
}
