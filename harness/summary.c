/* summary.c - summary.csv from samples.csv: per (task, turn, kind, cell) the
 * number of rows, mean score x100 with a 95% interval (normal approximation,
 * 1.96 standard errors), median decode ms/token, speedup against the
 * baseline cell of the same task (the first cell of method "full", whatever
 * its label), mean resident and
 * traffic columns. Multi-turn tasks also get one row per turn ("all" is the
 * mean over turns), and tasks whose turns ask different things (mixed SCBench
 * tasks: a summary and a passkey, each with its own metric) one row per kind
 * over all turns; other rows have kind "all". Task "ALL" is the macro average
 * over tasks, empty for a cell that lacks some task (an interrupted run). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/driver.h"
#include "harness/table.h"

const char *const kb_summary_cols[] = {
    "task", "turn", "kind", "method", "label", "params", "budget", "budget_mode", "n", "score", "ci95",
    "decode_ms_per_token", "speedup_vs_full", "tokens_resident", "bytes_resident",
    "tokeq_read_per_step", "bytes_read_per_step", "compression_ratio"};
const int kb_summary_ncols = (int)(sizeof kb_summary_cols / sizeof kb_summary_cols[0]);

typedef struct group {
    char task[64], turn[16], kind[48], method[48], label[80], params[512], budget[16], mode[16];
    double *score, *dec;
    int n, cap;
    double res_tok, res_bytes, rd_tok, rd_bytes, comp;
} group;

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    if (!n) return NAN;
    double *c = KB_MALLOC((size_t)n * sizeof(double));
    memcpy(c, v, (size_t)n * sizeof(double));
    qsort(c, (size_t)n, sizeof *c, cmp_d);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

static group *find_group(group **gs, int *ng, int *cap, const char *task, const char *turn,
                         const char *kind, const kb_table *t, int r) {
    const char *label = table_get(t, r, "label"), *budget = table_get(t, r, "budget");
    for (int i = 0; i < *ng; i++)
        if (!strcmp((*gs)[i].task, task) && !strcmp((*gs)[i].turn, turn) && !strcmp((*gs)[i].kind, kind) &&
            !strcmp((*gs)[i].label, label) && !strcmp((*gs)[i].budget, budget))
            return &(*gs)[i];
    if (*ng == *cap) {
        *cap = *cap ? 2 * *cap : 32;
        *gs = KB_REALLOC(*gs, (size_t)*cap * sizeof **gs);
    }
    group *g = &(*gs)[(*ng)++];
    memset(g, 0, sizeof *g);
    snprintf(g->task, sizeof g->task, "%s", task);
    snprintf(g->turn, sizeof g->turn, "%s", turn);
    snprintf(g->kind, sizeof g->kind, "%s", kind);
    snprintf(g->method, sizeof g->method, "%s", table_get(t, r, "method"));
    snprintf(g->label, sizeof g->label, "%s", label);
    snprintf(g->params, sizeof g->params, "%s", table_get(t, r, "params"));
    snprintf(g->budget, sizeof g->budget, "%s", budget);
    snprintf(g->mode, sizeof g->mode, "%s", table_get(t, r, "budget_mode"));
    return g;
}

static void group_add(group *g, const kb_table *t, int r) {
    if (g->n == g->cap) {
        g->cap = g->cap ? 2 * g->cap : 16;
        g->score = KB_REALLOC(g->score, (size_t)g->cap * sizeof(double));
        g->dec = KB_REALLOC(g->dec, (size_t)g->cap * sizeof(double));
    }
    g->score[g->n] = atof(table_get(t, r, "score"));
    g->dec[g->n] = atof(table_get(t, r, "decode_ms_per_token"));
    g->n++;
    g->res_tok += atof(table_get(t, r, "tokens_resident"));
    g->res_bytes += atof(table_get(t, r, "bytes_resident"));
    g->rd_tok += atof(table_get(t, r, "tokeq_read_per_step"));
    g->rd_bytes += atof(table_get(t, r, "bytes_read_per_step"));
    g->comp += atof(table_get(t, r, "compression_ratio"));
}

static void emit(kb_table *out, const group *g, double base_dec, double score_override, int n_override) {
    char b[12][64];
    /* score_override: NAN = no score (an ALL row of a cell without every task) */
    double mean = 0, sd = 0;
    for (int i = 0; i < g->n; i++) mean += g->score[i];
    mean /= g->n ? g->n : 1;
    for (int i = 0; i < g->n; i++) sd += (g->score[i] - mean) * (g->score[i] - mean);
    sd = g->n > 1 ? sqrt(sd / (g->n - 1)) : 0;
    double ci = g->n > 1 ? 1.96 * sd / sqrt(g->n) : 0;
    double dec = median(g->dec, g->n);
    int n = n_override >= 0 ? n_override : g->n;
    double sc = score_override >= 0 || isnan(score_override) ? score_override : 100 * mean;
    const char *v[18] = {
        g->task, g->turn, g->kind, g->method, g->label, g->params, g->budget, g->mode,
        fmt_long(b[0], 64, n), isnan(sc) ? "" : fmt_double(b[1], 64, sc),
        score_override >= 0 || isnan(score_override) ? "" : fmt_double(b[2], 64, 100 * ci), fmt_double(b[3], 64, dec),
        base_dec > 0 && dec > 0 ? fmt_double(b[4], 64, base_dec / dec) : "",
        fmt_double(b[5], 64, g->res_tok / g->n), fmt_double(b[6], 64, g->res_bytes / g->n),
        fmt_double(b[7], 64, g->rd_tok / g->n), fmt_double(b[8], 64, g->rd_bytes / g->n),
        fmt_double(b[9], 64, g->comp / g->n)};
    table_add(out, v);
}

