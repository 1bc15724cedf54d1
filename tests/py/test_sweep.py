"""The sweep end to end on a tiny random model (model-free, fast): tables,
determinism, resume after SIGKILL, SIGINT, run-directory safety, shards and
merge, plots, and bad configs (exit 2, clear message, nothing written).

Expected values here are properties of the outputs (row sets, equality of two
runs, presence of files), not numbers produced by the code under test.
"""
import csv
import hashlib
import json
import os
import shutil
import signal
import struct
import subprocess
import time
import xml.etree.ElementTree as ET
import zlib

import pytest
from preload import preload_env
from sigs import signals_at

TIMING = {"prefill_ms", "decode_ms_per_token", "attn_ms_per_token"}
SUMMARY_TIMING = {"decode_ms_per_token", "speedup_vs_full"}


def rows(path, drop=TIMING):
    with open(path, newline="") as f:
        return [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(f)]


def write_config(path, **over):
    cfg = {
        "name": "t",
        "seed": 5,
        "tasks": [
            {"task": "needle", "words": [60, 120], "depths": [0.0, 0.5, 1.0], "per_cell": 1,
             "max_new": 6},
            {"task": "scbench_kv_like", "lengths": [900], "samples": 1, "turns": 2},
        ],
        "methods": ["full", "snapkv", "rocketkv", "rocketkv_mt", "quest"],
        "budgets": [32, 64],
    }
    cfg.update(over)
    path.write_text(json.dumps(cfg))
    return str(path)


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    return tiny_llama(n_ctx=2048)


def sweep(kvbench_bin, cfg, out, model, *extra, timeout=300):
    return subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", model, *extra],
                          capture_output=True, text=True, timeout=timeout)


def run_shards(kvbench_bin, cfg, model, dirs):
    """Runs shard i/len(dirs) of cfg into dirs[i]; returns dirs."""
    for i, d in enumerate(dirs):
        p = sweep(kvbench_bin, cfg, d, model, "--shard", f"{i}/{len(dirs)}")
        assert p.returncode == 0, p.stderr
    return dirs


def test_tables_and_determinism(kvbench_bin, tiny, tmp_path):
    cfg = write_config(tmp_path / "c.json")
    a, b, t1 = tmp_path / "a", tmp_path / "b", tmp_path / "t1"
    for d, extra in ((a, ()), (b, ()), (t1, ("--threads", "1"))):
        p = sweep(kvbench_bin, cfg, d, tiny, *extra)
        assert p.returncode == 0, p.stderr
    ra = rows(a / "samples.csv")
    # 6 needle samples x 9 cells + 1 two-turn sample x 9 cells x 2 turns
    assert len(ra) == 6 * 9 + 9 * 2
    assert ra == rows(b / "samples.csv"), "same config and seed must give the same samples.csv"
    # nor does the thread count change a value: every reduction has a fixed order
    assert ra == rows(t1 / "samples.csv"), "--threads 1 must give the same samples.csv"
    assert rows(a / "summary.csv", SUMMARY_TIMING) == rows(b / "summary.csv", SUMMARY_TIMING)
    run = json.load(open(a / "run.json"))
    assert run["status"] == "done"
    for key in ("git_commit", "config", "model", "machine", "kv_dtype", "seed"):
        assert key in run, key
    assert run["model"]["sha256"] == hashlib.sha256(open(tiny, "rb").read()).hexdigest()
    labels = {(r["label"], r["budget"]) for r in ra}
    assert ("full", "") in labels and ("rocketkv", "64") in labels
    # columns that follow from others by their definitions (OUTPUTS.md): a first turn's
    # context is its prompt; a later turn's is the previous turn's context plus its own
    # prompt (the generated tokens are rolled back, the gold answer is in the prompt);
    # compression_ratio = context_tokens / tokens_resident (both printed %.6g: rel 1e-5)
    cells = {}
    for r in ra:
        cells.setdefault((r["seq"], r["label"], r["budget"]), {})[int(r["turn"])] = r
    assert sorted({tuple(sorted(t)) for t in cells.values()}) == [(0,), (0, 1)]
    for turns in cells.values():
        for t, r in turns.items():
            ctx, prompt = int(r["context_tokens"]), int(r["prompt_tokens"])
            assert ctx == prompt + (int(turns[t - 1]["context_tokens"]) if t else 0), r
            assert float(r["compression_ratio"]) == pytest.approx(ctx / float(r["tokens_resident"]), rel=1e-5), r
    # what the generator aimed at, from the config: each needle's words and depth (%.6g,
    # 0 included), the scbench length; empty where it does not apply
    aims = {(r["task"], r["target_tokens"], r["context_words"], r["depth"]) for r in ra}
    assert {a for a in aims if a[0] == "needle"} == {("needle", "", w, d) for w in ("60", "120")
                                                       for d in ("0", "0.5", "1")}, aims
    assert {a[:3] for a in aims if a[0] != "needle"} == {("scbench_kv_like", "900", "")}, aims
    # a different seed changes the samples
    cfg2 = write_config(tmp_path / "c2.json", seed=6)
    p = sweep(kvbench_bin, cfg2, tmp_path / "c", tiny)
    assert p.returncode == 0, p.stderr
    assert [r["answers"] for r in rows(tmp_path / "c" / "samples.csv")] != [r["answers"] for r in ra]


