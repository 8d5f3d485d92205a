/* csrc/stream.c - krt_stream_read: the memory-bandwidth baseline (*out = sum of src[i0..i1)).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (c2goasm-friendly). Three variants:
 * _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512).
 *
 * The sum is only there so the loads cannot be optimised away; what matters is that the loop
 * issues loads as fast as the memory system can serve them: several independent accumulators,
 * 256 (AVX2) or 512 (AVX-512) bytes per iteration, unaligned loads, masked/scalar tail.
 */
#include "krt_common.h"

void krt_stream_read_ref(float *out, const float *src, int64_t i0, int64_t i1) {
    src += i0;
    const int64_t n = i1 - i0;
    float s0 = 0.0f, s1 = 0.0f, s2 = 0.0f, s3 = 0.0f;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += src[i + 0];
        s1 += src[i + 1];
        s2 += src[i + 2];
        s3 += src[i + 3];
    }
    for (; i < n; i++) s0 += src[i];
    *out = (s0 + s1) + (s2 + s3);
}

#ifdef KRT_X86

KRT_TARGET_AVX2 void krt_stream_read_avx2(float *out, const float *src, int64_t i0, int64_t i1) {
    src += i0;
    const int64_t n = i1 - i0;
    __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
    __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
    __m256 a4 = _mm256_setzero_ps(), a5 = _mm256_setzero_ps();
    __m256 a6 = _mm256_setzero_ps(), a7 = _mm256_setzero_ps();
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        a0 = _mm256_add_ps(a0, _mm256_loadu_ps(src + i + 0));
        a1 = _mm256_add_ps(a1, _mm256_loadu_ps(src + i + 8));
        a2 = _mm256_add_ps(a2, _mm256_loadu_ps(src + i + 16));
        a3 = _mm256_add_ps(a3, _mm256_loadu_ps(src + i + 24));
        a4 = _mm256_add_ps(a4, _mm256_loadu_ps(src + i + 32));
        a5 = _mm256_add_ps(a5, _mm256_loadu_ps(src + i + 40));
        a6 = _mm256_add_ps(a6, _mm256_loadu_ps(src + i + 48));
        a7 = _mm256_add_ps(a7, _mm256_loadu_ps(src + i + 56));
    }
    for (; i + 8 <= n; i += 8) a0 = _mm256_add_ps(a0, _mm256_loadu_ps(src + i));
    a0 = _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3));
    a4 = _mm256_add_ps(_mm256_add_ps(a4, a5), _mm256_add_ps(a6, a7));
    a0 = _mm256_add_ps(a0, a4);
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(a0), _mm256_extractf128_ps(a0, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    float r = _mm_cvtss_f32(s);
    for (; i < n; i++) r += src[i];
    *out = r;
}

KRT_TARGET_AVX512 void krt_stream_read_avx512(float *out, const float *src, int64_t i0, int64_t i1) {
    src += i0;
    const int64_t n = i1 - i0;
    __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
    __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
    __m512 a4 = _mm512_setzero_ps(), a5 = _mm512_setzero_ps();
    __m512 a6 = _mm512_setzero_ps(), a7 = _mm512_setzero_ps();
    int64_t i = 0;
    for (; i + 128 <= n; i += 128) {
        a0 = _mm512_add_ps(a0, _mm512_loadu_ps(src + i + 0));
        a1 = _mm512_add_ps(a1, _mm512_loadu_ps(src + i + 16));
        a2 = _mm512_add_ps(a2, _mm512_loadu_ps(src + i + 32));
        a3 = _mm512_add_ps(a3, _mm512_loadu_ps(src + i + 48));
        a4 = _mm512_add_ps(a4, _mm512_loadu_ps(src + i + 64));
        a5 = _mm512_add_ps(a5, _mm512_loadu_ps(src + i + 80));
        a6 = _mm512_add_ps(a6, _mm512_loadu_ps(src + i + 96));
        a7 = _mm512_add_ps(a7, _mm512_loadu_ps(src + i + 112));
    }
    for (; i + 16 <= n; i += 16) a0 = _mm512_add_ps(a0, _mm512_loadu_ps(src + i));
    if (i < n) {
        __mmask16 m = (__mmask16)((1u << (n - i)) - 1u);
        a1 = _mm512_add_ps(a1, _mm512_maskz_loadu_ps(m, src + i));
    }
    a0 = _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3));
    a4 = _mm512_add_ps(_mm512_add_ps(a4, a5), _mm512_add_ps(a6, a7));
    *out = _mm512_reduce_add_ps(_mm512_add_ps(a0, a4));
}

#endif /* KRT_X86 */
