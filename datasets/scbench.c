/* scbench.c - SCBench (shared context, multi-turn), benchmarks.md §3:
 * loaders for the 12 official tasks (jsonl with id, context, multi_turns:
 * [{input, answer, options?, task?, name?}], lang/repo for repoqa) and four
 * SCBench-like generators (kv, prefix_suffix, vt, mf).
 *
 * Modes: "multi_turn" (default; golden context: the driver appends each
 * turn's gold answer before the next question) and "multi_request" (the
 * context is a shared prefix; each question is an independent request).
 *
 * Config keys, loaders: file, limit, turns, mode, max_len, prompts.
 * Generators: lengths, samples, turns, mode, prompts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/ds_internal.h"
#include "harness/json.h"
#include "harness/textnorm.h"

enum { SC_LOADER, SC_KV, SC_PREFIX_SUFFIX, SC_VT, SC_MF };

typedef struct sc_spec {
    const char *name;
    int gen;           /* SC_LOADER or the generator kind */
    const char *metric;
    int max_new;
} sc_spec;

static const sc_spec sc_specs[] = {
    {"scbench_kv", SC_LOADER, "substring", 150},
    {"scbench_prefix_suffix", SC_LOADER, "substring", 150},
    {"scbench_vt", SC_LOADER, "scbench_string_match_all", 30},
    {"scbench_repoqa", SC_LOADER, "repoqa", 1024},
    {"scbench_qa_eng", SC_LOADER, "scbench_qa_eng", 40},
    {"scbench_qa_chn", SC_LOADER, "scbench_qa_chn", 40},
    {"scbench_choice_eng", SC_LOADER, "scbench_choice", 40},
    {"scbench_many_shot", SC_LOADER, "scbench_many_shot", 10},
    {"scbench_summary", SC_LOADER, "rouge_lsum", 200},
    {"scbench_mf", SC_LOADER, "scbench_mf", 5},
    {"scbench_summary_with_needles", SC_LOADER, NULL, 0}, /* per turn: summary / passkey */
    {"scbench_repoqa_and_kv", SC_LOADER, NULL, 0},        /* per turn: repoqa / kv */
    {"scbench_kv_like", SC_KV, "substring", 150},
    {"scbench_prefix_suffix_like", SC_PREFIX_SUFFIX, "substring", 150},
    {"scbench_vt_like", SC_VT, "scbench_string_match_all", 30},
    {"scbench_mf_like", SC_MF, "scbench_mf", 5},
};

/* Sub-tasks of the mixed tasks: metric and max new tokens per turn. */
static const sc_spec sc_subtasks[] = {
    {"scbench_summary", 0, "rouge_lsum", 800},
    {"scbench_passkey", 0, "scbench_passkey", 15},
    {"scbench_repoqa", 0, "repoqa", 1024},
    {"scbench_kv", 0, "substring", 80},
};

static const char *const loader_keys[] = {"file", "limit", "turns", "mode", "max_len", "prompts",
                                          NULL};
static const char *const gen_keys[] = {"lengths", "samples", "turns", "mode", "prompts", NULL};

/* Tokens allowed per later turn for its question and the appended answer
 * beyond max_new, when fitting or truncating a multi-turn sample. */
#define TURN_ALLOWANCE 64

typedef struct sc_ctx {
    const sc_spec *sp;
    const kb_dataset_env *env;
    ds_wording wf;
    const char *sep, *ctx_tpl, *query_tpl;
    int multi_request;
    int max_turns;  /* cap on turns (0: all) */
    long max_len;   /* context budget for truncation (0: none) */
    char file[1024];
    kb_sample_list *out;
    long limit, taken;
} sc_ctx;

static int W(sc_ctx *c, const char *key, const tpl_var *v, int n, char **out, kb_err *err) {
    const char *t;
    int rc = wording_get(&c->wf, c->sp->name, key, &t, err);
    if (rc) return rc;
    char where[1200];
    snprintf(where, sizeof where, "%s: %s.%s", c->wf.path, c->sp->name, key);
    return tpl_format(t, v, n, where, out, err);
}

/* SCBench's mf question (eval_utils.py): "What is " +
 * re.findall("The .+ is", input)[0].lower()[:-3] + "?": the leftmost "The "
 * with, on the same line, the last " is" at least one character after it;
 * Python's str.lower (textnorm). NULL when the input has no such span. */
char *scbench_mf_prefix(const char *input) {
    ustr u = {0}, low = {0};
    ustr_from_utf8(&u, input);
    const uint32_t *v = u.v;
    size_t n = u.n;
    char *out = NULL;
    for (size_t s = 0; s + 8 <= n && !out; s++) {
        if (v[s] != 'T' || v[s + 1] != 'h' || v[s + 2] != 'e' || v[s + 3] != ' ') continue;
        size_t e = s + 4;
        while (e < n && v[e] != '\n') e++;
        for (size_t i = e; i >= s + 8 && !out; i--) /* the match is v[s, i) */
            if (v[i - 3] == ' ' && v[i - 2] == 'i' && v[i - 1] == 's') {
                ustr_lower(&low, v + s, i - s);
                char *mid = utf8_from_u32(low.v, low.n - 3);
                sbuf b = {0};
                sb_printf(&b, "What is %s?", mid);
                free(mid);
                out = sb_take(&b);
            }
    }
    ustr_free(&u);
    ustr_free(&low);
    return out;
}

