/* quant_cpu.c - fast dequantisation and y = W x for the CPU.
 *
 * kb_dequant: SIMD versions of the reference formulas, same floating-point
 * operations in the same order, so the results equal kb_dequant_ref bit for
 * bit.
 *
 * kb_matvec: the decode hot path, memory-bound. Two versions, chosen by
 * kb_matvec_mode() (quant.h):
 *
 * kb_matvec_exact (default): x stays f32. The 32-element block types are
 * computed as sum_b d_b * (sum_j q_j x_j) + sum_b m_b * xsum_b: the block's
 * integers q_j are turned into exact f32 values in registers (AVX-512: a
 * 16-entry permute table indexed by the nibbles; AVX2: convert), multiplied
 * with x, summed per block in a vector, and the block scale d_b is folded in
 * with one vector FMA into the row accumulator, so the horizontal sum happens
 * once per row. The Q5_1 minimum m_b multiplies xsum_b = sum of x over block
 * b, computed once per call; Q5_0 keeps the offset inside the table (q - 16
 * exactly). Q4_0 and Q4_1 (SmolLM2's matrices) go one step further on
 * AVX-512: the table holds the block's 16 weight values d*(q - 8) or
 * fl(d*q + m) (one FMA per block instead of the fold and the m term), and x
 * is permuted once per call to the lane order of a broadcast of the block's
 * 16 bytes shifted per lane, which saves the zero-extension shuffle (7
 * vector ops per block; ~8% faster than the fold form, measured). The f16
 * scales are gathered 16 at a time across 4 rows and converted with F16C.
 * Q4_K does the same per 32-element sub-block (scale d*sc, min dmin*mn times
 * xsum); Q6_K per 16-element sub-block with (q - 32) exact. F16/BF16/F32 are
 * f32 dots. Only f32 rounding separates the result from kb_matvec_ref (bound
 * in quant.h). AVX-512F kernels where available; with AVX2+FMA only, Q4_0,
 * Q4_1 and Q8_0 have 8-lane kernels and the rest dequantise a chunk (bit
 * exact) and dot; plain C dequantises and dots.
 *
 * kb_matvec_q8 (KVBENCH_MATVEC=q8, llama.cpp-like numerics): for the
 * 32-element block types (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0) x is quantised once
 * per call to 8-bit blocks of 32 (scale dx = max|x|/127,
 * q = round-to-nearest-even(x/dx), plus sx = dx*sum(q)), and every weight
 * block contributes
 *     dw*dx*sum_j(qw_j*qx_j) + mw*sx
 * with the integer sum done by u8 x i8 multiply-adds (AVX-512 VNNI dpbusd
 * where available, else AVX2 maddubs+madd, else plain C). Q4_0 and Q5_0 are
 * written as unsigned nibbles with mw = -8*dw / -16*dw. Q8_0 uses the sign
 * trick (|w| times x with w's sign). Q4_K and Q6_K do the same with x
 * quantised per 256 (plus sums per 16 for the mins/offsets, like llama.cpp's
 * Q8_K). The error this adds is documented in quant.h. F32, F16 and BF16
 * dot in f32 as in the exact path.
 *
 * Q4_1 and Q8_0 matrices regrouped by the loader (KB_LAYOUT_R16, quant.h;
 * the x24 mode) have their own kernels, whatever the mode: x is turned once
 * per call into 24-bit integers per block of 32 (a power-of-two scale per
 * block), split into three signed bytes, and one VNNI dpbusd per (vector of
 * 4 columns x 16 rows, byte of x) multiplies-adds them, exactly, in 32-bit
 * lanes (one lane per row). Q4_1's block of 16 rows is 4 x 64 bytes of
 * nibbles, unpacked by one AND and one GF2P8AFFINE (a per-byte shift by 4)
 * each; Q8_0's is 8 x 64 bytes stored as unsigned bytes (q + 128), the
 * offset taken out with per-block sums of x's bytes. Per Q4_1 block: 24
 * dpbusd, 8 unpacks, ~10 operations to combine the bytes and apply d and m,
 * for 16 rows: ~2.6 vector operations per row-block instead of 7 (3x the
 * rate, cache-resident, measured). With AVX2 only (no VNNI) the same sums
 * come from vpmaddubsw + 16-bit adds + one vpmaddwd per block and byte of x,
 * 8 rows per vector (~9.5 operations per Q4_1 row-block against the exact
 * AVX2 kernel's ~16); the same y bit for bit (see "R16 on AVX2" below).
 *
 * Threads (both): the decode worker pool (kernels/pool.h; not OpenMP, whose
 * barriers stall when another process holds a core), rows split into chunks
 * of a multiple of 16 rows (two threads never write the same 64-byte line of
 * y) claimed dynamically; small matrices stay on the calling thread.
 *
 * Prefetch: every kernel issues a software prefetch PF_DIST bytes ahead in
 * the weight stream (see below). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <stdatomic.h>
#include <stdio.h>

#if defined(__AVX2__) || defined(__AVX512F__)
#include <immintrin.h>
#endif
#include "kernels/pool.h"
#include "kernels/quant.h"

/* Software prefetch distance in bytes of weights. Without it a thread's
 * integer work and its memory stalls add up instead of overlapping (measured
 * here: 1536x576 Q4_1 from DRAM, 2 threads, 11 GB/s without, 19-20 GB/s with
 * 2-4 KiB; the hardware prefetcher alone does not run far enough ahead). */
#ifndef PF_DIST
#define PF_DIST 4096
#endif
/* rows_exact_32 prefetches a 4-row group longer than PF_ROW_MIN bytes as
 * four streams, PF_ROW_DIST ahead in each row; shorter groups linearly.
 * Measured in one process, linear vs per-row (docs/PERFORMANCE.md): the
 * Llama-3.1-8B-shaped mat-vecs of a token (rows of 2.5-9 KB) 306-362 ->
 * 254-311 ms; per-row distances of 512 B or 2 KB, or per-row streams for
 * SmolLM2's 2.4-3.8 KB groups, were slower. */
#ifndef PF_ROW_DIST
#define PF_ROW_DIST (PF_DIST / 4)
#endif
#ifndef PF_ROW_MIN
#define PF_ROW_MIN PF_DIST
#endif
#ifdef NO_PERROW /* the linear prefetch only, for A/B measurements */
#define NO_PERROW_ON 1
#else
#define NO_PERROW_ON 0
#endif
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T0
#endif

/* Kernels written once with parameters, expanded per type at compile time. */
#define ALWAYS_INLINE inline __attribute__((always_inline))

#if defined(__AVX2__) || defined(__AVX512F__)
/* The weight prefetch of one block step of a group of R rows (row bytes rb,
 * block bytes `bytes`, block blk) in the 4-row exact kernels: per_row, each
 * row its own stream PF_ROW_DIST ahead, running on into the same row of the
 * next group; else the step's `step` bytes at pf, linearly (PF_DIST ahead). */
static ALWAYS_INLINE void pf_block_step(const uint8_t *w, size_t rb, int R, int bytes, int blk, int per_row,
                                        const char *pf, int step) {
    if (per_row) {
        size_t off = (size_t)blk * bytes + PF_ROW_DIST;
        if (off >= rb) off += (size_t)(R - 1) * rb;
#pragma GCC unroll 4
        for (int i = 0; i < R; i++) _mm_prefetch((const char *)w + i * rb + off, PF_HINT);
    } else {
        for (int l = 0; l < step; l += 64) _mm_prefetch(pf + l, PF_HINT);
    }
}
#endif

static inline uint16_t rd_u16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static inline uint32_t rd_u32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}
static inline float f16(const uint8_t *p) {
#ifdef __F16C__
    return _cvtsh_ss(rd_u16(p));
#else
    return kb_f16_to_f32(rd_u16(p));
#endif
}

/* ================================================================ dequant */

#ifdef __AVX2__
/* 32 unsigned nibbles of a 16-byte qs: bytes 0..15 low nibbles (elements
 * 0..15), bytes 16..31 high nibbles (elements 16..31). */
static inline __m256i nibbles32(const uint8_t *qs) {
    __m128i raw = _mm_loadu_si128((const __m128i *)qs);
    __m256i v = _mm256_set_m128i(_mm_srli_epi16(raw, 4), raw);
    return _mm256_and_si256(v, _mm256_set1_epi8(15));
}

/* 0x10 in byte j where bit j of h is set (the 5th bit of Q5 elements). */
static inline __m256i q5_high_bits(uint32_t h) {
    __m256i v = _mm256_set1_epi32((int)h);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL,
                                           0x0101010101010101LL, 0x0000000000000000LL);
    v = _mm256_shuffle_epi8(v, shuf);
    const __m256i bit = _mm256_set1_epi64x((long long)0x8040201008040201ULL);
    v = _mm256_cmpeq_epi8(_mm256_and_si256(v, bit), bit);
    return _mm256_and_si256(v, _mm256_set1_epi8(0x10));
}

/* y[0..32) = d*(q - off) (off = 8 or 16, or 0 for signed Q8_0 bytes) or d*q + m. */
static inline void store_u8x32(const __m256i q, int is_signed, float d, float off, int has_m,
                               float m, float *y) {
    __m256 vd = _mm256_set1_ps(d), vm = _mm256_set1_ps(m), voff = _mm256_set1_ps(off);
    __m128i halves[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int h = 0; h < 2; h++) {
        for (int k = 0; k < 2; k++) {
            __m128i b8 = k ? _mm_srli_si128(halves[h], 8) : halves[h];
            __m256i i32 = is_signed ? _mm256_cvtepi8_epi32(b8) : _mm256_cvtepu8_epi32(b8);
            __m256 f = _mm256_cvtepi32_ps(i32);
            /* (q - off) is exact in float; then one rounding for d*(...),
             * and for Q4_1/Q5_1 a second one for + m, as in the reference. */
            if (off != 0.0f) f = _mm256_sub_ps(f, voff);
            f = _mm256_mul_ps(vd, f);
            if (has_m) f = _mm256_add_ps(f, vm);
            _mm256_storeu_ps(y + 16 * h + 8 * k, f);
        }
    }
}
#endif

/* Q4_K's 8 six-bit scales and mins from the 12 packed bytes (layout of
 * spec engine.md §5, done four bytes at a time). */
static inline void q4k_unpack(const uint8_t *s12, uint8_t sc[8], uint8_t mn[8]) {
    uint32_t w0 = rd_u32(s12), w1 = rd_u32(s12 + 4), w2 = rd_u32(s12 + 8);
    uint32_t sc_lo = w0 & 0x3f3f3f3fu, mn_lo = w1 & 0x3f3f3f3fu;
    uint32_t sc_hi = (w2 & 0x0f0f0f0fu) | ((w0 >> 2) & 0x30303030u);
    uint32_t mn_hi = ((w2 >> 4) & 0x0f0f0f0fu) | ((w1 >> 2) & 0x30303030u);
    memcpy(sc, &sc_lo, 4);
    memcpy(sc + 4, &sc_hi, 4);
    memcpy(mn, &mn_lo, 4);
    memcpy(mn + 4, &mn_hi, 4);
}

#ifdef __AVX2__
/* The four 32-element groups of one Q6_K half (6-bit unsigned values):
 * group 0 = low nibbles of ql[0..32) + bits 0-1 of qh, group 1 = low nibbles
 * of ql[32..64) + bits 2-3, groups 2/3 the high nibbles + bits 4-5 / 6-7. */
static inline void q6k_unpack(const uint8_t *ql, const uint8_t *qh, __m256i q[4]) {
    const __m256i m4 = _mm256_set1_epi8(15), m3 = _mm256_set1_epi8(3);
    __m256i l0 = _mm256_loadu_si256((const __m256i *)(const void *)ql);
    __m256i l1 = _mm256_loadu_si256((const __m256i *)(const void *)(ql + 32));
    __m256i hb = _mm256_loadu_si256((const __m256i *)(const void *)qh);
    q[0] = _mm256_or_si256(_mm256_and_si256(l0, m4), _mm256_slli_epi16(_mm256_and_si256(hb, m3), 4));
    q[1] = _mm256_or_si256(_mm256_and_si256(l1, m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 2), m3), 4));
    q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 4), m3), 4));
    q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), m4),
                           _mm256_slli_epi16(_mm256_and_si256(_mm256_srli_epi16(hb, 6), m3), 4));
}

/* y[0..32) = s*(q - off) [- m], with s = s_lo for elements 0..15 and s_hi
 * for 16..31; (q - off) is exact, then one rounding for the product and one
 * for the subtraction of m when has_m (always done then: -0 - -0 is +0). */
static inline void store_kquant32(__m256i q, float s_lo, float s_hi, float off, int has_m, float m,
                                  float *y) {
    __m128i halves[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int h = 0; h < 2; h++) {
        __m256 vs = _mm256_set1_ps(h ? s_hi : s_lo);
        for (int k = 0; k < 2; k++) {
            __m128i b8 = k ? _mm_srli_si128(halves[h], 8) : halves[h];
            __m256 f = _mm256_sub_ps(_mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b8)), _mm256_set1_ps(off));
            f = _mm256_mul_ps(vs, f);
            if (has_m) f = _mm256_sub_ps(f, _mm256_set1_ps(m));
            _mm256_storeu_ps(y + 16 * h + 8 * k, f);
        }
    }
}
#endif

void kb_dequant(uint32_t type, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
#ifdef __AVX2__
    int64_t nb = n / 32;
    switch (type) {
    case GGML_F16: {
        int64_t i = 0;
#ifdef __F16C__
        /* exact conversion; NaN payloads may be quietened (tests use finite values) */
        for (; i + 8 <= n; i += 8)
            _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + 2 * i))));
