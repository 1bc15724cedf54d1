/* test_base.c - fp16/bf16 conversion against independent definitions. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "kernels/kb_base.h"
#include "kernels/kvstream.h"

/* Independent fp16 decode: value = (-1)^s * 2^(e-15) * (1 + m/1024), or subnormal. */
static double f16_value(uint16_t h) {
    int s = h >> 15, e = (h >> 10) & 31, m = h & 1023;
    double v;
    if (e == 0) v = ldexp((double)m, -24);
    else if (e == 31) v = m ? NAN : INFINITY;
    else v = ldexp(1.0 + m / 1024.0, e - 15);
    return s ? -v : v;
}

/* kb_base.h's error helpers and type names, worked by hand from its text:
 * kb_err_prefix prepends "prefix: " and keeps the code (KB_ERUNTIME where
 * none was set), the old message cut to the message's 1023 bytes; kb_env_fail writes
 * "NAME='value': expected ...", control bytes as \xNN, a long value cut
 * with "...", and returns KB_EINPUT; KB_CALLOC zeroes; the dtype names
 * round-trip and nothing else parses. */
static void test_errors_and_names(void) {
    kb_err e = {0};
    CHECK_EQ_INT(kb_fail(&e, KB_EINPUT, "bad %d", 7), KB_EINPUT);
    CHECK_EQ_INT(e.code, KB_EINPUT);
    CHECK_STREQ(e.msg, "bad 7");
    CHECK_EQ_INT(kb_err_prefix(&e, "ctx %s", "x"), KB_EINPUT);
    CHECK_STREQ(e.msg, "ctx x: bad 7");
    CHECK_EQ_INT(e.code, KB_EINPUT);
    kb_err none = {0};
    snprintf(none.msg, sizeof none.msg, "m");
    CHECK_EQ_INT(kb_err_prefix(&none, "p"), KB_ERUNTIME); /* no code set */
    CHECK_STREQ(none.msg, "p: m");
    /* a long message: "prefix: " and as much of it as fits in 1023 bytes */
    char old[1100];
    memset(old, 'b', 1020);
    old[1020] = 0;
    kb_fail(&e, KB_ERUNTIME, "%s", old);
    kb_err_prefix(&e, "ctx");
    CHECK_EQ_INT((int)strlen(e.msg), 1023);
    CHECK(!memcmp(e.msg, "ctx: bbb", 8) && strspn(e.msg + 5, "b") == 1018);
    /* a long prefix: cut to its 511 bytes (kb_base.h), then ": m" */
    char pre[700];
    memset(pre, 'a', 600);
    pre[600] = 0;
    kb_fail(&e, KB_ERUNTIME, "m");
    kb_err_prefix(&e, "%s", pre);
    size_t n = strlen(e.msg);
    CHECK(n == 514 && !strcmp(e.msg + n - 3, ": m") && strspn(e.msg, "a") == 511);
    CHECK_EQ_INT(kb_err_prefix(NULL, "x"), KB_ERUNTIME);

    CHECK_EQ_INT(kb_env_fail(&e, "KVBENCH_X", "a\tb\x7f", "y or z"), KB_EINPUT);
    CHECK_STREQ(e.msg, "KVBENCH_X='a\\x09b\\x7f': expected y or z");
    CHECK_EQ_INT(e.code, KB_EINPUT);
    char longv[400];
    memset(longv, 'v', sizeof longv - 1);
    longv[sizeof longv - 1] = 0;
    kb_env_fail(&e, "N", longv, "E");
    const char *q = strchr(e.msg, '\'');
    CHECK(q && strstr(e.msg, "...': expected E") && strspn(q + 1, "v") < strlen(longv) && strspn(q + 1, "v") >= 200);
    kb_env_fail(&e, "N", NULL, "E");
    CHECK_STREQ(e.msg, "N='': expected E");

    /* KB_CALLOC gives zeros, also where the allocator hands back a block just
     * freed with other bytes in it (malloc would keep them) */
    for (int i = 0; i < 8; i++) {
        unsigned char *d = KB_MALLOC(4096);
        memset(d, 0xAA, 4096);
        free(d);
        unsigned char *z = KB_CALLOC(64, 64);
        int nz = 0;
        for (int k = 0; k < 4096; k++) nz += z[k] != 0;
        CHECK_EQ_INT(nz, 0);
        free(z);
    }

    const kb_dtype ts[] = {KB_F32, KB_F16, KB_BF16};
    const char *names[] = {"f32", "f16", "bf16"};
    for (int i = 0; i < 3; i++) {
        kb_dtype t = KB_F32;
        CHECK_STREQ(kb_dtype_name(ts[i]), names[i]);
        CHECK_EQ_INT(kb_dtype_parse(names[i], &t), 0);
        CHECK_EQ_INT((int)t, (int)ts[i]);
        CHECK_EQ_INT((int)kb_dtype_size(ts[i]), i ? 2 : 4);
    }
    const char *bad[] = {"", "f8", "F16", "bf", "bf1", "bf16 ", "f160", "f3", "f322"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        kb_dtype t = KB_F16;
        CHECK_MSG(kb_dtype_parse(bad[i], &t) == KB_EINPUT && t == KB_F16, "'%s' parsed", bad[i]);
    }
}

