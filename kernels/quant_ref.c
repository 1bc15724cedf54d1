/* quant_ref.c - the ggml type table and the plain reference kernels:
 * dequantisation written straight from the block formulas (spec engine.md §5)
 * and y = W x as "dequantise the row, dot in double". The fast versions in
 * kernels/cpu/quant_cpu.c are tested against these.
 *
 * Floating-point order matters for the bit-identity promise of kb_dequant:
 * every value is formed as written here (e.g. Q4_1: d*q + m, with the product
 * rounded before the add; Q4_K: (d*sc)*q - dmin*mn). The build uses -std=c11,
 * which turns off FMA contraction, so the compiler does not fuse these. */
#include <math.h>
#include <string.h>
#include <stdlib.h>

#include "kernels/quant.h"

/* Indexed by ggml type id. Block sizes and bytes of the types we only list
 * (info output, tensor byte sizes) follow ggml's type traits; ids absent here
 * (4, 5 = removed Q4_2/Q4_3; 31..33 = removed repacked Q4_0 variants; 36..38)
 * are "unknown". */
static const kb_qtype qtypes[] = {
    [GGML_F32] = {"F32", 1, 4, 1},
    [GGML_F16] = {"F16", 1, 2, 1},
    [GGML_Q4_0] = {"Q4_0", 32, 18, 1},
    [GGML_Q4_1] = {"Q4_1", 32, 20, 1},
    [GGML_Q5_0] = {"Q5_0", 32, 22, 1},
    [GGML_Q5_1] = {"Q5_1", 32, 24, 1},
    [GGML_Q8_0] = {"Q8_0", 32, 34, 1},
    [GGML_Q8_1] = {"Q8_1", 32, 36, 0}, /* two f16 (d, s) + 32 int8 (gguf-py 0.19 says 40: the old float layout) */
    [GGML_Q2_K] = {"Q2_K", 256, 84, 0},
    [GGML_Q3_K] = {"Q3_K", 256, 110, 0},
    [GGML_Q4_K] = {"Q4_K", 256, 144, 1},
    [GGML_Q5_K] = {"Q5_K", 256, 176, 0},
    [GGML_Q6_K] = {"Q6_K", 256, 210, 1},
    [GGML_Q8_K] = {"Q8_K", 256, 292, 0},
    [16] = {"IQ2_XXS", 256, 66, 0},
    [17] = {"IQ2_XS", 256, 74, 0},
    [18] = {"IQ3_XXS", 256, 98, 0},
    [19] = {"IQ1_S", 256, 50, 0},
    [20] = {"IQ4_NL", 32, 18, 0},
    [21] = {"IQ3_S", 256, 110, 0},
    [22] = {"IQ2_S", 256, 82, 0},
    [23] = {"IQ4_XS", 256, 136, 0},
    [24] = {"I8", 1, 1, 0},
    [25] = {"I16", 1, 2, 0},
    [26] = {"I32", 1, 4, 0},
    [27] = {"I64", 1, 8, 0},
    [28] = {"F64", 1, 8, 0},
    [29] = {"IQ1_M", 256, 56, 0},
    [GGML_BF16] = {"BF16", 1, 2, 1},
    [34] = {"TQ1_0", 256, 54, 0},
    [35] = {"TQ2_0", 256, 66, 0},
    [39] = {"MXFP4", 32, 17, 0},
};

const kb_qtype *kb_qtype_info(uint32_t type) {
    if (type >= KB_ARRAY_LEN(qtypes) || !qtypes[type].name) return NULL;
    return &qtypes[type];
}

size_t kb_row_bytes(uint32_t type, int64_t n) {
    const kb_qtype *t = kb_qtype_info(type);
    if (!t || n < 0 || n % t->blck) return 0;
    return (size_t)(n / t->blck) * (size_t)t->bytes;
}

static inline float rd_f16(const uint8_t *p) { return kb_f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }

/* ---------------------------------------------------------------- 32-blocks */

/* Q8_0: d, i8 qs[32]; value d*qs[j]. */
static void deq_q8_0(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    for (int j = 0; j < 32; j++) y[j] = d * (float)(int8_t)b[2 + j];
}

/* Q4_0: d, qs[16]; element j (low nibble of byte j), j+16 (high nibble). */
static void deq_q4_0(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    const uint8_t *qs = b + 2;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)((qs[j] & 15) - 8);
        y[j + 16] = d * (float)((qs[j] >> 4) - 8);
    }
}

/* Q4_1: d, m, qs[16]; value d*q + m. */
static void deq_q4_1(const uint8_t *b, float *y) {
    float d = rd_f16(b), m = rd_f16(b + 2);
    const uint8_t *qs = b + 4;
    for (int j = 0; j < 16; j++) {
        y[j] = d * (float)(qs[j] & 15) + m;
        y[j + 16] = d * (float)(qs[j] >> 4) + m;
    }
}

