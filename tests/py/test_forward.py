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


# --- kvbench generate against a greedy decoding by the numpy reference. The prompt's ids come
# from `kvbench tokenize` (checked against HF elsewhere); each step the reference's argmax over
# the logits of the last position is appended (docs/DESIGN.md: greedy, ties to the lower id, but
# the cases below have no near tie: every step's top-2 gap is asserted larger than twice the
# logit tolerance, so the engine's argmax must be the reference's); it stops at an
# end-of-generation id (engine.md: 0, 2 and 4 for SmolLM2; the tiny vocabulary's <|endoftext|>
# and <|im_end|>) or after max-new tokens. The expected stdout is those ids' text, written
# with GPT-2's byte decoder from the GGUF's own vocabulary (raw bytes: a byte token may
# leave a partial UTF-8 sequence), then one newline; --stats must
# count the tokens printed (the stop token excluded).

def gguf_tokens(path):
    import gguf
    f = gguf.GGUFReader(path).fields["tokenizer.ggml.tokens"]
    return [bytes(f.parts[i]).decode("utf-8") for i in f.data]


def gpt2_text(vocab, ids):
    import tinymodel
    inv = {c: b for b, c in tinymodel.bytes_to_unicode()}
    return b"".join(bytes(inv[ch] for ch in vocab[i]) for i in ids)


def reference_greedy(ref, prompt_ids, max_new, eog, tol):
    toks, gen = list(prompt_ids), []
    for _ in range(max_new):
        row = ref.forward(toks, rows=[len(toks) - 1])[0]
        top2 = np.sort(row)[-2:]
        assert top2[1] - top2[0] > 2 * tol, "near tie in the reference: pick another prompt"
        nxt = int(np.argmax(row))
        if nxt in eog:
            break
        gen.append(nxt)
        toks.append(nxt)
    return gen


def generated(run_kvbench, model, *args):
    p = run_kvbench("generate", "-m", model, "--stats", *args, check=True, timeout=300)
    import re
    m = re.search(r"prompt (\d+) tokens, .*; (\d+) tokens generated", p.stderr.decode())
    assert m, p.stderr
    return p.stdout, int(m.group(1)), int(m.group(2))


def test_generate_greedy_matches_reference_tiny(run_kvbench, tiny_llama):
    """No -n: the default of 256 new tokens (README); this prompt never reaches an
    end-of-generation token in 256 greedy steps (the reference's own run says so)."""
    model = tiny_llama(seed=1, n_ctx=1024)
    ids = default_tokens(run_kvbench, model, "key value cache")
    gen = reference_greedy(LlamaRef(model), ids, 256, {0, 2}, 2e-3)
    assert len(gen) == 256
    out, n_prompt, n_gen = generated(run_kvbench, model, "-p", "key value cache")
    assert (n_prompt, n_gen) == (len(ids), 256)
    assert out == gpt2_text(gguf_tokens(model), gen) + b"\n"
    out, n_prompt, n_gen = generated(run_kvbench, model, "-p", "key value cache", "-n", "7")
    assert n_gen == 7 and out == gpt2_text(gguf_tokens(model), gen[:7]) + b"\n"


def test_generate_prints_a_long_token_whole(run_kvbench, tiny_llama):
    """A token longer than 256 bytes is printed whole (generate copied each token's
    text into a 256-byte buffer and cut it there). The first token the reference
    generates after the prompt is given a 300-byte text in a second model with the
    same weights, whose prompt encodes to the same ids (checked)."""
    model = tiny_llama(seed=1, n_ctx=1024)
    ids = default_tokens(run_kvbench, model, "key value cache")
    gen = reference_greedy(LlamaRef(model), ids, 1, {0, 2}, 2e-3)
    assert len(gen) == 1
    long_model = tiny_llama(seed=1, n_ctx=1024, token_text={gen[0]: "z" * 300})
    assert default_tokens(run_kvbench, long_model, "key value cache") == ids
    out, n_prompt, n_gen = generated(run_kvbench, long_model, "-p", "key value cache", "-n", "1")
    assert (n_prompt, n_gen) == (len(ids), 1)
    assert out == b"z" * 300 + b"\n"


