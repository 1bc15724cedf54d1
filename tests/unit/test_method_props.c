/* test_method_props.c - properties of the methods that do not need a full
 * brute-force run: equivalences (exact_topk with B >= L is full; hybrid with
 * p = 1, r = D, k >= L is full), RocketKV's kept set always holds the
 * window, group policies share one set per group, mark/rollback/extend
 * (multi-turn) against brute-force stage 1, the accounting of methods.md §1,
 * defaults, and bad parameters with their exact messages. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "method_harness.h"
#include "methods/budget.h"
#include "methods/common.h"
#include "methods/params.h"
#include "methods_brute.h"

typedef struct run {
    const kb_method_ops *ops;
    void *st;
    kb_method_params p;
} run;

static int start(run *r, const char *json, const scen *s) {
    kb_err e = {0};
    memset(r, 0, sizeof *r);
    if (method_params_parse_text(json, "test", &r->p, &e)) {
        fprintf(stderr, "params: %s\n", e.msg);
        return 1;
    }
    r->ops = r->p.ops;
    kb_method_ctx c = scen_ctx(s);
    kb_prefill_view v = scen_view(s);
    int rc = r->ops->layer_init(&r->p, &c, &v, &r->st, &e);
    if (rc) fprintf(stderr, "layer_init: %s\n", e.msg);
    view_free(&v);
    return rc;
}

static void step(run *r, const scen *s, int i, float *out) {
    r->ops->decode(r->st, s->q + (size_t)i * s->Hq * s->D, s->kn + (size_t)i * s->Hkv * s->D,
                   s->vn + (size_t)i * s->Hkv * s->D, s->L + i, out);
}
/* start, the first decode step, and the account after it: 0, or start's error */
static int start_step_account(run *r, const char *json, const scen *s, float *out, kb_account *a) {
    if (start(r, json, s)) return 1;
    step(r, s, 0, out);
    r->ops->account(r->st, a);
    return 0;
}

static double max_diff(const float *a, const float *b, int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs((double)a[i] - b[i]));
    return m;
}

/* exact_topk with B >= L + steps and hybrid with p = 1, r = D, k >= L both
 * equal Full KV (same f16 cache; f32 kernels: 1e-5). */
static void test_equivalences(void) {
    scen s;
    scen_make(&s, 8, 2, 64, 300, 4, K_RANDOM, 11);
    run f, e, h, q;
    CHECK(!start(&f, "{\"method\":\"full\"}", &s));
    CHECK(!start(&e, "{\"method\":\"exact_topk\",\"budget\":400}", &s));
    CHECK(!start(&h, "{\"method\":\"hybrid\",\"budget\":1000,\"page_size\":1,\"r\":64}", &s));
    CHECK(!start(&q, "{\"method\":\"quest\",\"budget\":4000}", &s));
    size_t n = (size_t)s.Hq * s.D;
    float *o1 = malloc(n * 4), *o2 = malloc(n * 4), *o3 = malloc(n * 4), *o4 = malloc(n * 4);
    for (int i = 0; i < s.N; i++) {
        step(&f, &s, i, o1);
        step(&e, &s, i, o2);
        step(&h, &s, i, o3);
        step(&q, &s, i, o4);
        CHECK_MSG(max_diff(o1, o2, (int)n) < 1e-5, "exact_topk B>=L vs full: %g", max_diff(o1, o2, (int)n));
        CHECK_MSG(max_diff(o1, o3, (int)n) < 1e-5, "hybrid p=1 r=D vs full: %g", max_diff(o1, o3, (int)n));
        CHECK_MSG(max_diff(o1, o4, (int)n) < 1e-5, "quest all pages vs full: %g", max_diff(o1, o4, (int)n));
        kb_account a;
        h.ops->account(h.st, &a);
        CHECK_EQ_INT(a.attended, s.L + i + 1);
    }
    f.ops->destroy(f.st);
    e.ops->destroy(e.st);
    h.ops->destroy(h.st);
    q.ops->destroy(q.st);
    free(o1);
    free(o2);
    free(o3);
    free(o4);
    scen_free(&s);
}

/* RocketKV keeps the window at every length; group policies: one set per group. */
static void test_window_and_groups(void) {
    static const int lens[] = {1, 2, 31, 32, 33, 100, 1000, 3000};
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        scen s;
        scen_make(&s, 12, 4, 32, lens[li], 2, (int)li % 5, 100 + li);
        s.S = lens[li] + 2;
        run r;
        CHECK(!start(&r, "{\"method\":\"rocketkv\",\"budget\":16}", &s));
        int rows;
        r.ops->decode_cache(r.st, 0, &rows);
        CHECK_EQ_INT(rows, s.Hkv);
        int Wo = s.L < 32 ? s.L : 32;
        for (int g = 0; g < rows; g++) {
            const kb_kvstream *c = r.ops->decode_cache(r.st, g, NULL);
            int found = 0;
            for (int t = 0; t < c->n; t++) found += c->pos[t] >= s.L - Wo;
            CHECK_MSG(found == Wo || c->n < Wo, "L=%d group %d holds %d of the %d window tokens", s.L, g, found, Wo);
            for (int t = 1; t < c->n; t++) CHECK(c->pos[t] > c->pos[t - 1]); /* chronological */
        }
        for (int h = 0; h < s.Hq; h++) /* all heads of a group see one cache */
            CHECK(r.ops->retained(r.st, h) == r.ops->retained(r.st, (h / 3) * 3));
        float *o = malloc((size_t)s.Hq * s.D * 4);
        step(&r, &s, 0, o);
        kb_account a;
        r.ops->account(r.st, &a);
        CHECK_EQ_INT(a.sel_streams, s.Hkv);
        CHECK_EQ_INT(a.sel_per_query_head, 0);
        free(o);
        r.ops->destroy(r.st);
        scen_free(&s);
    }
    /* group policies select one set per KV group; per_head one per query head */
    static const char *const cfg[][2] = {
        {"{\"method\":\"exact_topk\",\"budget\":32,\"gqa\":\"group_sum\"}", "0"},
        {"{\"method\":\"exact_topk\",\"budget\":32}", "1"},
        {"{\"method\":\"quest\",\"budget\":64,\"gqa\":\"group_sum\"}", "0"},
        {"{\"method\":\"quest\",\"budget\":64}", "1"},
        {"{\"method\":\"sparq\",\"budget\":64}", "0"},
        {"{\"method\":\"sparq\",\"budget\":64,\"gqa\":\"per_head\"}", "1"},
        {"{\"method\":\"hybrid\",\"budget\":64}", "0"},
        {"{\"method\":\"rocketkv_mt\",\"budget\":64}", "0"},
    };
    scen s;
    scen_make(&s, 12, 4, 32, 500, 1, K_RANDOM, 7);
    for (size_t i = 0; i < sizeof cfg / sizeof cfg[0]; i++) {
        run r;
        CHECK(!start(&r, cfg[i][0], &s));
        float *o = malloc((size_t)s.Hq * s.D * 4);
        step(&r, &s, 0, o);
        kb_account a;
        r.ops->account(r.st, &a);
        int per = cfg[i][1][0] == '1';
        CHECK_MSG(a.sel_streams == (per ? s.Hq : s.Hkv) && a.sel_per_query_head == per, "%s", cfg[i][0]);
        /* the decode cache has one row per selection row; under per_head row h
         * is query head h's stream (what fidelity.c and replay index by); the
         * methods that keep everything hand out the full cache */
        int dc_rows;
        r.ops->decode_cache(r.st, 0, &dc_rows);
        CHECK_MSG(dc_rows == (per ? s.Hq : s.Hkv), "%s: %d decode-cache rows", cfg[i][0], dc_rows);
        for (int h = 0; h < s.Hq && !r.ops->evicts; h++) /* (rocketkv_mt: a working set apart) */
            CHECK(r.ops->decode_cache(r.st, per ? h : h / 3, NULL) == r.ops->retained(r.st, h));
        free(o);
        r.ops->destroy(r.st);
    }
    /* snapkvpp (group_sum) shares a stream per group; snapkv (per_head) keeps G copies */
    run a, b;
    CHECK(!start(&a, "{\"method\":\"snapkvpp\",\"budget\":64}", &s));
    CHECK(!start(&b, "{\"method\":\"snapkv\",\"budget\":64}", &s));
    CHECK(a.ops->retained(a.st, 0) == a.ops->retained(a.st, 2));
    CHECK(b.ops->retained(b.st, 0) != b.ops->retained(b.st, 2));
    kb_account aa, ab;
    a.ops->account(a.st, &aa);
    b.ops->account(b.st, &ab);
    CHECK_CLOSE(aa.resident_tokens, 64, 0, 0);
    CHECK_CLOSE(ab.resident_tokens, 3 * 64, 0, 0); /* G = 3 copies per KV head */
    a.ops->destroy(a.st);
    b.ops->destroy(b.st);
    scen_free(&s);
}

