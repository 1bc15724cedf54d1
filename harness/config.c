/* config.c - sweep config parsing and the cell plan (config.h, docs/CONFIG.md). */
#include "harness/config.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/json.h"
#include "methods/params.h"

static const char *const top_keys[] = {
    "name", "description", "model", "seed", "kv_dtype", "threads", "fidelity", "own_answers",
    "haystack", "data_dir", "tasks", "methods", "budgets", "budget_mode", "max_samples",
    "latency", NULL};
static const char *const latency_keys[] = {"contexts", "decode_tokens", "reps", "rounds", NULL};

/* Keys of a method entry that are the driver's, not the method's: they have
 * columns of their own in the tables and stay out of `params`, so that a
 * budget_mode given at the top level, in the entry or left at its default
 * gives the same params string. */
static int is_cell_key(const char *k) {
    return !strcmp(k, "method") || !strcmp(k, "label") || !strcmp(k, "budget") ||
           !strcmp(k, "budgets") || !strcmp(k, "budget_mode");
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The method's own keys as canonical JSON (sorted keys, compact); KB_EINPUT
 * when that does not fit out[cap] (cut, it would not be JSON: the params
 * column would lie and the latency part would read no parameters). */
static int params_json(const cJSON *obj, char *out, size_t cap, const char *where, kb_err *err) {
    const char *keys[64];
    int n = 0;
    for (const cJSON *c = obj->child; c && n < 64; c = c->next)
        if (c->string && !is_cell_key(c->string)) keys[n++] = c->string;
    qsort(keys, (size_t)n, sizeof *keys, cmp_str);
    cJSON *o = cJSON_CreateObject();
    for (int i = 0; i < n; i++)
        cJSON_AddItemToObject(o, keys[i], cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(obj, keys[i]), 1));
    char *s = cJSON_PrintUnformatted(o);
    size_t len = n ? strlen(s) : 0;
    int rc = 0;
    if (len >= cap)
        rc = kb_fail(err, KB_EINPUT, "%s: the method's parameters take %zu bytes as JSON (%.40s...), expected "
                     "at most %zu", where, len, s, cap - 1);
    else
        snprintf(out, cap, "%s", n ? s : "");
    free(s);
    cJSON_Delete(o);
    return rc;
}

static int int_array(const cJSON *arr, const char *where, const char *key, long lo, long hi,
                     int *out, int max, int *n, kb_err *err) {
    if (!cJSON_IsArray(arr) || cJSON_GetArraySize(arr) < 1)
        return kb_fail(err, KB_EINPUT, "%s: key '%s': expected a non-empty array of integers",
                       where, key);
    *n = 0;
    for (const cJSON *c = arr->child; c; c = c->next) {
        if (*n == max)
            return kb_fail(err, KB_EINPUT, "%s: key '%s': at most %d values", where, key, max);
        long v;
        char k[64];
        snprintf(k, sizeof k, "%s[%d]", key, *n);
        int rc = json_as_int(c, where, k, lo, hi, &v, err);
        if (rc) return rc;
        for (int i = 0; i < *n; i++)
            if (out[i] == (int)v)
                return kb_fail(err, KB_EINPUT, "%s: key '%s': %ld appears twice", where, key, v);
        out[(*n)++] = (int)v;
    }
    return 0;
}

