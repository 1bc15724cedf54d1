"""Config, --set and command-line values checked before anything runs (the
audit of 2026-12-05, stop 61; docs/RELIABILITY.md): a bad value exits 2 with a
message naming where it came from and writes nothing; a value the docs allow
behaves as the docs define it.

Expected values come from the docs (CONFIG.md, METHODS.md, DESIGN.md), not
from the output of the code under test.
"""
import csv
import json
import os
import resource
import subprocess

import pytest

TIMING = {"prefill_ms", "decode_ms_per_token", "attn_ms_per_token"}
SELECTING = ["exact_topk", "quest", "sparq", "hybrid", "rocketkv", "rocketkv_mt"]


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    # 2 layers, 4 query heads, 2 KV heads, head dim 16
    return tiny_llama(n_ctx=2048)


def write_config(path, **over):
    cfg = {
        "name": "t",
        "seed": 5,
        "tasks": [{"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1, "max_new": 4}],
        "methods": ["full"],
    }
    cfg.update(over)
    path.write_text(json.dumps(cfg))
    return str(path)


def _asan_build(binary):
    """Whether binary was built with AddressSanitizer (it links __asan_init)."""
    with open(binary, "rb") as f:
        return b"__asan_init" in f.read()


def run(kvbench_bin, *args, env=None, limit_as=None, timeout=300):
    def pre():
        if limit_as:
            resource.setrlimit(resource.RLIMIT_AS, (limit_as, limit_as))
    args = [a if isinstance(a, bytes) else str(a) for a in args]
    return subprocess.run([kvbench_bin, *args], capture_output=True, text=True, errors="replace",
                          timeout=timeout, env=env, preexec_fn=pre if limit_as else None)


def rows(path, drop=TIMING | {"budget"}):
    with open(path, newline="") as f:
        return [{k: v for k, v in r.items() if k not in drop} for r in csv.DictReader(f)]


# ---- 1. budgets above any context -------------------------------------------------------


def test_budget_above_the_context_runs_as_the_whole_context(kvbench_bin, tiny, tmp_path):
    """METHODS.md: a row holding no more than the budget is kept whole, top-k
    takes min(B, n), QUEST attends every page when the cache has no more
    pages than the budget; so every budget at or above twice the context
    (hybrid's k is B/2) selects the same. Budgets up to 2^30 are allowed
    (CONFIG.md, METHODS.md) and must cost memory by the cache, not by the
    budget. Before, the selection buffers were sized by the budget: 2^24 ran
    out of memory (4 GiB of address space here), 2^30 was refused in
    `budgets` though `budget` allowed it."""
    cfg = write_config(tmp_path / "c.json", methods=SELECTING + ["snapkv"],
                       budgets=[4096, 1 << 24, 1 << 30])
    # the address-space limit catches a budget-sized buffer; an AddressSanitizer
    # build (make sanitize) reserves terabytes of shadow address space at start
    # and cannot run under any such limit, so there the run goes without it (the
    # plain build's run, make test, keeps it)
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny,
            limit_as=None if _asan_build(kvbench_bin) else 4 << 30)
    assert p.returncode == 0, p.stderr[-2000:]
    got = {}
    for r in rows(tmp_path / "o" / "samples.csv", drop=TIMING):
        b = r.pop("budget")
        got.setdefault(b, []).append(r)
    assert sorted(got) == sorted(str(b) for b in (4096, 1 << 24, 1 << 30))
    assert got[str(1 << 24)] == got["4096"]
    assert got[str(1 << 30)] == got["4096"]


def _passes(kvbench_bin, cfg, model, limit, tmp_path):
    env = dict(os.environ, KVBENCH_MEM_LIMIT=str(limit))
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "never", "-m", model, "--dry-run", env=env)
    assert p.returncode in (0, 2), p.stderr
    assert p.returncode == 0 or "of memory is available" in p.stderr, p.stderr
    return p.returncode == 0, p.stderr


