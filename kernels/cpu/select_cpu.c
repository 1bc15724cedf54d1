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

/* Thread-local index scratch (kernels run on several threads at once). */
static int32_t *tls_idx(int n) {
    static _Thread_local int32_t *buf;
    static _Thread_local int cap;
    if (n > cap) {
        free(buf);
        cap = n + n / 2 + 16;
        buf = KB_MALLOC((size_t)cap * sizeof(int32_t));
    }
    return buf;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* w[0..m) := the m top-ranked indices of x[0..n) in the deterministic order
 * (any order inside, w[m-1] the one of rank m-1); w has room for n.
 * For n >= 256 and m <= n / 8: a threshold thr from a sample of x (at most
 * 256 elements, evenly spaced; about 2m + 32 elements of x are
 * expected at or above it), one vectorised pass keeps the indices with
 * x >= thr (ascending), and quickselect runs on those. Every index left out
 * has x < thr <= the candidates' values (NaN fails the compare and ranks as
 * -inf anyway), so if at least m were kept the top m are among them; if
 * fewer, or thr is not a finite number above -inf, the plain quickselect
 * over all n runs. The set returned is the same either way. */
static void top_m(const float *x, int n, int m, int32_t *w) {
    enum { SAMPLE_MAX = 256 };
    if (n >= 256 && m <= n / 8) {
        const int SAMPLE = n >= 4 * SAMPLE_MAX ? SAMPLE_MAX : n / 4;
        float smp[SAMPLE_MAX];
        int32_t si[SAMPLE_MAX];
        long step = n / SAMPLE;
        for (int i = 0; i < SAMPLE; i++) {
            smp[i] = x[i * step];
            si[i] = i;
        }
        /* rank of the threshold in the sample: expected (q + 1) * step
         * elements of x are >= it; aim at 2m + 32 */
        long q = (2L * m + 32) / step;
        if (q > SAMPLE - 1) q = SAMPLE - 1;
        select_rank(smp, si, SAMPLE, (int)q + 1);
        float thr = smp[si[q]];
        if (thr > -INFINITY && thr == thr) {
            int c = 0;
#if defined(__AVX512F__)
            __m512 vt = _mm512_set1_ps(thr);
            __m512i iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
            const __m512i sixteen = _mm512_set1_epi32(16);
            int i = 0;
            for (; i + 16 <= n; i += 16) {
                __mmask16 k = _mm512_cmp_ps_mask(_mm512_loadu_ps(x + i), vt, _CMP_GE_OQ);
                _mm512_mask_compressstoreu_epi32(w + c, k, iv);
                c += __builtin_popcount(k);
                iv = _mm512_add_epi32(iv, sixteen);
            }
            for (; i < n; i++)
                if (x[i] >= thr) w[c++] = i;
#else
            for (int i = 0; i < n; i++)
                if (x[i] >= thr) w[c++] = i;
#endif
            if (c >= m) {
                if (c > m) select_rank(x, w, c, m);
                return;
            }
        }
    }
    for (int i = 0; i < n; i++) w[i] = i;
    select_rank(x, w, n, m);
}

