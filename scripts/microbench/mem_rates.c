/* mem_rates.c - what this machine's memory gives two threads in the three
 * patterns a decode step uses, measured in one process, rounds alternated,
 * medians printed (docs/PERFORMANCE-LOG.md, "Gathered rows into L2"):
 *   stream   each thread sums its own 64 MiB sequentially (the weights'
 *            mat-vecs, Full KV's attention);
 *   random   each thread reads N single 64-byte lines at random places in
 *            a 1 GiB buffer, with a software prefetch PF lines ahead into
 *            L1 (T0), and again into L2 only (T2) (the gathered K/V rows and
 *            summary rows of the sparse methods);
 *   both     the stream with the random prefetches spread through it, one
 *            every (stream lines / N) lines: can the random reads hide
 *            under the weights' stream?
 * Build and run (not part of the build or the tests):
 *   gcc -O2 -march=native -pthread scripts/microbench/mem_rates.c -o build/mem_rates
 *   build/mem_rates [ROUNDS [N [PF]]]        defaults 15 65536 16
 * One random line per 64-byte read; the 1 GiB buffer is first touched by
 * both threads; the rate is bytes read over the wall time of both threads. */
#define _GNU_SOURCE
#include <immintrin.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define STREAM_BYTES ((size_t)64 << 20)
#define RAND_BYTES ((size_t)1 << 30)

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static char *stream_buf[2], *rand_buf;
static uint32_t *rand_idx[2];
static size_t n_rand;
static int pf_ahead, mode, into_l2;
static volatile float sink;

static float hsum(__m256 a) {
    float f[8];
    _mm256_storeu_ps(f, a);
    return f[0] + f[1] + f[2] + f[3] + f[4] + f[5] + f[6] + f[7];
}

static void *worker(void *arg) {
    long t = (long)arg;
    const char *s = stream_buf[t];
    const uint32_t *ix = rand_idx[t];
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    size_t lines = STREAM_BYTES / 64;
    if (mode == 0) { /* stream */
        for (size_t i = 0; i < lines; i++) {
            a0 = _mm256_add_ps(a0, _mm256_load_ps((const float *)(s + i * 64)));
            a1 = _mm256_add_ps(a1, _mm256_load_ps((const float *)(s + i * 64 + 32)));
        }
    } else if (mode == 1) { /* random lines, prefetched pf_ahead ahead */
        for (size_t j = 0; j < n_rand; j++) {
            if (pf_ahead && j + (size_t)pf_ahead < n_rand) {
                const char *q = rand_buf + (size_t)ix[j + (size_t)pf_ahead] * 64;
                if (into_l2) _mm_prefetch(q, _MM_HINT_T2);
                else _mm_prefetch(q, _MM_HINT_T0);
            }
            a0 = _mm256_add_ps(a0, _mm256_load_ps((const float *)(rand_buf + (size_t)ix[j] * 64)));
        }
    } else { /* the stream with the random lines' prefetches spread through it */
        size_t every = lines / n_rand, k = 0;
        for (size_t i = 0; i < lines; i++) {
            a0 = _mm256_add_ps(a0, _mm256_load_ps((const float *)(s + i * 64)));
            a1 = _mm256_add_ps(a1, _mm256_load_ps((const float *)(s + i * 64 + 32)));
            if (i % every == 0 && k < n_rand) _mm_prefetch(rand_buf + (size_t)ix[k++] * 64, _MM_HINT_T0);
        }
    }
    sink += hsum(_mm256_add_ps(a0, a1));
    return NULL;
}

static double run(int m, int threads, int l2) {
    mode = m;
    into_l2 = l2;
    pthread_t th[2];
    double t0 = now();
    for (long t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, (void *)t);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    return now() - t0;
}

static void *touch(void *arg) {
    long t = (long)arg;
    memset(rand_buf + (size_t)t * (RAND_BYTES / 2), 1, RAND_BYTES / 2);
    memset(stream_buf[t], 1, STREAM_BYTES);
    return NULL;
}

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmpd);
    return v[n / 2];
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    n_rand = argc > 2 ? (size_t)atol(argv[2]) : 65536;
    pf_ahead = argc > 3 ? atoi(argv[3]) : 16;
    if (rounds < 1 || rounds > 1000 || n_rand < 1 || n_rand > STREAM_BYTES / 64 || pf_ahead < 0) {
        fprintf(stderr, "usage: mem_rates [ROUNDS (1-1000) [N (1-%zu) [PF (>= 0)]]]\n", STREAM_BYTES / 64);
        return 2;
    }
    rand_buf = aligned_alloc(4096, RAND_BYTES);
    for (int t = 0; t < 2; t++) {
        stream_buf[t] = aligned_alloc(4096, STREAM_BYTES);
        rand_idx[t] = malloc(n_rand * sizeof(uint32_t));
        if (!stream_buf[t] || !rand_idx[t] || !rand_buf) {
            fprintf(stderr, "mem_rates: out of memory\n");
            return 1;
        }
        uint64_t x = 0x9E3779B97F4A7C15ull * (uint64_t)(t + 1);
        for (size_t i = 0; i < n_rand; i++) { /* xorshift64: lines over the whole buffer */
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            rand_idx[t][i] = (uint32_t)(x % (RAND_BYTES / 64));
        }
    }
    pthread_t th[2];
    for (long t = 0; t < 2; t++) pthread_create(&th[t], NULL, touch, (void *)t);
    for (int t = 0; t < 2; t++) pthread_join(th[t], NULL);
    double *ts = malloc((size_t)rounds * sizeof(double)), *tr = malloc((size_t)rounds * sizeof(double)),
           *tb = malloc((size_t)rounds * sizeof(double)), *t1 = malloc((size_t)rounds * sizeof(double)),
           *t2 = malloc((size_t)rounds * sizeof(double));
    for (int r = 0; r < rounds; r++) { /* the five measurements alternated */
        ts[r] = run(0, 2, 0);
        tr[r] = run(1, 2, 0);
        t2[r] = run(1, 2, 1);
        tb[r] = run(2, 2, 0);
        t1[r] = run(1, 1, 0);
    }
    double s = median(ts, rounds), rr = median(tr, rounds), b = median(tb, rounds), r1 = median(t1, rounds),
           r2 = median(t2, rounds);
    double sb = 2.0 * STREAM_BYTES, rb = 2.0 * (double)n_rand * 64;
    printf("stream, 2 threads:               %7.2f ms  %6.2f GB/s\n", s * 1e3, sb / s / 1e9);
    printf("random lines, 2 threads (pf %3d): %7.2f ms  %6.2f GB/s  %5.1f ns a line a thread\n", pf_ahead,
           rr * 1e3, rb / rr / 1e9, rr * 1e9 / (double)n_rand);
    printf("random lines into L2, 2 threads: %7.2f ms  %6.2f GB/s  %5.1f ns a line a thread\n", r2 * 1e3,
           rb / r2 / 1e9, r2 * 1e9 / (double)n_rand);
    printf("random lines, 1 thread:          %7.2f ms  %6.2f GB/s  %5.1f ns a line\n", r1 * 1e3,
           rb / 2 / r1 / 1e9, r1 * 1e9 / (double)n_rand);
    printf("stream + random prefetches:      %7.2f ms  (stream + random apart: %.2f ms)\n", b * 1e3,
           (s + rr) * 1e3);
    printf("medians of %d rounds; %zu random lines a thread (%.1f%% of the stream's bytes)\n", rounds, n_rand,
           100.0 * (double)n_rand * 64 / (double)STREAM_BYTES);
    return 0;
}
