/* fuzz_npy.c - libFuzzer target: the .npy reader and the trace reader.
 *
 * One input, two uses:
 *   1. the whole input as one .npy file: npy_read; a refusal needs KB_EINPUT
 *      and a message naming the file; an accepted array has ndim 0..8, count =
 *      product of the shape, type 'f' or 'i', and every data byte readable;
 *      it is then written back (npy_encode) and read again: same type, shape
 *      and bytes (the writer's output is always accepted by the reader);
 *      npy_read_expect('f', 3) must agree with npy_read on type and rank;
 *   2. the input split at the separator "#KVBTRACE#" into up to seven parts,
 *      written as k.npy, v.npy, qwin.npy, q.npy, knew.npy, vnew.npy and
 *      meta.json of a trace folder (missing parts: no file): trace_read; a
 *      trace that loads has L >= 1, 1 <= W <= L, Hkv >= 1, Hq a multiple of
 *      Hkv, D >= 1, N >= 0, and all of its arrays are readable. */
#include "tests/fuzz/fuzz_common.h"
#include "harness/npy.h"
#include "methods/trace.h"

#define NPY_FZ_SEP "#KVBTRACE#"

static volatile uint64_t npy_fz_sink;

static void npy_fz_touch(const void *p, size_t bytes) {
    const uint8_t *b = p;
    for (size_t i = 0; i < bytes; i += 61) npy_fz_sink += b[i];
    if (bytes) npy_fz_sink += b[bytes - 1];
}

static void npy_fz_array(const char *path) {
    kb_npy a;
    kb_err err = {0};
    int rc = npy_read(path, &a, &err);
    if (rc) {
        FUZZ_ASSERT(rc == KB_EINPUT && strstr(err.msg, path), "rc %d '%s'", rc, err.msg);
        FUZZ_ASSERT(a.data == NULL, "data left after an error");
        return;
    }
    FUZZ_ASSERT(a.type == 'f' || a.type == 'i', "type %c", a.type);
    FUZZ_ASSERT(a.ndim >= 0 && a.ndim <= KB_NPY_MAX_DIMS, "ndim %d", a.ndim);
    size_t count = 1;
    for (int i = 0; i < a.ndim; i++) {
        FUZZ_ASSERT(a.shape[i] >= 0, "shape[%d] = %ld", i, a.shape[i]);
        count *= (size_t)a.shape[i];
    }
    FUZZ_ASSERT(count == a.count, "count %zu, shape product %zu", a.count, count);
    FUZZ_ASSERT(a.data != NULL, "no data buffer");
    npy_fz_touch(a.data, a.count * 4);

    /* written back and read again */
    char *img = NULL;
    size_t len = 0;
    npy_encode(a.data, a.type, a.ndim, a.shape, &img, &len);
    char p2[512];
    fuzz_path(p2, sizeof p2, "p.npy");
    fuzz_write(p2, img, len);
    free(img);
    kb_npy b;
    rc = npy_read(p2, &b, &err);
    FUZZ_ASSERT(rc == 0, "re-reading the writer's output: %s", err.msg);
    if (!rc) {
        int same = b.type == a.type && b.ndim == a.ndim && b.count == a.count &&
                   !memcmp(b.shape, a.shape, (size_t)a.ndim * sizeof *a.shape) &&
                   !memcmp(b.data, a.data, a.count * 4);
        FUZZ_ASSERT(same, "write/read round trip differs (ndim %d, count %zu)", a.ndim, a.count);
        npy_free(&b);
    }
    kb_npy c;
    rc = npy_read_expect(path, 'f', 3, &c, &err);
    FUZZ_ASSERT((rc == 0) == (a.type == 'f' && a.ndim == 3), "npy_read_expect rc %d for %c/%d",
                rc, a.type, a.ndim);
    if (rc) FUZZ_ASSERT(rc == KB_EINPUT && strstr(err.msg, path), "'%s'", err.msg);
    else npy_free(&c);
    npy_free(&a);
}

static void npy_fz_trace(const uint8_t *d, size_t n) {
    /* the parts in input order */
    static const char *const names[7] = {"k.npy", "v.npy", "qwin.npy", "q.npy", "knew.npy",
                                          "vnew.npy", "meta.json"};
    char dir[512], path[700];
    fuzz_path(dir, sizeof dir, "trace");
    fuzz_mkdir(dir);
    const uint8_t *p = d, *end = d + n;
    size_t sl = strlen(NPY_FZ_SEP);
    for (int part = 0; part < 7; part++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[part]);
        if (!p) {
            unlink(path);
            continue;
        }
        const uint8_t *q = memmem(p, (size_t)(end - p), NPY_FZ_SEP, sl);
        size_t l = q ? (size_t)(q - p) : (size_t)(end - p);
        fuzz_write(path, p, l);
        p = q ? q + sl : NULL;
    }
    kb_trace t;
    kb_err err = {0};
    int rc = trace_read(dir, &t, &err);
    if (rc) {
        FUZZ_ASSERT(rc == KB_EINPUT && strstr(err.msg, dir), "trace: rc %d '%s'", rc, err.msg);
        return;
    }
    FUZZ_ASSERT(t.L >= 1 && t.W >= 1 && t.W <= t.L && t.Hkv >= 1 && t.D >= 1 && t.N >= 0 &&
                    t.Hq >= t.Hkv && t.Hq % t.Hkv == 0,
                "trace L %d W %d N %d Hq %d Hkv %d D %d", t.L, t.W, t.N, t.Hq, t.Hkv, t.D);
    FUZZ_ASSERT(t.max_new >= 0 && t.S >= 1 && t.layer >= 0, "meta %d %d %d", t.max_new, t.S, t.layer);
    size_t kv = (size_t)t.L * t.Hkv * t.D, qw = (size_t)t.W * t.Hq * t.D;
    size_t qn = (size_t)t.N * t.Hq * t.D, kn = (size_t)t.N * t.Hkv * t.D;
    npy_fz_touch(t.k, kv * 4);
    npy_fz_touch(t.v, kv * 4);
    npy_fz_touch(t.qwin, qw * 4);
    if (qn) npy_fz_touch(t.q, qn * 4);
    if (kn) {
        npy_fz_touch(t.knew, kn * 4);
        npy_fz_touch(t.vnew, kn * 4);
    }
    trace_free(&t);
}

int fuzz_npy_one(const uint8_t *d, size_t n) {
    char path[512];
    fuzz_path(path, sizeof path, "in.npy");
    fuzz_write(path, d, n);
    npy_fz_array(path);
    npy_fz_trace(d, n);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fuzz_npy_one(d, n); }
#endif
