/* quant.h - GGUF tensor element types: block layouts, dequantisation and
 * quantised dot products / matrix-vector products.
 *
 * A table indexed by ggml type id gives the block size and bytes per block.
 * Every fast kernel has a plain reference version; tests compare them.
 * Weight matrices follow GGUF: W has `rows` rows of `cols` elements, row r at
 * (char*)W + r*row_bytes; y = W x means y[r] = dot(row r, x). */
#ifndef KB_QUANT_H
#define KB_QUANT_H

#include "kernels/kb_base.h"

enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q8_0 = 8, GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13,
    GGML_Q6_K = 14, GGML_Q8_K = 15, GGML_BF16 = 30,
};

typedef struct kb_qtype {
    const char *name; /* "Q4_1" */
    int blck;         /* elements per block */
    int bytes;        /* bytes per block */
    int supported;    /* 1 if we can dequantise / multiply it */
} kb_qtype;

/* Info for a ggml type id, or NULL for an id we do not know at all.
 * (Known but unsupported types, e.g. Q2_K, have supported = 0.) */
const kb_qtype *kb_qtype_info(uint32_t type);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t kb_row_bytes(uint32_t type, int64_t n);

/* Reference: dequantise n elements (a multiple of the block size) of a
 * supported type, written from the block formulas of spec engine.md §5.
 * src needs no alignment. An unsupported type (a caller bug: the loader
 * refuses them) fills dst with NaN. */
void kb_dequant_ref(uint32_t type, const void *src, float *dst, int64_t n);
/* Fast dequantisation (same results as the reference, bit for bit; the one
 * exception is F16 NaN payloads, which F16C may quieten). */
void kb_dequant(uint32_t type, const void *src, float *dst, int64_t n);

/* Reference y = W x: dequantise each row to f32, dot in f32 (double accum).
 * Single-threaded, slow, exact definition. */
void kb_matvec_ref(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                   const float *x, float *y);
/* Fast y = W x (SIMD + OpenMP over contiguous row ranges; x and y must not
 * overlap; cols a multiple of the block size). Used for single-token decode.
 *
 * Accuracy vs kb_matvec_ref. For Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, x is first
 * quantised like llama.cpp's Q8_0/Q8_1 activations: per block b of 32,
 * dx_b = max|x_b|/127 and q_j = round(x_j/dx_b), so |x_j - dx_b*q_j| <=
 * dx_b/2 and
 *     |y_r - yref_r| <= sum_b (dx_b/2) * sum_{j in b} |w_rj|  + f32 rounding,
 * which for Gaussian-like rows is ~1e-3 of |y_r| scale (about
 * 0.5/127 * (mean|x| / max|x|) relative to sum_j |w_rj x_j|); the f32
 * rounding term is ~(cols/8 + 32) * 2^-24 * sum_j |w_rj x_j|. Q4_K and Q6_K
 * quantise x the same way but per block of 256 (like llama.cpp's Q8_K), so
 * the same bound holds with b running over blocks of 256 (a little coarser).
 * F32, F16 and BF16 use the exact weights and only carry the f32 rounding
 * term. tests/unit/test_quant.c checks these bounds. */
void kb_matvec(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
               const float *x, float *y);

#endif
