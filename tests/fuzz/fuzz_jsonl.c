/* fuzz_jsonl.c - libFuzzer target: the JSONL readers.
 *
 * One input = one JSONL file image, read by every JSONL consumer of kvbench:
 *   1. jsonl_foreach (harness/json.h) with a callback that checks each line
 *      is an object with a rising line number, and again with a callback
 *      that refuses line 2: the error must then be "FILE:2: ..."; the same
 *      with jsonl_foreach_value (any value), which must reach at least the
 *      lines that jsonl_foreach reached;
 *   2. `kvbench score` (cmd_score, stdout to /dev/null) with one metric and
 *      --first-line picked by a hash of the input: exit code 0 or 2;
 *   3. the SCBench loaders (datasets/scbench.c, through the task registry):
 *      one of the 12 official tasks, multi_turn or multi_request, with or
 *      without max_len (the multi_request path cuts the context with a token
 *      counter: here bytes / 4), all picked by the hash; samples that load
 *      have turns, user texts and answers; errors name the data file;
 *   4. the LongBench loader (datasets/longbench.c): the input is the data
 *      file of one sub-task (hash) in a LongBench-like folder whose
 *      dataset2prompt.json / dataset2maxlen.json are written once;
 *   5. `kvbench tokenize --jsonl` (encode, --decode, --chat auto, with or
 *      without --no-special / --render-special, by the hash) with the model
 *      named by $KVBENCH_FUZZ_GGUF (run.sh writes a tiny one) or
 *      $KVBENCH_MODEL_FILE; skipped when neither is set;
 *   6. RULER's QA loaders (datasets/ruler.c): the input is the data file of
 *      qa_1 (SQuAD JSON) or qa_2 (HotpotQA JSON), by the hash, and two
 *      samples are fitted to 400 or 1500 tokens (counted as bytes / 4):
 *      samples that load are checked as in 3; an error names the data file,
 *      or is the length error of a prompt that cannot fit.
 * The hash makes each input mean the same thing on every run, so saved
 * crash inputs replay identically (tests/unit/test_fuzz_regressions.c). */
#include "tests/fuzz/fuzz_common.h"
#include "datasets/dataset.h"
#include "harness/cli.h"
#include "harness/json.h"
#include "harness/metrics.h"

static char jl_fz_configs[1024];  /* configs/ (prompt wording files) */
static char jl_fz_lbdir[512];     /* LongBench-like folder */

static const char *const jl_fz_lb_tasks[] = {
    "narrativeqa", "qasper",   "multifieldqa_en", "hotpotqa", "2wikimqa",
    "musique",     "gov_report", "qmsum",         "multi_news", "trec",
    "triviaqa",    "samsum",   "passage_count",   "passage_retrieval_en", "lcc",
    "repobench-p"};
#define JL_FZ_N_LB (sizeof jl_fz_lb_tasks / sizeof jl_fz_lb_tasks[0])

static const char *const jl_fz_sc_tasks[] = {
    "scbench_kv",        "scbench_prefix_suffix", "scbench_vt",       "scbench_repoqa",
    "scbench_qa_eng",    "scbench_qa_chn",        "scbench_choice_eng", "scbench_many_shot",
    "scbench_summary",   "scbench_mf",            "scbench_summary_with_needles",
    "scbench_repoqa_and_kv"};
#define JL_FZ_N_SC (sizeof jl_fz_sc_tasks / sizeof jl_fz_sc_tasks[0])

