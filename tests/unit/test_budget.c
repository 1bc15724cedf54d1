/* test_budget.c - the budget accountant against the worked table of
 * methods.md §1.1 (and rocketkv-notes.md §1) and edge cases whose expected
 * values were computed independently with the released compress() formulas
 * in Python (python3 -c, floats = IEEE doubles, int() truncation). */
#include "check.h"
#include "methods/budget.h"

typedef struct {
    int S, B;
    double alpha;
    int T, prompt_budget;
    double c2;
    int p, r, k;
} row;

/* D = 128, N_new = 128. alpha and c2 are printed rounded in the spec: compare
 * to the printed precision (alpha 3 decimals, c2 2 decimals). */
static const row table[] = {
    {16128, 256, .559, 1593, 1465, 6.22, 3, 61, 128},
    {16128, 4096, .319, 10421, 10293, 2.54, 2, 100, 2048},
    {32000, 512, .558, 3185, 3057, 6.22, 3, 61, 256},
    {96128, 256, .713, 1401, 1273, 5.47, 3, 70, 128},
    /* the two extra rows of rocketkv-notes.md §1 */
    {64128, 1024, .558, 6371, 6243, 6.22, 3, 61, 512},
    {128000, 2048, .558, 12741, 12613, 6.22, 3, 61, 1024},
};

static void test_worked_table(void) {
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const row *t = &table[i];
        kb_budget b;
        kb_err e = {0};
        CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, t->B, t->S, 128, 128, 0, 0, &b, &e), 0);
        CHECK_CLOSE(b.alpha, t->alpha, 0.0005, 0);
        CHECK_EQ_INT(b.T, t->T);
        CHECK_EQ_INT(b.prompt_budget, t->prompt_budget);
        CHECK_CLOSE(b.c2, t->c2, 0.005, 0);
        CHECK_EQ_INT(b.p, t->p);
        CHECK_EQ_INT(b.r, t->r);
        CHECK_EQ_INT(b.r_raw, t->r);
        CHECK_EQ_INT(b.k, t->k);
        /* topk mode keeps p and r and attends B */
        kb_budget bt;
        CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TOPK, t->B, t->S, 128, 128, 0, 0, &bt, &e), 0);
        CHECK_EQ_INT(bt.p, t->p);
        CHECK_EQ_INT(bt.r, t->r);
        CHECK_EQ_INT(bt.T, t->T);
        CHECK_EQ_INT(bt.k, t->B);
        CHECK_EQ_INT(bt.mode, KB_BUDGET_TOPK);
    }
}

