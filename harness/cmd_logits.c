/* cmd_logits.c - kvbench logits: the engine's next-token logits for a token
 * sequence (teacher-forced, Full KV), written as .npy, to compare the engine
 * with another implementation (a numpy reference, llama.cpp) on identical
 * inputs. --path prefill runs the batched path (dequantised GEMM); --path
 * decode feeds the tokens one at a time through the decode path (quantised
 * mat-vec), which is what generation uses. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/atomic.h"
#include "harness/cli.h"
#include "harness/engine/model.h"
#include "harness/json.h"
#include "harness/npy.h"
#include "methods/prefill.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench logits [-m MODEL] (--tokens IDS | -p TEXT [--chat]) --out FILE.npy [options]\n"
            "  --tokens IDS       comma- or space-separated token ids\n"
            "  -p, --prompt TEXT  text, tokenised like `kvbench generate` (ids printed to stdout)\n"
            "  --positions LIST   positions whose logits to write (default: all)\n"
            "  --path P           prefill (batched, default) or decode (one token at a time)\n"
            "  --kv TYPE          KV cache type f16 (default), f32, bf16\n"
            "Writes FILE.npy: float32 [len(positions), n_vocab]; row i = logits after token\n"
            "positions[i] (the distribution of the next token).\n");
}

/* ids or positions (cli_parse_int_list) with the option in the message */
static int parse_ids(const char *s, int32_t **out, int *n, long lo, long hi, const char *opt) {
    char why[128];
    if (!cli_parse_int_list(s, lo, hi, out, n, why, sizeof why)) return 0;
    fprintf(stderr, "kvbench logits: %s: %s\n", opt, why);
    return 2;
}

int cmd_logits(int argc, char **argv) {
    static const struct option opts[] = {{"model", 1, 0, 'm'}, {"tokens", 1, 0, 't'},
                                         {"prompt", 1, 0, 'p'}, {"chat", 0, 0, 'c'},
                                         {"positions", 1, 0, 'P'}, {"path", 1, 0, 'a'},
                                         {"kv", 1, 0, 'k'},     {"out", 1, 0, 'o'},
                                         {"help", 0, 0, 'h'},   {0, 0, 0, 0}};
    const char *model = NULL, *tokens = NULL, *prompt = NULL, *positions = NULL, *out = NULL;
    int chat = 0, decode = 0, c;
    kb_dtype kv = KB_F16;
    optind = 1;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "m:p:o:h", opts, NULL)) != -1) {
        if (cli_once("logits", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'm': model = optarg; break;
        case 't': tokens = optarg; break;
        case 'p': prompt = optarg; break;
        case 'c': chat = 1; break;
        case 'P': positions = optarg; break;
        case 'a':
            if (!strcmp(optarg, "prefill")) decode = 0;
            else if (!strcmp(optarg, "decode")) decode = 1;
            else {
                fprintf(stderr, "kvbench logits: --path expects prefill or decode, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'k':
            if (kb_dtype_parse(optarg, &kv)) {
                fprintf(stderr, "kvbench logits: --kv expects f16, f32 or bf16, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc || !out || !tokens == !prompt) {
        fprintf(stderr, "kvbench logits: give --out and exactly one of --tokens or --prompt\n");
        usage(stderr);
        return 2;
    }
    if (chat && tokens) {
        fprintf(stderr, "kvbench logits: --chat applies to --prompt (--tokens are used as given)\n");
        return 2;
    }
    kb_err err = {0};
    if (prompt && text_check_arg(prompt, "-p", &err)) { /* UTF-8, as generate's */
        fprintf(stderr, "kvbench logits: %s\n", err.msg);
        return 2;
    }
    if (check_out_path(out, 0, &err)) {
        fprintf(stderr, "kvbench logits: --out %s\n", err.msg);
        return 2;
    }
    kb_model *m;
    int rc = model_load(cli_model_path(model), &m, &err);
    if (rc) {
        fprintf(stderr, "kvbench logits: %s\n", err.msg);
        return rc;
    }
    const kb_hparams *hp = &m->hp;
    int32_t *ids = NULL, *pos = NULL;
    int n = 0, np = 0;
    if (tokens) {
        rc = parse_ids(tokens, &ids, &n, 0, hp->n_vocab - 1, "--tokens");
    } else if (!m->tok) {
        fprintf(stderr, "kvbench logits: %s has no tokenizer: use --tokens\n", m->path);
        rc = 2;
    } else {
        char *text = chat ? chat_first_turn(tokenizer_chat_format(m->tok), NULL, prompt) : kb_strdup(prompt);
        rc = tokenizer_encode(m->tok, text, strlen(text), chat, 1, &ids, &n, &err);
        free(text);
        if (rc) fprintf(stderr, "kvbench logits: %s\n", err.msg);
    }
    if (!rc && (n < 1 || n > hp->n_ctx_train)) {
        fprintf(stderr, "kvbench logits: %d tokens: expected 1 to %d (the model context)\n", n,
                hp->n_ctx_train);
        rc = 2;
    }
    if (!rc && model_check_memory(m, n, 1, kv, &err)) {
        fprintf(stderr, "kvbench logits: %s\n", err.msg);
        rc = 2;
    }
    if (!rc && positions && !(rc = parse_ids(positions, &pos, &np, 0, n - 1, "--positions")) && !np) {
        fprintf(stderr, "kvbench logits: --positions expects at least one position in [0, %d]\n", n - 1);
        rc = 2;
    }
    if (!rc && !positions) {
        np = n;
        pos = KB_MALLOC((size_t)n * sizeof *pos);
        for (int i = 0; i < n; i++) pos[i] = i;
    }
    if (rc) {
        free(ids);
        free(pos);
        model_free(m);
        return rc;
    }
    /* -p's ids, once every check has passed (a refused prompt prints nothing on stdout) */
    for (int i = 0; !tokens && i < n; i++) printf("%d%c", ids[i], i + 1 < n ? ' ' : '\n');
    size_t V = (size_t)hp->n_vocab;
    float *sel = KB_MALLOC((size_t)np * V * sizeof(float));
    kb_forward *f = forward_new(m, 256);
    kb_prefill pf;
    prefill_init(&pf, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, kv, 0, n);
    kb_attn_backend be = prefill_backend(&pf);
    if (decode) {
        for (int i = 0; i < n; i++) {
            forward_decode(f, ids[i], i, &be);
            for (int k = 0; k < np; k++)
                if (pos[k] == i) memcpy(sel + (size_t)k * V, f->logits, V * sizeof(float));
        }
    } else {
        /* in chunks, keeping only the wanted rows */
        int chunk = 256;
        float *all = KB_MALLOC((size_t)chunk * V * sizeof(float));
        for (int b0 = 0; b0 < n && !rc; b0 += chunk) {
            int nb = KB_MIN(chunk, n - b0);
            rc = forward_prefill(f, ids + b0, nb, b0, &be, all, 0, &err);
            for (int k = 0; !rc && k < np; k++)
                if (pos[k] >= b0 && pos[k] < b0 + nb)
                    memcpy(sel + (size_t)k * V, all + (size_t)(pos[k] - b0) * V, V * sizeof(float));
        }
        free(all);
    }
    if (!rc) {
        long shape[2] = {np, (long)V};
        rc = npy_write(out, sel, 'f', 2, shape, &err);
    }
    if (rc) fprintf(stderr, "kvbench logits: %s\n", err.msg);
    prefill_free(&pf);
    forward_free(f);
    free(sel);
    free(ids);
    free(pos);
    model_free(m);
    return rc;
}
