/* test_prefill.c - the exact prefill recorder (methods/prefill.h) against a
 * brute-force loop: a prompt fed in chunks of 3, 1, 6 and 3 tokens (as
 * forward_prefill feeds them, every layer per chunk) must give exact causal
 * attention for every query (token i of the prompt attends tokens 0..i; query
 * head h reads KV head h / G), keep every token's K/V at its position, and
 * keep the last W queries of each layer with their positions, across chunks
 * shorter and longer than W; a decode step attends the whole history; a reset
 * forgets the previous prompt's window. All of it through the tracing
 * wrapper (harness/wrapbe.h), which must pass every call through and record
 * the decode step of its layer only. One model of two layers and one of a
 * single layer (the window's positions come from layer 0).
 *
 * Tolerance: 1e-5 absolute plus relative on outputs of order 1 (the kernels'
 * f32 sums of at most 14 terms and their fast exp, 2e-7 relative, against
 * double); stored K/V, window queries and positions must be exact (f32
 * cache). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "harness/wrapbe.h"
#include "methods/prefill.h"

enum { HQ = 6, HKV = 2, D = 8, W = 5, T = 13 };

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float frand(void) { /* [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) * 0x1.0p-52 - 1.0);
}

/* exact attention of query q (head h) over tokens 0..last of one layer */
static void brute(const float *K, const float *V, const float *q, int h, int last, double *o) {
    int g = h / (HQ / HKV);
    double s[T + 1], mx = -INFINITY, sum = 0;
    for (int j = 0; j <= last; j++) {
        double dot = 0;
        for (int d = 0; d < D; d++) dot += (double)q[d] * K[((size_t)j * HKV + g) * D + d];
        s[j] = dot / sqrt((double)D);
        mx = fmax(mx, s[j]);
    }
    for (int d = 0; d < D; d++) o[d] = 0;
    for (int j = 0; j <= last; j++) sum += exp(s[j] - mx);
    for (int j = 0; j <= last; j++)
        for (int d = 0; d < D; d++) o[d] += exp(s[j] - mx) / sum * V[((size_t)j * HKV + g) * D + d];
}

static void check_out(const float *K, const float *V, const float *q, const float *out, int last,
                      const char *what) {
    int bad = 0;
    for (int h = 0; h < HQ; h++) {
        double o[D];
        brute(K, V, q + (size_t)h * D, h, last, o);
        for (int d = 0; d < D; d++) bad += !(fabs(out[(size_t)h * D + d] - o[d]) <= 1e-5 + 1e-5 * fabs(o[d]));
    }
    CHECK_MSG(bad == 0, "%s: token %d: %d outputs differ from exact attention", what, last, bad);
}

