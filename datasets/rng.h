/* rng.h - the seeded random generator of the task generators: xoshiro256**
 * seeded through splitmix64. Integer-only, so a seed gives the same samples on
 * every machine and compiler (rand() and floating-point sampling are avoided
 * wherever the result decides content). */
#ifndef KB_RNG_H
#define KB_RNG_H

#include <stddef.h>
#include <stdint.h>

typedef struct kb_rng {
    uint64_t s[4];
} kb_rng;

void rng_seed(kb_rng *r, uint64_t seed);
/* A generator for one purpose: seeded from the sweep seed, a label (task name,
 * "haystack", ...) and two integers (e.g. length and sample index), so each
 * sample's content is independent of which other samples are generated. */
void rng_derive(kb_rng *r, uint64_t seed, const char *label, uint64_t a, uint64_t b);
uint64_t rng_next(kb_rng *r);
/* Uniform integer in [0, n), unbiased (n >= 1). */
uint64_t rng_below(kb_rng *r, uint64_t n);
/* Uniform integer in [lo, hi] (inclusive). */
long rng_range(kb_rng *r, long lo, long hi);
/* Fisher-Yates shuffle of n elements of size bytes each. */
void rng_shuffle(kb_rng *r, void *base, size_t n, size_t size);
/* k distinct integers from [0, n) in random order (k <= n). */
void rng_sample(kb_rng *r, int n, int k, int *out);
/* A random UUID version 4 (RFC 4122), lowercase, 36 chars + NUL. */
void rng_uuid4(kb_rng *r, char out[37]);
/* 64-bit FNV-1a of a string (for labels). */
uint64_t rng_hash_str(const char *s);

#endif
