/* cmd_plot.c - kvbench plot RUN_DIR: the run's figures with gnuplot, as PNG
 * and SVG in RUN_DIR/plots/ (data files next to them, scripts in plots/):
 *   accuracy_<task>   score vs token budget, one line per method (summary.csv)
 *   needle_<label>_B<budget>  depth x length heatmap per cell (the needle task's rows;
 *                     drawn when they hold two lengths and two depths at least)
 *   speedup           decode speedup vs context per method and budget (latency.csv)
 *   ablation_kernel   score vs SnapKV++ pooling kernel (cells whose params set "kernel")
 *   ablation_alpha    score vs budget per stage-split exponent (cells whose params set "alpha")
 * Every data file starts with comment lines naming the table it was read from
 * and the run (run.json's commit, config and model sha256, with the sha256 of
 * both files), and plots/plots.json lists every figure with its files and the
 * same provenance; the figures of an earlier plot that it lists and this one
 * does not draw are removed, so plots/ holds no figure of other data but one
 * this plot failed to draw: its files stay as they were (gnuplot's failure
 * never costs a figure), each naming its own tables, and plots.json marks it
 * "failed". The scripts and gnuplot are checked before plots/ is touched. */
#include <cjson/cJSON.h>
#include <getopt.h>
#include <libgen.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness/atomic.h"
#include "harness/cli.h"
#include "harness/json.h"
#include "harness/rundir.h"
#include "harness/sha256.h"
#include "harness/table.h"
#include "harness/textnorm.h"
#include "harness/version.h"

typedef struct figure {
    char *name, *key, *from; /* file name (no extension), what it draws, its table */
    char *files[3];          /* .dat, .png, .svg as written */
    int nfiles;
    int failed;              /* not drawn: its files stay as the previous plot left them */
} figure;

typedef struct plotctx {
    const char *run, *scripts;
    char dir[1200];
    char dir_q[2400];     /* dir as the inside of a gnuplot '...' literal (gp_quote) */
    char scripts_q[2400]; /* the same for scripts */
    char model[320];      /* gp_quote'd */
    int svg, png;
    int made, failed;
    figure *figs;        /* the figures named so far (figure_name) */
    int n_figs;
    const char *from;    /* the table the figures being drawn read */
    char sha_sum[65], sha_smp[65], sha_lat[65]; /* of summary.csv, samples.csv, latency.csv */
    char run_line[1600]; /* the data files' provenance line for the run */
    cJSON *run_prov;     /* what run.json says of the run (NULL: no run.json) */
    int have_sum, have_smp, have_lat;
    char **old;          /* the files the previous plots.json listed */
    int n_old;
    char **pending;      /* files this plot is about to write (listed first) */
    int n_pending;
} plotctx;

static int write_manifest(plotctx *pc, int final, kb_err *err);

/* Lists the files of figure out (its .dat and the images of the formats
 * drawn) in plots.json before any is written: a plot killed at any point
 * leaves no file of its own that no manifest lists, so a later plot or run
 * still removes it. One manifest write per figure. */
static void note_figure(plotctx *pc, const char *out) {
    const char *ext[3] = {"dat", pc->png ? "png" : NULL, pc->svg ? "svg" : NULL};
    for (int k = 0; k < 3; k++) {
        if (!ext[k]) continue;
        char name[300];
        snprintf(name, sizeof name, "%s.%s", out, ext[k]);
        pc->pending = KB_REALLOC(pc->pending, ((size_t)pc->n_pending + 1) * sizeof *pc->pending);
        pc->pending[pc->n_pending++] = kb_strdup(name);
    }
    kb_err e = {0};
    if (write_manifest(pc, 0, &e)) {
        fprintf(stderr, "kvbench plot: %s\n", e.msg);
        pc->failed++;
    }
}

static void usage(FILE *f) {
    fprintf(f, "usage: kvbench plot RUN_DIR [--formats png,svg]\n"
               "Draws the run's figures into RUN_DIR/plots/ (needs gnuplot).\n");
}

static const char *scripts_dir(void) {
    static char buf[1200];
    const char *env = getenv("KVBENCH_PLOTS");
    if (env && *env) return env;
    char exe[1024];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        snprintf(buf, sizeof buf, "%s/../plots/common.gp", dirname(exe));
        if (access(buf, R_OK) == 0) {
            buf[strlen(buf) - strlen("/common.gp")] = 0;
            return buf;
        }
    }
    return "plots";
}

/* The scripts plot loads from the scripts directory. */
static const char *const plot_scripts[] = {"common.gp", "accuracy.gp", "ablation.gp", "heatmap.gp", "speedup.gp",
                                           NULL};

/* Before plots/ is touched: the scripts directory holds every script plot
 * loads, and gnuplot runs with the terminals of the formats asked for.
 * Without them every figure would fail (KB_EINPUT: exit 2). */
