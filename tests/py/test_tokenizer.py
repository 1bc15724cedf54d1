"""kvbench tokenize on the default model (SmolLM2, byte-level BPE, pre
"smollm") agrees exactly with HF `tokenizers` built from the same GGUF's
vocabulary and merges (tests/reference/tokenizer_ref.py) on 200+ strings, with
and without special-token parsing; decode(encode(x)) == x; a 50 KB text
tokenizes fast and identically; bad input gives exit code 2 with file:line.

Exact equality is required: token ids are integers, any difference is a bug.
"""
import json
import os
import subprocess
import sys
import time

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
pytestmark = [
    pytest.mark.skipif(not os.path.exists(BIN), reason="KVBENCH_BIN not built"),
    pytest.mark.skipif(not os.path.exists(MODEL), reason="KVBENCH_MODEL_FILE absent"),
]


def run(args, timeout=120):
    return subprocess.run([BIN, "tokenize", *args], capture_output=True, timeout=timeout)


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=True) + "\n")


def encode_all(path_model, texts, tmp_path, extra=()):
    p = tmp_path / "in.jsonl"
    write_jsonl(p, texts)
    r = run(["-m", path_model, "--jsonl", str(p), *extra])
    assert r.returncode == 0, r.stderr.decode()
    lines = r.stdout.decode().split("\n")
    assert lines[-1] == ""
    lines = lines[:-1]
    assert len(lines) == len(texts)
    return [[int(x) for x in ln.split()] for ln in lines]


def decode_all(path_model, id_lists, tmp_path, extra=()):
    p = tmp_path / "ids.jsonl"
    write_jsonl(p, id_lists)
    r = run(["-m", path_model, "--decode", "--jsonl", str(p), *extra])
    assert r.returncode == 0, r.stderr.decode()
    # split on "\n" only: str.splitlines() would also split at U+2028 etc.
    return [json.loads(ln) for ln in r.stdout.decode().split("\n")[:-1]]


@pytest.fixture(scope="module")
def smol():
    info = ref.read_gguf_tokenizer(MODEL)
    assert info["model"] == "gpt2" and info["pre"] == "smollm"
    specials = [t for t, ty in zip(info["tokens"], info["types"]) if ty == ref.TT_CONTROL]
    return info, specials


def first_diff(texts, got, want):
    for t, g, w in zip(texts, got, want):
        if g != w:
            return "%r: kvbench %s, HF %s" % (t, g, w)
    return None


def test_matches_hf_on_cases(smol, tmp_path):
    info, specials = smol
    texts = cases.all_cases(specials)
    assert len(texts) >= 200
    hf = ref.hf_byte_level(info["tokens"], info["merges"], info["types"], "smollm")
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    got = encode_all(MODEL, texts, tmp_path)
    assert first_diff(texts, got, want) is None, first_diff(texts, got, want)


def test_missing_byte_tokens_dropped_like_hf(smol, tmp_path):
    info, _ = smol
    texts = cases.MISSING_BYTES
    hf = ref.hf_byte_level(info["tokens"], info["merges"], info["types"], "smollm")
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    got = encode_all(MODEL, texts, tmp_path)
    assert first_diff(texts, got, want) is None, first_diff(texts, got, want)
    assert 0 not in sum(got, [])  # never UNK (= <|endoftext|>, a stop token)


def test_no_special_matches_hf_without_added_tokens(smol, tmp_path):
    info, specials = smol
    texts = cases.special_cases(specials) + ["<|im_start|>user\nhi<|im_end|>"]
    hf = ref.hf_byte_level(info["tokens"], info["merges"], info["types"], "smollm", specials=False)
    want = [hf.encode(t, add_special_tokens=False).ids for t in texts]
    got = encode_all(MODEL, texts, tmp_path, ["--no-special"])
    assert first_diff(texts, got, want) is None, first_diff(texts, got, want)
    # and the special ids really are absent then
    assert not any(i < len(specials) for ids in got for i in ids)


def test_engine_md_candidate_vectors(tmp_path):
    # engine.md section 7 lists these from a third-party test file; they are
    # confirmed against HF in test_matches_hf_on_cases (all three are cases).
    got = encode_all(MODEL, ["Hello, we can use", "Hello world! 123", "\n"], tmp_path)
    assert got == [[19556, 28, 392, 416, 722], [19556, 905, 17, 216, 33, 34, 35], [198]]


