"""summary.csv recomputed from samples.csv, end to end, by the documented
definitions alone (docs/OUTPUTS.md "summary.csv", with the cell and the
samples.csv columns from the same file, and CONFIG.md for which cell is the
config's first of a method), not by reading harness/summary.c.

The definitions used (each an OUTPUTS.md sentence; where the docs leave a
choice open, the reading taken is marked READING):

- One row per (task, turn, kind, cell), cell = (method, label, params,
  budget, budget_mode). Every cell of a task has a row with turn `all` and
  kind `all`, over all that task's rows of the cell.
- "`all` = every turn, else one turn of a multi-turn task": a task whose
  samples.csv rows have more than one turn gets one row per (turn, cell),
  kind `all` (plot refuses another kind on a per-turn row).
- "only a task whose samples ask two kinds or more has rows per kind": such a
  task gets one row per (kind, cell) with turn `all` ("such rows are over all
  turns"). READING: the task's `all` row ("the mean over both") is the mean
  over its rows, not the mean of its kinds' means (they differ when the
  kinds have different row counts, as here).
- Task `ALL` "when the run has more than one task", one row per cell, turn
  and kind `all`: score = mean over tasks of the task's `all`/`all` score
  ("`ALL` = mean of the task scores"), empty when the cell has no row of some
  task; `ci95` empty; `n` = every row of the cell ("`n` still counts its
  rows"). READING: the other columns of an ALL row follow their own
  definitions over the cell's rows of every task ("median over rows", "means
  over rows"), not a mean over the tasks' values.
- `n` rows aggregated; `score` 100 x mean of `score`; `ci95` 1.96 standard
  errors of that mean, x100 like the score. READING: standard error = sample
  standard deviation (n - 1) / sqrt(n), and 0 for n = 1.
- `decode_ms_per_token` median over rows (READING: even n: the mean of the two
  middle values, statistics.median).
- `speedup_vs_full` = the Full KV cell's median decode ms/token / this row's;
  the Full KV cell is the config's first entry of method `full`, whatever its
  label (taken here from the config, not from the table). READING: on a
  per-turn or per-kind row the Full KV cell's median is that of its row of the
  same (task, turn, kind) (the docs say only "in the same task"); on an ALL row
  that of the Full KV cell's ALL row.
- `tokens_resident` ... `compression_ratio`: means over rows. READING: the
  summary.csv columns are tokens_resident, bytes_resident,
  tokeq_read_per_step, bytes_read_per_step, compression_ratio (samples.csv has
  approx_tokeq_per_step and attended_per_step between the last two; the
  summary does not carry them).
- Scores are not rounded to 2 decimals (METRICS.md's `round(100 * sum / n, 2)`
  "task score" is not what summary.csv prints).

Tolerance: both tables print numbers with `%.6g`; the inputs here are the
printed samples.csv values, which is also what summary.csv is computed from,
so the only difference is the output's rounding to 6 significant digits (and
the summation order, ~1e-15 relative). A printed number must be within half a
unit of its 6th significant digit of the value recomputed here (1e-9 relative
slack), so a change of its last digit is caught; or within 1e-9 absolute, for
values that are zero up to round-off (ci95 of equal scores). Each printed
number must also be exactly its own `%.6g` form.

The run (tiny random model, about a second): needle with 1-digit keys (some
hits), niah_single_1, scbench_kv_like with 2 turns, and a mixed
scbench_summary_with_needles file written here whose two samples have 2 and 3
turns and unequal kind counts (summary, passkey with an empty gold for some
1 scores), so turn and kind rows vary in size; methods: a `full` entry
labelled `dense` first (the baseline), snapkv, quest and rocketkv at budgets
32 and 64, and a second `full` entry (`full_again`, not the baseline).
Not covered: the empty `ALL` score of a cell without a row of some task (only
an interrupted or failed run has one), and a run without a `full` cell.
"""
import csv
import json
import math
import statistics
import subprocess

CELL = ("method", "label", "params", "budget", "budget_mode")
KEY = ("task", "turn", "kind") + CELL
MEANS = ("tokens_resident", "bytes_resident", "tokeq_read_per_step", "bytes_read_per_step",
         "compression_ratio")
COLUMNS = list(KEY) + ["n", "score", "ci95", "decode_ms_per_token", "speedup_vs_full"] + list(MEANS)
NUMERIC = ("score", "ci95", "decode_ms_per_token", "speedup_vs_full") + MEANS
ABS_TOL = 1e-9


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        rd = csv.DictReader(f)
        return rd.fieldnames, list(rd)


