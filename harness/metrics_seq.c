/* metrics_seq.c - the sequence algorithms behind the text-similarity metrics,
 * each written from the definition of the Python package the benchmarks use:
 *   - difflib.SequenceMatcher.ratio (Ratcliff-Obershelp with the "popular
 *     element" autojunk heuristic), used by LongBench's code_sim;
 *   - ROUGE-L of the `rouge` 1.0.1 package (LongBench rouge_l);
 *   - ROUGE-Lsum of `rouge_score` 0.1.2 (SCBench summary);
 *   - sentence BLEU with NLTK's smoothing method 4 (SCBench repoqa).
 * Tie-breaking in the LCS back-tracking follows each package, because the set
 * of words in the reconstructed LCS (not only its length) enters the score. */
#include <math.h>
#include <stdlib.h>

#include "harness/metrics_impl.h"
#include "kernels/kb_base.h"

/* ================================================================ interning */

void intern_init(tok_intern *t) { memset(t, 0, sizeof *t); }

void intern_free(tok_intern *t) {
    free(t->keys);
    free(t->off);
    free(t->len);
    free(t->hash);
    free(t->slots);
    memset(t, 0, sizeof *t);
}

static uint64_t hash_u32(const uint32_t *v, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= v[i];
        h *= 1099511628211ull;
    }
    return h ^ (n * 0x9E3779B97F4A7C15ull);
}

static void intern_rehash(tok_intern *t, int nslots) {
    free(t->slots);
    t->slots = KB_MALLOC((size_t)nslots * sizeof *t->slots);
    for (int i = 0; i < nslots; i++) t->slots[i] = -1;
    t->nslots = nslots;
    for (int id = 0; id < t->n; id++) {
        size_t s = (size_t)(t->hash[id] & (uint64_t)(nslots - 1));
        while (t->slots[s] >= 0) s = (s + 1) & (size_t)(nslots - 1);
        t->slots[s] = id;
    }
}

int intern_id(tok_intern *t, const uint32_t *v, size_t n) {
    if (!t->nslots) intern_rehash(t, 64);
    uint64_t h = hash_u32(v, n);
    size_t s = (size_t)(h & (uint64_t)(t->nslots - 1));
    for (;;) {
        int id = t->slots[s];
        if (id < 0) break;
        /* keys stays NULL while only empty words were interned: no NULL + 0 */
        if (t->hash[id] == h && t->len[id] == n && (!n || ustr_eq(t->keys + t->off[id], n, v, n)))
            return id;
        s = (s + 1) & (size_t)(t->nslots - 1);
    }
    if (t->n == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 64;
        t->off = KB_REALLOC(t->off, (size_t)t->cap * sizeof *t->off);
        t->len = KB_REALLOC(t->len, (size_t)t->cap * sizeof *t->len);
        t->hash = KB_REALLOC(t->hash, (size_t)t->cap * sizeof *t->hash);
    }
    if (t->nkeys + n > t->capkeys) {
        size_t c = t->capkeys ? t->capkeys : 256;
        while (c < t->nkeys + n) c *= 2;
        t->keys = KB_REALLOC(t->keys, c * sizeof *t->keys);
        t->capkeys = c;
    }
    if (n) memcpy(t->keys + t->nkeys, v, n * sizeof *v);
    int id = t->n++;
    t->off[id] = t->nkeys;
    t->len[id] = n;
    t->hash[id] = h;
    t->nkeys += n;
    if (2 * t->n > t->nslots)
        intern_rehash(t, t->nslots * 2);
    else
        t->slots[s] = id;
    return id;
}

/* ================================================================ difflib */

typedef struct {
    const uint32_t *a, *b;
    size_t na, nb;
    /* b2j: for each distinct non-popular element of b, its ascending indices.
     * vals[g] is the element of group g; idx[gstart[g] .. gstart[g+1]) its indices. */
    uint32_t *vals;
    size_t *gstart, *idx;
    size_t ngroups;
    /* two rows of j -> run length, valid where stamp == the row's generation */
    size_t *len0, *len1;
    uint64_t *st0, *st1;
    uint64_t gen;
} seqmatch;