int kb_cpu_topk(const float *x, int n, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    if (k == n) {
        for (int i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    int32_t *w = tls_idx(n);
    top_m(x, n, k, w);
    if (k <= n / 16) { /* few winners: sort them */
        memcpy(idx, w, (size_t)k * sizeof(int32_t));
        qsort(idx, (size_t)k, sizeof(int32_t), cmp_i32);
        return k;
    }
    int32_t t = w[k - 1];
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
    int32_t *w = tls_idx(2 * np);
    int32_t *sel = w + np;
    for (;;) {
        top_m(ps, np, m, w);
        int has_last = 0;
        for (int i = 0; i < m; i++) has_last |= w[i] == np - 1;
        long total = (long)m * p - (has_last ? p - last_cnt : 0);
        if (total >= k || m == np) break;
        m++; /* the partial last page made the top-m pages too small */
    }
    int32_t b = w[m - 1]; /* the boundary page: last in the order among the chosen */
    long others = 0;
    for (int i = 0; i < m; i++) {
        sel[i] = w[i];
        if (w[i] != b) others += w[i] == np - 1 ? last_cnt : p;
    }
    qsort(sel, (size_t)m, sizeof(int32_t), cmp_i32);
    int need = (int)(k - others);
    int c = 0;
    for (int i = 0; i < m; i++) {
        int P = sel[i];
        int cnt = P == np - 1 ? last_cnt : p;
        if (P == b) cnt = need;
        for (int t = 0; t < cnt; t++) idx[c++] = P * p + t;
    }
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

void kb_cpu_page_minmax(const kb_kvstream *s, int from, int to, int p, void *kmax, void *kmin,
                        int ld) {
    int D = s->D;
    kb_dtype t = s->dtype;
    float *buf = KB_MALLOC(3 * (size_t)D * sizeof(float)), *row = buf, *mx = buf + D, *mn = buf + 2 * D;
    for (int j = from; j < to;) {
        size_t P = (size_t)(j / p);
        int end = (int)KB_MIN((long)to, (long)(P + 1) * p);
        if (j % p == 0) { /* the page restarts at its first slot */
            simd_cvt_row(t, kvstream_krow(s, j), mx, D);
            memcpy(mn, mx, (size_t)D * sizeof(float));
            j++;
        } else {
            for (int d = 0; d < D; d++) {
                mx[d] = kb_elem_get(kmax, t, (size_t)d * ld + P);
                mn[d] = kb_elem_get(kmin, t, (size_t)d * ld + P);
            }
        }
        for (; j < end; j++) {
            simd_cvt_row(t, kvstream_krow(s, j), row, D);
            for (int d = 0; d < D; d++) {
                mx[d] = row[d] > mx[d] ? row[d] : mx[d];
                mn[d] = row[d] < mn[d] ? row[d] : mn[d];
            }
        }
        /* min and max of stored values are stored values: exact in t */
        for (int d = 0; d < D; d++) {
            kb_elem_set(kmax, t, (size_t)d * ld + P, mx[d]);
            kb_elem_set(kmin, t, (size_t)d * ld + P, mn[d]);
        }
    }
    free(buf);
}

/* ---- QUEST page bound ---- */

#if defined(__AVX512F__)
/* 16 elements of dtype t at element offset i of b, as f32. */
static inline __m512 sld16(kb_dtype t, const void *b, size_t i) {
    if (t == KB_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)b + i)));
    if (t == KB_BF16)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)b + i))), 16));
    return _mm512_loadu_ps((const float *)b + i);
}
#endif

/* Dim-major summaries: 16 pages per vector, dims accumulated in ascending
 * order in every lane (equal pages give equal bounds). Whole vectors are
 * read (rows are padded to 32 pages and zero-filled), stores are masked. */
void kb_cpu_quest_scores(const float *q, int D, const void *kmax, const void *kmin, kb_dtype dt, int ld,
                         int npages, float *out) {
    int P = 0;
#if defined(__AVX512F__)
    for (; P < npages && ld % 32 == 0; P += 16) {
        __mmask16 m = npages - P >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (npages - P)) - 1);
        __m512 acc = _mm512_setzero_ps();
        for (int d = 0; d < D; d++) {
            __m512 qd = _mm512_set1_ps(q[d]);
            __m512 a = _mm512_mul_ps(qd, sld16(dt, kmax, (size_t)d * ld + P));
            __m512 b = _mm512_mul_ps(qd, sld16(dt, kmin, (size_t)d * ld + P));
            acc = _mm512_add_ps(acc, _mm512_max_ps(a, b));
        }
        _mm512_mask_storeu_ps(out + P, m, acc);
    }
#endif
    for (; P < npages; P++) {
        float acc = 0;
        for (int d = 0; d < D; d++) {
            float a = q[d] * kb_elem_get(kmax, dt, (size_t)d * ld + P);
            float b = q[d] * kb_elem_get(kmin, dt, (size_t)d * ld + P);
            acc += a > b ? a : b;
        }
        out[P] = acc;
    }
}

