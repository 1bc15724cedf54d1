"""Every subcommand's error paths: bad usage and bad input exit with code 2,
print a message naming the option, file, key or line and what was expected,
and write no output file. Model-free where possible (a tiny random GGUF)."""
import json
import os
import re
import subprocess

import pytest
from longpath import long_path


def run(kvbench_bin, *args, env=None, timeout=120):
    e = dict(os.environ)
    if env:
        e.update(env)
    return subprocess.run([kvbench_bin, *map(str, args)], capture_output=True, text=True,
                          timeout=timeout, env=e)


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    return tiny_llama(n_ctx=512)


@pytest.fixture(scope="module")
def broken(tmp_path_factory):
    import tinymodel
    d = tmp_path_factory.mktemp("broken")
    out = {}
    for kind in ("arch", "missing_tensor", "wrong_shape", "missing_key", "key_type", "rms_eps",
                 "token_type", "kv_heads", "odd_head_dim", "rope_freqs", "rope_dims", "value_length",
                 "context_zero", "vocab_zero", "unsupported_type"):
        p = d / f"{kind}.gguf"
        tinymodel.write_broken_llama(p, kind)
        out[kind] = str(p)
    # engine.md §2 gives these two no default (llama.cpp requires them too)
    for kind, key in (("no_context", "llama.context_length"),
                      ("no_rms_eps", "llama.attention.layer_norm_rms_epsilon")):
        p = d / f"{kind}.gguf"
        tinymodel.write_broken_llama(p, "missing_key", key=key)
        out[kind] = str(p)
    trunc = d / "trunc.gguf"
    good = d / "good.gguf"
    tinymodel.write_tiny_llama(good)
    data = good.read_bytes()
    trunc.write_bytes(data[: len(data) // 2])
    out["truncated"] = str(trunc)
    garbage = d / "garbage.gguf"
    garbage.write_bytes(b"not a gguf file at all")
    out["garbage"] = str(garbage)
    # no tensors, and the file (69 bytes) ends before its data section's
    # aligned start (byte 96): the copy of the data section for huge pages
    # computed 69 - 96 bytes and read far past the map (a segfault; found by
    # fuzz_gguf on 2026-12-05)
    import struct
    def gstr(b):
        return struct.pack("<Q", len(b)) + b
    short = d / "no_tensors_short.gguf"
    short.write_bytes(b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstr(b"general.architecture") +
                      struct.pack("<I", 8) + gstr(b"llama"))
    assert short.stat().st_size == 69
    out["no_tensors_short"] = str(short)
    return out


def test_top_level(kvbench_bin):
    p = run(kvbench_bin)
    assert p.returncode == 2 and "usage" in p.stderr
    p = run(kvbench_bin, "frobnicate")
    assert p.returncode == 2 and "unknown command 'frobnicate'" in p.stderr
    assert run(kvbench_bin, "--help").returncode == 0
    p = run(kvbench_bin, "help")
    assert p.returncode == 0 and "--version" in p.stdout
    p = run(kvbench_bin, "--version")
    # the version and the commit the binary was built from (run.json's git_commit)
    assert p.returncode == 0 and re.fullmatch(r"kvbench \d+\.\d+\.\d+ \(commit \S+\)\n", p.stdout), p.stdout


@pytest.mark.parametrize("cmd", ["sweep", "generate", "info", "replay", "score", "bench", "plot",
                                 "merge", "prompts", "tokenize", "logits"])
def test_every_command_has_help(kvbench_bin, cmd):
    p = run(kvbench_bin, cmd, "--help")
    assert p.returncode == 0 and "usage" in (p.stdout + p.stderr).lower()


MODEL_ERRORS = {
    "arch": "architecture 'gpt9' is not supported",
    "missing_tensor": "missing tensor 'blk.0.attn_q.weight'",
    "wrong_shape": "tensor 'blk.0.attn_k.weight' has shape",
    "missing_key": "missing metadata key 'llama.embedding_length'",
    "no_context": "missing metadata key 'llama.context_length'",
    "no_rms_eps": "missing metadata key 'llama.attention.layer_norm_rms_epsilon'",
    "key_type": "key llama.attention.layer_norm_rms_epsilon has type string",
    "rms_eps": "llama.attention.layer_norm_rms_epsilon: expected a number in (0, 1), got 2",
    "token_type": "tokenizer.ggml.token_type[5] = 9, expected a token type 0..6",
    # engine.md §2 / model.c: kv heads must divide heads, head dims be even, rope_freqs > 0,
    # n_rot = head dim
    "kv_heads": "inconsistent hyperparameters (layers 2, embd 64, ff 96, heads 4, kv heads 3",
    "odd_head_dim": "head dims key 15 / value 15: expected equal and even",
    "rope_freqs": ("rope_freqs.weight[", "expected > 0"),  # the first rescaled dim is negative
    "rope_dims": "rope.dimension_count 8 != head dim 16",
    "value_length": "head dims key 16 / value 8: expected equal and even",  # GGUF.md: equal
    "context_zero": "(layers 2, embd 64, ff 96, heads 4, kv heads 2, context 0)",
    "vocab_zero": "vocabulary size must be positive",
    "unsupported_type": "'blk.0.attn_q.weight' has type Q8_1, which kvbench cannot compute with",
    "truncated": "",
    "garbage": "",
    "no_tensors_short": "missing metadata key 'llama.block_count'",
}


@pytest.mark.parametrize("kind", sorted(MODEL_ERRORS))
def test_bad_models(kvbench_bin, broken, kind, tmp_path):
    path = broken[kind]
    for args in (["generate", "-m", path, "-p", "hi", "-n", "2"],
                 ["logits", "-m", path, "--tokens", "1,2", "--out", tmp_path / "l.npy"],
                 ["bench", "engine", "-m", path, "--prefill", "8", "--decode-ctx", "8"]):
        p = run(kvbench_bin, *args)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        want = MODEL_ERRORS[kind]
        for w in (want,) if isinstance(want, str) else want:
            assert path in p.stderr and w in p.stderr, p.stderr
        assert p.stderr.count(path) == 1, p.stderr   # the file named once, not once per layer
    assert not (tmp_path / "l.npy").exists()


def test_model_not_a_regular_file(kvbench_bin, tmp_path):
    """A FIFO (or directory) as the model is refused at once: opening a FIFO
    used to wait for a writer forever."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    for path in (fifo, tmp_path):
        for args in (["info", path], ["generate", "-m", path, "-p", "hi"]):
            p = run(kvbench_bin, *args, timeout=20)
            assert p.returncode == 2, (args, p.stderr)
            assert f"{path}: not a regular file (expected a GGUF file)" in p.stderr, p.stderr


def test_info_synthetic_model(kvbench_bin):
    """info reads GGUF files; a synthetic model's spec gets that said, not
    'cannot open: No such file'."""
    for spec in ("synthetic:llama3.1-8b", "synthetic:nosuch"):
        p = run(kvbench_bin, "info", spec, timeout=20)
        assert p.returncode == 2 and not p.stdout, p.stderr
        assert f"{spec} is a synthetic model, not a file: info reads GGUF files" in p.stderr, p.stderr


def test_long_paths(kvbench_bin, tiny, tmp_path):
    """A name kvbench makes from a path the user gave is never cut short by
    its buffer: a cut name is another file. Until 2026-12-05 a model path of
    1,099 bytes made the hash cache's name (MODEL.kvbench-sha256, cut to 1,099
    bytes) the model's own, and the run overwrote the model with the hash
    line; a sweep --out of 1,100 bytes wrote its tables into the directory
    named by its first 1,023 bytes. Output and run directories may now be at
    most 512 bytes (exit 2, nothing made); a model path of any length works,
    without a cache where the cache's name would not fit."""
    import hashlib
    with open(tiny, "rb") as f:
        data = f.read()
    want = hashlib.sha256(data).hexdigest()
    for n in (1084, 1099, 1100, 4000):
        model = long_path(tmp_path / f"m{n}", n - 5) + ".gguf"
        with open(model, "wb") as f:
            f.write(data)
        out = tmp_path / f"o{n}"
        p = run(kvbench_bin, "bench", "methods", "-m", model, "--contexts", "64", "--methods", "full",
                "--decode-tokens", "2", "--reps", "1", "--out", out)
        assert p.returncode == 0, (n, p.stderr)
        with open(model, "rb") as f:
            assert f.read() == data, n
        assert json.loads((out / "run.json").read_text())["model"]["sha256"] == want, n
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"tasks": [{"task": "needle", "words": [20], "depths": 1, "per_cell": 1,
                                          "max_new": 2}], "methods": ["full"]}))
    ok = long_path(tmp_path / "ok", 512)
    p = run(kvbench_bin, "sweep", cfg, "-m", tiny, "--out", ok)
    assert p.returncode == 0 and os.path.exists(os.path.join(ok, "samples.csv")), p.stderr
    for n in (513, 1100):
        bad = long_path(tmp_path / f"bad{n}", n)
        msg = f"a directory path of {n} bytes, expected at most 512"
        for args in (["sweep", cfg, "-m", tiny, "--out", bad],
                     ["bench", "methods", "-m", tiny, "--contexts", "64", "--methods", "full", "--out", bad],
                     ["merge", bad, ok], ["merge", str(tmp_path / "new"), bad], ["plot", bad],
                     ["generate", "-m", tiny, "-p", "hi", "--max-new", "1", "--dump-trace", "0",
                      "--trace-dir", bad]):
            p = run(kvbench_bin, *args)
            assert p.returncode == 2 and msg in p.stderr, (n, args[0], p.stderr)
        assert sorted(os.listdir(os.path.dirname(bad))) == [], n  # nothing made, cut or not
    p = run(kvbench_bin, "bench", "methods", "-m", tiny, "--contexts", "64", "--methods", "full",
            env={"TMPDIR": long_path(tmp_path / "tmp", 600)})
    assert p.returncode == 2 and "a directory path of 600 bytes" in p.stderr, p.stderr
    assert "from $TMPDIR" in p.stderr, p.stderr  # without --out the user may not know it is used
    # a $TMPDIR that is missing or not a directory is named as such (before: only the
    # snapshot directory's path, with no word of where it came from)
    (tmp_path / "afile").write_text("")
    for t in (tmp_path / "missing" / "x", tmp_path / "afile"):
        p = run(kvbench_bin, "bench", "methods", "-m", tiny, "--contexts", "64", "--methods", "full",
                env={"TMPDIR": str(t)})
        assert p.returncode == 2 and "cannot create" in p.stderr and "from $TMPDIR" in p.stderr, p.stderr
    assert not os.path.exists(tmp_path / "missing")
    # a config path run.json could not hold whole (config_file) is refused, not cut
    long_cfg = long_path(tmp_path / "cfg", 1030)
    with open(long_cfg, "w") as f:
        f.write(cfg.read_text())
    p = run(kvbench_bin, "sweep", long_cfg, "-m", tiny, "--dry-run")
    assert p.returncode == 2 and "a config path of 1030 bytes, expected fewer than 1024" in p.stderr, p.stderr
    # a GGUF general.name longer than the name kept is shown cut ("..."), not passed off whole
    import tinymodel
    named = tmp_path / "named.gguf"
    tinymodel._build(named, name="n" * 300)
    p = run(kvbench_bin, "bench", "methods", "-m", named, "--contexts", "64", "--methods", "full",
            "--decode-tokens", "2", "--reps", "1", "--out", tmp_path / "named")
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "named" / "run.json").read_text())["model"]["name"] == "n" * 252 + "..."


