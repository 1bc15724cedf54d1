/* cmd_plot.c - kvbench plot (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_plot(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench plot: not implemented yet\n");
    return 2;
}
