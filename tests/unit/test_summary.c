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

/* samples.csv of rows given as "col=value;col=value..." (other columns
 * "1", seq and turn "0"). */
static void write_kv_rows(const char *path, const char *const *rs, int n) {
    kb_table t;
    table_init(&t, kb_samples_cols, kb_samples_ncols);
    const char **v = calloc((size_t)kb_samples_ncols, sizeof *v);
    char vals[64][128];
    for (int i = 0; i < n; i++) {
        for (int c = 0; c < kb_samples_ncols; c++) {
            const char *k = kb_samples_cols[c];
            v[c] = !strcmp(k, "seq") || !strcmp(k, "turn") ? "0" : "1";
            size_t kl = strlen(k);
            for (const char *q = rs[i]; *q;) {
                const char *e = strchr(q, ';');
                size_t len = e ? (size_t)(e - q) : strlen(q);
                if (len > kl && !strncmp(q, k, kl) && q[kl] == '=') {
                    snprintf(vals[c], sizeof vals[c], "%.*s", (int)(len - kl - 1), q + kl + 1);
                    v[c] = vals[c];
                }
                q += len + (e != NULL);
            }
        }
        table_add(&t, v);
    }
    kb_err err = {0};
    CHECK_EQ_INT(table_write_csv(&t, path, &err), 0);
    free(v);
    table_free(&t);
}

static void check_num(const kb_table *s, int r, const char *col, double want) {
    const char *got = table_get(s, r, col);
    CHECK_MSG(*got && fabs(atof(got) - want) <= 1e-5 * fabs(want) + 1e-12, "%s/%s/%s %s: got '%s', want %.9g",
              table_get(s, r, "task"), table_get(s, r, "label"), table_get(s, r, "budget"), col, got, want);
}

/* Every column of a summary row by hand from the rows (OUTPUTS.md's
 * summary.csv): the cell's columns as the rows have them, n, the score's mean
 * x100 and its 95% interval (1.96 x the sample standard deviation / sqrt(n),
 * x100; 0 for one row), the median decode ms/token (the mean of the middle two
 * of an even count), the speedup against the Full KV cell's median, the
 * means of the resident and traffic columns; the ALL rows: the mean of the
 * task scores, n over every task, no interval, the median over every row, and
 * the speedup against Full KV's median over all its rows. The values are
 * printed with %.6g: relative tolerance 1e-5. */
