/* cmd_merge.c - kvbench merge OUT SHARD_DIR...: joins the run directories of
 * a sharded sweep (`kvbench sweep --shard I/N`, e.g. a Slurm job array) into
 * one run whose samples.csv equals the single-process run's (rows ordered by
 * sample, cells in config order), with summary.csv rebuilt and a run.json
 * listing the shards; shard 0's latency.csv (the latency part runs there)
 * is copied. The shards must come from the same config, overrides, model and
 * KV type, be complete (status done), and be the whole set 0/N..N-1/N, whose
 * rows hold every sample of the plan once (samples_check on each). The
 * merged run.json is shard 0/N's with the run's times (first start, last
 * end), no trace (dump_trace null: traces stay in the shards) and, per shard
 * in merged_from, its machine, times and dump_trace. OUT must
 * not hold a run nor tables without their run.json (run_dir_check_tables;
 * either unless --force) and is never one of the shards. */
#include <cjson/cJSON.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "harness/atomic.h"
#include "harness/cli.h"
#include "harness/config.h"
#include "harness/driver.h"
#include "harness/json.h"
#include "harness/rundir.h"
#include "harness/runinfo.h"
#include "harness/table.h"

typedef struct row_ref {
    long seq;
    int shard, row;
} row_ref;

static int cmp_rows(const void *a, const void *b) {
    const row_ref *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    if (x->shard != y->shard) return x->shard - y->shard;
    return x->row - y->row;
}

