/* test_gguf_mutate.c - thousands of corrupted copies of the real model
 * ($KVBENCH_MODEL_FILE; skipped with a message when unset): bit flips and
 * byte overwrites in the header/metadata/tensor-info region, length and count
 * fields set to huge or off-by-a-little values, type ids, dims, n_dims and
 * offsets corrupted, truncations at many points. Every trial must give 0 or
 * KB_EINPUT with a message that starts with the file name, and never crash
 * or read out of bounds (run under ASan by `make sanitize`; the buffer given
 * to gguf_open_mem is exactly the file size, so ASan sees any over-read).
 * When a corrupted file still opens, every tensor and string element is
 * touched and the whole dump printed, to exercise the accessors on it.
 *
 * Speed: the model is read once; each trial changes a few bytes in place and
 * restores them. KVBENCH_MUTATE_TRIALS and KVBENCH_MUTATE_SEED override the
 * defaults (a failure prints the seed and trial to reproduce it). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "check.h"
#include "harness/engine/gguf.h"

#if defined(__SANITIZE_ADDRESS__)
#define DEFAULT_TRIALS 2000 /* ASan makes each trial ~2-3x slower */
#else
#define DEFAULT_TRIALS 4000
#endif

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return rng * 2685821657736338717ull;
}
static uint64_t rnd_below(uint64_t n) { return n ? rnd() % n : 0; }

/* --------------------------------------------- structure of the pristine file */

enum { F_COUNT, F_LEN, F_VTYPE, F_NDIMS, F_DIM, F_GTYPE, F_OFFSET, F_KINDS };
static const char *kind_name[F_KINDS] = {"count", "length", "value type", "n_dims", "dim",
                                         "ggml type", "tensor offset"};

typedef struct field {
    size_t pos;
    int size; /* 4 or 8 */
    int kind;
} field;

typedef struct fields {
    field *v;
    size_t n, cap;
} fields;

static void add(fields *fs, size_t pos, int size, int kind) {
    if (fs->n == fs->cap) {
        fs->cap = fs->cap ? 2 * fs->cap : 1024;
        fs->v = realloc(fs->v, fs->cap * sizeof *fs->v);
    }
    fs->v[fs->n++] = (field){pos, size, kind};
}

