/* cmd_sweep.c - kvbench sweep CONFIG.json: the main job (driver.c). */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/atomic.h"
#include "harness/cli.h"
#include "harness/config.h"
#include "harness/driver.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench sweep CONFIG.json [options]\n"
            "  -m, --model PATH      model (default: the config's, $KVBENCH_MODEL, or the default model)\n"
            "  -o, --out DIR         run directory (default results/<config name>)\n"
            "      --resume          continue a killed run in DIR (same config and build required)\n"
            "      --force           overwrite DIR, or resume despite a changed config or build\n"
            "      --shard I/N       run only samples i with i %% N == I, 0 <= I < N <= 100000 (join\n"
            "                        with kvbench merge)\n"
            "      --set KEY=VALUE   override a top-level config key (JSON value), repeatable\n"
            "      --threads N       threads (default: the config's, else all cores)\n"
            "      --dump-trace L    write layer L's Q/K/V traces of every sample (kvbench replay)\n"
            "      --dry-run         print the plan and exit\n"
            "      --reprefill       prefill again before every cell (measures what prefill\n"
            "                        sharing saves; the tables are the same)\n"
            "Writes DIR/samples.csv, summary.csv, run.json (docs/OUTPUTS.md).\n");
}

int cmd_sweep(int argc, char **argv) {
    static const struct option opts[] = {
        {"model", 1, 0, 'm'}, {"out", 1, 0, 'o'},        {"resume", 0, 0, 'r'},
        {"force", 0, 0, 'f'}, {"shard", 1, 0, 's'},      {"set", 1, 0, 'S'},
        {"threads", 1, 0, 'j'}, {"dump-trace", 1, 0, 'd'}, {"dry-run", 0, 0, 'n'}, {"reprefill", 0, 0, 'R'},
        {"help", 0, 0, 'h'},  {0, 0, 0, 0}};
    kb_sweep_opts o;
    memset(&o, 0, sizeof o);
    o.dump_trace_layer = -1;
    char **sets = calloc((size_t)argc + 1, sizeof *sets);
    int c, nsets = 0;
    long v;
    optind = 1;
    static const char *const repeatable[] = {"set", NULL};
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "m:o:h", opts, NULL)) != -1) {
        if (cli_once("sweep", c, opts, repeatable, &seen)) {
            free(sets);
            return 2;
        }
        switch (c) {
        case 'm':
            if (!*optarg) { /* not the config's model nor the default one */
                fprintf(stderr, "kvbench sweep: --model: an empty path, expected a GGUF file or synthetic:PRESET\n");
                free(sets);
                return 2;
            }
            o.model = optarg;
            break;
        case 'o': o.out_dir = optarg; break;
        case 'r': o.resume = 1; break;
        case 'f': o.force = 1; break;
        case 's': {
            int i, n;
            if (cli_parse_shard(optarg, &i, &n)) {
                fprintf(stderr, "kvbench sweep: --shard expects I/N with 0 <= I < N <= %d, got '%s'\n",
                        KB_MAX_SHARDS, optarg);
                free(sets);
                return 2;
            }
            o.shard_i = i;
            o.shard_n = n;
            break;
        }
        case 'S': sets[nsets++] = optarg; break;
        case 'j':
            if (cli_parse_int("sweep", "threads", optarg, 1, 1024, &v)) {
                free(sets);
                return 2;
            }
            o.threads = (int)v;
            break;
        case 'd':
            if (cli_parse_int("sweep", "dump-trace", optarg, 0, 4096, &v)) {
                free(sets);
                return 2;
            }
            o.dump_trace_layer = (int)v;
            break;
        case 'n': o.dry_run = 1; break;
        case 'R': o.reprefill = 1; break;
        case 'h': usage(stdout); free(sets); return 0;
        default: usage(stderr); free(sets); return 2;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "kvbench sweep: expected exactly one CONFIG.json\n");
        usage(stderr);
        free(sets);
        return 2;
    }
    o.config = argv[optind];
    o.overrides = sets;
    o.n_overrides = nsets;
    kb_err err = {0};
    if (o.out_dir && check_out_path(o.out_dir, 1, &err)) {
        fprintf(stderr, "kvbench sweep: --out %s\n", err.msg);
        free(sets);
        return 2;
    }
    if (cli_check_repeated_keys("--set", (const char *const *)sets, nsets, &err)) {
        fprintf(stderr, "kvbench sweep: %s\n", err.msg);
        free(sets);
        return 2;
    }
    int rc = sweep_run(&o, &err);
    /* an error found against the model or the data in a key --set replaced */
    if (rc == KB_EINPUT) sweep_config_blame_override(o.config, sets, nsets, &err);
    if (rc) fprintf(stderr, "kvbench sweep: %s\n", err.msg);
    free(sets);
    return rc;
}
