/* tokenizer.c - builds a tokenizer from GGUF metadata (tokenizer.ggml.*),
 * splits special tokens out of the text, dispatches raw text to byte-level
 * BPE (bpe.c) or SentencePiece BPE (spm.c), and decodes ids back to bytes.
 * Decisions where llama.cpp and HF tokenizers differ are listed in
 * docs/TOKENIZER.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/engine/tok_internal.h"
#include "harness/engine/unicode.h"

void tok_ids_push(tok_ids *o, int32_t id) {
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 64;
        o->v = KB_REALLOC(o->v, (size_t)o->cap * sizeof *o->v);
    }
    o->v[o->n++] = id;
}

/* ---- token text -> id hash (FNV-1a, linear probing) ---- */

static inline uint32_t hash_bytes(const char *s, size_t len) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h ^ (h >> 15);
}

int32_t tok_lookup(const kb_tokenizer *t, const char *s, size_t len) {
    for (uint32_t h = hash_bytes(s, len) & t->hash_mask;; h = (h + 1) & t->hash_mask) {
        int32_t id = t->hash[h];
        if (id < 0) return -1;
        if (t->text_len[id] == len && !memcmp(t->text + t->text_off[id], s, len)) return id;
    }
}

/* ---- end of generation ---- */

/* Token texts that end a turn in the families we run (llama.cpp marks the
 * same texts as end-of-generation). The FIM repository/file separators are
 * also stops in llama.cpp: for SmolLM2 that is id 4 <reponame>, which in its
 * StarCoder-style pre-training data starts a new repository, i.e. the answer
 * is over. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|end_of_text|>", "<|im_end|>", "<|endoftext|>", "</s>", "<|eom_id|>",
    "<|end|>", "<end_of_turn>", "<EOT>",
    /* FIM repo / file-separator / pad tokens */
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>",
};

/* ---- building ---- */

static int cmp_special(const void *pa, const void *pb, void *ctx) {
    const kb_tokenizer *t = ctx;
    int32_t a = *(const int32_t *)pa, b = *(const int32_t *)pb;
    uint8_t fa = (uint8_t)t->text[t->text_off[a]], fb = (uint8_t)t->text[t->text_off[b]];
    if (fa != fb) return fa < fb ? -1 : 1;
    if (t->text_len[a] != t->text_len[b]) return t->text_len[a] > t->text_len[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

static void build_specials(kb_tokenizer *t) {
    t->special = KB_MALLOC(((size_t)t->n_vocab + 1) * sizeof *t->special);
    t->n_special = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        uint8_t ty = t->type[i];
        if ((ty == TT_CONTROL || ty == TT_USER || ty == TT_UNKNOWN) && t->text_len[i] > 0)
            t->special[t->n_special++] = i;
    }
    qsort_r(t->special, (size_t)t->n_special, sizeof *t->special, cmp_special, t);
    int32_t k = 0;
    for (int b = 0; b <= 256; b++) {
        while (k < t->n_special && (uint8_t)t->text[t->text_off[t->special[k]]] < b) k++;
        t->special_start[b] = k;
    }
    t->special_start[256] = t->n_special;
}

static int parse_byte_token(const char *s, uint32_t len, uint8_t *out) {
    /* "<0xAB>" */
    if (len != 6 || memcmp(s, "<0x", 3) || s[5] != '>') return 0;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
                : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0) return 0;
        v = v * 16 + d;
    }
    *out = (uint8_t)v;
    return 1;
}