/* A task's row over all its turns and kinds. */
static int whole(const group *g) { return !strcmp(g->turn, "all") && !strcmp(g->kind, "all"); }

/* Whether g is the baseline cell: label and budget (a cell's key) of the
 * first row of the baseline method. */
static int is_base(const group *g, const char *label, const char *budget) {
    return !strcmp(g->label, label) && !strcmp(g->budget, budget);
}

/* Median decode ms/token of the baseline cell over every task's rows. */
static double baseline_median_all(const group *gs, int ng, const char *label, const char *budget) {
    double *v = NULL;
    int n = 0;
    for (int j = 0; j < ng; j++)
        if (whole(&gs[j]) && is_base(&gs[j], label, budget)) {
            v = KB_REALLOC(v, (size_t)(n + gs[j].n) * sizeof(double));
            memcpy(v + n, gs[j].dec, (size_t)gs[j].n * sizeof(double));
            n += gs[j].n;
        }
    double m = n ? median(v, n) : -1;
    free(v);
    return m;
}

int summary_write(const char *samples_csv, const char *summary_csv, const char *baseline_method,
                  kb_err *err) {
    kb_table t;
    int rc = table_read_csv(samples_csv, kb_samples_cols, kb_samples_ncols, &t, err);
    if (rc) return rc;
    /* the baseline is the first cell (in the table's order, the config's)
     * that runs baseline_method, whatever its label: latency.csv's rule */
    char baseline[256] = "", base_budget[32] = "";
    for (int r = 0; r < t.nrow && !*baseline; r++)
        if (!strcmp(table_get(&t, r, "method"), baseline_method)) { /* a cell is (label, budget) */
            snprintf(baseline, sizeof baseline, "%s", table_get(&t, r, "label"));
            snprintf(base_budget, sizeof base_budget, "%s", table_get(&t, r, "budget"));
        }
    group *gs = NULL;
    int ng = 0, cap = 0;
    /* tasks with several turns also get per-turn rows, tasks with several
     * kinds per-kind rows: per task (few), its first row's kind and the flags */
    typedef struct { const char *task, *kind; int multi, mixed; } task_info;
    task_info *ti = KB_CALLOC((size_t)t.nrow + 1, sizeof *ti);
    int nti = 0, *row_task = KB_CALLOC((size_t)t.nrow + 1, sizeof *row_task);
    for (int r = 0; r < t.nrow; r++) {
        const char *task = table_get(&t, r, "task"), *kind = table_get(&t, r, "kind");
        int k = 0;
        while (k < nti && strcmp(ti[k].task, task)) k++;
        if (k == nti) ti[nti++] = (task_info){task, kind, 0, 0};
        ti[k].multi |= strcmp(table_get(&t, r, "turn"), "0") != 0;
        ti[k].mixed |= strcmp(ti[k].kind, kind) != 0;
        row_task[r] = k;
    }
    for (int r = 0; r < t.nrow; r++) {
        const char *task = table_get(&t, r, "task");
        const task_info *k = &ti[row_task[r]];
        group_add(find_group(&gs, &ng, &cap, task, "all", "all", &t, r), &t, r);
        if (k->multi) group_add(find_group(&gs, &ng, &cap, task, table_get(&t, r, "turn"), "all", &t, r), &t, r);
        if (k->mixed) group_add(find_group(&gs, &ng, &cap, task, "all", table_get(&t, r, "kind"), &t, r), &t, r);
    }
    free(ti);
    free(row_task);
    kb_table out;
    table_init(&out, kb_summary_cols, kb_summary_ncols);
    for (int i = 0; i < ng; i++) {
        double base = -1;
        for (int j = 0; j < ng; j++)
            if (!strcmp(gs[j].task, gs[i].task) && !strcmp(gs[j].turn, gs[i].turn) &&
                !strcmp(gs[j].kind, gs[i].kind) && is_base(&gs[j], baseline, base_budget))
                base = median(gs[j].dec, gs[j].n);
        emit(&out, &gs[i], base, -1, -1);
    }
    /* macro average over tasks of the "all" rows, per cell */
    int ntasks = 0;
    for (int i = 0; i < ng; i++) {
        int first = 1;
        for (int j = 0; j < i; j++) first &= strcmp(gs[j].task, gs[i].task) != 0;
        ntasks += first;
    }
    if (ntasks > 1) {
        for (int i = 0; i < ng; i++) {
            if (!whole(&gs[i])) continue;
            int seen = 0;
            for (int j = 0; j < i; j++)
                seen |= whole(&gs[j]) && !strcmp(gs[j].label, gs[i].label) &&
                        !strcmp(gs[j].budget, gs[i].budget);
            if (seen) continue;
            double sum = 0;
            int k = 0, n = 0;
            group merged = gs[i];
            snprintf(merged.task, sizeof merged.task, "ALL");
            merged.score = NULL;
            merged.dec = NULL;
            merged.n = merged.cap = 0;
            merged.res_tok = merged.res_bytes = merged.rd_tok = merged.rd_bytes = merged.comp = 0;
            for (int j = 0; j < ng; j++) {
                if (!whole(&gs[j]) || strcmp(gs[j].label, gs[i].label) ||
                    strcmp(gs[j].budget, gs[i].budget))
                    continue;
                double m = 0;
                for (int x = 0; x < gs[j].n; x++) m += gs[j].score[x];
                sum += 100 * m / gs[j].n;
                k++;
                n += gs[j].n;
                for (int x = 0; x < gs[j].n; x++) {
                    if (merged.n == merged.cap) {
                        merged.cap = merged.cap ? 2 * merged.cap : 16;
                        merged.score = KB_REALLOC(merged.score, (size_t)merged.cap * sizeof(double));
                        merged.dec = KB_REALLOC(merged.dec, (size_t)merged.cap * sizeof(double));
                    }
                    merged.score[merged.n] = gs[j].score[x];
                    merged.dec[merged.n++] = gs[j].dec[x];
                }
                merged.res_tok += gs[j].res_tok;
                merged.res_bytes += gs[j].res_bytes;
                merged.rd_tok += gs[j].rd_tok;
                merged.rd_bytes += gs[j].rd_bytes;
                merged.comp += gs[j].comp;
            }
            double base = baseline_median_all(gs, ng, baseline, base_budget);
            /* a mean over some of the tasks is not the macro average: no score */
            emit(&out, &merged, base, k == ntasks ? sum / k : NAN, n);
            free(merged.score);
            free(merged.dec);
        }
    }
    rc = table_write_csv(&out, summary_csv, err);
    table_free(&out);
    for (int i = 0; i < ng; i++) {
        free(gs[i].score);
        free(gs[i].dec);
    }
    free(gs);
    table_free(&t);
    return rc;
}
