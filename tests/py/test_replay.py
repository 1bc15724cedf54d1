"""kvbench replay against the independent NumPy implementations in
tests/reference/methods_ref.py, on traces written by NumPy itself.

Selections must be identical (slot sets per step and row, stage-1 kept
positions); a difference is accepted only as a near tie of the reference's
scores (relative 1e-5, never an exact tie, which the index rule decides), at
most 2% of rows. Outputs: |out - ref| <= 1e-4 (f32 kernels with a 2e-7
relative fast exp vs float64, values of order 1, sums of <= 10^3 terms).
Malformed traces and bad parameters must exit 2 with a message naming the
file / method / key, and leave --out untouched."""

import csv
import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
import methods_ref as ref  # noqa: E402

BIN = os.environ.get("KVBENCH_BIN")
pytestmark = pytest.mark.skipif(not BIN or not os.path.exists(BIN), reason="KVBENCH_BIN not built")

OUT_TOL = 1e-4

CONFIGS = [
    {"method": "full"},
    {"method": "exact_topk", "budget": 48},
    {"method": "exact_topk", "budget": 48, "gqa": "group_sum"},
    {"method": "snapkv", "budget": 64},
    {"method": "snapkvpp", "budget": 64},
    {"method": "snapkvpp", "budget": 64, "pooling": "avg", "kernel": 5, "gqa": "group_mean"},
    {"method": "snapkvpp", "budget": 64, "kernel": "adaptive", "kernel_by_length": [[200, 3], [5000, 9]]},
    {"method": "quest", "budget": 64},
    {"method": "quest", "budget": 64, "gqa": "group_sum", "budget_mode": "topk"},
    {"method": "sparq", "budget": 64},
    {"method": "sparq", "budget": 64, "gqa": "per_head", "reallocate_mean_v": True, "local_window": 4},
    {"method": "hybrid", "budget": 64},
    {"method": "hybrid", "budget": 64, "page_size": 4},
    {"method": "rocketkv", "budget": 64},
    {"method": "rocketkv", "budget": 64, "alpha": 0.5, "budget_mode": "topk"},
    {"method": "rocketkv", "budget": 32, "window": 16, "r": 5},
    {"method": "rocketkv_mt", "budget": 64},
]

TRACES = {
    # name: (seed, L, W, N, Hq, Hkv, D, kind)
    "gqa": (1, 300, 64, 6, 8, 2, 32, "random"),
    "mha_needle": (2, 1000, 40, 3, 4, 4, 16, "needle"),
    "ties": (3, 150, 32, 4, 6, 3, 16, "ties"),
}


@pytest.fixture(scope="module")
def traces(tmp_path_factory):
    base = tmp_path_factory.mktemp("traces")
    out = {}
    for name, (seed, L, W, N, Hq, Hkv, D, kind) in TRACES.items():
        t = ref.make_trace(np.random.default_rng(seed), L, W, N, Hq, Hkv, D, kind)
        d = str(base / name)
        ref.save_trace(d, t)
        out[name] = (d, t)
    return out


def replay(trace_dir, out_dir, cfg=None, extra=()):
    args = [BIN, "replay", "--trace", trace_dir, "--out", out_dir]
    if cfg is not None:
        args += ["--config", json.dumps(cfg)]
    args += list(extra)
    return subprocess.run(args, capture_output=True, text=True, timeout=120)


def load(out_dir):
    r = {"out": np.load(os.path.join(out_dir, "out.npy")),
         "selected": np.load(os.path.join(out_dir, "selected.npy"))}
    kp = os.path.join(out_dir, "kept.npy")
    r["kept"] = np.load(kp) if os.path.exists(kp) else None
    with open(os.path.join(out_dir, "stats.json")) as f:
        r["stats"] = json.load(f)
    return r


@pytest.mark.parametrize("tname", list(TRACES))
@pytest.mark.parametrize("ci", range(len(CONFIGS)))
def test_replay_matches_reference(traces, tmp_path, tname, ci):
    cfg = CONFIGS[ci]
    d, t = traces[tname]
    p = replay(d, str(tmp_path / "o"), cfg)
    assert p.returncode == 0, p.stderr
    got = load(str(tmp_path / "o"))
    want = ref.run_method(t, cfg)
    N, Hq, D = t["q"].shape
    assert got["out"].shape == (N, Hq, D) and got["out"].dtype == np.float32
    assert got["selected"].dtype == np.int32 and got["selected"].shape[:2] == want["selected"].shape[:2]
    near = rows = 0
    diverged = False
    # stage 1
    if want["kept"] is None:
        assert got["kept"] is None
    else:
        assert got["kept"].shape == want["kept"].shape, (got["kept"].shape, want["kept"].shape)
        for r in range(want["kept"].shape[0]):
            rows += 1
            a, b = got["kept"][r], want["kept"][r]
            if np.array_equal(a, b):
                continue
            npre, pooled = want["kept_scores"][r]
            assert npre > 0, f"row {r}: kept sets differ without eviction"
            m = ref.sets_match(a[a < npre], b[b < npre], pooled)
            assert m and np.array_equal(a[a >= npre], b[b >= npre]), f"row {r}: stage 1 kept set differs"
            near += 1
            diverged = True  # the caches differ from here on: stop comparing steps
    if not diverged:
        # a decode step's selection does not change the cache (the trace gives
        # every step's K and V), so a near tie at step i excuses only that
        # step's output: later steps are compared as before
        for i in range(N):
            ws = want["selected"][i]
            tie = False
            for r in range(ws.shape[0]):
                rows += 1
                a = got["selected"][i, r]
                b = ws[r]
                a, b = a[a >= 0], b[b >= 0]
                sc = None if want["scores"][i] is None else want["scores"][i][r]
                m = ref.sets_match(a, b, sc)
                assert m, f"step {i} row {r}: selected {a[:10]}... vs reference {b[:10]}..."
                if m == "near":
                    near += 1
                    tie = True
            if tie:
                continue
            err = np.abs(got["out"][i] - want["out"][i]).max()
            assert err <= OUT_TOL, f"step {i}: output error {err}"
    assert near * 50 <= max(rows, 50), f"{near} near ties in {rows} rows"
    # budget parameters in stats.json
    st = got["stats"]
    assert st["method"] == cfg["method"]
    for key in ("prompt_budget", "p", "r", "k", "P", "n_pages", "T"):
        if key in want["budget"] and want["budget"][key] is not None:
            assert st["budget"][key] == want["budget"][key], (key, st["budget"][key], want["budget"][key])
    assert len(st["steps"]) == N
    assert all(s["read_tokeq"] >= 0 and s["resident_bytes"] > 0 for s in st["steps"])
    # step i decodes position L + i (methods.md §9), L the prefix k.npy holds
    L = t["k"].shape[0]
    assert [(s["step"], s["pos"]) for s in st["steps"]] == [(i, L + i) for i in range(N)]


