/* bench_methods.c - `kvbench bench methods` and the sweep's `latency` part:
 * per (method, budget, context), decode speed end to end, attention and
 * selection time, bytes read per step against the machine's read bandwidth
 * measured in the same run, resident KV and peak RSS. docs/PERFORMANCE.md
 * describes every column of latency.csv.
 *
 * One child process per cell (the same binary re-executed with the hidden
 * option --cell JSON; re-exec rather than fork because the parent may have
 * used OpenMP, whose thread pool does not survive a fork). A child fills a
 * KV cache of `context` tokens (random values, or the parent's prefill
 * snapshot) one layer at a time, building the method's state for each layer
 * from it as a sweep does and freeing the layer's filled cache right after
 * (so a Full KV cell holds the cache once, not twice: 128K tokens of
 * synthetic:llama3.1-8b fit in 24 GiB), resets its RSS high-water mark, and
 * decodes:
 * one untimed repetition of decode_tokens steps, then `reps` timed ones,
 * each rolled back to the same starting point (methodset_rollback), medians
 * reported. So peak_rss counts the weights, the method's state (K/V it
 * keeps, page summaries, ...), activations and scratch of the decode, and
 * not the shared prefill cache (a sweep holds that once for every cell).
 *
 * Fill: `random` writes random K/V values and window queries (speed does not
 * depend on the values; the paper's efficiency runs used random prompts;
 * makes 32K-token contexts on synthetic:llama3.1-8b possible without a long
 * prefill); `prefill` runs the model's exact prefill on random token ids in
 * the parent, once, to the longest context, and hands each child a
 * snapshot of the first `context` tokens (the window queries of that
 * point). Default: random for synthetic models, prefill for GGUF files.
 *
 * Context L = tokens in the cache when decode starts (the prompt minus its
 * last token, as in a sweep); the method context is L_prompt = L + 1 and
 * N_new = decode_tokens, so S = L + 1 + decode_tokens and RocketKV ends the
 * timed decode holding exactly its accountant's T tokens per KV head (when
 * L >= its prompt budget; tests/py/test_latency.py checks it). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <getopt.h>
#include <signal.h>
#include <spawn.h>
#include <sys/file.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "harness/atomic.h"
#include "harness/bench.h"
#include "harness/cli.h"
#include "harness/engine/model.h"
#include "harness/json.h"
#include "harness/machine.h"
#include "harness/rundir.h"
#include "harness/runinfo.h"
#include "harness/stop.h"
#include "harness/table.h"
#include "harness/version.h"
#include "kernels/kernels.h"
#include "kernels/pool.h"
#include "kernels/quant.h"
#include "methods/budget.h"
#include "methods/methodset.h"
#include "methods/params.h"
#include "methods/prefill.h"

extern char **environ;

/* The machine's state for a round: read bandwidth (GB/s) and the cross-core
 * hand-over round trip (ns; 0 if not measurable), 10,000 hand-overs a
 * repetition (~0.6-3.4 ms at 60-340 ns). */
static void probe_machine(double *bw, double *ho) {
    *bw = machine_read_bandwidth((size_t)1 << 30, 5);
    *ho = machine_handover_ns(10000, 5);
}

const char *const kb_latency_cols[] = {
    "method",          "label",          "params",           "budget",
    "budget_mode",     "context",        "decode_tokens",    "reps",
    "rounds",          "fill",            "threads",        "decode_ms_per_token", "attn_ms_per_token",
    "select_ms_per_token", "upkeep_ms_per_token", "weight_bytes_per_step", "kv_bytes_read_per_step",
    "bytes_read_per_step", "gbps",   "bw_fraction",      "read_bw_gbps",   "handover_ns",
    "attn_gbps",       "attn_bw_fraction",
    "tokens_resident", "accountant_T",   "kv_bytes_resident", "peak_rss_bytes",
    "speedup_vs_full"};
const int kb_latency_ncols = (int)KB_ARRAY_LEN(kb_latency_cols);

/* ------------------------------------------------------------ snapshot --- */

/* The parent's prefill of the first L tokens for a child: header, window
 * positions, per layer the window queries, per layer and KV head K, V and
 * positions. A private temporary file (native byte order), removed by the
 * parent at the end. */
#define SNAP_MAGIC "KVBSNAP1"

static int snap_write(const char *path, const kb_prefill *pf, int L, kb_err *err) {
    FILE *f = fopen(path, "wb");
    if (!f) return kb_fail(err, KB_ERUNTIME, "%s: cannot create: %s", path, strerror(errno));
    int32_t h[8] = {pf->n_layers, pf->Hq, pf->Hkv, pf->D, (int32_t)pf->dtype, L, pf->W, pf->n_q};
    int ok = fwrite(SNAP_MAGIC, 1, 8, f) == 8 && fwrite(h, sizeof h, 1, f) == 1;
    ok = ok && fwrite(pf->qwin_pos, sizeof(int32_t), (size_t)pf->n_q, f) == (size_t)pf->n_q;
    size_t qrow = (size_t)pf->Hq * pf->D;
    for (int l = 0; l < pf->n_layers && ok; l++)
        ok = fwrite(pf->qwin + (size_t)l * pf->W * qrow, sizeof(float), (size_t)pf->n_q * qrow, f) ==
             (size_t)pf->n_q * qrow;
    size_t rowb = (size_t)pf->D * kb_dtype_size(pf->dtype);
    for (int i = 0; i < pf->n_layers * pf->Hkv && ok; i++) {
        const kb_kvstream *s = &pf->kv[i];
        ok = fwrite(s->K, rowb, (size_t)L, f) == (size_t)L && fwrite(s->V, rowb, (size_t)L, f) == (size_t)L &&
             fwrite(s->pos, sizeof(int32_t), (size_t)L, f) == (size_t)L;
    }
    if (fclose(f) || !ok) {
        remove(path);
        return kb_fail(err, KB_ERUNTIME, "%s: write failed (disk full?)", path);
    }
    return 0;
}

/* Opens a snapshot for reading one layer at a time: reads the header and
 * every layer's window queries (small) into pf; snap_read_layer() then reads
 * the K/V of each layer in turn (the file's order). */
static int snap_open(const char *path, kb_prefill *pf, int L, FILE **out, kb_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return kb_fail(err, KB_ERUNTIME, "%s: cannot open: %s", path, strerror(errno));
    char mg[8];
    int32_t h[8];
    int ok = fread(mg, 1, 8, f) == 8 && !memcmp(mg, SNAP_MAGIC, 8) && fread(h, sizeof h, 1, f) == 1;
    ok = ok && h[0] == pf->n_layers && h[1] == pf->Hq && h[2] == pf->Hkv && h[3] == pf->D &&
         h[4] == (int32_t)pf->dtype && h[5] == L && h[6] <= pf->W && h[7] <= h[6];
    int nq = ok ? h[7] : 0;
    ok = ok && fread(pf->qwin_pos, sizeof(int32_t), (size_t)nq, f) == (size_t)nq;
    size_t qrow = (size_t)pf->Hq * pf->D;
    for (int l = 0; l < pf->n_layers && ok; l++) {
        ok = fread(pf->qwin + (size_t)l * pf->W * qrow, sizeof(float), (size_t)nq * qrow, f) == (size_t)nq * qrow;
        pf->nq_layer[l] = nq;
    }
    pf->n_q = nq;
    if (!ok) {
        fclose(f);
        return kb_fail(err, KB_ERUNTIME, "%s: not a snapshot of this model and context", path);
    }
    *out = f;
    return 0;
}

/* The next layer's K, V and positions (layers in order). */
static int snap_read_layer(FILE *f, const char *path, kb_prefill *pf, int l, int L, kb_err *err) {
    size_t rowb = (size_t)pf->D * kb_dtype_size(pf->dtype);
    int ok = 1;
    for (int i = l * pf->Hkv; i < (l + 1) * pf->Hkv && ok; i++) {
        kb_kvstream *s = &pf->kv[i];
        kvstream_reserve(s, L);
        ok = fread(s->K, rowb, (size_t)L, f) == (size_t)L && fread(s->V, rowb, (size_t)L, f) == (size_t)L &&
             fread(s->pos, sizeof(int32_t), (size_t)L, f) == (size_t)L;
        s->n = L;
    }
    return ok ? 0 : kb_fail(err, KB_ERUNTIME, "%s: not a snapshot of this model and context", path);
}

