/* tokenizer.h - tokenizers built from GGUF metadata, and chat formats.
 *
 * Byte-level BPE ("gpt2" model) with the pre-tokenizer chosen by
 * tokenizer.ggml.pre, and SentencePiece BPE with byte fallback ("llama"
 * model). Special (control / user-defined) tokens are matched literally when
 * parse_special is on. Chat formats are detected from tokenizer.chat_template
 * and rendered natively (no Jinja). */
#ifndef KB_TOKENIZER_H
#define KB_TOKENIZER_H

#include "harness/engine/gguf.h"
#include "kernels/kb_base.h"

typedef struct kb_tokenizer kb_tokenizer;

typedef enum kb_chat_format {
    KB_CHAT_RAW = 0,  /* no template: text as is */
    KB_CHAT_CHATML,   /* <|im_start|>role\n...<|im_end|>\n (SmolLM2, Qwen) */
    KB_CHAT_LLAMA3,   /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    KB_CHAT_MISTRAL,  /* <s>[INST] ... [/INST] */
    KB_CHAT_VICUNA,   /* system sentence + USER: ... ASSISTANT: (LongChat) */
} kb_chat_format;

int tokenizer_from_gguf(const gguf_file *f, kb_tokenizer **out, kb_err *err);
void tokenizer_free(kb_tokenizer *t);

int tokenizer_n_vocab(const kb_tokenizer *t);
/* Encode len bytes of UTF-8 text. *ids is malloc'ed (caller frees).
 * add_bos: prepend BOS if the model wants one (tokenizer_add_bos()). */
int tokenizer_encode(const kb_tokenizer *t, const char *text, size_t len, int parse_special,
                     int add_bos, int32_t **ids, int *n_ids, kb_err *err);
/* The bytes a token stands for when decoded (byte tokens give their byte;
 * control tokens give their text only if render_special). Returns the length;
 * writes at most cap bytes. */
int tokenizer_piece(const kb_tokenizer *t, int32_t id, int render_special, char *buf, int cap);
/* Decode a sequence to a malloc'ed NUL-terminated string. */
char *tokenizer_decode(const kb_tokenizer *t, const int32_t *ids, int n, int render_special);

int tokenizer_bos(const kb_tokenizer *t);     /* -1 if none */
int tokenizer_eos(const kb_tokenizer *t);
int tokenizer_add_bos(const kb_tokenizer *t); /* model's default for raw prompts */
/* 1 if generation must stop at this token (EOS, EOT and the family's stops). */
int tokenizer_is_eog(const kb_tokenizer *t, int32_t id);
const char *tokenizer_pre_name(const kb_tokenizer *t); /* e.g. "smollm" */
const char *tokenizer_model_name(const kb_tokenizer *t); /* "gpt2" or "llama" */

/* ---- chat formats ---- */
kb_chat_format tokenizer_chat_format(const kb_tokenizer *t);
const char *chat_format_name(kb_chat_format f);
int chat_format_parse(const char *name, kb_chat_format *out); /* "chatml", "llama3", ... */

/* Text of a conversation start: [system] + first user message + the
 * generation prompt (assistant header). system may be NULL (family default
 * applies, e.g. SmolLM's default system message for ChatML). Malloc'ed. */
char *chat_first_turn(kb_chat_format f, const char *system, const char *user);
/* Text that continues a conversation after the model's turn: closes the
 * assistant message `answer` (which follows the previous generation prompt),
 * then the next user message and a new generation prompt. Malloc'ed.
 * Concatenating chat_first_turn + answer-continuations gives exactly the
 * family's full rendering of the conversation. */
char *chat_next_turn(kb_chat_format f, const char *answer, const char *user);

#endif
