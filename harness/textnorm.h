/* textnorm.h - Unicode text handling for the metrics: code-point strings and
 * the exact behaviour of the Python string operations the reference scorers
 * use (str.lower/upper/split/strip, re's \w \d \s \b), so that kvbench's
 * scores agree with LongBench / RULER / SCBench on any UTF-8 input.
 *
 * Text is decoded from UTF-8 into 32-bit code points. Ill-formed UTF-8 is
 * decoded as Python's bytes.decode("utf-8", "replace") does it (one U+FFFD per
 * maximal ill-formed subpart). Character classes and case mappings come from
 * harness/unicode_tables.c, generated from Python's Unicode database by
 * scripts/gen_unicode_tables.py. */
#ifndef KB_TEXTNORM_H
#define KB_TEXTNORM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A growable code-point string. v[0..n) are code points; not NUL-terminated. */
typedef struct ustr {
    uint32_t *v;
    size_t n, cap;
} ustr;

/* A slice [off, off+len) of some code-point string. */
typedef struct uspan {
    size_t off, len;
} uspan;

void ustr_free(ustr *s);
void ustr_clear(ustr *s);
void ustr_push(ustr *s, uint32_t c);
void ustr_append(ustr *s, const uint32_t *v, size_t n);
/* Replaces s with the decoding of len bytes of UTF-8. */
void ustr_from_utf8n(ustr *s, const char *text, size_t len);
void ustr_from_utf8(ustr *s, const char *text);
/* Malloc'ed NUL-terminated UTF-8 encoding of v[0..n). */
char *utf8_from_u32(const uint32_t *v, size_t n);

/* ---- character classes (Python semantics) ---- */
int uni_isspace(uint32_t c);        /* str.isspace() / re \s */
int uni_isword(uint32_t c);         /* str.isalnum() or '_' / re \w */
int uni_decimal(uint32_t c);        /* value 0..9 if str.isdecimal() (re \d), else -1 */
int uni_iscased(uint32_t c);
int uni_iscase_ignorable(uint32_t c);
int ascii_ispunct(uint32_t c);      /* c in Python's string.punctuation */

/* ---- case mapping ---- */
/* out = str.lower(v) (full mappings, Greek final sigma in context). */
void ustr_lower(ustr *out, const uint32_t *v, size_t n);
/* out = str.upper(v) (full mappings, e.g. U+00DF -> "SS"). */
void ustr_upper(ustr *out, const uint32_t *v, size_t n);

/* ---- searching and splitting ---- */
/* Index of the first occurrence of needle in hay at or after `from`, or
 * (size_t)-1. An empty needle is found at `from` (Python's `in` semantics). */
size_t ustr_find(const uint32_t *hay, size_t hn, const uint32_t *needle, size_t nn,
                 size_t from);
static inline int ustr_contains(const uint32_t *hay, size_t hn, const uint32_t *needle,
                                size_t nn) {
    return ustr_find(hay, hn, needle, nn, 0) != (size_t)-1;
}
static inline int ustr_eq(const uint32_t *a, size_t an, const uint32_t *b, size_t bn) {
    return an == bn && (an == 0 || memcmp(a, b, an * sizeof *a) == 0);
}
/* str.strip(): [*b, *e) is v without leading/trailing whitespace. */
void ustr_strip(const uint32_t *v, size_t n, size_t *b, size_t *e);
/* str.split() with no argument: runs of non-whitespace. Returns the count;
 * *out is malloc'ed (NULL when 0). */
size_t ustr_split_ws(const uint32_t *v, size_t n, uspan **out);

/* ---- answer normalisation shared by the QA metrics ---- */
/* LongBench/SQuAD normalize_answer: lowercase, delete ASCII punctuation,
 * replace the whole words a/an/the by a space, collapse whitespace to single
 * spaces (leading/trailing removed). */
void normalize_answer(ustr *out, const uint32_t *v, size_t n);
/* normalize_zh_answer: lowercase, delete ASCII and CJK punctuation (the
 * reference's list), delete all whitespace. */
void normalize_zh_answer(ustr *out, const uint32_t *v, size_t n);

#endif
