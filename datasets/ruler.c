/* ruler.c - RULER's 11 synthetic tasks (niah_*, vt, cwe, fwe) and its two QA
 * tasks (qa_1 = SQuAD v2 dev JSON, qa_2 = HotpotQA dev distractor JSON, loaded
 * from the user's files), benchmarks.md §2.
 *
 * Every sample is built from its own generator stream (seed, task, target
 * length, sample index), so its content does not depend on the other
 * samples. Length fitting: a haystack of `units` (noise lines, prose words,
 * distractor needles, listed words, coded words or documents) is grown and
 * binary-searched for the largest size whose prompt tokens + max_new fit the
 * target, measured on sample 0; each sample then steps down from that size
 * until it fits (RULER's procedure, with a binary instead of a linear search).
 *
 * Config keys: lengths, samples, max_new, prompts (+ file for qa_1/qa_2). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "datasets/ds_internal.h"
#include "datasets/haystack.h"
#include "harness/json.h"

typedef enum { HAY_NOISE, HAY_ESSAY, HAY_NEEDLE } hay_kind;
typedef enum { VAL_NUMBERS, VAL_WORDS, VAL_UUIDS } val_kind;
typedef enum { R_NIAH, R_VT, R_CWE, R_FWE, R_QA } ruler_kind;

typedef struct ruler_spec {
    const char *name;
    ruler_kind kind;
    hay_kind hay;
    val_kind k, v;           /* needle key and value types */
    int num_k, num_v, num_q; /* keys inserted, values per key, keys asked */
    int max_new;
    const char *metric;
    const char *qa_format;   /* "squad" or "hotpotqa" for R_QA */
} ruler_spec;

static const ruler_spec specs[] = {
    {"niah_single_1", R_NIAH, HAY_NOISE, VAL_WORDS, VAL_NUMBERS, 1, 1, 1, 128, "string_match_all", NULL},
    {"niah_single_2", R_NIAH, HAY_ESSAY, VAL_WORDS, VAL_NUMBERS, 1, 1, 1, 128, "string_match_all", NULL},
    {"niah_single_3", R_NIAH, HAY_ESSAY, VAL_WORDS, VAL_UUIDS, 1, 1, 1, 128, "string_match_all", NULL},
    {"niah_multikey_1", R_NIAH, HAY_ESSAY, VAL_WORDS, VAL_NUMBERS, 4, 1, 1, 128, "string_match_all", NULL},
    {"niah_multikey_2", R_NIAH, HAY_NEEDLE, VAL_WORDS, VAL_NUMBERS, 1, 1, 1, 128, "string_match_all", NULL},
    {"niah_multikey_3", R_NIAH, HAY_NEEDLE, VAL_UUIDS, VAL_UUIDS, 1, 1, 1, 128, "string_match_all", NULL},
    {"niah_multivalue", R_NIAH, HAY_ESSAY, VAL_WORDS, VAL_NUMBERS, 1, 4, 1, 128, "string_match_all", NULL},
    {"niah_multiquery", R_NIAH, HAY_ESSAY, VAL_WORDS, VAL_NUMBERS, 4, 1, 4, 128, "string_match_all", NULL},
    {"vt", R_VT, HAY_NOISE, 0, 0, 0, 0, 0, 30, "string_match_all", NULL},
    {"cwe", R_CWE, HAY_NOISE, 0, 0, 0, 0, 0, 120, "string_match_all", NULL},
    {"fwe", R_FWE, HAY_NOISE, 0, 0, 0, 0, 0, 50, "string_match_all", NULL},
    {"qa_1", R_QA, HAY_NOISE, 0, 0, 0, 0, 0, 32, "string_match_part", "squad"},
    {"qa_2", R_QA, HAY_NOISE, 0, 0, 0, 0, 0, 32, "string_match_part", "hotpotqa"},
};

static const char *const synth_keys[] = {"lengths", "samples", "max_new", "prompts", NULL};
static const char *const qa_keys[] = {"lengths", "samples", "max_new", "prompts", "file", NULL};

/* ---------------------------------------------------------------- QA data */

typedef struct qa_item {
    char *query;
    char **outputs;
    int n_out;
    int *gold;   /* documents that hold the answer */
    int n_gold;
    int *more;   /* SQuAD: the other paragraphs of the same article */
    int n_more;
} qa_item;

typedef struct qa_data {
    char **docs; /* distinct documents, sorted (strcmp: code point order) */
    int n_docs;
    qa_item *qas;
    int n_qas;
} qa_data;

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int doc_index(const qa_data *q, const char *d) {
    int lo = 0, hi = q->n_docs - 1;
    while (lo <= hi) {
        int mid = (lo + hi) / 2, c = strcmp(d, q->docs[mid]);
        if (!c) return mid;
        if (c < 0)
            hi = mid - 1;
        else
            lo = mid + 1;
    }
    return -1;
}

static void qa_free(qa_data *q) {
    for (int i = 0; i < q->n_docs; i++) free(q->docs[i]);
    free(q->docs);
    for (int i = 0; i < q->n_qas; i++) {
        free(q->qas[i].query);
        for (int k = 0; k < q->qas[i].n_out; k++) free(q->qas[i].outputs[k]);
        free(q->qas[i].outputs);
        free(q->qas[i].gold);
        free(q->qas[i].more);
    }
    free(q->qas);
    memset(q, 0, sizeof *q);
}

static void push_doc(char ***v, int *n, int *cap, char *d) {
    if (*n == *cap) *v = KB_REALLOC(*v, (size_t)(*cap = *cap ? *cap * 2 : 256) * sizeof **v);
    (*v)[(*n)++] = d;
}

