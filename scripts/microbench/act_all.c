/* act_all.c - kb_silu_mul against kb_silu_mul_ref (libm's expf) over every
 * one of the 2^32 floats as g (h2 = 1), on the path this build compiles
 * (AVX-512 or AVX2+FMA) and on the AVX2+FMA path compiled with the AVX-512
 * macros hidden (tests/unit/hide_avx512.h). Not part of the suite (~45 s a
 * path); tests/unit/test_act.c checks ~7M chosen inputs. Exit 1 on any
 * difference. Build and run: scripts/microbench/act_all.sh */
#include "tests/unit/hide_avx512.h"
#define kb_silu_mul kb_silu_mul_avx2
#define kb_silu_mul_vector kb_silu_mul_vector_avx2
#include "kernels/cpu/act_cpu.c"
#undef kb_silu_mul
#undef kb_silu_mul_vector
/* the library's (this build's) path: act.h was read above under the macros */
void kb_silu_mul(float *h, const float *h2, size_t n);
int kb_silu_mul_vector(void);

#include <stdio.h>
#include <stdlib.h>

typedef void (*silu_fn)(float *, const float *, size_t);

static long sweep(const char *name, silu_fn fast) {
    enum { C = 1 << 20 };
    float *a = malloc(C * sizeof *a), *b = malloc(C * sizeof *b), *one = malloc(C * sizeof *one);
    for (int i = 0; i < C; i++) one[i] = 1.0f;
    long bad = 0;
    for (uint64_t base = 0; base < (1ull << 32); base += C) {
        for (int i = 0; i < C; i++) {
            uint32_t u = (uint32_t)(base + (uint64_t)i);
            memcpy(&a[i], &u, 4);
        }
        memcpy(b, a, (size_t)C * 4);
        fast(a, one, C);
        kb_silu_mul_ref(b, one, C);
        for (int i = 0; i < C; i++)
            if (memcmp(&a[i], &b[i], 4)) {
                if (bad < 10)
                    printf("%s: g bits %08x: %a, reference %a\n", name, (unsigned)(base + (uint64_t)i), a[i], b[i]);
                bad++;
            }
    }
    printf("%s: %ld of 2^32 differ\n", name, bad);
    free(a);
    free(b);
    free(one);
    return bad;
}

int main(void) {
    printf("vector paths in use: native %d, avx2 %d\n", kb_silu_mul_vector(), kb_silu_mul_vector_avx2());
    long bad = sweep("native", kb_silu_mul) + sweep("avx2", kb_silu_mul_avx2);
    return bad != 0;
}
