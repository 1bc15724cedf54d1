/* test_quant.c - GGUF block types: the type table, reference dequantisation
 * against an independent element-by-element decoder written here from the
 * spec formulas (engine.md §5), fast dequantisation == reference bit for bit,
 * the exact y = W x (default) against kb_matvec_ref within an f32-rounding
 * bound, the llama.cpp-like q8 y = W x within a bound derived from its
 * activation quantisation (both stated below), a check that the exact bound
 * is tight enough to catch the q8 path's error, and the mode switch
 * (kb_matvec_set_mode, KVBENCH_MATVEC); Q4_1 regrouped by 16 rows
 * (KB_LAYOUT_R16): repack + dequantisation against the reference on the
 * GGUF rows bit for bit, its mat-vec within its own bound (x rounded to 24
 * bits per block), in any mode, any thread count, mixed with GGUF-layout
 * matrices, and through kb_matmul.
 *
 * tests/unit/test_quant_scalar.c and test_quant_avx2.c include this file
 * after compiling the plain-C / AVX2 code paths of kernels/cpu/quant_cpu.c
 * under other names, so the same checks run on every code path (the FAST_*
 * names below). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"

#ifndef FAST_DEQUANT
#define FAST_DEQUANT kb_dequant
#define FAST_MATVEC kb_matvec
#define FAST_MATVEC_EXACT kb_matvec_exact
#define FAST_MATVEC_Q8 kb_matvec_q8
#define FAST_SET_MODE kb_matvec_set_mode
#define FAST_MODE kb_matvec_mode
#define FAST_MODE_NAME kb_matvec_mode_name
#define FAST_MATVEC_MULTI kb_matvec_multi
#define FAST_R16 kb_r16_available
#define FAST_R16_DEQUANT kb_r16_dequant
#define TEST_NAME "quant"
#define TEST_NATIVE 1 /* the library's own kernels (kb_matmul checks) */
#endif

#include <omp.h>
#include <sys/wait.h>
#include <unistd.h>

