/* fuzz_gguf.c - libFuzzer target: the GGUF reader and what is built on it.
 *
 * One input = one GGUF file image:
 *   1. gguf_open_mem; a refusal must carry KB_EINPUT and a message;
 *   2. every accessor over every key and tensor: gguf_find_kv/_tensor find
 *      the entry they were built from, the typed getters (u32, i64, f32, bool,
 *      str, arr with every wanted type) answer 0 or KB_EINPUT with a message
 *      (never "absent" for a present key), gguf_arr_str/_num over every
 *      element (and one past the end), every string and tensor lies inside
 *      the buffer, tensor byte sizes match kb_row_bytes, and kb_dequant equals
 *      kb_dequant_ref bit for bit on the first 64 Ki elements of each tensor
 *      (quant.h's promise; NaNs compare equal to any NaN: F16C may quieten
 *      payloads); gguf_print to /dev/null;
 *   3. tokenizer_from_gguf; when it builds: token texts, pieces, a fixed
 *      text encoded (special parsing on/off, every add_bos mode) with ids
 *      in range, decoded, a chat turn rendered and encoded;
 *   4. when general.architecture is "llama": the input written to a file in
 *      /dev/shm and model_load() on it (the mmap path of the reader plus the
 *      loader's shape checks); when it loads and is small, one prefill token
 *      and one decode token through the forward pass with the exact
 *      attention backend (ids in range, no crash; the values are random).
 * Seeds: tiny models from tests/py/tinymodel.py (run.sh writes them). */
#include <math.h>

#include "tests/fuzz/fuzz_common.h"
#include "harness/engine/gguf.h"
#include "harness/engine/model.h"
#include "harness/engine/tokenizer.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "methods/prefill.h"

#define GGUF_FZ_DEQUANT_MAX 65536 /* elements compared per tensor */

static volatile uint64_t gguf_fz_sink; /* reads that must happen (ASan checks them) */

static void gguf_fz_inside(const gguf_file *f, const void *p, uint64_t n, const char *what) {
    const uint8_t *b = p;
    int ok = b >= f->map && n <= f->size && (uint64_t)(b - f->map) <= f->size - n;
    FUZZ_ASSERT(ok, "%s: %llu bytes at offset %lld outside the %zu-byte buffer", what,
                (unsigned long long)n, (long long)(b - f->map), f->size);
    if (ok && n) gguf_fz_sink += b[0] + b[n - 1];
}

static int gguf_fz_same_float(float a, float b) {
    if (isnan(a) && isnan(b)) return 1;
    return !memcmp(&a, &b, sizeof a);
}

static void gguf_fz_tensor(const gguf_file *f, const gguf_tensor *t) {
    FUZZ_ASSERT(gguf_find_tensor(f, t->name) == t, "tensor '%s' not found by name", t->name);
    FUZZ_ASSERT(t->n_dims >= 1 && t->n_dims <= 4, "tensor '%s' n_dims %u", t->name, t->n_dims);
    const kb_qtype *q = kb_qtype_info(t->type);
    FUZZ_ASSERT(q != NULL, "tensor '%s': unknown type %u accepted", t->name, t->type);
    if (!q) return;
    uint64_t rows = t->ne[1] * t->ne[2] * t->ne[3]; /* the reader proved no overflow */
    size_t rb = kb_row_bytes(t->type, (int64_t)t->ne[0]);
    FUZZ_ASSERT(rb && rb * rows == t->nbytes, "tensor '%s': %llu bytes, rows of %zu", t->name,
                (unsigned long long)t->nbytes, rb);
    gguf_fz_inside(f, t->data, t->nbytes, t->name);
    if (!q->supported || !rb) return;
    /* whole blocks from the start, at most GGUF_FZ_DEQUANT_MAX elements */
    uint64_t nel = t->ne[0] * rows;
    if (nel > GGUF_FZ_DEQUANT_MAX) nel = GGUF_FZ_DEQUANT_MAX / (uint64_t)q->blck * (uint64_t)q->blck;
    if (!nel) return;
    float *a = malloc(nel * sizeof *a), *b = malloc(nel * sizeof *b);
    kb_dequant(t->type, t->data, a, (int64_t)nel);
    kb_dequant_ref(t->type, t->data, b, (int64_t)nel);
    for (uint64_t i = 0; i < nel; i++)
        if (!gguf_fz_same_float(a[i], b[i])) {
            FUZZ_ASSERT(0, "tensor '%s' (%s) element %llu: kb_dequant %.9g, reference %.9g",
                        t->name, q->name, (unsigned long long)i, a[i], b[i]);
            break;
        }
    free(a);
    free(b);
}

