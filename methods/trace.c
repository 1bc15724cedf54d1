/* trace.c - replay traces of one layer (trace.h). */
#include "methods/trace.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness/atomic.h"
#include "harness/json.h"
#include "harness/npy.h"
#include "harness/version.h"

void trace_init(kb_trace *t, int Hq, int Hkv, int D, int max_new, int S, int layer) {
    memset(t, 0, sizeof *t);
    t->Hq = Hq;
    t->Hkv = Hkv;
    t->D = D;
    t->max_new = max_new;
    t->S = S;
    t->layer = layer;
    t->kv_dtype = -1;
}

void trace_free(kb_trace *t) {
    free(t->k);
    free(t->v);
    free(t->qwin);
    free(t->q);
    free(t->knew);
    free(t->vnew);
    cJSON_Delete(t->origin);
    memset(t, 0, sizeof *t);
}

void trace_set_origin(kb_trace *t, const char *model_name, const char *model_sha256, int n_layers,
                      const char *task, const char *sample, cJSON *cell) {
    cJSON_Delete(t->origin);
    t->origin = cJSON_CreateObject();
    cJSON *m = cJSON_AddObjectToObject(t->origin, "model");
    cJSON_AddStringToObject(m, "name", model_name);
    cJSON_AddStringToObject(m, "sha256", model_sha256);
    cJSON_AddNumberToObject(m, "layers", n_layers);
    t->n_layers = n_layers;
    if (task) cJSON_AddStringToObject(t->origin, "task", task);
    if (sample) cJSON_AddStringToObject(t->origin, "sample", sample);
    if (cell) cJSON_AddItemToObject(t->origin, "cell", cell);
}

int trace_set_prefill(kb_trace *t, const kb_prefill_view *pv, int W, kb_err *err) {
    if (pv->Hq != t->Hq || pv->Hkv != t->Hkv || pv->D != t->D)
        return kb_fail(err, KB_EINPUT, "trace: prefill view shape %d/%d/%d differs from the trace's %d/%d/%d",
                       pv->Hq, pv->Hkv, pv->D, t->Hq, t->Hkv, t->D);
    int L = pv->kv[0].n, Hkv = t->Hkv, D = t->D;
    /* checked before anything changes: a refused view leaves the trace as it was */
    for (int g = 0; g < Hkv; g++)
        for (int j = 0; j < L; j++)
            if (pv->kv[g].pos[j] != j)
                return kb_fail(err, KB_EINPUT, "trace: prefill slot %d of KV head %d holds position %d; a trace "
                               "needs positions 0..L-1", j, g, pv->kv[g].pos[j]);
    t->kv_dtype = (int)pv->kv[0].dtype;
    if (W > pv->Wq) W = pv->Wq;
    if (W > L) W = L;
    free(t->k);
    free(t->v);
    free(t->qwin);
    t->L = L;
    t->W = W;
    t->k = KB_MALLOC(((size_t)L * Hkv * D + 1) * sizeof(float));
    t->v = KB_MALLOC(((size_t)L * Hkv * D + 1) * sizeof(float));
    for (int g = 0; g < Hkv; g++)
        for (int j = 0; j < L; j++)
            kvstream_get_f32(&pv->kv[g], j, t->k + ((size_t)j * Hkv + g) * D, t->v + ((size_t)j * Hkv + g) * D);
    size_t row = (size_t)t->Hq * D;
    t->qwin = KB_MALLOC(((size_t)W * row + 1) * sizeof(float));
    memcpy(t->qwin, pv->qwin + (size_t)(pv->Wq - W) * row, (size_t)W * row * sizeof(float));
    return 0;
}

void trace_add_step(kb_trace *t, const float *q, const float *k, const float *v) {
    if (t->N == t->cap) {
        t->cap = t->cap ? 2 * t->cap : 64;
        t->q = KB_REALLOC(t->q, (size_t)t->cap * t->Hq * t->D * sizeof(float));
        t->knew = KB_REALLOC(t->knew, (size_t)t->cap * t->Hkv * t->D * sizeof(float));
        t->vnew = KB_REALLOC(t->vnew, (size_t)t->cap * t->Hkv * t->D * sizeof(float));
    }
    memcpy(t->q + (size_t)t->N * t->Hq * t->D, q, (size_t)t->Hq * t->D * sizeof(float));
    memcpy(t->knew + (size_t)t->N * t->Hkv * t->D, k, (size_t)t->Hkv * t->D * sizeof(float));
    memcpy(t->vnew + (size_t)t->N * t->Hkv * t->D, v, (size_t)t->Hkv * t->D * sizeof(float));
    t->N++;
}

