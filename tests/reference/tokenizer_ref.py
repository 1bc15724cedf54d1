"""Independent references for kvbench's tokenizers (tests/py/test_tokenizer*.py).

Expected token ids come from HF `tokenizers` (the Rust library behind
transformers' fast tokenizers), configured from GGUF metadata the way each
family's tokenizer.json is:

* byte-level BPE (GGUF model "gpt2"): models.BPE(vocab, merges) with the
  pre-tokenizer of the pre type -- SmolLM2's real one (Digits(individual) +
  ByteLevel), Llama-3's (Split(regex) + ByteLevel(use_regex=False)) with
  ignore_merges, GPT-2's ByteLevel, or llama.cpp's "default" regex list as
  Split pre-tokenizers; control / user-defined tokens as AddedTokens.
* SentencePiece BPE (GGUF model "llama"): models.BPE with byte_fallback and
  merges ranked by the score of the merged piece, normalizer
  Prepend("\u2581") + Replace(" ", "\u2581") as in Llama-2 / Mistral
  tokenizer.json files.

Nothing here calls kvbench. The module also writes tokenizer-only GGUF files
(metadata, no tensors) with gguf.GGUFWriter and trains small vocabularies with
HF's BpeTrainer for the models we have no file of.
"""
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers
from tokenizers import pre_tokenizers as pt
from tokenizers import trainers

GPT2_PAT = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
# As in Meta-Llama-3's tokenizer.json.
LLAMA3_PAT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
              r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
# llama.cpp's list for tokenizer.ggml.pre = "default" (llama-vocab.cpp).
DEFAULT_PATS = [r"[\p{P}\$\+<=>\^~\|]+", GPT2_PAT, r"\p{N}+", r"[0-9][0-9][0-9]"]

SPACE = "\u2581"

TT_NORMAL, TT_UNKNOWN, TT_CONTROL, TT_USER, TT_UNUSED, TT_BYTE = 1, 2, 3, 4, 5, 6


def read_gguf_tokenizer(path):
    """The tokenizer.* metadata of a GGUF file, as plain Python values."""
    from gguf import GGUFReader
    r = GGUFReader(path)

    def val(key, default=None):
        f = r.fields.get(key)
        return f.contents() if f is not None else default

    return {
        "model": val("tokenizer.ggml.model"),
        "pre": val("tokenizer.ggml.pre"),
        "tokens": val("tokenizer.ggml.tokens"),
        "types": val("tokenizer.ggml.token_type"),
        "merges": val("tokenizer.ggml.merges"),
        "scores": val("tokenizer.ggml.scores"),
        "bos": val("tokenizer.ggml.bos_token_id"),
        "eos": val("tokenizer.ggml.eos_token_id"),
        "chat_template": val("tokenizer.chat_template"),
    }


def _added_tokens(tokens, types):
    out = []
    for i, t in enumerate(tokens):
        ty = types[i] if types else TT_NORMAL
        if ty in (TT_CONTROL, TT_UNKNOWN):
            out.append(AddedToken(t, special=True, normalized=False))
        elif ty == TT_USER:
            out.append(AddedToken(t, special=False, normalized=False))
    return out


def hf_byte_level(tokens, merges, types=None, pre="smollm", specials=True):
    """HF tokenizer equivalent of a GGUF "gpt2" tokenizer with that pre type.
    specials=False: no added tokens, so special-token text is plain text."""
    vocab = {t: i for i, t in enumerate(tokens)}
    pairs = [tuple(m.split(" ", 1)) for m in merges]
    tk = Tokenizer(models.BPE(vocab, pairs, ignore_merges=(pre in ("llama3", "llama-bpe", "llama-v3"))))
    if pre in ("smollm", "starcoder"):
        tk.pre_tokenizer = pt.Sequence([pt.Digits(individual_digits=True),
                                        pt.ByteLevel(add_prefix_space=False, use_regex=True)])
    elif pre in ("llama3", "llama-bpe", "llama-v3"):
        tk.pre_tokenizer = pt.Sequence([pt.Split(Regex(LLAMA3_PAT), "isolated"),
                                        pt.ByteLevel(add_prefix_space=False, use_regex=False)])
    elif pre in ("gpt2", "gpt-2"):
        tk.pre_tokenizer = pt.ByteLevel(add_prefix_space=False, use_regex=True)
    elif pre == "default":
        tk.pre_tokenizer = pt.Sequence([pt.Split(Regex(p), "isolated") for p in DEFAULT_PATS] +
                                       [pt.ByteLevel(add_prefix_space=False, use_regex=False)])
    else:
        raise ValueError(pre)
    tk.decoder = decoders.ByteLevel()
    if specials:
        tk.add_special_tokens(_added_tokens(tokens, types))
    return tk


