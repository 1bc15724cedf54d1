/* test_stop_text.c - a turn's stop text in the sweep driver (harness/driver.c's
 * stop_text_add, static: the file is included here, as test_attn_avx2.c does
 * with attn_cpu.c; its other symbols then come from this object, not the
 * library's driver.o).
 *
 * The text a turn has decoded gets each token's whole piece, however long: the
 * driver copied a piece into a 256-byte buffer, so a stop string past byte 256
 * of a long token was never seen and the turn ran on to max_new. The vocabulary
 * is GPT-2's 256 byte tokens, one control token and one token of 283 bytes:
 * 280 'z', a newline (GPT-2's U+010A), then "zz". Expected values by hand from
 * dataset.h's stop rule (the stop string after something other than newlines). */
#include "harness/driver.c"

#include "harness/engine/unicode.h"
#include "tests/unit/check.h"
#include "tests/unit/tiny_vocab.h"

static char g_byte_tok[256][4];
static char g_long[300];

int main(void) {
    static tiny_vocab v;
    tiny_vocab_gpt2_bytes(&v, g_byte_tok);
    int ctl = tiny_vocab_add(&v, "<|end|>", TT_CONTROL, 0);
    memset(g_long, 'z', 280);
    int o = 280 + utf8_encode(0x10A, g_long + 280); /* GPT-2's character for byte 0x0A */
    memcpy(g_long + o, "zz", 3);
    int long_id = tiny_vocab_add(&v, g_long, TT_NORMAL, 0);
    tiny_vocab_add(&v, "~~", TT_NORMAL, 0); /* gpt2 needs a merge */
    v.merges[v.nm++] = "~ ~";
    tok_spec s = tiny_vocab_spec(&v, "stop-test.gguf", "gpt2", "gpt2");
    kb_model m;
    memset(&m, 0, sizeof m);
    kb_err err = {0};
    CHECK_EQ_INT(tokenizer_build(&s, &m.tok, &err), 0);
    if (!m.tok) return check_summary("stop_text");

    char want[284];
    memset(want, 'z', 280);
    memcpy(want + 280, "\nzz", 3);
    /* one long token: its newline at byte 281 stops the turn, and the text holds all 283 bytes */
    stop_text st = {"\n", NULL, 0, 0};
    CHECK_EQ_INT(stop_text_add(&st, &m, long_id), 1);
    CHECK_EQ_INT((int)st.n, 283);
    CHECK(st.text && !memcmp(st.text, want, 283));
    free(st.text);
    /* a stop string that ends in the long token's last bytes, after a byte token */
    stop_text st2 = {"\nzz", NULL, 0, 0};
    CHECK_EQ_INT(stop_text_add(&st2, &m, 'a'), 0); /* byte tokens: id = the byte */
    CHECK_EQ_INT(stop_text_add(&st2, &m, long_id), 1);
    CHECK_EQ_INT((int)st2.n, 284);
    free(st2.text);
    /* a control token adds nothing; a newline alone does not stop (nothing else before it) */
    stop_text st3 = {"\n", NULL, 0, 0};
    CHECK_EQ_INT(stop_text_add(&st3, &m, ctl), 0);
    CHECK_EQ_INT((int)st3.n, 0);
    CHECK_EQ_INT(stop_text_add(&st3, &m, '\n'), 0);
    CHECK_EQ_INT((int)st3.n, 1);
    CHECK_EQ_INT(stop_text_add(&st3, &m, 'x'), 0);
    CHECK_EQ_INT(stop_text_add(&st3, &m, '\n'), 1);
    free(st3.text);
    /* no stop string: nothing is kept */
    stop_text st4 = {NULL, NULL, 0, 0};
    CHECK_EQ_INT(stop_text_add(&st4, &m, long_id), 0);
    CHECK_EQ_INT((int)st4.n, 0);
    tokenizer_free(m.tok);
    return check_summary("stop_text");
}
