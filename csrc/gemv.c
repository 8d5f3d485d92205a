/* csrc/gemv.c - quantized and FP32 GEMV for decode (slice: rows r0..r1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline and always inlined;
 * the fused kernels inline the quantizers of krt_quant.h) so that c2goasm can translate the
 * object code. Three variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2),
 * _avx512 (KRT_TARGET_AVX512, uses AVX512-VNNI vpdpbusd). Helpers are prefixed krt_gv_.
 *
 * Math: y[r] = sum_b (fp32(d_w) * fp32(d_x)) * isum_b, isum_b the exact integer dot product of
 * the block's quants, accumulated in fp32 (+ bias[r]). A block whose scale product is not
 * finite (an fp16 d of +-Inf or NaN, in w or x) contributes NaN (krt_scale_poison) in every
 * variant: ggml would give +-Inf where isum_b != 0, which the SIMD variants' split integer
 * sums cannot reproduce. The SIMD variants split each isum_b into
 * 2 (AVX2) or 8 (AVX-512 Q8_0) exact partial sums (AVX-512 Q5_0: the exact isum_b, see
 * krt_gvpack.h), scale them and accumulate lane-wise, so their rounding differs from _ref by a
 * few ulp of the row's magnitude sum_b |d_w d_x isum_b| (tests: within 1e-5 of it against float64).
 *
 * Speed (1 thread, weights streamed from DRAM, 2 vCPU Zen 4; table in csrc/gemv_k.c): AVX-512
 * Q8_0 at 93-101% of the streaming read, Q5_0 (krt_gvpack.h) at 84-90%; AVX2 Q8_0 at 98-104% on
 * 896- and 2048-column rows but 58-63% on 4864/8192, AVX2 Q5_0 ~60% (instruction-bound: no byte
 * masks, the 5th bits cost ~6 ops per row and block). Key for DRAM: the software prefetch of the
 * next row group (see AVX-512 notes).
 *
 * Activations are expected in [-127, 127] (what the quantizers produce); the AVX2 variant's
 * vpmaddubsw could saturate for activation -128 against weight -128. Weights may use the full
 * int8 range. See the kernels' comments for the inner-loop designs.
 */
#include "krt_quant.h"
#include "krt_gvpack.h"

#define KRT_GV_Q8_BYTES 34
#define KRT_GV_Q5_BYTES 22

KRT_INLINE uint16_t krt_gv_ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

KRT_INLINE uint32_t krt_gv_ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* ======================================================================================== */
/* scalar                                                                                   */
/* ======================================================================================== */

KRT_INLINE void krt_gv_q8_0_ref(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                                const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    int64_t nb = cols / KRT_QK;
    for (int64_t r = r0; r < r1; r++) {
        const krt_block_q8_0 *wr = w + r * nb;
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            int32_t isum = 0;
            for (int j = 0; j < KRT_QK; j++) isum += (int32_t)wr[b].qs[j] * (int32_t)x[b].qs[j];
            acc += krt_scale_poison(krt_fp16_to_fp32(wr[b].d) * krt_fp16_to_fp32(x[b].d)) * (float)isum;
        }
        y[r] = bias ? acc + bias[r] : acc;
    }
}

KRT_INLINE void krt_gv_q5_0_ref(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                                const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    int64_t nb = cols / KRT_QK;
    for (int64_t r = r0; r < r1; r++) {
        const krt_block_q5_0 *wr = w + r * nb;
        float acc = 0.0f;
        for (int64_t b = 0; b < nb; b++) {
            uint32_t qh;
            memcpy(&qh, wr[b].qh, 4);
            int32_t isum = 0;
            for (int j = 0; j < KRT_QK / 2; j++) {
                int32_t q0 = (int32_t)((wr[b].qs[j] & 0x0f) | (((qh >> j) & 1u) << 4)) - 16;
                int32_t q1 = (int32_t)((wr[b].qs[j] >> 4) | (((qh >> (j + 16)) & 1u) << 4)) - 16;
                isum += q0 * (int32_t)x[b].qs[j] + q1 * (int32_t)x[b].qs[j + 16];
            }
            acc += krt_scale_poison(krt_fp16_to_fp32(wr[b].d) * krt_fp16_to_fp32(x[b].d)) * (float)isum;
        }
        y[r] = bias ? acc + bias[r] : acc;
    }
}

