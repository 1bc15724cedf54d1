/* progress.h - a progress line with ETA on stderr: redrawn in place on a
 * terminal, plain lines (at most one every few seconds) otherwise. */
#ifndef KB_PROGRESS_H
#define KB_PROGRESS_H

typedef struct kb_progress {
    long total, done;
    double t0, last;
    int tty;
} kb_progress;

void progress_init(kb_progress *p, long total);
/* done units finished out of total; what = a short description of the current item. */
void progress_update(kb_progress *p, long done, const char *what);
void progress_end(kb_progress *p);

#endif
