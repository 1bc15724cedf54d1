/* methods_brute.h - brute-force references of the methods, written for the
 * tests from methods.md alone (not from the library code): plain loops in
 * double precision, everything recomputed from scratch at every step (pages
 * rebuilt, dims and tokens ranked by a full sort, softmax over explicit
 * arrays). Caches are lists of token ids into a history of every token seen;
 * a token's id is its sequence position. */
#ifndef KB_METHODS_BRUTE_H
#define KB_METHODS_BRUTE_H

#include "kernels/kb_base.h"

typedef struct br_hist {
    int Hq, Hkv, D, G;
    int n, cap;     /* tokens held */
    double *K, *V;  /* [cap][Hkv][D] values as stored (rounded to the storage dtype) */
} br_hist;

void br_hist_init(br_hist *h, int Hq, int Hkv, int D);
void br_hist_free(br_hist *h);
/* Appends one token: k, v [Hkv][D] f32, rounded to dtype as the cache stores them. */
void br_hist_push(br_hist *h, const float *k, const float *v, kb_dtype dtype);
static inline const double *br_k(const br_hist *h, int t, int g) {
    return h->K + ((size_t)t * h->Hkv + g) * h->D;
}
static inline const double *br_v(const br_hist *h, int t, int g) {
    return h->V + ((size_t)t * h->Hkv + g) * h->D;
}

/* Rank order helper: sorts ids[0..n) by score descending, ties to the lower id. */
void br_sort_desc(int *ids, int n, const double *score);
/* Top-k of score[0..n): ids ascending; returns min(k, n). */
int br_topk(const double *score, int n, int k, int *out);

/* softmax(q . K[tok]/sqrt(D)) . V[tok] over the n tokens of KV head g. */
void br_attend(const br_hist *h, int g, const float *q, const int *tok, int n, double *out);

/* SnapKV stage 1 over one row: candidate tokens list[0..n) (chronological),
 * query heads heads[0..nh) of the row, window queries qwin [Wq][Hq][D] at
 * positions qpos. agg: 0 sum, 1 mean. Writes kept token ids (chronological,
 * window last) and returns their count; score (optional, [n]) gets the
 * pooled prefix scores used to rank (for near-tie checks), *n_prefix the
 * prefix length (0 when nothing was evicted). */
int br_snap_keep(const br_hist *h, int g, const int *heads, int nh, int agg, const float *qwin,
                 const int *qpos, int Wq, int W, const int *list, int n, int budget, int K,
                 int avg_pool, int *kept, double *score, int *n_prefix);

/* Hybrid step (methods.md §4) over cache tokens list[0..n) of KV head g, for
 * the nh query heads q [nh][D]: returns the count and the chosen slots
 * (indices into list, ascending); slot_score (optional, [n]) the group score
 * of every slot; head_w (optional, [nh][n]) each head's softmax. local: the
 * last `local` slots are always chosen. */
int br_hybrid(const br_hist *h, int g, const float *q, int nh, const int *list, int n, int p,
              int r, int k, int local, int *sel, double *slot_score, double *head_w);

/* QUEST step: page bounds per head (agg 0 per head with nh = 1, 1 sum, 2 mean),
 * the last page always, the top npages-1 other pages; returns the slot count;
 * page_score (optional) [npages]. */
int br_quest(const br_hist *h, int g, const float *q, int nh, int agg, const int *list, int n,
             int P, int npages_sel, int *sel, double *page_score);

/* Exact top-k: agg 0 = one head (nh = 1) by logits, 1 = sum / 2 = mean of the
 * heads' exact softmax probabilities. score (optional) [n]. */
int br_exact_topk(const br_hist *h, int g, const float *q, int nh, int agg, const int *list,
                  int n, int k, int *sel, double *score);

/* The RocketKV split of methods.md §1.1, written again for the tests. */
void br_rocket_split(int S, int B, int N_new, int D, double alpha_or_neg, int *T, int *pb,
                     int *p, int *r, int *k);

/* Compares an implementation's chosen set a[0..na) with the reference's
 * b[0..nb) (both candidate indices, ascending). Equal -> 1. Otherwise, with
 * tol > 0, accepts (returns 2) when every differing element lies within tol
 * (relative to the k-th best reference score, plus 1e-30 of the largest
 * score: values f32 cannot tell from 0) of the boundary: a near tie that
 * float rounding can decide either way; never two elements the reference
 * scores exactly equal (the index rule decides those). Returns 0 on a real
 * mismatch. */
int br_sets_match(const int *a, int na, const int *b, int nb, const double *score, int ncand,
                  double tol);

#endif