/* --------------------------------------------------------- random fill --- */

#define RNG_INC 0x9e3779b97f4a7c15ull /* splitmix64's increment */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += RNG_INC);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* n random values of magnitude in [1/4, 1) and random sign, in dtype t. */
static void random_values(void *dst, kb_dtype t, size_t n, uint64_t *s) {
    if (t == KB_F32) {
        float *x = dst;
        for (size_t i = 0; i < n; i++) {
            uint64_t r = rng_next(s);
            x[i] = (float)((r >> 11) * 0x1.0p-53 * 1.5 + 0.25) * (r & 1 ? -1.0f : 1.0f);
        }
        return;
    }
    uint16_t *h = dst;
    for (size_t i = 0; i < n; i += 4) {
        uint64_t r = rng_next(s);
        for (int k = 0; k < 4 && i + k < n; k++) {
            uint16_t b = (uint16_t)(r >> (16 * k));
            /* f16: exponent 13..14 (values 1/4 .. 1); bf16: exponent 125..126 */
            h[i + k] = t == KB_F16 ? (uint16_t)((b & 0x8000) | ((13 + (b >> 14 & 1)) << 10) | (b & 0x3ff))
                                   : (uint16_t)((b & 0x8000) | ((125 + (b >> 14 & 1)) << 7) | (b & 0x7f));
        }
    }
}

/* The random fill is one splitmix64 sequence from `seed`: every stream's K
 * then V in stream order (layer-major), then every layer's window queries.
 * The generator's state after n draws is seed + n * its increment, so a
 * layer can be filled on its own (random_fill_layer) with the values a fill
 * of the whole cache in that order would give. */
static uint64_t random_draws(kb_dtype t, size_t n) { return t == KB_F32 ? n : (n + 3) / 4; }

/* Window queries of every layer and their positions. */
static void random_fill_windows(kb_prefill *pf, int L, uint64_t seed) {
    uint64_t per_stream = 2 * random_draws(pf->dtype, (size_t)L * pf->D);
    uint64_t s = seed + (uint64_t)pf->n_layers * pf->Hkv * per_stream * RNG_INC;
    int nq = KB_MIN(pf->W, L);
    size_t qrow = (size_t)pf->Hq * pf->D;
    for (int l = 0; l < pf->n_layers; l++) {
        float *q = pf->qwin + (size_t)l * pf->W * qrow;
        for (size_t x = 0; x < (size_t)nq * qrow; x++)
            q[x] = (float)((rng_next(&s) >> 11) * 0x1.0p-53 * 2.0 - 1.0);
        pf->nq_layer[l] = nq;
    }
    for (int i = 0; i < nq; i++) pf->qwin_pos[i] = L - nq + i;
    pf->n_q = nq;
}

static void random_fill_layer(kb_prefill *pf, int l, int L, uint64_t seed) {
    size_t rowe = (size_t)pf->D;
    uint64_t per_stream = 2 * random_draws(pf->dtype, (size_t)L * rowe);
    for (int i = l * pf->Hkv; i < (l + 1) * pf->Hkv; i++) {
        uint64_t s = seed + (uint64_t)i * per_stream * RNG_INC;
        kb_kvstream *st = &pf->kv[i];
        kvstream_reserve(st, L);
        random_values(st->K, pf->dtype, (size_t)L * rowe, &s);
        random_values(st->V, pf->dtype, (size_t)L * rowe, &s);
        for (int j = 0; j < L; j++) st->pos[j] = j;
        st->n = L;
    }
}

/* The child's prefill, one layer at a time (kb_layer_source): a layer is
 * filled just before the method's state for it is built and freed after. */
typedef struct fill_src {
    kb_prefill *pf;
    int L;
    uint64_t seed; /* random fill */
    FILE *snap;    /* snapshot fill (else random) */
    const char *snap_path;
} fill_src;

static int fill_load(void *u, int l, kb_err *err) {
    fill_src *fs = u;
    if (fs->snap) return snap_read_layer(fs->snap, fs->snap_path, fs->pf, l, fs->L, err);
    random_fill_layer(fs->pf, l, fs->L, fs->seed);
    return 0;
}

static void fill_release(void *u, int l) {
    fill_src *fs = u;
    for (int i = l * fs->pf->Hkv; i < (l + 1) * fs->pf->Hkv; i++) kvstream_free(&fs->pf->kv[i]);
}

/* ----------------------------------------------------------- the child --- */

static size_t status_kb(const char *key) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return 0;
    char line[256];
    size_t v = 0, kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoull(line + kl + 1, NULL, 10);
            break;
        }
    fclose(f);
    return v;
}

/* Resets the peak-RSS counter (VmHWM) to the current RSS; 0 on success.
 * (getrusage's ru_maxrss, machine_peak_rss, cannot be reset: hence VmHWM.) */
