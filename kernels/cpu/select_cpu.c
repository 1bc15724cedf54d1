/* select_cpu.c - fast selection building blocks (select.h).
 *
 * Same definitions as kernels/ref/select_ref.c with f32 arithmetic and the
 * asymptotics the definitions need: top-k by quickselect (O(n) expected, a
 * sort fallback bounds the worst case) with an O(n) ascending scan instead
 * of a sort; token-level top-k over page-broadcast scores selected at page
 * level (whole pages, then the boundary page's lowest slots); the hybrid
 * softmax over slots computed per page (a page of c slots contributes c equal
 * terms); max pooling with a monotone deque. Raw speed (threads, blocking)
 * is for the performance work; layouts are already row-contiguous. */
#include <math.h>
#include <stdlib.h>

#include "kernels/attn_impl.h"
#include "kernels/cpu/simd.h"
#include "kernels/select.h"

/* exp of x[0..n) with every element on the vector path of simd_exp_inplace,
 * whatever its position: its scalar tail rounds differently (no FMA), which
 * would give equal scores different weights and break the "ties to the lower
 * index" rule for duplicated keys. x must have room for pad16(n) floats. */
static inline int pad16(int n) { return (n + 15) & ~15; }
static void exp_uniform(float *x, int n) {
    int m = pad16(n);
    for (int i = n; i < m; i++) x[i] = -INFINITY;
    simd_exp_inplace(x, m);
}

/* ---- deterministic top-k ---- */

static inline int before(const float *x, int32_t a, int32_t b) {
    return kb_rank_before(x[a], a, x[b], b);
}

static _Thread_local const float *g_qs_keys; /* fallback sort only (qsort has no context argument) */
static int cmp_rank(const void *pa, const void *pb) {
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    return before(g_qs_keys, a, b) ? -1 : (before(g_qs_keys, b, a) ? 1 : 0);
}

/* Rearranges w[0..n) so that w[m-1] is the element of rank m-1 (0-based) in
 * the deterministic order and w[0..m-1) rank before it. 1 <= m <= n. */
static void select_rank(const float *x, int32_t *w, int n, int m) {
    int lo = 0, hi = n - 1, target = m - 1;
    int guard = 64;
    for (int t = n; t > 1; t >>= 1) guard += 4;
    while (hi > lo) {
        if (--guard < 0) { /* pathological pivots: finish with a sort of the range */
            g_qs_keys = x;
            qsort(w + lo, (size_t)(hi - lo + 1), sizeof(int32_t), cmp_rank);
            return;
        }
        int mid = lo + (hi - lo) / 2;
        /* median of three as pivot */
        if (before(x, w[mid], w[lo])) { int32_t t = w[mid]; w[mid] = w[lo]; w[lo] = t; }
        if (before(x, w[hi], w[lo])) { int32_t t = w[hi]; w[hi] = w[lo]; w[lo] = t; }
        if (before(x, w[hi], w[mid])) { int32_t t = w[hi]; w[hi] = w[mid]; w[mid] = t; }
        int32_t pv = w[mid];
        int i = lo, j = hi;
        while (i <= j) {
            while (before(x, w[i], pv)) i++;
            while (before(x, pv, w[j])) j--;
            if (i <= j) {
                int32_t t = w[i];
                w[i] = w[j];
                w[j] = t;
                i++;
                j--;
            }
        }
        if (target <= j) hi = j;
        else if (target >= i) lo = i;
        else return; /* w[target] is the pivot, in place */
    }
}