static void gguf_fz_kv(const gguf_file *f, const gguf_kv *kv) {
    gguf_fz_inside(f, kv->key.s, kv->key.len, "key");
    char *key = malloc(kv->key.len + 1);
    memcpy(key, kv->key.s, kv->key.len);
    key[kv->key.len] = 0;
    FUZZ_ASSERT(gguf_find_kv(f, key) == kv, "key '%s' not found by name", key);
    FUZZ_ASSERT(strcmp(gguf_type_name(kv->type), "?") != 0, "key '%s': type %u", key, kv->type);
    kb_err err = {0};
    int rc;
    uint32_t u32;
    int64_t i64;
    float f32;
    int b;
    char *s = NULL;
    /* present key: 0 or KB_EINPUT with a message, never 1 (absent) */
#define GGUF_FZ_GET(call)                                                                     \
    do {                                                                                      \
        memset(&err, 0, sizeof err);                                                          \
        rc = call;                                                                            \
        FUZZ_ASSERT(rc == 0 || (rc == KB_EINPUT && err.msg[0]), "%s on '%s': rc %d '%s'", #call, \
                    key, rc, err.msg);                                                        \
    } while (0)
    GGUF_FZ_GET(gguf_get_u32(f, key, &u32, &err));
    GGUF_FZ_GET(gguf_get_i64(f, key, &i64, &err));
    GGUF_FZ_GET(gguf_get_f32(f, key, &f32, &err));
    GGUF_FZ_GET(gguf_get_bool(f, key, &b, &err));
    GGUF_FZ_GET(gguf_get_str(f, key, &s, &err));
    if (rc == 0) {
        FUZZ_ASSERT(kv->type == GGUF_T_STRING, "gguf_get_str on a %s", gguf_type_name(kv->type));
        FUZZ_ASSERT(strlen(s) <= kv->nbytes, "string longer than its value");
        free(s);
    }
    if (kv->type == GGUF_T_STRING) gguf_fz_inside(f, kv->data, kv->nbytes, "string value");
    for (uint32_t want = 0; want <= GGUF_T_F64 + 1; want++) {
        uint32_t w = want > GGUF_T_F64 ? GGUF_T_ANY_NUMBER : want;
        const gguf_kv *arr = NULL;
        GGUF_FZ_GET(gguf_get_arr(f, key, w, &arr, &err));
        FUZZ_ASSERT(rc != 0 || (arr == kv && kv->type == GGUF_T_ARRAY), "gguf_get_arr ok on a %s",
                    gguf_type_name(kv->type));
    }
#undef GGUF_FZ_GET
    if (kv->type == GGUF_T_ARRAY) {
        gguf_fz_inside(f, kv->data, kv->nbytes, "array");
        for (uint64_t i = 0; i <= kv->arr_n; i++) {
            if (kv->arr_type == GGUF_T_STRING) {
                gguf_str e = gguf_arr_str(kv, i);
                if (i < kv->arr_n) gguf_fz_inside(f, e.s, e.len, "array string");
                else FUZZ_ASSERT(e.len == 0, "string past the end has length %llu",
                                 (unsigned long long)e.len);
            } else {
                double x = gguf_arr_num(kv, i);
                int numeric = kv->arr_type != GGUF_T_ARRAY;
                if (i == kv->arr_n || !numeric)
                    FUZZ_ASSERT(isnan(x), "number past the end or of a non-number array: %g", x);
                else
                    gguf_fz_sink += (uint64_t)(x == x);
            }
        }
    } else {
        FUZZ_ASSERT(gguf_arr_str(kv, 0).len == 0, "gguf_arr_str on a scalar");
        FUZZ_ASSERT(isnan(gguf_arr_num(kv, 0)), "gguf_arr_num on a scalar");
    }
    free(key);
}

