/* metrics.c - the metric registry and the string-matching metrics.
 *
 * Every metric is written from the definition in benchmarks.md and the
 * behaviour of the reference scorer it is named after (LongBench metrics.py,
 * RULER's evaluate constants, SCBench compute_scores.py, RocketKV's passkey
 * scores); docs/METRICS.md gives each definition and the known differences.
 * The text-similarity algorithms (difflib, ROUGE, BLEU) are in metrics_seq.c. */
#include "harness/metrics.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/metrics_impl.h"
#include "kernels/kb_base.h"

/* ================================================================ helpers */

double py_round(double x, int ndigits) {
    if (!isfinite(x)) return x;
    /* printf rounds the exact binary value half-to-even, as CPython's round */
    char buf[512];
    snprintf(buf, sizeof buf, "%.*f", ndigits, x);
    return strtod(buf, NULL);
}

double metric_task_score(double sum, int n) {
    if (n <= 0) return NAN;
    return py_round(100.0 * sum / (double)n, 2);
}

char *metric_first_line(const char *pred) {
    while (*pred == '\n') pred++;
    const char *e = strchr(pred, '\n');
    size_t n = e ? (size_t)(e - pred) : strlen(pred);
    char *out = KB_MALLOC(n + 1);
    memcpy(out, pred, n);
    out[n] = 0;
    return out;
}

static void u_of(ustr *u, const char *s) { ustr_from_utf8(u, s); }

static const uint32_t *lit(const char *ascii, uint32_t *buf, size_t *n) {
    size_t k = 0;
    for (; ascii[k]; k++) buf[k] = (unsigned char)ascii[k];
    *n = k;
    return buf;
}

/* Token-multiset F1 (SQuAD style): 0 when nothing is shared. */
static double f1_tokens(const int *p, size_t np, const int *g, size_t ng, int nids) {
    if (!np || !ng) return 0.0;
    int *cnt = KB_CALLOC((size_t)nids + 1, sizeof *cnt);
    for (size_t i = 0; i < ng; i++) cnt[g[i]]++;
    size_t same = 0;
    for (size_t i = 0; i < np; i++)
        if (cnt[p[i]] > 0) {
            cnt[p[i]]--;
            same++;
        }
    free(cnt);
    if (!same) return 0.0;
    double precision = 1.0 * (double)same / (double)np;
    double recall = 1.0 * (double)same / (double)ng;
    return (2 * precision * recall) / (precision + recall);
}

/* ================================================================ needle */

static double m_exact_match(const char *pred, const char *const *ans, int na,
                            const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, np = {0}, ua = {0}, ng = {0};
    u_of(&u, pred);
    normalize_answer(&np, u.v, u.n);
    double best = 0.0;
    for (int k = 0; k < na && best < 1.0; k++) {
        u_of(&ua, ans[k]);
        normalize_answer(&ng, ua.v, ua.n);
        if (ustr_contains(np.v, np.n, ng.v, ng.n)) best = 1.0;
    }
    ustr_free(&u);
    ustr_free(&np);
    ustr_free(&ua);
    ustr_free(&ng);
    return best;
}

/* Length of the longest common substring of a[0..na) and b[0..nb), in time
 * linear in na + nb (expected): a suffix automaton of a, through which b
 * runs, keeping the longest suffix of b[0..j] that is a substring of a. The
 * table DP it replaces took na * nb steps (43 s for 200,000 x 40,000 words'
 * characters). Transitions live in an open-addressing hash keyed by (state,
 * code point), with a list per state for the copies a clone makes. */
typedef struct lcs_sam {
    int *len, *link, *head;         /* per state; head: first edge */
    uint32_t *ec;                   /* per edge: code point */
    int *eto, *enext, *estate;      /* per edge: target, next edge of the state, owner */
    int *slot;                      /* hash: edge index or -1 */
    size_t mask;
    int nstates, nedges;
} lcs_sam;

static size_t lcs_hash(int st, uint32_t c) {
    uint64_t h = ((uint64_t)(uint32_t)st << 32 | c) * 0x9E3779B97F4A7C15ULL;
    return (size_t)(h >> 20);
}

