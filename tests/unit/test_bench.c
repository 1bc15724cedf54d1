/* test_bench.c - the helpers behind `kvbench bench` and the sweep's latency
 * part (harness/bench.h): the median every timing column reports, the list
 * options, the fitting of a context to the model. Expected values are worked
 * by hand from bench.h's definitions (a median of an even count is the mean
 * of the two middle values, as Python's statistics.median). */
#include <stdint.h>

#include "check.h"
#include "harness/bench.h"

static void test_median(void) {
    double one[] = {5};
    CHECK_CLOSE(bench_median(one, 1), 5, 0, 0);
    double odd[] = {3, 1, 2};
    CHECK_CLOSE(bench_median(odd, 3), 2, 0, 0);
    /* even: the mean of the two middle values, not either of them */
    double two[] = {4, 1};
    CHECK_CLOSE(bench_median(two, 2), 2.5, 0, 0);
    double even[] = {4, 1, 3, 2};
    CHECK_CLOSE(bench_median(even, 4), 2.5, 0, 0);
    double desc[] = {9, 7, 5, 3, 1, 0};
    CHECK_CLOSE(bench_median(desc, 6), 4, 0, 0);
    double ties[] = {2, 9, 2, 1};
    CHECK_CLOSE(bench_median(ties, 4), 2, 0, 0);
}

static void test_parse_list(void) {
    int out[4];
    CHECK_EQ_INT(bench_parse_list("t", "contexts", "16,2048", out, 3, 16, 1 << 24), 2);
    CHECK_EQ_INT(out[0], 16);
    CHECK_EQ_INT(out[1], 2048);
    /* both bounds are allowed, one past either is not */
    CHECK_EQ_INT(bench_parse_list("t", "contexts", "16777216", out, 3, 16, 1 << 24), 1);
    CHECK_EQ_INT(out[0], 1 << 24);
    CHECK_EQ_INT(bench_parse_list("t", "contexts", "15", out, 3, 16, 1 << 24), -1);
    CHECK_EQ_INT(bench_parse_list("t", "contexts", "16777217", out, 3, 16, 1 << 24), -1);
    /* at most `max` values, and nothing is written past them */
    out[3] = -7;
    CHECK_EQ_INT(bench_parse_list("t", "contexts", "20,30,40", out, 3, 16, 1 << 24), 3);
    CHECK_EQ_INT(out[2], 40);
    CHECK_EQ_INT(bench_parse_list("t", "contexts", "20,30,40,50", out, 3, 16, 1 << 24), -1);
    CHECK_EQ_INT(out[3], -7);
    /* not a list of distinct integers */
    const char *bad[] = {"", "64,", ",64", "64,,128", "64,64", "12a", "a", "64 "};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK_MSG(bench_parse_list("t", "budgets", bad[i], out, 3, 1, 1 << 30) == -1, "'%s'", bad[i]);
}

static void test_context_fit(void) {
    /* bench.h: ctx itself when ctx + decode fits in n_ctx; n_ctx - decode for
     * a context at the model's limit; -1 when it cannot fit */
    CHECK_EQ_INT(bench_context_fit(496, 16, 512), 496); /* exactly fills the model */
    CHECK_EQ_INT(bench_context_fit(100, 16, 512), 100);
    CHECK_EQ_INT(bench_context_fit(497, 16, 512), 496);
    CHECK_EQ_INT(bench_context_fit(512, 16, 512), 496);
    CHECK_EQ_INT(bench_context_fit(513, 16, 512), -1);
    CHECK_EQ_INT(bench_context_fit(600, 16, 512), -1);
}

static void test_contexts_distinct(void) {
    kb_err e = {0};
    /* 8180 and 8190 both fit to 8176 with 16 decode tokens in 8192 */
    int same[] = {8180, 8190};
    CHECK_EQ_INT(bench_contexts_distinct(same, 2, 16, 8192, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "8180") && strstr(e.msg, "8190") && strstr(e.msg, "8176"), "%s", e.msg);
    int fits[] = {8176, 1024, 8190}; /* 8176 is itself, 8190 is lowered to it */
    CHECK_EQ_INT(bench_contexts_distinct(fits, 3, 16, 8192, &e), KB_EINPUT);
    int ok[] = {8190, 8000, 1024};
    CHECK_EQ_INT(bench_contexts_distinct(ok, 3, 16, 8192, &e), 0);
    /* two contexts that do not fit at all do not fit to one length (each is
     * refused on its own, as too long) */
    int none[] = {9000, 9100};
    CHECK_EQ_INT(bench_contexts_distinct(none, 2, 16, 8192, &e), 0);
}

static void test_distinct(void) {
    int in[] = {3, 1, 3, 2, 1}, out[5] = {0};
    CHECK_EQ_INT(bench_distinct(in, 5, NULL), 3);
    CHECK_EQ_INT(bench_distinct(in, 5, out), 3);
    CHECK_EQ_INT(out[0], 3);
    CHECK_EQ_INT(out[1], 1);
    CHECK_EQ_INT(out[2], 2);
}

int main(void) {
    test_median();
    test_parse_list();
    test_context_fit();
    test_contexts_distinct();
    test_distinct();
    return check_summary("bench");
}
