/* cmd_info.c - kvbench info MODEL: print a GGUF file's header, every metadata
 * key and every tensor in the stable line format of docs/GGUF.md.
 *
 * Debugging aid (documented in docs/GGUF.md, not in --help): --dump-tensor
 * NAME [--rows A:B] prints the dequantised values of rows A..B-1 (rows of
 * ne[0] elements), one "row R v0 v1 ..." line each with %.9g, so tests can
 * compare our dequantisation with an independent reader. */
#include <ctype.h>
#include <getopt.h>
#include <sys/stat.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/engine/gguf.h"
#include "kernels/quant.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench info [options] MODEL.gguf\n"
            "\n"
            "Print a GGUF file's header, metadata (type and value; long strings and\n"
            "arrays shortened) and tensors (name, type, shape ne0xne1..., offset in\n"
            "the data section, bytes). The format is described in docs/GGUF.md.\n"
            "\n"
            "options:\n"
            "  -m, --model PATH   the GGUF file (instead of the positional MODEL)\n"
            "  -h, --help         this help\n"
            "\n"
            "exit status: 0 ok, 2 bad usage or malformed file (the reason on stderr)\n");
}

/* "A:B" -> [a, b) with 0 <= a < b; 0 ok. strtoull takes a sign and skips leading
 * space: both refused here, as the other number options refuse a leading space. */
static int parse_rows(const char *s, uint64_t *a, uint64_t *b) {
    char *end;
    if (s[0] == '-' || isspace((unsigned char)s[0])) return 2;
    unsigned long long x = strtoull(s, &end, 10);
    if (end == s || *end != ':') return 2;
    const char *t = end + 1;
    if (t[0] == '-' || isspace((unsigned char)t[0])) return 2;
    unsigned long long y = strtoull(t, &end, 10);
    if (end == t || *end || y <= x) return 2;
    *a = x;
    *b = y;
    return 0;
}

static int dump_tensor(const gguf_file *f, const char *name, uint64_t r0, uint64_t r1) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) {
        fprintf(stderr, "kvbench info: %s: no tensor named '%s'\n", f->path, name);
        return 2;
    }
    const kb_qtype *q = kb_qtype_info(t->type);
    if (!q->supported) {
        fprintf(stderr, "kvbench info: %s: tensor '%s' has type %s, which kvbench cannot "
                        "dequantise (expected F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K "
                        "or Q6_K)\n", f->path, name, q->name);
        return 2;
    }
    uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3], cols = t->ne[0];
    if (r1 > rows) {
        fprintf(stderr, "kvbench info: --rows %" PRIu64 ":%" PRIu64 " is past tensor '%s', which "
                        "has %" PRIu64 " rows\n", r0, r1, name, rows);
        return 2;
    }
    size_t rb = kb_row_bytes(t->type, (int64_t)cols);
    float *buf = KB_MALLOC((size_t)cols * sizeof *buf);
    for (uint64_t r = r0; r < r1; r++) {
        kb_dequant(t->type, (const uint8_t *)t->data + r * rb, buf, (int64_t)cols);
        printf("row %" PRIu64, r);
        for (uint64_t c = 0; c < cols; c++) printf(" %.9g", buf[c]);
        putchar('\n');
    }
    free(buf);
    return 0;
}

int cmd_info(int argc, char **argv) {
    enum { OPT_DUMP = 256, OPT_ROWS };
    static const struct option opts[] = {
        {"model", required_argument, NULL, 'm'},
        {"help", no_argument, NULL, 'h'},
        {"dump-tensor", required_argument, NULL, OPT_DUMP},
        {"rows", required_argument, NULL, OPT_ROWS},
        {NULL, 0, NULL, 0},
    };
    const char *model = NULL, *dump = NULL;
    uint64_t r0 = 0, r1 = 1;
    int c, rows_given = 0;
    optind = 1;
    opterr = 0;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":m:h", opts, NULL)) != -1) {
        if (cli_once("info", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'm': model = optarg; break;
        case 'h': usage(stdout); return 0;
        case OPT_DUMP: dump = optarg; break;
        case OPT_ROWS:
            if (parse_rows(optarg, &r0, &r1)) {
                fprintf(stderr, "kvbench info: --rows expects A:B with 0 <= A < B, got '%s'\n",
                        optarg);
                return 2;
            }
            rows_given = 1;
            break;
        case ':':
            fprintf(stderr, "kvbench info: option '%s' needs a value\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "kvbench info: unknown option '%s' (see kvbench info --help)\n",
                    argv[optind - 1]);
            return 2;
        }
    }
    if (optind < argc) {
        if (model || optind + 1 < argc) {
            fprintf(stderr, "kvbench info: expected one MODEL, got extra argument '%s'\n",
                    argv[model ? optind : optind + 1]);
            return 2;
        }
        model = argv[optind];
    }
    if (!model) {
        fprintf(stderr, "kvbench info: missing MODEL (usage: kvbench info MODEL.gguf)\n");
        return 2;
    }
    if (rows_given && !dump) { /* it would be dropped: the listing has no rows */
        fprintf(stderr, "kvbench info: --rows needs --dump-tensor NAME (the tensor whose rows to print)\n");
        return 2;
    }
    struct stat st;
    if (!strncmp(model, "synthetic:", 10) && stat(model, &st) != 0) {
        fprintf(stderr, "kvbench info: %s is a synthetic model, not a file: info reads GGUF files "
                        "(a synthetic model is built in memory by the commands that run one)\n", model);
        return 2;
    }
    gguf_file *f;
    kb_err err = {0};
    int rc = gguf_open(model, &f, &err);
    if (rc) {
        fprintf(stderr, "kvbench info: %s\n", err.msg);
        return rc;
    }
    if (dump) rc = dump_tensor(f, dump, r0, r1);
    else gguf_print(f, stdout);
    gguf_close(f);
    return rc; /* a failed write of stdout: main's check (stdout_done) */
}