static int check_tools(const plotctx *pc, kb_err *err) {
    const char *env = getenv("KVBENCH_PLOTS");
    for (int i = 0; plot_scripts[i]; i++) {
        char path[1300];
        struct stat st;
        snprintf(path, sizeof path, "%s/%s", pc->scripts, plot_scripts[i]);
        int e = stat(path, &st) ? errno : !S_ISREG(st.st_mode) ? EISDIR : access(path, R_OK) ? errno : 0;
        if (!e) continue;
        if (env && *env) {
            char why[1500];
            snprintf(why, sizeof why, "the directory of kvbench's gnuplot scripts (plots/ of its source tree), but "
                     "%s cannot be read (%s)", path, strerror(e));
            return kb_env_fail(err, "KVBENCH_PLOTS", env, why);
        }
        return kb_fail(err, KB_EINPUT, "%s: cannot read (%s); plot reads its gnuplot scripts from ../plots beside "
                       "the kvbench binary (build/../plots), else from ./plots: set KVBENCH_PLOTS to their "
                       "directory (plots/ of kvbench's source tree)", path, strerror(e));
    }
    char cmd[200], said[400] = "";
    snprintf(cmd, sizeof cmd, "gnuplot -e '%s%sexit' </dev/null 2>&1", pc->png ? "set terminal pngcairo; " : "",
             pc->svg ? "set terminal svg; " : "");
    FILE *g = popen(cmd, "r");
    int st = -1;
    if (g) {
        size_t n = fread(said, 1, sizeof said - 1, g);
        said[n] = 0;
        while (fgetc(g) != EOF) {}
        st = pclose(g);
    }
    if (!st) return 0;
    /* what the shell or gnuplot said, on one line */
    char *c = said;
    while (*c && isspace((unsigned char)*c)) c++;
    memmove(said, c, strlen(c) + 1);
    for (size_t n = strlen(said); n && isspace((unsigned char)said[n - 1]);) said[--n] = 0;
    for (c = said; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    return kb_fail(err, KB_EINPUT, "gnuplot cannot be run%s%s%s: plot draws its figures with gnuplot (5.0 or "
                   "later, with the %s%s%s terminal%s); install it or put it on PATH", *said ? " (" : "", said,
                   *said ? ")" : "", pc->png ? "pngcairo" : "", pc->png && pc->svg ? " and " : "",
                   pc->svg ? "svg" : "", pc->png && pc->svg ? "s" : "");
}

static void safe_name(char *dst, size_t cap, const char *src) {
    size_t i = 0;
    for (; *src && i + 1 < cap; src++) dst[i++] = (isalnum((unsigned char)*src) || *src == '-' || *src == '.') ? *src : '_';
    dst[i] = 0;
}

/* out, the file name of the figure that draws `key` (its task, or label and
 * budget, unmade safe), made unique in the run: safe_name maps "kv a" and
 * "kv_a" to one name, and the second figure would replace the first; it gets
 * "-2" ("-3", ...) instead. */
static void figure_name(plotctx *pc, char *out, size_t cap, const char *key) {
    char base[260];
    snprintf(base, sizeof base, "%s", out);
    for (int k = 2;; k++) {
        int i = 0;
        while (i < pc->n_figs && strcmp(pc->figs[i].name, out)) i++;
        if (i < pc->n_figs && !strcmp(pc->figs[i].key, key)) return; /* the same figure */
        if (i == pc->n_figs) break;
        if ((size_t)snprintf(out, cap, "%s-%d", base, k) >= cap) break; /* names are far shorter */
    }
    pc->figs = KB_REALLOC(pc->figs, ((size_t)pc->n_figs + 1) * sizeof *pc->figs);
    figure *f = &pc->figs[pc->n_figs++];
    memset(f, 0, sizeof *f);
    f->name = kb_strdup(out);
    f->key = kb_strdup(key);
    f->from = kb_strdup(pc->from);
}

static figure *figure_get(plotctx *pc, const char *out) {
    for (int i = 0; i < pc->n_figs; i++)
        if (!strcmp(pc->figs[i].name, out)) return &pc->figs[i];
    return NULL;
}

/* Figure out could not be drawn (the reason is said above): plot exits 1,
 * and the figure's files stay as the previous plot left them. */
static void figure_failed(plotctx *pc, const char *out) {
    figure *f = figure_get(pc, out);
    if (f) f->failed = 1;
    pc->failed++;
}

/* Records that the file <out>.<ext> of figure out was written. */
static void figure_file(plotctx *pc, const char *out, const char *ext) {
    for (int i = 0; i < pc->n_figs; i++) {
        figure *f = &pc->figs[i];
        if (strcmp(f->name, out) || f->nfiles == 3) continue;
        char name[300];
        snprintf(name, sizeof name, "%s.%s", out, ext);
        f->files[f->nfiles++] = kb_strdup(name);
        return;
    }
}

/* What made figure out, from which table of which run: line 1 (the run's
 * line, pc->run_line, is line 2); control characters become spaces, so that
 * each stays one line. */
static void provenance_line(const plotctx *pc, const char *out, char *line, size_t cap) {
    const char *sha = !strcmp(pc->from, "summary.csv") ? pc->sha_sum
                      : !strcmp(pc->from, "samples.csv") ? pc->sha_smp : pc->sha_lat;
    snprintf(line, cap, "kvbench plot %s (commit %s): figure %s, drawn from %s/%s (sha256 %s)", kb_version(),
             kb_git_desc(), out, pc->run, pc->from, sha);
    for (char *c = line; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
}

/* The data file's first lines (gnuplot skips lines starting with #). */
static void dat_header(plotctx *pc, FILE *f, const char *out) {
    char line[1600];
    provenance_line(pc, out, line, sizeof line);
    fprintf(f, "# %s\n# %s\n", line, pc->run_line);
}

/* src as the inside of a gnuplot single-quoted literal: gnuplot reads no
 * escapes there but '' for a quote, and a line break would end the command,
 * so labels, task names and paths from the run's files can neither close the
 * literal nor start a command of their own (control characters -> space). */
static void gp_quote(char *dst, size_t cap, const char *src) {
    size_t i = 0;
    for (; *src && i + 2 < cap; src++) {
        unsigned char c = (unsigned char)*src;
        if (c == '\'') {
            dst[i++] = '\'';
            dst[i++] = '\'';
        } else {
            dst[i++] = c < 0x20 || c == 0x7f ? ' ' : (char)c;
        }
    }
    dst[i] = 0;
}

/* A series name as the first line of a data block ("name", read back by
 * columnheader): no double quote or line break can end it early. */
static void gp_header(FILE *f, const char *name) {
    fputc('"', f);
    for (; *name; name++) {
        unsigned char c = (unsigned char)*name;
        fputc(c == '"' ? '\'' : c < 0x20 || c == 0x7f ? ' ' : (char)c, f);
    }
    fputs("\" y\n", f);
}

/* 1 if path holds a whole image: a PNG ends with its IEND chunk, an SVG with
 * its closing tag (gnuplot exits 0 when it could not write all of it). */
static int image_complete(const char *path, int svg) {
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    char tail[65] = {0};
    long n = 0;
    if (fseek(f, -64, SEEK_END)) fseek(f, 0, SEEK_SET);
    n = (long)fread(tail, 1, 64, f);
    fclose(f);
    if (svg) return n > 0 && strstr(tail, "</svg>") != NULL;
    static const char iend[8] = {'I', 'E', 'N', 'D', (char)0xAE, 0x42, 0x60, (char)0x82};
    return n >= 8 && !memcmp(tail + n - 8, iend, 8);
}

static uint32_t crc32_update(uint32_t c, const unsigned char *p, size_t n) {
    c = ~c;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++) c = c >> 1 ^ (0xEDB88320u & -(c & 1));
    }
    return ~c;
}

static void put_be32(unsigned char *p, uint32_t v) {
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8);
    p[3] = (unsigned char)v;
}

/* Writes the image gnuplot wrote whole at tmp, with the provenance text, to
 * the temporary of path (a: closed, atomic_rename puts it in place): a PNG
 * gets an iTXt "Comment" chunk (UTF-8) after its IHDR chunk, an SVG the text
 * in its <desc> (XML-escaped). So a figure copied out of the run directory
 * still names its table, run, commit and model. */
