/* csrc/rope.c - RoPE (NeoX style, rotate halves) and the KV-cache appends for F32, F16 and Q8_0
 * caches (slice: tokens t0..t1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline; the cos/sin tables
 * are computed once by the caller) so that c2goasm can translate the object code. Three
 * variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512). The
 * SIMD variants share one driver, csrc/rope_driver.inc, included once per variant; only the
 * per-token rotation and the per-row stores are written per ISA. Helpers are prefixed krt_rp_.
 * Each call touches only tokens [t0, t1): rope rewrites the n_heads*head_dim floats of those
 * tokens in place (nothing between heads' rows and the next token's stride), the appends write
 * only cache rows pos0+t0 .. pos0+t1-1 of every KV head. SIMD tails use masked accesses.
 *
 * RoPE NeoX (ggml GGML_ROPE_TYPE_NEOX, used by qwen2): in each head, element i (< head_dim/2)
 * rotates with element i + head_dim/2 by angle pos * theta^(-2i/head_dim):
 *   x0' = x0*cos - x1*sin,  x1' = x0*sin + x1*cos,  cos/sin read from [pos][head_dim/2] tables.
 * head_dim must be even (the Go side checks). _ref rounds both products; the SIMD variants fuse
 * one of them (FMA), so results differ from _ref by at most ~1 ulp of |x0| + |x1|.
 * NaN/Inf: plain IEEE arithmetic on each pair in every variant: NaN in x0 or x1 (or the tables)
 * makes both outputs of the pair NaN; an infinite x gives +-Inf, or NaN where it meets a zero
 * cos/sin (0 * Inf; sin is exactly 0 at position 0) or an infinity of the other sign.
 *
 * KV appends (cache layouts in kernelrt.h): F32 copies bits; F16 rounds to nearest even (F16C
 * vcvtps2ph in the SIMD variants, krt_fp32_to_fp16 in _ref: bit-identical, including NaN ->
 * quiet NaN with the top payload bits and overflow -> Inf); Q8_0 quantizes each 32 values with
 * the krt_quantize_q8_0 rule (csrc/krt_quant.h: byte-identical across variants; a block holding
 * NaN or Inf is stored poisoned, d = NaN, so it reads back as 32 NaNs).
 */
#include "krt_common.h"
#include "krt_quant.h"

void krt_rope_neox_ref(float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                       int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    const int64_t half = head_dim / 2;
    for (int64_t t = t0; t < t1; t++) {
        const float *c = cos_tab + (pos0 + t) * half;
        const float *s = sin_tab + (pos0 + t) * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = x + t * stride + h * head_dim;
            for (int64_t i = 0; i < half; i++) {
                float x0 = xh[i], x1 = xh[i + half];
                xh[i] = x0 * c[i] - x1 * s[i];
                xh[i + half] = x0 * s[i] + x1 * c[i];
            }
        }
    }
}

void krt_kv_append_ref(float *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                       int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t h = 0; h < n_kv_heads; h++) {
            float *dst = cache + (h * max_ctx + pos0 + t) * head_dim;
            const float *s = src + t * src_stride + h * head_dim;
            for (int64_t d = 0; d < head_dim; d++) dst[d] = s[d];
        }
    }
}

void krt_kv_append_f16_ref(uint16_t *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                           int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t h = 0; h < n_kv_heads; h++) {
            uint16_t *dst = cache + (h * max_ctx + pos0 + t) * head_dim;
            const float *s = src + t * src_stride + h * head_dim;
            for (int64_t d = 0; d < head_dim; d++) dst[d] = krt_fp32_to_fp16(s[d]);
        }
    }
}

void krt_kv_append_q8_0_ref(krt_block_q8_0 *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                            int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1) {
    const int64_t nb = head_dim / KRT_QK;
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t h = 0; h < n_kv_heads; h++) {
            krt_block_q8_0 *dst = cache + (h * max_ctx + pos0 + t) * nb;
            const float *s = src + t * src_stride + h * head_dim;
            for (int64_t b = 0; b < nb; b++) krt_qz_q8_0_ref(&dst[b], s + b * KRT_QK);
        }
    }
}

#ifdef KRT_X86

/* ------------------------------------------------------------------ AVX2 microkernels */