/* The decoded bytes of every token (what tokenizer_piece copies). */
static void build_pieces(kb_tokenizer *t) {
    uint32_t map[256];
    int16_t rev[0x144];
    bpe_bytes_to_unicode(map);
    for (int i = 0; i < 0x144; i++) rev[i] = -1;
    for (int b = 0; b < 256; b++) rev[map[b]] = (int16_t)b;
    size_t total = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) total += t->text_len[i];
    t->piece = KB_MALLOC(total + 1);
    t->piece_off = KB_MALLOC((size_t)t->n_vocab * sizeof *t->piece_off);
    t->piece_len = KB_MALLOC((size_t)t->n_vocab * sizeof *t->piece_len);
    size_t n = 0;
    for (int32_t id = 0; id < t->n_vocab; id++) {
        const char *s = t->text + t->text_off[id];
        uint32_t len = t->text_len[id];
        uint8_t ty = t->type[id], byte;
        t->piece_off[id] = (uint32_t)n;
        if (ty == TT_CONTROL || ty == TT_UNKNOWN || ty == TT_USER || ty == TT_UNUSED) {
            memcpy(t->piece + n, s, len); /* the literal text */
            n += len;
        } else if (ty == TT_BYTE && parse_byte_token(s, len, &byte)) {
            t->piece[n++] = (char)byte;
        } else if (t->model == TOK_SPM) {
            for (uint32_t k = 0; k < len;) {
                if (k + 3 <= len && !memcmp(s + k, "\xe2\x96\x81", 3)) {
                    t->piece[n++] = ' ';
                    k += 3;
                } else {
                    t->piece[n++] = s[k++];
                }
            }
        } else {
            /* Byte-level: every character stands for one byte; a character
             * outside the map (never in a well-formed vocab) is copied. */
            for (uint32_t k = 0; k < len;) {
                size_t c;
                uint32_t cp = utf8_decode(s + k, len - k, &c);
                if (cp < 0x144 && rev[cp] >= 0)
                    t->piece[n++] = (char)rev[cp];
                else
                    memcpy(t->piece + n, s + k, c), n += c;
                k += (uint32_t)c;
            }
        }
        t->piece_len[id] = (uint32_t)(n - t->piece_off[id]);
    }
}

static int resolve_id(const tok_spec *s, int32_t n_vocab, int64_t v, int32_t def, const char *key,
                      int32_t *out, kb_err *err) {
    if (v == -2) {
        *out = def < n_vocab ? def : -1;
        return 0;
    }
    if (v < 0 || v >= n_vocab)
        return kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.%s = %lld is outside the vocabulary [0, %d)",
                       s->where, key, (long long)v, n_vocab);
    *out = (int32_t)v;
    return 0;
}

