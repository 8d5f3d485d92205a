/*
 * krt_kdot.h - the scalar row dot products of the Q4_0, Q5_1 and K-quant GEMV / GEMM: the
 * definition of their results, shared by krt_gemv_<t>_ref and krt_gemm_<t>_ref (so a GEMM of one
 * token equals the scalar GEMV bit for bit). Static inline, prefix krt_kd_; rules as kernelrt.h.
 *
 * Per block (32 weights) or super-block (256), in block order, every step rounded to fp32 and
 * never fused (acc starts at +0):
 *   Q4_0 x Q8_0: isum = sum_j (q_j - 8) * x_j
 *                acc = acc + (fp32(d_w) * fp32(d_x)) * (float)isum
 *   IQ4_NL x Q8_0: as Q4_0 with kvalues_iq4nl[q_j] (krt_iquant.h) in place of q_j - 8
 *   Q5_1 x Q8_0: isum = sum_j q_j * x_j (q in 0..31), xsum = sum_j x_j
 *                acc = acc + ((fp32(d_w) * fp32(d_x)) * (float)isum + fp32(m_w) * (fp32(d_x) * (float)xsum))
 *                ggml pairs Q5_1 with Q8_1 activations, whose s = fp16(d * xsum) with d unrounded;
 *                we use Q8_0 activations (identical quants and fp16 d) and the exact fp32 product,
 *                so the min term differs from ggml's by that fp16 rounding only.
 *   Q4_K / Q5_K x Q8_K: isum = sum_{j<8} sc_j * sum_{l<32} q * x      (q in 0..15 / 0..31)
 *                msum = sum_{j<8} m_j * (bsums[2j] + bsums[2j+1])
 *                acc = acc + ((fp32(d) * d_x) * (float)isum - (fp32(dmin) * d_x) * (float)msum)
 *   Q6_K x Q8_K: isum = sum_{i<16} sc_i * sum_{l<16} (q - 32) * x
 *                acc = acc + (fp32(d) * d_x) * (float)isum
 * Non-finite scales (krt_common.h krt_scale_poison): every scale product above - fp32(d_w) * d_x,
 * Q5_1's fp32(m_w) * (fp32(d_x) * xsum), Q4_K / Q5_K's fp32(dmin) * d_x - that is not finite is
 * replaced by NaN, so a block with a NaN or +-Inf fp16 d / m / dmin (weights) or d (Q8_0: fp16,
 * Q8_K: fp32; activations) makes every output it meets NaN, in every variant and the Go ports
 * (ggml gives +-Inf or NaN depending on the integer sums, which split SIMD sums cannot follow).
 * Finite scales never give a non-finite product except a Q8_K d_x above ~5e33 (|x| > ~6e35)
 * times a large weight scale; that product is poisoned too. Q6_K's 8-bit sub-scales and the K
 * 6-bit scales / mins are integers and cannot be non-finite.
 * Integer sums are exact (|isum| < 2^28). The SIMD GEMVs split isum into exact partial sums,
 * scale and accumulate them lane-wise with FMA, so they agree with these to a few ulp of the
 * row's magnitude; the GEMMs follow this order exactly (bit-identical).
 */
#ifndef KRT_KDOT_H
#define KRT_KDOT_H

#include "krt_kquant.h"
#include "krt_iquant.h"

KRT_INLINE float krt_kd_q4_0(const krt_block_q4_0 *w, const krt_block_q8_0 *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int j = 0; j < KRT_QK / 2; j++) {
            isum += ((int32_t)(w[b].qs[j] & 0x0f) - 8) * (int32_t)x[b].qs[j];
            isum += ((int32_t)(w[b].qs[j] >> 4) - 8) * (int32_t)x[b].qs[j + KRT_QK / 2];
        }
        float s = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * krt_fp16_to_fp32(x[b].d));
        float p = s * (float)isum;
        acc = acc + p;
    }
    return acc;
}

