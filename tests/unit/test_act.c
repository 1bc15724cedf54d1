/* test_act.c - kb_silu_mul (kernels/cpu/act_cpu.c) against kb_silu_mul_ref
 * (libm's expf, by definition), bit for bit: no tolerance, since the vector
 * path exists to keep every output of the engine unchanged.
 *
 * Inputs: every sign and exponent of g with 1,024 mantissas each, every
 * float in [80, 104] of either sign (where exp(-g) turns subnormal, then
 * goes to libm past |g| = 88), the special values (zeros, subnormals, Inf,
 * NaNs with payloads, FLT_MAX), random h2 (zeros, Inf and NaN among them),
 * every length 0..40 at an unaligned address (the scalar tail). The whole
 * float range is compared outside the suite (scripts/microbench/act_all.sh:
 * all 2^32 values of g with h2 = 1; no difference on the AVX-512 and the
 * AVX2 path). */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/act.h"
#include "kernels/kb_base.h"

#ifndef FAST_SILU
#define FAST_SILU kb_silu_mul
#define FAST_VECTOR kb_silu_mul_vector
#define TEST_NAME "act"
#endif

static uint32_t rng = 12345u;
static uint32_t next(void) {
    rng = rng * 1664525u + 1013904223u;
    return rng ^ (rng >> 13);
}
static float from_bits(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* h2: mostly ordinary values, sometimes 0, -0, Inf or NaN. */
static float rand_h2(void) {
    uint32_t r = next();
    switch (r % 64) {
    case 0: return 0.0f;
    case 1: return -0.0f;
    case 2: return INFINITY;
    case 3: return from_bits(0x7fc00123u);
    default: return ((float)(r >> 8) / (1u << 24) - 0.5f) * 8.0f;
    }
}

/* Compares FAST_SILU with the reference on g[0..n); returns mismatches. */
static long compare(const float *g, size_t n, const char *what) {
    float *a = calloc(n + 1, sizeof *a), *b = calloc(n + 1, sizeof *b);
    float *h2 = calloc(n + 1, sizeof *h2);
    for (size_t i = 0; i < n; i++) h2[i + 1] = rand_h2();
    /* one float past an aligned start: no alignment assumed */
    memcpy(a + 1, g, n * 4);
    memcpy(b + 1, g, n * 4);
    FAST_SILU(a + 1, h2 + 1, n);
    kb_silu_mul_ref(b + 1, h2 + 1, n);
    long bad = 0;
    for (size_t i = 0; i < n; i++) {
        if (memcmp(&a[i + 1], &b[i + 1], 4)) {
            if (bad < 5)
                fprintf(stderr, "  %s: g = %a, h2 = %a: %a, reference %a\n", what, g[i], h2[i + 1],
                        a[i + 1], b[i + 1]);
            bad++;
        }
    }
    free(a);
    free(b);
    free(h2);
    return bad;
}

static void test_exponents(void) {
    size_t n = 512 * 1024 + 7; /* not a multiple of the vector width */
    float *g = malloc(n * sizeof *g);
    size_t k = 0;
    for (uint32_t se = 0; se < 512; se++)
        for (uint32_t j = 0; j < 1024; j++) {
            /* the low and high mantissa bits, then random ones */
            uint32_t m = j < 16 ? j : j < 32 ? 0x7fffffu - (j - 16) : next() & 0x7fffffu;
            g[k++] = from_bits(se << 23 | m);
        }
    for (; k < n; k++) g[k] = from_bits(next());
    long bad = compare(g, n, "exponent sweep");
    CHECK_MSG(bad == 0, "%ld of %zu differ (every sign and exponent)", bad, n);
    free(g);
}

static void test_edges(void) {
    /* every float in [80, 104] and [-104, -80] */
    uint32_t lo = 0x42a00000u, hi = 0x42d00000u; /* 80, 104 */
    size_t n = 2 * (size_t)(hi - lo + 1);
    float *g = malloc(n * sizeof *g);
    size_t k = 0;
    for (uint32_t u = lo; u <= hi; u++) {
        g[k++] = from_bits(u);
        g[k++] = from_bits(u | 0x80000000u);
    }
    long bad = compare(g, n, "edges");
    CHECK_MSG(bad == 0, "%ld of %zu differ in |g| in [80, 104]", bad, n);
    free(g);

    const float sp[] = {0.0f, -0.0f, FLT_MIN, -FLT_MIN, from_bits(1), from_bits(0x80000001u),
                        from_bits(0x007fffffu), FLT_MAX, -FLT_MAX, INFINITY, -INFINITY,
                        from_bits(0x7fc00000u), from_bits(0xffc00000u), from_bits(0x7f800001u),
                        from_bits(0x7fa5a5a5u), from_bits(0xffbadbadu), 88.0f, -88.0f,
                        from_bits(0x42afffffu), from_bits(0xc2afffffu), 0x1.62e42ep6f,
                        -0x1.9fe368p6f, -0x1.9d1d9ep6f, 1.0f, -1.0f, 0.5f, 1e-20f};
    /* each special value in every lane of a vector of ordinary ones */
    enum { W = 16 };
    float v[W];
    long bad2 = 0;
    for (size_t s = 0; s < sizeof sp / sizeof sp[0]; s++)
        for (int lane = 0; lane < W; lane++) {
            for (int i = 0; i < W; i++) v[i] = (float)(i - 7) * 0.37f;
            v[lane] = sp[s];
            bad2 += compare(v, W, "special values");
        }
    CHECK_MSG(bad2 == 0, "%ld special-value lanes differ", bad2);
}

static void test_lengths(void) {
    float g[40];
    for (int i = 0; i < 40; i++) g[i] = ((float)i - 20.0f) * 1.7f;
    long bad = 0;
    for (size_t n = 0; n <= 40; n++) bad += compare(g, n, "lengths");
    CHECK_MSG(bad == 0, "%ld differ over lengths 0..40", bad);
}

int main(void) {
#if defined(__AVX512F__) || (defined(__AVX2__) && defined(__FMA__))
    /* the vector path matched this libm at its first call (not the reference) */
    CHECK_MSG(FAST_VECTOR() == 1, "the vector path is off: this libm's expf is not glibc's "
                                  "FMA expf (outputs stay the same, through the reference)");
#endif
    test_exponents();
    test_edges();
    test_lengths();
    return check_summary(TEST_NAME);
}
