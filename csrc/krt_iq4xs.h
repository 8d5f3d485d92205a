/*
 * krt_iq4xs.h - the non-linear 4-bit super-block type IQ4_XS: its sub-block scale accessor, its
 * one-block quantizer and the scalar row dot product that defines its GEMV / GEMM results, static
 * inline (prefix krt_ix_). Included by csrc/iq4xs.c. Rules as kernelrt.h: C11, no malloc, no
 * threads, no global mutable state, no libm calls.
 *
 * Block layout (ggml's block_iq4_xs, dequantize_row_iq4_xs): fp16 d, uint16 scales_h,
 * scales_l[4], qs[128]; 8 sub-blocks of 32 weights. Sub-block j has the 6-bit scale
 * ls_j = ((scales_l[j / 2] >> 4 (j % 2)) & 15) | ((scales_h >> 2j) & 3) << 4 (read as one
 * little-endian uint32, scales_l's nibble j sits at bits 4j) and its 16 bytes qs[16j..16j+16) in
 * IQ4_NL's layout: element l < 16 the low nibble of byte l, element l + 16 its high nibble, each
 * an index into kvalues_iq4nl (krt_iquant.h). value = (fp32(d) * (ls_j - 32)) * kvalue, two
 * roundings as ggml (the first is exact: 11 by 6 significant bits).
 *
 * Dot product with Q8_K activations (per super-block, in block order, every step rounded to fp32
 * and never fused; acc starts at +0):
 *   isum = sum_{j<8} (ls_j - 32) * sum_{l<32} kvalue * x
 *   acc  = acc + krt_scale_poison(fp32(d) * d_x) * (float)isum
 * |isum| <= 8 * 32 * 32 * 127 * 127 < 2^28: exact in int32 (its conversion to float rounds,
 * identically everywhere). A NaN / +-Inf d (weights) or d_x makes the output NaN in every variant.
 *
 * Quantizer (ours; ggml's dequantizer is the compatibility target, not ggml's bytes): each
 * sub-block of 32 gets IQ4_NL's weighted least-squares scale s_j (krt_ix_fit32, the search of
 * krt_iq_q4nl_ref in krt_iquant.h); the super-block scale is d = -s_m / 32 for the s_m of largest
 * magnitude (so s_m takes the code -32, the wider side of the 6-bit range), stored as fp16; each
 * ls_j - 32 = nearest(s_j / d) clamped to -32..31, and the nibbles re-mapped to the nearest table
 * value of x / (d * (ls_j - 32)) (index 8, value 1, where that product is 0). Every float
 * operation is written out in a fixed order with one rounding each (FP_CONTRACT off,
 * krt_kquant.h), so the Go port gives the same bytes. A super-block whose sub-block scales are
 * all 0 (or whose d underflows fp16) gets d = 0 and zeros elsewhere. A poisoned block (any NaN /
 * +-Inf input) gets d = the fp16 NaN 0x7e00 and zeros elsewhere: everything it dequantizes to and
 * every dot product it enters is NaN.
 */
#ifndef KRT_IQ4XS_H
#define KRT_IQ4XS_H

#include "krt_iquant.h"

/* The 6-bit scale ls of sub-block j (0..7). */
KRT_INLINE int32_t krt_ix_ls(const krt_block_iq4_xs *b, int j) {
    return (int32_t)(((b->scales_l[j / 2] >> (4 * (j % 2))) & 15) | (((b->scales_h >> (2 * j)) & 3) << 4));
}

/* The table index of element e (0..255). */
KRT_INLINE int krt_ix_nib(const krt_block_iq4_xs *b, int e) {
    const int j = e / 32, l = e % 32;
    return l < 16 ? b->qs[16 * j + l] & 15 : b->qs[16 * j + l - 16] >> 4;
}

/* IQ4_NL's scale search (krt_iq_q4nl_ref) for one sub-block of 32: the fitted scale s (values
 * s * kvalue), 0 for a sub-block whose largest magnitude is below 1e-15. */
