/* params.c - a method's JSON object -> kb_method_params (params.h). */
#include "methods/params.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness/json.h"

/* SnapKV++ adaptive pooling kernel by prompt length ([max_len, K]).
 * PROVISIONAL defaults, not measured yet: SnapKV's 7 for short prompts,
 * doubling towards the released RocketKV's 63 at long contexts. The pooling
 * ablation sweep (configs/) is meant to replace them; docs/METHODS.md. */
const int kb_default_kernel_table[][2] = {
    {2048, 7}, {4096, 15}, {8192, 31}, {2147483647, 63},
};
const int kb_default_kernel_table_n = 4;

static const char *const generic_keys[] = {"method", "label", "budget", "budget_mode",
                                           "skip_layers", NULL};

const char *gqa_policy_name(kb_gqa_policy g) {
    switch (g) {
    case KB_GQA_PER_HEAD: return "per_head";
    case KB_GQA_GROUP_SUM: return "group_sum";
    case KB_GQA_GROUP_MEAN: return "group_mean";
    default: return "default";
    }
}

static int has(const kb_method_ops *ops, const char *key) {
    for (const char *const *k = ops->keys; k && *k; k++)
        if (!strcmp(*k, key)) return 1;
    return 0;
}

static int parse_kernel_table(const cJSON *v, const char *where, kb_method_params *p, kb_err *err) {
    const char *key = "kernel_by_length";
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) < 1 || cJSON_GetArraySize(v) > KB_MAX_KERNEL_TABLE)
        return kb_fail(err, KB_EINPUT,
                       "%s: key '%s': expected an array of 1 to %d [max_len, K] pairs", where, key,
                       KB_MAX_KERNEL_TABLE);
    int i = 0;
    for (const cJSON *row = v->child; row; row = row->next, i++) {
        if (!cJSON_IsArray(row) || cJSON_GetArraySize(row) != 2)
            return kb_fail(err, KB_EINPUT, "%s: key '%s'[%d]: expected a [max_len, K] pair", where,
                           key, i);
        long ml, K;
        char sub[64];
        snprintf(sub, sizeof sub, "%s[%d][0]", key, i);
        if (json_as_int(row->child, where, sub, 1, 2147483647L, &ml, err)) return KB_EINPUT;
        snprintf(sub, sizeof sub, "%s[%d][1]", key, i);
        if (json_as_int(row->child->next, where, sub, 1, 1000001L, &K, err)) return KB_EINPUT;
        if (K % 2 == 0)
            return kb_fail(err, KB_EINPUT, "%s: key '%s'[%d]: pooling kernel K must be odd, got %ld",
                           where, key, i, K);
        if (i > 0 && ml <= p->kernel_table[i - 1][0])
            return kb_fail(err, KB_EINPUT,
                           "%s: key '%s'[%d]: max_len must increase strictly (%ld after %d)", where,
                           key, i, ml, p->kernel_table[i - 1][0]);
        p->kernel_table[i][0] = (int)ml;
        p->kernel_table[i][1] = (int)K;
    }
    p->n_kernel_table = i;
    return 0;
}