/* ------------------------------------------------------------ randomness */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rng_next(void) { /* xorshift64* */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double rng_unit(void) { return (double)(rng_next() >> 11) / 9007199254740992.0; }

/* A random finite half: sign, exponent 0..max_exp (0 = subnormal/zero), mantissa. */
static uint16_t rand_half(int max_exp) {
    unsigned e = (unsigned)(rng_next() % (unsigned)(max_exp + 1));
    return (uint16_t)((rng_next() & 1) << 15 | e << 10 | (rng_next() & 1023));
}

/* ---------------------------------------------- independent element decoder */

static double half_value(uint16_t h) { /* (-1)^s 2^(e-15) (1 + m/1024), subnormals 2^-24 m */
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v = e ? ldexp(1.0 + m / 1024.0, e - 15) : ldexp((double)m, -24);
    return s ? -v : v;
}
static double half_at(const uint8_t *p) { return half_value((uint16_t)(p[0] + 256 * p[1])); }

/* Element e of one block, exact (in double), straight from the layout tables. */
static double element_value(uint32_t type, const uint8_t *blk, int e) {
    switch (type) {
    case GGML_F32: {
        float f;
        memcpy(&f, blk, 4);
        return f;
    }
    case GGML_F16: return half_at(blk);
    case GGML_BF16: {
        uint32_t u = (uint32_t)(blk[0] + 256 * blk[1]) * 65536u;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    case GGML_Q8_0: return half_at(blk) * (int8_t)blk[2 + e];
    case GGML_Q4_0:
    case GGML_Q4_1: {
        int qoff = type == GGML_Q4_0 ? 2 : 4;
        uint8_t byte = blk[qoff + e % 16];
        int nib = e < 16 ? byte % 16 : byte / 16;
        return type == GGML_Q4_0 ? half_at(blk) * (nib - 8) : half_at(blk) * nib + half_at(blk + 2);
    }
    case GGML_Q5_0:
    case GGML_Q5_1: {
        int hoff = type == GGML_Q5_0 ? 2 : 4;
        uint8_t byte = blk[hoff + 4 + e % 16];
        int nib = e < 16 ? byte % 16 : byte / 16;
        int fifth = (blk[hoff + e / 8] >> (e % 8)) & 1; /* bit e of the 32-bit qh */
        int q = nib + 16 * fifth;
        return type == GGML_Q5_0 ? half_at(blk) * (q - 16) : half_at(blk) * q + half_at(blk + 2);
    }
    case GGML_Q4_K: {
        /* 12 scale bytes: 0-3 = scales 0-3 (low 6 bits) + top 2 bits of scales 4-7;
         * 4-7 = mins 0-3 (low 6 bits) + top 2 bits of mins 4-7; 8-11 = low nibble:
         * low 4 bits of scale 4-7, high nibble: low 4 bits of min 4-7. */
        const uint8_t *s = blk + 4, *qs = blk + 16;
        int k = e / 32, sc, mn;
        if (k < 4) {
            sc = s[k] % 64;
            mn = s[4 + k] % 64;
        } else {
            sc = s[8 + k - 4] % 16 + 16 * (s[k - 4] / 64);
            mn = s[8 + k - 4] / 16 + 16 * (s[4 + k - 4] / 64);
        }
        uint8_t byte = qs[32 * (e / 64) + e % 32];
        int q = k % 2 == 0 ? byte % 16 : byte / 16;
        return half_at(blk) * sc * q - half_at(blk + 2) * mn;
    }
    case GGML_Q6_K: {
        const uint8_t *ql = blk, *qh = blk + 128;
        const int8_t *sc = (const int8_t *)(blk + 192);
        int h = e / 128, g = (e % 128) / 32, l = e % 32;
        uint8_t lo = ql[64 * h + l + 32 * (g % 2)];
        int nib = g < 2 ? lo % 16 : lo / 16;
        int hi2 = (qh[32 * h + l] >> (2 * g)) & 3;
        return half_at(blk + 208) * sc[8 * h + 2 * g + l / 16] * (nib + 16 * hi2 - 32);
    }
    }
    return NAN;
}

/* Largest rounding the reference may add for element e: its float formula
 * rounds at most 3 times; bound 4 ulp-units of the sum of |terms|. */
static double element_slack(uint32_t type, const uint8_t *blk, int e) {
    double mag = fabs(element_value(type, blk, e));
    if (type == GGML_Q4_1 || type == GGML_Q5_1) mag += 2 * fabs(half_at(blk + 2));
    if (type == GGML_Q4_K) mag += 2 * 63 * fabs(half_at(blk + 2)) + 15 * 63 * fabs(half_at(blk));
    return 4 * ldexp(mag, -24);
}

/* ----------------------------------------------------------- random data */

static const uint32_t supported[] = {GGML_F32, GGML_F16, GGML_BF16, GGML_Q4_0, GGML_Q4_1,
                                     GGML_Q5_0, GGML_Q5_1, GGML_Q8_0, GGML_Q4_K, GGML_Q6_K};

/* Random bytes, with the f16 scale fields set to finite halves of moderate
 * size (max_exp 16: |d| < 4) and F16/BF16/F32 elements finite. */
static void fill_blocks(uint32_t type, uint8_t *p, int64_t nblocks) {
    const kb_qtype *t = kb_qtype_info(type);
    for (int64_t i = 0; i < nblocks * t->bytes; i++) p[i] = (uint8_t)rng_next();
    for (int64_t b = 0; b < nblocks; b++) {
        uint8_t *blk = p + b * t->bytes;
        uint16_t h;
        switch (type) {
        case GGML_F32: {
            float f = (float)(rng_unit() * 4 - 2);
            memcpy(blk, &f, 4);
            break;
        }
        case GGML_F16: h = rand_half(16); memcpy(blk, &h, 2); break;
        case GGML_BF16: blk[1] = (uint8_t)((blk[1] & 0x80) | (0x38 + rng_next() % 12)); break;
        case GGML_Q6_K: h = rand_half(14); memcpy(blk + 208, &h, 2); break;
        case GGML_Q4_K:
            h = rand_half(12); memcpy(blk, &h, 2);     /* d: times 6-bit scales */
            h = rand_half(12); memcpy(blk + 2, &h, 2); /* dmin */
            break;
        default:
            h = rand_half(16); memcpy(blk, &h, 2);
            if (type == GGML_Q4_1 || type == GGML_Q5_1) {
                h = rand_half(16);
                memcpy(blk + 2, &h, 2);
            }
        }
    }
}

/* ----------------------------------------------------------------- checks */

static void test_table(void) {
    /* sizes from the spec (engine.md §1, §5); Q8_1 from ggml-common.h's block_q8_1
     * (2 x f16 + 32 x int8 = 36 bytes) */
    static const struct { uint32_t id; const char *name; int blck, bytes, sup; } want[] = {
        {0, "F32", 1, 4, 1},       {1, "F16", 1, 2, 1},       {2, "Q4_0", 32, 18, 1},
        {3, "Q4_1", 32, 20, 1},    {6, "Q5_0", 32, 22, 1},    {7, "Q5_1", 32, 24, 1},
        {8, "Q8_0", 32, 34, 1},    {9, "Q8_1", 32, 36, 0},    {10, "Q2_K", 256, 84, 0},
        {11, "Q3_K", 256, 110, 0}, {12, "Q4_K", 256, 144, 1}, {13, "Q5_K", 256, 176, 0},
        {14, "Q6_K", 256, 210, 1}, {15, "Q8_K", 256, 292, 0}, {30, "BF16", 1, 2, 1},
    };
    for (size_t i = 0; i < KB_ARRAY_LEN(want); i++) {
        const kb_qtype *t = kb_qtype_info(want[i].id);
        CHECK_MSG(t != NULL, "type %u", want[i].id);
        if (!t) continue;
        CHECK_STREQ(t->name, want[i].name);
        CHECK_EQ_INT(t->blck, want[i].blck);
        CHECK_EQ_INT(t->bytes, want[i].bytes);
        CHECK_EQ_INT(t->supported, want[i].sup);
    }
    static const uint32_t unknown[] = {4, 5, 31, 32, 33, 36, 99, 1000, UINT32_MAX};
    for (size_t i = 0; i < KB_ARRAY_LEN(unknown); i++)
        CHECK_MSG(kb_qtype_info(unknown[i]) == NULL, "type %u should be unknown", unknown[i]);
    CHECK_EQ_INT(kb_row_bytes(GGML_Q4_1, 576), 18 * 20);
    CHECK_EQ_INT(kb_row_bytes(GGML_Q8_0, 576), 612);
    CHECK_EQ_INT(kb_row_bytes(GGML_Q6_K, 4096), 16 * 210);
    CHECK_EQ_INT(kb_row_bytes(GGML_F16, 7), 14);
    CHECK_EQ_INT(kb_row_bytes(GGML_Q4_K, 576), 0);  /* not a multiple of 256 */
    CHECK_EQ_INT(kb_row_bytes(GGML_Q4_0, 33), 0);
    CHECK_EQ_INT(kb_row_bytes(99, 32), 0);
}

static void test_dequant(uint32_t type) {
    const kb_qtype *t = kb_qtype_info(type);
    enum { NB = 67 };
    int64_t n = (int64_t)NB * t->blck;
    /* +1: decode from an odd address, as rows of 22-byte Q5_0 blocks sit */
    uint8_t *raw = malloc((size_t)NB * t->bytes + 1), *p = raw + 1;
    float *ref = malloc((size_t)n * 4), *fast = malloc((size_t)n * 4 + 4);
    int bad_ind = 0, bad_bits = 0;
    for (int rep = 0; rep < 20; rep++) {
        fill_blocks(type, p, NB);
        kb_dequant_ref(type, p, ref, n);
        FAST_DEQUANT(type, p, fast + 1, n); /* misaligned destination too */
        for (int64_t i = 0; i < n; i++) {
            const uint8_t *blk = p + (i / t->blck) * t->bytes;
            int e = (int)(i % t->blck);
            double want = element_value(type, blk, e);
            if (!(fabs(ref[i] - want) <= element_slack(type, blk, e))) {
                if (bad_ind++ < 3)
                    fprintf(stderr, "  %s element %lld: ref %.9g, independent %.9g\n", t->name,
                            (long long)i, ref[i], want);
            }
        }
        if (memcmp(ref, fast + 1, (size_t)n * 4)) bad_bits++;
    }
    CHECK_MSG(bad_ind == 0, "%s: %d elements differ from the independent decoder", t->name, bad_ind);
    CHECK_MSG(bad_bits == 0, "%s: fast dequant differs from the reference in %d of 20 runs", t->name,
              bad_bits);
    /* single-rounding types are exactly the rounded exact value */
    if (type == GGML_Q8_0 || type == GGML_Q4_0 || type == GGML_Q5_0) {
        int inexact = 0;
        for (int64_t i = 0; i < n; i++)
            inexact += ref[i] != (float)element_value(type, p + (i / t->blck) * t->bytes, (int)(i % t->blck));
        CHECK_MSG(inexact == 0, "%s: %d elements not the correctly rounded value", t->name, inexact);
    }
    free(raw);
    free(ref);
    free(fast);
}

/* Block length over which kb_matvec_q8 quantises x to 8 bits (0: x stays f32). */
static int act_block(uint32_t type) {
    switch (type) {
    case GGML_Q4_0: case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1: case GGML_Q8_0: return 32;
    case GGML_Q4_K: case GGML_Q6_K: return 256;
    default: return 0;
    }
}

/* Sum of the magnitudes of the terms of element e's formula (quant.h's t):
 * |d q| + |m| for Q4_1/Q5_1, |d sc q| + |dmin mn| for Q4_K (d sc, dmin mn
 * rounded to f32 as both implementations do), |w| otherwise. Recomputed here
 * from the layout like element_value. */
static double element_terms(uint32_t type, const uint8_t *blk, int e) {
    double w = element_value(type, blk, e);
    switch (type) {
    case GGML_Q4_1:
    case GGML_Q5_1: {
        double m = half_at(blk + 2);
        return fabs(w - m) + fabs(m);
    }
    case GGML_Q4_K: {
        const uint8_t *s = blk + 4;
        int k = e / 32, mn = k < 4 ? s[4 + k] % 64 : s[8 + k - 4] / 16 + 16 * (s[4 + k - 4] / 64);
        double m = (float)((float)half_at(blk + 2) * (float)mn);
        return fabs(w + m) + fabs(m);
    }
    default: return fabs(w);
    }
}

enum { MV_EXACT, MV_Q8 };

typedef void (*matvec_fn)(uint32_t, const void *, size_t, int, int, const float *, float *);

/* Random x in [-1, 1] with a few outliers (as activations have) and, when
 * cols >= 64, an all-zero block (the scale-0 path of the q8 quantiser). */
static void fill_x(float *x, int cols) {
    for (int c = 0; c < cols; c++) {
        double u = rng_unit() * 2 - 1;
        x[c] = (float)(c % 97 == 5 ? 8 * u : u);
    }
    if (cols >= 64)
        for (int c = 32; c < 64; c++) x[c] = 0.0f;
}

/* Rows of y outside the bound of `mode` against kb_matvec_ref (W, x given):
 *
 * exact: |y - yref| <= 2 * (cols/32 + 16) * 2^-24 * sum_j |x_j| t_j
 *   (t_j from element_terms). Derivation (quant.h): every kernel sums each
 *   f32 lane over at most cols/16 products (the plain-C and AVX2 dots keep
 *   16 partial sums; the AVX-512 kernels fold one block of 32 per lane step),
 *   then a 16-lane reduction and the per-block m_b * xsum_b terms (xsum over
 *   32 elements in 5 levels); the reference's own weights carry <= 2
 *   roundings of t_j each and its final rounding to f32 adds u|y|. Each
 *   rounding is at most u = 2^-24 of the magnitudes involved, so
 *   (cols/32 + 16) u sum |x| t with a factor 2 margin covers all of it. For
 *   real weights t is a few |w|: about 1e-5 of sum |w x| at cols = 576, far
 *   below the ~1e-3 of 8-bit activations (test_exact_bound_catches_q8).
 * q8: |y - yref| <= 1.0001 * sum_b (max|x_b|/127/2) sum_{j in b} |w_j|
 *       + (cols/8 + 32) * 2^-24 * 2 * sum_j |w_j x_j|
 *   (8-bit activation types: blocks b of 32, or 256 for the K-quants; the
 *   first term is the worst case of rounding x to 8 bits per block, the
 *   second f32 accumulation in 8 lanes plus block scales' rounding, 2x margin).
 * *worst gets the largest err / tol. */
static int rows_outside(int mode, uint32_t type, const uint8_t *W, size_t rb, int rows, int cols,
                        const float *x, const float *y, const float *yr, double *worst) {
    const kb_qtype *t = kb_qtype_info(type);
    float *wrow = malloc((size_t)cols * 4);
    int bad = 0;
    *worst = 0;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = W + (size_t)r * rb;
        kb_dequant_ref(type, row, wrow, cols);
        double tol;
        if (mode == MV_EXACT) {
            double st = 0;
            for (int c = 0; c < cols; c++)
                st += fabs((double)x[c]) * element_terms(type, row + (size_t)(c / t->blck) * t->bytes, c % t->blck);
            tol = 2 * (cols / 32.0 + 16) * ldexp(st, -24);
        } else {
            double act = 0, sum_abs = 0;
            int ab = act_block(type) ? act_block(type) : 32;
            for (int b = 0; b < cols / ab; b++) {
                double amax = 0, wabs = 0;
                for (int j = ab * b; j < ab * b + ab; j++) {
                    amax = fmax(amax, fabs(x[j]));
                    wabs += fabs(wrow[j]);
                }
                act += amax / 127 / 2 * wabs;
            }
            for (int c = 0; c < cols; c++) sum_abs += fabs((double)wrow[c] * x[c]);
            tol = (act_block(type) ? 1.0001 * act : 0) + (cols / 8.0 + 32) * ldexp(2 * sum_abs, -24);
        }
        tol += 1e-30;
        double err = fabs((double)y[r] - yr[r]);
        if (err / tol > *worst) *worst = err / tol;
        if (!(err <= tol)) bad++;
    }
    free(wrow);
    return bad;
}

static void test_matvec(int mode, uint32_t type, int rows, int cols) {
    const kb_qtype *t = kb_qtype_info(type);
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *W = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4 + 64),
          *yr = malloc((size_t)rows * 4);
    fill_blocks(type, W, (int64_t)(rb / (size_t)t->bytes) * rows);
    fill_x(x, cols);
    for (int r = 0; r < rows + 16; r++) y[r] = -12345.0f; /* canary past the end */
    (mode == MV_EXACT ? FAST_MATVEC_EXACT : FAST_MATVEC_Q8)(type, W, rb, rows, cols, x, y);
    kb_matvec_ref(type, W, rb, rows, cols, x, yr);
    double worst;
    int bad = rows_outside(mode, type, W, rb, rows, cols, x, y, yr, &worst);
    if (bad)
        for (int r = 0, shown = 0; r < rows && shown < 3; r++)
            if (y[r] != yr[r] && shown++ < 3)
                fprintf(stderr, "  %s %dx%d row %d: fast %.9g ref %.9g\n", t->name, rows, cols, r, y[r], yr[r]);
    int canary = 0;
    for (int r = rows; r < rows + 16; r++) canary += y[r] != -12345.0f;
    const char *mn = mode == MV_EXACT ? "exact" : "q8";
    if (getenv("QUANT_VERBOSE")) /* how close to the bound (1 = at it) */
        fprintf(stderr, "  %s %s %dx%d: worst err/tol %.3g\n", mn, t->name, rows, cols, worst);
    CHECK_MSG(bad == 0, "%s %s %dx%d: %d rows outside the bound (worst err/tol %.3g)", mn, t->name, rows,
              cols, bad, worst);
    CHECK_MSG(canary == 0, "%s %s %dx%d: wrote past y[rows]", mn, t->name, rows, cols);
    free(W);
    free(x);
    free(y);
    free(yr);
}

