/* csrc/gemv_k.c - GEMV for decode of Q4_0 and Q5_1 (x: Q8_0) and Q4_K, Q5_K, Q6_K (x: Q8_K),
 * slice rows r0..r1.
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no libm
 * calls and no calls out of a function (helpers are static inline) so that c2goasm can translate
 * the object code. Three variants per kernel: _ref (scalar, the definition in krt_kdot.h),
 * _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512, VNNI). Helpers are prefixed krt_gq_ (K) and
 * krt_gp_ (Q4_0 / Q5_0 / Q5_1: the shared driver of krt_gvpack.h, also used by gemv.c's Q5_0).
 * The SIMD variants round differently from _ref (lane-wise FMA), within a few ulp of the rounded
 * terms' magnitude (csrc/tests/test_gemv_k.c). Non-finite scales (krt_kdot.h): a block with a NaN
 * or +-Inf d / m / dmin (weights) or d_x (activations) makes the row's output NaN in every
 * variant; the SIMD variants poison the per-block scale vector (krt_scale_poison, two ops per
 * block x 4 rows), outside the integer loop.
 *
 * Which variant wins on this machine kind (2 vCPU Zen 4, AVX-512 executed as two 256-bit halves):
 * AVX-512 for every type. One thread, weights streamed from DRAM (csrc/tests/bench_quant, 5
 * rounds, median of same-run ratios to the better streaming read, 24.6 GB/s), GB/s and %:
 *            896x896  4864x896  896x4864  151936x896  2048x2048  8192x2048  2048x8192
 *   Q8_0  512   23.2 93%  23.4 94%  24.5 99%  23.0 93%   24.7 100%  25.2 101%  24.4 101%
 *         2     25.6 104% 25.1 102% 15.7 63%  24.9 102%  25.4 102%  23.7 98%   14.3 58%
 *   Q5_0  512   20.8 84%  20.8 84%  21.7 89%  20.7 84%   21.8 88%   22.4 90%   21.5 88%
 *         2     14.9 61%  15.0 61%  14.1 58%  14.6 58%   15.1 61%   14.8 60%   13.2 53%
 *   Q4_0  512   23.3 98%  24.6 102% 24.1 100% 23.6 94%   24.3 98%   23.8 99%   23.7 98%
 *         2     19.4 79%  19.5 79%  18.0 74%  19.2 77%   20.5 83%   20.6 84%   14.9 60%
 *   Q5_1  512   21.1 87%  21.8 89%  22.4 94%  22.2 90%   22.8 93%   22.3 91%   22.3 91%
 *         2     12.8 52%  12.9 52%  12.4 50%  12.5 51%   12.9 53%   12.7 51%   11.8 47%
 *   Q4_K  512                       22.7 91%             22.0 89%   22.2 89%   19.3 81%
 *         2                         19.0 77%             18.2 73%   18.2 73%   17.7 71%
 *   Q5_K  512                       23.2 95%             22.0 88%   22.6 90%   21.6 87%
 *         2                         18.3 73%             17.6 73%   18.0 74%   17.7 71%
 *   Q6_K  512                       21.5 86%             19.9 80%   20.3 82%   19.9 83%
 *         2                         21.0 85%             19.8 80%   17.1 71%   19.9 79%
 * (512 = _avx512, 2 = _avx2; K-quants need cols % 256 == 0.) Why: a zmm op costs two 256-bit
 * pipe slots here, so AVX-512 wins only by needing fewer of them; it does, because vpdpbusd does
 * what vpmaddubsw + vpmaddwd + vpaddd do, masks replace byte compares, and vpermt2w gathers.
 * Instructions in the inner loop (objdump of the gcc -O3 build), per 32 weights:
 *   Q8_0  avx512  9.3 (4.3 zmm)    avx2 13.0 (7.3 ymm)     Q4_0  avx512 4.3 (3.2 zmm)  avx2 15.3 (9.3 ymm)
 *   Q5_0  avx512  7.7 (4.7 zmm)    avx2 21.8 (14.5 ymm)    Q5_1  avx512 8.1 (4.9 zmm)  avx2 27.0 (16.8 ymm)
 *   Q4_K  avx512  5.4 (3.0 zmm)    avx2 10.6 (7.0 ymm)     Q5_K  avx512 6.6 (4.1 zmm)  avx2 13.8 (10.6 ymm)
 *   Q6_K  avx512  5.8 (4.3 zmm)    avx2 13.0 (10.6 ymm)
 * Compute-bound (L2-resident, best of 300 calls): AVX-512 Q8_0 41, Q5_0 27, Q4_0 34, Q5_1 29,
 * Q4_K 34, Q5_K 29, Q6_K 35 GB/s; AVX2 Q8_0 39, Q5_0 15, Q4_0 21, Q5_1 13, Q4_K 21, Q5_K 21,
 * Q6_K 26. AVX2 Q8_0 streams short rows slightly better (its L1 prefetch) but falls to 58-63% on
 * 4864- and 8192-column rows, so AVX-512 is the better choice for Q8_0 too. On CPUs with native
 * 512-bit units the AVX-512 margin only grows.
 */
