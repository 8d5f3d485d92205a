/* csrc/kquant.c - quantize / dequantize for Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K and Q8_K.
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no
 * libm calls and no calls out of a function (block helpers are static inline, in krt_kquant.h)
 * so that c2goasm can translate the object code. Three variants per kernel: _ref (scalar),
 * _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512). Slices count blocks: 32 values per
 * block for Q4_0 / Q4_1 / Q5_1, 256 per super-block for the K types.
 *
 * Quantizers: ggml's reference algorithms, byte-identical to ggml on every finite input, and
 * every variant byte-identical to _ref (krt_kquant.h lists the rules, NaN / Inf included). The
 * K-quant weight quantizers (Q4_K, Q5_K, Q6_K) are an offline step (writing a model file), so
 * their SIMD variants run the scalar definition compiled for the variant's ISA; Q8_K (the
 * activations of every K-quant GEMV / GEMM) has real SIMD code.
 * Dequantizers: ggml's dequantize_row_<t> operation by operation (two roundings where ggml has
 * a product and a sum: d*q + m, d*sc*q - dmin*m; never an FMA), so every variant gives the same
 * floats as ggml:
 *   Q4_0: d * (q - 8)          Q4_1 / Q5_1: q*d + m
 *   Q4_K / Q5_K: (d*sc)*q - (dmin*m) per sub-block of 32
 *   Q6_K: (d*sc)*(q - 32) per sub-block of 16        Q8_K: d * qs
 * NaN / +-Inf in d, m or dmin (Q8_K: the fp32 d): each value is that expression in IEEE fp32 on
 * its own (Inf * 0 = NaN, Inf - Inf = NaN, NaN propagates), the same class and bits in every
 * variant; no poisoning here, unlike the GEMV / GEMM rule of krt_kdot.h, since each value stands
 * alone (as dequantize_q8_0 / q5_0, quant.c).
 */
#include "krt_kquant.h"

/* ---------------- scalar ---------------- */

#define KRT_KQ_QUANT_LOOP(blk, fn, n)                                       \
    for (int64_t b = b0; b < b1; b++) fn(dst + b, src + b * (int64_t)(n));

void krt_quantize_q4_0_ref(krt_block_q4_0 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_0, krt_kq_q4_0_ref, KRT_QK)
}
void krt_quantize_q4_1_ref(krt_block_q4_1 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_1, krt_kq_q4_1_ref, KRT_QK)
}
void krt_quantize_q5_1_ref(krt_block_q5_1 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q5_1, krt_kq_q5_1_ref, KRT_QK)
}
void krt_quantize_q4_K_ref(krt_block_q4_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_K, krt_kq_q4_K_ref, KRT_QK_K)
}
void krt_quantize_q5_K_ref(krt_block_q5_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q5_K, krt_kq_q5_K_ref, KRT_QK_K)
}
void krt_quantize_q6_K_ref(krt_block_q6_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q6_K, krt_kq_q6_K_ref, KRT_QK_K)
}
void krt_quantize_q8_K_ref(krt_block_q8_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q8_K, krt_kq_q8_K_ref, KRT_QK_K)
}

void krt_dequantize_q4_0_ref(float *dst, const krt_block_q4_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_fp16_to_fp32(src[b].d);
        float *y = dst + b * KRT_QK;
        for (int j = 0; j < KRT_QK / 2; j++) {
            y[j] = (float)((src[b].qs[j] & 0x0f) - 8) * d;
            y[j + KRT_QK / 2] = (float)((src[b].qs[j] >> 4) - 8) * d;
        }
    }
}

void krt_dequantize_q4_1_ref(float *dst, const krt_block_q4_1 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_fp16_to_fp32(src[b].d), m = krt_fp16_to_fp32(src[b].m);
        float *y = dst + b * KRT_QK;
        for (int j = 0; j < KRT_QK / 2; j++) {
            y[j] = (float)(src[b].qs[j] & 0x0f) * d + m;
            y[j + KRT_QK / 2] = (float)(src[b].qs[j] >> 4) * d + m;
        }
    }
}

