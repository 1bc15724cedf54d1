/* test_tokenizer.c - unit tests of the tokenizer pieces that need no model
 * file: the generated Unicode tables, UTF-8 coding, GPT-2's
 * bytes_to_unicode, the pre-tokenizer regex lists, BPE and SentencePiece
 * merging on tiny hand-made vocabularies, special tokens, decoding, chat
 * strings and load errors.
 *
 * Expected values: Unicode facts from the Unicode Character Database (the
 * category of a code point; the White_Space list in PropList.txt); the GPT-2
 * byte map from its definition (printable bytes keep their value, the other
 * 68 take U+0100.. in byte order); pre-tokenizer splits computed with HF
 * tokenizers 0.23.3 (pre_tokenizers.Split(Regex(...), "isolated") /
 * Digits(individual_digits=True)); merge results worked out by hand below.
 * The full comparison against HF on 200+ strings is tests/py/test_tokenizer.py. */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "harness/engine/tok_internal.h"
#include "harness/engine/unicode.h"
#include "tests/unit/tiny_vocab.h"

static void test_unicode(void) {
    static const struct {
        uint32_t cp;
        int cat, ws;
    } v[] = {
        {'A', UCAT_L, 0},     {'z', UCAT_L, 0},     {0x00E9, UCAT_L, 0}, /* é */
        {0x4E2D, UCAT_L, 0},  /* 中 */              {0x0627, UCAT_L, 0}, /* Arabic alef */
        {0x05D0, UCAT_L, 0},  /* Hebrew alef */     {0x017F, UCAT_L, 0}, /* long s */
        {'7', UCAT_N, 0},     {0x0663, UCAT_N, 0},  /* Arabic-Indic three (Nd) */
        {0x00BD, UCAT_N, 0},  /* ½ (No) */          {0x216B, UCAT_N, 0}, /* Roman twelve (Nl) */
        {0xFF11, UCAT_N, 0},  /* fullwidth 1 */     {0x00B2, UCAT_N, 0}, /* superscript 2 */
        {'!', UCAT_P, 0},     {0x3002, UCAT_P, 0},  /* ideographic full stop */
        {'$', UCAT_S, 0},     {'+', UCAT_S, 0},     {0x1F600, UCAT_S, 0}, /* 😀 So */
        {0x0301, UCAT_M, 0},  /* combining acute */ {0x0E31, UCAT_M, 0}, /* Thai mai han-akat */
        {' ', UCAT_Z, 1},     {0x00A0, UCAT_Z, 1},  {0x3000, UCAT_Z, 1}, {0x2028, UCAT_Z, 1},
        {'\t', UCAT_C, 1},    {'\n', UCAT_C, 1},    {0x0085, UCAT_C, 1}, /* NEL */
        {0x000B, UCAT_C, 1},  {0x000C, UCAT_C, 1},  {'\r', UCAT_C, 1},  /* VT, FF, CR */
        {0x001C, UCAT_C, 0},  /* not White_Space */ {0x200B, UCAT_C, 0}, /* ZWSP (Cf) */
        {0xFEFF, UCAT_C, 0},  {0xE000, UCAT_C, 0},  {0x0378, UCAT_C, 0}, /* unassigned */
        {0x10FFFF, UCAT_C, 0}, {0x180E, UCAT_C, 0}, /* Mongolian vowel sep.: Cf since 6.3 */
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        CHECK_MSG(unicode_category(v[i].cp) == v[i].cat, "U+%04X category %d, want %d", v[i].cp,
                  unicode_category(v[i].cp), v[i].cat);
        CHECK_MSG(unicode_is_whitespace(v[i].cp) == v[i].ws, "U+%04X whitespace", v[i].cp);
    }
    CHECK_EQ_INT(unicode_n_whitespace, 25); /* White_Space has 25 code points */
    CHECK(strlen(unicode_version) >= 4);
}