int tokenizer_build(const tok_spec *s, kb_tokenizer **out, kb_err *err) {
    *out = NULL;
    kb_tokenizer *t = KB_CALLOC(1, sizeof *t);
    int rc = 0;
    if (!s->model) {
        rc = kb_fail(err, KB_EINPUT, "%s: key 'tokenizer.ggml.model' is missing", s->where);
        goto fail;
    }
    if (!strcmp(s->model, "gpt2")) {
        t->model = TOK_BPE;
    } else if (!strcmp(s->model, "llama")) {
        t->model = TOK_SPM;
    } else {
        rc = kb_fail(err, KB_EINPUT,
                     "%s: tokenizer.ggml.model '%s' is not supported (expected 'gpt2' for byte-level "
                     "BPE or 'llama' for SentencePiece BPE)",
                     s->where, s->model);
        goto fail;
    }
    if (s->n_vocab <= 0) {
        rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.tokens is empty", s->where);
        goto fail;
    }
    t->n_vocab = s->n_vocab;

    /* texts, types, scores */
    size_t total = 0;
    for (int32_t i = 0; i < s->n_vocab; i++) total += s->token_lens[i];
    if (total > UINT32_MAX) {
        rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.tokens: %zu bytes of text is too much",
                     s->where, total);
        goto fail;
    }
    t->text = KB_MALLOC(total + 1);
    t->text_off = KB_MALLOC((size_t)t->n_vocab * sizeof *t->text_off);
    t->text_len = KB_MALLOC((size_t)t->n_vocab * sizeof *t->text_len);
    t->type = KB_MALLOC((size_t)t->n_vocab);
    t->score = KB_MALLOC((size_t)t->n_vocab * sizeof *t->score);
    t->eog = KB_CALLOC((size_t)t->n_vocab, 1);
    size_t off = 0;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        memcpy(t->text + off, s->tokens[i], s->token_lens[i]);
        t->text_off[i] = (uint32_t)off;
        t->text_len[i] = s->token_lens[i];
        off += s->token_lens[i];
        int32_t ty = s->types ? s->types[i] : TT_NORMAL;
        t->type[i] = (uint8_t)(ty >= 0 && ty <= TT_BYTE ? ty : TT_UNDEFINED);
        t->score[i] = s->scores ? s->scores[i] : 0.0f;
    }

    /* hash */
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n_vocab * 2u) cap <<= 1;
    t->hash = KB_MALLOC((size_t)cap * sizeof *t->hash);
    memset(t->hash, 0xff, (size_t)cap * sizeof *t->hash);
    t->hash_mask = cap - 1;
    for (int32_t i = 0; i < t->n_vocab; i++) {
        if (!t->text_len[i]) continue; /* an empty token can never be produced */
        const char *txt = t->text + t->text_off[i];
        int32_t dup = tok_lookup(t, txt, t->text_len[i]);
        if (dup >= 0) {
            rc = kb_fail(err, KB_EINPUT,
                         "%s: tokenizer.ggml.tokens: token %d '%.*s' duplicates token %d", s->where, i,
                         (int)(t->text_len[i] > 60 ? 60 : t->text_len[i]), txt, dup);
            goto fail;
        }
        uint32_t h = hash_bytes(txt, t->text_len[i]) & t->hash_mask;
        while (t->hash[h] >= 0) h = (h + 1) & t->hash_mask;
        t->hash[h] = i;
    }

    /* model specifics */
    if (t->model == TOK_BPE) {
        if (!s->pre) {
            fprintf(stderr,
                    "kvbench: warning: %s: tokenizer.ggml.pre is missing; using the 'default' "
                    "pre-tokenizer (ids may differ from the model's own tokenizer)\n",
                    s->where);
            t->pre = PRE_DEFAULT;
            snprintf(t->pre_name, sizeof t->pre_name, "default");
        } else {
            if (bpe_pre_parse(s->pre, &t->pre, &t->ignore_merges)) {
                rc = kb_fail(err, KB_EINPUT,
                             "%s: tokenizer.ggml.pre '%s' is not supported (known: %s)", s->where,
                             s->pre, bpe_pre_known());
                goto fail;
            }
            snprintf(t->pre_name, sizeof t->pre_name, "%s", s->pre);
        }
        if (!s->merges || s->n_merges <= 0) {
            rc = kb_fail(err, KB_EINPUT,
                         "%s: key 'tokenizer.ggml.merges' is missing or empty (required by the gpt2 "
                         "tokenizer model)",
                         s->where);
            goto fail;
        }
        if ((rc = bpe_build_merges(t, s, err))) goto fail;
        uint32_t map[256];
        bpe_bytes_to_unicode(map);
        for (int b = 0; b < 256; b++) {
            char u8[4];
            int n = utf8_encode(map[b], u8);
            t->byte_tok[b] = tok_lookup(t, u8, (size_t)n);
        }
    } else {
        t->pre = PRE_NONE;
        snprintf(t->pre_name, sizeof t->pre_name, "%s", s->pre ? s->pre : "");
        for (int b = 0; b < 256; b++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", b);
            t->byte_tok[b] = tok_lookup(t, hex, 6);
        }
    }

    /* special ids and flags (llama.cpp's defaults when the keys are absent) */
    int spm = t->model == TOK_SPM;
    if ((rc = resolve_id(s, t->n_vocab, s->bos, spm ? 1 : -1, "bos_token_id", &t->bos, err)) ||
        (rc = resolve_id(s, t->n_vocab, s->eos, spm ? 2 : -1, "eos_token_id", &t->eos, err)) ||
        (rc = resolve_id(s, t->n_vocab, s->unk, spm ? 0 : -1, "unknown_token_id", &t->unk, err)) ||
        (rc = resolve_id(s, t->n_vocab, s->pad, -1, "padding_token_id", &t->pad, err)))
        goto fail;
    t->add_bos = s->add_bos >= 0 ? s->add_bos : (spm || t->pre == PRE_LLAMA3);
    t->add_eos = s->add_eos >= 0 ? s->add_eos : 0;
    t->add_space_prefix = spm ? (s->add_space_prefix >= 0 ? s->add_space_prefix : 1) : 0;
    if (t->add_bos && t->bos < 0) {
        rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.add_bos_token is true but there is no BOS token",
                     s->where);
        goto fail;
    }
    if (t->add_eos && t->eos < 0) {
        rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.add_eos_token is true but there is no EOS token",
                     s->where);
        goto fail;
    }

    /* end of generation: EOS plus the texts above; those are treated as
     * control tokens (matched as specials, rendered only on request), as
     * llama.cpp does. */
    if (t->eos >= 0) t->eog[t->eos] = 1;
    for (size_t k = 0; k < sizeof eog_texts / sizeof eog_texts[0]; k++) {
        int32_t id = tok_lookup(t, eog_texts[k], strlen(eog_texts[k]));
        if (id < 0) continue;
        t->eog[id] = 1;
        t->type[id] = TT_CONTROL; /* a user-defined one too (llama.cpp: any type without the control bit) */
    }

    build_specials(t);
    build_pieces(t);
    t->chat = chat_detect(s->chat_template, spm);
    *out = t;
    return 0;
