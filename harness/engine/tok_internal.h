/* tok_internal.h - the tokenizer's private state, shared by tokenizer.c
 * (loading, special tokens, decoding), bpe.c (byte-level BPE and its
 * pre-tokenizers), spm.c (SentencePiece BPE) and the unit tests. Not for
 * other parts of kvbench: they use tokenizer.h. */
#ifndef KB_TOK_INTERNAL_H
#define KB_TOK_INTERNAL_H

#include <stdint.h>

#include "harness/engine/tokenizer.h"

enum tok_model { TOK_BPE = 1, TOK_SPM = 2 };

/* Pre-tokenizer regex lists (see bpe.c and docs/TOKENIZER.md). */
enum tok_pre { PRE_NONE = 0, PRE_DEFAULT, PRE_GPT2, PRE_SMOLLM, PRE_LLAMA3 };

/* tokenizer.ggml.token_type values. */
enum {
    TT_UNDEFINED = 0, TT_NORMAL = 1, TT_UNKNOWN = 2, TT_CONTROL = 3,
    TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6,
};

/* One BPE merge in the (left id, right id) -> rank hash table. */
typedef struct tok_merge {
    uint64_t key;   /* (uint64)left << 32 | right; UINT64_MAX = empty slot */
    int32_t rank;   /* index in tokenizer.ggml.merges: lower merges first */
    int32_t result; /* id of the merged token */
} tok_merge;

struct kb_tokenizer {
    int model;              /* TOK_BPE or TOK_SPM */
    int pre;                /* PRE_* (BPE only) */
    char pre_name[64];      /* tokenizer.ggml.pre as given, or "default" */
    int ignore_merges;      /* Llama-3: a piece that is a whole token is emitted as is */
    int32_t n_vocab;

    char *text;             /* token texts, back to back (not NUL-separated) */
    uint32_t *text_off;     /* [n_vocab] byte offset of token i in text */
    uint32_t *text_len;     /* [n_vocab] */
    uint8_t *type;          /* [n_vocab] TT_* */
    float *score;           /* [n_vocab] SPM merge priority (0 when absent) */
    uint8_t *eog;           /* [n_vocab] 1 = end of generation */

    char *piece;            /* decoded bytes of every token (normal decoding) */
    uint32_t *piece_off;    /* [n_vocab] */
    uint32_t *piece_len;    /* [n_vocab] */

    int32_t *hash;          /* open addressing, token text -> id; -1 = empty */
    uint32_t hash_mask;     /* table size - 1 (power of two) */

    tok_merge *merges;      /* BPE merge table, merge_mask + 1 slots */
    uint64_t merge_mask;
    int32_t n_merges;       /* merges in the table */

    /* BPE: id of the token for byte b's bytes_to_unicode character.
     * SPM: id of the byte-fallback token <0xXX>. -1 when absent. */
    int32_t byte_tok[256];

    int32_t *special;       /* ids matched literally in text, sorted by first byte, longest first */
    int32_t n_special;
    int32_t special_start[257]; /* special[special_start[b] .. special_start[b+1]) start with byte b */

    int32_t bos, eos, unk, pad; /* -1 = none */
    int add_bos, add_eos, add_space_prefix;
    kb_chat_format chat;
};

/* Everything a tokenizer is built from (read from GGUF by
 * tokenizer_from_gguf, or filled by tests). Strings are pointer + length and
 * need not be NUL-terminated. */
typedef struct tok_spec {
    const char *where;              /* file name used in messages */
    const char *model;              /* tokenizer.ggml.model: "gpt2" or "llama" */
    const char *pre;                /* tokenizer.ggml.pre; NULL = absent */
    int32_t n_vocab;
    const char *const *tokens;      /* [n_vocab] */
    const uint32_t *token_lens;     /* [n_vocab] */
    const int32_t *types;           /* [n_vocab] or NULL (all normal) */
    const float *scores;            /* [n_vocab] or NULL */
    int32_t n_merges;
    const char *const *merges;      /* [n_merges] "A B" */
    const uint32_t *merge_lens;
    int64_t bos, eos, unk, pad;     /* -2 = key absent (model default) */
    int add_bos, add_eos, add_space_prefix; /* -1 = key absent (model default) */
    const char *chat_template;      /* NULL = absent */
} tok_spec;

int tokenizer_build(const tok_spec *s, kb_tokenizer **out, kb_err *err);

/* Growable id vector. */
typedef struct tok_ids {
    int32_t *v;
    int n, cap;
} tok_ids;
void tok_ids_push(tok_ids *o, int32_t id);

/* Token id of the exact byte string s[0..len), or -1. */
int32_t tok_lookup(const kb_tokenizer *t, const char *s, size_t len);

/* ---- bpe.c ---- */
/* GPT-2 bytes_to_unicode: the code point byte b is written as in the vocab. */
void bpe_bytes_to_unicode(uint32_t map[256]);
/* Parses the pre-tokenizer name; 0 when known (sets *pre and *ignore_merges). */
int bpe_pre_parse(const char *name, int *pre, int *ignore_merges);
/* Comma-separated list of known names, for error messages. */
const char *bpe_pre_known(void);
/* Splits s[0..len) into pre-tokenizer pieces. *bounds (malloc'ed) gets n+1
 * byte offsets: piece i is [bounds[i], bounds[i+1]). */
void bpe_pretokenize(int pre, const char *s, size_t len, size_t **bounds, int *n);
/* Builds the merge table from the "A B" strings (needs the token hash). */
int bpe_build_merges(kb_tokenizer *t, const tok_spec *s, kb_err *err);
/* Encodes raw text (no special tokens in it) and appends the ids. */
void bpe_encode(const kb_tokenizer *t, const char *s, size_t len, tok_ids *out);

/* ---- spm.c ---- */
/* Encodes raw text with SentencePiece BPE; space_prefix adds the leading
 * U+2581 (add_space_prefix at the start of a fragment). */
void spm_encode(const kb_tokenizer *t, const char *s, size_t len, int space_prefix, tok_ids *out);

/* ---- chat.c ---- */
kb_chat_format chat_detect(const char *chat_template, int is_spm);

#endif
