/* snapkv_core.c - SnapKV-style prompt eviction (snapkv_core.h, methods.md §2).
 *
 * Per row: window scores (softmax of the window queries over the row's keys,
 * causal by position, summed over window rows, prefix keys only), GQA
 * aggregation over the row's heads, 1-D pooling, top-(budget - Wo) prefix
 * keys back in chronological order, then the whole window. */
#include "methods/snapkv_core.h"

#include "methods/params.h"

#include <math.h>
#include <stdlib.h>

static int window_used(const kb_snap_cfg *cfg, int n, int Wq) {
    int Wo = KB_MIN(cfg->window, Wq);
    Wo = KB_MIN(Wo, n);
    return KB_MIN(Wo, cfg->budget); /* a budget below the window keeps the newest tokens */
}

int snap_select_row(const kb_snap_cfg *cfg, const kb_kernels *kk, int D, const kb_kvstream *s,
                    const float *Q, int ldq, int nh, const int32_t *qpos, int Wq, int32_t *idx,
                    kb_snap_info *info) {
    int n = s->n;
    kb_snap_info dummy;
    if (!info) info = &dummy;
    memset(info, 0, sizeof *info);
    if (n <= cfg->budget) {
        for (int j = 0; j < n; j++) idx[j] = j;
        return n;
    }
    int Wo = window_used(cfg, n, Wq);
    int n_prefix = n - Wo, nkeep = cfg->budget - Wo;
    info->evicted = 1;
    info->Wo = Wo;
    info->kernel = mc_kernel_for(cfg->kparams, n);
    int c = 0;
    if (nkeep > 0) {
        float *sc = KB_MALLOC((size_t)nh * n_prefix * sizeof(float));
        float *agg = KB_MALLOC((size_t)n_prefix * sizeof(float));
        float *pooled = KB_MALLOC((size_t)n_prefix * sizeof(float));
        kk->snapkv_scores(Q + (size_t)(Wq - Wo) * ldq, Wo, ldq, nh, qpos + (Wq - Wo), s, n, n_prefix,
                          1.0f / sqrtf((float)D), sc, n_prefix);
        for (int j = 0; j < n_prefix; j++) {
            float a = 0;
            for (int h = 0; h < nh; h++) a += sc[(size_t)h * n_prefix + j];
            agg[j] = cfg->gqa == KB_GQA_GROUP_MEAN ? a / nh : a;
        }
        kk->pool1d(agg, n_prefix, info->kernel, cfg->pooling == KB_POOL_AVG, pooled);
        c = kk->topk(pooled, n_prefix, nkeep, idx);
        free(sc);
        free(agg);
        free(pooled);
    }
    for (int t = 0; t < Wo; t++) idx[c + t] = n_prefix + t;
    return c + Wo;
}

int snap_compress(const kb_snap_cfg *cfg, const kb_kernels *kk, int Hq, int Hkv, int D,
                  const kb_kvstream *const *src, int rows, const float *qwin,
                  const int32_t *qpos, int Wq, kb_kvstream *dst, kb_snap_info *info,
                  const char *who, kb_err *err) {
    int G = Hq / Hkv, per_head = cfg->gqa == KB_GQA_PER_HEAD;
    if (rows != (per_head ? Hq : Hkv))
        return kb_fail(err, KB_ERUNTIME, "%s: stage 1 got %d rows, expected %d", who, rows,
                       per_head ? Hq : Hkv);
    for (int i = 0; i < rows; i++)
        if (cfg->budget < 1 && src[i]->n > cfg->budget)
            return kb_fail(err, KB_EINPUT, "%s: prompt budget %d leaves no room for the prompt "
                           "(check budget, max_new and the context length)", who, cfg->budget);
    size_t ldq = (size_t)Hq * D;
    int nmax = 1; /* a row keeps at most min(budget, its slots): sized by the rows, not the budget */
    for (int i = 0; i < rows; i++) nmax = KB_MAX(nmax, src[i]->n);
    int32_t *idx = KB_MALLOC((size_t)KB_MAX(1, KB_MIN(cfg->budget, nmax)) * sizeof(int32_t));
    kb_snap_info last = {0, 0, 0};
    for (int i = 0; i < rows; i++) {
        const kb_kvstream *s = src[i];
        int n = s->n;
        if (n > cfg->budget) {
            int Wo = window_used(cfg, n, Wq);
            for (int t = 0; t < Wo; t++)
                if (s->pos[n - Wo + t] != qpos[Wq - Wo + t]) {
                    free(idx);
                    return kb_fail(err, KB_EINPUT,
                                   "%s: window query %d is at position %d but the matching key slot %d holds "
                                   "position %d (the window must be the last prompt tokens)",
                                   who, Wq - Wo + t, qpos[Wq - Wo + t], n - Wo + t, s->pos[n - Wo + t]);
                }
        }
        int h0 = per_head ? i : i * G, nh = per_head ? 1 : G;
        kb_snap_info inf;
        int c = snap_select_row(cfg, kk, D, s, qwin + (size_t)h0 * D, (int)ldq, nh, qpos, Wq, idx, &inf);
        if (inf.evicted) last = inf;
        kb_kvstream *d = &dst[i];
        d->n = 0;
        stream_append_idx(d, s, idx, c);
    }
    free(idx);
    if (info) *info = last;
    return 0;
}