void krt_dequantize_q5_1_ref(float *dst, const krt_block_q5_1 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_fp16_to_fp32(src[b].d), m = krt_fp16_to_fp32(src[b].m);
        uint32_t qh;
        memcpy(&qh, src[b].qh, 4);
        float *y = dst + b * KRT_QK;
        for (int j = 0; j < KRT_QK / 2; j++) {
            int q0 = (src[b].qs[j] & 0x0f) | (int)(((qh >> j) & 1u) << 4);
            int q1 = (src[b].qs[j] >> 4) | (int)(((qh >> (j + 16)) & 1u) << 4);
            y[j] = (float)q0 * d + m;
            y[j + KRT_QK / 2] = (float)q1 * d + m;
        }
    }
}

void krt_dequantize_q4_K_ref(float *dst, const krt_block_q4_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const krt_block_q4_K *x = src + b;
        const float d = krt_fp16_to_fp32(x->d), min = krt_fp16_to_fp32(x->dmin);
        float *y = dst + b * KRT_QK_K;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            krt_kq_scale_min(j, x->scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            const uint8_t *q = x->qs + 32 * (j / 2);
            for (int l = 0; l < 32; l++) {
                int v = j & 1 ? q[l] >> 4 : q[l] & 0x0f;
                y[32 * j + l] = d1 * (float)v - m1;
            }
        }
    }
}

void krt_dequantize_q5_K_ref(float *dst, const krt_block_q5_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const krt_block_q5_K *x = src + b;
        const float d = krt_fp16_to_fp32(x->d), min = krt_fp16_to_fp32(x->dmin);
        float *y = dst + b * KRT_QK_K;
        for (int j = 0; j < 8; j++) {
            uint8_t sc, m;
            krt_kq_scale_min(j, x->scales, &sc, &m);
            const float d1 = d * (float)sc, m1 = min * (float)m;
            const uint8_t *q = x->qs + 32 * (j / 2);
            for (int l = 0; l < 32; l++) {
                int v = (j & 1 ? q[l] >> 4 : q[l] & 0x0f) | (((x->qh[l] >> j) & 1) << 4);
                y[32 * j + l] = d1 * (float)v - m1;
            }
        }
    }
}

/* The 6-bit quant (0..63) of element e of a Q6_K block. */
KRT_INLINE int krt_kq_q6(const krt_block_q6_K *x, int e) {
    const int h = e / 128, k = (e % 128) / 32, l = e % 32;
    const uint8_t lb = x->ql[64 * h + l + 32 * (k & 1)];
    return (k < 2 ? lb & 0x0f : lb >> 4) | (((x->qh[32 * h + l] >> (2 * k)) & 3) << 4);
}

void krt_dequantize_q6_K_ref(float *dst, const krt_block_q6_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const krt_block_q6_K *x = src + b;
        const float d = krt_fp16_to_fp32(x->d);
        float *y = dst + b * KRT_QK_K;
        for (int e = 0; e < KRT_QK_K; e++) y[e] = d * (float)x->scales[e / 16] * (float)(krt_kq_q6(x, e) - 32);
    }
}

void krt_dequantize_q8_K_ref(float *dst, const krt_block_q8_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        float *y = dst + b * KRT_QK_K;
        for (int j = 0; j < KRT_QK_K; j++) y[j] = src[b].d * (float)src[b].qs[j];
    }
}

#ifdef KRT_X86

/* ---------------- AVX2 ---------------- */

