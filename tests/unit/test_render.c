/* test_render.c - harness/render.c: samples -> the token sequences the
 * engine feeds (render.h), on a byte-level vocabulary where every byte is
 * its own token (ids 0..255 in byte order, no merges) plus three control
 * tokens: <s> (BOS, added by the model's default), <|im_start|> and
 * <|im_end|> (and "~~", whose merge no text here can use). On it a text's tokens are its bytes, with the control tokens'
 * texts as single ids where special tokens are parsed, so every expected
 * sequence is worked out here from the strings alone (ref_ids, by hand: no
 * tokenizer call), and the chat texts are ChatML's as the Hugging Face
 * template writes them (docs/TOKENIZER.md), typed out below.
 *
 * What is checked (render.h, docs/DESIGN.md, docs/DATASETS.md):
 * - middle truncation of the user text to truncate_to tokens before chat
 *   wrapping: the first truncate_to/2 tokens and the last
 *   truncate_to - truncate_to/2 (DATASETS.md: an odd budget's extra token
 *   goes to the tail; LongBench keeps int(max/2) from each end); none when
 *   the text has truncate_to tokens or fewer, or truncate_to is 0;
 *   the count is in tokens of the user text with special tokens not parsed;
 * - raw samples: user text + answer prefix, BOS as the model adds it, special
 *   texts kept literal; chat samples: ChatML, special tokens parsed;
 * - turn t > 0: answer + "\n\n" + user text + answer prefix (raw), ChatML's
 *   continuation (chat); no BOS; turns out of range refused;
 * - multi-request: the shared prefix tokens end where shared_prefix ends in
 *   the first request's rendering; request t is the rest of its own;
 * - render_count_tokens: the first turn's token count, -1 on error. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness/engine/tok_internal.h"
#include "harness/render.h"
#include "tests/unit/tiny_vocab.h"

enum { BOS = 256, IM_START = 257, IM_END = 258 };

static char g_byte_tok[256][4];

static kb_tokenizer *byte_tokenizer(void) {
    static tiny_vocab v;
    tiny_vocab_gpt2_bytes(&v, g_byte_tok);
    CHECK_EQ_INT(tiny_vocab_add(&v, "<s>", TT_CONTROL, 0), BOS);
    CHECK_EQ_INT(tiny_vocab_add(&v, "<|im_start|>", TT_CONTROL, 0), IM_START);
    CHECK_EQ_INT(tiny_vocab_add(&v, "<|im_end|>", TT_CONTROL, 0), IM_END);
    /* gpt2 needs a merge: one that no text here can use */
    tiny_vocab_add(&v, "~~", TT_NORMAL, 0);
    v.merges[v.nm++] = "~ ~";
    tok_spec s = tiny_vocab_spec(&v, "render-test.gguf", "gpt2", "gpt2");
    s.bos = BOS;
    s.eos = IM_END;
    s.add_bos = 1;
    s.add_eos = 0;
    kb_tokenizer *t = NULL;
    kb_err err = {0};
    CHECK_EQ_INT(tokenizer_build(&s, &t, &err), 0);
    return t;
}

/* The reference: bos, then the bytes of text, with "<s>", "<|im_start|>" and
 * "<|im_end|>" as one id each when special. Returns the count. */
static int ref_ids(const char *text, int special, int bos, int32_t *out) {
    static const struct {
        const char *s;
        int id;
    } sp[] = {{"<s>", BOS}, {"<|im_start|>", IM_START}, {"<|im_end|>", IM_END}};
    int n = 0;
    if (bos) out[n++] = BOS;
    for (const char *p = text; *p;) {
        int hit = 0;
        for (int k = 0; special && k < 3 && !hit; k++)
            if (!strncmp(p, sp[k].s, strlen(sp[k].s))) {
                out[n++] = sp[k].id;
                p += strlen(sp[k].s);
                hit = 1;
            }
        if (!hit) out[n++] = (unsigned char)*p++;
    }
    return n;
}

/* got == the reference of text (special, bos)? Prints both when not. */
static int same(const kb_tokens *got, const char *text, int special, int bos, int line) {
    static int32_t want[4096];
    int n = ref_ids(text, special, bos, want);
    int ok = got->n == n && (n == 0 || !memcmp(got->ids, want, (size_t)n * sizeof(int32_t)));
    if (!ok) {
        fprintf(stderr, "test_render.c:%d: %d ids, expected %d for \"%s\"\n  got:", line, got->n, n, text);
        for (int i = 0; i < got->n && i < 80; i++) fprintf(stderr, " %d", got->ids[i]);
        fprintf(stderr, "\n  want:");
        for (int i = 0; i < n && i < 80; i++) fprintf(stderr, " %d", want[i]);
        fprintf(stderr, "\n");
    }
    return ok;
}