int main(void) {
    /* every half value decodes to its mathematical value */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        double want = f16_value((uint16_t)h);
        float got = kb_f16_to_f32((uint16_t)h);
        if (isnan(want) ? !isnan(got) : (double)got != want) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* round trip of every finite half is exact */
    bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        if (((h >> 10) & 31) == 31) continue;
        if (kb_f32_to_f16(kb_f16_to_f32((uint16_t)h)) != h) bad++;
    }
    CHECK_EQ_INT(bad, 0);
    /* f32 -> f16 picks the nearest half (ties to even) - brute force over halves */
    srand(1);
    bad = 0;
    for (int i = 0; i < 20000; i++) {
        float x = (float)((rand() / (double)RAND_MAX - 0.5) * ldexp(1.0, rand() % 40 - 26));
        uint16_t h = kb_f32_to_f16(x);
        double err = fabs(f16_value(h) - x);
        /* neighbours must not be strictly closer */
        for (int d = -1; d <= 1; d += 2) {
            uint16_t n = (uint16_t)(h + d);
            if (((n >> 10) & 31) == 31 || (n & 0x7fff) == 0x7fff) continue;
            if ((n ^ h) & 0x8000) continue;
            double e2 = fabs(f16_value(n) - x);
            if (e2 < err || (e2 == err && (h & 1))) bad++;
        }
    }
    CHECK_EQ_INT(bad, 0);
    /* the bulk conversion (vectorised) gives kb_f32_to_f16's bits on every
     * kind of input: random bit patterns (NaN payloads, subnormals, both
     * infinities), every half and the midpoints between neighbouring halves */
    {
        enum { N = 3 * 65536 + 4099 };
        static float xs[N];
        static uint16_t hv[N];
        unsigned long long r = 12345;
        int m = 0;
        for (uint32_t h = 0; h < 65536; h++) {
            uint32_t u;
            float f = kb_f16_to_f32((uint16_t)h), g = kb_f16_to_f32((uint16_t)(h + 1));
            xs[m++] = f;
            if (((h >> 10) & 31) < 31 && (h & 0x3ff) != 0x3ff) xs[m++] = (float)(((double)f + g) / 2); /* tie */
            else xs[m++] = f;
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            u = (uint32_t)r;
            memcpy(&xs[m++], &u, 4);
        }
        for (; m < N; m++) xs[m] = (float)m * 1e-3f;
        kb_convert_from_f32(KB_F16, xs, hv, N);
        bad = 0;
        for (int i = 0; i < N; i++) bad += hv[i] != kb_f32_to_f16(xs[i]);
        CHECK_EQ_INT(bad, 0);
    }
    CHECK_EQ_INT(kb_f32_to_f16(65520.0f), 0x7c00);  /* rounds to inf */
    CHECK_EQ_INT(kb_f32_to_f16(65504.0f), 0x7bff);
    CHECK_EQ_INT(kb_f32_to_bf16(1.0f), 0x3f80);
    CHECK(kb_bf16_to_f32(0x4049) == 3.140625f);
    /* f32 -> bf16 picks the nearer of the two bf16 values around x (ties to
     * the even one), brute force in double: a bf16 is the top 16 bits of an
     * f32 (value bf16_value below, written here from that definition). Random
     * bit patterns, plus exact midpoints (the low 16 bits 0x8000) where only
     * the tie rule decides. Exact comparison: every value involved is exact
     * in double. NaN stays NaN (a NaN whose payload is only in the low bits
     * must not truncate to infinity), sign kept. */
    {
        unsigned long long r = 777;
        bad = 0;
        for (int i = 0; i < 200000; i++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            uint32_t u = (uint32_t)r;
            if (i % 4 == 0) u = (u & 0xffff0000u) | 0x8000u; /* a midpoint */
            float x;
            memcpy(&x, &u, 4);
            uint16_t h = kb_f32_to_bf16(x);
            if (isnan(x)) {
                bad += (h & 0x7f80) != 0x7f80 || (h & 0x7f) == 0 || (h >> 15) != (u >> 31);
                continue;
            }
            uint16_t lo = (uint16_t)(u >> 16), hi = (uint16_t)(lo + 1); /* |lo| <= |x| < |hi| */
            uint32_t ul = (uint32_t)lo << 16, uh = (uint32_t)hi << 16;
            float fl, fh;
            memcpy(&fl, &ul, 4);
            memcpy(&fh, &uh, 4);
            /* past the largest finite bf16 the upper neighbour is inf: as 2^128 */
            double vl = fl, vh = isinf(fh) ? copysign(ldexp(1.0, 128), fh) : fh;
            if (isinf(x)) {
                bad += h != lo;
                continue;
            }
            double el = fabs(vl - x), eh = fabs(vh - x);
            uint16_t want = el < eh ? lo : eh < el ? hi : (lo & 1) ? hi : lo;
            bad += h != want;
        }
        CHECK_EQ_INT(bad, 0);
        float qn;
        uint32_t qb = 0xff800001u; /* -NaN, payload in the lowest bit only */
        memcpy(&qn, &qb, 4);
        CHECK(isnan(kb_bf16_to_f32(kb_f32_to_bf16(qn))) && (kb_f32_to_bf16(qn) & 0x8000));
        /* the infinities stay infinities (the random patterns above almost
         * never draw one): sign, all-ones exponent, no mantissa */
        CHECK_EQ_INT(kb_f32_to_bf16(INFINITY), 0x7f80);
        CHECK_EQ_INT(kb_f32_to_bf16(-INFINITY), 0xff80);
    }

    /* kvstream append / gather / truncate */
    kb_kvstream s, t;
    kvstream_init(&s, KB_F16, 4, 0);
    kvstream_init(&t, KB_F16, 4, 0);
    for (int i = 0; i < 100; i++) {
        float k[4] = {(float)i, 1, 2, 3}, v[4] = {(float)-i, 0, 0, 0};
        kvstream_append_f32(&s, k, v, 1000 + i);
    }
    /* growth (16 -> 128 slots) kept every K and V row: V shares K's block */
    bad = 0;
    for (int i = 0; i < 100; i++) {
        float kk[4], vv[4];
        kvstream_get_f32(&s, i, kk, vv);
        bad += kk[0] != (float)i || kk[3] != 3.0f || vv[0] != (float)-i || s.pos[i] != 1000 + i;
    }
    CHECK_EQ_INT(bad, 0);
    CHECK((char *)s.V >= (char *)s.K + (size_t)s.cap * 4 * 2 && ((uintptr_t)s.V & 63) == 0);
    /* a reservation after the first rows keeps them (one row, then growth by
     * reserve rather than by append) */
    {
        kb_kvstream u;
        kvstream_init(&u, KB_F32, 4, 0);
        float k1[4] = {7, 8, 9, 10}, v1[4] = {-7, -8, -9, -10}, kk[4], vv[4];
        kvstream_append_f32(&u, k1, v1, 42);
        kvstream_reserve(&u, 1000);
        kvstream_get_f32(&u, 0, kk, vv);
        CHECK(u.n == 1 && u.cap >= 1000 && !memcmp(kk, k1, sizeof kk) && !memcmp(vv, v1, sizeof vv) && u.pos[0] == 42);
        kvstream_free(&u);
    }
    int32_t idx[3] = {5, 99, 0};
    kvstream_append_rows(&t, &s, idx, 3);
    float k[4], v[4];
    kvstream_get_f32(&t, 1, k, v);
    CHECK(k[0] == 99.0f && v[0] == -99.0f && t.pos[1] == 1099);
    kvstream_truncate(&s, 10);
    CHECK_EQ_INT(s.n, 10);
    kvstream_truncate(&s, 20); /* never grows */
    CHECK_EQ_INT(s.n, 10);
    /* a copy replaces what dst held (slots and positions), truncation to 0 empties */
    kvstream_copy(&t, &s);
    CHECK_EQ_INT(t.n, 10);
    bad = 0;
    for (int i = 0; i < 10; i++) {
        kvstream_get_f32(&t, i, k, v);
        bad += k[0] != (float)i || v[0] != (float)-i || t.pos[i] != 1000 + i;
    }
    CHECK_EQ_INT(bad, 0);
    kvstream_truncate(&t, 0);
    CHECK_EQ_INT(t.n, 0);
    int32_t idx2[3] = {5, 9, 0};
    kvstream_append_rows(&t, &s, idx2, 3);
    kvstream_get_f32(&t, 1, k, v);
    CHECK(t.n == 3 && k[0] == 9.0f && v[0] == -9.0f && t.pos[1] == 1009 && t.pos[2] == 1000);
    CHECK_EQ_INT(kvstream_bytes(&t), 2 * 3 * 4 * 2);
    kvstream_free(&s);
    kvstream_free(&t);

    /* which blocks go on huge pages (kernels/kb_base.h): those are 2 MiB
     * aligned, the others are not (a 64-aligned block from the allocator's
     * own mmap starts 64 bytes into a page). Expected by the stated rule:
     * >= 4 MiB, or >= 2 MiB growing by <= 1/8 when rounded to 2 MiB. */
    if (kb_hugepages_on()) {
        const size_t M = (size_t)1 << 20;
        struct { size_t n; int huge; } cases[] = {
            {1 * M, 0}, {2 * M, 1}, {2 * M + 64, 0}, {3 * M, 0}, {(size_t)(3.6 * M) & ~(size_t)63, 1},
            {4 * M - 64, 1}, {4 * M + 64, 1}, {5 * M, 1},
        };
        for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
            void *p = KB_AMALLOC(cases[i].n);
            int aligned = ((uintptr_t)p & (2 * M - 1)) == 0;
            if (aligned != cases[i].huge) fprintf(stderr, "  kb_amalloc(%zu): 2 MiB aligned %d\n", cases[i].n, aligned);
            CHECK_EQ_INT(aligned, cases[i].huge);
            kb_afree(p);
        }
        /* SmolLM2's f16 stream at 8K: K and V (1 MiB each) fill one huge page */
        kb_kvstream h;
        kvstream_init(&h, KB_F16, 64, 8192);
        CHECK(((uintptr_t)h.K & (2 * M - 1)) == 0 && (char *)h.V == (char *)h.K + M);
        kvstream_free(&h);
    }
    /* a size the roundings to 64 bytes or 2 MiB would wrap to a small block:
     * no memory (gguf_load_data once asked for 2^64 - 8 bytes, for an 88-byte
     * GGUF file whose data section would start at byte 96, and got 64) */
    {
        size_t sizes[] = {SIZE_MAX, SIZE_MAX - 27, SIZE_MAX - ((size_t)2 << 20)};
        for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
            void *p = kb_amalloc_try(sizes[i]);
            CHECK_MSG(p == NULL, "kb_amalloc_try(%zu) gave a block", sizes[i]);
            kb_afree(p);
        }
    }
    test_errors_and_names();
    return check_summary("test_base");
}