/* Relative error max_r |y_r - yref_r| / sum_j |w_rj x_j| on 64 random rows. */
static double typical_error(matvec_fn f, uint32_t type, int cols) {
    int rows = 64;
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *W = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4), *yr = malloc((size_t)rows * 4),
          *wrow = malloc((size_t)cols * 4);
    fill_blocks(type, W, (int64_t)(rb / (size_t)kb_qtype_info(type)->bytes) * rows);
    for (int c = 0; c < cols; c++) x[c] = (float)(rng_unit() * 2 - 1);
    f(type, W, rb, rows, cols, x, y);
    kb_matvec_ref(type, W, rb, rows, cols, x, yr);
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        kb_dequant_ref(type, W + (size_t)r * rb, wrow, cols);
        double s = 0;
        for (int c = 0; c < cols; c++) s += fabs((double)wrow[c] * x[c]);
        worst = fmax(worst, fabs((double)y[r] - yr[r]) / s);
    }
    free(W);
    free(x);
    free(y);
    free(yr);
    free(wrow);
    return worst;
}

/* Typical sizes of the errors, relative to the row's scale sum_j |w_j x_j|.
 * q8: about 1e-3 (measured 0.9e-3..1.4e-3 on uniform x, as llama.cpp's
 * Q8_0/Q8_1 activations give); fail above 5e-3, which would mean x is
 * quantised more coarsely than 8 bits per block of 32. exact: f32 rounding,
 * measured ~1e-7 here; fail above 1e-5 (the target the exact path was built
 * for: at most 1/100 of the q8 error). */
