/* driver.c - the sweep (driver.h). Data flow (architecture.md §2):
 *
 *   config -> plan: tasks x samples x cells (method, params, budget)
 *   for each sample: render its first turn, PREFILL prompt[:-1] ONCE with
 *     exact attention (kb_prefill keeps K, V and the last W queries per layer)
 *     for each cell: build the method's per-layer states from that prefill,
 *       decode the last prompt token and every generated token through the
 *       method, greedy until a stop token or max_new; score; account;
 *       later turns: roll back the generated tokens, append the gold answer and
 *       the next user turn (prefilled over what the method retains), decode.
 *     rows -> samples.csv (atomic rewrite after every cell, so --resume works)
 *   summary.csv and run.json at the end.
 *
 * The driver never looks at a method's or a task's name: methods come from
 * the registry through kb_method_ops, tasks through kb_task_ops. */
#include "harness/driver.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/dataset.h"
#include "harness/atomic.h"
#include "harness/bench.h"
#include "harness/cli.h"
#include "harness/config.h"
#include "harness/engine/model.h"
#include "harness/json.h"
#include "harness/machine.h"
#include "harness/metrics.h"
#include "harness/progress.h"
#include "harness/render.h"
#include "harness/rundir.h"
#include "harness/runinfo.h"
#include "harness/stop.h"
#include "harness/sha256.h"
#include "harness/table.h"
#include "harness/textnorm.h"
#include "harness/wrapbe.h"
#include "methods/params.h"
#include "methods/methodset.h"
#include "methods/prefill.h"

const char *const kb_samples_cols[] = {
    "seq", "task", "sample", "turn", "kind", "method", "label", "params", "budget", "budget_mode",
    "context_tokens", "target_tokens", "context_words", "depth", "metric", "score", "metric2", "score2",
    "prediction", "answers",
    "prompt_tokens", "new_tokens", "prefill_ms", "decode_ms_per_token", "attn_ms_per_token",
    "tokens_resident", "bytes_resident", "tokeq_read_per_step", "bytes_read_per_step",
    "approx_tokeq_per_step", "attended_per_step",
    "compression_ratio", "recall", "mass_covered", "out_rel_err", "kl_vs_full", "top1_vs_full"};
const int kb_samples_ncols = (int)(sizeof kb_samples_cols / sizeof kb_samples_cols[0]);


/* Full KV's greedy run of a sample's first turn (fidelity reference):
 * tokens fed ([0] = the prompt's last token) and the logits of every step. */
typedef struct fid_ref {
    int32_t *tok;
    float *logits; /* [steps][n_vocab] */
    int steps;
} fid_ref;

typedef struct fid_vals {
    int have;
    double recall, mass, rel_err, kl, top1;
} fid_vals;

typedef struct drv {
    const kb_sweep_config *cfg;
    const kb_sweep_opts *opts;
    char out_dir[1024];
    fid_ref ref;
    kb_model *m;
    kb_forward *f;
    kb_renderer rend;
    kb_prefill pf;       /* the shared exact prefill of the current sample */
    char samples_path[1200];
    char model_sha[65];  /* run.json's model sha256, for traces' meta.json */
    kb_table rows;
} drv;

/* One turn's decode through a methodset. */
typedef struct turn_out {
    int32_t *gen;        /* generated ids (stop token excluded) */
    int n_gen;
    int steps;           /* decode steps run (prompt's last token + fed generated tokens) */
    double t_decode, t_attn;
    kb_cell_account acc; /* mean over steps of the read columns; resident at the end */
    long mark;           /* methodset mark after the prompt's last token */
} turn_out;

/* The text a turn has decoded, for its stop string: stop_text_add appends a
 * token's piece and says whether the turn stops there (turn_stop_at). The
 * decode and Full KV's reference for the fidelity columns stop alike. */
typedef struct stop_text {
    const char *stop; /* NULL or "": no stop string */
    char *text;
    size_t n, cap;
} stop_text;

static int stop_text_add(stop_text *st, const kb_model *m, int32_t id) {
    if (!st->stop || !*st->stop) return 0;
    int pl;
    const char *piece = tokenizer_piece_ref(m->tok, id, 0, &pl);
    if (st->n + (size_t)pl + 1 > st->cap) st->text = KB_REALLOC(st->text, st->cap = 2 * (st->n + (size_t)pl + 1));
    if (pl) memcpy(st->text + st->n, piece, (size_t)pl);
    st->n += (size_t)pl;
    return turn_stop_at(st->text, st->n, st->stop) >= 0;
}

/* Greedy decode: stops at an end-of-generation token, after max_new tokens,
 * or once the decoded text holds `stop` (if non-NULL) after something other
 * than newlines (turn_stop_at). `instr` (or NULL): seconds a wrapper of the
 * backend spends measuring (the fidelity columns), taken out of the timers. */
static int decode_turn(drv *d, kb_methodset *ms, kb_attn_backend *via, const double *instr, int32_t first,
                       int pos0, int max_new, const char *stop, turn_out *o) {
    const kb_model *m = d->m;
    kb_attn_backend be = via ? *via : methodset_backend(ms);
    memset(o, 0, sizeof *o);
    o->gen = KB_MALLOC((size_t)(max_new + 1) * sizeof(int32_t));
    int32_t tok = first;
    int pos = pos0;
    double read_tokeq = 0, read_bytes = 0, attended = 0, approx = 0;
    stop_text st = {stop, NULL, 0, 0};
    for (int i = 0; i < max_new; i++) {
        if (stop_signal()) {
            free(st.text);
            return 130;
        }
        double t0 = kb_now(), a0 = d->f->t_attn, i0 = instr ? *instr : 0;
        forward_decode(d->f, tok, pos++, &be);
        double spent = instr ? *instr - i0 : 0;
        o->t_decode += kb_now() - t0 - spent;
        o->t_attn += d->f->t_attn - a0 - spent;
        o->steps++;
        kb_cell_account a;
        methodset_account(ms, &a);
        read_tokeq += a.read_tokeq;
        approx += a.approx_tokeq;
        read_bytes += a.read_bytes;
        attended += a.attended;
        o->acc = a;
        if (i == 0) o->mark = methodset_mark(ms);
        int32_t next = logits_argmax(d->f->logits, m->hp.n_vocab);
        if (tokenizer_is_eog(m->tok, next)) break;
        o->gen[o->n_gen++] = next;
        tok = next;
        if (stop_text_add(&st, m, next)) break;
    }
    free(st.text);
    if (o->steps) {
        o->acc.read_tokeq = read_tokeq / o->steps;
        o->acc.read_bytes = read_bytes / o->steps;
        o->acc.attended = attended / o->steps;
        o->acc.approx_tokeq = approx / o->steps;
    }
    return 0;
}

static char *answers_json(const kb_turn *t) {
    cJSON *a = cJSON_CreateArray();
    for (int i = 0; i < t->n_answers; i++) cJSON_AddItemToArray(a, cJSON_CreateString(t->answers[i]));
    char *s = cJSON_PrintUnformatted(a);
    cJSON_Delete(a);
    return s;
}

