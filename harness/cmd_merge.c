/* cmd_merge.c - kvbench merge (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_merge(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench merge: not implemented yet\n");
    return 2;
}
