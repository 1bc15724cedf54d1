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
    free(pg->kmax);
    free(pg->kmin);
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
    /* an odd number of 32-page blocks per row: rows a power of two apart
     * would put the same block of every row in a few L1 sets (4 of 64 for
     * f16 rows of 512 pages), and the page scores read 2r rows at once */
    if (!((nc / 32) & 1)) nc += 32;
    int have = pages_count(pg);
    size_t esz = kb_dtype_size(pg->dt);
    pg->kmax = relayout(pg->kmax, esz, pg->D, pg->cap, have, nc);
    pg->kmin = relayout(pg->kmin, esz, pg->D, pg->cap, have, nc);
    pg->cap = nc;
}

void pages_sync(kb_pages *pg, const kb_kvstream *s, const kb_kernels *kk) {
    if (s->n <= pg->seen) return; /* seen >= n */
    if (!pg->cap) pg->dt = s->dtype;
    pg->seen = s->n;
    /* room for the partial page too: readers load whole rows of 32 pages */
    pages_reserve(pg, (s->n + pg->p - 1) / pg->p);
    int to = pg->whole ? kb_pages_stored(s->n, pg->p) * pg->p : s->n;
    if (to <= pg->n) return;
    kk->page_minmax(s, pg->n, to, pg->p, pg->kmax, pg->kmin, pg->cap);
    pg->n = to;
}

void pages_truncate(kb_pages *pg, const kb_kvstream *s, int n, const kb_kernels *kk) {
    if (n < 0) n = 0;
    if (n < pg->seen) pg->seen = n;
    if (n >= pg->n) return;
    if (pg->whole) { /* the group holding slot n - 1, now incomplete, is no longer stored */
        pg->n = kb_pages_stored(n, pg->p) * pg->p;
        return;
    }
    int start = (n / pg->p) * pg->p; /* first slot of the page holding slot n (or n-1's page) */
    if (start < n) kk->page_minmax(s, start, n, pg->p, pg->kmax, pg->kmin, pg->cap);
    pg->n = n;
}