static int stamp_image(const char *tmp, const char *path, int svg, const char *text_in, kb_atomic_file *a,
                       kb_err *err) {
    char *img;
    size_t n;
    int rc = file_read_all(tmp, &img, &n, err);
    if (rc) return rc;
    ustr u = {0}; /* a run path need not be UTF-8: U+FFFD for what is not */
    ustr_from_utf8(&u, text_in);
    for (size_t i = 0; i < u.n; i++) /* not characters in XML 1.0 (the controls are spaces already) */
        if (u.v[i] == 0xFFFE || u.v[i] == 0xFFFF) u.v[i] = 0xFFFD;
    char *text = utf8_from_u32(u.v, u.n);
    ustr_free(&u);
    size_t tn = strlen(text);
    char *outb = NULL;
    size_t on = 0;
    if (!svg) {
        static const unsigned char sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
        if (n < 33 || memcmp(img, sig, 8) || memcmp(img + 12, "IHDR", 4)) {
            rc = kb_fail(err, KB_ERUNTIME, "%s: not the PNG gnuplot writes (no IHDR chunk first)", path);
        } else {
            static const char head[] = "iTXtComment\0\0\0\0\0"; /* keyword, flag, method, language, translated keyword */
            size_t hn = sizeof head - 1, len = hn - 4 + tn;
            outb = KB_MALLOC(n + 12 + len);
            memcpy(outb, img, 33);
            unsigned char *c = (unsigned char *)outb + 33;
            put_be32(c, (uint32_t)len);
            memcpy(c + 4, head, hn);
            memcpy(c + 4 + hn, text, tn);
            put_be32(c + 8 + len, crc32_update(0, c + 4, 4 + len));
            memcpy(c + 12 + len, img + 33, n - 33);
            on = n + 12 + len;
        }
    } else {
        char *d = strstr(img, "</desc>");
        size_t at = d ? (size_t)(d - img) : 0;
        if (!d) {
            char *t = strstr(img, "<svg");
            t = t ? strchr(t, '>') : NULL;
            at = t ? (size_t)(t - img) + 1 : 0;
        }
        if (!at) {
            rc = kb_fail(err, KB_ERUNTIME, "%s: not the SVG gnuplot writes (no <svg> tag)", path);
        } else {
            outb = KB_MALLOC(n + 6 * tn + 32);
            memcpy(outb, img, at);
            on = at;
            on += (size_t)sprintf(outb + on, d ? "\n" : "\n<desc>");
            for (const char *c = text; *c; c++) {
                const char *e = *c == '&' ? "&amp;" : *c == '<' ? "&lt;" : *c == '>' ? "&gt;" : NULL;
                if (e) on += (size_t)sprintf(outb + on, "%s", e);
                else outb[on++] = *c;
            }
            if (!d) on += (size_t)sprintf(outb + on, "</desc>");
            memcpy(outb + on, img + at, n - at);
            on += n - at;
        }
    }
    if (!rc) rc = atomic_open(a, path, err);
    if (!rc && fwrite(outb, 1, on, a->f) != on) {
        rc = kb_fail(err, KB_ERUNTIME, "%s: write failed: %s", path, strerror(errno));
        atomic_abort(a);
    }
    if (!rc) rc = atomic_close(a, err);
    free(outb);
    free(text);
    free(img);
    return rc;
}

/* Runs gnuplot on script for one format (svg 0: PNG); vars: gnuplot
 * assignments. 0 when the image is whole and stamped, at img's temporary
 * (closed, not yet in place); else says why and leaves no file. */
static int gnuplot(plotctx *pc, const char *script, const char *out, int svg, const char *vars,
                   kb_atomic_file *img) {
    /* gnuplot writes a temporary (<name>.tmp.<pid>, which atomic_clean_stale
     * removes if the process dies: name is listed first), stamped into img's temporary of the same
     * name: an image under its own name is whole and carries its provenance */
    char path[1600], tmp[1700], name[300];
    snprintf(name, sizeof name, "%s.%s", out, svg ? "svg" : "png");
    snprintf(path, sizeof path, "%s/%s", pc->dir, name);
    snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
    FILE *g = popen("gnuplot 2>&1", "w");
    if (!g) {
        fprintf(stderr, "kvbench plot: cannot run gnuplot for %s: %s\n", out, strerror(errno));
        return 1;
    }
    fprintf(g, "set loadpath '%s'\noutfile='%s/%s.tmp.%ld'\nfmt='%s'\n%s\nload '%s'\n", pc->scripts_q,
            pc->dir_q, name, (long)getpid(), svg ? "svg" : "png", vars, script);
    int st = pclose(g), rc = 1;
    /* gnuplot exits 0 when it cannot write all of its output (a full disk):
     * a missing or cut image is a failure too */
    if (!st && !image_complete(tmp, svg)) {
        fprintf(stderr, "kvbench plot: gnuplot did not write all of %s (disk full?)\n", path);
    } else if (st) {
        fprintf(stderr, "kvbench plot: gnuplot failed on %s (%s)\n", out, script);
    } else {
        char line[1600], text[3300];
        kb_err e = {0};
        provenance_line(pc, out, line, sizeof line);
        snprintf(text, sizeof text, "%s; %s", line, pc->run_line);
        if (stamp_image(tmp, path, svg, text, img, &e)) /* no figure without its provenance */
            fprintf(stderr, "kvbench plot: %s\n", e.msg);
        else
            rc = 0;
    }
    if (rc) unlink(tmp); /* whatever gnuplot left: a cut image never stays */
    return rc;
}

/* Draws figure out with script from its data file, written whole but not yet
 * in place (dat: closed), in each format asked for; the data file and the
 * images go into place together once every one is whole. When one fails,
 * none does: the figure's files stay as the previous plot left them, so a
 * failing gnuplot (a broken script, a full disk) never costs a figure. */
static void figure_draw(plotctx *pc, kb_atomic_file *dat, const char *script, const char *out,
                        const char *vars) {
    kb_atomic_file img[2];
    memset(img, 0, sizeof img);
    char dat_q[2400], all[14000];
    gp_quote(dat_q, sizeof dat_q, dat->tmp);
    snprintf(all, sizeof all, "datafile='%s'\n%s", dat_q, vars);
    int ok = 1;
    for (int f = 0; f < 2 && ok; f++)
        if (f ? pc->svg : pc->png) ok = !gnuplot(pc, script, out, f, all, &img[f]);
    kb_err e = {0};
    /* a rename still fails where the name is a directory: found before the
     * first one, so that nothing is replaced unless everything is */
    for (int f = -1; f < 2 && ok; f++) {
        const kb_atomic_file *a = f < 0 ? dat : &img[f];
        struct stat st;
        if (a->tmp[0] && !lstat(a->path, &st) && S_ISDIR(st.st_mode)) {
            fprintf(stderr, "kvbench plot: %s: is a directory, expected a file or nothing\n", a->path);
            ok = 0;
        }
    }
    if (ok && !(ok = !atomic_rename(dat, &e))) fprintf(stderr, "kvbench plot: %s\n", e.msg);
    if (ok) figure_file(pc, out, "dat");
    for (int f = 0; f < 2 && ok; f++) {
        if (!img[f].tmp[0]) continue;
        if (atomic_rename(&img[f], &e)) {
            fprintf(stderr, "kvbench plot: %s\n", e.msg);
            ok = 0;
        } else {
            figure_file(pc, out, f ? "svg" : "png");
        }
    }
    atomic_abort(dat); /* the temporaries not in place (none when ok) */
    atomic_abort(&img[0]);
    atomic_abort(&img[1]);
    if (ok) pc->made++;
    else figure_failed(pc, out);
}

/* A figure's data file could not be written (disk full, ...): said, and
 * counted as a failure so that plot exits 1. */
static void dat_failed(plotctx *pc, const char *out, const kb_err *e) {
    fprintf(stderr, "kvbench plot: %s\n", e->msg);
    figure_failed(pc, out);
}

/* ---- series helpers: blocks of (x, y) points, one block per series ---- */

typedef struct series {
    char name[160];
    double *x, *y;
    int n, cap;
} series;

typedef struct series_set {
    series *v;
    int n, cap;
} series_set;

static series *series_get(series_set *s, const char *name) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i].name, name)) return &s->v[i];
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->v = KB_REALLOC(s->v, (size_t)s->cap * sizeof *s->v);
    }
    series *r = &s->v[s->n++];
    memset(r, 0, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", name);
    return r;
}

