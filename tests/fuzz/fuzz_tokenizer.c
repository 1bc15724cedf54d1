/* fuzz_tokenizer.c - libFuzzer target: encoding arbitrary bytes with fixed
 * tokenizers, and the round trip decode(encode(x)) == x where it is defined.
 *
 * Input: byte 0 picks the tokenizer, the rest is the text x (any bytes).
 *   0  the default model's (SmolLM2, byte-level BPE, pre "smollm") when
 *      $KVBENCH_MODEL_FILE names a readable GGUF; otherwise the input is
 *      skipped (so a saved input means the same thing on every machine);
 *   1-4  a tiny byte-level BPE vocabulary (the 256 byte characters, merged
 *      tokens, a control, a user-defined, an unknown and an EOG token) with
 *      the pre-tokenizers gpt2, smollm, llama3 (ignore_merges, BOS) and
 *      default;
 *   5  a tiny SentencePiece vocabulary with byte fallback (<0xXX>) and a
 *      user-defined token;
 *   6  a tiny SentencePiece vocabulary without byte tokens (UNK path) and
 *      without the space prefix.
 *
 * Checked on every input (parse_special off and on, add_bos 0, 1, 2):
 *   - ids lie in [0, n_vocab); add_bos only prepends BOS (never doubled:
 *     dropped when the text brings its own) and add_eos appends EOS;
 *   - tokenizer_piece returns the full length and writes at most cap bytes;
 *   - round trip, where docs/TOKENIZER.md defines it:
 *     byte-level BPE: any bytes (valid UTF-8 or not: invalid bytes are kept
 *       as byte tokens) when every byte of x has a byte token (SmolLM2 lacks
 *       0x04, 0x06, ... which are dropped by design): with special parsing
 *       off, decode without rendering specials gives x; with it on, decode
 *       rendering specials gives x (control/unknown texts come back);
 *     where x is not valid UTF-8, decode gives x with each maximal ill-formed
 *       subpart replaced by U+FFFD (docs/TOKENIZER.md; the oracle below is
 *       written from the Unicode Standard's Table 3-7), and the pieces
 *       (tokenizer_piece, raw bytes) still give x itself;
 *     SentencePiece: when every id of the encoding is a normal or byte token
 *       (no UNK: characters missing without byte fallback; no special token,
 *       after which a space prefix is inserted by design) and x does not
 *       contain U+2581 (which SentencePiece decodes as a space);
 *     a NUL byte decodes as U+FFFD (the returned C string would end there),
 *     so the oracle replaces it the same way.
 *   - tokenizer_encode_cont: ids in range (its decoding alone is not x for
 *     SentencePiece by design: no dummy prefix to drop). */
#include "tests/fuzz/fuzz_common.h"
#include "harness/engine/gguf.h"
#include "harness/engine/tok_internal.h"
#include "harness/engine/unicode.h"
#include "tests/unit/tiny_vocab.h"

#define TOK_FZ_N 7

static kb_tokenizer *tok_fz[TOK_FZ_N];
static gguf_file *tok_fz_model_file;

static kb_tokenizer *tok_fz_build(const tok_spec *s) {
    kb_tokenizer *t = NULL;
    kb_err err = {0};
    if (tokenizer_build(s, &t, &err)) {
        fprintf(stderr, "fuzz_tokenizer: cannot build a fixed vocabulary: %s\n", err.msg);
        abort();
    }
    return t;
}

static void tok_fz_tiny_bpe(void) {
    static tiny_vocab v;
    static char bytes[256][4];
    tiny_vocab_gpt2_bytes(&v, bytes);
    tiny_vocab_add(&v, "ab", TT_NORMAL, 0);
    tiny_vocab_add(&v, "bc", TT_NORMAL, 0);
    tiny_vocab_add(&v, "abc", TT_NORMAL, 0);
    tiny_vocab_add(&v, "\xc4\xa0" "a", TT_NORMAL, 0);   /* "Ġa": space + a */
    tiny_vocab_add(&v, "\xc3\x83\xc2\xa9", TT_NORMAL, 0); /* "Ã©": the bytes of é */
    tiny_vocab_add(&v, "12", TT_NORMAL, 0);
    tiny_vocab_add(&v, "<|x|>", TT_CONTROL, 0);
    tiny_vocab_add(&v, "<u>", TT_USER, 0);
    tiny_vocab_add(&v, "<unk>", TT_UNKNOWN, 0);
    int eot = tiny_vocab_add(&v, "<|im_end|>", TT_NORMAL, 0); /* EOG text: promoted to control */
    int bos = tiny_vocab_add(&v, "<|begin_of_text|>", TT_CONTROL, 0);
    v.merges[v.nm++] = "b c";
    v.merges[v.nm++] = "a b";
    v.merges[v.nm++] = "a bc";
    v.merges[v.nm++] = "ab c";
    v.merges[v.nm++] = "\xc4\xa0 a";
    v.merges[v.nm++] = "\xc3\x83 \xc2\xa9";
    v.merges[v.nm++] = "1 2";
    static const char *const pres[4] = {"gpt2", "smollm", "llama3", "default"};
    for (int i = 0; i < 4; i++) {
        tok_spec s = tiny_vocab_spec(&v, "fuzz-vocab", "gpt2", pres[i]);
        s.eos = eot;
        s.bos = bos;
        s.add_eos = i == 3; /* one vocabulary also appends EOS for add_bos = 1 */
        tok_fz[1 + i] = tok_fz_build(&s);
    }
}