def _least_passing(kvbench_bin, cfg, model, tmp_path):
    lo, hi = 1, 1 << 26
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _passes(kvbench_bin, cfg, model, mid, tmp_path)[0]:
            hi = mid
        else:
            lo = mid
    return hi


def test_memory_check_counts_selection_buffers(kvbench_bin, tiny, tmp_path):
    """DESIGN.md: the check before the run counts the K/V caches and a
    method's selection buffers, which methodset.h bounds by layers x Hq x
    min(max(B, 16), 2 x tokens) x 3 int32 for a method that selects per step,
    0 for SnapKV. Before, the selection buffers were not counted (and were
    sized by the budget)."""
    tasks = [{"task": "needle", "words": [200], "depths": [0.5], "per_cell": 1, "max_new": 4}]
    dense = write_config(tmp_path / "d.json", tasks=tasks, methods=[{"method": "snapkv", "budget": 1 << 30}])
    sel = write_config(tmp_path / "s.json", tasks=tasks, methods=[{"method": "exact_topk", "budget": 1 << 30}])
    base = _least_passing(kvbench_bin, dense, tiny, tmp_path)
    ok, err = _passes(kvbench_bin, dense, tiny, 1, tmp_path)
    tokens = int(err.split("a context of ")[1].split()[0])
    extra = 2 * 4 * (2 * tokens) * 3 * 4  # layers, Hq, slots, arrays, bytes
    ok, err = _passes(kvbench_bin, sel, tiny, base + extra - 64, tmp_path)
    assert not ok and "selection buffers" in err, err
    assert _passes(kvbench_bin, sel, tiny, base + extra + 64, tmp_path)[0]
    assert not (tmp_path / "never").exists()


# ---- 2. skip_layers against the model ---------------------------------------------------


@pytest.mark.parametrize("dry", [True, False])
def test_skip_layers_must_leave_the_method_a_layer(kvbench_bin, tiny, tmp_path, dry):
    """METHODS.md: layers below skip_layers run Full KV. The tiny model has 2
    layers: skip_layers 2 (or 1000) would make every layer Full KV under the
    method's label; refused before the run, naming the key and the model's
    layer count. Before, it ran silently as Full KV."""
    for skip in (2, 1000):
        cfg = write_config(tmp_path / "c.json", methods=[{"method": "quest", "label": "q", "skip_layers": skip}],
                           budgets=[32])
        out = tmp_path / "o"
        p = run(kvbench_bin, "sweep", cfg, "--out", out, "-m", tiny, *(["--dry-run"] if dry else []))
        assert p.returncode == 2, p.stderr
        assert "key 'skip_layers'" in p.stderr and f"{skip}, expected at most 1" in p.stderr, p.stderr
        assert "the model has 2 layers" in p.stderr and "c.json" in p.stderr, p.stderr
        assert not out.exists()
    cfg = write_config(tmp_path / "c.json", methods=[{"method": "quest", "skip_layers": 1}], budgets=[32])
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "ok", "-m", tiny, *(["--dry-run"] if dry else []))
    assert p.returncode == 0, p.stderr


def test_generate_skip_layers_against_the_model(kvbench_bin, tiny):
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello there", "-n", "3", "--method", "quest",
            "--budget", "32", "--set", "skip_layers=2")
    assert p.returncode == 2, p.stderr
    assert "key 'skip_layers'" in p.stderr and "the model has 2 layers" in p.stderr, p.stderr
    assert p.stdout == ""
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello there", "-n", "3", "--method", "quest",
            "--budget", "32", "--set", "skip_layers=1")
    assert p.returncode == 0, p.stderr


@pytest.mark.parametrize("bad,msg", [("skip_layers=2", "key 'skip_layers': 2, expected at most 1"),
                                     ("r=1000", "key 'r': 1000 exceeds the model's head dim")])
