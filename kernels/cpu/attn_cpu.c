/* attn_cpu.c - fast dense attention on the CPU.
 *
 * Decode (kb_cpu_attn_dense, _heads, gathered rows, qk_scores): memory-bound.
 * K and V are each read once, in blocks of 16 rows: a block's K rows are
 * converted to f32 once (F16C) and shared by the G query heads of the group,
 * each head's 16 scores reduced in registers as the rows come (block_dots;
 * block_scores on the AVX2 path).
 * Attention (attn16) takes a block's scores, its softmax (an online softmax:
 * a running max per head, the sum and accumulator rescaled when it rises),
 * then its V rows, so the K and V streams alternate every 16 rows. Rows a
 * few KiB ahead are prefetched in software (the hardware prefetcher alone
 * left the Xeon VMs' streams at half bandwidth). The rows are split into chunks
 * of DEC_CHUNK that the decode worker pool (kernels/pool.h) runs, over all
 * KV heads of a layer at once (attn_dense_heads), several consecutive chunks
 * per pool task with the prefetch running on across chunk ends (long streams
 * per thread); the chunks' partial softmax states are merged with the usual
 * log-sum-exp rescaling (flash-decoding). Scratch is thread-local: no
 * allocation per call once warm.
 *
 * Prefill (kb_cpu_attn_causal): compute-bound. Flash-attention style blocks:
 * a block of queries against blocks of keys through OpenBLAS sgemm, online
 * softmax, P.V through sgemm; query blocks in parallel with single-threaded
 * BLAS inside. */
#include <cblas.h>
#include <math.h>
#include <omp.h>
#include <stdlib.h>

#include "kernels/attn_impl.h"
#include "kernels/cpu/simd.h"
#include "kernels/matmul.h"
#include "kernels/pool.h"

/* ================================================================ decode */

/* DEC_CHUNK (slots per work chunk of the pool) and DEC_TASKS (pool tasks
 * per participant): kernels/attn_impl.h */
#define DEC_PAR_BYTES (64 << 10) /* K+V bytes below which one thread does a call */
#ifndef DEC_PF_BYTES
#define DEC_PF_BYTES 4096      /* software prefetch distance in each of the K and V streams */
#endif
#ifndef DEC_PF_BYTES_AMD
#define DEC_PF_BYTES_AMD 0     /* the same for dense rows (not gathered) on AMD: none */
#endif
#ifndef DEC_PF_HINT
#define DEC_PF_HINT _MM_HINT_T0
#endif
#ifndef DEC_PF_HINT_L2
#define DEC_PF_HINT_L2 _MM_HINT_T2 /* gathered rows on AMD: into L2 only (dec_pf_l2) */
#endif

#define ALWAYS_INLINE inline __attribute__((always_inline))

/* Whether the prefetches go into L2 only (DEC_PF_HINT_L2) instead of L1:
 * gathered rows (idx) on AMD. Scattered lines are limited by how many
 * misses a core keeps in flight, and a prefetch into L1 holds one of L1's
 * few miss buffers until its line arrives, while one into L2 queues in
 * L2's larger miss queue. On the Zen 4 VM RocketKV-sized gathers (128
 * random rows of 8K per head, 90 calls on two threads after a 96 MB read:
 * `GK=128 build/attn_pf`) took 0.16-0.30 ms into L2 (T2; T1 the same)
 * against 0.33-0.45 ms into L1 (T0), at 2, 4 and 8 KiB ahead (PERFORMANCE-LOG.md,
 * "Gathered rows into L2"). On a Xeon with AMX (2026-12-04, the same
 * `GK=128` runs, three alternated pairs) L1 took 0.21-0.26 ms and L2
 * 0.22-0.26, so the Xeons keep DEC_PF_HINT. */
static ALWAYS_INLINE int dec_pf_l2(const int32_t *idx) { return idx && simd_cpu_amd(); }

/* Every cache line of row `row` of K (and of V when not NULL): into L2
 * only when l2 (dec_pf_l2), else by DEC_PF_HINT. Both paths below. */
static ALWAYS_INLINE void prefetch_row(const char *K, const char *V, size_t row, size_t rb, int l2) {
    if (l2) {
        for (size_t o = 0; o < rb; o += 64) {
            _mm_prefetch(K + row * rb + o, DEC_PF_HINT_L2);
            if (V) _mm_prefetch(V + row * rb + o, DEC_PF_HINT_L2);
        }
        return;
    }
    for (size_t o = 0; o < rb; o += 64) {
        _mm_prefetch(K + row * rb + o, DEC_PF_HINT);
        if (V) _mm_prefetch(V + row * rb + o, DEC_PF_HINT);
    }
}

/* Growable thread-local scratch (no malloc per call). */
static void *tls_grow(void **buf, size_t *cap, size_t need) {
    if (need > *cap) {
        kb_afree(*buf);
        *cap = need + need / 2;
        *buf = KB_AMALLOC(*cap);
    }
    return *buf;
}

/* Online-softmax state of G heads over a set of rows: running max m[g],
 * sum l[g] of exp(score - m), unnormalised acc[g][D]. */
typedef struct dec_part {
    float *m, *l, *acc;
} dec_part;

#if defined(__AVX512F__)
/* 16 elements of a K/V row at p as f32. */
static ALWAYS_INLINE __m512 ld16(const kb_dtype dt, const void *p) {
    if (dt == KB_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)p));
    if (dt == KB_BF16)
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)p)), 16));
    return _mm512_loadu_ps(p);
}

#define KB_ATTN_BLOCKED 1
#define DEC_DENSE_F16 0 /* ROWS_SPEC: one copy for dense and gathered rows */
#define DMAX_V 16 /* fast path: D <= 256 */
#define GMAX_V 8  /* fast path: G <= 8 */

/* Rows to prefetch ahead in each stream (0: none) for attention (att) or
 * qk_scores. Gathered rows (idx) are scattered and need it everywhere.
 * Dense attention on AMD gets none: on the Zen 4 VM the hardware prefetcher
 * alone streamed SmolLM2's 8K attention (188.6 MB, two threads) in
 * 0.88-0.90x the time of 4 KiB ahead, while qk_scores (K only) ran
 * 1.07-1.15x slower without (medians of 21 alternated rounds,
 * scripts/microbench/attn_pf.c; PERFORMANCE-LOG.md, "The decode attention on
 * Zen 4"); on the Xeons no prefetch left the streams at half bandwidth.
 * Prefetches only: the same bits on every machine. */
static ALWAYS_INLINE int dec_pf_rows(size_t rb, const int32_t *idx, int att) {
    size_t b = att && !idx && simd_cpu_amd() ? (size_t)DEC_PF_BYTES_AMD : (size_t)DEC_PF_BYTES;
    return (int)((b + rb - 1) / rb);
}

