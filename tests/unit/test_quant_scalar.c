/* test_quant_scalar.c - the plain-C fallback of kernels/cpu/quant_cpu.c (the
 * code a machine without AVX2 runs), compiled here under other names with the
 * SIMD macros hidden, then put through every check of test_quant.c. */
#undef __AVX2__
#undef __F16C__
#undef __AVX512VNNI__
#define kb_dequant kb_dequant_scalar
#define kb_matvec kb_matvec_scalar
#include "kernels/cpu/quant_cpu.c"
#undef kb_dequant
#undef kb_matvec

#define FAST_DEQUANT kb_dequant_scalar
#define FAST_MATVEC kb_matvec_scalar
#define TEST_NAME "quant_scalar"
#include "test_quant.c"
