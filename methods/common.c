/* common.c - shared method plumbing (common.h). */
#include "methods/common.h"

#include <math.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/pool.h"

void mc_parallel(const kb_kernels *kk, int n, void (*fn)(void *ctx, int i, int worker), void *ctx) {
    if (kk == &kb_kernels_cpu) {
        kb_pool_run(n, fn, ctx);
        return;
    }
    for (int i = 0; i < n; i++) fn(ctx, i, 0);
}

typedef struct sa_job {
    double (*sel)(void *, int, int);
    void (*att)(void *, int, int);
    void *ctx;
    int rows;
    atomic_int *ready; /* [rows] row i's select finished */
    double *busy;      /* [3 * rows] seconds in each task, waits excluded; then
                          each select's upkeep seconds */
} sa_job;

static void sa_task(void *p, int t, int worker) {
    const sa_job *J = p;
    double t0 = kb_now();
    if (t < J->rows) {
        J->busy[2 * J->rows + t] = J->sel(J->ctx, t, worker);
        J->busy[t] = kb_now() - t0;
        atomic_store_explicit(&J->ready[t], 1, memory_order_release);
        return;
    }
    int i = t - J->rows;
    for (long spin = 0; !atomic_load_explicit(&J->ready[i], memory_order_acquire); spin++) {
        if (spin < 4096) {
#if defined(__x86_64__) || defined(__i386__)
            __builtin_ia32_pause();
#endif
        } else {
            sched_yield(); /* the selecting thread is descheduled */
        }
    }
    t0 = kb_now();
    J->att(J->ctx, i, worker);
    J->busy[t] = kb_now() - t0;
}

float *mc_scratch(int which, size_t n) {
    static _Thread_local float *buf[2];
    static _Thread_local size_t cap[2];
    if (n > cap[which]) {
        free(buf[which]);
        cap[which] = n;
        buf[which] = KB_MALLOC(n * sizeof(float));
    }
    return buf[which];
}

double mc_select_attend(const kb_kernels *kk, int rows, double (*sel)(void *ctx, int i, int worker),
                        void (*att)(void *ctx, int i, int worker), void *ctx, double *upkeep) {
    if (upkeep) *upkeep = 0;
    if (rows <= 0) return 0;
    atomic_int rbuf[64];
    double bbuf[192];
    atomic_int *ready = rows <= 64 ? rbuf : KB_MALLOC((size_t)rows * sizeof *ready);
    double *busy = rows <= 64 ? bbuf : KB_MALLOC((size_t)3 * rows * sizeof *busy);
    for (int i = 0; i < rows; i++) atomic_init(&ready[i], 0);
    sa_job J = {sel, att, ctx, rows, ready, busy};
    double t0 = kb_now();
    mc_parallel(kk, 2 * rows, sa_task, &J);
    double wall = kb_now() - t0, bs = 0, ba = 0, bu = 0;
    for (int i = 0; i < rows; i++) {
        bs += busy[i];
        ba += busy[rows + i];
        bu += busy[2 * rows + i];
    }
    if (ready != rbuf) free(ready);
    if (busy != bbuf) free(busy);
    if (bs + ba <= 0) return 0;
    if (upkeep) *upkeep = wall * KB_MIN(bu, bs) / (bs + ba);
    return wall * bs / (bs + ba);
}

void mc_init(kb_mcommon *c, const char *who, const kb_method_params *p, const kb_method_ctx *ctx) {
    memset(c, 0, sizeof *c);
    c->p = *p;
    c->ctx = *ctx;
    c->who = who;
    c->G = ctx->Hkv > 0 ? ctx->Hq / ctx->Hkv : 1;
    c->scale = 1.0f / sqrtf((float)ctx->D);
    budget_clear(&c->bud);
    c->bud.mode = p->budget_mode;
}

void mc_free(kb_mcommon *c) {
    free(c->sel);
    free(c->sel_pos);
    free(c->mark);
    c->sel = c->sel_pos = NULL;
    c->mark = NULL;
}

