/* json.c - cJSON helpers with errors naming file, line and key (json.h). */
#include "harness/json.h"

#include "harness/atomic.h"
#include "harness/engine/unicode.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

int file_read_all(const char *path, char **out, size_t *len, kb_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return kb_fail(err, KB_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, n = 0;
    char *buf = KB_MALLOC(cap);
    for (;;) {
        if (n + 1 >= cap) buf = KB_REALLOC(buf, cap *= 2);
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (r == 0) break;
    }
    int bad = ferror(f), e = errno;
    fclose(f);
    if (bad) {
        free(buf);
        return kb_fail(err, KB_EINPUT, "%s: cannot read: %s", path, strerror(e));
    }
    buf[n] = 0;
    *out = buf;
    if (len) *len = n;
    return 0;
}

static void line_col(const char *text, const char *at, long *line, long *col) {
    *line = 1;
    *col = 1;
    for (const char *p = text; p < at && *p; p++) {
        if (*p == '\n') {
            (*line)++;
            *col = 1;
        } else {
            (*col)++;
        }
    }
}

/* The first byte of s[0..n) that does not start a valid UTF-8 sequence, or
 * NULL: JSON text is UTF-8 (RFC 8259), and so must be the text files kvbench
 * reads: a string with other bytes would reach the tables and run.json, which
 * Python's csv and json then cannot read. */
static const char *utf8_bad(const char *s, size_t n) {
    for (size_t i = 0, k; i < n; i += k)
        if ((unsigned char)s[i] < 0x80) k = 1;
        else if (utf8_decode(s + i, n - i, &k) == UNICODE_INVALID) return s + i;
    return NULL;
}

/* Text of a file or JSON document: no NUL byte (a C string would end there
 * unseen) and UTF-8 only; the error names where ("NAME: byte N is NUL" or
 * "NAME:LINE:COL: byte 0xXX is not valid UTF-8"), then "expected <what>". */
static int text_check(const char *s, size_t n, const char *name, const char *what, kb_err *err) {
    const char *nul = memchr(s, 0, n), *bad;
    if (nul)
        return kb_fail(err, KB_EINPUT, "%s: byte %zu is NUL, expected %s", name, (size_t)(nul - s), what);
    if ((bad = utf8_bad(s, n))) {
        long line, col;
        line_col(s, bad, &line, &col);
        return kb_fail(err, KB_EINPUT, "%s:%ld:%ld: byte 0x%02x is not valid UTF-8, expected %s", name,
                       line, col, (unsigned char)*bad, what);
    }
    return 0;
}

int text_check_arg(const char *s, const char *opt, kb_err *err) {
    const char *bad = utf8_bad(s, strlen(s)); /* an argument holds no NUL */
    if (bad)
        return kb_fail(err, KB_EINPUT, "%s: byte %zu (0x%02x) is not valid UTF-8, expected UTF-8 text", opt,
                       (size_t)(bad - s), (unsigned char)*bad);
    return 0;
}

int file_read_text(const char *path, char **out, size_t *len, kb_err *err) {
    size_t n;
    int rc = file_read_all(path, out, &n, err);
    if (rc) return rc;
    rc = text_check(*out, n, path, "UTF-8 text (a Latin-1 file, say: convert it with iconv -f latin1 -t utf-8)",
                    err);
    if (rc) {
        free(*out);
        *out = NULL;
        return rc;
    }
    if (len) *len = n;
    return 0;
}

/* The first number of the JSON text s[0..n) that is not a JSON number
 * (RFC 8259: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?), which cJSON
 * reads anyway (07, 00, 1., 1.e5), or whose integer part exceeds 2^53 without
 * an exponent (9007199254740993 would silently become 2^53: doubles are
 * exact up to there); NULL if none. *why says which. Strings are skipped;
 * a number is what cJSON takes for one: a run of [0-9+-.eE] starting with
 * '-' or a digit. */
static const char *number_bad(const char *s, size_t n, const char **why) {
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '"') { /* skip the string */
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            continue;
        }
        if (s[i] != '-' && !(s[i] >= '0' && s[i] <= '9')) continue;
        size_t a = i, e = i;
        while (e < n && (strchr("0123456789+-.eE", s[e]) && s[e])) e++;
        size_t p = a + (s[a] == '-'), d0 = p;
        while (p < e && s[p] >= '0' && s[p] <= '9') p++;
        size_t nd = p - d0; /* integer digits */
        int ok = nd > 0 && !(nd > 1 && s[d0] == '0');
        if (ok && p < e && s[p] == '.') {
            size_t f = ++p;
            while (p < e && s[p] >= '0' && s[p] <= '9') p++;
            ok = p > f;
        }
        int expo = ok && p < e && (s[p] == 'e' || s[p] == 'E');
        if (expo) {
            p++;
            if (p < e && (s[p] == '+' || s[p] == '-')) p++;
            size_t x = p;
            while (p < e && s[p] >= '0' && s[p] <= '9') p++;
            ok = p > x;
        }
        if (!ok || p != e) {
            *why = nd > 1 && s[d0] == '0' ? "a leading zero" : "not a JSON number";
            return s + a;
        }
        /* 2^53 = 9007199254740992 has 16 digits */
        if (!expo && (nd > 16 || (nd == 16 && memcmp(s + d0, "9007199254740992", 16) > 0))) {
            *why = "beyond 2^53 = 9007199254740992 (the largest integer a JSON number holds exactly here)";
            return s + a;
        }
        i = e - 1;
    }
    return NULL;
}