int snap_recompress(const kb_snap_cfg *cfg, const kb_kernels *kk, int Hq, int Hkv, int D,
                    kb_kvstream *s, int rows, const kb_prefill_view *pv, kb_snap_info *info,
                    const char *who, kb_err *err) {
    kb_kvstream *tmp = streams_new(rows, s[0].dtype, D, 0);
    const kb_kvstream **src = KB_MALLOC((size_t)rows * sizeof *src);
    for (int i = 0; i < rows; i++) {
        kvstream_reserve(&tmp[i], s[i].n + pv->kv[0].n);
        kvstream_copy(&tmp[i], &s[i]);
        src[i] = &tmp[i];
    }
    streams_append_view(tmp, rows, pv);
    int rc = snap_compress(cfg, kk, Hq, Hkv, D, src, rows, pv->qwin, pv->qwin_pos, pv->Wq, s, info,
                           who, err);
    free(src);
    streams_free(tmp, rows);
    return rc;
}

/* ---- "SnapKV eviction + dense attention" method state (snapkv, snapkvpp) ---- */

typedef struct snapm_state {
    kb_mcommon c;
    kb_snap_cfg cfg;
    int rows, per_head;
    kb_kvstream *s; /* [rows] kept tokens + generated, chronological */
    kb_snap_info info;
} snapm_state;

static void snapm_free(snapm_state *st) {
    streams_free(st->s, st->rows);
    mc_free(&st->c);
    free(st);
}

int snapm_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
               const char *who, void **state, kb_err *err) {
    snapm_state *st = KB_CALLOC(1, sizeof *st);
    mc_init(&st->c, who, p, ctx);
    int rc = mc_check_view(&st->c, pv, p->window, err);
    if (rc) {
        snapm_free(st);
        return rc;
    }
    st->per_head = p->gqa == KB_GQA_PER_HEAD;
    st->rows = st->per_head ? ctx->Hq : ctx->Hkv;
    st->cfg.window = p->window;
    st->cfg.budget = p->budget;
    st->cfg.gqa = p->gqa;
    st->cfg.pooling = p->pooling;
    st->cfg.kparams = &st->c.p;
    kb_budget *b = &st->c.bud;
    b->mode = p->budget_mode;
    b->B = p->budget;
    b->S = ctx->S;
    b->N_new = ctx->N_new;
    b->D = ctx->D;
    b->L = pv->kv[0].n;
    b->T = b->prompt_budget = p->budget;
    int L = pv->kv[0].n;
    st->s = streams_new(st->rows, ctx->kv_dtype, ctx->D, KB_MIN(L, p->budget) + KB_MAX(ctx->N_new, 16));
    const kb_kvstream **src = KB_MALLOC((size_t)st->rows * sizeof *src);
    for (int i = 0; i < st->rows; i++) src[i] = &pv->kv[st->per_head ? i / st->c.G : i];
    rc = snap_compress(&st->cfg, kernels_get(), ctx->Hq, ctx->Hkv, ctx->D, src, st->rows, pv->qwin,
                       pv->qwin_pos, pv->Wq, st->s, &st->info, who, err);
    free(src);
    if (rc) {
        snapm_free(st);
        return rc;
    }
    st->c.n_in = st->c.base = L;
    *state = st;
    return 0;
}

