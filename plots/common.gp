# common.gp - terminal and style shared by every kvbench figure.
# Variables set by `kvbench plot`: out (file name without extension), fmt ("png" or "svg").
if (fmt eq "svg") {
    set terminal svg size 960,600 dynamic enhanced font "sans,12" background "white"
    set output out.".svg"
} else {
    set terminal pngcairo size 960,600 enhanced font "sans,11"
    set output out.".png"
}
set grid lc rgb "#dddddd"
set key outside right top box noenhanced
set style line 1 lw 2 pt 7 ps 1.0
set border lw 1
