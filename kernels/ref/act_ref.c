/* act_ref.c - the SwiGLU activation, by definition (libm expf, float). */
#include <math.h>

#include "kernels/act.h"

void kb_silu_mul_ref(float *h, const float *h2, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float g = h[i];
        h[i] = g / (1.0f + expf(-g)) * h2[i];
    }
}
