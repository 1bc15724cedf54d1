/* fuzz_rows.c - libFuzzer target: the checks on rows read back (sweep
 * --resume and merge: samples_check, samples_check_cells) and the tables
 * built from them (summary_write).
 *
 * Input: byte 0 picks the mode (bit 0: the plan's turn counts known, as in
 * --resume, else not, as in merge; bit 1: every cell required, as in merge);
 * then records of 4 bytes, one row each: seq (0..7, or 8..9: not in the plan),
 * cell (0..3 of the config below, 4: a label the config lacks, 5: a cell's
 * label with another method), turn (0..3, or 4: the text "x"), score (0..255,
 * > 200: outside [0, 1]). The rows are written as a samples.csv with this
 * version's columns (table_write_csv), read back (table_read_csv) and
 * checked. Properties:
 *   1. a refusal has KB_EINPUT and a message naming the file;
 *   2. the verdict equals an oracle written here from DESIGN.md's rules:
 *      seq in the plan, score in [0, 1], the row's label and budget a cell
 *      whose method is the row's, turn an integer (below the sample's turn
 *      count when known), no (seq, cell, turn) twice, each (seq, cell)'s
 *      rows the turns 0..k-1 with k the sample's turn count (known) or the
 *      most any cell of that sample has, and with `complete` every cell of
 *      every sample;
 *   3. an accepted table gives a summary.csv that reads back with its
 *      columns. */
#include "tests/fuzz/fuzz_common.h"
#include "harness/config.h"
#include "harness/driver.h"
#include "harness/json.h"
#include "harness/table.h"

#define ROWS_FZ_SAMPLES 8
#define ROWS_FZ_CELLS 4
#define ROWS_FZ_MAX 64

static kb_sweep_config rows_fz_cfg;
static int rows_fz_ready;

/* cells: full (no budget), rocketkv 64 and 128, snapkv 64 */
static void rows_fz_setup(void) {
    if (rows_fz_ready) return;
    static const char *const text =
        "{\"tasks\": [{\"task\": \"needle\"}], \"methods\": [\"full\", {\"method\": \"rocketkv\", "
        "\"budgets\": [64, 128]}, {\"method\": \"snapkv\", \"budget\": 64}]}";
    cJSON *j = cJSON_Parse(text);
    kb_err err = {0};
    if (!j || sweep_config_from_json(j, "fuzz config", &rows_fz_cfg, &err) ||
        rows_fz_cfg.n_cells != ROWS_FZ_CELLS) {
        fprintf(stderr, "fuzz_rows: config: %s\n", err.msg);
        abort();
    }
    cJSON_Delete(j);
    rows_fz_ready = 1;
}

typedef struct rows_fz_row {
    int seq, cell, turn, score;
} rows_fz_row;

/* The oracle's verdict: 1 accepted, 0 refused. */
static int rows_fz_oracle(const rows_fz_row *r, int n, const int *turns, int complete) {
    for (int i = 0; i < n; i++)
        if (r[i].seq >= ROWS_FZ_SAMPLES || r[i].score > 200 || r[i].cell >= ROWS_FZ_CELLS || r[i].turn > 3 ||
            (turns && r[i].turn >= turns[r[i].seq]))
            return 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < i; j++)
            if (r[i].seq == r[j].seq && r[i].cell == r[j].cell && r[i].turn == r[j].turn) return 0;
    for (int s = 0; s < ROWS_FZ_SAMPLES; s++) {
        int have[ROWS_FZ_CELLS][4] = {{0}}, kmax = 0, any[ROWS_FZ_CELLS] = {0};
        for (int i = 0; i < n; i++)
            if (r[i].seq == s) {
                have[r[i].cell][r[i].turn] = 1;
                any[r[i].cell] = 1;
                kmax = r[i].turn + 1 > kmax ? r[i].turn + 1 : kmax;
            }
        int k = turns ? turns[s] : kmax;
        for (int c = 0; c < ROWS_FZ_CELLS; c++) {
            if (!any[c]) {
                if (complete) return 0;
                continue;
            }
            for (int t = 0; t < 4; t++)
                if (have[c][t] != (t < k)) return 0;
        }
    }
    return 1;
}