static uint64_t rd(const uint8_t *p, int size) {
    uint64_t v = 0;
    for (int i = size - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}
static void wr(uint8_t *p, int size, uint64_t v) {
    for (int i = 0; i < size; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* A separate little walker over the (valid) model, recording where every
 * structural field sits. Returns the end of the tensor infos, 0 on surprise. */
static size_t walk_value(const uint8_t *m, size_t size, size_t pos, uint32_t type, fields *fs) {
    static const int scalar[13] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    if (type > 12) return 0;
    if (type == 8) {
        if (pos + 8 > size) return 0;
        add(fs, pos, 8, F_LEN);
        return pos + 8 + rd(m + pos, 8);
    }
    if (type != 9) return pos + (size_t)scalar[type];
    if (pos + 12 > size) return 0;
    add(fs, pos, 4, F_VTYPE);
    add(fs, pos + 4, 8, F_LEN);
    uint32_t et = (uint32_t)rd(m + pos, 4);
    uint64_t n = rd(m + pos + 4, 8);
    pos += 12;
    if (et != 8 && et != 9) return et > 12 ? 0 : pos + (size_t)n * (size_t)scalar[et];
    for (uint64_t i = 0; i < n && pos; i++) pos = walk_value(m, size, pos, et, fs);
    return pos;
}

static size_t walk(const uint8_t *m, size_t size, fields *fs) {
    if (size < 24) return 0;
    add(fs, 8, 8, F_COUNT);
    add(fs, 16, 8, F_COUNT);
    uint64_t nt = rd(m + 8, 8), nkv = rd(m + 16, 8);
    size_t pos = 24;
    for (uint64_t i = 0; i < nkv && pos; i++) {
        add(fs, pos, 8, F_LEN);
        pos += 8 + rd(m + pos, 8);
        add(fs, pos, 4, F_VTYPE);
        uint32_t t = (uint32_t)rd(m + pos, 4);
        pos = walk_value(m, size, pos + 4, t, fs);
        if (pos > size) return 0;
    }
    for (uint64_t i = 0; i < nt && pos; i++) {
        add(fs, pos, 8, F_LEN);
        pos += 8 + rd(m + pos, 8);
        add(fs, pos, 4, F_NDIMS);
        uint32_t nd = (uint32_t)rd(m + pos, 4);
        pos += 4;
        for (uint32_t d = 0; d < nd; d++, pos += 8) add(fs, pos, 8, F_DIM);
        add(fs, pos, 4, F_GTYPE);
        add(fs, pos + 4, 8, F_OFFSET);
        pos += 12;
        if (pos > size) return 0;
    }
    return pos;
}

/* ------------------------------------------------------------------ trial */

static int trial_failures = 0;
static uint64_t n_opened, n_rejected; /* outcomes, reported */

/* Opens buf[0..size) and checks the outcome; desc says what was done. */
static void check_open(const uint8_t *buf, size_t size, uint64_t trial, const char *desc, FILE *devnull) {
    gguf_file *f = NULL;
    kb_err err = {0};
    int rc = gguf_open_mem(buf, size, "model.gguf", &f, &err);
    check_count++;
    int ok = rc == 0 ? f != NULL
                     : rc == KB_EINPUT && f == NULL && !strncmp(err.msg, "model.gguf: ", 12) &&
                           strlen(err.msg) > 20;
    if (!ok) {
        check_failures++;
        if (trial_failures++ < 10)
            fprintf(stderr, "FAIL trial %llu (%s): rc %d, message '%s'\n",
                    (unsigned long long)trial, desc, rc, err.msg);
    }
    if (rc || !f) {
        n_rejected++;
        return;
    }
    n_opened++;
    /* still valid: every accessor must stay inside the buffer */
    uint64_t sum = 0;
    for (uint64_t i = 0; i < f->n_tensors; i++) {
        const gguf_tensor *t = &f->tensors[i];
        const uint8_t *d = t->data;
        if (d < buf || t->nbytes > size || d + t->nbytes > buf + size) {
            check_failures++;
            fprintf(stderr, "FAIL trial %llu (%s): tensor %s outside the file\n",
                    (unsigned long long)trial, desc, t->name);
            break;
        }
        if (t->nbytes) sum += d[0] + d[t->nbytes - 1];
        if (gguf_find_tensor(f, t->name) != t) check_failures++;
    }
    for (uint64_t i = 0; i < f->n_kv; i++) {
        const gguf_kv *kv = &f->kv[i];
        if (kv->type == GGUF_T_ARRAY && kv->arr_type == GGUF_T_STRING)
            for (uint64_t e = 0; e < kv->arr_n; e++) {
                gguf_str s = gguf_arr_str(kv, e);
                if (s.len) sum += (uint8_t)s.s[0] + (uint8_t)s.s[s.len - 1];
            }
        else if (kv->type == GGUF_T_ARRAY && kv->arr_n)
            sum += (uint64_t)(gguf_arr_num(kv, kv->arr_n - 1) == 0);
    }
    if (trial % 8 == 0) gguf_print(f, devnull);
    fprintf(devnull, "%llu", (unsigned long long)sum);
    gguf_close(f);
}

/* A value for a corrupted length/count/dim/offset field. */
static uint64_t bad_number(uint64_t orig, size_t size) {
    switch (rnd_below(10)) {
    case 0: return UINT64_MAX;
    case 1: return 1ull << 63;
    case 2: return (uint64_t)size;
    case 3: return (uint64_t)size - 1 - rnd_below(64);
    case 4: return orig + 1 + rnd_below(8);
    case 5: return orig ? orig - 1 - rnd_below(orig < 8 ? orig : 8) : 1;
    case 6: return rnd();
    case 7: return rnd() >> (rnd_below(63) + 1);
    case 8: return 0;
    default: return orig ^ (1ull << rnd_below(64));
    }
}

int main(void) {
    const char *path = getenv("KVBENCH_MODEL_FILE");
    if (!path || access(path, R_OK)) {
        printf("gguf_mutate: skipped (KVBENCH_MODEL_FILE unset or unreadable; run tests/run.sh "
               "after `make model`)\n");
        return 0;
    }
    const char *s_trials = getenv("KVBENCH_MUTATE_TRIALS"), *s_seed = getenv("KVBENCH_MUTATE_SEED");
    uint64_t trials = s_trials ? strtoull(s_trials, NULL, 10) : DEFAULT_TRIALS;
    uint64_t seed = s_seed ? strtoull(s_seed, NULL, 10) : 12345;
    rng ^= seed * 0x9e3779b97f4a7c15ull;
    if (!rng) rng = 1;

    FILE *fp = fopen(path, "rb");
    if (!fp) {
        CHECK_MSG(0, "cannot open %s", path);
        return check_summary("gguf_mutate");
    }
    fseek(fp, 0, SEEK_END);
    size_t size = (size_t)ftell(fp);
    fseek(fp, 0, SEEK_SET);
    uint8_t *m = malloc(size);
    CHECK(fread(m, 1, size, fp) == size);
    fclose(fp);
    FILE *devnull = fopen("/dev/null", "w");

    fields fs = {0};
    size_t infos_end = walk(m, size, &fs);
    CHECK_MSG(infos_end > 0 && fs.n > 100, "the model's structure did not walk (%zu fields)", fs.n);
    if (!infos_end) return check_summary("gguf_mutate");
    size_t header_end = infos_end + 64; /* and a little of the padding/data after */
    /* fields by kind, so the ~100k string lengths of the tokenizer do not
     * crowd out the few dozen counts, dims, types and offsets */
    size_t *by_kind[F_KINDS], n_kind[F_KINDS] = {0};
    for (int k = 0; k < F_KINDS; k++) by_kind[k] = malloc(fs.n * sizeof(size_t));
    for (size_t i = 0; i < fs.n; i++) by_kind[fs.v[i].kind][n_kind[fs.v[i].kind]++] = i;
    for (int k = 0; k < F_KINDS; k++) CHECK_MSG(n_kind[k] > 0, "no %s field found", kind_name[k]);

    /* the pristine file opens */
    check_open(m, size, 0, "pristine", devnull);

    double t0 = kb_now();
    char desc[160];
    uint8_t saved[64];
    for (uint64_t trial = 1; trial <= trials; trial++) {
        int kind = (int)rnd_below(100);
        if (kind < 12) { /* truncation: an exact-size copy, so ASan sees over-reads */
            size_t cut = rnd_below(4) ? rnd_below(header_end) : size - 1 - rnd_below(1 << 20);
            snprintf(desc, sizeof desc, "truncated to %zu bytes", cut);
            if (cut < (4u << 20)) {
                uint8_t *c = malloc(cut ? cut : 1);
                memcpy(c, m, cut);
                check_open(c, cut, trial, desc, devnull);
                free(c);
            } else {
                check_open(m, cut, trial, desc, devnull);
            }
            continue;
        }
        /* in-place corruption of up to 8 spots, restored afterwards */
        size_t spots[8];
        int widths[8], nspots = 0;
        if (kind < 40) { /* one structural field */
            int k = (int)rnd_below(F_KINDS);
            field fd = fs.v[by_kind[k][rnd_below(n_kind[k])]];
            uint64_t orig = rd(m + fd.pos, fd.size), v;
            if (fd.kind == F_VTYPE || fd.kind == F_GTYPE || fd.kind == F_NDIMS)
                v = rnd_below(3) ? rnd_below(fd.kind == F_NDIMS ? 7 : 40) : rnd() & 0xffffffffu;
            else v = bad_number(orig, size);
            if (fd.kind == F_OFFSET && rnd_below(2)) v = orig + 32 * (1 + rnd_below(4)) * (rnd_below(2) ? 1 : (uint64_t)-1);
            snprintf(desc, sizeof desc, "%s at byte %zu: %llu -> %llu", kind_name[fd.kind], fd.pos,
                     (unsigned long long)orig, (unsigned long long)v);
            spots[0] = fd.pos;
            widths[0] = fd.size;
            nspots = 1;
            memcpy(saved, m + fd.pos, (size_t)fd.size);
            wr(m + fd.pos, fd.size, v);
        } else {
            /* bit flips / byte overwrites, mostly near structural fields */
            nspots = 1 + (int)rnd_below(8);
            snprintf(desc, sizeof desc, "%d random byte changes, first near", nspots);
            for (int i = 0; i < nspots; i++) {
                int k = (int)rnd_below(F_KINDS);
                size_t at = kind < 70 ? fs.v[by_kind[k][rnd_below(n_kind[k])]].pos + rnd_below(8)
                                      : rnd_below(header_end);
                if (at >= size) at = size - 1;
                spots[i] = at;
                widths[i] = 1;
                saved[i] = m[at];
                if (rnd_below(2)) m[at] ^= (uint8_t)(1u << rnd_below(8));
                else m[at] = (uint8_t)rnd();
                if (i == 0) {
                    size_t l = strlen(desc);
                    snprintf(desc + l, sizeof desc - l, " byte %zu", at);
                }
            }
        }
        check_open(m, size, trial, desc, devnull);
        if (widths[0] > 1) {
            memcpy(m + spots[0], saved, (size_t)widths[0]);
        } else {
            for (int i = nspots - 1; i >= 0; i--) m[spots[i]] = saved[i]; /* reverse: repeats */
        }
    }
    /* the mmap path too: truncated copies written to a temp file */
    char tmp[] = "/tmp/kvbench-mutate-XXXXXX";
    int fd = mkstemp(tmp);
    CHECK(fd >= 0);
    for (int i = 0; fd >= 0 && i < 20; i++) {
        size_t cut = i == 0 ? 0 : rnd_below(header_end);
        CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, m, cut, 0) == (ssize_t)cut);
        gguf_file *f = NULL;
        kb_err err = {0};
        int rc = gguf_open(tmp, &f, &err);
        CHECK_MSG(rc == KB_EINPUT && !f && !strncmp(err.msg, tmp, strlen(tmp)),
                  "file cut at %zu: rc %d '%s'", cut, rc, err.msg);
        gguf_close(f);
    }
    if (fd >= 0) {
        close(fd);
        unlink(tmp);
    }
    double dt = kb_now() - t0;
    /* the buffer is pristine again */
    check_open(m, size, trials + 1, "restored", devnull);
    printf("gguf_mutate: %llu trials in %.1f s (seed %llu): %llu still valid, %llu rejected\n",
           (unsigned long long)trials, dt, (unsigned long long)seed,
           (unsigned long long)n_opened, (unsigned long long)n_rejected);
    fclose(devnull);
    for (int k = 0; k < F_KINDS; k++) free(by_kind[k]);
    free(fs.v);
    free(m);
    return check_summary("gguf_mutate");
}