void krt_gemv_q8_0_ref(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                       const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gv_q8_0_ref(y, w, x, bias, cols, r0, r1);
}

void krt_gemv_q5_0_ref(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                       const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gv_q5_0_ref(y, w, x, bias, cols, r0, r1);
}

void krt_gemv_q8_0_f32_ref(float *y, const krt_block_q8_0 *w, const float *x, krt_block_q8_0 *xq,
                           const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t b = 0; b < cols / KRT_QK; b++) krt_qz_q8_0_ref(xq + b, x + b * KRT_QK);
    krt_gv_q8_0_ref(y, w, xq, bias, cols, r0, r1);
}

void krt_gemv_q5_0_f32_ref(float *y, const krt_block_q5_0 *w, const float *x, krt_block_q8_0 *xq,
                           const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t b = 0; b < cols / KRT_QK; b++) krt_qz_q8_0_ref(xq + b, x + b * KRT_QK);
    krt_gv_q5_0_ref(y, w, xq, bias, cols, r0, r1);
}

void krt_gemv_f32_ref(float *y, const float *w, const float *x, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
        const float *wr = w + r * cols;
        float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
        int64_t i = 0;
        for (; i + 4 <= cols; i += 4) {
            a0 += wr[i + 0] * x[i + 0];
            a1 += wr[i + 1] * x[i + 1];
            a2 += wr[i + 2] * x[i + 2];
            a3 += wr[i + 3] * x[i + 3];
        }
        for (; i < cols; i++) a0 += wr[i] * x[i];
        y[r] = (a0 + a1) + (a2 + a3);
    }
}

#ifdef KRT_X86

/* Software prefetch lead (bytes) past the linear position in the next row group. */
#define KRT_GV_PF_LEAD 3072

/* Row pointers of a group of 4 rows starting at r; rows past r1-1 repeat row r1-1 (computed,
 * never stored), so any row count works with one loop. */
#define KRT_GV_ROWPTR(base, rs, r, i, r1) \
    ((base) + ((r) + (i) < (r1) ? (r) + (i) : (r1) - 1) * (rs))

/* ======================================================================================== */
/* AVX2 (+FMA, F16C)                                                                        */
/*                                                                                          */
/* 4 rows per step share one activation block. Per row and block: |w| (u8) x sign(x, w) (s8)  */
/* with vpmaddubsw (pairs, no saturation since |x| <= 127), vpmaddwd by 1 -> 8 int32 lanes.  */
/* A vphaddd tree folds the 4 rows into [r0 r1 r2 r3 | r0 r1 r2 r3] (two exact half sums per */
/* row), converted once and FMA'd with [s0..s3 | s0..s3], s = d_w * d_x (4 fp16 d_w gathered  */
/* in one 64-bit GPR, one vcvtph2ps). One horizontal add per row group at the end.            */
/* The next group of 4 rows is prefetched linearly as described for AVX-512 below.           */
/* ======================================================================================== */

KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gv_dot8_avx2(__m256i w, __m256i x, __m256i ones) {
    __m256i p = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_madd_epi16(p, ones);
}

KRT_TARGET_AVX2 KRT_INLINE __m256 krt_gv_scales4_avx2(const uint8_t *p0, const uint8_t *p1, const uint8_t *p2,
                                                      const uint8_t *p3, const uint8_t *xd) {
    uint64_t dw = (uint64_t)krt_gv_ld16(p0) | ((uint64_t)krt_gv_ld16(p1) << 16) |
                  ((uint64_t)krt_gv_ld16(p2) << 32) | ((uint64_t)krt_gv_ld16(p3) << 48);
    __m256 sw = _mm256_cvtph_ps(_mm_set1_epi64x((long long)dw));
    __m256 sx = _mm256_cvtph_ps(_mm_set1_epi16((short)krt_gv_ld16(xd)));
    return krt_scale_poison_avx2(_mm256_mul_ps(sw, sx));
}

KRT_TARGET_AVX2 KRT_INLINE void krt_gv_store4_avx2(float *y, const float *bias, __m256 acc, int64_t r, int64_t r1) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
    float o[4];
    _mm_storeu_ps(o, s);
    for (int i = 0; i < 4 && r + i < r1; i++) y[r + i] = bias ? o[i] + bias[r + i] : o[i];
}