def test_generate_errors(kvbench_bin, tiny, tmp_path):
    (tmp_path / "nul.txt").write_bytes(b"a\0b")
    (tmp_path / "latin1.txt").write_bytes(b"ab\ncd\xe9f")
    cases = [
        (["-m", tiny, "-f", tmp_path / "nul.txt"], "nul.txt: byte 1 is NUL, expected UTF-8 text"),
        (["-m", tiny, "-f", tmp_path / "latin1.txt"],
         "latin1.txt:2:3: byte 0xe9 is not valid UTF-8, expected UTF-8 text"),
        (["-m", tiny, "-f", tmp_path], "cannot read: Is a directory"),
        (["-m", tiny], "exactly one of -p TEXT or -f FILE"),
        (["-m", tiny, "-p", "x", "-n", "0"], "--max-new expects an integer"),
        (["-m", tiny, "-p", "x", "-n", "12abc"], "--max-new expects an integer"),
        (["-m", tiny, "-p", "x", "--method", "nosuch"], "unknown method 'nosuch'"),
        (["-m", tiny, "-p", "x", "--method", "rocketkv", "--budget", "8"], "rocketkv"),
        (["-m", tiny, "-p", "x", "--method", "rocketkv"], "budget"),
        (["-m", tiny, "-p", "x", "--method", "snapkv", "--budget", "64", "--set", "kernel=8"], "kernel"),
        (["-m", tiny, "-p", "x", "--set", "nokey"], "--set expects KEY=VALUE"),
        (["-m", tiny, "-p", "x", "--set", "method=quest"], "--set method=quest: give the method with --method"),
        (["-m", tiny, "-p", "x", "--method", "quest", "--budget", "64", "--set", "budget=128"],
         "--set budget=128: give the method with --method and the budget with --budget"),
        (["-m", tiny, "-p", "x", "--method", "rocketkv", "--budget", "64", "--set", "r=[3"],
         "--set r=[3: the value is not valid JSON"),
        (["-m", tiny, "-p", "x", "--method", "rocketkv", "--budget", "64", "--set", "r=3 4"],
         "key 'r': expected an integer"),
        (["-m", tiny, "-p", "x", "--kv", "f8"], "--kv expects"),
        (["-m", tiny, "-f", tmp_path / "missing.txt"], "missing.txt"),
        (["-m", tiny, "-p", "x", "-n", "100000"], "exceeds the model context"),
        (["-m", tiny, "-p", "x", "--dump-trace", "99"], "--dump-trace 99"),
        (["-m", "synthetic:nosuch", "-p", "x"], "unknown synthetic model"),
        (["-m", "synthetic:smollm2-135m", "-p", "x"], "no tokenizer"),
        (["-m", tiny, "-p", "x", "extra"], "unexpected argument"),
        # refused before the model loads: both texts, and each range's edge
        (["-m", tiny, "-p", "x", "-f", tmp_path / "nul.txt"], "exactly one of -p TEXT or -f FILE"),
        (["-m", tiny, "-p", "x", "--budget", "-1"], "--budget expects an integer in [0, 1073741824], got '-1'"),
        (["-m", tiny, "-p", "x", "--threads", "0"], "--threads expects an integer in [1, 1024], got '0'"),
        (["-m", tiny, "-p", "x", "--dump-trace", "-1"], "--dump-trace expects an integer in [0, 4096], got '-1'"),
    ]
    for args, msg in cases:
        p = run(kvbench_bin, "generate", *args)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert msg in p.stderr, (args, p.stderr)


