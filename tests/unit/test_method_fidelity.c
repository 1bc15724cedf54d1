/* test_method_fidelity.c - the fidelity instruments (methods/fidelity.h)
 * against values computed here by brute force: oracle top-k by a full
 * sort, exact softmax mass and output in double; KL and top-1 against
 * hand-computed values. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "method_harness.h"
#include "methods/fidelity.h"
#include "methods/params.h"
#include "methods_brute.h"

/* Runs `json` and a Full KV state side by side on s and checks the
 * instruments at every step against the brute force. */
static void check_method(const char *json, const scen *s, int expect_perfect) {
    kb_err e = {0};
    kb_method_params p, fp;
    CHECK(!method_params_parse_text(json, "t", &p, &e));
    CHECK(!method_params_parse_text("{\"method\":\"full\"}", "t", &fp, &e));
    kb_method_ctx c = scen_ctx(s);
    kb_prefill_view v = scen_view(s);
    void *st, *fst;
    CHECK(!p.ops->layer_init(&p, &c, &v, &st, &e));
    CHECK(!fp.ops->layer_init(&fp, &c, &v, &fst, &e));
    view_free(&v);
    int Hq = s->Hq, Hkv = s->Hkv, D = s->D, G = Hq / Hkv;
    br_hist h;
    br_hist_init(&h, Hq, Hkv, D);
    for (int t = 0; t < s->L; t++) br_hist_push(&h, s->k + (size_t)t * Hkv * D, s->v + (size_t)t * Hkv * D, s->dt);
    float *out = malloc((size_t)Hq * D * 4), *fout = malloc((size_t)Hq * D * 4);
    int n_all = s->L + s->N;
    int *all = malloc((size_t)n_all * sizeof(int)), *top = malloc((size_t)n_all * sizeof(int));
    double *sc = malloc((size_t)n_all * sizeof(double)), *ref = malloc((size_t)D * sizeof(double));
    for (int t = 0; t < n_all; t++) all[t] = t;
    for (int i = 0; i < s->N; i++) {
        const float *q = s->q + (size_t)i * Hq * D;
        p.ops->decode(st, q, s->kn + (size_t)i * Hkv * D, s->vn + (size_t)i * Hkv * D, s->L + i, out);
        fp.ops->decode(fst, q, s->kn + (size_t)i * Hkv * D, s->vn + (size_t)i * Hkv * D, s->L + i, fout);
        br_hist_push(&h, s->kn + (size_t)i * Hkv * D, s->vn + (size_t)i * Hkv * D, s->dt);
        kb_account acc;
        p.ops->account(st, &acc);
        kb_kvstream *full = malloc((size_t)Hkv * sizeof *full);
        for (int g = 0; g < Hkv; g++) full[g] = *fp.ops->retained(fst, g * G);
        kb_fidelity f;
        CHECK_EQ_INT(fidelity_step(p.ops, st, &acc, q, out, full, Hq, Hkv, D, &f, &e), 0);
        free(full);
        /* brute force: per head, the attended positions, oracle top-k, mass, output */
        int n = s->L + i + 1;
        double recall = 0, mass = 0, rel = 0, att = 0;
        for (int hq = 0; hq < Hq; hq++) {
            int g = hq / G;
            char *in = calloc((size_t)n, 1);
            int k = 0;
            if (acc.sel_streams > 0) {
                const int32_t *rp = acc.selected_pos + (size_t)(acc.sel_per_query_head ? hq : g) * acc.sel_k;
                for (int t = 0; t < acc.sel_k && rp[t] >= 0; t++) in[rp[t]] = 1, k++;
            } else {
                int rows;
                p.ops->decode_cache(st, 0, &rows);
                const kb_kvstream *dc = p.ops->decode_cache(st, rows == Hq ? hq : g, NULL);
                for (int t = 0; t < dc->n; t++) in[dc->pos[t]] = 1, k++;
            }
            int kk = br_exact_topk(&h, g, q + (size_t)hq * D, 1, 0, all, n, k, top, sc);
            int hit = 0;
            for (int t = 0; t < kk; t++) hit += in[top[t]];
            double mx = -INFINITY, sum = 0, m = 0;
            for (int j = 0; j < n; j++) mx = fmax(mx, sc[j]);
            for (int j = 0; j < n; j++) sum += exp(sc[j] - mx);
            for (int j = 0; j < n; j++)
                if (in[j]) m += exp(sc[j] - mx) / sum;
            br_attend(&h, g, q + (size_t)hq * D, all, n, ref);
            double num = 0, den = 0;
            for (int d = 0; d < D; d++) {
                num += (out[(size_t)hq * D + d] - ref[d]) * (out[(size_t)hq * D + d] - ref[d]);
                den += ref[d] * ref[d];
            }
            recall += k ? (double)hit / k : 1;
            mass += m;
            rel += sqrt(num / den);
            att += k;
            free(in);
        }
        /* f32 keys scores vs double: recall is a ratio of counts (exact unless
         * a near tie at the oracle boundary; none in these seeds) */
        CHECK_CLOSE(f.recall, recall / Hq, 1e-12, 0);
        CHECK_CLOSE(f.mass, mass / Hq, 1e-9, 0);
        CHECK_CLOSE(f.rel_err, rel / Hq, 1e-6, 1e-4);
        CHECK_CLOSE(f.attended, att / Hq, 0, 0);
        if (expect_perfect) {
            CHECK_CLOSE(f.recall, 1.0, 0, 0);
            CHECK(f.rel_err < 1e-5);
        }
        CHECK(f.recall >= 0 && f.recall <= 1 && f.mass <= 1 + 1e-9);
    }
    p.ops->destroy(st);
    fp.ops->destroy(fst);
    br_hist_free(&h);
    free(out);
    free(fout);
    free(all);
    free(top);
    free(sc);
    free(ref);
}


