/* cmd_prompts.c - kvbench prompts: write the samples that a config's tasks
 * generate, as JSONL, without running a model. For inspecting prompts and
 * answers, checking that a seed reproduces them, and for the dataset tests.
 *
 * Token counts (length fitting of RULER / SCBench-like tasks, the needle's
 * automatic word grid, prompt_tokens) use the model's tokenizer and chat
 * format exactly as the sweep renders them (harness/render.c). The
 * `bytes4` counter (tokens = ceil(bytes / 4) of the user text, answer prefix
 * and system message, + 16 for a chat template) needs no model; it is for
 * tests and quick looks, not for real runs. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "harness/atomic.h"
#include "harness/cli.h"
#include "harness/engine/gguf.h"
#include "harness/engine/tokenizer.h"
#include "harness/json.h"
#include "harness/render.h"

static int count_bytes4(void *ctx, const kb_sample *s) {
    (void)ctx;
    if (s->n_turns < 1) return -1;
    size_t n = strlen(s->turns[0].user);
    if (s->turns[0].answer_prefix) n += strlen(s->turns[0].answer_prefix);
    if (s->chat) n += (s->system ? strlen(s->system) : 0) + 64;
    return (int)((n + 3) / 4);
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench prompts CONFIG.json [options]\n\n"
            "Writes the samples the config's tasks generate as JSONL (one sample per line:\n"
            "task, id, turns with user text, answer prefix, answers, max_new and metric,\n"
            "depth, token counts, provenance). CONFIG.json is a sweep config (its \"tasks\",\n"
            "\"seed\", \"haystack\", \"data_dir\" and \"max_samples\" are used: the samples the\n"
            "sweep runs), one task object, or an array of task objects.\n\n"
            "  -m, --model PATH       model whose tokenizer and chat format count tokens\n"
            "                         (default: $KVBENCH_MODEL or the default model)\n"
            "      --counter KIND     model (default) | bytes4 (no model: bytes/4, for tests)\n"
            "      --n-ctx N          model context in tokens (default: the model's; 8192\n"
            "                         with --counter bytes4)\n"
            "  -o, --out FILE         write here (atomically) instead of stdout\n"
            "      --seed N           override the config's seed (default 42)\n"
            "      --haystack DIR     prose corpus folder of .txt files\n"
            "      --data-dir DIR     folder of official data files\n"
            "  -h, --help\n");
}

typedef struct model_counter {
    gguf_file *g;
    kb_tokenizer *tok;
    kb_renderer rend;
    int n_ctx;
} model_counter;

static int open_counter(const char *path, model_counter *mc, kb_err *err) {
    memset(mc, 0, sizeof *mc);
    int rc = gguf_open(path, &mc->g, err);
    if (rc) return rc;
    if ((rc = tokenizer_from_gguf(mc->g, &mc->tok, err))) return rc;
    mc->rend.tok = mc->tok;
    mc->rend.fmt = tokenizer_chat_format(mc->tok);
    char *arch = NULL;
    if (!gguf_get_str(mc->g, "general.architecture", &arch, err) && arch) {
        char key[160];
        uint32_t u = 0;
        snprintf(key, sizeof key, "%s.context_length", arch);
        kb_err e2;
        if (!gguf_get_u32(mc->g, key, &u, &e2)) mc->n_ctx = (int)u;
        free(arch);
    }
    kb_err_clear(err);
    return 0;
}

static void close_counter(model_counter *mc) {
    if (mc->tok) tokenizer_free(mc->tok);
    if (mc->g) gguf_close(mc->g);
}

static cJSON *str_or_null(const char *s) { return s ? cJSON_CreateString(s) : cJSON_CreateNull(); }

static cJSON *sample_json(const kb_sample *s) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "task", s->task);
    cJSON_AddStringToObject(o, "id", s->id);
    cJSON_AddBoolToObject(o, "chat", s->chat);
    cJSON_AddItemToObject(o, "system", str_or_null(s->system));
    cJSON_AddBoolToObject(o, "multi_request", s->multi_request);
    cJSON_AddItemToObject(o, "shared_prefix", str_or_null(s->shared_prefix));
    cJSON_AddNumberToObject(o, "depth", s->depth);
    cJSON_AddNumberToObject(o, "target_tokens", s->target_tokens);
    cJSON_AddNumberToObject(o, "prompt_tokens", s->prompt_tokens);
    cJSON_AddNumberToObject(o, "context_words", s->context_words);
    cJSON_AddNumberToObject(o, "truncate_to", s->truncate_to);
    if (s->all_classes)
        cJSON_AddItemToObject(o, "all_classes",
                              cJSON_CreateStringArray((const char *const *)s->all_classes,
                                                      s->n_classes));
    else
        cJSON_AddNullToObject(o, "all_classes");
    cJSON_AddItemToObject(o, "provenance", str_or_null(s->provenance));
    cJSON *ts = cJSON_AddArrayToObject(o, "turns");
    for (int t = 0; t < s->n_turns; t++) {
        const kb_turn *tu = &s->turns[t];
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "user", tu->user ? tu->user : "");
        cJSON_AddItemToObject(j, "answer_prefix", str_or_null(tu->answer_prefix));
        cJSON_AddItemToObject(j, "answers", cJSON_CreateStringArray((const char *const *)tu->answers,
                                                                    tu->n_answers));
        cJSON_AddItemToObject(j, "gold", str_or_null(tu->gold));
        cJSON_AddNumberToObject(j, "max_new", tu->max_new);
        cJSON_AddStringToObject(j, "metric", tu->metric);
        cJSON_AddStringToObject(j, "metric2", tu->metric2);
        cJSON_AddItemToObject(j, "stop", str_or_null(tu->stop));
        cJSON_AddBoolToObject(j, "first_line", tu->first_line);
        cJSON_AddStringToObject(j, "kind", tu->kind);
        cJSON_AddItemToArray(ts, j);
    }
    return o;
}

int cmd_prompts(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"counter", required_argument, 0, 'c'},
        {"n-ctx", required_argument, 0, 'n'},   {"out", required_argument, 0, 'o'},
        {"seed", required_argument, 0, 's'},    {"haystack", required_argument, 0, 'H'},
        {"data-dir", required_argument, 0, 'd'}, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *model = NULL, *counter = "model", *out_path = NULL, *haystack = NULL, *haystack_from = NULL,
               *data_dir = NULL;
    long n_ctx = -1, seed = -1;
    optind = 1;
    opterr = 0;
    int c;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":m:o:h", opts, NULL)) != -1) {
        if (cli_once("prompts", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'm': model = optarg; break;
        case 'c': counter = optarg; break;
        case 'n':
            if (cli_parse_int("prompts", "n-ctx", optarg, 16, 1L << 24, &n_ctx)) return 2;
            break;
        case 'o': out_path = optarg; break;
        case 's':
            if (cli_parse_int("prompts", "seed", optarg, 0, 1L << 53, &seed)) return 2;
            break;
        case 'H': haystack = optarg; break;
        case 'd': data_dir = optarg; break;
        case 'h': usage(stdout); return 0;
        case ':':
            fprintf(stderr, "kvbench prompts: option '%s' needs a value\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "kvbench prompts: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "kvbench prompts: expected one CONFIG.json\n");
        usage(stderr);
        return 2;
    }
    if (strcmp(counter, "model") && strcmp(counter, "bytes4")) {
        fprintf(stderr, "kvbench prompts: --counter expects model or bytes4, got '%s'\n", counter);
        return 2;
    }
    const char *cfg_path = argv[optind];
    kb_err err = {0};
    if (out_path && check_out_path(out_path, 0, &err)) {
        fprintf(stderr, "kvbench prompts: --out %s\n", err.msg);
        return 2;
    }
    cJSON *root = NULL;
    int rc = json_load_file(cfg_path, &root, &err);
    if (rc) {
        fprintf(stderr, "kvbench prompts: %s\n", err.msg);
        return rc;
    }
    /* which objects are tasks */
    const cJSON *tasks = NULL;
    cJSON *single = NULL;
    unsigned long long cfg_seed = 42;
    long max_samples = 0; /* a sweep config's cap per task object, as the sweep applies it */
    if (cJSON_IsArray(root)) {
        tasks = root;
    } else if (cJSON_IsObject(root) && cJSON_GetObjectItemCaseSensitive(root, "tasks")) {
        tasks = cJSON_GetObjectItemCaseSensitive(root, "tasks");
        long v;
        if ((rc = json_get_int(root, cfg_path, "seed", 0, 0, 1L << 53, 42, &v, &err))) goto fail;
        cfg_seed = (unsigned long long)v;
        /* the same key and range as the sweep's (harness/config.c) */
        if ((rc = json_get_int(root, cfg_path, "max_samples", 0, 0, 1L << 30, 0, &max_samples, &err)))
            goto fail;
        const char *h = NULL, *d = NULL;
        if ((rc = json_get_path(root, cfg_path, "haystack", 0, NULL, &h, &err)) || /* as the sweep */
            (rc = json_get_path(root, cfg_path, "data_dir", 0, NULL, &d, &err)))
            goto fail;
        if (!haystack && h) haystack = h, haystack_from = "key 'haystack'";
        if (!data_dir) data_dir = d;
    } else if (cJSON_IsObject(root)) {
        single = cJSON_CreateArray();
        cJSON_AddItemReferenceToArray(single, root);
        tasks = single;
    }
    if (!cJSON_IsArray(tasks) || !cJSON_GetArraySize(tasks)) {
        rc = kb_fail(&err, KB_EINPUT, "%s: expected a sweep config with a non-empty 'tasks' array, "
                                      "a task object or an array of task objects", cfg_path);
        goto fail;
    }
    model_counter mc = {0};
    kb_dataset_env env;
    memset(&env, 0, sizeof env);
    env.seed = seed >= 0 ? (unsigned long long)seed : cfg_seed;
    env.haystack_dir = haystack;
    env.haystack_from = haystack_from; /* NULL: --haystack */
    env.data_dir = data_dir;
    env.configs_dir = "configs"; /* as the sweep: ./configs/prompts if there (ds_configs_dir) */
    if (!strcmp(counter, "model")) {
        const char *mp = cli_model_path(model);
        if ((rc = open_counter(mp, &mc, &err))) {
            kb_err_prefix(&err, "model %s (use --counter bytes4 to count without a model)", mp);
            close_counter(&mc);
            goto fail;
        }
        env.count_ctx = &mc.rend;
        env.count_tokens = render_count_tokens;
        env.n_ctx = n_ctx > 0 ? (int)n_ctx : mc.n_ctx;
    } else {
        env.count_tokens = count_bytes4;
        env.n_ctx = n_ctx > 0 ? (int)n_ctx : 8192;
    }
    kb_sample_list all = {0};
    rc = tasks_generate(tasks, cfg_path, &env, (int)max_samples, &all, &err);
    if (!rc) {
        kb_atomic_file af;
        FILE *f = stdout;
        if (out_path) {
            if ((rc = atomic_open(&af, out_path, &err))) goto done;
            f = af.f;
        }
        for (int k = 0; k < all.n; k++) {
            cJSON *j = sample_json(&all.v[k]);
            char *line = json_print(j, 0);
            fputs(line, f);
            fputc('\n', f);
            free(line);
            cJSON_Delete(j);
        }
        if (out_path) rc = atomic_commit(&af, &err); /* stdout: main's check (stdout_done) */
    }
done:
    sample_list_free(&all);
    close_counter(&mc);
fail:
    if (rc) fprintf(stderr, "kvbench prompts: %s\n", err.msg);
    cJSON_Delete(single);
    cJSON_Delete(root);
    return rc;
}
