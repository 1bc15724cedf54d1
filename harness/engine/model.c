/* model.c - loading a llama-arch model from GGUF (hyperparameters, tensors
 * checked by name, shape and type; RoPE frequencies with linear scaling and
 * Llama-3.1 rope_freqs) or building a synthetic one with random weights. */
#include "harness/engine/model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness/machine.h"
#include "kernels/quant.h"

/* ---------------------------------------------------------------- GGUF --- */

static int req_u32(const gguf_file *f, const char *key, uint32_t *out, kb_err *err) {
    int rc = gguf_get_u32(f, key, out, err);
    if (rc == 1) return kb_fail(err, KB_EINPUT, "%s: missing metadata key '%s'", f->path, key);
    return rc; /* gguf_get_* errors name the file */
}

static int opt_u32(const gguf_file *f, const char *key, uint32_t *out, kb_err *err) {
    int rc = gguf_get_u32(f, key, out, err);
    if (rc == 1) return 0;
    return rc; /* gguf_get_* errors name the file */
}

/* The training context: llama.context_length, required (engine.md §2 gives it no
 * default, and llama.cpp refuses a file without it; until 2026-12-06 kvbench took
 * 2048). load_gguf and model_context_length read it alike. */
static int context_length(const gguf_file *f, uint32_t *u, kb_err *err) {
    return req_u32(f, "llama.context_length", u, err);
}

static int opt_f32(const gguf_file *f, const char *key, float *out, kb_err *err) {
    int rc = gguf_get_f32(f, key, out, err);
    if (rc == 1) return 0;
    return rc; /* gguf_get_* errors name the file */
}

static int req_f32(const gguf_file *f, const char *key, float *out, kb_err *err) {
    int rc = gguf_get_f32(f, key, out, err);
    if (rc == 1) return kb_fail(err, KB_EINPUT, "%s: missing metadata key '%s'", f->path, key);
    return rc;
}

static const char *shape_str(const gguf_tensor *t, char *buf, size_t cap) {
    size_t off = 0;
    for (uint32_t d = 0; d < t->n_dims && off < cap; d++)
        off += (size_t)snprintf(buf + off, cap - off, "%s%llu", d ? " x " : "",
                                (unsigned long long)t->ne[d]);
    return buf;
}

/* A 2-D weight: GGUF ne = [cols, rows]. */
static int bind_weight(const gguf_file *f, const char *name, int rows, int cols, kb_weight *w,
                       kb_err *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return kb_fail(err, KB_EINPUT, "%s: missing tensor '%s'", f->path, name);
    char sh[96];
    if (t->n_dims != 2 || t->ne[0] != (uint64_t)cols || t->ne[1] != (uint64_t)rows)
        return kb_fail(err, KB_EINPUT, "%s: tensor '%s' has shape [%s], expected [%d x %d]",
                       f->path, name, shape_str(t, sh, sizeof sh), cols, rows);
    const kb_qtype *qt = kb_qtype_info(t->type);
    if (!qt || !qt->supported)
        return kb_fail(err, KB_EINPUT,
                       "%s: tensor '%s' has type %s, which kvbench cannot compute with "
                       "(supported: F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q6_K)",
                       f->path, name, qt ? qt->name : "unknown");
    w->type = t->type;
    w->data = t->data;
    w->rows = rows;
    w->cols = cols;
    w->row_bytes = kb_row_bytes(t->type, cols);
    if (!w->row_bytes)
        return kb_fail(err, KB_EINPUT, "%s: tensor '%s': row length %d is not a multiple of %s's block",
                       f->path, name, cols, qt->name);
    return 0;
}

static int bind_vec(const gguf_file *f, const char *name, int n, const float **out, kb_err *err) {
    const gguf_tensor *t = gguf_find_tensor(f, name);
    if (!t) return kb_fail(err, KB_EINPUT, "%s: missing tensor '%s'", f->path, name);
    char sh[96];
    if (t->n_dims != 1 || t->ne[0] != (uint64_t)n)
        return kb_fail(err, KB_EINPUT, "%s: tensor '%s' has shape [%s], expected [%d]", f->path,
                       name, shape_str(t, sh, sizeof sh), n);
    if (t->type != GGML_F32)
        return kb_fail(err, KB_EINPUT, "%s: tensor '%s' must be F32 (norm weights), got %s",
                       f->path, name, kb_qtype_info(t->type) ? kb_qtype_info(t->type)->name : "?");
    *out = (const float *)t->data;
    return 0;
}

