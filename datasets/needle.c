/* needle.c - the needle / passkey task (RocketKV's "paulgraham_passkey"
 * protocol, benchmarks.md §1): a 7-digit pass key sentence hidden at word
 * index int(N * depth) of N words of prose, raw prompt, 128 new tokens,
 * exact_match (partial_match as the second metric), a depth x length grid
 * with fresh keys per cell.
 *
 * Config keys (docs/DATASETS.md): words ([N...] or {"min","max","n"}; absent:
 * fitted to the model context), depths (count or list in [0, 1]), per_cell,
 * max_new, digits, prompts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/ds_internal.h"
#include "datasets/haystack.h"
#include "harness/json.h"

static const char *const needle_keys[] = {"words", "depths", "per_cell", "max_new", "digits",
                                          "prompts", NULL};

typedef struct needle_wording {
    const char *needle, *instruction, *question, *tmpl;
    char path[1024];
} needle_wording;

/* The prompt for N haystack words with the needle at word index int(N*depth). */
static int needle_prompt(const kb_prose *p, const needle_wording *w, long N, double depth,
                         const char *key, char **out, kb_err *err) {
    tpl_var kv[] = {{"key", key}};
    char *needle;
    int rc = tpl_format(w->needle, kv, 1, w->path, &needle, err);
    if (rc) return rc;
    long at = (long)((double)N * depth);
    if (at > N) at = N;
    sbuf b = {0};
    for (long i = 0; i <= N; i++) {
        if (i == at) {
            if (b.n) sb_putc(&b, ' ');
            sb_put(&b, needle);
        }
        if (i == N) break;
        if (b.n) sb_putc(&b, ' ');
        sb_put(&b, p->words[i % p->n]);
    }
    free(needle);
    char *ctx = sb_take(&b);
    tpl_var v[] = {{"instruction", w->instruction}, {"context", ctx}, {"question", w->question}};
    rc = tpl_format(w->tmpl, v, 3, w->path, out, err);
    free(ctx);
    return rc;
}

static int count_raw(const kb_dataset_env *env, const char *text) {
    kb_sample s;
    kb_turn t;
    memset(&s, 0, sizeof s);
    memset(&t, 0, sizeof t);
    t.user = (char *)text;
    s.turns = &t;
    s.n_turns = 1;
    s.chat = 0;
    return ds_count(env, &s);
}

/* The largest word count whose prompt + max_new fits the model context. */
static int fit_words(const kb_dataset_env *env, const kb_prose *p, const needle_wording *w,
                     int max_new, long *out, kb_err *err) {
    if (!env->count_tokens || env->n_ctx <= 0)
        return kb_fail(err, KB_EINPUT,
                       "key 'words' is needed when no model tokenizer is available to fit the "
                       "grid to the context");
    long lo = 0, hi = 256;
    for (;;) {
        char *t;
        int rc = needle_prompt(p, w, hi, 0.5, "1234567", &t, err);
        if (rc) return rc;
        int n = count_raw(env, t);
        free(t);
        if (n < 0) return kb_fail(err, KB_ERUNTIME, "token counting failed");
        if (n + max_new > env->n_ctx) break;
        lo = hi;
        if (hi >= (1L << 22)) break;
        hi *= 2;
    }
    while (hi - lo > 1) {
        long mid = (lo + hi) / 2;
        char *t;
        int rc = needle_prompt(p, w, mid, 0.5, "1234567", &t, err);
        if (rc) return rc;
        int n = count_raw(env, t);
        free(t);
        if (n >= 0 && n + max_new <= env->n_ctx)
            lo = mid;
        else
            hi = mid;
    }
    if (lo < 40)
        return kb_fail(err, KB_EINPUT, "the model context (%d tokens) is too short for the needle "
                                       "task", env->n_ctx);
    *out = lo;
    return 0;
}

