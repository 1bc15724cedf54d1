/* hyb_state.h - the state shared by the hybrid-selection microbenchmarks
 * (select_cold.c, select_vs_attend.c): nh KV heads of n random f16 keys and
 * values (a per-dim bias so that some dims stand out, as in real keys),
 * their page summaries (pages of p) and G query heads per KV head, from one
 * fixed random sequence; the weights they read between layers to evict it,
 * as a decode does; the two together (hyb_bench) with what a round does
 * before each layer; and the medians they report. Header-only, for
 * programs built by hand; not part of the build or the tests. */
#ifndef KB_MICROBENCH_HYB_STATE_H
#define KB_MICROBENCH_HYB_STATE_H

#include <immintrin.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

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

/* wmb MB of stand-in weights, read 1/L of them before each of L layers
 * (hyb_wbuf_read) into a sum that hyb_wbuf_done turns into an always-false
 * test, so that the reads are not dropped. */
typedef struct hyb_wbuf {
    __m256 *w, sink;
    size_t wl; /* vectors read per layer */
} hyb_wbuf;
static void hyb_wbuf_init(hyb_wbuf *b, int wmb, int L) {
    size_t wn = ((size_t)wmb << 20) / sizeof(__m256);
    b->wl = wn / (size_t)L;
    b->w = aligned_alloc(32, (wn + 1) * sizeof *b->w);
    memset(b->w, 1, (wn + 1) * sizeof *b->w);
    b->sink = _mm256_setzero_ps();
}
static void hyb_wbuf_read(hyb_wbuf *b, int l) {
    for (size_t j = (size_t)l * b->wl; j < (size_t)(l + 1) * b->wl; j++) b->sink = _mm256_add_ps(b->sink, b->w[j]);
}
static int hyb_wbuf_done(hyb_wbuf *b) { /* 1 never in practice; frees the buffer */
    float sk[8];
    _mm256_storeu_ps(sk, b->sink);
    free(b->w);
    return sk[0] == 12345.0f;
}

/* Everything both programs set up: the state of L layers x H KV heads
 * (hyb_state), a page-score buffer for one select, and the weights read
 * between layers. hyb_layer_start(b, l) is what a round does before layer l:
 * read its slice of the weights and nudge its queries (so no round repeats
 * the previous one's arithmetic on cached values). hyb_bench_done frees it
 * all and returns hyb_wbuf_done's never-true test. */
typedef struct hyb_bench {
    int nh, hgd; /* KV heads in all; query floats per layer */
    kb_kvstream *s;
    kb_pages *pg;
    float *q, *ps;
    hyb_wbuf wb;
} hyb_bench;
static void hyb_bench_init(hyb_bench *b, int L, int H, int n, int G, int D, int p, int wmb, const kb_kernels *kk) {
    b->nh = L * H;
    b->hgd = H * G * D;
    hyb_state(b->nh, n, G, D, p, kk, &b->s, &b->pg, &b->q);
    b->ps = malloc((size_t)((n + p - 1) / p) * sizeof *b->ps);
    hyb_wbuf_init(&b->wb, wmb, L);
}
static void hyb_layer_start(hyb_bench *b, int l) {
    hyb_wbuf_read(&b->wb, l);
    for (int u = 0; u < b->hgd; u++) b->q[(size_t)l * b->hgd + u] *= 1.0000001f;
}
static int hyb_bench_done(hyb_bench *b) {
    for (int i = 0; i < b->nh; i++) {
        kvstream_free(&b->s[i]);
        pages_free(&b->pg[i]);
    }
    free(b->s), free(b->pg), free(b->q), free(b->ps);
    return hyb_wbuf_done(&b->wb);
}

#endif
