/*
 * kernelrt.h - the C kernel API of kernelrt.
 *
 * Rules for every kernel in csrc/ (checked in review):
 *   - C11, no malloc, no threads, no OpenMP, no global mutable state, no libm calls
 *     (exp/silu use krt_expf from krt_common.h) so that c2goasm can translate them;
 *   - every argument is a pointer or int64_t (c2goasm passes 64-bit integer args only),
 *     at most 14 arguments, float parameters (eps) are passed through a pointer;
 *   - every kernel works on an explicit slice (rows r0..r1, blocks b0..b1, tokens t0..t1,
 *     heads h0..h1, elements i0..i1) and writes only that slice's outputs;
 *   - one scalar variant (_ref) and two SIMD variants (_avx2: AVX2+FMA+F16C,
 *     _avx512: AVX-512 F/BW/VL, VNNI where the function says so), each compiled with
 *     per-function target attributes, never -march=native.
 * Callers (the Go side) validate every argument before calling; kernels do not check.
 */
#ifndef KERNELRT_H
#define KERNELRT_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KRT_QK 32 /* weights per quantized block */

/* Byte-identical to ggml's block_q8_0: fp16 scale d, then 32 int8. 34 bytes. */
typedef struct {
    uint16_t d;
    int8_t qs[KRT_QK];
} krt_block_q8_0;

/* Byte-identical to ggml's block_q5_0: fp16 d, 32 high bits, 16 bytes of nibbles. 22 bytes. */
typedef struct {
    uint16_t d;
    uint8_t qh[4];
    uint8_t qs[KRT_QK / 2];
} krt_block_q5_0;

/* Byte-identical to ggml's block_q4_0: fp16 d, 16 bytes of nibbles (low = elements 0..15,
 * high = 16..31); value = d * (nibble - 8). 18 bytes. */
typedef struct {
    uint16_t d;
    uint8_t qs[KRT_QK / 2];
} krt_block_q4_0;

/* Byte-identical to ggml's block_q4_1: fp16 d, fp16 m, nibbles as Q4_0; value = d * q + m. 20 bytes. */
typedef struct {
    uint16_t d;
    uint16_t m;
    uint8_t qs[KRT_QK / 2];
} krt_block_q4_1;

/* Byte-identical to ggml's block_q5_1: fp16 d, fp16 m, 32 high bits, nibbles as Q5_0;
 * value = d * q + m, q in 0..31. 24 bytes. */
typedef struct {
    uint16_t d;
    uint16_t m;
    uint8_t qh[4];
    uint8_t qs[KRT_QK / 2];
} krt_block_q5_1;

#define KRT_QK_K 256 /* weights per K-quant super-block */

/* Byte-identical to ggml's block_q4_K: 8 sub-blocks of 32; 6-bit scale sc_j and min m_j packed in
 * scales[12] (j < 4: sc = scales[j] & 63, m = scales[j+4] & 63; j >= 4: sc = (scales[j+4] & 15) |
 * (scales[j-4] >> 6) << 4, m = (scales[j+4] >> 4) | (scales[j] >> 6) << 4); qs[32i..32i+32) holds
 * sub-block 2i in its low nibbles and 2i+1 in its high nibbles; value = d*sc*q - dmin*m. 144 bytes. */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qs[KRT_QK_K / 2];
} krt_block_q4_K;

/* Byte-identical to ggml's block_q5_K: as Q4_K plus the 5th bits: bit 2i (2i+1) of qh[l] is the
 * 5th bit of element l of sub-block 2i (2i+1); q in 0..31. 176 bytes. */
typedef struct {
    uint16_t d;
    uint16_t dmin;
    uint8_t scales[12];
    uint8_t qh[KRT_QK_K / 8];
    uint8_t qs[KRT_QK_K / 2];
} krt_block_q5_K;

/* Byte-identical to ggml's block_q6_K: 16 sub-blocks of 16, value = d * scales[i] * (q - 32), q 6-bit.
 * Half h (elements 128h..128h+128) uses ql[64h..64h+64) and qh[32h..32h+32): for l < 32, element
 * 128h + 32k + l has low 4 bits from ql[64h + l + 32(k & 1)] (low nibble for k < 2, high for k >= 2)
 * and high 2 bits from qh[32h + l] >> 2k. 210 bytes. */
typedef struct {
    uint8_t ql[KRT_QK_K / 2];
    uint8_t qh[KRT_QK_K / 4];
    int8_t scales[KRT_QK_K / 16];
    uint16_t d;
} krt_block_q6_K;

