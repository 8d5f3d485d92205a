/* csrc/norm.c - RMSNorm (tokens t0..t1) and softmax (rows r0..r1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline; sqrt is the SSE2
 * instruction in the SIMD variants and a Newton iteration in _ref; exp is krt_expf*) so that
 * c2goasm can translate the object code. Three variants per kernel: _ref (scalar),
 * _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512). Helpers are prefixed krt_nm_.
 *
 * Accuracy (every variant, checked by csrc/tests/test_core.c against float64):
 *  - rmsnorm: the sum of squares is accumulated in double (x*x is exact in double), the scale
 *    1/sqrt(mean + eps) is computed in double and rounded once to float, then
 *    out = (x * scale) * weight in float: at most ~3 float roundings, < 2e-7 relative.
 *    Like ggml, sum 0 with eps 0 gives scale Inf (out NaN); NaN/Inf inputs propagate.
 *  - softmax: m = max of the row's valid part; e = exp(x - m), with the rounding error of the
 *    float subtraction x - m recovered exactly (TwoSum) and applied as e*(1 + err), so tiny
 *    probabilities keep their relative accuracy; the sum of e is accumulated in double;
 *    out = e * float(1/sum). Each output is within ~6e-7 relative of float64 softmax (outputs
 *    below float's normal range, < 1.2e-38, only absolutely).
 *
 * NaN / Inf (the same in every variant; csrc/tests/test_nan.c checks every position, including
 * the first element, SIMD tail lanes and the last valid element):
 *  - softmax: IEEE evaluation of exp(x - max) / sum over the row's valid part. A NaN anywhere
 *    in the valid part makes every valid output NaN (its exp and so the sum are NaN); +Inf makes
 *    the row NaN (Inf - Inf); -Inf entries get exactly 0 while any entry is finite; a row whose
 *    valid entries are all -Inf is NaN (float64 softmax gives the same). Entries past valid[r]
 *    are never read: they become 0 whatever they held. (The SIMD variants used to saturate
 *    NaN inside exp and returned [~0, 1, ~0, ~0] for [1, NaN, 2, 3].)
 *  - rmsnorm: NaN anywhere in the row (or in *eps) gives a NaN row; +-Inf (no NaN) gives
 *    scale 1/sqrt(Inf) = 0, so the infinite elements become NaN and the others +-0 * weight;
 *    weight elements act elementwise (NaN -> NaN, Inf -> +-Inf or NaN for x*scale = 0).
 */
#include "krt_common.h"

/* 1/sqrt(s) in double without libm: bit-trick seed + Newton steps (full double precision). */
KRT_INLINE double krt_nm_rsqrt_ref(double s) {
    if (s != s) return s;
    if (s <= 0.0) {
        if (s == 0.0) {
            uint64_t inf = 0x7ff0000000000000ull;
            double r;
            memcpy(&r, &inf, 8);
            return r;
        }
        return (s - s) / (s - s); /* negative: NaN */
    }
    if (s > 1.7976931348623157e308) return 0.0; /* +Inf */
    double scale = 1.0;
    /* bring s into [2^-500, 2^500] so the seed trick and the products cannot under/overflow */
    while (s > 0x1p500) { s *= 0x1p-500; scale *= 0x1p-250; }
    while (s < 0x1p-500) { s *= 0x1p500; scale *= 0x1p250; }
    uint64_t i;
    memcpy(&i, &s, 8);
    i = 0x5fe6eb50c7b537a9ull - (i >> 1);
    double y;
    memcpy(&y, &i, 8);
    for (int k = 0; k < 6; k++) y = y * (1.5 - 0.5 * s * y * y);
    return y * scale;
}

void krt_rmsnorm_ref(float *out, const float *x, const float *weight, const float *eps,
                     int64_t dim, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        const float *xr = x + t * dim;
        float *o = out + t * dim;
        double ss = 0.0;
        for (int64_t i = 0; i < dim; i++) ss += (double)xr[i] * (double)xr[i];
        float scale = (float)krt_nm_rsqrt_ref(ss / (double)dim + (double)*eps);
        for (int64_t i = 0; i < dim; i++) o[i] = (xr[i] * scale) * weight[i];
    }
}