KRT_TARGET_AVX2 KRT_INLINE void krt_gv_q8_0_avx2(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                                                 const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK;
    const int64_t rs = nb * KRT_GV_Q8_BYTES;
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
    const int64_t pend = r1 * rs;
    const __m256i ones = _mm256_set1_epi16(1);
    for (int64_t r = r0; r < r1; r += 4) {
        const uint8_t *p0 = KRT_GV_ROWPTR(wb, rs, r, 0, r1);
        const uint8_t *p1 = KRT_GV_ROWPTR(wb, rs, r, 1, r1);
        const uint8_t *p2 = KRT_GV_ROWPTR(wb, rs, r, 2, r1);
        const uint8_t *p3 = KRT_GV_ROWPTR(wb, rs, r, 3, r1);
        const int64_t pf = (r + 4) * rs + KRT_GV_PF_LEAD; /* byte offsets; stop at the slice end */
        __m256 acc = _mm256_setzero_ps();
        for (int64_t o = 0; o < rs; o += KRT_GV_Q8_BYTES) {
            const int64_t q = pf + 4 * o; /* the next group, 4 rows x 34 bytes per step */
            if (q < pend) {
                _mm_prefetch((const char *)wb + q, _MM_HINT_T0);
                _mm_prefetch((const char *)wb + q + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)wb + q + 128, _MM_HINT_T0);
            }
            __m256i xv = _mm256_loadu_si256((const __m256i *)(xb + o + 2));
            __m256i i0 = krt_gv_dot8_avx2(_mm256_loadu_si256((const __m256i *)(p0 + o + 2)), xv, ones);
            __m256i i1 = krt_gv_dot8_avx2(_mm256_loadu_si256((const __m256i *)(p1 + o + 2)), xv, ones);
            __m256i i2 = krt_gv_dot8_avx2(_mm256_loadu_si256((const __m256i *)(p2 + o + 2)), xv, ones);
            __m256i i3 = krt_gv_dot8_avx2(_mm256_loadu_si256((const __m256i *)(p3 + o + 2)), xv, ones);
            __m256i h = _mm256_hadd_epi32(_mm256_hadd_epi32(i0, i1), _mm256_hadd_epi32(i2, i3));
            __m256 s = krt_gv_scales4_avx2(p0 + o, p1 + o, p2 + o, p3 + o, xb + o);
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), s, acc);
        }
        krt_gv_store4_avx2(y, bias, acc, r, r1);
    }
}

/* Q5_0: the shared driver of csrc/krt_gvpack.h (with Q4_0 and Q5_1). */
KRT_TARGET_AVX2 KRT_INLINE void krt_gv_q5_0_avx2(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                                                 const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx2(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_Q5_0);
}

KRT_TARGET_AVX2 void krt_gemv_q8_0_avx2(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                                        const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gv_q8_0_avx2(y, w, x, bias, cols, r0, r1);
}

KRT_TARGET_AVX2 void krt_gemv_q5_0_avx2(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                                        const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gv_q5_0_avx2(y, w, x, bias, cols, r0, r1);
}

KRT_TARGET_AVX2 void krt_gemv_q8_0_f32_avx2(float *y, const krt_block_q8_0 *w, const float *x, krt_block_q8_0 *xq,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t b = 0; b < cols / KRT_QK; b++) krt_qz_q8_0_avx2(xq + b, x + b * KRT_QK);
    krt_gv_q8_0_avx2(y, w, xq, bias, cols, r0, r1);
}

KRT_TARGET_AVX2 void krt_gemv_q5_0_f32_avx2(float *y, const krt_block_q5_0 *w, const float *x, krt_block_q8_0 *xq,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t b = 0; b < cols / KRT_QK; b++) krt_qz_q8_0_avx2(xq + b, x + b * KRT_QK);
    krt_gv_q5_0_avx2(y, w, xq, bias, cols, r0, r1);
}