def spm_merges(tokens, scores, types):
    """Every split of a normal piece into two normal pieces, ranked by the
    merged piece's score (highest first), as transformers'
    SentencePieceExtractor builds the merges of Llama/Mistral tokenizer.json."""
    vocab = {t: i for i, t in enumerate(tokens)}
    normal = {t for i, t in enumerate(tokens) if types[i] == TT_NORMAL}
    out = []
    for piece in normal:
        for k in range(1, len(piece)):
            left, right = piece[:k], piece[k:]
            if left in normal and right in normal:
                out.append((-scores[vocab[piece]], vocab[piece], vocab[left], vocab[right], left, right))
    out.sort()
    return [(o[4], o[5]) for o in out]


def hf_spm(tokens, scores, types, specials=True):
    vocab = {t: i for i, t in enumerate(tokens)}
    unk = next((t for i, t in enumerate(tokens) if types[i] == TT_UNKNOWN), None)
    tk = Tokenizer(models.BPE(vocab, spm_merges(tokens, scores, types), unk_token=unk,
                              byte_fallback=True, fuse_unk=True))
    tk.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    tk.decoder = decoders.Sequence([decoders.Replace(SPACE, " "), decoders.ByteFallback(),
                                    decoders.Fuse(), decoders.Strip(" ", 1, 0)])
    if specials:
        tk.add_special_tokens(_added_tokens(tokens, types))
    return tk


def train_byte_level(corpus, vocab_size, special_tokens=()):
    """A byte-level BPE vocabulary (tokens, merges) trained by HF on corpus."""
    tk = Tokenizer(models.BPE())
    tk.pre_tokenizer = pt.ByteLevel(add_prefix_space=False, use_regex=True)
    tr = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=list(special_tokens),
                             initial_alphabet=pt.ByteLevel.alphabet(), show_progress=False)
    tk.train_from_iterator(corpus, tr)
    data = tk.get_vocab()
    tokens = [None] * len(data)
    for t, i in data.items():
        tokens[i] = t
    import json
    model = json.loads(tk.to_str())["model"]
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, merges


def train_spm(corpus, vocab_size):
    """A SentencePiece-style vocabulary: <unk>, <s>, </s>, the 256 byte
    tokens, then pieces learned by HF's BpeTrainer over U+2581-marked words
    (alphabet first, then merges in order). Scores decrease with the id, as in
    SentencePiece BPE models, so a later merge has a lower priority."""
    tk = Tokenizer(models.BPE())
    tk.normalizer = normalizers.Sequence([normalizers.Prepend(SPACE), normalizers.Replace(" ", SPACE)])
    tk.pre_tokenizer = pt.Metaspace(replacement=SPACE, prepend_scheme="never")
    tr = trainers.BpeTrainer(vocab_size=vocab_size, show_progress=False)
    tk.train_from_iterator(corpus, tr)
    learned = sorted(tk.get_vocab().items(), key=lambda kv: kv[1])
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [TT_UNKNOWN, TT_CONTROL, TT_CONTROL] + [TT_BYTE] * 256
    for t, _ in learned:
        if t not in tokens:
            tokens.append(t)
            types.append(TT_NORMAL)
    scores = [0.0] * 259 + [-float(i) for i in range(len(tokens) - 259)]
    return tokens, scores, types


def write_tokenizer_gguf(path, model, tokens, types=None, scores=None, merges=None, pre=None,
                         bos=None, eos=None, unk=None, add_bos=None, chat_template=None,
                         add_space_prefix=None):
    """A GGUF file with only tokenizer metadata (and general.architecture)."""
    import gguf
    w = gguf.GGUFWriter(str(path), "llama")
    if model is not None:
        w.add_tokenizer_model(model)
    if pre is not None:
        w.add_tokenizer_pre(pre)
    w.add_token_list(tokens)
    if types is not None:
        w.add_token_types(types)
    if scores is not None:
        w.add_token_scores(scores)
    if merges is not None:
        w.add_token_merges(merges)
    if bos is not None:
        w.add_bos_token_id(bos)
    if eos is not None:
        w.add_eos_token_id(eos)
    if unk is not None:
        w.add_unk_token_id(unk)
    if add_bos is not None:
        w.add_add_bos_token(add_bos)
    if add_space_prefix is not None:
        w.add_add_space_prefix(add_space_prefix)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
