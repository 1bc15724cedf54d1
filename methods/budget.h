/* budget.h - the shared budget accountant (methods.md §1).
 *
 * One function per way a method turns the user's token budget B into its own
 * knobs (RocketKV's split of B between the two stages, QUEST's page size and
 * page count, SparQ's dims, ...). Pure arithmetic on the sequence shape
 * (S, N_new, D, L), no model state, so the tests can reproduce the worked
 * table of methods.md §1.1 exactly and every method of a sweep reads its
 * numbers from one place.
 *
 * Unit: one token-equivalent = K and V of one token of one KV head = 2·D
 * elements. In "traffic" mode B bounds what one decode step READS per KV head;
 * in "topk" mode B is the number of tokens attended. */
#ifndef KB_BUDGET_H
#define KB_BUDGET_H

#include "kernels/kb_base.h"
#include "methods/method.h"

/* Resolved budget parameters of one (method, B, sequence shape). Fields a
 * method does not use are -1. */
typedef struct kb_budget {
    kb_budget_mode mode; /* traffic or topk */
    int B;               /* token budget (>= 1) */
    int S;               /* max sequence = min(L_prompt + N_new, n_ctx) */
    int N_new;           /* max new tokens (per turn) */
    int D;               /* head dim */
    int L;               /* prompt length seen by the method (QUEST's page rule) */
    double c;            /* overall compression max(1, S / B) */
    double alpha;        /* share of log c given to stage 1 (auto or fixed) */
    int T;               /* tokens kept after stage 1, room for N_new included (S: no stage 1) */
    int prompt_budget;   /* prompt tokens stage 1 keeps per row, window included */
    double c2;           /* stage-2 compression max(1, T / B) */
    int p;               /* hybrid page size in slots */
    int r;               /* head dims of the approximation, in [1, D] */
    int r_raw;           /* r before the clamp (the released accuracy code does not clamp) */
    int k;               /* tokens attended per selection row per step (min with the cache
                            length at run time) */
    int P;               /* QUEST page size */
    int n_pages;         /* QUEST pages attended per step (the current token's page included) */
} kb_budget;

/* All fields -1 (mode traffic). */
void budget_clear(kb_budget *b);

/* methods.md §1.1 verbatim (the released compress()): c, alpha (auto =
 * min(0.2 + 0.06·log2 c, 0.8) unless alpha_fixed), T, prompt_budget, c2, p, r
 * (clamped to [1, D], raw value kept), k = B/2 (B in topk mode). Requires
 * B >= 16, S >= 1, 0 <= N_new, D >= 1. */
int budget_rocketkv(kb_budget_mode mode, int B, int S, int N_new, int D, int alpha_fixed,
                    double alpha, kb_budget *b, kb_err *err);

/* `hybrid` alone: stage 2 over the full cache, T = S (the split with alpha = 0),
 * c2 = max(1, S/B), p and r as §1.1, k = B/2 (B in topk mode). */
int budget_hybrid(kb_budget_mode mode, int B, int S, int N_new, int D, kb_budget *b,
                  kb_err *err);

/* SparQ: traffic mode = the RocketKV authors' recipe (p = 1, r = int(D·B/S)
 * clamped to [1, D], k = B/2); topk mode: r = r_topk (0 = D/4), k = B. */
int budget_sparq(kb_budget_mode mode, int B, int S, int N_new, int D, int r_topk,
                 kb_budget *b, kb_err *err);

/* QUEST: traffic mode P = max(16, next power of 2 of ceil(2L/B)), pages =
 * max(1, floor((B/2)/P)); topk mode P = 16, pages = max(1, floor(B/16)).
 * k = pages·P. */
int budget_quest(kb_budget_mode mode, int B, int L, int D, kb_budget *b, kb_err *err);

/* Overrides from the config (0 = keep): a page size replaces p (hybrid
 * family) and r is then recomputed by the §1.1 formula for that p unless r is
 * overridden too; for QUEST (quest != 0) it replaces P and the page count is
 * recomputed. r > D is an error naming `who` and the key. */
int budget_override(kb_budget *b, int quest, int page_size, int r, const char *who, kb_err *err);

/* Smallest power of two >= x (x >= 1). */
long budget_next_pow2(long x);

/* One line "S=.. B=.. T=.. ..." for logs (static buffer). */
const char *budget_describe(const kb_budget *b);

#endif
