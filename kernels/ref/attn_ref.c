/* attn_ref.c - reference dense attention: plain loops, f32 storage read
 * through kvstream_get_f32, double accumulation. Slow on purpose; the fast
 * kernels are tested against these. */
#include <math.h>
#include <stdlib.h>

#include "kernels/attn_impl.h"

void kb_ref_qk_scores(const float *q, int H, int G, const kb_kvstream *s, int n, float scale, float *out,
                      int ldo) {
    int D = s[0].D;
    float *k = KB_MALLOC((size_t)D * sizeof(float));
    for (int h = 0; h < H; h++)
        for (int j = 0; j < n; j++) {
            kvstream_get_f32(&s[h], j, k, NULL);
            for (int g = 0; g < G; g++) {
                const float *qg = q + ((size_t)h * G + g) * D;
                double acc = 0;
                for (int d = 0; d < D; d++) acc += (double)qg[d] * k[d];
                out[((size_t)h * G + g) * ldo + j] = (float)acc * scale;
            }
        }
    free(k);
}

/* out[D] = softmax(q . K[0..n) * scale) . V[0..n) for one query row. */
static void attend_one(const float *q, const kb_kvstream *s, int n, float scale, float *out) {
    int D = s->D;
    double *p = KB_MALLOC((size_t)(n ? n : 1) * sizeof(double));
    double *acc = KB_CALLOC((size_t)D, sizeof(double));
    float *k = KB_MALLOC((size_t)D * sizeof(float)), *v = KB_MALLOC((size_t)D * sizeof(float));
    double mx = -INFINITY;
    for (int j = 0; j < n; j++) {
        kvstream_get_f32(s, j, k, NULL);
        double dot = 0;
        for (int d = 0; d < D; d++) dot += (double)q[d] * k[d];
        p[j] = dot * scale;
        if (p[j] > mx) mx = p[j];
    }
    double sum = 0;
    for (int j = 0; j < n; j++) sum += (p[j] = exp(p[j] - mx));
    for (int j = 0; j < n; j++) {
        kvstream_get_f32(s, j, NULL, v);
        for (int d = 0; d < D; d++) acc[d] += p[j] / sum * v[d];
    }
    for (int d = 0; d < D; d++) out[d] = n ? (float)acc[d] : 0.0f;
    free(p);
    free(acc);
    free(k);
    free(v);
}

void kb_ref_attn_dense(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out) {
    for (int g = 0; g < G; g++) attend_one(q + (size_t)g * s->D, s, n, scale, out + (size_t)g * s->D);
}

void kb_ref_attn_causal(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo) {
    for (int i = 0; i < nq; i++)
        for (int g = 0; g < G; g++)
            attend_one(Q + (size_t)i * ldq + (size_t)g * s->D, s, n_prior + i + 1, scale,
                       out + (size_t)i * ldo + (size_t)g * s->D);
}
