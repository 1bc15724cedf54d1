/* bpe.c - byte-level BPE ("gpt2" tokenizer model): the pre-tokenizer regex
 * lists chosen by tokenizer.ggml.pre, written as hand-made matchers over code
 * points (no regex library), GPT-2's bytes_to_unicode, and merging by rank
 * with a binary heap.
 *
 * Regex semantics are those of HF tokenizers (Oniguruma) and Python's `regex`
 * module: \p{L} / \p{N} / \p{P} are the major general categories, \s is the
 * White_Space property (unicode.h). Each regex of a list splits every piece
 * the previous one left, keeping both the matches and the text between them
 * as pieces (HF's Split with behavior "isolated"); a regex never sees beyond
 * its piece, so a lookahead at the end of a piece sees end-of-text. */
#include <stdlib.h>
#include <string.h>

#include "harness/engine/tok_internal.h"
#include "harness/engine/unicode.h"

void bpe_bytes_to_unicode(uint32_t map[256]) {
    /* The 188 printable bytes map to themselves; the other 68 map to
     * U+0100, U+0101, ... in byte order (so ' ' -> U+0120 'Ġ'). */
    uint32_t next = 256;
    for (int b = 0; b < 256; b++) {
        int printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
        map[b] = printable ? (uint32_t)b : next++;
    }
}

/* ---- pre-tokenizer names ---- */

static const struct {
    const char *name;
    int pre;
    int ignore_merges;
} pre_names[] = {
    {"default", PRE_DEFAULT, 0},
    {"gpt2", PRE_GPT2, 0},
    {"gpt-2", PRE_GPT2, 0},
    {"smollm", PRE_SMOLLM, 0},
    {"starcoder", PRE_SMOLLM, 0},
    {"refact", PRE_SMOLLM, 0},
    {"command-r", PRE_SMOLLM, 0},
    {"codeshell", PRE_SMOLLM, 0},
    {"exaone", PRE_SMOLLM, 0},
    {"minerva", PRE_SMOLLM, 0},
    {"minerva-7b", PRE_SMOLLM, 0},
    {"llama3", PRE_LLAMA3, 1},
    {"llama-v3", PRE_LLAMA3, 1},
    {"llama-bpe", PRE_LLAMA3, 1},
};

int bpe_pre_parse(const char *name, int *pre, int *ignore_merges) {
    for (size_t i = 0; i < sizeof pre_names / sizeof pre_names[0]; i++)
        if (!strcmp(name, pre_names[i].name)) {
            *pre = pre_names[i].pre;
            *ignore_merges = pre_names[i].ignore_merges;
            return 0;
        }
    return 1;
}

const char *bpe_pre_known(void) {
    return "default, gpt2, gpt-2, smollm, starcoder, refact, command-r, codeshell, exaone, "
           "minerva, minerva-7b, llama3, llama-v3, llama-bpe";
}

/* ---- code point classes ---- */

enum {
    F_L = 1,        /* \p{L} */
    F_N = 2,        /* \p{N} */
    F_WS = 4,       /* \s */
    F_DEFP = 8,     /* [\p{P}$+<=>^~|] (the "default" list's first regex) */
    F_DIGIT = 16,   /* [0-9] */
    F_CRLF = 32,    /* \r or \n */
};

typedef struct ucp {
    uint32_t cp;  /* code point, or UNICODE_INVALID for a stray byte */
    uint32_t off; /* byte offset in the text */
    uint8_t fl;   /* F_* */
} ucp;

