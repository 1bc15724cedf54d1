/* test_gguf.c - the GGUF reader on small files built byte by byte here (the
 * layout written from the spec, engine.md §1): a well-formed file and its
 * typed getters, then one explicit malformed case per check, each with the
 * words its message must contain. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "harness/engine/gguf.h"
#include "kernels/quant.h"

/* ---------------------------------------------------------- byte builder */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void put(buf *b, const void *src, size_t n) {
    if (b->n + n > b->cap) {
        b->cap = (b->n + n) * 2 + 64;
        b->p = realloc(b->p, b->cap);
    }
    memcpy(b->p + b->n, src, n);
    b->n += n;
}
static void put_u8(buf *b, uint8_t v) { put(b, &v, 1); }
static void put_u32(buf *b, uint32_t v) {
    uint8_t t[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(b, t, 4);
}
static void put_u64(buf *b, uint64_t v) {
    put_u32(b, (uint32_t)v);
    put_u32(b, (uint32_t)(v >> 32));
}
static void put_str(buf *b, const char *s) {
    put_u64(b, strlen(s));
    put(b, s, strlen(s));
}
static void put_f32(buf *b, float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(b, u);
}
static void pad_to(buf *b, size_t align) {
    while (b->n % align) put_u8(b, 0);
}

/* Knobs for the one file shape every case starts from. */
typedef struct spec {
    uint32_t magic, version;
    uint64_t n_tensors_field;   /* written count (UINT64_MAX = the real one) */
    int alignment;              /* 0 = no general.alignment key; -1 = key with value 0 */
    uint32_t alignment_type;    /* GGUF_T_U32 normally */
    uint64_t str_len_override;  /* nonzero: general.name's length field */
    int bad_value_type;         /* value type 13 for one key */
    int dup_key;
    int nested_depth;           /* arrays of arrays, this deep (1 = plain) */
    uint64_t nested_count;      /* count field of the outer nested array */
    uint32_t n_dims;            /* of tensor "b" */
    uint64_t ne0;               /* of tensor "b" (cols) */
    const char *name_b;
    uint32_t type_b;
    uint64_t offset_b_delta;    /* added to b's offset */
    int dup_tensor;
    size_t truncate;            /* nonzero: cut the file to this size */
    int big;                    /* tensor "b" may have any ne0 (else >= 4096 gets 64 bytes) */
} spec;

static spec spec_default(void) {
    return (spec){.magic = 0x46554747u, .version = 3, .n_tensors_field = UINT64_MAX,
                  .alignment = 0, .alignment_type = GGUF_T_U32, .nested_depth = 1, .n_dims = 2,
                  .ne0 = 64, .name_b = "blk.0.b", .type_b = GGML_Q4_1};
}

/* Builds: kvs (u8, i8, u16, i16, u32, i32, f32, bool, string, u64, i64, f64,
 * string array, i32 array, nested array, alignment), tensors "a" (F32 [8])
 * and "b" (type_b [ne0, 3]), then the aligned data. */
static buf build(const spec *s) {
    buf b = {0};
    uint64_t align = s->alignment > 0 ? (uint64_t)s->alignment : 32;
    put_u32(&b, s->magic);
    put_u32(&b, s->version);
    uint64_t n_tensors = s->dup_tensor ? 3 : 2;
    put_u64(&b, s->n_tensors_field == UINT64_MAX ? n_tensors : s->n_tensors_field);
    uint64_t n_kv = 15 + (s->alignment ? 1 : 0) + (s->dup_key ? 1 : 0);
    put_u64(&b, n_kv);
    put_str(&b, "t.u8"); put_u32(&b, GGUF_T_U8); put_u8(&b, 200);
    put_str(&b, "t.i8"); put_u32(&b, GGUF_T_I8); put_u8(&b, (uint8_t)-5);
    put_str(&b, "t.u16"); put_u32(&b, GGUF_T_U16); put_u8(&b, 0x34); put_u8(&b, 0x12);
    put_str(&b, "t.i16"); put_u32(&b, GGUF_T_I16); put_u8(&b, 0xfe); put_u8(&b, 0xff);
    put_str(&b, "t.u32"); put_u32(&b, GGUF_T_U32); put_u32(&b, 4000000000u);
    put_str(&b, "t.i32"); put_u32(&b, s->bad_value_type ? 13 : GGUF_T_I32); put_u32(&b, (uint32_t)-7);
    put_str(&b, "t.f32"); put_u32(&b, GGUF_T_F32); put_f32(&b, 0.25f);
    put_str(&b, "t.bool"); put_u32(&b, GGUF_T_BOOL); put_u8(&b, 1);
    put_str(&b, "general.name"); put_u32(&b, GGUF_T_STRING);
    if (s->str_len_override) {
        put_u64(&b, s->str_len_override);
        put(&b, "tiny", 4);
    } else {
        put_str(&b, "tiny");
    }
    put_str(&b, "t.u64"); put_u32(&b, GGUF_T_U64); put_u64(&b, 1ull << 40);
    put_str(&b, "t.i64"); put_u32(&b, GGUF_T_I64); put_u64(&b, (uint64_t)-3);
    put_str(&b, "t.f64"); put_u32(&b, GGUF_T_F64);
    double dv = 1e300;
    put(&b, &dv, 8);
    put_str(&b, "t.strs"); put_u32(&b, GGUF_T_ARRAY); put_u32(&b, GGUF_T_STRING); put_u64(&b, 3);
    put_str(&b, "zero"); put_str(&b, ""); put_str(&b, "two words");
    put_str(&b, "t.ints"); put_u32(&b, GGUF_T_ARRAY); put_u32(&b, GGUF_T_I32); put_u64(&b, 4);
    for (int i = 0; i < 4; i++) put_u32(&b, (uint32_t)(i * 10 - 1));
    /* nested: depth-1 levels of "array of one array", innermost u8 [2] */
    put_str(&b, "t.nested"); put_u32(&b, GGUF_T_ARRAY);
    for (int d = 1; d < s->nested_depth; d++) {
        put_u32(&b, GGUF_T_ARRAY);
        put_u64(&b, d == 1 && s->nested_count ? s->nested_count : 1);
    }
    put_u32(&b, GGUF_T_U8); put_u64(&b, 2); put_u8(&b, 1); put_u8(&b, 2);
    if (s->alignment) {
        put_str(&b, "general.alignment");
        put_u32(&b, s->alignment_type);
        uint32_t av = s->alignment > 0 ? (uint32_t)s->alignment : 0;
        if (s->alignment_type == GGUF_T_U64) put_u64(&b, av);
        else put_u32(&b, av);
    }
    if (s->dup_key) { put_str(&b, "t.u8"); put_u32(&b, GGUF_T_U8); put_u8(&b, 1); }

    /* tensor infos */
    uint64_t a_bytes = 8 * 4, a_pad = (a_bytes + align - 1) / align * align;
    put_str(&b, "a"); put_u32(&b, 1); put_u64(&b, 8); put_u32(&b, GGML_F32); put_u64(&b, 0);
    put_str(&b, s->name_b); put_u32(&b, s->n_dims);
    put_u64(&b, s->ne0);
    for (uint32_t d = 1; d < s->n_dims && d < 8; d++) put_u64(&b, d == 1 ? 3 : 1);
    put_u32(&b, s->type_b); put_u64(&b, a_pad + s->offset_b_delta);
    if (s->dup_tensor) { put_str(&b, "a"); put_u32(&b, 1); put_u64(&b, 8); put_u32(&b, GGML_F32); put_u64(&b, 0); }
    pad_to(&b, align);
    /* data: a = 0..7, then b (bytes i % 251) */
    for (int i = 0; i < 8; i++) put_f32(&b, (float)i);
    pad_to(&b, align);
    const kb_qtype *qt = kb_qtype_info(s->type_b);
    uint64_t b_bytes = qt && s->ne0 % (uint64_t)qt->blck == 0 && (s->ne0 < 4096 || s->big)
                           ? s->ne0 / (uint64_t)qt->blck * (uint64_t)qt->bytes * 3 : 64;
    for (uint64_t i = 0; i < b_bytes; i++) put_u8(&b, (uint8_t)(i % 251));
    pad_to(&b, align);
    if (s->truncate && s->truncate < b.n) b.n = s->truncate;
    return b;
}

/* Opens the spec'd file from memory; returns the code, message in err. */
static int open_spec(const spec *s, kb_err *err) {
    buf b = build(s);
    gguf_file *f = NULL;
    kb_err_clear(err);
    int rc = gguf_open_mem(b.p, b.n, "mem.gguf", &f, err);
    if (rc == 0) gguf_close(f);
    else CHECK_MSG(f == NULL, "out must be NULL on failure");
    free(b.p);
    return rc;
}

/* Expects KB_EINPUT and a message starting with the path and containing each word. */
#define EXPECT_BAD(s, ...)                                                                     \
    do {                                                                                       \
        kb_err e_;                                                                             \
        int rc_ = open_spec(&(s), &e_);                                                        \
        CHECK_EQ_INT(rc_, KB_EINPUT);                                                          \
        CHECK_MSG(!strncmp(e_.msg, "mem.gguf: ", 10), "message '%s' should start with the path", e_.msg); \
        const char *words_[] = {__VA_ARGS__};                                                  \
        for (size_t w_ = 0; w_ < KB_ARRAY_LEN(words_); w_++)                                   \
            CHECK_MSG(strstr(e_.msg, words_[w_]) != NULL, "message '%s' lacks '%s'", e_.msg,   \
                      words_[w_]);                                                             \
    } while (0)

/* ------------------------------------------------------------------ tests */

/* gguf_print's output (the caller frees it). */
static char *printed(const gguf_file *f) {
    char *out = NULL;
    size_t outn = 0;
    FILE *mf = open_memstream(&out, &outn);
    gguf_print(f, mf);
    fclose(mf);
    return out;
}

static void test_good_file(void) {
    spec s = spec_default();
    buf b = build(&s);
    gguf_file *f;
    kb_err err = {0};
    CHECK_EQ_INT(gguf_open_mem(b.p, b.n, "mem.gguf", &f, &err), 0);
    if (!f) {
        fprintf(stderr, "  %s\n", err.msg);
        free(b.p);
        return;
    }
    CHECK_EQ_INT(f->version, 3);
    CHECK_EQ_INT(f->n_kv, 15);
    CHECK_EQ_INT(f->n_tensors, 2);
    CHECK_EQ_INT(f->alignment, 32);
    CHECK_EQ_INT(f->data_offset % 32, 0);
    uint32_t u;
    int64_t i64;
    float fl;
    int bl;
    char *str;
    CHECK_EQ_INT(gguf_get_u32(f, "t.u8", &u, &err), 0);
    CHECK_EQ_INT(u, 200);
    CHECK_EQ_INT(gguf_get_u32(f, "t.u16", &u, &err), 0);
    CHECK_EQ_INT(u, 0x1234);
    CHECK_EQ_INT(gguf_get_u32(f, "t.u32", &u, &err), 0);
    CHECK_EQ_INT(u, 4000000000u);
    CHECK_EQ_INT(gguf_get_u32(f, "t.i32", &u, &err), KB_EINPUT); /* -7 */
    CHECK(strstr(err.msg, "t.i32") && strstr(err.msg, "negative"));
    CHECK_EQ_INT(gguf_get_u32(f, "t.u64", &u, &err), KB_EINPUT);  /* 2^40 */
    CHECK(strstr(err.msg, "does not fit"));
    CHECK_EQ_INT(gguf_get_u32(f, "t.f32", &u, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "t.f32") && strstr(err.msg, "f32") && strstr(err.msg, "integer"));
    u = 77;
    CHECK_EQ_INT(gguf_get_u32(f, "absent.key", &u, &err), 1);
    CHECK_EQ_INT(u, 77);
    CHECK_EQ_INT(gguf_get_i64(f, "t.i8", &i64, &err), 0);
    CHECK_EQ_INT(i64, -5);
    CHECK_EQ_INT(gguf_get_i64(f, "t.i16", &i64, &err), 0);
    CHECK_EQ_INT(i64, -2);
    CHECK_EQ_INT(gguf_get_i64(f, "t.i64", &i64, &err), 0);
    CHECK_EQ_INT(i64, -3);
    CHECK_EQ_INT(gguf_get_i64(f, "t.u64", &i64, &err), 0);
    CHECK_EQ_INT(i64, 1ll << 40);
    CHECK_EQ_INT(gguf_get_f32(f, "t.f32", &fl, &err), 0);
    CHECK(fl == 0.25f);
    CHECK_EQ_INT(gguf_get_f32(f, "t.i32", &fl, &err), 0);
    CHECK(fl == -7.0f);
    CHECK_EQ_INT(gguf_get_f32(f, "t.f64", &fl, &err), 0);
    CHECK(fl == (float)1e300); /* inf: the caller range-checks */
    CHECK_EQ_INT(gguf_get_f32(f, "general.name", &fl, &err), KB_EINPUT);
    CHECK_EQ_INT(gguf_get_bool(f, "t.bool", &bl, &err), 0);
    CHECK_EQ_INT(bl, 1);
    CHECK_EQ_INT(gguf_get_bool(f, "t.u8", &bl, &err), KB_EINPUT); /* 200 is not 0/1 */
    CHECK_EQ_INT(gguf_get_str(f, "general.name", &str, &err), 0);
    CHECK_STREQ(str, "tiny");
    free(str);
    CHECK_EQ_INT(gguf_get_str(f, "t.u8", &str, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "t.u8") && strstr(err.msg, "string"));

    const gguf_kv *kv;
    CHECK_EQ_INT(gguf_get_arr(f, "t.strs", GGUF_T_STRING, &kv, &err), 0);
    CHECK_EQ_INT(kv->arr_n, 3);
    gguf_str e2 = gguf_arr_str(kv, 2), e1 = gguf_arr_str(kv, 1), e0 = gguf_arr_str(kv, 0);
    CHECK(e2.len == 9 && !memcmp(e2.s, "two words", 9));
    CHECK(e1.len == 0);
    CHECK(e0.len == 4 && !memcmp(e0.s, "zero", 4));
    CHECK_EQ_INT(gguf_arr_str(kv, 3).len, 0); /* out of range: empty */
    CHECK_EQ_INT(gguf_get_arr(f, "t.strs", GGUF_T_I32, &kv, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "array of string") && strstr(err.msg, "array of i32"));
    CHECK_EQ_INT(gguf_get_arr(f, "t.ints", GGUF_T_I32, &kv, &err), 0);
    CHECK(gguf_arr_num(kv, 0) == -1 && gguf_arr_num(kv, 3) == 29);
    CHECK(isnan(gguf_arr_num(kv, 4)));
    CHECK_EQ_INT(gguf_get_arr(f, "t.ints", GGUF_T_ANY_NUMBER, &kv, &err), 0);
    CHECK_EQ_INT(gguf_get_arr(f, "t.strs", GGUF_T_ANY_NUMBER, &kv, &err), KB_EINPUT);
    CHECK_EQ_INT(gguf_get_arr(f, "t.u8", GGUF_T_U8, &kv, &err), KB_EINPUT);
    CHECK_EQ_INT(gguf_get_arr(f, "nope", GGUF_T_U8, &kv, &err), 1);
    kv = gguf_find_kv(f, "t.nested");
    CHECK(kv && kv->type == GGUF_T_ARRAY && kv->arr_type == GGUF_T_U8 && kv->arr_n == 2);
    CHECK(gguf_find_kv(f, "t") == NULL && gguf_find_kv(f, "") == NULL);

    const gguf_tensor *ta = gguf_find_tensor(f, "a"), *tb = gguf_find_tensor(f, "blk.0.b");
    CHECK(ta && tb && !gguf_find_tensor(f, "blk.0"));
    if (ta && tb) {
        CHECK_EQ_INT(ta->n_dims, 1);
        CHECK_EQ_INT(ta->ne[0], 8);
        CHECK_EQ_INT(ta->ne[1], 1);
        CHECK_EQ_INT(ta->nbytes, 32);
        CHECK(ta->data == b.p + f->data_offset);
        float v7;
        memcpy(&v7, (const uint8_t *)ta->data + 28, 4);
        CHECK(v7 == 7.0f);
        CHECK_EQ_INT(tb->type, GGML_Q4_1);
        CHECK_EQ_INT(tb->ne[0], 64);
        CHECK_EQ_INT(tb->ne[1], 3);
        CHECK_EQ_INT(tb->nbytes, 2 * 20 * 3);
        CHECK_EQ_INT(tb->offset, 32);
        CHECK_EQ_INT(((const uint8_t *)tb->data)[5], 5);
    }
    /* gguf_print lists every key and tensor */
    char *out = printed(f);
    CHECK(strstr(out, "kv 8 general.name string \"tiny\"\n") != NULL);
    CHECK(strstr(out, "kv 12 t.strs array[string] n=3 [\"zero\", \"\", \"two words\"]\n") != NULL);
    CHECK(strstr(out, "kv 5 t.i32 i32 -7\n") != NULL);
    CHECK(strstr(out, "kv 6 t.f32 f32 0.25\n") != NULL);
    CHECK(strstr(out, "kv 14 t.nested array[u8] n=2 [1, 2]\n") != NULL);
    CHECK(strstr(out, "tensor 1 blk.0.b Q4_1 64x3 offset=32 bytes=120\n") != NULL);
    free(out);
    gguf_close(f);
    free(b.p);

    /* version 2, alignment 64, nested arrays 8 deep are all fine */
    s.version = 2;
    s.alignment = 64;
    s.nested_depth = 8;
    b = build(&s);
    CHECK_EQ_INT(gguf_open_mem(b.p, b.n, "mem.gguf", &f, &err), 0);
    if (f) {
        CHECK_EQ_INT(f->alignment, 64);
        CHECK_EQ_INT(f->data_offset % 64, 0);
        CHECK_EQ_INT(gguf_find_tensor(f, "blk.0.b")->offset, 64);
        char *o2 = printed(f);
        CHECK(strstr(o2, "t.nested array[array] n=1 [array[array] n=1]") != NULL);
        free(o2);
        gguf_close(f);
    } else {
        fprintf(stderr, "  %s\n", err.msg);
    }
    free(b.p);
}

static void test_malformed(void) {
    spec s;
    s = spec_default(); s.magic = 0x46554746u; EXPECT_BAD(s, "not a GGUF file", "GGUF");
    s = spec_default(); s.version = 1; EXPECT_BAD(s, "version 1", "expected version 2 or 3");
    s = spec_default(); s.version = 4; EXPECT_BAD(s, "version 4", "expected 2 or 3");
    s = spec_default(); s.version = 0x03000000u; EXPECT_BAD(s, "big-endian");
    s = spec_default(); s.n_tensors_field = 1ull << 60; EXPECT_BAD(s, "tensor count", "cannot fit");
    s = spec_default(); s.n_tensors_field = 3; EXPECT_BAD(s, "tensor #2"); /* reads data as an info */
    s = spec_default(); s.str_len_override = 1ull << 62;
    EXPECT_BAD(s, "general.name", "length 4611686018427387904", "remain");
    s = spec_default(); s.str_len_override = 5000; EXPECT_BAD(s, "metadata key #8 'general.name'", "length 5000");
    s = spec_default(); s.bad_value_type = 1; EXPECT_BAD(s, "t.i32", "value type 13", "unknown");
    s = spec_default(); s.dup_key = 1; EXPECT_BAD(s, "t.u8", "appears twice");
    s = spec_default(); s.nested_depth = 2; s.nested_count = 1ull << 61;
    EXPECT_BAD(s, "t.nested", "array length 2305843009213693952", "cannot fit");
    s = spec_default(); s.nested_depth = 9; EXPECT_BAD(s, "t.nested", "nested more than 8");
    s = spec_default(); s.n_dims = 5; EXPECT_BAD(s, "tensor 'blk.0.b'", "n_dims is 5", "1..4");
    s = spec_default(); s.n_dims = 0; EXPECT_BAD(s, "n_dims is 0");
    s = spec_default();
    s.name_b = "n2345678901234567890123456789012345678901234567890123456789012345"; /* 65 bytes */
    EXPECT_BAD(s, "has 65 bytes", "expected 1..64");
    s = spec_default(); s.name_b = ""; EXPECT_BAD(s, "tensor #1", "has 0 bytes");
    s = spec_default(); s.offset_b_delta = 4; EXPECT_BAD(s, "blk.0.b", "offset 36", "not a multiple of the alignment 32");
    s = spec_default(); s.offset_b_delta = 1ull << 20; EXPECT_BAD(s, "blk.0.b", "past the end of the file");
    s = spec_default(); s.offset_b_delta = UINT64_MAX - 63; /* offset 2^64 - 32 */
    EXPECT_BAD(s, "blk.0.b", "past the end");
    s = spec_default(); s.type_b = 99; EXPECT_BAD(s, "tensor 'blk.0.b'", "unknown ggml type id 99");
    s = spec_default(); s.type_b = 4; EXPECT_BAD(s, "unknown ggml type id 4");
    s = spec_default(); s.ne0 = 48; EXPECT_BAD(s, "blk.0.b", "48", "not a multiple", "block size 32");
    s = spec_default(); s.ne0 = 0; EXPECT_BAD(s, "ne[0] is 0");
    s = spec_default(); s.ne0 = 1ull << 62; s.type_b = GGML_F32; EXPECT_BAD(s, "too large"); /* x4 bytes */
    s = spec_default(); s.ne0 = 1ull << 62; s.type_b = GGML_Q8_0; s.n_dims = 4; EXPECT_BAD(s, "too large"); /* 3 * 2^62 elements */
    s = spec_default(); s.ne0 = 1ull << 40; s.type_b = GGML_F32; EXPECT_BAD(s, "blk.0.b", "past the end");
    s = spec_default(); s.dup_tensor = 1; EXPECT_BAD(s, "tensor 'a' appears twice");
    s = spec_default(); s.alignment = 48; EXPECT_BAD(s, "general.alignment is 48", "power of two");
    s = spec_default(); s.alignment = -1; EXPECT_BAD(s, "general.alignment is 0", "power of two");
    s = spec_default(); s.alignment = 64; s.alignment_type = GGUF_T_U64;
    EXPECT_BAD(s, "general.alignment has type u64");
    /* truncations: in the header, in the metadata, in the infos, in the data */
    spec full = spec_default();
    buf whole = build(&full);
    size_t n = whole.n, data_end = n;
    gguf_file *f;
    kb_err err;
    if (gguf_open_mem(whole.p, whole.n, "mem.gguf", &f, &err) == 0) {
        const gguf_tensor *tb = gguf_find_tensor(f, "blk.0.b");
        data_end = (size_t)((const uint8_t *)tb->data + tb->nbytes - whole.p);
        gguf_close(f);
    }
    CHECK(data_end < n); /* the file ends with padding */
    free(whole.p);
    s = spec_default(); s.truncate = 3; EXPECT_BAD(s, "not a GGUF file");
    s = spec_default(); s.truncate = 6; EXPECT_BAD(s, "version", "needs 4 bytes");
    s = spec_default(); s.truncate = 20; EXPECT_BAD(s, "metadata key count", "needs 8 bytes");
    s = spec_default(); s.truncate = 100; EXPECT_BAD(s, "metadata key count 15 cannot fit");
    s = spec_default(); s.truncate = 250; EXPECT_BAD(s, "metadata key #");
    s = spec_default(); s.truncate = data_end - 1; EXPECT_BAD(s, "blk.0.b", "past the end");
    int bad = 0;
    for (size_t cut = 1; cut < n; cut++) { /* every prefix without all data fails cleanly */
        s = spec_default();
        s.truncate = cut;
        kb_err e;
        int rc = open_spec(&s, &e);
        if (cut < data_end ? rc != KB_EINPUT || strncmp(e.msg, "mem.gguf: ", 10) : rc != 0) bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

/* A file of header + one metadata entry (key k, then the value bytes as
 * given) and no tensors, ending right after the value: nothing follows it,
 * so every read that ends exactly at the end of the file must be taken
 * (docs/GGUF.md: lengths are checked against the bytes that remain). */
static buf one_kv_file(const char *key, size_t key_len, uint32_t type, const void *val, size_t val_len) {
    buf b = {0};
    put_u32(&b, 0x46554747u);
    put_u32(&b, 3);
    put_u64(&b, 0); /* tensors */
    put_u64(&b, 1); /* keys */
    put_u64(&b, key_len);
    put(&b, key, key_len);
    put_u32(&b, type);
    put(&b, val, val_len);
    return b;
}

static int open_buf(buf *b, gguf_file **f, kb_err *err) {
    kb_err_clear(err);
    return gguf_open_mem(b->p, b->n, "mem.gguf", f, err);
}

/* A file whose one key "k" holds the u64 max, then max + 1, read with
 * gguf_get_u32 (as_i64 0) or gguf_get_i64 (1): max is taken, max + 1 refused
 * with the message too_big. */
static void check_u64_limit(uint64_t max, int as_i64, const char *too_big) {
    for (uint64_t v = max; v <= max + 1; v++) {
        uint8_t le[8];
        for (int i = 0; i < 8; i++) le[i] = (uint8_t)(v >> (8 * i));
        buf b = one_kv_file("k", 1, GGUF_T_U64, le, 8);
        gguf_file *f = NULL;
        kb_err err = {0};
        CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
        if (f) {
            uint32_t u = 0;
            int64_t i64 = 0;
            int rc = as_i64 ? gguf_get_i64(f, "k", &i64, &err) : gguf_get_u32(f, "k", &u, &err);
            if (v == max) {
                CHECK_EQ_INT(rc, 0);
                CHECK(as_i64 ? (uint64_t)i64 == max : u == max);
            } else {
                CHECK_EQ_INT(rc, KB_EINPUT);
                CHECK_MSG(strstr(err.msg, too_big) != NULL, "%s", err.msg);
            }
            gguf_close(f);
        }
        free(b.p);
    }
}

static void test_bounds(void) {
    gguf_file *f;
    kb_err err;
    /* a u32 scalar as the last 4 bytes of the file */
    uint8_t u32v[4] = {7, 0, 0, 0};
    buf b = one_kv_file("k", 1, GGUF_T_U32, u32v, 4);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) {
        uint32_t u = 0;
        CHECK_EQ_INT(gguf_get_u32(f, "k", &u, &err), 0);
        CHECK_EQ_INT(u, 7);
        gguf_close(f);
    }
    free(b.p);
    /* an array of 3 u8 whose last element is the file's last byte */
    uint8_t arr[15] = {GGUF_T_U8, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 10, 20, 30};
    b = one_kv_file("k", 1, GGUF_T_ARRAY, arr, sizeof arr);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) {
        const gguf_kv *kv;
        CHECK_EQ_INT(gguf_get_arr(f, "k", GGUF_T_U8, &kv, &err), 0);
        CHECK(kv->arr_n == 3 && gguf_arr_num(kv, 2) == 30);
        gguf_close(f);
    }
    free(b.p);
    /* an array of 2 empty strings (8 bytes each) up to the end of the file */
    uint8_t sarr[28] = {GGUF_T_STRING, 0, 0, 0, 2};
    b = one_kv_file("k", 1, GGUF_T_ARRAY, sarr, sizeof sarr);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) gguf_close(f);
    free(b.p);

    /* a u64 read as u32 (2^32 - 1 fits, 2^32 does not) and as i64 (2^63 - 1 fits, 2^63 does not) */
    check_u64_limit(0xffffffffull, 0, "key k = 4294967296 does not fit in u32");
    check_u64_limit(0x7fffffffffffffffull, 1, "key k = 9223372036854775808 does not fit in i64");
    /* gguf_get_bool of an integer: 0 and 1 only (docs/GGUF.md) */
    for (uint8_t v = 0; v <= 2; v++) {
        b = one_kv_file("k", 1, GGUF_T_U8, &v, 1);
        CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
        if (f) {
            int bl = -1;
            CHECK_EQ_INT(gguf_get_bool(f, "k", &bl, &err), v <= 1 ? 0 : KB_EINPUT);
            if (v <= 1) CHECK_EQ_INT(bl, v);
            gguf_close(f);
        }
        free(b.p);
    }

    /* info prints an f32 with %.9g (docs/GGUF.md): 1012.7109375 (0x447d2d80)
     * needs all 9 digits to read back (%.8g gives 1012.7109, another f32) */
    uint8_t f32v[4] = {0x80, 0x2d, 0x7d, 0x44};
    b = one_kv_file("k", 1, GGUF_T_F32, f32v, 4);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) {
        char *out = printed(f);
        CHECK_MSG(strstr(out, "\nkv 0 k f32 1012.71094\n") != NULL, "%s", out);
        free(out);
        gguf_close(f);
    }
    free(b.p);

    /* a string value of 120 bytes prints whole; 121 show 120, then "... (121 bytes)" */
    for (int len = 120; len <= 121; len++) {
        uint8_t sv[8 + 121];
        for (int i = 0; i < 8; i++) sv[i] = (uint8_t)(i ? 0 : len);
        memset(sv + 8, 's', 121);
        b = one_kv_file("k", 1, GGUF_T_STRING, sv, 8 + (size_t)len);
        CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
        if (f) {
            char *out = printed(f), want[160];
            snprintf(want, sizeof want, "\nkv 0 k string \"%.120s\"%s\n", (const char *)sv + 8,
                     len == 120 ? "" : "... (121 bytes)");
            CHECK_MSG(strstr(out, want) != NULL, "'%s' lacks '%s'", out, want);
            free(out);
            gguf_close(f);
        }
        free(b.p);
    }

    /* a space in a key prints as \x20 (docs/GGUF.md: KEY never contains spaces) */
    b = one_kv_file("a b", 3, GGUF_T_U32, u32v, 4);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) {
        char *out = printed(f);
        CHECK_MSG(strstr(out, "\nkv 0 a\\x20b u32 7\n") != NULL, "%s", out);
        free(out);
        gguf_close(f);
    }
    free(b.p);

    /* an array of two arrays of strings: info walks over the first (12 + 8 + 2
     * bytes) to print the second's header */
    buf v = {0};
    put_u32(&v, GGUF_T_ARRAY); put_u64(&v, 2);
    put_u32(&v, GGUF_T_STRING); put_u64(&v, 1); put_str(&v, "ab");
    put_u32(&v, GGUF_T_STRING); put_u64(&v, 3); put_str(&v, "c"); put_str(&v, ""); put_str(&v, "d");
    b = one_kv_file("k", 1, GGUF_T_ARRAY, v.p, v.n);
    free(v.p);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) {
        char *out = printed(f);
        CHECK_MSG(strstr(out, "\nkv 0 k array[array] n=2 [array[string] n=1, array[string] n=3]\n") != NULL, "%s", out);
        free(out);
        gguf_close(f);
    }
    free(b.p);

    /* a bool array's elements as numbers: 0 or 1, any nonzero byte true (as gguf_get_bool) */
    uint8_t barr[15] = {GGUF_T_BOOL, 0, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 0, 1, 2};
    b = one_kv_file("k", 1, GGUF_T_ARRAY, barr, sizeof barr);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) {
        const gguf_kv *kv;
        CHECK_EQ_INT(gguf_get_arr(f, "k", GGUF_T_ANY_NUMBER, &kv, &err), 0);
        CHECK(gguf_arr_num(kv, 0) == 0 && gguf_arr_num(kv, 1) == 1 && gguf_arr_num(kv, 2) == 1);
        gguf_close(f);
    }
    free(b.p);

    /* keys: 1..65535 bytes (docs/GGUF.md) */
    char *key = malloc(65536);
    memset(key, 'k', 65536);
    b = one_kv_file(key, 65535, GGUF_T_U32, u32v, 4);
    CHECK_EQ_INT(open_buf(&b, &f, &err), 0);
    if (f) gguf_close(f);
    free(b.p);
    b = one_kv_file(key, 65536, GGUF_T_U32, u32v, 4);
    CHECK_EQ_INT(open_buf(&b, &f, &err), KB_EINPUT);
    CHECK_MSG(strstr(err.msg, "has length 65536") && strstr(err.msg, "expected 1..65535"), "%s", err.msg);
    free(b.p);
    b = one_kv_file("", 0, GGUF_T_U32, u32v, 4);
    CHECK_EQ_INT(open_buf(&b, &f, &err), KB_EINPUT);
    CHECK_MSG(strstr(err.msg, "has length 0") && strstr(err.msg, "expected 1..65535"), "%s", err.msg);
    free(b.p);
    /* a key with a NUL is shown by its first 80 bytes, then "..." */
    key[99] = 0;
    b = one_kv_file(key, 100, GGUF_T_U32, u32v, 4);
    CHECK_EQ_INT(open_buf(&b, &f, &err), KB_EINPUT);
    char want[200];
    snprintf(want, sizeof want, "'%.80s...' at byte 24 contains a NUL byte", key);
    CHECK_MSG(strstr(err.msg, want) != NULL, "message '%s' lacks \"%s\"", err.msg, want);
    free(b.p);
    free(key);

    /* a tensor name with a NUL byte is refused (docs/GGUF.md) */
    b = (buf){0};
    put_u32(&b, 0x46554747u);
    put_u32(&b, 3);
    put_u64(&b, 1); /* tensors */
    put_u64(&b, 0); /* keys */
    put_u64(&b, 3);
    put(&b, "a\0b", 3);
    put_u32(&b, 1); put_u64(&b, 8); put_u32(&b, GGML_F32); put_u64(&b, 0);
    pad_to(&b, 32);
    for (int i = 0; i < 8; i++) put_f32(&b, (float)i);
    CHECK_EQ_INT(open_buf(&b, &f, &err), KB_EINPUT);
    CHECK_MSG(strstr(err.msg, "tensor #0 at byte 24: name 'a\\x00b' contains a NUL byte") != NULL, "%s", err.msg);
    free(b.p);

    /* tensor names: 64 bytes are taken (65 are refused in test_malformed) */
    spec s = spec_default();
    s.name_b = "n234567890123456789012345678901234567890123456789012345678901234"; /* 64 bytes */
    kb_err e;
    CHECK_EQ_INT(open_spec(&s, &e), 0);
}