/* fidelity_step on one hand-made history: Hq query heads over Hkv KV heads,
 * D = 1, keys kk[g][j] and values vv[g][j] at positions 0..n-1, the query
 * q[h] and output o[h], the attended positions given as acc rows (sel, -1
 * padded, stride sk; per query head or per group). No method state: with
 * sel_streams > 0, fidelity_step reads only acc. */
static kb_fidelity hand_step(int Hq, int Hkv, int n, const float *kk, const float *vv, const float *q,
                             const float *o, const int32_t *sel, int rows, int sk, int per_head) {
    kb_kvstream full[4];
    for (int g = 0; g < Hkv; g++) {
        kvstream_init(&full[g], KB_F32, 1, n);
        for (int j = 0; j < n; j++) kvstream_append_f32(&full[g], &kk[g * n + j], &vv[g * n + j], j);
    }
    kb_account acc;
    memset(&acc, 0, sizeof acc);
    acc.sel_streams = rows;
    acc.sel_k = sk;
    acc.selected = acc.selected_pos = sel;
    acc.sel_per_query_head = per_head;
    kb_fidelity f;
    kb_err e = {0};
    CHECK_EQ_INT(fidelity_step(NULL, NULL, &acc, q, o, full, Hq, Hkv, 1, &f, &e), 0);
    for (int g = 0; g < Hkv; g++) kvstream_free(&full[g]);
    return f;
}

/* Values worked by hand from methods.md §10 / docs/METHODS.md §8 (D = 1, so
 * the score of slot j is q * k_j and the scale 1/sqrt(D) is 1). */