def test_generate_bounds_and_chat_prompt(kvbench_bin, tiny_llama, tmp_path):
    """The prompt (n tokens, counted by `tokenize`) + --max-new may fill the context
    exactly (64 here) but not one more; --dump-trace takes layers 0..n_layer-1 (2
    layers); an empty prompt is refused (the tiny vocabulary adds no BOS); the prompt is
    encoded as `tokenize --no-special` does, and with --chat --system as `tokenize --chat
    auto --system` does (the count --stats prints)."""
    model = tiny_llama(n_ctx=64)

    def run(kvbench_bin, *args):  # the text generated may cut a UTF-8 sequence
        return subprocess.run([kvbench_bin, *map(str, args)], capture_output=True, text=True, errors="replace",
                              timeout=120)

    def ids(*args):
        p = run(kvbench_bin, "tokenize", "-m", model, *args)
        assert p.returncode == 0, p.stderr
        return p.stdout.split()
    n = len(ids("-p", "hello there"))
    p = run(kvbench_bin, "generate", "-m", model, "-p", "hello there", "-n", 64 - n)
    assert p.returncode == 0, p.stderr
    p = run(kvbench_bin, "generate", "-m", model, "-p", "hello there", "-n", 65 - n)
    assert p.returncode == 2 and f"prompt ({n} tokens) + --max-new {65 - n} exceeds the model context 64" in p.stderr
    p = run(kvbench_bin, "generate", "-m", model, "-p", "hi", "-n", 1, "--dump-trace", 2, "--trace-dir", tmp_path / "t2")
    assert p.returncode == 2 and "--dump-trace 2: the model has layers 0..1" in p.stderr, p.stderr
    assert not (tmp_path / "t2").exists()
    p = run(kvbench_bin, "generate", "-m", model, "-p", "hi", "-n", 1, "--dump-trace", 1, "--trace-dir", tmp_path / "t1")
    assert p.returncode == 0 and (tmp_path / "t1" / "meta.json").exists(), p.stderr
    p = run(kvbench_bin, "generate", "-m", model, "-p", "", "-n", 1)
    assert p.returncode == 2 and "the prompt is empty" in p.stderr, p.stderr
    # --budget 0 reaches the method's check (budget >= 1, CONFIG.md), is not dropped
    p = run(kvbench_bin, "generate", "-m", model, "-p", "hi", "-n", 1, "--method", "full", "--budget", 0)
    assert p.returncode == 2 and "key 'budget': expected an integer in [1, 1073741824], got 0" in p.stderr, p.stderr
    # without --chat the text is plain text (README): special-token text is not parsed
    plain, parsed = len(ids("--no-special", "-p", "<|im_start|>hi")), len(ids("-p", "<|im_start|>hi"))
    assert plain != parsed
    p = run(kvbench_bin, "generate", "-m", model, "-p", "<|im_start|>hi", "-n", 1, "--stats")
    assert p.returncode == 0 and f"prompt {plain} tokens," in p.stderr, (plain, p.stderr)
    for sysmsg in ("Be brief.", "You answer in French, always."):
        want = len(ids("--chat", "auto", "--system", sysmsg, "-p", "hi"))
        p = run(kvbench_bin, "generate", "-m", model, "--chat", "--system", sysmsg, "-p", "hi", "-n", 1, "--stats")
        assert p.returncode == 0 and f"prompt {want} tokens," in p.stderr, (want, p.stderr)


