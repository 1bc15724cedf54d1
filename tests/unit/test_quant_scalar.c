/* test_quant_scalar.c - the plain-C fallback of kernels/cpu/quant_cpu.c (the
 * code a machine without AVX2 runs), compiled here under other names with the
 * SIMD macros hidden, then put through every check of test_quant.c. */
#undef __AVX512F__
#undef __AVX512BW__
#undef __AVX512VL__
#undef __AVX512DQ__
#undef __AVX512VNNI__
#undef __AVX2__
#undef __FMA__
#undef __F16C__
#define kb_dequant kb_dequant_scalar
#define kb_matvec kb_matvec_scalar
#define kb_matvec_exact kb_matvec_exact_scalar
#define kb_matvec_q8 kb_matvec_q8_scalar
#define kb_matvec_set_mode kb_matvec_set_mode_scalar
#define kb_matvec_mode kb_matvec_mode_scalar
#define kb_matvec_mode_name kb_matvec_mode_name_scalar
#define kb_matvec_multi kb_matvec_multi_scalar
#define kb_r16_available kb_r16_available_scalar
#define kb_r16_regroups kb_r16_regroups_scalar
#define kb_matvec_default_mode kb_matvec_default_mode_scalar
#define kb_r16_dequant kb_r16_dequant_scalar
#include "kernels/cpu/quant_cpu.c"
#undef kb_dequant
#undef kb_matvec
#undef kb_matvec_exact
#undef kb_matvec_q8
#undef kb_matvec_set_mode
#undef kb_matvec_mode
#undef kb_matvec_mode_name
#undef kb_matvec_multi
#undef kb_r16_available
#undef kb_r16_regroups
#undef kb_matvec_default_mode
#undef kb_r16_dequant

#define FAST_DEQUANT kb_dequant_scalar
#define FAST_MATVEC kb_matvec_scalar
#define FAST_MATVEC_EXACT kb_matvec_exact_scalar
#define FAST_MATVEC_Q8 kb_matvec_q8_scalar
#define FAST_SET_MODE kb_matvec_set_mode_scalar
#define FAST_MODE kb_matvec_mode_scalar
#define FAST_MODE_NAME kb_matvec_mode_name_scalar
#define FAST_MATVEC_MULTI kb_matvec_multi_scalar
#define FAST_R16 kb_r16_available_scalar
#define FAST_R16_DEQUANT kb_r16_dequant_scalar
#define TEST_NAME "quant_scalar"
#include "test_quant.c"
