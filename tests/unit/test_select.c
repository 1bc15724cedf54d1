/* test_select.c - the selection building blocks (kernels/select.h): each
 * fast CPU version against its reference and both against plain
 * definitions written here (a full sort for top-k, a window scan for
 * pooling, direct dot products for the QUEST bound), on random data with
 * ties, partial pages and edge sizes. Tolerances: f32 against double
 * references, relative 1e-5 on scores (sums of <= 10^4 terms), 1e-5 on
 * attention outputs. */
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "kernels/select.h"

static float nrand(void) {
    double u = check_urand(), v = check_urand();
    if (u < 1e-300) u = 1e-300;
    return (float)(sqrt(-2 * log(u)) * cos(6.283185307179586 * v));
}

/* Definition of top-k: sort all (score desc, index asc) by insertion into a
 * ranked list, take k, return ascending. O(n^2): small n only. */
static int topk_def(const float *x, int n, int k, int32_t *out) {
    int *ord = malloc((size_t)(n + 1) * sizeof(int));
    for (int i = 0; i < n; i++) {
        float xi = isnan(x[i]) ? -INFINITY : x[i];
        int j = i;
        while (j > 0) {
            float xo = isnan(x[ord[j - 1]]) ? -INFINITY : x[ord[j - 1]];
            if (xo > xi || (xo == xi && ord[j - 1] < i)) break;
            ord[j] = ord[j - 1];
            j--;
        }
        ord[j] = i;
    }
    if (k > n) k = n;
    if (k < 0) k = 0;
    /* ascending */
    char *in = calloc((size_t)n + 1, 1);
    for (int t = 0; t < k; t++) in[ord[t]] = 1;
    int c = 0;
    for (int i = 0; i < n; i++)
        if (in[i]) out[c++] = i;
    free(ord);
    free(in);
    return c;
}

static int same_idx(const int32_t *a, int na, const int32_t *b, int nb) {
    if (na != nb) return 0;
    for (int i = 0; i < na; i++)
        if (a[i] != b[i]) return 0;
    return 1;
}

static void test_topk(void) {
    int32_t a[2100], b[2100], c[2100];
    float x[2100];
    for (int trial = 0; trial < 300; trial++) {
        int n = 1 + (int)(check_urand() * (trial < 200 ? 60 : 2000));
        int levels = trial % 3 == 0 ? 3 : 1000000; /* many exact ties or almost none */
        for (int i = 0; i < n; i++) x[i] = (float)(int)(check_urand() * levels);
        if (trial % 7 == 0) x[(int)(check_urand() * n)] = NAN;
        if (trial % 5 == 0) x[(int)(check_urand() * n)] = -INFINITY;
        int k = (int)(check_urand() * (n + 3)) - 1;
        int nd = topk_def(x, n, k, a);
        int nr = kb_ref_topk(x, n, k, b);
        int nc = kb_cpu_topk(x, n, k, c);
        CHECK_MSG(same_idx(a, nd, b, nr), "ref topk n=%d k=%d", n, k);
        CHECK_MSG(same_idx(a, nd, c, nc), "cpu topk n=%d k=%d", n, k);
    }
    /* orders that defeat naive pivots: sorted, reversed, all equal */
    static float y[100000];
    static int32_t r1[5000], r2[5000];
    for (int pat = 0; pat < 3; pat++) {
        int n = 100000;
        for (int i = 0; i < n; i++) y[i] = pat == 0 ? (float)i : pat == 1 ? (float)(n - i) : 1.0f;
        int nr = kb_ref_topk(y, n, 5000, r1), nc = kb_cpu_topk(y, n, 5000, r2);
        CHECK_MSG(same_idx(r1, nr, r2, nc), "pattern %d", pat);
    }
    /* all equal: the lowest indices */
    for (int i = 0; i < 10; i++) y[i] = 2.0f;
    CHECK_EQ_INT(kb_cpu_topk(y, 10, 4, r2), 4);
    CHECK(r2[0] == 0 && r2[1] == 1 && r2[2] == 2 && r2[3] == 3);
}

/* The key-space top-k (select_cpu.c) against the definition where its
 * paths differ: -0 and +0 are equal scores (ties to the lower index), NaN
 * ranks as -inf, large n with few winners (sampled threshold, candidates
 * then bisection) with and without ties at the boundary, and page top-k
 * over hundreds of pages. */
static void test_topk_keys(void) {
    static float x[6000];
    static int32_t a[6000], c[6000];
    for (int trial = 0; trial < 60; trial++) {
        int n = trial < 20 ? 1 + (int)(check_urand() * 40) : 1024 + (int)(check_urand() * 4000);
        int kind = trial % 4;
        for (int i = 0; i < n; i++) {
            if (kind == 0) x[i] = check_urand() < 0.5 ? 0.0f : -0.0f;
            else if (kind == 1) x[i] = (float)(int)(check_urand() * 7) - 3.0f;
            else x[i] = (float)nrand();
            if (kind == 3 && check_urand() < 0.05) x[i] = check_urand() < 0.5 ? NAN : -INFINITY;
        }
        int ks[4] = {1, n / 16 + 1, n / 8, (int)(check_urand() * n) + 1};
        for (int j = 0; j < 4; j++) {
            int k = ks[j] < 1 ? 1 : ks[j];
            int nd = topk_def(x, n, k, a), nc = kb_cpu_topk(x, n, k, c);
            CHECK_MSG(same_idx(a, nd, c, nc), "topk keys n=%d k=%d kind=%d", n, k, kind);
        }
    }
    /* pages: 300..1500 pages of p = 3, scores with and without ties */
    static float ps[1600];
    for (int trial = 0; trial < 40; trial++) {
        int p = 3, np = 300 + (int)(check_urand() * 1200), n = np * p - (int)(check_urand() * p);
        for (int P = 0; P < np; P++) ps[P] = trial % 2 ? (float)(int)(check_urand() * 5) : (float)nrand();
        int k = 1 + (int)(check_urand() * (trial % 3 ? 200 : n));
        int nr = kb_ref_topk_pages(ps, n, p, k, a), nc = kb_cpu_topk_pages(ps, n, p, k, c);
        CHECK_MSG(same_idx(a, nr, c, nc), "topk_pages keys n=%d k=%d", n, k);
    }
}