/* Each query head's r dims of largest |q| (ties to the lower dim), summed over
 * the KV groups: *pairs counts a group's distinct (dim, sign) pairs (sign: q > 0,
 * else the "0 counts as -1" side), *dims its distinct dims. Brute force, for
 * the reads of hybrid and SparQ per head (methods.md §1, §4). */
static void top_abs_dims(const scen *s, int r, int *pairs, int *dims) {
    int D = s->D, G = s->Hq / s->Hkv;
    *pairs = *dims = 0;
    for (int g = 0; g < s->Hkv; g++) {
        char seen[2][64] = {{0}}, any[64] = {0};
        for (int hh = g * G; hh < (g + 1) * G; hh++) {
            const float *qh = s->q + (size_t)hh * D;
            char taken[64] = {0};
            for (int t = 0; t < r; t++) {
                int best = -1;
                for (int d = 0; d < D; d++)
                    if (!taken[d] && (best < 0 || fabsf(qh[d]) > fabsf(qh[best]))) best = d;
                taken[best] = 1;
                *pairs += !seen[qh[best] > 0][best];
                seen[qh[best] > 0][best] = 1;
                *dims += !any[best];
                any[best] = 1;
            }
        }
    }
}

/* The rows a step reads per KV head when every query head of a group picks its own set:
 * the union of the group's heads' sets, each set by the brute force of methods_brute.c
 * (pick: one head's query -> its slots), averaged over the KV heads. */
typedef int (*head_pick)(const br_hist *h, int g, const float *q, const int *list, int n, int *sel,
                         const int *arg);
static int pick_hybrid(const br_hist *h, int g, const float *q, const int *list, int n, int *sel,
                       const int *arg) {
    return br_hybrid(h, g, q, 1, list, n, arg[0], arg[1], arg[2], 0, sel, NULL, NULL);
}
static int pick_exact(const br_hist *h, int g, const float *q, const int *list, int n, int *sel,
                      const int *arg) {
    return br_exact_topk(h, g, q, 1, 0, list, n, arg[0], sel, NULL);
}
static double brute_group_union(const scen *s, head_pick pick, const int *arg) {
    int D = s->D, G = s->Hq / s->Hkv, n1 = s->L + 1;
    br_hist h;
    br_hist_init(&h, s->Hq, s->Hkv, D);
    for (int t = 0; t < s->L; t++)
        br_hist_push(&h, s->k + (size_t)t * s->Hkv * D, s->v + (size_t)t * s->Hkv * D, s->dt);
    br_hist_push(&h, s->kn, s->vn, s->dt);
    int *list = malloc((size_t)n1 * sizeof(int)), *sel = malloc((size_t)n1 * sizeof(int));
    char *in = malloc((size_t)n1);
    for (int t = 0; t < n1; t++) list[t] = t;
    double uni = 0;
    for (int g = 0; g < s->Hkv; g++) {
        memset(in, 0, (size_t)n1);
        for (int hh = g * G; hh < (g + 1) * G; hh++) {
            int c = pick(&h, g, s->q + (size_t)hh * D, list, n1, sel, arg);
            for (int t = 0; t < c; t++) in[sel[t]] = 1;
        }
        for (int t = 0; t < n1; t++) uni += in[t];
    }
    free(list);
    free(sel);
    free(in);
    br_hist_free(&h);
    return uni / s->Hkv;
}

