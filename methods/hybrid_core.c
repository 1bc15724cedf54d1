/* hybrid_core.c - hybrid sparse attention over Hkv streams (hybrid_core.h). */
#include "methods/hybrid_core.h"

#include <stdlib.h>

void hybrid_init(kb_hybrid *h, int Hq, int Hkv, int D, int p, int r, int k, int per_head,
                 int group_sum, int local_window, int reallocate_mean_v) {
    memset(h, 0, sizeof *h);
    h->Hq = Hq;
    h->Hkv = Hkv;
    h->G = Hq / Hkv;
    h->D = D;
    h->p = p < 1 ? 1 : p;
    h->r = KB_MAX(1, KB_MIN(D, r));
    h->k = k;
    h->per_head = per_head;
    h->group_sum = group_sum;
    h->local_window = local_window;
    h->reallocate_mean_v = reallocate_mean_v;
    /* p == 1 (SparQ): the "summaries" are a dim-major copy of K, so the
     * scores read r contiguous rows instead of touching every key's row */
    h->pg = KB_CALLOC((size_t)Hkv, sizeof *h->pg);
    for (int g = 0; g < Hkv; g++) pages_init(&h->pg[g], h->p, D);
    if (reallocate_mean_v) {
        h->vsum = KB_CALLOC((size_t)Hkv * D, sizeof(double));
        h->vsum_n = KB_CALLOC((size_t)Hkv, sizeof(int));
    }
    h->rows = per_head ? Hq : Hkv;
    h->cnt = KB_CALLOC((size_t)h->rows, sizeof(int));
    h->dims = KB_MALLOC((size_t)h->rows * h->r * sizeof(int32_t));
    h->dmark = KB_CALLOC((size_t)D, 1);
}

void hybrid_free(kb_hybrid *h) {
    if (h->pg)
        for (int g = 0; g < h->Hkv; g++) pages_free(&h->pg[g]);
    free(h->pg);
    free(h->vsum);
    free(h->vsum_n);
    free(h->hw);
    free(h->idx);
    free(h->cnt);
    free(h->dims);
    free(h->dmark);
    memset(h, 0, sizeof *h);
}

static void vsum_rebuild(kb_hybrid *h, int g, const kb_kvstream *s) {
    double *acc = h->vsum + (size_t)g * h->D;
    for (int d = 0; d < h->D; d++) acc[d] = 0;
    h->vsum_n[g] = 0;
    (void)s;
}

/* Upkeep of KV group g (groups are independent: the select phase runs them
 * on several threads). */
static void hybrid_sync_group(kb_hybrid *h, int g, const kb_kvstream *sg, const kb_kernels *kk) {
    if (h->pg) pages_sync(&h->pg[g], sg, kk);
    if (h->vsum && h->vsum_n[g] < sg->n) {
        float vb[256], *v = h->D <= 256 ? vb : KB_MALLOC((size_t)h->D * sizeof(float));
        double *acc = h->vsum + (size_t)g * h->D;
        for (int j = h->vsum_n[g]; j < sg->n; j++) {
            kvstream_get_f32(sg, j, NULL, v);
            for (int d = 0; d < h->D; d++) acc[d] += v[d];
        }
        h->vsum_n[g] = sg->n;
        if (v != vb) free(v);
    }
}

void hybrid_sync(kb_hybrid *h, const kb_kvstream *s, const kb_kernels *kk) {
    for (int g = 0; g < h->Hkv; g++) hybrid_sync_group(h, g, &s[g], kk);
}

void hybrid_reset(kb_hybrid *h) {
    for (int g = 0; g < h->Hkv; g++) {
        if (h->pg) pages_reset(&h->pg[g]);
        if (h->vsum) vsum_rebuild(h, g, NULL);
    }
}

void hybrid_truncate(kb_hybrid *h, const kb_kvstream *s, const kb_kernels *kk) {
    for (int g = 0; g < h->Hkv; g++) {
        if (h->pg) pages_truncate(&h->pg[g], &s[g], s[g].n, kk);
        if (h->vsum && h->vsum_n[g] > s[g].n) vsum_rebuild(h, g, &s[g]); /* sums again at sync */
    }
    hybrid_sync(h, s, kk);
}

