/* gguf.c - GGUF v2/v3 reader. The file is mapped read-only and parsed once:
 * every count, length, type id, dimension and offset is checked against the
 * bytes that remain before it is used, so a malformed file yields KB_EINPUT
 * with "PATH: what is wrong (expected ...)" and never an out-of-bounds read.
 * What is validated, and the choices where the format is silent (keys and
 * tensor names may not contain NUL, duplicates are refused, arrays nest at
 * most 8 deep), are listed in docs/GGUF.md. */
#include "harness/engine/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/quant.h"

#define GGUF_MAGIC 0x46554747u  /* "GGUF" read as a little-endian u32 */
#define GGUF_DEFAULT_ALIGNMENT 32
#define GGUF_MAX_ARRAY_DEPTH 8  /* arrays of arrays: deeper is refused (stack safety) */
#define GGUF_MAX_KEY_LEN 65535
#define GGUF_MAX_NAME_LEN 64
/* Smallest encodings, used to refuse absurd counts before allocating:
 * kv: key len u64 + 1 key byte + type u32 + 1-byte value;
 * tensor info: name len u64 + 1 byte + n_dims u32 + one u64 dim + type u32 + offset u64. */
#define GGUF_MIN_KV_BYTES 14u
#define GGUF_MIN_TENSOR_BYTES 33u

/* ------------------------------------------------------------ byte cursor */

typedef struct cursor {
    const uint8_t *p;  /* [size] */
    size_t size;
    size_t pos;        /* next byte to read */
    const char *path;  /* for messages */
    kb_err *err;
    char ctx[160];     /* "metadata key #3 'general.name'": where we are, for messages */
} cursor;

static size_t cur_left(const cursor *c) { return c->size - c->pos; }

/* Fails unless n more bytes are available. */
static int cur_need(cursor *c, uint64_t n, const char *what) {
    if (n > cur_left(c))
        return kb_fail(c->err, KB_EINPUT,
                       "%s: %s%s%s at byte %zu needs %" PRIu64 " bytes but only %zu remain "
                       "(expected the file to hold it; truncated or corrupt length?)",
                       c->path, c->ctx, c->ctx[0] ? ": " : "", what, c->pos, n, cur_left(c));
    return 0;
}

static uint32_t ld_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t ld_u64(const uint8_t *p) { return (uint64_t)ld_u32(p) | (uint64_t)ld_u32(p + 4) << 32; }

static int cur_u32(cursor *c, uint32_t *v, const char *what) {
    int rc = cur_need(c, 4, what);
    if (rc) return rc;
    *v = ld_u32(c->p + c->pos);
    c->pos += 4;
    return 0;
}

static int cur_u64(cursor *c, uint64_t *v, const char *what) {
    int rc = cur_need(c, 8, what);
    if (rc) return rc;
    *v = ld_u64(c->p + c->pos);
    c->pos += 8;
    return 0;
}

/* A GGUF string: u64 length + bytes; the bytes must lie inside the file. */
static int cur_str(cursor *c, gguf_str *s, const char *what) {
    uint64_t len;
    size_t at = c->pos;
    int rc = cur_u64(c, &len, what);
    if (rc) return rc;
    if (len > cur_left(c))
        return kb_fail(c->err, KB_EINPUT,
                       "%s: %s%s%s at byte %zu has length %" PRIu64 " but only %zu bytes remain "
                       "(expected a length that fits in the file)",
                       c->path, c->ctx, c->ctx[0] ? ": " : "", what, at, len, cur_left(c));
    s->len = len;
    s->s = (const char *)c->p + c->pos;
    c->pos += (size_t)len;
    return 0;
}

/* Appends to an error message (context found while unwinding). */
static void err_append(kb_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void err_append(kb_err *e, const char *fmt, ...) {
    if (!e) return;
    size_t n = strnlen(e->msg, sizeof e->msg);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg + n, sizeof e->msg - n, fmt, ap);
    va_end(ap);
}

/* ------------------------------------------------------------- value types */

static const struct {
    const char *name;
    int size; /* bytes of a scalar; 0 for string and array */
} vtypes[] = {
    [GGUF_T_U8] = {"u8", 1},     [GGUF_T_I8] = {"i8", 1},          [GGUF_T_U16] = {"u16", 2},
    [GGUF_T_I16] = {"i16", 2},   [GGUF_T_U32] = {"u32", 4},        [GGUF_T_I32] = {"i32", 4},
    [GGUF_T_F32] = {"f32", 4},   [GGUF_T_BOOL] = {"bool", 1},      [GGUF_T_STRING] = {"string", 0},
    [GGUF_T_ARRAY] = {"array", 0}, [GGUF_T_U64] = {"u64", 8},      [GGUF_T_I64] = {"i64", 8},
    [GGUF_T_F64] = {"f64", 8},
};

const char *gguf_type_name(uint32_t type) {
    return type < KB_ARRAY_LEN(vtypes) ? vtypes[type].name : "?";
}

