/* common.h - pieces every method file shares: the resolved params/context,
 * the mark counter, the last step's accounting with its selected-slot
 * buffers, stream copies from a prefill view, and checks of a view's shape.
 * Private to methods/ (the public interface is method.h). */
#ifndef KB_METHODS_COMMON_H
#define KB_METHODS_COMMON_H

#include "kernels/kernels.h"
#include "methods/budget.h"
#include "methods/method.h"

typedef struct kb_mcommon {
    kb_method_params p;  /* resolved (validate() ran) */
    kb_method_ctx ctx;
    const char *who;     /* method name for messages */
    int G;               /* Hq / Hkv */
    float scale;         /* 1 / sqrt(D) */
    long n_in;           /* tokens that entered the layer (the mark counter) */
    long base;           /* n_in at the last layer_init / extend (rollback floor) */
    kb_budget bud;       /* resolved budget (bud.B = -1: none) */
    kb_account acc;      /* the last decode step's accounting */
    int32_t *sel;        /* [sel_rows][sel_cap] selected slots of the last step */
    int32_t *sel_pos;    /* [sel_rows][sel_cap] their positions */
    int sel_rows, sel_cap;
    unsigned char *mark; /* [mark_cap] scratch for distinct-slot counts (all 0 between uses) */
    int mark_cap;
} kb_mcommon;

void mc_init(kb_mcommon *c, const char *who, const kb_method_params *p, const kb_method_ctx *ctx);
void mc_free(kb_mcommon *c);

/* Checks the view against the context (Hq, Hkv, D, positive lengths, window
 * rows available when the method needs `need_w` of them). */
int mc_check_view(const kb_mcommon *c, const kb_prefill_view *pv, int need_w, kb_err *err);

/* Appends src slots [from, from + n) to dst, converting the dtype if needed. */
void stream_append_from(kb_kvstream *dst, const kb_kvstream *src, int from, int n);
/* Appends src slots idx[0..n) to dst, converting the dtype if needed. */
void stream_append_idx(kb_kvstream *dst, const kb_kvstream *src, const int32_t *idx, int n);

/* The capacity a buffer that must now hold need items (need <= most) grows
 * to from cap: need the first time, else doubling, as need grows by one slot
 * a step while the cache is shorter than the budget, but never past most (what
 * a row can select at all: the budget). Used for every per-step selection
 * buffer, so they follow the cache, not a budget that may exceed any context
 * (up to 2^30). */
int mc_grow_cap(int cap, int need, int most);
/* Selection buffers: rows x k slots (at least; the row stride, sel_cap, may
 * be larger, up to most), reset to -1. Callers pass k no larger than the
 * slots the step can select (the budget clamped to the cache length) and most
 * the budget's bound (mc_grow_cap). */
void mc_sel_begin(kb_mcommon *c, int rows, int k, int most);
static inline int32_t *mc_sel_row(kb_mcommon *c, int row) { return c->sel + (size_t)row * c->sel_cap; }
/* Records row `row`'s n selected slots (ascending) of stream s (positions
 * looked up). Writes row `row` only: the attend tasks of one
 * mc_select_attend job record their own rows, after mc_sel_begin. */
void mc_sel_set(kb_mcommon *c, int row, const int32_t *idx, int n, const kb_kvstream *s);
/* Distinct slots among `rows` rows of the selection (all indexing one stream of n slots). */
int mc_sel_distinct(kb_mcommon *c, int row0, int rows, int n);

/* Fills c->acc's selection fields from the buffers and the budget fields. */
void mc_acc_finish(kb_mcommon *c, int per_query_head);

/* Drops tokens appended after `mark` (clamped to the last rebuild); returns how
 * many slots to remove from the end of every stream. */
long mc_rollback_count(kb_mcommon *c, long mark);

/* extend and account for a method whose turns live in streams s[0..rows)
 * (rows: Hkv, or Hq for per-query-head sets) that hold every token since
 * its last rebuild. mc_streams_extend checks the view (need_w as
 * mc_check_view), appends it to s and makes the end of it the rollback
 * floor (n_in = base). mc_streams_account sets *acc to the last step's
 * accounting with s's resident tokens (per KV head) and bytes and the budget
 * mode; a method with a budget points acc->budget at c->bud, one with more
 * state adds its bytes. */
int mc_streams_extend(kb_mcommon *c, kb_kvstream *s, int rows, const kb_prefill_view *pv, int need_w,
                      kb_err *err);
void mc_streams_account(const kb_mcommon *c, const kb_kvstream *s, int rows, kb_account *acc);

/* The method's pooling kernel for a prompt of n tokens (fixed or adaptive table). */
int mc_kernel_for(const kb_method_params *p, int n);

/* Arrays of streams (rows = Hkv or Hq). */
kb_kvstream *streams_new(int rows, kb_dtype dt, int D, int cap);
void streams_free(kb_kvstream *s, int rows);
/* Drops d slots from the end of every row. */
void streams_drop(kb_kvstream *s, int rows, long d);
/* Total slots and K+V bytes over the rows. */
double streams_slots(const kb_kvstream *s, int rows);
double streams_bytes(const kb_kvstream *s, int rows);
/* Appends k[D], v[D] of KV head g (rows of k/v [Hkv][D]) to every row of
 * that head: rows == Hkv -> row g; rows == Hq -> rows g*G .. g*G+G-1. */
void streams_append_token(kb_kvstream *s, int rows, int Hkv, int D, const float *k,
                          const float *v, int32_t pos);
/* Appends every slot of the view's KV streams to the matching rows. */
void streams_append_view(kb_kvstream *s, int rows, const kb_prefill_view *pv);

/* fn(ctx, i, worker) for i < n: on the decode worker pool (kernels/pool.h)
 * with the fast CPU kernels, in order on this thread with any other backend
 * (the reference kernels are not reentrant). Chunks must be independent. */
void mc_parallel(const kb_kernels *kk, int n, void (*fn)(void *ctx, int i, int worker), void *ctx);

/* Thread-local scratch of n floats, slot which (0 or 1): for data that lives
 * only inside one select task (page scores), so every row and layer reuses
 * one cached buffer per thread instead of writing a cold per-row one. The
 * pointer stays valid until the same thread asks the same slot again. */
float *mc_scratch(int which, size_t n);

/* A decode step's two phases over `rows` selection rows: sel(ctx, i) (choose
 * what row i attends) and att(ctx, i) (attend it; reads only row i's
 * selection), as one mc_parallel job of 2 * rows tasks, selects first. The
 * pool claims tasks in increasing order, so row i's attend starts after its
 * select was claimed and waits for it (briefly) instead of every attend
 * waiting behind a barrier for every select: with 3 KV heads on 2 cores a
 * barrier leaves one core idle for a task time in each phase. Returns the
 * selection's part of the job's wall time: wall x (select busy) / (select +
 * attend busy), the busy times excluding the waits. sel returns the seconds
 * of its task spent keeping page summaries up to date (0 if none); their
 * share of the wall time, by the same split, goes to *upkeep (NULL: not
 * wanted); it is part of the returned time. */
double mc_select_attend(const kb_kernels *kk, int rows, double (*sel)(void *ctx, int i, int worker),
                        void (*att)(void *ctx, int i, int worker), void *ctx, double *upkeep);

/* Bytes of one K+V row. */
static inline double mc_row_bytes(const kb_mcommon *c) {
    return 2.0 * c->ctx.D * (double)kb_dtype_size(c->ctx.kv_dtype);
}

#endif
