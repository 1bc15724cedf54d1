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


def test_merge_refuses_tables_without_run_json(kvbench_bin, tiny, tmp_path):
    """merge into an OUT_DIR holding samples.csv, summary.csv or latency.csv
    but no run.json: exit 2 naming the table, nothing touched; --force merges.
    The old code overwrote them silently (it checked only for run.json)."""
    cfg = small_config(tmp_path)
    shards = [tmp_path / f"s{i}" for i in range(2)]
    for i, d in enumerate(shards):
        p = sweep(kvbench_bin, cfg, d, tiny, "--shard", f"{i}/2")
        assert p.returncode == 0, p.stderr
    for table in ("samples.csv", "summary.csv", "latency.csv"):
        out = tmp_path / f"out_{table}"
        out.mkdir()
        (out / table).write_text("mine\n")
        p = subprocess.run([kvbench_bin, "merge", str(out), *map(str, shards)], capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 2, (table, p.returncode, p.stderr)
        assert f"{table} has no run.json beside it" in p.stderr and "--force" in p.stderr, p.stderr
        assert os.listdir(out) == [table] and (out / table).read_text() == "mine\n"
    # a merge, like a sweep, removes what a killed kvbench was writing there
    # and nothing of the user's (before, merge removed neither)
    stale, mine = f"samples.csv.tmp.{DEAD_PID}", f"notes.tmp.{DEAD_PID}"
    for f in (stale, mine):
        (out / f).write_text("x\n")
    p = subprocess.run([kvbench_bin, "merge", "--force", str(out), *map(str, shards)], capture_output=True,
                       text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert {"run.json", "samples.csv", "summary.csv"} <= set(os.listdir(out))
    assert mine in os.listdir(out) and stale not in os.listdir(out), os.listdir(out)


def test_bench_methods_refuses_tables_it_cannot_check(kvbench_bin, tiny, tmp_path):
    """bench methods (which has no --force) into a directory with tables and no
    run.json, or with a samples.csv/summary.csv beside a bench methods
    run.json (which never describes them): exit 2 naming the table, nothing
    touched. The old code wrote latency.csv and run.json beside them."""
    for table in ("latency.csv", "samples.csv", "summary.csv"):
        out = tmp_path / f"b_{table}"
        out.mkdir()
        (out / table).write_text("mine\n")
        p = bench(kvbench_bin, out)
        assert p.returncode == 2, (table, p.returncode, p.stderr)
        assert f"{table} has no run.json beside it" in p.stderr, p.stderr
        assert "measured read bandwidth" not in p.stderr, "refused before any work"
        assert os.listdir(out) == [table] and (out / table).read_text() == "mine\n"
    out = tmp_path / "bench"
    assert bench(kvbench_bin, out).returncode == 0
    (out / "summary.csv").write_text("mine\n")
    before = {f: (out / f).read_bytes() for f in os.listdir(out)}
    p = bench(kvbench_bin, out)
    assert p.returncode == 2 and "summary.csv" in p.stderr and "bench methods" in p.stderr, p.stderr
    assert {f: (out / f).read_bytes() for f in os.listdir(out)} == before


def test_plot_draws_no_accuracy_figures_beside_a_bench_run(kvbench_bin, tiny, tmp_path):
    """summary.csv and samples.csv (a sweep's) copied beside a `bench methods`
    run.json: plot warns and draws only latency.csv's figures; plots.json lists
    neither table, so no accuracy figure carries the bench run's provenance.
    The old code drew them stamped with the bench run's model and commit."""
    cfg = small_config(tmp_path)
    run = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, run, tiny).returncode == 0
    out = tmp_path / "bench"
    assert bench(kvbench_bin, out).returncode == 0
    for t in ("samples.csv", "summary.csv"):
        (out / t).write_bytes((run / t).read_bytes())
    p = subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    assert "summary.csv" in p.stderr and "bench methods" in p.stderr, p.stderr
    man = json.load(open(out / "plots" / "plots.json"))
    assert set(man["tables"]) == {"latency.csv"}, man["tables"]
    assert {f["from"] for f in man["figures"]} <= {"latency.csv"}, man["figures"]
    # the tables stay: plot removes nothing of them
    assert (out / "summary.csv").read_bytes() == (run / "summary.csv").read_bytes()
    # nor does it read them: a damaged kind there (which plot refuses where it
    # draws the table) does not stop the latency figures
    (out / "summary.csv").write_text((run / "summary.csv").read_text().replace(",all,all,", ",all,bogus,", 1))
    (out / "samples.csv").write_text("not,a,samples,table\n")
    p = subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1) and "bogus" not in p.stderr and "not drawn" in p.stderr, p.stderr


def test_stale_temporaries_only_kvbench_own(kvbench_bin, tiny, tmp_path):
    """A sweep and a plot remove the temporaries a killed kvbench left
    (`run.json.tmp.<dead pid>`, `plots/plots.json.tmp.<dead pid>`), and leave a
    file of the user's that only looks like one (`notes.tmp.<digits>`,
    `mine.png.tmp.<digits>`: DESIGN.md, files kvbench does not make are left
    alone). The old code removed any name with `.tmp.<dead pid>` in it."""
    cfg = small_config(tmp_path)
    out = tmp_path / "run"
    out.mkdir()
    user = [f"notes.tmp.{DEAD_PID}", f"results.csv.tmp.{DEAD_PID}", "x.tmp.2024"]
    ours = [f"run.json.tmp.{DEAD_PID}", f"samples.csv.tmp.{DEAD_PID}"]
    for f in user + ours:
        (out / f).write_text("x\n")
    p = sweep(kvbench_bin, cfg, out, tiny)
    assert p.returncode == 0, p.stderr
    left = set(os.listdir(out))
    assert set(user) <= left, ("the user's files were removed", set(user) - left)
    assert not set(ours) & left, set(ours) & left
    (out / "plots").mkdir()
    puser = [f"mine.png.tmp.{DEAD_PID}", f"notes.tmp.{DEAD_PID}"]
    pours = [f"plots.json.tmp.{DEAD_PID}"]
    for f in puser + pours:
        (out / "plots" / f).write_text("x\n")
    p = subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True, text=True, timeout=300)
    assert p.returncode in (0, 1), p.stderr
    left = set(os.listdir(out / "plots"))
    assert set(puser) <= left, set(puser) - left
    assert not set(pours) & left
    # a new run removes plot's files and temporaries, not the user's
    p = sweep(kvbench_bin, cfg, out, tiny, "--force")
    assert p.returncode == 0, p.stderr
    assert set(os.listdir(out / "plots")) == set(puser)
    assert set(user) <= set(os.listdir(out))