static void test_utf8(void) {
    size_t n;
    CHECK_EQ_INT(utf8_decode("A", 1, &n), 'A');
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(utf8_decode("\xc3\xa9", 2, &n), 0xE9);
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(utf8_decode("\xe4\xb8\xad", 3, &n), 0x4E2D);
    CHECK_EQ_INT(n, 3);
    CHECK_EQ_INT(utf8_decode("\xf0\x9f\x98\x80", 4, &n), 0x1F600);
    CHECK_EQ_INT(n, 4);
    /* invalid: overlong, surrogate, > U+10FFFF, truncated, stray continuation */
    const char *bad[] = {"\xc0\x80", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xe4\xb8", "\x80"};
    size_t bad_len[] = {2, 3, 4, 2, 1};
    for (int i = 0; i < 5; i++) {
        CHECK_EQ_INT(utf8_decode(bad[i], bad_len[i], &n), UNICODE_INVALID);
        CHECK_EQ_INT(n, 1);
    }
    /* a sequence cut short by len is truncated even when the byte after it
     * would complete it (unicode.h: at most len bytes are read) */
    CHECK_EQ_INT(utf8_decode("\xe4\xb8\xad", 2, &n), UNICODE_INVALID);
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(utf8_decode("\xf0\x9f\x98\x80", 3, &n), UNICODE_INVALID);
    CHECK_EQ_INT(n, 1);
    char buf[4];
    /* the first and last code point of each length (bytes from Python's
     * str.encode("utf-8")); surrogates and values above U+10FFFF have no
     * encoding (unicode.h: 0) */
    static const struct {
        uint32_t cp;
        const char *b;
    } e[] = {{0x7F, "\x7f"},         {0x80, "\xc2\x80"},          {0x7FF, "\xdf\xbf"},
             {0x800, "\xe0\xa0\x80"}, {0xFFFF, "\xef\xbf\xbf"},   {0x10000, "\xf0\x90\x80\x80"},
             {0x10FFFF, "\xf4\x8f\xbf\xbf"}};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) {
        int k = utf8_encode(e[i].cp, buf);
        CHECK_MSG(k == (int)strlen(e[i].b) && !memcmp(buf, e[i].b, (size_t)k), "encode U+%04X", e[i].cp);
    }
    CHECK_EQ_INT(utf8_encode(0xD800, buf), 0);
    CHECK_EQ_INT(utf8_encode(0xDFFF, buf), 0);
    CHECK_EQ_INT(utf8_encode(0x110000, buf), 0);
    uint32_t cps[] = {0x24, 0xA2, 0x20AC, 0x10348};
    int lens[] = {1, 2, 3, 4};
    for (int i = 0; i < 4; i++) {
        CHECK_EQ_INT(utf8_encode(cps[i], buf), lens[i]);
        CHECK_EQ_INT(utf8_decode(buf, (size_t)lens[i], &n), cps[i]);
    }
}

static void test_bytes_to_unicode(void) {
    uint32_t m[256];
    bpe_bytes_to_unicode(m);
    CHECK_EQ_INT(m[' '], 0x120);  /* 'Ġ' */
    CHECK_EQ_INT(m['\n'], 0x10A); /* 'Ċ' */
    CHECK_EQ_INT(m[0], 0x100);
    CHECK_EQ_INT(m[0x7F], 0x121); /* first byte after the 33 of 0x00..0x20 */
    CHECK_EQ_INT(m[0xA0], 0x142);
    CHECK_EQ_INT(m[0xAD], 0x143); /* the 68th and last remapped byte */
    CHECK_EQ_INT(m['!'], '!');
    CHECK_EQ_INT(m[0xFF], 0xFF);
    int seen[0x144] = {0}, dup = 0;
    for (int b = 0; b < 256; b++) {
        if (m[b] >= 0x144 || seen[m[b]]++) dup = 1;
    }
    CHECK(!dup);
}

/* docs/TOKENIZER.md's table of tokenizer.ggml.pre values: the regex list
 * each name selects, and ignore_merges for the Llama-3 names only. */
static void test_pre_names(void) {
    static const struct {
        const char *name;
        int pre, ignore_merges;
    } v[] = {
        {"default", PRE_DEFAULT, 0},  {"gpt2", PRE_GPT2, 0},         {"gpt-2", PRE_GPT2, 0},
        {"smollm", PRE_SMOLLM, 0},    {"starcoder", PRE_SMOLLM, 0},  {"refact", PRE_SMOLLM, 0},
        {"command-r", PRE_SMOLLM, 0}, {"codeshell", PRE_SMOLLM, 0},  {"exaone", PRE_SMOLLM, 0},
        {"minerva", PRE_SMOLLM, 0},   {"minerva-7b", PRE_SMOLLM, 0}, {"llama3", PRE_LLAMA3, 1},
        {"llama-v3", PRE_LLAMA3, 1},  {"llama-bpe", PRE_LLAMA3, 1},
    };
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        int pre = -1, im = -1;
        CHECK_MSG(bpe_pre_parse(v[i].name, &pre, &im) == 0 && pre == v[i].pre && im == v[i].ignore_merges,
                  "pre '%s': %d %d, want %d %d", v[i].name, pre, im, v[i].pre, v[i].ignore_merges);
    }
    int pre, im;
    CHECK_EQ_INT(bpe_pre_parse("llama", &pre, &im), 1);
    CHECK_EQ_INT(bpe_pre_parse("qwen2", &pre, &im), 1);
}

