/* machine.h - what the numbers ran on (run.json, bench output), and the
 * machine's measured memory read bandwidth and sgemm rate. */
#ifndef KB_MACHINE_H
#define KB_MACHINE_H

#include <stddef.h>

#include "kernels/kb_base.h"

typedef struct kb_machine {
    char cpu[256];      /* /proc/cpuinfo model name */
    int cores;          /* online CPUs */
    int threads;        /* OpenMP threads in use */
    char simd[64];      /* compiled SIMD paths, e.g. "avx512f avx2 fma f16c" */
    double mem_gib;     /* total RAM */
    char host[128];
} kb_machine;

void machine_describe(kb_machine *m);

/* Read bandwidth in GB/s (1e9 bytes/s): median of `reps` passes over a
 * buffer of `bytes` (much larger than the caches), all threads reading. */
double machine_read_bandwidth(size_t bytes, int reps);
/* How long one cache line takes to go from one thread to another and back,
 * in ns: the median over `reps` of the mean round trip of `trips` hand-overs
 * between two OpenMP threads (scripts/microbench/core_pingpong.c's
 * measurement, unpinned). Every value one decode thread makes and the other
 * reads pays half of it, so it tells where the host has put a VM's vCPUs
 * (PERFORMANCE.md, latency.csv's `handover_ns`). Each repetition stops after
 * ~20 ms, so an oversubscribed machine cannot stall it. 0 when fewer than
 * two threads or CPUs are available. */
double machine_handover_ns(int trips, int reps);
/* OpenBLAS sgemm rate in GFLOP/s for C[m][n] = A[m][k] B^T: median of reps. */
double machine_sgemm_gflops(int m, int n, int k, int reps);
/* Peak resident set size of this process in bytes. */
size_t machine_peak_rss(void);
/* MemAvailable from /proc/meminfo in bytes (0 if unknown), capped by
 * $KVBENCH_MEM_LIMIT when set. */
size_t machine_mem_available(void);
/* $KVBENCH_MEM_LIMIT in bytes: 0 when unset or empty (no cap), else a whole
 * number of bytes >= 1, optionally followed by K, M, G or T (either case;
 * powers of 1024). Any other value: KB_EINPUT with a message naming it. */
int machine_mem_limit(size_t *bytes, kb_err *err);
/* Current resident set size in bytes. */
size_t machine_rss(void);

#endif
