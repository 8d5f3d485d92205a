/*
 * krt_kquant.h - one-block quantizers for Q4_0, Q4_1, Q5_1, the K-quants (Q4_K, Q5_K, Q6_K)
 * and the K-quant activation type Q8_K: scalar, AVX2 and AVX-512 helpers, static inline.
 *
 * Private to csrc/kquant.c and the GEMV/GEMM files (c2goasm forbids calls between kernels, so
 * block quantizers are inlined wherever they are needed). Rules as in kernelrt.h: C11, no malloc,
 * no threads, no global mutable state, no libm calls. Helpers are prefixed krt_kq_.
 *
 * Semantics: ggml's reference quantizers (quantize_row_<t>_ref in ggml-quants.c at llama.cpp
 * c392e509, which llama-quantize uses when no importance matrix is given), reproduced operation
 * by operation so the bytes are identical to ggml's on every finite input, ties and huge or
 * subnormal inputs included:
 *  - every float operation in ggml's order, one rounding each (no FMA contraction, no
 *    reassociation; sqrtf is the correctly rounded IEEE square root);
 *  - nearest_int(f) is ggml's bit trick: the low 23 bits of f + 12582912.0f, minus 2^22 (round
 *    to nearest even for |f| <= 2^22; defined bits beyond that, which ggml also produces);
 *  - ggml's float -> int8/uint8 casts (Q4_0, Q4_1, Q5_1) are undefined in C when the value is out
 *    of range (only possible when 1/d overflows or d is subnormal); ggml's x86 build performs
 *    them as cvttps2dq (NaN or out of int32 range -> INT32_MIN) followed by keeping the low byte,
 *    and so do we (krt_kq_cvtt + truncation), in every variant;
 *  - Q8_K of a block whose amax is 0: ggml leaves bsums unwritten; we write zeros.
 * Poisoned blocks (any NaN or +-Inf among the block's inputs; 32 values, or 256 for K-quants),
 * as for Q8_0 / Q5_0 (krt_quant.h): the scale is the fp16 quiet NaN 0x7e00 (Q8_K: the fp32 quiet
 * NaN 0x7fc00000), every other field encodes zero (Q4_0: nibbles 8; Q6_K: q = 32, scales 0;
 * Q4_1 / Q5_1 / Q4_K / Q5_K: all other bytes 0), so dequantized values and every dot product
 * touching the block are NaN.
 */
#ifndef KRT_KQUANT_H
#define KRT_KQUANT_H

#include "krt_quant.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#endif

#define KRT_KQ_MAGIC 12582912.0f      /* 1.5 * 2^23: nearest_int's rounding constant */
#define KRT_KQ_GROUP_MAX_EPS 1e-15f   /* ggml's GROUP_MAX_EPS */
#define KRT_KQ_POISON_F32 0x7fc00000u /* fp32 quiet NaN: the d of a poisoned Q8_K block */

/* ggml's nearest_int. */
KRT_INLINE int32_t krt_kq_nearest_int(float f) {
    float v = f + KRT_KQ_MAGIC;
    return (int32_t)(krt_qz_bits(v) & 0x007fffffu) - 0x00400000;
}

/* x86 cvttss2si: truncate toward zero; NaN or a value outside int32 gives INT32_MIN. */
KRT_INLINE int32_t krt_kq_cvtt(float v) {
    if (v >= -2147483648.0f && v < 2147483648.0f) return (int32_t)v;
    return INT32_MIN;
}

/* 1 if any of the n floats is NaN or +-Inf. */
KRT_INLINE int krt_kq_poisoned(const float *x, int n) {
    uint32_t m = 0;
    for (int j = 0; j < n; j++) {
        uint32_t a = krt_qz_bits(x[j]) & 0x7fffffffu;
        m = a > m ? a : m;
    }
    return m >= 0x7f800000u;
}

KRT_INLINE float krt_kq_fabsf(float v) { return krt_qz_float(krt_qz_bits(v) & 0x7fffffffu); }

/* Correctly rounded square root without libm (sqrtss on x86). */
KRT_INLINE float krt_kq_sqrtf(float v) {
#ifdef KRT_X86
    return _mm_cvtss_f32(_mm_sqrt_ss(_mm_set_ss(v)));
#else
    return __builtin_sqrtf(v);
#endif
}

/* ======================================================================================== */
/* scalar block quantizers: the definitions                                                 */
/* ======================================================================================== */

/* Q4_0: ggml's quantize_row_q4_0_ref. */
KRT_INLINE void krt_kq_q4_0_ref(krt_block_q4_0 *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        for (int j = 0; j < KRT_QK / 2; j++) y->qs[j] = 0x88;
        return;
    }
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < KRT_QK; j++) {
        const float v = x[j];
        if (amax < krt_kq_fabsf(v)) {
            amax = krt_kq_fabsf(v);
            max = v;
        }
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_fp32_to_fp16(d);
    for (int j = 0; j < KRT_QK / 2; j++) {
        int32_t a = (int8_t)krt_kq_cvtt(x[j] * id + 8.5f);
        int32_t b = (int8_t)krt_kq_cvtt(x[j + KRT_QK / 2] * id + 8.5f);
        uint8_t xi0 = (uint8_t)(a < 15 ? a : 15);
        uint8_t xi1 = (uint8_t)(b < 15 ? b : 15);
        y->qs[j] = (uint8_t)(xi0 | (xi1 << 4));
    }
}

