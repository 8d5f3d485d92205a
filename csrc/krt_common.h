/*
 * krt_common.h - helpers shared by the kernels: fp16 conversion, an accurate exp, target macros.
 * C11, no malloc, no threads, no OpenMP, no global state, no libm calls (c2goasm-friendly:
 * everything here is static inline and is inlined into each kernel).
 */
#ifndef KRT_COMMON_H
#define KRT_COMMON_H

#include <stdint.h>
#include <string.h>
#include "kernelrt.h"

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define KRT_X86 1
#endif

/* Per-function ISA selection: one binary holds every variant; Go picks one at start-up.
 * _avx512 requires AVX-512 F/BW/VL/DQ and VNNI; CPUs without VNNI are given _avx2. */
#define KRT_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#define KRT_TARGET_AVX512 \
    __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,avx2,fma,f16c")))

#define KRT_INLINE static inline __attribute__((always_inline))

/* ---- IEEE half <-> single, bit-exact, round to nearest even (what F16C's vcvtps2ph with
 * imm 0 and ggml's reference converter both do). ---- */
KRT_INLINE float krt_fp16_to_fp32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    uint32_t bits;
    if (exp == 0x1f) {                /* Inf / NaN */
        bits = sign | 0x7f800000u | (man << 13);
    } else if (exp != 0) {            /* normal */
        bits = sign | ((exp + 112u) << 23) | (man << 13);
    } else if (man == 0) {            /* zero */
        bits = sign;
    } else {                          /* subnormal: normalise */
        int e = -1;
        do { man <<= 1; e++; } while ((man & 0x400u) == 0);
        man &= 0x3ffu;
        bits = sign | ((uint32_t)(112 - e) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

KRT_INLINE uint16_t krt_fp32_to_fp16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u;
    uint32_t absx = x & 0x7fffffffu;
    if (absx >= 0x7f800000u) {        /* Inf or NaN (keep NaN quiet and non-zero) */
        return (uint16_t)(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
    }
    if (absx >= 0x477ff000u) {        /* rounds to >= 65520: overflow to Inf */
        return (uint16_t)(sign | 0x7c00u);
    }
    if (absx < 0x38800000u) {         /* below the smallest normal half: subnormal or zero */
        if (absx < 0x33000000u) return (uint16_t)sign; /* < 2^-25 rounds to 0 */
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffffu) | 0x800000u;
        uint32_t shift = 126u - e;    /* 14..24 */
        uint32_t half = m >> shift;
        uint32_t rem = m & ((1u << shift) - 1u);
        uint32_t mid = 1u << (shift - 1u);
        if (rem > mid || (rem == mid && (half & 1u))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t r = absx + 0xfffu + ((absx >> 13) & 1u) - 0x38000000u; /* rebias, RNE */
    return (uint16_t)(sign | (r >> 13));
}

/* ---- exp: Cephes-style range reduction e^x = 2^n * e^r, |r| <= ln2/2, degree-6 polynomial.
 * Max relative error about 2 ulp (< 3e-7) over [-87.3, 88.7]; below that returns 0, above Inf.
 * Shared by softmax, SwiGLU and attention so every variant agrees with _ref to ~1 ulp. ---- */
#define KRT_EXP_HI 88.3762626647949f
#define KRT_EXP_LO (-87.3365447504019f)
#define KRT_LOG2E 1.44269504088896341f
#define KRT_LN2_HI 0.693359375f
#define KRT_LN2_LO (-2.12194440e-4f)
#define KRT_EXP_P0 1.9875691500e-4f
#define KRT_EXP_P1 1.3981999507e-3f
#define KRT_EXP_P2 8.3334519073e-3f
#define KRT_EXP_P3 4.1665795894e-2f
#define KRT_EXP_P4 1.6666665459e-1f
#define KRT_EXP_P5 5.0000001201e-1f

KRT_INLINE float krt_expf(float x) {
    if (x != x) return x;
    if (x > KRT_EXP_HI) x = KRT_EXP_HI + 1.0f;
    if (x < KRT_EXP_LO) return 0.0f;
    float fx = x * KRT_LOG2E + 0.5f;
    float n = (float)(int32_t)fx;
    if (n > fx) n -= 1.0f;            /* floor */
    float r = x - n * KRT_LN2_HI;
    r = r - n * KRT_LN2_LO;
    float p = KRT_EXP_P0;
    p = p * r + KRT_EXP_P1;
    p = p * r + KRT_EXP_P2;
    p = p * r + KRT_EXP_P3;
    p = p * r + KRT_EXP_P4;
    p = p * r + KRT_EXP_P5;
    p = p * r * r + r + 1.0f;
    int32_t ni = (int32_t)n;
    if (ni > 127) {                   /* overflow */
        uint32_t inf = 0x7f800000u;
        float f;
        memcpy(&f, &inf, 4);
        return f;
    }
    uint32_t bits = (uint32_t)(ni + 127) << 23;
    float s;
    memcpy(&s, &bits, 4);
    return p * s;
}

/* ---- the block-scale rule of the Q8_0 / Q5_0 GEMV and GEMM kernels ----
 * s + (s - s) is s for a finite s and NaN for +-Inf or NaN (Inf - Inf): applied to a block's
 * scale product fp32(d_w) * fp32(d_x) (or to each factor), it makes a block with a non-finite
 * fp16 scale contribute NaN in every variant. Without it the scalar kernels give
 * (+-Inf) * isum = +-Inf (NaN for isum = 0) while the SIMD ones multiply the scale into split
 * partial integer sums and give Inf or NaN depending on the data. Never folded: the build has
 * no -ffast-math / -ffinite-math-only. */
KRT_INLINE float krt_scale_poison(float s) { return s + (s - s); }

#ifdef KRT_X86
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_scale_poison_avx2(__m256 s) { return _mm256_add_ps(s, _mm256_sub_ps(s, s)); }
KRT_TARGET_AVX2 KRT_INLINE __m128 krt_scale_poison_sse(__m128 s) { return _mm_add_ps(s, _mm_sub_ps(s, s)); }
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_scale_poison_avx512(__m512 s) { return _mm512_add_ps(s, _mm512_sub_ps(s, s)); }

/* The same exp, 8 lanes. Inputs below KRT_EXP_LO give 0, above KRT_EXP_HI give a huge finite
 * value (callers feed max-subtracted or bounded inputs). */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_expf_avx2(__m256 x) {
    __m256 lo_mask = _mm256_cmp_ps(x, _mm256_set1_ps(KRT_EXP_LO), _CMP_LT_OQ);
    x = _mm256_min_ps(x, _mm256_set1_ps(KRT_EXP_HI));
    x = _mm256_max_ps(x, _mm256_set1_ps(KRT_EXP_LO));
    __m256 fx = _mm256_fmadd_ps(x, _mm256_set1_ps(KRT_LOG2E), _mm256_set1_ps(0.5f));
    __m256 n = _mm256_floor_ps(fx);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KRT_LN2_HI), x);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KRT_LN2_LO), r);
    __m256 p = _mm256_set1_ps(KRT_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
    return _mm256_andnot_ps(lo_mask, res);
}