static int type_valid(uint32_t t) { return t < KB_ARRAY_LEN(vtypes); }

/* Validates one value of type t at the cursor and moves past it. Arrays
 * recurse (depth-limited). Every element count is bounded by the bytes left
 * before anything is looped over. */
static int skip_value(cursor *c, uint32_t t, int depth) {
    if (!type_valid(t))
        return kb_fail(c->err, KB_EINPUT,
                       "%s: %s: value type %u at byte %zu is unknown (expected 0..12)", c->path,
                       c->ctx, t, c->pos - 4);
    if (t == GGUF_T_STRING) {
        gguf_str s;
        return cur_str(c, &s, "string value");
    }
    if (t != GGUF_T_ARRAY) {
        int rc = cur_need(c, (uint64_t)vtypes[t].size, "value");
        if (!rc) c->pos += (size_t)vtypes[t].size;
        return rc;
    }
    if (depth >= GGUF_MAX_ARRAY_DEPTH)
        return kb_fail(c->err, KB_EINPUT,
                       "%s: %s: arrays nested more than %d deep at byte %zu (expected at most %d "
                       "levels)", c->path, c->ctx, GGUF_MAX_ARRAY_DEPTH, c->pos,
                       GGUF_MAX_ARRAY_DEPTH);
    uint32_t et;
    uint64_t n;
    int rc = cur_u32(c, &et, "array element type");
    if (rc) return rc;
    size_t at = c->pos;
    if ((rc = cur_u64(c, &n, "array length"))) return rc;
    if (!type_valid(et))
        return kb_fail(c->err, KB_EINPUT,
                       "%s: %s: array element type %u at byte %zu is unknown (expected 0..12)",
                       c->path, c->ctx, et, at - 4);
    /* each element needs at least: scalar size, 8 (string length), 12 (array header) */
    uint64_t min_el = et == GGUF_T_STRING ? 8 : et == GGUF_T_ARRAY ? 12 : (uint64_t)vtypes[et].size;
    if (n > cur_left(c) / min_el)
        return kb_fail(c->err, KB_EINPUT,
                       "%s: %s: array length %" PRIu64 " at byte %zu cannot fit in the %zu bytes "
                       "left (expected at most %" PRIu64 " elements of %s)",
                       c->path, c->ctx, n, at, cur_left(c), (uint64_t)(cur_left(c) / min_el),
                       vtypes[et].name);
    if (et != GGUF_T_STRING && et != GGUF_T_ARRAY) {
        c->pos += (size_t)(n * min_el);
        return 0;
    }
    for (uint64_t i = 0; i < n; i++)
        if ((rc = skip_value(c, et, depth + 1))) {
            err_append(c->err, " (in array element %" PRIu64 " of %" PRIu64 ")", i, n);
            return rc;
        }
    return 0;
}

/* ------------------------------------------------------------- hash tables */

