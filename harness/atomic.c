/* atomic.c - temp file + fsync + rename (atomic.h). */
#include "harness/atomic.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

int atomic_open(kb_atomic_file *a, const char *path, kb_err *err) {
    memset(a, 0, sizeof *a);
    if (strlen(path) >= sizeof a->path) return kb_fail(err, KB_EINPUT, "%s: path too long", path);
    strcpy(a->path, path);
    snprintf(a->tmp, sizeof a->tmp, "%s.tmp.%ld", path, (long)getpid());
    a->f = fopen(a->tmp, "wb");
    if (!a->f)
        return kb_fail(err, KB_ERUNTIME, "%s: cannot create: %s", a->tmp, strerror(errno));
    return 0;
}

int atomic_close(kb_atomic_file *a, kb_err *err) {
    if (!a->f) return kb_fail(err, KB_ERUNTIME, "%s: not open", a->path);
    int bad = fflush(a->f) != 0 || ferror(a->f);
    if (!bad) bad = fsync(fileno(a->f)) != 0;
    int e = errno;
    bad |= fclose(a->f) != 0;
    a->f = NULL;
    if (bad) {
        unlink(a->tmp);
        a->tmp[0] = 0;
        return kb_fail(err, KB_ERUNTIME, "%s: write failed: %s", a->path, strerror(e));
    }
    return 0;
}

int atomic_rename(kb_atomic_file *a, kb_err *err) {
    if (a->f || !a->tmp[0]) return kb_fail(err, KB_ERUNTIME, "%s: not closed", a->path);
    int rc = 0;
    if (rename(a->tmp, a->path)) {
        rc = kb_fail(err, KB_ERUNTIME, "%s: rename failed: %s", a->path, strerror(errno));
        unlink(a->tmp);
    }
    a->tmp[0] = 0;
    return rc;
}

int atomic_commit(kb_atomic_file *a, kb_err *err) {
    int rc = atomic_close(a, err);
    return rc ? rc : atomic_rename(a, err);
}

void atomic_abort(kb_atomic_file *a) {
    if (a->f) {
        fclose(a->f);
        a->f = NULL;
    }
    if (a->tmp[0]) unlink(a->tmp);
    a->tmp[0] = 0;
}

int atomic_write(const char *path, const void *data, size_t len, kb_err *err) {
    kb_atomic_file a;
    int rc = atomic_open(&a, path, err);
    if (rc) return rc;
    if (len && fwrite(data, 1, len, a.f) != len) {
        int e = errno;
        atomic_abort(&a);
        return kb_fail(err, KB_ERUNTIME, "%s: write failed: %s", path, strerror(e));
    }
    return atomic_commit(&a, err);
}

int make_dirs(const char *path, kb_err *err) {
    char buf[4096];
    if (strlen(path) >= sizeof buf) return kb_fail(err, KB_EINPUT, "%s: path too long", path);
    strcpy(buf, path);
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(buf, 0777) && errno != EEXIST)
            return kb_fail(err, KB_EINPUT, "%s: cannot create directory: %s", buf,
                           strerror(errno));
        *p = '/';
    }
    if (mkdir(buf, 0777) && errno != EEXIST)
        return kb_fail(err, KB_EINPUT, "%s: cannot create directory: %s", buf, strerror(errno));
    return check_out_path(buf, 1, err); /* it exists now: a writable directory? */
}

int dir_lock(const char *dir, int *fd, kb_err *err) {
    *fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0) return kb_fail(err, KB_EINPUT, "%s: cannot open: %s", dir, strerror(errno));
    if (flock(*fd, LOCK_EX | LOCK_NB)) {
        int e = errno;
        close(*fd);
        *fd = -1;
        if (e == EWOULDBLOCK)
            return kb_fail(err, KB_EINPUT, "%s: another kvbench process is writing this directory "
                           "(wait for it to finish, or use another output directory)", dir);
        /* a file system without locks (ENOLCK, EOPNOTSUPP: some network and FUSE
         * mounts) must not make the run impossible: say so and go on */
        fprintf(stderr, "kvbench: warning: %s: cannot lock the directory (%s); make sure no other "
                "kvbench process writes it at the same time\n", dir, strerror(e));
        return 0;
    }
    return 0;
}

void dir_unlock(int fd) {
    if (fd >= 0) close(fd); /* closing drops the lock */
}

