/* test_config.c - a sweep config read into its plan (harness/config.h), the
 * keys, defaults and ranges of docs/CONFIG.md's tables: every range is tried
 * at both ends and one past each, every default read back, and --set and
 * the default run name as CONFIG.md describes them. Expected values are the
 * docs', worked by hand. Files go to a mkdtemp directory. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "harness/config.h"

static char dir[256];
#define TASKS "\"tasks\": [{\"task\": \"needle\"}]"

/* sweep_config_from_json of "{TASKS, body}": 0 or KB_EINPUT, message in msg */
static int load(const char *body, kb_sweep_config *c, char *msg, size_t cap) {
    char text[8192];
    snprintf(text, sizeof text, "{" TASKS ", %s}", body);
    cJSON *j = cJSON_Parse(text);
    CHECK_MSG(j != NULL, "test config is not JSON: %s", text);
    kb_err err = {0};
    int rc = sweep_config_from_json(j, "cfg", c, &err);
    snprintf(msg, cap, "%s", rc ? err.msg : "");
    cJSON_Delete(j);
    return rc;
}

/* 0 when the config loads, else KB_EINPUT with msg (the config freed either way) */
static int try(const char *body, char *msg, size_t cap) {
    kb_sweep_config c;
    int rc = load(body, &c, msg, cap);
    sweep_config_free(&c);
    return rc;
}

static int has(const char *msg, const char *part) { return strstr(msg, part) != NULL; }

#define OK(body) CHECK_MSG(try((body), msg, sizeof msg) == 0, "%s: %s", (body), msg)
#define BAD(body, part)                                                                        \
    CHECK_MSG(try((body), msg, sizeof msg) == KB_EINPUT && has(msg, (part)), "%s: %s", (body), msg)

static void test_defaults(void) {
    kb_sweep_config c;
    char msg[1100];
    CHECK(load("\"methods\": [\"full\"]", &c, msg, sizeof msg) == 0);
    /* CONFIG.md's defaults: seed 42, kv_dtype f16, threads 0 (all cores),
     * fidelity and own_answers false, max_samples 0, no latency part;
     * OUTPUTS.md: window_queries at least 32 */
    CHECK_EQ_INT(c.seed, 42);
    CHECK_EQ_INT(c.kv_dtype, KB_F16);
    CHECK_EQ_INT(c.threads, 0);
    CHECK_EQ_INT(c.fidelity, 0);
    CHECK_EQ_INT(c.own_answers, 0);
    CHECK_EQ_INT(c.max_samples, 0);
    CHECK_EQ_INT(c.latency.enabled, 0);
    CHECK_EQ_INT(c.window_max, 32);
    CHECK(c.model == NULL && c.haystack == NULL && c.data_dir == NULL && c.name == NULL);
    CHECK_EQ_INT(c.n_cells, 1);
    CHECK_EQ_INT(c.cells[0].p.budget, -1);
    sweep_config_free(&c);
    /* every key given */
    CHECK(load("\"name\": \"n\", \"description\": \"d\", \"model\": \"m.gguf\", \"seed\": 7, \"kv_dtype\": \"bf16\","
               " \"threads\": 3, \"fidelity\": true, \"own_answers\": true, \"haystack\": \"h\", \"data_dir\": \"dd\","
               " \"max_samples\": 5, \"budget_mode\": \"topk\", \"budgets\": [64],"
               " \"methods\": [{\"method\": \"snapkv\", \"window\": 40}],"
               " \"latency\": {\"contexts\": [64]}", &c, msg, sizeof msg) == 0);
    CHECK_MSG(!msg[0], "%s", msg);
    CHECK(c.name && !strcmp(c.name, "n") && c.model && !strcmp(c.model, "m.gguf"));
    CHECK(c.haystack && !strcmp(c.haystack, "h") && c.data_dir && !strcmp(c.data_dir, "dd"));
    CHECK_EQ_INT(c.seed, 7);
    CHECK_EQ_INT(c.kv_dtype, KB_BF16);
    CHECK_EQ_INT(c.threads, 3);
    CHECK(c.fidelity == 1 && c.own_answers == 1);
    CHECK_EQ_INT(c.max_samples, 5);
    CHECK_EQ_INT(c.window_max, 40);
    /* the latency part's defaults (CONFIG.md, PERFORMANCE.md): 16 decode
     * tokens, 3 reps, 1 round */
    CHECK(c.latency.enabled && c.latency.n_contexts == 1 && c.latency.contexts[0] == 64);
    CHECK_EQ_INT(c.latency.decode_tokens, 16);
    CHECK_EQ_INT(c.latency.reps, 3);
    CHECK_EQ_INT(c.latency.rounds, 1);
    CHECK_EQ_INT(c.n_cells, 1);
    CHECK(c.n_cells == 1 && c.cells[0].p.budget == 64 && c.cells[0].p.budget_mode == KB_BUDGET_TOPK);
    /* the params column: the entry's own keys, not method/label/budget(s)/budget_mode */
    CHECK_STREQ(c.cells[0].params_json, "{\"window\":40}");
    sweep_config_free(&c);
}