KRT_TARGET_AVX2 void krt_quantize_q4_0_avx2(krt_block_q4_0 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_0, krt_kq_q4_0_avx2, KRT_QK)
}
KRT_TARGET_AVX2 void krt_quantize_q4_1_avx2(krt_block_q4_1 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_1, krt_kq_q4_1_avx2, KRT_QK)
}
KRT_TARGET_AVX2 void krt_quantize_q5_1_avx2(krt_block_q5_1 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q5_1, krt_kq_q5_1_avx2, KRT_QK)
}
KRT_TARGET_AVX2 void krt_quantize_q4_K_avx2(krt_block_q4_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_K, krt_kq_q4_K_ref, KRT_QK_K)
}
KRT_TARGET_AVX2 void krt_quantize_q5_K_avx2(krt_block_q5_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q5_K, krt_kq_q5_K_ref, KRT_QK_K)
}
KRT_TARGET_AVX2 void krt_quantize_q6_K_avx2(krt_block_q6_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q6_K, krt_kq_q6_K_ref, KRT_QK_K)
}
KRT_TARGET_AVX2 void krt_quantize_q8_K_avx2(krt_block_q8_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q8_K, krt_kq_q8_K_avx2, KRT_QK_K)
}

/* 32 nibbles of 16 bytes: low nibbles (elements 0..15) then high nibbles (16..31), as bytes. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_kq_nib32_avx2(const uint8_t *qs) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_inserti128_si256(_mm256_castsi128_si256(v), _mm_srli_epi16(v, 4), 1),
                            _mm256_set1_epi8(0x0f));
}

/* The 5th bits of qh as 0x10 bytes, elements 0..31. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_kq_hbit32_avx2(const uint8_t *qh) {
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1,
                                          2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    uint32_t h;
    memcpy(&h, qh, 4);
    __m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(_mm256_set1_epi32((int)h), shuf), bits);
    return _mm256_and_si256(_mm256_cmpeq_epi8(hb, bits), _mm256_set1_epi8(0x10));
}

/* y[0..32) = (float)q * d, then + m (op 1) or - m (op 2); q unsigned bytes, or signed (sgn). */
KRT_TARGET_AVX2 KRT_INLINE void krt_kq_store32_avx2(float *y, __m256i q, __m256 d, __m256 m, int sgn, int op) {
    __m128i h[2] = {_mm256_castsi256_si128(q), _mm256_extracti128_si256(q, 1)};
    for (int i = 0; i < 4; i++) {
        __m128i b = i & 1 ? _mm_srli_si128(h[i / 2], 8) : h[i / 2];
        __m256i v = sgn ? _mm256_cvtepi8_epi32(b) : _mm256_cvtepu8_epi32(b);
        __m256 f = _mm256_mul_ps(_mm256_cvtepi32_ps(v), d);
        _mm256_storeu_ps(y + 8 * i, op == 1 ? _mm256_add_ps(f, m) : op == 2 ? _mm256_sub_ps(f, m) : f);
    }
}

KRT_TARGET_AVX2 void krt_dequantize_q4_0_avx2(float *dst, const krt_block_q4_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].d));
        __m256i q = _mm256_sub_epi8(krt_kq_nib32_avx2(src[b].qs), _mm256_set1_epi8(8));
        krt_kq_store32_avx2(dst + b * KRT_QK, q, d, d, 1, 0);
    }
}

KRT_TARGET_AVX2 void krt_dequantize_q4_1_avx2(float *dst, const krt_block_q4_1 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].d));
        __m256 m = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].m));
        krt_kq_store32_avx2(dst + b * KRT_QK, krt_kq_nib32_avx2(src[b].qs), d, m, 0, 1);
    }
}

KRT_TARGET_AVX2 void krt_dequantize_q5_1_avx2(float *dst, const krt_block_q5_1 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m256 d = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].d));
        __m256 m = _mm256_cvtph_ps(_mm_set1_epi16((short)src[b].m));
        __m256i q = _mm256_or_si256(krt_kq_nib32_avx2(src[b].qs), krt_kq_hbit32_avx2(src[b].qh));
        krt_kq_store32_avx2(dst + b * KRT_QK, q, d, m, 0, 1);
    }
}

/* Sub-blocks j (low nibbles of q32) and j+1 (high nibbles) of a Q4_K / Q5_K block; h5 (or 0)
 * holds the 5th bits of both as 0x10 in bytes [0,32) (sub-block j) and [32,64) (j+1). */
