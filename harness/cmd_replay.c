/* cmd_replay.c - kvbench replay: run one method on a saved trace of one
 * layer (methods.md §9) and write what it selected and computed.
 *
 *   kvbench replay --trace DIR --method M --budget B --out DIR
 *                  [--param key=value ...] [--config JSON-object] [--kv-dtype f32|f16|bf16]
 *
 * The layer is built from a prefill view of k/v (positions 0..L-1) and qwin
 * (positions L-W..L-1), then decodes the N steps (step i at position L+i).
 * The method context: L_prompt = L, N_new = meta max_new, S = meta S, layer =
 * meta layer (default 0); skip_layers applies to that layer as in a sweep
 * (a layer below it runs Full KV, and stats.json says so). K/V are stored in
 * the cache type of the run that wrote the trace (meta kv_dtype; f32 for a
 * trace without it), which reproduces that run exactly; --kv-dtype chooses
 * another. A K/V value that type cannot hold (it would be stored as inf) is
 * refused (exit 2) before anything is written.
 *
 * Outputs, written together or not at all: out.npy [N][Hq][D] f32,
 * selected.npy [N][rows][k] int32 (slot indices into the method's decode
 * cache, ascending, -1 padded; rows = Hkv or Hq; a method that attends every
 * slot lists them all), kept.npy [rows][T] int32 (original positions kept by
 * stage 1, only for evicting methods), stats.json (the build and machine,
 * the trace's absolute path, the sha256 of each trace file and where
 * meta.json says the trace comes from, resolved parameters, budget split,
 * per-step tokens and bytes resident and read). */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/atomic.h"
#include "harness/cli.h"
#include "harness/json.h"
#include "harness/npy.h"
#include "harness/runinfo.h"
#include "harness/sha256.h"
#include "harness/version.h"
#include "kernels/kernels.h"
#include "methods/budget.h"
#include "methods/methodset.h"
#include "methods/params.h"
#include "methods/trace.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench replay --trace DIR --method M --budget B --out DIR\n"
            "                      [--param key=value ...] [--config JSON] [--kv-dtype f32|f16|bf16]\n\n"
            "Runs one method on a saved one-layer trace (k.npy, v.npy, qwin.npy, q.npy, knew.npy,\n"
            "vnew.npy, meta.json) and writes out.npy, selected.npy, kept.npy (evicting methods;\n"
            "a kept.npy left by an earlier replay is removed otherwise) and stats.json into --out.\n"
            "The cache type is the trace's (meta.json kv_dtype; f32 if absent) unless --kv-dtype.\n"
            "--param values are JSON (numbers, true/false, arrays)\n"
            "or bare strings, e.g. --param kernel=adaptive --param alpha=0.5 (the method and the\n"
            "budget are given with --method and --budget, not --param).\n");
}

typedef struct step_stat {
    double resident_tokens, resident_bytes, read_tokeq, approx_tokeq, read_bytes, attended;
    int k;
} step_stat;

static int fail(int code, const char *msg) {
    fprintf(stderr, "kvbench replay: %s\n", msg);
    return code;
}

static cJSON *budget_json(const kb_budget *b) {
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "mode", b->mode == KB_BUDGET_TOPK ? "topk" : "traffic");
#define NUM(name, v)                                                                  \
    do {                                                                              \
        if ((v) >= 0) cJSON_AddNumberToObject(o, name, v);                            \
        else cJSON_AddNullToObject(o, name);                                          \
    } while (0)
    NUM("B", b->B);
    NUM("S", b->S);
    NUM("N_new", b->N_new);
    NUM("L", b->L);
    NUM("c", b->c);
    NUM("alpha", b->alpha);
    NUM("T", b->T);
    NUM("prompt_budget", b->prompt_budget);
    NUM("c2", b->c2);
    NUM("p", b->p);
    NUM("r", b->r);
    NUM("r_raw", b->r_raw);
    NUM("k", b->k);
    NUM("P", b->P);
    NUM("n_pages", b->n_pages);
#undef NUM
    return o;
}

