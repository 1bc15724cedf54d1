/* cmd_info.c - kvbench info (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_info(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench info: not implemented yet\n");
    return 2;
}
