"""scripts/latency_targets.py: the three speed targets per run, their medians,
counts and correlations. Expected values are worked out by hand (or by numpy's
corrcoef) from the rows the tests write, never from the script's output."""
import csv
import os
import re
import subprocess
import sys

import numpy as np
import pytest

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "..", "scripts", "latency_targets.py")
COLS = ["method", "label", "params", "budget", "context", "attn_ms_per_token", "select_ms_per_token",
        "upkeep_ms_per_token", "read_bw_gbps", "handover_ns", "attn_bw_fraction", "speedup_vs_full"]


def script(*args):
    return subprocess.run([sys.executable, SCRIPT, *map(str, args)], capture_output=True, text=True,
                          timeout=120)


def write(path, rows, cols=COLS):
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for r in rows:
            w.writerow([r.get(c, "") for c in cols])


def run_rows(frac, speedup, sel, upkeep, attn, ho="55.0"):
    """One run: Full KV and RocketKV at 8176 (the values under test), and
    distractors the script must not pick: a shorter context, another budget,
    another method at the same budget."""
    return [
        {"method": "full", "label": "full", "context": 8176, "attn_ms_per_token": 6.0,
         "read_bw_gbps": 35.0, "handover_ns": ho, "attn_bw_fraction": frac, "speedup_vs_full": 1.0},
        {"method": "rocketkv", "label": "rocketkv", "budget": 256, "context": 8176, "attn_ms_per_token": attn,
         "select_ms_per_token": sel, "upkeep_ms_per_token": upkeep, "attn_bw_fraction": 0.2,
         "read_bw_gbps": 35.0, "handover_ns": ho, "speedup_vs_full": speedup},
        {"method": "rocketkv", "label": "rocketkv", "budget": 1024, "context": 8176, "attn_ms_per_token": 9.0,
         "select_ms_per_token": 8.0, "upkeep_ms_per_token": 0.0, "attn_bw_fraction": 0.1,
         "read_bw_gbps": 35.0, "handover_ns": ho, "speedup_vs_full": 9.0},
        {"method": "hybrid", "label": "hybrid", "budget": 256, "context": 8176, "attn_ms_per_token": 9.0,
         "select_ms_per_token": 8.0, "upkeep_ms_per_token": 0.0, "attn_bw_fraction": 0.1,
         "read_bw_gbps": 35.0, "handover_ns": ho, "speedup_vs_full": 7.0},
        {"method": "full", "label": "full", "context": 1000, "attn_ms_per_token": 1.0,
         "read_bw_gbps": 35.0, "handover_ns": ho, "attn_bw_fraction": 0.99, "speedup_vs_full": 1.0},
        {"method": "rocketkv", "label": "rocketkv", "budget": 256, "context": 1000, "attn_ms_per_token": 1.0,
         "select_ms_per_token": 0.1, "upkeep_ms_per_token": 0.0, "attn_bw_fraction": 0.1,
         "read_bw_gbps": 35.0, "handover_ns": ho, "speedup_vs_full": 1.5},
    ]


# A: every target met; B: none; C: Full KV's fraction and the speedup exactly at
# their targets (met: >= and >=), the share far above (0.25 / 0.5 = 50%)
RUNS = {"A": (0.80, 2.6, 0.40, 0.10, 1.0), "B": (0.50, 2.4, 0.50, 0.10, 1.0), "C": (0.70, 2.5, 0.30, 0.05, 0.5)}


@pytest.fixture
def runs(tmp_path):
    paths = []
    for name, v in RUNS.items():
        d = tmp_path / name
        d.mkdir()
        write(d / "latency.csv", run_rows(*v, ho="" if name == "B" else "55.0"))
        paths.append(d)
    return paths


def test_table_medians_counts(runs):
    p = script(*runs)
    assert p.returncode == 0, p.stderr
    rows = [l for l in p.stdout.splitlines() if l.startswith("| /")]  # the runs, not the header
    assert len(rows) == 3
    # per run: context, read bw, hand-over (empty in B), fraction, speedup, share
    assert rows[0].endswith("| 8176 | 35.0 | 55 | 80.0% | 2.60x | 30.0% |"), rows[0]
    assert rows[1].endswith("| 8176 | 35.0 |  | 50.0% | 2.40x | 40.0% |"), rows[1]
    assert rows[2].endswith("| 8176 | 35.0 | 55 | 70.0% | 2.50x | 50.0% |"), rows[2]
    assert "fraction: 50.0-80.0%, median 70.0%, target met in 2 of 3" in p.stdout
    assert "speedup: 2.40-2.60x, median 2.50x, target met in 2 of 3" in p.stdout
    assert "share: 30.0-50.0%, median 40.0%, target met in 1 of 3" in p.stdout
    assert "all three met together in 1 of 3" in p.stdout
    share, speed, frac = [0.30, 0.40, 0.50], [2.6, 2.4, 2.5], [0.80, 0.50, 0.70]
    want = [np.corrcoef(share, speed)[0, 1], np.corrcoef(share, frac)[0, 1], np.corrcoef(speed, frac)[0, 1]]
    m = re.search(r"share-speedup ([-+][\d.]+), share-fraction ([-+][\d.]+), speedup-fraction ([-+][\d.]+)",
                  p.stdout)
    assert m, p.stdout
    for got, w in zip(m.groups(), want):
        assert float(got) == pytest.approx(w, abs=0.005)  # printed to 2 decimals


