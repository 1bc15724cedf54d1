"""What kvbench plot draws: the data files' series and the values it hands
gnuplot (titles, tick labels, sizes), for tables written by hand.

The existing plot tests check that figures are made, kept and traced; none
read the numbers in a .dat file, so a figure of the wrong rows, unsorted
points, a wrong mean or a dropped reference line passed. Here each expected
series is worked out in Python from the CSV rows this test writes, by the
rules docs/OUTPUTS.md gives ("plots/: what each figure draws"; they were not
written down before these tests: they were written from the code as it stood,
and these tests now hold the code to them):

- accuracy_<task>: summary.csv's rows over all turns and kinds (turn "all",
  kind "all" or empty) with a score; one block per label in order of first
  appearance, points sorted by budget; a cell without budget (Full KV) is a
  flat line from the task's smallest to its largest scored budget (one point
  when they are equal); a task without any budgeted row has no figure; ALL is
  titled "Average over tasks".
- ablation_kernel / ablation_alpha: the cells whose params set a numeric
  "kernel" (score vs kernel, one block per "task B=budget") or an "alpha"
  (number or "auto"; ALL rows with a budget only; score vs budget).
- needle_<label>_B<budget>: the needle task's rows with a depth, per (label,
  budget) holding two lengths and two depths at least: cell (x, y) = mean of
  100 * score over its rows, nan when it has none; x = target_tokens, else
  context_words, else context_tokens; x tick labels = the mean context_tokens
  of the column ("%.0f"), y tick labels the depths ("%.2f").
- speedup: latency.csv's rows with a speedup_vs_full, one block per "label
  B=budget" ("label" without budget), sorted by context.

gnuplot is replaced by tests/py/stubs/gnuplot, which records the script plot
feeds it and writes a minimal whole image, so these tests need no gnuplot
(one test that runs the real one is skipped without it). Numbers: .dat
values are printed with %.9g, so they are compared with a relative
tolerance of 1e-8 (the inputs are short decimals); heatmap cells with %.6g,
and the means here are chosen exact to 6 digits.
"""
import csv
import json
import math
import os
import shutil
import subprocess

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
STUBS = os.path.join(REPO, "tests", "py", "stubs")
MODEL = "Mo'del \"x\""


def write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)


def make_run(d, summary=None, samples=None, latency=None, model=MODEL):
    d.mkdir(parents=True, exist_ok=True)
    (d / "run.json").write_text(json.dumps({"kind": "sweep", "model": {"name": model, "sha256": "0" * 64}}))
    if summary is not None:
        write_csv(d / "summary.csv", ["task", "turn", "kind", "label", "params", "budget", "score"], summary)
    if samples is not None:
        write_csv(d / "samples.csv", ["task", "label", "budget", "depth", "score", "target_tokens",
                                      "context_words", "context_tokens"], samples)
    if latency is not None:
        write_csv(d / "latency.csv", ["label", "budget", "context", "speedup_vs_full"], latency)
    return d


def plot(kvbench_bin, run, stub=True, args=()):
    """(CompletedProcess, the scripts gnuplot was fed, one per image)."""
    env = dict(os.environ, KVBENCH_PLOTS=os.path.join(REPO, "plots"))
    log = run / "gnuplot.log"
    if stub:
        env["PATH"] = STUBS + os.pathsep + env["PATH"]
        env["GNUPLOT_STUB_LOG"] = str(log)
    p = subprocess.run([kvbench_bin, "plot", str(run), *args], capture_output=True, text=True, env=env,
                       timeout=120)
    recs = log.read_text().split("\n\x00END\n")[:-1] if log.exists() else []
    return p, recs


def literal(rec, name):
    """The value of gnuplot's `name='...'` line ('' is a quote), or None."""
    for line in rec.split("\n"):
        if line.startswith(name + "='") and line.endswith("'"):
            v = line[len(name) + 2:-1]
            assert "'" not in v.replace("''", ""), line  # no quote closes it early
            return v.replace("''", "'")
    return None


def number(rec, name):
    for line in rec.split("\n"):
        if line.startswith(name + "="):
            return line[len(name) + 1:]
    return None


def record_of(recs, fig):
    """The first script that drew figure fig (its outfile names it)."""
    for r in recs:
        out = literal(r, "outfile")
        if out and os.path.basename(out).startswith(fig + ".png.tmp."):
            return r
    raise AssertionError(f"no gnuplot call drew {fig}")


