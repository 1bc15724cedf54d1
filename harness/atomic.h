/* atomic.h - output files that are never half-written: write to a temporary
 * file next to the target, fsync, then rename over the target. On error or
 * abort the temporary is removed and the target is left as it was. */
#ifndef KB_ATOMIC_H
#define KB_ATOMIC_H

#include <stdio.h>

#include "kernels/kb_base.h"

typedef struct kb_atomic_file {
    FILE *f;            /* write here */
    char path[4096];    /* final name */
    char tmp[4200];     /* temporary name */
} kb_atomic_file;

int atomic_open(kb_atomic_file *a, const char *path, kb_err *err);
/* Flush, fsync, rename. Returns KB_ERUNTIME (and removes the temp) on failure. */
int atomic_commit(kb_atomic_file *a, kb_err *err);
/* atomic_commit in two steps, for files that go into place together only when
 * every one is whole: atomic_close flushes, fsyncs and closes, leaving the
 * whole file at a->tmp; atomic_rename then renames it over the target. Each
 * removes the temp on failure (KB_ERUNTIME). */
int atomic_close(kb_atomic_file *a, kb_err *err);
int atomic_rename(kb_atomic_file *a, kb_err *err);
/* Removes the temp, open or closed, unless it was renamed; the target is left as it was. */
void atomic_abort(kb_atomic_file *a);
/* Writes len bytes to path atomically. */
int atomic_write(const char *path, const void *data, size_t len, kb_err *err);
/* The temporary of file `name` is named <name>.tmp.<pid> (atomic_open; plot's
 * gnuplot images too). atomic_tmp_of: if entry is such a temporary of name,
 * its pid digits, else NULL. */
const char *atomic_tmp_of(const char *entry, const char *name);
/* Removes temporaries left in dir by processes that died mid-write (SIGKILL):
 * files named <name>.tmp.<pid>, for a name of names[0..n_names) (the files
 * kvbench writes in dir, which each caller knows), whose pid is not running.
 * Any other file stays, however it is named: a user's notes.tmp.2024 is not
 * kvbench's. Returns the count. */
int atomic_clean_stale(const char *dir, const char *const *names, int n_names);
/* mkdir -p; the path must end up a writable directory, else KB_EINPUT (an
 * output path the user gave: exit 2) */
int make_dirs(const char *path, kb_err *err);
/* Before the work, for an output path the user gave: a file (want_dir 0) must
 * not be a directory nor name one (a path ending in '/', "." or "..") and
 * its directory must exist and be writable; a
 * directory (want_dir 1) must be a writable directory or be makeable under
 * one. Writable means a file could be made there: a probe file is created and
 * removed at once (nothing else is created). KB_EINPUT with the path on failure. */
int check_out_path(const char *path, int want_dir, kb_err *err);
/* A directory kvbench writes files into (or reads a run's files from) may be
 * at most KB_DIR_MAX bytes long: the names made inside it then fit their
 * buffers and are never cut short (a cut name is another file). KB_EINPUT
 * naming the start of the path otherwise; check_out_path (want_dir 1) checks
 * this too. */
#define KB_DIR_MAX 512
int check_dir_len(const char *dir, kb_err *err);
/* An exclusive advisory lock (flock) on the directory dir, held while *fd
 * stays open, so that two kvbench processes never write one run directory
 * (each rewrites whole tables: the last writer would drop the other's rows).
 * The kernel drops it when the process ends, however it ends. KB_EINPUT when
 * another process holds it; a file system without locks gives a warning and
 * 0 with *fd = -1. */
int dir_lock(const char *dir, int *fd, kb_err *err);
void dir_unlock(int fd);

#endif