def test_memory_check_before_allocating(kvbench_bin, tiny):
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello", "-n", "400",
            env={"KVBENCH_MEM_LIMIT": "1000"})
    assert p.returncode == 2
    assert "needs" in p.stderr and "GiB" in p.stderr and "available" in p.stderr


def test_memory_check_kv_size(kvbench_bin, tiny_llama):
    """The K/V cache the memory check counts, worked by hand: K and V x 2 layers
    x 2 kv heads x head dim 16 x 2 bytes (f16) = 256 bytes a token; a prompt of
    n tokens + 2^20 new ones is 0.25 GiB (to 2 decimals) per cache, and generate
    counts 2 caches."""
    model = tiny_llama(n_ctx=1 << 21)
    p = run(kvbench_bin, "generate", "-m", model, "-p", "hello", "-n", str(1 << 20),
            env={"KVBENCH_MEM_LIMIT": "1000"})
    assert p.returncode == 2 and "(2 K/V caches of 0.25 GiB in f16 + " in p.stderr, p.stderr


def test_logits_errors(kvbench_bin, tiny, tmp_path):
    out = tmp_path / "l.npy"
    cases = [
        (["-m", tiny, "--tokens", "1,2"], "give --out"),
        (["-m", tiny, "--tokens", "1,x", "--out", out], "--tokens: expected integers in [0, "),
        (["-m", tiny, "--tokens", "1,12x", "--out", out], "got '12x'"),
        (["-m", tiny, "--tokens", "1,999999", "--out", out], "got '999999'"),
        (["-m", tiny, "--tokens", "1,99999999999999999999", "--out", out], "got '99999999999999999999'"),
        (["-m", tiny, "--tokens", "1,2", "--positions", "5", "--out", out], "--positions"),
        (["-m", tiny, "--tokens", "1,2", "--path", "sideways", "--out", out], "--path expects"),
        (["-m", tiny, "--tokens", "1,2", "--positions", "", "--out", out], "--positions expects at least one"),
        (["-m", tiny, "--tokens", "1,2", "--positions", " , ", "--out", out], "--positions expects at least one"),
        (["-m", tiny, "--tokens", "1,2", "--chat", "--out", out], "--chat applies to --prompt"),
        (["-m", tiny, "--tokens", "1,2", "-p", "hi", "--out", out], "exactly one of --tokens or --prompt"),
        (["-m", tiny, "--out", out], "exactly one of --tokens or --prompt"),
    ]
    for args, msg in cases:
        p = run(kvbench_bin, "logits", *args)
        assert p.returncode == 2 and msg in p.stderr, (args, p.stderr)
    assert not out.exists()