/* The same exp, 16 lanes. */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_expf_avx512(__m512 x) {
    __mmask16 lo_mask = _mm512_cmp_ps_mask(x, _mm512_set1_ps(KRT_EXP_LO), _CMP_LT_OQ);
    x = _mm512_min_ps(x, _mm512_set1_ps(KRT_EXP_HI));
    x = _mm512_max_ps(x, _mm512_set1_ps(KRT_EXP_LO));
    __m512 fx = _mm512_fmadd_ps(x, _mm512_set1_ps(KRT_LOG2E), _mm512_set1_ps(0.5f));
    __m512 n = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KRT_LN2_HI), x);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KRT_LN2_LO), r);
    __m512 p = _mm512_set1_ps(KRT_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 res = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    return _mm512_maskz_mov_ps((__mmask16)~lo_mask, res);
}
/* ---- exp with the scalar krt_expf's IEEE behaviour, 8 / 16 lanes ----
 * krt_expf_avx2/avx512 above saturate: a NaN input comes out as a huge finite value (MINPS/MAXPS
 * return their second operand on NaN) and x > KRT_EXP_HI as ~2^127.5, not Inf. These versions
 * agree with krt_expf on every special value: NaN -> NaN (the clamps are written so that the NaN
 * operand wins), +Inf and x > KRT_EXP_HI -> +Inf, -Inf and x < KRT_EXP_LO -> +0; finite inputs
 * give the same result as krt_expf_avx2/avx512. New kernels use these. */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_expf_ieee_avx2(__m256 x) {
    const __m256 lo = _mm256_set1_ps(KRT_EXP_LO), hi = _mm256_set1_ps(KRT_EXP_HI);
    __m256 lo_mask = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
    __m256 hi_mask = _mm256_cmp_ps(x, hi, _CMP_GT_OQ);
    __m256 xc = _mm256_max_ps(lo, _mm256_min_ps(hi, x)); /* NaN x passes through both */
    __m256 fx = _mm256_fmadd_ps(xc, _mm256_set1_ps(KRT_LOG2E), _mm256_set1_ps(0.5f));
    __m256 n = _mm256_floor_ps(fx);
    __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KRT_LN2_HI), xc);
    r = _mm256_fnmadd_ps(n, _mm256_set1_ps(KRT_LN2_LO), r);
    __m256 p = _mm256_set1_ps(KRT_EXP_P0);
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P1));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P2));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P3));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P4));
    p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(KRT_EXP_P5));
    p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
    __m256 res = _mm256_mul_ps(p, _mm256_castsi256_ps(e)); /* NaN stays NaN through p */
    res = _mm256_blendv_ps(res, _mm256_castsi256_ps(_mm256_set1_epi32(0x7f800000)), hi_mask);
    return _mm256_andnot_ps(lo_mask, res);
}

KRT_TARGET_AVX512 KRT_INLINE __m512 krt_expf_ieee_avx512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(KRT_EXP_LO), hi = _mm512_set1_ps(KRT_EXP_HI);
    __mmask16 lo_mask = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    __mmask16 hi_mask = _mm512_cmp_ps_mask(x, hi, _CMP_GT_OQ);
    __m512 xc = _mm512_max_ps(lo, _mm512_min_ps(hi, x)); /* NaN x passes through both */
    __m512 fx = _mm512_fmadd_ps(xc, _mm512_set1_ps(KRT_LOG2E), _mm512_set1_ps(0.5f));
    __m512 n = _mm512_roundscale_ps(fx, _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KRT_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KRT_LN2_LO), r);
    __m512 p = _mm512_set1_ps(KRT_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
    __m512 res = _mm512_mul_ps(p, _mm512_castsi512_ps(e));
    res = _mm512_mask_mov_ps(res, hi_mask, _mm512_castsi512_ps(_mm512_set1_epi32(0x7f800000)));
    return _mm512_maskz_mov_ps((__mmask16)~lo_mask, res);
}

#endif /* KRT_X86 */

#endif /* KRT_COMMON_H */