static uint64_t hash_bytes(const char *s, uint64_t n) {
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (uint64_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

static uint64_t hash_cap_for(uint64_t n) {
    uint64_t cap = 16;
    while (cap < 2 * n) cap *= 2;
    return cap;
}

/* Index of the entry named (s, n) or -1; name_at(i) gives entry i's name. */
typedef gguf_str (*name_at_fn)(const gguf_file *, uint64_t);
static gguf_str kv_name(const gguf_file *f, uint64_t i) { return f->kv[i].key; }
static gguf_str tensor_name(const gguf_file *f, uint64_t i) {
    return (gguf_str){strlen(f->tensors[i].name), f->tensors[i].name};
}

static int64_t hash_find(const gguf_file *f, const uint32_t *tab, uint64_t cap, name_at_fn name_at,
                         const char *s, uint64_t n) {
    if (!tab) return -1;
    for (uint64_t h = hash_bytes(s, n) & (cap - 1);; h = (h + 1) & (cap - 1)) {
        if (!tab[h]) return -1;
        gguf_str e = name_at(f, tab[h] - 1);
        if (e.len == n && !memcmp(e.s, s, (size_t)n)) return (int64_t)tab[h] - 1;
    }
}

/* Builds the table; returns the index of the first duplicate or -1. */
static int64_t hash_build(const gguf_file *f, uint64_t count, name_at_fn name_at, uint32_t **tab,
                          uint64_t *cap) {
    *cap = hash_cap_for(count);
    *tab = KB_CALLOC((size_t)*cap, sizeof **tab);
    for (uint64_t i = 0; i < count; i++) {
        gguf_str e = name_at(f, i);
        uint64_t h = hash_bytes(e.s, e.len) & (*cap - 1);
        for (; (*tab)[h]; h = (h + 1) & (*cap - 1)) {
            gguf_str o = name_at(f, (*tab)[h] - 1);
            if (o.len == e.len && !memcmp(o.s, e.s, (size_t)e.len)) return (int64_t)i;
        }
        (*tab)[h] = (uint32_t)(i + 1);
    }
    return -1;
}

/* ------------------------------------------------------------------ parse */

/* Printable excerpt of a key or name for messages (at most 80 bytes, escaped). */
static void excerpt(char *dst, size_t cap, const char *s, uint64_t n) {
    size_t o = 0;
    for (uint64_t i = 0; i < n && o + 5 < cap; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (i == 80) {
            o += (size_t)snprintf(dst + o, cap - o, "...");
            break;
        }
        if (ch >= 0x20 && ch < 0x7f && ch != '\'' && ch != '\\') dst[o++] = (char)ch;
        else o += (size_t)snprintf(dst + o, cap - o, "\\x%02x", ch);
    }
    dst[o < cap ? o : cap - 1] = 0;
}

static int parse_kv(cursor *c, gguf_file *f, uint64_t i) {
    gguf_kv *kv = &f->kv[i];
    snprintf(c->ctx, sizeof c->ctx, "metadata key #%" PRIu64, i);
    size_t key_at = c->pos;
    int rc = cur_str(c, &kv->key, "key");
    if (rc) return rc;
    char ex[100];
    excerpt(ex, sizeof ex, kv->key.s, kv->key.len);
    if (kv->key.len == 0 || kv->key.len > GGUF_MAX_KEY_LEN)
        return kb_fail(c->err, KB_EINPUT,
                       "%s: metadata key #%" PRIu64 " at byte %zu has length %" PRIu64
                       " (expected 1..%d bytes)", c->path, i, key_at, kv->key.len, GGUF_MAX_KEY_LEN);
    if (memchr(kv->key.s, 0, (size_t)kv->key.len))
        return kb_fail(c->err, KB_EINPUT,
                       "%s: metadata key #%" PRIu64 " '%s' at byte %zu contains a NUL byte "
                       "(expected a key without NUL)", c->path, i, ex, key_at);
    snprintf(c->ctx, sizeof c->ctx, "metadata key #%" PRIu64 " '%s'", i, ex);
    if ((rc = cur_u32(c, &kv->type, "value type"))) return rc;
    size_t vstart = c->pos;
    if (!type_valid(kv->type))
        return kb_fail(c->err, KB_EINPUT,
                       "%s: %s: value type %u at byte %zu is unknown (expected 0..12)", c->path,
                       c->ctx, kv->type, vstart - 4);
    if ((rc = skip_value(c, kv->type, 0))) return rc;
    const uint8_t *v = c->p + vstart;
    if (kv->type == GGUF_T_STRING) {
        kv->data = v + 8;
        kv->nbytes = ld_u64(v);
    } else if (kv->type == GGUF_T_ARRAY) {
        kv->arr_type = ld_u32(v);
        kv->arr_n = ld_u64(v + 4);
        kv->data = v + 12;
        kv->nbytes = c->pos - vstart - 12;
        if (kv->arr_type == GGUF_T_STRING && kv->arr_n) {
            /* second pass over strings the first pass proved in bounds */
            kv->str_off = KB_MALLOC((size_t)kv->arr_n * sizeof *kv->str_off);
            uint64_t off = 0;
            for (uint64_t e = 0; e < kv->arr_n; e++) {
                kv->str_off[e] = off;
                off += 8 + ld_u64(kv->data + off);
            }
        }
    } else {
        kv->data = v;
        kv->nbytes = (uint64_t)vtypes[kv->type].size;
    }
    return 0;
}

static int parse_tensor(cursor *c, gguf_file *f, uint64_t i) {
    gguf_tensor *t = &f->tensors[i];
    snprintf(c->ctx, sizeof c->ctx, "tensor #%" PRIu64, i);
    size_t at = c->pos;
    gguf_str name;
    int rc = cur_str(c, &name, "name");
    if (rc) return rc;
    char ex[100];
    excerpt(ex, sizeof ex, name.s, name.len);
    if (name.len == 0 || name.len > GGUF_MAX_NAME_LEN)
        return kb_fail(c->err, KB_EINPUT,
                       "%s: tensor #%" PRIu64 " at byte %zu: name '%s' has %" PRIu64
                       " bytes (expected 1..%d)", c->path, i, at, ex, name.len, GGUF_MAX_NAME_LEN);
    if (memchr(name.s, 0, (size_t)name.len))
        return kb_fail(c->err, KB_EINPUT,
                       "%s: tensor #%" PRIu64 " at byte %zu: name '%s' contains a NUL byte "
                       "(expected a name without NUL)", c->path, i, at, ex);
    memcpy(t->name, name.s, (size_t)name.len);
    t->name[name.len] = 0;
    snprintf(c->ctx, sizeof c->ctx, "tensor '%s'", ex);
    if ((rc = cur_u32(c, &t->n_dims, "n_dims"))) return rc;
    if (t->n_dims < 1 || t->n_dims > 4)
        return kb_fail(c->err, KB_EINPUT, "%s: tensor '%s': n_dims is %u (expected 1..4)", c->path,
                       ex, t->n_dims);
    for (int d = 0; d < 4; d++) t->ne[d] = 1;
    for (uint32_t d = 0; d < t->n_dims; d++) {
        if ((rc = cur_u64(c, &t->ne[d], "dimension"))) return rc;
        if (t->ne[d] < 1 || t->ne[d] > (uint64_t)INT64_MAX)
            return kb_fail(c->err, KB_EINPUT,
                           "%s: tensor '%s': ne[%u] is %" PRIu64 " (expected 1..2^63-1)", c->path,
                           ex, d, t->ne[d]);
    }
    if ((rc = cur_u32(c, &t->type, "type"))) return rc;
    if ((rc = cur_u64(c, &t->offset, "offset"))) return rc;
    const kb_qtype *q = kb_qtype_info(t->type);
    if (!q)
        return kb_fail(c->err, KB_EINPUT,
                       "%s: tensor '%s': unknown ggml type id %u (expected a type listed in "
                       "docs/GGUF.md, e.g. 0 F32, 1 F16, 3 Q4_1, 8 Q8_0)", c->path, ex, t->type);
    if (t->ne[0] % (uint64_t)q->blck)
        return kb_fail(c->err, KB_EINPUT,
                       "%s: tensor '%s': row length ne[0] = %" PRIu64 " is not a multiple of "
                       "the %s block size %d", c->path, ex, t->ne[0], q->name, q->blck);
    /* nbytes = ne0/blck * bytes * ne1 * ne2 * ne3, and the element count, without overflow */
    uint64_t nb, nel = t->ne[0];
    int over = __builtin_mul_overflow(t->ne[0] / (uint64_t)q->blck, (uint64_t)q->bytes, &nb);
    for (int d = 1; d < 4; d++) {
        over = over || __builtin_mul_overflow(nb, t->ne[d], &nb) ||
               __builtin_mul_overflow(nel, t->ne[d], &nel) || nel > (uint64_t)INT64_MAX;
        if (over)
            return kb_fail(c->err, KB_EINPUT,
                           "%s: tensor '%s': shape %" PRIu64 " x %" PRIu64 " x %" PRIu64 " x %" PRIu64
                           " is too large (expected a size that fits the file)", c->path, ex,
                           t->ne[0], t->ne[1], t->ne[2], t->ne[3]);
    }
    t->nbytes = nb;
    return 0;
}

static int gguf_parse(gguf_file *f, kb_err *err) {
    cursor c = {.p = f->map, .size = f->size, .path = f->path, .err = err};
    uint32_t magic;
    int rc;
    if (f->size < 4 || (magic = ld_u32(f->map)) != GGUF_MAGIC) {
        char ex[40];
        excerpt(ex, sizeof ex, (const char *)f->map, KB_MIN(f->size, 4));
        return kb_fail(err, KB_EINPUT,
                       "%s: not a GGUF file (starts with '%s', expected the magic 'GGUF')",
                       f->path, ex);
    }
    c.pos = 4;
    if ((rc = cur_u32(&c, &f->version, "version"))) return rc;
    if (f->version == 1)
        return kb_fail(err, KB_EINPUT,
                       "%s: GGUF version 1 is not supported (expected version 2 or 3; version 1 "
                       "used 32-bit counts - reconvert the model)", f->path);
    if (f->version == 0x02000000u || f->version == 0x03000000u)
        return kb_fail(err, KB_EINPUT,
                       "%s: big-endian GGUF file (expected little-endian, version 2 or 3)", f->path);
    if (f->version != 2 && f->version != 3)
        return kb_fail(err, KB_EINPUT, "%s: unsupported GGUF version %u (expected 2 or 3)",
                       f->path, f->version);
    if ((rc = cur_u64(&c, &f->n_tensors, "tensor count"))) return rc;
    if ((rc = cur_u64(&c, &f->n_kv, "metadata key count"))) return rc;
    /* Every entry takes some bytes: refuse counts the file cannot hold before
     * allocating (and counts past the u32 indices of the hash tables). */
    if (f->n_kv > cur_left(&c) / GGUF_MIN_KV_BYTES)
        return kb_fail(err, KB_EINPUT,
                       "%s: metadata key count %" PRIu64 " cannot fit in a file of %zu bytes "
                       "(expected at most %zu)", f->path, f->n_kv, f->size,
                       cur_left(&c) / GGUF_MIN_KV_BYTES);
    if (f->n_tensors > cur_left(&c) / GGUF_MIN_TENSOR_BYTES)
        return kb_fail(err, KB_EINPUT,
                       "%s: tensor count %" PRIu64 " cannot fit in a file of %zu bytes "
                       "(expected at most %zu)", f->path, f->n_tensors, f->size,
                       cur_left(&c) / GGUF_MIN_TENSOR_BYTES);
    if (f->n_kv >= (1ull << 31) || f->n_tensors >= (1ull << 31))
        return kb_fail(err, KB_EINPUT,
                       "%s: %" PRIu64 " tensors and %" PRIu64 " metadata keys (expected fewer "
                       "than 2^31 of each)", f->path, f->n_tensors, f->n_kv);

    f->kv = KB_CALLOC((size_t)KB_MAX(f->n_kv, 1), sizeof *f->kv);
    for (uint64_t i = 0; i < f->n_kv; i++)
        if ((rc = parse_kv(&c, f, i))) return rc;
    int64_t dup = hash_build(f, f->n_kv, kv_name, &f->kv_hash, &f->kv_hash_cap);
    if (dup >= 0) {
        char ex[100];
        excerpt(ex, sizeof ex, f->kv[dup].key.s, f->kv[dup].key.len);
        return kb_fail(err, KB_EINPUT,
                       "%s: metadata key '%s' appears twice (expected unique keys)", f->path, ex);
    }

    f->alignment = GGUF_DEFAULT_ALIGNMENT;
    const gguf_kv *al = gguf_find_kv(f, "general.alignment");
    if (al) {
        if (al->type != GGUF_T_U32)
            return kb_fail(err, KB_EINPUT,
                           "%s: general.alignment has type %s (expected a u32 power of two)",
                           f->path, gguf_type_name(al->type));
        uint32_t a = ld_u32(al->data);
        if (a == 0 || (a & (a - 1)))
            return kb_fail(err, KB_EINPUT,
                           "%s: general.alignment is %u (expected a u32 power of two)", f->path, a);
        f->alignment = a;
    }

    f->tensors = KB_CALLOC((size_t)KB_MAX(f->n_tensors, 1), sizeof *f->tensors);
    for (uint64_t i = 0; i < f->n_tensors; i++)
        if ((rc = parse_tensor(&c, f, i))) return rc;
    dup = hash_build(f, f->n_tensors, tensor_name, &f->tensor_hash, &f->tensor_hash_cap);
    if (dup >= 0)
        return kb_fail(err, KB_EINPUT, "%s: tensor '%s' appears twice (expected unique names)",
                       f->path, f->tensors[dup].name);

    /* data section: after the tensor infos, aligned (alignment <= 2^31, pos <= size) */
    uint64_t a = f->alignment;
    f->data_offset = ((uint64_t)c.pos + a - 1) / a * a;
    if (f->n_tensors && f->data_offset > f->size)
        return kb_fail(err, KB_EINPUT,
                       "%s: the data section would start at byte %" PRIu64 ", past the end of the "
                       "file (%zu bytes; expected tensor data after the header)", f->path,
                       f->data_offset, f->size);
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        gguf_tensor *t = &f->tensors[i];
        if (t->offset % a)
            return kb_fail(err, KB_EINPUT,
                           "%s: tensor '%s': offset %" PRIu64 " is not a multiple of the "
                           "alignment %" PRIu64, f->path, t->name, t->offset, a);
        uint64_t room = f->size - f->data_offset;
        if (t->offset > room || t->nbytes > room - t->offset)
            return kb_fail(err, KB_EINPUT,
                           "%s: tensor '%s': data at offset %" PRIu64 " + %" PRIu64 " bytes runs "
                           "past the end of the file (data section holds %" PRIu64 " bytes; "
                           "truncated file?)", f->path, t->name, t->offset, t->nbytes, room);
        t->data = f->map + f->data_offset + t->offset;
    }
    return 0;
}

static int finish_open(gguf_file *f, gguf_file **out, kb_err *err) {
    int rc = gguf_parse(f, err);
    if (rc) {
        gguf_close(f);
        return rc;
    }
    *out = f;
    return 0;
}

int gguf_open_mem(const void *buf, size_t size, const char *name, gguf_file **out, kb_err *err) {
    *out = NULL;
    gguf_file *f = KB_CALLOC(1, sizeof *f);
    f->path = kb_strdup(name ? name : "(memory)");
    f->fd = -1;
    f->map = buf;
    f->size = size;
    return finish_open(f, out, err);
}

int gguf_open(const char *path, gguf_file **out, kb_err *err) {
    *out = NULL;
    if (!*path) /* not the default model, not the current directory */
        return kb_fail(err, KB_EINPUT, "an empty model path, expected a GGUF file");
    /* O_NONBLOCK: a FIFO would otherwise block the open until a writer comes;
     * it is refused below like every file that is not regular (no effect on
     * regular files) */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return kb_fail(err, errno == ENOENT || errno == EACCES || errno == ENOTDIR ? KB_EINPUT
                                                                                    : KB_ERUNTIME,
                       "%s: cannot open: %s (expected a readable GGUF file)", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        close(fd);
        return kb_fail(err, KB_EINPUT, "%s: not a regular file (expected a GGUF file)", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return kb_fail(err, KB_EINPUT, "%s: empty file (expected a GGUF header)", path);
    }
    void *map = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (map == MAP_FAILED) {
        int e = errno;
        close(fd);
        return kb_fail(err, KB_ERUNTIME, "%s: mmap failed: %s", path, strerror(e));
    }
    gguf_file *f = KB_CALLOC(1, sizeof *f);
    f->path = kb_strdup(path);
    f->fd = fd;
    f->map = map;
    f->size = (size_t)st.st_size;
    return finish_open(f, out, err);
}

int gguf_load_data(gguf_file *f) {
    /* a file without tensors may end before its aligned data offset
     * (gguf_parse allows it): no data, and size - data_offset would wrap */
    if (f->fd < 0 || f->data_copy || !kb_hugepages_on() || f->data_offset >= f->size) return 0;
    size_t n = f->size - (size_t)f->data_offset;
    if (n < ((size_t)4 << 20)) return 0; /* below kb_amalloc's huge-page size: nothing to gain */
    uint8_t *dst = kb_amalloc_try(n);
    if (!dst) return 0; /* memory short: keep reading the map */
    const uint8_t *src = f->map + f->data_offset;
    long pg = sysconf(_SC_PAGESIZE);
    size_t step = (size_t)16 << 20, done = 0; /* file pages dropped as we go */
    for (size_t o = 0; o < n; o += step) {
        size_t len = KB_MIN(step, n - o);
        memcpy(dst + o, src + o, len);
        uintptr_t a = ((uintptr_t)(src + done) + (uintptr_t)pg - 1) & ~(uintptr_t)(pg - 1);
        uintptr_t b = ((uintptr_t)(src + o + len)) & ~(uintptr_t)(pg - 1);
        if (b > a) (void)madvise((void *)a, b - a, MADV_DONTNEED); /* advice: failure only costs RSS */
        done = o + len;
    }
    for (uint64_t i = 0; i < f->n_tensors; i++)
        f->tensors[i].data = dst + f->tensors[i].offset;
    f->data_copy = dst;
    return 1;
}

void gguf_close(gguf_file *f) {
    if (!f) return;
    kb_afree(f->data_copy);
    if (f->kv)
        for (uint64_t i = 0; i < f->n_kv; i++) free(f->kv[i].str_off);
    free(f->kv);
    free(f->tensors);
    free(f->kv_hash);
    free(f->tensor_hash);
    if (f->fd >= 0) {
        munmap((void *)f->map, f->size);
        close(f->fd);
    }
    free(f->path);
    free(f);
}

/* ---------------------------------------------------------------- lookups */

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key) {
    int64_t i = hash_find(f, f->kv_hash, f->kv_hash_cap, kv_name, key, strlen(key));
    return i < 0 ? NULL : &f->kv[i];
}

const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name) {
    int64_t i = hash_find(f, f->tensor_hash, f->tensor_hash_cap, tensor_name, name, strlen(name));
    return i < 0 ? NULL : &f->tensors[i];
}