static void tok_fz_tiny_spm(void) {
    static tiny_vocab v, w;
    static char hex[256][8];
    tiny_vocab_spm(&v);
    for (int b = 0; b < 256; b++) {
        snprintf(hex[b], sizeof hex[b], "<0x%02X>", b);
        tiny_vocab_add(&v, hex[b], TT_BYTE, 0);
    }
    tiny_vocab_add(&v, "\xe2\x96\x81", TT_NORMAL, -10);
    tiny_vocab_add(&v, "a", TT_NORMAL, -11);
    tiny_vocab_add(&v, "b", TT_NORMAL, -12);
    tiny_vocab_add(&v, "\xc3\xa9", TT_NORMAL, -13); /* é */
    tiny_vocab_add(&v, "\xe2\x96\x81" "a", TT_NORMAL, -1);
    tiny_vocab_add(&v, "ab", TT_NORMAL, -2);
    tiny_vocab_add(&v, "\xe2\x96\x81" "ab", TT_NORMAL, -3);
    tiny_vocab_add(&v, "\xe2\x96\x81\xe2\x96\x81", TT_NORMAL, -4);
    tiny_vocab_add(&v, "<u>", TT_USER, 0);
    tok_spec s = tiny_vocab_spec(&v, "fuzz-vocab", "llama", NULL);
    tok_fz[5] = tok_fz_build(&s);

    tiny_vocab_spm(&w);
    tiny_vocab_add(&w, "\xe2\x96\x81", TT_NORMAL, -10);
    tiny_vocab_add(&w, "a", TT_NORMAL, -11);
    tiny_vocab_add(&w, "b", TT_NORMAL, -12);
    tiny_vocab_add(&w, " ", TT_NORMAL, -20); /* a literal space token: never produced */
    tiny_vocab_add(&w, "ab", TT_NORMAL, -2);
    tiny_vocab_add(&w, "\xe2\x96\x81" "b", TT_NORMAL, -3);
    s = tiny_vocab_spec(&w, "fuzz-vocab", "llama", NULL);
    s.add_space_prefix = 0;
    s.add_bos = 0;
    tok_fz[6] = tok_fz_build(&s);
}

/* Builds the tokenizers; $KVBENCH_MODEL_FILE adds the default model's. */
static void fuzz_tokenizer_init(void) {
    if (tok_fz[1]) return;
    tok_fz_tiny_bpe();
    tok_fz_tiny_spm();
    const char *model = getenv("KVBENCH_MODEL_FILE");
    kb_err err = {0};
    if (model && *model) {
        if (gguf_open(model, &tok_fz_model_file, &err) ||
            tokenizer_from_gguf(tok_fz_model_file, &tok_fz[0], &err))
            fprintf(stderr, "fuzz_tokenizer: %s (tokenizer 0 skipped)\n", err.msg);
    }
}

static void fuzz_tokenizer_done(void) {
    for (int i = 0; i < TOK_FZ_N; i++) {
        tokenizer_free(tok_fz[i]);
        tok_fz[i] = NULL;
    }
    gguf_close(tok_fz_model_file);
    tok_fz_model_file = NULL;
}

/* ---- checks ---- */

static int tok_fz_is_special(const kb_tokenizer *t, int32_t id) {
    uint8_t ty = t->type[id];
    return ty != TT_NORMAL && ty != TT_BYTE && ty != TT_UNDEFINED;
}

