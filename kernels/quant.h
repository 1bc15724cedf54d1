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

/* Reference: dequantise n elements (a multiple of the block size). */
void kb_dequant_ref(uint32_t type, const void *src, float *dst, int64_t n);
/* Fast dequantisation (same results as the reference, bit for bit). */
void kb_dequant(uint32_t type, const void *src, float *dst, int64_t n);

/* Reference y = W x: dequantise each row to f32, dot in f32 (double accum).
 * Single-threaded, slow, exact definition. */
void kb_matvec_ref(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                   const float *x, float *y);
/* Fast y = W x (SIMD + OpenMP over rows). May quantise x to 8 bits
 * internally like llama.cpp (then documented error ~1e-3 relative vs ref). */
void kb_matvec(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
               const float *x, float *y);

#endif
