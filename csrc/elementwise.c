/* csrc/elementwise.c - SwiGLU and residual add (slice: elements i0..i1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline, exp is krt_expf
 * from krt_common.h) so that c2goasm can translate the object code. Three variants per
 * kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512). Each call
 * reads and writes only elements [i0, i1); SIMD tails use masked loads/stores, never a
 * full-width access past i1.
 *
 * SwiGLU matches ggml's ggml_vec_swiglu_f32: out = (g / (1 + exp(-g))) * up.
 * Large |g|: for g <= -KRT_EXP_HI (about -88.38) exp(-g) is +Inf in krt_expf, so silu is -0
 * (the true value is below 4e-37); the SIMD variants force -0 there explicitly because the
 * vector exp saturates at a finite 2^127.5. g = -Inf also gives -0 (ggml gives NaN: the
 * numerator is clamped to -FLT_MAX first); g = +Inf gives +Inf * up; NaN in gives NaN out.
 *
 * NaN / Inf (the same in every variant, element by element; csrc/tests/test_nan.c checks every
 * lane position of both operands): SwiGLU as above, then * up in IEEE (so up = NaN gives NaN,
 * up = +-Inf gives +-Inf, or NaN where silu(g) is +-0); add is the IEEE sum (NaN + x = NaN,
 * Inf + -Inf = NaN). Elements outside [i0, i1) are never read.
 */
#include "krt_common.h"

#define KRT_EW_NEG_FLT_MAX (-3.40282346638528859812e+38f)

KRT_INLINE float krt_ew_silu(float g) {
    float e = krt_expf(-g);
    float n = g < KRT_EW_NEG_FLT_MAX ? KRT_EW_NEG_FLT_MAX : g; /* -Inf -> -FLT_MAX; NaN stays */
    return n / (1.0f + e);
}

void krt_swiglu_ref(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
        out[i] = krt_ew_silu(gate[i]) * up[i];
    }
}

void krt_add_ref(float *out, const float *a, const float *b, int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
        out[i] = a[i] + b[i];
    }
}

#ifdef KRT_X86

KRT_TARGET_AVX2 KRT_INLINE __m256 krt_ew_silu_avx2(__m256 g) {
    __m256 e = krt_expf_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));
    /* max(c, g) returns g when g is NaN (the second operand wins on unordered). */
    __m256 n = _mm256_max_ps(_mm256_set1_ps(KRT_EW_NEG_FLT_MAX), g);
    __m256 r = _mm256_div_ps(n, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
    /* krt_expf_avx2 saturates to ~2^127.5 instead of Inf: force -0 where the scalar exp is Inf */
    return _mm256_blendv_ps(r, _mm256_set1_ps(-0.0f), _mm256_cmp_ps(g, _mm256_set1_ps(-KRT_EXP_HI), _CMP_LE_OQ));
}

/* Lanes [0, k) set, k in 0..8. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_ew_tailmask_avx2(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

KRT_TARGET_AVX2 void krt_swiglu_avx2(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 16 <= i1; i += 16) {
        __m256 g0 = _mm256_loadu_ps(gate + i), g1 = _mm256_loadu_ps(gate + i + 8);
        __m256 u0 = _mm256_loadu_ps(up + i), u1 = _mm256_loadu_ps(up + i + 8);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(krt_ew_silu_avx2(g0), u0));
        _mm256_storeu_ps(out + i + 8, _mm256_mul_ps(krt_ew_silu_avx2(g1), u1));
    }
    for (; i + 8 <= i1; i += 8) {
        __m256 g = _mm256_loadu_ps(gate + i), u = _mm256_loadu_ps(up + i);
        _mm256_storeu_ps(out + i, _mm256_mul_ps(krt_ew_silu_avx2(g), u));
    }
    if (i < i1) {
        __m256i m = krt_ew_tailmask_avx2(i1 - i);
        __m256 g = _mm256_maskload_ps(gate + i, m), u = _mm256_maskload_ps(up + i, m);
        _mm256_maskstore_ps(out + i, m, _mm256_mul_ps(krt_ew_silu_avx2(g), u));
    }
}

KRT_TARGET_AVX2 void krt_add_avx2(float *out, const float *a, const float *b, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 32 <= i1; i += 32) {
        __m256 a0 = _mm256_loadu_ps(a + i), a1 = _mm256_loadu_ps(a + i + 8);
        __m256 a2 = _mm256_loadu_ps(a + i + 16), a3 = _mm256_loadu_ps(a + i + 24);
        __m256 b0 = _mm256_loadu_ps(b + i), b1 = _mm256_loadu_ps(b + i + 8);
        __m256 b2 = _mm256_loadu_ps(b + i + 16), b3 = _mm256_loadu_ps(b + i + 24);
        _mm256_storeu_ps(out + i, _mm256_add_ps(a0, b0));
        _mm256_storeu_ps(out + i + 8, _mm256_add_ps(a1, b1));
        _mm256_storeu_ps(out + i + 16, _mm256_add_ps(a2, b2));
        _mm256_storeu_ps(out + i + 24, _mm256_add_ps(a3, b3));
    }
    for (; i + 8 <= i1; i += 8) {
        _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    }
    if (i < i1) {
        __m256i m = krt_ew_tailmask_avx2(i1 - i);
        _mm256_maskstore_ps(out + i, m, _mm256_add_ps(_mm256_maskload_ps(a + i, m), _mm256_maskload_ps(b + i, m)));
    }
}

KRT_TARGET_AVX512 KRT_INLINE __m512 krt_ew_silu_avx512(__m512 g) {
    __m512 e = krt_expf_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));
    __m512 n = _mm512_max_ps(_mm512_set1_ps(KRT_EW_NEG_FLT_MAX), g); /* NaN g -> g */
    __m512 r = _mm512_div_ps(n, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
    /* krt_expf_avx512 saturates to ~2^127.5 instead of Inf: force -0 where the scalar exp is Inf */
    return _mm512_mask_mov_ps(r, _mm512_cmp_ps_mask(g, _mm512_set1_ps(-KRT_EXP_HI), _CMP_LE_OQ), _mm512_set1_ps(-0.0f));
}

