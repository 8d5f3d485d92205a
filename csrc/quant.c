/* csrc/quant.c - Q8_0 / Q5_0 quantize and dequantize (slice: blocks b0..b1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline, in krt_quant.h and
 * krt_common.h) so that c2goasm can translate the object code. Three variants per kernel:
 * _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512).
 *
 * Quantizers follow ggml's reference rules exactly and every variant is byte-identical to
 * _ref, including the rounding of ties (half away from zero, like roundf) and the fp16 rounding
 * of d (nearest even). NaN / Inf: a block holding any NaN or +-Inf is "poisoned": d = 0x7e00
 * (fp16 NaN) and every quant encodes 0, so its dequantized values and every GEMV output that
 * uses it are NaN. The remaining edge cases are listed in krt_quant.h.
 * Dequantize: value = fp32(d) * q (Q8_0) or fp32(d) * (q - 16) (Q5_0), one IEEE product per
 * value, so every variant gives identical floats.
 */
#include "krt_quant.h"

/* ---------------- scalar ---------------- */

void krt_quantize_q8_0_ref(krt_block_q8_0 *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_qz_q8_0_ref(dst + b, src + b * KRT_QK);
}

void krt_quantize_q5_0_ref(krt_block_q5_0 *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_qz_q5_0_ref(dst + b, src + b * KRT_QK);
}

void krt_dequantize_q8_0_ref(float *dst, const krt_block_q8_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        float d = krt_fp16_to_fp32(src[b].d);
        float *y = dst + b * KRT_QK;
        for (int j = 0; j < KRT_QK; j++) y[j] = d * (float)src[b].qs[j];
    }
}

void krt_dequantize_q5_0_ref(float *dst, const krt_block_q5_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        float d = krt_fp16_to_fp32(src[b].d);
        uint32_t qh;
        memcpy(&qh, src[b].qh, 4);
        float *y = dst + b * KRT_QK;
        for (int j = 0; j < KRT_QK / 2; j++) {
            int q0 = (src[b].qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            int q1 = (src[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = d * (float)(q0 - 16);
            y[j + KRT_QK / 2] = d * (float)(q1 - 16);
        }
    }
}

#ifdef KRT_X86

/* ---------------- AVX2 ---------------- */

KRT_TARGET_AVX2 void krt_quantize_q8_0_avx2(krt_block_q8_0 *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_qz_q8_0_avx2(dst + b, src + b * KRT_QK);
}

KRT_TARGET_AVX2 void krt_quantize_q5_0_avx2(krt_block_q5_0 *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_qz_q5_0_avx2(dst + b, src + b * KRT_QK);
}

KRT_TARGET_AVX2 void krt_dequantize_q8_0_avx2(float *dst, const krt_block_q8_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].d));
        const int8_t *q = src[b].qs;
        float *y = dst + b * KRT_QK;
        for (int j = 0; j < KRT_QK; j += 8) {
            __m256i qi = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(q + j)));
            _mm256_storeu_ps(y + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(qi)));
        }
    }
}

KRT_TARGET_AVX2 void krt_dequantize_q5_0_avx2(float *dst, const krt_block_q5_0 *src, int64_t b0, int64_t b1) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    for (int64_t b = b0; b < b1; b++) {
        __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].d));
        uint32_t qh;
        memcpy(&qh, src[b].qh, 4);
        __m128i qs = _mm_loadu_si128((const __m128i *)src[b].qs);
        __m256i nib = _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(qs),
                                                               _mm_srli_epi16(qs, 4), 1),
                                       _mm256_set1_epi8(0x0f));
        __m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf), bits);
        hb = _mm256_and_si256(_mm256_cmpeq_epi8(hb, bits), _mm256_set1_epi8(0x10));
        __m256i q = _mm256_sub_epi8(_mm256_or_si256(nib, hb), _mm256_set1_epi8(16)); /* -16..15 */
        float *y = dst + b * KRT_QK;
        __m128i q0 = _mm256_castsi256_si128(q), q1 = _mm256_extracti128_si256(q, 1);
        _mm256_storeu_ps(y + 0, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0))));
        _mm256_storeu_ps(y + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8)))));
        _mm256_storeu_ps(y + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1))));
        _mm256_storeu_ps(y + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8)))));
    }
}

/* ---------------- AVX-512 ---------------- */

KRT_TARGET_AVX512 void krt_quantize_q8_0_avx512(krt_block_q8_0 *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_qz_q8_0_avx512(dst + b, src + b * KRT_QK);
}

KRT_TARGET_AVX512 void krt_quantize_q5_0_avx512(krt_block_q5_0 *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_qz_q5_0_avx512(dst + b, src + b * KRT_QK);
}

KRT_TARGET_AVX512 void krt_dequantize_q8_0_avx512(float *dst, const krt_block_q8_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].d));
        const int8_t *q = src[b].qs;
        float *y = dst + b * KRT_QK;
        __m512i q0 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + 0)));
        __m512i q1 = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(q + 16)));
        _mm512_storeu_ps(y + 0, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q0)));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q1)));
    }
}

KRT_TARGET_AVX512 void krt_dequantize_q5_0_avx512(float *dst, const krt_block_q5_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].d));
        uint32_t qh;
        memcpy(&qh, src[b].qh, 4);
        __m128i qs = _mm_loadu_si128((const __m128i *)src[b].qs);
        __m512i n0 = _mm512_and_si512(_mm512_cvtepu8_epi32(qs), _mm512_set1_epi32(0x0f));
        __m512i n1 = _mm512_cvtepu8_epi32(_mm_and_si128(_mm_srli_epi16(qs, 4), _mm_set1_epi8(0x0f)));
        /* q - 16 = nibble - 16, plus 16 where the qh bit is set */
        n0 = _mm512_sub_epi32(n0, _mm512_set1_epi32(16));
        n1 = _mm512_sub_epi32(n1, _mm512_set1_epi32(16));
        n0 = _mm512_mask_add_epi32(n0, (__mmask16)(qh & 0xffffu), n0, _mm512_set1_epi32(16));
        n1 = _mm512_mask_add_epi32(n1, (__mmask16)(qh >> 16), n1, _mm512_set1_epi32(16));
        float *y = dst + b * KRT_QK;
        _mm512_storeu_ps(y + 0, _mm512_mul_ps(d, _mm512_cvtepi32_ps(n0)));
        _mm512_storeu_ps(y + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(n1)));
    }
}

#endif /* KRT_X86 */
