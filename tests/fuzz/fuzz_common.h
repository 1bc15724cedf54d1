/* fuzz_common.h - shared by the libFuzzer targets (tests/fuzz/fuzz_*.c) and
 * by tests/unit/test_fuzz_regressions.c, which includes the targets to replay
 * the saved crash inputs through the very same entry points.
 *
 * Each target file defines `int fuzz_<name>_one(const uint8_t *d, size_t n)`
 * (one input, returns 0) and, unless FUZZ_REPLAY is defined, libFuzzer's
 * LLVMFuzzerTestOneInput calling it.
 *
 * Inputs that the code reads from files are written to a per-process folder
 * in /dev/shm (a tmpfs: no disk traffic), /dev/shm/kvbench-fuzz.<pid>.XXXXXX,
 * removed at exit; tests/fuzz/run.sh removes those of dead processes (a
 * crashing fuzzer does not run its atexit handlers). */
#ifndef KB_FUZZ_COMMON_H
#define KB_FUZZ_COMMON_H

#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "kernels/kb_base.h"

#define FUZZ_UNUSED __attribute__((unused))

/* A violated property (not a sanitizer finding, e.g. decode(encode(x)) != x):
 * the fuzzer aborts so libFuzzer saves the input; the regression test counts
 * it (fuzz_failures) and goes on to the next file. */
static int fuzz_failures FUZZ_UNUSED;

FUZZ_UNUSED static void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), unused));
FUZZ_UNUSED static void fuzz_fail(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "FUZZ PROPERTY VIOLATED: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
    fuzz_failures++;
#ifndef FUZZ_REPLAY
    abort();
#endif
}

/* FUZZ_ASSERT(cond, "format", args...): the format is required. */
#define FUZZ_ASSERT(cond, fmt, ...)                                                      \
    do {                                                                                 \
        if (!(cond))                                                                     \
            fuzz_fail("%s:%d: %s: " fmt, __FILE__, __LINE__, #cond, ##__VA_ARGS__);      \
    } while (0)

/* A library call that failed must say why: a KB_EINPUT/KB_ERUNTIME code and a
 * non-empty message (docs: "errors name the file/key/line"). */
#define FUZZ_ASSERT_ERR(rc, err)                                                        \
    FUZZ_ASSERT(((rc) == KB_EINPUT || (rc) == KB_ERUNTIME) && (err).msg[0],            \
                "rc %d, message '%s'", (int)(rc), (err).msg)

static char fuzz_dir_path[256];

FUZZ_UNUSED static int fuzz_rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st;
    (void)ftw;
    if (flag == FTW_DP) rmdir(path);
    else unlink(path);
    return 0;
}

FUZZ_UNUSED static void fuzz_dir_remove(void) {
    if (!fuzz_dir_path[0]) return;
    nftw(fuzz_dir_path, fuzz_rm_one, 8, FTW_DEPTH | FTW_PHYS);
    fuzz_dir_path[0] = 0;
}

/* The per-process scratch folder (created on first use). */
FUZZ_UNUSED static const char *fuzz_dir(void) {
    if (fuzz_dir_path[0]) return fuzz_dir_path;
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(fuzz_dir_path, sizeof fuzz_dir_path, "%s/kvbench-fuzz.%ld.XXXXXX", base,
             (long)getpid());
    if (!mkdtemp(fuzz_dir_path)) {
        fprintf(stderr, "fuzz: cannot create %s: %s\n", fuzz_dir_path, strerror(errno));
        abort();
    }
    atexit(fuzz_dir_remove);
    return fuzz_dir_path;
}

/* path = <scratch>/<name>; returns path. */
FUZZ_UNUSED static const char *fuzz_path(char *path, size_t cap, const char *name) {
    snprintf(path, cap, "%s/%s", fuzz_dir(), name);
    return path;
}

/* Writes n bytes to path (replacing it); aborts on an I/O error, which is the
 * harness's failure, not the code under test's. */
FUZZ_UNUSED static void fuzz_write(const char *path, const void *d, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        fprintf(stderr, "fuzz: cannot write %s: %s\n", path, strerror(errno));
        abort();
    }
    const char *p = d;
    while (n) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            fprintf(stderr, "fuzz: write %s: %s\n", path, strerror(errno));
            abort();
        }
        p += w;
        n -= (size_t)w;
    }
    close(fd);
}

FUZZ_UNUSED static void fuzz_mkdir(const char *path) {
    if (mkdir(path, 0700) && errno != EEXIST) {
        fprintf(stderr, "fuzz: mkdir %s: %s\n", path, strerror(errno));
        abort();
    }
}

/* stdout of the CLI entry points (cmd_score, cmd_tokenize) goes to /dev/null
 * while fuzzing; returns the saved descriptor for fuzz_stdout_restore. */
FUZZ_UNUSED static int fuzz_stdout_null(void) {
    fflush(stdout);
    int saved = dup(1);
    int nul = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (saved < 0 || nul < 0) abort();
    dup2(nul, 1);
    close(nul);
    return saved;
}

FUZZ_UNUSED static void fuzz_stdout_restore(int saved) {
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
}

/* FILE for output that only has to be produced, not read (gguf_print). */
FUZZ_UNUSED static FILE *fuzz_devnull(void) {
    static FILE *f;
    if (!f) f = fopen("/dev/null", "w");
    if (!f) abort();
    return f;
}

/* 1 when s[0..n) is valid UTF-8 (shortest forms, no surrogates, <= U+10FFFF). */
FUZZ_UNUSED static int fuzz_utf8_valid(const uint8_t *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        uint8_t c = s[i];
        size_t k;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            k = 1;
            cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            k = 2;
            cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            k = 3;
            cp = c & 0x07;
        } else {
            return 0;
        }
        if (n - i <= k) return 0; /* truncated sequence */
        for (size_t j = 1; j <= k; j++) {
            if ((s[i + j] & 0xC0) != 0x80) return 0;
            cp = cp << 6 | (s[i + j] & 0x3F);
        }
        if ((k == 2 && cp < 0x800) || (k == 3 && cp < 0x10000) || cp > 0x10FFFF ||
            (cp >= 0xD800 && cp <= 0xDFFF))
            return 0;
        i += k + 1;
    }
    return 1;
}

#endif
