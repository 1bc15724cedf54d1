"""The smaller commands' options and output (docs/RELIABILITY.md, "Audit of
the smaller commands (2026-12-05, stop 61)"):

- a command whose stdout cannot be written exits 1 naming itself, not 0;
- an option that cannot act in the mode given is refused (exit 2, naming it
  and what it needs, nothing on stdout) rather than silently dropped;
- what a command prints or writes says what it did (tokenize --time's bytes,
  prompts' samples, merge's run.json).

A tiny random model (tiny_llama) wherever a model is run; the default model
only for its tokenizer.
"""
import json
import os
import subprocess

import pytest


def run(kvbench_bin, *args, stdout=subprocess.PIPE, timeout=120):
    return subprocess.run([kvbench_bin, *map(str, args)], stdout=stdout, stderr=subprocess.PIPE,
                          timeout=timeout)


@pytest.fixture(scope="module")
def tiny(tiny_llama):
    return tiny_llama(n_ctx=2048)


def refused(p, *needles):
    """exit 2, nothing on stdout, every needle in the message"""
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 2, (p.returncode, err)
    assert p.stdout in (b"", None), p.stdout
    for n in needles:
        assert n in err, (n, err)


def test_stdout_write_failure_is_an_error(kvbench_bin, tiny, tmp_path):
    """stdout on /dev/full (every write fails with ENOSPC): exit 1 and
    "kvbench CMD: writing the output failed: <reason>" for every command that
    prints, as `info` already did; before, all but `info` exited 0 (the failed
    write was left in stdio's buffer for exit() to drop)."""
    (tmp_path / "preds.jsonl").write_text('{"pred": "a", "answers": ["a"]}\n')
    (tmp_path / "task.json").write_text(json.dumps(
        {"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1, "max_new": 4}))
    cases = {
        "tokenize": ["tokenize", "-m", tiny, "-p", "hi"],
        "generate": ["generate", "-m", tiny, "-p", "hi", "-n", "2"],
        "prompts": ["prompts", tmp_path / "task.json", "--counter", "bytes4"],
        "score": ["score", "-m", "exact_match", tmp_path / "preds.jsonl"],
        "info": ["info", tiny],
        "merge": ["merge", "--help"],
        None: ["--version"],
    }
    with open("/dev/full", "wb") as full:
        for cmd, args in cases.items():
            p = run(kvbench_bin, *args, stdout=full)
            err = p.stderr.decode(errors="replace")
            name = f"kvbench {cmd}" if cmd else "kvbench"
            assert p.returncode == 1, (args, p.returncode, err)
            assert f"{name}: writing the output failed" in err, (args, err)
    # the same commands with a stdout that takes the output: exit 0
    for args in cases.values():
        p = run(kvbench_bin, *args)
        assert p.returncode == 0 and p.stdout, (args, p.stderr)


@pytest.fixture(scope="module")
def trace(kvbench_bin, tiny, tmp_path_factory):
    """a replay trace of layer 0 written by generate"""
    d = tmp_path_factory.mktemp("trace") / "t"
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "the cat sat on the mat " * 8, "-n", "4",
            "--dump-trace", "0", "--trace-dir", d)
    assert p.returncode == 0, p.stderr
    return d


def test_replay_param_cannot_replace_method_or_budget(kvbench_bin, trace, tmp_path):
    """replay --param method=... / budget=... / budgets=...: exit 2 as
    generate --set does (the method and budget have options of their own),
    nothing written. Before, the --param silently replaced --method or
    --budget: `--method snapkv --budget 64 --param method=quest` ran quest."""
    out = tmp_path / "o"
    for extra, kv in [(["--method", "snapkv", "--budget", "64"], "method=quest"),
                      (["--method", "snapkv", "--budget", "64"], "budget=32"),
                      (["--method", "snapkv", "--budget", "64"], "budgets=[32]"),
                      (["--config", '{"method": "snapkv", "budget": 64}'], "method=quest")]:
        p = run(kvbench_bin, "replay", "--trace", trace, "--out", out, *extra, "--param", kv)
        refused(p, f"--param {kv}: give the method with --method and the budget with --budget")
        assert not out.exists(), (kv, os.listdir(out))
    # other parameters still go through --param, and the method is --method's
    p = run(kvbench_bin, "replay", "--trace", trace, "--out", out, "--method", "snapkv", "--budget", "64",
            "--param", "kernel=3")
    assert p.returncode == 0, p.stderr
    stats = json.load(open(out / "stats.json"))
    assert stats["method"] == "snapkv" and stats["params"]["budget"] == 64 and stats["params"]["kernel"] == 3, stats


def two_shards(kvbench_bin, tiny, tmp_path, trace_in=None):
    """A two-sample needle sweep on the tiny model run as shards 0/2 and 1/2
    (tmp_path/s0, s1); shard trace_in also dumps layer 1's trace."""
    cfg = tmp_path / "g.json"
    cfg.write_text(json.dumps({"name": "g", "seed": 3, "methods": ["full"], "budgets": [32],
                               "tasks": [{"task": "needle", "words": [60], "depths": [0.0, 1.0],
                                          "per_cell": 1, "max_new": 4}]}))
    shards = [tmp_path / "s0", tmp_path / "s1"]
    for i, d in enumerate(shards):
        extra = ["--dump-trace", "1"] if i == trace_in else []
        p = run(kvbench_bin, "sweep", cfg, "--out", d, "-m", tiny, "--shard", f"{i}/2", *extra, timeout=300)
        assert p.returncode == 0, p.stderr
    return shards


def test_merged_run_json_is_true_whatever_the_shard_order(kvbench_bin, tiny, tmp_path):
    """The merged run.json (docs/OUTPUTS.md): dump_trace null (OUT holds no
    trace; each shard's is listed in merged_from with its machine and times),
    start_time the earliest shard's start, end_time the latest shard's end,
    no session_start_time (no session wrote it), and the rest shard 0/N's
    (the shard whose latency.csv is copied), so the file does not depend on
    the order the shards are given in. Before, every key came from the
    first-listed shard: its dump_trace (a layer, for a directory without
    traces), its times and its machine."""
    shards = two_shards(kvbench_bin, tiny, tmp_path, trace_in=1)
    assert os.listdir(shards[1] / "traces")
    # shard 1 ran earlier and ended later than shard 0, on another machine
    times = {0: ("2026-12-05T10:00:00Z", "2026-12-05T11:00:00Z"),
             1: ("2026-12-05T09:00:00Z", "2026-12-05T12:00:00Z")}
    for i, d in enumerate(shards):
        rj = json.load(open(d / "run.json"))
        rj["start_time"], rj["end_time"] = times[i]
        if i == 1:
            rj["machine"]["host"] = "other-host"
        (d / "run.json").write_text(json.dumps(rj))
    s0 = json.load(open(shards[0] / "run.json"))
    # shard 0 runs the latency part: its latency.csv is the merged run's, in either order
    (shards[0] / "latency.csv").write_text("method,context\nfull,64\n")
    merged = []
    for order, out in [((1, 0), tmp_path / "m10"), ((0, 1), tmp_path / "m01")]:
        p = run(kvbench_bin, "merge", out, *[shards[i] for i in order])
        assert p.returncode == 0, p.stderr
        m = json.load(open(out / "run.json"))
        assert (out / "run.json").read_bytes().endswith(b"}\n"), "a text file, as a sweep's run.json"
        assert m["dump_trace"] is None, m["dump_trace"]
        assert m["shard"] == "merged" and [e["dir"] for e in m["merged_from"]] == [str(shards[i]) for i in order], m
        assert (out / "latency.csv").read_text() == "method,context\nfull,64\n"
        assert not (out / "traces").exists()
        assert m["start_time"] == "2026-12-05T09:00:00Z" and m["end_time"] == "2026-12-05T12:00:00Z", m
        assert "session_start_time" not in m
        assert m["machine"] == s0["machine"], m["machine"]
        by_shard = {e["shard"]: e for e in m["merged_from"]}
        assert by_shard["0/2"]["dump_trace"] is None and by_shard["1/2"]["dump_trace"] == 1, by_shard
        assert by_shard["1/2"]["machine"]["host"] == "other-host"
        assert (by_shard["1/2"]["start_time"], by_shard["1/2"]["end_time"]) == times[1]
        assert (by_shard["0/2"]["start_time"], by_shard["0/2"]["end_time"]) == times[0]
        merged.append({k: v for k, v in m.items() if k != "merged_from"})
    assert merged[0] == merged[1]


def test_merge_checks_each_shards_sample_count(kvbench_bin, tiny, tmp_path):
    """run.json's data.samples is an integer (the plan's sample count, the
    same in every shard). Before 2026-12-06 merge cast the number to long
    before any range check: 1e300 (undefined) gave a message about seq
    ranges ending in -9223372036854775808, and 2.5 was merged as 2."""
    shards = two_shards(kvbench_bin, tiny, tmp_path)
    good = [(d / "run.json").read_text() for d in shards]
    assert all(json.loads(g)["data"]["samples"] == 2 for g in good)

    def set_samples(i, value):
        rj = json.loads(good[i])
        if value is None:
            del rj["data"]["samples"]
        else:
            rj["data"]["samples"] = value
        (shards[i] / "run.json").write_text(json.dumps(rj))

    for value, got in ((1e300, "got 1e+300"), (2.5, "got 2.5"), (-1, "got -1"), ("2", "got a string"),
                       (None, "got nothing")):
        set_samples(0, value)
        set_samples(1, value)
        out = tmp_path / "m"
        refused(run(kvbench_bin, "merge", out, *shards),
                f"s0/run.json: key 'data.samples': expected an integer in [0, 2147483647], {got}")
        assert not out.exists()
    set_samples(0, 2)
    set_samples(1, 3)
    refused(run(kvbench_bin, "merge", tmp_path / "m", *shards), "s1/run.json: key 'data.samples' is 3, but 2 in")
    set_samples(1, 2)
    p = run(kvbench_bin, "merge", tmp_path / "m", *shards)
    assert p.returncode == 0, p.stderr
    assert json.load(open(tmp_path / "m" / "run.json"))["data"]["samples"] == 2


def test_tokenize_refuses_options_outside_their_mode(kvbench_bin, model_file, tmp_path):
    """Options tokenize cannot act on in the mode given: exit 2 naming the
    option and the mode, nothing on stdout (docs/TOKENIZER.md). Before, each
    was dropped silently: a chat turn is always encoded with special tokens
    and BOS, a --jsonl chat line's own system was used, decoding takes ids."""
    (tmp_path / "chat.jsonl").write_text('{"system": "S", "messages": ["hi"]}\n')
    cases = [
        (["--chat", "chatml", "-p", "hi", "--no-special"], ["--no-special", "--chat"]),
        (["--chat", "chatml", "-p", "hi", "--bos"], ["--bos", "--chat"]),
        (["--chat", "chatml", "--jsonl", tmp_path / "chat.jsonl", "--system", "X"], ["--system", "--jsonl"]),
        (["--decode", "-p", "1 2", "--bos"], ["--bos", "--decode"]),
        (["--decode", "-p", "1 2", "--no-special"], ["--no-special", "--decode"]),
        (["-p", "hi", "--render-special"], ["--render-special needs --decode"]),
    ]
    for args, needles in cases:
        refused(run(kvbench_bin, "tokenize", "-m", model_file, *args), *needles)
    # each in its own mode still acts
    for args in (["--chat", "chatml", "-p", "hi", "--system", "X"], ["-p", "hi", "--bos", "--no-special"],
                 ["--decode", "-p", "1 2", "--render-special"], ["--chat", "chatml", "--jsonl", tmp_path / "chat.jsonl"]):
        p = run(kvbench_bin, "tokenize", "-m", model_file, *args)
        assert p.returncode == 0 and p.stdout, (args, p.stderr)


def test_tokenize_decode_refuses_ids_outside_the_vocabulary(kvbench_bin, model_file, tmp_path):
    """--decode --jsonl: each id an integer in [0, n_vocab) (SmolLM2: 49152),
    else exit 2 naming the line and the element, nothing on stdout. 1e300
    was cast to long before the range check (undefined behaviour, caught by
    make sanitize's float-cast-overflow check since 2026-12-06)."""
    for bad in ("1e300", "-1e300", "-1", "1.5", "49152", '"7"', "null"):
        f = tmp_path / "ids.jsonl"
        f.write_text("[1, 2]\n{\"ids\": [3, %s]}\n" % bad)
        refused(run(kvbench_bin, "tokenize", "-m", model_file, "--decode", "--jsonl", f),
                "ids.jsonl:2", "ids[1]: expected an integer token id in [0, 49152)")
    f.write_text("[0, 49151]\n")
    p = run(kvbench_bin, "tokenize", "-m", model_file, "--decode", "--jsonl", f)
    assert p.returncode == 0 and p.stdout, p.stderr
    # -p takes the same range
    refused(run(kvbench_bin, "tokenize", "-m", model_file, "--decode", "-p", "3 49152"), "-p:", "49152")
    p = run(kvbench_bin, "tokenize", "-m", model_file, "--decode", "-p", "0 49151")
    assert p.returncode == 0 and p.stdout, p.stderr


def test_tokenize_chat_jsonl_lines_are_checked(kvbench_bin, model_file, tmp_path):
    """A --chat --jsonl line is an object {"system": TEXT or null, "messages": [USER,
    ASSISTANT, ..., USER]} with an odd number of strings (TOKENIZER.md, --help): anything
    else is refused naming the line, nothing printed; "system": null is the format's
    default (chatml-nosys: none), as a line without the key; the turns render as the
    format table of TOKENIZER.md gives them."""
    f = tmp_path / "chat.jsonl"
    bad = [('["hi"]', "expected {"), ('{"messages": ["a", "b"]}', "odd number of messages"),
           ('{"messages": []}', "odd number of messages"), ('{"system": 3, "messages": ["a"]}', "TEXT or null"),
           ('{"messages": ["a", 2, "c"]}', "messages[1]: expected a string"), ('{"messages": "a"}', "expected {")]
    for line, msg in bad:
        f.write_text('{"messages": ["ok"]}\n' + line + "\n")
        refused(run(kvbench_bin, "tokenize", "-m", model_file, "--chat", "chatml", "--jsonl", f), "chat.jsonl:2", msg)
    f.write_text('{"system": null, "messages": ["a", "b", "c"]}\n{"messages": ["a", "b", "c"]}\n'
                 '{"system": "S", "messages": ["a", "b", "c"]}\n')
    p = run(kvbench_bin, "tokenize", "-m", model_file, "--chat", "chatml-nosys", "--print-text", "--jsonl", f)
    assert p.returncode == 0, p.stderr
    want = ("<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\nb<|im_end|>\n"
            "<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n")
    assert [json.loads(x) for x in p.stdout.decode().split("\n")[:-1]] == [
        want, want, "<|im_start|>system\nS<|im_end|>\n" + want], p.stdout


def test_tokenize_chat_bos_only_before_the_first_turn(kvbench_bin, tiny_llama, tmp_path):
    """TOKENIZER.md: the first turn is encoded with add_bos = 1 (BOS if the model asks),
    later turns as continuations (no BOS). On a tiny model whose metadata asks for BOS
    (id 1) and the raw format (first turn {U}, later turns {A}\n\n{U}): the ids are BOS,
    then those of the turns' texts encoded plain, one after the other."""
    model = tiny_llama(add_bos=True)

    def ids(*args):
        p = run(kvbench_bin, "tokenize", "-m", model, *args)
        assert p.returncode == 0, p.stderr
        return p.stdout.decode().split()
    assert ids("--chat", "raw", "-p", "hello there") == ["1"] + ids("-p", "hello there")
    # plain encoding adds BOS only with --bos (--help), in -p and --jsonl alike
    f = tmp_path / "t.jsonl"
    f.write_text('"hello there"\n')
    assert ids("--bos", "-p", "hello there") == ids("--bos", "--jsonl", f) == ["1"] + ids("-p", "hello there")
    assert ids("-p", "hello there")[0] != "1"
    # --no-special: "<|im_start|>" is plain text, never the control token (ids 0-2 of the
    # tiny vocabulary), in -p and --jsonl alike; parsed by default
    f.write_text('"<|im_start|>hi"\n')
    plain = ids("--no-special", "-p", "<|im_start|>hi")
    assert plain == ids("--no-special", "--jsonl", f) and not {"0", "1", "2"} & set(plain)
    assert ids("-p", "<|im_start|>hi")[0] == "1"
    f = tmp_path / "c.jsonl"
    f.write_text('{"messages": ["hello", "there", "you"]}\n')
    assert ids("--chat", "raw", "--jsonl", f) == ["1"] + ids("-p", "hello") + ids("-p", "there\n\nyou")


def test_tokenize_time_counts_the_bytes(kvbench_bin, model_file):
    """--time's byte count in every mode (docs/TOKENIZER.md): the text encoded,
    the text decoded, the rendered conversation (ChatML's first turn, from the
    format table). Before, decode and chat modes said 0 bytes."""
    def timed(*args):
        p = run(kvbench_bin, "tokenize", "-m", model_file, "--time", *args)
        assert p.returncode == 0, p.stderr
        line = p.stderr.decode().strip()
        words = line.split()  # kvbench tokenize: VERB B bytes, T tokens in X ms
        return p.stdout, words[2], int(words[3]), int(words[5])
    text = "hello there, caf\u00e9"
    ids, verb, nb, nt = timed("-p", text)
    assert (verb, nb) == ("encoded", len(text.encode())) and nt == len(ids.split())
    assert timed("--decode", "-p", ids.decode().strip())[1:] == ("decoded", len(text.encode()), nt)
    chatml = "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n"
    ids, verb, nb, nt = timed("--chat", "chatml", "--system", "S", "-p", "hi")
    assert (verb, nb) == ("encoded", len(chatml.encode())) and nt == len(ids.split())
    assert timed("--chat", "chatml", "--system", "S", "-p", "hi", "--print-text")[1:] == \
        ("rendered", len(chatml.encode()), 0)
    # --jsonl: the sums over its lines
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        f = os.path.join(d, "t.jsonl")
        texts = [text, "second line \u00e9\u00e9"]
        with open(f, "w") as fh:
            fh.write("".join(json.dumps(t) + "\n" for t in texts))
        ids, verb, nb, nt = timed("--jsonl", f)
        assert (verb, nb, nt) == ("encoded", sum(len(t.encode()) for t in texts), len(ids.split()))
        with open(f, "w") as fh:
            fh.write("".join(json.dumps([int(x) for x in line.split()]) + "\n" for line in ids.decode().splitlines()))
        assert timed("--decode", "--jsonl", f)[1:] == ("decoded", sum(len(t.encode()) for t in texts), nt)
        with open(f, "w") as fh:
            fh.write('{"system": "S", "messages": ["hi"]}\n{"system": "S", "messages": ["hi", "yo", "ok"]}\n')
        ids, verb, nb, nt = timed("--chat", "chatml", "--jsonl", f)
        two = chatml + "yo<|im_end|>\n<|im_start|>user\nok<|im_end|>\n<|im_start|>assistant\n"
        assert (verb, nb, nt) == ("encoded", len(chatml.encode()) + len(two.encode()), len(ids.split()))


def test_generate_refuses_options_it_would_drop(kvbench_bin, tiny, tmp_path):
    """generate --system without --chat and --trace-dir without --dump-trace:
    exit 2 naming both options, nothing generated, no directory made. Before,
    both were dropped silently (exit 0)."""
    refused(run(kvbench_bin, "generate", "-m", tiny, "-p", "hi", "-n", "2", "--system", "S"),
            "--system needs --chat")
    refused(run(kvbench_bin, "generate", "-m", tiny, "-p", "hi", "-n", "2", "--trace-dir", tmp_path / "t"),
            "--trace-dir needs --dump-trace")
    assert not (tmp_path / "t").exists()
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hi", "-n", "2", "--chat", "--system", "S",
            "--dump-trace", "0", "--trace-dir", tmp_path / "t")
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "t" / "meta.json").exists()


