/* cmd_replay.c - kvbench replay (not written yet). */
#include <stdio.h>

#include "harness/cli.h"

int cmd_replay(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench replay: not implemented yet\n");
    return 2;
}
