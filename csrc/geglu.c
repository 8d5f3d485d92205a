/* csrc/geglu.c - GeGLU: out[i] = gelu(gate[i]) * up[i] (slice: elements i0..i1), the gated
 * activation of Gemma's MLP (ggml_geglu), with GELU in ggml's tanh form:
 *     gelu(x) = 0.5 x (1 + tanh(u)),  u = sqrt(2/pi) (x + 0.044715 x^3)
 * computed as x / (1 + exp(-2u)), which is the same function (1 + tanh(u) = 2 / (1 + e^-2u))
 * without tanh's cancellation near u = 0, and the same shape as SwiGLU's x / (1 + e^-x).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no global state, no libm calls (exp is
 * krt_expf), no calls out of a function. Three variants: _ref, _avx2, _avx512. Each call
 * reads and writes only elements [i0, i1); SIMD tails use masked loads and stores.
 *
 * Extremes: for very negative x, e^-2u overflows and gelu is -0 (the true value is below
 * 1e-37); x = -Inf also gives -0 (the numerator is clamped to -FLT_MAX, as SwiGLU's); x = +Inf
 * gives +Inf * up; a NaN gate or up gives NaN. The SIMD variants force -0 where the scalar exp
 * overflows, because the vector exp saturates at a finite 2^127.5.
 */
#include "krt_common.h"

#define KRT_GG_NEG_FLT_MAX (-3.40282346638528859812e+38f)
#define KRT_GG_C2 1.5957691216057308f /* 2 sqrt(2/pi) */
#define KRT_GG_A 0.044715f

/* -2u = -2 sqrt(2/pi) x (1 + 0.044715 x^2), and gelu = x / (1 + e^-2u). */
KRT_INLINE float krt_gg_gelu(float x) {
    float m2u = -KRT_GG_C2 * x * (1.0f + KRT_GG_A * x * x);
    float e = krt_expf(m2u);
    float n = x < KRT_GG_NEG_FLT_MAX ? KRT_GG_NEG_FLT_MAX : x; /* -Inf -> -FLT_MAX; NaN stays */
    return n / (1.0f + e);
}

void krt_geglu_ref(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
        out[i] = krt_gg_gelu(gate[i]) * up[i];
    }
}

#ifdef KRT_X86

KRT_TARGET_AVX2 KRT_INLINE __m256 krt_gg_gelu_avx2(__m256 x) {
    __m256 x2 = _mm256_mul_ps(x, x);
    __m256 poly = _mm256_add_ps(_mm256_set1_ps(1.0f), _mm256_mul_ps(_mm256_set1_ps(KRT_GG_A), x2));
    __m256 m2u = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(-KRT_GG_C2), x), poly);
    __m256 e = krt_expf_avx2(m2u);
    /* max(c, x) returns x when x is NaN (the second operand wins on unordered). */
    __m256 n = _mm256_max_ps(_mm256_set1_ps(KRT_GG_NEG_FLT_MAX), x);
    __m256 r = _mm256_div_ps(n, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    /* where the scalar exp overflows to Inf (m2u > KRT_EXP_HI) the result is -0 */
    return _mm256_blendv_ps(r, _mm256_set1_ps(-0.0f), _mm256_cmp_ps(m2u, _mm256_set1_ps(KRT_EXP_HI), _CMP_GT_OQ));
}

KRT_TARGET_AVX2 void krt_geglu_avx2(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(krt_gg_gelu_avx2(g), u));
    }
    if (i < i1) {
        __m256i m = _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(i1 - i)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 g = _mm256_maskload_ps(gate + i, m), u = _mm256_maskload_ps(up + i, m);
        _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(krt_gg_gelu_avx2(g), u));
    }
}

KRT_TARGET_AVX512 KRT_INLINE __m512 krt_gg_gelu_avx512(__m512 x) {
    __m512 x2 = _mm512_mul_ps(x, x);
    __m512 poly = _mm512_add_ps(_mm512_set1_ps(1.0f), _mm512_mul_ps(_mm512_set1_ps(KRT_GG_A), x2));
    __m512 m2u = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(-KRT_GG_C2), x), poly);
    __m512 e = krt_expf_avx512(m2u);
    __m512 n = _mm512_max_ps(_mm512_set1_ps(KRT_GG_NEG_FLT_MAX), x);
    __m512 r = _mm512_div_ps(n, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    __mmask16 big = _mm512_cmp_ps_mask(m2u, _mm512_set1_ps(KRT_EXP_HI), _CMP_GT_OQ);
    return _mm512_mask_mov_ps(r, big, _mm512_set1_ps(-0.0f));
}

KRT_TARGET_AVX512 void krt_geglu_avx512(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        __m512 g = _mm512_loadu_ps(gate + i), u = _mm512_loadu_ps(up + i);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(krt_gg_gelu_avx512(g), u));
    }
    if (i < i1) {
        __mmask16 m = (__mmask16)((1u << (i1 - i)) - 1u);
        __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(krt_gg_gelu_avx512(g), u));
    }
}

#else /* !KRT_X86: the SIMD names exist so the library links; callers never select them. */

void krt_geglu_avx2(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    krt_geglu_ref(out, gate, up, i0, i1);
}
void krt_geglu_avx512(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    krt_geglu_ref(out, gate, up, i0, i1);
}

#endif /* KRT_X86 */