def test_generate_checks_parameters_before_the_work(kvbench_bin, tiny, bad, msg):
    """generate refuses a parameter the model cannot take before it plans
    memory or prefills (seconds for a long prompt). KVBENCH_MEM_LIMIT=1K makes
    the memory check, which comes before the prefill, fail: the parameter's
    error must come first. Before, methodset_build found it after the prefill."""
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello there", "-n", "3", "--method", "hybrid",
            "--budget", "32", "--set", bad, env={**os.environ, "KVBENCH_MEM_LIMIT": "1K"})
    assert p.returncode == 2, p.stderr
    assert msg in p.stderr and "memory" not in p.stderr, p.stderr


# ---- 3. --set, generate --set and replay --param read as config files are --------------


SET_CASES = [
    ('latency={"contexts":[1024],"contexts":[99999999]}', "key 'contexts' appears twice"),
    ('methods=[{"method":"full","label":"a","label":"b"}]', "key 'label' appears twice in [0]"),
    ('name="ab\\u0000cd"', "\\u0000 in a string is not supported"),
    (b'methods=[{"method":"full","label":"a\xffb"}]', "=...: byte 28 (0xff) is not valid UTF-8"),
    (b'description=a\xffb', "=...: byte 1 (0xff) is not valid UTF-8"),
]


@pytest.mark.parametrize("value,msg", SET_CASES)
def test_set_values_checked_as_config_files(kvbench_bin, tiny, tmp_path, value, msg):
    """CONFIG.md: a key twice, \\u0000 and bytes that are not UTF-8 are errors
    in a config file; a --set value is read the same way. Before, --set took
    the first of two keys, cut a string at \\u0000 and wrote a raw 0xff byte
    into samples.csv."""
    cfg = write_config(tmp_path / "c.json")
    out = tmp_path / "o"
    p = run(kvbench_bin, "sweep", cfg, "--out", out, "-m", tiny, "--set", value)
    assert p.returncode == 2, p.stderr
    key = (value.decode("latin-1") if isinstance(value, bytes) else value).split("=")[0]
    assert f"--set {key}" in p.stderr and msg in p.stderr, p.stderr
    assert not out.exists()


@pytest.mark.parametrize("opt", ["generate", "replay"])
def test_generate_set_and_replay_param_checked(kvbench_bin, tiny, tmp_path, opt):
    cases = [('gqa="per\\u0000head"', "\\u0000 in a string is not supported"),
             (b'label=a\xff', "=...: byte 1 (0xff) is not valid UTF-8"),
             ('kernel_by_length=[[8,7]]', None)]
    for value, msg in cases:
        if opt == "generate":
            args = ["generate", "-m", tiny, "-p", "hi", "-n", "2", "--method", "snapkv", "--budget", "64",
                    "--set", value]
            flag = "--set"
        else:
            args = ["replay", "--trace", tmp_path / "none", "--out", tmp_path / "r", "--method", "snapkv",
                    "--budget", "64", "--param", value]
            flag = "--param"
        p = run(kvbench_bin, *args)
        if msg is None:  # valid: generate runs; replay gets past the value to the (missing) trace
            if opt == "generate":
                assert p.returncode == 0, p.stderr
            else:
                assert p.returncode == 2 and "none/k.npy: cannot open" in p.stderr, p.stderr
            continue
        assert p.returncode == 2, p.stderr
        key = (value.decode("latin-1") if isinstance(value, bytes) else value).split("=")[0]
        assert f"{flag} {key}" in p.stderr and msg in p.stderr, p.stderr
        assert p.stdout == "" and not (tmp_path / "r").exists()


# ---- 4. latency contexts that fit to the same length --------------------------------------


