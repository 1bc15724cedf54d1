/* hybrid.c - hybrid sparse attention alone (methods.md §4): no eviction,
 * stage 2 over the full cache with T = S: c2 = max(1, S/B), p and r as in
 * §1.1, k = B/2 (B in topk mode). GQA: group_mean (default, the released
 * code), group_sum (gpt-fast: same ranking), per_head. */
#include "methods/hybrid_core.h"

static const char *const hybrid_keys[] = {"gqa", "page_size", "r", NULL};

static int hybrid_validate(kb_method_params *p, kb_err *err) {
    if (p->budget < 16)
        return kb_fail(err, KB_EINPUT, "method 'hybrid': key 'budget': expected an integer >= 16, got %d",
                       p->budget);
    if (p->gqa == KB_GQA_DEFAULT) p->gqa = KB_GQA_GROUP_MEAN;
    return 0;
}

static int hybrid_layer_init(const kb_method_params *p, const kb_method_ctx *ctx,
                             const kb_prefill_view *pv, void **state, kb_err *err) {
    kb_budget b;
    int rc = budget_hybrid(p->budget_mode, p->budget, ctx->S, ctx->N_new, ctx->D, &b, err);
    if (!rc) rc = budget_override(&b, 0, p->page_size, p->r, "method 'hybrid'", err);
    if (rc) return rc;
    return hybm_init(p, ctx, pv, &b, "hybrid", state, err);
}

const kb_method_ops kb_method_hybrid = {
    .name = "hybrid",
    .description = "Hybrid sparse attention (RocketKV stage 2) over the full cache",
    .keys = hybrid_keys,
    .needs_budget = 1,
    .selects = 1,
    .validate = hybrid_validate,
    .layer_init = hybrid_layer_init,
    .decode = hybm_decode,
    .retained = hybm_retained,
    .decode_cache = hybm_cache,
    .extend = hybm_extend,
    .mark = hybm_mark,
    .rollback = hybm_rollback,
    .account = hybm_account,
    .destroy = hybm_destroy,
};
