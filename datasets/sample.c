/* sample.c - samples: construction helpers, freeing, scoring a turn; string
 * buffers and config helpers shared by the task families. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/ds_internal.h"
#include "harness/json.h"
#include "harness/metrics.h"

/* ---------------------------------------------------------------- sbuf */

static void sb_grow(sbuf *b, size_t extra) {
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra + 1) cap *= 2;
    b->s = KB_REALLOC(b->s, cap);
    b->cap = cap;
}

void sb_putn(sbuf *b, const char *s, size_t n) {
    sb_grow(b, n);
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = 0;
}

void sb_put(sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

void sb_putc(sbuf *b, char c) { sb_putn(b, &c, 1); }

void sb_printf(sbuf *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n > 0) {
        sb_grow(b, (size_t)n);
        vsnprintf(b->s + b->n, (size_t)n + 1, fmt, ap2);
        b->n += (size_t)n;
    }
    va_end(ap2);
}

char *sb_take(sbuf *b) {
    char *s = b->s ? b->s : kb_strdup("");
    b->s = NULL;
    b->n = b->cap = 0;
    return s;
}

void sb_free(sbuf *b) {
    free(b->s);
    b->s = NULL;
    b->n = b->cap = 0;
}

/* ---------------------------------------------------------------- samples */

kb_sample *samples_push(kb_sample_list *l) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->v = KB_REALLOC(l->v, (size_t)l->cap * sizeof *l->v);
    }
    kb_sample *s = &l->v[l->n++];
    memset(s, 0, sizeof *s);
    s->depth = -1;
    s->target_tokens = -1;
    s->prompt_tokens = -1;
    s->context_words = -1;
    return s;
}

kb_turn *sample_add_turn(kb_sample *s) {
    s->turns = KB_REALLOC(s->turns, (size_t)(s->n_turns + 1) * sizeof *s->turns);
    kb_turn *t = &s->turns[s->n_turns++];
    memset(t, 0, sizeof *t);
    return t;
}

void turn_add_answer(kb_turn *t, const char *a) {
    t->answers = KB_REALLOC(t->answers, (size_t)(t->n_answers + 1) * sizeof *t->answers);
    t->answers[t->n_answers++] = kb_strdup(a);
}

void turn_set(kb_turn *t, const char *metric, int max_new, const char *kind) {
    snprintf(t->metric, sizeof t->metric, "%s", metric);
    snprintf(t->kind, sizeof t->kind, "%s", kind);
    t->max_new = max_new;
}

void samples_move(kb_sample_list *dst, kb_sample_list *src) {
    for (int i = 0; i < src->n; i++) {
        kb_sample *s = samples_push(dst);
        *s = src->v[i];
    }
    free(src->v);
    memset(src, 0, sizeof *src);
}

void sample_free(kb_sample *s) {
    if (!s) return;
    for (int t = 0; t < s->n_turns; t++) {
        kb_turn *tu = &s->turns[t];
        free(tu->user);
        free(tu->answer_prefix);
        for (int a = 0; a < tu->n_answers; a++) free(tu->answers[a]);
        free(tu->answers);
        free(tu->gold);
        free(tu->stop);
    }
    free(s->turns);
    free(s->system);
    free(s->shared_prefix);
    for (int c = 0; c < s->n_classes; c++) free(s->all_classes[c]);
    free(s->all_classes);
    free(s->provenance);
    memset(s, 0, sizeof *s);
}

