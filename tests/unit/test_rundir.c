/* test_rundir.c - what a run directory may lose (harness/rundir.h) and when
 * two run.json were written by builds their commit cannot tell apart
 * (runinfo_other_build): cases written out by hand. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "harness/rundir.h"
#include "harness/runinfo.h"

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

static int differs(const char *a, const char *b) {
    cJSON *ja = cJSON_Parse(a), *jb = cJSON_Parse(b);
    int r = runinfo_other_build(ja, jb) != NULL;
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    return r;
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
                            "\".hidden.png\", \"a.txt\", 7]}], \"in_progress\": [\"b.svg\", \"a.png\"]}");
    char **names;
    int n;
    plots_listed(dir, &names, &n);
    CHECK_EQ_INT(n, 3); /* a.png once, a.dat, b.svg; the rest are not plot's names */
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

    snprintf(p, sizeof p, "rm -rf '%s'", dir);
    CHECK_EQ_INT(system(p), 0);
    return check_summary("test_rundir");
}