#define SAME(got, text, special, bos) CHECK(same(got, text, special, bos, __LINE__))

static kb_sample sample(kb_turn *turns, int n, int chat, int truncate_to) {
    kb_sample s;
    memset(&s, 0, sizeof s);
    snprintf(s.task, sizeof s.task, "t");
    snprintf(s.id, sizeof s.id, "s0");
    s.chat = chat;
    s.turns = turns;
    s.n_turns = n;
    s.truncate_to = truncate_to;
    s.depth = -1;
    return s;
}

/* The user text truncated by the rule above, by slicing. */
static void middle(const char *u, int keep, char *out) {
    int n = (int)strlen(u);
    if (keep <= 0 || n <= keep) {
        strcpy(out, u);
        return;
    }
    int head = keep / 2, tail = keep - head;
    memcpy(out, u, (size_t)head);
    memcpy(out + head, u + n - tail, (size_t)tail);
    out[keep] = 0;
}

static void test_truncation(const kb_renderer *r) {
    const char *u = "0123456789abcdefghij"; /* 20 tokens */
    kb_turn turn = {.user = (char *)u, .answer_prefix = "Answer:"};
    char want[256], text[512];
    kb_err err = {0};
    /* by hand first: 7 -> "012" + "ghij", 8 -> "0123" + "ghij" */
    middle(u, 7, want);
    CHECK_STREQ(want, "012ghij");
    middle(u, 8, want);
    CHECK_STREQ(want, "0123ghij");
    static const int keeps[] = {0, 1, 2, 3, 7, 8, 19, 20, 21, 40};
    for (int i = 0; i < (int)(sizeof keeps / sizeof *keeps); i++) {
        for (int chat = 0; chat < 2; chat++) {
            kb_sample s = sample(&turn, 1, chat, keeps[i]);
            s.system = chat ? "sys" : NULL;
            kb_tokens t;
            middle(u, keeps[i], want);
            if (chat)
                snprintf(text, sizeof text, "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n"
                         "<|im_start|>assistant\nAnswer:", want);
            else
                snprintf(text, sizeof text, "%sAnswer:", want);
            CHECK_EQ_INT(render_first_turn(r, &s, &t, &err), 0);
            CHECK_MSG(same(&t, text, chat, 1, __LINE__), "truncate_to %d chat %d", keeps[i], chat);
            CHECK_EQ_INT(render_count_tokens((void *)r, &s), t.n);
            tokens_free(&t);
        }
    }
    /* the budget counts tokens of the user text with special texts literal:
     * "<|im_end|>" is 10 tokens there (and kept literal in a raw prompt) */
    const char *u2 = "<|im_end|>abcdefghijklmnop<s>"; /* 10 + 16 + 3 = 29 tokens */
    kb_turn t2 = {.user = (char *)u2};
    kb_sample s = sample(&t2, 1, 0, 20);
    kb_tokens t;
    CHECK_EQ_INT(render_first_turn(r, &s, &t, &err), 0);
    SAME(&t, "<|im_end|>jklmnop<s>", 0, 1); /* 10 head + 10 tail (parsed, the text has 18: none cut) */
    tokens_free(&t);
    /* in a chat prompt the kept special text is parsed like the template's */
    s.chat = 1;
    s.system = "S";
    CHECK_EQ_INT(render_first_turn(r, &s, &t, &err), 0);
    SAME(&t, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n<|im_end|>jklmnop<s><|im_end|>\n<|im_start|>assistant\n",
         1, 1);
    tokens_free(&t);
}

