/* rundir.h - what a run directory holds, and clearing what an earlier run
 * left there: run.json, samples.csv, summary.csv, latency.csv, and the
 * figures of `kvbench plot` in plots/, listed by plots/plots.json. */
#ifndef KB_RUNDIR_H
#define KB_RUNDIR_H

#include "kernels/kb_base.h"

/* The figures' manifest, relative to the run directory. */
#define KB_PLOTS_MANIFEST "plots/plots.json"

/* The files plots/plots.json of run directory dir lists (names inside plots/;
 * an entry that is not a plain .dat/.png/.svg name is skipped, so a damaged
 * or hand-edited manifest cannot name a file elsewhere). *names gets n
 * strings to free with the array; 0 names when there is no manifest or it is
 * not one (nothing is listed, so nothing is removed). */
void plots_listed(const char *dir, char ***names, int *n);
/* Removes the figures plots/plots.json lists, then the manifest, then plots/
 * if it is empty; files kvbench did not list stay. KB_ERUNTIME naming the
 * file when one cannot be removed. */
int plots_clear(const char *dir, kb_err *err);
/* Removes the replay traces of traces/ (--dump-trace): in each directory
 * there (not a symbolic link to one), the files a trace consists of, then the
 * directory and traces/ when empty; other files stay. KB_ERUNTIME naming the file when one cannot be
 * removed. */
int traces_clear(const char *dir, kb_err *err);
/* Whether a run.json of this kind describes table (samples.csv, summary.csv,
 * latency.csv): a bench methods run's (kind "bench_methods") only latency.csv,
 * a sweep's or a merge's (no kind) every table. */
int run_kind_has_table(const char *kind, const char *table);
/* Refuses the tables of dir that no run.json there describes: samples.csv,
 * summary.csv, latency.csv (only samples.csv when samples_only) with no
 * run.json beside them (a merge or a copy cut short: their rows cannot be
 * checked, and a new run would remove them), or beside the run.json of a
 * `bench methods` run, which writes only latency.csv (run_kind_has_table). A
 * run.json that is not JSON is left to the caller. KB_EINPUT naming the first
 * such table, its message ending with advice (what the user can do); 0 when
 * there is none. Used by sweep, merge and bench methods before they write. */
int run_dir_check_tables(const char *dir, int samples_only, const char *advice, kb_err *err);
/* Removes the temporaries (atomic_clean_stale) of run.json, samples.csv,
 * summary.csv and latency.csv in dir that a killed kvbench left; returns the
 * count. */
int run_dir_clean_stale(const char *dir);
/* Removes what a previous run left in the run directory dir, before a new run
 * (not --resume) writes its run.json there: run.json first (dir then holds no
 * run), then samples.csv, summary.csv, latency.csv, the figures
 * (plots_clear) and the traces (traces_clear). Otherwise the old rows stay until the new run's first cell
 * replaces them, a --resume after a crash before that cell takes them as the
 * new run's (same cells, another model or seed), and what the new run never
 * writes (latency.csv, figures) stays beside it as if it were its own. A
 * missing file is fine; KB_ERUNTIME naming the file otherwise. */
int run_dir_clear(const char *dir, kb_err *err);

#endif
