"""The tokenizers we have no model file for, on synthetic tokenizer-only GGUF
files (metadata, no tensors), against HF `tokenizers` configured the same way
(tests/reference/tokenizer_ref.py):

* byte-level BPE with the Llama-3 pre-tokenizer (llama-bpe, ignore_merges,
  BOS by default), llama.cpp's "default" list, GPT-2's and the smollm alias
  "starcoder", on a vocabulary trained by HF's BpeTrainer (plus Llama-3-style
  special tokens) and, when the default model is present, on SmolLM2's real
  49152-token vocabulary;
* SentencePiece BPE with byte fallback (Mistral / LongChat / Llama-2 style)
  on a vocabulary trained the same way, with scores decreasing by id.

Exact id equality on every case string (200+); decode round trips.
"""
import json
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))
sys.path.insert(0, HERE)

pytest.importorskip("tokenizers")
pytest.importorskip("gguf")

import tokenizer_cases as cases  # noqa: E402
import tokenizer_ref as ref  # noqa: E402

BIN = os.environ.get("KVBENCH_BIN", "")
MODEL = os.environ.get("KVBENCH_MODEL_FILE", "")
pytestmark = pytest.mark.skipif(not os.path.exists(BIN), reason="KVBENCH_BIN not built")

import subprocess  # noqa: E402

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>", "<|eom_id|>", "<|reserved_special_token_0|>"]


UNREACHABLE = ["zqxjv", "Ġzqxjv"]  # "Ġ" is the byte-level space


def run(args):
    return subprocess.run([BIN, "tokenize", *args], capture_output=True, timeout=120)


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True) + "\n")


def encode_all(model, texts, tmp_path, extra=()):
    p = tmp_path / "in.jsonl"
    write_jsonl(p, texts)
    r = run(["-m", str(model), "--jsonl", str(p), *extra])
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().split("\n")[:-1]
    assert len(lines) == len(texts)
    return [[int(x) for x in ln.split()] for ln in lines]


def decode_all(model, id_lists, tmp_path, extra=()):
    p = tmp_path / "ids.jsonl"
    write_jsonl(p, id_lists)
    r = run(["-m", str(model), "--decode", "--jsonl", str(p), *extra])
    assert r.returncode == 0, r.stderr.decode()
    return [json.loads(ln) for ln in r.stdout.decode().split("\n")[:-1]]


def check_same(texts, got, want):
    for t, g, w in zip(texts, got, want):
        assert g == w, "%r: kvbench %s, HF %s" % (t, g, w)


@pytest.fixture(scope="module")
def bl_vocab():
    """Trained byte-level vocab + Llama-3 specials appended as control tokens."""
    tokens, merges = ref.train_byte_level(cases.corpus(), 1500)
    types = [ref.TT_NORMAL] * len(tokens)
    # Tokens no merge sequence produces: only ignore_merges (llama-bpe) can
    # emit them, as with some of Llama-3's tiktoken-derived tokens.
    for s in UNREACHABLE:
        tokens.append(s)
        types.append(ref.TT_NORMAL)
    for s in LLAMA3_SPECIALS:
        tokens.append(s)
        types.append(ref.TT_CONTROL)
    return tokens, merges, types


@pytest.fixture(scope="module")
def smol_vocab():
    if not os.path.exists(MODEL):
        pytest.skip("KVBENCH_MODEL_FILE absent")
    info = ref.read_gguf_tokenizer(MODEL)
    tokens, types = list(info["tokens"]), list(info["types"])
    for s in LLAMA3_SPECIALS:
        tokens.append(s)
        types.append(ref.TT_CONTROL)
    return tokens, list(info["merges"]), types


def byte_level_case(vocab, pre, tmp_path):
    tokens, merges, types = vocab
    bos = tokens.index("<|begin_of_text|>")
    eot = tokens.index("<|eot_id|>")
    path = tmp_path / ("bl-%s.gguf" % pre)
    ref.write_tokenizer_gguf(path, "gpt2", tokens, types=types, merges=merges, pre=pre, bos=bos, eos=eot)
    texts = cases.all_cases(LLAMA3_SPECIALS[:3] + ["<|eot_id|>"])
    hf = ref.hf_byte_level(tokens, merges, types, pre)
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    got = encode_all(path, texts, tmp_path)
    check_same(texts, got, want)
    back = decode_all(path, got, tmp_path, ["--render-special"])
    for t, b in zip(texts, back):
        assert b == t
    return path, bos


@pytest.mark.parametrize("pre", ["llama-bpe", "default", "gpt2", "starcoder"])
def test_byte_level_trained_vocab(bl_vocab, pre, tmp_path):
    byte_level_case(bl_vocab, pre, tmp_path)


@pytest.mark.parametrize("pre", ["llama3", "default"])
def test_byte_level_smollm2_vocab(smol_vocab, pre, tmp_path):
    byte_level_case(smol_vocab, pre, tmp_path)


def test_ignore_merges(bl_vocab, tmp_path):
    tokens, merges, types = bl_vocab
    texts = ["zqxjv", " zqxjv", "a zqxjv zqxjv"]
    for pre in ("llama-bpe", "gpt2"):
        path = tmp_path / ("im-%s.gguf" % pre)
        ref.write_tokenizer_gguf(path, "gpt2", tokens, types=types, merges=merges, pre=pre,
                                 bos=tokens.index("<|begin_of_text|>"))
        hf = ref.hf_byte_level(tokens, merges, types, pre)
        want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
        got = encode_all(path, texts, tmp_path)
        check_same(texts, got, want)
        whole = tokens.index("zqxjv") in got[0]
        assert whole == (pre == "llama-bpe")


