/* simd.h - small vector helpers shared by the fast CPU kernels: row
 * conversion from the KV dtype to f32, dot products, axpy, and a vectorised
 * exp. AVX-512F and AVX2+FMA paths are chosen at compile time (we build with
 * -march=native); a scalar path computes the same quantities.
 *
 * simd_exp has a relative error below 2e-7 over the range where exp does not
 * underflow (tested in tests/unit/test_attn.c against libm's exp). Inputs
 * below -87.3 give 0 (and -inf gives 0), so masked scores work. */
#ifndef KB_SIMD_H
#define KB_SIMD_H

#include <immintrin.h>
#include <math.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include "kernels/kb_base.h"

/* Whether this CPU is AMD's, read once (__builtin_cpu_is) and cached. Only
 * prefetch plans depend on it (select_cpu.c's page pass, attn_cpu.c's dense
 * rows), never a value: the same bits on every machine. */
static inline int simd_cpu_amd(void) {
    static atomic_int amd; /* 0 unknown, 1 AMD, 2 not */
    int a = atomic_load_explicit(&amd, memory_order_relaxed);
    if (!a) {
        __builtin_cpu_init();
        a = __builtin_cpu_is("amd") ? 1 : 2;
        atomic_store_explicit(&amd, a, memory_order_relaxed);
    }
    return a == 1;
}

/* dst[0..n) = src[0..n) as f32 (n a multiple of 16 on the vector paths). */
static inline void simd_cvt_row(kb_dtype t, const void *src, float *dst, int n) {
    int i = 0;
    if (t == KB_F32) {
        memcpy(dst, src, (size_t)n * 4);
        return;
    }
    const uint16_t *h = (const uint16_t *)src;
#if defined(__AVX512F__)
    if (t == KB_F16) {
        for (; i + 16 <= n; i += 16)
            _mm512_storeu_ps(dst + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(h + i))));
    } else {
        for (; i + 16 <= n; i += 16) {
            __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(h + i)));
            _mm512_storeu_ps(dst + i, _mm512_castsi512_ps(_mm512_slli_epi32(w, 16)));
        }
    }
#elif defined(__AVX2__) && defined(__F16C__)
    if (t == KB_F16) {
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(h + i))));
    } else {
        for (; i + 8 <= n; i += 8) {
            __m256i w = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(h + i)));
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(w, 16)));
        }
    }
#endif
    for (; i < n; i++) dst[i] = t == KB_F16 ? kb_f16_to_f32(h[i]) : kb_bf16_to_f32(h[i]);
}

static inline float simd_dot(const float *a, const float *b, int n) {
    int i = 0;
    float r = 0;
#if defined(__AVX512F__)
    __m512 acc0 = _mm512_setzero_ps(), acc1 = _mm512_setzero_ps();
    for (; i + 32 <= n; i += 32) {
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
        acc1 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i + 16), _mm512_loadu_ps(b + i + 16), acc1);
    }
    for (; i + 16 <= n; i += 16)
        acc0 = _mm512_fmadd_ps(_mm512_loadu_ps(a + i), _mm512_loadu_ps(b + i), acc0);
    r = _mm512_reduce_add_ps(_mm512_add_ps(acc0, acc1));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
    for (; i + 16 <= n; i += 16) {
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
        acc1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), acc1);
    }
    for (; i + 8 <= n; i += 8)
        acc0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), acc0);
    __m256 s = _mm256_add_ps(acc0, acc1);
    __m128 h = _mm_add_ps(_mm256_castps256_ps128(s), _mm256_extractf128_ps(s, 1));
    h = _mm_add_ps(h, _mm_movehl_ps(h, h));
    h = _mm_add_ss(h, _mm_movehdup_ps(h));
    r = _mm_cvtss_f32(h);
#endif
    for (; i < n; i++) r += a[i] * b[i];
    return r;
}

/* r[k] = simd_dot(a[k], b, n) for k < 4, bit for bit: each dot keeps
 * simd_dot's accumulators and order; the four only share b's loads and
 * overlap their dependency chains. */