/* Encodes with the given flags; checks the ids; caller frees. */
static int32_t *tok_fz_encode(const kb_tokenizer *t, const uint8_t *x, size_t n, int ps, int bos,
                              int *n_ids) {
    int32_t *ids = NULL;
    kb_err err = {0};
    *n_ids = -1;
    int rc = tokenizer_encode(t, (const char *)x, n, ps, bos, &ids, n_ids, &err);
    FUZZ_ASSERT(rc == 0, "encode failed: %s", err.msg);
    FUZZ_ASSERT(ids != NULL && *n_ids >= 0, "encode: %d ids", *n_ids);
    for (int i = 0; i < *n_ids; i++)
        FUZZ_ASSERT(ids[i] >= 0 && ids[i] < t->n_vocab, "id %d at %d of %d", ids[i], i, *n_ids);
    return ids;
}

/* Pieces of ids concatenated (exact bytes, NUL-safe); *len gets the length. */
static char *tok_fz_pieces(const kb_tokenizer *t, const int32_t *ids, int n, int render,
                           size_t *len) {
    size_t cap = 16, o = 0;
    char *s = malloc(cap);
    for (int i = 0; i < n; i++) {
        int l = tokenizer_piece(t, ids[i], render, NULL, 0);
        FUZZ_ASSERT(l >= 0, "piece length %d", l);
        while (o + (size_t)l + 8 > cap) s = realloc(s, cap *= 2);
        /* canary after cap: tokenizer_piece must write at most cap bytes */
        memset(s + o, 0x5A, (size_t)l + 8);
        int l2 = tokenizer_piece(t, ids[i], render, s + o, l);
        FUZZ_ASSERT(l2 == l, "piece length %d then %d", l, l2);
        FUZZ_ASSERT(s[o + (size_t)l] == 0x5A, "tokenizer_piece wrote past cap %d", l);
        if (l > 1) { /* a short buffer: full length back, only cap bytes written */
            char small[2] = {0x5A, 0x5A};
            FUZZ_ASSERT(tokenizer_piece(t, ids[i], render, small, 1) == l && small[1] == 0x5A,
                        "tokenizer_piece with cap 1");
        }
        o += (size_t)l;
    }
    *len = o;
    return s;
}

/* x with each maximal ill-formed subpart replaced by U+FFFD (EF BF BD):
 * the Unicode Standard's "U+FFFD substitution of maximal subparts" (chapter
 * 3.9), over the well-formed sequences of its Table 3-7. An oracle of its own
 * (not harness/engine/unicode.c's decoder), and a NUL byte replaced too.
 * Returns a malloc'd string of *len bytes (at most 3n). */