int mc_check_view(const kb_mcommon *c, const kb_prefill_view *pv, int need_w, kb_err *err) {
    const kb_method_ctx *x = &c->ctx;
    if (x->Hq < 1 || x->Hkv < 1 || x->D < 1 || x->Hq % x->Hkv)
        return kb_fail(err, KB_EINPUT, "%s: bad head shape Hq=%d Hkv=%d D=%d (Hq must be a multiple of Hkv)",
                       c->who, x->Hq, x->Hkv, x->D);
    if (pv->Hq != x->Hq || pv->Hkv != x->Hkv || pv->D != x->D)
        return kb_fail(err, KB_EINPUT, "%s: prefill view has Hq=%d Hkv=%d D=%d, the layer expects %d/%d/%d",
                       c->who, pv->Hq, pv->Hkv, pv->D, x->Hq, x->Hkv, x->D);
    int n = pv->kv[0].n;
    for (int g = 0; g < x->Hkv; g++) {
        if (pv->kv[g].n != n || pv->kv[g].D != x->D)
            return kb_fail(err, KB_EINPUT, "%s: prefill view streams differ in length or D", c->who);
    }
    if (need_w > 0) {
        int want = KB_MIN(need_w, n);
        if (pv->Wq < want || !pv->qwin || !pv->qwin_pos)
            return kb_fail(err, KB_EINPUT,
                           "%s: key 'window': the method needs the last %d prefill queries, the prefill view holds %d",
                           c->who, want, pv->Wq);
    }
    return 0;
}

void stream_append_from(kb_kvstream *dst, const kb_kvstream *src, int from, int n) {
    if (n <= 0) return;
    if (dst->dtype == src->dtype && dst->D == src->D) {
        kvstream_append_range(dst, src, from, n);
        return;
    }
    float *k = KB_MALLOC((size_t)src->D * sizeof(float)), *v = KB_MALLOC((size_t)src->D * sizeof(float));
    kvstream_reserve(dst, dst->n + n);
    for (int j = from; j < from + n; j++) {
        kvstream_get_f32(src, j, k, v);
        kvstream_append_f32(dst, k, v, src->pos[j]);
    }
    free(k);
    free(v);
}

void stream_append_idx(kb_kvstream *dst, const kb_kvstream *src, const int32_t *idx, int n) {
    if (n <= 0) return;
    if (dst->dtype == src->dtype && dst->D == src->D) {
        kvstream_append_rows(dst, src, idx, n);
        return;
    }
    float *k = KB_MALLOC((size_t)src->D * sizeof(float)), *v = KB_MALLOC((size_t)src->D * sizeof(float));
    kvstream_reserve(dst, dst->n + n);
    for (int t = 0; t < n; t++) {
        kvstream_get_f32(src, idx[t], k, v);
        kvstream_append_f32(dst, k, v, src->pos[idx[t]]);
    }
    free(k);
    free(v);
}

int mc_grow_cap(int cap, int need, int most) { return KB_MIN(KB_MAX(need, most), KB_MAX(need, 2 * cap)); }

void mc_sel_begin(kb_mcommon *c, int rows, int k, int most) {
    if (k < 1) k = 1;
    if (rows > c->sel_rows || k > c->sel_cap) {
        int cap = k > c->sel_cap ? mc_grow_cap(c->sel_cap, k, most) : c->sel_cap;
        int nr = KB_MAX(rows, c->sel_rows);
        free(c->sel);
        free(c->sel_pos);
        c->sel = KB_MALLOC((size_t)nr * cap * sizeof(int32_t));
        c->sel_pos = KB_MALLOC((size_t)nr * cap * sizeof(int32_t));
        c->sel_rows = nr;
        c->sel_cap = cap;
    }
    for (size_t i = 0; i < (size_t)rows * c->sel_cap; i++) c->sel[i] = c->sel_pos[i] = -1;
    c->acc.sel_streams = rows; /* sel_k, the row stride, is set by mc_acc_finish */
}

void mc_sel_set(kb_mcommon *c, int row, const int32_t *idx, int n, const kb_kvstream *s) {
    int32_t *r = mc_sel_row(c, row), *rp = c->sel_pos + (size_t)row * c->sel_cap;
    for (int t = 0; t < n; t++) {
        r[t] = idx[t];
        rp[t] = s->pos[idx[t]];
    }
}