static int cmp_pair(const void *x, const void *y) {
    const uint64_t a = *(const uint64_t *)x, b = *(const uint64_t *)y;
    return a < b ? -1 : a > b;
}

static void seqmatch_init(seqmatch *m, const uint32_t *a, size_t na, const uint32_t *b,
                          size_t nb) {
    memset(m, 0, sizeof *m);
    m->a = a;
    m->b = b;
    m->na = na;
    m->nb = nb;
    /* sort (element, index) pairs: 21 bits of code point, 43 bits of index */
    uint64_t *pairs = KB_MALLOC((nb ? nb : 1) * sizeof *pairs);
    for (size_t j = 0; j < nb; j++) pairs[j] = ((uint64_t)b[j] << 43) | (uint64_t)j;
    qsort(pairs, nb, sizeof *pairs, cmp_pair);
    m->vals = KB_MALLOC((nb + 1) * sizeof *m->vals);
    m->gstart = KB_MALLOC((nb + 2) * sizeof *m->gstart);
    m->idx = KB_MALLOC((nb + 1) * sizeof *m->idx);
    /* autojunk: with len(b) >= 200, elements occurring more than
     * len(b)//100 + 1 times are dropped from b2j ("popular") */
    size_t ntest = nb / 100 + 1;
    size_t ni = 0;
    for (size_t s = 0; s < nb;) {
        size_t e = s;
        uint32_t v = (uint32_t)(pairs[s] >> 43);
        while (e < nb && (uint32_t)(pairs[e] >> 43) == v) e++;
        if (!(nb >= 200 && e - s > ntest)) {
            m->vals[m->ngroups] = v;
            m->gstart[m->ngroups] = ni;
            for (size_t k = s; k < e; k++) m->idx[ni++] = (size_t)(pairs[k] & ((1ull << 43) - 1));
            m->ngroups++;
        }
        s = e;
    }
    m->gstart[m->ngroups] = ni;
    free(pairs);
    size_t w = nb ? nb : 1;
    m->len0 = KB_CALLOC(w, sizeof *m->len0);
    m->len1 = KB_CALLOC(w, sizeof *m->len1);
    m->st0 = KB_CALLOC(w, sizeof *m->st0);
    m->st1 = KB_CALLOC(w, sizeof *m->st1);
}

static void seqmatch_free(seqmatch *m) {
    free(m->vals);
    free(m->gstart);
    free(m->idx);
    free(m->len0);
    free(m->len1);
    free(m->st0);
    free(m->st1);
}

static long group_of(const seqmatch *m, uint32_t v) {
    long lo = 0, hi = (long)m->ngroups - 1;
    while (lo <= hi) {
        long mid = (lo + hi) / 2;
        if (v < m->vals[mid])
            hi = mid - 1;
        else if (v > m->vals[mid])
            lo = mid + 1;
        else
            return mid;
    }
    return -1;
}

/* find_longest_match(alo, ahi, blo, bhi) of difflib without an isjunk
 * function: the earliest longest matching block over non-popular elements,
 * then extended on both sides by equal elements (popular ones included). */
static void longest_match(seqmatch *m, size_t alo, size_t ahi, size_t blo, size_t bhi,
                          size_t *oi, size_t *oj, size_t *ok) {
    size_t besti = alo, bestj = blo, bestsize = 0;
    uint64_t prev_gen = 0; /* 0: no previous row */
    for (size_t i = alo; i < ahi; i++) {
        uint64_t gen = ++m->gen;
        long g = group_of(m, m->a[i]);
        if (g >= 0) {
            for (size_t t = m->gstart[g]; t < m->gstart[g + 1]; t++) {
                size_t j = m->idx[t];
                if (j < blo) continue;
                if (j >= bhi) break;
                size_t k = 1;
                if (j > 0 && prev_gen && m->st0[j - 1] == prev_gen) k = m->len0[j - 1] + 1;
                m->len1[j] = k;
                m->st1[j] = gen;
                if (k > bestsize) {
                    besti = i - k + 1;
                    bestj = j - k + 1;
                    bestsize = k;
                }
            }
        }
        /* the row just written becomes the previous row */
        size_t *tl = m->len0;
        m->len0 = m->len1;
        m->len1 = tl;
        uint64_t *ts = m->st0;
        m->st0 = m->st1;
        m->st1 = ts;
        prev_gen = gen;
    }
    while (besti > alo && bestj > blo && m->a[besti - 1] == m->b[bestj - 1]) {
        besti--;
        bestj--;
        bestsize++;
    }
    while (besti + bestsize < ahi && bestj + bestsize < bhi &&
           m->a[besti + bestsize] == m->b[bestj + bestsize])
        bestsize++;
    *oi = besti;
    *oj = bestj;
    *ok = bestsize;
}