/* Integer value of a scalar integer kv (bool excluded): 0 ok (unsigned in *u
 * with neg = 0, or negative in *s with neg = 1), else not an integer. */
static int int_value(uint32_t type, const uint8_t *p, int *neg, uint64_t *u, int64_t *s) {
    int64_t v;
    *neg = 0;
    switch (type) {
    case GGUF_T_U8: *u = p[0]; return 0;
    case GGUF_T_U16: *u = (uint64_t)(p[0] | p[1] << 8); return 0;
    case GGUF_T_U32: *u = ld_u32(p); return 0;
    case GGUF_T_U64: *u = ld_u64(p); return 0;
    case GGUF_T_I8: v = (int8_t)p[0]; break;
    case GGUF_T_I16: v = (int16_t)(uint16_t)(p[0] | p[1] << 8); break;
    case GGUF_T_I32: v = (int32_t)ld_u32(p); break;
    case GGUF_T_I64: v = (int64_t)ld_u64(p); break;
    default: return 1;
    }
    if (v < 0) {
        *neg = 1;
        *s = v;
    } else {
        *u = (uint64_t)v;
    }
    return 0;
}

static double num_value(uint32_t type, const uint8_t *p) {
    int neg;
    uint64_t u;
    int64_t s;
    if (!int_value(type, p, &neg, &u, &s)) return neg ? (double)s : (double)u;
    switch (type) {
    case GGUF_T_BOOL: return p[0] != 0;
    case GGUF_T_F32: {
        uint32_t b = ld_u32(p);
        float x;
        memcpy(&x, &b, 4);
        return x;
    }
    case GGUF_T_F64: {
        uint64_t b = ld_u64(p);
        double x;
        memcpy(&x, &b, 8);
        return x;
    }
    default: return NAN;
    }
}