static int add_cells(kb_sweep_config *c, const cJSON *m, int mi, const int *gb, int ngb,
                     const char *gmode, int *cap, kb_err *err) {
    char where[1200];
    snprintf(where, sizeof where, "%s: methods[%d]", c->path, mi);
    cJSON *obj;
    if (cJSON_IsString(m)) {
        obj = cJSON_CreateObject();
        cJSON_AddStringToObject(obj, "method", m->valuestring);
    } else if (cJSON_IsObject(m)) {
        obj = cJSON_Duplicate(m, 1);
    } else {
        return kb_fail(err, KB_EINPUT, "%s: expected a method object or name", where);
    }
    int rc = 0;
    const char *name = NULL;
    rc = json_get_string(obj, where, "method", 1, NULL, &name, err);
    const kb_method_ops *ops = rc ? NULL : method_find(name);
    if (!rc && !ops) {
        char known[512] = "";
        for (int i = 0; i < method_count(); i++) {
            strncat(known, method_at(i)->name, sizeof known - strlen(known) - 3);
            if (i + 1 < method_count()) strcat(known, ", ");
        }
        rc = kb_fail(err, KB_EINPUT, "%s: unknown method '%s' (known: %s)", where, name, known);
    }
    int bl[64], nb = 0;
    const cJSON *bj = rc ? NULL : cJSON_GetObjectItemCaseSensitive(obj, "budgets");
    if (!rc && bj && cJSON_GetObjectItemCaseSensitive(obj, "budget"))
        rc = kb_fail(err, KB_EINPUT, "%s: keys 'budget' and 'budgets' both given: use one", where);
    if (!rc && bj) rc = int_array(bj, where, "budgets", 1, 1L << 30, bl, 64, &nb, err);
    else if (!rc && cJSON_GetObjectItemCaseSensitive(obj, "budget")) nb = -1; /* single, as given */
    else if (!rc && ops->needs_budget) {
        if (!ngb)
            rc = kb_fail(err, KB_EINPUT,
                         "%s: method '%s' needs a budget: give \"budgets\" at the top level or "
                         "\"budget\"/\"budgets\" in the method",
                         where, name);
        memcpy(bl, gb, (size_t)ngb * sizeof(int));
        nb = ngb;
    }
    if (!rc && gmode && !cJSON_GetObjectItemCaseSensitive(obj, "budget_mode"))
        cJSON_AddStringToObject(obj, "budget_mode", gmode);
    cJSON_DeleteItemFromObjectCaseSensitive(obj, "budgets");
    int count = nb > 0 ? nb : 1;
    for (int b = 0; b < count && !rc; b++) {
        if (nb > 0) {
            cJSON_DeleteItemFromObjectCaseSensitive(obj, "budget");
            cJSON_AddNumberToObject(obj, "budget", bl[b]);
        }
        if (c->n_cells == *cap) {
            *cap = *cap ? 2 * *cap : 16;
            c->cells = KB_REALLOC(c->cells, (size_t)*cap * sizeof *c->cells);
        }
        kb_cell *cell = &c->cells[c->n_cells];
        memset(cell, 0, sizeof *cell);
        rc = method_params_parse(obj, where, &cell->p, err);
        if (rc) break;
        if ((rc = params_json(obj, cell->params_json, sizeof cell->params_json, where, err))) break;
        for (int o = 0; o < c->n_cells; o++)
            if (!strcmp(c->cells[o].p.label, cell->p.label) && c->cells[o].p.budget == cell->p.budget)
                rc = kb_fail(err, KB_EINPUT,
                             "%s: duplicate cell (label '%s', budget %d): give each method entry "
                             "a distinct \"label\"",
                             where, cell->p.label, cell->p.budget);
        if (!rc) c->n_cells++;
    }
    cJSON_Delete(obj);
    return rc;
}

/* A run name is one directory under results/: no separator, no "..". */
static int run_name_ok(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 100 || !strcmp(s, ".") || !strcmp(s, "..")) return 0;
    for (; *s; s++)
        if (!isalnum((unsigned char)*s) && *s != '.' && *s != '_' && *s != '-') return 0;
    return 1;
}

