/* select_cpu.c - fast selection building blocks (select.h).
 *
 * Same definitions as kernels/ref/select_ref.c with f32 arithmetic and the
 * asymptotics the definitions need: top-k by bisection over order-preserving
 * 32-bit keys (at most 32 vectorised counting passes, no sort, no data-
 * dependent branches) writing the winners in ascending order; token-level top-k over page-broadcast scores selected at page
 * level (whole pages, then the boundary page's lowest slots); the hybrid
 * softmax over slots computed per page (a page of c slots contributes c equal
 * terms); max pooling with a monotone deque. Raw speed (threads, blocking)
 * is for the performance work; layouts are already row-contiguous. */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "kernels/attn_impl.h"
#include "kernels/cpu/simd.h"
#include "kernels/pool.h"
#include "kernels/select.h"

/* exp of x[0..n) with every element on the vector path of simd_exp_inplace,
 * whatever its position: its scalar tail rounds differently (no FMA), which
 * would give equal scores different weights and break the "ties to the lower
 * index" rule for duplicated keys. x must have room for pad16(n) floats. */
static inline int pad16(int n) { return (n + 15) & ~15; }
static void exp_uniform(float *x, int n) {
    int m = pad16(n);
    for (int i = n; i < m; i++) x[i] = -INFINITY;
    simd_exp_inplace(x, m);
}

/* The AVX2 paths (a machine without AVX-512: AVX2 + FMA + F16C): 8 lanes
 * where the AVX-512 paths have 16, the same operations in the same order
 * lane by lane, so they give the AVX-512 paths' values (and, where those
 * promise it, the portable path's). */
#if !defined(__AVX512F__) && defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define SEL_AVX2 1
#else
#define SEL_AVX2 0
#endif

#if SEL_AVX2
static inline int pad8(int n) { return (n + 7) & ~7; }

/* Lanes [0, c) all ones (0 <= c <= 8). */
static inline __m256i lanes_lt(int c) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Unsigned 32-bit a >= b, lane-wise (all ones / zero). */
static inline __m256i ge_epu32(__m256i a, __m256i b) { return _mm256_cmpeq_epi32(_mm256_max_epu32(a, b), a); }

static inline float hmax256(__m256 v) { /* max_ps(a, b) = a > b ? a : b; v holds no NaN */
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    return _mm_cvtss_f32(h);
}

static inline int hsum256_epi32(__m256i v) {
    __m128i h = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(1, 0, 3, 2)));
    h = _mm_add_epi32(h, _mm_shuffle_epi32(h, _MM_SHUFFLE(2, 3, 0, 1)));
    return _mm_cvtsi128_si32(h);
}

/* compress_lut[m]: the lanes set in m, ascending, one per nibble from the
 * lowest: the permutation that packs them to the front (the compress of
 * AVX-512, which AVX2 lacks). */
static const uint32_t compress_lut[256] = {
    0x00000000u, 0x00000000u, 0x00000001u, 0x00000010u, 0x00000002u, 0x00000020u, 0x00000021u, 0x00000210u,
    0x00000003u, 0x00000030u, 0x00000031u, 0x00000310u, 0x00000032u, 0x00000320u, 0x00000321u, 0x00003210u,
    0x00000004u, 0x00000040u, 0x00000041u, 0x00000410u, 0x00000042u, 0x00000420u, 0x00000421u, 0x00004210u,
    0x00000043u, 0x00000430u, 0x00000431u, 0x00004310u, 0x00000432u, 0x00004320u, 0x00004321u, 0x00043210u,
    0x00000005u, 0x00000050u, 0x00000051u, 0x00000510u, 0x00000052u, 0x00000520u, 0x00000521u, 0x00005210u,
    0x00000053u, 0x00000530u, 0x00000531u, 0x00005310u, 0x00000532u, 0x00005320u, 0x00005321u, 0x00053210u,
    0x00000054u, 0x00000540u, 0x00000541u, 0x00005410u, 0x00000542u, 0x00005420u, 0x00005421u, 0x00054210u,
    0x00000543u, 0x00005430u, 0x00005431u, 0x00054310u, 0x00005432u, 0x00054320u, 0x00054321u, 0x00543210u,
    0x00000006u, 0x00000060u, 0x00000061u, 0x00000610u, 0x00000062u, 0x00000620u, 0x00000621u, 0x00006210u,
    0x00000063u, 0x00000630u, 0x00000631u, 0x00006310u, 0x00000632u, 0x00006320u, 0x00006321u, 0x00063210u,
    0x00000064u, 0x00000640u, 0x00000641u, 0x00006410u, 0x00000642u, 0x00006420u, 0x00006421u, 0x00064210u,
    0x00000643u, 0x00006430u, 0x00006431u, 0x00064310u, 0x00006432u, 0x00064320u, 0x00064321u, 0x00643210u,
    0x00000065u, 0x00000650u, 0x00000651u, 0x00006510u, 0x00000652u, 0x00006520u, 0x00006521u, 0x00065210u,
    0x00000653u, 0x00006530u, 0x00006531u, 0x00065310u, 0x00006532u, 0x00065320u, 0x00065321u, 0x00653210u,
    0x00000654u, 0x00006540u, 0x00006541u, 0x00065410u, 0x00006542u, 0x00065420u, 0x00065421u, 0x00654210u,
    0x00006543u, 0x00065430u, 0x00065431u, 0x00654310u, 0x00065432u, 0x00654320u, 0x00654321u, 0x06543210u,
    0x00000007u, 0x00000070u, 0x00000071u, 0x00000710u, 0x00000072u, 0x00000720u, 0x00000721u, 0x00007210u,
    0x00000073u, 0x00000730u, 0x00000731u, 0x00007310u, 0x00000732u, 0x00007320u, 0x00007321u, 0x00073210u,
    0x00000074u, 0x00000740u, 0x00000741u, 0x00007410u, 0x00000742u, 0x00007420u, 0x00007421u, 0x00074210u,
    0x00000743u, 0x00007430u, 0x00007431u, 0x00074310u, 0x00007432u, 0x00074320u, 0x00074321u, 0x00743210u,
    0x00000075u, 0x00000750u, 0x00000751u, 0x00007510u, 0x00000752u, 0x00007520u, 0x00007521u, 0x00075210u,
    0x00000753u, 0x00007530u, 0x00007531u, 0x00075310u, 0x00007532u, 0x00075320u, 0x00075321u, 0x00753210u,
    0x00000754u, 0x00007540u, 0x00007541u, 0x00075410u, 0x00007542u, 0x00075420u, 0x00075421u, 0x00754210u,
    0x00007543u, 0x00075430u, 0x00075431u, 0x00754310u, 0x00075432u, 0x00754320u, 0x00754321u, 0x07543210u,
    0x00000076u, 0x00000760u, 0x00000761u, 0x00007610u, 0x00000762u, 0x00007620u, 0x00007621u, 0x00076210u,
    0x00000763u, 0x00007630u, 0x00007631u, 0x00076310u, 0x00007632u, 0x00076320u, 0x00076321u, 0x00763210u,
    0x00000764u, 0x00007640u, 0x00007641u, 0x00076410u, 0x00007642u, 0x00076420u, 0x00076421u, 0x00764210u,
    0x00007643u, 0x00076430u, 0x00076431u, 0x00764310u, 0x00076432u, 0x00764320u, 0x00764321u, 0x07643210u,
    0x00000765u, 0x00007650u, 0x00007651u, 0x00076510u, 0x00007652u, 0x00076520u, 0x00076521u, 0x00765210u,
    0x00007653u, 0x00076530u, 0x00076531u, 0x00765310u, 0x00076532u, 0x00765320u, 0x00765321u, 0x07653210u,
    0x00007654u, 0x00076540u, 0x00076541u, 0x00765410u, 0x00076542u, 0x00765420u, 0x00765421u, 0x07654210u,
    0x00076543u, 0x00765430u, 0x00765431u, 0x07654310u, 0x00765432u, 0x07654320u, 0x07654321u, 0x76543210u,
};

/* The lanes of v set in the 8-bit mask m, packed to the front (the lanes
 * after them undefined). */
static inline __m256i compress8(__m256i v, unsigned m) {
    __m256i perm = _mm256_srlv_epi32(_mm256_set1_epi32((int)compress_lut[m]), _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28));
    return _mm256_permutevar8x32_epi32(v, _mm256_and_si256(perm, _mm256_set1_epi32(15)));
}

/* The lowest c set bits of e (c <= popcount(e)). */
static inline unsigned lowest_bits(unsigned e, int c) {
    unsigned r = 0;
    for (; c > 0; c--) {
        r |= e & -e;
        e &= e - 1;
    }
    return r;
}
#endif

#if defined(__AVX512F__)
/* dst[0..popcount(k)) := v's lanes selected by k, in order. The compress in
 * a register and a masked store: the same bytes as
 * _mm512_mask_compressstoreu_epi32, whose memory form is microcoded on Zen 4
 * (a top-k of 483 pages took 3,146 cycles with it, 1,222 without: PERFORMANCE-LOG.md,
 * "The selection on Zen 4").
 * Writes nothing past dst + popcount(k). */
static inline void compress_store16(int32_t *dst, __mmask16 k, __m512i v) {
    _mm512_mask_storeu_epi32(dst, (__mmask16)((1u << __builtin_popcount(k)) - 1), _mm512_maskz_compress_epi32(k, v));
}
static inline void compress_store8(int32_t *dst, __mmask8 k, __m256i v) {
    _mm256_mask_storeu_epi32(dst, (__mmask8)((1u << __builtin_popcount(k)) - 1), _mm256_maskz_compress_epi32(k, v));
}
#endif

/* ---- deterministic top-k ----
 *
 * In key space: rank_key maps a score to a 32-bit unsigned key with
 * key(a) > key(b) iff a ranks before b by value in kb_rank_before (NaN as
 * -inf, -0 == +0: equal values get equal keys). The top m of n are then
 * {key > t} plus the lowest-indexed elements with key == t, where t is the
 * largest key with at least m keys >= t. t is found by bisection over the
 * key range, each step one vectorised count of keys >= mid (no data-
 * dependent branches, no sort); a second pass writes the chosen indices in
 * ascending order. For large n with few winners a sample of the keys gives
 * a threshold that about 2m + 32 keys pass, and the same bisection runs on
 * those candidates (in ascending index order, so ties still go to the
 * lower index). */