static int wrong_type(const gguf_file *f, const char *key, const gguf_kv *kv, const char *want,
                      kb_err *err) {
    return kb_fail(err, KB_EINPUT, "%s: key %s has type %s (expected %s)", f->path, key,
                   gguf_type_name(kv->type), want);
}

int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, kb_err *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 1;
    int neg;
    uint64_t u;
    int64_t s;
    if (int_value(kv->type, kv->data, &neg, &u, &s)) return wrong_type(f, key, kv, "an integer", err);
    if (neg)
        return kb_fail(err, KB_EINPUT, "%s: key %s = %" PRId64 " is negative (expected a u32)",
                       f->path, key, s);
    if (u > UINT32_MAX)
        return kb_fail(err, KB_EINPUT, "%s: key %s = %" PRIu64 " does not fit in u32", f->path,
                       key, u);
    *out = (uint32_t)u;
    return 0;
}

int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, kb_err *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 1;
    int neg;
    uint64_t u;
    int64_t s;
    if (int_value(kv->type, kv->data, &neg, &u, &s)) return wrong_type(f, key, kv, "an integer", err);
    if (!neg && u > (uint64_t)INT64_MAX)
        return kb_fail(err, KB_EINPUT, "%s: key %s = %" PRIu64 " does not fit in i64", f->path, key, u);
    *out = neg ? s : (int64_t)u;
    return 0;
}