static void run(int NL) {
    /* per layer: Q [T+1][HQ][D], K/V [T+1][HKV][D] (row T: the decode step) */
    size_t qn = (size_t)(T + 1) * HQ * D, kn = (size_t)(T + 1) * HKV * D;
    float *Q = malloc(NL * qn * sizeof(float)), *K = malloc(NL * kn * sizeof(float)),
          *V = malloc(NL * kn * sizeof(float)), *out = malloc(qn * sizeof(float));
    for (size_t i = 0; i < NL * qn; i++) Q[i] = 2 * frand();
    for (size_t i = 0; i < NL * kn; i++) {
        K[i] = 2 * frand();
        V[i] = frand();
    }
    int32_t pos[T + 1];
    for (int i = 0; i <= T; i++) pos[i] = i;
    kb_prefill p;
    prefill_init(&p, NL, HQ, HKV, D, KB_F32, W, 4);
    kb_trace tr;
    trace_init(&tr, HQ, HKV, D, 1, T + 1, NL - 1);
    kb_trace_be tw;
    kb_attn_backend be = trace_be_wrap(&tw, prefill_backend(&p), &tr);
    kb_err e = {0};
    static const int chunks[] = {3, 1, 6, 3};
    int at = 0;
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        int n = chunks[c];
        for (int l = 0; l < NL; l++) {
            const float *Ql = Q + l * qn, *Kl = K + l * kn, *Vl = V + l * kn;
            CHECK_EQ_INT(be.prefill(be.ctx, l, n, pos + at, Ql + (size_t)at * HQ * D, Kl + (size_t)at * HKV * D,
                                    Vl + (size_t)at * HKV * D, out, &e),
                         0);
            for (int i = 0; i < n; i++) check_out(Kl, Vl, Ql + (size_t)(at + i) * HQ * D, out + (size_t)i * HQ * D, at + i, "prefill");
        }
        at += n;
        /* the window: the last min(W, at) queries of each layer, and their positions */
        int want = at < W ? at : W;
        CHECK_EQ_INT(p.n_q, want);
        for (int l = 0; l < NL; l++) {
            kb_prefill_view v = prefill_view(&p, l);
            CHECK_EQ_INT(v.Wq, want);
            CHECK(v.Hq == HQ && v.Hkv == HKV && v.D == D);
            CHECK_MSG(!memcmp(v.qwin, Q + l * qn + (size_t)(at - want) * HQ * D, (size_t)want * HQ * D * sizeof(float)),
                      "layer %d after %d tokens: window queries", l, at);
            for (int i = 0; i < want; i++) CHECK_EQ_INT(v.qwin_pos[i], at - want + i);
            for (int g = 0; g < HKV; g++) {
                CHECK_EQ_INT(v.kv[g].n, at);
                int badk = 0;
                float kr[D], vr[D];
                for (int j = 0; j < at; j++) {
                    kvstream_get_f32(&v.kv[g], j, kr, vr);
                    badk += v.kv[g].pos[j] != j;
                    badk += memcmp(kr, K + l * kn + ((size_t)j * HKV + g) * D, sizeof kr) != 0;
                    badk += memcmp(vr, V + l * kn + ((size_t)j * HKV + g) * D, sizeof vr) != 0;
                }
                CHECK_MSG(badk == 0, "layer %d KV head %d: %d slots differ", l, g, badk);
            }
        }
    }
    /* a decode step at position T attends all T + 1 tokens; its K/V are kept at T */
    for (int l = 0; l < NL; l++) {
        const float *Kl = K + l * kn, *Vl = V + l * kn;
        be.decode(be.ctx, l, T, Q + l * qn + (size_t)T * HQ * D, Kl + (size_t)T * HKV * D, Vl + (size_t)T * HKV * D, out);
        check_out(Kl, Vl, Q + l * qn + (size_t)T * HQ * D, out, T, "decode");
        kb_prefill_view v = prefill_view(&p, l);
        CHECK(v.kv[0].n == T + 1 && v.kv[0].pos[T] == T && v.kv[1].pos[T] == T);
    }
    /* the tracer kept the last layer's step: q, k, v as given */
    CHECK_EQ_INT(tr.N, 1);
    if (tr.N == 1) {
        size_t l = (size_t)NL - 1;
        CHECK(!memcmp(tr.q, Q + l * qn + (size_t)T * HQ * D, (size_t)HQ * D * sizeof(float)));
        CHECK(!memcmp(tr.knew, K + l * kn + (size_t)T * HKV * D, (size_t)HKV * D * sizeof(float)));
        CHECK(!memcmp(tr.vnew, V + l * kn + (size_t)T * HKV * D, (size_t)HKV * D * sizeof(float)));
    }
    trace_free(&tr);
    CHECK(prefill_bytes(&p) == (size_t)NL * HKV * (T + 1) * 2 * D * sizeof(float));
    /* the next sample: 2 tokens after a reset hold a window of 2, not 5 */
    prefill_reset(&p);
    CHECK_EQ_INT(p.n_q, 0);
    for (int l = 0; l < NL; l++)
        CHECK_EQ_INT(be.prefill(be.ctx, l, 2, pos, Q + l * qn + (size_t)7 * HQ * D, K + l * kn, V + l * kn, out, &e), 0);
    CHECK_EQ_INT(p.n_q, 2);
    for (int l = 0; l < NL; l++) {
        kb_prefill_view v = prefill_view(&p, l);
        CHECK_EQ_INT(v.Wq, 2);
        CHECK_EQ_INT(v.kv[0].n, 2);
        CHECK(!memcmp(v.qwin, Q + l * qn + (size_t)7 * HQ * D, (size_t)2 * HQ * D * sizeof(float)));
        CHECK(v.qwin_pos[0] == 0 && v.qwin_pos[1] == 1);
    }
    prefill_free(&p);
    free(Q);
    free(K);
    free(V);
    free(out);
}

int main(void) {
    run(2);
    run(1);
    return check_summary("prefill");
}
