/* bench.h - `kvbench bench` parts and helpers shared by them. Benchmarks
 * report medians of repeated runs and ratios measured in the same run. */
#ifndef KB_BENCH_H
#define KB_BENCH_H

#include <stdint.h>

#include "harness/config.h"

int bench_engine(int argc, char **argv);
int bench_methods(int argc, char **argv);

/* ---- the latency measurement behind `bench methods` and the sweep's
 * `latency` part (harness/bench_methods.c; docs/PERFORMANCE.md) ---- */

#define KB_LAT_MAX_CTX 16

typedef enum kb_fill {
    KB_FILL_AUTO = 0, /* random for synthetic models, prefill for GGUF files */
    KB_FILL_RANDOM,   /* random K/V values and window queries */
    KB_FILL_PREFILL,  /* the model's exact prefill of random token ids */
} kb_fill;

typedef struct kb_lat_opts {
    const char *cmd;                  /* "bench methods" / "sweep" (messages) */
    const char *model;                /* model spec (a path or synthetic:<preset>) */
    int contexts[KB_LAT_MAX_CTX], n_contexts; /* tokens in the cache when decode starts */
    int decode_tokens;                /* decode steps per repetition (= N_new) */
    int reps;                         /* timed repetitions (medians reported) */
    int rounds;                       /* every cell this many times, interleaved (0 = 1) */
    kb_dtype kv;                      /* KV cache type */
    int threads;                      /* 0 = all cores */
    kb_fill fill;
    const char *out_dir;              /* NULL: print only; else DIR/latency.csv */
    int manifest;                     /* also write DIR/run.json (bench methods, not sweeps) */
    int quiet;                        /* no progress / table on stdout and stderr */
    const char *banner;               /* a line printed on stdout before the table, once the model
                                         and the contexts are checked (NULL: none) */
} kb_lat_opts;

/* Measures every cell at every context (one child process per cell) and
 * writes out_dir/latency.csv (atomically, rewritten after each context).
 * Errors: KB_EINPUT for a context the model or the memory cannot take (the
 * largest context runs first, so nothing is written then), KB_ERUNTIME. */
int bench_latency(const kb_lat_opts *o, const kb_cell *cells, int n_cells, kb_err *err);
/* Column names of latency.csv. */
extern const char *const kb_latency_cols[];
extern const int kb_latency_ncols;

/* The distinct values of in[0..n), in first-seen order, into out (NULL:
 * only counted); returns how many (the contexts a latency part measures). */
int bench_distinct(const int *in, int n, int *out);
/* Median of v[0..n) (sorts v). */
double bench_median(double *v, int n);
/* The context a latency cell of `ctx` tokens decodes from, with `decode`
 * steps, in a model of n_ctx tokens: ctx itself, or n_ctx - decode for a
 * context at the model's limit (room for the decode, as bench engine); -1
 * when it cannot fit. */
int bench_context_fit(int ctx, int decode, int n_ctx);
/* KB_EINPUT naming both values when two of ctx[0..n) fit (bench_context_fit)
 * to the same context, which would give two identical rows. */
int bench_contexts_distinct(const int *ctx, int n, int decode, int n_ctx, kb_err *err);
/* "512,2048" -> out[]; returns count or -1 after printing an error. */
int bench_parse_list(const char *cmd, const char *opt, const char *s, int *out, int max, int lo,
                     int hi);
void bench_random_tokens(int32_t *t, int n, int vocab, uint64_t seed);
/* Sets OpenMP and OpenBLAS thread counts. */
void bench_set_threads(int n);

#endif