static qa_item *push_qa(qa_data *q, int *cap) {
    if (q->n_qas == *cap) q->qas = KB_REALLOC(q->qas, (size_t)(*cap = *cap ? *cap * 2 : 256) * sizeof *q->qas);
    qa_item *it = &q->qas[q->n_qas++];
    memset(it, 0, sizeof *it);
    return it;
}

static void dedup_docs(qa_data *q, char **all, int n) {
    if (n) qsort(all, (size_t)n, sizeof *all, cmp_str);
    q->docs = KB_MALLOC(((size_t)n + 1) * sizeof *q->docs);
    for (int i = 0; i < n; i++) {
        if (q->n_docs && !strcmp(q->docs[q->n_docs - 1], all[i])) continue;
        q->docs[q->n_docs++] = kb_strdup(all[i]);
    }
}

#define QA_BAD(...) kb_fail(err, KB_EINPUT, __VA_ARGS__)

/* SQuAD v2: {"data": [{"paragraphs": [{"context", "qas": [{"question",
 * "answers": [{"text"}], "is_impossible"}]}]}]}; impossible questions skipped. */
static int load_squad(const cJSON *root, const char *path, qa_data *q, kb_err *err) {
    const cJSON *data = cJSON_GetObjectItemCaseSensitive(root, "data");
    if (!cJSON_IsArray(data)) return QA_BAD("%s: expected SQuAD JSON with a 'data' array", path);
    char **all = NULL;
    int na = 0, ca = 0, i = 0;
    for (const cJSON *d = data->child; d; d = d->next, i++) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(d, "paragraphs");
        if (!cJSON_IsArray(ps)) {
            free(all);
            return QA_BAD("%s: data[%d]: expected a 'paragraphs' array", path, i);
        }
        int j = 0;
        for (const cJSON *p = ps->child; p; p = p->next, j++) {
            const cJSON *c = cJSON_GetObjectItemCaseSensitive(p, "context");
            if (!cJSON_IsString(c)) {
                free(all);
                return QA_BAD("%s: data[%d].paragraphs[%d]: expected a string 'context'", path, i, j);
            }
            push_doc(&all, &na, &ca, c->valuestring);
        }
    }
    dedup_docs(q, all, na);
    free(all);
    int cq = 0;
    i = 0;
    for (const cJSON *d = data->child; d; d = d->next, i++) {
        const cJSON *ps = cJSON_GetObjectItemCaseSensitive(d, "paragraphs");
        int np = cJSON_GetArraySize(ps), j = 0;
        int *ids = KB_MALLOC(((size_t)np + 1) * sizeof *ids);
        for (const cJSON *p = ps->child; p; p = p->next)
            ids[j++] = doc_index(q, cJSON_GetObjectItemCaseSensitive(p, "context")->valuestring);
        j = 0;
        for (const cJSON *p = ps->child; p; p = p->next, j++) {
            const cJSON *qas = cJSON_GetObjectItemCaseSensitive(p, "qas");
            if (!cJSON_IsArray(qas)) continue;
            int k = 0;
            for (const cJSON *x = qas->child; x; x = x->next, k++) {
                const cJSON *imp = cJSON_GetObjectItemCaseSensitive(x, "is_impossible");
                if (cJSON_IsTrue(imp)) continue;
                const cJSON *qs = cJSON_GetObjectItemCaseSensitive(x, "question");
                const cJSON *an = cJSON_GetObjectItemCaseSensitive(x, "answers");
                if (!cJSON_IsString(qs) || !cJSON_IsArray(an) || !cJSON_GetArraySize(an)) {
                    free(ids);
                    return QA_BAD("%s: data[%d].paragraphs[%d].qas[%d]: expected 'question' "
                                  "(string) and a non-empty 'answers' array", path, i, j, k);
                }
                qa_item *it = push_qa(q, &cq);
                it->query = kb_strdup(qs->valuestring);
                it->outputs = KB_CALLOC((size_t)cJSON_GetArraySize(an), sizeof *it->outputs);
                for (const cJSON *a = an->child; a; a = a->next) {
                    const cJSON *t = cJSON_GetObjectItemCaseSensitive(a, "text");
                    if (!cJSON_IsString(t)) {
                        free(ids);
                        return QA_BAD("%s: data[%d].paragraphs[%d].qas[%d]: answers need a "
                                      "string 'text'", path, i, j, k);
                    }
                    it->outputs[it->n_out++] = kb_strdup(t->valuestring);
                }
                it->gold = KB_MALLOC(sizeof *it->gold);
                it->gold[it->n_gold++] = ids[j];
                it->more = KB_MALLOC(((size_t)np + 1) * sizeof *it->more);
                for (int m = 0; m < np; m++)
                    if (ids[m] != ids[j]) it->more[it->n_more++] = ids[m];
            }
        }
        free(ids);
    }
    return 0;
}

/* HotpotQA: [{"question", "answer", "context": [[title, [sentences]]]}];
 * a document is "title\nsentences joined". */
static int hotpot_doc(const cJSON *pair, char **out) {
    if (!cJSON_IsArray(pair) || cJSON_GetArraySize(pair) != 2) return -1;
    const cJSON *t = cJSON_GetArrayItem(pair, 0), *ss = cJSON_GetArrayItem(pair, 1);
    if (!cJSON_IsString(t) || !cJSON_IsArray(ss)) return -1;
    sbuf b = {0};
    sb_put(&b, t->valuestring);
    sb_putc(&b, '\n');
    for (const cJSON *s = ss->child; s; s = s->next) {
        if (!cJSON_IsString(s)) {
            sb_free(&b);
            return -1;
        }
        sb_put(&b, s->valuestring);
    }
    *out = sb_take(&b);
    return 0;
}

