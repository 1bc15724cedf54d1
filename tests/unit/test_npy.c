/* test_npy.c - the strict .npy reader/writer (harness/npy.h) and replay
 * traces (methods/trace.h): round trips, versions 1.0/2.0/3.0, and every
 * malformation the reader must reject with a message naming the file and
 * the problem. (numpy-written files are read in tests/py/test_replay.py.) */
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "harness/npy.h"
#include "harness/version.h"
#include "methods/trace.h"

static char dir[256];

static void write_raw(const char *name, const char *hdr_dict, int major, size_t data_bytes) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    size_t hl = strlen(hdr_dict);
    fwrite("\x93NUMPY", 1, 6, f);
    unsigned char v[2] = {(unsigned char)major, 0};
    fwrite(v, 1, 2, f);
    if (major == 1) {
        unsigned char l[2] = {(unsigned char)(hl & 255), (unsigned char)(hl >> 8)};
        fwrite(l, 1, 2, f);
    } else {
        unsigned char l[4] = {(unsigned char)(hl & 255), (unsigned char)(hl >> 8), 0, 0};
        fwrite(l, 1, 4, f);
    }
    fwrite(hdr_dict, 1, hl, f);
    for (size_t i = 0; i < data_bytes; i++) fputc(0, f);
    fclose(f);
}

static void expect_bad(const char *name, const char *needle) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    kb_npy a;
    kb_err e = {0};
    int rc = npy_read(path, &a, &e);
    CHECK_MSG(rc == KB_EINPUT, "%s: rc %d", name, rc);
    CHECK_MSG(strstr(e.msg, path) && strstr(e.msg, needle), "%s: message '%s' lacks '%s'", name, e.msg, needle);
}

static void test_roundtrip(void) {
    float f[24];
    int32_t ints[6] = {-1, 0, 1, 2, 3, 2147483647};
    for (int i = 0; i < 24; i++) f[i] = (float)i * 0.5f - 3;
    long s3[3] = {2, 3, 4}, s1[1] = {6}, s0[1] = {0};
    char path[512];
    kb_err e = {0};
    kb_npy a;
    snprintf(path, sizeof path, "%s/a.npy", dir);
    CHECK_EQ_INT(npy_write(path, f, 'f', 3, s3, &e), 0);
    CHECK_EQ_INT(npy_read_expect(path, 'f', 3, &a, &e), 0);
    CHECK(a.shape[0] == 2 && a.shape[1] == 3 && a.shape[2] == 4 && a.count == 24);
    CHECK(!memcmp(a.data, f, sizeof f));
    npy_free(&a);
    /* header + data length is a multiple of 64 (format 1.0 alignment) */
    struct stat st;
    stat(path, &st);
    CHECK_EQ_INT((st.st_size - 24 * 4) % 64, 0);
    snprintf(path, sizeof path, "%s/b.npy", dir);
    CHECK_EQ_INT(npy_write(path, ints, 'i', 1, s1, &e), 0);
    CHECK_EQ_INT(npy_read_expect(path, 'i', 1, &a, &e), 0);
    CHECK(a.count == 6 && ((int32_t *)a.data)[5] == 2147483647);
    npy_free(&a);
    CHECK_EQ_INT(npy_read_expect(path, 'f', 1, &a, &e), KB_EINPUT);
    CHECK(strstr(e.msg, "expected dtype '<f4'") != NULL);
    CHECK_EQ_INT(npy_read_expect(path, 'i', 2, &a, &e), KB_EINPUT);
    CHECK(strstr(e.msg, "expected 2 dimensions, got shape (6)") != NULL);
    /* a 1-D shape is a Python 1-tuple, "(6,)": numpy's header is a dict literal
     * that np.load evaluates, and "(6)" is the integer 6, not a shape */
    char *enc;
    size_t enc_len;
    npy_encode(ints, 'i', 1, s1, &enc, &enc_len);
    CHECK(enc_len > 10 && memmem(enc, enc_len, "'shape': (6,)", 13) != NULL);
    free(enc);
    snprintf(path, sizeof path, "%s/c.npy", dir);
    CHECK_EQ_INT(npy_write(path, f, 'f', 1, s0, &e), 0);
    CHECK_EQ_INT(npy_read(path, &a, &e), 0);
    CHECK(a.ndim == 1 && a.count == 0);
    npy_free(&a);
    /* versions 2.0 and 3.0 (4-byte header length), keys in another order, double quotes */
    write_raw("v2.npy", "{\"shape\": (2,), 'fortran_order': False, 'descr': '<f4'}\n", 2, 8);
    write_raw("v3.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (1, 2), }   \n", 3, 8);
    snprintf(path, sizeof path, "%s/v2.npy", dir);
    CHECK_EQ_INT(npy_read(path, &a, &e), 0);
    CHECK(a.type == 'f' && a.ndim == 1 && a.shape[0] == 2);
    npy_free(&a);
    snprintf(path, sizeof path, "%s/v3.npy", dir);
    CHECK_EQ_INT(npy_read(path, &a, &e), 0);
    CHECK(a.type == 'i' && a.ndim == 2 && a.shape[1] == 2);
    npy_free(&a);
    write_raw("scalar.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (), }\n", 1, 4);
    snprintf(path, sizeof path, "%s/scalar.npy", dir);
    CHECK_EQ_INT(npy_read(path, &a, &e), 0);
    CHECK(a.ndim == 0 && a.count == 1);
    npy_free(&a);
}

