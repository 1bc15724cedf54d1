/* cmd_bench.c - kvbench bench (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_bench(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench bench: not implemented yet\n");
    return 2;
}
