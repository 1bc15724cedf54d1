/* exact_topk.c - the Exact-TopK oracle (methods.md §7): exact scores
 * q.K^T/sqrt(D) over the whole cache, keep the top k = B, softmax over those
 * only, times V. Per query head by default (the released topk.py);
 * group_sum / group_mean select one set per KV group by the summed / averaged
 * exact softmax probabilities of the group's heads. Scoring is not charged
 * as traffic (oracle). */
#include <math.h>
#include <stdlib.h>

#include "methods/common.h"

typedef struct etk_state {
    kb_mcommon c;
    kb_kvstream *s; /* [Hkv] every token */
    int rows;       /* selection rows: Hq (per_head) or Hkv */
    float *sc;      /* [Hkv][G][cap] exact scores (scaled) */
    float *agg;     /* [Hkv][cap] group aggregate (group policies) */
    int32_t *idx;   /* [rows][kcap] chosen slots */
    int *cnt;       /* [rows] */
    int cap;
    int kcap;       /* idx's row stride: min(B, the longest cache so far), grown as the
                       cache grows (a budget may exceed any context) */
} etk_state;

static const char *const etk_keys[] = {"gqa", NULL};

static int etk_validate(kb_method_params *p, kb_err *err) {
    if (p->budget < 1)
        return kb_fail(err, KB_EINPUT, "method 'exact_topk': key 'budget': expected an integer >= 1, got %d",
                       p->budget);
    if (p->gqa == KB_GQA_DEFAULT) p->gqa = KB_GQA_PER_HEAD;
    return 0;
}

static int etk_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
                    void **state, kb_err *err) {
    etk_state *st = KB_CALLOC(1, sizeof *st);
    mc_init(&st->c, "exact_topk", p, ctx);
    int rc = mc_check_view(&st->c, pv, 0, err);
    if (rc) {
        mc_free(&st->c);
        free(st);
        return rc;
    }
    int L = pv->kv[0].n;
    st->c.bud.mode = p->budget_mode;
    st->c.bud.B = p->budget;
    st->c.bud.k = p->budget;
    st->c.bud.S = ctx->S;
    st->c.bud.N_new = ctx->N_new;
    st->c.bud.D = ctx->D;
    st->s = streams_new(ctx->Hkv, ctx->kv_dtype, ctx->D, L + KB_MAX(ctx->N_new, 16));
    streams_append_view(st->s, ctx->Hkv, pv);
    st->rows = p->gqa == KB_GQA_PER_HEAD ? ctx->Hq : ctx->Hkv;
    st->cnt = KB_CALLOC((size_t)st->rows, sizeof(int));
    st->c.n_in = st->c.base = L;
    *state = st;
    return 0;
}