static inline uint32_t rank_key(float f) {
    if (f != f) f = -INFINITY;
    if (f == 0) f = 0; /* -0 -> +0 */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Thread-local scratch (kernels run on several threads at once). */
static void *tls_buf(size_t bytes, int which) {
    static _Thread_local void *buf[3];
    static _Thread_local size_t cap[3];
    if (bytes > cap[which]) {
        free(buf[which]);
        cap[which] = bytes + bytes / 2 + 256;
        buf[which] = KB_MALLOC(cap[which]);
    }
    return buf[which];
}
static int32_t *tls_idx(int n) { return tls_buf((size_t)n * sizeof(int32_t), 0); }

/* key[0..n) of x; key[n..pad16(n)) = 0, below every real key (-inf's is
 * 0x007fffff), so whole-vector passes never count the padding. */
static void keys_of(const float *x, int n, uint32_t *key) {
    int i = 0;
#if defined(__AVX512F__)
    const __m512 ninf = _mm512_set1_ps(-INFINITY), zero = _mm512_setzero_ps();
    const __m512i sign = _mm512_set1_epi32((int)0x80000000u), ones = _mm512_set1_epi32(-1);
    for (; i < n; i += 16) {
        __mmask16 valid = n - i >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (n - i)) - 1);
        __m512 v = _mm512_maskz_loadu_ps(valid, x + i);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, v, _CMP_UNORD_Q), ninf);
        v = _mm512_mask_mov_ps(v, _mm512_cmp_ps_mask(v, zero, _CMP_EQ_OQ), zero);
        __m512i u = _mm512_castps_si512(v);
        __mmask16 neg = _mm512_cmplt_epi32_mask(u, _mm512_setzero_si512());
        __m512i k = _mm512_mask_xor_epi32(_mm512_or_si512(u, sign), neg, u, ones);
        _mm512_storeu_si512(key + i, _mm512_maskz_mov_epi32(valid, k));
    }
#elif SEL_AVX2
    /* the same map: NaN -> -inf, -0 -> +0, then u ^ (sign ? ~0 : 1 << 31) */
    const __m256 ninf = _mm256_set1_ps(-INFINITY), zero = _mm256_setzero_ps();
    const __m256i sign = _mm256_set1_epi32((int)0x80000000u);
    for (; i + 8 <= n; i += 8) {
        __m256 v = _mm256_loadu_ps(x + i);
        v = _mm256_blendv_ps(v, ninf, _mm256_cmp_ps(v, v, _CMP_UNORD_Q));
        v = _mm256_blendv_ps(v, zero, _mm256_cmp_ps(v, zero, _CMP_EQ_OQ));
        __m256i u = _mm256_castps_si256(v);
        __m256i k = _mm256_xor_si256(u, _mm256_or_si256(_mm256_srai_epi32(u, 31), sign));
        _mm256_storeu_si256((__m256i *)(key + i), k);
    }
#endif
    for (; i < n; i++) key[i] = rank_key(x[i]);
    for (; i < pad16(n); i++) key[i] = 0;
}

/* Keys >= t among key[0..pad16(n)). */
static int count_ge(const uint32_t *key, int n, uint32_t t) {
    int c = 0;
#if defined(__AVX512F__)
    __m512i vt = _mm512_set1_epi32((int)t);
    for (int i = 0; i < n; i += 16)
        c += __builtin_popcount(_mm512_cmpge_epu32_mask(_mm512_loadu_si512(key + i), vt));
#elif SEL_AVX2
    /* whole vectors up to pad8(n) <= pad16(n): the padding (0) is below t */
    __m256i vt = _mm256_set1_epi32((int)t), a0 = _mm256_setzero_si256(), a1 = a0;
    int i = 0;
    for (; i + 16 <= n; i += 16) {
        a0 = _mm256_sub_epi32(a0, ge_epu32(_mm256_loadu_si256((const __m256i *)(key + i)), vt));
        a1 = _mm256_sub_epi32(a1, ge_epu32(_mm256_loadu_si256((const __m256i *)(key + i + 8)), vt));
    }
    if (i < n) a0 = _mm256_sub_epi32(a0, ge_epu32(_mm256_loadu_si256((const __m256i *)(key + i)), vt));
    if (i + 8 < n) a1 = _mm256_sub_epi32(a1, ge_epu32(_mm256_loadu_si256((const __m256i *)(key + i + 8)), vt));
    c = hsum256_epi32(_mm256_add_epi32(a0, a1));
#else
    for (int i = 0; i < n; i++) c += key[i] >= t;
#endif
    return c;
}

/* The largest t with at least m (1 <= m <= n) of key[0..n) >= t, or a
 * stand-in with exactly m keys >= it. *gt (if not NULL) := m in the second
 * case, else the number of keys > t (< m): both known from the bisection.
 * key[n..pad16(n)) must be 0. Each bisection step counts keys >= mid among
 * candidates: every key in [lo, hi) (plus c_base keys >= hi counted
 * apart). Once at most half the candidates lie in [lo, hi), they are
 * compressed to those (vector path), so the later steps (the low bits of
 * the keys) count a few vectors instead of all n: the same counts, so the
 * same steps and the same t. */
static uint32_t key_threshold(const uint32_t *key, int n, int m, int *gt) {
    uint32_t mn = UINT32_MAX, mx = 0;
    int i = 0;
#if defined(__AVX512F__)
    __m512i vmn = _mm512_set1_epi32(-1), vmx = _mm512_setzero_si512();
    for (; i + 16 <= n; i += 16) {
        __m512i kv = _mm512_loadu_si512(key + i);
        vmn = _mm512_min_epu32(vmn, kv);
        vmx = _mm512_max_epu32(vmx, kv);
    }
    mn = _mm512_reduce_min_epu32(vmn);
    mx = _mm512_reduce_max_epu32(vmx);
#elif SEL_AVX2
    if (n >= 8) {
        __m256i vmn = _mm256_set1_epi32(-1), vmx = _mm256_setzero_si256();
        for (; i + 8 <= n; i += 8) {
            __m256i kv = _mm256_loadu_si256((const __m256i *)(key + i));
            vmn = _mm256_min_epu32(vmn, kv);
            vmx = _mm256_max_epu32(vmx, kv);
        }
        uint32_t a[8], b[8];
        _mm256_storeu_si256((__m256i *)a, vmn);
        _mm256_storeu_si256((__m256i *)b, vmx);
        for (int j = 0; j < 8; j++) {
            mn = a[j] < mn ? a[j] : mn;
            mx = b[j] > mx ? b[j] : mx;
        }
    }
#endif
    for (; i < n; i++) {
        mn = key[i] < mn ? key[i] : mn;
        mx = key[i] > mx ? key[i] : mx;
    }
    uint64_t lo = mn, hi = (uint64_t)mx + 1; /* count(>= lo) = c_lo >= m > count(>= hi) = c_hi */
    int c_hi = 0, c_lo = n, c_base = 0, nc = n;
    const uint32_t *cand = key;
#if defined(__AVX512F__) || SEL_AVX2
    uint32_t *buf = n > 64 ? tls_buf((size_t)2 * (pad16(n) + 16) * sizeof(uint32_t), 2) : NULL;
    int flip = 0;
#endif
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = c_base + count_ge(cand, nc, (uint32_t)mid);
        if (c >= m) {
            lo = mid;
            c_lo = c;
            if (c == m) { /* {key >= mid} is the answer; mid stands in for t */
                c_hi = m;
                break;
            }
        } else {
            hi = mid;
            c_hi = c;
        }
#if defined(__AVX512F__)
        if (buf && nc > 32 && 2 * (c_lo - c_hi) <= nc) { /* keep the keys in [lo, hi) */
            uint32_t *dst = buf + (size_t)flip * (pad16(n) + 16);
            __m512i vlo = _mm512_set1_epi32((int)(uint32_t)lo), vhi = _mm512_set1_epi32((int)(uint32_t)(hi - 1));
            int c2 = 0;
            for (int j = 0; j < nc; j += 16) {
                __m512i kv = _mm512_loadu_si512(cand + j);
                __mmask16 k = _mm512_cmpge_epu32_mask(kv, vlo) & _mm512_cmple_epu32_mask(kv, vhi);
                _mm512_storeu_si512(dst + c2, _mm512_maskz_compress_epi32(k, kv));
                c2 += __builtin_popcount(k);
            }
            _mm512_storeu_si512(dst + c2, _mm512_setzero_si512()); /* zeros up to pad16(c2) */
            cand = dst;
            nc = c2;
            c_base = c_hi;
            flip ^= 1;
        }
#elif SEL_AVX2
        if (buf && nc > 32 && 2 * (c_lo - c_hi) <= nc) { /* keep the keys in [lo, hi), as above */
            uint32_t *dst = buf + (size_t)flip * (pad16(n) + 16);
            __m256i vlo = _mm256_set1_epi32((int)(uint32_t)lo), vhi = _mm256_set1_epi32((int)(uint32_t)(hi - 1));
            int c2 = 0;
            for (int j = 0; j < nc; j += 8) { /* whole vectors: the padding (0) is below lo */
                __m256i kv = _mm256_loadu_si256((const __m256i *)(cand + j));
                __m256i in = _mm256_and_si256(ge_epu32(kv, vlo), ge_epu32(vhi, kv));
                unsigned k = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(in));
                _mm256_storeu_si256((__m256i *)(dst + c2), compress8(kv, k));
                c2 += __builtin_popcount(k);
            }
            _mm256_storeu_si256((__m256i *)(dst + c2), _mm256_setzero_si256()); /* zeros up to pad16(c2) */
            _mm256_storeu_si256((__m256i *)(dst + c2 + 8), _mm256_setzero_si256());
            cand = dst;
            nc = c2;
            c_base = c_hi;
            flip ^= 1;
        }
#endif
    }
    (void)c_lo; /* only the vector path compresses */
    if (gt) *gt = c_hi; /* hi == lo + 1 here unless the break: count(> lo) */
    return (uint32_t)lo;
}

/* out[0..m) := ascending ids (ids[i], or i when ids is NULL) of the top m
 * given t and gt from key_threshold(key, n, m, &gt); returns the position in
 * out of the element of rank m - 1 (the lowest key taken; among equal keys
 * the highest index). */
static int key_take(const uint32_t *key, const int32_t *ids, int n, int m, uint32_t t, int gt,
                    int32_t *out) {
    int rem = m - gt; /* elements equal to t still to take, lowest index first */
    int c = 0, i = 0;
    if (rem == 0) { /* exactly m keys >= t: take them all */
#if defined(__AVX512F__)
        __m512i vt = _mm512_set1_epi32((int)t), iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (; i + 16 <= pad16(n); i += 16) {
            __mmask16 k = _mm512_cmpge_epu32_mask(_mm512_loadu_si512(key + i), vt);
            __m512i id = ids ? _mm512_maskz_loadu_epi32(k, ids + i) : _mm512_add_epi32(iv, _mm512_set1_epi32(i));
            compress_store16(out + c, k, id);
            c += __builtin_popcount(k);
        }
#elif SEL_AVX2
        /* the lanes taken one by one (out has room for m only) */
        __m256i vt = _mm256_set1_epi32((int)t);
        for (; i + 8 <= pad16(n); i += 8)
            for (unsigned k = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ge_epu32(_mm256_loadu_si256((const __m256i *)(key + i)), vt)));
                 k; k &= k - 1) {
                int l = i + __builtin_ctz(k);
                out[c++] = ids ? ids[l] : l;
            }
