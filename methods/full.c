/* full.c - Full KV: every token kept, exact attention over all of them
 * (methods.md §1 table: reads all L). Also what methodset uses for layers
 * below skip_layers. */
#include <stdlib.h>

#include "methods/common.h"

typedef struct full_state {
    kb_mcommon c;
    kb_kvstream *s; /* [Hkv] every token, chronological */
} full_state;

static const char *const full_keys[] = {NULL};

static int full_validate(kb_method_params *p, kb_err *err) {
    (void)err;
    p->gqa = KB_GQA_DEFAULT;
    return 0;
}

static int full_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
                     void **state, kb_err *err) {
    full_state *st = KB_CALLOC(1, sizeof *st);
    mc_init(&st->c, "full", p, ctx);
    int rc = mc_check_view(&st->c, pv, 0, err);
    if (rc) {
        mc_free(&st->c);
        free(st);
        return rc;
    }
    int L = pv->kv[0].n;
    st->s = streams_new(ctx->Hkv, ctx->kv_dtype, ctx->D, L + KB_MAX(ctx->N_new, 16));
    streams_append_view(st->s, ctx->Hkv, pv);
    st->c.n_in = st->c.base = L;
    *state = st;
    return 0;
}

static void full_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                        float *out) {
    full_state *st = state;
    kb_mcommon *c = &st->c;
    const kb_kernels *kk = kernels_get();
    int Hkv = c->ctx.Hkv, D = c->ctx.D, G = c->G;
    streams_append_token(st->s, Hkv, Hkv, D, k, v, pos);
    c->n_in++;
    (void)D;
    kb_attn_dense_heads(kk, q, Hkv, G, st->s, c->scale, out); /* all KV heads in one job */
    double n = streams_slots(st->s, Hkv);
    c->acc.sel_streams = 0;
    c->acc.read_tokeq = n / Hkv;
    c->acc.approx_tokeq = 0;
    c->acc.read_bytes = n * mc_row_bytes(c);
    c->acc.attended = n / Hkv;
    mc_acc_finish(c, 0);
}

static const kb_kvstream *full_retained(void *state, int qhead) {
    full_state *st = state;
    return &st->s[qhead / st->c.G];
}

static const kb_kvstream *full_cache(void *state, int row, int *n_rows) {
    full_state *st = state;
    if (n_rows) *n_rows = st->c.ctx.Hkv;
    return &st->s[row];
}

static int full_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    full_state *st = state;
    return mc_streams_extend(&st->c, st->s, st->c.ctx.Hkv, pv, 0, err);
}

static long full_mark(void *state) { return ((full_state *)state)->c.n_in; }

static void full_rollback(void *state, long mark) {
    full_state *st = state;
    streams_drop(st->s, st->c.ctx.Hkv, mc_rollback_count(&st->c, mark));
}

static void full_account(void *state, kb_account *acc) {
    full_state *st = state;
    mc_streams_account(&st->c, st->s, st->c.ctx.Hkv, acc);
}

static void full_destroy(void *state) {
    full_state *st = state;
    streams_free(st->s, st->c.ctx.Hkv);
    mc_free(&st->c);
    free(st);
}

const kb_method_ops kb_method_full = {
    .name = "full",
    .description = "Full KV cache, exact attention over every token",
    .keys = full_keys,
    .needs_budget = 0,
    .window_default = 0,
    .evicts = 0,
    .validate = full_validate,
    .layer_init = full_init,
    .decode = full_decode,
    .retained = full_retained,
    .decode_cache = full_cache,
    .extend = full_extend,
    .mark = full_mark,
    .rollback = full_rollback,
    .account = full_account,
    .destroy = full_destroy,
};
