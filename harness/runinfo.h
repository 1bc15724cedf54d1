/* runinfo.h - run.json, the manifest that makes every number traceable:
 * resolved config, kvbench version and git commit, model file and sha256,
 * tokenizer and chat format, machine, threads, KV type, shard, times, status. */
#ifndef KB_RUNINFO_H
#define KB_RUNINFO_H

#include <cjson/cJSON.h>

#include "harness/config.h"
#include "harness/driver.h"
#include "harness/engine/model.h"

typedef struct kb_runinfo {
    cJSON *j;
} kb_runinfo;

void runinfo_init(kb_runinfo *r, const kb_sweep_config *c, const kb_model *m,
                  const char *model_spec, const kb_sweep_opts *o);
/* KB_EINPUT if the run.json at path was made by a different config, model
 * or shard (the error says which). */
int runinfo_check_same(const kb_runinfo *r, const char *path, kb_err *err);
/* NULL when run.json objects a and b were written by one build, else what
 * differs: "another commit" (git_commit), or, when that commit names a
 * modified tree ("-dirty") or none ("unknown"), whose builds share one commit
 * string, "another build of the modified tree ..." (build_sha256, the sha256
 * of the binary). Used by --resume and merge. */
const char *runinfo_other_build(const cJSON *a, const cJSON *b);
/* A --resume of the run whose run.json is at path, which holds rows rows:
 * the sessions that wrote them (its earlier_sessions, then itself: commit,
 * version, machine, session start and end, status, rows in samples.csv when
 * it ended) become this run.json's earlier_sessions, so that rows written by
 * another build or machine stay traceable. */
void runinfo_add_earlier(kb_runinfo *r, const char *path, long rows);
/* Records where the samples' text came from (wording files, corpora, data
 * files: the distinct kb_sample.provenance strings) and the sample count. */
/* data: the sample count, the plan's fingerprint (samples_fingerprint) and
 * where the samples came from */
void runinfo_set_data(kb_runinfo *r, const char *const *provenance, int n, int n_samples,
                      const char *fingerprint);
int runinfo_write(kb_runinfo *r, const char *path, const char *status, kb_err *err);
void runinfo_free(kb_runinfo *r);

/* The model's sha256 ("synthetic" for synthetic models), cached next to the
 * file as <file>.kvbench-sha256 keyed by size, mtime and ctime (ns) and
 * inode; a cache that does not match the file is not used. */
int model_sha256(const char *spec, char hex[65], kb_err *err);
/* The same, or "unknown" when the file cannot be read. */
void model_sha256_text(const char *spec, char hex[65]);
/* A JSON object describing model, tokenizer and machine (also used by bench).
 * The machine's "matvec" is matvec_used, the mode decode ran with the model
 * loaded (model_matvec_mode), or the one asked for when NULL (no model);
 * "matvec_requested" the one asked for ($KVBENCH_MATVEC or the build's
 * default), "hugepages" kb_hugepages_on(). */
cJSON *runinfo_model_json(const kb_model *m, const char *spec, const char *sha);
cJSON *runinfo_machine_json(const char *matvec_used);
/* The sha256 of this binary (run.json's build_sha256), or "unknown". */
void runinfo_build_sha256(char hex[65]);

#endif
