/* select.h - the selection building blocks behind kb_kernels (kernels.h):
 * SnapKV window scoring and pooling, page min/max summaries, QUEST page
 * bounds, hybrid (RocketKV stage 2 / SparQ) approximate scores, deterministic
 * top-k and gathered attention.
 *
 * Every block has a plain reference version (kernels/ref/select_ref.c: the
 * definition written out literally, double accumulation, full sorts) and a
 * fast one (kernels/cpu/select_cpu.c: same results up to float rounding;
 * selection by key bisection, page-level softmax). Signatures match the
 * kb_kernels fields of the same name; methods call them through
 * kernels_get() so KVBENCH_KERNELS=ref runs a whole method on references.
 *
 * Deterministic order (methods.md): higher score first, ties to the lower
 * index; NaN ranks as -inf. Every top-k returns its indices in ASCENDING
 * index order (chronological for slot indices), so outputs are canonical.
 *
 * Shapes: q rows are f32 [G][D] (the G query heads of one KV group); K/V are
 * read from a kb_kvstream (f32/f16/bf16); page summaries (kb_pages below) are
 * dim-major rows in the stream's dtype over npages = ceil(n / p). */
#ifndef KB_SELECT_H
#define KB_SELECT_H

#include <math.h>

#include "kernels/kernels.h"

/* ---- reference versions (kernels/ref/select_ref.c) ---- */
void kb_ref_attn_gather(const float *q, int G, const kb_kvstream *s, const int32_t *idx, int k,
                        float scale, float *out);
void kb_ref_snapkv_scores(const float *Q, int nq, int ldq, int G, const int32_t *qpos,
                          const kb_kvstream *s, int n, int n_prefix, float scale, float *out,
                          int ldo);
void kb_ref_pool1d(const float *in, int n, int K, int mode, float *out);
void kb_ref_page_minmax(const kb_kvstream *s, int from, int to, int p, void *kmax, void *kmin,
                        int ld);
void kb_ref_quest_scores(const float *q, int D, const void *kmax, const void *kmin, kb_dtype dt, int ld,
                         int npages,
                         float *out);
void kb_ref_hybrid_scores(const float *q, int G, int D, int r, const void *kmax,
                          const void *kmin, int ld, const kb_kvstream *s, int n, int p,
                          float *page_score, float *head_w, int32_t *dims);
int kb_ref_topk(const float *x, int n, int k, int32_t *idx);
int kb_ref_topk_pages(const float *page_score, int n, int p, int k, int32_t *idx);

/* ---- fast CPU versions (kernels/cpu/select_cpu.c) ---- */
void kb_cpu_attn_gather(const float *q, int G, const kb_kvstream *s, const int32_t *idx, int k,
                        float scale, float *out);
void kb_cpu_snapkv_scores(const float *Q, int nq, int ldq, int G, const int32_t *qpos,
                          const kb_kvstream *s, int n, int n_prefix, float scale, float *out,
                          int ldo);
void kb_cpu_pool1d(const float *in, int n, int K, int mode, float *out);
void kb_cpu_page_minmax(const kb_kvstream *s, int from, int to, int p, void *kmax, void *kmin,
                        int ld);
void kb_cpu_quest_scores(const float *q, int D, const void *kmax, const void *kmin, kb_dtype dt, int ld,
                         int npages,
                         float *out);
void kb_cpu_hybrid_scores(const float *q, int G, int D, int r, const void *kmax,
                          const void *kmin, int ld, const kb_kvstream *s, int n, int p,
                          float *page_score, float *head_w, int32_t *dims);
int kb_cpu_topk(const float *x, int n, int k, int32_t *idx);
int kb_cpu_topk_pages(const float *page_score, int n, int p, int k, int32_t *idx);

/* The deterministic order as a comparison: 1 if (xa, a) ranks before (xb, b). */
static inline int kb_rank_before(float xa, int a, float xb, int b) {
    if (isnan(xa)) xa = -INFINITY;
    if (isnan(xb)) xb = -INFINITY;
    return xa > xb || (xa == xb && a < b);
}

/* Per-dim temperature of SparQ / RocketKV (methods.md §4 step 6) for one
 * head: sqrt(D * sum_{i in dims} |q_i| / sum_all |q_i|). A head whose chosen
 * dims are all zero (or a zero query) gets 1: its approximate scores are all
 * 0, so any positive temperature gives the same (uniform) softmax. */
float kb_hybrid_temperature(const float *q, int D, const int32_t *dims, int r);

/* ---- page min/max summaries of one stream (kernels/pages.c) ----
 * Pages of p consecutive slots aligned at slot 0; the last page may be
 * partial and then summarizes only its real slots. Kept up to date
 * incrementally as slots are appended; a rollback recomputes only the last
 * (partial) page from the stream. With p == 1 a page's min and max are its
 * key: the summaries are one dim-major copy of K, held once (kmin == kmax). */
typedef struct kb_pages {
    int p;       /* page size in slots (>= 1) */
    int D;       /* head dim */
    int n;       /* slots summarized so far */
    int cap;     /* pages allocated (a multiple of 32) */
    kb_dtype dt; /* element type: the stream's (set at the first sync) */
    void *kmax;  /* [D][cap] per-dim max of K over the page's slots (dim-major) */
    void *kmin;  /* [D][cap] per-dim min (== kmax when p == 1) */
} kb_pages;

void pages_init(kb_pages *pg, int p, int D);
void pages_free(kb_pages *pg);
static inline int pages_count(const kb_pages *pg) { return (pg->n + pg->p - 1) / pg->p; }
/* Summarize the slots [pg->n, s->n) of s (appended since the last call). */
void pages_sync(kb_pages *pg, const kb_kvstream *s, const kb_kernels *kk);
/* Forget slots >= n (n <= pg->n, s already truncated or not): the page that
 * holds slot n-1 is recomputed from its first slot. */
void pages_truncate(kb_pages *pg, const kb_kvstream *s, int n, const kb_kernels *kk);
/* Forget everything (the stream was rebuilt); the next sync rebuilds. */
static inline void pages_reset(kb_pages *pg) { pg->n = 0; }
/* Bytes of the summaries in use (one copy when p == 1). */
static inline size_t pages_bytes(const kb_pages *pg) {
    return (pg->p == 1 ? 1 : 2) * (size_t)pages_count(pg) * (size_t)pg->D * kb_dtype_size(pg->dt);
}

#endif
