"""Engine logits vs an independent numpy reference forward
(tests/reference/llama_ref.py, which reads the GGUF with PyPI's `gguf` package
and dequantises with gguf.quants).

Tiny random models (written by tinymodel.py) keep most checks model-free: every
weight type, tied and untied output, linear RoPE scaling, Llama-3.1 rope_freqs,
GQA and MHA. The default model is checked on several prompts at positions up to
2048.

Tolerances (why): the reference runs in float64 and models the engine's f16 K/V
cache exactly (it rounds K and V to float16), so what remains is float32
arithmetic in the engine: GEMM and dot-product summation order, the polynomial
exp in the attention softmax (< 2e-7 relative) and float32 RoPE angles. On the
tiny models logits are O(1) and agree to 2e-3; on SmolLM2 (30 layers, logits
with standard deviation ~6) the observed error grows to ~0.02 at 2K tokens; we
allow max |diff| <= 0.1 there, a tenth of the smallest logit gap that changes a
greedy choice in practice, and require the argmax to agree wherever the
reference's top-2 gap exceeds that tolerance. The decode path (one token at a
time, the quantised mat-vec generation uses) must meet the same bounds.

The 2049-token reference forward takes ~20 s (50 s beside another test), and
CI runs this file twice (plain build, then sanitizers): its logits are kept in
.cache/reference/ (or $KVBENCH_REF_CACHE; "off" turns the cache off) under a key
made of everything they depend on: the model file's sha256, the source of
llama_ref.py and of the gguf package, numpy's version, the tokens, the rows and the
K/V dtype; an unreadable or misshapen file is computed again. The cached
values are the reference's own output, never the engine's.
"""
import hashlib
import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "reference"))
from llama_ref import LlamaRef  # noqa: E402

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def engine_logits(run_kvbench, tmp_path, model, tokens, path="prefill", positions=None, kv="f16"):
    out = tmp_path / f"logits_{path}_{kv}.npy"
    args = ["logits", "-m", model, "--tokens", ",".join(map(str, tokens)), "--path", path,
            "--kv", kv, "--out", out]
    if positions is not None:
        args += ["--positions", ",".join(map(str, positions))]
    run_kvbench(*args, check=True, timeout=600)
    return np.load(out)