static void test_ranges(void) {
    char msg[1100];
    /* seed 0..2^53, threads 0..1024, max_samples 0..2^30 */
    OK("\"methods\": [\"full\"], \"seed\": 0");
    OK("\"methods\": [\"full\"], \"seed\": 9007199254740992");
    BAD("\"methods\": [\"full\"], \"seed\": -1", "cfg: key 'seed'");
    OK("\"methods\": [\"full\"], \"threads\": 1024");
    BAD("\"methods\": [\"full\"], \"threads\": 1025", "cfg: key 'threads'");
    OK("\"methods\": [\"full\"], \"max_samples\": 0");
    OK("\"methods\": [\"full\"], \"max_samples\": 1073741824");
    BAD("\"methods\": [\"full\"], \"max_samples\": 1073741825", "cfg: key 'max_samples'");
    BAD("\"methods\": [\"full\"], \"kv_dtype\": \"f8\"", "cfg: key 'kv_dtype'");
    BAD("\"methods\": [\"full\"], \"fidelity\": 1", "cfg: key 'fidelity'");
    /* budgets: 1 to 2^30, each once, at most 64 of them, not empty; in a method entry too */
    OK("\"methods\": [\"quest\"], \"budgets\": [1, 1073741824]");
    BAD("\"methods\": [\"quest\"], \"budgets\": [0]", "cfg: key 'budgets[0]'");
    BAD("\"methods\": [\"quest\"], \"budgets\": [1073741825]", "cfg: key 'budgets[0]'");
    BAD("\"methods\": [\"quest\"], \"budgets\": []", "cfg: key 'budgets': expected a non-empty array");
    BAD("\"methods\": [\"quest\"], \"budgets\": [64, 32, 64]", "cfg: key 'budgets': 64 appears twice");
    OK("\"methods\": [{\"method\": \"quest\", \"budgets\": [1, 1073741824]}]");
    BAD("\"methods\": [{\"method\": \"quest\", \"budgets\": [1073741825]}]", "cfg: methods[0]: key 'budgets[0]'");
    BAD("\"methods\": [{\"method\": \"quest\", \"budgets\": [0]}]", "cfg: methods[0]: key 'budgets[0]'");
    BAD("\"methods\": [{\"method\": \"quest\", \"budgets\": [8, 8]}]", "cfg: methods[0]: key 'budgets': 8 appears twice");
    char body[4096], list[3000];
    size_t off = 0;
    for (int i = 1; i <= 65; i++) off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i > 1 ? ", " : "", i);
    snprintf(body, sizeof body, "\"methods\": [\"quest\"], \"budgets\": [%s]", list);
    BAD(body, "cfg: key 'budgets': at most 64 values");
    *strrchr(list, ',') = 0; /* 1..64 */
    snprintf(body, sizeof body, "\"methods\": [\"quest\"], \"budgets\": [%s]", list);
    kb_sweep_config c;
    CHECK(load(body, &c, msg, sizeof msg) == 0 && c.n_cells == 64);
    sweep_config_free(&c);
    /* a method that needs a budget and gets none */
    BAD("\"methods\": [\"quest\"]", "cfg: methods[0]: method 'quest' needs a budget");
    BAD("\"methods\": [{\"method\": \"quest\", \"budget\": 64, \"budgets\": [64]}]", "'budget' and 'budgets' both");
    BAD("\"methods\": [\"full\", \"full\"]", "duplicate cell");
    BAD("\"methods\": []", "cfg: key 'methods'");
    static const char *const no_tasks[] = {"{\"tasks\": [], \"methods\": [\"full\"]}",
                                           "{\"tasks\": {}, \"methods\": [\"full\"]}", "{\"methods\": [\"full\"]}"};
    for (size_t k = 0; k < sizeof no_tasks / sizeof *no_tasks; k++) {
        cJSON *j = cJSON_Parse(no_tasks[k]);
        kb_sweep_config c0;
        kb_err e0 = {0};
        CHECK_MSG(sweep_config_from_json(j, "cfg", &c0, &e0) == KB_EINPUT &&
                      has(e0.msg, "cfg: key 'tasks': expected a non-empty array"), "%s: %s", no_tasks[k], e0.msg);
        sweep_config_free(&c0);
        cJSON_Delete(j);
    }
    /* latency: contexts 16..2^24 (at most 16), decode_tokens 1..4096, reps and rounds 1..100 */
    OK("\"methods\": [\"full\"], \"latency\": {\"contexts\": [16, 16777216], \"decode_tokens\": 4096, \"reps\": 100, "
       "\"rounds\": 100}");
    OK("\"methods\": [\"full\"], \"latency\": {\"contexts\": [16], \"decode_tokens\": 1, \"reps\": 1, \"rounds\": 1}");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [15]}", "cfg: latency: key 'contexts[0]'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [16777217]}", "cfg: latency: key 'contexts[0]'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [64], \"decode_tokens\": 4097}", "key 'decode_tokens'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [64], \"decode_tokens\": 0}", "key 'decode_tokens'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [64], \"reps\": 101}", "key 'reps'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [64], \"rounds\": 0}", "key 'rounds'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [64], \"rounds\": 101}", "key 'rounds'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"reps\": 3}", "cfg: latency: missing required key 'contexts'");
    BAD("\"methods\": [\"full\"], \"latency\": {\"contexts\": [64], \"warmup\": 3}", "cfg: latency: unknown key 'warmup'");
    off = 0;
    for (int i = 0; i < 16; i++) off += (size_t)snprintf(list + off, sizeof list - off, "%s%d", i ? ", " : "", 64 + i);
    snprintf(body, sizeof body, "\"methods\": [\"full\"], \"latency\": {\"contexts\": [%s]}", list);
    OK(body);
    snprintf(body, sizeof body, "\"methods\": [\"full\"], \"latency\": {\"contexts\": [%s, 99]}", list);
    BAD(body, "key 'contexts': at most 16 values");
    /* name: 1-100 of [A-Za-z0-9._-], not "." or ".." */
    char name[128];
    memset(name, 'a', 100);
    name[100] = 0;
    snprintf(body, sizeof body, "\"methods\": [\"full\"], \"name\": \"%s\"", name);
    OK(body);
    snprintf(body, sizeof body, "\"methods\": [\"full\"], \"name\": \"%sa\"", name);
    BAD(body, "cfg: key 'name'");
    OK("\"methods\": [\"full\"], \"name\": \"A.b_c-9\"");
    OK("\"methods\": [\"full\"], \"name\": \"...\"");
    BAD("\"methods\": [\"full\"], \"name\": \".\"", "cfg: key 'name'");
    BAD("\"methods\": [\"full\"], \"name\": \"..\"", "cfg: key 'name'");
    BAD("\"methods\": [\"full\"], \"name\": \"a/b\"", "cfg: key 'name'");
    BAD("\"methods\": [\"full\"], \"name\": \"a b\"", "cfg: key 'name'");
    /* paths: not empty */
    for (int k = 0; k < 3; k++) {
        static const char *const keys[] = {"model", "haystack", "data_dir"};
        char want[64];
        snprintf(body, sizeof body, "\"methods\": [\"full\"], \"%s\": \"\"", keys[k]);
        snprintf(want, sizeof want, "cfg: key '%s': an empty path", keys[k]);
        BAD(body, want);
    }
    /* not an object */
    kb_err err = {0};
    cJSON *arr = cJSON_Parse("[1]");
    CHECK(sweep_config_from_json(arr, "cfg", &c, &err) == KB_EINPUT && has(err.msg, "cfg: expected a JSON object"));
    sweep_config_free(&c);
    cJSON_Delete(arr);
}

