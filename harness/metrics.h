/* metrics.h - every scoring metric of benchmarks.md, by name.
 *
 * A sample's score is in [0, 1]; a task's score is metric_task_score() of the
 * sample scores (100 x mean, rounded to 2 decimals as the reference scripts
 * do). Each metric reproduces the reference implementation it is named after,
 * including its Unicode handling and documented quirks: docs/METRICS.md lists
 * the definitions, the reference each one matches and the known differences.
 *
 * How answers are combined: unless the metric says otherwise, the sample score
 * is the maximum over the answers. string_match_all variants average over the
 * answers (all must appear); scbench_choice reads the answers as one label
 * [option text, option letter]; repoqa reads answers[0] as the asked function
 * and the other answers as the other functions of the same repository. */
#ifndef KB_METRICS_H
#define KB_METRICS_H

typedef struct kb_metric {
    const char *name;
    const char *description;
    /* Score of one prediction against its references. classes: the
     * classification list (LongBench all_classes) or NULL. pred and answers
     * are UTF-8 (ill-formed bytes count as U+FFFD). n_answers >= 1. */
    double (*score)(const char *pred, const char *const *answers, int n_answers,
                    const char *const *classes, int n_classes);
    int needs_classes; /* 1: classes are required (classification) */
} kb_metric;

const kb_metric *metric_find(const char *name);
int metric_count(void);
const kb_metric *metric_at(int i);

/* Python's round(x, ndigits): round half to even on the exact binary value. */
double py_round(double x, int ndigits);
/* Task score as LongBench's scorer reports it: round(100 * sum / n, 2). */
double metric_task_score(double sum, int n);
/* LongBench's first-line rule (trec, triviaqa, samsum):
 * pred.lstrip("\n").split("\n")[0], malloc'ed. */
char *metric_first_line(const char *pred);

#endif
