/* textnorm.c - code-point strings with Python's string semantics (textnorm.h). */
#include "harness/textnorm.h"

#include <stdlib.h>

#include "harness/engine/unicode.h"
#include "kernels/kb_base.h"

/* Tables from harness/unicode_tables.c (generated). Ranges are sorted and
 * disjoint; maps are sorted by source code point. */
extern const uint32_t uni_space_ranges[][2];
extern const int uni_space_ranges_n;
extern const uint32_t uni_word_ranges[][2];
extern const int uni_word_ranges_n;
extern const uint32_t uni_decimal_ranges[][3];
extern const int uni_decimal_ranges_n;
extern const uint32_t uni_cased_ranges[][2];
extern const int uni_cased_ranges_n;
extern const uint32_t uni_case_ignorable_ranges[][2];
extern const int uni_case_ignorable_ranges_n;
extern const uint32_t uni_lower_map[][4];
extern const int uni_lower_map_n;
extern const uint32_t uni_upper_map[][4];
extern const int uni_upper_map_n;

/* ---------------------------------------------------------------- ustr */

void ustr_free(ustr *s) {
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

void ustr_clear(ustr *s) { s->n = 0; }

static void ustr_reserve(ustr *s, size_t extra) {
    if (s->n + extra <= s->cap) return;
    size_t cap = s->cap ? s->cap : 16;
    while (cap < s->n + extra) cap *= 2;
    s->v = KB_REALLOC(s->v, cap * sizeof *s->v);
    s->cap = cap;
}

void ustr_push(ustr *s, uint32_t c) {
    ustr_reserve(s, 1);
    s->v[s->n++] = c;
}

void ustr_append(ustr *s, const uint32_t *v, size_t n) {
    if (!n) return;
    ustr_reserve(s, n);
    memcpy(s->v + s->n, v, n * sizeof *v);
    s->n += n;
}

/* UTF-8 decoding with the "maximal subpart" replacement rule (Unicode 3.9,
 * as CPython's decoder): a lead byte followed by valid continuation bytes
 * that end early becomes a single U+FFFD, and decoding resumes at the byte
 * that broke the sequence. */
void ustr_from_utf8n(ustr *s, const char *text, size_t len) {
    s->n = 0;
    ustr_reserve(s, len + 1);
    for (size_t i = 0, k; i < len; i += k) s->v[s->n++] = utf8_decode_lossy(text + i, len - i, &k);
}

void ustr_from_utf8(ustr *s, const char *text) { ustr_from_utf8n(s, text, strlen(text)); }

char *utf8_from_u32(const uint32_t *v, size_t n) {
    char *out = KB_MALLOC(n * 4 + 1);
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = v[i];
        if (c < 0x80) {
            out[o++] = (char)c;
        } else if (c < 0x800) {
            out[o++] = (char)(0xC0 | (c >> 6));
            out[o++] = (char)(0x80 | (c & 0x3F));
        } else if (c < 0x10000) {
            out[o++] = (char)(0xE0 | (c >> 12));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (c & 0x3F));
        } else {
            out[o++] = (char)(0xF0 | (c >> 18));
            out[o++] = (char)(0x80 | ((c >> 12) & 0x3F));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3F));
            out[o++] = (char)(0x80 | (c & 0x3F));
        }
    }
    out[o] = 0;
    return out;
}

/* ---------------------------------------------------------------- classes */

static int in_ranges(const uint32_t (*r)[2], int n, uint32_t c) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < r[mid][0])
            hi = mid - 1;
        else if (c > r[mid][1])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

int uni_isspace(uint32_t c) {
    if (c < 0x80) return c == ' ' || (c >= 9 && c <= 13) || (c >= 0x1C && c <= 0x1F);
    return in_ranges(uni_space_ranges, uni_space_ranges_n, c);
}

int uni_isword(uint32_t c) {
    if (c < 0x80)
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
               c == '_';
    return in_ranges(uni_word_ranges, uni_word_ranges_n, c);
}

int uni_decimal(uint32_t c) {
    if (c < 0x80) return c >= '0' && c <= '9' ? (int)(c - '0') : -1;
    int lo = 0, hi = uni_decimal_ranges_n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < uni_decimal_ranges[mid][0])
            hi = mid - 1;
        else if (c > uni_decimal_ranges[mid][1])
            lo = mid + 1;
        else
            return (int)(uni_decimal_ranges[mid][2] + (c - uni_decimal_ranges[mid][0]));
    }
    return -1;
}