def test_param_flags_and_f16(traces, tmp_path):
    """--method/--budget/--param give the same result as --config; f16 storage runs too."""
    d, t = traces["gqa"]
    a = replay(d, str(tmp_path / "a"), {"method": "rocketkv", "budget": 64, "alpha": 0.5})
    b = replay(d, str(tmp_path / "b"), None, ["--method", "rocketkv", "--budget", "64", "--param", "alpha=0.5"])
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    ra, rb = load(str(tmp_path / "a")), load(str(tmp_path / "b"))
    assert np.array_equal(ra["out"], rb["out"]) and np.array_equal(ra["selected"], rb["selected"])
    c = replay(d, str(tmp_path / "c"), None, ["--method", "sparq", "--budget", "64", "--kv-dtype", "f16"])
    assert c.returncode == 0, c.stderr
    assert load(str(tmp_path / "c"))["stats"]["kv_dtype"] == "f16"


@pytest.mark.parametrize("dtype,elt", [("f32", 4), ("f16", 2), ("bf16", 2)])
@pytest.mark.parametrize("ci", range(len(CONFIGS)))
def test_read_bytes_match_token_equivalents(traces, tmp_path, ci, dtype, elt):
    """A token-equivalent is the bytes of one K+V row (2·D elements of the KV
    dtype), so every step's physical read_bytes must equal the token-eq reads
    times Hkv·2·D·elt: read_tokeq in traffic mode, read_tokeq + approx_tokeq in
    topk mode (which leaves the approximation out of read_tokeq but not out of
    the bytes). read_tokeq is checked against the accountant's definitions in
    tests/unit/test_method.c; this ties the bytes column to it for every
    method and storage type (QUEST once charged its f16 summaries as f32).
    Tolerance: relative 1e-12, the counts are sums of integers and halves."""
    d, t = traces["gqa"]
    cfg = CONFIGS[ci]
    out = str(tmp_path / "o")
    p = replay(d, out, cfg, ["--kv-dtype", dtype])
    assert p.returncode == 0, p.stderr
    st = load(out)["stats"]
    _, Hkv, D = t["k"].shape
    topk = cfg.get("budget_mode") == "topk"
    for i, s in enumerate(st["steps"]):
        tokeq = s["read_tokeq"] + (s["approx_tokeq"] if topk else 0)
        want = tokeq * Hkv * 2 * D * elt
        assert abs(s["read_bytes"] - want) <= 1e-12 * want, (i, s["read_bytes"], want, s)


def bad_trace(src, dst, mutate):
    os.makedirs(dst, exist_ok=True)
    for f in os.listdir(src):
        with open(os.path.join(src, f), "rb") as a, open(os.path.join(dst, f), "wb") as b:
            b.write(a.read())
    mutate(dst)


def _set(d, name, at, value):
    a = np.load(os.path.join(d, name))
    a[at] = value
    np.save(os.path.join(d, name), a)


def _write(path, data):
    with open(path, "wb") as f:
        f.write(data)