static void rope_init(kb_model *m, const float *rope_div) {
    int half = m->hp.n_rot / 2;
    m->inv_freq = KB_MALLOC((size_t)half * sizeof(float));
    for (int i = 0; i < half; i++) {
        double w = pow((double)m->hp.rope_theta, -2.0 * i / m->hp.n_rot) * m->hp.rope_freq_scale;
        if (rope_div) w /= rope_div[i];
        m->inv_freq[i] = (float)w;
    }
}

static int load_gguf(const char *path, kb_model *m, kb_err *err) {
    int rc = gguf_open(path, &m->gguf, err);
    if (rc) return rc;
    (void)gguf_load_data(m->gguf);
    const gguf_file *f = m->gguf;
    snprintf(m->path, sizeof m->path, "%s", path);
    char *arch = NULL;
    rc = gguf_get_str(f, "general.architecture", &arch, err);
    if (rc == 1) return kb_fail(err, KB_EINPUT, "%s: missing 'general.architecture'", path);
    if (rc) return rc;
    if (strcmp(arch, "llama")) {
        rc = kb_fail(err, KB_EINPUT,
                     "%s: architecture '%s' is not supported (kvbench runs llama-arch models: "
                     "Llama, Mistral, LongChat, SmolLM2)",
                     path, arch);
        free(arch);
        return rc;
    }
    free(arch);
    char *name = NULL;
    if (gguf_get_str(f, "general.name", &name, NULL) == 0) {
        if ((size_t)snprintf(m->name, sizeof m->name, "%s", name) >= sizeof m->name)
            memcpy(m->name + sizeof m->name - 4, "...", 4); /* shown cut, not passed off as the name */
        free(name);
    }

    kb_hparams *hp = &m->hp;
    uint32_t u;
    if ((rc = req_u32(f, "llama.block_count", &u, err))) return rc;
    hp->n_layer = (int)u;
    if ((rc = req_u32(f, "llama.embedding_length", &u, err))) return rc;
    hp->n_embd = (int)u;
    if ((rc = req_u32(f, "llama.feed_forward_length", &u, err))) return rc;
    hp->n_ff = (int)u;
    if ((rc = req_u32(f, "llama.attention.head_count", &u, err))) return rc;
    hp->n_head = (int)u;
    u = (uint32_t)hp->n_head;
    if ((rc = opt_u32(f, "llama.attention.head_count_kv", &u, err))) return rc;
    hp->n_head_kv = (int)u;
    if ((rc = context_length(f, &u, err))) return rc;
    hp->n_ctx_train = (int)u;
    if (hp->n_layer < 1 || hp->n_layer > 1024 || hp->n_embd < 1 || hp->n_embd > 65536 ||
        hp->n_ff < 1 || hp->n_ff > 1 << 20 || hp->n_head < 1 || hp->n_head > 1024 ||
        hp->n_head_kv < 1 || hp->n_head % hp->n_head_kv || hp->n_embd % hp->n_head ||
        hp->n_ctx_train < 1)
        return kb_fail(err, KB_EINPUT,
                       "%s: inconsistent hyperparameters (layers %d, embd %d, ff %d, heads %d, kv "
                       "heads %d, context %d): expected positive sizes with heads dividing "
                       "embd and kv heads dividing heads",
                       path, hp->n_layer, hp->n_embd, hp->n_ff, hp->n_head, hp->n_head_kv,
                       hp->n_ctx_train);
    u = (uint32_t)(hp->n_embd / hp->n_head);
    if ((rc = opt_u32(f, "llama.attention.key_length", &u, err))) return rc;
    hp->head_dim = (int)u;
    uint32_t vlen = u;
    if ((rc = opt_u32(f, "llama.attention.value_length", &vlen, err))) return rc;
    if ((int)vlen != hp->head_dim || hp->head_dim < 2 || hp->head_dim % 2 || hp->head_dim > 1024)
        return kb_fail(err, KB_EINPUT, "%s: head dims key %d / value %u: expected equal and even",
                       path, hp->head_dim, vlen);
    u = (uint32_t)hp->head_dim;
    if ((rc = opt_u32(f, "llama.rope.dimension_count", &u, err))) return rc;
    hp->n_rot = (int)u;
    if (hp->n_rot != hp->head_dim)
        return kb_fail(err, KB_EINPUT, "%s: rope.dimension_count %d != head dim %d (partial "
                       "rotary embeddings are not supported)", path, hp->n_rot, hp->head_dim);
    /* required like the context (engine.md §2, llama.cpp); until 2026-12-06 1e-5 */
    if ((rc = req_f32(f, "llama.attention.layer_norm_rms_epsilon", &hp->rms_eps, err))) return rc;
    hp->rope_theta = 10000.0f;
    if ((rc = opt_f32(f, "llama.rope.freq_base", &hp->rope_theta, err))) return rc;
    if (!(hp->rms_eps > 0 && hp->rms_eps < 1))
        return kb_fail(err, KB_EINPUT, "%s: llama.attention.layer_norm_rms_epsilon: expected a "
                       "number in (0, 1), got %g", path, hp->rms_eps);
    if (!(hp->rope_theta > 1 && isfinite(hp->rope_theta)))
        return kb_fail(err, KB_EINPUT, "%s: llama.rope.freq_base: expected a finite number > 1, "
                       "got %g", path, hp->rope_theta);

    /* RoPE scaling: linear (factor f -> positions / f) or none; others refused. */
    float factor = 1.0f;
    if ((rc = opt_f32(f, "llama.rope.scale_linear", &factor, err))) return rc;
    if ((rc = opt_f32(f, "llama.rope.scaling.factor", &factor, err))) return rc;
    char *stype = NULL;
    rc = gguf_get_str(f, "llama.rope.scaling.type", &stype, err);
    if (rc > 1) return rc;
    if (rc == 0) {
        int ok = !strcmp(stype, "linear") || !strcmp(stype, "none");
        if (!strcmp(stype, "none")) factor = 1.0f;
        if (!ok) {
            rc = kb_fail(err, KB_EINPUT, "%s: rope scaling type '%s' is not supported (none, linear)",
                         path, stype);
            free(stype);
            return rc;
        }
        free(stype);
    }
    if (!(factor > 0) || factor > 1e6)
        return kb_fail(err, KB_EINPUT, "%s: rope scaling factor %g out of range", path, factor);
    hp->rope_freq_scale = 1.0f / factor;

    /* tensors */
    const gguf_tensor *te = gguf_find_tensor(f, "token_embd.weight");
    if (!te) return kb_fail(err, KB_EINPUT, "%s: missing tensor 'token_embd.weight'", path);
    uint32_t nv = te->n_dims == 2 ? (uint32_t)te->ne[1] : 0;
    if ((rc = opt_u32(f, "llama.vocab_size", &nv, err))) return rc;
    hp->n_vocab = (int)nv;
    if (hp->n_vocab < 1)
        return kb_fail(err, KB_EINPUT, "%s: vocabulary size must be positive", path);
    if ((rc = bind_weight(f, "token_embd.weight", hp->n_vocab, hp->n_embd, &m->tok_embd, err)))
        return rc;
    if (gguf_find_tensor(f, "output.weight")) {
        if ((rc = bind_weight(f, "output.weight", hp->n_vocab, hp->n_embd, &m->output, err)))
            return rc;
    } else {
        m->output = m->tok_embd;
        m->tied = 1;
    }
    if ((rc = bind_vec(f, "output_norm.weight", hp->n_embd, &m->output_norm, err))) return rc;
    int D = hp->head_dim, q_dim = hp->n_head * D, kv_dim = hp->n_head_kv * D;
    m->layers = KB_CALLOC((size_t)hp->n_layer, sizeof *m->layers);
    for (int l = 0; l < hp->n_layer; l++) {
        kb_layer_weights *L = &m->layers[l];
        char nm[96];
#define W(field, suffix, r, c)                                                     \
    snprintf(nm, sizeof nm, "blk.%d.%s.weight", l, suffix);                        \
    if ((rc = bind_weight(f, nm, r, c, &L->field, err))) return rc;
        W(wq, "attn_q", q_dim, hp->n_embd);
        W(wk, "attn_k", kv_dim, hp->n_embd);
        W(wv, "attn_v", kv_dim, hp->n_embd);
        W(wo, "attn_output", hp->n_embd, q_dim);
        W(gate, "ffn_gate", hp->n_ff, hp->n_embd);
        W(up, "ffn_up", hp->n_ff, hp->n_embd);
        W(down, "ffn_down", hp->n_embd, hp->n_ff);
#undef W
        snprintf(nm, sizeof nm, "blk.%d.attn_norm.weight", l);
        if ((rc = bind_vec(f, nm, hp->n_embd, &L->attn_norm, err))) return rc;
        snprintf(nm, sizeof nm, "blk.%d.ffn_norm.weight", l);
        if ((rc = bind_vec(f, nm, hp->n_embd, &L->ffn_norm, err))) return rc;
    }
    const float *rope_div = NULL;
    if (gguf_find_tensor(f, "rope_freqs.weight")) {
        if ((rc = bind_vec(f, "rope_freqs.weight", hp->n_rot / 2, &rope_div, err))) return rc;
        for (int i = 0; i < hp->n_rot / 2; i++)
            if (!(rope_div[i] > 0) || !isfinite(rope_div[i]))
                return kb_fail(err, KB_EINPUT, "%s: rope_freqs.weight[%d] = %g, expected > 0",
                               path, i, rope_div[i]);
    }
    rope_init(m, rope_div);

    rc = tokenizer_from_gguf(f, &m->tok, err);
    if (rc) return rc; /* its errors name the file */
    if (tokenizer_n_vocab(m->tok) > hp->n_vocab)
        return kb_fail(err, KB_EINPUT, "%s: tokenizer has %d tokens but the model only %d rows",
                       path, tokenizer_n_vocab(m->tok), hp->n_vocab);
    return 0;
}

