/* cmd_bench.c - kvbench bench {engine|methods}. */
#include <cblas.h>
#include <omp.h>
#include <stdio.h>
#include <string.h>

#include "harness/bench.h"
#include "harness/cli.h"

void bench_set_threads(int n) {
    omp_set_num_threads(n);
    openblas_set_num_threads(n);
}

int cmd_bench(int argc, char **argv) {
    if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        FILE *f = argc < 2 ? stderr : stdout;
        fprintf(f, "usage: kvbench bench engine [options]   prefill/decode speed vs the machine\n"
                   "       kvbench bench methods [options]  decode speed, traffic and memory per method\n"
                   "(kvbench bench <part> --help for options)\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "engine")) return bench_engine(argc - 1, argv + 1);
    if (!strcmp(argv[1], "methods")) return bench_methods(argc - 1, argv + 1);
    fprintf(stderr, "kvbench bench: unknown part '%s' (engine, methods)\n", argv[1]);
    return 2;
}
