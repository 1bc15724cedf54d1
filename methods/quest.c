/* quest.c - QUEST (methods.md §8): pages of P consecutive slots with per-dim
 * Kmax/Kmin kept incrementally; per query head a page bound
 * sum_i max(q_i Kmax_i, q_i Kmin_i); the page holding the current token
 * (the last page) is always attended, as in the Quest kernel's controller
 * (page budget "including the last page"; top-k runs over the other pages);
 * the other n_pages - 1 pages are the top ones by bound; exact attention over
 * their tokens. GQA per_head by default (original, repeat_kv); group_sum /
 * group_mean share one page set per KV group. P and the page count come from
 * the accountant (methods.md §1). */
#include <stdlib.h>

#include "kernels/select.h"
#include "methods/common.h"

typedef struct quest_state {
    kb_mcommon c;
    kb_kvstream *s;  /* [Hkv] every token */
    kb_pages *pg;    /* [Hkv] pages of P slots */
    int rows;        /* selection rows: Hq (per_head) or Hkv */
    int32_t *pidx;   /* [rows][pk] chosen pages */
    int32_t *idx;    /* [rows][pk * P] chosen slots */
    int *cnt;        /* [rows] slots chosen */
    int cap;
    int pk;          /* the rows' stride in pages: min(n_pages, the cache's pages so far), grown
                        with the cache (a budget may exceed any context) */
} quest_state;

static const char *const quest_keys[] = {"gqa", "page_size", NULL};

static int quest_validate(kb_method_params *p, kb_err *err) {
    if (p->budget < 1)
        return kb_fail(err, KB_EINPUT, "method 'quest': key 'budget': expected an integer >= 1, got %d",
                       p->budget);
    if (p->gqa == KB_GQA_DEFAULT) p->gqa = KB_GQA_PER_HEAD;
    return 0;
}

static void quest_free(quest_state *st) {
    if (st->pg)
        for (int g = 0; g < st->c.ctx.Hkv; g++) pages_free(&st->pg[g]);
    free(st->pg);
    streams_free(st->s, st->c.ctx.Hkv);
    free(st->pidx);
    free(st->idx);
    free(st->cnt);
    mc_free(&st->c);
    free(st);
}

static int quest_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
                      void **state, kb_err *err) {
    quest_state *st = KB_CALLOC(1, sizeof *st);
    mc_init(&st->c, "quest", p, ctx);
    int rc = mc_check_view(&st->c, pv, 0, err);
    int L = rc ? 0 : pv->kv[0].n;
    if (!rc) rc = budget_quest(p->budget_mode, p->budget, L, ctx->D, &st->c.bud, err);
    if (!rc) rc = budget_override(&st->c.bud, 1, p->page_size, 0, "method 'quest'", err);
    if (rc) {
        quest_free(st);
        return rc;
    }
    st->c.bud.S = ctx->S;
    st->c.bud.N_new = ctx->N_new;
    st->s = streams_new(ctx->Hkv, ctx->kv_dtype, ctx->D, L + KB_MAX(ctx->N_new, 16));
    streams_append_view(st->s, ctx->Hkv, pv);
    const kb_kernels *kk = kernels_get();
    st->pg = KB_CALLOC((size_t)ctx->Hkv, sizeof *st->pg);
    for (int g = 0; g < ctx->Hkv; g++) {
        pages_init(&st->pg[g], st->c.bud.P, ctx->D);
        pages_sync(&st->pg[g], &st->s[g], kk);
    }
    st->rows = p->gqa == KB_GQA_PER_HEAD ? ctx->Hq : ctx->Hkv;
    st->cnt = KB_CALLOC((size_t)st->rows, sizeof(int));
    st->c.n_in = st->c.base = L;
    *state = st;
    return 0;
}

/* Slots of the chosen pages of selection row `row`: the last page plus the
 * top (n_pages - 1) others by the bounds ps. */