def baseline_label(config):
    """Label of the config's first entry of method `full`, or None."""
    for e in config["methods"]:
        e = {"method": e} if isinstance(e, str) else e
        if e["method"] == "full":
            return e.get("label", "full")
    return None


def _stats(rows):
    n = len(rows)
    sc = [float(r["score"]) for r in rows]
    out = {
        "n": n,
        "score": 100 * statistics.fmean(sc),
        "ci95": 100 * 1.96 * statistics.stdev(sc) / math.sqrt(n) if n > 1 else 0.0,
        "decode_ms_per_token": statistics.median(float(r["decode_ms_per_token"]) for r in rows),
    }
    for c in MEANS:
        out[c] = statistics.fmean(float(r[c]) for r in rows)
    return out


def expected_summary(samples, base_label):
    """{key tuple: {column: value or None (empty)}} from samples.csv rows."""
    cell = lambda r: tuple(r[c] for c in CELL)
    is_base = lambda c: base_label is not None and c[0] == "full" and c[1] == base_label
    groups = {}
    tasks = list(dict.fromkeys(r["task"] for r in samples))
    for task in tasks:
        trows = [r for r in samples if r["task"] == task]
        multi = len({r["turn"] for r in trows}) > 1
        mixed = len({r["kind"] for r in trows}) > 1
        for r in trows:
            groups.setdefault((task, "all", "all") + cell(r), []).append(r)
            if multi:
                groups.setdefault((task, r["turn"], "all") + cell(r), []).append(r)
            if mixed:
                groups.setdefault((task, "all", r["kind"]) + cell(r), []).append(r)
    exp = {k: _stats(v) for k, v in groups.items()}
    if len(tasks) > 1:
        cells = list(dict.fromkeys(cell(r) for r in samples))
        for c in cells:
            rows = [r for r in samples if cell(r) == c]
            v = _stats(rows)
            per_task = [exp[(t, "all", "all") + c]["score"] for t in tasks
                        if (t, "all", "all") + c in exp]
            v["score"] = statistics.fmean(per_task) if len(per_task) == len(tasks) else None
            v["ci95"] = None
            exp[("ALL", "all", "all") + c] = v
    # speedup: the baseline cell's row of the same (task, turn, kind)
    for k, v in exp.items():
        base = [b for bk, b in exp.items() if bk[:3] == k[:3] and is_base(bk[3:])]
        v["speedup_vs_full"] = (base[0]["decode_ms_per_token"] / v["decode_ms_per_token"]
                                if base else None)
    return exp


def close(printed, want):
    """Whether `printed` (a %.6g value) is `want` rounded to 6 significant
    digits: within half a unit of its last digit (1e-9 relative slack for the
    summation order), or within ABS_TOL of it."""
    if abs(printed - want) <= ABS_TOL:
        return True
    if printed == 0:
        return False
    half = 0.5 * 10.0 ** (math.floor(math.log10(abs(printed))) - 5)
    return abs(printed - want) <= half * (1 + 1e-9) + 1e-9 * abs(want)


def compare(exp, fieldnames, got_rows):
    """List of differences (empty when summary.csv matches)."""
    bad = []
    if fieldnames != COLUMNS:
        bad.append(f"header {fieldnames} != {COLUMNS}")
        return bad
    got = {}
    for i, r in enumerate(got_rows, 2):
        k = tuple(r[c] for c in KEY)
        if k in got:
            bad.append(f"line {i}: duplicate row {k}")
        got[k] = r
    for k in sorted(set(exp) - set(got)):
        bad.append(f"missing row {k}")
    for k in sorted(set(got) - set(exp)):
        bad.append(f"unexpected row {k}")
    for k in sorted(set(exp) & set(got)):
        e, g = exp[k], got[k]
        if g["n"] != str(e["n"]):
            bad.append(f"{k}: n expected {e['n']}, got {g['n']!r}")
        for c in NUMERIC:
            want, s = e[c], g[c]
            if want is None:
                if s != "":
                    bad.append(f"{k}: {c} expected empty, got {s!r}")
                continue
            try:
                x = float(s)
            except ValueError:
                bad.append(f"{k}: {c} expected {want:.6g}, got {s!r}")
                continue
            if format(x, ".6g") != s:
                bad.append(f"{k}: {c} {s!r} is not printed as %.6g")
            if not close(x, want):
                bad.append(f"{k}: {c} expected {want!r} ({want:.6g}), got {s!r}")
    return bad