int method_params_parse(const cJSON *obj, const char *where, kb_method_params *out, kb_err *err) {
    if (!cJSON_IsObject(obj)) return kb_fail(err, KB_EINPUT, "%s: expected a JSON object", where);
    const char *name;
    int rc = json_get_string(obj, where, "method", 1, NULL, &name, err);
    if (rc) return rc;
    const kb_method_ops *ops = method_find(name);
    if (!ops)
        return kb_fail(err, KB_EINPUT, "%s: key 'method': unknown method '%s' (known: %s)", where,
                       name, method_names());
    char w[1400];
    snprintf(w, sizeof w, "%s: method '%s'", where, ops->name);
    if ((rc = json_check_keys(obj, w, generic_keys, ops->keys, err))) return rc;

    kb_method_params p;
    memset(&p, 0, sizeof p);
    p.ops = ops;
    const char *s;
    long v;
    if ((rc = json_get_string(obj, w, "label", 0, ops->name, &s, err))) return rc;
    if (!*s || strlen(s) >= sizeof p.label)
        return kb_fail(err, KB_EINPUT, "%s: key 'label': expected 1 to %zu characters", w,
                       sizeof p.label - 1);
    snprintf(p.label, sizeof p.label, "%s", s);
    if ((rc = json_get_int(obj, w, "budget", ops->needs_budget, 1, 1L << 30, -1, &v, err))) return rc;
    p.budget = (int)v;
    if ((rc = json_get_string(obj, w, "budget_mode", 0, "traffic", &s, err))) return rc;
    if (!strcmp(s, "traffic")) p.budget_mode = KB_BUDGET_TRAFFIC;
    else if (!strcmp(s, "topk")) p.budget_mode = KB_BUDGET_TOPK;
    else return kb_fail(err, KB_EINPUT, "%s: key 'budget_mode': expected \"traffic\" or \"topk\", got \"%s\"", w, s);
    if ((rc = json_get_int(obj, w, "skip_layers", 0, 0, 1 << 20, 0, &v, err))) return rc;
    p.skip_layers = (int)v;

    const cJSON *x;
    if (has(ops, "gqa") && (x = cJSON_GetObjectItemCaseSensitive(obj, "gqa"))) {
        if ((rc = json_get_string(obj, w, "gqa", 0, NULL, &s, err))) return rc;
        if (!strcmp(s, "per_head")) p.gqa = KB_GQA_PER_HEAD;
        else if (!strcmp(s, "group_sum")) p.gqa = KB_GQA_GROUP_SUM;
        else if (!strcmp(s, "group_mean")) p.gqa = KB_GQA_GROUP_MEAN;
        else
            return kb_fail(err, KB_EINPUT,
                           "%s: key 'gqa': expected \"per_head\", \"group_sum\" or \"group_mean\", got \"%s\"",
                           w, s);
    }
    if (has(ops, "window")) {
        if ((rc = json_get_int(obj, w, "window", 0, 1, 1 << 20, 0, &v, err))) return rc;
        p.window = (int)v;
    }
    if (has(ops, "kernel") && (x = cJSON_GetObjectItemCaseSensitive(obj, "kernel"))) {
        if (cJSON_IsString(x) && !strcmp(x->valuestring, "adaptive")) {
            p.kernel = KB_KERNEL_ADAPTIVE;
        } else {
            double d = cJSON_IsNumber(x) ? x->valuedouble : NAN;
            if (!cJSON_IsNumber(x) || d != floor(d) || d < 1 || d > 1000001 || fmod(d, 2) == 0) {
                if (cJSON_IsNumber(x))
                    return kb_fail(err, KB_EINPUT,
                                   "%s: key 'kernel': expected an odd integer >= 1 or \"adaptive\", got %g",
                                   w, d);
                return kb_fail(err, KB_EINPUT,
                               "%s: key 'kernel': expected an odd integer >= 1 or \"adaptive\", got %s",
                               w, cJSON_IsString(x) ? x->valuestring : "a non-number");
            }
            p.kernel = (int)d;
        }
    }
    if (has(ops, "kernel_by_length") && (x = cJSON_GetObjectItemCaseSensitive(obj, "kernel_by_length"))) {
        if (p.kernel > 0)
            return kb_fail(err, KB_EINPUT,
                           "%s: key 'kernel_by_length': needs kernel \"adaptive\" (kernel is %d)", w,
                           p.kernel);
        if ((rc = parse_kernel_table(x, w, &p, err))) return rc;
        p.kernel = KB_KERNEL_ADAPTIVE;
    }
    if (has(ops, "pooling")) {
        if ((rc = json_get_string(obj, w, "pooling", 0, "max", &s, err))) return rc;
        if (!strcmp(s, "max")) p.pooling = KB_POOL_MAX;
        else if (!strcmp(s, "avg")) p.pooling = KB_POOL_AVG;
        else return kb_fail(err, KB_EINPUT, "%s: key 'pooling': expected \"max\" or \"avg\", got \"%s\"", w, s);
    }
    if (has(ops, "alpha") && (x = cJSON_GetObjectItemCaseSensitive(obj, "alpha"))) {
        if (cJSON_IsString(x) && !strcmp(x->valuestring, "auto")) {
            p.alpha_fixed = 0;
        } else if (cJSON_IsNumber(x) && x->valuedouble >= 0 && x->valuedouble <= 1) {
            p.alpha_fixed = 1;
            p.alpha = x->valuedouble;
        } else {
            return kb_fail(err, KB_EINPUT, "%s: key 'alpha': expected \"auto\" or a number in [0, 1]", w);
        }
    }
    if (has(ops, "page_size")) {
        if ((rc = json_get_int(obj, w, "page_size", 0, 1, 1 << 20, 0, &v, err))) return rc;
        p.page_size = (int)v;
    }
    if (has(ops, "r")) {
        if ((rc = json_get_int(obj, w, "r", 0, 1, 1 << 16, 0, &v, err))) return rc;
        p.r = (int)v;
    }
    if (has(ops, "reallocate_mean_v")) {
        int b;
        if ((rc = json_get_bool(obj, w, "reallocate_mean_v", 0, 0, &b, err))) return rc;
        p.reallocate_mean_v = b;
    }
    if (has(ops, "local_window")) {
        if ((rc = json_get_int(obj, w, "local_window", 0, 0, 1 << 24, 0, &v, err))) return rc;
        p.local_window = (int)v;
    }
    if (ops->validate && (rc = ops->validate(&p, err))) {
        kb_err_prefix(err, "%s", where);
        return rc;
    }
    *out = p;
    return 0;
}