def test_generate_stops_at_end_of_turn(run_kvbench, model_file, smollm):
    """SmolLM2 answers in a few tokens, then <|im_end|>: generation stops there, well
    before -n 40, without printing it, and --stats counts the answer's tokens only."""
    q = "What is 2+2? Answer with one number."
    p = run_kvbench("tokenize", "-m", model_file, "--chat", "auto", "-p", q, check=True)
    ids = [int(x) for x in p.stdout.split()]
    gen = reference_greedy(smollm, ids, 40, {0, 2, 4}, 0.1)
    assert 0 < len(gen) < 40
    p = run_kvbench("generate", "-m", model_file, "--stats", "--chat", "-p", q, "-n", "40", check=True)
    import re
    m = re.search(r"prompt (\d+) tokens, .*; (\d+) tokens generated, .*method full: (\d+) tokens resident "
                  r"per KV head, ([0-9.]+) MiB resident", p.stderr.decode())
    assert m, p.stderr
    assert (int(m.group(1)), int(m.group(2))) == (len(ids), len(gen))
    assert p.stdout == gpt2_text(gguf_tokens(model_file), gen) + b"\n"
    # the cache holds the prompt and every generated token fed back (the stop token is not);
    # its size by hand, in the default f16 (README): K and V x 30 layers x 3 KV heads x 64
    # dims x 2 bytes = 23040 bytes a token, printed to 0.1 MiB (f32 would print twice that)
    resident = len(ids) + len(gen)
    assert int(m.group(3)) == resident
    assert abs(float(m.group(4)) - resident * 23040 / 2**20) <= 0.05 + 1e-9, m.group(0)


# --- kvbench logits: which rows it writes, their shape and dtype (README: float32
# [len(positions), n_vocab], row i the logits after token positions[i]).

@pytest.mark.parametrize("path", ["prefill", "decode"])
def test_logits_rows_follow_positions(run_kvbench, tiny_llama, tmp_path, path):
    """Positions out of order, repeated, on both sides of the prefill's 256-token
    chunks and at both ends: each row must be the reference's row of that position
    (same 2e-3 tolerance as above; a wrong row is off by O(1))."""
    model = tiny_llama()
    ref_model = LlamaRef(model)
    tokens = np.random.default_rng(9).integers(0, ref_model.W("token_embd.weight").shape[0], 300).tolist()
    ref = ref_model.forward(tokens)
    positions = [299, 0, 256, 255, 0, 257, 299, 1]
    out = tmp_path / "rows.npy"
    run_kvbench("logits", "-m", model, "--tokens", ",".join(map(str, tokens)), "--path", path,
                "--positions", ",".join(map(str, positions)), "--out", out, check=True)
    got = np.load(out)
    assert got.dtype == np.dtype("<f4") and got.shape == (len(positions), ref.shape[1])
    check_close(got, ref[positions], 2e-3, f"positions {positions}, {path}")


def test_logits_defaults_are_prefill_and_f16(run_kvbench, tiny_llama, tmp_path):
    """README: --path prefill and --kv f16 are the defaults. The reference cannot tell
    f16 from f32 K/V within its tolerance, so the default run is compared bit for bit
    with the runs that name each choice, which must differ from the other choices."""
    model = tiny_llama()
    tokens = list(range(3, 203))
    arrays = {}
    for name, extra in [("default", []), ("prefill-f16", ["--path", "prefill", "--kv", "f16"]),
                        ("decode-f16", ["--path", "decode", "--kv", "f16"]),
                        ("prefill-f32", ["--path", "prefill", "--kv", "f32"])]:
        out = tmp_path / f"{name}.npy"
        run_kvbench("logits", "-m", model, "--tokens", " ".join(map(str, tokens)), "--out", out, *extra,
                    check=True)
        arrays[name] = np.load(out)
    assert np.array_equal(arrays["default"], arrays["prefill-f16"])
    assert not np.array_equal(arrays["default"], arrays["decode-f16"])
    assert not np.array_equal(arrays["default"], arrays["prefill-f32"])