/* samples.csv's kind of turn t: what it asks, or the task's name */
static const char *row_kind(const kb_sample *s, int t) {
    return s->turns[t].kind[0] ? s->turns[t].kind : s->task;
}

static void add_row(drv *d, long seq, const kb_sample *s, int t, const kb_cell *c, int ctx_tokens,
                    int prompt_tokens, double prefill_s, const turn_out *o, const char *pred,
                    const fid_vals *fv) {
    char b[21][64];
    const kb_turn *tu = &s->turns[t];
    char *ans = answers_json(tu);
    int k = 0;
    const char *v[40];
    v[k++] = fmt_long(b[0], 64, seq);
    v[k++] = s->task;
    v[k++] = s->id;
    v[k++] = fmt_long(b[1], 64, t);
    v[k++] = row_kind(s, t);
    v[k++] = c->p.ops->name;
    v[k++] = c->p.label;
    v[k++] = c->params_json;
    v[k++] = c->p.budget >= 0 ? fmt_long(b[2], 64, c->p.budget) : "";
    v[k++] = c->p.budget_mode == KB_BUDGET_TOPK ? "topk" : "traffic";
    v[k++] = fmt_long(b[3], 64, ctx_tokens);
    v[k++] = s->target_tokens >= 0 ? fmt_long(b[4], 64, s->target_tokens) : "";
    v[k++] = s->context_words >= 0 ? fmt_long(b[18], 64, s->context_words) : "";
    v[k++] = s->depth >= 0 ? fmt_double(b[5], 64, s->depth) : "";
    v[k++] = tu->metric;
    v[k++] = fmt_double(b[6], 64, turn_score(s, t, pred));
    v[k++] = tu->metric2;
    v[k++] = tu->metric2[0] ? fmt_double(b[17], 64, turn_score2(s, t, pred, 1)) : "";
    /* the table holds valid UTF-8 (tokenizer_decode already replaced invalid
     * bytes with U+FFFD, as Python's errors="replace" does; kept as a guard) */
    ustr u = {0};
    ustr_from_utf8(&u, pred);
    char *pred_utf8 = utf8_from_u32(u.v, u.n);
    ustr_free(&u);
    v[k++] = pred_utf8;
    v[k++] = ans;
    v[k++] = fmt_long(b[7], 64, prompt_tokens);
    v[k++] = fmt_long(b[8], 64, o->n_gen);
    v[k++] = fmt_double(b[9], 64, prefill_s * 1e3);
    v[k++] = fmt_double(b[10], 64, o->steps ? o->t_decode * 1e3 / o->steps : 0);
    v[k++] = fmt_double(b[11], 64, o->steps ? o->t_attn * 1e3 / o->steps : 0);
    v[k++] = fmt_double(b[12], 64, o->acc.resident_tokens);
    v[k++] = fmt_double(b[13], 64, o->acc.resident_bytes);
    v[k++] = fmt_double(b[14], 64, o->acc.read_tokeq);
    v[k++] = fmt_double(b[15], 64, o->acc.read_bytes);
    v[k++] = fmt_double(b[19], 64, o->acc.approx_tokeq);
    v[k++] = fmt_double(b[20], 64, o->acc.attended);
    v[k++] = fmt_double(b[16], 64, o->acc.resident_tokens > 0 ? ctx_tokens / o->acc.resident_tokens : 0);
    char fb[5][64];
    double fx[5] = {fv ? fv->recall : 0, fv ? fv->mass : 0, fv ? fv->rel_err : 0, fv ? fv->kl : 0,
                    fv ? fv->top1 : 0};
    for (int i = 0; i < 5; i++) v[k++] = fv && fv->have ? fmt_double(fb[i], 64, fx[i]) : "";
    table_add(&d->rows, v);
    free(ans);
    free(pred_utf8);
}

static int max_new_of(const kb_sample *s) {
    int mx = 0;
    for (int t = 0; t < s->n_turns; t++) mx = KB_MAX(mx, s->turns[t].max_new);
    return mx;
}

/* The prefill of a sample: tokens and where the method's first decode starts. */
typedef struct sample_prep {
    kb_tokens first;    /* first turn (or shared prefix for multi-request) */
    double prefill_s;
    int L;              /* first turn's prompt tokens (incl. the decoded last one) */
} sample_prep;

/* Teacher-forced fidelity (methods.md §10): the method decodes Full KV's
 * tokens of the first turn; KL of next-token distributions and top-1
 * agreement against Full KV's logits, averaged over the steps. */
static int teacher_forced(drv *d, const kb_cell *c, const kb_method_ctx *ctx, fid_vals *fv,
                          kb_err *err) {
    if (!d->ref.steps) return 0;
    kb_methodset *ms;
    int rc = methodset_build(&c->p, ctx, &d->pf, &ms, err);
    if (rc) return rc;
    kb_attn_backend be = methodset_backend(ms);
    int V = d->m->hp.n_vocab, pos = ctx->L_prompt - 1;
    double kl = 0, top1 = 0;
    for (int i = 0; i < d->ref.steps; i++) {
        if (stop_signal()) {
            methodset_free(ms);
            return 130;
        }
        forward_decode(d->f, d->ref.tok[i], pos + i, &be);
        const float *r = d->ref.logits + (size_t)i * V;
        kl += fidelity_kl(r, d->f->logits, V);
        top1 += fidelity_top1_agree(r, d->f->logits, V);
    }
    fv->kl = kl / d->ref.steps;
    fv->top1 = top1 / d->ref.steps;
    fv->have = 1;
    methodset_free(ms);
    return 0;
}

/* What turn tu's answer in the conversation is for the next turn: the
 * model's own (pred) with own_answers, else the gold one (or answers[0]).
 * pred NULL: not known yet (the plan check), "". */
static const char *appended_answer(const drv *d, const kb_turn *tu, const char *pred) {
    if (d->cfg->own_answers) return pred ? pred : "";
    return tu->gold ? tu->gold : tu->n_answers ? tu->answers[0] : "";
}

/* The method context of a sample whose first prompt has L tokens. */
static kb_method_ctx sample_ctx(const drv *d, const kb_sample *s, int L) {
    const kb_hparams *hp = &d->m->hp;
    return method_ctx_make(hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, d->cfg->kv_dtype,
                           hp->n_ctx_train, L, max_new_of(s));
}

