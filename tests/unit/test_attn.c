/* test_attn.c - fast dense/causal attention and the vector exp against the
 * plain references (kernels/ref/attn_ref.c, libm exp).
 * Tolerances: outputs are convex combinations of V rows with |v| <= 1; the
 * fast path accumulates in f32 over chunks (error ~ 1e-6 relative per add)
 * and uses a polynomial exp (< 2e-7 relative), so |fast - ref| <= 2e-5 + 1e-4|ref|
 * is loose enough for f32 rounding and tight enough to catch any indexing,
 * masking or rescaling mistake (those give errors of order 1e-2 and up). */
#include <stdlib.h>

#include "check.h"
#include "kernels/attn_impl.h"
#include "kernels/cpu/simd.h"
#include "kernels/select.h"

#ifndef TEST_NAME
#define TEST_NAME "test_attn"
#endif

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

/* (!(e <= tol), not e > tol: a NaN or inf output, which makes e NaN, is a
 * failure; the references give finite values for finite inputs) */
static double max_err(const float *a, const float *b, int n, double atol, double rtol, int *bad) {
    double worst = 0;
    for (int i = 0; i < n; i++) {
        double e = fabs((double)a[i] - b[i]);
        if (!(e <= atol + rtol * fabs(b[i]))) (*bad)++;
        if (!(e <= worst)) worst = e;
    }
    return worst;
}

/* A D x n stream of type t (fill_stream's seed and key scale) and G queries
 * from qseed: dense attention and the scores (scale 1/sqrt(D)), and with
 * gather the attention over every other row, against the reference.
 * Tolerances: attention as the header says; scores 1e-4 + 1e-5 |ref|, as the
 * checks of the scores had before this function held them. */
static void dense_vs_ref(kb_dtype t, int D, int G, int n, unsigned sseed, float kscale, unsigned qseed, int gather,
                         const char *what) {
    kb_kvstream s;
    kvstream_init(&s, t, D, n);
    fill_stream(&s, n, sseed, kscale);
    float *q = malloc((size_t)G * D * 4), *a = malloc((size_t)G * D * 4), *b = malloc((size_t)G * D * 4);
    for (int i = 0; i < G * D; i++) q[i] = frand(&qseed);
    float scale = 1.0f / sqrtf((float)D);
    kb_ref_attn_dense(q, G, &s, n, scale, a);
    kb_cpu_attn_dense(q, G, &s, n, scale, b);
    int bad = 0;
    double e = max_err(b, a, G * D, 2e-5, 1e-4, &bad);
    CHECK_MSG(bad == 0, "attn_dense%s %s D=%d G=%d n=%d max err %g", what, kb_dtype_name(t), D, G, n, e);
    float *sa = malloc((size_t)G * n * 4), *sb = malloc((size_t)G * n * 4);
    kb_ref_qk_scores(q, 1, G, &s, n, scale, sa, n);
    kb_cpu_qk_scores(q, 1, G, &s, n, scale, sb, n);
    bad = 0;
    e = max_err(sb, sa, G * n, 1e-4, 1e-5, &bad);
    CHECK_MSG(bad == 0, "qk_scores%s %s D=%d G=%d n=%d err %g", what, kb_dtype_name(t), D, G, n, e);
    if (gather) { /* every other row */
        int k = (n + 1) / 2;
        int32_t *idx = malloc((size_t)k * sizeof(int32_t));
        for (int r = 0; r < k; r++) idx[r] = 2 * r;
        kb_ref_attn_gather(q, G, &s, idx, k, scale, a);
        kb_cpu_attn_gather_rows(q, G, &s, idx, k, scale, b);
        bad = 0;
        e = max_err(b, a, G * D, 2e-5, 1e-4, &bad);
        CHECK_MSG(bad == 0, "attn_gather_rows%s %s D=%d G=%d k=%d max err %g", what, kb_dtype_name(t), D, G, k, e);
        free(idx);
    }
    free(sa);
    free(sb);
    free(q);
    free(a);
    free(b);
    kvstream_free(&s);
}