int cmd_replay(int argc, char **argv) {
    static const struct option opts[] = {
        {"trace", required_argument, 0, 't'}, {"method", required_argument, 0, 'm'},
        {"budget", required_argument, 0, 'b'}, {"out", required_argument, 0, 'o'},
        {"param", required_argument, 0, 'p'}, {"config", required_argument, 0, 'c'},
        {"kv-dtype", required_argument, 0, 'k'}, {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    const char *trace_dir = NULL, *out_dir = NULL, *method = NULL, *config = NULL;
    long budget = -1;
    int have_budget = 0;
    kb_dtype dt = KB_F32;
    int dt_given = 0;
    const char **params = KB_CALLOC((size_t)argc + 1, sizeof *params);
    int nparams = 0, c;
    optind = 1;
    opterr = 0;
    static const char *const repeatable[] = {"param", NULL};
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
        if (cli_once("replay", c, opts, repeatable, &seen)) {
            free(params);
            return 2;
        }
        switch (c) {
        case 't': trace_dir = optarg; break;
        case 'm': method = optarg; break;
        case 'o': out_dir = optarg; break;
        case 'c': config = optarg; break;
        case 'p': params[nparams++] = optarg; break;
        case 'b':
            if (cli_parse_int("replay", "budget", optarg, 1, 1L << 30, &budget)) {
                free(params);
                return 2;
            }
            have_budget = 1;
            break;
        case 'k':
            dt_given = 1;
            if (kb_dtype_parse(optarg, &dt)) {
                free(params);
                fprintf(stderr, "kvbench replay: --kv-dtype expects f32, f16 or bf16, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h':
            usage(stdout);
            free(params);
            return 0;
        default:
            free(params);
            fprintf(stderr, "kvbench replay: unknown or incomplete option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        free(params);
        fprintf(stderr, "kvbench replay: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!trace_dir || !out_dir) {
        free(params);
        usage(stderr);
        return fail(2, !trace_dir ? "--trace DIR is required" : "--out DIR is required");
    }
    if (!*trace_dir) { /* its files would be read from the root directory */
        free(params);
        return fail(2, "--trace: an empty path, expected a trace directory");
    }

    /* the method's JSON object: --config, then --method/--budget/--param on top */
    kb_err err = {0};
    if (check_out_path(out_dir, 1, &err)) {
        free(params);
        fprintf(stderr, "kvbench replay: --out %s\n", err.msg);
        return 2;
    }
    if (cli_check_repeated_keys("--param", params, nparams, &err)) {
        free(params);
        return fail(2, err.msg);
    }
    cJSON *obj = NULL;
    if (config) {
        if (json_parse(config, strlen(config), "--config", &obj, &err) || !cJSON_IsObject(obj)) {
            free(params);
            cJSON_Delete(obj);
            if (!err.msg[0]) snprintf(err.msg, sizeof err.msg, "--config: expected a JSON object");
            return fail(2, err.msg);
        }
    } else {
        obj = cJSON_CreateObject();
    }
    if (method) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "method");
        cJSON_AddStringToObject(obj, "method", method);
    }
    if (have_budget) {
        cJSON_DeleteItemFromObjectCaseSensitive(obj, "budget");
        cJSON_AddNumberToObject(obj, "budget", (double)budget);
    }
    for (int i = 0; i < nparams; i++) {
        const char *eq = strchr(params[i], '=');
        if (!eq || eq == params[i]) {
            cJSON_Delete(obj);
            fprintf(stderr, "kvbench replay: --param expects key=value, got '%s'\n", params[i]);
            free(params);
            return 2;
        }
        if (cli_check_param_key("--param", params[i], &err)) {
            cJSON_Delete(obj);
            free(params);
            return fail(2, err.msg);
        }
        char key[128];
        snprintf(key, sizeof key, "%.*s", (int)(eq - params[i]), params[i]);
        cJSON *val = json_cli_value(eq + 1, "--param", params[i], &err);
        if (!val) {
            cJSON_Delete(obj);
            free(params);
            return fail(2, err.msg);
        }
        cJSON_DeleteItemFromObjectCaseSensitive(obj, key);
        cJSON_AddItemToObject(obj, key, val);
    }
    free(params);
    kb_method_params p;
    int rc = method_params_parse(obj, config ? "--config/--method/--budget/--param" : "--method/--budget/--param", &p, &err);
    cJSON_Delete(obj);
    if (rc) return fail(2, err.msg);

    kb_trace t;
    if ((rc = trace_read(trace_dir, &t, &err))) return fail(rc, err.msg);
    if (!dt_given && t.kv_dtype >= 0) dt = (kb_dtype)t.kv_dtype;
    /* a K/V value the cache type cannot hold would be stored as inf */
    if ((rc = trace_check_dtype(trace_dir, &t, dt, dt_given ? "--kv-dtype" : "meta.json kv_dtype", &err))) {
        trace_free(&t);
        return fail(rc, err.msg);
    }
    /* skip_layers against the traced model's layer count (meta.json's
     * model.layers; a trace before 2026-12-05 has none); r is left to the
     * method, which checks it against the trace's head dim */
    if (t.n_layers && methodset_check_model(&p, t.n_layers, INT_MAX, &err)) {
        kb_err_prefix(&err, "%s (meta.json's model.layers)",
                      config ? "--config/--method/--budget/--param" : "--method/--budget/--param");
        trace_free(&t);
        return fail(2, err.msg);
    }
    /* what was read: the directory's absolute path and each file's sha256 */
    char *trace_abs = realpath(trace_dir, NULL);
    if (!trace_abs)
        rc = kb_fail(&err, KB_ERUNTIME, "%s: cannot resolve the absolute path: %s", trace_dir, strerror(errno));
    char trace_sha[KB_TRACE_NFILES][65];
    for (int i = 0; i < KB_TRACE_NFILES && !rc; i++) {
        char fp[4200];
        snprintf(fp, sizeof fp, "%s/%s", trace_dir, kb_trace_files[i]);
        rc = sha256_file(fp, trace_sha[i], &err);
    }
    if (rc) {
        free(trace_abs);
        trace_free(&t);
        return fail(rc, err.msg);
    }

    /* the layer: the method itself, or Full KV below skip_layers */
    int dense = t.layer < p.skip_layers;
    kb_method_params fp, *use = &p;
    if (dense) {
        method_params_default(method_find("full"), -1, &fp, &err);
        use = &fp;
    }
    const kb_method_ops *ops = use->ops;
    kb_method_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.layer = t.layer;
    ctx.n_layers = t.layer + 1;
    ctx.Hq = t.Hq;
    ctx.Hkv = t.Hkv;
    ctx.D = t.D;
    ctx.kv_dtype = dt;
    ctx.L_prompt = t.L;
    ctx.N_new = t.max_new;
    ctx.S = t.S;
    ctx.n_ctx = t.S;
    kb_kvstream *kv = KB_CALLOC((size_t)t.Hkv, sizeof *kv);
    for (int g = 0; g < t.Hkv; g++) {
        kvstream_init(&kv[g], dt, t.D, t.L);
        for (int j = 0; j < t.L; j++)
            kvstream_append_f32(&kv[g], t.k + ((size_t)j * t.Hkv + g) * t.D, t.v + ((size_t)j * t.Hkv + g) * t.D, j);
    }
    int32_t *qpos = KB_MALLOC((size_t)t.W * sizeof(int32_t));
    for (int i = 0; i < t.W; i++) qpos[i] = t.L - t.W + i;
    kb_prefill_view pv = {t.Hq, t.Hkv, t.D, kv, t.W, t.qwin, qpos};
    void *st = NULL;
    rc = ops->layer_init(use, &ctx, &pv, &st, &err);
    for (int g = 0; g < t.Hkv; g++) kvstream_free(&kv[g]);
    free(kv);
    free(qpos);
    if (rc) {
        free(trace_abs);
        trace_free(&t);
        char msg[1200];
        snprintf(msg, sizeof msg, "%s: %s", trace_dir, err.msg);
        return fail(rc, msg);
    }

    /* stage 1's kept positions */
    int rows0 = 0, T = 0;
    int32_t *kept = NULL;
    ops->decode_cache(st, 0, &rows0);
    if (ops->evicts) {
        for (int r = 0; r < rows0; r++) T = KB_MAX(T, ops->decode_cache(st, r, NULL)->n);
        kept = KB_MALLOC(((size_t)rows0 * T + 1) * sizeof(int32_t));
        for (int r = 0; r < rows0; r++) {
            const kb_kvstream *s = ops->decode_cache(st, r, NULL);
            for (int j = 0; j < T; j++) kept[(size_t)r * T + j] = j < s->n ? s->pos[j] : -1;
        }
    }

    /* decode */
    size_t no = (size_t)t.Hq * t.D;
    float *out = KB_MALLOC(((size_t)t.N * no + 1) * sizeof(float));
    step_stat *ss = KB_CALLOC((size_t)t.N + 1, sizeof *ss);
    int32_t **sel = KB_CALLOC((size_t)t.N + 1, sizeof *sel);
    int *sel_n = NULL; /* [N][rows] slots selected per row */
    int rows = 0, kmax = 0, per_qhead = 0;
    kb_account acc;
    for (int i = 0; i < t.N; i++) {
        ops->decode(st, t.q + (size_t)i * no, t.knew + (size_t)i * t.Hkv * t.D, t.vnew + (size_t)i * t.Hkv * t.D,
                    t.L + i, out + (size_t)i * no);
        memset(&acc, 0, sizeof acc);
        ops->account(st, &acc);
        int nr = acc.sel_streams > 0 ? acc.sel_streams : rows0;
        if (i == 0) {
            rows = nr;
            per_qhead = acc.sel_streams > 0 ? acc.sel_per_query_head : rows0 == t.Hq && t.Hq != t.Hkv;
            sel_n = KB_CALLOC(((size_t)t.N + 1) * rows, sizeof(int));
        }
        /* each step's rows: counts then indices */
        int width = 0;
        for (int r = 0; r < rows; r++) {
            int cnt;
            if (acc.sel_streams > 0) {
                const int32_t *rr = acc.selected + (size_t)r * acc.sel_k;
                for (cnt = 0; cnt < acc.sel_k && rr[cnt] >= 0; cnt++) {
                }
            } else {
                cnt = ops->decode_cache(st, r, NULL)->n;
            }
            sel_n[(size_t)i * rows + r] = cnt;
            width = KB_MAX(width, cnt);
        }
        sel[i] = KB_MALLOC(((size_t)rows * width + 1) * sizeof(int32_t));
        for (int r = 0; r < rows; r++) {
            int cnt = sel_n[(size_t)i * rows + r];
            for (int j = 0; j < width; j++) {
                int32_t v = -1;
                if (j < cnt) v = acc.sel_streams > 0 ? acc.selected[(size_t)r * acc.sel_k + j] : j;
                sel[i][(size_t)r * width + j] = v;
            }
        }
        ss[i].k = width;
        kmax = KB_MAX(kmax, width);
        ss[i].resident_tokens = acc.resident_tokens;
        ss[i].resident_bytes = acc.resident_bytes;
        ss[i].read_tokeq = acc.read_tokeq;
        ss[i].approx_tokeq = acc.approx_tokeq;
        ss[i].read_bytes = acc.read_bytes;
        ss[i].attended = acc.attended;
    }
    if (t.N == 0) rows = rows0;
    memset(&acc, 0, sizeof acc);
    ops->account(st, &acc);
    kb_budget bud;
    budget_clear(&bud);
    int have_bud = acc.budget != NULL;
    if (have_bud) bud = *acc.budget;

    /* selected.npy: [N][rows][kmax] */
    int32_t *selall = KB_MALLOC(((size_t)t.N * rows * kmax + 1) * sizeof(int32_t));
    for (int i = 0; i < t.N; i++)
        for (int r = 0; r < rows; r++)
            for (int j = 0; j < kmax; j++)
                selall[((size_t)i * rows + r) * kmax + j] = j < ss[i].k ? sel[i][(size_t)r * ss[i].k + j] : -1;

    /* stats.json */
    cJSON *js = cJSON_CreateObject();
    cJSON_AddStringToObject(js, "kvbench_version", kb_version());
    cJSON_AddStringToObject(js, "git_commit", kb_git_desc());
    char exe[65];
    runinfo_build_sha256(exe);
    cJSON_AddStringToObject(js, "build_sha256", exe);
    cJSON_AddItemToObject(js, "machine", runinfo_machine_json(NULL)); /* no model: the mode asked for */
    cJSON_AddStringToObject(js, "trace_dir", trace_abs);
    cJSON *th = cJSON_AddObjectToObject(js, "trace_sha256");
    for (int i = 0; i < KB_TRACE_NFILES; i++) cJSON_AddStringToObject(th, kb_trace_files[i], trace_sha[i]);
    cJSON_AddStringToObject(js, "method", p.ops->name);
    cJSON_AddStringToObject(js, "label", p.label);
    cJSON_AddItemToObject(js, "params", method_params_to_json(&p));
    cJSON_AddBoolToObject(js, "dense_because_skip_layers", dense);
    cJSON_AddStringToObject(js, "kv_dtype", kb_dtype_name(dt));
    cJSON_AddStringToObject(js, "kernels", kernels_get()->name);
    cJSON *tj = cJSON_AddObjectToObject(js, "trace");
    cJSON_AddNumberToObject(tj, "L", t.L);
    cJSON_AddNumberToObject(tj, "W", t.W);
    cJSON_AddNumberToObject(tj, "N", t.N);
    cJSON_AddNumberToObject(tj, "Hq", t.Hq);
    cJSON_AddNumberToObject(tj, "Hkv", t.Hkv);
    cJSON_AddNumberToObject(tj, "D", t.D);
    cJSON_AddNumberToObject(tj, "layer", t.layer);
    cJSON_AddNumberToObject(tj, "max_new", t.max_new);
    cJSON_AddNumberToObject(tj, "S", t.S);
    for (const cJSON *x = t.origin ? t.origin->child : NULL; x; x = x->next)
        cJSON_AddItemToObject(tj, x->string, cJSON_Duplicate(x, 1));
    if (have_bud) cJSON_AddItemToObject(js, "budget", budget_json(&bud));
    else cJSON_AddNullToObject(js, "budget");
    cJSON_AddNumberToObject(js, "selected_rows", rows);
    cJSON_AddBoolToObject(js, "selected_per_query_head", per_qhead);
    cJSON_AddNumberToObject(js, "kept_T", T);
    cJSON *steps = cJSON_AddArrayToObject(js, "steps");
    for (int i = 0; i < t.N; i++) {
        cJSON *s = cJSON_CreateObject();
        cJSON_AddNumberToObject(s, "step", i);
        cJSON_AddNumberToObject(s, "pos", t.L + i);
        cJSON_AddNumberToObject(s, "resident_tokens", ss[i].resident_tokens);
        cJSON_AddNumberToObject(s, "resident_bytes", ss[i].resident_bytes);
        cJSON_AddNumberToObject(s, "read_tokeq", ss[i].read_tokeq);
        cJSON_AddNumberToObject(s, "approx_tokeq", ss[i].approx_tokeq);
        cJSON_AddNumberToObject(s, "read_bytes", ss[i].read_bytes);
        cJSON_AddNumberToObject(s, "attended", ss[i].attended);
        cJSON_AddNumberToObject(s, "k", ss[i].k);
        cJSON_AddItemToArray(steps, s);
    }
    char *stats = json_print(js, 1);
    cJSON_Delete(js);

    /* write everything or nothing */
    rc = make_dirs(out_dir, &err);
    kb_outset o;
    outset_init(&o);
    char path[4200];
    long so[3] = {t.N, t.Hq, t.D}, sk[3] = {t.N, rows, kmax}, sp[2] = {rows0, T};
    if (!rc) {
        snprintf(path, sizeof path, "%s/out.npy", out_dir);
        rc = outset_add_npy(&o, path, out, 'f', 3, so, &err);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/selected.npy", out_dir);
        rc = outset_add_npy(&o, path, selall, 'i', 3, sk, &err);
    }
    if (!rc && kept) {
        snprintf(path, sizeof path, "%s/kept.npy", out_dir);
        rc = outset_add_npy(&o, path, kept, 'i', 2, sp, &err);
    }
    if (!rc) {
        snprintf(path, sizeof path, "%s/stats.json", out_dir);
        size_t sl = strlen(stats);
        stats[sl] = '\n';
        rc = outset_add(&o, path, stats, sl + 1, &err);
        stats[sl] = 0;
    }
    if (!rc) rc = outset_commit(&o, &err);
    if (!rc && !kept) {
        /* a kept.npy of an earlier replay into this directory is not this method's */
        snprintf(path, sizeof path, "%s/kept.npy", out_dir);
        if (unlink(path) && errno != ENOENT)
            rc = kb_fail(&err, KB_ERUNTIME, "%s: cannot remove the kept.npy of an earlier replay: %s",
                         path, strerror(errno));
    }
    if (rc) outset_abort(&o);
    else
        printf("replay: %s (%s) on %s: L=%d W=%d N=%d Hq=%d Hkv=%d D=%d -> %s\n", p.label, p.ops->name, trace_dir,
               t.L, t.W, t.N, t.Hq, t.Hkv, t.D, out_dir);

    free(stats);
    ops->destroy(st);
    for (int i = 0; i < t.N; i++) free(sel[i]);
    free(sel);
    free(sel_n);
    free(selall);
    free(ss);
    free(out);
    free(kept);
    free(trace_abs);
    trace_free(&t);
    if (rc) return fail(rc, err.msg);
    return 0;
}
