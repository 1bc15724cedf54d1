/* runinfo.c - run.json (runinfo.h). */
#include "harness/runinfo.h"

#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "harness/atomic.h"
#include "harness/json.h"
#include "harness/machine.h"
#include "harness/sha256.h"
#include "harness/version.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

char *openblas_get_corename(void);

/* The cache's key: size, mtime and ctime to the nanosecond, inode. A file
 * replaced or rewritten in place changes its ctime even when its size and
 * mtime are kept (cp -p, rsync -t, touch -r cannot set ctime back). */
static void sha_cache_key(const struct stat *st, char *key, size_t cap) {
    snprintf(key, cap, "%lld %lld.%09ld %lld.%09ld %llu", (long long)st->st_size, (long long)st->st_mtim.tv_sec,
             (long)st->st_mtim.tv_nsec, (long long)st->st_ctim.tv_sec, (long)st->st_ctim.tv_nsec,
             (unsigned long long)st->st_ino);
}

int model_sha256(const char *spec, char hex[65], kb_err *err) {
    if (!strncmp(spec, "synthetic:", 10)) {
        snprintf(hex, 65, "synthetic");
        return 0;
    }
    struct stat st;
    if (stat(spec, &st)) return kb_fail(err, KB_EINPUT, "%s: cannot stat", spec);
    char side[4200], key[128], line[256];
    /* a path too long for the cache's name gets no cache: a cut name could be
     * the model's own (found 2026-12-05: a 1,099-byte path overwrote the model) */
    int cache = snprintf(side, sizeof side, "%s.kvbench-sha256", spec) < (int)sizeof side;
    sha_cache_key(&st, key, sizeof key);
    FILE *f = cache ? fopen(side, "r") : NULL;
    if (f) {
        size_t n = fread(line, 1, sizeof line - 1, f);
        fclose(f);
        line[n] = 0;
        /* "<64 lowercase hex digits> <key>\n", nothing else */
        int ok = n == 64 + 1 + strlen(key) + 1 && strspn(line, "0123456789abcdef") == 64 && line[64] == ' ' &&
                 !strncmp(line + 65, key, strlen(key)) && line[n - 1] == '\n';
        if (ok) {
            memcpy(hex, line, 64);
            hex[64] = 0;
            return 0;
        }
    }
    int rc = sha256_file(spec, hex, err);
    if (rc) return rc;
    int n = snprintf(line, sizeof line, "%s %s\n", hex, key);
    if (cache) atomic_write(side, line, (size_t)n, NULL); /* a cache: failure to write is fine */
    return 0;
}

void model_sha256_text(const char *spec, char hex[65]) {
    kb_err e = {0};
    if (model_sha256(spec, hex, &e)) snprintf(hex, 65, "unknown");
}

cJSON *runinfo_model_json(const kb_model *m, const char *spec, const char *sha) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "spec", spec);
    cJSON_AddStringToObject(o, "name", m->name);
    cJSON_AddStringToObject(o, "sha256", sha);
    cJSON_AddBoolToObject(o, "synthetic", m->synthetic);
    const kb_hparams *h = &m->hp;
    cJSON_AddNumberToObject(o, "n_layer", h->n_layer);
    cJSON_AddNumberToObject(o, "n_embd", h->n_embd);
    cJSON_AddNumberToObject(o, "n_head", h->n_head);
    cJSON_AddNumberToObject(o, "n_head_kv", h->n_head_kv);
    cJSON_AddNumberToObject(o, "head_dim", h->head_dim);
    cJSON_AddNumberToObject(o, "n_ff", h->n_ff);
    cJSON_AddNumberToObject(o, "n_vocab", h->n_vocab);
    cJSON_AddNumberToObject(o, "n_ctx", h->n_ctx_train);
    cJSON_AddNumberToObject(o, "rope_theta", h->rope_theta);
    cJSON_AddNumberToObject(o, "weight_bytes_per_token", (double)m->weight_bytes);
    /* what the loader did for the mat-vec mode (x24 regroups only weights
     * kvbench may write: model.h) */
    cJSON_AddStringToObject(o, "weights", model_weights_where(m));
    cJSON_AddStringToObject(o, "matvec", kb_matvec_mode_name(model_matvec_mode(m)));
    cJSON_AddNumberToObject(o, "r16_matrices", model_r16_matrices(m));
    if (m->tok) {
        cJSON *t = cJSON_AddObjectToObject(o, "tokenizer");
        cJSON_AddStringToObject(t, "model", tokenizer_model_name(m->tok));
        cJSON_AddStringToObject(t, "pre", tokenizer_pre_name(m->tok));
        cJSON_AddStringToObject(t, "chat_format", chat_format_name(tokenizer_chat_format(m->tok)));
    }
    return o;
}

void runinfo_build_sha256(char hex[65]) {
    kb_err e = {0};
    if (sha256_file("/proc/self/exe", hex, &e)) snprintf(hex, 65, "unknown");
}