int mc_sel_distinct(kb_mcommon *c, int row0, int rows, int n) {
    if (rows == 1) {
        const int32_t *r = mc_sel_row(c, row0);
        int cnt = 0;
        while (cnt < c->sel_cap && r[cnt] >= 0) cnt++;
        return cnt;
    }
    if (n > c->mark_cap) {
        free(c->mark);
        c->mark_cap = KB_MAX(n, 2 * c->mark_cap);
        c->mark = KB_CALLOC((size_t)c->mark_cap, 1);
    }
    int cnt = 0;
    for (int i = row0; i < row0 + rows; i++) {
        const int32_t *r = mc_sel_row(c, i);
        for (int t = 0; t < c->sel_cap && r[t] >= 0; t++)
            if (!c->mark[r[t]]) {
                c->mark[r[t]] = 1;
                cnt++;
            }
    }
    for (int i = row0; i < row0 + rows; i++) {
        const int32_t *r = mc_sel_row(c, i);
        for (int t = 0; t < c->sel_cap && r[t] >= 0; t++) c->mark[r[t]] = 0;
    }
    return cnt;
}

void mc_acc_finish(kb_mcommon *c, int per_query_head) {
    kb_account *a = &c->acc;
    a->mode = c->p.budget_mode;
    a->budget = c->bud.B > 0 ? &c->bud : NULL;
    a->sel_per_query_head = per_query_head;
    if (a->sel_streams > 0) {
        /* rows keep the buffer stride; expose it as sel_k */
        a->sel_k = c->sel_cap;
        a->selected = c->sel;
        a->selected_pos = c->sel_pos;
    } else {
        a->sel_k = 0;
        a->selected = a->selected_pos = NULL;
    }
}

long mc_rollback_count(kb_mcommon *c, long mark) {
    if (mark < c->base) mark = c->base;
    if (mark >= c->n_in) return 0;
    long d = c->n_in - mark;
    c->n_in = mark;
    return d;
}

int mc_streams_extend(kb_mcommon *c, kb_kvstream *s, int rows, const kb_prefill_view *pv, int need_w,
                      kb_err *err) {
    int rc = mc_check_view(c, pv, need_w, err);
    if (rc) return rc;
    streams_append_view(s, rows, pv);
    c->n_in += pv->kv[0].n;
    c->base = c->n_in;
    return 0;
}

void mc_streams_account(const kb_mcommon *c, const kb_kvstream *s, int rows, kb_account *acc) {
    *acc = c->acc;
    acc->resident_tokens = streams_slots(s, rows) / c->ctx.Hkv;
    acc->resident_bytes = streams_bytes(s, rows);
    acc->mode = c->p.budget_mode;
}

int mc_kernel_for(const kb_method_params *p, int n) {
    if (p->kernel != KB_KERNEL_ADAPTIVE) return p->kernel;
    for (int i = 0; i < p->n_kernel_table; i++)
        if (n <= p->kernel_table[i][0]) return p->kernel_table[i][1];
    return p->n_kernel_table > 0 ? p->kernel_table[p->n_kernel_table - 1][1] : 1;
}

kb_kvstream *streams_new(int rows, kb_dtype dt, int D, int cap) {
    kb_kvstream *s = KB_CALLOC((size_t)rows, sizeof *s);
    for (int i = 0; i < rows; i++) kvstream_init(&s[i], dt, D, cap);
    return s;
}

void streams_free(kb_kvstream *s, int rows) {
    if (!s) return;
    for (int i = 0; i < rows; i++) kvstream_free(&s[i]);
    free(s);
}

void streams_drop(kb_kvstream *s, int rows, long d) {
    for (int i = 0; i < rows; i++) kvstream_truncate(&s[i], (int)KB_MAX(0L, (long)s[i].n - d));
}

double streams_slots(const kb_kvstream *s, int rows) {
    double t = 0;
    for (int i = 0; i < rows; i++) t += s[i].n;
    return t;
}

double streams_bytes(const kb_kvstream *s, int rows) {
    double t = 0;
    for (int i = 0; i < rows; i++) t += (double)kvstream_bytes(&s[i]);
    return t;
}

void streams_append_token(kb_kvstream *s, int rows, int Hkv, int D, const float *k,
                          const float *v, int32_t pos) {
    int per = rows / Hkv;
    for (int i = 0; i < rows; i++) {
        int g = i / per;
        kvstream_append_f32(&s[i], k + (size_t)g * D, v + (size_t)g * D, pos);
    }
}

void streams_append_view(kb_kvstream *s, int rows, const kb_prefill_view *pv) {
    int per = rows / pv->Hkv;
    for (int i = 0; i < rows; i++) stream_append_from(&s[i], &pv->kv[i / per], 0, pv->kv[i / per].n);
}
