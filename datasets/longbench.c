/* longbench.c - LongBench v1, the 16 English and code tasks (benchmarks.md
 * §4), loaded from the user's files: <task>.jsonl (or <task>_e.jsonl for
 * LongBench-E) with input, context, answers, length, all_classes, _id; the
 * prompts and max new tokens from LongBench's own dataset2prompt.json and
 * dataset2maxlen.json (or kvbench's wording with "prompts": "kvbench").
 * Chat template except for trec, triviaqa, samsum, lcc and repobench-p; trec,
 * triviaqa and samsum are scored on the first line; samsum stops at a newline;
 * the context is middle-truncated to max_len tokens (first and last halves).
 *
 * Config keys: dir, subtasks, limit, e, max_len, prompts. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/ds_internal.h"
#include "harness/json.h"

typedef struct lb_spec {
    const char *name;
    const char *metric;
    int chat;
    int first_line;
    const char *stop;
} lb_spec;

static const lb_spec lb_specs[] = {
    {"narrativeqa", "qa_f1", 1, 0, NULL},
    {"qasper", "qa_f1", 1, 0, NULL},
    {"multifieldqa_en", "qa_f1", 1, 0, NULL},
    {"hotpotqa", "qa_f1", 1, 0, NULL},
    {"2wikimqa", "qa_f1", 1, 0, NULL},
    {"musique", "qa_f1", 1, 0, NULL},
    {"gov_report", "rouge_l", 1, 0, NULL},
    {"qmsum", "rouge_l", 1, 0, NULL},
    {"multi_news", "rouge_l", 1, 0, NULL},
    {"trec", "classification", 0, 1, NULL},
    {"triviaqa", "qa_f1", 0, 1, NULL},
    {"samsum", "rouge_l", 0, 1, "\n"},
    {"passage_count", "count", 1, 0, NULL},
    {"passage_retrieval_en", "retrieval", 1, 0, NULL},
    {"lcc", "code_sim", 0, 0, NULL},
    {"repobench-p", "code_sim", 0, 0, NULL},
};

static const char *const lb_keys[] = {"dir", "subtasks", "limit", "e", "max_len", "prompts", NULL};

/* Chat-format overhead allowed for when the context budget comes from the
 * model context (the user gives max_len explicitly otherwise). */
#define CHAT_ALLOWANCE 64

typedef struct lb_ctx {
    const lb_spec *sp;
    const kb_dataset_env *env;
    const char *tmpl;
    char tmpl_where[1200];
    int max_new;
    long max_len; /* user's max_len or 0 */
    long limit, taken;
    int e;
    char file[1024];
    char prompt_src[1100];
    kb_sample_list *out;
} lb_ctx;

static const lb_spec *lb_find(const char *name) {
    for (size_t i = 0; i < KB_ARRAY_LEN(lb_specs); i++)
        if (!strcmp(lb_specs[i].name, name)) return &lb_specs[i];
    return NULL;
}