def test_prompts_applies_max_samples_as_the_sweep(kvbench_bin, tiny, tmp_path):
    """prompts CONFIG.json prints the samples the config's sweep runs
    (README): max_samples keeps the first N samples of each task object
    (docs/CONFIG.md), the count `sweep --dry-run` reports. Before, prompts
    ignored max_samples and printed all 6 + 6."""
    task = {"task": "needle", "words": [60], "depths": 3, "per_cell": 2, "max_new": 4}
    base = {"name": "p", "seed": 5, "methods": ["full"], "budgets": [32], "tasks": [task, dict(task, digits=5)]}

    def prompts(cfg):
        path = tmp_path / "c.json"
        path.write_text(json.dumps(cfg))
        p = run(kvbench_bin, "prompts", path, "-m", tiny)
        assert p.returncode == 0, p.stderr
        return [json.loads(ln) for ln in p.stdout.decode().splitlines()], path

    every, _ = prompts(base)
    assert len(every) == 12
    capped, path = prompts(dict(base, max_samples=2))
    assert capped == every[0:2] + every[6:8], [s["id"] for s in capped]
    p = run(kvbench_bin, "sweep", path, "-m", tiny, "--dry-run", "--out", tmp_path / "run")
    assert p.returncode == 0, p.stderr
    assert "samples: 4 " in p.stdout.decode(), p.stdout
    # a bad value is refused as the sweep refuses it
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(base, max_samples=-1)))
    refused(run(kvbench_bin, "prompts", bad, "-m", tiny), "max_samples")


