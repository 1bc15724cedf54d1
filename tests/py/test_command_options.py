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
