/* test_stop.c - the stop handlers of harness/stop.h, by raising the signals
 * in this process: each of SIGINT, SIGTERM and SIGHUP is recorded (the last
 * one wins) instead of running the previous action; a signal ignored before
 * stop_begin stays ignored; the handlers do not restart system calls
 * (SA_RESTART off); calls nest, and only the outermost stop_begin clears the
 * recorded signal and only the outermost stop_end puts the previous actions
 * back; the names. Expected behaviour is stop.h's text. */
#include <signal.h>
#include <string.h>

#include "check.h"
#include "harness/stop.h"

static volatile sig_atomic_t prev_calls;
static void prev_handler(int sig) {
    (void)sig;
    prev_calls++;
}

static void set_action(int sig, void (*h)(int)) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

static struct sigaction action(int sig) {
    struct sigaction sa;
    sigaction(sig, NULL, &sa);
    return sa;
}

int main(void) {
    set_action(SIGINT, SIG_DFL);
    set_action(SIGTERM, prev_handler);
    set_action(SIGHUP, SIG_IGN); /* as nohup leaves it */

    stop_begin();
    CHECK_EQ_INT(stop_signal(), 0);
    /* ours on SIGINT and SIGTERM, without SA_RESTART; SIGHUP still ignored */
    for (int s = 0; s < 2; s++) {
        int sig = s ? SIGTERM : SIGINT;
        struct sigaction sa = action(sig);
        CHECK_MSG(sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN && sa.sa_handler != prev_handler,
                  "signal %d has no stop handler", sig);
        CHECK_MSG(!(sa.sa_flags & SA_RESTART), "signal %d restarts system calls", sig);
    }
    CHECK(action(SIGHUP).sa_handler == SIG_IGN);
    raise(SIGTERM);
    CHECK_EQ_INT(stop_signal(), SIGTERM);
    CHECK_EQ_INT(prev_calls, 0); /* recorded, not passed on */
    raise(SIGHUP);               /* ignored: not recorded */
    CHECK_EQ_INT(stop_signal(), SIGTERM);
    raise(SIGINT);
    CHECK_EQ_INT(stop_signal(), SIGINT); /* the last one */

    /* nested: the inner begin neither clears the signal nor reinstalls; the
     * inner end leaves the handlers in place */
    stop_begin();
    CHECK_EQ_INT(stop_signal(), SIGINT);
    stop_end();
    raise(SIGTERM);
    CHECK_EQ_INT(stop_signal(), SIGTERM);
    CHECK_EQ_INT(prev_calls, 0);

    /* the outer end puts every previous action back */
    stop_end();
    CHECK(action(SIGINT).sa_handler == SIG_DFL);
    CHECK(action(SIGTERM).sa_handler == prev_handler);
    CHECK(action(SIGHUP).sa_handler == SIG_IGN);
    raise(SIGTERM);
    CHECK_EQ_INT(prev_calls, 1);
    /* an end without a begin changes nothing */
    stop_end();
    CHECK(action(SIGTERM).sa_handler == prev_handler);

    /* a new outermost begin clears the recorded signal; SIGHUP, no longer
     * ignored, is handled and recorded */
    set_action(SIGHUP, SIG_DFL);
    stop_begin();
    CHECK_EQ_INT(stop_signal(), 0);
    raise(SIGHUP);
    CHECK_EQ_INT(stop_signal(), SIGHUP);
    stop_end();
    CHECK(action(SIGHUP).sa_handler == SIG_DFL);

    CHECK_STREQ(stop_signal_name(SIGINT), "SIGINT");
    CHECK_STREQ(stop_signal_name(SIGTERM), "SIGTERM");
    CHECK_STREQ(stop_signal_name(SIGHUP), "SIGHUP");
    return check_summary("test_stop");
}
