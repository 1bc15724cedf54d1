/* forward.c - the Llama forward pass (pre-norm, GQA, adjacent-pair RoPE,
 * RMSNorm, SwiGLU, tied or untied output). Batched prefill uses dequantised
 * weights + sgemm; single-token decode uses the quantised mat-vec. Attention
 * goes through a kb_attn_backend. */
#include <math.h>
#include <stdlib.h>

#include "harness/engine/model.h"
#include "kernels/act.h"
#include "kernels/pool.h"
#include "kernels/quant.h"
#if defined(__AVX512F__)
#include <immintrin.h>
#endif

kb_forward *forward_new(const kb_model *m, int max_batch) {
    kb_forward *f = KB_CALLOC(1, sizeof *f);
    const kb_hparams *hp = &m->hp;
    int q_dim = hp->n_head * hp->head_dim, kv_dim = hp->n_head_kv * hp->head_dim;
    int wide = KB_MAX(KB_MAX(hp->n_embd, q_dim), hp->n_ff);
    f->m = m;
    f->max_batch = max_batch;
    size_t B = (size_t)max_batch;
    f->x = KB_AMALLOC(B * hp->n_embd * sizeof(float));
    f->xb = KB_AMALLOC(B * wide * sizeof(float));
    f->q = KB_AMALLOC(B * q_dim * sizeof(float));
    f->k = KB_AMALLOC(B * kv_dim * sizeof(float));
    f->v = KB_AMALLOC(B * kv_dim * sizeof(float));
    f->att = KB_AMALLOC(B * q_dim * sizeof(float));
    f->hb = KB_AMALLOC(B * hp->n_ff * sizeof(float));
    f->hb2 = KB_AMALLOC(B * hp->n_ff * sizeof(float));
    f->logits = KB_AMALLOC((size_t)hp->n_vocab * sizeof(float));
    f->rope_pos = -1;
    return f;
}

void forward_free(kb_forward *f) {
    if (!f) return;
    kb_afree(f->x);
    kb_afree(f->xb);
    kb_afree(f->q);
    kb_afree(f->k);
    kb_afree(f->v);
    kb_afree(f->att);
    kb_afree(f->hb);
    kb_afree(f->hb2);
    kb_afree(f->logits);
    free(f);
}

static void rmsnorm(float *o, const float *x, const float *w, int n, float eps) {
    double ss = 0;
    for (int i = 0; i < n; i++) ss += (double)x[i] * x[i];
    float inv = (float)(1.0 / sqrt(ss / n + eps));
    for (int i = 0; i < n; i++) o[i] = x[i] * inv * w[i];
}

/* Rotates adjacent pairs (x[2i], x[2i+1]) of each head by pos * inv_freq[i].
 * The cos/sin of the last position are kept in f (every layer of a decode
 * step rotates at the same position: computed once per token, same values). */
static void rope(kb_forward *f, float *x, int n_heads, int D, const float *inv_freq, int pos) {
    if (f->rope_pos != pos || f->rope_D != D) {
        for (int i = 0; i < D / 2; i++) {
            double a = (double)pos * inv_freq[i];
            f->rope_cs[2 * i] = (float)cos(a);
            f->rope_cs[2 * i + 1] = (float)sin(a);
        }
        f->rope_pos = pos;
        f->rope_D = D;
    }
    for (int i = 0; i < D / 2; i++) {
        float c = f->rope_cs[2 * i], s = f->rope_cs[2 * i + 1];
        for (int h = 0; h < n_heads; h++) {
            float *p = x + (size_t)h * D + 2 * i;
            float x0 = p[0], x1 = p[1];
            p[0] = x0 * c - x1 * s;
            p[1] = x0 * s + x1 * c;
        }
    }
}

static void embed(const kb_model *m, int32_t tok, float *x) {
    const kb_weight *e = &m->tok_embd;
    if (e->layout == KB_LAYOUT_R16) /* the tied output matrix, regrouped (model.c) */
        kb_r16_dequant_ref(e->type, e->data, e->row_bytes, tok, 1, x);
    else
        kb_dequant(e->type, (const char *)e->data + (size_t)tok * e->row_bytes, x, e->cols);
}

