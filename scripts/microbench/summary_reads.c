/* summary_reads.c - how fast can one core read a hybrid selection's page
 * summaries from memory? A standalone microbenchmark (not part of the build
 * or the tests) behind the selection analysis in docs/PERFORMANCE.md.
 *
 * A RocketKV selection at 8K context, B = 256 on the default model reads,
 * per KV head and step, r = 33 of the head's 128 dim-major summary rows (64
 * dims x {max, min}; f16; rows of 512 pages = 1 KiB, of which the 483 live
 * pages = 16 cache lines are read): 528 lines that are not in any cache when
 * the step comes back to that head. This program times reading those lines
 * cold, one head after another on one core, in four ways:
 *
 *   kernel      the 33 rows of randomly chosen dims and signs, read as
 *               kb_cpu_hybrid_scores does (4 lines of each row prefetched up
 *               front, then every row's next line 2 lines ahead per step of
 *               32 pages);
 *   rows        the same rows, no software prefetch;
 *   contig      the same number of lines as one contiguous run, prefetched
 *               32 lines ahead (the best of 8, 16 and 32 here): what an ideal
 *               layout (the chosen rows side by side) could do;
 *   contig-np   that run without software prefetch;
 *
 * and then one core's sequential read bandwidth over 1 GiB. Heads are visited
 * in a scattered order over a 64 MiB arena and a 512 MiB read evicts the
 * caches between rounds. Reports medians of TSC cycles per head.
 *
 *   cc -O2 -march=native -o build/summary_reads scripts/microbench/summary_reads.c
 *   build/summary_reads            (needs AVX-512F and F16C; a few seconds, ~0.6 GB of memory)
 */
#define _GNU_SOURCE
#include <immintrin.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <x86intrin.h>

#if !defined(__AVX512F__) || !defined(__F16C__)
#error "summary_reads needs AVX-512F and F16C (build with -march=native on such a machine)"
#endif

enum { NP = 483, CAP = 512, R = 33, D = 64, ROUNDS = 6 };
#define ROW_BYTES ((size_t)CAP * 2)
#define HEAD_BYTES ((size_t)2 * D * ROW_BYTES) /* kmax rows, then kmin rows */

static void *huge_alloc(size_t n) {
    size_t al = (n + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
    void *p = aligned_alloc(2u << 20, al);
    if (!p) {
        fprintf(stderr, "summary_reads: out of memory (%zu bytes)\n", al);
        exit(2);
    }
    madvise(p, al, MADV_HUGEPAGE);
    memset(p, 1, al);
    return p;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static inline __m512 row_chunk(const char *p) { return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p)); }

/* reads n bytes from b (a multiple of 64), e.g. to evict the caches; returns a sum */
static float read_all(const char *b, size_t n) {
    __m512i a = _mm512_setzero_si512();
    for (size_t i = 0; i < n; i += 64) a = _mm512_add_epi64(a, _mm512_load_si512(b + i));
    return (float)_mm512_reduce_add_epi64(a);
}

/* one head's read; returns a sum so that nothing is optimised away */
static float read_head(int mode, const char *head, const char *const *rowp) {
    __m512 acc = _mm512_setzero_ps();
    if (mode <= 1) {
        if (mode == 0)
            for (int t = 0; t < R; t++)
                for (int o = 0; o < 256; o += 64) _mm_prefetch(rowp[t] + o, _MM_HINT_T0);
        for (int P0 = 0; P0 < NP; P0 += 32) {
            if (mode == 0 && P0 + 64 < NP)
                for (int t = 0; t < R; t++) _mm_prefetch(rowp[t] + (size_t)(P0 + 64) * 2, _MM_HINT_T0);
            for (int t = 0; t < R; t++)
                acc = _mm512_add_ps(acc, _mm512_add_ps(row_chunk(rowp[t] + (size_t)P0 * 2),
                                                       row_chunk(rowp[t] + (size_t)P0 * 2 + 32)));
        }
    } else {
        size_t nb = (size_t)R * 16 * 64; /* the kernel's 528 lines, side by side */
        if (mode == 2)
            for (size_t o = 0; o < 2048; o += 64) _mm_prefetch(head + o, _MM_HINT_T0);
        for (size_t o = 0; o < nb; o += 64) {
            if (mode == 2) _mm_prefetch(head + o + 2048, _MM_HINT_T0);
            acc = _mm512_add_ps(acc, _mm512_add_ps(row_chunk(head + o), row_chunk(head + o + 32)));
        }
    }
    return _mm512_reduce_add_ps(acc);
}

int main(void) {
    const int nh = 512; /* 64 MiB of summaries */
    char *arena = huge_alloc((size_t)nh * HEAD_BYTES);
    size_t evn = (size_t)512 << 20;
    char *ev = huge_alloc(evn);
    double t0 = now_s();
    uint64_t c0 = __rdtsc();
    while (now_s() - t0 < 0.2) {
    }
    double tsc_ghz = (double)(__rdtsc() - c0) / (now_s() - t0) / 1e9;
    static const char *names[] = {"kernel", "rows", "contig", "contig-np"};
    static uint64_t samples[4][ROUNDS * 512];
    int ns[4] = {0};
    float sink = 0;
    srand(1);
    for (int round = 0; round <= ROUNDS; round++) /* round 0 warms up */
        for (int mode = 0; mode < 4; mode++) {
            sink += read_all(ev, evn);
            for (int k = 0; k < nh; k++) {
                const char *head = arena + (size_t)((k * 167) % nh) * HEAD_BYTES;
                int dims[D], chosen[D] = {0};
                for (int d = 0; d < D; d++) dims[d] = d;
                for (int t = 0; t < R; t++) { /* r distinct dims, then ascending, a random sign each */
                    int j = t + rand() % (D - t), x = dims[t];
                    dims[t] = dims[j];
                    dims[j] = x;
                    chosen[dims[t]] = 1;
                }
                const char *rowp[R];
                for (int d = 0, t = 0; d < D; d++)
                    if (chosen[d]) rowp[t++] = head + ((size_t)(rand() & 1) * D + d) * ROW_BYTES;
                uint64_t c = __rdtsc();
                sink += read_head(mode, head, rowp);
                c = __rdtsc() - c;
                if (round) samples[mode][ns[mode]++] = c;
            }
        }
    printf("one head's %d summary lines (%d rows x 16), cold, one core; TSC %.2f GHz; medians of %d heads\n",
           R * 16, R, tsc_ghz, ns[0]);
    for (int mode = 0; mode < 4; mode++) {
        qsort(samples[mode], ns[mode], sizeof(uint64_t), cmp_u64);
        uint64_t med = samples[mode][ns[mode] / 2];
        printf("  %-10s %6llu cycles (p25 %llu, p75 %llu)  %.2f us  %.1f GB/s\n", names[mode],
               (unsigned long long)med, (unsigned long long)samples[mode][ns[mode] / 4],
               (unsigned long long)samples[mode][3 * ns[mode] / 4], med / tsc_ghz / 1e3,
               R * 16 * 64.0 / (med / tsc_ghz));
    }
    double best = 0;
    for (int rep = 0; rep < 5; rep++) {
        double t = now_s();
        sink += read_all(ev, evn);
        t = now_s() - t;
        if (evn / t / 1e9 > best) best = evn / t / 1e9;
    }
    printf("one core's sequential read of 512 MiB: %.1f GB/s (best of 5)%s\n", best, sink == 1.5f ? " " : "");
    return 0;
}
