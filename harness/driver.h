/* driver.h - the sweep: prefill each sample once, reuse it for every
 * (method, params, budget) cell, decode greedily, score, account, and write
 * results/<run>/{samples,summary,latency}.csv and run.json. */
#ifndef KB_DRIVER_H
#define KB_DRIVER_H

#include "harness/table.h"
#include "kernels/kb_base.h"

typedef struct kb_sweep_opts {
    const char *config;      /* config file */
    const char *out_dir;     /* --out (default results/<name>) */
    const char *model;       /* --model (overrides the config's) */
    int resume;              /* --resume: continue a killed run */
    int force;               /* --force: overwrite / accept a changed config */
    int shard_i, shard_n;    /* --shard I/N (0/1 = everything) */
    int dump_trace_layer;    /* --dump-trace LAYER (-1 = off) */
    char *const *overrides;  /* --set KEY=VALUE */
    int n_overrides;
    int threads;             /* --threads (0 = config / all cores) */
    int dry_run;             /* --dry-run: print the plan and exit */
    int reprefill;           /* --reprefill: prefill again before every cell (to measure what
                                sharing the prefill saves; results are identical) */
} kb_sweep_opts;

/* Returns 0, KB_ERUNTIME, KB_EINPUT, or 130 when interrupted by SIGINT (what
 * was finished is kept and the tables are consistent). */
int sweep_run(const kb_sweep_opts *o, kb_err *err);

/* Column sets of the output tables (for readers: plot, merge, tests). */
extern const char *const kb_samples_cols[];
extern const int kb_samples_ncols;
extern const char *const kb_summary_cols[];
extern const int kb_summary_ncols;
/* Checks the rows of a samples.csv read back (a resumed run, merge's
 * shards): seq an integer in [0, n_samples) that belongs to shard I/N (seq %
 * N == I; N = 1 for an unsharded run), budget empty or a positive integer,
 * score (and score2 where set) a number in [0, 1]. The error names the file,
 * the data row (1 = the first row after the header) and the column. */
int samples_check(const kb_table *t, const char *path, long n_samples, int shard_i, int shard_n,
                  kb_err *err);

/* Checks the rows of a samples.csv read back (after samples_check) against
 * the run's cells: every row's (label, budget) is a cell of cfg and its
 * method that cell's; no (sample, cell, turn) twice; a cell's rows of one
 * sample are turns 0..k-1, k = turns[seq] when the plan is known (turns
 * non-NULL), else the same k for every cell of that sample. With complete,
 * every sample of shard I/N has every cell. Errors name the file and the
 * data row or the (seq, label, budget). */
struct kb_sweep_config;
int samples_check_cells(const kb_table *t, const char *path, const struct kb_sweep_config *cfg,
                        const int *turns, long n_samples, int shard_i, int shard_n, int complete,
                        kb_err *err);

/* SHA-256 (64 hex digits) of the plan's samples as the methods see them: ids,
 * texts, answers and scoring rules (run.json data.sha256; --resume and merge
 * require equal ones). */
struct kb_sample_list;
void samples_fingerprint(const struct kb_sample_list *l, char hex[65]);

/* Rebuilds summary.csv from samples.csv (used by sweep and merge); the
 * speedup's baseline is the first cell that runs baseline_method. */
int summary_write(const char *samples_csv, const char *summary_csv, const char *baseline_method,
                  kb_err *err);

#endif