static void test_budget_mode(void) {
    char msg[1100];
    kb_sweep_config c;
    /* the top-level budget_mode is every entry's default; an entry's own wins */
    CHECK(load("\"budget_mode\": \"topk\", \"budgets\": [64], \"methods\": [\"quest\", {\"method\": \"quest\", "
               "\"label\": \"q2\", \"budget_mode\": \"traffic\"}]", &c, msg, sizeof msg) == 0);
    CHECK_MSG(!msg[0], "%s", msg);
    CHECK(c.n_cells == 2 && c.cells[0].p.budget_mode == KB_BUDGET_TOPK && c.cells[1].p.budget_mode == KB_BUDGET_TRAFFIC);
    CHECK(c.n_cells == 2 && !strcmp(c.cells[1].p.label, "q2") && !strcmp(c.cells[0].params_json, "") &&
          !strcmp(c.cells[1].params_json, ""));
    sweep_config_free(&c);
}

/* ---- files: --set and the default name ----------------------------------------------- */

static void put(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int load_file(const char *name, char *const *sets, int n, kb_sweep_config *c, char *msg, size_t cap) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    kb_err err = {0};
    int rc = sweep_config_load_with(path, sets, n, c, &err);
    snprintf(msg, cap, "%s", rc ? err.msg : "");
    return rc;
}