/* Q4_1 / Q5_1: min and max as ggml's sequential `v < min` / `v > max` scans find them (the first
 * element of the extreme value, which decides the sign of a zero). */
KRT_INLINE void krt_kq_minmax_ref(const float *x, float *mn, float *mx) {
    float min = KRT_QZ_FLT_MAX, max = -KRT_QZ_FLT_MAX;
    for (int j = 0; j < KRT_QK; j++) {
        const float v = x[j];
        if (v < min) min = v;
        if (v > max) max = v;
    }
    *mn = min;
    *mx = max;
}

/* Q4_1: ggml's quantize_row_q4_1_ref. */
KRT_INLINE void krt_kq_q4_1_ref(krt_block_q4_1 *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        y->m = 0;
        for (int j = 0; j < KRT_QK / 2; j++) y->qs[j] = 0;
        return;
    }
    float min, max;
    krt_kq_minmax_ref(x, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_fp32_to_fp16(d);
    y->m = krt_fp32_to_fp16(min);
    for (int j = 0; j < KRT_QK / 2; j++) {
        int32_t a = (int8_t)krt_kq_cvtt((x[j] - min) * id + 0.5f);
        int32_t b = (int8_t)krt_kq_cvtt((x[j + KRT_QK / 2] - min) * id + 0.5f);
        uint8_t xi0 = (uint8_t)(a < 15 ? a : 15);
        uint8_t xi1 = (uint8_t)(b < 15 ? b : 15);
        y->qs[j] = (uint8_t)(xi0 | (xi1 << 4));
    }
}

/* Q5_1: ggml's quantize_row_q5_1_ref. */
KRT_INLINE void krt_kq_q5_1_ref(krt_block_q5_1 *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        y->m = 0;
        for (int j = 0; j < 4; j++) y->qh[j] = 0;
        for (int j = 0; j < KRT_QK / 2; j++) y->qs[j] = 0;
        return;
    }
    float min, max;
    krt_kq_minmax_ref(x, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_fp32_to_fp16(d);
    y->m = krt_fp32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < KRT_QK / 2; j++) {
        uint32_t xi0 = (uint8_t)krt_kq_cvtt((x[j] - min) * id + 0.5f);
        uint32_t xi1 = (uint8_t)krt_kq_cvtt((x[j + KRT_QK / 2] - min) * id + 0.5f);
        y->qs[j] = (uint8_t)((xi0 & 0x0f) | ((xi1 & 0x0f) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << j;
        qh |= ((xi1 & 0x10u) >> 4) << (j + KRT_QK / 2);
    }
    memcpy(y->qh, &qh, 4);
}

/* Q8_K: ggml's quantize_row_q8_K_ref (the K-quant activations). */
KRT_INLINE void krt_kq_q8_K_ref(krt_block_q8_K *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK_K)) {
        y->d = krt_qz_float(KRT_KQ_POISON_F32);
        for (int j = 0; j < KRT_QK_K; j++) y->qs[j] = 0;
        for (int j = 0; j < KRT_QK_K / 16; j++) y->bsums[j] = 0;
        return;
    }
    float max = 0.0f, amax = 0.0f;
    for (int j = 0; j < KRT_QK_K; j++) {
        float ax = krt_kq_fabsf(x[j]);
        if (ax > amax) {
            amax = ax;
            max = x[j];
        }
    }
    if (amax == 0.0f) {
        y->d = 0.0f;
        for (int j = 0; j < KRT_QK_K; j++) y->qs[j] = 0;
        for (int j = 0; j < KRT_QK_K / 16; j++) y->bsums[j] = 0;
        return;
    }
    const float iscale = -127.0f / max;
    for (int j = 0; j < KRT_QK_K; j++) {
        int32_t v = krt_kq_nearest_int(iscale * x[j]);
        y->qs[j] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < KRT_QK_K / 16; j++) {
        int32_t sum = 0;
        for (int i = 0; i < 16; i++) sum += y->qs[16 * j + i];
        y->bsums[j] = (int16_t)sum;
    }
    y->d = 1.0f / iscale;
}

/* ggml's make_qkx2_quants with use_mad = false, n = 32. */
KRT_INLINE float krt_kq_qkx2(int nmax, const float *x, const float *weights, uint8_t *L, float *the_min,
                             uint8_t *Laux, float rmin, float rdelta, int nstep) {
    const int n = 32;
    float min = x[0];
    float max = x[0];
    float sum_w = weights[0];
    float sum_x = sum_w * x[0];
    for (int i = 1; i < n; ++i) {
        if (x[i] < min) min = x[i];
        if (x[i] > max) max = x[i];
        float w = weights[i];
        sum_w += w;
        sum_x += w * x[i];
    }
    if (min > 0) min = 0;
    if (max == min) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        *the_min = -min;
        return 0.0f;
    }
    float iscale = (float)nmax / (max - min);
    float scale = 1.0f / iscale;
    float best_mad = 0;
    for (int i = 0; i < n; ++i) {
        int32_t l = krt_kq_nearest_int(iscale * (x[i] - min));
        l = l < nmax ? l : nmax;
        l = l > 0 ? l : 0;
        L[i] = (uint8_t)l;
        float diff = scale * (float)L[i] + min - x[i];
        diff = diff * diff;
        float w = weights[i];
        best_mad += w * diff;
    }
    for (int is = 0; is <= nstep; ++is) {
        iscale = (rmin + rdelta * (float)is + (float)nmax) / (max - min);
        float sum_l = 0, sum_l2 = 0, sum_xl = 0;
        for (int i = 0; i < n; ++i) {
            int32_t l = krt_kq_nearest_int(iscale * (x[i] - min));
            l = l < nmax ? l : nmax;
            l = l > 0 ? l : 0;
            Laux[i] = (uint8_t)l;
            float w = weights[i];
            sum_l += w * (float)l;
            sum_l2 += w * (float)l * (float)l;
            sum_xl += w * (float)l * x[i];
        }
        float D = sum_w * sum_l2 - sum_l * sum_l;
        if (D > 0) {
            float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
            float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
            if (this_min > 0) {
                this_min = 0;
                this_scale = sum_xl / sum_l2;
            }
            float mad = 0;
            for (int i = 0; i < n; ++i) {
                float diff = this_scale * (float)Laux[i] + this_min - x[i];
                diff = diff * diff;
                float w = weights[i];
                mad += w * diff;
            }
            if (mad < best_mad) {
                for (int i = 0; i < n; ++i) L[i] = Laux[i];
                best_mad = mad;
                scale = this_scale;
                min = this_min;
            }
        }
    }
    *the_min = -min;
    return scale;
}