fail:
    tokenizer_free(t);
    return rc;
}

void tokenizer_free(kb_tokenizer *t) {
    if (!t) return;
    free(t->text);
    free(t->text_off);
    free(t->text_len);
    free(t->type);
    free(t->score);
    free(t->eog);
    free(t->piece);
    free(t->piece_off);
    free(t->piece_len);
    free(t->hash);
    free(t->merges);
    free(t->special);
    free(t);
}

/* ---- loading from GGUF ---- */

static int get_id(const gguf_file *f, const char *key, int64_t *out, kb_err *err) {
    int64_t v;
    int rc = gguf_get_i64(f, key, &v, err);
    if (rc == 1) {
        *out = -2;
        return 0;
    }
    if (rc) return rc;
    *out = v;
    return 0;
}

static int get_flag(const gguf_file *f, const char *key, int *out, kb_err *err) {
    int v;
    int rc = gguf_get_bool(f, key, &v, err);
    if (rc == 1) {
        *out = -1;
        return 0;
    }
    if (rc) return rc;
    *out = v ? 1 : 0;
    return 0;
}

/* Array key of the wanted element type(s); *kv NULL when absent. */
static int get_arr(const gguf_file *f, const char *key, uint32_t t1, uint32_t t2, const char *what,
                   const gguf_kv **kv, kb_err *err) {
    *kv = gguf_find_kv(f, key);
    if (!*kv) return 0;
    if ((*kv)->type != GGUF_T_ARRAY || ((*kv)->arr_type != t1 && (*kv)->arr_type != t2)) {
        *kv = NULL;
        return kb_fail(err, KB_EINPUT, "%s: key '%s' must be an array of %s", f->path, key, what);
    }
    return 0;
}

