/* kvstream.h - one stream of cached keys and values.
 *
 * A stream holds the K and V rows of one KV head (or, for per-query-head
 * methods such as the original SnapKV, one query head's private copy) in
 * cache-slot order, plus the original sequence position of every slot. Keys
 * are stored after RoPE at their original positions and are never re-rotated.
 * Slots are chronological unless a method documents otherwise. */
#ifndef KB_KVSTREAM_H
#define KB_KVSTREAM_H

#include "kernels/kb_base.h"

typedef struct kb_kvstream {
    kb_dtype dtype; /* element type of K and V (f16 default, f32, bf16) */
    int D;          /* head dim */
    int n;          /* slots in use */
    int cap;        /* slots allocated */
    void *K;        /* [cap][D] keys, post-RoPE */
    void *V;        /* [cap][D] values (in K's allocation, from the first 64-byte
                       boundary after K's cap rows: free K only) */
    int32_t *pos;   /* [cap] original sequence position of each slot */
} kb_kvstream;

void kvstream_init(kb_kvstream *s, kb_dtype t, int D, int cap);
void kvstream_free(kb_kvstream *s);
/* Grows capacity to at least cap (amortised doubling); never shrinks. */
void kvstream_reserve(kb_kvstream *s, int cap);
/* Appends one slot, converting f32 k[D], v[D] to the stream's dtype. */
void kvstream_append_f32(kb_kvstream *s, const float *k, const float *v, int32_t pos);
/* Appends src's slots idx[0..n-1] (in that order) to dst; same dtype and D. */
void kvstream_append_rows(kb_kvstream *dst, const kb_kvstream *src, const int32_t *idx, int n);
/* Appends src's slots [from, from + n). */
void kvstream_append_range(kb_kvstream *dst, const kb_kvstream *src, int from, int n);
/* Replaces dst's contents by a copy of src. */
void kvstream_copy(kb_kvstream *dst, const kb_kvstream *src);
/* Drops slots from n onwards (n <= s->n). */
void kvstream_truncate(kb_kvstream *s, int n);

static inline const void *kvstream_krow(const kb_kvstream *s, int i) {
    return (const char *)s->K + (size_t)i * (size_t)s->D * kb_dtype_size(s->dtype);
}
static inline const void *kvstream_vrow(const kb_kvstream *s, int i) {
    return (const char *)s->V + (size_t)i * (size_t)s->D * kb_dtype_size(s->dtype);
}
/* Bytes of K+V held by the n slots in use (positions not counted). */
static inline size_t kvstream_bytes(const kb_kvstream *s) {
    return 2 * (size_t)s->n * (size_t)s->D * kb_dtype_size(s->dtype);
}
/* Reads slot i as f32 (reference paths and tests). */
void kvstream_get_f32(const kb_kvstream *s, int i, float *k, float *v);

#endif
