/* hyb_state.h - the state shared by the hybrid-selection microbenchmarks
 * (select_cold.c, select_vs_attend.c): nh KV heads of n random f16 keys and
 * values (a per-dim bias so that some dims stand out, as in real keys),
 * their page summaries (pages of p) and G query heads per KV head, from one
 * fixed random sequence; and the medians they report. Header-only, for
 * programs built by hand; not part of the build or the tests. */
#ifndef KB_MICROBENCH_HYB_STATE_H
#define KB_MICROBENCH_HYB_STATE_H

#include <math.h>
#include <stdlib.h>

#include "kernels/kernels.h"
#include "kernels/kvstream.h"
#include "kernels/select.h"

static unsigned hyb_rng = 12345;
static float nrand(void) { /* sum of 12 uniforms - 6: mean 0, variance 1 */
    double u = 0;
    for (int i = 0; i < 12; i++) {
        hyb_rng = hyb_rng * 1103515245u + 12345u;
        u += ((hyb_rng >> 8) & 0xffffff) / 16777216.0;
    }
    return (float)(u - 6);
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *x, int n) {
    qsort(x, (size_t)n, sizeof *x, cmp_d);
    return x[n / 2];
}

/* The streams s[nh] and summaries pg[nh] (calloc'd here) and the queries
 * q[nh][G][D] (malloc'd); D <= 256. */
static void hyb_state(int nh, int n, int G, int D, int p, const kb_kernels *kk, kb_kvstream **s_out,
                      kb_pages **pg_out, float **q_out) {
    kb_kvstream *s = calloc((size_t)nh, sizeof *s);
    kb_pages *pg = calloc((size_t)nh, sizeof *pg);
    float bias[256], kr[256], vr[256];
    for (int d = 0; d < D; d++) bias[d] = 2 * nrand();
    for (int i = 0; i < nh; i++) {
        kvstream_init(&s[i], KB_F16, D, n);
        for (int j = 0; j < n; j++) {
            for (int d = 0; d < D; d++) {
                kr[d] = nrand() + bias[d];
                vr[d] = nrand();
            }
            kvstream_append_f32(&s[i], kr, vr, j);
        }
        pages_init(&pg[i], p, D);
        pages_sync(&pg[i], &s[i], kk);
    }
    float *q = malloc((size_t)nh * G * D * sizeof *q);
    for (size_t i = 0; i < (size_t)nh * G * D; i++) q[i] = nrand() * (1 + fabsf(bias[i % D]));
    *s_out = s;
    *pg_out = pg;
    *q_out = q;
}

#endif