/* Q5_0: d, qh (u32 little-endian), qs[16]; bit j of qh is the 5th bit of
 * element j, bit j+16 that of element j+16; value d*(q-16). */
static void deq_q5_0(const uint8_t *b, float *y) {
    float d = rd_f16(b);
    uint32_t h = (uint32_t)b[2] | (uint32_t)b[3] << 8 | (uint32_t)b[4] << 16 | (uint32_t)b[5] << 24;
    const uint8_t *qs = b + 6;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)((h >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
        y[j] = d * (float)(lo - 16);
        y[j + 16] = d * (float)(hi - 16);
    }
}

/* Q5_1: d, m, qh, qs[16]; value d*q + m. */
static void deq_q5_1(const uint8_t *b, float *y) {
    float d = rd_f16(b), m = rd_f16(b + 2);
    uint32_t h = (uint32_t)b[4] | (uint32_t)b[5] << 8 | (uint32_t)b[6] << 16 | (uint32_t)b[7] << 24;
    const uint8_t *qs = b + 8;
    for (int j = 0; j < 16; j++) {
        int lo = (qs[j] & 15) | (int)((h >> j) & 1) << 4;
        int hi = (qs[j] >> 4) | (int)((h >> (j + 16)) & 1) << 4;
        y[j] = d * (float)lo + m;
        y[j + 16] = d * (float)hi + m;
    }
}

/* --------------------------------------------------------------- K-quants */

/* 6-bit scale and min of sub-block k (0..7) from the 12 packed bytes s. */
static void q4k_scale_min(int k, const uint8_t *s, int *sc, int *mn) {
    if (k < 4) {
        *sc = s[k] & 63;
        *mn = s[k + 4] & 63;
    } else {
        *sc = (s[k + 4] & 15) | ((s[k - 4] >> 6) << 4);
        *mn = (s[k + 4] >> 4) | ((s[k] >> 6) << 4);
    }
}

/* Q4_K: d, dmin, scales[12], qs[128]; 4 chunks of 64: the low nibbles of 32
 * bytes are sub-block 2c, the high nibbles sub-block 2c+1.
 * value (d*sc)*q - (dmin*mn). */
static void deq_q4_k(const uint8_t *b, float *y) {
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *s = b + 4, *q = b + 16;
    for (int c = 0; c < 4; c++) {
        int sc, mn;
        q4k_scale_min(2 * c, s, &sc, &mn);
        float d1 = d * (float)sc, m1 = dmin * (float)mn;
        q4k_scale_min(2 * c + 1, s, &sc, &mn);
        float d2 = d * (float)sc, m2 = dmin * (float)mn;
        for (int l = 0; l < 32; l++) {
            y[64 * c + l] = d1 * (float)(q[l] & 15) - m1;
            y[64 * c + 32 + l] = d2 * (float)(q[l] >> 4) - m2;
        }
        q += 32;
    }
}

/* Q6_K: ql[128], qh[64], i8 scales[16], d; two halves of 128 elements.
 * value (d*scale)*(q-32). */
static void deq_q6_k(const uint8_t *b, float *y) {
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rd_f16(b + 208);
    for (int half = 0; half < 2; half++) {
        for (int l = 0; l < 32; l++) {
            int is = l / 16;
            int q1 = (ql[l] & 15) | ((qh[l] >> 0) & 3) << 4;
            int q2 = (ql[l + 32] & 15) | ((qh[l] >> 2) & 3) << 4;
            int q3 = (ql[l] >> 4) | ((qh[l] >> 4) & 3) << 4;
            int q4 = (ql[l + 32] >> 4) | ((qh[l] >> 6) & 3) << 4;
            y[l] = (d * (float)sc[is]) * (float)(q1 - 32);
            y[l + 32] = (d * (float)sc[is + 2]) * (float)(q2 - 32);
            y[l + 64] = (d * (float)sc[is + 4]) * (float)(q3 - 32);
            y[l + 96] = (d * (float)sc[is + 6]) * (float)(q4 - 32);
        }
        y += 128;
        ql += 64;
        qh += 32;
        sc += 8;
    }
}

void kb_dequant_ref(uint32_t type, const void *src, float *dst, int64_t n) {
    const uint8_t *p = src;
    switch (type) {
    case GGML_F32: memcpy(dst, src, (size_t)n * 4); return;
    case GGML_F16:
        for (int64_t i = 0; i < n; i++) dst[i] = rd_f16(p + 2 * i);
        return;
    case GGML_BF16:
        for (int64_t i = 0; i < n; i++) dst[i] = kb_bf16_to_f32((uint16_t)(p[2 * i] | p[2 * i + 1] << 8));
        return;
    default: break;
    }
    void (*deq)(const uint8_t *, float *) = NULL;
    switch (type) {
    case GGML_Q8_0: deq = deq_q8_0; break;
    case GGML_Q4_0: deq = deq_q4_0; break;
    case GGML_Q4_1: deq = deq_q4_1; break;
    case GGML_Q5_0: deq = deq_q5_0; break;
    case GGML_Q5_1: deq = deq_q5_1; break;
    case GGML_Q4_K: deq = deq_q4_k; break;
    case GGML_Q6_K: deq = deq_q6_k; break;
    default: break;
    }
    const kb_qtype *t = kb_qtype_info(type);
    if (!deq || !t) { /* caller bug: unsupported types are refused at load time */
        for (int64_t i = 0; i < n; i++) dst[i] = NAN;
        return;
    }
    for (int64_t i = 0; i < n / t->blck; i++) deq(p + i * t->bytes, dst + i * t->blck);
}