#endif
        for (; i < n; i++)
            if (key[i] >= t) out[c++] = ids ? ids[i] : i;
        /* rank m - 1: the lowest key, the last of its equals */
        int b = 0;
        uint32_t bk = UINT32_MAX;
        if (!ids) {
            int s = 0;
#if defined(__AVX512F__)
            if (m <= 256) { /* the keys of out gathered, their min, then its last position */
                uint32_t g[256];
                __m512i vmin = _mm512_set1_epi32(-1);
                for (; s < m; s += 16) {
                    __mmask16 v = m - s >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (m - s)) - 1);
                    __m512i kv = _mm512_mask_i32gather_epi32(_mm512_set1_epi32(-1), v, _mm512_maskz_loadu_epi32(v, out + s),
                                                             (const int *)key, 4);
                    _mm512_storeu_si512(g + s, kv);
                    vmin = _mm512_min_epu32(vmin, kv);
                }
                __m512i vb = _mm512_set1_epi32((int)_mm512_reduce_min_epu32(vmin));
                for (s = (m - 1) / 16 * 16; s >= 0; s -= 16) {
                    unsigned e = _mm512_cmpeq_epi32_mask(_mm512_loadu_si512(g + s), vb);
                    if (s + 16 > m) e &= (1u << (m - s)) - 1;
                    if (e) return s + 31 - __builtin_clz(e);
                }
                s = 0; /* not reached: the min is one of them */
            }
#endif
            for (; s < m; s++)
                if (key[out[s]] <= bk) {
                    bk = key[out[s]];
                    b = s;
                }
            return b;
        }
        for (int j = 0, s = 0; j < n && s < m; j++)
            if (key[j] >= t) {
                if (key[j] <= bk) {
                    bk = key[j];
                    b = s;
                }
                s++;
            }
        return b;
    }
    int b = 0;
#if defined(__AVX512F__)
    __m512i vt = _mm512_set1_epi32((int)t), iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    for (; i + 16 <= pad16(n); i += 16) {
        __m512i kv = _mm512_loadu_si512(key + i);
        __mmask16 g = _mm512_cmpgt_epu32_mask(kv, vt);
        unsigned e = _mm512_cmpeq_epu32_mask(kv, vt);
        if (rem == 0) e = 0;
        else if (__builtin_popcount(e) >= rem) {
            e &= (unsigned)_pdep_u32((1u << rem) - 1, e); /* the lowest rem of them */
            /* the boundary: the highest lane of e */
            int lane = 31 - __builtin_clz(e);
            b = c + __builtin_popcount((unsigned)(g | e) & ((1u << lane) - 1));
            rem = 0;
        } else {
            rem -= __builtin_popcount(e);
        }
        __mmask16 k = (__mmask16)(g | e);
        __m512i id = ids ? _mm512_maskz_loadu_epi32(k, ids + i) : _mm512_add_epi32(iv, _mm512_set1_epi32(i));
        compress_store16(out + c, k, id);
        c += __builtin_popcount(k);
    }
#elif SEL_AVX2
    const __m256i vt = _mm256_set1_epi32((int)t), sign = _mm256_set1_epi32((int)0x80000000u);
    const __m256i vts = _mm256_xor_si256(vt, sign);
    for (; i + 8 <= pad16(n); i += 8) {
        __m256i kv = _mm256_loadu_si256((const __m256i *)(key + i));
        unsigned g = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_xor_si256(kv, sign), vts)));
        unsigned e = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(kv, vt)));
        if (rem == 0) e = 0;
        else if (__builtin_popcount(e) >= rem) {
            e = lowest_bits(e, rem);
            int lane = 31 - __builtin_clz(e); /* the boundary: the highest lane of e */
            b = c + __builtin_popcount((g | e) & ((1u << lane) - 1));
            rem = 0;
        } else {
            rem -= __builtin_popcount(e);
        }
        for (unsigned k = g | e; k; k &= k - 1) {
            int l = i + __builtin_ctz(k);
            out[c++] = ids ? ids[l] : l;
        }
    }
#endif
    for (; i < n; i++) {
        int take = key[i] > t;
        if (key[i] == t && rem > 0) {
            take = 1;
            if (--rem == 0) b = c;
        }
        if (take) out[c++] = ids ? ids[i] : i;
    }
    return b;
}

/* out[0..m) := the m top-ranked indices of x[0..n) in the deterministic
 * order, ascending; returns the position in out of the element of rank
 * m - 1. 1 <= m <= n. */
static int top_m_sorted(const float *x, int n, int m, int32_t *out) {
    enum { SAMPLE = 256 };
    uint32_t *key = tls_buf((size_t)3 * pad16(n) * sizeof(uint32_t), 1); /* keys, candidates' keys and ids */
    keys_of(x, n, key);
    if (n >= 4 * SAMPLE && m <= n / 8) {
        uint32_t smp[SAMPLE] __attribute__((aligned(64)));
        int step = n / SAMPLE;
        for (int i = 0; i < SAMPLE; i++) smp[i] = key[(size_t)i * step];
        /* about (q + 1) * step keys are >= the sample's rank-q key: aim at 2m + 32 */
        long q = (2L * m + 32) / step;
        if (q > SAMPLE - 1) q = SAMPLE - 1;
        uint32_t t0 = key_threshold(smp, SAMPLE, (int)q + 1, NULL);
        uint32_t *ck = key + pad16(n);
        int32_t *cid = (int32_t *)(ck + pad16(n));
        int c = 0, i = 0;
#if defined(__AVX512F__)
        __m512i vt = _mm512_set1_epi32((int)t0), iv = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (; i < n; i += 16) {
            __m512i kv = _mm512_loadu_si512(key + i);
            __mmask16 k = _mm512_cmpge_epu32_mask(kv, vt);
            compress_store16((int32_t *)(ck + c), k, kv);
            compress_store16(cid + c, k, _mm512_add_epi32(iv, _mm512_set1_epi32(i)));
            c += __builtin_popcount(k);
        }
#elif SEL_AVX2
        __m256i vt = _mm256_set1_epi32((int)t0), iv = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
        for (; i < n; i += 8) { /* whole vectors: the padding (0) is below t0 */
            __m256i kv = _mm256_loadu_si256((const __m256i *)(key + i));
            unsigned k = (unsigned)_mm256_movemask_ps(_mm256_castsi256_ps(ge_epu32(kv, vt)));
            _mm256_storeu_si256((__m256i *)(ck + c), compress8(kv, k));
            _mm256_storeu_si256((__m256i *)(cid + c), compress8(_mm256_add_epi32(iv, _mm256_set1_epi32(i)), k));
            c += __builtin_popcount(k);
        }
#endif
        for (; i < n; i++)
            if (key[i] >= t0) {
                ck[c] = key[i];
                cid[c++] = i;
            }
        if (c >= m) { /* the top m are among the candidates (every key left out is < t0) */
            for (int j = c; j < pad16(c); j++) ck[j] = 0;
            int gt;
            uint32_t t = key_threshold(ck, c, m, &gt);
            return key_take(ck, cid, c, m, t, gt, out);
        }
    }
    int gt;
    uint32_t t = key_threshold(key, n, m, &gt);
    return key_take(key, NULL, n, m, t, gt, out);
}