static void gguf_fz_tokenizer(const gguf_file *f) {
    kb_tokenizer *tok = NULL;
    kb_err err = {0};
    int rc = tokenizer_from_gguf(f, &tok, &err);
    if (rc) {
        FUZZ_ASSERT_ERR(rc, err);
        FUZZ_ASSERT(tok == NULL, "tokenizer returned with an error");
        return;
    }
    int nv = tokenizer_n_vocab(tok);
    FUZZ_ASSERT(nv >= 1, "n_vocab %d", nv);
    char buf[64];
    for (int32_t id = -1; id <= nv && id < 4096; id++) {
        int len = 0;
        const char *txt = tokenizer_token_text(tok, id, &len);
        FUZZ_ASSERT((id >= 0 && id < nv) == (txt != NULL), "token_text(%d)", id);
        int pl = tokenizer_piece(tok, id, id & 1, buf, sizeof buf);
        FUZZ_ASSERT(pl >= 0, "piece length %d", pl);
        gguf_fz_sink += (uint64_t)tokenizer_is_control(tok, id) + (uint64_t)tokenizer_is_eog(tok, id);
    }
    FUZZ_ASSERT(tokenizer_bos(tok) < nv && tokenizer_eos(tok) < nv, "bos %d eos %d of %d",
                tokenizer_bos(tok), tokenizer_eos(tok), nv);
    static const char text[] = "Hello world, 12345 <|im_start|>user\n<s>caf\xc3\xa9 \xe4\xb8\xad "
                               "\xf0\x9f\x98\x80 \xff\xfe\t  x</s><|im_end|>";
    for (int ps = 0; ps < 2; ps++)
        for (int bos = 0; bos < 3; bos++) {
            int32_t *ids = NULL;
            int n = -1;
            rc = tokenizer_encode(tok, text, sizeof text - 1, ps, bos, &ids, &n, &err);
            if (rc) {
                FUZZ_ASSERT_ERR(rc, err);
                free(ids);
                continue;
            }
            FUZZ_ASSERT(ids != NULL && n >= 0, "encode gave %d ids", n);
            for (int i = 0; i < n; i++) FUZZ_ASSERT(ids[i] >= 0 && ids[i] < nv, "id %d", ids[i]);
            char *d = tokenizer_decode(tok, ids, n, ps);
            FUZZ_ASSERT(d != NULL, "decode gave NULL");
            free(d);
            free(ids);
        }
    kb_chat_format fmt = tokenizer_chat_format(tok);
    char *turn = chat_first_turn(fmt, NULL, "What is 2+2?");
    char *next = chat_next_turn(fmt, "4", "And 3+3?");
    int32_t *ids = NULL;
    int n = 0;
    if (tokenizer_encode(tok, turn, strlen(turn), 1, 1, &ids, &n, &err) == 0) free(ids);
    ids = NULL;
    if (tokenizer_encode_cont(tok, next, strlen(next), &ids, &n, &err) == 0) free(ids);
    free(turn);
    free(next);
    tokenizer_free(tok);
}

/* The loader on a file image of the input, and a 2-token forward pass when
 * the model is small (bounded work per input). */
static void gguf_fz_model(const uint8_t *d, size_t n) {
    char path[512];
    fuzz_path(path, sizeof path, "in.gguf");
    fuzz_write(path, d, n);
    kb_model *m = NULL;
    kb_err err = {0};
    int rc = model_load(path, &m, &err);
    if (rc) {
        FUZZ_ASSERT_ERR(rc, err);
        return;
    }
    const kb_hparams *hp = &m->hp;
    FUZZ_ASSERT(m->tok != NULL && tokenizer_n_vocab(m->tok) <= hp->n_vocab, "tokenizer/vocab");
    FUZZ_ASSERT(hp->n_head % hp->n_head_kv == 0 && hp->head_dim % 2 == 0, "heads");
    double acts = (double)hp->n_layer * (hp->n_embd + hp->n_ff + hp->n_head * hp->head_dim) +
                  hp->n_vocab;
    if (m->weight_bytes < (64u << 20) && acts < 4e6) {
        kb_forward *fw = forward_new(m, 2);
        kb_prefill pf;
        prefill_init(&pf, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, KB_F32, 1, 2);
        kb_attn_backend be = prefill_backend(&pf);
        int32_t tok0 = 0, tok1 = hp->n_vocab > 1 ? 1 : 0;
        rc = forward_prefill(fw, &tok0, 1, 0, &be, NULL, 1, &err);
        if (rc) FUZZ_ASSERT_ERR(rc, err);
        else forward_decode(fw, tok1, 1, &be);
        int32_t arg = logits_argmax(fw->logits, hp->n_vocab);
        FUZZ_ASSERT(arg >= 0 && arg < hp->n_vocab, "argmax %d of %d", arg, hp->n_vocab);
        prefill_free(&pf);
        forward_free(fw);
    }
    model_free(m);
}

int fuzz_gguf_one(const uint8_t *d, size_t n) {
    gguf_file *f = NULL;
    kb_err err = {0};
    int rc = gguf_open_mem(d, n, "fuzz.gguf", &f, &err);
    if (rc) {
        FUZZ_ASSERT(rc == KB_EINPUT && err.msg[0] && f == NULL, "rc %d '%s'", rc, err.msg);
        return 0;
    }
    FUZZ_ASSERT(f->version == 2 || f->version == 3, "version %u", f->version);
    FUZZ_ASSERT(f->alignment && !(f->alignment & (f->alignment - 1)), "alignment %llu",
                (unsigned long long)f->alignment);
    for (uint64_t i = 0; i < f->n_kv; i++) gguf_fz_kv(f, &f->kv[i]);
    for (uint64_t i = 0; i < f->n_tensors; i++) gguf_fz_tensor(f, &f->tensors[i]);
    FUZZ_ASSERT(gguf_find_kv(f, "") == NULL, "empty key found");
    gguf_print(f, fuzz_devnull());
    gguf_fz_tokenizer(f);
    char *arch = NULL;
    int is_llama = gguf_get_str(f, "general.architecture", &arch, &err) == 0 && !strcmp(arch, "llama");
    free(arch);
    gguf_close(f);
    if (is_llama) gguf_fz_model(d, n);
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    setenv("OMP_NUM_THREADS", "1", 0); /* one core per fuzzer: the machine is shared */
    kb_blas_single_thread();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fuzz_gguf_one(d, n); }
#endif
