/* kb_base.h - foundation shared by every layer of kvbench: error reporting,
 * element types, fp16/bf16 conversion, checked allocation.
 *
 * Error convention: library functions return 0 on success or an exit-code-like
 * value (KB_ERUNTIME = 1, KB_EINPUT = 2) and fill a kb_err with a message that
 * names the file, key or line and says what was expected. Only main() and
 * tests exit. */
#ifndef KB_BASE_H
#define KB_BASE_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

enum { KB_OK = 0, KB_ERUNTIME = 1, KB_EINPUT = 2 };

typedef struct kb_err {
    int code;        /* 0, KB_ERUNTIME or KB_EINPUT */
    char msg[1024];  /* human-readable reason, no trailing newline */
} kb_err;

/* Formats msg into e (if non-NULL) and returns code. */
int kb_fail(kb_err *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Prepends "prefix: " to an existing message (adds context while unwinding). The
 * prefix keeps at most 511 bytes and the whole message 1,023, cut without a mark;
 * returns e's code, or KB_ERUNTIME when it has none (or e is NULL). */
int kb_err_prefix(kb_err *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void kb_err_clear(kb_err *e);

/* Element type of KV tensors and activations handed between layers. */
typedef enum kb_dtype { KB_F32 = 0, KB_F16 = 1, KB_BF16 = 2 } kb_dtype;
size_t kb_dtype_size(kb_dtype t);
const char *kb_dtype_name(kb_dtype t);
int kb_dtype_parse(const char *s, kb_dtype *out); /* "f32"/"f16"/"bf16"; 0 ok */

/* IEEE binary16 <-> binary32, round-to-nearest-even, bit exact (no intrinsics). */
float kb_f16_to_f32(uint16_t h);
uint16_t kb_f32_to_f16(float f);
static inline float kb_bf16_to_f32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}
uint16_t kb_f32_to_bf16(float f);

/* Element i of an array of dtype t, as f32 / stored from f32 (rounded to
 * nearest even; exact for a value that came from that dtype). */
static inline float kb_elem_get(const void *b, kb_dtype t, size_t i) {
    if (t == KB_F32) return ((const float *)b)[i];
    uint16_t h = ((const uint16_t *)b)[i];
    return t == KB_F16 ? kb_f16_to_f32(h) : kb_bf16_to_f32(h);
}
static inline void kb_elem_set(void *b, kb_dtype t, size_t i, float v) {
    if (t == KB_F32) ((float *)b)[i] = v;
    else ((uint16_t *)b)[i] = t == KB_F16 ? kb_f32_to_f16(v) : kb_f32_to_bf16(v);
}

/* Convert n elements between dtypes (f32 <-> f16/bf16). */
void kb_convert_to_f32(kb_dtype src_t, const void *src, float *dst, size_t n);
void kb_convert_from_f32(kb_dtype dst_t, const float *src, void *dst, size_t n);

/* Checked allocation: aborts with a message naming the call site on failure
 * (out-of-memory is not recoverable for a benchmark harness; callers that can
 * fail gracefully, e.g. context-size checks, test sizes before allocating). */
#define KB_MALLOC(n) kb_malloc_or_die((n), __FILE__, __LINE__)
#define KB_CALLOC(n, sz) kb_calloc_or_die((n), (sz), __FILE__, __LINE__)
#define KB_REALLOC(p, n) kb_realloc_or_die((p), (n), __FILE__, __LINE__)
void *kb_malloc_or_die(size_t n, const char *file, int line);
void *kb_calloc_or_die(size_t n, size_t sz, const char *file, int line);
void *kb_realloc_or_die(void *p, size_t n, const char *file, int line);
/* 64-byte aligned allocation (free with kb_afree). */
void *kb_amalloc(size_t n, const char *file, int line);
#define KB_AMALLOC(n) kb_amalloc((n), __FILE__, __LINE__)
/* The same, returning NULL when memory is short (for optional copies). */
void *kb_amalloc_try(size_t n);
void kb_afree(void *p);
/* A block of its own mapping, given back to the system when unmapped (the
 * huge-page rule of kb_amalloc): for KV streams, so that a freed stream's
 * memory leaves peak RSS, whatever the C library keeps on its heap. Free with
 * kb_unmap(p, n), n as allocated. Under AddressSanitizer these are
 * kb_amalloc / kb_afree, so overruns stay detected. */
void *kb_map(size_t n, const char *file, int line);
void kb_unmap(void *p, size_t n);
#define KB_MAP(n) kb_map((n), __FILE__, __LINE__)
/* Whether kb_amalloc puts large blocks on transparent huge pages (2 MiB
 * aligned, MADV_HUGEPAGE): blocks of 4 MiB and more, and blocks of 2 MiB and
 * more that rounding up to whole 2 MiB pages grows by at most an eighth;
 * yes unless the environment variable KVBENCH_HUGEPAGES says off (read
 * once; kb_hugepages_check_env lists the values). */
int kb_hugepages_on(void);
/* Checks KVBENCH_HUGEPAGES: unset or empty (on), "0", "off", "no", "false"
 * (off), "1", "on", "yes", "true" (on), in any case. 0 when it is one of
 * these, else KB_EINPUT with a message (kb_env_fail). kb_hugepages_on takes
 * any other value as on; the kvbench binary checks first (harness/main.c). */
int kb_hugepages_check_env(kb_err *err);

/* The message for an environment variable holding a value outside the
 * accepted ones: "NAME='value': expected <expected>" (control bytes in the
 * value as \xNN, a long value cut), and returns KB_EINPUT. */
int kb_env_fail(kb_err *err, const char *name, const char *value, const char *expected);

char *kb_strdup(const char *s);

/* Monotonic wall clock in seconds. */
double kb_now(void);

#define KB_MIN(a, b) ((a) < (b) ? (a) : (b))
#define KB_MAX(a, b) ((a) > (b) ? (a) : (b))
#define KB_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))

#endif