static int resolve(kb_sweep_config *c, kb_err *err) {
    const cJSON *r = c->root;
    const char *w = c->path;
    int rc = json_check_keys(r, w, top_keys, NULL, err);
    if (rc) return rc;
    const char *s;
    if ((rc = json_get_string(r, w, "name", 0, NULL, &s, err))) return rc;
    if (s && !run_name_ok(s))
        return kb_fail(err, KB_EINPUT, "%s: key 'name': expected 1-100 letters, digits, '.', '_' or '-' "
                       "(not \".\" or \"..\": it names the directory results/<name>), got \"%s\"", w, s);
    c->name = s;
    if ((rc = json_get_path(r, w, "model", 0, NULL, &c->model, err))) return rc;
    const char *descr; /* free text, but text: not read further */
    if ((rc = json_get_string(r, w, "description", 0, NULL, &descr, err))) return rc;
    long v;
    if ((rc = json_get_int(r, w, "seed", 0, 0, 1L << 53, 42, &v, err))) return rc;
    c->seed = (unsigned long long)v;
    if ((rc = json_get_string(r, w, "kv_dtype", 0, "f16", &s, err))) return rc;
    if (kb_dtype_parse(s, &c->kv_dtype))
        return kb_fail(err, KB_EINPUT, "%s: key 'kv_dtype': expected \"f16\", \"f32\" or \"bf16\", got \"%s\"",
                       w, s);
    if ((rc = json_get_int(r, w, "threads", 0, 0, 1024, 0, &v, err))) return rc;
    c->threads = (int)v;
    if ((rc = json_get_bool(r, w, "fidelity", 0, 0, &c->fidelity, err))) return rc;
    if ((rc = json_get_bool(r, w, "own_answers", 0, 0, &c->own_answers, err))) return rc;
    if ((rc = json_get_path(r, w, "haystack", 0, NULL, &c->haystack, err))) return rc;
    if ((rc = json_get_path(r, w, "data_dir", 0, NULL, &c->data_dir, err))) return rc;
    if ((rc = json_get_int(r, w, "max_samples", 0, 0, 1L << 30, 0, &v, err))) return rc;
    c->max_samples = (int)v;
    const char *gmode = NULL;
    if ((rc = json_get_string(r, w, "budget_mode", 0, NULL, &gmode, err))) return rc;

    c->tasks = cJSON_GetObjectItemCaseSensitive(r, "tasks");
    if (!cJSON_IsArray(c->tasks) || cJSON_GetArraySize(c->tasks) < 1)
        return kb_fail(err, KB_EINPUT, "%s: key 'tasks': expected a non-empty array of task objects", w);
    int gb[64], ngb = 0;
    const cJSON *bj = cJSON_GetObjectItemCaseSensitive(r, "budgets");
    if (bj && (rc = int_array(bj, w, "budgets", 1, 1L << 30, gb, 64, &ngb, err))) return rc;
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(r, "methods");
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) < 1)
        return kb_fail(err, KB_EINPUT, "%s: key 'methods': expected a non-empty array of methods", w);
    int cap = 0, mi = 0;
    for (const cJSON *m = ms->child; m; m = m->next, mi++)
        if ((rc = add_cells(c, m, mi, gb, ngb, gmode, &cap, err))) return rc;
    c->window_max = 32;
    for (int i = 0; i < c->n_cells; i++) {
        int wdw = c->cells[i].p.window ? c->cells[i].p.window : c->cells[i].p.ops->window_default;
        c->window_max = KB_MAX(c->window_max, wdw);
    }

    const cJSON *lat = cJSON_GetObjectItemCaseSensitive(r, "latency");
    if (lat) {
        char lw[1100];
        snprintf(lw, sizeof lw, "%s: latency", w);
        if ((rc = json_check_keys(lat, lw, latency_keys, NULL, err))) return rc;
        const cJSON *cx = cJSON_GetObjectItemCaseSensitive(lat, "contexts");
        if (!cx) return kb_fail(err, KB_EINPUT, "%s: missing required key 'contexts'", lw);
        if ((rc = int_array(cx, lw, "contexts", 16, 1 << 24, c->latency.contexts, 16,
                            &c->latency.n_contexts, err)))
            return rc;
        if ((rc = json_get_int(lat, lw, "decode_tokens", 0, 1, 4096, 16, &v, err))) return rc;
        c->latency.decode_tokens = (int)v;
        if ((rc = json_get_int(lat, lw, "reps", 0, 1, 100, 3, &v, err))) return rc;
        c->latency.reps = (int)v;
        if ((rc = json_get_int(lat, lw, "rounds", 0, 1, 100, 1, &v, err))) return rc;
        c->latency.rounds = (int)v;
        c->latency.enabled = 1;
    }
    return 0;
}

static int apply_override(cJSON *root, const char *kv, const char *path, kb_err *err) {
    const char *eq = strchr(kv, '=');
    if (!eq || eq == kv)
        return kb_fail(err, KB_EINPUT, "--set expects KEY=VALUE, got '%s'", kv);
    char key[128];
    size_t kl = (size_t)(eq - kv);
    if (kl >= sizeof key) return kb_fail(err, KB_EINPUT, "--set: key too long in '%s'", kv);
    memcpy(key, kv, kl);
    key[kl] = 0;
    int known = 0;
    for (int i = 0; top_keys[i]; i++) known |= !strcmp(top_keys[i], key);
    if (!known)
        return kb_fail(err, KB_EINPUT, "--set %s: unknown top-level key '%s' for %s", kv, key, path);
    cJSON *val = json_cli_value(eq + 1, "--set", kv, err);
    if (!val) return KB_EINPUT;
    cJSON_DeleteItemFromObjectCaseSensitive(root, key);
    cJSON_AddItemToObject(root, key, val);
    return 0;
}

