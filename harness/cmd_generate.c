/* cmd_generate.c - kvbench generate: one prompt, greedy decoding streamed to
 * stdout, through any method (Full KV by default). Same path as a sweep cell:
 * exact prefill of prompt[:-1], method built from it, the last prompt token
 * and every generated token decoded through the method. */
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/atomic.h"
#include "harness/cli.h"
#include "harness/engine/model.h"
#include "harness/json.h"
#include "harness/runinfo.h"
#include "methods/methodset.h"
#include "methods/params.h"
#include "methods/prefill.h"
#include "harness/wrapbe.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench generate [-m MODEL] (-p TEXT | -f FILE) [options]\n"
            "  -m, --model PATH     GGUF model (default: $KVBENCH_MODEL or the default model)\n"
            "  -p, --prompt TEXT    the prompt\n"
            "  -f, --file FILE      read the prompt from FILE (UTF-8 text)\n"
            "      --chat           wrap the prompt in the model's chat format\n"
            "      --system TEXT    system message (needs --chat)\n"
            "  -n, --max-new N      tokens to generate at most (default 256)\n"
            "      --method NAME    KV-cache method (default full; see docs/METHODS.md)\n"
            "      --budget B       the method's token budget\n"
            "      --set KEY=VALUE  a method parameter (JSON value), repeatable\n"
            "      --kv TYPE        KV cache type: f16 (default), f32, bf16\n"
            "      --threads N      threads (default: all cores)\n"
            "      --stats          print timing and memory to stderr\n"
            "      --dump-trace L   write layer L's Q/K/V of this run as replay traces\n"
            "      --trace-dir DIR  where (needs --dump-trace; default trace_L<layer>/; see kvbench replay)\n");
}

/* Builds {"method": M, "budget": B, k: v...} and parses it like a sweep config entry. */
static int params_from_cli(const char *method, long budget, char **sets, int nsets,
                           kb_method_params *p, kb_err *err) {
    int rc = cli_check_repeated_keys("--set", (const char *const *)sets, nsets, err);
    if (rc) return rc;
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "method", method);
    if (budget >= 0) cJSON_AddNumberToObject(o, "budget", (double)budget);
    for (int i = 0; i < nsets && !rc; i++) {
        char *eq = strchr(sets[i], '=');
        if (!eq || eq == sets[i]) {
            rc = kb_fail(err, KB_EINPUT, "--set expects KEY=VALUE, got '%s'", sets[i]);
            break;
        }
        if ((rc = cli_check_param_key("--set", sets[i], err))) break;
        cJSON *v = json_cli_value(eq + 1, "--set", sets[i], err);
        if (!v) {
            rc = KB_EINPUT;
            break;
        }
        *eq = 0;
        cJSON_DeleteItemFromObjectCaseSensitive(o, sets[i]);
        cJSON_AddItemToObject(o, sets[i], v);
        *eq = '=';
    }
    if (!rc) rc = method_params_parse(o, "--method/--budget/--set", p, err);
    cJSON_Delete(o);
    return rc;
}