static void join(char *buf, size_t cap, const char *dir, const char *name) {
    snprintf(buf, cap, "%s/%s", dir, name);
}

const char *const kb_trace_files[KB_TRACE_NFILES] = {"k.npy",    "v.npy",    "qwin.npy", "q.npy",
                                                      "knew.npy", "vnew.npy", "meta.json"};

int trace_write(const char *dir, const kb_trace *t, kb_err *err) {
    int rc = make_dirs(dir, err);
    if (rc) return rc;
    char path[4200];
    kb_outset o;
    outset_init(&o);
    long sk[3] = {t->L, t->Hkv, t->D}, sw[3] = {t->W, t->Hq, t->D}, sq[3] = {t->N, t->Hq, t->D},
         sn[3] = {t->N, t->Hkv, t->D};
    static const float none[1] = {0};
    struct {
        const float *data;
        const long *shape;
    } files[] = {/* in kb_trace_files' order */
                 {t->k, sk}, {t->v, sk}, {t->qwin, sw}, {t->N ? t->q : none, sq}, {t->N ? t->knew : none, sn},
                 {t->N ? t->vnew : none, sn}};
    for (size_t i = 0; i < sizeof files / sizeof files[0] && !rc; i++) {
        join(path, sizeof path, dir, kb_trace_files[i]);
        rc = outset_add_npy(&o, path, files[i].data, 'f', 3, files[i].shape, err);
    }
    if (rc) return rc; /* outset_add aborted the set */
    cJSON *mj = cJSON_CreateObject();
    cJSON_AddNumberToObject(mj, "max_new", t->max_new);
    cJSON_AddNumberToObject(mj, "S", t->S);
    cJSON_AddNumberToObject(mj, "layer", t->layer);
    if (t->kv_dtype >= 0) cJSON_AddStringToObject(mj, "kv_dtype", kb_dtype_name((kb_dtype)t->kv_dtype));
    cJSON_AddStringToObject(mj, "git_commit", kb_git_desc());
    for (const cJSON *x = t->origin ? t->origin->child : NULL; x; x = x->next) /* model, task, sample, cell */
        if (strcmp(x->string, "git_commit")) cJSON_AddItemToObject(mj, x->string, cJSON_Duplicate(x, 1));
    char *meta = json_print(mj, 0);
    cJSON_Delete(mj);
    size_t n = strlen(meta);
    meta = KB_REALLOC(meta, n + 2);
    meta[n++] = '\n';
    meta[n] = 0;
    join(path, sizeof path, dir, kb_trace_files[6]);
    rc = outset_add(&o, path, meta, n, err);
    free(meta);
    if (rc) return rc;
    return outset_commit(&o, err);
}

/* Reads dir/name as f32 [d0][d1][d2]; want[i] = -1 is free and filled in;
 * dims names the three dimensions for messages. */
static int read3(const char *dir, const char *name, const char *const dims[3], long want[3],
                 const char *const from[3], float **out, kb_err *err) {
    char path[4200];
    join(path, sizeof path, dir, name);
    kb_npy a;
    int rc = npy_read_expect(path, 'f', 3, &a, err);
    if (rc) return rc;
    for (int i = 0; i < 3; i++) {
        if (want[i] >= 0 && a.shape[i] != want[i]) {
            kb_fail(err, KB_EINPUT, "%s: shape (%ld, %ld, %ld) does not match %s: %s is %ld there, "
                    "%ld here", path, a.shape[0], a.shape[1], a.shape[2], from[i], dims[i],
                    want[i], a.shape[i]);
            npy_free(&a);
            return KB_EINPUT;
        }
        want[i] = a.shape[i];
    }
    /* finite values only: a NaN or inf would flow into every score and output */
    size_t n = (size_t)a.shape[0] * (size_t)a.shape[1] * (size_t)a.shape[2];
    const float *x = a.data;
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) {
            size_t d2 = (size_t)a.shape[2], d1 = (size_t)a.shape[1];
            kb_fail(err, KB_EINPUT, "%s: element (%zu, %zu, %zu) is %s, expected finite values", path,
                    i / (d1 * d2), i / d2 % d1, i % d2, isnan(x[i]) ? "NaN" : "infinite");
            npy_free(&a);
            return KB_EINPUT;
        }
    *out = a.data; /* ownership moves to the trace */
    return 0;
}