KRT_TARGET_AVX2 KRT_INLINE void krt_kq_k45pair_avx2(float *y, const uint8_t *q32, const uint8_t *scales, int j,
                                                   float d, float min, __m256i h0, __m256i h1) {
    uint8_t sc, m;
    __m256i v = _mm256_loadu_si256((const __m256i *)q32);
    __m256i lo = _mm256_or_si256(_mm256_and_si256(v, _mm256_set1_epi8(0x0f)), h0);
    __m256i hi = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(v, 4), _mm256_set1_epi8(0x0f)), h1);
    krt_kq_scale_min(j, scales, &sc, &m);
    krt_kq_store32_avx2(y, lo, _mm256_set1_ps(d * (float)sc), _mm256_set1_ps(min * (float)m), 0, 2);
    krt_kq_scale_min(j + 1, scales, &sc, &m);
    krt_kq_store32_avx2(y + 32, hi, _mm256_set1_ps(d * (float)sc), _mm256_set1_ps(min * (float)m), 0, 2);
}

KRT_TARGET_AVX2 void krt_dequantize_q4_K_avx2(float *dst, const krt_block_q4_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const krt_block_q4_K *x = src + b;
        const float d = krt_fp16_to_fp32(x->d), min = krt_fp16_to_fp32(x->dmin);
        for (int p = 0; p < 4; p++)
            krt_kq_k45pair_avx2(dst + b * KRT_QK_K + 64 * p, x->qs + 32 * p, x->scales, 2 * p, d, min,
                                _mm256_setzero_si256(), _mm256_setzero_si256());
    }
}

KRT_TARGET_AVX2 void krt_dequantize_q5_K_avx2(float *dst, const krt_block_q5_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const krt_block_q5_K *x = src + b;
        const float d = krt_fp16_to_fp32(x->d), min = krt_fp16_to_fp32(x->dmin);
        __m256i qh = _mm256_loadu_si256((const __m256i *)x->qh);
        for (int p = 0; p < 4; p++) {
            /* bit 2p -> 0x10 for sub-block 2p, bit 2p+1 for 2p+1 */
            __m256i h0 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * p), 4), _mm256_set1_epi8(0x10));
            __m256i h1 = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * p + 1), 4), _mm256_set1_epi8(0x10));
            krt_kq_k45pair_avx2(dst + b * KRT_QK_K + 64 * p, x->qs + 32 * p, x->scales, 2 * p, d, min, h0, h1);
        }
    }
}

KRT_TARGET_AVX2 void krt_dequantize_q6_K_avx2(float *dst, const krt_block_q6_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const krt_block_q6_K *x = src + b;
        const float d = krt_fp16_to_fp32(x->d);
        for (int h = 0; h < 2; h++) {
            __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
            for (int k = 0; k < 4; k++) {
                __m256i l = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32 * (k & 1)));
                l = k < 2 ? l : _mm256_srli_epi16(l, 4);
                l = _mm256_and_si256(l, _mm256_set1_epi8(0x0f));
                __m256i hb = _mm256_and_si256(_mm256_slli_epi16(_mm256_srli_epi16(qh, 2 * k), 4), _mm256_set1_epi8(0x30));
                __m256i q = _mm256_sub_epi8(_mm256_or_si256(l, hb), _mm256_set1_epi8(32));
                float *y = dst + b * KRT_QK_K + 128 * h + 32 * k;
                const int is = 8 * h + 2 * k; /* sub-blocks of 16: elements 0..15 and 16..31 */
                __m256 d0 = _mm256_set1_ps(d * (float)x->scales[is]);
                __m256 d1 = _mm256_set1_ps(d * (float)x->scales[is + 1]);
                __m128i h0 = _mm256_castsi256_si128(q), h1 = _mm256_extracti128_si256(q, 1);
                _mm256_storeu_ps(y + 0, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h0))));
                _mm256_storeu_ps(y + 8, _mm256_mul_ps(d0, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(h0, 8)))));
                _mm256_storeu_ps(y + 16, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(h1))));
                _mm256_storeu_ps(y + 24, _mm256_mul_ps(d1, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(h1, 8)))));
            }
        }
    }
}

