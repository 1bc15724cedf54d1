/* matmul_ref.c - reference projections: dequantise each row, double-accumulated dots. */
#include <stdlib.h>

#include "kernels/matmul.h"
#include "kernels/quant.h"

void kb_matmul_ref(const kb_weight *W, const float *X, int n, int ldx, float *Y, int ldy) {
    float *row = KB_MALLOC((size_t)W->cols * sizeof(float));
    for (int r = 0; r < W->rows; r++) {
        kb_dequant_ref(W->type, (const char *)W->data + (size_t)r * W->row_bytes, row, W->cols);
        for (int i = 0; i < n; i++) {
            double acc = 0;
            for (int c = 0; c < W->cols; c++) acc += (double)row[c] * X[(size_t)i * ldx + c];
            Y[(size_t)i * ldy + r] = (float)acc;
        }
    }
    free(row);
}
