/* spm.c - SentencePiece BPE ("llama" tokenizer model: Llama-2, Mistral,
 * LongChat). Spaces become U+2581 (and one is prepended at the start of a
 * fragment when add_space_prefix); the text starts as one symbol per UTF-8
 * character; the adjacent pair whose concatenation is a vocabulary token
 * with the highest score is merged first (leftmost on ties), until no pair
 * is a token. Symbols that are not tokens are written as byte-fallback
 * tokens <0xXX> (or UNK when those are missing).
 *
 * Only normal, user-defined and undefined tokens can be formed by merging:
 * control, unknown, unused and byte tokens never come out of plain text
 * (SentencePiece's behaviour; llama.cpp would also merge into them). */
#include <stdlib.h>
#include <string.h>

#include "harness/engine/tok_internal.h"
#include "harness/engine/unicode.h"

typedef struct spm_sym {
    uint32_t off, len; /* bytes of the escaped text; len 0 = absorbed */
    int32_t prev, next;
} spm_sym;

typedef struct spm_cand {
    float score;
    int32_t left, right;
    uint32_t len; /* bytes of the pair when pushed (stale entries differ) */
} spm_cand;

typedef struct spm_heap {
    spm_cand *v;
    size_t n, cap;
} spm_heap;

/* a before b: higher score, then the leftmost pair. */
static inline int cand_before(const spm_cand *a, const spm_cand *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

static void heap_push(spm_heap *h, spm_cand c) {
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 64;
        h->v = KB_REALLOC(h->v, h->cap * sizeof *h->v);
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_before(&c, &h->v[p])) break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = c;
}

static spm_cand heap_pop(spm_heap *h) {
    spm_cand top = h->v[0], last = h->v[--h->n];
    size_t i = 0, n = h->n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const spm_cand *mv = &last;
        if (l < n && cand_before(&h->v[l], mv)) m = l, mv = &h->v[l];
        if (r < n && cand_before(&h->v[r], mv)) m = r;
        if (m == i) break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (n) h->v[i] = last;
    return top;
}

static int mergeable(const kb_tokenizer *t, int32_t id) {
    uint8_t ty = t->type[id];
    return ty == TT_NORMAL || ty == TT_USER || ty == TT_UNDEFINED;
}

static void try_pair(const kb_tokenizer *t, const char *x, const spm_sym *sym, spm_heap *h,
                     int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    uint32_t len = sym[l].len + sym[r].len;
    int32_t id = tok_lookup(t, x + sym[l].off, len);
    if (id < 0 || !mergeable(t, id)) return;
    spm_cand c = {t->score[id], l, r, len};
    heap_push(h, c);
}

void spm_encode(const kb_tokenizer *t, const char *s, size_t len, int space_prefix, tok_ids *out) {
    if (!len) return;
    /* Escape: optional leading U+2581, every ' ' -> U+2581 (3 bytes). */
    size_t cap = 3 + len * 3, n = 0;
    char *x = KB_MALLOC(cap);
    if (space_prefix) {
        memcpy(x, "\xe2\x96\x81", 3);
        n = 3;
    }
    for (size_t i = 0; i < len; i++) {
        if (s[i] == ' ') {
            memcpy(x + n, "\xe2\x96\x81", 3);
            n += 3;
        } else {
            x[n++] = s[i];
        }
    }
    spm_sym *sym = KB_MALLOC(n * sizeof *sym);
    int32_t ns = 0;
    for (size_t off = 0; off < n;) {
        size_t k;
        (void)utf8_decode(x + off, n - off, &k);
        sym[ns].off = (uint32_t)off;
        sym[ns].len = (uint32_t)k;
        sym[ns].prev = ns - 1;
        sym[ns].next = off + k < n ? ns + 1 : -1;
        ns++;
        off += k;
    }
    spm_heap h = {0};
    for (int32_t i = 0; i + 1 < ns; i++) try_pair(t, x, sym, &h, i, i + 1);
    while (h.n) {
        spm_cand c = heap_pop(&h);
        spm_sym *L = &sym[c.left], *R = &sym[c.right];
        if (!L->len || !R->len || L->next != c.right || L->len + R->len != c.len) continue;
        L->len += R->len;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) sym[R->next].prev = c.left;
        try_pair(t, x, sym, &h, L->prev, c.left);
        try_pair(t, x, sym, &h, c.left, L->next);
    }
    for (int32_t i = 0; i >= 0; i = sym[i].next) {
        int32_t id = tok_lookup(t, x + sym[i].off, sym[i].len);
        if (id >= 0 && mergeable(t, id)) {
            tok_ids_push(out, id);
            continue;
        }
        /* Byte fallback; without byte tokens the whole symbol is one UNK
         * (SentencePiece without byte_fallback). */
        int have_bytes = 1;
        for (uint32_t k = 0; k < sym[i].len; k++)
            if (t->byte_tok[(uint8_t)x[sym[i].off + k]] < 0) have_bytes = 0;
        if (!have_bytes) {
            if (t->unk >= 0) tok_ids_push(out, t->unk);
            continue;
        }
        for (uint32_t k = 0; k < sym[i].len; k++)
            tok_ids_push(out, t->byte_tok[(uint8_t)x[sym[i].off + k]]);
    }
    free(h.v);
    free(sym);
    free(x);
}
