/* cli.c - option-value helpers shared by the subcommands. */
#include "harness/cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kernels/kb_base.h"

const char *cli_model_path(const char *opt) {
    if (opt) return opt; /* "" too: gguf_open refuses it, rather than the default model running */
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
    int blank = !s || !*s || isspace((unsigned char)*s); /* strto* would skip a leading space */
    long v = blank ? 0 : strtol(s, &end, 10);
    if (blank || *end || errno || v < lo || v > hi) {
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
    int blank = !s || !*s || isspace((unsigned char)*s); /* strto* would skip a leading space */
    double v = blank ? 0 : strtod(s, &end);
    if (blank || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "kvbench %s: --%s expects a number in [%g, %g], got '%s'\n", cmd, opt, lo,
                hi, s ? s : "");
        return 2;
    }
    *out = v;
    return 0;
}

int cli_parse_int_list(const char *s, long lo, long hi, int32_t **out, int *n, char *why, size_t why_n) {
    static const char sep[] = " \t,\n\r";
    int cap = 16, k = 0;
    int32_t *v = KB_MALLOC((size_t)cap * sizeof *v);
    while (*s) {
        s += strspn(s, sep);
        if (!*s) break;
        char *end;
        errno = 0;
        long x = strtol(s, &end, 10);
        if (end == s || errno || x < lo || x > hi || !strchr(sep, *end)) {
            int tl = (int)strcspn(s, sep); /* the whole item */
            snprintf(why, why_n, "expected integers in [%ld, %ld], got '%.*s'", lo, hi, tl > 40 ? 40 : tl, s);
            free(v);
            return 2;
        }
        if (k == cap) v = KB_REALLOC(v, (size_t)(cap *= 2) * sizeof *v);
        v[k++] = (int32_t)x;
        s = end;
    }
    *out = v;
    *n = k;
    return 0;
}

int cli_check_param_key(const char *opt, const char *kv, kb_err *err) {
    static const char *const own[] = {"method", "budget", "budgets"};
    size_t kl = strcspn(kv, "=");
    for (size_t i = 0; i < KB_ARRAY_LEN(own); i++)
        if (kl == strlen(own[i]) && !strncmp(kv, own[i], kl))
            return kb_fail(err, KB_EINPUT, "%s %s: give the method with --method and the budget with --budget",
                           opt, kv);
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

int cli_once(const char *cmd, int c, const struct option *opts, const char *const *repeatable, kb_cli_seen *seen) {
    const struct option *o = NULL;
    for (const struct option *x = opts; x->name && !o; x++)
        if (x->val == c && !x->flag) o = x;
    if (!o || o->has_arg == no_argument) return 0; /* '?', ':' and flags */
    for (const char *const *r = repeatable; r && *r; r++)
        if (!strcmp(*r, o->name)) return 0;
    for (int i = 0; i < seen->n; i++)
        if (seen->val[i] == c) {
            fprintf(stderr, "kvbench %s: --%s given twice (the last would silently replace the first): give it "
                    "once\n", cmd, o->name);
            return 2;
        }
    if (seen->n < (int)(sizeof seen->val / sizeof seen->val[0])) seen->val[seen->n++] = c;
    return 0;
}

int cli_check_repeated_keys(const char *opt, const char *const *kv, int n, kb_err *err) {
    for (int i = 0; i < n; i++) {
        const char *ei = strchr(kv[i], '=');
        if (!ei) continue;
        size_t li = (size_t)(ei - kv[i]);
        for (int j = 0; j < i; j++) {
            const char *ej = strchr(kv[j], '=');
            if (ej && (size_t)(ej - kv[j]) == li && !memcmp(kv[i], kv[j], li))
                return kb_fail(err, KB_EINPUT, "%s %.*s given twice ('%s', then '%s': the second would silently "
                               "replace the first): give it once", opt, (int)li, kv[i], kv[j], kv[i]);
        }
    }
    return 0;
}