static void test_matvec_typical_error(uint32_t type) {
    int cols = kb_qtype_info(type)->blck == 256 ? 512 : 576;
    double e = typical_error(FAST_MATVEC_EXACT, type, cols);
    if (getenv("QUANT_VERBOSE")) fprintf(stderr, "  exact %s: relative error %.3g\n", kb_qtype_info(type)->name, e);
    CHECK_MSG(e < 1e-5, "exact %s: relative error %.3g", kb_qtype_info(type)->name, e);
    if (act_block(type)) {
        double q = typical_error(FAST_MATVEC_Q8, type, cols);
        CHECK_MSG(q < 5e-3, "q8 %s: relative error %.3g", kb_qtype_info(type)->name, q);
    }
}

/* The exact bound must be able to fail: the q8 path's results, judged by it,
 * fall outside on most rows (8-bit activations err ~1e-3 of sum |w x|; the
 * exact tolerance is ~1e-5 of it). */
static void test_exact_bound_catches_q8(uint32_t type) {
    int rows = 64, cols = kb_qtype_info(type)->blck == 256 ? 512 : 576;
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *W = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4), *yr = malloc((size_t)rows * 4);
    fill_blocks(type, W, (int64_t)(rb / (size_t)kb_qtype_info(type)->bytes) * rows);
    fill_x(x, cols);
    FAST_MATVEC_Q8(type, W, rb, rows, cols, x, y);
    kb_matvec_ref(type, W, rb, rows, cols, x, yr);
    double worst;
    int bad = rows_outside(MV_EXACT, type, W, rb, rows, cols, x, y, yr, &worst);
    CHECK_MSG(bad > rows / 2, "%s: the exact bound passed %d of %d q8 rows (worst err/tol %.3g)",
              kb_qtype_info(type)->name, rows - bad, rows, worst);
    free(W);
    free(x);
    free(y);
    free(yr);
}

/* kb_matvec follows the mode: bit-identical to the path it names. */
static void test_mode_dispatch(void) {
    CHECK_EQ_INT(FAST_SET_MODE(7), KB_EINPUT);
    CHECK_EQ_INT(FAST_SET_MODE(-1), KB_EINPUT);
    CHECK_STREQ(FAST_MODE_NAME(KB_MATVEC_EXACT), "exact");
    CHECK_STREQ(FAST_MODE_NAME(KB_MATVEC_Q8), "q8");
    CHECK_STREQ(FAST_MODE_NAME(KB_MATVEC_X24), "x24");
    CHECK_STREQ(FAST_MODE_NAME(5), "?");
    CHECK_EQ_INT(FAST_SET_MODE(KB_MATVEC_X24), FAST_R16() ? 0 : KB_EINPUT);
    int rows = 40, cols = 576;
    size_t rb = kb_row_bytes(GGML_Q4_1, cols);
    uint8_t *W = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4), *ye = malloc((size_t)rows * 4),
          *yq = malloc((size_t)rows * 4);
    fill_blocks(GGML_Q4_1, W, (int64_t)(rb / 20) * rows);
    fill_x(x, cols);
    FAST_MATVEC_EXACT(GGML_Q4_1, W, rb, rows, cols, x, ye);
    FAST_MATVEC_Q8(GGML_Q4_1, W, rb, rows, cols, x, yq);
    CHECK(memcmp(ye, yq, (size_t)rows * 4) != 0); /* the two paths do differ */
    CHECK_EQ_INT(FAST_SET_MODE(KB_MATVEC_Q8), 0);
    CHECK_EQ_INT(FAST_MODE(), KB_MATVEC_Q8);
    FAST_MATVEC(GGML_Q4_1, W, rb, rows, cols, x, y);
    CHECK(memcmp(y, yq, (size_t)rows * 4) == 0);
    CHECK_EQ_INT(FAST_SET_MODE(KB_MATVEC_EXACT), 0);
    CHECK_EQ_INT(FAST_MODE(), KB_MATVEC_EXACT);
    FAST_MATVEC(GGML_Q4_1, W, rb, rows, cols, x, y);
    CHECK(memcmp(y, ye, (size_t)rows * 4) == 0);
    free(W);
    free(x);
    free(y);
    free(ye);
    free(yq);
}

/* kb_matvec_multi: each y_i bit for bit what FAST_MATVEC computes for W_i
 * alone, in both modes (and, exact, within the bound against the
 * reference); mixed types and shapes in one call (pool chunks of several
 * matrices, rows not multiples of 16, a matrix smaller than one chunk), one
 * call under the parallel threshold, 1..3 pool threads; nothing written
 * past any y_i. */
static void test_matvec_multi(void) {
    enum { NM = 6, COLS = 512 };
    static const uint32_t types[NM] = {GGML_Q4_1, GGML_Q8_0, GGML_Q4_K, GGML_Q4_0, GGML_F16, GGML_Q6_K};
    static const int rows[NM] = {577, 192, 37, 1536, 5, 200};
    uint8_t *W[NM];
    float *y[NM], *ys[NM], *yr[NM], *x = malloc(COLS * 4);
    kb_mv mv[NM];
    fill_x(x, COLS);
    for (int i = 0; i < NM; i++) {
        size_t rb = kb_row_bytes(types[i], COLS);
        W[i] = malloc(rb * (size_t)rows[i]);
        fill_blocks(types[i], W[i], (int64_t)(rb / (size_t)kb_qtype_info(types[i])->bytes) * rows[i]);
        y[i] = malloc(((size_t)rows[i] + 16) * 4);
        ys[i] = malloc((size_t)rows[i] * 4);
        yr[i] = malloc((size_t)rows[i] * 4);
        kb_matvec_ref(types[i], W[i], rb, rows[i], COLS, x, yr[i]);
        mv[i] = (kb_mv){types[i], W[i], rb, rows[i], y[i], KB_LAYOUT_ROWS};
    }
    int saved = omp_get_max_threads();
    for (int mode = KB_MATVEC_EXACT; mode <= KB_MATVEC_Q8; mode++) {
        CHECK_EQ_INT(FAST_SET_MODE(mode), 0);
        for (int i = 0; i < NM; i++) FAST_MATVEC(types[i], W[i], mv[i].row_bytes, rows[i], COLS, x, ys[i]);
        for (int thr = 1; thr <= 3; thr++) {
            omp_set_num_threads(thr);
            /* all six; then the two smallest alone (under the parallel threshold) */
            for (int call = 0; call < 2; call++) {
                int first = call ? 4 : 0, n = call ? 2 : NM; /* call 1: F16 x5, Q6_K x200 */
                for (int i = 0; i < NM; i++)
                    for (int r = 0; r < rows[i] + 16; r++) y[i][r] = -12345.0f;
                FAST_MATVEC_MULTI(mv + first, n, COLS, x);
                for (int i = first; i < first + n; i++) {
                    int same = !memcmp(y[i], ys[i], (size_t)rows[i] * 4), canary = 0;
                    for (int r = rows[i]; r < rows[i] + 16; r++) canary += y[i][r] != -12345.0f;
                    CHECK_MSG(same, "multi %s, %d threads, matrix %d (%s x%d): differs from kb_matvec",
                              FAST_MODE_NAME(mode), thr, i, kb_qtype_info(types[i])->name, rows[i]);
                    CHECK_MSG(canary == 0, "multi: wrote past y of matrix %d", i);
                    double worst;
                    if (mode == KB_MATVEC_EXACT)
                        CHECK_EQ_INT(rows_outside(MV_EXACT, types[i], W[i], mv[i].row_bytes, rows[i], COLS, x,
                                                  y[i], yr[i], &worst), 0);
                }
                for (int i = 0; i < NM; i++) /* the other matrices untouched */
                    if (i < first || i >= first + n) CHECK(y[i][0] == -12345.0f);
            }
        }
    }
    omp_set_num_threads(saved);
    CHECK_EQ_INT(FAST_SET_MODE(KB_MATVEC_EXACT), 0);
    for (int i = 0; i < NM; i++) {
        free(W[i]);
        free(y[i]);
        free(ys[i]);
        free(yr[i]);
    }
    free(x);
}