def test_sweep_cli_errors(kvbench_bin, tiny, tmp_path):
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"tasks": [{"task": "needle", "words": [20], "depths": 1,
                                          "per_cell": 1, "max_new": 2}], "methods": ["full"]}))
    cases = [
        ([], "expected exactly one CONFIG.json"),
        ([cfg, cfg], "expected exactly one CONFIG.json"),    # a second config is not dropped
        ([cfg, "--shard", "3/2"], "--shard expects I/N"),
        ([cfg, "--shard", "x"], "--shard expects I/N"),
        ([cfg, "--shard", "1/4294967298"], "--shard expects I/N"),   # was read as 1/2
        ([cfg, "--shard", "0/99999999999"], "--shard expects I/N"),
        ([cfg, "--shard", "+0/2"], "--shard expects I/N"),
        ([cfg, "--threads", "0"], "--threads expects"),
        ([cfg, "--set", "bogus=1"], "unknown top-level key 'bogus'"),
        ([cfg, "--set", "noequals"], "--set expects KEY=VALUE"),
        # the message names the --set that caused it, not only the file
        ([cfg, "--set", "budgets=[64"], "--set budgets=[64: the value is not valid JSON"),
        ([cfg, "--set", "seed=12x"], "key 'seed': expected an integer"),
        ([cfg, "--set", "seed=12x"], "(the value comes from --set seed=12x)"),
        ([cfg, "--set", "budgets=[64,-3]"], "(the value comes from --set budgets=[64,-3])"),
        ([cfg, "--set", 'description={"a":1}'], "key 'description': expected a string, got an object"),
        ([tmp_path / "missing.json"], "missing.json: cannot open"),
        ([cfg, "--dump-trace", "50"], "--dump-trace 50"),
        ([cfg, "--dump-trace", "-1"], "--dump-trace expects an integer in [0, 4096], got '-1'"),  # -1: no trace
        ([cfg, "--dump-trace", "50", "--dry-run"], "--dump-trace 50"),   # --dry-run passed it
    ]
    for args, msg in cases:
        out = tmp_path / "out"
        p = run(kvbench_bin, "sweep", *args, "--out", out, "-m", tiny)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert msg in p.stderr, (args, p.stderr)
        assert not out.exists()


def test_plot_and_merge_errors(kvbench_bin, tmp_path):
    p = run(kvbench_bin, "plot", tmp_path / "nothing")
    assert p.returncode == 2 and "neither summary.csv nor latency.csv" in p.stderr
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "summary.csv").write_text('task,turn\n"unterminated,x\n')
    p = run(kvbench_bin, "plot", bad)
    assert p.returncode == 2 and "summary.csv" in p.stderr
    assert not (bad / "plots").exists()
    p = run(kvbench_bin, "plot", bad, "--formats", "gif")
    assert p.returncode == 2 and "--formats" in p.stderr
    p = run(kvbench_bin, "merge", tmp_path / "m")
    assert p.returncode == 2 and "usage" in p.stderr
    p = run(kvbench_bin, "merge", tmp_path / "m", tmp_path / "nothing", "--force")
    assert p.returncode == 2 and "'--force': options go before OUT_DIR" in p.stderr, p.stderr
    p = run(kvbench_bin, "merge", tmp_path / "m", tmp_path / "nothing")
    assert p.returncode == 2 and "run.json" in p.stderr
    assert not (tmp_path / "m").exists()


