/* select_cold.c - one hybrid select (page scores, then the top-k of pages) as a
 * decode step meets it: its page summaries, scratch and code evicted by the
 * weights of a layer. A standalone A/B microbenchmark (not part of the build
 * or the tests) behind the selection numbers of docs/PERFORMANCE-LOG.md; build it
 * with select_cold.sh, which links two copies of a select_cpu.c (A and B,
 * their kb_cpu_* functions renamed) so that both run in one process.
 *
 * State: L layers x H KV heads of n f16 keys (random, with a per-dim bias so
 * that some dims stand out as in real keys), their page summaries (page
 * size p) built by the library's pages_sync, and G query heads per KV head.
 * One round runs every layer with A, then every layer with B; per layer it
 * reads a slice of a `weights` buffer (W MB over the L layers, as a decode
 * token reads its weights; 0 = the cache-resident case), then rewrites the
 * layer's q (just computed, as after the projections) and times, per KV
 * head, A's or B's kb_cpu_hybrid_scores (r dims) and kb_cpu_topk_pages
 * (k = 128 slots) with the TSC. Prints the medians over the rounds of TSC
 * cycles per select for each part, the median of B's / A's ratio within a
 * round, and how many chosen slots differ between A and B (must be 0 when
 * both promise the same selections).
 *
 *   scripts/microbench/select_cold.sh OLD.c NEW.c      (builds build/select_cold)
 *   build/select_cold [n G D H L rounds W p r]
 *   defaults: 1448 3 64 3 30 30 96 3 33: RocketKV on the default model at 8K, B = 256
 *   (T = 1448 kept tokens, 483 pages, 33 dims, 30 layers x 3 KV heads, 96 MB of weights)
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <immintrin.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "kernels/kernels.h"
#include "kernels/kvstream.h"
#include "kernels/select.h"
#include "scripts/microbench/hyb_state.h"

#define HS_ARGS                                                                                    \
    const float *q, int G, int D, int r, const void *kmax, const void *kmin, int ldk,              \
        const kb_kvstream *s, int n, int p, float *ps, float *hw, int32_t *dims
void A_hybrid_scores(HS_ARGS);
void B_hybrid_scores(HS_ARGS);
int A_topk_pages(const float *ps, int n, int p, int k, int32_t *idx);
int B_topk_pages(const float *ps, int n, int p, int k, int32_t *idx);

static int arg(int argc, char **argv, int i, int def) { return argc > i ? atoi(argv[i]) : def; }

int main(int argc, char **argv) {
    int n = arg(argc, argv, 1, 1448), G = arg(argc, argv, 2, 3), D = arg(argc, argv, 3, 64);
    int H = arg(argc, argv, 4, 3), L = arg(argc, argv, 5, 30), rounds = arg(argc, argv, 6, 30);
    int wmb = arg(argc, argv, 7, 96), p = arg(argc, argv, 8, 3), r = arg(argc, argv, 9, 33), k = 128;
    if (n < 1 || G < 1 || G > 8 || D < 1 || D > 256 || H < 1 || L < 1 || rounds < 1 || rounds > 1000 ||
        wmb < 0 || p < 1 || r < 1 || r > D) {
        fprintf(stderr, "select_cold: bad arguments (see the header comment)\n");
        return 2;
    }
    const kb_kernels *kk = kernels_get();
    hyb_bench hb;
    hyb_bench_init(&hb, L, H, n, G, D, p, wmb, kk);
    const int nh = hb.nh;
    kb_kvstream *s = hb.s;
    kb_pages *pg = hb.pg;
    float *q = hb.q, *ps = hb.ps;
    int32_t dims[256], *ia = malloc((size_t)k * sizeof *ia), *ib = malloc((size_t)k * sizeof *ib);
    double *t[4], *ratio = malloc((size_t)rounds * sizeof *ratio);
    for (int j = 0; j < 4; j++) t[j] = malloc((size_t)rounds * sizeof *t[j]);
    for (int R = 0; R < rounds; R++) {
        for (int b = 0; b < 2; b++) {
            unsigned long long ts = 0, tk = 0;
            for (int l = 0; l < L; l++) {
                hyb_layer_start(&hb, l);
                for (int h = 0; h < H; h++) {
                    int i = l * H + h;
                    const float *qi = q + (size_t)i * G * D;
                    unsigned long long t0 = __rdtsc();
                    (b ? B_hybrid_scores : A_hybrid_scores)(qi, G, D, r, pg[i].kmax, pg[i].kmin, pg[i].cap,
                                                            &s[i], n, p, ps, NULL, dims);
                    unsigned long long t1 = __rdtsc();
                    (b ? B_topk_pages : A_topk_pages)(ps, n, p, k, ia);
                    ts += t1 - t0;
                    tk += __rdtsc() - t1;
                }
            }
            t[2 * b][R] = (double)ts / nh;
            t[2 * b + 1][R] = (double)tk / nh;
        }
        ratio[R] = (t[2][R] + t[3][R]) / (t[0][R] + t[1][R]);
    }
    long diff = 0; /* the same selections? */
    for (int i = 0; i < nh; i++) {
        const float *qi = q + (size_t)i * G * D;
        int ca, cb;
        A_hybrid_scores(qi, G, D, r, pg[i].kmax, pg[i].kmin, pg[i].cap, &s[i], n, p, ps, NULL, dims);
        ca = A_topk_pages(ps, n, p, k, ia);
        B_hybrid_scores(qi, G, D, r, pg[i].kmax, pg[i].kmin, pg[i].cap, &s[i], n, p, ps, NULL, dims);
        cb = B_topk_pages(ps, n, p, k, ib);
        diff += ca != cb;
        for (int j = 0; j < ca && j < cb; j++) diff += ia[j] != ib[j];
    }
    int never = hyb_bench_done(&hb); /* the weights' sum, printed as nothing */
    printf("TSC cycles per select (median of %d rounds): A scores %.0f top-k %.0f | B scores %.0f top-k %.0f | "
           "B/A %.3f | slots differing %ld%s\n",
           rounds, median(t[0], rounds), median(t[1], rounds), median(t[2], rounds), median(t[3], rounds),
           median(ratio, rounds), diff, never ? " " : "");
    return diff ? 1 : 0;
}