static void test_hand_values(void) {
    /* scores 1000 + (0, 0.5, 1, 1.5) (exact in f32): p_j = e^(j/2) / Z,
     * Z = 1 + e^0.5 + e + e^1.5; without the softmax's shift exp(1000)
     * overflows. v = (20, 0, 0, 0): o* = 20 / Z. Attended {3, 1}: the
     * oracle's top-2 is {3, 2}: recall 1/2; mass (e^0.5 + e^1.5) / Z. */
    double Z = 1 + exp(0.5) + exp(1.0) + exp(1.5);
    float kk[4] = {1000, 1000.5f, 1001, 1001.5f}, vv[4] = {20, 0, 0, 0}, q[1] = {1};
    float o[1] = {(float)(3 * 20 / Z)}; /* 3 o*: rel err exactly 2 up to the f32 rounding of o */
    int32_t sel[3] = {3, 1, -1};
    kb_fidelity f = hand_step(1, 1, 4, kk, vv, q, o, sel, 1, 3, 0);
    CHECK_CLOSE(f.recall, 0.5, 0, 0);
    CHECK_CLOSE(f.mass, (exp(0.5) + exp(1.5)) / Z, 1e-12, 0);
    CHECK_CLOSE(f.rel_err, 2.0, 0, 1e-6); /* o rounded to f32: 6e-8 relative */
    CHECK_CLOSE(f.attended, 2, 0, 0);
    /* a position listed twice is one attended token (k = 2, not 3) */
    int32_t dup[4] = {3, 3, 1, -1};
    f = hand_step(1, 1, 4, kk, vv, q, o, dup, 1, 4, 0);
    CHECK_CLOSE(f.recall, 0.5, 0, 0);
    CHECK_CLOSE(f.attended, 2, 0, 0);
    CHECK_CLOSE(f.mass, (exp(0.5) + exp(1.5)) / Z, 1e-12, 0);
    /* k = 1, the top token attended: recall 1 */
    int32_t one[2] = {3, -1};
    f = hand_step(1, 1, 4, kk, vv, q, o, one, 1, 2, 0);
    CHECK_CLOSE(f.recall, 1, 0, 0);
    CHECK_CLOSE(f.mass, exp(1.5) / Z, 1e-12, 0);
    /* the output's error is relative to ||o*|| whatever its size: o* = 1/2
     * (v0 = Z / 2), o = 3/4: 1/2 (not |o - o*| = 1/4) */
    float v2[4] = {(float)(Z / 2), 0, 0, 0}, o3[1] = {0.75f};
    f = hand_step(1, 1, 4, kk, v2, q, o3, one, 1, 2, 0);
    CHECK_CLOSE(f.rel_err, 0.5, 0, 1e-6);
    /* ties to the lower slot (METHODS.md §2): scores (0, 5, 5, 0), the top-1
     * is slot 1: attending slot 2 misses it, slot 1 hits it */
    float kt[4] = {0, 5, 5, 0}, vt[4] = {1, 1, 1, 1}, ot[1] = {1};
    int32_t s2[1] = {2}, s1[1] = {1};
    f = hand_step(1, 1, 4, kt, vt, q, ot, s2, 1, 1, 0);
    CHECK_CLOSE(f.recall, 0, 0, 0);
    f = hand_step(1, 1, 4, kt, vt, q, ot, s1, 1, 1, 0);
    CHECK_CLOSE(f.recall, 1, 0, 0);
    CHECK_CLOSE(f.rel_err, 0, 1e-12, 0); /* o* = 1 */
    /* a head that attended nothing: k = 0, no top-0 to miss (recall 1),
     * mass 0; o* = 0 (all values 0): the error is ||o|| itself */
    float vz[4] = {0, 0, 0, 0}, oz[1] = {0.25f};
    int32_t none[2] = {-1, -1};
    f = hand_step(1, 1, 4, kk, vz, q, oz, none, 1, 2, 0);
    CHECK_CLOSE(f.recall, 1, 0, 0);
    CHECK_CLOSE(f.mass, 0, 0, 0);
    CHECK_CLOSE(f.attended, 0, 0, 0);
    CHECK_CLOSE(f.rel_err, 0.25, 0, 0);
    /* position 0 attended counts (the -1 padding ends a row, not 0) */
    int32_t z0[2] = {0, -1};
    f = hand_step(1, 1, 4, kk, vv, q, o, z0, 1, 2, 0);
    CHECK_CLOSE(f.attended, 1, 0, 0);
    CHECK_CLOSE(f.mass, 1 / Z, 1e-12, 0);
    /* GQA, Hq = 4 over Hkv = 2 (heads 0, 1 read KV head 0; 2, 3 KV head 1),
     * rows per query head: the mean over the 4 heads. KV head 0 = the
     * history above, KV head 1 = the tie history. Head h attends row h:
     * h0 {3, 1} recall 1/2, h1 {3} 1, h2 {2} 0, h3 {1} 1: mean 5/8. */
    float k2[8] = {1000, 1000.5f, 1001, 1001.5f, 0, 5, 5, 0}, v22[8] = {20, 0, 0, 0, 1, 1, 1, 1};
    float q4[4] = {1, 1, 1, 1}, o4[4] = {(float)(20 / Z), (float)(20 / Z), 1, 1};
    int32_t rows4[8] = {3, 1, 3, -1, 2, -1, 1, -1};
    f = hand_step(4, 2, 4, k2, v22, q4, o4, rows4, 4, 2, 1);
    CHECK_CLOSE(f.recall, 5.0 / 8, 0, 0);
    CHECK_CLOSE(f.attended, 5.0 / 4, 0, 0);
    double e5 = exp(5.0), Zt = 2 + 2 * e5;
    CHECK_CLOSE(f.mass, ((exp(0.5) + exp(1.5)) / Z + exp(1.5) / Z + 2 * e5 / Zt) / 4, 1e-12, 0);
    /* the same rows read as per-group rows (sel_per_query_head 0): row g for
     * both heads of group g: h0, h1 {3, 1} 1/2 each, h2, h3 {3} -> slot 3 of
     * the tie history, score 0, not the top-1 (slot 1): 0. Mean 1/4 */
    f = hand_step(4, 2, 4, k2, v22, q4, o4, rows4, 2, 2, 0);
    CHECK_CLOSE(f.recall, 0.25, 0, 0);
    /* a position outside the history is refused */
    {
        kb_kvstream full[1];
        kvstream_init(&full[0], KB_F32, 1, 4);
        for (int j = 0; j < 4; j++) kvstream_append_f32(&full[0], &kk[j], &vv[j], j);
        int32_t bad[2] = {1, 7};
        kb_account acc;
        memset(&acc, 0, sizeof acc);
        acc.sel_streams = 1;
        acc.sel_k = 2;
        acc.selected = acc.selected_pos = bad;
        kb_err e = {0};
        CHECK_EQ_INT(fidelity_step(NULL, NULL, &acc, q, o, full, 1, 1, 1, &f, &e), KB_EINPUT);
        CHECK(strstr(e.msg, "position 7") != NULL);
        kvstream_free(&full[0]);
    }
}