KRT_TARGET_AVX2 KRT_INLINE float krt_gv_hsum8_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KRT_TARGET_AVX2 void krt_gemv_f32_avx2(float *y, const float *w, const float *x, int64_t cols, int64_t r0, int64_t r1) {
    const int64_t pend = r1 * cols * 4;
    int64_t r = r0;
    for (; r + 4 <= r1; r += 4) {
        const float *w0 = w + r * cols, *w1 = w0 + cols, *w2 = w1 + cols, *w3 = w2 + cols;
        const int64_t pf = (r + 4) * cols * 4 + KRT_GV_PF_LEAD; /* byte offsets in w */
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        __m256 a2 = _mm256_setzero_ps(), a3 = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 8 <= cols; i += 8) {
            const int64_t q = pf + 16 * i; /* next 4 rows: 128 bytes per step */
            if (q < pend) {
                _mm_prefetch((const char *)w + q, _MM_HINT_T0);
                _mm_prefetch((const char *)w + q + 64, _MM_HINT_T0);
            }
            __m256 xv = _mm256_loadu_ps(x + i);
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), xv, a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w1 + i), xv, a1);
            a2 = _mm256_fmadd_ps(_mm256_loadu_ps(w2 + i), xv, a2);
            a3 = _mm256_fmadd_ps(_mm256_loadu_ps(w3 + i), xv, a3);
        }
        float s0 = krt_gv_hsum8_avx2(a0), s1 = krt_gv_hsum8_avx2(a1);
        float s2 = krt_gv_hsum8_avx2(a2), s3 = krt_gv_hsum8_avx2(a3);
        for (; i < cols; i++) {
            s0 += w0[i] * x[i];
            s1 += w1[i] * x[i];
            s2 += w2[i] * x[i];
            s3 += w3[i] * x[i];
        }
        y[r] = s0;
        y[r + 1] = s1;
        y[r + 2] = s2;
        y[r + 3] = s3;
    }
    for (; r < r1; r++) {
        const float *w0 = w + r * cols;
        __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
        int64_t i = 0;
        for (; i + 16 <= cols; i += 16) {
            a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), _mm256_loadu_ps(x + i), a0);
            a1 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i + 8), _mm256_loadu_ps(x + i + 8), a1);
        }
        for (; i + 8 <= cols; i += 8) a0 = _mm256_fmadd_ps(_mm256_loadu_ps(w0 + i), _mm256_loadu_ps(x + i), a0);
        float s0 = krt_gv_hsum8_avx2(_mm256_add_ps(a0, a1));
        for (; i < cols; i++) s0 += w0[i] * x[i];
        y[r] = s0;
    }
}

/* ======================================================================================== */
/* AVX-512 (F/BW/VL/DQ + VNNI)                                                              */
/*                                                                                          */
/* Q8_0: vpdpbusd multiplies unsigned by signed bytes. Weights are made unsigned by xor 0x80  */
/* (w + 128) and the bias this adds, 128 * sum(x) per dword lane, is computed once per        */
/* activation block (vpdpbusd of 0x80 bytes by x) and used, negated, as the accumulator's    */
/* start value: vpdpbusd(-128*sum4(x), w^0x80, x) = sum4(w*x) exactly, for every int8 value.  */
/* 4 rows per step; each zmm holds one block of two rows ([row a | row b], 32 bytes each)     */
/* against [x | x], giving 16 exact int32 partial sums; they are converted and FMA'd into a   */
/* per-pair float accumulator with the per-lane scale [s_a x8 | s_b x8] (one vpermps of the   */
/* 4 scales s = d_w * d_x, gathered with masked vpbroadcastw into one xmm + one vcvtph2ps).   */
/* The 2 accumulators are reduced once per row group. (8 rows per step compute ~10% faster    */
/* from L1 but stream ~5% slower from DRAM; 4 rows match the AVX2 access pattern.)            */
/* Prefetch (all quantized kernels): while computing a row group, the next group's bytes     */
/* (contiguous in memory) are prefetched linearly, G bytes per byte of row progress for a    */
/* group of G rows, KRT_GV_PF_LEAD bytes ahead: this keeps enough lines in flight to stream  */
/* at DRAM bandwidth (the hardware prefetcher alone gives ~20-30% on 896-column rows, whose  */
/* per-row streams are only 15 lines long). The AVX-512 kernels prefetch into L2 (T1): on    */
/* Zen 4, T0 (L1) ran 4096- and 8192-column rows at 13 GB/s, T1 at 18-19 (same run).         */
/* ======================================================================================== */

