/* test_methodset.c - building a method's per-layer states from a prefill that
 * is produced one layer at a time (methodset_build_layers, used by `bench
 * methods` children so that a long context's filled cache and the method's
 * copy of it never coexist).
 *
 * The reference is methodset_build over the whole prefill, which the method
 * tests cover against brute force. Every method is built both ways from the
 * same values; the layer-by-layer source copies layer l into an otherwise
 * empty prefill just before that layer's build and, after it, overwrites the
 * layer's K, V and window queries with NaN and frees them. A method that
 * kept a pointer into its view would then decode NaN (or, under the
 * sanitizers, read freed memory), so the decode outputs must equal the
 * reference's bit for bit, and so must the accounting. A source that fails
 * at a layer must fail the build with that layer named. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "check.h"
#include "methods/methodset.h"
#include "methods/params.h"

enum { NL = 3, HQ = 6, HKV = 2, D = 32, L = 300, W = 32, N = 6 };

static uint64_t rng = 0x1234567ull;
static float frand(void) { /* [-1, 1) */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) * 0x1.0p-52 - 1.0);
}

static void make_prefill(kb_prefill *pf) {
    prefill_init(pf, NL, HQ, HKV, D, KB_F16, W, L);
    float k[D], v[D];
    for (int i = 0; i < NL * HKV; i++)
        for (int j = 0; j < L; j++) {
            for (int d = 0; d < D; d++) {
                k[d] = frand() * (j % 37 == 5 ? 4.0f : 1.0f); /* a few heavy keys */
                v[d] = frand();
            }
            kvstream_append_f32(&pf->kv[i], k, v, j);
        }
    for (size_t x = 0; x < (size_t)NL * W * HQ * D; x++) pf->qwin[x] = frand();
    for (int i = 0; i < W; i++) pf->qwin_pos[i] = L - W + i;
    for (int l = 0; l < NL; l++) pf->nq_layer[l] = W;
    pf->n_q = W;
}

typedef struct src_state {
    const kb_prefill *from;
    kb_prefill *to;
    int fail_at; /* layer whose load fails, or -1 */
    int loads, releases;
} src_state;

static int src_load(void *u, int l, kb_err *err) {
    src_state *s = u;
    if (l == s->fail_at) return kb_fail(err, KB_EINPUT, "cannot load");
    for (int h = 0; h < HKV; h++) {
        kb_kvstream *d = &s->to->kv[l * HKV + h];
        kvstream_init(d, KB_F16, D, 0);
        kvstream_append_range(d, &s->from->kv[l * HKV + h], 0, L);
    }
    size_t qn = (size_t)W * HQ * D;
    memcpy(s->to->qwin + l * qn, s->from->qwin + l * qn, qn * sizeof(float));
    s->to->nq_layer[l] = W;
    s->loads++;
    return 0;
}

static void src_release(void *u, int l) {
    src_state *s = u;
    for (int h = 0; h < HKV; h++) {
        kb_kvstream *d = &s->to->kv[l * HKV + h];
        uint16_t *k = d->K, *v = d->V; /* f16 NaN */
        for (size_t x = 0; x < (size_t)d->n * D; x++) k[x] = v[x] = 0x7e00;
        kvstream_free(d);
    }
    size_t qn = (size_t)W * HQ * D;
    for (size_t x = 0; x < qn; x++) s->to->qwin[l * qn + x] = NAN;
    s->releases++;
}

static void decode_all(kb_methodset *ms, float *out) {
    kb_attn_backend be = methodset_backend(ms);
    float q[HQ * D], k[HKV * D], v[HKV * D];
    uint64_t keep = rng;
    rng = 99; /* the same steps for every build */
    for (int i = 0; i < N; i++)
        for (int l = 0; l < NL; l++) {
            for (int x = 0; x < HQ * D; x++) q[x] = frand();
            for (int x = 0; x < HKV * D; x++) {
                k[x] = frand();
                v[x] = frand();
            }
            be.decode(be.ctx, l, L + i, q, k, v, out + ((size_t)i * NL + l) * HQ * D);
        }
    rng = keep;
}


/* ---- a later turn's prefill through the methodset (ms_prefill, end_turn) ----
 * A method that records what extend() is given, then is Full KV. The turn's
 * 150 tokens (positions L..L+149) come in chunks of 50, 60 and 40; Full KV's
 * outputs must be exact causal attention over the prompt's 300 tokens and the
 * turn's so far (brute force over the f16-rounded K/V); extend() must get the
 * turn's tokens only, at their positions, and its last Wt = max(128, window)
 * queries with their positions. */
