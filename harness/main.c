/* main.c - the kvbench binary: dispatches to one subcommand. */
#include <cblas.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness/cli.h"
#include "harness/machine.h"
#include "harness/version.h"
#include "kernels/kernels.h"
#include "kernels/quant.h"

typedef struct {
    const char *name;
    int (*fn)(int, char **);
    const char *help;
} subcommand;

static const subcommand subcommands[] = {
    {"sweep", cmd_sweep, "run a benchmark sweep from a JSON config (the main job)"},
    {"generate", cmd_generate, "generate from one prompt (greedy, streamed)"},
    {"info", cmd_info, "print a GGUF file's metadata and tensors"},
    {"replay", cmd_replay, "run a method on saved Q/K/V traces (.npy)"},
    {"score", cmd_score, "score predictions in a JSONL file with a metric"},
    {"bench", cmd_bench, "measure engine and method speed, memory and traffic"},
    {"plot", cmd_plot, "draw a run's figures with gnuplot"},
    {"merge", cmd_merge, "join the shards of a sweep into one run"},
    {"prompts", cmd_prompts, "write the samples a config's tasks generate, as JSONL"},
    {"tokenize", cmd_tokenize, "print token ids of text (or --decode ids) with a model's tokenizer"},
    {"logits", cmd_logits, "next-token logits of a token sequence as .npy (engine checks)"},
};

static void usage(FILE *f) {
    fprintf(f, "kvbench %s - KV-cache compression benchmark harness\n\n", KVBENCH_VERSION);
    fprintf(f, "usage: kvbench <command> [options]   (kvbench <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-9s %s\n", subcommands[i].name, subcommands[i].help);
    fprintf(f, "\n  --version print the version and the commit it was built from; help (or --help) prints this\n");
}

char *openblas_get_corename(void);

/* OpenBLAS (DYNAMIC_ARCH) picks its kernels from CPUID at load time; in some
 * virtual machines it sees an unknown CPU and falls back to SSE3 "Prescott"
 * kernels, 5-8x slower. If this CPU has AVX-512 or AVX2 but OpenBLAS chose a
 * core without AVX2, re-execute once with OPENBLAS_CORETYPE set (the variable
 * is read only when the library loads). */
static void ensure_blas_kernels(char **argv) {
    if (getenv("OPENBLAS_CORETYPE")) return;
    static const char *const good[] = {"Haswell", "SkylakeX", "Cooperlake", "SapphireRapids",
                                       "Zen", "Skylake", NULL};
    const char *cur = openblas_get_corename();
    for (int i = 0; good[i]; i++)
        if (cur && !strcasecmp(cur, good[i])) return;
    __builtin_cpu_init();
    const char *core = NULL;
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))
        core = "SkylakeX";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        core = "Haswell";
    if (!core) return;
    setenv("OPENBLAS_CORETYPE", core, 1);
    execv("/proc/self/exe", argv);
    /* exec failed: carry on with the slow kernels */
}

/* The environment variables that change what a command does (README.md's
 * table), checked once before any command runs: a value outside the accepted
 * ones is refused (exit 2, nothing written) rather than read as something
 * else later. Each check lives next to where its variable is read, with the
 * one list of its values. Paths ($KVBENCH_MODEL, $KVBENCH_CONFIGS,
 * $KVBENCH_PLOTS, $TMPDIR) are checked where they are used. */
static int check_env(void) {
    size_t lim;
    kb_err err = {0};
    int rc = machine_mem_limit(&lim, &err);
    if (!rc) rc = kb_hugepages_check_env(&err);
    if (!rc) rc = kernels_check_env(&err);
    if (!rc) rc = kb_matvec_check_env(&err);
    if (rc) fprintf(stderr, "kvbench: %s\n", err.msg);
    return rc;
}

/* What a command printed on stdout must have reached it: stdout is buffered,
 * so a write that fails (a full disk, a file-size limit) usually fails at the
 * flush after the command returned, which exit() would ignore and report
 * success. Checked once here for every command (and --help, --version): the
 * flush's errno, or the stream's error flag for an earlier failed write (a
 * streaming command's flush), is exit 1 with the command named. A command
 * that already failed keeps its own exit status. */
static int stdout_done(const char *cmd, int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0;
    int e = errno;
    if (!bad && !ferror(stdout)) return rc;
    if (bad && e)
        fprintf(stderr, "kvbench%s%s: writing the output failed: %s\n", cmd ? " " : "", cmd ? cmd : "",
                strerror(e));
    else
        fprintf(stderr, "kvbench%s%s: writing the output failed\n", cmd ? " " : "", cmd ? cmd : "");
    return rc ? rc : 1;
}

int main(int argc, char **argv) {
    ensure_blas_kernels(argv);
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return stdout_done(NULL, 0);
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kvbench %s (commit %s)\n", kb_version(), kb_git_desc());
        return stdout_done(NULL, 0);
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name)) {
            if (check_env()) return 2;
            return stdout_done(subcommands[i].name, subcommands[i].fn(argc - 1, argv + 1));
        }
    fprintf(stderr, "kvbench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