def test_latency_contexts_fitting_to_one_length(kvbench_bin, tiny, tmp_path):
    """PERFORMANCE.md / CONFIG.md: a context at the model's limit is fitted to
    n_ctx - decode_tokens. The tiny model has 2048 tokens: with 16 decode
    tokens 2040 and 2045 both become 2032. Measuring it twice gave two rows
    of one (method, budget, context); refused before anything runs, naming
    both values and the length. Before, bench methods wrote both rows."""
    want = "contexts 2040 and 2045 both fit to 2032 tokens"
    out = tmp_path / "bm"
    p = run(kvbench_bin, "bench", "methods", "-m", tiny, "--contexts", "2045,2040", "--methods", "full",
            "--fill", "random", "--reps", "1", "--decode-tokens", "16", "--out", out)
    assert p.returncode == 2, p.stderr
    assert "--contexts: contexts 2045 and 2040 both fit to 2032 tokens" in p.stderr, p.stderr
    assert not out.exists()
    p = run(kvbench_bin, "bench", "engine", "-m", tiny, "--decode-ctx", "2040,2045", "--prefill", "16",
            "--decode-tokens", "16", "--reps", "1")
    assert p.returncode == 2 and "--decode-ctx" in p.stderr and want in p.stderr, p.stderr
    cfg = write_config(tmp_path / "c.json", latency={"contexts": [2040, 2045], "decode_tokens": 16})
    for dry in (["--dry-run"], []):
        p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, *dry)
        assert p.returncode == 2 and "key 'latency'" in p.stderr and want in p.stderr, p.stderr
        assert not (tmp_path / "o").exists()
    # distinct after fitting: both run
    p = run(kvbench_bin, "bench", "methods", "-m", tiny, "--contexts", "2000,2045", "--methods", "full",
            "--fill", "random", "--reps", "1", "--decode-tokens", "16", "--out", out)
    assert p.returncode == 0, p.stderr
    with open(out / "latency.csv", newline="") as f:
        assert sorted(int(r["context"]) for r in csv.DictReader(f)) == [2000, 2032]


# ---- 5. repeated task lengths ----------------------------------------------------------------


@pytest.mark.parametrize("task,bad", [
    ({"task": "needle", "words": [60, 60], "depths": [0.5], "per_cell": 1, "max_new": 4}, "key 'words': 60 appears twice"),
    ({"task": "needle", "words": {"min": 20, "max": 22, "n": 4}, "depths": [0.5], "per_cell": 1, "max_new": 4},
     "key 'words': n = 4 lengths from 20 to 22 would repeat some: expected n <= 3"),
    ({"task": "niah_single_1", "lengths": [300, 300], "samples": 1}, "key 'lengths': 300 appears twice"),
    ({"task": "scbench_kv_like", "lengths": [1024, 1024], "samples": 1, "turns": 2},
     "key 'lengths': 1024 appears twice"),
])
def test_repeated_task_lengths_refused(kvbench_bin, tiny, tmp_path, task, bad):
    """DATASETS.md: each value of `words` / `lengths` makes its own samples,
    whose ids hold the value (needle w60_d0_0): a value twice made the same
    samples twice with the same ids, counted twice in n and ci95. Refused as
    `budgets` refuses a value twice. Before, they ran."""
    cfg = write_config(tmp_path / "c.json", tasks=[task])
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run")
    assert p.returncode == 2, p.stderr
    assert "tasks[0]" in p.stderr and bad in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


# ---- 6. an output file named as a directory ----------------------------------------------


@pytest.mark.parametrize("cmd", ["logits", "prompts"])
def test_output_file_path_ending_in_slash(kvbench_bin, tiny, tmp_path, cmd):
    """README/OUTPUTS.md: a bad output path is refused before the work, exit 2.
    A file path ending in '/' names a directory. Before, `logits --out
    DIR/ld/` computed the logits, then failed (exit 1) creating its file."""
    for out in (f"{tmp_path}/ld/", f"{tmp_path}/", f"{tmp_path}/."):
        if cmd == "logits":
            args = ["logits", "-m", tiny, "--tokens", "1 2", "--out", out]
        else:
            cfg = write_config(tmp_path / "c.json")
            args = ["prompts", cfg, "--counter", "bytes4", "--out", out]
        p = run(kvbench_bin, *args)
        assert p.returncode == 2, (out, p.stderr)
        assert f"--out {out}" in p.stderr and ("names a directory" in p.stderr or "is a directory" in p.stderr), p.stderr
        assert not (tmp_path / "ld").exists()


# ---- 7. empty paths, and the haystack named as the config names it ---------------------------


