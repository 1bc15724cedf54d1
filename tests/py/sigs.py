"""signals_at: a preexec_fn that sets the stop signals' action in a child
process, for the tests that signal kvbench: whatever the test runner
inherited (a shell ignores SIGINT for a command it starts with &, nohup
ignores SIGHUP), the child starts with the actions the test means, and
kvbench keeps a signal that was ignored when it started."""
import signal

STOP = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def signals_at(action, sigs=STOP):
    """preexec_fn: every signal of sigs at action (SIG_DFL or SIG_IGN)."""
    def f():
        for s in sigs:
            signal.signal(s, action)
    return f
