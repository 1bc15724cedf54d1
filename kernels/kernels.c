/* kernels.c - the backend tables (kernels.h) and the run-time choice.
 * Dense attention entries live in kernels/{ref,cpu}/attn_*.c, selection
 * entries in kernels/{ref,cpu}/select_*.c. */
#include "kernels/kernels.h"

#include <stdlib.h>
#include <string.h>

#include "kernels/attn_impl.h"
#include "kernels/select.h"

const kb_kernels kb_kernels_ref = {
    .name = "ref",
    .attn_dense = kb_ref_attn_dense,
    .attn_gather = kb_ref_attn_gather,
    .attn_causal = kb_ref_attn_causal,
    .qk_scores = kb_ref_qk_scores,
    .snapkv_scores = kb_ref_snapkv_scores,
    .pool1d = kb_ref_pool1d,
    .page_minmax = kb_ref_page_minmax,
    .quest_scores = kb_ref_quest_scores,
    .hybrid_scores = kb_ref_hybrid_scores,
    .topk = kb_ref_topk,
    .topk_pages = kb_ref_topk_pages,
};

const kb_kernels kb_kernels_cpu = {
    .name = "cpu",
    .attn_dense = kb_cpu_attn_dense,
    .attn_gather = kb_cpu_attn_gather,
    .attn_causal = kb_cpu_attn_causal,
    .qk_scores = kb_cpu_qk_scores,
    .snapkv_scores = kb_cpu_snapkv_scores,
    .pool1d = kb_cpu_pool1d,
    .page_minmax = kb_cpu_page_minmax,
    .quest_scores = kb_cpu_quest_scores,
    .hybrid_scores = kb_cpu_hybrid_scores,
    .topk = kb_cpu_topk,
    .topk_pages = kb_cpu_topk_pages,
    .attn_dense_heads = kb_cpu_attn_dense_heads,
};

/* KVBENCH_KERNELS: unset or empty (cpu), "cpu" or "ref", nothing else. */
const kb_kernels *kernels_get(void) {
    const char *e = getenv("KVBENCH_KERNELS");
    if (e && !strcmp(e, kb_kernels_ref.name)) return &kb_kernels_ref;
    return &kb_kernels_cpu;
}

int kernels_check_env(kb_err *err) {
    const char *e = getenv("KVBENCH_KERNELS");
    if (!e || !*e || !strcmp(e, kb_kernels_cpu.name) || !strcmp(e, kb_kernels_ref.name)) return 0;
    return kb_env_fail(err, "KVBENCH_KERNELS", e, "'cpu' (the default) or 'ref' (the reference kernels)");
}