MALFORMED = [
    ("missing q.npy", lambda d: os.remove(os.path.join(d, "q.npy")), "q.npy: cannot open"),
    ("bad magic", lambda d: _write(os.path.join(d, "k.npy"), b"not an npy file at all"), "k.npy: not a .npy file"),
    ("float64", lambda d: np.save(os.path.join(d, "v.npy"), np.zeros((300, 2, 32))), "v.npy: .npy descr '<f8' not supported"),
    ("shape", lambda d: np.save(os.path.join(d, "knew.npy"), np.zeros((6, 8, 32), np.float32)),
     "knew.npy: shape (6, 8, 32) does not match k.npy: Hkv is 2 there, 8 here"),
    ("shape L", lambda d: np.save(os.path.join(d, "v.npy"), np.zeros((299, 2, 32), np.float32)),
     "v.npy: shape (299, 2, 32) does not match k.npy: L is 300 there, 299 here"),
    ("fortran", lambda d: np.save(os.path.join(d, "qwin.npy"), np.asfortranarray(np.zeros((64, 8, 32), np.float32))),
     "qwin.npy: .npy fortran_order is True"),
    ("truncated", lambda d: _write(os.path.join(d, "q.npy"), open(os.path.join(d, "q.npy"), "rb").read()[:-7]),
     "q.npy: .npy data holds"),
    ("meta S", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6}'), "meta.json: missing required key 'S'"),
    ("meta json", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6,'), "meta.json:1:"),
    ("W > L", lambda d: np.save(os.path.join(d, "qwin.npy"), np.zeros((301, 8, 32), np.float32)),
     "qwin.npy: W = 301 window queries, expected 1 <= W <= L = 300"),
    # meta.json must agree with the arrays (L = 300, N = 6): a sweep writes
    # S = min(L + 1 + max_new, context) and runs N <= max_new steps
    ("meta S small", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6, "S": 5}'),
     "meta.json: S = 5, expected L + N = 306 <= S <= L + 1 + max_new = 307"),
    ("meta S large", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6, "S": 999}'),
     "meta.json: S = 999, expected L + N = 306"),
    ("meta max_new", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 0, "S": 306}'),
     "meta.json: max_new = 0, but q.npy holds N = 6 decode steps"),
    ("meta key", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6, "S": 306, "x": 1}'),
     "meta.json: unknown key 'x'"),
    ("meta kv_dtype", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6, "S": 306, "kv_dtype": "f8"}'),
     "meta.json: key 'kv_dtype': expected \"f32\", \"f16\" or \"bf16\", got \"f8\""),
    # the bounds exactly (L = 300, N = 6): S = L + N - 1, S = L + 2 + max_new, max_new = N - 1
    ("meta S = L + N - 1", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6, "S": 305}'),
     "meta.json: S = 305, expected L + N = 306 <= S <= L + 1 + max_new = 307"),
    ("meta S = L + 2 + max_new", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 6, "S": 308}'),
     "meta.json: S = 308, expected L + N = 306 <= S <= L + 1 + max_new = 307"),
    ("meta max_new = N - 1", lambda d: _write(os.path.join(d, "meta.json"), b'{"max_new": 5, "S": 306}'),
     "meta.json: max_new = 5, but q.npy holds N = 6 decode steps: expected max_new >= N"),
    ("W = 0", lambda d: np.save(os.path.join(d, "qwin.npy"), np.zeros((0, 8, 32), np.float32)),
     "qwin.npy: W = 0 window queries, expected 1 <= W <= L = 300"),
    ("L = 0", lambda d: [np.save(os.path.join(d, f), np.zeros((0, 2, 32), np.float32)) for f in ("k.npy", "v.npy")],
     "k.npy: need L >= 1, Hkv >= 1, D >= 1, got (0, 2, 32)"),
    ("Hq = 0", lambda d: [np.save(os.path.join(d, f), np.zeros((n, 0, 32), np.float32))
                          for f, n in (("qwin.npy", 64), ("q.npy", 6))],
     "qwin.npy: Hq = 0 query heads is not a multiple of Hkv = 2 KV heads"),
    # every dimension each file shares with an earlier one
    ("shape v D", lambda d: np.save(os.path.join(d, "v.npy"), np.zeros((300, 2, 16), np.float32)),
     "v.npy: shape (300, 2, 16) does not match k.npy: D is 32 there, 16 here"),
    ("shape v Hkv", lambda d: np.save(os.path.join(d, "v.npy"), np.zeros((300, 4, 32), np.float32)),
     "v.npy: shape (300, 4, 32) does not match k.npy: Hkv is 2 there, 4 here"),
    ("shape qwin D", lambda d: np.save(os.path.join(d, "qwin.npy"), np.zeros((64, 8, 16), np.float32)),
     "qwin.npy: shape (64, 8, 16) does not match k.npy: D is 32 there, 16 here"),
    ("shape q Hq", lambda d: np.save(os.path.join(d, "q.npy"), np.zeros((6, 4, 32), np.float32)),
     "q.npy: shape (6, 4, 32) does not match qwin.npy: Hq is 8 there, 4 here"),
    ("shape q D", lambda d: np.save(os.path.join(d, "q.npy"), np.zeros((6, 8, 16), np.float32)),
     "q.npy: shape (6, 8, 16) does not match k.npy: D is 32 there, 16 here"),
    ("shape knew N", lambda d: np.save(os.path.join(d, "knew.npy"), np.zeros((5, 2, 32), np.float32)),
     "knew.npy: shape (5, 2, 32) does not match q.npy: N is 6 there, 5 here"),
    ("shape vnew N", lambda d: np.save(os.path.join(d, "vnew.npy"), np.zeros((7, 2, 32), np.float32)),
     "vnew.npy: shape (7, 2, 32) does not match q.npy: N is 6 there, 7 here"),
    ("shape vnew Hkv", lambda d: np.save(os.path.join(d, "vnew.npy"), np.zeros((6, 1, 32), np.float32)),
     "vnew.npy: shape (6, 1, 32) does not match k.npy: Hkv is 2 there, 1 here"),
    ("shape vnew D", lambda d: np.save(os.path.join(d, "vnew.npy"), np.zeros((6, 2, 8), np.float32)),
     "vnew.npy: shape (6, 2, 8) does not match k.npy: D is 32 there, 8 here"),
    ("nan", lambda d: _set(d, "k.npy", (7, 1, 3), np.nan), "k.npy: element (7, 1, 3) is NaN, expected finite values"),
    ("inf", lambda d: _set(d, "q.npy", (5, 0, 31), -np.inf), "q.npy: element (5, 0, 31) is infinite"),
]


@pytest.mark.parametrize("case", range(len(MALFORMED)))
def test_malformed_trace(traces, tmp_path, case):
    name, mutate, msg = MALFORMED[case]
    d = str(tmp_path / "t")
    bad_trace(traces["gqa"][0], d, mutate)
    out = tmp_path / "o"
    p = replay(d, str(out), {"method": "rocketkv", "budget": 64})
    assert p.returncode == 2, (name, p.returncode, p.stderr)
    assert msg in p.stderr, (name, p.stderr)
    assert p.stderr.startswith("kvbench replay: ")
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize("meta,shapes", [
    (b'{"max_new": 6, "S": 306}', {}),  # S = L + N: a run that stopped at the context
    (b'{"max_new": 6, "S": 307}', {}),  # S = L + 1 + max_new
    (b'{"max_new": 9, "S": 310}', {}),  # N < max_new: the run stopped early
    (b'{"max_new": 0, "S": 300}', {"q.npy": (0, 8, 32), "knew.npy": (0, 2, 32), "vnew.npy": (0, 2, 32)}),
    (b'{"max_new": 6, "S": 306}', {"qwin.npy": (300, 8, 32)}),  # W = L
])
def test_trace_bounds_accepted(traces, tmp_path, meta, shapes):
    """The other side of MALFORMED's bounds (docs/METHODS.md §9: N <= max_new,
    L + N <= S <= L + 1 + max_new, 1 <= W <= L): traces at the bounds
    replay, exit 0, with N steps of output."""
    def mutate(d):
        _write(os.path.join(d, "meta.json"), meta)
        for f, shape in shapes.items():
            np.save(os.path.join(d, f), np.full(shape, 0.25, np.float32))
    d = str(tmp_path / "t")
    bad_trace(traces["gqa"][0], d, mutate)
    p = replay(d, str(tmp_path / "o"), {"method": "quest", "budget": 64})
    assert p.returncode == 0, p.stderr
    got = load(str(tmp_path / "o"))
    assert got["out"].shape == (shapes.get("q.npy", (6,))[0], 8, 32)