static void test_edges(void) {
    kb_budget b;
    kb_err e = {0};
    /* alpha's cap of 0.8 (methods.md §1.1): c = 32768/16 = 2048 gives
     * 0.2 + 0.06 * 11 = 0.86 uncapped; capped, T = int(32768 / 2048^0.8) = 73
     * (uncapped it would be 46), prompt_budget 57, c2 = 73/16, p = 3,
     * r = int(128 * 3 / 4.5625) = 84, k = 8 (python3, compress()'s formulas) */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 16, 32768, 16, 128, 0, 0, &b, &e), 0);
    CHECK_CLOSE(b.alpha, 0.8, 0, 0);
    CHECK_EQ_INT(b.T, 73);
    CHECK_EQ_INT(b.prompt_budget, 57);
    CHECK_CLOSE(b.c2, 4.5625, 0, 0);
    CHECK_EQ_INT(b.p, 3);
    CHECK_EQ_INT(b.r, 84);
    CHECK_EQ_INT(b.k, 8);
    /* S <= B: c = 1, p = 1, r = D, still k = B/2 */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 2048, 1000, 128, 128, 0, 0, &b, &e), 0);
    CHECK_CLOSE(b.c, 1.0, 0, 0);
    CHECK_CLOSE(b.alpha, 0.2, 1e-12, 0);
    CHECK_EQ_INT(b.T, 1000);
    CHECK_EQ_INT(b.prompt_budget, 872);
    CHECK_CLOSE(b.c2, 1.0, 0, 0);
    CHECK_EQ_INT(b.p, 1);
    CHECK_EQ_INT(b.r, 128);
    CHECK_EQ_INT(b.k, 1024);
    /* B = 16 (the smallest): T floored at min(2 N_new, S) */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 16, 16128, 128, 128, 0, 0, &b, &e), 0);
    CHECK_CLOSE(b.alpha, 0.7986367954099949, 1e-12, 0);
    CHECK_EQ_INT(b.T, 256);
    CHECK_EQ_INT(b.prompt_budget, 128);
    CHECK_CLOSE(b.c2, 16.0, 1e-12, 0);
    CHECK_EQ_INT(b.p, 4);
    CHECK_EQ_INT(b.r, 32);
    CHECK_EQ_INT(b.k, 8);
    /* the floor of T again (S = 2000, N_new = 512) */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 16, 2000, 512, 128, 0, 0, &b, &e), 0);
    CHECK_EQ_INT(b.T, 1024);
    CHECK_EQ_INT(b.prompt_budget, 512);
    CHECK_EQ_INT(b.p, 8);
    CHECK_EQ_INT(b.r, 16);
    /* p = ceil(sqrt(c2)) > c2 -> p = 1 (c2 = 1.1328125) */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 256, 300, 128, 128, 0, 0, &b, &e), 0);
    CHECK_EQ_INT(b.T, 290);
    CHECK_EQ_INT(b.prompt_budget, 162);
    CHECK_CLOSE(b.c2, 1.1328125, 1e-12, 0);
    CHECK_EQ_INT(b.p, 1);
    CHECK_EQ_INT(b.r, 112);
    /* r clamped to [1, D]: D = 2 gives int(2*3/6.22) = 0 -> 1 (the released
     * accuracy code would use 0 dims) */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 256, 16128, 128, 2, 0, 0, &b, &e), 0);
    CHECK_EQ_INT(b.r_raw, 0);
    CHECK_EQ_INT(b.r, 1);
    /* fixed alpha (the stage-split ablation) */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 256, 16128, 128, 128, 1, 0.5, &b, &e), 0);
    CHECK_EQ_INT(b.T, 2031);
    CHECK_EQ_INT(b.prompt_budget, 1903);
    CHECK_EQ_INT(b.p, 3);
    CHECK_EQ_INT(b.r, 48);
    /* alpha = 1 (the top of its range [0, 1]) is accepted: T = int(16128 / 63)
     * = 256 = min(2 N_new, S), prompt_budget 128, c2 = 1 -> p = 1, r = D
     * (worked with the compress() formulas in Python) */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 256, 16128, 128, 128, 1, 1.0, &b, &e), 0);
    CHECK_EQ_INT(b.T, 256);
    CHECK_EQ_INT(b.prompt_budget, 128);
    CHECK_EQ_INT(b.p, 1);
    CHECK_EQ_INT(b.r, 128);
    /* alpha = 0 is the SparQ recipe's T = S */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 256, 16128, 128, 128, 1, 0.0, &b, &e), 0);
    CHECK_EQ_INT(b.T, 16128);
    CHECK_EQ_INT(b.p, 8);
    CHECK_EQ_INT(b.r, 16);
    /* errors name the method and the key */
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 8, 16128, 128, 128, 0, 0, &b, &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "rocketkv: key 'budget': expected an integer >= 16, got 8");
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, -4, 16128, 128, 128, 0, 0, &b, &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "rocketkv: key 'budget': expected an integer >= 1, got -4");
    CHECK_EQ_INT(budget_rocketkv(KB_BUDGET_TRAFFIC, 256, 16128, 128, 128, 1, 1.5, &b, &e), KB_EINPUT);
    CHECK(strstr(e.msg, "key 'alpha'") != NULL);
}

