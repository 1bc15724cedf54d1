/* tiny_vocab.h - hand-built tokenizer vocabularies for tests/unit/test_tokenizer.c
 * and tests/fuzz/fuzz_tokenizer.c: tokens added one at a time, merges
 * listed, then a tok_spec for tokenizer_build (no special ids, the model's
 * defaults for BOS/EOS and the space prefix). Header only: the fuzz build
 * links no test support code. */
#ifndef KB_TESTS_TINY_VOCAB_H
#define KB_TESTS_TINY_VOCAB_H

#include <stdint.h>
#include <string.h>

#include "harness/engine/tok_internal.h"
#include "harness/engine/unicode.h"

typedef struct tiny_vocab {
    const char *tok[320];
    uint32_t len[320];
    int32_t type[320];
    float score[320];
    int n;
    const char *merges[16];
    uint32_t mlen[16];
    int nm;
} tiny_vocab;

/* Appends token s (kept by pointer: s must outlive the vocabulary); returns its id. */
static inline int tiny_vocab_add(tiny_vocab *v, const char *s, int type, float score) {
    v->tok[v->n] = s;
    v->len[v->n] = (uint32_t)strlen(s);
    v->type[v->n] = type;
    v->score[v->n] = score;
    return v->n++;
}

/* Empties v and gives it GPT-2's 256 byte tokens, id b for byte b, their texts
 * (bytes_to_unicode, UTF-8) written into text[b], which must outlive v. */
static inline void tiny_vocab_gpt2_bytes(tiny_vocab *v, char text[256][4]) {
    memset(v, 0, sizeof *v);
    uint32_t map[256];
    bpe_bytes_to_unicode(map);
    for (int b = 0; b < 256; b++) {
        text[b][utf8_encode(map[b], text[b])] = 0;
        tiny_vocab_add(v, text[b], TT_NORMAL, 0);
    }
}

/* Empties v and gives it SentencePiece's usual first ids: <unk> 0, <s> 1 and </s> 2. */
static inline void tiny_vocab_spm(tiny_vocab *v) {
    memset(v, 0, sizeof *v);
    tiny_vocab_add(v, "<unk>", TT_UNKNOWN, 0);
    tiny_vocab_add(v, "<s>", TT_CONTROL, 0);
    tiny_vocab_add(v, "</s>", TT_CONTROL, 0);
}

/* The spec of v for tokenizer model `model` and pre-tokenizer `pre`; `where`
 * names it in error messages. */
static inline tok_spec tiny_vocab_spec(tiny_vocab *v, const char *where, const char *model, const char *pre) {
    tok_spec s;
    memset(&s, 0, sizeof s);
    s.where = where;
    s.model = model;
    s.pre = pre;
    s.n_vocab = v->n;
    s.tokens = v->tok;
    s.token_lens = v->len;
    s.types = v->type;
    s.scores = v->score;
    for (int i = 0; i < v->nm; i++) v->mlen[i] = (uint32_t)strlen(v->merges[i]);
    s.n_merges = v->nm;
    s.merges = v->merges;
    s.merge_lens = v->mlen;
    s.bos = s.eos = s.unk = s.pad = -2;
    s.add_bos = s.add_eos = s.add_space_prefix = -1;
    return s;
}

#endif