/* Pieces of s joined with '|'. */
static void split(int pre, const char *s, char *out) {
    size_t *bd;
    int n;
    bpe_pretokenize(pre, s, strlen(s), &bd, &n);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (i) strcat(out, "|");
        strncat(out, s + bd[i], bd[i + 1] - bd[i]);
    }
    free(bd);
}

static void test_pretokenizers(void) {
    static const struct {
        int pre;
        const char *in, *want;
    } v[] = {
        {PRE_GPT2, "a  b", "a| | b"},
        {PRE_GPT2, "x   ", "x|   "},
        {PRE_GPT2, "a\n\nb", "a|\n|\n|b"},
        {PRE_GPT2, "Hello, world! 12345 $x+=1", "Hello|,| world|!| 12345| $|x|+=|1"},
        {PRE_GPT2, "I'M here", "I|'|M| here"},
        {PRE_GPT2, "  \t x", "  \t| x"},
        {PRE_GPT2, "x'sy", "x|'s|y"},
        {PRE_SMOLLM, " 12a", " |1|2|a"},
        {PRE_SMOLLM, "Hello, world! 12345 $x+=1", "Hello|,| world|!| |1|2|3|4|5| $|x|+=|1"},
        {PRE_LLAMA3, "a\n\nb", "a|\n\n|b"},
        {PRE_LLAMA3, "(word", "(word"},
        {PRE_LLAMA3, "Hello, world! 12345 $x+=1", "Hello|,| world|!| |123|45| $|x|+=|1"},
        {PRE_LLAMA3, "I'M here", "I|'M| here"},
        {PRE_LLAMA3, "a\n\n b", "a|\n\n| b"},
        {PRE_LLAMA3, "a\nb", "a|\n|b"},        /* a newline does not prefix a word */
        {PRE_LLAMA3, "x;\n\ny", "x|;\n\n|y"},  /* punctuation takes the newlines after it */
        {PRE_LLAMA3, "a,\r\nb", "a|,\r\n|b"},
        {PRE_DEFAULT, "don't", "don|'|t"},
        {PRE_DEFAULT, "Hello, world! 12345 $x+=1", "Hello|,| world|!| |123|45| |$|x|+=|1"},
        {PRE_DEFAULT, "x'sy", "x|'|sy"},
        /* [0-9]{3} is ASCII only: Arabic-Indic digits are not grouped */
        {PRE_DEFAULT, "x \xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4 1234",
         "x| |\xd9\xa1\xd9\xa2\xd9\xa3\xd9\xa4| |123|4"},
        /* a byte that is not UTF-8 counts as [^\s\p{L}\p{N}] (TOKENIZER.md;
         * by hand: HF cannot take such text) */
        {PRE_GPT2, "a\x80" "b", "a|\x80|b"},
        {PRE_GPT2, "x \xff\xfe!", "x| \xff\xfe!"},
    };
    char got[256];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        split(v[i].pre, v[i].in, got);
        CHECK_MSG(!strcmp(got, v[i].want), "pre %d '%s': got '%s' want '%s'", v[i].pre, v[i].in, got,
                  v[i].want);
    }
}

static char g_ids[512];
static const char *enc(const kb_tokenizer *t, const char *text, int special, int bos) {
    int32_t *ids;
    int n;
    kb_err err = {0};
    tokenizer_encode(t, text, strlen(text), special, bos, &ids, &n, &err);
    g_ids[0] = 0;
    for (int i = 0; i < n; i++) sprintf(g_ids + strlen(g_ids), i ? " %d" : "%d", ids[i]);
    free(ids);
    return g_ids;
}

static char g_byte_tok[256][4];