KRT_TARGET_AVX512 KRT_INLINE __m512 krt_gv_q8pair_avx512(const uint8_t *a, const uint8_t *b, __m512i xv,
                                                         __m512i corr, __m512i c80) {
    __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                                   _mm256_loadu_si256((const __m256i *)b), 1);
    return _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(corr, _mm512_xor_si512(w, c80), xv));
}

/* [row a | row b] accumulators f0 (rows 0, 1) and f1 (rows 2, 3) -> [r0 r1 r2 r3]. */
KRT_TARGET_AVX512 KRT_INLINE __m128 krt_gv_pairsum_avx512(__m512 f0, __m512 f1) {
    __m512 a = _mm512_add_ps(_mm512_unpacklo_ps(f0, f1), _mm512_unpackhi_ps(f0, f1));
    a = _mm512_add_ps(a, _mm512_permute_ps(a, 0x4e)); /* 128-bit lane L: [f0_L f1_L f0_L f1_L] */
    /* lanes 0,1 hold the "a" rows, lanes 2,3 the "b" rows */
    a = _mm512_add_ps(a, _mm512_permutexvar_ps(_mm512_setr_epi32(4, 5, 6, 7, 0, 0, 0, 0, 12, 13, 14, 15, 0, 0, 0, 0), a));
    return _mm512_castps512_ps128(
        _mm512_permutexvar_ps(_mm512_setr_epi32(0, 8, 1, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), a));
}

KRT_TARGET_AVX512 KRT_INLINE void krt_gv_store4_avx512(float *y, const float *bias, __m128 acc, int64_t r, int64_t r1) {
    __mmask8 m = r + 4 <= r1 ? (__mmask8)0x0f : (__mmask8)((1u << (r1 - r)) - 1u);
    if (bias) acc = _mm_add_ps(acc, _mm_maskz_loadu_ps(m, bias + r));
    _mm_mask_storeu_ps(y + r, m, acc);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_gv_q8_0_avx512(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                                                     const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK;
    const int64_t rs = nb * KRT_GV_Q8_BYTES;
    const uint8_t *wb = (const uint8_t *)w;
    const uint8_t *xb = (const uint8_t *)x;
    const int64_t pend = r1 * rs;
    const __m512i c80 = _mm512_set1_epi8((char)0x80);
    const __m512i i01 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    const __m512i i23 = _mm512_setr_epi32(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3);
    for (int64_t r = r0; r < r1; r += 4) {
        const uint8_t *p0 = KRT_GV_ROWPTR(wb, rs, r, 0, r1);
        const uint8_t *p1 = KRT_GV_ROWPTR(wb, rs, r, 1, r1);
        const uint8_t *p2 = KRT_GV_ROWPTR(wb, rs, r, 2, r1);
        const uint8_t *p3 = KRT_GV_ROWPTR(wb, rs, r, 3, r1);
        const int64_t pf = (r + 4) * rs + KRT_GV_PF_LEAD; /* byte offsets; stop at the slice end */
        __m512 f0 = _mm512_setzero_ps(), f1 = _mm512_setzero_ps();
        for (int64_t o = 0; o < rs; o += KRT_GV_Q8_BYTES) {
            const int64_t q = pf + 4 * o; /* the next group, 4 rows x 34 bytes per step */
            if (q < pend) {
                _mm_prefetch((const char *)wb + q, _MM_HINT_T1);
                _mm_prefetch((const char *)wb + q + 64, _MM_HINT_T1);
                _mm_prefetch((const char *)wb + q + 128, _MM_HINT_T1);
            }
            __m512i xv = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(xb + o + 2)));
            __m512i corr = _mm512_sub_epi32(_mm512_setzero_si512(),
                                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), c80, xv));
            /* fp32(d_w) of the 4 rows (masked vpbroadcastw) times fp32(d_x) */
            __m128i d = _mm_set1_epi16((short)krt_gv_ld16(p0 + o));
            d = _mm_mask_set1_epi16(d, 0x02, (short)krt_gv_ld16(p1 + o));
            d = _mm_mask_set1_epi16(d, 0x04, (short)krt_gv_ld16(p2 + o));
            d = _mm_mask_set1_epi16(d, 0x08, (short)krt_gv_ld16(p3 + o));
            __m512 s = _mm512_castps256_ps512(krt_scale_poison_avx2(
                _mm256_mul_ps(_mm256_cvtph_ps(d), _mm256_cvtph_ps(_mm_set1_epi16((short)krt_gv_ld16(xb + o))))));
            f0 = _mm512_fmadd_ps(krt_gv_q8pair_avx512(p0 + o + 2, p1 + o + 2, xv, corr, c80), _mm512_permutexvar_ps(i01, s), f0);
            f1 = _mm512_fmadd_ps(krt_gv_q8pair_avx512(p2 + o + 2, p3 + o + 2, xv, corr, c80), _mm512_permutexvar_ps(i23, s), f1);
        }
        krt_gv_store4_avx512(y, bias, krt_gv_pairsum_avx512(f0, f1), r, r1);
    }
}

