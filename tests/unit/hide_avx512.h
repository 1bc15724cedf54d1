/* hide_avx512.h - included first by the *_avx2.c tests: <immintrin.h> with
 * the real macros (so that its AVX-512 declarations exist), then the AVX-512
 * feature macros removed, so that the kernel file the test includes next
 * compiles its AVX2+FMA+F16C path even on an AVX-512 machine. No include
 * guard on purpose: it only ever comes first in a test. */
#include <immintrin.h>
#undef __AVX512F__
#undef __AVX512BW__
#undef __AVX512VL__
#undef __AVX512DQ__
#undef __AVX512CD__
#undef __AVX512VNNI__
