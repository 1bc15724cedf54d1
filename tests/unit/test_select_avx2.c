/* test_select_avx2.c - the AVX2+FMA+F16C code path of kernels/cpu/select_cpu.c
 * (the code a machine without AVX-512 runs), compiled here under other names
 * with the AVX-512 macros hidden, then put through every check of
 * test_select.c (against the references and the plain definitions there),
 * with a kernel table of the AVX2 functions standing in for kb_kernels_cpu
 * (test_select.c builds its page summaries with it).
 *
 * Then the values the AVX2 path promises, bit for bit, against arithmetic
 * written out here: each page score is an FMA chain over the chosen dims in
 * ascending order (the AVX-512 path's lane arithmetic), the softmax divides
 * by tau, subtracts the max, takes the exp of simd_exp256/simd_exp512
 * (written out here with fmaf) and sums in double in eight lanes, as the
 * AVX-512 path sums in sixteen (written out below), the group score is the heads' weights
 * summed from 0 in head order times 1/G; QUEST's bound is the ascending sum
 * of max(q a, q b) in f32. Tolerance 0 there: these are the orders of
 * operations the comments of select_cpu.c promise, and an equal order gives
 * equal pages equal scores, which the top-k's tie rule relies on.
 *
 * <immintrin.h> comes first, with the real macros, so that its AVX-512
 * declarations exist; select_cpu.c then sees only __AVX2__/__FMA__/__F16C__.
 * (Built with the project's -march=native: on a machine without AVX2 this is
 * the scalar test again, and the bit-for-bit checks are skipped.) */
#include "hide_avx512.h"
#define kb_cpu_topk kb_cpu_topk_avx2
#define kb_cpu_topk_pages kb_cpu_topk_pages_avx2
#define kb_cpu_attn_gather kb_cpu_attn_gather_avx2
#define kb_cpu_snapkv_scores kb_cpu_snapkv_scores_avx2
#define kb_cpu_pool1d kb_cpu_pool1d_avx2
#define kb_cpu_page_minmax kb_cpu_page_minmax_avx2
#define kb_cpu_quest_scores kb_cpu_quest_scores_avx2
#define kb_cpu_hybrid_scores kb_cpu_hybrid_scores_avx2
#define kb_kernels_cpu kb_kernels_cpu_avx2
#include "kernels/cpu/select_cpu.c"

const kb_kernels kb_kernels_cpu_avx2 = {
    .name = "cpu_avx2",
    .attn_gather = kb_cpu_attn_gather,
    .snapkv_scores = kb_cpu_snapkv_scores,
    .pool1d = kb_cpu_pool1d,
    .page_minmax = kb_cpu_page_minmax,
    .quest_scores = kb_cpu_quest_scores,
    .hybrid_scores = kb_cpu_hybrid_scores,
    .topk = kb_cpu_topk,
    .topk_pages = kb_cpu_topk_pages,
};

#define main test_select_main
#include "test_select.c"
#undef main

#if SEL_AVX2
static int same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* The exp of simd_exp256 / simd_exp512 (simd.h) written out for one lane,
 * with their FMAs as fmaf (simd_exp1 rounds each product apart). */
static float exp_fma(float v) {
    if (!(v > -87.33f)) return 0.0f;
    v = v < 88.7f ? v : 88.7f;
    float nn = nearbyintf(v * 1.44269504088896341f);
    float r = fmaf(-nn, 0.693145751953125f, v);
    r = fmaf(-nn, 1.428606765330187045e-06f, r);
    float e = 1.9875691500e-4f;
    e = fmaf(e, r, 1.3981999507e-3f);
    e = fmaf(e, r, 8.3334519073e-3f);
    e = fmaf(e, r, 4.1665795894e-2f);
    e = fmaf(e, r, 1.6666665459e-1f);
    e = fmaf(e, r, 5.0000001201e-1f);
    e = fmaf(e * r, r, r + 1.0f);
    uint32_t bits;
    memcpy(&bits, &e, 4);
    bits += (uint32_t)(int32_t)nn << 23;
    memcpy(&e, &bits, 4);
    return e;
}