void sample_list_free(kb_sample_list *l) {
    if (!l) return;
    for (int i = 0; i < l->n; i++) sample_free(&l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

long turn_stop_at(const char *text, size_t n, const char *stop) {
    size_t sl = strlen(stop), lead = 0;
    while (lead < n && text[lead] == '\n') lead++;
    /* a match must start after the first byte that is not a newline */
    for (size_t i = lead + 1; sl && i + sl <= n; i++)
        if (!memcmp(text + i, stop, sl)) return (long)i;
    return -1;
}

double turn_score(const kb_sample *s, int t, const char *pred) {
    return turn_score2(s, t, pred, 0);
}

double turn_score2(const kb_sample *s, int t, const char *pred, int second) {
    const kb_turn *tu = &s->turns[t];
    const kb_metric *m = metric_find(second ? tu->metric2 : tu->metric);
    if (!m) return -1;
    char *p = kb_strdup(pred ? pred : "");
    if (tu->stop && *tu->stop) {
        long at = turn_stop_at(p, strlen(p), tu->stop);
        if (at >= 0) p[at] = 0;
    }
    if (tu->first_line) {
        char *f = metric_first_line(p);
        free(p);
        p = f;
    }
    static const char *const none[1] = {""};
    double v = tu->n_answers
                   ? m->score(p, (const char *const *)tu->answers, tu->n_answers,
                              (const char *const *)s->all_classes, s->n_classes)
                   : m->score(p, none, 1, (const char *const *)s->all_classes, s->n_classes);
    free(p);
    return v;
}

/* ---------------------------------------------------------------- config helpers */

int ds_check_keys(const cJSON *cfg, const char *const *keys, kb_err *err) {
    static const char *const task_key[] = {"task", NULL};
    return json_check_keys(cfg, "task config", task_key, keys, err);
}

int ds_get_int_list(const cJSON *cfg, const char *key, long lo, long hi, long **out, int *n,
                    kb_err *err) {
    *out = NULL;
    *n = 0;
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, key);
    if (!v) return 0;
    if (cJSON_IsNumber(v)) {
        long x;
        int rc = json_as_int(v, "task config", key, lo, hi, &x, err);
        if (rc) return rc;
        *out = KB_MALLOC(sizeof **out);
        (*out)[0] = x;
        *n = 1;
        return 0;
    }
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) == 0)
        return kb_fail(err, KB_EINPUT,
                       "task config: key '%s': expected a non-empty array of integers in "
                       "[%ld, %ld]",
                       key, lo, hi);
    int cnt = cJSON_GetArraySize(v), i = 0;
    long *arr = KB_MALLOC((size_t)cnt * sizeof *arr);
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        char k[96];
        snprintf(k, sizeof k, "%s[%d]", key, i);
        int rc = json_as_int(c, "task config", k, lo, hi, &arr[i], err);
        for (int j = 0; j < i && !rc; j++) /* the same samples again, with the same ids */
            if (arr[j] == arr[i])
                rc = kb_fail(err, KB_EINPUT, "task config: key '%s': %ld appears twice (each value makes "
                             "its own samples, and these would repeat with the same ids)", key, arr[i]);
        if (rc) {
            free(arr);
            return rc;
        }
    }
    *out = arr;
    *n = cnt;
    return 0;
}

int ds_file_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

char *ds_data_path(const kb_dataset_env *env, const char *path) {
    if (path[0] == '/' || !env->data_dir || !*env->data_dir || ds_file_exists(path))
        return kb_strdup(path);
    sbuf b = {0};
    sb_printf(&b, "%s/%s", env->data_dir, path);
    return sb_take(&b);
}

int ds_path_copy(char *dst, size_t cap, const char *path, const char *what, kb_err *err) {
    size_t n = strlen(path);
    if (n < cap) {
        memcpy(dst, path, n + 1);
        return 0;
    }
    return kb_fail(err, KB_EINPUT, "%s: %.60s...: a path of %zu bytes, expected fewer than %zu", what, path, n, cap);
}

int ds_id_check(const char *id, const char *key, kb_err *err) {
    size_t n = strlen(id), cap = sizeof ((kb_sample *)0)->id;
    if (n < cap) return 0;
    return kb_fail(err, KB_EINPUT, "key '%s': %zu bytes, expected at most %zu (a sample id)", key, n, cap - 1);
}

int ds_count(const kb_dataset_env *env, const kb_sample *s) {
    if (!env->count_tokens) return -1;
    return env->count_tokens(env->count_ctx, s);
}
