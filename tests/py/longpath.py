"""long_path: paths of an exact length, for the tests that check that kvbench
refuses, rather than cuts, a path too long for one of its buffers."""
import os


def long_path(base, n):
    """A path of exactly n bytes under base, through directories of 200-byte
    names (a name may have 255); its parent is made, the path itself is not."""
    d = str(base)
    while n - len(d) > 250:
        d = os.path.join(d, "d" * 200)
    os.makedirs(d, exist_ok=True)
    path = os.path.join(d, "m" * (n - len(d) - 1))
    assert len(path) == n
    return path
