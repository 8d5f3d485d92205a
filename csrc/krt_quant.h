/*
 * krt_quant.h - one-block Q8_0 / Q5_0 quantizers (scalar, AVX2, AVX-512), static inline.
 *
 * Private to csrc/quant.c and csrc/gemv.c: the fused GEMV kernels (krt_gemv_*_f32) quantize
 * their activations with exactly the same code as krt_quantize_q8_0_*, and c2goasm forbids
 * calls between kernels, so the block quantizers live here and are inlined into both files.
 * Rules as in kernelrt.h: C11, no malloc, no threads, no global mutable state, no libm calls.
 * Every helper is prefixed krt_qz_ (csrc/ is also compiled as one unity translation unit).
 *
 * Semantics (ggml's reference quantizers, made total; every variant is byte-identical):
 *  Q8_0: amax = max |x|; d = amax / 127; id = d ? 1/d : 0; qs = roundf(x * id), rounding
 *        half away from zero (emulated exactly: t = trunc(v); |v - t| >= 0.5 -> t += sign(v));
 *        d stored as fp16, round to nearest even.
 *  Q5_0: max = the element of largest magnitude with its sign (the first one on ties, as in
 *        ggml's `if (amax < fabsf(v))` loop; an all-zero block gives max = +0, so d = -0 and
 *        the stored d is 0x8000, like ggml); d = max / -16; id = d ? 1/d : 0;
 *        q = min(31, trunc(x * id + 16.5f)); low nibbles in qs, 5th bits in qh.
 *  Edge cases ggml leaves undefined, defined here the same way in every variant:
 *   - "poisoned" block: any NaN or +-Inf among the 32 inputs. d = 0x7e00 (fp16 quiet NaN) and
 *     every quant encodes 0 (Q8_0: qs = 0; Q5_0: q = 16, i.e. qs nibbles 0 and all qh bits 1),
 *     so dequantize gives NaN * 0 = NaN for all 32 values and any GEMV row meeting the block
 *     (as weight or as activation) gets NaN: NaN propagates as through a float dot product
 *     (an Inf input therefore gives NaN, not Inf).
 *   - 1/d overflowing to +-Inf (|d| < ~2^-128, only for blocks whose fp16 d is 0 anyway):
 *     id = 0, so the block quantizes to all zeros (Q8_0 qs 0, Q5_0 q 16).
 *   - quants are clamped to the representable range (Q8_0: [-127, 127], Q5_0: [0, 31]); this
 *     only matters when d is a float subnormal (amax < ~1.9e-36), where x*id can exceed it.
 *   - large finite inputs (amax > 65504*127 for Q8_0) give d = fp16 Inf, as in ggml. The Q8_0 /
 *     Q5_0 GEMV and GEMM kernels treat such a block (and any block, in weights or activations,
 *     whose fp16 scale is +-Inf) as poisoned too: its products are NaN (krt_scale_poison in
 *     krt_common.h), the same in every variant.
 */
#ifndef KRT_QUANT_H
#define KRT_QUANT_H

#include "krt_common.h"

#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF /* x*id + 16.5f must stay two roundings in every variant */
#endif

#define KRT_QZ_FLT_MAX 3.40282346638528859812e+38f
#define KRT_QZ_POISON_D 0x7e00u

KRT_INLINE uint32_t krt_qz_bits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