/* Writes the spec'd file as dir/name in a new temporary dir (the caller
 * removes both) and returns 0 with its image in *b (caller frees b->p); on
 * failure records a failed check and returns -1 with nothing to free. */
static int write_spec(const spec *s, const char *name, char dir[32], char path[256], buf *b) {
    *b = (buf){0};
    snprintf(dir, 32, "/tmp/kvbench-test-gguf-XXXXXX");
    if (!mkdtemp(dir)) {
        CHECK_MSG(0, "cannot create a temporary directory");
        return -1;
    }
    snprintf(path, 256, "%s/%s", dir, name);
    *b = build(s);
    FILE *fp = fopen(path, "wb");
    int ok = fp && fwrite(b->p, 1, b->n, fp) == b->n;
    if (fp) ok &= fclose(fp) == 0;
    if (!ok) {
        CHECK_MSG(0, "cannot write %s", path);
        unlink(path);
        rmdir(dir);
        free(b->p);
        *b = (buf){0};
        return -1;
    }
    return 0;
}

static void test_files(void) {
    char dir[32], path[256];
    spec s = spec_default();
    buf b;
    gguf_file *f;
    kb_err err = {0};
    if (write_spec(&s, "ok.gguf", dir, path, &b)) return;
    CHECK_EQ_INT(gguf_open(path, &f, &err), 0);
    if (f) {
        CHECK_EQ_INT(f->size, b.n);
        CHECK(f->map != NULL && !memcmp(f->map, b.p, b.n));
        const gguf_tensor *t = gguf_find_tensor(f, "a");
        CHECK(t && (const uint8_t *)t->data == f->map + f->data_offset);
        gguf_close(f);
    }
    /* the same file cut short: the path leads the message */
    CHECK_EQ_INT(truncate(path, (off_t)b.n - 10), 0);
    CHECK_EQ_INT(gguf_open(path, &f, &err), KB_EINPUT);
    CHECK(f == NULL && !strncmp(err.msg, path, strlen(path)) && strstr(err.msg, "past the end"));
    CHECK_EQ_INT(truncate(path, 0), 0);
    CHECK_EQ_INT(gguf_open(path, &f, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "empty file") != NULL);
    unlink(path);
    CHECK_EQ_INT(gguf_open(path, &f, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "cannot open") != NULL);
    CHECK_EQ_INT(gguf_open(dir, &f, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "not a regular file") != NULL);
    rmdir(dir);
    free(b.p);
}

