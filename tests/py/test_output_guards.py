"""Guards on what a run directory holds (docs/DESIGN.md, "Sweep decisions";
docs/RELIABILITY.md, "Run directories, figures and threads"):

- `bench methods --out DIR` never leaves a latency.csv beside a run.json that
  does not describe it, even when writing run.json fails (a full disk);
- `merge OUT` and `bench methods --out DIR` refuse tables that have no run.json
  beside them, as `sweep` does (merge: unless --force), and `plot` does not
  draw accuracy figures from tables beside a `bench methods` run.json;
- the cleaning of stale temporaries removes only kvbench's own
  (`<file kvbench writes>.tmp.<pid>`), never a file of the user's that merely
  has `.tmp.<digits>` in its name.

A tiny random model (tiny_llama) for the sweeps, synthetic:smollm2-135m with a
64-token context for `bench methods`.
"""
import csv
import json
import os
import signal
import subprocess

import pytest

DEAD_PID = "999999999"  # above any pid_max: never a live process


def _file_size_limit(nbytes):
    """preexec_fn: a write past nbytes in any one file fails with EFBIG, as on
    a full disk (SIGXFSZ ignored), as in test_sweep.py."""
    def f():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return f


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    return tiny_llama(n_ctx=2048)


def small_config(tmp_path):
    cfg = {"name": "g", "seed": 3,
           "tasks": [{"task": "needle", "words": [60], "depths": [0.0, 1.0], "per_cell": 1, "max_new": 4}],
           "methods": ["full", "snapkv"], "budgets": [32]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def sweep(kvbench_bin, cfg, out, model, *extra):
    return subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", model, *extra],
                          capture_output=True, text=True, timeout=300)


def bench(kvbench_bin, out, context=64, **kw):
    return subprocess.run([kvbench_bin, "bench", "methods", "-m", "synthetic:smollm2-135m", "--contexts",
                           str(context), "--methods", "full", "--decode-tokens", "2", "--reps", "1",
                           "--out", str(out)], capture_output=True, text=True, timeout=300, **kw)


def latency_contexts(path):
    with open(path, newline="") as f:
        return {int(r["context"]) for r in csv.DictReader(f)}


def test_bench_methods_manifest_failure_leaves_no_foreign_manifest(kvbench_bin, tmp_path):
    """A second `bench methods` into the same --out whose run.json cannot be
    written (a file-size limit between latency.csv's size and run.json's):
    exit 1 naming run.json, and the directory holds no latency.csv beside a
    run.json that does not describe it. The old code wrote the new latency.csv
    first and left the previous run's run.json (status done, other contexts)
    beside it."""
    if os.environ.get("KVBENCH_TSAN"):
        pytest.skip("make tsan: SIGBUS at OpenMP start-up under any RLIMIT_FSIZE (docs/RELIABILITY.md)")
    out = tmp_path / "bench"
    p = bench(kvbench_bin, out, context=64)
    assert p.returncode == 0, p.stderr
    lat, rj = os.path.getsize(out / "latency.csv"), os.path.getsize(out / "run.json")
    assert lat + 100 < rj, (lat, rj)  # room for a limit between them
    p = bench(kvbench_bin, out, context=80, preexec_fn=_file_size_limit((lat + rj) // 2))
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "run.json" in p.stderr and "write failed" in p.stderr, p.stderr
    left = sorted(os.listdir(out))
    assert not [f for f in left if ".tmp." in f], left
    if (out / "latency.csv").exists():
        assert (out / "run.json").exists(), "a latency.csv without its run.json"
        man = json.load(open(out / "run.json"))
        assert latency_contexts(out / "latency.csv") <= set(man["contexts"]), \
            ("latency.csv beside another run's run.json", man["contexts"], man["status"])
    # and a run that can write finishes with a matching pair
    p = bench(kvbench_bin, out, context=80)
    assert p.returncode == 0, p.stderr
    man = json.load(open(out / "run.json"))
    assert man["status"] == "done" and man["contexts"] == [80]
    assert latency_contexts(out / "latency.csv") == {80}
