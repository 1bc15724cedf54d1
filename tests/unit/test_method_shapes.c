/* test_method_shapes.c - every method against the brute force of
 * methods_brute.h (method_harness.h: every kept set, every selection, every
 * output) on the shapes and options test_method.c does not reach, each of
 * which takes its own branch somewhere in the kernels or the methods:
 *   - one KV head with G = 12 and 16 (more than 8 heads per group), and
 *     G = 12 with D = 33;
 *   - head dims 7, 33, 40, 72 (no multiple of the vector width) and 260
 *     (above 256: the top-r of dims takes another path);
 *   - context lengths that are no multiple of the page size (37, 203, 640,
 *     1999), page sizes 3, 5, 6, 7, 17, 20, 33, 40 (above 16: a scalar path),
 *     odd budgets 47 and 33, and the smallest allowed, 16;
 *   - f32 and bf16 caches beside f16;
 *   - a second turn shorter than the window (7 tokens) and longer (77, 150).
 * Found by a review of the methods against methods.md (stop 59): all of them
 * matched; these keep them matching. Tolerance 2e-4 relative on outputs, as
 * test_method.c: f16/bf16 rounding of the stored rows, f32 sums in a
 * different order from the brute force's double sums. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "method_harness.h"

static int fails;

static void one(const char *fmt, int budget, scen *s) {
    char json[256], label[512];
    snprintf(json, sizeof json, fmt, budget);
    snprintf(label, sizeof label, "%s Hq=%d Hkv=%d D=%d L=%d kind=%d dtype=%d", json, s->Hq, s->Hkv, s->D,
             s->L, s->kind, (int)s->dt);
    mh_result r;
    int bad = mh_compare(json, s, 2e-4, label, &r);
    CHECK_MSG(bad == 0, "%s: %d problems (max err %g)", label, bad, r.max_err);
    fails += bad != 0;
}

/* Group sizes, head dims and unaligned lengths, every method, f16 / bf16 / f32. */
static void test_shapes(void) {
    static const char *const methods[] = {
        "{\"method\":\"exact_topk\",\"budget\":%d}",
        "{\"method\":\"exact_topk\",\"budget\":%d,\"gqa\":\"group_mean\"}",
        "{\"method\":\"snapkv\",\"budget\":%d}",
        "{\"method\":\"snapkvpp\",\"budget\":%d}",
        "{\"method\":\"quest\",\"budget\":%d}",
        "{\"method\":\"quest\",\"budget\":%d,\"gqa\":\"group_mean\"}",
        "{\"method\":\"sparq\",\"budget\":%d}",
        "{\"method\":\"sparq\",\"budget\":%d,\"gqa\":\"per_head\",\"reallocate_mean_v\":true,\"local_window\":4}",
        "{\"method\":\"hybrid\",\"budget\":%d}",
        "{\"method\":\"hybrid\",\"budget\":%d,\"page_size\":3}",
        "{\"method\":\"hybrid\",\"budget\":%d,\"page_size\":5,\"gqa\":\"per_head\"}",
        "{\"method\":\"rocketkv\",\"budget\":%d}",
        "{\"method\":\"rocketkv\",\"budget\":%d,\"page_size\":7}",
        "{\"method\":\"rocketkv_mt\",\"budget\":%d}",
    };
    static const int shapes[][3] = {{12, 1, 64}, {16, 1, 33}, {10, 2, 72}, {4, 4, 7}, {24, 2, 40}, {3, 1, 260}};
    static const kb_dtype dts[] = {KB_F16, KB_BF16, KB_F32};
    static const int lens[] = {37, 203};
    unsigned long long seed = 77;
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++)
        for (size_t sh = 0; sh < sizeof shapes / sizeof shapes[0]; sh++)
            for (int li = 0; li < 2; li++)
                for (int kind = 0; kind < 5; kind++) {
                    scen s;
                    scen_make(&s, shapes[sh][0], shapes[sh][1], shapes[sh][2], lens[li], 4, kind, seed);
                    s.dt = dts[seed++ % 3];
                    one(methods[m], 48, &s);
                    scen_free(&s);
                }
}

