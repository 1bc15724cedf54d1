/* method_harness.c - scenarios and the brute-force comparison loop
 * (method_harness.h). The expected numbers (page size, dims, k, prompt
 * budget, QUEST's P) are recomputed here from methods.md, not read from the
 * library's accountant. */
#include "method_harness.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "methods/params.h"
#include "methods_brute.h"

/* ---- random numbers (xorshift64*, Box-Muller) ---- */

static unsigned long long rs;
static double urand(void) {
    rs ^= rs >> 12;
    rs ^= rs << 25;
    rs ^= rs >> 27;
    return (double)((rs * 2685821657736338717ULL) >> 11) * (1.0 / 9007199254740992.0);
}
static float nrand(void) {
    double u = urand(), v = urand();
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}
static float grid(void) { return (float)((int)(urand() * 5) - 2) * 0.5f; }

void scen_make(scen *s, int Hq, int Hkv, int D, int L, int N, int kind, unsigned long long seed) {
    memset(s, 0, sizeof *s);
    rs = seed * 0x9E3779B97F4A7C15ULL + 1;
    s->Hq = Hq;
    s->Hkv = Hkv;
    s->D = D;
    s->L = L;
    s->N = N;
    s->kind = kind;
    s->dt = KB_F16;
    s->Wq = L < 128 ? L : 128;
    s->needle = -1;
    s->N_new = N;
    s->S = L + N;
    size_t nk = (size_t)L * Hkv * D, nq = (size_t)s->Wq * Hq * D;
    s->k = malloc(nk * sizeof(float) + 4);
    s->v = malloc(nk * sizeof(float) + 4);
    s->qwin = malloc(nq * sizeof(float) + 4);
    s->qpos = malloc((size_t)s->Wq * sizeof(int32_t) + 4);
    s->q = malloc((size_t)N * Hq * D * sizeof(float) + 4);
    s->kn = malloc((size_t)N * Hkv * D * sizeof(float) + 4);
    s->vn = malloc((size_t)N * Hkv * D * sizeof(float) + 4);
    for (int i = 0; i < s->Wq; i++) s->qpos[i] = L - s->Wq + i;
    float (*gen)(void) = kind == K_TIES ? grid : nrand;
    float qs = kind == K_TIES ? 1.0f : 1.5f;
    for (size_t i = 0; i < nk; i++) s->k[i] = gen();
    for (size_t i = 0; i < nk; i++) s->v[i] = gen();
    for (size_t i = 0; i < nq; i++) s->qwin[i] = qs * gen();
    for (size_t i = 0; i < (size_t)N * Hq * D; i++) s->q[i] = qs * gen();
    for (size_t i = 0; i < (size_t)N * Hkv * D; i++) s->kn[i] = gen();
    for (size_t i = 0; i < (size_t)N * Hkv * D; i++) s->vn[i] = gen();
    if (kind == K_NEEDLE || kind == K_SINK) {
        /* a direction per KV head that every query of the group leans to */
        float *u = malloc((size_t)Hkv * D * sizeof(float));
        for (int g = 0; g < Hkv; g++) {
            double n2 = 0;
            for (int d = 0; d < D; d++) {
                u[g * D + d] = nrand();
                n2 += (double)u[g * D + d] * u[g * D + d];
            }
            for (int d = 0; d < D; d++) u[g * D + d] /= (float)sqrt(n2);
        }
        int G = Hq / Hkv;
        for (int i = 0; i < s->Wq; i++)
            for (int h = 0; h < Hq; h++)
                for (int d = 0; d < D; d++) s->qwin[((size_t)i * Hq + h) * D + d] += 6 * u[(h / G) * D + d];
        for (int i = 0; i < N; i++)
            for (int h = 0; h < Hq; h++)
                for (int d = 0; d < D; d++) s->q[((size_t)i * Hq + h) * D + d] += 6 * u[(h / G) * D + d];
        float amp = (float)(4 * sqrt((double)D));
        if (kind == K_NEEDLE && L > 0) {
            s->needle = L / 3;
            for (int g = 0; g < Hkv; g++)
                for (int d = 0; d < D; d++) s->k[((size_t)s->needle * Hkv + g) * D + d] = amp * u[g * D + d];
        } else if (kind == K_SINK) {
            for (int t = 0; t < 4 && t < L; t++)
                for (int g = 0; g < Hkv; g++)
                    for (int d = 0; d < D; d++)
                        s->k[((size_t)t * Hkv + g) * D + d] = 0.5f * amp * u[g * D + d] + nrand() * 0.1f;
        }
        free(u);
    }
    if (kind == K_HEAVY) {
        int dims[3] = {1 % D, 5 % D, 17 % D};
        for (int t = 0; t < L; t++)
            for (int g = 0; g < Hkv; g++)
                for (int a = 0; a < 3; a++) s->k[((size_t)t * Hkv + g) * D + dims[a]] *= 6;
        for (int i = 0; i < N; i++)
            for (int h = 0; h < Hq; h++)
                for (int a = 0; a < 3; a++) s->q[((size_t)i * Hq + h) * D + dims[a]] *= 3;
    }
    if (kind == K_TIES) {
        /* the second half of the prompt repeats the first half's keys exactly */
        for (int t = L / 2; t < L; t++)
            memcpy(s->k + (size_t)t * Hkv * D, s->k + (size_t)(t - L / 2) * Hkv * D, (size_t)Hkv * D * sizeof(float));
        for (int i = 0; i < N && L > 0; i++)
            memcpy(s->kn + (size_t)i * Hkv * D, s->k + (size_t)(i % L) * Hkv * D, (size_t)Hkv * D * sizeof(float));
    }
}

