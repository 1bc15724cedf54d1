/* stop.c - see stop.h. */
#include "harness/stop.h"

#include <signal.h>
#include <string.h>

static const int stop_signals[] = {SIGINT, SIGTERM, SIGHUP};
#define N_STOP ((int)(sizeof stop_signals / sizeof stop_signals[0]))
static volatile sig_atomic_t stop_sig = 0;
static int depth = 0;
static struct sigaction saved[N_STOP];

static void on_stop(int sig) { stop_sig = sig; }

void stop_begin(void) {
    if (depth++) return;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa); /* no SA_RESTART */
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    stop_sig = 0;
    for (int i = 0; i < N_STOP; i++) {
        sigaction(stop_signals[i], NULL, &saved[i]);
        /* a signal ignored when kvbench started stays ignored: nohup's SIGHUP,
         * a non-interactive shell's SIGINT for a command started with & */
        if (saved[i].sa_handler != SIG_IGN) sigaction(stop_signals[i], &sa, NULL);
    }
}

void stop_end(void) {
    if (depth <= 0 || --depth) return;
    for (int i = 0; i < N_STOP; i++) sigaction(stop_signals[i], &saved[i], NULL);
}

int stop_signal(void) { return stop_sig; }

const char *stop_signal_name(int sig) {
    return sig == SIGTERM ? "SIGTERM" : sig == SIGHUP ? "SIGHUP" : "SIGINT";
}
