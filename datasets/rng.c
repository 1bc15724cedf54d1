/* rng.c - xoshiro256** with splitmix64 seeding (rng.h). */
#include "datasets/rng.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kb_base.h"

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

void rng_seed(kb_rng *r, uint64_t seed) {
    uint64_t x = seed;
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
}

uint64_t rng_hash_str(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; s && *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ull;
    }
    return h;
}

void rng_derive(kb_rng *r, uint64_t seed, const char *label, uint64_t a, uint64_t b) {
    uint64_t x = seed ^ rng_hash_str(label);
    uint64_t k = splitmix64(&x) ^ (a * 0xD6E8FEB86659FD93ull);
    x = k;
    k = splitmix64(&x) ^ (b * 0xA0761D6478BD642Full);
    rng_seed(r, k);
}

static inline uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t rng_next(kb_rng *r) {
    uint64_t *s = r->s;
    uint64_t out = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return out;
}

uint64_t rng_below(kb_rng *r, uint64_t n) {
    if (n <= 1) return 0;
    /* rejection sampling: drop the top partial block of the 2^64 range */
    uint64_t limit = UINT64_MAX - (UINT64_MAX % n) - 1;
    for (;;) {
        uint64_t x = rng_next(r);
        if (x <= limit) return x % n;
    }
}

long rng_range(kb_rng *r, long lo, long hi) {
    return lo + (long)rng_below(r, (uint64_t)(hi - lo) + 1);
}

void rng_shuffle(kb_rng *r, void *base, size_t n, size_t size) {
    unsigned char *b = base, tmp[256];
    if (size > sizeof tmp) return; /* callers shuffle pointers and small structs */
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)rng_below(r, i);
        if (j == i - 1) continue;
        memcpy(tmp, b + (i - 1) * size, size);
        memcpy(b + (i - 1) * size, b + j * size, size);
        memcpy(b + j * size, tmp, size);
    }
}

void rng_sample(kb_rng *r, int n, int k, int *out) {
    if ((long)k * 4 <= n) {
        /* few picks from many: redraw duplicates */
        for (int i = 0; i < k; i++) {
            int v, dup;
            do {
                v = (int)rng_below(r, (uint64_t)n);
                dup = 0;
                for (int j = 0; j < i; j++) dup |= out[j] == v;
            } while (dup);
            out[i] = v;
        }
        return;
    }
    /* partial Fisher-Yates over an index table */
    int *tab = KB_MALLOC((size_t)n * sizeof *tab);
    for (int i = 0; i < n; i++) tab[i] = i;
    for (int i = 0; i < k; i++) {
        int j = i + (int)rng_below(r, (uint64_t)(n - i));
        int t = tab[i];
        tab[i] = tab[j];
        tab[j] = t;
        out[i] = tab[i];
    }
    free(tab);
}

void rng_uuid4(kb_rng *r, char out[37]) {
    uint64_t hi = rng_next(r), lo = rng_next(r);
    hi = (hi & ~0xF000ull) | 0x4000ull;                 /* version 4 */
    lo = (lo & ~(3ull << 62)) | (2ull << 62);           /* variant 10 */
    snprintf(out, 37, "%08x-%04x-%04x-%04x-%012llx", (unsigned)(hi >> 32),
             (unsigned)((hi >> 16) & 0xFFFF), (unsigned)(hi & 0xFFFF), (unsigned)(lo >> 48),
             (unsigned long long)(lo & 0xFFFFFFFFFFFFull));
}