static const cJSON *field(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* "I/N" with 0 <= I < N. */
static int parse_shard(const cJSON *v, int *i, int *n) {
    return cJSON_IsString(v) ? cli_parse_shard(v->valuestring, i, n) : -1;
}

/* dir and other name the same directory (other need not exist). */
static int same_dir(const char *dir, const char *other) {
    char a[PATH_MAX], b[PATH_MAX];
    return realpath(dir, a) && realpath(other, b) && !strcmp(a, b);
}

static int copy_file(const char *from, const char *to, kb_err *err) {
    char *buf;
    size_t n;
    int rc = file_read_all(from, &buf, &n, err);
    if (rc) return rc;
    rc = atomic_write(to, buf, n, err);
    free(buf);
    return rc;
}

int cmd_merge(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h"))) {
        printf("usage: kvbench merge [--force] OUT_DIR SHARD_DIR...   join the shards 0/N..N-1/N of a "
               "sweep into one run\n  --force  overwrite a run (or tables without their run.json) already in OUT_DIR\n");
        return 0;
    }
    int force = argc >= 2 && !strcmp(argv[1], "--force");
    argv += force;
    argc -= force;
    if (argc < 3 || argv[1][0] == '-') {
        fprintf(stderr, "usage: kvbench merge [--force] OUT_DIR SHARD_DIR...\n");
        return 2;
    }
    for (int i = 2; i < argc; i++)
        if (argv[i][0] == '-') {
            fprintf(stderr, "kvbench merge: '%s': options go before OUT_DIR (a shard directory starting "
                    "with '-' is written ./%s)\n", argv[i], argv[i]);
            return 2;
        }
    const char *out = argv[1];
    int ns = argc - 2;
    kb_err err = {0};
    if (check_out_path(out, 1, &err)) {
        fprintf(stderr, "kvbench merge: OUT_DIR %s\n", err.msg);
        return 2;
    }
    for (int i = 0; i < ns; i++)
        if (check_dir_len(argv[2 + i], &err)) { /* SHARD/run.json must fit its buffer */
            fprintf(stderr, "kvbench merge: shard %s\n", err.msg);
            return 2;
        }
    char rj[1200];
    struct stat st_rj;
    int lock_fd = -1; /* OUT_DIR's lock (dir_lock), before looking at what it holds */
    if (stat(out, &st_rj) == 0 && dir_lock(out, &lock_fd, &err)) {
        fprintf(stderr, "kvbench merge: %s\n", err.msg);
        return 2;
    }
    snprintf(rj, sizeof rj, "%s/run.json", out);
    if (!force && stat(rj, &st_rj) == 0) {
        fprintf(stderr, "kvbench merge: %s already holds a run: give a new OUT_DIR, or --force to "
                "overwrite it\n", out);
        dir_unlock(lock_fd);
        return 2;
    }
    /* tables without a run.json (a merge or a copy cut short): as sweep */
    if (!force && run_dir_check_tables(out, 0, "--force to overwrite it, or a new OUT_DIR", &err)) {
        fprintf(stderr, "kvbench merge: %s\n", err.msg);
        dir_unlock(lock_fd);
        return 2;
    }
    for (int i = 0; i < ns; i++)
        if (same_dir(out, argv[2 + i])) {
            fprintf(stderr, "kvbench merge: OUT_DIR %s is the shard %s: give a new directory\n", out,
                    argv[2 + i]);
            dir_unlock(lock_fd);
            return 2;
        }
    kb_table *tabs = calloc((size_t)ns, sizeof *tabs);
    cJSON **runs = calloc((size_t)ns, sizeof *runs);
    int rc = 0;
    char path[1200];
    for (int i = 0; i < ns && !rc; i++) {
        snprintf(path, sizeof path, "%s/run.json", argv[2 + i]);
        if ((rc = json_load_file(path, &runs[i], &err))) break;
        const cJSON *st = field(runs[i], "status");
        if (!cJSON_IsString(st) || strcmp(st->valuestring, "done")) {
            rc = kb_fail(&err, KB_EINPUT, "%s: status is %s, expected \"done\" (finish the shard "
                         "with kvbench sweep --resume first)", path,
                         cJSON_IsString(st) ? st->valuestring : "missing");
            break;
        }
        if (i > 0) {
            static const char *const same[] = {"config", "overrides", "kv_dtype"};
            for (size_t k = 0; k < KB_ARRAY_LEN(same) && !rc; k++)
                if (!cJSON_Compare(field(runs[0], same[k]), field(runs[i], same[k]), 1))
                    rc = kb_fail(&err, KB_EINPUT, "%s: %s differs from %s/run.json", path, same[k], argv[2]);
            const char *other = rc ? NULL : runinfo_other_build(runs[0], runs[i]);
            const cJSON *c0 = field(runs[0], "git_commit"), *ci = field(runs[i], "git_commit");
            if (other)
                rc = kb_fail(&err, KB_EINPUT, "%s: made by %s than %s (kvbench commit %s, there %s): the "
                             "merged table would hold rows of two builds under one commit (run every shard "
                             "with one build)", path, other, argv[2], cJSON_IsString(ci) ? ci->valuestring : "(none)",
                             cJSON_IsString(c0) ? c0->valuestring : "(none)");
            const cJSON *m0 = field(field(runs[0], "model"), "sha256"), *mi = field(field(runs[i], "model"), "sha256");
            if (!rc && !cJSON_Compare(m0, mi, 1))
                rc = kb_fail(&err, KB_EINPUT, "%s: the model (sha256) differs from %s", path, argv[2]);
            const cJSON *d0 = field(field(runs[0], "data"), "sha256"), *di = field(field(runs[i], "data"), "sha256");
            if (!rc && (d0 || di) && !cJSON_Compare(d0, di, 1)) /* older runs have none */
                rc = kb_fail(&err, KB_EINPUT, "%s: the samples (data.sha256) differ from %s: the shards "
                             "did not generate the same plan (another haystack corpus, word list, "
                             "wording or dataset file?)", path, argv[2]);
        }
        snprintf(path, sizeof path, "%s/samples.csv", argv[2 + i]);
        if (!rc) rc = table_read_csv(path, kb_samples_cols, kb_samples_ncols, &tabs[i], &err);
        if (rc) break;
    }
    /* shards: I/N values must be distinct and of the same N */
    for (int i = 0; i < ns && !rc; i++)
        for (int j = 0; j < i && !rc; j++) {
            const cJSON *a = field(runs[i], "shard"), *b = field(runs[j], "shard");
            if (cJSON_Compare(a, b, 1))
                rc = kb_fail(&err, KB_EINPUT, "%s and %s are the same shard (%s)", argv[2 + i], argv[2 + j],
                             cJSON_IsString(a) ? a->valuestring : "?");
        }
    /* the whole set 0/N..N-1/N, and every shard's rows its own samples */
    kb_sweep_config cfg;
    int cfg_ok = 0;
    int N = 0, zero = -1;
    long n_samples = 0;
    int *sidx = KB_CALLOC((size_t)ns, sizeof *sidx); /* shard i is sidx[i]/N */
    for (int i = 0; i < ns && !rc; i++) {
        int si, sn;
        long ns_i;
        snprintf(path, sizeof path, "%s/run.json", argv[2 + i]);
        const cJSON *ds = field(field(runs[i], "data"), "samples");
        if (parse_shard(field(runs[i], "shard"), &si, &sn))
            rc = kb_fail(&err, KB_EINPUT, "%s: key 'shard' is not \"I/N\" with 0 <= I < N", path);
        else if (i > 0 && sn != N)
            rc = kb_fail(&err, KB_EINPUT, "%s: shard %d/%d, but %s is of %d shards", path, si, sn, argv[2], N);
        /* an integer before any cast (1e300 was cast to long: undefined, then a
         * message about seq ranges; 2.5 was taken as 2) */
        else if (json_as_int(ds, path, "data.samples", 0, INT_MAX, &ns_i, &err))
            rc = KB_EINPUT;
        else if (i > 0 && ns_i != n_samples)
            rc = kb_fail(&err, KB_EINPUT, "%s: key 'data.samples' is %ld, but %ld in %s", path, ns_i,
                         n_samples, argv[2]);
        if (rc) break;
        N = sn;
        n_samples = ns_i;
        if (si == 0) zero = i;
        sidx[i] = si;
        snprintf(path, sizeof path, "%s/samples.csv", argv[2 + i]);
        rc = samples_check(&tabs[i], path, n_samples, si, sn, &err);
        /* and against the cells of the config (the same in every shard): each
         * sample of the shard has every cell once, with all its turns */
        if (!rc && !cfg_ok) {
            char where[1300];
            snprintf(where, sizeof where, "%s/run.json: config", argv[2]);
            rc = sweep_config_from_json(field(runs[0], "config"), where, &cfg, &err);
            cfg_ok = 1; /* parsed (or failed, with rc set): freed below */
        }
        if (!rc) rc = samples_check_cells(&tabs[i], path, &cfg, NULL, n_samples, si, sn, 1, &err);
    }
    if (!rc && ns != N) {
        char miss[400] = "";
        size_t o = 0;
        for (int k = 0; k < N && o + 24 < sizeof miss; k++) {
            int have = 0;
            for (int i = 0; i < ns; i++) have |= sidx[i] == k;
            if (!have) o += (size_t)snprintf(miss + o, sizeof miss - o, "%s%d/%d", o ? ", " : "", k, N);
        }
        rc = kb_fail(&err, KB_EINPUT, "the run has %d shards and %d were given: missing %s", N, ns, miss);
    }
    free(sidx);
    if (cfg_ok) sweep_config_free(&cfg);
    row_ref *refs = NULL;
    long nrefs = 0;
    if (!rc) {
        for (int i = 0; i < ns; i++) nrefs += tabs[i].nrow;
        refs = KB_MALLOC((size_t)nrefs * sizeof *refs);
        long k = 0;
        for (int i = 0; i < ns; i++)
            for (int r = 0; r < tabs[i].nrow; r++)
                refs[k++] = (row_ref){atol(table_get(&tabs[i], r, "seq")), i, r};
        qsort(refs, (size_t)nrefs, sizeof *refs, cmp_rows);
        for (long r = 1; r < nrefs && !rc; r++)
            if (refs[r].seq == refs[r - 1].seq && refs[r].shard != refs[r - 1].shard)
                rc = kb_fail(&err, KB_EINPUT, "sample %ld appears in two shards (%s and %s)", refs[r].seq,
                             argv[2 + refs[r - 1].shard], argv[2 + refs[r].shard]);
        /* rows are sorted by seq, every seq in [0, n_samples): each sample once */
        long want = 0;
        for (long r = 0; r < nrefs && !rc; r++) {
            if (refs[r].seq > want) break;
            if (refs[r].seq == want) want++;
        }
        if (!rc && want < n_samples)
            rc = kb_fail(&err, KB_EINPUT, "sample %ld of %ld has no rows (its shard %ld/%d is incomplete)",
                         want, n_samples, want % N, N);
    }
    if (!rc) rc = make_dirs(out, &err);
    if (!rc && lock_fd < 0) rc = dir_lock(out, &lock_fd, &err);
    /* what a run --force replaces goes first, its run.json before the rest: a
     * merge killed on the way leaves no run.json beside the new tables */
    if (!rc) rc = run_dir_clear(out, &err);
    if (!rc) run_dir_clean_stale(out); /* what a killed run was writing */
    if (!rc) {
        kb_table m;
        table_init(&m, kb_samples_cols, kb_samples_ncols);
        for (long r = 0; r < nrefs; r++) table_add(&m, (const char *const *)tabs[refs[r].shard].rows[refs[r].row]);
        snprintf(path, sizeof path, "%s/samples.csv", out);
        rc = table_write_csv(&m, path, &err);
        table_free(&m);
        char sum[1200];
        snprintf(sum, sizeof sum, "%s/summary.csv", out);
        if (!rc) rc = summary_write(path, sum, "full", &err);
    }
    if (!rc && zero >= 0) {
        char from[1200], to[1200];
        struct stat st;
        snprintf(from, sizeof from, "%s/latency.csv", argv[2 + zero]);
        snprintf(to, sizeof to, "%s/latency.csv", out);
        if (stat(from, &st) == 0) rc = copy_file(from, to, &err);
        else remove(to); /* --force over a run that had one */
    }
    if (!rc) {
        /* shard 0/N's run.json, whatever the order the shards were given in:
         * the keys every shard shares (checked above), and the machine and
         * loader's record (model.weights, model.matvec) of the shard that
         * measured latency.csv, copied from it */
        cJSON *j = cJSON_Duplicate(runs[zero], 1);
        cJSON_DeleteItemFromObjectCaseSensitive(j, "shard");
        cJSON_DeleteItemFromObjectCaseSensitive(j, "earlier_sessions"); /* shard 0's: in merged_from */
        cJSON_AddStringToObject(j, "shard", "merged");
        /* the traces stay in the shards' traces/ (each shard's dump_trace is
         * in merged_from): OUT holds none */
        cJSON_DeleteItemFromObjectCaseSensitive(j, "dump_trace");
        cJSON_AddNullToObject(j, "dump_trace");
        /* the run's times: its first shard's start and its last shard's end
         * (the ISO times sort as strings); no session wrote this file */
        const char *t0 = NULL, *t1 = NULL;
        for (int i = 0; i < ns; i++) {
            const cJSON *a = field(runs[i], "start_time"), *b = field(runs[i], "end_time");
            if (cJSON_IsString(a) && (!t0 || strcmp(a->valuestring, t0) < 0)) t0 = a->valuestring;
            if (cJSON_IsString(b) && (!t1 || strcmp(b->valuestring, t1) > 0)) t1 = b->valuestring;
        }
        cJSON_DeleteItemFromObjectCaseSensitive(j, "start_time");
        cJSON_DeleteItemFromObjectCaseSensitive(j, "end_time");
        cJSON_DeleteItemFromObjectCaseSensitive(j, "session_start_time");
        cJSON_AddItemToObject(j, "start_time", t0 ? cJSON_CreateString(t0) : cJSON_CreateNull());
        cJSON_AddItemToObject(j, "end_time", t1 ? cJSON_CreateString(t1) : cJSON_CreateNull());
        cJSON *arr = cJSON_AddArrayToObject(j, "merged_from");
        for (int i = 0; i < ns; i++) {
            cJSON *o = cJSON_CreateObject();
            cJSON_AddStringToObject(o, "dir", argv[2 + i]);
            static const char *const keys[] = {"shard", "machine", "start_time", "end_time", "dump_trace"};
            for (size_t k = 0; k < KB_ARRAY_LEN(keys); k++) {
                const cJSON *v = field(runs[i], keys[k]);
                cJSON_AddItemToObject(o, keys[k], v ? cJSON_Duplicate(v, 1) : cJSON_CreateNull());
            }
            /* a shard resumed by other builds or machines says so (runinfo_add_earlier) */
            if (field(runs[i], "earlier_sessions"))
                cJSON_AddItemToObject(o, "earlier_sessions", cJSON_Duplicate(field(runs[i], "earlier_sessions"), 1));
            cJSON_AddItemToArray(arr, o);
        }
        snprintf(path, sizeof path, "%s/run.json", out);
        rc = json_write_file(path, j, &err);
        cJSON_Delete(j);
    }
    if (rc) fprintf(stderr, "kvbench merge: %s\n", err.msg);
    else printf("kvbench merge: %ld rows from %d shards -> %s/\n", nrefs, ns, out);
    free(refs);
    for (int i = 0; i < ns; i++) {
        cJSON_Delete(runs[i]);
        if (tabs[i].cols) table_free(&tabs[i]);
    }
    free(runs);
    free(tabs);
    dir_unlock(lock_fd);
    return rc;
}