/* e^(x - m) with the rounding error of x - m applied to first order. */
KRT_INLINE float krt_nm_exp_diff_ref(float x, float m) {
    float s = x - m;
    float bb = s - x;
    float err = (x - (s - bb)) + (-m - bb);
    if (err != err) err = 0.0f; /* x or m infinite */
    float e = krt_expf(s);
    return e + e * err;
}

void krt_softmax_ref(float *x, const int32_t *valid, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        float *row = x + r * cols;
        int64_t n = valid ? (int64_t)valid[r] : cols;
        float m = row[0];
        for (int64_t i = 1; i < n; i++) {
            if (row[i] > m) m = row[i]; /* a NaN element still makes its own e, and the sum, NaN */
        }
        double sum = 0.0;
        for (int64_t i = 0; i < n; i++) {
            float e = krt_nm_exp_diff_ref(row[i], m);
            row[i] = e;
            sum += (double)e;
        }
        float inv = (float)(1.0 / sum);
        for (int64_t i = 0; i < n; i++) row[i] = row[i] * inv;
        for (int64_t i = n; i < cols; i++) row[i] = 0.0f;
    }
}

#ifdef KRT_X86

/* ---------------- AVX2 ---------------- */

KRT_TARGET_AVX2 KRT_INLINE float krt_nm_scale_avx2(double ss, int64_t dim, float eps) {
    __m128d s = _mm_set_sd(ss / (double)dim + (double)eps);
    __m128d r = _mm_div_sd(_mm_set_sd(1.0), _mm_sqrt_sd(s, s));
    return (float)_mm_cvtsd_f64(r);
}

KRT_TARGET_AVX2 void krt_rmsnorm_avx2(float *out, const float *x, const float *weight, const float *eps,
                                      int64_t dim, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        const float *xr = x + t * dim;
        float *o = out + t * dim;
        __m256d a0 = _mm256_setzero_pd(), a1 = _mm256_setzero_pd();
        __m256d a2 = _mm256_setzero_pd(), a3 = _mm256_setzero_pd();
        int64_t i = 0;
        for (; i + 16 <= dim; i += 16) {
            __m256d v0 = _mm256_cvtps_pd(_mm_loadu_ps(xr + i + 0));
            __m256d v1 = _mm256_cvtps_pd(_mm_loadu_ps(xr + i + 4));
            __m256d v2 = _mm256_cvtps_pd(_mm_loadu_ps(xr + i + 8));
            __m256d v3 = _mm256_cvtps_pd(_mm_loadu_ps(xr + i + 12));
            a0 = _mm256_fmadd_pd(v0, v0, a0);
            a1 = _mm256_fmadd_pd(v1, v1, a1);
            a2 = _mm256_fmadd_pd(v2, v2, a2);
            a3 = _mm256_fmadd_pd(v3, v3, a3);
        }
        for (; i + 4 <= dim; i += 4) {
            __m256d v0 = _mm256_cvtps_pd(_mm_loadu_ps(xr + i));
            a0 = _mm256_fmadd_pd(v0, v0, a0);
        }
        a0 = _mm256_add_pd(_mm256_add_pd(a0, a1), _mm256_add_pd(a2, a3));
        __m128d h = _mm_add_pd(_mm256_castpd256_pd128(a0), _mm256_extractf128_pd(a0, 1));
        double ss = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
        for (; i < dim; i++) ss += (double)xr[i] * (double)xr[i];
        float scale = krt_nm_scale_avx2(ss, dim, *eps);
        __m256 sv = _mm256_set1_ps(scale);
        for (i = 0; i + 8 <= dim; i += 8) {
            __m256 v = _mm256_mul_ps(_mm256_loadu_ps(xr + i), sv);
            _mm256_storeu_ps(o + i, _mm256_mul_ps(v, _mm256_loadu_ps(weight + i)));
        }
        for (; i < dim; i++) o[i] = (xr[i] * scale) * weight[i];
    }
}

