/* test_attn_avx2.c - the AVX2+FMA+F16C decode attention of
 * kernels/cpu/attn_cpu.c (the blocked kernels a machine without AVX-512
 * runs), compiled here under other names with the AVX-512 macros hidden, so
 * that it is tested on AVX-512 machines too. <immintrin.h> comes first, with
 * the real macros, so that its declarations exist; attn_cpu.c (and simd.h,
 * first included through it) then see only __AVX2__/__FMA__/__F16C__.
 * (Built with the project's -march=native: on a machine without AVX2 this
 * tests the portable path against itself and the reference.)
 *
 * Two kinds of check:
 * - every check of test_attn.c (included below, its calls renamed to the
 *   AVX2 functions): against the plain references (kernels/ref), with its
 *   tolerances and reasons; then here, with the same tolerances, the shapes
 *   test_attn.c leaves out (D = 32 / 80 / 256 and G = 2 / 5 / 6 / 8: the
 *   run-time G and D of the blocked kernel);
 * - the promises in attn_cpu.c that the blocked AVX2 kernels give the scores
 *   of the portable row-at-a-time path (rows_plain) bit for bit (qk_scores,
 *   hence the top-k selections, unchanged; NaN and inf included; equal K rows
 *   in every position of a block give equal scores: ties stay ties) and its
 *   softmax to rounding: the same running max, and l, acc within the
 *   rounding of the weights' exp and rescales (see same_as_plain). */
#include "hide_avx512.h"
#define kb_cpu_attn_dense kb_cpu_attn_dense_avx2
#define kb_cpu_attn_dense_heads kb_cpu_attn_dense_heads_avx2
#define kb_cpu_attn_gather_rows kb_cpu_attn_gather_rows_avx2
#define kb_cpu_qk_scores kb_cpu_qk_scores_avx2
#define kb_cpu_attn_causal kb_cpu_attn_causal_avx2
#include "kernels/cpu/attn_cpu.c"

#define main test_attn_main
#include "test_attn.c"
#undef main

/* Chunk [j0, j1) (rows through idx when given) by rows_run and by
 * rows_plain: the same bits in the scores and in the running max m; l and acc
 * within 2e-6 l (the weights come from simd_exp256 in the blocked path and
 * simd_exp1 in rows_plain, which differ in the last bits: simd_exp1 is built
 * without FMA contraction under -std=c11; the blocked path rescales once per
 * block by exp(m - M) where rows_plain rescales at each new max, a product of
 * a few factors each within ~2 ulp; l's weights are summed in another order.
 * Each weight ends within a few ulp, and sum |w v| <= l, so the two
 * accumulations differ by a few ulp of l, while a wrong row, weight or
 * rescale moves them by 1e-3 l and more: dropping the acc rescale or a lane
 * mask of the l sum fails hundreds of checks). */
static int same_as_plain(int G, const float *qs, const kb_kvstream *s, const int32_t *idx, int j0, int j1) {
    int D = s->D, ok = 1;
    size_t np = (size_t)G * (D + 2);
    float *p1 = malloc(np * 4), *p2 = malloc(np * 4);
    for (int t = 0; t < 2; t++) {
        float *p = t ? p2 : p1;
        for (int g = 0; g < G; g++) {
            p[g] = -INFINITY;
            p[G + g] = 0;
        }
        memset(p + 2 * G, 0, (size_t)G * D * 4);
        dec_part part = {p, p + G, p + 2 * G};
        if (t) rows_plain(G, qs, s, idx, j0, j1, &part, NULL, 0);
        else rows_run(G, qs, s, idx, j0, j1, &part, NULL, 0);
    }
    ok &= memcmp(p1, p2, (size_t)G * 4) == 0;
    for (int g = 0; g < G; g++) {
        double l = p2[G + g], tol = 2e-6 * fabs(l);
        int fin = isfinite(l);
        ok &= fin ? fabs(p1[G + g] - l) <= tol : memcmp(&p1[G + g], &p2[G + g], 4) == 0;
        for (int d = 0; d < D; d++) {
            float a = p1[2 * G + g * D + d], b = p2[2 * G + g * D + d];
            ok &= (fin && isfinite(b)) ? fabs((double)a - b) <= tol : (isnan(a) == isnan(b) && (isnan(a) || a == b));
        }
    }
    int ldo = j1 + 3;
    float *s1 = calloc((size_t)G * ldo, 4), *s2 = calloc((size_t)G * ldo, 4);
    rows_run(G, qs, s, idx, j0, j1, NULL, s1, ldo);
    rows_plain(G, qs, s, idx, j0, j1, NULL, s2, ldo);
    ok &= memcmp(s1, s2, (size_t)G * ldo * 4) == 0;
    free(p1);
    free(p2);
    free(s1);
    free(s2);
    return ok;
}

