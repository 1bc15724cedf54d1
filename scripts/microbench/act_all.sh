#!/bin/bash
# act_all.sh: builds and runs build/act_all (scripts/microbench/act_all.c):
# the vectorised SiLU against libm's expf over all 2^32 inputs, on this
# build's path and on the AVX2+FMA path. Needs make; ~1.5 min.
set -euo pipefail
cd "$(dirname "$0")/../.."
make -s build/libkvbench.a
gcc -std=c11 -O2 -march=native -D_GNU_SOURCE -I. -Wall -Wextra scripts/microbench/act_all.c \
  build/libkvbench.a -lopenblas -lcjson -lcsv -lm -lpthread -fopenmp -o build/act_all
build/act_all
