/* method.h - the attention-backend interface every KV-cache method implements.
 *
 * A method is one file in methods/ that fills a kb_method_ops table; the
 * registry (methods/registry.c) maps names to tables. The driver and the
 * engine never test a method's name: they build per-layer states through this
 * table and call decode / retained / extend / rollback / account on them.
 *
 * Life of one (sample, method, params, budget) cell, per layer:
 *   layer_init(params, ctx, prefill view)   build from the shared exact prefill
 *   decode(...)                              once per decode token (last prompt
 *                                            token first), appends k, v itself
 *   mark() / rollback(mark)                  drop generated tokens between turns
 *   retained(qhead)                          what a later turn's prefill sees
 *   extend(turn view)                        append a new turn's tokens, rebuild
 *   account(...)                             accounting after each step
 *   destroy()
 *
 * Shapes use the paper's letters: Hq query heads, Hkv KV heads, G = Hq/Hkv,
 * D head dim, L prompt length, S max sequence, B token budget. Query head h
 * belongs to KV group h / G. */
#ifndef KB_METHOD_H
#define KB_METHOD_H

#include "kernels/kb_base.h"
#include "kernels/kvstream.h"

typedef enum kb_gqa_policy {
    KB_GQA_DEFAULT = 0, /* the method's own default */
    KB_GQA_PER_HEAD,    /* each query head scores / selects alone */
    KB_GQA_GROUP_SUM,   /* scores summed over the G heads of a group */
    KB_GQA_GROUP_MEAN,  /* scores averaged over the G heads of a group */
} kb_gqa_policy;

typedef enum kb_budget_mode {
    KB_BUDGET_TRAFFIC = 0, /* B = token-equivalents READ per step per KV head (RocketKV) */
    KB_BUDGET_TOPK = 1,    /* B = tokens attended (Quest / SparQ papers) */
} kb_budget_mode;

typedef enum kb_pooling { KB_POOL_MAX = 0, KB_POOL_AVG = 1 } kb_pooling;

#define KB_MAX_KERNEL_TABLE 16
#define KB_KERNEL_ADAPTIVE (-1)

struct kb_budget; /* methods/budget.h */

/* Every knob a method may take, resolved from the JSON config
 * (methods/params.c). A method declares which keys it accepts
 * (kb_method_ops.keys); keys it does not accept keep the "unset" value shown
 * in the comment and are rejected by the parser if the config names them.
 * A zero-filled struct (plus ops, budget and label) is a valid "all defaults"
 * request: validate() resolves every unset knob to the method's default. */
typedef struct kb_method_params {
    const struct kb_method_ops *ops; /* the method */
    char label[64];                  /* display name in tables (default: method name) */
    int budget;                      /* B in tokens; -1 = no budget (full) */
    kb_budget_mode budget_mode;      /* traffic (default) or topk */
    int skip_layers;                 /* layers < skip_layers stay dense (Full KV) */
    kb_gqa_policy gqa;               /* GQA policy; DEFAULT = the method's own */
    int window;                      /* SnapKV observation window W; 0 = method default */
    int kernel;                      /* pooling kernel (odd); 0 = the method's default;
                                        KB_KERNEL_ADAPTIVE = look K up in kernel_table by L */
    int n_kernel_table;              /* rows of kernel_table when kernel == KB_KERNEL_ADAPTIVE */
    int kernel_table[KB_MAX_KERNEL_TABLE][2]; /* [max_len, K] rows, ascending max_len */
    kb_pooling pooling;              /* SnapKV pooling: max (default) or avg */
    int alpha_fixed;                 /* 0: RocketKV split exponent auto (methods.md §1.1) */
    double alpha;                    /* the fixed exponent when alpha_fixed (in [0, 1]) */
    int page_size;                   /* override p (hybrid/rocketkv) or P (quest); 0 = accountant */
    int r;                           /* override approximation dims; 0 = accountant */
    int reallocate_mean_v;           /* SparQ original: lerp with mean V (0/1) */
    int local_window;                /* SparQ original: always keep last N tokens; 0 = off */
} kb_method_params;

/* What one layer's method state is built for (per sample). */
typedef struct kb_method_ctx {
    int layer, n_layers;
    int Hq, Hkv, D;
    kb_dtype kv_dtype; /* element type of the method's K/V storage */
    int L_prompt;      /* first turn's prompt length in tokens (incl. the last token, which is decoded) */
    int N_new;         /* max new tokens per turn */
    int S;             /* max sequence = min(L_prompt + N_new, model context) */
    int n_ctx;         /* model context */
} kb_method_ctx;

/* The exact-attention prefill of one layer, shared by every cell of a sample
 * (first turn), or a later turn's new tokens (extend). */
typedef struct kb_prefill_view {
    int Hq, Hkv, D;
    const kb_kvstream *kv;    /* [Hkv] streams, chronological, post-RoPE: layer_init: every
                                 prefill slot (positions 0..L-1); extend: only the new turn's
                                 tokens (the method already holds its history) */
    int Wq;                   /* window queries available (>= the largest window any method needs, <= L) */
    const float *qwin;        /* [Wq][Hq][D] f32, post-RoPE, the last Wq queries of this prefill */
    const int32_t *qwin_pos;  /* [Wq] their sequence positions */
} kb_prefill_view;

