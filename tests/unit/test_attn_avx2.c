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
 * - against the plain references (kernels/ref: double accumulation), with
 *   test_attn.c's tolerances and reasons: attention |fast - ref| <= 2e-5 +
 *   1e-4 |ref| (convex combinations of |v| <= 1 accumulated in f32, a
 *   polynomial exp of relative error < 2e-7; indexing, masking or rescaling
 *   mistakes give errors of 1e-2 and up), scores <= 1e-4 + 1e-5 |ref| (f32
 *   dots of 64-128 terms of size <= 4);
 * - the promises in attn_cpu.c that the blocked AVX2 kernels give the scores
 *   of the portable row-at-a-time path (rows_plain) bit for bit (qk_scores,
 *   hence the top-k selections, unchanged; NaN and inf included; equal K rows
 *   in every position of a block give equal scores: ties stay ties) and its
 *   online softmax step for step: the same running max, and l, acc within
 *   the rounding of the weights' exp (see same_as_plain). */
#include <immintrin.h>
#undef __AVX512F__
#undef __AVX512BW__
#undef __AVX512VL__
#undef __AVX512DQ__
#undef __AVX512CD__
#undef __AVX512VNNI__
#define kb_cpu_attn_dense kb_cpu_attn_dense_avx2
#define kb_cpu_attn_dense_heads kb_cpu_attn_dense_heads_avx2
#define kb_cpu_attn_gather_rows kb_cpu_attn_gather_rows_avx2
#define kb_cpu_qk_scores kb_cpu_qk_scores_avx2
#define kb_cpu_attn_causal kb_cpu_attn_causal_avx2
#include "kernels/cpu/attn_cpu.c"

#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/select.h"

static float frand(unsigned *s) {
    *s = *s * 1103515245u + 12345u;
    return (float)((*s >> 8) & 0xffff) / 32768.0f - 1.0f;
}

static void fill_stream(kb_kvstream *s, int n, unsigned seed, float kscale) {
    float *k = malloc((size_t)s->D * 4), *v = malloc((size_t)s->D * 4);
    for (int j = 0; j < n; j++) {
        for (int d = 0; d < s->D; d++) {
            k[d] = frand(&seed) * kscale;
            v[d] = frand(&seed);
        }
        kvstream_append_f32(s, k, v, j);
    }
    free(k);
    free(v);
}

static int count_bad(const float *a, const float *ref, size_t n, double atol, double rtol, double *worst) {
    int bad = 0;
    for (size_t i = 0; i < n; i++) {
        double e = fabs((double)a[i] - ref[i]);
        if (!(e <= atol + rtol * fabs(ref[i]))) bad++;
        if (e > *worst) *worst = e;
    }
    return bad;
}