void scen_free(scen *s) {
    free(s->k);
    free(s->v);
    free(s->qwin);
    free(s->qpos);
    free(s->q);
    free(s->kn);
    free(s->vn);
    memset(s, 0, sizeof *s);
}

kb_prefill_view scen_view_at(const scen *s, int base) {
    kb_prefill_view v;
    memset(&v, 0, sizeof v);
    v.Hq = s->Hq;
    v.Hkv = s->Hkv;
    v.D = s->D;
    kb_kvstream *kv = calloc((size_t)s->Hkv, sizeof *kv);
    for (int g = 0; g < s->Hkv; g++) {
        kvstream_init(&kv[g], s->dt, s->D, s->L + 1);
        for (int t = 0; t < s->L; t++)
            kvstream_append_f32(&kv[g], s->k + ((size_t)t * s->Hkv + g) * s->D,
                                s->v + ((size_t)t * s->Hkv + g) * s->D, base + t);
    }
    v.kv = kv;
    v.Wq = s->Wq;
    v.qwin = s->qwin;
    int32_t *qp = malloc(((size_t)s->Wq + 1) * sizeof(int32_t));
    for (int i = 0; i < s->Wq; i++) qp[i] = base + s->qpos[i];
    v.qwin_pos = qp;
    return v;
}

kb_prefill_view scen_view(const scen *s) { return scen_view_at(s, 0); }

void view_free(kb_prefill_view *v) {
    kb_kvstream *kv = (kb_kvstream *)v->kv;
    for (int g = 0; g < v->Hkv; g++) kvstream_free(&kv[g]);
    free(kv);
    free((void *)v->qwin_pos);
    v->kv = NULL;
    v->qwin_pos = NULL;
}

kb_method_ctx scen_ctx(const scen *s) {
    kb_method_ctx c;
    memset(&c, 0, sizeof c);
    c.layer = 0;
    c.n_layers = 1;
    c.Hq = s->Hq;
    c.Hkv = s->Hkv;
    c.D = s->D;
    c.kv_dtype = s->dt;
    c.L_prompt = s->L + 1;
    c.N_new = s->N_new;
    c.S = s->S;
    c.n_ctx = s->S;
    return c;
}

/* ---- the comparison ---- */

enum { R_FULL, R_ETK, R_SNAP, R_QUEST, R_HYB, R_RK, R_RKMT };

typedef struct ref_cfg {
    int kind;
    int per_head; /* selection / storage rows per query head */
    int agg;      /* 0 per head, 1 sum, 2 mean (exact_topk, quest, snap) */
    int k, p, r, local, realloc_v;
    int P, npages;
    int pb, W, K, avg; /* stage 1 */
} ref_cfg;

