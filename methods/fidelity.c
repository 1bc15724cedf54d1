/* fidelity.c - per-step fidelity instruments (fidelity.h, methods.md §10).
 * Plain double-precision loops: an instrument, not a hot path. */
#include "methods/fidelity.h"

#include <math.h>
#include <stdlib.h>

static int slot_of_pos(const kb_kvstream *s, int32_t pos) {
    int lo = 0, hi = s->n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (s->pos[mid] == pos) return mid;
        if (s->pos[mid] < pos) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

typedef struct scored {
    double x;
    int i;
} scored;

static int cmp_ranked(const void *pa, const void *pb) {
    const scored *a = pa, *b = pb;
    if (a->x > b->x) return -1;
    if (a->x < b->x) return 1;
    return (a->i > b->i) - (a->i < b->i);
}

int fidelity_step(const kb_method_ops *ops, void *state, const kb_account *acc, const float *q,
                  const float *out, const kb_kvstream *full, int Hq, int Hkv, int D,
                  kb_fidelity *f, kb_err *err) {
    memset(f, 0, sizeof *f);
    int G = Hq / Hkv;
    double scale = 1.0 / sqrt((double)D);
    float *kr = KB_MALLOC((size_t)D * sizeof(float)), *vr = KB_MALLOC((size_t)D * sizeof(float));
    int rc = 0;
    for (int g = 0; g < Hkv && !rc; g++) {
        const kb_kvstream *s = &full[g];
        int n = s->n;
        double *lg = KB_MALLOC(((size_t)G * n + 1) * sizeof(double));
        for (int j = 0; j < n; j++) {
            kvstream_get_f32(s, j, kr, NULL);
            for (int a = 0; a < G; a++) {
                const float *qh = q + (size_t)(g * G + a) * D;
                double dot = 0;
                for (int d = 0; d < D; d++) dot += (double)qh[d] * kr[d];
                lg[(size_t)a * n + j] = dot * scale;
            }
        }
        char *att = KB_MALLOC((size_t)n + 1);
        scored *ranked = KB_MALLOC(((size_t)n + 1) * sizeof *ranked);
        double *ostar = KB_MALLOC((size_t)D * sizeof(double));
        for (int a = 0; a < G && !rc; a++) {
            int h = g * G + a;
            double *x = lg + (size_t)a * n;
            /* the attended tokens of this head, as slots of the history */
            memset(att, 0, (size_t)n);
            int k = 0;
            if (acc->sel_streams > 0) {
                int row = acc->sel_per_query_head ? h : g;
                const int32_t *rp = acc->selected_pos + (size_t)row * acc->sel_k;
                for (int t = 0; t < acc->sel_k && rp[t] >= 0; t++) {
                    int sl = slot_of_pos(s, rp[t]);
                    if (sl < 0) {
                        rc = kb_fail(err, KB_EINPUT, "fidelity: position %d attended by head %d is not in the history",
                                     rp[t], h);
                        break;
                    }
                    if (!att[sl]) k++;
                    att[sl] = 1;
                }
            } else {
                int rows;
                ops->decode_cache(state, 0, &rows);
                const kb_kvstream *c = ops->decode_cache(state, rows == Hq ? h : g, NULL);
                for (int t = 0; t < c->n; t++) {
                    int sl = slot_of_pos(s, c->pos[t]);
                    if (sl < 0) {
                        rc = kb_fail(err, KB_EINPUT, "fidelity: position %d attended by head %d is not in the history",
                                     c->pos[t], h);
                        break;
                    }
                    if (!att[sl]) k++;
                    att[sl] = 1;
                }
            }
            if (rc) break;
            /* exact softmax and output */
            double mx = -INFINITY, sum = 0, mass = 0;
            for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
            for (int d = 0; d < D; d++) ostar[d] = 0;
            for (int j = 0; j < n; j++) sum += exp(x[j] - mx);
            for (int j = 0; j < n; j++) {
                double p = exp(x[j] - mx) / sum;
                if (att[j]) mass += p;
                kvstream_get_f32(s, j, NULL, vr);
                for (int d = 0; d < D; d++) ostar[d] += p * vr[d];
            }
            /* oracle top-k by exact score (higher first, ties to the lower slot) */
            int hit = 0;
            if (k > 0) {
                for (int j = 0; j < n; j++) {
                    ranked[j].x = x[j];
                    ranked[j].i = j;
                }
                qsort(ranked, (size_t)n, sizeof *ranked, cmp_ranked);
                for (int t = 0; t < k && t < n; t++) hit += att[ranked[t].i];
            }
            double num = 0, den = 0;
            for (int d = 0; d < D; d++) {
                double e = out[(size_t)h * D + d] - ostar[d];
                num += e * e;
                den += ostar[d] * ostar[d];
            }
            f->recall += k > 0 ? (double)hit / k : 1.0;
            f->mass += mass;
            f->rel_err += den > 0 ? sqrt(num / den) : sqrt(num);
            f->attended += k;
        }
        free(lg);
        free(att);
        free(ranked);
        free(ostar);
    }
    free(kr);
    free(vr);
    if (rc) return rc;
    f->recall /= Hq;
    f->mass /= Hq;
    f->rel_err /= Hq;
    f->attended /= Hq;
    return 0;
}

double fidelity_kl(const float *ref, const float *x, int n) {
    double mr = -INFINITY, mx = -INFINITY, sr = 0, sx = 0;
    for (int i = 0; i < n; i++) {
        mr = ref[i] > mr ? ref[i] : mr;
        mx = x[i] > mx ? x[i] : mx;
    }
    for (int i = 0; i < n; i++) {
        sr += exp(ref[i] - mr);
        sx += exp(x[i] - mx);
    }
    double lzr = mr + log(sr), lzx = mx + log(sx), kl = 0;
    for (int i = 0; i < n; i++) {
        double lp = ref[i] - lzr, lq = x[i] - lzx;
        if (lp == -INFINITY) continue; /* p = 0: 0 log 0 = 0 (not 0 * inf = NaN) */
        kl += exp(lp) * (lp - lq);
    }
    /* rounding can leave a tiny negative; a NaN (a NaN logit) stays NaN, not
     * a perfect 0 */
    return isnan(kl) ? kl : kl > 0 ? kl : 0;
}

/* First index of the largest value; -1 if any value is NaN (logits with a
 * NaN have no meaningful argmax). */
static int argmax_nan(const float *a, int n) {
    int m = -1;
    for (int i = 0; i < n; i++) {
        if (isnan(a[i])) return -1;
        if (m < 0 || a[i] > a[m]) m = i;
    }
    return m;
}

int fidelity_top1_agree(const float *a, const float *b, int n) {
    int ia = argmax_nan(a, n);
    return ia >= 0 && ia == argmax_nan(b, n);
}
