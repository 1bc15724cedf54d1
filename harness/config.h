/* config.h - a sweep config (JSON, docs/CONFIG.md) resolved into the plan:
 * tasks (handed to datasets/), and cells = (method, params, budget). */
#ifndef KB_CONFIG_H
#define KB_CONFIG_H

#include <cjson/cJSON.h>

#include "methods/method.h"

typedef struct kb_cell {
    kb_method_params p; /* method, params and budget of this cell */
    char params_json[512]; /* the method's config object minus method/label/budget(s),
                              canonical JSON: the "params" column */
} kb_cell;

typedef struct kb_latency_cfg {
    int enabled;
    int contexts[16], n_contexts;   /* context lengths in tokens */
    int decode_tokens;              /* timed decode steps per cell */
    int reps;                       /* repetitions (median reported) */
    int rounds;                     /* every cell this many times, interleaved */
} kb_latency_cfg;

typedef struct kb_sweep_config {
    cJSON *root;            /* the parsed file (owned); run.json embeds it */
    char path[1024];
    const char *name;       /* "name" or the file's base name */
    const char *model;      /* "model" or NULL (CLI / default decides) */
    unsigned long long seed;
    kb_dtype kv_dtype;
    int threads;            /* 0 = all cores */
    int fidelity;           /* fidelity columns (methods.md §10) */
    int own_answers;        /* multi-turn: append the model's answers instead of gold */
    const char *haystack;   /* haystack directory or NULL */
    const char *data_dir;   /* official data files or NULL */
    const cJSON *tasks;     /* array of task objects (datasets/) */
    kb_cell *cells;         /* [n_cells] in config order, budgets ascending inside a method */
    int n_cells;
    int window_max;         /* largest window any cell needs (prefill keeps these queries) */
    int max_samples;        /* cap per task after generation (0 = all) */
    kb_latency_cfg latency;
} kb_sweep_config;

/* Parses and validates; every error names the file and key, exit code 2. */
int sweep_config_load(const char *path, kb_sweep_config *c, kb_err *err);
/* Applies "key=value" overrides from the CLI (--set), e.g. seed=3,
 * budgets=[64,128], kv_dtype=f32, before validation. */
int sweep_config_load_with(const char *path, char *const *overrides, int n_over,
                           kb_sweep_config *c, kb_err *err);
/* Ends err's message with " (the value comes from --set KEY=VALUE)" when
 * the error's place (right after "PATH: ") is a top-level key that one of
 * the overrides replaced; sweep_config_load_with does this for its own
 * errors, and the sweep for the ones it finds later against the model and
 * the data (tasks[i]: ..., key 'latency', methods entry 'LABEL'). Once only. */
void sweep_config_blame_override(const char *path, char *const *overrides, int n_over, kb_err *err);
/* The same checks on an already applied config (run.json's "config"); where
 * names it in errors. */
int sweep_config_from_json(const cJSON *root, const char *where, kb_sweep_config *c, kb_err *err);
void sweep_config_free(kb_sweep_config *c);

#endif