BAD_PARAMS = [
    (["--method", "foo", "--budget", "64"], "key 'method': unknown method 'foo'"),
    (["--method", "quest", "--budget", "64", "--param", "kernel=7"], "method 'quest': unknown key 'kernel'"),
    (["--method", "snapkv", "--budget", "-5"], "--budget expects an integer"),
    (["--config", '{"method": "snapkv", "budget": -5}'],
     "replay: --config/--method/--budget/--param: method 'snapkv': key 'budget': expected an integer in [1, "),
    (["--method", "snapkvpp", "--budget", "64", "--param", "kernel=4"],
     "method 'snapkvpp': key 'kernel': expected an odd integer >= 1 or \"adaptive\", got 4"),
    (["--method", "rocketkv", "--budget", "8"], "method 'rocketkv': key 'budget': expected an integer >= 16, got 8"),
    (["--method", "hybrid"], "method 'hybrid': missing required key 'budget'"),
    (["--method", "rocketkv", "--budget", "64", "--param", "r=40"], "method 'rocketkv': key 'r': 40 exceeds the head dim D = 32"),
    (["--method", "rocketkv", "--budget", "64", "--param", "alpha"], "--param expects key=value"),
    (["--method", "rocketkv", "--budget", "64", "--frobnicate"], "unknown or incomplete option"),
    (["--config", "[1,2]"], "--config: expected a JSON object"),
    (["--method", "rocketkv", "--budget", "64", "--param", "r=[3"],
     "--param r=[3: the value is not valid JSON"),
    (["--method", "rocketkv", "--budget", "64", "--param", "r=3x"],
     "replay: --method/--budget/--param: method 'rocketkv': key 'r': expected an integer"),
    (["--config", '{"method": "rocketkv", "budget": 64, "budget": 128}'],
     "--config: key 'budget' appears twice"),
]


@pytest.mark.parametrize("case", range(len(BAD_PARAMS)))
def test_bad_parameters(traces, tmp_path, case):
    extra, msg = BAD_PARAMS[case]
    out = tmp_path / "o"
    out.mkdir()
    (out / "out.npy").write_bytes(b"stale")
    p = replay(traces["gqa"][0], str(out), None, extra)
    assert p.returncode == 2, (extra, p.returncode, p.stderr)
    assert msg in p.stderr and "replay: replay:" not in p.stderr, (extra, p.stderr)
    assert sorted(os.listdir(out)) == ["out.npy"] and (out / "out.npy").read_bytes() == b"stale"


def test_skip_layers_uses_full(traces, tmp_path):
    d, t = traces["gqa"]
    meta = os.path.join(str(tmp_path / "t"), "meta.json")
    bad_trace(d, str(tmp_path / "t"), lambda x: _write(os.path.join(x, "meta.json"),
                                                        b'{"max_new": 6, "S": 306, "layer": 1}'))
    p = replay(str(tmp_path / "t"), str(tmp_path / "o"), {"method": "rocketkv", "budget": 64, "skip_layers": 2})
    assert p.returncode == 0, p.stderr
    got = load(str(tmp_path / "o"))
    assert got["stats"]["dense_because_skip_layers"] is True
    full = ref.run_method(t, {"method": "full"})
    assert np.abs(got["out"] - full["out"]).max() <= OUT_TOL
    assert os.path.exists(meta)


def test_replay_into_a_used_directory(traces, tmp_path):
    """A replay of a non-evicting method into the directory of an evicting
    one's replay must not leave that run's kept.npy beside its own files."""
    d = traces["gqa"][0]
    out = str(tmp_path / "o")
    p = replay(d, out, {"method": "snapkv", "budget": 64})
    assert p.returncode == 0, p.stderr
    assert os.path.exists(os.path.join(out, "kept.npy"))
    p = replay(d, out, {"method": "quest", "budget": 64})
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(out)) == ["out.npy", "selected.npy", "stats.json"]
    assert load(out)["stats"]["method"] == "quest"


def test_stats_name_the_build_and_the_trace(traces, tmp_path):
    """stats.json says which build made it and from which trace, as run.json
    does for a sweep: the commit is the one `kvbench --version` prints."""
    d = traces["gqa"][0]
    out = str(tmp_path / "o")
    p = replay(d, out, {"method": "quest", "budget": 64})
    assert p.returncode == 0, p.stderr
    st = load(out)["stats"]
    v = subprocess.run([BIN, "--version"], capture_output=True, text=True).stdout
    m = re.fullmatch(r"kvbench (\S+) \(commit (\S+)\)\n", v)
    assert m, v
    assert (st["kvbench_version"], st["git_commit"]) == m.groups()
    # git describe --always --dirty --abbrev=12 (a tag-based name if the tree gets tags)
    assert re.fullmatch(r"([\w.-]+-g)?[0-9a-f]{12,}(-dirty)?|unknown", st["git_commit"]), st["git_commit"]
    assert st["trace_dir"] == d