/* The first mode query reads KVBENCH_MATVEC (once): checked in child
 * processes, each with a fresh mode. Returns the child's mode, or -1; the
 * child's stderr goes to errbuf. */
static int mode_in_child(const char *env, char *errbuf, size_t errlen) {
    int fd[2];
    if (pipe(fd)) return -1;
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return -1;
    if (pid == 0) {
        dup2(fd[1], 2);
        close(fd[0]);
        if (env)
            setenv("KVBENCH_MATVEC", env, 1);
        else
            unsetenv("KVBENCH_MATVEC");
        int m = FAST_MODE();
        int again = FAST_MODE(); /* read once: stable, no second warning */
        _exit(m == again ? m : 9);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t k;
    while (n + 1 < errlen && (k = read(fd[0], errbuf + n, errlen - 1 - n)) > 0) n += (size_t)k;
    errbuf[n] = 0;
    close(fd[0]);
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

static void test_mode_env(void) {
    char err[512];
    /* the default: x24 where the build has the R16 kernel, else exact */
    int def = FAST_R16() ? KB_MATVEC_X24 : KB_MATVEC_EXACT;
    CHECK_EQ_INT(mode_in_child(NULL, err, sizeof err), def);
    CHECK_STREQ(err, "");
    CHECK_EQ_INT(mode_in_child("", err, sizeof err), def);
    CHECK_EQ_INT(mode_in_child("x24", err, sizeof err), def);
    if (FAST_R16()) CHECK_STREQ(err, "");
    else CHECK_MSG(strstr(err, "'x24'") && strstr(err, "not in this build"), "x24 without the kernel: '%s'", err);
    CHECK_EQ_INT(mode_in_child("exact", err, sizeof err), KB_MATVEC_EXACT);
    CHECK_STREQ(err, "");
    CHECK_EQ_INT(mode_in_child("q8", err, sizeof err), KB_MATVEC_Q8);
    CHECK_STREQ(err, "");
    CHECK_EQ_INT(mode_in_child("Q8-fast", err, sizeof err), def);
    CHECK_MSG(strstr(err, "KVBENCH_MATVEC") && strstr(err, "'Q8-fast'") && strstr(err, "expected"),
              "warning names the variable, the value and what was expected: '%s'", err);
    CHECK_MSG(strchr(err, '\n') == strrchr(err, '\n'), "warned more than once: '%s'", err);
}

/* ---------------------------------------- Q4_1 and Q8_0 regrouped (R16) */

static int r16_bb(uint32_t type) { return type == GGML_Q4_1 ? 20 : 34; }

/* Rows of an R16 mat-vec outside its bound (quant.h) against the reference
 * on the GGUF rows G: 2 x the exact path's f32 term (the same derivation:
 * per lane at most cols/32 block steps, reduction, m terms; Q8_0's extra
 * rounding of a partial sum is one more u of terms the sum already counts)
 * + the rounding of x to 24 bits per block: for each block,
 * max(2^-22 M_b, 2^-127) times sum |d q| (1.0001 for the double sums). */
static int r16_rows_outside(uint32_t type, const uint8_t *G, size_t rb, int rows, int cols, const float *x,
                            const float *y, const float *yr, double *worst) {
    int bad = 0, bb = r16_bb(type);
    *worst = 0;
    for (int r = 0; r < rows; r++) {
        const uint8_t *row = G + (size_t)r * rb;
        double st = 0, xr = 0;
        for (int b = 0; b < cols / 32; b++) {
            double M = 0, dq = 0;
            const uint8_t *blk = row + (size_t)bb * b;
            double d = half_value((uint16_t)(blk[0] | blk[1] << 8));
            for (int j = 0; j < 32; j++) {
                int q = type == GGML_Q8_0 ? (int8_t)blk[2 + j] : j < 16 ? blk[4 + j] & 15 : blk[4 + j - 16] >> 4;
                M = fmax(M, fabs(x[32 * b + j]));
                dq += fabs(d * q);
                st += fabs((double)x[32 * b + j]) * element_terms(type, blk, j);
            }
            xr += fmax(ldexp(M, -22), ldexp(1.0, -127)) * dq;
        }
        double tol = 2 * (cols / 32.0 + 16) * ldexp(st, -24) + 1.0001 * xr + 1e-30;
        double err = fabs((double)y[r] - yr[r]);
        if (err / tol > *worst) *worst = err / tol;
        if (!(err <= tol)) bad++;
    }
    return bad;
}

/* x with the block shapes the 24-bit rounding meets: fill_x (outliers, a
 * zero block), plus a block of tiny values (the scale clamp: 2^-127 steps),
 * one of huge ones, one with a single large element among small ones. */
static void fill_x_r16(float *x, int cols) {
    fill_x(x, cols);
    if (cols >= 128)
        for (int j = 64; j < 96; j++) x[j] = (float)((rng_unit() * 2 - 1) * 1e-38);
    if (cols >= 160)
        for (int j = 96; j < 128; j++) x[j] = (float)((rng_unit() * 2 - 1) * 1e30);
    if (cols >= 192)
        for (int j = 128; j < 160; j++) x[j] = (float)((rng_unit() * 2 - 1) * (j == 140 ? 1e3 : 1e-3));
}

static void test_r16(uint32_t type, int rows, int cols) {
    const char *tn = kb_qtype_info(type)->name;
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *G = malloc(rb * (size_t)rows), *R = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc(((size_t)rows + 16) * 4), *y2 = malloc((size_t)rows * 4),
          *yr = malloc((size_t)rows * 4), *dr = malloc((size_t)rows * cols * 4),
          *dq = malloc((size_t)rows * cols * 4);
    fill_blocks(type, G, (int64_t)(rb / (size_t)r16_bb(type)) * rows);
    memcpy(R, G, rb * (size_t)rows);
    kb_r16_repack(type, R, rb, rows);
    CHECK_MSG(memcmp(R, G, rb * (size_t)rows) != 0, "repack %s %dx%d changed nothing", tn, rows, cols);
    /* dequantisation: every row, a panel starting at row 16, single rows */
    kb_dequant_ref(type, G, dr, (int64_t)rows * cols);
    for (int f = 0; f < 2; f++) {
        void (*deq)(uint32_t, const void *, size_t, int, int, float *) = f ? FAST_R16_DEQUANT : kb_r16_dequant_ref;
        memset(dq, 0xff, (size_t)rows * cols * 4);
        deq(type, R, rb, 0, rows, dq);
        CHECK_MSG(!memcmp(dr, dq, (size_t)rows * cols * 4), "R16 %s %dx%d: %s dequantised rows differ from the reference",
                  tn, rows, cols, f ? "fast" : "plain");
        if (rows >= 32) {
            deq(type, R, rb, 16, 16, dq);
            CHECK(!memcmp(dr + (size_t)16 * cols, dq, (size_t)16 * cols * 4));
        }
        /* rows from a group's start, fewer than 16: row 0 alone, rows 16..20 */
        memset(dq, 0xff, (size_t)5 * cols * 4);
        deq(type, R, rb, 0, 1, dq);
        CHECK_MSG(!memcmp(dr, dq, (size_t)cols * 4), "R16 %s: row 0 alone differs", tn);
        if (rows >= 32) {
            deq(type, R, rb, 16, 5, dq);
            CHECK_MSG(!memcmp(dr + (size_t)16 * cols, dq, (size_t)5 * cols * 4), "R16 %s: rows 16..20 differ", tn);
        }
        int r1 = rows - 1 - (rows > 20 ? 3 : 0); /* an embedding row lookup */
        deq(type, R, rb, r1, 1, dq);
        CHECK_MSG(!memcmp(dr + (size_t)r1 * cols, dq, (size_t)cols * 4), "R16 %s: row %d alone differs", tn, r1);
    }
    /* mat-vec in every mode and 1..3 threads: the same bytes, within the bound */
    fill_x_r16(x, cols);
    kb_matvec_ref(type, G, rb, rows, cols, x, yr);
    kb_mv mv = {type, R, rb, rows, y, KB_LAYOUT_R16};
    int saved = omp_get_max_threads(), first = 1;
    for (int mode = KB_MATVEC_EXACT; mode <= KB_MATVEC_Q8; mode++) {
        CHECK_EQ_INT(FAST_SET_MODE(mode), 0);
        for (int thr = 1; thr <= 3; thr++) {
            omp_set_num_threads(thr);
            for (int r = 0; r < rows + 16; r++) y[r] = -12345.0f;
            FAST_MATVEC_MULTI(&mv, 1, cols, x);
            int canary = 0;
            for (int r = rows; r < rows + 16; r++) canary += y[r] != -12345.0f;
            CHECK_MSG(canary == 0, "R16 %s %dx%d: wrote past y[rows]", tn, rows, cols);
            if (first) {
                double worst;
                int bad = r16_rows_outside(type, G, rb, rows, cols, x, y, yr, &worst);
                if (getenv("QUANT_VERBOSE")) fprintf(stderr, "  R16 %s %dx%d: worst err/tol %.3g\n", tn, rows, cols, worst);
                CHECK_MSG(bad == 0, "R16 %s %dx%d: %d rows outside the bound (worst err/tol %.3g)", tn, rows, cols, bad,
                          worst);
                memcpy(y2, y, (size_t)rows * 4);
                first = 0;
            } else {
                CHECK_MSG(!memcmp(y, y2, (size_t)rows * 4), "R16 %s %dx%d: %s, %d threads: other bytes", tn, rows, cols,
                          FAST_MODE_NAME(mode), thr);
            }
        }
    }
    omp_set_num_threads(saved);
    CHECK_EQ_INT(FAST_SET_MODE(KB_MATVEC_EXACT), 0);
    free(G);
    free(R);
    free(x);
    free(y);
    free(y2);
    free(yr);
    free(dr);
    free(dq);
}

/* The R16 bound is tight enough to fail: the q8 path's 8-bit activations
 * (~1e-3 of sum |w x|) fall outside it on most rows. */
static void test_r16_bound_fails(uint32_t type) {
    int rows = 64, cols = 576;
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *G = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4), *yr = malloc((size_t)rows * 4);
    fill_blocks(type, G, (int64_t)(rb / (size_t)r16_bb(type)) * rows);
    fill_x(x, cols);
    kb_matvec_ref(type, G, rb, rows, cols, x, yr);
    FAST_MATVEC_Q8(type, G, rb, rows, cols, x, y);
    double worst;
    int bad = r16_rows_outside(type, G, rb, rows, cols, x, y, yr, &worst);
    CHECK_MSG(bad > rows / 2, "the R16 %s bound passed %d of %d q8 rows (worst %.3g)", kb_qtype_info(type)->name,
              rows - bad, rows, worst);
    free(G);
    free(x);
    free(y);
    free(yr);
}

/* A block of x holding NaN or Inf: NaN in every row (not a silent finite). */
static void test_r16_nonfinite(uint32_t type) {
    int rows = 32, cols = 96;
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *R = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4);
    fill_blocks(type, R, (int64_t)(rb / (size_t)r16_bb(type)) * rows);
    kb_r16_repack(type, R, rb, rows);
    kb_mv mv = {type, R, rb, rows, y, KB_LAYOUT_R16};
    for (int k = 0; k < 2; k++) {
        fill_x(x, cols);
        x[70] = k ? INFINITY : NAN;
        FAST_MATVEC_MULTI(&mv, 1, cols, x);
        int fin = 0;
        for (int r = 0; r < rows; r++) fin += !isnan(y[r]) && !isinf(y[r]);
        CHECK_MSG(fin == 0, "R16 %s with %s in x: %d finite rows", kb_qtype_info(type)->name, k ? "Inf" : "NaN", fin);
    }
    free(R);
    free(x);
    free(y);
}

