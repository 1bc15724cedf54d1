/* select_ref.c - reference selection building blocks (select.h): each
 * definition of methods.md written out literally with plain loops, double
 * accumulation, K/V read through kvstream_get_f32, and full sorts for top-k.
 * Slow on purpose; the fast versions (kernels/cpu/select_cpu.c) and the
 * methods' tests are checked against these. */
#include <math.h>
#include <stdlib.h>

#include "kernels/select.h"

/* ---- gathered attention ---- */

void kb_ref_attn_gather(const float *q, int G, const kb_kvstream *s, const int32_t *idx, int k,
                        float scale, float *out) {
    int D = s->D;
    double *p = KB_MALLOC((size_t)(k > 0 ? k : 1) * sizeof(double));
    double *acc = KB_MALLOC((size_t)D * sizeof(double));
    float *kr = KB_MALLOC((size_t)D * sizeof(float)), *vr = KB_MALLOC((size_t)D * sizeof(float));
    for (int g = 0; g < G; g++) {
        const float *qg = q + (size_t)g * D;
        double mx = -INFINITY;
        int any = 0;
        for (int t = 0; t < k; t++) {
            if (idx[t] < 0) continue;
            kvstream_get_f32(s, idx[t], kr, NULL);
            double dot = 0;
            for (int d = 0; d < D; d++) dot += (double)qg[d] * kr[d];
            p[t] = dot * scale;
            if (p[t] > mx) mx = p[t];
            any = 1;
        }
        for (int d = 0; d < D; d++) acc[d] = 0;
        if (any) {
            double sum = 0;
            for (int t = 0; t < k; t++)
                if (idx[t] >= 0) sum += (p[t] = exp(p[t] - mx));
            for (int t = 0; t < k; t++) {
                if (idx[t] < 0) continue;
                kvstream_get_f32(s, idx[t], NULL, vr);
                for (int d = 0; d < D; d++) acc[d] += p[t] / sum * vr[d];
            }
        }
        for (int d = 0; d < D; d++) out[(size_t)g * D + d] = (float)acc[d];
    }
    free(p);
    free(acc);
    free(kr);
    free(vr);
}

/* ---- SnapKV window scores ---- */