KRT_TARGET_AVX512 void krt_swiglu_avx512(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 32 <= i1; i += 32) {
        __m512 g0 = _mm512_loadu_ps(gate + i), g1 = _mm512_loadu_ps(gate + i + 16);
        __m512 u0 = _mm512_loadu_ps(up + i), u1 = _mm512_loadu_ps(up + i + 16);
        _mm512_storeu_ps(out + i, _mm512_mul_ps(krt_ew_silu_avx512(g0), u0));
        _mm512_storeu_ps(out + i + 16, _mm512_mul_ps(krt_ew_silu_avx512(g1), u1));
    }
    for (; i < i1; i += 16) {
        int64_t k = i1 - i < 16 ? i1 - i : 16;
        __mmask16 m = (__mmask16)((1u << k) - 1u);
        __m512 g = _mm512_maskz_loadu_ps(m, gate + i), u = _mm512_maskz_loadu_ps(m, up + i);
        _mm512_mask_storeu_ps(out + i, m, _mm512_mul_ps(krt_ew_silu_avx512(g), u));
    }
}

KRT_TARGET_AVX512 void krt_add_avx512(float *out, const float *a, const float *b, int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + 64 <= i1; i += 64) {
        __m512 a0 = _mm512_loadu_ps(a + i), a1 = _mm512_loadu_ps(a + i + 16);
        __m512 a2 = _mm512_loadu_ps(a + i + 32), a3 = _mm512_loadu_ps(a + i + 48);
        __m512 b0 = _mm512_loadu_ps(b + i), b1 = _mm512_loadu_ps(b + i + 16);
        __m512 b2 = _mm512_loadu_ps(b + i + 32), b3 = _mm512_loadu_ps(b + i + 48);
        _mm512_storeu_ps(out + i, _mm512_add_ps(a0, b0));
        _mm512_storeu_ps(out + i + 16, _mm512_add_ps(a1, b1));
        _mm512_storeu_ps(out + i + 32, _mm512_add_ps(a2, b2));
        _mm512_storeu_ps(out + i + 48, _mm512_add_ps(a3, b3));
    }
    for (; i < i1; i += 16) {
        int64_t k = i1 - i < 16 ? i1 - i : 16;
        __mmask16 m = (__mmask16)((1u << k) - 1u);
        _mm512_mask_storeu_ps(out + i, m, _mm512_add_ps(_mm512_maskz_loadu_ps(m, a + i), _mm512_maskz_loadu_ps(m, b + i)));
    }
}

#else /* !KRT_X86: the SIMD names still exist so the API links everywhere. */

void krt_swiglu_avx2(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) { krt_swiglu_ref(out, gate, up, i0, i1); }
void krt_swiglu_avx512(float *out, const float *gate, const float *up, int64_t i0, int64_t i1) { krt_swiglu_ref(out, gate, up, i0, i1); }
void krt_add_avx2(float *out, const float *a, const float *b, int64_t i0, int64_t i1) { krt_add_ref(out, a, b, i0, i1); }
void krt_add_avx512(float *out, const float *a, const float *b, int64_t i0, int64_t i1) { krt_add_ref(out, a, b, i0, i1); }

#endif /* KRT_X86 */
