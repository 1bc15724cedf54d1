/* trace.h - replay traces of one layer (methods.md §9): the arrays a
 * method needs to be run again outside the model, as .npy files in a
 * directory, so anyone can check a method against another implementation
 * on identical inputs (`kvbench replay`).
 *
 * Files (little-endian f32, C order): k.npy, v.npy [L][Hkv][D] (post-RoPE
 * prompt keys/values at positions 0..L-1), qwin.npy [W][Hq][D] (the last W
 * prompt queries, positions L-W..L-1), q.npy [N][Hq][D], knew.npy,
 * vnew.npy [N][Hkv][D] (decode step i at position L+i), and meta.json
 * {"max_new": N_new, "S": S, "layer": layer, "kv_dtype": "f16"}: k.npy and
 * v.npy hold the cache's rows (rounded to kv_dtype, the cache type of the
 * run), knew/vnew the step's K/V before the cache rounds them, so a replay in
 * kv_dtype reproduces the run (kv_dtype is optional when reading). */
#ifndef KB_TRACE_H
#define KB_TRACE_H

#include "methods/method.h"

typedef struct kb_trace {
    int L, W, N;           /* prompt tokens, window queries, decode steps */
    int Hq, Hkv, D;
    int max_new;           /* N_new of the method context */
    int S;                 /* max sequence of the method context */
    int layer;             /* model layer the trace comes from (0 if unknown) */
    int kv_dtype;          /* kb_dtype of the run's cache (-1 if unknown) */
    float *k, *v;          /* [L][Hkv][D] */
    float *qwin;           /* [W][Hq][D] */
    float *q;              /* [N][Hq][D] */
    float *knew, *vnew;    /* [N][Hkv][D] */
    int cap;               /* decode steps allocated */
} kb_trace;

/* The files of a trace directory: the six arrays in the order above, then
 * meta.json (trace_write writes them; a new run's traces_clear removes them). */
#define KB_TRACE_NFILES 7
extern const char *const kb_trace_files[KB_TRACE_NFILES];

/* Collecting a trace (what the engine does for --dump-trace LAYER):
 * trace_init, trace_set_prefill (K/V of the layer's prefill view converted
 * to f32 and its last W queries), trace_add_step once per decode step of
 * that layer, trace_write, trace_free. */
void trace_init(kb_trace *t, int Hq, int Hkv, int D, int max_new, int S, int layer);
int trace_set_prefill(kb_trace *t, const kb_prefill_view *pv, int W, kb_err *err);
/* q [Hq][D], k and v [Hkv][D] f32 of one decode step. */
void trace_add_step(kb_trace *t, const float *q, const float *k, const float *v);

/* Writes the seven files into dir (created if needed), all or none. */
int trace_write(const char *dir, const kb_trace *t, kb_err *err);
/* Reads and validates a trace directory (shapes consistent, W <= L, Hq a
 * multiple of Hkv, meta.json with integer max_new >= 0 and S >= 1, optional
 * layer >= 0 and kv_dtype "f32" / "f16" / "bf16"). Errors name the file and
 * what was expected. */
int trace_read(const char *dir, kb_trace *t, kb_err *err);
/* KB_EINPUT unless every value of k, v, knew and vnew fits cache type dt
 * (rounds to a finite value: |x| < 65520 for f16); the error names the file
 * in dir, the element, the value, dt and where dt came from (from, e.g.
 * "meta.json kv_dtype"). */
int trace_check_dtype(const char *dir, const kb_trace *t, kb_dtype dt, const char *from, kb_err *err);
void trace_free(kb_trace *t);

#endif
