#!/usr/bin/env python3
"""The issue's three speed targets, run by run, from latency.csv files
(`kvbench bench methods --out DIR` or a sweep's latency part), and their
medians: the numbers behind the status table of docs/PERFORMANCE.md.

usage: python3 scripts/latency_targets.py [options] RUN...

RUN is a run directory holding latency.csv, or a latency.csv file. Per run,
at one context (default: the largest in that file) it takes
  - Full KV's `attn_bw_fraction` (its decode attention's read rate over the
    measured read bandwidth; target >= 0.70),
  - the sparse method's `speedup_vs_full` at budget B (target >= 2.5),
  - its selection share, (`select_ms_per_token` - `upkeep_ms_per_token`) /
    `attn_ms_per_token` (page scores + top-k over its attention; target <= 0.35),
and prints a Markdown table of the runs, then the ranges, medians (of the
per-run values), how many runs met each target, how many met all three at
once, and (three runs or more) the Pearson correlations between the three
over runs. The targets are checked on the values as latency.csv holds them,
not as printed (a speedup of 2.497 shows as 2.50x and misses 2.5x). Standard
library only.

options:
  --method NAME    the sparse method (column `method`; default rocketkv)
  --label LABEL    pick its row by `label` instead (a method run with several
                   parameter sets has one label each)
  --budget B       its budget (default 256)
  --context N      the context (the `context` column, e.g. 8176 for a
                   requested 8192 on the default model; default: the largest,
                   with a note on stderr when that is not 8000-8192)
  --fraction F, --speedup S, --share X   the targets (default 0.70, 2.5, 0.35)

Exit status 2, naming the file (and line or column), when a file is missing,
is not a latency.csv, lacks a row or holds a value that is not a number.
"""
import argparse
import csv
import math
import os
import statistics
import sys

NEED = ("method", "label", "budget", "context", "attn_ms_per_token", "select_ms_per_token",
        "upkeep_ms_per_token", "attn_bw_fraction", "speedup_vs_full", "read_bw_gbps")


class Bad(Exception):
    pass


def number(path, line, row, col):
    v = row[col]
    try:
        x = float(v)
    except ValueError:
        raise Bad(f"{path}:{line}: column '{col}' is '{v}', expected a number") from None
    if not math.isfinite(x):
        raise Bad(f"{path}:{line}: column '{col}' is '{v}', expected a finite number")
    return x


def one_run(arg, o):
    path = os.path.join(arg, "latency.csv") if os.path.isdir(arg) else arg
    try:
        with open(path, newline="", encoding="utf-8") as f:
            rd = csv.DictReader(f)
            missing = [c for c in NEED if c not in (rd.fieldnames or [])]
            if missing:
                raise Bad(f"{path}: not a latency.csv: no column {', '.join(repr(c) for c in missing)}")
            rows = [(i + 2, r) for i, r in enumerate(rd)]
    except OSError as e:
        raise Bad(f"{path}: cannot read: {e.strerror}") from None
    except (UnicodeDecodeError, csv.Error) as e:
        raise Bad(f"{path}: not a latency.csv: {e}") from None
    for line, r in rows:
        if None in r or any(v is None for v in r.values()):
            raise Bad(f"{path}:{line}: expected {len(rd.fieldnames)} fields")
    ctxs = [int(number(path, line, r, "context")) for line, r in rows]
    if not ctxs:
        raise Bad(f"{path}: no rows")
    ctx = o["context"] if o["context"] is not None else max(ctxs)
    at = [row for row, c in zip(rows, ctxs) if c == ctx]
    full = [(line, r) for line, r in at if r["method"] == "full"]
    if o["label"] is not None:
        sp = [(line, r) for line, r in at if r["label"] == o["label"]]
        what = f"label '{o['label']}'"
    else:
        sp = [(line, r) for line, r in at if r["method"] == o["method"]]
        what = f"method '{o['method']}'"
    sp = [(line, r) for line, r in sp if r["budget"] != "" and number(path, line, r, "budget") == o["budget"]]
    if len(full) != 1:
        raise Bad(f"{path}: {len(full)} rows of method 'full' at context {ctx}, expected one")
    if len(sp) != 1:
        raise Bad(f"{path}: {len(sp)} rows of {what} at budget {o['budget']:g} and context {ctx}, "
                  "expected one (--label picks one of several)")
    (fl, f), (sl, s) = full[0], sp[0]
    attn = number(path, sl, s, "attn_ms_per_token")
    if attn <= 0:
        raise Bad(f"{path}:{sl}: column 'attn_ms_per_token' is {attn:g}, expected > 0")
    share = (number(path, sl, s, "select_ms_per_token") - number(path, sl, s, "upkeep_ms_per_token")) / attn
    ho = f.get("handover_ns", "")
    return {
        "run": arg, "context": ctx,
        "read_bw": number(path, fl, f, "read_bw_gbps"),
        "handover": number(path, fl, f, "handover_ns") if ho not in (None, "") else None,
        "fraction": number(path, fl, f, "attn_bw_fraction"),
        "speedup": number(path, sl, s, "speedup_vs_full"),
        "share": share,
    }