/* ----------------------------------------------------------- synthetic --- */

typedef struct synth_preset {
    const char *name;
    kb_hparams hp;
    int tied;
    int llama3_rope; /* compute Llama-3.1 rope_freqs divisors */
} synth_preset;

static const synth_preset presets[] = {
    {"smollm2-135m", {30, 576, 9, 3, 64, 1536, 49152, 8192, 64, 1e-5f, 100000.0f, 1.0f}, 1, 0},
    {"llama3.1-8b", {32, 4096, 32, 8, 128, 14336, 128256, 131072, 128, 1e-5f, 500000.0f, 1.0f}, 0, 1},
};
const char *const kb_synthetic_presets[] = {"smollm2-135m", "llama3.1-8b", NULL};

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random Q4_1 (matrices) or Q8_0 (embeddings) blocks with small scales so
 * activations stay in a sane range; the values do not matter for speed. */
static void synth_fill(uint8_t *p, size_t bytes, uint32_t type, uint64_t seed) {
    size_t nblk = type == GGML_Q4_1 ? bytes / 20 : bytes / 34;
    size_t bsz = type == GGML_Q4_1 ? 20 : 34;
#pragma omp parallel for schedule(static)
    for (long long c = 0; c < (long long)((nblk + 4095) / 4096); c++) {
        uint64_t s = seed ^ ((uint64_t)c * 0x9e3779b97f4a7c15ull);
        size_t b0 = (size_t)c * 4096, b1 = KB_MIN(nblk, b0 + 4096);
        for (size_t b = b0; b < b1; b++) {
            uint8_t *blk = p + b * bsz;
            for (size_t o = 0; o < bsz; o += 8) {
                uint64_t r = splitmix(&s);
                memcpy(blk + o, &r, KB_MIN(8, bsz - o));
            }
            if (type == GGML_Q4_1) {
                uint16_t d = kb_f32_to_f16(0.01f), mn = kb_f32_to_f16(-0.08f);
                memcpy(blk, &d, 2);
                memcpy(blk + 2, &mn, 2);
            } else {
                uint16_t d = kb_f32_to_f16(0.001f);
                memcpy(blk, &d, 2);
            }
        }
    }
}

