/* machine.c - machine description and the bandwidth / sgemm probes. */
#include "harness/machine.h"

#include <cblas.h>
#include <immintrin.h>
#include <omp.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "kernels/kb_base.h"

void machine_describe(kb_machine *m) {
    memset(m, 0, sizeof *m);
    snprintf(m->cpu, sizeof m->cpu, "unknown");
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (f) {
        char line[512];
        while (fgets(line, sizeof line, f))
            if (!strncmp(line, "model name", 10)) {
                char *c = strchr(line, ':');
                if (c) {
                    c++;
                    while (*c == ' ') c++;
                    c[strcspn(c, "\n")] = 0;
                    snprintf(m->cpu, sizeof m->cpu, "%s", c);
                }
                break;
            }
        fclose(f);
    }
    m->cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    m->threads = omp_get_max_threads();
    m->mem_gib = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE) / (1 << 30);
    gethostname(m->host, sizeof m->host - 1);
    m->simd[0] = 0;
#ifdef __AVX512F__
    strcat(m->simd, "avx512f ");
#endif
#ifdef __AVX512BW__
    strcat(m->simd, "avx512bw ");
#endif
#ifdef __AVX2__
    strcat(m->simd, "avx2 ");
#endif
#ifdef __FMA__
    strcat(m->simd, "fma ");
#endif
#ifdef __F16C__
    strcat(m->simd, "f16c");
#endif
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double machine_read_bandwidth(size_t bytes, int reps) {
    size_t n = bytes / sizeof(float);
    n -= n % 64;
    float *buf = KB_AMALLOC(n * sizeof(float));
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) buf[i] = (float)(i & 7); /* first touch by the readers */
    double *t = KB_MALLOC((size_t)reps * sizeof(double));
    volatile float sink = 0;
    for (int r = 0; r < reps; r++) {
        double t0 = kb_now();
        float total = 0;
#pragma omp parallel reduction(+ : total)
        {
            float acc = 0;
#if defined(__AVX512F__)
            __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps(), a2 = _mm512_setzero_ps(),
                   a3 = _mm512_setzero_ps();
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i += 64) {
                a0 = _mm512_add_ps(a0, _mm512_load_ps(buf + i));
                a1 = _mm512_add_ps(a1, _mm512_load_ps(buf + i + 16));
                a2 = _mm512_add_ps(a2, _mm512_load_ps(buf + i + 32));
                a3 = _mm512_add_ps(a3, _mm512_load_ps(buf + i + 48));
            }
            acc = _mm512_reduce_add_ps(_mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
#elif defined(__AVX2__)
            __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i += 16) {
                a0 = _mm256_add_ps(a0, _mm256_load_ps(buf + i));
                a1 = _mm256_add_ps(a1, _mm256_load_ps(buf + i + 8));
            }
            float tmp[8];
            _mm256_storeu_ps(tmp, _mm256_add_ps(a0, a1));
            for (int j = 0; j < 8; j++) acc += tmp[j];
#else
#pragma omp for schedule(static)
            for (size_t i = 0; i < n; i++) acc += buf[i];
#endif
            total += acc;
        }
        t[r] = kb_now() - t0;
        sink += total;
    }
    (void)sink;
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double med = t[reps / 2];
    free(t);
    kb_afree(buf);
    return (double)n * sizeof(float) / med / 1e9;
}

/* the hand-over counter: thread 0 writes 2i + 1, thread 1 answers 2i + 2;
 * HANDOVER_STOP ends thread 1's wait early */
#define HANDOVER_STOP (-1L)
static _Alignas(64) _Atomic long handover_turn;

