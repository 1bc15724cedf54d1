/* budget.c - the shared budget accountant (budget.h, methods.md §1).
 *
 * The RocketKV split follows the released accuracy code's compress() to the
 * bit: Python floats are IEEE doubles, int() truncates toward zero, ** is
 * libm pow, so the same expressions in double give the same integers. */
#include "methods/budget.h"

#include <math.h>
#include <stdio.h>

void budget_clear(kb_budget *b) {
    b->mode = KB_BUDGET_TRAFFIC;
    b->B = b->S = b->N_new = b->D = b->L = -1;
    b->c = b->alpha = b->c2 = -1;
    b->T = b->prompt_budget = b->p = b->r = b->r_raw = b->k = b->P = b->n_pages = -1;
}

long budget_next_pow2(long x) {
    long p = 1;
    while (p < x) p *= 2;
    return p;
}

static int check_shape(const char *who, int B, int S, int N_new, int D, kb_err *err) {
    if (B < 1) return kb_fail(err, KB_EINPUT, "%s: key 'budget': expected an integer >= 1, got %d", who, B);
    if (S < 1) return kb_fail(err, KB_EINPUT, "%s: max sequence S must be >= 1, got %d", who, S);
    if (N_new < 0) return kb_fail(err, KB_EINPUT, "%s: N_new must be >= 0, got %d", who, N_new);
    if (D < 1) return kb_fail(err, KB_EINPUT, "%s: head dim D must be >= 1, got %d", who, D);
    return 0;
}

/* p and r of §1.1 from c2; r clamped to [1, D]. */
static void stage2_shape(kb_budget *b) {
    int p = (int)ceil(sqrt(b->c2));
    if ((double)p > b->c2) p = 1;
    b->p = p;
    b->r_raw = (int)((double)b->D * p / b->c2);
    b->r = KB_MAX(1, KB_MIN(b->D, b->r_raw));
}

int budget_rocketkv(kb_budget_mode mode, int B, int S, int N_new, int D, int alpha_fixed,
                    double alpha, kb_budget *b, kb_err *err) {
    budget_clear(b);
    int rc = check_shape("rocketkv", B, S, N_new, D, err);
    if (rc) return rc;
    if (B < 16)
        return kb_fail(err, KB_EINPUT, "rocketkv: key 'budget': expected an integer >= 16, got %d",
                       B);
    if (alpha_fixed && !(alpha >= 0 && alpha <= 1))
        return kb_fail(err, KB_EINPUT, "rocketkv: key 'alpha': expected \"auto\" or a number in [0, 1], got %g",
                       alpha);
    b->mode = mode;
    b->B = B;
    b->S = S;
    b->N_new = N_new;
    b->D = D;
    b->c = fmax(1.0, (double)S / B);
    b->alpha = alpha_fixed ? alpha : fmin(0.2 + 0.06 * log2(b->c), 0.8);
    long T = (long)((double)S / pow(b->c, b->alpha));
    T = KB_MAX(T, (long)KB_MIN(2L * N_new, (long)S));
    b->T = (int)T;
    b->prompt_budget = b->T - N_new;
    b->c2 = fmax(1.0, (double)b->T / B);
    stage2_shape(b);
    b->k = mode == KB_BUDGET_TOPK ? B : B / 2;
    return 0;
}

int budget_hybrid(kb_budget_mode mode, int B, int S, int N_new, int D, kb_budget *b,
                  kb_err *err) {
    budget_clear(b);
    int rc = check_shape("hybrid", B, S, N_new, D, err);
    if (rc) return rc;
    if (B < 16)
        return kb_fail(err, KB_EINPUT, "hybrid: key 'budget': expected an integer >= 16, got %d", B);
    b->mode = mode;
    b->B = B;
    b->S = S;
    b->N_new = N_new;
    b->D = D;
    b->c = fmax(1.0, (double)S / B);
    b->alpha = 0;
    b->T = S;
    b->c2 = fmax(1.0, (double)S / B);
    stage2_shape(b);
    b->k = mode == KB_BUDGET_TOPK ? B : B / 2;
    return 0;
}