static int load_hotpot(const cJSON *root, const char *path, qa_data *q, kb_err *err) {
    if (!cJSON_IsArray(root)) return QA_BAD("%s: expected a HotpotQA JSON array", path);
    char **all = NULL;
    int na = 0, ca = 0, i = 0, rc = 0;
    for (const cJSON *d = root->child; d && !rc; d = d->next, i++) {
        const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(d, "context");
        const cJSON *qs = cJSON_GetObjectItemCaseSensitive(d, "question");
        const cJSON *an = cJSON_GetObjectItemCaseSensitive(d, "answer");
        if (!cJSON_IsArray(ctx) || !cJSON_IsString(qs) || !cJSON_IsString(an)) {
            rc = QA_BAD("%s: [%d]: expected 'question' and 'answer' strings and a 'context' array",
                        path, i);
            break;
        }
        int k = 0;
        for (const cJSON *p = ctx->child; p; p = p->next, k++) {
            char *doc;
            if (hotpot_doc(p, &doc)) {
                rc = QA_BAD("%s: [%d].context[%d]: expected [title, [sentences]]", path, i, k);
                break;
            }
            push_doc(&all, &na, &ca, doc);
        }
    }
    if (rc) {
        for (int k = 0; k < na; k++) free(all[k]);
        free(all);
        return rc;
    }
    dedup_docs(q, all, na);
    for (int k = 0; k < na; k++) free(all[k]);
    free(all);
    int cq = 0;
    for (const cJSON *d = root->child; d; d = d->next) {
        const cJSON *ctx = cJSON_GetObjectItemCaseSensitive(d, "context");
        qa_item *it = push_qa(q, &cq);
        it->query = kb_strdup(cJSON_GetObjectItemCaseSensitive(d, "question")->valuestring);
        it->outputs = KB_MALLOC(sizeof *it->outputs);
        it->outputs[it->n_out++] = kb_strdup(cJSON_GetObjectItemCaseSensitive(d, "answer")->valuestring);
        it->gold = KB_MALLOC(((size_t)cJSON_GetArraySize(ctx) + 1) * sizeof *it->gold);
        for (const cJSON *p = ctx->child; p; p = p->next) {
            char *doc;
            hotpot_doc(p, &doc);
            it->gold[it->n_gold++] = doc_index(q, doc);
            free(doc);
        }
    }
    return 0;
}

static int qa_load(const char *path, const char *format, qa_data *q, kb_err *err) {
    memset(q, 0, sizeof *q);
    cJSON *root;
    int rc = json_load_file(path, &root, err);
    if (rc) return rc;
    rc = !strcmp(format, "squad") ? load_squad(root, path, q, err) : load_hotpot(root, path, q, err);
    cJSON_Delete(root);
    if (!rc && (!q->n_qas || !q->n_docs))
        rc = QA_BAD("%s: no answerable questions found", path);
    if (rc) qa_free(q);
    return rc;
}

/* ---------------------------------------------------------------- context */

typedef struct rctx {
    const ruler_spec *sp;
    const kb_dataset_env *env;
    ds_wording wf;
    const kb_prose *prose;
    const kb_wordlist *adj, *noun;
    char **cwe_words; /* nouns + adjectives + verbs, distinct, sorted */
    int n_cwe;
    qa_data qa;
    char qa_path[1024];
    int max_new;
} rctx;

static int W(rctx *c, const char *section, const char *key, const tpl_var *v, int n, char **out,
             kb_err *err) {
    const char *t;
    int rc = wording_get(&c->wf, section, key, &t, err);
    if (rc) return rc;
    char where[1200];
    snprintf(where, sizeof where, "%s: %s%s%s", c->wf.path, section ? section : "",
             section ? "." : "", key);
    return tpl_format(t, v, n, where, out, err);
}

/* One random key/value of a needle type. */
static void random_value(rctx *c, kb_rng *r, val_kind k, char *out, size_t cap) {
    if (k == VAL_NUMBERS)
        snprintf(out, cap, "%ld", rng_range(r, 1000000, 9999999));
    else if (k == VAL_UUIDS)
        rng_uuid4(r, out);
    else
        snprintf(out, cap, "%s-%s", c->adj->w[rng_below(r, (uint64_t)c->adj->n)],
                 c->noun->w[rng_below(r, (uint64_t)c->noun->n)]);
}

static const char *type_key(val_kind k, int plural) {
    static const char *const names[3][2] = {{"type_numbers", "type_numbers_plural"},
                                            {"type_words", "type_words_plural"},
                                            {"type_uuids", "type_uuids_plural"}};
    return names[k][plural];
}

/* The 40-point depth grid of RULER: round(linspace(0, 100, 40)), exact in
 * integers (no ties occur). */
static int depth_grid(int g) { return (200 * g + 39) / 78; }

/* Does word w end a sentence (., ! or ? before any closing quotes/brackets,
 * in any order: `so.)\u201d` too, which until 2026-12-06 did not)? */
static int ends_sentence(const char *w) {
    size_t n = strlen(w);
    for (;;) {
        if (n && strchr("\"')]", w[n - 1]))
            n--;
        else if (n >= 3 && (unsigned char)w[n - 3] == 0xE2 && (unsigned char)w[n - 2] == 0x80 &&
                 ((unsigned char)w[n - 1] == 0x99 || (unsigned char)w[n - 1] == 0x9D))
            n -= 3; /* closing curly quotes U+2019 / U+201D */
        else
            break;
    }
    return n && (w[n - 1] == '.' || w[n - 1] == '!' || w[n - 1] == '?');
}

/* Fills the common fields of a RULER sample. */
static void fill_sample(rctx *c, kb_sample *s, int target, int idx, char *user, char *prefix) {
    snprintf(s->task, sizeof s->task, "%s", c->sp->name);
    snprintf(s->id, sizeof s->id, "L%d_%d", target, idx);
    s->chat = 1;
    s->target_tokens = target;
    kb_turn *t = sample_add_turn(s);
    t->user = user;
    t->answer_prefix = prefix;
    turn_set(t, c->sp->metric, c->max_new, c->sp->name);
}

