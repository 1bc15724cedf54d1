# common.gp - terminal and style shared by every kvbench figure.
# Variables set by `kvbench plot`: outfile (the file to write), fmt ("png" or "svg").
if (fmt eq "svg") {
    set terminal svg size 960,600 dynamic enhanced font "sans,12" background "white"
    set output outfile
} else {
    set terminal pngcairo size 960,600 enhanced font "sans,11"
    set output outfile
}
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
set style line 1 lw 2 pt 7 ps 1.0
set border lw 1
# twelve distinguishable colours (series beyond twelve cycle)
set linetype 1 lc rgb "#000000"
set linetype 2 lc rgb "#e41a1c"
set linetype 3 lc rgb "#377eb8"
set linetype 4 lc rgb "#4daf4a"
set linetype 5 lc rgb "#984ea3"
set linetype 6 lc rgb "#ff7f00"
set linetype 7 lc rgb "#a65628"
set linetype 8 lc rgb "#f781bf"
set linetype 9 lc rgb "#17becf"
set linetype 10 lc rgb "#999999"
set linetype 11 lc rgb "#bcbd22"
set linetype 12 lc rgb "#1f3a93"
set linetype cycle 12
