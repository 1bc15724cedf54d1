/* act.h - the feed-forward activation of decode and prefill: SwiGLU's
 * h[i] = silu(h[i]) * h2[i], silu(g) = g / (1 + exp(-g)).
 *
 * kb_silu_mul_ref is the definition, with libm's expf, in float:
 *     h[i] = g / (1.0f + expf(-g)) * h2[i]      (g = h[i], two roundings)
 * kb_silu_mul computes the same bits, vectorised. Its exp is the algorithm
 * of glibc's expf (read off glibc 2.36's `__expf_fma`, the variant glibc
 * picks on a CPU with FMA and AVX2, which every machine running our vector
 * paths has): in double,
 * k = round(x 32/ln2), r = x 32/ln2 - k (both fused), 2^(k/32) from a table
 * of 32 correctly rounded 2^(i/32) and the exponent bits of k, a degree-3
 * polynomial in r, one rounding to float. Lanes with |x| >= 88, Inf or NaN
 * (under/overflow, where glibc sets errno) go to libm's expf itself.
 *
 * Bit-identity with libm is what keeps every output of the engine unchanged,
 * so it is checked, not assumed: the first kb_silu_mul call compares its
 * exp with libm's expf on 4,096 inputs spread over (-88, 88) and uses the
 * reference from then on if any differs (another libm). kb_silu_mul_vector()
 * says which one runs. tests/unit/test_act.c compares kb_silu_mul with the
 * reference bit for bit over a sweep of every float exponent and the edges. */
#ifndef KB_ACT_H
#define KB_ACT_H

#include <stddef.h>

void kb_silu_mul_ref(float *h, const float *h2, size_t n);
void kb_silu_mul(float *h, const float *h2, size_t n);
/* 1 if kb_silu_mul runs its vector path (it matched libm at its first
 * call), 0 if it runs the reference (no vector path in this build, or the
 * check failed). Makes the check if no call has. */
int kb_silu_mul_vector(void);

#endif