static int lcs_edge(const lcs_sam *m, int st, uint32_t c) {
    for (size_t h = lcs_hash(st, c) & m->mask;; h = (h + 1) & m->mask) {
        int e = m->slot[h];
        if (e < 0) return -1;
        if (m->estate[e] == st && m->ec[e] == c) return e;
    }
}

static void lcs_add_edge(lcs_sam *m, int st, uint32_t c, int to) {
    int e = m->nedges++;
    m->ec[e] = c;
    m->eto[e] = to;
    m->estate[e] = st;
    m->enext[e] = m->head[st];
    m->head[st] = e;
    size_t h = lcs_hash(st, c) & m->mask;
    while (m->slot[h] >= 0) h = (h + 1) & m->mask;
    m->slot[h] = e;
}

static size_t longest_common_substring(const uint32_t *a, size_t na, const uint32_t *b, size_t nb) {
    if (!na || !nb) return 0;
    size_t ns = 2 * na + 1, ne = 3 * na + 1, cap = 1;
    while (cap < 2 * ne) cap *= 2;
    lcs_sam m = {.mask = cap - 1};
    m.len = KB_MALLOC(ns * sizeof(int));
    m.link = KB_MALLOC(ns * sizeof(int));
    m.head = KB_MALLOC(ns * sizeof(int));
    m.ec = KB_MALLOC(ne * sizeof(uint32_t));
    m.eto = KB_MALLOC(ne * sizeof(int));
    m.enext = KB_MALLOC(ne * sizeof(int));
    m.estate = KB_MALLOC(ne * sizeof(int));
    m.slot = KB_MALLOC(cap * sizeof(int));
    memset(m.slot, 0xff, cap * sizeof(int)); /* -1 */
    m.len[0] = 0;
    m.link[0] = -1;
    m.head[0] = -1;
    m.nstates = 1;
    int last = 0;
    for (size_t i = 0; i < na; i++) { /* the standard online construction */
        uint32_t c = a[i];
        int cur = m.nstates++;
        m.len[cur] = m.len[last] + 1;
        m.head[cur] = -1;
        int p = last;
        while (p >= 0 && lcs_edge(&m, p, c) < 0) {
            lcs_add_edge(&m, p, c, cur);
            p = m.link[p];
        }
        if (p < 0) {
            m.link[cur] = 0;
        } else {
            int q = m.eto[lcs_edge(&m, p, c)];
            if (m.len[p] + 1 == m.len[q]) {
                m.link[cur] = q;
            } else {
                int cl = m.nstates++;
                m.len[cl] = m.len[p] + 1;
                m.link[cl] = m.link[q];
                m.head[cl] = -1;
                for (int e = m.head[q]; e >= 0; e = m.enext[e]) lcs_add_edge(&m, cl, m.ec[e], m.eto[e]);
                for (int e; p >= 0 && m.eto[e = lcs_edge(&m, p, c)] == q; p = m.link[p]) m.eto[e] = cl;
                m.link[q] = m.link[cur] = cl;
            }
        }
        last = cur;
    }
    size_t best = 0, l = 0;
    int v = 0;
    for (size_t j = 0; j < nb; j++) {
        int e;
        while (v && (e = lcs_edge(&m, v, b[j])) < 0) {
            v = m.link[v];
            l = (size_t)m.len[v];
        }
        if ((e = lcs_edge(&m, v, b[j])) >= 0) {
            v = m.eto[e];
            l++;
        } else {
            v = 0;
            l = 0;
        }
        if (l > best) best = l;
    }
    free(m.len);
    free(m.link);
    free(m.head);
    free(m.ec);
    free(m.eto);
    free(m.enext);
    free(m.estate);
    free(m.slot);
    return best;
}

static double m_partial_match(const char *pred, const char *const *ans, int na,
                              const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, np = {0}, ua = {0}, ng = {0};
    u_of(&u, pred);
    normalize_answer(&np, u.v, u.n);
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        u_of(&ua, ans[k]);
        normalize_answer(&ng, ua.v, ua.n);
        double s = ng.n ? (double)longest_common_substring(ng.v, ng.n, np.v, np.n) / (double)ng.n
                        : 1.0;
        if (s > best) best = s;
    }
    ustr_free(&u);
    ustr_free(&np);
    ustr_free(&ua);
    ustr_free(&ng);
    return best;
}