static int imin(int a, int b) { return a < b ? a : b; }

static int ref_setup(const kb_method_params *p, const scen *s, ref_cfg *c) {
    memset(c, 0, sizeof *c);
    const char *m = p->ops->name;
    int B = p->budget, D = s->D, topk = p->budget_mode == KB_BUDGET_TOPK;
    c->agg = p->gqa == KB_GQA_PER_HEAD ? 0 : p->gqa == KB_GQA_GROUP_MEAN ? 2 : 1;
    c->per_head = p->gqa == KB_GQA_PER_HEAD;
    c->W = p->window;
    c->avg = p->pooling == KB_POOL_AVG;
    c->K = p->kernel;
    if (p->kernel == KB_KERNEL_ADAPTIVE) {
        c->K = p->kernel_table[p->n_kernel_table - 1][1];
        for (int i = p->n_kernel_table - 1; i >= 0; i--)
            if (s->L <= p->kernel_table[i][0]) c->K = p->kernel_table[i][1];
    }
    if (!strcmp(m, "full")) c->kind = R_FULL;
    else if (!strcmp(m, "exact_topk")) {
        c->kind = R_ETK;
        c->k = B;
    } else if (!strcmp(m, "snapkv") || !strcmp(m, "snapkvpp")) {
        c->kind = R_SNAP;
        c->pb = B;
    } else if (!strcmp(m, "quest")) {
        c->kind = R_QUEST;
        if (topk) {
            c->P = 16;
            c->npages = B / 16 > 1 ? B / 16 : 1;
        } else {
            long need = (2L * s->L + B - 1) / B, pw = 1;
            while (pw < need) pw *= 2;
            c->P = pw > 16 ? (int)pw : 16;
            c->npages = (B / 2) / c->P > 1 ? (B / 2) / c->P : 1;
        }
        if (p->page_size) {
            c->P = p->page_size;
            c->npages = topk ? B / c->P : (B / 2) / c->P;
            if (c->npages < 1) c->npages = 1;
        }
    } else if (!strcmp(m, "sparq")) {
        c->kind = R_HYB;
        c->p = 1;
        double c2 = (double)s->S / B < 1 ? 1.0 : (double)s->S / B;
        c->r = topk ? (p->r ? p->r : D / 4) : (int)(D / c2);
        if (!topk && p->r) c->r = p->r;
        c->r = c->r < 1 ? 1 : c->r > D ? D : c->r;
        c->k = topk ? B : B / 2;
        c->local = p->local_window;
        c->realloc_v = p->reallocate_mean_v;
    } else {
        int T, pb, pp, rr, kk;
        int hyb = !strcmp(m, "hybrid");
        br_rocket_split(s->S, B, s->N_new, D, hyb ? 0.0 : (p->alpha_fixed ? p->alpha : -1), &T, &pb, &pp, &rr, &kk);
        if (hyb) {
            /* T = S for hybrid alone */
            double c2 = (double)s->S / B < 1 ? 1.0 : (double)s->S / B;
            pp = (int)ceil(sqrt(c2));
            if (pp > c2) pp = 1;
            rr = (int)(D * (double)pp / c2);
            rr = rr < 1 ? 1 : rr > D ? D : rr;
            if (p->page_size) {
                pp = p->page_size;
                rr = (int)(D * (double)pp / c2);
                rr = rr < 1 ? 1 : rr > D ? D : rr;
            }
        } else if (p->page_size) {
            double c2 = (double)T / B < 1 ? 1.0 : (double)T / B;
            pp = p->page_size;
            rr = (int)(D * (double)pp / c2);
            rr = rr < 1 ? 1 : rr > D ? D : rr;
        }
        if (p->r) rr = p->r;
        c->kind = hyb ? R_HYB : !strcmp(m, "rocketkv") ? R_RK : R_RKMT;
        c->p = pp;
        c->r = rr;
        c->k = topk ? B : kk;
        c->pb = pb;
        if (!hyb) {
            c->per_head = 0;
            c->agg = 1;
        }
    }
    return 0;
}

