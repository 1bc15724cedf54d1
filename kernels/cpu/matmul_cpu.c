/* matmul_cpu.c - batched projections: dequantised weight panels + sgemm.
 *
 * Threads: OpenMP splits W's rows into panels; each thread dequantises its
 * panel and calls single-threaded OpenBLAS sgemm on it. Letting OpenBLAS's
 * own pthread pool run next to OpenMP's spinning threads oversubscribes the
 * cores (measured on 2 cores: prefill 3x slower), so OpenBLAS is kept at one
 * thread (kb_blas_single_thread) and all parallelism is OpenMP's. */
#include <cblas.h>
#include <omp.h>
#include <stdlib.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"

#define PANEL_BYTES (4u << 20) /* f32 bytes of one dequantised row panel */

void kb_blas_single_thread(void) {
    static int done = 0;
    if (!done) {
        openblas_set_num_threads(1);
        done = 1;
    }
}

void kb_matmul(const kb_weight *W, const float *X, int n, int ldx, float *Y, int ldy) {
    if (n == 1) {
        if (W->layout == KB_LAYOUT_R16) {
            kb_mv mv = {W->type, W->data, W->row_bytes, W->rows, Y, W->layout};
            kb_matvec_multi(&mv, 1, W->cols, X);
        } else {
            kb_matvec(W->type, W->data, W->row_bytes, W->rows, W->cols, X, Y);
        }
        return;
    }
    kb_blas_single_thread();
    int nthr = omp_in_parallel() ? 1 : omp_get_max_threads();
    /* panels: at most PANEL_BYTES each, at least one per thread, rows multiple of 16 */
    int panel = (int)(PANEL_BYTES / ((size_t)W->cols * sizeof(float)));
    int per_thread = (W->rows + nthr - 1) / nthr;
    if (panel > per_thread) panel = per_thread;
    panel = (panel + 15) & ~15;
    if (panel < 16) panel = 16;
    int npanels = (W->rows + panel - 1) / panel;
#pragma omp parallel num_threads(nthr) if (nthr > 1 && npanels > 1)
    {
        float *Wf = KB_AMALLOC((size_t)panel * W->cols * sizeof(float));
#pragma omp for schedule(dynamic, 1)
        for (int pi = 0; pi < npanels; pi++) {
            int r0 = pi * panel, nr = KB_MIN(panel, W->rows - r0);
            if (W->layout == KB_LAYOUT_R16) /* panels are multiples of 16 rows */
                kb_r16_dequant(W->type, W->data, W->row_bytes, r0, nr, Wf);
            else
                kb_dequant(W->type, (const char *)W->data + (size_t)r0 * W->row_bytes, Wf,
                           (int64_t)nr * W->cols);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, nr, W->cols, 1.0f, X, ldx, Wf,
                        W->cols, 0.0f, Y + r0, ldy);
        }
        kb_afree(Wf);
    }
}
