/* test_fuzz_regressions.c - replays every input the fuzzers found a bug with
 * (every file in tests/fuzz/regressions/<target>/) through the same entry points as the
 * libFuzzer targets (tests/fuzz/fuzz_<target>.c, included here with
 * FUZZ_REPLAY so they define fuzz_<target>_one but no libFuzzer entry), so
 * `make test` checks the properties again and `make sanitize` would catch the
 * memory errors again. Each input is copied into a buffer of exactly its size
 * (no NUL after it), as libFuzzer hands it over.
 *
 * A replay fails when a target's property check (FUZZ_ASSERT) is violated;
 * the memory errors themselves only show under the sanitizer build, so each
 * fixed bug also has a direct check below that fails without sanitizers.
 * docs/RELIABILITY.md lists the bugs. Run from the repository root (as
 * tests/run.sh does). */
#define FUZZ_REPLAY 1

#include <dirent.h>

#include "check.h"
#include "tests/fuzz/fuzz_config.c"
#include "tests/fuzz/fuzz_csv.c"
#include "tests/fuzz/fuzz_gguf.c"
#include "tests/fuzz/fuzz_jsonl.c"
#include "tests/fuzz/fuzz_npy.c"
#include "tests/fuzz/fuzz_rows.c"
#include "tests/fuzz/fuzz_tokenizer.c"

typedef int (*fuzz_one_fn)(const uint8_t *d, size_t n);

static int cmp_names(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays tests/fuzz/regressions/<target>/ (absent folder: nothing to do);
 * returns the number of files. */
static int replay_dir(const char *target, fuzz_one_fn one) {
    char dir[256];
    snprintf(dir, sizeof dir, "tests/fuzz/regressions/%s", target);
    DIR *dh = opendir(dir);
    if (!dh) return 0;
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(dh)) && n < 512)
        if (e->d_name[0] != '.' && strcmp(e->d_name, "README.md")) names[n++] = strdup(e->d_name);
    closedir(dh);
    qsort(names, (size_t)n, sizeof *names, cmp_names);
    for (int i = 0; i < n; i++) {
        char path[600];
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        char *text = NULL;
        size_t len = 0;
        kb_err err = {0};
        int rc = file_read_all(path, &text, &len, &err);
        CHECK_MSG(rc == 0, "%s", err.msg);
        if (!rc) {
            uint8_t *buf = malloc(len ? len : 1); /* exactly the input, no terminator */
            memcpy(buf, text, len);
            int before = fuzz_failures;
            one(buf, len);
            CHECK_MSG(fuzz_failures == before, "%s: a fuzz property fails again", path);
            free(buf);
            free(text);
        }
        free(names[i]);
    }
    return n;
}

/* json_parse quoted up to 20 bytes after the error position with '%.20s',
 * reading past the end of a buffer that is not NUL-terminated. */
static void test_json_parse_unterminated(void) {
    char buf[32];
    memset(buf, 'X', sizeof buf); /* no NUL anywhere */
    memcpy(buf, "{\"a\":", 5);
    cJSON *j = NULL;
    kb_err err = {0};
    CHECK_EQ_INT(json_parse(buf, 5, "mem", &j, &err), KB_EINPUT);
    CHECK_MSG(strchr(err.msg, 'X') == NULL, "message quotes bytes past the length: %s", err.msg);
    CHECK(strstr(err.msg, "mem:1:") != NULL);
}

int main(void) {
    setenv("OMP_NUM_THREADS", "1", 0);
    test_json_parse_unterminated();
    static const struct {
        const char *name;
        fuzz_one_fn one;
    } targets[] = {
        {"gguf", fuzz_gguf_one},   {"tokenizer", fuzz_tokenizer_one}, {"config", fuzz_config_one},
        {"jsonl", fuzz_jsonl_one}, {"npy", fuzz_npy_one},         {"rows", fuzz_rows_one},
        {"csv", fuzz_csv_one},
    };
    int total = 0;
    for (size_t i = 0; i < sizeof targets / sizeof targets[0]; i++) {
        int n = replay_dir(targets[i].name, targets[i].one);
        printf("fuzz regressions: %s: %d inputs replayed\n", targets[i].name, n);
        total += n;
    }
    CHECK(total >= 1); /* the folders are in the repository: finding none means a wrong cwd */
    fuzz_tokenizer_done();
    return check_summary("test_fuzz_regressions");
}