int method_params_parse_text(const char *json, const char *where, kb_method_params *out,
                             kb_err *err) {
    cJSON *j = NULL;
    int rc = json_parse(json, strlen(json), where, &j, err);
    if (rc) return rc;
    rc = method_params_parse(j, where, out, err);
    cJSON_Delete(j);
    return rc;
}

int method_params_default(const kb_method_ops *ops, int budget, kb_method_params *out,
                          kb_err *err) {
    memset(out, 0, sizeof *out);
    out->ops = ops;
    out->budget = budget;
    snprintf(out->label, sizeof out->label, "%s", ops->name);
    return ops->validate ? ops->validate(out, err) : 0;
}

cJSON *method_params_to_json(const kb_method_params *p) {
    cJSON *o = cJSON_CreateObject();
    const kb_method_ops *ops = p->ops;
    cJSON_AddStringToObject(o, "method", ops->name);
    cJSON_AddStringToObject(o, "label", p->label);
    if (p->budget > 0) cJSON_AddNumberToObject(o, "budget", p->budget);
    else cJSON_AddNullToObject(o, "budget");
    cJSON_AddStringToObject(o, "budget_mode", p->budget_mode == KB_BUDGET_TOPK ? "topk" : "traffic");
    cJSON_AddNumberToObject(o, "skip_layers", p->skip_layers);
    if (has(ops, "gqa")) cJSON_AddStringToObject(o, "gqa", gqa_policy_name(p->gqa));
    if (has(ops, "window")) cJSON_AddNumberToObject(o, "window", p->window);
    if (has(ops, "kernel")) {
        if (p->kernel == KB_KERNEL_ADAPTIVE) {
            cJSON_AddStringToObject(o, "kernel", "adaptive");
            cJSON *t = cJSON_AddArrayToObject(o, "kernel_by_length");
            for (int i = 0; i < p->n_kernel_table; i++) {
                cJSON *row = cJSON_CreateArray();
                cJSON_AddItemToArray(row, cJSON_CreateNumber(p->kernel_table[i][0]));
                cJSON_AddItemToArray(row, cJSON_CreateNumber(p->kernel_table[i][1]));
                cJSON_AddItemToArray(t, row);
            }
        } else {
            cJSON_AddNumberToObject(o, "kernel", p->kernel);
        }
    }
    if (has(ops, "pooling")) cJSON_AddStringToObject(o, "pooling", p->pooling == KB_POOL_AVG ? "avg" : "max");
    if (has(ops, "alpha")) {
        if (p->alpha_fixed) cJSON_AddNumberToObject(o, "alpha", p->alpha);
        else cJSON_AddStringToObject(o, "alpha", "auto");
    }
    if (has(ops, "page_size")) cJSON_AddNumberToObject(o, "page_size", p->page_size);
    if (has(ops, "r")) cJSON_AddNumberToObject(o, "r", p->r);
    if (has(ops, "reallocate_mean_v")) cJSON_AddBoolToObject(o, "reallocate_mean_v", p->reallocate_mean_v);
    if (has(ops, "local_window")) cJSON_AddNumberToObject(o, "local_window", p->local_window);
    return o;
}
