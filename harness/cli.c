/* cli.c - option-value helpers shared by the subcommands. */
#include "harness/cli.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

const char *cli_model_path(const char *opt) {
    if (opt && *opt) return opt;
    const char *env = getenv("KVBENCH_MODEL");
    if (env && *env) return env;
    static const char *rel = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    if (access(rel, R_OK) == 0) return rel;
    /* the checkout the binary was built in: <checkout>/<build dir>/kvbench */
    static char buf[4096];
    char exe[2048];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = 0;
            snprintf(buf, sizeof buf, "%s/../%s", exe, rel);
            if (access(buf, R_OK) == 0) return buf;
        }
    }
    return rel;
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

/* digits only (no sign, no space), at most 9 of them */
static int digits(const char *s, const char **end, long *v) {
    const char *p = s;
    *v = 0;
    while (*p >= '0' && *p <= '9' && p - s < 9) *v = *v * 10 + (*p++ - '0');
    *end = p;
    return p > s && !(*p >= '0' && *p <= '9');
}

int cli_parse_shard(const char *s, int *i, int *n) {
    const char *p;
    long a, b;
    if (!s || !digits(s, &p, &a) || *p != '/' || !digits(p + 1, &p, &b) || *p || b < 1 ||
        b > KB_MAX_SHARDS || a >= b)
        return -1;
    *i = (int)a;
    *n = (int)b;
    return 0;
}