/* The first control character (a byte below 0x20) JSON does not allow, or
 * NULL: between values only space, tab, LF and CR are whitespace, and in a
 * string every control character must be escaped (RFC 8259 §2, §7). cJSON
 * takes any of them; Python's json refuses them (jq those in strings), so
 * kvbench does too.
 * *why says which. */
static const char *control_bad(const char *s, size_t n, const char **why) {
    int in_str = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            else if (c < 0x20) {
                *why = "in a string (JSON needs it escaped: \\t, \\n, \\r or \\u00XX)";
                return s + i;
            }
        } else if (c == '"') {
            in_str = 1;
        } else if (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            *why = "between values (JSON's whitespace is space, tab, LF and CR)";
            return s + i;
        }
    }
    return NULL;
}

static int cmp_name(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The first key that appears twice in one object of the tree, with where it
 * is (e.g. "methods[2]"), or NULL. cJSON would keep the first and Python's
 * json the last, so such a document means different things to the two. */
static const char *dup_key(const cJSON *j, char *at, size_t cap) {
    if (!cJSON_IsObject(j) && !cJSON_IsArray(j)) return NULL;
    size_t base = strlen(at);
    int n = 0, i = 0;
    for (const cJSON *c = j->child; c; c = c->next) n++;
    if (cJSON_IsObject(j) && n > 1) {
        const char **names = KB_MALLOC((size_t)n * sizeof *names);
        for (const cJSON *c = j->child; c; c = c->next) names[i++] = c->string ? c->string : "";
        qsort(names, (size_t)n, sizeof *names, cmp_name);
        const char *d = NULL;
        for (i = 1; i < n && !d; i++)
            if (!strcmp(names[i - 1], names[i])) d = names[i];
        free(names);
        if (d) return d;
    }
    i = 0;
    for (const cJSON *c = j->child; c; c = c->next, i++) {
        if (cJSON_IsObject(j))
            snprintf(at + base, cap - base, "%s%s", base ? "." : "", c->string ? c->string : "");
        else
            snprintf(at + base, cap - base, "[%d]", i);
        const char *d = dup_key(c, at, cap);
        if (d) return d;
    }
    at[base] = 0;
    return NULL;
}

int json_check_unique_keys(const cJSON *j, const char *name, kb_err *err) {
    char at[512] = "";
    const char *d = dup_key(j, at, sizeof at);
    if (!d) return 0;
    return kb_fail(err, KB_EINPUT, "%s: key '%s' appears twice in %s%s; each key may appear once",
                   name, d, at[0] ? "" : "the top-level object", at);
}

cJSON *json_cli_value(const char *s, const char *opt, const char *arg, kb_err *err) {
    /* what a config file must be, a value on the command line must be too:
     * UTF-8 (a bare word goes to the tables as it is), no \u0000 (the string
     * would end there), no key twice (cJSON keeps the first, Python the last) */
    char label[128];
    snprintf(label, sizeof label, "%s %.*s=...", opt, (int)KB_MIN(strcspn(arg, "="), (size_t)64), arg);
    size_t n = strlen(s);
    if (text_check_arg(s, label, err)) return NULL; /* as -p and --system: the byte's offset in the value */
    cJSON *v = cJSON_ParseWithOpts(s, NULL, 1); /* the whole of s, not a prefix */
    const char *why, *num = v ? number_bad(s, n, &why) : NULL, *ctl = v && !num ? control_bad(s, n, &why) : NULL;
    if (ctl) {
        kb_fail(err, KB_EINPUT, "%s %s: control character 0x%02x at byte %ld %s", opt, arg,
                (unsigned char)*ctl, (long)(ctl - s), why); /* from 0, as text_check_arg's */
        cJSON_Delete(v);
        return NULL;
    }
    if (num) {
        size_t k = strspn(num, "0123456789+-.eE");
        kb_fail(err, KB_EINPUT, "%s %s: the number %.*s: %s", opt, arg, (int)KB_MIN(k, (size_t)40), num, why);
        cJSON_Delete(v);
        return NULL;
    }
    if (v) {
        char at[512] = "";
        const char *d;
        if (json_has_nul_escape(s, n))
            kb_fail(err, KB_EINPUT, "%s %s: \\u0000 in a string is not supported (the text would end there)",
                    opt, arg);
        else if ((d = dup_key(v, at, sizeof at)))
            kb_fail(err, KB_EINPUT, "%s %s: key '%s' appears twice in %s; each key may appear once", opt, arg,
                    d, at[0] ? at : "the value");
        else
            return v;
        cJSON_Delete(v);
        return NULL;
    }
    const char *p = s;
    while (*p == ' ' || *p == '\t') p++;
    if (*p == '[' || *p == '{' || *p == '"') { /* meant as JSON, and not valid */
        kb_fail(err, KB_EINPUT, "%s %s: the value is not valid JSON (a bare word is taken as a "
                "string)", opt, arg);
        return NULL;
    }
    return cJSON_CreateString(s); /* a bare word is a string */
}

int json_parse(const char *text, size_t len, const char *name, cJSON **out, kb_err *err) {
    const char *end = NULL;
    int rc = text_check(text, len, name, "JSON text (which is UTF-8)", err);
    if (rc) return rc;
    if (json_has_nul_escape(text, len))
        return kb_fail(err, KB_EINPUT, "%s: \\u0000 in a string is not supported (the text would "
                       "end there)", name);
    cJSON *j = cJSON_ParseWithLengthOpts(text, len, &end, 0);
    if (!j) {
        const char *at = cJSON_GetErrorPtr();
        if (!at || at < text || at > text + len) at = text + len;
        long line, col;
        line_col(text, at, &line, &col);
        /* text need not be NUL-terminated (found by tests/fuzz/fuzz_config.c):
         * quote at most the bytes left before text + len */
        int near = (int)KB_MIN((size_t)20, (size_t)(text + len - at));
        return kb_fail(err, KB_EINPUT, "%s:%ld:%ld: invalid JSON near '%.*s'", name, line, col,
                       near, at);
    }
    /* trailing garbage other than whitespace */
    while (end && end < text + len && (*end == ' ' || *end == '\n' || *end == '\t' || *end == '\r'))
        end++;
    if (end && end < text + len) {
        long line, col;
        line_col(text, end, &line, &col);
        cJSON_Delete(j);
        return kb_fail(err, KB_EINPUT, "%s:%ld:%ld: unexpected text after the JSON value", name,
                       line, col);
    }
    const char *why, *num = number_bad(text, len, &why);
    if (num) {
        long line, col;
        line_col(text, num, &line, &col);
        size_t k = strspn(num, "0123456789+-.eE");
        cJSON_Delete(j);
        return kb_fail(err, KB_EINPUT, "%s:%ld:%ld: the number %.*s: %s", name, line, col,
                       (int)KB_MIN(k, (size_t)40), num, why);
    }
    const char *ctl = control_bad(text, len, &why);
    if (ctl) {
        long line, col;
        line_col(text, ctl, &line, &col);
        cJSON_Delete(j);
        return kb_fail(err, KB_EINPUT, "%s:%ld:%ld: control character 0x%02x %s", name, line, col,
                       (unsigned char)*ctl, why);
    }
    if (json_check_unique_keys(j, name, err)) {
        cJSON_Delete(j);
        return KB_EINPUT;
    }
    *out = j;
    return 0;
}

int json_load_file(const char *path, cJSON **out, kb_err *err) {
    char *text;
    size_t len;
    int rc = file_read_all(path, &text, &len, err);
    if (rc) return rc;
    rc = json_parse(text, len, path, out, err);
    free(text);
    return rc;
}

static int in_list(const char *k, const char *const *list) {
    for (; list && *list; list++)
        if (!strcmp(k, *list)) return 1;
    return 0;
}

int json_check_keys(const cJSON *obj, const char *where, const char *const *allowed,
                    const char *const *allowed2, kb_err *err) {
    if (!cJSON_IsObject(obj)) return kb_fail(err, KB_EINPUT, "%s: expected a JSON object", where);
    for (const cJSON *c = obj->child; c; c = c->next) {
        if (!c->string) continue;
        if (!in_list(c->string, allowed) && !in_list(c->string, allowed2)) {
            char known[512] = "";
            size_t off = 0;
            for (int pass = 0; pass < 2; pass++)
                for (const char *const *l = pass ? allowed2 : allowed; l && *l; l++) {
                    int w = snprintf(known + off, sizeof known - off, "%s%s", off ? ", " : "", *l);
                    if (w < 0 || (size_t)w >= sizeof known - off) break;
                    off += (size_t)w;
                }
            return kb_fail(err, KB_EINPUT, "%s: unknown key '%s' (known keys: %s)", where,
                           c->string, known);
        }
    }
    return 0;
}

static const char *type_name(const cJSON *v) {
    if (!v) return "nothing (the key is missing)";
    if (cJSON_IsString(v)) return "a string";
    if (cJSON_IsNumber(v)) return "a number";
    if (cJSON_IsBool(v)) return "a boolean";
    if (cJSON_IsArray(v)) return "an array";
    if (cJSON_IsObject(v)) return "an object";
    if (cJSON_IsNull(v)) return "null";
    return "something else";
}

int json_as_int(const cJSON *v, const char *where, const char *key, long lo, long hi, long *out,
                kb_err *err) {
    if (!cJSON_IsNumber(v))
        return kb_fail(err, KB_EINPUT, "%s: key '%s': expected an integer in [%ld, %ld], got %s",
                       where, key, lo, hi, type_name(v));
    double d = v->valuedouble;
    if (!isfinite(d) || d != floor(d) || d < (double)lo || d > (double)hi)
        return kb_fail(err, KB_EINPUT, "%s: key '%s': expected an integer in [%ld, %ld], got %g",
                       where, key, lo, hi, d);
    *out = (long)d;
    return 0;
}

static const cJSON *lookup(const cJSON *obj, const char *where, const char *key, int required,
                           int *rc, kb_err *err) {
    *rc = 0;
    const cJSON *v = cJSON_IsObject(obj) ? cJSON_GetObjectItemCaseSensitive(obj, key) : NULL;
    if (!v && required) *rc = kb_fail(err, KB_EINPUT, "%s: missing required key '%s'", where, key);
    return v;
}

int json_get_int(const cJSON *obj, const char *where, const char *key, int required, long lo,
                 long hi, long def, long *out, kb_err *err) {
    int rc;
    const cJSON *v = lookup(obj, where, key, required, &rc, err);
    if (rc) return rc;
    if (!v) {
        *out = def;
        return 0;
    }
    return json_as_int(v, where, key, lo, hi, out, err);
}

int json_get_double(const cJSON *obj, const char *where, const char *key, int required,
                    double lo, double hi, double def, double *out, kb_err *err) {
    int rc;
    const cJSON *v = lookup(obj, where, key, required, &rc, err);
    if (rc) return rc;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || v->valuedouble < lo ||
        v->valuedouble > hi) {
        if (cJSON_IsNumber(v))
            return kb_fail(err, KB_EINPUT, "%s: key '%s': expected a number in [%g, %g], got %g",
                           where, key, lo, hi, v->valuedouble);
        return kb_fail(err, KB_EINPUT, "%s: key '%s': expected a number in [%g, %g], got %s",
                       where, key, lo, hi, type_name(v));
    }
    *out = v->valuedouble;
    return 0;
}

