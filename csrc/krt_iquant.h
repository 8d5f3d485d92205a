/*
 * krt_iquant.h - the non-linear 4-bit type IQ4_NL: its value table (scalar and as SIMD byte
 * vectors for vpshufb) and its one-block quantizer, static inline (prefix krt_iq4nl_ / krt_iq_).
 * Included by csrc/krt_kdot.h (the dot-product definition), krt_gvpack.h (the GEMV drivers),
 * csrc/iquant.c and csrc/gemm.c. Rules as kernelrt.h: C11, no malloc, no threads, no global
 * mutable state, no libm calls; the table lives in two 64-bit immediates, not in memory.
 *
 * Block layout (ggml's block_iq4_nl, dequantize_row_iq4_nl): fp16 d, 16 bytes qs; element j < 16
 * is the low nibble of qs[j], element j + 16 the high nibble; value = d * kvalues_iq4nl[nibble],
 * kvalues_iq4nl = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}.
 *
 * Quantizer (ours; ggml's dequantizer is the compatibility target, the quantizer need not be
 * ggml's bytes): weighted least squares with weights x^2, as ggml's quantize_iq4_nl without an
 * importance matrix does (normalised by the block's largest magnitude). For 15 trial scales mapping the largest-magnitude element m onto table
 * entries -127 + t (t = -7..7), each element takes the nearest table value of x/d_t, the scale is
 * refit in closed form (d = sum w q x / sum w q^2) and the trial with the largest
 * (sum w q x)^2 / sum w q^2 wins; the elements are then re-mapped with the winning scale, and
 * d is stored as fp16. Every float operation is written out in a fixed order with one rounding
 * each (no FMA: FP_CONTRACT is off, krt_kquant.h), so the Go port gives the same bytes.
 * A block whose largest magnitude is below 1e-15 gets d = 0 and nibbles 0 (as ggml). Poisoned
 * blocks (any NaN / +-Inf input): d = the fp16 NaN 0x7e00, nibbles 8 (value 1), so everything the
 * block dequantizes to and every dot product it enters is NaN.
 */
#ifndef KRT_IQUANT_H
#define KRT_IQUANT_H

#include "krt_kquant.h"

/* kvalues_iq4nl as int8 bytes, entries 0..7 and 8..15 (little-endian). */
#define KRT_IQ4NL_LO 0xF6EADDCFBFAD9881ull /* -127 -104 -83 -65 -49 -35 -22 -10 */
#define KRT_IQ4NL_HI 0x7159453526190D01ull /*    1   13  25  38  53  69  89 113 */

/* Table entry n (0..15). */
KRT_INLINE int32_t krt_iq4nl_value(int n) {
    const uint64_t w = n < 8 ? KRT_IQ4NL_LO : KRT_IQ4NL_HI;
    return (int32_t)(int8_t)(uint8_t)(w >> (8 * (n & 7)));
}

#ifdef KRT_X86
/* The table as 16 signed bytes, and as unsigned bytes value + 128 (the vpdpbusd operand). */
KRT_TARGET_AVX2 KRT_INLINE __m128i krt_iq4nl_s8(void) {
    return _mm_set_epi64x((long long)KRT_IQ4NL_HI, (long long)KRT_IQ4NL_LO);
}
KRT_TARGET_AVX2 KRT_INLINE __m128i krt_iq4nl_u8(void) {
    return _mm_xor_si128(krt_iq4nl_s8(), _mm_set1_epi8((char)0x80));
}
#endif

/* The index of the table value nearest to v (the lower one on a tie); NaN never reaches here. */
KRT_INLINE int krt_iq4nl_nearest(float v) {
    if (v <= -127.0f) return 0;
    if (v >= 113.0f) return 15;
    int i = 0;
    while (i < 14 && v >= (float)krt_iq4nl_value(i + 1)) i++;
    /* value(i) <= v < value(i+1) */
    const float lo = (float)krt_iq4nl_value(i), hi = (float)krt_iq4nl_value(i + 1);
    return v - lo <= hi - v ? i : i + 1;
}

/* IQ4_NL: one block of 32 (krt_block_iq4_nl layout) from x[0..32). */
KRT_INLINE void krt_iq_q4nl_ref(krt_block_iq4_nl *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        for (int j = 0; j < KRT_QK / 2; j++) y->qs[j] = 0x88;
        return;
    }
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < KRT_QK; j++) {
        const float a = krt_kq_fabsf(x[j]);
        if (a > amax) {
            amax = a;
            max = x[j];
        }
    }
    if (amax < KRT_KQ_GROUP_MAX_EPS) {
        y->d = 0;
        for (int j = 0; j < KRT_QK / 2; j++) y->qs[j] = 0;
        return;
    }
    const float ia = 1.0f / amax; /* weights (x / amax)^2: the same fit, no overflow of x^2 */
    float d = 0.0f, best = 0.0f;
    int found = 0;
    for (int t = -7; t <= 7; t++) {
        const float id = (float)(t - 127) / max;
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int j = 0; j < KRT_QK; j++) {
            const float q = (float)krt_iq4nl_value(krt_iq4nl_nearest(id * x[j]));
            const float xn = x[j] * ia;
            const float w = xn * xn;
            const float wq = w * q;
            sumqx = sumqx + wq * x[j];
            sumq2 = sumq2 + wq * q;
        }
        /* sumqx^2 / sumq2 > best, without the division */
        if (sumq2 > 0.0f && (!found || sumqx * sumqx > best * sumq2)) {
            d = sumqx / sumq2;
            best = d * sumqx;
            found = 1;
        }
    }
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t l[KRT_QK];
    for (int j = 0; j < KRT_QK; j++) l[j] = (uint8_t)krt_iq4nl_nearest(id * x[j]);
    y->d = krt_fp32_to_fp16(d);
    for (int j = 0; j < KRT_QK / 2; j++) y->qs[j] = (uint8_t)(l[j] | (l[j + KRT_QK / 2] << 4));
}

#endif /* KRT_IQUANT_H */