/* The 16 scores of a block of 16 rows for each of the G heads, out[g] lane
 * r = the dot product of q_g and row r, reduced in registers as the rows
 * come: a row's K converted to f32 once (DV vectors) and shared by the G
 * heads; head g's 16-lane partial dot (lane l = sum over t of q[16t + l] *
 * k[16t + l], FMAs in t order) enters a reduction tree at once: rows 2i and
 * 2i+1 paired by unpack + add, pairs of pairs by shuffle + add, and so on,
 * the very adds of simd_hsum16x16 over the block's 16 vectors (the same
 * bits), without the 16 x G vectors and their transposition ever going
 * through memory (the older kernel stored each row's partial dots and
 * reduced them from the stack: ~9 512-bit stores a row, which Zen 4 issues
 * at one per two cycles). Rows r >= nr repeat row nr - 1 (their lanes are
 * not kept). Rows pf ahead of row r are prefetched (K, and V when V is not
 * NULL) while row r < nr is converted. Fully unrolled for compile-time G
 * and DV: the tree's 4 pending vectors per head, the row's DV and a few
 * temporaries stay in the 32 zmm registers. With run-time G and DV (FX 0,
 * rows_any) the same values through memory: each row's partial dots stored,
 * simd_hsum16x16 per head, loops not unrolled (unrolling them for run-time
 * bounds made this file take minutes to compile). */
static ALWAYS_INLINE void block_dots(const int FX, const int G, const int DV, const kb_dtype dt,
                                     const float *qs, const char *K, const char *V, size_t rb,
                                     const int32_t *idx, int j, int nr, int pf, int lim, __m512 *out) {
    const size_t esz = dt == KB_F32 ? 4 : 2;
    const int l2 = dec_pf_l2(idx);
    if (!FX) {
        float d[GMAX_V][16][16] __attribute__((aligned(64)));
        for (int r = 0; r < 16; r++) {
            int jp = j + r + pf;
            if (pf && r < nr && jp < lim) prefetch_row(K, V, (size_t)(idx ? idx[jp] : jp), rb, l2);
            int rr = r < nr ? r : nr - 1;
            const char *krow = K + (size_t)(idx ? idx[j + rr] : j + rr) * rb;
            for (int g = 0; g < G; g++) {
                const float *qg = qs + (size_t)g * DV * 16;
                __m512 a = _mm512_mul_ps(_mm512_loadu_ps(qg), ld16(dt, krow));
                for (int t = 1; t < DV; t++) a = _mm512_fmadd_ps(_mm512_loadu_ps(qg + 16 * t), ld16(dt, krow + t * 16 * esz), a);
                _mm512_store_ps(d[g][r], a);
            }
        }
        for (int g = 0; g < G; g++) {
            __m512 v[16];
            for (int u = 0; u < 16; u++) v[u] = _mm512_load_ps(d[g][u]);
            out[g] = simd_hsum16x16(v);
        }
        return;
    }
    __m512 t1[GMAX_V], t2[GMAX_V], t3[GMAX_V], t4[GMAX_V];
#pragma GCC unroll 16
    for (int r = 0; r < 16; r++) {
        if (r < nr) {
            int jp = j + r + pf;
            if (pf && jp < lim) prefetch_row(K, V, (size_t)(idx ? idx[jp] : jp), rb, l2);
        }
        int rr = r < nr ? r : nr - 1;
        const char *krow = K + (size_t)(idx ? idx[j + rr] : j + rr) * rb;
        __m512 k[DMAX_V];
#pragma GCC unroll 16
        for (int t = 0; t < DV; t++) k[t] = ld16(dt, krow + t * 16 * esz);
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            const float *qg = qs + (size_t)g * DV * 16;
            __m512 a = _mm512_mul_ps(_mm512_loadu_ps(qg), k[0]);
#pragma GCC unroll 16
            for (int t = 1; t < DV; t++) a = _mm512_fmadd_ps(_mm512_loadu_ps(qg + 16 * t), k[t], a);
            if (!(r & 1)) { t1[g] = a; continue; }
            __m512 x = _mm512_add_ps(_mm512_unpacklo_ps(t1[g], a), _mm512_unpackhi_ps(t1[g], a));
            if (!(r & 2)) { t2[g] = x; continue; }
            __m512 y = _mm512_add_ps(_mm512_shuffle_ps(t2[g], x, _MM_SHUFFLE(1, 0, 1, 0)),
                                     _mm512_shuffle_ps(t2[g], x, _MM_SHUFFLE(3, 2, 3, 2)));
            if (!(r & 4)) { t3[g] = y; continue; }
            __m512 z = _mm512_add_ps(_mm512_shuffle_f32x4(t3[g], y, _MM_SHUFFLE(2, 0, 2, 0)),
                                     _mm512_shuffle_f32x4(t3[g], y, _MM_SHUFFLE(3, 1, 3, 1)));
            if (!(r & 8)) { t4[g] = z; continue; }
            out[g] = _mm512_add_ps(_mm512_shuffle_f32x4(t4[g], z, _MM_SHUFFLE(2, 0, 2, 0)),
                                   _mm512_shuffle_f32x4(t4[g], z, _MM_SHUFFLE(3, 1, 3, 1)));
        }
    }
}

/* Scores of one chunk (qk_scores): rows r(j) for j in [j0, j1), j1 - j0 <=
 * DEC_CHUNK (r(j) = idx ? idx[j] : j), the G heads qs [G][D], to
 * sc_out[g*ldo + j], a block of 16 rows at a time (block_dots). Rows pf
 * ahead are prefetched. G, DV (= D/16) and dt are compile-time constants
 * in the specialised copies below. */
static ALWAYS_INLINE void scores16(const int FX, const int G, const int DV, const kb_dtype dt, const float *qs,
                                   const kb_kvstream *s, const int32_t *idx, int j0, int j1,
                                   float *sc_out, int ldo) {
    const size_t esz = dt == KB_F32 ? 4 : 2, rb = (size_t)DV * 16 * esz;
    const char *K = s->K;
    const int pf = dec_pf_rows(rb, idx, 0); /* rows ahead */
    /* dense rows prefetch past the chunk (the next chunk, usually this
     * thread's: dec_span) so a chunk does not start with pf cold rows */
    const int lim = idx ? j1 : s->n, l2 = dec_pf_l2(idx);
    for (int jj = j0; jj < KB_MIN(j0 + pf, lim); jj++) prefetch_row(K, NULL, (size_t)(idx ? idx[jj] : jj), rb, l2);
    for (int j = j0; j < j1; j += 16) {
        const int nr = KB_MIN(16, j1 - j);
        __m512 sc[GMAX_V];
        block_dots(FX, G, DV, dt, qs, K, NULL, rb, idx, j, nr, pf, lim, sc);
#pragma GCC unroll 8
        for (int g = 0; g < G; g++)
            _mm512_mask_storeu_ps(sc_out + (size_t)g * ldo + j, (__mmask16)((1u << nr) - 1), sc[g]);
    }
}

/* Attention over one chunk (rows as in scores16) into part, a block of 16
 * rows at a time: the block's scores (block_dots, which also prefetches
 * both streams), its softmax (the block's max over the valid rows; if it
 * exceeds the running max m of a head, that head's sum l and accumulator
 * acc are rescaled by exp(m - max) first; the weights exp(x - m) are added
 * to l as a 16-lane sum), then its V rows accumulated as acc += w * v by
 * FMAs in row order. The K and V streams alternate every 2 KiB (SmolLM2's
 * rows), both prefetched ahead (dec_pf_rows), so memory sees them at an
 * even rate (reading K for a whole chunk of 256 rows and then V measured
 * 15-20% slower at 8K). */
