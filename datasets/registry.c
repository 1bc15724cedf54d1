/* registry.c - task names -> task tables, in the order docs/DATASETS.md lists
 * them. Each family file exports its table(s). */
#include <string.h>

#include "datasets/dataset.h"

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
