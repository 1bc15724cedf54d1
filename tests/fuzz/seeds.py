"""Seed corpora for the fuzz targets, written at fuzz time (tests/fuzz/run.sh):

    python3 tests/fuzz/seeds.py OUTDIR

writes OUTDIR/<target>/<name> for the targets gguf, tokenizer, config, jsonl,
npy, rows and csv: small valid inputs from independent writers (PyPI's gguf
GGUFWriter, numpy's np.save / np.lib.format, json.dumps, Python's csv), plus the repo's
JSONL fixtures. Also OUTDIR/tiny.gguf: the tiny model `kvbench tokenize
--jsonl` uses in fuzz_jsonl ($KVBENCH_FUZZ_GGUF).

Nothing here is committed: the files are regenerated on every run (the GGUF
seeds are tens of KB)."""
import csv
import io
import json
import os
import shutil
import sys

import numpy as np
import gguf

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "tests", "py"))
import tinymodel  # noqa: E402

SEP = b"#KVBTRACE#"   # fuzz_npy.c: separator of the trace parts


def put(out, target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


# ------------------------------------------------------------------ gguf

def gguf_bytes(build):
    """Runs build(writer) on a GGUFWriter and returns the file image."""
    import tempfile
    with tempfile.NamedTemporaryFile(suffix=".gguf") as tmp:
        w = gguf.GGUFWriter(tmp.name, "fuzz")
        build(w)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        with open(tmp.name, "rb") as f:
            return f.read()


def gguf_types(w):
    """Every metadata value type, nested arrays, and one small tensor of each
    ggml type the reader knows (random block bytes: the dequantisers see
    arbitrary scales and codes)."""
    rng = np.random.default_rng(1)
    w.add_uint8("t.u8", 200)
    w.add_int8("t.i8", -5)
    w.add_uint16("t.u16", 60000)
    w.add_int16("t.i16", -300)
    w.add_uint32("t.u32", 4000000000)
    w.add_int32("t.i32", -7)
    w.add_float32("t.f32", 1.5)
    w.add_bool("t.bool", True)
    w.add_string("t.str", "h\u00e9llo")
    w.add_uint64("t.u64", 2**63 + 5)
    w.add_int64("t.i64", -2**40)
    w.add_float64("t.f64", -2.25)
    w.add_array("t.arr_i32", [1, -2, 3])
    w.add_array("t.arr_f32", [0.5, 1.5])
    w.add_array("t.arr_str", ["a", "", "\u4e2d"])
    w.add_array("t.arr_bool", [True, False])
    w.add_array("t.arr_arr", [[1, 2], [3]])
    w.add_uint32("general.alignment", 64)
    T = gguf.GGMLQuantizationType
    for ty in (T.F32, T.F16, T.BF16, T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0, T.Q4_K, T.Q6_K,
               T.Q2_K):
        blck, size = gguf.GGML_QUANT_SIZES[ty]
        n_el = max(blck, 32)
        nbytes = n_el // blck * size * 2   # two rows
        raw = rng.integers(0, 256, size=nbytes, dtype=np.uint8)
        if ty == T.F32:
            raw = rng.normal(size=n_el * 2).astype(np.float32).view(np.uint8)
        w.add_tensor(f"w.{ty.name}", raw.reshape(2, -1), raw_dtype=ty)


def tokenizer_only_spm(w):
    toks = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + \
           ["\u2581", "a", "b", "\u2581a", "ab", "\u2581ab", "<u>"]
    types = [2, 3, 3] + [6] * 256 + [1] * 6 + [4]
    scores = [0.0] * 259 + [-10.0, -11.0, -12.0, -1.0, -2.0, -3.0, 0.0]
    w.add_tokenizer_model("llama")
    w.add_token_list(toks)
    w.add_token_types(types)
    w.add_token_scores(scores)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_chat_template("[INST] {{ messages }} [/INST]")


def tokenizer_only_llama3(w):
    tokens, types, merges = tinymodel.tiny_vocab()
    tokens = tokens + ["<|begin_of_text|>", "<|eot_id|>", "<|start_header_id|>",
                       "<|end_header_id|>"]
    types = types + [3, 3, 3, 3]
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("llama-bpe")
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges[:60])
    w.add_bos_token_id(len(tokens) - 4)
    w.add_eos_token_id(len(tokens) - 3)
    w.add_chat_template("<|start_header_id|>")