double difflib_ratio(const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
    if (na + nb == 0) return 1.0;
    seqmatch m;
    seqmatch_init(&m, a, na, b, nb);
    /* get_matching_blocks: the sum of block sizes does not depend on the
     * order in which the sub-ranges are processed */
    size_t cap = 64, top = 0, matches = 0;
    size_t(*stack)[4] = KB_MALLOC(cap * sizeof *stack);
    stack[top][0] = 0;
    stack[top][1] = na;
    stack[top][2] = 0;
    stack[top][3] = nb;
    top++;
    while (top) {
        top--;
        size_t alo = stack[top][0], ahi = stack[top][1], blo = stack[top][2], bhi = stack[top][3];
        size_t i, j, k;
        longest_match(&m, alo, ahi, blo, bhi, &i, &j, &k);
        if (!k) continue;
        matches += k;
        if (top + 2 > cap) stack = KB_REALLOC(stack, (cap *= 2) * sizeof *stack);
        if (alo < i && blo < j) {
            stack[top][0] = alo;
            stack[top][1] = i;
            stack[top][2] = blo;
            stack[top][3] = j;
            top++;
        }
        if (i + k < ahi && j + k < bhi) {
            stack[top][0] = i + k;
            stack[top][1] = ahi;
            stack[top][2] = j + k;
            stack[top][3] = bhi;
            top++;
        }
    }
    free(stack);
    seqmatch_free(&m);
    return 2.0 * (double)matches / (double)(na + nb);
}

/* ================================================================ LCS table */

/* The back-tracking of an LCS table T (T[i][j] = LCS length of x[0..i) and
 * y[0..j)) needs, off the matches, only which neighbour it moves to. So the
 * table is kept as one bit per cell, bit (i, j) = T[i-1][j] > T[i][j-1]
 * (up_wins) or T[i][j-1] > T[i-1][j] (left_wins), computed with two rows of
 * lengths: n x m / 8 bytes instead of 4 (n+1)(m+1), the same path. */
typedef struct {
    uint64_t *bits;
    size_t m; /* row length in cells */
} lcs_dirs;

static lcs_dirs lcs_directions(const int *x, size_t n, const int *y, size_t m, int up_wins) {
    lcs_dirs d;
    d.m = m;
    d.bits = KB_CALLOC((n * m + 63) / 64 + 1, sizeof *d.bits);
    int *prev = KB_CALLOC(m + 1, sizeof *prev), *cur = KB_CALLOC(m + 1, sizeof *cur);
    for (size_t i = 1; i <= n; i++) {
        cur[0] = 0;
        for (size_t j = 1; j <= m; j++) {
            int up = prev[j], left = cur[j - 1];
            if (x[i - 1] == y[j - 1]) {
                cur[j] = prev[j - 1] + 1;
            } else {
                cur[j] = up > left ? up : left;
                if (up_wins ? up > left : left > up) {
                    size_t b = (i - 1) * m + (j - 1);
                    d.bits[b >> 6] |= 1ull << (b & 63);
                }
            }
        }
        int *t = prev;
        prev = cur;
        cur = t;
    }
    free(prev);
    free(cur);
    return d;
}

