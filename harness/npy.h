/* npy.h - NumPy .npy files (format versions 1.0, 2.0, 3.0), strictly
 * validated, for replay traces (methods.md §9).
 *
 * Only little-endian 4-byte types in C order are accepted ('<f4', '<i4';
 * fortran_order False): that is what traces are. A malformed file gives
 * KB_EINPUT with the file name and what was wrong (magic, version, header
 * dict, descr, fortran_order, shape, data length). Files are written as
 * version 1.0 with the header padded to 64 bytes, atomically. */
#ifndef KB_NPY_H
#define KB_NPY_H

#include <stddef.h>

#include "kernels/kb_base.h"

#define KB_NPY_MAX_DIMS 8

typedef struct kb_npy {
    char type;                  /* 'f' = '<f4' (float), 'i' = '<i4' (int32_t) */
    int ndim;
    long shape[KB_NPY_MAX_DIMS];
    size_t count;               /* elements = product of shape */
    void *data;                 /* count * 4 bytes, malloc'ed */
} kb_npy;

/* Reads any accepted array. */
int npy_read(const char *path, kb_npy *out, kb_err *err);
/* Reads and checks type and rank (want_type 'f' or 'i'; ndim < 0: any). */
int npy_read_expect(const char *path, char want_type, int ndim, kb_npy *out, kb_err *err);
void npy_free(kb_npy *a);

/* The complete file image of an array (header + data); *out malloc'ed. */
void npy_encode(const void *data, char type, int ndim, const long *shape, char **out,
                size_t *len);
/* Writes an array atomically. */
int npy_write(const char *path, const void *data, char type, int ndim, const long *shape,
              kb_err *err);

/* A set of output files that appear together or not at all: each add()
 * writes a temporary next to its target; commit() renames them all;
 * abort() (or a failed add) removes the temporaries. */
typedef struct kb_outset {
    int n, cap;
    char **final, **tmp;
} kb_outset;

void outset_init(kb_outset *o);
int outset_add(kb_outset *o, const char *path, const void *data, size_t len, kb_err *err);
int outset_add_npy(kb_outset *o, const char *path, const void *data, char type, int ndim,
                   const long *shape, kb_err *err);
int outset_commit(kb_outset *o, kb_err *err);
void outset_abort(kb_outset *o);

#endif