static uint8_t cp_flags(uint32_t cp) {
    uint8_t fl = 0;
    if (cp < 0x80) {
        if ((cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z')) return F_L;
        if (cp >= '0' && cp <= '9') return F_N | F_DIGIT;
        if (cp == ' ' || (cp >= 0x09 && cp <= 0x0D)) return F_WS | ((cp == '\r' || cp == '\n') ? F_CRLF : 0);
        if (strchr("$+<=>^~|", (int)cp) && cp) return F_DEFP;
        if (unicode_category(cp) == UCAT_P) return F_DEFP;
        return 0;
    }
    if (cp == UNICODE_INVALID) return 0;
    int cat = unicode_category(cp);
    if (cat == UCAT_L) fl |= F_L;
    if (cat == UCAT_N) fl |= F_N;
    if (cat == UCAT_P) fl |= F_DEFP;
    if (unicode_is_whitespace(cp)) fl |= F_WS;
    return fl;
}

/* "other": [^\s\p{L}\p{N}] */
static inline int is_other(uint8_t fl) { return !(fl & (F_L | F_N | F_WS)); }

static size_t run(const ucp *u, size_t i, size_t end, uint8_t flag) {
    size_t j = i;
    while (j < end && (u[j].fl & flag)) j++;
    return j - i;
}

static size_t run_other(const ucp *u, size_t i, size_t end) {
    size_t j = i;
    while (j < end && is_other(u[j].fl)) j++;
    return j - i;
}

/* A matcher returns the length in code points of the match starting at i
 * (never beyond end), or 0 when the regex does not match at i. */
typedef size_t (*pre_matcher)(const ucp *u, size_t i, size_t end);

/* \p{N} */
static size_t m_one_digit(const ucp *u, size_t i, size_t end) {
    (void)end;
    return (u[i].fl & F_N) ? 1 : 0;
}

/* \p{N}+ */
static size_t m_digits(const ucp *u, size_t i, size_t end) { return run(u, i, end, F_N); }

/* [0-9][0-9][0-9] */
static size_t m_ascii3(const ucp *u, size_t i, size_t end) {
    return (i + 3 <= end && (u[i].fl & F_DIGIT) && (u[i + 1].fl & F_DIGIT) && (u[i + 2].fl & F_DIGIT))
               ? 3
               : 0;
}

/* [\p{P}\$\+<=>\^~\|]+ */
static size_t m_defpunct(const ucp *u, size_t i, size_t end) { return run(u, i, end, F_DEFP); }

/* Whitespace tail shared by both big patterns: \s+(?!\S)|\s+ . A run that
 * reaches the end is taken whole; otherwise its last character is left to
 * prefix the next word, unless the run is a single character (then \s+). */
static size_t ws_tail(const ucp *u, size_t i, size_t end) {
    size_t r = run(u, i, end, F_WS);
    if (!r) return 0;
    if (i + r == end) return r;
    return r >= 2 ? r - 1 : r;
}

/* GPT-2:
 * 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
static size_t m_gpt2(const ucp *u, size_t i, size_t end) {
    uint32_t c = u[i].cp;
    if (c == '\'' && i + 1 < end) {
        uint32_t a = u[i + 1].cp;
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (i + 2 < end) {
            uint32_t b = u[i + 2].cp;
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
        }
    }
    size_t sp = (c == ' ' && i + 1 < end) ? 1 : 0; /* the optional leading space */
    uint8_t f0 = u[i].fl, f1 = sp ? u[i + 1].fl : 0;
    if (sp && (f1 & F_L)) return 1 + run(u, i + 1, end, F_L);
    if (f0 & F_L) return run(u, i, end, F_L);
    if (sp && (f1 & F_N)) return 1 + run(u, i + 1, end, F_N);
    if (f0 & F_N) return run(u, i, end, F_N);
    if (sp && is_other(f1)) return 1 + run_other(u, i + 1, end);
    if (is_other(f0)) return run_other(u, i, end);
    return ws_tail(u, i, end);
}

/* Case folding for Llama-3's (?i:...) contractions: ASCII letters, and
 * U+017F LATIN SMALL LETTER LONG S which folds to 's' (the only non-ASCII
 * simple folding onto the letters s, t, r, e, v, m, l, d). */
static uint32_t fold(uint32_t c) {
    if (c >= 'A' && c <= 'Z') return c + 32;
    if (c == 0x017F) return 's';
    return c;
}

/* Llama-3:
 * (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+ */
static size_t m_llama3(const ucp *u, size_t i, size_t end) {
    uint32_t c = u[i].cp;
    uint8_t f0 = u[i].fl;
    if (c == '\'' && i + 1 < end) {
        uint32_t a = fold(u[i + 1].cp);
        if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
        if (i + 2 < end) {
            uint32_t b = fold(u[i + 2].cp);
            if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
        }
    }
    if (!(f0 & (F_CRLF | F_L | F_N)) && i + 1 < end && (u[i + 1].fl & F_L))
        return 1 + run(u, i + 1, end, F_L);
    if (f0 & F_L) return run(u, i, end, F_L);
    if (f0 & F_N) {
        size_t r = run(u, i, end, F_N);
        return r < 3 ? r : 3;
    }
    {
        size_t j = i;
        if (c == ' ' && i + 1 < end && is_other(u[i + 1].fl)) j = i + 1;
        if (is_other(u[j].fl)) {
            j += run_other(u, j, end);
            j += run(u, j, end, F_CRLF);
            return j - i;
        }
    }
    if (f0 & F_WS) {
        size_t r = run(u, i, end, F_WS);
        for (size_t p = i + r; p > i; p--)
            if (u[p - 1].fl & F_CRLF) return p - i; /* \s*[\r\n]+ ends at the last newline */
        return ws_tail(u, i, end);
    }
    return 0;
}

static const pre_matcher list_default[] = {m_defpunct, m_gpt2, m_digits, m_ascii3, NULL};
static const pre_matcher list_gpt2[] = {m_gpt2, NULL};
static const pre_matcher list_smollm[] = {m_one_digit, m_gpt2, NULL};
static const pre_matcher list_llama3[] = {m_llama3, NULL};

static const pre_matcher *pre_list(int pre) {
    switch (pre) {
    case PRE_GPT2: return list_gpt2;
    case PRE_SMOLLM: return list_smollm;
    case PRE_LLAMA3: return list_llama3;
    default: return list_default;
    }
}

/* Piece boundaries as code point indexes: piece k is [b[k], b[k+1]) when
 * pieces are contiguous; here each piece is a (start, end) pair. */
typedef struct span_vec {
    size_t *v; /* pairs */
    size_t n, cap;
} span_vec;

static void span_push(span_vec *s, size_t a, size_t b) {
    if (s->n + 2 > s->cap) {
        s->cap = s->cap ? s->cap * 2 : 64;
        s->v = KB_REALLOC(s->v, s->cap * sizeof *s->v);
    }
    s->v[s->n++] = a;
    s->v[s->n++] = b;
}

static ucp *decode_cps(const char *s, size_t len, size_t *n_out) {
    ucp *u = KB_MALLOC((len + 1) * sizeof *u);
    size_t n = 0, off = 0;
    while (off < len) {
        size_t k;
        uint32_t cp = utf8_decode(s + off, len - off, &k);
        u[n].cp = cp;
        u[n].off = (uint32_t)off;
        u[n].fl = cp_flags(cp);
        n++;
        off += k;
    }
    u[n].cp = 0;
    u[n].off = (uint32_t)len;
    u[n].fl = 0;
    *n_out = n;
    return u;
}

/* Runs the regex list over s and returns the pieces as code point spans. */
static void pretokenize_spans(int pre, const ucp *u, size_t n, span_vec *out) {
    span_vec a = {0}, b = {0};
    span_push(&a, 0, n);
    for (const pre_matcher *m = pre_list(pre); *m; m++) {
        b.n = 0;
        for (size_t k = 0; k < a.n; k += 2) {
            size_t lo = a.v[k], hi = a.v[k + 1], i = lo, gap = lo;
            while (i < hi) {
                size_t len = (*m)(u, i, hi);
                if (!len) {
                    i++;
                    continue;
                }
                if (gap < i) span_push(&b, gap, i);
                span_push(&b, i, i + len);
                i += len;
                gap = i;
            }
            if (gap < hi) span_push(&b, gap, hi);
        }
        span_vec t = a;
        a = b;
        b = t;
    }
    free(b.v);
    *out = a;
}

void bpe_pretokenize(int pre, const char *s, size_t len, size_t **bounds, int *n) {
    size_t ncp;
    ucp *u = decode_cps(s, len, &ncp);
    span_vec sp;
    pretokenize_spans(pre, u, ncp, &sp);
    size_t np = sp.n / 2;
    size_t *bd = KB_MALLOC((np + 1) * sizeof *bd);
    for (size_t k = 0; k < np; k++) bd[k] = u[sp.v[2 * k]].off;
    bd[np] = len;
    *bounds = bd;
    *n = (int)np;
    free(sp.v);
    free(u);
}

/* ---- merges ---- */

static inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

static const tok_merge *merge_find(const kb_tokenizer *t, int32_t a, int32_t b) {
    if (!t->merges || a < 0 || b < 0) return NULL;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (uint64_t h = mix64(key) & t->merge_mask;; h = (h + 1) & t->merge_mask) {
        const tok_merge *m = &t->merges[h];
        if (m->key == key) return m;
        if (m->key == UINT64_MAX) return NULL;
    }
}

int bpe_build_merges(kb_tokenizer *t, const tok_spec *s, kb_err *err) {
    uint64_t cap = 16;
    while (cap < (uint64_t)s->n_merges * 2) cap <<= 1;
    t->merges = KB_MALLOC(cap * sizeof *t->merges);
    for (uint64_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
    t->merge_mask = cap - 1;
    t->n_merges = 0;
    int32_t skipped = 0;
    char *buf = NULL;
    size_t buf_cap = 0;
    for (int32_t r = 0; r < s->n_merges; r++) {
        const char *m = s->merges[r];
        uint32_t len = s->merge_lens[r];
        /* "A B": split at the first space after the first byte (A is never
         * empty; a space inside a token is written as U+0120). */
        const char *sp = len > 1 ? memchr(m + 1, ' ', len - 1) : NULL;
        if (!sp) {
            free(buf);
            return kb_fail(err, KB_EINPUT,
                           "%s: tokenizer.ggml.merges[%d] = '%.*s': expected two tokens separated "
                           "by a space",
                           s->where, r, (int)(len > 80 ? 80 : len), m);
        }
        size_t la = (size_t)(sp - m), lb = len - la - 1;
        int32_t a = tok_lookup(t, m, la), b = tok_lookup(t, sp + 1, lb);
        if (la + lb > buf_cap) {
            buf_cap = (la + lb) * 2;
            buf = KB_REALLOC(buf, buf_cap);
        }
        memcpy(buf, m, la);
        memcpy(buf + la, sp + 1, lb);
        int32_t ab = tok_lookup(t, buf, la + lb);
        if (a < 0 || b < 0 || ab < 0) {
            /* Such a merge can never fire on token ids (HF refuses these
             * files; llama.cpp keeps them but they only matter for texts the
             * vocabulary cannot represent). */
            skipped++;
            continue;
        }
        uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
        uint64_t h = mix64(key) & t->merge_mask;
        while (t->merges[h].key != UINT64_MAX && t->merges[h].key != key) h = (h + 1) & t->merge_mask;
        if (t->merges[h].key == key) continue; /* duplicate pair: the first (lowest) rank wins */
        t->merges[h].key = key;
        t->merges[h].rank = r;
        t->merges[h].result = ab;
        t->n_merges++;
    }
    free(buf);
    if (skipped)
        fprintf(stderr,
                "kvbench: warning: %s: %d of %d tokenizer.ggml.merges name tokens that are not in "
                "the vocabulary; ignored\n",
                s->where, skipped, s->n_merges);
    return 0;
}

/* ---- merging one piece ---- */

typedef struct bpe_sym {
    int32_t id;   /* current token id; -2 = absorbed into its left neighbour */
    int32_t prev; /* index of the previous live symbol, -1 at the start */
    int32_t next; /* index of the next live symbol, -1 at the end */
} bpe_sym;

typedef struct bpe_cand {
    uint64_t key;  /* rank << 32 | left index: the heap pops the smallest */
    int32_t a, b;  /* the ids the pair had when pushed (stale entries are skipped) */
} bpe_cand;

typedef struct bpe_work {
    bpe_sym *sym;
    size_t sym_cap;
    bpe_cand *heap;
    size_t heap_n, heap_cap;
    char *mapped; /* bytes_to_unicode form of a piece (ignore_merges lookup) */
    size_t mapped_cap;
} bpe_work;

static void heap_push(bpe_work *w, bpe_cand c) {
    if (w->heap_n == w->heap_cap) {
        w->heap_cap = w->heap_cap ? w->heap_cap * 2 : 64;
        w->heap = KB_REALLOC(w->heap, w->heap_cap * sizeof *w->heap);
    }
    size_t i = w->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (w->heap[p].key <= c.key) break;
        w->heap[i] = w->heap[p];
        i = p;
    }
    w->heap[i] = c;
}

static bpe_cand heap_pop(bpe_work *w) {
    bpe_cand top = w->heap[0], last = w->heap[--w->heap_n];
    size_t i = 0, n = w->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        uint64_t mk = last.key;
        if (l < n && w->heap[l].key < mk) m = l, mk = w->heap[l].key;
        if (r < n && w->heap[r].key < mk) m = r;
        if (m == i) break;
        w->heap[i] = w->heap[m];
        i = m;
    }
    if (n) w->heap[i] = last;
    return top;
}

