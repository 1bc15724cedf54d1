/* test_datasets.c - the building blocks of datasets/: the seeded generator
 * (against xoshiro256** / splitmix64 outputs computed by an independent
 * Python implementation of the published algorithms), template formatting,
 * turn scoring rules and the registry. Generated prompts are tested end to
 * end in tests/py/test_datasets.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "datasets/dataset.h"
#include "datasets/ds_internal.h"
#include "datasets/rng.h"

static void test_rng_reference(void) {
    /* xoshiro256** from state {1, 2, 3, 4}: Python big-int reference */
    kb_rng r = {{1, 2, 3, 4}};
    const uint64_t want[5] = {0x2d00ull, 0x0ull, 0x5a007080ull, 0x10e0000000009d80ull,
                              0x10e0b61ce1009d80ull};
    for (int i = 0; i < 5; i++) CHECK_EQ_INT(rng_next(&r) == want[i], 1);
    /* splitmix64 seeding from 0 gives the well-known first four outputs */
    rng_seed(&r, 0);
    CHECK(r.s[0] == 0xe220a8397b1dcdafull && r.s[1] == 0x6e789e6aa1b965f4ull &&
          r.s[2] == 0x06c45d188009454full && r.s[3] == 0xf88bb8a8724c81ecull);
    CHECK(rng_next(&r) == 0x99ec5f36cb75f2b4ull);
    CHECK(rng_next(&r) == 0xbf6e1f784956452aull);
}

static void test_rng_helpers(void) {
    kb_rng r;
    rng_seed(&r, 7);
    /* bounds and a loose uniformity check: 60000 draws in 6 bins, each
     * within 5% of 10000 (the binomial sd is ~91, so 5% is > 5 sd) */
    int bins[6] = {0};
    for (int i = 0; i < 60000; i++) {
        uint64_t v = rng_below(&r, 6);
        CHECK(v < 6);
        bins[v < 6 ? v : 0]++;
    }
    for (int b = 0; b < 6; b++) CHECK_MSG(abs(bins[b] - 10000) < 500, "bin %d: %d", b, bins[b]);
    for (int i = 0; i < 1000; i++) {
        long v = rng_range(&r, -3, 3);
        CHECK(v >= -3 && v <= 3);
    }
    /* rng_sample: distinct, in range, both code paths (few of many / many of few) */
    int out[40];
    for (int rep = 0; rep < 50; rep++) {
        int n = rep % 2 ? 1000 : 45, k = rep % 2 ? 10 : 40;
        rng_sample(&r, n, k, out);
        int ok = 1;
        for (int i = 0; i < k; i++) {
            ok &= out[i] >= 0 && out[i] < n;
            for (int j = 0; j < i; j++) ok &= out[i] != out[j];
        }
        CHECK(ok);
    }
    char u[37];
    for (int i = 0; i < 20; i++) {
        rng_uuid4(&r, u);
        CHECK_EQ_INT(strlen(u), 36);
        CHECK(u[8] == '-' && u[13] == '-' && u[18] == '-' && u[23] == '-');
        CHECK(u[14] == '4');
        CHECK(strchr("89ab", u[19]) != NULL);
    }
    /* derived streams: same inputs, same stream; another label, another stream */
    kb_rng a, b, c;
    rng_derive(&a, 42, "niah_single_1", 4096, 3);
    rng_derive(&b, 42, "niah_single_1", 4096, 3);
    rng_derive(&c, 42, "niah_single_2", 4096, 3);
    uint64_t x = rng_next(&a);
    CHECK(x == rng_next(&b));
    CHECK(x != rng_next(&c));
}

/* The distributions the generators rely on, checked by counting: rng_range
 * reaches both ends (a needle key of 9999999, a prefix_suffix string of 32
 * characters); a Fisher-Yates shuffle of 3 gives each of the 6 orders; and
 * rng_sample's two paths give every value with probability k / n, in every
 * position with 1 / n, never twice. Bounds: binomial counts within 5 sd or
 * more (60000 shuffles: sd of a 1/6 count ~91, bound 500; 30000 samples:
 * sd of a k/n count <= 87, of a position count <= 70, bound 10% of the mean,
 * >= 5 sd). */