/* The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K block (ggml's get_scale_min_k4). */
KRT_INLINE void krt_kq_scale_min(int j, const uint8_t *q, uint8_t *d, uint8_t *m) {
    if (j < 4) {
        *d = q[j] & 63;
        *m = q[j + 4] & 63;
    } else {
        *d = (uint8_t)((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
        *m = (uint8_t)((q[j + 4] >> 4) | ((q[j - 0] >> 6) << 4));
    }
}

/* The shared first half of ggml's Q4_K / Q5_K reference quantizers: per-sub-block scales and
 * mins (make_qkx2_quants), their 6-bit codes, d, dmin, and the final quants L[256] (0..nmax). */
KRT_INLINE void krt_kq_k45_ref(uint16_t *dd, uint16_t *dmin, uint8_t scales12[12], uint8_t L[KRT_QK_K],
                               const float *x, int nmax, float rmin, int nstep) {
    uint8_t Laux[32];
    float weights[32];
    float mins[KRT_QK_K / 32];
    float scales[KRT_QK_K / 32];
    float max_scale = 0;
    float max_min = 0;
    for (int j = 0; j < KRT_QK_K / 32; ++j) {
        float sum_x2 = 0;
        for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
        float av_x = krt_kq_sqrtf(sum_x2 / 32.0f);
        for (int l = 0; l < 32; ++l) weights[l] = av_x + krt_kq_fabsf(x[32 * j + l]);
        scales[j] = krt_kq_qkx2(nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, 0.1f, nstep);
        float scale = scales[j];
        if (scale > max_scale) max_scale = scale;
        float min = mins[j];
        if (min > max_min) max_min = min;
    }
    float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f;
    float inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
    for (int j = 0; j < 12; ++j) scales12[j] = 0;
    for (int j = 0; j < KRT_QK_K / 32; ++j) {
        uint8_t ls = (uint8_t)krt_kq_nearest_int(inv_scale * scales[j]);
        uint8_t lm = (uint8_t)krt_kq_nearest_int(inv_min * mins[j]);
        ls = ls < 63 ? ls : 63;
        lm = lm < 63 ? lm : 63;
        if (j < 4) {
            scales12[j] = ls;
            scales12[j + 4] = lm;
        } else {
            scales12[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
            scales12[j - 4] |= (uint8_t)((ls >> 4) << 6);
            scales12[j - 0] |= (uint8_t)((lm >> 4) << 6);
        }
    }
    *dd = krt_fp32_to_fp16(max_scale / 63.0f);
    *dmin = krt_fp32_to_fp16(max_min / 63.0f);
    for (int j = 0; j < KRT_QK_K / 32; ++j) {
        uint8_t sc, m;
        krt_kq_scale_min(j, scales12, &sc, &m);
        const float d = krt_fp16_to_fp32(*dd) * (float)sc;
        if (d == 0.0f) continue;
        const float dm = krt_fp16_to_fp32(*dmin) * (float)m;
        for (int ii = 0; ii < 32; ++ii) {
            int32_t l = krt_kq_nearest_int((x[32 * j + ii] + dm) / d);
            l = l < nmax ? l : nmax;
            l = l > 0 ? l : 0;
            L[32 * j + ii] = (uint8_t)l;
        }
    }
}

/* Q4_K: ggml's quantize_row_q4_K_ref. */
KRT_INLINE void krt_kq_q4_K_ref(krt_block_q4_K *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK_K)) {
        memset(y, 0, sizeof(*y));
        y->d = (uint16_t)KRT_QZ_POISON_D;
        return;
    }
    uint8_t L[KRT_QK_K];
    krt_kq_k45_ref(&y->d, &y->dmin, y->scales, L, x, 15, -1.0f, 20);
    uint8_t *q = y->qs;
    for (int j = 0; j < KRT_QK_K; j += 64) {
        for (int l = 0; l < 32; ++l) q[l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 4));
        q += 32;
    }
}