/* kb_cpu_hybrid_scores against its promised arithmetic (header comment),
 * over the shapes of test_hybrid_scores plus long streams (several prefetch
 * distances, the p == 1 K copy) and every G of the compile-time instances. */
static void test_hybrid_exact(void) {
    for (int trial = 0; trial < 90; trial++) {
        int D = trial % 7 == 6 ? 40 : 16 * (1 + trial % 4), p = 1 + trial % 4, G = 1 + trial % 8;
        int n = trial % 10 == 3 ? 2500 + (int)(check_urand() * 3000) : 1 + (int)(check_urand() * 400);
        int r = 1 + (int)(check_urand() * D);
        kb_kvstream s;
        fill_stream(&s, n, D, trial % 3 == 0 ? KB_F32 : trial % 3 == 1 ? KB_F16 : KB_BF16);
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_ref); /* summaries from the reference */
        float *q = malloc((size_t)G * D * sizeof(float));
        for (int i = 0; i < G * D; i++) q[i] = nrand();
        if (trial % 9 == 4) /* duplicated pages: equal scores */
            for (int d = 0; d < D; d++) {
                float v = kb_elem_get(pg.kmax, pg.dt, (size_t)d * pg.cap);
                for (int P = 1; P < pages_count(&pg); P += 2) kb_elem_set(pg.kmax, pg.dt, (size_t)d * pg.cap + P, v);
                v = kb_elem_get(pg.kmin, pg.dt, (size_t)d * pg.cap);
                for (int P = 1; P < pages_count(&pg); P += 2) kb_elem_set(pg.kmin, pg.dt, (size_t)d * pg.cap + P, v);
            }
        int np = (n + p - 1) / p, last_cnt = n - (np - 1) * p;
        float *b = malloc((size_t)np * sizeof(float)), *wb = malloc((size_t)G * np * sizeof(float));
        float *want = calloc((size_t)np, sizeof(float)), *ww = malloc((size_t)G * np * sizeof(float));
        float *x = malloc((size_t)np * sizeof(float));
        int32_t dr[64], db[64];
        float *rw = malloc((size_t)np * sizeof(float));
        /* the chosen dims: the reference's (checked equal in test_select) */
        kb_ref_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, rw, NULL, dr);
        kb_cpu_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, b, wb, db);
        CHECK_MSG(same_idx(dr, r, db, r), "exact: dims D=%d r=%d", D, r);
        for (int g = 0; g < G; g++) {
            const float *qg = q + (size_t)g * D;
            for (int P = 0; P < np; P++) {
                float acc = 0;
                for (int t = 0; t < r; t++) {
                    int d = dr[t];
                    double sum = 0;
                    for (int h = 0; h < G; h++) sum += q[(size_t)h * D + d];
                    acc = fmaf(qg[d], kb_elem_get(sum > 0 ? pg.kmax : pg.kmin, pg.dt, (size_t)d * pg.cap + P), acc);
                }
                x[P] = acc;
            }
            float tau = kb_hybrid_temperature(qg, D, dr, r), mx = -INFINITY;
            for (int P = 0; P < np; P++) {
                x[P] /= tau;
                mx = x[P] > mx ? x[P] : mx;
            }
            double sum = 0;
            for (int P = 0; P < np; P++) x[P] = exp_fma(x[P] - mx);
            /* the AVX2 path's order: eight lanes over the whole vectors
             * below np - 1, (l0+l4 + l1+l5) + (l2+l6 + l3+l7), then the
             * rest in ascending P (sums of a few hundred floats in double
             * are exact unless their magnitudes spread over ~2^29, so
             * another order of addition rarely shows here) */
            double lane[8] = {0};
            int nb8 = (np - 1) / 8;
            for (int b8 = 0; b8 < nb8; b8++)
                for (int j = 0; j < 8; j++) lane[j] += x[8 * b8 + j];
            sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
            for (int P = nb8 * 8; P < np - 1; P++) sum += x[P];
            float inv = (float)(1.0 / (sum * p + (double)x[np - 1] * last_cnt));
            for (int P = 0; P < np; P++) ww[(size_t)g * np + P] = x[P] * inv;
        }
        for (int P = 0; P < np; P++) {
            float acc = 0;
            for (int g = 0; g < G; g++) acc += ww[(size_t)g * np + P];
            want[P] = acc * (1.0f / G);
        }
        int ok = 1, first = -1;
        for (int P = 0; P < np; P++) {
            int e = same_bits(b[P], want[P]);
            for (int g = 0; g < G; g++) e &= same_bits(wb[(size_t)g * np + P], ww[(size_t)g * np + P]);
            if (!e && first < 0) first = P;
            ok &= e;
        }
        CHECK_MSG(ok, "exact: hybrid scores G=%d D=%d p=%d n=%d r=%d dt=%d: page %d %.9g vs %.9g", G, D, p, n, r,
                  (int)pg.dt, first, first >= 0 ? b[first] : 0, first >= 0 ? want[first] : 0);
        if (trial % 9 == 4)
            for (int P = 1; P < np; P += 2) CHECK_MSG(b[P] == b[0], "exact: equal pages P=%d", P);
        free(q);
        free(b);
        free(wb);
        free(want);
        free(ww);
        free(x);
        free(rw);
        pages_free(&pg);
        kvstream_free(&s);
    }
}