def test_sweep_trace_replays_in_its_cache_type(tiny_llama, tmp_path):
    """A trace written by a sweep names its cache type, and replay uses it by
    default, so replaying the sweep's trace gives what an f16 cache gives:
    k.npy holds the cache's rows (f16-rounded), knew.npy the steps' K before
    the cache rounds them. Before, meta.json had no kv_dtype and replay
    defaulted to f32, which moved the outputs by ~1e-3."""
    model = tiny_llama(n_ctx=2048)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"name": "t", "seed": 3, "methods": ["quest"], "budgets": [32], "tasks": [
        {"task": "needle", "words": [120], "depths": [0.5], "per_cell": 1, "max_new": 6}]}))
    out = tmp_path / "run"
    p = subprocess.run([BIN, "sweep", str(cfg), "--out", str(out), "-m", model, "--dump-trace", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    (d,) = [str(x) for x in (out / "traces").iterdir()]
    meta = json.load(open(os.path.join(d, "meta.json")))
    assert meta["kv_dtype"] == "f16" and meta["layer"] == 1, meta
    k = np.load(os.path.join(d, "k.npy"))
    assert np.array_equal(k, k.astype(np.float16).astype(np.float32))
    runs = {}
    for name, extra in (("default", []), ("f16", ["--kv-dtype", "f16"]), ("f32", ["--kv-dtype", "f32"])):
        p = replay(d, str(tmp_path / name), {"method": "quest", "budget": 32}, extra)
        assert p.returncode == 0, p.stderr
        runs[name] = load(str(tmp_path / name))
    assert runs["default"]["stats"]["kv_dtype"] == "f16"
    assert np.array_equal(runs["default"]["out"], runs["f16"]["out"])
    assert np.array_equal(runs["default"]["selected"], runs["f16"]["selected"])
    assert runs["f32"]["stats"]["kv_dtype"] == "f32"


def test_traces_belong_to_their_run(tiny_llama, tmp_path):
    """run.json records the traced layer; a new run (--force) removes the
    previous run's traces (their files only: a user's file stays); a
    multi-request sample is said not to be traced. Before, the old run's
    traces stayed beside the new ones and nothing told them apart, and a
    multi-request sample was skipped without a word."""
    model = tiny_llama(n_ctx=2048)
    cfg = tmp_path / "c.json"

    def sweep(layer, *extra, tasks=None):
        cfg.write_text(json.dumps({"name": "t", "seed": 3, "methods": ["snapkv"], "budgets": [32], "tasks": tasks or [
            {"task": "needle", "words": [120], "depths": [0.5], "per_cell": 1, "max_new": 4}]}))
        return subprocess.run([BIN, "sweep", str(cfg), "--out", str(out), "-m", model, "--dump-trace", str(layer),
                               *extra], capture_output=True, text=True, timeout=120)

    out = tmp_path / "run"
    assert sweep(1).returncode == 0
    assert json.load(open(out / "run.json"))["dump_trace"] == 1
    (old,) = os.listdir(out / "traces")
    assert old.endswith("_L1")
    (out / "traces" / old / "notes.txt").write_text("mine")
    kept = tmp_path / "saved"  # a trace the user keeps elsewhere, linked into traces/
    kept.mkdir()
    for f in os.listdir(out / "traces" / old):
        (kept / f).write_bytes((out / "traces" / old / f).read_bytes())
    os.symlink(kept, out / "traces" / "link")
    p = sweep(0, "--force")
    assert p.returncode == 0, p.stderr
    assert json.load(open(out / "run.json"))["dump_trace"] == 0
    names = sorted(os.listdir(out / "traces"))
    assert len(names) == 3 and names[0].endswith("_L0") and names[1:] == sorted([old, "link"]), names
    assert os.listdir(out / "traces" / old) == ["notes.txt"]  # the user's file, nothing of the old trace
    assert "meta.json" in os.listdir(kept) and len(os.listdir(kept)) == 8  # not followed through the link
    p = sweep(0, "--force", tasks=[{"task": "scbench_kv_like", "lengths": [900], "samples": 1, "turns": 2,
                                    "mode": "multi_request"}])
    assert p.returncode == 0, p.stderr
    assert "--dump-trace: scbench_kv_like/" in p.stderr and "multi-request sample: not traced" in p.stderr
    assert sorted(os.listdir(out / "traces")) == sorted([old, "link"])


def test_traces_stay_in_their_run(tiny_llama, tmp_path):
    """A trace directory is one name right under traces/, whatever the sample
    id holds ('/' or '..'); a new run does not follow a traces/ that is a
    link; a resumed run keeps the traced layer of each earlier session. Before,
    an id "x/../../../ESCAPED" wrote its trace outside the run directory (and
    "doc/3" one level deeper, where --force never removed it), --force emptied
    the directory a linked traces/ pointed at, and --resume dropped dump_trace."""
    model = tiny_llama(n_ctx=2048)
    line = json.loads(open(os.path.join(os.path.dirname(__file__), "..", "fixtures", "scbench", "scbench_qa_eng.jsonl")).readline())
    data = tmp_path / "d.jsonl"
    rows = []
    for i, sid in enumerate(["x/../../../ESCAPED", "doc/3"]):
        rows.append(json.dumps(dict(line, id=sid, multi_turns=line["multi_turns"][:1])))
    data.write_text("\n".join(rows) + "\n")
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"name": "t", "seed": 1, "methods": ["full"], "tasks": [
        {"task": "scbench_qa_eng", "file": str(data)}]}))
    work = tmp_path / "a" / "b" / "c"
    work.mkdir(parents=True)
    out = work / "run"

    def sweep(*extra):
        return subprocess.run([BIN, "sweep", str(cfg), "--out", str(out), "-m", model, *extra],
                              capture_output=True, text=True, timeout=120)

    p = sweep("--dump-trace", "0")
    assert p.returncode == 0, p.stderr
    names = sorted(os.listdir(out / "traces"))
    assert len(names) == 2 and all("/" not in n and n.endswith("_L0") for n in names), names
    for n in names:
        assert "meta.json" in os.listdir(out / "traces" / n)
    assert sorted(os.listdir(tmp_path)) == ["a", "c.json", "d.jsonl"]  # nothing escaped
    assert sorted(os.listdir(work)) == ["run"]

    run = json.load(open(out / "run.json"))
    run["status"] = "interrupted"  # a finished run's resume would run nothing and record nothing
    (out / "run.json").write_text(json.dumps(run))
    p = sweep("--resume")
    assert p.returncode == 0, p.stderr
    run = json.load(open(out / "run.json"))
    assert run["dump_trace"] is None and run["earlier_sessions"][0]["dump_trace"] == 0

    kept = tmp_path / "kept"  # the user's traces, linked in as traces/
    os.rename(out / "traces", kept)
    os.symlink(kept, out / "traces")
    p = sweep("--force")
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(kept)) == names and all(
        "meta.json" in os.listdir(kept / n) for n in names)  # not followed
    # nor written through: a traced run refuses a linked traces/ (before, the
    # new traces went into the linked directory, beside the old ones)
    os.unlink(out / "traces")
    os.symlink(kept, out / "traces")
    for extra in (("--dry-run",), ()):
        p = sweep("--force", "--dump-trace", "0", *extra)
        assert p.returncode == 2 and "traces is a symbolic link" in p.stderr, p.stderr
        assert sorted(os.listdir(kept)) == names