/* The R16 kernels' exact arithmetic written out in plain C from quant.h's
 * definition, on GGUF's rows (not the regrouped bytes): per block b,
 * e_b = 22 - E (max |x_j| = f 2^E, f in [0.5, 1); e_b = 0 for a zero block;
 * clamped to [-126, 126]), X_j = round-to-nearest-even(x_j 2^e_b) (an f32
 * product), X = L0 + 256 L1 + 65536 L2 in balanced bytes, the integer sums
 * P01 = sum_j q_j (L0_j + 256 L1_j) and P2 = sum_j q_j L2_j (q the signed
 * Q8_0 byte or the Q4_1 nibble), then in f32 S = fma(P2, 65536, P01),
 * acc = fma(S, d 2^-e_b, acc) block by block, and Q4_1's
 * macc = fma(m, xsum_b, macc), y = acc + macc, xsum_b summed in the one
 * order quant_cpu.c uses on every build (that of GCC's _mm512_reduce_add_ps
 * of x[0..16) + x[16..32)). Every kernel forms these integers exactly
 * (however it splits them) and then the same f32 operations, so y must
 * match bit for bit. x must be finite. */
static void r16_formula(uint32_t type, const uint8_t *G, size_t rb, int rows, int cols, const float *x, float *y) {
    int nb = cols / 32, bb = r16_bb(type);
    int32_t *L = malloc((size_t)cols * 2 * sizeof *L); /* [j]: L0 + 256 L1, L2 */
    float *dx = malloc((size_t)nb * sizeof *dx), *xs = malloc((size_t)nb * sizeof *xs);
    for (int b = 0; b < nb; b++) {
        const float *xb = x + 32 * b;
        float M = 0, t3[8], t6[4];
        for (int j = 0; j < 32; j++) M = fmaxf(M, fabsf(xb[j]));
        for (int i = 0; i < 8; i++) t3[i] = (xb[8 + i] + xb[24 + i]) + (xb[i] + xb[16 + i]);
        for (int i = 0; i < 4; i++) t6[i] = t3[4 + i] + t3[i];
        float s = (t6[0] + t6[2]) + (t6[1] + t6[3]);
        int E = 0;
        (void)frexpf(M, &E);
        int e = M > 0 ? 22 - E : 0;
        e = e > 126 ? 126 : e < -126 ? -126 : e;
        dx[b] = ldexpf(1.0f, -e);
        xs[b] = s;
        float f = ldexpf(1.0f, e);
        for (int j = 0; j < 32; j++) {
            float p = x[32 * b + j] * f;
            int32_t X = (int32_t)nearbyintf(p);
            int32_t l0 = ((X & 255) ^ 128) - 128, x1 = (X - l0) / 256;
            int32_t l1 = ((x1 & 255) ^ 128) - 128, l2 = (x1 - l1) / 256;
            L[2 * (32 * b + j)] = l0 + 256 * l1;
            L[2 * (32 * b + j) + 1] = l2;
        }
    }
    for (int r = 0; r < rows; r++) {
        float acc = 0, macc = 0;
        for (int b = 0; b < nb; b++) {
            const uint8_t *blk = G + (size_t)r * rb + (size_t)bb * b;
            int64_t p01 = 0, p2 = 0;
            for (int j = 0; j < 32; j++) {
                int q = type == GGML_Q8_0 ? (int8_t)blk[2 + j] : j < 16 ? blk[4 + j] & 15 : blk[4 + j - 16] >> 4;
                p01 += (int64_t)q * L[2 * (32 * b + j)];
                p2 += (int64_t)q * L[2 * (32 * b + j) + 1];
            }
            float S = fmaf((float)p2, 65536.0f, (float)p01);
            acc = fmaf(S, (float)half_at(blk) * dx[b], acc);
            if (type == GGML_Q4_1) macc = fmaf((float)half_at(blk + 2), xs[b], macc);
        }
        y[r] = acc + macc;
    }
    free(L);
    free(dx);
    free(xs);
}

