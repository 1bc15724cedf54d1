/* test_select_avx2.c - the AVX2+FMA+F16C code path of kernels/cpu/select_cpu.c
 * (the code a machine without AVX-512 runs), compiled here under other names
 * with the AVX-512 macros hidden, then put through every check of
 * test_select.c (against the references and the plain definitions there),
 * with a kernel table of the AVX2 functions standing in for kb_kernels_cpu
 * (test_select.c builds its page summaries with it).
 *
 * That includes the values the vector path promises, bit for bit, against
 * arithmetic written out there (test_hybrid_exact, test_quest_exact), which
 * here check the AVX2 path's sums in eight lanes.
 *
 * <immintrin.h> comes first, with the real macros, so that its AVX-512
 * declarations exist; select_cpu.c then sees only __AVX2__/__FMA__/__F16C__.
 * (Built with the project's -march=native: on a machine without AVX2 this is
 * the scalar test again, and the bit-for-bit checks are skipped.) */
#include "hide_avx512.h"
#define kb_cpu_topk kb_cpu_topk_avx2
#define kb_cpu_topk_pages kb_cpu_topk_pages_avx2
#define kb_cpu_attn_gather kb_cpu_attn_gather_avx2
#define kb_cpu_snapkv_scores kb_cpu_snapkv_scores_avx2
#define kb_cpu_pool1d kb_cpu_pool1d_avx2
#define kb_cpu_page_minmax kb_cpu_page_minmax_avx2
#define kb_cpu_quest_scores kb_cpu_quest_scores_avx2
#define kb_cpu_hybrid_scores kb_cpu_hybrid_scores_avx2
#define kb_kernels_cpu kb_kernels_cpu_avx2
#include "kernels/cpu/select_cpu.c"

const kb_kernels kb_kernels_cpu_avx2 = {
    .name = "cpu_avx2",
    .attn_gather = kb_cpu_attn_gather,
    .snapkv_scores = kb_cpu_snapkv_scores,
    .pool1d = kb_cpu_pool1d,
    .page_minmax = kb_cpu_page_minmax,
    .quest_scores = kb_cpu_quest_scores,
    .hybrid_scores = kb_cpu_hybrid_scores,
    .topk = kb_cpu_topk,
    .topk_pages = kb_cpu_topk_pages,
};

#define main test_select_main
#include "test_select.c"
#undef main

/* The top-k writes exactly k indices: nothing past them (the AVX2 path
 * writes the winners lane by lane, never a whole vector into idx). */
static void test_topk_bounds(void) {
    static float x[5000];
    static int32_t idx[5001];
    for (int trial = 0; trial < 40; trial++) {
        int n = 1 + (int)(check_urand() * 4999), k = 1 + (int)(check_urand() * n);
        if (trial % 2) k = 1 + (int)(check_urand() * (n / 8 + 1));
        for (int i = 0; i < n; i++) x[i] = trial % 3 ? nrand() : (float)(int)(check_urand() * 4);
        if (k > n) k = n;
        idx[k] = -7;
        int c = kb_cpu_topk(x, n, k, idx);
        CHECK_MSG(c == k && idx[k] == -7, "topk bounds n=%d k=%d", n, k);
    }
}

int main(void) {
    test_select_main(); /* with the exact checks of test_select.c, in 8 lanes */
    test_topk_bounds();
    return check_summary("select_avx2");
}
