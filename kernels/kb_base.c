/* kb_base.c - errors, dtype helpers, fp16/bf16 conversion, checked allocation. */
#include "kernels/kb_base.h"

#include <math.h>
#if defined(__F16C__)
#include <immintrin.h>
#endif
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/mman.h>
#include <time.h>

int kb_fail(kb_err *e, int code, const char *fmt, ...) {
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(e->msg, sizeof e->msg, fmt, ap);
        va_end(ap);
        e->code = code;
    }
    return code;
}

int kb_err_prefix(kb_err *e, const char *fmt, ...) {
    if (!e) return KB_ERUNTIME;
    char pre[512], old[sizeof e->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, e->msg, sizeof old);
    size_t np = strnlen(pre, sizeof pre - 1), cap = sizeof e->msg - 1;
    size_t off = KB_MIN(np, cap);
    memcpy(e->msg, pre, off);
    if (off + 2 <= cap) {
        memcpy(e->msg + off, ": ", 2);
        off += 2;
    }
    size_t no = strnlen(old, sizeof old - 1);
    if (no > cap - off) no = cap - off;
    memcpy(e->msg + off, old, no);
    e->msg[off + no] = 0;
    return e->code ? e->code : KB_ERUNTIME;
}

void kb_err_clear(kb_err *e) {
    if (e) {
        e->code = 0;
        e->msg[0] = 0;
    }
}

size_t kb_dtype_size(kb_dtype t) { return t == KB_F32 ? 4 : 2; }

const char *kb_dtype_name(kb_dtype t) {
    switch (t) {
    case KB_F32: return "f32";
    case KB_F16: return "f16";
    case KB_BF16: return "bf16";
    }
    return "?";
}

int kb_dtype_parse(const char *s, kb_dtype *out) {
    if (!strcmp(s, "f32")) *out = KB_F32;
    else if (!strcmp(s, "f16")) *out = KB_F16;
    else if (!strcmp(s, "bf16")) *out = KB_BF16;
    else return KB_EINPUT;
    return 0;
}

float kb_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t man = h & 0x3ff;
    uint32_t u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            man &= 0x3ff;
            u = sign | ((uint32_t)(127 - 15 - e) << 23) | (man << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 112) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t kb_f32_to_f16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    uint32_t sign = (u >> 16) & 0x8000;
    uint32_t exp = (u >> 23) & 0xff;
    uint32_t man = u & 0x7fffff;
    if (exp == 0xff) /* inf or nan */
        return (uint16_t)(sign | 0x7c00 | (man ? 0x200 | (man >> 13) : 0));
    int e = (int)exp - 127 + 15;
    if (e >= 31) return (uint16_t)(sign | 0x7c00); /* overflow -> inf */
    if (e <= 0) {                                   /* subnormal or zero */
        if (e < -10) return (uint16_t)sign;
        man |= 0x800000;
        int shift = 14 - e;
        uint32_t half = man >> shift;
        uint32_t rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = sign | ((uint32_t)e << 10) | (man >> 13);
    uint32_t rem = man & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into exp: correct */
    return (uint16_t)half;
}

uint16_t kb_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffff) > 0x7f800000) return (uint16_t)((u >> 16) | 0x40); /* quiet nan */
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

void kb_convert_to_f32(kb_dtype t, const void *src, float *dst, size_t n) {
    if (t == KB_F32) {
        memcpy(dst, src, n * 4);
    } else if (t == KB_F16) {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = kb_f16_to_f32(s[i]);
    } else {
        const uint16_t *s = src;
        for (size_t i = 0; i < n; i++) dst[i] = kb_bf16_to_f32(s[i]);
    }
}

void kb_convert_from_f32(kb_dtype t, const float *src, void *dst, size_t n) {
    if (t == KB_F32) {
        memcpy(dst, src, n * 4);
    } else if (t == KB_F16) {
        uint16_t *d = dst;
        size_t i = 0;
#if defined(__F16C__)
        /* F16C rounds to nearest even like kb_f32_to_f16 (bit-identical on
         * every input, NaNs included: tests/unit/test_base.c); a decode step
         * converts each new K/V row here */
        for (; i + 8 <= n; i += 8)
            _mm_storeu_si128((__m128i *)(void *)(d + i),
                             _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
#endif
        for (; i < n; i++) d[i] = kb_f32_to_f16(src[i]);
    } else {
        uint16_t *d = dst;
        for (size_t i = 0; i < n; i++) d[i] = kb_f32_to_bf16(src[i]);
    }
}

static void oom(size_t n, const char *file, int line) {
    fprintf(stderr, "kvbench: out of memory allocating %zu bytes at %s:%d\n", n, file, line);
    exit(KB_ERUNTIME);
}

void *kb_malloc_or_die(size_t n, const char *file, int line) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n, file, line);
    return p;
}

void *kb_calloc_or_die(size_t n, size_t sz, const char *file, int line) {
    void *p = calloc(n ? n : 1, sz ? sz : 1);
    if (!p) oom(n * sz, file, line);
    return p;
}

void *kb_realloc_or_die(void *p, size_t n, const char *file, int line) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n, file, line);
    return q;
}