/* Q5_K: ggml's quantize_row_q5_K_ref. */
KRT_INLINE void krt_kq_q5_K_ref(krt_block_q5_K *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK_K)) {
        memset(y, 0, sizeof(*y));
        y->d = (uint16_t)KRT_QZ_POISON_D;
        return;
    }
    uint8_t L[KRT_QK_K];
    krt_kq_k45_ref(&y->d, &y->dmin, y->scales, L, x, 31, -0.5f, 15);
    uint8_t *qh = y->qh;
    uint8_t *ql = y->qs;
    memset(qh, 0, KRT_QK_K / 8);
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < KRT_QK_K; n += 64) {
        for (int j = 0; j < 32; ++j) {
            int l1 = L[n + j];
            if (l1 > 15) {
                l1 -= 16;
                qh[j] |= m1;
            }
            int l2 = L[n + j + 32];
            if (l2 > 15) {
                l2 -= 16;
                qh[j] |= m2;
            }
            ql[j] = (uint8_t)(l1 | (l2 << 4));
        }
        m1 = (uint8_t)(m1 << 2);
        m2 = (uint8_t)(m2 << 2);
        ql += 32;
    }
}

/* ggml's make_qx_quants with n = 16, nmax = 32, rmse_type = 1, no weights. */
KRT_INLINE float krt_kq_qx16(const float *x, int8_t *L) {
    const int n = 16, nmax = 32;
    float max = 0;
    float amax = 0;
    for (int i = 0; i < n; ++i) {
        float ax = krt_kq_fabsf(x[i]);
        if (ax > amax) {
            amax = ax;
            max = x[i];
        }
    }
    if (amax < KRT_KQ_GROUP_MAX_EPS) {
        for (int i = 0; i < n; ++i) L[i] = 0;
        return 0.0f;
    }
    float iscale = (float)(-nmax) / max;
    float sumlx = 0;
    float suml2 = 0;
    for (int i = 0; i < n; ++i) {
        int32_t l = krt_kq_nearest_int(iscale * x[i]);
        l = l < nmax - 1 ? l : nmax - 1;
        l = l > -nmax ? l : -nmax;
        L[i] = (int8_t)(l + nmax);
        float w = x[i] * x[i];
        sumlx += w * x[i] * (float)l;
        suml2 += w * (float)l * (float)l;
    }
    float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
    float best = scale * sumlx;
    for (int is = -9; is <= 9; ++is) {
        if (is == 0) continue;
        iscale = -((float)nmax + 0.1f * (float)is) / max;
        sumlx = suml2 = 0;
        for (int i = 0; i < n; ++i) {
            int32_t l = krt_kq_nearest_int(iscale * x[i]);
            l = l < nmax - 1 ? l : nmax - 1;
            l = l > -nmax ? l : -nmax;
            float w = x[i] * x[i];
            sumlx += w * x[i] * (float)l;
            suml2 += w * (float)l * (float)l;
        }
        if (suml2 > 0 && sumlx * sumlx > best * suml2) {
            for (int i = 0; i < n; ++i) {
                int32_t l = krt_kq_nearest_int(iscale * x[i]);
                l = l < nmax - 1 ? l : nmax - 1;
                l = l > -nmax ? l : -nmax;
                L[i] = (int8_t)(nmax + l);
            }
            scale = sumlx / suml2;
            best = scale * sumlx;
        }
    }
    return scale;
}

/* Q6_K: ggml's quantize_row_q6_K_ref. */
KRT_INLINE void krt_kq_q6_K_ref(krt_block_q6_K *y, const float *x) {
    if (krt_kq_poisoned(x, KRT_QK_K)) {
        memset(y, 0, sizeof(*y));
        memset(y->ql, 0, sizeof(y->ql));
        memset(y->qh, 0xaa, sizeof(y->qh)); /* q = 32: low 4 bits 0, high 2 bits 2 */
        y->d = (uint16_t)KRT_QZ_POISON_D;
        return;
    }
    int8_t L[KRT_QK_K];
    float scales[KRT_QK_K / 16];
    float max_scale = 0;
    float max_abs_scale = 0;
    for (int ib = 0; ib < KRT_QK_K / 16; ++ib) {
        const float scale = krt_kq_qx16(x + 16 * ib, L + 16 * ib);
        scales[ib] = scale;
        const float abs_scale = krt_kq_fabsf(scale);
        if (abs_scale > max_abs_scale) {
            max_abs_scale = abs_scale;
            max_scale = scale;
        }
    }
    if (max_abs_scale < KRT_KQ_GROUP_MAX_EPS) {
        memset(y, 0, sizeof(*y));
        y->d = krt_fp32_to_fp16(0.0f);
        return;
    }
    float iscale = -128.0f / max_scale;
    y->d = krt_fp32_to_fp16(1.0f / iscale);
    for (int ib = 0; ib < KRT_QK_K / 16; ++ib) {
        int32_t v = krt_kq_nearest_int(iscale * scales[ib]);
        y->scales[ib] = (int8_t)(v < 127 ? v : 127);
    }
    for (int j = 0; j < KRT_QK_K / 16; ++j) {
        float d = krt_fp16_to_fp32(y->d) * (float)y->scales[j];
        if (d == 0.0f) continue;
        for (int ii = 0; ii < 16; ++ii) {
            int32_t l = krt_kq_nearest_int(x[16 * j + ii] / d);
            l = l < 31 ? l : 31;
            l = l > -32 ? l : -32;
            L[16 * j + ii] = (int8_t)(l + 32);
        }
    }
    uint8_t *ql = y->ql;
    uint8_t *qh = y->qh;
    for (int j = 0; j < KRT_QK_K; j += 128) {
        for (int l = 0; l < 32; ++l) {
            const uint8_t q1 = L[j + l + 0] & 0xF;
            const uint8_t q2 = L[j + l + 32] & 0xF;
            const uint8_t q3 = L[j + l + 64] & 0xF;
            const uint8_t q4 = L[j + l + 96] & 0xF;
            ql[l + 0] = (uint8_t)(q1 | (q3 << 4));
            ql[l + 32] = (uint8_t)(q2 | (q4 << 4));
            qh[l] = (uint8_t)((L[j + l] >> 4) | ((L[j + l + 32] >> 4) << 2) | ((L[j + l + 64] >> 4) << 4) |
                              ((L[j + l + 96] >> 4) << 6));
        }
        ql += 64;
        qh += 32;
    }
}