int trace_read(const char *dir, kb_trace *t, kb_err *err) {
    memset(t, 0, sizeof *t);
    long sk[3] = {-1, -1, -1};
    static const char *const dk[3] = {"L", "Hkv", "D"};
    static const char *const dw[3] = {"W", "Hq", "D"};
    static const char *const dq[3] = {"N", "Hq", "D"};
    static const char *const dn[3] = {"N", "Hkv", "D"};
    /* each file's expected dimensions, and the file that fixed each one */
    static const char *const fk[3] = {"", "", ""};
    static const char *const fv[3] = {"k.npy", "k.npy", "k.npy"};
    static const char *const fw[3] = {"", "", "k.npy"};
    static const char *const fq[3] = {"", "qwin.npy", "k.npy"};
    static const char *const fn[3] = {"q.npy", "k.npy", "k.npy"};
    int rc = read3(dir, "k.npy", dk, sk, fk, &t->k, err);
    long sv[3] = {sk[0], sk[1], sk[2]};
    if (!rc) rc = read3(dir, "v.npy", dk, sv, fv, &t->v, err);
    long sw[3] = {-1, -1, sk[2]};
    if (!rc) rc = read3(dir, "qwin.npy", dw, sw, fw, &t->qwin, err);
    long sq[3] = {-1, sw[1], sk[2]};
    if (!rc) rc = read3(dir, "q.npy", dq, sq, fq, &t->q, err);
    long sn[3] = {sq[0], sk[1], sk[2]};
    if (!rc) rc = read3(dir, "knew.npy", dn, sn, fn, &t->knew, err);
    long sn2[3] = {sq[0], sk[1], sk[2]};
    if (!rc) rc = read3(dir, "vnew.npy", dn, sn2, fn, &t->vnew, err);
    if (rc) {
        trace_free(t);
        return rc;
    }
    t->L = (int)sk[0];
    t->Hkv = (int)sk[1];
    t->D = (int)sk[2];
    t->W = (int)sw[0];
    t->Hq = (int)sw[1];
    t->N = t->cap = (int)sq[0];
    char path[4200];
    join(path, sizeof path, dir, "k.npy");
    if (t->L < 1 || t->Hkv < 1 || t->D < 1)
        rc = kb_fail(err, KB_EINPUT, "%s: need L >= 1, Hkv >= 1, D >= 1, got (%d, %d, %d)", path, t->L, t->Hkv, t->D);
    join(path, sizeof path, dir, "qwin.npy");
    if (!rc && (t->Hq < t->Hkv || t->Hq % t->Hkv))
        rc = kb_fail(err, KB_EINPUT, "%s: Hq = %d query heads is not a multiple of Hkv = %d KV heads", path, t->Hq,
                     t->Hkv);
    if (!rc && (t->W < 1 || t->W > t->L))
        rc = kb_fail(err, KB_EINPUT, "%s: W = %d window queries, expected 1 <= W <= L = %d", path, t->W, t->L);
    cJSON *meta = NULL;
    join(path, sizeof path, dir, "meta.json");
    if (!rc) rc = json_load_file(path, &meta, err);
    long v;
    if (!rc && !cJSON_IsObject(meta)) rc = kb_fail(err, KB_EINPUT, "%s: expected a JSON object", path);
    static const char *const meta_keys[] = {"max_new", "S",    "layer",  "kv_dtype", "git_commit",
                                            "model",   "task", "sample", "cell",     NULL};
    if (!rc) rc = json_check_keys(meta, path, meta_keys, NULL, err);
    if (!rc && !(rc = json_get_int(meta, path, "max_new", 1, 0, 1 << 24, 0, &v, err))) t->max_new = (int)v;
    if (!rc && !(rc = json_get_int(meta, path, "S", 1, 1, 1 << 30, 0, &v, err))) t->S = (int)v;
    if (!rc && !(rc = json_get_int(meta, path, "layer", 0, 0, 1 << 20, 0, &v, err))) t->layer = (int)v;
    t->kv_dtype = -1;
    const char *dts = NULL;
    if (!rc) rc = json_get_string(meta, path, "kv_dtype", 0, NULL, &dts, err);
    kb_dtype dt;
    if (!rc && dts && kb_dtype_parse(dts, &dt))
        rc = kb_fail(err, KB_EINPUT, "%s: key 'kv_dtype': expected \"f32\", \"f16\" or \"bf16\", got \"%.40s\"",
                     path, dts);
    else if (!rc && dts)
        t->kv_dtype = (int)dt;
    /* where the trace comes from (trace_write; absent in older traces) */
    const char *str;
    static const char *const strs[] = {"git_commit", "task", "sample"};
    for (size_t i = 0; i < sizeof strs / sizeof strs[0] && !rc; i++)
        rc = json_get_string(meta, path, strs[i], 0, NULL, &str, err);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(meta, "model");
    if (!rc && model) {
        char where[4300];
        snprintf(where, sizeof where, "%s: key 'model'", path);
        static const char *const mkeys[] = {"name", "sha256", "layers", NULL};
        if (!cJSON_IsObject(model))
            rc = kb_fail(err, KB_EINPUT, "%s: expected an object {\"name\": ..., \"sha256\": ..., \"layers\": ...}",
                         where);
        if (!rc) rc = json_check_keys(model, where, mkeys, NULL, err);
        if (!rc) rc = json_get_string(model, where, "name", 1, NULL, &str, err);
        if (!rc) rc = json_get_string(model, where, "sha256", 1, NULL, &str, err);
        /* the layer count (absent before 2026-12-05): the traced layer is one of them */
        if (!rc && !(rc = json_get_int(model, where, "layers", 0, 1, 1 << 20, 0, &v, err))) t->n_layers = (int)v;
        if (!rc && t->n_layers && t->layer >= t->n_layers)
            rc = kb_fail(err, KB_EINPUT, "%s: key 'layer': %d, but the model has layers 0..%d (key 'model': "
                         "'layers': %d)", path, t->layer, t->n_layers - 1, t->n_layers);
    }
    if (!rc && cJSON_GetObjectItemCaseSensitive(meta, "cell") &&
        !cJSON_IsObject(cJSON_GetObjectItemCaseSensitive(meta, "cell")))
        rc = kb_fail(err, KB_EINPUT, "%s: key 'cell': expected an object (the traced cell's method parameters)",
                     path);
    static const char *const origin[] = {"git_commit", "model", "task", "sample", "cell"};
    for (size_t i = 0; i < sizeof origin / sizeof origin[0] && !rc; i++) {
        const cJSON *x = cJSON_GetObjectItemCaseSensitive(meta, origin[i]);
        if (!x) continue;
        if (!t->origin) t->origin = cJSON_CreateObject();
        cJSON_AddItemToObject(t->origin, origin[i], cJSON_Duplicate(x, 1));
    }
    /* as a sweep writes them: N decode steps <= max_new, and the max seq S
     * = min(L + 1 + max_new, context) holds the L + N tokens of the trace */
    if (!rc && t->N > t->max_new)
        rc = kb_fail(err, KB_EINPUT, "%s: max_new = %d, but q.npy holds N = %d decode steps: expected "
                     "max_new >= N", path, t->max_new, t->N);
    if (!rc && ((long)t->S < (long)t->L + t->N || (long)t->S > (long)t->L + 1 + t->max_new))
        rc = kb_fail(err, KB_EINPUT, "%s: S = %d, expected L + N = %ld <= S <= L + 1 + max_new = %ld "
                     "(L = %d prompt rows in k.npy, N = %d steps in q.npy)", path, t->S, (long)t->L + t->N,
                     (long)t->L + 1 + t->max_new, t->L, t->N);
    cJSON_Delete(meta);
    if (rc) trace_free(t);
    return rc;
}