static int run_cell(drv *d, long seq, const kb_sample *s, const kb_cell *c, const sample_prep *sp,
                    int tracing, kb_err *err) {
    const kb_hparams *hp = &d->m->hp;
    kb_method_ctx ctx = sample_ctx(d, s, sp->L);
    int rc = 0;
    kb_methodset *ms = NULL;
    if (s->multi_request) {
        /* a request is prefilled through the method over the shared prefix's
         * cache, which a trace (prefill rows at positions 0..L-1) cannot hold */
        if (tracing)
            fprintf(stderr, "kvbench sweep: --dump-trace: %s/%s is a multi-request sample: not traced\n", s->task,
                    s->id);
        int P = sp->first.n; /* the whole shared prefix was prefilled */
        for (int t = 0; t < s->n_turns && !rc; t++) {
            kb_tokens req;
            if ((rc = render_request(&d->rend, s, t, &req, err))) break;
            ctx = sample_ctx(d, s, P + req.n);
            if ((rc = methodset_build(&c->p, &ctx, &d->pf, &ms, err))) {
                tokens_free(&req);
                break;
            }
            kb_attn_backend be = methodset_backend(ms);
            double t0 = kb_now();
            if (req.n > 1) rc = forward_prefill(d->f, req.ids, req.n - 1, P, &be, NULL, 0, err);
            if (!rc) rc = methodset_end_turn(ms, err);
            double tp = kb_now() - t0;
            turn_out o = {0};
            if (!rc) rc = decode_turn(d, ms, NULL, NULL, req.ids[req.n - 1], P + req.n - 1, s->turns[t].max_new,
                                       s->turns[t].stop, &o);
            if (!rc) {
                char *pred = tokenizer_decode(d->m->tok, o.gen, o.n_gen, 0);
                add_row(d, seq, s, t, c, P + req.n, req.n, sp->prefill_s + tp, &o, pred, NULL);
                free(pred);
            }
            free(o.gen);
            methodset_free(ms);
            ms = NULL;
            tokens_free(&req);
        }
        return rc;
    }
    if ((rc = methodset_build(&c->p, &ctx, &d->pf, &ms, err))) return rc;
    int pos = sp->L - 1; /* position of the token decoded first */
    int32_t first = sp->first.ids[sp->L - 1];
    int prompt_tokens = sp->L;
    double prefill_s = sp->prefill_s;
    char *prev_answer = NULL;
    for (int t = 0; t < s->n_turns && !rc; t++) {
        if (t > 0) {
            kb_tokens cont;
            if ((rc = render_next_turn(&d->rend, s, t, prev_answer, &cont, err))) break;
            if (pos + cont.n + s->turns[t].max_new > hp->n_ctx_train) {
                rc = kb_fail(err, KB_EINPUT,
                             "%s/%s: turn %d needs %d tokens, more than the model context %d",
                             s->task, s->id, t, pos + cont.n + s->turns[t].max_new, hp->n_ctx_train);
                tokens_free(&cont);
                break;
            }
            kb_attn_backend be = methodset_backend(ms);
            double t0 = kb_now();
            if (cont.n > 1) rc = forward_prefill(d->f, cont.ids, cont.n - 1, pos, &be, NULL, 0, err);
            if (!rc) rc = methodset_end_turn(ms, err);
            prefill_s = kb_now() - t0;
            pos += cont.n - 1;
            first = cont.ids[cont.n - 1];
            prompt_tokens = cont.n;
            tokens_free(&cont);
            if (rc) break;
        }
        turn_out o = {0};
        fid_vals fv = {0};
        kb_fid_be fw;
        kb_trace_be tw;
        kb_trace tr;
        kb_attn_backend via = methodset_backend(ms);
        int fid = t == 0 && d->cfg->fidelity, trace = t == 0 && tracing;
        if (fid) via = fid_be_wrap(&fw, via, ms, &d->pf, s->turns[t].max_new);
        if (trace) {
            trace_init(&tr, ctx.Hq, ctx.Hkv, ctx.D, ctx.N_new, ctx.S, d->opts->dump_trace_layer);
            kb_prefill_view pv = prefill_view(&d->pf, d->opts->dump_trace_layer);
            rc = trace_set_prefill(&tr, &pv, KB_MIN(d->cfg->window_max, pv.Wq), err);
            trace_set_origin(&tr, d->m->name, d->model_sha, d->m->hp.n_layer, s->task, s->id, method_params_to_json(&c->p));
            via = trace_be_wrap(&tw, via, &tr);
        }
        if (!rc)
            rc = decode_turn(d, ms, &via, fid ? &fw.seconds : NULL, first, pos, s->turns[t].max_new, s->turns[t].stop,
                             &o);
        if (fid) {
            if (!rc && fw.failed) {
                *err = fw.err;
                rc = KB_ERUNTIME;
            }
            if (!rc && fw.n) {
                fv.have = 1;
                fv.recall = fw.recall / fw.n;
                fv.mass = fw.mass / fw.n;
                fv.rel_err = fw.rel_err / fw.n;
            }
            fid_be_free(&fw);
            if (!rc) rc = teacher_forced(d, c, &ctx, &fv, err);
        }
        if (trace) {
            if (!rc) {
                char dir[1400];
                int at = snprintf(dir, sizeof dir, "%s/traces/", d->out_dir);
                snprintf(dir + at, sizeof dir - at, "%ld_%s_%s_L%d", seq, s->task, s->id, d->opts->dump_trace_layer);
                /* one directory right under traces/ whatever the id holds ('/', "..") */
                for (char *ch = dir + at; *ch; ch++)
                    if (!isalnum((unsigned char)*ch) && !strchr("._-", *ch)) *ch = '_';
                rc = trace_write(dir, &tr, err);
            }
            trace_free(&tr);
        }
        if (!rc) {
            char *pred = tokenizer_decode(d->m->tok, o.gen, o.n_gen, 0);
            add_row(d, seq, s, t, c, pos + 1, prompt_tokens, prefill_s, &o, pred, fid ? &fv : NULL);
            free(prev_answer);
            const kb_turn *tu = &s->turns[t];
            prev_answer = kb_strdup(appended_answer(d, tu, pred));
            free(pred);
            /* drop the generated tokens; keep the prompt's last token */
            methodset_rollback(ms, o.mark);
            pos += 1;
        }
        free(o.gen);
    }
    free(prev_answer);
    methodset_free(ms);
    return rc;
}

/* ------------------------------------------------------------ the run --- */

/* The cells with rows in samples.csv, by sample (seq) and cell index: a
 * resume of a paper-sized run (tens of thousands of rows) looks each one up
 * once per sample (a list searched linearly took ~12 s at 67k rows). */
typedef struct done_set {
    unsigned char *bit; /* [n_samples][n_cells] */
    int n_cells;
    long n; /* cells marked */
} done_set;

static void done_init(done_set *s, long n_samples, int n_cells) {
    s->bit = KB_CALLOC((size_t)(n_samples > 0 ? n_samples : 1) * (size_t)(n_cells > 0 ? n_cells : 1), 1);
    s->n_cells = n_cells;
    s->n = 0;
}

static int done_has(const done_set *s, long seq, int c) { return s->bit[(size_t)seq * s->n_cells + c]; }

static void done_mark(done_set *s, long seq, int c) {
    if (done_has(s, seq, c)) return;
    s->bit[(size_t)seq * s->n_cells + c] = 1;
    s->n++;
}

static void done_free(done_set *s) { free(s->bit); }

/* The config's cell with this label and budget (-1: none); rows name a cell
 * by them, unique per config (CONFIG.md). */
static int cell_index(const kb_sweep_config *cfg, const char *label, int budget) {
    for (int c = 0; c < cfg->n_cells; c++)
        if (!strcmp(cfg->cells[c].p.label, label) && (cfg->cells[c].p.budget < 0 ? -1 : cfg->cells[c].p.budget) == budget)
            return c;
    return -1;
}

static int file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* A latency part's latency.csv in out has every row (each distinct context x
 * each cell): a resume keeps it. */