static void try_pair(const kb_tokenizer *t, bpe_work *w, int32_t l, int32_t r) {
    if (l < 0 || r < 0) return;
    const tok_merge *m = merge_find(t, w->sym[l].id, w->sym[r].id);
    if (!m) return;
    bpe_cand c = {(uint64_t)(uint32_t)m->rank << 32 | (uint32_t)l, w->sym[l].id, w->sym[r].id};
    heap_push(w, c);
}

static void bpe_piece(const kb_tokenizer *t, bpe_work *w, const uint8_t *s, size_t n,
                      const uint32_t *map, tok_ids *out) {
    if (!n) return;
    if (t->ignore_merges) {
        if (w->mapped_cap < n * 2) {
            w->mapped_cap = n * 2;
            w->mapped = KB_REALLOC(w->mapped, w->mapped_cap);
        }
        size_t m = 0;
        for (size_t k = 0; k < n; k++) m += (size_t)utf8_encode(map[s[k]], w->mapped + m);
        int32_t id = tok_lookup(t, w->mapped, m);
        if (id >= 0) {
            tok_ids_push(out, id);
            return;
        }
    }
    if (w->sym_cap < n) {
        w->sym_cap = n * 2;
        w->sym = KB_REALLOC(w->sym, w->sym_cap * sizeof *w->sym);
    }
    /* A byte whose character is not in the vocabulary (SmolLM2 lacks a few
     * control bytes such as 0x04, and bytes never seen in UTF-8 such as
     * 0xC0) is dropped, and its neighbours may merge: HF tokenizers does
     * this (llama.cpp drops it too, but lets it block merging). */
    size_t ns = 0;
    for (size_t k = 0; k < n; k++) {
        int32_t id = t->byte_tok[s[k]];
        if (id < 0) continue;
        w->sym[ns].id = id;
        w->sym[ns].prev = (int32_t)ns - 1;
        w->sym[ns].next = (int32_t)ns + 1;
        ns++;
    }
    if (!ns) return;
    w->sym[ns - 1].next = -1;
    w->heap_n = 0;
    for (size_t k = 0; k + 1 < ns; k++) try_pair(t, w, (int32_t)k, (int32_t)k + 1);
    while (w->heap_n) {
        bpe_cand c = heap_pop(w);
        int32_t l = (int32_t)(c.key & 0xffffffffu);
        bpe_sym *L = &w->sym[l];
        if (L->id != c.a || L->next < 0 || w->sym[L->next].id != c.b) continue; /* stale */
        int32_t r = L->next;
        const tok_merge *m = merge_find(t, c.a, c.b);
        L->id = m->result;
        L->next = w->sym[r].next;
        if (L->next >= 0) w->sym[L->next].prev = l;
        w->sym[r].id = -2;
        try_pair(t, w, L->prev, l);
        try_pair(t, w, l, L->next);
    }
    for (int32_t k = 0; k >= 0; k = w->sym[k].next) tok_ids_push(out, w->sym[k].id);
}

void bpe_encode(const kb_tokenizer *t, const char *s, size_t len, tok_ids *out) {
    if (!len) return;
    uint32_t map[256];
    bpe_bytes_to_unicode(map);
    size_t ncp;
    ucp *u = decode_cps(s, len, &ncp);
    span_vec sp;
    pretokenize_spans(t->pre, u, ncp, &sp);
    bpe_work w = {0};
    for (size_t k = 0; k < sp.n; k += 2) {
        size_t o0 = u[sp.v[k]].off, o1 = u[sp.v[k + 1]].off;
        bpe_piece(t, &w, (const uint8_t *)s + o0, o1 - o0, map, out);
    }
    free(w.sym);
    free(w.heap);
    free(w.mapped);
    free(sp.v);
    free(u);
}