static int quest_pick(quest_state *st, const kb_kernels *kk, int row, const float *ps, int np, int n) {
    int P = st->c.bud.P, want = st->c.bud.n_pages, c = 0;
    int32_t *pidx = st->pidx + (size_t)row * st->pk, *idx = st->idx + (size_t)row * st->pk * P;
    int npk = 0;
    if (want >= np) {
        for (int t = 0; t < np; t++) pidx[t] = t;
        npk = np;
    } else {
        npk = kk->topk(ps, np - 1, want - 1, pidx); /* ascending */
        pidx[npk++] = np - 1;
    }
    for (int t = 0; t < npk; t++) {
        int P0 = pidx[t] * P, P1 = KB_MIN(n, P0 + P);
        for (int j = P0; j < P1; j++) idx[c++] = j;
    }
    return c;
}

/* Two phases over the selection rows (query heads under per_head, else KV
 * groups) in one parallel job (mc_select_attend): select (page bounds, top
 * pages; timed as select_seconds) and attend (exact attention over the
 * chosen pages' slots). */
typedef struct quest_job {
    quest_state *st;
    const kb_kernels *kk;
    const float *q;
    float *out;
    int np, n;
} quest_job;

static double quest_select_row(void *p, int i, int worker) {
    (void)worker;
    quest_job *J = p;
    quest_state *st = J->st;
    int G = st->c.G, D = st->c.ctx.D, np = J->np;
    float *ps = mc_scratch(0, (size_t)st->cap); /* both used only inside this task */
    if (st->c.p.gqa == KB_GQA_PER_HEAD) {
        int g = i / G;
        J->kk->quest_scores(J->q + (size_t)i * D, D, st->pg[g].kmax, st->pg[g].kmin, st->pg[g].dt, st->pg[g].cap, np, ps);
    } else {
        float *tmp = mc_scratch(1, (size_t)st->cap);
        for (int t = 0; t < np; t++) ps[t] = 0;
        for (int h = 0; h < G; h++) {
            J->kk->quest_scores(J->q + ((size_t)i * G + h) * D, D, st->pg[i].kmax, st->pg[i].kmin, st->pg[i].dt, st->pg[i].cap, np, tmp);
            for (int t = 0; t < np; t++) ps[t] += tmp[t];
        }
        if (st->c.p.gqa == KB_GQA_GROUP_MEAN)
            for (int t = 0; t < np; t++) ps[t] /= (float)G;
    }
    st->cnt[i] = quest_pick(st, J->kk, i, ps, np, J->n);
    return 0; /* the summaries were brought up to date before the job */
}

static void quest_attend_row(void *p, int i, int worker) {
    (void)worker;
    quest_job *J = p;
    quest_state *st = J->st;
    int G = st->c.G, D = st->c.ctx.D, per_head = st->c.p.gqa == KB_GQA_PER_HEAD;
    int g = per_head ? i / G : i, h0 = per_head ? i : i * G, nh = per_head ? 1 : G;
    const int32_t *idx = st->idx + (size_t)i * st->pk * st->c.bud.P;
    J->kk->attn_gather(J->q + (size_t)h0 * D, nh, &st->s[g], idx, st->cnt[i], st->c.scale,
                       J->out + (size_t)h0 * D);
    mc_sel_set(&st->c, i, idx, st->cnt[i], &st->s[g]);
}

