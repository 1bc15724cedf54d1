/* fidelity.h - the fidelity instruments of methods.md §10 (optional, per
 * decode step and layer; costly, off by default).
 *
 * Against the same step's exact attention over the full history: recall of
 * the oracle's top-k (k = the number of tokens the method attended for that
 * head), the exact attention mass the attended tokens cover, and the relative
 * output error ||o - o*|| / ||o*||. Against a Full-KV run of the same sample
 * (teacher-forced on Full KV's tokens; the driver's job): KL of the
 * next-token distributions and top-1 agreement, from two logit vectors. */
#ifndef KB_FIDELITY_H
#define KB_FIDELITY_H

#include "methods/method.h"

typedef struct kb_fidelity {
    double recall;   /* mean over query heads of |attended ∩ oracle top-k| / k */
    double mass;     /* mean over query heads of the exact softmax mass on the attended tokens */
    double rel_err;  /* mean over query heads of ||o - o*|| / ||o*|| */
    double attended; /* mean tokens attended per query head */
} kb_fidelity;

/* One layer, one decode step, after ops->decode and ops->account(acc):
 * q [Hq][D] the step's query, out [Hq][D] the method's output, full [Hkv]
 * streams holding the exact full history of the sequence (every token,
 * chronological, the current one included; e.g. a Full-KV state's
 * retained()). The attended tokens come from acc->selected_pos, or, for a
 * method that attends every slot (acc->sel_streams == 0), from
 * ops->decode_cache(). Matched to the history by position. */
int fidelity_step(const kb_method_ops *ops, void *state, const kb_account *acc, const float *q,
                  const float *out, const kb_kvstream *full, int Hq, int Hkv, int D,
                  kb_fidelity *f, kb_err *err);

/* KL(softmax(ref) || softmax(x)) over n logits, in nats; terms where ref's
 * probability is 0 count 0; NaN if a logit is NaN. */
double fidelity_kl(const float *ref, const float *x, int n);
/* 1 if the argmax (first on ties) of a and b agree; 0 if either holds a NaN. */
int fidelity_top1_agree(const float *a, const float *b, int n);

#endif