cJSON *runinfo_machine_json(const char *matvec_used) {
    kb_machine mc;
    machine_describe(&mc);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "cpu", mc.cpu);
    cJSON_AddNumberToObject(o, "cores", mc.cores);
    cJSON_AddNumberToObject(o, "threads", mc.threads);
    cJSON_AddStringToObject(o, "simd", mc.simd);
    cJSON_AddNumberToObject(o, "mem_gib", mc.mem_gib);
    cJSON_AddStringToObject(o, "host", mc.host);
    cJSON_AddStringToObject(o, "openblas_core", openblas_get_corename());
    cJSON_AddStringToObject(o, "backend", "cpu");
    cJSON_AddStringToObject(o, "kernels", kernels_get()->name);
    const char *asked = kb_matvec_mode_name(kb_matvec_mode());
    cJSON_AddStringToObject(o, "matvec", matvec_used ? matvec_used : asked);
    cJSON_AddStringToObject(o, "matvec_requested", asked);
    cJSON_AddBoolToObject(o, "hugepages", kb_hugepages_on());
    return o;
}

static void now_iso(char *b, size_t cap) {
    time_t t = time(NULL);
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(b, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

void runinfo_init(kb_runinfo *r, const kb_sweep_config *c, const kb_model *m,
                  const char *model_spec, const kb_sweep_opts *o) {
    cJSON *j = cJSON_CreateObject();
    r->j = j;
    cJSON_AddStringToObject(j, "kvbench_version", kb_version());
    cJSON_AddStringToObject(j, "git_commit", kb_git_desc());
    char exe[65];
    runinfo_build_sha256(exe);
    cJSON_AddStringToObject(j, "build_sha256", exe);
    cJSON_AddStringToObject(j, "config_file", c->path);
    cJSON_AddItemToObject(j, "config", cJSON_Duplicate(c->root, 1));
    cJSON *ov = cJSON_AddArrayToObject(j, "overrides");
    for (int i = 0; i < o->n_overrides; i++) cJSON_AddItemToArray(ov, cJSON_CreateString(o->overrides[i]));
    char sha[65];
    model_sha256_text(model_spec, sha);
    cJSON_AddItemToObject(j, "model", runinfo_model_json(m, model_spec, sha));
    cJSON_AddItemToObject(j, "machine", runinfo_machine_json(kb_matvec_mode_name(model_matvec_mode(m))));
    cJSON_AddStringToObject(j, "kv_dtype", kb_dtype_name(c->kv_dtype));
    cJSON_AddNumberToObject(j, "seed", (double)c->seed);
    char shard[32];
    snprintf(shard, sizeof shard, "%d/%d", o->shard_n > 1 ? o->shard_i : 0, o->shard_n > 1 ? o->shard_n : 1);
    cJSON_AddStringToObject(j, "shard", shard);
    cJSON_AddNumberToObject(j, "window_queries", c->window_max);
    /* the layer traced (--dump-trace), or null */
    cJSON_AddItemToObject(j, "dump_trace",
                          o->dump_trace_layer >= 0 ? cJSON_CreateNumber(o->dump_trace_layer) : cJSON_CreateNull());
    char t[32];
    now_iso(t, sizeof t);
    cJSON_AddStringToObject(j, "start_time", t);
    cJSON_AddStringToObject(j, "session_start_time", t);
}

const char *runinfo_other_build(const cJSON *a, const cJSON *b) {
    const cJSON *c = cJSON_GetObjectItemCaseSensitive(a, "git_commit");
    if (!cJSON_Compare(c, cJSON_GetObjectItemCaseSensitive(b, "git_commit"), 1)) return "another commit";
    if (!cJSON_IsString(c)) return NULL; /* equal, and not a commit string: nothing more to compare */
    size_t n = strlen(c->valuestring);
    int modified = !strcmp(c->valuestring, "unknown") || (n >= 6 && !strcmp(c->valuestring + n - 6, "-dirty"));
    if (modified && !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(a, "build_sha256"),
                                   cJSON_GetObjectItemCaseSensitive(b, "build_sha256"), 1))
        return "another build of the modified tree (the binaries' sha256 differ)";
    return NULL;
}

int runinfo_check_same(const kb_runinfo *r, const char *path, kb_err *err) {
    cJSON *old;
    int rc = json_load_file(path, &old, err);
    if (rc) return rc;
    static const char *const keys[] = {"config", "overrides", "shard", "kv_dtype"};
    for (size_t i = 0; i < KB_ARRAY_LEN(keys) && !rc; i++)
        if (!cJSON_Compare(cJSON_GetObjectItemCaseSensitive(old, keys[i]),
                           cJSON_GetObjectItemCaseSensitive(r->j, keys[i]), 1))
            rc = kb_fail(err, KB_EINPUT,
                         "%s was made with a different %s: refusing to mix results (use --force "
                         "to continue anyway, or --out for a new run directory)",
                         path, keys[i]);
    const cJSON *om = cJSON_GetObjectItemCaseSensitive(old, "model");
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(r->j, "model");
    if (!rc && !cJSON_Compare(cJSON_GetObjectItemCaseSensitive(om, "sha256"),
                              cJSON_GetObjectItemCaseSensitive(nm, "sha256"), 1))
        rc = kb_fail(err, KB_EINPUT, "%s was made with a different model (sha256 differs): "
                     "use --force to continue anyway, or --out for a new run directory", path);
    /* the same build: rows of two builds would share one table under one commit */
    const char *other = rc ? NULL : runinfo_other_build(old, r->j);
    const cJSON *oc = cJSON_GetObjectItemCaseSensitive(old, "git_commit");
    if (other)
        rc = kb_fail(err, KB_EINPUT, "%s was made by %s: kvbench commit %s, this is %s; its rows and this "
                     "build's would share one table (use --force to continue anyway, which records both in "
                     "run.json's earlier_sessions, or --out for a new run directory)", path, other,
                     cJSON_IsString(oc) ? oc->valuestring : "(none)", kb_git_desc());
    /* the same samples (a run.json of an older kvbench has no fingerprint) */
    const cJSON *od = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(old, "data"), "sha256");
    const cJSON *nd = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(r->j, "data"), "sha256");
    if (!rc && od && !cJSON_Compare(od, nd, 1))
        rc = kb_fail(err, KB_EINPUT, "%s was made with different samples (data.sha256 differs: a "
                     "wording file, the haystack corpus, a word list or a dataset file changed): use "
                     "--force to start again, or --out for a new run directory", path);
    cJSON_Delete(old); /* the first start time is kept by runinfo_add_earlier */
    return rc;
}

