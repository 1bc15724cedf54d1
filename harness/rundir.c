/* rundir.c - clearing a run directory (rundir.h). */
#include "harness/rundir.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <sys/stat.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/atomic.h"
#include "harness/json.h"
#include "methods/trace.h"

/* A figure file's name as plot makes it: no directory part, not hidden, one
 * of plot's three extensions. */
static int plain_figure_name(const char *s) {
    size_t n = strlen(s);
    if (!n || n > 255 || s[0] == '.' || strchr(s, '/')) return 0;
    static const char *const ext[] = {".dat", ".png", ".svg"};
    for (size_t i = 0; i < KB_ARRAY_LEN(ext); i++) {
        size_t e = strlen(ext[i]);
        if (n > e && !strcmp(s + n - e, ext[i])) return 1;
    }
    return 0;
}

/* Adds the plain figure names of the JSON array files to names, once each. */
static void add_listed(const cJSON *files, char ***names, int *n) {
    const cJSON *file;
    cJSON_ArrayForEach(file, files) {
        if (!cJSON_IsString(file) || !plain_figure_name(file->valuestring)) continue;
        int dup = 0;
        for (int i = 0; i < *n && !dup; i++) dup = !strcmp((*names)[i], file->valuestring);
        if (dup) continue;
        *names = KB_REALLOC(*names, ((size_t)*n + 1) * sizeof **names);
        (*names)[(*n)++] = kb_strdup(file->valuestring);
    }
}

void plots_listed(const char *dir, char ***names, int *n) {
    *names = NULL;
    *n = 0;
    char path[1200]; /* dir is at most KB_DIR_MAX bytes */
    snprintf(path, sizeof path, "%s/" KB_PLOTS_MANIFEST, dir);
    cJSON *j;
    if (access(path, F_OK) || json_load_file(path, &j, NULL)) return;
    /* each figure's files, and those of a plot that did not finish */
    const cJSON *f;
    cJSON_ArrayForEach(f, cJSON_GetObjectItemCaseSensitive(j, "figures"))
        add_listed(cJSON_GetObjectItemCaseSensitive(f, "files"), names, n);
    add_listed(cJSON_GetObjectItemCaseSensitive(j, "in_progress"), names, n);
    cJSON_Delete(j);
}

static int unlink_file(const char *path, kb_err *err) {
    /* ENOTDIR: plots is a file, not kvbench's directory */
    if (unlink(path) && errno != ENOENT && errno != ENOTDIR)
        return kb_fail(err, KB_ERUNTIME, "%s: cannot remove the previous run's file (%s)", path,
                       strerror(errno));
    return 0;
}

int plots_clear(const char *dir, kb_err *err) {
    char **names;
    int n, rc = 0;
    plots_listed(dir, &names, &n);
    char path[1600];
    for (int i = 0; i < n && !rc; i++) {
        snprintf(path, sizeof path, "%s/plots/%s", dir, names[i]);
        rc = unlink_file(path, err);
    }
    snprintf(path, sizeof path, "%s/" KB_PLOTS_MANIFEST, dir);
    if (!rc) rc = unlink_file(path, err);
    snprintf(path, sizeof path, "%s/plots", dir);
    /* the temporaries of a plot that was killed: of the files it listed (it
     * lists each before writing it) and of plots.json */
    names = KB_REALLOC(names, ((size_t)n + 1) * sizeof *names);
    names[n] = kb_strdup("plots.json");
    if (!rc) atomic_clean_stale(path, (const char *const *)names, n + 1);
    for (int i = 0; i <= n; i++) free(names[i]);
    free(names);
    if (!rc) rmdir(path); /* only when empty: files kvbench did not list stay */
    return rc;
}

int traces_clear(const char *dir, kb_err *err) {
    char top[1200];
    snprintf(top, sizeof top, "%s/traces", dir);
    struct stat tst;
    if (lstat(top, &tst) || !S_ISDIR(tst.st_mode)) return 0; /* none, or a link: not followed */
    DIR *dp = opendir(top);
    if (!dp) return 0; /* no traces (or not kvbench's directory) */
    int rc = 0;
    for (struct dirent *e; !rc && (e = readdir(dp));) {
        if (e->d_name[0] == '.') continue;
        char sub[1600], path[1800];
        snprintf(sub, sizeof sub, "%s/%s", top, e->d_name);
        struct stat st;
        if (lstat(sub, &st) || !S_ISDIR(st.st_mode)) continue; /* a link (perhaps to a kept trace), a file */
        for (int i = 0; i < KB_TRACE_NFILES && !rc; i++) {
            snprintf(path, sizeof path, "%s/%s", sub, kb_trace_files[i]);
            rc = unlink_file(path, err);
        }
        if (!rc) atomic_clean_stale(sub, kb_trace_files, KB_TRACE_NFILES); /* of a trace write that was killed */
        if (!rc) rmdir(sub);              /* only when empty */
    }
    closedir(dp);
    if (!rc) rmdir(top);
    return rc;
}

/* run.json and the tables beside it, in the order run_dir_clear removes them */
static const char *const run_files[] = {"run.json", "samples.csv", "summary.csv", "latency.csv"};

int run_kind_has_table(const char *kind, const char *table) {
    return !kind || strcmp(kind, "bench_methods") || !strcmp(table, "latency.csv");
}

int run_dir_check_tables(const char *dir, int samples_only, const char *advice, kb_err *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    int have_run = access(path, F_OK) == 0;
    char kind[64] = "";
    if (have_run) {
        cJSON *j;
        if (json_load_file(path, &j, NULL)) return 0; /* the caller's to refuse */
        const cJSON *k = cJSON_GetObjectItemCaseSensitive(j, "kind");
        if (cJSON_IsString(k)) snprintf(kind, sizeof kind, "%s", k->valuestring);
        cJSON_Delete(j);
    }
    for (size_t i = 1; i < KB_ARRAY_LEN(run_files); i++) {
        const char *t = run_files[i];
        if (samples_only && strcmp(t, "samples.csv")) continue;
        snprintf(path, sizeof path, "%s/%s", dir, t);
        if (access(path, F_OK)) continue;
        if (!have_run)
            return kb_fail(err, KB_EINPUT, "%s has no run.json beside it, so it is of no run kvbench can "
                           "check: %s", path, advice);
        if (!run_kind_has_table(*kind ? kind : NULL, t))
            return kb_fail(err, KB_EINPUT, "%s is of no run kvbench can check: the run.json beside it is a "
                           "bench methods run's, which writes no %s: %s", path, t, advice);
    }
    return 0;
}

int run_dir_clean_stale(const char *dir) {
    return atomic_clean_stale(dir, run_files, (int)KB_ARRAY_LEN(run_files));
}

int run_dir_clear(const char *dir, kb_err *err) {
    const char *const *files = run_files;
    for (size_t i = 0; i < KB_ARRAY_LEN(run_files); i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/%s", dir, files[i]);
        int rc = unlink_file(path, err);
        if (rc) return rc;
    }
    int rc = plots_clear(dir, err);
    return rc ? rc : traces_clear(dir, err);
}