def test_logits_length_bounds(run_kvbench, tiny_llama, tmp_path):
    """1 to n_ctx tokens (the model's context, 64 here) are taken, 0 and n_ctx + 1 are
    refused (exit 2, no file); positions run from 0 to n - 1."""
    model = tiny_llama(n_ctx=64)
    out = tmp_path / "l.npy"

    def logits(tokens, *extra):
        return run_kvbench("logits", "-m", model, "--tokens", " ".join(["5"] * tokens), "--out", out, *extra)
    for n in (1, 64):
        assert logits(n, "--positions", str(n - 1)).returncode == 0
        assert np.load(out).shape[0] == 1
        out.unlink()
    for n, extra, msg in [(65, [], b"65 tokens: expected 1 to 64"), (0, [], b"0 tokens: expected 1 to 64"),
                          (3, ["--positions", "3"], b"--positions"), (3, ["--positions", "-1"], b"--positions")]:
        p = logits(n, *extra)
        assert p.returncode == 2 and msg in p.stderr, (n, extra, p.stderr)
        assert not out.exists()
    # -p: a prompt refused for its length or its positions prints no ids on stdout
    # ("x " * 200: at most 400 tokens and more than 64, as each word "x" or " x" is at least one)
    for text, extra, msg in [("x " * 200, [], b"expected 1 to 64"), ("hi", ["--positions", "60"], b"--positions")]:
        p = run_kvbench("logits", "-m", model, "-p", text, "--out", out, *extra)
        assert p.returncode == 2 and msg in p.stderr and p.stdout == b"", (text, extra, p.stdout, p.stderr)
        assert not out.exists()


def test_logits_prompt_is_tokenized_like_tokenize(run_kvbench, tiny_llama, model_file, tmp_path):
    """logits -p prints the ids it ran, one line, space-separated: the text encoded as
    plain text (special-token text not parsed, like `tokenize --no-special`; SmolLM2
    adds no BOS, where tokenize would add one only with --bos), or with --chat the
    model's chat format (like `tokenize --chat auto`); the .npy has one row per id."""
    text = "<|im_start|>Paris is"
    for extra, tok_args in [([], ["--no-special"]), (["--chat"], ["--chat", "auto"])]:
        want = run_kvbench("tokenize", "-m", model_file, *tok_args, "-p", text, check=True).stdout
        out = tmp_path / "p.npy"
        p = run_kvbench("logits", "-m", model_file, "-p", text, *extra, "--out", out, check=True)
        assert p.stdout == want and want.count(b"\n") == 1 and b" " in want, (extra, p.stdout, want)
        assert np.load(out).shape == (len(want.split()), 49152)
    # the text's special-token part does change the ids when parsed
    assert (run_kvbench("tokenize", "-m", model_file, "-p", text, check=True).stdout !=
            run_kvbench("tokenize", "-m", model_file, "--no-special", "-p", text, check=True).stdout)


def test_logits_and_generate_add_bos_when_the_model_asks(run_kvbench, tiny_llama, tmp_path):
    """A model whose metadata says add_bos_token = true gets its BOS (id 1 in the tiny
    vocabulary) before the prompt's ids, in logits -p (the ids printed, the rows
    written) and in generate (the prompt count of --stats); a model that says false
    does not (TOKENIZER.md: add_bos = 1 adds BOS only if the model wants it)."""
    plain = [int(x) for x in run_kvbench("tokenize", "-m", tiny_llama(), "-p", "hello there",
                                         check=True).stdout.split()]
    assert plain and plain[0] != 1
    for add_bos, want in [(True, [1] + plain), (False, plain)]:
        model = tiny_llama(add_bos=add_bos)
        out = tmp_path / "b.npy"
        p = run_kvbench("logits", "-m", model, "-p", "hello there", "--out", out, check=True)
        assert [int(x) for x in p.stdout.split()] == want and np.load(out).shape[0] == len(want)
        assert generated(run_kvbench, model, "-p", "hello there", "-n", "2")[1] == len(want)
