# speedup.gp - decode speedup over Full KV vs context length, one line per
# (method, budget). Variables: datafile (blocks, first line = label), nblocks, ttl.
load "common.gp"
set title ttl noenhanced
set xlabel "context length (tokens)"
set ylabel "decode speedup vs Full KV (x)"
set logscale x 2
set format x "%.0f"
set yrange [0:*]
plot for [i=0:nblocks-1] datafile index i using 1:2 with linespoints lw 2 lc i+1 pt (i%10)+4 \
     title columnheader(1), 1 with lines lc rgb "#888888" dt 2 notitle
