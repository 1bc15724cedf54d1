/* attn_pf.c - the decode attention's prefetch distance, A/B in one
 * process: scripts/microbench/attn_pf.sh builds kernels/cpu/attn_cpu.c with
 * DEC_PF_ROWS2 (AVX2: rows ahead) and DEC_PF_BYTES (AVX-512: bytes ahead)
 * = the variable kb_pf_rows, and this program runs rounds of the same
 * attention calls with each distance given, alternated:
 *   build/attn_pf ROUNDS DIST...      e.g. build/attn_pf 20 32 12 24 16 (AVX2)
 *                                          build/attn_pf 20 4096 8192 (AVX-512)
 * Environment: L H G D N (layers, KV heads, query heads per KV head, head
 * dim, rows per head; default SmolLM2 at 8K: 30 3 3 64 8176), GK = k > 0
 * for gathered attention instead of dense (k random rows of N per head, the
 * 90 calls on two OpenMP threads as the decode's select job runs them,
 * after a 96 MB read per round); QK=1 for qk_scores (K only) instead of
 * dense attention; PLAIN=1 (dense attention only) also times, in each round,
 * a plain sum of the same K and V bytes split over the pool as the dense
 * attention splits them (tasks of consecutive DEC_CHUNK-row chunks, K and V read
 * 16 rows at a time in turn): what the memory gives that access pattern.
 * Prints the median and min per distance
 * (ms by kb_now, the monotonic clock; GB/s of K+V). Not part of the build or the tests. */
#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>
#include "kernels/attn_impl.h"
#include "kernels/kernels.h"
#include "kernels/kvstream.h"
#include "kernels/pool.h"
int kb_pf_rows = 12; /* DEC_PF_ROWS2 / DEC_PF_BYTES of the attn_cpu.c built beside this file */
/* PLAIN=1: one layer's plain read, split as dec_run in kernels/cpu/attn_cpu.c
 * splits the dense attention (DEC_CHUNK rows a chunk, about DEC_TASKS tasks
 * per thread, each task a span of consecutive chunks: kernels/attn_impl.h) */
