/* attn_cpu.c - fast dense attention on the CPU.
 *
 * Decode (kb_cpu_attn_dense): memory-bound. K and V are each read once: the
 * slots are split into chunks; per chunk the G query heads' scores, a local
 * max, exp and sum, and the unnormalised V accumulation are computed, and the
 * chunks are merged with the usual log-sum-exp rescaling (flash-decoding).
 * Chunks run in parallel (OpenMP) when the cache is long enough to pay.
 *
 * Prefill (kb_cpu_attn_causal): compute-bound. Flash-attention style blocks:
 * a block of queries against blocks of keys through OpenBLAS sgemm, online
 * softmax, P.V through sgemm; query blocks in parallel with single-threaded
 * BLAS inside. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "kernels/attn_impl.h"
#include "kernels/cpu/simd.h"
#include "kernels/matmul.h"

#define DEC_CHUNK 256       /* slots per decode chunk */
#define DEC_PAR_MIN 1024    /* below this many slots, decode on one thread */

/* Partial result of one chunk for G heads: max m[g], sum l[g], acc[g][D]. */
static void dense_chunk(const float *q, int G, const kb_kvstream *s, int j0, int j1, float scale,
                        float *m, float *l, float *acc, float *sc, float *row) {
    int D = s->D, nj = j1 - j0;
    for (int j = 0; j < nj; j++) {
        simd_cvt_row(s->dtype, kvstream_krow(s, j0 + j), row, D);
        for (int g = 0; g < G; g++) sc[g * DEC_CHUNK + j] = simd_dot(q + g * D, row, D) * scale;
    }
    for (int g = 0; g < G; g++) {
        float *x = sc + g * DEC_CHUNK, mx = -INFINITY;
        for (int j = 0; j < nj; j++) mx = x[j] > mx ? x[j] : mx;
        for (int j = 0; j < nj; j++) x[j] -= mx;
        simd_exp_inplace(x, nj);
        float sum = 0;
        for (int j = 0; j < nj; j++) sum += x[j];
        m[g] = mx;
        l[g] = sum;
        memset(acc + (size_t)g * D, 0, (size_t)D * sizeof(float));
    }
    for (int j = 0; j < nj; j++) {
        simd_cvt_row(s->dtype, kvstream_vrow(s, j0 + j), row, D);
        for (int g = 0; g < G; g++) simd_axpy(acc + (size_t)g * D, sc[g * DEC_CHUNK + j], row, D);
    }
}

void kb_cpu_attn_dense(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out) {
    int D = s->D;
    if (n <= 0) {
        memset(out, 0, (size_t)G * D * sizeof(float));
        return;
    }
    int nch = (n + DEC_CHUNK - 1) / DEC_CHUNK;
    /* per chunk: m[G], l[G], acc[G][D] */
    size_t stride = (size_t)G * (D + 2);
    float *part = KB_MALLOC((size_t)nch * stride * sizeof(float));
    int par = n >= DEC_PAR_MIN && omp_get_max_threads() > 1 && !omp_in_parallel();
#pragma omp parallel if (par)
    {
        float *sc = KB_MALLOC((size_t)G * DEC_CHUNK * sizeof(float));
        float *row = KB_MALLOC((size_t)D * sizeof(float));
#pragma omp for schedule(static)
        for (int c = 0; c < nch; c++) {
            float *p = part + (size_t)c * stride;
            int j0 = c * DEC_CHUNK, j1 = KB_MIN(n, j0 + DEC_CHUNK);
            dense_chunk(q, G, s, j0, j1, scale, p, p + G, p + 2 * G, sc, row);
        }
        free(sc);
        free(row);
    }
    for (int g = 0; g < G; g++) {
        float M = -INFINITY, L = 0;
        for (int c = 0; c < nch; c++) M = fmaxf(M, part[(size_t)c * stride + g]);
        float *o = out + (size_t)g * D;
        memset(o, 0, (size_t)D * sizeof(float));
        for (int c = 0; c < nch; c++) {
            const float *p = part + (size_t)c * stride;
            float w = expf(p[g] - M);
            L += w * p[G + g];
            simd_axpy(o, w, p + 2 * G + (size_t)g * D, D);
        }
        float inv = 1.0f / L;
        for (int d = 0; d < D; d++) o[d] *= inv;
    }
    free(part);
}

