/* dataset.h - benchmark tasks: generators and loaders produce samples.
 *
 * A task is a kb_task_ops table (one file per family in datasets/); the
 * registry maps task names to tables. The driver never branches on a task's
 * name: it asks the task for its samples (generate() with the task's config
 * object), renders each turn with the model's chat format (or raw), decodes,
 * and scores with the turn's metric (turn_score()). docs/DATASETS.md lists the
 * tasks, their config keys and the prompt wording files.
 *
 * Rendering contract (harness/render.c):
 *   - first turn: chat ? chat_first_turn(fmt, system, turns[0].user) : user,
 *     then turns[0].answer_prefix appended; when truncate_to > 0 the user
 *     text is middle-truncated to truncate_to tokens before wrapping (keep the
 *     first and the last halves, as LongBench and SCBench do);
 *   - multi-turn (multi_request = 0): after turn t is decoded and scored, its
 *     generated tokens are dropped and turn t's gold (or answers[0]; or the
 *     model's own answer with --own-answers) is appended as the assistant
 *     message, followed by turn t+1's user message (chat_next_turn);
 *   - multi-request (multi_request = 1): every turn's user text starts with
 *     shared_prefix; each turn is an independent request that reuses the KV
 *     of the shared prefix's tokens (a copy per request);
 *   - stop: generation also stops when the decoded text ends with turn.stop
 *     and something other than newlines came before it (turn_stop_at: as
 *     LongBench's min_length forbids the "\n" stop token as the first new
 *     token); turn_score() scores the text before the first such stop.
 * Samples of multi-turn tasks have no answer_prefix on turns after the first. */
#ifndef KB_DATASET_H
#define KB_DATASET_H

#include <cjson/cJSON.h>

#include "kernels/kb_base.h"

typedef struct kb_turn {
    char *user;          /* user message (the whole prompt text for raw tasks) */
    char *answer_prefix; /* text after the assistant header that the model continues; NULL */
    char **answers;      /* [n_answers] references (see harness/metrics.h for how a
                            metric combines them) */
    int n_answers;
    char *gold;          /* multi-turn golden context: appended as this turn's assistant
                            answer before the next turn (NULL: answers[0]) */
    int max_new;         /* max new tokens */
    char metric[32];     /* metric name (harness/metrics.h) */
    char metric2[32];    /* a second metric scored on the same prediction and reported in
                            its own column (needle: partial_match); "" if none */
    char *stop;          /* extra stop string (e.g. "\n" for samsum) or NULL */
    int first_line;      /* 1: score only the first line of the prediction after leading
                            newlines (LongBench trec, triviaqa, samsum) */
    char kind[48];       /* what this turn asks, for per-turn reports: the task name, or
                            the sub-task in mixed SCBench tasks ("scbench_passkey") */
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
    double depth;         /* needle depth in [0, 1] (of the asked needle); -1 if not
                             applicable */
    int target_tokens;    /* length the generator aimed at (tokens, prompt + max_new);
                             -1 if none */
    int prompt_tokens;    /* first-turn prompt tokens as counted by env->count_tokens when
                             the sample was made; -1 if not counted */
    int context_words;    /* needle: haystack length N in words; -1 otherwise */
    int truncate_to;      /* middle-truncate the user text to this many tokens; 0 = off */
    char **all_classes;   /* classification metric's class list; NULL */
    int n_classes;
    char *provenance;     /* where the text came from, for run.json: wording file and
                             haystack corpus or data file, e.g. "wording=configs/prompts/
                             ruler.json; haystack=fortunes-min:/usr/share/games/fortunes" */
} kb_sample;

typedef struct kb_sample_list {
    kb_sample *v;
    int n, cap;
} kb_sample_list;

/* What a generator may ask of the harness. */
typedef struct kb_dataset_env {
    unsigned long long seed;  /* the sweep's seed */
    const char *haystack_dir; /* --haystack DIR or NULL (Debian corpora) */
    const char *haystack_from; /* what named haystack_dir, for messages (e.g. "key 'haystack'");
                                  NULL: "--haystack" */
    const char *data_dir;     /* where official files live (LongBench/SCBench/RULER QA) or NULL;
                                 relative "file"/"dir" keys of a task resolve against it */
    const char *configs_dir;  /* configs/ (prompt wording in configs/prompts/); NULL: found
                                 from $KVBENCH_CONFIGS or next to the binary */
    int n_ctx;                /* model context in tokens (0: unknown) */
    /* Tokens the harness would feed for this sample's first turn (chat-rendered
     * or raw, answer prefix included), so generators can fit a target length.
     * Returns -1 on failure. NULL: no counter (length-fitted tasks then fail
     * with a clear error). */
    void *count_ctx;
    int (*count_tokens)(void *count_ctx, const kb_sample *s);
} kb_dataset_env;

typedef struct kb_task_ops {
    const char *name;        /* task name, e.g. "needle", "niah_single_1", "scbench_kv" */
    const char *family;      /* "needle", "ruler", "scbench", "longbench" */
    const char *const *keys; /* config keys accepted besides "task" (NULL-terminated) */
    /* Append the task's samples for this config object to out. Checks the
     * object's keys (unknown key or wrong type -> KB_EINPUT naming the key).
     * Errors name the key, or the file:line of a data file; the caller
     * prefixes the config location. On error nothing is appended. */
    int (*generate)(const cJSON *cfg, const kb_dataset_env *env, kb_sample_list *out,
                    kb_err *err);
} kb_task_ops;

const kb_task_ops *task_find(const char *name);
int task_count(void);
const kb_task_ops *task_at(int i);

void sample_free(kb_sample *s);
void sample_list_free(kb_sample_list *l);

/* The samples of a config's task objects (`tasks`, a JSON array), in order,
 * appended to all: each object's task generates its samples, of which the
 * first max_samples are kept (0: all; a sweep config's "max_samples",
 * docs/CONFIG.md). Errors are prefixed "WHERE: tasks[I]" and leave all as
 * it was before that task object. `prompts` and the sweep (gen_samples,
 * harness/driver.c) both call it, so prompts prints exactly the samples the
 * sweep runs. */
int tasks_generate(const cJSON *tasks, const char *where, const kb_dataset_env *env, int max_samples,
                   kb_sample_list *all, kb_err *err);

/* Score of turn t for a decoded prediction: applies the turn's stop string and
 * first-line rule, then its metric (metric2 when second != 0) with the
 * sample's class list. Returns 0..1, or -1 if the metric is unknown or unset. */
double turn_score(const kb_sample *s, int t, const char *pred);
/* Where `stop` (non-empty) ends generation in text[0..n): the offset of its
 * first occurrence that has a byte other than '\n' before it, or -1. The
 * decode stops as soon as this is >= 0; the score cuts the prediction there. */
long turn_stop_at(const char *text, size_t n, const char *stop);
double turn_score2(const kb_sample *s, int t, const char *pred, int second);

/* Which prose/word corpus the generators use with this --haystack value
 * (e.g. "fortunes-min:/usr/share/games/fortunes"), for run.json. */
int haystack_describe(const char *haystack_dir, char *buf, size_t cap, kb_err *err);

#endif
