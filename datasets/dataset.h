/* dataset.h - benchmark tasks: generators and loaders produce samples.
 *
 * A task is a kb_task_ops table (one file per family in datasets/); the
 * registry maps task names to tables. The driver never branches on a task's
 * name: it asks the task for its samples, renders each turn with the model's
 * chat format (or raw), decodes, and scores with the turn's metric. */
#ifndef KB_DATASET_H
#define KB_DATASET_H

#include <cjson/cJSON.h>

#include "kernels/kb_base.h"

typedef struct kb_turn {
    char *user;          /* user message (the whole prompt text for raw tasks) */
    char *answer_prefix; /* text after the assistant header that the model continues; NULL */
    char **answers;      /* [n_answers] references */
    int n_answers;
    char *gold;          /* multi-turn golden context: appended as this turn's assistant
                            answer before the next turn (NULL: answers[0]) */
    int max_new;         /* max new tokens */
    char metric[32];     /* metric name (harness/metrics.h) */
} kb_turn;

typedef struct kb_sample {
    char task[48];        /* task name as configured (e.g. "niah_single_1") */
    char id[64];          /* unique within the task, stable for a seed */
    int chat;             /* 1: wrap in the model's chat format; 0: raw text */
    char *system;         /* system message or NULL (family default) */
    char *shared_prefix;  /* multi-request mode: the shared context, a prefix of every
                             request's user text; NULL otherwise */
    int multi_request;    /* 1: each turn is an independent request on a copy of the
                             shared prefix; 0: turns form one conversation */
    kb_turn *turns;       /* [n_turns] */
    int n_turns;
    double depth;         /* needle depth in [0, 1]; -1 if not applicable */
    int target_tokens;    /* length the generator aimed at (tokens); -1 if none */
    int truncate_to;      /* middle-truncate the user text to this many tokens; 0 = off */
    char **all_classes;   /* classification metric's class list; NULL */
    int n_classes;
} kb_sample;

typedef struct kb_sample_list {
    kb_sample *v;
    int n, cap;
} kb_sample_list;

/* What a generator may ask of the harness. */
typedef struct kb_dataset_env {
    unsigned long long seed;  /* the sweep's seed */
    const char *haystack_dir; /* --haystack DIR or NULL (Debian corpora) */
    const char *data_dir;     /* where official files live (LongBench/SCBench/RULER QA) or NULL */
    const char *configs_dir;  /* configs/ (prompt templates) */
    int n_ctx;                /* model context in tokens */
    /* Tokens the harness would feed for this sample's first turn (chat-rendered
     * or raw), so generators can fit a target length. */
    void *count_ctx;
    int (*count_tokens)(void *count_ctx, const kb_sample *s);
} kb_dataset_env;

typedef struct kb_task_ops {
    const char *name;        /* task name, e.g. "needle", "niah_single_1", "scbench_kv" */
    const char *family;      /* "needle", "ruler", "scbench", "longbench" */
    const char *const *keys; /* config keys accepted besides "task" (NULL-terminated) */
    /* Append the task's samples for this config object to out. Errors name the
     * file:line or key. */
    int (*generate)(const cJSON *cfg, const kb_dataset_env *env, kb_sample_list *out,
                    kb_err *err);
} kb_task_ops;

const kb_task_ops *task_find(const char *name);
int task_count(void);
const kb_task_ops *task_at(int i);

void sample_free(kb_sample *s);
void sample_list_free(kb_sample_list *l);

#endif