int gguf_get_f32(const gguf_file *f, const char *key, float *out, kb_err *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 1;
    if (kv->type == GGUF_T_BOOL || kv->type == GGUF_T_STRING || kv->type == GGUF_T_ARRAY)
        return wrong_type(f, key, kv, "a number (f32, f64 or an integer)", err);
    *out = (float)num_value(kv->type, kv->data);
    return 0;
}

int gguf_get_bool(const gguf_file *f, const char *key, int *out, kb_err *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 1;
    int neg;
    uint64_t u;
    int64_t s;
    if (kv->type == GGUF_T_BOOL) {
        *out = kv->data[0] != 0;
        return 0;
    }
    if (!int_value(kv->type, kv->data, &neg, &u, &s) && !neg && u <= 1) {
        *out = (int)u;
        return 0;
    }
    return wrong_type(f, key, kv, "bool (or an integer 0/1)", err);
}

int gguf_get_str(const gguf_file *f, const char *key, char **out, kb_err *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 1;
    if (kv->type != GGUF_T_STRING) return wrong_type(f, key, kv, "string", err);
    char *s = KB_MALLOC((size_t)kv->nbytes + 1);
    memcpy(s, kv->data, (size_t)kv->nbytes);
    s[kv->nbytes] = 0;
    *out = s;
    return 0;
}

