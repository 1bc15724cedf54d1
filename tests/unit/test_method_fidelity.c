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

int main(void) {
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
    return check_summary("method_fidelity");
}