int fuzz_rows_one(const uint8_t *d, size_t n) {
    if (n < 1) return 0;
    rows_fz_setup();
    int known = d[0] & 1, complete = (d[0] >> 1) & 1;
    static const int turns[ROWS_FZ_SAMPLES] = {1, 1, 2, 1, 3, 1, 4, 2};
    rows_fz_row r[ROWS_FZ_MAX];
    int nr = 0;
    for (size_t i = 1; i + 4 <= n && nr < ROWS_FZ_MAX; i += 4)
        r[nr++] = (rows_fz_row){d[i] % 10, d[i + 1] % 6, d[i + 2] % 5, d[i + 3]};
    kb_table t;
    table_init(&t, kb_samples_cols, kb_samples_ncols);
    const char *v[64];
    char b[4][32];
    for (int i = 0; i < nr; i++) {
        for (int c = 0; c < kb_samples_ncols; c++) v[c] = "";
        int cell = r[i].cell < ROWS_FZ_CELLS ? r[i].cell : 1;
        const kb_cell *k = &rows_fz_cfg.cells[cell];
        snprintf(b[0], sizeof b[0], "%d", r[i].seq);
        snprintf(b[1], sizeof b[1], "%d", k->p.budget);
        snprintf(b[2], sizeof b[2], "%d", r[i].turn);
        snprintf(b[3], sizeof b[3], "%g", r[i].score / 200.0);
        v[table_col(&t, "seq")] = b[0];
        v[table_col(&t, "label")] = r[i].cell == 4 ? "quest" : k->p.label;
        v[table_col(&t, "method")] = r[i].cell == 5 ? "quest" : k->p.ops->name;
        v[table_col(&t, "budget")] = k->p.budget > 0 ? b[1] : "";
        v[table_col(&t, "turn")] = r[i].turn == 4 ? "x" : b[2];
        v[table_col(&t, "score")] = b[3];
        v[table_col(&t, "task")] = "needle";
        table_add(&t, v);
    }
    char path[300], sum[300];
    fuzz_path(path, sizeof path, "samples.csv");
    fuzz_path(sum, sizeof sum, "summary.csv");
    kb_err err = {0};
    int rc = table_write_csv(&t, path, &err);
    table_free(&t);
    FUZZ_ASSERT(rc == 0, "write: %s", err.msg);
    kb_table back;
    rc = table_read_csv(path, kb_samples_cols, kb_samples_ncols, &back, &err);
    FUZZ_ASSERT(rc == 0, "read back: %s", err.msg);
    if (rc) return 0;
    rc = samples_check(&back, path, ROWS_FZ_SAMPLES, 0, 1, &err);
    if (!rc)
        rc = samples_check_cells(&back, path, &rows_fz_cfg, known ? turns : NULL, ROWS_FZ_SAMPLES, 0, 1,
                                 complete, &err);
    table_free(&back);
    if (rc) {
        FUZZ_ASSERT_ERR(rc, err);
        FUZZ_ASSERT(rc == KB_EINPUT && strstr(err.msg, path), "message without the file: %s", err.msg);
    }
    int want = rows_fz_oracle(r, nr, known ? turns : NULL, complete);
    FUZZ_ASSERT((rc == 0) == want, "verdict %s, oracle %s (%d rows, known %d, complete %d): %s",
                rc ? "refused" : "accepted", want ? "accepts" : "refuses", nr, known, complete,
                rc ? err.msg : "");
    if (!rc && nr) {
        rc = summary_write(path, sum, "full", &err);
        FUZZ_ASSERT(rc == 0, "summary: %s", err.msg);
        kb_table s;
        rc = table_read_csv(sum, kb_summary_cols, kb_summary_ncols, &s, &err);
        FUZZ_ASSERT(rc == 0, "summary read back: %s", err.msg);
        if (!rc) table_free(&s);
    }
    return 0;
}

#ifndef FUZZ_REPLAY
int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return fuzz_rows_one(d, n); }
#endif
