/* kernels.h - the numeric building blocks behind one interface.
 *
 * A backend is a table of function pointers (`cpu` now, `cuda` later) chosen
 * at run time by kernels_get(). Every entry has a plain C reference in
 * kb_kernels_ref (kernels/ref/), which the tests compare the fast backend
 * with. Entries a backend lacks may be NULL; callers then use the reference.
 *
 * Conventions: q/out rows are f32 [G][D] (the G query heads of one KV group,
 * contiguous); K/V come from a kb_kvstream (f16/f32/bf16); scale is usually
 * 1/sqrt(D). Softmax is computed in f32 with max subtraction. */
#ifndef KB_KERNELS_H
#define KB_KERNELS_H

#include "kernels/kb_base.h"
#include "kernels/kvstream.h"

typedef struct kb_kernels {
    const char *name;

    /* out[g] = softmax(q[g] . K[0..n)^T * scale) . V[0..n)  for g < G */
    void (*attn_dense)(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out);

    /* As attn_dense over the slots idx[0..k) only (idx entries < 0 are skipped). */
    void (*attn_gather)(const float *q, int G, const kb_kvstream *s, const int32_t *idx, int k,
                        float scale, float *out);

    /* Causal prefill of one KV group: nq queries Q [nq][ldq] (rows of G*D: the
     * G heads of the group contiguous), query i sees slots [0, n_prior + i].
     * out rows [nq][ldo] likewise. */
    void (*attn_causal)(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo);

    /* Scaled scores of H KV heads at once: out[(h*G + g)*ldo + j] = (q[h][g] . K_h[j]) * scale
     * for j < n, the dot product rounded to f32 and then multiplied by scale in f32.
     * q is [H][G][D]; s[0..H) each hold at least n rows. */
    void (*qk_scores)(const float *q, int H, int G, const kb_kvstream *s, int n, float scale, float *out,
                      int ldo);

    /* ---- selection building blocks (kernels/select.h; methods.md §2-§8) ---- */

    /* SnapKV window scores: out[g][j] (row stride ldo) for prefix slots
     * j < n_prefix = sum over the nq window rows i of softmax_j(Q[i][g] . K[j]
     * * scale), the softmax taken over the slots j < n with s->pos[j] <=
     * qpos[i] (masked slots weigh exactly 0). Q rows [nq][ldq], the G heads
     * of the group contiguous. */
    void (*snapkv_scores)(const float *Q, int nq, int ldq, int G, const int32_t *qpos,
                          const kb_kvstream *s, int n, int n_prefix, float scale, float *out,
                          int ldo);

    /* 1-D pooling, stride 1, kernel K (odd), same length: mode 0 = max with
     * -inf padding, mode 1 = average with zero padding divided by K
     * (PyTorch avg_pool1d's count_include_pad). */
    void (*pool1d)(const float *in, int n, int K, int mode, float *out);

    /* Page min/max of the slots [from, to) of s, pages of p slots from slot 0:
     * slot j updates page j / p, and a slot with j % p == 0 restarts its page.
     * kmax/kmin dim-major in the stream's dtype (a min or max of stored
     * values is one of them: exact): dim d of page P at [d * ld + P]
     * (ld >= npages), so an approximation that reads r dims reads r
     * contiguous rows. */
    void (*page_minmax)(const kb_kvstream *s, int from, int to, int p, void *kmax, void *kmin,
                        int ld);

    /* QUEST page bound of one query head: out[P] = sum_i max(q_i Kmax_P,i,
     * q_i Kmin_P,i) for P < npages (summaries of dtype dt, dim-major, as
     * page_minmax; ld a multiple of 32). */
    void (*quest_scores)(const float *q, int D, const void *kmax, const void *kmin, kb_dtype dt,
                         int ld, int npages, float *out);

    /* Hybrid approximate scores (methods.md §4 steps 2-7) of the G heads of
     * one group over n slots: top-r dims by mean |q|, group sign, page score,
     * broadcast, SparQ temperature, softmax over slots, mean over heads.
     * page_score[P] = the group score of each slot of page P (npages =
     * ceil(n/p)); head_w (optional, [G][npages]) = each head's softmax weight
     * of one slot of page P; dims (optional, [r]) = the chosen dims,
     * ascending. kmax/kmin as page_minmax wrote them for s (s's dtype,
     * stride ld, a multiple of 32; required for every p: with p == 1 they
     * are K itself, dim-major, pages of one slot). */
    void (*hybrid_scores)(const float *q, int G, int D, int r, const void *kmax,
                          const void *kmin, int ld, const kb_kvstream *s, int n, int p,
                          float *page_score, float *head_w, int32_t *dims);

    /* Top-k of x[0..n) in the deterministic order (higher first, ties to the
     * lower index); writes min(k, n) indices ascending; returns the count. */
    int (*topk)(const float *x, int n, int k, int32_t *idx);

    /* Token-level top-k over the slot scores x[j] = page_score[j / p], j < n
     * (whole pages win, one boundary page may be split: its lowest slots). */
    int (*topk_pages)(const float *page_score, int n, int p, int k, int32_t *idx);

    /* ---- optional (NULL: callers loop over the entries above) ---- */

    /* attn_dense of H streams at once (all their slots): out[h] =
     * attn_dense(q + h*G*D, G, &s[h], s[h].n), q/out [H][G][D]. One parallel
     * job for a whole layer instead of H small ones. */
    void (*attn_dense_heads)(const float *q, int H, int G, const kb_kvstream *s, float scale,
                             float *out);
} kb_kernels;

/* kk->attn_dense_heads, or the loop it stands for. */
static inline void kb_attn_dense_heads(const kb_kernels *kk, const float *q, int H, int G,
                                       const kb_kvstream *s, float scale, float *out) {
    if (kk->attn_dense_heads) {
        kk->attn_dense_heads(q, H, G, s, scale, out);
        return;
    }
    for (int h = 0; h < H; h++)
        kk->attn_dense(q + (size_t)h * G * s[h].D, G, &s[h], s[h].n, scale, out + (size_t)h * G * s[h].D);
}

extern const kb_kernels kb_kernels_ref;
extern const kb_kernels kb_kernels_cpu;

/* The active backend (cpu unless KVBENCH_KERNELS=ref). */
const kb_kernels *kernels_get(void);
/* Checks KVBENCH_KERNELS: unset, empty, "cpu" or "ref" give 0, anything else
 * KB_EINPUT with a message (kernels_get takes it as cpu; the kvbench binary
 * checks first, harness/main.c). */
int kernels_check_env(kb_err *err);

#endif