extern const kb_method_ops kb_method_full;
/* Brute force in double: query q attends slots 0..last of s (softmax of q.k/sqrt(D), times
 * V); returns how many of out's D values differ from it by more than 1e-4 (f32 kernels
 * against a double reference over a few hundred slots of values in [-1, 1)). */
static int attend_mismatches(const kb_kvstream *s, const float *q, int last, const float *out) {
    double *sc = malloc((size_t)(last + 1) * sizeof(double)), mx = -INFINITY, sum = 0, o[D] = {0};
    float kr[D], vr[D];
    for (int j = 0; j <= last; j++) {
        kvstream_get_f32(s, j, kr, NULL);
        double dot = 0;
        for (int d = 0; d < D; d++) dot += (double)q[d] * kr[d];
        sc[j] = dot / sqrt((double)D);
        mx = fmax(mx, sc[j]);
    }
    for (int j = 0; j <= last; j++) sum += exp(sc[j] - mx);
    for (int j = 0; j <= last; j++) {
        kvstream_get_f32(s, j, NULL, vr);
        for (int d = 0; d < D; d++) o[d] += exp(sc[j] - mx) / sum * vr[d];
    }
    free(sc);
    int bad = 0;
    for (int d = 0; d < D; d++) bad += !(fabs(out[d] - o[d]) <= 1e-4);
    return bad;
}

static kb_method_ops rec_ops;
enum { TN = 150 };
static float *turn_q, *turn_k, *turn_v; /* [NL][TN][HQ or HKV][D] */
static int rec_layers, rec_bad, rec_wq;

static int rec_extend(void *state, const kb_prefill_view *pv, kb_err *err) {
    int l = rec_layers++; /* end_turn extends the layers in order */
    rec_wq = pv->Wq;
    int want = TN < rec_wq ? TN : rec_wq, first = TN - want;
    if (pv->Hq != HQ || pv->Hkv != HKV || pv->D != D) rec_bad++;
    if (memcmp(pv->qwin, turn_q + ((size_t)l * TN + first) * HQ * D, (size_t)want * HQ * D * sizeof(float))) rec_bad++;
    for (int i = 0; i < want; i++) rec_bad += pv->qwin_pos[i] != L + first + i;
    for (int g = 0; g < HKV; g++) {
        if (pv->kv[g].n != TN || pv->kv[g].dtype != KB_F16) {
            rec_bad++;
            continue;
        }
        float kr[D], vr[D];
        for (int j = 0; j < TN; j++) {
            kvstream_get_f32(&pv->kv[g], j, kr, vr);
            rec_bad += pv->kv[g].pos[j] != L + j;
            for (int d = 0; d < D; d++) {
                size_t at = (((size_t)l * TN + j) * HKV + g) * D + d;
                /* f16 rounding: 2^-11 relative, 3e-8 absolute below 6e-5 */
                rec_bad += fabsf(kr[d] - turn_k[at]) > 1e-3f * fabsf(turn_k[at]) + 1e-7f;
                rec_bad += fabsf(vr[d] - turn_v[at]) > 1e-3f * fabsf(turn_v[at]) + 1e-7f;
            }
        }
    }
    return kb_method_full.extend(state, pv, err);
}

