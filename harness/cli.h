/* cli.h - the kvbench subcommands (one file each: harness/cmd_<name>.c).
 * Each returns the process exit code: 0 ok, 1 runtime failure, 2 bad usage or
 * bad input. Errors go to stderr as "kvbench <cmd>: <message>". */
#ifndef KB_CLI_H
#define KB_CLI_H

#include <stddef.h>
#include <stdint.h>

int cmd_info(int argc, char **argv);
int cmd_generate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_replay(int argc, char **argv);
int cmd_score(int argc, char **argv);
int cmd_sweep(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_merge(int argc, char **argv);
int cmd_prompts(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_logits(int argc, char **argv);

/* Shared helpers for the subcommands (harness/cli.c). */
/* The model to use: --model/-m value (an empty one is returned as such and
 * refused by gguf_open), else $KVBENCH_MODEL (unless empty), else the default
 * models/SmolLM2-135M-Instruct.Q4_1.gguf. */
const char *cli_model_path(const char *opt);
/* Strict number parsing for option values: whole string must parse and lie in
 * [lo, hi], with no space before or after (strtol and strtod would skip a leading
 * one; a leading '+' is taken); otherwise prints "kvbench <cmd>: --<opt> expects
 * ..." and returns 2. */
int cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out);
int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi,
                     double *out);
/* A list of integers in [lo, hi] separated by spaces, tabs, commas or line
 * ends ("12 7,99"; none is an empty list): 0 with a malloc'ed *out, or 2
 * with why = "expected integers in [lo, hi], got 'ITEM'" (the whole item,
 * at most 40 bytes of it). */
int cli_parse_int_list(const char *s, long lo, long hi, int32_t **out, int *n, char *why, size_t why_n);
/* A method parameter given on the command line as KEY=VALUE (generate --set,
 * replay --param) whose KEY is method, budget or budgets: those have options
 * of their own (--method, --budget), and a parameter that overrode them
 * would make the command run another cell than the one its options name.
 * Returns 2 with "OPT KEY=VALUE: give the method with --method and the
 * budget with --budget" in err for those keys, else 0. */
struct kb_err;
int cli_check_param_key(const char *opt, const char *kv, struct kb_err *err);
/* "I/N" with 0 <= I < N <= KB_MAX_SHARDS, digits only: 0 on success, -1
 * otherwise (the caller names the option or file). */
#define KB_MAX_SHARDS 100000
int cli_parse_shard(const char *s, int *i, int *n);
/* An option that takes a value, given twice: getopt would keep the last one
 * without a word (`--budget 256 ... --budget 1024` runs 1024). Call with each
 * getopt_long result c: returns 2 after printing "kvbench <cmd>: --NAME
 * given twice (...)" when c's option takes a value, was seen before and is
 * not in `repeatable` (long names, NULL-terminated; NULL: none), else 0.
 * seen: a zeroed kb_cli_seen, one per parse. Flags (no value) may repeat. */
/* KEY=VALUE options (sweep --set, generate --set, replay --param) whose KEY
 * (the bytes before the first '=') appears twice: the second would replace
 * the first silently. Returns 2 with "OPT KEY given twice (...)" in err,
 * else 0 (items without '=' are left to the caller's own check). */
int cli_check_repeated_keys(const char *opt, const char *const *kv, int n, struct kb_err *err);
typedef struct kb_cli_seen {
    int val[64], n;
} kb_cli_seen;
struct option;
int cli_once(const char *cmd, int c, const struct option *opts, const char *const *repeatable, kb_cli_seen *seen);

#endif
