/* test_rundir.c - what a run directory may lose (harness/rundir.h), which
 * temporaries are stale (atomic_clean_stale), when two run.json were
 * written by builds their commit cannot tell apart (runinfo_other_build) and
 * when two plans' samples differ (samples_fingerprint, run.json's
 * data.sha256), the bytes of a table (table_write_csv) and SHA-256 itself
 * (model and trace hashes): cases written out by hand. */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "datasets/dataset.h"
#include "harness/atomic.h"
#include "harness/driver.h"
#include "harness/rundir.h"
#include "harness/runinfo.h"
#include "harness/sha256.h"
#include "harness/table.h"
#include "methods/trace.h"

static char dir[256];

static void put(const char *name, const char *text) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int exists(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* entries of dir whose name starts with prefix */
static int count_prefixed(const char *prefix) {
    DIR *d = opendir(dir);
    int n = 0;
    for (struct dirent *e; d && (e = readdir(d));) n += !strncmp(e->d_name, prefix, strlen(prefix));
    if (d) closedir(d);
    return n;
}

static int differs(const char *a, const char *b) {
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    int r = runinfo_other_build(ja, jb) != NULL;
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    return r;
}

/* A plan of two samples (a two-turn needle, a one-turn classification) that
 * plan_reset sets back after each edit. */
static char *ans_a[] = {"1234", "one"}, *ans_a2[] = {"1234", "two"}, *ans_b[] = {"5678"};
static char *classes[] = {"x", "y"}, *classes2[] = {"y", "x"};
static kb_turn turns_a[2], turns_b[1];
static kb_sample smp[2];
static kb_sample_list plan = {smp, 2, 2};

static void plan_reset(void) {
    turns_a[0] = (kb_turn){.user = "find the key", .answers = ans_a, .n_answers = 2, .max_new = 8,
                           .metric = "string_match", .metric2 = "partial_match", .kind = "needle"};
    turns_a[1] = (kb_turn){.user = "and again", .answers = ans_a, .n_answers = 1, .gold = "1234", .max_new = 4,
                           .metric = "string_match", .kind = "needle"};
    turns_b[0] = (kb_turn){.user = "classify", .answer_prefix = "Type:", .answers = ans_b, .n_answers = 1,
                           .max_new = 6, .metric = "classification", .stop = "\n", .first_line = 1, .kind = "trec"};
    smp[0] = (kb_sample){.task = "needle", .id = "w60_d0.5", .chat = 1, .turns = turns_a, .n_turns = 2, .depth = 0.5,
                         .target_tokens = -1, .prompt_tokens = 100, .context_words = 60};
    smp[1] = (kb_sample){.task = "trec", .id = "3", .system = "sys", .turns = turns_b, .n_turns = 1, .depth = -1,
                         .target_tokens = 900, .prompt_tokens = 700, .context_words = -1, .all_classes = classes,
                         .n_classes = 2, .provenance = "data=trec.jsonl"};
    plan.v = smp;
    plan.n = 2;
}

/* plan_reset, the edit, then whether the fingerprint is still base's */
#define FP_AFTER(edit, want_same)                                                   \
    do {                                                                           \
        plan_reset();                                                              \
        edit;                                                                      \
        char h_[65];                                                               \
        samples_fingerprint(&plan, h_);                                            \
        CHECK_MSG((strcmp(h_, base) == 0) == (want_same), "%s: %s", #edit, h_);    \
    } while (0)
#define FP_DIFFERS(edit) FP_AFTER(edit, 0)
#define FP_SAME(edit) FP_AFTER(edit, 1)

static void check_fingerprint(void) {
    char base[65];
    plan_reset();
    samples_fingerprint(&plan, base);
    CHECK(strlen(base) == 64 && strspn(base, "0123456789abcdef") == 64);
    /* what the methods see: every id, text, answer and scoring rule */
    FP_DIFFERS(smp[0].task[0] = 'N');
    FP_DIFFERS(smp[1].id[0] = '4');
    FP_DIFFERS(smp[0].chat = 0);
    FP_DIFFERS(smp[1].system = NULL);
    FP_DIFFERS(smp[0].system = ""); /* NULL (the family's default) is not "" */
    FP_DIFFERS(smp[0].shared_prefix = "find");
    FP_DIFFERS(smp[0].multi_request = 1);
    FP_DIFFERS(smp[0].depth = 0.25);
    FP_DIFFERS(smp[0].truncate_to = 50);
    FP_DIFFERS(smp[1].all_classes = classes2);
    FP_DIFFERS(smp[1].n_classes = 1);
    FP_DIFFERS(smp[0].n_turns = 1);
    FP_DIFFERS(turns_a[1].user = "and again!");
    FP_DIFFERS(turns_a[0].answer_prefix = "");
    FP_DIFFERS(turns_a[0].n_answers = 1);
    FP_DIFFERS(turns_a[0].answers = ans_a2);
    FP_DIFFERS(turns_a[1].gold = "12345");
    FP_DIFFERS(turns_a[0].max_new = 9);
    FP_DIFFERS(strcpy(turns_b[0].metric, "accuracy"));
    FP_DIFFERS(turns_a[0].metric2[0] = 0);
    FP_DIFFERS(turns_b[0].stop = NULL);
    FP_DIFFERS(turns_b[0].first_line = 0);
    FP_DIFFERS(plan.n = 1);
    FP_DIFFERS((plan.v = (kb_sample[]){smp[1], smp[0]})); /* plan order */
    /* strings are length-prefixed: text moved from one field to the next is another sample */
    FP_DIFFERS((turns_b[0].user = "classifyT", turns_b[0].answer_prefix = "ype:"));
    /* not the token counts nor where the text came from (the model's sha256
     * and data.provenance stand for those) */
    FP_SAME((smp[0].prompt_tokens = 5, smp[1].target_tokens = 800, smp[1].provenance = "data=other.jsonl"));
    FP_SAME((void)0);
}

/* table_write_csv's bytes, worked by hand from OUTPUTS.md's rule: a field is
 * quoted (a quote inside doubled) when it is empty or holds a comma, a quote
 * or a line break, or begins or ends with a space or a tab; each field alone
 * in needing it, so that every part of the rule counts. And it reads back. */
static void check_csv_quoting(void) {
    static const char *const cols[] = {"a", "b c", "d,e"};
    static const char *const r1[] = {"", "x,y", "say \"hi\""}, *const r2[] = {"cr\rhere", "lf\nhere", " lead"},
                             *const r3[] = {"trail\t", "plain", "mid dle"};
    static const char want[] = "a,b c,\"d,e\"\n"
                               "\"\",\"x,y\",\"say \"\"hi\"\"\"\n"
                               "\"cr\rhere\",\"lf\nhere\",\" lead\"\n"
                               "\"trail\t\",plain,mid dle\n";
    kb_table t;
    table_init(&t, cols, 3);
    table_add(&t, r1);
    table_add(&t, r2);
    table_add(&t, r3);
    char path[600];
    snprintf(path, sizeof path, "%s/t.csv", dir);
    kb_err e = {0};
    CHECK_EQ_INT(table_write_csv(&t, path, &e), 0);
    char got[256] = "";
    FILE *f = fopen(path, "rb");
    size_t n = f ? fread(got, 1, sizeof got - 1, f) : 0;
    if (f) fclose(f);
    got[n] = 0;
    CHECK_MSG(n == strlen(want) && !memcmp(got, want, n), "got [%s]", got);
    kb_table back;
    CHECK_EQ_INT(table_read_csv(path, cols, 3, &back, &e), 0);
    CHECK_EQ_INT(back.nrow, 3);
    for (int r = 0; r < 3 && back.nrow == 3; r++)
        for (int c = 0; c < 3; c++) CHECK_STREQ(back.rows[r][c], t.rows[r][c]);
    table_free(&back);
    table_free(&t);
    /* what a reader must refuse: another version's header (a column fewer or
     * more, or renamed), a record of another length, a quote left open, an
     * empty file */
    static const struct {
        const char *text, *msg;
    } bad[] = {{"a,b c\n1,2\n", "header does not match"},
               {"a,b c,\"d,e\",f\n1,2,3,4\n", "header does not match"},
               {"a,B c,\"d,e\"\n1,2,3\n", "header does not match"},
               {"a,b c,\"d,e\"\n1,2,3\n1,2,3,4\n", "record 3 has 4 fields, expected 3"},
               {"a,b c,\"d,e\"\n1,2,3\n1,2\n", "record 3 has 2 fields, expected 3"},
               {"a,b c,\"d,e\"\n1,2,\"3\n", "malformed CSV"},
               {"", "empty file"}};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        put("t.csv", bad[i].text);
        kb_err be = {0};
        CHECK_MSG(table_read_csv(path, cols, 3, &back, &be) == KB_EINPUT && strstr(be.msg, bad[i].msg), "%zu: %s", i,
                  be.msg);
    }
    unlink(path);
}

/* SHA-256 of n bytes "abc...zabc..." at lengths about the 64-byte block and
 * its 56-byte padding edge, in one update and in pieces of 1, 7 and 63 bytes;
 * expected digests from Python's hashlib.sha256. And a file that cannot be
 * read (a directory) is an error, not the digest of nothing. */
static void check_sha256(void) {
    static const struct {
        int n;
        const char *hex;
    } v[] = {
        {0, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
        {1, "ca978112ca1bbdcafac231b39a23dc4da786eff8147c4e72b9807785afee48bb"},
        {55, "595615dbe4f0f407ae397d08b4c2cb870cb9b0e11937416f950c5160acf9c005"},
        {56, "784f623b787495078e93ff28a25b581df0584055a7e71d8cd90c454716b92f51"},
        {57, "808f0738aa4401bdee842e5a15a7baad5809f976d8eb6f9bd2683cebd2e8d671"},
        {62, "78a08480079addf8f63112aa195cbb6e940e3bf2efcd331920f0fda2a3556ac6"},
        {63, "5ca3e1ef5207490eac01a795e5cc94d59582a5118bf9534665c8668d87aa647c"},
        {64, "2fcd5a0d60e4c941381fcc4e00a4bf8be422c3ddfafb93c809e8d1e2bfffae8e"},
        {65, "1b3cd1877ab2f2f19f7be001722554f336cb799df0329de0bb4c118dc6abc06d"},
        {119, "faef67da856d6fd9c8d12f9ed0a4fefd3cf0ce085ab43e2907418d457e3c354b"},
        {120, "c9512b08619c19fbb503c7da6b46ef20301e5f7a7a5f43989182398536f5c5c8"},
        {127, "1b9907986f18ddc2b37e18be502d82d69d6e18bb9dff9e16f2aceea7d88cb933"},
        {128, "6c05be2c4268843ae47e68e611277ce62c02153f2f4d2e1e2a1a4b44f766cf74"},
        {1000, "915e53a44c18b19bb06ba5b3f5fcaf1dc4651e8404c63425cfc6174e74659d87"},
    };
    char msg[1000], hex[65];
    for (int i = 0; i < 1000; i++) msg[i] = (char)('a' + i % 26);
    for (size_t k = 0; k < sizeof v / sizeof *v; k++) {
        static const int piece[] = {1000, 1, 7, 63};
        for (int q = 0; q < 4; q++) {
            kb_sha256 h;
            sha256_init(&h);
            for (int at = 0; at < v[k].n; at += piece[q]) sha256_update(&h, msg + at, (size_t)KB_MIN(piece[q], v[k].n - at));
            sha256_final(&h, hex);
            CHECK_MSG(!strcmp(hex, v[k].hex), "n %d in pieces of %d: %s", v[k].n, piece[q], hex);
        }
    }
    kb_err e = {0};
    CHECK(sha256_file(dir, hex, &e) != 0 && strstr(e.msg, "read error") != NULL);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kvbench-test-rundir.XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    char sub[300];
    snprintf(sub, sizeof sub, "%s/plots", dir);
    mkdir(sub, 0755);
    /* a finished plot listed a.png and a.dat, a killed one b.svg in progress;
     * the user's c.png and a listed name outside plots/ stay */
    put("samples.csv", "x\n");
    put("run.json", "{}\n");
    put("keep.txt", "mine\n");
    put("plots/a.png", "1");
    put("plots/a.dat", "1");
    put("plots/b.svg", "1");
    put("plots/c.png", "mine");
    put("plots/b.svg.tmp.999999999", "cut");
    put("plots/plots.json", "{\"figures\": [{\"name\": \"a\", \"files\": [\"a.png\", \"a.dat\", \"../keep.txt\", "
                            "\".hidden.png\", \"a.txt\", \"x/../../keep.png\", 7]}], "
                            "\"in_progress\": [\"b.svg\", \"a.png\"]}");
    char **names;
    int n;
    plots_listed(dir, &names, &n);
    CHECK_EQ_INT(n, 3); /* a.png once, a.dat, b.svg; the rest are not plot's names (a '/' in
                         * x/../../keep.png, which names a file outside plots/) */
    for (int i = 0; i < n; i++) free(names[i]);
    free(names);
    kb_err e = {0};
    CHECK_EQ_INT(run_dir_clear(dir, &e), 0);
    CHECK(!exists("run.json") && !exists("samples.csv") && exists("keep.txt"));
    CHECK(!exists("plots/a.png") && !exists("plots/a.dat") && !exists("plots/b.svg"));
    CHECK(!exists("plots/plots.json") && !exists("plots/b.svg.tmp.999999999"));
    CHECK(exists("plots/c.png"));
    /* plots a file, not a directory: nothing of plot's to remove */
    char p[600];
    snprintf(p, sizeof p, "%s/plots/c.png", dir);
    unlink(p);
    rmdir(sub);
    put("plots", "a file of the user's\n");
    CHECK_EQ_INT(run_dir_clear(dir, &e), 0);
    CHECK(exists("plots"));
    /* a damaged manifest lists nothing */
    unlink(sub);
    mkdir(sub, 0755);
    put("plots/a.png", "1");
    put("plots/plots.json", "{\"figures\": [{\"files\": [\"a.png\"]}");
    plots_listed(dir, &names, &n);
    CHECK_EQ_INT(n, 0);
    free(names);
    CHECK_EQ_INT(run_dir_clear(dir, &e), 0);
    CHECK(exists("plots/a.png"));

    /* run.json goes first: when a later file cannot be removed (samples.csv
     * a directory here), the directory holds no run.json beside the tables
     * left (rundir.h), and the error names that file */
    put("run.json", "{}\n");
    put("summary.csv", "x\n");
    char sdir[600];
    snprintf(sdir, sizeof sdir, "%s/samples.csv", dir);
    mkdir(sdir, 0755);
    put("samples.csv/x", "1");
    kb_err e2 = {0};
    CHECK(run_dir_clear(dir, &e2) != 0);
    CHECK(strstr(e2.msg, "samples.csv: cannot remove") != NULL);
    CHECK(!exists("run.json") && exists("summary.csv"));
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "rm -r '%s' '%s/summary.csv'", sdir, dir);
    CHECK_EQ_INT(system(cmd), 0);

    /* traces/ (--dump-trace): each directory's trace files and their stale
     * temporaries go, then the directory and traces/ when empty; a file of
     * the user's and what a symbolic link points to stay */
    static const char *const tdirs[] = {"traces", "traces/0_t_a_L1", "traces/1_t_b_L1", "kept"};
    for (size_t i = 0; i < sizeof tdirs / sizeof *tdirs; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, tdirs[i]);
        CHECK_EQ_INT(mkdir(p, 0755), 0);
    }
    for (int i = 0; i < KB_TRACE_NFILES; i++) {
        char name[200];
        snprintf(name, sizeof name, "traces/0_t_a_L1/%s", kb_trace_files[i]);
        put(name, "1");
        snprintf(name, sizeof name, "kept/%s", kb_trace_files[i]);
        put(name, "1");
    }
    put("traces/0_t_a_L1/k.npy.tmp.999999999", "cut");
    put("traces/1_t_b_L1/meta.json", "{}");
    put("traces/1_t_b_L1/notes.txt", "mine");
    char target[600], link[600];
    snprintf(target, sizeof target, "%s/kept", dir);
    snprintf(link, sizeof link, "%s/traces/2_t_c_L1", dir);
    CHECK_EQ_INT(symlink(target, link), 0);
    CHECK_EQ_INT(run_dir_clear(dir, &e), 0);
    CHECK(!exists("traces/0_t_a_L1"));
    CHECK(!exists("traces/1_t_b_L1/meta.json") && exists("traces/1_t_b_L1/notes.txt"));
    CHECK(exists("kept/meta.json") && exists("kept/k.npy") && exists("traces/2_t_c_L1"));
    /* once only kvbench's files are left, nothing of traces/ stays */
    unlink(link);
    snprintf(p, sizeof p, "%s/traces/1_t_b_L1/notes.txt", dir);
    unlink(p);
    put("traces/1_t_b_L1/q.npy", "1");
    CHECK_EQ_INT(run_dir_clear(dir, &e), 0);
    CHECK(!exists("traces"));
    /* traces/ a symbolic link: not followed, nothing behind it removed */
    snprintf(link, sizeof link, "%s/traces", dir);
    snprintf(p, sizeof p, "%s/kept/sub", dir);
    CHECK_EQ_INT(mkdir(p, 0755), 0);
    put("kept/sub/meta.json", "{}");
    CHECK_EQ_INT(symlink(target, link), 0);
    CHECK_EQ_INT(run_dir_clear(dir, &e), 0);
    CHECK(exists("kept/sub/meta.json") && exists("traces"));
    unlink(link);

    /* a write whose rename fails (the target a directory) says so and leaves
     * no temporary; one that succeeds leaves only the file */
    char tdir[600];
    snprintf(tdir, sizeof tdir, "%s/table.csv", dir);
    CHECK_EQ_INT(mkdir(tdir, 0755), 0);
    CHECK(atomic_write(tdir, "a,b\n", 4, &e2) != 0 && strstr(e2.msg, "rename failed") != NULL);
    CHECK_EQ_INT(count_prefixed("table.csv"), 1);
    rmdir(tdir);
    CHECK_EQ_INT(atomic_write(tdir, "a,b\n", 4, &e2), 0);
    CHECK_EQ_INT(count_prefixed("table.csv"), 1);
    unlink(tdir);

    /* stale temporaries: only of the names given, with a decimal pid of a
     * process that is gone (or this very process: a pid reused after a
     * crash); a live writer's and anything else stay */
    static const char *const tnames[] = {"samples.csv", "run.json"};
    char mine[64], live[64];
    snprintf(mine, sizeof mine, "samples.csv.tmp.%ld", (long)getpid());
    snprintf(live, sizeof live, "run.json.tmp.%ld", (long)getppid());
    put(mine, "cut");
    put(live, "being written");
    put("run.json.tmp.999999999", "cut");
    put("samples.csv.tmp.", "x");
    put("samples.csv.tmp.12a", "x");
    put("samples.csvtmp.999999999", "x");
    put("samples.csv.tmp.-5", "x");
    put("summary.csv.tmp.999999999", "x");
    CHECK_EQ_INT(atomic_clean_stale(dir, tnames, 2), 2);
    CHECK(!exists(mine) && !exists("run.json.tmp.999999999"));
    CHECK(exists(live) && exists("samples.csv.tmp.") && exists("samples.csv.tmp.12a"));
    CHECK(exists("samples.csvtmp.999999999") && exists("samples.csv.tmp.-5") && exists("summary.csv.tmp.999999999"));
    CHECK(atomic_tmp_of("samples.csv.tmp.12", "samples.csv") != NULL);
    CHECK(atomic_tmp_of("samples.csv.tmp.", "samples.csv") == NULL);
    CHECK(atomic_tmp_of("samples.csv.tmp.1 ", "samples.csv") == NULL);

    /* builds: a clean commit is compared as a commit; a modified tree's or an
     * unknown one's by the binary's sha256 too */
    CHECK(differs("{\"git_commit\": \"abc\"}", "{\"git_commit\": \"abd\"}"));
    CHECK(differs("{\"git_commit\": \"abc\"}", "{}"));
    CHECK(!differs("{\"git_commit\": \"abc\", \"build_sha256\": \"1\"}", "{\"git_commit\": \"abc\", \"build_sha256\": \"2\"}"));
    CHECK(differs("{\"git_commit\": \"abc-dirty\", \"build_sha256\": \"1\"}",
                  "{\"git_commit\": \"abc-dirty\", \"build_sha256\": \"2\"}"));
    CHECK(!differs("{\"git_commit\": \"abc-dirty\", \"build_sha256\": \"1\"}",
                   "{\"git_commit\": \"abc-dirty\", \"build_sha256\": \"1\"}"));
    CHECK(differs("{\"git_commit\": \"unknown\", \"build_sha256\": \"1\"}", "{\"git_commit\": \"unknown\"}"));
    CHECK(differs("{\"git_commit\": \"abc-dirty\"}", "{\"git_commit\": \"abc-dirty\"}"));

    check_fingerprint();
    check_csv_quoting();
    check_sha256();

    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(p), 0);
    return check_summary("test_rundir");
}