/* the bit of cell (i, j), 1 <= i <= n, 1 <= j <= m */
static int lcs_bit(const lcs_dirs *d, size_t i, size_t j) {
    size_t b = (i - 1) * d->m + (j - 1);
    return (int)(d->bits[b >> 6] >> (b & 63) & 1);
}

/* ================================================================ rouge 1.0.1 */

typedef struct {
    int *w;    /* word ids */
    size_t n;
} wordseq;

/* Sentences of rouge 1.0.1: text.split("."), keeping pieces of non-zero
 * length, each normalised to " ".join(piece.split()) and then split on " "
 * (so a piece of only spaces becomes the one-word sentence [""]). */
static size_t rouge1_sentences(const ustr *u, tok_intern *in, wordseq **out) {
    size_t cnt = 0, cap = 0;
    wordseq *s = NULL;
    size_t start = 0;
    for (size_t i = 0; i <= u->n; i++) {
        if (i < u->n && u->v[i] != '.') continue;
        if (i > start) {
            if (cnt == cap) {
                cap = cap ? cap * 2 : 8;
                s = KB_REALLOC(s, cap * sizeof *s);
            }
            uspan *sp;
            size_t nw = ustr_split_ws(u->v + start, i - start, &sp);
            wordseq ws;
            ws.n = nw ? nw : 1;
            ws.w = KB_MALLOC(ws.n * sizeof *ws.w);
            if (!nw)
                ws.w[0] = intern_id(in, NULL, 0);
            for (size_t k = 0; k < nw; k++)
                ws.w[k] = intern_id(in, u->v + start + sp[k].off, sp[k].len);
            free(sp);
            s[cnt++] = ws;
        }
        start = i + 1;
    }
    *out = s;
    return cnt;
}

static void free_sents(wordseq *s, size_t n) {
    for (size_t i = 0; i < n; i++) free(s[i].w);
    free(s);
}

static size_t count_distinct(const wordseq *s, size_t n, int nids, unsigned char *seen) {
    memset(seen, 0, (size_t)nids);
    size_t d = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < s[i].n; k++)
            if (!seen[s[i].w[k]]) {
                seen[s[i].w[k]] = 1;
                d++;
            }
    return d;
}

double rouge_l_f(const char *hyp, const char *ref) {
    ustr uh = {0}, ur = {0};
    ustr_from_utf8(&uh, hyp);
    ustr_from_utf8(&ur, ref);
    tok_intern in;
    intern_init(&in);
    wordseq *hs, *rs;
    size_t nh = rouge1_sentences(&uh, &in, &hs);
    size_t nr = rouge1_sentences(&ur, &in, &rs);
    double f = 0.0;
    if (nh && nr) {
        unsigned char *seen = KB_MALLOC((size_t)in.n + 1);
        size_t m = count_distinct(rs, nr, in.n, seen);
        size_t n = count_distinct(hs, nh, in.n, seen);
        /* union over (reference sentence, hypothesis sentence) pairs of the
         * words of the reconstructed LCS, taken from the reference side */
        unsigned char *uni = KB_CALLOC((size_t)in.n + 1, 1);
        size_t llcs = 0;
        for (size_t r = 0; r < nr; r++)
            for (size_t h = 0; h < nh; h++) {
                const int *x = rs[r].w, *y = hs[h].w;
                size_t xn = rs[r].n, yn = hs[h].n;
                lcs_dirs t = lcs_directions(x, xn, y, yn, 1);
                size_t i = xn, j = yn;
                while (i > 0 && j > 0) {
                    if (x[i - 1] == y[j - 1]) {
                        if (!uni[x[i - 1]]) {
                            uni[x[i - 1]] = 1;
                            llcs++;
                        }
                        i--;
                        j--;
                    } else if (lcs_bit(&t, i, j)) { /* T[i-1][j] > T[i][j-1] */
                        i--;
                    } else {
                        j--;
                    }
                }
                free(t.bits);
            }
        double r_lcs = (double)llcs / (double)m;
        double p_lcs = (double)llcs / (double)n;
        f = 2.0 * ((p_lcs * r_lcs) / (p_lcs + r_lcs + 1e-8));
        free(seen);
        free(uni);
    }
    free_sents(hs, nh);
    free_sents(rs, nr);
    intern_free(&in);
    ustr_free(&uh);
    ustr_free(&ur);
    return f;
}

