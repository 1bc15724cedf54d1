/* act_cpu.c - the SwiGLU activation, vectorised, bit for bit the reference
 * (kernels/act.h says how and why). AVX-512F and AVX2+FMA paths, chosen at
 * compile time like the other kernels; without either, the reference. */
#include <immintrin.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "kernels/act.h"

#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))

/* 2^(i/32), i = 0..31, correctly rounded to double (computed with 60 decimal
 * digits). A wrong entry would fail tests/unit/test_act.c, whose sweep
 * reaches every entry many times. */
static const double exp2_32[32] = {
    0x1.0000000000000p+0, 0x1.059b0d3158574p+0, 0x1.0b5586cf9890fp+0, 0x1.11301d0125b51p+0,
    0x1.172b83c7d517bp+0, 0x1.1d4873168b9aap+0, 0x1.2387a6e756238p+0, 0x1.29e9df51fdee1p+0,
    0x1.306fe0a31b715p+0, 0x1.371a7373aa9cbp+0, 0x1.3dea64c123422p+0, 0x1.44e086061892dp+0,
    0x1.4bfdad5362a27p+0, 0x1.5342b569d4f82p+0, 0x1.5ab07dd485429p+0, 0x1.6247eb03a5585p+0,
    0x1.6a09e667f3bcdp+0, 0x1.71f75e8ec5f74p+0, 0x1.7a11473eb0187p+0, 0x1.82589994cce13p+0,
    0x1.8ace5422aa0dbp+0, 0x1.93737b0cdc5e5p+0, 0x1.9c49182a3f090p+0, 0x1.a5503b23e255dp+0,
    0x1.ae89f995ad3adp+0, 0x1.b7f76f2fb5e47p+0, 0x1.c199bdd85529cp+0, 0x1.cb720dcef9069p+0,
    0x1.d5818dcfba487p+0, 0x1.dfc97337b9b5fp+0, 0x1.ea4afa2a490dap+0, 0x1.f50765b6e4540p+0,
};
/* The bits of 2^(i/32) minus i << 47: adding k << 47 (k = 32 n + i) then
 * gives 2^(k/32) = 2^n 2^(i/32) (n lands in the exponent field). */
static int64_t tab_bits[32];

#define INV_LN2_32 0x1.71547652b82fep+5 /* 32 / ln 2 */
#define ROUND_SHIFT 0x1.8p+52           /* x + this rounds x to an integer */
#define P0 0x1.c6af84b912394p-20        /* 2^(r/32) ~ P0 r^3 + P1 r^2 + P2 r + 1 */
#define P1 0x1.ebfce50fac4f3p-13
#define P2 0x1.62e42ff0c52d6p-6
#define BIG_ABS 0x42b00000u /* |x| >= 88 (as bits; Inf and NaN above): libm's expf */

static void tab_init(void) {
    for (int i = 0; i < 32; i++) {
        int64_t b;
        memcpy(&b, &exp2_32[i], 8);
        tab_bits[i] = (int64_t)((uint64_t)b - ((uint64_t)i << 47));
    }
}

/* e[j] = libm's expf(x[j]) for the lanes j < n set in big (|x| >= 88, Inf,
 * NaN: where glibc leaves the fast formula or sets errno). */
static void libm_lanes(const float *x, float *e, unsigned big, int n) {
    for (int j = 0; j < n; j++)
        if (big >> j & 1) e[j] = expf(x[j]);
}

