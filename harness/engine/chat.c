/* chat.c - chat formats, detected from tokenizer.chat_template by substring
 * and rendered natively. Each format writes exactly what the family's
 * template renders (docs/TOKENIZER.md lists the strings and their sources);
 * tests/py/test_tokenizer_chat.py checks that against the Jinja templates.
 * The text is meant to be encoded with parse_special = 1. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/engine/tok_internal.h"
#include "harness/engine/unicode.h"

/* SmolLM2-Instruct's template inserts this when the first message is not a
 * system message. */
#define SMOL_DEFAULT_SYSTEM "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
/* FastChat's vicuna_v1.1 system message (LongChat). */
#define VICUNA_SYSTEM                                                                              \
    "A chat between a curious user and an artificial intelligence assistant. The assistant "     \
    "gives helpful, detailed, and polite answers to the user's questions."

static const char *const names[] = {
    [KB_CHAT_RAW] = "raw",         [KB_CHAT_CHATML] = "chatml",   [KB_CHAT_LLAMA3] = "llama3",
    [KB_CHAT_MISTRAL] = "mistral", [KB_CHAT_VICUNA] = "vicuna",   [KB_CHAT_CHATML_NOSYS] = "chatml-nosys",
};

const char *chat_format_name(kb_chat_format f) {
    if ((unsigned)f < sizeof names / sizeof names[0] && names[f]) return names[f];
    return "unknown";
}

int chat_format_parse(const char *name, kb_chat_format *out) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (names[i] && !strcmp(name, names[i])) {
            *out = (kb_chat_format)i;
            return 0;
        }
    return KB_EINPUT;
}

kb_chat_format chat_detect(const char *tmpl, int is_spm) {
    /* No template: LongChat (Llama-2 based, SentencePiece) ships none and is
     * prompted Vicuna-style; anything else gets raw text. */
    if (!tmpl || !*tmpl) return is_spm ? KB_CHAT_VICUNA : KB_CHAT_RAW;
    if (strstr(tmpl, "<|im_start|>"))
        return strstr(tmpl, SMOL_DEFAULT_SYSTEM) ? KB_CHAT_CHATML : KB_CHAT_CHATML_NOSYS;
    if (strstr(tmpl, "<|start_header_id|>")) return KB_CHAT_LLAMA3;
    if (strstr(tmpl, "[INST]")) return KB_CHAT_MISTRAL;
    if (strstr(tmpl, "USER:") && strstr(tmpl, "ASSISTANT:")) return KB_CHAT_VICUNA;
    fprintf(stderr, "kvbench: warning: tokenizer.chat_template is not a known family (ChatML, Llama-3, "
                    "Mistral, Vicuna); prompts are used as raw text\n");
    return KB_CHAT_RAW;
}

/* ---- a tiny string builder ---- */

typedef struct sbuf {
    char *s;
    size_t n, cap;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t len) {
    if (b->n + len + 1 > b->cap) {
        b->cap = (b->n + len + 1) * 2;
        b->s = KB_REALLOC(b->s, b->cap);
    }
    memcpy(b->s + b->n, s, len);
    b->n += len;
    b->s[b->n] = 0;
}

static void sb_cat(sbuf *b, ...) {
    va_list ap;
    va_start(ap, b);
    for (const char *s; (s = va_arg(ap, const char *));) sb_put(b, s, strlen(s));
    va_end(ap);
}

static int trim_space(uint32_t cp) {
    /* Jinja's |trim is Python's str.strip(): White_Space plus U+001C..U+001F. */
    return unicode_is_whitespace(cp) || (cp >= 0x1C && cp <= 0x1F);
}

/* Appends s with leading and trailing whitespace removed (Llama-3's |trim). */
static void sb_trimmed(sbuf *b, const char *s) {
    size_t len = strlen(s), lo = 0, hi = len;
    while (lo < hi) {
        size_t k;
        uint32_t cp = utf8_decode(s + lo, hi - lo, &k);
        if (!trim_space(cp)) break;
        lo += k;
    }
    while (hi > lo) {
        size_t p = hi - 1;
        while (p > lo && ((uint8_t)s[p] & 0xC0) == 0x80) p--; /* start of the last character */
        size_t k;
        uint32_t cp = utf8_decode(s + p, hi - p, &k);
        if (p + k != hi || !trim_space(cp)) break;
        hi = p;
    }
    sb_put(b, s + lo, hi - lo);
}

static char *sb_done(sbuf *b) {
    if (!b->s) sb_put(b, "", 0);
    return b->s;
}

char *chat_first_turn(kb_chat_format f, const char *system, const char *user) {
    sbuf b = {0};
    switch (f) {
    case KB_CHAT_CHATML:
    case KB_CHAT_CHATML_NOSYS: {
        const char *sys = system ? system : f == KB_CHAT_CHATML ? SMOL_DEFAULT_SYSTEM : NULL;
        if (sys) sb_cat(&b, "<|im_start|>system\n", sys, "<|im_end|>\n", NULL);
        sb_cat(&b, "<|im_start|>user\n", user, "<|im_end|>\n<|im_start|>assistant\n", NULL);
        break;
    }
    case KB_CHAT_LLAMA3:
        sb_cat(&b, "<|begin_of_text|>", NULL);
        if (system) {
            sb_cat(&b, "<|start_header_id|>system<|end_header_id|>\n\n", NULL);
            sb_trimmed(&b, system);
            sb_cat(&b, "<|eot_id|>", NULL);
        }
        sb_cat(&b, "<|start_header_id|>user<|end_header_id|>\n\n", NULL);
        sb_trimmed(&b, user);
        sb_cat(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", NULL);
        break;
    case KB_CHAT_MISTRAL:
        /* The v0.2 template has no system role: the system text goes in
         * front of the first user message, separated by a blank line. */
        sb_cat(&b, "<s>[INST] ", NULL);
        if (system) sb_cat(&b, system, "\n\n", NULL);
        sb_cat(&b, user, " [/INST]", NULL);
        break;
    case KB_CHAT_VICUNA:
        /* FastChat vicuna_v1.1 (sep_style ADD_COLON_TWO, sep " ", sep2 "</s>") */
        sb_cat(&b, system ? system : VICUNA_SYSTEM, " USER: ", user, " ASSISTANT:", NULL);
        break;
    case KB_CHAT_RAW:
    default:
        if (system) sb_cat(&b, system, "\n\n", NULL);
        sb_cat(&b, user, NULL);
        break;
    }
    return sb_done(&b);
}

char *chat_next_turn(kb_chat_format f, const char *answer, const char *user) {
    sbuf b = {0};
    switch (f) {
    case KB_CHAT_CHATML:
    case KB_CHAT_CHATML_NOSYS:
        sb_cat(&b, answer, "<|im_end|>\n<|im_start|>user\n", user,
               "<|im_end|>\n<|im_start|>assistant\n", NULL);
        break;
    case KB_CHAT_LLAMA3:
        sb_trimmed(&b, answer);
        sb_cat(&b, "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n", NULL);
        sb_trimmed(&b, user);
        sb_cat(&b, "<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", NULL);
        break;
    case KB_CHAT_MISTRAL:
        sb_cat(&b, answer, "</s>[INST] ", user, " [/INST]", NULL);
        break;
    case KB_CHAT_VICUNA:
        sb_cat(&b, " ", answer, "</s>USER: ", user, " ASSISTANT:", NULL);
        break;
    case KB_CHAT_RAW:
    default:
        sb_cat(&b, answer, "\n\n", user, NULL);
        break;
    }
    return sb_done(&b);
}
