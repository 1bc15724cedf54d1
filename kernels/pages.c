/* pages.c - page min/max summaries of one K stream (select.h): incremental
 * append, truncation that recomputes only the last page. */
#include <stdlib.h>
#include <string.h>

#include "kernels/select.h"

void pages_init(kb_pages *pg, int p, int D) {
    memset(pg, 0, sizeof *pg);
    pg->p = p < 1 ? 1 : p;
    pg->D = D;
}

void pages_free(kb_pages *pg) {
    if (pg->kmin != pg->kmax) free(pg->kmin);
    free(pg->kmax);
    pg->kmax = pg->kmin = NULL;
    pg->n = pg->cap = 0;
}

/* Dim-major rows of cap pages: growing moves every dim's row to its new
 * stride (amortized by doubling). */
static void *relayout(void *old, size_t esz, int D, int oldcap, int npages, int nc) {
    char *x = KB_CALLOC((size_t)nc * D, esz); /* zeros past the pages: whole-vector loads */
    for (int d = 0; d < D && old; d++)
        memcpy(x + (size_t)d * nc * esz, (char *)old + (size_t)d * oldcap * esz, (size_t)npages * esz);
    free(old);
    return x;
}

static void pages_reserve(kb_pages *pg, int npages) {
    if (npages <= pg->cap) return;
    int nc = pg->cap ? pg->cap : 16;
    while (nc < npages) nc *= 2;
    nc = (nc + 31) & ~31; /* kernels read 32 pages at a time, never past a row */
    int have = pages_count(pg);
    size_t esz = kb_dtype_size(pg->dt);
    pg->kmax = relayout(pg->kmax, esz, pg->D, pg->cap, have, nc);
    pg->kmin = pg->p == 1 ? pg->kmax : relayout(pg->kmin, esz, pg->D, pg->cap, have, nc);
    pg->cap = nc;
}

void pages_sync(kb_pages *pg, const kb_kvstream *s, const kb_kernels *kk) {
    if (s->n <= pg->n) return;
    if (!pg->cap) pg->dt = s->dtype;
    pages_reserve(pg, (s->n + pg->p - 1) / pg->p);
    kk->page_minmax(s, pg->n, s->n, pg->p, pg->kmax, pg->kmin, pg->cap);
    pg->n = s->n;
}

void pages_truncate(kb_pages *pg, const kb_kvstream *s, int n, const kb_kernels *kk) {
    if (n >= pg->n) return;
    if (n < 0) n = 0;
    int start = (n / pg->p) * pg->p; /* first slot of the page holding slot n (or n-1's page) */
    if (start < n) kk->page_minmax(s, start, n, pg->p, pg->kmax, pg->kmin, pg->cap);
    pg->n = n;
}
