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

/* For get_arr: accept an array of any numeric element type (u8..i64, f32,
 * f64, bool); read the elements with gguf_arr_num. */
#define GGUF_T_ANY_NUMBER 0xffffu

typedef struct gguf_kv {
    gguf_str key;        /* 1..65535 bytes, no NUL; unique in the file */
    uint32_t type;       /* GGUF_T_* */
    uint32_t arr_type;   /* element type when type == GGUF_T_ARRAY */
    uint64_t arr_n;      /* element count when type == GGUF_T_ARRAY */
    const uint8_t *data; /* in the map: the scalar; for a string, its first byte
                          * (after the u64 length); for an array, its first
                          * element (after elem type and count) */
    uint64_t nbytes;     /* bytes at data: scalar size, string length, or all
                          * of an array's elements */
    uint64_t *str_off;   /* [arr_n] for arrays of strings: offset from data of
                          * element i's u64 length (O(1) gguf_arr_str); else NULL */
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
    char *path;             /* as given; prefixes every error message */
    int fd;                 /* -1 for gguf_open_mem */
    const uint8_t *map;     /* [size] the whole file (mmap) or the caller's buffer */
    size_t size;            /* bytes */
    uint32_t version;       /* 2 or 3 */
    uint64_t n_kv, n_tensors;
    gguf_kv *kv;            /* [n_kv] in file order */
    gguf_tensor *tensors;   /* [n_tensors] in file order */
    uint64_t alignment;     /* general.alignment (u32, power of two) or 32 */
    uint64_t data_offset;   /* start of the data section, bytes from file start */
    uint8_t *data_copy;     /* the data section in anonymous memory (gguf_load_data) or NULL */
    /* name -> index hash tables (open addressing; 0 = empty, else index + 1) */
    uint32_t *kv_hash, *tensor_hash;
    uint64_t kv_hash_cap, tensor_hash_cap; /* powers of two */
} gguf_file;

/* Opens and validates a GGUF v2/v3 file (see docs/GGUF.md for every check).
 * Returns 0 and *out, or KB_EINPUT ("PATH: what is wrong (expected ...)") /
 * KB_ERUNTIME (I/O failure) with *out = NULL. */
int gguf_open(const char *path, gguf_file **out, kb_err *err);
/* Same checks on a buffer the caller keeps alive until gguf_close; `name`
 * stands for the path in messages. For tests and fuzzing. */
int gguf_open_mem(const void *buf, size_t size, const char *name, gguf_file **out, kb_err *err);
void gguf_close(gguf_file *f);
/* Copies the tensor data section of a mapped file into anonymous memory on
 * transparent huge pages (kb_amalloc: 2 MiB pages) and points every
 * tensor's data there; the copied file pages are dropped from the mapping
 * as it goes (MADV_DONTNEED), so resident memory does not double. Decode
 * streams all weights once per token: with the map's 4 KiB pages a new page
 * (and a TLB miss) every 4 KiB; measured ~7% of SmolLM2's decode mat-vecs
 * (docs/PERFORMANCE.md). Returns 1 if copied; 0 (data stays in the map)
 * for a buffer from gguf_open_mem, a data section under 4 MiB,
 * KVBENCH_HUGEPAGES=0, or when memory is short. Metadata stays in the map. */
int gguf_load_data(gguf_file *f);
/* Name of a metadata value type ("u32", "string", "array"...), "?" if unknown. */
const char *gguf_type_name(uint32_t type);

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