#ifdef KRT_X86

/* ======================================================================================== */
/* AVX2: byte-identical to the scalar definitions                                           */
/* ======================================================================================== */

/* Sign-extended low byte of each int32 lane (C's int32 -> int8 conversion). */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_kq_sxb_avx2(__m256i v) { return _mm256_srai_epi32(_mm256_slli_epi32(v, 24), 24); }

/* 32 int32 lanes (each 0..255 after masking) -> 32 bytes in element order. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_kq_bytes_avx2(__m256i q0, __m256i q1, __m256i q2, __m256i q3) {
    const __m256i ff = _mm256_set1_epi32(0xff);
    __m256i p = _mm256_packus_epi16(_mm256_packus_epi32(_mm256_and_si256(q0, ff), _mm256_and_si256(q1, ff)),
                                    _mm256_packus_epi32(_mm256_and_si256(q2, ff), _mm256_and_si256(q3, ff)));
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/* First element (in order) whose |x| bits equal amaxb, among 4 vectors of 8. */
KRT_TARGET_AVX2 KRT_INLINE int krt_kq_first_eq_avx2(const __m256i a[4], uint32_t bitsv) {
    __m256i mb = _mm256_set1_epi32((int)bitsv);
    uint32_t e = 0;
    for (int k = 0; k < 4; k++)
        e |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a[k], mb))) << (8 * k);
    return __builtin_ctz(e);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_kq_q4_0_avx2(krt_block_q4_0 *y, const float *x) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256 v[4];
    __m256i a[4];
    for (int k = 0; k < 4; k++) {
        v[k] = _mm256_loadu_ps(x + 8 * k);
        a[k] = _mm256_and_si256(_mm256_castps_si256(v[k]), absm);
    }
    uint32_t amaxb = krt_qz_hmax_epu32_avx2(_mm256_max_epu32(_mm256_max_epu32(a[0], a[1]), _mm256_max_epu32(a[2], a[3])));
    if (amaxb >= 0x7f800000u) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        _mm_storeu_si128((__m128i *)y->qs, _mm_set1_epi8((char)0x88));
        return;
    }
    float max = amaxb ? x[krt_kq_first_eq_avx2(a, amaxb)] : 0.0f;
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_qz_fp16_avx2(d);
    const __m256 idv = _mm256_set1_ps(id), half = _mm256_set1_ps(8.5f);
    const __m256i c15 = _mm256_set1_epi32(15);
    __m256i q[4];
    for (int k = 0; k < 4; k++) {
        __m256i t = _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(v[k], idv), half));
        q[k] = _mm256_min_epi32(krt_kq_sxb_avx2(t), c15); /* as uint8: low byte */
    }
    /* qs[j] = xi0 | xi1 << 4 (xi0 not masked, as in ggml) */
    __m256i lo0 = _mm256_and_si256(q[0], _mm256_set1_epi32(0xff)), lo1 = _mm256_and_si256(q[1], _mm256_set1_epi32(0xff));
    __m256i b0 = _mm256_or_si256(lo0, _mm256_slli_epi32(q[2], 4));
    __m256i b1 = _mm256_or_si256(lo1, _mm256_slli_epi32(q[3], 4));
    __m256i p = krt_kq_bytes_avx2(b0, b1, b0, b1);
    _mm_storeu_si128((__m128i *)y->qs, _mm256_castsi256_si128(p));
}

/* min / max with ggml's first-occurrence rule (only the sign of a zero extreme can differ from a
 * plain vminps / vmaxps reduction). */
KRT_TARGET_AVX2 KRT_INLINE void krt_kq_minmax_avx2(const float *x, const __m256 v[4], float *mn, float *mx) {
    __m256 lo = _mm256_min_ps(_mm256_min_ps(v[0], v[1]), _mm256_min_ps(v[2], v[3]));
    __m256 hi = _mm256_max_ps(_mm256_max_ps(v[0], v[1]), _mm256_max_ps(v[2], v[3]));
    __m128 l = _mm_min_ps(_mm256_castps256_ps128(lo), _mm256_extractf128_ps(lo, 1));
    __m128 h = _mm_max_ps(_mm256_castps256_ps128(hi), _mm256_extractf128_ps(hi, 1));
    l = _mm_min_ps(l, _mm_movehl_ps(l, l));
    h = _mm_max_ps(h, _mm_movehl_ps(h, h));
    l = _mm_min_ss(l, _mm_movehdup_ps(l));
    h = _mm_max_ss(h, _mm_movehdup_ps(h));
    float min = _mm_cvtss_f32(l), max = _mm_cvtss_f32(h);
    if (min == 0.0f || max == 0.0f) { /* the first zero decides the sign */
        uint32_t e = 0;
        for (int k = 0; k < 4; k++)
            e |= (uint32_t)_mm256_movemask_ps(_mm256_cmp_ps(v[k], _mm256_setzero_ps(), _CMP_EQ_OQ)) << (8 * k);
        float z = x[__builtin_ctz(e)];
        if (min == 0.0f) min = z;
        if (max == 0.0f) max = z;
    }
    *mn = min;
    *mx = max;
}