/* Whether the wording's template `key` of this task has the placeholder {name}. */
static int wording_uses(sc_ctx *c, const char *key, const char *name) {
    const char *t;
    kb_err e = {0};
    return !wording_get(&c->wf, c->sp->name, key, &t, &e) && tpl_uses(t, name);
}

/* ---------------------------------------------------------------- sample assembly */

typedef struct sc_turn {
    char *query;     /* formatted question */
    char **answers;
    int n_answers;
    char *gold;
    const char *metric;
    int max_new;
    const char *kind;
} sc_turn;

static void sc_turn_free(sc_turn *t) {
    free(t->query);
    for (int i = 0; i < t->n_answers; i++) free(t->answers[i]);
    free(t->answers);
    free(t->gold);
}

/* Middle-truncates text (at UTF-8 character boundaries) to keep a fraction. */
static char *middle_cut(const char *text, size_t keep) {
    size_t n = strlen(text);
    if (keep >= n) return kb_strdup(text);
    size_t head = keep / 2, tail = keep - head;
    while (head > 0 && ((unsigned char)text[head] & 0xC0) == 0x80) head--;
    size_t ts = n - tail;
    while (ts < n && ((unsigned char)text[ts] & 0xC0) == 0x80) ts++;
    char *o = KB_MALLOC(head + (n - ts) + 1);
    memcpy(o, text, head);
    memcpy(o + head, text + ts, n - ts);
    o[head + (n - ts)] = 0;
    return o;
}

/* Builds the sample from a formatted context and its turns (consumed). */
static int sc_assemble(sc_ctx *c, const char *id, char *context, sc_turn *tu, int nt,
                       kb_sample *s, kb_err *err) {
    (void)err;
    snprintf(s->task, sizeof s->task, "%s", c->sp->name);
    snprintf(s->id, sizeof s->id, "%s", id);
    s->chat = 1;
    s->multi_request = c->multi_request;
    sbuf pre = {0};
    sb_put(&pre, context);
    sb_put(&pre, c->sep);
    free(context);
    char *prefix = sb_take(&pre);
    for (int t = 0; t < nt; t++) {
        kb_turn *k = sample_add_turn(s);
        turn_set(k, tu[t].metric, tu[t].max_new, tu[t].kind);
        if (c->multi_request || t == 0) {
            sbuf u = {0};
            sb_put(&u, prefix);
            sb_put(&u, tu[t].query);
            k->user = sb_take(&u);
        } else {
            k->user = kb_strdup(tu[t].query);
        }
        k->answers = tu[t].answers;
        k->n_answers = tu[t].n_answers;
        tu[t].answers = NULL;
        tu[t].n_answers = 0;
        k->gold = tu[t].gold;
        tu[t].gold = NULL;
    }
    if (c->multi_request)
        s->shared_prefix = prefix;
    else
        free(prefix);
    return 0;
}

static void set_provenance(sc_ctx *c, kb_sample *s, const char *what) {
    sbuf pv = {0};
    sb_printf(&pv, "wording=%s; %s", c->wf.path, what);
    s->provenance = sb_take(&pv);
}

/* Context budget: with max_len set (or the model context), the first turn's
 * user text is truncated so the whole conversation fits. Multi-turn: the
 * driver middle-truncates tokens (truncate_to); multi-request: the shared
 * context is cut here by characters until the first request fits, because
 * every request reuses the shared prefix as is. */
static int sc_budget(sc_ctx *c, kb_sample *s, char **context_io, sc_turn *tu, int nt,
                     int *rebuild, kb_err *err) {
    *rebuild = 0;
    long max_len = c->max_len ? c->max_len : c->env->n_ctx;
    if (max_len <= 0) return 0;
    long need = 0, mx = 0;
    for (int t = 0; t < nt; t++) {
        need += tu[t].max_new + TURN_ALLOWANCE;
        if (tu[t].max_new > mx) mx = tu[t].max_new;
    }
    if (!c->multi_request) {
        long keep = max_len - need;
        if (keep < 256)
            return kb_fail(err, KB_EINPUT,
                           "%s: max_len %ld leaves %ld tokens for the context after %d turns of "
                           "answers; raise max_len or lower turns",
                           s->id, max_len, keep, nt);
        s->truncate_to = (int)keep;
        return 0;
    }
    if (!c->env->count_tokens) return 0;
    long limit = max_len - mx - TURN_ALLOWANCE;
    int tok = ds_count(c->env, s);
    if (tok < 0) return kb_fail(err, KB_ERUNTIME, "token counting failed");
    if (tok <= limit) return 0;
    /* shrink the context by characters until the first request fits */
    char *orig = *context_io;
    size_t lo = 0, hi = strlen(orig);
    while (hi - lo > 64) {
        size_t mid = (lo + hi) / 2;
        char *cut = middle_cut(orig, mid), *ctx = NULL;
        tpl_var cv[] = {{"context", cut}};
        int rc = W(c, "context", cv, 1, &ctx, err);
        free(cut);
        if (rc) return rc;
        kb_sample t;
        memset(&t, 0, sizeof t);
        t.chat = 1;
        kb_turn k;
        memset(&k, 0, sizeof k);
        sbuf u = {0};
        sb_put(&u, ctx);
        sb_put(&u, c->sep);
        sb_put(&u, tu[0].query);
        free(ctx);
        k.user = u.s;
        t.turns = &k;
        t.n_turns = 1;
        int n = ds_count(c->env, &t);
        sb_free(&u);
        if (n >= 0 && n <= limit)
            lo = mid;
        else
            hi = mid;
    }
    if (lo == 0)
        return kb_fail(err, KB_EINPUT,
                       "%s: max_len %ld is too small for the question and %ld new tokens", s->id,
                       max_len, mx);
    *context_io = middle_cut(orig, lo);
    free(orig);
    *rebuild = 1; /* build again with the cut context */
    return 0;
}

