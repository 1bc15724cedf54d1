/* kernels.h - the numeric building blocks behind one interface.
 *
 * A backend is a table of function pointers (`cpu` now, `cuda` later) chosen
 * at run time by kernels_get(). Every entry has a plain C reference in
 * kb_kernels_ref (kernels/ref/), which the tests compare the fast backend
 * with. Entries a backend lacks may be NULL; callers then use the reference.
 *
 * Conventions: q/out rows are f32 [G][D] (the G query heads of one KV group,
 * contiguous); K/V come from a kb_kvstream (f16/f32/bf16); scale is usually
 * 1/sqrt(D). Softmax is computed in f32 with max subtraction. */
#ifndef KB_KERNELS_H
#define KB_KERNELS_H

#include "kernels/kb_base.h"
#include "kernels/kvstream.h"

typedef struct kb_kernels {
    const char *name;

    /* out[g] = softmax(q[g] . K[0..n)^T * scale) . V[0..n)  for g < G */
    void (*attn_dense)(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out);

    /* As attn_dense over the slots idx[0..k) only (idx entries < 0 are skipped). */
    void (*attn_gather)(const float *q, int G, const kb_kvstream *s, const int32_t *idx, int k,
                        float scale, float *out);

    /* Causal prefill of one KV group: nq queries Q [nq][ldq] (rows of G*D: the
     * G heads of the group contiguous), query i sees slots [0, n_prior + i].
     * out rows [nq][ldo] likewise. */
    void (*attn_causal)(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo);

    /* Raw scores out[g][j] = q[g] . K[j] for j < n (no scale). out is [G][ldo]. */
    void (*qk_scores)(const float *q, int G, const kb_kvstream *s, int n, float *out, int ldo);
} kb_kernels;

extern const kb_kernels kb_kernels_ref;
extern const kb_kernels kb_kernels_cpu;

/* The active backend (cpu unless KVBENCH_KERNELS=ref). */
const kb_kernels *kernels_get(void);

#endif