double hybrid_meta_bytes(const kb_hybrid *h) {
    double b = 0;
    for (int g = 0; g < h->Hkv; g++) {
        if (h->pg) b += (double)pages_bytes(&h->pg[g]);
    }
    if (h->vsum) b += (double)h->Hkv * h->D * sizeof(double);
    return b;
}

/* k slots of n: the last local_window slots forced, the rest by page score. */
static int hybrid_select(const kb_hybrid *h, const kb_kernels *kk, const float *ps, int n, int k,
                         int32_t *idx) {
    int forced = KB_MIN(h->local_window, k);
    int c = kk->topk_pages(ps, n - forced, h->p, k - forced, idx);
    for (int t = 0; t < forced; t++) idx[c++] = n - forced + t;
    return c;
}

/* One decode step runs two phases over the selection rows (KV groups, or
 * query heads under per_head) in one parallel job (mc_select_attend):
 * select (the new token appended to its group's stream and the group's
 * summaries brought up to date, both timed as upkeep; approximate scores
 * and top-k; all of it the layer's select_seconds) and attend (exact
 * attention over the chosen slots, SparQ's mean-V correction, the row's
 * selection recorded); then the rest of the accounting on this thread.
 * Each row has its own scratch (page scores, weights, slots, dims): row i's
 * attend reads only what row i's select wrote. The append and the
 * recording used to be serial work around the job: on the Zen 4 VM ~5.5 us
 * a layer of RocketKV's ~35 (docs/PERFORMANCE-LOG.md). */
typedef struct hy_job {
    kb_hybrid *h;
    const kb_kernels *kk;
    kb_mcommon *c;
    const float *q;
    kb_kvstream *s;
    const float *k, *v; /* the new token's K and V [Hkv][D] to append in the job, or NULL */
    int32_t pos;
    float *out;
} hy_job;

static void hy_row(const hy_job *J, int i, int *g, int *h0, int *nh) {
    const kb_hybrid *h = J->h;
    *g = h->per_head ? i / h->G : i;
    *h0 = h->per_head ? i : i * h->G;
    *nh = h->per_head ? 1 : h->G;
}

static double hy_select(void *p, int i, int worker) {
    (void)worker;
    const hy_job *J = p;
    kb_hybrid *h = J->h;
    int g, h0, nh;
    hy_row(J, i, &g, &h0, &nh);
    const kb_kvstream *sg = &J->s[g];
    double upkeep = 0;
    if (!h->per_head) { /* row i owns group g */
        double t0 = kb_now();
        if (J->k) kvstream_append_f32(&J->s[g], J->k + (size_t)g * h->D, J->v + (size_t)g * h->D, J->pos);
        hybrid_sync_group(h, g, sg, J->kk);
        upkeep = kb_now() - t0;
    }
    int n = sg->n, np = (n + h->p - 1) / h->p;
    const void *kmax = h->pg ? h->pg[g].kmax : NULL, *kmin = h->pg ? h->pg[g].kmin : NULL;
    int ldk = h->pg ? h->pg[g].cap : 0;
    float *ps = mc_scratch(0, (size_t)h->cap); /* used only inside this task */
    float *hw = h->reallocate_mean_v ? h->hw + (size_t)i * h->G * h->cap : NULL;
    J->kk->hybrid_scores(J->q + (size_t)h0 * h->D, nh, h->D, h->r, kmax, kmin, ldk, sg, n, h->p, ps, hw,
                         h->dims + (size_t)i * h->r);
    if (h->group_sum && nh > 1)
        for (int P = 0; P < np; P++) ps[P] *= (float)nh;
    h->cnt[i] = hybrid_select(h, J->kk, ps, n, KB_MIN(h->k, n), h->idx + (size_t)i * h->kcap);
    return upkeep;
}