static void test_topk_pages(void) {
    int32_t a[4000], b[4000];
    float ps[1000];
    for (int trial = 0; trial < 400; trial++) {
        /* p > 16 takes the scalar slot loop of kb_cpu_topk_pages */
        int p = trial % 10 == 9 ? 17 + (int)(check_urand() * 4) : 1 + (int)(check_urand() * 6);
        int n = 1 + (int)(check_urand() * 400);
        int np = (n + p - 1) / p;
        for (int P = 0; P < np; P++) ps[P] = (float)(int)(check_urand() * (trial % 2 ? 4 : 1000));
        int k = (int)(check_urand() * (n + 2));
        int nr = kb_ref_topk_pages(ps, n, p, k, a);
        int nc = kb_cpu_topk_pages(ps, n, p, k, b);
        CHECK_MSG(same_idx(a, nr, b, nc), "topk_pages n=%d p=%d k=%d", n, p, k);
        /* at most one page is split, and it gives its lowest slots */
        int split = 0;
        for (int P = 0; P < np; P++) {
            int cnt = 0, first = -1, last = -1;
            int size = P == np - 1 ? n - P * p : p;
            for (int t = 0; t < nc; t++)
                if (b[t] / p == P) {
                    cnt++;
                    if (first < 0) first = b[t];
                    last = b[t];
                }
            if (cnt > 0 && cnt < size) {
                split++;
                CHECK(first == P * p && last == P * p + cnt - 1);
            }
        }
        CHECK(split <= 1);
    }
}

static void test_pool(void) {
    float in[300], o1[300], o2[300];
    for (int trial = 0; trial < 200; trial++) {
        int n = 1 + (int)(check_urand() * 290);
        int K = 1 + 2 * (int)(check_urand() * 40);
        for (int i = 0; i < n; i++) in[i] = nrand();
        for (int mode = 0; mode < 2; mode++) {
            kb_ref_pool1d(in, n, K, mode, o1);
            kb_cpu_pool1d(in, n, K, mode, o2);
            int ok = 1;
            for (int j = 0; j < n; j++) {
                /* definition: window [j-K/2, j+K/2], -inf / zero padding */
                double m = -INFINITY, s = 0;
                for (int t = j - K / 2; t <= j + K / 2; t++)
                    if (t >= 0 && t < n) {
                        m = in[t] > m ? in[t] : m;
                        s += in[t];
                    }
                double want = mode ? s / K : m;
                if (mode == 0) ok &= o1[j] == (float)want && o2[j] == (float)want;
                else ok &= fabs(o1[j] - want) <= 1e-6 && fabs(o2[j] - want) <= 1e-6;
            }
            CHECK_MSG(ok, "pool mode %d n=%d K=%d", mode, n, K);
        }
    }
}

static void fill_stream(kb_kvstream *s, int n, int D, kb_dtype t) {
    kvstream_init(s, t, D, n);
    float *k = malloc((size_t)D * sizeof(float)), *v = malloc((size_t)D * sizeof(float));
    for (int j = 0; j < n; j++) {
        for (int d = 0; d < D; d++) {
            k[d] = nrand();
            v[d] = nrand();
        }
        kvstream_append_f32(s, k, v, j);
    }
    free(k);
    free(v);
}

