/* unicode.c - UTF-8 coding and category lookups over the generated tables. */
#include "harness/engine/unicode.h"

#include <string.h>

uint32_t utf8_decode(const char *s, size_t len, size_t *n) {
    const uint8_t *u = (const uint8_t *)s;
    *n = 1;
    uint8_t b0 = u[0];
    if (b0 < 0x80) return b0;
    int need;
    uint32_t cp, min;
    if ((b0 & 0xE0) == 0xC0) {
        need = 1, cp = b0 & 0x1F, min = 0x80;
    } else if ((b0 & 0xF0) == 0xE0) {
        need = 2, cp = b0 & 0x0F, min = 0x800;
    } else if ((b0 & 0xF8) == 0xF0) {
        need = 3, cp = b0 & 0x07, min = 0x10000;
    } else {
        return UNICODE_INVALID;
    }
    if ((size_t)need >= len) return UNICODE_INVALID;
    for (int i = 1; i <= need; i++) {
        if ((u[i] & 0xC0) != 0x80) return UNICODE_INVALID;
        cp = (cp << 6) | (u[i] & 0x3F);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return UNICODE_INVALID;
    *n = (size_t)need + 1;
    return cp;
}

int utf8_encode(uint32_t cp, char *out) {
    uint8_t *o = (uint8_t *)out;
    if (cp < 0x80) {
        o[0] = (uint8_t)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (uint8_t)(0xC0 | (cp >> 6));
        o[1] = (uint8_t)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp >= 0xD800 && cp <= 0xDFFF) return 0;
    if (cp < 0x10000) {
        o[0] = (uint8_t)(0xE0 | (cp >> 12));
        o[1] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (uint8_t)(0x80 | (cp & 0x3F));
        return 3;
    }
    if (cp <= 0x10FFFF) {
        o[0] = (uint8_t)(0xF0 | (cp >> 18));
        o[1] = (uint8_t)(0x80 | ((cp >> 12) & 0x3F));
        o[2] = (uint8_t)(0x80 | ((cp >> 6) & 0x3F));
        o[3] = (uint8_t)(0x80 | (cp & 0x3F));
        return 4;
    }
    return 0;
}

int unicode_category(uint32_t cp) {
    size_t lo = 0, hi = unicode_n_ranges;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < unicode_ranges[mid].lo)
            hi = mid;
        else if (cp > unicode_ranges[mid].hi)
            lo = mid + 1;
        else
            return unicode_ranges[mid].cat;
    }
    return UCAT_C;
}

int unicode_is_whitespace(uint32_t cp) {
    if (cp < 0x80) return cp == ' ' || (cp >= 0x09 && cp <= 0x0D);
    for (size_t i = 0; i < unicode_n_whitespace; i++)
        if (unicode_whitespace[i] == cp) return 1;
    return 0;
}

uint32_t utf8_decode_lossy(const char *s, size_t len, size_t *n) {
    const unsigned char *u = (const unsigned char *)s;
    unsigned c = u[0];
    *n = 1;
    if (c < 0x80) return c;
    int need;
    unsigned lo = 0x80, hi = 0xBF; /* the second byte's range: no overlong, surrogate, > U+10FFFF */
    uint32_t cp;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 1, cp = c & 0x1F;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 2, cp = c & 0x0F;
        lo = c == 0xE0 ? 0xA0 : lo;
        hi = c == 0xED ? 0x9F : hi;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3, cp = c & 0x07;
        lo = c == 0xF0 ? 0x90 : lo;
        hi = c == 0xF4 ? 0x8F : hi;
    } else {
        return 0xFFFD;
    }
    for (int k = 1; k <= need; k++) {
        unsigned b = (size_t)k < len ? u[k] : 0;
        if ((size_t)k >= len || b < (k == 1 ? lo : 0x80) || b > (k == 1 ? hi : 0xBF)) {
            *n = (size_t)k; /* the lead byte and the continuation bytes it took */
            return 0xFFFD;
        }
        cp = (cp << 6) | (b & 0x3F);
    }
    *n = (size_t)need + 1;
    return cp;
}

size_t utf8_lossy(const char *s, size_t n, char *out) {
    size_t o = 0;
    for (size_t i = 0, k; i < n; i += k) o += (size_t)utf8_encode(utf8_decode_lossy(s + i, n - i, &k), out + o);
    out[o] = 0;
    return o;
}