static void test_quest_exact(void) {
    for (int trial = 0; trial < 30; trial++) {
        int D = 8 + 8 * (trial % 8), p = 1 + trial % 5, n = 1 + (int)(check_urand() * (trial % 4 ? 300 : 3000));
        kb_kvstream s;
        fill_stream(&s, n, D, trial % 3 == 0 ? KB_F32 : trial % 3 == 1 ? KB_F16 : KB_BF16);
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_ref);
        int np = pages_count(&pg);
        float q[64], *out = malloc((size_t)(np + 1) * sizeof(float));
        for (int d = 0; d < D; d++) q[d] = nrand();
        out[np] = 12345.0f; /* not written past npages */
        kb_cpu_quest_scores(q, D, pg.kmax, pg.kmin, pg.dt, pg.cap, np, out);
        int ok = 1;
        for (int P = 0; P < np; P++) {
            float acc = 0;
            for (int d = 0; d < D; d++) {
                float a = q[d] * kb_elem_get(pg.kmax, pg.dt, (size_t)d * pg.cap + P);
                float c = q[d] * kb_elem_get(pg.kmin, pg.dt, (size_t)d * pg.cap + P);
                acc += a > c ? a : c;
            }
            ok &= same_bits(out[P], acc);
        }
        CHECK_MSG(ok && out[np] == 12345.0f, "exact: quest D=%d p=%d n=%d", D, p, n);
        free(out);
        pages_free(&pg);
        kvstream_free(&s);
    }
}
#endif

/* The top-k writes exactly k indices: nothing past them (the AVX2 path
 * writes the winners lane by lane, never a whole vector into idx). */
static void test_topk_bounds(void) {
    static float x[5000];
    static int32_t idx[5001];
    for (int trial = 0; trial < 40; trial++) {
        int n = 1 + (int)(check_urand() * 4999), k = 1 + (int)(check_urand() * n);
        if (trial % 2) k = 1 + (int)(check_urand() * (n / 8 + 1));
        for (int i = 0; i < n; i++) x[i] = trial % 3 ? nrand() : (float)(int)(check_urand() * 4);
        if (k > n) k = n;
        idx[k] = -7;
        int c = kb_cpu_topk(x, n, k, idx);
        CHECK_MSG(c == k && idx[k] == -7, "topk bounds n=%d k=%d", n, k);
    }
}

int main(void) {
    test_select_main();
#if SEL_AVX2
    test_hybrid_exact();
    test_quest_exact();
#endif
    test_topk_bounds();
    return check_summary("select_avx2");
}