def test_prompt_text_must_be_utf8(kvbench_bin, tiny, tmp_path):
    """generate -p / --system and logits -p refuse bytes that are not UTF-8,
    as generate -f and every --jsonl do: exit 2 naming the option, the byte's
    offset and value, nothing written. Before, they went to the tokenizer
    (exit 0). tokenize -p takes any bytes on purpose (docs/TOKENIZER.md)."""
    def run_b(*args):
        return subprocess.run([os.fsencode(kvbench_bin), *[a if isinstance(a, bytes) else os.fsencode(str(a))
                                                           for a in args]],
                              capture_output=True, timeout=120)
    latin1 = "caf\u00e9 au lait".encode("latin-1")
    refused(run_b("generate", "-m", tiny, "-p", latin1, "-n", "2"),
            "kvbench generate: -p: byte 3 (0xe9) is not valid UTF-8")
    refused(run_b("generate", "-m", tiny, "-p", "hi", "--chat", "--system", b"ok \xff", "-n", "2"),
            "kvbench generate: --system: byte 3 (0xff) is not valid UTF-8")
    refused(run_b("logits", "-m", tiny, "-p", latin1, "--out", tmp_path / "l.npy"),
            "kvbench logits: -p: byte 3 (0xe9) is not valid UTF-8")
    assert not (tmp_path / "l.npy").exists()
    # the same text in UTF-8 runs, and tokenize -p still takes the raw bytes
    assert run_b("generate", "-m", tiny, "-p", "caf\u00e9 au lait", "-n", "2").returncode == 0
    assert run_b("logits", "-m", tiny, "-p", "caf\u00e9", "--out", tmp_path / "l.npy").returncode == 0
    assert run_b("tokenize", "-m", tiny, "-p", latin1).returncode == 0