KRT_INLINE float krt_kd_iq4_nl(const krt_block_iq4_nl *w, const krt_block_q8_0 *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int j = 0; j < KRT_QK / 2; j++) {
            isum += krt_iq4nl_value(w[b].qs[j] & 0x0f) * (int32_t)x[b].qs[j];
            isum += krt_iq4nl_value(w[b].qs[j] >> 4) * (int32_t)x[b].qs[j + KRT_QK / 2];
        }
        float s = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * krt_fp16_to_fp32(x[b].d));
        float p = s * (float)isum;
        acc = acc + p;
    }
    return acc;
}

KRT_INLINE float krt_kd_q5_1(const krt_block_q5_1 *w, const krt_block_q8_0 *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        uint32_t qh;
        memcpy(&qh, w[b].qh, 4);
        int32_t isum = 0, xsum = 0;
        for (int j = 0; j < KRT_QK / 2; j++) {
            int32_t q0 = (int32_t)((w[b].qs[j] & 0x0f) | ((qh >> j) & 1u) << 4);
            int32_t q1 = (int32_t)((w[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1u) << 4);
            isum += q0 * (int32_t)x[b].qs[j] + q1 * (int32_t)x[b].qs[j + KRT_QK / 2];
            xsum += (int32_t)x[b].qs[j] + (int32_t)x[b].qs[j + KRT_QK / 2];
        }
        float dx = krt_fp16_to_fp32(x[b].d);
        float s = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * dx);
        float p = s * (float)isum;
        float q = krt_scale_poison(krt_fp16_to_fp32(w[b].m) * (dx * (float)xsum));
        acc = acc + (p + q);
    }
    return acc;
}

/* Q4_K (h5 == 0) / Q5_K: the two integer sums of one super-block. */
KRT_INLINE void krt_kd_k45_sums(const uint8_t *scales, const uint8_t *qs, const uint8_t *qh, const krt_block_q8_K *x,
                               int32_t *isum, int32_t *msum) {
    int32_t is = 0, ms = 0;
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        krt_kq_scale_min(j, scales, &sc, &m);
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) {
            int32_t q = j & 1 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 0x0f;
            if (qh) q |= ((qh[l] >> j) & 1) << 4;
            dot += q * (int32_t)x->qs[32 * j + l];
        }
        is += (int32_t)sc * dot;
        ms += (int32_t)m * ((int32_t)x->bsums[2 * j] + (int32_t)x->bsums[2 * j + 1]);
    }
    *isum = is;
    *msum = ms;
}

KRT_INLINE float krt_kd_q4_K(const krt_block_q4_K *w, const krt_block_q8_K *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum, msum;
        krt_kd_k45_sums(w[b].scales, w[b].qs, NULL, x + b, &isum, &msum);
        float a = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * x[b].d);
        float c = krt_scale_poison(krt_fp16_to_fp32(w[b].dmin) * x[b].d);
        acc = acc + (a * (float)isum - c * (float)msum);
    }
    return acc;
}

KRT_INLINE float krt_kd_q5_K(const krt_block_q5_K *w, const krt_block_q8_K *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum, msum;
        krt_kd_k45_sums(w[b].scales, w[b].qs, w[b].qh, x + b, &isum, &msum);
        float a = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * x[b].d);
        float c = krt_scale_poison(krt_fp16_to_fp32(w[b].dmin) * x[b].d);
        acc = acc + (a * (float)isum - c * (float)msum);
    }
    return acc;
}

KRT_INLINE float krt_kd_q6_K(const krt_block_q6_K *w, const krt_block_q8_K *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (int i = 0; i < 16; i++) {
            int32_t dot = 0;
            for (int l = 0; l < 16; l++) {
                const int e = 16 * i + l, h = e / 128, k = (e % 128) / 32, ll = e % 32;
                const uint8_t lb = w[b].ql[64 * h + ll + 32 * (k & 1)];
                int32_t q = (k < 2 ? lb & 0x0f : lb >> 4) | (((w[b].qh[32 * h + ll] >> (2 * k)) & 3) << 4);
                dot += (q - 32) * (int32_t)x[b].qs[e];
            }
            isum += (int32_t)w[b].scales[i] * dot;
        }
        float a = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * x[b].d);
        acc = acc + a * (float)isum;
    }
    return acc;
}

#endif /* KRT_KDOT_H */