/* ================================================================ RULER */

/* RULER's postprocess_pred: strip, map control characters U+0000..U+001F to
 * newlines, strip again; then lowercase for the case-insensitive match. */
static void ruler_pred(ustr *out, const char *pred) {
    ustr u = {0}, t = {0};
    u_of(&u, pred);
    size_t b, e;
    ustr_strip(u.v, u.n, &b, &e);
    for (size_t i = b; i < e; i++) ustr_push(&t, u.v[i] < 0x20 ? '\n' : u.v[i]);
    ustr_strip(t.v, t.n, &b, &e);
    /* t.v is NULL for an empty prediction and NULL + 0 is undefined in C
     * (found by tests/fuzz/fuzz_jsonl.c under clang's UBSan) */
    ustr_lower(out, t.v ? t.v + b : t.v, e - b);
    ustr_free(&u);
    ustr_free(&t);
}

static int count_lower_in(const ustr *lp, const char *const *ans, int na) {
    ustr ua = {0}, la = {0};
    int hits = 0;
    for (int k = 0; k < na; k++) {
        u_of(&ua, ans[k]);
        ustr_lower(&la, ua.v, ua.n);
        if (ustr_contains(lp->v, lp->n, la.v, la.n)) hits++;
    }
    ustr_free(&ua);
    ustr_free(&la);
    return hits;
}

static double m_string_match_all(const char *pred, const char *const *ans, int na,
                                 const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr lp = {0};
    ruler_pred(&lp, pred);
    double s = (double)count_lower_in(&lp, ans, na) / (double)na;
    ustr_free(&lp);
    return s;
}

static double m_string_match_part(const char *pred, const char *const *ans, int na,
                                  const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr lp = {0};
    ruler_pred(&lp, pred);
    double s = count_lower_in(&lp, ans, na) > 0 ? 1.0 : 0.0;
    ustr_free(&lp);
    return s;
}

/* ================================================================ SCBench */

/* SCBench's string_match_all: no post-processing, rounded to 2 decimals per
 * sample (round(score, 2)). */
static double m_scbench_string_match_all(const char *pred, const char *const *ans, int na,
                                         const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, lp = {0};
    u_of(&u, pred);
    ustr_lower(&lp, u.v, u.n);
    double s = (double)count_lower_in(&lp, ans, na) / (double)na;
    ustr_free(&u);
    ustr_free(&lp);
    return py_round(s, 2);
}

static double m_substring(const char *pred, const char *const *ans, int na,
                          const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, ua = {0};
    u_of(&u, pred);
    double s = 0.0;
    for (int k = 0; k < na && s == 0.0; k++) {
        u_of(&ua, ans[k]);
        if (ustr_contains(u.v, u.n, ua.v, ua.n)) s = 1.0;
    }
    ustr_free(&u);
    ustr_free(&ua);
    return s;
}

/* pred.strip().upper(), then each answer.upper() as a substring (or, strict,
 * as a prefix). */
static double qa_eng(const char *pred, const char *const *ans, int na, int strict) {
    ustr u = {0}, up = {0}, ua = {0}, uu = {0};
    u_of(&u, pred);
    size_t b, e;
    ustr_strip(u.v, u.n, &b, &e);
    ustr_upper(&up, u.v + b, e - b);
    double s = 0.0;
    for (int k = 0; k < na && s == 0.0; k++) {
        u_of(&ua, ans[k]);
        ustr_upper(&uu, ua.v, ua.n);
        if (strict ? (uu.n <= up.n && ustr_eq(up.v, uu.n, uu.v, uu.n))
                   : ustr_contains(up.v, up.n, uu.v, uu.n))
            s = 1.0;
    }
    ustr_free(&u);
    ustr_free(&up);
    ustr_free(&ua);
    ustr_free(&uu);
    return s;
}

static double m_qa_eng(const char *pred, const char *const *ans, int na,
                       const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    return qa_eng(pred, ans, na, 0);
}

static double m_many_shot_strict(const char *pred, const char *const *ans, int na,
                                 const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    return qa_eng(pred, ans, na, 1);
}

