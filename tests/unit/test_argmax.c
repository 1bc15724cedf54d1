/* test_argmax.c - logits_argmax (harness/engine/forward.c, vectorised)
 * against its definition: the strict '>' scan from index 0 (first index of
 * the largest logit; NaNs never win; a NaN at index 0 is never beaten). */
#include <math.h>
#include <stdlib.h>

#include "check.h"
#include "harness/engine/model.h"

static int32_t argmax_def(const float *x, int n) {
    int32_t best = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

int main(void) {
    static float x[49152 + 7];
    for (int trial = 0; trial < 600; trial++) {
        int n = trial < 500 ? 1 + (int)(check_urand() * 200) : 49152 + (int)(check_urand() * 8);
        int kind = trial % 5;
        for (int i = 0; i < n; i++) {
            if (kind == 0) x[i] = (float)(int)(check_urand() * 4); /* many ties */
            else if (kind == 1) x[i] = check_urand() < 0.5 ? 0.0f : -0.0f;
            else x[i] = (float)(check_urand() * 40 - 20);
            if (kind == 3 && check_urand() < 0.1) x[i] = check_urand() < 0.5 ? NAN : -INFINITY;
        }
        if (kind == 4 && check_urand() < 0.5) x[0] = NAN;
        if (kind == 4) x[(int)(check_urand() * n)] = INFINITY;
        CHECK_MSG(logits_argmax(x, n) == argmax_def(x, n), "argmax n=%d kind=%d: %d vs %d", n, kind,
                  logits_argmax(x, n), argmax_def(x, n));
    }
    for (int i = 0; i < 40; i++) x[i] = NAN; /* all NaN */
    CHECK_EQ_INT(logits_argmax(x, 40), 0);
    for (int i = 0; i < 40; i++) x[i] = -INFINITY;
    x[33] = -INFINITY;
    CHECK_EQ_INT(logits_argmax(x, 40), 0);
    return check_summary("test_argmax");
}
