# accuracy.gp - score vs token budget, one line per method (cell label).
# Variables: datafile (blocks separated by two blank lines, first line of each
# block holds the label), nblocks, ttl, ylab.
load "common.gp"
set title ttl noenhanced
set xlabel "token budget B (token-equivalents read per step per KV head)"
set ylabel ylab
set logscale x 2
set format x "%.0f"
set yrange [0:105]
plot for [i=0:nblocks-1] datafile index i using 1:2 with linespoints lw 2 lc i+1 pt (i%10)+4 \
     title columnheader(1)