static ALWAYS_INLINE void attn16(const int FX, const int G, const int DV, const kb_dtype dt, const float *qs,
                                 const kb_kvstream *s, const int32_t *idx, int j0, int j1,
                                 dec_part *part) {
    const size_t esz = dt == KB_F32 ? 4 : 2, rb = (size_t)DV * 16 * esz;
    const char *K = s->K, *V = s->V;
    const int pf = dec_pf_rows(rb, idx, 1);
    const int lim = idx ? j1 : s->n;
    float pb[GMAX_V][16] __attribute__((aligned(64)));
    float mrun[GMAX_V];
    /* the accumulators acc, in memory: each block's V rows are accumulated
     * in strips of S vectors per head held in registers across the block's
     * 16 rows (one strip for SmolLM2's 3 x 4; keeping all of acc in
     * registers instead measured no faster there, 27.1-27.6 TSC cycles per
     * row with the strip against 28.7-28.8) */
    const int S = KB_MAX(1, 16 / G);
    float am[GMAX_V][DMAX_V * 16] __attribute__((aligned(64)));
    __m512 lsum[GMAX_V];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        mrun[g] = -INFINITY;
        lsum[g] = _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int t = 0; t < DV; t++) _mm512_store_ps(am[g] + 16 * t, _mm512_setzero_ps());
    }
    const int l2 = dec_pf_l2(idx);
    for (int jj = j0; jj < KB_MIN(j0 + pf, lim); jj++) prefetch_row(K, V, (size_t)(idx ? idx[jj] : jj), rb, l2);
    for (int j = j0; j < j1; j += 16) {
        const int nr = KB_MIN(16, j1 - j);
        __m512 sc[GMAX_V];
        block_dots(FX, G, DV, dt, qs, K, V, rb, idx, j, nr, pf, lim, sc);
        const __mmask16 valid = (__mmask16)((1u << nr) - 1);
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            __m512 x = _mm512_mask_mov_ps(_mm512_set1_ps(-INFINITY), valid, sc[g]);
            float bm = _mm512_reduce_max_ps(x);
            if (bm > mrun[g]) {
                float c = mrun[g] == -INFINITY ? 0.0f : simd_exp1(mrun[g] - bm);
                __m512 cv = _mm512_set1_ps(c);
                lsum[g] = _mm512_mul_ps(lsum[g], cv);
#pragma GCC unroll 16
                for (int t = 0; t < DV; t++)
                    _mm512_store_ps(am[g] + 16 * t, _mm512_mul_ps(_mm512_load_ps(am[g] + 16 * t), cv));
                mrun[g] = bm;
            }
            __m512 p = simd_exp512(_mm512_sub_ps(x, _mm512_set1_ps(mrun[g])));
            lsum[g] = _mm512_add_ps(lsum[g], p);
            _mm512_store_ps(pb[g], p);
        }
        if (!FX) { /* run-time G and DV: acc in am, loops not unrolled */
            for (int r = 0; r < nr; r++) {
                const char *vrow = V + (size_t)(idx ? idx[j + r] : j + r) * rb;
                for (int g = 0; g < G; g++) {
                    __m512 w = _mm512_set1_ps(pb[g][r]);
                    for (int t = 0; t < DV; t++)
                        _mm512_store_ps(am[g] + 16 * t, _mm512_fmadd_ps(w, ld16(dt, vrow + t * 16 * esz), _mm512_load_ps(am[g] + 16 * t)));
                }
            }
            continue;
        }
#pragma GCC unroll 16
        for (int t0 = 0; t0 < DV; t0 += S) {
            const int ns = KB_MIN(S, DV - t0);
            __m512 a[GMAX_V][16];
#pragma GCC unroll 8
            for (int g = 0; g < G; g++)
#pragma GCC unroll 16
                for (int u = 0; u < ns; u++) a[g][u] = _mm512_load_ps(am[g] + 16 * (t0 + u));
#pragma GCC unroll 16
            for (int r = 0; r < 16; r++) {
                if (r >= nr) break;
                const char *vrow = V + (size_t)(idx ? idx[j + r] : j + r) * rb + (size_t)t0 * 16 * esz;
                __m512 v[16];
#pragma GCC unroll 16
                for (int u = 0; u < ns; u++) v[u] = ld16(dt, vrow + u * 16 * esz);
#pragma GCC unroll 8
                for (int g = 0; g < G; g++) {
                    __m512 w = _mm512_set1_ps(pb[g][r]);
#pragma GCC unroll 16
                    for (int u = 0; u < ns; u++) a[g][u] = _mm512_fmadd_ps(w, v[u], a[g][u]);
                }
            }
#pragma GCC unroll 8
            for (int g = 0; g < G; g++)
#pragma GCC unroll 16
                for (int u = 0; u < ns; u++) _mm512_store_ps(am[g] + 16 * (t0 + u), a[g][u]);
        }
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        part->m[g] = mrun[g];
        part->l[g] = _mm512_reduce_add_ps(lsum[g]);
#pragma GCC unroll 16
        for (int t = 0; t < DV; t++)
            _mm512_storeu_ps(part->acc + (size_t)g * DV * 16 + 16 * t, _mm512_load_ps(am[g] + 16 * t));
    }
}

#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
/* AVX2+FMA+F16C path (no AVX-512): the structure of the AVX-512 one (blocks
 * of 16 rows, a row's K converted once and shared by the G heads, software
 * prefetch, compile-time G and D copies) with 16 ymm registers, computing
 * what rows_plain computes (tests/unit/test_attn_avx2.c checks it):
 * - scores bit for bit: simd_dot's two 8-lane accumulators (FMAs in d
 *   order), their sum and simd_dot's reduction tree, the same for every row
 *   in every position of a block (ties stay ties for the top-k rules), so
 *   qk_scores and the selections built on it are what the row-at-a-time
 *   path gave;
 * - rows_plain's softmax to rounding: the same running max at the end of
 *   every chunk (the max of the same scores, bit for bit), l and acc within
 *   a few ulp of l. The online softmax goes a block at a time, like the
 *   AVX-512 kernel's: the block's max M first; if it exceeds the max so far
 *   m, l and acc are rescaled once by exp(m - M) (simd_exp1); the 16 weights
 *   exp(x - M) (simd_exp256) are summed into l as one 8-lane sum and a tree,
 *   and accumulated as acc += w * v by FMAs in row order. rows_plain instead
 *   rescales at each row whose score is a new max and adds the weights one
 *   by one (and its simd_exp1 differs from simd_exp256 in the last bits
 *   under -std=c11, no FMA contraction). The row-by-row form cost a scalar
 *   rescan of the block, per-row rescale tests in the V loop and a serial
 *   chain of 16 adds per head and block: one thread, one KV head of 1024
 *   f16 rows from L2 (D 64, G 3), the block form with the narrower V strips
 *   below ran in 0.83-0.88 of the time (medians of 30 alternated rounds, 3
 *   runs), Llama's G 4, D 128 (512 rows) in 0.82-0.84.
 * A block: its scores, its max and weights, then its V rows accumulated in
 * column strips of acc held in registers across the rows.
 * The software prefetch (DEC_PF_ROWS2 rows ahead in each stream; 4 KiB
 * before, see below) is spread over the K row loop, the K and the V row
 * ahead of each row scored (dec_pf; not in the V strips' loop, which then
 * carries no test), instead of a whole block's K and V lines in a burst at
 * the block's start: on the
 * loaded 2-core Zen 3 VM, single thread, 8 layers of 3 x 8192 f16 rows
 * (D 64, G 3, 50 MB: from memory), CPU time per layer 1.15 -> 0.97 ms
 * median of 6 alternated runs (best of 20 each); 8 and 16 KiB of distance
 * measured no better than 4 KiB.
 * The distance is DEC_PF_ROWS2 = 12 rows in each stream (1.5 KiB for
 * SmolLM2's f16 rows of 128 B, 3 KiB for Llama's of 256 B), not 4 KiB: on
 * SmolLM2's 8K dense attention (188 MB, both threads) 8.2-8.6 ms against
 * 9.9-10.3 for 4 KiB (32 rows); Llama's D 128 and the gathered rows the same
 * within noise (scripts/microbench/attn_pf.c; every distance tried is in
 * docs/PERFORMANCE-LOG.md, "The AVX2 attention's prefetch distance"). */