def read_dat(path):
    """[(name, [(x, y), ...]), ...]: blocks apart by two blank lines, the
    first line of each its quoted name (plus ' y'), after the # lines."""
    text = path.read_text()
    lines = text.split("\n")
    assert lines[0].startswith("# ") and lines[1].startswith("# ") and not lines[2].startswith("#"), text
    blocks = []
    for b in "\n".join(lines[2:]).strip("\n").split("\n\n\n"):
        rows = b.split("\n")
        assert rows[0].startswith('"') and rows[0].endswith('" y') and rows[0].count('"') == 2, rows[0]
        blocks.append((rows[0][1:-3], [tuple(float(v) for v in r.split()) for r in rows[1:]]))
    return blocks


def same_series(got, want):
    assert [n for n, _ in got] == [n for n, _ in want], (got, want)
    for (n, g), (_, w) in zip(got, want):
        assert len(g) == len(w), (n, g, w)
        for a, b in zip(g, w):
            assert len(a) == 2 and all(math.isclose(x, y, rel_tol=1e-8, abs_tol=1e-12) for x, y in zip(a, b)), \
                (n, g, w)


def figures(run):
    return {f["name"] for f in json.load(open(run / "plots" / "plots.json"))["figures"]}


# ---- accuracy ----

SUMMARY = [
    # task, turn, kind, label, params, budget, score
    ["qa", "all", "all", "full", "", "", "50"],
    ["qa", "all", "all", "snap", "", "64", "40"],
    ["qa", "all", "all", "snap", "", "16", "20"],
    ["qa", "1", "all", "snap", "", "16", "99"],      # one turn: not drawn
    ["qa", "all", "all", "snap", "", "32", "30.5"],
    ["qa", "all", "all", "h2o", "", "8", ""],        # no score: not drawn, nor in the budget range
    ["qa", "all", "all", "h2o", "", "256", ""],
    ["qa", "all", "", "pyr", "", "32", "35"],        # empty kind reads as all
    ["ALL", "all", "all", "full", "", "", "55"],
    ["ALL", "all", "all", "snap", "", "16", "25"],
    ["ALL", "all", "all", "snap", "", "64", "45"],
    ["solo", "all", "all", "full", "", "", "70"],   # no budget at all: no figure
    ["one", "all", "all", "snap", "", "32", "5"],
    ["one", "all", "all", "full", "", "", "10"],    # one budget: a single point
    ["it's a/b\"c", "all", "all", 'sn"ap', "", "8", "12.25"],
    ["lb.trec-2", "all", "all", "snap", "", "8", "7"],   # '.' and '-' stay in the file name
]


def expected_accuracy(rows):
    """{task: [(label, points)]} by the rules in the module docstring."""
    out = {}
    for task in dict.fromkeys(r[0] for r in rows):
        mine = [r for r in rows if r[0] == task and r[1] == "all" and r[2] in ("all", "") and r[6] != ""]
        budgets = [float(r[5]) for r in mine if r[5] != ""]
        if not budgets:
            continue
        lo, hi = min(budgets), max(budgets)
        series = {}
        for r in mine:
            pts = series.setdefault(r[3], [])
            if r[5] != "":
                pts.append((float(r[5]), float(r[6])))
            else:
                pts += [(lo, float(r[6]))] + ([(hi, float(r[6]))] if hi > lo else [])
        out[task] = [(n.replace('"', "'"), sorted(p, key=lambda t: t[0])) for n, p in series.items()]
    return out


def test_accuracy_series(kvbench_bin, tmp_path):
    run = make_run(tmp_path / "run", summary=SUMMARY)
    p, recs = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    want = expected_accuracy(SUMMARY)
    assert set(want) == {"qa", "ALL", "one", "it's a/b\"c", "lb.trec-2"}
    files = {"qa": "accuracy_qa", "ALL": "accuracy_ALL", "one": "accuracy_one",
             "it's a/b\"c": "accuracy_it_s_a_b_c", "lb.trec-2": "accuracy_lb.trec-2"}
    assert {f for f in figures(run) if f.startswith("accuracy_")} == set(files.values())
    for task, fig in files.items():
        same_series(read_dat(run / "plots" / f"{fig}.dat"), want[task])
        rec = record_of(recs, fig)
        assert number(rec, "nblocks") == str(len(want[task])), rec
        model = MODEL
        if task == "ALL":
            assert literal(rec, "ttl") == f"Average over tasks: score vs token budget ({model})"
            assert literal(rec, "ylab") == "score (x100, mean of task scores)"
        else:
            assert literal(rec, "ttl") == f"{task}: score vs token budget ({model})"
            assert literal(rec, "ylab") == "score (x100, mean over samples)"
        assert rec.rstrip("\n").endswith("load 'accuracy.gp'"), rec
    # one figure per format asked for, each named after its figure
    assert len(recs) == 2 * len(files)
    assert sorted(literal(r, "fmt") for r in recs) == ["png"] * len(files) + ["svg"] * len(files)
    assert f"kvbench plot: {len(files)} figures in" in p.stdout, p.stdout