/* Byte-identical to ggml's block_q8_K, the activation side of the K-quant dot products: fp32 d,
 * 256 int8 quants in [-127, 127], bsums[i] = sum of qs[16i..16i+16). value = d * qs. 292 bytes. */
typedef struct {
    float d;
    int8_t qs[KRT_QK_K];
    int16_t bsums[KRT_QK_K / 16];
} krt_block_q8_K;

/* Byte-identical to ggml's block_iq4_nl: fp16 d, 16 bytes of 4-bit indices (low nibble of qs[j] =
 * element j, high nibble = element j + 16) into the int8 table kvalues_iq4nl = {-127, -104, -83,
 * -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}; value = d * kvalues_iq4nl[q]. 18 bytes. */
typedef struct {
    uint16_t d;
    uint8_t qs[KRT_QK / 2];
} krt_block_iq4_nl;

/* Byte-identical to ggml's block_q2_K: 16 sub-blocks of 16 weights; scales[i] holds sub-block i's
 * 4-bit scale (low nibble) and 4-bit min (high nibble); element e's 2-bit quant is
 * (qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3; value = (d * sc) * q - dmin * m.
 * 84 bytes. */
typedef struct {
    uint8_t scales[KRT_QK_K / 16];
    uint8_t qs[KRT_QK_K / 4];
    uint16_t d;
    uint16_t dmin;
} krt_block_q2_K;

/* Byte-identical to ggml's block_iq4_xs: 8 sub-blocks of 32 weights; sub-block j's 6-bit scale
 * ls = ((scales_l[j / 2] >> 4 (j % 2)) & 15) | ((scales_h >> 2j) & 3) << 4, its nibbles
 * qs[16j..16j+16) in IQ4_NL's layout; value = (d * (ls - 32)) * kvalues_iq4nl[nibble]. 136 bytes. */
typedef struct {
    uint16_t d;
    uint16_t scales_h;
    uint8_t scales_l[KRT_QK_K / 64];
    uint8_t qs[KRT_QK_K / 2];
} krt_block_iq4_xs;

/* Byte-identical to ggml's block_q3_K: 16 sub-blocks of 16 weights; sub-block s's 6-bit scale
 * sc = (s < 8 ? scales[s] & 15 : scales[s - 8] >> 4) | ((scales[8 + s % 4] >> 2 (s / 4)) & 3) << 4;
 * element e (h = e / 128, j = (e % 128) / 32, l = e % 32) has the quant
 * q = ((qs[32h + l] >> 2j) & 3) - (hmask[l] bit 4h + j ? 0 : 4), in -4..3;
 * value = (d * (sc - 32)) * q. 110 bytes. */
typedef struct {
    uint8_t hmask[KRT_QK_K / 8];
    uint8_t qs[KRT_QK_K / 4];
    uint8_t scales[12];
    uint16_t d;
} krt_block_q3_K;

_Static_assert(sizeof(krt_block_q2_K) == 84, "block_q2_K must be 84 bytes");
_Static_assert(sizeof(krt_block_q3_K) == 110, "block_q3_K must be 110 bytes");
_Static_assert(sizeof(krt_block_iq4_xs) == 136, "block_iq4_xs must be 136 bytes");
_Static_assert(sizeof(krt_block_iq4_nl) == 18, "block_iq4_nl must be 18 bytes");
_Static_assert(sizeof(krt_block_q8_0) == 34, "block_q8_0 must be 34 bytes");
_Static_assert(sizeof(krt_block_q5_0) == 22, "block_q5_0 must be 22 bytes");
_Static_assert(sizeof(krt_block_q4_0) == 18, "block_q4_0 must be 18 bytes");
_Static_assert(sizeof(krt_block_q4_1) == 20, "block_q4_1 must be 20 bytes");
_Static_assert(sizeof(krt_block_q5_1) == 24, "block_q5_1 must be 24 bytes");
_Static_assert(sizeof(krt_block_q4_K) == 144, "block_q4_K must be 144 bytes");
_Static_assert(sizeof(krt_block_q5_K) == 176, "block_q5_K must be 176 bytes");
_Static_assert(sizeof(krt_block_q6_K) == 210, "block_q6_K must be 210 bytes");
_Static_assert(sizeof(krt_block_q8_K) == 292, "block_q8_K must be 292 bytes");

/* Declares f_ref, f_avx2 and f_avx512 with the same parameter list. */
#define KRT_DECLARE(name, params) \
    void name##_ref params;       \
    void name##_avx2 params;      \
    void name##_avx512 params;