/* ---------------------------------------------------------------- NIAH */

static int build_niah(rctx *c, kb_rng *r, long units, kb_sample *s, int target, int idx,
                      kb_err *err) {
    const ruler_spec *sp = c->sp;
    int nk = sp->num_k, nv = sp->num_v, nn = nk * nv, rc = 0;
    char keys[8][64], vals[8][4][64];
    char plural[32], single[32];
    const char *pv, *sv;
    if ((rc = wording_get(&c->wf, NULL, type_key(sp->v, 1), &pv, err)) ||
        (rc = wording_get(&c->wf, NULL, type_key(sp->v, 0), &sv, err)))
        return rc;
    snprintf(plural, sizeof plural, "%s", pv);
    snprintf(single, sizeof single, "%s", sv);
    for (int k = 0; k < nk; k++) {
        int dup;
        do { /* distinct keys */
            random_value(c, r, sp->k, keys[k], sizeof keys[k]);
            dup = 0;
            for (int j = 0; j < k; j++) dup |= !strcmp(keys[j], keys[k]);
        } while (dup);
        for (int v = 0; v < nv; v++) random_value(c, r, sp->v, vals[k][v], sizeof vals[k][v]);
    }
    /* needle sentences in random order; order[i] = k * nv + v */
    int order[32];
    for (int i = 0; i < nn; i++) order[i] = i;
    rng_shuffle(r, order, (size_t)nn, sizeof order[0]);
    char *needles[32] = {0};
    for (int i = 0; i < nn && !rc; i++) {
        tpl_var v[] = {{"type_needle_v", plural},
                       {"key", keys[order[i] / nv]},
                       {"value", vals[order[i] / nv][order[i] % nv]}};
        rc = W(c, NULL, "needle", v, 3, &needles[i], err);
    }
    double needle_depth[32];
    sbuf ctx = {0};
    if (!rc && sp->hay == HAY_ESSAY) {
        long n = units;
        /* sentence boundaries over the first n words of the (cycled) prose */
        long *start = KB_MALLOC(((size_t)n + 2) * sizeof *start);
        long ns = 0;
        start[ns++] = 0;
        for (long i = 0; i < n; i++)
            if (ends_sentence(c->prose->words[i % c->prose->n]) && i + 1 < n) start[ns++] = i + 1;
        start[ns] = n;
        int g[40];
        rng_sample(r, 40, nn, g);
        int d[32];
        for (int i = 0; i < nn; i++) d[i] = depth_grid(g[i]);
        for (int i = 1; i < nn; i++) /* ascending: needle i goes to the i-th position */
            for (int j = i; j > 0 && d[j - 1] > d[j]; j--) {
                int t = d[j];
                d[j] = d[j - 1];
                d[j - 1] = t;
            }
        long sent = 0;
        for (int i = 0; i <= nn; i++) {
            long upto = i < nn ? ns * d[i] / 100 : ns;
            for (; sent < upto; sent++)
                for (long w = start[sent]; w < start[sent + 1]; w++) {
                    if (ctx.n) sb_putc(&ctx, ' ');
                    sb_put(&ctx, c->prose->words[w % c->prose->n]);
                }
            if (i < nn) {
                if (ctx.n) sb_putc(&ctx, ' ');
                sb_put(&ctx, needles[i]);
                needle_depth[i] = d[i] / 100.0;
            }
        }
        free(start);
    } else if (!rc) {
        /* noise lines or distractor needles, with the needles inserted at
         * random line positions */
        long n = units > nn ? units : nn; /* at least one line per needle */
        int *pos = KB_MALLOC((size_t)nn * sizeof *pos);
        rng_sample(r, (int)n, nn, pos);
        for (int i = 1; i < nn; i++)
            for (int j = i; j > 0 && pos[j - 1] > pos[j]; j--) {
                int t = pos[j];
                pos[j] = pos[j - 1];
                pos[j - 1] = t;
            }
        const char *noise = NULL;
        if (sp->hay == HAY_NOISE) rc = wording_get(&c->wf, NULL, "noise", &noise, err);
        int next = 0;
        for (long i = 0; i <= n && !rc; i++) {
            while (next < nn && pos[next] == i) {
                if (ctx.n) sb_putc(&ctx, '\n');
                sb_put(&ctx, needles[next]);
                needle_depth[next] = (double)i / (double)n;
                next++;
            }
            if (i == n) break;
            if (ctx.n) sb_putc(&ctx, '\n');
            if (noise) {
                sb_put(&ctx, noise);
            } else {
                char k[64], v[64];
                random_value(c, r, sp->k, k, sizeof k);
                random_value(c, r, sp->v, v, sizeof v);
                tpl_var tv[] = {{"type_needle_v", plural}, {"key", k}, {"value", v}};
                char *dn;
                if ((rc = W(c, NULL, "needle", tv, 3, &dn, err))) break;
                sb_put(&ctx, dn);
                free(dn);
            }
        }
        free(pos);
    }
    for (int i = 0; i < nn; i++) free(needles[i]);
    if (rc) {
        sb_free(&ctx);
        return rc;
    }
    /* the keys asked and their values */
    int ask[8];
    rng_sample(r, nk, sp->num_q, ask);
    sbuf q = {0};
    for (int i = 0; i < sp->num_q; i++) {
        if (i) sb_put(&q, i == sp->num_q - 1 ? ", and " : ", ");
        sb_put(&q, keys[ask[i]]);
    }
    int one = sp->num_q * nv == 1;
    char *context = sb_take(&ctx), *query = sb_take(&q), *user = NULL, *prefix = NULL;
    tpl_var tv[] = {{"type_needle_v", one ? single : plural}, {"context", context}, {"query", query}};
    rc = W(c, "niah", one ? "template_one" : "template_many", tv, 3, &user, err);
    if (!rc) rc = W(c, "niah", one ? "answer_prefix_one" : "answer_prefix_many", tv, 3, &prefix, err);
    free(context);
    free(query);
    if (rc) {
        free(user);
        return rc;
    }
    fill_sample(c, s, target, idx, user, prefix);
    for (int i = 0; i < sp->num_q; i++)
        for (int v = 0; v < nv; v++) turn_add_answer(&s->turns[0], vals[ask[i]][v]);
    for (int i = 0; i < nn; i++) /* depth of the first answer's needle */
        if (order[i] == ask[0] * nv) s->depth = needle_depth[i];
    return 0;
}