/* Lanes [0, k) set, k in 0..8. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_rope_tailmask_avx2(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* Rotate the n_heads heads of one token (xt) with one position's table rows c, s. */
KRT_TARGET_AVX2 KRT_INLINE void krt_rp_rotate_avx2(float *xt, const float *c, const float *s, int64_t n_heads,
                                                   int64_t head_dim) {
    const int64_t half = head_dim / 2;
    for (int64_t h = 0; h < n_heads; h++) {
        float *x0p = xt + h * head_dim;
        float *x1p = x0p + half;
        int64_t i = 0;
        for (; i + 8 <= half; i += 8) {
            __m256 vc = _mm256_loadu_ps(c + i), vs = _mm256_loadu_ps(s + i);
            __m256 x0 = _mm256_loadu_ps(x0p + i), x1 = _mm256_loadu_ps(x1p + i);
            _mm256_storeu_ps(x0p + i, _mm256_fmsub_ps(x0, vc, _mm256_mul_ps(x1, vs)));
            _mm256_storeu_ps(x1p + i, _mm256_fmadd_ps(x0, vs, _mm256_mul_ps(x1, vc)));
        }
        if (i < half) {
            __m256i m = krt_rope_tailmask_avx2(half - i);
            __m256 vc = _mm256_maskload_ps(c + i, m), vs = _mm256_maskload_ps(s + i, m);
            __m256 x0 = _mm256_maskload_ps(x0p + i, m), x1 = _mm256_maskload_ps(x1p + i, m);
            _mm256_maskstore_ps(x0p + i, m, _mm256_fmsub_ps(x0, vc, _mm256_mul_ps(x1, vs)));
            _mm256_maskstore_ps(x1p + i, m, _mm256_fmadd_ps(x0, vs, _mm256_mul_ps(x1, vc)));
        }
    }
}

/* One cache row: dst[0..head_dim) = src[0..head_dim). */
KRT_TARGET_AVX2 KRT_INLINE void krt_rp_row_f32_avx2(float *dst, const float *s, int64_t head_dim) {
    int64_t d = 0;
    for (; d + 32 <= head_dim; d += 32) {
        __m256 a0 = _mm256_loadu_ps(s + d), a1 = _mm256_loadu_ps(s + d + 8);
        __m256 a2 = _mm256_loadu_ps(s + d + 16), a3 = _mm256_loadu_ps(s + d + 24);
        _mm256_storeu_ps(dst + d, a0);
        _mm256_storeu_ps(dst + d + 8, a1);
        _mm256_storeu_ps(dst + d + 16, a2);
        _mm256_storeu_ps(dst + d + 24, a3);
    }
    for (; d + 8 <= head_dim; d += 8) _mm256_storeu_ps(dst + d, _mm256_loadu_ps(s + d));
    if (d < head_dim) {
        __m256i m = krt_rope_tailmask_avx2(head_dim - d);
        _mm256_maskstore_ps(dst + d, m, _mm256_maskload_ps(s + d, m));
    }
}