/* ---- quantization (slice: blocks b0..b1; src/dst are base pointers) ---- */
/* dst[b] = Q8_0 of src[32b .. 32b+32) ; NaN/Inf behaviour: see csrc/quant.c banner. */
KRT_DECLARE(krt_quantize_q8_0, (krt_block_q8_0 *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_quantize_q5_0, (krt_block_q5_0 *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q8_0, (float *dst, const krt_block_q8_0 *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q5_0, (float *dst, const krt_block_q5_0 *src, int64_t b0, int64_t b1))

/* ---- Q4_0, Q4_1, Q5_1 and the K-quants (csrc/kquant.c; slices count blocks of 32, or super-blocks
 * of 256 for the _K types). Quantizers are ggml's reference algorithms, byte-identical to ggml on
 * finite input, NaN / Inf poisoning as Q8_0 (rules in krt_kquant.h); Q8_K quantizes the
 * activations of the K-quant GEMV / GEMM (bsums included). Dequantizers give ggml's floats. ---- */
KRT_DECLARE(krt_quantize_q4_0, (krt_block_q4_0 *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_quantize_q4_1, (krt_block_q4_1 *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_quantize_q5_1, (krt_block_q5_1 *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_quantize_q4_K, (krt_block_q4_K *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_quantize_q5_K, (krt_block_q5_K *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_quantize_q6_K, (krt_block_q6_K *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_quantize_q8_K, (krt_block_q8_K *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q4_0, (float *dst, const krt_block_q4_0 *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q4_1, (float *dst, const krt_block_q4_1 *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q5_1, (float *dst, const krt_block_q5_1 *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q4_K, (float *dst, const krt_block_q4_K *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q5_K, (float *dst, const krt_block_q5_K *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q6_K, (float *dst, const krt_block_q6_K *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q8_K, (float *dst, const krt_block_q8_K *src, int64_t b0, int64_t b1))

/* ---- GEMV (slice: rows r0..r1) ----
 * w is row-major, rows of cols/32 blocks; x holds cols/32 Q8_0 blocks.
 * y[r] = sum_b fp32(d_w)*fp32(d_x) * isum_b  (+ bias[r] when bias != NULL), for r in [r0,r1). */
KRT_DECLARE(krt_gemv_q8_0, (float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemv_q5_0, (float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
/* Fused: quantize all of x (cols floats) into the caller's private scratch (cols/32 Q8_0
 * blocks), then GEMV rows r0..r1, then bias. Each worker owns its scratch, so no barrier is
 * needed. (A parameter named `scratch` is always a worker's private buffer.) */
KRT_DECLARE(krt_gemv_q8_0_f32, (float *y, const krt_block_q8_0 *w, const float *x, krt_block_q8_0 *scratch,
                                const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemv_q5_0_f32, (float *y, const krt_block_q5_0 *w, const float *x, krt_block_q8_0 *scratch,
                                const float *bias, int64_t cols, int64_t r0, int64_t r1))
/* FP32 GEMV: y[r] = dot(w[r*cols..], x) for r in [r0,r1). */
KRT_DECLARE(krt_gemv_f32, (float *y, const float *w, const float *x, int64_t cols, int64_t r0, int64_t r1))

/* ---- GEMM for prefill (slice: rows r0..r1, all T tokens) ----
 * x holds T rows of cols/32 Q8_0 blocks; y is T x rows (y[t*rows + r]).
 * Tiled so each weight block is loaded once per tile of tokens. */
KRT_DECLARE(krt_gemm_q8_0, (float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q5_0, (float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))

/* ---- GEMV / GEMM of Q4_0, Q5_1 (activations: Q8_0 blocks) and Q4_K, Q5_K, Q6_K (activations: Q8_K
 * super-blocks; cols a multiple of 256), same slices and layout as above. The per-block arithmetic
 * (and the exact operation order of _ref and of every GEMM variant) is defined in csrc/krt_kdot.h. */
KRT_DECLARE(krt_gemv_q4_0, (float *y, const krt_block_q4_0 *w, const krt_block_q8_0 *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemv_q5_1, (float *y, const krt_block_q5_1 *w, const krt_block_q8_0 *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemv_q4_K, (float *y, const krt_block_q4_K *w, const krt_block_q8_K *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemv_q5_K, (float *y, const krt_block_q5_K *w, const krt_block_q8_K *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemv_q6_K, (float *y, const krt_block_q6_K *w, const krt_block_q8_K *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q4_0, (float *y, const krt_block_q4_0 *w, const krt_block_q8_0 *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q5_1, (float *y, const krt_block_q5_1 *w, const krt_block_q8_0 *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q4_K, (float *y, const krt_block_q4_K *w, const krt_block_q8_K *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q5_K, (float *y, const krt_block_q5_K *w, const krt_block_q8_K *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q6_K, (float *y, const krt_block_q6_K *w, const krt_block_q8_K *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))

/* ---- IQ4_NL (csrc/iquant.c; blocks of 32, activations Q8_0 as Q4_0): quantizer (ours, see
 * krt_iquant.h; NaN / Inf poisoning as Q4_0), ggml's dequantizer, GEMV and GEMM with the slices,
 * layouts and arithmetic order of Q4_0 (krt_kdot.h). ---- */
KRT_DECLARE(krt_quantize_iq4_nl, (krt_block_iq4_nl *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_iq4_nl, (float *dst, const krt_block_iq4_nl *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_gemv_iq4_nl, (float *y, const krt_block_iq4_nl *w, const krt_block_q8_0 *x,
                              const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_iq4_nl, (float *y, const krt_block_iq4_nl *w, const krt_block_q8_0 *x, const float *bias,
                              int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))

/* ---- Q2_K (csrc/q2k.c; super-blocks of 256, activations Q8_K as Q4_K): quantizer (ours, see
 * krt_q2k.h; NaN / Inf poisoning as Q4_K), ggml's dequantizer, GEMV and GEMM (the result defined
 * by krt_q2k.h's krt_kd_q2_K; the GEMM bit-identical to it in every variant). ---- */
KRT_DECLARE(krt_quantize_q2_K, (krt_block_q2_K *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q2_K, (float *dst, const krt_block_q2_K *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_gemv_q2_K, (float *y, const krt_block_q2_K *w, const krt_block_q8_K *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q2_K, (float *y, const krt_block_q2_K *w, const krt_block_q8_K *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))

/* ---- IQ4_XS (csrc/iq4xs.c; super-blocks of 256, activations Q8_K): quantizer (ours, see
 * krt_iq4xs.h; NaN / Inf poisoning as Q2_K), ggml's dequantizer, GEMV and GEMM (the result defined
 * by krt_iq4xs.h's krt_kd_iq4_xs; the GEMM bit-identical to it in every variant). ---- */
KRT_DECLARE(krt_quantize_iq4_xs, (krt_block_iq4_xs *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_iq4_xs, (float *dst, const krt_block_iq4_xs *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_gemv_iq4_xs, (float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x,
                              const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_iq4_xs, (float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x, const float *bias,
                              int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))

/* ---- Q3_K (csrc/q3k.c; super-blocks of 256, activations Q8_K): quantizer (ours, see
 * krt_q3k.h; NaN / Inf poisoning as Q2_K), ggml's dequantizer, GEMV and GEMM (the result defined
 * by krt_q3k.h's krt_kd_q3_K; the GEMM bit-identical to it in every variant). ---- */
KRT_DECLARE(krt_quantize_q3_K, (krt_block_q3_K *dst, const float *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_dequantize_q3_K, (float *dst, const krt_block_q3_K *src, int64_t b0, int64_t b1))
KRT_DECLARE(krt_gemv_q3_K, (float *y, const krt_block_q3_K *w, const krt_block_q8_K *x,
                            const float *bias, int64_t cols, int64_t r0, int64_t r1))
KRT_DECLARE(krt_gemm_q3_K, (float *y, const krt_block_q3_K *w, const krt_block_q8_K *x, const float *bias,
                            int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1))

/* ---- normalisation and softmax ---- */
/* out[t] = x[t] / sqrt(mean(x[t]^2) + *eps) * weight, rows of dim floats, tokens t0..t1. */
KRT_DECLARE(krt_rmsnorm, (float *out, const float *x, const float *weight, const float *eps,
                          int64_t dim, int64_t t0, int64_t t1))
/* In place, rows r0..r1 of cols floats; max-subtracted. valid == NULL: whole row; else
 * row r uses its first valid[r] entries (1..cols) and writes 0 to the rest. */
KRT_DECLARE(krt_softmax, (float *x, const int32_t *valid, int64_t cols, int64_t r0, int64_t r1))

/* ---- elementwise (slice: elements i0..i1) ---- */
/* out[i] = silu(gate[i]) * up[i], silu(g) = g / (1 + exp(-g)). */
KRT_DECLARE(krt_swiglu, (float *out, const float *gate, const float *up, int64_t i0, int64_t i1))
/* out[i] = gelu(gate[i]) * up[i], gelu in ggml's tanh form (Gemma's GeGLU; csrc/geglu.c). */
KRT_DECLARE(krt_geglu, (float *out, const float *gate, const float *up, int64_t i0, int64_t i1))
/* out[i] = a[i] + b[i] (residual add; out may alias a or b). */
KRT_DECLARE(krt_add, (float *out, const float *a, const float *b, int64_t i0, int64_t i1))

/* ---- RoPE, NeoX style (element i rotates with i + head_dim/2) ----
 * x: token t's heads at x + t*stride, n_heads heads of head_dim floats; position = pos0 + t.
 * cos_tab/sin_tab: [pos][head_dim/2], precomputed once (theta^(-2i/head_dim)). Tokens t0..t1. */
KRT_DECLARE(krt_rope_neox, (float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                            int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1))
/* ---- RoPE, normal mode (llama: element 2i rotates with 2i+1; csrc/rope_norm.c), same tables ---- */
KRT_DECLARE(krt_rope_norm, (float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                            int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1))

/* ---- KV cache (F32), layout [kv_head][max_ctx][head_dim] ----
 * Appends token t (src + t*src_stride, n_kv_heads*head_dim floats) at position pos0 + t. */
KRT_DECLARE(krt_kv_append, (float *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                            int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1))

/* ---- attention (grouped-query, causal), slice: query heads h0..h1 ----
 * q: token t's query heads at q + t*q_stride; out: token t at out + t*n_heads*head_dim.
 * Token t (position pos0 + t) attends cache positions 0..pos0+t inclusive; scale 1/sqrt(head_dim);
 * query head h reads KV head h / (n_heads / n_kv_heads). scratch: max_ctx floats (private). */
KRT_DECLARE(krt_attention, (float *out, const float *q, const float *kcache, const float *vcache,
                            float *scratch, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                            int64_t max_ctx, int64_t q_stride, int64_t pos0, int64_t T, int64_t h0, int64_t h1))

/* ---- embedding: out[t] = dequantized row ids[t] of a Q8_0 table (dim floats), tokens t0..t1 ---- */
KRT_DECLARE(krt_embed_q8_0, (float *out, const krt_block_q8_0 *table, const int32_t *ids, int64_t dim,
                             int64_t t0, int64_t t1))

/* A plain streaming read (*out = sum of src[i0..i1)): the bandwidth baseline for benchmarks. */
KRT_DECLARE(krt_stream_read, (float *out, const float *src, int64_t i0, int64_t i1))

/* ==== KV caches in F16 / Q8_0 and attention that reads them in their stored type ====
 * (csrc/attention.c holds the design, the unit/scratch rules and the NaN/Inf semantics; the
 * appends live in csrc/rope.c next to krt_kv_append.) Layouts, one per KV head g:
 *   F32  float          [n_kv_heads][max_ctx][head_dim]
 *   F16  uint16_t (IEEE half, round to nearest even)  [n_kv_heads][max_ctx][head_dim]
 *   Q8_0 krt_block_q8_0 [n_kv_heads][max_ctx][head_dim/32]   (head_dim % 32 == 0)
 * The attention kernels need head_dim % 16 == 0 and head_dim <= 256 (Q8_0: % 32). */
#define KRT_ATTN_KB 64     /* keys per cache block (the streaming-softmax step) */
#define KRT_ATTN_QTILE 16  /* query tokens per prefill work unit */
/* Floats per partial-softmax record of one (query head, cache chunk): m, l, 14 pad, acc[hd]. */
#define KRT_ATTN_PART_STRIDE(head_dim) ((head_dim) + 16)
/* Floats of the per-worker private scratch every attention kernel takes (64-byte aligned is best). */
#define KRT_ATTN_SCRATCH_FLOATS(head_dim) (272 * (((head_dim) + 15) / 16 * 16) + 4096)

/* Append tokens t0..t1 (src + t*src_stride, n_kv_heads*head_dim floats) at position pos0 + t,
 * converted to the cache's type (F16: RNE; Q8_0: the krt_quantize_q8_0 rule per 32 values). */
KRT_DECLARE(krt_kv_append_f16, (uint16_t *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                                int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1))
KRT_DECLARE(krt_kv_append_q8_0, (krt_block_q8_0 *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                                 int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1))

/* heads (every decode/prefill kernel) packs n_heads and n_kv_heads, KRT_ATTN_HEADS(n_heads,
 * n_kv_heads): with softcap the kernels would take 15 parameters, and c2goasm passes 14. */
#define KRT_ATTN_HEADS(n_heads, n_kv_heads) (((int64_t)(n_heads) << 32) | (int64_t)(n_kv_heads))
#define KRT_ATTN_NH(heads) ((heads) >> 32)
#define KRT_ATTN_NKV(heads) ((heads) & 0xffffffff)
/* softcap (every decode/prefill kernel): *softcap == 0 is plain attention; c = *softcap > 0
 * soft-caps each scaled score, s = c * tanh(s / c), before the softmax (gemma2's
 * attn_logit_softcapping). tanh is computed without libm (csrc/attention.c). */
/* Decode attention (one query token, which sees cache positions 0..n_ctx-1), slice: units u0..u1.
 * Units: n_kv_heads * n_chunks, n_chunks = ceil(n_ctx / chunk); unit u = g*n_chunks + c covers
 * KV head g (its n_heads/n_kv_heads query heads together) and positions [c*chunk, (c+1)*chunk).
 * q: n_heads*head_dim floats. n_chunks == 1: writes out[h*head_dim ..] (normalised), part unused
 * (may be NULL). n_chunks > 1: writes the partial record of (h, c) at
 * part + (h*n_chunks + c)*KRT_ATTN_PART_STRIDE(head_dim); krt_attn_merge then writes out. */
KRT_DECLARE(krt_attn_decode_f32, (float *out, float *part, const float *q, const float *kcache, const float *vcache,
                                  float *scratch, const float *softcap, int64_t heads, int64_t head_dim,
                                  int64_t max_ctx, int64_t n_ctx, int64_t chunk, int64_t u0, int64_t u1))
KRT_DECLARE(krt_attn_decode_f16, (float *out, float *part, const float *q, const uint16_t *kcache,
                                  const uint16_t *vcache, float *scratch, const float *softcap, int64_t heads,
                                  int64_t head_dim, int64_t max_ctx, int64_t n_ctx, int64_t chunk, int64_t u0,
                                  int64_t u1))
KRT_DECLARE(krt_attn_decode_q8_0, (float *out, float *part, const float *q, const krt_block_q8_0 *kcache,
                                   const krt_block_q8_0 *vcache, float *scratch, const float *softcap, int64_t heads,
                                   int64_t head_dim, int64_t max_ctx, int64_t n_ctx, int64_t chunk, int64_t u0,
                                   int64_t u1))
/* Merge the n_chunks partial records of query heads h0..h1 into out[h*head_dim ..]. */
KRT_DECLARE(krt_attn_merge, (float *out, const float *part, int64_t n_heads, int64_t head_dim, int64_t n_chunks,
                             int64_t h0, int64_t h1))

/* Prefill attention (causal, flash-style: no T x T scores), slice: units u0..u1.
 * T query tokens at q + t*q_stride (n_heads*head_dim floats each); token t is position pos0 + t
 * and sees cache positions 0..pos0+t (the cache already holds them). out: token t at
 * out + t*n_heads*head_dim. Units: n_kv_heads * ceil(T / KRT_ATTN_QTILE); unit u covers KV
 * head g = u / n_tiles and query tile k = u % n_tiles, in zigzag order (k even: tile k/2,
 * k odd: tile n_tiles-1-k/2) so that an even split of the units balances the causal work. */
KRT_DECLARE(krt_attn_prefill_f32, (float *out, const float *q, const float *kcache, const float *vcache,
                                   float *scratch, const float *softcap, int64_t heads, int64_t head_dim,
                                   int64_t max_ctx, int64_t q_stride, int64_t pos0, int64_t T, int64_t u0, int64_t u1))
KRT_DECLARE(krt_attn_prefill_f16, (float *out, const float *q, const uint16_t *kcache, const uint16_t *vcache,
                                   float *scratch, const float *softcap, int64_t heads, int64_t head_dim,
                                   int64_t max_ctx, int64_t q_stride, int64_t pos0, int64_t T, int64_t u0, int64_t u1))
KRT_DECLARE(krt_attn_prefill_q8_0, (float *out, const float *q, const krt_block_q8_0 *kcache,
                                    const krt_block_q8_0 *vcache, float *scratch, const float *softcap, int64_t heads,
                                    int64_t head_dim, int64_t max_ctx, int64_t q_stride,
                                    int64_t pos0, int64_t T, int64_t u0, int64_t u1))

#ifdef __cplusplus
}
#endif
#endif /* KERNELRT_H */