static void test_malformed(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/magic.npy", dir);
    FILE *f = fopen(path, "wb");
    fputs("PK\x03\x04 not numpy at all", f);
    fclose(f);
    expect_bad("magic.npy", "bad magic");
    write_raw("ver.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }\n", 4, 4);
    expect_bad("ver.npy", "version 4.0 not supported");
    write_raw("f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1,), }\n", 1, 8);
    expect_bad("f8.npy", "descr '<f8' not supported");
    write_raw("be.npy", "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }\n", 1, 4);
    expect_bad("be.npy", "descr '>f4' not supported");
    write_raw("fo.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 2), }\n", 1, 16);
    expect_bad("fo.npy", "fortran_order is True");
    write_raw("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }\n", 1, 40);
    expect_bad("short.npy", "data holds 40 bytes, the shape needs 48");
    write_raw("long.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }\n", 1, 16);
    expect_bad("long.npy", "data holds 16 bytes, the shape needs 12");
    write_raw("nokey.npy", "{'descr': '<f4', 'shape': (3,), }\n", 1, 12);
    expect_bad("nokey.npy", "misses 'fortran_order'");
    write_raw("extra.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), 'x': 1}\n", 1, 12);
    expect_bad("extra.npy", "unexpected key 'x'");
    write_raw("dup.npy", "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (3,)}\n", 1, 12);
    expect_bad("dup.npy", "'descr' given twice");
    write_raw("shape.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, -1), }\n", 1, 12);
    expect_bad("shape.npy", "non-negative integers");
    write_raw("tuple.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': [3], }\n", 1, 12);
    expect_bad("tuple.npy", "'shape' must be a tuple");
    write_raw("notdict.npy", "['descr', '<f4']\n", 1, 0);
    expect_bad("notdict.npy", "not a dict");
    write_raw("trail.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), } junk\n", 1, 12);
    expect_bad("trail.npy", "unexpected text after the dict");
    /* header length pointing past the end of the file */
    snprintf(path, sizeof path, "%s/hlen.npy", dir);
    f = fopen(path, "wb");
    fwrite("\x93NUMPY\x01\x00\xff\x7f{", 1, 11, f);
    fclose(f);
    expect_bad("hlen.npy", "header length 32767 exceeds the file");
    /* one byte past it: the header of 1 byte ('{') says 2 */
    f = fopen(path, "wb");
    fwrite("\x93NUMPY\x01\x00\x02\x00{", 1, 11, f);
    fclose(f);
    expect_bad("hlen.npy", "header length 2 exceeds the file");
    kb_npy a;
    kb_err e = {0};
    snprintf(path, sizeof path, "%s/missing.npy", dir);
    CHECK_EQ_INT(npy_read(path, &a, &e), KB_EINPUT);
    CHECK(strstr(e.msg, "cannot open") != NULL);
}

/* Writes meta.json of trace directory td with `json`, then trace_read must
 * refuse the trace with a message containing `needle`. */
static void meta_refused(const char *td, const char *json, const char *needle) {
    char path[600];
    snprintf(path, sizeof path, "%s/meta.json", td);
    FILE *f = fopen(path, "w");
    fputs(json, f);
    fclose(f);
    kb_trace r;
    kb_err e = {0};
    CHECK_EQ_INT(trace_read(td, &r, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, needle), "%s: %s", json, e.msg);
}

