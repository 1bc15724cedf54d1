/* cmd_score.c - kvbench score: score predictions made by any system with one
 * of kvbench's metrics (harness/metrics.h), so that outputs of kvpress, the
 * RocketKV code or LongBench's pred.py are scored by the same code.
 *
 * Input: JSONL, one object per line with "pred" (string), "answers" (array of
 * strings, or one string) and, for classification, "all_classes" (array of
 * strings; null allowed otherwise). Other keys are ignored, so LongBench's
 * pred/<task>.jsonl files can be scored as they are.
 * Output (stdout): one score per input line, then
 *   "# mean=<mean> task_score=<round(100*sum/n, 2)> n=<lines>".
 * The whole file is read and checked before anything is printed, so a bad
 * line produces an error (file:line, exit 2) and no scores. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/json.h"
#include "harness/metrics.h"

typedef struct {
    char *pred;
    char **answers;
    int n_answers;
    char **classes;
    int n_classes;
} score_row;

typedef struct {
    score_row *rows;
    int n, cap;
    const kb_metric *metric;
} score_input;

static void row_free(score_row *r) {
    free(r->pred);
    for (int i = 0; i < r->n_answers; i++) free(r->answers[i]);
    free(r->answers);
    for (int i = 0; i < r->n_classes; i++) free(r->classes[i]);
    free(r->classes);
}

/* Copies a JSON array of strings (or one string when allow_string). */
static int string_list(const cJSON *v, const char *key, int allow_string, char ***out, int *n,
                       kb_err *err) {
    *out = NULL;
    *n = 0;
    if (allow_string && cJSON_IsString(v)) {
        *out = KB_MALLOC(sizeof **out);
        (*out)[0] = kb_strdup(v->valuestring);
        *n = 1;
        return 0;
    }
    if (!cJSON_IsArray(v))
        return kb_fail(err, KB_EINPUT, "key '%s': expected an array of strings%s", key,
                       allow_string ? " or a string" : "");
    int cnt = cJSON_GetArraySize(v), i = 0;
    char **arr = KB_CALLOC((size_t)cnt + 1, sizeof *arr);
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (!cJSON_IsString(c)) {
            for (int k = 0; k < i; k++) free(arr[k]);
            free(arr);
            return kb_fail(err, KB_EINPUT, "key '%s'[%d]: expected a string", key, i);
        }
        arr[i] = kb_strdup(c->valuestring);
    }
    *out = arr;
    *n = cnt;
    return 0;
}

static int read_line(const cJSON *obj, long lineno, void *ctx, kb_err *err) {
    (void)lineno;
    score_input *in = ctx;
    score_row r = {0};
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(obj, "pred");
    if (!p) return kb_fail(err, KB_EINPUT, "missing key 'pred'");
    if (!cJSON_IsString(p)) return kb_fail(err, KB_EINPUT, "key 'pred': expected a string");
    const cJSON *a = cJSON_GetObjectItemCaseSensitive(obj, "answers");
    if (!a) return kb_fail(err, KB_EINPUT, "missing key 'answers'");
    int rc = string_list(a, "answers", 1, &r.answers, &r.n_answers, err);
    if (rc) return rc;
    if (r.n_answers == 0) {
        row_free(&r);
        return kb_fail(err, KB_EINPUT, "key 'answers': expected at least one answer");
    }
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(obj, "all_classes");
    if (c && !cJSON_IsNull(c)) {
        rc = string_list(c, "all_classes", 0, &r.classes, &r.n_classes, err);
        if (rc) {
            row_free(&r);
            return rc;
        }
    }
    if (in->metric->needs_classes && !r.classes) {
        row_free(&r);
        return kb_fail(err, KB_EINPUT, "metric '%s' needs key 'all_classes' (array of strings)",
                       in->metric->name);
    }
    r.pred = kb_strdup(p->valuestring);
    if (in->n == in->cap) {
        in->cap = in->cap ? in->cap * 2 : 64;
        in->rows = KB_REALLOC(in->rows, (size_t)in->cap * sizeof *in->rows);
    }
    in->rows[in->n++] = r;
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench score --metric NAME [--first-line] FILE.jsonl\n"
            "       kvbench score --list\n\n"
            "Scores predictions with one of kvbench's metrics. Each input line is a JSON\n"
            "object {\"pred\": str, \"answers\": [str] (or str), \"all_classes\": [str]}\n"
            "(all_classes only for classification; other keys are ignored).\n"
            "Prints one score in [0, 1] per line, then\n"
            "  # mean=<mean> task_score=<round(100*sum/n, 2)> n=<count>\n\n"
            "  -m, --metric NAME   metric to use (see --list)\n"
            "      --first-line    score only the first line of each prediction, after\n"
            "                      leading newlines (LongBench trec, triviaqa, samsum)\n"
            "  -l, --list          list the metrics and exit\n"
            "  -h, --help          this help\n");
}

int cmd_score(int argc, char **argv) {
    static const struct option opts[] = {
        {"metric", required_argument, 0, 'm'}, {"first-line", no_argument, 0, 'f'},
        {"list", no_argument, 0, 'l'},         {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0},
    };
    const char *metric_name = NULL;
    int first_line = 0, list = 0;
    optind = 1;
    opterr = 0;
    int c;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, ":m:lh", opts, NULL)) != -1) {
        if (cli_once("score", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'm': metric_name = optarg; break;
        case 'f': first_line = 1; break;
        case 'l': list = 1; break;
        case 'h': usage(stdout); return 0;
        case ':':
            fprintf(stderr, "kvbench score: option '%s' needs a value\n", argv[optind - 1]);
            return 2;
        default:
            fprintf(stderr, "kvbench score: unknown option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (list) {
        for (int i = 0; i < metric_count(); i++)
            printf("%-26s %s\n", metric_at(i)->name, metric_at(i)->description);
        return 0;
    }
    if (!metric_name) {
        fprintf(stderr, "kvbench score: --metric NAME is required (kvbench score --list)\n");
        return 2;
    }
    const kb_metric *m = metric_find(metric_name);
    if (!m) {
        fprintf(stderr, "kvbench score: unknown metric '%s'; known:", metric_name);
        for (int i = 0; i < metric_count(); i++) fprintf(stderr, " %s", metric_at(i)->name);
        fprintf(stderr, "\n");
        return 2;
    }
    if (optind != argc - 1) {
        fprintf(stderr, "kvbench score: expected one input FILE.jsonl\n");
        usage(stderr);
        return 2;
    }
    const char *path = argv[optind];
    score_input in = {0};
    in.metric = m;
    kb_err err = {0};
    int rc = jsonl_foreach(path, read_line, &in, &err);
    if (!rc && in.n == 0) rc = kb_fail(&err, KB_EINPUT, "%s: no predictions (empty file)", path);
    if (!rc) {
        double sum = 0.0;
        for (int i = 0; i < in.n; i++) {
            score_row *r = &in.rows[i];
            char *pred = first_line ? metric_first_line(r->pred) : r->pred;
            double s = m->score(pred, (const char *const *)r->answers, r->n_answers,
                                (const char *const *)r->classes, r->n_classes);
            if (first_line) free(pred);
            sum += s;
            printf("%.12g\n", s);
        }
        printf("# mean=%.12g task_score=%.2f n=%d\n", sum / in.n, metric_task_score(sum, in.n),
               in.n);
    } else {
        fprintf(stderr, "kvbench score: %s\n", err.msg);
    }
    for (int i = 0; i < in.n; i++) row_free(&in.rows[i]);
    free(in.rows);
    return rc;
}
