/* json.h - cJSON helpers with errors that name the file, line and key.
 *
 * `where` strings describe the object being read, e.g.
 * "configs/quick.json: methods[2]" so an error reads
 * "configs/quick.json: methods[2]: key 'budget': expected an integer >= 16, got -4". */
#ifndef KB_JSON_H
#define KB_JSON_H

#include <cjson/cJSON.h>
#include <stdio.h>

#include "kernels/kb_base.h"

/* Parse a whole file; syntax errors give "file:line:col: ...". */
int json_load_file(const char *path, cJSON **out, kb_err *err);
/* Parse a string (name used in errors). */
int json_parse(const char *text, size_t len, const char *name, cJSON **out, kb_err *err);

/* KB_EINPUT naming the key and where it is when an object of j holds a key
 * twice (json_parse, json_load_file and jsonl_foreach check this). */
int json_check_unique_keys(const cJSON *j, const char *name, kb_err *err);
/* The value s of a command-line KEY=VALUE: the JSON value when the whole of s
 * is JSON, else s as a string (a bare word); NULL and KB_EINPUT in err,
 * naming "opt arg" (e.g. "--set", "budgets=[64"), when s starts as JSON
 * ('[', '{' or '"') and is not valid JSON, and, as for a config file, when s
 * is not UTF-8, holds the escape \u0000 or an object of it holds a key twice. */
cJSON *json_cli_value(const char *s, const char *opt, const char *arg, kb_err *err);

/* cJSON_Print (formatted != 0) or cJSON_PrintUnformatted of j as valid UTF-8:
 * cJSON copies string bytes as they are, and strings from outside kvbench's
 * checked inputs (file paths, GGUF metadata, host names) need not be UTF-8;
 * each ill-formed subpart becomes U+FFFD. Free with free(). */
char *json_print(const cJSON *j, int formatted);
/* Writes j formatted, ending with a newline, to path with atomic_write. */
int json_write_file(const char *path, const cJSON *j, kb_err *err);

/* Every key of obj must be in allowed (NULL-terminated) or in allowed2 (may be NULL). */
int json_check_keys(const cJSON *obj, const char *where, const char *const *allowed,
                    const char *const *allowed2, kb_err *err);

/* Typed getters: absent key -> *out = def and return 0 unless required
 * (then KB_EINPUT). Present with the wrong type or out of range -> KB_EINPUT. */
int json_get_int(const cJSON *obj, const char *where, const char *key, int required, long lo,
                 long hi, long def, long *out, kb_err *err);
int json_get_double(const cJSON *obj, const char *where, const char *key, int required,
                    double lo, double hi, double def, double *out, kb_err *err);
int json_get_bool(const cJSON *obj, const char *where, const char *key, int required, int def,
                  int *out, kb_err *err);
/* String value (points into obj; valid while obj lives). */
int json_get_string(const cJSON *obj, const char *where, const char *key, int required,
                    const char *def, const char **out, kb_err *err);
/* A string naming a file or directory: json_get_string, and "" is refused
 * (it would mean the root directory, the current one or the default). */
int json_get_path(const cJSON *obj, const char *where, const char *key, int required, const char *def,
                  const char **out, kb_err *err);
/* Array of strings: *out is a malloc'ed array of pointers into obj. */
int json_get_string_array(const cJSON *obj, const char *where, const char *key, int required,
                          const char ***out, int *n, kb_err *err);
/* Integer value of a JSON number (must be integral and within [lo, hi]). */
int json_as_int(const cJSON *item, const char *where, const char *key, long lo, long hi,
                long *out, kb_err *err);

/* 1 if s[0..n) holds the escape \u0000 (cJSON would end the string there). */
int json_has_nul_escape(const char *s, size_t n);
/* JSONL: calls fn(line_obj, lineno, ctx) for each line that is not blank
 * (spaces and tabs only). A line that is not one JSON object (after it only
 * spaces and tabs), holds a NUL byte, the escape \u0000, a byte that is not
 * UTF-8 or a key twice gives "file:LINE: ..." and stops. A non-zero return
 * from fn stops and is returned (fn fills err; the caller's error is
 * prefixed with file:line). */
typedef int (*json_line_fn)(const cJSON *obj, long lineno, void *ctx, kb_err *err);
int jsonl_foreach(const char *path, json_line_fn fn, void *ctx, kb_err *err);
/* The same with any JSON value on a line (a string, an array...): "expected
 * one JSON value per line". */
int jsonl_foreach_value(const char *path, json_line_fn fn, void *ctx, kb_err *err);

/* Reads a whole file into a malloc'ed NUL-terminated buffer. */
int file_read_all(const char *path, char **out, size_t *len, kb_err *err);
/* The same for a text file, which must be UTF-8 without a NUL byte: a NUL
 * ("FILE: byte N is NUL, expected UTF-8 text"; the text would end there
 * unseen) and bytes that are not UTF-8 ("FILE:LINE:COL: byte 0xXX is not
 * valid UTF-8, ..."; the model would read bytes that every JSON and CSV file
 * written from the text shows as U+FFFD) are refused. */
int file_read_text(const char *path, char **out, size_t *len, kb_err *err);
/* The same rule for a text given on the command line (generate's -p and
 * --system, logits' -p), as -f FILE and --jsonl have it: "OPT: byte N (0xXX)
 * is not valid UTF-8, expected UTF-8 text", N the offset from 0. (tokenize -p
 * takes any bytes on purpose: docs/TOKENIZER.md.) */
int text_check_arg(const char *s, const char *opt, kb_err *err);

#endif
