/*
 * krt_q3k.h - the 3-bit K-quant Q3_K: its element and scale accessors, its one-block quantizer
 * and the scalar row dot product that defines its GEMV / GEMM results, static inline (prefix
 * krt_q3_). Included by csrc/q3k.c. Rules as kernelrt.h: C11, no malloc, no threads, no global
 * mutable state, no libm calls.
 *
 * Block layout (ggml's block_q3_K, dequantize_row_q3_K): hmask[32], qs[64], scales[12], fp16 d;
 * 16 sub-blocks of 16 weights. Sub-block s has the 6-bit scale
 * sc_s = (s < 8 ? scales[s] & 15 : scales[s - 8] >> 4) | ((scales[8 + s % 4] >> 2 (s / 4)) & 3) << 4.
 * Element e (h = e / 128, j = (e % 128) / 32, l = e % 32; sub-block e / 16) has the quant
 * q = ((qs[32h + l] >> 2j) & 3) - 4 + 4 * (hmask[l] bit 4h + j), in -4..3 (ggml subtracts 4 where
 * the bit is clear); value = (fp32(d) * (sc - 32)) * q, two roundings as ggml (the first exact).
 *
 * Dot product with Q8_K activations (per super-block, in block order, every step rounded to fp32
 * and never fused; acc starts at +0):
 *   isum = sum_{s<16} (sc_s - 32) * sum_{l<16} q * x
 *   acc  = acc + krt_scale_poison(fp32(d) * d_x) * (float)isum
 * |isum| <= 16 * 32 * 16 * 4 * 127 < 2^23: exact in int32 and in its conversion. A NaN / +-Inf
 * d (weights) or d_x makes the output NaN in every variant.
 *
 * Quantizer (ours; ggml's dequantizer is the compatibility target, not ggml's bytes): per
 * sub-block of 16, the element m of largest magnitude is mapped onto each of 8 code values
 * (-4, -3.75, -3.5, -3.25, 3, 2.75, 2.5, 2.25), the quants rounded and clamped to -4..3, the scale
 * refit in closed form (sum q x / sum q^2), keeping the trial of least squared error; the
 * super-block's d = -s_m / 32 for the scale s_m of largest magnitude (code -32), stored as fp16;
 * each sc - 32 = nearest(s / d) clamped to -32..31 and the quants re-fit to d * (sc - 32)
 * (nearest(x / that), clamped; 0 where it is 0). Every float operation is written out in a fixed
 * order with one rounding each (FP_CONTRACT off, krt_kquant.h), so the Go port gives the same
 * bytes. A super-block whose scales are all 0 (or whose d underflows fp16) gets d = 0 and zeros
 * elsewhere. A poisoned block (any NaN / +-Inf input) gets d = the fp16 NaN 0x7e00 and zeros
 * elsewhere: everything it dequantizes to and every dot product it enters is NaN.
 */
#ifndef KRT_Q3K_H
#define KRT_Q3K_H

#include "krt_kquant.h"

/* Quant e (0..255) of a Q3_K block, -4..3. */
KRT_INLINE int32_t krt_q3_q(const krt_block_q3_K *b, int e) {
    const int h = e / 128, j = (e % 128) / 32, l = e % 32;
    return (int32_t)((b->qs[32 * h + l] >> (2 * j)) & 3) - 4 + 4 * (int32_t)((b->hmask[l] >> (4 * h + j)) & 1);
}

/* The 6-bit scale sc of sub-block s (0..15). */
KRT_INLINE int32_t krt_q3_sc(const krt_block_q3_K *b, int s) {
    const int32_t lo = s < 8 ? b->scales[s] & 15 : b->scales[s - 8] >> 4;
    return lo | ((b->scales[8 + s % 4] >> (2 * (s / 4))) & 3) << 4;
}

KRT_INLINE int32_t krt_q3_clamp(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : v > hi ? hi : v; }

/* One sub-block of 16: the fitted scale s (values s * q, q in -4..3), 0 for a sub-block whose
 * largest magnitude is below 1e-15. */
