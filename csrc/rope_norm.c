/* csrc/rope_norm.c - RoPE in "normal" mode (rotate adjacent pairs; slice: tokens t0..t1), the
 * mode of llama.cpp's `llama` architecture (GGML_ROPE_TYPE_NORM): in each head, elements 2i
 * and 2i+1 rotate by angle pos * theta^(-2i/head_dim) (divided by a per-dimension factor when
 * the model has rope_freqs; the caller bakes that into the tables):
 *   x0' = x0*cos - x1*sin,  x1' = x0*sin + x1*cos,  cos/sin read from [pos][head_dim/2] tables,
 * the same tables krt_rope_neox reads. head_dim must be even (the Go side checks).
 *
 * Rules (see kernelrt.h): C11; no malloc, threads, globals or libm; no calls out of a function.
 * Three variants: _ref, _avx2, _avx512. Each call rewrites only the n_heads*head_dim floats of
 * tokens [t0, t1) (nothing between one token's heads and the next token's stride). The SIMD
 * variants load a vector of pairs, swap each pair (x1, x0), and combine with cos/sin each
 * duplicated over its pair: x*cos + swap(x)*(-sin, +sin); they use FMA, so they agree with
 * _ref to an ulp of |x0 cos| + |x1 sin|. NaN in x or the tables gives NaN in that pair.
 */
#include "krt_common.h"

void krt_rope_norm_ref(float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                       int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    const int64_t half = head_dim / 2;
    for (int64_t t = t0; t < t1; t++) {
        const float *c = cos_tab + (pos0 + t) * half;
        const float *s = sin_tab + (pos0 + t) * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = x + t * stride + h * head_dim;
            for (int64_t i = 0; i < half; i++) {
                float x0 = xh[2 * i], x1 = xh[2 * i + 1];
                xh[2 * i] = x0 * c[i] - x1 * s[i];
                xh[2 * i + 1] = x0 * s[i] + x1 * c[i];
            }
        }
    }
}

#ifdef KRT_X86

/* Rotate the pairs of 8 floats at p with the 4 cos/sin at c, s; k (even, <= 8) floats valid. */
KRT_TARGET_AVX2 KRT_INLINE void krt_rn_rot8_avx2(float *p, const float *c, const float *s, int64_t k) {
    const __m256i dup = _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3);
    const __m256 sign = _mm256_setr_ps(-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f);
    __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
    __m128i mh = _mm_cmpgt_epi32(_mm_set1_epi32((int32_t)(k / 2)), _mm_setr_epi32(0, 1, 2, 3));
    __m256 xv = _mm256_maskload_ps(p, m);
    __m256 cd = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_maskload_ps(c, mh)), dup);
    __m256 sd = _mm256_mul_ps(_mm256_permutevar8x32_ps(_mm256_castps128_ps256(_mm_maskload_ps(s, mh)), dup), sign);
    __m256 sw = _mm256_permute_ps(xv, 0xB1); /* (x1, x0) in every pair */
    _mm256_maskstore_ps(p, m, _mm256_fmadd_ps(sw, sd, _mm256_mul_ps(xv, cd)));
}

KRT_TARGET_AVX2 void krt_rope_norm_avx2(float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                                        int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    const int64_t half = head_dim / 2;
    for (int64_t t = t0; t < t1; t++) {
        const float *c = cos_tab + (pos0 + t) * half;
        const float *s = sin_tab + (pos0 + t) * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = x + t * stride + h * head_dim;
            for (int64_t j = 0; j < head_dim; j += 8) {
                int64_t k = head_dim - j < 8 ? head_dim - j : 8;
                krt_rn_rot8_avx2(xh + j, c + j / 2, s + j / 2, k);
            }
        }
    }
}

KRT_TARGET_AVX512 void krt_rope_norm_avx512(float *x, const float *cos_tab, const float *sin_tab, int64_t stride,
                                            int64_t n_heads, int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    const int64_t half = head_dim / 2;
    const __m512i dup = _mm512_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7);
    const __m512 sign = _mm512_setr_ps(-1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f,
                                       -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f, -1.0f, 1.0f);
    for (int64_t t = t0; t < t1; t++) {
        const float *c = cos_tab + (pos0 + t) * half;
        const float *s = sin_tab + (pos0 + t) * half;
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = x + t * stride + h * head_dim;
            for (int64_t j = 0; j < head_dim; j += 16) {
                int64_t k = head_dim - j < 16 ? head_dim - j : 16;
                __mmask16 m = (__mmask16)((1u << k) - 1u);
                __mmask8 mh = (__mmask8)((1u << (k / 2)) - 1u);
                __m512 xv = _mm512_maskz_loadu_ps(m, xh + j);
                __m512 cd = _mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(mh, c + j / 2)));
                __m512 sd = _mm512_mul_ps(_mm512_permutexvar_ps(dup, _mm512_castps256_ps512(_mm256_maskz_loadu_ps(mh, s + j / 2))), sign);
                __m512 sw = _mm512_permute_ps(xv, 0xB1);
                _mm512_mask_storeu_ps(xh + j, m, _mm512_fmadd_ps(sw, sd, _mm512_mul_ps(xv, cd)));
            }
        }
    }
}

#else /* !KRT_X86: the SIMD names exist so the library links; callers never select them. */

void krt_rope_norm_avx2(float *x, const float *cos_tab, const float *sin_tab, int64_t stride, int64_t n_heads,
                        int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    krt_rope_norm_ref(x, cos_tab, sin_tab, stride, n_heads, head_dim, pos0, t0, t1);
}
void krt_rope_norm_avx512(float *x, const float *cos_tab, const float *sin_tab, int64_t stride, int64_t n_heads,
                          int64_t head_dim, int64_t pos0, int64_t t0, int64_t t1) {
    krt_rope_norm_ref(x, cos_tab, sin_tab, stride, n_heads, head_dim, pos0, t0, t1);
}

#endif /* KRT_X86 */