#endif
        for (; i < n; i++) dst[i] = kb_f16_to_f32(rd_u16(p + 2 * i));
        return;
    }
    case GGML_BF16: {
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) {
            __m256i v = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(p + 2 * i)));
            _mm256_storeu_ps(dst + i, _mm256_castsi256_ps(_mm256_slli_epi32(v, 16)));
        }
        for (; i < n; i++) dst[i] = kb_bf16_to_f32(rd_u16(p + 2 * i));
        return;
    }
    case GGML_Q8_0:
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = p + b * 34;
            store_u8x32(_mm256_loadu_si256((const __m256i *)(blk + 2)), 1, f16(blk), 0, 0, 0,
                        dst + 32 * b);
        }
        return;
    case GGML_Q4_0:
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = p + b * 18;
            store_u8x32(nibbles32(blk + 2), 0, f16(blk), 8, 0, 0, dst + 32 * b);
        }
        return;
    case GGML_Q4_1:
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = p + b * 20;
            store_u8x32(nibbles32(blk + 4), 0, f16(blk), 0, 1, f16(blk + 2), dst + 32 * b);
        }
        return;
    case GGML_Q5_0:
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = p + b * 22;
            __m256i q = _mm256_or_si256(nibbles32(blk + 6), q5_high_bits(rd_u32(blk + 2)));
            store_u8x32(q, 0, f16(blk), 16, 0, 0, dst + 32 * b);
        }
        return;
    case GGML_Q5_1:
        for (int64_t b = 0; b < nb; b++) {
            const uint8_t *blk = p + b * 24;
            __m256i q = _mm256_or_si256(nibbles32(blk + 8), q5_high_bits(rd_u32(blk + 4)));
            store_u8x32(q, 0, f16(blk), 0, 1, f16(blk + 2), dst + 32 * b);
        }
        return;
    case GGML_Q4_K:
        for (int64_t b = 0; b < n / 256; b++) {
            const uint8_t *blk = p + b * 144, *qs = blk + 16;
            float d = f16(blk), dmin = f16(blk + 2), *y = dst + 256 * b;
            uint8_t sc[8], mn[8];
            q4k_unpack(blk + 4, sc, mn);
            for (int c = 0; c < 4; c++) {
                __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
                __m256i lo = _mm256_and_si256(q, _mm256_set1_epi8(15));
                __m256i hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), _mm256_set1_epi8(15));
                /* (d*sc)*q - dmin*mn, each product rounded, as the reference */
                store_kquant32(lo, d * (float)sc[2 * c], d * (float)sc[2 * c], 0, 1, dmin * (float)mn[2 * c],
                               y + 64 * c);
                store_kquant32(hi, d * (float)sc[2 * c + 1], d * (float)sc[2 * c + 1], 0, 1,
                               dmin * (float)mn[2 * c + 1], y + 64 * c + 32);
            }
        }
        return;
    case GGML_Q6_K:
        for (int64_t b = 0; b < n / 256; b++) {
            const uint8_t *blk = p + b * 210, *ql = blk, *qh = blk + 128;
            const int8_t *sc = (const int8_t *)(blk + 192);
            float d = f16(blk + 208), *y = dst + 256 * b;
            __m256i q[4];
            for (int h = 0; h < 2; h++) {
                q6k_unpack(ql + 64 * h, qh + 32 * h, q);
                for (int g = 0; g < 4; g++) {
                    int is = 8 * h + 2 * g;
                    /* (d*sc)*(q-32): elements 0..15 of the group use sc[is], 16..31 sc[is+1] */
                    store_kquant32(q[g], d * (float)sc[is], d * (float)sc[is + 1], 32.0f, 0, 0.0f,
                                   y + 128 * h + 32 * g);
                }
            }
        }
        return;
    default: break;
    }
#endif
    kb_dequant_ref(type, p, dst, n);
}

/* ================================================== activation quantisation */

/* x quantised to blocks of 32 int8: x[32b + j] ~ ds[2b] * q[32b + j]. */
typedef struct xq8 {
    int nb;     /* blocks (cols / 32) */
    float *ds;  /* [nb][2]: dx = max|x|/127 (0 for an all-zero block), and
                 * sx' = dx * sum(q) * min_mult, the factor the weight block's
                 * min (or d, for Q4_0/Q5_0) multiplies; 8-byte aligned */
    int8_t *q;  /* [nb * 32], 32-byte aligned */
} xq8;

/* min_mult: 1 for Q4_1/Q5_1 (min m stored), -8 / -16 for Q4_0 / Q5_0 (the
 * offset folded in as a min of -8d / -16d), 0 for Q8_0. */
static void xq8_quantise(const float *x, int cols, int min_mult, xq8 *out) {
    int nb = cols / 32;
    for (int b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        int8_t *qb = out->q + 32 * b;
#ifdef __AVX2__
        const __m256 sign = _mm256_set1_ps(-0.0f);
        __m256 v[4], amax = _mm256_setzero_ps();
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(xb + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[k]));
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float d = _mm_cvtss_f32(m4) / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        __m256 vid = _mm256_set1_ps(id);
        __m256i i32[4];
        for (int k = 0; k < 4; k++) /* round to nearest even (default MXCSR) */
            i32[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], vid));
        __m256i sum = _mm256_add_epi32(_mm256_add_epi32(i32[0], i32[1]),
                                       _mm256_add_epi32(i32[2], i32[3]));
        __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(sum), _mm256_extracti128_si256(sum, 1));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0x4e));
        s4 = _mm_add_epi32(s4, _mm_shuffle_epi32(s4, 0xb1));
        int isum = _mm_cvtsi128_si32(s4);
        /* pack 32 i32 -> 32 i8 in element order (packs work per 128-bit lane) */
        __m256i p16a = _mm256_packs_epi32(i32[0], i32[1]);
        __m256i p16b = _mm256_packs_epi32(i32[2], i32[3]);
        __m256i p8 = _mm256_packs_epi16(p16a, p16b);
        p8 = _mm256_permutevar8x32_epi32(p8, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_store_si256((__m256i *)qb, p8);
#else
        float amax = 0.0f;
        for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int isum = 0;
        for (int j = 0; j < 32; j++) {
            int q = (int)nearbyintf(xb[j] * id);
            qb[j] = (int8_t)q;
            isum += q;
        }
#endif
        out->ds[2 * b] = d;
        out->ds[2 * b + 1] = d * (float)(isum * min_mult);
    }
}

/* ============================================================ row kernels */

#ifdef __AVX2__
static inline __m256i dot_u8_i8(__m256i u, __m256i s) {
#if defined(__AVX512VNNI__) && defined(__AVX512VL__)
    return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
#else
    return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
#endif
}

static inline float hsum_ps(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}
#endif

#ifdef __AVX2__
/* One weight row of a 32-block type against the quantised x. Per block i,
 * SCALES(i) gives an xmm [dw*dx, mw*sx, ., .] and QW(i) the 32 unsigned
 * weights (or |w| for Q8_0, with QX(i) carrying w's sign). The dw*dx part
 * scales the integer dot's 8 lanes into acc; the min part accumulates in
 * lane 1 of sacc. Two independent chains of each hide the add latency. */
#define ROW_LOOP(BLOCK)                                                            \
    __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();                 \
    __m128 sacc0 = _mm_setzero_ps(), sacc1 = _mm_setzero_ps();                     \
    int b = 0;                                                                     \
    for (; b + 1 < x->nb; b += 2) {                                                \
        _mm_prefetch((const char *)w + (size_t)b * BYTES + PF_DIST, PF_HINT);  \
        BLOCK(b, acc0, sacc0);                                                     \
        BLOCK(b + 1, acc1, sacc1);                                                 \
    }                                                                              \
    if (b < x->nb) BLOCK(b, acc0, sacc0);                                          \
    __m128 sacc = _mm_add_ps(sacc0, sacc1);                                        \
    return hsum_ps(_mm256_add_ps(acc0, acc1)) + _mm_cvtss_f32(_mm_movehdup_ps(sacc));

/* [dx, sx'] of block i as an xmm (sx' = sx times the type's min multiplier) */
#define XDS(i) _mm_castpd_ps(_mm_load_sd((const double *)(const void *)(x->ds + 2 * (i))))
/* [d, m] -> floats, for types storing both */
#define DM(blk) _mm_cvtph_ps(_mm_cvtsi32_si128((int)rd_u32(blk)))
/* [d, d] -> floats, for types whose min is a multiple of d (folded into sx') */
#define DD(blk) _mm_cvtph_ps(_mm_set1_epi16((short)rd_u16(blk)))

#define BLOCK_Q(i, acc, sacc, bytes, qoff, QW, SC)                                               \
    do {                                                                                         \
        const uint8_t *blk = w + (size_t)(i) * (bytes);                                          \
        __m128 sc = _mm_mul_ps(SC(blk), XDS(i));                                                 \
        __m256i p = dot_u8_i8(QW, _mm256_load_si256((const __m256i *)(const void *)(x->q + 32 * (i)))); \
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(sc), _mm256_cvtepi32_ps(p), acc);            \
        sacc = _mm_add_ps(sacc, sc);                                                             \
    } while (0)

static float row_q4_0(const uint8_t *w, const xq8 *x) {
    enum { BYTES = 18 };
#define BLK(i, acc, sacc) BLOCK_Q(i, acc, sacc, 18, 2, nibbles32(blk + 2), DD)
    ROW_LOOP(BLK)
#undef BLK
}

static float row_q4_1(const uint8_t *w, const xq8 *x) {
    enum { BYTES = 20 };
#define BLK(i, acc, sacc) BLOCK_Q(i, acc, sacc, 20, 4, nibbles32(blk + 4), DM)
    ROW_LOOP(BLK)
#undef BLK
}

static float row_q5_0(const uint8_t *w, const xq8 *x) {
    enum { BYTES = 22 };
#define BLK(i, acc, sacc) \
    BLOCK_Q(i, acc, sacc, 22, 6, _mm256_or_si256(nibbles32(blk + 6), q5_high_bits(rd_u32(blk + 2))), DD)
    ROW_LOOP(BLK)
#undef BLK
}

static float row_q5_1(const uint8_t *w, const xq8 *x) {
    enum { BYTES = 24 };
#define BLK(i, acc, sacc) \
    BLOCK_Q(i, acc, sacc, 24, 8, _mm256_or_si256(nibbles32(blk + 8), q5_high_bits(rd_u32(blk + 4))), DM)
    ROW_LOOP(BLK)
#undef BLK
}

/* Q8_0 has no min (its sx' is 0); sacc stays zero. */
static float row_q8_0(const uint8_t *w, const xq8 *x) {
    enum { BYTES = 34 };
#define BLK(i, acc, sacc)                                                                        \
    do {                                                                                         \
        const uint8_t *blk = w + (size_t)(i) * 34;                                               \
        __m128 sc = _mm_mul_ps(DD(blk), XDS(i));                                                 \
        __m256i qw = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 2));               \
        __m256i qx = _mm256_load_si256((const __m256i *)(const void *)(x->q + 32 * (i)));       \
        __m256i p = dot_u8_i8(_mm256_sign_epi8(qw, qw), _mm256_sign_epi8(qx, qw));               \
        acc = _mm256_fmadd_ps(_mm256_broadcastss_ps(sc), _mm256_cvtepi32_ps(p), acc);            \
        (void)sacc;                                                                              \
    } while (0)
    ROW_LOOP(BLK)
#undef BLK
}
#undef ROW_LOOP

#else /* plain C: the same integer dot products */

static inline int q5_bit(uint32_t h, int j) { return (int)((h >> j) & 1) << 4; }

static float row_q4_0(const uint8_t *w, const xq8 *x) {
    float acc = 0.0f;
    for (int b = 0; b < x->nb; b++) {
        const uint8_t *blk = w + (size_t)b * 18, *qs = blk + 2;
        const int8_t *qx = x->q + 32 * b;
        int s = 0;
        for (int j = 0; j < 16; j++) s += (qs[j] & 15) * qx[j] + (qs[j] >> 4) * qx[j + 16];
        float dw = f16(blk);
        acc += dw * x->ds[2 * b] * (float)s + dw * x->ds[2 * b + 1];
    }
    return acc;
}

static float row_q4_1(const uint8_t *w, const xq8 *x) {
    float acc = 0.0f;
    for (int b = 0; b < x->nb; b++) {
        const uint8_t *blk = w + (size_t)b * 20, *qs = blk + 4;
        const int8_t *qx = x->q + 32 * b;
        int s = 0;
        for (int j = 0; j < 16; j++) s += (qs[j] & 15) * qx[j] + (qs[j] >> 4) * qx[j + 16];
        acc += f16(blk) * x->ds[2 * b] * (float)s + f16(blk + 2) * x->ds[2 * b + 1];
    }
    return acc;
}

static float row_q5_0(const uint8_t *w, const xq8 *x) {
    float acc = 0.0f;
    for (int b = 0; b < x->nb; b++) {
        const uint8_t *blk = w + (size_t)b * 22, *qs = blk + 6;
        uint32_t h = rd_u32(blk + 2);
        const int8_t *qx = x->q + 32 * b;
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += ((qs[j] & 15) | q5_bit(h, j)) * qx[j] + ((qs[j] >> 4) | q5_bit(h, j + 16)) * qx[j + 16];
        float dw = f16(blk);
        acc += dw * x->ds[2 * b] * (float)s + dw * x->ds[2 * b + 1];
    }
    return acc;
}

static float row_q5_1(const uint8_t *w, const xq8 *x) {
    float acc = 0.0f;
    for (int b = 0; b < x->nb; b++) {
        const uint8_t *blk = w + (size_t)b * 24, *qs = blk + 8;
        uint32_t h = rd_u32(blk + 4);
        const int8_t *qx = x->q + 32 * b;
        int s = 0;
        for (int j = 0; j < 16; j++)
            s += ((qs[j] & 15) | q5_bit(h, j)) * qx[j] + ((qs[j] >> 4) | q5_bit(h, j + 16)) * qx[j + 16];
        acc += f16(blk) * x->ds[2 * b] * (float)s + f16(blk + 2) * x->ds[2 * b + 1];
    }
    return acc;
}

static float row_q8_0(const uint8_t *w, const xq8 *x) {
    float acc = 0.0f;
    for (int b = 0; b < x->nb; b++) {
        const uint8_t *blk = w + (size_t)b * 34;
        const int8_t *qx = x->q + 32 * b;
        /* read the weights through an int8_t pointer: GCC 12.2 with VNNI
         * vectorises "(int8_t)u8[j] * i8[j]" as an unsigned dot product
         * (wrong sums; tests/unit/test_quant_scalar.c caught it) */
        const int8_t *qw = (const int8_t *)(blk + 2);
        int s = 0;
        for (int j = 0; j < 32; j++) s += qw[j] * qx[j];
        acc += f16(blk) * x->ds[2 * b] * (float)s;
    }
    return acc;
}
#endif

/* ======================================== K-quants: Q8_K-like activations */

/* x quantised per super-block of 256: x[256b + j] ~ d[b] * q[256b + j], with
 * the sums of q over each 16 elements (the Q6_K sub-block; pairs of them are
 * Q4_K's 32-element sub-blocks), so the weight offsets/mins cost one integer
 * multiply-add per sub-block instead of one per element. */
typedef struct xq8k {
    int nb;          /* super-blocks (cols / 256) */
    float *d;        /* [nb] max|x|/127 over the 256 (0 if all zero) */
    int16_t *bsums;  /* [nb][16] sum of q over elements 16i..16i+15 */
    int8_t *q;       /* [nb * 256], 32-byte aligned */
} xq8k;

static void xq8k_quantise(const float *x, int cols, xq8k *out) {
    for (int b = 0; b < cols / 256; b++) {
        const float *xb = x + 256 * b;
        float amax = 0.0f;
        for (int j = 0; j < 256; j++) amax = fmaxf(amax, fabsf(xb[j]));
        float d = amax / 127.0f;
        float id = d != 0.0f ? 1.0f / d : 0.0f;
        int8_t *q = out->q + 256 * b;
        for (int j = 0; j < 256; j++) q[j] = (int8_t)nearbyintf(xb[j] * id);
        for (int i = 0; i < 16; i++) {
            int s = 0;
            for (int j = 0; j < 16; j++) s += q[16 * i + j];
            out->bsums[16 * b + i] = (int16_t)s;
        }
        out->d[b] = d;
    }
}