static const synth_preset *find_preset(const char *preset, kb_err *err) {
    for (size_t i = 0; i < KB_ARRAY_LEN(presets); i++)
        if (!strcmp(presets[i].name, preset)) return &presets[i];
    kb_fail(err, KB_EINPUT,
            "unknown synthetic model 'synthetic:%s' (known: synthetic:smollm2-135m, "
            "synthetic:llama3.1-8b)",
            preset);
    return NULL;
}

int model_synthetic_hparams(const char *spec, kb_hparams *hp, kb_err *err) {
    if (strncmp(spec, "synthetic:", 10)) return -1;
    const synth_preset *sp = find_preset(spec + 10, err);
    if (!sp) return KB_EINPUT;
    *hp = sp->hp;
    return 0;
}

int model_context_length(const char *spec, int *n_ctx, kb_err *err) {
    kb_hparams hp;
    int rc = model_synthetic_hparams(spec, &hp, err);
    if (rc >= 0) {
        if (!rc) *n_ctx = hp.n_ctx_train;
        return rc;
    }
    gguf_file *f;
    if ((rc = gguf_open(spec, &f, err))) return rc;
    uint32_t u;
    rc = context_length(f, &u, err); /* as load_gguf */
    gguf_close(f);
    if (!rc && (u < 1 || u > INT32_MAX)) rc = kb_fail(err, KB_EINPUT, "%s: context length %u", spec, u);
    if (!rc) *n_ctx = (int)u;
    return rc;
}