/* Accounting of methods.md §1 on one step. */
static void test_accounting(void) {
    scen s;
    scen_make(&s, 8, 2, 64, 2000, 3, K_RANDOM, 21);
    s.N_new = 100;
    s.S = 2100;
    int D = 64, B = 256;
    double row = 2.0 * D * 2; /* f16 K+V bytes per token per KV head */
    float *o = malloc((size_t)s.Hq * D * 4);
    run r;
    kb_account a;
    /* rocketkv: the split with S = 2100 */
    int T, pb, p, rr, k;
    br_rocket_split(2100, B, 100, D, -1, &T, &pb, &p, &rr, &k);
    CHECK(!start(&r, "{\"method\":\"rocketkv\",\"budget\":256}", &s));
    for (int i = 0; i < 3; i++) step(&r, &s, i, o);
    r.ops->account(r.st, &a);
    int n = pb + 3, np = (n + p - 1) / p;
    CHECK_CLOSE(a.resident_tokens, n, 0, 0);
    CHECK_CLOSE(a.read_tokeq, k + (double)np * rr / (2.0 * D), 1e-9, 0);
    CHECK_CLOSE(a.approx_tokeq, (double)np * rr / (2.0 * D), 1e-9, 0);
    CHECK_MSG(a.read_tokeq <= B * 1.05, "rocketkv reads %g > B", a.read_tokeq);
    CHECK_CLOSE(a.attended, k, 0, 0);
    /* page summaries (min and max per dim and page) are kept in the KV dtype */
    CHECK_CLOSE(a.resident_bytes, 2 * n * row + 2 * (2.0 * np * D * 2), 1e-6, 0);
    CHECK(a.budget && a.budget->prompt_budget == pb && a.budget->p == p && a.budget->r == rr);
    CHECK(a.budget && a.budget->L == 2000); /* the prompt length stage 1 evicted from (replay's stats.json) */
    r.ops->destroy(r.st);
    /* the same in topk mode: k = B, approximation not charged */
    CHECK(!start(&r, "{\"method\":\"rocketkv\",\"budget\":256,\"budget_mode\":\"topk\"}", &s));
    for (int i = 0; i < 3; i++) step(&r, &s, i, o);
    r.ops->account(r.st, &a);
    CHECK_CLOSE(a.read_tokeq, B, 0, 0);
    CHECK(a.mode == KB_BUDGET_TOPK);
    r.ops->destroy(r.st);
    /* quest: P = 16 (ceil(4000/256) = 16), 8 pages; reads pages' min/max + attended */
    CHECK(!start_step_account(&r, "{\"method\":\"quest\",\"budget\":256}", &s, o, &a));
    CHECK(a.budget->P == 16 && a.budget->n_pages == 8);
    int nq = 2001, npq = (nq + 15) / 16;
    CHECK(a.read_tokeq >= npq + 128 - 1e-9 && a.read_tokeq <= npq + 4 * 128);
    CHECK_CLOSE(a.approx_tokeq, npq, 0, 0);
    CHECK_CLOSE(a.attended, 8 * 16 - 15, 0, 0); /* the current page holds 1 token (2001 % 16) */
    /* every token's K and V, and the 126 pages' min and max of 64 dims (f16) */
    CHECK_CLOSE(a.resident_bytes, 2 * 2001 * row + 2 * (2.0 * npq * D * 2), 0, 0);
    /* the page upkeep (min/max of the new token) is timed inside the select
     * time: nested intervals of one monotonic clock, so never more, whatever
     * the clock's resolution. Whether it is timed at all (> 0) is not checked:
     * on a coarse clock (a VM's jiffies) a microsecond reads 0 */
    CHECK_MSG(a.upkeep_seconds >= 0 && a.upkeep_seconds <= a.select_seconds, "quest upkeep %g, select %g",
              a.upkeep_seconds, a.select_seconds);
    r.ops->destroy(r.st);
    /* quest group_sum: one page set per KV group, so the group reads its 113
     * chosen slots once (not once per head) plus the 126 pages' min/max */
    CHECK(!start_step_account(&r, "{\"method\":\"quest\",\"budget\":256,\"gqa\":\"group_sum\"}", &s, o, &a));
    CHECK_CLOSE(a.attended, 8 * 16 - 15, 0, 0);
    CHECK_CLOSE(a.read_tokeq, 8 * 16 - 15 + npq, 0, 0);
    /* bytes: per KV head its 113 slots' K and V rows, and every page's min and
     * max of the D dims, stored in the KV dtype (f16 here) */
    CHECK_CLOSE(a.read_bytes, 2 * ((8 * 16 - 15) * row + npq * 2.0 * D * 2), 1e-6, 0);
    r.ops->destroy(r.st);
    /* sparq recipe: r = int(64 * 256 / 2100) = 7 dims of every key */
    CHECK(!start_step_account(&r, "{\"method\":\"sparq\",\"budget\":256}", &s, o, &a));
    CHECK_EQ_INT(a.budget->r, 7);
    CHECK_CLOSE(a.approx_tokeq, 2001.0 * 7 / (2.0 * D), 1e-9, 0);
    CHECK_CLOSE(a.read_tokeq, 128 + 2001.0 * 7 / (2.0 * D), 1e-9, 0);
    r.ops->destroy(r.st);
    /* a given r replaces the recipe's r in traffic mode too (docs/METHODS.md,
     * budget_sparq), and the reads count it: 2001 keys x 20 dims */
    CHECK(!start_step_account(&r, "{\"method\":\"sparq\",\"budget\":256,\"r\":20}", &s, o, &a));
    CHECK_EQ_INT(a.budget->r, 20);
    CHECK_CLOSE(a.approx_tokeq, 2001.0 * 20 / (2.0 * D), 1e-9, 0);
    r.ops->destroy(r.st);
    /* hybrid per head (p > 1): each head reads, per chosen dim, the page max
     * where its q is positive and the min otherwise, so two heads of a group
     * that share a dim with opposite signs read both rows: the reads are the
     * distinct (dim, sign) pairs of the group's heads (before, distinct dims).
     * Each head's dims: top r of |q| (ties to the lower dim), worked out here */
    CHECK(!start_step_account(&r, "{\"method\":\"hybrid\",\"budget\":256,\"gqa\":\"per_head\"}", &s, o, &a));
    {
        int ph = a.budget->p, rh = a.budget->r, nph = (2001 + ph - 1) / ph, pairs, dims;
        CHECK(ph > 1 && rh < D);
        top_abs_dims(&s, rh, &pairs, &dims);
        CHECK(pairs > dims); /* the case occurs in this scenario */
        CHECK_CLOSE(a.approx_tokeq, (double)nph * pairs / (2.0 * D) / s.Hkv, 1e-9, 0);
        /* the K/V rows read: per KV head the union of its 4 heads' top-128
         * slots, each head's set by the brute force (methods_brute.c, p and r
         * as the budget gives them, checked above); +-1 in the mean over the 2
         * KV heads for a near tie at a head's boundary (f32 against double
         * scores; equal here): a wrong group's rows differ by 2.5 */
        const int arg[3] = {ph, rh, 128};
        CHECK_CLOSE(a.read_tokeq - a.approx_tokeq, brute_group_union(&s, pick_hybrid, arg), 1, 0);
    }
    r.ops->destroy(r.st);
    /* sparq per head (p = 1): the approximation reads K's own dim-major rows,
     * one per chosen dim whatever the sign of q (there is no separate min and
     * max row), so the reads are the distinct dims of the group's heads even
     * where two heads take a dim with opposite signs. r = int(64 * 256 / 2100)
     * = 7; each head's dims: top r of |q| (ties to the lower dim), worked out
     * here. Exact: integer counts over 2D, tolerance only for the division. */
    CHECK(!start_step_account(&r, "{\"method\":\"sparq\",\"budget\":256,\"gqa\":\"per_head\"}", &s, o, &a));
    {
        int rs = a.budget->r, pairs, dims;
        CHECK(a.budget->p == 1 && rs == 7);
        top_abs_dims(&s, rs, &pairs, &dims);
        CHECK(pairs > dims); /* a dim taken with both signs occurs in this scenario */
        CHECK_CLOSE(a.approx_tokeq, 2001.0 * dims / (2.0 * D) / s.Hkv, 1e-9, 0);
    }
    r.ops->destroy(r.st);
    /* the sign rule of methods.md §4 ("0 counts as -1") in the reads: hybrid
     * per head with r = D (every dim chosen), dim 0 of group 0's heads set to
     * 0, +1, +1, +1: the head with q = 0 reads the page min, the others the
     * max, so dim 0 costs two summary rows in group 0; every other (dim, sign)
     * pair is counted by the same rule here. Exact integer counts. */
    {
        int G = s.Hq / s.Hkv;
        float keep[4];
        for (int hh = 0; hh < G; hh++) {
            keep[hh] = s.q[(size_t)hh * D];
            s.q[(size_t)hh * D] = hh == 0 ? 0.0f : 1.0f;
        }
        CHECK(!start_step_account(&r, "{\"method\":\"hybrid\",\"budget\":256,\"gqa\":\"per_head\",\"r\":64}", &s, o, &a));
        int ph = a.budget->p, nph = (2001 + ph - 1) / ph, pairs = 0;
        CHECK(ph > 1 && a.budget->r == D);
        for (int g = 0; g < s.Hkv; g++)
            for (int d = 0; d < D; d++) {
                int pos = 0, neg = 0;
                for (int hh = g * G; hh < (g + 1) * G; hh++) {
                    if (s.q[(size_t)hh * D + d] > 0) pos = 1;
                    else neg = 1;
                }
                pairs += pos + neg;
            }
        CHECK_CLOSE(a.approx_tokeq, (double)nph * pairs / (2.0 * D) / s.Hkv, 1e-9, 0);
        r.ops->destroy(r.st);
        for (int hh = 0; hh < G; hh++) s.q[(size_t)hh * D] = keep[hh];
    }
    /* exact_topk attends k = B = 256 tokens per query head of the 2001
     * (methods.md §7), scoring not charged; the reads are the union of the
     * group's heads' sets: between B and G * B */
    CHECK(!start_step_account(&r, "{\"method\":\"exact_topk\",\"budget\":256}", &s, o, &a));
    CHECK_CLOSE(a.attended, 256, 0, 0);
    CHECK_CLOSE(a.approx_tokeq, 0, 0, 0);
    CHECK(a.read_tokeq >= 256 && a.read_tokeq <= 4 * 256);
    CHECK(a.budget && a.budget->k == 256); /* k = B, not B/2 (methods.md §7) */
    {
        /* the union, by brute force: each head's top 256 by exact score
         * (methods_brute.c), the group's 4 heads merged, the mean over the 2
         * KV heads; +-2 rows for a near tie at a head's boundary, where f32
         * and double scores may order two slots differently */
        const int arg[1] = {256};
        double uni = brute_group_union(&s, pick_exact, arg);
        CHECK_CLOSE(a.read_tokeq, uni, 2, 0);
        CHECK_CLOSE(a.read_bytes, uni * s.Hkv * row, 4 * row, 0);
    }
    r.ops->destroy(r.st);
    /* group_sum: one set of 256 per KV group, which each of its 4 query heads
     * attends; the group reads those 256 rows once */
    CHECK(!start_step_account(&r, "{\"method\":\"exact_topk\",\"budget\":256,\"gqa\":\"group_sum\"}", &s, o, &a));
    CHECK_CLOSE(a.attended, 256, 0, 0);
    CHECK_CLOSE(a.read_tokeq, 256, 0, 0);
    r.ops->destroy(r.st);
    /* snapkv per head keeps 256 prompt tokens per query head (+ the new one):
     * each head attends 257, and the G = 4 per-head copies are distinct rows
     * read, 4 * 257 per KV head (methods.md §3: G times the storage) */
    CHECK(!start_step_account(&r, "{\"method\":\"snapkv\",\"budget\":256}", &s, o, &a));
    CHECK_CLOSE(a.attended, 257, 0, 0);
    CHECK_CLOSE(a.read_tokeq, 4 * 257, 0, 0);
    CHECK_CLOSE(a.resident_tokens, 4 * 257, 0, 0);
    r.ops->destroy(r.st);
    /* rocketkv_mt holds the full cache and the working set (methods.md §1:
     * "all + working set"): 2001 + (prompt_budget + 1) per KV head; it attends k */
    CHECK(!start_step_account(&r, "{\"method\":\"rocketkv_mt\",\"budget\":256}", &s, o, &a));
    CHECK_CLOSE(a.resident_tokens, 2001 + pb + 1, 0, 0);
    CHECK_CLOSE(a.attended, k, 0, 0);
    CHECK(a.budget && a.budget->L == 2000 && a.budget->prompt_budget == pb);
    /* bytes: both caches' K and V, and the working set's pages (its
     * prompt_budget + 1 slots in pages of p, min and max of 64 dims, f16) */
    CHECK_CLOSE(a.resident_bytes, 2 * (2001.0 + pb + 1) * row + 2 * (2.0 * ((pb + 1 + p - 1) / p) * D * 2), 0, 0);
    r.ops->destroy(r.st);
    /* full reads everything; snapkvpp reads its kept tokens */
    CHECK(!start_step_account(&r, "{\"method\":\"full\"}", &s, o, &a));
    CHECK_CLOSE(a.read_tokeq, 2001, 0, 0);
    CHECK_CLOSE(a.resident_bytes, 2 * 2001 * row, 0, 0);
    CHECK_EQ_INT(a.sel_streams, 0);
    r.ops->destroy(r.st);
    CHECK(!start_step_account(&r, "{\"method\":\"snapkvpp\",\"budget\":256}", &s, o, &a));
    CHECK_CLOSE(a.read_tokeq, 257, 0, 0);
    CHECK_CLOSE(a.resident_tokens, 257, 0, 0);
    /* one set per KV group: each of the group's 4 query heads attends all 257 */
    CHECK_CLOSE(a.attended, 257, 0, 0);
    r.ops->destroy(r.st);
    /* resident bytes of the methods that keep page summaries besides K and V
     * (docs/METHODS.md's accounting table): sparq's p = 1 summary is one
     * dim-major copy of K (2001 x 64 f16 per KV head), the mean-V option adds
     * D double sums per KV head */
    CHECK(!start_step_account(&r, "{\"method\":\"sparq\",\"budget\":256}", &s, o, &a));
    CHECK_CLOSE(a.resident_bytes, 2 * 2001 * row + 2 * (2001.0 * D * 2), 0, 0);
    r.ops->destroy(r.st);
    CHECK(!start_step_account(&r, "{\"method\":\"sparq\",\"budget\":256,\"reallocate_mean_v\":true}", &s, o, &a));
    CHECK_CLOSE(a.resident_bytes, 2 * 2001 * row + 2 * (2001.0 * D * 2) + 2 * (D * 8.0), 0, 0);
    r.ops->destroy(r.st);
    /* hybrid alone: c2 = 2100/256, p = ceil(sqrt(8.20)) = 3, 667 pages of
     * 2001 slots, each page's min and max of 64 dims in f16 */
    CHECK(!start_step_account(&r, "{\"method\":\"hybrid\",\"budget\":256}", &s, o, &a));
    CHECK(a.budget && a.budget->p == 3);
    CHECK_CLOSE(a.resident_bytes, 2 * 2001 * row + 2 * (2.0 * 667 * D * 2), 0, 0);
    r.ops->destroy(r.st);
    /* rocketkv's "r" replaces the split's r (docs/METHODS.md §3, budget_override): 5 dims,
     * and the approximation reads 5 of the D dims of each page's min or max */
    CHECK(!start_step_account(&r, "{\"method\":\"rocketkv\",\"budget\":256,\"r\":5}", &s, o, &a));
    {
        int n1 = pb + 1, np1 = (n1 + p - 1) / p;
        CHECK(a.budget && a.budget->r == 5 && a.budget->p == p);
        CHECK_CLOSE(a.approx_tokeq, (double)np1 * 5 / (2.0 * D), 1e-9, 0);
    }
    r.ops->destroy(r.st);
    free(o);
    scen_free(&s);
}

