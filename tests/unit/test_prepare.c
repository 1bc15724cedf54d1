/* test_prepare.c - q before k and v: the warm queue (kernels/warm.h), the
 * mat-vec job with tasks between its first matrix and the rest
 * (kb_matvec_multi_mid), and the backends' prepare (methods/backend.h).
 *
 * None of it may change a value, so the references are the paths without
 * it: kb_matvec_multi's outputs, and each method's decode without prepare,
 * bit for bit (outputs and every layer's chosen slots). The queue's lines
 * are checked against the ranges queued, computed here by hand. */
#include <omp.h>
#include <stdlib.h>

#include "check.h"
#include "method_harness.h"
#include "kernels/pool.h"
#include "kernels/quant.h"
#include "methods/methodset.h"
#include "methods/params.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static float frand(void) { return test_lcg_unit(&rng); } /* [-1, 1) */

/* ------------------------------------------------------------ warm queue */

static int count_line(const kb_warm *w, const char *line) {
    int c = 0;
    for (int x = 0; x < w->total; x++) c += kb_warm_line(w, x) == line;
    return c;
}

static void test_warm(void) {
    static kb_warm w;
    static char buf[1 << 20] __attribute__((aligned(64)));
    /* ranges that start and end inside lines, an empty put, a group's spare slots */
    kb_warm_reset(&w);
    kb_warm_add(&w, buf + 10, 100);      /* lines 0, 1 */
    int s = kb_warm_reserve(&w, 3);      /* a group of 4: one spare */
    kb_warm_put(&w, s, buf + 640, 64);   /* line 10 */
    kb_warm_put(&w, s + 1, NULL, 100);   /* nothing */
    kb_warm_put(&w, s + 2, buf + 1000, 200); /* lines 15..18 (1000..1199) */
    kb_warm_add(&w, buf + 4096, 0);      /* nothing, takes no slot */
    kb_warm_begin(&w, 3);
    CHECK_EQ_INT(w.total, 2 + 1 + 4);
    const int want[] = {0, 1, 10, 15, 16, 17, 18};
    int ok = 1;
    for (int x = 0; x < 7; x++) ok &= kb_warm_line(&w, x) == buf + 64 * want[x];
    CHECK_MSG(ok, "queue lines in order, empty slots skipped");
    CHECK(kb_warm_line(&w, 7) == NULL && kb_warm_line(&w, -1) == NULL);
    CHECK_EQ_INT(w.slice, 3);
    for (int i = 0; i < 3; i++) kb_warm_step(&w);
    CHECK(atomic_load(&w.next) >= w.total); /* 3 steps took every line */
    kb_warm_finish(&w);

    /* the byte budget: 40 rows of 16 KiB cut to an equal share each */
    kb_warm_reset(&w);
    int rows = 40, share = KB_WARM_BYTES / 64 / rows;
    for (int i = 0; i < rows; i++) kb_warm_add(&w, buf + (size_t)i * 16384, 16384);
    kb_warm_begin(&w, 1);
    CHECK_EQ_INT(w.total, rows * share);
    ok = 1;
    for (int i = 0; i < rows; i++) {
        ok &= count_line(&w, buf + (size_t)i * 16384) == 1;                  /* each row's first line */
        ok &= count_line(&w, buf + (size_t)i * 16384 + 64 * (share - 1)) == 1; /* ... to its share */
        ok &= count_line(&w, buf + (size_t)i * 16384 + 64 * share) == 0;
    }
    CHECK_MSG(ok, "budget cut: %d lines per row", share);

    /* more ranges than slots (each add takes a group of KB_WARM_GROUP):
     * the rest is left out, nothing overflows */
    kb_warm_reset(&w);
    for (int i = 0; i < KB_WARM_RANGES + 50; i++) kb_warm_add(&w, buf + 64 * (i % 1000), 1);
    kb_warm_begin(&w, 7);
    CHECK_EQ_INT(w.total, KB_WARM_RANGES / KB_WARM_GROUP);
    for (int i = 0; i < 7; i++) kb_warm_step(&w);
    CHECK(atomic_load(&w.next) >= w.total);
}

/* ------------------------------------------------ mat-vec with mid tasks */

enum { COLS = 256, R0 = 300, R1 = 96, R2 = 64, NTASK = 5 };

typedef struct mid_ctx {
    const float *y0, *want0; /* mv[0]'s output and what it must be */
    int seen[NTASK];         /* runs of each task */
    int early;               /* tasks that saw mv[0] incomplete */
    kb_warm *w;
    const char *buf;
} mid_ctx;

static void mid_fn(void *p, int t, int worker) {
    (void)worker;
    mid_ctx *c = p;
    c->early += memcmp(c->y0, c->want0, R0 * sizeof(float)) != 0;
    __atomic_add_fetch(&c->seen[t], 1, __ATOMIC_RELAXED);
    kb_warm_add(c->w, c->buf + 4096 * t, 4096);
}