def gguf_seeds(out):
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        small = dict(n_layer=1, n_embd=32, n_head=2, n_head_kv=1, n_ff=32, n_ctx=64)
        for name, kw in [("tiny_q4_1.gguf", dict(wtype="Q4_1")),
                         ("tiny_q4_1_untied.gguf", dict(wtype="Q4_1", tied=False, seed=1)),
                         ("tiny_q8_0.gguf", dict(wtype="Q8_0", seed=2)),
                         ("tiny_q4_0_ropefreqs.gguf", dict(wtype="Q4_0", rope_freqs=True,
                                                           rope_scaling=("linear", 2.0)))]:
            p = os.path.join(tmp, name)
            tinymodel.write_tiny_llama(p, **small, **kw)
            put(out, "gguf", name, open(p, "rb").read())
        p = os.path.join(tmp, "missing.gguf")
        tinymodel.write_broken_llama(p, "missing_tensor", **small)
        put(out, "gguf", "broken_missing_tensor.gguf", open(p, "rb").read())
        # the tiny model used by fuzz_jsonl's `kvbench tokenize --jsonl`
        p = os.path.join(out, "tiny.gguf")
        tinymodel.write_tiny_llama(p, **small, wtype="Q4_1")
    put(out, "gguf", "types.gguf", gguf_bytes(gguf_types))
    put(out, "gguf", "tok_spm.gguf", gguf_bytes(tokenizer_only_spm))
    put(out, "gguf", "tok_llama3.gguf", gguf_bytes(tokenizer_only_llama3))


# ------------------------------------------------------------- tokenizer

TEXTS = [
    "Hello world", "abc abab bcb", "a<|x|>b<u>c", "<|begin_of_text|>hi<|im_end|>",
    "<s>a</s> ab", "caf\u00e9 \u4e2d\u6587 \U0001F600", "12345 $x+=1 I'M here don't",
    "  \t\n\n x", "\u2581a \u2581\u2581b", "<unk>abc\u00e9\u00e9",
]


def tokenizer_seeds(out):
    k = 0
    for sel in range(7):
        for t in TEXTS:
            put(out, "tokenizer", f"t{k:03d}", bytes([sel]) + t.encode())
            k += 1
    for sel in range(7):   # invalid UTF-8 and NUL
        put(out, "tokenizer", f"t{k:03d}", bytes([sel]) + b"ab\xff\xfe\xc3(\x00\xe4\xb8z")
        k += 1


# ---------------------------------------------------------------- config

CONFIGS = [
    {"name": "quick", "seed": 42,
     "tasks": [{"task": "needle", "words": [600, 1200], "depths": 3, "per_cell": 1, "max_new": 16},
               {"task": "niah_single_1", "lengths": [1024], "samples": 2}],
     "methods": ["full", {"method": "rocketkv"}, {"method": "snapkv", "label": "snapkv_k7"},
                 {"method": "quest", "budgets": [128, 512]}],
     "budgets": [64, 256, 1024]},
    {"tasks": [{"task": "scbench_kv_like"}], "kv_dtype": "f32", "threads": 1, "fidelity": True,
     "own_answers": False, "budget_mode": "topk", "max_samples": 3,
     "methods": [{"method": "snapkvpp", "kernel": "adaptive", "kernel_by_length": [[1024, 7], [4096, 31]],
                  "pooling": "avg", "window": 16, "gqa": "group_mean"},
                 {"method": "sparq", "r": 16, "reallocate_mean_v": True, "local_window": 8,
                  "budget": 128},
                 {"method": "hybrid", "page_size": 16, "budget": 64, "skip_layers": 1},
                 {"method": "rocketkv", "alpha": 0.5, "budget": 256, "label": "rk_a05"},
                 {"method": "rocketkv_mt", "budget": 256}, {"method": "exact_topk", "budget": 64}],
     "latency": {"contexts": [1024, 4096], "decode_tokens": 16, "reps": 3}},
    {"tasks": [{"task": "longbench", "subtasks": ["trec"]}], "data_dir": "/nonexistent",
     "methods": ["full"], "description": "x", "model": "m.gguf", "haystack": "/tmp"},
]


def config_seeds(out):
    for i, c in enumerate(CONFIGS):
        put(out, "config", f"c{i}.json", json.dumps(c, indent=1))
    put(out, "config", "sets.json",
        json.dumps(CONFIGS[0]).encode() + b"\0seed=3\0budgets=[64,128]\0kv_dtype=f32")
    put(out, "config", "method.json", json.dumps({"method": "snapkv", "window": 8, "kernel": 5,
                                                  "budget": 32, "budget_mode": "traffic"}))
    cfgdir = os.path.join(ROOT, "configs")
    for f in sorted(os.listdir(cfgdir)) if os.path.isdir(cfgdir) else []:
        p = os.path.join(cfgdir, f)
        if f.endswith(".json") and os.path.getsize(p) < 8192:
            put(out, "config", "repo_" + f, open(p, "rb").read())


# ----------------------------------------------------------------- jsonl

def jsonl(*objs):
    return "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objs)