int tokenizer_from_gguf(const gguf_file *f, kb_tokenizer **out, kb_err *err) {
    *out = NULL;
    tok_spec s;
    memset(&s, 0, sizeof s);
    s.where = f->path;
    char *model = NULL, *pre = NULL, *tmpl = NULL;
    const char **toks = NULL, **merges = NULL;
    uint32_t *tok_lens = NULL, *merge_lens = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    const gguf_kv *kv_tok, *kv_type, *kv_score, *kv_merge;
    int rc;

    if ((rc = gguf_get_str(f, "tokenizer.ggml.model", &model, err)) == 1) {
        rc = kb_fail(err, KB_EINPUT, "%s: key 'tokenizer.ggml.model' is missing (no tokenizer in this file)",
                     f->path);
        goto done;
    }
    if (rc) goto done;
    s.model = model;
    if ((rc = gguf_get_str(f, "tokenizer.ggml.pre", &pre, err)) > 1) goto done;
    s.pre = pre;
    if ((rc = gguf_get_str(f, "tokenizer.chat_template", &tmpl, err)) > 1) goto done;
    s.chat_template = tmpl;

    if ((rc = get_arr(f, "tokenizer.ggml.tokens", GGUF_T_STRING, GGUF_T_STRING, "strings", &kv_tok, err)))
        goto done;
    if (!kv_tok) {
        rc = kb_fail(err, KB_EINPUT, "%s: key 'tokenizer.ggml.tokens' is missing", f->path);
        goto done;
    }
    if (kv_tok->arr_n == 0 || kv_tok->arr_n > INT32_MAX / 2) {
        rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.tokens has %llu entries (expected 1..%d)",
                     f->path, (unsigned long long)kv_tok->arr_n, INT32_MAX / 2);
        goto done;
    }
    s.n_vocab = (int32_t)kv_tok->arr_n;
    toks = KB_MALLOC((size_t)s.n_vocab * sizeof *toks);
    tok_lens = KB_MALLOC((size_t)s.n_vocab * sizeof *tok_lens);
    for (int32_t i = 0; i < s.n_vocab; i++) {
        gguf_str g = gguf_arr_str(kv_tok, (uint64_t)i);
        toks[i] = g.s;
        tok_lens[i] = (uint32_t)g.len;
    }
    s.tokens = toks;
    s.token_lens = tok_lens;

    if ((rc = get_arr(f, "tokenizer.ggml.token_type", GGUF_T_I32, GGUF_T_U32, "int32", &kv_type, err)))
        goto done;
    if (kv_type) {
        if (kv_type->arr_n < (uint64_t)s.n_vocab) {
            rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.token_type has %llu entries for %d tokens",
                         f->path, (unsigned long long)kv_type->arr_n, s.n_vocab);
            goto done;
        }
        types = KB_MALLOC((size_t)s.n_vocab * sizeof *types);
        for (int32_t i = 0; i < s.n_vocab; i++) {
            double ty = gguf_arr_num(kv_type, (uint64_t)i);
            if (!(ty >= TT_UNDEFINED && ty <= TT_BYTE)) { /* llama.cpp's enum: 0..6 */
                rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.token_type[%d] = %.0f, expected a "
                             "token type 0..6 (undefined, normal, unknown, control, user-defined, "
                             "unused, byte)", f->path, i, ty);
                goto done;
            }
            types[i] = (int32_t)ty;
        }
        s.types = types;
    }
    if ((rc = get_arr(f, "tokenizer.ggml.scores", GGUF_T_F32, GGUF_T_I32, "float32", &kv_score, err)))
        goto done;
    if (kv_score) {
        if (kv_score->arr_n < (uint64_t)s.n_vocab) {
            rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.scores has %llu entries for %d tokens",
                         f->path, (unsigned long long)kv_score->arr_n, s.n_vocab);
            goto done;
        }
        scores = KB_MALLOC((size_t)s.n_vocab * sizeof *scores);
        for (int32_t i = 0; i < s.n_vocab; i++) scores[i] = (float)gguf_arr_num(kv_score, (uint64_t)i);
        s.scores = scores;
    }
    if ((rc = get_arr(f, "tokenizer.ggml.merges", GGUF_T_STRING, GGUF_T_STRING, "strings", &kv_merge,
                      err)))
        goto done;
    if (kv_merge) {
        if (kv_merge->arr_n > INT32_MAX / 2) {
            rc = kb_fail(err, KB_EINPUT, "%s: tokenizer.ggml.merges has too many entries", f->path);
            goto done;
        }
        s.n_merges = (int32_t)kv_merge->arr_n;
        merges = KB_MALLOC(((size_t)s.n_merges + 1) * sizeof *merges);
        merge_lens = KB_MALLOC(((size_t)s.n_merges + 1) * sizeof *merge_lens);
        for (int32_t i = 0; i < s.n_merges; i++) {
            gguf_str g = gguf_arr_str(kv_merge, (uint64_t)i);
            merges[i] = g.s;
            merge_lens[i] = (uint32_t)g.len;
        }
        s.merges = merges;
        s.merge_lens = merge_lens;
    }
    if ((rc = get_id(f, "tokenizer.ggml.bos_token_id", &s.bos, err)) ||
        (rc = get_id(f, "tokenizer.ggml.eos_token_id", &s.eos, err)) ||
        (rc = get_id(f, "tokenizer.ggml.unknown_token_id", &s.unk, err)) ||
        (rc = get_id(f, "tokenizer.ggml.padding_token_id", &s.pad, err)) ||
        (rc = get_flag(f, "tokenizer.ggml.add_bos_token", &s.add_bos, err)) ||
        (rc = get_flag(f, "tokenizer.ggml.add_eos_token", &s.add_eos, err)) ||
        (rc = get_flag(f, "tokenizer.ggml.add_space_prefix", &s.add_space_prefix, err)))
        goto done;
    rc = tokenizer_build(&s, out, err);