def test_a_task_without_a_figure_takes_no_name(kvbench_bin, tmp_path):
    """Two tasks whose file names collide ('a b' and 'a_b': figure_name in cmd_plot.c
    gives the second '-2'): when the first has no budgeted row it draws no figure, so the second
    is accuracy_a_b, not accuracy_a_b-2 (the name was taken before the check)."""
    rows = [["a b", "all", "all", "full", "", "", "50"],
            ["a_b", "all", "all", "snap", "", "16", "20"],
            ["a_b", "all", "all", "snap", "", "32", "30"]]
    run = make_run(tmp_path / "run", summary=rows)
    p, recs = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    assert {f for f in figures(run) if f.startswith("accuracy_")} == {"accuracy_a_b"}
    same_series(read_dat(run / "plots" / "accuracy_a_b.dat"), expected_accuracy(rows)["a_b"])


# ---- ablations ----

ABLATION = [
    ["qa", "all", "all", "k7", '{"kernel":7}', "32", "40"],
    ["qa", "all", "all", "k5", '{"kernel":5}', "", "60"],
    ["qa", "all", "all", "k3", '{"kernel":3}', "32", "30"],
    ["qa", "1", "all", "k3", '{"kernel":3}', "32", "99"],      # one turn
    ["qa", "all", "all", "ks", '{"kernel":"9"}', "32", "77"],  # not a number
    ["qa", "all", "all", "kn", '{"kernel":11}', "32", ""],     # no score
    ["ALL", "all", "all", "k7", '{"kernel":7}', "32", "41"],
    ["ALL", "all", "all", "a1", '{"alpha":1.5}', "32", "20"],
    ["ALL", "all", "all", "a1", '{"alpha":1.5}', "16", "10"],
    ["ALL", "all", "all", "a2", '{"alpha":0.125}', "16", "11"],
    ["ALL", "all", "all", "aa", '{"alpha":"auto"}', "16", "12"],
    ["ALL", "all", "all", "ax", '{"alpha":"fast"}', "16", "13"],  # neither a number nor auto
    ["qa", "all", "all", "aq", '{"alpha":2}', "16", "14"],        # not ALL
    ["ALL", "all", "all", "an", '{"alpha":0.5}', "", "15"],       # no budget
]


def test_ablation_series(kvbench_bin, tmp_path):
    run = make_run(tmp_path / "run", summary=ABLATION)
    p, recs = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    kern, alpha = {}, {}
    for task, turn, kind, label, params, budget, score in ABLATION:
        if turn != "all" or score == "":
            continue
        j = json.loads(params)
        if isinstance(j.get("kernel"), (int, float)):
            name = task + (" B=" + budget if budget else "")
            kern.setdefault(name, []).append((float(j["kernel"]), float(score)))
        a = j.get("alpha")
        if task == "ALL" and budget and (isinstance(a, (int, float)) or a == "auto"):
            name = "alpha=" + ("%.2g" % a if a != "auto" else "auto")
            alpha.setdefault(name, []).append((float(budget), float(score)))
    assert list(alpha) == ["alpha=1.5", "alpha=0.12", "alpha=auto"]
    same_series(read_dat(run / "plots" / "ablation_kernel.dat"), [(n, sorted(v)) for n, v in kern.items()])
    same_series(read_dat(run / "plots" / "ablation_alpha.dat"), [(n, sorted(v)) for n, v in alpha.items()])
    rec = record_of(recs, "ablation_kernel")
    assert literal(rec, "ttl") == f"SnapKV++ pooling-kernel ablation ({MODEL})"
    assert literal(rec, "xlab") == "max-pool kernel size" and number(rec, "nblocks") == str(len(kern))
    # both drawn by ablation.gp on a log2 x axis (logx, the script's switch), as budgets are elsewhere
    assert number(rec, "logx") == "1" and rec.rstrip("\n").endswith("load 'ablation.gp'"), rec
    rec = record_of(recs, "ablation_alpha")
    assert literal(rec, "ttl") == f"RocketKV stage-split ablation: average score ({MODEL})"
    assert literal(rec, "xlab") == "token budget B" and number(rec, "nblocks") == str(len(alpha))
    assert number(rec, "logx") == "1" and rec.rstrip("\n").endswith("load 'ablation.gp'"), rec
    # without such params: no ablation figure
    run2 = make_run(tmp_path / "run2", summary=SUMMARY)
    p, _ = plot(kvbench_bin, run2)
    assert p.returncode == 0 and not [f for f in figures(run2) if f.startswith("ablation")], p.stderr


