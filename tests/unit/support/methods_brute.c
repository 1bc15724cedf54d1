/* methods_brute.c - brute-force references for the method tests
 * (methods_brute.h). Written from methods.md, independently of methods/ and
 * kernels/: nothing here calls the library except dtype rounding. */
#include "methods_brute.h"

#include <math.h>
#include <stdlib.h>

void br_hist_init(br_hist *h, int Hq, int Hkv, int D) {
    memset(h, 0, sizeof *h);
    h->Hq = Hq;
    h->Hkv = Hkv;
    h->D = D;
    h->G = Hq / Hkv;
}

void br_hist_free(br_hist *h) {
    free(h->K);
    free(h->V);
    memset(h, 0, sizeof *h);
}

static double round_to(kb_dtype t, float x) {
    if (t == KB_F16) return kb_f16_to_f32(kb_f32_to_f16(x));
    if (t == KB_BF16) return kb_bf16_to_f32(kb_f32_to_bf16(x));
    return x;
}

void br_hist_push(br_hist *h, const float *k, const float *v, kb_dtype dtype) {
    if (h->n == h->cap) {
        h->cap = h->cap ? 2 * h->cap : 256;
        h->K = realloc(h->K, (size_t)h->cap * h->Hkv * h->D * sizeof(double));
        h->V = realloc(h->V, (size_t)h->cap * h->Hkv * h->D * sizeof(double));
    }
    size_t off = (size_t)h->n * h->Hkv * h->D;
    for (int i = 0; i < h->Hkv * h->D; i++) {
        h->K[off + i] = round_to(dtype, k[i]);
        h->V[off + i] = round_to(dtype, v[i]);
    }
    h->n++;
}

static const double *g_score;
static int cmp_desc(const void *a, const void *b) {
    int i = *(const int *)a, j = *(const int *)b;
    double x = g_score[i], y = g_score[j];
    if (x > y) return -1;
    if (x < y) return 1;
    return i - j;
}
static int cmp_int(const void *a, const void *b) { return *(const int *)a - *(const int *)b; }

void br_sort_desc(int *ids, int n, const double *score) {
    g_score = score;
    qsort(ids, (size_t)n, sizeof(int), cmp_desc);
}

int br_topk(const double *score, int n, int k, int *out) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    int *ids = malloc((size_t)n * sizeof(int));
    for (int i = 0; i < n; i++) ids[i] = i;
    br_sort_desc(ids, n, score);
    memcpy(out, ids, (size_t)k * sizeof(int));
    qsort(out, (size_t)k, sizeof(int), cmp_int);
    free(ids);
    return k;
}

static double dotq(const float *q, const double *k, int D) {
    double s = 0;
    for (int d = 0; d < D; d++) s += (double)q[d] * k[d];
    return s;
}

void br_attend(const br_hist *h, int g, const float *q, const int *tok, int n, double *out) {
    int D = h->D;
    for (int d = 0; d < D; d++) out[d] = 0;
    if (n <= 0) return;
    double *w = malloc((size_t)n * sizeof(double)), mx = -INFINITY, sum = 0;
    for (int j = 0; j < n; j++) {
        w[j] = dotq(q, br_k(h, tok[j], g), D) / sqrt((double)D);
        if (w[j] > mx) mx = w[j];
    }
    for (int j = 0; j < n; j++) sum += (w[j] = exp(w[j] - mx));
    for (int j = 0; j < n; j++)
        for (int d = 0; d < D; d++) out[d] += w[j] / sum * br_v(h, tok[j], g)[d];
    free(w);
}

int br_snap_keep(const br_hist *h, int g, const int *heads, int nh, int agg, const float *qwin,
                 const int *qpos, int Wq, int W, const int *list, int n, int budget, int K,
                 int avg_pool, int *kept, double *score, int *n_prefix) {
    int D = h->D;
    if (n_prefix) *n_prefix = 0;
    if (n <= budget) {
        for (int j = 0; j < n; j++) kept[j] = list[j];
        return n;
    }
    int Wo = W < Wq ? W : Wq;
    if (Wo > n) Wo = n;
    if (Wo > budget) Wo = budget;
    int np = n - Wo, nkeep = budget - Wo;
    double *acc = calloc((size_t)np + 1, sizeof(double));
    double *lg = malloc((size_t)n * sizeof(double));
    for (int a = 0; a < nh; a++) {
        for (int i = Wq - Wo; i < Wq; i++) {
            const float *q = qwin + ((size_t)i * h->Hq + heads[a]) * D;
            double mx = -INFINITY, sum = 0;
            for (int j = 0; j < n; j++) {
                lg[j] = list[j] <= qpos[i] ? dotq(q, br_k(h, list[j], g), D) / sqrt((double)D) : -INFINITY;
                if (lg[j] > mx) mx = lg[j];
            }
            for (int j = 0; j < n; j++) sum += lg[j] == -INFINITY ? 0 : exp(lg[j] - mx);
            for (int j = 0; j < np; j++)
                if (lg[j] != -INFINITY) acc[j] += exp(lg[j] - mx) / sum;
        }
    }
    if (agg == 1)
        for (int j = 0; j < np; j++) acc[j] /= nh;
    double *pooled = malloc(((size_t)np + 1) * sizeof(double));
    for (int j = 0; j < np; j++) {
        double m = -INFINITY, s = 0;
        for (int t = j - K / 2; t <= j + K / 2; t++) {
            if (t < 0 || t >= np) continue;
            if (acc[t] > m) m = acc[t];
            s += acc[t];
        }
        pooled[j] = avg_pool ? s / K : m;
    }
    int *ids = malloc(((size_t)np + 1) * sizeof(int));
    int c = br_topk(pooled, np, nkeep, ids);
    for (int t = 0; t < c; t++) kept[t] = list[ids[t]];
    for (int t = 0; t < Wo; t++) kept[c + t] = list[np + t];
    if (score) memcpy(score, pooled, (size_t)np * sizeof(double));
    if (n_prefix) *n_prefix = np;
    free(acc);
    free(lg);
    free(pooled);
    free(ids);
    return c + Wo;
}

