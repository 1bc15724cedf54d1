"""GGUF reading on tiny files written by PyPI's gguf package (no model needed):

- for every weight type tinymodel can write (F32, F16, BF16, Q4_0, Q4_1, Q5_0,
  Q5_1, Q8_0, Q4_K, Q6_K), `kvbench info` agrees with gguf.GGUFReader and the
  dequantised rows (`info --dump-tensor`) equal gguf.quants.dequantize exactly
  (same float32 operations on both sides; %.9g round-trips float32);
- a file holding one tensor of every ggml type id kvbench knows, of random
  bytes: info prints each type name and the byte size gguf's own
  GGML_QUANT_SIZES gives (an independent check of our type table; for Q8_1
  ggml's own layout, where gguf-py's table is stale), and
  --dump-tensor refuses the unsupported ones;
- malformed and missing files exit 2 with the reason on stderr and no stdout;
- tinymodel's tokenizer and broken variants have the promised structure;
- the Q4_K/Q6_K packers in tinymodel (gguf 0.19 cannot quantise those) round-trip
  through gguf.quants.dequantize to within the quantisation step.
Needs $KVBENCH_BIN (skips otherwise, except the tinymodel-only tests)."""
import numpy as np
import gguf
import pytest

import tinymodel
from gguf_info import compare_with_reader, parse_dump, parse_info, reference_rows

T = gguf.GGMLQuantizationType


def kquant(wtype):
    return dict(n_embd=256, n_ff=512) if wtype.endswith("_K") else {}


@pytest.mark.parametrize("wtype", tinymodel.WTYPES)
def test_info_and_dequant_every_wtype(run_kvbench, tiny_llama, wtype):
    path = tiny_llama(wtype=wtype, **kquant(wtype))
    p = run_kvbench("info", path, check=True)
    r = compare_with_reader(parse_info(p.stdout), path)
    for t in r.tensors:
        rows = int(np.prod([int(x) for x in t.shape[1:]])) if len(t.shape) > 1 else 1
        r0, r1 = max(0, rows - 3), rows  # last rows: catches offset mistakes
        d = run_kvbench("info", "--dump-tensor", t.name, "--rows", f"{r0}:{r1}", path, check=True)
        got = parse_dump(d.stdout)
        want = reference_rows(t, r0, r1)
        for i, row in enumerate(range(r0, r1)):
            np.testing.assert_array_equal(got[row], want[i], err_msg=f"{wtype} {t.name} row {row}")


def test_untied_rope_freqs_and_scaling(run_kvbench, tiny_llama):
    path = tiny_llama(tied=False, rope_freqs=True, rope_scaling=("linear", 4.0), n_layer=1)
    info = parse_info(run_kvbench("info", path, check=True).stdout)
    compare_with_reader(info, path)
    names = {t["name"]: t for t in info["tensors"]}
    assert names["output.weight"]["shape"] == names["token_embd.weight"]["shape"]
    assert names["rope_freqs.weight"]["shape"] == [8] and names["rope_freqs.weight"]["type"] == "F32"
    kv = {k["key"]: k for k in info["kv"]}
    assert kv[b"llama.rope.scaling.type"]["value"][0] == b"linear"
    assert float(kv[b"llama.rope.scaling.factor"]["value"]) == 4.0


# ------------------------------------------------------------ every type id