/* ---------------------------------------------------------------- VT */

static void random_var(kb_rng *r, int len, char *out) {
    for (int i = 0; i < len; i++) out[i] = (char)('A' + rng_below(r, 26));
    out[len] = 0;
}

/* One variable-tracking instance: a chain of 5 variables (4 hops) hidden in
 * `units` noise lines. Returns the text (template + context) and fills vars. */
static int vt_instance(rctx *c, kb_rng *r, long units, int name_len, char names[5][8],
                       char **text, char **prefix, kb_err *err) {
    const int nv = 5;
    for (int i = 0; i < nv; i++) {
        int dup;
        do {
            random_var(r, name_len, names[i]);
            dup = 0;
            for (int j = 0; j < i; j++) dup |= !strcmp(names[i], names[j]);
        } while (dup);
    }
    char value[16];
    snprintf(value, sizeof value, "%ld", rng_range(r, 10000, 99999));
    char *stmt[5] = {0};
    int rc = 0;
    for (int i = 0; i < nv && !rc; i++) {
        tpl_var v[] = {{"var", names[i]}, {"value", value}, {"src", i ? names[i - 1] : ""}};
        rc = W(c, "vt", i ? "assign_var" : "assign_value", v, 3, &stmt[i], err);
    }
    const char *noise = NULL;
    if (!rc) rc = wording_get(&c->wf, NULL, "noise", &noise, err);
    if (rc) {
        for (int i = 0; i < nv; i++) free(stmt[i]);
        return rc;
    }
    int pos[5];
    long n = units > nv ? units : nv; /* at least one noise line per statement */
    rng_sample(r, (int)n, nv, pos);
    for (int i = 1; i < nv; i++)
        for (int j = i; j > 0 && pos[j - 1] > pos[j]; j--) {
            int t = pos[j];
            pos[j] = pos[j - 1];
            pos[j - 1] = t;
        }
    sbuf ctx = {0};
    int next = 0;
    for (long i = 0; i <= n; i++) {
        while (next < nv && pos[next] == i) {
            if (ctx.n) sb_putc(&ctx, '\n');
            sb_put(&ctx, stmt[next++]);
        }
        if (i == n) break;
        if (ctx.n) sb_putc(&ctx, '\n');
        sb_put(&ctx, noise);
    }
    for (int i = 0; i < nv; i++) free(stmt[i]);
    char *context = sb_take(&ctx);
    tpl_var v[] = {{"context", context}, {"query", value}, {"num_v", "5"}};
    rc = W(c, "vt", "template", v, 3, text, err);
    if (!rc) rc = W(c, "vt", "answer_prefix", v, 3, prefix, err);
    free(context);
    return rc;
}

static int build_vt(rctx *c, kb_rng *r, long units, kb_sample *s, int target, int idx,
                    kb_err *err) {
    /* the in-prompt example: 3-letter names, a short noise haystack */
    char ex_vars[5][8], *ex_text, *ex_prefix;
    int rc = vt_instance(c, r, 12, 3, ex_vars, &ex_text, &ex_prefix, err);
    if (rc) return rc;
    sbuf b = {0};
    sb_put(&b, ex_text);
    sb_put(&b, ex_prefix);
    for (int i = 0; i < 5; i++) {
        sb_putc(&b, ' ');
        sb_put(&b, ex_vars[i]);
    }
    sb_put(&b, "\n\n");
    free(ex_text);
    free(ex_prefix);
    char vars[5][8], *text, *prefix;
    if ((rc = vt_instance(c, r, units, 5, vars, &text, &prefix, err))) {
        sb_free(&b);
        return rc;
    }
    sb_put(&b, text);
    free(text);
    fill_sample(c, s, target, idx, sb_take(&b), prefix);
    for (int i = 0; i < 5; i++) turn_add_answer(&s->turns[0], vars[i]);
    return 0;
}

/* ---------------------------------------------------------------- CWE */

/* A numbered word list: `common` words repeated cf times and the others uf
 * times, shuffled. */
static char *cwe_list(rctx *c, kb_rng *r, long nwords, int cf, int uf, int ncommon, int *pick) {
    rng_sample(r, c->n_cwe, (int)nwords, pick);
    long total = (long)ncommon * cf + (nwords - ncommon) * uf;
    int *seq = KB_MALLOC(((size_t)total + 1) * sizeof *seq);
    long k = 0;
    for (long i = 0; i < nwords; i++)
        for (int j = 0; j < (i < ncommon ? cf : uf); j++) seq[k++] = pick[i];
    rng_shuffle(r, seq, (size_t)total, sizeof *seq);
    sbuf b = {0};
    for (long i = 0; i < total; i++) sb_printf(&b, "%s%ld. %s", i ? " " : "", i + 1, c->cwe_words[seq[i]]);
    free(seq);
    return sb_take(&b);
}