def test_decode_bytes_that_never_occur_in_utf8(bl_vocab, tmp_path):
    """C0, C1 and F5..FF have no token in SmolLM2 (so test_tokenizer.py's
    random decode never meets them); the trained vocabulary has all 256 byte
    tokens. Decoding replaces each maximal ill-formed subpart by U+FFFD as
    Python's bytes.decode("utf-8", "replace") does (the reference): C0 80 is
    two replacement characters, not an overlong U+0000; F5 80 80 80 is four."""
    import random
    tokens, merges, types = bl_vocab
    path = tmp_path / "bytes.gguf"
    ref.write_tokenizer_gguf(path, "gpt2", tokens, types=types, merges=merges, pre="gpt2")
    import tinymodel
    b2u = dict(tinymodel.bytes_to_unicode())  # GPT-2's byte -> character map
    tid = {t: i for i, t in enumerate(tokens)}
    assert all(b2u[b] in tid for b in range(256))
    rng = random.Random(5)
    pool = [0xC0, 0xC1, 0xF5, 0xF6, 0xF7, 0xF8, 0xFB, 0xFC, 0xFE, 0xFF, 0x80, 0x8F, 0x90, 0xBF, 0x41]
    seqs = [b"\xc0\x80", b"\xc1\xbf", b"\xf5\x80\x80\x80", b"\xf7\xbf\xbf\xbf", b"a\xf4\x8f\xbf\xbfz"]
    seqs += [bytes(rng.choice(pool) for _ in range(rng.randint(1, 8))) for _ in range(500)]
    got = decode_all(path, [[tid[b2u[b]] for b in q] for q in seqs], tmp_path)
    for q, g in zip(seqs, got):
        assert g == q.decode("utf-8", "replace"), q
    assert got[:2] == ["\ufffd\ufffd"] * 2 and got[4] == "a\U0010ffffz"


def test_llama3_bos_and_stops(bl_vocab, tmp_path):
    path, bos = byte_level_case(bl_vocab, "llama-bpe", tmp_path)
    plain = encode_all(path, ["hi"], tmp_path)[0]
    with_bos = encode_all(path, ["hi", "<|begin_of_text|>hi"], tmp_path, ["--bos"])
    assert with_bos[0] == [bos] + plain          # llama-bpe adds BOS by default
    assert with_bos[1] == [bos] + plain          # ... and never twice
    # chat: the Llama-3 template writes <|begin_of_text|>; one BOS in the ids
    r = run(["-m", str(path), "--chat", "llama3", "-p", "hi"])
    ids = [int(x) for x in r.stdout.split()]
    assert ids.count(bos) == 1 and ids[0] == bos


def spm_vocab():
    return ref.train_spm(cases.corpus(), 1200)


@pytest.fixture(scope="module")
def spm():
    return spm_vocab()


def spm_gguf(spm, tmp_path, **kw):
    tokens, scores, types = spm
    path = tmp_path / "spm.gguf"
    ref.write_tokenizer_gguf(path, "llama", tokens, types=types, scores=scores, bos=1, eos=2, unk=0, **kw)
    return path


def test_spm_matches_hf(spm, tmp_path):
    tokens, scores, types = spm
    path = spm_gguf(spm, tmp_path)
    texts = cases.all_cases(["<unk>", "<s>", "</s>"])
    assert len(texts) >= 200
    hf = ref.hf_spm(tokens, scores, types)
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    got = encode_all(path, texts, tmp_path)
    check_same(texts, got, want)
    # byte fallback was exercised: some case needs <0xXX> tokens
    assert any(3 <= i < 259 for ids in got for i in ids)


def test_spm_no_special_and_bos(spm, tmp_path):
    tokens, scores, types = spm
    path = spm_gguf(spm, tmp_path)
    texts = cases.special_cases(["<unk>", "<s>", "</s>"])
    hf = ref.hf_spm(tokens, scores, types, specials=False)
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    check_same(texts, encode_all(path, texts, tmp_path, ["--no-special"]), want)
    plain = encode_all(path, ["hello there"], tmp_path)[0]
    got = encode_all(path, ["hello there", "<s>hello there"], tmp_path, ["--bos"])
    assert got[0] == [1] + plain          # SPM adds BOS by default
    assert got[1] == [1] + plain          # <s> in the text is that BOS


def test_spm_decode(spm, tmp_path):
    tokens, scores, types = spm
    path = spm_gguf(spm, tmp_path)
    texts = [t for t in cases.all_cases() if t]
    hf = ref.hf_spm(tokens, scores, types)
    ids = encode_all(path, texts, tmp_path, ["--bos"])
    back = decode_all(path, ids, tmp_path)
    for t, i, b in zip(texts, ids, back):
        assert b == t                                        # lossless (byte fallback)
        assert b == hf.decode(i, skip_special_tokens=True)   # and as HF decodes it


def test_spm_without_space_prefix(spm, tmp_path):
    from tokenizers import normalizers
    tokens, scores, types = spm
    path = spm_gguf(spm, tmp_path, add_space_prefix=False)
    texts = [t for t in cases.all_cases() if t][:120]
    hf = ref.hf_spm(tokens, scores, types)
    hf.normalizer = normalizers.Replace(" ", ref.SPACE)
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    check_same(texts, encode_all(path, texts, tmp_path), want)