static void test_later_turn(int window) {
    kb_prefill pf;
    make_prefill(&pf);
    kb_method_ctx ctx = method_ctx_make(NL, HQ, HKV, D, KB_F16, 4096, L + 1, N);
    kb_method_params p;
    kb_err e = {0};
    CHECK(!method_params_parse_text("{\"method\":\"full\"}", "test", &p, &e));
    rec_ops = kb_method_full;
    rec_ops.extend = rec_extend;
    p.ops = &rec_ops;
    p.window = window;
    kb_methodset *ms = NULL;
    CHECK_MSG(!methodset_build(&p, &ctx, &pf, &ms, &e), "%s", e.msg);
    if (!ms) return;
    size_t qn = (size_t)NL * TN * HQ * D, kn = (size_t)NL * TN * HKV * D;
    turn_q = malloc(qn * sizeof(float));
    turn_k = malloc(kn * sizeof(float));
    turn_v = malloc(kn * sizeof(float));
    for (size_t i = 0; i < qn; i++) turn_q[i] = 2 * frand();
    for (size_t i = 0; i < kn; i++) {
        turn_k[i] = 2 * frand();
        turn_v[i] = frand();
    }
    /* the reference history per layer and KV head: the prompt's rows and the turn's, as f16 */
    kb_kvstream hist[NL * HKV];
    for (int i = 0; i < NL * HKV; i++) {
        kvstream_init(&hist[i], KB_F16, D, L + TN);
        kvstream_append_range(&hist[i], &pf.kv[i], 0, L);
        for (int j = 0; j < TN; j++)
            kvstream_append_f32(&hist[i], turn_k + (((size_t)(i / HKV) * TN + j) * HKV + i % HKV) * D,
                                turn_v + (((size_t)(i / HKV) * TN + j) * HKV + i % HKV) * D, L + j);
    }
    kb_attn_backend be = methodset_backend(ms);
    static const int chunks[] = {10, 135, 5};
    int32_t pos[TN];
    for (int j = 0; j < TN; j++) pos[j] = L + j;
    float *out = malloc((size_t)135 * HQ * D * sizeof(float));
    int at = 0, bad = 0;
    for (int c = 0; c < 3; c++) {
        int n = chunks[c];
        for (int l = 0; l < NL; l++) {
            CHECK_EQ_INT(be.prefill(be.ctx, l, n, pos + at, turn_q + ((size_t)l * TN + at) * HQ * D,
                                    turn_k + ((size_t)l * TN + at) * HKV * D, turn_v + ((size_t)l * TN + at) * HKV * D,
                                    out, &e),
                         0);
            for (int i = 0; i < n; i++)
                for (int h = 0; h < HQ; h++) {
                    const kb_kvstream *s = &hist[l * HKV + h / (HQ / HKV)];
                    const float *q = turn_q + (((size_t)l * TN + at + i) * HQ + h) * D;
                    int last = L + at + i; /* attends slots 0..last */
                    bad += attend_mismatches(s, q, last, out + ((size_t)i * HQ + h) * D);
                }
        }
        at += n;
    }
    CHECK_MSG(bad == 0, "window %d: %d later-turn prefill outputs differ from exact attention", window, bad);
    rec_layers = rec_bad = 0;
    CHECK_EQ_INT(methodset_end_turn(ms, &e), 0);
    CHECK_EQ_INT(rec_layers, NL);
    CHECK_EQ_INT(rec_wq, TN < (window > 128 ? window : 128) ? TN : (window > 128 ? window : 128));
    CHECK_MSG(rec_bad == 0, "window %d: %d differences in what extend() got", window, rec_bad);
    for (int i = 0; i < NL * HKV; i++) kvstream_free(&hist[i]);
    free(out);
    free(turn_q);
    free(turn_k);
    free(turn_v);
    methodset_free(ms);
    prefill_free(&pf);
}

/* A method's later-turn prefill attends, per query head h, what the method
 * retained for h (retained(), read before the turn) and the turn's tokens so
 * far of KV head h / G. snapkv keeps one stream per query head (gqa per_head),
 * so each head appends its own KV head's rows; quest shares one per group.
 * Brute force over f16-rounded values, tolerance 1e-4 (f32 kernels, outputs of
 * order 1). */
