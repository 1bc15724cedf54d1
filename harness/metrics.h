/* metrics.h - every scoring metric of benchmarks.md, by name.
 * A sample's score is in [0, 1] (the table reports 100 x mean). */
#ifndef KB_METRICS_H
#define KB_METRICS_H

typedef struct kb_metric {
    const char *name;
    const char *description;
    /* Score of one prediction against its references (max over answers where
     * the definition says so). classes: the classification list or NULL. */
    double (*score)(const char *pred, const char *const *answers, int n_answers,
                    const char *const *classes, int n_classes);
} kb_metric;

const kb_metric *metric_find(const char *name);
int metric_count(void);
const kb_metric *metric_at(int i);

#endif