static void proj(kb_forward *f, const kb_weight *W, const float *X, int n, int ldx, float *Y,
                 int ldy) {
    double t0 = kb_now();
    kb_matmul(W, X, n, ldx, Y, ldy);
    f->t_proj += kb_now() - t0;
    f->proj_flops += 2.0 * n * W->rows * W->cols;
}

/* Projections of one input X by k weights W[i] (same cols) into Y[i]
 * (ldy[i] floats per token). A decode token's (k <= 4) are one pool job
 * (kb_matvec_multi: one preparation of x, one dispatch and one wait instead
 * of k; the same values as k kb_matvec calls). */
static void proj_same_x(kb_forward *f, int k, const kb_weight *const *W, const float *X, int n,
                        int ldx, float *const *Y, const int *ldy) {
    if (n > 1 || k > 4) {
        for (int i = 0; i < k; i++) proj(f, W[i], X, n, ldx, Y[i], ldy[i]);
        return;
    }
    double t0 = kb_now();
    kb_mv mv[4];
    for (int i = 0; i < k; i++) {
        mv[i] = (kb_mv){W[i]->type, W[i]->data, W[i]->row_bytes, W[i]->rows, Y[i], W[i]->layout};
        f->proj_flops += 2.0 * W[i]->rows * W[i]->cols;
    }
    kb_matvec_multi(mv, k, W[0]->cols, X);
    f->t_proj += kb_now() - t0;
}

/* hb[i] = silu(hb[i]) * hb2[i] (kernels/act.h: vectorised, the same bits
 * as libm's expf). A decode token's 1536 take ~1.3 us on one core, less
 * than a pool dispatch, so up to SILU_INLINE elements run on the calling
 * thread; prefill's batches are split over the worker pool. */
typedef struct silu_job {
    float *h;
    const float *h2;
    size_t n;
} silu_job;
#define SILU_CHUNK 4096
#define SILU_INLINE 8192
static void silu_chunk(void *p, int c, int worker) {
    (void)worker;
    const silu_job *J = p;
    size_t i0 = (size_t)c * SILU_CHUNK, i1 = KB_MIN(J->n, i0 + SILU_CHUNK);
    kb_silu_mul(J->h + i0, J->h2 + i0, i1 - i0);
}
static void silu_mul(float *h, const float *h2, size_t n) {
    if (n <= SILU_INLINE) {
        kb_silu_mul(h, h2, n);
        return;
    }
    silu_job J = {h, h2, n};
    kb_pool_run((int)((n + SILU_CHUNK - 1) / SILU_CHUNK), silu_chunk, &J);
}

/* One layer for nb tokens at positions pos[0..nb). decode: nb == 1 via be->decode. */
static int layer_forward(kb_forward *f, int l, int nb, const int32_t *pos, kb_attn_backend *be,
                         int decode, kb_err *err) {
    const kb_model *m = f->m;
    const kb_hparams *hp = &m->hp;
    const kb_layer_weights *L = &m->layers[l];
    int E = hp->n_embd, D = hp->head_dim, q_dim = hp->n_head * D, kv_dim = hp->n_head_kv * D;
    for (int t = 0; t < nb; t++)
        rmsnorm(f->xb + (size_t)t * E, f->x + (size_t)t * E, L->attn_norm, E, hp->rms_eps);
    {
        const kb_weight *W[3] = {&L->wq, &L->wk, &L->wv};
        float *Y[3] = {f->q, f->k, f->v};
        int ldy[3] = {q_dim, kv_dim, kv_dim};
        proj_same_x(f, 3, W, f->xb, nb, E, Y, ldy);
    }
    for (int t = 0; t < nb; t++) {
        rope(f, f->q + (size_t)t * q_dim, hp->n_head, D, m->inv_freq, pos[t]);
        rope(f, f->k + (size_t)t * kv_dim, hp->n_head_kv, D, m->inv_freq, pos[t]);
    }
    double t0 = kb_now();
    if (decode) {
        be->decode(be->ctx, l, pos[0], f->q, f->k, f->v, f->att);
    } else {
        int rc = be->prefill(be->ctx, l, nb, pos, f->q, f->k, f->v, f->att, err);
        if (rc) return rc;
    }
    f->t_attn += kb_now() - t0;
    proj(f, &L->wo, f->att, nb, q_dim, f->xb, E);
    for (size_t i = 0; i < (size_t)nb * E; i++) f->x[i] += f->xb[i];
    for (int t = 0; t < nb; t++)
        rmsnorm(f->xb + (size_t)t * E, f->x + (size_t)t * E, L->ffn_norm, E, hp->rms_eps);
    {
        const kb_weight *W[2] = {&L->gate, &L->up};
        float *Y[2] = {f->hb, f->hb2};
        int ldy[2] = {hp->n_ff, hp->n_ff};
        proj_same_x(f, 2, W, f->xb, nb, E, Y, ldy);
    }
    silu_mul(f->hb, f->hb2, (size_t)nb * hp->n_ff);
    proj(f, &L->down, f->hb, nb, hp->n_ff, f->xb, E);
    for (size_t i = 0; i < (size_t)nb * E; i++) f->x[i] += f->xb[i];
    return 0;
}