def check_close(got, ref, tol, what):
    err = np.abs(got - ref).max(axis=1)
    assert err.max() <= tol, f"{what}: max |logit diff| {err.max():.4g} > {tol} (per row {err})"
    top2 = np.sort(ref, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > tol
    agree = got.argmax(axis=1) == ref.argmax(axis=1)
    assert agree[clear].all(), f"{what}: argmax differs at rows {np.where(clear & ~agree)[0]}"


TINY = [
    dict(wtype="F32"),
    dict(wtype="F16", tied=False),
    dict(wtype="BF16"),
    dict(wtype="Q8_0"),
    dict(wtype="Q4_0", n_head_kv=4),  # MHA
    dict(wtype="Q4_1"),
    dict(wtype="Q5_0", rope_scaling=("linear", 4.0)),
    dict(wtype="Q5_1", tied=False),
    dict(wtype="Q4_K", n_embd=256, n_ff=512, n_head=4, n_head_kv=1),
    dict(wtype="Q6_K", n_embd=256, n_ff=512, n_head=4, n_head_kv=2, rope_freqs=True),
    dict(wtype="Q4_1", embd_type="Q8_0", n_layer=3, n_head=8, n_head_kv=2, rope_theta=100000.0),
]


@pytest.mark.parametrize("cfg", TINY, ids=[str(i) + "-" + c["wtype"] for i, c in enumerate(TINY)])
def test_tiny_models(run_kvbench, tiny_llama, tmp_path, cfg):
    model = tiny_llama(**cfg)
    ref_model = LlamaRef(model)
    rng = np.random.default_rng(7)
    vocab = ref_model.W("token_embd.weight").shape[0]
    tokens = rng.integers(0, vocab, 300).tolist()
    for kv in ("f16", "f32"):
        ref = ref_model.forward(tokens, kv_dtype=kv)
        pre = engine_logits(run_kvbench, tmp_path, model, tokens, "prefill", kv=kv)
        check_close(pre, ref, 2e-3, f"{cfg} prefill kv={kv}")
    dec = engine_logits(run_kvbench, tmp_path, model, tokens[:80], "decode")
    check_close(dec, ref_model.forward(tokens[:80]), 2e-3, f"{cfg} decode")


# Optional keys the loader fills in when a file lacks them (engine.md §2: head_count_kv ->
# head_count, rope.freq_base -> 10000, key_length -> n_embd/n_head, vocab_size -> the tokens
# array; rope.dimension_count -> the head dim, the only value kvbench supports), and a scaling
# type "none" that overrides a factor in the file. The reference applies the same defaults on
# its own; same tolerance as above. (context_length and the RMSNorm eps have no default in
# engine.md §2 and are required: test_cli.py's broken models.)
OPTIONAL_KEYS = tuple("llama." + k for k in (
    "attention.head_count_kv", "rope.freq_base", "rope.dimension_count", "vocab_size"))


@pytest.mark.parametrize("scaling", [None, ("none", 4.0)], ids=["no-optional-keys", "scaling-none"])
def test_tiny_model_defaults(run_kvbench, tmp_path, scaling):
    import tinymodel
    model = str(tmp_path / "defaults.gguf")
    tinymodel._build(model, n_head=4, n_head_kv=4, rope_theta=10000.0, rope_scaling=scaling,
                     skip_keys=OPTIONAL_KEYS if scaling is None else ())
    ref_model = LlamaRef(model)
    tokens = np.random.default_rng(8).integers(0, ref_model.W("token_embd.weight").shape[0], 200).tolist()
    check_close(engine_logits(run_kvbench, tmp_path, model, tokens), ref_model.forward(tokens), 2e-3,
                f"defaults {scaling}")


def default_tokens(run_kvbench, model_file, text):
    p = run_kvbench("tokenize", "-m", model_file, "-p", text, check=True)
    return [int(x) for x in p.stdout.split()]


def long_text():
    # plain prose from the Debian corpus the harness uses (fortunes-min) or the licenses
    for path in ("/usr/share/games/fortunes/literature", "/usr/share/common-licenses/GPL-3"):
        if os.path.exists(path):
            return open(path, encoding="utf-8", errors="replace").read()
    pytest.skip("no prose corpus installed")


@pytest.fixture(scope="module")
def smollm(model_file):
    return LlamaRef(model_file)


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def ref_cache_path(model_file, tokens, rows, kv_dtype):
    """Where the reference logits for (model, tokens, rows, kv_dtype) are kept, or
    None when the cache is off. The key changes with the model's bytes, the
    source of llama_ref.py and of the gguf package (its reader and dequantisers,
    hashed file by file, so an in-tree gguf-py counts too), numpy's version, the
    tokens, the rows or the K/V dtype."""
    where = os.environ.get("KVBENCH_REF_CACHE", os.path.join(ROOT, ".cache", "reference"))
    if where == "off":
        return None
    import gguf
    gguf_dir = os.path.dirname(gguf.__file__)
    sources = [sys.modules[LlamaRef.__module__].__file__] + sorted(
        os.path.join(gguf_dir, n) for n in os.listdir(gguf_dir) if n.endswith(".py"))
    h = hashlib.sha256()
    for part in ([file_sha256(model_file)] + [file_sha256(f) for f in sources] +
                 [np.__version__, repr(list(tokens)), repr(list(rows)), kv_dtype]):
        h.update(part.encode() + b"\0")
    return os.path.join(where, f"forward-{h.hexdigest()[:32]}.npy")


def cached_forward(model_file, tokens, rows, kv_dtype="f16"):
    """LlamaRef(model_file).forward(tokens, kv_dtype, rows), read from the cache
    when it holds a readable array of the right shape, else computed and kept
    (written to a file of its own, then renamed: safe beside other workers; a
    cache that cannot be written is skipped)."""
    path = ref_cache_path(model_file, tokens, rows, kv_dtype)
    if path and os.path.exists(path):
        try:
            ref = np.load(path)
            if ref.ndim == 2 and ref.shape[0] == len(rows) and np.isfinite(ref).all():
                return ref
        except (OSError, ValueError, EOFError):
            pass
    ref = LlamaRef(model_file).forward(tokens, kv_dtype=kv_dtype, rows=rows)
    if path:
        tmp = f"{path}.{os.getpid()}.tmp.npy"
        try:
            os.makedirs(os.path.dirname(path), exist_ok=True)
            np.save(tmp, ref)
            os.replace(tmp, path)
        except OSError:
            if os.path.exists(tmp):
                os.unlink(tmp)
    return ref


def test_default_model_long_prompt(run_kvbench, model_file, tmp_path):
    tokens = default_tokens(run_kvbench, model_file, long_text())[:2049]
    assert len(tokens) == 2049
    positions = [0, 1, 17, 255, 256, 511, 1000, 1024, 1500, 2047, 2048]
    ref = cached_forward(model_file, tokens, positions)
    got = engine_logits(run_kvbench, tmp_path, model_file, tokens, "prefill", positions)
    check_close(got, ref, 0.1, "SmolLM2 2049-token prompt, prefill")


@pytest.mark.parametrize("text", [
    "The capital of France is Paris. The capital of Germany is",
    "<|im_start|>user\nWhat is 12 times 7?<|im_end|>\n<|im_start|>assistant\n",
    "def fibonacci(n):\n    if n < 2:\n        return n\n    return",
])
def test_default_model_prefill_and_decode(run_kvbench, model_file, smollm, tmp_path, text):
    tokens = default_tokens(run_kvbench, model_file, text)
    ref = smollm.forward(tokens)
    check_close(engine_logits(run_kvbench, tmp_path, model_file, tokens, "prefill"), ref, 0.1,
                f"prefill {text!r}")
    check_close(engine_logits(run_kvbench, tmp_path, model_file, tokens, "decode"), ref, 0.1,
                f"decode {text!r}")


def test_generate_paris(run_kvbench, model_file):
    p = run_kvbench("generate", "-m", model_file, "--chat", "-p", "What is the capital of France?",
                    "-n", "24", check=True)
    assert b"Paris" in p.stdout, p.stdout