def test_info_rows_needs_dump_tensor(kvbench_bin, tiny):
    """info --rows A:B without --dump-tensor: exit 2 naming both, nothing
    printed (docs/GGUF.md). Before, --rows was dropped and the whole listing
    printed (exit 0)."""
    refused(run(kvbench_bin, "info", tiny, "--rows", "0:2"), "--rows needs --dump-tensor")
    p = run(kvbench_bin, "info", tiny, "--dump-tensor", "output_norm.weight", "--rows", "0:1")
    assert p.returncode == 0 and p.stdout.startswith(b"row 0 "), p.stderr
    # GGUF.md: rows A..B-1, default 0:1; output_norm.weight is one row (a norm vector)
    p = run(kvbench_bin, "info", tiny, "--dump-tensor", "output_norm.weight")
    assert p.returncode == 0 and p.stdout.count(b"\n") == 1 and p.stdout.startswith(b"row 0 "), p.stdout[:80]
    # a minus sign is refused, "-0" too (strtoull reads it as 0), and a space before
    # either number (strtoull skips it; the other number options refuse it)
    for rows in ("1:1", "2:1", "-1:1", "0:-1", "0:", ":1", "0:1x", "-0:1", "0:-0", " 0:1", "0: 1", "\t0:1"):
        refused(run(kvbench_bin, "info", tiny, "--dump-tensor", "output_norm.weight", "--rows", rows),
                f"--rows expects A:B with 0 <= A < B, got '{rows}'")
    refused(run(kvbench_bin, "info", tiny, "--dump-tensor", "output_norm.weight", "--rows", "1:2"),
            "--rows 1:2 is past tensor 'output_norm.weight', which has 1 rows")
    # one MODEL: -m and a positional one, or two positional ones, are refused
    refused(run(kvbench_bin, "info", "-m", tiny, tiny), "expected one MODEL, got extra argument")
    refused(run(kvbench_bin, "info", tiny, tiny), "expected one MODEL, got extra argument")


