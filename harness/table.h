/* table.h - an in-memory table of strings with named columns, written as
 * RFC 4180 CSV with libcsv (atomically: temp file + rename) and read back for
 * --resume and aggregation. Values are formatted by the caller so that the
 * same run gives byte-identical files. */
#ifndef KB_TABLE_H
#define KB_TABLE_H

#include "kernels/kb_base.h"

typedef struct kb_table {
    int ncol;
    char **cols;   /* [ncol] column names */
    int nrow, cap;
    char ***rows;  /* [nrow][ncol] malloc'ed strings */
} kb_table;

void table_init(kb_table *t, const char *const *cols, int ncol);
void table_free(kb_table *t);
/* Appends a row of ncol values (copied). */
void table_add(kb_table *t, const char *const *vals);
int table_col(const kb_table *t, const char *name); /* index or -1 */
const char *table_get(const kb_table *t, int row, const char *col); /* "" if no such column */
/* Writes the table to path atomically. */
int table_write_csv(const kb_table *t, const char *path, kb_err *err);
/* Reads a CSV written by table_write_csv (header row first). Errors name
 * path:line. If expect_cols is non-NULL the header must equal it. */
int table_read_csv(const char *path, const char *const *expect_cols, int ncol, kb_table *out,
                   kb_err *err);
/* Every value of the named columns (NULL-terminated list) must be empty or a
 * finite number; the error names the file, the data row and the column. */
int table_check_numbers(const kb_table *t, const char *path, const char *const *cols, kb_err *err);

/* Formatting helpers (static buffers are not used: caller passes buf). */
const char *fmt_double(char *buf, size_t cap, double v); /* "%.6g", "nan" for NaN, "" for -inf? no */
const char *fmt_long(char *buf, size_t cap, long v);

#endif