def check_run(run_dir, config=None):
    """Recomputes run_dir/summary.csv; returns (differences, rows compared)."""
    if config is None:
        with open(f"{run_dir}/run.json", encoding="utf-8") as f:
            config = json.load(f)["config"]
    _, samples = read_csv(f"{run_dir}/samples.csv")
    fields, got = read_csv(f"{run_dir}/summary.csv")
    exp = expected_summary(samples, baseline_label(config))
    return compare(exp, fields, got), len(exp)


MIXED = [
    {"id": "a", "context": "Mara rows and counts gulls. " * 10, "multi_turns": [
        {"input": "Summarise the text.", "answer": "e t a o i n s", "task": "scbench_summary"},
        {"input": "What is the pass key?", "answer": "", "task": "scbench_passkey"}]},
    {"id": "b", "context": "Mara rows and counts gulls. " * 10 + "The pass key is 4.", "multi_turns": [
        {"input": "What is the pass key?", "answer": "", "task": "scbench_passkey"},
        {"input": "Summarise the text.", "answer": "the a of and", "task": "scbench_summary"},
        {"input": "What is the pass key?", "answer": "4", "task": "scbench_passkey"}]},
]


def test_summary_matches_reference(kvbench_bin, tiny_llama, tmp_path):
    model = tiny_llama(n_ctx=2048)
    data = tmp_path / "data"
    (data / "scbench").mkdir(parents=True)
    (data / "scbench" / "mixed.jsonl").write_text("".join(json.dumps(s) + "\n" for s in MIXED))
    config = {
        "name": "t", "seed": 5, "data_dir": str(data),
        "tasks": [
            {"task": "needle", "words": [60, 120], "depths": [0.0, 1.0], "per_cell": 1,
             "max_new": 12, "digits": 1},
            {"task": "niah_single_1", "lengths": [300], "samples": 2, "max_new": 8},
            {"task": "scbench_kv_like", "lengths": [900], "samples": 2, "turns": 2},
            {"task": "scbench_summary_with_needles", "file": "scbench/mixed.jsonl"},
        ],
        "methods": [{"method": "full", "label": "dense"}, "snapkv", "quest", "rocketkv",
                    {"method": "full", "label": "full_again"}],
        "budgets": [32, 64],
    }
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps(config))
    out = tmp_path / "out"
    p = subprocess.run([kvbench_bin, "sweep", str(cfg), "--out", str(out), "-m", model,
                        "--threads", "1"], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr

    _, samples = read_csv(out / "samples.csv")
    # the run covers what the reference is meant to exercise
    by_task = {t: [r for r in samples if r["task"] == t] for t in {r["task"] for r in samples}}
    assert len(by_task) == 4
    assert {r["turn"] for r in by_task["scbench_kv_like"]} == {"0", "1"}
    assert {r["turn"] for r in by_task["scbench_summary_with_needles"]} == {"0", "1", "2"}
    assert {r["kind"] for r in by_task["scbench_summary_with_needles"]} == \
        {"scbench_summary", "scbench_passkey"}
    assert len({r["score"] for r in samples}) > 1, "scores should vary for the means to mean something"
    for c in ("score", "decode_ms_per_token") + MEANS:
        assert all(r[c] != "" for r in samples), c

    bad, nrows = check_run(out, config)
    assert not bad, "\n".join(bad[:30])
    # 8 cells (dense, snapkv/quest/rocketkv x 2 budgets, full_again) x (4 task rows
    # + 2 turn rows + 3 turn rows + 2 kind rows) + 8 ALL rows
    assert nrows == 8 * 11 + 8

    # the comparison is not vacuous: one number off by 2e-5 relative (a digit or two of the six
    # printed), still printed as %.6g, is caught (changing the last printed character could
    # break the %.6g form when the sixth digit is 0, a second report)
    fields, got = read_csv(out / "summary.csv")
    exp = expected_summary(samples, baseline_label(config))
    row = next(r for r in got if r["task"] == "ALL" and r["label"] == "rocketkv")
    s = row["speedup_vs_full"]
    row["speedup_vs_full"] = "%.6g" % (float(s) * 1.00002)
    assert row["speedup_vs_full"] != s
    assert len(compare(exp, fields, got)) == 1
