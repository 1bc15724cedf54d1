# ablation.gp - score vs an ablated parameter (pooling kernel, split exponent),
# one line per series. Variables: datafile, nblocks, ttl, xlab, logx (0/1).
load "common.gp"
set title ttl noenhanced
set xlabel xlab
set ylabel "score (x100)"
if (logx) { set logscale x 2; set format x "%.0f" }
set yrange [0:105]
plot for [i=0:nblocks-1] datafile index i using 1:2 with linespoints lw 2 lc i+1 pt (i%10)+4 \
     title columnheader(1)