static int reset_hwm(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    if (!f) return -1;
    int ok = fputs("5", f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

/* Cumulative selection seconds, all layers; *upkeep: their page-summary part. */
static double ms_select(kb_methodset *ms, double *upkeep) {
    kb_cell_account a;
    methodset_account(ms, &a);
    *upkeep = a.upkeep_seconds;
    return a.select_seconds;
}

/* --cell JSON: run one cell, print one JSON line of results on stdout. */
static int lat_cell(const char *spec) {
    kb_err err = {0};
    cJSON *j = NULL;
    const char *w = "kvbench bench methods --cell";
    int rc = json_parse(spec, strlen(spec), w, &j, &err);
    const char *model_spec = NULL, *fill = NULL, *snap = NULL, *kvs = NULL;
    long L = 0, N = 0, reps = 0, threads = 0, W = 0;
    if (!rc) rc = json_get_string(j, w, "model", 1, NULL, &model_spec, &err);
    if (!rc) rc = json_get_string(j, w, "fill", 1, NULL, &fill, &err);
    if (!rc) rc = json_get_string(j, w, "snapshot", 0, "", &snap, &err);
    if (!rc) rc = json_get_string(j, w, "kv", 1, NULL, &kvs, &err);
    if (!rc) rc = json_get_int(j, w, "context", 1, 1, 1 << 30, 0, &L, &err);
    if (!rc) rc = json_get_int(j, w, "decode_tokens", 1, 1, 1 << 20, 0, &N, &err);
    if (!rc) rc = json_get_int(j, w, "reps", 1, 1, 1000, 0, &reps, &err);
    if (!rc) rc = json_get_int(j, w, "threads", 0, 0, 1024, 0, &threads, &err);
    if (!rc) rc = json_get_int(j, w, "window", 0, 0, 1 << 20, 0, &W, &err);
    kb_method_params p;
    if (!rc) rc = method_params_parse(cJSON_GetObjectItemCaseSensitive(j, "method"), w, &p, &err);
    kb_dtype kv = KB_F16;
    if (!rc && kb_dtype_parse(kvs, &kv)) rc = kb_fail(&err, KB_EINPUT, "%s: bad kv '%s'", w, kvs);
    if (rc) {
        fprintf(stderr, "%s\n", err.msg);
        cJSON_Delete(j);
        return rc;
    }
    if (threads) bench_set_threads((int)threads);
    char what[160];
    if (p.budget > 0) snprintf(what, sizeof what, "%s B=%d, context %ld", p.label, p.budget, L);
    else snprintf(what, sizeof what, "%s, context %ld", p.label, L);
    kb_model *m = NULL;
    if ((rc = model_load(model_spec, &m, &err))) goto fail;
    const kb_hparams *hp = &m->hp;
    /* the parent fitted the context already (bench_latency_in): the same
     * rule again, for a spec written by hand */
    long fit = bench_context_fit((int)L, (int)N, hp->n_ctx_train);
    if (fit < 0) {
        rc = kb_fail(&err, KB_EINPUT,
                     "context %ld + %ld decode tokens exceeds the model context of %d tokens", L, N,
                     hp->n_ctx_train);
        goto fail;
    }
    if (fit != L) {
        L = fit;
        if (p.budget > 0) snprintf(what, sizeof what, "%s B=%d, context %ld", p.label, p.budget, L);
        else snprintf(what, sizeof what, "%s, context %ld", p.label, L);
    }
    /* the filled cache is made one layer at a time, just before the method's
     * state for that layer, and freed after: at most one layer of it
     * coexists with the method's copy (a Full KV cell holds the cache once) */
    if ((rc = model_check_memory(m, L + N, 1.0 + 1.0 / hp->n_layer, kv, &err))) goto fail;
    kb_prefill pf;
    prefill_init(&pf, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, kv, (int)W, 0);
    fill_src fs = {&pf, (int)L, 0x5eedull + (uint64_t)L, NULL, snap};
    if (!strcmp(fill, "random")) random_fill_windows(&pf, (int)L, fs.seed);
    else if ((rc = snap_open(snap, &pf, (int)L, &fs.snap, &err))) {
        prefill_free(&pf);
        goto fail;
    }
    kb_method_ctx mctx = method_ctx_make(hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, kv,
                                         hp->n_ctx_train, (int)L + 1, (int)N);
    kb_methodset *ms = NULL;
    kb_layer_source src = {fill_load, fill_release, &fs};
    rc = methodset_build_layers(&p, &mctx, &pf, &src, &ms, &err);
    if (fs.snap) fclose(fs.snap);
    prefill_free(&pf); /* the shared cache is not the method's memory */
    if (rc) goto fail;
    kb_forward *f = forward_new(m, 1);
    kb_attn_backend be = methodset_backend(ms);
    int32_t tok0;
    bench_random_tokens(&tok0, 1, hp->n_vocab, 7 + (uint64_t)L);
    int hwm_ok = reset_hwm() == 0;
    long mark = methodset_mark(ms);
    double *t_dec = KB_MALLOC((size_t)reps * sizeof(double)), *t_att = KB_MALLOC((size_t)reps * sizeof(double)),
           *t_sel = KB_MALLOC((size_t)reps * sizeof(double)), *t_upk = KB_MALLOC((size_t)reps * sizeof(double));
    double kv_read = 0, res_tok = 0, res_bytes = 0;
    for (long r = -1; r < reps; r++) { /* r = -1: warm-up */
        int32_t t = tok0;
        f->t_attn = 0;
        double u0, u1, s0 = ms_select(ms, &u0), t0 = kb_now();
        for (long s = 0; s < N; s++) {
            forward_decode(f, t, (int)(L + s), &be);
            t = logits_argmax(f->logits, hp->n_vocab);
            if (r == reps - 1) { /* traffic of every step of the last repetition */
                kb_cell_account a;
                methodset_account(ms, &a);
                kv_read += a.read_bytes / N;
                if (s == N - 1) {
                    res_tok = a.resident_tokens;
                    res_bytes = a.resident_bytes;
                }
            }
        }
        double dt = kb_now() - t0;
        if (r >= 0) {
            t_dec[r] = dt / N;
            t_att[r] = f->t_attn / N;
            t_sel[r] = (ms_select(ms, &u1) - s0) / N;
            t_upk[r] = (u1 - u0) / N;
        }
        if (r < reps - 1) methodset_rollback(ms, mark);
    }
    size_t hwm = status_kb("VmHWM") * 1024;
    /* the accountant's T (methods that evict with a RocketKV-style split);
     * latency.csv puts it next to tokens_resident (tests/py/test_latency.py
     * compares them; the harness does not know which method should match) */
    kb_account la;
    methodset_layer_account(ms, KB_MIN(p.skip_layers, hp->n_layer - 1), &la);
    int T = la.budget && p.ops->evicts && la.budget->T > 0 ? la.budget->T : -1;
    if (!rc) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddNumberToObject(o, "context", (double)L);
        cJSON_AddNumberToObject(o, "decode_s", bench_median(t_dec, (int)reps));
        cJSON_AddNumberToObject(o, "attn_s", bench_median(t_att, (int)reps));
        cJSON_AddNumberToObject(o, "select_s", bench_median(t_sel, (int)reps));
        cJSON_AddNumberToObject(o, "upkeep_s", bench_median(t_upk, (int)reps));
        cJSON_AddNumberToObject(o, "weight_bytes", (double)m->weight_bytes);
        cJSON_AddNumberToObject(o, "kv_read_bytes", kv_read);
        cJSON_AddNumberToObject(o, "tokens_resident", res_tok);
        cJSON_AddNumberToObject(o, "accountant_T", T);
        cJSON_AddNumberToObject(o, "kv_bytes_resident", res_bytes);
        cJSON_AddNumberToObject(o, "peak_rss", hwm_ok ? (double)hwm : -1);
        cJSON_AddItemToObject(o, "model", runinfo_model_json(m, model_spec, "")); /* the parent adds the hash */
        char *out = cJSON_PrintUnformatted(o);
        printf("%s\n", out);
        fflush(stdout);
        free(out);
        cJSON_Delete(o);
    }
    free(t_dec);
    free(t_att);
    free(t_sel);
    free(t_upk);
    forward_free(f);
    methodset_free(ms);
fail:
    if (rc) fprintf(stderr, "kvbench bench methods: %s: %s\n", what, err.msg);
    model_free(m);
    cJSON_Delete(j);
    return rc;
}

/* ---------------------------------------------------------- the parent --- */

typedef struct cell_out {
    int ok;
    double context, decode_s, attn_s, select_s, upkeep_s, weight_bytes, kv_read, res_tok, T, res_bytes, peak_rss;
    cJSON *model;
} cell_out;

/* Once a signal asked the parent to stop (stop.h), asks the cell's process to
 * end, once (*ended): a Ctrl-C reaches the child too, a SIGTERM or SIGHUP
 * sent to the parent alone does not. */
static void end_child_on_stop(pid_t pid, int *ended) {
    if (!stop_signal() || *ended) return;
    kill(pid, SIGTERM);
    *ended = 1;
}

/* Runs one cell in a child; fills *co from its JSON line. Returns the
 * child's exit status (its message is on stderr already), or 130 when a
 * signal asked the parent to stop (stop.h): the cell's process is ended. */
static int run_child(const char *spec, cell_out *co, kb_err *err) {
    int pfd[2];
    if (pipe(pfd)) return kb_fail(err, KB_ERUNTIME, "pipe: %s", strerror(errno));
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
    posix_spawn_file_actions_addclose(&fa, pfd[0]);
    posix_spawn_file_actions_addclose(&fa, pfd[1]);
    char *argv[] = {"kvbench", "bench", "methods", "--cell", (char *)spec, NULL};
    if (stop_signal()) {
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[0]);
        close(pfd[1]);
        return kb_fail(err, 130, "interrupted by %s", stop_signal_name(stop_signal()));
    }
    pid_t pid;
    int e = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(pfd[1]);
    if (e) {
        close(pfd[0]);
        return kb_fail(err, KB_ERUNTIME, "cannot start a cell process: %s", strerror(e));
    }
    size_t cap = 4096, len = 0;
    char *buf = KB_MALLOC(cap);
    ssize_t r;
    int ended = 0;
    while ((r = read(pfd[0], buf + len, cap - len - 1)) > 0 || (r < 0 && errno == EINTR)) {
        if (r < 0) {
            end_child_on_stop(pid, &ended);
            continue;
        }
        len += (size_t)r;
        if (len + 1 == cap) buf = KB_REALLOC(buf, cap *= 2);
    }
    buf[len] = 0;
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) end_child_on_stop(pid, &ended);
    if (stop_signal()) {
        free(buf);
        return kb_fail(err, 130, "interrupted by %s", stop_signal_name(stop_signal()));
    }
    int code = WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    if (WIFSIGNALED(st)) {
        free(buf);
        return kb_fail(err, KB_ERUNTIME, "a cell process died of signal %d", WTERMSIG(st));
    }
    if (code) {
        free(buf);
        return kb_fail(err, code, "a cell failed (exit %d; message above)", code);
    }
    /* the result is the last line that starts with '{' (the child prints it
     * unformatted on one line; strrchr found its nested "model" object, so
     * this fell back to the whole output until 2026-12-06) */
    char *line = *buf == '{' ? buf : NULL;
    for (char *p = strchr(buf, '\n'); p; p = strchr(p + 1, '\n'))
        if (p[1] == '{') line = p + 1;
    cJSON *o = line ? cJSON_Parse(line) : NULL;
    free(buf);
    if (!o) return kb_fail(err, KB_ERUNTIME, "a cell process printed no result");
    const cJSON *x;