/* Chunk [j0, j1) (rows through idx when given) by rows_run and by
 * rows_plain: the same bits in the scores and in the running max m; l and acc
 * within 2e-6 l (the weights come from simd_exp256 in the blocked path and
 * simd_exp1 in rows_plain, which differ in the last bits: simd_exp1 is built
 * without FMA contraction under -std=c11; each weight within ~2 ulp, and
 * sum |w v| <= l, so the two accumulations differ by a few ulp of l, while a
 * wrong row, weight or rescale moves them by 1e-3 l and more). */
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
                    kb_ref_attn_dense(q, G, &s, n, scale, a);
                    kb_cpu_attn_dense_avx2(q, G, &s, n, scale, b);
                    double e = 0;
                    int bad = count_bad(b, a, (size_t)G * D, 2e-5, 1e-4, &e);
                    CHECK_MSG(bad == 0, "attn_dense %s D=%d G=%d n=%d max err %g", kb_dtype_name(types[ti]), D, G,
                              n, e);
                    float *sa = malloc((size_t)G * n * 4), *sb = malloc((size_t)G * n * 4);
                    kb_ref_qk_scores(q, 1, G, &s, n, scale, sa, n);
                    kb_cpu_qk_scores_avx2(q, 1, G, &s, n, scale, sb, n);
                    e = 0;
                    bad = count_bad(sb, sa, (size_t)G * n, 1e-4, 1e-5, &e);
                    CHECK_MSG(bad == 0, "qk_scores %s D=%d G=%d n=%d err %g", kb_dtype_name(types[ti]), D, G, n, e);
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
    /* several KV heads in one call (pool tasks of several chunks, prefetch
     * across chunk ends) and qk_scores over them, rows ldo apart; the scaled
     * scores exactly the f32 product of the unscaled ones and the scale */
    for (int ti = 0; ti < 3; ti++)
        for (int di = 0; di < 2; di++) {
            int H = 3, G = di ? 4 : 3, D = di ? 128 : 64;
            int ns2[3] = {6000, 4097, 2049};
            kb_kvstream hs[3];
            for (int h = 0; h < H; h++) {
                kvstream_init(&hs[h], types[ti], D, ns2[h]);
                fill_stream(&hs[h], ns2[h], 31u + (unsigned)h, h == 1 ? 4.0f : 0.5f);
            }
            unsigned seed = 5;
            size_t nq = (size_t)H * G * D;
            float *q = malloc(nq * 4), *a = malloc(nq * 4), *b = malloc(nq * 4);
            for (size_t i = 0; i < nq; i++) q[i] = frand(&seed);
            for (int h = 0; h < H; h++)
                kb_ref_attn_dense(q + (size_t)h * G * D, G, &hs[h], ns2[h], 0.125f, a + (size_t)h * G * D);
            kb_cpu_attn_dense_heads_avx2(q, H, G, hs, 0.125f, b);
            double e = 0;
            int bad = count_bad(b, a, nq, 2e-5, 1e-4, &e);
            CHECK_MSG(bad == 0, "attn_dense_heads %s D=%d max err %g", kb_dtype_name(types[ti]), D, e);
            int n = 2049, ldo = 2049 + 7;
            size_t tot = (size_t)H * G * ldo;
            float *sa = malloc(tot * 4), *sb = malloc(tot * 4), *su = malloc(tot * 4);
            for (size_t i = 0; i < tot; i++) sa[i] = sb[i] = su[i] = 42.0f;
            kb_ref_qk_scores(q, H, G, hs, n, 0.125f, sa, ldo);
            kb_cpu_qk_scores_avx2(q, H, G, hs, n, 0.125f, sb, ldo);
            kb_cpu_qk_scores_avx2(q, H, G, hs, n, 1.0f, su, ldo);
            int pad_ok = 1, exact = 0;
            bad = 0;
            e = 0;
            for (int r = 0; r < H * G; r++) {
                bad += count_bad(sb + (size_t)r * ldo, sa + (size_t)r * ldo, (size_t)n, 1e-4, 1e-5, &e);
                for (int j = 0; j < n; j++) exact += sb[(size_t)r * ldo + j] == su[(size_t)r * ldo + j] * 0.125f;
                for (int j = n; j < ldo; j++) pad_ok &= sb[(size_t)r * ldo + j] == 42.0f;
            }
            CHECK_MSG(bad == 0, "qk_scores H=%d %s D=%d err %g", H, kb_dtype_name(types[ti]), D, e);
            CHECK_EQ_INT(exact, H * G * n);
            CHECK(pad_ok);
            free(sa);
            free(sb);
            free(su);
            free(q);
            free(a);
            free(b);
            for (int h = 0; h < H; h++) kvstream_free(&hs[h]);
        }
    /* gathered rows (pages and scattered slots), 1 row to several chunks,
     * peaky and flat scores: against the reference and rows_plain */
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
            float *q = malloc((size_t)G * D * 4), *a = malloc((size_t)G * D * 4), *b = malloc((size_t)G * D * 4);
            for (int i = 0; i < G * D; i++) q[i] = frand(&seed);
            float scale = 1.0f / sqrtf((float)D);
            kb_ref_attn_gather(q, G, &s, idx, k, scale, a);
            kb_cpu_attn_gather_rows_avx2(q, G, &s, idx, k, scale, b);
            double e = 0;
            int bad = count_bad(b, a, (size_t)G * D, 2e-5, 1e-4, &e);
            CHECK_MSG(bad == 0, "attn_gather_rows %s D=%d G=%d k=%d max err %g", kb_dtype_name(types[ti]), D, G, k,
                      e);
            for (int i = 0; i < G * D; i++) q[i] *= scale;
            CHECK_MSG(same_as_plain(G, q, &s, idx, 0, KB_MIN(k, DEC_CHUNK)), "gathered chunk != rows_plain %s D=%d G=%d k=%d",
                      kb_dtype_name(types[ti]), D, G, k);
            free(idx);
            free(q);
            free(a);
            free(b);
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
