/* rocketkv_mt.c - RocketKV-MT (methods.md §6): nothing is evicted; the
 * full KV of every turn is retained (a later turn's prefill attends to all
 * of it). After each turn's prefill, SnapKV++ over the whole KV with the new
 * turn's window queries builds that turn's working set (prompt_budget per
 * KV head, window included); decode appends each token to both the full
 * cache and the working set and runs hybrid attention over the working set
 * only. The next turn rebuilds the working set from the full cache, so
 * dropped tokens can return. The budget split is computed once, from the
 * first turn (ctx->S = first-turn length + one turn's N_new). */
#include <stdlib.h>

#include "methods/hybrid_core.h"
#include "methods/rocketkv.h"

typedef struct rkmt_state {
    kb_mcommon c;
    kb_snap_cfg cfg;
    kb_kvstream *full; /* [Hkv] every token of every turn */
    kb_kvstream *ws;   /* [Hkv] this turn's working set + generated */
    kb_hybrid h;       /* over ws */
    kb_snap_info info;
} rkmt_state;

static const char *const rkmt_keys[] = {"window", "kernel", "kernel_by_length", "pooling",
                                        "alpha", "page_size", "r", NULL};

static void rkmt_free(rkmt_state *st) {
    streams_free(st->full, st->c.ctx.Hkv);
    streams_free(st->ws, st->c.ctx.Hkv);
    hybrid_free(&st->h);
    mc_free(&st->c);
    free(st);
}

static int rkmt_validate(kb_method_params *p, kb_err *err) {
    return rocket_validate(p, "rocketkv_mt", err);
}

/* ws <- stage 1 over full with the view's window queries. */
static int rkmt_build_ws(rkmt_state *st, const kb_prefill_view *pv, kb_err *err) {
    int Hkv = st->c.ctx.Hkv;
    const kb_kvstream **src = KB_MALLOC((size_t)Hkv * sizeof *src);
    for (int g = 0; g < Hkv; g++) src[g] = &st->full[g];
    const kb_kernels *kk = kernels_get();
    int rc = snap_compress(&st->cfg, kk, st->c.ctx.Hq, Hkv, st->c.ctx.D, src, Hkv, pv->qwin,
                           pv->qwin_pos, pv->Wq, st->ws, &st->info, "rocketkv_mt", err);
    free(src);
    if (rc) return rc;
    hybrid_reset(&st->h);
    hybrid_sync(&st->h, st->ws, kk);
    return 0;
}

static int rkmt_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
                     void **state, kb_err *err) {
    rkmt_state *st = KB_CALLOC(1, sizeof *st);
    mc_init(&st->c, "rocketkv_mt", p, ctx);
    int rc = mc_check_view(&st->c, pv, p->window, err);
    if (!rc) rc = rocket_budget(&st->c.p, ctx, "rocketkv_mt", &st->c.bud, &st->cfg, err);
    if (rc) {
        rkmt_free(st);
        return rc;
    }
    st->cfg.kparams = &st->c.p;
    int L = pv->kv[0].n, Hkv = ctx->Hkv;
    st->c.bud.L = L;
    st->full = streams_new(Hkv, ctx->kv_dtype, ctx->D, L + KB_MAX(ctx->N_new, 16));
    streams_append_view(st->full, Hkv, pv);
    st->ws = streams_new(Hkv, ctx->kv_dtype, ctx->D, KB_MIN(L, st->cfg.budget) + KB_MAX(ctx->N_new, 16));
    hybrid_init(&st->h, ctx->Hq, Hkv, ctx->D, st->c.bud.p, st->c.bud.r, st->c.bud.k, 0, 0, 0, 0);
    if ((rc = rkmt_build_ws(st, pv, err))) {
        rkmt_free(st);
        return rc;
    }
    st->c.n_in = st->c.base = L;
    *state = st;
    return 0;
}

static void rkmt_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                        float *out) {
    rkmt_state *st = state;
    const kb_kernels *kk = kernels_get();
    int Hkv = st->c.ctx.Hkv, D = st->c.ctx.D;
    streams_append_token(st->full, Hkv, Hkv, D, k, v, pos);
    st->c.n_in++;
    hybrid_attend(&st->h, kk, &st->c, q, k, v, pos, st->ws, out); /* appends the token to ws */
}

static const kb_kvstream *rkmt_retained(void *state, int qhead) {
    rkmt_state *st = state;
    return &st->full[qhead / st->c.G];
}

static const kb_kvstream *rkmt_cache(void *state, int row, int *n_rows) {
    rkmt_state *st = state;
    if (n_rows) *n_rows = st->c.ctx.Hkv;
    return &st->ws[row];
}

static int rkmt_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    rkmt_state *st = state;
    int rc = mc_streams_extend(&st->c, st->full, st->c.ctx.Hkv, pv, st->c.p.window, err);
    return rc ? rc : rkmt_build_ws(st, pv, err);
}

static long rkmt_mark(void *state) { return ((rkmt_state *)state)->c.n_in; }

static void rkmt_rollback(void *state, long mark) {
    rkmt_state *st = state;
    long d = mc_rollback_count(&st->c, mark);
    streams_drop(st->full, st->c.ctx.Hkv, d);
    streams_drop(st->ws, st->c.ctx.Hkv, d);
    hybrid_truncate(&st->h, st->ws, kernels_get());
}

static void rkmt_account(void *state, kb_account *acc) {
    rkmt_state *st = state;
    int Hkv = st->c.ctx.Hkv;
    *acc = st->c.acc;
    acc->resident_tokens = (streams_slots(st->full, Hkv) + streams_slots(st->ws, Hkv)) / Hkv;
    acc->resident_bytes = streams_bytes(st->full, Hkv) + streams_bytes(st->ws, Hkv) +
                          hybrid_meta_bytes(&st->h);
    acc->mode = st->c.p.budget_mode;
    acc->budget = &st->c.bud;
}

static void rkmt_destroy(void *state) { rkmt_free(state); }

const kb_method_ops kb_method_rocketkv_mt = {
    .name = "rocketkv_mt",
    .description = "RocketKV-MT: full KV retained, per-turn SnapKV++ working set, hybrid attention",
    .keys = rkmt_keys,
    .needs_budget = 1,
    .selects = 1,
    .window_default = 32,
    .evicts = 1,
    .validate = rkmt_validate,
    .layer_init = rkmt_init,
    .decode = rkmt_decode,
    .retained = rkmt_retained,
    .decode_cache = rkmt_cache,
    .extend = rkmt_extend,
    .mark = rkmt_mark,
    .rollback = rkmt_rollback,
    .account = rkmt_account,
    .destroy = rkmt_destroy,
};