/* Top-r of D double keys (higher first, ties to the lower index), ascending
 * output: dim d is chosen when fewer than r keys rank before it (greater,
 * or equal with a lower index); O(D^2) compares, vectorised, with D a head
 * dim. Keys must not be NaN (the caller maps NaN to -inf). */
static void topk_small_double(const double *key, int D, int r, int32_t *out) {
    int c = 0;
    if (r >= D) {
        for (int d = 0; d < D; d++) out[d] = d;
        return;
    }
    for (int d = 0; d < D && c < r; d++) {
        double kd = key[d];
        int rank = 0, e = 0;
#if defined(__AVX512F__)
        __m512d vk = _mm512_set1_pd(kd);
        for (; e + 8 <= D; e += 8) {
            __m512d ke = _mm512_loadu_pd(key + e);
            __mmask8 gt = _mm512_cmp_pd_mask(ke, vk, _CMP_GT_OQ);
            __mmask8 eq = _mm512_cmp_pd_mask(ke, vk, _CMP_EQ_OQ);
            __mmask8 low = e + 8 <= d ? (__mmask8)0xff : d > e ? (__mmask8)((1u << (d - e)) - 1) : 0;
            rank += __builtin_popcount((unsigned)(gt | (eq & low)));
        }
#endif
        for (; e < D; e++) rank += key[e] > kd || (key[e] == kd && e < d);
        if (rank < r) out[c++] = d;
    }
}

/* ---- hybrid approximate scores ---- */

#if defined(__AVX512F__)
/* Page scores for p > 1 from dim-major summaries: for each chosen dim d
 * (ascending), the row of Kmax (group sign +) or Kmin (sign -) is read
 * contiguously, 32 pages per step, and q_g,d times it is added to each
 * head's lane-wise accumulator: only the r rows the definition needs are
 * read, and equal pages give equal scores. G <= 8. */
static void hyb_pages512(const float *q, int G, int D, const int32_t *dims, int r, const char *pos,
                         const void *kmax, const void *kmin, kb_dtype dt, int ld, int np, float *sc,
                         size_t lds) {
    const size_t esz = kb_dtype_size(dt);
#define HROW(t) ((const char *)(pos[dims[t]] ? kmax : kmin) + (size_t)dims[t] * ld * esz)
    /* the rows are short streams (np elements each): start all of them */
    for (int t = 0; t < r; t++)
        for (size_t o = 0; o < 256 && o < (size_t)np * esz; o += 64) _mm_prefetch(HROW(t) + o, _MM_HINT_T0);
    for (int P0 = 0; P0 < np; P0 += 32) {
        int nr = np - P0;
        if (P0 + 64 < np)
            for (int t = 0; t < r; t++) {
                const char *row = HROW(t) + (size_t)(P0 + 64) * esz;
                _mm_prefetch(row, _MM_HINT_T0);
                if (esz == 4) _mm_prefetch(row + 64, _MM_HINT_T0);
            }
        __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
        __mmask16 m1 = nr >= 32 ? (__mmask16)0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
        __m512 acc[8][2];
        for (int g = 0; g < 8; g++) acc[g][0] = acc[g][1] = _mm512_setzero_ps();
        for (int t = 0; t < r; t++) {
            int d = dims[t];
            /* rows hold ld >= P0 + 32 zero-filled elements: whole loads */
            const void *row = (pos[d] ? kmax : kmin);
            size_t e = (size_t)d * ld + P0;
            __m512 v0 = sld16(dt, row, e), v1 = sld16(dt, row, e + 16);
#pragma GCC unroll 8
            for (int g = 0; g < 8; g++) {
                if (g >= G) break;
                __m512 qd = _mm512_set1_ps(q[(size_t)g * D + d]);
                acc[g][0] = _mm512_fmadd_ps(qd, v0, acc[g][0]);
                acc[g][1] = _mm512_fmadd_ps(qd, v1, acc[g][1]);
            }
        }
        for (int g = 0; g < G; g++) {
            _mm512_mask_storeu_ps(sc + (size_t)g * lds + P0, m0, acc[g][0]);
            _mm512_mask_storeu_ps(sc + (size_t)g * lds + P0 + 16, m1, acc[g][1]);
        }
    }
#undef HROW
}