static void quest_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                         float *out) {
    quest_state *st = state;
    kb_mcommon *c = &st->c;
    const kb_kernels *kk = kernels_get();
    int Hkv = c->ctx.Hkv, D = c->ctx.D, G = c->G, per_head = c->p.gqa == KB_GQA_PER_HEAD;
    streams_append_token(st->s, Hkv, Hkv, D, k, v, pos);
    c->n_in++;
    int n = st->s[0].n, P = c->bud.P;
    int np = (n + P - 1) / P;
    if (np > st->cap) st->cap = KB_MAX(np, 2 * st->cap); /* page-bound scratch (mc_scratch) */
    int pk = KB_MIN(c->bud.n_pages, np); /* pages a row can choose this step */
    if (pk > st->pk) {
        st->pk = mc_grow_cap(st->pk, pk, c->bud.n_pages);
        free(st->pidx);
        free(st->idx);
        st->pidx = KB_MALLOC((size_t)st->rows * st->pk * sizeof(int32_t));
        st->idx = KB_MALLOC((size_t)st->rows * st->pk * P * sizeof(int32_t));
    }
    quest_job J = {st, kk, q, out, np, n};
    double t0 = kb_now();
    for (int g = 0; g < Hkv; g++) pages_sync(&st->pg[g], &st->s[g], kk);
    double sync = kb_now() - t0;
    mc_sel_begin(c, st->rows, KB_MIN(c->bud.n_pages * P, n), c->bud.n_pages * P); /* each attend task records its row */
    c->acc.select_seconds += sync + mc_select_attend(kk, st->rows, quest_select_row, quest_attend_row, &J, NULL);
    c->acc.upkeep_seconds += sync;
    double distinct = 0, attended = 0;
    for (int i = 0; i < st->rows; i++) attended += (double)st->cnt[i] * (per_head ? 1 : G);
    if (per_head)
        for (int g = 0; g < Hkv; g++) distinct += mc_sel_distinct(c, g * G, G, n);
    else
        for (int g = 0; g < Hkv; g++) distinct += st->cnt[g];
    /* page min and max of all D dims: 2D elements per page = one token-equivalent */
    double approx = np;
    c->acc.approx_tokeq = approx;
    c->acc.read_tokeq = distinct / Hkv + (c->p.budget_mode == KB_BUDGET_TRAFFIC ? approx : 0);
    /* the summaries are stored in the KV dtype (pages.c), as resident_bytes counts them */
    c->acc.read_bytes = distinct * mc_row_bytes(c) + (double)Hkv * np * 2 * D * kb_dtype_size(c->ctx.kv_dtype);
    c->acc.attended = attended / c->ctx.Hq;
    mc_acc_finish(c, per_head);
}

static const kb_kvstream *quest_retained(void *state, int qhead) {
    quest_state *st = state;
    return &st->s[qhead / st->c.G];
}

static const kb_kvstream *quest_cache(void *state, int row, int *n_rows) {
    quest_state *st = state;
    int per_head = st->c.p.gqa == KB_GQA_PER_HEAD;
    if (n_rows) *n_rows = per_head ? st->c.ctx.Hq : st->c.ctx.Hkv;
    return &st->s[per_head ? row / st->c.G : row];
}

static int quest_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    quest_state *st = state;
    int rc = mc_streams_extend(&st->c, st->s, st->c.ctx.Hkv, pv, 0, err);
    if (rc) return rc;
    const kb_kernels *kk = kernels_get();
    for (int g = 0; g < st->c.ctx.Hkv; g++) pages_sync(&st->pg[g], &st->s[g], kk);
    return 0;
}

static long quest_mark(void *state) { return ((quest_state *)state)->c.n_in; }

static void quest_rollback(void *state, long mark) {
    quest_state *st = state;
    streams_drop(st->s, st->c.ctx.Hkv, mc_rollback_count(&st->c, mark));
    const kb_kernels *kk = kernels_get();
    for (int g = 0; g < st->c.ctx.Hkv; g++) pages_truncate(&st->pg[g], &st->s[g], st->s[g].n, kk);
}

static void quest_account(void *state, kb_account *acc) {
    quest_state *st = state;
    mc_streams_account(&st->c, st->s, st->c.ctx.Hkv, acc);
    for (int g = 0; g < st->c.ctx.Hkv; g++) acc->resident_bytes += (double)pages_bytes(&st->pg[g]);
    acc->budget = &st->c.bud;
}

static void quest_destroy(void *state) { quest_free(state); }

const kb_method_ops kb_method_quest = {
    .name = "quest",
    .description = "QUEST: page min/max bounds, top pages (current page always) attended exactly",
    .keys = quest_keys,
    .needs_budget = 1,
    .selects = 1,
    .validate = quest_validate,
    .layer_init = quest_init,
    .decode = quest_decode,
    .retained = quest_retained,
    .decode_cache = quest_cache,
    .extend = quest_extend,
    .mark = quest_mark,
    .rollback = quest_rollback,
    .account = quest_account,
    .destroy = quest_destroy,
};