/* Every method, Full KV first, for the multi-turn and rollback tests (snapkv and
 * snapkvpp need a budget of at least their window, 32). */
static const char *const every_cfg[] = {
    "{\"method\":\"full\"}",
    "{\"method\":\"exact_topk\",\"budget\":64}",
    "{\"method\":\"snapkv\",\"budget\":96}",
    "{\"method\":\"snapkvpp\",\"budget\":96}",
    "{\"method\":\"quest\",\"budget\":64}",
    "{\"method\":\"sparq\",\"budget\":64,\"reallocate_mean_v\":true}",
    "{\"method\":\"hybrid\",\"budget\":64}",
    "{\"method\":\"rocketkv\",\"budget\":64}",
    "{\"method\":\"rocketkv_mt\",\"budget\":64}",
};

/* mark / rollback: re-decoding after a rollback gives bit-identical outputs;
 * an extend after the rollback matches brute-force stage 1 over what the
 * method kept plus the new turn. */
static void test_multiturn(void) {
    const char *const *cfgs = every_cfg;
    const size_t ncfg = sizeof every_cfg / sizeof every_cfg[0];
    int nnew = 50;
    for (size_t ci = 0; ci < ncfg; ci++) {
        scen s, t; /* t: the new turn's tokens and queries, as another scenario */
        scen_make(&s, 6, 2, 32, 300, 6, (int)ci % 5, 500 + ci);
        scen_make(&t, 6, 2, 32, nnew, 3, K_RANDOM, 900 + ci);
        run r;
        CHECK(!start(&r, cfgs[ci], &s));
        size_t no = (size_t)s.Hq * s.D;
        float *o1 = malloc(no * 4 * 6), *o2 = malloc(no * 4 * 6);
        step(&r, &s, 0, o1); /* the last prompt token */
        long m = r.ops->mark(r.st);
        CHECK_EQ_INT(m, s.L + 1);
        /* what the decode cache holds at the mark (every row: the working set
         * too, for RocketKV-MT, not only the full history) */
        int nrows0;
        r.ops->decode_cache(r.st, 0, &nrows0);
        int *nmark = malloc((size_t)nrows0 * sizeof(int));
        for (int i = 0; i < nrows0; i++) nmark[i] = r.ops->decode_cache(r.st, i, NULL)->n;
        for (int i = 1; i < 6; i++) step(&r, &s, i, o1 + i * no);
        r.ops->rollback(r.st, m);
        CHECK_EQ_INT(r.ops->mark(r.st), m);
        for (int i = 0; i < nrows0; i++) {
            const kb_kvstream *c = r.ops->decode_cache(r.st, i, NULL);
            CHECK_MSG(c->n == nmark[i] && c->pos[c->n - 1] == s.L, "%s: row %d holds %d slots after the rollback, %d at the mark",
                      cfgs[ci], i, c->n, nmark[i]);
        }
        free(nmark);
        for (int i = 1; i < 6; i++) step(&r, &s, i, o2 + i * no);
        CHECK_MSG(max_diff(o1 + no, o2 + no, (int)(5 * no)) == 0, "%s: rollback + redo differs", cfgs[ci]);
        r.ops->rollback(r.st, m);
        /* what the method keeps before the new turn, per decode-cache row */
        int rows;
        r.ops->decode_cache(r.st, 0, &rows);
        int **before = malloc((size_t)rows * sizeof *before), *nb = malloc((size_t)rows * sizeof(int));
        for (int i = 0; i < rows; i++) {
            const kb_kvstream *c = r.ops->decode_cache(r.st, i, NULL);
            nb[i] = c->n;
            before[i] = malloc(((size_t)c->n + s.L + nnew + 1) * sizeof(int));
            for (int j = 0; j < c->n; j++) before[i][j] = c->pos[j];
        }
        int full_before = r.ops->retained(r.st, 0)->n;
        /* the new turn: positions L+1 .. L+nnew, its last queries as the window */
        int base = s.L + 1;
        kb_prefill_view v;
        memset(&v, 0, sizeof v);
        v.Hq = s.Hq;
        v.Hkv = s.Hkv;
        v.D = s.D;
        kb_kvstream kv[2];
        for (int g = 0; g < 2; g++) {
            kvstream_init(&kv[g], KB_F16, s.D, nnew);
            for (int j = 0; j < nnew; j++)
                kvstream_append_f32(&kv[g], t.k + ((size_t)j * 2 + g) * s.D, t.v + ((size_t)j * 2 + g) * s.D, base + j);
        }
        v.kv = kv;
        v.Wq = t.Wq;
        v.qwin = t.qwin;
        int32_t *qp = malloc((size_t)t.Wq * sizeof(int32_t));
        for (int i = 0; i < t.Wq; i++) qp[i] = base + nnew - t.Wq + i;
        v.qwin_pos = qp;
        kb_err e = {0};
        CHECK_MSG(r.ops->extend(r.st, &v, &e) == 0, "%s: extend: %s", cfgs[ci], e.msg);
        CHECK_EQ_INT(r.ops->mark(r.st), m + nnew);
        r.ops->rollback(r.st, m); /* before the extend: clamped, nothing dropped */
        CHECK_EQ_INT(r.ops->mark(r.st), m + nnew);
        /* brute-force stage 1 over kept + new for the evicting methods */
        br_hist h;
        br_hist_init(&h, s.Hq, s.Hkv, s.D);
        for (int j = 0; j < s.L; j++) br_hist_push(&h, s.k + (size_t)j * 2 * s.D, s.v + (size_t)j * 2 * s.D, KB_F16);
        br_hist_push(&h, s.kn, s.vn, KB_F16);
        for (int j = 0; j < nnew; j++) br_hist_push(&h, t.k + (size_t)j * 2 * s.D, t.v + (size_t)j * 2 * s.D, KB_F16);
        const char *name = r.ops->name;
        int evicts = r.ops->evicts, mt = !strcmp(name, "rocketkv_mt");
        int pb = r.p.budget;
        if (!strcmp(name, "rocketkv") || mt) {
            int T, p, rr, k;
            br_rocket_split(s.S, r.p.budget, s.N_new, s.D, -1, &T, &pb, &p, &rr, &k);
        }
        for (int i = 0; i < rows; i++) {
            const kb_kvstream *c = r.ops->decode_cache(r.st, i, NULL);
            int n = nb[i];
            if (mt) { /* the working set is rebuilt from the full history */
                n = 0;
                for (int j = 0; j < base; j++) before[i][n++] = j;
            }
            for (int j = 0; j < nnew; j++) before[i][n++] = base + j;
            if (!evicts) {
                int ok = c->n == n;
                for (int j = 0; ok && j < n; j++) ok = c->pos[j] == before[i][j];
                CHECK_MSG(ok, "%s: row %d after extend", name, i);
                continue;
            }
            int per_head = rows == s.Hq, G = s.Hq / s.Hkv, g = per_head ? i / G : i;
            int heads[8], nh = per_head ? 1 : G;
            for (int a = 0; a < nh; a++) heads[a] = per_head ? i : g * G + a;
            int *kept = malloc(((size_t)n + 1) * sizeof(int)), np = 0;
            double *score = malloc(((size_t)n + 1) * sizeof(double));
            int agg = r.p.gqa == KB_GQA_GROUP_MEAN;
            int cnt = br_snap_keep(&h, g, heads, nh, agg, t.qwin, qp, t.Wq, r.p.window, before[i], n, pb,
                                   r.p.kernel, r.p.pooling == KB_POOL_AVG, kept, score, &np);
            int ok = c->n == cnt;
            int *ai = malloc(((size_t)cnt + 1) * sizeof(int)), *bi = malloc(((size_t)cnt + 1) * sizeof(int));
            int na = 0, nbb = 0;
            for (int j = 0; ok && j < cnt; j++) {
                int sa = -1, sb = -1;
                for (int u = 0; u < n; u++) {
                    if (before[i][u] == c->pos[j]) sa = u;
                    if (before[i][u] == kept[j]) sb = u;
                }
                ok &= sa >= 0;
                if (sa >= 0 && sa < np) ai[na++] = sa;
                if (sb < np) bi[nbb++] = sb;
                if (sa >= np) ok &= c->pos[j] == kept[j]; /* the window */
            }
            if (ok && np > 0) ok = br_sets_match(ai, na, bi, nbb, score, np, 1e-4) != 0;
            CHECK_MSG(ok, "%s: row %d: stage 1 after extend differs from brute force (%d vs %d kept)", name, i,
                      c->n, cnt);
            free(ai);
            free(bi);
            free(kept);
            free(score);
        }
        const kb_kvstream *ret = r.ops->retained(r.st, 0);
        if (mt) CHECK_EQ_INT(ret->n, full_before + nnew); /* nothing evicted */
        /* decoding continues at the right positions */
        float *o = malloc(no * 4);
        r.ops->decode(r.st, t.q, t.kn, t.vn, base + nnew, o);
        CHECK(r.ops->decode_cache(r.st, 0, NULL)->pos[r.ops->decode_cache(r.st, 0, NULL)->n - 1] == base + nnew);
        for (size_t j = 0; j < no; j++) CHECK(isfinite(o[j]));
        free(o);
        br_hist_free(&h);
        for (int i = 0; i < rows; i++) free(before[i]);
        free(before);
        free(nb);
        free(qp);
        kvstream_free(&kv[0]);
        kvstream_free(&kv[1]);
        free(o1);
        free(o2);
        r.ops->destroy(r.st);
        scen_free(&s);
        scen_free(&t);
    }
}