static double m_qa_chn(const char *pred, const char *const *ans, int na,
                       const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, np = {0}, ua = {0}, ng = {0};
    tok_intern in;
    intern_init(&in);
    u_of(&u, pred);
    normalize_zh_answer(&np, u.v, u.n);
    int *pi = KB_MALLOC((np.n + 1) * sizeof *pi);
    for (size_t i = 0; i < np.n; i++) pi[i] = intern_id(&in, &np.v[i], 1);
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        u_of(&ua, ans[k]);
        normalize_zh_answer(&ng, ua.v, ua.n);
        int *gi = KB_MALLOC((ng.n + 1) * sizeof *gi);
        for (size_t i = 0; i < ng.n; i++) gi[i] = intern_id(&in, &ng.v[i], 1);
        double f = f1_tokens(pi, np.n, gi, ng.n, in.n);
        if (f > best) best = f;
        free(gi);
    }
    free(pi);
    intern_free(&in);
    ustr_free(&u);
    ustr_free(&np);
    ustr_free(&ua);
    ustr_free(&ng);
    return best;
}

static int label_has(ustr *labels, int nl, const uint32_t *v, size_t n) {
    for (int k = 0; k < nl; k++)
        if (ustr_eq(labels[k].v, labels[k].n, v, n)) return 1;
    return 0;
}

/* InfiniteBench/SCBench longbook_choice_eng: the label is [option text,
 * option letter] (all answers together). */
static double m_choice(const char *pred, const char *const *ans, int na,
                       const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr *lab = KB_CALLOC((size_t)na, sizeof *lab);
    for (int k = 0; k < na; k++) u_of(&lab[k], ans[k]);
    ustr u = {0}, p = {0}, q = {0};
    u_of(&u, pred);
    size_t b, e;
    ustr_strip(u.v, u.n, &b, &e);
    ustr_append(&p, u.v + b, e - b);
    double s = 0.0;
    if (p.n == 0) goto done;
    if (p.v[0] == 'A' || p.v[0] == 'B' || p.v[0] == 'C' || p.v[0] == 'D') {
        s = label_has(lab, na, p.v, 1);
        goto done;
    }
    if (label_has(lab, na, p.v, p.n)) {
        s = 1.0;
        goto done;
    }
    /* punctuation to spaces, then runs of spaces to one space */
    for (size_t i = 0; i < p.n; i++) {
        uint32_t c = p.v[i];
        if (c == '\n' || c == '"' || c == '\'' || c == '.' || c == ',' || c == '?' || c == '!' ||
            c == '{' || c == '}')
            p.v[i] = ' ';
    }
    for (size_t i = 0; i < p.n; i++)
        if (!(p.v[i] == ' ' && q.n && q.v[q.n - 1] == ' ')) ustr_push(&q, p.v[i]);
    static const char *const prefixes[] = {"answer is:", "answer:", "answer is", "option is"};
    for (size_t k = 0; k < KB_ARRAY_LEN(prefixes); k++) {
        uint32_t buf[16];
        size_t pn;
        const uint32_t *pv = lit(prefixes[k], buf, &pn);
        size_t idx = ustr_find(q.v, q.n, pv, pn, 0);
        if (idx == (size_t)-1) continue;
        if (q.n < idx + pn + 1) goto done; /* ends with the prefix */
        const uint32_t *after = q.v + idx + pn + 1;
        size_t an = q.n - (idx + pn + 1);
        for (int l = 0; l < na; l++)
            if (lab[l].n <= an && ustr_eq(after, lab[l].n, lab[l].v, lab[l].n)) {
                s = 1.0;
                break;
            }
        goto done;
    }
    {
        /* the first word that is a substring of "ABCD" */
        uspan *sp;
        size_t nw = ustr_split_ws(q.v, q.n, &sp);
        static const uint32_t abcd[] = {'A', 'B', 'C', 'D'};
        for (size_t w = 0; w < nw; w++)
            if (ustr_contains(abcd, 4, q.v + sp[w].off, sp[w].len)) {
                s = label_has(lab, na, q.v + sp[w].off, sp[w].len);
                break;
            }
        free(sp);
    }
done:
    for (int k = 0; k < na; k++) ustr_free(&lab[k]);
    free(lab);
    ustr_free(&u);
    ustr_free(&p);
    ustr_free(&q);
    return s;
}