static void fuzz_jsonl_init(void) {
    if (jl_fz_configs[0]) return;
    const char *env = getenv("KVBENCH_CONFIGS");
    char cwd[900];
    if (env && *env) snprintf(jl_fz_configs, sizeof jl_fz_configs, "%s", env);
    else if (getcwd(cwd, sizeof cwd)) snprintf(jl_fz_configs, sizeof jl_fz_configs, "%s/configs", cwd);
    /* LongBench folder: config/ with the two tables, data/ for the input */
    char p[700];
    snprintf(jl_fz_lbdir, sizeof jl_fz_lbdir, "%s/lb", fuzz_dir());
    fuzz_mkdir(jl_fz_lbdir);
    snprintf(p, sizeof p, "%s/config", jl_fz_lbdir);
    fuzz_mkdir(p);
    snprintf(p, sizeof p, "%s/data", jl_fz_lbdir);
    fuzz_mkdir(p);
    cJSON *prompts = cJSON_CreateObject(), *maxlen = cJSON_CreateObject();
    for (size_t i = 0; i < JL_FZ_N_LB; i++) {
        cJSON_AddStringToObject(prompts, jl_fz_lb_tasks[i], "Read: {context}\nQ: {input}\nA:");
        cJSON_AddNumberToObject(maxlen, jl_fz_lb_tasks[i], 8 + (double)i);
    }
    char *s = cJSON_Print(prompts);
    snprintf(p, sizeof p, "%s/config/dataset2prompt.json", jl_fz_lbdir);
    fuzz_write(p, s, strlen(s));
    free(s);
    s = cJSON_Print(maxlen);
    snprintf(p, sizeof p, "%s/config/dataset2maxlen.json", jl_fz_lbdir);
    fuzz_write(p, s, strlen(s));
    free(s);
    cJSON_Delete(prompts);
    cJSON_Delete(maxlen);
}

