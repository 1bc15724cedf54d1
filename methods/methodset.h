/* methodset.h - one method's per-layer states for one model: the attention
 * backend the engine decodes through.
 *
 * Built from the shared exact prefill; layers < skip_layers use the `full`
 * method (the method itself never sees them). A later turn's prefill attends,
 * per query head, to what the method retains plus the new tokens, then each
 * layer's state is extended (methods.md §6). */
#ifndef KB_METHODSET_H
#define KB_METHODSET_H

#include "methods/backend.h"
#include "methods/method.h"
#include "methods/prefill.h"

typedef struct kb_methodset kb_methodset;

/* Sums over layers of kb_account (per-layer means averaged). */
typedef struct kb_cell_account {
    double resident_tokens; /* per KV head, mean over layers */
    double resident_bytes;  /* all layers */
    double read_tokeq;      /* per KV head per step, mean over layers */
    double approx_tokeq;    /* the approximation's part (in either mode), per KV head, mean over layers */
    double read_bytes;      /* all layers, last step */
    double attended;        /* per query head, mean over layers */
    double select_seconds;  /* all layers, cumulative since the build (kb_account) */
    double upkeep_seconds;  /* all layers, cumulative: the page-summary part of select_seconds */
} kb_cell_account;

/* A method context for a model's shape: L_prompt and N_new set S =
 * min(L_prompt + N_new, n_ctx) (methods.md notation). */
kb_method_ctx method_ctx_make(int n_layers, int Hq, int Hkv, int D, kb_dtype kv_dtype, int n_ctx,
                              int L_prompt, int N_new);

/* At most the bytes of the selection buffers that a cell of p keeps over
 * n_layers layers of Hq query heads at a cache of `tokens` slots: per layer
 * of the method (those at or above skip_layers) and selection row, the
 * selected slots, their positions and the method's own chosen-slot scratch,
 * each sized by the slots a step can select (the budget, or QUEST's page,
 * clamped to the cache length) and grown by doubling (so at most twice the
 * cache); 0 for a method that does not select per step. The memory checks
 * before a sweep's samples add it to the K/V caches. */
double methodset_select_bytes(const kb_method_params *p, int n_layers, int Hq, long tokens);

/* The parameters whose range depends on the model: skip_layers must leave
 * the method a layer (< n_layers) and r may not exceed the head dim D.
 * KB_EINPUT naming the key; the caller names the method and where its
 * parameters came from. methodset_build checks them again; a command checks
 * them first, before the work that needs only the model (prefill). */
int methodset_check_model(const kb_method_params *p, int n_layers, int D, kb_err *err);

/* ctx: model-wide fields (n_layers, Hq, Hkv, D, kv_dtype, L_prompt, N_new, S,
 * n_ctx); the layer field is filled per layer. */
int methodset_build(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill *pf,
                    kb_methodset **out, kb_err *err);
/* A prefill produced one layer at a time (bench methods' children, so that a
 * long context's filled cache and the method's copy of it need not coexist):
 * load(u, l, err) makes layer l of the prefill valid before that layer's
 * state is built; release(u, l) may then free it (NULL: keep it). A method's
 * layer_init reads only its own layer's view and keeps no pointer into it
 * (tests/unit/test_methodset.c frees each layer after its build). */
typedef struct kb_layer_source {
    int (*load)(void *u, int layer, kb_err *err);
    void (*release)(void *u, int layer);
    void *u;
} kb_layer_source;
int methodset_build_layers(const kb_method_params *p, const kb_method_ctx *ctx, const kb_prefill *pf,
                           const kb_layer_source *src, kb_methodset **out, kb_err *err);
/* The backend: decode goes to each layer's method; prefill is a later turn's
 * new tokens (any number of chunks), attending per query head to retained()
 * plus the turn's tokens so far. methodset_end_turn() then hands each layer
 * the whole turn (its K/V and last window queries) through ops->extend. */
kb_attn_backend methodset_backend(kb_methodset *m);
int methodset_end_turn(kb_methodset *m, kb_err *err);
long methodset_mark(kb_methodset *m);
void methodset_rollback(kb_methodset *m, long mark);
void methodset_account(kb_methodset *m, kb_cell_account *acc);
/* Per-layer accounting of the last step (selected indices for fidelity). */
void methodset_layer_account(kb_methodset *m, int layer, kb_account *acc);
/* The state of a layer and its ops (fidelity instruments read the cache). */
const kb_method_ops *methodset_layer_ops(kb_methodset *m, int layer);
void *methodset_layer_state(kb_methodset *m, int layer);
void methodset_free(kb_methodset *m);

#endif
