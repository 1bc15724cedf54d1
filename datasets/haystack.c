/* haystack.c - prose and word lists from the installed corpora (haystack.h). */
#include "datasets/haystack.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "datasets/dataset.h"
#include "harness/json.h"

#define FORTUNES_DIR "/usr/share/games/fortunes"
#define WORDNET_DIR "/usr/share/wordnet"
#define LICENSES_DIR "/usr/share/common-licenses"
#define DICT_FILE "/usr/share/dict/american-english"

typedef struct prose_cache {
    char *key; /* haystack dir or "" */
    kb_prose p;
    char *buf; /* the words point into this buffer */
} prose_cache;

static prose_cache g_prose[4];
static int g_nprose;

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Splits buf in place into whitespace-separated words. */
static void split_words(char *buf, kb_prose *p) {
    int cap = 1024;
    p->words = KB_MALLOC((size_t)cap * sizeof *p->words);
    p->n = 0;
    char *s = buf;
    while (*s) {
        while (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r' || *s == '\f' || *s == '\v')
            *s++ = 0;
        if (!*s) break;
        if (p->n == cap) p->words = KB_REALLOC(p->words, (size_t)(cap *= 2) * sizeof *p->words);
        p->words[p->n++] = s;
        while (*s && !(*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r' || *s == '\f' ||
                       *s == '\v'))
            s++;
    }
}

/* Appends a file's text; fortune files drop their "%" separator lines. */
static int append_file(const char *path, int fortune, char **buf, size_t *len, kb_err *err) {
    char *t;
    size_t n;
    int rc = file_read_text(path, &t, &n, err); /* not UTF-8 (binary, UTF-16, Latin-1): refused */
    if (rc) return rc;
    *buf = KB_REALLOC(*buf, *len + n + 2);
    char *o = *buf + *len;
    const char *p = t;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t ln = e ? (size_t)(e - p) : strlen(p);
        if (!(fortune && ln == 1 && p[0] == '%')) {
            memcpy(o, p, ln);
            o += ln;
        }
        *o++ = ' ';
        p += ln + (e ? 1 : 0);
    }
    *len = (size_t)(o - *buf);
    (*buf)[*len] = 0;
    free(t);
    return 0;
}

/* Regular files of dir (optionally with a suffix), sorted; symlinks skipped
 * so aliases (GPL -> GPL-3) are not read twice. */
static int list_files(const char *dir, const char *suffix, char ***out, int *n, kb_err *err) {
    DIR *d = opendir(dir);
    if (!d) return kb_fail(err, KB_EINPUT, "%s: cannot open directory: %s", dir, strerror(errno));
    char **v = NULL;
    int cnt = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        size_t l = strlen(e->d_name), sl = suffix ? strlen(suffix) : 0;
        if (suffix && (l < sl || strcmp(e->d_name + l - sl, suffix))) continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) || !S_ISREG(st.st_mode)) continue;
        if (cnt == cap) v = KB_REALLOC(v, (size_t)(cap = cap ? cap * 2 : 16) * sizeof *v);
        v[cnt++] = kb_strdup(path);
    }
    closedir(d);
    if (cnt) qsort(v, (size_t)cnt, sizeof *v, cmp_str);
    *out = v;
    *n = cnt;
    return 0;
}

static void free_list(char **v, int n) {
    for (int i = 0; i < n; i++) free(v[i]);
    free(v);
}

/* WordNet glosses of data.noun as sentences (first 200k words are plenty). */
static int load_glosses(char **buf, size_t *len, kb_err *err) {
    char *t;
    size_t n;
    int rc = file_read_all(WORDNET_DIR "/data.noun", &t, &n, err);
    if (rc) return rc;
    *buf = KB_MALLOC(n + 2);
    size_t o = 0, words = 0;
    const char *p = t;
    while (*p && words < 200000) {
        const char *e = strchr(p, '\n');
        size_t ln = e ? (size_t)(e - p) : strlen(p);
        if (p[0] != ' ') {
            const char *g = memchr(p, '|', ln);
            if (g) {
                g += 1;
                while (*g == ' ') g++;
                size_t gl = (size_t)(p + ln - g);
                while (gl && (g[gl - 1] == ' ' || g[gl - 1] == '\r')) gl--;
                if (gl) {
                    memcpy(*buf + o, g, gl);
                    o += gl;
                    if (g[gl - 1] != '.' && g[gl - 1] != '"') (*buf)[o++] = '.';
                    (*buf)[o++] = ' ';
                    for (size_t k = 0; k < gl; k++) words += g[k] == ' ';
                }
            }
        }
        p += ln + (e ? 1 : 0);
    }
    (*buf)[o] = 0;
    *len = o;
    free(t);
    return 0;
}

