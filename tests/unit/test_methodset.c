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
    return check_summary("methodset");
}