static void series_add(series *s, double x, double y) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 8;
        s->x = KB_REALLOC(s->x, (size_t)s->cap * sizeof(double));
        s->y = KB_REALLOC(s->y, (size_t)s->cap * sizeof(double));
    }
    /* keep sorted by x */
    int i = s->n++;
    while (i > 0 && s->x[i - 1] > x) {
        s->x[i] = s->x[i - 1];
        s->y[i] = s->y[i - 1];
        i--;
    }
    s->x[i] = x;
    s->y[i] = y;
}

static void series_free(series_set *s) {
    for (int i = 0; i < s->n; i++) {
        free(s->v[i].x);
        free(s->v[i].y);
    }
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* Writes the blocks and draws them; returns 0 if nothing to draw. */
static int draw_series(plotctx *pc, series_set *ss, const char *out, const char *script,
                       const char *extra_vars) {
    int blocks = 0;
    for (int i = 0; i < ss->n; i++) blocks += ss->v[i].n > 0;
    if (!blocks) return 0;
    char path[1400];
    snprintf(path, sizeof path, "%s/%s.dat", pc->dir, out);
    note_figure(pc, out);
    kb_atomic_file a;
    kb_err e = {0};
    if (atomic_open(&a, path, &e)) {
        dat_failed(pc, out, &e);
        return 0;
    }
    dat_header(pc, a.f, out);
    int first = 1;
    for (int i = 0; i < ss->n; i++) {
        if (!ss->v[i].n) continue;
        if (!first) fprintf(a.f, "\n\n");
        first = 0;
        gp_header(a.f, ss->v[i].name);
        for (int k = 0; k < ss->v[i].n; k++) fprintf(a.f, "%.9g %.9g\n", ss->v[i].x[k], ss->v[i].y[k]);
    }
    if (atomic_close(&a, &e)) {
        dat_failed(pc, out, &e);
        return 0;
    }
    char vars[4096];
    snprintf(vars, sizeof vars, "nblocks=%d\n%s", blocks, extra_vars);
    figure_draw(pc, &a, script, out, vars);
    return 1;
}

/* A table of a run: the columns the figures read must be there (other
 * columns, as in tables of older versions, are let be), and those read as
 * numbers (nums, a subset of need) hold numbers; nothing to free on failure. */
static int read_table(const char *path, const char *const *need, const char *const *nums, kb_table *t,
                      kb_err *err) {
    int rc = table_read_csv(path, NULL, 0, t, err); /* frees what it read on failure */
    if (rc) return rc;
    for (int i = 0; !rc && need[i]; i++)
        if (table_col(t, need[i]) < 0)
            rc = kb_fail(err, KB_EINPUT, "%s: no column '%s' (a table of a kvbench run is needed)", path,
                         need[i]);
    if (!rc) rc = table_check_numbers(t, path, nums, err);
    /* the ablation figures read the params column: a damaged one would drop
     * its cells from them without a word */
    for (int r = 0; !rc && table_col(t, "params") >= 0 && r < t->nrow; r++) {
        const char *v = table_get(t, r, "params");
        cJSON *j = NULL;
        kb_err je = {0};
        if (*v && (json_parse(v, strlen(v), "params", &j, &je) || !cJSON_IsObject(j)))
            rc = kb_fail(err, KB_EINPUT, "%s: data row %d: params '%.80s', expected a JSON object", path, r + 1, v);
        cJSON_Delete(j);
    }
    if (rc) table_free(t);
    return rc;
}

/* ---- figures ---- */

static int budget_of(const char *s, double *b) {
    if (!*s) return 0;
    *b = atof(s);
    return 1;
}

/* A summary row over a task's every turn and kind (summaries before the kind
 * column read kind as "", and check_kinds lets an empty kind be "all") */
static int whole_row(const kb_table *sum, int r) {
    const char *kind = table_get(sum, r, "kind");
    return !strcmp(table_get(sum, r, "turn"), "all") && (!*kind || !strcmp(kind, "all"));
}

/* A whole row with a score (an ALL row of a cell that lacks some task has none). */
static int whole_scored(const kb_table *sum, int r) { return whole_row(sum, r) && *table_get(sum, r, "score"); }

/* summary.csv's kind column as summary_write (harness/summary.c) writes it:
 * "all", but on a row over all turns of a task whose samples ask several
 * things (a mixed SCBench task), one of the kinds of its samples.csv rows;
 * and every cell (task, label, budget) has its row over all turns and kinds,
 * the one the figures draw. Without it a damaged kind dropped the cell from
 * the figures without a word. An empty kind reads as "all", as in a summary
 * before the kind column (or one made by hand); without samples.csv (or its
 * kind column) the kinds themselves are not checked against the samples. */
static int check_kinds(const char *path, const kb_table *sum, const kb_table *smp, kb_err *err) {
    int smp_kind = smp && table_col(smp, "kind") >= 0;
    for (int r = 0; r < sum->nrow; r++) {
        const char *task = table_get(sum, r, "task"), *kind = table_get(sum, r, "kind");
        if (!*kind || !strcmp(kind, "all")) continue;
        if (strcmp(table_get(sum, r, "turn"), "all"))
            return kb_fail(err, KB_EINPUT, "%s: data row %d: kind '%.80s' on a row of turn '%.16s', expected 'all' "
                           "(rows per kind are over all turns)", path, r + 1, kind, table_get(sum, r, "turn"));
        if (!smp_kind) continue;
        /* the kinds the task's samples ask, in order of appearance */
        char kinds[400] = "";
        int n = 0, found = 0;
        for (int q = 0; smp_kind && q < smp->nrow; q++) {
            if (strcmp(table_get(smp, q, "task"), task)) continue;
            const char *k = table_get(smp, q, "kind");
            int seen = 0;
            for (int p = 0; p < q && !seen; p++)
                seen = !strcmp(table_get(smp, p, "task"), task) && !strcmp(table_get(smp, p, "kind"), k);
            if (seen) continue;
            found |= !strcmp(k, kind);
            size_t o = strlen(kinds);
            if (o + 8 < sizeof kinds)
                snprintf(kinds + o, sizeof kinds - o, "%s'%.80s'", n ? ", " : "", k);
            n++;
        }
        if (n >= 2 && found) continue;
        if (n >= 2)
            return kb_fail(err, KB_EINPUT, "%s: data row %d: kind '%.80s', expected 'all' or a kind of task '%.64s' "
                           "in samples.csv: %s", path, r + 1, kind, task, kinds);
        return kb_fail(err, KB_EINPUT, "%s: data row %d: kind '%.80s', expected 'all' (task '%.64s' %s%s, so it has "
                       "no rows per kind)", path, r + 1, kind, task,
                       n ? "asks one thing in samples.csv: " : "has no rows in samples.csv", kinds);
    }
    for (int r = 0; r < sum->nrow; r++) {
        if (whole_row(sum, r)) continue;
        const char *task = table_get(sum, r, "task"), *label = table_get(sum, r, "label");
        const char *budget = table_get(sum, r, "budget");
        int q = 0;
        while (q < sum->nrow && !(whole_row(sum, q) && !strcmp(table_get(sum, q, "task"), task) &&
                                  !strcmp(table_get(sum, q, "label"), label) &&
                                  !strcmp(table_get(sum, q, "budget"), budget)))
            q++;
        if (q == sum->nrow)
            return kb_fail(err, KB_EINPUT, "%s: data row %d: task '%.64s', cell '%.80s' budget %.16s has no row over "
                           "all turns and kinds (turn 'all', kind 'all'), which summary.csv has for every cell",
                           path, r + 1, task, label, *budget ? budget : "none");
    }
    return 0;
}

static void accuracy_plots(plotctx *pc, const kb_table *sum) {
    /* tasks in order of appearance */
    for (int r = 0; r < sum->nrow; r++) {
        const char *task = table_get(sum, r, "task");
        int seen = 0;
        for (int q = 0; q < r && !seen; q++) seen = !strcmp(table_get(sum, q, "task"), task);
        if (seen) continue;
        series_set ss = {0};
        double lo = INFINITY, hi = -INFINITY, b;
        for (int q = 0; q < sum->nrow; q++)
            if (!strcmp(table_get(sum, q, "task"), task) && whole_scored(sum, q) &&
                budget_of(table_get(sum, q, "budget"), &b)) {
                lo = fmin(lo, b);
                hi = fmax(hi, b);
            }
        for (int q = 0; q < sum->nrow; q++) {
            if (strcmp(table_get(sum, q, "task"), task) || !whole_scored(sum, q))
                continue;
            series *s = series_get(&ss, table_get(sum, q, "label"));
            double y = atof(table_get(sum, q, "score"));
            if (budget_of(table_get(sum, q, "budget"), &b)) series_add(s, b, y);
            else if (isfinite(lo)) { /* no budget (Full KV): a flat reference line */
                series_add(s, lo, y);
                if (hi > lo) series_add(s, hi, y);
            }
        }
        char out[200], safe[160], vars[1200], task_q[400];
        safe_name(safe, sizeof safe, task);
        gp_quote(task_q, sizeof task_q, task);
        snprintf(out, sizeof out, "accuracy_%s", safe);
        if (isfinite(lo)) { /* a task without a budgeted row has no figure, nor a name */
            figure_name(pc, out, sizeof out, task);
            snprintf(vars, sizeof vars, "ttl='%s: score vs token budget (%s)'\nylab='score (x100, %s)'\n",
                     !strcmp(task, "ALL") ? "Average over tasks" : task_q, pc->model,
                     !strcmp(task, "ALL") ? "mean of task scores" : "mean over samples");
            draw_series(pc, &ss, out, "accuracy.gp", vars);
        }
        series_free(&ss);
    }
}

static int dbl_index(double *v, int *n, double x) {
    for (int i = 0; i < *n; i++)
        if (fabs(v[i] - x) < 1e-9) return i;
    v[(*n)++] = x;
    return *n - 1;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Heatmap column of a row: the generator's nominal length (target tokens, or
 * haystack words for the needle task), else the measured context. */
static double heat_x(const kb_table *smp, int q) {
    const char *len = table_get(smp, q, "target_tokens");
    if (!*len) len = table_get(smp, q, "context_words");
    if (!*len) len = table_get(smp, q, "context_tokens");
    return atof(len);
}

/* Rows of the needle/passkey task (the heatmaps' data: RULER's and SCBench's
 * tasks have depths too, but a fixed length each). */
static int heat_row(const kb_table *smp, int q) {
    return *table_get(smp, q, "depth") && !strcmp(table_get(smp, q, "task"), "needle");
}

/* Mean measured context tokens of the rows in column x (tick labels). */
static double heat_tokens(const kb_table *smp, const char *label, const char *budget, double x) {
    double sum = 0;
    int n = 0;
    for (int q = 0; q < smp->nrow; q++)
        if (heat_row(smp, q) && !strcmp(table_get(smp, q, "label"), label) &&
            !strcmp(table_get(smp, q, "budget"), budget) && fabs(heat_x(smp, q) - x) < 1e-9) {
            sum += atof(table_get(smp, q, "context_tokens"));
            n++;
        }
    return n ? sum / n : 0;
}

static void heatmaps(plotctx *pc, const kb_table *smp) {
    for (int r = 0; r < smp->nrow; r++) {
        if (!heat_row(smp, r)) continue;
        const char *label = table_get(smp, r, "label"), *budget = table_get(smp, r, "budget");
        int seen = 0;
        for (int q = 0; q < r && !seen; q++)
            seen = heat_row(smp, q) && !strcmp(table_get(smp, q, "label"), label) &&
                   !strcmp(table_get(smp, q, "budget"), budget);
        if (seen) continue;
        /* every row adds at most one length and one depth */
        double *xs = KB_MALLOC((size_t)smp->nrow * sizeof(double)), *ys = KB_MALLOC((size_t)smp->nrow * sizeof(double));
        int nx = 0, ny = 0;
        for (int q = 0; q < smp->nrow; q++) {
            if (!heat_row(smp, q) || strcmp(table_get(smp, q, "label"), label) ||
                strcmp(table_get(smp, q, "budget"), budget))
                continue;
            dbl_index(xs, &nx, heat_x(smp, q));
            dbl_index(ys, &ny, atof(table_get(smp, q, "depth")));
        }
        if (nx < 2 || ny < 2) { /* an image needs two lengths and two depths */
            free(xs);
            free(ys);
            continue;
        }
        qsort(xs, (size_t)nx, sizeof(double), cmp_dbl);
        qsort(ys, (size_t)ny, sizeof(double), cmp_dbl);
        double *sum = KB_CALLOC((size_t)nx * ny, sizeof(double));
        int *cnt = KB_CALLOC((size_t)nx * ny, sizeof(int));
        for (int q = 0; q < smp->nrow; q++) {
            if (!heat_row(smp, q) || strcmp(table_get(smp, q, "label"), label) ||
                strcmp(table_get(smp, q, "budget"), budget))
                continue;
            int xi = dbl_index(xs, &nx, heat_x(smp, q)), yi = dbl_index(ys, &ny, atof(table_get(smp, q, "depth")));
            sum[yi * nx + xi] += 100 * atof(table_get(smp, q, "score"));
            cnt[yi * nx + xi]++;
        }
        char safe[200], out[260], path[1500];
        snprintf(safe, sizeof safe, "%s_B%s", label, *budget ? budget : "none");
        char s2[200];
        safe_name(s2, sizeof s2, safe);
        snprintf(out, sizeof out, "needle_%s", s2);
        figure_name(pc, out, sizeof out, safe);
        snprintf(path, sizeof path, "%s/%s.dat", pc->dir, out);
        note_figure(pc, out);
        kb_atomic_file a;
        kb_err e = {0};
        if (atomic_open(&a, path, &e)) {
            dat_failed(pc, out, &e);
        } else {
            dat_header(pc, a.f, out);
            for (int yi = 0; yi < ny; yi++)
                for (int xi = 0; xi < nx; xi++)
                    fprintf(a.f, "%d %d %.6g\n", xi, yi,
                            cnt[yi * nx + xi] ? sum[yi * nx + xi] / cnt[yi * nx + xi] : NAN);
            if (atomic_close(&a, &e)) {
                dat_failed(pc, out, &e);
            } else {
                char xt[4096] = "", yt[4096] = "", vars[10000];
                size_t o = 0;
                for (int i = 0; i < nx && o < sizeof xt - 64; i++)
                    o += (size_t)snprintf(xt + o, sizeof xt - o, "%s\"%.0f\" %d", i ? "," : "",
                                          heat_tokens(smp, label, budget, xs[i]), i);
                o = 0;
                for (int i = 0; i < ny && o < sizeof yt - 64; i++)
                    o += (size_t)snprintf(yt + o, sizeof yt - o, "%s\"%.2f\" %d", i ? "," : "", ys[i], i);
                char label_q[400], budget_q[200];
                gp_quote(label_q, sizeof label_q, label);
                gp_quote(budget_q, sizeof budget_q, *budget ? budget : "none (full cache)");
                snprintf(vars, sizeof vars,
                         "ttl='Needle accuracy by depth and length: %s, budget %s (%s)'\nnx=%d\nny=%d\n"
                         "xt='%s'\nyt='%s'\n",
                         label_q, budget_q, pc->model, nx, ny, xt, yt);
                figure_draw(pc, &a, "heatmap.gp", out, vars);
            }
        }
        free(sum);
        free(cnt);
        free(xs);
        free(ys);
    }
}

static void speedup_plot(plotctx *pc, const kb_table *lat) {
    series_set ss = {0};
    for (int r = 0; r < lat->nrow; r++) {
        const char *sp = table_get(lat, r, "speedup_vs_full");
        if (!*sp) continue;
        char name[160];
        const char *b = table_get(lat, r, "budget");
        snprintf(name, sizeof name, "%s%s%s", table_get(lat, r, "label"), *b ? " B=" : "", b);
        series_add(series_get(&ss, name), atof(table_get(lat, r, "context")), atof(sp));
    }
    char vars[1000], out[64] = "speedup";
    snprintf(vars, sizeof vars, "ttl='Decode speedup over Full KV (%s)'\n", pc->model);
    if (ss.n) figure_name(pc, out, sizeof out, "speedup");
    draw_series(pc, &ss, out, "speedup.gp", vars);
    series_free(&ss);
}

/* Cells whose params JSON sets `key`: score vs that value (kernel) or vs budget (alpha). */
static void ablation_plots(plotctx *pc, const kb_table *sum) {
    series_set ks = {0}, as = {0};
    for (int r = 0; r < sum->nrow; r++) {
        if (!whole_scored(sum, r)) continue;
        cJSON *p = cJSON_Parse(table_get(sum, r, "params"));
        const cJSON *k = p ? cJSON_GetObjectItemCaseSensitive(p, "kernel") : NULL;
        const cJSON *al = p ? cJSON_GetObjectItemCaseSensitive(p, "alpha") : NULL;
        double y = atof(table_get(sum, r, "score")), b;
        const char *task = table_get(sum, r, "task");
        if (cJSON_IsNumber(k)) {
            char name[160];
            const char *bs = table_get(sum, r, "budget");
            snprintf(name, sizeof name, "%s%s%s", task, *bs ? " B=" : "", bs);
            series_add(series_get(&ks, name), k->valuedouble, y);
        }
        if (!strcmp(task, "ALL") && budget_of(table_get(sum, r, "budget"), &b) &&
            (cJSON_IsNumber(al) || (cJSON_IsString(al) && !strcmp(al->valuestring, "auto")))) {
            char name[64];
            if (cJSON_IsNumber(al)) snprintf(name, sizeof name, "alpha=%.2g", al->valuedouble);
            else snprintf(name, sizeof name, "alpha=auto");
            series_add(series_get(&as, name), b, y);
        }
        cJSON_Delete(p);
    }
    char vars[1000];
    snprintf(vars, sizeof vars, "ttl='SnapKV++ pooling-kernel ablation (%s)'\nxlab='max-pool kernel size'\nlogx=1\n", pc->model);
    char out[64] = "ablation_kernel";
    if (ks.n) figure_name(pc, out, sizeof out, "ablation kernel");
    if (ks.n) draw_series(pc, &ks, out, "ablation.gp", vars);
    snprintf(vars, sizeof vars, "ttl='RocketKV stage-split ablation: average score (%s)'\nxlab='token budget B'\nlogx=1\n", pc->model);
    snprintf(out, sizeof out, "ablation_alpha");
    if (as.n) figure_name(pc, out, sizeof out, "ablation alpha");
    if (as.n) draw_series(pc, &as, out, "ablation.gp", vars);
    series_free(&ks);
    series_free(&as);
}

/* The sha256 of RUN/name into hex. */
static int table_sha(const char *run, const char *name, char hex[65], kb_err *err) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", run, name);
    return sha256_file(path, hex, err);
}