void kb_matvec_ref(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                   const float *x, float *y) {
    float *row = KB_MALLOC((size_t)(cols > 0 ? cols : 1) * sizeof *row);
    for (int r = 0; r < rows; r++) {
        kb_dequant_ref(type, (const uint8_t *)W + (size_t)r * row_bytes, row, cols);
        double acc = 0;
        for (int c = 0; c < cols; c++) acc += (double)row[c] * (double)x[c];
        y[r] = (float)acc;
    }
    free(row);
}

/* ----------------------------------------- Q4_1 / Q8_0, 16 rows regrouped */

int kb_r16_type(uint32_t type) { return type == GGML_Q4_1 || type == GGML_Q8_0; }

/* Layout: kernels/quant.h (KB_LAYOUT_R16). One group of 16 rows, nb blocks:
 * GGUF's rows (16 x row_bytes) in src -> the R16 group in dst. */
static void r16_group_pack(uint32_t type, const uint8_t *src, size_t row_bytes, int nb, uint8_t *dst) {
    int bb = type == GGML_Q4_1 ? 20 : 34;
    for (int b = 0; b < nb; b++) {
        uint8_t *o = dst + (size_t)16 * bb * b;
        for (int r = 0; r < 16; r++) {
            const uint8_t *blk = src + (size_t)r * row_bytes + (size_t)bb * b;
            memcpy(o + 2 * r, blk, 2); /* d */
            if (type == GGML_Q8_0) {
                for (int t = 0; t < 8; t++)
                    for (int k = 0; k < 4; k++) o[32 + 64 * t + 4 * r + k] = (uint8_t)(blk[2 + 4 * t + k] ^ 0x80);
                continue;
            }
            uint8_t q[32];
            for (int j = 0; j < 16; j++) {
                q[j] = blk[4 + j] & 15;
                q[j + 16] = blk[4 + j] >> 4;
            }
            memcpy(o + 32 + 2 * r, blk + 2, 2); /* m */
            for (int t = 0; t < 4; t++)
                for (int k = 0; k < 4; k++)
                    o[64 + 64 * t + 4 * r + k] = (uint8_t)(q[8 * t + k] | q[8 * t + 4 + k] << 4);
        }
    }
}

void kb_r16_repack(uint32_t type, void *W, size_t row_bytes, int rows) {
    if (!kb_r16_type(type)) return;
    int nb = (int)(row_bytes / (type == GGML_Q4_1 ? 20 : 34));
    size_t gbytes = 16 * row_bytes;
    uint8_t *tmp = KB_MALLOC(gbytes);
    for (int g = 0; g < rows / 16; g++) {
        uint8_t *p = (uint8_t *)W + (size_t)g * gbytes;
        memcpy(tmp, p, gbytes);
        r16_group_pack(type, tmp, row_bytes, nb, p);
    }
    free(tmp);
}

void kb_r16_dequant_ref(uint32_t type, const void *W, size_t row_bytes, int r0, int n, float *dst) {
    int bb = type == GGML_Q4_1 ? 20 : 34, nb = (int)(row_bytes / (size_t)bb), cols = 32 * nb;
    for (int row = r0; row < r0 + n; row++) {
        const uint8_t *p = (const uint8_t *)W + (size_t)(row / 16) * 16 * row_bytes;
        int r = row % 16;
        float *y = dst + (size_t)(row - r0) * cols;
        for (int b = 0; b < nb; b++, y += 32) {
            const uint8_t *o = p + (size_t)16 * bb * b;
            float d = rd_f16(o + 2 * r);
            if (type == GGML_Q8_0) {
                for (int t = 0; t < 8; t++)
                    for (int k = 0; k < 4; k++) y[4 * t + k] = d * (float)(int8_t)(o[32 + 64 * t + 4 * r + k] ^ 0x80);
                continue;
            }
            float m = rd_f16(o + 32 + 2 * r);
            for (int t = 0; t < 4; t++)
                for (int k = 0; k < 4; k++) {
                    uint8_t v = o[64 + 64 * t + 4 * r + k];
                    y[8 * t + k] = d * (float)(v & 15) + m; /* deq_q4_1's formula */
                    y[8 * t + 4 + k] = d * (float)(v >> 4) + m;
                }
        }
    }
}
