/* test_quant.c - GGUF block types: the type table, reference dequantisation
 * against an independent element-by-element decoder written here from the
 * spec formulas (engine.md §5), fast dequantisation == reference bit for bit,
 * and fast y = W x against kb_matvec_ref within a bound derived from the
 * activation quantisation (stated below).
 *
 * tests/unit/test_quant_scalar.c includes this file after compiling the
 * plain-C fallback of kernels/cpu/quant_cpu.c under other names, so the same
 * checks run on both code paths (FAST_DEQUANT / FAST_MATVEC). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/quant.h"

#ifndef FAST_DEQUANT
#define FAST_DEQUANT kb_dequant
#define FAST_MATVEC kb_matvec
#define TEST_NAME "quant"
#endif

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
    /* sizes from the spec (engine.md §1, §5) */
    static const struct { uint32_t id; const char *name; int blck, bytes, sup; } want[] = {
        {0, "F32", 1, 4, 1},       {1, "F16", 1, 2, 1},       {2, "Q4_0", 32, 18, 1},
        {3, "Q4_1", 32, 20, 1},    {6, "Q5_0", 32, 22, 1},    {7, "Q5_1", 32, 24, 1},
        {8, "Q8_0", 32, 34, 1},    {9, "Q8_1", 32, 40, 0},    {10, "Q2_K", 256, 84, 0},
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

/* Block length over which kb_matvec quantises x to 8 bits (0: x stays f32). */
static int act_block(uint32_t type) {
    switch (type) {
    case GGML_Q4_0: case GGML_Q4_1: case GGML_Q5_0: case GGML_Q5_1: case GGML_Q8_0: return 32;
    case GGML_Q4_K: case GGML_Q6_K: return 256;
    default: return 0;
    }
}

/* Fast matvec within the bound of quant.h:
 *   |y - yref| <= 1.0001 * sum_b (max|x_b|/127/2) sum_{j in b} |w_j|    (8-bit activation types;
 *                                                 blocks b of 32, or 256 for the K-quants)
 *              + (cols/8 + 32) * 2^-24 * 2 * sum_j |w_j x_j|           (f32 summation, 2x margin)
 * The first term is the worst case of rounding x to 8 bits per block of 32;
 * the second covers f32 accumulation in 8 lanes plus block scales' rounding. */
static void test_matvec(uint32_t type, int rows, int cols) {
    const kb_qtype *t = kb_qtype_info(type);
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *W = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4 + 64),
          *yr = malloc((size_t)rows * 4), *wrow = malloc((size_t)cols * 4);
    fill_blocks(type, W, (int64_t)(rb / (size_t)t->bytes) * rows);
    for (int c = 0; c < cols; c++) {
        double u = rng_unit() * 2 - 1;
        x[c] = (float)(c % 97 == 5 ? 8 * u : u); /* a few outliers, as activations have */
    }
    if (cols >= 64)
        for (int c = 32; c < 64; c++) x[c] = 0.0f; /* an all-zero block: scale 0 path */
    for (int r = 0; r < rows + 16; r++) y[r] = -12345.0f; /* canary past the end */
    FAST_MATVEC(type, W, rb, rows, cols, x, y);
    kb_matvec_ref(type, W, rb, rows, cols, x, yr);
    int bad = 0;
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        kb_dequant_ref(type, W + (size_t)r * rb, wrow, cols);
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
        double tol = (act_block(type) ? 1.0001 * act : 0) +
                     (cols / 8.0 + 32) * ldexp(2 * sum_abs, -24) + 1e-30;
        double err = fabs((double)y[r] - yr[r]);
        if (err / tol > worst) worst = err / tol;
        if (!(err <= tol) && bad++ < 3)
            fprintf(stderr, "  %s %dx%d row %d: fast %.9g ref %.9g (tol %.3g)\n", t->name, rows,
                    cols, r, y[r], yr[r], tol);
    }
    int canary = 0;
    for (int r = rows; r < rows + 16; r++) canary += y[r] != -12345.0f;
    CHECK_MSG(bad == 0, "%s %dx%d: %d rows outside the bound", t->name, rows, cols, bad);
    CHECK_MSG(canary == 0, "%s %dx%d: wrote past y[rows]", t->name, rows, cols);
    (void)worst;
    free(W);
    free(x);
    free(y);
    free(yr);
    free(wrow);
}

/* Typical size of the Q8-activation error, relative to the row's scale
 * sum_j |w_j x_j|: about 1e-3 here (measured 0.9e-3..1.4e-3 on uniform x, as
 * llama.cpp's Q8_0/Q8_1 activations give); fail above 5e-3, which would mean
 * x is quantised more coarsely than 8 bits per block of 32. */
static void test_matvec_typical_error(uint32_t type) {
    int rows = 64, cols = act_block(type) == 256 ? 512 : 576;
    size_t rb = kb_row_bytes(type, cols);
    uint8_t *W = malloc(rb * (size_t)rows);
    float *x = malloc((size_t)cols * 4), *y = malloc((size_t)rows * 4), *yr = malloc((size_t)rows * 4),
          *wrow = malloc((size_t)cols * 4);
    fill_blocks(type, W, (int64_t)(rb / (size_t)kb_qtype_info(type)->bytes) * rows);
    for (int c = 0; c < cols; c++) x[c] = (float)(rng_unit() * 2 - 1);
    FAST_MATVEC(type, W, rb, rows, cols, x, y);
    kb_matvec_ref(type, W, rb, rows, cols, x, yr);
    double worst = 0;
    for (int r = 0; r < rows; r++) {
        kb_dequant_ref(type, W + (size_t)r * rb, wrow, cols);
        double s = 0;
        for (int c = 0; c < cols; c++) s += fabs((double)wrow[c] * x[c]);
        worst = fmax(worst, fabs((double)y[r] - yr[r]) / s);
    }
    CHECK_MSG(worst < 5e-3, "%s: relative error %.3g", kb_qtype_info(type)->name, worst);
    free(W);
    free(x);
    free(y);
    free(yr);
    free(wrow);
}

int main(void) {
    test_table();
    for (size_t i = 0; i < KB_ARRAY_LEN(supported); i++) test_dequant(supported[i]);
    static const int shapes32[][2] = {{1, 32}, {7, 64}, {33, 576}, {193, 576}, {577, 576},
                                      {31, 1536}, {1, 4096}, {130, 160}};
    static const int shapes256[][2] = {{1, 256}, {3, 512}, {97, 1024}, {301, 768}};
    for (size_t i = 0; i < KB_ARRAY_LEN(supported); i++) {
        uint32_t type = supported[i];
        if (kb_qtype_info(type)->blck == 256) {
            for (size_t s = 0; s < KB_ARRAY_LEN(shapes256); s++)
                test_matvec(type, shapes256[s][0], shapes256[s][1]);
        } else {
            for (size_t s = 0; s < KB_ARRAY_LEN(shapes32); s++)
                test_matvec(type, shapes32[s][0], shapes32[s][1]);
            /* 1-element blocks: odd lengths too */
            if (kb_qtype_info(type)->blck == 1) test_matvec(type, 5, 37);
        }
        if (act_block(type)) test_matvec_typical_error(type);
    }
    return check_summary(TEST_NAME);
}