/* Where the build has R16 kernels: their y bit for bit r16_formula's, on
 * SmolLM2's shapes and others, x with outliers, a zero block, tiny, huge
 * and mixed blocks (fill_x_r16), x whose every block is subnormal, 1 and 2
 * threads. */
static void test_r16_formula(uint32_t type) {
    static const int shapes[][2] = {{16, 32}, {32, 96}, {48, 576}, {1536, 576}, {576, 1536}, {32, 4096}};
    const char *tn = kb_qtype_info(type)->name;
    int saved = omp_get_max_threads();
    for (size_t s = 0; s < KB_ARRAY_LEN(shapes); s++) {
        int rows = shapes[s][0], cols = shapes[s][1], bb = r16_bb(type);
        size_t rb = kb_row_bytes(type, cols);
        uint8_t *G = malloc(rb * (size_t)rows), *R = malloc(rb * (size_t)rows);
        float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4), *yr = malloc((size_t)rows * 4);
        int64_t nblk = (int64_t)(rb / (size_t)bb) * rows;
        fill_blocks(type, G, nblk);
        memcpy(R, G, rb * (size_t)rows);
        kb_r16_repack(type, R, rb, rows);
        kb_mv mv = {type, R, rb, rows, y, KB_LAYOUT_R16};
        for (int k = 0; k < 3; k++) {
            if (k == 1) fill_x_r16(x, cols);
            else fill_x(x, cols);
            if (k == 2) /* every block's max |x| subnormal (e clamps to 126), block 1 zero */
                for (int j = 0; j < cols; j++) x[j] = j / 32 == 1 ? 0.0f : x[j] * 1e-39f;
            r16_formula(type, G, rb, rows, cols, x, yr);
            for (int thr = 1; thr <= 2; thr++) {
                omp_set_num_threads(thr);
                FAST_MATVEC_MULTI(&mv, 1, cols, x);
                int bad = 0, first = -1;
                for (int r = 0; r < rows; r++)
                    if (memcmp(&y[r], &yr[r], 4)) {
                        bad++;
                        if (first < 0) first = r;
                    }
                CHECK_MSG(bad == 0, "R16 %s %dx%d (x %s, %d threads): %d rows differ from the formula, first %d: %.9g vs %.9g",
                          tn, rows, cols, k == 2 ? "subnormal" : k ? "fill_x_r16" : "fill_x", thr, bad, first, first >= 0 ? y[first] : 0.0,
                          first >= 0 ? yr[first] : 0.0);
            }
        }
        free(G);
        free(R);
        free(x);
        free(y);
        free(yr);
    }
    omp_set_num_threads(saved);
}

/* kb_matvec_multi with R16 and GGUF-layout matrices in one call: each y bit
 * for bit what a call with that matrix alone gives; kb_matmul on R16. */
static void test_r16_mixed(void) {
    enum { COLS = 576, NM = 4 };
    static const uint32_t types[NM] = {GGML_Q4_1, GGML_Q8_0, GGML_Q8_0, GGML_Q4_1};
    static const int layouts[NM] = {KB_LAYOUT_R16, KB_LAYOUT_ROWS, KB_LAYOUT_R16, KB_LAYOUT_R16};
    static const int rows[NM] = {576, 192, 1536, 64};
    uint8_t *W[NM];
    float *y[NM], *ys[NM], *x = malloc(COLS * 4);
    kb_mv mv[NM];
    fill_x(x, COLS);
    for (int i = 0; i < NM; i++) {
        size_t rb = kb_row_bytes(types[i], COLS);
        W[i] = malloc(rb * (size_t)rows[i]);
        fill_blocks(types[i], W[i], (int64_t)(rb / (size_t)r16_bb(types[i])) * rows[i]);
        if (layouts[i] == KB_LAYOUT_R16) kb_r16_repack(types[i], W[i], rb, rows[i]);
        y[i] = malloc((size_t)rows[i] * 4);
        ys[i] = malloc((size_t)rows[i] * 4);
        mv[i] = (kb_mv){types[i], W[i], rb, rows[i], y[i], layouts[i]};
        kb_mv one = mv[i];
        one.y = ys[i];
        FAST_MATVEC_MULTI(&one, 1, COLS, x);
    }
    FAST_MATVEC_MULTI(mv, NM, COLS, x);
    for (int i = 0; i < NM; i++) CHECK_MSG(!memcmp(y[i], ys[i], (size_t)rows[i] * 4), "R16 mixed: matrix %d differs", i);
#ifdef TEST_NATIVE
    /* kb_matmul: one row of X -> the mat-vec; several -> dequantised panels + sgemm, the
     * same bytes as the GGUF-layout matrix gives (the panels' values are equal) */
    for (int k = 0; k < 2; k++) {
        uint32_t t = k ? GGML_Q8_0 : GGML_Q4_1;
        int n = 5, R = 1536;
        size_t rb = kb_row_bytes(t, COLS);
        uint8_t *G = malloc(rb * (size_t)R), *P = malloc(rb * (size_t)R);
        float *X = malloc((size_t)n * COLS * 4), *Yg = malloc((size_t)n * R * 4), *Yp = malloc((size_t)n * R * 4);
        fill_blocks(t, G, (int64_t)(rb / (size_t)r16_bb(t)) * R);
        memcpy(P, G, rb * (size_t)R);
        kb_r16_repack(t, P, rb, R);
        for (int i = 0; i < n; i++) fill_x(X + (size_t)i * COLS, COLS);
        kb_weight wg = {t, G, R, COLS, rb, KB_LAYOUT_ROWS}, wp = {t, P, R, COLS, rb, KB_LAYOUT_R16};
        kb_matmul(&wg, X, n, COLS, Yg, R);
        kb_matmul(&wp, X, n, COLS, Yp, R);
        CHECK_MSG(!memcmp(Yg, Yp, (size_t)n * R * 4), "kb_matmul %s: R16 panels differ from GGUF rows",
                  kb_qtype_info(t)->name);
        kb_matmul(&wp, X, 1, COLS, Yp, R);
        kb_mv one = {t, P, rb, R, Yg, KB_LAYOUT_R16};
        kb_matvec_multi(&one, 1, COLS, X);
        CHECK_MSG(!memcmp(Yg, Yp, (size_t)R * 4), "kb_matmul n=1: not the R16 mat-vec");
        free(G);
        free(P);
        free(X);
        free(Yg);
        free(Yp);
    }
#endif
    for (int i = 0; i < NM; i++) {
        free(W[i]);
        free(y[i]);
        free(ys[i]);
    }
    free(x);
}