/* e^(x - m) * (1 + err(x - m)), 8 lanes (see krt_nm_exp_diff_ref). */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_nm_exp_diff_avx2(__m256 x, __m256 m) {
    __m256 nm = _mm256_sub_ps(_mm256_setzero_ps(), m);
    __m256 s = _mm256_sub_ps(x, m);
    __m256 bb = _mm256_sub_ps(s, x);
    __m256 err = _mm256_add_ps(_mm256_sub_ps(x, _mm256_sub_ps(s, bb)), _mm256_sub_ps(nm, bb));
    err = _mm256_and_ps(err, _mm256_cmp_ps(err, err, _CMP_ORD_Q));
    __m256 e = krt_expf_ieee_avx2(s); /* NaN stays NaN (krt_expf_avx2 turned it into a huge value) */
    return _mm256_fmadd_ps(e, err, e);
}

KRT_TARGET_AVX2 void krt_softmax_avx2(float *x, const int32_t *valid, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        float *row = x + r * cols;
        int64_t n = valid ? (int64_t)valid[r] : cols;
        /* max; NaN anywhere makes the row NaN through x - m below, so a plain max is enough */
        __m256 mv = _mm256_set1_ps(row[0]);
        int64_t i = 0;
        for (; i + 8 <= n; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(row + i));
        __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(mv), _mm256_extractf128_ps(mv, 1));
        m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
        m4 = _mm_max_ss(m4, _mm_movehdup_ps(m4));
        float m = _mm_cvtss_f32(m4);
        for (; i < n; i++) m = row[i] > m ? row[i] : m;
        __m256 mb = _mm256_set1_ps(m);
        __m256d s0 = _mm256_setzero_pd(), s1 = _mm256_setzero_pd();
        for (i = 0; i + 8 <= n; i += 8) {
            __m256 e = krt_nm_exp_diff_avx2(_mm256_loadu_ps(row + i), mb);
            _mm256_storeu_ps(row + i, e);
            s0 = _mm256_add_pd(s0, _mm256_cvtps_pd(_mm256_castps256_ps128(e)));
            s1 = _mm256_add_pd(s1, _mm256_cvtps_pd(_mm256_extractf128_ps(e, 1)));
        }
        s0 = _mm256_add_pd(s0, s1);
        __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s0), _mm256_extractf128_pd(s0, 1));
        double sum = _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
        for (; i < n; i++) {
            float e = _mm256_cvtss_f32(krt_nm_exp_diff_avx2(_mm256_set1_ps(row[i]), mb));
            row[i] = e;
            sum += (double)e;
        }
        float inv = (float)_mm_cvtsd_f64(_mm_div_sd(_mm_set_sd(1.0), _mm_set_sd(sum)));
        __m256 iv = _mm256_set1_ps(inv);
        for (i = 0; i + 8 <= n; i += 8) _mm256_storeu_ps(row + i, _mm256_mul_ps(_mm256_loadu_ps(row + i), iv));
        for (; i < n; i++) row[i] = row[i] * inv;
        for (; i + 8 <= cols; i += 8) _mm256_storeu_ps(row + i, _mm256_setzero_ps());
        for (; i < cols; i++) row[i] = 0.0f;
    }
}

/* ---------------- AVX-512 ---------------- */