/* Slot index of position pos in list[0..n) (sorted), -1 if absent. */
static int slot_of(const int *list, int n, int pos) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (list[mid] == pos) return mid;
        if (list[mid] < pos) lo = mid + 1;
        else hi = mid - 1;
    }
    return -1;
}

typedef struct rows {
    int nrows, cap;
    int **t;  /* [nrows][cap] token ids */
    int *n;
} rows;

static void rows_init(rows *r, int nrows, int cap) {
    r->nrows = nrows;
    r->cap = cap;
    r->t = calloc((size_t)nrows, sizeof *r->t);
    r->n = calloc((size_t)nrows, sizeof *r->n);
    for (int i = 0; i < nrows; i++) r->t[i] = malloc((size_t)cap * sizeof(int));
}
static void rows_free(rows *r) {
    for (int i = 0; i < r->nrows; i++) free(r->t[i]);
    free(r->t);
    free(r->n);
}

/* Stage 1 of every row, compared with the implementation's decode caches;
 * the rows then follow the implementation (near ties accepted). */
static int stage1_check(const kb_method_ops *ops, void *st, const ref_cfg *c, const scen *s,
                        const br_hist *h, const int *all, int nall, rows *R, const char *label,
                        mh_result *res) {
    int G = s->Hq / s->Hkv, bad = 0;
    int *kept = malloc(((size_t)nall + 1) * sizeof(int));
    double *score = malloc(((size_t)nall + 1) * sizeof(double));
    for (int row = 0; row < R->nrows; row++) {
        int g = c->per_head ? row / G : row, heads[256], nh = c->per_head ? 1 : G;
        for (int a = 0; a < nh; a++) heads[a] = c->per_head ? row : g * G + a;
        int np = 0;
        int cnt = br_snap_keep(h, g, heads, nh, c->agg == 2, s->qwin, s->qpos, s->Wq, c->W, all, nall,
                               c->pb, c->K, c->avg, kept, score, &np);
        int nr;
        const kb_kvstream *ic = ops->decode_cache(st, row, &nr);
        res->selections++;
        if (ic->n != cnt) {
            fprintf(stderr, "FAIL %s: stage 1 row %d keeps %d tokens, reference %d\n", label, row, ic->n, cnt);
            bad++;
            continue;
        }
        /* prefix (ranked) part as slot indices of the candidate list, window exact */
        int *a = malloc(((size_t)cnt + 1) * sizeof(int)), *b = malloc(((size_t)cnt + 1) * sizeof(int));
        int na = 0, nb = 0, ok = 1;
        for (int t = 0; t < cnt; t++) {
            int sa = slot_of(all, nall, ic->pos[t]), sb = slot_of(all, nall, kept[t]);
            if (sa < 0) ok = 0;
            if (np == 0 || sa >= np) {
                /* window or no eviction: must match exactly */
            } else {
                a[na++] = sa;
            }
            if (np > 0 && sb < np) b[nb++] = sb;
        }
        if (ok && np > 0) {
            for (int t = na; t < cnt; t++) ok &= ic->pos[t] == kept[t];
            int m = br_sets_match(a, na, b, nb, score, np, 1e-4);
            if (m == 2) res->near_ties++;
            ok &= m != 0;
        } else if (ok) {
            for (int t = 0; t < cnt; t++) ok &= ic->pos[t] == kept[t];
        }
        if (!ok) {
            fprintf(stderr, "FAIL %s: stage 1 row %d kept set differs from the reference\n", label, row);
            res->mismatches++;
            bad++;
        }
        for (int t = 0; t < cnt; t++) R->t[row][t] = ic->pos[t]; /* follow the implementation */
        R->n[row] = cnt;
        free(a);
        free(b);
    }
    free(kept);
    free(score);
    return bad;
}

/* Scratch of check_step, sized for the longest row list. */
typedef struct step_bufs {
    float *out;
    double *ref, *score, *headw;
    int *sel, *isel, *tok;
} step_bufs;

