/* trace.h - replay traces of one layer (methods.md §9): the arrays a
 * method needs to be run again outside the model, as .npy files in a
 * directory, so anyone can check a method against another implementation
 * on identical inputs (`kvbench replay`).
 *
 * Files (little-endian f32, C order): k.npy, v.npy [L][Hkv][D] (post-RoPE
 * prompt keys/values at positions 0..L-1), qwin.npy [W][Hq][D] (the last W
 * prompt queries, positions L-W..L-1), q.npy [N][Hq][D], knew.npy,
 * vnew.npy [N][Hkv][D] (decode step i at position L+i), and meta.json
 * {"max_new": N_new, "S": S, "layer": layer, "kv_dtype": "f16", "git_commit":
 * ..., "model": {"name": ..., "sha256": ...}, "task": ..., "sample": ...,
 * "cell": {...}}: k.npy and v.npy hold the cache's rows (rounded to kv_dtype,
 * the cache type of the run), knew/vnew the step's K/V before the cache rounds
 * them, so a replay in kv_dtype reproduces the run. git_commit is the kvbench
 * that wrote the trace, model the model it ran, task, sample and cell (the
 * cell's resolved method parameters) the sweep cell traced (a sweep's traces
 * only). Every key after layer is optional when reading (older traces). */
#ifndef KB_TRACE_H
#define KB_TRACE_H

#include <cjson/cJSON.h>

#include "methods/method.h"

typedef struct kb_trace {
    int L, W, N;           /* prompt tokens, window queries, decode steps */
    int Hq, Hkv, D;
    int max_new;           /* N_new of the method context */
    int S;                 /* max sequence of the method context */
    int layer;             /* model layer the trace comes from (0 if unknown) */
    int kv_dtype;          /* kb_dtype of the run's cache (-1 if unknown) */
    int n_layers;          /* the model's layer count (meta.json model.layers; 0 if unknown) */
    float *k, *v;          /* [L][Hkv][D] */
    float *qwin;           /* [W][Hq][D] */
    float *q;              /* [N][Hq][D] */
    float *knew, *vnew;    /* [N][Hkv][D] */
    int cap;               /* decode steps allocated */
    cJSON *origin;         /* meta.json's git_commit, model, task, sample, cell:
                              those present, in that order (NULL: none); owned */
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

/* Where the trace comes from, for meta.json: the model's name, sha256 and
 * layer count (replay checks skip_layers against it) and, for a sweep's
 * trace, the task, the sample id and the cell (cell: an object that t owns
 * from here; task, sample and cell NULL otherwise). */
void trace_set_origin(kb_trace *t, const char *model_name, const char *model_sha256, int n_layers,
                      const char *task, const char *sample, cJSON *cell);
/* Writes the seven files into dir (created if needed), all or none; meta.json
 * gets this build's git_commit and t->origin's model, task, sample, cell. */
int trace_write(const char *dir, const kb_trace *t, kb_err *err);
/* Reads and validates a trace directory (shapes consistent, W <= L, Hq a
 * multiple of Hkv, meta.json with integer max_new >= 0 and S >= 1, optional
 * layer >= 0, kv_dtype "f32" / "f16" / "bf16", git_commit, task and sample
 * strings, model {"name", "sha256"} and cell objects). Errors name the file
 * and what was expected. */
int trace_read(const char *dir, kb_trace *t, kb_err *err);
/* KB_EINPUT unless every value of k, v, knew and vnew fits cache type dt
 * (rounds to a finite value: |x| < 65520 for f16); the error names the file
 * in dir, the element, the value, dt and where dt came from (from, e.g.
 * "meta.json kv_dtype"). */
int trace_check_dtype(const char *dir, const kb_trace *t, kb_dtype dt, const char *from, kb_err *err);
void trace_free(kb_trace *t);

#endif
