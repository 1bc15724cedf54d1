/* cmd_tokenize.c - kvbench tokenize: text -> token ids (or --decode ids ->
 * text) with a model's tokenizer. Needs only the tokenizer metadata of the
 * GGUF file (tensors are not read), so tests can use tokenizer-only files.
 *
 * Output is built in memory and printed only when every input succeeded, so
 * a bad input line gives an error and no partial output. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/engine/gguf.h"
#include "harness/engine/tokenizer.h"
#include "harness/json.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench tokenize [options] (-p TEXT | --jsonl FILE)\n"
            "       kvbench tokenize --decode [options] (-p \"ID ID ...\" | --jsonl FILE)\n"
            "       kvbench tokenize --chat FORMAT [--system TEXT] [--print-text] (-p USER | --jsonl FILE)\n"
            "\n"
            "Encode: print the token ids of each input, space-separated, one line per input.\n"
            "Decode: print the text of each id sequence; with -p the raw text and a newline,\n"
            "with --jsonl one JSON string per line.\n"
            "Chat: render a conversation in a chat format (auto = the model's, or raw, chatml,\n"
            "chatml-nosys, llama3, mistral, vicuna) and print its ids (first turn encoded with\n"
            "BOS as the model wants it, later turns as continuations) or, with --print-text,\n"
            "the text as a JSON string. JSONL lines: {\"system\": TEXT or null, \"messages\":\n"
            "[USER, ASSISTANT, USER, ...]} (an odd number: the last one is the user's).\n"
            "\n"
            "options:\n"
            "  -m, --model PATH     GGUF file with tokenizer metadata (default: $KVBENCH_MODEL or\n"
            "                       models/SmolLM2-135M-Instruct.Q4_1.gguf)\n"
            "  -p, --prompt TEXT    one input given on the command line\n"
            "      --jsonl FILE     one input per line: encode: a JSON string or {\"text\": ...};\n"
            "                       decode: a JSON array of ids or {\"ids\": [...]}; blank lines\n"
            "                       are skipped\n"
            "      --no-special     encode special-token text (<|im_end|>...) as plain text (not\n"
            "                       with --chat or --decode)\n"
            "      --bos            add BOS (and EOS) the way the model asks for raw prompts (not\n"
            "                       with --chat or --decode)\n"
            "      --decode         ids -> text\n"
            "      --render-special with --decode: write control tokens' text\n"
            "      --chat FORMAT    conversation mode (see above)\n"
            "      --system TEXT    with --chat -p: the system message (default: the format's)\n"
            "      --print-text     with --chat: print the rendered text, not ids\n"
            "      --time           print the time and the bytes and tokens done to stderr\n"
            "  -h, --help           this help\n"
            "\n"
            "exit status: 0 ok, 2 bad usage or bad input (FILE:LINE: reason on stderr)\n");
}

typedef struct outbuf {
    char *s;
    size_t n, cap;
} outbuf;

static void ob_put(outbuf *o, const char *s, size_t len) {
    if (o->n + len + 1 > o->cap) {
        o->cap = (o->n + len + 1) * 2;
        o->s = KB_REALLOC(o->s, o->cap);
    }
    memcpy(o->s + o->n, s, len);
    o->n += len;
}

static void ob_ids(outbuf *o, const int32_t *ids, int n) {
    char tmp[16];
    for (int i = 0; i < n; i++) {
        int k = snprintf(tmp, sizeof tmp, i ? " %d" : "%d", ids[i]);
        ob_put(o, tmp, (size_t)k);
    }
    ob_put(o, "\n", 1);
}

/* A JSON string literal; bytes >= 0x80 are copied (valid UTF-8 stays valid,
 * partial sequences from byte tokens stay raw). */
static void ob_json_str(outbuf *o, const char *s) {
    ob_put(o, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        char tmp[8];
        if (c == '"' || c == '\\') {
            tmp[0] = '\\', tmp[1] = (char)c;
            ob_put(o, tmp, 2);
        } else if (c < 0x20) {
            snprintf(tmp, sizeof tmp, "\\u%04x", c);
            ob_put(o, tmp, 6);
        } else {
            ob_put(o, (const char *)&c, 1);
        }
    }
    ob_put(o, "\"\n", 2);
}

