/* backend.h - what the engine's forward pass calls for attention.
 *
 * The Llama forward never computes attention itself: per layer it hands the
 * post-RoPE Q, K, V of the tokens it is processing to a kb_attn_backend,
 * which stores K/V where it wants and writes the attention output. Two
 * implementations exist: the exact prefill recorder (methods/prefill.c) and
 * a set of per-layer method states (methods/methodset.c). */
#ifndef KB_BACKEND_H
#define KB_BACKEND_H

#include "kernels/kb_base.h"

typedef struct kb_attn_backend {
    void *ctx;
    /* A batch of n tokens of one layer at positions pos[0..n) (ascending):
     * Q [n][Hq][D], K [n][Hkv][D], V [n][Hkv][D] (f32, post-RoPE).
     * Writes out [n][Hq][D]. Token i attends causally to the backend's
     * history and to tokens 0..i of the batch. */
    int (*prefill)(void *ctx, int layer, int n, const int32_t *pos, const float *Q,
                   const float *K, const float *V, float *out, kb_err *err);
    /* One token of one layer: q [Hq][D], k/v [Hkv][D]; writes out [Hq][D]. */
    void (*decode)(void *ctx, int layer, int32_t pos, const float *q, const float *k,
                   const float *v, float *out);
} kb_attn_backend;

#endif
