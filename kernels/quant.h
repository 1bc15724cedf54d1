/* quant.h - GGUF tensor element types: block layouts, dequantisation and
 * quantised dot products / matrix-vector products.
 *
 * A table indexed by ggml type id gives the block size and bytes per block.
 * Every fast kernel has a plain reference version; tests compare them.
 * Weight matrices follow GGUF: W has `rows` rows of `cols` elements, row r at
 * (char*)W + r*row_bytes; y = W x means y[r] = dot(row r, x). */
#ifndef KB_QUANT_H
#define KB_QUANT_H

#include "kernels/kb_base.h"

enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q8_0 = 8, GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13,
    GGML_Q6_K = 14, GGML_Q8_K = 15, GGML_BF16 = 30,
};

typedef struct kb_qtype {
    const char *name; /* "Q4_1" */
    int blck;         /* elements per block */
    int bytes;        /* bytes per block */
    int supported;    /* 1 if we can dequantise / multiply it */
} kb_qtype;

/* Info for a ggml type id, or NULL for an id we do not know at all.
 * (Known but unsupported types, e.g. Q2_K, have supported = 0.) */
const kb_qtype *kb_qtype_info(uint32_t type);
/* Bytes of a row of n elements; 0 if n is not a multiple of the block size. */
size_t kb_row_bytes(uint32_t type, int64_t n);

/* Reference: dequantise n elements (a multiple of the block size) of a
 * supported type, written from the block formulas of spec engine.md §5.
 * src needs no alignment. An unsupported type (a caller bug: the loader
 * refuses them) fills dst with NaN. */
void kb_dequant_ref(uint32_t type, const void *src, float *dst, int64_t n);
/* Fast dequantisation (same results as the reference, bit for bit; the one
 * exception is F16 NaN payloads, which F16C may quieten). */
void kb_dequant(uint32_t type, const void *src, float *dst, int64_t n);

/* Reference y = W x: dequantise each row to f32, dot in f32 (double accum).
 * Single-threaded, slow, exact definition. */
void kb_matvec_ref(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                   const float *x, float *y);
/* Fast y = W x (SIMD + OpenMP over contiguous row ranges; x and y must not
 * overlap; cols a multiple of the block size). Used for single-token decode.
 * Computes kb_matvec_exact or kb_matvec_q8 according to kb_matvec_mode()
 * (default: exact). */
void kb_matvec(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
               const float *x, float *y);

/* Exact activations (the default): x stays f32; each weight block is decoded
 * to f32 in registers and multiplied with f32 x (the 32-element types as
 * d_b * sum_j q_j x_j + m_b * sum_j x_j, q_j the block's integers with the
 * Q4_0/Q5_0 offset included, m_b = 0 unless Q4_1/Q5_1, and the per-block sums
 * of x computed once per call; the K-quants per sub-block the same way;
 * F16/BF16/F32 as plain f32 dots). Every difference from kb_matvec_ref is f32 rounding:
 *     |y_r - yref_r| <= (cols/32 + 16) * 2^-24 * sum_j |x_j| * t_rj
 * where t_rj is the sum of the magnitudes of the terms of element j's
 * formula (|w_rj| for Q4_0/Q5_0/Q8_0/Q6_K/floats, |d q| + |m| for Q4_1/Q5_1,
 * |d sc q| + |dmin mn| for Q4_K); for real weights t is a few |w|, so the
 * error is ~1e-7..1e-6 of sum_j |w_rj x_j| (measured on SmolLM2's matrices:
 * see docs/GGUF.md), the same order as the batched (dequantise + sgemm) path.
 * tests/unit/test_quant.c checks the bound. */
void kb_matvec_exact(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                     const float *x, float *y);

/* n mat-vecs that share x and cols, y_i = W_i x, as one job of the worker
 * pool (one preparation of x, one dispatch, one wait; decode's Q/K/V and
 * gate/up projections). Each y_i is bit for bit what kb_matvec(type_i, W_i,
 * row_bytes_i, rows_i, cols, x, y_i) computes, in either mode (q8 runs them
 * one after the other). The y_i must not overlap x or each other. */