/* Q4_K row: per super-block d*dx*sum_k sc_k*sum(q*qx) - dmin*dx*sum_k mn_k*sum(qx). */
static float row_q4_k(const uint8_t *w, const xq8k *x) {
#ifdef __AVX2__
    __m256 acc = _mm256_setzero_ps();
    const __m256i m4 = _mm256_set1_epi8(15);
    float summ = 0.0f;
#else
    float acc = 0.0f;
#endif
    for (int b = 0; b < x->nb; b++) {
        const uint8_t *blk = w + (size_t)b * 144, *qs = blk + 16;
        const int8_t *qx = x->q + 256 * b;
        const int16_t *bs = x->bsums + 16 * b;
        uint8_t sc[8], mn[8];
        q4k_unpack(blk + 4, sc, mn);
        int msum = 0;
        for (int k = 0; k < 8; k++) msum += mn[k] * (bs[2 * k] + bs[2 * k + 1]);
        float dmin_term = f16(blk + 2) * x->d[b] * (float)msum;
#ifdef __AVX2__
        summ += dmin_term;
        _mm_prefetch((const char *)blk + PF_DIST, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 64, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 128, PF_HINT);
        __m256i isum = _mm256_setzero_si256();
        for (int c = 0; c < 4; c++) {
            __m256i q = _mm256_loadu_si256((const __m256i *)(const void *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            __m256i plo = _mm256_maddubs_epi16(lo, _mm256_load_si256((const __m256i *)(const void *)(qx + 64 * c)));
            __m256i phi = _mm256_maddubs_epi16(hi, _mm256_load_si256((const __m256i *)(const void *)(qx + 64 * c + 32)));
            plo = _mm256_madd_epi16(plo, _mm256_set1_epi16(sc[2 * c]));
            phi = _mm256_madd_epi16(phi, _mm256_set1_epi16(sc[2 * c + 1]));
            isum = _mm256_add_epi32(isum, _mm256_add_epi32(plo, phi));
        }
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(blk) * x->d[b]), _mm256_cvtepi32_ps(isum), acc);
#else
        int isum = 0;
        for (int c = 0; c < 4; c++) {
            int slo = 0, shi = 0;
            for (int l = 0; l < 32; l++) {
                slo += (qs[32 * c + l] & 15) * qx[64 * c + l];
                shi += (qs[32 * c + l] >> 4) * qx[64 * c + 32 + l];
            }
            isum += sc[2 * c] * slo + sc[2 * c + 1] * shi;
        }
        acc += f16(blk) * x->d[b] * (float)isum - dmin_term;
#endif
    }
#ifdef __AVX2__
    return hsum_ps(acc) - summ;
#else
    return acc;
#endif
}

/* Q6_K row: per super-block d*dx*sum_s sc_s*(sum(q*qx) - 32*sum(qx)) over
 * the 16 sub-blocks s of 16 elements, q = 6-bit unsigned. */
static float row_q6_k(const uint8_t *w, const xq8k *x) {
#ifdef __AVX2__
    __m256 acc = _mm256_setzero_ps();
#else
    float acc = 0.0f;
#endif
    for (int b = 0; b < x->nb; b++) {
        const uint8_t *blk = w + (size_t)b * 210, *ql = blk, *qh = blk + 128;
        const int8_t *sc = (const int8_t *)(blk + 192);
        const int8_t *qx = x->q + 256 * b;
        const int16_t *bs = x->bsums + 16 * b;
        int off = 0;
        for (int i = 0; i < 16; i++) off += sc[i] * bs[i];
        int isum_s = -32 * off;
#ifdef __AVX2__
        _mm_prefetch((const char *)blk + PF_DIST, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 64, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 128, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 192, PF_HINT);
        __m256i isum = _mm256_setzero_si256();
        for (int h = 0; h < 2; h++) {
            __m256i q[4];
            q6k_unpack(ql + 64 * h, qh + 32 * h, q);
            for (int g = 0; g < 4; g++) {
                const int8_t *xg = qx + 128 * h + 32 * g;
                __m256i p = _mm256_maddubs_epi16(q[g], _mm256_load_si256((const __m256i *)(const void *)xg));
                /* elements 0..15 (low lane) use sub-block 8h+2g, 16..31 the next */
                __m256i s16 = _mm256_set_m128i(_mm_set1_epi16(sc[8 * h + 2 * g + 1]),
                                               _mm_set1_epi16(sc[8 * h + 2 * g]));
                isum = _mm256_add_epi32(isum, _mm256_madd_epi16(p, s16));
            }
        }
        __m256 v = _mm256_cvtepi32_ps(_mm256_add_epi32(isum, _mm256_setr_epi32(isum_s, 0, 0, 0, 0, 0, 0, 0)));
        acc = _mm256_fmadd_ps(_mm256_set1_ps(f16(blk + 208) * x->d[b]), v, acc);
#else
        int isum = isum_s;
        for (int e = 0; e < 256; e++) {
            int h = e / 128, g = (e % 128) / 32, l = e % 32;
            uint8_t lo = ql[64 * h + l + 32 * (g & 1)];
            int q = (g < 2 ? lo & 15 : lo >> 4) | ((qh[32 * h + l] >> (2 * g)) & 3) << 4;
            isum += sc[e / 16] * q * qx[e];
        }
        acc += f16(blk + 208) * x->d[b] * (float)isum;
#endif
    }
#ifdef __AVX2__
    return hsum_ps(acc);
#else
    return acc;
#endif
}

/* f32 dot of n floats (n a multiple of 8 on the AVX2 path, any n otherwise). */
static inline float dot_f32(const float *a, const float *b, int n) {
#ifdef __AVX2__
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    float s = hsum_ps(_mm256_add_ps(s0, s1));
#else
    /* 16 partial sums like the SIMD paths, so the rounding bound of quant.h
     * (each partial sum over at most n/16 products) holds here too */
    float p[16] = {0};
    int i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) p[k] += a[i + k] * b[i + k];
    for (int w = 8; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) p[k] += p[k + w];
    float s = p[0];
#endif
    for (; i < n; i++) s += a[i] * b[i];
    return s;
}

#if defined(__AVX2__) && defined(__F16C__)
/* F16 / BF16 / F32 rows: convert 16 weights at a time in registers and dot,
 * with the same software prefetch as the quantised rows. */
static inline __m256 load8_as_f32(uint32_t type, const uint8_t *p) {
    if (type == GGML_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
    if (type == GGML_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(
            _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(const void *)p)), 16));
    return _mm256_loadu_ps((const float *)(const void *)p);
}

static float row_float(uint32_t type, const uint8_t *w, int cols, const float *x) {
    size_t es = type == GGML_F32 ? 4 : 2;
    __m256 s0 = _mm256_setzero_ps(), s1 = _mm256_setzero_ps();
    int i = 0;
    for (; i + 16 <= cols; i += 16) {
        _mm_prefetch((const char *)w + (size_t)i * es + PF_DIST, PF_HINT);
        if (es == 4) _mm_prefetch((const char *)w + (size_t)i * es + PF_DIST + 32, PF_HINT);
        s0 = _mm256_fmadd_ps(load8_as_f32(type, w + (size_t)i * es), _mm256_loadu_ps(x + i), s0);
        s1 = _mm256_fmadd_ps(load8_as_f32(type, w + (size_t)(i + 8) * es), _mm256_loadu_ps(x + i + 8), s1);
    }
    float s = hsum_ps(_mm256_add_ps(s0, s1));
    for (; i < cols; i++) {
        float v;
        kb_dequant(type, w + (size_t)i * es, &v, 1);
        s += v * x[i];
    }
    return s;
}
#endif

/* Generic row: dequantise a chunk at a time (bit-exact values) and dot in f32. */
static float row_generic(uint32_t type, const uint8_t *w, int cols, const float *x) {
#if defined(__AVX2__) && defined(__F16C__)
    if (type == GGML_F32 || type == GGML_F16 || type == GGML_BF16) return row_float(type, w, cols, x);
#endif
    if (type == GGML_F32) return dot_f32((const float *)(const void *)w, x, cols);
    const kb_qtype *t = kb_qtype_info(type);
    enum { CHUNK = 512 }; /* a multiple of every block size */
    float buf[CHUNK];
    float acc = 0.0f;
    for (int c = 0; c < cols; c += CHUNK) {
        int n = KB_MIN(CHUNK, cols - c);
        kb_dequant(type, w + (size_t)(c / t->blck) * (size_t)t->bytes, buf, n);
        acc += dot_f32(buf, x + c, n);
    }
    return acc;
}

/* ================================================================ matvec */

typedef float (*row_q8_fn)(const uint8_t *, const xq8 *);

static row_q8_fn row_fn_for(uint32_t type) {
    switch (type) {
    case GGML_Q4_0: return row_q4_0;
    case GGML_Q4_1: return row_q4_1;
    case GGML_Q5_0: return row_q5_0;
    case GGML_Q5_1: return row_q5_1;
    case GGML_Q8_0: return row_q8_0;
    default: return NULL;
    }
}

static int min_mult_for(uint32_t type) {
    switch (type) {
    case GGML_Q4_0: return -8;
    case GGML_Q5_0: return -16;
    case GGML_Q8_0: return 0;
    default: return 1;
    }
}

/* Below this many weight bytes one thread is faster than sharing the work. */
#define MATVEC_PAR_BYTES (64 * 1024)
/* Work unit of the worker pool: about this many weight bytes per chunk, and
 * at least MATVEC_CHUNKS_PER_THREAD chunks per thread so a late or
 * descheduled thread leaves little for the others. Every chunk starts cold
 * (its first lines come from memory before the prefetch runs ahead; ~0.2 us),
 * so fewer, larger chunks are faster: SmolLM2's mat-vecs of one token, 64 KiB
 * and 4 per thread (~2000 chunks) vs 256 KiB and 2 per thread (~850),
 * alternated in one process: 0-8% less time depending on the machine's
 * phase (docs/PERFORMANCE.md). */
#define MATVEC_CHUNK_BYTES (256 * 1024)
#define MATVEC_CHUNKS_PER_THREAD 2

/* Rows per pool chunk of one matrix: a multiple of 16 rows (64 bytes of y:
 * two threads never write one cache line; row groups start at multiples of
 * 16 whatever the split, so results do not depend on it) of about
 * MATVEC_CHUNK_BYTES, at least MATVEC_CHUNKS_PER_THREAD chunks per thread.
 * Guided sizes (shrinking towards the end) measured ~5% slower, for the same
 * cold starts. */
static long mv_rows_per_chunk(int rows, size_t row_bytes, int nthr) {
    long per = (long)(MATVEC_CHUNK_BYTES / (row_bytes ? row_bytes : 1));
    long cap = (rows + (long)MATVEC_CHUNKS_PER_THREAD * nthr - 1) / ((long)MATVEC_CHUNKS_PER_THREAD * nthr);
    if (per > cap) per = cap;
    per = (per + 15) / 16 * 16;
    return per < 16 ? 16 : per;
}

/* Runs fn over row chunks (mv_rows_per_chunk) through the worker pool
 * (kernels/pool.h), or on the calling thread for small W. */
static void mv_split(int rows, size_t row_bytes, int *rpc, kb_pool_fn fn, void *job) {
    size_t total = (size_t)rows * row_bytes;
    int nthr = total >= MATVEC_PAR_BYTES ? kb_pool_threads() : 1;
    if (nthr <= 1) {
        *rpc = rows;
        fn(job, 0, 0);
        return;
    }
    long per = mv_rows_per_chunk(rows, row_bytes, nthr);
    *rpc = (int)per;
    kb_pool_run((int)((rows + per - 1) / per), fn, job);
}

typedef struct mvq8_job {
    uint32_t type;
    const uint8_t *w;
    size_t row_bytes;
    int rows, cols;
    const float *x;
    float *y;
    float (*row)(const uint8_t *, const xq8 *);
    const xq8 *xq;
    int kq;
    const xq8k *xk;
    int rpc; /* rows per chunk */
} mvq8_job;

static void mvq8_chunk(void *p, int i, int worker) {
    (void)worker;
    const mvq8_job *j = p;
    int r0 = i * j->rpc, r1 = KB_MIN(j->rows, r0 + j->rpc);
    const uint8_t *w = j->w;
    size_t rb = j->row_bytes;
    float *y = j->y;
    if (j->row) {
        for (int r = r0; r < r1; r++) y[r] = j->row(w + (size_t)r * rb, j->xq);
    } else if (j->kq) {
        float (*rowk)(const uint8_t *, const xq8k *) = j->type == GGML_Q4_K ? row_q4_k : row_q6_k;
        for (int r = r0; r < r1; r++) y[r] = rowk(w + (size_t)r * rb, j->xk);
    } else {
        for (int r = r0; r < r1; r++) y[r] = row_generic(j->type, w + (size_t)r * rb, j->cols, j->x);
    }
}

void kb_matvec_q8(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                  const float *x, float *y) {
    const uint8_t *w = W;
    if (rows <= 0) return;
    row_q8_fn row = row_fn_for(type);
    xq8 xq = {0};
    void *xbuf = NULL;
    if (row) {
        int nb = cols / 32;
        xbuf = KB_AMALLOC((size_t)nb * (32 + 2 * sizeof(float)) + 64);
        xq.nb = nb;
        xq.q = xbuf;
        xq.ds = (float *)(void *)((uint8_t *)xbuf + (size_t)nb * 32);
        xq8_quantise(x, cols, min_mult_for(type), &xq);
    }
    xq8k xk = {0};
    int kq = type == GGML_Q4_K || type == GGML_Q6_K;
    if (kq) {
        int nb = cols / 256;
        xbuf = KB_AMALLOC((size_t)nb * (256 + sizeof(float) + 16 * sizeof(int16_t)) + 64);
        xk.nb = nb;
        xk.q = xbuf;
        xk.d = (float *)(void *)((uint8_t *)xbuf + (size_t)nb * 256);
        xk.bsums = (int16_t *)(void *)(xk.d + nb);
        xq8k_quantise(x, cols, &xk);
    }
    mvq8_job j = {type, w, row_bytes, rows, cols, x, y, row, &xq, kq, &xk, 0};
    mv_split(rows, row_bytes, &j.rpc, mvq8_chunk, &j);
    if (xbuf) kb_afree(xbuf);
}

/* kb_r16_dequant, groups of 16 rows. Q4_1: per row and block, the row's 16
 * bytes (4 at each of the 4 nibble vectors) widened to 16 lanes; lane i's
 * low nibble is column 8(i/4) + i%4, its high one 4 columns further; value
 * fl(fl(d q) + m) like deq_q4_1 (a separate multiply and add, no FMA), then
 * the two vectors are interleaved into column order. Q8_0: the row's 4
 * bytes at each of the 8 vectors are its 32 columns in order (sign bit
 * flipped back), value fl(d q) like deq_q8_0. */