/* Slot scores for p == 1 (SparQ): only the r chosen dims of each key are
 * read, 16 slots at a time by a gather of the 32-bit word holding the dim
 * (always inside the row); each head's scores accumulate lane-wise in the
 * dims' ascending order, so equal keys give equal scores. */
static void hyb_slots512(const float *q, int G, int D, const int32_t *dims, int r,
                         const kb_kvstream *s, int n, float *sc, size_t ld) {
    const int esz = (int)kb_dtype_size(s->dtype);
    const __m512i rowoff = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                              _mm512_set1_epi32(D * esz));
    __m512 acc[64];
    for (int j0 = 0; j0 < n; j0 += 16) {
        int nr = n - j0 < 16 ? n - j0 : 16;
        __mmask16 valid = (__mmask16)((1u << nr) - 1);
        const char *base = (const char *)kvstream_krow(s, j0);
        for (int g = 0; g < G; g++) acc[g] = _mm512_setzero_ps();
        for (int t = 0; t < r; t++) {
            int d = dims[t];
            __m512 v;
            if (esz == 4) {
                v = _mm512_mask_i32gather_ps(_mm512_setzero_ps(), valid, rowoff, base + 4 * d, 1);
            } else {
                __m512i w = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, rowoff,
                                                        base + 2 * (d & ~1), 1);
                if (d & 1) w = _mm512_srli_epi32(w, 16);
                __m256i h = _mm512_cvtepi32_epi16(w);
                v = s->dtype == KB_F16 ? _mm512_cvtph_ps(h)
                                       : _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
            }
            for (int g = 0; g < G; g++)
                acc[g] = _mm512_fmadd_ps(_mm512_set1_ps(q[(size_t)g * D + d]), v, acc[g]);
        }
        for (int g = 0; g < G; g++) _mm512_mask_storeu_ps(sc + (size_t)g * ld + j0, valid, acc[g]);
    }
}
#endif