def test_options(runs, tmp_path):
    # another context: the 1000-token rows (Full KV 0.99, RocketKV 1.5x, (0.1 - 0) / 1.0)
    p = script("--context", 1000, runs[0])
    assert p.returncode == 0, p.stderr
    assert p.stderr == ""  # chosen, so no note
    assert "| 1000 | 35.0 | 55 | 99.0% | 1.50x | 10.0% |" in p.stdout
    # another budget, another method, stricter targets
    p = script("--budget", 1024, runs[0])
    assert "| 8176 | 35.0 | 55 | 80.0% | 9.00x | 88.9% |" in p.stdout, p.stdout
    p = script("--method", "hybrid", "--speedup", 8, runs[0])
    assert "7.00x" in p.stdout and "speedup: 7.00-7.00x, median 7.00x, target met in 0 of 1" in p.stdout
    assert "correlation" not in p.stdout  # fewer than three runs
    # a latency.csv file named directly; a 2.497 speedup misses 2.5x though printed 2.50x
    rows = run_rows(0.9, 2.497, 0.3, 0.1, 1.0)
    write(tmp_path / "x.csv", rows)
    p = script(tmp_path / "x.csv")
    assert p.stderr == ""  # its largest context is 8176: the targets' context
    assert "2.50x" in p.stdout and "target met in 0 of 1" in p.stdout.split("speedup:")[1].splitlines()[0]


def test_errors(runs, tmp_path):
    def bad(args, msg):
        p = script(*args)
        assert p.returncode == 2, (args, p.stdout, p.stderr)
        assert msg in p.stderr, p.stderr
        assert p.stdout == ""
    bad([tmp_path / "nope"], f"{tmp_path / 'nope'}: cannot read")
    bad([], "the following arguments are required: RUN")
    bad(["--budget", "x", runs[0]], "argument --budget: expects a number, got 'x'")
    bad(["--budget", "-1", runs[0]], "argument --budget: expects a positive number")
    bad(["--bogus", runs[0]], "unrecognized arguments: --bogus")
    bad(["--context", 4096, runs[0]], "0 rows of method 'full' at context 4096")
    bad(["--method", "quest", runs[0]], "0 rows of method 'quest' at budget 256 and context 8176")
    bad([runs[0], tmp_path / "nope"], "cannot read")  # one bad run fails the whole report
    write(tmp_path / "cols.csv", [{"method": "full"}], cols=["method", "label", "budget"])
    bad([tmp_path / "cols.csv"], f"{tmp_path / 'cols.csv'}: not a latency.csv: no column 'context'")
    rows = run_rows(0.9, 2.6, 0.3, 0.1, 1.0)
    rows[1]["select_ms_per_token"] = "fast"
    write(tmp_path / "num.csv", rows)
    bad([tmp_path / "num.csv"], f"{tmp_path / 'num.csv'}:3: column 'select_ms_per_token' is 'fast', expected a number")
    rows = run_rows(0.9, 2.6, 0.3, 0.1, 1.0)
    rows.append(dict(rows[1], label="rocketkv_w64"))
    write(tmp_path / "dup.csv", rows)
    bad([tmp_path / "dup.csv"], "2 rows of method 'rocketkv' at budget 256 and context 8176, expected one")
    p = script("--label", "rocketkv_w64", tmp_path / "dup.csv")
    assert p.returncode == 0 and "| 20.0% |" in p.stdout, p.stderr  # (0.3 - 0.1) / 1.0
    (tmp_path / "short.csv").write_text(",".join(COLS) + "\nfull,full\n")
    bad([tmp_path / "short.csv"], f"{tmp_path / 'short.csv'}:2: expected {len(COLS)} fields")
    # the targets are positive numbers (0 is not one)
    bad(["--budget", "0", runs[0]], "argument --budget: expects a positive number, got '0'")
    bad(["--share", "0", runs[0]], "argument --share: expects a positive number, got '0'")
    # two Full KV rows at the context: which one is meant cannot be told
    rows = run_rows(0.9, 2.6, 0.3, 0.1, 1.0)
    rows.append(dict(rows[0], label="full_b"))
    write(tmp_path / "full2.csv", rows)
    bad([tmp_path / "full2.csv"], "2 rows of method 'full' at context 8176, expected one")
    # a value that is not finite, and an attention time of 0 (the share's
    # denominator): exit 2 naming the line and column, not a traceback
    rows = run_rows(0.9, 2.6, 0.3, 0.1, 1.0)
    rows[0]["attn_bw_fraction"] = "nan"
    write(tmp_path / "nan.csv", rows)
    bad([tmp_path / "nan.csv"], f"{tmp_path / 'nan.csv'}:2: column 'attn_bw_fraction' is 'nan', expected a finite "
        "number")
    write(tmp_path / "zero.csv", run_rows(0.9, 2.6, 0.3, 0.1, 0.0))
    bad([tmp_path / "zero.csv"], f"{tmp_path / 'zero.csv'}:3: column 'attn_ms_per_token' is 0, expected > 0")