int main(void) {
    test_attn_main();
    const kb_dtype types[3] = {KB_F16, KB_F32, KB_BF16};
    /* D = 64 / 128: the compile-time copies; 32, 80, 256: run-time DV (80:
     * odd DV, the narrower acc strips); G = 5, 6: run-time G */
    const int Ds[5] = {64, 128, 32, 80, 256}, Gs[7] = {1, 2, 3, 4, 8, 5, 6};
    const int ns[6] = {1, 15, 17, 256, 257, 1500};
    for (int ti = 0; ti < 3; ti++)
        for (int di = 0; di < 5; di++)
            for (int gi = 0; gi < 7; gi++)
                for (int ni = 0; ni < 6; ni++) {
                    int D = Ds[di], G = Gs[gi], n = ns[ni];
                    if (di >= 2 && ni >= 4 && gi != 2) continue; /* keep the run time short */
                    kb_kvstream s;
                    kvstream_init(&s, types[ti], D, n);
                    fill_stream(&s, n, 7u + (unsigned)(ni + 10 * gi), ni % 2 ? 4.0f : 0.5f);
                    unsigned seed = 99u + (unsigned)di;
                    float *q = malloc((size_t)G * D * 4), *a = malloc((size_t)G * D * 4),
                          *b = malloc((size_t)G * D * 4);
                    for (int i = 0; i < G * D; i++) q[i] = frand(&seed);
                    float scale = 1.0f / sqrtf((float)D);
                    /* the reference for the shapes test_attn.c leaves out */
                    int extra = di >= 2 || (G != 1 && G != 3 && G != 4);
                    float *sa = malloc((size_t)G * n * 4), *sb = malloc((size_t)G * n * 4);
                    if (extra) {
                        kb_ref_attn_dense(q, G, &s, n, scale, a);
                        kb_cpu_attn_dense_avx2(q, G, &s, n, scale, b);
                        int bad = 0;
                        double e = max_err(b, a, G * D, 2e-5, 1e-4, &bad);
                        CHECK_MSG(bad == 0, "attn_dense %s D=%d G=%d n=%d max err %g", kb_dtype_name(types[ti]), D, G,
                                  n, e);
                        kb_ref_qk_scores(q, 1, G, &s, n, scale, sa, n);
                        kb_cpu_qk_scores_avx2(q, 1, G, &s, n, scale, sb, n);
                        bad = 0;
                        e = max_err(sb, sa, G * n, 1e-4, 1e-5, &bad);
                        CHECK_MSG(bad == 0, "qk_scores %s D=%d G=%d n=%d err %g", kb_dtype_name(types[ti]), D, G, n, e);
                    }
                    /* one chunk's state, bit for bit as rows_plain (queries pre-scaled like dec_run) */
                    for (int i = 0; i < G * D; i++) q[i] *= scale;
                    CHECK_MSG(same_as_plain(G, q, &s, NULL, 0, KB_MIN(n, DEC_CHUNK)),
                              "dense chunk != rows_plain %s D=%d G=%d n=%d", kb_dtype_name(types[ti]), D, G, n);
                    if (n > 40)
                        CHECK_MSG(same_as_plain(G, q, &s, NULL, 7, KB_MIN(n, 7 + DEC_CHUNK)),
                                  "dense chunk at 7 != rows_plain %s D=%d G=%d", kb_dtype_name(types[ti]), D, G);
                    free(sa);
                    free(sb);
                    free(q);
                    free(a);
                    free(b);
                    kvstream_free(&s);
                }
    /* gathered rows (pages and scattered slots), 1 row to several chunks,
     * peaky and flat scores: against rows_plain (test_attn.c's loop checks
     * the same rows against the reference) */
    for (int ti = 0; ti < 3; ti++)
        for (int trial = 0; trial < 30; trial++) {
            int D = trial % 2 ? 128 : 64, G = (int[]){1, 2, 3, 4, 8}[trial % 5], n = 3000;
            const int ks[6] = {1, 15, 16, 17, 300, 700};
            int k = ks[trial % 6];
            kb_kvstream s;
            kvstream_init(&s, types[ti], D, n);
            fill_stream(&s, n, 11u + (unsigned)trial, trial % 3 ? 4.0f : 0.5f);
            int32_t *idx = malloc((size_t)k * sizeof(int32_t));
            unsigned seed = 17u + (unsigned)trial;
            for (int t = 0, j = 0; t < k; t++) {
                j += (t % 16 && trial % 2) ? 1 : 1 + (int)((frand(&seed) + 1.0f) * 2);
                idx[t] = j;
            }
            float *q = malloc((size_t)G * D * 4);
            for (int i = 0; i < G * D; i++) q[i] = frand(&seed);
            float scale = 1.0f / sqrtf((float)D);
            for (int i = 0; i < G * D; i++) q[i] *= scale;
            CHECK_MSG(same_as_plain(G, q, &s, idx, 0, KB_MIN(k, DEC_CHUNK)), "gathered chunk != rows_plain %s D=%d G=%d k=%d",
                      kb_dtype_name(types[ti]), D, G, k);
            free(idx);
            free(q);
            kvstream_free(&s);
        }
    /* ties and non-finite values: equal K rows at positions 0, 5, 15, 16,
     * 31, 40 (every place in a block, two blocks) give equal scores; rows
     * with inf / NaN keys (scores inf, -inf, NaN) and a V row with inf leave
     * the same bits as rows_plain */
    for (int ti = 0; ti < 3; ti++)
        for (int di = 0; di < 2; di++) {
            int D = di ? 128 : 64, G = 3, n = 300;
            kb_kvstream s;
            kvstream_init(&s, types[ti], D, n);
            float *k = malloc((size_t)D * 4), *v = malloc((size_t)D * 4), *k0 = malloc((size_t)D * 4);
            unsigned seed = 3u + (unsigned)di;
            for (int d = 0; d < D; d++) k0[d] = frand(&seed);
            for (int j = 0; j < n; j++) {
                for (int d = 0; d < D; d++) {
                    k[d] = frand(&seed);
                    v[d] = frand(&seed);
                }
                if (j == 0 || j == 5 || j == 15 || j == 16 || j == 31 || j == 40) memcpy(k, k0, (size_t)D * 4);
                kvstream_append_f32(&s, k, v, j);
            }
            float *q = malloc((size_t)G * D * 4);
            for (int i = 0; i < G * D; i++) q[i] = frand(&seed);
            float *sc = malloc((size_t)G * n * 4);
            kb_cpu_qk_scores_avx2(q, 1, G, &s, n, 0.125f, sc, n);
            int ties = 0;
            for (int g = 0; g < G; g++) {
                const float *x = sc + (size_t)g * n;
                ties += x[5] == x[0] && x[15] == x[0] && x[16] == x[0] && x[31] == x[0] && x[40] == x[0];
            }
            CHECK_MSG(ties == G, "tied rows not tied %s D=%d", kb_dtype_name(types[ti]), D);
            CHECK(same_as_plain(G, q, &s, NULL, 0, 256));
            /* non-finite: key rows 20 (+inf at d=3), 21 (-inf), 22 (NaN), 70 (+inf and -inf: NaN score) */
            size_t rb = (size_t)D * kb_dtype_size(types[ti]);
            float bad_vals[3] = {INFINITY, -INFINITY, NAN};
            for (int t = 0; t < 4; t++) {
                int row = t < 3 ? 20 + t : 70;
                float rowk[256], rowv[256];
                kvstream_get_f32(&s, row, rowk, rowv);
                if (t < 3) rowk[3] = bad_vals[t];
                else {
                    rowk[1] = INFINITY;
                    rowk[2] = -INFINITY;
                    rowv[0] = INFINITY;
                }
                kb_convert_from_f32(types[ti], rowk, (char *)s.K + (size_t)row * rb, (size_t)D);
                kb_convert_from_f32(types[ti], rowv, (char *)s.V + (size_t)row * rb, (size_t)D);
            }
            CHECK_MSG(same_as_plain(G, q, &s, NULL, 0, 256), "non-finite rows != rows_plain %s D=%d",
                      kb_dtype_name(types[ti]), D);
            CHECK_MSG(same_as_plain(G, q, &s, NULL, 16, 100), "non-finite rows at 16 != rows_plain %s D=%d",
                      kb_dtype_name(types[ti]), D);
            free(sc);
            free(q);
            free(k);
            free(v);
            free(k0);
            kvstream_free(&s);
        }
    return check_summary("test_attn_avx2");
}
