/* main.c - the kvbench binary: dispatches to one subcommand. */
#include <stdio.h>
#include <string.h>

#include "harness/cli.h"
#include "harness/version.h"

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
};

static void usage(FILE *f) {
    fprintf(f, "kvbench %s - KV-cache compression benchmark harness\n\n", KVBENCH_VERSION);
    fprintf(f, "usage: kvbench <command> [options]   (kvbench <command> --help)\n\ncommands:\n");
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        fprintf(f, "  %-9s %s\n", subcommands[i].name, subcommands[i].help);
}

int main(int argc, char **argv) {
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("kvbench %s\n", KVBENCH_VERSION);
        return 0;
    }
    for (size_t i = 0; i < sizeof subcommands / sizeof subcommands[0]; i++)
        if (!strcmp(argv[1], subcommands[i].name)) return subcommands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "kvbench: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