# ---- needle heatmaps ----

# task, label, budget, depth, score, target_tokens, context_words, context_tokens
SAMPLES = [
    ["needle", "snap", "32", "0.5", "1", "200", "150", "210"],
    ["needle", "snap", "32", "0", "1", "100", "70", "90"],
    ["needle", "snap", "32", "0", "0", "100", "70", "96"],
    ["needle", "snap", "32", "1", "0.25", "100", "70", "97"],
    ["needle", "snap", "32", "0", "0.5", "200", "150", "200"],
    ["needle", "snap", "32", "", "0", "300", "220", "300"],     # no depth: not drawn
    ["niah", "snap", "32", "0.75", "1", "400", "300", "400"],   # not the needle task
    ["needle", "snap", "64", "0", "1", "100", "70", "90"],      # one depth: no figure
    ["needle", "snap", "64", "0", "0", "200", "150", "200"],
    ["needle", "w'x", "", "0", "1", "", "60", "80"],            # no target: context_words
    ["needle", "w'x", "", "1", "0", "", "120", "150"],
    ["needle", "w'x", "", "0.25", "0.5", "", "120", "151"],
    ["needle", "w'x", "", "1", "1", "", "60", "82"],
    ["needle", "t", "8", "0", "1", "", "", "80"],              # neither: context_tokens
    ["needle", "t", "8", "1", "0", "", "", "150"],
    ["needle", "t", "8", "1", "1", "", "", "80"],
    ["needle", "o", "16", "0", "1", "100", "150", "100"],     # target_tokens first: its order, not the words'
    ["needle", "o", "16", "1", "0", "200", "70", "200"],
    ["needle", "o", "8", "0", "0", "100", "150", "100"],      # the same label at another budget: its own figure
    ["needle", "o", "8", "1", "1", "200", "70", "200"],
    ["needle", "len1", "32", "0", "1", "100", "70", "90"],    # one length: no figure
    ["needle", "len1", "32", "1", "1", "100", "70", "90"],
]


def expected_heatmaps(rows):
    out = {}
    for label, budget in dict.fromkeys((r[1], r[2]) for r in rows if r[0] == "needle" and r[3] != ""):
        mine = [r for r in rows if r[0] == "needle" and r[3] != "" and (r[1], r[2]) == (label, budget)]
        x = lambda r: float(r[5] or r[6] or r[7])
        xs, ys = sorted({x(r) for r in mine}), sorted({float(r[3]) for r in mine})
        if len(xs) < 2 or len(ys) < 2:
            continue
        cells = []
        for yi, y in enumerate(ys):
            for xi, xv in enumerate(xs):
                sc = [100 * float(r[4]) for r in mine if x(r) == xv and float(r[3]) == y]
                cells.append((xi, yi, sum(sc) / len(sc) if sc else math.nan))
        xt = ",".join('"%.0f" %d' % (sum(float(r[7]) for r in mine if x(r) == xv) /
                                       sum(1 for r in mine if x(r) == xv), i) for i, xv in enumerate(xs))
        yt = ",".join('"%.2f" %d' % (y, i) for i, y in enumerate(ys))
        name = "needle_" + "".join(c if c.isalnum() or c in "-." else "_" for c in f"{label}_B{budget or 'none'}")
        out[name] = (label, budget, len(xs), len(ys), cells, xt, yt)
    return out