int kb_cpu_topk(const float *x, int n, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    if (k == n) {
        for (int i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    top_m_sorted(x, n, k, idx);
    return k;
}

int kb_cpu_topk_pages(const float *ps, int n, int p, int k, int32_t *idx) {
    if (k > n) k = n;
    if (k <= 0) return 0;
    if (k == n) {
        for (int i = 0; i < n; i++) idx[i] = i;
        return n;
    }
    if (p == 1) return kb_cpu_topk(ps, n, k, idx);
    int np = (n + p - 1) / p, last_cnt = n - (np - 1) * p;
    int m = (k + p - 1) / p;
    int32_t *sel = tls_idx(np);
    int bpos;
    for (;;) {
        bpos = top_m_sorted(ps, np, m, sel); /* ascending pages */
        long total = (long)m * p - (sel[m - 1] == np - 1 ? p - last_cnt : 0);
        if (total >= k || m == np) break;
        m++; /* the partial last page made the top-m pages too small */
    }
    int32_t b = sel[bpos]; /* the boundary page: last in the order among the chosen */
    long others = 0;
    for (int i = 0; i < m; i++)
        if (sel[i] != b) others += sel[i] == np - 1 ? last_cnt : p;
    int need = (int)(k - others);
    int c = 0, i = 0;
#if defined(__AVX512F__)
    if (p <= 16) { /* a page's slots P * p + [0, cnt) in one masked store */
        const __m512i iota = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
        for (; i < m; i++) {
            int P = sel[i];
            int cnt = P == b ? need : P == np - 1 ? last_cnt : p;
            _mm512_mask_storeu_epi32(idx + c, (__mmask16)((1u << cnt) - 1), _mm512_add_epi32(iota, _mm512_set1_epi32(P * p)));
            c += cnt;
        }
    }
#endif
    for (; i < m; i++) {
        int P = sel[i];
        int cnt = P == np - 1 ? last_cnt : p;
        if (P == b) cnt = need;
        for (int t = 0; t < cnt; t++) idx[c++] = P * p + t;
    }
    return c;
}

/* ---- gathered attention ---- */

void kb_cpu_attn_gather(const float *q, int G, const kb_kvstream *s, const int32_t *idx, int k,
                        float scale, float *out) {
    /* the valid entries, then the blocked kernel of attn_cpu.c */
    static _Thread_local int32_t *buf;
    static _Thread_local int cap;
    int nv = 0;
    for (int t = 0; t < k; t++) nv += idx[t] >= 0;
    const int32_t *rows = idx;
    if (nv != k) {
        if (nv > cap) {
            free(buf);
            cap = nv + nv / 2;
            buf = KB_MALLOC((size_t)cap * sizeof(int32_t));
        }
        int c = 0;
        for (int t = 0; t < k; t++)
            if (idx[t] >= 0) buf[c++] = idx[t];
        rows = buf;
    }
    kb_cpu_attn_gather_rows(q, G, s, rows, nv, scale, out);
}

/* ---- SnapKV window scores ----
 *
 * Each pass takes up to SK_ROWS (window row, head) pairs: the logits of
 * every key (four dots at a time sharing the key row, each dot as
 * simd_dot), then per row its max, exp and sum, then the rows' weights are
 * added to the output in row order. All three phases run on the pool
 * (chunks of keys, rows, chunks of keys) and give the same values bit for
 * bit as one thread: a dot, a row's sum and an output element's sequence
 * of additions are each computed by one chunk in the same order; the
 * vectorised max equals the sequential one (max is exact; a NaN logit is
 * skipped by both; a -0/+0 difference vanishes in exp). */

#define SK_ROWS 32          /* (window row, head) pairs scored per pass over K */
#define SK_KEYS_CHUNK 1024  /* keys per logits chunk */
#define SK_OUT_CHUNK 4096   /* output elements per accumulation chunk */

typedef struct sk_job {
    const float *qa[SK_ROWS + 3]; /* the pass's query rows (+ padding of the last four) */
    int32_t qrow_pos[SK_ROWS];    /* position of each row's query */
    float inv[SK_ROWS];           /* 1 / the row's sum, 0 when the row sees nothing */
    int nr, n, n_prefix, D, G, r0;
    const kb_kvstream *s;
    float scale, *lg, *rowbuf;
    size_t ld, ldo;
    float *out;
} sk_job;

static void sk_logits(void *ctx, int chunk, int worker) {
    sk_job *jb = ctx;
    float *row = jb->rowbuf + (size_t)worker * jb->D;
    int j0 = chunk * SK_KEYS_CHUNK, j1 = KB_MIN(jb->n, j0 + SK_KEYS_CHUNK);
    for (int j = j0; j < j1; j++) {
        simd_cvt_row(jb->s->dtype, kvstream_krow(jb->s, j), row, jb->D);
        int32_t pj = jb->s->pos[j];
        for (int t = 0; t < jb->nr; t += 4) {
            float d4[4];
            simd_dot4(jb->qa + t, row, jb->D, d4);
            for (int u = 0; u < 4 && t + u < jb->nr; u++)
                jb->lg[(size_t)(t + u) * jb->ld + j] = pj <= jb->qrow_pos[t + u] ? d4[u] * jb->scale : -INFINITY;
        }
    }
}

static float sk_max(const float *x, int n) {
    int j = 0;
    float mx = -INFINITY;
#if defined(__AVX512F__)
    __m512 m = _mm512_set1_ps(-INFINITY);
    for (; j + 16 <= n; j += 16) m = _mm512_max_ps(_mm512_loadu_ps(x + j), m); /* NaN x keeps m */
    mx = _mm512_reduce_max_ps(m);
#endif
    for (; j < n; j++) mx = x[j] > mx ? x[j] : mx;
    return mx;
}

static void sk_softmax_row(void *ctx, int t, int worker) {
    (void)worker;
    sk_job *jb = ctx;
    float *x = jb->lg + (size_t)t * jb->ld, mx = sk_max(x, jb->n);
    jb->inv[t] = 0;
    if (mx == -INFINITY) return; /* the row sees nothing */
    for (int j = 0; j < jb->n; j++) x[j] -= mx; /* -inf stays -inf -> exp 0 */
    exp_uniform(x, jb->n);
    float sum = 0;
    for (int j = 0; j < jb->n; j++) sum += x[j];
    jb->inv[t] = 1.0f / sum;
}

static void sk_accumulate(void *ctx, int chunk, int worker) {
    (void)worker;
    sk_job *jb = ctx;
    int j0 = chunk * SK_OUT_CHUNK, j1 = KB_MIN(jb->n_prefix, j0 + SK_OUT_CHUNK);
    for (int t = 0; t < jb->nr; t++) { /* rows in order: each element's additions as one thread */
        if (jb->inv[t] == 0) continue;
        const float *x = jb->lg + (size_t)t * jb->ld;
        float inv = jb->inv[t], *o = jb->out + (size_t)((jb->r0 + t) % jb->G) * jb->ldo;
        for (int j = j0; j < j1; j++) o[j] += x[j] * inv;
    }
}

void kb_cpu_snapkv_scores(const float *Q, int nq, int ldq, int G, const int32_t *qpos,
                          const kb_kvstream *s, int n, int n_prefix, float scale, float *out,
                          int ldo) {
    int D = s->D, R = nq * G;
    for (int g = 0; g < G; g++) memset(out + (size_t)g * ldo, 0, (size_t)n_prefix * sizeof(float));
    if (n <= 0 || R <= 0) return;
    sk_job jb = {.n = n, .n_prefix = n_prefix, .D = D, .G = G, .s = s, .scale = scale,
                 .ld = (size_t)pad16(n), .ldo = (size_t)ldo, .out = out};
    jb.lg = KB_MALLOC((size_t)SK_ROWS * jb.ld * sizeof(float));
    jb.rowbuf = KB_MALLOC((size_t)KB_POOL_THREADS_MAX * D * sizeof(float));
    for (int r0 = 0; r0 < R; r0 += SK_ROWS) {
        jb.r0 = r0;
        jb.nr = KB_MIN(SK_ROWS, R - r0);
        for (int t = 0; t < jb.nr; t++) {
            int i = (r0 + t) / G, g = (r0 + t) % G;
            jb.qa[t] = Q + (size_t)i * ldq + (size_t)g * D;
            jb.qrow_pos[t] = qpos[i];
        }
        for (int t = jb.nr; t < jb.nr + 3; t++) jb.qa[t] = jb.qa[0];
        kb_pool_run((n + SK_KEYS_CHUNK - 1) / SK_KEYS_CHUNK, sk_logits, &jb);
        kb_pool_run(jb.nr, sk_softmax_row, &jb);
        if (n_prefix > 0) kb_pool_run((n_prefix + SK_OUT_CHUNK - 1) / SK_OUT_CHUNK, sk_accumulate, &jb);
    }
    free(jb.lg);
    free(jb.rowbuf);
}

/* ---- pooling ---- */

void kb_cpu_pool1d(const float *in, int n, int K, int mode, float *out) {
    int h = K / 2;
    if (n <= 0) return;
    if (mode == 1) {
        double sum = 0;
        for (int t = 0; t <= h && t < n; t++) sum += in[t];
        for (int j = 0; j < n; j++) {
            out[j] = (float)(sum / K);
            int add = j + h + 1, drop = j - h;
            if (add < n) sum += in[add];
            if (drop >= 0) sum -= in[drop];
        }
        return;
    }
    /* sliding max: a deque of indices with decreasing values */
    int *dq = KB_MALLOC((size_t)n * sizeof(int));
    int head = 0, tail = 0, next = 0;
    for (int j = 0; j < n; j++) {
        int hi = KB_MIN(n - 1, j + h);
        for (; next <= hi; next++) {
            while (tail > head && in[dq[tail - 1]] <= in[next]) tail--;
            dq[tail++] = next;
        }
        while (dq[head] < j - h) head++;
        out[j] = in[dq[head]];
    }
    free(dq);
}

/* ---- page min/max ---- */

/* Each page touched is recomputed from its first slot's K row (a decode
 * step appends one slot to the last page: it rereads at most p - 1 recent,
 * cached K rows instead of loading the page's D scattered summary elements
 * back), then its D maxima and minima are stored, each a stored K value:
 * exact in t. A page that continues holds the summary of its slots before
 * `from` (page_minmax's contract), which the recomputation passes on the
 * way (old): only the dims whose value changed are stored. Each element
 * stored is a write to a different cache line (dim-major rows), and a new
 * key raises a page's max or lowers its min in few dims once the page has
 * a few slots. */
static inline int f32_differs(float a, float b) {
    uint32_t x, y;
    memcpy(&x, &a, 4);
    memcpy(&y, &b, 4);
    return x != y;
}

static void store_dim_major(kb_dtype t, const float *x, const float *old, int D, void *dst, size_t ld,
                            size_t P) {
    if (t == KB_F32) {
        for (int d = 0; d < D; d++)
            if (!old || f32_differs(x[d], old[d])) ((float *)dst)[(size_t)d * ld + P] = x[d];
        return;
    }
    uint16_t h[256];
    for (int d0 = 0; d0 < D; d0 += 256) {
        int m = D - d0 < 256 ? D - d0 : 256, d = 0;
#if defined(__AVX512F__)
        if (t == KB_F16)
            for (; d + 16 <= m; d += 16)
                _mm256_storeu_si256((__m256i *)(h + d),
                                    _mm512_cvtps_ph(_mm512_loadu_ps(x + d0 + d), _MM_FROUND_TO_NEAREST_INT));
#elif SEL_AVX2
        if (t == KB_F16)
            for (; d + 8 <= m; d += 8)
                _mm_storeu_si128((__m128i *)(h + d), _mm256_cvtps_ph(_mm256_loadu_ps(x + d0 + d), _MM_FROUND_TO_NEAREST_INT));
#endif
        for (; d < m; d++) h[d] = t == KB_F16 ? kb_f32_to_f16(x[d0 + d]) : kb_f32_to_bf16(x[d0 + d]);
        uint16_t *o = (uint16_t *)dst + (size_t)d0 * ld + P;
        for (d = 0; d < m; d++)
            if (!old || f32_differs(x[d0 + d], old[d0 + d])) o[(size_t)d * ld] = h[d];
    }
}

void kb_cpu_page_minmax(const kb_kvstream *s, int from, int to, int p, void *kmax, void *kmin,
                        int ld) {
    int D = s->D;
    kb_dtype t = s->dtype;
    float sbuf[5 * 256]; /* one decode token per call: no allocation for head dims <= 256 */
    float *buf = D <= 256 ? sbuf : KB_MALLOC(5 * (size_t)D * sizeof(float)), *row = buf, *mx = buf + D,
          *mn = buf + 2 * D, *mxo = buf + 3 * D, *mno = buf + 4 * D;
    for (long P = from / p; P * p < to; P++) {
        int j = (int)(P * p), end = (int)KB_MIN((long)to, (P + 1) * p), cont = j < from;
        simd_cvt_row(t, kvstream_krow(s, j), mx, D);
        memcpy(mn, mx, (size_t)D * sizeof(float));
        for (j++; j < end; j++) {
            if (j == from) { /* the stored summary: slots before from */
                memcpy(mxo, mx, (size_t)D * sizeof(float));
                memcpy(mno, mn, (size_t)D * sizeof(float));
            }
            simd_cvt_row(t, kvstream_krow(s, j), row, D);
            int d = 0;
#if defined(__AVX512F__)
            for (; d + 16 <= D; d += 16) { /* max_ps(a, b) = a > b ? a : b, as below */
                __m512 v = _mm512_loadu_ps(row + d);
                _mm512_storeu_ps(mx + d, _mm512_max_ps(v, _mm512_loadu_ps(mx + d)));
                _mm512_storeu_ps(mn + d, _mm512_min_ps(v, _mm512_loadu_ps(mn + d)));
            }
#elif SEL_AVX2
            for (; d + 8 <= D; d += 8) { /* max_ps(a, b) = a > b ? a : b, as below */
                __m256 v = _mm256_loadu_ps(row + d);
                _mm256_storeu_ps(mx + d, _mm256_max_ps(v, _mm256_loadu_ps(mx + d)));
                _mm256_storeu_ps(mn + d, _mm256_min_ps(v, _mm256_loadu_ps(mn + d)));
            }
#endif
            for (; d < D; d++) {
                mx[d] = row[d] > mx[d] ? row[d] : mx[d];
                mn[d] = row[d] < mn[d] ? row[d] : mn[d];
            }
        }
        store_dim_major(t, mx, cont ? mxo : NULL, D, kmax, (size_t)ld, (size_t)P);
        if (kmin != kmax) store_dim_major(t, mn, cont ? mno : NULL, D, kmin, (size_t)ld, (size_t)P);
    }
    if (buf != sbuf) free(buf);
}

/* ---- QUEST page bound ---- */

#if defined(__AVX512F__)
/* 16 elements of dtype t at element offset i of b, as f32. */
static inline __m512 sld16(kb_dtype t, const void *b, size_t i) {
    if (t == KB_F16) return _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)((const uint16_t *)b + i)));
    if (t == KB_BF16)
        return _mm512_castsi512_ps(
            _mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)((const uint16_t *)b + i))), 16));
    return _mm512_loadu_ps((const float *)b + i);
}
#elif SEL_AVX2
/* 8 elements of dtype t at element offset i of b, as f32. */
static inline __m256 sld8(kb_dtype t, const void *b, size_t i) {
    if (t == KB_F16) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)b + i)));
    if (t == KB_BF16)
        return _mm256_castsi256_ps(
            _mm256_slli_epi32(_mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)((const uint16_t *)b + i))), 16));
    return _mm256_loadu_ps((const float *)b + i);
}
#endif