void kb_r16_dequant(uint32_t type, const void *W, size_t row_bytes, int r0, int n, float *dst) {
#ifdef __AVX512F__
    if (r0 % 16 == 0 && n % 16 == 0 && kb_r16_type(type)) {
        int bb = type == GGML_Q4_1 ? 20 : 34, nb = (int)(row_bytes / (size_t)bb), cols = 32 * nb;
        const __m512i lo_cols = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
        const __m512i hi_cols = _mm512_add_epi32(lo_cols, _mm512_set1_epi32(8));
        const __m512i m4 = _mm512_set1_epi32(15);
        for (int g = r0 / 16; g < (r0 + n) / 16; g++) {
            const uint8_t *p = (const uint8_t *)W + (size_t)g * 16 * row_bytes;
            float *out = dst + (size_t)(g - r0 / 16) * 16 * cols;
            for (int b = 0; b < nb; b++) {
                const uint8_t *o = p + (size_t)16 * bb * b;
                for (int r = 0; r < 16; r++) {
                    float *y = out + (size_t)r * cols + 32 * b;
                    __m512 d = _mm512_set1_ps(f16(o + 2 * r));
                    if (type == GGML_Q8_0) {
                        __m256i q = _mm256_xor_si256(
                            _mm256_setr_epi32((int)rd_u32(o + 32 + 4 * r), (int)rd_u32(o + 96 + 4 * r),
                                              (int)rd_u32(o + 160 + 4 * r), (int)rd_u32(o + 224 + 4 * r),
                                              (int)rd_u32(o + 288 + 4 * r), (int)rd_u32(o + 352 + 4 * r),
                                              (int)rd_u32(o + 416 + 4 * r), (int)rd_u32(o + 480 + 4 * r)),
                            _mm256_set1_epi8((char)0x80));
                        _mm512_storeu_ps(y, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)))));
                        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)))));
                        continue;
                    }
                    __m128i bytes = _mm_setr_epi32((int)rd_u32(o + 64 + 4 * r), (int)rd_u32(o + 128 + 4 * r),
                                                   (int)rd_u32(o + 192 + 4 * r), (int)rd_u32(o + 256 + 4 * r));
                    __m512i z = _mm512_cvtepu8_epi32(bytes);
                    __m512 m = _mm512_set1_ps(f16(o + 32 + 2 * r));
                    __m512 vl = _mm512_add_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_and_si512(z, m4))), m);
                    __m512 vh = _mm512_add_ps(_mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_srli_epi32(z, 4))), m);
                    _mm512_storeu_ps(y, _mm512_permutex2var_ps(vl, lo_cols, vh));
                    _mm512_storeu_ps(y + 16, _mm512_permutex2var_ps(vl, hi_cols, vh));
                }
            }
        }
        return;
    }
#endif
    kb_r16_dequant_ref(type, W, row_bytes, r0, n, dst);
}

/* ===================================================== exact: x stays f32 */

/* What every row of one call shares: x and its sums per block of 32. */
typedef struct xctx {
    const float *x;
    int cols;
    int nb;      /* blocks of 32 (cols / 32; 0 for the 1-element types) */
    float *xsum; /* [nb, zero-padded to a multiple of 16]: sum of x over block b */
    float *xsr[5]; /* xsr[R] for R = 1, 4: [2*R*nb, zero-padded to a multiple of
                    * 32]: (0, xsum[b]) repeated R times per block b, to multiply
                    * lane-wise with the gathered [d, m] pairs of R rows */
    float *xp;     /* [cols] or NULL: x permuted within each block of 32 to the
                    * lane order of the AVX-512 4-bit kernel (xperm_init) */
    int8_t *xl;    /* [3][cols] or NULL: x as 24-bit integers per block, in three
                    * signed bytes (R16 layout; x24_init) */
    float *xsc;    /* [nb]: 2^-e_b, the scale of block b's integers (or NaN) */
    int32_t *xls;  /* [2 nb]: 128 (S0 + 256 S1), 128 S2 with S_k the sum of block b's
                    * byte k over its 32 elements (Q8_0's +128 offset) */
} xctx;

/* x24_init's block b of x holding Inf or NaN: scale NaN (every row's y
 * becomes NaN), zero bytes and sums. */
static inline void x24_nonfinite(int8_t *xl, float *xsc, int32_t *xls, int cols, int b) {
    xsc[b] = NAN;
    memset(xl + 32 * b, 0, 32);
    memset(xl + cols + 32 * b, 0, 32);
    memset(xl + 2 * cols + 32 * b, 0, 32);
    xls[2 * b] = xls[2 * b + 1] = 0;
}

/* x24_init's e_b for a finite block whose largest |x_j| is M >= 0: 22 - E
 * with M = f 2^E, f in [0.5, 1) (frexpf's E, read from M's exponent field:
 * E = field - 126; a subnormal M has E <= -126, so e clamps to 126 as with
 * frexpf), 0 for M = 0, clamped to [-126, 126]. */
static inline int x24_exp(float M) {
    uint32_t mb;
    memcpy(&mb, &M, 4);
    uint32_t fld = mb >> 23;
    int e = !mb ? 0 : !fld ? 126 : 22 - ((int)fld - 126);
    return e > 126 ? 126 : e < -126 ? -126 : e;
}

/* 2^k for |k| <= 126, built from its bits (exact, no libm call). */
static inline float x24_pow2(int k) {
    uint32_t b = (uint32_t)(127 + k) << 23;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

#ifdef __AVX512F__
static const float iota16[16] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15};

/* q (0..15 in the low 4 bits of each i32 lane) -> f32 via the table (vpermps
 * only reads the index's low 4 bits). */
#define PERM(idx, tbl) _mm512_permutexvar_ps((idx), (tbl))

/* Sum over one Q8_0 block of w_j*x_j / d (signed bytes converted directly). */
static ALWAYS_INLINE __m512 blk8_512(const uint8_t *qs, __m512 x0, __m512 x1) {
    __m512 q0 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)qs)));
    __m512 q1 = _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(qs + 16))));
    return _mm512_fmadd_ps(q1, x1, _mm512_mul_ps(q0, x0));
}

/* Horizontal sums of four vectors: [sum a, sum b, sum c, sum d]. */
static inline __m128 hsum4_512(__m512 a, __m512 b, __m512 c, __m512 d) {
#define HALF(v) _mm256_add_ps(_mm512_castps512_ps256(v), \
                              _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)))
    __m256 ab = _mm256_hadd_ps(HALF(a), HALF(b)), cd = _mm256_hadd_ps(HALF(c), HALF(d));
#undef HALF
    __m256 abcd = _mm256_hadd_ps(ab, cd); /* [a b c d | a b c d] partial sums */
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* Kinds of 32-element block types for rows_exact_32: K4T 4-bit with the
 * scale folded into the table and x permuted (Q4_0, Q4_1), K4 4-bit, K5
 * 5-bit, K8 Q8_0's signed bytes. */
enum { K4 = 0, K5 = 1, K8 = 2, K4T = 3 };

/* Rows per group: they share the x loads and one reduction (8 measured no
 * faster). */
#define RGRP 4
/* Blocks per pass of scale conversion and block loop (SmolLM2's rows have 18
 * and 48 blocks). */
#ifndef SC_CHUNK
#define SC_CHUNK 32
#endif

/* R (1 or 4) consecutive rows of a 32-element block type, y[0..R).
 * BYTES per block; QOFF: offset of qs; PAIRS: 1 if the block starts with
 * [d, m]; KIND: 4-bit, 5-bit (5th bits at H5OFF) or Q8_0's signed bytes;
 * TBL_OFF: the value table is iota - TBL_OFF (0, 8 or 16). Each block of
 * each row: s = sum of the 32 q_j*x_j (q exact in f32), then
 * acc_row = fma(s, d_b, acc_row). Four rows share the x loads and one final
 * reduction.
 *
 * Scales: per chunk of blocks, the first 4 bytes of every (row, block) are
 * gathered 16 at a time, lane l = (row l % R, block l / R), converted with
 * F16C and stored, so that d of (row i, block k) is sc[ds*(R*k + i)]; for
 * PAIRS the odd lanes hold m, multiplied lane-wise by c->xsr[R] (xsum of
 * the lane's block in odd lanes, 0 in even ones) into macc. Gathering
 * replaces a scalar copy whose stores the vector conversion reloads (that
 * store-forwarding stall cost ~0.5 ns per block); gathering across the R
 * rows wastes no lanes on SmolLM2's 18-block rows. Masked lanes are not
 * read, so nothing past the last block is touched. */
static ALWAYS_INLINE void rows_exact_32(const uint8_t *w, size_t rb, const xctx *c, float *y, int R,
                                        int bytes, int qoff, int pairs, int kind, int h5off,
                                        float tbl_off) {
    const __m512 tbl = _mm512_sub_ps(_mm512_loadu_ps(iota16), _mm512_set1_ps(tbl_off));
    const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i gidx = R == 1 ? _mm512_mullo_epi32(lane, _mm512_set1_epi32(bytes))
                                : _mm512_add_epi32(_mm512_mullo_epi32(_mm512_and_si512(lane, _mm512_set1_epi32(3)),
                                                                      _mm512_set1_epi32((int)rb)),
                                                   _mm512_mullo_epi32(_mm512_srli_epi32(lane, 2),
                                                                      _mm512_set1_epi32(bytes)));
    const float *xsr = c->xsr[R];
    const __m512i sh0 = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 8, 8, 8, 8, 12, 12, 12, 12);
    const __m512i sh1 = _mm512_add_epi32(sh0, _mm512_set1_epi32(16));
    float sc[2 * RGRP * SC_CHUNK] __attribute__((aligned(64)));
    __m512 acc[RGRP], macc = _mm512_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < RGRP; i++) acc[i] = _mm512_setzero_ps();
    const int ds = pairs ? 2 : 1; /* floats per (row, block) in sc */
    const int step = R * bytes;   /* weight bytes read per block step */
    const int per_row = R > 1 && (size_t)R * rb > PF_ROW_MIN && !NO_PERROW_ON;
    for (int b0 = 0; b0 < c->nb; b0 += SC_CHUNK) {
        int n = KB_MIN(SC_CHUNK, c->nb - b0);
        const uint8_t *wb = w + (size_t)b0 * bytes;
        const float *x = c->x + 32 * b0;
        for (int l0 = 0; l0 < R * n; l0 += 16) {
            int left = R * n - l0;
            __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1);
            __m512i g = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, gidx,
                                                    wb + (size_t)(l0 / R) * bytes, 1);
            if (pairs && kind == K4T) { /* m goes into the table */
                _mm512_store_ps(sc + 2 * l0, _mm512_cvtph_ps(_mm512_castsi512_si256(g)));
                _mm512_store_ps(sc + 2 * l0 + 16, _mm512_cvtph_ps(_mm512_extracti64x4_epi64(g, 1)));
            } else if (pairs) {
                __m512 lo = _mm512_cvtph_ps(_mm512_castsi512_si256(g));
                __m512 hi = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(g, 1));
                _mm512_store_ps(sc + 2 * l0, lo);
                _mm512_store_ps(sc + 2 * l0 + 16, hi);
                const float *xs = xsr + 2 * (R * b0 + l0);
                macc = _mm512_fmadd_ps(lo, _mm512_loadu_ps(xs), macc);
                macc = _mm512_fmadd_ps(hi, _mm512_loadu_ps(xs + 16), macc);
            } else {
                _mm512_store_ps(sc + l0, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g)));
            }
        }
        /* the R rows are contiguous (R * rb bytes from w). Short rows: prefetch
         * that region linearly, as many lines per block step as the step
         * reads. Groups longer than PF_ROW_MIN: each row its own stream,
         * PF_ROW_DIST ahead, running on into the same row of the next group
         * (a linear pointer would reach the last rows' data late) */
        const char *pf = (const char *)w + PF_DIST + (size_t)b0 * step;
        for (int k = 0; k < n; k++) {
            pf_block_step(w, rb, R, bytes, b0 + k, per_row, pf + (size_t)k * step, step);
            const float *xk = (kind == K4T ? c->xp + 32 * b0 : x) + 32 * k;
            __m512 x0 = _mm512_loadu_ps(xk), x1 = _mm512_loadu_ps(xk + 16);
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                const uint8_t *blk = wb + i * rb + (size_t)k * bytes;
                __m512 s;
                if (kind == K4T) {
                    /* table of this block's 16 weight values: d*(iota - off)
                     * (+ m), one rounding; lane i of the broadcast qs holds
                     * dword i%4, shifted so that its nibble i/4 (hi: 4 + i/4)
                     * is the index; c->xp has x in that lane order */
                    __m512 t = pairs ? _mm512_fmadd_ps(tbl, _mm512_set1_ps(sc[ds * (R * k + i)]),
                                                       _mm512_set1_ps(sc[ds * (R * k + i) + 1]))
                                     : _mm512_mul_ps(tbl, _mm512_set1_ps(sc[ds * (R * k + i)]));
                    __m512i z = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(const void *)(blk + qoff)));
                    acc[i] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srlv_epi32(z, sh0), t), x0, acc[i]);
                    acc[i] = _mm512_fmadd_ps(_mm512_permutexvar_ps(_mm512_srlv_epi32(z, sh1), t), x1, acc[i]);
                    continue;
                }
                if (kind == K8) {
                    s = blk8_512(blk + qoff, x0, x1);
                } else {
                    __m512i z = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(blk + qoff)));
                    __m512 lo = _mm512_permutexvar_ps(z, tbl);
                    __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(z, 4), tbl);
                    if (kind == K5) {
                        uint32_t h = rd_u32(blk + h5off);
                        lo = _mm512_mask_add_ps(lo, (__mmask16)(h & 0xffff), lo, _mm512_set1_ps(16.0f));
                        hi = _mm512_mask_add_ps(hi, (__mmask16)(h >> 16), hi, _mm512_set1_ps(16.0f));
                    }
                    s = _mm512_fmadd_ps(hi, x1, _mm512_mul_ps(lo, x0));
                }
                acc[i] = _mm512_fmadd_ps(s, _mm512_set1_ps(sc[ds * (R * k + i)]), acc[i]);
            }
        }
    }
    if (R == 4) {
        __m128 r = hsum4_512(acc[0], acc[1], acc[2], acc[3]);
        if (pairs && kind != K4T) { /* macc lane 2l+1 (mod 16) belongs to row l % 4 */
            __m256 h = _mm256_add_ps(_mm512_castps512_ps256(macc),
                                     _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(macc), 1)));
            h = _mm256_permutevar8x32_ps(h, _mm256_setr_epi32(1, 3, 5, 7, 0, 2, 4, 6));
            r = _mm_add_ps(r, _mm256_castps256_ps128(h));
        }
        _mm_storeu_ps(y, r);
    } else {
        y[0] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0], macc));
    }
}

#define ROWS_32(name, ...)                                                                     \
    static void name(const uint8_t *w, size_t rb, int r0, int r1, const xctx *c, float *y) {   \
        int r = r0;                                                                            \
        for (; r + RGRP <= r1; r += RGRP) rows_exact_32(w + (size_t)r * rb, rb, c, y + r, RGRP, __VA_ARGS__); \
        for (; r < r1; r++) rows_exact_32(w + (size_t)r * rb, rb, c, y + r, 1, __VA_ARGS__);    \
    }
#ifdef NO_K4T /* the fold form, for A/B measurements */
ROWS_32(rowsx_q4_0, 18, 2, 0, K4, 0, 8.0f)
ROWS_32(rowsx_q4_1, 20, 4, 1, K4, 0, 0.0f)
#else
ROWS_32(rowsx_q4_0, 18, 2, 0, K4T, 0, 8.0f)
ROWS_32(rowsx_q4_1, 20, 4, 1, K4T, 0, 0.0f)
#endif
ROWS_32(rowsx_q5_0, 22, 6, 0, K5, 2, 16.0f)
ROWS_32(rowsx_q5_1, 24, 8, 1, K5, 4, 0.0f)
ROWS_32(rowsx_q8_0, 34, 2, 0, K8, 0, 0.0f)
#undef ROWS_32