def test_chatml_special_ids(tmp_path):
    got = encode_all(MODEL, ["<|im_start|>user\nhi<|im_end|>"], tmp_path)[0]
    assert got[0] == 1 and got[-1] == 2 and 198 in got


def test_decode_roundtrip(smol, tmp_path):
    info, specials = smol
    texts = cases.all_cases(specials)
    ids = encode_all(MODEL, texts, tmp_path)
    # byte-level BPE is lossless: with special tokens rendered, decoding gives
    # the text back byte for byte
    back = decode_all(MODEL, ids, tmp_path, ["--render-special"])
    for t, b in zip(texts, back):
        assert b == t
    # and HF's decoder agrees on the texts without special tokens
    hf = ref.hf_byte_level(info["tokens"], info["merges"], info["types"], "smollm")
    plain = decode_all(MODEL, ids, tmp_path)
    for t, i, p in zip(texts, ids, plain):
        assert p == hf.decode(i, skip_special_tokens=True), t


def test_decode_makes_valid_utf8(smol, tmp_path):
    """Byte-level pieces can end mid-character. Decoding replaces each maximal
    ill-formed subpart with U+FFFD, as HF's decoder (Rust's from_utf8_lossy)
    and Python's bytes.decode("utf-8", "replace") do, so predictions and
    truncated prompts are the reference's strings and the CSV/JSON written
    from them is valid UTF-8. References: Python's decoder on random byte
    strings spelled with the 256 single-byte tokens (lead bytes, stray and
    missing continuations, overlongs, surrogates, > U+10FFFF), and HF's
    decoder on random ids of the whole vocabulary. A decoded NUL byte (token
    190, byte 0x00) is the one documented difference: U+FFFD, since the C
    string would end there (docs/TOKENIZER.md), so the references' text has
    its NULs replaced the same way."""
    info, _ = smol
    tid = {t: i for i, t in enumerate(info["tokens"])}
    import tinymodel
    b2u = dict(tinymodel.bytes_to_unicode())  # GPT-2's byte -> character map
    byte_id = {b: tid[b2u[b]] for b in range(256) if b2u[b] in tid}  # a few control bytes lack one
    rng = __import__("random").Random(7)
    # (C0, C1 and F5..FF never occur in UTF-8 and have no token here)
    interesting = [0x41, 0x80, 0xBF, 0xC2, 0xDF, 0xE0, 0xA0, 0xED, 0x9F, 0xEF, 0xF0, 0x90, 0xF3,
                   0xF4, 0x8F]
    assert all(b in byte_id for b in interesting) and len(byte_id) > 200, sorted(set(range(256)) - set(byte_id))
    every = sorted(byte_id)
    assert 0 in byte_id and byte_id[0] == 190
    seqs = [bytes(rng.choice(interesting) if rng.random() < 0.7 else rng.choice(every)
                  for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    seqs += [b"A\0B", b"\0", b"\xc2\0\xa0", b"ends with NUL\0"]
    got = decode_all(MODEL, [[byte_id[b] for b in q] for q in seqs], tmp_path)
    for q, g in zip(seqs, got):
        assert g == q.decode("utf-8", "replace").replace("\0", "\ufffd"), q
    assert got[-4:] == ["A\ufffdB", "\ufffd", "\ufffd\ufffd\ufffd", "ends with NUL\ufffd"]
    hf = ref.hf_byte_level(info["tokens"], info["merges"], info["types"], "smollm")
    ids = [[rng.randrange(len(info["tokens"])) for _ in range(rng.randint(1, 6))] for _ in range(3000)]
    ids += [[19556, 190, 28], [190]]
    got = decode_all(MODEL, ids, tmp_path)
    for i, g in zip(ids, got):
        assert g == hf.decode(i, skip_special_tokens=True).replace("\0", "\ufffd"), i
    assert hf.decode([19556, 190, 28]) == "Hello\0," and got[-2] == "Hello\ufffd,"


def test_decode_prompt_and_pieces():
    r = run(["-m", MODEL, "--decode", "-p", "19556 28 392 416 722"])
    assert r.returncode == 0 and r.stdout.decode() == "Hello, we can use\n"
    r = run(["-m", MODEL, "--decode", "-p", "1 4093 2"])
    assert r.stdout.decode() == "user\n"  # control tokens are not rendered by default
    r = run(["-m", MODEL, "--decode", "--render-special", "-p", "1 4093 2"])
    assert r.stdout.decode() == "<|im_start|>user<|im_end|>\n"


def test_bos_flag():
    # SmolLM2 has add_bos_token = false: --bos adds nothing
    a = run(["-m", MODEL, "-p", "hi"]).stdout
    b = run(["-m", MODEL, "--bos", "-p", "hi"]).stdout
    assert a == b


def test_long_text_speed_and_ids(smol, tmp_path):
    """50 KB of prose: same ids as HF, and fast. The bound (2 s for 50 KB,
    i.e. > 25 KB/s) is a sanity check against quadratic behaviour, about
    two orders of magnitude above the measured time; the number is printed."""
    info, _ = smol
    src = "/usr/share/games/fortunes/literature"
    if os.path.exists(src):
        text = open(src, encoding="utf-8", errors="replace").read()
    else:
        text = " ".join(cases.PROSE) * 60
    text = (text * 3)[:50_000]
    hf = ref.hf_byte_level(info["tokens"], info["merges"], info["types"], "smollm")
    t0 = time.perf_counter()
    want = hf.encode(text, add_special_tokens=False).ids
    t_hf = time.perf_counter() - t0
    p = tmp_path / "long.jsonl"
    write_jsonl(p, [text])
    r = run(["-m", MODEL, "--jsonl", str(p), "--time"])
    assert r.returncode == 0, r.stderr.decode()
    got = [int(x) for x in r.stdout.split()]
    assert got == want
    msg = r.stderr.decode().strip()
    ms = float(msg.split(" in ")[1].split()[0])
    print("\nspeed: %s (HF tokenizers in-process: %.1f ms)" % (msg, t_hf * 1e3))
    assert ms < 2000, msg


def test_bad_inputs(tmp_path):
    p = tmp_path / "bad.jsonl"
    p.write_text('"ok"\n\n{not json}\n')
    r = run(["-m", MODEL, "--jsonl", str(p)])
    assert r.returncode == 2 and r.stdout == b""
    assert ("%s:3:" % p) in r.stderr.decode()
    p.write_text('"ok"\n42\n')
    r = run(["-m", MODEL, "--jsonl", str(p)])
    assert r.returncode == 2 and ("%s:2:" % p) in r.stderr.decode() and b"string" in r.stderr
    p.write_text('{"text": "a\\u0000b"}\n')
    r = run(["-m", MODEL, "--jsonl", str(p)])
    assert r.returncode == 2 and b"u0000" in r.stderr
    p.write_text('[1, 2, 999999]\n')
    r = run(["-m", MODEL, "--decode", "--jsonl", str(p)])
    assert r.returncode == 2 and b"ids[2]" in r.stderr
    r = run(["-m", str(tmp_path / "missing.gguf"), "-p", "x"])
    assert r.returncode != 0 and b"missing.gguf" in r.stderr
    r = run(["-m", MODEL])
    assert r.returncode == 2
    r = run(["-m", MODEL, "--decode", "-p", "12 x"])
    assert r.returncode == 2 and r.stdout == b""
    r = run(["-m", MODEL, "--chat", "jinja", "-p", "x"])
    assert r.returncode == 2 and b"chatml" in r.stderr


@pytest.mark.parametrize("mode,line,why", [
    ("encode", b'{"text": "a"} x', b"expected one JSON value per line"),
    ("encode", b'"caf\xe9"', b"byte 0xe9 at column 5 is not valid UTF-8"),
    ("encode", b'{"text": "a", "text": "b"}', b"key 'text' appears twice"),
    ("decode", b"[1, 2] [3]", b"expected one JSON value per line"),
    ("chat", b'{"messages": ["a\\u0000b"]}', b"\\u0000 in a string is not supported"),
], ids=["trailing_text", "latin1", "duplicate_key", "two_arrays", "chat_nul_escape"])
def test_jsonl_is_strict(tmp_path, mode, line, why):
    """--jsonl reads lines as every other JSONL reader of kvbench does: one
    JSON value per line, UTF-8 (RFC 8259), each key once, no \\u0000. Each
    bad line is refused with FILE:LINE and no output. The tokenizer used to
    read its lines with its own loop, which took the first value of a line
    and ignored the rest, tokenized Latin-1 bytes, took the first of two
    'text' keys (Python's json takes the last) and let \\u0000 cut a chat
    message short without a word."""
    p = tmp_path / "in.jsonl"
    p.write_bytes(b'"ok"\n' if mode == "encode" else b"[1]\n" if mode == "decode"
                  else b'{"messages": ["ok"]}\n')
    p.write_bytes(p.read_bytes() + line + b"\n")
    extra = {"encode": [], "decode": ["--decode"], "chat": ["--chat", "chatml"]}[mode]
    r = run(["-m", MODEL, "--jsonl", str(p), *extra])
    assert r.returncode == 2 and r.stdout == b"", r.stderr
    assert ("%s:2: " % p).encode() + why in r.stderr, r.stderr


def test_jsonl_layout(tmp_path):
    """Blank lines (spaces and tabs), CRLF ends and spaces after the value are
    layout: the ids equal those of -p for the same texts."""
    p = tmp_path / "in.jsonl"
    p.write_bytes(b'"hello world"  \r\n\n \t \n{"text": "caf\xc3\xa9"}\t\n')
    r = run(["-m", MODEL, "--jsonl", str(p)])
    assert r.returncode == 0, r.stderr
    want = b"".join(run(["-m", MODEL, "-p", t]).stdout for t in ["hello world", "caf\u00e9"])
    assert r.stdout == want and want.count(b"\n") == 2


def test_bad_tokenizer_metadata(smol, tmp_path):
    info, _ = smol
    toks, merges = info["tokens"][:400], [m for m in info["merges"][:50]]
    bad = tmp_path / "badpre.gguf"
    ref.write_tokenizer_gguf(bad, "gpt2", toks, merges=merges, pre="qwen9")
    r = run(["-m", str(bad), "-p", "x"])
    err = r.stderr.decode()
    assert r.returncode == 2 and "qwen9" in err and "llama-bpe" in err and str(bad) in err
    nopre = tmp_path / "nopre.gguf"
    ref.write_tokenizer_gguf(nopre, "gpt2", toks, merges=merges)
    r = run(["-m", str(nopre), "-p", "x"])
    assert r.returncode == 0 and b"tokenizer.ggml.pre is missing" in r.stderr
    nomodel = tmp_path / "nomodel.gguf"
    ref.write_tokenizer_gguf(nomodel, None, toks, merges=merges, pre="smollm")
    r = run(["-m", str(nomodel), "-p", "x"])
    assert r.returncode == 2 and b"tokenizer.ggml.model" in r.stderr
    nomerges = tmp_path / "nomerges.gguf"
    ref.write_tokenizer_gguf(nomerges, "gpt2", toks, pre="smollm")
    r = run(["-m", str(nomerges), "-p", "x"])
    assert r.returncode == 2 and b"tokenizer.ggml.merges" in r.stderr
    badbos = tmp_path / "badbos.gguf"
    ref.write_tokenizer_gguf(badbos, "gpt2", toks, merges=merges, pre="smollm", bos=100000)
    r = run(["-m", str(badbos), "-p", "x"])
    assert r.returncode == 2 and b"bos_token_id" in r.stderr
    # token_type: a value outside 0..6 (TOKENIZER.md: refused, naming the
    # token), and token_type / scores shorter than tokens
    for name, kw, want in [("type7", dict(types=[1] * 399 + [7]), b"token_type[399] = 7"),
                           ("shorttypes", dict(types=[1] * 399), b"token_type has 399 entries for 400"),
                           ("shortscores", dict(scores=[0.0] * 399), b"scores has 399 entries for 400")]:
        path = tmp_path / (name + ".gguf")
        ref.write_tokenizer_gguf(path, "gpt2", toks, merges=merges, pre="smollm", **kw)
        r = run(["-m", str(path), "-p", "x"])
        assert r.returncode == 2 and want in r.stderr, (name, r.stderr)