def pearson(x, y):
    mx, my = statistics.fmean(x), statistics.fmean(y)
    sxy = sum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = sum((a - mx) ** 2 for a in x)
    syy = sum((b - my) ** 2 for b in y)
    return sxy / math.sqrt(sxx * syy) if sxx > 0 and syy > 0 else float("nan")


def positive(kind):
    def parse(v):
        try:
            x = kind(v)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expects a number, got '{v}'") from None
        if not math.isfinite(x) or x <= 0:
            raise argparse.ArgumentTypeError(f"expects a positive number, got '{v}'")
        return x
    return parse


def main(argv):
    ap = argparse.ArgumentParser(prog="latency_targets.py", usage="%(prog)s [options] RUN...",
                                 description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("runs", nargs="+", metavar="RUN")
    ap.add_argument("--method", default="rocketkv")
    ap.add_argument("--label")
    ap.add_argument("--budget", type=positive(float), default=256.0)
    ap.add_argument("--context", type=positive(int))
    ap.add_argument("--fraction", type=positive(float), default=0.70)
    ap.add_argument("--speedup", type=positive(float), default=2.5)
    ap.add_argument("--share", type=positive(float), default=0.35)
    a = ap.parse_args(argv)  # bad options: a message naming the option, exit 2
    o = vars(a)
    runs = a.runs
    res = [one_run(r, o) for r in runs]
    for r in res:  # the targets are set at 8K: say so when the largest context is another
        if o["context"] is None and not 8000 <= r["context"] <= 8192:
            print(f"latency_targets: note: {r['run']}: its largest context is {r['context']}; the targets "
                  "are set at 8K context (--context picks one)", file=sys.stderr)
    ok = {
        "fraction": lambda r: r["fraction"] >= o["fraction"],
        "speedup": lambda r: r["speedup"] >= o["speedup"],
        "share": lambda r: r["share"] <= o["share"],
    }
    name = o["label"] if o["label"] is not None else o["method"]
    print(f"| run | context | read bw GB/s | handover_ns | Full KV attention, of read bw (>= {o['fraction']:.0%}) "
          f"| {name} vs Full KV (>= {o['speedup']:g}x) | page scores + top-k, of its attention (<= {o['share']:.0%}) |")
    print("|---|---|---|---|---|---|---|")
    for r in res:
        ho = f"{r['handover']:.0f}" if r["handover"] is not None else ""
        print(f"| {r['run']} | {r['context']} | {r['read_bw']:.1f} | {ho} | {100 * r['fraction']:.1f}% "
              f"| {r['speedup']:.2f}x | {100 * r['share']:.1f}% |")
    n = len(res)
    print()
    for k, unit, scale in (("fraction", "%", 100), ("speedup", "x", 1), ("share", "%", 100)):
        v = [r[k] * scale for r in res]
        fmt = "{:.2f}" if unit == "x" else "{:.1f}"
        met = sum(ok[k](r) for r in res)
        print(f"{k}: {fmt.format(min(v))}-{fmt.format(max(v))}{unit}, median "
              f"{fmt.format(statistics.median(v))}{unit}, target met in {met} of {n}")
    print(f"all three met together in {sum(all(f(r) for f in ok.values()) for r in res)} of {n}")
    if n >= 3:
        col = {k: [r[k] for r in res] for k in ok}
        print("correlation over runs: share-speedup {:+.2f}, share-fraction {:+.2f}, speedup-fraction {:+.2f}".format(
            pearson(col["share"], col["speedup"]), pearson(col["share"], col["fraction"]),
            pearson(col["speedup"], col["fraction"])))
    return 0


if __name__ == "__main__":
    try:
        rc = main(sys.argv[1:])
        sys.stdout.flush()
    except Bad as e:
        print(f"latency_targets: {e}", file=sys.stderr)
        sys.exit(2)
    except OSError as e:  # stdout on a full disk or a closed pipe: one line, exit 1, as kvbench
        try:
            sys.stdout = None  # nothing more to flush at exit
        finally:
            print(f"latency_targets: writing the output failed: {e.strerror or e}", file=sys.stderr)
        sys.exit(1)
    sys.exit(rc)