static int decode_json_ids(const cJSON *j, int n_vocab, int32_t **ids, int *n, char *why, size_t why_n) {
    const cJSON *arr = j;
    if (cJSON_IsObject(j)) arr = cJSON_GetObjectItemCaseSensitive(j, "ids");
    if (!cJSON_IsArray(arr)) {
        snprintf(why, why_n, "expected a JSON array of token ids or an object with an \"ids\" array");
        return 2;
    }
    int k = cJSON_GetArraySize(arr), i = 0;
    int32_t *v = KB_MALLOC(((size_t)k + 1) * sizeof *v);
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        double d = cJSON_IsNumber(e) ? e->valuedouble : -1;
        if (!cJSON_IsNumber(e) || !(d >= 0 && d < n_vocab) || d != floor(d)) { /* range before any cast */
            snprintf(why, why_n, "ids[%d]: expected an integer token id in [0, %d)", i, n_vocab);
            free(v);
            return 2;
        }
        v[i++] = (int32_t)d;
    }
    *ids = v;
    *n = k;
    return 0;
}

/* Renders a conversation (msgs: user, assistant, user, ...; odd count) as
 * chat_first_turn + chat_next_turn...; appends the text (print_text) or the
 * ids to out. The rendered text's bytes (those encoded, or printed) are
 * added to *n_bytes for --time. */
static void chat_render(const kb_tokenizer *tok, kb_chat_format fmt, const char *system,
                        const char *const *msgs, int n, int print_text, outbuf *out, long *n_tokens,
                        long *n_bytes) {
    char *txt = NULL;
    size_t txt_n = 0;
    int32_t *all = NULL;
    int all_n = 0;
    kb_err err = {0};
    for (int k = 0; k < n; k += 2) {
        char *seg = k == 0 ? chat_first_turn(fmt, system, msgs[0]) : chat_next_turn(fmt, msgs[k - 1], msgs[k]);
        size_t len = strlen(seg);
        *n_bytes += (long)len;
        if (print_text) {
            txt = KB_REALLOC(txt, txt_n + len + 1);
            memcpy(txt + txt_n, seg, len + 1);
            txt_n += len;
        } else {
            int32_t *ids;
            int m;
            if (k == 0)
                tokenizer_encode(tok, seg, len, 1, 1, &ids, &m, &err);
            else
                tokenizer_encode_cont(tok, seg, len, &ids, &m, &err);
            all = KB_REALLOC(all, ((size_t)all_n + (size_t)m + 1) * sizeof *all);
            memcpy(all + all_n, ids, (size_t)m * sizeof *ids);
            all_n += m;
            free(ids);
        }
        free(seg);
    }
    if (print_text)
        ob_json_str(out, txt ? txt : "");
    else
        ob_ids(out, all, all_n);
    *n_tokens += all_n;
    free(txt);
    free(all);
}

/* {"system": TEXT|null, "messages": [USER, ASSISTANT, ..., USER]} */
static int chat_line(const cJSON *j, const char **system, const char ***msgs, int *n, char *why,
                     size_t why_n) {
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(j, "system");
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(j, "messages");
    if (!cJSON_IsObject(j) || !cJSON_IsArray(m) || cJSON_GetArraySize(m) % 2 == 0 ||
        (sys && !cJSON_IsString(sys) && !cJSON_IsNull(sys))) {
        snprintf(why, why_n, "expected {\"system\": TEXT or null, \"messages\": [USER, ASSISTANT, "
                             "..., USER]} with an odd number of messages");
        return 2;
    }
    *system = cJSON_IsString(sys) ? sys->valuestring : NULL;
    int k = cJSON_GetArraySize(m), i = 0;
    const char **v = KB_MALLOC((size_t)k * sizeof *v);
    const cJSON *e;
    cJSON_ArrayForEach(e, m) {
        if (!cJSON_IsString(e)) {
            snprintf(why, why_n, "messages[%d]: expected a string", i);
            free(v);
            return 2;
        }
        v[i++] = e->valuestring;
    }
    *msgs = v;
    *n = k;
    return 0;
}

/* One --jsonl line (jsonl_foreach_value has refused what is not JSON, is
 * not UTF-8 or holds a NUL): its output is appended to out. */
typedef struct tok_jsonl {
    const kb_tokenizer *tok;
    kb_chat_format fmt;
    int chat, decode, print_text, render, parse_special, add_bos;
    outbuf *out;
    double t_work;
    long n_tokens, n_bytes;
} tok_jsonl;