KRT_INLINE float krt_q3_fit16(const float *x) {
    float amax = 0.0f, m = 0.0f;
    for (int i = 0; i < 16; i++) {
        const float a = krt_kq_fabsf(x[i]);
        if (a > amax) {
            amax = a;
            m = x[i];
        }
    }
    if (amax < KRT_KQ_GROUP_MAX_EPS) return 0.0f;
    float best_s = 0.0f, best_e = 0.0f;
    int found = 0;
    for (int t = 0; t < 8; t++) {
        const float v = t < 4 ? -4.0f + 0.25f * (float)t : 3.0f - 0.25f * (float)(t - 4);
        const float iscale = v / m;
        float sqx = 0.0f, sqq = 0.0f;
        int32_t q[16];
        for (int i = 0; i < 16; i++) {
            q[i] = krt_q3_clamp(krt_kq_nearest_int(iscale * x[i]), -4, 3);
            sqx = sqx + (float)q[i] * x[i];
            sqq = sqq + (float)(q[i] * q[i]);
        }
        if (!(sqq > 0.0f)) continue;
        const float s = sqx / sqq;
        float e = 0.0f;
        for (int i = 0; i < 16; i++) {
            const float dv = s * (float)q[i] - x[i];
            e = e + dv * dv;
        }
        if (!found || e < best_e) {
            found = 1;
            best_e = e;
            best_s = s;
        }
    }
    return best_s;
}

/* Q3_K: one super-block (krt_block_q3_K layout) from x[0..256). */
KRT_INLINE void krt_q3_quant_ref(krt_block_q3_K *y, const float *x) {
    memset(y, 0, sizeof(*y));
    if (krt_kq_poisoned(x, KRT_QK_K)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        return;
    }
    float s[16], sm = 0.0f;
    for (int j = 0; j < 16; j++) {
        s[j] = krt_q3_fit16(x + 16 * j);
        if (krt_kq_fabsf(s[j]) > krt_kq_fabsf(sm)) sm = s[j];
    }
    if (sm == 0.0f) return;
    y->d = krt_fp32_to_fp16(-sm / 32.0f);
    const float d = krt_fp16_to_fp32(y->d);
    if (d == 0.0f) {
        y->d = 0;
        return;
    }
    for (int j = 0; j < 16; j++) {
        const int32_t l = krt_q3_clamp(krt_kq_nearest_int(s[j] / d), -32, 31);
        const int32_t sc = l + 32;
        if (j < 8)
            y->scales[j] |= (uint8_t)(sc & 15);
        else
            y->scales[j - 8] |= (uint8_t)((sc & 15) << 4);
        y->scales[8 + j % 4] |= (uint8_t)((sc >> 4) << (2 * (j / 4)));
        const float dl = d * (float)l;
        for (int i = 0; i < 16; i++) {
            const int e = 16 * j + i, h = e / 128, jj = (e % 128) / 32, ll = e % 32;
            const int32_t q = dl != 0.0f ? krt_q3_clamp(krt_kq_nearest_int(x[e] / dl), -4, 3) : 0;
            const int32_t u = q + 4;
            y->qs[32 * h + ll] |= (uint8_t)((u & 3) << (2 * jj));
            y->hmask[ll] |= (uint8_t)((u >> 2) << (4 * h + jj));
        }
    }
}

/* One super-block's integer sum (see the header). */
KRT_INLINE int32_t krt_q3_isum(const krt_block_q3_K *w, const krt_block_q8_K *x) {
    int32_t is = 0;
    for (int s = 0; s < 16; s++) {
        int32_t dot = 0;
        for (int l = 0; l < 16; l++) dot += krt_q3_q(w, 16 * s + l) * (int32_t)x->qs[16 * s + l];
        is += (krt_q3_sc(w, s) - 32) * dot;
    }
    return is;
}

KRT_INLINE float krt_kd_q3_K(const krt_block_q3_K *w, const krt_block_q8_K *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        const float a = krt_scale_poison(krt_fp16_to_fp32(w[b].d) * x[b].d);
        acc = acc + a * (float)krt_q3_isum(w + b, x + b);
    }
    return acc;
}

#endif /* KRT_Q3K_H */