int kb_cpu_topk(const float *x, int n, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    if (k == n) {
        for (int i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    int32_t *w = KB_MALLOC((size_t)n * sizeof(int32_t));
    for (int i = 0; i < n; i++) w[i] = i;
    select_rank(x, w, n, k);
    int32_t t = w[k - 1];
    free(w);
    int c = 0;
    for (int i = 0; i < n; i++)
        if (i == t || before(x, i, t)) idx[c++] = i;
    return c;
}

int kb_cpu_topk_pages(const float *ps, int n, int p, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    if (k == n) {
        for (int i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    if (p == 1) return kb_cpu_topk(ps, n, k, idx);
    int np = (n + p - 1) / p, last_cnt = n - (np - 1) * p;
    int m = (k + p - 1) / p;
    int32_t *w = KB_MALLOC((size_t)np * sizeof(int32_t));
    char *in = KB_CALLOC((size_t)np, 1);
    for (;;) {
        for (int i = 0; i < np; i++) w[i] = i;
        select_rank(ps, w, np, m);
        int has_last = 0;
        for (int i = 0; i < m; i++) has_last |= w[i] == np - 1;
        long total = (long)m * p - (has_last ? p - last_cnt : 0);
        if (total >= k || m == np) break;
        m++; /* the partial last page made the top-m pages too small */
    }
    int32_t b = w[m - 1]; /* the boundary page: last in the order among the chosen */
    long others = 0;
    for (int i = 0; i < m; i++) {
        in[w[i]] = 1;
        if (w[i] != b) others += w[i] == np - 1 ? last_cnt : p;
    }
    int need = (int)(k - others);
    int c = 0;
    for (int P = 0; P < np; P++) {
        if (!in[P]) continue;
        int cnt = P == np - 1 ? last_cnt : p;
        if (P == b) cnt = need;
        for (int t = 0; t < cnt; t++) idx[c++] = P * p + t;
    }
    free(w);
    free(in);
    return c;
}

/* ---- gathered attention ---- */

void kb_cpu_attn_gather(const float *q, int G, const kb_kvstream *s, const int32_t *idx, int k,
                        float scale, float *out) {
    /* the valid entries, then the blocked kernel of attn_cpu.c */
    static _Thread_local int32_t *buf;
    static _Thread_local int cap;
    int nv = 0;
    for (int t = 0; t < k; t++) nv += idx[t] >= 0;
    const int32_t *rows = idx;
    if (nv != k) {
        if (nv > cap) {
            free(buf);
            cap = nv + nv / 2;
            buf = KB_MALLOC((size_t)cap * sizeof(int32_t));
        }
        int c = 0;
        for (int t = 0; t < k; t++)
            if (idx[t] >= 0) buf[c++] = idx[t];
        rows = buf;
    }
    kb_cpu_attn_gather_rows(q, G, s, rows, nv, scale, out);
}

/* ---- SnapKV window scores ---- */

#define SK_ROWS 32 /* (window row, head) pairs scored per pass over K */

void kb_cpu_snapkv_scores(const float *Q, int nq, int ldq, int G, const int32_t *qpos,
                          const kb_kvstream *s, int n, int n_prefix, float scale, float *out,
                          int ldo) {
    int D = s->D, R = nq * G;
    for (int g = 0; g < G; g++) memset(out + (size_t)g * ldo, 0, (size_t)n_prefix * sizeof(float));
    if (n <= 0 || R <= 0) return;
    size_t ld = (size_t)pad16(n);
    float *lg = KB_MALLOC((size_t)SK_ROWS * ld * sizeof(float));
    float *row = KB_MALLOC((size_t)D * sizeof(float));
    for (int r0 = 0; r0 < R; r0 += SK_ROWS) {
        int nr = KB_MIN(SK_ROWS, R - r0);
        for (int j = 0; j < n; j++) {
            simd_cvt_row(s->dtype, kvstream_krow(s, j), row, D);
            for (int t = 0; t < nr; t++) {
                int i = (r0 + t) / G, g = (r0 + t) % G;
                lg[(size_t)t * ld + j] = s->pos[j] <= qpos[i]
                                            ? simd_dot(Q + (size_t)i * ldq + (size_t)g * D, row, D) * scale
                                            : -INFINITY;
            }
        }
        for (int t = 0; t < nr; t++) {
            int g = (r0 + t) % G;
            float *x = lg + (size_t)t * ld, mx = -INFINITY;
            for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
            if (mx == -INFINITY) continue; /* the row sees nothing */
            for (int j = 0; j < n; j++) x[j] -= mx; /* -inf stays -inf -> exp 0 */
            exp_uniform(x, n);
            float sum = 0;
            for (int j = 0; j < n; j++) sum += x[j];
            float inv = 1.0f / sum, *o = out + (size_t)g * ldo;
            for (int j = 0; j < n_prefix; j++) o[j] += x[j] * inv;
        }
    }
    free(lg);
    free(row);
}

/* ---- pooling ---- */

void kb_cpu_pool1d(const float *in, int n, int K, int mode, float *out) {
    int h = K / 2;
    if (n <= 0) return;
    if (mode == 1) {
        double sum = 0;
        for (int t = 0; t <= h && t < n; t++) sum += in[t];
        for (int j = 0; j < n; j++) {
            out[j] = (float)(sum / K);
            int add = j + h + 1, drop = j - h;
            if (add < n) sum += in[add];
            if (drop >= 0) sum -= in[drop];
        }
        return;
    }
    /* sliding max: a deque of indices with decreasing values */
    int *dq = KB_MALLOC((size_t)n * sizeof(int));
    int head = 0, tail = 0, next = 0;
    for (int j = 0; j < n; j++) {
        int hi = KB_MIN(n - 1, j + h);
        for (; next <= hi; next++) {
            while (tail > head && in[dq[tail - 1]] <= in[next]) tail--;
            dq[tail++] = next;
        }
        while (dq[head] < j - h) head++;
        out[j] = in[dq[head]];
    }
    free(dq);
}

/* ---- page min/max ---- */

void kb_cpu_page_minmax(const kb_kvstream *s, int from, int to, int p, float *kmax, float *kmin) {
    int D = s->D;
    float *row = KB_MALLOC((size_t)D * sizeof(float));
    for (int j = from; j < to; j++) {
        simd_cvt_row(s->dtype, kvstream_krow(s, j), row, D);
        float *mx = kmax + (size_t)(j / p) * D, *mn = kmin + (size_t)(j / p) * D;
        if (j % p == 0) {
            memcpy(mx, row, (size_t)D * sizeof(float));
            memcpy(mn, row, (size_t)D * sizeof(float));
        } else {
            for (int d = 0; d < D; d++) {
                mx[d] = row[d] > mx[d] ? row[d] : mx[d];
                mn[d] = row[d] < mn[d] ? row[d] : mn[d];
            }
        }
    }
    free(row);
}

/* ---- QUEST page bound ---- */

void kb_cpu_quest_scores(const float *q, int D, const float *kmax, const float *kmin, int npages,
                         float *out) {
    for (int P = 0; P < npages; P++) {
        const float *mx = kmax + (size_t)P * D, *mn = kmin + (size_t)P * D;
        float acc = 0;
        for (int d = 0; d < D; d++) {
            float a = q[d] * mx[d], b = q[d] * mn[d];
            acc += a > b ? a : b;
        }
        out[P] = acc;
    }
}

/* Top-r of D double keys (higher first, ties to the lower index), ascending
 * output: a sorted insertion list, O(D·r) with D a head dim (<= 256). */
static void topk_small_double(const double *key, int D, int r, int32_t *out) {
    int c = 0;
    for (int d = 0; d < D; d++) {
        if (c == r && !(key[d] > key[out[c - 1]])) continue; /* equal: the earlier index stays */
        int t = c < r ? c++ : r - 1;
        while (t > 0 && key[d] > key[out[t - 1]]) {
            out[t] = out[t - 1];
            t--;
        }
        out[t] = d;
    }
    /* ascending index order */
    for (int i = 1; i < c; i++) {
        int32_t v = out[i];
        int j = i;
        while (j > 0 && out[j - 1] > v) {
            out[j] = out[j - 1];
            j--;
        }
        out[j] = v;
    }
}

/* ---- hybrid approximate scores ---- */

void kb_cpu_hybrid_scores(const float *q, int G, int D, int r, const float *kmax,
                          const float *kmin, const kb_kvstream *s, int n, int p,
                          float *page_score, float *head_w, int32_t *dims_out) {
    if (r > D) r = D;
    if (r < 1) r = 1;
    int np = (n + p - 1) / p;
    if (np <= 0) return;
    double *absum = KB_MALLOC((size_t)D * sizeof(double));
    int32_t *dims = KB_MALLOC((size_t)D * sizeof(int32_t));
    char *pos = KB_MALLOC((size_t)D);
    for (int d = 0; d < D; d++) {
        /* in double, sums of a few floats are exact: dims are ranked by the
         * exact mean |q| and the sign is the exact sign of the sum, so neither
         * depends on rounding (ties go to the lower dim) */
        double a = 0, sum = 0;
        for (int g = 0; g < G; g++) {
            a += fabs((double)q[(size_t)g * D + d]);
            sum += q[(size_t)g * D + d];
        }
        absum[d] = a;
        pos[d] = sum > 0;
    }
    topk_small_double(absum, D, r, dims);
    float *qI = KB_MALLOC((size_t)G * r * sizeof(float));
    for (int g = 0; g < G; g++)
        for (int t = 0; t < r; t++) qI[(size_t)g * r + t] = q[(size_t)g * D + dims[t]];
    size_t ld = (size_t)pad16(np);
    float *sc = KB_MALLOC((size_t)G * ld * sizeof(float));
    float *vals = KB_MALLOC((size_t)r * sizeof(float));
    uint16_t *half = p == 1 ? KB_MALLOC((size_t)r * sizeof(uint16_t)) : NULL;
    for (int P = 0; P < np; P++) {
        if (p == 1) {
            /* only the r chosen dims of the key are read (SparQ's traffic) */
            if (s->dtype == KB_F32) {
                const float *kr = kvstream_krow(s, P);
                for (int t = 0; t < r; t++) vals[t] = kr[dims[t]];
            } else {
                const uint16_t *kr = kvstream_krow(s, P);
                for (int t = 0; t < r; t++) half[t] = kr[dims[t]];
                simd_cvt_row(s->dtype, half, vals, r);
            }
        } else {
            const float *mx = kmax + (size_t)P * D, *mn = kmin + (size_t)P * D;
            for (int t = 0; t < r; t++) vals[t] = pos[dims[t]] ? mx[dims[t]] : mn[dims[t]];
        }
        for (int g = 0; g < G; g++) sc[(size_t)g * ld + P] = simd_dot(qI + (size_t)g * r, vals, r);
    }
    /* softmax over slots, computed per page: page P holds cnt_P equal slots */
    int last_cnt = n - (np - 1) * p;
    for (int P = 0; P < np; P++) page_score[P] = 0;
    for (int g = 0; g < G; g++) {
        float tau = kb_hybrid_temperature(q + (size_t)g * D, D, dims, r);
        float *x = sc + (size_t)g * ld, mx = -INFINITY;
        for (int P = 0; P < np; P++) {
            x[P] /= tau;
            mx = x[P] > mx ? x[P] : mx;
        }
        for (int P = 0; P < np; P++) x[P] -= mx;
        exp_uniform(x, np);
        double sum = 0;
        for (int P = 0; P < np; P++) sum += (double)x[P] * (P == np - 1 ? last_cnt : p);
        float inv = (float)(1.0 / sum);
        for (int P = 0; P < np; P++) {
            float w = x[P] * inv;
            if (head_w) head_w[(size_t)g * np + P] = w;
            page_score[P] += w;
        }
    }
    float invG = 1.0f / G;
    for (int P = 0; P < np; P++) page_score[P] *= invG;
    if (dims_out) memcpy(dims_out, dims, (size_t)r * sizeof(int32_t));
    free(absum);
    free(dims);
    free(pos);
    free(qI);
    free(sc);
    free(vals);
    free(half);
}