@pytest.mark.parametrize("over,msg", [
    ({"haystack": ""}, "key 'haystack': an empty path"),
    ({"data_dir": ""}, "key 'data_dir': an empty path"),
    ({"tasks": [{"task": "needle", "words": [60], "prompts": ""}]}, "tasks[0]: task config: key 'prompts': an empty path"),
    ({"tasks": [{"task": "qa_1", "lengths": [1024], "file": ""}]}, "tasks[0]: task config: key 'file': an empty path"),
    ({"tasks": [{"task": "scbench_kv", "file": ""}]}, "tasks[0]: task config: key 'file': an empty path"),
    ({"tasks": [{"task": "longbench", "dir": ""}]}, "tasks[0]: task config: key 'dir': an empty path"),
])
def test_empty_paths_refused(kvbench_bin, tiny, tmp_path, over, msg):
    """An empty path is no file: before, "haystack": "" (and "prompts",
    "file") read the directory "" ("tasks[0]: : cannot open directory") and
    "data_dir": "" silently meant no data_dir. Refused naming the key."""
    cfg = write_config(tmp_path / "c.json", **over)
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run")
    assert p.returncode == 2 and msg in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


def test_haystack_errors_name_the_config_key(kvbench_bin, tiny, tmp_path):
    """A config's haystack folder without .txt files was reported as
    "--haystack DIR", an option the sweep does not have."""
    hay = tmp_path / "hay"
    hay.mkdir()
    (hay / "notes.md").write_text("words " * 200)
    cfg = write_config(tmp_path / "c.json", haystack=str(hay))
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run")
    assert p.returncode == 2, p.stderr
    assert f"tasks[0]: key 'haystack' {hay}: no .txt files" in p.stderr and "--haystack" not in p.stderr, p.stderr
    p = run(kvbench_bin, "prompts", cfg, "--counter", "bytes4", "--haystack", hay)
    assert p.returncode == 2 and f"--haystack {hay}: no .txt files" in p.stderr, p.stderr


def test_replay_empty_trace_path(kvbench_bin, tmp_path):
    """`replay --trace ""` read /k.npy, /v.npy ... from the root directory."""
    p = run(kvbench_bin, "replay", "--trace", "", "--out", tmp_path / "r", "--method", "full")
    assert p.returncode == 2 and "--trace: an empty path" in p.stderr and "/k.npy" not in p.stderr, p.stderr
    assert not (tmp_path / "r").exists()


# ---- 8. an empty model path -------------------------------------------------------------


def test_empty_model_path_refused(kvbench_bin, tiny, tmp_path):
    """CONFIG.md: the model is --model, else the config's model, else
    $KVBENCH_MODEL, else the default. An empty one is not a model: before,
    `sweep -m ""` and "model": "" ran the default model."""
    cfg = write_config(tmp_path / "c.json")
    for args, msg in [(["-m", ""], "--model: an empty path"),
                      (["--set", 'model=""'], "key 'model': an empty path")]:
        p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "--dry-run", *args)
        assert p.returncode == 2 and msg in p.stderr, p.stderr
        assert not (tmp_path / "o").exists()
    cfg = write_config(tmp_path / "c.json", model="")
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "--dry-run")
    assert p.returncode == 2 and "key 'model': an empty path" in p.stderr, p.stderr
    for args in (["generate", "-m", "", "-p", "hi", "-n", "2"],
                 ["logits", "-m", "", "--tokens", "1 2", "--out", tmp_path / "l.npy"]):
        p = run(kvbench_bin, *args)
        assert p.returncode == 2 and "an empty model path" in p.stderr and p.stdout == "", p.stderr
    assert not (tmp_path / "l.npy").exists()


# ---- 9. plot --formats ---------------------------------------------------------------------


@pytest.mark.parametrize("value,item", [("png,pdf", "unknown format 'pdf'"), ("jpgpng", "unknown format 'jpgpng'"),
                                        ("pngx,svg", "unknown format 'pngx'"), ("png,svg2", "unknown format 'svg2'"),
                                        ("svg;rm", "unknown format 'svg;rm'"), ("png,", "an empty item"),
                                        ("png,png", "a second 'png'"), ("", "an empty item")])
