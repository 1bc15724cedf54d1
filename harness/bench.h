/* bench.h - `kvbench bench` parts and helpers shared by them. Benchmarks
 * report medians of repeated runs and ratios measured in the same run. */
#ifndef KB_BENCH_H
#define KB_BENCH_H

#include <stdint.h>

int bench_engine(int argc, char **argv);
int bench_methods(int argc, char **argv);

/* Median of v[0..n) (sorts v). */
double bench_median(double *v, int n);
/* "512,2048" -> out[]; returns count or -1 after printing an error. */
int bench_parse_list(const char *cmd, const char *opt, const char *s, int *out, int max, int lo,
                     int hi);
void bench_random_tokens(int32_t *t, int n, int vocab, uint64_t seed);
/* Sets OpenMP and OpenBLAS thread counts. */
void bench_set_threads(int n);

#endif