static int load_synthetic(const char *preset, kb_model *m, kb_err *err) {
    const synth_preset *sp = find_preset(preset, err);
    if (!sp) return KB_EINPUT;
    m->synthetic = 1;
    m->hp = sp->hp;
    m->tied = sp->tied;
    snprintf(m->name, sizeof m->name, "synthetic %s (random Q4_1 weights)", sp->name);
    snprintf(m->path, sizeof m->path, "synthetic:%s", sp->name);
    const kb_hparams *hp = &m->hp;
    int D = hp->head_dim, q_dim = hp->n_head * D, kv_dim = hp->n_head_kv * D;
    size_t emb = (size_t)hp->n_vocab * kb_row_bytes(GGML_Q8_0, hp->n_embd);
    size_t per_layer = ((size_t)q_dim + 2 * kv_dim) * kb_row_bytes(GGML_Q4_1, hp->n_embd) +
                       (size_t)hp->n_embd * kb_row_bytes(GGML_Q4_1, q_dim) +
                       2 * (size_t)hp->n_ff * kb_row_bytes(GGML_Q4_1, hp->n_embd) +
                       (size_t)hp->n_embd * kb_row_bytes(GGML_Q4_1, hp->n_ff);
    size_t norms = ((size_t)2 * hp->n_layer + 1) * hp->n_embd * sizeof(float);
    m->owned_bytes = emb * (m->tied ? 1 : 2) + per_layer * hp->n_layer + norms;
    uint8_t *mem = KB_AMALLOC(m->owned_bytes);
    m->owned = mem;
    uint8_t *p = mem;
    float *normv = (float *)p;
    for (size_t i = 0; i < ((size_t)2 * hp->n_layer + 1) * hp->n_embd; i++) normv[i] = 1.0f;
    p += norms;
    uint64_t seed = 12345;
#define TAKE(w, r, c, t)                                            \
    do {                                                            \
        (w).type = (t);                                             \
        (w).rows = (r);                                             \
        (w).cols = (c);                                             \
        (w).row_bytes = kb_row_bytes((t), (c));                     \
        (w).data = p;                                               \
        synth_fill(p, (size_t)(r) * (w).row_bytes, (t), seed++);    \
        p += (size_t)(r) * (w).row_bytes;                           \
    } while (0)
    TAKE(m->tok_embd, hp->n_vocab, hp->n_embd, GGML_Q8_0);
    if (m->tied) m->output = m->tok_embd;
    else TAKE(m->output, hp->n_vocab, hp->n_embd, GGML_Q8_0);
    m->output_norm = normv + (size_t)2 * hp->n_layer * hp->n_embd;
    m->layers = KB_CALLOC((size_t)hp->n_layer, sizeof *m->layers);
    for (int l = 0; l < hp->n_layer; l++) {
        kb_layer_weights *L = &m->layers[l];
        L->attn_norm = normv + (size_t)(2 * l) * hp->n_embd;
        L->ffn_norm = normv + (size_t)(2 * l + 1) * hp->n_embd;
        TAKE(L->wq, q_dim, hp->n_embd, GGML_Q4_1);
        TAKE(L->wk, kv_dim, hp->n_embd, GGML_Q4_1);
        TAKE(L->wv, kv_dim, hp->n_embd, GGML_Q4_1);
        TAKE(L->wo, hp->n_embd, q_dim, GGML_Q4_1);
        TAKE(L->gate, hp->n_ff, hp->n_embd, GGML_Q4_1);
        TAKE(L->up, hp->n_ff, hp->n_embd, GGML_Q4_1);
        TAKE(L->down, hp->n_embd, hp->n_ff, GGML_Q4_1);
    }
#undef TAKE
    float *div = NULL;
    if (sp->llama3_rope) { /* engine.md §2: factor 8, low 1, high 4, orig 8192 */
        int half = hp->n_rot / 2;
        div = KB_MALLOC((size_t)half * sizeof(float));
        const double factor = 8, low = 1, high = 4, orig = 8192;
        for (int i = 0; i < half; i++) {
            double w = pow((double)hp->rope_theta, -2.0 * i / hp->n_rot);
            double lambda = 2 * M_PI / w;
            if (lambda < orig / high) div[i] = 1.0f;
            else if (lambda > orig / low) div[i] = (float)factor;
            else {
                double s = (orig / lambda - low) / (high - low);
                div[i] = (float)(1.0 / ((1 - s) / factor + s));
            }
        }
    }
    rope_init(m, div);
    free(div);
    return 0;
}

