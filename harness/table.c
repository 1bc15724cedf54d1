/* table.c - string tables <-> CSV through libcsv (table.h). */
#include "harness/table.h"

#include <csv.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness/atomic.h"

void table_init(kb_table *t, const char *const *cols, int ncol) {
    memset(t, 0, sizeof *t);
    t->ncol = ncol;
    t->cols = KB_CALLOC((size_t)ncol, sizeof *t->cols);
    for (int i = 0; i < ncol; i++) t->cols[i] = kb_strdup(cols[i]);
}

void table_free(kb_table *t) {
    for (int r = 0; r < t->nrow; r++) {
        for (int c = 0; c < t->ncol; c++) free(t->rows[r][c]);
        free(t->rows[r]);
    }
    for (int c = 0; c < t->ncol; c++) free(t->cols[c]);
    free(t->rows);
    free(t->cols);
    memset(t, 0, sizeof *t);
}

void table_add(kb_table *t, const char *const *vals) {
    if (t->nrow == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->rows = KB_REALLOC(t->rows, (size_t)t->cap * sizeof *t->rows);
    }
    char **row = KB_MALLOC((size_t)t->ncol * sizeof *row);
    for (int c = 0; c < t->ncol; c++) row[c] = kb_strdup(vals[c] ? vals[c] : "");
    t->rows[t->nrow++] = row;
}

int table_col(const kb_table *t, const char *name) {
    for (int c = 0; c < t->ncol; c++)
        if (!strcmp(t->cols[c], name)) return c;
    return -1;
}

const char *table_get(const kb_table *t, int row, const char *col) {
    int c = table_col(t, col);
    return c < 0 ? "" : t->rows[row][c];
}

/* libcsv's reader drops spaces and tabs (CSV_SPACE, CSV_TAB) around an
 * unquoted field */
static int csv_trimmed(char c) { return c == ' ' || c == '\t'; }

static int write_field(FILE *f, const char *s) {
    /* csv_fwrite quotes every field; quote only when needed for readability:
     * what an unquoted field could not carry (a comma, a quote, a line
     * break) or would lose (an empty field is a blank line in a one-column
     * table; leading or trailing spaces and tabs) */
    if (!s[0] || strpbrk(s, ",\"\r\n") || csv_trimmed(s[0]) || csv_trimmed(s[strlen(s) - 1]))
        return csv_fwrite(f, s, strlen(s));
    return fputs(s, f) < 0 ? EOF : 0;
}

int table_write_csv(const kb_table *t, const char *path, kb_err *err) {
    kb_atomic_file a;
    int rc = atomic_open(&a, path, err);
    if (rc) return rc;
    int bad = 0;
    for (int c = 0; c < t->ncol; c++) {
        bad |= write_field(a.f, t->cols[c]) != 0;
        bad |= fputc(c + 1 < t->ncol ? ',' : '\n', a.f) == EOF;
    }
    for (int r = 0; r < t->nrow && !bad; r++)
        for (int c = 0; c < t->ncol; c++) {
            bad |= write_field(a.f, t->rows[r][c]) != 0;
            bad |= fputc(c + 1 < t->ncol ? ',' : '\n', a.f) == EOF;
        }
    if (bad) {
        int e = errno;
        atomic_abort(&a);
        return kb_fail(err, KB_ERUNTIME, "%s: write failed: %s", path, strerror(e));
    }
    return atomic_commit(&a, err);
}

/* ---- reading ---- */

typedef struct reader {
    kb_table *t;
    char **cur;   /* fields of the current record */
    int ncur, capcur;
    long line;
    int header_done;
    const char *const *expect;
    int expect_n;
    int rc;
    kb_err *err;
    const char *path;
} reader;

static void on_field(void *s, size_t len, void *ud) {
    reader *r = ud;
    if (r->ncur == r->capcur) {
        r->capcur = r->capcur ? 2 * r->capcur : 32;
        r->cur = KB_REALLOC(r->cur, (size_t)r->capcur * sizeof *r->cur);
    }
    char *v = KB_MALLOC(len + 1);
    memcpy(v, s, len);
    v[len] = 0;
    r->cur[r->ncur++] = v;
}