#define NUM(k, dst) dst = (x = cJSON_GetObjectItemCaseSensitive(o, k)) && cJSON_IsNumber(x) ? x->valuedouble : -1
    NUM("context", co->context);
    NUM("decode_s", co->decode_s);
    NUM("attn_s", co->attn_s);
    NUM("select_s", co->select_s);
    NUM("upkeep_s", co->upkeep_s);
    NUM("weight_bytes", co->weight_bytes);
    NUM("kv_read_bytes", co->kv_read);
    NUM("tokens_resident", co->res_tok);
    NUM("accountant_T", co->T);
    NUM("kv_bytes_resident", co->res_bytes);
    NUM("peak_rss", co->peak_rss);
#undef NUM
    co->model = cJSON_DetachItemFromObjectCaseSensitive(o, "model");
    cJSON_Delete(o);
    co->ok = 1;
    return 0;
}

static const char *fill_name(kb_fill f) { return f == KB_FILL_RANDOM ? "random" : "prefill"; }

/* The cell's JSON for the child: its params object plus method, label,
 * budget and budget mode. */
static cJSON *cell_method_json(const kb_cell *c) {
    cJSON *o = c->params_json[0] ? cJSON_Parse(c->params_json) : cJSON_CreateObject();
    if (!o) o = cJSON_CreateObject();
    cJSON_DeleteItemFromObjectCaseSensitive(o, "method");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "label");
    cJSON_DeleteItemFromObjectCaseSensitive(o, "budget");
    cJSON_AddStringToObject(o, "method", c->p.ops->name);
    cJSON_AddStringToObject(o, "label", c->p.label);
    if (c->p.budget > 0) cJSON_AddNumberToObject(o, "budget", c->p.budget);
    cJSON_AddStringToObject(o, "budget_mode", c->p.budget_mode == KB_BUDGET_TOPK ? "topk" : "traffic");
    return o;
}

/* What bench methods' run.json says (kind bench_methods): OUTPUTS.md. */
typedef struct bench_manifest {
    const cJSON *model_json; /* the model as the first cell read it (NULL before) */
    double bw, ho;           /* measured read bandwidth (GB/s), hand-over (ns; <= 0: none) */
    kb_fill fill;
    int rounds, window;
    const int *ctx;
    int nctx;
    const kb_cell *cells;
    int n_cells;
    const char *status; /* running, done, interrupted, failed */
} bench_manifest;

static int write_manifest(const kb_lat_opts *o, const bench_manifest *m, kb_err *err) {
    cJSON *r = cJSON_CreateObject();
    cJSON_AddStringToObject(r, "kind", "bench_methods");
    cJSON_AddStringToObject(r, "kvbench_version", kb_version());
    cJSON_AddStringToObject(r, "git_commit", kb_git_desc());
    if (m->model_json) cJSON_AddItemToObject(r, "model", cJSON_Duplicate(m->model_json, 1));
    /* the mode the cells' decode ran: the children loaded the model (x24
     * keeps GGUF's layout, so the exact kernels, where the weights stay in
     * the file map) */
    const cJSON *used = cJSON_GetObjectItemCaseSensitive(m->model_json, "matvec");
    const char *mv = cJSON_IsString(used) ? used->valuestring : NULL;
    cJSON_AddItemToObject(r, "machine", runinfo_machine_json(mv));
    cJSON_AddNumberToObject(r, "read_bandwidth_gbps", m->bw);
    if (m->ho > 0) cJSON_AddNumberToObject(r, "handover_ns", m->ho);
    cJSON_AddStringToObject(r, "kernels", kernels_get()->name);
    cJSON_AddStringToObject(r, "matvec", mv ? mv : kb_matvec_mode_name(kb_matvec_mode()));
    cJSON_AddStringToObject(r, "matvec_requested", kb_matvec_mode_name(kb_matvec_mode()));
    cJSON_AddStringToObject(r, "kv_dtype", kb_dtype_name(o->kv));
    cJSON_AddStringToObject(r, "fill", fill_name(m->fill));
    cJSON_AddNumberToObject(r, "decode_tokens", o->decode_tokens);
    cJSON_AddNumberToObject(r, "reps", o->reps);
    cJSON_AddNumberToObject(r, "rounds", m->rounds);
    cJSON_AddNumberToObject(r, "window_queries", m->window);
    cJSON *ca = cJSON_AddArrayToObject(r, "contexts");
    for (int k = 0; k < m->nctx; k++) cJSON_AddItemToArray(ca, cJSON_CreateNumber(m->ctx[k]));
    cJSON *cl = cJSON_AddArrayToObject(r, "cells");
    for (int k = 0; k < m->n_cells; k++) cJSON_AddItemToArray(cl, cell_method_json(&m->cells[k]));
    cJSON_AddStringToObject(r, "status", m->status);
    char path[1200];
    snprintf(path, sizeof path, "%s/run.json", o->out_dir);
    int rc = json_write_file(path, r, err);
    cJSON_Delete(r);
    return rc;
}

static void fmtd(char *b, size_t cap, const char *fmt, double v) {
    if (v < 0) b[0] = 0;
    else snprintf(b, cap, fmt, v);
}

/* The child's spec (a JSON line) for one cell at context L. */
static char *cell_spec(const kb_lat_opts *o, const kb_cell *cell, kb_fill fill, const char *snapdir,
                       int L, int W) {
    cJSON *spec = cJSON_CreateObject();
    cJSON_AddStringToObject(spec, "model", o->model);
    cJSON_AddStringToObject(spec, "fill", fill_name(fill));
    char snap[1300];
    snprintf(snap, sizeof snap, "%s/ctx%d.bin", snapdir, L);
    if (fill == KB_FILL_PREFILL) cJSON_AddStringToObject(spec, "snapshot", snap);
    cJSON_AddStringToObject(spec, "kv", kb_dtype_name(o->kv));
    cJSON_AddNumberToObject(spec, "context", L);
    cJSON_AddNumberToObject(spec, "decode_tokens", o->decode_tokens);
    cJSON_AddNumberToObject(spec, "reps", o->reps);
    cJSON_AddNumberToObject(spec, "threads", o->threads);
    cJSON_AddNumberToObject(spec, "window", W);
    cJSON_AddItemToObject(spec, "method", cell_method_json(cell));
    char *s = cJSON_PrintUnformatted(spec);
    cJSON_Delete(spec);
    return s;
}

/* Adds the cell's latency.csv row from its R rounds (out[0..R)): timing
 * columns are medians over the rounds, the others are the same in every
 * round (peak RSS: the largest); the speedup is filled in later. med: 4R
 * doubles of scratch. Returns the row's values. */
