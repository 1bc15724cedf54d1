"""run_all.sh's own checks, the ones that stop it before any sweep: its
option values (exit 2 before the set-up runs) and the check of every config
with `kvbench sweep --dry-run` (exit 2 before the output directory is made).
A whole run takes minutes and is checked by hand (docs/RELIABILITY.md)."""
import fcntl
import os
import subprocess

import pytest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
RUN_ALL = os.path.join(ROOT, "run_all.sh")


def run_all(*args, cwd, env=None, timeout=600):
    return subprocess.run(["bash", RUN_ALL, *map(str, args)], capture_output=True, text=True, cwd=cwd, env=env,
                          timeout=timeout)


@pytest.mark.parametrize("args,msg", [
    (["--out"], "--out needs a value"),
    (["--out", ""], "--out needs a value"),
    (["--model"], "--model needs a value"),
    (["--threads", "0"], "--threads expects an integer in [1, 1024], got '0'"),
    (["--threads", "2x"], "--threads expects an integer in [1, 1024], got '2x'"),
    (["--threads", "1025"], "--threads expects an integer in [1, 1024], got '1025'"),
    (["--model", "synthetic:smollm2-135m"], "a sweep needs a GGUF file with a tokenizer"),
    (["--full"], "--full needs --model PATH"),
    (["--bogus"], "unknown option '--bogus'"),
    (["--out", "a", "--out", "b"], "--out given twice"),
    (["--threads", "1", "--threads", "2"], "--threads given twice"),
])
def test_bad_options(tmp_path, args, msg):
    """exit 2 naming the option, before the set-up (packages, build, model);
    before, a missing value was bash's own `${2:?}` message with exit 1, and
    --threads 0 was found only after the set-up, by the first sweep."""
    p = run_all(*args, cwd=tmp_path, timeout=60)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert msg in p.stderr and "set-up" not in p.stderr, p.stderr
    assert os.listdir(tmp_path) == []


def test_out_must_be_a_directory(tmp_path):
    (tmp_path / "f").write_text("x")
    p = run_all("--quick", "--out", "f", cwd=tmp_path, timeout=60)
    assert p.returncode == 2 and "--out " + str(tmp_path / "f") + " is not a directory" in p.stderr, p.stderr


def test_every_config_checked_before_any_sweep(kvbench_bin, tiny_llama, tmp_path):
    """--full on a model whose context is 2K: the paper configs cannot run
    (their contexts, their data files), which `kvbench sweep --dry-run` finds
    for each before anything runs: exit 2, and the output directory is never
    made. Relative --out and --model are taken from the directory run_all.sh
    starts in (before, from the checkout's, where run_all.sh changes to).
    Before, the first config's sweep ran (on a paper-sized model, hours) and
    the run stopped at the first config whose data was missing."""
    if os.path.realpath(kvbench_bin) != os.path.join(ROOT, "build", "kvbench"):
        pytest.skip("run_all.sh runs the checkout's build/kvbench")
    model = tiny_llama(n_ctx=2048)
    os.symlink(model, tmp_path / "m.gguf")
    p = run_all("--full", "--model", "m.gguf", "--out", "o", cwd=tmp_path)
    assert p.returncode == 2, (p.returncode, p.stderr)
    # every config that cannot run is named, not only the first
    [last] = [x for x in p.stderr.splitlines() if x.startswith("run_all.sh:")]
    assert last.endswith("cannot run (above); nothing was run"), p.stderr
    assert "configs/paper_needle.json" in last and "configs/paper_scbench.json" in last, last
    assert "== sweep" not in p.stderr, p.stderr
    assert not (tmp_path / "o").exists() and not os.path.exists(os.path.join(ROOT, "o"))
    # the model was found where run_all.sh was started: the refusal is about the plan, not the path
    assert "m.gguf: cannot open" not in p.stderr and "does not fit the model context 2048" in p.stderr, p.stderr


def _checkout_build(kvbench_bin):
    if os.path.realpath(kvbench_bin) != os.path.join(ROOT, "build", "kvbench"):
        pytest.skip("run_all.sh runs the checkout's build/kvbench")


def test_kvbench_model_from_the_starting_directory(kvbench_bin, tiny_llama, tmp_path):
    """A relative $KVBENCH_MODEL is read from where run_all.sh starts, as
    --model is (before, from the checkout: "m.gguf: cannot open"). The tiny
    model's 512-token context refuses quick.json's plan in the check before
    any sweep, which shows that the file was found and read."""
    _checkout_build(kvbench_bin)
    os.symlink(tiny_llama(n_ctx=512), tmp_path / "m.gguf")
    p = run_all("--quick", "--out", "o", cwd=tmp_path, env={**os.environ, "KVBENCH_MODEL": "m.gguf"})
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "model: " + str(tmp_path / "m.gguf") in p.stderr, p.stderr
    # a refusal of the plan (its lengths), which needs the model's tokenizer: not of the path
    assert "cannot open" not in p.stderr and "configs/quick.json: tasks[" in p.stderr, p.stderr
    assert "configs/quick.json cannot run (above); nothing was run" in p.stderr, p.stderr
    assert not (tmp_path / "o").exists()


def test_one_run_all_per_output_directory(kvbench_bin, model_file, tmp_path):
    """While a run_all.sh writes DIR (a lock on DIR, held here), a second one
    is refused before its first sweep (exit 2): it would remove the first
    one's speed.new."""
    _checkout_build(kvbench_bin)
    out = tmp_path / "o"
    out.mkdir()
    fd = os.open(out, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        p = run_all("--quick", "--out", out, cwd=tmp_path)
    finally:
        os.close(fd)
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert "another run_all.sh is writing " + str(out) in p.stderr and "== sweep" not in p.stderr, p.stderr
    assert os.listdir(out) == []
