/* test_method_common.c - the shared method plumbing of methods/common.h
 * that the method tests reach only on some paths:
 * - stream_append_from / stream_append_idx between streams of different
 *   element types (the converting path): every slot keeps its position, and
 *   its values as the destination type rounds them (checked against
 *   kb_elem_set/get of each value);
 * - mc_check_view's refusals of a view a layer cannot start from (streams of
 *   unequal length, fewer window queries than the method needs);
 * - mc_select_attend's split of the wall time between selection and
 *   attention (common.h: by the tasks' busy times), with sleeping tasks run
 *   serially (a non-CPU kernel table), and its upkeep share, which is part of
 *   the selection time and so never above it. No check depends on how long a
 *   sleep took (see test_select_attend);
 * - the selection rows, their distinct count and the account's fields;
 * - the method registry's names, order and lookups. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "check.h"
#include "methods/common.h"

static void test_convert(void) {
    enum { D = 4, N = 6 };
    kb_kvstream src, a, b;
    kvstream_init(&src, KB_F32, D, N);
    float k[D], v[D];
    for (int j = 0; j < N; j++) {
        for (int d = 0; d < D; d++) {
            k[d] = 1.0f + (float)j / 3 + (float)d * 1e-3f;
            v[d] = -k[d];
        }
        kvstream_append_f32(&src, k, v, 100 + 7 * j); /* positions 100, 107, ...: not slots */
    }
    kvstream_init(&a, KB_F16, D, 0);
    kvstream_init(&b, KB_BF16, D, 0);
    stream_append_from(&a, &src, 2, 3);
    int32_t idx[3] = {0, 4, 5};
    stream_append_idx(&b, &src, idx, 3);
    CHECK_EQ_INT(a.n, 3);
    CHECK_EQ_INT(b.n, 3);
    float kr[D], vr[D], ks[D], vs[D];
    for (int t = 0; t < 3; t++) {
        CHECK_EQ_INT(a.pos[t], 100 + 7 * (2 + t));
        CHECK_EQ_INT(b.pos[t], 100 + 7 * idx[t]);
        kvstream_get_f32(&a, t, kr, vr);
        kvstream_get_f32(&src, 2 + t, ks, vs);
        for (int d = 0; d < D; d++) {
            uint16_t cell;
            kb_elem_set(&cell, KB_F16, 0, ks[d]);
            CHECK(kr[d] == kb_elem_get(&cell, KB_F16, 0));
            kb_elem_set(&cell, KB_F16, 0, vs[d]);
            CHECK(vr[d] == kb_elem_get(&cell, KB_F16, 0));
        }
        kvstream_get_f32(&b, t, kr, vr);
        kvstream_get_f32(&src, idx[t], ks, vs);
        for (int d = 0; d < D; d++) {
            uint16_t cell;
            kb_elem_set(&cell, KB_BF16, 0, ks[d]);
            CHECK(kr[d] == kb_elem_get(&cell, KB_BF16, 0));
        }
    }
    kvstream_free(&src);
    kvstream_free(&a);
    kvstream_free(&b);
}

static void test_check_view(void) {
    enum { HQ = 4, HKV = 2, D = 8, L = 50 };
    kb_method_params p;
    memset(&p, 0, sizeof p);
    kb_method_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.Hq = HQ;
    ctx.Hkv = HKV;
    ctx.D = D;
    kb_mcommon c;
    mc_init(&c, "m", &p, &ctx);
    kb_kvstream kv[HKV];
    float k[D] = {0}, q[32 * HQ * D] = {0};
    int32_t qp[32];
    for (int g = 0; g < HKV; g++) {
        kvstream_init(&kv[g], KB_F16, D, L);
        for (int j = 0; j < L; j++) kvstream_append_f32(&kv[g], k, k, j);
    }
    for (int i = 0; i < 32; i++) qp[i] = L - 32 + i;
    kb_prefill_view v = {HQ, HKV, D, kv, 32, q, qp};
    kb_err e = {0};
    CHECK_EQ_INT(mc_check_view(&c, &v, 32, &e), 0);
    v.Wq = 31; /* one window query short */
    CHECK_EQ_INT(mc_check_view(&c, &v, 32, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "m: key 'window': the method needs the last 32 prefill queries, the prefill view holds 31"),
              "%s", e.msg);
    v.Wq = 32;
    kv[1].n = L - 1; /* KV heads of different lengths */
    CHECK_EQ_INT(mc_check_view(&c, &v, 32, &e), KB_EINPUT);
    CHECK_MSG(strstr(e.msg, "m: prefill view streams differ in length or D"), "%s", e.msg);
    kv[1].n = L;
    for (int g = 0; g < HKV; g++) kvstream_free(&kv[g]);
    mc_free(&c);
}

/* mc_select_attend on sleeping tasks. No check depends on how long anything took, only on
 * each task reading more than 0 s (a sleep of 5 ms spans at least one tick of a clock as
 * coarse as 4 ms) and on the shares of a fixed split: selection sleeps 2 x 5 ms, attention
 * 2 x 50 ms, so the selection's share is about 1/11; a loaded machine only lengthens the
 * sleeps, and the share would pass 0.9 only if the selection's sleeps overran by ten
 * times the attention's. */
static void nap(double s) {
    struct timespec ts = {0, (long)(s * 1e9)};
    nanosleep(&ts, NULL);
}
static double upkeep_each;
static double sel_task(void *ctx, int i, int worker) {
    (void)ctx, (void)i, (void)worker;
    nap(5e-3);
    return upkeep_each;
}
static void att_task(void *ctx, int i, int worker) {
    (void)ctx, (void)i, (void)worker;
    nap(50e-3);
}