#include "krt_kdot.h"
#include "krt_gvpack.h"

/* ======================================================================================== */
/* scalar                                                                                   */
/* ======================================================================================== */

#define KRT_GK_REF(T, XT, QK)                                                                      \
    void krt_gemv_##T##_ref(float *y, const krt_block_##T *w, const krt_block_##XT *x, const float *bias, \
                            int64_t cols, int64_t r0, int64_t r1) {                               \
        const int64_t nb = cols / (QK);                                                            \
        for (int64_t r = r0; r < r1; r++) {                                                        \
            float acc = krt_kd_##T(w + r * nb, x, nb);                                             \
            y[r] = bias ? acc + bias[r] : acc;                                                     \
        }                                                                                          \
    }

KRT_GK_REF(q4_0, q8_0, KRT_QK)
KRT_GK_REF(q5_1, q8_0, KRT_QK)
KRT_GK_REF(q4_K, q8_K, KRT_QK_K)
KRT_GK_REF(q5_K, q8_K, KRT_QK_K)
KRT_GK_REF(q6_K, q8_K, KRT_QK_K)

#undef KRT_GK_REF

#ifdef KRT_X86

KRT_TARGET_AVX2 void krt_gemv_q4_0_avx2(float *y, const krt_block_q4_0 *w, const krt_block_q8_0 *x, const float *bias,
                                        int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx2(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_Q4_0);
}

KRT_TARGET_AVX2 void krt_gemv_q5_1_avx2(float *y, const krt_block_q5_1 *w, const krt_block_q8_0 *x, const float *bias,
                                        int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx2(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_Q5_1);
}

/* ======================================================================================== */
/* AVX-512: Q4_0 and Q5_1 through the shared packed-lane driver (csrc/krt_gvpack.h)           */
/* ======================================================================================== */

KRT_TARGET_AVX512 void krt_gemv_q4_0_avx512(float *y, const krt_block_q4_0 *w, const krt_block_q8_0 *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx512(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_Q4_0);
}

KRT_TARGET_AVX512 void krt_gemv_q5_1_avx512(float *y, const krt_block_q5_1 *w, const krt_block_q8_0 *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gp_gemv_avx512(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GP_Q5_1);
}
/* ======================================================================================== */
/* AVX-512: the K-quants (Q4_K, Q5_K, Q6_K), one driver                                      */
/*                                                                                          */
/* Per row and super-block: the 128 low-bit bytes (qs / ql) are two 64-byte loads; their low  */
/* and high nibbles (plus the 5th bit of Q5_K, the 2 high bits of Q6_K, merged with one       */
/* variable word shift of the broadcast qh bytes and one vpternlogd each) give four vectors   */
/* of 64 unsigned quants, each against its own arrangement of the activations (prepared once  */
/* per call): vpdpbusd leaves int32 lanes of 4 products, which fit int16, so vpackssdw pairs   */
/* two vectors and vpmaddwd multiplies by the sub-block scales (one vpermw builds the words)   */
/* while summing pairs: 16 int32 lanes whose sum is sum_j sc_j * dot_j, exact. Q6_K's offset   */
/* -32 is the accumulator's start value (-32 * sum4(x) per lane); the Q4_K / Q5_K min term is  */
/* vpmaddwd of the 8 mins with the activation's bsum pairs. Per row and super-block then one   */
/* cvt and one FMA with d * d_x broadcast from a 4-row table (vcvtph2ps of 4 rows' d / dmin).  */
/* Rows run in groups of 4 sharing that table and the linear prefetch of the next group.      */
/* ======================================================================================== */