int br_hybrid(const br_hist *h, int g, const float *q, int nh, const int *list, int n, int p,
              int r, int k, int local, int *sel, double *slot_score, double *head_w) {
    int D = h->D, np = (n + p - 1) / p;
    if (k > n) k = n;
    double *kmax = malloc((size_t)np * D * sizeof(double)), *kmin = malloc((size_t)np * D * sizeof(double));
    for (int P = 0; P < np; P++)
        for (int d = 0; d < D; d++) {
            kmax[(size_t)P * D + d] = -INFINITY;
            kmin[(size_t)P * D + d] = INFINITY;
        }
    for (int j = 0; j < n; j++) {
        const double *kr = br_k(h, list[j], g);
        for (int d = 0; d < D; d++) {
            double *mx = &kmax[(size_t)(j / p) * D + d], *mn = &kmin[(size_t)(j / p) * D + d];
            if (kr[d] > *mx) *mx = kr[d];
            if (kr[d] < *mn) *mn = kr[d];
        }
    }
    double *absmean = calloc((size_t)D, sizeof(double)), *qsum = calloc((size_t)D, sizeof(double));
    for (int a = 0; a < nh; a++)
        for (int d = 0; d < D; d++) {
            absmean[d] += fabs(q[(size_t)a * D + d]);
            qsum[d] += q[(size_t)a * D + d];
        }
    for (int d = 0; d < D; d++) absmean[d] /= nh; /* exact sum of floats, one rounding */
    int *dims = malloc((size_t)D * sizeof(int));
    int nr = br_topk(absmean, D, r, dims);
    double *grp = calloc((size_t)n + 1, sizeof(double)), *w = malloc(((size_t)n + 1) * sizeof(double));
    for (int a = 0; a < nh; a++) {
        const float *qa = q + (size_t)a * D;
        double num = 0, den = 0;
        for (int t = 0; t < nr; t++) num += fabs(qa[dims[t]]);
        for (int d = 0; d < D; d++) den += fabs(qa[d]);
        double tau = num > 0 && den > 0 ? sqrt(D * num / den) : 1.0;
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) {
            int P = j / p;
            double s = 0;
            for (int t = 0; t < nr; t++) {
                int d = dims[t];
                s += qa[d] * (qsum[d] > 0 ? kmax[(size_t)P * D + d] : kmin[(size_t)P * D + d]);
            }
            w[j] = s / tau;
            if (w[j] > mx) mx = w[j];
        }
        for (int j = 0; j < n; j++) sum += (w[j] = exp(w[j] - mx));
        for (int j = 0; j < n; j++) {
            w[j] /= sum;
            grp[j] += w[j] / nh;
            if (head_w) head_w[(size_t)a * n + j] = w[j];
        }
    }
    int forced = local < k ? local : k;
    for (int j = n - forced; j < n; j++) grp[j] = INFINITY;
    int c = br_topk(grp, n, k, sel);
    if (slot_score) memcpy(slot_score, grp, (size_t)n * sizeof(double));
    free(kmax);
    free(kmin);
    free(absmean);
    free(qsum);
    free(dims);
    free(grp);
    free(w);
    return c;
}