static int latency_complete(const char *out, const kb_sweep_config *cfg) {
    char lpath[1200];
    snprintf(lpath, sizeof lpath, "%s/latency.csv", out);
    if (!file_exists(lpath)) return 0;
    int nctx = bench_distinct(cfg->latency.contexts, cfg->latency.n_contexts, NULL);
    kb_table lt;
    kb_err e = {0};
    if (table_read_csv(lpath, kb_latency_cols, kb_latency_ncols, &lt, &e)) return 0;
    int complete = lt.nrow == nctx * cfg->n_cells;
    table_free(&lt);
    return complete;
}

/* A resume (without --force) of a run that has finished: run.json says done,
 * every planned cell's rows are in samples.csv (done: checked against the
 * plan), summary.csv is there and so is a complete latency.csv where this
 * shard has a latency part. Such a resume has nothing to run and rewrites
 * nothing: run.json gains no session that did no work (run_all.sh resumes
 * every finished run it finds). */
static int run_finished(const char *out, const char *runjson, const kb_sweep_config *cfg,
                        const kb_sweep_opts *o, const done_set *done, long todo) {
    if ((long)done->n != todo * cfg->n_cells) return 0;
    char sum[1200];
    snprintf(sum, sizeof sum, "%s/summary.csv", out);
    if (!file_exists(sum)) return 0;
    if (cfg->latency.enabled && (o->shard_n <= 1 || o->shard_i == 0) && !latency_complete(out, cfg)) return 0;
    cJSON *old;
    if (json_load_file(runjson, &old, NULL)) return 0;
    const cJSON *st = cJSON_GetObjectItemCaseSensitive(old, "status");
    int done_status = cJSON_IsString(st) && !strcmp(st->valuestring, "done");
    cJSON_Delete(old);
    return done_status;
}

static int whole_long(const char *s, long *v) {
    char *end;
    errno = 0;
    *v = strtol(s, &end, 10);
    return *s && !*end && !errno;
}

int samples_check(const kb_table *t, const char *path, long n_samples, int shard_i, int shard_n,
                  kb_err *err) {
    for (int r = 0; r < t->nrow; r++) {
        const char *seq = table_get(t, r, "seq"), *b = table_get(t, r, "budget");
        long v;
        if (!whole_long(seq, &v) || v < 0 || v >= n_samples || v % shard_n != shard_i)
            return kb_fail(err, KB_EINPUT, "%s: data row %d: seq '%s', expected an integer in [0, %ld) "
                           "of shard %d/%d (seq %% %d == %d)", path, r + 1, seq, n_samples, shard_i,
                           shard_n, shard_n, shard_i);
        if (*b && (!whole_long(b, &v) || v < 1))
            return kb_fail(err, KB_EINPUT, "%s: data row %d: budget '%s', expected a positive integer "
                           "or nothing (Full KV)", path, r + 1, b);
        static const char *const sc[] = {"score", "score2"};
        for (int k = 0; k < 2; k++) {
            const char *x = table_get(t, r, sc[k]);
            char *end;
            double d = strtod(x, &end);
            if ((k == 0 || *x) && (!*x || *end || !(d >= 0 && d <= 1)))
                return kb_fail(err, KB_EINPUT, "%s: data row %d: %s '%s', expected a number in [0, 1]",
                               path, r + 1, sc[k], x);
        }
    }
    return 0;
}

/* Each row's task, sample and kind are the plan's at its seq and turn
 * (samples_check_cells checked seq and turn): rows of another plan, which
 * --resume --force would otherwise keep as finished cells, are refused. */
static int samples_match_plan(const kb_table *t, const char *path, const kb_sample_list *l, kb_err *err) {
    for (int r = 0; r < t->nrow; r++) {
        const kb_sample *s = &l->v[atol(table_get(t, r, "seq"))];
        const char *task = table_get(t, r, "task"), *id = table_get(t, r, "sample"), *kind = table_get(t, r, "kind");
        const char *want = row_kind(s, atoi(table_get(t, r, "turn")));
        if (strcmp(task, s->task) || strcmp(id, s->id) || strcmp(kind, want))
            return kb_fail(err, KB_EINPUT, "%s: data row %d: task '%s', sample '%s', kind '%s', but seq %s turn %s "
                           "of this run's plan is %s/%s, kind '%s': the rows are of another plan (run without "
                           "--resume to start again, or use --out for a new run directory)", path, r + 1, task, id,
                           kind, table_get(t, r, "seq"), table_get(t, r, "turn"), s->task, s->id, want);
    }
    return 0;
}

typedef struct row_cell {
    long seq;
    int cell, turn, row;
} row_cell;

static int cmp_row_cell(const void *a, const void *b) {
    const row_cell *x = a, *y = b;
    if (x->seq != y->seq) return x->seq < y->seq ? -1 : 1;
    if (x->cell != y->cell) return x->cell - y->cell;
    if (x->turn != y->turn) return x->turn - y->turn;
    return x->row - y->row;
}

static const char *cell_budget(char *buf, size_t cap, int budget) {
    if (budget < 0) return "none";
    snprintf(buf, cap, "%d", budget);
    return buf;
}

