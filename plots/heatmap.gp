# heatmap.gp - needle score by depth (y) and context length (x) for one cell.
# Variables: datafile ("x y score" on integer grid indices), xt / yt (tic strings), ttl, nx, ny.
load "common.gp"
set title ttl noenhanced
set xlabel "context length (tokens)"
set ylabel "needle depth"
set cblabel "score (x100)"
set cbrange [0:100]
set palette defined (0 "#b2182b", 50 "#fddbc7", 100 "#2166ac")
set xrange [-0.5:nx-0.5]
set yrange [-0.5:ny-0.5]
eval("set xtics (".xt.")")
eval("set ytics (".yt.")")
unset key
plot datafile using 1:2:3 with image