static void test_pages(void) {
    const kb_kernels *kk[2] = {&kb_kernels_ref, &kb_kernels_cpu};
    for (int trial = 0; trial < 40; trial++) {
        int D = 8 + 8 * (trial % 3), p = 1 + trial % 5, n = 1 + (int)(check_urand() * 150);
        kb_kvstream s;
        /* every dtype with both kernel tables (summaries are kept in it) */
        fill_stream(&s, n, D, trial / 2 % 3 == 0 ? KB_F32 : trial / 2 % 3 == 1 ? KB_F16 : KB_BF16);
        kb_pages inc, full;
        pages_init(&inc, p, D);
        pages_init(&full, p, D);
        /* incremental, one slot at a time, with a rollback in the middle */
        kb_kvstream part;
        kvstream_init(&part, s.dtype, D, n);
        const kb_kernels *k = kk[trial % 2];
        /* two rows of +-50 in every dim, appended then rolled back mid-page:
         * the page that continues must forget them (the rollback below
         * re-appends the same rows, which a stale summary would also pass) */
        kb_kvstream junk;
        kvstream_init(&junk, s.dtype, D, 2);
        float *jr = malloc((size_t)D * sizeof(float));
        for (int i = 0; i < 2; i++) {
            for (int d = 0; d < D; d++) jr[d] = (d + i) % 2 ? 50.0f : -50.0f;
            kvstream_append_f32(&junk, jr, jr, 0);
        }
        free(jr);
        for (int j = 0; j < n; j++) {
            kvstream_append_range(&part, &s, j, 1);
            pages_sync(&inc, &part, k);
            if (j == n / 3 && j % p != p - 1) { /* slot j + 1 continues j's page */
                kvstream_append_range(&part, &junk, 0, 2);
                pages_sync(&inc, &part, k);
                kvstream_truncate(&part, j + 1);
                pages_truncate(&inc, &part, j + 1, k);
            }
            if (j == n / 2 && j >= 3) {
                int back = j - 2;
                kvstream_truncate(&part, back);
                pages_truncate(&inc, &part, back, k);
                kvstream_append_range(&part, &s, back, j + 1 - back);
                pages_sync(&inc, &part, k);
            }
        }
        pages_sync(&full, &s, kk[1 - trial % 2]);
        CHECK_EQ_INT(pages_count(&inc), (n + p - 1) / p);
        if (p == 1) /* a page's min and max are its key: K is held once, dim-major */
            CHECK(inc.kmin == inc.kmax && full.kmin == full.kmax);
        int ok = 1;
        float *kr = malloc((size_t)D * sizeof(float));
        for (int P = 0; P < pages_count(&inc); P++)
            for (int d = 0; d < D; d++) {
                /* definition: min/max over the page's real slots */
                float mx = -INFINITY, mn = INFINITY;
                for (int j = P * p; j < n && j < P * p + p; j++) {
                    kvstream_get_f32(&s, j, kr, NULL);
                    mx = kr[d] > mx ? kr[d] : mx;
                    mn = kr[d] < mn ? kr[d] : mn;
                }
                ok &= kb_elem_get(inc.kmax, inc.dt, (size_t)d * inc.cap + P) == mx &&
                      kb_elem_get(inc.kmin, inc.dt, (size_t)d * inc.cap + P) == mn && inc.dt == s.dtype;
                ok &= kb_elem_get(full.kmax, full.dt, (size_t)d * full.cap + P) == mx &&
                      kb_elem_get(full.kmin, full.dt, (size_t)d * full.cap + P) == mn;
            }
        CHECK_MSG(ok, "pages p=%d n=%d", p, n);
        /* QUEST: the page bound is >= every true score q.k in its page */
        float q[32];
        for (int d = 0; d < D; d++) q[d] = nrand();
        float *b1 = malloc((size_t)pages_count(&inc) * sizeof(float));
        float *b2 = malloc((size_t)pages_count(&inc) * sizeof(float));
        kb_ref_quest_scores(q, D, inc.kmax, inc.kmin, inc.dt, inc.cap, pages_count(&inc), b1);
        kb_cpu_quest_scores(q, D, inc.kmax, inc.kmin, inc.dt, inc.cap, pages_count(&inc), b2);
        for (int j = 0; j < n; j++) {
            kvstream_get_f32(&s, j, kr, NULL);
            double dot = 0;
            for (int d = 0; d < D; d++) dot += (double)q[d] * kr[d];
            CHECK_MSG(b1[j / p] >= dot - 1e-5 && b2[j / p] >= dot - 1e-5, "quest bound slot %d", j);
        }
        for (int P = 0; P < pages_count(&inc); P++) CHECK_CLOSE(b2[P], b1[P], 1e-5, 1e-5);
        free(b1);
        free(b2);
        free(kr);
        pages_free(&inc);
        pages_free(&full);
        kvstream_free(&s);
        kvstream_free(&part);
        kvstream_free(&junk);
    }
    /* a page size below 1 is taken as 1 (pages.c) */
    kb_pages z;
    pages_init(&z, 0, 8);
    CHECK_EQ_INT(z.p, 1);
    pages_init(&z, -3, 8);
    CHECK_EQ_INT(z.p, 1);
}

/* A head whose values on the chosen dims are all 0 (the group's other head
 * chose them) scores every page exactly 0, so its softmax over slots is
 * uniform, 1/n per slot, whatever finite temperature is used; the
 * temperature's formula gives sqrt(D * 0 / sum|q|) = 0 there, and 0/0 would
 * make the weights NaN. Expected 1/n from that argument, not from a kernel;
 * tolerance 1e-6 relative: exp(0) = 1 exactly, and the f32 normalisation
 * rounds a few times (~1e-7 each). Ref and CPU kernels, p = 1 and p = 2
 * (partial last page), every dtype. */
static void test_hybrid_zero_dims(void) {
    const kb_kernels *kk[2] = {&kb_kernels_ref, &kb_kernels_cpu};
    for (int trial = 0; trial < 12; trial++) {
        int D = 16, G = 2, p = 1 + trial % 2, n = 21, r = 2, np = (n + p - 1) / p;
        kb_kvstream s;
        fill_stream(&s, n, D, trial / 2 % 3 == 0 ? KB_F32 : trial / 2 % 3 == 1 ? KB_F16 : KB_BF16);
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_cpu);
        float q[2 * 16];
        for (int d = 0; d < D; d++) {
            q[d] = d == 0 ? 3.0f : d == 1 ? -2.0f : 0.1f; /* head 0: mean |q| 1.5, 1 on dims 0, 1; 0.3 elsewhere */
            q[D + d] = d < 2 ? 0.0f : 0.5f;               /* head 1: 0 on the chosen dims */
        }
        float ps[32], hw[2 * 32];
        int32_t dims[2];
        const kb_kernels *k = kk[trial % 2];
        k->hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, ps, hw, dims);
        CHECK_MSG(dims[0] == 0 && dims[1] == 1, "%s: dims %d %d", k->name, dims[0], dims[1]);
        int ok = 1;
        double mass = 0;
        for (int P = 0; P < np; P++) {
            ok &= fabs(hw[np + P] - 1.0 / n) <= 1e-6 / n;
            mass += (double)hw[P] * (P == np - 1 ? n - P * p : p);
        }
        CHECK_MSG(ok, "%s p=%d: head 1 weights not uniform (%g vs %g)", k->name, p, hw[np], 1.0 / n);
        CHECK_CLOSE(mass, 1.0, 1e-5, 0); /* head 0: a distribution over slots (as test_hybrid_scores) */
        pages_free(&pg);
        kvstream_free(&s);
    }
}

