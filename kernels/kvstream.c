/* kvstream.c - growable K/V slot storage (see kvstream.h). */
#include "kernels/kvstream.h"

#include <stdlib.h>

void kvstream_init(kb_kvstream *s, kb_dtype t, int D, int cap) {
    memset(s, 0, sizeof *s);
    s->dtype = t;
    s->D = D;
    if (cap > 0) kvstream_reserve(s, cap);
}

/* K's part of the block of cap rows (V follows it: the block is twice this). */
static size_t kbytes_of(const kb_kvstream *s, int cap) {
    return ((size_t)cap * s->D * kb_dtype_size(s->dtype) + 63) & ~(size_t)63;
}

void kvstream_free(kb_kvstream *s) {
    kb_unmap(s->K, 2 * kbytes_of(s, s->cap)); /* V lives in the same block */
    free(s->pos);
    s->K = s->V = NULL;
    s->pos = NULL;
    s->n = s->cap = 0;
}

void kvstream_reserve(kb_kvstream *s, int cap) {
    if (cap <= s->cap) return;
    /* the first reservation is exact (a cache sized for its prompt and decode
     * holds no unused rows: a 2 MiB page is resident as a whole once touched,
     * so a power of two above L + N put up to twice the cache in peak RSS);
     * growth then doubles */
    int nc = KB_MAX(cap, 16);
    if (s->cap) {
        nc = s->cap;
        while (nc < cap) nc = nc > (1 << 29) ? cap : nc * 2;
    }
    size_t row = (size_t)s->D * kb_dtype_size(s->dtype);
    /* K and V in one block, V from the first 64-byte boundary after K: one
     * allocation of twice the size reaches the huge-page size (kb_amalloc)
     * at half the context (SmolLM2's f16 streams at 8K: 2 x 1 MiB) */
    size_t kbytes = kbytes_of(s, nc);
    /* its own mapping (kb_map): a freed stream leaves peak RSS at once */
    char *K = KB_MAP(2 * kbytes);
    char *V = K + kbytes;
    if (s->n) {
        memcpy(K, s->K, (size_t)s->n * row);
        memcpy(V, s->V, (size_t)s->n * row);
    }
    kb_unmap(s->K, 2 * kbytes_of(s, s->cap));
    s->K = K;
    s->V = V;
    s->pos = KB_REALLOC(s->pos, (size_t)nc * sizeof(int32_t));
    s->cap = nc;
}

void kvstream_append_f32(kb_kvstream *s, const float *k, const float *v, int32_t pos) {
    kvstream_reserve(s, s->n + 1);
    size_t row = (size_t)s->D * kb_dtype_size(s->dtype);
    kb_convert_from_f32(s->dtype, k, (char *)s->K + (size_t)s->n * row, (size_t)s->D);
    kb_convert_from_f32(s->dtype, v, (char *)s->V + (size_t)s->n * row, (size_t)s->D);
    s->pos[s->n++] = pos;
}

void kvstream_append_rows(kb_kvstream *dst, const kb_kvstream *src, const int32_t *idx, int n) {
    kvstream_reserve(dst, dst->n + n);
    size_t row = (size_t)dst->D * kb_dtype_size(dst->dtype);
    for (int i = 0; i < n; i++) {
        memcpy((char *)dst->K + (size_t)dst->n * row, kvstream_krow(src, idx[i]), row);
        memcpy((char *)dst->V + (size_t)dst->n * row, kvstream_vrow(src, idx[i]), row);
        dst->pos[dst->n++] = src->pos[idx[i]];
    }
}

void kvstream_append_range(kb_kvstream *dst, const kb_kvstream *src, int from, int n) {
    kvstream_reserve(dst, dst->n + n);
    size_t row = (size_t)dst->D * kb_dtype_size(dst->dtype);
    memcpy((char *)dst->K + (size_t)dst->n * row, kvstream_krow(src, from), (size_t)n * row);
    memcpy((char *)dst->V + (size_t)dst->n * row, kvstream_vrow(src, from), (size_t)n * row);
    memcpy(dst->pos + dst->n, src->pos + from, (size_t)n * sizeof(int32_t));
    dst->n += n;
}

void kvstream_copy(kb_kvstream *dst, const kb_kvstream *src) {
    dst->n = 0;
    kvstream_append_range(dst, src, 0, src->n);
}

void kvstream_truncate(kb_kvstream *s, int n) {
    if (n < s->n) s->n = n;
}

void kvstream_get_f32(const kb_kvstream *s, int i, float *k, float *v) {
    if (k) kb_convert_to_f32(s->dtype, kvstream_krow(s, i), k, (size_t)s->D);
    if (v) kb_convert_to_f32(s->dtype, kvstream_vrow(s, i), v, (size_t)s->D);
}
