/* npy.c - strict .npy reader/writer and all-or-nothing output sets (npy.h).
 *
 * Header grammar accepted (the format's spec: a Python dict literal):
 *   { 'descr': '<f4' , 'fortran_order': False , 'shape': (d0, d1, ...) , }
 * keys in any order, each exactly once, single or double quotes, optional
 * trailing comma, then spaces up to a final newline. */
#include "harness/npy.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <unistd.h>

#include "harness/atomic.h"
#include "harness/json.h"

void npy_free(kb_npy *a) {
    free(a->data);
    memset(a, 0, sizeof *a);
}

typedef struct hparse {
    const char *p, *end;
} hparse;

static void skip_ws(hparse *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static int take(hparse *h, char c) {
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return 1;
    }
    return 0;
}

/* A quoted string into buf; 0 on success. */
static int parse_str(hparse *h, char *buf, size_t cap) {
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return 1;
    char q = *h->p++;
    size_t n = 0;
    while (h->p < h->end && *h->p != q) {
        if (*h->p == '\\' || n + 1 >= cap) return 1;
        buf[n++] = *h->p++;
    }
    if (h->p >= h->end) return 1;
    h->p++;
    buf[n] = 0;
    return 0;
}

static int parse_header(const char *path, const char *hdr, size_t hlen, kb_npy *a, kb_err *err) {
    hparse h = {hdr, hdr + hlen};
    int have_descr = 0, have_fo = 0, have_shape = 0;
    if (!take(&h, '{')) return kb_fail(err, KB_EINPUT, "%s: .npy header is not a dict (expected '{')", path);
    for (;;) {
        if (take(&h, '}')) break;
        char key[64];
        if (parse_str(&h, key, sizeof key))
            return kb_fail(err, KB_EINPUT, "%s: .npy header: expected a quoted key", path);
        if (!take(&h, ':')) return kb_fail(err, KB_EINPUT, "%s: .npy header: expected ':' after '%s'", path, key);
        if (!strcmp(key, "descr")) {
            char d[32];
            if (have_descr++) return kb_fail(err, KB_EINPUT, "%s: .npy header: 'descr' given twice", path);
            if (parse_str(&h, d, sizeof d))
                return kb_fail(err, KB_EINPUT, "%s: .npy header: 'descr' must be a quoted type string", path);
            if (!strcmp(d, "<f4")) a->type = 'f';
            else if (!strcmp(d, "<i4")) a->type = 'i';
            else
                return kb_fail(err, KB_EINPUT,
                               "%s: .npy descr '%s' not supported (expected '<f4' float32 or '<i4' int32, "
                               "little-endian; convert with .astype(np.float32))",
                               path, d);
        } else if (!strcmp(key, "fortran_order")) {
            if (have_fo++) return kb_fail(err, KB_EINPUT, "%s: .npy header: 'fortran_order' given twice", path);
            skip_ws(&h);
            if (h.end - h.p >= 5 && !memcmp(h.p, "False", 5)) {
                h.p += 5;
            } else if (h.end - h.p >= 4 && !memcmp(h.p, "True", 4)) {
                return kb_fail(err, KB_EINPUT, "%s: .npy fortran_order is True (expected C order: save "
                               "np.ascontiguousarray(x))", path);
            } else {
                return kb_fail(err, KB_EINPUT, "%s: .npy header: 'fortran_order' must be True or False", path);
            }
        } else if (!strcmp(key, "shape")) {
            if (have_shape++) return kb_fail(err, KB_EINPUT, "%s: .npy header: 'shape' given twice", path);
            if (!take(&h, '(')) return kb_fail(err, KB_EINPUT, "%s: .npy header: 'shape' must be a tuple", path);
            a->ndim = 0;
            for (;;) {
                if (take(&h, ')')) break;
                skip_ws(&h);
                if (h.p >= h.end || *h.p < '0' || *h.p > '9')
                    return kb_fail(err, KB_EINPUT, "%s: .npy header: 'shape' must hold non-negative integers", path);
                long v = 0;
                while (h.p < h.end && *h.p >= '0' && *h.p <= '9') {
                    if (v > (1L << 40)) return kb_fail(err, KB_EINPUT, "%s: .npy shape dimension too large", path);
                    v = v * 10 + (*h.p++ - '0');
                }
                if (h.p < h.end && *h.p == 'L') h.p++; /* Python 2 long */
                if (a->ndim >= KB_NPY_MAX_DIMS)
                    return kb_fail(err, KB_EINPUT, "%s: .npy shape has more than %d dimensions", path, KB_NPY_MAX_DIMS);
                a->shape[a->ndim++] = v;
                if (take(&h, ',')) continue;
                if (take(&h, ')')) break;
                return kb_fail(err, KB_EINPUT, "%s: .npy header: malformed 'shape' tuple", path);
            }
        } else {
            return kb_fail(err, KB_EINPUT, "%s: .npy header: unexpected key '%s' (expected descr, fortran_order, shape)",
                           path, key);
        }
        if (take(&h, ',')) continue;
        if (take(&h, '}')) break;
        return kb_fail(err, KB_EINPUT, "%s: .npy header: expected ',' or '}' after '%s'", path, key);
    }
    skip_ws(&h);
    if (h.p != h.end) return kb_fail(err, KB_EINPUT, "%s: .npy header: unexpected text after the dict", path);
    if (!have_descr || !have_fo || !have_shape)
        return kb_fail(err, KB_EINPUT, "%s: .npy header misses '%s'", path,
                       !have_descr ? "descr" : !have_fo ? "fortran_order" : "shape");
    return 0;
}

