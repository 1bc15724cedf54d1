"""Tiny random llama-arch GGUF files for the engine's tests, written with PyPI's
`gguf` package (GGUFWriter), so the files do not depend on kvbench's own code.

    write_tiny_llama(path, *, n_layer=2, n_embd=64, n_head=4, n_head_kv=2,
                     n_ff=96, n_ctx=512, wtype="Q4_1", embd_type=None,
                     tied=True, rope_theta=10000.0, rope_scaling=None,
                     rope_freqs=False, seed=0, tokenizer="bpe-tiny")

writes a complete model: the llama.* hyperparameters, a byte-level BPE
tokenizer, token_embd.weight [n_embd, n_vocab], output_norm.weight, optionally
output.weight (tied=False) and rope_freqs.weight, and per layer attn_norm,
attn_q/k/v/output, ffn_norm, ffn_gate/up/down (GGUF ne order: row length
first; numpy arrays here are (rows, cols)).

- wtype: type of every 2-D weight: "F32", "F16", "BF16", "Q4_0", "Q4_1",
  "Q5_0", "Q5_1", "Q8_0", "Q4_K" or "Q6_K" (embd_type, default wtype, for
  token_embd/output). Norms and rope_freqs are F32. Row lengths (n_embd, n_ff,
  n_head*head_dim) must be multiples of the block size: 32, or 256 for the
  K-quants (use e.g. n_embd=256, n_ff=512 with n_head=4).
- Quantisation: gguf.quants.quantize for the types it implements (F16, BF16,
  Q4_0, Q4_1, Q5_0, Q5_1, Q8_0 in gguf 0.19). It does not implement Q4_K and
  Q6_K, so those are packed by the simple round-to-nearest quantisers below
  (per-sub-block scale/min, 6-bit scales), written from the block layouts of
  spec engine.md §5. The values a reader should see are whatever
  gguf.quants.dequantize decodes from the stored blocks (that is what the
  numpy reference uses), not the float weights drawn here.
- rope_scaling: None, or ("linear", factor) -> llama.rope.scaling.type/factor.
- rope_freqs: False, True (Llama-3.1 divisors with factor 8, low 1, high 4,
  original context 8192, spec engine.md §2) or a dict with those keys
  (factor, low, high, orig) -> rope_freqs.weight [head_dim/2] F32.
- tokenizer "bpe-tiny": a "gpt2" (byte-level BPE) vocabulary, pre "smollm":
  ids 0 <|endoftext|>, 1 <|im_start|>, 2 <|im_end|> (control), then the 256
  byte tokens in GPT-2 bytes_to_unicode order (printable bytes first), then
  one token per merge; merges learned greedily (most frequent pair, ties to
  the smallest pair) from the fixed TRAIN_TEXT below, at most N_MERGES.
  bos 1, eos 2, unknown 0, padding 2, add_bos false (add_bos=True: true), a ChatML
  chat template. token_text={id: text} gives tokens other texts (the weights, drawn
  in the same order, are the same).
- Weights: numpy default_rng(seed), N(0, 1/sqrt(row length)) for matrices,
  1 + N(0, 0.1) for norms, so activations stay O(1) through the layers.

Broken variants for error tests: write_broken_llama(path, kind, **kw) with
kind "arch" (general.architecture "gpt9", keys under "gpt9."),
"missing_tensor" (drops `tensor`, default blk.0.attn_q.weight),
"wrong_shape" (`tensor`, default blk.0.attn_k.weight, gets one row too many),
"missing_key" (drops `key`, default llama.embedding_length), "key_type"
(the rms epsilon written as a string), "rms_eps" (rms epsilon 2.0),
"token_type" (token 5 of type 9, outside llama.cpp's 0..6), "kv_heads"
(head_count_kv 3 for 4 heads), "odd_head_dim" (n_embd 60: head dim 15, F32
weights), "rope_freqs" (Llama-3.1 divisors with factor -1: some <= 0),
"rope_dims" (rope.dimension_count 8 for a head dim of 16), "value_length"
(llama.attention.value_length 8 for a key length of 16), "context_zero"
(llama.context_length 0), "vocab_zero" (llama.vocab_size 0), "unsupported_type"
(`tensor`, default blk.0.attn_q.weight, relabelled Q8_1: its bytes run into the
next tensor's, which kvbench's reader allows, docs/GGUF.md; llama.cpp's would refuse it).

Command line: python3 tests/py/tinymodel.py OUT.gguf [--wtype Q8_0] [...]
"""
import argparse
import collections
import struct