static int lb_line(const cJSON *obj, long lineno, void *ctx, kb_err *err) {
    lb_ctx *c = ctx;
    if (c->limit && c->taken >= c->limit) return 0;
    const cJSON *in = cJSON_GetObjectItemCaseSensitive(obj, "input");
    const cJSON *cx = cJSON_GetObjectItemCaseSensitive(obj, "context");
    const cJSON *an = cJSON_GetObjectItemCaseSensitive(obj, "answers");
    const cJSON *cl = cJSON_GetObjectItemCaseSensitive(obj, "all_classes");
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(obj, "_id");
    const cJSON *ln = cJSON_GetObjectItemCaseSensitive(obj, "length");
    if (!cJSON_IsString(in)) return kb_fail(err, KB_EINPUT, "key 'input': expected a string");
    if (!cJSON_IsString(cx)) return kb_fail(err, KB_EINPUT, "key 'context': expected a string");
    if (!cJSON_IsArray(an) || !cJSON_GetArraySize(an))
        return kb_fail(err, KB_EINPUT, "key 'answers': expected a non-empty array of strings");
    for (const cJSON *a = an->child; a; a = a->next)
        if (!cJSON_IsString(a))
            return kb_fail(err, KB_EINPUT, "key 'answers': expected a non-empty array of strings");
    if (cl && !cJSON_IsNull(cl)) {
        if (!cJSON_IsArray(cl)) return kb_fail(err, KB_EINPUT, "key 'all_classes': expected null or an array of strings");
        for (const cJSON *a = cl->child; a; a = a->next)
            if (!cJSON_IsString(a))
                return kb_fail(err, KB_EINPUT, "key 'all_classes': expected null or an array of strings");
    }
    if (!strcmp(c->sp->metric, "classification") && !cJSON_IsArray(cl))
        return kb_fail(err, KB_EINPUT, "key 'all_classes': %s needs the class list",
                       c->sp->name);
    if (cJSON_IsString(id) && ds_id_check(id->valuestring, "_id", err)) return KB_EINPUT;
    /* the context's length in words (LongBench-E's buckets), an integer where
     * given: 1e300 used to become INT_MIN in samples.csv, 3.7 became 3 */
    if (ln && !cJSON_IsNull(ln) &&
        (!cJSON_IsNumber(ln) || !(ln->valuedouble >= 0 && ln->valuedouble <= INT_MAX) ||
         ln->valuedouble != floor(ln->valuedouble)))
        return cJSON_IsNumber(ln)
                   ? kb_fail(err, KB_EINPUT, "key 'length': expected null or an integer in [0, "
                                             "%d] (the context's length in words), got %g",
                             INT_MAX, ln->valuedouble)
                   : kb_fail(err, KB_EINPUT, "key 'length': expected null or an integer in [0, "
                                             "%d] (the context's length in words)", INT_MAX);
    tpl_var v[] = {{"context", cx->valuestring}, {"input", in->valuestring}};
    char *prompt;
    int rc = tpl_format(c->tmpl, v, 2, c->tmpl_where, &prompt, err);
    if (rc) return rc;
    kb_sample *s = samples_push(c->out);
    snprintf(s->task, sizeof s->task, "longbench_%s%s", c->sp->name, c->e ? "_e" : "");
    if (cJSON_IsString(id))
        snprintf(s->id, sizeof s->id, "%s", id->valuestring);
    else
        snprintf(s->id, sizeof s->id, "line%ld", lineno);
    s->chat = c->sp->chat;
    if (cJSON_IsNumber(ln)) s->context_words = (int)ln->valuedouble; /* checked above */
    long budget = c->max_len ? c->max_len
                  : c->env->n_ctx > 0 ? c->env->n_ctx - c->max_new - CHAT_ALLOWANCE
                                      : 0;
    s->truncate_to = budget > 0 ? (int)budget : 0;
    kb_turn *t = sample_add_turn(s);
    t->user = prompt;
    turn_set(t, c->sp->metric, c->max_new, s->task);
    t->first_line = c->sp->first_line;
    if (c->sp->stop) t->stop = kb_strdup(c->sp->stop);
    for (const cJSON *a = an->child; a; a = a->next) turn_add_answer(t, a->valuestring);
    if (cJSON_IsArray(cl)) {
        s->n_classes = cJSON_GetArraySize(cl);
        s->all_classes = KB_CALLOC((size_t)s->n_classes + 1, sizeof *s->all_classes);
        int k = 0;
        for (const cJSON *a = cl->child; a; a = a->next) s->all_classes[k++] = kb_strdup(a->valuestring);
    }
    s->prompt_tokens = ds_count(c->env, s);
    sbuf pv = {0};
    sb_printf(&pv, "wording=%s; data=%s", c->prompt_src, c->file);
    s->provenance = sb_take(&pv);
    c->taken++;
    return 0;
}

/* First existing path among dir/<candidates>; tried paths listed in err. */
static int find_file(const char *dir, const char *const *cands, int n, const char *name,
                     char *out, size_t cap, const char *what, kb_err *err) {
    char tried[2048] = "";
    for (int i = 0; i < n; i++) {
        sbuf b = {0};
        sb_printf(&b, "%s/%s%s", dir, cands[i], name);
        int rc = ds_path_copy(out, cap, b.s, "LongBench file", err);
        free(b.s);
        if (rc) return rc;
        if (ds_file_exists(out)) return 0;
        strncat(tried, i ? ", " : "", sizeof tried - strlen(tried) - 1);
        strncat(tried, out, sizeof tried - strlen(tried) - 1);
    }
    return kb_fail(err, KB_EINPUT, "LongBench %s not found (tried %s)", what, tried);
}