/* r outside [1, D] is clamped into it: r = D + 3 gives r = D's scores, dims
 * and weights, r = 0 and r = -2 give r = 1's (ref and cpu; bit for bit, the
 * same call after the clamp). */
static void test_hybrid_r_clamp(void) {
    const kb_kernels *kk[2] = {&kb_kernels_ref, &kb_kernels_cpu};
    int D = 16, G = 2, p = 2, n = 31, np = (n + p - 1) / p;
    kb_kvstream s;
    fill_stream(&s, n, D, KB_F16);
    kb_pages pg;
    pages_init(&pg, p, D);
    pages_sync(&pg, &s, &kb_kernels_cpu);
    float q[2 * 16];
    for (int i = 0; i < G * D; i++) q[i] = nrand();
    for (int ki = 0; ki < 2; ki++) {
        const int rs[3][2] = {{D + 3, D}, {0, 1}, {-2, 1}};
        for (int c = 0; c < 3; c++) {
            float a[16], b[16], wa[2 * 16], wb[2 * 16];
            int32_t da[32], db[32];
            kk[ki]->hybrid_scores(q, G, D, rs[c][0], pg.kmax, pg.kmin, pg.cap, &s, n, p, a, wa, da);
            kk[ki]->hybrid_scores(q, G, D, rs[c][1], pg.kmax, pg.kmin, pg.cap, &s, n, p, b, wb, db);
            CHECK_MSG(!memcmp(a, b, (size_t)np * sizeof(float)) && !memcmp(wa, wb, (size_t)G * np * sizeof(float)) &&
                          same_idx(da, rs[c][1], db, rs[c][1]),
                      "%s: r=%d differs from r=%d", kk[ki]->name, rs[c][0], rs[c][1]);
        }
    }
    pages_free(&pg);
    kvstream_free(&s);
}

/* The chosen dims when many mean |q| tie (small integer queries, a NaN):
 * ties go to the lower dim, as in the reference. */
static void test_hybrid_dims_ties(void) {
    for (int trial = 0; trial < 60; trial++) {
        /* D <= 256 takes the bisection path (topk_small_double), D 320 (> 256)
         * its rank count */
        int D = trial % 3 == 0 ? 128 : trial % 5 == 2 ? 256 : trial % 5 == 4 ? 320 : 64, G = 1 + trial % 4, p = 2,
            n = 40;
        int r = 1 + (int)(check_urand() * D);
        kb_kvstream s;
        fill_stream(&s, n, D, KB_F16);
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_cpu);
        float q[4 * 320];
        for (int i = 0; i < G * D; i++) q[i] = (float)((int)(check_urand() * 5) - 2);
        if (trial % 4 == 1) q[(int)(check_urand() * G * D)] = NAN;
        float a[32], b[32], wa[4 * 32], wb[4 * 32];
        int32_t da[320], db[320];
        kb_ref_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, a, wa, da);
        kb_cpu_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, b, wb, db);
        CHECK_MSG(same_idx(da, r, db, r), "tied dims D=%d G=%d r=%d", D, G, r);
        pages_free(&pg);
        kvstream_free(&s);
    }
}

static void test_hybrid_scores(void) {
    for (int trial = 0; trial < 80; trial++) {
        /* G 8 is the widest vector path, G 9 the portable one; D 40 is not a
         * multiple of the vector width */
        int D = trial % 7 == 6 ? 40 : 16 * (1 + trial % 4), p = 1 + trial % 4;
        int G = trial % 10 == 9 ? 9 : trial % 10 == 8 ? 8 : 1 + trial % 4;
        int n = 1 + (int)(check_urand() * 300), r = 1 + (int)(check_urand() * D);
        kb_kvstream s;
        fill_stream(&s, n, D, trial % 3 == 0 ? KB_F32 : trial % 3 == 1 ? KB_F16 : KB_BF16);
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_cpu);
        float *q = malloc((size_t)G * D * sizeof(float));
        for (int i = 0; i < G * D; i++) q[i] = nrand();
        if (trial % 5 == 0) q[0] = 0; /* a zero component and sign ties */
        int np = (n + p - 1) / p;
        float *a = malloc((size_t)np * sizeof(float)), *b = malloc((size_t)np * sizeof(float));
        float *wa = malloc((size_t)G * np * sizeof(float)), *wb = malloc((size_t)G * np * sizeof(float));
        int32_t da[128], db[128];
        kb_ref_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, a, wa, da);
        kb_cpu_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, b, wb, db);
        CHECK_MSG(same_idx(da, r, db, r), "dims D=%d r=%d", D, r);
        double mass = 0;
        for (int P = 0; P < np; P++) {
            CHECK_CLOSE(b[P], a[P], 1e-9, 2e-5);
            mass += (double)a[P] * (P == np - 1 ? n - P * p : p);
        }
        CHECK_CLOSE(mass, 1.0, 1e-5, 0); /* the group score is a mean of distributions over slots */
        for (int i = 0; i < G * np; i++) CHECK_CLOSE(wb[i], wa[i], 1e-9, 2e-5);
        free(q);
        free(a);
        free(b);
        free(wa);
        free(wb);
        pages_free(&pg);
        kvstream_free(&s);
    }
}

/* Every score far below zero, and a last block of pages partly past np
 * (whose lanes hold 0): the softmax's max must be the real pages' (-hundreds
 * here), or exp(score / tau - max) underflows to 0 for every page and the
 * weights are no distribution (a max over the padding lanes gives 0). */