#define KRT_GQ_Q4_K 0
#define KRT_GQ_Q5_K 1
#define KRT_GQ_Q6_K 2
#define KRT_GQ_BS(T) ((T) == KRT_GQ_Q4_K ? 144 : (T) == KRT_GQ_Q5_K ? 176 : 210)
#define KRT_GQ_SB 32 /* super-blocks per column chunk (8192 columns) */
#ifndef KRT_GQ_PF_LEAD
#define KRT_GQ_PF_LEAD 8192
#endif

/* The activation side of one super-block. */
typedef struct {
    __m512i x[4];  /* the activations matching quant vectors 0..3 */
    __m512i cr[4]; /* Q6_K: -32 * sum4(x) per lane of each vector */
    __m256i bw;    /* Q4_K / Q5_K: words 8..15 = bsums[2j] + bsums[2j+1], words 0..7 = 0 */
    float dx;
} krt_gq_xsb;

KRT_TARGET_AVX512 KRT_INLINE __m512i krt_gq_cat(const int8_t *a, const int8_t *b) {
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a)),
                              _mm256_loadu_si256((const __m256i *)b), 1);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_gq_prep_avx512(krt_gq_xsb *st, const krt_block_q8_K *x, const int T) {
    const int8_t *q = x->qs;
    if (T == KRT_GQ_Q6_K) {
        const __m512i c32 = _mm512_set1_epi8(32);
        for (int v = 0; v < 4; v++) {
            st->x[v] = _mm512_loadu_si512((const void *)(q + 64 * v));
            st->cr[v] = _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), c32, st->x[v]));
        }
        st->bw = _mm256_setzero_si256();
    } else {
        st->x[0] = krt_gq_cat(q + 0, q + 64);
        st->x[1] = krt_gq_cat(q + 32, q + 96);
        st->x[2] = krt_gq_cat(q + 128, q + 192);
        st->x[3] = krt_gq_cat(q + 160, q + 224);
        __m256i b = _mm256_loadu_si256((const __m256i *)x->bsums);
        __m256i pairs = _mm256_madd_epi16(b, _mm256_set1_epi16(1)); /* 8 int32: bsums[2j] + bsums[2j+1] */
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
        st->bw = _mm256_inserti128_si256(_mm256_setzero_si256(), w, 1);
        for (int v = 0; v < 4; v++) st->cr[v] = _mm512_setzero_si512();
    }
    st->dx = x->d;
}

/* Sub-block scale (and min) words of one row's super-block: Q4_K / Q5_K words 0..7 = sc, 8..15 = m;
 * Q6_K words 0..15 = the signed scales. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gq_scm(const uint8_t *blk, const int T) {
    if (T == KRT_GQ_Q6_K) return _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(blk + 192)));
    /* 12 bytes s[0..11] at blk + 4: sc0..3 = s0..3 & 63, m0..3 = s4..7 & 63,
     * sc4..7 = (s8..11 & 15) | (s0..3 >> 6) << 4, m4..7 = (s8..11 >> 4) | (s4..7 >> 6) << 4 */
    __m128i h = _mm_loadu_si128((const __m128i *)blk); /* d, dmin, s0..s11 at bytes 4..15 */
    /* u = [s0..3 | s8..11 | s4..7 | s8..11], t = [- | s0..3 | - | s4..7] */
    __m128i u = _mm_shuffle_epi8(h, _mm_setr_epi8(4, 5, 6, 7, 12, 13, 14, 15, 8, 9, 10, 11, 12, 13, 14, 15));
    __m128i t = _mm_shuffle_epi8(h, _mm_setr_epi8(-1, -1, -1, -1, 4, 5, 6, 7, -1, -1, -1, -1, 8, 9, 10, 11));
    const __m128i mlo = _mm_setr_epi8(63, 63, 63, 63, 15, 15, 15, 15, 63, 63, 63, 63, 0, 0, 0, 0);
    __m128i lo = _mm_or_si128(_mm_and_si128(u, mlo),
                              _mm_and_si128(_mm_srli_epi16(u, 4), _mm_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 15, 15, 15, 15)));
    __m128i hi = _mm_and_si128(_mm_srli_epi16(t, 2), _mm_set1_epi8(0x30)); /* (s >> 6) << 4 */
    return _mm256_cvtepu8_epi16(_mm_or_si128(lo, hi));
}