void kb_cpu_hybrid_scores(const float *q, int G, int D, int r, const void *kmax,
                          const void *kmin, int ldk, const kb_kvstream *s, int n, int p,
                          float *page_score, float *head_w, int32_t *dims_out) {
    if (r > D) r = D;
    if (r < 1) r = 1;
    int np = (n + p - 1) / p;
    if (np <= 0) return;
    static _Thread_local void *buf;
    static _Thread_local size_t bcap;
    size_t ld = (size_t)pad16(np);
    size_t need = (size_t)D * (sizeof(double) + sizeof(int32_t) + 1) + (size_t)G * r * sizeof(float) +
                  (size_t)G * ld * sizeof(float) + (size_t)r * sizeof(float) + 256;
    if (need > bcap) {
        free(buf);
        bcap = need + need / 2;
        buf = KB_MALLOC(bcap);
    }
    double *absum = buf;
    float *sc = (float *)(void *)(absum + D); /* [G][ld] */
    float *qr = sc + (size_t)G * ld;          /* [G][r] (scalar path) */
    float *vals = qr + (size_t)G * r;         /* [r] (scalar path) */
    int32_t *dims = (int32_t *)(void *)(vals + r);
    char *pos = (char *)(dims + D);
    for (int d = 0; d < D; d++) {
        /* in double, sums of a few floats are exact: dims are ranked by the
         * exact mean |q| and the sign is the exact sign of the sum, so neither
         * depends on rounding (ties go to the lower dim) */
        double a = 0, sum = 0;
        for (int g = 0; g < G; g++) {
            a += fabs((double)q[(size_t)g * D + d]);
            sum += q[(size_t)g * D + d];
        }
        absum[d] = a == a ? a : -INFINITY; /* NaN ranks last, as in the reference */
        pos[d] = sum > 0;
    }
    topk_small_double(absum, D, r, dims);
#if defined(__AVX512F__)
    if (p > 1 && G <= 8 && ldk % 32 == 0) {
        hyb_pages512(q, G, D, dims, r, pos, kmax, kmin, s->dtype, ldk, np, sc, ld);
    } else if (p == 1 && D % 16 == 0 && G <= 64) {
        hyb_slots512(q, G, D, dims, r, s, n, sc, ld);
    } else
#endif
    {
        for (int g = 0; g < G; g++)
            for (int t = 0; t < r; t++) qr[(size_t)g * r + t] = q[(size_t)g * D + dims[t]];
        for (int P = 0; P < np; P++) {
            if (p == 1) {
                /* only the r chosen dims of the key are read (SparQ's traffic) */
                if (s->dtype == KB_F32) {
                    const float *kr = kvstream_krow(s, P);
                    for (int t = 0; t < r; t++) vals[t] = kr[dims[t]];
                } else {
                    const uint16_t *kr = kvstream_krow(s, P);
                    for (int t = 0; t < r; t++)
                        vals[t] = s->dtype == KB_F16 ? kb_f16_to_f32(kr[dims[t]]) : kb_bf16_to_f32(kr[dims[t]]);
                }
            } else {
                for (int t = 0; t < r; t++)
                    vals[t] = kb_elem_get(pos[dims[t]] ? kmax : kmin, s->dtype, (size_t)dims[t] * ldk + P);
            }
            for (int g = 0; g < G; g++) sc[(size_t)g * ld + P] = simd_dot(qr + (size_t)g * r, vals, r);
        }
    }
    /* softmax over slots, computed per page: page P holds cnt_P equal slots */
    int last_cnt = n - (np - 1) * p;
    for (int P = 0; P < np; P++) page_score[P] = 0;
    for (int g = 0; g < G; g++) {
        float tau = kb_hybrid_temperature(q + (size_t)g * D, D, dims, r);
        float *x = sc + (size_t)g * ld, mx = -INFINITY;
        int P = 0;
#if defined(__AVX512F__)
        {
            __m512 vt = _mm512_set1_ps(tau), vm = _mm512_set1_ps(-INFINITY);
            for (; P + 16 <= np; P += 16) {
                __m512 v = _mm512_div_ps(_mm512_loadu_ps(x + P), vt);
                _mm512_storeu_ps(x + P, v);
                vm = _mm512_mask_max_ps(vm, _mm512_cmp_ps_mask(v, vm, _CMP_GT_OQ), v, vm);
            }
            mx = _mm512_reduce_max_ps(vm);
        }
#endif
        for (; P < np; P++) {
            x[P] /= tau;
            mx = x[P] > mx ? x[P] : mx;
        }
        P = 0;
#if defined(__AVX512F__)
        for (__m512 vm = _mm512_set1_ps(mx); P + 16 <= np; P += 16)
            _mm512_storeu_ps(x + P, _mm512_sub_ps(_mm512_loadu_ps(x + P), vm));
#endif
        for (; P < np; P++) x[P] -= mx;
        exp_uniform(x, np);
        /* every page but the last holds p slots: sum = p * sum(x[<last]) + cnt * x[last] */
        double sum = 0;
        P = 0;
#if defined(__AVX512F__)
        {
            __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
            for (; P + 16 <= np - 1; P += 16) {
                __m512 v = _mm512_loadu_ps(x + P);
                a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
                a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
            }
            sum = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
        }
#endif
        for (; P < np - 1; P++) sum += x[P];
        sum = sum * p + (double)x[np - 1] * last_cnt;
        float inv = (float)(1.0 / sum);
        float *hw = head_w ? head_w + (size_t)g * np : NULL;
        P = 0;
#if defined(__AVX512F__)
        for (__m512 vi = _mm512_set1_ps(inv); P + 16 <= np; P += 16) {
            __m512 w = _mm512_mul_ps(_mm512_loadu_ps(x + P), vi);
            if (hw) _mm512_storeu_ps(hw + P, w);
            _mm512_storeu_ps(page_score + P, _mm512_add_ps(_mm512_loadu_ps(page_score + P), w));
        }
#endif
        for (; P < np; P++) {
            float w = x[P] * inv;
            if (hw) hw[P] = w;
            page_score[P] += w;
        }
    }
    float invG = 1.0f / G;
    for (int P = 0; P < np; P++) page_score[P] *= invG;
    if (dims_out) memcpy(dims_out, dims, (size_t)r * sizeof(int32_t));
}