static void test_trace(void) {
    int Hq = 4, Hkv = 2, D = 8, L = 20, W = 6;
    kb_kvstream kv[2];
    float k[8], v[8];
    for (int g = 0; g < Hkv; g++) {
        kvstream_init(&kv[g], KB_F32, D, L);
        for (int j = 0; j < L; j++) {
            for (int d = 0; d < D; d++) {
                k[d] = (float)(j * 100 + g * 10 + d);
                v[d] = -k[d];
            }
            kvstream_append_f32(&kv[g], k, v, j);
        }
    }
    float qwin[8 * 4 * 8];
    int32_t qp[8];
    for (int i = 0; i < 8 * Hq * D; i++) qwin[i] = (float)i;
    for (int i = 0; i < 8; i++) qp[i] = L - 8 + i;
    kb_prefill_view pv = {Hq, Hkv, D, kv, 8, qwin, qp};
    kb_trace t, r;
    kb_err e = {0};
    trace_init(&t, Hq, Hkv, D, 7, 27, 3);
    CHECK_EQ_INT(trace_set_prefill(&t, &pv, W, &e), 0);
    float q[32], kn[16], vn[16];
    for (int s = 0; s < 3; s++) {
        for (int i = 0; i < 32; i++) q[i] = (float)(s * 1000 + i);
        for (int i = 0; i < 16; i++) kn[i] = vn[i] = (float)(s * 7 + i);
        trace_add_step(&t, q, kn, vn);
    }
    cJSON *cell = cJSON_CreateObject();
    cJSON_AddStringToObject(cell, "method", "quest");
    trace_set_origin(&t, "tiny", "ab12", 5, "needle", "w120_d0_0", cell);
    char td[512];
    snprintf(td, sizeof td, "%s/trace", dir);
    CHECK_EQ_INT(trace_write(td, &t, &e), 0);
    CHECK_EQ_INT(trace_read(td, &r, &e), 0);
    /* where it comes from: this build's commit, then what trace_set_origin said */
    char *o = cJSON_PrintUnformatted(r.origin);
    char want[600];
    snprintf(want, sizeof want, "{\"git_commit\":\"%s\",\"model\":{\"name\":\"tiny\",\"sha256\":\"ab12\",\"layers\":5},"
             "\"task\":\"needle\",\"sample\":\"w120_d0_0\",\"cell\":{\"method\":\"quest\"}}", kb_git_desc());
    CHECK_MSG(o && !strcmp(o, want), "%s", o ? o : "(null)");
    free(o);
    CHECK(r.L == L && r.W == W && r.N == 3 && r.Hq == Hq && r.Hkv == Hkv && r.D == D);
    CHECK(r.max_new == 7 && r.S == 27 && r.layer == 3 && r.n_layers == 5);
    CHECK(!memcmp(r.k, t.k, sizeof(float) * L * Hkv * D) && !memcmp(r.v, t.v, sizeof(float) * L * Hkv * D));
    CHECK(r.k[(5 * Hkv + 1) * D + 2] == 5 * 100 + 10 + 2); /* [L][Hkv][D] layout */
    CHECK(r.qwin[0] == qwin[(8 - W) * Hq * D]);                /* the last W queries */
    CHECK(!memcmp(r.q, t.q, sizeof(float) * 3 * Hq * D) && !memcmp(r.vnew, t.vnew, sizeof(float) * 3 * Hkv * D));
    /* K/V values the cache type can hold: those that round to a finite value */
    CHECK_EQ_INT(trace_check_dtype(td, &r, KB_F16, "--kv-dtype", &e), 0);
    float *x = &r.vnew[(2 * Hkv + 1) * D + 4];
    *x = 65520.0f;
    CHECK_EQ_INT(trace_check_dtype(td, &r, KB_F16, "--kv-dtype", &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "vnew.npy: element (2, 1, 4) is 65520, beyond the range of the cache type f16 (from "
                            "--kv-dtype; largest finite value 65504)") && strstr(e.msg, "--kv-dtype f32"),
              "%s", e.msg);
    *x = -65519.0f; /* rounds to -65504 */
    CHECK_EQ_INT(trace_check_dtype(td, &r, KB_F16, "--kv-dtype", &e), 0);
    *x = 3.4e38f;
    CHECK_EQ_INT(trace_check_dtype(td, &r, KB_BF16, "meta.json kv_dtype", &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "cache type bf16 (from meta.json kv_dtype"), "%s", e.msg);
    CHECK_EQ_INT(trace_check_dtype(td, &r, KB_F32, "--kv-dtype", &e), 0);
    trace_free(&r);
    /* malformed traces: shapes that disagree, bad meta */
    char path[600];
    long bad[3] = {4, Hq, D};
    snprintf(path, sizeof path, "%s/knew.npy", td);
    CHECK_EQ_INT(npy_write(path, t.knew, 'f', 3, bad, &e), 0); /* Hq instead of Hkv */
    CHECK_EQ_INT(trace_read(td, &r, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "knew.npy: shape (4, 4, 8) does not match q.npy: N is 3 there, 4 here"), "%s", e.msg);
    CHECK_EQ_INT(trace_write(td, &t, &e), 0);
    snprintf(path, sizeof path, "%s/meta.json", td);
    meta_refused(td, "{\"max_new\": 7}", "meta.json: missing required key 'S'");
    FILE *f = fopen(path, "w"); /* an older trace's: no kv_dtype, no origin */
    fputs("{\"max_new\": 7, \"S\": 27, \"layer\": 3}", f);
    fclose(f);
    CHECK_EQ_INT(trace_read(td, &r, &e), 0);
    CHECK(r.origin == NULL && r.kv_dtype == -1 && r.n_layers == 0);
    trace_free(&r);
    /* the traced layer is one of the model's (model.layers, since 2026-12-05) */
    meta_refused(td, "{\"max_new\": 7, \"S\": 27, \"layer\": 3, \"model\": {\"name\": \"m\", \"sha256\": \"x\", \"layers\": 3}}",
                 "meta.json: key 'layer': 3, but the model has layers 0..2");
    meta_refused(td, "{\"max_new\": 7, \"S\": 27, \"model\": {\"name\": \"m\", \"sha256\": \"x\", \"layers\": 0}}",
                 "key 'model': key 'layers': expected an integer in [1, ");
    meta_refused(td, "{\"max_new\": 7, \"S\": 27, \"model\": {\"name\": \"m\", \"sha256\": \"x\", \"size\": 1}}",
                 "meta.json: key 'model': unknown key 'size'");
    meta_refused(td, "{\"max_new\": 7, \"S\": -3}", "key 'S': expected an integer in [1, ");
    meta_refused(td, "{\"max_new\": 7, ", "meta.json:1:");
    snprintf(path, sizeof path, "%s/q.npy", td);
    unlink(path);
    CHECK_EQ_INT(trace_read(td, &r, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "q.npy: cannot open"), "%s", e.msg);
    /* a write into a path that cannot be a directory leaves nothing behind */
    snprintf(path, sizeof path, "%s/afile", dir);
    f = fopen(path, "w");
    fclose(f);
    CHECK(trace_write(path, &t, &e) != 0);
    trace_free(&t);
    kvstream_free(&kv[0]);
    kvstream_free(&kv[1]);
}


