/* select_vs_attend.c - a RocketKV select (page scores + top-k) against the
 * attend it feeds (exact attention over the chosen slots), both with the
 * library's fast kernels, warm and cold. A standalone microbenchmark (not
 * part of the build or the tests) behind the selection-share analysis in
 * docs/PERFORMANCE.md ("A Xeon with AMX, 2026-12-04").
 *
 * The issue asks that the page scores + top-k take <= 35% of RocketKV's
 * attention time (which also holds the attend, the upkeep of the page
 * summaries and the bookkeeping). This program asks how far the two kernels
 * alone are from that: per KV head it times kernels_get()'s hybrid_scores +
 * topk_pages (RocketKV at 8K, B = 256 on the default model: 1448 kept f16
 * keys, pages of 3, r = 33 of D = 64 dims, G = 3 query heads, k = 128
 * slots) and then attn_gather over the chosen slots, with the TSC.
 *
 * State: L layers x 3 KV heads of random keys (a per-dim bias so that some
 * dims stand out, as in select_cold.c) and their page summaries. One round
 * visits every layer: it reads that layer's slice of a W MB buffer (as a
 * decode token reads its weights; W = 0: nothing evicts anything), nudges
 * the layer's queries, runs the layer's three selects and then its three
 * attends (the order mc_select_attend's job mostly runs them in). Prints
 * the medians over the rounds of TSC cycles per KV head and the select's
 * share of select + attend.
 *
 *   cc -std=c11 -O2 -march=native -fopenmp -D_GNU_SOURCE -I. \
 *     scripts/microbench/select_vs_attend.c build/libkvbench.a \
 *     -lopenblas -lcjson -lcsv -lm -lpthread -o build/select_vs_attend
 *   build/select_vs_attend [L W rounds]     defaults 30 96 30 (cold);
 *   build/select_vs_attend 1 0 200          one layer repeated: everything in L1/L2
 */
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "kernels/kernels.h"
#include "kernels/kvstream.h"
#include "kernels/select.h"

static unsigned rng = 12345;
static float nrand(void) { /* sum of 12 uniforms - 6: mean 0, variance 1 */
    double u = 0;
    for (int i = 0; i < 12; i++) {
        rng = rng * 1103515245u + 12345u;
        u += ((rng >> 8) & 0xffffff) / 16777216.0;
    }
    return (float)(u - 6);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return x[n / 2];
}

int main(int argc, char **argv) {
    const int n = 1448, G = 3, D = 64, H = 3, p = 3, r = 33, k = 128;
    int L = argc > 1 ? atoi(argv[1]) : 30, wmb = argc > 2 ? atoi(argv[2]) : 96;
    int rounds = argc > 3 ? atoi(argv[3]) : 30;
    if (L < 1 || L > 1000 || wmb < 0 || wmb > 4096 || rounds < 1 || rounds > 100000) {
        fprintf(stderr, "usage: select_vs_attend [L (1-1000) W_MB (0-4096) rounds (1-100000)]\n");
        return 2;
    }
    const kb_kernels *kk = kernels_get();
    int nh = L * H, np = (n + p - 1) / p;
    kb_kvstream *s = calloc((size_t)nh, sizeof *s);
    kb_pages *pg = calloc((size_t)nh, sizeof *pg);
    float bias[64], kr[64], vr[64];
    for (int d = 0; d < D; d++) bias[d] = 2 * nrand();
    for (int i = 0; i < nh; i++) {
        kvstream_init(&s[i], KB_F16, D, n);
        for (int j = 0; j < n; j++) {
            for (int d = 0; d < D; d++) {
                kr[d] = nrand() + bias[d];
                vr[d] = nrand();
            }
            kvstream_append_f32(&s[i], kr, vr, j);
        }
        pages_init(&pg[i], p, D);
        pages_sync(&pg[i], &s[i], kk);
    }
    float *q = malloc((size_t)nh * G * D * sizeof *q), *ps = malloc((size_t)np * sizeof *ps);
    for (size_t i = 0; i < (size_t)nh * G * D; i++) q[i] = nrand() * (1 + fabsf(bias[i % D]));
    float out[3 * 64];
    int32_t dims[64], *idx = malloc((size_t)nh * k * sizeof *idx);
    int *cnt = malloc((size_t)nh * sizeof *cnt);
    size_t wn = ((size_t)wmb << 20) / sizeof(__m256), wl = wn / (size_t)L;
    __m256 *w = aligned_alloc(32, (wn + 1) * sizeof *w), sink = _mm256_setzero_ps();
    memset(w, 1, (wn + 1) * sizeof *w);
    double *ts = malloc((size_t)rounds * sizeof *ts), *ta = malloc((size_t)rounds * sizeof *ta);
    const float scale = 1.0f / sqrtf((float)D);
    for (int R = 0; R < rounds; R++) {
        unsigned long long sel = 0, att = 0;
        for (int l = 0; l < L; l++) {
            for (size_t j = (size_t)l * wl; j < (size_t)(l + 1) * wl; j++) sink = _mm256_add_ps(sink, w[j]);
            for (int u = 0; u < H * G * D; u++) q[(size_t)l * H * G * D + u] *= 1.0000001f;
            for (int h = 0; h < H; h++) {
                int i = l * H + h;
                unsigned long long t0 = __rdtsc();
                kk->hybrid_scores(q + (size_t)i * G * D, G, D, r, pg[i].kmax, pg[i].kmin, pg[i].cap, &s[i], n, p,
                                  ps, NULL, dims);
                cnt[i] = kk->topk_pages(ps, n, p, k, idx + (size_t)i * k);
                sel += __rdtsc() - t0;
            }
            for (int h = 0; h < H; h++) {
                int i = l * H + h;
                unsigned long long t0 = __rdtsc();
                kk->attn_gather(q + (size_t)i * G * D, G, &s[i], idx + (size_t)i * k, cnt[i], scale, out);
                att += __rdtsc() - t0;
            }
        }
        ts[R] = (double)sel / nh;
        ta[R] = (double)att / nh;
    }
    double ms = median(ts, rounds), ma = median(ta, rounds);
    float sk[8]; /* the weights' sum, printed as nothing, so that the reads are not dropped */
    _mm256_storeu_ps(sk, sink);
    printf("L %d, W %d MB, %d rounds: TSC cycles per KV head (medians): select %.0f, attend %.0f; "
           "select / (select + attend) %.1f%%%s\n",
           L, wmb, rounds, ms, ma, 100 * ms / (ms + ma), sk[0] == 12345.0f ? " " : "");
    for (int i = 0; i < nh; i++) {
        kvstream_free(&s[i]);
        pages_free(&pg[i]);
    }
    free(s), free(pg), free(q), free(ps), free(idx), free(cnt), free(w), free(ts), free(ta);
    return 0;
}