static void bufs_init(step_bufs *w, const scen *s, int total) {
    int G = s->Hq / s->Hkv;
    w->out = malloc((size_t)s->Hq * s->D * sizeof(float));
    w->ref = malloc((size_t)s->D * sizeof(double));
    w->sel = malloc(((size_t)total + 1) * sizeof(int));
    w->isel = malloc(((size_t)total + 1) * sizeof(int));
    w->score = malloc(((size_t)total + 1) * sizeof(double));
    w->headw = malloc(((size_t)total + 1) * G * sizeof(double));
    w->tok = malloc(((size_t)total + 1) * sizeof(int));
}

static void bufs_free(step_bufs *w) {
    free(w->out);
    free(w->ref);
    free(w->sel);
    free(w->isel);
    free(w->score);
    free(w->headw);
    free(w->tok);
}

/* Decode step i of the method: query q, new key/value kn/vn at position pos;
 * the rows R (the tokens each decode-cache row holds) and the history h grow
 * by the new token, then the step's selections and outputs are compared with
 * the brute force. Returns the problems found, -1 to stop comparing. */
static int check_step(const kb_method_ops *ops, void *st, const ref_cfg *c, const scen *s, br_hist *h,
                      rows *R, int storage_rows, int sel_rows, const float *q, const float *kn,
                      const float *vn, int pos, int i, const char *label, mh_result *res, step_bufs *w) {
    int Hq = s->Hq, Hkv = s->Hkv, D = s->D, G = Hq / Hkv, bad = 0;
    float *out = w->out;
    double *ref = w->ref, *score = w->score, *headw = w->headw;
    int *sel = w->sel, *isel = w->isel, *tok = w->tok;
    ops->decode(st, q, kn, vn, pos, out);
    kb_account acc;
    memset(&acc, 0, sizeof acc);
    ops->account(st, &acc);
    br_hist_push(h, kn, vn, s->dt);
    for (int row = 0; row < storage_rows; row++) R->t[row][R->n[row]++] = pos;
    res->steps++;
    int dense = c->kind == R_FULL || c->kind == R_SNAP;
    if (dense) {
        /* every slot of the row's cache is attended */
        for (int row = 0; row < storage_rows; row++) {
            int nr;
            const kb_kvstream *ic = ops->decode_cache(st, row, &nr);
            int ok = ic->n == R->n[row];
            for (int t = 0; ok && t < ic->n; t++) ok = ic->pos[t] == R->t[row][t];
            if (!ok) {
                fprintf(stderr, "FAIL %s: step %d row %d: cache differs from the reference\n", label, i, row);
                bad++;
            }
            int nh = storage_rows == Hq ? 1 : G;
            for (int a = 0; a < nh; a++) {
                int hq = storage_rows == Hq ? row : row * G + a;
                br_attend(h, hq / G, q + (size_t)hq * D, R->t[row], R->n[row], ref);
                for (int d = 0; d < D; d++) {
                    double e = fabs(out[(size_t)hq * D + d] - ref[d]) / (1 + fabs(ref[d]));
                    if (e > res->max_err) res->max_err = e;
                }
            }
        }
        if (acc.sel_streams != 0) {
            fprintf(stderr, "FAIL %s: dense method reports %d selection rows\n", label, acc.sel_streams);
            bad++;
        }
        return bad;
    }
    if (acc.sel_streams != sel_rows) {
        fprintf(stderr, "FAIL %s: step %d: %d selection rows, expected %d\n", label, i, acc.sel_streams, sel_rows);
        return -1;
    }
    for (int row = 0; row < sel_rows; row++) {
        int g = c->per_head ? row / G : row, nh = c->per_head ? 1 : G;
        int srow = sel_rows == Hq && storage_rows == Hkv ? g : row;
        const int *list = R->t[srow];
        int n = R->n[srow];
        const float *qr = q + (size_t)(c->per_head ? row : g * G) * D;
        int cnt = 0;
        switch (c->kind) {
        case R_ETK: cnt = br_exact_topk(h, g, qr, nh, c->agg, list, n, c->k, sel, score); break;
        case R_QUEST: {
            double *ps = malloc(((size_t)n / c->P + 2) * sizeof(double));
            cnt = br_quest(h, g, qr, nh, c->agg, list, n, c->P, c->npages, sel, ps);
            for (int j = 0; j < n; j++) score[j] = ps[j / c->P];
            free(ps);
            break;
        }
        default:
            cnt = br_hybrid(h, g, qr, nh, list, n, c->p, c->r, imin(c->k, n), c->local, sel, score, headw);
        }
        /* the implementation's row as slot indices of the list */
        const int32_t *ip = acc.selected_pos + (size_t)row * acc.sel_k;
        int icnt = 0, ok = 1;
        for (int t = 0; t < acc.sel_k && ip[t] >= 0; t++) {
            int sl = slot_of(list, n, ip[t]);
            if (sl < 0) ok = 0;
            isel[icnt++] = sl;
        }
        for (int t = 1; t < icnt; t++) ok &= isel[t] > isel[t - 1];
        int m = ok ? br_sets_match(isel, icnt, sel, cnt, score, n, 1e-4) : 0;
        res->selections++;
        if (m == 2) res->near_ties++;
        if (m == 0) {
            fprintf(stderr, "FAIL %s: step %d row %d: selected set differs (impl %d slots, ref %d)\n",
                    label, i, row, icnt, cnt);
            /* the differing slots with the reference's scores */
            fprintf(stderr, "  impl only:");
            for (int t = 0, u = 0; t < icnt; t++) {
                while (u < cnt && sel[u] < isel[t]) u++;
                if (u >= cnt || sel[u] != isel[t]) fprintf(stderr, " %d(%.9g)", isel[t], score[isel[t]]);
            }
            fprintf(stderr, "\n  ref only:");
            for (int t = 0, u = 0; t < cnt; t++) {
                while (u < icnt && isel[u] < sel[t]) u++;
                if (u >= icnt || isel[u] != sel[t]) fprintf(stderr, " %d(%.9g)", sel[t], score[sel[t]]);
            }
            fprintf(stderr, "\n");
            res->mismatches++;
            bad++;
            continue;
        }
        if (s->needle >= 0 && (c->kind != R_QUEST || c->npages >= 2)) {
            int found = 0;
            for (int t = 0; t < icnt; t++) found |= list[isel[t]] == s->needle;
            res->needle_missed += !found;
        }
        /* outputs over the implementation's (validated) set */
        for (int t = 0; t < icnt; t++) tok[t] = list[isel[t]];
        for (int a = 0; a < nh; a++) {
            int hq = c->per_head ? row : g * G + a;
            br_attend(h, g, q + (size_t)hq * D, tok, icnt, ref);
            if (c->realloc_v && n > 0) {
                double alpha = 0;
                for (int t = 0; t < icnt; t++) alpha += headw[(size_t)a * n + isel[t]];
                for (int d = 0; d < D; d++) {
                    double mv = 0;
                    for (int j = 0; j < n; j++) mv += br_v(h, list[j], g)[d];
                    ref[d] = alpha * ref[d] + (1 - alpha) * mv / n;
                }
            }
            for (int d = 0; d < D; d++) {
                double e = fabs(out[(size_t)hq * D + d] - ref[d]) / (1 + fabs(ref[d]));
                if (e > res->max_err) res->max_err = e;
            }
        }
    }
    return bad;
}