static void test_columns(const char *smp, const char *sum) {
    static const char *const rs[] = {
        "task=t;label=full;method=full;params=;budget=;budget_mode=traffic;score=1;decode_ms_per_token=10;"
        "tokens_resident=100;bytes_resident=1000;tokeq_read_per_step=5;bytes_read_per_step=50;compression_ratio=2",
        "task=t;label=full;method=full;params=;budget=;budget_mode=traffic;score=0;decode_ms_per_token=30;"
        "tokens_resident=200;bytes_resident=2000;tokeq_read_per_step=6;bytes_read_per_step=70;compression_ratio=4",
        "task=t;label=full;method=full;params=;budget=;budget_mode=traffic;score=0.5;decode_ms_per_token=20;"
        "tokens_resident=600;bytes_resident=3000;tokeq_read_per_step=7;bytes_read_per_step=90;compression_ratio=9",
        "task=t;label=q;method=quest;params={\"page_size\":8};budget=32;budget_mode=topk;score=1;"
        "decode_ms_per_token=5;tokens_resident=40;bytes_resident=400;tokeq_read_per_step=3;bytes_read_per_step=30;"
        "compression_ratio=10",
        "task=t;label=q;method=quest;params={\"page_size\":8};budget=32;budget_mode=topk;score=1;"
        "decode_ms_per_token=6;tokens_resident=60;bytes_resident=600;tokeq_read_per_step=1;bytes_read_per_step=10;"
        "compression_ratio=20",
        "task=u;label=full;method=full;params=;budget=;budget_mode=traffic;score=1;decode_ms_per_token=40;"
        "tokens_resident=300;bytes_resident=3000;tokeq_read_per_step=8;bytes_read_per_step=80;compression_ratio=1",
        "task=u;label=q;method=quest;params={\"page_size\":8};budget=32;budget_mode=topk;score=0;"
        "decode_ms_per_token=8;tokens_resident=50;bytes_resident=500;tokeq_read_per_step=2;bytes_read_per_step=20;"
        "compression_ratio=30",
    };
    write_kv_rows(smp, rs, (int)(sizeof rs / sizeof rs[0]));
    kb_err err = {0};
    kb_table s;
    CHECK_EQ_INT(summary_write(smp, sum, "full", &err), 0);
    CHECK_EQ_INT(table_read_csv(sum, NULL, 0, &s, &err), 0);
    CHECK_EQ_INT(s.nrow, 6); /* t and u per cell, ALL per cell */
    int r = find(&s, "t", "all", "all", "full", "");
    if (r >= 0) {
        CHECK_STREQ(table_get(&s, r, "method"), "full");
        CHECK_STREQ(table_get(&s, r, "params"), "");
        CHECK_STREQ(table_get(&s, r, "budget_mode"), "traffic");
        CHECK_STREQ(table_get(&s, r, "n"), "3");
        check_num(&s, r, "score", 50);
        /* scores 1, 0, 0.5: mean 0.5, sample sd sqrt((0.25 + 0.25 + 0) / 2) = 0.5 */
        check_num(&s, r, "ci95", 100 * 1.96 * 0.5 / sqrt(3));
        check_num(&s, r, "decode_ms_per_token", 20);
        check_num(&s, r, "speedup_vs_full", 1);
        check_num(&s, r, "tokens_resident", 300);
        check_num(&s, r, "bytes_resident", 2000);
        check_num(&s, r, "tokeq_read_per_step", 6);
        check_num(&s, r, "bytes_read_per_step", 70);
        check_num(&s, r, "compression_ratio", 5);
    }
    r = find(&s, "t", "all", "all", "q", "32");
    if (r >= 0) {
        CHECK_STREQ(table_get(&s, r, "method"), "quest");
        CHECK_STREQ(table_get(&s, r, "params"), "{\"page_size\":8}");
        CHECK_STREQ(table_get(&s, r, "budget_mode"), "topk");
        CHECK_STREQ(table_get(&s, r, "n"), "2");
        check_num(&s, r, "score", 100);
        CHECK_STREQ(table_get(&s, r, "ci95"), "0"); /* equal scores */
        check_num(&s, r, "decode_ms_per_token", 5.5); /* (5 + 6) / 2 */
        check_num(&s, r, "speedup_vs_full", 20 / 5.5);
        check_num(&s, r, "tokens_resident", 50);
        check_num(&s, r, "bytes_resident", 500);
        check_num(&s, r, "tokeq_read_per_step", 2);
        check_num(&s, r, "bytes_read_per_step", 20);
        check_num(&s, r, "compression_ratio", 15);
    }
    r = find(&s, "u", "all", "all", "q", "32");
    if (r >= 0) {
        CHECK_STREQ(table_get(&s, r, "ci95"), "0"); /* one row */
        check_num(&s, r, "speedup_vs_full", 40.0 / 8);
    }
    r = find(&s, "ALL", "all", "all", "full", "");
    if (r >= 0) {
        CHECK_STREQ(table_get(&s, r, "n"), "4");
        check_num(&s, r, "score", (50 + 100) / 2.0);
        CHECK_STREQ(table_get(&s, r, "ci95"), "");
        check_num(&s, r, "decode_ms_per_token", 25); /* 10, 20, 30, 40 */
        check_num(&s, r, "speedup_vs_full", 1);
        check_num(&s, r, "tokens_resident", (100 + 200 + 600 + 300) / 4.0);
        check_num(&s, r, "compression_ratio", (2 + 4 + 9 + 1) / 4.0);
    }
    r = find(&s, "ALL", "all", "all", "q", "32");
    if (r >= 0) {
        CHECK_STREQ(table_get(&s, r, "n"), "3");
        check_num(&s, r, "score", (100 + 0) / 2.0);
        CHECK_STREQ(table_get(&s, r, "ci95"), "");
        check_num(&s, r, "decode_ms_per_token", 6); /* 5, 6, 8 */
        check_num(&s, r, "speedup_vs_full", 25.0 / 6);
        check_num(&s, r, "tokens_resident", (40 + 60 + 50) / 3.0);
        check_num(&s, r, "bytes_read_per_step", (30 + 10 + 20) / 3.0);
    }
    table_free(&s);

    /* ALL's baseline is Full KV's median over its rows, each row once: a
     * two-turn task's per-turn groups do not count its rows again. Full KV's
     * rows: 10 x 4 (task m, two samples of two turns) and 50..90 (task s):
     * median 50 of the nine, so the ALL row's speedup is 1 (its own median);
     * counting m's turn rows again would give a median of 10 */
    static const char *const mt[] = {
        "task=m;sample=a;turn=0;label=full;method=full;budget=;decode_ms_per_token=10",
        "task=m;sample=a;turn=1;label=full;method=full;budget=;decode_ms_per_token=10",
        "task=m;sample=b;turn=0;label=full;method=full;budget=;decode_ms_per_token=10",
        "task=m;sample=b;turn=1;label=full;method=full;budget=;decode_ms_per_token=10",
        "task=s;sample=c;label=full;method=full;budget=;decode_ms_per_token=50",
        "task=s;sample=d;label=full;method=full;budget=;decode_ms_per_token=60",
        "task=s;sample=e;label=full;method=full;budget=;decode_ms_per_token=70",
        "task=s;sample=f;label=full;method=full;budget=;decode_ms_per_token=80",
        "task=s;sample=g;label=full;method=full;budget=;decode_ms_per_token=90",
    };
    write_kv_rows(smp, mt, (int)(sizeof mt / sizeof mt[0]));
    CHECK_EQ_INT(summary_write(smp, sum, "full", &err), 0);
    CHECK_EQ_INT(table_read_csv(sum, NULL, 0, &s, &err), 0);
    r = find(&s, "ALL", "all", "all", "full", "");
    CHECK(r >= 0);
    if (r >= 0) {
        check_num(&s, r, "decode_ms_per_token", 50);
        check_num(&s, r, "speedup_vs_full", 1);
        CHECK_STREQ(table_get(&s, r, "n"), "9");
    }
    table_free(&s);

    /* no Full KV cell: no speedup anywhere (the field empty, not negative) */
    static const char *const nf[] = {"task=t;label=q;method=quest;budget=32;decode_ms_per_token=5",
                                     "task=u;label=q;method=quest;budget=32;decode_ms_per_token=7"};
    write_kv_rows(smp, nf, 2);
    CHECK_EQ_INT(summary_write(smp, sum, "full", &err), 0);
    CHECK_EQ_INT(table_read_csv(sum, NULL, 0, &s, &err), 0);
    CHECK_EQ_INT(s.nrow, 3);
    for (int i = 0; i < s.nrow; i++) CHECK_STREQ(table_get(&s, i, "speedup_vs_full"), "");
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

    test_columns(smp, sum);

    unlink(smp);
    unlink(sum);
    rmdir(dir);
    return check_summary("test_summary");
}