KRT_INLINE float krt_qz_float(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* 1/d with the rules above (d finite). */
KRT_INLINE float krt_qz_inv(float d) {
    float id = d != 0.0f ? 1.0f / d : 0.0f;
    if (!(krt_qz_bits(id) << 1 < 0xff000000u)) id = 0.0f; /* |id| = Inf -> 0 */
    return id;
}

/* roundf(v) for |v| < 2^23, exact, clamped to [-127, 127]. */
KRT_INLINE int krt_qz_round127(float v) {
    float t = (float)(int32_t)v;
    float f = v - t;
    if (f >= 0.5f) t += 1.0f;
    if (f <= -0.5f) t -= 1.0f;
    if (t > 127.0f) t = 127.0f;
    if (t < -127.0f) t = -127.0f;
    return (int)t;
}

/* ---------------- scalar ---------------- */

KRT_INLINE void krt_qz_q8_0_ref(krt_block_q8_0 *y, const float *x) {
    uint32_t amaxb = 0;
    for (int j = 0; j < KRT_QK; j++) {
        uint32_t a = krt_qz_bits(x[j]) & 0x7fffffffu;
        if (a > amaxb) amaxb = a;
    }
    if (amaxb >= 0x7f800000u) { /* NaN or Inf: poisoned */
        y->d = (uint16_t)KRT_QZ_POISON_D;
        for (int j = 0; j < KRT_QK; j++) y->qs[j] = 0;
        return;
    }
    float d = krt_qz_float(amaxb) / 127.0f;
    float id = krt_qz_inv(d);
    y->d = krt_fp32_to_fp16(d);
    for (int j = 0; j < KRT_QK; j++) {
        float v = x[j] * id;
        y->qs[j] = (int8_t)krt_qz_round127(v);
    }
}

KRT_INLINE void krt_qz_q5_0_ref(krt_block_q5_0 *y, const float *x) {
    uint32_t amaxb = 0;
    float max = 0.0f;
    for (int j = 0; j < KRT_QK; j++) {
        uint32_t a = krt_qz_bits(x[j]) & 0x7fffffffu;
        if (a > amaxb) { /* strict: the first element of largest magnitude wins */
            amaxb = a;
            max = x[j];
        }
    }
    if (amaxb >= 0x7f800000u) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        for (int j = 0; j < KRT_QK / 2; j++) y->qs[j] = 0;
        for (int j = 0; j < 4; j++) y->qh[j] = 0xff;
        return;
    }
    float d = max / -16.0f;
    float id = krt_qz_inv(d);
    y->d = krt_fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < KRT_QK / 2; j++) {
        float v0 = x[j] * id;
        float v1 = x[j + KRT_QK / 2] * id;
        v0 = v0 + 16.5f;
        v1 = v1 + 16.5f;
        /* trunc, clamp to [0, 31] (v is never NaN: x finite, id finite) */
        int32_t q0 = v0 < 0.0f ? 0 : (v0 >= 31.0f ? 31 : (int32_t)v0);
        int32_t q1 = v1 < 0.0f ? 0 : (v1 >= 31.0f ? 31 : (int32_t)v1);
        y->qs[j] = (uint8_t)((q0 & 0x0f) | ((q1 & 0x0f) << 4));
        qh |= (uint32_t)((q0 >> 4) & 1) << j;
        qh |= (uint32_t)((q1 >> 4) & 1) << (j + KRT_QK / 2);
    }
    memcpy(y->qh, &qh, 4);
}

#ifdef KRT_X86

/* ---------------- AVX2 ---------------- */

KRT_TARGET_AVX2 KRT_INLINE uint32_t krt_qz_hmax_epu32_avx2(__m256i m) {
    __m128i a = _mm_max_epu32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0x4e));
    a = _mm_max_epu32(a, _mm_shuffle_epi32(a, 0xb1));
    return (uint32_t)_mm_cvtsi128_si32(a);
}

/* roundf(v) exactly (half away from zero), clamped to [-127, 127], as int32 lanes. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_qz_round127_avx2(__m256 v) {
    const __m256 sign = _mm256_set1_ps(-0.0f);
    __m256 t = _mm256_round_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m256 f = _mm256_andnot_ps(sign, _mm256_sub_ps(v, t));
    __m256 m = _mm256_cmp_ps(f, _mm256_set1_ps(0.5f), _CMP_GE_OQ);
    __m256 one = _mm256_or_ps(_mm256_set1_ps(1.0f), _mm256_and_ps(sign, v)); /* copysign(1, v) */
    t = _mm256_add_ps(t, _mm256_and_ps(m, one));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_set1_ps(-127.0f)), _mm256_set1_ps(127.0f));
    return _mm256_cvttps_epi32(t);
}

KRT_TARGET_AVX2 KRT_INLINE uint16_t krt_qz_fp16_avx2(float d) {
    return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(d), 0), 0);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_qz_q8_0_avx2(krt_block_q8_0 *y, const float *x) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256 v0 = _mm256_loadu_ps(x + 0);
    __m256 v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16);
    __m256 v3 = _mm256_loadu_ps(x + 24);
    __m256i a0 = _mm256_and_si256(_mm256_castps_si256(v0), absm);
    __m256i a1 = _mm256_and_si256(_mm256_castps_si256(v1), absm);
    __m256i a2 = _mm256_and_si256(_mm256_castps_si256(v2), absm);
    __m256i a3 = _mm256_and_si256(_mm256_castps_si256(v3), absm);
    __m256i m = _mm256_max_epu32(_mm256_max_epu32(a0, a1), _mm256_max_epu32(a2, a3));
    uint32_t amaxb = krt_qz_hmax_epu32_avx2(m);
    if (amaxb >= 0x7f800000u) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        _mm256_storeu_si256((__m256i *)y->qs, _mm256_setzero_si256());
        return;
    }
    float d = krt_qz_float(amaxb) / 127.0f;
    float id = krt_qz_inv(d);
    y->d = krt_qz_fp16_avx2(d);
    __m256 idv = _mm256_set1_ps(id);
    __m256i q0 = krt_qz_round127_avx2(_mm256_mul_ps(v0, idv));
    __m256i q1 = krt_qz_round127_avx2(_mm256_mul_ps(v1, idv));
    __m256i q2 = krt_qz_round127_avx2(_mm256_mul_ps(v2, idv));
    __m256i q3 = krt_qz_round127_avx2(_mm256_mul_ps(v3, idv));
    /* packs interleave 128-bit lanes; the permute restores element order */
    __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
    _mm256_storeu_si256((__m256i *)y->qs, p);
}