KRT_TARGET_AVX2 void krt_dequantize_q8_K_avx2(float *dst, const krt_block_q8_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m256 d = _mm256_set1_ps(src[b].d);
        for (int j = 0; j < KRT_QK_K; j += 8) {
            __m256i q = _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(src[b].qs + j)));
            _mm256_storeu_ps(dst + b * KRT_QK_K + j, _mm256_mul_ps(d, _mm256_cvtepi32_ps(q)));
        }
    }
}

/* ---------------- AVX-512 ---------------- */

KRT_TARGET_AVX512 void krt_quantize_q4_0_avx512(krt_block_q4_0 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_0, krt_kq_q4_0_avx512, KRT_QK)
}
KRT_TARGET_AVX512 void krt_quantize_q4_1_avx512(krt_block_q4_1 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_1, krt_kq_q4_1_avx512, KRT_QK)
}
KRT_TARGET_AVX512 void krt_quantize_q5_1_avx512(krt_block_q5_1 *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q5_1, krt_kq_q5_1_avx512, KRT_QK)
}
KRT_TARGET_AVX512 void krt_quantize_q4_K_avx512(krt_block_q4_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q4_K, krt_kq_q4_K_ref, KRT_QK_K)
}
KRT_TARGET_AVX512 void krt_quantize_q5_K_avx512(krt_block_q5_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q5_K, krt_kq_q5_K_ref, KRT_QK_K)
}
KRT_TARGET_AVX512 void krt_quantize_q6_K_avx512(krt_block_q6_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q6_K, krt_kq_q6_K_ref, KRT_QK_K)
}
KRT_TARGET_AVX512 void krt_quantize_q8_K_avx512(krt_block_q8_K *dst, const float *src, int64_t b0, int64_t b1) {
    KRT_KQ_QUANT_LOOP(q8_K, krt_kq_q8_K_avx512, KRT_QK_K)
}

/* 32 quants as bytes (elements 0..31 in order: low nibbles, then high nibbles) -> floats. */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_kq_nib32_avx512(const uint8_t *qs, int j16) {
    __m128i v = _mm_loadu_si128((const __m128i *)qs);
    __m512i w = _mm512_cvtepu8_epi32(j16 ? _mm_srli_epi16(v, 4) : v);
    return _mm512_and_si512(w, _mm512_set1_epi32(0x0f));
}

KRT_TARGET_AVX512 void krt_dequantize_q4_0_avx512(float *dst, const krt_block_q4_0 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].d));
        for (int h = 0; h < 2; h++) {
            __m512i q = _mm512_sub_epi32(krt_kq_nib32_avx512(src[b].qs, h), _mm512_set1_epi32(8));
            _mm512_storeu_ps(dst + b * KRT_QK + 16 * h, _mm512_mul_ps(_mm512_cvtepi32_ps(q), d));
        }
    }
}

KRT_TARGET_AVX512 void krt_dequantize_q4_1_avx512(float *dst, const krt_block_q4_1 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].d));
        __m512 m = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].m));
        for (int h = 0; h < 2; h++) {
            __m512i q = krt_kq_nib32_avx512(src[b].qs, h);
            _mm512_storeu_ps(dst + b * KRT_QK + 16 * h, _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(q), d), m));
        }
    }
}

KRT_TARGET_AVX512 void krt_dequantize_q5_1_avx512(float *dst, const krt_block_q5_1 *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m512 d = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].d));
        __m512 m = _mm512_cvtph_ps(_mm256_set1_epi16((short)src[b].m));
        uint32_t qh;
        memcpy(&qh, src[b].qh, 4);
        for (int h = 0; h < 2; h++) {
            __m512i q = krt_kq_nib32_avx512(src[b].qs, h);
            q = _mm512_mask_add_epi32(q, (__mmask16)(qh >> (16 * h)), q, _mm512_set1_epi32(16));
            _mm512_storeu_ps(dst + b * KRT_QK + 16 * h, _mm512_add_ps(_mm512_mul_ps(_mm512_cvtepi32_ps(q), d), m));
        }
    }
}