int main(void) {
    test_hand_values();
    scen s;
    scen_make(&s, 8, 2, 32, 400, 3, K_NEEDLE, 5);
    check_method("{\"method\":\"full\"}", &s, 1);
    check_method("{\"method\":\"exact_topk\",\"budget\":50}", &s, 0);
    check_method("{\"method\":\"rocketkv\",\"budget\":64}", &s, 0);
    check_method("{\"method\":\"snapkv\",\"budget\":64}", &s, 0);
    check_method("{\"method\":\"quest\",\"budget\":128}", &s, 0);
    scen_free(&s);
    /* KL(P || Q) for P = (1/2, 1/2), Q = (3/4, 1/4): 0.5 ln(2/3) + 0.5 ln 2 */
    float a[2] = {0, 0}, b[2] = {logf(3), 0};
    CHECK_CLOSE(fidelity_kl(a, b, 2), 0.5 * log(2.0 / 3) + 0.5 * log(2.0), 1e-7, 0);
    CHECK_CLOSE(fidelity_kl(b, b, 2), 0, 1e-12, 0);
    float c[3] = {1, 3, 3}, d[3] = {0, 1, 5};
    CHECK_EQ_INT(fidelity_top1_agree(c, c, 3), 1);
    CHECK_EQ_INT(fidelity_top1_agree(c, d, 3), 0); /* c's argmax is index 1 (first of the tie) */
    /* a broken method's NaN logits are no match: before, KL was clamped from
     * NaN to 0 and an all-NaN row "agreed" when the reference's argmax was 0 */
    float e[2] = {NAN, 0}, f[2] = {NAN, NAN}, g[2] = {1, 0};
    CHECK(isnan(fidelity_kl(a, e, 2)));
    CHECK(isnan(fidelity_kl(g, f, 2)));
    CHECK_EQ_INT(fidelity_top1_agree(g, f, 2), 0);
    CHECK_EQ_INT(fidelity_top1_agree(g, e, 2), 0);
    float k3[3] = {0, 5, 1}, n3[3] = {NAN, 5, 1}; /* one NaN: no agreement, though 5 is the largest number */
    CHECK_EQ_INT(fidelity_top1_agree(k3, n3, 3), 0);
    CHECK_EQ_INT(fidelity_top1_agree(k3, k3, 3), 1);
    CHECK_EQ_INT(fidelity_top1_agree(e, g, 2), 0);
    /* a reference probability of exactly 0 adds nothing: P = (1, 0), Q = (1/2, 1/2): ln 2 */
    float z[2] = {0, -INFINITY};
    CHECK_CLOSE(fidelity_kl(z, a, 2), log(2.0), 1e-7, 0);
    CHECK_CLOSE(fidelity_kl(z, z, 2), 0, 0, 0);
    /* KL(P || Q) is in that direction whatever the logits' offset: the
     * softmax shift must not overflow at logits of 1000 (P = (3/4, 1/4),
     * U = (1/2, 1/2)) */
    float p34[2] = {logf(3), 0}, big[2] = {1000, 1000};
    double kl_pu = 0.75 * log(1.5) + 0.25 * log(0.5), kl_up = 0.5 * log(0.5 / 0.75) + 0.5 * log(2.0);
    CHECK_CLOSE(fidelity_kl(p34, a, 2), kl_pu, 1e-7, 0);
    CHECK_CLOSE(fidelity_kl(p34, big, 2), kl_pu, 1e-7, 0);
    CHECK_CLOSE(fidelity_kl(big, p34, 2), kl_up, 1e-7, 0);
    CHECK_CLOSE(fidelity_kl(big, a, 2), 0, 1e-12, 0);
    /* never below 0 (rounding of equal distributions): 1000 random pairs x,
     * x + c (the same softmax, KL 0 but for rounding) */
    uint64_t r = 42;
    int neg = 0;
    for (int t = 0; t < 1000; t++) {
        float xa[64], xb[64];
        for (int i = 0; i < 64; i++) {
            r = r * 6364136223846793005ull + 1442695040888963407ull;
            xa[i] = (float)((double)(r >> 11) * 0x1.0p-53 * 10 - 5);
            r = r * 6364136223846793005ull + 1442695040888963407ull;
        }
        r = r * 6364136223846793005ull + 1442695040888963407ull;
        float c = (float)((double)(r >> 11) * 0x1.0p-53 * 4);
        for (int i = 0; i < 64; i++) xb[i] = xa[i] + c;
        neg += fidelity_kl(xa, xb, 64) < 0;
    }
    CHECK_EQ_INT(neg, 0);
    /* two rows that are all NaN have no argmax: no agreement */
    CHECK_EQ_INT(fidelity_top1_agree(f, f, 2), 0);
    /* ties: the first index, in both (c = (1, 3, 3) and itself reversed
     * in position: (3, 3, 1) has argmax 0) */
    float c2[3] = {3, 3, 1};
    CHECK_EQ_INT(fidelity_top1_agree(c2, c, 3), 0);
    return check_summary("method_fidelity");
}