/* Page sizes past the vector paths, odd and minimal budgets, other options. */
static void test_pages_and_budgets(void) {
    static const char *const methods[] = {
        "{\"method\":\"hybrid\",\"budget\":%d,\"page_size\":20}",
        "{\"method\":\"hybrid\",\"budget\":%d,\"page_size\":33,\"gqa\":\"group_sum\"}",
        "{\"method\":\"hybrid\",\"budget\":%d}",
        "{\"method\":\"quest\",\"budget\":%d,\"page_size\":5}",
        "{\"method\":\"quest\",\"budget\":%d,\"page_size\":40,\"gqa\":\"group_mean\",\"budget_mode\":\"topk\"}",
        "{\"method\":\"rocketkv\",\"budget\":%d,\"page_size\":17}",
        "{\"method\":\"rocketkv\",\"budget\":%d,\"window\":64,\"kernel\":\"adaptive\"}",
        "{\"method\":\"rocketkv_mt\",\"budget\":%d,\"alpha\":0.7}",
        "{\"method\":\"snapkv\",\"budget\":%d,\"pooling\":\"avg\",\"kernel\":9,\"window\":8}",
        "{\"method\":\"sparq\",\"budget\":%d,\"budget_mode\":\"topk\",\"r\":5,\"local_window\":30,"
        "\"reallocate_mean_v\":true}",
        "{\"method\":\"exact_topk\",\"budget\":%d,\"gqa\":\"group_sum\"}",
    };
    static const int shapes[][3] = {{9, 3, 64}, {8, 1, 48}};
    static const int lens[] = {1999, 640}, budgets[] = {16, 47, 33};
    unsigned long long seed = 991;
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++)
        for (int sh = 0; sh < 2; sh++)
            for (int li = 0; li < 2; li++)
                for (int bi = 0; bi < 3; bi++) {
                    scen s;
                    scen_make(&s, shapes[sh][0], shapes[sh][1], shapes[sh][2], lens[li], 5, (int)(seed % 5), seed);
                    seed++;
                    one(methods[m], budgets[bi], &s);
                    scen_free(&s);
                }
}

/* A second turn shorter and longer than the window. */
static void test_second_turns(void) {
    static const char *const methods[] = {
        "{\"method\":\"snapkv\",\"budget\":%d}",
        "{\"method\":\"snapkvpp\",\"budget\":%d,\"window\":40}",
        "{\"method\":\"quest\",\"budget\":%d}",
        "{\"method\":\"sparq\",\"budget\":%d,\"reallocate_mean_v\":true}",
        "{\"method\":\"hybrid\",\"budget\":%d,\"page_size\":6}",
        "{\"method\":\"rocketkv\",\"budget\":%d}",
        "{\"method\":\"rocketkv\",\"budget\":%d,\"window\":128}",
        "{\"method\":\"rocketkv_mt\",\"budget\":%d}",
        "{\"method\":\"rocketkv_mt\",\"budget\":%d,\"window\":128,\"page_size\":5}",
        "{\"method\":\"exact_topk\",\"budget\":%d}",
    };
    static const int shapes[][3] = {{12, 1, 33}, {6, 2, 40}, {5, 5, 9}};
    static const int tl[] = {7, 77, 150};
    unsigned long long seed = 4242;
    for (size_t m = 0; m < sizeof methods / sizeof methods[0]; m++)
        for (int sh = 0; sh < 3; sh++)
            for (int ti = 0; ti < 3; ti++) {
                scen s, t;
                scen_make(&s, shapes[sh][0], shapes[sh][1], shapes[sh][2], 257, 4, (int)(seed % 5), seed);
                seed++;
                scen_make(&t, shapes[sh][0], shapes[sh][1], shapes[sh][2], tl[ti], 5, (int)(seed % 5), seed);
                seed++;
                char json[256], label[512];
                snprintf(json, sizeof json, methods[m], 48);
                snprintf(label, sizeof label, "%s two turns Hq=%d Hkv=%d D=%d second turn %d tokens", json, s.Hq,
                         s.Hkv, s.D, tl[ti]);
                mh_result r;
                int bad = mh_compare_turns(json, &s, &t, 2e-4, label, &r);
                CHECK_MSG(bad == 0 && r.steps == s.N + t.N, "%s: %d problems, %d steps", label, bad, r.steps);
                fails += bad != 0;
                scen_free(&s);
                scen_free(&t);
            }
}

int main(void) {
    test_shapes();
    test_pages_and_budgets();
    test_second_turns();
    if (fails) fprintf(stderr, "test_method_shapes: %d cases differ from the brute force\n", fails);
    return check_summary("test_method_shapes");
}
