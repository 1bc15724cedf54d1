/* test_metrics.c - worked examples for the metrics and their Python-exact
 * helpers. Expected values: computed by hand from the definitions (noted in
 * each case) or printed by the Python reference packages (rouge 1.0.1,
 * difflib) and copied here. The broad agreement check (>= 100 cases per
 * metric against tests/reference/metrics_ref.py) is tests/py/test_metrics.py. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness/metrics.h"
#include "harness/metrics_impl.h"
#include "harness/textnorm.h"

static double score(const char *metric, const char *pred, const char *a0, const char *a1) {
    const char *ans[2] = {a0, a1};
    return metric_find(metric)->score(pred, ans, a1 ? 2 : 1, NULL, 0);
}

static void test_round(void) {
    /* Python: round(2.675, 2), round(0.125, 2), round(0.135, 2), round(1.005, 2) */
    CHECK(py_round(2.675, 2) == 2.67);
    CHECK(py_round(0.125, 2) == 0.12);
    CHECK(py_round(0.135, 2) == 0.14);
    CHECK(py_round(1.005, 2) == 1.0);
    CHECK(metric_task_score(2.5, 3) == 83.33); /* round(100 * 2.5 / 3, 2) */
    CHECK(isnan(metric_task_score(0, 0)));
    char *f = metric_first_line("\n\nfirst\nsecond");
    CHECK_STREQ(f, "first");
    free(f);
}

static char *u8(ustr *u) { return utf8_from_u32(u->v, u->n); }

static void test_textnorm(void) {
    ustr in = {0}, out = {0};
    ustr_from_utf8(&in, "The Cat's  hat, an apple!");
    normalize_answer(&out, in.v, in.n);
    char *s = u8(&out);
    CHECK_STREQ(s, "cats hat apple"); /* punctuation, articles, spaces */
    free(s);
    ustr_from_utf8(&in, "\xce\x91\xce\xa3 \xce\xa3"); /* "ΑΣ Σ": final sigma only after a letter */
    ustr_lower(&out, in.v, in.n);
    s = u8(&out);
    CHECK_STREQ(s, "\xce\xb1\xcf\x82 \xcf\x83");
    free(s);
    ustr_from_utf8(&in, "stra\xc3\x9f" "e"); /* "straße".upper() == "STRASSE" */
    ustr_upper(&out, in.v, in.n);
    s = u8(&out);
    CHECK_STREQ(s, "STRASSE");
    free(s);
    /* ill-formed UTF-8: one U+FFFD per maximal subpart (CPython "replace") */
    ustr_from_utf8(&in, "a\xe2\x82" "b\xff");
    CHECK_EQ_INT(in.n, 4);
    CHECK(in.v[1] == 0xFFFD && in.v[2] == 'b' && in.v[3] == 0xFFFD);
    CHECK(uni_isspace(0x3000) && uni_isspace(0x1C) && !uni_isspace(0x200B));
    CHECK_EQ_INT(uni_decimal(0x0663), 3); /* ARABIC-INDIC DIGIT THREE */
    ustr_free(&in);
    ustr_free(&out);
}

static void test_sequences(void) {
    ustr a = {0}, b = {0};
    ustr_from_utf8(&a, "abcd");
    ustr_from_utf8(&b, "bcde");
    /* Python: SequenceMatcher(None, "abcd", "bcde").ratio() == 0.75 */
    CHECK_CLOSE(difflib_ratio(a.v, a.n, b.v, b.n), 0.75, 0, 0);
    ustr_free(&a);
    ustr_free(&b);
    /* rouge 1.0.1: get_scores(["the cat sat"], ["the cat"])["rouge-l"]["f"]
     * = 2 * (2/3 * 1) / (2/3 + 1 + 1e-8) = 0.7999999952000001 */
    CHECK_CLOSE(rouge_l_f("the cat sat", "the cat"), 0.7999999952000001, 1e-15, 0);
    CHECK(rouge_l_f("", "the cat") == 0.0);
    CHECK(rouge_l_f("...", "the cat") == 0.0);
    /* BLEU of identical 4+ token sequences is 1 */
    CHECK_CLOSE(bleu_method4("a b c d e", "a b c d e"), 1.0, 1e-12, 0);
    char *s = repoqa_sanitize("Sure:\n```python\ndef f():\n    pass\n```\nbye");
    CHECK_STREQ(s, "def f():\n    pass\n");
    free(s);
}

static void test_worked_examples(void) {
    /* classification quirk: classes a, ab, abc all occur in "abc"; removing
     * "a" while iterating skips "ab", so [ab, abc] remain: 1/2 (not 1) */
    const char *cls[] = {"a", "ab", "abc"};
    const char *gold[] = {"abc"};
    CHECK_CLOSE(metric_find("classification")->score("abc", gold, 1, cls, 3), 0.5, 0, 0);
    /* code_sim: difflib ratio("x = 1", "x = 2") = 2*4/10 = 0.8 */
    CHECK_CLOSE(score("code_sim", "x = 1\n", "x = 2", NULL), 0.8, 1e-12, 0);
    CHECK_CLOSE(score("code_sim", "# comment\nx = 2", "x = 2", NULL), 1.0, 0, 0);
    /* needle */
    CHECK(score("exact_match", "The pass key is 1234567.", "1234567", NULL) == 1.0);
    CHECK_CLOSE(score("partial_match", "12345", "1234567", NULL), 5.0 / 7.0, 1e-12, 0);
    /* RULER: 1 of 2 references present */
    CHECK(score("string_match_all", "  alpha\x01", "ALPHA", "beta") == 0.5);
    CHECK(score("string_match_part", "alpha", "ALPHA", "beta") == 1.0);
    /* SCBench vt: 1/3 rounded to 0.33 */
    const char *three[] = {"x", "y", "z"};
    CHECK(metric_find("scbench_string_match_all")->score("X", three, 3, NULL, 0) == 0.33);
    /* count: two numbers, one right */
    CHECK(score("count", "3 or 4", "3", NULL) == 0.5);
    CHECK(score("retrieval", "Paragraph 7", "Paragraph 7", NULL) == 1.0);
    CHECK(score("scbench_passkey", "key: 00123 then 5", "00123", NULL) == 1.0);
    CHECK(score("scbench_mf", "It is 3.0", "3", NULL) == 1.0);
    CHECK(score("scbench_choice", "The answer is: C", "Rome", "C") == 1.0);
    CHECK(score("qa_f1", "the Eiffel tower", "Eiffel Tower", NULL) == 1.0);
}

int main(void) {
    test_round();
    test_textnorm();
    test_sequences();
    test_worked_examples();
    CHECK(metric_find("no_such") == NULL);
    CHECK(metric_count() >= 23 && metric_at(metric_count()) == NULL);
    return check_summary("test_metrics");
}