KRT_INLINE float krt_ix_fit32(const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float a = krt_kq_fabsf(x[j]);
        if (a > amax) {
            amax = a;
            max = x[j];
        }
    }
    if (amax < KRT_KQ_GROUP_MAX_EPS) return 0.0f;
    const float ia = 1.0f / amax;
    float d = 0.0f, best = 0.0f;
    int found = 0;
    for (int t = -7; t <= 7; t++) {
        const float id = (float)(t - 127) / max;
        float sumqx = 0.0f, sumq2 = 0.0f;
        for (int j = 0; j < 32; j++) {
            const float q = (float)krt_iq4nl_value(krt_iq4nl_nearest(id * x[j]));
            const float xn = x[j] * ia;
            const float w = xn * xn;
            const float wq = w * q;
            sumqx = sumqx + wq * x[j];
            sumq2 = sumq2 + wq * q;
        }
        if (sumq2 > 0.0f && (!found || sumqx * sumqx > best * sumq2)) {
            d = sumqx / sumq2;
            best = d * sumqx;
            found = 1;
        }
    }
    return d;
}

/* IQ4_XS: one super-block (krt_block_iq4_xs layout) from x[0..256). */
KRT_INLINE void krt_ix_quant_ref(krt_block_iq4_xs *y, const float *x) {
    memset(y, 0, sizeof(*y));
    if (krt_kq_poisoned(x, KRT_QK_K)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        return;
    }
    float s[8], sm = 0.0f;
    for (int j = 0; j < 8; j++) {
        s[j] = krt_ix_fit32(x + 32 * j);
        if (krt_kq_fabsf(s[j]) > krt_kq_fabsf(sm)) sm = s[j];
    }
    if (sm == 0.0f) return;
    y->d = krt_fp32_to_fp16(-sm / 32.0f);
    const float d = krt_fp16_to_fp32(y->d);
    if (d == 0.0f) {
        y->d = 0;
        return;
    }
    uint32_t sl = 0;
    for (int j = 0; j < 8; j++) {
        int32_t l = krt_kq_nearest_int(s[j] / d);
        l = l < -32 ? -32 : l > 31 ? 31 : l;
        const uint32_t ls = (uint32_t)(l + 32);
        sl |= (ls & 15) << (4 * j);
        y->scales_h = (uint16_t)(y->scales_h | (ls >> 4) << (2 * j));
        const float dl = d * (float)l;
        const float idl = dl != 0.0f ? 1.0f / dl : 0.0f;
        for (int k = 0; k < 16; k++) {
            const int lo = dl != 0.0f ? krt_iq4nl_nearest(idl * x[32 * j + k]) : 8;
            const int hi = dl != 0.0f ? krt_iq4nl_nearest(idl * x[32 * j + 16 + k]) : 8;
            y->qs[16 * j + k] = (uint8_t)(lo | hi << 4);
        }
    }
    for (int i = 0; i < 4; i++) y->scales_l[i] = (uint8_t)(sl >> (8 * i));
}

/* One super-block's integer sum (see the header). */
KRT_INLINE int32_t krt_ix_isum(const krt_block_iq4_xs *w, const krt_block_q8_K *x) {
    int32_t is = 0;
    for (int j = 0; j < 8; j++) {
        int32_t dot = 0;
        for (int l = 0; l < 32; l++) dot += krt_iq4nl_value(krt_ix_nib(w, 32 * j + l)) * (int32_t)x->qs[32 * j + l];
        is += (krt_ix_ls(w, j) - 32) * dot;
    }
    return is;
}

KRT_INLINE float krt_kd_iq4_xs(const krt_block_iq4_xs *w, const krt_block_q8_K *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const float a = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * x[b].d);
        acc = acc + a * (float)krt_ix_isum(w + b, x + b);
    }
    return acc;
}

#endif /* KRT_IQ4XS_H */