static void test_rng_distributions(void) {
    kb_rng r;
    rng_seed(&r, 11);
    int seen[7] = {0};
    for (int i = 0; i < 1000; i++) {
        long v = rng_range(&r, -3, 3);
        if (v >= -3 && v <= 3) seen[v + 3] = 1;
    }
    for (int v = 0; v < 7; v++) CHECK_MSG(seen[v], "rng_range(-3, 3) never gave %d", v - 3);
    int perm[6] = {0};
    for (int i = 0; i < 60000; i++) {
        int a[3] = {0, 1, 2};
        rng_shuffle(&r, a, 3, sizeof a[0]);
        /* the order's index: a[0] * 2 + (a[1] > a[2]) */
        perm[a[0] * 2 + (a[1] > a[2])]++;
    }
    for (int p = 0; p < 6; p++) CHECK_MSG(abs(perm[p] - 10000) < 500, "order %d: %d", p, perm[p]);
    static const int nk[2][2] = {{8, 2}, {5, 4}}; /* k * 4 <= n: redraws; else partial Fisher-Yates */
    for (int c = 0; c < 2; c++) {
        int n = nk[c][0], k = nk[c][1], reps = 30000, any[8] = {0}, first[8] = {0}, dup = 0;
        for (int rep = 0; rep < reps; rep++) {
            int out[8];
            rng_sample(&r, n, k, out);
            for (int i = 0; i < k; i++) {
                if (out[i] < 0 || out[i] >= n) {
                    dup++;
                    continue;
                }
                any[out[i]]++;
                for (int j = 0; j < i; j++) dup += out[j] == out[i];
            }
            if (out[0] >= 0 && out[0] < n) first[out[0]]++;
        }
        CHECK_MSG(!dup, "rng_sample(%d, %d): %d repeated or out of range", n, k, dup);
        for (int v = 0; v < n; v++) {
            double want_any = (double)reps * k / n, want_first = (double)reps / n;
            CHECK_MSG(fabs(any[v] - want_any) < 0.1 * want_any, "rng_sample(%d, %d): %d drawn %d times",
                      n, k, v, any[v]);
            CHECK_MSG(fabs(first[v] - want_first) < 0.1 * want_first,
                      "rng_sample(%d, %d): %d first %d times", n, k, v, first[v]);
        }
    }
}

static void test_template(void) {
    kb_err err = {0};
    char *out = NULL;
    tpl_var v[] = {{"a", "x"}, {"context", "{not a placeholder}"}};
    CHECK_EQ_INT(tpl_format("{a}-{{b}}-{a}}}", v, 2, "t", &out, &err), 0);
    CHECK_STREQ(out, "x-{b}-x}");
    free(out);
    /* substituted values are not formatted again */
    CHECK_EQ_INT(tpl_format("[{context}]", v, 2, "t", &out, &err), 0);
    CHECK_STREQ(out, "[{not a placeholder}]");
    free(out);
    CHECK_EQ_INT(tpl_format("{missing}", v, 2, "file.json: key", &out, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "file.json: key") && strstr(err.msg, "{missing}"));
    /* a placeholder is the whole name: "{cont}" is not {context} (Python's
     * "{cont}".format(context=...) raises KeyError) */
    CHECK_EQ_INT(tpl_format("{cont}", v, 2, "t", &out, &err), KB_EINPUT);
    CHECK_EQ_INT(tpl_format("a } b", v, 2, "t", &out, &err), KB_EINPUT);
    CHECK_EQ_INT(tpl_format("a { b", v, 2, "t", &out, &err), KB_EINPUT);
    /* placeholders as tpl_format reads them: "{{x}}" is the text {x} */
    CHECK(tpl_uses("What {prefix}?", "prefix"));
    CHECK(!tpl_uses("Literal {{prefix}} braces: {input}", "prefix"));
    CHECK(tpl_uses("{{{prefix}}}", "prefix")); /* "{", the placeholder, "}" */
    CHECK(!tpl_uses("{prefixes} {pre}", "prefix"));
    CHECK(!tpl_uses("{prefix", "prefix"));
}