#if defined(__AVX512BW__) && defined(__AVX512VNNI__) && defined(__GFNI__)
#define HAVE_R16 1
/* x for the R16 kernel (quant.h): per block b, e_b = 22 - E with max|x| =
 * f 2^E, f in [0.5, 1) (so max |X| < 2^22), clamped to [-126, 126] (a block
 * whose largest element is below 2^-104 keeps 2^-127 steps); X_j =
 * round-to-nearest-even(x_j 2^e_b) (the product is exact), split into
 * balanced bytes X = L0 + 256 L1 + 65536 L2, L in [-128, 127]. A block with
 * Inf or NaN gets scale NaN. Needs c->xsum. */
static void x24_init(xctx *c, int8_t *xl, float *xsc, int32_t *xls) {
    int cols = c->cols;
    const __m512 inf = _mm512_set1_ps(INFINITY);
    for (int b = 0; b < c->nb; b++) {
        __m512 v[2] = {_mm512_loadu_ps(c->x + 32 * b), _mm512_loadu_ps(c->x + 32 * b + 16)};
        __m512 a0 = _mm512_abs_ps(v[0]), a1 = _mm512_abs_ps(v[1]);
        /* an Inf or NaN element (|x| not below Inf, unordered included) */
        if (_mm512_cmp_ps_mask(a0, inf, _CMP_NLT_UQ) | _mm512_cmp_ps_mask(a1, inf, _CMP_NLT_UQ)) {
            x24_nonfinite(xl, xsc, xls, cols, b);
            continue;
        }
        const int e = x24_exp(_mm512_reduce_max_ps(_mm512_max_ps(a0, a1)));
        xsc[b] = x24_pow2(-e);
        const __m512 f = _mm512_set1_ps(x24_pow2(e));
        __m512i s0 = _mm512_setzero_si512(), s1 = s0, s2 = s0;
        for (int h = 0; h < 2; h++) {
            __m512i X = _mm512_cvtps_epi32(_mm512_mul_ps(v[h], f));
            __m512i l0 = _mm512_srai_epi32(_mm512_slli_epi32(X, 24), 24);
            __m512i x1 = _mm512_srai_epi32(_mm512_sub_epi32(X, l0), 8);
            __m512i l1 = _mm512_srai_epi32(_mm512_slli_epi32(x1, 24), 24);
            __m512i l2 = _mm512_srai_epi32(_mm512_sub_epi32(x1, l1), 8);
            _mm_storeu_si128((__m128i *)(void *)(xl + 32 * b + 16 * h), _mm512_cvtepi32_epi8(l0));
            _mm_storeu_si128((__m128i *)(void *)(xl + cols + 32 * b + 16 * h), _mm512_cvtepi32_epi8(l1));
            _mm_storeu_si128((__m128i *)(void *)(xl + 2 * cols + 32 * b + 16 * h), _mm512_cvtepi32_epi8(l2));
            s0 = _mm512_add_epi32(s0, l0);
            s1 = _mm512_add_epi32(s1, l1);
            s2 = _mm512_add_epi32(s2, l2);
        }
        xls[2 * b] = 128 * (_mm512_reduce_add_epi32(s0) + 256 * _mm512_reduce_add_epi32(s1));
        xls[2 * b + 1] = 128 * _mm512_reduce_add_epi32(s2);
    }
    c->xl = xl;
    c->xsc = xsc;
    c->xls = xls;
}

/* 4 bytes of x (4 columns) broadcast to every lane */
#define BC4(p) _mm512_set1_epi32(*(const int32_t *)(const void *)(p))

/* One block's sums per byte of X, each kept in two accumulators (two
 * dependency chains instead of one: latency), recombined:
 * S = (a0 + 256 a1 - off01) + 65536 (a2 - off2) in f32 (the int32 part is
 * below 2^29 in magnitude; at most two roundings), times d 2^-e_b into acc. */
static ALWAYS_INLINE __m512 r16_block_sum(__m512 acc, __m512i a0, __m512i h0, __m512i a1, __m512i h1, __m512i a2,
                                          __m512i h2, int32_t off01, int32_t off2, const uint8_t *dp, float xsc) {
    a1 = _mm512_add_epi32(a1, h1);
    a2 = _mm512_sub_epi32(_mm512_add_epi32(a2, h2), _mm512_set1_epi32(off2));
    __m512i lo = _mm512_sub_epi32(_mm512_add_epi32(_mm512_add_epi32(a0, h0), _mm512_slli_epi32(a1, 8)),
                                  _mm512_set1_epi32(off01));
    __m512 S = _mm512_fmadd_ps(_mm512_cvtepi32_ps(a2), _mm512_set1_ps(65536.0f), _mm512_cvtepi32_ps(lo));
    __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)dp));
    return _mm512_fmadd_ps(S, _mm512_mul_ps(d, _mm512_set1_ps(xsc)), acc);
}

/* y[0..16) of one Q4_1 R16 group (g: its first byte). Per block: the three
 * bytes of X each in a lo-nibble and a hi-nibble accumulator, then
 * r16_block_sum (no offset; here a0 + 256 a1 is below 2^24 in magnitude, so
 * its conversion is exact), and macc += m xsum_b. Prefetch PF_DIST ahead,
 * linearly (a group is contiguous). */
static ALWAYS_INLINE void r16_group_q4_1(const uint8_t *g, const xctx *c, float *y) {
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i shr4 = _mm512_set1_epi64(0x1020408000000000LL); /* GF(2) matrix: byte >> 4 */
    const int cols = c->cols;
    __m512 acc = _mm512_setzero_ps(), macc = _mm512_setzero_ps();
    for (int b = 0; b < c->nb; b++) {
        const uint8_t *blk = g + (size_t)320 * b;
#pragma GCC unroll 5
        for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)blk + PF_DIST + l, PF_HINT);
        const int8_t *x0 = c->xl + 32 * b, *x1 = x0 + cols, *x2 = x1 + cols;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, h0 = a0, h1 = a0, h2 = a0;
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            __m512i P = _mm512_loadu_si512((const void *)(blk + 64 + 64 * t));
            __m512i lo = _mm512_and_si512(P, m4), hi = _mm512_gf2p8affine_epi64_epi8(P, shr4, 0);
            a0 = _mm512_dpbusd_epi32(a0, lo, BC4(x0 + 8 * t));
            h0 = _mm512_dpbusd_epi32(h0, hi, BC4(x0 + 8 * t + 4));
            a1 = _mm512_dpbusd_epi32(a1, lo, BC4(x1 + 8 * t));
            h1 = _mm512_dpbusd_epi32(h1, hi, BC4(x1 + 8 * t + 4));
            a2 = _mm512_dpbusd_epi32(a2, lo, BC4(x2 + 8 * t));
            h2 = _mm512_dpbusd_epi32(h2, hi, BC4(x2 + 8 * t + 4));
        }
        acc = r16_block_sum(acc, a0, h0, a1, h1, a2, h2, 0, 0, blk, c->xsc[b]);
        __m512 m = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 32)));
        macc = _mm512_fmadd_ps(m, _mm512_set1_ps(c->xsum[b]), macc);
    }
    _mm512_storeu_ps(y, _mm512_add_ps(acc, macc));
}
/* y[0..16) of one Q8_0 R16 group: the 8 vectors are already unsigned bytes
 * (q + 128), so no unpacking: 24 dpbusd per block. Per byte k of X,
 * A_k = sum (q + 128) L_k; r16_block_sum takes the offset out with the
 * x-only sums (xls): 128 (S0 + 256 S1) and 128 S2. */
static ALWAYS_INLINE void r16_group_q8_0(const uint8_t *g, const xctx *c, float *y) {
    const int cols = c->cols;
    __m512 acc = _mm512_setzero_ps();
    for (int b = 0; b < c->nb; b++) {
        const uint8_t *blk = g + (size_t)544 * b;
#pragma GCC unroll 9
        for (int l = 0; l < 576; l += 64) _mm_prefetch((const char *)blk + PF_DIST + l, PF_HINT);
        const int8_t *x0 = c->xl + 32 * b, *x1 = x0 + cols, *x2 = x1 + cols;
        __m512i a0 = _mm512_setzero_si512(), a1 = a0, a2 = a0, h0 = a0, h1 = a0, h2 = a0;
#pragma GCC unroll 4
        for (int t = 0; t < 8; t += 2) {
            __m512i P = _mm512_loadu_si512((const void *)(blk + 32 + 64 * t));
            __m512i Q = _mm512_loadu_si512((const void *)(blk + 96 + 64 * t));
            a0 = _mm512_dpbusd_epi32(a0, P, BC4(x0 + 4 * t));
            h0 = _mm512_dpbusd_epi32(h0, Q, BC4(x0 + 4 * t + 4));
            a1 = _mm512_dpbusd_epi32(a1, P, BC4(x1 + 4 * t));
            h1 = _mm512_dpbusd_epi32(h1, Q, BC4(x1 + 4 * t + 4));
            a2 = _mm512_dpbusd_epi32(a2, P, BC4(x2 + 4 * t));
            h2 = _mm512_dpbusd_epi32(h2, Q, BC4(x2 + 4 * t + 4));
        }
        acc = r16_block_sum(acc, a0, h0, a1, h1, a2, h2, c->xls[2 * b], c->xls[2 * b + 1], blk, c->xsc[b]);
    }
    _mm512_storeu_ps(y, acc);
}
#undef BC4

#endif /* R16 */


/* Q4_K: per sub-block k of 32, fl(d*sc_k) * sum(q x) - fl(dmin*mn_k) * xsum_k
 * (the scale and min products rounded as in the reference). */
static float rowx_q4_k(const uint8_t *w, const xctx *c) {
    const __m512 tbl = _mm512_loadu_ps(iota16);
    __m512 r0 = _mm512_setzero_ps(), r1 = _mm512_setzero_ps();
    __m256 macc = _mm256_setzero_ps();
    for (int s = 0; s < c->cols / 256; s++) {
        const uint8_t *blk = w + (size_t)s * 144, *qs = blk + 16;
        const float *x = c->x + 256 * s;
        _mm_prefetch((const char *)blk + PF_DIST, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 64, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 128, PF_HINT);
        uint8_t sc8[8], mn8[8];
        q4k_unpack(blk + 4, sc8, mn8);
        float sc[8] __attribute__((aligned(32)));
        __m256 vsc = _mm256_mul_ps(_mm256_set1_ps(f16(blk)),
                                   _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)sc8))));
        __m256 vmn = _mm256_mul_ps(_mm256_set1_ps(f16(blk + 2)),
                                   _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)mn8))));
        _mm256_store_ps(sc, vsc);
        macc = _mm256_fmadd_ps(vmn, _mm256_loadu_ps(c->xsum + 8 * s), macc);
        for (int k = 0; k < 4; k++) {
            const uint8_t *q = qs + 32 * k;
            const float *xk = x + 64 * k;
            __m512i z0 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)q));
            __m512i z1 = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(q + 16)));
            __m512 a = _mm512_fmadd_ps(PERM(z1, tbl), _mm512_loadu_ps(xk + 16),
                                       _mm512_mul_ps(PERM(z0, tbl), _mm512_loadu_ps(xk)));
            __m512 b = _mm512_fmadd_ps(PERM(_mm512_srli_epi32(z1, 4), tbl), _mm512_loadu_ps(xk + 48),
                                       _mm512_mul_ps(PERM(_mm512_srli_epi32(z0, 4), tbl), _mm512_loadu_ps(xk + 32)));
            r0 = _mm512_fmadd_ps(a, _mm512_set1_ps(sc[2 * k]), r0);
            r1 = _mm512_fmadd_ps(b, _mm512_set1_ps(sc[2 * k + 1]), r1);
        }
    }
    __m128 m4 = _mm_add_ps(_mm256_castps256_ps128(macc), _mm256_extractf128_ps(macc, 1));
    m4 = _mm_add_ps(m4, _mm_movehl_ps(m4, m4));
    m4 = _mm_add_ss(m4, _mm_movehdup_ps(m4));
    return _mm512_reduce_add_ps(_mm512_add_ps(r0, r1)) - _mm_cvtss_f32(m4);
}

/* Q6_K: per sub-block of 16, fl(d*sc) * sum((q - 32) x), q - 32 exact.
 * The 6-bit values of each half (128 elements) are assembled 64 at a time
 * with byte operations (low nibbles | two high bits << 4, minus 32), stored
 * as int8 in element order, and read back 16 at a time sign-extended. */
static float rowx_q6_k(const uint8_t *w, const xctx *c) {
    const __m512i m0f = _mm512_set1_epi8(0x0f), m30 = _mm512_set1_epi8(0x30), k32 = _mm512_set1_epi8(32);
    /* per 16-bit word shift counts: elements 0..31 take qh bits 0-1 (<< 4),
     * 32..63 bits 2-3 (<< 2); 64..95 bits 4-5 (>> 0), 96..127 bits 6-7 (>> 2).
     * Word shifts move bits across the two bytes, but only into bits the
     * 0x30 mask drops. */
    const __m512i cl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
    const __m512i cr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
    int8_t q[128] __attribute__((aligned(64)));
    __m512 r0 = _mm512_setzero_ps(), r1 = _mm512_setzero_ps();
    for (int s = 0; s < c->cols / 256; s++) {
        const uint8_t *blk = w + (size_t)s * 210;
        const float *x = c->x + 256 * s;
        _mm_prefetch((const char *)blk + PF_DIST, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 64, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 128, PF_HINT);
        _mm_prefetch((const char *)blk + PF_DIST + 192, PF_HINT);
        float sc[16] __attribute__((aligned(64)));
        _mm512_store_ps(sc, _mm512_mul_ps(_mm512_set1_ps(f16(blk + 208)),
                                          _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(
                                              _mm_loadu_si128((const __m128i *)(const void *)(blk + 192))))));
        for (int h = 0; h < 2; h++) {
            __m512i ql = _mm512_loadu_si512((const void *)(blk + 64 * h));
            __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(const void *)(blk + 128 + 32 * h)));
            __m512i t01 = _mm512_and_si512(_mm512_sllv_epi16(qh, cl), m30);
            __m512i t23 = _mm512_and_si512(_mm512_srlv_epi16(qh, cr), m30);
            /* (a & c) | b */
            __m512i q01 = _mm512_ternarylogic_epi32(ql, t01, m0f, 0xec);
            __m512i q23 = _mm512_ternarylogic_epi32(_mm512_srli_epi16(ql, 4), t23, m0f, 0xec);
            _mm512_store_si512((void *)q, _mm512_sub_epi8(q01, k32));
            _mm512_store_si512((void *)(q + 64), _mm512_sub_epi8(q23, k32));
            const float *xh = x + 128 * h;
            for (int j = 0; j < 8; j += 2) { /* sub-block 8h + j: elements 16j..16j+15 */
                __m512 t0 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(const void *)(q + 16 * j)))),
                                          _mm512_loadu_ps(xh + 16 * j));
                __m512 t1 = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_load_si128((const __m128i *)(const void *)(q + 16 * j + 16)))),
                                          _mm512_loadu_ps(xh + 16 * j + 16));
                r0 = _mm512_fmadd_ps(t0, _mm512_set1_ps(sc[8 * h + j]), r0);
                r1 = _mm512_fmadd_ps(t1, _mm512_set1_ps(sc[8 * h + j + 1]), r1);
            }
        }
    }
    return _mm512_reduce_add_ps(_mm512_add_ps(r0, r1));
}