static int build_cwe(rctx *c, kb_rng *r, long units, kb_sample *s, int target, int idx,
                     kb_err *err) {
    const int ncommon = 10;
    if (units < ncommon + 1) units = ncommon + 1;
    if (units > c->n_cwe) units = c->n_cwe;
    int small = target < 4096; /* RULER's lighter repetition for short contexts */
    int *pick = KB_MALLOC((size_t)(units > 40 ? units : 40) * sizeof *pick);
    char num[8];
    snprintf(num, sizeof num, "%d", ncommon);
    /* the example */
    int exn = small ? 20 : 40;
    char *exl = cwe_list(c, r, exn, small ? 3 : 10, small ? 1 : 3, ncommon, pick);
    sbuf ans = {0};
    for (int i = 0; i < ncommon; i++) sb_printf(&ans, " %d. %s", i + 1, c->cwe_words[pick[i]]);
    tpl_var ev[] = {{"context", exl}, {"num_cw", num}};
    char *ext = NULL, *exp = NULL;
    int rc = W(c, "cwe", "template", ev, 2, &ext, err);
    if (!rc) rc = W(c, "cwe", "answer_prefix", ev, 2, &exp, err);
    free(exl);
    if (rc) {
        free(ext);
        sb_free(&ans);
        free(pick);
        return rc;
    }
    sbuf b = {0};
    sb_put(&b, ext);
    sb_put(&b, exp);
    sb_put(&b, ans.s);
    sb_putc(&b, '\n');
    free(ext);
    free(exp);
    sb_free(&ans);
    char *list = cwe_list(c, r, units, small ? 6 : 30, small ? 1 : 3, ncommon, pick);
    tpl_var v[] = {{"context", list}, {"num_cw", num}};
    char *text = NULL, *prefix = NULL;
    rc = W(c, "cwe", "template", v, 2, &text, err);
    if (!rc) rc = W(c, "cwe", "answer_prefix", v, 2, &prefix, err);
    free(list);
    if (rc) {
        free(text);
        sb_free(&b);
        free(pick);
        return rc;
    }
    sb_put(&b, text);
    free(text);
    fill_sample(c, s, target, idx, sb_take(&b), prefix);
    for (int i = 0; i < ncommon; i++) turn_add_answer(&s->turns[0], c->cwe_words[pick[i]]);
    free(pick);
    return 0;
}

/* ---------------------------------------------------------------- FWE */

static int cmp_code(const void *a, const void *b) { return strcmp((const char *)a, (const char *)b); }

static int build_fwe(rctx *c, kb_rng *r, long units, kb_sample *s, int target, int idx,
                     kb_err *err) {
    int vocab = (target - c->max_new) / 50;
    if (vocab < 8) vocab = 8;
    /* distinct 6-letter coded words, sorted then shuffled; rank 1 becomes dots */
    char (*w)[8] = KB_MALLOC((size_t)vocab * sizeof *w);
    for (int i = 0; i < vocab; i++) {
        int dup;
        do {
            for (int k = 0; k < 6; k++) w[i][k] = (char)('a' + rng_below(r, 26));
            w[i][6] = 0;
            dup = 0;
            for (int j = 0; j < i && !dup; j++) dup = !strcmp(w[i], w[j]);
        } while (dup);
    }
    qsort(w, (size_t)vocab, sizeof *w, cmp_code);
    rng_shuffle(r, w, (size_t)vocab, sizeof *w);
    strcpy(w[0], "...");
    /* Zipf(2) counts: floor(units * k^-2 / zeta(2)) */
    const double zeta2 = 1.6449340668482264;
    long total = 0;
    long *cnt = KB_MALLOC((size_t)vocab * sizeof *cnt);
    for (int k = 0; k < vocab; k++) {
        cnt[k] = (long)((double)units * (1.0 / ((double)(k + 1) * (double)(k + 1))) / zeta2);
        total += cnt[k];
    }
    int *seq = KB_MALLOC(((size_t)total + 1) * sizeof *seq);
    long n = 0;
    for (int k = 0; k < vocab; k++)
        for (long j = 0; j < cnt[k]; j++) seq[n++] = k;
    rng_shuffle(r, seq, (size_t)n, sizeof *seq);
    sbuf b = {0};
    for (long i = 0; i < n; i++) {
        if (i) sb_putc(&b, ' ');
        sb_put(&b, w[seq[i]]);
    }
    free(seq);
    free(cnt);
    char *context = sb_take(&b), *text = NULL, *prefix = NULL;
    tpl_var v[] = {{"context", context}};
    int rc = W(c, "fwe", "template", v, 1, &text, err);
    if (!rc) rc = W(c, "fwe", "answer_prefix", v, 1, &prefix, err);
    free(context);
    if (!rc) {
        fill_sample(c, s, target, idx, text, prefix);
        for (int k = 1; k <= 3 && k < vocab; k++) turn_add_answer(&s->turns[0], w[k]);
    } else {
        free(text);
    }
    free(w);
    return rc;
}

/* ---------------------------------------------------------------- QA */