static void test_turn_score(void) {
    kb_sample s;
    memset(&s, 0, sizeof s);
    kb_turn *t = sample_add_turn(&s);
    turn_set(t, "qa_f1", 32, "x");
    turn_add_answer(t, "Paris");
    CHECK_CLOSE(turn_score(&s, 0, "Paris\nLondon"), 2.0 / 3.0, 1e-12, 0);
    t->first_line = 1;
    CHECK_CLOSE(turn_score(&s, 0, "\n\nParis\nLondon"), 1.0, 1e-12, 0);
    t->first_line = 0;
    t->stop = kb_strdup("\n");
    CHECK_CLOSE(turn_score(&s, 0, "Paris\nLondon"), 1.0, 1e-12, 0);
    /* LongBench samsum (stop "\n" + first line): the "\n" stop token cannot
     * be the first new token (pred.py's min_length), and the score is
     * pred.lstrip("\n").split("\n")[0]; a cut at the first "\n" gave "" */
    t->first_line = 1;
    CHECK_CLOSE(turn_score(&s, 0, "\nParis\nLondon"), 1.0, 1e-12, 0);
    CHECK_CLOSE(turn_score(&s, 0, "\n\nParis"), 1.0, 1e-12, 0);
    t->first_line = 0;
    CHECK_CLOSE(turn_score(&s, 0, "\n\nParis\nLondon"), 1.0, 1e-12, 0);
    CHECK_EQ_INT(turn_stop_at("\n", 1, "\n"), -1);
    CHECK_EQ_INT(turn_stop_at("\n\n", 2, "\n"), -1);
    CHECK_EQ_INT(turn_stop_at("\n\nA\n", 4, "\n"), 3);
    CHECK_EQ_INT(turn_stop_at("A.\n\nB", 5, "\n"), 2);
    CHECK_EQ_INT(turn_stop_at("AB", 2, "\n"), -1);
    CHECK_EQ_INT(turn_stop_at("A\n", 1, "\n"), -1); /* only the first n bytes */
    CHECK_EQ_INT(turn_stop_at("x##", 3, "##"), 1);
    CHECK_EQ_INT(turn_stop_at("##x##", 5, "##"), 3);
    snprintf(t->metric2, sizeof t->metric2, "exact_match");
    CHECK_CLOSE(turn_score2(&s, 0, "the city is paris!", 1), 1.0, 1e-12, 0);
    snprintf(t->metric, sizeof t->metric, "no_such_metric");
    CHECK(turn_score(&s, 0, "Paris") < 0);
    sample_free(&s);
}

/* SCBench mf's question; expected values from Python:
 * "What is " + re.findall("The .+ is", s)[0].lower()[:-3] + "?" */
static void test_mf_prefix(void) {
    static const char *const cases[][2] = {
        {"The largest number in the list is", "What is the largest number in the list?"},
        {"Given this, The Max is here and The min is", "What is the max is here and the min?"},
        {"The x is\nThe y is", "What is the x?"},
        {"The is", NULL},
        {"The \xc3\x9c" "BER list island", "What is the \xc3\xbc" "ber list?"},
        {"no match here", NULL},
        {"TheThe x is", "What is the x?"},
        {"The \xc4\xb0 is", "What is the i\xcc\x87?"}, /* U+0130 lowers to i + U+0307 */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = scbench_mf_prefix(cases[i][0]);
        if (cases[i][1]) {
            CHECK(got != NULL);
            if (got) CHECK_STREQ(got, cases[i][1]);
        } else {
            CHECK(got == NULL);
        }
        free(got);
    }
}

static void test_registry(void) {
    static const char *const names[] = {
        "needle", "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
        "niah_multikey_2", "niah_multikey_3", "niah_multivalue", "niah_multiquery", "vt", "cwe",
        "fwe", "qa_1", "qa_2", "scbench_kv", "scbench_prefix_suffix", "scbench_vt",
        "scbench_repoqa", "scbench_qa_eng", "scbench_qa_chn", "scbench_choice_eng",
        "scbench_many_shot", "scbench_summary", "scbench_mf", "scbench_summary_with_needles",
        "scbench_repoqa_and_kv", "scbench_kv_like", "scbench_prefix_suffix_like",
        "scbench_vt_like", "scbench_mf_like", "longbench"};
    CHECK_EQ_INT(task_count(), (int)(sizeof names / sizeof names[0]));
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const kb_task_ops *o = task_find(names[i]);
        CHECK_MSG(o && !strcmp(o->name, names[i]) && o->generate && o->keys, "%s", names[i]);
    }
    CHECK(task_find("nope") == NULL);
    CHECK(task_at(task_count()) == NULL);
}

int main(void) {
    test_rng_reference();
    test_rng_helpers();
    test_rng_distributions();
    test_template();
    test_turn_score();
    test_mf_prefix();
    test_registry();
    return check_summary("test_datasets");
}
