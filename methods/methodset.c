/* methodset.c - one method's per-layer states for a model (methodset.h). */
#include "methods/methodset.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "harness/machine.h"
#include "kernels/kernels.h"

#define TURN_WINDOW_MIN 128 /* window queries kept for a later turn's extend */

/* A later turn being prefilled, per layer. */
typedef struct turn_layer {
    kb_kvstream *ctxs;   /* [Hq] retained + turn tokens so far, per query head (shared
                            by heads whose retained() is the same stream: see owner) */
    int *owner;          /* [Hq] index of the head whose ctxs entry this head uses */
    kb_kvstream *fresh;  /* [Hkv] the turn's tokens only */
    float *qwin;         /* [Wt][Hq][D] last queries of the turn */
    int32_t *qwin_pos;   /* [Wt] */
    int nq;              /* rows held */
} turn_layer;

struct kb_methodset {
    kb_method_params p, full_p;
    kb_method_ctx ctx;
    int n_layers, Wt;
    const kb_method_ops **ops; /* [n_layers] */
    void **state;              /* [n_layers] */
    turn_layer *turn;          /* [n_layers] or NULL when no turn is open */
};

static void turn_free(kb_methodset *m) {
    if (!m->turn) return;
    for (int l = 0; l < m->n_layers; l++) {
        turn_layer *t = &m->turn[l];
        if (!t->ctxs) continue;
        for (int h = 0; h < m->ctx.Hq; h++)
            if (t->owner[h] == h) kvstream_free(&t->ctxs[h]);
        for (int h = 0; h < m->ctx.Hkv; h++) kvstream_free(&t->fresh[h]);
        free(t->ctxs);
        free(t->owner);
        free(t->fresh);
        free(t->qwin);
        free(t->qwin_pos);
    }
    free(m->turn);
    m->turn = NULL;
}

kb_method_ctx method_ctx_make(int n_layers, int Hq, int Hkv, int D, kb_dtype kv_dtype, int n_ctx,
                              int L_prompt, int N_new) {
    kb_method_ctx c;
    memset(&c, 0, sizeof c);
    c.n_layers = n_layers;
    c.Hq = Hq;
    c.Hkv = Hkv;
    c.D = D;
    c.kv_dtype = kv_dtype;
    c.n_ctx = n_ctx;
    c.L_prompt = L_prompt;
    c.N_new = N_new;
    c.S = KB_MIN(L_prompt + N_new, n_ctx);
    return c;
}

double methodset_select_bytes(const kb_method_params *p, int n_layers, int Hq, long tokens) {
    if (!p->ops || !p->ops->selects || tokens < 1) return 0;
    int layers = n_layers - KB_MIN(KB_MAX(p->skip_layers, 0), n_layers);
    /* slots a row may select: the budget, or QUEST's one page when that is
     * larger (16, page_size, or the power of 2 from 2L/B, under 4L/B), never
     * more than the cache; rows <= Hq; three int32 arrays (sel, sel_pos, the
     * method's chosen slots) */
    double B = p->budget > 0 ? p->budget : 1;
    double k = fmax(fmax(B, 16.0), fmax((double)p->page_size, 4.0 * (double)tokens / B));
    k = fmin(k, 2.0 * (double)tokens);
    return (double)layers * Hq * k * 3 * sizeof(int32_t);
}

int methodset_build(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill *pf,
                    kb_methodset **out, kb_err *err) {
    return methodset_build_layers(p, ctx, pf, NULL, out, err);
}

/* After layer l's state is built: the layers still to build need about as
 * much memory each as this one holds (its K/V and method state, measured by
 * its accountant; a method's state differs from Full KV's cache by method:
 * SparQ holds K twice, RocketKV a fraction). Fails before the machine runs
 * out of memory instead of being killed part way. The dense layers below
 * skip_layers come first and are not the method's: checked from the first
 * layer of the method on. */
static int check_rest(const kb_methodset *m, int l, const char *label, kb_err *err) {
    int rest = m->n_layers - l - 1;
    if (rest <= 0 || m->ops[l] != m->p.ops) return 0;
    size_t avail = machine_mem_available();
    if (!avail) return 0; /* unknown: do not guess */
    kb_account a;
    memset(&a, 0, sizeof a);
    m->ops[l]->account(m->state[l], &a);
    double need = a.resident_bytes * rest;
    if (need <= (double)avail) return 0;
    return kb_fail(err, KB_EINPUT,
                   "%s: layer %d holds %.1f MiB of K/V and method state, so the %d layers still to build "
                   "need about %.2f GiB, but only %.2f GiB of memory is available: use a shorter context, "
                   "a smaller budget or a machine with more memory",
                   label, l, a.resident_bytes / 1048576.0, rest, need / 1073741824.0, avail / 1073741824.0);
}