/* ================================================================ rouge_score Lsum */

/* Sentences of rougeLsum: text.split("\n") keeping non-empty pieces; tokens of
 * a piece: maximal runs of [a-z0-9] in piece.lower(). */
static size_t lsum_sentences(const ustr *u, tok_intern *in, wordseq **out) {
    size_t cnt = 0, cap = 0;
    wordseq *s = NULL;
    ustr low = {0};
    size_t start = 0;
    for (size_t i = 0; i <= u->n; i++) {
        if (i < u->n && u->v[i] != '\n') continue;
        if (i > start) {
            if (cnt == cap) {
                cap = cap ? cap * 2 : 8;
                s = KB_REALLOC(s, cap * sizeof *s);
            }
            ustr_lower(&low, u->v + start, i - start);
            wordseq ws = {NULL, 0};
            size_t wc = 0;
            for (size_t k = 0; k < low.n;) {
                uint32_t c = low.v[k];
                if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) {
                    k++;
                    continue;
                }
                size_t b = k;
                while (k < low.n && ((low.v[k] >= 'a' && low.v[k] <= 'z') ||
                                     (low.v[k] >= '0' && low.v[k] <= '9')))
                    k++;
                if (ws.n == wc) {
                    wc = wc ? wc * 2 : 16;
                    ws.w = KB_REALLOC(ws.w, wc * sizeof *ws.w);
                }
                ws.w[ws.n++] = intern_id(in, low.v + b, k - b);
            }
            s[cnt++] = ws;
        }
        start = i + 1;
    }
    ustr_free(&low);
    *out = s;
    return cnt;
}

double rouge_lsum_f(const char *target, const char *prediction) {
    ustr ut = {0}, up = {0};
    ustr_from_utf8(&ut, target);
    ustr_from_utf8(&up, prediction);
    tok_intern in;
    intern_init(&in);
    wordseq *rs, *cs;
    size_t nr = lsum_sentences(&ut, &in, &rs);
    size_t nc = lsum_sentences(&up, &in, &cs);
    double f = 0.0;
    size_t m = 0, n = 0;
    for (size_t i = 0; i < nr; i++) m += rs[i].n;
    for (size_t i = 0; i < nc; i++) n += cs[i].n;
    if (nr && nc && m && n) {
        /* token counts prevent counting a token more often than it occurs */
        int *cnt_r = KB_CALLOC((size_t)in.n + 1, sizeof *cnt_r);
        int *cnt_c = KB_CALLOC((size_t)in.n + 1, sizeof *cnt_c);
        for (size_t i = 0; i < nr; i++)
            for (size_t k = 0; k < rs[i].n; k++) cnt_r[rs[i].w[k]]++;
        for (size_t i = 0; i < nc; i++)
            for (size_t k = 0; k < cs[i].n; k++) cnt_c[cs[i].w[k]]++;
        size_t hits = 0;
        for (size_t r = 0; r < nr; r++) {
            const int *x = rs[r].w;
            size_t xn = rs[r].n;
            if (!xn) continue;
            /* union of LCS index sets of x against every candidate sentence */
            unsigned char *mark = KB_CALLOC(xn, 1);
            for (size_t c = 0; c < nc; c++) {
                const int *y = cs[c].w;
                size_t yn = cs[c].n;
                if (!yn) continue;
                lcs_dirs t = lcs_directions(x, xn, y, yn, 0);
                size_t i = xn, j = yn;
                while (i > 0 && j > 0) {
                    if (x[i - 1] == y[j - 1]) {
                        mark[i - 1] = 1;
                        i--;
                        j--;
                    } else if (lcs_bit(&t, i, j)) { /* T[i][j-1] > T[i-1][j] */
                        j--;
                    } else {
                        i--;
                    }
                }
                free(t.bits);
            }
            for (size_t i = 0; i < xn; i++) {
                if (!mark[i]) continue;
                int tk = x[i];
                if (cnt_c[tk] > 0 && cnt_r[tk] > 0) {
                    hits++;
                    cnt_c[tk]--;
                    cnt_r[tk]--;
                }
            }
            free(mark);
        }
        double recall = (double)hits / (double)m;
        double precision = (double)hits / (double)n;
        f = precision + recall > 0 ? 2 * precision * recall / (precision + recall) : 0.0;
        free(cnt_r);
        free(cnt_c);
    }
    free_sents(rs, nr);
    free_sents(cs, nc);
    intern_free(&in);
    ustr_free(&ut);
    ustr_free(&up);
    return f;
}