/* q = clamp(trunc(v*id + 16.5), 0, 31) as int32 lanes. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_qz_q5_avx2(__m256 v, __m256 idv) {
    __m256 t = _mm256_add_ps(_mm256_mul_ps(v, idv), _mm256_set1_ps(16.5f));
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), _mm256_set1_ps(31.0f));
    return _mm256_cvttps_epi32(t);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_qz_q5_0_avx2(krt_block_q5_0 *y, const float *x) {
    const __m256i absm = _mm256_set1_epi32(0x7fffffff);
    __m256 v0 = _mm256_loadu_ps(x + 0);
    __m256 v1 = _mm256_loadu_ps(x + 8);
    __m256 v2 = _mm256_loadu_ps(x + 16);
    __m256 v3 = _mm256_loadu_ps(x + 24);
    __m256i a0 = _mm256_and_si256(_mm256_castps_si256(v0), absm);
    __m256i a1 = _mm256_and_si256(_mm256_castps_si256(v1), absm);
    __m256i a2 = _mm256_and_si256(_mm256_castps_si256(v2), absm);
    __m256i a3 = _mm256_and_si256(_mm256_castps_si256(v3), absm);
    __m256i m = _mm256_max_epu32(_mm256_max_epu32(a0, a1), _mm256_max_epu32(a2, a3));
    uint32_t amaxb = krt_qz_hmax_epu32_avx2(m);
    if (amaxb >= 0x7f800000u) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        uint32_t ones = 0xffffffffu;
        memcpy(y->qh, &ones, 4);
        _mm_storeu_si128((__m128i *)y->qs, _mm_setzero_si128());
        return;
    }
    float max = 0.0f;
    if (amaxb != 0) {
        __m256i mb = _mm256_set1_epi32((int)amaxb);
        uint32_t e = (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a0, mb)));
        e |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a1, mb))) << 8;
        e |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a2, mb))) << 16;
        e |= (uint32_t)_mm256_movemask_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(a3, mb))) << 24;
        max = x[__builtin_ctz(e)];
    }
    float d = max / -16.0f;
    float id = krt_qz_inv(d);
    y->d = krt_qz_fp16_avx2(d);
    __m256 idv = _mm256_set1_ps(id);
    __m256i q0 = krt_qz_q5_avx2(v0, idv);
    __m256i q1 = krt_qz_q5_avx2(v1, idv);
    __m256i q2 = krt_qz_q5_avx2(v2, idv);
    __m256i q3 = krt_qz_q5_avx2(v3, idv);
    __m256i p = _mm256_packus_epi16(_mm256_packs_epi32(q0, q1), _mm256_packs_epi32(q2, q3));
    p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7)); /* q[0..31] */
    uint32_t qh = (uint32_t)_mm256_movemask_epi8(_mm256_slli_epi16(p, 3)); /* bit 4 -> bit 7 */
    __m128i lo = _mm_and_si128(_mm256_castsi256_si128(p), _mm_set1_epi8(0x0f));
    __m128i hi = _mm_and_si128(_mm_slli_epi16(_mm256_extracti128_si256(p, 1), 4), _mm_set1_epi8((char)0xf0));
    _mm_storeu_si128((__m128i *)y->qs, _mm_or_si128(lo, hi));
    memcpy(y->qh, &qh, 4);
}

/* ---------------- AVX-512 ---------------- */

KRT_TARGET_AVX512 KRT_INLINE __m512i krt_qz_round127_avx512(__m512 v) {
    __m512 t = _mm512_roundscale_ps(v, _MM_FROUND_TO_ZERO | _MM_FROUND_NO_EXC);
    __m512 f = _mm512_abs_ps(_mm512_sub_ps(v, t));
    __mmask16 m = _mm512_cmp_ps_mask(f, _mm512_set1_ps(0.5f), _CMP_GE_OQ);
    __m512 one = _mm512_castsi512_ps(_mm512_ternarylogic_epi32(
        _mm512_castps_si512(v), _mm512_set1_epi32((int)0x80000000u), _mm512_set1_epi32(0x3f800000),
        0xea)); /* (v & sign) | 1.0f */
    t = _mm512_mask_add_ps(t, m, t, one);
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_set1_ps(-127.0f)), _mm512_set1_ps(127.0f));
    return _mm512_cvttps_epi32(t);
}

