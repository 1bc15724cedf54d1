/* hybrid_core.h - hybrid sparse attention (methods.md §4): page min/max
 * summaries kept incrementally over a set of Hkv streams, per-step
 * approximate scores, token-level top-k and exact attention over the chosen
 * slots. The code behind hybrid, rocketkv (over the kept cache), rocketkv_mt
 * (over the working set) and sparq (p = 1, plus SparQ's original options). */
#ifndef KB_HYBRID_CORE_H
#define KB_HYBRID_CORE_H

#include "kernels/select.h"
#include "methods/common.h"

typedef struct kb_hybrid {
    int Hq, Hkv, G, D;
    int p;                 /* page size (1: scores read K directly, no summaries) */
    int r;                 /* approximation dims */
    int k;                 /* slots attended per selection row (min with the cache length) */
    int per_head;          /* 1: each query head selects alone (rows = Hq); 0: per KV group */
    int group_sum;         /* 1: group score = sum over heads (gpt-fast), else mean */
    int local_window;      /* always attend the last N slots (SparQ original; 0 = off) */
    int reallocate_mean_v; /* SparQ original: out = a*attn + (1-a)*mean(V) */
    kb_pages *pg;          /* [Hkv] page min/max; with p == 1 a dim-major copy of K */
    double *vsum;          /* [Hkv][D] sum of V over each stream (reallocate_mean_v) */
    int *vsum_n;           /* [Hkv] slots summed */
    int rows;              /* selection rows: Hq (per_head) or Hkv */
    float *hw;             /* scratch: per-head weights [rows][G][cap] (reallocate_mean_v) */
    int cap;
    int32_t *idx;          /* scratch: chosen slots [rows][kcap] */
    int kcap;              /* idx's row stride: min(max(1, k), the longest stream so far),
                              grown with the streams (k may exceed any context) */
    int *cnt;              /* scratch: slots chosen per row [rows] */
    int32_t *dims;         /* scratch: chosen dims [rows][r] */
    unsigned char *dmark;  /* scratch [D] */
} kb_hybrid;

void hybrid_init(kb_hybrid *h, int Hq, int Hkv, int D, int p, int r, int k, int per_head,
                 int group_sum, int local_window, int reallocate_mean_v);
void hybrid_free(kb_hybrid *h);
/* Bring summaries up to date with the streams (incremental: only new slots). */
void hybrid_sync(kb_hybrid *h, const kb_kvstream *s, const kb_kernels *kk);
/* The streams were rebuilt (compaction): the next sync recomputes everything. */
void hybrid_reset(kb_hybrid *h);
/* The streams were truncated: summaries follow (last page recomputed). */
void hybrid_truncate(kb_hybrid *h, const kb_kvstream *s, const kb_kernels *kk);
/* One decode step over s [Hkv]: appends the new token (k, v [Hkv][D] at
 * pos), brings the summaries up to date (as
 * hybrid_sync; each KV group's append and upkeep run in the parallel select
 * phase and are timed as upkeep, within selection), writes out [Hq][D] and
 * the step's selection and reads into c->acc. */
void hybrid_attend(kb_hybrid *h, const kb_kernels *kk, kb_mcommon *c, const float *q,
                   const float *k, const float *v, int32_t pos, kb_kvstream *s, float *out);
/* Bytes of the summaries (and mean-V sums). */
double hybrid_meta_bytes(const kb_hybrid *h);

/* A method state "every token kept + hybrid attention over all of them":
 * the shared implementation of `hybrid` (p, r from §1.1 with T = S) and
 * `sparq` (p = 1). layer_init builds it from a resolved budget; the other
 * entries are the kb_method_ops functions. */
int hybm_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
              const kb_budget *bud, const char *who, void **state, kb_err *err);
void hybm_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                 float *out);
const kb_kvstream *hybm_retained(void *state, int qhead);
const kb_kvstream *hybm_cache(void *state, int row, int *n_rows);
int hybm_extend(void *state, const kb_prefill_view *pv, kb_err *err);
long hybm_mark(void *state);
void hybm_rollback(void *state, long mark);
void hybm_account(void *state, kb_account *acc);
void hybm_destroy(void *state);

#endif
