/* test_act_avx2.c - the AVX2+FMA path of kernels/cpu/act_cpu.c (what a
 * machine without AVX-512 runs), compiled here under other names with the
 * AVX-512 macros hidden, then put through every check of test_act.c. (On a
 * machine without AVX2 this is the reference against itself.) */
#include "hide_avx512.h"
#define kb_silu_mul kb_silu_mul_avx2
#define kb_silu_mul_vector kb_silu_mul_vector_avx2
#include "kernels/cpu/act_cpu.c"
#undef kb_silu_mul
#undef kb_silu_mul_vector

#define FAST_SILU kb_silu_mul_avx2
#define FAST_VECTOR kb_silu_mul_vector_avx2
#define TEST_NAME "act_avx2"
#include "test_act.c"