/* A rollback restores the state at the mark, summaries included: decoding a
 * different continuation after it gives bit for bit what a fresh run that
 * only ever saw that continuation gives (test_multiturn redoes the same
 * tokens, which stale page min/max or mean-V sums would pass). Branch X's
 * keys are 8x larger, so page summaries left over from it would win the
 * page scores of the last pages. Tolerance 0: the same operations on the
 * same cache in the same order. */
static void test_rollback_branch(void) {
    const char *const *cfgs = every_cfg + 1; /* all but Full KV */
    const size_t ncfg = sizeof every_cfg / sizeof every_cfg[0] - 1;
    for (size_t ci = 0; ci < ncfg; ci++) {
        scen x, y; /* the same prompt (same seed); x's decoded keys scaled */
        scen_make(&x, 6, 2, 32, 300, 6, K_RANDOM, 700 + ci);
        scen_make(&y, 6, 2, 32, 300, 6, K_RANDOM, 700 + ci);
        for (size_t i = (size_t)x.Hkv * x.D; i < (size_t)x.N * x.Hkv * x.D; i++) x.kn[i] *= 8;
        run a, b;
        CHECK(!start(&a, cfgs[ci], &x));
        CHECK(!start(&b, cfgs[ci], &y));
        size_t no = (size_t)x.Hq * x.D;
        float *o1 = malloc(no * 4), *o2 = malloc(no * 4);
        step(&a, &x, 0, o1);
        step(&b, &y, 0, o2);
        long m = a.ops->mark(a.st);
        for (int i = 1; i < x.N; i++) step(&a, &x, i, o1);
        a.ops->rollback(a.st, m);
        double worst = 0;
        for (int i = 1; i < y.N; i++) {
            step(&a, &y, i, o1);
            step(&b, &y, i, o2);
            worst = fmax(worst, max_diff(o1, o2, (int)no));
        }
        CHECK_MSG(worst == 0, "%s: after a rollback, another branch differs from a fresh run by %g", cfgs[ci], worst);
        a.ops->destroy(a.st);
        b.ops->destroy(b.st);
        free(o1);
        free(o2);
        scen_free(&x);
        scen_free(&y);
    }
}

