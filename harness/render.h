/* render.h - turning a dataset sample into the token sequences the engine
 * feeds: chat format of the model family (or raw text), middle truncation,
 * answer prefixes, later turns' continuations and multi-request splits. */
#ifndef KB_RENDER_H
#define KB_RENDER_H

#include "datasets/dataset.h"
#include "harness/engine/tokenizer.h"

typedef struct kb_tokens {
    int32_t *ids;
    int n;
} kb_tokens;

void tokens_free(kb_tokens *t);

typedef struct kb_renderer {
    const kb_tokenizer *tok;
    kb_chat_format fmt; /* the model family's format (used for chat samples) */
} kb_renderer;

/* First turn of a sample: [BOS] + chat-rendered (or raw) user text + answer
 * prefix, with the user text middle-truncated to truncate_to tokens (first
 * and last halves kept) when set. */
int render_first_turn(const kb_renderer *r, const kb_sample *s, kb_tokens *out, kb_err *err);
/* Tokens appended for turn t > 0 of a conversation: the previous answer
 * (`answer`: gold, or the model's own) closed, then turn t's user message and
 * generation prompt + answer prefix. */
int render_next_turn(const kb_renderer *r, const kb_sample *s, int t, const char *answer,
                     kb_tokens *out, kb_err *err);
/* Multi-request samples: the shared prefix tokens (everything up to the end
 * of shared_prefix in the first request's rendering), and for request t the
 * tokens that follow it. */
int render_shared_prefix(const kb_renderer *r, const kb_sample *s, kb_tokens *out, kb_err *err);
int render_request(const kb_renderer *r, const kb_sample *s, int t, kb_tokens *out, kb_err *err);

/* kb_dataset_env.count_tokens callback (ctx = kb_renderer*): first-turn tokens. */
int render_count_tokens(void *ctx, const kb_sample *s);

#endif