/* Dim-major summaries: 16 pages per vector, dims accumulated in ascending
 * order in every lane (equal pages give equal bounds). Whole vectors are
 * read (rows are padded to 32 pages and zero-filled), stores are masked. */
void kb_cpu_quest_scores(const float *q, int D, const void *kmax, const void *kmin, kb_dtype dt, int ld,
                         int npages, float *out) {
    int P = 0;
#if defined(__AVX512F__)
    for (; P < npages && ld % 32 == 0; P += 16) {
        __mmask16 m = npages - P >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << (npages - P)) - 1);
        __m512 acc = _mm512_setzero_ps();
        for (int d = 0; d < D; d++) {
            __m512 qd = _mm512_set1_ps(q[d]);
            __m512 a = _mm512_mul_ps(qd, sld16(dt, kmax, (size_t)d * ld + P));
            __m512 b = _mm512_mul_ps(qd, sld16(dt, kmin, (size_t)d * ld + P));
            acc = _mm512_add_ps(acc, _mm512_max_ps(a, b));
        }
        _mm512_mask_storeu_ps(out + P, m, acc);
    }
#elif SEL_AVX2
    /* 16 pages per step, each lane as the AVX-512 path's (the same values) */
    for (; P < npages && ld % 32 == 0; P += 16) {
        __m256 acc0 = _mm256_setzero_ps(), acc1 = acc0;
        for (int d = 0; d < D; d++) {
            __m256 qd = _mm256_set1_ps(q[d]);
            size_t o = (size_t)d * ld + P;
            acc0 = _mm256_add_ps(acc0, _mm256_max_ps(_mm256_mul_ps(qd, sld8(dt, kmax, o)), _mm256_mul_ps(qd, sld8(dt, kmin, o))));
            acc1 = _mm256_add_ps(acc1, _mm256_max_ps(_mm256_mul_ps(qd, sld8(dt, kmax, o + 8)), _mm256_mul_ps(qd, sld8(dt, kmin, o + 8))));
        }
        if (P + 16 <= npages) {
            _mm256_storeu_ps(out + P, acc0);
            _mm256_storeu_ps(out + P + 8, acc1);
        } else { /* out holds npages */
            float tmp[16];
            _mm256_storeu_ps(tmp, acc0);
            _mm256_storeu_ps(tmp + 8, acc1);
            memcpy(out + P, tmp, (size_t)(npages - P) * sizeof(float));
        }
    }
#endif
    for (; P < npages; P++) {
        float acc = 0;
        for (int d = 0; d < D; d++) {
            float a = q[d] * kb_elem_get(kmax, dt, (size_t)d * ld + P);
            float b = q[d] * kb_elem_get(kmin, dt, (size_t)d * ld + P);
            acc += a > b ? a : b;
        }
        out[P] = acc;
    }
}

/* Keys of D (<= 256) doubles with key(a) > key(b) iff a > b, equal values
 * equal keys (NaN must have been mapped to -inf); [D, pad8(D)) = 0. */
static int keys_of_double(const double *x, int D, uint64_t *key) {
    int n8 = (D + 7) & ~7, d0 = 0;
#if defined(__AVX512F__)
    /* the same map 8 at a time: -0 -> +0, then u ^ (sign ? ~0 : 1 << 63) */
    for (; d0 + 8 <= D; d0 += 8) {
        __m512d f = _mm512_loadu_pd(x + d0);
        f = _mm512_mask_blend_pd(_mm512_cmp_pd_mask(f, _mm512_setzero_pd(), _CMP_EQ_OQ), f, _mm512_setzero_pd());
        __m512i u = _mm512_castpd_si512(f);
        __m512i flip = _mm512_or_si512(_mm512_srai_epi64(u, 63), _mm512_set1_epi64((long long)(1ull << 63)));
        _mm512_storeu_si512(key + d0, _mm512_xor_si512(u, flip));
    }
#elif SEL_AVX2
    /* the same map 4 at a time (the sign spread by a signed compare) */
    for (; d0 + 4 <= D; d0 += 4) {
        __m256d f = _mm256_loadu_pd(x + d0);
        f = _mm256_blendv_pd(f, _mm256_setzero_pd(), _mm256_cmp_pd(f, _mm256_setzero_pd(), _CMP_EQ_OQ));
        __m256i u = _mm256_castpd_si256(f);
        __m256i flip = _mm256_or_si256(_mm256_cmpgt_epi64(_mm256_setzero_si256(), u),
                                       _mm256_set1_epi64x((long long)(1ull << 63)));
        _mm256_storeu_si256((__m256i *)(key + d0), _mm256_xor_si256(u, flip));
    }
#endif
    for (int d = d0; d < n8; d++) {
        if (d >= D) {
            key[d] = 0;
            continue;
        }
        double f = x[d] == 0 ? 0.0 : x[d];
        uint64_t u;
        memcpy(&u, &f, sizeof u);
        key[d] = (u >> 63) ? ~u : (u | (1ull << 63));
    }
    return n8;
}

static int count_ge64(const uint64_t *key, int n8, uint64_t t) {
    int c = 0;
#if defined(__AVX512F__)
    __m512i vt = _mm512_set1_epi64((long long)t);
    for (int i = 0; i < n8; i += 8)
        c += __builtin_popcount(_mm512_cmpge_epu64_mask(_mm512_loadu_si512(key + i), vt));
#elif SEL_AVX2
    /* key >= t iff not (t > key), compared signed with the sign bits flipped;
     * two counters (n8 is a multiple of 8), half the chain of one */
    const __m256i sign = _mm256_set1_epi64x((long long)(1ull << 63));
    __m256i vt = _mm256_xor_si256(_mm256_set1_epi64x((long long)t), sign), lt = _mm256_setzero_si256(), lt1 = lt;
    for (int i = 0; i < n8; i += 8) {
        lt = _mm256_sub_epi64(lt, _mm256_cmpgt_epi64(vt, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(key + i)), sign)));
        lt1 = _mm256_sub_epi64(lt1, _mm256_cmpgt_epi64(vt, _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(key + i + 4)), sign)));
    }
    lt = _mm256_add_epi64(lt, lt1);
    __m128i h = _mm_add_epi64(_mm256_castsi256_si128(lt), _mm256_extracti128_si256(lt, 1));
    c = n8 - (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1));
#else
    for (int i = 0; i < n8; i++) c += key[i] >= t;
#endif
    return c;
}

/* Top-r of D double keys (higher first, ties to the lower index), ascending
 * output, by the bisection of top_m_sorted over 64-bit keys. Keys must not
 * be NaN (the caller maps NaN to -inf). */
static void topk_small_double(const double *x, int D, int r, int32_t *out) {
    if (r >= D) {
        for (int d = 0; d < D; d++) out[d] = d;
        return;
    }
    uint64_t key[256 + 8] __attribute__((aligned(64)));
    if (D > 256) { /* not a head dim we meet: count each key's rank */
        int c = 0;
        for (int d = 0; d < D && c < r; d++) {
            int rank = 0;
            for (int e = 0; e < D; e++) rank += x[e] > x[d] || (x[e] == x[d] && e < d);
            if (rank < r) out[c++] = d;
        }
        return;
    }
    int n8 = keys_of_double(x, D, key);
    uint64_t mn = UINT64_MAX, mx = 0;
    for (int d = 0; d < D; d++) {
        mn = key[d] < mn ? key[d] : mn;
        mx = key[d] > mx ? key[d] : mx;
    }
    /* count(>= lo) >= r > count(>= hi); mx <= key(+inf) < UINT64_MAX */
    uint64_t lo = mn, hi = mx + 1;
    int c_hi = 0, exact = 0; /* c_hi = count(>= hi) */
    while (hi - lo > 1) {
        uint64_t mid = lo + (hi - lo) / 2;
        int c = count_ge64(key, n8, mid);
        if (c >= r) {
            lo = mid;
            if (c == r) { /* exactly r keys >= lo: take them all */
                exact = 1;
                break;
            }
        } else {
            hi = mid;
            c_hi = c;
        }
    }
    int rem = exact ? r : r - c_hi; /* keys equal to lo to take (hi == lo + 1 unless exact) */
    int c = 0;
#if defined(__AVX512F__) && defined(__BMI2__)
    /* 8 keys at a time, in ascending order: those above lo, and the lowest
     * rem of those equal to it (padding keys are 0 < lo) */
    __m512i vlo = _mm512_set1_epi64((long long)lo);
    __m256i ids = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int d = 0; d < n8; d += 8, ids = _mm256_add_epi32(ids, _mm256_set1_epi32(8))) {
        __m512i k = _mm512_loadu_si512(key + d);
        unsigned gt = _mm512_cmpgt_epu64_mask(k, vlo), eq = _mm512_cmpeq_epu64_mask(k, vlo);
        int ne = __builtin_popcount(eq);
        if (ne > rem) eq = (unsigned)_pdep_u32((1u << rem) - 1, eq); /* the lowest rem */
        rem -= ne < rem ? ne : rem;
        __mmask8 take = (__mmask8)(gt | eq);
        compress_store8(out + c, take, ids);
        c += __builtin_popcount(take);
    }