void snapm_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                  float *out) {
    snapm_state *st = state;
    kb_mcommon *c = &st->c;
    const kb_kernels *kk = kernels_get();
    int D = c->ctx.D, nh = st->per_head ? 1 : c->G;
    streams_append_token(st->s, st->rows, c->ctx.Hkv, D, k, v, pos);
    c->n_in++;
    double slots = 0;
    kb_attn_dense_heads(kk, q, st->rows, nh, st->s, c->scale, out); /* every stream in one job */
    for (int i = 0; i < st->rows; i++) slots += st->s[i].n;
    c->acc.sel_streams = 0;
    c->acc.read_tokeq = slots / c->ctx.Hkv; /* per-head copies are distinct rows */
    c->acc.approx_tokeq = 0;
    c->acc.read_bytes = slots * mc_row_bytes(c);
    c->acc.attended = slots * nh / c->ctx.Hq;
    mc_acc_finish(c, st->per_head);
}

const kb_kvstream *snapm_retained(void *state, int qhead) {
    snapm_state *st = state;
    return &st->s[st->per_head ? qhead : qhead / st->c.G];
}

const kb_kvstream *snapm_cache(void *state, int row, int *n_rows) {
    snapm_state *st = state;
    if (n_rows) *n_rows = st->rows;
    return &st->s[row];
}

int snapm_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    snapm_state *st = state;
    int rc = mc_check_view(&st->c, pv, st->c.p.window, err);
    if (!rc)
        rc = snap_recompress(&st->cfg, kernels_get(), st->c.ctx.Hq, st->c.ctx.Hkv, st->c.ctx.D, st->s,
                             st->rows, pv, &st->info, st->c.who, err);
    if (rc) return rc;
    st->c.n_in += pv->kv[0].n;
    st->c.base = st->c.n_in;
    return 0;
}

long snapm_mark(void *state) { return ((snapm_state *)state)->c.n_in; }

void snapm_rollback(void *state, long mark) {
    snapm_state *st = state;
    streams_drop(st->s, st->rows, mc_rollback_count(&st->c, mark));
}

void snapm_account(void *state, kb_account *acc) {
    snapm_state *st = state;
    mc_streams_account(&st->c, st->s, st->rows, acc);
    acc->budget = &st->c.bud;
}

void snapm_destroy(void *state) { snapm_free(state); }

/* ---- validation shared by the SnapKV family ---- */

int snap_validate_common(kb_method_params *p, const char *who, int kernel_default,
                         kb_gqa_policy gqa_default, kb_err *err) {
    if (p->budget < 1)
        return kb_fail(err, KB_EINPUT, "method '%s': key 'budget': expected an integer >= 1, got %d", who,
                       p->budget);
    if (p->window == 0) p->window = 32;
    if (p->kernel == 0) p->kernel = kernel_default;
    if (p->kernel == KB_KERNEL_ADAPTIVE && p->n_kernel_table == 0) {
        for (int i = 0; i < kb_default_kernel_table_n; i++) {
            p->kernel_table[i][0] = kb_default_kernel_table[i][0];
            p->kernel_table[i][1] = kb_default_kernel_table[i][1];
        }
        p->n_kernel_table = kb_default_kernel_table_n;
    }
    if (p->kernel != KB_KERNEL_ADAPTIVE && (p->kernel < 1 || p->kernel % 2 == 0))
        return kb_fail(err, KB_EINPUT, "method '%s': key 'kernel': expected an odd integer >= 1 or \"adaptive\", got %d",
                       who, p->kernel);
    if (p->gqa == KB_GQA_DEFAULT) p->gqa = gqa_default;
    return 0;
}

int snapm_validate(kb_method_params *p, const char *who, int kernel_default, kb_gqa_policy gqa_default,
                   kb_err *err) {
    int rc = snap_validate_common(p, who, kernel_default, gqa_default, err);
    if (!rc && p->budget < p->window)
        rc = kb_fail(err, KB_EINPUT,
                     "method '%s': key 'budget': %d is smaller than the window %d (the window is always kept)", who,
                     p->budget, p->window);
    return rc;
}