static void hy_attend(void *p, int i, int worker) {
    (void)worker;
    const hy_job *J = p;
    kb_hybrid *h = J->h;
    int g, h0, nh, D = h->D;
    hy_row(J, i, &g, &h0, &nh);
    const kb_kvstream *sg = &J->s[g];
    int n = sg->n, np = (n + h->p - 1) / h->p, cnt = h->cnt[i];
    const int32_t *idx = h->idx + (size_t)i * h->kcap;
    float *o = J->out + (size_t)h0 * D;
    J->kk->attn_gather(J->q + (size_t)h0 * D, nh, sg, idx, cnt, J->c->scale, o);
    mc_sel_set(J->c, i, idx, cnt, sg);
    if (h->reallocate_mean_v && n > 0) {
        const double *vs = h->vsum + (size_t)g * D;
        const float *hw = h->hw + (size_t)i * h->G * h->cap;
        for (int t = 0; t < nh; t++) {
            double a = 0;
            for (int u = 0; u < cnt; u++) a += hw[(size_t)t * np + idx[u] / h->p];
            float *ot = o + (size_t)t * D;
            for (int d = 0; d < D; d++) ot[d] = (float)(a * ot[d] + (1 - a) * (vs[d] / n));
        }
    }
}

void hybrid_attend(kb_hybrid *h, const kb_kernels *kk, kb_mcommon *c, const float *q,
                   const float *k, const float *v, int32_t pos, kb_kvstream *s, float *out) {
    int G = h->G, D = h->D, rows = h->rows;
    int nsel = h->per_head ? G : 1, nh = h->per_head ? 1 : G;
    /* a row selects at most min(k, its stream's slots after this step's
     * token): the buffers follow the cache, not the budget (which may exceed
     * any context) */
    int nmax = 0;
    for (int g = 0; g < h->Hkv; g++) nmax = KB_MAX(nmax, s[g].n + (k ? 1 : 0));
    int kn = KB_MAX(1, KB_MIN(h->k, nmax));
    if (kn > h->kcap) {
        h->kcap = mc_grow_cap(h->kcap, kn, h->k);
        free(h->idx);
        h->idx = KB_MALLOC((size_t)rows * h->kcap * sizeof(int32_t));
    }
    mc_sel_begin(c, rows, kn, h->k); /* each attend task records its row */
    double t0 = kb_now();
    if (k && h->per_head) { /* the G rows of a group read its stream: append first */
        streams_append_token(s, h->Hkv, h->Hkv, D, k, v, pos);
        k = v = NULL;
    }
    int need = 0, add = k ? 1 : 0; /* slots the job appends */
    for (int g = 0; g < h->Hkv; g++) need = KB_MAX(need, (s[g].n + add + h->p - 1) / h->p);
    if (need > h->cap) {
        h->cap = KB_MAX(need, 2 * h->cap);
        free(h->hw);
        h->hw = h->reallocate_mean_v ? KB_MALLOC((size_t)rows * G * h->cap * sizeof(float)) : NULL;
    }
    hy_job J = {h, kk, c, q, s, k, v, pos, out};
    if (h->per_head) hybrid_sync(h, s, kk); /* the G rows of a group share its summaries */
    double sync = kb_now() - t0;
    double upkeep = 0;
    c->acc.select_seconds += sync + mc_select_attend(kk, rows, hy_select, hy_attend, &J, &upkeep);
    c->acc.upkeep_seconds += sync + upkeep;

    double read_rows = 0, approx_tokeq = 0, approx_bytes = 0, attended = 0;
    size_t elt = kb_dtype_size(c->ctx.kv_dtype);
    for (int i = 0; i < rows; i++) attended += (double)h->cnt[i] * nh;
    for (int g = 0; g < h->Hkv; g++) {
        int n = s[g].n, np = (n + h->p - 1) / h->p;
        /* reads of this KV head: distinct K/V rows + the approximation's dims */
        read_rows += mc_sel_distinct(c, h->per_head ? g * G : g, nsel, n);
        /* distinct summary rows: per dim, the max row where the row's q sum is
         * positive, else the min (one row each in grouped mode; per head, two
         * heads with opposite signs read both); p = 1 reads K's dim-major row */
        int du = 0, two = h->per_head && h->p > 1;
        for (int j = 0; j < nsel; j++)
            for (int t = 0; t < h->r; t++) {
                int row = h->per_head ? g * G + j : g, d = h->dims[(size_t)row * h->r + t];
                unsigned char bit = two && q[(size_t)row * D + d] > 0 ? 2 : 1;
                if (!(h->dmark[d] & bit)) {
                    h->dmark[d] |= bit;
                    du++;
                }
            }
        memset(h->dmark, 0, (size_t)D);
        double elems = (double)(h->p > 1 ? np : n) * du; /* one of min/max per row's dim and page */
        approx_tokeq += elems / (2.0 * D);
        approx_bytes += elems * elt; /* summaries are stored in the KV dtype */
    }
    kb_account *a = &c->acc;
    a->approx_tokeq = approx_tokeq / h->Hkv;
    a->read_tokeq = (read_rows + (c->p.budget_mode == KB_BUDGET_TRAFFIC ? approx_tokeq : 0)) / h->Hkv;
    a->read_bytes = read_rows * mc_row_bytes(c) + approx_bytes;
    a->attended = attended / h->Hq;
    mc_acc_finish(c, h->per_head);
}

