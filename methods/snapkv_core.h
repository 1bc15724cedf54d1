/* snapkv_core.h - SnapKV-style prompt eviction (methods.md §2, §3): the code
 * behind snapkv, snapkvpp, and RocketKV's stage 1 (rocketkv, rocketkv_mt). */
#ifndef KB_SNAPKV_CORE_H
#define KB_SNAPKV_CORE_H

#include "methods/common.h"

typedef struct kb_snap_cfg {
    int window;          /* W: observation window (queries and always-kept keys) */
    int budget;          /* tokens kept per row, window included (prompt_budget) */
    kb_gqa_policy gqa;   /* PER_HEAD, GROUP_SUM or GROUP_MEAN */
    kb_pooling pooling;  /* max or avg */
    const kb_method_params *kparams; /* kernel or adaptive table (mc_kernel_for) */
} kb_snap_cfg;

/* What one compression did (for logs and tests). */
typedef struct kb_snap_info {
    int evicted;   /* 1 if the rows were longer than the budget */
    int Wo;        /* window used */
    int kernel;    /* pooling kernel used */
} kb_snap_info;

/* Compresses `rows` source streams into dst[0..rows) (dst rows are emptied
 * first). Row i's query heads: for group policies rows = Hkv and row g scores
 * with the G heads of group g; for PER_HEAD rows = Hq and row h scores with
 * head h alone. src[i] may alias between rows (per-head rows built from one
 * KV stream). Window queries qwin [Wq][Hq][D] at positions qpos[Wq]; the last
 * Wo = min(W, Wq, n, budget) of them are used, and the last Wo slots of each
 * row are the window tokens (their positions must match qpos). A row of
 * n <= budget tokens is copied unchanged. Kept slots stay chronological, the
 * window is appended. dst must not alias any src row. */
int snap_compress(const kb_snap_cfg *cfg, const kb_kernels *kk, int Hq, int Hkv, int D,
                  const kb_kvstream *const *src, int rows, const float *qwin,
                  const int32_t *qpos, int Wq, kb_kvstream *dst, kb_snap_info *info,
                  const char *who, kb_err *err);

/* The kept slot indices of one row (ascending, window included) without
 * building streams: idx must hold budget entries; returns the count. Used by
 * snap_compress and by the tests. */
int snap_select_row(const kb_snap_cfg *cfg, const kb_kernels *kk, int D, const kb_kvstream *s,
                    const float *Q, int ldq, int nh, const int32_t *qpos, int Wq, int32_t *idx,
                    kb_snap_info *info);

/* Common validation of the SnapKV family: budget >= 1, window default 32,
 * kernel default (odd) or the adaptive table (default table when none given),
 * GQA default. Messages name the method and key. */
int snap_validate_common(kb_method_params *p, const char *who, int kernel_default,
                         kb_gqa_policy gqa_default, kb_err *err);
/* snap_validate_common, and a budget of at least the window (SnapKV and
 * SnapKV++ alone, which always keep the window). */
int snapm_validate(kb_method_params *p, const char *who, int kernel_default, kb_gqa_policy gqa_default,
                   kb_err *err);

/* A method state "SnapKV eviction + dense attention over what is kept": the
 * shared implementation of `snapkv` and `snapkvpp` (they differ only in
 * defaults). p->budget tokens kept per row, window included. */
int snapm_init(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill_view *pv,
               const char *who, void **state, kb_err *err);
void snapm_decode(void *state, const float *q, const float *k, const float *v, int32_t pos,
                  float *out);
const kb_kvstream *snapm_retained(void *state, int qhead);
const kb_kvstream *snapm_cache(void *state, int row, int *n_rows);
int snapm_extend(void *state, const kb_prefill_view *pv, kb_err *err);
long snapm_mark(void *state);
void snapm_rollback(void *state, long mark);
void snapm_account(void *state, kb_account *acc);
void snapm_destroy(void *state);

/* Runs stage 1 again over rows + a new turn's tokens (multi-turn eviction
 * that compounds): s[row] <- compress(s[row] + new tokens of its KV head),
 * with the new turn's window queries. */
int snap_recompress(const kb_snap_cfg *cfg, const kb_kernels *kk, int Hq, int Hkv, int D,
                    kb_kvstream *s, int rows, const kb_prefill_view *pv, kb_snap_info *info,
                    const char *who, kb_err *err);

#endif
