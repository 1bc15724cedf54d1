/* cli.c - option-value helpers shared by the subcommands. */
#include "harness/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const char *cli_model_path(const char *opt) {
    if (opt && *opt) return opt;
    const char *env = getenv("KVBENCH_MODEL");
    if (env && *env) return env;
    return "models/SmolLM2-135M-Instruct.Q4_1.gguf";
}

int cli_parse_int(const char *cmd, const char *opt, const char *s, long lo, long hi, long *out) {
    char *end = NULL;
    errno = 0;
    long v = s ? strtol(s, &end, 10) : 0;
    if (!s || !*s || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "kvbench %s: --%s expects an integer in [%ld, %ld], got '%s'\n", cmd, opt,
                lo, hi, s ? s : "");
        return 2;
    }
    *out = v;
    return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi,
                     double *out) {
    char *end = NULL;
    errno = 0;
    double v = s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "kvbench %s: --%s expects a number in [%g, %g], got '%s'\n", cmd, opt, lo,
                hi, s ? s : "");
        return 2;
    }
    *out = v;
    return 0;
}