static void test_select_attend(void) {
    static const kb_kernels serial; /* not the CPU table: the tasks run in order on this thread */
    double up = -1;
    upkeep_each = 0.5e-3; /* the upkeep the selection reports, 1 ms of its >= 10 ms */
    double t0 = kb_now();
    double sel = mc_select_attend(&serial, 2, sel_task, att_task, NULL, &up);
    double wall = kb_now() - t0;
    /* a share of the wall time: not all of it (a mutant returning the wall time) */
    CHECK_MSG(sel > 0 && sel < 0.9 * wall, "selection %g s of %g s", sel, wall);
    CHECK_MSG(up > 0 && up < sel, "upkeep %g s, selection %g s", up, sel);
    upkeep_each = 1.0; /* more than the selection's whole time: capped at it, to the bit */
    sel = mc_select_attend(&serial, 2, sel_task, att_task, NULL, &up);
    CHECK_MSG(up == sel && up > 0, "upkeep %g s, selection %g s", up, sel);
    CHECK_CLOSE(mc_select_attend(&serial, 0, sel_task, att_task, NULL, &up), 0, 0, 0);
    CHECK_CLOSE(up, 0, 0, 0);
}

/* mc_sel_begin / mc_sel_set / mc_sel_distinct / mc_acc_finish: rows padded
 * with -1, positions looked up in the stream, distinct slots counted by hand
 * (and the same count again: nothing left marked), the account's selection
 * fields, and its budget only when there is one. */
static void test_selection(void) {
    kb_method_params p;
    memset(&p, 0, sizeof p);
    kb_method_ctx ctx;
    memset(&ctx, 0, sizeof ctx);
    ctx.Hq = 4;
    ctx.Hkv = 2;
    ctx.D = 4;
    kb_mcommon c;
    mc_init(&c, "m", &p, &ctx);
    kb_kvstream s;
    kvstream_init(&s, KB_F32, 4, 10);
    float k[4] = {0};
    for (int j = 0; j < 10; j++) kvstream_append_f32(&s, k, k, 50 + 2 * j);
    mc_sel_begin(&c, 3, 4, 8);
    int32_t r0[3] = {1, 4, 7}, r1[4] = {0, 4, 7, 9}, r2[2] = {2, 3};
    mc_sel_set(&c, 0, r0, 3, &s);
    mc_sel_set(&c, 1, r1, 4, &s);
    mc_sel_set(&c, 2, r2, 2, &s);
    CHECK_EQ_INT(mc_sel_distinct(&c, 0, 2, 10), 5); /* {0, 1, 4, 7, 9} */
    CHECK_EQ_INT(mc_sel_distinct(&c, 0, 2, 10), 5);
    CHECK_EQ_INT(mc_sel_distinct(&c, 1, 2, 10), 6); /* {0, 2, 3, 4, 7, 9} */
    CHECK_EQ_INT(mc_sel_distinct(&c, 2, 1, 10), 2);
    CHECK_EQ_INT(mc_sel_distinct(&c, 0, 1, 10), 3);
    mc_acc_finish(&c, 1);
    CHECK_EQ_INT(c.acc.sel_streams, 3);
    CHECK(c.acc.sel_k >= 4 && c.acc.sel_per_query_head == 1);
    CHECK(c.acc.budget == NULL); /* no budget resolved */
    const int32_t *sp = c.acc.selected_pos, *sl = c.acc.selected;
    int k1 = c.acc.sel_k;
    CHECK(sl[0] == 1 && sl[2] == 7 && sl[3] == -1 && sp[0] == 52 && sp[1] == 58 && sp[2] == 64 && sp[3] == -1);
    CHECK(sl[k1 + 3] == 9 && sp[k1 + 3] == 68 && sp[2 * k1] == 54 && sp[2 * k1 + 2] == -1);
    c.bud.B = 64;
    mc_acc_finish(&c, 0);
    CHECK(c.acc.budget == &c.bud && c.acc.sel_per_query_head == 0);
    kvstream_free(&s);
    mc_free(&c);
}

/* methods/registry.c: the nine methods of docs/METHODS.md §4's table, in its
 * order; a name is found only whole ("snapkvpp" is not "snapkv"). */
static void test_registry(void) {
    static const char *const names[] = {"full", "exact_topk", "snapkv", "snapkvpp", "quest",
                                        "sparq", "hybrid", "rocketkv", "rocketkv_mt"};
    CHECK_EQ_INT(method_count(), 9);
    for (int i = 0; i < 9; i++) {
        CHECK(method_at(i) != NULL && !strcmp(method_at(i)->name, names[i]));
        CHECK(method_find(names[i]) == method_at(i));
    }
    CHECK(method_at(9) == NULL && method_at(-1) == NULL);
    CHECK(method_find("snapkv") != method_find("snapkvpp"));
    CHECK(method_find("fullx") == NULL && method_find("ful") == NULL && method_find("") == NULL &&
          method_find(NULL) == NULL && method_find("rocketkv_mt2") == NULL);
    CHECK_STREQ(method_names(), "full, exact_topk, snapkv, snapkvpp, quest, sparq, hybrid, rocketkv, rocketkv_mt");
}

int main(void) {
    test_convert();
    test_check_view();
    test_select_attend();
    test_registry();
    test_selection();
    return check_summary("method_common");
}
