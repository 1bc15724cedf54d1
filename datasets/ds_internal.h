/* ds_internal.h - helpers shared by the task families in datasets/ (not used
 * outside datasets/ and cmd_prompts). */
#ifndef KB_DS_INTERNAL_H
#define KB_DS_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "datasets/dataset.h"
#include "datasets/rng.h"

/* ---- growable string ---- */
typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

void sb_put(sbuf *b, const char *s);
void sb_putn(sbuf *b, const char *s, size_t n);
void sb_putc(sbuf *b, char c);
void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Returns the string (malloc'ed, "" if empty) and resets b. */
char *sb_take(sbuf *b);
void sb_free(sbuf *b);

/* ---- samples ---- */
/* Appends a zeroed sample with the "not applicable" defaults (depth -1,
 * target/prompt tokens -1, context_words -1). */
kb_sample *samples_push(kb_sample_list *l);
kb_turn *sample_add_turn(kb_sample *s);
void turn_add_answer(kb_turn *t, const char *a);
void turn_set(kb_turn *t, const char *metric, int max_new, const char *kind);
/* Moves every sample of src to the end of dst (src becomes empty). */
void samples_move(kb_sample_list *dst, kb_sample_list *src);

/* ---- config helpers (errors name the key; the caller adds the location) ---- */
/* Checks cfg's keys against "task" + keys. */
int ds_check_keys(const cJSON *cfg, const char *const *keys, kb_err *err);
/* An array of distinct integers in [lo, hi] under key (or a single integer);
 * *out malloc'ed. Absent: *n = 0. */
int ds_get_int_list(const cJSON *cfg, const char *key, long lo, long hi, long **out, int *n,
                    kb_err *err);
/* path relative to env->data_dir unless absolute; malloc'ed. */
char *ds_data_path(const kb_dataset_env *env, const char *path);
/* Copies path into dst[cap]; a path that does not fit is refused (KB_EINPUT:
 * "WHAT: a path of N bytes, expected fewer than CAP") instead of cut: a cut
 * path names another file, which could exist and be read instead. */
int ds_path_copy(char *dst, size_t cap, const char *path, const char *what, kb_err *err);
int ds_file_exists(const char *path);
/* A sample id from a data file (key: its name there) must fit kb_sample.id:
 * a longer one is refused (KB_EINPUT: "key 'KEY': N bytes, expected at most
 * 63 (a sample id)"), since cut, two samples could get one id. */
int ds_id_check(const char *id, const char *key, kb_err *err);

/* ---- prompt wording (configs/prompts/<family>.json or the task's "prompts") ---- */
typedef struct ds_wording {
    cJSON *root;      /* the whole file */
    char path[1024];  /* which file */
} ds_wording;

/* Loads the task's wording file: cfg["prompts"] if given (a path), else
 * <configs>/prompts/<family>.json. */
int wording_load(const cJSON *cfg, const kb_dataset_env *env, const char *family,
                 ds_wording *w, kb_err *err);
void wording_free(ds_wording *w);
/* The string at section.key (section NULL: top level). Missing -> KB_EINPUT
 * naming the file and key. */
int wording_get(const ds_wording *w, const char *section, const char *key, const char **out,
                kb_err *err);

/* Python str.format-style substitution: {name} -> value, {{ and }} -> braces.
 * Unknown names and stray braces are errors naming `where`. */
typedef struct tpl_var {
    const char *name;
    const char *value;
} tpl_var;
int tpl_format(const char *tpl, const tpl_var *vars, int nvars, const char *where, char **out,
               kb_err *err);
/* Whether tpl has the placeholder {name}, read as tpl_format reads it ("{{name}}"
 * is literal text). */
int tpl_uses(const char *tpl, const char *name);

/* ---- length fitting ---- */
/* Counts the first-turn tokens of s with env's counter (-1: no counter). */
int ds_count(const kb_dataset_env *env, const kb_sample *s);

/* configs/ directory to use (env->configs_dir, $KVBENCH_CONFIGS, or
 * <dir of the binary>/../configs, or "configs"). */
const char *ds_configs_dir(const kb_dataset_env *env);
/* SCBench mf's question made from a turn's input, or NULL (scbench.c). */
char *scbench_mf_prefix(const char *input);

#endif