/* kb_matvec_ref dots in double (quant_ref.c; the exact bound above counts
 * only its final rounding): w = (1, 1, 1), x = (2^30, 1, -2^30) gives 1,
 * where an f32 running sum loses the 1 (2^30 + 1 rounds to 2^30). */
static void test_matvec_ref_double(void) {
    const float w[3] = {1, 1, 1}, x[3] = {1073741824.0f, 1, -1073741824.0f};
    float y = -1;
    kb_matvec_ref(GGML_F32, w, sizeof w, 1, 3, x, &y);
    CHECK(y == 1.0f);
}

/* The q8 mode quantises x per block of 32 with d = max|x| / 127 (llama.cpp's
 * Q8_0 activations; quant_cpu.c): x already on that grid (integers, each
 * block's largest |x| exactly 127, so d = 1) is kept exactly, and with weight
 * scales d = 1 (and Q4_1's m = -3) every product and sum is an integer below
 * 2^24: y must equal the integer dot product worked out here. */
static void test_q8_exact_on_grid(void) {
    enum { ROWS = 3, COLS = 64 };
    float x[COLS];
    for (int c = 0; c < COLS; c++) x[c] = (float)((int)(rng_unit() * 255) - 127);
    x[5] = 127; x[40] = -127; /* each block's max |x| */
    for (int k = 0; k < 2; k++) {
        uint32_t type = k ? GGML_Q4_1 : GGML_Q8_0;
        int bytes = k ? 20 : 34;
        uint8_t W[ROWS * 2 * 34];
        long want[ROWS] = {0};
        for (int r = 0; r < ROWS; r++)
            for (int b = 0; b < 2; b++) {
                uint8_t *blk = W + (size_t)(2 * r + b) * bytes;
                blk[0] = 0x00; blk[1] = 0x3c; /* d = 1.0 (f16) */
                if (!k) {
                    for (int j = 0; j < 32; j++) {
                        int q = (int)(rng_unit() * 255) - 127;
                        blk[2 + j] = (uint8_t)(int8_t)q;
                        want[r] += (long)q * (long)x[32 * b + j];
                    }
                } else {
                    blk[2] = 0x00; blk[3] = 0xc2; /* m = -3.0 (f16) */
                    for (int j = 0; j < 16; j++) {
                        int lo = (int)(rng_unit() * 16) & 15, hi = (int)(rng_unit() * 16) & 15;
                        blk[4 + j] = (uint8_t)(lo | hi << 4);
                        want[r] += (long)(lo - 3) * (long)x[32 * b + j] + (long)(hi - 3) * (long)x[32 * b + 16 + j];
                    }
                }
            }
        float y[ROWS];
        FAST_MATVEC_Q8(type, W, (size_t)2 * bytes, ROWS, COLS, x, y);
        for (int r = 0; r < ROWS; r++)
            CHECK_MSG(y[r] == (float)want[r], "q8 %s row %d: %.9g, expected %ld", kb_qtype_info(type)->name, r,
                      y[r], want[r]);
    }
}

/* The q8 mode's x for Q4_K rounds to the nearest step (d = max|x| / 127):
 * one Q4_K row whose 256 weights are all 1 (d = 1, dmin = 0, every scale 1,
 * every min 0, every q 1) and x = (127, 0.9, 0.9, ...): d_x = 1, the 0.9s
 * become 1, so y = 127 + 255 = 382 exactly (a truncation would give 127). */
static void test_q8_kquant_rounds(void) {
    uint8_t W[144] = {0x00, 0x3c, 0x00, 0x00, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
    memset(W + 16, 0x11, 128);
    float x[256], y = 0;
    for (int j = 0; j < 256; j++) x[j] = j ? 0.9f : 127.0f;
    float w[256];
    kb_dequant_ref(GGML_Q4_K, W, w, 256);
    int ones = 0;
    for (int j = 0; j < 256; j++) ones += w[j] == 1.0f;
    CHECK_EQ_INT(ones, 256); /* the block is what the comment says */
    FAST_MATVEC_Q8(GGML_Q4_K, W, sizeof W, 1, 256, x, &y);
    CHECK_MSG(y == 382.0f, "q8 Q4_K: %.9g, expected 382", y);
}

int main(void) {
    test_mode_env(); /* first: forks before any OpenMP thread exists */
    test_table();
    test_matvec_ref_double();
    for (size_t i = 0; i < KB_ARRAY_LEN(supported); i++) test_dequant(supported[i]);
    static const int shapes32[][2] = {{1, 32}, {7, 64}, {33, 576}, {193, 576}, {577, 576},
                                      {31, 1536}, {1, 4096}, {130, 160}, {9, 1056},
                                      {21, 8192} /* 4-row groups longer than the prefetch window */,
                                      {1536, 576}, {576, 1536} /* SmolLM2's gate/up and down: pool chunks */};
    static const int shapes256[][2] = {{1, 256}, {3, 512}, {97, 1024}, {301, 768}};
    for (int mode = MV_EXACT; mode <= MV_Q8; mode++) {
        for (size_t i = 0; i < KB_ARRAY_LEN(supported); i++) {
            uint32_t type = supported[i];
            if (kb_qtype_info(type)->blck == 256) {
                for (size_t s = 0; s < KB_ARRAY_LEN(shapes256); s++)
                    test_matvec(mode, type, shapes256[s][0], shapes256[s][1]);
            } else {
                for (size_t s = 0; s < KB_ARRAY_LEN(shapes32); s++)
                    test_matvec(mode, type, shapes32[s][0], shapes32[s][1]);
                /* 1-element blocks: odd lengths too */
                if (kb_qtype_info(type)->blck == 1) test_matvec(mode, type, 5, 37);
            }
        }
    }
    for (size_t i = 0; i < KB_ARRAY_LEN(supported); i++) {
        test_matvec_typical_error(supported[i]);
        if (act_block(supported[i])) test_exact_bound_catches_q8(supported[i]);
    }
    test_mode_dispatch();
    test_matvec_multi();
    static const int r16shapes[][2] = {{16, 32}, {48, 576}, {192, 576}, {576, 1536}, {32, 4096}, {1536, 576}};
    for (int k = 0; k < 2; k++) {
        uint32_t t = k ? GGML_Q8_0 : GGML_Q4_1;
        for (size_t i = 0; i < KB_ARRAY_LEN(r16shapes); i++) test_r16(t, r16shapes[i][0], r16shapes[i][1]);
        test_r16_bound_fails(t);
        test_r16_nonfinite(t);
        if (FAST_R16()) test_r16_formula(t);
    }
    test_r16_mixed();
    test_q8_exact_on_grid();
    test_q8_kquant_rounds();
    return check_summary(TEST_NAME);
}
