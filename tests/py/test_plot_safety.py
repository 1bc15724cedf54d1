"""kvbench plot keeps the figures it already drew when it cannot draw new ones,
and refuses a summary.csv whose kind column the sweep could not have written.

- A wrong KVBENCH_PLOTS, a scripts directory lacking a script, or no gnuplot
  on PATH: exit 2 with a message naming what is missing, before plots/ is
  touched. Until 2026-12-05 plot removed every image first and then exited 1
  with "gnuplot failed".
- gnuplot failing on one figure (here a script with an error): that figure's
  files stay as the previous plot wrote them, still listed in plots.json.
- summary.csv's kind: "all" (or empty), or on a row over all turns one of the
  kinds the task's samples ask (only tasks whose samples ask several have such rows);
  every cell of a task needs its row over all turns and kinds. Before, a
  needle row's kind changed to 'bogus' drew "0 figures" with exit 0.

Expected values are properties of the files (bytes unchanged, rows named),
not numbers produced by the code under test.
"""
import csv
import json
import os
import shutil
import subprocess

import pytest

SCRIPTS = ["common.gp", "accuracy.gp", "ablation.gp", "heatmap.gp", "speedup.gp"]
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def have_gnuplot():
    return shutil.which("gnuplot") is not None


@pytest.fixture(scope="module")
def needle_run(kvbench_bin, tiny_llama, tmp_path_factory):
    """A finished sweep of the needle task (two lengths, two depths: every
    figure kind summary.csv and samples.csv give), not yet plotted."""
    d = tmp_path_factory.mktemp("plot_safety")
    cfg = d / "c.json"
    cfg.write_text(json.dumps({
        "name": "t", "seed": 5,
        "tasks": [{"task": "needle", "words": [60, 120], "depths": [0.0, 1.0], "per_cell": 1,
                   "max_new": 2}],
        "methods": ["full", "snapkv"], "budgets": [32]}))
    run = d / "run"
    p = subprocess.run([kvbench_bin, "sweep", str(cfg), "--out", str(run), "-m",
                        tiny_llama(n_ctx=2048)], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    return run


def plot(kvbench_bin, run, env=None):
    return subprocess.run([kvbench_bin, "plot", str(run)], capture_output=True, text=True,
                          timeout=300, env=env)


def snapshot(d):
    return {f: (d / f).read_bytes() for f in sorted(os.listdir(d))}


def scripts_dir():
    """Where the binary finds its scripts (plots/ of the source tree)."""
    return os.path.join(REPO, "plots")


def test_plot_keeps_figures_when_it_cannot_draw(kvbench_bin, needle_run, tmp_path):
    if not have_gnuplot():
        pytest.skip("gnuplot not installed")
    run = tmp_path / "run"
    shutil.copytree(needle_run, run)
    p = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    before = snapshot(run / "plots")
    assert "accuracy_needle.png" in before and "accuracy_needle.svg" in before

    # a KVBENCH_PLOTS that is not the scripts' directory
    env = dict(os.environ, KVBENCH_PLOTS=str(tmp_path / "nonexistent"))
    p = plot(kvbench_bin, run, env)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"KVBENCH_PLOTS='{tmp_path / 'nonexistent'}': expected " in p.stderr and "common.gp" in p.stderr, p.stderr
    assert snapshot(run / "plots") == before

    # one that lacks one script
    part = tmp_path / "part"
    part.mkdir()
    for s in SCRIPTS:
        if s != "heatmap.gp":
            shutil.copy(os.path.join(scripts_dir(), s), part / s)
    p = plot(kvbench_bin, run, dict(os.environ, KVBENCH_PLOTS=str(part)))
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "KVBENCH_PLOTS" in p.stderr and str(part / "heatmap.gp") in p.stderr, p.stderr
    assert snapshot(run / "plots") == before

    # no gnuplot on PATH (popen runs /bin/sh, which needs no PATH)
    p = plot(kvbench_bin, run, dict(os.environ, PATH=str(tmp_path / "empty")))
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert "gnuplot" in p.stderr and "PATH" in p.stderr, p.stderr
    assert snapshot(run / "plots") == before

    # gnuplot fails on one figure's script: that figure stays as it was, and
    # plots.json still lists its files (so a later run still removes them)
    broken = tmp_path / "broken"
    shutil.copytree(scripts_dir(), broken)
    with open(broken / "accuracy.gp", "a") as f:
        f.write("\nthis is not gnuplot\n")
    p = plot(kvbench_bin, run, dict(os.environ, KVBENCH_PLOTS=str(broken)))
    assert p.returncode == 1, (p.returncode, p.stdout, p.stderr)
    assert "gnuplot failed on accuracy_needle" in p.stderr, p.stderr
    after = snapshot(run / "plots")
    for f in ("accuracy_needle.dat", "accuracy_needle.png", "accuracy_needle.svg"):
        assert after.get(f) == before[f], f
    assert not [f for f in after if ".tmp." in f], after.keys()
    man = json.loads(after["plots.json"])
    acc = [f for f in man["figures"] if f["name"] == "accuracy_needle"]
    assert acc and acc[0].get("failed") is True, man["figures"]
    assert sorted(acc[0]["files"]) == ["accuracy_needle.dat", "accuracy_needle.png", "accuracy_needle.svg"]
    listed = {x for f in man["figures"] for x in f["files"]}
    assert set(after) - {"plots.json"} == listed
    # the heatmaps were drawn again
    assert any(f.startswith("needle_") and f.endswith(".png") for f in listed)

    # the next plot that works draws it again, and lists no failure
    p = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    man = json.load(open(run / "plots" / "plots.json"))
    assert not [f for f in man["figures"] if f.get("failed")]
    assert {x for f in man["figures"] for x in f["files"]} == set(os.listdir(run / "plots")) - {"plots.json"}

    # one of a figure's names is a directory: its rename would fail, so none of
    # its files is replaced (before, the .dat and .png were, then the .svg
    # failed); the inodes show whether a file was replaced
    (run / "plots" / "accuracy_needle.svg").unlink()
    (run / "plots" / "accuracy_needle.svg").mkdir()
    ino = {f: os.stat(run / "plots" / f).st_ino for f in ("accuracy_needle.dat", "accuracy_needle.png")}
    p = plot(kvbench_bin, run)
    assert p.returncode == 1 and "accuracy_needle.svg: is a directory" in p.stderr, (p.returncode, p.stderr)
    assert {f: os.stat(run / "plots" / f).st_ino for f in ino} == ino
    assert not [f for f in os.listdir(run / "plots") if ".tmp." in f]


def two_kinds(t):
    """samples.csv's rows alternately of kinds needle_b and needle_a (a mixed task)."""
    for i, r in enumerate(t[1:]):
        r[t[0].index("kind")] = "needle_a" if i % 2 else "needle_b"


def edit(path, change):
    with open(path, newline="") as fh:
        t = list(csv.reader(fh))
    change(t)
    with open(path, "w", newline="") as fh:
        csv.writer(fh).writerows(t)


def whole_row(t, task):
    """The list index of task's first row over all turns and kinds (list
    index i is data row i: t[0] is the header)."""
    h = t[0]
    for i, r in enumerate(t[1:], 1):
        if r[h.index("task")] == task and r[h.index("turn")] == "all" and r[h.index("kind")] == "all":
            return i
    raise AssertionError(f"no whole row of {task}")


def test_plot_checks_summary_kind(kvbench_bin, needle_run, tmp_path):
    def copy(name):
        d = tmp_path / name
        shutil.copytree(needle_run, d)
        return d

    # a needle row's kind damaged: that cell has no row over the whole task
    d = copy("bogus")
    at = []

    def bogus(t):
        i = whole_row(t, "needle")
        t[i][t[0].index("kind")] = "bogus"
        at.append(i)
    edit(d / "summary.csv", bogus)
    p = plot(kvbench_bin, d)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"summary.csv: data row {at[0]}: kind 'bogus'" in p.stderr, p.stderr
    assert not (d / "plots").exists()

    # with no samples.csv to name the kinds, the cell without its whole row still stops plot
    os.unlink(d / "samples.csv")
    p = plot(kvbench_bin, d)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"summary.csv: data row {at[0]}:" in p.stderr and "kind 'all'" in p.stderr, p.stderr
    assert not (d / "plots").exists()

    # a per-kind row for a task whose samples ask one thing (needle's kind is "needle")
    d = copy("onekind")
    added = []

    def per_kind(kind):
        def f(t):
            r = list(t[whole_row(t, "needle")])
            r[t[0].index("kind")] = kind
            t.append(r)
            added.append(len(t) - 1)
        return f
    edit(d / "summary.csv", per_kind("needle"))
    p = plot(kvbench_bin, d)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"summary.csv: data row {added[-1]}: kind 'needle'" in p.stderr, p.stderr

    # an empty kind reads as "all" (as in a summary made by hand, test_sweep.py's hostile names)
    d = copy("empty")
    edit(d / "summary.csv", lambda t: t[whole_row(t, "needle")].__setitem__(t[0].index("kind"), ""))
    p = plot(kvbench_bin, d)
    assert "kind" not in p.stderr, p.stderr
    if have_gnuplot():
        assert p.returncode == 0, p.stderr

    # a mixed task: samples of two kinds; summary rows per kind are drawn from
    # (only the whole-task rows are plotted), a kind the samples lack is refused
    d = copy("mixed")
    edit(d / "samples.csv", two_kinds)
    edit(d / "summary.csv", per_kind("needle_a"))
    edit(d / "summary.csv", per_kind("needle_b"))
    p = plot(kvbench_bin, d)
    assert p.returncode in (0, 1) and "kind" not in p.stderr, (p.returncode, p.stderr)
    if have_gnuplot():
        assert p.returncode == 0, p.stderr
    d = copy("mixed_bad")
    edit(d / "samples.csv", two_kinds)
    edit(d / "summary.csv", per_kind("needle_c"))
    p = plot(kvbench_bin, d)
    assert p.returncode == 2, (p.returncode, p.stdout, p.stderr)
    assert f"summary.csv: data row {added[-1]}: kind 'needle_c'" in p.stderr, p.stderr
    assert "needle_a" in p.stderr and "needle_b" in p.stderr, p.stderr

    # a summary of a version before the kind column is drawn as before
    d = copy("old")
    edit(d / "summary.csv", lambda t: [r.pop(t[0].index("kind")) for r in t[::-1]])
    p = plot(kvbench_bin, d)
    if have_gnuplot():
        assert p.returncode == 0, p.stderr
    assert "kind" not in p.stderr, p.stderr
