/* bench_engine.c - `kvbench bench engine`: prefill tokens/s, decode tokens/s
 * at several contexts, peak RSS, and in the same run the machine's measured
 * read bandwidth and sgemm rate, so the ratios are honest.
 *
 * Decode traffic per token = weights read once (every layer matrix, the
 * output matrix, norms, one embedding row) + the whole K/V cache at that
 * context (Full KV). Prefill projections are compared with sgemm of the
 * model's own FFN shape measured here. Token ids are random (speed does not
 * depend on them). */
#include <getopt.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness/bench.h"
#include "harness/cli.h"
#include "harness/engine/model.h"
#include "harness/machine.h"
#include "methods/prefill.h"

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

double bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

int bench_parse_list(const char *cmd, const char *opt, const char *s, int *out, int max, int lo,
                     int hi) {
    int n = 0;
    const char *p = s;
    if (!*p) {
        fprintf(stderr, "kvbench %s: --%s is empty\n", cmd, opt);
        return -1;
    }
    for (;;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < lo || v > hi || n == max || (*end && *end != ',') ||
            (*end == ',' && !end[1])) {
            fprintf(stderr, "kvbench %s: --%s expects a comma-separated list of integers in [%d, %d] "
                    "(at most %d), got '%s'\n", cmd, opt, lo, hi, max, s);
            return -1;
        }
        for (int i = 0; i < n; i++)
            if (out[i] == (int)v) {
                fprintf(stderr, "kvbench %s: --%s lists %ld twice in '%s'\n", cmd, opt, v, s);
                return -1;
            }
        out[n++] = (int)v;
        if (!*end) break;
        p = end + 1;
    }
    return n;
}

void bench_random_tokens(int32_t *t, int n, int vocab, uint64_t seed) {
    for (int i = 0; i < n; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        t[i] = (int32_t)((seed >> 33) % (uint64_t)vocab);
    }
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench bench engine [-m MODEL] [options]\n"
            "  -m, --model SPEC       GGUF path or synthetic:smollm2-135m | synthetic:llama3.1-8b\n"
            "      --prefill LIST     prefill lengths in tokens (default 512,2048,8192)\n"
            "      --decode-ctx LIST  decode context lengths (default 1024,4096,8192)\n"
            "      --decode-tokens N  decode steps timed per context (default 16)\n"
            "      --reps N           repetitions; medians are reported (default 3)\n"
            "      --kv TYPE          KV cache type f16 (default) | f32 | bf16\n"
            "      --threads N        OpenMP/OpenBLAS threads (default: all cores)\n");
}