/* ------------------------------------------------------------- common --- */

static size_t weight_bytes(const kb_weight *w) { return (size_t)w->rows * w->row_bytes; }

size_t model_decode_weight_bytes(const kb_model *m) {
    size_t b = weight_bytes(&m->output) + (size_t)m->hp.n_embd * 4; /* + output norm */
    b += m->tok_embd.row_bytes;                                       /* one embedding row */
    for (int l = 0; l < m->hp.n_layer; l++) {
        const kb_layer_weights *L = &m->layers[l];
        b += weight_bytes(&L->wq) + weight_bytes(&L->wk) + weight_bytes(&L->wv) +
             weight_bytes(&L->wo) + weight_bytes(&L->gate) + weight_bytes(&L->up) +
             weight_bytes(&L->down) + 2 * (size_t)m->hp.n_embd * 4;
    }
    return b;
}

size_t model_kv_bytes(const kb_model *m, long tokens, kb_dtype t) {
    return 2 * (size_t)m->hp.n_layer * m->hp.n_head_kv * m->hp.head_dim * kb_dtype_size(t) *
           (size_t)(tokens > 0 ? tokens : 0);
}

int model_check_memory(const kb_model *m, long tokens, double kv_copies, kb_dtype t, kb_err *err) {
    return model_check_memory_extra(m, tokens, kv_copies, 0, t, err);
}

