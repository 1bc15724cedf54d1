/* select_vs_attend.c - a RocketKV select (page scores + top-k) against the
 * attend it feeds (exact attention over the chosen slots), both with the
 * library's fast kernels, warm and cold. A standalone microbenchmark (not
 * part of the build or the tests) behind the selection-share analysis in
 * docs/PERFORMANCE-LOG.md ("A Xeon with AMX, 2026-12-04").
 *
 * The issue asks that the page scores + top-k take <= 35% of RocketKV's
 * attention time (which also holds the attend, the upkeep of the page
 * summaries and the bookkeeping). This program asks how far the two kernels
 * alone are from that: per KV head it times kernels_get()'s hybrid_scores +
 * topk_pages (RocketKV at 8K, B = 256 on the default model: 1448 kept f16
 * keys, pages of 3, r = 33 of D = 64 dims, G = 3 query heads, k = 128
 * slots) and then attn_gather over the chosen slots, with the TSC.
 *
 * State: L layers x 3 KV heads of random keys and their page summaries
 * (hyb_state.h, shared with select_cold.c). One round
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
#include "scripts/microbench/hyb_state.h"

int main(int argc, char **argv) {
    const int n = 1448, G = 3, D = 64, H = 3, p = 3, r = 33, k = 128;
    int L = argc > 1 ? atoi(argv[1]) : 30, wmb = argc > 2 ? atoi(argv[2]) : 96;
    int rounds = argc > 3 ? atoi(argv[3]) : 30;
    if (L < 1 || L > 1000 || wmb < 0 || wmb > 4096 || rounds < 1 || rounds > 100000) {
        fprintf(stderr, "usage: select_vs_attend [L (1-1000) W_MB (0-4096) rounds (1-100000)]\n");
        return 2;
    }
    const kb_kernels *kk = kernels_get();
    hyb_bench hb;
    hyb_bench_init(&hb, L, H, n, G, D, p, wmb, kk);
    const int nh = hb.nh;
    kb_kvstream *s = hb.s;
    kb_pages *pg = hb.pg;
    float *q = hb.q, *ps = hb.ps;
    float out[3 * 64];
    int32_t dims[64], *idx = malloc((size_t)nh * k * sizeof *idx);
    int *cnt = malloc((size_t)nh * sizeof *cnt);
    double *ts = malloc((size_t)rounds * sizeof *ts), *ta = malloc((size_t)rounds * sizeof *ta);
    const float scale = 1.0f / sqrtf((float)D);
    for (int R = 0; R < rounds; R++) {
        unsigned long long sel = 0, att = 0;
        for (int l = 0; l < L; l++) {
            hyb_layer_start(&hb, l);
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
    int never = hyb_bench_done(&hb); /* the weights' sum, printed as nothing */
    printf("L %d, W %d MB, %d rounds: TSC cycles per KV head (medians): select %.0f, attend %.0f; "
           "select / (select + attend) %.1f%%%s\n",
           L, wmb, rounds, ms, ma, 100 * ms / (ms + ma), never ? " " : "");
    free(idx), free(cnt), free(ts), free(ta);
    return 0;
}