/* One row's super-block: the 16 int32 lanes whose sum is sum_j sc_j * dot_j (Q6_K: of q - 32), and
 * (Q4_K / Q5_K) the min lanes (words 8..15 of scm times the bsum pairs). */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_gq_sb_avx512(const uint8_t *blk, const krt_gq_xsb *st, __m256i *mins,
                                                     const int T) {
    const __m512i c0f = _mm512_set1_epi8(0x0f);
    const uint8_t *qs = blk + (T == KRT_GQ_Q4_K ? 16 : T == KRT_GQ_Q5_K ? 48 : 0);
    __m512i r0 = _mm512_loadu_si512((const void *)qs), r1 = _mm512_loadu_si512((const void *)(qs + 64));
    __m512i q[4] = {_mm512_and_si512(r0, c0f), _mm512_and_si512(_mm512_srli_epi16(r0, 4), c0f),
                    _mm512_and_si512(r1, c0f), _mm512_and_si512(_mm512_srli_epi16(r1, 4), c0f)};
    if (T == KRT_GQ_Q5_K) {
        /* bit j of qh[l] -> 0x10 of sub-block j's element l; vector v holds sub-blocks (a | b):
         * v0 (0 | 2), v1 (1 | 3), v2 (4 | 6), v3 (5 | 7): shift the broadcast qh so bit j lands on bit 4 */
        __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 16)));
        const __m512i s0 = _mm512_setr_epi32(4 * 0x10001, 4 * 0x10001, 4 * 0x10001, 4 * 0x10001, 4 * 0x10001, 4 * 0x10001,
                                             4 * 0x10001, 4 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001,
                                             2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001);
        const __m512i s1 = _mm512_sub_epi16(s0, _mm512_set1_epi16(1)); /* left 3 | 1 */
        q[0] = _mm512_ternarylogic_epi32(q[0], _mm512_sllv_epi16(qh, s0), _mm512_set1_epi8(0x10), 0xf8);
        q[1] = _mm512_ternarylogic_epi32(q[1], _mm512_sllv_epi16(qh, s1), _mm512_set1_epi8(0x10), 0xf8);
        const __m512i s2 = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001,
                                             2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001); /* right 0 | 2 */
        const __m512i s3 = _mm512_add_epi16(s2, _mm512_set1_epi16(1));                           /* right 1 | 3 */
        q[2] = _mm512_ternarylogic_epi32(q[2], _mm512_srlv_epi16(qh, s2), _mm512_set1_epi8(0x10), 0xf8);
        q[3] = _mm512_ternarylogic_epi32(q[3], _mm512_srlv_epi16(qh, s3), _mm512_set1_epi8(0x10), 0xf8);
    } else if (T == KRT_GQ_Q6_K) {
        /* high 2 bits: vector v = (ql half h, nibble n): bytes 0..31 take qh bits 2k, 2k+1 with
         * k = 2n, bytes 32..63 with k = 2n+1 (qh half h broadcast); move them to bits 4..5 */
        __m512i h0 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 128)));
        __m512i h1 = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(blk + 160)));
        const __m512i sl = _mm512_setr_epi32(4 * 0x10001, 4 * 0x10001, 4 * 0x10001, 4 * 0x10001, 4 * 0x10001, 4 * 0x10001,
                                             4 * 0x10001, 4 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001,
                                             2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001); /* k = 0: <<4, k = 1: <<2 */
        const __m512i sr = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001,
                                             2 * 0x10001, 2 * 0x10001, 2 * 0x10001, 2 * 0x10001); /* k = 2: 0, k = 3: >>2 */
        const __m512i c30 = _mm512_set1_epi8(0x30);
        q[0] = _mm512_ternarylogic_epi32(q[0], _mm512_sllv_epi16(h0, sl), c30, 0xf8);
        q[1] = _mm512_ternarylogic_epi32(q[1], _mm512_srlv_epi16(h0, sr), c30, 0xf8);
        q[2] = _mm512_ternarylogic_epi32(q[2], _mm512_sllv_epi16(h1, sl), c30, 0xf8);
        q[3] = _mm512_ternarylogic_epi32(q[3], _mm512_srlv_epi16(h1, sr), c30, 0xf8);
    }
    __m512i dp[4];
    for (int v = 0; v < 4; v++)
        dp[v] = _mm512_dpbusd_epi32(T == KRT_GQ_Q6_K ? st->cr[v] : _mm512_setzero_si512(), q[v], st->x[v]);
    /* scale words: pair (v0, v1) chunk c = [sc of v0's chunk c x4 | sc of v1's chunk c x4], same for (v2, v3) */
    const __m256i scm = krt_gq_scm(blk, T);
    __m512i i01, i23;
    if (T == KRT_GQ_Q6_K) { /* v0 chunk c = sub-block c, v1: 4+c, v2: 8+c, v3: 12+c */
        i01 = _mm512_setr_epi32(0, 0, 0x40004, 0x40004, 0x10001, 0x10001, 0x50005, 0x50005, 0x20002, 0x20002, 0x60006,
                                0x60006, 0x30003, 0x30003, 0x70007, 0x70007);
        i23 = _mm512_add_epi16(i01, _mm512_set1_epi16(8));
    } else { /* v0 chunks: 0 0 2 2, v1: 1 1 3 3, v2: 4 4 6 6, v3: 5 5 7 7 */
        i01 = _mm512_setr_epi32(0, 0, 0x10001, 0x10001, 0, 0, 0x10001, 0x10001, 0x20002, 0x20002, 0x30003, 0x30003,
                                0x20002, 0x20002, 0x30003, 0x30003);
        i23 = _mm512_add_epi16(i01, _mm512_set1_epi16(4));
        *mins = _mm256_madd_epi16(scm, st->bw);
    }
    const __m512i scz = _mm512_castsi256_si512(scm);
    __m512i a = _mm512_madd_epi16(_mm512_packs_epi32(dp[0], dp[1]), _mm512_permutexvar_epi16(i01, scz));
    __m512i b = _mm512_madd_epi16(_mm512_packs_epi32(dp[2], dp[3]), _mm512_permutexvar_epi16(i23, scz));
    return _mm512_add_epi32(a, b);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_gq_gemv_avx512(float *y, const uint8_t *w, const krt_block_q8_K *x,
                                                    const float *bias, int64_t cols, int64_t r0, int64_t r1,
                                                    const int T) {
    const int BS = KRT_GQ_BS(T), DOFF = T == KRT_GQ_Q6_K ? 208 : 0;
    const int64_t nb = cols / KRT_QK_K, rs = nb * BS, pend = r1 * rs;
    krt_gq_xsb xs[KRT_GQ_SB];
    float sd[8]; /* per row i: d * d_x at 2i, dmin * d_x at 2i + 1 */
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_GQ_SB) {
        const int64_t cn = nb - c0 < KRT_GQ_SB ? nb - c0 : KRT_GQ_SB;
        for (int64_t b = 0; b < cn; b++) krt_gq_prep_avx512(&xs[b], x + c0 + b, T);
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r += 4) {
            const uint8_t *p[4];
            for (int i = 0; i < 4; i++) p[i] = w + (r + i < r1 ? r + i : r1 - 1) * rs + c0 * BS;
            const int64_t pf = (r + 4) * rs + c0 * BS + KRT_GQ_PF_LEAD; /* the next group, linearly */
            __m512 acc[4];
            __m256 accm[4];
            for (int i = 0; i < 4; i++) {
                acc[i] = _mm512_setzero_ps();
                accm[i] = _mm256_setzero_ps();
            }
            for (int64_t b = 0; b < cn; b++) {
                const int64_t o = b * BS;
                const int64_t q = pf + 4 * o; /* 4 rows x BS bytes per super-block */
                if (q < pend) {
                    for (int l = 0; l < 4 * BS; l += 64) _mm_prefetch((const char *)w + q + l, _MM_HINT_T1);
                }
                /* d (and dmin) of the 4 rows times d_x */
                uint32_t dd[4];
                for (int i = 0; i < 4; i++) memcpy(&dd[i], p[i] + o + DOFF, T == KRT_GQ_Q6_K ? 2 : 4);
                if (T == KRT_GQ_Q6_K)
                    for (int i = 0; i < 4; i++) dd[i] &= 0xffffu;
                __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dd));
                _mm256_storeu_ps(sd, krt_scale_poison_avx2(_mm256_mul_ps(f, _mm256_set1_ps(xs[b].dx)))); /* krt_kdot.h */
                __asm__ volatile("" ::: "memory"); /* keep sd in memory: the FMAs broadcast from it for free */
                for (int i = 0; i < 4; i++) {
                    __m256i mins = _mm256_setzero_si256();
                    __m512i v = krt_gq_sb_avx512(p[i] + o, &xs[b], &mins, T);
                    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(sd[2 * i]), acc[i]);
                    if (T != KRT_GQ_Q6_K)
                        accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(sd[2 * i + 1]), accm[i]);
                }
            }
            float o4[4];
            for (int i = 0; i < 4; i++) o4[i] = _mm512_reduce_add_ps(acc[i]);
            if (T != KRT_GQ_Q6_K) {
                for (int i = 0; i < 4; i++) {
                    __m128 m = _mm_add_ps(_mm256_castps256_ps128(accm[i]), _mm256_extractf128_ps(accm[i], 1));
                    m = _mm_add_ps(m, _mm_movehl_ps(m, m));
                    m = _mm_add_ss(m, _mm_movehdup_ps(m));
                    o4[i] -= _mm_cvtss_f32(m);
                }
            }
            __m128 a4 = _mm_loadu_ps(o4);
            const __mmask8 m = r + 4 <= r1 ? (__mmask8)0x0f : (__mmask8)((1u << (r1 - r)) - 1u);
            if (c0 > 0) a4 = _mm_add_ps(_mm_maskz_loadu_ps(m, y + r), a4);
            if (last && bias) a4 = _mm_add_ps(a4, _mm_maskz_loadu_ps(m, bias + r));
            _mm_mask_storeu_ps(y + r, m, a4);
        }
    }
}

