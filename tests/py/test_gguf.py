"""`kvbench info` on the real default model agrees with PyPI's gguf.GGUFReader
(header, every metadata key with type and value, every tensor's name, type,
shape, offset and size), and kvbench's dequantisation of a few tensors
(hidden `info --dump-tensor`) equals gguf.quants.dequantize.

Tolerance for values: exact. Both sides form each float32 value with the same
operations (Q8_0: d*q; Q4_1: d*q + m, float32 products and sums without FMA);
`--dump-tensor` prints %.9g, which round-trips float32 exactly.
Skipped when $KVBENCH_MODEL_FILE or $KVBENCH_BIN is missing."""
import numpy as np
import pytest

from gguf_info import compare_with_reader, parse_dump, parse_info, reference_rows


@pytest.fixture(scope="module")
def model_info(run_kvbench, model_file):
    p = run_kvbench("info", model_file, check=True)
    assert p.stderr == b""
    return parse_info(p.stdout)


@pytest.fixture(scope="module")
def reader(model_info, model_file):
    return compare_with_reader(model_info, model_file)


def test_info_matches_gguf_reader(reader, model_info):
    assert reader is not None  # compare_with_reader asserted everything


def test_model_card_tensor_types(model_info):
    # spec engine.md §7: 61 F32 norms, 210 Q4_1 block weights, tied Q8_0 embedding
    ty = {t["name"]: t["type"] for t in model_info["tensors"]}
    assert ty["token_embd.weight"] == "Q8_0"
    assert "output.weight" not in ty
    assert sum(1 for n, t in ty.items() if n.endswith("norm.weight") and t == "F32") == 61
    assert sum(1 for n, t in ty.items() if n.startswith("blk.") and t == "Q4_1") == 210
    assert model_info["footer"]["tensor_types"] == "F32=61 Q4_1=210 Q8_0=1"
    emb = next(t for t in model_info["tensors"] if t["name"] == "token_embd.weight")
    assert emb["shape"] == [576, 49152] and emb["bytes"] == 49152 * 18 * 34


@pytest.mark.parametrize("name,r0,r1", [
    ("token_embd.weight", 0, 3),
    ("token_embd.weight", 49150, 49152),
    ("blk.0.attn_q.weight", 0, 4),
    ("blk.0.attn_k.weight", 190, 192),
    ("blk.29.ffn_down.weight", 570, 576),
    ("blk.17.ffn_gate.weight", 1000, 1002),
    ("output_norm.weight", 0, 1),
])
def test_dump_matches_gguf_dequantize(run_kvbench, model_file, reader, name, r0, r1):
    p = run_kvbench("info", "--dump-tensor", name, "--rows", f"{r0}:{r1}", model_file, check=True)
    got = parse_dump(p.stdout)
    t = next(t for t in reader.tensors if t.name == name)
    want = reference_rows(t, r0, r1)
    assert sorted(got) == list(range(r0, r1))
    for i, r in enumerate(range(r0, r1)):
        np.testing.assert_array_equal(got[r], want[i], err_msg=f"{name} row {r}")


def test_dump_rows_out_of_range(run_kvbench, model_file):
    p = run_kvbench("info", "--dump-tensor", "blk.0.attn_k.weight", "--rows", "191:193", model_file)
    assert p.returncode == 2 and b"192 rows" in p.stderr and p.stdout == b""