/* Blocks of 4 MiB and more (KV caches, synthetic weights), and blocks of
 * 2 MiB and more that rounding up to whole 2 MiB pages grows by at most an
 * eighth (a 2 MiB KV stream of SmolLM2 at 8K), are 2 MiB aligned and advised
 * as transparent huge pages before they are touched: streaming them then
 * misses the TLB 512x less often, and the hardware prefetcher is not stopped
 * at every 4 KiB (docs/PERFORMANCE.md measures it). The bound on rounding
 * keeps peak RSS comparable: a huge page is resident as a whole once touched.
 * KVBENCH_HUGEPAGES=0 (or off, no, false) turns this off. */
#define KB_HUGE (2u << 20)

/* KVBENCH_HUGEPAGES: 1 on, 0 off, -1 not an accepted value (unset or empty
 * is on). The one list of its values (kb_base.h, README.md). */
static int hugepages_env(void) {
    const char *e = getenv("KVBENCH_HUGEPAGES");
    if (!e || !*e) return 1;
    static const char *const off[] = {"0", "off", "no", "false"}, *const on[] = {"1", "on", "yes", "true"};
    for (int i = 0; i < 4; i++) {
        if (!strcasecmp(e, off[i])) return 0;
        if (!strcasecmp(e, on[i])) return 1;
    }
    return -1;
}

int kb_hugepages_check_env(kb_err *err) {
    if (hugepages_env() >= 0) return 0;
    return kb_env_fail(err, "KVBENCH_HUGEPAGES", getenv("KVBENCH_HUGEPAGES"),
                       "0, off, no or false (no huge pages), or 1, on, yes or true (the default)");
}

int kb_hugepages_on(void) {
    static int on = -1;
    if (on < 0) on = hugepages_env() != 0; /* not an accepted value: the default (main checks first) */
    return on;
}

int kb_env_fail(kb_err *err, const char *name, const char *value, const char *expected) {
    char v[256];
    size_t n = 0;
    const unsigned char *p = (const unsigned char *)(value ? value : "");
    for (; *p && n + 8 < sizeof v; p++) {
        if (*p < 0x20 || *p == 0x7f) n += (size_t)snprintf(v + n, sizeof v - n, "\\x%02x", *p);
        else v[n++] = (char)*p;
    }
    v[n] = 0;
    return kb_fail(err, KB_EINPUT, "%s='%s%s': expected %s", name, v, *p ? "..." : "", expected);
}

/* The size of a block of r bytes: r, or r rounded up to whole 2 MiB pages
 * when it goes on huge pages (the rule above; *huge says which). */
static size_t block_size(size_t r, int *huge) {
    size_t up = (r + KB_HUGE - 1) & ~(size_t)(KB_HUGE - 1);
    *huge = (r >= 2 * (size_t)KB_HUGE || (r >= KB_HUGE && up - r <= r / 8)) && kb_hugepages_on();
    return *huge ? up : r;
}

void *kb_amalloc_try(size_t n) {
    void *p = NULL;
    if (n > SIZE_MAX - 2 * (size_t)KB_HUGE) return NULL; /* the roundings below would wrap */
    int huge;
    size_t r = block_size((n + 63) & ~(size_t)63, &huge);
    if (posix_memalign(&p, huge ? KB_HUGE : 64, r ? r : 64)) return NULL;
#ifdef MADV_HUGEPAGE
    if (huge) (void)madvise(p, r, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    return p;
}

void *kb_amalloc(size_t n, const char *file, int line) {
    void *p = kb_amalloc_try(n);
    if (!p) oom(n, file, line);
    return p;
}

void kb_afree(void *p) { free(p); }

#if defined(__SANITIZE_ADDRESS__)
#define KB_MAP_IS_MALLOC 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define KB_MAP_IS_MALLOC 1
#endif
#endif

#ifndef KB_MAP_IS_MALLOC
/* The mapping's length for a block of n bytes: whole pages, or whole 2 MiB
 * pages when the block goes on huge pages (then 2 MiB aligned). */
static size_t map_len(size_t n, int *huge) { return block_size(((n ? n : 1) + 4095) & ~(size_t)4095, huge); }
#endif

void *kb_map(size_t n, const char *file, int line) {
#ifdef KB_MAP_IS_MALLOC
    return kb_amalloc(n, file, line);
#else
    if (n > SIZE_MAX - 4 * (size_t)KB_HUGE) oom(n, file, line);
    int huge;
    size_t r = map_len(n, &huge), len = huge ? r + KB_HUGE : r;
    char *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) oom(n, file, line);
    if (huge) { /* keep the 2 MiB aligned r bytes of the mapping */
        char *a = (char *)(((uintptr_t)p + KB_HUGE - 1) & ~(uintptr_t)(KB_HUGE - 1));
        if (a > p) munmap(p, (size_t)(a - p));
        if (p + len > a + r) munmap(a + r, (size_t)(p + len - (a + r)));
        p = a;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, r, MADV_HUGEPAGE); /* advice only: failure is harmless */
#endif
    }
    return p;
#endif
}

void kb_unmap(void *p, size_t n) {
    if (!p) return;
#ifdef KB_MAP_IS_MALLOC
    (void)n;
    kb_afree(p);
#else
    int huge;
    munmap(p, map_len(n, &huge));
#endif
}

char *kb_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *d = KB_MALLOC(n);
    memcpy(d, s, n);
    return d;
}

double kb_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