static void output_logits(kb_forward *f, const float *x, int nb, float *logits) {
    const kb_model *m = f->m;
    int E = m->hp.n_embd;
    for (int t = 0; t < nb; t++)
        rmsnorm(f->xb + (size_t)t * E, x + (size_t)t * E, m->output_norm, E, m->hp.rms_eps);
    proj(f, &m->output, f->xb, nb, E, logits, m->hp.n_vocab);
}

int forward_prefill(kb_forward *f, const int32_t *tokens, int n, int pos0, kb_attn_backend *be,
                    float *logits_all, int want_last, kb_err *err) {
    const kb_model *m = f->m;
    double t0 = kb_now();
    for (int i = 0; i < n; i++)
        if (tokens[i] < 0 || tokens[i] >= m->hp.n_vocab)
            return kb_fail(err, KB_EINPUT, "token id %d at position %d is outside the vocabulary "
                           "[0, %d)", tokens[i], pos0 + i, m->hp.n_vocab);
    int32_t *pos = KB_MALLOC((size_t)f->max_batch * sizeof(int32_t));
    int rc = 0;
    for (int b0 = 0; b0 < n && !rc; b0 += f->max_batch) {
        int nb = KB_MIN(f->max_batch, n - b0);
        for (int t = 0; t < nb; t++) {
            pos[t] = pos0 + b0 + t;
            embed(m, tokens[b0 + t], f->x + (size_t)t * m->hp.n_embd);
        }
        for (int l = 0; l < m->hp.n_layer && !rc; l++) rc = layer_forward(f, l, nb, pos, be, 0, err);
        if (rc) break;
        if (logits_all) output_logits(f, f->x, nb, logits_all + (size_t)b0 * m->hp.n_vocab);
        if (want_last && b0 + nb == n)
            output_logits(f, f->x + (size_t)(nb - 1) * m->hp.n_embd, 1, f->logits);
    }
    free(pos);
    f->t_total += kb_now() - t0;
    return rc;
}

void forward_decode(kb_forward *f, int32_t token, int pos, kb_attn_backend *be) {
    const kb_model *m = f->m;
    double t0 = kb_now();
    int32_t p = pos;
    embed(m, token, f->x);
    for (int l = 0; l < m->hp.n_layer; l++) layer_forward(f, l, 1, &p, be, 1, NULL);
    output_logits(f, f->x, 1, f->logits);
    f->t_total += kb_now() - t0;
}

/* The first index of the largest logit (a strict '>' scan from index 0:
 * NaNs never win, and a NaN at index 0 is never beaten), in two vectorised
 * passes: the maximum, then its first occurrence. */
int32_t logits_argmax(const float *logits, int n) {
    if (n <= 0 || logits[0] != logits[0]) return 0;
    float m = logits[0];
    int i = 1;
#if defined(__AVX512F__)
    __m512 vm = _mm512_set1_ps(m);
    for (; i + 16 <= n; i += 16) vm = _mm512_max_ps(_mm512_loadu_ps(logits + i), vm); /* NaN -> keeps vm */
    m = _mm512_reduce_max_ps(vm);
#endif
    for (; i < n; i++)
        if (logits[i] > m) m = logits[i];
    i = 0;
#if defined(__AVX512F__)
    for (__m512 v = _mm512_set1_ps(m); i + 16 <= n; i += 16) {
        unsigned k = _mm512_cmp_ps_mask(_mm512_loadu_ps(logits + i), v, _CMP_EQ_OQ);
        if (k) return i + __builtin_ctz(k);
    }
#endif
    for (; i < n; i++)
        if (logits[i] == m) return i;
    return 0;
}
