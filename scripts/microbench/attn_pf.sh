#!/bin/bash
# attn_pf.sh: builds build/attn_pf (scripts/microbench/attn_pf.c) with
# kernels/cpu/attn_cpu.c compiled so that its prefetch distance is the
# harness's variable: the AVX2 path's DEC_PF_ROWS2 (rows ahead; on AMD gathered rows
# use DEC_PF_ROWS2_L2, set to the same variable) and the
# AVX-512 path's DEC_PF_BYTES (bytes ahead in each stream; on AMD also
# DEC_PF_BYTES_AMD, dense rows' distance there), whichever
# -march=native builds; the object replaces the one in build/libkvbench.a.
# Needs make and AVX2 (-march=native).
#   scripts/microbench/attn_pf.sh && build/attn_pf 20 32 12 24 16      (AVX2: rows)
#   scripts/microbench/attn_pf.sh && build/attn_pf 20 4096 2048 8192     (AVX-512: bytes)
set -euo pipefail
cd "$(dirname "$0")/../.."
F="-std=c11 -O2 -march=native -fopenmp -D_GNU_SOURCE -I. -Wall -Wextra"
mkdir -p build
echo "extern int kb_pf_rows;" > build/attn_pf_decl.h
gcc $F -include build/attn_pf_decl.h -DDEC_PF_ROWS2=kb_pf_rows -DDEC_PF_ROWS2_L2=kb_pf_rows -DDEC_PF_BYTES=kb_pf_rows -DDEC_PF_BYTES_AMD=kb_pf_rows -c kernels/cpu/attn_cpu.c -o build/attn_pf_attn.o
gcc $F scripts/microbench/attn_pf.c build/attn_pf_attn.o build/libkvbench.a \
  -lopenblas -lcjson -lcsv -lm -lpthread -o build/attn_pf
echo "built build/attn_pf"
