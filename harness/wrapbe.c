/* wrapbe.c - tracing and fidelity wrappers around an attention backend. */
#include "harness/wrapbe.h"

#include <stdlib.h>

static int tr_prefill(void *ctx, int layer, int n, const int32_t *pos, const float *Q,
                      const float *K, const float *V, float *out, kb_err *err) {
    kb_trace_be *w = ctx;
    return w->inner.prefill(w->inner.ctx, layer, n, pos, Q, K, V, out, err);
}

static void tr_decode(void *ctx, int layer, int32_t pos, const float *q, const float *k,
                      const float *v, float *out) {
    kb_trace_be *w = ctx;
    w->inner.decode(w->inner.ctx, layer, pos, q, k, v, out);
    if (layer == w->t->layer) trace_add_step(w->t, q, k, v);
}

kb_attn_backend trace_be_wrap(kb_trace_be *w, kb_attn_backend inner, kb_trace *t) {
    w->inner = inner;
    w->t = t;
    kb_attn_backend be = {w, tr_prefill, tr_decode};
    return be;
}

static int fid_prefill(void *ctx, int layer, int n, const int32_t *pos, const float *Q,
                       const float *K, const float *V, float *out, kb_err *err) {
    kb_fid_be *w = ctx;
    return w->inner.prefill(w->inner.ctx, layer, n, pos, Q, K, V, out, err);
}

static void fid_decode(void *ctx, int layer, int32_t pos, const float *q, const float *k,
                       const float *v, float *out) {
    kb_fid_be *w = ctx;
    w->inner.decode(w->inner.ctx, layer, pos, q, k, v, out);
    double t0 = kb_now();
    kb_kvstream *full = w->full + (size_t)layer * w->Hkv;
    for (int h = 0; h < w->Hkv; h++)
        kvstream_append_f32(&full[h], k + (size_t)h * w->D, v + (size_t)h * w->D, pos);
    if (!w->failed) {
        kb_account acc;
        methodset_layer_account(w->ms, layer, &acc);
        kb_fidelity f;
        if (fidelity_step(methodset_layer_ops(w->ms, layer), methodset_layer_state(w->ms, layer), &acc, q, out,
                          full, w->Hq, w->Hkv, w->D, &f, &w->err)) {
            w->failed = 1;
        } else {
            w->recall += f.recall;
            w->mass += f.mass;
            w->rel_err += f.rel_err;
            w->n++;
        }
    }
    w->seconds += kb_now() - t0;
}

kb_attn_backend fid_be_wrap(kb_fid_be *w, kb_attn_backend inner, kb_methodset *ms,
                            const kb_prefill *pf, int steps) {
    memset(w, 0, sizeof *w);
    w->inner = inner;
    w->ms = ms;
    w->n_layers = pf->n_layers;
    w->Hq = pf->Hq;
    w->Hkv = pf->Hkv;
    w->D = pf->D;
    w->full = KB_CALLOC((size_t)pf->n_layers * pf->Hkv, sizeof *w->full);
    for (int i = 0; i < pf->n_layers * pf->Hkv; i++) {
        kvstream_init(&w->full[i], pf->kv[i].dtype, pf->D, pf->kv[i].n + steps + 1); /* room for the decode */
        kvstream_copy(&w->full[i], &pf->kv[i]);
    }
    kb_attn_backend be = {w, fid_prefill, fid_decode};
    return be;
}

void fid_be_free(kb_fid_be *w) {
    for (int i = 0; i < w->n_layers * w->Hkv; i++) kvstream_free(&w->full[i]);
    free(w->full);
    w->full = NULL;
}
