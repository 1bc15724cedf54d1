/* stop.h - a stop asked for by a signal (SIGINT, SIGTERM, SIGHUP) while a
 * long command runs. The command keeps what it finished, cleans up what it
 * made for itself and exits with the shell's code for the signal (128 + n):
 * a sweep keeps its rows (run.json "interrupted", --resume goes on), bench
 * methods its finished contexts' rows and removes its prefill snapshots.
 * The handler only records the signal; it does not restart system calls
 * (SA_RESTART off), so a blocking read or wait returns EINTR and the caller
 * looks at stop_signal(). A signal that was ignored when the command began
 * (nohup's SIGHUP; SIGINT for a command a non-interactive shell started with
 * &) stays ignored. */
#ifndef KB_STOP_H
#define KB_STOP_H

/* Installs the handlers; calls nest (a sweep's latency part runs bench
 * methods' code under the sweep's handlers), and only the outermost installs,
 * clears the recorded signal and, in stop_end, puts the previous handlers
 * back. */
void stop_begin(void);
void stop_end(void);
/* The signal that asked to stop, or 0. */
int stop_signal(void);
/* "SIGINT", "SIGTERM" or "SIGHUP". */
const char *stop_signal_name(int sig);

#endif