int json_get_bool(const cJSON *obj, const char *where, const char *key, int required, int def,
                  int *out, kb_err *err) {
    int rc;
    const cJSON *v = lookup(obj, where, key, required, &rc, err);
    if (rc) return rc;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsBool(v))
        return kb_fail(err, KB_EINPUT, "%s: key '%s': expected true or false, got %s", where, key,
                       type_name(v));
    *out = cJSON_IsTrue(v);
    return 0;
}

int json_get_string(const cJSON *obj, const char *where, const char *key, int required,
                    const char *def, const char **out, kb_err *err) {
    int rc;
    const cJSON *v = lookup(obj, where, key, required, &rc, err);
    if (rc) return rc;
    if (!v) {
        *out = def;
        return 0;
    }
    if (!cJSON_IsString(v))
        return kb_fail(err, KB_EINPUT, "%s: key '%s': expected a string, got %s", where, key,
                       type_name(v));
    *out = v->valuestring;
    return 0;
}

int json_get_path(const cJSON *obj, const char *where, const char *key, int required, const char *def,
                  const char **out, kb_err *err) {
    int rc = json_get_string(obj, where, key, required, def, out, err);
    if (!rc && *out && !**out)
        rc = kb_fail(err, KB_EINPUT, "%s: key '%s': an empty path, expected a file or directory name", where, key);
    return rc;
}

