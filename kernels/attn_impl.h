/* attn_impl.h - the dense attention kernels behind kb_kernels (kernels.h):
 * reference versions (kernels/ref/attn_ref.c, plain loops, double
 * accumulation) and fast CPU versions (kernels/cpu/attn_cpu.c, SIMD + OpenMP
 * + OpenBLAS). Signatures match the kb_kernels fields of the same name. */
#ifndef KB_ATTN_IMPL_H
#define KB_ATTN_IMPL_H

#include "kernels/kvstream.h"

void kb_ref_attn_dense(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out);
void kb_ref_attn_causal(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo);
void kb_ref_qk_scores(const float *q, int G, const kb_kvstream *s, int n, float *out, int ldo);

void kb_cpu_attn_dense(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out);
void kb_cpu_attn_causal(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo);
void kb_cpu_qk_scores(const float *q, int G, const kb_kvstream *s, int n, float *out, int ldo);

#endif