static void test_hybrid_scores_negative(void) {
    for (int trial = 0; trial < 12; trial++) {
        int D = 64, G = 1 + trial % 4, p = 2 + trial % 3, n = 40 + 37 * trial, r = 8 + 4 * (trial % 5);
        kb_kvstream s;
        kvstream_init(&s, trial % 2 ? KB_F16 : KB_F32, D, n);
        float k[64], v[64];
        for (int j = 0; j < n; j++) {
            for (int d = 0; d < D; d++) {
                k[d] = 8.0f + 0.5f * (float)nrand();
                v[d] = (float)nrand();
            }
            kvstream_append_f32(&s, k, v, j);
        }
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_cpu);
        float q[4 * 64];
        for (int i = 0; i < G * D; i++) q[i] = -4.0f - (float)fabs(nrand());
        int np = (n + p - 1) / p;
        float a[1000], b[1000], wa[4 * 1000], wb[4 * 1000];
        int32_t da[64], db[64];
        kb_ref_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, a, wa, da);
        kb_cpu_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, b, wb, db);
        /* scores of about -700 summed in f32 are off by ~1e-4 (a few ulps
         * of 700 per dim), which moves each weight by ~1e-4 relative after
         * the division by tau and the normalisation: 5e-4. The fault this
         * test is for gives NaN or 0 weights. */
        double mass = 0;
        for (int P = 0; P < np; P++) {
            CHECK_CLOSE(b[P], a[P], 1e-9, 5e-4);
            mass += (double)b[P] * (P == np - 1 ? n - P * p : p);
        }
        /* the slot weights sum to 1: each f32 weight carries ~6e-8 relative
         * rounding and the normaliser one more, so over <= 300 pages the
         * sum is within ~1e-6 of 1; 1e-5 leaves room (the fault gives 0 or NaN) */
        CHECK_CLOSE(mass, 1.0, 1e-5, 0);
        pages_free(&pg);
        kvstream_free(&s);
    }
}

static void test_snapkv_scores_and_gather(void) {
    /* 30 small trials, then 4 long ones: several chunks of keys and of output
     * for the pool (kb_cpu_snapkv_scores splits both), more than one pass of
     * 32 (row, head) pairs, and a head dim with a scalar tail (40) */
    for (int trial = 0; trial < 34; trial++) {
        int D = 16 + 16 * (trial % 3), G = 1 + trial % 3, n = 1 + (int)(check_urand() * 200);
        int nq = 1 + (int)(check_urand() * (n < 40 ? n : 40));
        if (trial >= 30) {
            D = trial % 2 ? 40 : 64;
            n = 4000 + (int)(check_urand() * 5000);
            nq = 33;
        }
        kb_kvstream s;
        fill_stream(&s, n, D, trial % 2 ? KB_F16 : KB_BF16);
        /* non-contiguous positions: the mask must follow positions, not slots */
        for (int j = 0; j < n; j++) s.pos[j] = 3 * j + (j % 2);
        int ldq = G * D;
        float *Q = malloc((size_t)nq * ldq * sizeof(float));
        int32_t *qp = malloc((size_t)nq * sizeof(int32_t));
        for (int i = 0; i < nq * ldq; i++) Q[i] = nrand();
        for (int i = 0; i < nq; i++) qp[i] = s.pos[n - nq + i];
        qp[0] = -1; /* a row that sees nothing contributes nothing */
        int npre = n - nq;
        float *a = calloc((size_t)G * (npre + 1), sizeof(float)), *b = calloc((size_t)G * (npre + 1), sizeof(float));
        float scale = 1.0f / sqrtf((float)D);
        kb_ref_snapkv_scores(Q, nq, ldq, G, qp, &s, n, npre, scale, a, npre + 1);
        kb_cpu_snapkv_scores(Q, nq, ldq, G, qp, &s, n, npre, scale, b, npre + 1);
        for (int g = 0; g < G; g++)
            for (int j = 0; j < npre; j++) CHECK_CLOSE(b[g * (npre + 1) + j], a[g * (npre + 1) + j], 1e-7, 1e-5);
        if (trial >= 30) { /* the pool's split does not change a bit: 1 and 3 threads */
            int saved = omp_get_max_threads();
            float *c = calloc((size_t)G * (npre + 1), sizeof(float));
            for (int thr = 1; thr <= 3; thr += 2) {
                omp_set_num_threads(thr);
                kb_cpu_snapkv_scores(Q, nq, ldq, G, qp, &s, n, npre, scale, c, npre + 1);
                CHECK_MSG(!memcmp(c, b, (size_t)G * (npre + 1) * sizeof(float)), "%d threads: scores differ", thr);
            }
            omp_set_num_threads(saved);
            free(c);
        }
        /* gathered attention over a random subset with -1 holes */
        int32_t idx[256];
        int k = 0;
        for (int j = 0; j < n && k < 256; j++)
            if (check_urand() < 0.3) idx[k++] = check_urand() < 0.2 ? -1 : j;
        float *o1 = malloc((size_t)G * D * sizeof(float)), *o2 = malloc((size_t)G * D * sizeof(float));
        kb_ref_attn_gather(Q, G, &s, idx, k, scale, o1);
        kb_cpu_attn_gather(Q, G, &s, idx, k, scale, o2);
        for (int i = 0; i < G * D; i++) CHECK_CLOSE(o2[i], o1[i], 1e-5, 1e-5);
        int32_t none[2] = {-1, -1};
        kb_cpu_attn_gather(Q, G, &s, none, 2, scale, o2);
        CHECK(o2[0] == 0 && o2[G * D - 1] == 0);
        free(o1);
        free(o2);
        free(Q);
        free(qp);
        free(a);
        free(b);
        kvstream_free(&s);
    }
}