typedef float v16 __attribute__((vector_size(64)));
typedef struct { const kb_kvstream *s; int H, per_head, nch, span; v16 acc[64]; } plain_job;
static void plain_task(void *p, int t, int worker) {
    plain_job *J = p;
    v16 a = {0}, b = {0};
    for (int c = t * J->span; c < (t + 1) * J->span && c < J->nch; c++) {
        const kb_kvstream *s = &J->s[c / J->per_head];
        int j0 = (c % J->per_head) * DEC_CHUNK, j1 = j0 + DEC_CHUNK < s->n ? j0 + DEC_CHUNK : s->n;
        size_t row = (size_t)s->D * kb_dtype_size(s->dtype);
        for (int j = j0; j < j1; j += 16) {
            size_t bytes = (size_t)((j + 16 < j1 ? j + 16 : j1) - j) * row;
            const char *k = kvstream_krow(s, j), *v = kvstream_vrow(s, j);
            for (size_t o = 0; o + 64 <= bytes; o += 64) { v16 x; memcpy(&x, k + o, 64); a += x; }
            for (size_t o = 0; o + 64 <= bytes; o += 64) { v16 x; memcpy(&x, v + o, 64); b += x; }
        }
    }
    J->acc[worker] += a + b;
}
static void plain_layer(plain_job *J, const kb_kvstream *s) {
    J->s = s;
    J->per_head = (s[0].n + DEC_CHUNK - 1) / DEC_CHUNK;
    J->nch = J->H * J->per_head;
    J->span = J->nch / (DEC_TASKS * kb_pool_threads()) > 1 ? J->nch / (DEC_TASKS * kb_pool_threads()) : 1;
    kb_pool_run((J->nch + J->span - 1) / J->span, plain_task, J);
}
static int cmpd(const void *a, const void *b) { double x = *(const double *)a, y = *(const double *)b; return x < y ? -1 : x > y; }
int main(int argc, char **argv) {
    int L = getenv("L") ? atoi(getenv("L")) : 30, H = getenv("H") ? atoi(getenv("H")) : 3, G = getenv("G") ? atoi(getenv("G")) : 3, D = getenv("D") ? atoi(getenv("D")) : 64, n = getenv("N") ? atoi(getenv("N")) : 8176, rounds = argc > 1 ? atoi(argv[1]) : 10;
    int nv = argc - 2, pfs[8];
    int gk = getenv("GK") ? atoi(getenv("GK")) : 0, qk = getenv("QK") != NULL, plain = getenv("PLAIN") && !gk && !qk;
    if (rounds < 1 || nv < 1 || nv > 8 || L < 1 || H < 1 || G < 1 || D < 16 || D % 16 || n < 1 || gk < 0 || gk > n) {
        fprintf(stderr, "usage: attn_pf ROUNDS ROWS... (1-8 distances; see the header comment)\n");
        return 2;
    }
    for (int i = 0; i < nv; i++) pfs[i] = atoi(argv[2 + i]);
    const kb_kernels *kk = kernels_get();
    kb_kvstream *s = calloc((size_t)L * H, sizeof *s);
    float *k = malloc(D * sizeof *k), *v = malloc(D * sizeof *v);
    srand(1);
    for (int i = 0; i < L * H; i++) {
        kvstream_init(&s[i], KB_F16, D, n);
        for (int j = 0; j < n; j++) {
            for (int d = 0; d < D; d++) { k[d] = rand() / (float)RAND_MAX - 0.5f; v[d] = rand() / (float)RAND_MAX - 0.5f; }
            kvstream_append_f32(&s[i], k, v, j);
        }
    }
    float *q = malloc((size_t)H * G * D * sizeof *q), *out = malloc((size_t)L * H * G * D * sizeof *out);
    float *sc = qk ? malloc((size_t)H * G * n * sizeof *sc) : NULL;
    for (int i = 0; i < H * G * D; i++) q[i] = rand() / (float)RAND_MAX - 0.5f;
    int32_t *gidx = malloc(sizeof(int32_t) * (size_t)L * H * (gk ? gk : 1));
    for (int l = 0; l < L * H; l++) { int c = 0; for (int j = 0; j < n && c < gk; j++) if (rand() % (n - j) < gk - c) gidx[(size_t)l * gk + c++] = j; }
    /* flush between rounds: a 96 MB buffer read */
    size_t fw = 96u << 20; char *fb = malloc(fw); for (size_t i = 0; i < fw; i++) fb[i] = (char)i;
    double *t = malloc(sizeof(double) * rounds * (nv + 1));
    static plain_job pj;
    pj.H = H;
    for (int r = 0; r < rounds; r++) {
        if (plain) {
            double t0 = kb_now();
            for (int l = 0; l < L; l++) plain_layer(&pj, &s[l * H]);
            t[nv * rounds + r] = (kb_now() - t0) * 1e3;
        }
        for (int a = 0; a < nv; a++) {
            kb_pf_rows = pfs[a];
            if (gk) { volatile long sum = 0; for (size_t i = 0; i < fw; i += 64) sum += fb[i]; }
            double t0 = kb_now();
            if (gk) {
                _Pragma("omp parallel for num_threads(2) schedule(dynamic)")
                for (int l = 0; l < L * H; l++) kk->attn_gather(q, G, &s[l], gidx + (size_t)l * gk, gk, 0.125f, out + (size_t)l * G * D); }
            else if (qk) for (int l = 0; l < L; l++) kk->qk_scores(q, H, G, &s[l * H], n, 0.125f, sc, n);
            else for (int l = 0; l < L; l++) kb_attn_dense_heads(kk, q, H, G, &s[l * H], 0.125f, out);
            t[a * rounds + r] = (kb_now() - t0) * 1e3 /* ms */;
        }
    }
    double bytes = (double)L * H * (gk ? gk : n) * (qk ? 1 : 2) * D * 2;
    for (int a = 0; a < nv; a++) {
        qsort(t + a * rounds, rounds, sizeof(double), cmpd);
        printf("distance %5d: median %.2f ms (%.1f GB/s) min %.2f\n", pfs[a], t[a * rounds + rounds / 2], bytes / t[a * rounds + rounds / 2] / 1e6, t[a * rounds]);
    }
    if (plain) {
        double *p = t + nv * rounds;
        qsort(p, rounds, sizeof(double), cmpd);
        printf("plain read:     median %.2f ms (%.1f GB/s) min %.2f\n", p[rounds / 2], bytes / p[rounds / 2] / 1e6, p[0]);
    }
    return 0;
}