int samples_check_cells(const kb_table *t, const char *path, const kb_sweep_config *cfg,
                        const int *turns, long n_samples, int shard_i, int shard_n, int complete,
                        kb_err *err) {
    row_cell *rc_ = KB_MALLOC((size_t)(t->nrow ? t->nrow : 1) * sizeof *rc_);
    int rc = 0;
    char b1[32];
    for (int r = 0; r < t->nrow && !rc; r++) {
        const char *label = table_get(t, r, "label"), *b = table_get(t, r, "budget"),
                   *method = table_get(t, r, "method"), *turn = table_get(t, r, "turn");
        int budget = *b ? atoi(b) : -1; /* samples_check validated seq and budget */
        int c = cell_index(cfg, label, budget);
        long seq = atol(table_get(t, r, "seq")), tv;
        if (c < 0)
            rc = kb_fail(err, KB_EINPUT, "%s: data row %d: label '%s' with budget %s is not a cell of "
                         "the run's config", path, r + 1, label, cell_budget(b1, sizeof b1, budget));
        else if (strcmp(method, cfg->cells[c].p.ops->name))
            rc = kb_fail(err, KB_EINPUT, "%s: data row %d: method '%s', but the config's cell '%s' "
                         "runs '%s'", path, r + 1, method, label, cfg->cells[c].p.ops->name);
        else if (!whole_long(turn, &tv) || tv < 0 || tv >= (turns ? turns[seq] : 1L << 20))
            rc = kb_fail(err, KB_EINPUT, "%s: data row %d: turn '%s', expected an integer in [0, %ld)",
                         path, r + 1, turn, turns ? (long)turns[seq] : 1L << 20);
        else
            rc_[r] = (row_cell){seq, c, (int)tv, r};
    }
    if (!rc) qsort(rc_, (size_t)t->nrow, sizeof *rc_, cmp_row_cell);
    /* groups of one sample: its cells' rows must be turns 0..k-1 once each,
     * k the sample's turn count (from the plan, else the most any of its
     * cells has) */
    for (int i = 0; i < t->nrow && !rc;) {
        long seq = rc_[i].seq;
        int end = i, kmax = 0;
        for (int j = i; j < t->nrow && rc_[j].seq == seq; j++) {
            end = j + 1;
            kmax = KB_MAX(kmax, rc_[j].turn + 1);
        }
        int want = turns ? turns[seq] : kmax;
        for (int j = i; j < end && !rc;) {
            int c = rc_[j].cell, n = 0, e = j;
            char bb[32];
            const char *lab = cfg->cells[c].p.label, *bud = cell_budget(bb, sizeof bb, cfg->cells[c].p.budget);
            for (; e < end && rc_[e].cell == c && !rc; e++, n++) {
                if (e > j && rc_[e].turn == rc_[e - 1].turn)
                    rc = kb_fail(err, KB_EINPUT, "%s: data rows %d and %d are the same sample, cell and "
                                 "turn (seq %ld, label '%s', budget %s, turn %d)", path,
                                 rc_[e - 1].row + 1, rc_[e].row + 1, seq, lab, bud, rc_[e].turn);
                else if (rc_[e].turn != n)
                    rc = kb_fail(err, KB_EINPUT, "%s: seq %ld, label '%s', budget %s: no row of turn %d "
                                 "(a cell's rows are all its turns, written together)", path, seq, lab,
                                 bud, n);
            }
            if (!rc && n != want)
                rc = kb_fail(err, KB_EINPUT, "%s: seq %ld, label '%s', budget %s: no row of turn %d "
                             "(a cell's rows are all its turns, written together)", path, seq, lab, bud, n);
            j = e;
        }
        i = end;
    }
    /* complete: every sample of the shard has every cell */
    if (!rc && complete) {
        int at = 0;
        for (long seq = shard_i; seq < n_samples && !rc; seq += shard_n)
            for (int c = 0; c < cfg->n_cells && !rc; c++) {
                while (at < t->nrow && (rc_[at].seq < seq || (rc_[at].seq == seq && rc_[at].cell < c))) at++;
                if (at == t->nrow || rc_[at].seq != seq || rc_[at].cell != c)
                    rc = kb_fail(err, KB_EINPUT, "%s: seq %ld has no rows of cell '%s' budget %s", path, seq,
                                 cfg->cells[c].p.label, cell_budget(b1, sizeof b1, cfg->cells[c].p.budget));
            }
    }
    free(rc_);
    return rc;
}

static int gen_samples(drv *d, kb_sample_list *all, kb_err *err) {
    const kb_sweep_config *c = d->cfg;
    kb_dataset_env env;
    memset(&env, 0, sizeof env);
    env.seed = c->seed;
    env.haystack_dir = c->haystack;
    env.haystack_from = "key 'haystack'"; /* its errors are prefixed "CONFIG: tasks[i]" */
    env.data_dir = c->data_dir;
    env.configs_dir = "configs"; /* ./configs/prompts if there, else as ds_configs_dir says */
    env.n_ctx = d->m->hp.n_ctx_train;
    env.count_ctx = &d->rend;
    env.count_tokens = render_count_tokens;
    int rc = tasks_generate(c->tasks, c->path, &env, c->max_samples, all, err); /* as prompts */
    if (rc) return rc;
    for (int k = 0; k < all->n; k++)
        for (int t = 0; t < all->v[k].n_turns; t++)
            if (!metric_find(all->v[k].turns[t].metric))
                return kb_fail(err, KB_ERUNTIME, "%s/%s: unknown metric '%s'", all->v[k].task,
                               all->v[k].id, all->v[k].turns[t].metric);
    return 0;
}

static void fid_ref_free(fid_ref *r) {
    free(r->tok);
    free(r->logits);
    memset(r, 0, sizeof *r);
}

/* Full KV's greedy first turn, teacher-forcing reference of the fidelity
 * columns (the reference is by definition the exact cache: method "full"). */
static int fid_reference(drv *d, const kb_sample *s, const sample_prep *sp, kb_err *err) {
    fid_ref_free(&d->ref);
    kb_method_params p;
    int rc = method_params_default(method_find("full"), -1, &p, err);
    const kb_hparams *hp = &d->m->hp;
    kb_method_ctx ctx = sample_ctx(d, s, sp->L);
    kb_methodset *ms = NULL;
    if (!rc) rc = methodset_build(&p, &ctx, &d->pf, &ms, err);
    if (rc) return rc;
    kb_attn_backend be = methodset_backend(ms);
    int max_new = s->turns[0].max_new, V = hp->n_vocab;
    d->ref.tok = KB_MALLOC((size_t)(max_new + 1) * sizeof(int32_t));
    d->ref.logits = KB_MALLOC((size_t)max_new * V * sizeof(float));
    int32_t tok = sp->first.ids[sp->L - 1];
    stop_text st = {s->turns[0].stop, NULL, 0, 0}; /* as decode_turn stops */
    for (int i = 0; i < max_new && !stop_signal(); i++) {
        d->ref.tok[i] = tok;
        forward_decode(d->f, tok, sp->L - 1 + i, &be);
        memcpy(d->ref.logits + (size_t)i * V, d->f->logits, (size_t)V * sizeof(float));
        d->ref.steps++;
        tok = logits_argmax(d->f->logits, V);
        if (tokenizer_is_eog(d->m->tok, tok) || stop_text_add(&st, d->m, tok)) break;
    }
    free(st.text);
    methodset_free(ms);
    return stop_signal() ? 130 : 0;
}

/* The positions the turns after the first (or every request of a
 * multi-request sample) need, as run_cell places them, each checked against
 * the model context: `need` is the largest. A later turn's text holds the
 * previous answer: the gold one is known; with own_answers it is counted as
 * its turn's max_new tokens over an empty answer (its re-encoding may differ a
 * little; run_cell checks each turn again). */
static int later_turns_fit(drv *d, const kb_sample *s, int n_first, int *need, kb_err *err) {
    int n_ctx = d->m->hp.n_ctx_train, pos = n_first, rc = 0;
    for (int t = s->multi_request ? 0 : 1; t < s->n_turns && !rc; t++) {
        const kb_turn *tu = &s->turns[t], *prev = t ? &s->turns[t - 1] : NULL;
        kb_tokens x;
        int at, extra = 0;
        if (s->multi_request) {
            rc = render_request(&d->rend, s, t, &x, err);
            at = n_first; /* every request follows the shared prefix */
        } else {
            if (d->cfg->own_answers) extra = prev->max_new; /* its answer is not known yet */
            rc = render_next_turn(&d->rend, s, t, appended_answer(d, prev, NULL), &x, err);
            at = pos;
        }
        if (rc) break;
        long total = (long)at + extra + x.n + tu->max_new;
        if (x.n < 1 || total > n_ctx)
            rc = kb_fail(err, KB_EINPUT,
                         "%s/%s: %s %d needs %ld tokens (%d before it, %d of its own, %d new), "
                         "more than the model context %d%s",
                         s->task, s->id, s->multi_request ? "request" : "turn", t, total, at + extra,
                         x.n, tu->max_new, n_ctx, x.n < 1 ? " (or renders to no token)" : "");
        *need = (int)KB_MAX((long)*need, total);
        pos += extra + x.n; /* its prompt, then the kept last prompt token's slot is reused */
        tokens_free(&x);
    }
    return rc;
}