#ifndef DEC_PF_ROWS2
#define DEC_PF_ROWS2 12
#endif
/* Gathered rows on AMD, prefetched into L2 (dec_pf_l2): 32 rows ahead.
 * On the Zen 4 VM with this path built (-mno-avx512f), RocketKV-sized
 * gathers (`GK=128 build/attn_pf`) took 0.25 ms at 32 rows into L2 against
 * 0.34-0.42 ms into L1 (12 or 32 rows), while 12 rows into L2 measured no
 * better than into L1 (PERFORMANCE-LOG.md, "Gathered rows into L2"). */
#ifndef DEC_PF_ROWS2_L2
#define DEC_PF_ROWS2_L2 32
#endif
#define KB_ATTN_BLOCKED 1
#define DEC_DENSE_F16 1 /* ROWS_SPEC: f16 dense rows in their own copy (blk_row) */

/* 8 elements of a K/V row at p as f32. */
static ALWAYS_INLINE __m256 ld8(const kb_dtype dt, const void *p) {
    if (dt == KB_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)p));
    if (dt == KB_BF16)
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)p)), 16));
    return _mm256_loadu_ps(p);
}

#define DMAX_V 16 /* fast path: D <= 256 (DV = D / 16 chunks of 16) */
#define GMAX_V 8  /* fast path: G <= 8 */

/* v[r] (r < 8), each a row's acc0 + acc1 of simd_dot -> lane r holds
 * ((s0 + s4) + (s2 + s6)) + ((s1 + s5) + (s3 + s7)) of v[r]: simd_dot's
 * reduction (halves, then movehl, then movehdup), the same tree in every
 * lane. */
static ALWAYS_INLINE __m256 hsum8x8(const __m256 *v) {
    /* (named temporaries, not arrays: GCC 12 kept arrays a[4], b[2] on the
     * stack and ran their loops, ~15 instructions a row on top) */
#define H8_LO_HI(i) _mm256_add_ps(_mm256_permute2f128_ps(v[i], v[i + 4], 0x20), _mm256_permute2f128_ps(v[i], v[i + 4], 0x31))
    /* lo: row i, hi: row i + 4; lane k: s[k] + s[k + 4] */
    const __m256 a0 = H8_LO_HI(0), a1 = H8_LO_HI(1), a2 = H8_LO_HI(2), a3 = H8_LO_HI(3);
#undef H8_LO_HI
    /* rows 2i, 2i+1 (+4): (a0 + a2), (a1 + a3) */
    const __m256 b0 = _mm256_add_ps(_mm256_shuffle_ps(a0, a1, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm256_shuffle_ps(a0, a1, _MM_SHUFFLE(3, 2, 3, 2)));
    const __m256 b1 = _mm256_add_ps(_mm256_shuffle_ps(a2, a3, _MM_SHUFFLE(1, 0, 1, 0)),
                                    _mm256_shuffle_ps(a2, a3, _MM_SHUFFLE(3, 2, 3, 2)));
    return _mm256_add_ps(_mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm256_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 1, 3, 1)));
}

/* Row krow as f32 (two vectors at a time) and each head's simd_dot
 * accumulators with it: acc0 over elements 16t..16t+7, acc1 over
 * 16t+8..16t+15, FMAs from zero in t order; acc0 + acc1 to dst[g][r].
 * Heads go four at a time (8 accumulators + 2 K vectors in registers). */
static ALWAYS_INLINE void row_dots(const int G, const int DV, const kb_dtype dt, const float *qs, const char *krow,
                                   float (*dst)[16][8], int r) {
    const size_t esz = dt == KB_F32 ? 4 : 2;
    const int D = 16 * DV;
#pragma GCC unroll 2
    for (int g0 = 0; g0 < G; g0 += 4) {
        const int gn = KB_MIN(4, G - g0);
        __m256 a0[4] = {0}, a1[4] = {0}; /* (initialised: run-time G quiets -Wmaybe-uninitialized) */
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++) a0[g] = a1[g] = _mm256_setzero_ps();
#pragma GCC unroll 16
        for (int t = 0; t < DV; t++) {
            __m256 k0 = ld8(dt, krow + (size_t)16 * t * esz), k1 = ld8(dt, krow + (size_t)(16 * t + 8) * esz);
#pragma GCC unroll 4
            for (int g = 0; g < gn; g++) {
                const float *qg = qs + (size_t)(g0 + g) * D + 16 * t;
                a0[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qg), k0, a0[g]);
                a1[g] = _mm256_fmadd_ps(_mm256_loadu_ps(qg + 8), k1, a1[g]);
            }
        }
#pragma GCC unroll 4
        for (int g = 0; g < gn; g++) _mm256_store_ps(dst[g0 + g][r], _mm256_add_ps(a0[g], a1[g]));
    }
}

/* Software prefetch, spread over the K row loop that reads a block: at the
 * r-th row, row j + r of K and of V (through idx) when below lim (a burst of
 * a whole block's prefetches at the block's start measured slower on Zen 3:
 * the misses queue behind each other). V's rows are prefetched with K's, so
 * that the V loop's strips (block_vacc) carry no prefetch and no test. */
typedef struct dec_pf {
    const char *K, *V; /* V NULL: K only (qk_scores) */
    const int32_t *idx;
    int j, lim;
    size_t rb;
    int l2; /* dec_pf_l2 */
} dec_pf;

static ALWAYS_INLINE void pf_row(const dec_pf *p, int r) {
    int jp = p->j + r;
    if (jp < p->lim) prefetch_row(p->K, p->V, (size_t)(p->idx ? p->idx[jp] : jp), p->rb, p->l2);
}

/* Row r of a block: rows[r] for gathered rows, base + r * rb for dense ones
 * (rows NULL). ROWS_SPEC instantiates the kernels for f16 dense rows with
 * idx NULL, so rows is a compile-time NULL there and the code addresses its
 * rows directly: no pointer array written and read back (~11 instructions a
 * row, and a load before each strip's V row in block_vacc). */
static ALWAYS_INLINE const char *blk_row(const char *base, const char *const *rows, int r, size_t rb) {
    return rows ? rows[r] : base + (size_t)r * rb;
}

/* The block of rows r < nr (nr <= 16; blk_row of kb, krows, rb): each
 * head's 16 scores to x[g][0..16) (lanes past nr repeat the last row). */