static void test_bpe(void) {
    /* Byte-level vocab: the 256 byte characters (ids 0..255 in byte order),
     * then merged tokens. Merges by rank: "b c" (0), "a b" (1), "a bc" (2),
     * "ab c" (3). For "abc", rank 0 fires first: a|bc, then "a bc" -> abc. */
    static tiny_vocab v;
    tiny_vocab_gpt2_bytes(&v, g_byte_tok);
    int ab = tiny_vocab_add(&v, "ab", TT_NORMAL, 0), bc = tiny_vocab_add(&v, "bc", TT_NORMAL, 0);
    int abc = tiny_vocab_add(&v, "abc", TT_NORMAL, 0);
    int ctl = tiny_vocab_add(&v, "<|x|>", TT_CONTROL, 0), usr = tiny_vocab_add(&v, "<u>", TT_USER, 0);
    int eot = tiny_vocab_add(&v, "<|im_end|>", TT_NORMAL, 0); /* EOG text: promoted to control */
    int usrx = tiny_vocab_add(&v, "<u>x", TT_USER, 0);           /* "<u>" is a prefix of it */
    v.merges[v.nm++] = "b c";
    v.merges[v.nm++] = "a b";
    v.merges[v.nm++] = "a bc";
    v.merges[v.nm++] = "ab c";
    v.merges[v.nm++] = "x zz"; /* names a missing token: skipped with a warning */
    v.merges[v.nm++] = "c a";  /* its result "ca" is missing: skipped too */
    int xy = tiny_vocab_add(&v, "xy", TT_NORMAL, 0);
    tiny_vocab_add(&v, "yz", TT_NORMAL, 0);
    v.merges[v.nm++] = "x y";
    v.merges[v.nm++] = "y z";
    v.merges[v.nm++] = "x y"; /* listed twice: the first rank counts (TOKENIZER.md, as llama.cpp) */
    tok_spec s = tiny_vocab_spec(&v, "test.gguf", "gpt2", "gpt2");
    s.eos = eot;
    kb_tokenizer *t;
    kb_err err = {0};
    CHECK_EQ_INT(tokenizer_build(&s, &t, &err), 0);
    if (!t) return;
    char want[128];
    sprintf(want, "%d", abc);
    CHECK_STREQ(enc(t, "abc", 1, 0), want);
    /* "abab": a b a b -> rank 1 "a b" at 0 then at 2 -> ab ab */
    sprintf(want, "%d %d", ab, ab);
    CHECK_STREQ(enc(t, "abab", 1, 0), want);
    /* "bcb": b c b -> bc b */
    sprintf(want, "%d %d", bc, 'b');
    CHECK_STREQ(enc(t, "bcb", 1, 0), want);
    /* pieces do not merge across the pre-tokenizer split: "a bc" -> a, " bc"
     * where " bc" = Ġ b c -> Ġ bc */
    sprintf(want, "%d %d %d", 'a', 0x20 + 0 /* byte ' ' is id 32 */, bc);
    CHECK_STREQ(enc(t, "a bc", 1, 0), want);
    /* special tokens: control only with parse_special, user-defined always */
    sprintf(want, "%d %d %d", 'a', ctl, 'b');
    CHECK_STREQ(enc(t, "a<|x|>b", 1, 0), want);
    CHECK(strcmp(enc(t, "a<|x|>b", 0, 0), want) != 0);
    sprintf(want, "%d %d %d", 'a', usr, 'b');
    CHECK_STREQ(enc(t, "a<u>b", 0, 0), want);
    /* the longest special token at a position wins */
    sprintf(want, "%d %d %d", 'a', usrx, 'b');
    CHECK_STREQ(enc(t, "a<u>xb", 0, 0), want);
    /* the empty text: no ids, but an array (tokenizer.h: non-NULL) */
    int32_t *none = NULL;
    int n_none = -1;
    tokenizer_encode(t, "", 0, 1, 1, &none, &n_none, &err);
    CHECK(none != NULL && n_none == 0);
    free(none);
    none = NULL;
    tokenizer_encode_cont(t, "", 0, &none, &n_none, &err);
    CHECK(none != NULL && n_none == 0);
    free(none);
    /* "xyz": "x y" (rank 6) before "y z" (7) -> xy z; with the last rank of a merge
     * listed twice (8, as HF's tokenizers keeps it) "y z" would go first -> x yz */
    sprintf(want, "%d %d", xy, 'z');
    CHECK_STREQ(enc(t, "xyz", 1, 0), want);
    /* a merge whose result is not in the vocabulary never fires */
    sprintf(want, "%d %d", 'c', 'a');
    CHECK_STREQ(enc(t, "ca", 1, 0), want);
    CHECK(tokenizer_is_eog(t, eot));
    CHECK(tokenizer_is_control(t, eot));
    CHECK(!tokenizer_is_eog(t, ctl));
    CHECK_EQ_INT(tokenizer_add_bos(t), 0);
    /* add_bos = 2 adds BOS only when the vocabulary has one (here none) */
    sprintf(want, "%d", ab);
    CHECK_STREQ(enc(t, "ab", 1, 2), want);
    /* decoding: bytes back; control text only when rendered */
    int32_t ids[] = {'a', ctl, 32, bc, usr};
    char *d = tokenizer_decode(t, ids, 5, 0);
    CHECK_STREQ(d, "a bc<u>");
    free(d);
    d = tokenizer_decode(t, ids, 5, 1);
    CHECK_STREQ(d, "a<|x|> bc<u>");
    free(d);
    char buf[8];
    CHECK_EQ_INT(tokenizer_piece(t, 10, 0, buf, 8), 1); /* byte 0x0A */
    CHECK_EQ_INT(buf[0], '\n');
    CHECK_EQ_INT(tokenizer_piece(t, ctl, 0, buf, 8), 0);
    CHECK_EQ_INT(tokenizer_piece(t, usr, 0, buf, 8), 3); /* user-defined: always its text */
    CHECK(!memcmp(buf, "<u>", 3));
    CHECK_EQ_INT(tokenizer_piece(t, -1, 1, buf, 8), 0);
    tokenizer_free(t);

    /* errors */
    tok_spec e = tiny_vocab_spec(&v, "test.gguf", "gpt2", "no-such-pre");
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "no-such-pre") && strstr(err.msg, "llama-bpe") && strstr(err.msg, "test.gguf"));
    e = tiny_vocab_spec(&v, "test.gguf", "bert", "gpt2");
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "bert") != NULL);
    e = tiny_vocab_spec(&v, "test.gguf", "gpt2", "gpt2");
    e.n_merges = 0;
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "tokenizer.ggml.merges") != NULL);
    e = tiny_vocab_spec(&v, "test.gguf", "gpt2", "gpt2");
    e.bos = v.n;
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "bos_token_id") != NULL);
    e = tiny_vocab_spec(&v, "test.gguf", "gpt2", "llama-bpe"); /* llama3 wants BOS by default but has none */
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), KB_EINPUT);
    /* add_eos_token = true without an EOS is refused, as add_bos_token */
    e = tiny_vocab_spec(&v, "test.gguf", "gpt2", "gpt2");
    e.add_eos = 1;
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), KB_EINPUT);
    CHECK(strstr(err.msg, "add_eos_token") != NULL);
    /* add_bos (tokenizer.h): 0 adds nothing (no EOS either), 1 BOS and EOS as
     * the model wants (here: EOS only), 2 BOS always */
    e.eos = eot;
    e.bos = ctl;
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), 0);
    if (t) {
        sprintf(want, "%d", ab);
        CHECK_STREQ(enc(t, "ab", 1, 0), want);
        sprintf(want, "%d %d", ab, eot);
        CHECK_STREQ(enc(t, "ab", 1, 1), want);
        sprintf(want, "%d %d", ctl, ab); /* (whether 2 adds EOS is not specified) */
        CHECK(!strncmp(enc(t, "ab", 1, 2), want, strlen(want)));
        tokenizer_free(t);
    }
    /* a token text twice is refused, naming both ids; empty texts are
     * allowed, any number of them (docs/TOKENIZER.md, Decisions) */
    static tiny_vocab dv;
    memcpy(&dv, &v, sizeof dv);
    int dup = tiny_vocab_add(&dv, "bc", TT_NORMAL, 0);
    e = tiny_vocab_spec(&dv, "test.gguf", "gpt2", "gpt2");
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), KB_EINPUT);
    sprintf(want, "token %d 'bc' duplicates token %d", dup, bc);
    CHECK(strstr(err.msg, want) != NULL);
    dv.n--;
    tiny_vocab_add(&dv, "", TT_NORMAL, 0);
    tiny_vocab_add(&dv, "", TT_NORMAL, 0);
    e = tiny_vocab_spec(&dv, "test.gguf", "gpt2", "gpt2");
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), 0);
    if (t) {
        sprintf(want, "%d", abc);
        CHECK_STREQ(enc(t, "abc", 1, 0), want);
        tokenizer_free(t);
    }
    /* missing pre: default with a warning */
    e = tiny_vocab_spec(&v, "test.gguf", "gpt2", NULL);
    CHECK_EQ_INT(tokenizer_build(&e, &t, &err), 0);
    if (t) CHECK_STREQ(tokenizer_pre_name(t), "default");
    tokenizer_free(t);
}