int npy_read(const char *path, kb_npy *a, kb_err *err) {
    memset(a, 0, sizeof *a);
    char *buf;
    size_t len;
    int rc = file_read_all(path, &buf, &len, err);
    if (rc) return rc;
    const unsigned char *u = (const unsigned char *)buf;
    if (len < 10 || memcmp(buf, "\x93NUMPY", 6)) {
        free(buf);
        return kb_fail(err, KB_EINPUT, "%s: not a .npy file (bad magic; expected \\x93NUMPY)", path);
    }
    int major = u[6], minor = u[7];
    size_t hlen, off;
    if (major == 1 && minor == 0) {
        hlen = (size_t)u[8] | (size_t)u[9] << 8;
        off = 10;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (len < 12) {
            free(buf);
            return kb_fail(err, KB_EINPUT, "%s: truncated .npy header", path);
        }
        hlen = (size_t)u[8] | (size_t)u[9] << 8 | (size_t)u[10] << 16 | (size_t)u[11] << 24;
        off = 12;
    } else {
        free(buf);
        return kb_fail(err, KB_EINPUT, "%s: .npy version %d.%d not supported (expected 1.0, 2.0 or 3.0)", path,
                       major, minor);
    }
    if (hlen > len - off) {
        free(buf);
        return kb_fail(err, KB_EINPUT, "%s: .npy header length %zu exceeds the file", path, hlen);
    }
    rc = parse_header(path, buf + off, hlen, a, err);
    if (!rc) {
        size_t count = 1;
        for (int i = 0; i < a->ndim; i++) {
            if (a->shape[i] && count > ((size_t)1 << 40) / (size_t)a->shape[i]) {
                rc = kb_fail(err, KB_EINPUT, "%s: .npy shape too large", path);
                break;
            }
            count *= (size_t)a->shape[i];
        }
        size_t have = len - off - hlen;
        if (!rc && have != count * 4)
            rc = kb_fail(err, KB_EINPUT, "%s: .npy data holds %zu bytes, the shape needs %zu", path, have, count * 4);
        if (!rc) {
            a->count = count;
            a->data = KB_MALLOC(count * 4 + 4);
            memcpy(a->data, buf + off + hlen, count * 4);
        }
    }
    free(buf);
    if (rc) {
        free(a->data);
        memset(a, 0, sizeof *a);
    }
    return rc;
}

