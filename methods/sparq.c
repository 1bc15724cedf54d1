/* sparq.c - SparQ (methods.md §8). Default = the recipe the RocketKV authors
 * gave for their SparQ baseline (NVlabs/RocketKV issue #1: rocket.py with
 * chunk size 1 and alpha 0): hybrid attention with p = 1 and no eviction,
 * r = int(D·B/S) (clamped to [1, D]), k = B/2, dims and sign shared by the
 * GQA group, SparQ's temperature, no mean-V. Original-SparQ options:
 * gqa "per_head" (each head its own dims and top-k), reallocate_mean_v
 * (out = a·attn + (1-a)·mean(V), a = approximate softmax mass of the chosen
 * slots), local_window N (the last N slots, the current token included,
 * always attended; they count within k). topk mode: r = the "r" key (default
 * D/4), k = B. */
#include "methods/hybrid_core.h"

static const char *const sparq_keys[] = {"gqa", "r", "reallocate_mean_v", "local_window", NULL};

static int sparq_validate(kb_method_params *p, kb_err *err) {
    if (p->budget < 16)
        return kb_fail(err, KB_EINPUT, "method 'sparq': key 'budget': expected an integer >= 16, got %d",
                       p->budget);
    if (p->gqa == KB_GQA_DEFAULT) p->gqa = KB_GQA_GROUP_MEAN;
    if (p->local_window < 0)
        return kb_fail(err, KB_EINPUT, "method 'sparq': key 'local_window': expected an integer >= 0, got %d",
                       p->local_window);
    return 0;
}

static int sparq_layer_init(const kb_method_params *p, const kb_method_ctx *ctx,
                            const kb_prefill_view *pv, void **state, kb_err *err) {
    kb_budget b;
    int rc = budget_sparq(p->budget_mode, p->budget, ctx->S, ctx->N_new, ctx->D, p->r, &b, err);
    if (!rc && p->r > ctx->D)
        rc = kb_fail(err, KB_EINPUT, "method 'sparq': key 'r': %d exceeds the head dim D = %d", p->r, ctx->D);
    if (rc) return rc;
    if (p->r > 0) b.r = b.r_raw = p->r;
    return hybm_init(p, ctx, pv, &b, "sparq", state, err);
}

const kb_method_ops kb_method_sparq = {
    .name = "sparq",
    .description = "SparQ (RocketKV authors' recipe: hybrid with p = 1; original options)",
    .keys = sparq_keys,
    .needs_budget = 1,
    .selects = 1,
    .validate = sparq_validate,
    .layer_init = sparq_layer_init,
    .decode = hybm_decode,
    .retained = hybm_retained,
    .decode_cache = hybm_cache,
    .extend = hybm_extend,
    .mark = hybm_mark,
    .rollback = hybm_rollback,
    .account = hybm_account,
    .destroy = hybm_destroy,
};
