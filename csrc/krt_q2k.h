/*
 * krt_q2k.h - the 2-bit K-quant Q2_K: its element accessor, its one-block quantizer and the
 * scalar row dot product that defines its GEMV / GEMM results, static inline (prefix krt_q2_).
 * Included by csrc/q2k.c. Rules as kernelrt.h: C11, no malloc, no threads, no global mutable
 * state, no libm calls.
 *
 * Block layout (ggml's block_q2_K, dequantize_row_q2_K): scales[16], qs[64], fp16 d, fp16 dmin;
 * 16 sub-blocks of 16 weights, sub-block i has the 4-bit scale sc_i = scales[i] & 15 and the
 * 4-bit min m_i = scales[i] >> 4. Element e (half n = e / 128, j = (e % 128) / 32, l = e % 32) is
 * q = (qs[32n + l] >> 2j) & 3; value = (fp32(d) * sc) * q - fp32(dmin) * m, two roundings, as
 * ggml's dequantizer (dl = d * sc, ml = dmin * m, dl * q - ml).
 *
 * Dot product with Q8_K activations (per super-block, in block order, every step rounded to fp32
 * and never fused; acc starts at +0), the form of Q4_K's in krt_kdot.h:
 *   isum = sum_{i<16} sc_i * sum_{l<16} q * x           msum = sum_{i<16} m_i * bsums[i]
 *   acc  = acc + ((fp32(d) * d_x) * (float)isum - (fp32(dmin) * d_x) * (float)msum)
 * with both scale products passed through krt_scale_poison: a NaN / +-Inf d or dmin (weights) or
 * d_x makes the output NaN in every variant (krt_kdot.h's rule). |isum| < 2^21, exact.
 *
 * Quantizer (ours; ggml's dequantizer is the compatibility target, not ggml's bytes): per
 * sub-block of 16, a least-squares fit of value = s * q - m (s >= 0, m >= 0, q in 0..3) over 16
 * candidate grids (q = nearest((x - min(x, 0)) * k / range), k = 2.5 .. 4.0), keeping the one of
 * least squared error; d = max s / 15 and dmin = max m / 15 are stored as fp16, each sub-block's
 * s and m rounded to 4-bit multiples of the stored d and dmin, and the quants re-fit to those
 * (nearest((x + dmin * m) / (d * sc)), clamped). Every float operation is written out in a fixed
 * order with one rounding each (FP_CONTRACT off, krt_kquant.h), so the Go port gives the same
 * bytes. A poisoned block (any NaN / +-Inf input) gets d = the fp16 NaN 0x7e00 and zeros
 * elsewhere: everything it dequantizes to and every dot product it enters is NaN.
 * Checked once by hand against ggml's own code (llama.cpp snapshot, not in this repository), on
 * 4096 super-blocks each of Gaussian, cubed-Gaussian and uniform data: ggml's
 * dequantize_row_q2_K of ggml's bytes equals krt_dequantize_q2_K_ref bit for bit, and the relative
 * RMS round-trip error is 0.268 / 0.271 / 0.224 here against 0.293 / 0.397 / 0.233 for ggml's
 * quantize_row_q2_K_ref (what llama-quantize runs without an importance matrix).
 */
#ifndef KRT_Q2K_H
#define KRT_Q2K_H

#include "krt_kquant.h"

#define KRT_Q2_STEPS 16 /* candidate grids per sub-block */

