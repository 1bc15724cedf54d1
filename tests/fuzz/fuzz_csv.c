/* fuzz_csv.c - libFuzzer target: the CSV reader and writer (harness/table.c)
 * on arbitrary bytes. Every table kvbench reads back goes through them:
 * samples.csv (sweep --resume, merge), summary.csv and latency.csv (plot,
 * merge).
 *
 * The whole input is one file. Properties:
 *   1. table_read_csv(path, no expected header): a refusal has KB_EINPUT, a
 *      message naming the file, and leaves an empty table; an accepted table
 *      has >= 1 column and every cell a string;
 *   2. write/read round trip: an accepted table written with
 *      table_write_csv and read again (its header expected) gives the same
 *      header and cells, byte for byte (the writer quotes whatever the
 *      reader would otherwise change);
 *   3. with samples.csv's header expected, the file is accepted exactly when
 *      it was accepted in 1 and its header is that one;
 *   4. table_check_numbers over every column: 0, or KB_EINPUT naming the
 *      file, a data row and a column; 0 exactly when every cell is empty or
 *      a whole finite number by strtod. */
#include <math.h>

#include "tests/fuzz/fuzz_common.h"
#include "harness/driver.h"
#include "harness/table.h"

static int csv_fz_same(const kb_table *a, const kb_table *b) {
    if (a->ncol != b->ncol || a->nrow != b->nrow) return 0;
    for (int c = 0; c < a->ncol; c++)
        if (strcmp(a->cols[c], b->cols[c])) return 0;
    for (int r = 0; r < a->nrow; r++)
        for (int c = 0; c < a->ncol; c++)
            if (strcmp(a->rows[r][c], b->rows[r][c])) return 0;
    return 1;
}

static int csv_fz_numbers_ok(const kb_table *t) {
    for (int r = 0; r < t->nrow; r++)
        for (int c = 0; c < t->ncol; c++) {
            const char *v = t->rows[r][c];
            if (!*v) continue;
            char *end;
            double d = strtod(v, &end);
            if (end == v || *end || !isfinite(d)) return 0;
        }
    return 1;
}

int fuzz_csv_one(const uint8_t *d, size_t n) {
    char path[512], back[512];
    fuzz_path(path, sizeof path, "in.csv");
    fuzz_path(back, sizeof back, "back.csv");
    fuzz_write(path, d, n);

    kb_table t;
    kb_err err = {0};
    int rc = table_read_csv(path, NULL, 0, &t, &err);
    if (rc) {
        FUZZ_ASSERT(rc == KB_EINPUT && strstr(err.msg, path), "rc %d '%s'", rc, err.msg);
        FUZZ_ASSERT(t.ncol == 0 && t.nrow == 0 && !t.cols && !t.rows, "a table left after an error");
    } else {
        FUZZ_ASSERT(t.ncol >= 1 && t.cols, "%d columns", t.ncol);
        for (int r = 0; r < t.nrow; r++)
            for (int c = 0; c < t.ncol; c++) FUZZ_ASSERT(t.rows[r][c] != NULL, "row %d column %d", r, c);
    }

    /* 2. the writer's output reads back as the same table */
    if (!rc) {
        kb_err e2 = {0};
        int w = table_write_csv(&t, back, &e2);
        FUZZ_ASSERT(w == 0, "writing: %s", e2.msg);
        kb_table b;
        int r2 = w ? -1 : table_read_csv(back, (const char *const *)t.cols, t.ncol, &b, &e2);
        FUZZ_ASSERT(w || r2 == 0, "re-reading the writer's output: %s", e2.msg);
        if (!w && !r2) {
            FUZZ_ASSERT(csv_fz_same(&t, &b), "write/read round trip differs (%d columns, %d rows)", t.ncol,
                        t.nrow);
            table_free(&b);
        }
    }

    /* 3. an expected header */
    {
        int ns = kb_samples_ncols;
        kb_table s;
        kb_err e3 = {0};
        int r3 = table_read_csv(path, kb_samples_cols, ns, &s, &e3);
        int header = !rc && t.ncol == ns;
        for (int c = 0; header && c < ns; c++) header = !strcmp(t.cols[c], kb_samples_cols[c]);
        FUZZ_ASSERT((r3 == 0) == header, "with samples.csv's header expected: rc %d, '%s'", r3, e3.msg);
        if (r3) FUZZ_ASSERT(r3 == KB_EINPUT && strstr(e3.msg, path), "'%s'", e3.msg);
        else {
            FUZZ_ASSERT(csv_fz_same(&t, &s), "the same file read twice differs");
            table_free(&s);
        }
    }

    /* 4. numbers */
    if (!rc) {
        const char **cols = KB_MALLOC(((size_t)t.ncol + 1) * sizeof *cols);
        for (int c = 0; c < t.ncol; c++) cols[c] = t.cols[c];
        cols[t.ncol] = NULL;
        kb_err e4 = {0};
        int r4 = table_check_numbers(&t, path, cols, &e4);
        /* duplicate column names: table_get reads the first of them */
        int dup = 0;
        for (int c = 0; c < t.ncol && !dup; c++)
            for (int k = 0; k < c && !dup; k++) dup = !strcmp(t.cols[c], t.cols[k]);
        if (!dup)
            FUZZ_ASSERT((r4 == 0) == csv_fz_numbers_ok(&t), "table_check_numbers rc %d, '%s'", r4, e4.msg);
        if (r4) FUZZ_ASSERT(r4 == KB_EINPUT && strstr(e4.msg, path) && strstr(e4.msg, "data row"), "'%s'", e4.msg);
        free(cols);
        table_free(&t);
    }
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fuzz_csv_one(d, n); }
#endif