/* ---------------------------------------------------------------- loaders */

static char *json_text(const cJSON *v) {
    if (cJSON_IsString(v)) return kb_strdup(v->valuestring);
    if (cJSON_IsNumber(v)) {
        char b[64];
        double d = v->valuedouble;
        /* Python's str() of what json.loads makes of the number. cJSON keeps no
         * int / float difference: an integral value below 2^63 is taken for an
         * int (its digits; -0 is 0; a float literal 1.0 also reads "1"), and
         * the JSONL reader has refused integers beyond 2^53, which a double
         * cannot hold. Other values are floats: the fewest significant digits
         * that read back as d (0.1 is "0.1", not %.17g's 0.10000000000000001),
         * in exponent form from 1e16 up and below 1e-4, as repr */
        if (d > -9.2e18 && d < 9.2e18 && d == floor(d)) {
            snprintf(b, sizeof b, "%.0f", d == 0 ? 0.0 : d);
        } else {
            for (int p = 1; p <= 17; p++) {
                snprintf(b, sizeof b, fabs(d) >= 1e16 ? "%.*e" : "%.*g", fabs(d) >= 1e16 ? p - 1 : p, d);
                if (strtod(b, NULL) == d) break;
            }
        }
        return kb_strdup(b);
    }
    return NULL;
}

/* answer: string | number | array of those. */
static int parse_answer(const cJSON *a, char ***out, int *n, char **gold, kb_err *err) {
    *out = NULL;
    *n = 0;
    if (cJSON_IsArray(a)) {
        int cnt = cJSON_GetArraySize(a), i = 0;
        if (!cnt) return kb_fail(err, KB_EINPUT, "'answer' is an empty array");
        *out = KB_CALLOC((size_t)cnt, sizeof **out);
        sbuf g = {0};
        for (const cJSON *x = a->child; x; x = x->next, i++) {
            char *t = json_text(x);
            if (!t) {
                for (int k = 0; k < i; k++) free((*out)[k]);
                free(*out);
                sb_free(&g);
                return kb_fail(err, KB_EINPUT, "'answer'[%d]: expected a string or number", i);
            }
            (*out)[i] = t;
            if (i) sb_put(&g, ", ");
            sb_put(&g, t);
        }
        *n = cnt;
        *gold = sb_take(&g);
        return 0;
    }
    char *t = json_text(a);
    if (!t) return kb_fail(err, KB_EINPUT, "'answer': expected a string, number or array");
    *out = KB_MALLOC(sizeof **out);
    (*out)[0] = t;
    *n = 1;
    *gold = kb_strdup(t);
    return 0;
}

static const sc_spec *subtask(const char *name) {
    for (size_t i = 0; i < KB_ARRAY_LEN(sc_subtasks); i++)
        if (!strcmp(sc_subtasks[i].name, name)) return &sc_subtasks[i];
    return NULL;
}