static void test_matvec_mid(void) {
    static kb_warm w;
    static char buf[NTASK * 4096] __attribute__((aligned(64)));
    const int rows[3] = {R0, R1, R2};
    const uint32_t type = GGML_Q8_0;
    size_t rb = kb_row_bytes(type, COLS);
    uint8_t *W[3];
    float *y[3], *want[3], x[COLS];
    kb_mv mv[3];
    for (int d = 0; d < COLS; d++) x[d] = frand();
    for (int i = 0; i < 3; i++) {
        W[i] = malloc(rb * rows[i]);
        for (int r = 0; r < rows[i]; r++) { /* Q8_0 blocks: a scale of 1/64 (f16 0x2400), random int8 */
            uint8_t *row = W[i] + rb * r;
            for (size_t b = 0; b < rb; b += 34) {
                row[b] = 0x00;
                row[b + 1] = 0x24;
                for (int j = 0; j < 32; j++) row[b + 2 + j] = (uint8_t)(int8_t)(frand() * 127);
            }
        }
        y[i] = malloc(rows[i] * sizeof(float));
        want[i] = malloc(rows[i] * sizeof(float));
        mv[i] = (kb_mv){type, W[i], rb, rows[i], y[i], KB_LAYOUT_ROWS};
    }
    int saved = omp_get_max_threads();
    for (int mode = KB_MATVEC_EXACT; mode <= KB_MATVEC_Q8; mode++) {
        CHECK_EQ_INT(kb_matvec_set_mode(mode), 0);
        kb_mv ref[3];
        for (int i = 0; i < 3; i++) ref[i] = (kb_mv){type, W[i], rb, rows[i], want[i], KB_LAYOUT_ROWS};
        kb_matvec_multi(ref, 3, COLS, x);
        for (int thr = 1; thr <= 3; thr++) {
            omp_set_num_threads(thr);
            for (int i = 0; i < 3; i++)
                for (int r = 0; r < rows[i]; r++) y[i][r] = NAN;
            mid_ctx c = {y[0], want[0], {0}, 0, &w, buf};
            kb_warm_reset(&w);
            kb_mv_mid mid = {NTASK, mid_fn, &c, &w};
            kb_matvec_multi_mid(mv, 3, COLS, x, &mid);
            int same = 1;
            for (int i = 0; i < 3; i++) same &= !memcmp(y[i], want[i], rows[i] * sizeof(float));
            CHECK_MSG(same, "mode %d, %d threads: outputs differ from kb_matvec_multi", mode, thr);
            int once = 1;
            for (int t = 0; t < NTASK; t++) once &= c.seen[t] == 1;
            CHECK_MSG(once && c.early == 0, "mode %d, %d threads: tasks once each after mv[0] (early %d)",
                      mode, thr, c.early);
            CHECK_EQ_INT(w.total, NTASK * 64);
            CHECK(atomic_load(&w.next) >= w.total); /* every queued line taken */
        }
    }
    omp_set_num_threads(saved);
    for (int i = 0; i < 3; i++) {
        free(W[i]);
        free(y[i]);
        free(want[i]);
    }
}

/* -------------------------------------------------- methods with prepare */

enum { NL = 2, HQ = 6, HKV = 2, D = 32, L = 400, WQ = 32, N = 8 };

static void make_prefill(kb_prefill *pf) { test_prefill_random(pf, NL, HQ, HKV, D, L, WQ, &rng); }

typedef struct prep_ctx {
    kb_attn_backend *be;
    int layer;
    const float *q;
    kb_warm *w;
} prep_ctx;

static void prep_one(void *p, int t, int worker) {
    (void)worker;
    prep_ctx *c = p;
    c->be->prepare(c->be->ctx, c->layer, t, c->q, c->w);
}

/* way 0: decode only; 1: prepare (tasks on the pool) then decode with the
 * same q; 2: prepare with another q, then decode with the step's q (the
 * method must notice and choose for the q it decodes). outs [N][NL][HQ*D],
 * sel: every layer's chosen slots after every step. */
