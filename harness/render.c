/* render.c - samples -> token sequences (render.h).
 *
 * Decisions (docs/DESIGN.md): middle truncation applies to the user text
 * before chat wrapping, as LongBench does (tokenise, keep the first and last
 * halves, decode back to text). Raw multi-turn conversations continue with
 * answer + "\n\n" + next user text + its answer prefix (as chat_next_turn's
 * raw format; the first turn's answer prefix already ends the prompt). */
#include "harness/render.h"

#include <stdio.h>
#include <stdlib.h>

void tokens_free(kb_tokens *t) {
    free(t->ids);
    t->ids = NULL;
    t->n = 0;
}

static char *concat(const char *a, const char *b) {
    size_t na = strlen(a), nb = b ? strlen(b) : 0;
    char *s = KB_MALLOC(na + nb + 1);
    memcpy(s, a, na);
    if (nb) memcpy(s + na, b, nb);
    s[na + nb] = 0;
    return s;
}

/* The user text, middle-truncated to s->truncate_to tokens when set. */
static int user_text(const kb_renderer *r, const kb_sample *s, const char *user, char **out,
                     kb_err *err) {
    if (s->truncate_to <= 0) {
        *out = kb_strdup(user);
        return 0;
    }
    int32_t *ids;
    int n;
    int rc = tokenizer_encode(r->tok, user, strlen(user), 0, 0, &ids, &n, err);
    if (rc) return rc;
    if (n <= s->truncate_to) {
        free(ids);
        *out = kb_strdup(user);
        return 0;
    }
    int half = s->truncate_to / 2, tail = s->truncate_to - half;
    memmove(ids + half, ids + n - tail, (size_t)tail * sizeof(int32_t));
    *out = tokenizer_decode(r->tok, ids, s->truncate_to, 1);
    free(ids);
    return 0;
}

static char *first_turn_text(const kb_renderer *r, const kb_sample *s, const char *user) {
    const char *prefix = s->turns[0].answer_prefix;
    if (!s->chat) return concat(user, prefix);
    char *t = chat_first_turn(r->fmt, s->system, user);
    char *full = concat(t, prefix);
    free(t);
    return full;
}

int render_first_turn(const kb_renderer *r, const kb_sample *s, kb_tokens *out, kb_err *err) {
    memset(out, 0, sizeof *out);
    if (s->n_turns < 1) return kb_fail(err, KB_EINPUT, "%s/%s: sample has no turns", s->task, s->id);
    char *user;
    int rc = user_text(r, s, s->turns[0].user, &user, err);
    if (rc) return rc;
    char *text = first_turn_text(r, s, user);
    free(user);
    /* chat: special tokens parsed, BOS as the template writes it; raw: the
     * model's own BOS default and special-looking text kept literal */
    rc = tokenizer_encode(r->tok, text, strlen(text), s->chat, 1, &out->ids, &out->n, err);
    free(text);
    return rc;
}

int render_next_turn(const kb_renderer *r, const kb_sample *s, int t, const char *answer,
                     kb_tokens *out, kb_err *err) {
    memset(out, 0, sizeof *out);
    if (t < 1 || t >= s->n_turns)
        return kb_fail(err, KB_ERUNTIME, "%s/%s: no turn %d", s->task, s->id, t);
    const kb_turn *tu = &s->turns[t];
    char *text;
    if (s->chat) {
        char *c = chat_next_turn(r->fmt, answer, tu->user);
        text = concat(c, tu->answer_prefix);
        free(c);
    } else {
        size_t n = strlen(answer) + strlen(tu->user) + 4;
        char *c = KB_MALLOC(n);
        snprintf(c, n, "%s\n\n%s", answer, tu->user);
        text = concat(c, tu->answer_prefix);
        free(c);
    }
    int rc = tokenizer_encode_cont(r->tok, text, strlen(text), &out->ids, &out->n, err);
    free(text);
    return rc;
}

/* Rendered text of request t, and the byte length of its shared prefix part. */
static int request_text(const kb_renderer *r, const kb_sample *s, int t, char **text,
                        size_t *prefix_len, kb_err *err) {
    const char *user = s->turns[t].user, *sp = s->shared_prefix;
    if (!sp || strncmp(user, sp, strlen(sp)))
        return kb_fail(err, KB_ERUNTIME,
                       "%s/%s: request %d's user text does not start with the shared prefix",
                       s->task, s->id, t);
    kb_sample one = *s;
    one.turns = (kb_turn *)&s->turns[t];
    one.truncate_to = 0;
    *text = first_turn_text(r, &one, user);
    /* where the user text sits in the rendering: the chat formats copy it verbatim */
    const char *at = strstr(*text, user);
    if (!at) {
        free(*text);
        return kb_fail(err, KB_ERUNTIME, "%s/%s: cannot locate the user text in its rendering",
                       s->task, s->id);
    }
    *prefix_len = (size_t)(at - *text) + strlen(sp);
    return 0;
}

int render_shared_prefix(const kb_renderer *r, const kb_sample *s, kb_tokens *out, kb_err *err) {
    memset(out, 0, sizeof *out);
    char *text;
    size_t plen;
    int rc = request_text(r, s, 0, &text, &plen, err);
    if (rc) return rc;
    text[plen] = 0;
    rc = tokenizer_encode(r->tok, text, plen, s->chat, 1, &out->ids, &out->n, err);
    free(text);
    return rc;
}

int render_request(const kb_renderer *r, const kb_sample *s, int t, kb_tokens *out, kb_err *err) {
    memset(out, 0, sizeof *out);
    char *text;
    size_t plen;
    int rc = request_text(r, s, t, &text, &plen, err);
    if (rc) return rc;
    rc = tokenizer_encode_cont(r->tok, text + plen, strlen(text + plen), &out->ids, &out->n, err);
    free(text);
    return rc;
}

int render_count_tokens(void *ctx, const kb_sample *s) {
    kb_tokens t;
    kb_err err;
    if (render_first_turn(ctx, s, &t, &err)) return -1;
    int n = t.n;
    tokens_free(&t);
    return n;
}
