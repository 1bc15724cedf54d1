/* snapkv.c - the original SnapKV baseline (methods.md §3): observation
 * window 32, max pooling with kernel 7 (avg selectable), GQA per_head (each
 * query head keeps its own set: G copies of storage under GQA, as the
 * original code's repeat_kv), budget = tokens kept per head, window
 * included; dense attention over the kept tokens and everything generated. */
#include "methods/snapkv_core.h"

static const char *const snapkv_keys[] = {"gqa", "window", "kernel", "kernel_by_length",
                                          "pooling", NULL};

static int snapkv_validate(kb_method_params *p, kb_err *err) {
    return snapm_validate(p, "snapkv", 7, KB_GQA_PER_HEAD, err);
}

static int snapkv_layer_init(const kb_method_params *p, const kb_method_ctx *ctx,
                             const kb_prefill_view *pv, void **state, kb_err *err) {
    return snapm_init(p, ctx, pv, "snapkv", state, err);
}

const kb_method_ops kb_method_snapkv = {
    .name = "snapkv",
    .description = "SnapKV (original): window 32, max-pool 7, per-head kept sets",
    .keys = snapkv_keys,
    .needs_budget = 1,
    .window_default = 32,
    .evicts = 1,
    .validate = snapkv_validate,
    .layer_init = snapkv_layer_init,
    .decode = snapm_decode,
    .retained = snapm_retained,
    .decode_cache = snapm_cache,
    .extend = snapm_extend,
    .mark = snapm_mark,
    .rollback = snapm_rollback,
    .account = snapm_account,
    .destroy = snapm_destroy,
};