int uni_iscased(uint32_t c) { return in_ranges(uni_cased_ranges, uni_cased_ranges_n, c); }

int uni_iscase_ignorable(uint32_t c) {
    return in_ranges(uni_case_ignorable_ranges, uni_case_ignorable_ranges_n, c);
}

int ascii_ispunct(uint32_t c) {
    return (c >= 33 && c <= 47) || (c >= 58 && c <= 64) || (c >= 91 && c <= 96) ||
           (c >= 123 && c <= 126);
}

/* ---------------------------------------------------------------- case */

static const uint32_t *map_find(const uint32_t (*m)[4], int n, uint32_t c) {
    int lo = 0, hi = n - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < m[mid][0])
            hi = mid - 1;
        else if (c > m[mid][0])
            lo = mid + 1;
        else
            return m[mid] + 1;
    }
    return NULL;
}

static void push_mapped(ustr *out, const uint32_t (*m)[4], int n, uint32_t c) {
    const uint32_t *t = map_find(m, n, c);
    if (!t) {
        ustr_push(out, c);
        return;
    }
    for (int k = 0; k < 3 && t[k]; k++) ustr_push(out, t[k]);
}

/* Capital sigma lowercases to final sigma when a cased letter precedes it and
 * none follows (case-ignorable characters skipped on both sides). */
static uint32_t lower_sigma(const uint32_t *v, size_t n, size_t i) {
    size_t j = i;
    uint32_t c = 0;
    int found = 0;
    while (j > 0) {
        c = v[--j];
        if (!uni_iscase_ignorable(c)) {
            found = 1;
            break;
        }
    }
    int final = found && uni_iscased(c);
    if (final && i + 1 < n) {
        size_t k;
        for (k = i + 1; k < n; k++) {
            c = v[k];
            if (!uni_iscase_ignorable(c)) break;
        }
        final = k == n || !uni_iscased(c);
    }
    return final ? 0x3C2 : 0x3C3;
}

void ustr_lower(ustr *out, const uint32_t *v, size_t n) {
    out->n = 0;
    ustr_reserve(out, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t c = v[i];
        if (c < 0x80) {
            ustr_push(out, c >= 'A' && c <= 'Z' ? c + 32 : c);
        } else if (c == 0x3A3) {
            ustr_push(out, lower_sigma(v, n, i));
        } else {
            push_mapped(out, uni_lower_map, uni_lower_map_n, c);
        }
    }
}

void ustr_upper(ustr *out, const uint32_t *v, size_t n) {
    out->n = 0;
    ustr_reserve(out, n);
    for (size_t i = 0; i < n; i++) {
        uint32_t c = v[i];
        if (c < 0x80)
            ustr_push(out, c >= 'a' && c <= 'z' ? c - 32 : c);
        else
            push_mapped(out, uni_upper_map, uni_upper_map_n, c);
    }
}

/* ---------------------------------------------------------------- search */

size_t ustr_find(const uint32_t *hay, size_t hn, const uint32_t *needle, size_t nn,
                 size_t from) {
    if (from > hn) return (size_t)-1;
    if (nn == 0) return from;
    if (nn > hn - from) return (size_t)-1;
    for (size_t i = from; i + nn <= hn; i++) {
        if (hay[i] != needle[0]) continue;
        size_t k = 1;
        while (k < nn && hay[i + k] == needle[k]) k++;
        if (k == nn) return i;
    }
    return (size_t)-1;
}

void ustr_strip(const uint32_t *v, size_t n, size_t *b, size_t *e) {
    size_t i = 0, j = n;
    while (i < j && uni_isspace(v[i])) i++;
    while (j > i && uni_isspace(v[j - 1])) j--;
    *b = i;
    *e = j;
}

size_t ustr_split_ws(const uint32_t *v, size_t n, uspan **out) {
    size_t cnt = 0, cap = 0;
    uspan *sp = NULL;
    size_t i = 0;
    while (i < n) {
        while (i < n && uni_isspace(v[i])) i++;
        if (i >= n) break;
        size_t s = i;
        while (i < n && !uni_isspace(v[i])) i++;
        if (cnt == cap) {
            cap = cap ? cap * 2 : 16;
            sp = KB_REALLOC(sp, cap * sizeof *sp);
        }
        sp[cnt].off = s;
        sp[cnt].len = i - s;
        cnt++;
    }
    *out = sp;
    return cnt;
}