done:
    free(model);
    free(pre);
    free(tmpl);
    free(toks);
    free(tok_lens);
    free(types);
    free(scores);
    free(merges);
    free(merge_lens);
    return rc;
}

/* ---- encoding ---- */

/* Splits text at special tokens (leftmost-longest, as HF tokenizers' added
 * vocabulary does) and encodes the raw parts. first_prefix: whether a
 * SentencePiece model adds its space prefix to a first raw part. */
static void encode_fragments(const kb_tokenizer *t, const char *text, size_t len, int parse_special,
                             int first_prefix, tok_ids *out) {
    int prev_special = first_prefix; /* SPM: prefix a space after a special token */
    size_t seg = 0, i = 0;
    while (i < len) {
        uint8_t c = (uint8_t)text[i];
        int32_t hit = -1;
        for (int32_t k = t->special_start[c]; k < t->special_start[c + 1]; k++) {
            int32_t id = t->special[k];
            uint32_t l = t->text_len[id];
            if (!parse_special && t->type[id] != TT_USER) continue; /* user-defined: always */
            if (l <= len - i && !memcmp(text + i, t->text + t->text_off[id], l)) {
                hit = id;
                break;
            }
        }
        if (hit < 0) {
            i++;
            continue;
        }
        if (seg < i) {
            if (t->model == TOK_SPM)
                spm_encode(t, text + seg, i - seg, t->add_space_prefix && prev_special, out);
            else
                bpe_encode(t, text + seg, i - seg, out);
        }
        tok_ids_push(out, hit);
        prev_special = 1;
        i += t->text_len[hit];
        seg = i;
    }
    if (seg < len) {
        if (t->model == TOK_SPM)
            spm_encode(t, text + seg, len - seg, t->add_space_prefix && prev_special, out);
        else
            bpe_encode(t, text + seg, len - seg, out);
    }
}

int tokenizer_encode(const kb_tokenizer *t, const char *text, size_t len, int parse_special,
                     int add_bos, int32_t **ids, int *n_ids, kb_err *err) {
    (void)err;
    tok_ids o = {0};
    int want_bos = t->bos >= 0 && (add_bos == 2 || (add_bos == 1 && t->add_bos));
    if (want_bos) tok_ids_push(&o, t->bos);
    encode_fragments(t, text, len, parse_special, 1, &o);
    if (want_bos && o.n >= 2 && o.v[1] == t->bos) {
        memmove(o.v, o.v + 1, (size_t)(o.n - 1) * sizeof *o.v); /* text brought its own BOS */
        o.n--;
    }
    if (add_bos == 1 && t->add_eos && t->eos >= 0) tok_ids_push(&o, t->eos);
    if (!o.v) o.v = KB_MALLOC(sizeof *o.v);
    *ids = o.v;
    *n_ids = o.n;
    return 0;
}

int tokenizer_encode_cont(const kb_tokenizer *t, const char *text, size_t len, int32_t **ids,
                          int *n_ids, kb_err *err) {
    (void)err;
    tok_ids o = {0};
    encode_fragments(t, text, len, 1, 0, &o);
    if (!o.v) o.v = KB_MALLOC(sizeof *o.v);
    *ids = o.v;
    *n_ids = o.n;
    return 0;
}