/* The vector paths' promised values, bit for bit, against arithmetic
 * written out here (select_cpu.c's comments): each page score is an FMA
 * chain over the chosen dims in ascending order, the softmax divides by tau,
 * subtracts the max, takes the exp of simd_exp512 / simd_exp256 (written out
 * with fmaf) and sums in double in the path's lanes (below), the group
 * score is the heads' weights summed from 0 in head order times 1/G;
 * QUEST's bound is the ascending sum of max(q a, q b) in f32. Tolerance 0:
 * these are the orders of operations the kernels promise, and an equal
 * order gives equal pages equal scores, which the top-k's tie rule relies
 * on. Here for the AVX-512 path (16 lanes); test_select_avx2.c includes this
 * file with select_cpu.c's AVX2 path compiled in (SEL_AVX2, 8 lanes). */
#if defined(__AVX512F__)
#define HX_LANES 16
#elif SEL_AVX2
#define HX_LANES 8
#endif
#ifdef HX_LANES
static int same_bits(float a, float b) { return !memcmp(&a, &b, sizeof a); }

/* The exp of simd_exp256 / simd_exp512 (simd.h) written out for one lane,
 * with their FMAs as fmaf (simd_exp1 rounds each product apart). */
static float exp_fma(float v) {
    if (!(v > -87.33f)) return 0.0f;
    v = v < 88.7f ? v : 88.7f;
    float nn = nearbyintf(v * 1.44269504088896341f);
    float r = fmaf(-nn, 0.693145751953125f, v);
    r = fmaf(-nn, 1.428606765330187045e-06f, r);
    float e = 1.9875691500e-4f;
    e = fmaf(e, r, 1.3981999507e-3f);
    e = fmaf(e, r, 8.3334519073e-3f);
    e = fmaf(e, r, 4.1665795894e-2f);
    e = fmaf(e, r, 1.6666665459e-1f);
    e = fmaf(e, r, 5.0000001201e-1f);
    e = fmaf(e * r, r, r + 1.0f);
    uint32_t bits;
    memcpy(&bits, &e, 4);
    bits += (uint32_t)(int32_t)nn << 23;
    memcpy(&e, &bits, 4);
    return e;
}

/* kb_cpu_hybrid_scores against its promised arithmetic (header comment),
 * over the shapes of test_hybrid_scores plus long streams (several prefetch
 * distances, the p == 1 K copy) and every G of the compile-time instances. */
static void test_hybrid_exact(void) {
    for (int trial = 0; trial < 90; trial++) {
        int D = trial % 7 == 6 ? 40 : 16 * (1 + trial % 4), p = 1 + trial % 4, G = 1 + trial % 8;
        int n = trial % 10 == 3 ? 2500 + (int)(check_urand() * 3000) : 1 + (int)(check_urand() * 400);
        int r = 1 + (int)(check_urand() * D);
        kb_kvstream s;
        fill_stream(&s, n, D, trial % 3 == 0 ? KB_F32 : trial % 3 == 1 ? KB_F16 : KB_BF16);
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_ref); /* summaries from the reference */
        float *q = malloc((size_t)G * D * sizeof(float));
        for (int i = 0; i < G * D; i++) q[i] = nrand();
        if (trial % 9 == 4) /* duplicated pages: equal scores */
            for (int d = 0; d < D; d++) {
                float v = kb_elem_get(pg.kmax, pg.dt, (size_t)d * pg.cap);
                for (int P = 1; P < pages_count(&pg); P += 2) kb_elem_set(pg.kmax, pg.dt, (size_t)d * pg.cap + P, v);
                v = kb_elem_get(pg.kmin, pg.dt, (size_t)d * pg.cap);
                for (int P = 1; P < pages_count(&pg); P += 2) kb_elem_set(pg.kmin, pg.dt, (size_t)d * pg.cap + P, v);
            }
        int np = (n + p - 1) / p, last_cnt = n - (np - 1) * p;
        float *b = malloc((size_t)np * sizeof(float)), *wb = malloc((size_t)G * np * sizeof(float));
        float *want = calloc((size_t)np, sizeof(float)), *ww = malloc((size_t)G * np * sizeof(float));
        float *x = malloc((size_t)np * sizeof(float));
        int32_t dr[64], db[64];
        float *rw = malloc((size_t)np * sizeof(float));
        /* the chosen dims: the reference's (checked equal in test_select) */
        kb_ref_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, rw, NULL, dr);
        kb_cpu_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, b, wb, db);
        CHECK_MSG(same_idx(dr, r, db, r), "exact: dims D=%d r=%d", D, r);
        for (int g = 0; g < G; g++) {
            const float *qg = q + (size_t)g * D;
            for (int P = 0; P < np; P++) {
                float acc = 0;
                for (int t = 0; t < r; t++) {
                    int d = dr[t];
                    double sum = 0;
                    for (int h = 0; h < G; h++) sum += q[(size_t)h * D + d];
                    acc = fmaf(qg[d], kb_elem_get(sum > 0 ? pg.kmax : pg.kmin, pg.dt, (size_t)d * pg.cap + P), acc);
                }
                x[P] = acc;
            }
            float tau = kb_hybrid_temperature(qg, D, dr, r), mx = -INFINITY;
            for (int P = 0; P < np; P++) {
                x[P] /= tau;
                mx = x[P] > mx ? x[P] : mx;
            }
            double sum = 0;
            for (int P = 0; P < np; P++) x[P] = exp_fma(x[P] - mx);
            /* the vector path's order: HX_LANES lanes over the whole
             * vectors below np - 1, then the rest in ascending P. AVX2:
             * (l0+l4 + l1+l5) + (l2+l6 + l3+l7); AVX-512: c_j = l_j + l_j+8
             * (its two accumulators), then _mm512_reduce_add_pd's
             * (c0+c4 + c2+c6) + (c1+c5 + c3+c7). (Sums of a few hundred
             * floats in double are exact unless their magnitudes spread
             * over ~2^29, so another order of addition rarely shows here.) */
            double lane[16] = {0};
            int nbv = (np - 1) / HX_LANES;
            for (int bv = 0; bv < nbv; bv++)
                for (int j = 0; j < HX_LANES; j++) lane[j] += x[HX_LANES * bv + j];
            if (HX_LANES == 8) {
                sum = ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
            } else {
                double c[8];
                for (int j = 0; j < 8; j++) c[j] = lane[j] + lane[j + 8];
                sum = ((c[0] + c[4]) + (c[2] + c[6])) + ((c[1] + c[5]) + (c[3] + c[7]));
            }
            for (int P = nbv * HX_LANES; P < np - 1; P++) sum += x[P];
            float inv = (float)(1.0 / (sum * p + (double)x[np - 1] * last_cnt));
            for (int P = 0; P < np; P++) ww[(size_t)g * np + P] = x[P] * inv;
        }
        for (int P = 0; P < np; P++) {
            float acc = 0;
            for (int g = 0; g < G; g++) acc += ww[(size_t)g * np + P];
            want[P] = acc * (1.0f / G);
        }
        int ok = 1, first = -1;
        for (int P = 0; P < np; P++) {
            int e = same_bits(b[P], want[P]);
            for (int g = 0; g < G; g++) e &= same_bits(wb[(size_t)g * np + P], ww[(size_t)g * np + P]);
            if (!e && first < 0) first = P;
            ok &= e;
        }
        CHECK_MSG(ok, "exact: hybrid scores G=%d D=%d p=%d n=%d r=%d dt=%d: page %d %.9g vs %.9g", G, D, p, n, r,
                  (int)pg.dt, first, first >= 0 ? b[first] : 0, first >= 0 ? want[first] : 0);
        if (trial % 9 == 4)
            for (int P = 1; P < np; P += 2) CHECK_MSG(b[P] == b[0], "exact: equal pages P=%d", P);
        free(q);
        free(b);
        free(wb);
        free(want);
        free(ww);
        free(x);
        free(rw);
        pages_free(&pg);
        kvstream_free(&s);
    }
}