double machine_handover_ns(int trips, int reps) {
    cpu_set_t cpus;
    if (trips < 1 || reps < 1 || omp_get_max_threads() < 2) return 0;
    if (sched_getaffinity(0, sizeof cpus, &cpus) == 0 && CPU_COUNT(&cpus) < 2) return 0;
    double *t = KB_MALLOC((size_t)reps * sizeof(double));
    int ok = 1;
    for (int r = 0; r < reps && ok; r++) {
        atomic_store(&handover_turn, 0);
        long done = 0;
        double dt = 0;
        int team = 0;
#pragma omp parallel num_threads(2)
        {
#pragma omp single
            team = omp_get_num_threads();
            /* (the single's implied barrier: both threads start together) */
            if (team == 2 && omp_get_thread_num() == 0) {
                double t0 = kb_now(), limit = 0.02;
                long i = 0;
                for (; i < trips; i++) {
                    atomic_store_explicit(&handover_turn, 2 * i + 1, memory_order_release);
                    while (atomic_load_explicit(&handover_turn, memory_order_acquire) != 2 * i + 2) {
                    }
                    if ((i & 255) == 255 && kb_now() - t0 > limit) {
                        i++;
                        break;
                    }
                }
                dt = kb_now() - t0;
                done = i;
                atomic_store_explicit(&handover_turn, HANDOVER_STOP, memory_order_release);
            } else if (team == 2) {
                for (long i = 0;; i++) {
                    long v;
                    while ((v = atomic_load_explicit(&handover_turn, memory_order_acquire)) != 2 * i + 1 &&
                           v != HANDOVER_STOP) {
                    }
                    if (v == HANDOVER_STOP) break;
                    atomic_store_explicit(&handover_turn, 2 * i + 2, memory_order_release);
                }
            }
        }
        if (team != 2 || done < 1) ok = 0;
        else t[r] = dt / (double)done * 1e9;
    }
    double med = 0;
    if (ok) {
        qsort(t, (size_t)reps, sizeof *t, cmp_d);
        med = t[reps / 2];
    }
    free(t);
    return med;
}

double machine_sgemm_gflops(int m, int n, int k, int reps) {
    float *A = KB_AMALLOC((size_t)m * k * 4), *B = KB_AMALLOC((size_t)n * k * 4),
          *C = KB_AMALLOC((size_t)m * n * 4);
    for (size_t i = 0; i < (size_t)m * k; i++) A[i] = (float)((i * 7) % 13) * 0.01f;
    for (size_t i = 0; i < (size_t)n * k; i++) B[i] = (float)((i * 5) % 11) * 0.01f;
    double *t = KB_MALLOC((size_t)reps * sizeof(double));
    /* OpenBLAS's own best: all cores in its thread pool for this measurement
     * (the engine keeps it single-threaded and splits work with OpenMP) */
    openblas_set_num_threads(omp_get_max_threads());
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, A, k, B, k, 0, C, n); /* warm */
    for (int r = 0; r < reps; r++) {
        double t0 = kb_now();
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1, A, k, B, k, 0, C, n);
        t[r] = kb_now() - t0;
    }
    openblas_set_num_threads(1);
    qsort(t, (size_t)reps, sizeof *t, cmp_d);
    double g = 2.0 * m * n * k / t[reps / 2] / 1e9;
    free(t);
    kb_afree(A);
    kb_afree(B);
    kb_afree(C);
    return g;
}

size_t machine_peak_rss(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (size_t)ru.ru_maxrss * 1024;
}

size_t machine_rss(void) {
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
        fclose(f);
    }
    return (size_t)rss * (size_t)sysconf(_SC_PAGESIZE);
}

/* KVBENCH_MEM_LIMIT caps what kvbench plans with (tests, shared machines):
 * a whole number of bytes >= 1, digits only, optionally followed by one of
 * K, M, G, T (either case: KiB, MiB, GiB, TiB). Unset or empty: no cap (0).
 * The one place its values are defined (machine.h, README.md). */
int machine_mem_limit(size_t *bytes, kb_err *err) {
    const char *e = getenv("KVBENCH_MEM_LIMIT");
    *bytes = 0;
    if (!e || !*e) return 0;
    size_t v = 0, i = 0;
    int ok = e[0] >= '0' && e[0] <= '9';
    for (; ok && e[i] >= '0' && e[i] <= '9'; i++) {
        if (v > (SIZE_MAX - (size_t)(e[i] - '0')) / 10) ok = 0;
        else v = v * 10 + (size_t)(e[i] - '0');
    }
    if (ok && e[i]) {
        static const char units[] = "KkMmGgTt"; /* 2^10, 2^20, 2^30, 2^40 */
        const char *u = e[i + 1] ? NULL : strchr(units, e[i]);
        int shift = u ? 10 * (int)((u - units) / 2 + 1) : 0;
        if (!u || v > SIZE_MAX >> shift) ok = 0;
        else v <<= shift;
    }
    if (!ok || !v)
        return kb_env_fail(err, "KVBENCH_MEM_LIMIT", e,
                           "a number of bytes (an integer >= 1, optionally followed by K, M, G or T "
                           "for KiB, MiB, GiB or TiB)");
    *bytes = v;
    return 0;
}

size_t machine_mem_available(void) {
    size_t cap;
    if (machine_mem_limit(&cap, NULL)) cap = 0; /* refused before any command runs (main.c) */
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return cap;
    char line[256];
    size_t kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %zu kB", &kb) == 1) break;
    fclose(f);
    size_t avail = kb * 1024;
    return cap && (cap < avail || !avail) ? cap : avail;
}