int mh_compare(const char *json, const scen *s, double out_tol, const char *label, mh_result *res) {
    return mh_compare_turns(json, s, NULL, out_tol, label, res);
}

int mh_compare_turns(const char *json, const scen *s, const scen *turn, double out_tol, const char *label,
                     mh_result *res) {
    memset(res, 0, sizeof *res);
    kb_method_params p;
    kb_err err = {0};
    if (method_params_parse_text(json, label, &p, &err)) {
        fprintf(stderr, "FAIL %s: params: %s\n", label, err.msg);
        return 1;
    }
    const kb_method_ops *ops = p.ops;
    ref_cfg c;
    ref_setup(&p, s, &c);
    kb_method_ctx ctx = scen_ctx(s);
    kb_prefill_view v = scen_view(s);
    void *st = NULL;
    if (ops->layer_init(&p, &ctx, &v, &st, &err)) {
        fprintf(stderr, "FAIL %s: layer_init: %s\n", label, err.msg);
        view_free(&v);
        return 1;
    }
    view_free(&v);
    int Hq = s->Hq, Hkv = s->Hkv, D = s->D, bad = 0;
    int total = s->L + s->N + (turn ? turn->L + turn->N + 1 : 0);
    br_hist h;
    br_hist_init(&h, Hq, Hkv, D);
    for (int t = 0; t < s->L; t++)
        br_hist_push(&h, s->k + (size_t)t * Hkv * D, s->v + (size_t)t * Hkv * D, s->dt);
    int *all = malloc(((size_t)total + 1) * sizeof(int));
    for (int t = 0; t < total; t++) all[t] = t;
    int nall = s->L;
    /* the rows the decode step selects from */
    int storage_rows = (c.kind == R_SNAP && c.per_head) ? Hq : Hkv;
    rows R;
    rows_init(&R, storage_rows, total + 1);
    for (int row = 0; row < storage_rows; row++) {
        memcpy(R.t[row], all, (size_t)nall * sizeof(int));
        R.n[row] = nall;
    }
    if (c.kind == R_SNAP || c.kind == R_RK || c.kind == R_RKMT)
        bad += stage1_check(ops, st, &c, s, &h, all, nall, &R, label, res);
    int sel_rows = (c.kind == R_ETK || c.kind == R_QUEST || c.kind == R_HYB) && c.per_head ? Hq : Hkv;
    step_bufs w;
    bufs_init(&w, s, total);
    long mark = -1;
    for (int i = 0; i < s->N; i++) {
        int b = check_step(ops, st, &c, s, &h, &R, storage_rows, sel_rows, s->q + (size_t)i * Hq * D,
                           s->kn + (size_t)i * Hkv * D, s->vn + (size_t)i * Hkv * D, s->L + i, i, label, res, &w);
        if (b < 0) {
            bad++;
            break;
        }
        bad += b;
        if (i == 0) mark = ops->mark(st);
    }
    if (turn && !bad && mark >= 0) {
        /* a second turn, as the sweep runs one (golden context): the decoded
         * tokens are rolled back (the prompt's last token stays), the turn's
         * tokens extend the method at positions L + 1 .., then its decode
         * steps are compared like the first turn's over the rows the method
         * now holds (their stage 1 after the extend is checked in
         * test_method_props.c) */
        int base = s->L + 1;
        ops->rollback(st, mark);
        kb_prefill_view tv = scen_view_at(turn, base);
        if (ops->extend(st, &tv, &err)) {
            fprintf(stderr, "FAIL %s: extend: %s\n", label, err.msg);
            bad++;
        }
        view_free(&tv);
        h.n = base; /* the prompt and its last token */
        for (int t = 0; t < turn->L; t++)
            br_hist_push(&h, turn->k + (size_t)t * Hkv * D, turn->v + (size_t)t * Hkv * D, s->dt);
        for (int row = 0; row < storage_rows && !bad; row++) {
            const kb_kvstream *ic = ops->decode_cache(st, row, NULL);
            memcpy(R.t[row], ic->pos, (size_t)ic->n * sizeof(int));
            R.n[row] = ic->n;
            int whole = !ops->evicts && ic->n == base + turn->L; /* a non-evicting method holds everything */
            for (int t = 0; whole && t < ic->n; t++) whole = ic->pos[t] == t;
            if (!ops->evicts && !whole) {
                fprintf(stderr, "FAIL %s: row %d after the extend does not hold positions 0..%d\n", label, row,
                        base + turn->L - 1);
                bad++;
            }
        }
        for (int j = 0; j < turn->N && !bad; j++) {
            int b = check_step(ops, st, &c, s, &h, &R, storage_rows, sel_rows, turn->q + (size_t)j * Hq * D,
                               turn->kn + (size_t)j * Hkv * D, turn->vn + (size_t)j * Hkv * D,
                               base + turn->L + j, s->N + j, label, res, &w);
            bad += b < 0 ? 1 : b;
        }
    }
    if (res->max_err > out_tol) {
        fprintf(stderr, "FAIL %s: output error %.3g > %.3g\n", label, res->max_err, out_tol);
        bad++;
    }
    ops->destroy(st);
    br_hist_free(&h);
    rows_free(&R);
    free(all);
    bufs_free(&w);
    return bad;
}