/* Quant e (0..255) of a Q2_K block. */
KRT_INLINE int32_t krt_q2_q(const krt_block_q2_K *b, int e) {
    return (int32_t)((b->qs[32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3);
}

KRT_INLINE int32_t krt_q2_clamp(int32_t v, int32_t hi) { return v < 0 ? 0 : v > hi ? hi : v; }

/* One sub-block of 16: the fitted scale s (returned) and min *m (value = s * q - m), quants L. */
KRT_INLINE float krt_q2_fit16(const float *x, uint8_t *L, float *m) {
    float mn = x[0], mx = x[0];
    for (int i = 1; i < 16; i++) {
        if (x[i] < mn) mn = x[i];
        if (x[i] > mx) mx = x[i];
    }
    if (mn > 0.0f) mn = 0.0f;
    for (int i = 0; i < 16; i++) L[i] = 0;
    if (!(mx > mn)) { /* constant non-positive sub-block: value = -m exactly */
        *m = -mn;
        return 0.0f;
    }
    const float range = mx - mn;
    float best_s = range / 3.0f, best_o = mn, best_e = 0.0f;
    int found = 0;
    for (int k = 0; k < KRT_Q2_STEPS; k++) {
        const float iscale = (2.5f + 0.1f * (float)k) / range;
        uint8_t l[16];
        float sl = 0.0f, sl2 = 0.0f, sx = 0.0f, sxl = 0.0f;
        for (int i = 0; i < 16; i++) {
            l[i] = (uint8_t)krt_q2_clamp(krt_kq_nearest_int(iscale * (x[i] - mn)), 3);
            const float q = (float)l[i];
            sl = sl + q;
            sl2 = sl2 + q * q;
            sx = sx + x[i];
            sxl = sxl + q * x[i];
        }
        const float D = 16.0f * sl2 - sl * sl;
        if (!(D > 0.0f)) continue;
        float s = (16.0f * sxl - sx * sl) / D;
        float o = (sl2 * sx - sl * sxl) / D;
        if (o > 0.0f) { /* the offset is a min: never above 0 */
            o = 0.0f;
            s = sxl / sl2;
        }
        if (!(s >= 0.0f)) continue;
        float e = 0.0f;
        for (int i = 0; i < 16; i++) {
            const float dv = s * (float)l[i] + o - x[i];
            e = e + dv * dv;
        }
        if (!found || e < best_e) {
            found = 1;
            best_e = e;
            best_s = s;
            best_o = o;
            for (int i = 0; i < 16; i++) L[i] = l[i];
        }
    }
    *m = -best_o;
    return best_s;
}

/* Q2_K: one super-block (krt_block_q2_K layout) from x[0..256). */
KRT_INLINE void krt_q2_quant_ref(krt_block_q2_K *y, const float *x) {
    memset(y, 0, sizeof(*y));
    if (krt_kq_poisoned(x, KRT_QK_K)) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        return;
    }
    uint8_t L[KRT_QK_K];
    float sc[16], mn[16], max_s = 0.0f, max_m = 0.0f;
    for (int i = 0; i < 16; i++) {
        sc[i] = krt_q2_fit16(x + 16 * i, L + 16 * i, &mn[i]);
        if (sc[i] > max_s) max_s = sc[i];
        if (mn[i] > max_m) max_m = mn[i];
    }
    y->d = krt_fp32_to_fp16(max_s / 15.0f);
    y->dmin = krt_fp32_to_fp16(max_m / 15.0f);
    const float d = krt_fp16_to_fp32(y->d), dm = krt_fp16_to_fp32(y->dmin);
    for (int i = 0; i < 16; i++) {
        const int32_t ls = d > 0.0f ? krt_q2_clamp(krt_kq_nearest_int(sc[i] / d), 15) : 0;
        const int32_t lm = dm > 0.0f ? krt_q2_clamp(krt_kq_nearest_int(mn[i] / dm), 15) : 0;
        y->scales[i] = (uint8_t)(ls | lm << 4);
        const float dl = d * (float)ls, ml = dm * (float)lm;
        for (int l = 0; l < 16; l++) {
            const int e = 16 * i + l;
            const int32_t q = dl > 0.0f ? krt_q2_clamp(krt_kq_nearest_int((x[e] + ml) / dl), 3) : 0;
            y->qs[32 * (e / 128) + e % 32] |= (uint8_t)(q << (2 * ((e % 128) / 32)));
        }
    }
}

/* The two integer sums of one super-block (see the header). */
KRT_INLINE void krt_q2_sums(const krt_block_q2_K *w, const krt_block_q8_K *x, int32_t *isum, int32_t *msum) {
    int32_t is = 0, ms = 0;
    for (int i = 0; i < 16; i++) {
        int32_t dot = 0;
        for (int l = 0; l < 16; l++) dot += krt_q2_q(w, 16 * i + l) * (int32_t)x->qs[16 * i + l];
        is += (int32_t)(w->scales[i] & 15) * dot;
        ms += (int32_t)(w->scales[i] >> 4) * (int32_t)x->bsums[i];
    }
    *isum = is;
    *msum = ms;
}

/* One super-block's term, given its integer sums: the last step of the definition. */
KRT_INLINE float krt_q2_term(uint16_t d, uint16_t dmin, float dx, int32_t isum, int32_t msum) {
    const float a = krt_scale_poison(krt_fp16_to_fp32(d) * dx);
    const float c = krt_scale_poison(krt_fp16_to_fp32(dmin) * dx);
    return a * (float)isum - c * (float)msum;
}

KRT_INLINE float krt_kd_q2_K(const krt_block_q2_K *w, const krt_block_q8_K *x, int64_t nb) {
    float acc = 0.0f;
    for (int64_t b = 0; b < nb; b++) {
        int32_t isum, msum;
        krt_q2_sums(w + b, x + b, &isum, &msum);
        acc = acc + krt_q2_term(w[b].d, w[b].dmin, x[b].d, isum, msum);
    }
    return acc;
}

#endif /* KRT_Q2K_H */
