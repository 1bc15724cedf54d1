/* cmd_generate.c - kvbench generate (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_generate(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench generate: not implemented yet\n");
    return 2;
}
