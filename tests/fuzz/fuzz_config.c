/* fuzz_config.c - libFuzzer target: the JSON config parser.
 *
 * Input: a sweep config file image, optionally followed by a NUL byte and
 * up to 4 NUL-separated `--set KEY=VALUE` overrides (a config with a NUL is
 * refused anyway, so the overrides ride in a channel the parser never sees).
 *   1. sweep_config_load_with on the text written to a file in /dev/shm;
 *      a refusal needs KB_EINPUT and a message naming the file; a config that
 *      loads has >= 1 cell, each with a method, a label, a budget that is
 *      -1 or >= 1, and params_json that parses as a JSON object (or is "");
 *   2. json_parse on the text; when it is an object: method_params_parse on
 *      it and on each entry of its "methods" array (every method's validate()
 *      runs on fuzzed knobs), method_params_to_json on what parses, and the
 *      typed getters of harness/json.h on a few keys with every type. */
#include "tests/fuzz/fuzz_common.h"
#include "harness/config.h"
#include "harness/json.h"
#include "methods/params.h"

#define CFG_FZ_MAX_SET 4

static void cfg_fz_params(const cJSON *obj, const char *where) {
    kb_method_params p;
    kb_err err = {0};
    memset(&p, 0, sizeof p);
    int rc = method_params_parse(obj, where, &p, &err);
    if (rc) {
        FUZZ_ASSERT_ERR(rc, err);
        return;
    }
    FUZZ_ASSERT(p.ops != NULL && p.label[0], "parsed params without method or label");
    FUZZ_ASSERT(p.budget == -1 || p.budget >= 1, "budget %d", p.budget);
    cJSON *j = method_params_to_json(&p);
    FUZZ_ASSERT(cJSON_IsObject(j), "method_params_to_json");
    char *s = cJSON_PrintUnformatted(j);
    free(s);
    cJSON_Delete(j);
}

static void cfg_fz_getters(const cJSON *o) {
    static const char *const keys[] = {"name", "seed", "budgets", "fidelity", "methods", "x"};
    static const char *const allowed[] = {"name", "seed", "methods", NULL};
    kb_err err = {0};
    long l;
    double d;
    int b;
    const char *s;
    const char **arr;
    int n;
    int rc = json_check_keys(o, "fuzz", allowed, NULL, &err);
    if (rc) FUZZ_ASSERT_ERR(rc, err);
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        for (int req = 0; req < 2; req++) {
            memset(&err, 0, sizeof err);
            if ((rc = json_get_int(o, "fuzz", keys[i], req, -5, 1L << 40, 0, &l, &err)))
                FUZZ_ASSERT_ERR(rc, err);
            if ((rc = json_get_double(o, "fuzz", keys[i], req, -1e300, 1e300, 0, &d, &err)))
                FUZZ_ASSERT_ERR(rc, err);
            if ((rc = json_get_bool(o, "fuzz", keys[i], req, 0, &b, &err))) FUZZ_ASSERT_ERR(rc, err);
            if ((rc = json_get_string(o, "fuzz", keys[i], req, NULL, &s, &err)))
                FUZZ_ASSERT_ERR(rc, err);
            arr = NULL;
            if ((rc = json_get_string_array(o, "fuzz", keys[i], req, &arr, &n, &err)))
                FUZZ_ASSERT_ERR(rc, err);
            free(arr);
        }
    }
}

int fuzz_config_one(const uint8_t *d, size_t n) {
    /* the config text, then the overrides */
    size_t tl = n;
    const uint8_t *nul = memchr(d, 0, n);
    if (nul) tl = (size_t)(nul - d);
    char *sets[CFG_FZ_MAX_SET];
    int n_set = 0;
    if (nul) {
        const uint8_t *p = nul + 1, *end = d + n;
        while (p < end && n_set < CFG_FZ_MAX_SET) {
            const uint8_t *q = memchr(p, 0, (size_t)(end - p));
            size_t l = q ? (size_t)(q - p) : (size_t)(end - p);
            sets[n_set] = malloc(l + 1);
            memcpy(sets[n_set], p, l);
            sets[n_set++][l] = 0;
            p += l + 1;
        }
    }
    char path[512];
    fuzz_path(path, sizeof path, "in.json");
    fuzz_write(path, d, tl);
    kb_sweep_config c;
    kb_err err = {0};
    int rc = sweep_config_load_with(path, sets, n_set, &c, &err);
    if (rc) {
        FUZZ_ASSERT_ERR(rc, err);
        /* every message names the config file (a malformed --set names itself) */
        FUZZ_ASSERT(strstr(err.msg, path) || !strncmp(err.msg, "--set", 5),
                    "message without the file name: '%s'", err.msg);
    } else {
        FUZZ_ASSERT(c.n_cells >= 1 && c.name && c.tasks, "loaded config: %d cells", c.n_cells);
        for (int i = 0; i < c.n_cells; i++) {
            const kb_cell *cell = &c.cells[i];
            FUZZ_ASSERT(cell->p.ops && cell->p.label[0], "cell %d", i);
            FUZZ_ASSERT(cell->p.budget == -1 || cell->p.budget >= 1, "cell %d budget %d", i,
                        cell->p.budget);
            if (cell->params_json[0]) {
                cJSON *pj = cJSON_Parse(cell->params_json);
                FUZZ_ASSERT(cJSON_IsObject(pj), "cell %d params_json '%s'", i, cell->params_json);
                cJSON_Delete(pj);
            }
        }
        FUZZ_ASSERT(c.window_max >= 32, "window_max %d", c.window_max);
        sweep_config_free(&c);
    }
    for (int i = 0; i < n_set; i++) free(sets[i]);

    cJSON *j = NULL;
    rc = json_parse((const char *)d, tl, "fuzz.json", &j, &err);
    if (rc) {
        FUZZ_ASSERT_ERR(rc, err);
        return 0;
    }
    if (cJSON_IsObject(j)) {
        cfg_fz_params(j, "fuzz.json");
        const cJSON *ms = cJSON_GetObjectItemCaseSensitive(j, "methods");
        int k = 0;
        if (cJSON_IsArray(ms))
            for (const cJSON *m = ms->child; m && k < 64; m = m->next, k++)
                if (cJSON_IsObject(m)) cfg_fz_params(m, "fuzz.json: methods[]");
        cfg_fz_getters(j);
    }
    cJSON_Delete(j);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fuzz_config_one(d, n); }
#endif