static cell_out cell_row(kb_table *t, const kb_lat_opts *o, const kb_cell *cell, const cell_out *out,
                         int R, kb_fill fill, double bw, const double *bws, double handover, double *med) {
    cell_out co = out[R - 1];
    for (int k = 0; k < R; k++) {
        med[k] = out[k].decode_s;
        med[R + k] = out[k].attn_s;
        med[2 * R + k] = out[k].select_s;
        med[3 * R + k] = out[k].upkeep_s;
        co.peak_rss = KB_MAX(co.peak_rss, out[k].peak_rss);
    }
    co.decode_s = bench_median(med, R);
    co.attn_s = bench_median(med + R, R);
    co.select_s = bench_median(med + 2 * R, R);
    co.upkeep_s = bench_median(med + 3 * R, R);
    /* the attention's K/V read rate against the bandwidth measured before the
     * same round, median over the rounds (as the speedup: both parts of the
     * ratio from one moment of the machine) */
    for (int k = 0; k < R; k++) med[k] = out[k].attn_s > 0 ? out[k].kv_read / out[k].attn_s / 1e9 / bws[k] : 0;
    double attn_frac = bench_median(med, R), attn_gbps = co.attn_s > 0 ? co.kv_read / co.attn_s / 1e9 : 0;
    double bytes = co.weight_bytes + co.kv_read, gbps = bytes / co.decode_s / 1e9;
    char v[29][64];
    snprintf(v[0], 64, "%s", cell->p.ops->name);
    snprintf(v[1], 64, "%s", cell->p.label);
    fmtd(v[3], 64, "%.0f", cell->p.budget > 0 ? cell->p.budget : -1);
    /* as samples.csv and summary.csv write it (also for a cell without a budget), so
     * that the cell columns join the tables of one run */
    snprintf(v[4], 64, "%s", cell->p.budget_mode == KB_BUDGET_TOPK ? "topk" : "traffic");
    snprintf(v[5], 64, "%.0f", co.context);
    snprintf(v[6], 64, "%d", o->decode_tokens);
    snprintf(v[7], 64, "%d", o->reps);
    snprintf(v[8], 64, "%d", R);
    snprintf(v[9], 64, "%s", fill_name(fill));
    snprintf(v[10], 64, "%d", kb_pool_threads());
    snprintf(v[11], 64, "%.4f", co.decode_s * 1e3);
    snprintf(v[12], 64, "%.4f", co.attn_s * 1e3);
    snprintf(v[13], 64, "%.4f", co.select_s * 1e3);
    snprintf(v[14], 64, "%.4f", co.upkeep_s * 1e3);
    snprintf(v[15], 64, "%.0f", co.weight_bytes);
    snprintf(v[16], 64, "%.0f", co.kv_read);
    snprintf(v[17], 64, "%.0f", bytes);
    snprintf(v[18], 64, "%.3f", gbps);
    snprintf(v[19], 64, "%.4f", gbps / bw);
    snprintf(v[20], 64, "%.3f", bw);
    fmtd(v[21], 64, "%.1f", handover > 0 ? handover : -1); /* empty: not measured (one thread or CPU) */
    snprintf(v[22], 64, "%.3f", attn_gbps);
    snprintf(v[23], 64, "%.4f", attn_frac);
    snprintf(v[24], 64, "%.2f", co.res_tok);
    fmtd(v[25], 64, "%.0f", co.T > 0 ? co.T : -1);
    snprintf(v[26], 64, "%.0f", co.res_bytes);
    fmtd(v[27], 64, "%.0f", co.peak_rss);
    v[28][0] = 0; /* speedup: once the context's full cell has run */
    const char *vals[29];
    for (int k = 0; k < 29; k++) vals[k] = v[k];
    vals[2] = cell->params_json;
    table_add(t, vals);
    return co;
}

int bench_context_fit(int ctx, int decode, int n_ctx) {
    if (ctx + decode <= n_ctx) return ctx;
    return ctx <= n_ctx && ctx > decode ? n_ctx - decode : -1;
}

int bench_contexts_distinct(const int *ctx, int n, int decode, int n_ctx, kb_err *err) {
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++) {
            int a = bench_context_fit(ctx[j], decode, n_ctx), b = bench_context_fit(ctx[i], decode, n_ctx);
            if (a >= 0 && a == b)
                return kb_fail(err, KB_EINPUT, "contexts %d and %d both fit to %d tokens (room for %d decode "
                               "tokens in the model context of %d), which would measure the same context twice: "
                               "give one of them", ctx[j], ctx[i], a, decode, n_ctx);
        }
    return 0;
}

static int cmp_int_desc(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x < y) - (x > y);
}

/* Fits every context to a model of n_ctx tokens (bench_context_fit: a context
 * at the model's limit leaves room for the decode, as bench engine does),
 * saying so; a context that cannot fit is an error. *longest gets the largest. */
static int fit_contexts(const kb_lat_opts *o, int *ctx, int nctx, int n_ctx, int *longest, kb_err *err) {
    *longest = 0;
    for (int i = 0; i < nctx; i++) {
        int c = bench_context_fit(ctx[i], o->decode_tokens, n_ctx);
        if (c < 0)
            return kb_fail(err, KB_EINPUT, "context %d + %d decode tokens exceeds the model context of %d tokens",
                           ctx[i], o->decode_tokens, n_ctx);
        if (c != ctx[i] && !o->quiet)
            fprintf(stderr, "kvbench %s: context %d -> %d (room for %d decode tokens)\n", o->cmd, ctx[i], c,
                    o->decode_tokens);
        ctx[i] = c;
        *longest = KB_MAX(*longest, c);
    }
    return 0;
}

/* Prefill once to the longest context, snapshot at every context. */
static int make_snapshots(const kb_lat_opts *o, int *ctx, int nctx, int W, const char *dir,
                          kb_err *err) {
    kb_model *m;
    int rc = model_load(o->model, &m, err);
    if (rc) return rc;
    const kb_hparams *hp = &m->hp;
    int longest;
    if ((rc = fit_contexts(o, ctx, nctx, hp->n_ctx_train, &longest, err)) ||
        (rc = model_check_memory(m, longest, 1, o->kv, err))) {
        model_free(m);
        return rc;
    }
    int32_t *tok = KB_MALLOC((size_t)longest * sizeof(int32_t));
    bench_random_tokens(tok, longest, hp->n_vocab, 42);
    kb_forward *f = forward_new(m, 512);
    kb_prefill pf;
    prefill_init(&pf, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, o->kv, W, longest);
    kb_attn_backend be = prefill_backend(&pf);
    int done = 0;
    for (int i = nctx - 1; i >= 0 && !rc; i--) { /* ctx[] is descending */
        if (stop_signal()) { /* a signal: the caller removes what was written */
            rc = kb_fail(err, 130, "interrupted by %s", stop_signal_name(stop_signal()));
            break;
        }
        if (!o->quiet) fprintf(stderr, "kvbench %s: prefill to %d tokens\n", o->cmd, ctx[i]);
        rc = forward_prefill(f, tok + done, ctx[i] - done, done, &be, NULL, 0, err);
        done = ctx[i];
        char path[1200];
        snprintf(path, sizeof path, "%s/ctx%d.bin", dir, ctx[i]);
        if (!rc) rc = snap_write(path, &pf, ctx[i], err);
    }
    prefill_free(&pf);
    forward_free(f);
    free(tok);
    model_free(m);
    return rc;
}

static void remove_snapshots(const char *dir, const int *ctx, int nctx) {
    char path[1200];
    for (int i = 0; i < nctx; i++) {
        snprintf(path, sizeof path, "%s/ctx%d.bin", dir, ctx[i]);
        remove(path);
    }
    rmdir(dir);
}

/* Removes the snapshot directories (.kvbench-prefill.<pid>) a killed run left
 * in dir: their owner process is gone, and none holds the lock its owner
 * takes on the directory (bench_latency_in), which also covers an owner in
 * another PID namespace sharing the directory ($TMPDIR). */