static void test_later_turn_method(const char *json) {
    kb_prefill pf;
    make_prefill(&pf);
    kb_method_ctx ctx = method_ctx_make(NL, HQ, HKV, D, KB_F16, 4096, L + 1, N);
    kb_method_params p;
    kb_err e = {0};
    CHECK(!method_params_parse_text(json, "test", &p, &e));
    kb_methodset *ms = NULL;
    CHECK_MSG(!methodset_build(&p, &ctx, &pf, &ms, &e), "%s", e.msg);
    if (!ms) return;
    enum { TT = 40 };
    float *tq = malloc((size_t)NL * TT * HQ * D * sizeof(float)), *tk = malloc((size_t)NL * TT * HKV * D * sizeof(float)),
          *tv = malloc((size_t)NL * TT * HKV * D * sizeof(float)), *out = malloc((size_t)TT * HQ * D * sizeof(float));
    for (size_t i = 0; i < (size_t)NL * TT * HQ * D; i++) tq[i] = 2 * frand();
    for (size_t i = 0; i < (size_t)NL * TT * HKV * D; i++) {
        tk[i] = 2 * frand();
        tv[i] = frand();
    }
    int32_t pos[TT];
    for (int j = 0; j < TT; j++) pos[j] = L + j;
    kb_attn_backend be = methodset_backend(ms);
    int bad = 0;
    for (int l = 0; l < NL; l++) {
        kb_kvstream hist[HQ]; /* per query head: retained + the turn's rows, f16 */
        for (int h = 0; h < HQ; h++) {
            const kb_kvstream *r = methodset_layer_ops(ms, l)->retained(methodset_layer_state(ms, l), h);
            kvstream_init(&hist[h], KB_F16, D, r->n + TT);
            kvstream_append_range(&hist[h], r, 0, r->n); /* both f16 */
            for (int j = 0; j < TT; j++)
                kvstream_append_f32(&hist[h], tk + (((size_t)l * TT + j) * HKV + h / (HQ / HKV)) * D,
                                    tv + (((size_t)l * TT + j) * HKV + h / (HQ / HKV)) * D, L + j);
        }
        CHECK_EQ_INT(be.prefill(be.ctx, l, TT, pos, tq + (size_t)l * TT * HQ * D, tk + (size_t)l * TT * HKV * D,
                                tv + (size_t)l * TT * HKV * D, out, &e),
                     0);
        for (int h = 0; h < HQ; h++) {
            int n0 = hist[h].n - TT;
            for (int i = 0; i < TT; i++) {
                const float *q = tq + (((size_t)l * TT + i) * HQ + h) * D;
                bad += attend_mismatches(&hist[h], q, n0 + i, out + ((size_t)i * HQ + h) * D);
            }
            kvstream_free(&hist[h]);
        }
    }
    CHECK_MSG(bad == 0, "%s: %d later-turn prefill outputs differ from attention over retained + turn", json, bad);
    CHECK_EQ_INT(methodset_end_turn(ms, &e), 0);
    free(tq);
    free(tk);
    free(tv);
    free(out);
    methodset_free(ms);
    prefill_free(&pf);
}

/* skip_layers: the layers below it are Full KV's, the others the method's;
 * methodset_account: per-token figures the mean over layers, bytes and
 * seconds the sum (docs/OUTPUTS.md's samples.csv columns), from each layer's
 * own account; the context's S is min(L_prompt + N_new, n_ctx). */