static uint64_t jl_fz_hash(const uint8_t *d, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ d[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

/* ---- 1. jsonl_foreach ---- */

typedef struct jl_fz_ctx {
    long last, refuse_at, lines;
    int objects;
} jl_fz_ctx;

static int jl_fz_line(const cJSON *obj, long lineno, void *ctx, kb_err *err) {
    jl_fz_ctx *c = ctx;
    FUZZ_ASSERT(!c->objects || cJSON_IsObject(obj), "line %ld is not an object", lineno);
    FUZZ_ASSERT(lineno > c->last, "line %ld after %ld", lineno, c->last);
    c->last = lineno;
    c->lines++;
    if (lineno == c->refuse_at) return kb_fail(err, KB_EINPUT, "refused by the fuzzer");
    return 0;
}

static void jl_fz_foreach(const char *path) {
    long reached[2] = {0, 0}; /* [refuse], by jsonl_foreach */
    for (int k = 0; k < 4; k++) {
        int refuse = k & 1, objects = k < 2;
        jl_fz_ctx c = {0, refuse ? 2 : -1, 0, objects};
        kb_err err = {0};
        int rc = (objects ? jsonl_foreach : jsonl_foreach_value)(path, jl_fz_line, &c, &err);
        if (objects) reached[refuse] = c.last;
        else FUZZ_ASSERT(c.last >= reached[refuse], "jsonl_foreach_value stopped at line %ld, "
                         "jsonl_foreach reached line %ld", c.last, reached[refuse]);
        if (rc) {
            FUZZ_ASSERT_ERR(rc, err);
            FUZZ_ASSERT(!strncmp(err.msg, path, strlen(path)), "message without the file: '%s'",
                        err.msg);
        }
        if (rc && refuse && c.last == 2) {
            char want[600];
            snprintf(want, sizeof want, "%s:2: refused by the fuzzer", path);
            FUZZ_ASSERT(!strcmp(err.msg, want), "refusal at line 2 reads '%s'", err.msg);
        }
    }
}

/* ---- 2. kvbench score ---- */

static void jl_fz_score(const char *path, uint64_t h) {
    const kb_metric *m = metric_at((int)(h % (uint64_t)metric_count()));
    char a0[] = "score", a1[] = "--metric", a3[] = "--first-line";
    char name[64], file[600];
    snprintf(name, sizeof name, "%s", m->name);
    snprintf(file, sizeof file, "%s", path);
    char *argv[5] = {a0, a1, name, file, NULL};
    int argc = 4;
    if (h >> 8 & 1) {
        argv[3] = a3;
        argv[4] = file;
        argc = 5;
    }
    int saved = fuzz_stdout_null();
    int rc = cmd_score(argc, argv);
    fuzz_stdout_restore(saved);
    FUZZ_ASSERT(rc == 0 || rc == KB_EINPUT, "kvbench score --metric %s: exit %d", name, rc);
}

/* ---- 3./4. dataset loaders ---- */

static int jl_fz_count(void *ctx, const kb_sample *s) {
    (void)ctx;
    size_t b = 0;
    for (int t = 0; t < s->n_turns; t++)
        if (s->turns[t].user) b += strlen(s->turns[t].user);
    return (int)(b / 4);
}

static void jl_fz_check_samples(const kb_sample_list *l, const char *task) {
    for (int i = 0; i < l->n; i++) {
        const kb_sample *s = &l->v[i];
        FUZZ_ASSERT(s->n_turns >= 1, "%s sample %d: %d turns", task, i, s->n_turns);
        for (int t = 0; t < s->n_turns; t++) {
            const kb_turn *k = &s->turns[t];
            FUZZ_ASSERT(k->user != NULL && k->n_answers >= 1 && k->max_new >= 1,
                        "%s sample %d turn %d: user %p, %d answers, max_new %d", task, i, t,
                        (const void *)k->user, k->n_answers, k->max_new);
            for (int a = 0; a < k->n_answers; a++)
                FUZZ_ASSERT(k->answers[a] != NULL, "%s sample %d turn %d answer %d", task, i, t, a);
        }
        if (s->multi_request && s->shared_prefix)
            for (int t = 0; t < s->n_turns; t++)
                FUZZ_ASSERT(!strncmp(s->turns[t].user, s->shared_prefix, strlen(s->shared_prefix)),
                            "%s sample %d turn %d does not start with the shared prefix", task, i, t);
    }
}

/* 3, 4 and 6; length_ok: an error that does not name the file may be the
 * generator's "target length ... is too short" */
static void jl_fz_task(const char *task, cJSON *cfg, const char *file, int n_ctx, int length_ok) {
    const kb_task_ops *ops = task_find(task);
    FUZZ_ASSERT(ops != NULL, "task %s not registered", task);
    if (!ops) return;
    kb_dataset_env env;
    memset(&env, 0, sizeof env);
    env.seed = 42;
    env.configs_dir = jl_fz_configs;
    env.n_ctx = n_ctx;
    env.count_tokens = jl_fz_count;
    kb_sample_list out = {0};
    kb_err err = {0};
    int rc = ops->generate(cfg, &env, &out, &err);
    if (rc) {
        FUZZ_ASSERT_ERR(rc, err);
        FUZZ_ASSERT(strstr(err.msg, file) != NULL || (length_ok && strstr(err.msg, "is too short for")),
                    "%s: message without the data file: '%s'", task, err.msg);
        FUZZ_ASSERT(out.n == 0, "%s: %d samples appended on error", task, out.n);
    } else {
        jl_fz_check_samples(&out, task);
    }
    sample_list_free(&out);
}

static void jl_fz_scbench(const char *path, uint64_t h) {
    const char *task = jl_fz_sc_tasks[h % JL_FZ_N_SC];
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "task", task);
    cJSON_AddStringToObject(cfg, "file", path);
    if (h >> 12 & 1) cJSON_AddStringToObject(cfg, "mode", "multi_request");
    if (h >> 13 & 1) cJSON_AddNumberToObject(cfg, "max_len", (double)(h >> 14 & 1 ? 2000 : 300));
    if (h >> 15 & 1) cJSON_AddNumberToObject(cfg, "turns", 1 + (double)(h >> 16 & 3));
    if (h >> 18 & 1) cJSON_AddNumberToObject(cfg, "limit", 1);
    jl_fz_task(task, cfg, path, 0, 0);
    cJSON_Delete(cfg);
}

static void jl_fz_longbench(const uint8_t *d, size_t n, uint64_t h) {
    const char *sub = jl_fz_lb_tasks[(h >> 20) % JL_FZ_N_LB];
    char file[700];
    snprintf(file, sizeof file, "%s/data/%s.jsonl", jl_fz_lbdir, sub);
    fuzz_write(file, d, n);
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "task", "longbench");
    cJSON_AddStringToObject(cfg, "dir", jl_fz_lbdir);
    cJSON *subs = cJSON_AddArrayToObject(cfg, "subtasks");
    cJSON_AddItemToArray(subs, cJSON_CreateString(sub));
    if (h >> 26 & 1) cJSON_AddNumberToObject(cfg, "max_len", 500);
    if (h >> 27 & 1) cJSON_AddNumberToObject(cfg, "limit", 2);
    jl_fz_task("longbench", cfg, file, h >> 28 & 1 ? 2048 : 0, 0);
    cJSON_Delete(cfg);
    unlink(file);
}