/* Stop tokens (docs/TOKENIZER.md): EOS, plus every token whose text is on
 * the list there, each then a control token. A SentencePiece vocabulary (no
 * merges needed) whose default EOS, id 2, is a text not on the list. */
static void test_eog(void) {
    static const char *const stops[] = {
        "<|eot_id|>",   "<|end_of_text|>", "<|im_end|>",  "<|endoftext|>", "</s>",      "<|eom_id|>",
        "<|end|>",      "<end_of_turn>",   "<EOT>",       "<|fim_repo|>",  "<|repo_name|>", "<fim-repo>",
        "<REPO>",       "<reponame>",      "<|file_sep|>", "<|fim_pad|>",  "<fim-pad>", "<fim_pad>",
    };
    static tiny_vocab v;
    memset(&v, 0, sizeof v);
    tiny_vocab_add(&v, "<unk>", TT_UNKNOWN, 0);
    int bos = tiny_vocab_add(&v, "<s>", TT_CONTROL, 0);
    int stop = tiny_vocab_add(&v, "<stop>", TT_NORMAL, 0);
    int first = v.n;
    /* all typed normal except one user-defined: a user-defined token is
     * matched and decoded always, a control one only on request */
    for (size_t i = 0; i < sizeof stops / sizeof stops[0]; i++)
        tiny_vocab_add(&v, stops[i], i == 2 ? TT_USER : TT_NORMAL, 0);
    int other = tiny_vocab_add(&v, "<|im_start|>", TT_NORMAL, 0);
    tok_spec s = tiny_vocab_spec(&v, "test.gguf", "llama", NULL);
    kb_tokenizer *t;
    kb_err err = {0};
    CHECK_EQ_INT(tokenizer_build(&s, &t, &err), 0);
    if (!t) return;
    CHECK_EQ_INT(tokenizer_eos(t), stop);
    CHECK(tokenizer_is_eog(t, stop));
    for (int i = first; i < other; i++)
        CHECK_MSG(tokenizer_is_eog(t, i) && tokenizer_is_control(t, i), "'%s' is a stop", stops[i - first]);
    CHECK(!tokenizer_is_eog(t, other) && !tokenizer_is_control(t, other));
    /* the user-defined <|im_end|> too: not in the text decoded without render_special */
    int32_t ids[] = {first + 2, other};
    char *d = tokenizer_decode(t, ids, 2, 0);
    CHECK_STREQ(d, "<|im_start|>");
    free(d);
    CHECK(!tokenizer_is_eog(t, bos));
    tokenizer_free(t);
}