static ALWAYS_INLINE void block_scores(const int G, const int DV, const kb_dtype dt, const float *qs,
                                       const char *kb, const char *const *krows, size_t rb, int nr,
                                       float (*x)[16], const dec_pf *pf) {
    float dbuf[GMAX_V][16][8] __attribute__((aligned(32)));
    if (G < 1 || G > GMAX_V || DV < 1 || DV > DMAX_V) __builtin_unreachable(); /* rows_run's condition */
    if (nr == 16 && !krows) /* (the usual dense block, in a copy without the clamps) */
        for (int r = 0; r < 16; r++) {
            pf_row(pf, r);
            row_dots(G, DV, dt, qs, blk_row(kb, krows, r, rb), dbuf, r);
        }
    else
        for (int r = 0; r < 16; r++) {
            if (r < nr) pf_row(pf, r);
            row_dots(G, DV, dt, qs, blk_row(kb, krows, r < nr ? r : nr - 1, rb), dbuf, r);
        }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        __m256 d[8];
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) d[u] = _mm256_load_ps(dbuf[g][u]);
        _mm256_store_ps(x[g], hsum8x8(d));
#pragma GCC unroll 8
        for (int u = 0; u < 8; u++) d[u] = _mm256_load_ps(dbuf[g][8 + u]);
        _mm256_store_ps(x[g] + 8, hsum8x8(d));
    }
}

/* Row pointers of the gathered block at j (idx). Its callers prefetch the
 * rows pf ahead through dec_pf (dense rows past the chunk too, up to the
 * stream's end: the next chunk is usually this thread's, dec_span). */
static ALWAYS_INLINE void block_rows(const char *K, const char *V, size_t rb, const int32_t *idx, int j, int nr,
                                     const char **krows, const char **vrows) {
    for (int r = 0; r < nr; r++) {
        size_t row = (size_t)idx[j + r];
        krows[r] = K + row * rb;
        if (vrows) vrows[r] = V + row * rb;
    }
}

/* Scores of one chunk (qk_scores): rows r(j), j in [j0, j1), to
 * sc_out[g*ldo + j], rows_plain's values. */
static ALWAYS_INLINE void scores16(const int FX, const int G, const int DV, const kb_dtype dt, const float *qs,
                                   const kb_kvstream *s, const int32_t *idx, int j0, int j1,
                                   float *sc_out, int ldo) {
    (void)FX;
    const size_t esz = dt == KB_F32 ? 4 : 2, rb = (size_t)DV * 16 * esz;
    const char *K = s->K;
    const int l2 = dec_pf_l2(idx), pf = l2 ? DEC_PF_ROWS2_L2 : DEC_PF_ROWS2;
    const int lim = idx ? j1 : s->n;
    for (int jj = j0; jj < KB_MIN(j0 + pf, lim); jj++) prefetch_row(K, NULL, (size_t)(idx ? idx[jj] : jj), rb, l2);
    for (int j = j0; j < j1; j += 16) {
        const char *kr[16], *const *krows = NULL;
        float x[GMAX_V][16] __attribute__((aligned(32)));
        int nr = KB_MIN(16, j1 - j);
        if (idx) {
            block_rows(K, NULL, rb, idx, j, nr, kr, NULL);
            krows = kr;
        }
        const dec_pf pk = {K, NULL, idx, j + pf, lim, rb, l2};
        block_scores(G, DV, dt, qs, K + (size_t)j * rb, krows, rb, nr, x, &pk);
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            float *o = sc_out + (size_t)g * ldo + j;
            if (nr == 16) {
                _mm256_storeu_ps(o, _mm256_load_ps(x[g]));
                _mm256_storeu_ps(o + 8, _mm256_load_ps(x[g] + 8));
            } else
                for (int r = 0; r < nr; r++) o[r] = x[g][r];
        }
    }
}

/* acc[g][c*8 .. (c+CW)*8) = acc * cr[g] (only when RESC: some head's max
 * rose in the block; cr[g] = 1 for the others, an exact product) + the
 * block's rows r < nr (blk_row of vb, vrows, rb), acc += w * v by FMA in
 * row order. */
static ALWAYS_INLINE void block_vacc(const int G, const int DV, const kb_dtype dt, const int CW, const int RESC,
                                     const char *vb, const char *const *vrows, size_t rb, int nr,
                                     const float (*w)[16], const float *cr, float *acc) {
    const size_t esz = dt == KB_F32 ? 4 : 2;
    const int D = 16 * DV;
    for (int c = 0; c < 2 * DV; c += CW) {
        __m256 a[GMAX_V][8] = {{{0}}};
#pragma GCC unroll 8
        for (int g = 0; g < G; g++)
#pragma GCC unroll 8
            for (int u = 0; u < CW; u++) {
                a[g][u] = _mm256_loadu_ps(acc + (size_t)g * D + 8 * (c + u));
                if (RESC) a[g][u] = _mm256_mul_ps(a[g][u], _mm256_set1_ps(cr[g]));
            }
        /* (unrolled by 4: ~5% in the harness' best rounds above, its
         * medians within noise) */
#pragma GCC unroll 4
        for (int r = 0; r < nr; r++) {
            const char *vrow = blk_row(vb, vrows, r, rb);
            if (G <= 3) {
                /* one V vector at a time against the G weights: G * CW
                 * accumulators + G weights + 1 in the 16 registers */
                __m256 wb[GMAX_V] = {0};
#pragma GCC unroll 8
                for (int g = 0; g < G; g++) wb[g] = _mm256_broadcast_ss(&w[g][r]);
#pragma GCC unroll 8
                for (int u = 0; u < CW; u++) {
                    __m256 v = ld8(dt, vrow + (size_t)8 * (c + u) * esz);
#pragma GCC unroll 8
                    for (int g = 0; g < G; g++) a[g][u] = _mm256_fmadd_ps(wb[g], v, a[g][u]);
                }
            } else {
                /* the strip's CW V vectors, then head by head (measured
                 * faster for G = 4, D = 128 than the order above) */
                __m256 v[8] = {0};
#pragma GCC unroll 8
                for (int u = 0; u < CW; u++) v[u] = ld8(dt, vrow + (size_t)8 * (c + u) * esz);
#pragma GCC unroll 8
                for (int g = 0; g < G; g++) {
                    __m256 wb = _mm256_broadcast_ss(&w[g][r]);
#pragma GCC unroll 8
                    for (int u = 0; u < CW; u++) a[g][u] = _mm256_fmadd_ps(wb, v[u], a[g][u]);
                }
            }
        }
#pragma GCC unroll 8
        for (int g = 0; g < G; g++)
#pragma GCC unroll 8
            for (int u = 0; u < CW; u++) _mm256_storeu_ps(acc + (size_t)g * D + 8 * (c + u), a[g][u]);
    }
}

/* Attention over one chunk into part (which holds the state so far:
 * m = -inf, l = 0, acc = 0 from dec_chunk), block by block: the block's K
 * rows scored, the block's softmax step, its V rows accumulated. */