def test_bench_errors(kvbench_bin, tiny):
    cases = [
        ([], "usage"),
        (["sideways"], "unknown part 'sideways'"),
        (["engine", "-m", tiny, "--prefill", "1,x"], "--prefill expects"),
        (["engine", "-m", tiny, "--reps", "0"], "--reps expects"),
        (["engine", "-m", tiny, "--kv", "q4"], "--kv expects"),
        (["engine", "-m", tiny, "--prefill", "600", "--decode-ctx", "8"], "exceed the model context"),
    ]
    for args, msg in cases:
        p = run(kvbench_bin, "bench", *args)
        assert p.returncode == 2 and msg in p.stderr, (args, p.stderr)


def test_output_paths(kvbench_bin, tiny, tmp_path):
    """An output path that cannot be used is refused before any work, with exit
    2 and the path in the message; what is there is left alone (a regular file
    stands where a directory is expected, a directory where a file is)."""
    afile = tmp_path / "afile"
    afile.write_text("keep me\n")
    adir = tmp_path / "adir"
    adir.mkdir()
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"tasks": [{"task": "needle", "words": [40], "depths": [0.5],
                                          "per_cell": 1, "max_new": 2}],
                               "methods": ["full"]}))
    cases = [
        (["sweep", cfg, "-m", tiny, "--out", afile], "exists and is not a directory"),
        (["sweep", cfg, "-m", tiny, "--out", ""], "empty output path"),
        (["merge", afile, tmp_path / "s0"], "exists and is not a directory"),
        (["bench", "methods", "-m", tiny, "--methods", "full", "--contexts", "64", "--out", afile],
         "exists and is not a directory"),
        (["replay", "--trace", adir, "--out", afile, "--method", "full"], "exists and is not a directory"),
        (["generate", "-m", tiny, "-p", "hi", "--max-new", "2", "--dump-trace", "0", "--trace-dir", afile],
         "exists and is not a directory"),
        (["logits", "-m", tiny, "--tokens", "1,2", "--out", adir], "is a directory"),
        (["logits", "-m", tiny, "--tokens", "1,2", "--out", tmp_path / "no" / "x.npy"], "does not exist"),
        (["prompts", cfg, "--counter", "bytes4", "-o", adir], "is a directory"),
        # no file can be made in /proc, not even by root (whom access(W_OK) lets through)
        (["logits", "-m", tiny, "--tokens", "1,2", "--out", "/proc/kvbench-test.npy"],
         "cannot write in /proc"),
        (["sweep", cfg, "-m", tiny, "--out", "/proc/kvbench-test"], "/proc"),
    ]
    for args, msg in cases:
        p = run(kvbench_bin, *args)
        assert p.returncode == 2, (args, p.returncode, p.stderr)
        assert msg in p.stderr, (args, p.stderr)
    assert afile.read_text() == "keep me\n" and os.listdir(adir) == []
    assert not (tmp_path / "no").exists()
    # plots/ taken by a file; a bad context after --out: no directory left
    run_dir = tmp_path / "run"
    p = run(kvbench_bin, "bench", "methods", "-m", tiny, "--methods", "full", "--contexts", "64",
            "--decode-tokens", "2", "--reps", "1", "--out", run_dir)
    assert p.returncode == 0, p.stderr
    (run_dir / "plots").write_text("")
    p = run(kvbench_bin, "plot", run_dir)
    assert p.returncode == 2 and "plots: exists and is not a directory" in p.stderr, p.stderr
    p = run(kvbench_bin, "bench", "methods", "-m", tiny, "--methods", "full", "--contexts", "9999",
            "--out", tmp_path / "new", "--fill", "prefill")
    assert p.returncode == 2 and "exceeds the model context" in p.stderr, p.stderr
    assert not (tmp_path / "new").exists()


def test_jsonl_nul(kvbench_bin, tiny, tmp_path):
    """JSONL text cannot hold a NUL: C strings would end there and the rest of
    the text would be dropped without a word. Both forms (the escape and the
    raw byte) are refused with the file and line; a literal backslash-u0000
    (the escaped backslash) is ordinary text. A directory is not a file."""
    esc = tmp_path / "esc.jsonl"
    esc.write_text('{"pred": "a", "answers": ["a"]}\n{"pred": "a\\u0000b", "answers": ["a"]}\n')
    p = run(kvbench_bin, "score", "--metric", "exact_match", esc)
    assert p.returncode == 2 and f"{esc}:2: \\u0000" in p.stderr, p.stderr
    lit = tmp_path / "lit.jsonl"
    lit.write_text('{"pred": "x\\\\u0000b", "answers": ["u0000b"]}\n')
    p = run(kvbench_bin, "score", "--metric", "exact_match", lit)
    assert p.returncode == 0 and p.stdout.startswith("1\n"), (p.stdout, p.stderr)
    p = run(kvbench_bin, "score", "--metric", "exact_match", tmp_path)
    assert p.returncode == 2 and "read error" in p.stderr, p.stderr
    raw = tmp_path / "raw.jsonl"
    raw.write_bytes(b'"hello"\n"a\x00b"\n')
    p = run(kvbench_bin, "tokenize", "-m", tiny, "--jsonl", raw)
    assert p.returncode == 2 and f"{raw}:2: contains a NUL byte; expected a JSON value" in p.stderr, p.stderr
    p = run(kvbench_bin, "tokenize", "-m", tiny, "--jsonl", tmp_path)
    assert p.returncode == 2 and "read error" in p.stderr and p.stdout == "", p.stderr