static const char *str_or(const cJSON *o, const char *key, const char *dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : dflt;
}

/* What run.json says of the run, for the manifest (returned) and the data
 * files' provenance line (line). */
static cJSON *run_provenance(const cJSON *rj, const char *rsha, char *line, size_t cap) {
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(rj, "model");
    const cJSON *cfg = cJSON_GetObjectItemCaseSensitive(rj, "config");
    const char *kind = str_or(rj, "kind", "sweep"), *commit = str_or(rj, "git_commit", "?");
    const char *config = str_or(cfg, "name", str_or(rj, "config_file", "")), *status = str_or(rj, "status", "?");
    const char *mname = str_or(m, "name", "?"), *msha = str_or(m, "sha256", "?");
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "run_json_sha256", rsha);
    cJSON_AddStringToObject(o, "kind", kind);
    if (*config) cJSON_AddStringToObject(o, "config", config);
    cJSON_AddStringToObject(o, "kvbench_version", str_or(rj, "kvbench_version", "?"));
    cJSON_AddStringToObject(o, "git_commit", commit);
    cJSON *mo = cJSON_AddObjectToObject(o, "model");
    cJSON_AddStringToObject(mo, "name", mname);
    cJSON_AddStringToObject(mo, "sha256", msha);
    cJSON_AddStringToObject(o, "status", status);
    const char *t = str_or(rj, "start_time", NULL);
    if (t) cJSON_AddStringToObject(o, "start_time", t);
    snprintf(line, cap, "run: run.json (sha256 %s): %s%s%.200s, kvbench commit %.64s, model '%.300s' sha256 "
             "%.64s, status %.32s", rsha, kind, *config ? " of config " : "", config, commit, mname, msha, status);
    for (char *c = line; *c; c++)
        if ((unsigned char)*c < 0x20 || *c == 0x7f) *c = ' ';
    return o;
}