def test_budget_mode_is_a_column_not_a_param(kvbench_bin, tiny, tmp_path):
    """budget_mode has its own column: `params` holds only the method's own
    keys, so a config that states the default mode at the top level and one
    that leaves it out give the same rows, and a method's own "topk" shows in
    budget_mode, not in params."""
    methods = ["full", "rocketkv", {"method": "rocketkv", "label": "rk_topk", "budget_mode": "topk"},
               {"method": "quest", "gqa": "group_sum"}]
    task = [{"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1, "max_new": 2}]
    got = []
    for name, over in (("a", {}), ("b", {"budget_mode": "traffic"})):
        cfg = write_config(tmp_path / f"{name}.json", name="t", tasks=task, methods=methods, **over)
        p = sweep(kvbench_bin, cfg, tmp_path / name, tiny)
        assert p.returncode == 0, p.stderr
        got.append(rows(tmp_path / name / "samples.csv"))
    assert got[0] == got[1]
    cells = {(r["label"], r["params"], r["budget_mode"]) for r in got[0]}
    assert cells == {("full", "", "traffic"), ("rocketkv", "", "traffic"), ("rk_topk", "", "topk"),
                     ("quest", '{"gqa":"group_sum"}', "traffic")}, cells


def test_both_budget_counts_logged(kvbench_bin, tiny, tmp_path):
    """methods.md §1: a budget counts reads (traffic: attended rows plus the
    approximation) or attended tokens only (topk); both are logged. Every row
    has the approximation's token-eq and the attended tokens, so either
    count follows from the row whatever its mode: for methods whose heads of a
    group share one selection, traffic = attended + approx and topk =
    attended (the accountant's definitions, docs/METHODS.md)."""
    methods = ["full", "rocketkv", {"method": "rocketkv", "label": "rk_topk", "budget_mode": "topk"},
               "hybrid", "quest", "sparq", "snapkvpp"]
    task = [{"task": "needle", "words": [150], "depths": [0.5], "per_cell": 1, "max_new": 4}]
    cfg = write_config(tmp_path / "c.json", tasks=task, methods=methods, budgets=[32])
    out = tmp_path / "run"
    p = sweep(kvbench_bin, cfg, out, tiny)
    assert p.returncode == 0, p.stderr
    seen = set()
    for r in rows(out / "samples.csv"):
        read, approx, att = (float(r[c]) for c in ("tokeq_read_per_step", "approx_tokeq_per_step",
                                                    "attended_per_step"))
        seen.add(r["label"])
        want = att + (approx if r["budget_mode"] == "traffic" else 0)
        assert abs(read - want) <= 1e-9 * max(1, read), (r["label"], read, att, approx)
        if r["label"] in ("full", "snapkvpp"):
            assert approx == 0, r["label"]
        else:
            assert approx > 0, r["label"]
    assert seen == {"full", "rocketkv", "rk_topk", "hybrid", "quest", "sparq", "snapkvpp"}


def test_run_json_is_utf8_whatever_the_path(kvbench_bin, tiny, tmp_path):
    """A model path that is not UTF-8 (legal on Linux) reaches run.json as
    U+FFFD, so run.json stays JSON that Python and --resume can read."""
    link = os.path.join(os.fsencode(tmp_path), b"m\xff.gguf")
    os.symlink(os.fsencode(tiny), link)
    cfg = write_config(tmp_path / "c.json", methods=["full"])
    out = tmp_path / "run"
    for extra in ((), ("--resume",)):
        p = subprocess.run([os.fsencode(kvbench_bin), b"sweep", os.fsencode(cfg), b"--out", os.fsencode(out),
                            b"-m", link, *[e.encode() for e in extra]], capture_output=True, timeout=300)
        assert p.returncode == 0, p.stderr
        run = json.loads((out / "run.json").read_bytes().decode("utf-8"))
        assert run["model"]["spec"].endswith("m\ufffd.gguf"), run["model"]


def needle_config(tmp_path, max_new, depths=4):
    """A needle sweep of 4 budgets long enough to be stopped in the middle."""
    return write_config(tmp_path / "c.json", budgets=[32, 48, 64, 128],
                        tasks=[{"task": "needle", "words": [150, 300], "depths": depths,
                                "per_cell": 1, "max_new": max_new}])


def reference_rows(kvbench_bin, cfg, out, model):
    """samples.csv rows of an uninterrupted run of cfg into out."""
    assert sweep(kvbench_bin, cfg, out, model).returncode == 0
    return rows(out / "samples.csv")


def test_kill_and_resume_equals_uninterrupted(kvbench_bin, tiny, tmp_path):
    cfg = needle_config(tmp_path, max_new=24)
    ref = tmp_path / "ref"
    want = reference_rows(kvbench_bin, cfg, ref, tiny)
    for kill_after in (3, len(want) // 2):
        out = tmp_path / f"killed{kill_after}"
        p = subprocess.Popen([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", tiny],
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 120
        while time.time() < deadline and p.poll() is None:
            f = out / "samples.csv"
            if f.exists() and len(rows(f)) >= kill_after:
                break
            time.sleep(0.005)
        p.send_signal(signal.SIGKILL)
        p.wait()
        got = rows(out / "samples.csv") if (out / "samples.csv").exists() else []
        assert len(got) < len(want), "the kill must land before the run ends (make the run longer)"
        killed = json.load(open(out / "run.json"))
        assert killed["status"] == "running" and "end_time" not in killed, killed
        assert got == want[:len(got)], "rows written before the kill are a prefix of the full table"
        r = sweep(kvbench_bin, cfg, out, tiny, "--resume")
        assert r.returncode == 0, r.stderr
        assert rows(out / "samples.csv") == want
        assert rows(out / "summary.csv", SUMMARY_TIMING) == rows(ref / "summary.csv", SUMMARY_TIMING)
        assert not [f for f in os.listdir(out) if ".tmp." in f], "no temporary files left"


def test_resume_of_a_finished_run_changes_nothing(kvbench_bin, tiny, tmp_path):
    """--resume of a run whose run.json says done and whose tables are whole
    has nothing to run: exit 0, every file byte for byte as it was (before,
    run.json gained an earlier_sessions entry for a session that ran nothing
    and new times, and the tables were rewritten). run_all.sh resumes every
    run it finds. A run missing a cell, summary.csv or a row of its
    latency.csv is resumed as before."""
    cfg = write_config(tmp_path / "c.json", budgets=[32],
                       tasks=[{"task": "needle", "words": [150], "depths": [0.5], "per_cell": 1, "max_new": 4}],
                       latency={"contexts": [64], "decode_tokens": 2, "reps": 1})
    out = tmp_path / "o"
    assert sweep(kvbench_bin, cfg, out, tiny).returncode == 0
    files = sorted(os.listdir(out))
    assert {"run.json", "samples.csv", "summary.csv", "latency.csv"} <= set(files), files

    def snapshot():
        return {f: ((out / f).read_bytes(), os.stat(out / f).st_mtime_ns) for f in sorted(os.listdir(out))}

    before = snapshot()
    p = sweep(kvbench_bin, cfg, out, tiny, "--resume")
    assert p.returncode == 0, p.stderr
    assert "has finished" in p.stderr and "nothing to resume" in p.stderr, p.stderr
    assert snapshot() == before
    # --dump-trace asks for what such a resume cannot give: it says so (and still writes nothing)
    p = sweep(kvbench_bin, cfg, out, tiny, "--resume", "--dump-trace", "0")
    assert p.returncode == 0 and "--dump-trace writes traces of the cells a run runs, so none" in p.stderr, p.stderr
    assert snapshot() == before
    want = rows(out / "samples.csv")
    # a missing table, a table short of a row, or run.json not done: the resume does its work again
    n_latency = len(rows(out / "latency.csv"))
    for damage in ("summary.csv", "latency row", "row", "status"):
        if damage.endswith("row"):  # a cell's rows gone (run.json still done)
            table = out / ("latency.csv" if damage == "latency row" else "samples.csv")
            table.write_text("".join(table.read_text().splitlines(keepends=True)[:-1]))
        elif damage == "status":
            # and written by a kvbench before session_start_time: its session started with the run
            run = json.load(open(out / "run.json"))
            run["status"] = "interrupted"
            del run["session_start_time"]
            (out / "run.json").write_text(json.dumps(run))
        else:
            os.unlink(out / damage)
        p = sweep(kvbench_bin, cfg, out, tiny, "--resume")
        assert p.returncode == 0, (damage, p.stderr)
        assert "nothing to resume" not in p.stderr, (damage, p.stderr)
        assert {"summary.csv", "latency.csv"} <= set(os.listdir(out)), damage
        run = json.load(open(out / "run.json"))
        assert run["status"] == "done" and run.get("earlier_sessions"), (damage, run.get("earlier_sessions"))
        if damage == "status":
            assert run["earlier_sessions"][-1]["session_start_time"] == run["start_time"], run
        assert rows(out / "samples.csv") == want, damage
        assert len(rows(out / "latency.csv")) == n_latency, damage


def test_resume_by_another_build(kvbench_bin, tiny, tmp_path):
    """A run left by another build (run.json's git_commit edited here) is not
    resumed without --force: the table would hold rows of two builds under one
    commit. With --force it is, and run.json's earlier_sessions names the
    build, status and row count of each earlier session, oldest first; merge
    refuses shards of two builds and keeps each shard's earlier sessions."""
    cfg = needle_config(tmp_path, max_new=6)
    ref = tmp_path / "ref"
    want = reference_rows(kvbench_bin, cfg, ref, tiny)
    commit = json.load(open(ref / "run.json"))["git_commit"]
    out = tmp_path / "run"
    shutil.copytree(ref, out)
    rj = json.load(open(out / "run.json"))
    rj.update(git_commit="0000000old", status="interrupted")
    (out / "run.json").write_text(json.dumps(rj))
    last = max(int(r["seq"]) for r in want)
    kept = [r for r in want if int(r["seq"]) != last]
    with open(ref / "samples.csv", newline="") as fh:
        table = list(csv.reader(fh))
    with open(out / "samples.csv", "w", newline="") as fh:  # quoted: kvbench's reader, as libcsv,
        csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(  # drops spaces around an unquoted value
            [r for r in table if r[0] != str(last)])
    before = (out / "samples.csv").read_bytes()
    p = sweep(kvbench_bin, cfg, out, tiny, "--resume")
    assert p.returncode == 2 and f"made by another commit: kvbench commit 0000000old, this is {commit}" in \
        p.stderr, p.stderr
    assert (out / "samples.csv").read_bytes() == before
    p = sweep(kvbench_bin, cfg, out, tiny, "--resume", "--force")
    assert p.returncode == 0, p.stderr
    assert rows(out / "samples.csv") == want
    rj2 = json.load(open(out / "run.json"))
    assert rj2["git_commit"] == commit and rj2["start_time"] == rj["start_time"]
    [e] = rj2["earlier_sessions"]
    assert (e["git_commit"], e["status"], e["rows"]) == ("0000000old", "interrupted", len(kept)), e
    assert e["machine"] == rj["machine"] and e["session_start_time"] == rj["session_start_time"]
    # all that --force lets a resume change is kept per session (before: only
    # the build, machine and times, so a resume with another model, seed or KV
    # type left no trace of the rows the earlier session wrote)
    for k in ("build_sha256", "config_file", "config", "overrides", "model", "kv_dtype", "seed", "shard", "data",
              "dump_trace"):
        assert e[k] == rj[k], k
    p = sweep(kvbench_bin, cfg, out, tiny, "--resume")  # this build's run: no --force needed
    assert p.returncode == 0, p.stderr
    # the run had finished: that resume ran nothing and recorded no session
    assert "nothing to resume" in p.stderr, p.stderr
    assert json.load(open(out / "run.json"))["earlier_sessions"] == rj2["earlier_sessions"]
    # an interrupted session of this build is listed too
    run = json.load(open(out / "run.json"))
    run["status"] = "interrupted"
    (out / "run.json").write_text(json.dumps(run))
    p = sweep(kvbench_bin, cfg, out, tiny, "--resume")
    assert p.returncode == 0, p.stderr
    sessions = json.load(open(out / "run.json"))["earlier_sessions"]
    assert [(s["git_commit"], s["status"], s["rows"]) for s in sessions] == \
        [("0000000old", "interrupted", len(kept)), (commit, "interrupted", len(want))]
    # a session that wrote no row is one too (run.json, no samples.csv)
    (out / "samples.csv").unlink()
    assert sweep(kvbench_bin, cfg, out, tiny, "--resume").returncode == 0
    sessions = json.load(open(out / "run.json"))["earlier_sessions"]
    assert [s["rows"] for s in sessions] == [len(kept), len(want), 0]
    # merge: shards of two builds are refused; a shard's earlier sessions are kept
    s0, s1 = run_shards(kvbench_bin, cfg, tiny, [tmp_path / "s0", tmp_path / "s1"])
    good = json.loads((s1 / "run.json").read_text())
    (s1 / "run.json").write_text(json.dumps(dict(good, git_commit="0000000old")))
    p = subprocess.run([kvbench_bin, "merge", str(tmp_path / "m"), str(s0), str(s1)], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "made by another commit than" in p.stderr and "commit 0000000old" in p.stderr, \
        p.stderr
    assert not (tmp_path / "m").exists()
    # two builds of a modified tree share one git_commit: the binaries' sha256 tell them apart
    dirty = json.loads((s0 / "run.json").read_text())
    for sha in ("1" * 64, "2" * 64):
        (s1 / "run.json").write_text(json.dumps(dict(good, git_commit="abc-dirty", build_sha256=sha)))
        (s0 / "run.json").write_text(json.dumps(dict(dirty, git_commit="abc-dirty", build_sha256="1" * 64)))
        p = subprocess.run([kvbench_bin, "merge", str(tmp_path / "m"), str(s0), str(s1)], capture_output=True,
                           text=True)
        if sha == "1" * 64:
            assert p.returncode == 0, p.stderr
            shutil.rmtree(tmp_path / "m")
        else:
            assert p.returncode == 2 and "another build of the modified tree" in p.stderr and "abc-dirty" in \
                p.stderr, p.stderr
    assert len(dirty["build_sha256"]) == 64
    # a shard's earlier sessions go with it into merged_from, shard 0's too (not to the top,
    # though the merged run.json is shard 0's); a shard without any has none there
    (s0 / "run.json").write_text(json.dumps(dirty))
    old_sessions = [{"git_commit": "0000000old", "rows": 3}]
    for k, d, base in ((1, s1, good), (0, s0, dirty)):
        (d / "run.json").write_text(json.dumps(dict(base, earlier_sessions=old_sessions)))
        p = subprocess.run([kvbench_bin, "merge", "--force", str(tmp_path / "m"), str(s0), str(s1)],
                           capture_output=True, text=True)
        assert p.returncode == 0, p.stderr
        m = json.load(open(tmp_path / "m" / "run.json"))
        assert "earlier_sessions" not in m, m
        assert m["merged_from"][k]["earlier_sessions"] == old_sessions
        assert "earlier_sessions" not in m["merged_from"][1 - k]
        (d / "run.json").write_text(json.dumps(base))


def test_resume_refuses_rows_of_another_plan(kvbench_bin, tiny, tmp_path):
    """A resumed run's rows must be the plan's sample (task, id, kind) at
    their seq and turn. Before, --resume --force with the tasks reordered kept
    the old rows as finished cells (each needle sample twice, no niah row, the
    run 'done'), and a damaged kind was taken and made its own summary rows."""
    tasks = [{"task": "needle", "words": [60], "depths": [0.0, 1.0], "per_cell": 1, "max_new": 4},
             {"task": "niah_single_1", "lengths": [300], "samples": 2, "max_new": 4}]
    cfg = write_config(tmp_path / "c.json", tasks=tasks, methods=["full"], budgets=[32])
    out = tmp_path / "run"
    p = sweep(kvbench_bin, cfg, out, tiny)
    assert p.returncode == 0, p.stderr
    table = (out / "samples.csv").read_text()
    with open(out / "samples.csv", newline="") as fh:
        lines = list(csv.reader(fh))
    assert [r[1] for r in lines[1:]] == ["needle", "needle", "niah_single_1", "niah_single_1"]
    for r, c, what in ((2, 4, "kind 'zzz'"), (3, 2, "sample 'zzz'")):  # data row 2's kind, row 3's sample id
        damaged = [list(x) for x in lines]
        damaged[r][c] = "zzz"
        with open(out / "samples.csv", "w", newline="") as fh:
            csv.writer(fh, quoting=csv.QUOTE_ALL).writerows(damaged)
        damaged = (out / "samples.csv").read_bytes()
        p = sweep(kvbench_bin, cfg, out, tiny, "--resume")
        assert p.returncode == 2 and f"data row {r}: task '{lines[r][1]}'" in p.stderr and what in p.stderr, p.stderr
        assert (out / "samples.csv").read_bytes() == damaged
    (out / "samples.csv").write_text(table)
    cfg2 = write_config(tmp_path / "c2.json", tasks=tasks[::-1], methods=["full"], budgets=[32])
    p = sweep(kvbench_bin, cfg2, out, tiny, "--resume", "--force")
    assert p.returncode == 2 and "data row 1: task 'needle'" in p.stderr and "another plan" in p.stderr, p.stderr
    assert (out / "samples.csv").read_text() == table


def _file_size_limit(nbytes):
    """preexec_fn: writes past nbytes in any one file fail with EFBIG, as on a
    full disk (SIGXFSZ ignored, so the write returns an error instead of
    killing the process); needs neither root nor a small file system."""
    def f():
        import resource
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (nbytes, nbytes))
    return f


def test_write_failure_keeps_results(kvbench_bin, tiny, tmp_path):
    """A write that fails in the middle of a sweep (a full disk) stops it with
    exit 1 and a message naming the file; samples.csv keeps every row written
    before, whole, and --resume then finishes the run as if nothing happened.
    A plot whose data files cannot be written says so and exits 1."""
    if os.environ.get("KVBENCH_TSAN"):
        pytest.skip("make tsan: a program built with clang's ThreadSanitizer and LLVM's OpenMP dies of "
                    "SIGBUS at OpenMP start-up under any RLIMIT_FSIZE (docs/RELIABILITY.md)")
    cfg = needle_config(tmp_path, max_new=8)
    ref = tmp_path / "ref"
    want = reference_rows(kvbench_bin, cfg, ref, tiny)
    size = os.path.getsize(ref / "samples.csv")
    out = tmp_path / "full"
    p = subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", tiny],
                       capture_output=True, text=True, timeout=300,
                       preexec_fn=_file_size_limit(size // 2))
    assert p.returncode == 1, (p.returncode, p.stderr)
    assert "samples.csv" in p.stderr and "write failed" in p.stderr, p.stderr
    got = rows(out / "samples.csv")
    assert 0 < len(got) < len(want) and got == want[:len(got)]
    assert os.path.getsize(out / "samples.csv") <= size // 2
    # run.json says the run failed: it stayed "running" when the last
    # samples.csv write failed too (until 2026-12-06); it is well under the limit
    assert os.path.getsize(out / "run.json") < size // 2
    assert json.load(open(out / "run.json"))["status"] == "failed"
    r = sweep(kvbench_bin, cfg, out, tiny, "--resume")
    assert r.returncode == 0, r.stderr
    assert rows(out / "samples.csv") == want
    assert not [f for f in os.listdir(out) if ".tmp." in f], "no temporary files left"
    p = subprocess.run([kvbench_bin, "plot", str(ref)], capture_output=True, text=True,
                       timeout=300, preexec_fn=_file_size_limit(1))
    assert p.returncode == 1 and ".dat: write failed" in p.stderr, (p.returncode, p.stderr)
    assert "some figures failed" in p.stdout, p.stdout
    if subprocess.run(["which", "gnuplot"], capture_output=True).returncode == 0:
        # gnuplot itself exits 0 when its image is cut short: plot checks the image's end
        p = subprocess.run([kvbench_bin, "plot", str(ref)], capture_output=True, text=True,
                           timeout=300, preexec_fn=_file_size_limit(2000))
        assert p.returncode == 1 and "gnuplot did not write all of" in p.stderr, (p.returncode,
                                                                                   p.stderr)
        p = subprocess.run([kvbench_bin, "plot", str(ref)], capture_output=True, text=True,
                           timeout=300)
        assert p.returncode == 0 and "some figures failed" not in p.stdout, (p.stdout, p.stderr)


def test_one_writer_per_run_directory(kvbench_bin, tiny, tmp_path):
    """While a sweep runs, a second process may not write its directory: a
    second `sweep --resume` (or `--force`) and a `merge` into it exit 2 at
    once, and the first run finishes with every row (each process rewrites the
    whole samples.csv, so two writers would drop each other's rows)."""
    cfg = needle_config(tmp_path, max_new=64, depths=6)
    ref = tmp_path / "ref"
    want = reference_rows(kvbench_bin, cfg, ref, tiny)
    out = tmp_path / "busy"
    p = subprocess.Popen([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", tiny],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not (out / "samples.csv").exists():
        time.sleep(0.005)
    assert p.poll() is None, "the first sweep must still run (make it longer)"
    tries = [sweep(kvbench_bin, cfg, out, tiny, "--resume"),
             sweep(kvbench_bin, cfg, out, tiny, "--force"),
             subprocess.run([kvbench_bin, "merge", "--force", str(out), str(ref)],
                            capture_output=True, text=True, timeout=60)]
    running = p.poll() is None
    assert p.wait(timeout=300) == 0, p.stderr.read()
    for r in tries:
        assert r.returncode == 2, (r.returncode, r.stderr)
        assert "another kvbench process is writing this directory" in r.stderr, r.stderr
    assert running, "the tries must land while the first sweep runs (make it longer)"
    assert rows(out / "samples.csv") == want
    assert json.load(open(out / "run.json"))["status"] == "done"
    r = sweep(kvbench_bin, cfg, out, tiny, "--resume")       # the lock goes with the process
    assert r.returncode == 0, r.stderr


NOLOCK_SHIM = r"""
#include <errno.h>
int flock(int fd, int op) { (void)fd; (void)op; errno = ENOLCK; return -1; }
"""


def test_no_lock_file_system_warns_and_runs(kvbench_bin, tiny, tmp_path):
    """On a file system without locks (flock fails with ENOLCK: some network
    and FUSE mounts) the sweep warns and runs to the end with every row; the
    lock must not make such a directory unusable. flock is made to fail by a
    preloaded shim; the sanitizer runtime is told not to insist on coming
    first in the library list."""
    env = preload_env(tmp_path, "nolock", NOLOCK_SHIM)
    cfg = write_config(tmp_path / "c.json", methods=["full"])
    want = reference_rows(kvbench_bin, cfg, tmp_path / "ref", tiny)
    out = tmp_path / "nolock"
    r = subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", tiny],
                       capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    assert "cannot lock the directory (No locks available)" in r.stderr, r.stderr
    assert rows(out / "samples.csv") == want
    assert json.load(open(out / "run.json"))["status"] == "done"


def test_samples_fingerprint(kvbench_bin, tiny, tmp_path):
    """run.json's data.sha256 stands for the samples themselves: equal for the
    same plan, different when anything that makes the samples differs, even
    outside the config (here the needle wording file, found through
    $KVBENCH_CONFIGS). --resume and merge refuse to mix runs whose samples
    differ; both would otherwise join rows of different prompts silently."""
    import shutil
    cfg = write_config(tmp_path / "c.json", tasks=[{"task": "needle", "words": [60, 120],
                                                    "depths": [0.5], "per_cell": 1, "max_new": 4}],
                       methods=["full"])
    a, b, c = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    assert sweep(kvbench_bin, cfg, a, tiny).returncode == 0
    assert sweep(kvbench_bin, cfg, b, tiny).returncode == 0
    assert sweep(kvbench_bin, cfg, c, tiny, "--set", "seed=6").returncode == 0
    fp = [json.load(open(d / "run.json"))["data"]["sha256"] for d in (a, b, c)]
    assert len(fp[0]) == 64 and set(fp[0]) <= set("0123456789abcdef")
    assert fp[0] == fp[1] and fp[0] != fp[2]
    # the same config and overrides, another wording file: other samples
    here = os.path.dirname(os.path.abspath(__file__))
    cfgs = tmp_path / "configs"
    shutil.copytree(os.path.join(here, "..", "..", "configs", "prompts"), cfgs / "prompts")
    w = json.load(open(cfgs / "prompts" / "needle.json"))
    w["question"] = "Which pass key was given? The pass key is "
    (cfgs / "prompts" / "needle.json").write_text(json.dumps(w))
    env = dict(os.environ, KVBENCH_CONFIGS=str(cfgs))   # used when the cwd has no configs/
    cwd = str(tmp_path)
    p = subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(a), "-m", tiny, "--resume"],
                       capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    assert p.returncode == 2 and "different samples (data.sha256 differs" in p.stderr, p.stderr
    assert json.load(open(a / "run.json"))["data"]["sha256"] == fp[0]
    d = tmp_path / "d"
    p = subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(d), "-m", tiny],
                       capture_output=True, text=True, timeout=300, env=env, cwd=cwd)
    assert p.returncode == 0, p.stderr
    assert json.load(open(d / "run.json"))["data"]["sha256"] not in fp
    assert sweep(kvbench_bin, cfg, a, tiny, "--resume").returncode == 0
    # shards of one plan share it; a shard made from other samples is refused
    shards = []
    for i in range(2):
        sd = tmp_path / f"s{i}"
        p = subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(sd), "-m", tiny, "--shard",
                            f"{i}/2"], capture_output=True, text=True, timeout=300,
                           env=env if i else None, cwd=cwd if i else None)
        assert p.returncode == 0, p.stderr
        shards.append(str(sd))
    p = subprocess.run([kvbench_bin, "merge", str(tmp_path / "m"), *shards], capture_output=True,
                       text=True)
    assert p.returncode == 2 and "the samples (data.sha256) differ" in p.stderr, p.stderr
    assert not (tmp_path / "m").exists()


def test_an_ignored_signal_stays_ignored(kvbench_bin, tiny, tmp_path):
    """`nohup kvbench sweep ... &` then closing the terminal: SIGHUP was
    ignored when kvbench started, so it does not stop the sweep, which runs to
    its end. Before, the sweep installed its handler over nohup's SIG_IGN and
    stopped as interrupted (exit 129) when the terminal closed."""
    cfg = needle_config(tmp_path, max_new=24)
    out = tmp_path / "run"
    p = subprocess.Popen([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", tiny],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=signals_at(signal.SIG_IGN, (signal.SIGHUP,)))
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if (out / "samples.csv").exists() and len(rows(out / "samples.csv")) >= 5:
            break
        time.sleep(0.005)
    if p.poll() is not None:
        pytest.skip("the run finished before the signal could be sent")
    p.send_signal(signal.SIGHUP)
    at_signal = len(rows(out / "samples.csv"))
    _, err = p.communicate(timeout=300)
    assert p.returncode == 0, (p.returncode, err)
    assert json.load(open(out / "run.json"))["status"] == "done"
    if len(rows(out / "samples.csv")) == at_signal:  # it had finished its last row: proves nothing
        pytest.skip("the run wrote no row after the signal")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP],
                         ids=["SIGINT", "SIGTERM", "SIGHUP"])
def test_sigint_keeps_finished_cells(kvbench_bin, tiny, tmp_path, sig):
    """Ctrl-C, a batch scheduler's SIGTERM and a closed terminal's SIGHUP all
    stop the sweep the same way: finished cells kept, status interrupted, the
    exit code 128 + the signal, and --resume continues."""
    cfg = needle_config(tmp_path, max_new=24)
    out = tmp_path / "run"
    p = subprocess.Popen([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", tiny],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         preexec_fn=signals_at(signal.SIG_DFL))
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if (out / "samples.csv").exists() and len(rows(out / "samples.csv")) >= 5:
            break
        time.sleep(0.005)
    p.send_signal(sig)
    _, err = p.communicate(timeout=60)
    if p.returncode == 0:
        pytest.skip("the run finished before the signal arrived")
    assert p.returncode == 128 + sig, (p.returncode, err)
    assert f"interrupted by {signal.Signals(sig).name}" in err and "--resume" in err, err
    assert json.load(open(out / "run.json"))["status"] == "interrupted"
    kept = rows(out / "samples.csv")
    assert kept and (out / "summary.csv").exists()
    assert sweep(kvbench_bin, cfg, out, tiny, "--resume").returncode == 0
    assert rows(out / "samples.csv")[:len(kept)] == kept


@pytest.mark.parametrize("mode", ["multi_turn", "multi_request"])
def test_later_turns_must_fit_before_the_run(kvbench_bin, tiny, tmp_path, mode):
    """Every turn (multi-turn: the first prompt, the gold answers and the
    later queries; multi-request: the shared prefix plus each request) is
    checked against the model context before anything runs, in --dry-run
    too. Before, only the first prompt was: a long second query made a
    multi-turn run fail after the earlier samples' cells (the dry run had
    passed), and a multi-request run wrote rows past the model context with
    exit 0."""
    data = tmp_path / "mf.jsonl"
    nums = list(range(3, 53))
    long_q = "Consider the list carefully. " * 400 + "The smallest number in the list is"
    with open(data, "w") as f:
        for sid, q in (("short", "The smallest number in the list is"), ("longq", long_q)):
            f.write(json.dumps({"id": sid, "context": nums, "multi_turns": [
                {"input": "The largest number in the list is", "answer": 52},
                {"input": q, "answer": 3}]}) + "\n")
    cfg = write_config(tmp_path / "c.json", methods=["full", "snapkv"], budgets=[32],
                       tasks=[{"task": "scbench_mf", "file": str(data), "mode": mode}])
    word = "turn" if mode == "multi_turn" else "request"
    for extra in (("--dry-run",), ()):
        out = tmp_path / ("dry" if extra else "run")
        p = sweep(kvbench_bin, cfg, out, tiny, *extra)
        assert p.returncode == 2, (extra, p.stderr)
        assert f"scbench_mf/longq: {word} 1 needs" in p.stderr, p.stderr
        assert "more than the model context 2048" in p.stderr, p.stderr
        assert not out.exists()


@pytest.mark.parametrize("case", ["memory", "r"])
def test_model_dependent_limits_before_the_run(kvbench_bin, tiny, tmp_path, case):
    """The memory the longest sample needs and a method's r against the
    model's head dim are checked before anything runs, in --dry-run too.
    Before, both were checked only when a cell reached them: the dry run
    passed, and the run failed after earlier samples' rows were written."""
    tasks = [{"task": "needle", "words": [60, 400], "depths": [0.5], "per_cell": 1, "max_new": 4}]
    methods = ["full"] if case == "memory" else ["full", {"method": "hybrid", "r": 17}]
    cfg = write_config(tmp_path / "c.json", tasks=tasks, methods=methods, budgets=[32])
    # the tiny model's head dim is 64 / 4 = 16. Its 400-word prompt (~1,400
    # tokens) needs ~1.3 MB by model_check_memory's count (measured: refused at
    # 1.2 MB, passed at 1.5 MB), the 60-word one about a fifth: 1 MB sits between
    env = dict(os.environ, KVBENCH_MEM_LIMIT="1000000")
    for extra in (("--dry-run",), ()):
        out = tmp_path / ("dry" if extra else "run")
        p = subprocess.run([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", tiny, *extra],
                           capture_output=True, text=True, timeout=120, env=env if case == "memory" else None)
        assert p.returncode == 2, (extra, p.stderr)
        if case == "memory":
            assert "needle/w400_d" in p.stderr and "of memory is available" in p.stderr, p.stderr
            assert "in f16" in p.stderr and "kv_dtype f16" not in p.stderr, p.stderr  # no advice to use what it uses
        else:
            assert "methods entry 'hybrid': key 'r': 17 exceeds the model's head dim D = 16" in p.stderr, p.stderr
        assert not out.exists()


def test_prompts_and_sweep_read_the_same_wording(kvbench_bin, tiny, tmp_path):
    """`prompts` shows what `sweep` runs: started in a directory with its own
    configs/prompts, both read that wording, and both name it by its absolute
    path (run.json's provenance was relative to a directory it does not
    record). Before, `prompts` skipped ./configs and showed the checkout's
    wording while the sweep ran the local one."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    w = json.load(open(os.path.join(root, "configs", "prompts", "needle.json")))
    w["question"] = "Which pass key was hidden above? The pass key is "
    local = tmp_path / "configs" / "prompts"
    local.mkdir(parents=True)
    (local / "needle.json").write_text(json.dumps(w))
    cfg = write_config(tmp_path / "c.json", methods=["full"], budgets=[32],
                       tasks=[{"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1,
                               "max_new": 4}])
    want = f"wording={local / 'needle.json'}; "
    p = subprocess.run([kvbench_bin, "prompts", cfg, "--counter", "bytes4"], cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    row = json.loads(p.stdout.splitlines()[0])
    assert w["question"] in row["turns"][0]["user"]
    assert row["provenance"].startswith(want), row["provenance"]
    p = subprocess.run([kvbench_bin, "sweep", cfg, "--out", "run", "-m", tiny], cwd=tmp_path,
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    prov = json.load(open(tmp_path / "run" / "run.json"))["data"]["provenance"]
    assert len(prov) == 1 and prov[0].startswith(want), prov


def test_fidelity_reference_stops_where_full_kv_stops(kvbench_bin, model_file, tmp_path):
    """kl_vs_full and top1_vs_full are means over Full KV's decode steps
    (teacher-forced on its tokens): its reference run stops where Full KV's
    own row stops, at the turn's stop string too (LongBench samsum: "\n"),
    so each row's top1 is a count over Full KV's steps. Before, the
    reference ran on to max_new (71 steps for Full KV's 7 here) and the
    columns averaged over tokens Full KV never produced. Default model: the
    tiny random one does not end its line."""
    fix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures", "longbench")
    cfg = write_config(tmp_path / "c.json", fidelity=True, budgets=[64],
                       methods=["full", "quest", "snapkv"],
                       tasks=[{"task": "longbench", "dir": fix, "subtasks": ["samsum"], "limit": 1,
                               "max_len": 1500}])
    out = tmp_path / "run"
    p = sweep(kvbench_bin, cfg, out, model_file)
    assert p.returncode == 0, p.stderr
    got = {r["label"]: r for r in rows(out / "samples.csv")}
    full = got["full"]
    pred = full["prediction"]
    assert pred.endswith("\n") and pred.strip("\n"), pred  # stopped by its stop string, after some text
    steps = int(full["new_tokens"])  # the stop token is the last generated one: one step each
    assert steps < 128  # samsum's max_new: the stop, not the limit, ended it
    assert float(full["top1_vs_full"]) == 1 and float(full["kl_vs_full"]) == 0
    fracs = []
    for label in ("quest", "snapkv"):
        x = float(got[label]["top1_vs_full"]) * steps
        assert abs(x - round(x)) < 1e-4, (label, got[label]["top1_vs_full"], steps)
        fracs.append(float(got[label]["top1_vs_full"]))
    assert any(0 < f < 1 for f in fracs)  # a count of agreements that is not all or none


def test_run_directory_safety(kvbench_bin, tiny, tmp_path):
    cfg = write_config(tmp_path / "c.json", methods=["full"])
    out = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, out, tiny).returncode == 0
    before = (out / "samples.csv").read_bytes()
    p = sweep(kvbench_bin, cfg, out, tiny)
    assert p.returncode == 2 and "already holds a run" in p.stderr
    other = write_config(tmp_path / "o.json", methods=["full", "rocketkv"])
    p = sweep(kvbench_bin, other, out, tiny, "--resume")
    assert p.returncode == 2 and "different config" in p.stderr
    assert (out / "samples.csv").read_bytes() == before, "a refused run must not touch the tables"
    # every key of run.json a resume must share (runinfo_check_same, OUTPUTS.md), one
    # changed at a time: refused naming it, run.json and the tables untouched
    good = json.loads((out / "run.json").read_text())
    for key, value, msg in (("model", dict(good["model"], sha256="0" * 64), "different model (sha256 differs)"),
                            ("overrides", ["seed=5"], "different overrides"),
                            ("shard", "1/2", "different shard"),
                            ("kv_dtype", "bf16", "different kv_dtype")):
        (out / "run.json").write_text(json.dumps(dict(good, **{key: value}, status="interrupted")))
        edited = (out / "run.json").read_bytes()
        p = sweep(kvbench_bin, cfg, out, tiny, "--resume")
        assert p.returncode == 2 and f"run.json was made with a {msg}" in p.stderr, (key, p.stderr)
        assert (out / "run.json").read_bytes() == edited and (out / "samples.csv").read_bytes() == before, key
    (out / "run.json").write_text(json.dumps(good))
    p = sweep(kvbench_bin, other, out, tiny, "--resume", "--force")
    assert p.returncode == 0, p.stderr
    # a resumed run reads its rows back: one that is not of its plan is refused
    # (its seq is past the run's samples), and nothing is touched
    rj = json.load(open(out / "run.json"))
    rj["status"] = "interrupted"
    (out / "run.json").write_text(json.dumps(rj))
    with open(out / "samples.csv", newline="") as f:
        table = list(csv.reader(f))
    table[1][0] = "999"
    with open(out / "samples.csv", "w", newline="") as f:
        csv.writer(f).writerows(table)
    before = (out / "samples.csv").read_bytes()
    p = sweep(kvbench_bin, other, out, tiny, "--resume")
    assert p.returncode == 2 and "samples.csv: data row 1: seq '999'" in p.stderr, p.stderr
    assert (out / "samples.csv").read_bytes() == before
    assert json.load(open(out / "run.json"))["status"] == "interrupted"


def test_new_run_keeps_nothing_of_the_old_one(kvbench_bin, tiny, tmp_path):
    """A run that is not a --resume starts from an empty directory: `--force`
    over a `bench methods` directory leaves no latency.csv of the old run
    beside the new run.json (plot would draw it as the new run's), and a
    samples.csv without its run.json is not resumed (its rows cannot be checked
    against the config) unless --force."""
    cfg = write_config(tmp_path / "c.json", methods=["full"])
    out = tmp_path / "run"
    p = subprocess.run([kvbench_bin, "bench", "methods", "-m", "synthetic:smollm2-135m", "--contexts", "64",
                        "--methods", "full", "--decode-tokens", "2", "--reps", "1", "--out", str(out)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and (out / "latency.csv").exists(), p.stderr
    p = sweep(kvbench_bin, cfg, out, tiny, "--force")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["run.json", "samples.csv", "summary.csv"]
    alone = tmp_path / "alone"
    alone.mkdir()
    (alone / "samples.csv").write_bytes((out / "samples.csv").read_bytes())
    p = sweep(kvbench_bin, cfg, alone, tiny, "--resume")
    assert p.returncode == 2 and "has no run.json beside it" in p.stderr, p.stderr
    assert os.listdir(alone) == ["samples.csv"]
    p = sweep(kvbench_bin, cfg, alone, tiny, "--resume", "--force")
    assert p.returncode == 0, p.stderr
    assert rows(alone / "samples.csv") == rows(out / "samples.csv")
    # a new run into tables without their run.json: refused, unless --force
    (alone / "run.json").unlink()
    (alone / "samples.csv").unlink()
    p = sweep(kvbench_bin, cfg, alone, tiny)
    assert p.returncode == 2 and "summary.csv has no run.json beside it" in p.stderr, p.stderr
    assert sorted(os.listdir(alone)) == ["summary.csv"]
    assert sweep(kvbench_bin, cfg, alone, tiny, "--force").returncode == 0


def test_force_then_crash_then_resume(kvbench_bin, model_file, tmp_path):
    """`--force --set seed=7` over a finished seed-1 run, killed (SIGKILL)
    before its first cell ends, then `--resume --set seed=7`: the table must be
    the seed-7 run's. The old run's rows used to stay until the new run's first
    cell replaced them, so the resume took them as done (same sample ids and
    cells, another needle): a seed-1 row under a seed-7 run.json. The default
    model, so that the one cell (a ~740-token prefill: ~1 s here, 2-4 s under the
    sanitizers) outlasts the 2 ms polling."""
    cfg = write_config(tmp_path / "c.json", seed=1, methods=["full"], budgets=[64],
                       tasks=[{"task": "needle", "words": [500], "depths": [0.5], "per_cell": 1,
                               "max_new": 4}])
    ref = tmp_path / "ref7"
    assert sweep(kvbench_bin, cfg, ref, model_file, "--set", "seed=7").returncode == 0
    out = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, out, model_file).returncode == 0
    old = rows(out / "samples.csv")
    assert old[0]["answers"] != rows(ref / "samples.csv")[0]["answers"], "the seeds must give other needles"
    p = subprocess.Popen([kvbench_bin, "sweep", cfg, "--out", str(out), "-m", model_file, "--force",
                          "--set", "seed=7"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        try:
            if json.loads((out / "run.json").read_text())["seed"] == 7:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.002)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert json.load(open(out / "run.json"))["status"] == "running", "the kill must land in the run"
    if (out / "samples.csv").exists():
        assert rows(out / "samples.csv") != old, "the old run's rows stayed beside the new run.json"
        pytest.fail("the kill landed after the first cell: make the prompt longer")
    r = sweep(kvbench_bin, cfg, out, model_file, "--resume", "--set", "seed=7")
    assert r.returncode == 0, r.stderr
    assert rows(out / "samples.csv") == rows(ref / "samples.csv")


def test_shards_merge_to_the_single_run(kvbench_bin, tiny, tmp_path):
    cfg = write_config(tmp_path / "c.json")
    single = tmp_path / "single"
    assert sweep(kvbench_bin, cfg, single, tiny).returncode == 0
    shards = run_shards(kvbench_bin, cfg, tiny, [tmp_path / f"shard{i}" for i in range(3)])
    shards = [str(d) for d in shards]
    merged = tmp_path / "merged"
    p = subprocess.run([kvbench_bin, "merge", str(merged), *shards], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert rows(merged / "samples.csv") == rows(single / "samples.csv")
    assert rows(merged / "summary.csv", SUMMARY_TIMING) == rows(single / "summary.csv", SUMMARY_TIMING)
    p = subprocess.run([kvbench_bin, "merge", str(tmp_path / "m2"), shards[0], shards[0]],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "same shard" in p.stderr

    def merge(*args):
        return subprocess.run([kvbench_bin, "merge", *map(str, args)], capture_output=True, text=True)

    # a finished run is not overwritten without --force, a shard never
    before = (merged / "samples.csv").read_bytes()
    p = merge(merged, *shards)
    assert p.returncode == 2 and "already holds a run" in p.stderr, p.stderr
    # --force replaces the old run whole: its figures and traces go too (run_dir_clear)
    (merged / "plots").mkdir()
    (merged / "plots" / "a.png").write_text("old figure")
    (merged / "plots" / "plots.json").write_text(json.dumps({"figures": [{"name": "a", "files": ["a.png"]}]}))
    (merged / "traces" / "0_needle_x_L1").mkdir(parents=True)
    (merged / "traces" / "0_needle_x_L1" / "meta.json").write_text("{}")
    assert merge("--force", merged, *shards).returncode == 0
    assert (merged / "samples.csv").read_bytes() == before
    assert sorted(os.listdir(merged)) == ["run.json", "samples.csv", "summary.csv"]
    shard0 = (tmp_path / "shard0" / "samples.csv").read_bytes()
    p = merge("--force", shards[0], *shards)
    assert p.returncode == 2 and "is the shard" in p.stderr, p.stderr
    assert (tmp_path / "shard0" / "samples.csv").read_bytes() == shard0
    # every shard of the set, and rows that belong to their shard
    p = merge(tmp_path / "m3", shards[0], shards[1])
    assert p.returncode == 2 and "missing 2/3" in p.stderr, p.stderr
    assert not (tmp_path / "m3").exists()
    with open(tmp_path / "shard1" / "samples.csv", newline="") as f:
        table = list(csv.reader(f))
    col = {c: i for i, c in enumerate(table[0])}
    for column, value, msg in (("score", "5", "score '5', expected a number in [0, 1]"),
                               ("score", "nan", "score 'nan'"),
                               ("score", "", "score '', expected a number in [0, 1]"),
                               ("score2", "1.5", "score2 '1.5', expected a number in [0, 1]"),
                               ("seq", "7", "seq '7', expected an integer in [0, 7) of shard 1/3"),
                               ("budget", "0", "budget '0', expected a positive integer"),
                               ("seq", "0", "seq '0', expected an integer in [0, 7) of shard 1/3"),
                               ("budget", "-7x", "budget '-7x'")):
        bad = tmp_path / f"bad_{column}_{value}"
        subprocess.run(["cp", "-r", shards[1], str(bad)], check=True)
        t = [list(r) for r in table]
        t[2][col[column]] = value
        with open(bad / "samples.csv", "w", newline="") as f:
            csv.writer(f).writerows(t)
        p = merge(tmp_path / "m4", shards[0], bad, shards[2])
        assert p.returncode == 2, (column, p.stderr)
        assert f"{bad}/samples.csv: data row 2: {msg}" in p.stderr, p.stderr
        assert not (tmp_path / "m4").exists()
    # the bounds themselves are scores: a row scored 1 (and 0) is merged as it is
    ok = tmp_path / "score_1"
    shutil.copytree(shards[1], ok)
    t = [list(r) for r in table]
    t[2][col["score"]], t[2][col["score2"]], t[1][col["score"]] = "1", "1", "0"
    with open(ok / "samples.csv", "w", newline="") as f:
        csv.writer(f).writerows(t)
    assert merge(tmp_path / "m6", shards[0], ok, shards[2]).returncode == 0
    m6 = list(csv.DictReader(open(tmp_path / "m6" / "samples.csv", newline="")))
    for i, want in ((2, ("1", "1")), (1, ("0", t[1][col["score2"]]))):
        got = [r for r in m6
               if (r["seq"], r["label"], r["budget"], r["turn"]) == tuple(t[i][col[c]] for c in ("seq", "label", "budget", "turn"))]
        assert [(r["score"], r["score2"]) for r in got] == [want], (i, got)
    # each shard finished, and of the first one's config, overrides, KV type and
    # model: one run.json key changed at a time is refused, naming the shard
    good = json.loads((tmp_path / "shard1" / "run.json").read_text())
    for key, value, msg in (("status", "interrupted", 'status is interrupted, expected "done"'),
                            ("shard", "1/4", f"shard 1/4, but {shards[0]} is of 3 shards"),
                            ("config", dict(good["config"], name="t2"), f"config differs from {shards[0]}/run.json"),
                            ("overrides", ["seed=5"], f"overrides differs from {shards[0]}/run.json"),
                            ("kv_dtype", "bf16", f"kv_dtype differs from {shards[0]}/run.json"),
                            ("model", dict(good["model"], sha256="0" * 64), f"the model (sha256) differs from {shards[0]}")):
        bad = tmp_path / f"bad_{key}"
        shutil.copytree(shards[1], bad)
        (bad / "run.json").write_text(json.dumps(dict(good, **{key: value})))
        p = merge(tmp_path / "m5", shards[0], bad, shards[2])
        assert p.returncode == 2 and f"{bad}/run.json: {msg}" in p.stderr, (key, p.stderr)
        assert not (tmp_path / "m5").exists()
    # the latency part runs in shard 0: its latency.csv goes with the merge
    (tmp_path / "shard0" / "latency.csv").write_text("method,context\nfull,64\n")
    assert merge("--force", merged, *shards).returncode == 0
    assert (merged / "latency.csv").read_text() == "method,context\nfull,64\n"


def _dup(t, col):
    t.append(list(t[1]))
    return "data rows 1 and %d are the same sample, cell and turn" % (len(t) - 1)


def _relabel(t, col):
    t[1][col["label"]] = "quest2"
    return "data row 1: label 'quest2' with budget"


def _method(t, col):
    r = next(i for i in range(1, len(t)) if t[i][col["label"]] == "snapkv")
    t[r][col["method"]] = "quest"
    return f"data row {r}: method 'quest', but the config's cell 'snapkv' runs 'snapkv'"


def _drop_turn(t, col):
    r = next(i for i in range(1, len(t)) if t[i][col["turn"]] == "1" and t[i][col["label"]] == "snapkv")
    seq, budget = t[r][col["seq"]], t[r][col["budget"]]
    del t[r]
    return f"seq {seq}, label 'snapkv', budget {budget}: no row of turn 1"


def _turn_text(t, col):
    t[2][col["turn"]] = "x"
    return "data row 2: turn 'x', expected an integer"


DAMAGE = [_dup, _relabel, _method, _drop_turn, _turn_text]


@pytest.mark.parametrize("damage", DAMAGE, ids=lambda f: f.__name__[1:])
def test_damaged_rows_are_refused(kvbench_bin, tiny, tmp_path, damage):
    """Rows read back are checked against the run's cells before use: each row
    a cell of the config (label, budget, method), no (sample, cell, turn)
    twice, and each cell's rows all its turns (they are written together).
    Before, --resume kept a duplicated or foreign row (summary.csv counted it)
    and took half a multi-turn cell for done; merge did the same. Both now
    exit 2 naming the file and row, and touch nothing."""
    cfg = write_config(tmp_path / "c.json")

    def damaged(src, dst):
        subprocess.run(["cp", "-r", str(src), str(dst)], check=True)
        with open(dst / "samples.csv", newline="") as f:
            t = list(csv.reader(f))
        msg = damage(t, {c: i for i, c in enumerate(t[0])})
        with open(dst / "samples.csv", "w", newline="") as f:
            csv.writer(f).writerows(t)
        return msg

    run = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, run, tiny).returncode == 0
    bad = tmp_path / "bad"
    msg = damaged(run, bad)
    rj = json.load(open(bad / "run.json"))
    rj["status"] = "interrupted"
    (bad / "run.json").write_text(json.dumps(rj))
    before = (bad / "samples.csv").read_bytes()
    p = sweep(kvbench_bin, cfg, bad, tiny, "--resume")
    assert p.returncode == 2, p.stderr
    assert f"{bad}/samples.csv: {msg}" in p.stderr, p.stderr
    assert (bad / "samples.csv").read_bytes() == before

    # merge: the two-turn sample (seq 6) is in shard 0/2
    shards = run_shards(kvbench_bin, cfg, tiny, [tmp_path / f"s{i}" for i in range(2)])
    bad0 = tmp_path / "bad0"
    msg = damaged(shards[0], bad0)
    out = tmp_path / "merged"
    p = subprocess.run([kvbench_bin, "merge", str(out), str(bad0), str(shards[1])],
                       capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    assert f"{bad0}/samples.csv: {msg}" in p.stderr, p.stderr
    assert not out.exists()


def test_tables_keep_spaces_and_tabs_around_values(kvbench_bin, tiny, tmp_path):
    """Values with leading or trailing spaces or tabs (labels from the config,
    predictions, answers) come back unchanged when a run's rows are read back
    (--resume, merge), and the tables are written as OUTPUTS.md says. The CSV reader (libcsv) drops spaces and tabs around
    an unquoted field; the writer quoted only fields with spaces there, so a
    label ending in a tab was read back without it and --resume refused the
    run as not its plan (found by fuzz_csv's round trip, 2026-12-05). Expected values: the
    labels written in the config, read by Python's csv module."""
    labels = ["\tfull", "snap\t", " rk \t"]
    cfg = write_config(tmp_path / "c.json",
                       tasks=[{"task": "needle", "words": [60], "depths": [0.5], "per_cell": 2,
                               "max_new": 4}],
                       methods=[{"method": "full", "label": labels[0]},
                                {"method": "snapkv", "label": labels[1]},
                                {"method": "rocketkv", "label": labels[2]}],
                       budgets=[32])
    out = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, out, tiny).returncode == 0
    want = rows(out / "samples.csv")
    assert sorted({r["label"] for r in want}) == sorted(labels)

    # byte for byte as OUTPUTS.md says: a field is quoted ("" doubled inside) when it is
    # empty or holds a comma, a quote or a line break, or begins or ends with a space or
    # a tab; fields joined by commas, records ended by \n
    def field(v):
        if v == "" or any(c in v for c in ',"\r\n') or v[0] in " \t" or v[-1] in " \t":
            return '"' + v.replace('"', '""') + '"'
        return v
    for table in ("samples.csv", "summary.csv"):
        with open(out / table, newline="") as f:
            records = list(csv.reader(f))
        assert any("" in r for r in records) and any(" " in "".join(r) for r in records)
        assert (out / table).read_bytes() == "".join(",".join(map(field, r)) + "\n" for r in records).encode()
    p = sweep(kvbench_bin, cfg, out, tiny, "--resume")
    assert p.returncode == 0, p.stderr
    assert rows(out / "samples.csv") == want
    shards = run_shards(kvbench_bin, cfg, tiny, [tmp_path / f"shard{i}" for i in range(2)])
    p = subprocess.run([kvbench_bin, "merge", str(tmp_path / "merged"), *map(str, shards)],
                       capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    assert rows(tmp_path / "merged" / "samples.csv") == want


def test_merge_needs_every_cell(kvbench_bin, tiny, tmp_path):
    """A shard whose table lost whole cells (here its last row, a one-turn
    needle cell) is refused by merge, naming the sample and the cell."""
    cfg = write_config(tmp_path / "c.json")
    shards = run_shards(kvbench_bin, cfg, tiny, [tmp_path / f"s{i}" for i in range(2)])
    with open(shards[1] / "samples.csv", newline="") as f:
        t = list(csv.reader(f))
    col = {c: i for i, c in enumerate(t[0])}
    last = t.pop()
    with open(shards[1] / "samples.csv", "w", newline="") as f:
        csv.writer(f).writerows(t)
    p = subprocess.run([kvbench_bin, "merge", str(tmp_path / "m"), *map(str, shards)],
                       capture_output=True, text=True)
    assert p.returncode == 2, p.stderr
    want = f"{shards[1]}/samples.csv: seq {last[col['seq']]} has no rows of cell '{last[col['label']]}' budget {last[col['budget']] or 'none'}"
    assert want in p.stderr, p.stderr
    assert not (tmp_path / "m").exists()


def test_plot_names_every_figure_apart(kvbench_bin, tiny, tmp_path):
    """Figure file names are made safe (characters other than letters, digits,
    '-' and '.' become '_'), so labels "kv a" and "kv_a" give one name; until
    2026-12-05 the second heatmap silently replaced the first. Now it gets
    "-2"."""
    task = [{"task": "needle", "words": [60, 120], "depths": [0.0, 1.0], "per_cell": 1, "max_new": 2}]
    cfg = write_config(tmp_path / "c.json", tasks=task, budgets=[32],
                       methods=[{"method": "rocketkv", "label": "kv a"},
                                {"method": "snapkv", "label": "kv_a"}])
    run = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, run, tiny).returncode == 0
    p = subprocess.run([kvbench_bin, "plot", str(run)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    dats = sorted(f.name for f in (run / "plots").iterdir() if f.name.startswith("needle_"))
    assert dats == ["needle_kv_a_B32-2.dat", "needle_kv_a_B32-2.png", "needle_kv_a_B32-2.svg",
                    "needle_kv_a_B32.dat", "needle_kv_a_B32.png", "needle_kv_a_B32.svg"], dats
    # accuracy figures: one per task, and ALL only with several tasks
    assert (run / "plots" / "accuracy_needle.png").exists()


def test_plot_refuses_damaged_tables(kvbench_bin, tiny, tmp_path):
    """plot needs the columns it draws (a table of an older version, with
    other columns beside them, is still drawn) and checks the numbers it
    reads: before, a cut summary.csv made "0 figures" with exit 0 and a
    score 'abc' was drawn as 0; a params cell that is not a JSON object (the
    ablation figures read it) dropped its cell from them."""
    cfg = write_config(tmp_path / "c.json", methods=["full", "rocketkv"])
    run = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, run, tiny).returncode == 0

    def cut(d):
        (d / "summary.csv").write_bytes((d / "summary.csv").read_bytes()[:20])  # "task,turn,method,la"
        return "summary.csv: no column 'label'"

    def cell(name, column, value):
        def f(d):
            with open(d / name, newline="") as fh:
                t = list(csv.reader(fh))
            t[1][t[0].index(column)] = value
            with open(d / name, "w", newline="") as fh:
                csv.writer(fh).writerows(t)
            return f"{name}: data row 1: {column} '{value}', expected a number"
        return f

    def params(d):
        cell("summary.csv", "params", '{"kernel":7')(d)
        return "summary.csv: data row 1: params '{\"kernel\":7', expected a JSON object"

    def directory(d):
        (d / "summary.csv").unlink()
        (d / "summary.csv").mkdir()
        return "summary.csv: cannot read: Is a directory"

    for i, damage in enumerate([cut, cell("summary.csv", "score", "abc"),
                                cell("samples.csv", "depth", "x"), cell("summary.csv", "budget", "inf"),
                                params, directory]):
        d = tmp_path / f"bad{i}"
        subprocess.run(["cp", "-r", str(run), str(d)], check=True)
        msg = damage(d)
        p = subprocess.run([kvbench_bin, "plot", str(d)], capture_output=True, text=True)
        assert p.returncode == 2, (i, p.stdout, p.stderr)
        assert msg in p.stderr, (i, p.stderr)
        assert not (d / "plots").exists()
    # a run of an older version: samples.csv without this version's last columns
    old = tmp_path / "old"
    subprocess.run(["cp", "-r", str(run), str(old)], check=True)
    with open(old / "samples.csv", newline="") as fh:
        t = list(csv.reader(fh))
    drop = [t[0].index(c) for c in ("approx_tokeq_per_step", "attended_per_step")]
    with open(old / "samples.csv", "w", newline="") as fh:
        csv.writer(fh).writerows([[v for i, v in enumerate(r) if i not in drop] for r in t])
    p = subprocess.run([kvbench_bin, "plot", str(old)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr


def test_plots(kvbench_bin, tiny, tmp_path):
    if subprocess.run(["which", "gnuplot"], capture_output=True).returncode:
        pytest.skip("gnuplot not installed")
    cfg = write_config(tmp_path / "c.json")
    out = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, out, tiny).returncode == 0
    p = subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    pngs = [f for f in os.listdir(out / "plots") if f.endswith(".png")]
    assert "accuracy_needle.png" in pngs and "accuracy_ALL.png" in pngs
    assert any(f.startswith("needle_rocketkv_B32") for f in pngs)
    for f in pngs:
        with open(out / "plots" / f, "rb") as fh:
            assert fh.read(8) == b"\x89PNG\r\n\x1a\n"
    assert all(os.path.getsize(out / "plots" / f) > 2000 for f in pngs)



def sha256_of(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def png_chunks(path):
    """(type, data) of every chunk, each CRC checked with zlib; the image data
    must still inflate to height rows of 1 + width * 3 bytes (8-bit RGB)."""
    d = open(path, "rb").read()
    assert d[:8] == b"\x89PNG\r\n\x1a\n"
    out, i = [], 8
    while i < len(d):
        n, t = struct.unpack(">I", d[i:i + 4])[0], d[i + 4:i + 8]
        body, crc = d[i + 8:i + 8 + n], struct.unpack(">I", d[i + 8 + n:i + 12 + n])[0]
        assert crc == zlib.crc32(t + body), (path, t)
        out.append((t, body))
        i += 12 + n
    w, h = struct.unpack(">II", out[0][1][:8])
    assert len(zlib.decompress(b"".join(b for t, b in out if t == b"IDAT"))) == h * (1 + 3 * w)
    return out


def test_plot_provenance_and_stale_figures(kvbench_bin, tiny, tmp_path):
    """Every data file names the table (with its sha256) and the run (run.json's
    sha256, commit, model sha256) it was drawn from, and plots/plots.json lists
    every figure with its files and the same provenance, checked here against
    hashlib and run.json. Figures an earlier plot listed that are no longer
    drawn are removed; so are all of them when a new run replaces the old one
    (sweep --force, merge --force, bench methods); files kvbench did not list
    stay. A damaged run.json is refused (exit 2); a missing one is a warning."""
    if subprocess.run(["which", "gnuplot"], capture_output=True).returncode:
        pytest.skip("gnuplot not installed")
    cfg = write_config(tmp_path / "c.json", methods=["full", "snapkv", "quest"])
    out = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, out, tiny).returncode == 0
    p = subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True, text=True)
    assert p.returncode == 0, p.stderr
    run = json.load(open(out / "run.json"))
    man = json.load(open(out / "plots" / "plots.json"))
    assert man["run"]["run_json_sha256"] == sha256_of(out / "run.json")
    assert man["run"]["git_commit"] == run["git_commit"] and man["run"]["config"] == "t"
    assert man["run"]["model"]["sha256"] == run["model"]["sha256"] == sha256_of(tiny)
    assert man["tables"] == {t: sha256_of(out / t) for t in ("summary.csv", "samples.csv")}
    listed = {f for fig in man["figures"] for f in fig["files"]}
    on_disk = set(os.listdir(out / "plots")) - {"plots.json"}
    assert listed == on_disk, (listed ^ on_disk)
    for fig in man["figures"]:
        assert fig["files"] == [fig["name"] + e for e in (".dat", ".png", ".svg")], fig
        with open(out / "plots" / fig["files"][0]) as fh:
            head = [fh.readline(), fh.readline()]
        assert f"/{fig['from']} (sha256 {sha256_of(out / fig['from'])})" in head[0], head
        assert f"run.json (sha256 {sha256_of(out / 'run.json')})" in head[1], head
        assert f"sha256 {run['model']['sha256']}" in head[1] and run["git_commit"] in head[1], head
        # the images carry the same text: a PNG's iTXt Comment, an SVG's <desc>
        want = [f"/{fig['from']} (sha256 {sha256_of(out / fig['from'])})",
                f"run.json (sha256 {sha256_of(out / 'run.json')})", f"sha256 {run['model']['sha256']}"]
        chunks = png_chunks(out / "plots" / fig["files"][1])
        assert chunks[0][0] == b"IHDR" and chunks[-1][0] == b"IEND"
        texts = [b for t, b in chunks if t == b"iTXt" and b.startswith(b"Comment\0\0\0\0\0")]
        assert len(texts) == 1 and all(w in texts[0].decode() for w in want), texts
        desc = ET.parse(out / "plots" / fig["files"][2]).getroot().find("{http://www.w3.org/2000/svg}desc")
        assert all(w in desc.text for w in want), desc.text
    # a write that fails (a full disk) leaves no image without its provenance, nor a cut one:
    # the limit lets gnuplot write the smallest PNG whole but not with its text added
    limit = min(os.path.getsize(out / "plots" / f) for f in listed if f.endswith(".png")) - 1
    full = tmp_path / "full"
    shutil.copytree(out, full)
    shutil.rmtree(full / "plots")
    p = subprocess.run([kvbench_bin, "plot", str(full)], capture_output=True, text=True,
                       preexec_fn=_file_size_limit(limit))
    assert p.returncode == 1 and "write failed" in p.stderr, (p.returncode, p.stderr)
    for f in os.listdir(full / "plots"):
        if f.endswith(".png"):
            assert any(t == b"iTXt" for t, _ in png_chunks(full / "plots" / f)), f
        elif f.endswith(".svg"):
            assert ET.parse(full / "plots" / f).getroot().find("{http://www.w3.org/2000/svg}desc") is not None
            assert "kvbench plot" in open(full / "plots" / f).read(), f
    heat = {fig["name"] for fig in man["figures"] if fig["from"] == "samples.csv"}
    assert "needle_quest_B32" in heat and "accuracy_needle" in {f["name"] for f in man["figures"]}
    # a figure no longer drawn goes (the quest rows gone), a file of the user's stays
    (out / "plots" / "notes.txt").write_text("mine")
    (out / "plots" / "mine.png").write_bytes(b"mine")
    for t in ("samples.csv", "summary.csv"):
        with open(out / t, newline="") as fh:
            table = list(csv.reader(fh))
        col = table[0].index("label")
        with open(out / t, "w", newline="") as fh:
            csv.writer(fh).writerows([r for r in table if r[col] != "quest"])
    assert subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True).returncode == 0
    now = set(os.listdir(out / "plots"))
    assert not [f for f in now if "quest" in f] and {"notes.txt", "mine.png", "accuracy_needle.png"} <= now
    # a manifest cannot make plot remove a file outside plots/
    man = json.load(open(out / "plots" / "plots.json"))
    man["figures"].append({"name": "x", "files": ["../samples.csv", "/etc/hostname", ".hidden.png"]})
    (out / "plots" / "plots.json").write_text(json.dumps(man))
    (out / "plots" / ".hidden.png").write_bytes(b"x")
    assert subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True).returncode == 0
    assert (out / "samples.csv").exists() and (out / "plots" / ".hidden.png").exists()
    # --formats svg writes no PNG: those of the previous plot go (they may be of other data)
    assert subprocess.run([kvbench_bin, "plot", str(out), "--formats", "svg"], capture_output=True).returncode == 0
    assert not [f for f in os.listdir(out / "plots") if f.endswith(".png") and f not in ("mine.png", ".hidden.png")]
    assert subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True).returncode == 0
    # a run path that is not XML text (U+FFFE) still gives SVGs that parse
    odd = tmp_path / "q\ufffe&<x>"
    shutil.copytree(out, odd)
    shutil.rmtree(odd / "plots")
    assert subprocess.run([kvbench_bin, "plot", str(odd), "--formats", "svg"], capture_output=True).returncode == 0
    for f in os.listdir(odd / "plots"):
        if f.endswith(".svg"):
            assert "&amp;&lt;x&gt;" in open(odd / "plots" / f, encoding="utf-8").read()
            ET.parse(odd / "plots" / f)
    # a new run over it: the old figures go, the user's files stay
    other = write_config(tmp_path / "o.json", methods=["full", "snapkv"],
                         tasks=[{"task": "vt", "lengths": [1500], "samples": 2}])
    assert sweep(kvbench_bin, other, out, tiny, "--force").returncode == 0
    assert sorted(os.listdir(out / "plots")) == [".hidden.png", "mine.png", "notes.txt"]
    assert subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True).returncode == 0
    assert {f["name"] for f in json.load(open(out / "plots" / "plots.json"))["figures"]} == \
        {"accuracy_vt"}
    # merge --force over a plotted run, and bench methods over its own plotted run
    shards = run_shards(kvbench_bin, other, tiny, [tmp_path / "s0", tmp_path / "s1"])
    p = subprocess.run([kvbench_bin, "merge", "--force", str(out), *map(str, shards)], capture_output=True,
                       text=True)
    assert p.returncode == 0, p.stderr
    assert not (out / "plots" / "plots.json").exists() and not (out / "plots" / "accuracy_vt.png").exists()
    bench = tmp_path / "bench"
    for _ in range(2):
        p = subprocess.run([kvbench_bin, "bench", "methods", "-m", "synthetic:smollm2-135m", "--contexts", "64",
                            "--methods", "full,quest", "--budgets", "16", "--decode-tokens", "2", "--reps", "1",
                            "--out", str(bench)], capture_output=True, text=True, timeout=300)
        assert p.returncode == 0, p.stderr
        assert not (bench / "plots").exists()
        p = subprocess.run([kvbench_bin, "plot", str(bench)], capture_output=True, text=True)
        assert p.returncode == 0 and (bench / "plots" / "speedup.png").exists(), p.stderr
        assert json.load(open(bench / "plots" / "plots.json"))["run"]["kind"] == "bench_methods"
    # run.json damaged: refused, nothing drawn; missing: a warning, and "run": null
    (out / "run.json").write_text('{"model": ')
    shutil.rmtree(out / "plots")
    p = subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True, text=True)
    assert p.returncode == 2 and "run.json" in p.stderr and not (out / "plots").exists(), p.stderr
    (out / "run.json").unlink()
    p = subprocess.run([kvbench_bin, "plot", str(out)], capture_output=True, text=True)
    assert p.returncode == 0 and "has no run.json" in p.stderr, p.stderr
    assert json.load(open(out / "plots" / "plots.json"))["run"] is None
    with open(out / "plots" / "accuracy_vt.dat") as fh:
        assert "run: none" in fh.read()


def test_killed_plot_leaves_nothing_unlisted(kvbench_bin, tiny, tmp_path):
    """A plot killed (SIGKILL) while gnuplot draws: plots.json already lists
    every file it was writing, so the next run in the directory removes them
    all (an image left under its own name, without provenance, stayed before),
    and no image lies under its own name unstamped."""
    real = shutil.which("gnuplot")
    if not real:
        pytest.skip("gnuplot not installed")
    cfg = write_config(tmp_path / "c.json", methods=["full", "snapkv"])
    out = tmp_path / "run"
    assert sweep(kvbench_bin, cfg, out, tiny).returncode == 0
    wrap = tmp_path / "bin"
    wrap.mkdir()
    mark = tmp_path / "drawn"
    # the third image drawn, then hold on so that plot can be killed mid-figure
    (wrap / "gnuplot").write_text(f"#!/bin/sh\n{real} \"$@\"\necho >> {mark}\n"
                                  f"[ $(wc -l < {mark}) -ge 3 ] && exec sleep 60\nexit 0\n")
    (wrap / "gnuplot").chmod(0o755)
    p = subprocess.Popen([kvbench_bin, "plot", str(out)], env=dict(os.environ, PATH=f"{wrap}:{os.environ['PATH']}"),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None and not (mark.exists() and
                                                             len(mark.read_text().splitlines()) >= 3):
        time.sleep(0.01)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert p.returncode == -signal.SIGKILL, "the kill must land while plot runs"
    man = json.load(open(out / "plots" / "plots.json"))
    listed = {f for fig in man["figures"] for f in fig["files"]} | set(man.get("in_progress", []))
    left = set(os.listdir(out / "plots")) - {"plots.json"}
    assert {f for f in left if ".tmp." not in f} <= listed, left - listed
    for f in left:
        if f.endswith(".png"):
            assert any(t == b"iTXt" for t, _ in png_chunks(out / "plots" / f)), f
    other = write_config(tmp_path / "o.json", methods=["full", "snapkv"], seed=9)
    assert sweep(kvbench_bin, other, out, tiny, "--force").returncode == 0
    assert not (out / "plots").exists(), os.listdir(out / "plots")


def test_plot_hostile_names_and_many_lengths(kvbench_bin, tiny, tmp_path):
    """Labels, task names and the model name reach gnuplot as text only (a quote
    or a line break in them cannot end a string and run a command), and a
    needle heatmap with more lengths than any fixed buffer is drawn whole."""
    if subprocess.run(["which", "gnuplot"], capture_output=True).returncode:
        pytest.skip("gnuplot not installed")
    # plot needs the tables' own columns: take them from a real run
    real = tmp_path / "real"
    assert sweep(kvbench_bin, write_config(tmp_path / "c.json", methods=["full"]), real, tiny).returncode == 0
    header = {n: next(csv.reader(open(real / n, newline=""))) for n in ("summary.csv", "samples.csv")}
    run = tmp_path / "run"
    run.mkdir()
    pwned = [tmp_path / f"pwned{i}" for i in range(3)]
    label = f"x'.system('touch {pwned[0]}').'"
    label2 = f"y\n!touch {pwned[1]}\n"
    task = f"t'.system('touch {pwned[2]}').'"
    (run / "run.json").write_text(json.dumps({"model": {"name": "it's"}}))
    with open(run / "summary.csv", "w", newline="") as f:
        w = csv.DictWriter(f, header["summary.csv"], restval="")
        w.writeheader()
        for t in (task, "ALL"):
            for lab in (label, label2):
                for b, sc in (("32", "10"), ("64", "20")):
                    w.writerow(dict(task=t, turn="all", label=lab, budget=b, params="{}", score=sc))
    n_len = 600
    with open(run / "samples.csv", "w", newline="") as f:
        w = csv.DictWriter(f, header["samples.csv"], restval="")
        w.writeheader()
        for i in range(n_len):
            for d in ("0", "1"):
                w.writerow(dict(task="needle", label=label, budget="", depth=d, target_tokens=str(100 + i),
                                context_tokens=str(110 + i), score=str(i % 2)))
    p = subprocess.run([kvbench_bin, "plot", str(run), "--formats", "png"], capture_output=True,
                       text=True, timeout=300)
    assert p.returncode == 0, (p.returncode, p.stderr)
    assert not any(x.exists() for x in pwned), "a name ran a command"
    pngs = [f for f in os.listdir(run / "plots") if f.endswith(".png")]
    assert "accuracy_ALL.png" in pngs and len(pngs) == 3, pngs
    heat = [f for f in os.listdir(run / "plots") if f.startswith("needle_") and f.endswith(".dat")]
    with open(run / "plots" / heat[0]) as f:
        cells = [line.split() for line in f if line.strip() and not line.startswith("#")]
    # one cell per (length, depth): every length is drawn, none dropped
    assert len(cells) == 2 * n_len
    assert {int(c[0]) for c in cells} == set(range(n_len))

BAD = [
    ({"tasks": [], "methods": ["full"]}, "key 'tasks'"),
    ({"methods": []}, "key 'methods'"),
    ({"methods": ["nosuch"]}, "unknown method 'nosuch'"),
    ({"methods": [{"method": "rocketkv", "budget": 8}]}, "rocketkv"),
    ({"methods": [{"method": "snapkv", "kernel": 8}], "budgets": [64]}, "kernel"),
    ({"methods": [{"method": "rocketkv", "frobnicate": 1}], "budgets": [64]}, "frobnicate"),
    ({"methods": ["rocketkv"], "budgets": [-4]}, "budgets"),
    ({"budgets": "64"}, "budgets"),
    ({"colour": "blue"}, "unknown key 'colour'"),
    ({"seed": "x"}, "key 'seed'"),
    ({"kv_dtype": "f8"}, "kv_dtype"),
    ({"tasks": [{"task": "needle", "wordz": [10]}]}, "wordz"),
    ({"tasks": [{"task": "nosuch"}]}, "unknown task 'nosuch'"),
    ({"methods": ["full", "full"]}, "duplicate cell"),
    # found before anything runs: the second task's prompts and the latency
    # part's context do not fit the tiny model's 2048 tokens
    ({"tasks": [{"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1, "max_new": 6},
                {"task": "needle", "words": [3000], "depths": [0.5], "per_cell": 1, "max_new": 6}]},
     "does not fit the model context 2048"),
    ({"latency": {"contexts": [4096], "decode_tokens": 2, "reps": 1}},
     "key 'latency': context 4096 + 2 decode tokens does not fit"),
    ({"methods": [{"method": "rocketkv", "budget": 32, "budgets": [64]}]}, "'budget' and 'budgets' both"),
    ({"name": "../../escaped"}, "key 'name'"),
    ({"name": ""}, "key 'name'"),
    ({"name": "a\nb"}, "key 'name'"),
    ({"name": ".."}, "key 'name'"),
]


@pytest.mark.parametrize("over,needle", BAD, ids=[str(i) for i in range(len(BAD))])
def test_bad_configs(kvbench_bin, tiny, tmp_path, over, needle):
    cfg = write_config(tmp_path / "c.json", **over)
    out = tmp_path / "run"
    p = sweep(kvbench_bin, cfg, out, tiny)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert needle in p.stderr, p.stderr
    assert not out.exists(), "a bad config must not create the run directory"


def test_malformed_json(kvbench_bin, tiny, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text('{"name": "x",\n "seed": 1,\n "tasks": [ }\n')
    p = sweep(kvbench_bin, str(cfg), tmp_path / "run", tiny)
    assert p.returncode == 2 and f"{cfg}:3:" in p.stderr, p.stderr