/* Accounting of one layer after the last decode step. Units follow
 * methods.md §1: a token-equivalent is the K and V of one token of one KV head. */
typedef struct kb_account {
    double resident_tokens; /* K/V slots resident per KV head (mean over KV heads; per-head
                               methods count their G copies: slots summed over the group) */
    double resident_bytes;  /* bytes the layer holds: K, V and metadata (page min/max etc.) */
    double read_tokeq;      /* token-equivalents read in the last step, per KV head (mean),
                               as the budget mode counts them: traffic = distinct K/V rows read
                               + approximation reads; topk = distinct K/V rows only */
    double approx_tokeq;    /* of which approximation reads (page min/max, r-dim K), per KV
                               head, whatever the mode (included in read_tokeq in traffic mode only) */
    double read_bytes;      /* bytes read in the last step, whole layer (K/V rows + approximation
                               data, physical, in both modes) */
    double attended;        /* tokens attended in the last step, per query head (mean) */
    int sel_streams;        /* rows of `selected` (Hkv or Hq); 0 = attends every slot of its
                               decode_cache() row */
    int sel_k;              /* row stride of selected / selected_pos (max slots per row) */
    const int32_t *selected;/* [sel_streams][sel_k] slot indices into decode_cache(row),
                               ascending, -1 padded */
    const int32_t *selected_pos; /* [sel_streams][sel_k] their original sequence positions, -1 padded */
    int sel_per_query_head; /* 1: row h is query head h; 0: row g is KV group g */
    kb_budget_mode mode;    /* the budget mode the row was counted in */
    const struct kb_budget *budget; /* resolved budget parameters (NULL: no budget) */
    double select_seconds;  /* CUMULATIVE wall seconds this layer's decode steps spent
                               choosing what to attend since layer_init: approximation
                               (page summary upkeep, approximate or exact scores) and
                               top-k; not the attention over the chosen slots, not the
                               accounting. 0 for methods that attend everything. */
    double upkeep_seconds;  /* CUMULATIVE: the part of select_seconds spent keeping page
                               summaries up to date (QUEST, hybrid, RocketKV: the new
                               key's page min/max); 0 for methods without them */
} kb_account;

typedef struct kb_method_ops {
    const char *name;        /* registry key, e.g. "rocketkv" */
    const char *description; /* one line for --help / docs */
    const char *const *keys; /* NULL-terminated config keys accepted besides the generic
                                "method", "label", "budget", "budget_mode", "skip_layers" */
    int needs_budget;        /* 1: a budget is required */
    int window_default;      /* the window this method needs by default (0 = none) */
    int evicts;              /* 1: stage-1 eviction (SnapKV family) decides what decode sees */
    int selects;             /* 1: decode chooses the slots it attends each step and keeps
                                selection buffers of up to min(budget, cache length) slots
                                per row (methodset_select_bytes) */

    /* Method-specific range checks after generic parsing; fill defaults for
     * unset knobs. Errors name the method and the key. */
    int (*validate)(kb_method_params *p, kb_err *err);

    /* Build the state of one layer from the shared prefill view. The view is
     * only valid during the call: copy what you keep. */
    int (*layer_init)(const kb_method_params *p, const kb_method_ctx *ctx,
                      const kb_prefill_view *pv, void **state, kb_err *err);

    /* One decode step: q [Hq][D], k [Hkv][D], v [Hkv][D] (f32, post-RoPE, at
     * sequence position pos). Appends k, v to the cache, then writes the
     * attention output out [Hq][D]. */
    void (*decode)(void *state, const float *q, const float *k, const float *v, int32_t pos,
                   float *out);

    /* The cache a later turn's prefill query head qhead may attend to. */
    const kb_kvstream *(*retained)(void *state, int qhead);

    /* The stream that row `row` of the account's `selected` indexes (the
     * cache decode selects from: a SnapKV kept set, RocketKV-MT's working
     * set, or the full cache); *n_rows = Hkv or Hq. Tools read it (replay's
     * kept.npy, fidelity). */
    const kb_kvstream *(*decode_cache)(void *state, int row, int *n_rows);

    /* A later turn: pv->kv holds, per KV head, only the new turn's tokens and
     * pv->qwin the new turn's last queries; the caller has already computed the
     * new tokens' attention over retained() + the new tokens. Append the new
     * tokens and rebuild (evict again over kept + new, rebuild a working set...). */
    int (*extend)(void *state, const kb_prefill_view *pv, kb_err *err);

    /* mark(): tokens that entered the layer so far (prefill + decode +
     * extend; equal across layers, so one layer's mark serves all).
     * rollback(m): drop the decode tokens appended after mark m (from the end
     * of every stream; page summaries recompute their last page). A rollback
     * never crosses the last layer_init/extend: an older mark is clamped to it. */
    long (*mark)(void *state);
    void (*rollback)(void *state, long mark);

    /* The last decode step's accounting (resident figures are current). The
     * selected / selected_pos / budget pointers stay valid until the next
     * decode, rollback, extend or destroy of this state. */
    void (*account)(void *state, kb_account *acc);
    void (*destroy)(void *state);
} kb_method_ops;

/* Registry (methods/registry.c). */
const kb_method_ops *method_find(const char *name);
int method_count(void);
const kb_method_ops *method_at(int i);
/* "full, exact_topk, ..." for error messages (static buffer). */
const char *method_names(void);

#endif