/* The figures an earlier plot listed that this one did not write are
 * removed: they were drawn from other data (another run in the directory,
 * or cells no longer in the tables). */
static int written_by(const figure *f, const char *file) {
    for (int k = 0; k < f->nfiles; k++)
        if (!strcmp(f->files[k], file)) return 1;
    return 0;
}

static int written(const plotctx *pc, const char *file) {
    for (int f = 0; f < pc->n_figs; f++)
        if (written_by(&pc->figs[f], file)) return 1;
    return 0;
}

/* 1 if file is a file of figure f that this plot failed to draw, left as
 * the previous plot wrote it: one of f's own (<name>.dat, or an image of a
 * format asked for), not written now, listed by the previous plots.json and
 * still there. It stays, and the new plots.json lists it under f. */
static int kept_by(const plotctx *pc, const figure *f, const char *file) {
    size_t n = strlen(f->name);
    if (!f->failed || strncmp(file, f->name, n) || file[n] != '.' || written_by(f, file)) return 0;
    const char *ext = file + n + 1;
    if (strcmp(ext, "dat") && !(pc->png && !strcmp(ext, "png")) && !(pc->svg && !strcmp(ext, "svg"))) return 0;
    int listed = 0;
    for (int i = 0; i < pc->n_old && !listed; i++) listed = !strcmp(pc->old[i], file);
    char path[1600];
    snprintf(path, sizeof path, "%s/%s", pc->dir, file);
    return listed && access(path, F_OK) == 0;
}