static int is_number_type(uint32_t t) {
    return t != GGUF_T_STRING && t != GGUF_T_ARRAY && type_valid(t);
}

int gguf_get_arr(const gguf_file *f, const char *key, uint32_t want_type, const gguf_kv **out,
                 kb_err *err) {
    const gguf_kv *kv = gguf_find_kv(f, key);
    if (!kv) return 1;
    if (kv->type != GGUF_T_ARRAY) return wrong_type(f, key, kv, "array", err);
    int ok = want_type == GGUF_T_ANY_NUMBER ? is_number_type(kv->arr_type) : kv->arr_type == want_type;
    if (!ok)
        return kb_fail(err, KB_EINPUT, "%s: key %s is an array of %s (expected an array of %s)",
                       f->path, key, gguf_type_name(kv->arr_type),
                       want_type == GGUF_T_ANY_NUMBER ? "numbers" : gguf_type_name(want_type));
    *out = kv;
    return 0;
}

gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i) {
    if (kv->type != GGUF_T_ARRAY || kv->arr_type != GGUF_T_STRING || i >= kv->arr_n)
        return (gguf_str){0, ""};
    const uint8_t *p = kv->data + kv->str_off[i];
    return (gguf_str){ld_u64(p), (const char *)p + 8};
}

double gguf_arr_num(const gguf_kv *kv, uint64_t i) {
    if (kv->type != GGUF_T_ARRAY || !is_number_type(kv->arr_type) || i >= kv->arr_n) return NAN;
    return num_value(kv->arr_type, kv->data + i * (uint64_t)vtypes[kv->arr_type].size);
}

/* ------------------------------------------------------------------ print */

/* Bytes of a printed key, name or string: printable ASCII and UTF-8 bytes
 * (>= 0x80) as they are; '"', '\\', controls, DEL and (when esc_space) space
 * as \" \\ \n \t \r or \xNN. Keeps one item per line and space-separated. */
static void print_escaped(FILE *out, const char *s, uint64_t n, int esc_space) {
    for (uint64_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)s[i];
        if (ch == '"' || ch == '\\') fprintf(out, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", out);
        else if (ch == '\t') fputs("\\t", out);
        else if (ch == '\r') fputs("\\r", out);
        else if (ch < 0x20 || ch == 0x7f || (esc_space && ch == ' ')) fprintf(out, "\\x%02x", ch);
        else fputc(ch, out);
    }
}