int bench_engine(int argc, char **argv) {
    static const struct option opts[] = {{"model", 1, 0, 'm'},      {"prefill", 1, 0, 'p'},
                                         {"decode-ctx", 1, 0, 'c'}, {"decode-tokens", 1, 0, 't'},
                                         {"reps", 1, 0, 'r'},       {"kv", 1, 0, 'k'},
                                         {"threads", 1, 0, 'j'},    {"help", 0, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL;
    int pre[8] = {512, 2048, 8192}, npre = 3, ctx[8] = {1024, 4096, 8192}, nctx = 3;
    long dec_tokens = 16, reps = 3, threads = 0;
    kb_dtype kv = KB_F16;
    int c;
    optind = 1;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        if (cli_once("bench engine", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'm': model = optarg; break;
        case 'p':
            if ((npre = bench_parse_list("bench engine", "prefill", optarg, pre, 8, 1, 1 << 20)) < 0)
                return 2;
            break;
        case 'c':
            if ((nctx = bench_parse_list("bench engine", "decode-ctx", optarg, ctx, 8, 1, 1 << 20)) < 0)
                return 2;
            break;
        case 't':
            if (cli_parse_int("bench engine", "decode-tokens", optarg, 1, 4096, &dec_tokens)) return 2;
            break;
        case 'r':
            if (cli_parse_int("bench engine", "reps", optarg, 1, 100, &reps)) return 2;
            break;
        case 'k':
            if (kb_dtype_parse(optarg, &kv)) {
                fprintf(stderr, "kvbench bench engine: --kv expects f16, f32 or bf16, got '%s'\n", optarg);
                return 2;
            }
            break;
        case 'j':
            if (cli_parse_int("bench engine", "threads", optarg, 1, 1024, &threads)) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "kvbench bench engine: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (threads) bench_set_threads((int)threads);
    kb_err err = {0};
    kb_model *m;
    int rc = model_load(cli_model_path(model), &m, &err);
    if (rc) {
        fprintf(stderr, "kvbench bench engine: %s\n", err.msg);
        return rc;
    }
    const kb_hparams *hp = &m->hp;
    /* decode contexts at the model's limit leave room for the timed tokens;
     * two that fit to the same length would time the same context twice */
    if (bench_contexts_distinct(ctx, nctx, (int)dec_tokens, hp->n_ctx_train, &err)) {
        fprintf(stderr, "kvbench bench engine: --decode-ctx: %s\n", err.msg);
        model_free(m);
        return 2;
    }
    for (int i = 0; i < nctx; i++)
        if (ctx[i] + dec_tokens > hp->n_ctx_train && ctx[i] <= hp->n_ctx_train && ctx[i] > dec_tokens) {
            fprintf(stderr, "kvbench bench engine: decode context %d -> %ld (room for %ld decode tokens)\n",
                    ctx[i], hp->n_ctx_train - dec_tokens, dec_tokens);
            ctx[i] = hp->n_ctx_train - (int)dec_tokens;
        }
    int maxlen = 0;
    for (int i = 0; i < npre; i++) maxlen = KB_MAX(maxlen, pre[i]);
    for (int i = 0; i < nctx; i++) maxlen = KB_MAX(maxlen, ctx[i] + (int)dec_tokens);
    if (maxlen > hp->n_ctx_train) {
        fprintf(stderr, "kvbench bench engine: lengths up to %d exceed the model context %d\n",
                maxlen, hp->n_ctx_train);
        model_free(m);
        return 2;
    }
    if ((rc = model_check_memory(m, maxlen, 1, kv, &err))) {
        fprintf(stderr, "kvbench bench engine: %s\n", err.msg);
        model_free(m);
        return rc;
    }
    size_t kv_tok = 2ull * hp->n_layer * hp->n_head_kv * hp->head_dim * kb_dtype_size(kv);
    kb_machine mc;
    machine_describe(&mc);
    printf("# kvbench bench engine\n");
    printf("machine: %s, %d cores, %d threads, %s, %.1f GiB RAM\n", mc.cpu, mc.cores, mc.threads,
           mc.simd, mc.mem_gib);
    printf("model: %s (%s), %d layers, %d/%d heads, D %d, weights read per token %.1f MB, "
           "KV %s %.1f KiB/token\n",
           m->path, m->name, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim,
           m->weight_bytes / 1e6, kb_dtype_name(kv), kv_tok / 1024.0);
    double bw = machine_read_bandwidth((size_t)1 << 30, 5);
    double ho = machine_handover_ns(10000, 5); /* as bench methods: 0 with one thread or CPU */
    double sg = machine_sgemm_gflops(512, hp->n_ff, hp->n_embd, 5);
    char hs[64] = "";
    if (ho > 0) snprintf(hs, sizeof hs, "; hand-over round trip %.0f ns", ho);
    printf("measured: read bandwidth %.2f GB/s%s; sgemm [512 x %d x %d] %.1f GFLOP/s\n\n", bw, hs,
           hp->n_ff, hp->n_embd, sg);

    int32_t *tok = KB_MALLOC((size_t)maxlen * sizeof(int32_t));
    bench_random_tokens(tok, maxlen, hp->n_vocab, 42);
    kb_forward *f = forward_new(m, 512);
    kb_prefill pf;
    prefill_init(&pf, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, kv, 0, maxlen);
    kb_attn_backend be = prefill_backend(&pf);

    printf("%-10s %10s %12s %14s %12s\n", "prefill", "tokens/s", "ms", "proj GFLOP/s", "proj/sgemm");
    for (int i = 0; i < npre; i++) {
        double *tt = KB_MALLOC((size_t)reps * sizeof(double)), *gf = KB_MALLOC((size_t)reps * sizeof(double));
        for (int r = 0; r < reps; r++) {
            prefill_reset(&pf);
            f->t_proj = f->proj_flops = 0;
            double t0 = kb_now();
            if ((rc = forward_prefill(f, tok, pre[i], 0, &be, NULL, 0, &err))) break;
            tt[r] = kb_now() - t0;
            gf[r] = f->proj_flops / f->t_proj / 1e9;
        }
        if (rc) {
            free(tt);
            free(gf);
            break;
        }
        double t = bench_median(tt, (int)reps), g = bench_median(gf, (int)reps);
        printf("%-10d %10.1f %12.1f %14.1f %11.0f%%\n", pre[i], pre[i] / t, t * 1e3, g, 100 * g / sg);
        free(tt);
        free(gf);
    }
    if (!rc) {
        printf("\n%-10s %10s %12s %12s %12s %10s\n", "decode@ctx", "tokens/s", "ms/token",
               "attn ms/tok", "GB/s moved", "of read bw");
        /* one prefill to the longest context; shorter contexts truncate it,
         * so they are measured from the longest down */
        for (int i = 0; i < nctx; i++)
            for (int j = i + 1; j < nctx; j++)
                if (ctx[j] > ctx[i]) {
                    int t = ctx[i];
                    ctx[i] = ctx[j];
                    ctx[j] = t;
                }
        int longest = 0;
        for (int i = 0; i < nctx; i++) longest = KB_MAX(longest, ctx[i]);
        prefill_reset(&pf);
        rc = forward_prefill(f, tok, longest, 0, &be, NULL, 0, &err);
        for (int i = 0; i < nctx && !rc; i++) {
            int T = (int)dec_tokens;
            double *tt = KB_MALLOC((size_t)reps * T * sizeof(double));
            double *ta = KB_MALLOC((size_t)reps * T * sizeof(double));
            for (int r = 0; r < reps; r++) {
                for (int s = 0; s < hp->n_layer * hp->n_head_kv; s++) kvstream_truncate(&pf.kv[s], ctx[i]);
                int32_t t_in = tok[ctx[i]];
                for (int s = 0; s < T; s++) {
                    f->t_attn = 0;
                    double t0 = kb_now();
                    forward_decode(f, t_in, ctx[i] + s, &be);
                    tt[r * T + s] = kb_now() - t0;
                    ta[r * T + s] = f->t_attn;
                    t_in = logits_argmax(f->logits, hp->n_vocab);
                }
            }
            double t = bench_median(tt, (int)reps * T), a = bench_median(ta, (int)reps * T);
            double bytes = (double)m->weight_bytes + (double)kv_tok * (ctx[i] + T / 2.0);
            printf("%-10d %10.2f %12.2f %12.2f %12.2f %9.0f%%\n", ctx[i], 1 / t, t * 1e3, a * 1e3,
                   bytes / t / 1e9, 100 * bytes / t / 1e9 / bw);
            free(tt);
            free(ta);
        }
    }
    if (rc) fprintf(stderr, "kvbench bench engine: %s\n", err.msg);
    printf("\npeak RSS %.1f MiB\n", machine_peak_rss() / 1048576.0);
    prefill_free(&pf);
    forward_free(f);
    free(tok);
    model_free(m);
    return rc;
}