def test_replay_replaces_all_or_nothing(traces, tmp_path):
    """A name in --out that is a directory stops replay before anything is
    replaced (exit 2); before, out.npy was replaced, then the rename onto the
    directory failed, leaving a half-new output set."""
    d = traces["gqa"][0]
    out = tmp_path / "o"
    assert replay(d, str(out), {"method": "quest", "budget": 64}).returncode == 0
    stale = (out / "out.npy").read_bytes()
    os.remove(out / "selected.npy")
    os.mkdir(out / "selected.npy")
    p = replay(d, str(out), {"method": "snapkv", "budget": 32})
    assert p.returncode == 2 and "selected.npy: is a directory" in p.stderr, p.stderr
    assert (out / "out.npy").read_bytes() == stale
    assert sorted(os.listdir(out)) == ["out.npy", "selected.npy", "stats.json"]


def _meta(d, **extra):
    with open(os.path.join(d, "meta.json")) as f:
        m = json.load(f)
    m.update(extra)
    with open(os.path.join(d, "meta.json"), "w") as f:
        json.dump(m, f)


OVERFLOW = [
    # (file, index, value, meta kv_dtype, --kv-dtype, the type and where it came from)
    ("k.npy", (0, 0, 0), 70000.0, "f16", None, "cache type f16 (from meta.json kv_dtype"),
    ("vnew.npy", (5, 1, 31), -65520.0, None, "f16", "cache type f16 (from --kv-dtype"),
    ("knew.npy", (2, 0, 7), 3.4e38, "bf16", None, "cache type bf16 (from meta.json kv_dtype"),
    ("v.npy", (299, 1, 0), 1e5, "f32", "f16", "cache type f16 (from --kv-dtype"),
]


@pytest.mark.parametrize("case", range(len(OVERFLOW)))
def test_values_out_of_range_of_the_cache_type(traces, tmp_path, case):
    """A K/V value that the cache type cannot hold (it rounds to infinity:
    |x| >= 65520 in f16) stops replay with exit 2 before anything is
    written, naming the file, element, value, type and where the type came
    from. Before, replay defaulted to the trace's kv_dtype, stored inf and
    wrote NaN/inf outputs with exit 0. --kv-dtype f32 replays such a trace."""
    name, at, value, meta_dt, flag, said = OVERFLOW[case]
    d = str(tmp_path / "t")

    def mutate(x):
        _set(x, name, at, value)
        if meta_dt:
            _meta(x, kv_dtype=meta_dt)

    bad_trace(traces["gqa"][0], d, mutate)
    out = tmp_path / "o"
    extra = ["--kv-dtype", flag] if flag else []
    p = replay(d, str(out), {"method": "quest", "budget": 64}, extra)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stderr.startswith("kvbench replay: ") and p.stderr.count("\n") == 1, p.stderr
    assert os.path.join(d, name) in p.stderr, p.stderr
    assert "element (%d, %d, %d)" % at in p.stderr, p.stderr
    assert "%g" % np.float32(value) in p.stderr, p.stderr
    assert said in p.stderr and "--kv-dtype f32" in p.stderr, p.stderr
    assert not out.exists()
    # the same trace in f32, and the largest values that still round to finite ones
    p = replay(d, str(out), {"method": "quest", "budget": 64}, ["--kv-dtype", "f32"])
    assert p.returncode == 0, p.stderr
    assert np.isfinite(load(str(out))["out"]).all()
    bad_trace(traces["gqa"][0], str(tmp_path / "edge"),
              lambda x: (_set(x, "k.npy", (0, 0, 0), 65519.0), _set(x, "vnew.npy", (0, 0, 0), -65504.0)))
    p = replay(str(tmp_path / "edge"), str(tmp_path / "oe"), {"method": "quest", "budget": 64}, ["--kv-dtype", "f16"])
    assert p.returncode == 0, p.stderr