static void test_spm(void) {
    /* SentencePiece: ▁ = U+2581. Scores pick the merge: "▁a" (-1) beats
     * "ab" (-2), so "ab" -> ▁ a b -> ▁a b; then "▁ab" (-3) merges ▁a + b.
     * "abb" -> ▁ab b ("bb" is no token). Without the space prefix "ab" is
     * the token ab. 'é' is not in the vocab -> bytes <0xC3> <0xA9>. */
    static tiny_vocab v;
    tiny_vocab_spm(&v);
    const int unk = 0, bos = 1, eos = 2;
    static char hex[256][8];
    for (int b = 0; b < 256; b++) {
        sprintf(hex[b], "<0x%02X>", b);
        tiny_vocab_add(&v, hex[b], TT_BYTE, 0);
    }
    int sp = tiny_vocab_add(&v, "\xe2\x96\x81", TT_NORMAL, -10);
    int a = tiny_vocab_add(&v, "a", TT_NORMAL, -11), b = tiny_vocab_add(&v, "b", TT_NORMAL, -12);
    int sa = tiny_vocab_add(&v, "\xe2\x96\x81" "a", TT_NORMAL, -1);
    int ab = tiny_vocab_add(&v, "ab", TT_NORMAL, -2);
    int sab = tiny_vocab_add(&v, "\xe2\x96\x81" "ab", TT_NORMAL, -3);
    /* merging may form normal, user-defined and undefined tokens only */
    int ef = tiny_vocab_add(&v, "ef", TT_UNDEFINED, -5);
    int sb = tiny_vocab_add(&v, "\xe2\x96\x81" "b", TT_USER, -0.5f);
    tiny_vocab_add(&v, "cd", TT_CONTROL, 0);
    tiny_vocab_add(&v, "\xe2\x96\x81" "cd", TT_NORMAL, -6); /* reachable only through the control "cd" */
    tiny_vocab_add(&v, "#", TT_CONTROL, 0);
    int lowbyte = tiny_vocab_add(&v, "<0x7e>", TT_BYTE, 0); /* lower-case hex: still byte 0x7E */
    int unused = tiny_vocab_add(&v, "<unused0>", TT_UNUSED, 0);
    (void)a;
    tok_spec s = tiny_vocab_spec(&v, "test.gguf", "llama", NULL);
    kb_tokenizer *t;
    kb_err err = {0};
    CHECK_EQ_INT(tokenizer_build(&s, &t, &err), 0);
    if (!t) return;
    CHECK_EQ_INT(tokenizer_bos(t), bos); /* llama.cpp's SPM defaults: 1, 2, 0 */
    CHECK_EQ_INT(tokenizer_eos(t), eos);
    CHECK_EQ_INT(tokenizer_add_bos(t), 1);
    char want[128];
    sprintf(want, "%d %d", bos, sab);
    CHECK_STREQ(enc(t, "ab", 1, 1), want);
    sprintf(want, "%d %d", sab, b);
    CHECK_STREQ(enc(t, "abb", 1, 0), want);
    /* ▁ e f -> ▁ ef (undefined); ▁ b -> ▁b (user-defined, matched by merging) */
    sprintf(want, "%d %d", sp, ef);
    CHECK_STREQ(enc(t, "ef", 1, 0), want);
    sprintf(want, "%d", sb);
    CHECK_STREQ(enc(t, "b", 1, 0), want);
    /* plain text never gives a control token, merged or single: ▁ c d stays
     * (so "▁cd" is never reached), '#' falls back to its byte */
    sprintf(want, "%d %d %d", sp, 3 + 'c', 3 + 'd');
    CHECK_STREQ(enc(t, "cd", 0, 0), want);
    sprintf(want, "%d %d", sp, 3 + '#');
    CHECK_STREQ(enc(t, "#", 0, 0), want);
    sprintf(want, "%d %d %d %d", sa, sp, 3 + 0xC3, 3 + 0xA9);
    CHECK_STREQ(enc(t, "a \xc3\xa9", 1, 0), want);
    /* BOS in the text is not doubled; a space is prefixed after a special */
    sprintf(want, "%d %d %d", bos, sa, eos);
    CHECK_STREQ(enc(t, "<s>a</s>", 1, 1), want);
    sprintf(want, "%d %d %d", sab, eos, sa);
    CHECK_STREQ(enc(t, "ab</s>a", 1, 0), want);
    /* continuation: no prefix at the start */
    int32_t *ids;
    int n;
    tokenizer_encode_cont(t, "ab", 2, &ids, &n, &err);
    CHECK_EQ_INT(n, 1);
    if (n == 1) CHECK_EQ_INT(ids[0], ab);
    free(ids);
    /* decode: the dummy prefix is dropped after BOS; bytes join */
    int32_t d1[] = {bos, sab, sp, 3 + 0xC3, 3 + 0xA9};
    char *d = tokenizer_decode(t, d1, 5, 0);
    CHECK_STREQ(d, "ab \xc3\xa9");
    free(d);
    /* an unused token is rendered only on request, as a control token */
    int32_t d2[] = {a, unused, lowbyte, b};
    d = tokenizer_decode(t, d2, 4, 0);
    CHECK_STREQ(d, "a~b");
    free(d);
    d = tokenizer_decode(t, d2, 4, 1);
    CHECK_STREQ(d, "a<unused0>~b");
    free(d);
    CHECK(tokenizer_is_control(t, unused));
    (void)unk;
    CHECK(tokenizer_is_eog(t, eos));
    CHECK(!tokenizer_is_eog(t, bos));
    CHECK_EQ_INT(tokenizer_chat_format(t), KB_CHAT_VICUNA); /* SPM without template */
    tokenizer_free(t);

    /* without add_space_prefix no leading space is dropped when decoding */
    s.add_space_prefix = 0;
    CHECK_EQ_INT(tokenizer_build(&s, &t, &err), 0);
    if (t) {
        int32_t d3[] = {sa, b};
        d = tokenizer_decode(t, d3, 2, 0);
        CHECK_STREQ(d, " ab");
        free(d);
        tokenizer_free(t);
    }

    /* no byte tokens: a final symbol that is not a token is one UNK, however
     * many bytes it has (▁ a ▁ é -> ▁ a ▁ UNK) */
    static tiny_vocab w;
    tiny_vocab_spm(&w);
    tiny_vocab_add(&w, "\xe2\x96\x81", TT_NORMAL, -1);
    tiny_vocab_add(&w, "a", TT_NORMAL, -2);
    s = tiny_vocab_spec(&w, "test.gguf", "llama", NULL);
    CHECK_EQ_INT(tokenizer_build(&s, &t, &err), 0);
    if (t) {
        CHECK_STREQ(enc(t, "a \xc3\xa9", 1, 0), "3 4 3 0");
        tokenizer_free(t);
    }
    /* the SentencePiece default EOS (2) outside a 2-token vocabulary: no EOS */
    w.n = 2;
    s = tiny_vocab_spec(&w, "test.gguf", "llama", NULL);
    CHECK_EQ_INT(tokenizer_build(&s, &t, &err), 0);
    if (t) {
        CHECK_EQ_INT(tokenizer_bos(t), 1);
        CHECK_EQ_INT(tokenizer_eos(t), -1);
        tokenizer_free(t);
    }
}