/* ---- "every token kept + hybrid attention" method state (hybrid, sparq) ---- */

typedef struct hybm_state {
    kb_mcommon c;
    kb_kvstream *s; /* [Hkv] every token */
    kb_hybrid h;
} hybm_state;

int hybm_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
              const kb_budget *bud, const char *who, void **state, kb_err *err) {
    hybm_state *st = KB_CALLOC(1, sizeof *st);
    mc_init(&st->c, who, p, ctx);
    int rc = mc_check_view(&st->c, pv, 0, err);
    if (rc) {
        mc_free(&st->c);
        free(st);
        return rc;
    }
    st->c.bud = *bud;
    int L = pv->kv[0].n;
    st->s = streams_new(ctx->Hkv, ctx->kv_dtype, ctx->D, L + KB_MAX(ctx->N_new, 16));
    streams_append_view(st->s, ctx->Hkv, pv);
    hybrid_init(&st->h, ctx->Hq, ctx->Hkv, ctx->D, bud->p, bud->r, bud->k,
                p->gqa == KB_GQA_PER_HEAD, p->gqa == KB_GQA_GROUP_SUM, p->local_window,
                p->reallocate_mean_v);
    hybrid_sync(&st->h, st->s, kernels_get());
    st->c.n_in = st->c.base = L;
    *state = st;
    return 0;
}

void hybm_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                 float *out) {
    hybm_state *st = state;
    const kb_kernels *kk = kernels_get();
    st->c.n_in++;
    hybrid_attend(&st->h, kk, &st->c, q, k, v, pos, st->s, out); /* appends the token */
}

const kb_kvstream *hybm_retained(void *state, int qhead) {
    hybm_state *st = state;
    return &st->s[qhead / st->c.G];
}

const kb_kvstream *hybm_cache(void *state, int row, int *n_rows) {
    hybm_state *st = state;
    if (n_rows) *n_rows = st->h.per_head ? st->c.ctx.Hq : st->c.ctx.Hkv;
    return &st->s[st->h.per_head ? row / st->c.G : row];
}

int hybm_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    hybm_state *st = state;
    int rc = mc_streams_extend(&st->c, st->s, st->c.ctx.Hkv, pv, 0, err);
    if (!rc) hybrid_sync(&st->h, st->s, kernels_get());
    return rc;
}

long hybm_mark(void *state) { return ((hybm_state *)state)->c.n_in; }

void hybm_rollback(void *state, long mark) {
    hybm_state *st = state;
    streams_drop(st->s, st->c.ctx.Hkv, mc_rollback_count(&st->c, mark));
    hybrid_truncate(&st->h, st->s, kernels_get());
}

void hybm_account(void *state, kb_account *acc) {
    hybm_state *st = state;
    mc_streams_account(&st->c, st->s, st->c.ctx.Hkv, acc);
    acc->resident_bytes += hybrid_meta_bytes(&st->h);
    acc->budget = &st->c.bud;
}

void hybm_destroy(void *state) {
    hybm_state *st = state;
    streams_free(st->s, st->c.ctx.Hkv);
    hybrid_free(&st->h);
    mc_free(&st->c);
    free(st);
}
