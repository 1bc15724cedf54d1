"""Independent numpy reference of the Llama forward pass, reading GGUF files
with PyPI's `gguf` package (its own dequantisation), for checking kvbench's
engine logits.

Written from the model definition (engine.md §3-§4), not from kvbench's C:
pre-norm blocks, GQA, RoPE on adjacent channel pairs (llama.cpp's "normal"
mode for llama-arch GGUFs), RMSNorm, SwiGLU, tied output when output.weight is
absent, linear RoPE scaling and Llama-3.1 rope_freqs divisors.

The K/V cache can be rounded to float16 (kv_dtype="f16") to model the
engine's default cache storage exactly; everything else is float64.
"""
import numpy as np
import gguf


def _field(reader, key, default=None):
    f = reader.fields.get(key)
    if f is None:
        return default
    if f.types and f.types[0] == gguf.GGUFValueType.STRING:
        return bytes(f.parts[f.data[0]]).decode("utf-8")
    return f.parts[f.data[0]][0].item()


class LlamaRef:
    def __init__(self, path):
        r = gguf.GGUFReader(path)
        self.reader = r
        self._cache = {}
        arch = _field(r, "general.architecture")
        assert arch == "llama", arch
        p = "llama."
        self.n_layer = int(_field(r, p + "block_count"))
        self.n_embd = int(_field(r, p + "embedding_length"))
        self.n_head = int(_field(r, p + "attention.head_count"))
        self.n_head_kv = int(_field(r, p + "attention.head_count_kv", self.n_head))
        self.head_dim = int(_field(r, p + "attention.key_length", self.n_embd // self.n_head))
        self.eps = float(_field(r, p + "attention.layer_norm_rms_epsilon"))  # required (engine.md §2)
        self.theta = float(_field(r, p + "rope.freq_base", 10000.0))
        factor = _field(r, p + "rope.scaling.factor", None)
        if factor is None:
            factor = _field(r, p + "rope.scale_linear", 1.0)
        stype = _field(r, p + "rope.scaling.type", "linear")
        self.freq_scale = 1.0 if stype == "none" else 1.0 / float(factor)
        self.t = {}
        for t in r.tensors:
            self.t[t.name] = t
        self.tied = "output.weight" not in self.t
        half = self.head_dim // 2
        inv = self.theta ** (-2.0 * np.arange(half) / self.head_dim) * self.freq_scale
        if "rope_freqs.weight" in self.t:
            inv = inv / self.W("rope_freqs.weight").astype(np.float64)
        self.inv_freq = inv

    def W(self, name):
        """Dequantised tensor as float64 with numpy shape (rows, cols)."""
        if name not in self._cache:
            t = self.t[name]
            a = gguf.quants.dequantize(t.data, t.tensor_type)
            shape = [int(x) for x in reversed(t.shape)]  # ne is innermost-first
            self._cache[name] = np.asarray(a, dtype=np.float64).reshape(shape)
        return self._cache[name]

    def rmsnorm(self, x, w):
        return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + self.eps) * w

    def rope(self, x, pos):
        # x: [n, heads, D]; rotate (x[2i], x[2i+1]) by pos * inv_freq[i]
        ang = pos[:, None].astype(np.float64) * self.inv_freq[None, :]  # [n, half]
        c, s = np.cos(ang)[:, None, :], np.sin(ang)[:, None, :]
        x0, x1 = x[..., 0::2], x[..., 1::2]
        out = np.empty_like(x)
        out[..., 0::2] = x0 * c - x1 * s
        out[..., 1::2] = x0 * s + x1 * c
        return out

    def attention(self, q, k, v, G, block=256):
        """Causal softmax attention [n, Hq, D] of q [n, Hq, D] over k, v [n, Hkv, D].
        Query rows go in blocks: a block of rows [i0, i1) scores only the keys
        [0, i1) (those past row i masked to -inf), so the masked upper triangle,
        whose weights are exactly 0, is mostly never computed. The G query
        heads of a KV head (hq // G == kh) are scored in one product."""
        n, Hq, D = q.shape
        att = np.empty((n, Hq, D))
        for i0 in range(0, n, block):
            i1 = min(n, i0 + block)
            mask = np.triu(np.full((i1 - i0, i1), -np.inf), i0 + 1)[:, None, :]
            for kh in range(Hq // G):
                heads = slice(kh * G, (kh + 1) * G)
                qg = q[i0:i1, heads, :].reshape((i1 - i0) * G, D)
                s = (qg @ k[:i1, kh, :].T).reshape(i1 - i0, G, i1) / np.sqrt(D) + mask
                s = np.exp(s - s.max(axis=2, keepdims=True))
                s /= s.sum(axis=2, keepdims=True)
                att[i0:i1, heads, :] = (s.reshape((i1 - i0) * G, i1) @ v[:i1, kh, :]).reshape(i1 - i0, G, D)
        return att

    def forward(self, tokens, kv_dtype="f16", rows=None):
        """Logits [n, vocab] of every position of `tokens` (causal, from position 0);
        with `rows`, only those positions' logits [len(rows), vocab] (the output
        matrix's product is then len(rows) rows, not n: for long prompts)."""
        tokens = np.asarray(tokens, dtype=np.int64)
        n = len(tokens)
        pos = np.arange(n)
        D, Hq, Hkv = self.head_dim, self.n_head, self.n_head_kv
        G = Hq // Hkv
        x = self.W("token_embd.weight")[tokens]
        for l in range(self.n_layer):
            b = f"blk.{l}."
            h = self.rmsnorm(x, self.W(b + "attn_norm.weight"))
            q = (h @ self.W(b + "attn_q.weight").T).reshape(n, Hq, D)
            k = (h @ self.W(b + "attn_k.weight").T).reshape(n, Hkv, D)
            v = (h @ self.W(b + "attn_v.weight").T).reshape(n, Hkv, D)
            q, k = self.rope(q, pos), self.rope(k, pos)
            if kv_dtype == "f16":
                k = k.astype(np.float16).astype(np.float64)
                v = v.astype(np.float16).astype(np.float64)
            att = self.attention(q, k, v, G)
            x = x + att.reshape(n, Hq * D) @ self.W(b + "attn_output.weight").T
            h = self.rmsnorm(x, self.W(b + "ffn_norm.weight"))
            g = h @ self.W(b + "ffn_gate.weight").T
            u = h @ self.W(b + "ffn_up.weight").T
            x = x + (g / (1.0 + np.exp(-g)) * u) @ self.W(b + "ffn_down.weight").T
        if rows is not None:
            x = x[np.asarray(rows, dtype=np.int64)]
        h = self.rmsnorm(x, self.W("output_norm.weight"))
        out = self.W("token_embd.weight" if self.tied else "output.weight")
        return h @ out.T