def test_plot_formats_is_a_list_of_png_and_svg(kvbench_bin, tmp_path, value, item):
    """README: `plot RUN [--formats png,svg]`. Before, any value holding the
    letters png or svg passed ("png,pdf", "jpgpng", "svg;rm" drew both or
    one format, exit 0)."""
    p = run(kvbench_bin, "plot", tmp_path, "--formats", value)
    assert p.returncode == 2 and f"--formats '{value}': {item}" in p.stderr, p.stderr
    assert not (tmp_path / "plots").exists()
    for good in ("png", "svg", "svg,png"):  # accepted: plot goes on to the run directory
        p = run(kvbench_bin, "plot", tmp_path, "--formats", good)
        assert "--formats" not in p.stderr and "neither summary.csv nor latency.csv" in p.stderr, p.stderr


# ---- 10. numbers that are not JSON, integers beyond 2^53 -----------------------------------


@pytest.mark.parametrize("num,why", [("07", "a leading zero"), ("00", "a leading zero"), ("-07", "a leading zero"),
                                     ("1.", "not a JSON number"), ("1.e5", "not a JSON number"),
                                     ("9007199254740993", "beyond 2^53"),
                                     ("123456789012345678901", "beyond 2^53")])
def test_numbers_must_be_json_numbers(kvbench_bin, tiny, tmp_path, num, why):
    """RFC 8259 numbers: no leading zero, digits after '.'. cJSON reads 07 as
    7 and 1. as 1, which Python's json refuses: one config, two meanings.
    CONFIG.md: seed <= 2^53; 9007199254740993 is no double, and it became
    2^53 silently. Refused naming the file, line and column (and for --set
    the option)."""
    text = '{"name": "t",\n "seed": %s,\n "tasks": [{"task": "needle", "words": [60], "depths": [0.5], ' \
           '"per_cell": 1, "max_new": 4}], "methods": ["full"]}' % num
    (tmp_path / "c.json").write_text(text)
    p = run(kvbench_bin, "sweep", tmp_path / "c.json", "--out", tmp_path / "o", "-m", tiny, "--dry-run")
    assert p.returncode == 2 and f"c.json:2:10: the number {num}: {why}" in p.stderr, p.stderr
    cfg = write_config(tmp_path / "d.json")
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run", "--set", f"seed={num}")
    assert p.returncode == 2 and f"--set seed={num}: the number {num}: {why}" in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


def test_json_numbers_at_the_limits_accepted(kvbench_bin, tiny, tmp_path):
    for num in ("9007199254740992", "0", "-0", "10", "1.5e1"):
        text = '{"name": "t", "seed": %s, "tasks": [{"task": "needle", "words": [60], "depths": [0.5], ' \
               '"per_cell": 1, "max_new": 4}], "methods": ["full"]}' % num
        (tmp_path / "c.json").write_text(text)
        p = run(kvbench_bin, "sweep", tmp_path / "c.json", "--out", tmp_path / "o", "-m", tiny, "--dry-run")
        assert p.returncode == 0, (num, p.stderr)


# ---- 11. the --set note names only the --set that made the failing value --------------------