/* x as the cache stores it in dt (kb_elem_set) and reads it back */
static float round_to(kb_dtype dt, float x) {
    float cell; /* room for one element of any type */
    kb_elem_set(&cell, dt, 0, x);
    return kb_elem_get(&cell, dt, 0);
}

int trace_check_dtype(const char *dir, const kb_trace *t, kb_dtype dt, const char *from, kb_err *err) {
    if (dt == KB_F32) return 0; /* trace_read let finite values only through */
    struct {
        int file; /* index in kb_trace_files */
        const float *x;
        long d0, d1, d2;
    } a[] = {{0, t->k, t->L, t->Hkv, t->D}, {1, t->v, t->L, t->Hkv, t->D},
             {4, t->knew, t->N, t->Hkv, t->D}, {5, t->vnew, t->N, t->Hkv, t->D}};
    for (size_t f = 0; f < sizeof a / sizeof a[0]; f++) {
        size_t n = (size_t)a[f].d0 * a[f].d1 * a[f].d2, d1 = (size_t)a[f].d1, d2 = (size_t)a[f].d2;
        for (size_t i = 0; i < n; i++) {
            float x = a[f].x[i];
            if (isfinite(round_to(dt, x))) continue;
            char path[4200];
            join(path, sizeof path, dir, kb_trace_files[a[f].file]);
            return kb_fail(err, KB_EINPUT, "%s: element (%zu, %zu, %zu) is %g, beyond the range of the cache "
                           "type %s (from %s; largest finite value %g): it would be stored as infinite; "
                           "replay this trace with --kv-dtype f32", path, i / (d1 * d2), i / d2 % d1, i % d2, (double)x,
                           kb_dtype_name(dt), from, dt == KB_F16 ? 65504.0 : 3.3895313892515355e38);
        }
    }
    return 0;
}