static int load_line(const cJSON *obj, long lineno, void *ctx, kb_err *err) {
    sc_ctx *c = ctx;
    if (c->limit && c->taken >= c->limit) return 0;
    const char *name = c->sp->name;
    char id[sizeof ((kb_sample *)0)->id];
    const cJSON *idv = cJSON_GetObjectItemCaseSensitive(obj, "id");
    char *ids = idv ? json_text(idv) : NULL;
    int bad = ids && ds_id_check(ids, "id", err);
    if (ids) snprintf(id, sizeof id, "%s", ids);
    else snprintf(id, sizeof id, "line%ld", lineno);
    free(ids);
    if (bad) return KB_EINPUT;
    /* context: a string, or for scbench_mf a list of numbers (shown as Python prints it) */
    const cJSON *cv = cJSON_GetObjectItemCaseSensitive(obj, "context");
    if (!cv) cv = cJSON_GetObjectItemCaseSensitive(obj, "input");
    char *context_raw = NULL;
    if (cJSON_IsString(cv)) {
        context_raw = kb_strdup(cv->valuestring);
    } else if (cJSON_IsArray(cv)) {
        sbuf b = {0};
        sb_putc(&b, '[');
        int i = 0;
        for (const cJSON *x = cv->child; x; x = x->next, i++) {
            char *t = cJSON_IsNumber(x) ? json_text(x) : NULL;
            if (!t) {
                sb_free(&b);
                return kb_fail(err, KB_EINPUT, "'context'[%d]: expected a number", i);
            }
            if (i) sb_put(&b, ", ");
            sb_put(&b, t);
            free(t);
        }
        sb_putc(&b, ']');
        context_raw = sb_take(&b);
    } else {
        return kb_fail(err, KB_EINPUT, "expected 'context' (a string%s)",
                       strcmp(name, "scbench_mf") ? "" : " or a list of numbers");
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(obj, "multi_turns");
    if (!cJSON_IsArray(mt) || !cJSON_GetArraySize(mt)) {
        free(context_raw);
        return kb_fail(err, KB_EINPUT, "expected 'multi_turns': a non-empty array of {input, answer}");
    }
    int nt = cJSON_GetArraySize(mt);
    if (c->max_turns && nt > c->max_turns) nt = c->max_turns;
    sc_turn *tu = KB_CALLOC((size_t)nt, sizeof *tu);
    int rc = 0, t = 0;
    const int is_choice = !strcmp(name, "scbench_choice_eng");
    for (const cJSON *x = mt->child; x && t < nt && !rc; x = x->next, t++) {
        const cJSON *in = cJSON_GetObjectItemCaseSensitive(x, "input");
        const cJSON *an = cJSON_GetObjectItemCaseSensitive(x, "answer");
        if (!cJSON_IsObject(x) || !cJSON_IsString(in) || !an) {
            rc = kb_fail(err, KB_EINPUT, "multi_turns[%d]: expected an object with 'input' "
                                         "(string) and 'answer'", t);
            break;
        }
        if ((rc = parse_answer(an, &tu[t].answers, &tu[t].n_answers, &tu[t].gold, err))) {
            kb_err_prefix(err, "multi_turns[%d]", t);
            break;
        }
        const sc_spec *sub = c->sp;
        if (!c->sp->metric) { /* mixed task: the turn says which sub-task it is */
            const cJSON *tk = cJSON_GetObjectItemCaseSensitive(x, "task");
            sub = cJSON_IsString(tk) ? subtask(tk->valuestring) : NULL;
            if (!sub) {
                rc = kb_fail(err, KB_EINPUT, "multi_turns[%d]: expected 'task' naming a sub-task "
                                             "(scbench_summary, scbench_passkey, scbench_repoqa "
                                             "or scbench_kv)", t);
                break;
            }
        }
        tu[t].metric = sub->metric;
        tu[t].max_new = sub->max_new;
        tu[t].kind = sub->name;
        tpl_var v[11];
        int nv = 0;
        v[nv++] = (tpl_var){"input", in->valuestring};
        v[nv++] = (tpl_var){"question", in->valuestring};
        char *mf_q = !strcmp(c->sp->name, "scbench_mf") ? scbench_mf_prefix(in->valuestring) : NULL;
        if (mf_q) v[nv++] = (tpl_var){"prefix", mf_q};
        else if (!strcmp(c->sp->name, "scbench_mf") && wording_uses(c, "query", "prefix")) {
            rc = kb_fail(err, KB_EINPUT, "multi_turns[%d]: 'input' has no \"The ... is\" to make the "
                         "query's {prefix} from (SCBench's mf rule)", t);
            break;
        }
        if (is_choice) {
            const cJSON *op = cJSON_GetObjectItemCaseSensitive(x, "options");
            if (!cJSON_IsArray(op) || cJSON_GetArraySize(op) != 4) {
                rc = kb_fail(err, KB_EINPUT, "multi_turns[%d]: expected 'options': 4 strings", t);
                break;
            }
            static const char *const lower[] = {"option_a", "option_b", "option_c", "option_d"};
            static const char *const upper[] = {"OPTION_A", "OPTION_B", "OPTION_C", "OPTION_D"};
            int i = 0, letter = -1;
            for (const cJSON *o = op->child; o; o = o->next, i++) {
                if (!cJSON_IsString(o)) {
                    rc = kb_fail(err, KB_EINPUT, "multi_turns[%d].options[%d]: expected a string", t, i);
                    break;
                }
                v[nv++] = (tpl_var){lower[i], o->valuestring};
                v[nv++] = (tpl_var){upper[i], o->valuestring};
                if (letter < 0 && tu[t].n_answers && !strcmp(o->valuestring, tu[t].answers[0]))
                    letter = i;
            }
            if (rc) break;
            if (letter < 0) {
                rc = kb_fail(err, KB_EINPUT, "multi_turns[%d]: 'answer' is not one of the options", t);
                break;
            }
            /* SCBench's label: [option text, option letter] */
            char l[2] = {(char)('A' + letter), 0};
            /* an array answer had more than one element: keep the first
             * (leaked before; found by tests/fuzz/fuzz_jsonl.c) */
            for (int k = 1; k < tu[t].n_answers; k++) free(tu[t].answers[k]);
            tu[t].answers = KB_REALLOC(tu[t].answers, 2 * sizeof *tu[t].answers);
            tu[t].answers[1] = kb_strdup(l);
            tu[t].n_answers = 2;
        }
        rc = W(c, "query", v, nv, &tu[t].query, err);
        free(mf_q);
        if (rc) break;
    }
    /* repoqa: the other functions of the repository are the distractors */
    if (!rc)
        for (int a = 0; a < nt; a++) {
            if (strcmp(tu[a].kind, "scbench_repoqa")) continue;
            for (int b = 0; b < nt; b++) {
                if (b == a || strcmp(tu[b].kind, "scbench_repoqa")) continue;
                tu[a].answers = KB_REALLOC(tu[a].answers,
                                           (size_t)(tu[a].n_answers + 1) * sizeof *tu[a].answers);
                tu[a].answers[tu[a].n_answers++] = kb_strdup(tu[b].answers[0]);
            }
        }
    for (int attempt = 0; !rc; attempt++) {
        char *context = NULL;
        tpl_var cvv[] = {{"context", context_raw}};
        if ((rc = W(c, "context", cvv, 1, &context, err))) break;
        kb_sample tmp;
        memset(&tmp, 0, sizeof tmp);
        tmp.depth = -1;
        tmp.target_tokens = tmp.prompt_tokens = tmp.context_words = -1;
        /* sc_assemble takes the answers and gold: give it copies, so that a
         * second attempt (after cutting the context) can build again */
        sc_turn *cp = KB_CALLOC((size_t)nt, sizeof *cp);
        for (int k = 0; k < nt; k++) {
            cp[k] = tu[k];
            cp[k].answers = KB_MALLOC(((size_t)tu[k].n_answers + 1) * sizeof *cp[k].answers);
            for (int a = 0; a < tu[k].n_answers; a++) cp[k].answers[a] = kb_strdup(tu[k].answers[a]);
            cp[k].gold = tu[k].gold ? kb_strdup(tu[k].gold) : NULL;
        }
        sc_assemble(c, id, context, cp, nt, &tmp, err);
        free(cp);
        int rebuild = 0;
        if (attempt == 0) rc = sc_budget(c, &tmp, &context_raw, tu, nt, &rebuild, err);
        if (rc || rebuild) {
            sample_free(&tmp);
            continue;
        }
        tmp.prompt_tokens = ds_count(c->env, &tmp);
        sbuf what = {0};
        sb_printf(&what, "data=%s", c->file);
        set_provenance(c, &tmp, what.s);
        sb_free(&what);
        kb_sample *s = samples_push(c->out);
        *s = tmp;
        c->taken++;
        break;
    }
    for (int k = 0; k < nt; k++) sc_turn_free(&tu[k]);
    free(tu);
    free(context_raw);
    return rc;
}

/* ---------------------------------------------------------------- generators */

/* One generated instance: formatted context + turns, from (seed, units). */
static int gen_instance(sc_ctx *c, kb_rng *r, long units, int nturns, char **context,
                        sc_turn *tu, double *depth, kb_err *err) {
    const sc_spec *sp = c->sp;
    sbuf b = {0};
    int rc = 0;
    *depth = -1;
    for (int t = 0; t < nturns; t++) {
        memset(&tu[t], 0, sizeof tu[t]);
        tu[t].metric = sp->metric;
        tu[t].max_new = sp->max_new;
        tu[t].kind = sp->name;
    }
    if (sp->gen == SC_KV) {
        if (units < nturns) units = nturns;
        char (*keys)[37] = KB_MALLOC((size_t)units * sizeof *keys);
        char (*vals)[37] = KB_MALLOC((size_t)units * sizeof *vals);
        sb_putc(&b, '{');
        for (long i = 0; i < units; i++) {
            rng_uuid4(r, keys[i]);
            rng_uuid4(r, vals[i]);
            sb_printf(&b, "%s\"%s\": \"%s\"", i ? ", " : "", keys[i], vals[i]);
        }
        sb_putc(&b, '}');
        int *ask = KB_MALLOC((size_t)nturns * sizeof *ask);
        rng_sample(r, (int)units, nturns, ask);
        for (int t = 0; t < nturns && !rc; t++) {
            tpl_var v[] = {{"key", keys[ask[t]]}};
            rc = W(c, "query", v, 1, &tu[t].query, err);
            tu[t].answers = KB_MALLOC(sizeof *tu[t].answers);
            tu[t].answers[0] = kb_strdup(vals[ask[t]]);
            tu[t].n_answers = 1;
            tu[t].gold = kb_strdup(vals[ask[t]]);
        }
        *depth = (double)ask[0] / (double)units;
        free(ask);
        free(keys);
        free(vals);
    } else if (sp->gen == SC_PREFIX_SUFFIX) {
        static const char alnum[] =
            "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        if (units < nturns) units = nturns;
        char (*str)[33] = KB_MALLOC((size_t)units * sizeof *str);
        for (long i = 0; i < units; i++) {
            int len = (int)rng_range(r, 16, 32);
            for (int k = 0; k < len; k++) str[i][k] = alnum[rng_below(r, 62)];
            str[i][len] = 0;
        }
        int *ask = KB_MALLOC((size_t)nturns * sizeof *ask);
        rng_sample(r, (int)units, nturns, ask);
        for (int t = 0; t < nturns; t++) {
            /* the asked string must be the only one with its prefix and suffix */
            for (;;) {
                const char *a = str[ask[t]];
                size_t al = strlen(a);
                int clash = 0;
                for (long i = 0; i < units && !clash; i++) {
                    if (i == ask[t]) continue;
                    size_t il = strlen(str[i]);
                    clash = !strncmp(str[i], a, 4) && !strcmp(str[i] + il - 4, a + al - 4);
                }
                if (!clash) break;
                for (size_t k = 0; k < al; k++) str[ask[t]][k] = alnum[rng_below(r, 62)];
            }
        }
        for (long i = 0; i < units; i++) {
            if (i) sb_putc(&b, '\n');
            sb_put(&b, str[i]);
        }
        for (int t = 0; t < nturns && !rc; t++) {
            const char *a = str[ask[t]];
            size_t al = strlen(a);
            char pre[8], suf[8];
            snprintf(pre, sizeof pre, "%.4s", a);
            snprintf(suf, sizeof suf, "%s", a + al - 4);
            tpl_var v[] = {{"prefix", pre}, {"suffix", suf}};
            rc = W(c, "query", v, 2, &tu[t].query, err);
            tu[t].answers = KB_MALLOC(sizeof *tu[t].answers);
            tu[t].answers[0] = kb_strdup(a);
            tu[t].n_answers = 1;
            tu[t].gold = kb_strdup(a);
        }
        *depth = (double)ask[0] / (double)units;
        free(ask);
        free(str);
    } else if (sp->gen == SC_VT) {
        /* nturns chains of 5 variables (4 hops), statements interleaved at
         * random noise-line positions, each chain in its own order */
        int nst = 5 * nturns;
        char (*names)[8] = KB_MALLOC((size_t)nst * sizeof *names);
        long *values = KB_MALLOC((size_t)nturns * sizeof *values);
        for (int i = 0; i < nst; i++) {
            int dup;
            do {
                for (int k = 0; k < 5; k++) names[i][k] = (char)('A' + rng_below(r, 26));
                names[i][5] = 0;
                dup = 0;
                for (int j = 0; j < i && !dup; j++) dup = !strcmp(names[i], names[j]);
            } while (dup);
        }
        for (int ch = 0; ch < nturns; ch++) {
            int dup;
            do {
                values[ch] = rng_range(r, 10000, 99999);
                dup = 0;
                for (int j = 0; j < ch; j++) dup |= values[j] == values[ch];
            } while (dup);
        }
        char **stmt = KB_CALLOC((size_t)nst, sizeof *stmt);
        int *left = KB_MALLOC((size_t)nturns * sizeof *left);
        for (int ch = 0; ch < nturns; ch++) left[ch] = 5;
        for (int i = 0; i < nst && !rc; i++) {
            int ch;
            do ch = (int)rng_below(r, (uint64_t)nturns);
            while (!left[ch]);
            int hop = 5 - left[ch]--;
            char val[16];
            snprintf(val, sizeof val, "%ld", values[ch]);
            tpl_var v[] = {{"var", names[ch * 5 + hop]},
                           {"value", val},
                           {"src", hop ? names[ch * 5 + hop - 1] : ""}};
            rc = W(c, hop ? "assign_var" : "assign_value", v, 3, &stmt[i], err);
        }
        const char *noise = NULL;
        if (!rc) rc = wording_get(&c->wf, sp->name, "noise", &noise, err);
        if (!rc) {
            long n = units > nst ? units : nst;
            int *pos = KB_MALLOC((size_t)nst * sizeof *pos);
            rng_sample(r, (int)n, nst, pos);
            for (int i = 1; i < nst; i++)
                for (int j = i; j > 0 && pos[j - 1] > pos[j]; j--) {
                    int tmp = pos[j];
                    pos[j] = pos[j - 1];
                    pos[j - 1] = tmp;
                }
            int next = 0;
            for (long i = 0; i <= n; i++) {
                while (next < nst && pos[next] == i) {
                    if (b.n) sb_putc(&b, '\n');
                    sb_put(&b, stmt[next++]);
                }
                if (i == n) break;
                if (b.n) sb_putc(&b, '\n');
                sb_put(&b, noise);
            }
            free(pos);
        }
        for (int t = 0; t < nturns && !rc; t++) {
            char val[16];
            snprintf(val, sizeof val, "%ld", values[t]);
            tpl_var v[] = {{"value", val}};
            rc = W(c, "query", v, 1, &tu[t].query, err);
            tu[t].answers = KB_MALLOC(5 * sizeof *tu[t].answers);
            sbuf g = {0};
            for (int k = 0; k < 5; k++) {
                tu[t].answers[k] = kb_strdup(names[t * 5 + k]);
                sb_printf(&g, "%s%s", k ? ", " : "", names[t * 5 + k]);
            }
            tu[t].n_answers = 5;
            tu[t].gold = sb_take(&g);
        }
        for (int i = 0; i < nst; i++) free(stmt[i]);
        free(stmt);
        free(left);
        free(names);
        free(values);
    } else { /* SC_MF */
        long n = units | 1; /* odd, so the median is one of the numbers */
        if (n < 3) n = 3;
        long *v = KB_MALLOC((size_t)n * sizeof *v), *sorted = KB_MALLOC((size_t)n * sizeof *sorted);
        sb_putc(&b, '[');
        for (long i = 0; i < n; i++) {
            v[i] = rng_range(r, 0, 999);
            sorted[i] = v[i];
            sb_printf(&b, "%s%ld", i ? ", " : "", v[i]);
        }
        sb_putc(&b, ']');
        for (long i = 1; i < n; i++) /* insertion sort: n is at most a few thousand */
            for (long j = i; j > 0 && sorted[j - 1] > sorted[j]; j--) {
                long tmp = sorted[j];
                sorted[j] = sorted[j - 1];
                sorted[j - 1] = tmp;
            }
        static const char *const qk[] = {"query_largest", "query_smallest", "query_median"};
        for (int t = 0; t < nturns && !rc; t++) {
            int kind = t % 3;
            rc = W(c, qk[kind], NULL, 0, &tu[t].query, err);
            long ans = kind == 0 ? sorted[n - 1] : kind == 1 ? sorted[0] : sorted[n / 2];
            char a[32];
            snprintf(a, sizeof a, "%ld", ans);
            tu[t].answers = KB_MALLOC(sizeof *tu[t].answers);
            tu[t].answers[0] = kb_strdup(a);
            tu[t].n_answers = 1;
            tu[t].gold = kb_strdup(a);
        }
        free(v);
        free(sorted);
    }
    char *raw = sb_take(&b);
    if (!rc) {
        tpl_var v[] = {{"context", raw}};
        rc = W(c, "context", v, 1, context, err);
    }
    free(raw);
    return rc;
}

static int gen_sample(sc_ctx *c, long units, int nturns, int target, int idx, kb_sample *s,
                      kb_err *err) {
    kb_rng r;
    rng_derive(&r, c->env->seed, c->sp->name, (uint64_t)target, (uint64_t)idx);
    sc_turn *tu = KB_CALLOC((size_t)nturns, sizeof *tu);
    char *context = NULL;
    double depth;
    int rc = gen_instance(c, &r, units, nturns, &context, tu, &depth, err);
    if (!rc) {
        char id[64];
        snprintf(id, sizeof id, "L%d_%d", target, idx);
        memset(s, 0, sizeof *s);
        s->target_tokens = target;
        s->prompt_tokens = s->context_words = -1;
        sc_assemble(c, id, context, tu, nturns, s, err);
        s->depth = depth;
    } else {
        free(context);
    }
    for (int t = 0; t < nturns; t++) sc_turn_free(&tu[t]);
    free(tu);
    return rc;
}

/* Tokens a generated sample needs beyond its first prompt. */
static int gen_allowance(const sc_ctx *c, int nturns) {
    if (c->multi_request) return c->sp->max_new + TURN_ALLOWANCE / 2;
    return nturns * c->sp->max_new + (nturns - 1) * TURN_ALLOWANCE;
}

static int gen_fits(sc_ctx *c, long units, int nturns, int target, int idx, int *fits,
                    kb_err *err) {
    kb_sample s;
    int rc = gen_sample(c, units, nturns, target, idx, &s, err);
    if (rc) {
        sample_free(&s);
        return rc;
    }
    int tok = ds_count(c->env, &s);
    sample_free(&s);
    if (tok < 0) return kb_fail(err, KB_ERUNTIME, "token counting failed");
    *fits = tok + gen_allowance(c, nturns) <= target;
    return 0;
}

static int sc_generate_gen(sc_ctx *c, const cJSON *cfg, kb_err *err) {
    long samples, turns;
    int rc;
    if ((rc = json_get_int(cfg, "task config", "samples", 0, 1, 100000, 10, &samples, err)) ||
        (rc = json_get_int(cfg, "task config", "turns", 0, 1, 64, 3, &turns, err)))
        return rc;
    long *lengths;
    int nl;
    if ((rc = ds_get_int_list(cfg, "lengths", 64, 1L << 24, &lengths, &nl, err))) return rc;
    if (!nl) {
        if (c->env->n_ctx <= 0) return kb_fail(err, KB_EINPUT, "task config: missing key 'lengths'");
        lengths = KB_MALLOC(sizeof *lengths);
        lengths[nl++] = c->env->n_ctx;
    }
    if (!c->env->count_tokens) {
        free(lengths);
        return kb_fail(err, KB_EINPUT, "%s fits prompts to token lengths and needs the model's "
                                       "tokenizer (kvbench prompts: -m MODEL or --counter)",
                       c->sp->name);
    }
    kb_sample_list mine = {0};
    for (int li = 0; li < nl && !rc; li++) {
        int target = (int)lengths[li];
        /* grow, then binary-search the units on sample 0 */
        long lo = 0, hi = 8;
        int fits = 0;
        for (;;) {
            if ((rc = gen_fits(c, hi, (int)turns, target, 0, &fits, err))) break;
            if (!fits) break;
            lo = hi;
            if (hi >= (1L << 22)) break;
            hi *= 2;
        }
        while (!rc && hi - lo > 1) {
            long mid = (lo + hi) / 2;
            if ((rc = gen_fits(c, mid, (int)turns, target, 0, &fits, err))) break;
            if (fits)
                lo = mid;
            else
                hi = mid;
        }
        if (!rc && lo < 1)
            rc = kb_fail(err, KB_EINPUT, "target length %d is too short for %s with %ld turns",
                         target, c->sp->name, turns);
        for (int i = 0; i < samples && !rc; i++) {
            long u = lo;
            for (;;) {
                kb_sample *s = samples_push(&mine);
                if ((rc = gen_sample(c, u, (int)turns, target, i, s, err))) break;
                int tok = ds_count(c->env, s);
                if (tok < 0) {
                    rc = kb_fail(err, KB_ERUNTIME, "token counting failed");
                    break;
                }
                if (tok + gen_allowance(c, (int)turns) <= target || u <= 1) {
                    s->prompt_tokens = tok;
                    set_provenance(c, s, "generated (SCBench-like)");
                    break;
                }
                sample_free(s);
                mine.n--;
                long step = u / 64;
                u -= step > 0 ? step : 1;
            }
        }
    }
    free(lengths);
    if (!rc) samples_move(c->out, &mine);
    sample_list_free(&mine);
    return rc;
}

/* ---------------------------------------------------------------- entry */

static int sc_generate(const sc_spec *sp, const cJSON *cfg, const kb_dataset_env *env,
                       kb_sample_list *out, kb_err *err) {
    int rc = ds_check_keys(cfg, sp->gen == SC_LOADER ? loader_keys : gen_keys, err);
    if (rc) return rc;
    sc_ctx c;
    memset(&c, 0, sizeof c);
    c.sp = sp;
    c.env = env;
    const char *mode;
    if ((rc = json_get_string(cfg, "task config", "mode", 0, "multi_turn", &mode, err))) return rc;
    if (!strcmp(mode, "multi_request"))
        c.multi_request = 1;
    else if (strcmp(mode, "multi_turn"))
        return kb_fail(err, KB_EINPUT, "task config: key 'mode': expected \"multi_turn\" or "
                                       "\"multi_request\", got \"%s\"", mode);
    if ((rc = wording_load(cfg, env, "scbench", &c.wf, err))) return rc;
    if ((rc = wording_get(&c.wf, NULL, "separator", &c.sep, err))) goto out;
    kb_sample_list mine = {0};
    c.out = &mine;
    if (sp->gen != SC_LOADER) {
        rc = sc_generate_gen(&c, cfg, err);
    } else {
        long turns, limit, max_len;
        const char *file;
        if ((rc = json_get_int(cfg, "task config", "turns", 0, 0, 1000, 0, &turns, err)) ||
            (rc = json_get_int(cfg, "task config", "limit", 0, 0, 1L << 30, 0, &limit, err)) ||
            (rc = json_get_int(cfg, "task config", "max_len", 0, 0, 1L << 24, 0, &max_len, err)))
            goto out_list;
        char def[128];
        snprintf(def, sizeof def, "%s.jsonl", sp->name);
        if ((rc = json_get_path(cfg, "task config", "file", 0, def, &file, err))) goto out_list;
        char *path = ds_data_path(env, file);
        rc = ds_path_copy(c.file, sizeof c.file, path, "SCBench data file", err);
        free(path);
        if (rc) goto out_list;
        if (!ds_file_exists(c.file)) {
            rc = kb_fail(err, KB_EINPUT, "%s: SCBench data file not found (set the task's "
                                         "'file' or the sweep's data_dir; files come from "
                                         "huggingface.co/datasets/microsoft/SCBench)",
                         c.file);
            goto out_list;
        }
        c.max_turns = (int)turns;
        c.limit = limit;
        c.max_len = max_len;
        rc = jsonl_foreach(c.file, load_line, &c, err);
        if (!rc && !mine.n) rc = kb_fail(err, KB_EINPUT, "%s: no samples", c.file);
    }
    if (!rc) samples_move(out, &mine);
out_list:
    sample_list_free(&mine);
out:
    wording_free(&c.wf);
    return rc;
}

#define SC_GEN(i)                                                                          \
    static int gen_##i(const cJSON *cfg, const kb_dataset_env *env, kb_sample_list *out,  \
                       kb_err *err) {                                                      \
        return sc_generate(&sc_specs[i], cfg, env, out, err);                              \
    }
