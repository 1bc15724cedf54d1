/* tokenizer.h - tokenizers built from GGUF metadata, and chat formats.
 *
 * Byte-level BPE ("gpt2" model) with the pre-tokenizer chosen by
 * tokenizer.ggml.pre, and SentencePiece BPE with byte fallback ("llama"
 * model). Special (control / user-defined) tokens are matched literally when
 * parse_special is on. Chat formats are detected from tokenizer.chat_template
 * and rendered natively (no Jinja). docs/TOKENIZER.md has the details and the
 * decisions (pre-tokenizer table, exact chat strings, stop tokens). */
#ifndef KB_TOKENIZER_H
#define KB_TOKENIZER_H

#include "harness/engine/gguf.h"
#include "kernels/kb_base.h"

typedef struct kb_tokenizer kb_tokenizer;

typedef enum kb_chat_format {
    KB_CHAT_RAW = 0,  /* no template: text as is */
    KB_CHAT_CHATML,   /* <|im_start|>role\n...<|im_end|>\n; no system -> SmolLM2's default one */
    KB_CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    KB_CHAT_MISTRAL,  /* <s>[INST] ... [/INST] */
    KB_CHAT_VICUNA,   /* system sentence + USER: ... ASSISTANT: (LongChat) */
    KB_CHAT_CHATML_NOSYS, /* ChatML whose template has no default system message */
} kb_chat_format;

/* Builds the tokenizer from f's tokenizer.* keys. Needs no tensors. Errors
 * (KB_EINPUT) name the file and key: missing or mistyped keys, an unknown
 * tokenizer.ggml.model or tokenizer.ggml.pre, special ids out of range. A
 * missing tokenizer.ggml.pre selects "default" with a warning on stderr. */
int tokenizer_from_gguf(const gguf_file *f, kb_tokenizer **out, kb_err *err);
void tokenizer_free(kb_tokenizer *t);

int tokenizer_n_vocab(const kb_tokenizer *t);
/* Encode len bytes of UTF-8 text (a byte that is not valid UTF-8 is kept:
 * it counts as a symbol character and comes out as a byte token).
 * *ids is malloc'ed (caller frees; non-NULL even when *n_ids is 0).
 * add_bos: 0 never; 1 prepend BOS if the model wants one
 * (tokenizer_add_bos(), and EOS likewise for add_eos models); 2 always
 * (when the vocabulary has a BOS). BOS is never doubled: when the text
 * itself starts with the BOS token (e.g. a chat template's
 * <|begin_of_text|> or <s>), none is added. */
int tokenizer_encode(const kb_tokenizer *t, const char *text, size_t len, int parse_special,
                     int add_bos, int32_t **ids, int *n_ids, kb_err *err);
/* Encodes text that continues a sequence (e.g. chat_next_turn's text after
 * the model's answer): special tokens parsed, no BOS, and for SentencePiece
 * models no space prefix at the start (one is still added after each special
 * token, as when the whole conversation is encoded at once). */
int tokenizer_encode_cont(const kb_tokenizer *t, const char *text, size_t len, int32_t **ids,
                          int *n_ids, kb_err *err);
/* The bytes a token stands for when decoded (byte tokens give their byte;
 * control tokens give their text only if render_special; user-defined tokens
 * always give their text). May be a partial UTF-8 sequence. Returns the full
 * length (0 for an id out of range); writes at most cap bytes. */
int tokenizer_piece(const kb_tokenizer *t, int32_t id, int render_special, char *buf, int cap);
/* The same bytes without a copy: a pointer into the tokenizer (not NUL-terminated)
 * and *len their length; NULL and 0 for an id out of range or a control token not
 * rendered (an empty piece gives a pointer and 0). For callers that must not cut a
 * long token at a buffer's size. */
const char *tokenizer_piece_ref(const kb_tokenizer *t, int32_t id, int render_special, int *len);
/* Decode a sequence to a malloc'ed NUL-terminated string: the pieces
 * concatenated; for SentencePiece models with add_space_prefix the leading
 * space of the first non-control token is dropped (as SentencePiece does). */
char *tokenizer_decode(const kb_tokenizer *t, const int32_t *ids, int n, int render_special);
/* The token's text as stored in the vocabulary (not decoded); NULL if out of
 * range. *len gets its length. */
const char *tokenizer_token_text(const kb_tokenizer *t, int32_t id, int *len);

int tokenizer_bos(const kb_tokenizer *t);     /* -1 if none */
int tokenizer_eos(const kb_tokenizer *t);
int tokenizer_add_bos(const kb_tokenizer *t); /* model's default for raw prompts */
/* 1 if generation must stop at this token (EOS, EOT and the family's stops). */
int tokenizer_is_eog(const kb_tokenizer *t, int32_t id);
/* 1 for control/unknown tokens (rendered as nothing unless render_special). */
int tokenizer_is_control(const kb_tokenizer *t, int32_t id);
const char *tokenizer_pre_name(const kb_tokenizer *t); /* e.g. "smollm" */
const char *tokenizer_model_name(const kb_tokenizer *t); /* "gpt2" or "llama" */

/* ---- chat formats ---- */
kb_chat_format tokenizer_chat_format(const kb_tokenizer *t);
const char *chat_format_name(kb_chat_format f);
/* "raw", "chatml", "chatml-nosys", "llama3", "mistral", "vicuna": 0 ok, else
 * KB_EINPUT. */
int chat_format_parse(const char *name, kb_chat_format *out);

/* Text of a conversation start: [system] + first user message + the
 * generation prompt (assistant header). system may be NULL (family default
 * applies: SmolLM2's default system message for KB_CHAT_CHATML, Vicuna's
 * system sentence, none for the others). Malloc'ed. Encode it with
 * parse_special = 1 and add_bos = 1: formats whose template starts with BOS
 * (Llama-3, Mistral) write it into the text and it is not doubled. */
char *chat_first_turn(kb_chat_format f, const char *system, const char *user);
/* Text that continues a conversation after the model's turn: closes the
 * assistant message `answer` (which follows the previous generation prompt),
 * then the next user message and a new generation prompt. Malloc'ed.
 * Concatenating chat_first_turn + answer-continuations gives exactly the
 * family's full rendering of the conversation. Encode with
 * tokenizer_encode_cont. */
char *chat_next_turn(kb_chat_format f, const char *answer, const char *user);

#endif