int budget_sparq(kb_budget_mode mode, int B, int S, int N_new, int D, int r_topk,
                 kb_budget *b, kb_err *err) {
    budget_clear(b);
    int rc = check_shape("sparq", B, S, N_new, D, err);
    if (rc) return rc;
    if (B < 16)
        return kb_fail(err, KB_EINPUT, "sparq: key 'budget': expected an integer >= 16, got %d", B);
    b->mode = mode;
    b->B = B;
    b->S = S;
    b->N_new = N_new;
    b->D = D;
    b->c = fmax(1.0, (double)S / B);
    b->alpha = 0;
    b->T = S;
    b->c2 = b->c;
    b->p = 1;
    if (mode == KB_BUDGET_TOPK) {
        b->r_raw = r_topk > 0 ? r_topk : KB_MAX(1, D / 4);
        b->k = B;
    } else {
        /* rocket.py with chunk_size forced to 1: r = int(D * 1 / c2) */
        b->r_raw = (int)((double)D * 1 / b->c2);
        b->k = B / 2;
    }
    b->r = KB_MAX(1, KB_MIN(D, b->r_raw));
    return 0;
}

int budget_quest(kb_budget_mode mode, int B, int L, int D, kb_budget *b, kb_err *err) {
    budget_clear(b);
    if (B < 1) return kb_fail(err, KB_EINPUT, "quest: key 'budget': expected an integer >= 1, got %d", B);
    if (L < 0) return kb_fail(err, KB_EINPUT, "quest: prompt length L must be >= 0, got %d", L);
    b->mode = mode;
    b->B = B;
    b->L = L;
    b->D = D;
    if (mode == KB_BUDGET_TOPK) {
        b->P = 16;
        b->n_pages = KB_MAX(1, B / 16);
    } else {
        long need = (2L * L + B - 1) / B; /* ceil(2L/B) */
        b->P = (int)KB_MAX(16L, budget_next_pow2(KB_MAX(1L, need)));
        b->n_pages = KB_MAX(1, (B / 2) / b->P);
    }
    b->k = b->n_pages * b->P;
    return 0;
}

int budget_override(kb_budget *b, int quest, int page_size, int r, const char *who, kb_err *err) {
    if (page_size < 0)
        return kb_fail(err, KB_EINPUT, "%s: key 'page_size': expected an integer >= 1, got %d", who,
                       page_size);
    if (r < 0) return kb_fail(err, KB_EINPUT, "%s: key 'r': expected an integer >= 1, got %d", who, r);
    if (quest) {
        if (page_size > 0) {
            b->P = page_size;
            b->n_pages = b->mode == KB_BUDGET_TOPK ? KB_MAX(1, b->B / page_size)
                                                   : KB_MAX(1, (b->B / 2) / page_size);
            b->k = b->n_pages * b->P;
        }
        return 0;
    }
    if (r > b->D)
        return kb_fail(err, KB_EINPUT, "%s: key 'r': %d exceeds the head dim D = %d", who, r, b->D);
    if (page_size > 0) {
        b->p = page_size;
        b->r_raw = (int)((double)b->D * page_size / b->c2);
        b->r = KB_MAX(1, KB_MIN(b->D, b->r_raw));
    }
    if (r > 0) b->r = b->r_raw = r;
    return 0;
}

const char *budget_describe(const kb_budget *b) {
    static char buf[256];
    snprintf(buf, sizeof buf,
             "mode=%s S=%d B=%d alpha=%.3f T=%d prompt_budget=%d c2=%.3f p=%d r=%d k=%d P=%d pages=%d",
             b->mode == KB_BUDGET_TOPK ? "topk" : "traffic", b->S, b->B, b->alpha, b->T,
             b->prompt_budget, b->c2, b->p, b->r, b->k, b->P, b->n_pages);
    return buf;
}
