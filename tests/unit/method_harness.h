/* method_harness.h - scenarios and the step-by-step comparison of a method
 * (through its kb_method_ops) with the brute-force references of
 * methods_brute.h. Shared by the test_method*.c files. */
#ifndef KB_METHOD_HARNESS_H
#define KB_METHOD_HARNESS_H

#include "kernels/kvstream.h"
#include "methods/method.h"

enum { K_RANDOM, K_NEEDLE, K_HEAVY, K_SINK, K_TIES };

typedef struct scen {
    int Hq, Hkv, D, L, N, Wq, kind;
    kb_dtype dt;
    float *k, *v;       /* [L][Hkv][D] prompt keys (post-RoPE) and values */
    float *qwin;        /* [Wq][Hq][D] the last Wq prompt queries */
    int32_t *qpos;      /* [Wq] their positions L-Wq .. L-1 */
    float *q, *kn, *vn; /* [N][Hq][D], [N][Hkv][D], [N][Hkv][D] decode steps at L + i */
    int needle;         /* the needle's position (K_NEEDLE), else -1 */
    int N_new, S;       /* what the method context says */
} scen;

void scen_make(scen *s, int Hq, int Hkv, int D, int L, int N, int kind, unsigned long long seed);
void scen_free(scen *s);
/* Builds the prefill view of s (streams in s->dt); free with view_free. */
kb_prefill_view scen_view(const scen *s);
/* The same with every position moved by base (a later turn's tokens). */
kb_prefill_view scen_view_at(const scen *s, int base);
void view_free(kb_prefill_view *v);
kb_method_ctx scen_ctx(const scen *s);

typedef struct mh_result {
    int steps;       /* decode steps compared */
    int selections;  /* selection rows compared (including stage-1 rows) */
    int near_ties;   /* rows accepted as near ties (float rounding at the boundary) */
    int mismatches;  /* real selection mismatches */
    double max_err;  /* max |out - ref| / (1 + |ref|) over outputs */
    int needle_missed; /* steps where a selecting method did not attend the needle */
} mh_result;

/* Runs the method described by `json` on s and compares every stage-1 kept
 * set, every step's selected set and every output with the brute force.
 * Returns 0 when everything matched (outputs within out_tol, selections
 * exact or near ties), else the number of problems; details printed with
 * `label`. */
int mh_compare(const char *json, const scen *s, double out_tol, const char *label, mh_result *res);
/* The same, then a second turn: the first turn's decoded tokens rolled back
 * (the prompt's last token kept), turn's L tokens (keys, values, window
 * queries) added at positions s->L + 1 .. by the method's extend, and
 * turn's N decode steps compared over what the method then holds. */
int mh_compare_turns(const char *json, const scen *s, const scen *turn, double out_tol, const char *label,
                     mh_result *res);

#endif