KRT_TARGET_AVX2 KRT_INLINE int krt_kq_poisoned_avx2(const __m256 v[4]) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_setzero_si256();
    for (int k = 0; k < 4; k++) m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_castps_si256(v[k]), absm));
    return krt_qz_hmax_epu32_avx2(m) >= 0x7f800000u;
}

/* (x - min) * id + 0.5 truncated the x86 way, per lane (int32, low byte significant). */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_kq_q1_avx2(__m256 v, __m256 minv, __m256 idv) {
    return _mm256_cvttps_epi32(_mm256_add_ps(_mm256_mul_ps(_mm256_sub_ps(v, minv), idv), _mm256_set1_ps(0.5f)));
}

KRT_TARGET_AVX2 KRT_INLINE void krt_kq_q4_1_avx2(krt_block_q4_1 *y, const float *x) {
    __m256 v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    if (krt_kq_poisoned_avx2(v)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        y->m = 0;
        _mm_storeu_si128((__m128i *)y->qs, _mm_setzero_si128());
        return;
    }
    float min, max;
    krt_kq_minmax_avx2(x, v, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_qz_fp16_avx2(d);
    y->m = krt_qz_fp16_avx2(min);
    const __m256 idv = _mm256_set1_ps(id), minv = _mm256_set1_ps(min);
    const __m256i c15 = _mm256_set1_epi32(15);
    __m256i q[4];
    for (int k = 0; k < 4; k++) q[k] = _mm256_min_epi32(krt_kq_sxb_avx2(krt_kq_q1_avx2(v[k], minv, idv)), c15);
    __m256i b0 = _mm256_or_si256(_mm256_and_si256(q[0], _mm256_set1_epi32(0xff)), _mm256_slli_epi32(q[2], 4));
    __m256i b1 = _mm256_or_si256(_mm256_and_si256(q[1], _mm256_set1_epi32(0xff)), _mm256_slli_epi32(q[3], 4));
    __m256i p = krt_kq_bytes_avx2(b0, b1, b0, b1);
    _mm_storeu_si128((__m128i *)y->qs, _mm256_castsi256_si128(p));
}

KRT_TARGET_AVX2 KRT_INLINE void krt_kq_q5_1_avx2(krt_block_q5_1 *y, const float *x) {
    __m256 v[4];
    for (int k = 0; k < 4; k++) v[k] = _mm256_loadu_ps(x + 8 * k);
    if (krt_kq_poisoned_avx2(v)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        y->m = 0;
        memset(y->qh, 0, 4);
        _mm_storeu_si128((__m128i *)y->qs, _mm_setzero_si128());
        return;
    }
    float min, max;
    krt_kq_minmax_avx2(x, v, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_qz_fp16_avx2(d);
    y->m = krt_qz_fp16_avx2(min);
    const __m256 idv = _mm256_set1_ps(id), minv = _mm256_set1_ps(min);
    __m256i q[4];
    for (int k = 0; k < 4; k++) q[k] = krt_kq_q1_avx2(v[k], minv, idv);
    __m256i p = krt_kq_bytes_avx2(q[0], q[1], q[2], q[3]); /* xi = low byte, elements 0..31 */
    uint32_t qh = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(p, 3)); /* bit 4 -> bit 7 */
    __m128i lo = _mm_and_si128(_mm256_castsi256_si128(p), _mm_set1_epi8(0x0f));
    __m128i hi = _mm_and_si128(_mm_slli_epi16(_mm256_extracti128_si256(p, 1), 4), _mm_set1_epi8((char)0xf0));
    _mm_storeu_si128((__m128i *)y->qs, _mm_or_si128(lo, hi));
    memcpy(y->qh, &qh, 4);
}

/* bsums of a Q8_K block from its 256 quants. */
KRT_TARGET_AVX2 KRT_INLINE void krt_kq_bsums_avx2(int16_t *bsums, const int8_t *qs) {
    const __m256i one8 = _mm256_set1_epi8(1), one16 = _mm256_set1_epi16(1);
    __m256i s[8];
    for (int k = 0; k < 8; k++) /* groups 2k (low lane), 2k+1 (high lane): 4 sums of 4 each */
        s[k] = _mm256_madd_epi16(_mm256_maddubs_epi16(one8, _mm256_loadu_si256((const __m256i *)(qs + 32 * k))), one16);
    __m256i h0 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[0], s[1]), _mm256_hadd_epi32(s[2], s[3]));
    __m256i h1 = _mm256_hadd_epi32(_mm256_hadd_epi32(s[4], s[5]), _mm256_hadd_epi32(s[6], s[7]));
    /* h0 = [g0 g2 g4 g6 | g1 g3 g5 g7], h1 the same for groups 8..15 */
    const __m256i ord = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
    h0 = _mm256_permutevar8x32_epi32(h0, ord);
    h1 = _mm256_permutevar8x32_epi32(h1, ord);
    __m256i p = _mm256_permute4x64_epi64(_mm256_packs_epi32(h0, h1), 0xd8);
    _mm256_storeu_si256((__m256i *)bsums, p);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_kq_q8_K_avx2(krt_block_q8_K *y, const float *x) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256i m = _mm256_setzero_si256();
    for (int k = 0; k < 32; k++) m = _mm256_max_epu32(m, _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + 8 * k)), absm));
    uint32_t amaxb = krt_qz_hmax_epu32_avx2(m);
    if (amaxb >= 0x7f800000u || amaxb == 0) {
        y->d = amaxb ? krt_qz_float(KRT_KQ_POISON_F32) : 0.0f;
        memset(y->qs, 0, sizeof(y->qs));
        memset(y->bsums, 0, sizeof(y->bsums));
        return;
    }
    const __m256i mb = _mm256_set1_epi32((int)amaxb);
    int first = 0;
    for (int k = 0; k < 32; k++) {
        __m256i a = _mm256_and_si256(_mm256_loadu_si256((const __m256i *)(x + 8 * k)), absm);
        uint32_t e = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a, mb)));
        if (e) {
            first = 8 * k + __builtin_ctz(e);
            break;
        }
    }
    const float iscale = -127.0f / x[first];
    const __m256 isv = _mm256_set1_ps(iscale), magic = _mm256_set1_ps(KRT_KQ_MAGIC);
    const __m256i lowm = _mm256_set1_epi32(0x007fffff), off = _mm256_set1_epi32(0x00400000), c127 = _mm256_set1_epi32(127);
    for (int k = 0; k < 8; k++) {
        __m256i q[4];
        for (int i = 0; i < 4; i++) {
            __m256 t = _mm256_add_ps(_mm256_mul_ps(isv, _mm256_loadu_ps(x + 32 * k + 8 * i)), magic);
            __m256i l = _mm256_sub_epi32(_mm256_and_si256(_mm256_castps_si256(t), lowm), off);
            q[i] = _mm256_min_epi32(l, c127);
        }
        _mm256_storeu_si256((__m256i *)(y->qs + 32 * k), krt_kq_bytes_avx2(q[0], q[1], q[2], q[3]));
    }
    krt_kq_bsums_avx2(y->bsums, y->qs);
    y->d = 1.0f / iscale;
}