static void clean_stale_snapshots(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *pre = ".kvbench-prefill.", *num = e->d_name + strlen(pre);
        if (strncmp(e->d_name, pre, strlen(pre)) || !*num || strspn(num, "0123456789") != strlen(num))
            continue;
        long pid = atol(num);
        if (pid <= 0 || pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH) continue;
        char sub[1200];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        int fd = open(sub, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) continue; /* not a directory of ours (or gone) */
        int busy = flock(fd, LOCK_EX | LOCK_NB) && errno == EWOULDBLOCK;
        close(fd);
        if (busy) continue;
        DIR *sd = opendir(sub);
        if (sd) {
            struct dirent *f;
            while ((f = readdir(sd))) {
                if (f->d_name[0] == '.') continue;
                char path[2400];
                snprintf(path, sizeof path, "%s/%s", sub, f->d_name);
                remove(path);
            }
            closedir(sd);
        }
        rmdir(sub);
    }
    closedir(d);
}

int bench_distinct(const int *in, int n, int *out) {
    int m = 0;
    for (int i = 0; i < n; i++) {
        int dup = 0;
        for (int k = 0; k < i && !dup; k++) dup = in[k] == in[i];
        if (!dup && out) out[m] = in[i];
        m += !dup;
    }
    return m;
}

static int bench_latency_in(const kb_lat_opts *o, const kb_cell *cells, int n_cells, kb_err *err);

/* What bench methods' --out may hold (under its lock, before anything is
 * touched): no run of another kind (a sweep's manifest is never overwritten),
 * and no table that no run.json there describes (run_dir_check_tables, as
 * sweep and merge; bench methods has no --force: the user moves the table or
 * gives another directory). A bench methods run.json is replaced. */
static int out_dir_check(const char *dir, kb_err *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/run.json", dir);
    if (access(path, F_OK) == 0) {
        cJSON *old;
        int bad = json_load_file(path, &old, NULL) != 0;
        if (!bad) {
            const cJSON *k = cJSON_GetObjectItemCaseSensitive(old, "kind");
            bad = !cJSON_IsString(k) || strcmp(k->valuestring, "bench_methods");
            cJSON_Delete(old);
        }
        if (bad)
            return kb_fail(err, KB_EINPUT, "%s holds another kind of run (a sweep?): use a new --out directory",
                           dir);
    }
    return run_dir_check_tables(dir, 0, "move it away, or use a new --out directory", err);
}

int bench_latency(const kb_lat_opts *o, const kb_cell *cells, int n_cells, kb_err *err) {
    /* bench methods owns its --out: made (if need be) and locked (dir_lock)
     * before anything in it is touched; a sweep's latency part runs under the
     * sweep's lock */
    int lock_fd = -1, own = o->out_dir && o->manifest;
    struct stat st;
    int made = own && stat(o->out_dir, &st) != 0;
    int rc = own ? make_dirs(o->out_dir, err) : 0;
    if (!rc && own) rc = dir_lock(o->out_dir, &lock_fd, err);
    if (!rc && own) rc = out_dir_check(o->out_dir, err);
    if (!rc && own) run_dir_clean_stale(o->out_dir); /* what a killed bench methods was writing */
    /* the figures of an earlier run here were drawn from its latency.csv */
    if (!rc && own) rc = plots_clear(o->out_dir, err);
    /* SIGINT, SIGTERM, SIGHUP: the running cell's process is ended, the rows
     * of the contexts finished are kept (run.json: interrupted), the prefill
     * snapshots removed; exit 128 + the signal (stop.h) */
    stop_begin();
    if (!rc) rc = bench_latency_in(o, cells, n_cells, err);
    stop_end();
    if (rc && stop_signal()) rc = kb_fail(err, 130, "interrupted by %s", stop_signal_name(stop_signal()));
    if (rc && made) rmdir(o->out_dir); /* only if nothing was written into it */
    dir_unlock(lock_fd);
    return rc;
}