static void drop_cur(reader *r) {
    for (int i = 0; i < r->ncur; i++) free(r->cur[i]);
    r->ncur = 0;
}

static void on_record(int c, void *ud) {
    (void)c;
    reader *r = ud;
    r->line++;
    if (r->rc) {
        drop_cur(r);
        return;
    }
    if (!r->header_done) {
        if (r->expect) {
            int same = r->ncur == r->expect_n;
            for (int i = 0; same && i < r->ncur; i++) same = !strcmp(r->cur[i], r->expect[i]);
            if (!same) {
                r->rc = kb_fail(r->err, KB_EINPUT,
                                "%s:1: header does not match this kvbench version's columns "
                                "(first column '%s', %d columns, expected %d)",
                                r->path, r->ncur ? r->cur[0] : "", r->ncur, r->expect_n);
                drop_cur(r);
                return;
            }
        }
        table_init(r->t, (const char *const *)r->cur, r->ncur);
        r->header_done = 1;
        drop_cur(r);
        return;
    }
    if (r->ncur != r->t->ncol) {
        r->rc = kb_fail(r->err, KB_EINPUT, "%s: record %ld has %d fields, expected %d", r->path,
                        r->line, r->ncur, r->t->ncol);
        drop_cur(r);
        return;
    }
    table_add(r->t, (const char *const *)r->cur);
    drop_cur(r);
}

int table_read_csv(const char *path, const char *const *expect_cols, int ncol, kb_table *out,
                   kb_err *err) {
    memset(out, 0, sizeof *out);
    FILE *f = fopen(path, "rb");
    if (!f) return kb_fail(err, KB_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    struct csv_parser p;
    csv_init(&p, CSV_STRICT | CSV_STRICT_FINI | CSV_APPEND_NULL);
    reader r = {.t = out, .expect = expect_cols, .expect_n = ncol, .err = err, .path = path};
    char buf[65536];
    size_t n;
    int rc = 0;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        if (csv_parse(&p, buf, n, on_field, on_record, &r) != n) {
            rc = kb_fail(err, KB_EINPUT, "%s: malformed CSV near record %ld: %s", path, r.line + 1,
                         csv_strerror(csv_error(&p)));
            break;
        }
        if (r.rc) break;
    }
    if (!rc && !r.rc && ferror(f)) /* a directory, an I/O error */
        rc = kb_fail(err, KB_EINPUT, "%s: cannot read: %s", path, strerror(errno));
    if (!rc && !r.rc && csv_fini(&p, on_field, on_record, &r))
        rc = kb_fail(err, KB_EINPUT, "%s: malformed CSV at the end: %s", path,
                     csv_strerror(csv_error(&p)));
    csv_free(&p);
    fclose(f);
    drop_cur(&r);
    free(r.cur);
    if (!rc) rc = r.rc;
    if (!rc && !r.header_done) rc = kb_fail(err, KB_EINPUT, "%s: empty file, expected a header row", path);
    if (rc && r.header_done) table_free(out);
    return rc;
}

int table_check_numbers(const kb_table *t, const char *path, const char *const *cols, kb_err *err) {
    for (int c = 0; cols[c]; c++)
        for (int r = 0; r < t->nrow; r++) {
            const char *v = table_get(t, r, cols[c]);
            char *end;
            double d = *v ? strtod(v, &end) : 0;
            if (*v && (*end || !isfinite(d)))
                return kb_fail(err, KB_EINPUT, "%s: data row %d: %s '%s', expected a number", path, r + 1,
                               cols[c], v);
        }
    return 0;
}

const char *fmt_double(char *buf, size_t cap, double v) {
    if (isnan(v)) snprintf(buf, cap, "nan");
    else if (isinf(v)) snprintf(buf, cap, v > 0 ? "inf" : "-inf");
    else snprintf(buf, cap, "%.6g", v);
    return buf;
}

const char *fmt_long(char *buf, size_t cap, long v) {
    snprintf(buf, cap, "%ld", v);
    return buf;
}