/* ======================================================================================== */
/* AVX-512                                                                                  */
/* ======================================================================================== */

KRT_TARGET_AVX512 KRT_INLINE __m512i krt_kq_sxb_avx512(__m512i v) { return _mm512_srai_epi32(_mm512_slli_epi32(v, 24), 24); }

KRT_TARGET_AVX512 KRT_INLINE void krt_kq_q4_0_avx512(krt_block_q4_0 *y, const float *x) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    __m512i a0 = _mm512_and_si512(_mm512_castps_si512(v0), absm), a1 = _mm512_and_si512(_mm512_castps_si512(v1), absm);
    uint32_t amaxb = (uint32_t)_mm512_reduce_max_epu32(_mm512_max_epu32(a0, a1));
    if (amaxb >= 0x7f800000u) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        _mm_storeu_si128((__m128i *)y->qs, _mm_set1_epi8((char)0x88));
        return;
    }
    float max = 0.0f;
    if (amaxb) {
        __m512i mb = _mm512_set1_epi32((int)amaxb);
        uint32_t e = (uint32_t)_mm512_cmpeq_epi32_mask(a0, mb) | ((uint32_t)_mm512_cmpeq_epi32_mask(a1, mb) << 16);
        max = x[__builtin_ctz(e)];
    }
    const float d = max / -8.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_qz_fp16_avx512(d);
    const __m512 idv = _mm512_set1_ps(id), half = _mm512_set1_ps(8.5f);
    const __m512i c15 = _mm512_set1_epi32(15);
    __m512i q0 = _mm512_min_epi32(krt_kq_sxb_avx512(_mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v0, idv), half))), c15);
    __m512i q1 = _mm512_min_epi32(krt_kq_sxb_avx512(_mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(v1, idv), half))), c15);
    __m512i b = _mm512_or_si512(_mm512_and_si512(q0, _mm512_set1_epi32(0xff)), _mm512_slli_epi32(q1, 4));
    _mm_storeu_si128((__m128i *)y->qs, _mm512_cvtepi32_epi8(b));
}

KRT_TARGET_AVX512 KRT_INLINE void krt_kq_minmax_avx512(const float *x, __m512 v0, __m512 v1, float *mn, float *mx) {
    float min = _mm512_reduce_min_ps(_mm512_min_ps(v0, v1));
    float max = _mm512_reduce_max_ps(_mm512_max_ps(v0, v1));
    if (min == 0.0f || max == 0.0f) {
        uint32_t e = (uint32_t)_mm512_cmp_ps_mask(v0, _mm512_setzero_ps(), _CMP_EQ_OQ) |
                     ((uint32_t)_mm512_cmp_ps_mask(v1, _mm512_setzero_ps(), _CMP_EQ_OQ) << 16);
        float z = x[__builtin_ctz(e)];
        if (min == 0.0f) min = z;
        if (max == 0.0f) max = z;
    }
    *mn = min;
    *mx = max;
}

KRT_TARGET_AVX512 KRT_INLINE int krt_kq_poisoned_avx512(__m512 v0, __m512 v1) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i m = _mm512_max_epu32(_mm512_and_si512(_mm512_castps_si512(v0), absm), _mm512_and_si512(_mm512_castps_si512(v1), absm));
    return (uint32_t)_mm512_reduce_max_epu32(m) >= 0x7f800000u;
}

KRT_TARGET_AVX512 KRT_INLINE __m512i krt_kq_q1_avx512(__m512 v, __m512 minv, __m512 idv) {
    return _mm512_cvttps_epi32(_mm512_add_ps(_mm512_mul_ps(_mm512_sub_ps(v, minv), idv), _mm512_set1_ps(0.5f)));
}