/* Q5_0: the packed-lane driver of csrc/krt_gvpack.h (shared with Q4_0 and Q5_1). */
KRT_TARGET_AVX512 KRT_INLINE void krt_gv_q5_0_avx512(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                                                     const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx512(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_Q5_0);
}

KRT_TARGET_AVX512 void krt_gemv_q8_0_avx512(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gv_q8_0_avx512(y, w, x, bias, cols, r0, r1);
}

KRT_TARGET_AVX512 void krt_gemv_q5_0_avx512(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gv_q5_0_avx512(y, w, x, bias, cols, r0, r1);
}

KRT_TARGET_AVX512 void krt_gemv_q8_0_f32_avx512(float *y, const krt_block_q8_0 *w, const float *x, krt_block_q8_0 *xq,
                                                const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t b = 0; b < cols / KRT_QK; b++) krt_qz_q8_0_avx512(xq + b, x + b * KRT_QK);
    krt_gv_q8_0_avx512(y, w, xq, bias, cols, r0, r1);
}

KRT_TARGET_AVX512 void krt_gemv_q5_0_f32_avx512(float *y, const krt_block_q5_0 *w, const float *x, krt_block_q8_0 *xq,
                                                const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    for (int64_t b = 0; b < cols / KRT_QK; b++) krt_qz_q8_0_avx512(xq + b, x + b * KRT_QK);
    krt_gv_q5_0_avx512(y, w, xq, bias, cols, r0, r1);
}

KRT_TARGET_AVX512 void krt_gemv_f32_avx512(float *y, const float *w, const float *x, int64_t cols, int64_t r0,
                                           int64_t r1) {
    const int64_t pend = r1 * cols * 4;
    for (int64_t r = r0; r < r1; r += 4) {
        const float *w0 = KRT_GV_ROWPTR(w, cols, r, 0, r1);
        const float *w1 = KRT_GV_ROWPTR(w, cols, r, 1, r1);
        const float *w2 = KRT_GV_ROWPTR(w, cols, r, 2, r1);
        const float *w3 = KRT_GV_ROWPTR(w, cols, r, 3, r1);
        const int64_t pf = (r + 4) * cols * 4 + KRT_GV_PF_LEAD; /* byte offsets in w */
        __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
        __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
        for (int64_t i = 0; i < cols; i += 16) {
            const int64_t q = pf + 16 * i; /* next 4 rows: 256 bytes per step */
            if (q < pend) {
                _mm_prefetch((const char *)w + q, _MM_HINT_T0);
                _mm_prefetch((const char *)w + q + 64, _MM_HINT_T0);
                _mm_prefetch((const char *)w + q + 128, _MM_HINT_T0);
                _mm_prefetch((const char *)w + q + 192, _MM_HINT_T0);
            }
            int64_t left = cols - i;
            __mmask16 m = left >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << left) - 1u);
            __m512 xv = _mm512_maskz_loadu_ps(m, x + i);
            a0 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w0 + i), xv, a0);
            a1 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w1 + i), xv, a1);
            a2 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w2 + i), xv, a2);
            a3 = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, w3 + i), xv, a3);
        }
        float s[4] = {_mm512_reduce_add_ps(a0), _mm512_reduce_add_ps(a1), _mm512_reduce_add_ps(a2),
                      _mm512_reduce_add_ps(a3)};
        for (int i = 0; i < 4 && r + i < r1; i++) y[r + i] = s[i];
    }
}

#undef KRT_GV_ROWPTR
#undef KRT_GV_PF_LEAD
#endif /* KRT_X86 */

#undef KRT_GV_Q8_BYTES
#undef KRT_GV_Q5_BYTES