static void test_files(void) {
    char msg[1100], path[1200];
    kb_sweep_config c;
    static const char text[] = "{" TASKS ", \"methods\": [\"full\"]}";
    /* the default name: the file's name without its extension, other
     * characters made '_', cut to 100; ".json" gives "run" */
    snprintf(path, sizeof path, "%s/my cfg.v2.json", dir);
    put(path, text);
    CHECK(load_file("my cfg.v2.json", NULL, 0, &c, msg, sizeof msg) == 0 && c.name && !strcmp(c.name, "my_cfg.v2"));
    sweep_config_free(&c);
    char longname[160];
    memset(longname, 'b', 150);
    strcpy(longname + 150, ".json");
    snprintf(path, sizeof path, "%s/%s", dir, longname);
    put(path, text);
    CHECK(load_file(longname, NULL, 0, &c, msg, sizeof msg) == 0 && c.name && strlen(c.name) == 100 &&
          strspn(c.name, "b") == 100);
    sweep_config_free(&c);
    unlink(path);
    snprintf(path, sizeof path, "%s/.json", dir);
    put(path, text);
    CHECK(load_file(".json", NULL, 0, &c, msg, sizeof msg) == 0 && c.name && !strcmp(c.name, "run"));
    sweep_config_free(&c);
    unlink(path);
    /* --set: KEY=VALUE, a known top-level key, the note on errors in its value */
    snprintf(path, sizeof path, "%s/s.json", dir);
    put(path, text);
    char *s1[] = {"seed=7", "budgets=[64]", "methods=[\"quest\"]"};
    CHECK(load_file("s.json", s1, 3, &c, msg, sizeof msg) == 0 && c.seed == 7 && c.n_cells == 1 &&
          c.cells[0].p.budget == 64);
    sweep_config_free(&c);
    char *s2[] = {"=7"};
    CHECK(load_file("s.json", s2, 1, &c, msg, sizeof msg) == KB_EINPUT && has(msg, "--set expects KEY=VALUE, got '=7'"));
    char *s3[] = {"colour=red"};
    CHECK(load_file("s.json", s3, 1, &c, msg, sizeof msg) == KB_EINPUT && has(msg, "unknown top-level key 'colour'"));
    char *s4[] = {"data_dir=/d", "name=x"};
    CHECK(load_file("s.json", s4, 2, &c, msg, sizeof msg) == 0 && c.data_dir && !strcmp(c.data_dir, "/d") &&
          !strcmp(c.name, "x"));
    sweep_config_free(&c);
    char *s5[] = {"seed=1", "latency={\"contexts\": [64], \"reps\": 0}"};
    CHECK(load_file("s.json", s5, 2, &c, msg, sizeof msg) == KB_EINPUT && has(msg, "latency: key 'reps'") &&
          has(msg, "(the value comes from --set latency={\"contexts\": [64], \"reps\": 0})"));
    char *s6[] = {"max_samples=-1", "seed=1"};
    CHECK(load_file("s.json", s6, 2, &c, msg, sizeof msg) == KB_EINPUT &&
          has(msg, "key 'max_samples'") && has(msg, "(the value comes from --set max_samples=-1)"));
    unlink(path);
    /* a config path must fit run.json's config_file: 1023 bytes do, 1024 do not */
    char lp[1100];
    size_t dl = strlen(dir);
    memcpy(lp, dir, dl);
    memset(lp + dl, '/', 1023 - dl - 6); /* repeated slashes are one separator */
    strcpy(lp + 1023 - 6, "x.json");
    snprintf(path, sizeof path, "%s/x.json", dir);
    put(path, text);
    kb_err err = {0};
    CHECK_MSG(strlen(lp) == 1023 && sweep_config_load(lp, &c, &err) == 0, "%zu %s", strlen(lp), err.msg);
    sweep_config_free(&c);
    memmove(lp + dl + 1, lp + dl, strlen(lp + dl) + 1); /* one more slash */
    CHECK(strlen(lp) == 1024 && sweep_config_load(lp, &c, &err) == KB_EINPUT && has(err.msg, "a config path of 1024 bytes"));
    unlink(path);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kvbench-test-config.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    test_defaults();
    test_ranges();
    test_budget_mode();
    test_files();
    char path[300];
    snprintf(path, sizeof path, "%s/my cfg.v2.json", dir);
    unlink(path);
    rmdir(dir);
    return check_summary("test_config");
}