KRT_TARGET_AVX512 void krt_gemv_q4_K_avx512(float *y, const krt_block_q4_K *w, const krt_block_q8_K *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gq_gemv_avx512(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GQ_Q4_K);
}

KRT_TARGET_AVX512 void krt_gemv_q5_K_avx512(float *y, const krt_block_q5_K *w, const krt_block_q8_K *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gq_gemv_avx512(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GQ_Q5_K);
}

KRT_TARGET_AVX512 void krt_gemv_q6_K_avx512(float *y, const krt_block_q6_K *w, const krt_block_q8_K *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    krt_gq_gemv_avx512(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GQ_Q6_K);
}
/* ======================================================================================== */
/* AVX2: the K-quants, one driver. Per row and super-block, 32 quants at a time (one sub-block  */
/* of Q4_K / Q5_K, two of Q6_K): vpmaddubsw with the activations (pairs fit int16: q <= 63), Q6_K */
/* minus 32 x the activation pair sums (prepared once per call), vpmaddwd with the sub-block     */
/* scale words (one vpshufb each) into 8 int32 lanes: exact sum_j sc_j dot_j; then one cvt and   */
/* one FMA with d * d_x per row and super-block; mins via vpmaddwd with the bsum pairs.          */
/* ======================================================================================== */

typedef struct {
    __m256i o32[8]; /* Q6_K: 32 * (x_2i + x_2i+1) of each 32-quant group */
    __m256i bw;     /* Q4_K / Q5_K: words 8..15 = bsum pairs */
    float dx;
} krt_gq_xsb2;

