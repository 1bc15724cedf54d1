/* params.h - a method's JSON object -> kb_method_params (methods.md knobs).
 *
 * Accepted by every method: "method" (required), "label", "budget",
 * "budget_mode" ("traffic" | "topk"), "skip_layers". Method-specific keys
 * (kb_method_ops.keys): "gqa" ("per_head" | "group_sum" | "group_mean"),
 * "window", "kernel" (odd integer or "adaptive"), "kernel_by_length"
 * ([[max_len, K], ...], implies "adaptive"), "pooling" ("max" | "avg"),
 * "alpha" ("auto" or a number in [0, 1]), "page_size", "r",
 * "reallocate_mean_v" (bool), "local_window".
 *
 * Errors name the place, the method and the key, e.g.
 * "configs/x.json: methods[2]: method 'snapkv': key 'kernel': expected an odd
 * integer >= 1 or \"adaptive\", got 4". */
#ifndef KB_PARAMS_H
#define KB_PARAMS_H

#include <cjson/cJSON.h>

#include "methods/method.h"

/* Parses obj (a JSON object) and runs the method's validate(). where names
 * the object in messages (file and index). */
int method_params_parse(const cJSON *obj, const char *where, kb_method_params *out, kb_err *err);
/* Same from JSON text. */
int method_params_parse_text(const char *json, const char *where, kb_method_params *out,
                             kb_err *err);
/* All-defaults params of a method (budget -1 = none), validated. */
int method_params_default(const kb_method_ops *ops, int budget, kb_method_params *out,
                          kb_err *err);
/* The resolved knobs as a JSON object (for manifests and stats.json); the
 * caller owns the result. */
cJSON *method_params_to_json(const kb_method_params *p);

/* The default adaptive pooling table of SnapKV++ ([max_len, K] rows,
 * ascending). PROVISIONAL: not yet measured by the pooling ablation sweep;
 * see docs/METHODS.md. */
extern const int kb_default_kernel_table[][2];
extern const int kb_default_kernel_table_n;

const char *gqa_policy_name(kb_gqa_policy g);

#endif