KRT_TARGET_AVX512 KRT_INLINE void krt_kq_q4_1_avx512(krt_block_q4_1 *y, const float *x) {
    __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    if (krt_kq_poisoned_avx512(v0, v1)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        y->m = 0;
        _mm_storeu_si128((__m128i *)y->qs, _mm_setzero_si128());
        return;
    }
    float min, max;
    krt_kq_minmax_avx512(x, v0, v1, &min, &max);
    const float d = (max - min) / 15.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_qz_fp16_avx512(d);
    y->m = krt_qz_fp16_avx512(min);
    const __m512 idv = _mm512_set1_ps(id), minv = _mm512_set1_ps(min);
    const __m512i c15 = _mm512_set1_epi32(15);
    __m512i q0 = _mm512_min_epi32(krt_kq_sxb_avx512(krt_kq_q1_avx512(v0, minv, idv)), c15);
    __m512i q1 = _mm512_min_epi32(krt_kq_sxb_avx512(krt_kq_q1_avx512(v1, minv, idv)), c15);
    __m512i b = _mm512_or_si512(_mm512_and_si512(q0, _mm512_set1_epi32(0xff)), _mm512_slli_epi32(q1, 4));
    _mm_storeu_si128((__m128i *)y->qs, _mm512_cvtepi32_epi8(b));
}

KRT_TARGET_AVX512 KRT_INLINE void krt_kq_q5_1_avx512(krt_block_q5_1 *y, const float *x) {
    __m512 v0 = _mm512_loadu_ps(x), v1 = _mm512_loadu_ps(x + 16);
    if (krt_kq_poisoned_avx512(v0, v1)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        y->m = 0;
        memset(y->qh, 0, 4);
        _mm_storeu_si128((__m128i *)y->qs, _mm_setzero_si128());
        return;
    }
    float min, max;
    krt_kq_minmax_avx512(x, v0, v1, &min, &max);
    const float d = (max - min) / 31.0f;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    y->d = krt_qz_fp16_avx512(d);
    y->m = krt_qz_fp16_avx512(min);
    const __m512 idv = _mm512_set1_ps(id), minv = _mm512_set1_ps(min);
    __m512i q0 = krt_kq_q1_avx512(v0, minv, idv), q1 = krt_kq_q1_avx512(v1, minv, idv);
    const __m512i c16 = _mm512_set1_epi32(16), c15 = _mm512_set1_epi32(15);
    uint32_t qh = (uint32_t)_mm512_test_epi32_mask(q0, c16) | ((uint32_t)_mm512_test_epi32_mask(q1, c16) << 16);
    __m512i nib = _mm512_or_si512(_mm512_and_si512(q0, c15), _mm512_slli_epi32(_mm512_and_si512(q1, c15), 4));
    _mm_storeu_si128((__m128i *)y->qs, _mm512_cvtepi32_epi8(nib));
    memcpy(y->qh, &qh, 4);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_kq_q8_K_avx512(krt_block_q8_K *y, const float *x) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512i m = _mm512_setzero_si512();
    for (int k = 0; k < 16; k++) m = _mm512_max_epu32(m, _mm512_and_si512(_mm512_loadu_si512((const void *)(x + 16 * k)), absm));
    uint32_t amaxb = (uint32_t)_mm512_reduce_max_epu32(m);
    if (amaxb >= 0x7f800000u || amaxb == 0) {
        y->d = amaxb ? krt_qz_float(KRT_KQ_POISON_F32) : 0.0f;
        memset(y->qs, 0, sizeof(y->qs));
        memset(y->bsums, 0, sizeof(y->bsums));
        return;
    }
    const __m512i mb = _mm512_set1_epi32((int)amaxb);
    int first = 0;
    for (int k = 0; k < 16; k++) {
        __mmask16 e = _mm512_cmpeq_epi32_mask(_mm512_and_si512(_mm512_loadu_si512((const void *)(x + 16 * k)), absm), mb);
        if (e) {
            first = 16 * k + __builtin_ctz((uint32_t)e);
            break;
        }
    }
    const float iscale = -127.0f / x[first];
    const __m512 isv = _mm512_set1_ps(iscale), magic = _mm512_set1_ps(KRT_KQ_MAGIC);
    const __m512i lowm = _mm512_set1_epi32(0x007fffff), off = _mm512_set1_epi32(0x00400000), c127 = _mm512_set1_epi32(127);
    __m512i sums = _mm512_setzero_si512(); /* lane g: bsums[g] */
    for (int k = 0; k < 16; k++) {
        __m512 t = _mm512_add_ps(_mm512_mul_ps(isv, _mm512_loadu_ps(x + 16 * k)), magic);
        __m512i l = _mm512_min_epi32(_mm512_sub_epi32(_mm512_and_si512(_mm512_castps_si512(t), lowm), off), c127);
        __m128i b = _mm512_cvtepi32_epi8(l); /* truncation, as C's int -> int8 */
        _mm_storeu_si128((__m128i *)(y->qs + 16 * k), b);
        int32_t s = _mm512_reduce_add_epi32(_mm512_cvtepi8_epi32(b));
        sums = _mm512_mask_set1_epi32(sums, (__mmask16)(1u << k), s);
    }
    _mm256_storeu_si256((__m256i *)y->bsums, _mm512_cvtepi32_epi16(sums));
    y->d = 1.0f / iscale;
}

#endif /* KRT_X86 */

#endif /* KRT_KQUANT_H */
