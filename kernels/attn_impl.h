/* attn_impl.h - the dense attention kernels behind kb_kernels (kernels.h):
 * reference versions (kernels/ref/attn_ref.c, plain loops, double
 * accumulation) and fast CPU versions (kernels/cpu/attn_cpu.c, SIMD + OpenMP
 * + OpenBLAS). Signatures match the kb_kernels fields of the same name. */
#ifndef KB_ATTN_IMPL_H
#define KB_ATTN_IMPL_H

#include "kernels/kvstream.h"

/* How kb_cpu_attn_dense_heads splits the dense decode attention over the
 * pool (dec_run in kernels/cpu/attn_cpu.c): chunks of DEC_CHUNK slots of one
 * head, each pool task a span of consecutive chunks, about DEC_TASKS tasks
 * per participant (load balance vs stream length). Here so that
 * scripts/microbench/attn_pf.c's plain read splits its bytes the same way. */
#define DEC_CHUNK 256
#ifndef DEC_TASKS
#define DEC_TASKS 4
#endif

void kb_ref_attn_dense(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out);
void kb_ref_attn_causal(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo);
void kb_ref_qk_scores(const float *q, int H, int G, const kb_kvstream *s, int n, float scale, float *out,
                      int ldo);

void kb_cpu_attn_dense(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out);
void kb_cpu_attn_causal(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo);
void kb_cpu_qk_scores(const float *q, int H, int G, const kb_kvstream *s, int n, float scale, float *out,
                      int ldo);
/* kb_kernels.attn_dense_heads: H streams s[0..H) (all their slots), G query
 * heads each (q, out [H][G][D]), one parallel job over all of them. */
void kb_cpu_attn_dense_heads(const float *q, int H, int G, const kb_kvstream *s, float scale,
                             float *out);
/* Attention of G heads over the slots idx[0..k) of s (all >= 0; the order of
 * the list does not matter); k = 0 writes zeros. */
void kb_cpu_attn_gather_rows(const float *q, int G, const kb_kvstream *s, const int32_t *idx,
                             int k, float scale, float *out);

#endif