def test_heatmap_cells_and_ticks(kvbench_bin, tmp_path):
    summary = [["needle", "all", "all", "snap", "", "32", "50"]]
    run = make_run(tmp_path / "run", summary=summary, samples=SAMPLES)
    p, recs = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    want = expected_heatmaps(SAMPLES)
    assert set(want) == {"needle_snap_B32", "needle_w_x_Bnone", "needle_t_B8", "needle_o_B16", "needle_o_B8"}
    o = want["needle_o_B16"]  # by hand: column 0 is target 100 (the row of words 150), row 0 depth 0
    assert [c[:2] for c in o[4]] == [(0, 0), (1, 0), (0, 1), (1, 1)] and o[5] == '"100" 0,"200" 1'
    assert o[4][0][2] == 100 and math.isnan(o[4][1][2]) and math.isnan(o[4][2][2]) and o[4][3][2] == 0
    assert {f for f in figures(run) if f.startswith("needle_")} == set(want)
    for fig, (label, budget, nx, ny, cells, xt, yt) in want.items():
        lines = (run / "plots" / f"{fig}.dat").read_text().split("\n")
        assert lines[0].startswith("# ") and lines[1].startswith("# ") and lines[-1] == ""
        got = [tuple(float(v) for v in ln.split()) for ln in lines[2:-1]]
        assert len(got) == len(cells), (fig, got)
        for g, w in zip(got, cells):
            assert g[:2] == w[:2] and (math.isnan(g[2]) if math.isnan(w[2]) else
                                       math.isclose(g[2], w[2], rel_tol=1e-6)), (fig, got, cells)
        rec = record_of(recs, fig)
        assert number(rec, "nx") == str(nx) and number(rec, "ny") == str(ny), rec
        assert literal(rec, "xt") == xt and literal(rec, "yt") == yt, (rec, xt, yt)
        assert literal(rec, "ttl") == ("Needle accuracy by depth and length: %s, budget %s (%s)"
                                       % (label, budget or "none (full cache)", MODEL))
        assert rec.rstrip("\n").endswith("load 'heatmap.gp'"), rec
    # the values worked by hand for the first figure (x 100, 200; y 0, 0.5, 1)
    assert want["needle_snap_B32"][4][:2] == [(0, 0, 50.0), (1, 0, 50.0)]
    assert math.isnan(want["needle_snap_B32"][4][2][2]) and want["needle_snap_B32"][5] == '"94" 0,"205" 1'
    # samples.csv is drawn without a summary.csv too (beside a latency.csv)
    run2 = make_run(tmp_path / "run2", samples=SAMPLES, latency=[["snap", "32", "64", "2"]])
    p, _ = plot(kvbench_bin, run2)
    assert p.returncode == 0 and figures(run2) == set(want) | {"speedup"}, p.stderr


# ---- speedup ----

LATENCY = [
    ["full", "", "1024", ""],        # no speedup: not drawn
    ["snap", "32", "2048", "1.5"],
    ["snap", "32", "1024", "1.25"],
    ["snap", "64", "1024", "1.125"],
    ["pyr", "", "512", "0.875"],
    ["snap", "32", "512", "1"],
]


def test_speedup_series(kvbench_bin, tmp_path):
    run = make_run(tmp_path / "run", latency=LATENCY)
    p, recs = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    want = {}
    for label, budget, ctx, sp in LATENCY:
        if sp:
            want.setdefault(label + (" B=" + budget if budget else ""), []).append((float(ctx), float(sp)))
    same_series(read_dat(run / "plots" / "speedup.dat"), [(n, sorted(v)) for n, v in want.items()])
    rec = record_of(recs, "speedup")
    assert literal(rec, "ttl") == f"Decode speedup over Full KV ({MODEL})" and number(rec, "nblocks") == "3"
    assert rec.rstrip("\n").endswith("load 'speedup.gp'"), rec
    assert figures(run) == {"speedup"}
    # no row with a speedup (a run without Full KV): no figure
    run2 = make_run(tmp_path / "run2", latency=[r[:3] + [""] for r in LATENCY])
    p, recs = plot(kvbench_bin, run2)
    assert p.returncode == 0 and figures(run2) == set() and recs == [], p.stderr


# ---- quoting ----

def test_labels_cannot_break_the_script(kvbench_bin, tmp_path):
    """A task, label or model name holding quotes or a line break reaches
    gnuplot as one literal (control characters as spaces, '' for a quote)
    and a data block's name as one double-quoted field (" as ')."""
    task, label, model = "t'a\nsk", "l\"a'b\rel", "m'\n'odel"
    run = make_run(tmp_path / "run", model=model,
                   summary=[[task, "all", "all", label, "", "16", "1"], [task, "all", "all", label, "", "32", "2"]])
    p, recs = plot(kvbench_bin, run)
    assert p.returncode == 0, p.stderr
    fig = "accuracy_t_a_sk"
    rec = record_of(recs, fig)
    assert literal(rec, "ttl") == "t'a sk: score vs token budget (m' 'odel)"
    assert read_dat(run / "plots" / f"{fig}.dat") == [("l'a'b el", [(16.0, 1.0), (32.0, 2.0)])]
    # every line plot writes is a complete gnuplot command: the datafile's and
    # outfile's literals and the variables, then load
    for line in rec.split("\n"):
        if "='" in line:
            assert literal(line, line.split("=")[0]) is not None, line


