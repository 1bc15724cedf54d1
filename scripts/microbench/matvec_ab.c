/* matvec_ab.c - two versions of the decode mat-vec (kb_matvec_multi of two
 * copies of kernels/cpu/quant_cpu.c, A and B) alternated call by call in one
 * process on one matrix. A standalone A/B microbenchmark (not part of the
 * build or the tests) behind mat-vec numbers of docs/PERFORMANCE-LOG.md; build
 * it with matvec_ab.sh.
 *
 * The matrix: rows x cols of a GGUF type (3 = Q4_1, 8 = Q8_0), random
 * bytes with small positive f16 scales, regrouped for the R16 kernels when
 * r16 is 1 (as the x24 mode's loader does); x = sin(0.7 j). Each rep times
 * A's call, then B's, with the TSC; prints the medians, TSC cycles per
 * row-block (32 weights of one row) and thread, the median of B / A
 * within a rep, and whether A's and B's y are the same bits.
 *
 * With b_r16 (0 or 1, default r16) B gets a copy of the matrix in that
 * layout: the same kernels' exact and R16 paths against each other (then
 * y differs by the R16 rounding of x, and the largest |yb - ya| relative to
 * the largest |ya| is printed instead).
 *
 *   build/matvec_ab [rows cols type reps r16 b_r16]     (defaults 1536 576 3 2000 1 r16)
 *   OMP_NUM_THREADS=1 for one thread; a matrix of ~1 MB or less stays in L2
 */
#include <immintrin.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <x86intrin.h>

#include "kernels/kernels.h"
#include "kernels/pool.h"
#include "kernels/quant.h"

void A_kb_matvec_multi(const kb_mv *mv, int n, int cols, const float *x);
void B_kb_matvec_multi(const kb_mv *mv, int n, int cols, const float *x);

static int cmpd(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int arg(int argc, char **argv, int i, int def) { return argc > i ? atoi(argv[i]) : def; }

int main(int argc, char **argv) {
    int rows = arg(argc, argv, 1, 1536), cols = arg(argc, argv, 2, 576), type = arg(argc, argv, 3, GGML_Q4_1);
    int reps = arg(argc, argv, 4, 2000), r16 = arg(argc, argv, 5, 1), br16 = arg(argc, argv, 6, r16);
    if (rows < 16 || rows % 16 || cols < 32 || cols % 32 || (type != GGML_Q4_1 && type != GGML_Q8_0) || reps < 1 ||
        (r16 != 0 && r16 != 1) || (br16 != 0 && br16 != 1)) {
        fprintf(stderr, "matvec_ab: bad arguments (see the header comment)\n");
        return 2;
    }
    size_t rb = kb_row_bytes((uint32_t)type, cols), bb = type == GGML_Q4_1 ? 20 : 34;
    uint8_t *W = aligned_alloc(64, (rb * rows + 63) / 64 * 64);
    unsigned s = 1;
    for (size_t i = 0; i < rb * rows; i++) {
        s = s * 1103515245u + 12345u;
        W[i] = (uint8_t)(s >> 16);
    }
    for (size_t b = 0; b < rb * rows / bb; b++) { /* d (and m) small and finite */
        s = s * 1103515245u + 12345u;
        uint16_t h = _cvtss_sh(0.001f + (float)(s >> 16) * 1e-7f, 0);
        memcpy(W + b * bb, &h, 2);
        if (type == GGML_Q4_1) memcpy(W + b * bb + 2, &h, 2);
    }
    uint8_t *WB = aligned_alloc(64, (rb * rows + 63) / 64 * 64);
    memcpy(WB, W, rb * rows);
    if (r16) kb_r16_repack((uint32_t)type, W, rb, rows);
    if (br16) kb_r16_repack((uint32_t)type, WB, rb, rows);
    float *x = malloc((size_t)cols * sizeof *x), *ya = malloc((size_t)rows * sizeof *ya),
          *yb = malloc((size_t)rows * sizeof *yb);
    for (int j = 0; j < cols; j++) x[j] = sinf((float)j * 0.7f);
    kb_mv ma = {(uint32_t)type, W, rb, rows, ya, r16 ? KB_LAYOUT_R16 : KB_LAYOUT_ROWS};
    kb_mv mb = {(uint32_t)type, WB, rb, rows, yb, br16 ? KB_LAYOUT_R16 : KB_LAYOUT_ROWS};
    double *ta = malloc((size_t)reps * sizeof *ta), *tb = malloc((size_t)reps * sizeof *tb),
           *rt = malloc((size_t)reps * sizeof *rt);
    for (int r = 0; r < reps; r++) {
        unsigned long long t0 = __rdtsc();
        A_kb_matvec_multi(&ma, 1, cols, x);
        unsigned long long t1 = __rdtsc();
        B_kb_matvec_multi(&mb, 1, cols, x);
        unsigned long long t2 = __rdtsc();
        ta[r] = (double)(t1 - t0);
        tb[r] = (double)(t2 - t1);
        rt[r] = tb[r] / ta[r];
    }
    int same = memcmp(ya, yb, (size_t)rows * sizeof *ya) == 0;
    double dmax = 0, ymax = 0;
    for (int i = 0; i < rows; i++) {
        dmax = fmax(dmax, fabs((double)yb[i] - ya[i]));
        ymax = fmax(ymax, fabs((double)ya[i]));
    }
    char what[64];
    if (br16 == r16) snprintf(what, sizeof what, "%s", same ? "the same bits" : "DIFFERS");
    else snprintf(what, sizeof what, "max |yb - ya| / max |ya| %.2g", ymax > 0 ? dmax / ymax : dmax);
    qsort(ta, (size_t)reps, sizeof *ta, cmpd);
    qsort(tb, (size_t)reps, sizeof *tb, cmpd);
    qsort(rt, (size_t)reps, sizeof *rt, cmpd);
    double nblk = (double)rows * cols / 32 / kb_pool_threads(); /* row-blocks per thread */
    printf("type %d, %d x %d, r16 %d (B %d), %d threads: TSC cycles per call (median of %d) A %.0f B %.0f; per row-block and thread A %.2f "
           "B %.2f; B/A %.3f; y %s\n",
           type, rows, cols, r16, br16, kb_pool_threads(), reps, ta[reps / 2], tb[reps / 2], ta[reps / 2] / nblk,
           tb[reps / 2] / nblk, rt[reps / 2], what);
    free(W);
    free(WB);
    free(x);
    free(ya);
    free(yb);
    free(ta);
    free(tb);
    free(rt);
    return same || br16 != r16 ? 0 : 1;
}