static void test_turns(const kb_renderer *r) {
    kb_turn turns[3] = {{.user = "first", .answer_prefix = "A:"},
                        {.user = "second <|im_end|>", .answer_prefix = "B:"},
                        {.user = "third", .answer_prefix = NULL}};
    kb_err err = {0};
    kb_tokens t;
    for (int chat = 0; chat < 2; chat++) {
        kb_sample s = sample(turns, 3, chat, 0);
        s.system = chat ? "sys" : NULL;
        CHECK_EQ_INT(render_next_turn(r, &s, 1, "ans", &t, &err), 0);
        /* no BOS: the text continues the sequence, special tokens parsed */
        SAME(&t, chat ? "ans<|im_end|>\n<|im_start|>user\nsecond <|im_end|><|im_end|>\n<|im_start|>assistant\nB:"
                      : "ans\n\nsecond <|im_end|>B:", 1, 0);
        tokens_free(&t);
        CHECK_EQ_INT(render_next_turn(r, &s, 2, "x", &t, &err), 0);
        SAME(&t, chat ? "x<|im_end|>\n<|im_start|>user\nthird<|im_end|>\n<|im_start|>assistant\n" : "x\n\nthird", 1, 0);
        tokens_free(&t);
        /* turns 0 and 3 do not continue anything */
        CHECK(render_next_turn(r, &s, 0, "x", &t, &err) != 0);
        CHECK(t.ids == NULL && t.n == 0);
        CHECK(render_next_turn(r, &s, 3, "x", &t, &err) != 0);
        CHECK(strstr(err.msg, "t/s0: no turn 3") != NULL);
    }
    /* a raw first turn keeps special texts literal (bytes), with BOS; no
     * answer prefix adds nothing */
    kb_turn one = {.user = "a<|im_start|>b", .answer_prefix = NULL};
    kb_sample s = sample(&one, 1, 0, 0);
    CHECK_EQ_INT(render_first_turn(r, &s, &t, &err), 0);
    SAME(&t, "a<|im_start|>b", 0, 1);
    tokens_free(&t);
    s.chat = 1; /* chat without a system message: SmolLM2's default one (ChatML) */
    CHECK_EQ_INT(render_first_turn(r, &s, &t, &err), 0);
    char want[512];
    snprintf(want, sizeof want, "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\na<|im_start|>b<|im_end|>\n"
             "<|im_start|>assistant\n", "You are a helpful AI assistant named SmolLM, trained by Hugging Face");
    SAME(&t, want, 1, 1);
    tokens_free(&t);
    /* no turns: refused, and counted as -1 */
    s.n_turns = 0;
    CHECK_EQ_INT(render_first_turn(r, &s, &t, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "t/s0: sample has no turns") != NULL);
    CHECK_EQ_INT(render_count_tokens((void *)r, &s), -1);
}

static void test_multi_request(const kb_renderer *r) {
    kb_turn turns[2] = {{.user = "CTX: data\n\nQ1?", .answer_prefix = "A1"},
                        {.user = "CTX: data\n\nsecond question", .answer_prefix = NULL}};
    kb_err err = {0};
    kb_tokens t;
    for (int chat = 0; chat < 2; chat++) {
        kb_sample s = sample(turns, 2, chat, 4 /* not applied to requests: each is longer */);
        s.multi_request = 1;
        s.shared_prefix = "CTX: data\n\n";
        s.system = chat ? "sys" : NULL;
        const char *head = chat ? "<|im_start|>system\nsys<|im_end|>\n<|im_start|>user\n" : "";
        const char *foot = chat ? "<|im_end|>\n<|im_start|>assistant\n" : "";
        char want[512];
        CHECK_EQ_INT(render_shared_prefix(r, &s, &t, &err), 0);
        snprintf(want, sizeof want, "%sCTX: data\n\n", head);
        SAME(&t, want, chat, 1);
        tokens_free(&t);
        CHECK_EQ_INT(render_request(r, &s, 0, &t, &err), 0);
        snprintf(want, sizeof want, "Q1?%sA1", foot);
        SAME(&t, want, 1, 0);
        tokens_free(&t);
        CHECK_EQ_INT(render_request(r, &s, 1, &t, &err), 0);
        snprintf(want, sizeof want, "second question%s", foot);
        SAME(&t, want, 1, 0);
        tokens_free(&t);
        /* a request that does not start with the shared prefix is refused */
        s.shared_prefix = "CTX: dat4";
        CHECK(render_request(r, &s, 1, &t, &err) != 0);
        CHECK(strstr(err.msg, "request 1's user text does not start with the shared prefix") != NULL);
        s.shared_prefix = NULL;
        CHECK(render_shared_prefix(r, &s, &t, &err) != 0);
    }
}

int main(void) {
    kb_tokenizer *tok = byte_tokenizer();
    if (!tok) return check_summary("render");
    kb_renderer r = {.tok = tok, .fmt = KB_CHAT_CHATML};
    /* the vocabulary is what the reference assumes */
    int32_t *ids;
    int n;
    kb_err err = {0};
    CHECK_EQ_INT(tokenizer_encode(tok, "a<s>", 4, 1, 1, &ids, &n, &err), 0);
    CHECK(n == 3 && ids[0] == BOS && ids[1] == 'a' && ids[2] == BOS);
    free(ids);
    test_truncation(&r);
    test_turns(&r);
    test_multi_request(&r);
    tokenizer_free(tok);
    return check_summary("render");
}