void runinfo_add_earlier(kb_runinfo *r, const char *path, long rows) {
    cJSON *old;
    if (json_load_file(path, &old, NULL)) return; /* checked before, unless --force */
    cJSON *list = cJSON_AddArrayToObject(r->j, "earlier_sessions");
    const cJSON *e;
    cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(old, "earlier_sessions"))
        cJSON_AddItemToArray(list, cJSON_Duplicate(e, 1));
    cJSON *s = cJSON_CreateObject();
    /* all that --force lets a resume change, so that every row's session
     * keeps its build, model, config and data */
    static const char *const keys[] = {"kvbench_version", "git_commit", "build_sha256", "machine", "end_time",
                                       "status", "config_file", "config", "overrides", "model", "kv_dtype",
                                       "seed", "shard", "data", "dump_trace"};
    for (size_t i = 0; i < KB_ARRAY_LEN(keys); i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(old, keys[i]);
        if (v) cJSON_AddItemToObject(s, keys[i], cJSON_Duplicate(v, 1));
    }
    /* the session's own start (a run.json of an older kvbench has only the run's) */
    const cJSON *ss = cJSON_GetObjectItemCaseSensitive(old, "session_start_time");
    if (!ss) ss = cJSON_GetObjectItemCaseSensitive(old, "start_time");
    if (ss) cJSON_AddItemToObject(s, "session_start_time", cJSON_Duplicate(ss, 1));
    cJSON_AddNumberToObject(s, "rows", (double)rows);
    cJSON_AddItemToArray(list, s);
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(old, "start_time"); /* the run's first start */
    if (cJSON_IsString(st)) {
        cJSON_DeleteItemFromObjectCaseSensitive(r->j, "start_time");
        cJSON_AddStringToObject(r->j, "start_time", st->valuestring);
    }
    cJSON_Delete(old);
}

void runinfo_set_data(kb_runinfo *r, const char *const *provenance, int n, int n_samples,
                      const char *fingerprint) {
    cJSON_DeleteItemFromObjectCaseSensitive(r->j, "data");
    cJSON *d = cJSON_AddObjectToObject(r->j, "data");
    cJSON_AddNumberToObject(d, "samples", n_samples);
    cJSON_AddStringToObject(d, "sha256", fingerprint);
    cJSON *a = cJSON_AddArrayToObject(d, "provenance");
    for (int i = 0; i < n; i++) cJSON_AddItemToArray(a, cJSON_CreateString(provenance[i]));
}

int runinfo_write(kb_runinfo *r, const char *path, const char *status, kb_err *err) {
    cJSON_DeleteItemFromObjectCaseSensitive(r->j, "status");
    cJSON_AddStringToObject(r->j, "status", status);
    cJSON_DeleteItemFromObjectCaseSensitive(r->j, "end_time");
    if (strcmp(status, "running")) {
        char t[32];
        now_iso(t, sizeof t);
        cJSON_AddStringToObject(r->j, "end_time", t);
    }
    return json_write_file(path, r->j, err);
}

void runinfo_free(kb_runinfo *r) {
    cJSON_Delete(r->j);
    r->j = NULL;
}
