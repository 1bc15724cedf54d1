/* cmd_score.c - kvbench score (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_score(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench score: not implemented yet\n");
    return 2;
}