typedef struct kb_mv {
    uint32_t type;
    const void *W;
    size_t row_bytes;
    int rows;
    float *y;
    int layout; /* KB_LAYOUT_ROWS (0, GGUF's) or KB_LAYOUT_R16 (see below) */
} kb_mv;
void kb_matvec_multi(const kb_mv *mv, int n, int cols, const float *x);

/* llama.cpp-like numerics, for comparing speed with llama.cpp (not exact).
 * For Q4_0, Q4_1, Q5_0, Q5_1 and Q8_0, x is first quantised like
 * llama.cpp's Q8_0/Q8_1 activations: per block b of 32, dx_b = max|x_b|/127
 * and q_j = round(x_j/dx_b), so |x_j - dx_b*q_j| <= dx_b/2 and
 *     |y_r - yref_r| <= sum_b (dx_b/2) * sum_{j in b} |w_rj|  + f32 rounding,
 * which for Gaussian-like rows is ~1e-3 of |y_r| scale (about
 * 0.5/127 * (mean|x| / max|x|) relative to sum_j |w_rj x_j|); the f32
 * rounding term is ~(cols/8 + 32) * 2^-24 * sum_j |w_rj x_j|. Q4_K and Q6_K
 * quantise x the same way but per block of 256 (like llama.cpp's Q8_K), so
 * the same bound holds with b running over blocks of 256 (a little coarser).
 * F32, F16 and BF16 use the exact weights and only carry the f32 rounding
 * term. Over SmolLM2's 30 layers this error moves decode logits by up to
 * ~1.5 (logit std ~6) and can change greedy answers. tests/unit/test_quant.c
 * checks these bounds. */
void kb_matvec_q8(uint32_t type, const void *W, size_t row_bytes, int rows, int cols,
                  const float *x, float *y);

/* Which one kb_matvec computes. Process-wide. The first kb_matvec_mode() (or
 * kb_matvec) call reads the environment variable KVBENCH_MATVEC once:
 * "x24" -> KB_MATVEC_X24, "exact" -> KB_MATVEC_EXACT, "q8" -> KB_MATVEC_Q8,
 * unset/empty -> kb_matvec_default_mode(); any other value ("x24" too in a
 * build without the R16 kernels) prints one warning on stderr and keeps the
 * default. The kvbench binary refuses such a value before any command runs
 * (kb_matvec_check_env, harness/main.c).
 * KB_MATVEC_X24 differs from exact only in what the model loader does: it
 * repacks the Q4_1 and Q8_0 matrices kb_r16_regroups names (Q4_1 only on
 * AVX2 builds) to KB_LAYOUT_R16 (kb_r16_repack), whose
 * kernels take x as 24-bit block fixed point (bound at KB_LAYOUT_R16).
 * Every other matrix is computed as in exact mode. A matrix's layout, not
 * the mode, picks its kernel.
 * kb_matvec_set_mode overrides it; it returns KB_EINPUT (mode unchanged) for
 * an unknown mode. Set the mode before starting work, not while other
 * threads run mat-vecs. */
enum { KB_MATVEC_EXACT = 0, KB_MATVEC_Q8 = 1, KB_MATVEC_X24 = 2 };
int kb_matvec_set_mode(int mode);
int kb_matvec_mode(void);
/* 0 when KVBENCH_MATVEC is unset, empty or a value kb_matvec_mode accepts
 * here, else KB_EINPUT with a message naming it and the accepted values. */
int kb_matvec_check_env(kb_err *err);
/* "exact", "q8" or "x24" (for run records); "?" for an unknown mode. */
const char *kb_matvec_mode_name(int mode);
/* KB_MATVEC_X24 where this build has the R16 kernels (kb_r16_available),
 * else KB_MATVEC_EXACT. */