static void test_quest_exact(void) {
    for (int trial = 0; trial < 30; trial++) {
        int D = 8 + 8 * (trial % 8), p = 1 + trial % 5, n = 1 + (int)(check_urand() * (trial % 4 ? 300 : 3000));
        kb_kvstream s;
        fill_stream(&s, n, D, trial % 3 == 0 ? KB_F32 : trial % 3 == 1 ? KB_F16 : KB_BF16);
        kb_pages pg;
        pages_init(&pg, p, D);
        pages_sync(&pg, &s, &kb_kernels_ref);
        int np = pages_count(&pg);
        float q[64], *out = malloc((size_t)(np + 1) * sizeof(float));
        for (int d = 0; d < D; d++) q[d] = nrand();
        out[np] = 12345.0f; /* not written past npages */
        kb_cpu_quest_scores(q, D, pg.kmax, pg.kmin, pg.dt, pg.cap, np, out);
        int ok = 1;
        for (int P = 0; P < np; P++) {
            float acc = 0;
            for (int d = 0; d < D; d++) {
                float a = q[d] * kb_elem_get(pg.kmax, pg.dt, (size_t)d * pg.cap + P);
                float c = q[d] * kb_elem_get(pg.kmin, pg.dt, (size_t)d * pg.cap + P);
                acc += a > c ? a : c;
            }
            ok &= same_bits(out[P], acc);
        }
        CHECK_MSG(ok && out[np] == 12345.0f, "exact: quest D=%d p=%d n=%d", D, p, n);
        free(out);
        pages_free(&pg);
        kvstream_free(&s);
    }
}
#endif

/* The boundary of a page top-k when exactly m pages score >= the threshold
 * and the lowest chosen score is tied across pages: the split page (the
 * last of the chosen in the order score desc, index asc) is the
 * highest-indexed page of that score. Worked by hand: pages of p = 2, 300
 * (150) pages score 5, 100 (50) score 3, the rest 1, interleaved; k = 2m - 1
 * takes every 5 and 3 page whole but the last page scoring 3, which gives
 * its first slot only. m = 400 > 256 pages (the scalar scan of key_take's
 * exact case), then 2048 pages with m = 200 (the sampled candidates: the
 * scan over candidate ids). Also against the reference. */
static void test_topk_pages_exact_ties(void) {
    static float ps[2048];
    static int32_t a[4096], b[4096];
    for (int c = 0; c < 2; c++) {
        int np = c ? 2048 : 600, n5 = c ? 150 : 300, n3 = c ? 50 : 100, p = 2, n = np * p;
        int last3 = -1;
        for (int P = 0; P < np; P++) { /* 5, 3, 1, 5, 3, 1, ... until the 3s run out, then 5s, then 1s */
            int r = P % 3;
            ps[P] = 1.0f;
            if (r == 1 && P / 3 < n3) {
                ps[P] = 3.0f;
                last3 = P;
            } else if (r == 0 && P / 3 < n5) ps[P] = 5.0f;
        }
        int fives = 0;
        for (int P = 0; P < np; P++) fives += ps[P] == 5.0f;
        for (int P = 0; fives < n5 && P < np; P++) /* the remaining 5s on the lowest pages scoring 1 */
            if (ps[P] == 1.0f) {
                ps[P] = 5.0f;
                fives++;
            }
        int m = n5 + n3, k = 2 * m - 1;
        int nc = kb_cpu_topk_pages(ps, n, p, k, b);
        /* expected: every slot of the 5 and 3 pages, but only the first of last3 */
        int c2 = 0;
        for (int P = 0; P < np; P++)
            if (ps[P] > 1.0f) {
                a[c2++] = 2 * P;
                if (P != last3) a[c2++] = 2 * P + 1;
            }
        CHECK_MSG(c2 == k && same_idx(a, c2, b, nc), "topk_pages exact ties np=%d: split page", np);
        int nr = kb_ref_topk_pages(ps, n, p, k, a);
        CHECK_MSG(same_idx(a, nr, b, nc), "topk_pages exact ties np=%d vs reference", np);
    }
}

