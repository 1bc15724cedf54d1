/* wrapbe.h - attention backends that wrap another one to observe it:
 * a tracer (records one layer's decode-step Q/K/V for `kvbench replay`) and a
 * fidelity probe (methods.md §10: per step and layer, recall of the oracle
 * top-k, attention mass covered and output error against exact attention
 * over the full history of the same sequence). */
#ifndef KB_WRAPBE_H
#define KB_WRAPBE_H

#include "methods/backend.h"
#include "methods/fidelity.h"
#include "methods/methodset.h"
#include "methods/prefill.h"
#include "methods/trace.h"

typedef struct kb_trace_be {
    kb_attn_backend inner;
    kb_trace *t; /* records decode steps of layer t->layer */
} kb_trace_be;

kb_attn_backend trace_be_wrap(kb_trace_be *w, kb_attn_backend inner, kb_trace *t);

typedef struct kb_fid_be {
    kb_attn_backend inner;
    kb_methodset *ms;
    int n_layers, Hq, Hkv, D;
    kb_kvstream *full;      /* [n_layers][Hkv] exact history: the prefill + every decoded token */
    double recall, mass, rel_err; /* sums over (step, layer) */
    long n;                 /* (step, layer) pairs measured */
    double seconds;         /* time spent measuring, not in the method: the decode's timers leave it out */
    int failed;
    kb_err err;             /* first failure */
} kb_fid_be;

/* Starts from a copy of the prefill's K/V (the history the method was built from). */
kb_attn_backend fid_be_wrap(kb_fid_be *w, kb_attn_backend inner, kb_methodset *ms,
                            const kb_prefill *pf, int steps); /* steps: the most decode steps to come */
void fid_be_free(kb_fid_be *w);

#endif