KRT_TARGET_AVX512 void krt_rmsnorm_avx512(float *out, const float *x, const float *weight, const float *eps,
                                          int64_t dim, int64_t t0, int64_t t1) {
    for (int64_t t = t0; t < t1; t++) {
        const float *xr = x + t * dim;
        float *o = out + t * dim;
        __m512d a0 = _mm512_setzero_pd(), a1 = _mm512_setzero_pd();
        __m512d a2 = _mm512_setzero_pd(), a3 = _mm512_setzero_pd();
        int64_t i = 0;
        for (; i + 32 <= dim; i += 32) {
            __m512d v0 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i + 0));
            __m512d v1 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i + 8));
            __m512d v2 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i + 16));
            __m512d v3 = _mm512_cvtps_pd(_mm256_loadu_ps(xr + i + 24));
            a0 = _mm512_fmadd_pd(v0, v0, a0);
            a1 = _mm512_fmadd_pd(v1, v1, a1);
            a2 = _mm512_fmadd_pd(v2, v2, a2);
            a3 = _mm512_fmadd_pd(v3, v3, a3);
        }
        for (; i < dim; i += 8) {
            int64_t left = dim - i;
            __mmask8 mk = left >= 8 ? (__mmask8)0xff : (__mmask8)((1u << left) - 1u);
            __m512d v0 = _mm512_cvtps_pd(_mm256_maskz_loadu_ps(mk, xr + i));
            a0 = _mm512_fmadd_pd(v0, v0, a0);
        }
        a0 = _mm512_add_pd(_mm512_add_pd(a0, a1), _mm512_add_pd(a2, a3));
        double ss = _mm512_reduce_add_pd(a0);
        __m128d s = _mm_set_sd(ss / (double)dim + (double)*eps);
        float scale = (float)_mm_cvtsd_f64(_mm_div_sd(_mm_set_sd(1.0), _mm_sqrt_sd(s, s)));
        __m512 sv = _mm512_set1_ps(scale);
        for (i = 0; i < dim; i += 16) {
            int64_t left = dim - i;
            __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, xr + i), sv);
            _mm512_mask_storeu_ps(o + i, mk, _mm512_mul_ps(v, _mm512_maskz_loadu_ps(mk, weight + i)));
        }
    }
}

KRT_TARGET_AVX512 KRT_INLINE __m512 krt_nm_exp_diff_avx512(__m512 x, __m512 m) {
    __m512 nm = _mm512_sub_ps(_mm512_setzero_ps(), m);
    __m512 s = _mm512_sub_ps(x, m);
    __m512 bb = _mm512_sub_ps(s, x);
    __m512 err = _mm512_add_ps(_mm512_sub_ps(x, _mm512_sub_ps(s, bb)), _mm512_sub_ps(nm, bb));
    err = _mm512_maskz_mov_ps(_mm512_cmp_ps_mask(err, err, _CMP_ORD_Q), err);
    __m512 e = krt_expf_ieee_avx512(s); /* NaN stays NaN */
    return _mm512_fmadd_ps(e, err, e);
}

KRT_TARGET_AVX512 void krt_softmax_avx512(float *x, const int32_t *valid, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        float *row = x + r * cols;
        int64_t n = valid ? (int64_t)valid[r] : cols;
        __m512 mv = _mm512_set1_ps(row[0]);
        int64_t i = 0;
        for (; i < n; i += 16) {
            int64_t left = n - i;
            __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            mv = _mm512_mask_max_ps(mv, mk, mv, _mm512_maskz_loadu_ps(mk, row + i));
        }
        __m512 mb = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
        __m512d s0 = _mm512_setzero_pd(), s1 = _mm512_setzero_pd();
        for (i = 0; i < n; i += 16) {
            int64_t left = n - i;
            __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            __m512 e = krt_nm_exp_diff_avx512(_mm512_maskz_loadu_ps(mk, row + i), mb);
            e = _mm512_maskz_mov_ps(mk, e);
            _mm512_mask_storeu_ps(row + i, mk, e);
            s0 = _mm512_add_pd(s0, _mm512_cvtps_pd(_mm512_castps512_ps256(e)));
            s1 = _mm512_add_pd(s1, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(e), 1))));
        }
        double sum = _mm512_reduce_add_pd(_mm512_add_pd(s0, s1));
        float inv = (float)_mm_cvtsd_f64(_mm_div_sd(_mm_set_sd(1.0), _mm_set_sd(sum)));
        __m512 iv = _mm512_set1_ps(inv);
        for (i = 0; i < cols; i += 16) {
            /* valid part scaled, tail zeroed, in one pass */
            int64_t left = cols - i;
            __mmask16 mk = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            int64_t lv = n - i;
            __mmask16 mv16 = lv >= 16 ? (__mmask16)0xffff : (lv <= 0 ? (__mmask16)0 : (__mmask16)((1u << lv) - 1u));
            __m512 v = _mm512_maskz_loadu_ps(mv16, row + i);
            /* maskz: past valid[r] store 0, not 0 * inv (NaN when the sum is NaN) */
            _mm512_mask_storeu_ps(row + i, mk, _mm512_maskz_mul_ps(mv16, v, iv));
        }
    }
}

#endif /* KRT_X86 */