const char *atomic_tmp_of(const char *entry, const char *name) {
    size_t l = strlen(name);
    if (strncmp(entry, name, l) || strncmp(entry + l, ".tmp.", 5)) return NULL;
    const char *num = entry + l + 5;
    for (const char *c = num; *c; c++)
        if (*c < '0' || *c > '9') return NULL;
    return *num ? num : NULL;
}

int atomic_clean_stale(const char *dir, const char *const *names, int n_names) {
    DIR *d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *num = NULL;
        for (int i = 0; i < n_names && !num; i++) num = atomic_tmp_of(e->d_name, names[i]);
        if (!num) continue; /* not a temporary of a file kvbench writes here */
        errno = 0;
        long pid = strtol(num, NULL, 10);
        if (pid <= 0 || errno) continue;
        /* a writer alive (EPERM: another user's process) */
        if (pid <= INT_MAX && pid != (long)getpid() && (kill((pid_t)pid, 0) == 0 || errno == EPERM)) continue;
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        if (unlink(path) == 0) n++;
    }
    closedir(d);
    return n;
}

/* 0 if a file can be made in dir, else the errno: a probe file is created and
 * removed, because access(W_OK) says yes to root where the write would fail
 * (/proc, /sys). */
static int dir_writable(const char *dir) {
    static unsigned long seq;
    char probe[4200];
    snprintf(probe, sizeof probe, "%s/.kvbench-probe-%ld-%lu", dir, (long)getpid(), seq++);
    int fd = open(probe, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) return errno ? errno : EACCES;
    close(fd);
    unlink(probe);
    return 0;
}

int check_dir_len(const char *dir, kb_err *err) {
    size_t n = strlen(dir);
    if (n <= KB_DIR_MAX) return 0;
    return kb_fail(err, KB_EINPUT, "%.60s...: a directory path of %zu bytes, expected at most %d (kvbench "
                   "names files inside it)", dir, n, KB_DIR_MAX);
}

int check_out_path(const char *path, int want_dir, kb_err *err) {
    struct stat st;
    if (!*path) return kb_fail(err, KB_EINPUT, "an empty output path");
    if (want_dir && check_dir_len(path, err)) return KB_EINPUT;
    size_t len = strlen(path);
    if (!want_dir && (path[len - 1] == '/' || !strcmp(path, ".") || !strcmp(path, "..") ||
                      (len >= 2 && !strcmp(path + len - 2, "/.")) || (len >= 3 && !strcmp(path + len - 3, "/.."))))
        return kb_fail(err, KB_EINPUT, "%s: names a directory, expected a file to write (a path not ending in "
                       "'/', '.' or '..')", path);
    if (stat(path, &st) == 0) {
        if (!want_dir && S_ISDIR(st.st_mode))
            return kb_fail(err, KB_EINPUT, "%s: is a directory, expected a file to write", path);
        if (want_dir && !S_ISDIR(st.st_mode))
            return kb_fail(err, KB_EINPUT, "%s: exists and is not a directory", path);
        int e;
        if (want_dir && (e = dir_writable(path)))
            return kb_fail(err, KB_EINPUT, "%s: directory is not writable: %s", path, strerror(e));
        if (want_dir) return 0;
    }
    /* the file (or the directory to make) goes into its parent, which must be
     * a writable directory; a directory path's missing ancestors are made */
    char parent[4096];
    if (strlen(path) >= sizeof parent) return kb_fail(err, KB_EINPUT, "%s: path too long", path);
    strcpy(parent, path);
    size_t n = strlen(parent);
    while (n > 1 && parent[n - 1] == '/') parent[--n] = 0;
    char *slash = strrchr(parent, '/');
    if (!slash) strcpy(parent, ".");
    else if (slash == parent) parent[1] = 0;
    else *slash = 0;
    if (stat(parent, &st) != 0) {
        if (want_dir) return check_out_path(parent, 1, err);
        return kb_fail(err, KB_EINPUT, "%s: directory %s does not exist", path, parent);
    }
    if (!S_ISDIR(st.st_mode)) return kb_fail(err, KB_EINPUT, "%s: %s is not a directory", path, parent);
    int e = dir_writable(parent);
    if (e) return kb_fail(err, KB_EINPUT, "%s: cannot write in %s: %s", path, parent, strerror(e));
    return 0;
}