KRT_TARGET_AVX2 KRT_INLINE void krt_gq_prep_avx2(krt_gq_xsb2 *st, const krt_block_q8_K *x, const int T) {
    if (T == KRT_GQ_Q6_K) {
        for (int g = 0; g < 8; g++)
            st->o32[g] = _mm256_maddubs_epi16(_mm256_set1_epi8(32), _mm256_loadu_si256((const __m256i *)(x->qs + 32 * g)));
        st->bw = _mm256_setzero_si256();
    } else {
        __m256i pairs = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)x->bsums), _mm256_set1_epi16(1));
        __m128i w = _mm_packs_epi32(_mm256_castsi256_si128(pairs), _mm256_extracti128_si256(pairs, 1));
        st->bw = _mm256_inserti128_si256(_mm256_setzero_si256(), w, 1);
    }
    st->dx = x->d;
}

/* Word j (0..7) of the 128-bit source broadcast to 8 words, in both lanes (a, b: lane words). */
#define KRT_GQ_WSEL2(a, b) \
    _mm256_setr_epi8(2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), \
                     2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (a), 2 * (a) + 1, 2 * (b), 2 * (b) + 1, \
                     2 * (b), 2 * (b) + 1, 2 * (b), 2 * (b) + 1, 2 * (b), 2 * (b) + 1, 2 * (b), 2 * (b) + 1, 2 * (b),     \
                     2 * (b) + 1, 2 * (b), 2 * (b) + 1, 2 * (b), 2 * (b) + 1)

KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gq_sb_avx2(const uint8_t *blk, const krt_block_q8_K *x, const krt_gq_xsb2 *st,
                                                 __m256i *mins, const int T) {
    const __m256i c0f = _mm256_set1_epi8(0x0f);
    const __m256i scm = krt_gq_scm(blk, T);
    __m256i acc = _mm256_setzero_si256();
    if (T == KRT_GQ_Q6_K) {
        const __m256i sl = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(scm));      /* scales 0..7 */
        const __m256i sh = _mm256_broadcastsi128_si256(_mm256_extracti128_si256(scm, 1)); /* scales 8..15 */
        const __m256i c30 = _mm256_set1_epi8(0x30);
        for (int h = 0; h < 2; h++) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
            __m256i q[4];
            q[0] = _mm256_or_si256(_mm256_and_si256(l0, c0f), _mm256_and_si256(_mm256_slli_epi16(qh, 4), c30));
            q[1] = _mm256_or_si256(_mm256_and_si256(l1, c0f), _mm256_and_si256(_mm256_slli_epi16(qh, 2), c30));
            q[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), c0f), _mm256_and_si256(qh, c30));
            q[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), c0f), _mm256_and_si256(_mm256_srli_epi16(qh, 2), c30));
            for (int k = 0; k < 4; k++) {
                const int g = 4 * h + k; /* elements 32g..32g+31: sub-blocks 2g (low lane), 2g+1 */
                __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q[k], _mm256_loadu_si256((const __m256i *)(x->qs + 32 * g))),
                                             st->o32[g]);
                const __m256i src = g < 4 ? sl : sh;
                const int j = (2 * g) & 7;
                acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p, _mm256_shuffle_epi8(src, KRT_GQ_WSEL2(j, j + 1))));
            }
        }
    } else {
        const __m256i sc = _mm256_broadcastsi128_si256(_mm256_castsi256_si128(scm)); /* sc0..7 words */
        const uint8_t *qs = blk + (T == KRT_GQ_Q4_K ? 16 : 48);
        const __m256i qh = T == KRT_GQ_Q5_K ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : _mm256_setzero_si256();
        /* Unrolled so each shuffle control is a constant: clang-14 (asm/) otherwise rebuilds
           it with 16 inserts per iteration, which made this path 4-5x slower than gcc's. */
#if defined(__clang__)
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 4
#endif
        for (int k = 0; k < 4; k++) {
            const __m256i r = _mm256_loadu_si256((const __m256i *)(qs + 32 * k));
            __m256i lo = _mm256_and_si256(r, c0f), hi = _mm256_and_si256(_mm256_srli_epi16(r, 4), c0f);
            if (T == KRT_GQ_Q5_K) { /* bit 2k (2k+1) of qh[l] is the 5th bit of sub-block 2k (2k+1) */
                const __m256i h = _mm256_srli_epi16(qh, 2 * k), c10 = _mm256_set1_epi8(0x10);
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), c10));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), c10));
            }
            __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(x->qs + 64 * k)));
            __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(x->qs + 64 * k + 32)));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(plo, _mm256_shuffle_epi8(sc, KRT_GQ_WSEL2(2 * k, 2 * k))));
            acc = _mm256_add_epi32(acc, _mm256_madd_epi16(phi, _mm256_shuffle_epi8(sc, KRT_GQ_WSEL2(2 * k + 1, 2 * k + 1))));
        }
        *mins = _mm256_madd_epi16(scm, st->bw);
    }
    return acc;
}