int main(void) {
    /* simd_exp vs libm over [-90, 88] */
    {
        int n = 20001, bad = 0;
        float *x = malloc((size_t)n * 4), *y = malloc((size_t)n * 4);
        for (int i = 0; i < n; i++) x[i] = y[i] = -90.0f + 178.0f * i / (n - 1);
        simd_exp_inplace(y, n);
        for (int i = 0; i < n; i++) {
            double want = x[i] <= -87.33f ? 0.0 : exp((double)x[i]);
            double rel = want ? fabs(y[i] - want) / want : fabs(y[i]);
            if (rel > 2e-7 && !(want < 1e-37)) bad++;
        }
        CHECK_EQ_INT(bad, 0);
        float m[3] = {-INFINITY, 0.0f, -1000.0f};
        simd_exp_inplace(m, 3);
        CHECK(m[0] == 0.0f && m[1] == 1.0f && m[2] == 0.0f);
        free(x);
        free(y);
    }
    const kb_dtype types[3] = {KB_F16, KB_F32, KB_BF16};
    /* D = 80 and G = 5 have no compile-time copy: the run-time path (rows_any) */
    const int Ds[3] = {64, 128, 80}, Gs[4] = {1, 3, 4, 5}, ns[7] = {1, 5, 255, 256, 257, 1500, 3001};
    for (int ti = 0; ti < 3; ti++)
        for (int di = 0; di < 3; di++)
            for (int gi = 0; gi < 4; gi++)
                for (int ni = 0; ni < 7; ni++) {
                    /* large key scale: peaky softmax, exercises the max/rescale logic */
                    dense_vs_ref(types[ti], Ds[di], Gs[gi], ns[ni], 7u + (unsigned)ni, ni % 2 ? 4.0f : 0.5f, 99, 0,
                                 "");
                }
    /* several KV heads in one call, long enough that a pool task runs several
     * consecutive chunks (dec_span) and rows are prefetched across chunk
     * ends: each head against the reference */
    for (int ti = 0; ti < 3; ti++)
        for (int di = 0; di < 2; di++) { /* SmolLM2's shape, then Llama-3.1-8B's */
            int H = 3, G = di ? 4 : 3, D = di ? 128 : 64;
            int ns2[3] = {6000, 4097, 2049};
            kb_kvstream hs[3];
            for (int h = 0; h < H; h++) {
                kvstream_init(&hs[h], types[ti], D, ns2[h]);
                fill_stream(&hs[h], ns2[h], 31u + (unsigned)h, h == 1 ? 4.0f : 0.5f);
            }
            unsigned seed = 5;
            float q[3 * 4 * 128], a[3 * 4 * 128], b[3 * 4 * 128];
            for (int i = 0; i < H * G * D; i++) q[i] = frand(&seed);
            for (int h = 0; h < H; h++) kb_ref_attn_dense(q + h * G * D, G, &hs[h], ns2[h], 0.125f, a + h * G * D);
            kb_cpu_attn_dense_heads(q, H, G, hs, 0.125f, b);
            int bad = 0;
            double e = max_err(b, a, H * G * D, 2e-5, 1e-4, &bad);
            CHECK_MSG(bad == 0, "attn_dense_heads %s D=%d max err %g", kb_dtype_name(types[ti]), D, e);
            /* scores of the three heads' first n rows in one call (one pool job
             * whose tasks cross head boundaries), rows ldo apart: against the
             * reference (tolerance as above), and the scaled scores exactly the
             * f32 product of the unscaled ones and the scale (what exact_topk
             * computed before the scale moved into the kernel) */
            {
                int n = 2049, ldo = 2049 + 7;
                size_t tot = (size_t)H * G * ldo;
                float *sa = malloc(tot * 4), *sb = malloc(tot * 4), *su = malloc(tot * 4);
                for (size_t i = 0; i < tot; i++) sa[i] = sb[i] = su[i] = 42.0f;
                kb_ref_qk_scores(q, H, G, hs, n, 0.125f, sa, ldo);
                kb_cpu_qk_scores(q, H, G, hs, n, 0.125f, sb, ldo);
                kb_cpu_qk_scores(q, H, G, hs, n, 1.0f, su, ldo);
                int pad_ok = 1, exact = 0;
                bad = 0;
                for (int r = 0; r < H * G; r++) {
                    e = max_err(sb + (size_t)r * ldo, sa + (size_t)r * ldo, n, 1e-4, 1e-5, &bad);
                    for (int j = 0; j < n; j++) exact += sb[(size_t)r * ldo + j] == su[(size_t)r * ldo + j] * 0.125f;
                    for (int j = n; j < ldo; j++) pad_ok &= sb[(size_t)r * ldo + j] == 42.0f;
                }
                CHECK_MSG(bad == 0, "qk_scores H=%d %s D=%d err %g", H, kb_dtype_name(types[ti]), D, e);
                CHECK_EQ_INT(exact, H * G * n);
                CHECK(pad_ok);
                free(sa);
                free(sb);
                free(su);
            }
            for (int h = 0; h < H; h++) kvstream_free(&hs[h]);
        }
    /* gathered rows (the sparse methods' attention: ascending slot lists, runs
     * of a page and isolated slots) on the specialised D = 64 / 128 kernels,
     * from one block to several chunks, peaky and flat scores: against the
     * reference. The pipelined kernel's last block, a block of 1..15 rows and
     * a rescale when a later block raises the max are all exercised. */
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
                j += (t % 16 && trial % 2) ? 1 : 1 + (int)((frand(&seed) + 1.0f) * 2); /* pages or scattered */
                idx[t] = j;
            }
            float *q = malloc((size_t)G * D * 4), *a = malloc((size_t)G * D * 4), *b = malloc((size_t)G * D * 4);
            for (int i = 0; i < G * D; i++) q[i] = frand(&seed);
            float scale = 1.0f / sqrtf((float)D);
            kb_ref_attn_gather(q, G, &s, idx, k, scale, a);
            kb_cpu_attn_gather_rows(q, G, &s, idx, k, scale, b);
            int bad = 0;
            double e = max_err(b, a, G * D, 2e-5, 1e-4, &bad);
            CHECK_MSG(bad == 0, "attn_gather_rows %s D=%d G=%d k=%d max err %g", kb_dtype_name(types[ti]), D, G,
                      k, e);
            free(idx);
            free(q);
            free(a);
            free(b);
            kvstream_free(&s);
        }
    /* shapes the blocked kernels refuse, which take the row-at-a-time path
     * (rows_plain) on every build: D = 72 and 40 (not a multiple of 16) and
     * G = 9 and 12 (more than the 8 heads of the fast path), over one chunk,
     * a chunk boundary and several chunks (so the merge), peaky and flat
     * scores: against the reference, tolerance and reasons as above */
    for (int ti = 0; ti < 3; ti++)
        for (int sh = 0; sh < 4; sh++) {
            int D = (int[]){72, 40, 64, 128}[sh], G = (int[]){3, 1, 9, 12}[sh];
            const int ns3[3] = {1, 257, 1030};
            for (int ni = 0; ni < 3; ni++)
                dense_vs_ref(types[ti], D, G, ns3[ni], 41u + (unsigned)(sh + ni), ni % 2 ? 4.0f : 0.5f,
                             123u + (unsigned)sh, 1, " (plain rows)");
        }
    /* nothing to attend to: no rows (n = 0, k = 0) gives zeros (the
     * reference's softmax over an empty set, attend_one), whatever out held;
     * and a head with no rows among heads with rows (attn_dense_heads: the
     * merge skips it) gives zeros while the others match the reference */
    {
        int D = 64, G = 3;
        kb_kvstream hs[3];
        const int nh[3] = {300, 0, 17};
        for (int h = 0; h < 3; h++) {
            kvstream_init(&hs[h], KB_F16, D, 300);
            fill_stream(&hs[h], nh[h], 61u + (unsigned)h, 4.0f);
        }
        unsigned seed = 8;
        float q[3 * 3 * 64], a[3 * 3 * 64], b[3 * 3 * 64];
        for (int i = 0; i < 3 * G * D; i++) q[i] = frand(&seed);
        for (int i = 0; i < 3 * G * D; i++) b[i] = NAN;
        kb_cpu_attn_dense(q, G, &hs[1], 0, 0.125f, b);
        int zeros = 0;
        for (int i = 0; i < G * D; i++) zeros += b[i] == 0.0f;
        CHECK_EQ_INT(zeros, G * D);
        int32_t one = 5;
        for (int i = 0; i < G * D; i++) b[i] = NAN;
        kb_cpu_attn_gather_rows(q, G, &hs[0], &one, 0, 0.125f, b);
        zeros = 0;
        for (int i = 0; i < G * D; i++) zeros += b[i] == 0.0f;
        CHECK_EQ_INT(zeros, G * D);
        for (int h = 0; h < 3; h++) kb_ref_attn_dense(q + h * G * D, G, &hs[h], nh[h], 0.125f, a + h * G * D);
        for (int i = 0; i < 3 * G * D; i++) b[i] = NAN;
        kb_cpu_attn_dense_heads(q, 3, G, hs, 0.125f, b);
        int bad = 0;
        double e = max_err(b, a, 3 * G * D, 2e-5, 1e-4, &bad);
        zeros = 0;
        for (int i = G * D; i < 2 * G * D; i++) zeros += b[i] == 0.0f;
        CHECK_MSG(bad == 0 && zeros == G * D, "attn_dense_heads with an empty head: max err %g, %d zeros", e, zeros);
        for (int h = 0; h < 3; h++) kvstream_free(&hs[h]);
    }
    /* the chunks' merge (log-sum-exp) when a later chunk's max exceeds the
     * first chunk's by far more than the f32 exp range (simd_exp1 clamps at
     * 88.7): head 0's chunk 0 (rows 0..255) scores about +-12, chunk 1
     * about 128, chunk 2 about 192 (scale 1; K follows the signs of head 0's
     * q, so the other heads' scores are sums of random signs). Every score is exact in f32 (q = +-1, K
     * small integers, exact in f16 and bf16, sums of at most 64 products
     * below 2^24), so the fast path's only error is the weights' exp and
     * the f32 sums: the tolerance above holds. A merge that weighted the
     * chunks by anything but the global max overflows or clamps (outputs
     * 0, NaN, or chunk 1 weighted like chunk 2). */
    for (int ti = 0; ti < 3; ti++) {
        int D = 64, G = 3, n = 700;
        kb_kvstream s;
        kvstream_init(&s, types[ti], D, n);
        unsigned seed = 77;
        float q[3 * 64], k[64], v[64], a[3 * 64], b[3 * 64];
        for (int i = 0; i < G * D; i++) q[i] = frand(&seed) < 0 ? -1.0f : 1.0f;
        for (int j = 0; j < n; j++) {
            int c = j < 256 ? 0 : j < 512 ? 2 : 3;
            for (int d = 0; d < D; d++) {
                int noise = (int)((frand(&seed) + 1.0f) * 1.5f) - 1; /* -1, 0, 1 (2 rarely) */
                k[d] = c ? (float)(c * (q[d] > 0 ? 1 : -1) + noise) : (float)(2 * noise);
                v[d] = frand(&seed);
            }
            kvstream_append_f32(&s, k, v, j);
        }
        kb_ref_attn_dense(q, G, &s, n, 1.0f, a);
        kb_cpu_attn_dense(q, G, &s, n, 1.0f, b);
        int bad = 0;
        double e = max_err(b, a, G * D, 2e-5, 1e-4, &bad);
        CHECK_MSG(bad == 0, "attn_dense, a later chunk's max far above: %s max err %g", kb_dtype_name(types[ti]), e);
        kvstream_free(&s);
    }
    /* causal prefill: nq new queries after n_prior slots; Q rows hold Hq heads */
    const int nqs[5] = {1, 63, 64, 65, 300}, priors[3] = {0, 37, 300};
    for (int ti = 0; ti < 2; ti++)
        for (int a_ = 0; a_ < 5; a_++)
            for (int b_ = 0; b_ < 3; b_++) {
                int D = 64, G = 3, Hq = 6, nq = nqs[a_], np = priors[b_];
                kb_kvstream s;
                kvstream_init(&s, types[ti], D, np + nq);
                fill_stream(&s, np + nq, 5u + (unsigned)a_, 3.0f);
                unsigned seed = 3;
                int ld = Hq * D;
                float *Q = malloc((size_t)nq * ld * 4), *o1 = calloc((size_t)nq * ld, 4),
                      *o2 = calloc((size_t)nq * ld, 4);
                for (int i = 0; i < nq * ld; i++) Q[i] = frand(&seed);
                /* group 1 of 2: heads 3..5 */
                kb_ref_attn_causal(Q + G * D, nq, ld, G, &s, np, 0.125f, o1 + G * D, ld);
                kb_cpu_attn_causal(Q + G * D, nq, ld, G, &s, np, 0.125f, o2 + G * D, ld);
                int bad = 0;
                double e = max_err(o2, o1, nq * ld, 2e-5, 1e-4, &bad);
                CHECK_MSG(bad == 0, "attn_causal %s nq=%d prior=%d err %g", kb_dtype_name(types[ti]),
                          nq, np, e);
                /* heads of the other group untouched */
                int touched = 0;
                for (int i = 0; i < nq; i++)
                    for (int c = 0; c < G * D; c++) touched += o2[(size_t)i * ld + c] != 0.0f;
                CHECK_EQ_INT(touched, 0);
                free(Q);
                free(o1);
                free(o2);
                kvstream_free(&s);
            }
    return check_summary(TEST_NAME);
}