/* ---- decoding ---- */

static int is_ctl(const kb_tokenizer *t, int32_t id) {
    uint8_t ty = t->type[id];
    return ty == TT_CONTROL || ty == TT_UNKNOWN || ty == TT_UNUSED;
}

const char *tokenizer_piece_ref(const kb_tokenizer *t, int32_t id, int render_special, int *len) {
    *len = 0;
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (!render_special && is_ctl(t, id)) return NULL;
    *len = (int)t->piece_len[id];
    return t->piece + t->piece_off[id];
}

int tokenizer_piece(const kb_tokenizer *t, int32_t id, int render_special, char *buf, int cap) {
    int len;
    const char *p = tokenizer_piece_ref(t, id, render_special, &len);
    if (p && cap > 0) memcpy(buf, p, (size_t)(len < cap ? len : cap));
    return len;
}

char *tokenizer_decode(const kb_tokenizer *t, const int32_t *ids, int n, int render_special) {
    size_t total = 1;
    for (int i = 0; i < n; i++)
        if (ids[i] >= 0 && ids[i] < t->n_vocab) total += t->piece_len[ids[i]];
    char *s = KB_MALLOC(total);
    size_t o = 0;
    int at_start = t->model == TOK_SPM && t->add_space_prefix;
    for (int i = 0; i < n; i++) {
        int32_t id = ids[i];
        if (id < 0 || id >= t->n_vocab) continue;
        if (is_ctl(t, id)) {
            if (render_special) {
                memcpy(s + o, t->piece + t->piece_off[id], t->piece_len[id]);
                o += t->piece_len[id];
            }
            continue;
        }
        const char *p = t->piece + t->piece_off[id];
        uint32_t len = t->piece_len[id];
        if (at_start && len && p[0] == ' ') p++, len--; /* SentencePiece drops the dummy prefix */
        at_start = 0;
        memcpy(s + o, p, len);
        o += len;
    }
    s[o] = 0;
    /* byte-level pieces can end mid-character (a cut, or a model's own bytes):
     * the text is made valid UTF-8 as HF's decoder makes it (U+FFFD), so that
     * predictions and truncated prompts are the reference's strings and every
     * CSV and JSON written from them is valid UTF-8. A NUL byte (a model's
     * token for byte 0x00) becomes U+FFFD as well: the returned C string would
     * end there, losing the rest of a prediction. At most 3 bytes out per byte
     * in, either way. */
    char *v = KB_MALLOC(3 * o + 1);
    size_t w = 0;
    for (size_t i = 0, k; i < o; i += k) {
        uint32_t c = utf8_decode_lossy(s + i, o - i, &k);
        w += (size_t)utf8_encode(c ? c : 0xFFFDu, v + w);
    }
    v[w] = 0;
    free(s);
    return v;
}

/* ---- accessors ---- */

int tokenizer_n_vocab(const kb_tokenizer *t) { return t->n_vocab; }
int tokenizer_bos(const kb_tokenizer *t) { return t->bos; }
int tokenizer_eos(const kb_tokenizer *t) { return t->eos; }
int tokenizer_add_bos(const kb_tokenizer *t) { return t->add_bos; }
int tokenizer_is_eog(const kb_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && t->eog[id];
}
int tokenizer_is_control(const kb_tokenizer *t, int32_t id) {
    return id >= 0 && id < t->n_vocab && is_ctl(t, id);
}
const char *tokenizer_pre_name(const kb_tokenizer *t) { return t->pre_name; }
const char *tokenizer_model_name(const kb_tokenizer *t) { return t->model == TOK_SPM ? "llama" : "gpt2"; }
kb_chat_format tokenizer_chat_format(const kb_tokenizer *t) { return t->chat; }
const char *tokenizer_token_text(const kb_tokenizer *t, int32_t id, int *len) {
    if (id < 0 || id >= t->n_vocab) return NULL;
    if (len) *len = (int)t->text_len[id];
    return t->text + t->text_off[id];
}