/* The sample's first prompt (the shared prefix of a multi-request one),
 * rendered and checked to fit the model with its new tokens, and so are its
 * later turns or requests (later_turns_fit); `need` (if not NULL): the most
 * positions any of them uses. */
static int render_fitting(drv *d, const kb_sample *s, kb_tokens *t, int *need_out, kb_err *err) {
    int rc = s->multi_request ? render_shared_prefix(&d->rend, s, t, err) : render_first_turn(&d->rend, s, t, err);
    if (rc) return rc;
    int n_ctx = d->m->hp.n_ctx_train, need = t->n + max_new_of(s);
    if (t->n < 2 || need > n_ctx)
        rc = kb_fail(err, KB_EINPUT, "%s/%s: prompt of %d tokens + %d new does not fit the model "
                     "context %d (or is shorter than 2 tokens)",
                     s->task, s->id, t->n, max_new_of(s), n_ctx);
    if (!rc) rc = later_turns_fit(d, s, t->n, &need, err);
    if (rc) tokens_free(t);
    else if (need_out) *need_out = need;
    return rc;
}

/* The most selection-buffer bytes any cell keeps at a cache of `tokens`
 * (one cell's method state exists at a time). */
static double cells_select_bytes(const drv *d, long tokens) {
    double most = 0;
    for (int i = 0; i < d->cfg->n_cells; i++)
        most = fmax(most, methodset_select_bytes(&d->cfg->cells[i].p, d->m->hp.n_layer, d->m->hp.n_head, tokens));
    return most;
}

/* Before anything runs or is written (and in --dry-run): every prompt of
 * this shard fits the model, and so does every context of the latency part
 * (bench_context_fit, the rule the latency part applies). A bad plan fails
 * here, not hours into the run. */
static int plan_check(drv *d, const kb_sweep_config *cfg, const kb_sample_list *samples,
                      const kb_sweep_opts *o, kb_err *err) {
    int n_ctx = d->m->hp.n_ctx_train, dt = cfg->latency.decode_tokens;
    for (int i = 0; cfg->latency.enabled && i < cfg->latency.n_contexts; i++) {
        int c = cfg->latency.contexts[i];
        if (bench_context_fit(c, dt, n_ctx) < 0)
            return kb_fail(err, KB_EINPUT, "%s: key 'latency': context %d + %d decode tokens does not fit "
                           "the model context of %d tokens", cfg->path, c, dt, n_ctx);
    }
    if (cfg->latency.enabled &&
        bench_contexts_distinct(cfg->latency.contexts, cfg->latency.n_contexts, dt, n_ctx, err))
        return kb_err_prefix(err, "%s: key 'latency'", cfg->path);
    /* the parameters whose range depends on the model (the layers check them
     * again, for replay and generate) */
    for (int i = 0; i < cfg->n_cells; i++) {
        const kb_method_params *p = &cfg->cells[i].p;
        if (methodset_check_model(p, d->m->hp.n_layer, d->m->hp.head_dim, err))
            return kb_err_prefix(err, "%s: methods entry '%s'", cfg->path, p->label);
    }
    int most = 0, at = -1;
    for (int i = 0; i < samples->n; i++) {
        if (o->shard_n > 1 && i % o->shard_n != o->shard_i) continue;
        kb_tokens t;
        memset(&t, 0, sizeof t);
        int need, rc = render_fitting(d, &samples->v[i], &t, &need, err);
        if (rc) {
            kb_err_prefix(err, "%s", cfg->path);
            return rc;
        }
        tokens_free(&t);
        if (need > most) most = need, at = i;
    }
    /* the memory the longest sample needs, as prepare_sample checks it again
     * before each prefill (what is available may change during the run) */
    int rc = at < 0 ? 0 : model_check_memory_extra(d->m, most, cfg->fidelity ? 3 : 2, cells_select_bytes(d, most),
                                                   cfg->kv_dtype, err);
    if (rc) kb_err_prefix(err, "%s: %s/%s", cfg->path, samples->v[at].task, samples->v[at].id);
    return rc;
}

static int prepare_sample(drv *d, const kb_sample *s, sample_prep *sp, kb_err *err) {
    memset(sp, 0, sizeof *sp);
    int need;
    int rc = render_fitting(d, s, &sp->first, &need, err);
    if (rc) return rc;
    sp->L = sp->first.n;
    /* the shared prefill + one method's copy (+ the fidelity history) and
     * that method's selection buffers */
    rc = model_check_memory_extra(d->m, need, d->cfg->fidelity ? 3 : 2, cells_select_bytes(d, need),
                                  d->cfg->kv_dtype, err);
    if (rc) {
        kb_err_prefix(err, "%s/%s", s->task, s->id);
        tokens_free(&sp->first);
        return rc;
    }
    prefill_reset(&d->pf);
    kb_attn_backend be = prefill_backend(&d->pf);
    int n = s->multi_request ? sp->first.n : sp->first.n - 1;
    double t0 = kb_now();
    rc = forward_prefill(d->f, sp->first.ids, n, 0, &be, NULL, 0, err);
    sp->prefill_s = kb_now() - t0;
    if (!rc && d->cfg->fidelity && !s->multi_request) rc = fid_reference(d, s, sp, err);
    if (rc) tokens_free(&sp->first);
    return rc;
}

/* ---- the plan's fingerprint ---- */

static void fp_str(kb_sha256 *h, const char *v) {
    uint64_t n = v ? (uint64_t)strlen(v) : UINT64_MAX; /* NULL differs from "" */
    sha256_update(h, &n, sizeof n);
    if (v) sha256_update(h, v, (size_t)n);
}

static void fp_int(kb_sha256 *h, int64_t v) { sha256_update(h, &v, sizeof v); }

/* SHA-256 of every sample of the plan as the methods see it: ids, texts,
 * answers and scoring rules, each string length-prefixed, in plan order. The
 * samples come from the config, the seed and files outside it (the wording
 * files, the haystack corpus and word lists of the Debian packages, dataset
 * files), so two runs agree on this exactly when they ran the same samples;
 * `--resume` and `merge` require it. Token counts are left out (the model's
 * sha256 stands for them). */
void samples_fingerprint(const kb_sample_list *l, char hex[65]) {
    kb_sha256 h;
    sha256_init(&h);
    fp_int(&h, l->n);
    for (int i = 0; i < l->n; i++) {
        const kb_sample *s = &l->v[i];
        fp_str(&h, s->task);
        fp_str(&h, s->id);
        fp_int(&h, s->chat);
        fp_str(&h, s->system);
        fp_str(&h, s->shared_prefix);
        fp_int(&h, s->multi_request);
        fp_int(&h, (int64_t)llround(s->depth * 1e6));
        fp_int(&h, s->truncate_to);
        fp_int(&h, s->n_classes);
        for (int k = 0; k < s->n_classes; k++) fp_str(&h, s->all_classes[k]);
        fp_int(&h, s->n_turns);
        for (int t = 0; t < s->n_turns; t++) {
            const kb_turn *u = &s->turns[t];
            fp_str(&h, u->user);
            fp_str(&h, u->answer_prefix);
            fp_int(&h, u->n_answers);
            for (int k = 0; k < u->n_answers; k++) fp_str(&h, u->answers[k]);
            fp_str(&h, u->gold);
            fp_int(&h, u->max_new);
            fp_str(&h, u->metric);
            fp_str(&h, u->metric2);
            fp_str(&h, u->stop);
            fp_int(&h, u->first_line);
        }
    }
    sha256_final(&h, hex);
}