/* F16 / BF16 / F32: 16 weights at a time converted in registers, 4 chains. */
static inline __m512 load16_as_f32(uint32_t type, const uint8_t *p) {
    if (type == GGML_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)p));
    if (type == GGML_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(
            _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(const void *)p)), 16));
    return _mm512_loadu_ps((const float *)(const void *)p);
}

static float rowx_float(uint32_t type, const uint8_t *w, int cols, const float *x) {
    size_t es = type == GGML_F32 ? 4 : 2;
    __m512 s[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps()};
    int i = 0;
    for (; i + 64 <= cols; i += 64) {
        const uint8_t *p = w + (size_t)i * es;
        for (int k = 0; k < (int)es; k++) _mm_prefetch((const char *)p + PF_DIST + 64 * k, PF_HINT);
        for (int k = 0; k < 4; k++)
            s[k] = _mm512_fmadd_ps(load16_as_f32(type, p + 16 * k * es), _mm512_loadu_ps(x + i + 16 * k), s[k]);
    }
    for (; i + 16 <= cols; i += 16)
        s[0] = _mm512_fmadd_ps(load16_as_f32(type, w + (size_t)i * es), _mm512_loadu_ps(x + i), s[0]);
    float r = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(s[0], s[1]), _mm512_add_ps(s[2], s[3])));
    for (; i < cols; i++) {
        float v;
        kb_dequant(type, w + (size_t)i * es, &v, 1);
        r += v * x[i];
    }
    return r;
}
#undef PERM

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

/* AVX2 (Zen 3 and the like: no AVX-512): the Q4_0, Q4_1 and Q8_0 rows, four
 * at a time sharing the x loads, 8 lanes. Per block of each row: the 32 q
 * are turned into four vectors of 8 exact f32 (elements 0-7, 8-15, 16-23,
 * 24-31: two zero-extensions of 8 bytes, AND / shift for the nibbles; Q4_0's
 * q - 8 in integers; Q8_0's bytes sign-extended), then
 *     s = ((e0 x0 + e1 x1) + e2 x2) + e3 x3      (lane-wise, one FMA chain)
 *     acc_row = fma(s, d_b, acc_row)
 * and the row is the 8-lane sum of acc_row (plus, Q4_1, sum_b m_b xsum_b).
 * The f16 [d, m] words of 8 (row, block) pairs at a time (lane l: row l % R,
 * block l / R) come in as one vector (scale_words8), are converted by F16C
 * and stored for broadcast loads (a load, no shuffle, in the block loop); Q4_1's m
 * multiply c->xsr[R] (0, xsum_b in the lanes of m) lane-wise into macc, so
 * the m term costs one FMA per 4 row-blocks. Q4_0 / Q8_0 convert their
 * 2-byte d with the next 2 bytes of the block (lanes not read). Only f32
 * rounding: each lane of acc_row adds one product per block (cols/32 deep,
 * plus 3 roundings in s and 3 in the final sum), macc one per block, within
 * the exact bound (quant.h). ~16 vector operations per Q4_1 row-block (the
 * nibble unpack and the 4 conversions, 5 FMAs); measured on a 2-core Zen 3
 * VM, interleaved with the former one-row kernel: 1.4x (Q4_1) and 1.8x
 * (Q8_0) its rate from L2, SmolLM2-135M's token of mat-vecs 1.5-1.6x faster.
 * Tried and slower here: the 2^23 magic-number conversion instead of
 * vcvtdq2ps (~7%), scalar loads instead of the gather (~8%, in the form
 * tried then; scale_words8's paired loads replaced the gather later, ~13%
 * faster from L2); the pairwise sum for s instead of the chain ~3% slower;
 * PF_DIST 8192 no different. Also tried on Zen 3 after the gather went:
 * no different within the VM's noise: the pairwise s again, the block loop
 * unrolled by 2, PF_HINT T1 (2 threads, 35 MB from DRAM); ~30% slower:
 * Q4_0/Q8_0's d alone, 8 per conversion from 2-byte loads. The kernel is
 * compute-bound here (1 thread: ~3 CPU-ns per Q4_1 row-block from L2 and
 * from DRAM alike). */
enum { A4_0 = 0, A4_1 = 1, A8_0 = 2 };
#ifndef SC_CHUNK2
#define SC_CHUNK2 32 /* blocks per pass of scale conversion and block loop */
#endif

/* [sum a, sum b, sum c, sum d] of four 8-lane vectors. */
static inline __m128 hsum4_256(__m256 a, __m256 b, __m256 c, __m256 d) {
    __m256 abcd = _mm256_hadd_ps(_mm256_hadd_ps(a, b), _mm256_hadd_ps(c, d));
    return _mm_add_ps(_mm256_castps256_ps128(abcd), _mm256_extractf128_ps(abcd, 1));
}

/* The first 4 bytes of 8 (row, block) pairs, lane l = (row l % R, block
 * l / R), at p + (l % R) rb + (l / R) bytes; lanes from `left` on zero and
 * not read. Two 4-byte loads per 64-bit word, combined in general
 * registers, then four inserts: vpgatherdd costs more on Zen 3 (the gather
 * was ~20% of the Q4_1 4-row kernel's perf samples from L2). */
static ALWAYS_INLINE uint64_t scale_pair(const uint8_t *p, size_t rb, int bytes, int R, int l, int left) {
    uint32_t u = 0, v = 0;
    if (l < left) memcpy(&u, p + (size_t)(l % R) * rb + (size_t)(l / R) * bytes, 4);
    if (l + 1 < left) memcpy(&v, p + (size_t)((l + 1) % R) * rb + (size_t)((l + 1) / R) * bytes, 4);
    return (uint64_t)u | (uint64_t)v << 32;
}
static ALWAYS_INLINE __m256i scale_words8(const uint8_t *p, size_t rb, int bytes, int R, int left) {
    return _mm256_setr_epi64x((long long)scale_pair(p, rb, bytes, R, 0, left),
                              (long long)scale_pair(p, rb, bytes, R, 2, left),
                              (long long)scale_pair(p, rb, bytes, R, 4, left),
                              (long long)scale_pair(p, rb, bytes, R, 6, left));
}

static ALWAYS_INLINE void rows_avx2_32(const uint8_t *w, size_t rb, const xctx *c, float *y, int R, int kind) {
    const int bytes = kind == A4_0 ? 18 : kind == A4_1 ? 20 : 34, qoff = kind == A4_1 ? 4 : 2;
    const __m256i m4 = _mm256_set1_epi32(15), k8 = _mm256_set1_epi32(8);
    const float *xsr = c->xsr[R];
    float sc[2 * 4 * SC_CHUNK2] __attribute__((aligned(32)));
    __m256 acc[4], macc = _mm256_setzero_ps();
#pragma GCC unroll 4
    for (int i = 0; i < 4; i++) acc[i] = _mm256_setzero_ps();
    const int step = R * bytes; /* weight bytes per block step */
    const int per_row = R > 1 && (size_t)R * rb > PF_ROW_MIN && !NO_PERROW_ON;
    for (int b0 = 0; b0 < c->nb; b0 += SC_CHUNK2) {
        int n = KB_MIN(SC_CHUNK2, c->nb - b0);
        const uint8_t *wb = w + (size_t)b0 * bytes;
        for (int l0 = 0; l0 < R * n; l0 += 8) {
            int left = R * n - l0;
            __m256i g = scale_words8(wb + (size_t)(l0 / R) * bytes, rb, bytes, R, left);
            __m256 lo = _mm256_cvtph_ps(_mm256_castsi256_si128(g));
            __m256 hi = _mm256_cvtph_ps(_mm256_extracti128_si256(g, 1));
            _mm256_store_ps(sc + 2 * l0, lo);
            _mm256_store_ps(sc + 2 * l0 + 8, hi);
            if (kind == A4_1) {
                const float *xs = xsr + 2 * (R * b0 + l0);
                macc = _mm256_fmadd_ps(lo, _mm256_loadu_ps(xs), macc);
                macc = _mm256_fmadd_ps(hi, _mm256_loadu_ps(xs + 8), macc);
            }
        }
        const char *pf = (const char *)w + PF_DIST + (size_t)b0 * step;
        for (int k = 0; k < n; k++) {
            pf_block_step(w, rb, R, bytes, b0 + k, per_row, pf + (size_t)k * step, step);
            const float *xk = c->x + 32 * (b0 + k);
            __m256 x0 = _mm256_loadu_ps(xk), x1 = _mm256_loadu_ps(xk + 8);
            __m256 x2 = _mm256_loadu_ps(xk + 16), x3 = _mm256_loadu_ps(xk + 24);
#pragma GCC unroll 4
            for (int i = 0; i < R; i++) {
                const uint8_t *qs = wb + i * rb + (size_t)k * bytes + qoff;
                __m256 e0, e1, e2, e3;
                if (kind == A8_0) {
                    e0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)qs)));
                    e1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(qs + 8))));
                    e2 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(qs + 16))));
                    e3 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(qs + 24))));
                } else {
                    __m256i za = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)qs));
                    __m256i zb = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)(qs + 8)));
                    __m256i q0 = _mm256_and_si256(za, m4), q1 = _mm256_and_si256(zb, m4);
                    __m256i q2 = _mm256_srli_epi32(za, 4), q3 = _mm256_srli_epi32(zb, 4);
                    if (kind == A4_0) {
                        q0 = _mm256_sub_epi32(q0, k8);
                        q1 = _mm256_sub_epi32(q1, k8);
                        q2 = _mm256_sub_epi32(q2, k8);
                        q3 = _mm256_sub_epi32(q3, k8);
                    }
                    e0 = _mm256_cvtepi32_ps(q0);
                    e1 = _mm256_cvtepi32_ps(q1);
                    e2 = _mm256_cvtepi32_ps(q2);
                    e3 = _mm256_cvtepi32_ps(q3);
                }
                __m256 s = _mm256_fmadd_ps(e3, x3, _mm256_fmadd_ps(e2, x2, _mm256_fmadd_ps(e1, x1, _mm256_mul_ps(e0, x0))));
                acc[i] = _mm256_fmadd_ps(s, _mm256_broadcast_ss(sc + 2 * (R * k + i)), acc[i]);
            }
        }
    }
    /* macc lane 2l+1 holds m terms of row l % R */
    __m256 modd = _mm256_permutevar8x32_ps(macc, _mm256_setr_epi32(1, 3, 5, 7, 0, 2, 4, 6));
    if (R == 4) {
        __m128 r = hsum4_256(acc[0], acc[1], acc[2], acc[3]);
        if (kind == A4_1) r = _mm_add_ps(r, _mm256_castps256_ps128(modd));
        _mm_storeu_ps(y, r);
    } else {
        float r = hsum_ps(acc[0]);
        if (kind == A4_1) {
            __m128 m = _mm256_castps256_ps128(modd);
            m = _mm_add_ps(m, _mm_movehl_ps(m, m));
            r += _mm_cvtss_f32(_mm_add_ss(m, _mm_movehdup_ps(m)));
        }
        y[0] = r;
    }
}

#define ROWS_AVX2(name, kind)                                                                   \
    static void name(const uint8_t *w, size_t rb, int r0, int r1, const xctx *c, float *y) {    \
        int r = r0;                                                                             \
        for (; r + 4 <= r1; r += 4) rows_avx2_32(w + (size_t)r * rb, rb, c, y + r, 4, kind);    \
        for (; r < r1; r++) rows_avx2_32(w + (size_t)r * rb, rb, c, y + r, 1, kind);            \
    }
ROWS_AVX2(rows2_q4_0, A4_0)
ROWS_AVX2(rows2_q4_1, A4_1)
ROWS_AVX2(rows2_q8_0, A8_0)
#undef ROWS_AVX2
#endif

#if !defined(HAVE_R16) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__) && !defined(__AVX512F__)
#define HAVE_R16 1
#define HAVE_R16_AVX2 1
/* The R16 kernels with AVX2 only (Zen 3 and the like: no VNNI): the same
 * numbers as the AVX-512 VNNI kernels above, bit for bit. x24_init's X_j,
 * e_b and bytes L0, L1, L2 are those of the AVX-512 version (integer
 * arithmetic and one exact product, the same x24_exp; a block is
 * non-finite in both when an element is Inf or NaN). In the kernels
 * each dpbusd (4 products u8 x s8 summed into a 32-bit lane) becomes
 * vpmaddubsw (2 products into a 16-bit lane) added in 16 bits over the
 * block's 32 columns, then one vpmaddwd by ones into 32 bits: for Q4_1
 * |q L| <= 15 x 128, so a 16-bit lane's 8 pairs stay within 8 x 3840 =
 * 30720 < 2^15 (no saturation, no wrap), and the three 32-bit sums per row
 * and block are the exact integers the VNNI kernel forms; the f32
 * recombination (r16_block_sum's) and the d, m and xsum products are the
 * same operations in the same order (xsum_b itself is xctx_init's, summed
 * in another order on AVX-512 builds). Q8_0's bytes (q + 128, up to 255)
 * would saturate vpmaddubsw's pairs, so its sums are formed from the two
 * nibbles of each byte (u = ul + 16 uh, each 0..15, the same bound): more
 * operations than the exact AVX2 Q8_0 kernel, and no more than ~4-8% faster
 * than it even with KEEP_ORDER (below; 0.92x from L2, 0.96x for SmolLM2's
 * 30 MB output matrix from memory), so the loader leaves Q8_0 matrices in
 * GGUF's layout on these builds (kb_r16_regroups) and their numbers stay
 * exact's; this kernel serves R16 Q8_0 matrices made otherwise. (Also
 * measured on Zen 3 and not kept: the bytes zero-extended to 16 bits and
 * vpmaddwd against x's L0 + 256 L1 and L2 as 16-bit values, 4 multiplies
 * per row-block instead of 6, was 1.2x slower than the exact kernel:
 * PERFORMANCE-LOG.md, "Zen 3, 2026-12-04".)
 * 8 rows per vector, a group's two halves side by side. Measured (single
 * thread, 1536 x 576 Q4_1 from L2, 2-core Zen 3 VM, alternated): 3.2 ->
 * 2.1 ns per row-block against the exact AVX2 kernel; with KEEP_ORDER
 * 4.6 -> 3.0 TSC cycles (scripts/microbench/matvec_ab.sh).
 * x24_init's loops over i and k are unrolled by pragma: otherwise GCC 12
 * kept v, l, s and S on the stack, and the call took 5% (576 columns) to 28% (1,536)
 * longer on Zen 3 (the same operations). */