SC_GEN(0)
SC_GEN(1)
SC_GEN(2)
SC_GEN(3)
SC_GEN(4)
SC_GEN(5)
SC_GEN(6)
SC_GEN(7)
SC_GEN(8)
SC_GEN(9)
SC_GEN(10)
SC_GEN(11)
SC_GEN(12)
SC_GEN(13)
SC_GEN(14)
SC_GEN(15)

const kb_task_ops scbench_tasks[] = {
    {"scbench_kv", "scbench", loader_keys, gen_0},
    {"scbench_prefix_suffix", "scbench", loader_keys, gen_1},
    {"scbench_vt", "scbench", loader_keys, gen_2},
    {"scbench_repoqa", "scbench", loader_keys, gen_3},
    {"scbench_qa_eng", "scbench", loader_keys, gen_4},
    {"scbench_qa_chn", "scbench", loader_keys, gen_5},
    {"scbench_choice_eng", "scbench", loader_keys, gen_6},
    {"scbench_many_shot", "scbench", loader_keys, gen_7},
    {"scbench_summary", "scbench", loader_keys, gen_8},
    {"scbench_mf", "scbench", loader_keys, gen_9},
    {"scbench_summary_with_needles", "scbench", loader_keys, gen_10},
    {"scbench_repoqa_and_kv", "scbench", loader_keys, gen_11},
    {"scbench_kv_like", "scbench", gen_keys, gen_12},
    {"scbench_prefix_suffix_like", "scbench", gen_keys, gen_13},
    {"scbench_vt_like", "scbench", gen_keys, gen_14},
    {"scbench_mf_like", "scbench", gen_keys, gen_15},
};
const int scbench_task_count = (int)KB_ARRAY_LEN(scbench_tasks);