static int bench_latency_in(const kb_lat_opts *o, const kb_cell *cells, int n_cells, kb_err *err) {
    if (o->out_dir) clean_stale_snapshots(o->out_dir);
    int ctx[KB_LAT_MAX_CTX], nctx = bench_distinct(o->contexts, o->n_contexts, ctx);
    /* the largest context first: a context that does not fit fails before any output */
    qsort(ctx, (size_t)nctx, sizeof *ctx, cmp_int_desc);
    kb_fill fill = o->fill;
    if (fill == KB_FILL_AUTO) fill = !strncmp(o->model, "synthetic:", 10) ? KB_FILL_RANDOM : KB_FILL_PREFILL;
    int W = 0;
    for (int c = 0; c < n_cells; c++) {
        const kb_method_params *p = &cells[c].p;
        W = KB_MAX(W, p->window ? p->window : p->ops->window_default);
    }
    if (o->threads) bench_set_threads(o->threads);
    char snapdir[1100] = "";
    int rc = 0, snap_fd = -1;
    /* the model and the contexts are checked before the machine is measured
     * (seconds): a synthetic model's preset and a GGUF file's context length
     * here, without building the weights; a GGUF file's weights by
     * make_snapshots (prefill) or the cells (random) */
    kb_hparams shp;
    int longest;
    /* two contexts that fit to one length would measure it twice: refused
     * before anything runs, for any model and fill (a model that cannot be
     * read is left to the loaders, which say why) */
    kb_err e2 = {0};
    int n_model, have_n = !model_context_length(o->model, &n_model, &e2);
    if (have_n && bench_contexts_distinct(ctx, nctx, o->decode_tokens, n_model, err)) {
        if (!strcmp(o->cmd, "bench methods")) kb_err_prefix(err, "--contexts"); /* a sweep's: its caller's */
        return KB_EINPUT;
    }
    rc = model_synthetic_hparams(o->model, &shp, err); /* -1: a GGUF file */
    if (rc > 0) return rc;
    /* every model's contexts are fitted here, whatever the fill, so that run.json,
     * stdout and the messages name the context the cells measure, and one that cannot
     * fit is refused before the machine is measured; make_snapshots and the cells fit
     * again, which changes nothing by then (until 2026-12-06 a GGUF file filled at
     * random was fitted by its cells alone: run.json listed 512 for a row of 496,
     * without the note) */
    if (have_n && (rc = fit_contexts(o, ctx, nctx, n_model, &longest, err))) return rc;
    rc = 0;
    if (fill == KB_FILL_PREFILL) {
        const char *tmp = getenv("TMPDIR"); /* set but empty is unset, as for mkstemp(3) users */
        const char *base = o->out_dir ? o->out_dir : tmp && *tmp ? tmp : "/tmp";
        struct stat st;
        int made = o->out_dir && stat(o->out_dir, &st) != 0; /* an error leaves no directory behind */
        if (o->out_dir && (rc = make_dirs(o->out_dir, err))) return rc;
        /* where base came from, for the messages: without --out the user may not
         * know that bench methods writes under $TMPDIR */
        const char *from = o->out_dir  ? ""
                           : tmp && *tmp ? " (from $TMPDIR, where bench methods keeps its prefill snapshots "
                                           "without --out)"
                                         : "";
        if (check_dir_len(base, err)) { /* $TMPDIR (an --out is checked already) */
            size_t n = strlen(err->msg);
            snprintf(err->msg + n, sizeof err->msg - n, "%s", from);
            if (made) rmdir(o->out_dir);
            return KB_EINPUT;
        }
        if (!o->out_dir) clean_stale_snapshots(base); /* an --out's are cleaned above */
        snprintf(snapdir, sizeof snapdir, "%s/.kvbench-prefill.%ld", base, (long)getpid());
        if (mkdir(snapdir, 0700) && errno != EEXIST) {
            rc = kb_fail(err, KB_EINPUT, "%s: cannot create: %s%s", snapdir, strerror(errno), from);
            if (made) rmdir(o->out_dir);
            return rc;
        }
        /* held while the snapshots exist: clean_stale_snapshots leaves a locked
         * directory alone (no lock where the file system has none: then the
         * owner's pid alone decides) */
        snap_fd = open(snapdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (snap_fd >= 0) flock(snap_fd, LOCK_EX | LOCK_NB);
        if ((rc = make_snapshots(o, ctx, nctx, W, snapdir, err))) {
            remove_snapshots(snapdir, ctx, nctx);
            if (snap_fd >= 0) close(snap_fd);
            if (made) rmdir(o->out_dir);
            return rc;
        }
    }
    double bw, ho;
    probe_machine(&bw, &ho);
    if (!o->quiet) {
        char hs[64] = "";
        if (ho > 0) snprintf(hs, sizeof hs, ", hand-over round trip %.0f ns", ho);
        fprintf(stderr, "kvbench %s: measured read bandwidth %.2f GB/s (%d threads)%s\n", o->cmd, bw,
                kb_pool_threads(), hs);
    }
    kb_table t;
    table_init(&t, kb_latency_cols, kb_latency_ncols);
    cJSON *model_json = NULL;
    if (!o->quiet && o->banner) printf("%s\n", o->banner);
    if (!o->quiet)
        printf("%-14s %6s %7s %9s %8s %8s %8s %7s %10s %9s %8s\n", "label", "budget", "context",
               "ms/token", "attn ms", "sel ms", "GB/s", "of bw", "resident", "RSS MiB", "speedup");
    /* rounds: every cell once per round, in the same order; a cell's timing
     * columns are medians over the rounds, its speedup the median of the
     * ratios within each round (a drifting machine moves both parts of a
     * ratio together) */
    const int R = o->rounds > 0 ? o->rounds : 1;
    cell_out *outs = KB_CALLOC((size_t)n_cells * R, sizeof *outs);
    double *med = KB_MALLOC(4 * (size_t)R * sizeof(double)), *bws = KB_MALLOC((size_t)R * sizeof(double)),
           *hos = KB_MALLOC((size_t)R * sizeof(double));
    const double bw0 = bw, ho0 = ho;
    bench_manifest mf = {.fill = fill, .rounds = R, .window = W, .ctx = ctx, .nctx = nctx, .cells = cells,
                         .n_cells = n_cells};
    int wrote_manifest = 0; /* this run's run.json is in out_dir */
    for (int ci = 0; ci < nctx && !rc; ci++) {
        int row0 = t.nrow, full_c = -1;
        for (int c = 0; c < n_cells && full_c < 0; c++)
            if (!strcmp(cells[c].p.ops->name, "full")) full_c = c;
        for (int rd = 0; rd < R && !rc; rd++) {
            /* with rounds, the bandwidth and the hand-over too: once per round
             * (the first round of the first context uses the run's), the rows
             * take the medians */
            if (R > 1 && (ci || rd)) probe_machine(&bws[rd], &hos[rd]);
            else bws[rd] = bw0, hos[rd] = ho0;
            if (rd == R - 1) {
                memcpy(med, bws, (size_t)R * sizeof(double));
                bw = bench_median(med, R);
                memcpy(med, hos, (size_t)R * sizeof(double));
                ho = bench_median(med, R);
            }
            for (int c = 0; c < n_cells && !rc; c++) {
                const kb_cell *cell = &cells[c];
                char *s = cell_spec(o, cell, fill, snapdir, ctx[ci], W);
                cell_out *cr = &outs[(size_t)c * R + rd];
                memset(cr, 0, sizeof *cr);
                fflush(stdout);
                rc = run_child(s, cr, err);
                free(s);
                if (rc) {
                    char bs[32] = "";
                    if (cell->p.budget > 0) snprintf(bs, sizeof bs, " B=%d", cell->p.budget);
                    kb_err_prefix(err, "%s%s, context %d", cell->p.label, bs, ctx[ci]);
                    break;
                }
                if (!model_json) { /* the child's, with the file's hash, which the parent reads */
                    model_json = cr->model;
                    char sha[65];
                    model_sha256_text(o->model, sha);
                    cJSON_ReplaceItemInObjectCaseSensitive(model_json, "sha256", cJSON_CreateString(sha));
                } else {
                    cJSON_Delete(cr->model);
                }
                cr->model = NULL;
                if (R > 1 && !o->quiet) { /* each round's time (the medians below are of these) */
                    char bud[32] = "";
                    if (cell->p.budget > 0) snprintf(bud, sizeof bud, "/%d", cell->p.budget);
                    char hs[48] = "";
                    if (hos[rd] > 0) snprintf(hs, sizeof hs, ", hand-over %.0f ns", hos[rd]);
                    fprintf(stderr,
                            "kvbench %s: context %d round %d: %s%s decode %.4f ms/token, attention %.6f ms/token (read "
                            "bandwidth %.2f GB/s%s); selection %.6f ms/token, upkeep %.6f ms/token, peak RSS %.0f "
                            "bytes\n",
                            o->cmd, ctx[ci], rd + 1, cell->p.label, bud, cr->decode_s * 1e3, cr->attn_s * 1e3, bws[rd],
                            hs, cr->select_s * 1e3, cr->upkeep_s * 1e3, cr->peak_rss);
                }
                if (rd < R - 1) continue;
                /* the cell's last round: its row */
                cell_out co = cell_row(&t, o, cell, outs + (size_t)c * R, R, fill, bw, bws, ho, med);
                double gbps = (co.weight_bytes + co.kv_read) / co.decode_s / 1e9;
                if (!o->quiet) {
                    printf("%-14s %6s %7.0f %9.3f %8.3f %8.3f %8.2f %6.0f%% %10.1f %9.1f\n", cell->p.label,
                           t.rows[t.nrow - 1][3], co.context, co.decode_s * 1e3, co.attn_s * 1e3, co.select_s * 1e3, gbps,
                           100 * gbps / bw, co.res_tok, co.peak_rss / 1048576.0);
                    fflush(stdout);
                }
            }
        }
        if (rc) break;
        /* speedups of this context against its full cell (rows in cell order) */
        int col = table_col(&t, "speedup_vs_full");
        for (int c = 0; c < n_cells && full_c >= 0; c++) {
            for (int k = 0; k < R; k++)
                med[k] = outs[(size_t)full_c * R + k].decode_s / outs[(size_t)c * R + k].decode_s;
            char b[32];
            snprintf(b, sizeof b, "%.3f", bench_median(med, R));
            free(t.rows[row0 + c][col]);
            t.rows[row0 + c][col] = kb_strdup(b);
        }
        if (full_c >= 0 && !o->quiet) {
            printf("  speedup vs full at context %d%s:", ctx[ci], R > 1 ? " (median over rounds)" : "");
            for (int r = row0; r < t.nrow; r++)
                printf(" %s%s%s %s", t.rows[r][1], *t.rows[r][3] ? "/" : "", t.rows[r][3], t.rows[r][col]);
            printf("\n");
        }
        /* results so far, atomically (a long run keeps what it finished). With
         * a manifest, the directory never holds a latency.csv beside a run.json
         * that does not describe it: before the first table, what an earlier
         * run left goes (run_dir_clear, its run.json first) and this run's
         * run.json is written with status running, then rewritten after each
         * table (done after the last). A failed write leaves this run's
         * run.json, with or without its table, or nothing. */
        if (o->out_dir) {
            char path[1200];
            int first = o->manifest && !wrote_manifest;
            mf.bw = bw;
            mf.ho = ho;
            mf.model_json = model_json;
            mf.status = ci == nctx - 1 ? "done" : "running";
            if (!rc) rc = make_dirs(o->out_dir, err);
            if (!rc && first) {
                const char *st = mf.status;
                mf.status = "running";
                rc = run_dir_clear(o->out_dir, err);
                if (!rc) rc = write_manifest(o, &mf, err);
                wrote_manifest = !rc;
                mf.status = st;
            }
            snprintf(path, sizeof path, "%s/latency.csv", o->out_dir);
            if (!rc) rc = table_write_csv(&t, path, err);
            if (!rc && o->manifest && (!first || ci == nctx - 1)) rc = write_manifest(o, &mf, err);
        }
    }
    if (rc && wrote_manifest) { /* where it can be written, the run.json of a failed run says so */
        kb_err e2 = {0};
        mf.status = stop_signal() ? "interrupted" : "failed";
        write_manifest(o, &mf, &e2);
    }
    free(outs);
    free(med);
    free(bws);
    free(hos);
    if (snapdir[0]) remove_snapshots(snapdir, ctx, nctx);
    if (snap_fd >= 0) close(snap_fd);
    if (!rc && o->out_dir && !o->quiet)
        fprintf(stderr, "kvbench %s: wrote %s/latency.csv\n", o->cmd, o->out_dir);
    cJSON_Delete(model_json);
    table_free(&t);
    return rc;
}

/* ------------------------------------------------------------- the CLI --- */

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench bench methods [-m MODEL] [options]\n"
            "  -m, --model SPEC        GGUF path or synthetic:smollm2-135m | synthetic:llama3.1-8b\n"
            "      --contexts LIST     context lengths in tokens, each >= 16 (default 1024,2048,4096,8192)\n"
            "      --budgets LIST      token budgets (default 256,1024)\n"
            "      --methods LIST      methods (default: full and every budgeted method, default params)\n"
            "      --decode-tokens N   decode steps timed per repetition (default 16)\n"
            "      --reps N            timed repetitions per cell process; medians are reported (default 3)\n"
            "      --rounds N          run every cell N times, interleaved, and report medians over\n"
            "                          the rounds (speedups: median of the ratios within a round;\n"
            "                          default 1)\n"
            "      --kv TYPE           KV cache type f16 (default) | f32 | bf16\n"
            "      --threads N         threads (default: all cores)\n"
            "      --fill KIND         random | prefill (default: random for synthetic models,\n"
            "                          prefill for GGUF files)\n"
            "      --out DIR           write DIR/latency.csv and DIR/run.json\n"
            "Each cell runs in its own process; columns: docs/PERFORMANCE.md.\n");
}