@pytest.mark.skipif(shutil.which("gnuplot") is None, reason="gnuplot not installed")
def test_real_gnuplot_draws_quoted_labels(kvbench_bin, tmp_path):
    """The real gnuplot parses what plot feeds it for such names: every
    figure kind is drawn (exit 0), which fails when a quote closes a literal."""
    odd = "q'x\"y\n"
    summary = [[odd, "all", "all", odd, '{"kernel":3}', "16", "1"], [odd, "all", "all", odd, '{"kernel":5}', "32", "2"],
               ["ALL", "all", "all", odd, '{"alpha":1}', "32", "2"], ["needle", "all", "all", odd, "", "8", "1"]]
    samples = [["needle", odd, "8", d, "1", "", "", c] for d in ("0", "1") for c in ("50", "90")]
    run = make_run(tmp_path / "run", model=odd, summary=summary, samples=samples,
                   latency=[[odd, "8", "64", "1.5"], [odd, "8", "128", "2"]])
    p, _ = plot(kvbench_bin, run, stub=False, args=("--formats", "svg"))
    assert p.returncode == 0, p.stderr
    assert len(figures(run)) == 7, figures(run)


# ---- tables the sweep could not have written ----

def _mixed_samples(d):
    """samples.csv of task mix, whose samples ask two kinds (a and b)."""
    write_csv(d / "samples.csv", ["task", "kind", "label", "budget", "depth", "score", "target_tokens",
                                  "context_words", "context_tokens"],
              [["mix", "a", "snap", "16", "", "1", "", "", "10"], ["mix", "b", "snap", "16", "", "0", "", "", "10"]])


@pytest.mark.parametrize("rows,samples,msg", [
    # params that are JSON but no object (OUTPUTS.md: a JSON object, or empty)
    ([["qa", "all", "all", "snap", "[7]", "16", "1"]], False, "summary.csv: data row 1: params '[7]', expected a JSON object"),
    ([["qa", "all", "all", "snap", "", "16", "1"], ["qa", "all", "all", "k", "7", "16", "1"]], False,
     "summary.csv: data row 2: params '7', expected a JSON object"),
    # a kind other than all on a row of one turn, even one of the task's kinds
    ([["mix", "all", "all", "snap", "", "16", "50"], ["mix", "all", "a", "snap", "", "16", "100"],
      ["mix", "1", "a", "snap", "", "16", "100"]], True,
     "summary.csv: data row 3: kind 'a' on a row of turn '1', expected 'all'"),
    # a cell (task, label, budget) without its row over all turns and kinds,
    # beside the same label's whole row at another budget
    ([["qa", "all", "all", "snap", "", "16", "1"], ["qa", "1", "all", "snap", "", "32", "1"]], False,
     "summary.csv: data row 2: task 'qa', cell 'snap' budget 32 has no row over all turns and kinds"),
    ([["qa", "all", "all", "snap", "", "16", "1"], ["qa", "1", "all", "full", "", "16", "1"]], False,
     "summary.csv: data row 2: task 'qa', cell 'full' budget 16 has no row over all turns and kinds"),
])
def test_refuses_a_summary_the_sweep_cannot_write(kvbench_bin, tmp_path, rows, samples, msg):
    """Exit 2 naming the file and data row, before plots/ is made
    (docs/OUTPUTS.md's summary.csv: every cell has its all/all row; rows per
    kind are over all turns)."""
    run = make_run(tmp_path / "run", summary=rows)
    if samples:
        _mixed_samples(run)
    p, recs = plot(kvbench_bin, run)
    assert p.returncode == 2 and msg in p.stderr, (p.returncode, p.stderr)
    assert not (run / "plots").exists() and recs == []
    # the same run with the offending row fixed is drawn
    good = [r for r in rows if r[1] == "all" and r[4] in ("", "{}") or r[4].startswith("{")]
    run2 = make_run(tmp_path / "good", summary=good)
    if samples:
        _mixed_samples(run2)
    p, _ = plot(kvbench_bin, run2)
    assert p.returncode == 0, p.stderr