static int needle_generate(const cJSON *cfg, const kb_dataset_env *env, kb_sample_list *out,
                           kb_err *err) {
    int rc = ds_check_keys(cfg, needle_keys, err);
    if (rc) return rc;
    long per_cell, max_new, digits;
    if ((rc = json_get_int(cfg, "task config", "per_cell", 0, 1, 1000, 3, &per_cell, err)) ||
        (rc = json_get_int(cfg, "task config", "max_new", 0, 1, 1 << 16, 128, &max_new, err)) ||
        (rc = json_get_int(cfg, "task config", "digits", 0, 1, 18, 7, &digits, err)))
        return rc;

    /* depths: a count (linspace over [0, 1]) or explicit values */
    double *depths = NULL;
    int nd = 0;
    const cJSON *dv = cJSON_GetObjectItemCaseSensitive(cfg, "depths");
    if (!dv || cJSON_IsNumber(dv)) {
        long n = 10;
        if (dv && (rc = json_as_int(dv, "task config", "depths", 1, 1000, &n, err))) return rc;
        nd = (int)n;
        depths = KB_MALLOC((size_t)nd * sizeof *depths);
        for (int i = 0; i < nd; i++) depths[i] = nd == 1 ? 0.5 : (double)i / (double)(nd - 1);
    } else if (cJSON_IsArray(dv) && cJSON_GetArraySize(dv) > 0) {
        nd = cJSON_GetArraySize(dv);
        depths = KB_MALLOC((size_t)nd * sizeof *depths);
        int i = 0;
        for (const cJSON *c = dv->child; c; c = c->next, i++) {
            if (!cJSON_IsNumber(c) || c->valuedouble < 0 || c->valuedouble > 1) {
                free(depths);
                return kb_fail(err, KB_EINPUT,
                               "task config: key 'depths'[%d]: expected a number in [0, 1]", i);
            }
            depths[i] = c->valuedouble;
        }
    } else {
        return kb_fail(err, KB_EINPUT, "task config: key 'depths': expected a count (integer) or "
                                       "a non-empty array of numbers in [0, 1]");
    }

    ds_wording wf;
    needle_wording w;
    const kb_prose *prose;
    long *grid = NULL;
    int ng = 0;
    kb_sample_list mine = {0};
    if ((rc = wording_load(cfg, env, "needle", &wf, err))) goto out_depths;
    snprintf(w.path, sizeof w.path, "%s", wf.path);
    if ((rc = wording_get(&wf, NULL, "needle", &w.needle, err)) ||
        (rc = wording_get(&wf, NULL, "instruction", &w.instruction, err)) ||
        (rc = wording_get(&wf, NULL, "question", &w.question, err)) ||
        (rc = wording_get(&wf, NULL, "template", &w.tmpl, err)))
        goto out_wording;
    if ((rc = prose_get(env->haystack_dir, env->haystack_from, &prose, err))) goto out_wording;

    /* the word grid */
    const cJSON *wv = cJSON_GetObjectItemCaseSensitive(cfg, "words");
    if (cJSON_IsObject(wv)) {
        static const char *const gk[] = {"min", "max", "n", NULL};
        if ((rc = json_check_keys(wv, "task config: key 'words'", gk, NULL, err))) goto out_wording;
        long mn, mx, n;
        if ((rc = json_get_int(wv, "task config: key 'words'", "max", 0, 16, 1L << 24, 0, &mx,
                               err)))
            goto out_wording;
        if (!mx && (rc = fit_words(env, prose, &w, (int)max_new, &mx, err))) goto out_wording;
        long def_min = mx / 40 > 16 ? mx / 40 : 16;
        if (def_min > mx) def_min = mx;
        if ((rc = json_get_int(wv, "task config: key 'words'", "min", 0, 1, mx, def_min, &mn, err)) ||
            (rc = json_get_int(wv, "task config: key 'words'", "n", 0, 1, 1000, 10, &n, err)))
            goto out_wording;
        if (n > mx - mn + 1) /* the spacing would repeat lengths, and so sample ids */
            rc = kb_fail(err, KB_EINPUT, "task config: key 'words': n = %ld lengths from %ld to %ld would repeat "
                         "some: expected n <= %ld", n, mn, mx, mx - mn + 1);
        if (rc) goto out_wording;
        ng = (int)n;
        grid = KB_MALLOC((size_t)ng * sizeof *grid);
        for (int i = 0; i < ng; i++)
            grid[i] = ng == 1 ? mx : mn + ((mx - mn) * i + (ng - 1) / 2) / (ng - 1);
    } else if (wv) {
        if ((rc = ds_get_int_list(cfg, "words", 1, 1L << 24, &grid, &ng, err))) goto out_wording;
    } else {
        long mx;
        if ((rc = fit_words(env, prose, &w, (int)max_new, &mx, err))) goto out_wording;
        long mn = mx / 40 > 16 ? mx / 40 : 16;
        ng = (int)KB_MIN(10L, KB_MAX(1L, mx - mn + 1)); /* 10 distinct lengths, or as many as there are */
        grid = KB_MALLOC((size_t)ng * sizeof *grid);
        for (int i = 0; i < ng; i++) grid[i] = ng == 1 ? mx : mn + ((mx - mn) * i + (ng - 1) / 2) / (ng - 1);
    }

    long lo_key = 1, hi_key = 9;
    for (int i = 1; i < digits; i++) {
        lo_key *= 10;
        hi_key = hi_key * 10 + 9;
    }
    for (int gi = 0; gi < ng && !rc; gi++)
        for (int di = 0; di < nd && !rc; di++)
            for (int k = 0; k < per_cell && !rc; k++) {
                kb_rng r;
                rng_derive(&r, env->seed, "needle", (uint64_t)grid[gi],
                           (uint64_t)di * 1000003u + (uint64_t)k);
                char key[32];
                snprintf(key, sizeof key, "%ld", rng_range(&r, lo_key, hi_key));
                char *text;
                if ((rc = needle_prompt(prose, &w, grid[gi], depths[di], key, &text, err))) break;
                kb_sample *s = samples_push(&mine);
                snprintf(s->task, sizeof s->task, "needle");
                snprintf(s->id, sizeof s->id, "w%ld_d%d_%d", grid[gi], di, k);
                s->chat = 0;
                s->depth = depths[di];
                s->context_words = (int)grid[gi];
                kb_turn *t = sample_add_turn(s);
                t->user = text;
                turn_add_answer(t, key);
                turn_set(t, "exact_match", (int)max_new, "needle");
                snprintf(t->metric2, sizeof t->metric2, "partial_match");
                s->prompt_tokens = ds_count(env, s);
                sbuf pv = {0};
                sb_printf(&pv, "wording=%s; haystack=%s", w.path, prose->desc);
                s->provenance = sb_take(&pv);
            }
    if (!rc) samples_move(out, &mine);
    sample_list_free(&mine);
    free(grid);
out_wording:
    wording_free(&wf);
out_depths:
    free(depths);
    return rc;
}

const kb_task_ops needle_task = {"needle", "needle", needle_keys, needle_generate};