static ALWAYS_INLINE void attn16(const int FX, const int G, const int DV, const kb_dtype dt, const float *qs,
                                 const kb_kvstream *s, const int32_t *idx, int j0, int j1,
                                 dec_part *part) {
    (void)FX;
    const size_t esz = dt == KB_F32 ? 4 : 2, rb = (size_t)DV * 16 * esz;
    const char *K = s->K, *V = s->V;
    const int l2 = dec_pf_l2(idx), pf = l2 ? DEC_PF_ROWS2_L2 : DEC_PF_ROWS2;
    const int lim = idx ? j1 : s->n;
    /* acc strips of CW vectors: G * CW accumulators + G weights + 1 V vector
     * in the 16 registers; CW divides the row's 2 DV vectors. G = 3 takes 2,
     * not the 4 that would fill all 16: GCC then spilled three
     * accumulators, whose store-reload chain set the V loop's pace */
    if (G < 1 || G > GMAX_V || DV < 1 || DV > DMAX_V) __builtin_unreachable();
    const int CW = G == 1 ? (DV % 4 ? (DV % 2 ? 2 : 4) : 8) : G <= 2 ? (DV % 2 ? 2 : 4) : G <= 4 ? 2 : 1;
    float mrun[GMAX_V] = {0}, lsum[GMAX_V] = {0};
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        mrun[g] = part->m[g];
        lsum[g] = part->l[g];
    }
    for (int jj = j0; jj < KB_MIN(j0 + pf, lim); jj++) prefetch_row(K, V, (size_t)(idx ? idx[jj] : jj), rb, l2);
    for (int j = j0; j < j1; j += 16) {
        const char *kr[16], *vr[16], *const *krows = NULL, *const *vrows = NULL;
        float x[GMAX_V][16] __attribute__((aligned(32)));
        float w[GMAX_V][16] __attribute__((aligned(32)));
        float cr[GMAX_V];
        int any = 0;
        int nr = KB_MIN(16, j1 - j);
        if (idx) {
            block_rows(K, V, rb, idx, j, nr, kr, vr);
            krows = kr;
            vrows = vr;
        }
        const dec_pf pkv = {K, V, idx, j + pf, lim, rb, l2};
        block_scores(G, DV, dt, qs, K + (size_t)j * rb, krows, rb, nr, x, &pkv);
        /* lanes < nr count in l (lanes past nr repeat the last row) */
        const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        const __m256 in0 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nr), lane));
        const __m256 in1 = _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(nr - 8), lane));
#pragma GCC unroll 8
        for (int g = 0; g < G; g++) {
            float m = mrun[g];
            __m256 x0 = _mm256_load_ps(x[g]), x1 = _mm256_load_ps(x[g] + 8), mb = _mm256_set1_ps(m);
            /* the block's max with the max so far (a NaN score never: maxps
             * returns its second operand then) */
            __m256 bm = _mm256_max_ps(_mm256_max_ps(x0, mb), _mm256_max_ps(x1, mb));
            __m128 h = _mm_max_ps(_mm256_castps256_ps128(bm), _mm256_extractf128_ps(bm, 1));
            h = _mm_max_ps(h, _mm_movehl_ps(h, h));
            h = _mm_max_ss(h, _mm_movehdup_ps(h));
            float M = _mm_cvtss_f32(h), l = lsum[g];
            cr[g] = 1.0f;
            if (M > m) {
                cr[g] = simd_exp1(m - M);
                l *= cr[g];
                any = 1;
                mrun[g] = M;
                mb = _mm256_set1_ps(M);
            }
            __m256 w0 = simd_exp256(_mm256_sub_ps(x0, mb)), w1 = simd_exp256(_mm256_sub_ps(x1, mb));
            _mm256_store_ps(w[g], w0);
            _mm256_store_ps(w[g] + 8, w1);
            __m256 t = _mm256_add_ps(_mm256_and_ps(w0, in0), _mm256_and_ps(w1, in1));
            __m128 u = _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
            u = _mm_add_ps(u, _mm_movehl_ps(u, u));
            u = _mm_add_ss(u, _mm_movehdup_ps(u));
            lsum[g] = l + _mm_cvtss_f32(u);
        }
        const char *vb = V + (size_t)j * rb;
        if (any) block_vacc(G, DV, dt, CW, 1, vb, vrows, rb, nr, (const float(*)[16])w, cr, part->acc);
        else block_vacc(G, DV, dt, CW, 0, vb, vrows, rb, nr, (const float(*)[16])w, cr, part->acc);
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) {
        part->m[g] = mrun[g];
        part->l[g] = lsum[g];
    }
}

#endif

#if defined(KB_ATTN_BLOCKED)
/* The blocked kernels of either path above (attn16 / scores16 of the same
 * signature): compile-time copies for SmolLM2's and Llama's shapes (G 1 2 3 4
 * 8, D 64 / 128, every KV dtype), a run-time fallback for the rest. */
typedef void (*rows_fn)(const float *, const kb_kvstream *, const int32_t *, int, int, dec_part *,
                        float *, int);
/* (DEC_DENSE_F16: f16 dense rows, idx NULL, in their own copy, where
 * blk_row addresses them directly. f16 only: it is the KV cache's default
 * dtype (config kv_dtype) and the one every speed table uses; a second copy
 * for bf16 and f32 too doubled the file's compile time, ~+45 s of the
 * sanitizer build, for dtypes that `replay` and opt-in configs use. Their
 * dense rows take the shared copy, blk_row's test at run time: the same
 * values.) */
#define ROWS_SPEC(G, DV, DT, NAME)                                                              \
    static void NAME(const float *qs, const kb_kvstream *s, const int32_t *idx, int j0, int j1,  \
                     dec_part *part, float *sc, int ldo) {                                       \
        if (DEC_DENSE_F16 && DT == KB_F16 && !idx) {                                             \
            if (part) attn16(1, G, DV, DT, qs, s, NULL, j0, j1, part);                          \
            else scores16(1, G, DV, DT, qs, s, NULL, j0, j1, sc, ldo);                          \
        } else if (part) attn16(1, G, DV, DT, qs, s, idx, j0, j1, part);                        \
        else scores16(1, G, DV, DT, qs, s, idx, j0, j1, sc, ldo);                               \
    }