static void test_layers_and_account(void) {
    kb_prefill pf;
    make_prefill(&pf);
    kb_method_ctx ctx = method_ctx_make(NL, HQ, HKV, D, KB_F16, 4096, L + 1, N);
    CHECK_EQ_INT(ctx.S, L + 1 + N);
    CHECK_EQ_INT(method_ctx_make(NL, HQ, HKV, D, KB_F16, 305, L + 1, N).S, 305);
    kb_method_params p;
    kb_err e = {0};
    CHECK(!method_params_parse_text("{\"method\":\"rocketkv\",\"budget\":64,\"skip_layers\":1}", "test", &p, &e));
    kb_methodset *ms = NULL;
    CHECK_MSG(!methodset_build(&p, &ctx, &pf, &ms, &e), "%s", e.msg);
    if (!ms) return;
    CHECK(methodset_layer_ops(ms, 0) == method_find("full"));
    CHECK(methodset_layer_ops(ms, 1) == method_find("rocketkv") && methodset_layer_ops(ms, 2) == method_find("rocketkv"));
    kb_account before[NL];
    for (int l = 0; l < NL; l++) methodset_layer_account(ms, l, &before[l]);
    long mark = methodset_mark(ms);
    CHECK_EQ_INT(mark, L);
    float *o = malloc((size_t)N * NL * HQ * D * sizeof(float));
    decode_all(ms, o);
    free(o);
    kb_account x[NL];
    double tok = 0, rt = 0, ap = 0, att = 0, rb = 0, byt = 0;
    for (int l = 0; l < NL; l++) {
        methodset_layer_account(ms, l, &x[l]);
        tok += x[l].resident_tokens / NL;
        rt += x[l].read_tokeq / NL;
        ap += x[l].approx_tokeq / NL;
        att += x[l].attended / NL;
        rb += x[l].read_bytes;
        byt += x[l].resident_bytes;
    }
    CHECK(x[0].resident_tokens == L + N && x[1].resident_tokens < L); /* the dense layer holds every token */
    /* Full KV's last step read every token of each KV head, K and V in f16:
     * per query head L + N tokens attended and read, 2 * 2 * D bytes a row */
    CHECK_CLOSE(x[0].attended, L + N, 0, 0);
    CHECK_CLOSE(x[0].read_tokeq, L + N, 0, 0);
    CHECK_CLOSE(x[0].read_bytes, (double)HKV * (L + N) * 2 * 2 * D, 0, 0);
    CHECK_CLOSE(x[0].resident_bytes, (double)HKV * (L + N) * 2 * 2 * D, 0, 0);
    CHECK_EQ_INT(x[0].sel_streams, 0);
    CHECK(x[1].approx_tokeq > 0 && x[1].read_bytes != x[0].read_bytes);
    kb_cell_account a;
    methodset_account(ms, &a);
    /* the cell's accounts: the layers' sums (or means) worked again here, the same double
     * sums in the same order, so equal to the bit today; 1e-9 relative only lets the code
     * reorder them */
    CHECK_CLOSE(a.resident_tokens, tok, 1e-9, 1e-12);
    CHECK_CLOSE(a.read_tokeq, rt, 1e-9, 1e-12);
    CHECK_CLOSE(a.approx_tokeq, ap, 1e-9, 1e-12);
    CHECK_CLOSE(a.attended, att, 1e-9, 1e-12);
    CHECK_CLOSE(a.read_bytes, rb, 1e-9, 1e-12);
    CHECK_CLOSE(a.resident_bytes, byt, 1e-9, 1e-12);
    /* the seconds are the layers' sum. Not checked above 0: a step's selection takes
     * microseconds here, which a coarse clock (4 ms) reads as 0, and then this check has no
     * teeth; on a clock finer than a step (this machine's) a dropped term fails it */
    CHECK_CLOSE(a.select_seconds, x[0].select_seconds + x[1].select_seconds + x[2].select_seconds, 1e-12, 1e-12);
    /* a rollback to the mark drops the decoded tokens in every layer */
    methodset_rollback(ms, mark);
    for (int l = 0; l < NL; l++) {
        kb_account y;
        methodset_layer_account(ms, l, &y);
        CHECK_MSG(y.resident_tokens == before[l].resident_tokens && y.resident_bytes == before[l].resident_bytes,
                  "layer %d after rollback: %g tokens, %g before the decode", l, y.resident_tokens,
                  before[l].resident_tokens);
    }
    /* nor below the prompt, whatever the mark */
    methodset_rollback(ms, 0);
    for (int l = 0; l < NL; l++) {
        kb_account y;
        methodset_layer_account(ms, l, &y);
        CHECK_MSG(y.resident_tokens == before[l].resident_tokens, "layer %d after a rollback to 0: %g tokens, %g", l,
                  y.resident_tokens, before[l].resident_tokens);
    }
    methodset_free(ms);
    prefill_free(&pf);
    /* the model must leave the method a layer, and r fit the head dim */
    p.skip_layers = NL;
    CHECK_EQ_INT(methodset_check_model(&p, NL, D, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "key 'skip_layers': 3, expected at most 2"), "%s", e.msg);
    p.skip_layers = NL - 1;
    CHECK_EQ_INT(methodset_check_model(&p, NL, D, &e), 0);
    p.r = D + 1;
    CHECK_EQ_INT(methodset_check_model(&p, NL, D, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "key 'r': 33 exceeds the model's head dim D = 32"), "%s", e.msg);
    p.r = D;
    CHECK_EQ_INT(methodset_check_model(&p, NL, D, &e), 0);
    /* the selection buffers' estimate (methodset.h): layers from skip_layers on,
     * x Hq rows x k slots x 3 int32, k the largest of B, 16, page_size and
     * 4 tokens / B, at most 2 tokens. rocketkv B = 64, skip 1: 2 layers x 6 */
    p.skip_layers = 1;
    p.budget = 64;
    p.page_size = 0;
    CHECK_CLOSE(methodset_select_bytes(&p, NL, HQ, 1000), 2.0 * 6 * 64 * 12, 0, 0);    /* 4L/B = 62.5 */
    CHECK_CLOSE(methodset_select_bytes(&p, NL, HQ, 10000), 2.0 * 6 * 625 * 12, 0, 0);  /* 4L/B = 625 */
    CHECK_CLOSE(methodset_select_bytes(&p, NL, HQ, 20), 2.0 * 6 * 40 * 12, 0, 0);      /* 2 tokens */
    p.page_size = 128;
    CHECK_CLOSE(methodset_select_bytes(&p, NL, HQ, 1000), 2.0 * 6 * 128 * 12, 0, 0);   /* one page */
    p.budget = 8;
    p.page_size = 0;
    CHECK_CLOSE(methodset_select_bytes(&p, NL, HQ, 2), 2.0 * 6 * 4 * 12, 0, 0);        /* 16 > 2 tokens */
    CHECK_CLOSE(methodset_select_bytes(&p, NL, HQ, 30), 2.0 * 6 * 16 * 12, 0, 0);      /* 16 > B, 4L/B */
}