static long rss_kib(void) {
    FILE *fp = fopen("/proc/self/status", "r");
    char line[256];
    long v = -1;
    while (fp && fgets(line, sizeof line, fp))
        if (!strncmp(line, "VmRSS:", 6)) v = strtol(line + 6, NULL, 10);
    if (fp) fclose(fp);
    return v;
}

/* gguf_load_data: a mapped file's data section (here 12 MiB) moves to
 * anonymous memory with the same bytes and alignment, every tensor follows,
 * and resident memory grows by about one copy, under 1.5 (2 MiB pages round
 * the 12 MiB up to 14; ASan's shadow adds 1/8): the copied file pages are
 * dropped, without which it grows by two copies. A buffer from
 * gguf_open_mem stays where it is. */
static void test_load_data(void) {
    char dir[32], path[256];
    spec s = spec_default();
    s.big = 1;
    s.type_b = GGML_F32;
    s.ne0 = 1u << 20; /* b: [2^20, 3] f32 = 12 MiB */
    buf b;
    gguf_file *f;
    kb_err err = {0};
    if (write_spec(&s, "big.gguf", dir, path, &b)) return;
    CHECK_EQ_INT(gguf_open(path, &f, &err), 0);
    if (f) {
        size_t n = f->size - f->data_offset;
        long before = rss_kib();
        CHECK_EQ_INT(gguf_load_data(f), 1);
        long grew = rss_kib() - before;
        CHECK_MSG(grew >= 0 && (double)grew * 1024 < 1.5 * (double)n,
                  "RSS grew by %ld KiB for a %zu-byte copy (the map's pages should be dropped)", grew, n);
        CHECK(f->data_copy != NULL);
        for (uint64_t i = 0; i < f->n_tensors; i++) {
            const gguf_tensor *t = &f->tensors[i];
            CHECK((const uint8_t *)t->data == f->data_copy + t->offset);
            CHECK((uintptr_t)t->data % f->alignment == 0);
            CHECK(!memcmp(t->data, b.p + f->data_offset + t->offset, t->nbytes));
        }
        CHECK_EQ_INT(gguf_load_data(f), 0); /* once */
        gguf_close(f);
    }
    CHECK_EQ_INT(gguf_open_mem(b.p, b.n, "mem.gguf", &f, &err), 0);
    if (f) {
        CHECK_EQ_INT(gguf_load_data(f), 0);
        const gguf_tensor *t = gguf_find_tensor(f, s.name_b);
        CHECK(t && (const uint8_t *)t->data == f->map + f->data_offset + t->offset);
        gguf_close(f);
    }
    unlink(path);
    rmdir(dir);
    free(b.p);
}

int main(void) {
    test_good_file();
    test_load_data();
    test_malformed();
    test_bounds();
    test_files();
    return check_summary("gguf");
}
