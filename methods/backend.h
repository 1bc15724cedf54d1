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
#include "kernels/warm.h"

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
    /* Optional (NULL, or 0 tasks for a layer: the engine computes q, k, v
     * and calls decode). For a decode token the engine computes q first
     * (post-RoPE) and runs prepare(ctx, layer, i, q, w) for i <
     * prepare_tasks(ctx, layer), in parallel on any threads, inside the job
     * that computes k and v: a task may do the part of the step that needs
     * q alone and queue in w memory decode will read, which the rest of the
     * job prefetches. Then prepare_done(ctx, layer, q, busy) on the engine's
     * thread with the tasks' summed seconds (counted as attention time),
     * then decode with the same q. */
    int (*prepare_tasks)(void *ctx, int layer);
    void (*prepare)(void *ctx, int layer, int task, const float *q, kb_warm *w);
    void (*prepare_done)(void *ctx, int layer, const float *q, double busy_seconds);
} kb_attn_backend;

#endif