def test_set_note_blames_only_its_own_value(kvbench_bin, tiny, tmp_path):
    """CONFIG.md: an error about a key that an override replaced ends with
    "(the value comes from --set KEY=VALUE)". The file's methods[0] has its
    own "budgets": [0]; --set budgets=[64] replaced the top-level budgets
    only. Before, the error was blamed on --set budgets=[64]."""
    cfg = write_config(tmp_path / "c.json", methods=[{"method": "quest", "budgets": [0]}])
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run", "--set", "budgets=[64]")
    assert p.returncode == 2 and "methods[0]: key 'budgets[0]'" in p.stderr, p.stderr
    assert "comes from --set" not in p.stderr, p.stderr
    # a value that does come from --set is still named
    cfg = write_config(tmp_path / "c.json")
    for value, where in [("budgets=[0]", ": key 'budgets[0]'"),
                         ('methods=[{"method":"quest","budget":0}]', ": methods[0]: method 'quest': key 'budget'"),
                         ('latency={"contexts":[5]}', ": latency: key 'contexts[0]'")]:
        p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run", "--set", value)
        assert p.returncode == 2 and where in p.stderr, p.stderr
        assert p.stderr.rstrip().endswith(f"(the value comes from --set {value})"), p.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value,where", [
    ('tasks=[{"task":"nosuch"}]', ": tasks[0]: unknown task 'nosuch'"),
    ('latency={"contexts":[4096]}', ": key 'latency': context 4096 + 16 decode tokens does not fit"),
    ("haystack=nowhere", ": tasks[0]: key 'haystack': nowhere: cannot open directory"),
    ('methods=[{"method":"hybrid","budget":32,"r":1000}]', ": methods entry 'hybrid': key 'r': 1000 exceeds"),
])
def test_set_note_on_errors_found_against_the_model(kvbench_bin, tiny, tmp_path, value, where):
    """CONFIG.md: an error in a top-level key's value that --set replaced ends
    with "(the value comes from --set KEY=VALUE)", also when the sweep finds
    it after reading the config: against the task registry and haystack (the
    samples), the model's context and head dim. Before, only the errors of
    the config reader had the note, and these blamed the file alone."""
    cfg = write_config(tmp_path / "c.json")
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run", "--set", value)
    assert p.returncode == 2 and where in p.stderr, p.stderr
    assert p.stderr.rstrip().endswith(f"(the value comes from --set {value})"), p.stderr
    assert not (tmp_path / "o").exists()


def test_set_note_names_where_the_value_came_from(kvbench_bin, tiny, tmp_path):
    """The note's edges (CONFIG.md): the file's own haystack is not blamed on
    --set tasks, and an error in the data of a task --set tasks gave is."""
    cfg = write_config(tmp_path / "c.json", haystack="nowhere")
    p = run(kvbench_bin, "sweep", cfg, "--out", tmp_path / "o", "-m", tiny, "--dry-run", "--set",
            'tasks=[{"task":"needle","words":[60],"depths":[0.5],"per_cell":1,"max_new":4}]')
    assert p.returncode == 2 and "key 'haystack': nowhere" in p.stderr and "comes from --set" not in p.stderr, p.stderr
    (tmp_path / "lb" / "data").mkdir(parents=True)
    (tmp_path / "lb" / "data" / "trec.jsonl").write_text('{"input": 07}\n')
    value = 'tasks=[{"task":"longbench","dir":"%s","subtasks":["trec"],"prompts":"kvbench"}]' % (tmp_path / "lb")
    p = run(kvbench_bin, "sweep", write_config(tmp_path / "d.json"), "--out", tmp_path / "o", "-m", tiny,
            "--dry-run", "--set", value)
    assert p.returncode == 2 and "trec.jsonl:1: column 11: the number 07" in p.stderr, p.stderr
    assert p.stderr.rstrip().endswith(f"(the value comes from --set {value})"), p.stderr


def test_prompts_reads_paths_as_the_sweep(kvbench_bin, tiny, tmp_path):
    """`prompts CONFIG.json` prints the samples the sweep runs, so it reads the
    config's paths as the sweep does: an empty "data_dir" or "haystack" is
    refused naming the key. Before, prompts took "data_dir": "" for unset
    (the sweep refuses it) and blamed "--haystack" for the config's key."""
    for key in ("data_dir", "haystack"):
        cfg = write_config(tmp_path / f"{key}.json", **{key: ""})
        p = run(kvbench_bin, "prompts", cfg, "--counter", "bytes4")
        assert p.returncode == 2 and f"key '{key}'" in p.stderr and "empty path" in p.stderr, (key, p.stderr)
        assert "--haystack" not in p.stderr and p.stdout == "", (key, p.stderr)
        s = run(kvbench_bin, "sweep", cfg, "-m", tiny, "--dry-run")
        assert s.returncode == 2 and f"key '{key}'" in s.stderr, (key, s.stderr)
