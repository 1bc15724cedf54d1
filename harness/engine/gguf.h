/* gguf.h - GGUF v2/v3 reader: mmap, every count, length and offset
 * bounds-checked against the file; tensor data stays in place in the map.
 * A malformed file gives KB_EINPUT with a message naming the file, the key or
 * tensor, and what was expected; never a crash. */
#ifndef KB_GGUF_H
#define KB_GGUF_H

#include <stdio.h>

#include "kernels/kb_base.h"

/* Metadata value types (GGUF spec ids). */
enum {
    GGUF_T_U8 = 0, GGUF_T_I8 = 1, GGUF_T_U16 = 2, GGUF_T_I16 = 3, GGUF_T_U32 = 4,
    GGUF_T_I32 = 5, GGUF_T_F32 = 6, GGUF_T_BOOL = 7, GGUF_T_STRING = 8, GGUF_T_ARRAY = 9,
    GGUF_T_U64 = 10, GGUF_T_I64 = 11, GGUF_T_F64 = 12,
};

typedef struct gguf_str {
    uint64_t len;
    const char *s; /* points into the map; NOT NUL-terminated */
} gguf_str;

typedef struct gguf_kv {
    gguf_str key;
    uint32_t type;       /* GGUF_T_* */
    uint32_t arr_type;   /* element type when type == GGUF_T_ARRAY */
    uint64_t arr_n;      /* element count when type == GGUF_T_ARRAY */
    const uint8_t *data; /* the value (scalar) or the first array element, in the map */
    uint64_t nbytes;     /* bytes of the value */
} gguf_kv;

typedef struct gguf_tensor {
    char name[65];     /* NUL-terminated (names are at most 64 bytes) */
    uint32_t n_dims;   /* 1..4 */
    uint64_t ne[4];    /* ne[0] innermost (row length); unused dims are 1 */
    uint32_t type;     /* ggml type id (kernels/quant.h) */
    uint64_t offset;   /* relative to the data section */
    const void *data;  /* absolute pointer into the map */
    uint64_t nbytes;   /* computed from type and shape, checked against the file */
} gguf_tensor;

typedef struct gguf_file {
    char *path;
    int fd;
    const uint8_t *map;
    size_t size;
    uint32_t version;
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;            /* [n_kv] */
    gguf_tensor *tensors;   /* [n_tensors] */
    uint64_t alignment;     /* general.alignment or 32 */
    uint64_t data_offset;   /* start of the data section */
} gguf_file;

int gguf_open(const char *path, gguf_file **out, kb_err *err);
void gguf_close(gguf_file *f);

const gguf_kv *gguf_find_kv(const gguf_file *f, const char *key);
const gguf_tensor *gguf_find_tensor(const gguf_file *f, const char *name);

/* Typed getters. Return 0 when found and convertible, 1 when the key is
 * absent (out untouched), KB_EINPUT with err filled when present but of a
 * type that cannot be converted (e.g. a string for an integer). Integer
 * getters accept any integer type whose value fits. */
int gguf_get_u32(const gguf_file *f, const char *key, uint32_t *out, kb_err *err);
int gguf_get_i64(const gguf_file *f, const char *key, int64_t *out, kb_err *err);
int gguf_get_f32(const gguf_file *f, const char *key, float *out, kb_err *err);
int gguf_get_bool(const gguf_file *f, const char *key, int *out, kb_err *err);
/* String value, malloc'ed copy, NUL-terminated. */
int gguf_get_str(const gguf_file *f, const char *key, char **out, kb_err *err);
/* Array accessors: element count and type-checked element access. */
int gguf_get_arr(const gguf_file *f, const char *key, uint32_t want_type, const gguf_kv **out,
                 kb_err *err);
/* i-th string of a string array (validated at open time). */
gguf_str gguf_arr_str(const gguf_kv *kv, uint64_t i);
/* i-th numeric element of an array converted to double. */
double gguf_arr_num(const gguf_kv *kv, uint64_t i);

/* Human-readable dump of metadata and every tensor (kvbench info). */
void gguf_print(const gguf_file *f, FILE *out);

#endif