int sweep_run(const kb_sweep_opts *o, kb_err *err) {
    kb_sweep_config cfg;
    int rc = sweep_config_load_with(o->config, o->overrides, o->n_overrides, &cfg, err);
    if (rc) return rc;
    drv d;
    memset(&d, 0, sizeof d);
    d.cfg = &cfg;
    d.opts = o;
    int lock_fd = -1; /* the run directory's lock (dir_lock) */
    char out[1024];
    if (o->out_dir) snprintf(out, sizeof out, "%s", o->out_dir);
    else snprintf(out, sizeof out, "results/%s", cfg.name);
    const char *model_spec = o->model ? o->model : cfg.model;
    model_spec = cli_model_path(model_spec);
    int threads = o->threads ? o->threads : cfg.threads;
    if (threads) {
        omp_set_num_threads(threads);
    }
    rc = model_load(model_spec, &d.m, err);
    if (rc) goto done_cfg;
    if (!d.m->tok) {
        rc = kb_fail(err, KB_EINPUT, "%s: a sweep needs a tokenizer; synthetic models are for "
                     "`kvbench bench` only", model_spec);
        goto done_model;
    }
    d.rend.tok = d.m->tok;
    d.rend.fmt = tokenizer_chat_format(d.m->tok);

    /* the plan */
    kb_sample_list samples = {0};
    if ((rc = gen_samples(&d, &samples, err))) goto done_samples;
    if ((rc = plan_check(&d, &cfg, &samples, o, err))) goto done_samples;
    long todo = 0;
    for (int i = 0; i < samples.n; i++)
        if (o->shard_n <= 1 || i % o->shard_n == o->shard_i) todo++;
    /* before --dry-run, which must refuse what the run would */
    if (o->dump_trace_layer >= d.m->hp.n_layer) {
        rc = kb_fail(err, KB_EINPUT, "--dump-trace %d: the model has layers 0..%d", o->dump_trace_layer,
                     d.m->hp.n_layer - 1);
        goto done_samples;
    }
    if (o->dump_trace_layer >= 0) { /* traces go into the run's own traces/, never through a link */
        char tdir[1200];
        struct stat st;
        snprintf(tdir, sizeof tdir, "%s/traces", out);
        if (!lstat(tdir, &st) && !S_ISDIR(st.st_mode)) {
            rc = kb_fail(err, KB_EINPUT, "--dump-trace: %s is %s, not a directory of the run: the traces would "
                         "be written outside it (move it away, or use --out for a new run directory)", tdir,
                         S_ISLNK(st.st_mode) ? "a symbolic link" : "a file");
            goto done_samples;
        }
    }
    if (o->dry_run) {
        printf("run: %s -> %s\nmodel: %s\nsamples: %d (this shard %ld), cells per sample: %d\n",
               cfg.path, out, model_spec, samples.n, todo, cfg.n_cells);
        for (int c = 0; c < cfg.n_cells; c++)
            printf("  cell %d: %s budget %d params %s\n", c, cfg.cells[c].p.label,
                   cfg.cells[c].p.budget, cfg.cells[c].params_json);
        goto done_samples;
    }

    snprintf(d.out_dir, sizeof d.out_dir, "%s", out);
    /* run directory and manifest */
    if ((rc = make_dirs(out, err)) || (rc = dir_lock(out, &lock_fd, err))) goto done_samples;
    snprintf(d.samples_path, sizeof d.samples_path, "%s/samples.csv", out);
    char runjson[1200];
    snprintf(runjson, sizeof runjson, "%s/run.json", out);
    kb_runinfo ri;
    runinfo_init(&ri, &cfg, d.m, model_spec, o);
    {
        const cJSON *sha = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(ri.j, "model"), "sha256");
        snprintf(d.model_sha, sizeof d.model_sha, "%s", cJSON_IsString(sha) ? sha->valuestring : "unknown");
    }
    {
        const char **prov = KB_CALLOC((size_t)samples.n + 1, sizeof *prov);
        int np = 0;
        for (int i = 0; i < samples.n; i++) {
            const char *p = samples.v[i].provenance;
            int seen = !p;
            for (int k = 0; k < np && !seen; k++) seen = !strcmp(prov[k], p);
            if (!seen) prov[np++] = p;
        }
        char fp[65];
        samples_fingerprint(&samples, fp);
        runinfo_set_data(&ri, prov, np, samples.n, fp);
        free(prov);
    }
    if (file_exists(runjson)) {
        if (!o->resume && !o->force) {
            rc = kb_fail(err, KB_EINPUT, "%s already holds a run: use --resume to continue it, "
                         "--out DIR for a new one, or --force to overwrite it", out);
            goto done_ri;
        }
        if (o->resume && !o->force && (rc = runinfo_check_same(&ri, runjson, err))) goto done_ri;
    } else if (!o->force) {
        /* tables without their run.json (a merge or a copy cut short): their rows
         * cannot be checked, and a new run would remove them */
        const char *advice = o->resume ? "--force to resume anyway, or --out DIR for a new run"
                                       : "--force to overwrite it, or --out DIR for a new run";
        if ((rc = run_dir_check_tables(out, o->resume, advice, err))) goto done_ri;
    }
    /* a new run: nothing of a previous one stays (run_dir_clear) */
    if (!o->resume && (rc = run_dir_clear(out, err))) goto done_ri;
    run_dir_clean_stale(out); /* what a killed run was writing */
    done_set done = {0}; /* made once the rows are checked (the gotos above it free nothing of it) */
    if (o->resume && file_exists(d.samples_path)) {
        if ((rc = table_read_csv(d.samples_path, kb_samples_cols, kb_samples_ncols, &d.rows, err)))
            goto done_ri;
        if ((rc = samples_check(&d.rows, d.samples_path, samples.n, o->shard_n > 1 ? o->shard_i : 0,
                                o->shard_n > 1 ? o->shard_n : 1, err))) {
            table_free(&d.rows);
            goto done_ri;
        }
        int *turns = KB_MALLOC((size_t)(samples.n ? samples.n : 1) * sizeof *turns);
        for (int i = 0; i < samples.n; i++) turns[i] = samples.v[i].n_turns;
        rc = samples_check_cells(&d.rows, d.samples_path, &cfg, turns, samples.n,
                                 o->shard_n > 1 ? o->shard_i : 0, o->shard_n > 1 ? o->shard_n : 1, 0, err);
        free(turns);
        if (!rc) rc = samples_match_plan(&d.rows, d.samples_path, &samples, err);
        if (rc) {
            table_free(&d.rows);
            goto done_ri;
        }
        /* a cell is done when its rows are present: they are all its turns
         * (written per cell, checked above) */
        done_init(&done, samples.n, cfg.n_cells);
        for (int r = 0; r < d.rows.nrow; r++) {
            const char *b = table_get(&d.rows, r, "budget");
            done_mark(&done, atol(table_get(&d.rows, r, "seq")),
                      cell_index(&cfg, table_get(&d.rows, r, "label"), *b ? atoi(b) : -1));
        }
    } else {
        table_init(&d.rows, kb_samples_cols, kb_samples_ncols);
        done_init(&done, samples.n, cfg.n_cells);
    }
    if (o->resume && !o->force && file_exists(runjson) && run_finished(out, runjson, &cfg, o, &done, todo)) {
        fprintf(stderr, "kvbench sweep: %s has finished (run.json: done, %ld rows): nothing to resume, "
                "nothing rewritten%s\n", out, (long)d.rows.nrow,
                o->dump_trace_layer >= 0 ? "; --dump-trace writes traces of the cells a run runs, so none "
                                           "(a new run, without --resume, traces every sample)"
                                         : "");
        goto done_rows;
    }
    /* the sessions before this one (also one that wrote no row) */
    if (o->resume && file_exists(runjson)) runinfo_add_earlier(&ri, runjson, d.rows.nrow);
    if ((rc = runinfo_write(&ri, runjson, "running", err))) goto done_rows;

    int W = cfg.window_max;
    const kb_hparams *hp = &d.m->hp;
    prefill_init(&d.pf, hp->n_layer, hp->n_head, hp->n_head_kv, hp->head_dim, cfg.kv_dtype, W,
                 1024); /* grows with the samples */
    d.f = forward_new(d.m, 256);
    /* a signal (SIGINT, SIGTERM, SIGHUP) stops the current cell; the finished
     * ones are kept and run.json says interrupted (stop.h) */
    stop_begin();

    kb_progress pg;
    progress_init(&pg, todo * cfg.n_cells);
    long units = 0;
    for (int i = 0; i < samples.n && !rc; i++) {
        if (o->shard_n > 1 && i % o->shard_n != o->shard_i) continue;
        const kb_sample *s = &samples.v[i];
        int pending = 0;
        for (int c = 0; c < cfg.n_cells; c++) pending += !done_has(&done, i, c);
        if (!pending) {
            units += cfg.n_cells;
            progress_update(&pg, units, s->id);
            continue;
        }
        sample_prep sp;
        char what[300];
        snprintf(what, sizeof what, "%s/%s prefill", s->task, s->id);
        progress_update(&pg, units, what);
        if ((rc = prepare_sample(&d, s, &sp, err))) break;
        for (int c = 0; c < cfg.n_cells && !rc; c++) {
            const kb_cell *cell = &cfg.cells[c];
            if (!done_has(&done, i, c)) {
                if (o->reprefill && c > 0) {
                    tokens_free(&sp.first);
                    if ((rc = prepare_sample(&d, s, &sp, err))) break;
                }
                int before = d.rows.nrow;
                rc = run_cell(&d, i, s, cell, &sp, c == 0 && o->dump_trace_layer >= 0, err);
                if (rc) {
                    /* drop a partial cell's rows: the table only holds whole cells */
                    while (d.rows.nrow > before) {
                        d.rows.nrow--;
                        for (int x = 0; x < d.rows.ncol; x++) free(d.rows.rows[d.rows.nrow][x]);
                        free(d.rows.rows[d.rows.nrow]);
                    }
                    if (rc != 130) kb_err_prefix(err, "%s/%s, %s budget %d", s->task, s->id,
                                                 cell->p.label, cell->p.budget);
                    break;
                }
                int wrc = table_write_csv(&d.rows, d.samples_path, err);
                if (wrc) {
                    rc = wrc;
                    break;
                }
            }
            units++;
            snprintf(what, sizeof what, "%s/%s %s B=%d", s->task, s->id, cell->p.label, cell->p.budget);
            progress_update(&pg, units, what);
        }
        tokens_free(&sp.first);
    }
    progress_end(&pg);
    /* the latency part (harness/bench_methods.c): after every accuracy cell,
     * in shard 0 only; a resumed run keeps a complete latency.csv */
    if (!rc && cfg.latency.enabled && (o->shard_n <= 1 || o->shard_i == 0)) {
        if (!(o->resume && latency_complete(out, &cfg))) {
            kb_lat_opts lo;
            memset(&lo, 0, sizeof lo);
            lo.cmd = "sweep";
            lo.model = model_spec;
            memcpy(lo.contexts, cfg.latency.contexts, sizeof lo.contexts);
            lo.n_contexts = cfg.latency.n_contexts;
            lo.decode_tokens = cfg.latency.decode_tokens;
            lo.reps = cfg.latency.reps;
            lo.rounds = cfg.latency.rounds;
            lo.kv = cfg.kv_dtype;
            lo.threads = threads;
            lo.fill = KB_FILL_AUTO;
            lo.out_dir = out;
            fprintf(stderr, "kvbench sweep: latency part: %d cells x %d contexts\n", cfg.n_cells,
                    bench_distinct(cfg.latency.contexts, cfg.latency.n_contexts, NULL));
            rc = bench_latency(&lo, cfg.cells, cfg.n_cells, err);
            if (stop_signal()) rc = 130;
            else if (rc) kb_err_prefix(err, "latency part");
        }
    }
    stop_end();
    if (rc == 130) kb_fail(err, 130, "interrupted by %s: %d rows kept in %s; continue with --resume",
                           stop_signal_name(stop_signal()),
                           d.rows.nrow, d.samples_path);
    {
        /* tables stay consistent even when interrupted or failed */
        kb_err e2 = {0};
        int wrc = table_write_csv(&d.rows, d.samples_path, &e2);
        char sum[1200];
        snprintf(sum, sizeof sum, "%s/summary.csv", out);
        if (!wrc) wrc = summary_write(d.samples_path, sum, "full", &e2);
        /* run.json is written even when a table was not: a run whose last
         * write failed is "failed" ("interrupted" after a signal), not left
         * "running" */
        const char *status = rc == 130 ? "interrupted" : rc || wrc ? "failed" : "done";
        kb_err e3 = {0};
        int jrc = runinfo_write(&ri, runjson, status, wrc ? &e3 : &e2);
        if (!wrc) wrc = jrc;
        if (wrc && !rc) {
            *err = e2;
            rc = wrc;
        } else if (wrc) { /* the run's own error is reported by the caller: this one too */
            fprintf(stderr, "kvbench sweep: %s\n", e2.msg);
        }
        if (!rc)
            fprintf(stderr, "kvbench sweep: wrote %s/{samples.csv,summary.csv,%srun.json}\n", out,
                    cfg.latency.enabled && (o->shard_n <= 1 || o->shard_i == 0) ? "latency.csv," : "");
    }
    forward_free(d.f);
    prefill_free(&d.pf);
    fid_ref_free(&d.ref);
done_rows:
    table_free(&d.rows);
    done_free(&done);
done_ri:
    runinfo_free(&ri);
    dir_unlock(lock_fd);
    if (rc == 130 && stop_signal()) rc = 128 + stop_signal(); /* the shell's code for that signal */
done_samples:
    sample_list_free(&samples);
done_model:
    model_free(d.m);
done_cfg:
    sweep_config_free(&cfg);
    return rc;
}