/* ---------------------------------------------------------------- normalise */

static int is_article(const uint32_t *w, size_t n) {
    if (n == 1) return w[0] == 'a';
    if (n == 2) return w[0] == 'a' && w[1] == 'n';
    if (n == 3) return w[0] == 't' && w[1] == 'h' && w[2] == 'e';
    return 0;
}

/* Collapse whitespace runs into single spaces, dropping leading/trailing
 * ones: " ".join(text.split()). */
static void white_space_fix(ustr *out, const uint32_t *v, size_t n) {
    out->n = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && uni_isspace(v[i])) i++;
        if (i >= n) break;
        if (out->n) ustr_push(out, ' ');
        while (i < n && !uni_isspace(v[i])) ustr_push(out, v[i++]);
    }
}

void normalize_answer(ustr *out, const uint32_t *v, size_t n) {
    ustr low = {0}, tmp = {0};
    ustr_lower(&low, v, n);
    /* delete ASCII punctuation */
    for (size_t i = 0; i < low.n; i++)
        if (!ascii_ispunct(low.v[i])) ustr_push(&tmp, low.v[i]);
    /* \b(a|an|the)\b -> " ": a maximal run of word characters that is exactly
     * one of the articles is replaced by one space. */
    low.n = 0;
    size_t i = 0;
    while (i < tmp.n) {
        if (!uni_isword(tmp.v[i])) {
            ustr_push(&low, tmp.v[i++]);
            continue;
        }
        size_t s = i;
        while (i < tmp.n && uni_isword(tmp.v[i])) i++;
        if (is_article(tmp.v + s, i - s))
            ustr_push(&low, ' ');
        else
            ustr_append(&low, tmp.v + s, i - s);
    }
    white_space_fix(out, low.v, low.n);
    ustr_free(&low);
    ustr_free(&tmp);
}

/* The CJK punctuation of the reference's normalize_zh_answer (its list, which
 * has U+300B but not U+300A), sorted. ASCII punctuation is handled apart. */
static const uint32_t zh_punct[] = {
    0x2013, 0x2014, 0x2018, 0x2019, 0x201B, 0x201C, 0x201D, 0x201E, 0x201F, 0x2026,
    0x2027, 0x3001, 0x3002, 0x3003, 0x300B, 0x300C, 0x300D, 0x300E, 0x300F, 0x3010,
    0x3011, 0x3014, 0x3015, 0x3016, 0x3017, 0x3018, 0x3019, 0x301A, 0x301B, 0x301C,
    0x301D, 0x301E, 0x301F, 0x3030, 0x303E, 0x303F, 0xFE4F, 0xFF01, 0xFF02, 0xFF03,
    0xFF04, 0xFF05, 0xFF06, 0xFF07, 0xFF08, 0xFF09, 0xFF0A, 0xFF0B, 0xFF0C, 0xFF0D,
    0xFF0F, 0xFF1A, 0xFF1B, 0xFF1C, 0xFF1D, 0xFF1E, 0xFF1F, 0xFF20, 0xFF3B, 0xFF3C,
    0xFF3D, 0xFF3E, 0xFF3F, 0xFF40, 0xFF5B, 0xFF5C, 0xFF5D, 0xFF5E, 0xFF5F, 0xFF60,
    0xFF61, 0xFF62, 0xFF63, 0xFF64,
};

static int is_zh_punct(uint32_t c) {
    if (c < 0x80) return ascii_ispunct(c);
    int lo = 0, hi = (int)KB_ARRAY_LEN(zh_punct) - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2;
        if (c < zh_punct[mid])
            hi = mid - 1;
        else if (c > zh_punct[mid])
            lo = mid + 1;
        else
            return 1;
    }
    return 0;
}

void normalize_zh_answer(ustr *out, const uint32_t *v, size_t n) {
    ustr low = {0};
    ustr_lower(&low, v, n);
    out->n = 0;
    for (size_t i = 0; i < low.n; i++)
        if (!is_zh_punct(low.v[i]) && !uni_isspace(low.v[i])) ustr_push(out, low.v[i]);
    ustr_free(&low);
}