/* A chat rendering (a new string) checked against want, then freed. */
#define CHECK_CHAT(expr, want)     \
    do {                           \
        char *chat_ = (expr);      \
        CHECK_STREQ(chat_, want);  \
        free(chat_);               \
    } while (0)

static void test_chat(void) {
    CHECK_CHAT(chat_first_turn(KB_CHAT_CHATML, NULL, "hi"),
               "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
               "Face<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    CHECK_CHAT(chat_first_turn(KB_CHAT_CHATML_NOSYS, NULL, "hi"),
               "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n");
    CHECK_CHAT(chat_next_turn(KB_CHAT_MISTRAL, "ok", "more"), "ok</s>[INST] more [/INST]");
    CHECK_CHAT(chat_first_turn(KB_CHAT_MISTRAL, NULL, "hi"), "<s>[INST] hi [/INST]");
    CHECK_CHAT(chat_first_turn(KB_CHAT_LLAMA3, NULL, "  hi \n"),
               "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_CHAT(chat_first_turn(KB_CHAT_VICUNA, NULL, "hi"),
               "A chat between a curious user and an artificial intelligence assistant. The "
               "assistant gives helpful, detailed, and polite answers to the user's questions. "
               "USER: hi ASSISTANT:");
    kb_chat_format f;
    CHECK_EQ_INT(chat_format_parse("llama3", &f), 0);
    CHECK_EQ_INT(f, KB_CHAT_LLAMA3);
    CHECK_EQ_INT(chat_format_parse("jinja", &f), KB_EINPUT);
    CHECK_STREQ(chat_format_name(KB_CHAT_VICUNA), "vicuna");
    CHECK_EQ_INT(chat_detect("{{ '<|im_start|>' }}", 0), KB_CHAT_CHATML_NOSYS);
    CHECK_EQ_INT(chat_detect("x<|start_header_id|>y", 0), KB_CHAT_LLAMA3);
    CHECK_EQ_INT(chat_detect("'[INST] ' + m", 1), KB_CHAT_MISTRAL);
    CHECK_EQ_INT(chat_detect(NULL, 0), KB_CHAT_RAW);
    /* docs/TOKENIZER.md: the order of the substrings, Vicuna only with both
     * USER: and ASSISTANT:, an empty template as none */
    CHECK_EQ_INT(chat_detect("<|start_header_id|> [INST]", 1), KB_CHAT_LLAMA3);
    CHECK_EQ_INT(chat_detect("<|im_start|> <|start_header_id|>", 0), KB_CHAT_CHATML_NOSYS);
    CHECK_EQ_INT(chat_detect("USER: {{ m }} ASSISTANT:", 1), KB_CHAT_VICUNA);
    CHECK_EQ_INT(chat_detect("USER: {{ m }}", 1), KB_CHAT_RAW);
    CHECK_EQ_INT(chat_detect("{{ m }} ASSISTANT:", 1), KB_CHAT_RAW);
    CHECK_EQ_INT(chat_detect("", 1), KB_CHAT_VICUNA);
    CHECK_EQ_INT(chat_detect("", 0), KB_CHAT_RAW);
    /* raw: [{S}\n\n]{U}, then {A}\n\n{U} */
    CHECK_CHAT(chat_first_turn(KB_CHAT_RAW, "S", "U"), "S\n\nU");
    CHECK_CHAT(chat_first_turn(KB_CHAT_RAW, NULL, "U"), "U");
    CHECK_CHAT(chat_next_turn(KB_CHAT_RAW, "A", "U"), "A\n\nU");
    /* Llama-3's |trim is Python's str.strip(): U+001C..U+001F, NEL and
     * U+3000 go ("\x1c\x1dsys\x1e\x1f".strip() == "sys"); a stray byte is
     * not whitespace, so it and the space before it stay */
    CHECK_CHAT(chat_first_turn(KB_CHAT_LLAMA3, "\x1c\x1dsys\x1e\x1f", "\xc2\x85 hi \xe3\x80\x80"),
               "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nsys<|eot_id|>"
               "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n");
    CHECK_CHAT(chat_next_turn(KB_CHAT_LLAMA3, "ok", "hi \x80"),
               "ok<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nhi \x80<|eot_id|>"
               "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

int main(void) {
    test_unicode();
    test_utf8();
    test_bytes_to_unicode();
    test_pre_names();
    test_pretokenizers();
    test_bpe();
    test_eog();
    test_spm();
    test_chat();
    return check_summary("tokenizer");
}
