/* prefill.h - the exact prefill recorder, shared by every cell of a sample.
 *
 * As an attention backend it computes exact causal attention and keeps, per
 * layer, K and V of every token (post-RoPE) and the last W queries (the
 * largest observation window any method of the sweep needs). After the
 * prompt's prefill, prefill_view() exposes one layer to method layer_init.
 * It also decodes with exact attention (Full KV without a method). */
#ifndef KB_PREFILL_H
#define KB_PREFILL_H

#include "methods/backend.h"
#include "methods/method.h"

typedef struct kb_prefill {
    int n_layers, Hq, Hkv, D;
    kb_dtype dtype;
    kb_kvstream *kv;    /* [n_layers][Hkv] */
    int W;              /* window queries kept per layer */
    int n_q;            /* window queries held (<= W) */
    float *qwin;        /* [n_layers][W][Hq][D], chronological, first n_q rows valid */
    int32_t *qwin_pos;  /* [W] positions of the held window queries */
    int *nq_layer;      /* [n_layers] window rows held per layer (equal after a full pass) */
} kb_prefill;

void prefill_init(kb_prefill *p, int n_layers, int Hq, int Hkv, int D, kb_dtype dtype, int W,
                  int cap_tokens);
void prefill_free(kb_prefill *p);
/* Forget all tokens (keeps allocations for the next sample). */
void prefill_reset(kb_prefill *p);
kb_attn_backend prefill_backend(kb_prefill *p);
kb_prefill_view prefill_view(const kb_prefill *p, int layer);
/* Bytes of K/V held (all layers). */
size_t prefill_bytes(const kb_prefill *p);

#endif