int json_get_string_array(const cJSON *obj, const char *where, const char *key, int required,
                          const char ***out, int *n, kb_err *err) {
    int rc;
    const cJSON *v = lookup(obj, where, key, required, &rc, err);
    *out = NULL;
    *n = 0;
    if (rc || !v) return rc;
    if (!cJSON_IsArray(v))
        return kb_fail(err, KB_EINPUT, "%s: key '%s': expected an array of strings, got %s", where,
                       key, type_name(v));
    int cnt = cJSON_GetArraySize(v), i = 0;
    const char **arr = KB_CALLOC((size_t)cnt + 1, sizeof *arr);
    for (const cJSON *c = v->child; c; c = c->next, i++) {
        if (!cJSON_IsString(c)) {
            free(arr);
            return kb_fail(err, KB_EINPUT, "%s: key '%s'[%d]: expected a string, got %s", where,
                           key, i, type_name(c));
        }
        arr[i] = c->valuestring;
    }
    *out = arr;
    *n = cnt;
    return 0;
}

int json_has_nul_escape(const char *s, size_t n) {
    for (size_t i = 0; i + 1 < n; i++) {
        if (s[i] != '\\') continue;
        if (s[i + 1] == 'u' && i + 6 <= n && !strncmp(s + i + 2, "0000", 4)) return 1;
        i++; /* skip the escaped character */
    }
    return 0;
}