import numpy as np
import gguf
import regex

T = gguf.GGMLQuantizationType

SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
N_MERGES = 400
CHAT_TEMPLATE = (
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a tiny test model.<|im_end|>\\n' }}{% endif %}"
    "{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)

# Fixed training text for the merge learner (written for this file).
TRAIN_TEXT = """\
The key and value cache of a language model grows with every token it reads.
When the context is long, the cache can take more memory than the weights, and
reading it at every step of decoding takes more time than the matrix products.
Compression methods keep only the tokens that matter: some score tokens once
after the prompt is read, others choose a different set of pages at each step.
We measure how much accuracy each method keeps for a given token budget, how
fast it decodes, and how many bytes it reads per step. The tests use a tiny
model with random weights, so the numbers it prints mean nothing, but the code
that produces them is the same code that runs the real models.
A needle in a haystack: the secret number is 7421, hidden at 25 percent depth.
Question: what is the secret number? Answer: the secret number is 7421.
Summarise the document in three sentences. The document describes a river,
a bridge over the river, and the town that grew on both banks of the river.
In 1890 the bridge was rebuilt in stone; in 1975 it was widened for cars.
def read_tokens(path):
    with open(path) as f:
        return [int(line) for line in f if line.strip()]
It's what they've said: we'll see, I'm sure you'd agree, they're right.
Every morning the baker opens the shop at six, sets the bread on the shelves,
and writes the prices on a small board by the door. Rye bread costs 4 euros,
white bread costs 3 euros, and the sweet rolls cost 1 euro each. By noon most
of the bread is gone; by the evening the shelves are empty and the baker goes
home. On Sundays the shop is closed, and the baker walks along the river with
the dog, counting the boats that pass under the old stone bridge.
The method reads the last window of queries, pools their attention over the
prompt, and keeps the pages with the highest scores; then, at each decoding
step, it estimates which tokens the current query will attend to and reads
only those. The budget is the number of tokens kept; the ratio is the budget
divided by the context length. Higher budgets keep more accuracy but read more
memory; lower budgets are faster. The results are written to a table with one
row per sample, method and budget, and the summary reports the mean score.
for (int i = 0; i < n; i++) { sum += x[i] * y[i]; }
return sum / (float)n;
Monday, Tuesday, Wednesday, Thursday, Friday, Saturday and Sunday.
January, February, March, April, May, June, July, August and September.
The weather report said that the storm would arrive in the afternoon, so the
fishermen stayed in the harbour and repaired their nets. The children played
in the square, the teachers graded papers, and the mayor signed a letter about
the new school. When the rain started, everyone went inside; when it stopped,
the streets were shining and the air smelled of salt and wet stone. Tomorrow
the boats will go out again, and the market will sell fresh fish at the pier.
Please answer the question using only the information in the passage above.
If the passage does not contain the answer, say that the answer is unknown.
"""

# GPT-2 and SmolLM2's pre-tokenizer ("smollm"): digits split one by one, then
# the GPT-2 pattern (with its final \s+ so every character lands in a piece).
_DIGITS = regex.compile(r"\p{N}")
_GPT2 = regex.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""")


def bytes_to_unicode():
    """GPT-2's byte -> printable character map, as an ordered list of
    (byte, char): the 188 printable bytes map to themselves (in byte order),
    the other 68 to U+0100 upward in byte order."""
    printable = (list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1))
                 + list(range(ord("\xae"), ord("\xff") + 1)))
    out = [(b, chr(b)) for b in printable]
    n = 0
    for b in range(256):
        if b not in printable:
            out.append((b, chr(256 + n)))
            n += 1
    return out


def pretokenize(text):
    pieces = []
    for part in _split_keep(_DIGITS, text):
        pieces.extend(m.group(0) for m in _GPT2.finditer(part))
    return pieces


def _split_keep(pat, text):
    out, last = [], 0
    for m in pat.finditer(text):
        if m.start() > last:
            out.append(text[last:m.start()])
        out.append(m.group(0))
        last = m.end()
    if last < len(text):
        out.append(text[last:])
    return out


def learn_merges(text=TRAIN_TEXT, n_merges=N_MERGES):
    """Greedy BPE: repeatedly merge the most frequent adjacent pair (ties: the
    lexicographically smallest pair) over the pre-tokenized words, while the
    best pair occurs at least twice. Returns merges as (left, right) strings."""
    b2u = dict(bytes_to_unicode())
    words = collections.Counter(tuple(b2u[b] for b in p.encode("utf-8")) for p in pretokenize(text))
    merges = []
    for _ in range(n_merges):
        pairs = collections.Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = min(pairs.items(), key=lambda kv: (-kv[1], kv[0]))
        if best[1] < 2:
            break
        (a, b), _ = best
        merges.append((a, b))
        merged = collections.Counter()
        for w, c in words.items():
            out, i = [], 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == a and w[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(w[i])
                    i += 1
            merged[tuple(out)] += c
        words = merged
    return merges


def tiny_vocab():
    """(tokens, token_types, merges) of the "bpe-tiny" tokenizer."""
    tokens = list(SPECIAL) + [ch for _, ch in bytes_to_unicode()]
    types = [3] * len(SPECIAL) + [1] * 256
    merges = learn_merges()
    seen = set(tokens)
    for a, b in merges:
        if a + b not in seen:
            seen.add(a + b)
            tokens.append(a + b)
            types.append(1)
    return tokens, types, [f"{a} {b}" for a, b in merges]


# ----------------------------------------------------------------- quantisers

def _f16(x):
    return np.asarray(x, dtype=np.float32).astype(np.float16)


def quantize_q4_k(w):
    """(rows, cols) float -> (rows, cols/256*144) uint8 Q4_K blocks:
    x ~ d*sc*q - dmin*mn per 32-element sub-block, q 0..15, sc/mn 6-bit."""
    rows, cols = w.shape
    x = w.astype(np.float32).reshape(-1, 8, 32)                # blocks, sub-blocks, elements
    lo = np.minimum(x.min(axis=2), 0.0)                        # sub-block minimum (<= 0)
    hi = x.max(axis=2)
    scale = (hi - lo) / 15.0                                   # float per sub-block
    mins = -lo
    d = _f16(scale.max(axis=1) / 63.0)                         # per block
    dmin = _f16(mins.max(axis=1) / 63.0)
    df, dminf = d.astype(np.float32), dmin.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df[:, None] > 0, np.round(scale / df[:, None]), 0)
        mn = np.where(dminf[:, None] > 0, np.round(mins / dminf[:, None]), 0)
    sc = np.clip(sc, 0, 63).astype(np.uint8)
    mn = np.clip(mn, 0, 63).astype(np.uint8)
    step = df[:, None] * sc                                    # effective per sub-block
    off = dminf[:, None] * mn
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[:, :, None] > 0, np.round((x + off[:, :, None]) / step[:, :, None]), 0)
    q = np.clip(q, 0, 15).astype(np.uint8)
    nb = x.shape[0]
    s = np.zeros((nb, 12), np.uint8)                           # packed 6-bit scales and mins
    s[:, 0:4] = (sc[:, 0:4] & 63) | ((sc[:, 4:8] >> 4) << 6)
    s[:, 4:8] = (mn[:, 0:4] & 63) | ((mn[:, 4:8] >> 4) << 6)
    s[:, 8:12] = (sc[:, 4:8] & 15) | ((mn[:, 4:8] & 15) << 4)
    qs = (q[:, 0::2, :] | (q[:, 1::2, :] << 4)).reshape(nb, 128)  # chunk c: sub-blocks 2c, 2c+1
    blocks = np.concatenate([d.view(np.uint8).reshape(nb, 2), dmin.view(np.uint8).reshape(nb, 2),
                             s, qs], axis=1)
    return blocks.reshape(rows, cols // 256 * 144)


def quantize_q6_k(w):
    """(rows, cols) float -> (rows, cols/256*210) uint8 Q6_K blocks:
    x ~ d*sc*(q-32) per 16-element sub-block, q 0..63, sc int8."""
    rows, cols = w.shape
    x = w.astype(np.float32).reshape(-1, 16, 16)               # blocks, sub-blocks, elements
    amax = np.abs(x).max(axis=2)
    scale = amax / 31.0
    d = _f16(scale.max(axis=1) / 127.0)
    df = d.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        sc = np.where(df[:, None] > 0, np.round(scale / df[:, None]), 0)
    sc = np.clip(sc, -128, 127).astype(np.int8)
    step = df[:, None] * sc.astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(step[:, :, None] != 0, np.round(x / step[:, :, None]), 0)
    q = (np.clip(q, -32, 31) + 32).astype(np.uint8).reshape(-1, 2, 4, 32)  # half, group, l
    nb = q.shape[0]
    lo, hi = q & 15, q >> 4
    ql = np.concatenate([lo[:, :, 0] | (lo[:, :, 2] << 4), lo[:, :, 1] | (lo[:, :, 3] << 4)],
                        axis=2).reshape(nb, 128)             # per half: 64 bytes
    qh = (hi[:, :, 0] | (hi[:, :, 1] << 2) | (hi[:, :, 2] << 4) | (hi[:, :, 3] << 6)).reshape(nb, 64)
    blocks = np.concatenate([ql, qh, sc.view(np.uint8), d.view(np.uint8).reshape(nb, 2)], axis=1)
    return blocks.reshape(rows, cols // 256 * 210)


WTYPES = ("F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q6_K")


def encode_tensor(w, wtype):
    """(array to hand to GGUFWriter.add_tensor, raw_dtype or None)."""
    if wtype not in WTYPES:
        raise ValueError(f"wtype {wtype!r}: expected one of {', '.join(WTYPES)}")
    if wtype == "F32":
        return w.astype(np.float32), None
    if wtype == "F16":
        return w.astype(np.float16), None
    qt = T[wtype]
    blck = gguf.GGML_QUANT_SIZES[qt][0]
    if w.shape[-1] % blck:
        raise ValueError(f"row length {w.shape[-1]} is not a multiple of the {wtype} block size {blck}")
    if wtype == "Q4_K":
        return quantize_q4_k(w), qt
    if wtype == "Q6_K":
        return quantize_q6_k(w), qt
    return gguf.quants.quantize(w.astype(np.float32), qt), qt


# ---------------------------------------------------------------------- writer

def _rope_divisors(head_dim, theta, factor=8.0, low=1.0, high=4.0, orig=8192):
    """Llama-3.1 divisors per frequency pair (spec engine.md §2)."""
    out = []
    for i in range(head_dim // 2):
        omega = theta ** (-2.0 * i / head_dim)
        lam = 2 * np.pi / omega
        if lam < orig / high:
            out.append(1.0)
        elif lam > orig / low:
            out.append(factor)
        else:
            s = (orig / lam - low) / (high - low)
            out.append(1.0 / ((1 - s) / factor + s))
    return np.array(out, np.float32)


def _build(path, *, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=96, n_ctx=512,
           wtype="Q4_1", embd_type=None, tied=True, rope_theta=10000.0, rope_scaling=None,
           rope_freqs=False, seed=0, tokenizer="bpe-tiny", arch="llama", skip_tensors=(),
           skip_keys=(), shape_delta=None, key_values=None, bad_token_type=None, name="tiny-llama",
           add_bos=False, token_text=None):
    if tokenizer != "bpe-tiny":
        raise ValueError(f"tokenizer {tokenizer!r}: only 'bpe-tiny' is available")
    if n_embd % n_head or n_head % n_head_kv:
        raise ValueError("n_embd must divide by n_head and n_head by n_head_kv")
    hd = n_embd // n_head
    rng = np.random.default_rng(seed)
    tokens, ttypes, merges = tiny_vocab()
    for i, text in (token_text or {}).items():                  # {id: text}: other token texts, same weights
        tokens[i] = text
    n_vocab = len(tokens)
    w = gguf.GGUFWriter(str(path), arch)
    p = arch + "."

    key_values = key_values or {}
    written = set()

    def kv(fn, key, value):
        written.add(key)
        if key in key_values:                                   # a deliberate wrong value or type
            value = key_values[key]
            fn = (w.add_string if isinstance(value, str) else
                  w.add_uint32 if isinstance(value, int) else w.add_float32)
        if key not in skip_keys:
            fn(key, value)

    w.add_name(name)
    kv(w.add_uint32, p + "context_length", n_ctx)
    kv(w.add_uint32, p + "embedding_length", n_embd)
    kv(w.add_uint32, p + "block_count", n_layer)
    kv(w.add_uint32, p + "feed_forward_length", n_ff)
    kv(w.add_uint32, p + "attention.head_count", n_head)
    kv(w.add_uint32, p + "attention.head_count_kv", n_head_kv)
    kv(w.add_float32, p + "attention.layer_norm_rms_epsilon", 1e-5)
    kv(w.add_float32, p + "rope.freq_base", float(rope_theta))
    kv(w.add_uint32, p + "rope.dimension_count", hd)
    kv(w.add_uint32, p + "vocab_size", n_vocab)
    if rope_scaling is not None:
        stype, factor = rope_scaling
        w.add_string(p + "rope.scaling.type", stype)
        w.add_float32(p + "rope.scaling.factor", float(factor))
    for key in sorted(set(key_values) - written):              # keys the model has no other use for
        kv(None, key, None)
    w.add_uint32("general.quantization_version", 2)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("smollm")
    w.add_token_list(tokens)
    if bad_token_type is not None:                              # (token index, type id)
        ttypes = list(ttypes)
        ttypes[bad_token_type[0]] = bad_token_type[1]
    w.add_token_types(ttypes)
    w.add_token_merges(merges)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)
    w.add_unk_token_id(0)
    w.add_pad_token_id(2)
    w.add_add_bos_token(bool(add_bos))
    w.add_chat_template(CHAT_TEMPLATE)

    def mat(rows, cols):
        return rng.normal(0.0, 1.0 / np.sqrt(cols), size=(rows, cols)).astype(np.float32)

    def norm(n):
        return (1.0 + rng.normal(0.0, 0.1, size=n)).astype(np.float32)

    def add(name, arr, ty):
        if name in skip_tensors:
            return
        if shape_delta and name == shape_delta:
            arr = np.concatenate([arr, arr[:1]], axis=0)        # one row too many
        data, raw = encode_tensor(arr, ty) if arr.ndim == 2 else (arr.astype(np.float32), None)
        w.add_tensor(name, data, raw_dtype=raw)

    etype = embd_type or wtype
    add("token_embd.weight", mat(n_vocab, n_embd), etype)
    add("output_norm.weight", norm(n_embd), "F32")
    if not tied:
        add("output.weight", mat(n_vocab, n_embd), etype)
    if rope_freqs:
        opts = rope_freqs if isinstance(rope_freqs, dict) else {}
        add("rope_freqs.weight", _rope_divisors(hd, rope_theta, **opts), "F32")
    for i in range(n_layer):
        b = f"blk.{i}."
        add(b + "attn_norm.weight", norm(n_embd), "F32")
        add(b + "attn_q.weight", mat(n_head * hd, n_embd), wtype)
        add(b + "attn_k.weight", mat(n_head_kv * hd, n_embd), wtype)
        add(b + "attn_v.weight", mat(n_head_kv * hd, n_embd), wtype)
        add(b + "attn_output.weight", mat(n_embd, n_head * hd), wtype)
        add(b + "ffn_norm.weight", norm(n_embd), "F32")
        add(b + "ffn_gate.weight", mat(n_ff, n_embd), wtype)
        add(b + "ffn_up.weight", mat(n_ff, n_embd), wtype)
        add(b + "ffn_down.weight", mat(n_embd, n_ff), wtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_tiny_llama(path, *, n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=96, n_ctx=512,
                     wtype="Q4_1", embd_type=None, tied=True, rope_theta=10000.0,
                     rope_scaling=None, rope_freqs=False, seed=0, tokenizer="bpe-tiny", add_bos=False,
                     token_text=None):
    """Writes a tiny random llama-arch GGUF to path (see the module docstring)."""
    _build(path, n_layer=n_layer, n_embd=n_embd, n_head=n_head, n_head_kv=n_head_kv, n_ff=n_ff,
           n_ctx=n_ctx, wtype=wtype, embd_type=embd_type, tied=tied, rope_theta=rope_theta,
           rope_scaling=rope_scaling, rope_freqs=rope_freqs, seed=seed, tokenizer=tokenizer, add_bos=add_bos,
           token_text=token_text)


def write_broken_llama(path, kind, *, tensor=None, key=None, **kw):
    """A tiny model with one deliberate defect: kind "arch", "missing_tensor",
    "wrong_shape" or "missing_key" (see the module docstring)."""
    if kind == "arch":
        _build(path, arch="gpt9", **kw)
    elif kind == "missing_tensor":
        _build(path, skip_tensors=(tensor or "blk.0.attn_q.weight",), **kw)
    elif kind == "wrong_shape":
        _build(path, shape_delta=tensor or "blk.0.attn_k.weight", **kw)
    elif kind == "missing_key":
        _build(path, skip_keys=(key or "llama.embedding_length",), **kw)
    elif kind == "key_type":
        _build(path, key_values={"llama.attention.layer_norm_rms_epsilon": "1e-5"}, **kw)
    elif kind == "rms_eps":
        _build(path, key_values={"llama.attention.layer_norm_rms_epsilon": 2.0}, **kw)
    elif kind == "token_type":
        _build(path, bad_token_type=(5, 9), **kw)
    elif kind == "kv_heads":                                    # 4 heads, 3 kv heads (tensors for 2)
        _build(path, key_values={"llama.attention.head_count_kv": 3}, **kw)
    elif kind == "odd_head_dim":                                # 60 / 4 = 15
        _build(path, n_embd=60, wtype="F32", **kw)
    elif kind == "rope_freqs":                                  # factor -1: divisors <= 0
        _build(path, rope_freqs=dict(factor=-1.0), **kw)
    elif kind == "rope_dims":                                   # partial rotary: 8 of 16
        _build(path, key_values={"llama.rope.dimension_count": 8}, **kw)
    elif kind == "value_length":                                # key length 16, value length 8
        _build(path, key_values={"llama.attention.value_length": 8}, **kw)
    elif kind == "context_zero":
        _build(path, key_values={"llama.context_length": 0}, **kw)
    elif kind == "vocab_zero":
        _build(path, key_values={"llama.vocab_size": 0}, **kw)
    elif kind == "unsupported_type":                            # blk.0.attn_q.weight's type id -> 9
        _build(path, **kw)
        data = bytearray(open(path, "rb").read())
        name = (tensor or "blk.0.attn_q.weight").encode()
        at = data.index(struct.pack("<Q", len(name)) + name) + 8 + len(name)
        n_dims = struct.unpack_from("<I", data, at)[0]
        struct.pack_into("<I", data, at + 4 + 8 * n_dims, 9)   # Q8_1: known, not computable
        open(path, "wb").write(bytes(data))
    else:
        raise ValueError(f"kind {kind!r}: expected arch, missing_tensor, wrong_shape, missing_key, "
                         "key_type, rms_eps, token_type, kv_heads, odd_head_dim, rope_freqs, rope_dims, value_length, "
                         "context_zero, vocab_zero or unsupported_type")


def main():
    ap = argparse.ArgumentParser(description="write a tiny random llama GGUF")
    ap.add_argument("out")
    ap.add_argument("--wtype", default="Q4_1", choices=WTYPES)
    ap.add_argument("--n-layer", type=int, default=2)
    ap.add_argument("--n-embd", type=int, default=64)
    ap.add_argument("--n-head", type=int, default=4)
    ap.add_argument("--n-head-kv", type=int, default=2)
    ap.add_argument("--n-ff", type=int, default=96)
    ap.add_argument("--n-ctx", type=int, default=512)
    ap.add_argument("--untied", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    write_tiny_llama(a.out, n_layer=a.n_layer, n_embd=a.n_embd, n_head=a.n_head,
                     n_head_kv=a.n_head_kv, n_ff=a.n_ff, n_ctx=a.n_ctx, wtype=a.wtype,
                     tied=not a.untied, seed=a.seed)


if __name__ == "__main__":
    main()