static void jl_fz_ruler_qa(const char *path, uint64_t h) {
    const char *task = h >> 36 & 1 ? "qa_2" : "qa_1";
    cJSON *cfg = cJSON_CreateObject();
    cJSON_AddStringToObject(cfg, "task", task);
    cJSON_AddStringToObject(cfg, "file", path);
    cJSON *len = cJSON_AddArrayToObject(cfg, "lengths");
    cJSON_AddItemToArray(len, cJSON_CreateNumber(h >> 37 & 1 ? 1500 : 400));
    cJSON_AddNumberToObject(cfg, "samples", 2);
    jl_fz_task(task, cfg, path, 0, 1);
    cJSON_Delete(cfg);
}

/* ---- 5. kvbench tokenize --jsonl ---- */

static void jl_fz_tokenize(const char *path, uint64_t h) {
    const char *model = getenv("KVBENCH_FUZZ_GGUF");
    if (!model || !*model) model = getenv("KVBENCH_MODEL_FILE");
    if (!model || !*model) return;
    char a0[] = "tokenize", am[] = "-m", aj[] = "--jsonl", adec[] = "--decode",
         arend[] = "--render-special", anos[] = "--no-special", achat[] = "--chat",
         aauto[] = "auto", atext[] = "--print-text";
    char mpath[600], file[600];
    snprintf(mpath, sizeof mpath, "%s", model);
    snprintf(file, sizeof file, "%s", path);
    char *argv[12] = {a0, am, mpath, aj, file};
    int argc = 5;
    switch (h >> 32 & 3) {
    case 0: break;
    case 1: argv[argc++] = anos; break;
    case 2:
        argv[argc++] = adec;
        if (h >> 34 & 1) argv[argc++] = arend;
        break;
    case 3:
        argv[argc++] = achat;
        argv[argc++] = aauto;
        if (h >> 34 & 1) argv[argc++] = atext;
        break;
    }
    argv[argc] = NULL;
    int saved = fuzz_stdout_null();
    int rc = cmd_tokenize(argc, argv);
    fuzz_stdout_restore(saved);
    FUZZ_ASSERT(rc == 0 || rc == KB_EINPUT, "kvbench tokenize --jsonl (mode %d): exit %d",
                (int)(h >> 32 & 3), rc);
}

int fuzz_jsonl_one(const uint8_t *d, size_t n) {
    fuzz_jsonl_init();
    uint64_t h = jl_fz_hash(d, n);
    char path[512];
    fuzz_path(path, sizeof path, "in.jsonl");
    fuzz_write(path, d, n);
    jl_fz_foreach(path);
    jl_fz_score(path, h);
    jl_fz_scbench(path, h);
    jl_fz_longbench(d, n, h);
    jl_fz_tokenize(path, h);
    jl_fz_ruler_qa(path, h);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fuzz_jsonl_one(d, n); }
#endif