int methodset_check_model(const kb_method_params *p, int n_layers, int D, kb_err *err) {
    if (p->skip_layers >= n_layers)
        return kb_fail(err, KB_EINPUT, "key 'skip_layers': %d, expected at most %d: the model has %d layers and the "
                       "layers below skip_layers run Full KV, so %d or more would leave the method no layer",
                       p->skip_layers, n_layers - 1, n_layers, n_layers);
    if (p->r > D) return kb_fail(err, KB_EINPUT, "key 'r': %d exceeds the model's head dim D = %d", p->r, D);
    return 0;
}

int methodset_build_layers(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill *pf,
                           const kb_layer_source *src, kb_methodset **out, kb_err *err) {
    const kb_method_ops *full = method_find("full");
    if (!full) return kb_fail(err, KB_ERUNTIME, "method registry has no 'full' method");
    if (methodset_check_model(p, ctx->n_layers, ctx->D, err)) return kb_err_prefix(err, "%s", p->label);
    kb_methodset *m = KB_CALLOC(1, sizeof *m);
    m->p = *p;
    memset(&m->full_p, 0, sizeof m->full_p);
    m->full_p.ops = full;
    m->full_p.budget = -1;
    snprintf(m->full_p.label, sizeof m->full_p.label, "full");
    int rc = full->validate ? full->validate(&m->full_p, err) : 0;
    m->ctx = *ctx;
    m->n_layers = ctx->n_layers;
    m->Wt = KB_MAX(TURN_WINDOW_MIN, p->window);
    m->ops = KB_CALLOC((size_t)m->n_layers, sizeof *m->ops);
    m->state = KB_CALLOC((size_t)m->n_layers, sizeof *m->state);
    for (int l = 0; l < m->n_layers && !rc; l++) {
        kb_method_ctx c = *ctx;
        c.layer = l;
        int dense = l < p->skip_layers;
        m->ops[l] = dense ? full : p->ops;
        if (src && src->load && (rc = src->load(src->u, l, err))) {
            kb_err_prefix(err, "%s: layer %d", p->label, l);
            break;
        }
        kb_prefill_view v = prefill_view(pf, l);
        rc = m->ops[l]->layer_init(dense ? &m->full_p : &m->p, &c, &v, &m->state[l], err);
        if (rc) kb_err_prefix(err, "%s: layer %d", p->label, l);
        if (src && src->release) src->release(src->u, l);
        if (!rc) rc = check_rest(m, l, p->label, err);
    }
    if (rc) {
        methodset_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

void methodset_free(kb_methodset *m) {
    if (!m) return;
    turn_free(m);
    for (int l = 0; l < m->n_layers; l++)
        if (m->state[l]) m->ops[l]->destroy(m->state[l]);
    free(m->ops);
    free(m->state);
    free(m);
}

static void ms_decode(void *ctx, int layer, int32_t pos, const float *q, const float *k,
                      const float *v, float *out) {
    kb_methodset *m = ctx;
    m->ops[layer]->decode(m->state[layer], q, k, v, pos, out);
}

static void turn_open_layer(kb_methodset *m, int l) {
    turn_layer *t = &m->turn[l];
    int Hq = m->ctx.Hq, Hkv = m->ctx.Hkv, D = m->ctx.D;
    t->ctxs = KB_CALLOC((size_t)Hq, sizeof *t->ctxs);
    t->owner = KB_CALLOC((size_t)Hq, sizeof *t->owner);
    t->fresh = KB_CALLOC((size_t)Hkv, sizeof *t->fresh);
    t->qwin = KB_CALLOC((size_t)m->Wt * Hq * D, sizeof(float));
    t->qwin_pos = KB_CALLOC((size_t)m->Wt, sizeof(int32_t));
    const kb_kvstream **ret = KB_CALLOC((size_t)Hq, sizeof *ret);
    for (int h = 0; h < Hq; h++) {
        ret[h] = m->ops[l]->retained(m->state[l], h);
        t->owner[h] = h;
        for (int o = 0; o < h; o++)
            if (ret[o] == ret[h] && o / (Hq / Hkv) == h / (Hq / Hkv)) {
                t->owner[h] = t->owner[o];
                break;
            }
        if (t->owner[h] == h) {
            kvstream_init(&t->ctxs[h], ret[h]->dtype, D, ret[h]->n + 64);
            kvstream_copy(&t->ctxs[h], ret[h]);
        }
    }
    for (int h = 0; h < Hkv; h++) kvstream_init(&t->fresh[h], m->ctx.kv_dtype, D, 64);
    free(ret);
}

static int ms_prefill(void *ctx, int layer, int n, const int32_t *pos, const float *Q,
                      const float *K, const float *V, float *out, kb_err *err) {
    (void)err;
    kb_methodset *m = ctx;
    int Hq = m->ctx.Hq, Hkv = m->ctx.Hkv, D = m->ctx.D, G = Hq / Hkv;
    if (!m->turn) m->turn = KB_CALLOC((size_t)m->n_layers, sizeof *m->turn);
    turn_layer *t = &m->turn[layer];
    if (!t->ctxs) turn_open_layer(m, layer);
    const kb_kernels *kr = kernels_get();
    float scale = 1.0f / sqrtf((float)D);
    for (int h = 0; h < Hkv; h++)
        for (int i = 0; i < n; i++)
            kvstream_append_f32(&t->fresh[h], K + ((size_t)i * Hkv + h) * D,
                                V + ((size_t)i * Hkv + h) * D, pos[i]);
    /* each owned context stream gets the chunk, then its heads attend */
    for (int h = 0; h < Hq; h++) {
        if (t->owner[h] != h) continue;
        kb_kvstream *s = &t->ctxs[h];
        int n_prior = s->n, kvh = h / G;
        for (int i = 0; i < n; i++)
            kvstream_append_f32(s, K + ((size_t)i * Hkv + kvh) * D, V + ((size_t)i * Hkv + kvh) * D,
                                pos[i]);
        int run = 1; /* consecutive heads sharing this stream */
        while (h + run < Hq && t->owner[h + run] == h) run++;
        kr->attn_causal(Q + (size_t)h * D, n, Hq * D, run, s, n_prior, scale, out + (size_t)h * D,
                        Hq * D);
        for (int o = h + run; o < Hq; o++) /* non-consecutive sharers (rare) */
            if (t->owner[o] == h)
                kr->attn_causal(Q + (size_t)o * D, n, Hq * D, 1, s, n_prior, scale,
                                out + (size_t)o * D, Hq * D);
    }
    /* last Wt queries of the turn */
    size_t row = (size_t)Hq * D;
    int take = KB_MIN(n, m->Wt), keep = KB_MIN(t->nq, m->Wt - take);
    memmove(t->qwin, t->qwin + (size_t)(t->nq - keep) * row, (size_t)keep * row * sizeof(float));
    memcpy(t->qwin + (size_t)keep * row, Q + (size_t)(n - take) * row, (size_t)take * row * sizeof(float));
    memmove(t->qwin_pos, t->qwin_pos + (t->nq - keep), (size_t)keep * sizeof(int32_t));
    memcpy(t->qwin_pos + keep, pos + (n - take), (size_t)take * sizeof(int32_t));
    t->nq = keep + take;
    return 0;
}

int methodset_end_turn(kb_methodset *m, kb_err *err) {
    if (!m->turn) return 0;
    int rc = 0;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        turn_layer *t = &m->turn[l];
        if (!t->ctxs) continue;
        kb_prefill_view v;
        memset(&v, 0, sizeof v);
        v.Hq = m->ctx.Hq;
        v.Hkv = m->ctx.Hkv;
        v.D = m->ctx.D;
        v.kv = t->fresh;
        v.Wq = t->nq;
        v.qwin = t->qwin;
        v.qwin_pos = t->qwin_pos;
        rc = m->ops[l]->extend(m->state[l], &v, err);
        if (rc) kb_err_prefix(err, "%s: layer %d: new turn", m->p.label, l);
    }
    turn_free(m);
    return rc;
}

kb_attn_backend methodset_backend(kb_methodset *m) {
    kb_attn_backend be = {m, ms_prefill, ms_decode};
    return be;
}

long methodset_mark(kb_methodset *m) { return m->ops[m->n_layers - 1]->mark(m->state[m->n_layers - 1]); }

void methodset_rollback(kb_methodset *m, long mark) {
    for (int l = 0; l < m->n_layers; l++) m->ops[l]->rollback(m->state[l], mark);
}

void methodset_layer_account(kb_methodset *m, int layer, kb_account *acc) {
    memset(acc, 0, sizeof *acc);
    m->ops[layer]->account(m->state[layer], acc);
}

void methodset_account(kb_methodset *m, kb_cell_account *a) {
    memset(a, 0, sizeof *a);
    for (int l = 0; l < m->n_layers; l++) {
        kb_account x;
        methodset_layer_account(m, l, &x);
        a->resident_tokens += x.resident_tokens / m->n_layers;
        a->resident_bytes += x.resident_bytes;
        a->read_tokeq += x.read_tokeq / m->n_layers;
        a->approx_tokeq += x.approx_tokeq / m->n_layers;
        a->read_bytes += x.read_bytes;
        a->attended += x.attended / m->n_layers;
        a->select_seconds += x.select_seconds;
        a->upkeep_seconds += x.upkeep_seconds;
    }
}

const kb_method_ops *methodset_layer_ops(kb_methodset *m, int layer) { return m->ops[layer]; }
void *methodset_layer_state(kb_methodset *m, int layer) { return m->state[layer]; }