#define ROWS_G(DV, DT, T)                                                                      \
    ROWS_SPEC(1, DV, DT, rows_##T##_##DV##_1) ROWS_SPEC(2, DV, DT, rows_##T##_##DV##_2)          \
    ROWS_SPEC(3, DV, DT, rows_##T##_##DV##_3) ROWS_SPEC(4, DV, DT, rows_##T##_##DV##_4)          \
    ROWS_SPEC(8, DV, DT, rows_##T##_##DV##_8)
ROWS_G(4, KB_F16, f16)
ROWS_G(8, KB_F16, f16)
ROWS_G(4, KB_BF16, bf16)
ROWS_G(8, KB_BF16, bf16)
ROWS_G(4, KB_F32, f32)
ROWS_G(8, KB_F32, f32)
#define ROWS_TAB(T, DV)                                                                         \
    {NULL, rows_##T##_##DV##_1, rows_##T##_##DV##_2, rows_##T##_##DV##_3, rows_##T##_##DV##_4,   \
     NULL, NULL, NULL, rows_##T##_##DV##_8}
static const rows_fn rows_tab[3][2][9] = {
    {ROWS_TAB(f32, 4), ROWS_TAB(f32, 8)},
    {ROWS_TAB(f16, 4), ROWS_TAB(f16, 8)},
    {ROWS_TAB(bf16, 4), ROWS_TAB(bf16, 8)},
};
/* Other G (<= 8) and D (multiple of 16, <= 256): the same code with run-time
 * G and DV (accumulators in memory, slower), the same values. (GCC 12 cannot
 * see that block_scores writes x[g] for every g < G that attn16 then reads,
 * and warns of maybe-uninitialized x[1..7] here, in the loops unrolled for
 * GMAX_V heads: quieted for this function only; clang has no such warning
 * and would warn of the unknown option instead.) */
#if !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
static void rows_any(int G, const float *qs, const kb_kvstream *s, const int32_t *idx, int j0,
                     int j1, dec_part *part, float *sc, int ldo) {
    int DV = s->D / 16;
#define ROWS_ANY(DT) (part ? attn16(0, G, DV, DT, qs, s, idx, j0, j1, part) : scores16(0, G, DV, DT, qs, s, idx, j0, j1, sc, ldo))
    if (s->dtype == KB_F16) ROWS_ANY(KB_F16);
    else if (s->dtype == KB_BF16) ROWS_ANY(KB_BF16);
    else ROWS_ANY(KB_F32);
#undef ROWS_ANY
}
#if !defined(__clang__)
#pragma GCC diagnostic pop
#endif
#endif

/* Portable path (neither AVX-512 nor AVX2+FMA+F16C, or G > 8, or D not a multiple of 16 / > 256):
 * the same online softmax one row at a time. */
static void rows_plain(int G, const float *qs, const kb_kvstream *s, const int32_t *idx, int j0,
                       int j1, dec_part *part, float *sc, int ldo) {
    static _Thread_local void *buf;
    static _Thread_local size_t cap;
    int D = s->D;
    float *row = tls_grow(&buf, &cap, (size_t)(2 * D + G) * sizeof(float));
    float *vrow = row + D, *x = vrow + D;
    for (int j = j0; j < j1; j++) {
        int r = idx ? idx[j] : j;
        simd_cvt_row(s->dtype, kvstream_krow(s, r), row, D);
        for (int g = 0; g < G; g++) x[g] = simd_dot(qs + (size_t)g * D, row, D);
        if (!part) {
            for (int g = 0; g < G; g++) sc[(size_t)g * ldo + j] = x[g];
            continue;
        }
        simd_cvt_row(s->dtype, kvstream_vrow(s, r), vrow, D);
        for (int g = 0; g < G; g++) {
            float *a = part->acc + (size_t)g * D;
            if (x[g] > part->m[g]) {
                float corr = simd_exp1(part->m[g] - x[g]);
                part->l[g] *= corr;
                for (int d = 0; d < D; d++) a[d] *= corr;
                part->m[g] = x[g];
            }
            float w = simd_exp1(x[g] - part->m[g]);
            part->l[g] += w;
            simd_axpy(a, w, vrow, D);
        }
    }
}

/* Rows [j0, j1) (through idx when given) into part (attention) or sc (scores). */
static void rows_run(int G, const float *qs, const kb_kvstream *s, const int32_t *idx, int j0,
                     int j1, dec_part *part, float *sc, int ldo) {
    if (j1 <= j0) return;
#if defined(KB_ATTN_BLOCKED)
    int D = s->D;
    if (G <= GMAX_V && D % 16 == 0 && D <= 16 * DMAX_V) {
        rows_fn f = (D == 64 || D == 128) ? rows_tab[s->dtype][D == 128][G] : NULL;
        if (f) f(qs, s, idx, j0, j1, part, sc, ldo);
        else rows_any(G, qs, s, idx, j0, j1, part, sc, ldo);
        return;
    }
#endif
    rows_plain(G, qs, s, idx, j0, j1, part, sc, ldo);
}

/* One call: H heads (streams) of G query heads each, rows [0, n[h]) of each
 * (or idx[h][0..n[h]) ), split into chunks of DEC_CHUNK rows that the pool
 * runs; each chunk leaves a partial softmax state, merged per head at the
 * end (flash-decoding). */
typedef struct dec_job {
    int H, G, D;
    const float *qs;        /* [H][G][D] queries, multiplied by scale (attention) or not */
    const kb_kvstream *s;   /* [H] */
    const int *n;           /* [H] rows */
    const int32_t *const *idx; /* [H] row lists or NULL */
    int *chunk_head;        /* [nch] head of chunk c */
    int *chunk_j0;          /* [nch] first row of chunk c */
    float *parts;           /* [nch][G][D + 2] (attention) */
    float *sc;              /* scores out (qk_scores), [H][G][ldo] */
    int ldo;
    float sc_scale;         /* qk_scores: each f32 dot product times this */
    int nch, span;          /* chunks, and chunks per pool task */
} dec_job;

static void dec_chunk(void *p, int c, int worker) {
    (void)worker;
    const dec_job *J = p;
    int h = J->chunk_head[c], j0 = J->chunk_j0[c];
    int j1 = KB_MIN(J->n[h], j0 + DEC_CHUNK);
    const float *qs = J->qs + (size_t)h * J->G * J->D;
    const int32_t *idx = J->idx ? J->idx[h] : NULL;
    if (!J->parts) {
        float *sc = J->sc + (size_t)h * J->G * J->ldo;
        rows_run(J->G, qs, &J->s[h], idx, j0, j1, NULL, sc, J->ldo);
        /* scaled while the chunk's scores are in L1: the same f32 product as
         * a pass over the whole row afterwards */
        if (J->sc_scale != 1.0f)
            for (int g = 0; g < J->G; g++) simd_scale(sc + (size_t)g * J->ldo + j0, J->sc_scale, j1 - j0);
        return;
    }
    float *pp = J->parts + (size_t)c * J->G * (J->D + 2);
    dec_part part = {pp, pp + J->G, pp + 2 * J->G};
    for (int g = 0; g < J->G; g++) {
        part.m[g] = -INFINITY;
        part.l[g] = 0;
    }
    memset(part.acc, 0, (size_t)J->G * J->D * sizeof(float));
    rows_run(J->G, qs, &J->s[h], idx, j0, j1, &part, NULL, 0);
}

static void dec_span(void *p, int t, int worker) {
    const dec_job *J = p;
    for (int c = t * J->span; c < KB_MIN(J->nch, (t + 1) * J->span); c++) dec_chunk(p, c, worker);
}

static void dec_run(int H, int G, const float *q, const kb_kvstream *s, const int *n,
                    const int32_t *const *idx, float scale, float *out, float *sc, int ldo) {
    static _Thread_local void *buf;
    static _Thread_local size_t cap;
    int D = s[0].D, attn = out != NULL;
    int nch = 0;
    size_t bytes = 0;
    for (int h = 0; h < H; h++) {
        nch += (n[h] + DEC_CHUNK - 1) / DEC_CHUNK;
        bytes += (size_t)n[h] * D * kb_dtype_size(s[h].dtype) * (attn ? 2 : 1);
    }
    size_t qn = (size_t)H * G * D;
    size_t need = qn * sizeof(float) + 2 * (size_t)nch * sizeof(int) +
                  (attn ? (size_t)nch * G * (D + 2) * sizeof(float) : 0) + 64;
    char *b = tls_grow(&buf, &cap, need);
    dec_job J = {H, G, D, (float *)(void *)b, s, n, idx, NULL, NULL, NULL, sc, ldo, attn ? 1.0f : scale, nch, 1};
    float *qs = (float *)(void *)b;
    for (size_t i = 0; i < qn; i++) qs[i] = attn ? q[i] * scale : q[i];
    J.parts = attn ? qs + qn : NULL;
    J.chunk_head = (int *)(void *)(qs + qn + (attn ? (size_t)nch * G * (D + 2) : 0));
    J.chunk_j0 = J.chunk_head + nch;
    int c = 0;
    for (int h = 0; h < H; h++)
        for (int j = 0; j < n[h]; j += DEC_CHUNK) {
            J.chunk_head[c] = h;
            J.chunk_j0[c++] = j;
        }
    if (bytes >= DEC_PAR_BYTES) {
        /* each pool task runs `span` consecutive chunks: a thread streams long
         * contiguous runs of K and V (fewer stream starts for the hardware
         * prefetcher: Full KV's attention at 8K 6-8% faster than one chunk per task)
         * while every participant still gets about DEC_TASKS tasks */
        int T = kb_pool_threads();
        J.span = KB_MAX(1, nch / (DEC_TASKS * T));
        kb_pool_run((nch + J.span - 1) / J.span, dec_span, &J);
    } else
        for (int i = 0; i < nch; i++) dec_chunk(&J, i, 0);
    if (!attn) return;
    /* merge the chunks of each head (log-sum-exp) */
    c = 0;
    for (int h = 0; h < H; h++) {
        int hc = (n[h] + DEC_CHUNK - 1) / DEC_CHUNK;
        for (int g = 0; g < G; g++) {
            float *o = out + ((size_t)h * G + g) * D;
            memset(o, 0, (size_t)D * sizeof(float));
            if (!hc) continue;
            float M = -INFINITY, L = 0;
            for (int i = 0; i < hc; i++) M = fmaxf(M, J.parts[(size_t)(c + i) * G * (D + 2) + g]);
            for (int i = 0; i < hc; i++) {
                const float *pp = J.parts + (size_t)(c + i) * G * (D + 2);
                float w = simd_exp1(pp[g] - M);
                L += w * pp[G + g];
                simd_axpy(o, w, pp + 2 * G + (size_t)g * D, D);
            }
            simd_scale(o, 1.0f / L, D);
        }
        c += hc;
    }
}

void kb_cpu_attn_dense(const float *q, int G, const kb_kvstream *s, int n, float scale,
                       float *out) {
    if (n <= 0) {
        memset(out, 0, (size_t)G * s->D * sizeof(float));
        return;
    }
    dec_run(1, G, q, s, &n, NULL, scale, out, NULL, 0);
}

void kb_cpu_attn_dense_heads(const float *q, int H, int G, const kb_kvstream *s, float scale,
                             float *out) {
    if (H <= 0) return;
    int nb[64], *n = H <= 64 ? nb : KB_MALLOC((size_t)H * sizeof(int));
    for (int h = 0; h < H; h++) n[h] = s[h].n;
    dec_run(H, G, q, s, n, NULL, scale, out, NULL, 0);
    if (n != nb) free(n);
}

void kb_cpu_attn_gather_rows(const float *q, int G, const kb_kvstream *s, const int32_t *idx,
                             int k, float scale, float *out) {
    if (k <= 0) {
        memset(out, 0, (size_t)G * s->D * sizeof(float));
        return;
    }
    dec_run(1, G, q, s, &k, &idx, scale, out, NULL, 0);
}

/* All H heads' rows in one pool job; each chunk scales its scores (no
 * serial pass over the H x G rows afterwards). */
void kb_cpu_qk_scores(const float *q, int H, int G, const kb_kvstream *s, int n, float scale, float *out,
                      int ldo) {
    if (n <= 0 || H <= 0) return;
    int nb[64], *nh = H <= 64 ? nb : KB_MALLOC((size_t)H * sizeof(int));
    for (int h = 0; h < H; h++) nh[h] = n;
    dec_run(H, G, q, s, nh, NULL, scale, NULL, out, ldo);
    if (nh != nb) free(nh);
}

#define PF_BQ 64  /* queries per block */
#define PF_BK 256 /* keys per block */

void kb_cpu_attn_causal(const float *Q, int nq, int ldq, int G, const kb_kvstream *s,
                        int n_prior, float scale, float *out, int ldo) {
    int D = s->D;
    int nqb = (nq + PF_BQ - 1) / PF_BQ;
    int outer = !omp_in_parallel();
    kb_blas_single_thread();
#pragma omp parallel if (outer && nqb > 1)
    {
        float *Kt = KB_AMALLOC((size_t)PF_BK * D * sizeof(float));
        float *Vt = KB_AMALLOC((size_t)PF_BK * D * sizeof(float));
        float *S = KB_AMALLOC((size_t)G * PF_BQ * PF_BK * sizeof(float));
        float *acc = KB_AMALLOC((size_t)G * PF_BQ * D * sizeof(float));
        float *m = KB_MALLOC((size_t)G * PF_BQ * sizeof(float));
        float *l = KB_MALLOC((size_t)G * PF_BQ * sizeof(float));
        /* later query blocks see more keys: hand blocks out from the end */
#pragma omp for schedule(dynamic, 1)
        for (int bi = nqb - 1; bi >= 0; bi--) {
            int i0 = bi * PF_BQ, bq = KB_MIN(PF_BQ, nq - i0);
            int nk = n_prior + i0 + bq; /* keys visible to the block's last query */
            for (int x = 0; x < G * PF_BQ; x++) {
                m[x] = -INFINITY;
                l[x] = 0;
            }
            memset(acc, 0, (size_t)G * PF_BQ * D * sizeof(float));
            for (int k0 = 0; k0 < nk; k0 += PF_BK) {
                int bk = KB_MIN(PF_BK, nk - k0);
                for (int j = 0; j < bk; j++) {
                    simd_cvt_row(s->dtype, kvstream_krow(s, k0 + j), Kt + (size_t)j * D, D);
                    simd_cvt_row(s->dtype, kvstream_vrow(s, k0 + j), Vt + (size_t)j * D, D);
                }
                for (int g = 0; g < G; g++) {
                    float *Sg = S + (size_t)g * PF_BQ * PF_BK;
                    float *ag = acc + (size_t)g * PF_BQ * D;
                    const float *Qg = Q + (size_t)i0 * ldq + (size_t)g * D;
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, bq, bk, D, scale, Qg, ldq,
                                Kt, D, 0.0f, Sg, PF_BK);
                    for (int i = 0; i < bq; i++) {
                        float *srow = Sg + (size_t)i * PF_BK;
                        int last = n_prior + i0 + i - k0; /* last visible key in this block */
                        int vis = last + 1 < bk ? last + 1 : bk;
                        if (vis <= 0) {
                            memset(srow, 0, (size_t)bk * sizeof(float));
                            continue;
                        }
                        float mx = m[g * PF_BQ + i];
                        for (int j = 0; j < vis; j++) mx = srow[j] > mx ? srow[j] : mx;
                        float corr = expf(m[g * PF_BQ + i] - mx);
                        for (int j = 0; j < vis; j++) srow[j] -= mx;
                        simd_exp_inplace(srow, vis);
                        for (int j = vis; j < bk; j++) srow[j] = 0;
                        float sum = 0;
                        for (int j = 0; j < vis; j++) sum += srow[j];
                        l[g * PF_BQ + i] = l[g * PF_BQ + i] * corr + sum;
                        m[g * PF_BQ + i] = mx;
                        if (corr != 1.0f) simd_scale(ag + (size_t)i * D, corr, D);
                    }
                    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, bq, D, bk, 1.0f, Sg,
                                PF_BK, Vt, D, 1.0f, ag, D);
                }
            }
            for (int g = 0; g < G; g++)
                for (int i = 0; i < bq; i++) {
                    float inv = 1.0f / l[g * PF_BQ + i];
                    const float *a = acc + ((size_t)g * PF_BQ + i) * D;
                    float *o = out + (size_t)(i0 + i) * ldo + (size_t)g * D;
                    for (int d = 0; d < D; d++) o[d] = a[d] * inv;
                }
        }
        kb_afree(Kt);
        kb_afree(Vt);
        kb_afree(S);
        kb_afree(acc);
        free(m);
        free(l);
    }
}