static void shape_str(const kb_npy *a, char *buf, size_t cap) {
    size_t off = (size_t)snprintf(buf, cap, "(");
    for (int i = 0; i < a->ndim && off < cap; i++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%ld", i ? ", " : "", a->shape[i]);
    if (off < cap) snprintf(buf + off, cap - off, ")");
}

int npy_read_expect(const char *path, char want_type, int ndim, kb_npy *out, kb_err *err) {
    int rc = npy_read(path, out, err);
    if (rc) return rc;
    if (out->type != want_type) {
        npy_free(out);
        return kb_fail(err, KB_EINPUT, "%s: expected dtype %s", path, want_type == 'f' ? "'<f4' (float32)" : "'<i4' (int32)");
    }
    if (ndim >= 0 && out->ndim != ndim) {
        char s[128];
        shape_str(out, s, sizeof s);
        npy_free(out);
        return kb_fail(err, KB_EINPUT, "%s: expected %d dimensions, got shape %s", path, ndim, s);
    }
    return 0;
}

void npy_encode(const void *data, char type, int ndim, const long *shape, char **out, size_t *len) {
    char dict[512];
    size_t n = (size_t)snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (",
                                type == 'i' ? "<i4" : "<f4");
    size_t count = 1;
    for (int i = 0; i < ndim; i++) {
        n += (size_t)snprintf(dict + n, sizeof dict - n, "%ld%s", shape[i], ndim == 1 ? "," : (i + 1 < ndim ? ", " : ""));
        count *= (size_t)shape[i];
    }
    n += (size_t)snprintf(dict + n, sizeof dict - n, "), }");
    size_t total_hdr = 10 + n + 1;
    size_t pad = (64 - total_hdr % 64) % 64;
    size_t hlen = n + pad + 1;
    *len = 10 + hlen + count * 4;
    char *b = KB_MALLOC(*len);
    memcpy(b, "\x93NUMPY\x01\x00", 8);
    b[8] = (char)(hlen & 0xff);
    b[9] = (char)(hlen >> 8);
    memcpy(b + 10, dict, n);
    memset(b + 10 + n, ' ', pad);
    b[10 + n + pad] = '\n';
    if (count) memcpy(b + 10 + hlen, data, count * 4);
    *out = b;
}

int npy_write(const char *path, const void *data, char type, int ndim, const long *shape,
              kb_err *err) {
    char *b;
    size_t len;
    npy_encode(data, type, ndim, shape, &b, &len);
    int rc = atomic_write(path, b, len, err);
    free(b);
    return rc;
}

void outset_init(kb_outset *o) { memset(o, 0, sizeof *o); }

int outset_add(kb_outset *o, const char *path, const void *data, size_t len, kb_err *err) {
    if (o->n == o->cap) {
        o->cap = o->cap ? 2 * o->cap : 8;
        o->final = KB_REALLOC(o->final, (size_t)o->cap * sizeof(char *));
        o->tmp = KB_REALLOC(o->tmp, (size_t)o->cap * sizeof(char *));
    }
    size_t pl = strlen(path) + 32;
    char *tmp = KB_MALLOC(pl);
    snprintf(tmp, pl, "%s.tmp.%ld", path, (long)getpid());
    FILE *f = fopen(tmp, "wb");
    int bad = !f;
    if (f) {
        bad = len && fwrite(data, 1, len, f) != len;
        bad |= fflush(f) != 0;
        bad |= fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
    }
    if (bad) {
        int e = errno;
        unlink(tmp);
        free(tmp);
        outset_abort(o);
        return kb_fail(err, KB_ERUNTIME, "%s: cannot write: %s", path, strerror(e));
    }
    o->final[o->n] = kb_strdup(path);
    o->tmp[o->n] = tmp;
    o->n++;
    return 0;
}

int outset_add_npy(kb_outset *o, const char *path, const void *data, char type, int ndim,
                   const long *shape, kb_err *err) {
    char *b;
    size_t len;
    npy_encode(data, type, ndim, shape, &b, &len);
    int rc = outset_add(o, path, b, len, err);
    free(b);
    return rc;
}

static void outset_clear(kb_outset *o) {
    for (int i = 0; i < o->n; i++) {
        free(o->final[i]);
        free(o->tmp[i]);
    }
    free(o->final);
    free(o->tmp);
    memset(o, 0, sizeof *o);
}

int outset_commit(kb_outset *o, kb_err *err) {
    /* a rename can still fail where the name is a directory: find that before
     * the first rename, so that nothing is replaced unless everything is */
    for (int i = 0; i < o->n; i++) {
        struct stat st;
        if (!lstat(o->final[i], &st) && S_ISDIR(st.st_mode)) {
            kb_fail(err, KB_EINPUT, "%s: is a directory, expected a file or nothing", o->final[i]);
            outset_abort(o);
            return KB_EINPUT;
        }
    }
    for (int i = 0; i < o->n; i++) {
        if (rename(o->tmp[i], o->final[i])) {
            int e = errno;
            kb_fail(err, KB_ERUNTIME, "%s: rename failed: %s", o->final[i], strerror(e));
            for (int j = i; j < o->n; j++) unlink(o->tmp[j]);
            outset_clear(o);
            return KB_ERUNTIME;
        }
    }
    outset_clear(o);
    return 0;
}

void outset_abort(kb_outset *o) {
    for (int i = 0; i < o->n; i++) unlink(o->tmp[i]);
    outset_clear(o);
}