void kb_cpu_qk_scores(const float *q, int G, const kb_kvstream *s, int n, float *out, int ldo) {
    int D = s->D;
    int par = n >= 4 * DEC_PAR_MIN && omp_get_max_threads() > 1 && !omp_in_parallel();
#pragma omp parallel if (par)
    {
        float *row = KB_MALLOC((size_t)D * sizeof(float));
#pragma omp for schedule(static)
        for (int j = 0; j < n; j++) {
            simd_cvt_row(s->dtype, kvstream_krow(s, j), row, D);
            for (int g = 0; g < G; g++) out[(size_t)g * ldo + j] = simd_dot(q + g * D, row, D);
        }
        free(row);
    }
}

#define PF_BQ 64  /* queries per block */
#define PF_BK 256 /* keys per block */

void kb_cpu_attn_causal(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo) {
    int D = s->D;
    int nqb = (nq + PF_BQ - 1) / PF_BQ;
    int outer = !omp_in_parallel();
    kb_blas_single_thread();
#pragma omp parallel if (outer && nqb > 1)
    {
        float *Kt = KB_AMALLOC((size_t)PF_BK * D * sizeof(float));
        float *Vt = KB_AMALLOC((size_t)PF_BK * D * sizeof(float));
        float *S = KB_AMALLOC((size_t)G * PF_BQ * PF_BK * sizeof(float));
        float *acc = KB_AMALLOC((size_t)G * PF_BQ * D * sizeof(float));
        float *m = KB_MALLOC((size_t)G * PF_BQ * sizeof(float));
        float *l = KB_MALLOC((size_t)G * PF_BQ * sizeof(float));
        /* later query blocks see more keys: hand blocks out from the end */
#pragma omp for schedule(dynamic, 1)
        for (int bi = nqb - 1; bi >= 0; bi--) {
            int i0 = bi * PF_BQ, bq = KB_MIN(PF_BQ, nq - i0);
            int nk = n_prior + i0 + bq; /* keys visible to the block's last query */
            for (int x = 0; x < G * PF_BQ; x++) {
                m[x] = -INFINITY;
                l[x] = 0;
            }
            memset(acc, 0, (size_t)G * PF_BQ * D * sizeof(float));
            for (int k0 = 0; k0 < nk; k0 += PF_BK) {
                int bk = KB_MIN(PF_BK, nk - k0);
                for (int j = 0; j < bk; j++) {
                    simd_cvt_row(s->dtype, kvstream_krow(s, k0 + j), Kt + (size_t)j * D, D);
                    simd_cvt_row(s->dtype, kvstream_vrow(s, k0 + j), Vt + (size_t)j * D, D);
                }
                for (int g = 0; g < G; g++) {
                    float *Sg = S + (size_t)g * PF_BQ * PF_BK;
                    float *ag = acc + (size_t)g * PF_BQ * D;
                    const float *Qg = Q + (size_t)i0 * ldq + (size_t)g * D;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, bk, D, scale, Qg, ldq,
                                Kt, D, 0.0f, Sg, PF_BK);
                    for (int i = 0; i < bq; i++) {
                        float *srow = Sg + (size_t)i * PF_BK;
                        int last = n_prior + i0 + i - k0; /* last visible key in this block */
                        int vis = last + 1 < bk ? last + 1 : bk;
                        if (vis <= 0) {
                            memset(srow, 0, (size_t)bk * sizeof(float));
                            continue;
                        }
                        float mx = m[g * PF_BQ + i];
                        for (int j = 0; j < vis; j++) mx = srow[j] > mx ? srow[j] : mx;
                        float corr = expf(m[g * PF_BQ + i] - mx);
                        for (int j = 0; j < vis; j++) srow[j] -= mx;
                        simd_exp_inplace(srow, vis);
                        for (int j = vis; j < bk; j++) srow[j] = 0;
                        float sum = 0;
                        for (int j = 0; j < vis; j++) sum += srow[j];
                        l[g * PF_BQ + i] = l[g * PF_BQ + i] * corr + sum;
                        m[g * PF_BQ + i] = mx;
                        if (corr != 1.0f) {
                            float *a = ag + (size_t)i * D;
                            for (int d = 0; d < D; d++) a[d] *= corr;
                        }
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, D, bk, 1.0f, Sg,
                                PF_BK, Vt, D, 1.0f, ag, D);
                }
            }
            for (int g = 0; g < G; g++)
                for (int i = 0; i < bq; i++) {
                    float inv = 1.0f / l[g * PF_BQ + i];
                    const float *a = acc + ((size_t)g * PF_BQ + i) * D;
                    float *o = out + (size_t)(i0 + i) * ldo + (size_t)g * D;
                    for (int d = 0; d < D; d++) o[d] = a[d] * inv;
                }
        }
        kb_afree(Kt);
        kb_afree(Vt);
        kb_afree(S);
        kb_afree(acc);
        free(m);
        free(l);
    }
}