/* Q4_K / Q5_K: sub-block j, 16 elements at a time. */
KRT_TARGET_AVX512 KRT_INLINE void krt_kq_k45_avx512(float *dst, const uint8_t *qs, const uint8_t *qh, const uint8_t *scales,
                                                   float d, float min) {
    for (int j = 0; j < 8; j++) {
        uint8_t sc, m;
        krt_kq_scale_min(j, scales, &sc, &m);
        const __m512 d1 = _mm512_set1_ps(d * (float)sc), m1 = _mm512_set1_ps(min * (float)m);
        for (int h = 0; h < 2; h++) {
            __m128i v = _mm_loadu_si128((const __m128i *)(qs + 32 * (j / 2) + 16 * h));
            __m512i q = _mm512_and_si512(_mm512_cvtepu8_epi32(j & 1 ? _mm_srli_epi16(v, 4) : v), _mm512_set1_epi32(0x0f));
            if (qh) {
                __m512i hb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(qh + 16 * h)));
                q = _mm512_or_si512(q, _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, j), _mm512_set1_epi32(1)), 4));
            }
            _mm512_storeu_ps(dst + 32 * j + 16 * h, _mm512_sub_ps(_mm512_mul_ps(d1, _mm512_cvtepi32_ps(q)), m1));
        }
    }
}

KRT_TARGET_AVX512 void krt_dequantize_q4_K_avx512(float *dst, const krt_block_q4_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++)
        krt_kq_k45_avx512(dst + b * KRT_QK_K, src[b].qs, NULL, src[b].scales, krt_fp16_to_fp32(src[b].d),
                          krt_fp16_to_fp32(src[b].dmin));
}

KRT_TARGET_AVX512 void krt_dequantize_q5_K_avx512(float *dst, const krt_block_q5_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++)
        krt_kq_k45_avx512(dst + b * KRT_QK_K, src[b].qs, src[b].qh, src[b].scales, krt_fp16_to_fp32(src[b].d),
                          krt_fp16_to_fp32(src[b].dmin));
}

KRT_TARGET_AVX512 void krt_dequantize_q6_K_avx512(float *dst, const krt_block_q6_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const krt_block_q6_K *x = src + b;
        const float d = krt_fp16_to_fp32(x->d);
        for (int s = 0; s < 16; s++) { /* sub-block s: elements 16s..16s+16 */
            const int h = s / 8, k = (s % 8) / 2, l0 = 16 * (s & 1);
            __m512i l = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x->ql + 64 * h + 32 * (k & 1) + l0)));
            l = _mm512_and_si512(k < 2 ? l : _mm512_srli_epi32(l, 4), _mm512_set1_epi32(0x0f));
            __m512i hb = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(x->qh + 32 * h + l0)));
            hb = _mm512_slli_epi32(_mm512_and_si512(_mm512_srli_epi32(hb, 2 * k), _mm512_set1_epi32(3)), 4);
            __m512i q = _mm512_sub_epi32(_mm512_or_si512(l, hb), _mm512_set1_epi32(32));
            __m512 ds = _mm512_set1_ps(d * (float)x->scales[s]);
            _mm512_storeu_ps(dst + b * KRT_QK_K + 16 * s, _mm512_mul_ps(ds, _mm512_cvtepi32_ps(q)));
        }
    }
}

KRT_TARGET_AVX512 void krt_dequantize_q8_K_avx512(float *dst, const krt_block_q8_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        __m512 d = _mm512_set1_ps(src[b].d);
        for (int j = 0; j < KRT_QK_K; j += 16) {
            __m512i q = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(src[b].qs + j)));
            _mm512_storeu_ps(dst + b * KRT_QK_K + j, _mm512_mul_ps(d, _mm512_cvtepi32_ps(q)));
        }
    }
}

#endif /* KRT_X86 */

#undef KRT_KQ_QUANT_LOOP