@pytest.mark.parametrize("bad", [b"\xff", b"\xc0\x80", b"\xed\xa0\x80", b"\xe2\x82", b"\xf4\x90\x80\x80"],
                         ids=["ff", "overlong", "surrogate", "cut", "above_10ffff"])
def test_json_must_be_utf8(kvbench_bin, tiny, tmp_path, bad):
    """JSON text is UTF-8 (RFC 8259). A config or JSONL line with other bytes
    is refused, naming the file and where: its strings would otherwise reach
    samples.csv and run.json, which Python's csv and json then cannot read."""
    base = json.dumps({"tasks": [{"task": "needle", "words": [20], "depths": 1, "per_cell": 1,
                                  "max_new": 2}], "methods": ["full"], "description": "@"}).encode()
    cfg = tmp_path / "c.json"
    cfg.write_bytes(base.replace(b"@", b"ok " + bad))
    col = base.index(b"@") + 4
    p = run(kvbench_bin, "sweep", cfg, "--dry-run", "-m", tiny)
    assert p.returncode == 2, p.stderr
    assert f"{cfg}:1:{col}: byte 0x{bad[0]:02x} is not valid UTF-8" in p.stderr, p.stderr
    rows = tmp_path / "r.jsonl"
    rows.write_bytes(b'{"pred": "a", "answers": ["a"]}\n{"pred": "a' + bad + b'", "answers": ["a"]}\n')
    p = run(kvbench_bin, "score", "--metric", "exact_match", rows)
    assert p.returncode == 2, p.stderr
    assert f"{rows}:2: byte 0x{bad[0]:02x} at column 12 is not valid UTF-8" in p.stderr, p.stderr
    assert p.stdout == ""


def test_json_duplicate_keys_and_trailing_text(kvbench_bin, tiny, tmp_path):
    """cJSON keeps the first of two equal keys and Python's json the last, so
    a document with one is ambiguous: refused, naming the key and where it is.
    A JSONL line must hold one object and nothing after it."""
    cfg = tmp_path / "c.json"
    cfg.write_text('{"seed": 1, "methods": [{"method": "rocketkv", "budget": 64, "budget": 128}],'
                   ' "seed": 2}')
    p = run(kvbench_bin, "sweep", cfg, "--dry-run", "-m", tiny)
    assert p.returncode == 2 and "key 'seed' appears twice in the top-level object" in p.stderr, p.stderr
    cfg.write_text('{"methods": [{"method": "rocketkv", "budget": 64, "budget": 128}]}')
    p = run(kvbench_bin, "sweep", cfg, "--dry-run", "-m", tiny)
    assert p.returncode == 2 and "key 'budget' appears twice in methods[0]" in p.stderr, p.stderr
    base = {"tasks": [{"task": "needle", "words": [20], "depths": 1, "per_cell": 1, "max_new": 2}],
            "methods": ["full"]}
    # an escaped backslash before u0000 is ordinary text; the escape \u0000 is refused
    cfg.write_text(json.dumps(base)[:-1] + ', "description": "a\\\\u0000b"}')
    p = run(kvbench_bin, "sweep", cfg, "--dry-run", "-m", tiny)
    assert p.returncode == 0, p.stderr
    cfg.write_text(json.dumps(base)[:-1] + ', "description": "a\\u0000b"}')
    p = run(kvbench_bin, "sweep", cfg, "--dry-run", "-m", tiny)
    assert p.returncode == 2 and f"{cfg}: \\u0000 in a string" in p.stderr, p.stderr
    rows = tmp_path / "r.jsonl"
    rows.write_text('{"pred": "a", "answers": ["a"]}\n{"pred": "b", "pred": "a", "answers": ["a"]}\n')
    p = run(kvbench_bin, "score", "--metric", "exact_match", rows)
    assert p.returncode == 2 and f"{rows}:2: key 'pred' appears twice" in p.stderr, p.stderr
    rows.write_text('{"pred": "a", "answers": ["a"]}\n{"pred": "a", "answers": ["a"]} {"x": 1}\n')
    p = run(kvbench_bin, "score", "--metric", "exact_match", rows)
    assert p.returncode == 2 and f"{rows}:2: expected one JSON object per line" in p.stderr, p.stderr
    rows.write_text('{"pred": "a", "answers": ["a"]}  \n')   # trailing blanks are fine
    p = run(kvbench_bin, "score", "--metric", "exact_match", rows)
    assert p.returncode == 0, p.stderr