static void x24_init(xctx *c, int8_t *xl, float *xsc, int32_t *xls) {
    const int cols = c->cols;
    const __m256 absm = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    const __m256 inf = _mm256_set1_ps(INFINITY);
    const __m256i order = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    for (int b = 0; b < c->nb; b++) {
        __m256 v[4], mx = _mm256_setzero_ps();
        int bad = 0;
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(c->x + 32 * b + 8 * i);
            __m256 a = _mm256_and_ps(v[i], absm);
            bad |= _mm256_movemask_ps(_mm256_cmp_ps(a, inf, _CMP_NLT_UQ)); /* Inf or NaN */
            mx = _mm256_max_ps(mx, a);
        }
        if (bad) {
            x24_nonfinite(xl, xsc, xls, cols, b);
            continue;
        }
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mx), _mm256_extractf128_ps(mx, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        const int e = x24_exp(_mm_cvtss_f32(m4));
        xsc[b] = x24_pow2(-e);
        const __m256 f = _mm256_set1_ps(x24_pow2(e));
        __m256i l[3][4], s[3] = {_mm256_setzero_si256(), _mm256_setzero_si256(), _mm256_setzero_si256()};
#pragma GCC unroll 4
        for (int i = 0; i < 4; i++) {
            __m256i X = _mm256_cvtps_epi32(_mm256_mul_ps(v[i], f));
            l[0][i] = _mm256_srai_epi32(_mm256_slli_epi32(X, 24), 24);
            __m256i x1 = _mm256_srai_epi32(_mm256_sub_epi32(X, l[0][i]), 8);
            l[1][i] = _mm256_srai_epi32(_mm256_slli_epi32(x1, 24), 24);
            l[2][i] = _mm256_srai_epi32(_mm256_sub_epi32(x1, l[1][i]), 8);
#pragma GCC unroll 3
            for (int k = 0; k < 3; k++) s[k] = _mm256_add_epi32(s[k], l[k][i]);
        }
        int32_t S[3];
#pragma GCC unroll 3
        for (int k = 0; k < 3; k++) {
            /* the 32 bytes in element order: packs interleave 128-bit lanes */
            __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(l[k][0], l[k][1]), _mm256_packs_epi32(l[k][2], l[k][3]));
            _mm256_storeu_si256((__m256i *)(void *)(xl + (size_t)k * cols + 32 * b), _mm256_permutevar8x32_epi32(p, order));
            __m128i t = _mm_add_epi32(_mm256_castsi256_si128(s[k]), _mm256_extracti128_si256(s[k], 1));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(1, 0, 3, 2)));
            t = _mm_add_epi32(t, _mm_shuffle_epi32(t, _MM_SHUFFLE(2, 3, 0, 1)));
            S[k] = _mm_cvtsi128_si32(t);
        }
        xls[2 * b] = 128 * (S[0] + 256 * S[1]);
        xls[2 * b + 1] = 128 * S[2];
    }
    c->xl = xl;
    c->xsc = xsc;
    c->xls = xls;
}

/* 4 bytes of x (4 columns) broadcast to every lane */
#define BC4(p) _mm256_set1_epi32(*(const int32_t *)(const void *)(p))

/* Keeps a 16-bit accumulator's sum in the order written. Integer adds are
 * associative, and without this GCC 12 computes all of a block's
 * vpmaddubsw products first and adds them up as a tree at the end, which
 * needs more than the 16 ymm registers: of rows_r16's ~280 stack accesses
 * most were those products spilled and reloaded, and the Q4_1 kernel took
 * 1.3-1.5x the time (PERFORMANCE-LOG.md, "Zen 3 again"). The sums are exact
 * integers either way, so y does not change. */
#define KEEP_ORDER(v) __asm__("" : "+x"(v))

/* r16_block_sum of the AVX-512 path on 8 rows: S0, S1, S2 the exact 32-bit
 * sums per byte of X, dp the rows' 8 f16 d. */
static ALWAYS_INLINE __m256 r16_block_sum8(__m256 acc, __m256i S0, __m256i S1, __m256i S2, int32_t off01,
                                           int32_t off2, const uint8_t *dp, float xsc) {
    S2 = _mm256_sub_epi32(S2, _mm256_set1_epi32(off2));
    __m256i lo = _mm256_sub_epi32(_mm256_add_epi32(S0, _mm256_slli_epi32(S1, 8)), _mm256_set1_epi32(off01));
    __m256 S = _mm256_fmadd_ps(_mm256_cvtepi32_ps(S2), _mm256_set1_ps(65536.0f), _mm256_cvtepi32_ps(lo));
    __m256 d = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)dp));
    return _mm256_fmadd_ps(S, _mm256_mul_ps(d, _mm256_set1_ps(xsc)), acc);
}

/* y[0..16) of one Q4_1 R16 group: per block, rows 8h..8h+7 are the h-th 32
 * bytes of each 64-byte vector of nibbles; per byte k of X a 16-bit
 * accumulator for each half, then r16_block_sum8 and macc += m xsum_b. */
static ALWAYS_INLINE void r16_group_q4_1(const uint8_t *g, const xctx *c, float *y) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const int cols = c->cols;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()}, macc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < c->nb; b++) {
        const uint8_t *blk = g + (size_t)320 * b;
#pragma GCC unroll 5
        for (int l = 0; l < 320; l += 64) _mm_prefetch((const char *)blk + PF_DIST + l, PF_HINT);
        const int8_t *x0 = c->xl + 32 * b, *x1 = x0 + cols, *x2 = x1 + cols;
        __m256i a[2][3];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) a[h][0] = a[h][1] = a[h][2] = _mm256_setzero_si256();
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++) {
            const __m256i b0l = BC4(x0 + 8 * t), b0h = BC4(x0 + 8 * t + 4), b1l = BC4(x1 + 8 * t),
                          b1h = BC4(x1 + 8 * t + 4), b2l = BC4(x2 + 8 * t), b2h = BC4(x2 + 8 * t + 4);
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i P = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 64 + 64 * t + 32 * h));
                __m256i lo = _mm256_and_si256(P, m4), hi = _mm256_and_si256(_mm256_srli_epi16(P, 4), m4);
                a[h][0] = _mm256_add_epi16(a[h][0], _mm256_add_epi16(_mm256_maddubs_epi16(lo, b0l), _mm256_maddubs_epi16(hi, b0h)));
                a[h][1] = _mm256_add_epi16(a[h][1], _mm256_add_epi16(_mm256_maddubs_epi16(lo, b1l), _mm256_maddubs_epi16(hi, b1h)));
                a[h][2] = _mm256_add_epi16(a[h][2], _mm256_add_epi16(_mm256_maddubs_epi16(lo, b2l), _mm256_maddubs_epi16(hi, b2h)));
                KEEP_ORDER(a[h][0]);
                KEEP_ORDER(a[h][1]);
                KEEP_ORDER(a[h][2]);
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            acc[h] = r16_block_sum8(acc[h], _mm256_madd_epi16(a[h][0], ones), _mm256_madd_epi16(a[h][1], ones),
                                    _mm256_madd_epi16(a[h][2], ones), 0, 0, blk + 16 * h, c->xsc[b]);
            __m256 m = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)(blk + 32 + 16 * h)));
            macc[h] = _mm256_fmadd_ps(m, _mm256_set1_ps(c->xsum[b]), macc[h]);
        }
    }
    _mm256_storeu_ps(y, _mm256_add_ps(acc[0], macc[0]));
    _mm256_storeu_ps(y + 8, _mm256_add_ps(acc[1], macc[1]));
}

/* y[0..16) of one Q8_0 R16 group: each byte u = q + 128 as ul + 16 uh
 * (nibbles), per byte k of X and half h two 16-bit accumulators (ul and uh
 * against L_k), A_k = madd(ul part) + 16 madd(uh part) exactly, then the
 * offsets as in r16_group_q8_0 above. */
static ALWAYS_INLINE void r16_group_q8_0(const uint8_t *g, const xctx *c, float *y) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), ones = _mm256_set1_epi16(1);
    const int cols = c->cols;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int b = 0; b < c->nb; b++) {
        const uint8_t *blk = g + (size_t)544 * b;
#pragma GCC unroll 9
        for (int l = 0; l < 576; l += 64) _mm_prefetch((const char *)blk + PF_DIST + l, PF_HINT);
        const int8_t *x0 = c->xl + 32 * b, *x1 = x0 + cols, *x2 = x1 + cols;
        __m256i al[2][3], ah[2][3];
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++)
            for (int k = 0; k < 3; k++) al[h][k] = ah[h][k] = _mm256_setzero_si256();
#pragma GCC unroll 8
        for (int t = 0; t < 8; t++) {
            const __m256i bx[3] = {BC4(x0 + 4 * t), BC4(x1 + 4 * t), BC4(x2 + 4 * t)};
#pragma GCC unroll 2
            for (int h = 0; h < 2; h++) {
                __m256i P = _mm256_loadu_si256((const __m256i *)(const void *)(blk + 32 + 64 * t + 32 * h));
                __m256i ul = _mm256_and_si256(P, m4), uh = _mm256_and_si256(_mm256_srli_epi16(P, 4), m4);
#pragma GCC unroll 3
                for (int k = 0; k < 3; k++) {
                    al[h][k] = _mm256_add_epi16(al[h][k], _mm256_maddubs_epi16(ul, bx[k]));
                    ah[h][k] = _mm256_add_epi16(ah[h][k], _mm256_maddubs_epi16(uh, bx[k]));
                    KEEP_ORDER(al[h][k]);
                    KEEP_ORDER(ah[h][k]);
                }
            }
        }
#pragma GCC unroll 2
        for (int h = 0; h < 2; h++) {
            __m256i S[3];
#pragma GCC unroll 3
            for (int k = 0; k < 3; k++)
                S[k] = _mm256_add_epi32(_mm256_madd_epi16(al[h][k], ones), _mm256_slli_epi32(_mm256_madd_epi16(ah[h][k], ones), 4));
            acc[h] = r16_block_sum8(acc[h], S[0], S[1], S[2], c->xls[2 * b], c->xls[2 * b + 1], blk + 16 * h, c->xsc[b]);
        }
    }
    _mm256_storeu_ps(y, acc[0]);
    _mm256_storeu_ps(y + 8, acc[1]);
}
#undef BC4
#undef KEEP_ORDER

#endif /* R16 on AVX2 */

#ifdef HAVE_R16
/* Rows [r0, r1) (multiples of 16) of an R16 matrix: the groups of either
 * path's kernels (VNNI or AVX2). */
static void rows_r16(uint32_t type, const uint8_t *w, size_t row_bytes, int r0, int r1, const xctx *c, float *y) {
    const char *p = (const char *)(w + (size_t)r0 * row_bytes);
    size_t n = KB_MIN((size_t)PF_DIST, (size_t)(r1 - r0) * row_bytes);
    for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, PF_HINT);
    if (type == GGML_Q8_0)
        for (int r = r0; r < r1; r += 16) r16_group_q8_0(w + (size_t)r * row_bytes, c, y + r);
    else
        for (int r = r0; r < r1; r += 16) r16_group_q4_1(w + (size_t)r * row_bytes, c, y + r);
}
#endif


/* Generic exact row: dequantise a chunk at a time (bit-exact values) and dot
 * in f32 (the plain-C path for every type, and the AVX2 path for the types
 * without their own kernel). */
static float rowx_generic(uint32_t type, const uint8_t *w, int cols, const float *x) {
#if defined(__AVX2__) && defined(__F16C__) && !defined(__AVX512F__)
    if (type == GGML_F32 || type == GGML_F16 || type == GGML_BF16) return row_float(type, w, cols, x);
#endif
    if (type == GGML_F32) return dot_f32((const float *)(const void *)w, x, cols);
    const kb_qtype *t = kb_qtype_info(type);
    enum { CHUNK = 512 }; /* a multiple of every block size */
    float buf[CHUNK];
    float acc = 0.0f;
    for (int c = 0; c < cols; c += CHUNK) {
        int n = KB_MIN(CHUNK, cols - c);
        kb_dequant(type, w + (size_t)(c / t->blck) * (size_t)t->bytes, buf, n);
        acc += dot_f32(buf, x + c, n);
    }
    return acc;
}

/* Floats of scratch xctx_init needs for nb blocks of 32. */
static size_t xctx_floats(int nb) {
    size_t pad = (size_t)(nb + 15) / 16 * 16;
    return pad + 2 * (pad + 16) + 8 * (pad + 16);
}

/* The sum of x[0..32) in one order on every build: GCC's
 * _mm512_reduce_add_ps of x[0..16) + x[16..32) (lane i: x_i + x_{16+i}),
 * i.e. halves of 8, then of 4, then lanes (0,2) and (1,3), then those two;
 * written out for AVX2 and plain C, so that xsum_b, and with it Q4_1's m
 * term in the exact and the R16 kernels, are the same bits everywhere
 * (test_quant's r16_formula sums the same way). */
static inline float xsum32(const float *x) {
#ifdef __AVX512F__
    return _mm512_reduce_add_ps(_mm512_add_ps(_mm512_loadu_ps(x), _mm512_loadu_ps(x + 16)));
#elif defined(__AVX2__)
    __m256 a = _mm256_add_ps(_mm256_loadu_ps(x), _mm256_loadu_ps(x + 16));
    __m256 b = _mm256_add_ps(_mm256_loadu_ps(x + 8), _mm256_loadu_ps(x + 24));
    __m256 t3 = _mm256_add_ps(b, a);
    __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
    __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
    return _mm_cvtss_f32(t8) + _mm_cvtss_f32(_mm_shuffle_ps(t8, t8, _MM_SHUFFLE(1, 1, 1, 1)));
#else
    float t3[8], t6[4];
    for (int i = 0; i < 8; i++) t3[i] = (x[8 + i] + x[24 + i]) + (x[i] + x[16 + i]);
    for (int i = 0; i < 4; i++) t6[i] = t3[4 + i] + t3[i];
    return (t6[0] + t6[2]) + (t6[1] + t6[3]);
#endif
}

/* Sums of x per block of 32 (xsum32) into c->xsum (sums >= 1: the types
 * with a min term need them) and their (0, xsum) pair arrays c->xsr[1],
 * c->xsr[4] (sums == 2: only the exact kernels of GGUF-layout rows read
 * them; the R16 kernels read xsum), zero-padded, in buf (xctx_floats(cols/32)
 * floats). The pairs cost ~0.35 kTSC of a 576-column call warm on Zen 3,
 * and 0.5-1.2 in the decode, where the other core waits while the caller
 * prepares x (docs/PERFORMANCE-LOG.md, "Zen 3, 2026-12-04"). */
static void xctx_init(xctx *c, const float *x, int cols, float *buf, int sums) {
    c->x = x;
    c->cols = cols;
    c->nb = cols / 32;
    int pad = (c->nb + 15) / 16 * 16;
    c->xsum = buf;
    c->xsr[1] = c->xsum + pad;
    c->xsr[4] = c->xsr[1] + 2 * (pad + 16);
    c->xsr[0] = c->xsr[2] = c->xsr[3] = NULL;
    c->xp = NULL;
    for (int b = 0; sums && b < pad + (sums == 2 ? 16 : 0); b++) {
        float s = 0.0f;
        if (b < c->nb) s = xsum32(x + 32 * b);
        if (b < pad) c->xsum[b] = s;
        for (int r = 0; sums == 2 && r < 4; r++) {
            if (r == 0) {
                c->xsr[1][2 * b] = 0.0f;
                c->xsr[1][2 * b + 1] = s;
            }
            c->xsr[4][8 * b + 2 * r] = 0.0f;
            c->xsr[4][8 * b + 2 * r + 1] = s;
        }
    }
}

