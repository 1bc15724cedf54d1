/* test_summary.c - summary.csv from a samples.csv written by hand: the rows
 * of a task whose turns ask different things (a mixed SCBench task) are also
 * summarised per kind, and the ALL row of a cell that lacks a task (an
 * interrupted run) has no score. Every expected value is worked out below
 * from the rows, not taken from the code. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "harness/driver.h"
#include "harness/table.h"

typedef struct {
    const char *task, *sample, *turn, *kind, *label, *budget, *score, *dec;
    const char *method; /* NULL: the label */
} row;

static void write_samples(const char *path, const row *rs, int n) {
    kb_table t;
    table_init(&t, kb_samples_cols, kb_samples_ncols);
    const char **v = calloc((size_t)kb_samples_ncols, sizeof *v);
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < kb_samples_ncols; c++) {
            const char *k = kb_samples_cols[c];
            v[c] = !strcmp(k, "task")                   ? rs[i].task
                   : !strcmp(k, "sample")               ? rs[i].sample
                   : !strcmp(k, "turn")                 ? rs[i].turn
                   : !strcmp(k, "kind")                 ? rs[i].kind
                   : !strcmp(k, "method")               ? (rs[i].method ? rs[i].method : rs[i].label)
                   : !strcmp(k, "label")                ? rs[i].label
                   : !strcmp(k, "params")               ? "{}"
                   : !strcmp(k, "budget")               ? rs[i].budget
                   : !strcmp(k, "score")                ? rs[i].score
                   : !strcmp(k, "decode_ms_per_token")  ? rs[i].dec
                   : !strcmp(k, "seq")                  ? "0"
                                                        : "1";
        }
        table_add(&t, v);
    }
    kb_err err = {0};
    CHECK_EQ_INT(table_write_csv(&t, path, &err), 0);
    free(v);
    table_free(&t);
}

/* The summary row with these keys, or -1. */
static int find(const kb_table *s, const char *task, const char *turn, const char *kind, const char *label,
                const char *budget) {
    int hit = -1;
    for (int r = 0; r < s->nrow; r++)
        if (!strcmp(table_get(s, r, "task"), task) && !strcmp(table_get(s, r, "turn"), turn) &&
            !strcmp(table_get(s, r, "kind"), kind) && !strcmp(table_get(s, r, "label"), label) &&
            !strcmp(table_get(s, r, "budget"), budget)) {
            CHECK(hit < 0); /* once */
            hit = r;
        }
    return hit;
}

static void check_row(const kb_table *s, const char *task, const char *turn, const char *kind,
                      const char *label, const char *budget, int n, double score) {
    int r = find(s, task, turn, kind, label, budget);
    CHECK(r >= 0);
    if (r < 0) {
        fprintf(stderr, "  no row %s/%s/%s/%s/%s\n", task, turn, kind, label, budget);
        return;
    }
    CHECK_EQ_INT(atoi(table_get(s, r, "n")), n);
    if (isnan(score)) CHECK(!*table_get(s, r, "score"));
    else CHECK_CLOSE(atof(table_get(s, r, "score")), score, 1e-4, 0); /* printed with %.6g */
}

/* summary.csv from smp: the whole-task rows of task "one" for cells (l1, b1)
 * and (l2, b2) have speedups w1 and w2. */
static void check_speedups(const char *smp, const char *sum, const char *l1, const char *b1, double w1,
                           const char *l2, const char *b2, double w2) {
    kb_err err = {0};
    kb_table s;
    CHECK_EQ_INT(summary_write(smp, sum, "full", &err), 0);
    CHECK_EQ_INT(table_read_csv(sum, NULL, 0, &s, &err), 0);
    const char *lab[2] = {l1, l2}, *bud[2] = {b1, b2};
    double want[2] = {w1, w2};
    for (int i = 0; i < 2; i++) {
        int r = find(&s, "one", "all", "all", lab[i], bud[i]);
        CHECK(r >= 0);
        if (r >= 0) CHECK_CLOSE(atof(table_get(&s, r, "speedup_vs_full")), want[i], 1e-6, 0);
    }
    table_free(&s);
}