static void run(kb_methodset *ms, int way, float *out, int32_t *sel, size_t selmax, size_t *nsel) {
    static kb_warm w;
    kb_attn_backend be = methodset_backend(ms);
    float q[HQ * D], q2[HQ * D], k[HKV * D], v[HKV * D];
    uint64_t keep = rng;
    rng = 77;
    *nsel = 0;
    for (int i = 0; i < N; i++)
        for (int l = 0; l < NL; l++) {
            for (int x = 0; x < HQ * D; x++) q[x] = frand();
            for (int x = 0; x < HQ * D; x++) q2[x] = q[(x + 5) % (HQ * D)];
            for (int x = 0; x < HKV * D; x++) {
                k[x] = frand();
                v[x] = frand();
            }
            int nt = way && be.prepare_tasks ? be.prepare_tasks(be.ctx, l) : 0;
            if (nt > 0) {
                const float *qp = way == 2 ? q2 : q;
                kb_warm_reset(&w);
                prep_ctx c = {&be, l, qp, &w};
                kb_pool_run(nt, prep_one, &c);
                kb_warm_begin(&w, 1);
                kb_warm_finish(&w);
                be.prepare_done(be.ctx, l, qp, 0.5); /* seconds the layer must count as selection */
            }
            be.decode(be.ctx, l, L + i, q, k, v, out + ((size_t)i * NL + l) * HQ * D);
            kb_account a;
            methodset_layer_account(ms, l, &a);
            for (int r = 0; r < a.sel_streams; r++)
                for (int j = 0; j < a.sel_k && *nsel < selmax; j++) sel[(*nsel)++] = a.selected[(size_t)r * a.sel_k + j];
        }
    rng = keep;
}

static void test_methods(void) {
    static const char *const cfgs[] = {
        "{\"method\":\"full\"}",
        "{\"method\":\"exact_topk\",\"budget\":64}",
        "{\"method\":\"snapkvpp\",\"budget\":96}",
        "{\"method\":\"quest\",\"budget\":64}",
        "{\"method\":\"quest\",\"budget\":64,\"gqa\":\"group_mean\"}",
        "{\"method\":\"sparq\",\"budget\":64}",
        "{\"method\":\"hybrid\",\"budget\":64}",
        "{\"method\":\"hybrid\",\"budget\":64,\"gqa\":\"per_head\"}",
        "{\"method\":\"rocketkv\",\"budget\":64}",
        "{\"method\":\"rocketkv\",\"budget\":64,\"skip_layers\":1}",
        "{\"method\":\"rocketkv_mt\",\"budget\":64}",
    };
    kb_prefill pf;
    make_prefill(&pf);
    kb_method_ctx ctx = method_ctx_make(NL, HQ, HKV, D, KB_F16, 4096, L + 1, N);
    size_t nout = (size_t)N * NL * HQ * D, selmax = 1 << 16;
    float *o[3];
    int32_t *s[3];
    size_t ns[3];
    for (int i = 0; i < 3; i++) {
        o[i] = malloc(nout * sizeof(float));
        s[i] = malloc(selmax * sizeof(int32_t));
    }
    int prepared = 0;
    for (size_t ci = 0; ci < sizeof cfgs / sizeof cfgs[0]; ci++) {
        kb_method_params p;
        kb_err e = {0};
        CHECK_MSG(!method_params_parse_text(cfgs[ci], "test", &p, &e), "%s", e.msg);
        for (int way = 0; way < 3; way++) {
            kb_methodset *ms = NULL;
            CHECK_MSG(!methodset_build(&p, &ctx, &pf, &ms, &e), "%s: %s", cfgs[ci], e.msg);
            if (!ms) return;
            kb_attn_backend be = methodset_backend(ms);
            if (way == 1) prepared += be.prepare_tasks && be.prepare_tasks(be.ctx, NL - 1) > 0;
            run(ms, way, o[way], s[way], selmax, &ns[way]);
            if (way == 1 && be.prepare_tasks && be.prepare_tasks(be.ctx, NL - 1) > 0) {
                /* prepare_done's seconds land in the layer's selection time */
                kb_account a;
                methodset_layer_account(ms, NL - 1, &a);
                CHECK_MSG(a.select_seconds >= N * 0.5, "%s: prepare seconds not counted", cfgs[ci]);
            }
            methodset_free(ms);
        }
        for (int way = 1; way < 3; way++) {
            size_t bad = 0;
            for (size_t x = 0; x < nout; x++) bad += memcmp(&o[0][x], &o[way][x], sizeof(float)) != 0;
            CHECK_MSG(bad == 0, "%s, way %d: %zu of %zu outputs differ from decode alone", cfgs[ci], way, bad, nout);
            CHECK_MSG(ns[way] == ns[0] && !memcmp(s[0], s[way], ns[0] * sizeof(int32_t)),
                      "%s, way %d: selections differ from decode alone", cfgs[ci], way);
        }
    }
    /* quest x2, sparq, hybrid x2, rocketkv x2 (its skip layer 0 is dense, layer 1 not), rocketkv_mt */
    CHECK_EQ_INT(prepared, 8);
    for (int i = 0; i < 3; i++) {
        free(o[i]);
        free(s[i]);
    }
    prefill_free(&pf);
}

int main(void) {
    test_warm();
    test_matvec_mid();
    test_methods();
    return check_summary("prepare");
}