/* The sampled top-k (n >= 1024, k <= n / 8) when the sample's threshold lets
 * through one candidate fewer than k: n = 1024 (a sample every 4th key),
 * k = 20, the sampled keys distinct and large and every other key far
 * below. The sample's threshold is its rank-q key, q = (2k + 32) / 4 = 18,
 * so q + 1 = 19 = k - 1 keys pass: too few, and the top k must come from
 * all n (the 20 largest sampled keys), against the definition. */
static void test_topk_sample_short(void) {
    static float x[1024];
    static int32_t a[1024], c[1024];
    for (int i = 0; i < 1024; i++) x[i] = i % 4 ? -1e30f : (float)((i * 37) % 1024);
    int nd = topk_def(x, 1024, 20, a), nc = kb_cpu_topk(x, 1024, 20, c);
    CHECK_MSG(nd == 20 && same_idx(a, nd, c, nc), "topk, sample one short: %d of 20", nc);
}

/* QUEST bounds on summaries whose row stride is not a multiple of 32 pages
 * (kb_cpu_quest_scores then runs its scalar loop): against the reference
 * (the same f32 formula: 1e-5, as test_pages) and the definition
 * sum_d max(q_d kmax_d, q_d kmin_d) in double (40 terms of |q k| < 10:
 * f32 rounding below 40 * 6e-8 * 400, 1e-3 absolute). */
static void test_quest_odd_stride(void) {
    enum { D = 40, NP = 21, LD = 23 };
    static float kmax[D * LD], kmin[D * LD];
    float q[D], b1[NP], b2[NP];
    for (int d = 0; d < D; d++) {
        q[d] = nrand();
        for (int P = 0; P < LD; P++) {
            float u = nrand(), v = nrand();
            kmax[d * LD + P] = u > v ? u : v;
            kmin[d * LD + P] = u > v ? v : u;
        }
    }
    kb_ref_quest_scores(q, D, kmax, kmin, KB_F32, LD, NP, b1);
    kb_cpu_quest_scores(q, D, kmax, kmin, KB_F32, LD, NP, b2);
    for (int P = 0; P < NP; P++) {
        double def = 0;
        for (int d = 0; d < D; d++) {
            double a = (double)q[d] * kmax[d * LD + P], b = (double)q[d] * kmin[d * LD + P];
            def += a > b ? a : b;
        }
        CHECK_CLOSE(b2[P], b1[P], 1e-5, 1e-5);
        CHECK_CLOSE(b2[P], def, 1e-3, 0);
    }
}

/* The sign of a chosen dim when the heads' sum on it is exactly 0 (the
 * reference: kmax only for a sum > 0), on the dims past the last whole
 * vector (D 38: dims 32..37 on the AVX-512 path, 36, 37 on the AVX2 one),
 * which are the r = 6 chosen (mean |q| 3 against < 1 elsewhere): page
 * scores and weights against the reference, tolerances as in
 * test_hybrid_scores. */
static void test_hybrid_sign_tie_tail(void) {
    int D = 38, G = 2, p = 2, n = 50, r = 6, np = 25;
    kb_kvstream s;
    fill_stream(&s, n, D, KB_F32);
    kb_pages pg;
    pages_init(&pg, p, D);
    pages_sync(&pg, &s, &kb_kernels_cpu);
    float q[2 * 38];
    for (int d = 0; d < D; d++) {
        q[d] = d < 32 ? 0.25f * (float)nrand() : 3.0f;
        q[D + d] = d < 32 ? 0.25f * (float)nrand() : -3.0f;
        if (d < 32 && fabsf(q[d]) + fabsf(q[D + d]) > 1.5f) q[d] = q[D + d] = 0.5f;
    }
    float a[25], b[25], wa[2 * 25], wb[2 * 25];
    int32_t da[38], db[38];
    kb_ref_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, a, wa, da);
    kb_cpu_hybrid_scores(q, G, D, r, pg.kmax, pg.kmin, pg.cap, &s, n, p, b, wb, db);
    CHECK_MSG(same_idx(da, r, db, r) && da[0] == 32 && da[5] == 37, "sign-tie dims");
    for (int P = 0; P < np; P++) CHECK_CLOSE(b[P], a[P], 1e-9, 2e-5);
    for (int i = 0; i < G * np; i++) CHECK_CLOSE(wb[i], wa[i], 1e-9, 2e-5);
    pages_free(&pg);
    kvstream_free(&s);
}

int main(void) {
    test_topk();
    test_topk_pages();
    test_topk_keys();
    test_topk_pages_exact_ties();
    test_topk_sample_short();
    test_quest_odd_stride();
    test_hybrid_sign_tie_tail();
    test_pool();
    test_pages();
    test_hybrid_scores();
    test_hybrid_scores_negative();
    test_hybrid_dims_ties();
    test_hybrid_zero_dims();
    test_hybrid_r_clamp();
    test_snapkv_scores_and_gather();
#ifdef HX_LANES
    test_hybrid_exact();
    test_quest_exact();
#endif
    CHECK(kernels_get() != NULL);
    CHECK(kb_kernels_ref.topk == kb_ref_topk && kb_kernels_cpu.topk == kb_cpu_topk);
    return check_summary("select");
}