/* Gold of math_find (ASCII, surrounding whitespace ignored): an integer
 * [+-]?[0-9]+, compared as int(float(number found)) == gold exactly, or a
 * decimal float [+-]?(d+[.d*]|.d+)([eE][+-]?d+)?, compared as floats; any
 * other gold scores 0. */
static double mf_one(const ustr *pred, const char *gold) {
    /* first \d+\.\d+|\d+ (any Unicode decimal digit) */
    size_t i = 0;
    while (i < pred->n && uni_decimal(pred->v[i]) < 0) i++;
    if (i == pred->n) return 0.0;
    size_t j = i;
    while (j < pred->n && uni_decimal(pred->v[j]) >= 0) j++;
    if (j + 1 < pred->n && pred->v[j] == '.' && uni_decimal(pred->v[j + 1]) >= 0) {
        j++;
        while (j < pred->n && uni_decimal(pred->v[j]) >= 0) j++;
    }
    /* the whole match, however long: float() of 600 digits with leading
     * zeros, or of a long fraction, is a small number (a fixed 512-byte
     * buffer used to score such a match 0) */
    char *num = KB_MALLOC(j - i + 1);
    for (size_t k = i; k < j; k++)
        num[k - i] = pred->v[k] == '.' ? '.' : (char)('0' + uni_decimal(pred->v[k]));
    num[j - i] = 0;
    double v = strtod(num, NULL); /* correctly rounded, as float() */
    free(num);
    /* the gold */
    while (*gold == ' ' || (*gold >= '\t' && *gold <= '\r')) gold++;
    size_t gl = strlen(gold);
    while (gl && (gold[gl - 1] == ' ' || (gold[gl - 1] >= '\t' && gold[gl - 1] <= '\r'))) gl--;
    size_t k = 0;
    int neg = 0;
    if (k < gl && (gold[k] == '+' || gold[k] == '-')) neg = gold[k++] == '-';
    size_t ds = k;
    while (k < gl && gold[k] >= '0' && gold[k] <= '9') k++;
    if (k == gl && k > ds) {
        /* integer gold: int(float(num)) == gold, exactly */
        if (!isfinite(v)) return 0.0;
        while (ds + 1 < gl && gold[ds] == '0') ds++;
        char gd[512];
        size_t gn = gl - ds < sizeof gd - 1 ? gl - ds : sizeof gd - 1;
        memcpy(gd, gold + ds, gn);
        gd[gn] = 0;
        if (neg && strcmp(gd, "0") != 0) return 0.0; /* the number found has no sign */
        char vd[512];
        snprintf(vd, sizeof vd, "%.0f", trunc(v));
        return strcmp(vd, gd) == 0 ? 1.0 : 0.0;
    }
    /* float gold: ASCII [+-]?(digits[.digits]|.digits)([eE][+-]?digits)? */
    k = 0;
    if (k < gl && (gold[k] == '+' || gold[k] == '-')) k++;
    size_t d0 = k;
    while (k < gl && gold[k] >= '0' && gold[k] <= '9') k++;
    size_t nd = k - d0;
    if (k < gl && gold[k] == '.') {
        k++;
        size_t f0 = k;
        while (k < gl && gold[k] >= '0' && gold[k] <= '9') k++;
        nd += k - f0;
    }
    if (!nd) return 0.0;
    if (k < gl && (gold[k] == 'e' || gold[k] == 'E')) {
        k++;
        if (k < gl && (gold[k] == '+' || gold[k] == '-')) k++;
        size_t e0 = k;
        while (k < gl && gold[k] >= '0' && gold[k] <= '9') k++;
        if (k == e0) return 0.0;
    }
    if (k != gl) return 0.0;
    char *gbuf = KB_MALLOC(gl + 1);
    memcpy(gbuf, gold, gl);
    gbuf[gl] = 0;
    double g = strtod(gbuf, NULL);
    free(gbuf);
    if (!isfinite(g)) return 0.0;
    return v == g ? 1.0 : 0.0;
}