static int kept(const plotctx *pc, const char *file) {
    for (int f = 0; f < pc->n_figs; f++)
        if (kept_by(pc, &pc->figs[f], file)) return 1;
    return 0;
}

static void remove_listed_unwritten(plotctx *pc, char **list, int n) {
    for (int i = 0; i < n; i++)
        if (!written(pc, list[i]) && !kept(pc, list[i])) {
            char path[1600];
            snprintf(path, sizeof path, "%s/%s", pc->dir, list[i]);
            unlink(path);
        }
}

static void remove_stale(plotctx *pc) {
    remove_listed_unwritten(pc, pc->old, pc->n_old);
    remove_listed_unwritten(pc, pc->pending, pc->n_pending); /* what failed figures left */
}

/* plots/plots.json: the plot that made the figures, the run and tables they
 * were drawn from, and every figure with its files. While the plot runs
 * (final 0) it also lists, as "in_progress", the files of the previous plot
 * and those this one is writing, so that whatever is on disk is listed. */
static int write_manifest(plotctx *pc, int final, kb_err *err) {
    cJSON *j = cJSON_CreateObject();
    cJSON_AddStringToObject(j, "kind", "plots");
    cJSON_AddStringToObject(j, "kvbench_version", kb_version());
    cJSON_AddStringToObject(j, "git_commit", kb_git_desc());
    cJSON_AddStringToObject(j, "run_dir", pc->run);
    cJSON_AddItemToObject(j, "run", pc->run_prov ? cJSON_Duplicate(pc->run_prov, 1) : cJSON_CreateNull());
    cJSON *t = cJSON_AddObjectToObject(j, "tables");
    if (pc->have_sum) cJSON_AddStringToObject(t, "summary.csv", pc->sha_sum);
    if (pc->have_smp) cJSON_AddStringToObject(t, "samples.csv", pc->sha_smp);
    if (pc->have_lat) cJSON_AddStringToObject(t, "latency.csv", pc->sha_lat);
    if (!final) {
        cJSON *ip = cJSON_AddArrayToObject(j, "in_progress");
        for (int i = 0; i < pc->n_old; i++) cJSON_AddItemToArray(ip, cJSON_CreateString(pc->old[i]));
        for (int i = 0; i < pc->n_pending; i++) cJSON_AddItemToArray(ip, cJSON_CreateString(pc->pending[i]));
    }
    cJSON *figs = cJSON_AddArrayToObject(j, "figures");
    for (int i = 0; i < pc->n_figs; i++) {
        const figure *f = &pc->figs[i];
        /* a figure that failed: with the files of the previous plot it keeps */
        char keep[3][300];
        int nkeep = 0;
        static const char *const ext[3] = {"dat", "png", "svg"};
        for (int k = 0; k < 3; k++) {
            snprintf(keep[nkeep], sizeof keep[nkeep], "%s.%s", f->name, ext[k]);
            nkeep += kept_by(pc, f, keep[nkeep]);
        }
        if (!f->nfiles && !nkeep) continue;
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", f->name);
        cJSON_AddStringToObject(o, "draws", f->key);
        cJSON_AddStringToObject(o, "from", f->from);
        if (f->failed) cJSON_AddBoolToObject(o, "failed", 1);
        cJSON *files = cJSON_AddArrayToObject(o, "files");
        for (int k = 0; k < f->nfiles; k++) cJSON_AddItemToArray(files, cJSON_CreateString(f->files[k]));
        for (int k = 0; k < nkeep; k++) cJSON_AddItemToArray(files, cJSON_CreateString(keep[k]));
        cJSON_AddItemToArray(figs, o);
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/" KB_PLOTS_MANIFEST, pc->run);
    int rc = json_write_file(path, j, err);
    cJSON_Delete(j);
    return rc;
}

/* --formats: a comma-separated list of png and svg, each at most once (before
 * 2026-12-05 any value holding "png" or "svg" passed: "png,pdf", "jpgpng") */
static int parse_formats(const char *s, int *png, int *svg) {
    *png = *svg = 0;
    const char *p = s;
    for (;;) {
        size_t n = strcspn(p, ",");
        int *f = n == 3 && !strncmp(p, "png", 3) ? png : n == 3 && !strncmp(p, "svg", 3) ? svg : NULL;
        if (!f || *f) {
            fprintf(stderr, "kvbench plot: --formats '%s': %s '%.*s', expected a comma-separated list of png and "
                    "svg (each once)\n", s, f ? "a second" : n ? "unknown format" : "an empty item", (int)n, p);
            return 2;
        }
        *f = 1;
        if (!p[n]) return 0;
        p += n + 1;
    }
}

int cmd_plot(int argc, char **argv) {
    static const struct option opts[] = {{"formats", 1, 0, 'f'}, {"help", 0, 0, 'h'}, {0, 0, 0, 0}};
    plotctx pc;
    memset(&pc, 0, sizeof pc);
    pc.png = pc.svg = 1;
    int c;
    optind = 1;
    kb_cli_seen seen = {0};
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (cli_once("plot", c, opts, NULL, &seen)) return 2;
        switch (c) {
        case 'f':
            if (parse_formats(optarg, &pc.png, &pc.svg)) return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc - 1) {
        usage(stderr);
        return 2;
    }
    pc.run = argv[optind];
    pc.scripts = scripts_dir();
    kb_err err = {0};
    if (check_dir_len(pc.run, &err)) { /* RUN/plots/<figure>.svg must fit its buffer */
        fprintf(stderr, "kvbench plot: %s\n", err.msg);
        return 2;
    }
    char path[1200];
    snprintf(path, sizeof path, "%s/summary.csv", pc.run);
    kb_table sum, smp, lat;
    /* each table with its own columns, and the numbers the figures read */
    static const char *const sum_need[] = {"task", "turn", "label", "params", "budget", "score", NULL};
    static const char *const sum_num[] = {"budget", "score", NULL};
    static const char *const smp_need[] = {"task", "label", "budget", "depth", "score", "target_tokens",
                                           "context_words", "context_tokens", NULL};
    static const char *const smp_num[] = {"budget", "score", "depth", "target_tokens", "context_words",
                                          "context_tokens", NULL};
    static const char *const lat_need[] = {"label", "budget", "context", "speedup_vs_full", NULL};
    static const char *const lat_num[] = {"budget", "context", "speedup_vs_full", NULL};
    /* which tables there are, then what run.json says of them, then only the
     * tables to draw are read and checked */
    int have_sum = access(path, R_OK) == 0, have_smp, have_lat;
    snprintf(path, sizeof path, "%s/samples.csv", pc.run);
    have_smp = access(path, R_OK) == 0;
    snprintf(path, sizeof path, "%s/latency.csv", pc.run);
    have_lat = access(path, R_OK) == 0;
    if (!have_sum && !have_lat) {
        fprintf(stderr, "kvbench plot: %s has neither summary.csv nor latency.csv\n", pc.run);
        return 2;
    }
    snprintf(pc.model, sizeof pc.model, "model?");
    snprintf(path, sizeof path, "%s/run.json", pc.run);
    if (access(path, F_OK) == 0) {
        char rsha[65];
        cJSON *rj = NULL;
        if (json_load_file(path, &rj, &err) || sha256_file(path, rsha, &err)) {
            /* the figures would be drawn without what makes them traceable */
            fprintf(stderr, "kvbench plot: %s\n", err.msg);
            cJSON_Delete(rj);
            return 2;
        }
        const cJSON *m = cJSON_GetObjectItemCaseSensitive(rj, "model");
        const cJSON *nm = cJSON_GetObjectItemCaseSensitive(m, "name");
        if (cJSON_IsString(nm)) gp_quote(pc.model, sizeof pc.model, nm->valuestring);
        pc.run_prov = run_provenance(rj, rsha, pc.run_line, sizeof pc.run_line);
        /* a table this run.json does not describe (summary.csv or samples.csv
         * beside a bench methods run's) is neither read nor drawn: its figures
         * would carry the provenance of another run */
        const cJSON *kind = cJSON_GetObjectItemCaseSensitive(rj, "kind");
        const char *k = cJSON_IsString(kind) ? kind->valuestring : NULL;
        static const char *const acc[] = {"summary.csv", "samples.csv"};
        int *have_acc[] = {&have_sum, &have_smp};
        for (int i = 0; i < 2; i++)
            if (*have_acc[i] && !run_kind_has_table(k, acc[i])) {
                fprintf(stderr, "kvbench plot: warning: %s/%s is not drawn: the run.json beside it is a bench "
                        "methods run's, which writes no %s, so its figures could not be traced to their run\n",
                        pc.run, acc[i], acc[i]);
                *have_acc[i] = 0;
            }
        cJSON_Delete(rj);
        if (!have_sum && !have_lat) {
            fprintf(stderr, "kvbench plot: %s has no table its run.json describes\n", pc.run);
            cJSON_Delete(pc.run_prov);
            return 2;
        }
    } else {
        fprintf(stderr, "kvbench plot: warning: %s has no run.json: the figures cannot be traced to a "
                "config, commit or model\n", pc.run);
        snprintf(pc.run_line, sizeof pc.run_line, "run: none (no run.json beside the table)");
    }
    /* the tables, each with its own columns and the numbers the figures read;
     * summary.csv's kinds as summary_write writes them; their sha256 */
    int rs = 0, rm = 0, rl = 0; /* read: to free */
    snprintf(path, sizeof path, "%s/summary.csv", pc.run);
    int bad = have_sum && !(rs = !read_table(path, sum_need, sum_num, &sum, &err));
    snprintf(path, sizeof path, "%s/samples.csv", pc.run);
    if (!bad) bad = have_smp && !(rm = !read_table(path, smp_need, smp_num, &smp, &err));
    snprintf(path, sizeof path, "%s/summary.csv", pc.run);
    if (!bad) bad = have_sum && check_kinds(path, &sum, have_smp ? &smp : NULL, &err);
    snprintf(path, sizeof path, "%s/latency.csv", pc.run);
    if (!bad) bad = have_lat && !(rl = !read_table(path, lat_need, lat_num, &lat, &err));
    if (!bad)
        bad = (have_sum && table_sha(pc.run, "summary.csv", pc.sha_sum, &err)) ||
              (have_smp && table_sha(pc.run, "samples.csv", pc.sha_smp, &err)) ||
              (have_lat && table_sha(pc.run, "latency.csv", pc.sha_lat, &err));
    snprintf(pc.dir, sizeof pc.dir, "%s/plots", pc.run);
    gp_quote(pc.dir_q, sizeof pc.dir_q, pc.dir);
    gp_quote(pc.scripts_q, sizeof pc.scripts_q, pc.scripts);
    /* the scripts and gnuplot, before plots/ is touched */
    if (!bad) bad = check_tools(&pc, &err) || make_dirs(pc.dir, &err);
    if (bad) {
        fprintf(stderr, "kvbench plot: %s\n", err.msg);
        cJSON_Delete(pc.run_prov);
        if (rs) table_free(&sum);
        if (rm) table_free(&smp);
        if (rl) table_free(&lat);
        return 2;
    }
    /* the previous list, and what a plot killed here left: the temporaries of
     * the files it listed (each is listed before it is written) and of
     * plots.json; no other file */
    plots_listed(pc.run, &pc.old, &pc.n_old);
    {
        const char **names = KB_MALLOC(((size_t)pc.n_old + 1) * sizeof *names);
        for (int i = 0; i < pc.n_old; i++) names[i] = pc.old[i];
        names[pc.n_old] = "plots.json";
        atomic_clean_stale(pc.dir, names, pc.n_old + 1);
        free(names);
    }
    pc.have_sum = have_sum, pc.have_smp = have_smp, pc.have_lat = have_lat;
    if (have_sum) {
        pc.from = "summary.csv";
        accuracy_plots(&pc, &sum);
        ablation_plots(&pc, &sum);
    }
    pc.from = "samples.csv";
    if (have_smp) heatmaps(&pc, &smp);
    pc.from = "latency.csv";
    if (have_lat) speedup_plot(&pc, &lat);
    if (have_sum) table_free(&sum);
    if (have_smp) table_free(&smp);
    if (have_lat) table_free(&lat);
    remove_stale(&pc);
    if (write_manifest(&pc, 1, &err)) {
        fprintf(stderr, "kvbench plot: %s\n", err.msg);
        pc.failed++;
    }
    cJSON_Delete(pc.run_prov);
    for (int i = 0; i < pc.n_old; i++) free(pc.old[i]);
    for (int i = 0; i < pc.n_pending; i++) free(pc.pending[i]);
    free(pc.old);
    free(pc.pending);
    for (int i = 0; i < pc.n_figs; i++) {
        figure *f = &pc.figs[i];
        free(f->name);
        free(f->key);
        free(f->from);
        for (int k = 0; k < f->nfiles; k++) free(f->files[k]);
    }
    free(pc.figs);
    printf("kvbench plot: %d figures in %s/ (%s%s%s)%s\n", pc.made, pc.dir, pc.png ? "png" : "",
           pc.png && pc.svg ? " + " : "", pc.svg ? "svg" : "",
           pc.failed ? ", some figures failed (above)" : "");
    return pc.failed ? 1 : 0;
}