int kb_matvec_default_mode(void);

/* ---------------------------------------- Q4_1 and Q8_0 regrouped by 16 rows
 * KB_LAYOUT_R16: a Q4_1 or Q8_0 matrix whose rows (a multiple of 16) are
 * regrouped in place, 16 rows at a time; a group takes the same
 * 16 * row_bytes bytes at the same offset as in GGUF's layout, so row r's
 * group starts at (r / 16) * 16 * row_bytes. Within a group, block b (32
 * columns) of the 16 rows is 16 * (block bytes) bytes at that multiple of b:
 *   Q4_1 (320 bytes): the 16 d (f16), the 16 m (f16), then 4 x 64 bytes of
 *     4-bit values: byte 64 t + 4 r + k holds q[r][8t + k] in its low nibble
 *     and q[r][8t + 4 + k] in its high one;
 *   Q8_0 (544 bytes): the 16 d (f16), then 8 x 64 bytes: byte 64 t + 4 r + k
 *     is q[r][4t + k] + 128 (the sign bit flipped: an unsigned byte).
 * The same numbers as the GGUF blocks, ordered so that one AVX-512 VNNI
 * operation multiplies 4 columns of 16 rows (AVX2: 4 columns of 8 rows per
 * vpmaddubsw pair, the same sums).
 *
 * Its mat-vec (kb_matvec_multi, any mode) takes x per block b of 32 as
 * integers X_j = round(x_j 2^e_b), with e_b such that max_j |x_j| 2^e_b is in
 * [2^21, 2^22) (|X_j| < 2^22, three signed bytes), and computes
 * d_rb 2^-e_b sum_j q_rj X_j in integers (Q8_0: one f32 rounding of a
 * partial sum on the way), then + m_rb xsum_b in f32 (Q4_1). Against
 * kb_matvec_ref on the GGUF layout:
 *     |y_r - yref_r| <= (cols/32 + 16) * 2^-24 * sum_j |x_j| t_rj
 *                       + sum_b max(2^-22 M_b, 2^-127) * sum_{j in b} |d_rb q_rj|
 * with t as for kb_matvec_exact and M_b = max_{j in b} |x_j| (the second
 * term is the rounding of x to 24 bits: ~2^-22 of the block's largest
 * element per element, against the q8 mode's 2^-8). A block of x holding
 * Inf or NaN gives NaN in every row. */
enum { KB_LAYOUT_ROWS = 0, KB_LAYOUT_R16 = 1 };
/* 1 if this build has the R16 mat-vec kernels (AVX-512 BW + VNNI + GFNI, or
 * AVX2 + FMA + F16C). */
int kb_r16_available(void);
/* 1 for the types with an R16 layout (Q4_1, Q8_0). */
int kb_r16_type(uint32_t type);
/* 1 for the types the x24 mode's loader regroups in this build: those whose
 * R16 kernel is faster than the exact one here (AVX-512 VNNI: Q4_1 and Q8_0;
 * AVX2 without VNNI: Q4_1 only, Q8_0's exact kernel being the faster there;
 * none without the kernels). */
int kb_r16_regroups(uint32_t type);
/* Regroups a GGUF-layout matrix of such a type in place (rows % 16 == 0).
 * Plain C; callable whether or not the kernels exist. */
void kb_r16_repack(uint32_t type, void *W, size_t row_bytes, int rows);
/* Dequantises rows [r0, r0 + n) of an R16 matrix into dst [n][cols], the
 * values of kb_dequant_ref on the GGUF rows bit for bit (prefill's panels,
 * an embedding row): plain C, and the fast version (AVX-512 where
 * available, for r0 and n multiples of 16). */
void kb_r16_dequant_ref(uint32_t type, const void *W, size_t row_bytes, int r0, int n, float *dst);
void kb_r16_dequant(uint32_t type, const void *W, size_t row_bytes, int r0, int n, float *dst);

#endif