static double m_mf(const char *pred, const char *const *ans, int na, const char *const *cls,
                   int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0};
    u_of(&u, pred);
    double s = 0.0;
    for (int k = 0; k < na && s == 0.0; k++) s = mf_one(&u, ans[k]);
    ustr_free(&u);
    return s;
}

/* first_int_match: the first run of ASCII digits ("" if none) equals the gold. */
static double m_passkey(const char *pred, const char *const *ans, int na,
                        const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    const char *p = pred;
    while (*p && !(*p >= '0' && *p <= '9')) p++;
    size_t n = 0;
    while (p[n] >= '0' && p[n] <= '9') n++;
    for (int k = 0; k < na; k++)
        if (strlen(ans[k]) == n && memcmp(ans[k], p, n) == 0) return 1.0;
    return 0.0;
}

static double m_rouge_lsum(const char *pred, const char *const *ans, int na,
                           const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        double f = rouge_lsum_f(ans[k], pred);
        if (f > best) best = f;
    }
    return best;
}

static double m_repoqa(const char *pred, const char *const *ans, int na,
                       const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    char *s = repoqa_sanitize(pred);
    double b0 = bleu_method4(s, ans[0]);
    int pass = b0 >= 0.8;
    for (int k = 1; k < na && pass; k++)
        if (bleu_method4(s, ans[k]) > b0) pass = 0;
    free(s);
    return pass ? 1.0 : 0.0;
}

static double m_repoqa_bleu(const char *pred, const char *const *ans, int na,
                            const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    (void)na;
    char *s = repoqa_sanitize(pred);
    double b = bleu_method4(s, ans[0]);
    free(s);
    return b;
}

/* ================================================================ LongBench */

static int *word_ids(const ustr *norm, tok_intern *in, size_t *n) {
    uspan *sp;
    size_t nw = ustr_split_ws(norm->v, norm->n, &sp);
    int *ids = KB_MALLOC((nw + 1) * sizeof *ids);
    for (size_t k = 0; k < nw; k++) ids[k] = intern_id(in, norm->v + sp[k].off, sp[k].len);
    free(sp);
    *n = nw;
    return ids;
}

static double m_qa_f1(const char *pred, const char *const *ans, int na,
                      const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, np = {0}, ua = {0}, ng = {0};
    tok_intern in;
    intern_init(&in);
    u_of(&u, pred);
    normalize_answer(&np, u.v, u.n);
    size_t pn;
    int *pi = word_ids(&np, &in, &pn);
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        u_of(&ua, ans[k]);
        normalize_answer(&ng, ua.v, ua.n);
        size_t gn;
        int *gi = word_ids(&ng, &in, &gn);
        double f = f1_tokens(pi, pn, gi, gn, in.n);
        if (f > best) best = f;
        free(gi);
    }
    free(pi);
    intern_free(&in);
    ustr_free(&u);
    ustr_free(&np);
    ustr_free(&ua);
    ustr_free(&ng);
    return best;
}

static double m_rouge_l(const char *pred, const char *const *ans, int na,
                        const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        double f = rouge_l_f(pred, ans[k]);
        if (f > best) best = f;
    }
    return best;
}

/* LongBench classification_score, including its list-mutation quirk: the
 * loop that removes classes contained in (but different from) the gold
 * removes while iterating, so the class right after a removed one is never
 * examined. The reference's fallback branch is unreachable (it compares a list
 * with 0), so a prediction that names no class scores 0. */
static double classification_one(const ustr *pred, const ustr *gold, ustr *cls, int nc) {
    int *list = KB_MALLOC(((size_t)nc + 1) * sizeof *list);
    int n = 0;
    for (int k = 0; k < nc; k++)
        if (ustr_contains(pred->v, pred->n, cls[k].v, cls[k].n)) list[n++] = k;
    for (int idx = 0; idx < n; idx++) {
        const ustr *t = &cls[list[idx]];
        if (ustr_contains(gold->v, gold->n, t->v, t->n) && !ustr_eq(t->v, t->n, gold->v, gold->n)) {
            /* list.remove(term): drop the first element equal to term */
            int first = 0;
            while (!ustr_eq(cls[list[first]].v, cls[list[first]].n, t->v, t->n)) first++;
            for (int m = first; m + 1 < n; m++) list[m] = list[m + 1];
            n--;
        }
    }
    double s = 0.0;
    for (int k = 0; k < n; k++)
        if (ustr_eq(cls[list[k]].v, cls[list[k]].n, gold->v, gold->n)) {
            s = 1.0 / (double)n;
            break;
        }
    free(list);
    return s;
}