int model_check_memory_extra(const kb_model *m, long tokens, double kv_copies, double extra, kb_dtype t,
                             kb_err *err) {
    size_t avail = machine_mem_available();
    if (!avail) return 0; /* unknown: do not guess */
    const kb_hparams *hp = &m->hp;
    size_t kv = model_kv_bytes(m, tokens, t);
    size_t act = (size_t)256 * (4 * (size_t)hp->n_embd + 3 * (size_t)hp->n_head * hp->head_dim +
                                2 * (size_t)hp->n_ff) * sizeof(float) +
                 (size_t)hp->n_vocab * sizeof(float);
    /* the weights (a GGUF file's, copied or still mapped, or synthetic ones)
     * are in memory already: not new memory here */
    size_t need = (size_t)((double)kv * kv_copies) + act + (size_t)(extra > 0 ? extra : 0);
    char sel[96] = "";
    if (extra > 0)
        snprintf(sel, sizeof sel, " + %.2f GiB of a method's selection buffers", extra / 1073741824.0);
    if (need > avail)
        return kb_fail(err, KB_EINPUT,
                       "a context of %ld tokens needs %.2f GiB (%.3g K/V cache%s of %.2f GiB in %s + "
                       "%.2f GiB of activations%s) but only %.2f GiB of memory is available: use a "
                       "shorter context, %sor a machine with more memory",
                       tokens, need / 1073741824.0, kv_copies, kv_copies != 1 ? "s" : "",
                       kv / 1073741824.0, kb_dtype_name(t), act / 1073741824.0, sel,
                       avail / 1073741824.0, t == KB_F32 ? "kv_dtype f16, " : "");
    return 0;
}

/* The x24 mat-vec mode (kernels/quant.h, the default where the build has
 * the kernels): the layer matrices and the output matrix of the types
 * kb_r16_regroups names (Q4_1 and Q8_0 with VNNI, Q4_1 on AVX2) with rows in
 * multiples of 16 are regrouped in place for the R16 kernels
 * (KB_LAYOUT_R16). Only memory the model owns and may write: a
 * GGUF's data copy (gguf_load_data; not when huge pages are off or memory
 * was short, then the weights stay in the read-only file map and in GGUF's
 * layout) or synthetic weights. A tied token embedding is the output
 * matrix, so it is regrouped with it (embed() reads its row through
 * kb_r16_dequant_ref); an untied one keeps GGUF's layout. */
static void repack_one(kb_weight *w) {
    if (!kb_r16_regroups(w->type) || w->rows % 16 || w->layout != KB_LAYOUT_ROWS) return;
    kb_r16_repack(w->type, (void *)(uintptr_t)w->data, w->row_bytes, w->rows);
    w->layout = KB_LAYOUT_R16;
}

static void repack_layers(kb_model *m) {
    if (kb_matvec_mode() != KB_MATVEC_X24 || !kb_r16_available()) return;
    if (!m->synthetic && !(m->gguf && m->gguf->data_copy)) return;
    for (int l = 0; l < m->hp.n_layer; l++) {
        kb_layer_weights *L = &m->layers[l];
        kb_weight *w[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
        for (int i = 0; i < 7; i++) repack_one(w[i]);
    }
    repack_one(&m->output);
    if (m->tied) m->tok_embd.layout = m->output.layout;
}

int model_r16_matrices(const kb_model *m) {
    int n = m->output.layout == KB_LAYOUT_R16;
    for (int l = 0; l < m->hp.n_layer; l++) {
        const kb_layer_weights *L = &m->layers[l];
        const kb_weight *w[7] = {&L->wq, &L->wk, &L->wv, &L->wo, &L->gate, &L->up, &L->down};
        for (int i = 0; i < 7; i++) n += w[i]->layout == KB_LAYOUT_R16;
    }
    return n;
}

const char *model_weights_where(const kb_model *m) {
    return m->synthetic ? "synthetic" : m->gguf && m->gguf->data_copy ? "copy" : "map";
}

int model_matvec_mode(const kb_model *m) {
    int mode = kb_matvec_mode();
    return mode == KB_MATVEC_X24 && !model_r16_matrices(m) ? KB_MATVEC_EXACT : mode;
}

int model_load(const char *spec, kb_model **out, kb_err *err) {
    kb_model *m = KB_CALLOC(1, sizeof *m);
    int rc;
    if (!strncmp(spec, "synthetic:", 10)) rc = load_synthetic(spec + 10, m, err);
    else rc = load_gguf(spec, m, err);
    if (rc) {
        model_free(m);
        return rc;
    }
    repack_layers(m);
    m->weight_bytes = model_decode_weight_bytes(m);
    *out = m;
    return 0;
}

void model_free(kb_model *m) {
    if (!m) return;
    if (m->tok) tokenizer_free(m->tok);
    if (m->gguf) gguf_close(m->gguf);
    kb_afree(m->owned);
    free(m->layers);
    free(m->inv_freq);
    free(m);
}