def all_types_file(path):
    """One [256 x 2] tensor per type id of gguf's table that kvbench lists."""
    w = gguf.GGUFWriter(str(path), "llama")
    rng = np.random.default_rng(1)
    ids = []
    for qt, (blck, size) in gguf.GGML_QUANT_SIZES.items():
        if int(qt) > 39:
            continue  # newer than kvbench's table (unknown there: tested below)
        nbytes = 256 // blck * size
        data = rng.integers(0, 256, size=(2, nbytes), dtype=np.uint8)
        w.add_tensor(f"t{int(qt)}", data, raw_dtype=qt)  # byte shape -> [256, 2]
        ids.append(qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return ids


# ggml's block_q8_1 is two f16 (d, s) and 32 int8 quants, 36 bytes
# (static_assert(sizeof(block_q8_1) == 2*sizeof(ggml_half) + QK8_1) in
# ggml-common.h); gguf-py 0.19's table still has the old float layout, 40 bytes.
# A file ggml writes holds ggml's layout, so that is the size to check against.
GGML_LAYOUT_SIZES = {gguf.GGMLQuantizationType.Q8_1: (32, 2 * 2 + 32)}


def test_every_known_type_size(run_kvbench, tmp_path, monkeypatch):
    for qt, bs in GGML_LAYOUT_SIZES.items():  # gguf's writer sizes tensors from its table
        monkeypatch.setitem(gguf.GGML_QUANT_SIZES, qt, bs)
    path = tmp_path / "types.gguf"
    ids = all_types_file(path)
    info = parse_info(run_kvbench("info", path, check=True).stdout)
    by = {t["name"]: t for t in info["tensors"]}
    supported = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K"}
    for qt in ids:
        blck, size = gguf.GGML_QUANT_SIZES[qt]
        t = by[f"t{int(qt)}"]
        assert t["type"] == qt.name and t["bytes"] == 2 * (256 // blck) * size, (qt.name, t)
        d = run_kvbench("info", "--dump-tensor", f"t{int(qt)}", path)
        if qt.name in supported:
            assert d.returncode == 0, (qt.name, d.stderr)
        else:
            assert d.returncode == 2 and b"cannot dequantise" in d.stderr and d.stdout == b"", qt.name


# --------------------------------------------------------------- bad input

def test_bad_files_exit_2(run_kvbench, tiny_llama, tmp_path):
    good = open(tiny_llama(), "rb").read()
    cases = {
        "magic.gguf": (b"GGUX" + good[4:], b"not a GGUF file"),
        "cut.gguf": (good[:len(good) // 2], b"past the end"),
        "header.gguf": (good[:1000], b"metadata key #"),
        "v1.gguf": (good[:4] + b"\x01\x00\x00\x00" + good[8:], b"version 1"),
    }
    for name, (data, words) in cases.items():
        path = tmp_path / name
        path.write_bytes(data)
        p = run_kvbench("info", path)
        assert p.returncode == 2, name
        assert p.stdout == b"", name
        assert p.stderr.startswith(b"kvbench info: " + str(path).encode() + b": "), p.stderr
        assert words in p.stderr, (name, p.stderr)
    p = run_kvbench("info")
    assert p.returncode == 2 and b"missing MODEL" in p.stderr
    p = run_kvbench("info", tmp_path / "absent.gguf")
    assert p.returncode == 2 and b"cannot open" in p.stderr
    p = run_kvbench("info", "--help")
    assert p.returncode == 0 and b"usage: kvbench info" in p.stdout


# ------------------------------------------------------------ tinymodel

def test_tiny_tokenizer_structure():
    tokens, types, merges = tinymodel.tiny_vocab()
    assert tokens[:3] == ["<|endoftext|>", "<|im_start|>", "<|im_end|>"] and types[:3] == [3, 3, 3]
    byte_chars = tokens[3:259]
    # GPT-2 bytes_to_unicode: '!'..'~' first, space -> U+0120 'Ġ', newline -> U+010A 'Ċ'
    assert byte_chars[0] == "!" and byte_chars[93] == "~"
    assert len(set(byte_chars)) == 256 and "\u0120" in byte_chars and "\u010a" in byte_chars
    assert byte_chars.index("\u0100") == 188  # byte 0, first unprintable
    assert 200 <= len(merges) <= tinymodel.N_MERGES
    vocab = set(tokens)
    assert len(vocab) == len(tokens)
    for m in merges:
        a, b = m.split(" ")
        assert a in vocab and b in vocab and a + b in vocab, m
    assert tinymodel.tiny_vocab() == (tokens, types, merges)  # deterministic


def test_tiny_metadata(tiny_llama):
    r = gguf.GGUFReader(tiny_llama())
    f = r.fields
    s = lambda k: bytes(f[k].parts[f[k].data[0]]).decode()
    n = lambda k: f[k].parts[f[k].data[0]][0].item()
    assert s("general.architecture") == "llama" and s("tokenizer.ggml.model") == "gpt2"
    assert s("tokenizer.ggml.pre") == "smollm" and "<|im_start|>" in s("tokenizer.chat_template")
    assert (n("llama.block_count"), n("llama.embedding_length"), n("llama.attention.head_count"),
            n("llama.attention.head_count_kv"), n("llama.feed_forward_length")) == (2, 64, 4, 2, 96)
    assert (n("tokenizer.ggml.bos_token_id"), n("tokenizer.ggml.eos_token_id")) == (1, 2)
    assert len(f["tokenizer.ggml.tokens"].data) == n("llama.vocab_size")
    assert "output.weight" not in [t.name for t in r.tensors]


@pytest.mark.parametrize("kind,check", [
    ("arch", lambda r: bytes(r.fields["general.architecture"].parts[-1]) == b"gpt9"),
    ("missing_tensor", lambda r: "blk.0.attn_q.weight" not in [t.name for t in r.tensors]),
    ("wrong_shape", lambda r: [int(x) for x in next(t for t in r.tensors
                                                     if t.name == "blk.0.attn_k.weight").shape] == [64, 33]),
    ("missing_key", lambda r: "llama.embedding_length" not in r.fields),
])
def test_broken_variants(tmp_path, kind, check):
    path = tmp_path / f"{kind}.gguf"
    tinymodel.write_broken_llama(path, kind)
    assert check(gguf.GGUFReader(str(path)))


@pytest.mark.parametrize("wtype,max_rel", [("Q4_K", 0.12), ("Q6_K", 0.03)])
def test_kquant_packers_round_trip(wtype, max_rel):
    # RMS error relative to RMS of the data: ~1/(2*sqrt(3)*15) * range/std for 4 bits
    # (about 0.07 for Gaussian sub-blocks), ~4x smaller for 6 bits; bounds leave margin.
    w = np.random.default_rng(3).normal(size=(8, 512)).astype(np.float32)
    data, qt = tinymodel.encode_tensor(w, wtype)
    back = gguf.quants.dequantize(data, qt).reshape(w.shape)
    rel = np.sqrt(np.mean((back - w) ** 2) / np.mean(w ** 2))
    assert rel < max_rel, rel


def test_type_newer_than_our_table_is_refused(run_kvbench, tmp_path):
    newer = [qt for qt in gguf.GGML_QUANT_SIZES if int(qt) > 39]
    if not newer:
        pytest.skip("this gguf package knows no type id above 39")
    qt = newer[0]
    blck, size = gguf.GGML_QUANT_SIZES[qt]
    path = tmp_path / "newer.gguf"
    w = gguf.GGUFWriter(str(path), "llama")
    w.add_tensor("blk.0.novel", np.zeros((1, 256 // blck * size), np.uint8), raw_dtype=qt)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    p = run_kvbench("info", path)
    assert p.returncode == 2 and p.stdout == b""
    assert f"tensor 'blk.0.novel': unknown ggml type id {int(qt)}".encode() in p.stderr, p.stderr