#if defined(__AVX512F__)
#define VW 16 /* floats per step */
/* exp of 8 floats (all |x| < 88), as glibc's FMA expf computes each. */
static inline __m256 exp8(__m256 xf) {
    const __m512d xd = _mm512_cvtps_pd(xf);
    const __m512d inv = _mm512_set1_pd(INV_LN2_32), sh = _mm512_set1_pd(ROUND_SHIFT);
    const __m512d kds = _mm512_fmadd_pd(inv, xd, sh);
    const __m512i ki = _mm512_castpd_si512(kds);
    const __m512d kd = _mm512_sub_pd(kds, sh);
    const __m512d r = _mm512_fmsub_pd(inv, xd, kd);
    const __m512i t0 = _mm512_loadu_si512(tab_bits), t1 = _mm512_loadu_si512(tab_bits + 8);
    const __m512i t2 = _mm512_loadu_si512(tab_bits + 16), t3 = _mm512_loadu_si512(tab_bits + 24);
    const __m512i lo = _mm512_permutex2var_epi64(t0, ki, t1);
    const __m512i hi = _mm512_permutex2var_epi64(t2, ki, t3);
    const __m512i t = _mm512_mask_blend_epi64(_mm512_test_epi64_mask(ki, _mm512_set1_epi64(16)), lo, hi);
    const __m512d s = _mm512_castsi512_pd(_mm512_add_epi64(t, _mm512_slli_epi64(ki, 47)));
    const __m512d z = _mm512_fmadd_pd(r, _mm512_set1_pd(P0), _mm512_set1_pd(P1));
    const __m512d r2 = _mm512_mul_pd(r, r);
    __m512d y = _mm512_fmadd_pd(r, _mm512_set1_pd(P2), _mm512_set1_pd(1.0));
    y = _mm512_fmadd_pd(z, r2, y);
    return _mm512_cvtpd_ps(_mm512_mul_pd(y, s));
}
/* e[0..16) = expf(x[0..16)), lanes out of range through libm. */
static inline __m512 exp16(__m512 x) {
    const __m512i ax = _mm512_and_si512(_mm512_castps_si512(x), _mm512_set1_epi32(0x7fffffff));
    const __mmask16 big = _mm512_cmpge_epu32_mask(ax, _mm512_set1_epi32((int)BIG_ABS));
    const __m512 xs = _mm512_mask_blend_ps(big, x, _mm512_setzero_ps());
    /* halves through the f64x4 insert/extract: AVX-512F only (f32x8 is DQ) */
    const __m256 hi = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(xs), 1));
    __m512 e = _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castps_pd(_mm512_castps256_ps512(
                                                       exp8(_mm512_castps512_ps256(xs)))),
                                                   _mm256_castps_pd(exp8(hi)), 1));
    if (big) {
        float xv[16], ev[16];
        _mm512_storeu_ps(xv, x);
        _mm512_storeu_ps(ev, e);
        libm_lanes(xv, ev, big, 16);
        e = _mm512_loadu_ps(ev);
    }
    return e;
}
static void exp_block(const float *x, float *e) { _mm512_storeu_ps(e, exp16(_mm512_loadu_ps(x))); }
static void silu_block(float *h, const float *h2) {
    const __m512 g = _mm512_loadu_ps(h);
    const __m512 e = exp16(_mm512_castsi512_ps(
        _mm512_xor_si512(_mm512_castps_si512(g), _mm512_set1_epi32((int)0x80000000u))));
    const __m512 q = _mm512_div_ps(g, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    _mm512_storeu_ps(h, _mm512_mul_ps(q, _mm512_loadu_ps(h2)));
}
#else
#define VW 8
static inline __m128 exp4(__m128 xf) {
    const __m256d xd = _mm256_cvtps_pd(xf);
    const __m256d inv = _mm256_set1_pd(INV_LN2_32), sh = _mm256_set1_pd(ROUND_SHIFT);
    const __m256d kds = _mm256_fmadd_pd(inv, xd, sh);
    const __m256i ki = _mm256_castpd_si256(kds);
    const __m256d kd = _mm256_sub_pd(kds, sh);
    const __m256d r = _mm256_fmsub_pd(inv, xd, kd);
    const __m256i t = _mm256_i64gather_epi64((const long long *)tab_bits,
                                             _mm256_and_si256(ki, _mm256_set1_epi64x(31)), 8);
    const __m256d s = _mm256_castsi256_pd(_mm256_add_epi64(t, _mm256_slli_epi64(ki, 47)));
    const __m256d z = _mm256_fmadd_pd(r, _mm256_set1_pd(P0), _mm256_set1_pd(P1));
    const __m256d r2 = _mm256_mul_pd(r, r);
    __m256d y = _mm256_fmadd_pd(r, _mm256_set1_pd(P2), _mm256_set1_pd(1.0));
    y = _mm256_fmadd_pd(z, r2, y);
    return _mm256_cvtpd_ps(_mm256_mul_pd(y, s));
}
static inline __m256 exp8v(__m256 x) {
    const __m256i ax = _mm256_and_si256(_mm256_castps_si256(x), _mm256_set1_epi32(0x7fffffff));
    /* ax >= BIG_ABS as signed ints (ax < 2^31) */
    const __m256i bigv = _mm256_cmpgt_epi32(ax, _mm256_set1_epi32((int)BIG_ABS - 1));
    const int big = _mm256_movemask_ps(_mm256_castsi256_ps(bigv));
    const __m256 xs = _mm256_andnot_ps(_mm256_castsi256_ps(bigv), x);
    __m256 e = _mm256_insertf128_ps(_mm256_castps128_ps256(exp4(_mm256_castps256_ps128(xs))),
                                    exp4(_mm256_extractf128_ps(xs, 1)), 1);
    if (big) {
        float xv[8], ev[8];
        _mm256_storeu_ps(xv, x);
        _mm256_storeu_ps(ev, e);
        libm_lanes(xv, ev, (unsigned)big, 8);
        e = _mm256_loadu_ps(ev);
    }
    return e;
}
static void exp_block(const float *x, float *e) { _mm256_storeu_ps(e, exp8v(_mm256_loadu_ps(x))); }
static void silu_block(float *h, const float *h2) {
    const __m256 g = _mm256_loadu_ps(h);
    const __m256 e = exp8v(_mm256_xor_ps(g, _mm256_set1_ps(-0.0f)));
    const __m256 q = _mm256_div_ps(g, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    _mm256_storeu_ps(h, _mm256_mul_ps(q, _mm256_loadu_ps(h2)));
}
#endif

/* 1 vector path matches libm, 2 it does not (use the reference); set once. */
static int act_state;
static pthread_once_t act_once = PTHREAD_ONCE_INIT;

static void act_init(void) {
    enum { N = 4096 };
    static float x[N], e[N]; /* once per process (pthread_once); no large stack arrays */
    tab_init();
    uint32_t s = 0x9e3779b9u;
    for (int j = 0; j < N; j++) {
        if (j & 1) { /* uniform in value over (-88, 88) */
            x[j] = -88.0f + 176.0f * ((float)j + 0.5f) / N;
        } else { /* uniform in bits below 88 in magnitude, either sign */
            uint32_t b;
            do {
                s = s * 1664525u + 1013904223u;
                b = s;
            } while ((b & 0x7fffffffu) >= BIG_ABS);
            memcpy(&x[j], &b, 4);
        }
    }
    for (int j = 0; j < N; j += VW) exp_block(x + j, e + j);
    act_state = 1;
    for (int j = 0; j < N; j++) {
        float l = expf(x[j]);
        if (memcmp(&l, &e[j], 4)) act_state = 2;
    }
}

int kb_silu_mul_vector(void) {
    pthread_once(&act_once, act_init);
    return act_state == 1;
}

void kb_silu_mul(float *h, const float *h2, size_t n) {
    if (!kb_silu_mul_vector()) {
        kb_silu_mul_ref(h, h2, n);
        return;
    }
    size_t i = 0;
    for (; i + VW <= n; i += VW) silu_block(h + i, h2 + i);
    kb_silu_mul_ref(h + i, h2 + i, n - i);
}

#else /* no vector path */
int kb_silu_mul_vector(void) { return 0; }
void kb_silu_mul(float *h, const float *h2, size_t n) { kb_silu_mul_ref(h, h2, n); }
#endif
