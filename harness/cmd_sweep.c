/* cmd_sweep.c - kvbench sweep (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_sweep(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench sweep: not implemented yet\n");
    return 2;
}