static int tok_line(const cJSON *j, long lineno, void *ctx, kb_err *err) {
    (void)lineno;
    tok_jsonl *c = ctx;
    char why[512];
    int32_t *ids = NULL;
    int n = 0;
    double t0;
    if (c->chat) {
        const char *sys = NULL, **msgs = NULL;
        int nm = 0;
        if (chat_line(j, &sys, &msgs, &nm, why, sizeof why)) return kb_fail(err, KB_EINPUT, "%s", why);
        t0 = kb_now();
        chat_render(c->tok, c->fmt, sys, msgs, nm, c->print_text, c->out, &c->n_tokens, &c->n_bytes);
        c->t_work += kb_now() - t0;
        free(msgs);
    } else if (c->decode) {
        if (decode_json_ids(j, tokenizer_n_vocab(c->tok), &ids, &n, why, sizeof why))
            return kb_fail(err, KB_EINPUT, "%s", why);
        t0 = kb_now();
        char *s = tokenizer_decode(c->tok, ids, n, c->render);
        c->t_work += kb_now() - t0;
        c->n_bytes += (long)strlen(s);
        ob_json_str(c->out, s);
        free(s);
    } else {
        const cJSON *txt = cJSON_IsObject(j) ? cJSON_GetObjectItemCaseSensitive(j, "text") : j;
        if (!cJSON_IsString(txt))
            return kb_fail(err, KB_EINPUT, "expected a JSON string or an object with a \"text\" string");
        size_t len = strlen(txt->valuestring);
        t0 = kb_now();
        tokenizer_encode(c->tok, txt->valuestring, len, c->parse_special, c->add_bos, &ids, &n, err);
        c->t_work += kb_now() - t0;
        c->n_bytes += (long)len;
        ob_ids(c->out, ids, n);
    }
    c->n_tokens += n;
    free(ids);
    return 0;
}