static inline void simd_dot4(const float *const a[4], const float *b, int n, float r[4]) {
#if defined(__AVX512F__)
    int i = 0;
    const float *a0 = a[0], *a1 = a[1], *a2 = a[2], *a3 = a[3];
    __m512 p0 = _mm512_setzero_ps(), p1 = p0, q0 = p0, q1 = p0, u0 = p0, u1 = p0, w0 = p0, w1 = p0;
    for (; i + 32 <= n; i += 32) {
        __m512 b0 = _mm512_loadu_ps(b + i), b1 = _mm512_loadu_ps(b + i + 16);
        p0 = _mm512_fmadd_ps(_mm512_loadu_ps(a0 + i), b0, p0);
        p1 = _mm512_fmadd_ps(_mm512_loadu_ps(a0 + i + 16), b1, p1);
        q0 = _mm512_fmadd_ps(_mm512_loadu_ps(a1 + i), b0, q0);
        q1 = _mm512_fmadd_ps(_mm512_loadu_ps(a1 + i + 16), b1, q1);
        u0 = _mm512_fmadd_ps(_mm512_loadu_ps(a2 + i), b0, u0);
        u1 = _mm512_fmadd_ps(_mm512_loadu_ps(a2 + i + 16), b1, u1);
        w0 = _mm512_fmadd_ps(_mm512_loadu_ps(a3 + i), b0, w0);
        w1 = _mm512_fmadd_ps(_mm512_loadu_ps(a3 + i + 16), b1, w1);
    }
    for (; i + 16 <= n; i += 16) {
        __m512 b0 = _mm512_loadu_ps(b + i);
        p0 = _mm512_fmadd_ps(_mm512_loadu_ps(a0 + i), b0, p0);
        q0 = _mm512_fmadd_ps(_mm512_loadu_ps(a1 + i), b0, q0);
        u0 = _mm512_fmadd_ps(_mm512_loadu_ps(a2 + i), b0, u0);
        w0 = _mm512_fmadd_ps(_mm512_loadu_ps(a3 + i), b0, w0);
    }
    r[0] = _mm512_reduce_add_ps(_mm512_add_ps(p0, p1));
    r[1] = _mm512_reduce_add_ps(_mm512_add_ps(q0, q1));
    r[2] = _mm512_reduce_add_ps(_mm512_add_ps(u0, u1));
    r[3] = _mm512_reduce_add_ps(_mm512_add_ps(w0, w1));
    for (int k = 0; k < 4; k++)
        for (int j = i; j < n; j++) r[k] += a[k][j] * b[j];
#else
    for (int k = 0; k < 4; k++) r[k] = simd_dot(a[k], b, n);
#endif
}

/* y[0..n) += a * x[0..n) */
static inline void simd_axpy(float *y, float a, const float *x, int n) {
    int i = 0;
#if defined(__AVX512F__)
    __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(y + i, _mm512_fmadd_ps(va, _mm512_loadu_ps(x + i), _mm512_loadu_ps(y + i)));
#elif defined(__AVX2__) && defined(__FMA__)
    __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(va, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
#endif
    for (; i < n; i++) y[i] += a * x[i];
}

/* x[0..n) *= a: each element the same f32 product as the scalar loop (GCC
 * 12 at -O2 leaves that loop scalar). */
static inline void simd_scale(float *x, float a, int n) {
    int i = 0;
#if defined(__AVX512F__)
    __m512 va = _mm512_set1_ps(a);
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, _mm512_mul_ps(_mm512_loadu_ps(x + i), va));
#elif defined(__AVX2__)
    __m256 va = _mm256_set1_ps(a);
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), va));
#endif
    for (; i < n; i++) x[i] *= a;
}

/* Scalar exp with the same algorithm as the vector paths. Not always the
 * same bits: under -std=c11 gcc does not contract a * b + c into an FMA,
 * and the vector paths use FMAs, so results may differ in the last bits
 * (select_cpu.c's exp_uniform spells the FMAs out where it must match). */
