/* test_quant_avx2.c - the AVX2+FMA code path of kernels/cpu/quant_cpu.c (the
 * code a machine without AVX-512 runs), compiled here under other names with
 * the AVX-512 macros hidden, then put through every check of test_quant.c.
 * <immintrin.h> comes first, with the real macros, so that its AVX-512
 * declarations exist; quant_cpu.c then sees only __AVX2__/__FMA__/__F16C__.
 * (Built with the project's -march=native: on a machine without AVX2 this is
 * the scalar test again.) */
#include "hide_avx512.h"
#define kb_dequant kb_dequant_avx2
#define kb_matvec kb_matvec_avx2
#define kb_matvec_exact kb_matvec_exact_avx2
#define kb_matvec_q8 kb_matvec_q8_avx2
#define kb_matvec_set_mode kb_matvec_set_mode_avx2
#define kb_matvec_mode kb_matvec_mode_avx2
#define kb_matvec_mode_name kb_matvec_mode_name_avx2
#define kb_matvec_multi kb_matvec_multi_avx2
#define kb_r16_available kb_r16_available_avx2
#define kb_r16_regroups kb_r16_regroups_avx2
#define kb_matvec_default_mode kb_matvec_default_mode_avx2
#define kb_r16_dequant kb_r16_dequant_avx2
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

#define FAST_DEQUANT kb_dequant_avx2
#define FAST_MATVEC kb_matvec_avx2
#define FAST_MATVEC_EXACT kb_matvec_exact_avx2
#define FAST_MATVEC_Q8 kb_matvec_q8_avx2
#define FAST_SET_MODE kb_matvec_set_mode_avx2
#define FAST_MODE kb_matvec_mode_avx2
#define FAST_MODE_NAME kb_matvec_mode_name_avx2
#define FAST_MATVEC_MULTI kb_matvec_multi_avx2
#define FAST_R16 kb_r16_available_avx2
#define FAST_R16_DEQUANT kb_r16_dequant_avx2
#define TEST_NAME "quant_avx2"
#include "test_quant.c"