#define PRINT_STR_MAX 120  /* longer strings are cut, with their length */
#define PRINT_ARR_MAX 8    /* array elements shown */

static void print_string(FILE *out, const char *s, uint64_t n) {
    fputc('"', out);
    print_escaped(out, s, KB_MIN(n, (uint64_t)PRINT_STR_MAX), 0);
    fputc('"', out);
    if (n > PRINT_STR_MAX) fprintf(out, "... (%" PRIu64 " bytes)", n);
}

static void print_scalar(FILE *out, uint32_t type, const uint8_t *p) {
    int neg;
    uint64_t u;
    int64_t s;
    if (!int_value(type, p, &neg, &u, &s)) {
        if (neg) fprintf(out, "%" PRId64, s);
        else fprintf(out, "%" PRIu64, u);
    } else if (type == GGUF_T_BOOL) {
        fputs(p[0] ? "true" : "false", out);
    } else if (type == GGUF_T_F32) {
        fprintf(out, "%.9g", num_value(type, p));
    } else {
        fprintf(out, "%.17g", num_value(type, p));
    }
}

/* Bytes of an encoded value at p, which gguf_parse has already validated. */
static uint64_t encoded_size(const uint8_t *p, uint32_t t) {
    if (t == GGUF_T_STRING) return 8 + ld_u64(p);
    if (t != GGUF_T_ARRAY) return (uint64_t)vtypes[t].size;
    uint32_t et = ld_u32(p);
    uint64_t n = ld_u64(p + 4), size = 12;
    if (et != GGUF_T_STRING && et != GGUF_T_ARRAY) return size + n * (uint64_t)vtypes[et].size;
    for (uint64_t i = 0; i < n; i++) size += encoded_size(p + size, et);
    return size;
}

/* Array elements: walks the (already validated) encoding from p. */
static void print_array(FILE *out, uint32_t et, uint64_t n, const uint8_t *p) {
    fprintf(out, "array[%s] n=%" PRIu64 " [", gguf_type_name(et), n);
    for (uint64_t i = 0; i < n && i < PRINT_ARR_MAX; i++) {
        if (i) fputs(", ", out);
        if (et == GGUF_T_STRING) {
            uint64_t len = ld_u64(p);
            print_string(out, (const char *)p + 8, len);
            p += 8 + len;
        } else if (et == GGUF_T_ARRAY) {
            /* nested: header only; skipping its body needs a walk */
            uint32_t it = ld_u32(p);
            uint64_t in = ld_u64(p + 4);
            fprintf(out, "array[%s] n=%" PRIu64, gguf_type_name(it), in);
            p += encoded_size(p, GGUF_T_ARRAY);
        } else {
            print_scalar(out, et, p);
            p += vtypes[et].size;
        }
    }
    fputs(n > PRINT_ARR_MAX ? ", ...]" : "]", out);
}

void gguf_print(const gguf_file *f, FILE *out) {
    fprintf(out, "file: ");
    print_escaped(out, f->path, strlen(f->path), 1);
    fprintf(out, "\nfile_size: %zu\nversion: %u\ntensor_count: %" PRIu64 "\nkv_count: %" PRIu64
                 "\nalignment: %" PRIu64 "\ndata_offset: %" PRIu64 "\n",
            f->size, f->version, f->n_tensors, f->n_kv, f->alignment, f->data_offset);
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        fprintf(out, "kv %" PRIu64 " ", i);
        print_escaped(out, kv->key.s, kv->key.len, 1);
        if (kv->type == GGUF_T_ARRAY) {
            fputc(' ', out);
            print_array(out, kv->arr_type, kv->arr_n, kv->data);
        } else {
            fprintf(out, " %s ", gguf_type_name(kv->type));
            if (kv->type == GGUF_T_STRING) print_string(out, (const char *)kv->data, kv->nbytes);
            else print_scalar(out, kv->type, kv->data);
        }
        fputc('\n', out);
    }
    uint64_t count[64] = {0}, total = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        fprintf(out, "tensor %" PRIu64 " ", i);
        print_escaped(out, t->name, strlen(t->name), 1);
        fprintf(out, " %s ", kb_qtype_info(t->type)->name);
        for (uint32_t d = 0; d < t->n_dims; d++) fprintf(out, "%s%" PRIu64, d ? "x" : "", t->ne[d]);
        fprintf(out, " offset=%" PRIu64 " bytes=%" PRIu64 "\n", t->offset, t->nbytes);
        if (t->type < 64) count[t->type]++;
        total += t->nbytes;
    }
    fprintf(out, "tensor_types:");
    for (uint32_t ty = 0; ty < 64; ty++)
        if (count[ty]) fprintf(out, " %s=%" PRIu64, kb_qtype_info(ty)->name, count[ty]);
    fprintf(out, "\ntensor_bytes: %" PRIu64 "\n", total);
}