int bench_methods(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "--cell")) return lat_cell(argv[2]);
    static const struct option opts[] = {
        {"model", 1, 0, 'm'},   {"contexts", 1, 0, 'c'}, {"budgets", 1, 0, 'b'},
        {"methods", 1, 0, 'M'}, {"decode-tokens", 1, 0, 't'}, {"reps", 1, 0, 'r'},
        {"rounds", 1, 0, 'R'},
        {"kv", 1, 0, 'k'},      {"threads", 1, 0, 'j'},  {"fill", 1, 0, 'f'},
        {"out", 1, 0, 'o'},     {"help", 0, 0, 'h'},     {0, 0, 0, 0}};
    const char *model = NULL, *methods = NULL, *out = NULL;
    kb_lat_opts o;
    memset(&o, 0, sizeof o);
    o.cmd = "bench methods";
    o.contexts[0] = 1024, o.contexts[1] = 2048, o.contexts[2] = 4096, o.contexts[3] = 8192;
    o.n_contexts = 4;
    o.decode_tokens = 16;
    o.reps = 3;
    o.rounds = 1;
    o.kv = KB_F16;
    o.manifest = 1;
    int budgets[32] = {256, 1024}, nb = 2;
    long v;
    int c;
    optind = 1;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        if (cli_once("bench methods", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'm': model = optarg; break;
        case 'c':
            /* >= 16 as a config's latency.contexts */
            if ((o.n_contexts = bench_parse_list("bench methods", "contexts", optarg, o.contexts,
                                                 KB_LAT_MAX_CTX, 16, 1 << 24)) < 0)
                return 2;
            break;
        case 'b':
            if ((nb = bench_parse_list("bench methods", "budgets", optarg, budgets, 32, 1, 1 << 30)) < 0)
                return 2;
            break;
        case 'M': methods = optarg; break;
        case 't':
            if (cli_parse_int("bench methods", "decode-tokens", optarg, 1, 4096, &v)) return 2;
            o.decode_tokens = (int)v;
            break;
        case 'r':
            if (cli_parse_int("bench methods", "reps", optarg, 1, 100, &v)) return 2;
            o.reps = (int)v;
            break;
        case 'R':
            if (cli_parse_int("bench methods", "rounds", optarg, 1, 100, &v)) return 2;
            o.rounds = (int)v;
            break;
        case 'k':
            if (kb_dtype_parse(optarg, &o.kv)) {
                fprintf(stderr, "kvbench bench methods: --kv expects f16, f32 or bf16, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'j':
            if (cli_parse_int("bench methods", "threads", optarg, 1, 1024, &v)) return 2;
            o.threads = (int)v;
            break;
        case 'f':
            if (!strcmp(optarg, "random")) o.fill = KB_FILL_RANDOM;
            else if (!strcmp(optarg, "prefill")) o.fill = KB_FILL_PREFILL;
            else {
                fprintf(stderr, "kvbench bench methods: --fill expects random or prefill, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'o': out = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvbench bench methods: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    o.model = cli_model_path(model);
    /* the cells: full once, every other method once per budget */
    const kb_method_ops *ops[64];
    int nops = 0;
    if (methods) {
        /* a comma-separated list of distinct method names, no empty item */
        char *dup = kb_strdup(methods);
        for (char *tok = dup, *next; tok; tok = next) {
            next = strchr(tok, ',');
            if (next) *next++ = 0;
            const kb_method_ops *mo = *tok ? method_find(tok) : NULL;
            int seen = 0;
            for (int i = 0; i < nops; i++) seen |= ops[i] == mo;
            if (!mo || seen) {
                if (!*methods)
                    fprintf(stderr, "kvbench bench methods: --methods is empty\n");
                else if (!*tok)
                    fprintf(stderr, "kvbench bench methods: --methods '%s' has an empty item\n",
                            methods);
                else if (!mo)
                    fprintf(stderr, "kvbench bench methods: --methods: unknown method '%s' "
                            "(known: %s)\n", tok, method_names());
                else
                    fprintf(stderr, "kvbench bench methods: --methods lists '%s' twice\n", tok);
                free(dup);
                return 2;
            }
            ops[nops++] = mo;
        }
        free(dup);
    } else {
        ops[nops++] = method_find("full");
        for (int i = 0; i < method_count(); i++)
            if (method_at(i)->needs_budget && nops < 64) ops[nops++] = method_at(i);
    }
    kb_err err = {0};
    if (out && check_out_path(out, 1, &err)) {
        fprintf(stderr, "kvbench bench methods: --out %s\n", err.msg);
        return 2;
    }
    kb_cell *cells = KB_CALLOC((size_t)nops * nb, sizeof *cells);
    int ncells = 0, rc = 0;
    for (int i = 0; i < nops && !rc; i++)
        for (int b = 0; b < (ops[i]->needs_budget ? nb : 1) && !rc; b++) {
            kb_cell *cell = &cells[ncells];
            rc = method_params_default(ops[i], ops[i]->needs_budget ? budgets[b] : -1, &cell->p, &err);
            if (rc) {
                fprintf(stderr, "kvbench bench methods: %s budget %d: %s\n", ops[i]->name, budgets[b], err.msg);
                free(cells);
                return rc;
            }
            ncells++;
        }
    o.out_dir = out;
    if (!out) o.manifest = 0;
    kb_machine mc;
    machine_describe(&mc);
    /* on stdout once the contexts and the model are checked: a refused run
     * prints nothing there */
    const char *fill = o.fill == KB_FILL_AUTO ? (!strncmp(o.model, "synthetic:", 10) ? "random" : "prefill")
                                              : fill_name(o.fill);
    static const char fmt[] = "# kvbench bench methods: %s, %d cores; model %s; KV %s; fill %s";
    size_t nb_banner = (size_t)snprintf(NULL, 0, fmt, mc.cpu, mc.cores, o.model, kb_dtype_name(o.kv), fill) + 1;
    char *banner = KB_MALLOC(nb_banner);
    snprintf(banner, nb_banner, fmt, mc.cpu, mc.cores, o.model, kb_dtype_name(o.kv), fill);
    o.banner = banner;
    rc = bench_latency(&o, cells, ncells, &err);
    free(banner);
    if (rc) fprintf(stderr, "kvbench bench methods: %s\n", err.msg);
    if (rc == 130 && stop_signal()) rc = 128 + stop_signal(); /* the shell's code for that signal */
    free(cells);
    return rc;
}