def test_an_option_given_twice_is_refused(kvbench_bin, tiny, tmp_path):
    """An option that takes a value, given twice, is refused (exit 2, naming
    it; nothing on stdout, nothing written) in every command that parses
    options: getopt keeps the last value without a word, so `--budget 256
    ... --budget 1024` ran 1024 and `--out a ... --out b` wrote b. Options
    documented as repeatable (--set, replay's --param) and flags (--force)
    may repeat, as before, but not with one KEY twice (`--set seed=2 --set
    seed=3` ran seed 3)."""
    (tmp_path / "preds.jsonl").write_text('{"pred": "a", "answers": ["a"]}\n')
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1, "max_new": 4}))
    cfg = tmp_path / "c.json"
    cfg.write_text(json.dumps({"name": "t", "seed": 1, "methods": ["full"], "tasks": [
        {"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1, "max_new": 4}]}))
    a, b = tmp_path / "a", tmp_path / "b"
    cases = [
        (["sweep", cfg, "-m", tiny, "--out", a, "--out", b], "--out"),
        (["sweep", cfg, "-m", tiny, "-m", tiny, "--out", a], "--model"),
        (["sweep", cfg, "-m", tiny, "--out", a, "--threads", 1, "--threads", 2], "--threads"),
        (["sweep", cfg, "-m", tiny, "--out", a, "--shard", "0/2", "--shard", "1/2"], "--shard"),
        (["generate", "-m", tiny, "-p", "hi", "-n", 2, "--method", "quest", "--budget", 32, "--budget", 64],
         "--budget"),
        (["generate", "-m", tiny, "-p", "hi", "-p", "there", "-n", 2], "--prompt"),
        (["bench", "methods", "-m", "synthetic:smollm2-135m", "--contexts", 64, "--methods", "full",
          "--budgets", 32, "--budgets", 64, "--out", a], "--budgets"),
        (["bench", "engine", "-m", tiny, "--reps", 1, "--reps", 2], "--reps"),
        (["tokenize", "-m", tiny, "-p", "hi", "-p", "there"], "--prompt"),
        (["logits", "-m", tiny, "-p", "hi", "--out", a / "l.npy", "--out", b / "l.npy"], "--out"),
        (["prompts", task, "--counter", "bytes4", "--seed", 1, "--seed", 2], "--seed"),
        (["score", "-m", "exact_match", "-m", "f1", tmp_path / "preds.jsonl"], "--metric"),
        (["info", tiny, "--dump-tensor", "output_norm.weight", "--dump-tensor", "token_embd.weight"],
         "--dump-tensor"),
        (["plot", a, "--formats", "png", "--formats", "svg"], "--formats"),
        (["replay", "--trace", a, "--method", "full", "--method", "quest", "--out", b], "--method"),
    ]
    # one KEY twice in the KEY=VALUE options
    cases += [
        (["sweep", cfg, "-m", tiny, "--out", a, "--set", "seed=2", "--set", "seed=3"], "--set seed"),
        (["generate", "-m", tiny, "-p", "hi", "-n", 2, "--method", "quest", "--budget", 32,
          "--set", "page_size=16", "--set", "page_size=32"], "--set page_size"),
        (["replay", "--trace", a, "--method", "quest", "--budget", 32, "--param", "page_size=16",
          "--param", "page_size=32", "--out", b], "--param page_size"),
    ]
    for args, opt in cases:
        p = run(kvbench_bin, *args)
        refused(p, f"{opt} given twice")
        assert not a.exists() and not b.exists(), args
    # repeatable options with distinct keys, and flags
    p = run(kvbench_bin, "sweep", cfg, "-m", tiny, "--out", a, "--set", "seed=2", "--set", "name=u", "--dry-run",
            "--dry-run")
    assert p.returncode == 0, p.stderr
    p = run(kvbench_bin, "generate", "-m", tiny, "-p", "hi", "-n", 2, "--method", "quest", "--budget", 32,
            "--set", "page_size=16", "--set", "skip_layers=1", "--stats", "--stats")
    assert p.returncode == 0, p.stderr


def test_prompts_option_values_and_defaults(kvbench_bin, tmp_path):
    """prompts' options (--help, DATASETS.md): bad values refused before any
    work (exit 2, nothing printed); the seed is the config's, 42 when none
    is given (CONFIG.md), and --seed and --haystack win over the config's;
    --counter bytes4 counts against 8192 tokens unless --n-ctx. Cheap: the
    bytes4 counter loads no model."""
    task = {"task": "needle", "words": [60], "depths": [0.5], "per_cell": 1, "max_new": 4}

    def prompts(doc, *args):
        path = tmp_path / "p.json"
        path.write_text(json.dumps(doc))
        counter = [] if "--counter" in args else ["--counter", "bytes4"]
        return run(kvbench_bin, "prompts", path, *counter, *args)

    def ok(doc, *args):
        p = prompts(doc, *args)
        assert p.returncode == 0, p.stderr
        return p.stdout

    for args, msg in [(["--n-ctx", 15], "--n-ctx expects an integer in [16, 16777216], got '15'"),
                      (["--seed", -1], "--seed expects an integer in [0, 9007199254740992], got '-1'"),
                      (["--counter", "words"], "--counter expects model or bytes4, got 'words'")]:
        refused(prompts(task, *args), msg)
    refused(prompts({"seed": 1, "tasks": []}), "expected a sweep config with a non-empty 'tasks' array")
    seed42 = ok({"seed": 42, "tasks": [task]})
    assert ok(task) == seed42 and ok([task]) == seed42 and ok({"tasks": [task]}) == seed42
    assert ok({"seed": 43, "tasks": [task]}) != seed42  # the seed does change the sample
    assert ok({"seed": 43, "tasks": [task]}, "--seed", 42) == seed42
    # --haystack over the config's "haystack": the option's folder is read
    hay = tmp_path / "hay"
    hay.mkdir()
    (hay / "a.txt").write_text("The quiet river ran past the old mill at dawn. " * 40)
    own = ok({"tasks": [task], "haystack": str(tmp_path / "none")}, "--haystack", hay)
    assert "quiet river" in own.decode()
    # --data-dir over the config's "data_dir": the file is looked up under the option's folder
    fix = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "fixtures")
    sc = {"task": "scbench_kv", "file": "scbench/scbench_kv.jsonl"}
    assert ok({"tasks": [sc], "data_dir": str(tmp_path / "none")}, "--data-dir", fix)
    # bytes4 context: the needle's automatic word grid (no "words") ends at the
    # largest prompt that fits 8192 tokens with max_new; one word more adds a
    # few tokens, so the longest lies within 64 tokens of the limit
    auto = {k: v for k, v in task.items() if k != "words"}
    for args, n_ctx in [((), 8192), (("--n-ctx", 4096), 4096)]:
        longest = max(json.loads(ln)["prompt_tokens"] for ln in ok(auto, *args).decode().splitlines())
        assert n_ctx - 64 < longest + task["max_new"] <= n_ctx, (args, longest)


def test_extra_arguments_refused(kvbench_bin, tiny, tmp_path):
    """score takes one FILE.jsonl and tokenize none: a second file or a stray
    word is refused (exit 2, nothing printed), not dropped."""
    preds = tmp_path / "preds.jsonl"
    preds.write_text('{"pred": "a", "answers": ["a"]}\n')
    refused(run(kvbench_bin, "score", "-m", "exact_match", preds, preds), "expected one input FILE.jsonl")
    refused(run(kvbench_bin, "tokenize", "-m", tiny, "-p", "hi", "extra"), "unexpected argument 'extra'")
    p = run(kvbench_bin, "score", "-m", "exact_match", preds)
    assert p.returncode == 0 and p.stdout.startswith(b"1"), p.stderr