static int lb_generate(const cJSON *cfg, const kb_dataset_env *env, kb_sample_list *out,
                       kb_err *err) {
    int rc = ds_check_keys(cfg, lb_keys, err);
    if (rc) return rc;
    long limit, max_len;
    int e;
    const char *dir_key, *prompts;
    if ((rc = json_get_int(cfg, "task config", "limit", 0, 0, 1L << 30, 0, &limit, err)) ||
        (rc = json_get_int(cfg, "task config", "max_len", 0, 0, 1L << 24, 0, &max_len, err)) ||
        (rc = json_get_bool(cfg, "task config", "e", 0, 0, &e, err)) ||
        (rc = json_get_path(cfg, "task config", "dir", 0, NULL, &dir_key, err)) ||
        (rc = json_get_string(cfg, "task config", "prompts", 0, "official", &prompts, err)))
        return rc;
    if (!dir_key && !(env->data_dir && *env->data_dir))
        return kb_fail(err, KB_EINPUT, "task config: key 'dir' (the LongBench checkout or data "
                                       "folder) is required when the sweep has no data_dir");
    char *dir = dir_key ? ds_data_path(env, dir_key) : kb_strdup(env->data_dir);
    const char **subs = NULL;
    int nsub = 0;
    if ((rc = json_get_string_array(cfg, "task config", "subtasks", 0, &subs, &nsub, err))) {
        free(dir);
        return rc;
    }
    if (subs && !nsub) {
        free(subs);
        free(dir);
        return kb_fail(err, KB_EINPUT, "task config: key 'subtasks': expected a non-empty array");
    }
    for (int i = 0; i < nsub; i++)
        if (!lb_find(subs[i])) {
            char known[512] = "";
            for (size_t k = 0; k < KB_ARRAY_LEN(lb_specs); k++) {
                strncat(known, k ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, lb_specs[k].name, sizeof known - strlen(known) - 1);
            }
            rc = kb_fail(err, KB_EINPUT, "task config: key 'subtasks'[%d]: unknown LongBench task "
                                         "'%s' (known: %s)", i, subs[i], known);
            free(subs);
            free(dir);
            return rc;
        }

    /* the prompt and max-length tables */
    cJSON *d2p = NULL, *d2m = NULL, *mine_root;
    char psrc[1100] = "", msrc[1100] = ""; /* where the prompts and the max lengths are */
    ds_wording wf = {0};
    if (!strcmp(prompts, "official")) {
        static const char *const cands[] = {"config/", "LongBench/config/", ""};
        char p1[1100], p2[1100];
        if ((rc = find_file(dir, cands, 3, "dataset2prompt.json", p1, sizeof p1,
                            "prompt file dataset2prompt.json (or set \"prompts\": \"kvbench\")",
                            err)) ||
            (rc = find_file(dir, cands, 3, "dataset2maxlen.json", p2, sizeof p2,
                            "max-length file dataset2maxlen.json", err)) ||
            (rc = json_load_file(p1, &d2p, err)) || (rc = json_load_file(p2, &d2m, err)))
            goto out;
        snprintf(psrc, sizeof psrc, "%s", p1);
        snprintf(msrc, sizeof msrc, "%s", p2);
    } else if (!strcmp(prompts, "kvbench")) {
        cJSON *none = cJSON_CreateObject(); /* no "prompts" path: the default file */
        rc = wording_load(none, env, "longbench", &wf, err);
        cJSON_Delete(none);
        if (rc) goto out;
        mine_root = wf.root;
        d2p = cJSON_DetachItemFromObjectCaseSensitive(mine_root, "dataset2prompt");
        d2m = cJSON_DetachItemFromObjectCaseSensitive(mine_root, "dataset2maxlen");
        snprintf(psrc, sizeof psrc, "%s", wf.path);
        snprintf(msrc, sizeof msrc, "%s", wf.path);
    } else {
        rc = kb_fail(err, KB_EINPUT, "task config: key 'prompts': expected \"official\" or "
                                     "\"kvbench\", got \"%s\"", prompts);
        goto out;
    }
    if (!cJSON_IsObject(d2p) || !cJSON_IsObject(d2m)) {
        rc = kb_fail(err, KB_EINPUT, "%s: expected objects of task -> prompt and task -> max "
                                     "length", psrc);
        goto out;
    }
    kb_sample_list mine = {0};
    int n = nsub ? nsub : (int)KB_ARRAY_LEN(lb_specs);
    for (int i = 0; i < n && !rc; i++) {
        const lb_spec *sp = nsub ? lb_find(subs[i]) : &lb_specs[i];
        lb_ctx c;
        memset(&c, 0, sizeof c);
        c.sp = sp;
        c.env = env;
        c.limit = limit;
        c.max_len = max_len;
        c.e = e;
        c.out = &mine;
        snprintf(c.prompt_src, sizeof c.prompt_src, "%s", psrc);
        const cJSON *pt = cJSON_GetObjectItemCaseSensitive(d2p, sp->name);
        const cJSON *ml = cJSON_GetObjectItemCaseSensitive(d2m, sp->name);
        if (!cJSON_IsString(pt) || !ml) {
            rc = kb_fail(err, KB_EINPUT, "%s: no prompt (string) and max length for task '%s'",
                         !cJSON_IsString(pt) ? psrc : msrc, sp->name);
            break;
        }
        /* the tokens to generate: an integer, in the range every task's max_new
         * takes (1e300 used to become INT_MIN, 2.5 became 2) */
        long max_new;
        char mkey[96]; /* the key as the file has it: our wording file nests the table */
        snprintf(mkey, sizeof mkey, "%s%s", strcmp(msrc, psrc) ? "" : "dataset2maxlen.", sp->name);
        if ((rc = json_as_int(ml, msrc, mkey, 1, 1 << 16, &max_new, err))) break;
        c.tmpl = pt->valuestring;
        c.max_new = (int)max_new;
        snprintf(c.tmpl_where, sizeof c.tmpl_where, "%s: %s", psrc, sp->name);
        static const char *const dcands[] = {"data/", "", "LongBench/data/"};
        char fname[128];
        snprintf(fname, sizeof fname, "%s%s.jsonl", sp->name, e ? "_e" : "");
        if ((rc = find_file(dir, dcands, 3, fname, c.file, sizeof c.file, "data file", err))) break;
        rc = jsonl_foreach(c.file, lb_line, &c, err);
    }
    if (!rc) samples_move(out, &mine);
    sample_list_free(&mine);
out:
    cJSON_Delete(d2p);
    cJSON_Delete(d2m);
    wording_free(&wf);
    free(subs);
    free(dir);
    return rc;
}

const kb_task_ops longbench_task = {"longbench", "longbench", lb_keys, lb_generate};