static double m_classification(const char *pred, const char *const *ans, int na,
                               const char *const *cls, int nc) {
    ustr u = {0}, g = {0};
    ustr *uc = KB_CALLOC((size_t)nc + 1, sizeof *uc);
    for (int k = 0; k < nc; k++) u_of(&uc[k], cls[k]);
    u_of(&u, pred);
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        u_of(&g, ans[k]);
        double s = classification_one(&u, &g, uc, nc);
        if (s > best) best = s;
    }
    for (int k = 0; k < nc; k++) ustr_free(&uc[k]);
    free(uc);
    ustr_free(&u);
    ustr_free(&g);
    return best;
}

/* Fraction of the digit runs (re \d+, any Unicode decimal digit) of pred that
 * equal want as strings. */
static double digit_runs_equal(const ustr *p, const uint32_t *want, size_t wn) {
    size_t runs = 0, right = 0;
    for (size_t i = 0; i < p->n;) {
        if (uni_decimal(p->v[i]) < 0) {
            i++;
            continue;
        }
        size_t s = i;
        while (i < p->n && uni_decimal(p->v[i]) >= 0) i++;
        runs++;
        if (ustr_eq(p->v + s, i - s, want, wn)) right++;
    }
    return runs ? (double)right / (double)runs : 0.0;
}

static double m_count(const char *pred, const char *const *ans, int na,
                      const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, g = {0};
    u_of(&u, pred);
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        u_of(&g, ans[k]);
        double s = digit_runs_equal(&u, g.v, g.n);
        if (s > best) best = s;
    }
    ustr_free(&u);
    ustr_free(&g);
    return best;
}

/* The paragraph id of the gold: the digits of the first "<marker>\d+". */
static double retrieval(const char *pred, const char *const *ans, int na, const char *marker) {
    ustr u = {0}, g = {0}, mk = {0};
    u_of(&u, pred);
    u_of(&mk, marker);
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        u_of(&g, ans[k]);
        size_t from = 0, at;
        while ((at = ustr_find(g.v, g.n, mk.v, mk.n, from)) != (size_t)-1) {
            size_t s = at + mk.n, e = s;
            while (e < g.n && uni_decimal(g.v[e]) >= 0) e++;
            if (e > s) {
                double v = digit_runs_equal(&u, g.v + s, e - s);
                if (v > best) best = v;
                break;
            }
            from = at + 1;
        }
    }
    ustr_free(&u);
    ustr_free(&g);
    ustr_free(&mk);
    return best;
}

static double m_retrieval(const char *pred, const char *const *ans, int na,
                          const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    return retrieval(pred, ans, na, "Paragraph ");
}

static double m_retrieval_zh(const char *pred, const char *const *ans, int na,
                             const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    return retrieval(pred, ans, na, "\xe6\xae\xb5\xe8\x90\xbd"); /* "段落" */
}

/* LongBench code_sim_score: the first line (after leading newlines) with no
 * '`', '#' or "//", then fuzzywuzzy's fuzz.ratio = round(100 * difflib
 * ratio) (100 if equal, 0 if either is empty), / 100. */
