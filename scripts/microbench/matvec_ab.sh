#!/bin/bash
# matvec_ab.sh A.c B.c: builds build/matvec_ab (scripts/microbench/matvec_ab.c)
# with two versions of kernels/cpu/quant_cpu.c, e.g. the one of an older commit:
#   git show HEAD~1:kernels/cpu/quant_cpu.c > /tmp/quant_old.c
#   scripts/microbench/matvec_ab.sh /tmp/quant_old.c kernels/cpu/quant_cpu.c
#   OMP_NUM_THREADS=1 build/matvec_ab 1536 576 3 3000 1
# Each copy's kb_matvec_multi is renamed (A_/B_) and every other global
# symbol of the copy made local, so both run in one process.
# Needs build/libkvbench.a (make).
set -euo pipefail
cd "$(dirname "$0")/../.."
[ $# -eq 2 ] || { echo "usage: $0 A.c B.c" >&2; exit 2; }
F="-std=c11 -O2 -march=native -fopenmp -D_GNU_SOURCE -I. -Wall -Wextra"
mkdir -p build
i=0
for v in A B; do
  i=$((i + 1))
  gcc $F -Dkb_matvec_multi=${v}_kb_matvec_multi -c "${!i}" -o build/matvec_ab_$v.o
  args=
  for s in $(nm -g --defined-only build/matvec_ab_$v.o | awk '{print $3}' | grep -v "^${v}_kb_matvec_multi$"); do
    args="$args --localize-symbol=$s"
  done
  objcopy $args build/matvec_ab_$v.o
done
gcc $F scripts/microbench/matvec_ab.c build/matvec_ab_A.o build/matvec_ab_B.o build/libkvbench.a \
  -lopenblas -lcjson -lcsv -lm -lpthread -o build/matvec_ab
echo "built build/matvec_ab"