#ifdef __AVX512F__
/* xp[32b + i] = x[32b + e(i)]: lane i of the low vector holds nibble i/4 of
 * dword i%4 of the block's 16 bytes, i.e. element 4(i%4) + (i/4)/2 +
 * 16*((i/4)&1); the high vector nibble 4 + i/4, two bytes further. */
static void xperm_init(xctx *c, float *xp) {
    const __m512i e0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i e1 = _mm512_add_epi32(e0, _mm512_set1_epi32(2));
    for (int b = 0; b < c->nb; b++) {
        __m512 a = _mm512_loadu_ps(c->x + 32 * b), h = _mm512_loadu_ps(c->x + 32 * b + 16);
        _mm512_storeu_ps(xp + 32 * b, _mm512_permutex2var_ps(a, e0, h));
        _mm512_storeu_ps(xp + 32 * b + 16, _mm512_permutex2var_ps(a, e1, h));
    }
    c->xp = xp;
}
#endif

static void rows_exact(uint32_t type, const uint8_t *w, size_t row_bytes, int r0, int r1,
                       const xctx *c, float *y) {
#if defined(__AVX2__) || defined(__AVX512F__)
    {   /* the kernels prefetch PF_DIST ahead of where they read: cover the
         * first PF_DIST bytes of a new range, which nothing prefetched yet
         * (measured: 6.2 -> 5.0 ms per token of mat-vecs, with the 64 KiB chunks of
         * the time) */
        const char *p = (const char *)(w + (size_t)r0 * row_bytes);
        size_t n = KB_MIN((size_t)PF_DIST, (size_t)(r1 - r0) * row_bytes);
        for (size_t o = 0; o < n; o += 64) _mm_prefetch(p + o, PF_HINT);
    }
#endif
#ifdef __AVX512F__
    void (*rows)(const uint8_t *, size_t, int, int, const xctx *, float *) = NULL;
    float (*row)(const uint8_t *, const xctx *) = NULL;
    switch (type) {
    case GGML_Q4_0: rows = rowsx_q4_0; break;
    case GGML_Q4_1: rows = rowsx_q4_1; break;
    case GGML_Q5_0: rows = rowsx_q5_0; break;
    case GGML_Q5_1: rows = rowsx_q5_1; break;
    case GGML_Q8_0: rows = rowsx_q8_0; break;
    case GGML_Q4_K: row = rowx_q4_k; break;
    case GGML_Q6_K: row = rowx_q6_k; break;
    case GGML_F32:
    case GGML_F16:
    case GGML_BF16:
        for (int r = r0; r < r1; r++) y[r] = rowx_float(type, w + (size_t)r * row_bytes, c->cols, c->x);
        return;
    default: break;
    }
    if (rows) {
        rows(w, row_bytes, r0, r1, c, y);
        return;
    }
    if (row) {
        for (int r = r0; r < r1; r++) y[r] = row(w + (size_t)r * row_bytes, c);
        return;
    }
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
    switch (type) {
    case GGML_Q4_0: rows2_q4_0(w, row_bytes, r0, r1, c, y); return;
    case GGML_Q4_1: rows2_q4_1(w, row_bytes, r0, r1, c, y); return;
    case GGML_Q8_0: rows2_q8_0(w, row_bytes, r0, r1, c, y); return;
    default: break;
    }
#endif
    for (int r = r0; r < r1; r++) y[r] = rowx_generic(type, w + (size_t)r * row_bytes, c->cols, c->x);
}

/* Rows [r0, r1) (multiples of 16) of an R16 matrix: the VNNI kernel, or
 * where the build has none (a caller that repacked anyway) its groups
 * dequantised and dotted in double (within the R16 bound). */
static void rows_r16_any(uint32_t type, const uint8_t *w, size_t row_bytes, int r0, int r1, const xctx *c,
                         float *y) {
#ifdef HAVE_R16
    rows_r16(type, w, row_bytes, r0, r1, c, y);
#else
    float *g = KB_MALLOC((size_t)16 * c->cols * sizeof(float));
    for (int r = r0; r < r1; r += 16) {
        kb_r16_dequant_ref(type, w, row_bytes, r, 16, g);
        for (int i = 0; i < 16; i++) {
            double s = 0.0;
            for (int j = 0; j < c->cols; j++) s += (double)g[(size_t)i * c->cols + j] * c->x[j];
            y[r + i] = (float)s;
        }
    }
    free(g);
#endif
}

/* One pool chunk of kb_matvec_multi: from row r0 of matrix i0 up to (not
 * including) row r1 of matrix i1, the matrices in between whole. */
typedef struct mv_piece {
    int i0, r0, i1, r1;
} mv_piece;

typedef struct mvx_job {
    const kb_mv *mv;
    const xctx *c;
    const mv_piece *pc;
} mvx_job;

static void mvx_chunk(void *p, int k, int worker) {
    (void)worker;
    const mvx_job *j = p;
    const mv_piece *q = &j->pc[k];
    for (int i = q->i0; i <= q->i1; i++) {
        const kb_mv *m = &j->mv[i];
        int r0 = i == q->i0 ? q->r0 : 0, r1 = i == q->i1 ? q->r1 : m->rows;
        if (r1 <= r0) continue;
        if (m->layout == KB_LAYOUT_R16) rows_r16_any(m->type, m->W, m->row_bytes, r0, r1, j->c, m->y);
        else rows_exact(m->type, m->W, m->row_bytes, r0, r1, j->c, m->y);
    }
}

/* Splits the rows of n matrices, taken one after another as one sequence,
 * into pool chunks of about equal bytes: max(MATVEC_CHUNKS_PER_THREAD per
 * thread, total / MATVEC_CHUNK_BYTES) of them, rounded up to a multiple of
 * the threads (gate/up in 5 chunks left one thread a third chunk alone:
 * +4 / +10 / -2% against 8; 6 are as fast as 8), each ending on a multiple of
 * 16 rows (or a matrix's end), so a chunk may run from one matrix into the
 * next. A decode token's q, k and v (207 + 69 + 69 KB in SmolLM2) were 12
 * chunks when each matrix was split alone (4 each), 12 cold starts and 12
 * claims passed between the two cores; now 4 (docs/PERFORMANCE-LOG.md, "Fewer
 * chunks, cheaper x"). One matrix splits into about the chunks it had
 * before (SmolLM2's Wo, down and output matrices into the same ones).
 * Writes at most max pieces (pc NULL: only counts them). */
static int mv_plan(const kb_mv *mv, int n, int nthr, mv_piece *pc, int max) {
    size_t total = 0;
    for (int i = 0; i < n; i++) total += mv[i].rows > 0 ? (size_t)mv[i].rows * mv[i].row_bytes : 0;
    size_t want = KB_MAX((size_t)MATVEC_CHUNKS_PER_THREAD * (size_t)nthr,
                         (total + MATVEC_CHUNK_BYTES - 1) / MATVEC_CHUNK_BYTES);
    want = (want + (size_t)nthr - 1) / (size_t)nthr * (size_t)nthr; /* as many for every thread */
    size_t per = (total + want - 1) / want, acc = 0;
    int np = 0, i0 = -1, r0 = 0;
    for (int i = 0; i < n; i++) {
        for (int r = 0; r < mv[i].rows; r += 16) {
            int r1 = KB_MIN(mv[i].rows, r + 16);
            if (i0 < 0) i0 = i, r0 = r;
            acc += (size_t)(r1 - r) * mv[i].row_bytes;
            if (acc >= per) {
                if (pc && np < max) pc[np] = (mv_piece){i0, r0, i, r1};
                np++;
                acc = 0;
                i0 = -1;
            }
        }
    }
    if (i0 >= 0) { /* the rest, up to the last matrix's end */
        int last = n - 1;
        while (last > 0 && mv[last].rows <= 0) last--;
        if (pc && np < max) pc[np] = (mv_piece){i0, r0, last, KB_MAX(0, mv[last].rows)};
        np++;
    }
    return np;
}

/* The exact path of kb_matvec_multi (every matrix's cols and x shared), and
 * every R16 matrix's whatever the mode. */
static void matvec_multi_exact(const kb_mv *mv, int n, int cols, const float *x) {
    size_t total = 0;
    int sums = 0, perm = 0, r16 = 0;
    for (int i = 0; i < n; i++) {
        uint32_t t = mv[i].type;
        total += mv[i].rows > 0 ? (size_t)mv[i].rows * mv[i].row_bytes : 0;
        if (t == GGML_Q4_1 || t == GGML_Q5_1 || t == GGML_Q4_K) /* xsum; the pairs for GGUF's rows */
            sums = KB_MAX(sums, mv[i].layout == KB_LAYOUT_R16 ? 1 : 2);
        perm |= (t == GGML_Q4_0 || t == GGML_Q4_1) && mv[i].layout != KB_LAYOUT_R16;
        r16 |= mv[i].layout == KB_LAYOUT_R16;
    }
    if (!total) return;
    xctx c;
    /* + xp (cols floats) + xl (3 cols bytes) + xsc (nb floats) + xls (2 nb ints) */
    size_t base = xctx_floats(cols / 32), need = base + (size_t)cols + (size_t)cols + 3 * ((size_t)cols / 32);
    float stackbuf[8192] __attribute__((aligned(64)));
    float *heap = NULL, *buf = stackbuf;
    if (need > KB_ARRAY_LEN(stackbuf)) buf = heap = KB_AMALLOC(need * sizeof(float));
    xctx_init(&c, x, cols, buf, sums); /* the sums and xp are read only by types that need them */
#if defined(__AVX512F__) && !defined(NO_K4T)
    if (perm) xperm_init(&c, buf + base);
#else
    (void)perm;
#endif
#ifdef HAVE_R16
    if (r16)
        x24_init(&c, (int8_t *)(void *)(buf + base + cols), buf + base + 2 * (size_t)cols,
                 (int32_t *)(void *)(buf + base + 2 * (size_t)cols + (size_t)cols / 32));
#else
    (void)r16;
#endif
    int nthr = total >= MATVEC_PAR_BYTES ? kb_pool_threads() : 1;
    if (nthr <= 1) {
        for (int i = 0; i < n; i++) {
            if (mv[i].rows <= 0) continue;
            if (mv[i].layout == KB_LAYOUT_R16) rows_r16_any(mv[i].type, mv[i].W, mv[i].row_bytes, 0, mv[i].rows, &c, mv[i].y);
            else rows_exact(mv[i].type, mv[i].W, mv[i].row_bytes, 0, mv[i].rows, &c, mv[i].y);
        }
    } else {
        mv_piece stackpc[1024], *pc = stackpc, *pheap = NULL;
        int np = mv_plan(mv, n, nthr, NULL, 0);
        if (np > (int)KB_ARRAY_LEN(stackpc)) pc = pheap = KB_MALLOC((size_t)np * sizeof(*pc));
        mv_plan(mv, n, nthr, pc, np);
        mvx_job j = {mv, &c, pc};
        kb_pool_run(np, mvx_chunk, &j);
        free(pheap);
    }
    if (heap) kb_afree(heap);
}

void kb_matvec_exact(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                     const float *x, float *y) {
    kb_mv m = {type, W, row_bytes, rows, y, KB_LAYOUT_ROWS};
    matvec_multi_exact(&m, 1, cols, x);
}

void kb_matvec_multi(const kb_mv *mv, int n, int cols, const float *x) {
    if (kb_matvec_mode() == KB_MATVEC_Q8) {
        for (int i = 0; i < n; i++) {
            if (mv[i].layout == KB_LAYOUT_R16) matvec_multi_exact(&mv[i], 1, cols, x);
            else kb_matvec_q8(mv[i].type, mv[i].W, mv[i].row_bytes, mv[i].rows, cols, x, mv[i].y);
        }
        return;
    }
    matvec_multi_exact(mv, n, cols, x);
}

/* ================================================================== mode */

static atomic_int matvec_mode = -1;

int kb_r16_available(void) {
#ifdef HAVE_R16
    return 1;
#else
    return 0;
#endif
}

int kb_r16_regroups(uint32_t type) {
#if defined(HAVE_R16_AVX2)
    return type == GGML_Q4_1;
#elif defined(HAVE_R16)
    return kb_r16_type(type);
#else
    (void)type;
    return 0;
#endif
}

int kb_matvec_default_mode(void) { return kb_r16_available() ? KB_MATVEC_X24 : KB_MATVEC_EXACT; }

/* KVBENCH_MATVEC: the mode it names, kb_matvec_default_mode() when unset or
 * empty, or -1 for any other value (x24 too where the build lacks it). The
 * one list of its values (quant.h, README.md). */
static int matvec_env(const char *e) {
    if (!e || !*e) return kb_matvec_default_mode();
    if (!strcmp(e, "q8")) return KB_MATVEC_Q8;
    if (!strcmp(e, "exact")) return KB_MATVEC_EXACT;
    if (!strcmp(e, "x24") && kb_r16_available()) return KB_MATVEC_X24;
    return -1;
}

static const char *matvec_expected(void) {
    return kb_r16_available() ? "'x24', 'exact' or 'q8'"
                              : "'exact' or 'q8' ('x24' is not in this build: it has neither AVX-512 "
                                "VNNI + GFNI nor AVX2 + FMA + F16C)";
}

/* Not where a test compiles this file again under other names
 * (tests/unit/test_quant_scalar.c, test_quant_avx2.c rename kb_matvec_mode
 * and the rest): the check is the library's, for the binary's startup. */
#ifndef kb_matvec_mode
int kb_matvec_check_env(kb_err *err) {
    const char *e = getenv("KVBENCH_MATVEC");
    return matvec_env(e) >= 0 ? 0 : kb_env_fail(err, "KVBENCH_MATVEC", e, matvec_expected());
}
#endif

int kb_matvec_mode(void) {
    int m = atomic_load(&matvec_mode);
    if (m >= 0) return m;
    const char *e = getenv("KVBENCH_MATVEC");
    int want = matvec_env(e);
    if (want < 0) { /* library users; the kvbench binary refused it at startup (kb_matvec_check_env) */
        want = kb_matvec_default_mode();
        fprintf(stderr, "kvbench: environment variable KVBENCH_MATVEC='%s' not understood "
                        "(expected %s); using %s\n", e, matvec_expected(), kb_matvec_mode_name(want));
    }
    int expect = -1; /* a concurrent first call or kb_matvec_set_mode wins */
    atomic_compare_exchange_strong(&matvec_mode, &expect, want);
    return atomic_load(&matvec_mode);
}

int kb_matvec_set_mode(int mode) {
    if (mode != KB_MATVEC_EXACT && mode != KB_MATVEC_Q8 && !(mode == KB_MATVEC_X24 && kb_r16_available()))
        return KB_EINPUT;
    atomic_store(&matvec_mode, mode);
    return 0;
}

const char *kb_matvec_mode_name(int mode) {
    return mode == KB_MATVEC_EXACT ? "exact" : mode == KB_MATVEC_Q8 ? "q8" : mode == KB_MATVEC_X24 ? "x24" : "?";
}

void kb_matvec(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
               const float *x, float *y) {
    if (kb_matvec_mode() == KB_MATVEC_Q8)
        kb_matvec_q8(type, W, row_bytes, rows, cols, x, y);
    else
        kb_matvec_exact(type, W, row_bytes, rows, cols, x, y);
}