static double m_code_sim(const char *pred, const char *const *ans, int na,
                         const char *const *cls, int nc) {
    (void)cls;
    (void)nc;
    ustr u = {0}, g = {0};
    u_of(&u, pred);
    size_t i = 0;
    while (i < u.n && u.v[i] == '\n') i++;
    size_t ls = 0, ln = 0;
    while (i <= u.n) {
        size_t e = i;
        while (e < u.n && u.v[e] != '\n') e++;
        int bad = 0;
        for (size_t k = i; k < e && !bad; k++)
            bad = u.v[k] == '`' || u.v[k] == '#' || (u.v[k] == '/' && k + 1 < e && u.v[k + 1] == '/');
        if (!bad) {
            ls = i;
            ln = e - i;
            break;
        }
        i = e + 1;
    }
    double best = 0.0;
    for (int k = 0; k < na; k++) {
        u_of(&g, ans[k]);
        double s;
        if (ustr_eq(u.v + ls, ln, g.v, g.n))
            s = 1.0;
        else if (ln == 0 || g.n == 0)
            s = 0.0;
        else
            s = rint(100.0 * difflib_ratio(u.v + ls, ln, g.v, g.n)) / 100.0;
        if (s > best) best = s;
    }
    ustr_free(&u);
    ustr_free(&g);
    return best;
}

/* ================================================================ registry */

static const kb_metric metrics[] = {
    {"exact_match",
     "needle: the normalised answer is a substring of the normalised prediction", m_exact_match, 0},
    {"partial_match",
     "needle: longest common substring of normalised answer and prediction / answer length",
     m_partial_match, 0},
    {"string_match_all", "RULER: fraction of references found (case-insensitive) in the prediction",
     m_string_match_all, 0},
    {"string_match_part", "RULER: 1 if any reference is found (case-insensitive)",
     m_string_match_part, 0},
    {"scbench_string_match_all",
     "SCBench vt: fraction of references found (case-insensitive), rounded to 2 decimals",
     m_scbench_string_match_all, 0},
    {"substring", "SCBench kv / prefix_suffix: an answer is a substring (case-sensitive)",
     m_substring, 0},
    {"scbench_qa_eng", "SCBench qa_eng: an uppercased answer is in the uppercased prediction",
     m_qa_eng, 0},
    {"scbench_many_shot", "SCBench many_shot: as scbench_qa_eng", m_qa_eng, 0},
    {"scbench_many_shot_strict",
     "SCBench many_shot, strict: the uppercased stripped prediction starts with an answer",
     m_many_shot_strict, 0},
    {"scbench_qa_chn", "SCBench qa_chn: character F1 after Chinese normalisation", m_qa_chn, 0},
    {"scbench_choice", "SCBench choice_eng: answers = [option text, letter]; first letter or "
                       "'answer is X' forms", m_choice, 0},
    {"scbench_mf", "SCBench mf: the first number in the prediction equals the gold", m_mf, 0},
    {"scbench_passkey", "SCBench passkey: the first run of digits equals the gold", m_passkey, 0},
    {"rouge_lsum", "SCBench summary: ROUGE-Lsum F (rouge_score, newline-split sentences)",
     m_rouge_lsum, 0},
    {"repoqa", "SCBench repoqa: BLEU >= 0.8 against answers[0] and no other answer closer",
     m_repoqa, 0},
    {"repoqa_bleu", "SCBench repoqa: the BLEU (method 4) of the sanitised output vs answers[0]",
     m_repoqa_bleu, 0},
    {"qa_f1", "LongBench: token F1 of normalised prediction and answer", m_qa_f1, 0},
    {"rouge_l", "LongBench: ROUGE-L F of the rouge 1.0.1 package", m_rouge_l, 0},
    {"classification", "LongBench trec: classes named in the prediction (reference quirk kept)",
     m_classification, 1},
    {"count", "LongBench passage_count: numbers equal to the gold / numbers found", m_count, 0},
    {"retrieval", "LongBench passage_retrieval_en: as count, for the gold's paragraph number",
     m_retrieval, 0},
    {"retrieval_zh", "LongBench passage_retrieval_zh: as retrieval, for the Chinese marker",
     m_retrieval_zh, 0},
    {"code_sim", "LongBench lcc / repobench-p: fuzz ratio of the first code line", m_code_sim, 0},
};

const kb_metric *metric_find(const char *name) {
    for (size_t i = 0; i < KB_ARRAY_LEN(metrics); i++)
        if (!strcmp(metrics[i].name, name)) return &metrics[i];
    return NULL;
}

int metric_count(void) { return (int)KB_ARRAY_LEN(metrics); }

const kb_metric *metric_at(int i) {
    return i >= 0 && i < metric_count() ? &metrics[i] : NULL;
}