static int jsonl_walk(const char *path, int objects, json_line_fn fn, void *ctx, kb_err *err) {
    FILE *f = fopen(path, "rb");
    if (!f) return kb_fail(err, KB_EINPUT, "%s: cannot open: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = 0;
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        size_t l = (size_t)len;
        while (l && (line[l - 1] == '\n' || line[l - 1] == '\r')) l--;
        size_t s = 0;
        while (s < l && (line[s] == ' ' || line[s] == '\t')) s++;
        if (s == l) continue;
        char name[4200];
        snprintf(name, sizeof name, "%s:%ld", path, lineno);
        cJSON *j = NULL;
        if (memchr(line, 0, l)) {
            rc = kb_fail(err, KB_EINPUT, "%s: contains a NUL byte; expected a JSON %s", name,
                         objects ? "object" : "value");
            break;
        }
        if (json_has_nul_escape(line, l)) {
            rc = kb_fail(err, KB_EINPUT, "%s: \\u0000 in a string is not supported (the text would end there)",
                         name);
            break;
        }
        const char *bad = utf8_bad(line, l);
        if (bad) {
            rc = kb_fail(err, KB_EINPUT, "%s: byte 0x%02x at column %ld is not valid UTF-8 (JSON text is UTF-8)",
                         name, (unsigned char)*bad, (long)(bad - line) + 1);
            break;
        }
        const char *end = NULL;
        j = cJSON_ParseWithLengthOpts(line, l, &end, 0);
        while (j && end < line + l && (*end == ' ' || *end == '\t')) end++;
        if (!j || (objects && !cJSON_IsObject(j)) || end < line + l) {
            cJSON_Delete(j);
            rc = kb_fail(err, KB_EINPUT, "%s: expected one JSON %s per line", name, objects ? "object" : "value");
            break;
        }
        /* numbers as in a JSON file (json_parse): 07, 1. and integers beyond
         * 2^53 (which a double would silently round) are refused */
        const char *why, *num = number_bad(line, l, &why);
        if (num) {
            cJSON_Delete(j);
            rc = kb_fail(err, KB_EINPUT, "%s: column %ld: the number %.*s: %s", name,
                         (long)(num - line) + 1, (int)KB_MIN(strspn(num, "0123456789+-.eE"), (size_t)40),
                         num, why);
            break;
        }
        const char *ctl = control_bad(line, l, &why);
        if (ctl) {
            cJSON_Delete(j);
            rc = kb_fail(err, KB_EINPUT, "%s: column %ld: control character 0x%02x %s", name,
                         (long)(ctl - line) + 1, (unsigned char)*ctl, why);
            break;
        }
        if ((rc = json_check_unique_keys(j, name, err))) {
            cJSON_Delete(j);
            break;
        }
        rc = fn(j, lineno, ctx, err);
        cJSON_Delete(j);
        if (rc) {
            kb_err_prefix(err, "%s", name);
            break;
        }
    }
    if (!rc && ferror(f)) rc = kb_fail(err, KB_EINPUT, "%s: read error: %s", path, strerror(errno));
    free(line);
    fclose(f);
    return rc;
}

int jsonl_foreach(const char *path, json_line_fn fn, void *ctx, kb_err *err) {
    return jsonl_walk(path, 1, fn, ctx, err);
}

int jsonl_foreach_value(const char *path, json_line_fn fn, void *ctx, kb_err *err) {
    return jsonl_walk(path, 0, fn, ctx, err);
}

char *json_print(const cJSON *j, int formatted) {
    char *s = formatted ? cJSON_Print(j) : cJSON_PrintUnformatted(j);
    size_t n = strlen(s);
    char *out = KB_MALLOC(3 * n + 1);
    utf8_lossy(s, n, out);
    cJSON_free(s);
    return out;
}

int json_write_file(const char *path, const cJSON *j, kb_err *err) {
    char *s = json_print(j, 1);
    size_t n = strlen(s);
    s = KB_REALLOC(s, n + 2); /* a text file ends with a newline */
    s[n] = '\n';
    int rc = atomic_write(path, s, n + 1, err);
    free(s);
    return rc;
}