void sweep_config_blame_override(const char *path, char *const *overrides, int n_over, kb_err *err) {
    /* an error about a key an override replaced names the override: the
     * error's place, right after "PATH: ", must be that top-level key, so
     * that a file's methods[0] "budgets" is not blamed on --set budgets */
    if (!err || strstr(err->msg, " (the value comes from --set ")) return;
    size_t pl = strlen(path);
    const char *at = !strncmp(err->msg, path, pl) && !strncmp(err->msg + pl, ": ", 2) ? err->msg + pl + 2 : NULL;
    /* the haystack key's errors come from a task's samples, "tasks[2]: key
     * 'haystack': ...": their place is the key, not the task (a data_dir's
     * errors name the file under it, "tasks[2]: DIR/x.jsonl: ...", and are
     * the task's) */
    const char *k = at && !strncmp(at, "tasks[", 6) ? strstr(at, "]: key '") : NULL;
    if (k && !strncmp(k + 3, "key 'haystack'", 14)) at = k + 3;
    for (int i = n_over - 1; i >= 0 && at; i--) {
        const char *eq = strchr(overrides[i], '=');
        if (!eq) continue;
        /* the ways config errors name a top-level key K: "key 'K'",
         * "key 'K[1]'", "K[2]: ..." (methods[2], tasks[2]), "K: ..."
         * (latency), "K entry 'LABEL'" (methods, checked against the model) */
        static const char *const forms[] = {"key '%.*s'", "key '%.*s[", "%.*s[", "%.*s:", "%.*s entry '"};
        int kl = (int)(eq - overrides[i]), hit = 0;
        for (size_t f = 0; f < KB_ARRAY_LEN(forms) && !hit; f++) {
            char pat[160];
            snprintf(pat, sizeof pat, forms[f], kl, overrides[i]);
            hit = !strncmp(at, pat, strlen(pat));
        }
        if (hit) {
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, " (the value comes from --set %s)", overrides[i]);
            break;
        }
    }
}

int sweep_config_load_with(const char *path, char *const *overrides, int n_over,
                           kb_sweep_config *c, kb_err *err) {
    memset(c, 0, sizeof *c);
    if (strlen(path) >= sizeof c->path) /* run.json's config_file would be cut */
        return kb_fail(err, KB_EINPUT, "%.60s...: a config path of %zu bytes, expected fewer than %zu", path,
                       strlen(path), sizeof c->path);
    snprintf(c->path, sizeof c->path, "%s", path);
    int rc = json_load_file(path, &c->root, err);
    if (rc) return rc;
    if (!cJSON_IsObject(c->root)) {
        rc = kb_fail(err, KB_EINPUT, "%s: expected a JSON object at the top level", path);
    }
    for (int i = 0; i < n_over && !rc; i++) rc = apply_override(c->root, overrides[i], path, err);
    if (!rc && (rc = resolve(c, err))) sweep_config_blame_override(path, overrides, n_over, err);
    if (!rc && !c->name) {
        const char *b = strrchr(path, '/');
        b = b ? b + 1 : path;
        static char base[256]; /* only one config per process */
        snprintf(base, sizeof base, "%s", b);
        char *dot = strrchr(base, '.');
        if (dot) *dot = 0;
        for (char *q = base; *q; q++) /* the file's name, made a run name */
            if (!isalnum((unsigned char)*q) && *q != '.' && *q != '_' && *q != '-') *q = '_';
        base[100] = 0;
        if (!run_name_ok(base)) snprintf(base, sizeof base, "run"); /* a file name such as ".json" */
        c->name = base;
    }
    if (rc) sweep_config_free(c);
    return rc;
}

int sweep_config_from_json(const cJSON *root, const char *where, kb_sweep_config *c, kb_err *err) {
    memset(c, 0, sizeof *c);
    snprintf(c->path, sizeof c->path, "%s", where);
    if (!cJSON_IsObject(root)) return kb_fail(err, KB_EINPUT, "%s: expected a JSON object", where);
    c->root = cJSON_Duplicate(root, 1);
    return resolve(c, err);
}

int sweep_config_load(const char *path, kb_sweep_config *c, kb_err *err) {
    return sweep_config_load_with(path, NULL, 0, c, err);
}

void sweep_config_free(kb_sweep_config *c) {
    cJSON_Delete(c->root);
    free(c->cells);
    c->root = NULL;
    c->cells = NULL;
}