int main(void) {
    static const char *const cfgs[] = {
        "{\"method\":\"full\"}",
        "{\"method\":\"exact_topk\",\"budget\":64}",
        "{\"method\":\"snapkv\",\"budget\":96}",
        "{\"method\":\"snapkvpp\",\"budget\":96}",
        "{\"method\":\"quest\",\"budget\":64}",
        "{\"method\":\"sparq\",\"budget\":64}",
        "{\"method\":\"hybrid\",\"budget\":64}",
        "{\"method\":\"rocketkv\",\"budget\":64}",
        "{\"method\":\"rocketkv\",\"budget\":64,\"skip_layers\":1}",
        "{\"method\":\"rocketkv_mt\",\"budget\":64}",
    };
    kb_prefill pf;
    make_prefill(&pf);
    kb_method_ctx ctx = method_ctx_make(NL, HQ, HKV, D, KB_F16, 4096, L + 1, N);
    size_t nout = (size_t)N * NL * HQ * D;
    float *o1 = malloc(nout * sizeof(float)), *o2 = malloc(nout * sizeof(float));
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        kb_method_params p;
        kb_err e = {0};
        CHECK_MSG(!method_params_parse_text(cfgs[ci], "test", &p, &e), "%s", e.msg);
        kb_methodset *a = NULL, *b = NULL;
        CHECK_MSG(!methodset_build(&p, &ctx, &pf, &a, &e), "%s: %s", cfgs[ci], e.msg);
        kb_prefill lp; /* filled one layer at a time */
        prefill_init(&lp, NL, HQ, HKV, D, KB_F16, W, 0);
        memcpy(lp.qwin_pos, pf.qwin_pos, W * sizeof(int32_t));
        lp.n_q = W;
        src_state ss = {&pf, &lp, -1, 0, 0};
        kb_layer_source src = {src_load, src_release, &ss};
        CHECK_MSG(!methodset_build_layers(&p, &ctx, &lp, &src, &b, &e), "%s: %s", cfgs[ci], e.msg);
        CHECK_EQ_INT(ss.loads, NL);
        CHECK_EQ_INT(ss.releases, NL);
        if (!a || !b) continue;
        decode_all(a, o1);
        decode_all(b, o2);
        size_t bad = 0;
        for (size_t x = 0; x < nout; x++) bad += memcmp(&o1[x], &o2[x], sizeof(float)) != 0;
        CHECK_MSG(bad == 0, "%s: %zu of %zu outputs differ from the whole-prefill build", cfgs[ci], bad, nout);
        kb_cell_account aa, ab;
        methodset_account(a, &aa);
        methodset_account(b, &ab);
        CHECK_MSG(aa.resident_tokens == ab.resident_tokens && aa.resident_bytes == ab.resident_bytes &&
                      aa.read_bytes == ab.read_bytes && aa.attended == ab.attended,
                  "%s: accounting differs", cfgs[ci]);
        methodset_free(a);
        methodset_free(b);
        /* a load that fails: the build fails naming the layer, nothing leaks */
        ss.fail_at = 1;
        ss.loads = ss.releases = 0;
        b = NULL;
        int rc = methodset_build_layers(&p, &ctx, &lp, &src, &b, &e);
        CHECK_EQ_INT(rc, KB_EINPUT);
        CHECK(b == NULL);
        CHECK_MSG(strstr(e.msg, "layer 1: cannot load") != NULL, "%s: message '%s'", cfgs[ci], e.msg);
        CHECK_EQ_INT(ss.loads, 1);
        prefill_free(&lp);
    }
    free(o1);
    free(o2);
    prefill_free(&pf);
    test_later_turn(0);
    test_later_turn(200);
    test_later_turn_method("{\"method\":\"snapkv\",\"budget\":96}");
    test_later_turn_method("{\"method\":\"quest\",\"budget\":64}");
    test_layers_and_account();
    return check_summary("methodset");
}