KRT_TARGET_AVX512 KRT_INLINE uint16_t krt_qz_fp16_avx512(float d) {
    return (uint16_t)_mm_extract_epi16(_mm_cvtps_ph(_mm_set_ss(d), 0), 0);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_qz_q8_0_avx512(krt_block_q8_0 *y, const float *x) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512 v0 = _mm512_loadu_ps(x + 0);
    __m512 v1 = _mm512_loadu_ps(x + 16);
    __m512i a0 = _mm512_and_si512(_mm512_castps_si512(v0), absm);
    __m512i a1 = _mm512_and_si512(_mm512_castps_si512(v1), absm);
    uint32_t amaxb = (uint32_t)_mm512_reduce_max_epu32(_mm512_max_epu32(a0, a1));
    if (amaxb >= 0x7f800000u) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        _mm256_storeu_si256((__m256i *)y->qs, _mm256_setzero_si256());
        return;
    }
    float d = krt_qz_float(amaxb) / 127.0f;
    float id = krt_qz_inv(d);
    y->d = krt_qz_fp16_avx512(d);
    __m512 idv = _mm512_set1_ps(id);
    __m128i q0 = _mm512_cvtepi32_epi8(krt_qz_round127_avx512(_mm512_mul_ps(v0, idv)));
    __m128i q1 = _mm512_cvtepi32_epi8(krt_qz_round127_avx512(_mm512_mul_ps(v1, idv)));
    _mm_storeu_si128((__m128i *)(y->qs + 0), q0);
    _mm_storeu_si128((__m128i *)(y->qs + 16), q1);
}

KRT_TARGET_AVX512 KRT_INLINE __m512i krt_qz_q5_avx512(__m512 v, __m512 idv) {
    __m512 t = _mm512_add_ps(_mm512_mul_ps(v, idv), _mm512_set1_ps(16.5f));
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), _mm512_set1_ps(31.0f));
    return _mm512_cvttps_epi32(t);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_qz_q5_0_avx512(krt_block_q5_0 *y, const float *x) {
    const __m512i absm = _mm512_set1_epi32(0x7fffffff);
    __m512 v0 = _mm512_loadu_ps(x + 0);
    __m512 v1 = _mm512_loadu_ps(x + 16);
    __m512i a0 = _mm512_and_si512(_mm512_castps_si512(v0), absm);
    __m512i a1 = _mm512_and_si512(_mm512_castps_si512(v1), absm);
    uint32_t amaxb = (uint32_t)_mm512_reduce_max_epu32(_mm512_max_epu32(a0, a1));
    if (amaxb >= 0x7f800000u) {
        y->d = (uint16_t)KRT_QZ_POISON_D;
        uint32_t ones = 0xffffffffu;
        memcpy(y->qh, &ones, 4);
        _mm_storeu_si128((__m128i *)y->qs, _mm_setzero_si128());
        return;
    }
    float max = 0.0f;
    if (amaxb != 0) {
        __m512i mb = _mm512_set1_epi32((int)amaxb);
        uint32_t e = (uint32_t)_mm512_cmpeq_epi32_mask(a0, mb);
        e |= (uint32_t)_mm512_cmpeq_epi32_mask(a1, mb) << 16;
        max = x[__builtin_ctz(e)];
    }
    float d = max / -16.0f;
    float id = krt_qz_inv(d);
    y->d = krt_qz_fp16_avx512(d);
    __m512 idv = _mm512_set1_ps(id);
    __m512i q0 = krt_qz_q5_avx512(v0, idv); /* elements 0..15  */
    __m512i q1 = krt_qz_q5_avx512(v1, idv); /* elements 16..31 */
    const __m512i c16 = _mm512_set1_epi32(16);
    uint32_t qh = (uint32_t)_mm512_test_epi32_mask(q0, c16) |
                  ((uint32_t)_mm512_test_epi32_mask(q1, c16) << 16);
    const __m512i c15 = _mm512_set1_epi32(15);
    __m512i nib = _mm512_or_si512(_mm512_and_si512(q0, c15), _mm512_slli_epi32(_mm512_and_si512(q1, c15), 4));
    _mm_storeu_si128((__m128i *)y->qs, _mm512_cvtepi32_epi8(nib));
    memcpy(y->qh, &qh, 4);
}

#endif /* KRT_X86 */

#endif /* KRT_QUANT_H */