static char *tok_fz_lossy(const uint8_t *x, size_t n, size_t *len) {
    char *o = malloc(3 * n + 1);
    size_t k = 0, i = 0;
    while (i < n) {
        uint8_t b = x[i];
        int need;        /* bytes in the sequence b starts */
        uint8_t lo, hi;  /* the range of its second byte */
        if (b == 0) { /* decode's one rule beyond UTF-8's (docs/TOKENIZER.md) */
            memcpy(o + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i++;
            continue;
        }
        if (b < 0x80) {
            o[k++] = (char)b;
            i++;
            continue;
        }
        if (b >= 0xC2 && b <= 0xDF) need = 2, lo = 0x80, hi = 0xBF;
        else if (b == 0xE0) need = 3, lo = 0xA0, hi = 0xBF;
        else if (b == 0xED) need = 3, lo = 0x80, hi = 0x9F;
        else if (b >= 0xE1 && b <= 0xEF) need = 3, lo = 0x80, hi = 0xBF;
        else if (b == 0xF0) need = 4, lo = 0x90, hi = 0xBF;
        else if (b >= 0xF1 && b <= 0xF3) need = 4, lo = 0x80, hi = 0xBF;
        else if (b == 0xF4) need = 4, lo = 0x80, hi = 0x8F;
        else need = 0, lo = hi = 0; /* 80..C1, F5..FF: never in a sequence */
        int got = need ? 1 : 0;      /* bytes of a well-formed prefix so far */
        while (got && got < need && i + (size_t)got < n) {
            uint8_t c = x[i + (size_t)got];
            uint8_t l = got == 1 ? lo : 0x80, h = got == 1 ? hi : 0xBF;
            if (c < l || c > h) break;
            got++;
        }
        if (need && got == need) {
            memcpy(o + k, x + i, (size_t)need);
            k += (size_t)need;
            i += (size_t)need;
        } else { /* the maximal subpart: the well-formed prefix, or the lone byte */
            memcpy(o + k, "\xEF\xBF\xBD", 3);
            k += 3;
            i += got ? (size_t)got : 1;
        }
    }
    o[k] = 0;
    *len = k;
    return o;
}

/* *lossy: tok_fz_lossy(x), computed on the first call that needs it and
 * kept for the next (both parse_special settings decode the same text) */
static void tok_fz_roundtrip(const kb_tokenizer *t, const uint8_t *x, size_t n, int ps,
                             const int32_t *ids, int n_ids, char **lossy, size_t *lossy_len) {
    int render = ps; /* specials are parsed only with ps, so they must render back */
    if (t->model == TOK_SPM) {
        for (int i = 0; i < n_ids; i++)
            if (tok_fz_is_special(t, ids[i])) return; /* UNK or after a special: undefined */
        for (size_t i = 0; i + 2 < n; i++)
            if (x[i] == 0xE2 && x[i + 1] == 0x96 && x[i + 2] == 0x81) return; /* U+2581 */
    } else {
        for (size_t i = 0; i < n; i++)
            if (t->byte_tok[x[i]] < 0) return; /* byte missing from the vocabulary: dropped */
    }
    char *d = tokenizer_decode(t, ids, n_ids, render);
    if (!*lossy) *lossy = tok_fz_lossy(x, n, lossy_len);
    size_t dl = strlen(d), wl = *lossy_len;
    const char *want = *lossy;
    FUZZ_ASSERT(dl == wl && !memcmp(d, want, wl),
                "round trip (%s, parse_special %d): %zu bytes in (%zu as valid UTF-8), %zu out: '%.*s' -> '%s'",
                t->pre_name, ps, n, wl, dl, (int)n, (const char *)x, d);
    free(d);
    size_t pl;
    char *p = tok_fz_pieces(t, ids, n_ids, render, &pl);
    /* SentencePiece's decode drops the dummy prefix of the first token */
    size_t skip = t->model == TOK_SPM && t->add_space_prefix && pl && p[0] == ' ';
    FUZZ_ASSERT(pl - skip == n && !memcmp(p + skip, x, n),
                "pieces (%s, parse_special %d): %zu bytes in, %zu out", t->pre_name, ps, n,
                pl - skip);
    free(p);
}

int fuzz_tokenizer_one(const uint8_t *d, size_t n) {
    fuzz_tokenizer_init();
    if (n < 1) return 0;
    const kb_tokenizer *t = tok_fz[d[0] % TOK_FZ_N];
    if (!t) return 0;
    const uint8_t *x = d + 1;
    n--;
    char *lossy = NULL;
    size_t lossy_len = 0;
    for (int ps = 0; ps < 2; ps++) {
        int n0, n1, n2;
        int32_t *ids0 = tok_fz_encode(t, x, n, ps, 0, &n0);
        int32_t *ids1 = tok_fz_encode(t, x, n, ps, 1, &n1);
        int32_t *ids2 = tok_fz_encode(t, x, n, ps, 2, &n2);
        /* add_bos: BOS in front unless the text brought its own; EOS at the end
         * for add_bos = 1 when the model adds one */
        for (int mode = 1; mode <= 2; mode++) {
            const int32_t *ids = mode == 1 ? ids1 : ids2;
            int nn = mode == 1 ? n1 : n2;
            int want_bos = t->bos >= 0 && (mode == 2 || t->add_bos);
            int want_eos = mode == 1 && t->add_eos && t->eos >= 0;
            int add = want_bos && !(n0 && ids0[0] == t->bos);
            int ok = nn == n0 + add + want_eos && (!add || ids[0] == t->bos) &&
                     !memcmp(ids + add, ids0, (size_t)n0 * sizeof *ids0) &&
                     (!want_eos || ids[nn - 1] == t->eos);
            FUZZ_ASSERT(ok, "add_bos %d (%s, ps %d): %d ids vs %d without", mode, t->pre_name, ps,
                        nn, n0);
        }
        tok_fz_roundtrip(t, x, n, ps, ids0, n0, &lossy, &lossy_len);
        char *dec = tokenizer_decode(t, ids2, n2, 1);
        free(dec);
        free(ids0);
        free(ids1);
        free(ids2);
    }
    free(lossy);
    int32_t *ids = NULL;
    int nc = -1;
    kb_err err = {0};
    int rc = tokenizer_encode_cont(t, (const char *)x, n, &ids, &nc, &err);
    FUZZ_ASSERT(rc == 0 && ids && nc >= 0, "encode_cont rc %d", rc);
    for (int i = 0; i < nc; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < t->n_vocab, "cont id %d", ids[i]);
    free(ids);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    fuzz_tokenizer_init();
    atexit(fuzz_tokenizer_done);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fuzz_tokenizer_one(d, n); }
#endif
