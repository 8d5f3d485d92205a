/* csrc/iquant.c - IQ4_NL (ggml's non-linear 4-bit type, blocks of 32): quantize, dequantize and the
 * decode GEMV against Q8_0 activations (the prefill GEMM is in csrc/gemm.c with the other types).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no libm
 * calls and no calls out of a function (helpers are static inline) so that c2goasm can translate
 * the object code. Three variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512
 * (KRT_TARGET_AVX512, VNNI).
 *
 * Quantizer: krt_iquant.h (an offline step: the SIMD variants run the scalar definition compiled
 * for their ISA, so every variant gives the same bytes). Dequantizer: ggml's dequantize_row_iq4_nl,
 * d * kvalues_iq4nl[q], one rounding per value in every variant; a NaN / Inf d gives NaN / Inf
 * values (each value stands alone, as dequantize_q4_0). GEMV: krt_kdot.h's krt_kd_iq4_nl defines
 * the result; the SIMD variants are Q4_0's drivers (krt_gvpack.h) with the nibble looked up in the
 * table by vpshufb: _avx512 feeds vpdpbusd the unsigned bytes value + 128 and starts the
 * accumulator at -128 * sum4(x); _avx2 multiplies |w| by sign(x, w) (vpmaddubsw) as Q8_0 does.
 * Non-finite scales: as every GEMV (krt_kdot.h), a NaN / Inf d_w or d_x makes the row NaN.
 *
 * Speed (csrc/tests/bench_quant, 1 thread, 2 vCPU Zen 4, measured while other jobs loaded the
 * machine: load average 7-10, so only same-run ratios mean much). From DRAM, GB/s of weights
 * (median of rounds), IQ4_NL against Q4_0 in the same runs:
 *            896x4864 avx512  2048x2048 avx512   896x4864 avx2   2048x2048 avx2
 *   IQ4_NL   15.7-15.9        16.6-17.4          15.5-16.4       15.9-17.2
 *   Q4_0     15.6-17.3        17.1-17.7          17.8-20.0       21.5-22.5
 * so _avx512 streams as Q4_0's (documented at 94-102% of the streaming read on a quiet machine,
 * csrc/gemv_k.c; here both read 48-60% of a -cpuclock stream). L2-resident (-cached): _avx512
 * 27.5-31.1 GB/s (Q4_0 27.3-30.3), not compute-bound; _avx2 16.4-17.1 GB/s (Q4_0 22.4-23.2):
 * compute-bound at about 2/3 of a 25 GB/s stream (two vpsignb and a vpshufb per row and block
 * more than Q4_0, which ggml's AVX2 IQ4_NL dot pays as well).
 */
#include "krt_kdot.h"
#include "krt_gvpack.h"

/* ---------------- scalar ---------------- */

void krt_quantize_iq4_nl_ref(krt_block_iq4_nl *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_iq_q4nl_ref(dst + b, src + b * KRT_QK);
}

void krt_dequantize_iq4_nl_ref(float *dst, const krt_block_iq4_nl *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_fp16_to_fp32(src[b].d);
        float *y = dst + b * KRT_QK;
        for (int j = 0; j < KRT_QK / 2; j++) {
            y[j] = d * (float)krt_iq4nl_value(src[b].qs[j] & 0x0f);
            y[j + KRT_QK / 2] = d * (float)krt_iq4nl_value(src[b].qs[j] >> 4);
        }
    }
}

void krt_gemv_iq4_nl_ref(float *y, const krt_block_iq4_nl *w, const krt_block_q8_0 *x, const float *bias, int64_t cols,
                         int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK;
    for (int64_t r = r0; r < r1; r++) {
        float acc = krt_kd_iq4_nl(w + r * nb, x, nb);
        y[r] = bias ? acc + bias[r] : acc;
    }
}

#ifdef KRT_X86

/* The block's 32 values as signed bytes: [elements 0..15 | 16..31]. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_iq_vals32_avx2(const uint8_t *qs) {
    const __m128i v = _mm_loadu_si128((const __m128i *)qs), m4 = _mm_set1_epi8(0x0f), t = krt_iq4nl_s8();
    const __m128i lo = _mm_shuffle_epi8(t, _mm_and_si128(v, m4));
    const __m128i hi = _mm_shuffle_epi8(t, _mm_and_si128(_mm_srli_epi16(v, 4), m4));
    return _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
}

/* ---------------- AVX2 ---------------- */

KRT_TARGET_AVX2 void krt_quantize_iq4_nl_avx2(krt_block_iq4_nl *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_iq_q4nl_ref(dst + b, src + b * KRT_QK);
}

KRT_TARGET_AVX2 void krt_dequantize_iq4_nl_avx2(float *dst, const krt_block_iq4_nl *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].d));
        const __m256i q = krt_iq_vals32_avx2(src[b].qs);
        __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
        for (int i = 0; i < 4; i++) {
            const __m128i v = i & 1 ? _mm_srli_si128(h[i / 2], 8) : h[i / 2];
            _mm256_storeu_ps(dst + b * KRT_QK + 8 * i, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v))));
        }
    }
}

KRT_TARGET_AVX2 void krt_gemv_iq4_nl_avx2(float *y, const krt_block_iq4_nl *w, const krt_block_q8_0 *x,
                                          const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx2(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_IQ4_NL);
}

/* ---------------- AVX-512 ---------------- */

KRT_TARGET_AVX512 void krt_quantize_iq4_nl_avx512(krt_block_iq4_nl *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_iq_q4nl_ref(dst + b, src + b * KRT_QK);
}

KRT_TARGET_AVX512 void krt_dequantize_iq4_nl_avx512(float *dst, const krt_block_iq4_nl *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].d));
        const __m256i q = krt_iq_vals32_avx2(src[b].qs);
        _mm512_storeu_ps(dst + b * KRT_QK, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_castsi256_si128(q)))));
        _mm512_storeu_ps(dst + b * KRT_QK + 16,
                         _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm256_extracti128_si256(q, 1)))));
    }
}

KRT_TARGET_AVX512 void krt_gemv_iq4_nl_avx512(float *y, const krt_block_iq4_nl *w, const krt_block_q8_0 *x,
                                              const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx512(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_IQ4_NL);
}

#endif /* KRT_X86 */