/* ================================================================ BLEU */

/* re.split(r"\s+", text.strip()): whitespace-separated tokens, or the single
 * empty token when the stripped text is empty. */
static size_t bleu_tokens(const char *text, tok_intern *in, int **out) {
    ustr u = {0};
    ustr_from_utf8(&u, text);
    size_t b, e;
    ustr_strip(u.v, u.n, &b, &e);
    uspan *sp;
    size_t n = ustr_split_ws(u.v + b, e - b, &sp);
    int *ids = KB_MALLOC((n ? n : 1) * sizeof *ids);
    if (!n) {
        ids[0] = intern_id(in, NULL, 0);
        n = 1;
    } else {
        for (size_t k = 0; k < n; k++) ids[k] = intern_id(in, u.v + b + sp[k].off, sp[k].len);
    }
    free(sp);
    ustr_free(&u);
    *out = ids;
    return n;
}

static const int *g_ngram_base;
static size_t g_ngram_n;

static int cmp_ngram(const void *pa, const void *pb) {
    size_t a = *(const size_t *)pa, b = *(const size_t *)pb;
    for (size_t k = 0; k < g_ngram_n; k++) {
        int x = g_ngram_base[a + k], y = g_ngram_base[b + k];
        if (x != y) return x < y ? -1 : 1;
    }
    return 0;
}

/* Count of each n-gram of seq, as a sorted list of start positions; returns
 * the number of n-grams. */
static size_t ngram_sorted(const int *seq, size_t len, size_t n, size_t **starts) {
    size_t cnt = len >= n ? len - n + 1 : 0;
    size_t *s = KB_MALLOC((cnt ? cnt : 1) * sizeof *s);
    for (size_t i = 0; i < cnt; i++) s[i] = i;
    g_ngram_base = seq;
    g_ngram_n = n;
    qsort(s, cnt, sizeof *s, cmp_ngram);
    *starts = s;
    return cnt;
}

static int ngram_cmp2(const int *a, const int *b, size_t n) {
    for (size_t k = 0; k < n; k++)
        if (a[k] != b[k]) return a[k] < b[k] ? -1 : 1;
    return 0;
}

/* Modified (clipped) n-gram precision numerator and denominator. */
static void modified_precision(const int *hyp, size_t hn, const int *ref, size_t rn, size_t n,
                               long *num, long *den) {
    size_t *hs, *rs;
    size_t hc = ngram_sorted(hyp, hn, n, &hs);
    size_t rc = ngram_sorted(ref, rn, n, &rs);
    long clipped = 0;
    size_t i = 0, j = 0;
    while (i < hc) {
        size_t e = i;
        while (e < hc && ngram_cmp2(hyp + hs[i], hyp + hs[e], n) == 0) e++;
        while (j < rc && ngram_cmp2(ref + rs[j], hyp + hs[i], n) < 0) j++;
        size_t f = j;
        while (f < rc && ngram_cmp2(ref + rs[f], hyp + hs[i], n) == 0) f++;
        size_t hcount = e - i, rcount = f - j;
        clipped += (long)(hcount < rcount ? hcount : rcount);
        i = e;
        j = f;
    }
    free(hs);
    free(rs);
    *num = clipped;
    *den = hc > 0 ? (long)hc : 1; /* max(1, count) */
}

