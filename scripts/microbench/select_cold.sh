#!/bin/bash
# select_cold.sh A.c B.c: builds build/select_cold (scripts/microbench/select_cold.c)
# with two versions of kernels/cpu/select_cpu.c, e.g. the one of an older commit:
#   git show c824326~1:kernels/cpu/select_cpu.c > /tmp/select_old.c
#   scripts/microbench/select_cold.sh /tmp/select_old.c kernels/cpu/select_cpu.c
#   build/select_cold
# Needs build/libkvbench.a (make) and AVX2 (-march=native).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 A.c B.c" >&2; exit 2; }
F="-std=c11 -O2 -march=native -fopenmp -D_GNU_SOURCE -I. -Wall -Wextra"
RA=; RB=
for fn in hybrid_scores topk_pages topk attn_gather page_minmax pool1d quest_scores snapkv_scores; do
  RA="$RA -Dkb_cpu_$fn=A_$fn"; RB="$RB -Dkb_cpu_$fn=B_$fn"
done
mkdir -p build
gcc $F $RA -c "$1" -o build/select_cold_A.o
gcc $F $RB -c "$2" -o build/select_cold_B.o
gcc $F scripts/microbench/select_cold.c build/select_cold_A.o build/select_cold_B.o build/libkvbench.a \
  -lopenblas -lcjson -lcsv -lm -lpthread -o build/select_cold
echo "built build/select_cold"