void kb_ref_snapkv_scores(const float *Q, int nq, int ldq, int G, const int32_t *qpos,
                          const kb_kvstream *s, int n, int n_prefix, float scale, float *out,
                          int ldo) {
    int D = s->D;
    double *logit = KB_MALLOC((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *acc = KB_CALLOC((size_t)(n_prefix > 0 ? n_prefix : 1), sizeof(double));
    float *kr = KB_MALLOC((size_t)D * sizeof(float));
    for (int g = 0; g < G; g++) {
        for (int j = 0; j < n_prefix; j++) acc[j] = 0;
        for (int i = 0; i < nq; i++) {
            const float *q = Q + (size_t)i * ldq + (size_t)g * D;
            double mx = -INFINITY;
            for (int j = 0; j < n; j++) {
                if (s->pos[j] > qpos[i]) {
                    logit[j] = -INFINITY; /* causal mask by position */
                    continue;
                }
                kvstream_get_f32(s, j, kr, NULL);
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)q[d] * kr[d];
                logit[j] = dot * scale;
                if (logit[j] > mx) mx = logit[j];
            }
            if (mx == -INFINITY) continue; /* the row sees nothing */
            double sum = 0;
            for (int j = 0; j < n; j++) sum += logit[j] == -INFINITY ? 0 : exp(logit[j] - mx);
            for (int j = 0; j < n_prefix; j++)
                if (logit[j] != -INFINITY) acc[j] += exp(logit[j] - mx) / sum;
        }
        for (int j = 0; j < n_prefix; j++) out[(size_t)g * ldo + j] = (float)acc[j];
    }
    free(logit);
    free(acc);
    free(kr);
}

/* ---- pooling ---- */

void kb_ref_pool1d(const float *in, int n, int K, int mode, float *out) {
    int h = K / 2;
    for (int j = 0; j < n; j++) {
        if (mode == 0) {
            float m = -INFINITY; /* padding is -inf: it never wins */
            for (int t = j - h; t <= j + h; t++)
                if (t >= 0 && t < n && in[t] > m) m = in[t];
            out[j] = m;
        } else {
            double sum = 0; /* zero padding, divided by K */
            for (int t = j - h; t <= j + h; t++)
                if (t >= 0 && t < n) sum += in[t];
            out[j] = (float)(sum / K);
        }
    }
}

/* ---- page min/max ---- */

void kb_ref_page_minmax(const kb_kvstream *s, int from, int to, int p, void *kmax, void *kmin,
                        int ld) {
    int D = s->D;
    kb_dtype t = s->dtype;
    float *kr = KB_MALLOC((size_t)D * sizeof(float));
    for (int j = from; j < to; j++) {
        kvstream_get_f32(s, j, kr, NULL);
        size_t P = (size_t)(j / p);
        for (int d = 0; d < D; d++) {
            size_t e = (size_t)d * ld + P;
            if (j % p == 0 || kr[d] > kb_elem_get(kmax, t, e)) kb_elem_set(kmax, t, e, kr[d]);
            if (j % p == 0 || kr[d] < kb_elem_get(kmin, t, e)) kb_elem_set(kmin, t, e, kr[d]);
        }
    }
    free(kr);
}

/* ---- QUEST page bound ---- */

void kb_ref_quest_scores(const float *q, int D, const void *kmax, const void *kmin, kb_dtype dt, int ld,
                         int npages, float *out) {
    for (int P = 0; P < npages; P++) {
        double acc = 0;
        for (int d = 0; d < D; d++) {
            double a = (double)q[d] * kb_elem_get(kmax, dt, (size_t)d * ld + P);
            double b = (double)q[d] * kb_elem_get(kmin, dt, (size_t)d * ld + P);
            acc += a > b ? a : b;
        }
        out[P] = (float)acc;
    }
}

/* ---- hybrid approximate scores ---- */

static const double *g_sort_keys; /* qsort has no context in C11; references are not reentrant */

static int cmp_desc_then_idx(const void *a, const void *b) {
    int i = *(const int32_t *)a, j = *(const int32_t *)b;
    double x = g_sort_keys[i], y = g_sort_keys[j];
    if (isnan(x)) x = -INFINITY;
    if (isnan(y)) y = -INFINITY;
    if (x > y) return -1;
    if (x < y) return 1;
    return (i > j) - (i < j);
}

static int cmp_int(const void *a, const void *b) {
    int32_t i = *(const int32_t *)a, j = *(const int32_t *)b;
    return (i > j) - (i < j);
}

/* Top-k of double keys, ascending output. */
static int topk_double(const double *x, int n, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    int32_t *all = KB_MALLOC((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) all[i] = i;
    g_sort_keys = x;
    qsort(all, (size_t)n, sizeof(int32_t), cmp_desc_then_idx);
    memcpy(idx, all, (size_t)k * sizeof(int32_t));
    qsort(idx, (size_t)k, sizeof(int32_t), cmp_int);
    free(all);
    return k;
}

float kb_hybrid_temperature(const float *q, int D, const int32_t *dims, int r) {
    double sel = 0, all = 0;
    for (int t = 0; t < r; t++) sel += fabs((double)q[dims[t]]);
    for (int d = 0; d < D; d++) all += fabs((double)q[d]);
    if (!(sel > 0) || !(all > 0)) return 1.0f;
    return (float)sqrt((double)D * sel / all);
}

void kb_ref_hybrid_scores(const float *q, int G, int D, int r, const void *kmax,
                          const void *kmin, int ld, const kb_kvstream *s, int n, int p,
                          float *page_score, float *head_w, int32_t *dims_out) {
    if (r > D) r = D;
    if (r < 1) r = 1;
    int npages = (n + p - 1) / p;
    double *absmean = KB_MALLOC((size_t)D * sizeof(double));
    int32_t *dims = KB_MALLOC((size_t)D * sizeof(int32_t));
    int *pos_sign = KB_MALLOC((size_t)D * sizeof(int));
    for (int d = 0; d < D; d++) {
        double a = 0, sum = 0;
        for (int g = 0; g < G; g++) {
            a += fabs((double)q[(size_t)g * D + d]);
            sum += q[(size_t)g * D + d];
        }
        absmean[d] = a / G;
        pos_sign[d] = sum > 0; /* a sum of exactly 0 counts as negative */
    }
    topk_double(absmean, D, r, dims);
    double *pg = KB_MALLOC((size_t)(npages > 0 ? npages : 1) * sizeof(double));
    double *w = KB_MALLOC((size_t)(n > 0 ? n : 1) * sizeof(double));
    double *grp = KB_CALLOC((size_t)(n > 0 ? n : 1), sizeof(double));
    float *kr = KB_MALLOC((size_t)D * sizeof(float));
    for (int g = 0; g < G; g++) {
        const float *qg = q + (size_t)g * D;
        for (int P = 0; P < npages; P++) {
            if (p == 1) kvstream_get_f32(s, P, kr, NULL);
            double acc = 0;
            for (int t = 0; t < r; t++) {
                int d = dims[t];
                double kv = p == 1 ? kr[d] : kb_elem_get(pos_sign[d] ? kmax : kmin, s->dtype, (size_t)d * ld + P);
                acc += (double)qg[d] * kv;
            }
            pg[P] = acc;
        }
        double tau = kb_hybrid_temperature(qg, D, dims, r);
        /* broadcast each page score to its slots (truncated to n), softmax over slots */
        double mxv = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) {
            w[j] = pg[j / p] / tau;
            if (w[j] > mxv) mxv = w[j];
        }
        for (int j = 0; j < n; j++) sum += (w[j] = exp(w[j] - mxv));
        for (int j = 0; j < n; j++) {
            w[j] /= sum;
            grp[j] += w[j] / G;
        }
        if (head_w)
            for (int P = 0; P < npages; P++) head_w[(size_t)g * npages + P] = (float)w[(size_t)P * p];
    }
    for (int P = 0; P < npages; P++) page_score[P] = (float)grp[(size_t)P * p];
    if (dims_out) memcpy(dims_out, dims, (size_t)r * sizeof(int32_t));
    free(absmean);
    free(dims);
    free(pos_sign);
    free(pg);
    free(w);
    free(grp);
    free(kr);
}

/* ---- deterministic top-k ---- */

int kb_ref_topk(const float *x, int n, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    double *xd = KB_MALLOC((size_t)n * sizeof(double));
    for (int i = 0; i < n; i++) xd[i] = x[i];
    int c = topk_double(xd, n, k, idx);
    free(xd);
    return c;
}

int kb_ref_topk_pages(const float *page_score, int n, int p, int k, int32_t *idx) {
    float *x = KB_MALLOC((size_t)(n > 0 ? n : 1) * sizeof(float));
    for (int j = 0; j < n; j++) x[j] = page_score[j / p];
    int c = kb_ref_topk(x, n, k, idx);
    free(x);
    return c;
}
