/* model.h - a Llama-family model (GGUF file or synthetic) and its forward pass.
 *
 * The forward pass never computes attention itself: per layer it hands the
 * post-RoPE Q, K, V to a kb_attn_backend (methods/backend.h). RoPE rotates
 * adjacent channel pairs (x[2i], x[2i+1]) as llama.cpp's "normal" mode does
 * for llama-arch GGUF files (whose Q/K rows the converter permuted). */
#ifndef KB_MODEL_H
#define KB_MODEL_H

#include "harness/engine/gguf.h"
#include "harness/engine/tokenizer.h"
#include "kernels/matmul.h"
#include "methods/backend.h"

typedef struct kb_hparams {
    int n_layer, n_embd, n_head, n_head_kv, head_dim, n_ff, n_vocab, n_ctx_train, n_rot;
    float rms_eps;
    float rope_theta;      /* base frequency */
    float rope_freq_scale; /* 1 / linear scaling factor */
} kb_hparams;

typedef struct kb_layer_weights {
    const float *attn_norm;   /* [n_embd] */
    const float *ffn_norm;    /* [n_embd] */
    kb_weight wq, wk, wv, wo; /* [Hq*D x n_embd], [Hkv*D x n_embd] x2, [n_embd x Hq*D] */
    kb_weight gate, up, down; /* [n_ff x n_embd] x2, [n_embd x n_ff] */
} kb_layer_weights;

typedef struct kb_model {
    kb_hparams hp;
    char name[256];            /* general.name (a longer one ends in "...") or the synthetic preset */
    char path[1024];           /* file path or "synthetic:<preset>" */
    int synthetic;             /* 1: random weights generated in memory (never for accuracy) */
    kb_weight tok_embd;        /* [n_vocab x n_embd] */
    kb_weight output;          /* [n_vocab x n_embd]; = tok_embd when tied */
    int tied;                  /* output shares token_embd.weight */
    const float *output_norm;  /* [n_embd] */
    kb_layer_weights *layers;  /* [n_layer] */
    float *inv_freq;           /* [n_rot/2] theta^(-2i/n_rot) * freq_scale / rope_freqs[i] */
    gguf_file *gguf;           /* NULL for synthetic models */
    kb_tokenizer *tok;         /* NULL for synthetic models */
    void *owned;               /* synthetic weight memory */
    size_t weight_bytes;       /* bytes of all weights (for traffic accounting) */
    size_t owned_bytes;
} kb_model;

/* spec: a GGUF path or "synthetic:<preset>" (smollm2-135m, llama3.1-8b). */
int model_load(const char *spec, kb_model **out, kb_err *err);
void model_free(kb_model *m);
/* A synthetic model's hyperparameters without building its weights (a
 * check before slow work): 0, KB_EINPUT for an unknown preset (the message
 * model_load gives), or -1 when spec is not "synthetic:...". */
int model_synthetic_hparams(const char *spec, kb_hparams *hp, kb_err *err);
/* The model's context length (n_ctx_train) from a synthetic preset or a GGUF
 * file's header, without loading the weights. */
int model_context_length(const char *spec, int *n_ctx, kb_err *err);
/* Names of the synthetic presets, NULL-terminated. */
extern const char *const kb_synthetic_presets[];
/* Bytes of weights one decode step reads (every layer matrix + output + norms). */
size_t model_decode_weight_bytes(const kb_model *m);
/* What the loader did for the mat-vec mode (run.json records it): the layer
 * and output matrices it regrouped to KB_LAYOUT_R16 (a tied embedding counts
 * once, as the output); where the weights are ("synthetic": generated in
 * memory, "copy": a GGUF file's data copied to memory kvbench may write,
 * "map": read from the file map, as when KVBENCH_HUGEPAGES is off, the data
 * section is under 4 MiB or memory was short); and the mode decode runs:
 * kb_matvec_mode(), except KB_MATVEC_EXACT when x24 regrouped nothing (every
 * matrix in GGUF's layout runs the exact kernels). */
int model_r16_matrices(const kb_model *m);
const char *model_weights_where(const kb_model *m);
int model_matvec_mode(const kb_model *m);

/* Bytes of K+V for `tokens` tokens of every layer and KV head. */
size_t model_kv_bytes(const kb_model *m, long tokens, kb_dtype t);
/* Checks, before allocating, that `kv_copies` K/V caches of `tokens` tokens
 * (a fraction counts part of one; plus activations) fit in the
 * available memory; otherwise KB_EINPUT with a message giving what it would
 * need and what is available. */
int model_check_memory(const kb_model *m, long tokens, double kv_copies, kb_dtype t, kb_err *err);
/* The same with `extra` more bytes (a method's selection buffers:
 * methodset_select_bytes), named in the message when not 0. */
int model_check_memory_extra(const kb_model *m, long tokens, double kv_copies, double extra, kb_dtype t,
                             kb_err *err);

/* Scratch and timers of a forward pass. */
typedef struct kb_forward {
    const kb_model *m;
    int max_batch;
    float *x, *xb, *q, *k, *v, *att, *hb, *hb2; /* activations, [max_batch][...] */
    float *logits;                               /* [n_vocab] (last token) */
    double t_attn;                               /* seconds spent in attention (backend) */
    double t_proj;                               /* seconds in weight projections (matmul) */
    double proj_flops;                           /* 2 * MACs of those projections */
    double t_total;                              /* seconds spent in the forward */
    int rope_pos, rope_D;                        /* position of rope_cs (-1: none) */
    float rope_cs[1024];                         /* cos, sin of pos * inv_freq[i], i < D/2 (D <= 1024) */
} kb_forward;

kb_forward *forward_new(const kb_model *m, int max_batch);
void forward_free(kb_forward *f);

/* Runs n tokens at positions pos0.. through the model in batches of at most
 * max_batch, attending through be->prefill. If logits_all is non-NULL it
 * receives [n][n_vocab] logits (tests); f->logits gets the last token's
 * logits when want_last is set. */
int forward_prefill(kb_forward *f, const int32_t *tokens, int n, int pos0, kb_attn_backend *be,
                    float *logits_all, int want_last, kb_err *err);
/* One token through be->decode; logits in f->logits. */
void forward_decode(kb_forward *f, int32_t token, int pos, kb_attn_backend *be);

/* Greedy choice: index of the largest logit, ties to the lower index. */
int32_t logits_argmax(const float *logits, int n);

#endif