int cmd_generate(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", 1, 0, 'm'},  {"prompt", 1, 0, 'p'}, {"file", 1, 0, 'f'},   {"chat", 0, 0, 'c'},
        {"system", 1, 0, 'y'}, {"max-new", 1, 0, 'n'}, {"method", 1, 0, 'M'}, {"budget", 1, 0, 'b'},
        {"set", 1, 0, 'S'},    {"kv", 1, 0, 'k'},     {"threads", 1, 0, 'j'}, {"stats", 0, 0, 's'},
        {"dump-trace", 1, 0, 'd'}, {"trace-dir", 1, 0, 'D'},
        {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    const char *model = NULL, *prompt = NULL, *file = NULL, *system = NULL, *method = "full";
    int chat = 0, stats = 0, c;
    long max_new = 256, budget = -1, threads = 0, trace_layer = -1;
    const char *trace_dir = NULL;
    kb_dtype kv = KB_F16;
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int nsets = 0;
    optind = 1;
#define BAD()            \
    do {                 \
        free(sets);      \
        return 2;        \
    } while (0)
    static const char *const repeatable[] = {"set", NULL};
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "m:p:f:n:h", opts, NULL)) != -1) {
        if (cli_once("generate", c, opts, repeatable, &seen)) BAD();
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': prompt = optarg; break;
        case 'f': file = optarg; break;
        case 'c': chat = 1; break;
        case 'y': system = optarg; break;
        case 'n':
            if (cli_parse_int("generate", "max-new", optarg, 1, 1 << 20, &max_new)) BAD();
            break;
        case 'M': method = optarg; break;
        case 'b':
            if (cli_parse_int("generate", "budget", optarg, 0, 1 << 30, &budget)) BAD();
            break;
        case 'S': sets[nsets++] = optarg; break;
        case 'k':
            if (kb_dtype_parse(optarg, &kv)) {
                fprintf(stderr, "kvbench generate: --kv expects f16, f32 or bf16, got '%s'\n", optarg);
                BAD();
            }
            break;
        case 'j':
            if (cli_parse_int("generate", "threads", optarg, 1, 1024, &threads)) BAD();
            break;
        case 's': stats = 1; break;
        case 'd':
            if (cli_parse_int("generate", "dump-trace", optarg, 0, 4096, &trace_layer)) BAD();
            break;
        case 'D': trace_dir = optarg; break;
        case 'h': usage(stdout); free(sets); return 0;
        default: usage(stderr); BAD();
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvbench generate: unexpected argument '%s'\n", argv[optind]);
        BAD();
    }
    if (!prompt == !file) {
        fprintf(stderr, "kvbench generate: give the prompt with exactly one of -p TEXT or -f FILE\n");
        BAD();
    }
    /* options that would be dropped: refused (the system message goes only
     * into a chat format; a trace directory only holds a --dump-trace) */
    if (system && !chat) {
        fprintf(stderr, "kvbench generate: --system needs --chat (a system message goes into the chat format)\n");
        BAD();
    }
    if (trace_dir && trace_layer < 0) {
        fprintf(stderr, "kvbench generate: --trace-dir needs --dump-trace LAYER (the layer to trace)\n");
        BAD();
    }
    {
        kb_err e = {0}; /* UTF-8, as -f FILE must be */
        if ((prompt && text_check_arg(prompt, "-p", &e)) || (system && text_check_arg(system, "--system", &e))) {
            fprintf(stderr, "kvbench generate: %s\n", e.msg);
            BAD();
        }
    }
    char dir[1024]; /* the trace's directory: check_out_path allows KB_DIR_MAX bytes */
    snprintf(dir, sizeof dir, "trace_L%ld", trace_layer);
    if (trace_layer >= 0) {
        kb_err e = {0};
        if (check_out_path(trace_dir ? trace_dir : dir, 1, &e)) {
            fprintf(stderr, "kvbench generate: --trace-dir %s\n", e.msg);
            BAD();
        }
        if (trace_dir) snprintf(dir, sizeof dir, "%s", trace_dir);
    }
    if (threads) omp_set_num_threads((int)threads);
    kb_err err = {0};
    char *text = NULL;
    int rc = 0;
    size_t text_len = 0;
    if (file) rc = file_read_text(file, &text, &text_len, &err);
    if (file && rc) {
        fprintf(stderr, "kvbench generate: %s\n", err.msg);
        free(text);
        free(sets);
        return rc;
    }
    kb_method_params mp;
    if ((rc = params_from_cli(method, budget, sets, nsets, &mp, &err))) {
        fprintf(stderr, "kvbench generate: %s\n", err.msg);
        free(text);
        free(sets);
        return rc;
    }
    free(sets);
    kb_model *m = NULL;
    if ((rc = model_load(cli_model_path(model), &m, &err))) {
        fprintf(stderr, "kvbench generate: %s\n", err.msg);
        free(text);
        return rc;
    }
    if (!m->tok) {
        fprintf(stderr, "kvbench generate: %s has no tokenizer (synthetic models are for "
                "`kvbench bench` only)\n", m->path);
        model_free(m);
        free(text);
        return 2;
    }
    const char *user = file ? text : prompt;
    char *rendered = chat ? chat_first_turn(tokenizer_chat_format(m->tok), system, user) : kb_strdup(user);
    int32_t *ids = NULL;
    int n = 0;
    rc = tokenizer_encode(m->tok, rendered, strlen(rendered), chat, 1, &ids, &n, &err);
    free(rendered);
    free(text);
    const kb_hparams *hp = &m->hp;
    if (!rc && n < 1) rc = kb_fail(&err, KB_EINPUT, "the prompt is empty");
    if (!rc && trace_layer >= hp->n_layer)
        rc = kb_fail(&err, KB_EINPUT, "--dump-trace %ld: the model has layers 0..%d", trace_layer,
                     hp->n_layer - 1);
    /* the method's parameters against the model before the prefill (seconds
     * for a long prompt); methodset_build checks them again */
    if (!rc && methodset_check_model(&mp, hp->n_layer, hp->head_dim, &err)) rc = kb_err_prefix(&err, "%s", mp.label);
    if (!rc && n + max_new > hp->n_ctx_train)
        rc = kb_fail(&err, KB_EINPUT, "prompt (%d tokens) + --max-new %ld exceeds the model context %d",
                     n, max_new, hp->n_ctx_train);
    if (!rc) rc = model_check_memory(m, n + max_new, 2, kv, &err);
    if (rc) {
        fprintf(stderr, "kvbench generate: %s\n", err.msg);
        free(ids);
        model_free(m);
        return rc;
    }
    kb_forward *f = forward_new(m, 256);
    kb_prefill pf;
    int W = KB_MAX(128, mp.window);
    prefill_init(&pf, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, kv, W, n + (int)max_new);
    kb_attn_backend pbe = prefill_backend(&pf);
    double t0 = kb_now();
    rc = forward_prefill(f, ids, n - 1, 0, &pbe, NULL, 0, &err);
    double t_prefill = kb_now() - t0;
    kb_method_ctx ctx = method_ctx_make(hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, kv,
                                        hp->n_ctx_train, n, (int)max_new);
    kb_methodset *ms = NULL;
    if (!rc) rc = methodset_build(&mp, &ctx, &pf, &ms, &err);
    if (rc) {
        fprintf(stderr, "kvbench generate: %s\n", err.msg);
    } else {
        kb_attn_backend be = methodset_backend(ms);
        kb_trace tr;
        kb_trace_be tw;
        if (trace_layer >= 0) {
            trace_init(&tr, ctx.Hq, ctx.Hkv, ctx.D, ctx.N_new, ctx.S, (int)trace_layer);
            kb_prefill_view pv = prefill_view(&pf, (int)trace_layer);
            rc = trace_set_prefill(&tr, &pv, KB_MIN(W, pv.Wq), &err);
            char sha[65];
            model_sha256_text(cli_model_path(model), sha);
            trace_set_origin(&tr, m->name, sha, hp->n_layer, NULL, NULL, method_params_to_json(&mp)); /* the method it decodes with */
            be = trace_be_wrap(&tw, be, &tr);
        }
        int32_t tok = ids[n - 1];
        int steps = 0, produced = 0;
        double t1 = kb_now();
        f->t_attn = 0;
        for (int i = 0; i < max_new; i++) {
            forward_decode(f, tok, n - 1 + i, &be);
            steps++;
            int32_t next = logits_argmax(f->logits, hp->n_vocab);
            if (tokenizer_is_eog(m->tok, next)) break;
            int len;
            const char *piece = tokenizer_piece_ref(m->tok, next, 0, &len);
            if (len) fwrite(piece, 1, (size_t)len, stdout);
            fflush(stdout);
            produced++;
            tok = next;
        }
        double t_dec = kb_now() - t1;
        putchar('\n');
        if (trace_layer >= 0) {
            if (!rc) rc = trace_write(dir, &tr, &err);
            if (rc) fprintf(stderr, "kvbench generate: %s\n", err.msg);
            else fprintf(stderr, "kvbench generate: trace of layer %ld in %s/\n", trace_layer, dir);
            trace_free(&tr);
        }
        if (stats) {
            kb_cell_account a;
            methodset_account(ms, &a);
            fprintf(stderr,
                    "prompt %d tokens, prefill %.1f ms (%.1f tok/s); %d tokens generated, decode "
                    "%.2f ms/token (attention %.2f); method %s: %.0f tokens resident per KV head, "
                    "%.1f MiB resident, %.0f token-eq read per step\n",
                    n, t_prefill * 1e3, (n - 1) / (t_prefill > 0 ? t_prefill : 1), produced,
                    t_dec * 1e3 / steps, f->t_attn * 1e3 / steps, mp.label, a.resident_tokens,
                    a.resident_bytes / 1048576.0, a.read_tokeq);
        }
    }
    methodset_free(ms);
    prefill_free(&pf);
    forward_free(f);
    free(ids);
    model_free(m);
    return rc;
}
