/* test_json.c - the JSON reader's rules (harness/json.h, docs/CONFIG.md) and
 * the option-value helpers of harness/cli.h, against references that do not
 * come from the code under test:
 *   - numbers: every string of up to 5 characters over "01-+.eE", in three
 *     places of a document, is accepted exactly when it matches RFC 8259's
 *     number grammar (a POSIX regex here; Python's json.loads gave the same
 *     verdict on all 58,821 documents when this was written), and a refusal by the number rule names the place and says
 *     "a leading zero" exactly for -?0 followed by a digit;
 *   - 2^53, \u0000, duplicate keys, UTF-8, --set values, JSONL lines and the
 *     typed getters: cases worked by hand from CONFIG.md and json.h;
 *   - cli.h: bounds are inclusive, whole strings only, as cli.h says (the
 *     refusals print their "kvbench t: --n expects ..." lines on stderr).
 * Run from anywhere (files go to a mkdtemp directory). */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "harness/cli.h"
#include "harness/json.h"

static char dir[256];

/* json_parse of text: 0 or KB_EINPUT; *msg gets the error message. */
static int parse(const char *text, char *msg, size_t cap) {
    cJSON *j = NULL;
    kb_err err = {0};
    int rc = json_parse(text, strlen(text), "mem", &j, &err);
    if (msg) snprintf(msg, cap, "%s", rc ? err.msg : "");
    cJSON_Delete(j);
    return rc;
}