def jsonl_seeds(out):
    put(out, "jsonl", "score.jsonl", jsonl(
        {"pred": "The answer is Paris.", "answers": ["Paris"], "all_classes": None},
        {"pred": "abc\nsecond", "answers": "abc", "all_classes": ["abc", "def"]},
        {"pred": "", "answers": ["x", "y"]}))
    put(out, "jsonl", "lb.jsonl", jsonl(
        {"input": "What?", "context": "Some context. " * 5, "answers": ["yes"], "length": 12,
         "all_classes": ["yes", "no"], "_id": "a1"},
        {"input": "Q2", "context": "c", "answers": ["b", "c"], "all_classes": None}))
    put(out, "jsonl", "sc.jsonl", jsonl(
        {"id": 1, "context": "k1: v1\nk2: v2", "multi_turns": [
            {"input": "k1?", "answer": "v1", "task": "scbench_kv",
             "options": ["v1", "v2", "v3", "v4"]},
            {"input": "k2?", "answer": ["v2", 3], "task": "scbench_passkey",
             "options": ["a", "v2", "c", "d"]}]},
        {"context": [1, 2.5, -3], "multi_turns": [{"input": "max?", "answer": 3}]}))
    put(out, "jsonl", "tok.jsonl", jsonl(
        "Hello <|im_start|>", {"text": "caf\u00e9"}, [1, 2, 3], {"ids": [0, 5]},
        {"system": None, "messages": ["hi", "hello", "bye"]}, {"system": "S", "messages": ["u"]}))
    # RULER's QA data files (fuzz_jsonl.c part 6): SQuAD v2 and HotpotQA JSON
    put(out, "jsonl", "squad.json", json.dumps({"data": [{"paragraphs": [
        {"context": "Paris is the capital of France. " * 3,
         "qas": [{"question": "What is the capital of France?", "answers": [{"text": "Paris"}],
                  "is_impossible": False},
                 {"question": "Unanswerable?", "answers": [], "is_impossible": True}]},
        {"context": "The Nile flows north.", "qas": [{"question": "Which way?",
                                                      "answers": [{"text": "north"}, {"text": "N"}]}]}]}]}))
    put(out, "jsonl", "hotpot.json", json.dumps([
        {"question": "Who wrote it?", "answer": "Ann",
         "context": [["Book", ["It was written ", "by Ann."]], ["Other", ["Unrelated."]]]},
        {"question": "Q2", "answer": "yes", "context": [["T", []]]}]))
    # wrong types where the loaders expect strings and arrays
    put(out, "jsonl", "hotpot_bad.json", json.dumps([
        {"question": "Q", "answer": "A", "context": [["T", ["s", 7, None]], ["U", "not a list"]]}]))
    put(out, "jsonl", "squad_bad.json", json.dumps({"data": [{"paragraphs": [
        {"context": 5, "qas": [{"question": ["q"], "answers": [{"text": 1}]}]}]}, {"paragraphs": {}}]}))
    for d in ("scbench", "longbench/data", "ruler"):
        src = os.path.join(ROOT, "tests", "fixtures", d)
        if os.path.isdir(src):
            for f in sorted(os.listdir(src)):
                p = os.path.join(src, f)
                if f.endswith((".jsonl", ".json")) and os.path.getsize(p) < 8192:
                    put(out, "jsonl", "fixture_" + f, open(p, "rb").read())


# ------------------------------------------------------------------- npy

def npy_bytes(a, version=None):
    b = io.BytesIO()
    if version is None:
        np.save(b, a)
    else:
        np.lib.format.write_array(b, a, version=version)
    return b.getvalue()


def npy_seeds(out):
    rng = np.random.default_rng(2)
    put(out, "npy", "f3.npy", npy_bytes(rng.normal(size=(2, 3, 4)).astype("<f4")))
    put(out, "npy", "i1.npy", npy_bytes(np.arange(5, dtype="<i4")))
    put(out, "npy", "f0.npy", npy_bytes(np.float32(1.5)))
    put(out, "npy", "empty.npy", npy_bytes(np.zeros((0, 3), "<f4")))
    put(out, "npy", "v2.npy", npy_bytes(rng.normal(size=(2, 2)).astype("<f4"), (2, 0)))
    put(out, "npy", "v3.npy", npy_bytes(np.ones((1, 1, 1, 1, 2), "<i4"), (3, 0)))
    put(out, "npy", "f8.npy", npy_bytes(np.ones(2, "<f8")))   # refused dtype
    # a valid trace: L=4, Hkv=1, D=2, W=2, Hq=2, N=1
    L, Hkv, D, W, Hq, N = 4, 1, 2, 2, 2, 1
    f = lambda *s: rng.normal(size=s).astype("<f4")
    parts = [npy_bytes(f(L, Hkv, D)), npy_bytes(f(L, Hkv, D)), npy_bytes(f(W, Hq, D)),
             npy_bytes(f(N, Hq, D)), npy_bytes(f(N, Hkv, D)), npy_bytes(f(N, Hkv, D)),
             json.dumps({"max_new": 4, "S": 8, "layer": 0}).encode()]
    put(out, "npy", "trace", SEP.join(parts))
    parts[3:6] = [npy_bytes(np.zeros((0, Hq, D), "<f4")), npy_bytes(np.zeros((0, Hkv, D), "<f4")),
                  npy_bytes(np.zeros((0, Hkv, D), "<f4"))]
    parts[6] = b'{"max_new": 0, "S": 4}'
    put(out, "npy", "trace_n0", SEP.join(parts))


