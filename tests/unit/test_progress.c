/* test_progress.c - the progress line (harness/progress.h) with a stubbed
 * clock and terminal: progress.c is compiled into this test with kb_now and
 * isatty replaced, so no test here times anything. Expected lines are worked
 * by hand from progress.h's definitions: percent = floor(100 * done / total),
 * a 20-cell bar of one '#' per 5%, ETA = elapsed / done * (total - done),
 * times as "Ns" under a minute, "MmSSs" under an hour, "HhMMm" up to 10^7 s,
 * "?" past that, for a negative time, or with nothing done yet; without a
 * terminal, a line at most every 5 s but always for the last unit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "check.h"
#include "kernels/kb_base.h"

static double fake_now;
static int fake_tty;
static double fake_clock(void) { return fake_now; }
static int fake_isatty(int fd) { return fd == 2 && fake_tty; }

#define kb_now fake_clock
#define isatty fake_isatty
#include "harness/progress.c"
#undef kb_now
#undef isatty

/* What progress writes on stderr while fn runs. */
static char captured[4096];
static int saved_fd = -1;
static FILE *cap_file;

static void cap_begin(void) {
    fflush(stderr);
    cap_file = tmpfile();
    saved_fd = dup(2);
    dup2(fileno(cap_file), 2);
}

static const char *cap_end(void) {
    fflush(stderr);
    dup2(saved_fd, 2);
    close(saved_fd);
    size_t n = 0;
    rewind(cap_file);
    n = fread(captured, 1, sizeof captured - 1, cap_file);
    captured[n] = 0;
    fclose(cap_file);
    return captured;
}

/* One update at time `at` (seconds after init) of done/total, not a terminal. */
static const char *line_at(long total, long done, double at, const char *what) {
    kb_progress p;
    fake_tty = 0;
    fake_now = 1000.0;
    progress_init(&p, total);
    fake_now = 1000.0 + at;
    cap_begin();
    progress_update(&p, done, what);
    return cap_end();
}

static void check_line(long total, long done, double at, const char *what, const char *want) {
    const char *got = line_at(total, done, at, what);
    CHECK_MSG(!strcmp(got, want), "progress %ld/%ld at %g s:\n  got  '%s'\n  want '%s'", done, total, at, got, want);
}

static void test_times(void) {
    /* elapsed 10 s, 1 of 4 done: ETA 10 / 1 * 3 = 30 s; 25% */
    check_line(4, 1, 10, "a", "progress: 1/4 (25%), 10s elapsed, ETA 30s: a\n");
    /* 59.4 s rounds to 59s; 60 s is a minute (1m00s) */
    check_line(2, 2, 59.4, "b", "progress: 2/2 (100%), 59s elapsed, ETA 0s: b\n");
    /* rounded before the unit is chosen: 59.7 s is 1m00s (it printed "60s" until the
     * review of 2026-12-06), 3599.6 s is 1h00m, 119.5 s is 2m00s */
    check_line(2, 2, 59.7, "b", "progress: 2/2 (100%), 1m00s elapsed, ETA 0s: b\n");
    check_line(2, 2, 3599.6, "b", "progress: 2/2 (100%), 1h00m elapsed, ETA 0s: b\n");
    check_line(2, 2, 119.5, "b", "progress: 2/2 (100%), 2m00s elapsed, ETA 0s: b\n");
    check_line(2, 1, 30, "c", "progress: 1/2 (50%), 30s elapsed, ETA 30s: c\n");
    check_line(3, 1, 60, "d", "progress: 1/3 (33%), 1m00s elapsed, ETA 2m00s: d\n");
    /* 3599 s = 59 min 59 s; 3600 s = 1 h 00 min */
    check_line(2, 1, 3599, "e", "progress: 1/2 (50%), 59m59s elapsed, ETA 59m59s: e\n");
    check_line(4, 2, 3600, "f", "progress: 2/4 (50%), 1h00m elapsed, ETA 1h00m: f\n");
    /* 7507 s = 2 h 5 min 7 s: hours and minutes, the seconds dropped */
    check_line(2, 1, 7507, "g", "progress: 1/2 (50%), 2h05m elapsed, ETA 2h05m: g\n");
    /* 199 of 200 after 199 s: 1 s left, and the percent floors to 99 */
    check_line(200, 199, 199, "", "progress: 199/200 (99%), 3m19s elapsed, ETA 1s: \n");
    /* nothing done yet: no ETA ("?"); the description may be NULL */
    check_line(5, 0, 7, NULL, "progress: 0/5 (0%), 7s elapsed, ETA ?: \n");
    /* an ETA past 10^7 s is "?"; exactly 10^7 s is still a time (2777h46m) */
    check_line(1000001, 1, 10, "h", "progress: 1/1000001 (0%), 10s elapsed, ETA 2777h46m: h\n");
    check_line(1000002, 1, 10, "h", "progress: 1/1000002 (0%), 10s elapsed, ETA ?: h\n");
    /* a total of 0: nothing to do, 100% */
    check_line(0, 0, 1, "z", "progress: 0/0 (100%), 1s elapsed, ETA ?: z\n");
}

static void test_throttle(void) {
    /* not a terminal: an update within 5 s of the last line prints nothing,
     * unless it is the last unit; at 5 s and after, a line */
    kb_progress p;
    fake_tty = 0;
    fake_now = 0;
    progress_init(&p, 10);
    cap_begin();
    fake_now = 4.9;
    progress_update(&p, 1, "x");
    CHECK_EQ_INT(p.done, 1);
    fake_now = 5.0;
    progress_update(&p, 2, "y");
    fake_now = 9.9; /* 4.9 s after the last line */
    progress_update(&p, 3, "z");
    fake_now = 10.0;
    progress_update(&p, 10, "w"); /* the last: printed however soon */
    progress_end(&p);             /* nothing to end without a terminal */
    const char *got = cap_end();
    const char *want = "progress: 2/10 (20%), 5s elapsed, ETA 20s: y\n"
                       "progress: 10/10 (100%), 10s elapsed, ETA 0s: w\n";
    CHECK_MSG(!strcmp(got, want), "got '%s'", got);
}

static void test_tty(void) {
    /* a terminal: every update redraws the line in place (\r), a bar of 20
     * cells with one '#' per 5%, the description padded or cut to 40
     * characters; progress_end ends the line */
    kb_progress p;
    fake_tty = 1;
    fake_now = 0;
    progress_init(&p, 20);
    cap_begin();
    fake_now = 1;
    progress_update(&p, 7, "task"); /* 35%: 7 cells */
    fake_now = 1.4;
    progress_update(&p, 20, "0123456789012345678901234567890123456789XYZ");
    progress_end(&p);
    const char *got = cap_end();
    char want[512];
    snprintf(want, sizeof want, "\r[%s] %3d%% 7/20  1s elapsed, ETA 2s  %-40s\r[%s] 100%% 20/20  1s elapsed, ETA 0s  %s\n",
             "#######.............", 35, "task", "####################",
             "0123456789012345678901234567890123456789");
    CHECK_MSG(!strcmp(got, want), "got\n'%s'\nwant\n'%s'", got, want);
}

int main(void) {
    test_times();
    test_throttle();
    test_tty();
    return check_summary("test_progress");
}
