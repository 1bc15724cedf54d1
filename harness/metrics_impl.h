/* metrics_impl.h - building blocks shared by harness/metrics.c and
 * harness/metrics_seq.c (not part of the public metrics interface). */
#ifndef KB_METRICS_IMPL_H
#define KB_METRICS_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "harness/textnorm.h"

/* Token interning: maps code-point slices to small integer ids so that
 * sequence algorithms compare ints. */
typedef struct tok_intern {
    uint32_t *keys;   /* concatenated code points of all distinct tokens */
    size_t nkeys, capkeys;
    size_t *off, *len; /* [n] slice of keys for token id i */
    uint64_t *hash;    /* [n] */
    int n, cap;
    int *slots;        /* open addressing table of ids (-1 empty), size nslots */
    int nslots;
} tok_intern;

void intern_init(tok_intern *t);
void intern_free(tok_intern *t);
int intern_id(tok_intern *t, const uint32_t *v, size_t n);

/* Python difflib.SequenceMatcher(None, a, b).ratio(), autojunk on. */
double difflib_ratio(const uint32_t *a, size_t na, const uint32_t *b, size_t nb);
/* Python `rouge` 1.0.1: Rouge().get_scores([hyp], [ref], avg=True)["rouge-l"]["f"],
 * and 0 where that call raises (empty hypothesis or reference). */
double rouge_l_f(const char *hyp, const char *ref);
/* rouge_score 0.1.2: RougeScorer(["rougeLsum"]).score(target, prediction).fmeasure
 * with the default tokenizer and no stemming (as evaluate's "rouge" uses it). */
double rouge_lsum_f(const char *target, const char *prediction);
/* nltk sentence_bleu([ref_tokens], hyp_tokens, smoothing method4) with tokens
 * = re.split(r"\s+", text.strip()). */
double bleu_method4(const char *hyp, const char *ref);
/* RepoQA's sanitize_output without tree-sitter: the first fenced code block
 * (```lang ... ```) of the stripped output, or the stripped output. Malloc'ed. */
char *repoqa_sanitize(const char *output);

#endif