static void test_other_methods(void) {
    kb_budget b;
    kb_err e = {0};
    /* hybrid alone: T = S, c2 = 63, p = 8, r = int(128*8/63) = 16 */
    CHECK_EQ_INT(budget_hybrid(KB_BUDGET_TRAFFIC, 256, 16128, 128, 128, &b, &e), 0);
    CHECK_EQ_INT(b.T, 16128);
    CHECK_CLOSE(b.c2, 63.0, 1e-12, 0);
    CHECK_EQ_INT(b.p, 8);
    CHECK_EQ_INT(b.r, 16);
    CHECK_EQ_INT(b.k, 128);
    /* page-size override recomputes r for the new p: int(128*4/63) = 8 */
    CHECK_EQ_INT(budget_override(&b, 0, 4, 0, "method 'hybrid'", &e), 0);
    CHECK_EQ_INT(b.p, 4);
    CHECK_EQ_INT(b.r, 8);
    CHECK_EQ_INT(b.r_raw, 8);
    CHECK_EQ_INT(budget_override(&b, 0, 0, 200, "method 'hybrid'", &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "method 'hybrid': key 'r': 200 exceeds the head dim D = 128");
    /* r = D is allowed, D + 1 is not (the boundary of the check) */
    CHECK_EQ_INT(budget_override(&b, 0, 0, 128, "method 'hybrid'", &e), 0);
    CHECK_EQ_INT(b.r, 128);
    CHECK_EQ_INT(b.r_raw, 128); /* a given r is the unclamped value too (stats.json's r_raw) */
    CHECK_EQ_INT(budget_override(&b, 0, 0, 129, "method 'hybrid'", &e), KB_EINPUT);
    CHECK_STREQ(e.msg, "method 'hybrid': key 'r': 129 exceeds the head dim D = 128");
    /* hybrid with S < B: c2 = max(1, S/B) = 1 (not 1000/2048), so p = 1 and
     * r_raw = int(128 * 1 / 1) = 128 = D; k = B/2 */
    CHECK_EQ_INT(budget_hybrid(KB_BUDGET_TRAFFIC, 2048, 1000, 128, 128, &b, &e), 0);
    CHECK_CLOSE(b.c2, 1.0, 0, 0);
    CHECK_EQ_INT(b.p, 1);
    CHECK_EQ_INT(b.r_raw, 128);
    CHECK_EQ_INT(b.r, 128);
    CHECK_EQ_INT(b.k, 1024);
    /* sparq recipe: r = int(D*B/S) = int(128/63) = 2, k = B/2; clamped at B = 16 */
    CHECK_EQ_INT(budget_sparq(KB_BUDGET_TRAFFIC, 256, 16128, 128, 128, 0, &b, &e), 0);
    CHECK_EQ_INT(b.p, 1);
    CHECK_EQ_INT(b.r, 2);
    CHECK_EQ_INT(b.k, 128);
    CHECK_EQ_INT(budget_sparq(KB_BUDGET_TRAFFIC, 16, 16128, 128, 128, 0, &b, &e), 0);
    CHECK_EQ_INT(b.r_raw, 0);
    CHECK_EQ_INT(b.r, 1);
    /* r is computed as rocket.py computes it (c2 = S/B in double): one below
     * the exact quotient where D*B/S is an integer that the double misses.
     * Python: int(128 * 1 / (2048 / 1872)) = int(116.99999999999999) = 116,
     * while 128 * 1872 / 2048 = 117 exactly. */
    CHECK_EQ_INT(budget_sparq(KB_BUDGET_TRAFFIC, 1872, 2048, 128, 128, 0, &b, &e), 0);
    CHECK_EQ_INT(b.r, 116);
    CHECK_EQ_INT(b.k, 936);
    CHECK_EQ_INT(budget_sparq(KB_BUDGET_TOPK, 256, 16128, 128, 128, 0, &b, &e), 0);
    CHECK_EQ_INT(b.r, 32);
    CHECK_EQ_INT(b.k, 256);
    CHECK_EQ_INT(budget_sparq(KB_BUDGET_TOPK, 256, 16128, 128, 128, 48, &b, &e), 0);
    CHECK_EQ_INT(b.r, 48);
    /* quest: P = max(16, pow2(ceil(2L/B))), pages = max(1, (B/2)/P) */
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TRAFFIC, 256, 16000, 128, &b, &e), 0);
    CHECK_EQ_INT(b.P, 128); /* ceil(32000/256) = 125 -> 128 */
    CHECK_EQ_INT(b.n_pages, 1);
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TRAFFIC, 256, 1000, 128, &b, &e), 0);
    CHECK_EQ_INT(b.P, 16); /* ceil(2000/256) = 8 -> 16 */
    CHECK_EQ_INT(b.n_pages, 8);
    CHECK_EQ_INT(b.k, 128);
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TRAFFIC, 16, 1000, 128, &b, &e), 0);
    CHECK_EQ_INT(b.P, 128); /* ceil(2000/16) = 125 */
    CHECK_EQ_INT(b.n_pages, 1);
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TOPK, 256, 16000, 128, &b, &e), 0);
    CHECK_EQ_INT(b.P, 16);
    CHECK_EQ_INT(b.n_pages, 16);
    CHECK_EQ_INT(budget_override(&b, 1, 32, 0, "method 'quest'", &e), 0);
    CHECK_EQ_INT(b.P, 32);
    CHECK_EQ_INT(b.n_pages, 8);
    /* ceil, not floor, of 2L/B: 2*1032/128 = 16.125 -> 17 -> P = 32 (a floor
     * would give 16 -> P = 16), pages = max(1, 64/32) = 2 */
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TRAFFIC, 128, 1032, 128, &b, &e), 0);
    CHECK_EQ_INT(b.P, 32);
    CHECK_EQ_INT(b.n_pages, 2);
    CHECK_EQ_INT(b.k, 64);
    /* 2L/B exactly 16 (L = 1024, B = 128): P = 16, not 32; pages = 64/16 = 4 */
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TRAFFIC, 128, 1024, 128, &b, &e), 0);
    CHECK_EQ_INT(b.P, 16);
    CHECK_EQ_INT(b.n_pages, 4);
    /* topk mode below 32: max(1, floor(B/16)) = 1 page of 16 (methods.md §1) */
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TOPK, 31, 16000, 128, &b, &e), 0);
    CHECK_EQ_INT(b.P, 16);
    CHECK_EQ_INT(b.n_pages, 1);
    CHECK_EQ_INT(b.k, 16);
    CHECK_EQ_INT(budget_quest(KB_BUDGET_TOPK, 32, 16000, 128, &b, &e), 0);
    CHECK_EQ_INT(b.n_pages, 2);
    CHECK_EQ_INT(budget_next_pow2(1), 1);
    CHECK_EQ_INT(budget_next_pow2(125), 128);
    CHECK_EQ_INT(budget_next_pow2(128), 128);
}

int main(void) {
    test_worked_table();
    test_edges();
    test_other_methods();
    return check_summary("budget");
}