static int load_prose(const char *dir, const char *from, char **buf, char *desc, size_t dcap, kb_err *err) {
    size_t len = 0;
    *buf = KB_MALLOC(1);
    (*buf)[0] = 0;
    int rc = 0;
    if (!from) from = "--haystack";
    if (dir) {
        char **files;
        int nf;
        if ((rc = list_files(dir, ".txt", &files, &nf, err))) return kb_err_prefix(err, "%s", from);
        if (!nf) {
            free(files);
            return kb_fail(err, KB_EINPUT, "%s %s: no .txt files in the directory", from, dir);
        }
        for (int i = 0; i < nf && !rc; i++) rc = append_file(files[i], 0, buf, &len, err);
        snprintf(desc, dcap, "haystack-dir:%s (%d .txt files)", dir, nf);
        free_list(files, nf);
        return rc;
    }
    if (exists(FORTUNES_DIR "/fortunes")) {
        static const char *const names[] = {"fortunes", "literature", "riddles"};
        for (size_t i = 0; i < KB_ARRAY_LEN(names) && !rc; i++) {
            char path[256];
            snprintf(path, sizeof path, "%s/%s", FORTUNES_DIR, names[i]);
            if (exists(path)) rc = append_file(path, 1, buf, &len, err);
        }
        snprintf(desc, dcap, "fortunes-min:%s (fortunes, literature, riddles)", FORTUNES_DIR);
        return rc;
    }
    if (exists(WORDNET_DIR "/data.noun")) {
        free(*buf);
        rc = load_glosses(buf, &len, err);
        snprintf(desc, dcap, "wordnet-base glosses:%s/data.noun", WORDNET_DIR);
        return rc;
    }
    char **files;
    int nf;
    if ((rc = list_files(LICENSES_DIR, NULL, &files, &nf, err)) || !nf) {
        if (!rc) free(files);
        return kb_fail(err, KB_EINPUT,
                       "no prose corpus: install fortunes-min or wordnet-base, or pass "
                       "--haystack DIR");
    }
    for (int i = 0; i < nf && !rc; i++) rc = append_file(files[i], 0, buf, &len, err);
    snprintf(desc, dcap, "common-licenses:%s", LICENSES_DIR);
    free_list(files, nf);
    return rc;
}

int prose_get(const char *haystack_dir, const char *from, const kb_prose **out, kb_err *err) {
    /* before the cache, whose key for the Debian corpora (NULL) is "" */
    if (haystack_dir && !*haystack_dir)
        return kb_fail(err, KB_EINPUT, "%s: an empty path, expected a directory of .txt files",
                       from ? from : "--haystack");
    const char *key = haystack_dir ? haystack_dir : "";
    for (int i = 0; i < g_nprose; i++)
        if (!strcmp(g_prose[i].key, key)) {
            *out = &g_prose[i].p;
            return 0;
        }
    prose_cache c;
    memset(&c, 0, sizeof c);
    int rc = load_prose(haystack_dir, from, &c.buf, c.p.desc, sizeof c.p.desc, err);
    if (rc) {
        free(c.buf);
        return rc;
    }
    split_words(c.buf, &c.p);
    if (c.p.n < 100) {
        free(c.buf);
        free(c.p.words);
        return kb_fail(err, KB_EINPUT, "%s: the prose corpus has only %d words (need >= 100)",
                       c.p.desc, c.p.n);
    }
    c.key = kb_strdup(key);
    if (g_nprose == (int)KB_ARRAY_LEN(g_prose)) {
        /* keep the cache bounded: recycle the oldest entry (no caller keeps
         * a corpus across task generations) */
        free(g_prose[0].key);
        free(g_prose[0].buf);
        free(g_prose[0].p.words);
        memmove(&g_prose[0], &g_prose[1], sizeof g_prose[0] * (KB_ARRAY_LEN(g_prose) - 1));
        g_nprose--;
    }
    g_prose[g_nprose] = c;
    *out = &g_prose[g_nprose].p;
    g_nprose++;
    return 0;
}

/* ---------------------------------------------------------------- words */

typedef struct words_cache {
    char pos[8];
    kb_wordlist w;
    int loaded;
} words_cache;

static words_cache g_words[3];

static int plain_word(const char *w, size_t n) {
    if (n < 3 || n > 10) return 0;
    for (size_t i = 0; i < n; i++)
        if (w[i] < 'a' || w[i] > 'z') return 0;
    return 1;
}