/* In-place softmax of x[0..n) in f32 with max subtraction. */
static void softmax_inplace(float *x, int n) {
    float mx = -INFINITY;
    for (int j = 0; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    double sum = 0;
    for (int j = 0; j < n; j++) sum += (x[j] = expf(x[j] - mx));
    float inv = (float)(1.0 / sum);
    for (int j = 0; j < n; j++) x[j] *= inv;
}

/* A decode step: exact scores of every KV group (one parallel job over all
 * groups' slots, scaled inside it), then two phases over the selection rows
 * (query heads under per_head, else KV groups) in one parallel job
 * (mc_select_attend): top-k (with the group softmax for the group policies;
 * scores + top-k are the step's select_seconds) and the attention over the
 * chosen slots. */
typedef struct etk_job {
    etk_state *st;
    const kb_kernels *kk;
    const float *q;
    float *out;
    int n, kq;
} etk_job;

static double etk_select_row(void *p, int i, int worker) {
    (void)worker;
    etk_job *J = p;
    etk_state *st = J->st;
    int G = st->c.G, n = J->n;
    int32_t *idx = st->idx + (size_t)i * st->kcap;
    if (st->c.p.gqa == KB_GQA_PER_HEAD) {
        st->cnt[i] = J->kk->topk(st->sc + (size_t)i * st->cap, n, J->kq, idx); /* row i = head i */
        return 0;
    }
    float *agg = st->agg + (size_t)i * st->cap;
    for (int j = 0; j < n; j++) agg[j] = 0;
    for (int h = 0; h < G; h++) {
        float *x = st->sc + ((size_t)i * G + h) * st->cap;
        softmax_inplace(x, n);
        for (int j = 0; j < n; j++) agg[j] += x[j];
    }
    if (st->c.p.gqa == KB_GQA_GROUP_MEAN)
        for (int j = 0; j < n; j++) agg[j] /= (float)G;
    st->cnt[i] = J->kk->topk(agg, n, J->kq, idx);
    return 0; /* no page summaries */
}

static void etk_attend_row(void *p, int i, int worker) {
    (void)worker;
    etk_job *J = p;
    etk_state *st = J->st;
    int G = st->c.G, D = st->c.ctx.D, per_head = st->c.p.gqa == KB_GQA_PER_HEAD;
    int g = per_head ? i / G : i, h0 = per_head ? i : i * G, nh = per_head ? 1 : G;
    const int32_t *idx = st->idx + (size_t)i * st->kcap;
    J->kk->attn_gather(J->q + (size_t)h0 * D, nh, &st->s[g], idx, st->cnt[i], st->c.scale, J->out + (size_t)h0 * D);
    mc_sel_set(&st->c, i, idx, st->cnt[i], &st->s[g]);
}

static void etk_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                       float *out) {
    etk_state *st = state;
    kb_mcommon *c = &st->c;
    const kb_kernels *kk = kernels_get();
    int Hkv = c->ctx.Hkv, D = c->ctx.D, G = c->G, per_head = c->p.gqa == KB_GQA_PER_HEAD;
    streams_append_token(st->s, Hkv, Hkv, D, k, v, pos);
    c->n_in++;
    int n = st->s[0].n;
    if (n > st->cap) {
        st->cap = KB_MAX(n, 2 * st->cap);
        free(st->sc);
        free(st->agg);
        st->sc = KB_MALLOC((size_t)Hkv * G * st->cap * sizeof(float));
        st->agg = KB_MALLOC((size_t)Hkv * st->cap * sizeof(float));
    }
    int kq = KB_MIN(c->p.budget, n);
    if (kq > st->kcap) {
        st->kcap = mc_grow_cap(st->kcap, kq, c->p.budget);
        free(st->idx);
        st->idx = KB_MALLOC((size_t)st->rows * st->kcap * sizeof(int32_t));
    }
    etk_job J = {st, kk, q, out, n, kq};
    double t0 = kb_now();
    kk->qk_scores(q, Hkv, G, st->s, n, c->scale, st->sc, st->cap);
    double scores = kb_now() - t0;
    mc_sel_begin(c, st->rows, kq, c->p.budget); /* each attend task records its row */
    c->acc.select_seconds += scores + mc_select_attend(kk, st->rows, etk_select_row, etk_attend_row, &J, NULL);
    double distinct = 0;
    for (int g = 0; g < Hkv; g++) distinct += per_head ? mc_sel_distinct(c, g * G, G, n) : st->cnt[g];
    c->acc.read_tokeq = distinct / Hkv;
    c->acc.approx_tokeq = 0;
    c->acc.read_bytes = distinct * mc_row_bytes(c);
    c->acc.attended = kq;
    mc_acc_finish(c, per_head);
}

static const kb_kvstream *etk_retained(void *state, int qhead) {
    etk_state *st = state;
    return &st->s[qhead / st->c.G];
}

static const kb_kvstream *etk_cache(void *state, int row, int *n_rows) {
    etk_state *st = state;
    int per_head = st->c.p.gqa == KB_GQA_PER_HEAD;
    if (n_rows) *n_rows = per_head ? st->c.ctx.Hq : st->c.ctx.Hkv;
    return &st->s[per_head ? row / st->c.G : row];
}

static int etk_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    etk_state *st = state;
    return mc_streams_extend(&st->c, st->s, st->c.ctx.Hkv, pv, 0, err);
}

static long etk_mark(void *state) { return ((etk_state *)state)->c.n_in; }

static void etk_rollback(void *state, long mark) {
    etk_state *st = state;
    streams_drop(st->s, st->c.ctx.Hkv, mc_rollback_count(&st->c, mark));
}

static void etk_account(void *state, kb_account *acc) {
    etk_state *st = state;
    mc_streams_account(&st->c, st->s, st->c.ctx.Hkv, acc);
    acc->budget = &st->c.bud;
}

static void etk_destroy(void *state) {
    etk_state *st = state;
    streams_free(st->s, st->c.ctx.Hkv);
    free(st->sc);
    free(st->agg);
    free(st->idx);
    free(st->cnt);
    mc_free(&st->c);
    free(st);
}

const kb_method_ops kb_method_exact_topk = {
    .name = "exact_topk",
    .description = "Exact-TopK oracle: exact scores, top B per query head, softmax over those",
    .keys = etk_keys,
    .needs_budget = 1,
    .selects = 1,
    .validate = etk_validate,
    .layer_init = etk_init,
    .decode = etk_decode,
    .retained = etk_retained,
    .decode_cache = etk_cache,
    .extend = etk_extend,
    .mark = etk_mark,
    .rollback = etk_rollback,
    .account = etk_account,
    .destroy = etk_destroy,
};