KRT_TARGET_AVX2 KRT_INLINE void krt_gq_gemv_avx2(float *y, const uint8_t *w, const krt_block_q8_K *x, const float *bias,
                                                int64_t cols, int64_t r0, int64_t r1, const int T) {
    const int BS = KRT_GQ_BS(T), DOFF = T == KRT_GQ_Q6_K ? 208 : 0;
    const int64_t nb = cols / KRT_QK_K, rs = nb * BS, pend = r1 * rs;
    krt_gq_xsb2 xs[KRT_GQ_SB];
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_GQ_SB) {
        const int64_t cn = nb - c0 < KRT_GQ_SB ? nb - c0 : KRT_GQ_SB;
        for (int64_t b = 0; b < cn; b++) krt_gq_prep_avx2(&xs[b], x + c0 + b, T);
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *p = w + r * rs + c0 * BS;
            const int64_t pf = (r + 1) * rs + c0 * BS + KRT_GQ_PF_LEAD;
            __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
            for (int64_t b = 0; b < cn; b++) {
                const int64_t q = pf + b * BS;
                if (q < pend) {
                    for (int l = 0; l < BS; l += 64) _mm_prefetch((const char *)w + q + l, _MM_HINT_T1);
                }
                const uint8_t *blk = p + b * BS;
                uint32_t dd = 0;
                memcpy(&dd, blk + DOFF, T == KRT_GQ_Q6_K ? 2 : 4);
                __m128 f = krt_scale_poison_sse(_mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(xs[b].dx))); /* d, dmin */
                __m256i mins = _mm256_setzero_si256();
                __m256i v = krt_gq_sb_avx2(blk, x + c0 + b, &xs[b], &mins, T);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_broadcastss_ps(f), acc);
                if (T != KRT_GQ_Q6_K)
                    accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_broadcastss_ps(_mm_movehdup_ps(f)), accm);
            }
            acc = _mm256_sub_ps(acc, accm);
            __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
            s4 = _mm_add_ps(s4, _mm_movehl_ps(s4, s4));
            s4 = _mm_add_ss(s4, _mm_movehdup_ps(s4));
            float o = _mm_cvtss_f32(s4);
            if (c0 > 0) o = y[r] + o;
            if (last && bias) o = o + bias[r];
            y[r] = o;
        }
    }
}

KRT_TARGET_AVX2 void krt_gemv_q4_K_avx2(float *y, const krt_block_q4_K *w, const krt_block_q8_K *x, const float *bias,
                                        int64_t cols, int64_t r0, int64_t r1) {
    krt_gq_gemv_avx2(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GQ_Q4_K);
}

KRT_TARGET_AVX2 void krt_gemv_q5_K_avx2(float *y, const krt_block_q5_K *w, const krt_block_q8_K *x, const float *bias,
                                        int64_t cols, int64_t r0, int64_t r1) {
    krt_gq_gemv_avx2(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GQ_Q5_K);
}

KRT_TARGET_AVX2 void krt_gemv_q6_K_avx2(float *y, const krt_block_q6_K *w, const krt_block_q8_K *x, const float *bias,
                                        int64_t cols, int64_t r0, int64_t r1) {
    krt_gq_gemv_avx2(y, (const uint8_t *)w, x, bias, cols, r0, r1, KRT_GQ_Q6_K);
}
#endif