#else
    /* without branches (which dims win is data: a branch per dim would be
     * mispredicted half the time); a dim not taken is written at out[c] and
     * overwritten, so out needs r + 1 <= D entries (r < D here) */
    for (int d = 0; d < D; d++) {
        int eq = key[d] == lo && rem > 0;
        out[c] = d;
        c += key[d] > lo || eq;
        rem -= eq;
    }
#endif
}

/* ---- hybrid approximate scores ---- */

#if defined(__AVX512F__) || SEL_AVX2
/* The banded page passes' software prefetch (both vector paths, below): a
 * row is sb bytes per step of nst steps, bands are HYB_BAND rows, and the
 * prefetch runs `ahead` steps ahead in band order, about `inflight` lines.
 * hyb_prefetch_start asks for the first band's first steps and returns
 * `ahead`; hyb_prefetch_step, at step st of band [b0, b1), asks for step
 * st + ahead of this band, or past its end for the next band's. */
enum { HYB_BAND = 11 };
static inline void hyb_pf(const char *a, int l2) { /* into L1, or with l2 into L2 only */
    if (l2)
        _mm_prefetch(a, _MM_HINT_T2);
    else
        _mm_prefetch(a, _MM_HINT_T0);
}
static inline int hyb_prefetch_start(const char *const *rowp, int r, int inflight, int nst, size_t sb, int l2) {
    const int ahead = KB_MAX(4, inflight / KB_MIN(HYB_BAND, r));
    for (int t = 0; t < KB_MIN(HYB_BAND, r); t++)
        for (size_t o = 0; o < (size_t)KB_MIN(ahead, nst) * sb; o += 64) hyb_pf(rowp[t] + o, l2);
    return ahead;
}
static inline void hyb_prefetch_step(const char *const *rowp, int r, int b0, int b1, int st, int ahead, int nst,
                                     size_t sb, int l2) {
    int ps = st + ahead, p0 = b0, p1 = b1;
    if (ps >= nst) {
        ps -= nst;
        p0 = b1;
        p1 = KB_MIN(r, b1 + HYB_BAND);
    }
    if (ps < nst)
        for (int t = p0; t < p1; t++)
            for (size_t o = 0; o < sb; o += 64) hyb_pf(rowp[t] + (size_t)ps * sb + o, l2);
}
#endif

#if defined(__AVX512F__)
/* Page scores from dim-major summaries (with p == 1, K itself, one page per
 * slot): for each chosen dim d (ascending), the row of Kmax (group sign +)
 * or Kmin (sign -) is read contiguously, 32 pages per step, and q_g,d times
 * it is added to each head's lane-wise accumulator: only the r rows the
 * definition needs are read, and equal pages give equal scores. The row addresses and the
 * (head, dim) factors are gathered once; G is a compile-time constant in
 * each instance (hyb_pages512 dispatches), so the head loop is unrolled.
 * Rows hold ld >= P0 + 32 zero-filled elements: whole loads.
 *
 * The rows go in bands of HYB_BAND as in the AVX2 path below: band b runs
 * over every page, adding its rows to the partial sums band b - 1 left in
 * sc (masked loads and stores of the real pages: the same FMAs in the same
 * order per lane, so the same bits), the last band takes the running max,
 * and the software prefetch runs `ahead` steps ahead in band order, about
 * hyb_inflight() lines (96; on AMD, below). On the 2-core Xeon (cold summaries,
 * select_cold) this
 * took kb_cpu_hybrid_scores for a RocketKV select at 8K / B = 256 from
 * ~11,000 to ~9,900 TSC cycles (before: all rows at once, each row's next
 * line 64 pages ahead), and 0.37x for 2158 pages of the 8B geometry. With
 * 44 lines in flight (the AVX2 choice) the ratio was 0.92-0.96x, 96
 * 0.89-0.91x, 192 0.95x, 300 1.27x; bands of 6-33 rows were no better than
 * 11 (PERFORMANCE-LOG.md, "The Xeon again"). On AMD's Zen 4 (same harness,
 * both orders; PERFORMANCE-LOG.md, "The selection on Zen 4"), with a full band of rows:
 * 44 lines into L1 (4 steps ahead, the AVX2 path's choice on Zen 3) took a
 * cold select 0.91-0.94x the cycles of 96, and for rows of at most 32 steps
 * (1024 pages) prefetching into L2 only (T2) 12 steps ahead (~132 lines)
 * another ~0.89x (483 and 432 pages); for 2158 pages T2 was 5-10% slower at
 * 4-12 steps, so longer rows keep 44 into L1. Fewer rows than a band
 * (SparQ's two: 48 steps ahead at 96) keep 96, which 44 made 4-5% slower.
 * Prefetches only (the vendor from simd_cpu_amd): the same bits on every
 * machine. Lines ahead for r rows of nst steps; *l2 := into L2 only. */
static int hyb_inflight(int r, int nst, int *l2) {
    *l2 = 0;
    if (r < HYB_BAND || !simd_cpu_amd()) return 96;
    if (nst > 32) return 4 * HYB_BAND;
    *l2 = 1;
    return 12 * HYB_BAND;
}
static inline __attribute__((always_inline)) void hyb_pages_g(const char *const *rowp, const float *qv, int r,
                                                              kb_dtype dt, int np, float *sc, size_t lds,
                                                              float *mx, const int G) {
    const size_t esz = kb_dtype_size(dt);
    __m512 vmx[8];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) vmx[g] = _mm512_set1_ps(-INFINITY);
    const int nst = (np + 31) / 32;       /* steps of 32 pages */
    const size_t sb = (size_t)32 * esz;   /* bytes of a row per step: one or two lines */
    int l2;
    const int inflight = hyb_inflight(r, nst, &l2);
    const int ahead = hyb_prefetch_start(rowp, r, inflight, nst, sb, l2);
    for (int b0 = 0; b0 < r; b0 += HYB_BAND) {
        const int b1 = KB_MIN(r, b0 + HYB_BAND), last = b1 == r;
        for (int st = 0; st < nst; st++) {
            const int P0 = st * 32, nr = np - P0;
            hyb_prefetch_step(rowp, r, b0, b1, st, ahead, nst, sb, l2);
            __mmask16 m0 = nr >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << nr) - 1);
            __mmask16 m1 = nr >= 32 ? (__mmask16)0xffff : nr > 16 ? (__mmask16)((1u << (nr - 16)) - 1) : 0;
            __m512 acc[8][2];
#pragma GCC unroll 8
            for (int g = 0; g < G; g++) {
                if (b0 == 0) {
                    acc[g][0] = acc[g][1] = _mm512_setzero_ps();
                } else {
                    acc[g][0] = _mm512_maskz_loadu_ps(m0, sc + (size_t)g * lds + P0);
                    acc[g][1] = _mm512_maskz_loadu_ps(m1, sc + (size_t)g * lds + P0 + 16);
                }
            }
            for (int t = b0; t < b1; t++) {
                __m512 v0 = sld16(dt, rowp[t], P0), v1 = sld16(dt, rowp[t], (size_t)P0 + 16);
#pragma GCC unroll 8
                for (int g = 0; g < G; g++) {
                    __m512 qd = _mm512_set1_ps(qv[(size_t)t * G + g]);
                    acc[g][0] = _mm512_fmadd_ps(qd, v0, acc[g][0]);
                    acc[g][1] = _mm512_fmadd_ps(qd, v1, acc[g][1]);
                }
            }
#pragma GCC unroll 8
            for (int g = 0; g < G; g++) {
                _mm512_mask_storeu_ps(sc + (size_t)g * lds + P0, m0, acc[g][0]);
                _mm512_mask_storeu_ps(sc + (size_t)g * lds + P0 + 16, m1, acc[g][1]);
                /* the running max of the real pages (last band): max_ps(a, m) =
                 * a > m ? a : m (a NaN score is never taken), lanes past np keep m */
                if (last) {
                    vmx[g] = _mm512_mask_max_ps(vmx[g], m0, acc[g][0], vmx[g]);
                    vmx[g] = _mm512_mask_max_ps(vmx[g], m1, acc[g][1], vmx[g]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) mx[g] = _mm512_reduce_max_ps(vmx[g]);
}

/* G <= 8; mx[g] := the max of head g's np scores (NaN skipped; -inf if none) */
static void hyb_pages512(const float *q, int G, int D, const int32_t *dims, int r, const char *pos,
                         const void *kmax, const void *kmin, kb_dtype dt, int ld, int np, float *sc,
                         size_t lds, float *mx) {
    const size_t esz = kb_dtype_size(dt);
    const char *rowbuf[256], **rowp = r <= 256 ? rowbuf : KB_MALLOC((size_t)r * sizeof *rowp);
    float qbuf[8 * 256], *qv = r <= 256 ? qbuf : KB_MALLOC((size_t)r * G * sizeof *qv);
    for (int t = 0; t < r; t++) {
        int d = dims[t];
        rowp[t] = (const char *)(pos[d] ? kmax : kmin) + (size_t)d * ld * esz;
        for (int g = 0; g < G; g++) qv[(size_t)t * G + g] = q[(size_t)g * D + d];
    }
    switch (G) {
    case 1: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 1); break;
    case 2: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 2); break;
    case 3: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 3); break;
    case 4: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 4); break;
    case 5: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 5); break;
    case 6: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 6); break;
    case 7: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 7); break;
    default: hyb_pages_g(rowp, qv, r, dt, np, sc, lds, mx, 8); break;
    }
    if (rowp != rowbuf) free(rowp);
    if (qv != qbuf) free(qv);
}

#elif SEL_AVX2
/* The page pass of hyb_pages_g with 8-lane vectors: W vectors (8 W pages)
 * per step, G W <= 12 accumulators (of the 16 registers; enough
 * independent FMA chains to hide their latency); each lane adds q_g,d times
 * the row's element over the dims in ascending order with one FMA each, as
 * there, so the scores are the AVX-512 path's. Rows hold ld >= pad32(np)
 * zero-filled elements (ld a multiple of 32, W <= 4): whole loads; sc rows
 * hold pad16(np): whole stores of the vectors that hold a real page.
 *
 * The rows go in bands of HYB_BAND: band b runs over every page, adding its
 * rows to the partial sums that band b - 1 left in sc (the same FMAs in the
 * same order per lane, only with a store and a load between bands, so the
 * same bits), and the last band takes the running max. The summaries come
 * from memory (every other layer's state and the weights pass through the
 * cache between two steps of one layer), and the software prefetch runs
 * `ahead` steps ahead in this band order, into the next band at a band's
 * end: about HYB_INFLIGHT = 44 lines in flight per core. All 33 rows of a
 * RocketKV select at once, each one or two lines ahead (before), asked for
 * 33-66 lines at a time; with cold caches on the AMD EPYC (Zen 3) the bands
 * took the page pass + top-k 6-9% less time at 8K / B = 256 and 2.3-2.7x
 * less for 2726 pages (scripts/microbench/select_cold.c, PERFORMANCE-LOG.md). */