/* retained(qhead), the cache a later turn's prefill attends for query head
 * qhead, is its own KV group's (qhead / G): every slot's key equals the
 * prompt's key of that group at the slot's position (f16 as stored); for the
 * evicting methods it holds what the head's decode row keeps (under per_head
 * SnapKV the head's own set, which the brute force checks elsewhere). */
static void test_retained_groups(void) {
    static const char *const cfgs[] = {
        "{\"method\":\"full\"}",
        "{\"method\":\"exact_topk\",\"budget\":64}",
        "{\"method\":\"snapkv\",\"budget\":64}",
        "{\"method\":\"snapkvpp\",\"budget\":64}",
        "{\"method\":\"quest\",\"budget\":64}",
        "{\"method\":\"sparq\",\"budget\":64}",
        "{\"method\":\"hybrid\",\"budget\":64}",
        "{\"method\":\"rocketkv\",\"budget\":64}",
        "{\"method\":\"rocketkv_mt\",\"budget\":64}",
    };
    scen s;
    scen_make(&s, 6, 2, 32, 200, 1, K_RANDOM, 31);
    int G = s.Hq / s.Hkv, D = s.D;
    float *kr = malloc((size_t)D * sizeof(float));
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        run r;
        CHECK(!start(&r, cfgs[ci], &s));
        int rows;
        r.ops->decode_cache(r.st, 0, &rows);
        int evicts = r.ops->evicts && strstr(cfgs[ci], "_mt") == NULL;
        for (int hq = 0; hq < s.Hq; hq++) {
            const kb_kvstream *R = r.ops->retained(r.st, hq);
            int g = hq / G, ok = R->n > 0, same = 1;
            for (int t = 0; ok && t < R->n; t++) {
                int pos = R->pos[t];
                ok = pos >= 0 && pos < s.L;
                kvstream_get_f32(R, t, kr, NULL);
                for (int d = 0; ok && d < D; d++)
                    ok = kr[d] == kb_f16_to_f32(kb_f32_to_f16(s.k[((size_t)pos * s.Hkv + g) * D + d]));
            }
            if (evicts) { /* the decode row of this head: the head's own under per_head */
                const kb_kvstream *c = r.ops->decode_cache(r.st, rows == s.Hq ? hq : g, NULL);
                same = c->n == R->n;
                for (int t = 0; same && t < R->n; t++) same = c->pos[t] == R->pos[t];
            } else {
                same = R->n == s.L;
            }
            CHECK_MSG(ok && same, "%s: retained(%d) is not KV group %d's cache", cfgs[ci], hq, g);
        }
        r.ops->destroy(r.st);
    }
    free(kr);
    scen_free(&s);
}

static void expect_err(const char *json, const char *msg) {
    kb_method_params p;
    kb_err e = {0};
    int rc = method_params_parse_text(json, "cfg.json: methods[0]", &p, &e);
    CHECK_EQ_INT(rc, KB_EINPUT);
    CHECK_STREQ(e.msg, msg);
}