/* trace_set_prefill's window and checks (docs/METHODS.md §9): W is cut to
 * the queries the view holds and to L, the window is the view's last W rows;
 * the cache type is the streams'; slots must hold positions 0..L-1. A trace
 * read back and written again keeps one git_commit, this build's. */
static void test_trace_prefill(void) {
    int Hq = 2, Hkv = 1, D = 4, L = 5, Wq = 8;
    kb_kvstream kv[1];
    float k[4], v[4];
    kvstream_init(&kv[0], KB_F16, D, L);
    for (int j = 0; j < L; j++) {
        for (int d = 0; d < D; d++) k[d] = v[d] = (float)(j * 10 + d);
        kvstream_append_f32(&kv[0], k, v, j);
    }
    float qwin[8 * 2 * 4];
    int32_t qp[8];
    for (int i = 0; i < Wq * Hq * D; i++) qwin[i] = (float)i;
    for (int i = 0; i < Wq; i++) qp[i] = i;
    kb_prefill_view pv = {Hq, Hkv, D, kv, Wq, qwin, qp};
    kb_trace t, r;
    kb_err e = {0};
    /* W 30 > Wq 8 > L 5: W = 5, the view's rows 3..7 */
    trace_init(&t, Hq, Hkv, D, 2, L + 2, 0);
    CHECK_EQ_INT(trace_set_prefill(&t, &pv, 30, &e), 0);
    CHECK_EQ_INT(t.W, L);
    CHECK_EQ_INT(t.kv_dtype, KB_F16);
    for (int i = 0; i < L * Hq * D; i++) CHECK_EQ_INT((int)t.qwin[i], (Wq - L) * Hq * D + i);
    char td[512];
    snprintf(td, sizeof td, "%s/trace_w", dir);
    CHECK_EQ_INT(trace_write(td, &t, &e), 0);
    CHECK_EQ_INT(trace_read(td, &r, &e), 0);
    CHECK(r.W == L && r.L == L && r.N == 0 && r.kv_dtype == KB_F16);
    trace_free(&r);
    /* Wq 3 < W 4 < L: W = 3, all the view holds */
    pv.Wq = 3;
    CHECK_EQ_INT(trace_set_prefill(&t, &pv, 4, &e), 0);
    CHECK_EQ_INT(t.W, 3);
    CHECK_EQ_INT((int)t.qwin[0], 0);
    /* W 3 < L 5 < Wq 6: the last 3 of the 6 the view holds */
    pv.Wq = 6;
    CHECK_EQ_INT(trace_set_prefill(&t, &pv, 3, &e), 0);
    CHECK_EQ_INT(t.W, 3);
    CHECK_EQ_INT((int)t.qwin[0], 3 * Hq * D);
    /* an f32 cache is named too (kv_dtype "f32", not left out) */
    kb_kvstream k32[1];
    kvstream_init(&k32[0], KB_F32, D, L);
    for (int j = 0; j < L; j++) kvstream_append_f32(&k32[0], k, v, j);
    kb_prefill_view p32 = {Hq, Hkv, D, k32, 3, qwin, qp};
    CHECK_EQ_INT(trace_set_prefill(&t, &p32, 3, &e), 0);
    CHECK_EQ_INT(trace_write(td, &t, &e), 0);
    CHECK_EQ_INT(trace_read(td, &r, &e), 0);
    CHECK_EQ_INT(r.kv_dtype, KB_F32);
    /* written again from what was read (its origin holds the git_commit it
     * was read with): one git_commit in meta.json, this build's */
    {
        kb_trace r2;
        char td2[600];
        snprintf(td2, sizeof td2, "%s/trace_w2", dir);
        CHECK_EQ_INT(trace_read(td, &r2, &e), 0);
        CHECK(r2.origin != NULL);
        CHECK_EQ_INT(trace_write(td2, &r2, &e), 0);
        char mp[700];
        snprintf(mp, sizeof mp, "%s/meta.json", td2);
        FILE *f = fopen(mp, "r");
        char buf[4096] = {0};
        size_t nb = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
        if (f) fclose(f);
        const char *g = strstr(buf, "\"git_commit\"");
        CHECK_MSG(nb > 0 && g && !strstr(g + 1, "\"git_commit\""), "%s", buf);
        trace_free(&r2);
    }
    trace_free(&r);
    /* a view whose slots are not positions 0..L-1 (a later turn's, an
     * evicted cache's) cannot be a trace */
    kv[0].pos[2] = 7;
    CHECK_EQ_INT(trace_set_prefill(&t, &pv, 3, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "prefill slot 2 of KV head 0 holds position 7"), "%s", e.msg);
    /* and leaves the trace as the f32 view made it (W 3 from its rows 0..2, f32), still
     * writable: until the review of 2026-12-06 it took the refused view's dtype and had
     * freed its window queries */
    CHECK(t.W == 3 && t.L == L && t.kv_dtype == KB_F32 && t.qwin && (int)t.qwin[0] == 0);
    CHECK_EQ_INT(trace_write(td, &t, &e), 0);
    /* a view of another shape */
    kb_prefill_view other = {Hq, Hkv, 8, kv, 3, qwin, qp};
    CHECK_EQ_INT(trace_set_prefill(&t, &other, 3, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "prefill view shape 2/1/8 differs from the trace's 2/1/4"), "%s", e.msg);
    trace_free(&t);
    kvstream_free(&kv[0]);
    kvstream_free(&k32[0]);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/kvbench_test_npy_%ld", (long)getpid());
    mkdir(dir, 0777);
    test_roundtrip();
    test_malformed();
    test_trace();
    test_trace_prefill();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd)) fprintf(stderr, "cleanup of %s failed\n", dir);
    return check_summary("npy");
}
