/* rocketkv.c - RocketKV (methods.md §5): SnapKV++ (§2) keeps prompt_budget
 * tokens per KV head after the prefill, then hybrid sparse attention (§4)
 * runs every decode step over the kept cache with p, r, k from the budget
 * split (§1.1). Composed of snapkv_core (stage 1) and hybrid_core (stage 2).
 * Generated tokens are appended to the kept cache and join its last
 * (partial) page. Multi-turn: a later turn's prefill attends to the kept
 * cache only, and stage 1 runs again over kept + new tokens with the new
 * turn's window, so eviction compounds. */
#include "methods/rocketkv.h"

#include <stdio.h>
#include <stdlib.h>

#include "methods/hybrid_core.h"

typedef struct rk_state {
    kb_mcommon c;
    kb_snap_cfg cfg;
    kb_kvstream *s; /* [Hkv] kept tokens + generated, chronological */
    kb_hybrid h;
    kb_snap_info info;
} rk_state;

static const char *const rocketkv_keys[] = {"window", "kernel", "kernel_by_length", "pooling",
                                            "alpha", "page_size", "r", NULL};

int rocket_validate(kb_method_params *p, const char *who, kb_err *err) {
    p->gqa = KB_GQA_DEFAULT; /* not a knob: stage 1 sums over the group, stage 2 averages */
    int rc = snap_validate_common(p, who, 63, KB_GQA_GROUP_SUM, err);
    if (!rc && p->budget < 16)
        rc = kb_fail(err, KB_EINPUT, "method '%s': key 'budget': expected an integer >= 16, got %d", who,
                     p->budget);
    return rc;
}

/* The split of methods.md §1.1 plus overrides, and the stage-1 config. */
int rocket_budget(const kb_method_params *p, const kb_method_ctx *ctx, const char *who,
                  kb_budget *b, kb_snap_cfg *cfg, kb_err *err) {
    char w[64];
    snprintf(w, sizeof w, "method '%s'", who);
    int rc = budget_rocketkv(p->budget_mode, p->budget, ctx->S, ctx->N_new, ctx->D, p->alpha_fixed,
                             p->alpha, b, err);
    if (rc) return kb_err_prefix(err, "%s", w);
    if ((rc = budget_override(b, 0, p->page_size, p->r, w, err))) return rc;
    cfg->window = p->window;
    cfg->budget = b->prompt_budget;
    cfg->gqa = KB_GQA_GROUP_SUM;
    cfg->pooling = p->pooling;
    return 0;
}

static void rk_free(rk_state *st) {
    streams_free(st->s, st->c.ctx.Hkv);
    hybrid_free(&st->h);
    mc_free(&st->c);
    free(st);
}

static int rk_validate(kb_method_params *p, kb_err *err) { return rocket_validate(p, "rocketkv", err); }

static int rk_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
                   void **state, kb_err *err) {
    rk_state *st = KB_CALLOC(1, sizeof *st);
    mc_init(&st->c, "rocketkv", p, ctx);
    int rc = mc_check_view(&st->c, pv, p->window, err);
    if (!rc) rc = rocket_budget(&st->c.p, ctx, "rocketkv", &st->c.bud, &st->cfg, err);
    if (rc) {
        rk_free(st);
        return rc;
    }
    st->cfg.kparams = &st->c.p;
    st->c.bud.L = pv->kv[0].n;
    int L = pv->kv[0].n, Hkv = ctx->Hkv;
    st->s = streams_new(Hkv, ctx->kv_dtype, ctx->D, KB_MIN(L, st->cfg.budget) + KB_MAX(ctx->N_new, 16));
    const kb_kvstream **src = KB_MALLOC((size_t)Hkv * sizeof *src);
    for (int g = 0; g < Hkv; g++) src[g] = &pv->kv[g];
    const kb_kernels *kk = kernels_get();
    rc = snap_compress(&st->cfg, kk, ctx->Hq, Hkv, ctx->D, src, Hkv, pv->qwin, pv->qwin_pos, pv->Wq,
                       st->s, &st->info, "rocketkv", err);
    free(src);
    if (rc) {
        rk_free(st);
        return rc;
    }
    hybrid_init(&st->h, ctx->Hq, Hkv, ctx->D, st->c.bud.p, st->c.bud.r, st->c.bud.k, 0, 0, 0, 0);
    hybrid_sync(&st->h, st->s, kk);
    st->c.n_in = st->c.base = L;
    *state = st;
    return 0;
}

static void rk_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                      float *out) {
    rk_state *st = state;
    const kb_kernels *kk = kernels_get();
    st->c.n_in++;
    hybrid_attend(&st->h, kk, &st->c, q, k, v, pos, st->s, out); /* appends the token */
}

static const kb_kvstream *rk_retained(void *state, int qhead) {
    rk_state *st = state;
    return &st->s[qhead / st->c.G];
}

static const kb_kvstream *rk_cache(void *state, int row, int *n_rows) {
    rk_state *st = state;
    if (n_rows) *n_rows = st->c.ctx.Hkv;
    return &st->s[row];
}

static int rk_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    rk_state *st = state;
    const kb_kernels *kk = kernels_get();
    int rc = mc_check_view(&st->c, pv, st->c.p.window, err);
    if (!rc)
        rc = snap_recompress(&st->cfg, kk, st->c.ctx.Hq, st->c.ctx.Hkv, st->c.ctx.D, st->s,
                             st->c.ctx.Hkv, pv, &st->info, "rocketkv", err);
    if (rc) return rc;
    hybrid_reset(&st->h);
    hybrid_sync(&st->h, st->s, kk);
    st->c.n_in += pv->kv[0].n;
    st->c.base = st->c.n_in;
    return 0;
}

static long rk_mark(void *state) { return ((rk_state *)state)->c.n_in; }

static void rk_rollback(void *state, long mark) {
    rk_state *st = state;
    streams_drop(st->s, st->c.ctx.Hkv, mc_rollback_count(&st->c, mark));
    hybrid_truncate(&st->h, st->s, kernels_get());
}

static void rk_account(void *state, kb_account *acc) {
    rk_state *st = state;
    mc_streams_account(&st->c, st->s, st->c.ctx.Hkv, acc);
    acc->resident_bytes += hybrid_meta_bytes(&st->h);
    acc->budget = &st->c.bud;
}

static void rk_destroy(void *state) { rk_free(state); }

const kb_method_ops kb_method_rocketkv = {
    .name = "rocketkv",
    .description = "RocketKV: SnapKV++ eviction, then hybrid sparse attention on the kept cache",
    .keys = rocketkv_keys,
    .needs_budget = 1,
    .selects = 1,
    .window_default = 32,
    .evicts = 1,
    .validate = rk_validate,
    .layer_init = rk_init,
    .decode = rk_decode,
    .retained = rk_retained,
    .decode_cache = rk_cache,
    .extend = rk_extend,
    .mark = rk_mark,
    .rollback = rk_rollback,
    .account = rk_account,
    .destroy = rk_destroy,
};
