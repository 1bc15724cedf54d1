/* rocketkv.h - what rocketkv_mt.c reuses from rocketkv.c: validation and the
 * budget split + stage-1 configuration (methods.md §1.1, §2). */
#ifndef KB_ROCKETKV_H
#define KB_ROCKETKV_H

#include "methods/snapkv_core.h"

/* budget >= 16, window 32, kernel 63, max pooling, alpha auto by default. */
int rocket_validate(kb_method_params *p, const char *who, kb_err *err);
/* §1.1 split with the config's alpha, page_size and r overrides; cfg gets
 * the window, prompt_budget, group_sum and pooling (kparams left to the caller). */
int rocket_budget(const kb_method_params *p, const kb_method_ctx *ctx, const char *who,
                  kb_budget *b, kb_snap_cfg *cfg, kb_err *err);

#endif