static void test_params(void) {
    expect_err("{\"method\":\"foo\"}",
               "cfg.json: methods[0]: key 'method': unknown method 'foo' (known: full, exact_topk, snapkv, "
               "snapkvpp, quest, sparq, hybrid, rocketkv, rocketkv_mt)");
    expect_err("{\"method\":\"quest\",\"budget\":64,\"kernel\":7}",
               "cfg.json: methods[0]: method 'quest': unknown key 'kernel' (known keys: method, label, budget, "
               "budget_mode, skip_layers, gqa, page_size)");
    expect_err("{\"method\":\"snapkv\",\"budget\":-5}",
               "cfg.json: methods[0]: method 'snapkv': key 'budget': expected an integer in [1, 1073741824], got -5");
    expect_err("{\"method\":\"snapkvpp\",\"budget\":64,\"kernel\":4}",
               "cfg.json: methods[0]: method 'snapkvpp': key 'kernel': expected an odd integer >= 1 or \"adaptive\", got 4");
    expect_err("{\"method\":\"rocketkv\",\"budget\":8}",
               "cfg.json: methods[0]: method 'rocketkv': key 'budget': expected an integer >= 16, got 8");
    expect_err("{\"method\":\"hybrid\"}", "cfg.json: methods[0]: method 'hybrid': missing required key 'budget'");
    /* the lower bounds at their edge: budget 15 for the methods that need 16
     * (docs/METHODS.md §4), window 0 and r 0 */
    expect_err("{\"method\":\"hybrid\",\"budget\":15}",
               "cfg.json: methods[0]: method 'hybrid': key 'budget': expected an integer >= 16, got 15");
    expect_err("{\"method\":\"sparq\",\"budget\":15}",
               "cfg.json: methods[0]: method 'sparq': key 'budget': expected an integer >= 16, got 15");
    expect_err("{\"method\":\"rocketkv_mt\",\"budget\":15}",
               "cfg.json: methods[0]: method 'rocketkv_mt': key 'budget': expected an integer >= 16, got 15");
    expect_err("{\"method\":\"snapkv\",\"budget\":64,\"window\":0}",
               "cfg.json: methods[0]: method 'snapkv': key 'window': expected an integer in [1, 1048576], got 0");
    expect_err("{\"method\":\"hybrid\",\"budget\":64,\"r\":0}",
               "cfg.json: methods[0]: method 'hybrid': key 'r': expected an integer in [1, 65536], got 0");
    expect_err("{\"method\":\"snapkv\",\"budget\":16}",
               "cfg.json: methods[0]: method 'snapkv': key 'budget': 16 is smaller than the window 32 (the window is always kept)");
    /* at the edge: one below the window */
    expect_err("{\"method\":\"snapkvpp\",\"budget\":19,\"window\":20}",
               "cfg.json: methods[0]: method 'snapkvpp': key 'budget': 19 is smaller than the window 20 (the window is always kept)");
    expect_err("{\"method\":\"sparq\",\"budget\":64,\"gqa\":\"heads\"}",
               "cfg.json: methods[0]: method 'sparq': key 'gqa': expected \"per_head\", \"group_sum\" or \"group_mean\", got \"heads\"");
    expect_err("{\"method\":\"rocketkv\",\"budget\":64,\"alpha\":2}",
               "cfg.json: methods[0]: method 'rocketkv': key 'alpha': expected \"auto\" or a number in [0, 1]");
    expect_err("{\"method\":\"snapkv\",\"budget\":64,\"pooling\":\"min\"}",
               "cfg.json: methods[0]: method 'snapkv': key 'pooling': expected \"max\" or \"avg\", got \"min\"");
    expect_err("{\"method\":\"snapkvpp\",\"budget\":64,\"kernel_by_length\":[[100,7],[50,9]]}",
               "cfg.json: methods[0]: method 'snapkvpp': key 'kernel_by_length'[1]: max_len must increase strictly (50 after 100)");
    /* a table needs kernel "adaptive", also next to kernel 1 */
    expect_err("{\"method\":\"snapkvpp\",\"budget\":64,\"kernel\":1,\"kernel_by_length\":[[100,7]]}",
               "cfg.json: methods[0]: method 'snapkvpp': key 'kernel_by_length': needs kernel \"adaptive\" (kernel is 1)");
    /* strictly: an equal max_len is refused too */
    expect_err("{\"method\":\"snapkvpp\",\"budget\":64,\"kernel_by_length\":[[100,7],[100,9]]}",
               "cfg.json: methods[0]: method 'snapkvpp': key 'kernel_by_length'[1]: max_len must increase strictly (100 after 100)");
    expect_err("{\"method\":\"snapkvpp\",\"budget\":64,\"kernel_by_length\":[[100,8]]}",
               "cfg.json: methods[0]: method 'snapkvpp': key 'kernel_by_length'[0]: pooling kernel K must be odd, got 8");
    expect_err("{\"method\":\"rocketkv\",\"budget\":64,\"budget_mode\":\"bytes\"}",
               "cfg.json: methods[0]: method 'rocketkv': key 'budget_mode': expected \"traffic\" or \"topk\", got \"bytes\"");
    expect_err("{\"method\":\"full\",\"window\":3}",
               "cfg.json: methods[0]: method 'full': unknown key 'window' (known keys: method, label, budget, budget_mode, skip_layers)");
    expect_err("[1]", "cfg.json: methods[0]: expected a JSON object");
    /* defaults filled by validate */
    kb_method_params p;
    kb_err e = {0};
    CHECK(!method_params_parse_text("{\"method\":\"snapkv\",\"budget\":64}", "t", &p, &e));
    CHECK(p.window == 32 && p.kernel == 7 && p.gqa == KB_GQA_PER_HEAD && p.pooling == KB_POOL_MAX);
    CHECK(!method_params_parse_text("{\"method\":\"snapkvpp\",\"budget\":64}", "t", &p, &e));
    CHECK(p.window == 32 && p.kernel == 63 && p.gqa == KB_GQA_GROUP_SUM);
    /* a budget equal to the window is taken (the window alone is kept); one
     * below it is refused (expect_err above) */
    CHECK(!method_params_parse_text("{\"method\":\"snapkv\",\"budget\":32}", "t", &p, &e));
    CHECK(!method_params_parse_text("{\"method\":\"snapkvpp\",\"budget\":20,\"window\":20}", "t", &p, &e));
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv\",\"budget\":64,\"window\":128}", "t", &p, &e));
    CHECK(p.window == 128 && p.kernel == 63 && !p.alpha_fixed);
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv\",\"budget\":64,\"alpha\":0.5,\"kernel\":\"adaptive\"}", "t", &p, &e));
    CHECK(p.alpha_fixed && p.alpha == 0.5 && p.kernel == KB_KERNEL_ADAPTIVE && p.n_kernel_table == kb_default_kernel_table_n);
    /* method_params_to_json writes back what was parsed (the trace's and
     * replay's "params"): pooling, skip_layers, window, kernel */
    CHECK(!method_params_parse_text("{\"method\":\"snapkv\",\"budget\":64,\"pooling\":\"avg\",\"skip_layers\":2,"
                                    "\"window\":16,\"kernel\":5}", "t", &p, &e));
    {
        cJSON *j = method_params_to_json(&p);
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(j, "pooling");
        CHECK(cJSON_IsString(x) && !strcmp(x->valuestring, "avg"));
        x = cJSON_GetObjectItemCaseSensitive(j, "skip_layers");
        CHECK(cJSON_IsNumber(x) && x->valuedouble == 2);
        x = cJSON_GetObjectItemCaseSensitive(j, "window");
        CHECK(cJSON_IsNumber(x) && x->valuedouble == 16);
        x = cJSON_GetObjectItemCaseSensitive(j, "kernel");
        CHECK(cJSON_IsNumber(x) && x->valuedouble == 5);
        cJSON_Delete(j);
    }
    /* alpha's range [0, 1] includes both ends (methods.md §1.1: a fixed alpha) */
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv\",\"budget\":64,\"alpha\":1}", "t", &p, &e));
    CHECK(p.alpha_fixed && p.alpha == 1.0);
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv\",\"budget\":64,\"alpha\":0}", "t", &p, &e));
    CHECK(p.alpha_fixed && p.alpha == 0.0);
    /* the default adaptive table as docs/METHODS.md states it, and K by
     * length at its bounds (max_len inclusive) */
    CHECK(!method_params_parse_text("{\"method\":\"snapkvpp\",\"budget\":64,\"kernel\":\"adaptive\"}", "t", &p, &e));
    {
        static const int doc[4][2] = {{2048, 7}, {4096, 15}, {8192, 31}, {2147483647, 63}};
        CHECK_EQ_INT(p.n_kernel_table, 4);
        for (int i = 0; i < 4 && i < p.n_kernel_table; i++) {
            CHECK_EQ_INT(p.kernel_table[i][0], doc[i][0]);
            CHECK_EQ_INT(p.kernel_table[i][1], doc[i][1]);
        }
        static const int at[][2] = {{1, 7}, {2048, 7}, {2049, 15}, {4096, 15}, {4097, 31},
                                    {8192, 31}, {8193, 63}, {1000000, 63}};
        for (size_t i = 0; i < sizeof at / sizeof at[0]; i++)
            CHECK_EQ_INT(mc_kernel_for(&p, at[i][0]), at[i][1]);
    }
    CHECK(!method_params_parse_text("{\"method\":\"quest\",\"budget\":64,\"label\":\"q\"}", "t", &p, &e));
    CHECK(p.gqa == KB_GQA_PER_HEAD && !strcmp(p.label, "q"));
    CHECK(!method_params_parse_text("{\"method\":\"sparq\",\"budget\":64}", "t", &p, &e));
    CHECK(p.gqa == KB_GQA_GROUP_MEAN);
    CHECK(!method_params_parse_text("{\"method\":\"full\",\"budget\":64}", "t", &p, &e));
    /* r larger than D is caught when the layer is built */
    scen s;
    scen_make(&s, 4, 2, 16, 50, 1, K_RANDOM, 3);
    run r;
    CHECK(!method_params_parse_text("{\"method\":\"hybrid\",\"budget\":64,\"r\":20}", "t", &p, &e));
    kb_method_ctx c = scen_ctx(&s);
    kb_prefill_view v = scen_view(&s);
    void *st = NULL;
    CHECK_EQ_INT(p.ops->layer_init(&p, &c, &v, &st, &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "method 'hybrid': key 'r': 20 exceeds the head dim D = 16");
    /* at the edge: r = D + 1 refused, r = D taken (sparq checks its own r) */
    CHECK(!method_params_parse_text("{\"method\":\"sparq\",\"budget\":64,\"r\":17}", "t", &p, &e));
    CHECK_EQ_INT(p.ops->layer_init(&p, &c, &v, &st, &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "method 'sparq': key 'r': 17 exceeds the head dim D = 16");
    CHECK(!method_params_parse_text("{\"method\":\"sparq\",\"budget\":64,\"r\":16}", "t", &p, &e));
    CHECK_EQ_INT(p.ops->layer_init(&p, &c, &v, &st, &e), 0);
    p.ops->destroy(st);
    /* a view without the window queries the method needs */
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv\",\"budget\":16}", "t", &p, &e));
    v.Wq = 8;
    CHECK_EQ_INT(p.ops->layer_init(&p, &c, &v, &st, &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "rocketkv: key 'window': the method needs the last 32 prefill queries, the prefill view holds 8");
    /* the same for a later turn's view (RocketKV-MT rebuilds its working set
     * with the new turn's window, methods.md §6) */
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv_mt\",\"budget\":16}", "t", &p, &e));
    v.Wq = s.Wq;
    CHECK_EQ_INT(p.ops->layer_init(&p, &c, &v, &st, &e), 0);
    v.Wq = 8;
    CHECK_EQ_INT(p.ops->extend(st, &v, &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "rocketkv_mt: key 'window': the method needs the last 32 prefill queries, the prefill view holds 8");
    p.ops->destroy(st);
    /* window queries whose positions are not the last slots' positions are
     * refused (docs/METHODS.md §4.1 step 1): the last query moved to 1000 */
    CHECK(!method_params_parse_text("{\"method\":\"snapkvpp\",\"budget\":40}", "t", &p, &e));
    v.Wq = s.Wq;
    ((int32_t *)v.qwin_pos)[s.Wq - 1] = 1000;
    CHECK_EQ_INT(p.ops->layer_init(&p, &c, &v, &st, &e), KB_EINPUT);
    {
        char want[256];
        snprintf(want, sizeof want,
                 "snapkvpp: window query %d is at position 1000 but the matching key slot 49 holds position 49 "
                 "(the window must be the last prompt tokens)", s.Wq - 1);
        CHECK_STREQ(e.msg, want);
    }
    ((int32_t *)v.qwin_pos)[s.Wq - 1] = s.L - 1;
    /* a RocketKV prompt_budget of exactly 0 (S = N_new = 40: T = min(2 N_new, S)
     * = 40, prompt_budget = 40 - 40) is an error, not an empty cache */
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv\",\"budget\":16}", "t", &p, &e));
    {
        kb_method_ctx c0 = c;
        c0.S = 40;
        c0.N_new = 40;
        CHECK_EQ_INT(p.ops->layer_init(&p, &c0, &v, &st, &e), KB_EINPUT);
        CHECK_STREQ(e.msg, "rocketkv: prompt budget 0 leaves no room for the prompt (check budget, max_new and the context length)");
    }
    view_free(&v);
    (void)r;
    /* the adaptive table picks K by prompt length: checked end to end by brute force */
    scen_free(&s);
    scen_make(&s, 6, 2, 32, 300, 3, K_RANDOM, 77);
    mh_result res;
    CHECK_EQ_INT(mh_compare("{\"method\":\"snapkvpp\",\"budget\":64,\"kernel_by_length\":[[100,3],[1000,9]]}", &s,
                            2e-4, "adaptive", &res), 0);
    /* RocketKV's stage-1 keys reach stage 1 (an avg pool, a kernel of 7) and
     * its r key stage 2, checked by brute force (the same tolerances as
     * test_method.c) */
    CHECK_EQ_INT(mh_compare("{\"method\":\"rocketkv\",\"budget\":32,\"pooling\":\"avg\",\"kernel\":7}", &s, 2e-4,
                            "rocketkv avg pool", &res), 0);
    CHECK_EQ_INT(mh_compare("{\"method\":\"rocketkv_mt\",\"budget\":32,\"pooling\":\"avg\",\"kernel\":5,\"r\":3}", &s,
                            2e-4, "rocketkv_mt avg pool, r 3", &res), 0);
    /* the row's length picks K (docs/METHODS.md §4.1), not its prefix: 110
     * slots take the second row's 9, where the 78 prefix slots would take 3 */
    scen_free(&s);
    scen_make(&s, 6, 2, 32, 110, 2, K_RANDOM, 78);
    CHECK_EQ_INT(mh_compare("{\"method\":\"snapkvpp\",\"budget\":48,\"kernel_by_length\":[[100,3],[1000,9]]}", &s,
                            2e-4, "adaptive at 110", &res), 0);
    scen_free(&s);
}

int main(void) {
    test_equivalences();
    test_window_and_groups();
    test_accounting();
    test_multiturn();
    test_rollback_branch();
    test_retained_groups();
    test_params();
    return check_summary("method_props");
}
