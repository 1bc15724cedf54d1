/* bench_methods.c - `kvbench bench methods` (the performance issue). */
#include <stdio.h>

#include "harness/bench.h"

int bench_methods(int argc, char **argv) {
    (void)argc;
    (void)argv;
    fprintf(stderr, "kvbench bench methods: not available yet (see the performance issue)\n");
    return 2;
}