def _sha256(path):
    import hashlib
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def test_replay_stats_name_the_trace_files_model_and_build(tiny_llama, tmp_path):
    """A sweep's trace names the model (name and sha256, as run.json), the
    commit that wrote it, and the task, sample and cell it traced; generate's
    names the model, the commit and its method's parameters. replay's stats.json holds the trace's absolute
    path, the sha256 of every file it read, the trace's provenance from
    meta.json, build_sha256 and the machine, as run.json does. Before,
    meta.json held only max_new, S, layer and kv_dtype, and stats.json the
    --trace path as typed (relative), without hashes, binary or machine.
    meta.json without the new keys (older traces) is still read."""
    model = tiny_llama(n_ctx=2048)
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"name": "t", "seed": 3, "methods": [{"method": "quest", "label": "q32"}],
                               "budgets": [32], "tasks": [
        {"task": "needle", "words": [120], "depths": [0.5], "per_cell": 1, "max_new": 6}]}))
    out = tmp_path / "run"
    p = subprocess.run([BIN, "sweep", str(cfg), "--out", str(out), "-m", model, "--dump-trace", "1"],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    run = json.load(open(out / "run.json"))
    (name,) = os.listdir(out / "traces")
    d = out / "traces" / name
    meta = json.load(open(d / "meta.json"))
    import csv
    (row,) = list(csv.DictReader(open(out / "samples.csv")))
    # the layer count read from the file by PyPI's gguf, not by kvbench
    import gguf
    reader = gguf.GGUFReader(model)
    n_layers = int(reader.fields["llama.block_count"].parts[-1][0])
    assert meta["model"] == {"name": run["model"]["name"], "sha256": run["model"]["sha256"],
                             "layers": n_layers}, meta
    assert meta["model"]["sha256"] == _sha256(model)
    assert meta["git_commit"] == run["git_commit"]
    assert (meta["task"], meta["sample"]) == (row["task"], row["sample"]) == ("needle", meta["sample"])
    assert name == "%s_%s_%s_L1" % (row["seq"], row["task"], row["sample"])
    assert meta["cell"]["method"] == "quest" and meta["cell"]["label"] == "q32" and meta["cell"]["budget"] == 32
    assert (meta["max_new"], meta["layer"], meta["kv_dtype"]) == (6, 1, "f16")

    # replay by a relative path
    p = subprocess.run([BIN, "replay", "--trace", os.path.join("run", "traces", name), "--method", "quest",
                        "--budget", "32", "--out", "o"], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    st = json.load(open(tmp_path / "o" / "stats.json"))
    assert st["trace_dir"] == os.path.realpath(d), st["trace_dir"]
    files = ["k.npy", "v.npy", "qwin.npy", "q.npy", "knew.npy", "vnew.npy", "meta.json"]
    assert st["trace_sha256"] == {f: _sha256(d / f) for f in files}, st["trace_sha256"]
    assert list(st["trace_sha256"]) == files
    for k in ("model", "git_commit", "task", "sample", "cell"):
        assert st["trace"][k] == meta[k], k
    assert st["build_sha256"] == _sha256(BIN) == run["build_sha256"]
    assert set(st["machine"]) == set(run["machine"]) and st["machine"]["host"] == run["machine"]["host"]

    # generate's trace: model, commit and the method that decoded it (its
    # queries and new keys follow that method's outputs); no task or sample.
    # Before, it named no method, so a trace of a rocketkv decode read as one
    # of Full KV's.
    g = tmp_path / "g"
    p = subprocess.run([BIN, "generate", "-m", model, "-p", "the cat sat on the mat", "-n", "4",
                        "--method", "quest", "--budget", "32",
                        "--dump-trace", "0", "--trace-dir", str(g)], capture_output=True, text=True, errors="replace",
                       timeout=120)
    assert p.returncode == 0, p.stderr
    gm = json.load(open(g / "meta.json"))
    assert gm["model"] == meta["model"] and gm["git_commit"] == run["git_commit"], gm
    assert not {"task", "sample"} & set(gm), gm
    assert gm["cell"]["method"] == "quest" and gm["cell"]["budget"] == 32, gm
    p = replay(str(g), str(tmp_path / "og"), {"method": "full"})
    assert p.returncode == 0, p.stderr
    st = json.load(open(tmp_path / "og" / "stats.json"))
    assert st["trace"]["model"] == meta["model"] and "task" not in st["trace"]
    assert st["trace"]["cell"] == gm["cell"]

    # replay checks skip_layers against model.layers, as a sweep and generate
    # check it against the model: at the layer count every layer would run Full
    # KV under the method's label. Before, replay replayed the traced layer as
    # Full KV without a word.
    for skip, rc in ((n_layers, 2), (n_layers - 1, 0)):
        o = tmp_path / ("os%d" % skip)
        p = replay(str(g), str(o), {"method": "quest", "budget": 32, "skip_layers": skip})
        assert p.returncode == rc, p.stderr
        if rc:
            assert "key 'skip_layers': %d, expected at most %d" % (skip, n_layers - 1) in p.stderr, p.stderr
            assert "model.layers" in p.stderr and not o.exists(), p.stderr
    # the traced layer must be one of them
    old = tmp_path / "old"
    bad_trace(str(g), str(old), lambda x: _write(os.path.join(x, "meta.json"), json.dumps(
        dict(gm, layer=n_layers)).encode()))
    p = replay(str(old), str(tmp_path / "ol"), {"method": "full"})
    assert p.returncode == 2 and "key 'layer': %d, but the model has layers 0..%d" % (n_layers, n_layers - 1) \
        in p.stderr, p.stderr

    # an older meta.json, without these keys: read, and stats.json says nothing of them
    old = tmp_path / "old"
    bad_trace(str(d), str(old), lambda x: _write(os.path.join(x, "meta.json"), json.dumps(
        {k: meta[k] for k in ("max_new", "S", "layer", "kv_dtype")}).encode()))
    p = replay(str(old), str(tmp_path / "oo"), {"method": "quest", "budget": 32})
    assert p.returncode == 0, p.stderr
    st = json.load(open(tmp_path / "oo" / "stats.json"))
    assert not {"model", "git_commit", "task", "sample", "cell"} & set(st["trace"])
    assert st["trace_sha256"]["meta.json"] == _sha256(old / "meta.json")

    # the new keys are checked like the others
    for bad, msg in ((dict(meta, model="m"), "key 'model': expected an object"),
                     (dict(meta, model={"name": "m"}), "missing required key 'sha256'"),
                     (dict(meta, task=3), "key 'task': expected a string"),
                     (dict(meta, cell=[1]), "key 'cell': expected an object")):
        bad_trace(str(d), str(old), lambda x: _write(os.path.join(x, "meta.json"), json.dumps(bad).encode()))
        o = tmp_path / "ob"
        p = replay(str(old), str(o), {"method": "quest", "budget": 32})
        assert p.returncode == 2 and msg in p.stderr and "meta.json" in p.stderr, (bad, p.stderr)
        assert not o.exists()


def _fidelity_numpy(d, sel, out, kept):
    """recall, mass_covered and out_rel_err of one traced layer, per step
    (mean over query heads), by methods.md §10 worked in float64 NumPy: the
    history is k.npy's rows and, for step i, the decode steps' K/V 0..i as the
    cache stores them (knew/vnew rounded to the trace's kv_dtype); the attended
    tokens are the replayed selection's slots mapped to positions (slot =
    position, or kept.npy's positions then L + the generated ones); the
    oracle's top-k is the k highest exact scores. Returns per-step lists and
    the smallest relative gap between the k-th and (k+1)-th exact score."""
    k0, v0 = np.load(os.path.join(d, "k.npy")), np.load(os.path.join(d, "v.npy"))
    q, kn, vn = (np.load(os.path.join(d, f)) for f in ("q.npy", "knew.npy", "vnew.npy"))
    dt = json.load(open(os.path.join(d, "meta.json")))["kv_dtype"]
    rnd = {"f32": np.float32, "f16": np.float16}[dt]
    kn, vn = kn.astype(rnd).astype(np.float64), vn.astype(rnd).astype(np.float64)
    L, Hkv, D = k0.shape
    N, Hq, _ = q.shape
    G = Hq // Hkv
    rec, mass, rel, gap = [], [], [], np.inf
    for i in range(N):
        K = np.concatenate([k0.astype(np.float64), kn[: i + 1]])
        V = np.concatenate([v0.astype(np.float64), vn[: i + 1]])
        r_, m_, e_ = [], [], []
        for h in range(Hq):
            g = h // G
            row = sel[i, h if sel.shape[1] == Hq else g]
            slots = row[row >= 0]
            if kept is None:
                pos = slots
            else:
                kr = kept[h if kept.shape[0] == Hq else g]
                kr = kr[kr >= 0]
                pos = np.where(slots < len(kr), kr[np.minimum(slots, len(kr) - 1)], L + slots - len(kr))
            att = np.zeros(L + i + 1, bool)
            att[pos] = True
            s = K[:, g] @ q[i, h].astype(np.float64) / np.sqrt(D)
            p = np.exp(s - s.max())
            p /= p.sum()
            k = int(att.sum())
            order = np.argsort(-s, kind="stable")
            r_.append(att[order[:k]].sum() / k)
            if k < len(s):
                a, b = s[order[k - 1]], s[order[k]]
                gap = min(gap, (a - b) / max(abs(a), 1e-30))
            m_.append(p[att].sum())
            o = p @ V[:, g]
            e_.append(np.linalg.norm(out[i, h].astype(np.float64) - o) / np.linalg.norm(o))
        rec.append(np.mean(r_))
        mass.append(np.mean(m_))
        rel.append(np.mean(e_))
    return rec, mass, rel, gap


@pytest.mark.parametrize("method", ["quest", "snapkv", "exact_topk"])
def test_fidelity_columns_match_numpy(tiny_llama, tmp_path, method):
    """samples.csv's recall, mass_covered and out_rel_err (docs/OUTPUTS.md:
    the mean over steps and layers) against NumPy: the sweep runs once per
    layer with --dump-trace (the same run each time: the rows must agree),
    each layer's trace is replayed with the cell's method (bit for bit the
    run's selections and outputs, docs/METHODS.md §9) and the instruments are
    worked from the trace (_fidelity_numpy), then averaged with every step of
    every layer weighted alike. Tolerance: relative 1e-5 (the columns are
    printed with %.6g: 5e-6) plus 1e-9 absolute (float64 sums in another
    order). Before this test nothing read the three columns: a wrapper that
    added recall into mass, or the fidelity history of layer 0 used for every
    layer, passed."""
    model = tiny_llama(n_ctx=2048)
    n_layer = 2
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"name": "t", "seed": 3, "methods": [method], "budgets": [32], "fidelity": True,
                               "tasks": [{"task": "needle", "words": [120], "depths": [0.5], "per_cell": 1,
                                          "max_new": 6}]}))
    got, per_step = None, {"recall": [], "mass_covered": [], "out_rel_err": []}
    for layer in range(n_layer):
        out = tmp_path / f"run{layer}"
        p = subprocess.run([BIN, "sweep", str(cfg), "--out", str(out), "-m", model, "--dump-trace", str(layer)],
                           capture_output=True, text=True, timeout=120)
        assert p.returncode == 0, p.stderr
        with open(out / "samples.csv", newline="") as f:
            (row,) = list(csv.DictReader(f))
        cols = {c: float(row[c]) for c in per_step}
        assert got is None or cols == got, (cols, got)
        got = cols
        (d,) = [str(x) for x in (out / "traces").iterdir()]
        assert json.load(open(os.path.join(d, "meta.json")))["model"]["layers"] == n_layer
        p = replay(d, str(tmp_path / f"rep{layer}"), {"method": method, "budget": 32})
        assert p.returncode == 0, p.stderr
        r = load(str(tmp_path / f"rep{layer}"))
        rec, mass, rel, gap = _fidelity_numpy(d, r["selected"], r["out"], r["kept"])
        assert gap > 1e-6, gap  # no near tie at the oracle's boundary: the top-k is the same in any order
        per_step["recall"] += rec
        per_step["mass_covered"] += mass
        per_step["out_rel_err"] += rel
    assert len(per_step["recall"]) == n_layer * int(row["new_tokens"]), (len(per_step["recall"]), row["new_tokens"])
    for c, v in per_step.items():
        want = float(np.mean(v))
        assert abs(got[c] - want) <= 1e-9 + 1e-5 * abs(want), (c, got[c], want, v)
    assert 0 < got["mass_covered"] < 1 and got["out_rel_err"] > 1e-4, got
    # Exact-TopK per head is the oracle: recall 1; the others miss some
    assert got["recall"] == 1 if method == "exact_topk" else 0 < got["recall"] < 1, got
