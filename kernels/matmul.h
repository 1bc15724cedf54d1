/* matmul.h - Y = X W^T for a GGUF weight matrix W (rows x cols, any
 * supported type) and a batch X of n rows: the prefill path dequantises W in
 * row panels to f32 and calls OpenBLAS sgemm; n == 1 uses the quantised
 * mat-vec (kernels/quant.h). */
#ifndef KB_MATMUL_H
#define KB_MATMUL_H

#include "kernels/kb_base.h"

typedef struct kb_weight {
    uint32_t type;     /* ggml type id */
    const void *data;  /* rows * row_bytes bytes */
    int rows, cols;    /* output features x input features */
    size_t row_bytes;
    int layout;        /* KB_LAYOUT_ROWS (GGUF's) or KB_LAYOUT_R16 (kernels/quant.h) */
} kb_weight;

/* Y [n][ldy] (first W.rows columns written) = X [n][ldx] (first W.cols used) . W^T */
void kb_matmul(const kb_weight *W, const float *X, int n, int ldx, float *Y, int ldy);
/* Keeps OpenBLAS single-threaded (all parallelism is OpenMP's; see matmul_cpu.c). */
void kb_blas_single_thread(void);
/* Reference: dequantise + double-accumulated dot products. */
void kb_matmul_ref(const kb_weight *W, const float *X, int n, int ldx, float *Y, int ldy);

#endif
