/* progress.c - progress bar with ETA (progress.h). */
#include "harness/progress.h"

#include <stdio.h>
#include <unistd.h>

#include "kernels/kb_base.h"

void progress_init(kb_progress *p, long total) {
    p->total = total;
    p->done = 0;
    p->t0 = p->last = kb_now();
    p->tty = isatty(2);
}

/* Rounded to the second before the unit is chosen: 59.7 s is 1m00s, not "60s". */
static void fmt_time(char *b, size_t cap, double s) {
    if (s < 0 || s > 1e7) {
        snprintf(b, cap, "?");
        return;
    }
    long r = (long)(s + 0.5);
    if (r < 60) snprintf(b, cap, "%lds", r);
    else if (r < 3600) snprintf(b, cap, "%ldm%02lds", r / 60, r % 60);
    else snprintf(b, cap, "%ldh%02ldm", r / 3600, r / 60 % 60);
}

void progress_update(kb_progress *p, long done, const char *what) {
    double now = kb_now();
    p->done = done;
    if (!p->tty && now - p->last < 5.0 && done < p->total) return;
    p->last = now;
    double el = now - p->t0, eta = done > 0 ? el / done * (p->total - done) : -1;
    char e1[32], e2[32];
    fmt_time(e1, sizeof e1, el);
    fmt_time(e2, sizeof e2, eta);
    int pct = p->total ? (int)(100.0 * done / p->total) : 100;
    if (p->tty) {
        char bar[21];
        int fill = pct / 5;
        for (int i = 0; i < 20; i++) bar[i] = i < fill ? '#' : '.';
        bar[20] = 0;
        fprintf(stderr, "\r[%s] %3d%% %ld/%ld  %s elapsed, ETA %s  %-40.40s", bar, pct, done,
                p->total, e1, e2, what ? what : "");
    } else {
        fprintf(stderr, "progress: %ld/%ld (%d%%), %s elapsed, ETA %s: %s\n", done, p->total, pct,
                e1, e2, what ? what : "");
    }
    fflush(stderr);
}

void progress_end(kb_progress *p) {
    if (p->tty) fputc('\n', stderr);
}