/* math.fsum of a few terms (Shewchuk's exact partials, as CPython). */
static double fsum(const double *x, int n) {
    double p[8];
    int np = 0;
    for (int k = 0; k < n; k++) {
        double v = x[k];
        int i = 0;
        for (int j = 0; j < np; j++) {
            double y = p[j];
            if (fabs(v) < fabs(y)) {
                double t = v;
                v = y;
                y = t;
            }
            double hi = v + y, lo = y - (hi - v);
            if (lo != 0.0) p[i++] = lo;
            v = hi;
        }
        np = i;
        p[np++] = v;
    }
    double hi = 0.0;
    if (np > 0) {
        hi = p[--np];
        while (np > 0) {
            double v = hi, y = p[--np];
            hi = v + y;
            double lo = y - (hi - v);
            if (lo != 0.0) {
                /* half-even correction of CPython's msum */
                if (np > 0 && ((lo < 0 && p[np - 1] < 0) || (lo > 0 && p[np - 1] > 0))) {
                    y = lo * 2;
                    v = hi + y;
                    if (y == v - hi) hi = v;
                }
                break;
            }
        }
    }
    return hi;
}

double bleu_method4(const char *hyp, const char *ref) {
    tok_intern in;
    intern_init(&in);
    int *h, *r;
    size_t hn = bleu_tokens(hyp, &in, &h);
    size_t rn = bleu_tokens(ref, &in, &r);
    long num[4], den[4];
    for (int k = 0; k < 4; k++) modified_precision(h, hn, r, rn, (size_t)k + 1, &num[k], &den[k]);
    double out = 0.0;
    if (num[0] != 0) {
        double bp;
        if (hn > rn)
            bp = 1.0;
        else if (hn == 0)
            bp = 0.0;
        else
            bp = exp(1.0 - (double)rn / (double)hn);
        double p[4];
        int pos[4];
        int incvnt = 1;
        for (int k = 0; k < 4; k++) {
            pos[k] = num[k] > 0;
            p[k] = (double)num[k] / (double)den[k];
            if (num[k] == 0 && hn > 1) {
                double numerator = 1.0 / ((double)((1L << incvnt) * 5) / log((double)hn));
                p[k] = numerator / (double)den[k];
                pos[k] = p[k] > 0;
                incvnt++;
            }
        }
        double terms[4];
        int nt = 0;
        for (int k = 0; k < 4; k++)
            if (pos[k]) terms[nt++] = 0.25 * log(p[k]);
        out = bp * exp(fsum(terms, nt));
    }
    free(h);
    free(r);
    intern_free(&in);
    return out;
}

/* ================================================================ repoqa */

static int fence_at(const ustr *s, size_t p) {
    return p + 3 <= s->n && (p == 0 || s->v[p - 1] == '\n') && s->v[p] == '`' &&
           s->v[p + 1] == '`' && s->v[p + 2] == '`';
}

char *repoqa_sanitize(const char *output) {
    ustr u = {0};
    ustr_from_utf8(&u, output);
    size_t b, e;
    ustr_strip(u.v, u.n, &b, &e);
    ustr s = {0};
    ustr_append(&s, u.v + b, e - b);
    ustr_free(&u);
    /* ^```(?:\w+)?\s*\n(.*?)(?=^```)```  with MULTILINE | DOTALL: the first match */
    for (size_t p = 0; p < s.n; p++) {
        if (!fence_at(&s, p)) continue;
        size_t q = p + 3;
        while (q < s.n && uni_isword(s.v[q])) q++;
        size_t r = q;
        while (r < s.n && uni_isspace(s.v[r])) r++;
        /* \s* is greedy and gives back characters until a newline follows */
        size_t nl = (size_t)-1;
        for (size_t t = r; t > q; t--)
            if (s.v[t - 1] == '\n') {
                nl = t - 1;
                break;
            }
        if (nl == (size_t)-1) continue;
        size_t start = nl + 1;
        for (size_t c = start; c + 3 <= s.n; c++)
            if (fence_at(&s, c)) {
                char *out = utf8_from_u32(s.v + start, c - start);
                ustr_free(&s);
                return out;
            }
    }
    char *out = utf8_from_u32(s.v, s.n);
    ustr_free(&s);
    return out;
}