static inline float simd_exp1(float x) {
    if (!(x > -87.33f)) return 0.0f; /* also -inf and nan-as-masked */
    if (x > 88.7f) x = 88.7f;
    float n = nearbyintf(x * 1.44269504088896341f);
    float r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = p * r * r + r + 1.0f;
    int32_t e = (int32_t)n;
    uint32_t bits;
    memcpy(&bits, &p, 4);
    bits += (uint32_t)e << 23;
    memcpy(&p, &bits, 4);
    return p;
}

#if defined(__AVX512F__)
/* exp of 16 lanes, the algorithm of simd_exp_inplace (same results lane by
 * lane): inputs below -87.33 (and -inf) give 0. */
static inline __m512 simd_exp512(__m512 v) {
    __mmask16 ok = _mm512_cmp_ps_mask(v, _mm512_set1_ps(-87.33f), _CMP_GT_OQ);
    v = _mm512_min_ps(v, _mm512_set1_ps(88.7f));
    __m512 nn = _mm512_roundscale_ps(_mm512_mul_ps(v, _mm512_set1_ps(1.44269504088896341f)),
                                     _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(nn, _mm512_set1_ps(0.693145751953125f), v);
    r = _mm512_fnmadd_ps(nn, _mm512_set1_ps(1.428606765330187045e-06f), r);
    __m512 p = _mm512_set1_ps(1.9875691500e-4f);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, r), r, _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_cvtps_epi32(nn), 23);
    p = _mm512_castsi512_ps(_mm512_add_epi32(_mm512_castps_si512(p), e));
    return _mm512_maskz_mov_ps(ok, p);
}
#endif

#if defined(__AVX512F__)
/* v[r] (r < 16) -> one vector whose lane r is the sum of v[r]'s 16 lanes.
 * Every lane is summed in the same order whatever r, so equal inputs give
 * equal sums in any position (ties stay ties for the top-k rules). */
static inline __m512 simd_hsum16x16(const __m512 *v) {
    __m512 x[8], y[4], z[2];
    for (int i = 0; i < 8; i++)
        x[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                             _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++)
        y[i] = _mm512_add_ps(_mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(x[2 * i], x[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 2; i++)
        z[i] = _mm512_add_ps(_mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(y[2 * i], y[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(z[0], z[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
#endif

#if defined(__AVX2__) && defined(__FMA__)
/* exp of 8 lanes, the same algorithm and operations (same results lane by
 * lane) as simd_exp512; simd_exp1 may differ in the last bits (above).
 * Inputs below -87.33 (and -inf, NaN) give 0. */
static inline __m256 simd_exp256(__m256 v) {
    __m256 ok = _mm256_cmp_ps(v, _mm256_set1_ps(-87.33f), _CMP_GT_OQ);
    v = _mm256_min_ps(v, _mm256_set1_ps(88.7f));
    __m256 nn = _mm256_round_ps(_mm256_mul_ps(v, _mm256_set1_ps(1.44269504088896341f)),
                                _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
    __m256 r = _mm256_fnmadd_ps(nn, _mm256_set1_ps(0.693145751953125f), v);
    r = _mm256_fnmadd_ps(nn, _mm256_set1_ps(1.428606765330187045e-06f), r);
    __m256 p = _mm256_set1_ps(1.9875691500e-4f);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, r), r, _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_cvtps_epi32(nn), 23);
    p = _mm256_castsi256_ps(_mm256_add_epi32(_mm256_castps_si256(p), e));
    return _mm256_and_ps(ok, p);
}
#endif

/* x[0..n) = exp(x[0..n)) in place. */
static inline void simd_exp_inplace(float *x, int n) {
    int i = 0;
#if defined(__AVX512F__)
    for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, simd_exp512(_mm512_loadu_ps(x + i)));
#elif defined(__AVX2__) && defined(__FMA__)
    for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, simd_exp256(_mm256_loadu_ps(x + i)));
#endif
    for (; i < n; i++) x[i] = simd_exp1(x[i]);
}

#endif