def test_target_edges(tmp_path):
    """The share target is met at exactly 0.35 (<=), and the note about the
    context is given outside 8000-8192 only: its ends are 8K contexts."""
    d = tmp_path / "edge"
    d.mkdir()
    # share (0.35 - 0) / 1.0: the same double as the target 0.35
    write(d / "latency.csv", run_rows(0.9, 2.6, 0.35, 0.0, 1.0))
    p = script(d)
    assert p.returncode == 0, p.stderr
    assert "share: 35.0-35.0%, median 35.0%, target met in 1 of 1" in p.stdout, p.stdout
    for ctx, note in ((7999, True), (8000, False), (8192, False), (8193, True)):
        rows = [dict(r, context=ctx if r["context"] == 8176 else r["context"]) for r in run_rows(0.9, 2.6, 0.3, 0.1, 1.0)]
        write(d / "latency.csv", rows)
        p = script(d)
        assert p.returncode == 0, p.stderr
        assert (f"its largest context is {ctx}; the targets are set at 8K context" in p.stderr) == note, (ctx, p.stderr)


def test_real_latency_csv(kvbench_bin, tmp_path):
    """On what bench methods writes: the script's numbers are the CSV's, as
    computed here from its columns."""
    out = tmp_path / "run"
    p = subprocess.run([kvbench_bin, "bench", "methods", "-m", "synthetic:smollm2-135m", "--contexts", "300",
                        "--methods", "full,rocketkv", "--budgets", "64", "--decode-tokens", "2", "--reps", "1",
                        "--out", out], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stderr
    with open(out / "latency.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    full = next(r for r in rows if r["method"] == "full")
    rk = next(r for r in rows if r["method"] == "rocketkv")
    share = (float(rk["select_ms_per_token"]) - float(rk["upkeep_ms_per_token"])) / float(rk["attn_ms_per_token"])
    p = script("--budget", 64, out)
    assert p.returncode == 0, p.stderr
    want = (f"| {full['context']} | {float(full['read_bw_gbps']):.1f} | "
            f"{'' if full['handover_ns'] == '' else format(float(full['handover_ns']), '.0f')} | "
            f"{100 * float(full['attn_bw_fraction']):.1f}% | {float(rk['speedup_vs_full']):.2f}x | {100 * share:.1f}% |")
    assert want in p.stdout, (want, p.stdout)
    # a 300-token run measures something else than the 8K targets: said on stderr
    assert f"its largest context is {full['context']}; the targets are set at 8K context" in p.stderr


def test_output_failure_is_one_line_and_exit_1(tmp_path):
    """stdout on a full disk: "latency_targets: writing the output failed:
    ...", exit 1, as kvbench's commands; before, a Python traceback."""
    d = tmp_path / "r1"
    d.mkdir()
    write(d / "latency.csv", run_rows(0.8, 3.0, 0.1, 0.02, 0.5))
    with open("/dev/full", "w") as full:
        p = subprocess.run([sys.executable, SCRIPT, str(d)], stdout=full, stderr=subprocess.PIPE, text=True,
                           timeout=120)
    assert p.returncode == 1, p.stderr
    assert p.stderr.strip().splitlines() == ["latency_targets: writing the output failed: No space left on device"], \
        p.stderr