KRT_TARGET_AVX2 KRT_INLINE void krt_rp_row_f16_avx2(uint16_t *dst, const float *s, int64_t head_dim) {
    int64_t d = 0;
    for (; d + 8 <= head_dim; d += 8)
        _mm_storeu_si128((__m128i *)(dst + d), _mm256_cvtps_ph(_mm256_loadu_ps(s + d), _MM_FROUND_TO_NEAREST_INT));
    for (; d < head_dim; d++) dst[d] = krt_fp32_to_fp16(s[d]);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_rp_row_q8_0_avx2(krt_block_q8_0 *dst, const float *s, int64_t head_dim) {
    for (int64_t b = 0; b < head_dim / KRT_QK; b++) krt_qz_q8_0_avx2(&dst[b], s + b * KRT_QK);
}

#define KRT_RP(name) name##_avx2
#define KRT_RP_TARGET KRT_TARGET_AVX2
#include "rope_driver.inc"
#undef KRT_RP
#undef KRT_RP_TARGET

/* ------------------------------------------------------------------ AVX-512 microkernels */

KRT_TARGET_AVX512 KRT_INLINE __mmask16 krt_rp_mask16(int64_t k) {
    return (__mmask16)(k >= 16 ? 0xffffu : (1u << k) - 1u);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_rp_rotate_avx512(float *xt, const float *c, const float *s, int64_t n_heads,
                                                       int64_t head_dim) {
    const int64_t half = head_dim / 2;
    if (half == 32) { /* head_dim 64 (qwen2, llama): the table row stays in 4 registers */
        __m512 c0 = _mm512_loadu_ps(c), c1 = _mm512_loadu_ps(c + 16);
        __m512 s0 = _mm512_loadu_ps(s), s1 = _mm512_loadu_ps(s + 16);
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = xt + h * 64;
            __m512 a0 = _mm512_loadu_ps(xh), a1 = _mm512_loadu_ps(xh + 16);
            __m512 b0 = _mm512_loadu_ps(xh + 32), b1 = _mm512_loadu_ps(xh + 48);
            _mm512_storeu_ps(xh, _mm512_fmsub_ps(a0, c0, _mm512_mul_ps(b0, s0)));
            _mm512_storeu_ps(xh + 16, _mm512_fmsub_ps(a1, c1, _mm512_mul_ps(b1, s1)));
            _mm512_storeu_ps(xh + 32, _mm512_fmadd_ps(a0, s0, _mm512_mul_ps(b0, c0)));
            _mm512_storeu_ps(xh + 48, _mm512_fmadd_ps(a1, s1, _mm512_mul_ps(b1, c1)));
        }
        return;
    }
    for (int64_t h = 0; h < n_heads; h++) {
        float *x0p = xt + h * head_dim;
        float *x1p = x0p + half;
        for (int64_t i = 0; i < half; i += 16) {
            __mmask16 m = krt_rp_mask16(half - i);
            __m512 vc = _mm512_maskz_loadu_ps(m, c + i), vs = _mm512_maskz_loadu_ps(m, s + i);
            __m512 x0 = _mm512_maskz_loadu_ps(m, x0p + i), x1 = _mm512_maskz_loadu_ps(m, x1p + i);
            _mm512_mask_storeu_ps(x0p + i, m, _mm512_fmsub_ps(x0, vc, _mm512_mul_ps(x1, vs)));
            _mm512_mask_storeu_ps(x1p + i, m, _mm512_fmadd_ps(x0, vs, _mm512_mul_ps(x1, vc)));
        }
    }
}

KRT_TARGET_AVX512 KRT_INLINE void krt_rp_row_f32_avx512(float *dst, const float *s, int64_t head_dim) {
    int64_t d = 0;
    for (; d + 64 <= head_dim; d += 64) {
        __m512 a0 = _mm512_loadu_ps(s + d), a1 = _mm512_loadu_ps(s + d + 16);
        __m512 a2 = _mm512_loadu_ps(s + d + 32), a3 = _mm512_loadu_ps(s + d + 48);
        _mm512_storeu_ps(dst + d, a0);
        _mm512_storeu_ps(dst + d + 16, a1);
        _mm512_storeu_ps(dst + d + 32, a2);
        _mm512_storeu_ps(dst + d + 48, a3);
    }
    for (; d < head_dim; d += 16) {
        __mmask16 m = krt_rp_mask16(head_dim - d);
        _mm512_mask_storeu_ps(dst + d, m, _mm512_maskz_loadu_ps(m, s + d));
    }
}

KRT_TARGET_AVX512 KRT_INLINE void krt_rp_row_f16_avx512(uint16_t *dst, const float *s, int64_t head_dim) {
    for (int64_t d = 0; d < head_dim; d += 16) {
        __mmask16 m = krt_rp_mask16(head_dim - d);
        __m256i h = _mm512_cvtps_ph(_mm512_maskz_loadu_ps(m, s + d), _MM_FROUND_TO_NEAREST_INT);
        _mm256_mask_storeu_epi16(dst + d, m, h);
    }
}

KRT_TARGET_AVX512 KRT_INLINE void krt_rp_row_q8_0_avx512(krt_block_q8_0 *dst, const float *s, int64_t head_dim) {
    for (int64_t b = 0; b < head_dim / KRT_QK; b++) krt_qz_q8_0_avx512(&dst[b], s + b * KRT_QK);
}

#define KRT_RP(name) name##_avx512
#define KRT_RP_TARGET KRT_TARGET_AVX512
#include "rope_driver.inc"
#undef KRT_RP
#undef KRT_RP_TARGET

#else /* !KRT_X86: the SIMD names still exist so the API links everywhere. */

#define KRT_RP_FALLBACK(sfx)                                                                                       \
    void krt_rope_neox_##sfx(float *x, const float *ct, const float *st, int64_t stride, int64_t nh, int64_t hd,  \
                             int64_t pos0, int64_t t0, int64_t t1) {                                               \
        krt_rope_neox_ref(x, ct, st, stride, nh, hd, pos0, t0, t1);                                                \
    }                                                                                                              \
    void krt_kv_append_##sfx(float *c, const float *s, int64_t ss, int64_t nkv, int64_t hd, int64_t mc,           \
                             int64_t pos0, int64_t t0, int64_t t1) {                                               \
        krt_kv_append_ref(c, s, ss, nkv, hd, mc, pos0, t0, t1);                                                    \
    }                                                                                                              \
    void krt_kv_append_f16_##sfx(uint16_t *c, const float *s, int64_t ss, int64_t nkv, int64_t hd, int64_t mc,    \
                                 int64_t pos0, int64_t t0, int64_t t1) {                                           \
        krt_kv_append_f16_ref(c, s, ss, nkv, hd, mc, pos0, t0, t1);                                                \
    }                                                                                                              \
    void krt_kv_append_q8_0_##sfx(krt_block_q8_0 *c, const float *s, int64_t ss, int64_t nkv, int64_t hd,         \
                                  int64_t mc, int64_t pos0, int64_t t0, int64_t t1) {                              \
        krt_kv_append_q8_0_ref(c, s, ss, nkv, hd, mc, pos0, t0, t1);                                               \
    }
KRT_RP_FALLBACK(avx2)
KRT_RP_FALLBACK(avx512)

#endif /* KRT_X86 */