int br_quest(const br_hist *h, int g, const float *q, int nh, int agg, const int *list, int n,
             int P, int npages_sel, int *sel, double *page_score) {
    int D = h->D, np = (n + P - 1) / P;
    double *bound = calloc((size_t)np + 1, sizeof(double));
    for (int pg = 0; pg < np; pg++) {
        for (int a = 0; a < nh; a++) {
            double s = 0;
            for (int d = 0; d < D; d++) {
                double mx = -INFINITY, mn = INFINITY;
                for (int j = pg * P; j < n && j < pg * P + P; j++) {
                    double x = br_k(h, list[j], g)[d];
                    if (x > mx) mx = x;
                    if (x < mn) mn = x;
                }
                double u = q[(size_t)a * D + d] * mx, v = q[(size_t)a * D + d] * mn;
                s += u > v ? u : v;
            }
            bound[pg] += agg == 2 ? s / nh : s;
        }
    }
    bound[np - 1] = INFINITY; /* the current token's page */
    int *pages = malloc(((size_t)np + 1) * sizeof(int));
    int npk = br_topk(bound, np, npages_sel, pages);
    int c = 0;
    for (int t = 0; t < npk; t++)
        for (int j = pages[t] * P; j < n && j < pages[t] * P + P; j++) sel[c++] = j;
    if (page_score) memcpy(page_score, bound, (size_t)np * sizeof(double));
    free(bound);
    free(pages);
    return c;
}

int br_exact_topk(const br_hist *h, int g, const float *q, int nh, int agg, const int *list,
                  int n, int k, int *sel, double *score) {
    int D = h->D;
    double *sc = calloc((size_t)n + 1, sizeof(double)), *lg = malloc(((size_t)n + 1) * sizeof(double));
    for (int a = 0; a < nh; a++) {
        double mx = -INFINITY, sum = 0;
        for (int j = 0; j < n; j++) {
            lg[j] = dotq(q + (size_t)a * D, br_k(h, list[j], g), D) / sqrt((double)D);
            if (lg[j] > mx) mx = lg[j];
        }
        if (agg == 0) {
            memcpy(sc, lg, (size_t)n * sizeof(double));
            continue;
        }
        for (int j = 0; j < n; j++) sum += exp(lg[j] - mx);
        for (int j = 0; j < n; j++) sc[j] += exp(lg[j] - mx) / sum / (agg == 2 ? nh : 1);
    }
    int c = br_topk(sc, n, k, sel);
    if (score) memcpy(score, sc, (size_t)n * sizeof(double));
    free(sc);
    free(lg);
    return c;
}

void br_rocket_split(int S, int B, int N_new, int D, double alpha_or_neg, int *T, int *pb,
                     int *p, int *r, int *k) {
    double c = (double)S / B < 1 ? 1.0 : (double)S / B;
    double a = alpha_or_neg >= 0 ? alpha_or_neg : fmin(0.2 + 0.06 * log2(c), 0.8);
    int t = (int)((double)S / pow(c, a));
    int floor_t = 2 * N_new < S ? 2 * N_new : S;
    if (t < floor_t) t = floor_t;
    double c2 = (double)t / B < 1 ? 1.0 : (double)t / B;
    int pp = (int)ceil(sqrt(c2));
    if (pp > c2) pp = 1;
    int rr = (int)(D * (double)pp / c2);
    if (rr < 1) rr = 1;
    if (rr > D) rr = D;
    *T = t;
    *pb = t - N_new;
    *p = pp;
    *r = rr;
    *k = B / 2;
}

int br_sets_match(const int *a, int na, const int *b, int nb, const double *score, int ncand,
                  double tol) {
    if (na != nb) return 0;
    int same = 1;
    for (int i = 0; i < na; i++) same &= a[i] == b[i];
    if (same) return 1;
    if (tol <= 0 || nb == 0) return 0;
    /* the boundary: the worst score the reference chose */
    double kth = INFINITY;
    for (int i = 0; i < nb; i++)
        if (score[b[i]] < kth) kth = score[b[i]];
    /* relative slack at the boundary, plus an absolute floor: scores below
     * 1e-30 of the largest finite score are numerically zero in f32 (the
     * implementation's exp underflows below e^-87), where every candidate
     * ties and the lowest indices win */
    double top = 0;
    for (int i = 0; i < ncand; i++)
        if (isfinite(score[i]) && fabs(score[i]) > top) top = fabs(score[i]);
    double slack = tol * fabs(kth) + 1e-30 * (top > 1 ? top : 1);
    char *inb = calloc((size_t)ncand + 1, 1), *ina = calloc((size_t)ncand + 1, 1);
    for (int i = 0; i < nb; i++) inb[b[i]] = 1;
    for (int i = 0; i < na; i++) {
        if (a[i] < 0 || a[i] >= ncand) {
            free(inb);
            free(ina);
            return 0;
        }
        ina[a[i]] = 1;
    }
    int ok = 1;
    for (int i = 0; i < na; i++)
        if (!inb[a[i]] && !(score[a[i]] >= kth - slack)) ok = 0;
    for (int i = 0; i < nb; i++)
        if (!ina[b[i]] && !(score[b[i]] <= kth + slack)) ok = 0;
    /* an exact tie in the reference is decided by the index rule: the
     * implementation may not pick the higher index of two equal scores */
    for (int i = 0; i < na && ok; i++) {
        if (inb[a[i]]) continue;
        for (int j = 0; j < nb; j++)
            if (!ina[b[j]] && score[b[j]] == score[a[i]]) ok = 0;
    }
    free(inb);
    free(ina);
    return ok ? 2 : 0;
}