enum { HYB_INFLIGHT = 44 };
static inline __attribute__((always_inline)) void hyb_pages_g8(const char *const *rowp, const float *qv, int r,
                                                               kb_dtype dt, int np, float *sc, size_t lds,
                                                               float *mx, const int G, const int W) {
    const size_t esz = kb_dtype_size(dt);
    const __m256 ninf = _mm256_set1_ps(-INFINITY);
    __m256 vmx[8];
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) vmx[g] = ninf;
    const int step = 8 * W, nst = (np + step - 1) / step; /* pages per step, steps per band */
    const size_t sb = (size_t)step * esz;                  /* bytes of a row per step: 16 B to 2 lines */
    /* steps ahead: ~HYB_INFLIGHT rows x steps (SparQ's 2 rows: 22 steps).
     * With W < 4 (G > 3) a step is half or a quarter of a line: a line is
     * asked for at 2-4 steps in a row and lies 2 or 1 lines ahead; asking
     * once per line and twice as far ahead measured 1.00-1.06x the time
     * (Llama's G 4, D 128, r 60-75), so the simpler form stays */
    const int ahead = hyb_prefetch_start(rowp, r, HYB_INFLIGHT, nst, sb, 0);
    for (int b0 = 0; b0 < r; b0 += HYB_BAND) {
        const int b1 = KB_MIN(r, b0 + HYB_BAND), last = b1 == r;
        for (int st = 0; st < nst; st++) {
            const int P0 = st * step, nr = np - P0;
            hyb_prefetch_step(rowp, r, b0, b1, st, ahead, nst, sb, 0);
            /* vectors past the last real page (w > 0, nr <= 8 w) are
             * neither loaded from sc nor stored: sc rows end at pad16(np) */
            __m256 acc[8][4];
#pragma GCC unroll 8
            for (int g = 0; g < G; g++)
#pragma GCC unroll 4
                for (int w = 0; w < W; w++)
                    acc[g][w] = b0 == 0 || (w > 0 && nr <= 8 * w) ? _mm256_setzero_ps()
                                                                  : _mm256_loadu_ps(sc + (size_t)g * lds + P0 + 8 * w);
            for (int t = b0; t < b1; t++) {
#pragma GCC unroll 4
                for (int w = 0; w < W; w++) {
                    __m256 v = sld8(dt, rowp[t], (size_t)P0 + 8 * w);
#pragma GCC unroll 8
                    for (int g = 0; g < G; g++)
                        acc[g][w] = _mm256_fmadd_ps(_mm256_set1_ps(qv[(size_t)t * G + g]), v, acc[g][w]);
                }
            }
            /* the running max of the real pages (last band): max_ps(a, m) =
             * a > m ? a : m (a NaN score is never taken), lanes past np give -inf */
#pragma GCC unroll 4
            for (int w = 0; w < W; w++) {
                if (w > 0 && nr <= 8 * w) break; /* no real page in this vector or after */
                __m256 mw = _mm256_castsi256_ps(lanes_lt(nr - 8 * w));
#pragma GCC unroll 8
                for (int g = 0; g < G; g++) {
                    _mm256_storeu_ps(sc + (size_t)g * lds + P0 + 8 * w, acc[g][w]);
                    if (last) vmx[g] = _mm256_max_ps(_mm256_blendv_ps(ninf, acc[g][w], mw), vmx[g]);
                }
            }
        }
    }
#pragma GCC unroll 8
    for (int g = 0; g < G; g++) mx[g] = hmax256(vmx[g]);
}

/* G <= 8; mx[g] := the max of head g's np scores (NaN skipped; -inf if none) */
static void hyb_pages256(const float *q, int G, int D, const int32_t *dims, int r, const char *pos,
                         const void *kmax, const void *kmin, kb_dtype dt, int ld, int np, float *sc,
                         size_t lds, float *mx) {
    const size_t esz = kb_dtype_size(dt);
    const char *rowbuf[256], **rowp = r <= 256 ? rowbuf : KB_MALLOC((size_t)r * sizeof *rowp);
    float qbuf[8 * 256], *qv = r <= 256 ? qbuf : KB_MALLOC((size_t)r * G * sizeof *qv);
    for (int t = 0; t < r; t++) {
        int d = dims[t];
        rowp[t] = (const char *)(pos[d] ? kmax : kmin) + (size_t)d * ld * esz;
        for (int g = 0; g < G; g++) qv[(size_t)t * G + g] = q[(size_t)g * D + d];
    }
    switch (G) {
    case 1: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 1, 4); break;
    case 2: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 2, 4); break;
    case 3: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 3, 4); break;
    case 4: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 4, 2); break;
    case 5: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 5, 2); break;
    case 6: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 6, 2); break;
    case 7: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 7, 1); break;
    default: hyb_pages_g8(rowp, qv, r, dt, np, sc, lds, mx, 8, 1); break;
    }
    if (rowp != rowbuf) free(rowp);
    if (qv != qbuf) free(qv);
}

#endif

/* kb_hybrid_temperature of G heads, four at a time: each head's two sums in
 * the same order as there, the heads' chains side by side in registers (a
 * missing head repeats the last one and is not stored). */
static void hybrid_taus(const float *q, int G, int D, const int32_t *dims, int r, float *tau) {
    for (int g0 = 0; g0 < G; g0 += 4) {
        const float *q0 = q + (size_t)g0 * D, *q1 = q + (size_t)KB_MIN(g0 + 1, G - 1) * D,
                    *q2 = q + (size_t)KB_MIN(g0 + 2, G - 1) * D, *q3 = q + (size_t)KB_MIN(g0 + 3, G - 1) * D;
        double s0 = 0, s1 = 0, s2 = 0, s3 = 0, a0 = 0, a1 = 0, a2 = 0, a3 = 0;
        for (int t = 0; t < r; t++) {
            int d = dims[t];
            s0 += fabs((double)q0[d]);
            s1 += fabs((double)q1[d]);
            s2 += fabs((double)q2[d]);
            s3 += fabs((double)q3[d]);
        }
        for (int d = 0; d < D; d++) {
            a0 += fabs((double)q0[d]);
            a1 += fabs((double)q1[d]);
            a2 += fabs((double)q2[d]);
            a3 += fabs((double)q3[d]);
        }
        double sel[4] = {s0, s1, s2, s3}, all[4] = {a0, a1, a2, a3};
        for (int j = 0; j < 4 && g0 + j < G; j++)
            tau[g0 + j] = !(sel[j] > 0) || !(all[j] > 0) ? 1.0f : (float)sqrt((double)D * sel[j] / all[j]);
    }
}

void kb_cpu_hybrid_scores(const float *q, int G, int D, int r, const void *kmax,
                          const void *kmin, int ldk, const kb_kvstream *s, int n, int p,
                          float *page_score, float *head_w, int32_t *dims_out) {
    if (r > D) r = D;
    if (r < 1) r = 1;
    int np = (n + p - 1) / p;
    if (np <= 0) return;
    static _Thread_local void *buf;
    static _Thread_local size_t bcap;
    size_t ld = (size_t)pad16(np);
    size_t need = (size_t)D * (sizeof(double) + sizeof(int32_t) + 1) + (size_t)G * r * sizeof(float) +
                  (size_t)G * ld * sizeof(float) + (size_t)r * sizeof(float) + 256;
    if (need > bcap) {
        free(buf);
        bcap = need + need / 2;
        buf = KB_MALLOC(bcap);
    }
    double *absum = buf;
    float *sc = (float *)(void *)(absum + D); /* [G][ld] */
    float *qr = sc + (size_t)G * ld;          /* [G][r] (scalar path) */
    float *vals = qr + (size_t)G * r;         /* [r] (scalar path) */
    int32_t *dims = (int32_t *)(void *)(vals + r);
    char *pos = (char *)(dims + D);
    /* in double, sums of a few floats are exact: dims are ranked by the
     * exact mean |q| and the sign is the exact sign of the sum, so neither
     * depends on rounding (ties go to the lower dim). The vector path adds
     * the heads in the same order, 8 dims at a time. */
    int d0 = 0;
#if defined(__AVX512F__)
    for (; d0 + 8 <= D; d0 += 8) {
        __m512d a = _mm512_setzero_pd(), sum = _mm512_setzero_pd();
        for (int g = 0; g < G; g++) {
            __m512d v = _mm512_cvtps_pd(_mm256_loadu_ps(q + (size_t)g * D + d0));
            a = _mm512_add_pd(a, _mm512_abs_pd(v));
            sum = _mm512_add_pd(sum, v);
        }
        __mmask8 nan = _mm512_cmp_pd_mask(a, a, _CMP_UNORD_Q), gt = _mm512_cmp_pd_mask(sum, _mm512_setzero_pd(), _CMP_GT_OQ);
        _mm512_storeu_pd(absum + d0, _mm512_mask_blend_pd(nan, a, _mm512_set1_pd(-INFINITY)));
        for (int j = 0; j < 8; j++) pos[d0 + j] = (char)((gt >> j) & 1);
    }
#elif SEL_AVX2
    const __m256d absmask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffffll));
    for (; d0 + 4 <= D; d0 += 4) {
        __m256d a = _mm256_setzero_pd(), sum = _mm256_setzero_pd();
        for (int g = 0; g < G; g++) {
            __m256d v = _mm256_cvtps_pd(_mm_loadu_ps(q + (size_t)g * D + d0));
            a = _mm256_add_pd(a, _mm256_and_pd(v, absmask));
            sum = _mm256_add_pd(sum, v);
        }
        __m256d nan = _mm256_cmp_pd(a, a, _CMP_UNORD_Q);
        int gt = _mm256_movemask_pd(_mm256_cmp_pd(sum, _mm256_setzero_pd(), _CMP_GT_OQ));
        _mm256_storeu_pd(absum + d0, _mm256_blendv_pd(a, _mm256_set1_pd(-INFINITY), nan));
        for (int j = 0; j < 4; j++) pos[d0 + j] = (char)((gt >> j) & 1);
    }
#endif
    for (int d = d0; d < D; d++) {
        double a = 0, sum = 0;
        for (int g = 0; g < G; g++) {
            a += fabs((double)q[(size_t)g * D + d]);
            sum += q[(size_t)g * D + d];
        }
        absum[d] = a == a ? a : -INFINITY; /* NaN ranks last, as in the reference */
        pos[d] = sum > 0;
    }
    topk_small_double(absum, D, r, dims);
    /* the temperatures need only q and the dims: computed before the page
     * scores, their dependency chains overlap the summaries' loads */
    float taus[8];
    if (G <= 8) hybrid_taus(q, G, D, dims, r, taus);