static int has(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

/* ---- numbers: brute force against the RFC 8259 grammar ------------------------------ */

static void test_numbers_brute_force(void) {
    regex_t rfc, lead;
    CHECK(regcomp(&rfc, "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$", REG_EXTENDED | REG_NOSUB) == 0);
    CHECK(regcomp(&lead, "^-?0[0-9]", REG_EXTENDED | REG_NOSUB) == 0);
    static const char alpha[] = "01-+.eE";
    const int na = (int)strlen(alpha);
    /* where the number goes, and the line:col its refusal must name */
    static const char *const forms[] = {"%s", "[1, %s]", "{\"k\": \"07\",\n \"x\": %s}"};
    static const char *const places[] = {"mem:1:1: the number ", "mem:1:5: the number ",
                                         "mem:2:7: the number "};
    int accepted = 0, number_refusals = 0, leading = 0, mismatches = 0;
    for (int len = 1; len <= 5; len++) {
        int total = 1;
        for (int k = 0; k < len; k++) total *= na;
        for (int code = 0; code < total; code++) {
            char s[8];
            for (int k = 0, c = code; k < len; k++, c /= na) s[k] = alpha[c % na];
            s[len] = 0;
            int want = regexec(&rfc, s, 0, NULL, 0) == 0;
            int want_lead = regexec(&lead, s, 0, NULL, 0) == 0;
            for (int f = 0; f < 3; f++) {
                char doc[64], msg[1100];
                snprintf(doc, sizeof doc, forms[f], s);
                int rc = parse(doc, msg, sizeof msg);
                if ((rc == 0) != want && mismatches++ < 10)
                    CHECK_MSG(0, "'%s': %s, RFC 8259 %s it (%s)", doc, rc ? "refused" : "accepted",
                              want ? "takes" : "does not take", msg);
                if (!rc) {
                    accepted += f == 0;
                    continue;
                }
                if (!has(msg, "the number ")) continue; /* cJSON's own refusal */
                number_refusals++;
                char expect[128];
                snprintf(expect, sizeof expect, "%s%s: %s", places[f], s,
                         want_lead ? "a leading zero" : "not a JSON number");
                leading += want_lead;
                if (!has(msg, expect) && mismatches++ < 10) CHECK_MSG(0, "'%s': expected '%s', got '%s'", doc, expect, msg);
            }
        }
    }
    CHECK_EQ_INT(mismatches, 0);
    /* the loop did meet every kind of case */
    CHECK(accepted > 100 && number_refusals > 100 && leading > 10);
    regfree(&rfc);
    regfree(&lead);
}

static void test_numbers_2_53(void) {
    /* CONFIG.md: an integer written without an exponent is at most 2^53 =
     * 9007199254740992 in size; with an exponent any size is a double */
    static const struct {
        const char *num;
        int ok;
    } cases[] = {
        {"9007199254740992", 1},  {"-9007199254740992", 1}, {"9007199254740993", 0},
        {"-9007199254740993", 0}, {"9999999999999999", 0},  {"10000000000000000", 0},
        {"1000000000000000", 1},  {"99999999999999999999", 0}, {"1e17", 1},
        {"9007199254740993e0", 1}, {"0.9007199254740993", 1}, {"-0", 1},
    };
    for (size_t i = 0; i < KB_ARRAY_LEN(cases); i++) {
        char doc[64], msg[1100];
        snprintf(doc, sizeof doc, "{\"seed\": %s}", cases[i].num);
        int rc = parse(doc, msg, sizeof msg);
        CHECK_MSG((rc == 0) == cases[i].ok, "%s: rc %d (%s)", cases[i].num, rc, msg);
        if (!cases[i].ok) CHECK_MSG(has(msg, "mem:1:10: the number ") && has(msg, "beyond 2^53"), "%s", msg);
    }
    cJSON *j = NULL;
    kb_err err = {0};
    CHECK(json_parse("[9007199254740992]", 18, "mem", &j, &err) == 0);
    CHECK(j && cJSON_GetArrayItem(j, 0)->valuedouble == 9007199254740992.0);
    cJSON_Delete(j);
}

static void test_strings_are_not_numbers(void) {
    char msg[1100];
    /* Python's json.loads takes each of these: the digits are inside strings
     * (an escaped quote does not end one, an escaped backslash does) */
    CHECK(parse("[\"07\", \"a\\\"07\", \"\\\\\", 1]", msg, sizeof msg) == 0);
    CHECK(parse("{\"07\": \"\\\"00\\\"\"}", msg, sizeof msg) == 0);
    /* and the number after a string that ends in an escaped backslash is read */
    CHECK(parse("[\"\\\\\", 07]", msg, sizeof msg) == KB_EINPUT && has(msg, "mem:1:8: the number 07"));
}

/* ---- the text: \u0000, UTF-8, trailing text, syntax errors ---------------------------- */

static void test_text_rules(void) {
    char msg[1100];
    CHECK(parse("{\"a\": \"x\\u0000y\"}", msg, sizeof msg) == KB_EINPUT && has(msg, "mem: \\u0000 in a string"));
    /* other escapes that start \u000 are ordinary characters; an escaped
     * backslash before u0000 is text (json.loads: "\\u0001", "\\\\u0000") */
    CHECK(parse("{\"a\": \"x\\u0001\\u000a\\u0010y\"}", msg, sizeof msg) == 0);
    CHECK(parse("{\"a\": \"x\\\\u0000y\"}", msg, sizeof msg) == 0);
    /* whitespace after the value (RFC 8259: space, tab, LF, CR) and nothing else */
    CHECK(parse("{\"a\": 1}\r\n\t \r\n", msg, sizeof msg) == 0);
    CHECK(parse("{\"a\": 1}\n x", msg, sizeof msg) == KB_EINPUT &&
          has(msg, "mem:2:2: unexpected text after the JSON value"));
    /* line and column of a syntax error: line 3, column 4 is the '}' */
    CHECK(parse("{\"a\": 1,\n \"b\": [\n   }", msg, sizeof msg) == KB_EINPUT && has(msg, "mem:3:4: invalid JSON"));
    /* UTF-8: 0x80 alone is a continuation byte; a valid 2-byte letter is fine */
    CHECK(parse("{\"a\":\n \"\xc3\xa9\x80\"}", msg, sizeof msg) == KB_EINPUT &&
          has(msg, "mem:2:5: byte 0x80 is not valid UTF-8"));
    CHECK(parse("{\"a\": \"\xc3\xa9\x7f\"}", msg, sizeof msg) == 0);
    cJSON *j = NULL;
    kb_err err = {0};
    CHECK(json_parse("{\"a\":\0}", 7, "mem", &j, &err) == KB_EINPUT && has(err.msg, "mem: byte 5 is NUL"));
}

/* Control characters (bytes 1..0x1f; NUL is refused as above): between
 * values only tab, LF and CR (and space) are whitespace, and in a string
 * none may appear unescaped (RFC 8259 §2, §7). Python 3.11's json.loads
 * agrees on all 62 documents: it takes exactly '[1,<c>2]' for c = 9, 10, 13.
 * cJSON takes all of them: kvbench refused none until 2026-12-06. */
static int jsonl(const char *text, int objects, long *seen, char *msg, size_t cap); /* below */

static void test_control_characters(void) {
    char msg[1100], doc[64], at[64];
    long seen[2];
    for (int c = 1; c < 0x20; c++) {
        int ws = c == '\t' || c == '\n' || c == '\r';
        snprintf(doc, sizeof doc, "[1,%c2]", c);
        int rc = parse(doc, msg, sizeof msg);
        snprintf(at, sizeof at, "mem:1:4: control character 0x%02x between values", c);
        CHECK_MSG(ws ? rc == 0 : rc == KB_EINPUT && has(msg, at), "0x%02x between: %s", c, msg);
        snprintf(doc, sizeof doc, "{\"k\": \"a%cb\"}", c);
        CHECK_MSG(parse(doc, msg, sizeof msg) == KB_EINPUT && has(msg, "control character") &&
                      has(msg, "mem:1:9:") && has(msg, "in a string"),
                  "0x%02x in a string: %s", c, msg);
        /* the same in a JSONL line (a LF ends the line there: another error) and a --set value */
        snprintf(doc, sizeof doc, "{\"k\": \"a%cb\"}\n", c);
        if (c != '\n') {
            rc = jsonl(doc, 1, seen, msg, sizeof msg);
            snprintf(at, sizeof at, "x.jsonl:1: column 9: control character 0x%02x in a string", c);
            CHECK_MSG(rc == KB_EINPUT && has(msg, at), "0x%02x in a JSONL string: %s", c, msg);
        }
        snprintf(doc, sizeof doc, "[\"a%cb\"]", c);
        kb_err err = {0};
        cJSON *v = json_cli_value(doc, "--set", "k=...", &err);
        snprintf(at, sizeof at, "control character 0x%02x at byte 3 in a string", c);
        CHECK_MSG(!v && has(err.msg, at), "0x%02x in --set: %s", c, err.msg);
        cJSON_Delete(v);
    }
    /* escaped, the same characters are text; a backslash-quote does not end the string */
    CHECK(parse("[\"a\\t\\n\\u001f\\\"\tb\"]", msg, sizeof msg) == KB_EINPUT && has(msg, "mem:1:16: control character 0x09"));
    CHECK(parse("[\"a\\t\\n\\u001f\\\"b\",\t\r\n 1]", msg, sizeof msg) == 0);
}

static void test_duplicate_keys(void) {
    char msg[1100];
    static const struct {
        const char *doc, *where; /* NULL: accepted */
    } cases[] = {
        {"{\"a\": 1, \"a\": 2}", "key 'a' appears twice in the top-level object"},
        {"{\"a\": 1, \"a\": 2, \"b\": 3}", "key 'a' appears twice in the top-level object"},
        {"{\"b\": 1, \"c\": 2, \"a\": 3, \"c\": 4}", "key 'c' appears twice in the top-level object"},
        {"{\"x\": {\"q\": 1}, \"y\": {\"a\": 1, \"a\": 2}}", "key 'a' appears twice in y;"},
        {"{\"m\": [{\"a\": 1}, {\"a\": 1, \"a\": 2}]}", "key 'a' appears twice in m[1];"},
        {"{\"a\": {\"b\": [1, {\"c\": 1, \"c\": 2}]}}", "key 'c' appears twice in a.b[1];"},
        {"[{\"k\": 1}, [{\"k\": 1, \"k\": 1}]]", "key 'k' appears twice in [1][0];"},
        /* the same key in different objects, and keys that differ in case, are fine */
        {"{\"a\": {\"a\": 1}, \"b\": [{\"a\": 1}, {\"a\": 2}], \"A\": 1}", NULL},
    };
    for (size_t i = 0; i < KB_ARRAY_LEN(cases); i++) {
        int rc = parse(cases[i].doc, msg, sizeof msg);
        if (!cases[i].where) CHECK_MSG(rc == 0, "%s: %s", cases[i].doc, msg);
        else CHECK_MSG(rc == KB_EINPUT && has(msg, cases[i].where), "%s: %s", cases[i].doc, msg);
    }
}

/* ---- --set values (json_cli_value) ------------------------------------------------- */

static void test_cli_value(void) {
    kb_err err;
    cJSON *v;
#define CLI(s) (memset(&err, 0, sizeof err), v = json_cli_value((s), "--set", "k=" s, &err))
    /* CONFIG.md: the whole VALUE is one JSON value, else a string (a bare word) */
    CHECK(CLI("12") && cJSON_IsNumber(v) && v->valuedouble == 12);
    cJSON_Delete(v);
    CHECK(CLI("12x") && cJSON_IsString(v) && !strcmp(v->valuestring, "12x"));
    cJSON_Delete(v);
    CHECK(CLI("[1, 2] ") && cJSON_IsArray(v) && cJSON_GetArraySize(v) == 2);
    cJSON_Delete(v);
    CHECK(CLI("\"a b\"") && cJSON_IsString(v) && !strcmp(v->valuestring, "a b"));
    cJSON_Delete(v);
    CHECK(CLI("true") && cJSON_IsTrue(v));
    cJSON_Delete(v);
    /* a VALUE that starts with [, { or " (after blanks) must be valid JSON */
    static const char *const not_json[] = {"[64", "  [64", "\t{\"a\":", "\"abc", "[1] x", "{\"a\": 1}}"};
    for (size_t i = 0; i < KB_ARRAY_LEN(not_json); i++) {
        memset(&err, 0, sizeof err);
        char arg[64];
        snprintf(arg, sizeof arg, "k=%s", not_json[i]);
        v = json_cli_value(not_json[i], "--set", arg, &err);
        CHECK_MSG(!v && err.code == KB_EINPUT, "%s", not_json[i]);
        char want[128];
        snprintf(want, sizeof want, "--set %s: the value is not valid JSON", arg);
        CHECK_MSG(has(err.msg, want), "%s: %s", not_json[i], err.msg);
        cJSON_Delete(v);
    }
    CHECK(!CLI("07") && has(err.msg, "--set k=07: the number 07: a leading zero"));
    CHECK(!CLI("[1, 9007199254740993]") && has(err.msg, "the number 9007199254740993: beyond 2^53"));
    CHECK(!CLI("\"a\\u0000b\"") && has(err.msg, "\\u0000 in a string is not supported"));
    CHECK(!CLI("{\"a\": 1, \"a\": 2}") && has(err.msg, "key 'a' appears twice in the value"));
    CHECK(!CLI("[0, {\"a\": 1, \"a\": 2}]") && has(err.msg, "key 'a' appears twice in [1]"));
    /* not UTF-8, bare word or not: the byte's offset in the value, from 0 */
    CHECK(!CLI("ab\xff") && has(err.msg, "--set k=...: byte 2 (0xff) is not valid UTF-8"));
    CHECK(!CLI("\"\xe2\x82\"") && has(err.msg, "byte 1 (0xe2) is not valid UTF-8"));
#undef CLI
}

/* ---- typed getters and key checks ------------------------------------------------- */

static void test_getters(void) {
    cJSON *o = cJSON_Parse("{\"i\": 5, \"lo\": -3, \"f\": 2.5, \"big\": 1e300, \"b\": true, \"s\": \"x\","
                           " \"e\": \"\", \"arr\": [\"a\", \"b\"], \"mix\": [\"a\", 1], \"n\": null}");
    kb_err err;
    long l;
    double d;
    int b;
    const char *s;
    const char **arr;
    int n;
#define E (memset(&err, 0, sizeof err), &err)
    /* json_get_int: [lo, hi] inclusive; integral values only */
    CHECK(json_get_int(o, "w", "i", 1, 5, 5, 0, &l, E) == 0 && l == 5);
    CHECK(json_get_int(o, "w", "lo", 1, -3, 0, 0, &l, E) == 0 && l == -3);
    CHECK(json_get_int(o, "w", "i", 1, 6, 9, 0, &l, E) == KB_EINPUT &&
          has(err.msg, "w: key 'i': expected an integer in [6, 9], got 5"));
    CHECK(json_get_int(o, "w", "i", 1, 0, 4, 0, &l, E) == KB_EINPUT);
    CHECK(json_get_int(o, "w", "f", 1, 0, 9, 0, &l, E) == KB_EINPUT && has(err.msg, "got 2.5"));
    CHECK(json_get_int(o, "w", "big", 1, 0, 1L << 53, 0, &l, E) == KB_EINPUT);
    CHECK(json_get_int(o, "w", "s", 1, 0, 9, 0, &l, E) == KB_EINPUT && has(err.msg, "got a string"));
    /* absent: the default, or the key named when required; keys are case-sensitive */
    CHECK(json_get_int(o, "w", "I", 0, 0, 9, 7, &l, E) == 0 && l == 7);
    CHECK(json_get_int(o, "w", "zz", 1, 0, 9, 7, &l, E) == KB_EINPUT && has(err.msg, "w: missing required key 'zz'"));
    /* json_get_double: [lo, hi] inclusive */
    CHECK(json_get_double(o, "w", "f", 1, 2.5, 2.5, 0, &d, E) == 0 && d == 2.5);
    CHECK(json_get_double(o, "w", "f", 1, 0, 2.4, 0, &d, E) == KB_EINPUT &&
          has(err.msg, "w: key 'f': expected a number in [0, 2.4], got 2.5"));
    CHECK(json_get_double(o, "w", "f", 1, 2.6, 3, 0, &d, E) == KB_EINPUT);
    CHECK(json_get_double(o, "w", "b", 1, 0, 3, 0, &d, E) == KB_EINPUT && has(err.msg, "got a boolean"));
    CHECK(json_get_double(o, "w", "zz", 0, 0, 3, 1.5, &d, E) == 0 && d == 1.5);
    /* bool, string, path */
    CHECK(json_get_bool(o, "w", "b", 1, 0, &b, E) == 0 && b == 1);
    CHECK(json_get_bool(o, "w", "i", 1, 0, &b, E) == KB_EINPUT &&
          has(err.msg, "w: key 'i': expected true or false, got a number"));
    CHECK(json_get_bool(o, "w", "zz", 0, 1, &b, E) == 0 && b == 1);
    CHECK(json_get_string(o, "w", "s", 1, NULL, &s, E) == 0 && !strcmp(s, "x"));
    CHECK(json_get_string(o, "w", "n", 1, NULL, &s, E) == KB_EINPUT &&
          has(err.msg, "w: key 'n': expected a string, got null"));
    CHECK(json_get_path(o, "w", "s", 1, NULL, &s, E) == 0 && !strcmp(s, "x"));
    CHECK(json_get_path(o, "w", "e", 1, NULL, &s, E) == KB_EINPUT && has(err.msg, "w: key 'e': an empty path"));
    CHECK(json_get_path(o, "w", "zz", 0, NULL, &s, E) == 0 && s == NULL);
    /* string arrays */
    CHECK(json_get_string_array(o, "w", "arr", 1, &arr, &n, E) == 0 && n == 2 && !strcmp(arr[1], "b"));
    free(arr);
    CHECK(json_get_string_array(o, "w", "mix", 1, &arr, &n, E) == KB_EINPUT &&
          has(err.msg, "w: key 'mix'[1]: expected a string, got a number") && !arr);
    CHECK(json_get_string_array(o, "w", "s", 1, &arr, &n, E) == KB_EINPUT && has(err.msg, "expected an array"));
    /* json_check_keys: a key in either list is known; others are named */
    static const char *const a1[] = {"i", "lo", "f", "big", "b", NULL};
    static const char *const a2[] = {"s", "e", "arr", "mix", "n", NULL};
    CHECK(json_check_keys(o, "w", a1, a2, E) == 0);
    CHECK(json_check_keys(o, "w", a1, NULL, E) == KB_EINPUT &&
          has(err.msg, "w: unknown key 's' (known keys: i, lo, f, big, b)"));
    cJSON *arr_root = cJSON_Parse("[1]");
    CHECK(json_check_keys(arr_root, "w", a1, a2, E) == KB_EINPUT && has(err.msg, "w: expected a JSON object"));
    cJSON_Delete(arr_root);
#undef E
    cJSON_Delete(o);
}

/* ---- JSONL ---------------------------------------------------------------------------- */

static int count_line(const cJSON *obj, long lineno, void *ctx, kb_err *err) {
    (void)obj;
    (void)err;
    long *seen = ctx;
    seen[0]++;
    seen[1] = lineno;
    return 0;
}

static int jsonl(const char *text, int objects, long *seen, char *msg, size_t cap) {
    char path[300];
    snprintf(path, sizeof path, "%s/x.jsonl", dir);
    FILE *f = fopen(path, "wb");
    fwrite(text, 1, strlen(text), f);
    fclose(f);
    kb_err err = {0};
    seen[0] = seen[1] = 0;
    int rc = objects ? jsonl_foreach(path, count_line, seen, &err) : jsonl_foreach_value(path, count_line, seen, &err);
    snprintf(msg, cap, "%s", rc ? err.msg + strlen(dir) + 1 : ""); /* without the directory */
    return rc;
}

static void test_jsonl(void) {
    long seen[2];
    char msg[1100];
    /* json.h: blank lines are spaces and tabs only; CRLF line ends; blanks after the object */
    CHECK(jsonl("{\"a\": 1}\r\n \t \r\n\t\n{\"a\": 2} \t\r\n", 1, seen, msg, sizeof msg) == 0 && seen[0] == 2 &&
          seen[1] == 4);
    CHECK(jsonl("{\"a\": 1}\n{\"a\": 2} {\"b\": 3}\n", 1, seen, msg, sizeof msg) == KB_EINPUT &&
          has(msg, "x.jsonl:2: expected one JSON object per line") && seen[0] == 1);
    CHECK(jsonl("\"s\"\n", 1, seen, msg, sizeof msg) == KB_EINPUT && has(msg, "x.jsonl:1: expected one JSON object"));
    CHECK(jsonl("\"s\"\n[1]\n", 0, seen, msg, sizeof msg) == 0 && seen[0] == 2);
    CHECK(jsonl("\n{\"a\": [1, 07]}\n", 1, seen, msg, sizeof msg) == KB_EINPUT &&
          has(msg, "x.jsonl:2: column 11: the number 07: a leading zero"));
    CHECK(jsonl("{\"a\": 1}\n{\"a\": \"\xc3\xa9\xff\"}\n", 1, seen, msg, sizeof msg) == KB_EINPUT &&
          has(msg, "x.jsonl:2: byte 0xff at column 10 is not valid UTF-8"));
    CHECK(jsonl("{\"a\": {\"b\": 1, \"b\": 1}}\n", 1, seen, msg, sizeof msg) == KB_EINPUT &&
          has(msg, "x.jsonl:1: key 'b' appears twice in a;"));
    CHECK(jsonl("{\"a\": \"\\u0000\"}\n", 1, seen, msg, sizeof msg) == KB_EINPUT && has(msg, "x.jsonl:1: \\u0000"));
}

/* ---- cli.h helpers ------------------------------------------------------------------ */

static void test_cli_numbers(void) {
    long l;
    double d;
    /* cli.h: the whole string parses and lies in [lo, hi] (both ends in) */
    CHECK(cli_parse_int("t", "n", "16", 16, 1024, &l) == 0 && l == 16);
    CHECK(cli_parse_int("t", "n", "1024", 16, 1024, &l) == 0 && l == 1024);
    /* no space before or after (strtol skips a leading one), a '+' taken (cli.h) */
    CHECK(cli_parse_int("t", "n", "+17", 16, 1024, &l) == 0 && l == 17);
    static const char *const bad_int[] = {"15",  "1025", "",     "16x", "1e2", "99999999999999999999999",
                                          " 16", "\t16", "\n16", "16 ", "+ 16"};
    for (size_t i = 0; i < KB_ARRAY_LEN(bad_int); i++)
        CHECK_MSG(cli_parse_int("t", "n", bad_int[i], 16, 1024, &l) == 2, "%s", bad_int[i]);
    CHECK(cli_parse_double("t", "x", "0.5", 0.5, 2, &d) == 0 && d == 0.5);
    CHECK(cli_parse_double("t", "x", "2", 0.5, 2, &d) == 0 && d == 2);
    CHECK(cli_parse_double("t", "x", "+1.5", 0.5, 2, &d) == 0 && d == 1.5);
    static const char *const bad_dbl[] = {"0.49", "2.01", "", "1x", "nan", "inf", "1e400", " 1", "\t1", "\n1", "1 "};
    for (size_t i = 0; i < KB_ARRAY_LEN(bad_dbl); i++)
        CHECK_MSG(cli_parse_double("t", "x", bad_dbl[i], 0.5, 2, &d) == 2, "%s", bad_dbl[i]);
    /* lists: spaces, tabs, commas and line ends (CR too) separate */
    int32_t *v;
    int n;
    char why[128];
    CHECK(cli_parse_int_list("12 7,99\r\n\t5", 0, 99, &v, &n, why, sizeof why) == 0 && n == 4 && v[0] == 12 &&
          v[1] == 7 && v[2] == 99 && v[3] == 5);
    free(v);
    CHECK(cli_parse_int_list(" ,\n", 0, 99, &v, &n, why, sizeof why) == 0 && n == 0);
    free(v);
    CHECK(cli_parse_int_list("1,100", 0, 99, &v, &n, why, sizeof why) == 2 &&
          !strcmp(why, "expected integers in [0, 99], got '100'"));
    CHECK(cli_parse_int_list("1 5x,2", 0, 99, &v, &n, why, sizeof why) == 2 && has(why, "got '5x'"));
    CHECK(cli_parse_int_list("-1", 0, 99, &v, &n, why, sizeof why) == 2 && has(why, "got '-1'"));
}

static void test_cli_shard_and_keys(void) {
    int i, n;
    static const struct {
        const char *s;
        int ok;
    } shards[] = {{"0/1", 1},   {"1/1", 0},   {"2/2", 0},      {"1/2", 1},      {"99999/100000", 1},
                  {"0/100001", 0}, {"0/0", 0}, {"01/2", 1},    {"+0/2", 0},     {"0/2x", 0},
                  {"0/2/", 0},  {"/2", 0},    {"0/", 0},       {"-1/2", 0},     {"1/4294967298", 0}};
    for (size_t k = 0; k < KB_ARRAY_LEN(shards); k++) {
        int rc = cli_parse_shard(shards[k].s, &i, &n);
        CHECK_MSG((rc == 0) == shards[k].ok, "%s: %d", shards[k].s, rc);
    }
    CHECK(cli_parse_shard("3/7", &i, &n) == 0 && i == 3 && n == 7);
    kb_err err = {0};
    /* method, budget and budgets have options of their own; other keys pass */
    static const char *const own[] = {"method=full", "budget=64", "budgets=[64]"};
    for (size_t k = 0; k < KB_ARRAY_LEN(own); k++)
        CHECK_MSG(cli_check_param_key("--set", own[k], &err) == KB_EINPUT && has(err.msg, "give the method with"),
                  "%s", own[k]);
    static const char *const other[] = {"budget_mode=topk", "bud=1", "meth=x", "window=8", "budgetsx=1"};
    for (size_t k = 0; k < KB_ARRAY_LEN(other); k++) CHECK_MSG(cli_check_param_key("--set", other[k], &err) == 0, "%s", other[k]);
    /* a key given twice, compared as the whole key */
    const char *twice[] = {"seed=1", "budgets=[2]", "seed=3"};
    CHECK(cli_check_repeated_keys("--set", twice, 3, &err) == KB_EINPUT &&
          has(err.msg, "--set seed given twice ('seed=1', then 'seed=3'"));
    const char *prefix[] = {"seeds=2", "seed=1", "see=1", "s", "s"};
    CHECK(cli_check_repeated_keys("--set", prefix, 5, &err) == 0);
}

static void test_cli_once(void) {
    static const struct option opts[] = {{"value", 1, 0, 'v'}, {"flag", 0, 0, 'f'}, {"many", 1, 0, 'm'}, {0, 0, 0, 0}};
    static const char *const rep[] = {"many", NULL};
    kb_cli_seen seen = {0};
    /* flags may repeat; a repeatable option may; a value option may not */
    CHECK(cli_once("t", 'f', opts, rep, &seen) == 0 && cli_once("t", 'f', opts, rep, &seen) == 0);
    CHECK(cli_once("t", 'm', opts, rep, &seen) == 0 && cli_once("t", 'm', opts, rep, &seen) == 0);
    CHECK(cli_once("t", 'v', opts, rep, &seen) == 0);
    CHECK(cli_once("t", 'v', opts, rep, &seen) == 2);
}

static void test_model_path(void) {
    /* cli.h: --model's value as given ("" too), else $KVBENCH_MODEL unless empty */
    CHECK(!strcmp(cli_model_path(""), ""));
    CHECK(!strcmp(cli_model_path("a.gguf"), "a.gguf"));
    setenv("KVBENCH_MODEL", "env.gguf", 1);
    CHECK(!strcmp(cli_model_path(NULL), "env.gguf"));
    setenv("KVBENCH_MODEL", "", 1);
    const char *p = cli_model_path(NULL);
    CHECK_MSG(strstr(p, "models/SmolLM2-135M-Instruct.Q4_1.gguf") != NULL, "%s", p);
    unsetenv("KVBENCH_MODEL");
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kvbench-test-json.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    test_numbers_brute_force();
    test_numbers_2_53();
    test_strings_are_not_numbers();
    test_text_rules();
    test_control_characters();
    test_duplicate_keys();
    test_cli_value();
    test_getters();
    test_jsonl();
    test_cli_numbers();
    test_cli_shard_and_keys();
    test_cli_once();
    test_model_path();
    char path[300];
    snprintf(path, sizeof path, "%s/x.jsonl", dir);
    unlink(path);
    rmdir(dir);
    return check_summary("test_json");
}
