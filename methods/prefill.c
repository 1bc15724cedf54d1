/* prefill.c - the exact prefill recorder (see prefill.h). */
#include "methods/prefill.h"

#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"

void prefill_init(kb_prefill *p, int n_layers, int Hq, int Hkv, int D, kb_dtype dtype, int W,
                  int cap_tokens) {
    memset(p, 0, sizeof *p);
    p->n_layers = n_layers;
    p->Hq = Hq;
    p->Hkv = Hkv;
    p->D = D;
    p->dtype = dtype;
    p->W = W;
    p->kv = KB_CALLOC((size_t)n_layers * Hkv, sizeof *p->kv);
    for (int i = 0; i < n_layers * Hkv; i++) kvstream_init(&p->kv[i], dtype, D, cap_tokens);
    p->qwin = KB_CALLOC((size_t)n_layers * (W ? W : 1) * Hq * D, sizeof(float));
    p->qwin_pos = KB_CALLOC((size_t)(W ? W : 1), sizeof(int32_t));
    p->nq_layer = KB_CALLOC((size_t)n_layers, sizeof(int));
}

void prefill_free(kb_prefill *p) {
    for (int i = 0; i < p->n_layers * p->Hkv; i++) kvstream_free(&p->kv[i]);
    free(p->kv);
    free(p->qwin);
    free(p->qwin_pos);
    free(p->nq_layer);
    memset(p, 0, sizeof *p);
}

void prefill_reset(kb_prefill *p) {
    for (int i = 0; i < p->n_layers * p->Hkv; i++) p->kv[i].n = 0;
    for (int l = 0; l < p->n_layers; l++) p->nq_layer[l] = 0;
    p->n_q = 0;
}

size_t prefill_bytes(const kb_prefill *p) {
    size_t b = 0;
    for (int i = 0; i < p->n_layers * p->Hkv; i++) b += kvstream_bytes(&p->kv[i]);
    return b;
}

/* Keeps the last W query rows of layer l (and, for layer 0, their positions). */
static void keep_window(kb_prefill *p, int l, int n, const int32_t *pos, const float *Q) {
    if (!p->W) return;
    size_t row = (size_t)p->Hq * p->D;
    float *win = p->qwin + (size_t)l * p->W * row;
    int have = p->nq_layer[l], take = KB_MIN(n, p->W);
    int keep = KB_MIN(have, p->W - take); /* old rows that stay */
    memmove(win, win + (size_t)(have - keep) * row, (size_t)keep * row * sizeof(float));
    memcpy(win + (size_t)keep * row, Q + (size_t)(n - take) * row, (size_t)take * row * sizeof(float));
    if (l == 0) {
        memmove(p->qwin_pos, p->qwin_pos + (have - keep), (size_t)keep * sizeof(int32_t));
        memcpy(p->qwin_pos + keep, pos + (n - take), (size_t)take * sizeof(int32_t));
        p->n_q = keep + take;
    }
    p->nq_layer[l] = keep + take;
}

static int pf_prefill(void *ctx, int layer, int n, const int32_t *pos, const float *Q,
                      const float *K, const float *V, float *out, kb_err *err) {
    (void)err;
    kb_prefill *p = ctx;
    const kb_kernels *kr = kernels_get();
    int G = p->Hq / p->Hkv, D = p->D;
    float scale = 1.0f / sqrtf((float)D);
    for (int h = 0; h < p->Hkv; h++) {
        kb_kvstream *s = &p->kv[(size_t)layer * p->Hkv + h];
        int n_prior = s->n;
        kvstream_reserve(s, s->n + n);
        for (int i = 0; i < n; i++)
            kvstream_append_f32(s, K + ((size_t)i * p->Hkv + h) * D, V + ((size_t)i * p->Hkv + h) * D,
                                pos[i]);
        kr->attn_causal(Q + (size_t)h * G * D, n, p->Hq * D, G, s, n_prior, scale,
                        out + (size_t)h * G * D, p->Hq * D);
    }
    keep_window(p, layer, n, pos, Q);
    return 0;
}

static void pf_decode(void *ctx, int layer, int32_t pos, const float *q, const float *k,
                      const float *v, float *out) {
    kb_prefill *p = ctx;
    const kb_kernels *kr = kernels_get();
    int G = p->Hq / p->Hkv, D = p->D;
    float scale = 1.0f / sqrtf((float)D);
    kb_kvstream *s = &p->kv[(size_t)layer * p->Hkv];
    for (int h = 0; h < p->Hkv; h++) kvstream_append_f32(&s[h], k + (size_t)h * D, v + (size_t)h * D, pos);
    kb_attn_dense_heads(kr, q, p->Hkv, G, s, scale, out); /* all KV heads in one job */
}

kb_attn_backend prefill_backend(kb_prefill *p) {
    kb_attn_backend be = {p, pf_prefill, pf_decode};
    return be;
}

kb_prefill_view prefill_view(const kb_prefill *p, int layer) {
    kb_prefill_view v;
    memset(&v, 0, sizeof v);
    v.Hq = p->Hq;
    v.Hkv = p->Hkv;
    v.D = p->D;
    v.kv = p->kv + (size_t)layer * p->Hkv;
    v.Wq = p->nq_layer[layer];
    v.qwin = p->qwin + (size_t)layer * p->W * p->Hq * p->D;
    v.qwin_pos = p->qwin_pos;
    return v;
}