#if defined(__AVX512F__)
    float rawmx[8];
    int have_mx = 0; /* rawmx[g]: the max of head g's raw scores, from the page pass */
    if (G <= 8 && ldk % 32 == 0) { /* p == 1 too: K dim-major */
        hyb_pages512(q, G, D, dims, r, pos, kmax, kmin, s->dtype, ldk, np, sc, ld, rawmx);
        have_mx = 1;
    } else
#elif SEL_AVX2
    float rawmx[8];
    int have_mx = 0; /* as above */
    if (G <= 8 && ldk % 32 == 0) {
        hyb_pages256(q, G, D, dims, r, pos, kmax, kmin, s->dtype, ldk, np, sc, ld, rawmx);
        have_mx = 1;
    } else
#endif
    {
        for (int g = 0; g < G; g++)
            for (int t = 0; t < r; t++) qr[(size_t)g * r + t] = q[(size_t)g * D + dims[t]];
        for (int P = 0; P < np; P++) {
            for (int t = 0; t < r; t++)
                vals[t] = kb_elem_get(pos[dims[t]] ? kmax : kmin, s->dtype, (size_t)dims[t] * ldk + P);
            for (int g = 0; g < G; g++) sc[(size_t)g * ld + P] = simd_dot(qr + (size_t)g * r, vals, r);
        }
    }
    /* softmax over slots, computed per page: page P holds cnt_P equal slots */
    int last_cnt = n - (np - 1) * p;
    float invb[64], *inv = G <= 64 ? invb : KB_MALLOC((size_t)G * sizeof(float));
    for (int g = 0; g < G; g++) {
        float tau = G <= 8 ? taus[g] : kb_hybrid_temperature(q + (size_t)g * D, D, dims, r);
        float *x = sc + (size_t)g * ld, mx = -INFINITY;
        double sum = 0;
        int P = 0;
#if defined(__AVX512F__)
        /* For a positive finite tau, x -> x / tau is monotone (correctly
         * rounded division), so max(x / tau) = max(x) / tau: the max is
         * taken over the raw scores and the division joins the exp pass.
         * Otherwise x is divided in place first. Same values either way. */
        int fused = tau > 0 && tau < INFINITY;
        if (fused && have_mx) { /* the page pass kept the max: the same value */
            mx = rawmx[g];
            P = np;
        } else {
            /* max_ps(v, m) = v > m ? v : m: NaN never taken, as below. Four
             * running maxima (a shorter dependency chain) may settle on
             * another zero's sign than one would; x - mx, and so exp(x - mx),
             * is the same for either zero */
            __m512 vt = _mm512_set1_ps(tau), m0 = _mm512_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
            if (fused)
                for (; P + 64 <= np; P += 64) {
                    m0 = _mm512_max_ps(_mm512_loadu_ps(x + P), m0);
                    m1 = _mm512_max_ps(_mm512_loadu_ps(x + P + 16), m1);
                    m2 = _mm512_max_ps(_mm512_loadu_ps(x + P + 32), m2);
                    m3 = _mm512_max_ps(_mm512_loadu_ps(x + P + 48), m3);
                }
            for (; P + 16 <= np; P += 16) {
                __m512 v = _mm512_loadu_ps(x + P);
                if (!fused) {
                    v = _mm512_div_ps(v, vt);
                    _mm512_storeu_ps(x + P, v);
                }
                m0 = _mm512_max_ps(v, m0);
            }
            mx = _mm512_reduce_max_ps(_mm512_max_ps(_mm512_max_ps(m0, m1), _mm512_max_ps(m2, m3)));
        }
        for (; P < np; P++) {
            float v = fused ? x[P] : (x[P] /= tau);
            mx = v > mx ? v : mx;
        }
        if (fused) mx /= tau;
        /* x (/ tau) - mx, its exp (padding lanes -inf: exp 0) and the double
         * sum of the whole vectors below np - 1 in one pass; the same
         * operations in the same order as the passes of the portable path */
        {
            __m512 vm = _mm512_set1_ps(mx), vt = _mm512_set1_ps(tau);
            __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
            int m = pad16(np);
            for (P = 0; P < m; P += 16) {
                __m512 v = _mm512_loadu_ps(x + P);
                if (fused) v = _mm512_div_ps(v, vt);
                v = _mm512_sub_ps(v, vm);
                if (P + 16 > np)
                    v = _mm512_mask_blend_ps((__mmask16)((1u << (np - P)) - 1), _mm512_set1_ps(-INFINITY), v);
                v = simd_exp512(v);
                _mm512_storeu_ps(x + P, v);
                if (P + 16 <= np - 1) {
                    a0 = _mm512_add_pd(a0, _mm512_cvtps_pd(_mm512_castps512_ps256(v)));
                    a1 = _mm512_add_pd(a1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1))));
                }
            }
            sum = _mm512_reduce_add_pd(_mm512_add_pd(a0, a1));
            P = (np - 1) / 16 * 16;
        }
#elif SEL_AVX2
        /* the AVX-512 path's passes with 8 lanes (the same values but
         * the sum's lane order, below) */
        int fused = tau > 0 && tau < INFINITY;
        if (fused && have_mx) {
            mx = rawmx[g];
            P = np;
        } else {
            __m256 vt = _mm256_set1_ps(tau), m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
            if (fused)
                for (; P + 32 <= np; P += 32) {
                    m0 = _mm256_max_ps(_mm256_loadu_ps(x + P), m0);
                    m1 = _mm256_max_ps(_mm256_loadu_ps(x + P + 8), m1);
                    m2 = _mm256_max_ps(_mm256_loadu_ps(x + P + 16), m2);
                    m3 = _mm256_max_ps(_mm256_loadu_ps(x + P + 24), m3);
                }
            for (; P + 8 <= np; P += 8) {
                __m256 v = _mm256_loadu_ps(x + P);
                if (!fused) {
                    v = _mm256_div_ps(v, vt);
                    _mm256_storeu_ps(x + P, v);
                }
                m0 = _mm256_max_ps(v, m0);
            }
            mx = hmax256(_mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3)));
        }
        for (; P < np; P++) {
            float v = fused ? x[P] : (x[P] /= tau);
            mx = v > mx ? v : mx;
        }
        if (fused) mx /= tau;
        {
            __m256 vm = _mm256_set1_ps(mx), vt = _mm256_set1_ps(tau);
            int m = pad8(np);
            for (P = 0; P < m; P += 8) {
                __m256 v = _mm256_loadu_ps(x + P);
                if (fused) v = _mm256_div_ps(v, vt);
                v = _mm256_sub_ps(v, vm);
                if (P + 8 > np) v = _mm256_blendv_ps(_mm256_set1_ps(-INFINITY), v, _mm256_castsi256_ps(lanes_lt(np - P)));
                _mm256_storeu_ps(x + P, simd_exp256(v));
            }
            /* then the double sum of the whole vectors below np - 1 in
             * eight lanes (two of 4), added up as (l0+l4 + l1+l5) +
             * (l2+l6 + l3+l7), as the AVX-512 path sums in its lanes: no
             * dependency chain through every page (a sequential sum was
             * ~0.5 us of a ~6 us select here). A pass of its own, over x
             * in L1: inside the exp loop, whose ~60-cycle chains keep the
             * out-of-order window full, its conversions and adds cost ~0.95K
             * TSC cycles for 3 x 483 pages in a standalone copy on Zen 3,
             * here ~0.4K (the same adds in the same order; PERFORMANCE-LOG.md,
             * "Zen 3 again") */
            __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
            for (P = 0; P + 8 <= np - 1; P += 8) {
                __m256 v = _mm256_loadu_ps(x + P);
                a0 = _mm256_add_pd(a0, _mm256_cvtps_pd(_mm256_castps256_ps128(v)));
                a1 = _mm256_add_pd(a1, _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1)));
            }
            __m256d t = _mm256_add_pd(a0, a1);
            __m128d lo = _mm256_castpd256_pd128(t), hi = _mm256_extractf128_pd(t, 1);
            sum = (_mm_cvtsd_f64(lo) + _mm_cvtsd_f64(_mm_unpackhi_pd(lo, lo))) +
                  (_mm_cvtsd_f64(hi) + _mm_cvtsd_f64(_mm_unpackhi_pd(hi, hi)));
            P = (np - 1) / 8 * 8;
        }
#else
        for (; P < np; P++) {
            x[P] /= tau;
            mx = x[P] > mx ? x[P] : mx;
        }
        for (P = 0; P < np; P++) x[P] -= mx;
        exp_uniform(x, np);
        P = 0;
#endif
        /* every page but the last holds p slots: sum = p * sum(x[<last]) + cnt * x[last] */
        for (; P < np - 1; P++) sum += x[P];
        sum = sum * p + (double)x[np - 1] * last_cnt;
        inv[g] = (float)(1.0 / sum);
    }
    /* weights w = x * inv per head; the page score is their mean over the
     * group, summed from 0 in head order (one pass for all heads) */
    float invG = 1.0f / G;
    int P = 0;
#if defined(__AVX512F__)
    for (__m512 vg = _mm512_set1_ps(invG); P + 16 <= np; P += 16) {
        __m512 acc = _mm512_setzero_ps();
        for (int g = 0; g < G; g++) {
            __m512 w = _mm512_mul_ps(_mm512_loadu_ps(sc + (size_t)g * ld + P), _mm512_set1_ps(inv[g]));
            if (head_w) _mm512_storeu_ps(head_w + (size_t)g * np + P, w);
            acc = _mm512_add_ps(acc, w);
        }
        _mm512_storeu_ps(page_score + P, _mm512_mul_ps(acc, vg));
    }
#elif SEL_AVX2
    for (__m256 vg = _mm256_set1_ps(invG); P + 8 <= np; P += 8) {
        __m256 acc = _mm256_setzero_ps();
        for (int g = 0; g < G; g++) {
            __m256 w = _mm256_mul_ps(_mm256_loadu_ps(sc + (size_t)g * ld + P), _mm256_set1_ps(inv[g]));
            if (head_w) _mm256_storeu_ps(head_w + (size_t)g * np + P, w);
            acc = _mm256_add_ps(acc, w);
        }
        _mm256_storeu_ps(page_score + P, _mm256_mul_ps(acc, vg));
    }
#endif
    for (; P < np; P++) {
        float acc = 0;
        for (int g = 0; g < G; g++) {
            float w = sc[(size_t)g * ld + P] * inv[g];
            if (head_w) head_w[(size_t)g * np + P] = w;
            acc += w;
        }
        page_score[P] = acc * invG;
    }
    if (inv != invb) free(inv);
    if (dims_out) memcpy(dims_out, dims, (size_t)r * sizeof(int32_t));
}
