/* matmul_cpu.c - batched projections: dequantised weight panels + sgemm. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"

#define PANEL_BYTES (8u << 20) /* f32 bytes of one dequantised row panel */

void kb_matmul(const kb_weight *W, const float *X, int n, int ldx, float *Y, int ldy) {
    if (n == 1) {
        kb_matvec(W->type, W->data, W->row_bytes, W->rows, W->cols, X, Y);
        return;
    }
    int panel = (int)(PANEL_BYTES / ((size_t)W->cols * sizeof(float)));
    if (panel < 16) panel = 16;
    if (panel > W->rows) panel = W->rows;
    float *Wf = KB_AMALLOC((size_t)panel * W->cols * sizeof(float));
    for (int r0 = 0; r0 < W->rows; r0 += panel) {
        int nr = KB_MIN(panel, W->rows - r0);
#pragma omp parallel for schedule(static) if (nr >= 64)
        for (int r = 0; r < nr; r++)
            kb_dequant(W->type, (const char *)W->data + (size_t)(r0 + r) * W->row_bytes,
                       Wf + (size_t)r * W->cols, W->cols);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, nr, W->cols, 1.0f, X, ldx, Wf,
                    W->cols, 0.0f, Y + r0, ldy);
    }
    kb_afree(Wf);
}