int cmd_tokenize(int argc, char **argv) {
    enum { OPT_JSONL = 256, OPT_NOSPECIAL, OPT_BOS, OPT_DECODE, OPT_RENDER, OPT_TIME, OPT_CHAT,
           OPT_SYSTEM, OPT_PRINT_TEXT };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"prompt", required_argument, NULL, 'p'},
        {"jsonl", required_argument, NULL, OPT_JSONL},
        {"no-special", no_argument, NULL, OPT_NOSPECIAL},
        {"bos", no_argument, NULL, OPT_BOS},
        {"decode", no_argument, NULL, OPT_DECODE},
        {"render-special", no_argument, NULL, OPT_RENDER},
        {"time", no_argument, NULL, OPT_TIME},
        {"chat", required_argument, NULL, OPT_CHAT},
        {"system", required_argument, NULL, OPT_SYSTEM},
        {"print-text", no_argument, NULL, OPT_PRINT_TEXT},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *model = NULL, *prompt = NULL, *jsonl = NULL, *chat = NULL, *system = NULL;
    int parse_special = 1, add_bos = 0, decode = 0, render = 0, timing = 0, print_text = 0, c;
    optind = 1;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "m:p:h", opts, NULL)) != -1) {
        if (cli_once("tokenize", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'm': model = optarg; break;
        case 'p': prompt = optarg; break;
        case OPT_JSONL: jsonl = optarg; break;
        case OPT_NOSPECIAL: parse_special = 0; break;
        case OPT_BOS: add_bos = 1; break;
        case OPT_DECODE: decode = 1; break;
        case OPT_RENDER: render = 1; break;
        case OPT_TIME: timing = 1; break;
        case OPT_CHAT: chat = optarg; break;
        case OPT_SYSTEM: system = optarg; break;
        case OPT_PRINT_TEXT: print_text = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvbench tokenize: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!!prompt == !!jsonl) {
        fprintf(stderr, "kvbench tokenize: give exactly one of -p TEXT or --jsonl FILE\n");
        return 2;
    }

    kb_chat_format fmt = KB_CHAT_RAW;
    if (chat && strcmp(chat, "auto") && chat_format_parse(chat, &fmt)) {
        fprintf(stderr, "kvbench tokenize: --chat expects auto, raw, chatml, chatml-nosys, llama3, "
                        "mistral or vicuna, got '%s'\n", chat);
        return 2;
    }
    if (chat && decode) {
        fprintf(stderr, "kvbench tokenize: --chat and --decode cannot be combined\n");
        return 2;
    }
    if ((system || print_text) && !chat) {
        fprintf(stderr, "kvbench tokenize: --system and --print-text need --chat\n");
        return 2;
    }
    /* options that cannot act in the mode given are refused, not dropped: a
     * chat turn is encoded as the model wants it (special tokens, BOS:
     * docs/TOKENIZER.md), a --jsonl chat line gives its own system message,
     * decoding takes ids (neither BOS nor special-token parsing applies) and
     * only decoding renders control tokens */
    const char *enc_opt = !parse_special ? "--no-special" : add_bos ? "--bos" : NULL;
    if (enc_opt && chat) {
        fprintf(stderr, "kvbench tokenize: %s cannot be combined with --chat (a chat turn is encoded with "
                        "special tokens and BOS as the model's format wants them)\n", enc_opt);
        return 2;
    }
    if (enc_opt && decode) {
        fprintf(stderr, "kvbench tokenize: %s applies to encoding, not to --decode\n", enc_opt);
        return 2;
    }
    if (system && jsonl) {
        fprintf(stderr, "kvbench tokenize: --system applies to --chat -p, not to --jsonl (each line gives its "
                        "own \"system\")\n");
        return 2;
    }
    if (render && !decode) {
        fprintf(stderr, "kvbench tokenize: --render-special needs --decode\n");
        return 2;
    }

    kb_err err = {0};
    gguf_file *f = NULL;
    kb_tokenizer *tok = NULL;
    const char *path = cli_model_path(model);
    if (gguf_open(path, &f, &err) || tokenizer_from_gguf(f, &tok, &err)) {
        fprintf(stderr, "kvbench tokenize: %s\n", err.msg);
        gguf_close(f);
        return err.code ? err.code : 2;
    }
    if (chat && !strcmp(chat, "auto")) fmt = tokenizer_chat_format(tok);

    outbuf out = {0};
    int rc = 0;
    double t_work = 0;
    long n_tokens = 0, n_bytes = 0;
    char why[512];
    if (prompt) {
        int32_t *ids = NULL;
        int n = 0;
        if (chat) {
            double t0 = kb_now();
            chat_render(tok, fmt, system, &prompt, 1, print_text, &out, &n_tokens, &n_bytes);
            t_work += kb_now() - t0;
        } else if (decode) {
            if (cli_parse_int_list(prompt, 0, tokenizer_n_vocab(tok) - 1, &ids, &n, why, sizeof why)) {
                fprintf(stderr, "kvbench tokenize: -p: %s\n", why);
                rc = 2;
            } else {
                double t0 = kb_now();
                char *s = tokenizer_decode(tok, ids, n, render);
                t_work += kb_now() - t0;
                n_bytes += (long)strlen(s);
                ob_put(&out, s, strlen(s));
                ob_put(&out, "\n", 1);
                free(s);
            }
        } else {
            double t0 = kb_now();
            tokenizer_encode(tok, prompt, strlen(prompt), parse_special, add_bos, &ids, &n, &err);
            t_work += kb_now() - t0;
            n_bytes += (long)strlen(prompt);
            ob_ids(&out, ids, n);
        }
        n_tokens += n;
        free(ids);
    } else {
        tok_jsonl c = {tok, fmt, chat != NULL, decode, print_text, render, parse_special, add_bos, &out,
                       0, 0, 0};
        if (jsonl_foreach_value(jsonl, tok_line, &c, &err)) {
            fprintf(stderr, "kvbench tokenize: %s\n", err.msg);
            rc = 2;
        }
        t_work += c.t_work;
        n_tokens += c.n_tokens;
        n_bytes += c.n_bytes;
    }
    if (!rc) {
        fwrite(out.s ? out.s : "", 1, out.n, stdout);
        if (timing)
            fprintf(stderr, "kvbench tokenize: %s %ld bytes, %ld tokens in %.3f ms\n",
                    decode ? "decoded" : print_text ? "rendered" : "encoded", n_bytes, n_tokens, t_work * 1e3);
    }
    free(out.s);
    tokenizer_free(tok);
    gguf_close(f);
    return rc;
}