static void push_word(kb_wordlist *l, int *cap, const char *w, size_t n) {
    if (l->n == *cap) l->w = KB_REALLOC(l->w, (size_t)(*cap = *cap ? *cap * 2 : 1024) * sizeof *l->w);
    char *s = KB_MALLOC(n + 1);
    memcpy(s, w, n);
    s[n] = 0;
    l->w[l->n++] = s;
}

/* index.<pos> lines: lemma pos synset_cnt p_cnt [ptr_symbol x p_cnt] sense_cnt
 * tagsense_cnt synset_offset...; license lines start with a space. */
static int load_wordnet(const char *pos, kb_wordlist *l, kb_err *err) {
    char path[256];
    snprintf(path, sizeof path, "%s/index.%s", WORDNET_DIR, pos);
    char *t;
    size_t n;
    int rc = file_read_all(path, &t, &n, err);
    if (rc) return rc;
    int cap = 0;
    char *p = t;
    while (*p) {
        char *e = strchr(p, '\n');
        if (e) *e = 0;
        if (p[0] != ' ') {
            char *f[64];
            int nf = 0;
            for (char *tok = strtok(p, " "); tok && nf < 64; tok = strtok(NULL, " ")) f[nf++] = tok;
            if (nf >= 6) {
                /* f[5 + p_cnt] is tagsense_cnt; a count that does not fit
                 * the line (a damaged file) skips it */
                long p_cnt = strtol(f[3], NULL, 10);
                if (p_cnt >= 0 && p_cnt < nf - 5 && atoi(f[5 + p_cnt]) >= 1 && plain_word(f[0], strlen(f[0])))
                    push_word(l, &cap, f[0], strlen(f[0]));
            }
        }
        if (!e) break;
        p = e + 1;
    }
    free(t);
    snprintf(l->desc, sizeof l->desc, "wordnet-base:%.100s (tagsense_cnt >= 1, [a-z]{3,10})", path);
    return 0;
}

static int load_dict(kb_wordlist *l, kb_err *err) {
    char *t;
    size_t n;
    int rc = file_read_all(DICT_FILE, &t, &n, err);
    if (rc) return rc;
    int cap = 0;
    char *p = t;
    while (*p) {
        char *e = strchr(p, '\n');
        size_t ln = e ? (size_t)(e - p) : strlen(p);
        if (plain_word(p, ln)) push_word(l, &cap, p, ln);
        p += ln + (e ? 1 : 0);
    }
    free(t);
    snprintf(l->desc, sizeof l->desc, "wamerican:%s ([a-z]{3,10})", DICT_FILE);
    return 0;
}

int words_get(const char *pos, const kb_wordlist **out, kb_err *err) {
    int slot = !strcmp(pos, "adj") ? 0 : !strcmp(pos, "noun") ? 1 : !strcmp(pos, "verb") ? 2 : -1;
    if (slot < 0) return kb_fail(err, KB_ERUNTIME, "words_get: unknown part of speech '%s'", pos);
    words_cache *c = &g_words[slot];
    if (c->loaded) {
        *out = &c->w;
        return 0;
    }
    kb_wordlist l = {0};
    char path[256];
    snprintf(path, sizeof path, "%s/index.%s", WORDNET_DIR, pos);
    int rc;
    if (exists(path))
        rc = load_wordnet(pos, &l, err);
    else if (exists(DICT_FILE))
        rc = load_dict(&l, err);
    else
        rc = kb_fail(err, KB_EINPUT, "no word list: install wordnet-base or wamerican");
    if (!rc && l.n < 50)
        rc = kb_fail(err, KB_EINPUT, "%s: only %d usable words", l.desc, l.n);
    if (rc) {
        for (int i = 0; i < l.n; i++) free(l.w[i]);
        free(l.w);
        return rc;
    }
    qsort(l.w, (size_t)l.n, sizeof *l.w, cmp_str);
    /* distinct */
    int k = 0;
    for (int i = 0; i < l.n; i++) {
        if (k && !strcmp(l.w[k - 1], l.w[i])) {
            free(l.w[i]);
            continue;
        }
        l.w[k++] = l.w[i];
    }
    l.n = k;
    snprintf(c->pos, sizeof c->pos, "%s", pos);
    c->w = l;
    c->loaded = 1;
    *out = &c->w;
    return 0;
}

int haystack_describe(const char *haystack_dir, char *buf, size_t cap, kb_err *err) {
    const kb_prose *p;
    int rc = prose_get(haystack_dir, NULL, &p, err);
    if (rc) return rc;
    const kb_wordlist *w;
    rc = words_get("noun", &w, err);
    if (rc) return rc;
    snprintf(buf, cap, "prose=%s; words=%s", p->desc, w->desc);
    return 0;
}
