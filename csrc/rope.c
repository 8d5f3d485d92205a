/* csrc/rope.c - RoPE (NeoX style, rotate halves) and the F32 KV-cache append (slice: tokens t0..t1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline; the cos/sin tables
 * are computed once by the caller) so that c2goasm can translate the object code. Three
 * variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512).
 * Each call touches only tokens [t0, t1): rope rewrites the n_heads*head_dim floats of those
 * tokens in place (nothing between heads' rows and the next token's stride), kv_append writes
 * only cache rows pos0+t0 .. pos0+t1-1 of every KV head. SIMD tails use masked accesses.
 *
 * RoPE NeoX (ggml GGML_ROPE_TYPE_NEOX, used by qwen2): in each head, element i (< head_dim/2)
 * rotates with element i + head_dim/2 by angle pos * theta^(-2i/head_dim):
 *   x0' = x0*cos - x1*sin,  x1' = x0*sin + x1*cos,  cos/sin read from [pos][head_dim/2] tables.
 * head_dim must be even (the Go side checks).
 */
#include "krt_common.h"

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

#ifdef KRT_X86

/* Lanes [0, k) set, k in 0..8. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_rope_tailmask_avx2(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

KRT_TARGET_AVX2 void krt_rope_neox_avx2(float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                                        int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    const int64_t half = head_dim / 2;
    for (int64_t t = t0; t < t1; t++) {
        const float *c = cos_tab + (pos0 + t) * half;
        const float *s = sin_tab + (pos0 + t) * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *x0p = x + t * stride + h * head_dim;
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
}

KRT_TARGET_AVX2 void krt_kv_append_avx2(float *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                                        int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t h = 0; h < n_kv_heads; h++) {
            float *dst = cache + (h * max_ctx + pos0 + t) * head_dim;
            const float *s = src + t * src_stride + h * head_dim;
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
    }
}

KRT_TARGET_AVX512 void krt_rope_neox_avx512(float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                                            int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    const int64_t half = head_dim / 2;
    for (int64_t t = t0; t < t1; t++) {
        const float *c = cos_tab + (pos0 + t) * half;
        const float *s = sin_tab + (pos0 + t) * half;
        if (half == 32) { /* head_dim 64 (qwen2, llama): the table row stays in 4 registers */
            __m512 c0 = _mm512_loadu_ps(c), c1 = _mm512_loadu_ps(c + 16);
            __m512 s0 = _mm512_loadu_ps(s), s1 = _mm512_loadu_ps(s + 16);
            for (int64_t h = 0; h < n_heads; h++) {
                float *xh = x + t * stride + h * 64;
                __m512 a0 = _mm512_loadu_ps(xh), a1 = _mm512_loadu_ps(xh + 16);
                __m512 b0 = _mm512_loadu_ps(xh + 32), b1 = _mm512_loadu_ps(xh + 48);
                _mm512_storeu_ps(xh, _mm512_fmsub_ps(a0, c0, _mm512_mul_ps(b0, s0)));
                _mm512_storeu_ps(xh + 16, _mm512_fmsub_ps(a1, c1, _mm512_mul_ps(b1, s1)));
                _mm512_storeu_ps(xh + 32, _mm512_fmadd_ps(a0, s0, _mm512_mul_ps(b0, c0)));
                _mm512_storeu_ps(xh + 48, _mm512_fmadd_ps(a1, s1, _mm512_mul_ps(b1, c1)));
            }
            continue;
        }
        for (int64_t h = 0; h < n_heads; h++) {
            float *x0p = x + t * stride + h * head_dim;
            float *x1p = x0p + half;
            for (int64_t i = 0; i < half; i += 16) {
                int64_t k = half - i < 16 ? half - i : 16;
                __mmask16 m = (__mmask16)((1u << k) - 1u);
                __m512 vc = _mm512_maskz_loadu_ps(m, c + i), vs = _mm512_maskz_loadu_ps(m, s + i);
                __m512 x0 = _mm512_maskz_loadu_ps(m, x0p + i), x1 = _mm512_maskz_loadu_ps(m, x1p + i);
                _mm512_mask_storeu_ps(x0p + i, m, _mm512_fmsub_ps(x0, vc, _mm512_mul_ps(x1, vs)));
                _mm512_mask_storeu_ps(x1p + i, m, _mm512_fmadd_ps(x0, vs, _mm512_mul_ps(x1, vc)));
            }
        }
    }
}

KRT_TARGET_AVX512 void krt_kv_append_avx512(float *cache, const float *src, int64_t src_stride, int64_t n_kv_heads,
                                            int64_t head_dim, int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        for (int64_t h = 0; h < n_kv_heads; h++) {
            float *dst = cache + (h * max_ctx + pos0 + t) * head_dim;
            const float *s = src + t * src_stride + h * head_dim;
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
                int64_t k = head_dim - d < 16 ? head_dim - d : 16;
                __mmask16 m = (__mmask16)((1u << k) - 1u);
                _mm512_mask_storeu_ps(dst + d, m, _mm512_maskz_loadu_ps(m, s + d));
            }
        }
    }
}

#else /* !KRT_X86: the SIMD names still exist so the API links everywhere. */

void krt_rope_neox_avx2(float *x, const float *cos_tab, const float *sin_tab, int64_t stride, int64_t n_heads,
                        int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    krt_rope_neox_ref(x, cos_tab, sin_tab, stride, n_heads, head_dim, pos0, t0, t1);
}
void krt_rope_neox_avx512(float *x, const float *cos_tab, const float *sin_tab, int64_t stride, int64_t n_heads,
                          int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    krt_rope_neox_ref(x, cos_tab, sin_tab, stride, n_heads, head_dim, pos0, t0, t1);
}
void krt_kv_append_avx2(float *cache, const float *src, int64_t src_stride, int64_t n_kv_heads, int64_t head_dim,
                        int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1) {
    krt_kv_append_ref(cache, src, src_stride, n_kv_heads, head_dim, max_ctx, pos0, t0, t1);
}
void krt_kv_append_avx512(float *cache, const float *src, int64_t src_stride, int64_t n_kv_heads, int64_t head_dim,
                          int64_t max_ctx, int64_t pos0, int64_t t0, int64_t t1) {
    krt_kv_append_ref(cache, src, src_stride, n_kv_heads, head_dim, max_ctx, pos0, t0, t1);
}

#endif /* KRT_X86 */