static int build_qa(rctx *c, kb_rng *r, long units, kb_sample *s, int target, int idx,
                    kb_err *err) {
    const qa_data *q = &c->qa;
    const qa_item *it = &q->qas[idx % q->n_qas];
    int nd = (int)units;
    if (nd < it->n_gold) nd = it->n_gold;
    int *docs = KB_MALLOC((size_t)nd * sizeof *docs);
    int k = 0;
    if (nd <= q->n_docs) {
        for (int i = 0; i < it->n_gold; i++) docs[k++] = it->gold[i];
        int want = nd - it->n_gold;
        if (want > it->n_more) {
            for (int i = 0; i < it->n_more; i++) docs[k++] = it->more[i];
            /* the rest drawn from the documents not used yet */
            int rest = want - it->n_more;
            char *used = KB_CALLOC((size_t)q->n_docs, 1);
            for (int i = 0; i < k; i++) used[docs[i]] = 1;
            int nfree = 0;
            int *freev = KB_MALLOC((size_t)q->n_docs * sizeof *freev);
            for (int i = 0; i < q->n_docs; i++)
                if (!used[i]) freev[nfree++] = i;
            if (rest > nfree) rest = nfree;
            int *pick = KB_MALLOC(((size_t)rest + 1) * sizeof *pick);
            rng_sample(r, nfree, rest, pick);
            for (int i = 0; i < rest; i++) docs[k++] = freev[pick[i]];
            free(pick);
            free(freev);
            free(used);
        } else {
            int *pick = KB_MALLOC(((size_t)want + 1) * sizeof *pick);
            rng_sample(r, it->n_more, want, pick);
            for (int i = 0; i < want; i++) docs[k++] = it->more[pick[i]];
            free(pick);
        }
    } else {
        for (int i = 0; i < nd; i++) docs[k++] = i % q->n_docs; /* all documents, repeated */
    }
    rng_shuffle(r, docs, (size_t)k, sizeof *docs);
    sbuf b = {0};
    int rc = 0, first_gold = -1;
    for (int i = 0; i < k && !rc; i++) {
        char num[16];
        snprintf(num, sizeof num, "%d", i + 1);
        tpl_var v[] = {{"i", num}, {"document", q->docs[docs[i]]}};
        char *d;
        if ((rc = W(c, "qa", "document", v, 2, &d, err))) break;
        if (i) sb_put(&b, "\n\n");
        sb_put(&b, d);
        free(d);
        if (first_gold < 0)
            for (int g = 0; g < it->n_gold; g++)
                if (docs[i] == it->gold[g]) first_gold = i;
    }
    free(docs);
    char *context = sb_take(&b), *text = NULL, *prefix = NULL;
    tpl_var v[] = {{"context", context}, {"query", it->query}};
    if (!rc) rc = W(c, "qa", "template", v, 2, &text, err);
    if (!rc) rc = W(c, "qa", "answer_prefix", v, 2, &prefix, err);
    free(context);
    if (rc) {
        free(text);
        return rc;
    }
    fill_sample(c, s, target, idx, text, prefix);
    for (int i = 0; i < it->n_out; i++) turn_add_answer(&s->turns[0], it->outputs[i]);
    s->depth = k && first_gold >= 0 ? (double)first_gold / (double)k : -1;
    return 0;
}

/* ---------------------------------------------------------------- fitting */

static int build(rctx *c, long units, kb_sample *s, int target, int idx, kb_err *err) {
    kb_rng r;
    rng_derive(&r, c->env->seed, c->sp->name, (uint64_t)target, (uint64_t)idx);
    switch (c->sp->kind) {
    case R_NIAH: return build_niah(c, &r, units, s, target, idx, err);
    case R_VT: return build_vt(c, &r, units, s, target, idx, err);
    case R_CWE: return build_cwe(c, &r, units, s, target, idx, err);
    case R_FWE: return build_fwe(c, &r, units, s, target, idx, err);
    case R_QA: return build_qa(c, &r, units, s, target, idx, err);
    }
    return kb_fail(err, KB_ERUNTIME, "ruler: unknown task kind");
}

/* Prompt tokens of the sample built with `units`, or -1. */
static int probe(rctx *c, long units, int target, int idx, int *tokens, kb_err *err) {
    kb_sample s;
    memset(&s, 0, sizeof s);
    int rc = build(c, units, &s, target, idx, err);
    if (!rc) {
        *tokens = ds_count(c->env, &s);
        if (*tokens < 0) rc = kb_fail(err, KB_ERUNTIME, "token counting failed");
    }
    sample_free(&s);
    return rc;
}

static long max_units(const rctx *c) {
    if (c->sp->kind == R_CWE) return c->n_cwe;
    return 1L << 22;
}

static int fit(rctx *c, int target, long *out, kb_err *err) {
    long lo = 0, hi = 8, cap = max_units(c);
    int tok, rc;
    for (;;) {
        if ((rc = probe(c, hi, target, 0, &tok, err))) return rc;
        if (tok + c->max_new > target) break;
        lo = hi;
        if (hi >= cap) {
            *out = cap;
            return 0;
        }
        hi = hi * 2 > cap ? cap : hi * 2;
    }
    while (hi - lo > 1) {
        long mid = (lo + hi) / 2;
        if ((rc = probe(c, mid, target, 0, &tok, err))) return rc;
        if (tok + c->max_new <= target)
            lo = mid;
        else
            hi = mid;
    }
    if (lo < 1)
        return kb_fail(err, KB_EINPUT, "target length %d is too short for %s (the smallest "
                                       "prompt plus %d new tokens does not fit)",
                       target, c->sp->name, c->max_new);
    *out = lo;
    return 0;
}