def test_env_values_checked_at_startup(kvbench_bin, tiny, tmp_path):
    """The environment variables README's table lists are checked before any
    command runs: a value outside the documented ones exits 2 with one line
    naming the variable, the value and what was expected, and nothing is
    written (no output directory, nothing on stdout). Until 2026-12-05
    KVBENCH_MEM_LIMIT=8G was read as 8 bytes (the memory check then blamed
    the machine) and =abc as no limit, KVBENCH_HUGEPAGES=no left huge pages
    on, KVBENCH_KERNELS=REF silently ran the CPU kernels and
    KVBENCH_MATVEC=bogus only warned."""
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"tasks": [{"task": "needle", "words": [20], "depths": 1, "per_cell": 1,
                                          "max_new": 2}], "methods": ["full"]}))
    out = tmp_path / "out"
    bad = [("KVBENCH_MEM_LIMIT", v) for v in
           ("abc", "0", "-1", "8X", "1.5G", " 8", "8 ", "+8", "0x10", "8GB", "G",
            "99999999999999999999", "99999999999999T")]
    bad += [("KVBENCH_HUGEPAGES", v) for v in ("maybe", "2", "00", " 0")]
    bad += [("KVBENCH_KERNELS", v) for v in ("REF", "gpu", "reference")]
    bad += [("KVBENCH_MATVEC", v) for v in ("bogus", "X24", "exact ")]
    cmds = [["sweep", cfg, "-m", tiny, "--out", out],
            ["generate", "-m", tiny, "-p", "hello", "-n", 2],
            ["bench", "methods", "-m", tiny, "--contexts", 64, "--methods", "full", "--decode-tokens", 2,
             "--reps", 1, "--out", out]]
    for var, val in bad:
        for cmd in cmds:
            p = run(kvbench_bin, *cmd, env={var: val})
            assert p.returncode == 2, (var, val, cmd[0], p.returncode, p.stderr)
            assert p.stderr.startswith(f"kvbench: {var}='{val}': expected "), (var, val, p.stderr)
            assert p.stderr.count("\n") == 1, (var, val, p.stderr)
            assert p.stdout == "", (var, val, p.stdout)
            assert not out.exists(), (var, val, cmd[0])
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello", "-n", 2, env={"KVBENCH_MEM_LIMIT": "8G"})
    assert p.returncode == 0, p.stderr
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello", "-n", 2, env={"KVBENCH_MEM_LIMIT": "abc"})
    assert p.returncode == 2 and "expected a number of bytes" in p.stderr, p.stderr


def test_env_values_accepted(kvbench_bin, tiny):
    """Every documented value runs, an empty variable is the same as an unset
    one, and KVBENCH_MEM_LIMIT takes K, M, G and T (powers of 1024, either
    case) after a whole number: 8G is 8 GiB (enough here), 1k is 1024 bytes
    (too little, refused by the memory check as before, not as a bad value)."""
    good = [("KVBENCH_MEM_LIMIT", v) for v in ("", "8589934592", "8G", "8g", "8192M", "8388608k", "1T")]
    good += [("KVBENCH_HUGEPAGES", v) for v in ("", "0", "1", "no", "yes", "off", "on", "false", "true",
                                                 "NO", "True")]
    good += [("KVBENCH_KERNELS", v) for v in ("", "ref", "cpu")]
    good += [("KVBENCH_MATVEC", v) for v in ("", "exact", "q8")]
    for var, val in good:
        p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello", "-n", 2, env={var: val})
        assert p.returncode == 0, (var, val, p.stderr)
        assert "KVBENCH_" not in p.stderr, (var, val, p.stderr)
    for val in ("1k", "1K", "1000"):
        p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hello", "-n", 400, env={"KVBENCH_MEM_LIMIT": val})
        assert p.returncode == 2 and "memory is available" in p.stderr, (val, p.stderr)
        assert "expected a number" not in p.stderr, p.stderr


def test_plot_scripts_dir_checked(kvbench_bin, tiny, tmp_path):
    """KVBENCH_PLOTS naming a directory without kvbench's gnuplot scripts is
    refused before anything is written, naming the variable and the missing
    file. Until 2026-12-05 plot made RUN/plots/ and then each figure failed
    with gnuplot's "Cannot load input from 'speedup.gp'" (exit 1)."""
    out = tmp_path / "run"
    p = run(kvbench_bin, "bench", "methods", "-m", tiny, "--contexts", 64, "--methods", "full",
            "--decode-tokens", 2, "--reps", 1, "--out", out)
    assert p.returncode == 0, p.stderr
    nowhere = tmp_path / "noscripts"
    nowhere.mkdir()
    p = run(kvbench_bin, "plot", out, env={"KVBENCH_PLOTS": str(nowhere)})
    assert p.returncode == 2, p.stderr
    assert f"KVBENCH_PLOTS='{nowhere}': expected " in p.stderr and f"{nowhere}/common.gp" in p.stderr, p.stderr
    assert p.stdout == "" and not (out / "plots").exists()
