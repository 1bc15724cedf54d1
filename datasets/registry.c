/* registry.c - task names -> task tables, in the order docs/DATASETS.md lists
 * them. Each family file exports its table(s). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/dataset.h"
#include "harness/json.h"

extern const kb_task_ops needle_task;
extern const kb_task_ops ruler_tasks[];
extern const int ruler_task_count;
extern const kb_task_ops scbench_tasks[];
extern const int scbench_task_count;
extern const kb_task_ops longbench_task;

typedef struct {
    const kb_task_ops *v;
    const int *n; /* NULL: a single table */
} family;

static const family families[] = {
    {&needle_task, NULL},
    {ruler_tasks, &ruler_task_count},
    {scbench_tasks, &scbench_task_count},
    {&longbench_task, NULL},
};

int task_count(void) {
    int n = 0;
    for (size_t f = 0; f < KB_ARRAY_LEN(families); f++) n += families[f].n ? *families[f].n : 1;
    return n;
}

const kb_task_ops *task_at(int i) {
    if (i < 0) return NULL;
    for (size_t f = 0; f < KB_ARRAY_LEN(families); f++) {
        int n = families[f].n ? *families[f].n : 1;
        if (i < n) return &families[f].v[i];
        i -= n;
    }
    return NULL;
}

const kb_task_ops *task_find(const char *name) {
    for (int i = 0; i < task_count(); i++)
        if (!strcmp(task_at(i)->name, name)) return task_at(i);
    return NULL;
}

int tasks_generate(const cJSON *tasks, const char *where, const kb_dataset_env *env, int max_samples,
                   kb_sample_list *all, kb_err *err) {
    int i = 0;
    for (const cJSON *t = tasks->child; t; t = t->next, i++) {
        char at[1200];
        snprintf(at, sizeof at, "%s: tasks[%d]", where, i);
        const char *name;
        int rc = json_get_string(t, at, "task", 1, NULL, &name, err);
        if (rc) return rc;
        const kb_task_ops *ops = task_find(name);
        if (!ops) {
            char known[2048] = "";
            for (int k = 0; k < task_count(); k++) {
                strncat(known, k ? ", " : "", sizeof known - strlen(known) - 1);
                strncat(known, task_at(k)->name, sizeof known - strlen(known) - 1);
            }
            return kb_fail(err, KB_EINPUT, "%s: unknown task '%s' (known: %s)", at, name, known);
        }
        kb_sample_list one = {0};
        if ((rc = ops->generate(t, env, &one, err))) {
            sample_list_free(&one);
            return kb_err_prefix(err, "%s", at);
        }
        int take = max_samples && one.n > max_samples ? max_samples : one.n;
        for (int k = 0; k < one.n; k++) {
            if (k >= take) {
                sample_free(&one.v[k]);
                continue;
            }
            if (all->n == all->cap) {
                all->cap = all->cap ? 2 * all->cap : 64;
                all->v = KB_REALLOC(all->v, (size_t)all->cap * sizeof *all->v);
            }
            all->v[all->n++] = one.v[k];
        }
        free(one.v);
    }
    return 0;
}