int main(void) {
    char dir[] = "/tmp/kvbench-test-summary.XXXXXX", smp[64], sum[64];
    CHECK(mkdtemp(dir) != NULL);
    snprintf(smp, sizeof smp, "%s/samples.csv", dir);
    snprintf(sum, sizeof sum, "%s/summary.csv", dir);

    /* a mixed task: two samples x two turns, the kinds in another order in
     * each sample (per-turn rows then mix kinds; per-kind rows do not), and a
     * single-turn task that cell "snapkv" lacks (an interrupted run) */
    const row rs[] = {
        {"mix", "a", "0", "sum", "full", "", "0.5", "10", NULL},
        {"mix", "a", "1", "pk", "full", "", "1", "10", NULL},
        {"mix", "b", "0", "pk", "full", "", "0", "12", NULL},
        {"mix", "b", "1", "sum", "full", "", "0.25", "12", NULL},
        {"mix", "a", "0", "sum", "snapkv", "32", "0.1", "5", NULL},
        {"mix", "a", "1", "pk", "snapkv", "32", "1", "5", NULL},
        {"mix", "b", "0", "pk", "snapkv", "32", "1", "6", NULL},
        {"mix", "b", "1", "sum", "snapkv", "32", "0.3", "6", NULL},
        {"one", "x", "0", "one", "full", "", "1", "20", NULL},
        {"one", "y", "0", "one", "full", "", "0", "20", NULL},
    };
    write_samples(smp, rs, (int)(sizeof rs / sizeof rs[0]));
    kb_err err = {0};
    CHECK_EQ_INT(summary_write(smp, sum, "full", &err), 0);
    kb_table s;
    CHECK_EQ_INT(table_read_csv(sum, NULL, 0, &s, &err), 0);
    CHECK(table_col(&s, "kind") == table_col(&s, "turn") + 1);

    /* the whole task, its turns, and its kinds: 100 x the mean of the rows */
    check_row(&s, "mix", "all", "all", "full", "", 4, 100 * (0.5 + 1 + 0 + 0.25) / 4);
    check_row(&s, "mix", "0", "all", "full", "", 2, 100 * (0.5 + 0) / 2);
    check_row(&s, "mix", "1", "all", "full", "", 2, 100 * (1 + 0.25) / 2);
    check_row(&s, "mix", "all", "sum", "full", "", 2, 100 * (0.5 + 0.25) / 2);
    check_row(&s, "mix", "all", "pk", "full", "", 2, 100 * (1 + 0) / 2);
    check_row(&s, "mix", "all", "sum", "snapkv", "32", 2, 100 * (0.1 + 0.3) / 2);
    check_row(&s, "mix", "all", "pk", "snapkv", "32", 2, 100.0);
    /* a task of one kind gets no per-kind rows, nor per-turn rows */
    check_row(&s, "one", "all", "all", "full", "", 2, 50.0);
    CHECK(find(&s, "one", "all", "one", "full", "") < 0);
    CHECK(find(&s, "one", "0", "all", "full", "") < 0);
    /* ALL: the mean of the task scores for a cell with every task; none for
     * snapkv, which lacks task "one" (its rows are still counted) */
    check_row(&s, "ALL", "all", "all", "full", "", 6, (100 * 1.75 / 4 + 50.0) / 2);
    check_row(&s, "ALL", "all", "all", "snapkv", "32", 4, NAN);
    /* the per-kind rows' speedup is against Full KV's rows of the same kind:
     * decode medians 11 (full) and 5.5 (snapkv) */
    int r = find(&s, "mix", "all", "pk", "snapkv", "32");
    if (r >= 0) CHECK_CLOSE(atof(table_get(&s, r, "speedup_vs_full")), 2.0, 1e-6, 0);
    /* 7 mix rows (all, 2 turns, 2 kinds) x 2 cells, one row of "one", 2 ALL */
    CHECK_EQ_INT(s.nrow, 2 * 5 + 1 + 2);
    table_free(&s);

    /* the baseline is the first cell of method full, whatever its label (as
     * in latency.csv); before, only a cell labelled "full" was, and a config
     * labelling it "dense" had no speedup column at all */
    const row rl[] = {
        {"one", "x", "0", "one", "snapkv", "32", "1", "4", NULL},
        {"one", "x", "0", "one", "dense", "", "1", "12", "full"},
        {"one", "x", "0", "one", "dense2", "", "1", "6", "full"},
        {"one", "y", "0", "one", "snapkv", "32", "1", "4", NULL},
        {"one", "y", "0", "one", "dense", "", "1", "12", "full"},
        {"one", "y", "0", "one", "dense2", "", "1", "6", "full"},
    };
    write_samples(smp, rl, (int)(sizeof rl / sizeof rl[0]));
    check_speedups(smp, sum, "snapkv", "32", 12.0 / 4, "dense2", "", 12.0 / 6);

    /* a cell is (label, budget): Full KV and a budgeted cell may share a
     * label, and the baseline is still the full one (before, the last group
     * of that label: snapkv's) */
    const row rx[] = {
        {"one", "x", "0", "one", "x", "", "1", "9", "full"},
        {"one", "x", "0", "one", "x", "32", "1", "3", "snapkv"},
    };
    write_samples(smp, rx, (int)(sizeof rx / sizeof rx[0]));
    check_speedups(smp, sum, "x", "32", 9.0 / 3, "x", "", 1.0);

    /* one task: no ALL row ("when the run has more than one task",
     * OUTPUTS.md); a row whose median decode ms/token is 0 (no decode step
     * timed) has no speedup: 9 / 0 is not a speedup, so the field is empty
     * ("not applicable"), not "inf" */
    const row rz[] = {
        {"one", "x", "0", "one", "full", "", "1", "9", NULL},
        {"one", "x", "0", "one", "fast", "32", "1", "0", "snapkv"},
    };
    write_samples(smp, rz, (int)(sizeof rz / sizeof rz[0]));
    CHECK_EQ_INT(summary_write(smp, sum, "full", &err), 0);
    CHECK_EQ_INT(table_read_csv(sum, NULL, 0, &s, &err), 0);
    CHECK(find(&s, "ALL", "all", "all", "full", "") < 0);
    CHECK(find(&s, "ALL", "all", "all", "fast", "32") < 0);
    CHECK_EQ_INT(s.nrow, 2);
    r = find(&s, "one", "all", "all", "fast", "32");
    CHECK(r >= 0);
    if (r >= 0) CHECK_STREQ(table_get(&s, r, "speedup_vs_full"), "");
    table_free(&s);

    unlink(smp);
    unlink(sum);
    rmdir(dir);
    return check_summary("test_summary");
}
