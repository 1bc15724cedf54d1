/* snapkvpp.c - SnapKV++ alone (methods.md §2): RocketKV's stage 1 as a
 * method: window 32 (128 for SCBench via "window"), max pooling with kernel
 * 63 (the released code; "adaptive" selectable), GQA group_sum (one kept set
 * per KV head), budget B = prompt tokens kept, window included; dense
 * attention over the kept tokens and everything generated. */
#include "methods/snapkv_core.h"

static const char *const snapkvpp_keys[] = {"gqa", "window", "kernel", "kernel_by_length",
                                            "pooling", NULL};

static int snapkvpp_validate(kb_method_params *p, kb_err *err) {
    return snapm_validate(p, "snapkvpp", 63, KB_GQA_GROUP_SUM, err);
}

static int snapkvpp_layer_init(const kb_method_params *p, const kb_method_ctx *ctx,
                               const kb_prefill_view *pv, void **state, kb_err *err) {
    return snapm_init(p, ctx, pv, "snapkvpp", state, err);
}

const kb_method_ops kb_method_snapkvpp = {
    .name = "snapkvpp",
    .description = "SnapKV++ (RocketKV stage 1): window 32, max-pool 63, per-KV-head kept sets",
    .keys = snapkvpp_keys,
    .needs_budget = 1,
    .window_default = 32,
    .evicts = 1,
    .validate = snapkvpp_validate,
    .layer_init = snapkvpp_layer_init,
    .decode = snapm_decode,
    .retained = snapm_retained,
    .decode_cache = snapm_cache,
    .extend = snapm_extend,
    .mark = snapm_mark,
    .rollback = snapm_rollback,
    .account = snapm_account,
    .destroy = snapm_destroy,
};