# ----------------------------------------------------------------- rows

def rows_seeds(out):
    """fuzz_rows.c: mode byte, then (seq, cell, turn, score) per row; the
    turn counts of its plan are 1, 1, 2, 1, 3, 1, 4, 2."""
    turns = [1, 1, 2, 1, 3, 1, 4, 2]
    whole = bytes(s for q in range(8) for c in range(4) for t in range(turns[q]) for s in (q, c, t, 100))
    put(out, "rows", "complete", bytes([3]) + whole)
    put(out, "rows", "resume_half", bytes([1]) + whole[:len(whole) // 2])
    put(out, "rows", "dup", bytes([0]) + whole[:8] + whole[:4])


# ------------------------------------------------------------------ csv

def csv_bytes(header, rows, **kw):
    f = io.StringIO(newline="")
    w = csv.writer(f, lineterminator=kw.pop("lineterminator", "\n"), **kw)
    w.writerow(header)
    w.writerows(rows)
    return f.getvalue().encode()


def csv_seeds(out):
    """fuzz_csv.c: whole files, written by Python's csv module (not by
    kvbench): a samples.csv header with rows, a latency.csv-like table,
    fields that need quoting (commas, quotes, line breaks, spaces and tabs
    around them, non-ASCII), CRLF lines, every field quoted."""
    samples = ["seq", "task", "sample", "turn", "kind", "method", "label", "params", "budget",
               "budget_mode", "context_tokens", "target_tokens", "context_words", "depth", "metric",
               "score", "metric2", "score2", "prediction", "answers", "prompt_tokens", "new_tokens",
               "prefill_ms", "decode_ms_per_token", "attn_ms_per_token", "tokens_resident",
               "bytes_resident", "tokeq_read_per_step", "bytes_read_per_step", "approx_tokeq_per_step",
               "attended_per_step", "compression_ratio", "recall", "mass_covered", "out_rel_err",
               "kl_vs_full", "top1_vs_full"]   # harness/driver.c's kb_samples_cols
    row = ["0", "needle", "0", "0", "", "rocketkv", "rocketkv", '{"budget": 64, "method": "rocketkv"}',
           "64", "traffic", "130", "128", "60", "0.5", "contains", "1", "", "", " The pass key is 123\t",
           '["123"]', "130", "6", "1.5", "2.25", "0.75", "98", "200704", "", "", "", "", "", "", "", "", "",
           ""]
    put(out, "csv", "samples_like", csv_bytes(samples, [row, row[:6] + ["full"] + row[7:]]))
    put(out, "csv", "latency_like", csv_bytes(
        ["method", "label", "budget", "context", "decode_ms_per_token", "speedup_vs_full"],
        [["full", "full", "", "8176", "9.5", "1"], ["rocketkv", "rocketkv", "256", "8176", "3.8", "2.5"]]))
    put(out, "csv", "quoting", csv_bytes(
        ["a", "b,c", 'd"e'],
        [["x,y", 'say "hi"', "two\nlines"], [" lead", "trail ", "\ttab\t"], ["", "é ü", "\r"]]))
    put(out, "csv", "crlf_all_quoted", csv_bytes(["k", "v"], [["1", "2"], ["", "-0.5e3"]],
                                                  lineterminator="\r\n", quoting=csv.QUOTE_ALL))
    put(out, "csv", "one_column", csv_bytes(["only"], [[""], ["1"], ["nan"]]))


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: python3 tests/fuzz/seeds.py OUTDIR")
    out = sys.argv[1]
    for t in ("gguf", "tokenizer", "config", "jsonl", "npy", "rows", "csv"):
        shutil.rmtree(os.path.join(out, t), ignore_errors=True)
    gguf_seeds(out)
    tokenizer_seeds(out)
    config_seeds(out)
    jsonl_seeds(out)
    npy_seeds(out)
    rows_seeds(out)
    csv_seeds(out)


if __name__ == "__main__":
    main()