static int ruler_generate_spec(const ruler_spec *sp, const cJSON *cfg, const kb_dataset_env *env,
                               kb_sample_list *out, kb_err *err) {
    int rc = ds_check_keys(cfg, sp->kind == R_QA ? qa_keys : synth_keys, err);
    if (rc) return rc;
    long samples, max_new;
    if ((rc = json_get_int(cfg, "task config", "samples", 0, 1, 100000, 10, &samples, err)) ||
        (rc = json_get_int(cfg, "task config", "max_new", 0, 1, 1 << 16, sp->max_new, &max_new,
                           err)))
        return rc;
    long *lengths;
    int nl;
    if ((rc = ds_get_int_list(cfg, "lengths", 64, 1L << 24, &lengths, &nl, err))) return rc;
    if (!nl) {
        if (env->n_ctx <= 0) return kb_fail(err, KB_EINPUT, "task config: missing key 'lengths'");
        lengths = KB_MALLOC(sizeof *lengths);
        lengths[nl++] = env->n_ctx;
    }
    if (!env->count_tokens) {
        free(lengths);
        return kb_fail(err, KB_EINPUT, "%s fits prompts to token lengths and needs the model's "
                                       "tokenizer (kvbench prompts: -m MODEL or --counter)",
                       sp->name);
    }
    rctx c;
    memset(&c, 0, sizeof c);
    c.sp = sp;
    c.env = env;
    c.max_new = (int)max_new;
    kb_sample_list mine = {0};
    char hay_desc[4700] = ""; /* the prose and word list descriptions, whole */
    if ((rc = wording_load(cfg, env, "ruler", &c.wf, err))) goto out;
    if (sp->kind == R_QA) {
        const char *file;
        if ((rc = json_get_path(cfg, "task config", "file", 1, NULL, &file, err))) goto out;
        char *path = ds_data_path(env, file);
        rc = ds_path_copy(c.qa_path, sizeof c.qa_path, path, "RULER QA data file", err);
        free(path);
        if (rc) goto out;
        if ((rc = qa_load(c.qa_path, sp->qa_format, &c.qa, err))) goto out;
        snprintf(hay_desc, sizeof hay_desc, "data=%s", c.qa_path);
    } else {
        if ((rc = words_get("adj", &c.adj, err)) || (rc = words_get("noun", &c.noun, err)))
            goto out;
        if (sp->kind == R_NIAH && sp->hay == HAY_ESSAY) {
            if ((rc = prose_get(env->haystack_dir, env->haystack_from, &c.prose, err))) goto out;
            snprintf(hay_desc, sizeof hay_desc, "haystack=%s; words=%s", c.prose->desc, c.noun->desc);
        } else {
            snprintf(hay_desc, sizeof hay_desc, "words=%s", c.noun->desc);
        }
        if (sp->kind == R_CWE) {
            const kb_wordlist *vb;
            if ((rc = words_get("verb", &vb, err))) goto out;
            const kb_wordlist *ls[3] = {c.noun, c.adj, vb};
            int tot = c.noun->n + c.adj->n + vb->n;
            c.cwe_words = KB_MALLOC((size_t)tot * sizeof *c.cwe_words);
            for (int l = 0; l < 3; l++)
                for (int i = 0; i < ls[l]->n; i++) c.cwe_words[c.n_cwe++] = ls[l]->w[i];
            qsort(c.cwe_words, (size_t)c.n_cwe, sizeof *c.cwe_words, cmp_str);
            int k = 0;
            for (int i = 0; i < c.n_cwe; i++)
                if (!k || strcmp(c.cwe_words[k - 1], c.cwe_words[i])) c.cwe_words[k++] = c.cwe_words[i];
            c.n_cwe = k;
        }
    }
    for (int li = 0; li < nl && !rc; li++) {
        int target = (int)lengths[li];
        long best = 0;
        if ((rc = fit(&c, target, &best, err))) break;
        for (int i = 0; i < samples && !rc; i++) {
            long u = best;
            for (;;) {
                kb_sample *s = samples_push(&mine);
                if ((rc = build(&c, u, s, target, i, err))) break;
                int tok = ds_count(env, s);
                if (tok < 0) {
                    rc = kb_fail(err, KB_ERUNTIME, "token counting failed");
                    break;
                }
                if (tok + c.max_new <= target || u <= 1) {
                    s->prompt_tokens = tok;
                    sbuf pv = {0};
                    sb_printf(&pv, "wording=%s; %s", c.wf.path, hay_desc);
                    s->provenance = sb_take(&pv);
                    break;
                }
                sample_free(s);
                mine.n--;
                long step = u / 64;
                u -= step > 0 ? step : 1;
            }
        }
    }
    if (!rc) samples_move(out, &mine);
out:
    sample_list_free(&mine);
    wording_free(&c.wf);
    qa_free(&c.qa);
    free(c.cwe_words);
    free(lengths);
    return rc;
}

/* One generate function per table entry (the ops table carries no context). */
#define RULER_GEN(i)                                                                       \
    static int gen_##i(const cJSON *cfg, const kb_dataset_env *env, kb_sample_list *out,  \
                       kb_err *err) {                                                      \
        return ruler_generate_spec(&specs[i], cfg, env, out, err);                         \
    }
RULER_GEN(0)
RULER_GEN(1)
RULER_GEN(2)
RULER_GEN(3)
RULER_GEN(4)
RULER_GEN(5)
RULER_GEN(6)
RULER_GEN(7)
RULER_GEN(8)
RULER_GEN(9)
RULER_GEN(10)
RULER_GEN(11)
RULER_GEN(12)

const kb_task_ops ruler_tasks[] = {
    {"niah_single_1", "ruler", synth_keys, gen_0},   {"niah_single_2", "ruler", synth_keys, gen_1},
    {"niah_single_3", "ruler", synth_keys, gen_2},   {"niah_multikey_1", "ruler", synth_keys, gen_3},
    {"niah_multikey_2", "ruler", synth_keys, gen_4}, {"niah_multikey_3", "ruler", synth_keys, gen_5},
    {"niah_multivalue", "ruler", synth_keys, gen_6}, {"niah_multiquery", "ruler", synth_keys, gen_7},
    {"vt", "ruler", synth_keys, gen_8},              {"cwe", "ruler", synth_keys, gen_9},
    {"fwe", "ruler", synth_keys, gen_10},            {"qa_1", "ruler", qa_keys, gen_11},
    {"qa_2", "ruler", qa_keys, gen_12},
};
const int ruler_task_count = (int)KB_ARRAY_LEN(ruler_tasks);
