/* csrc/gemm.c - quantized GEMM for prefill: Q8_0, Q5_0, Q4_0, Q5_1 weights x T tokens of Q8_0
 * activations, and Q4_K, Q5_K, Q6_K weights x T tokens of Q8_K activations.
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (every helper is static inline; the only
 * library functions used are memset/memcpy) so that c2goasm can translate the object code.
 * Three variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512
 * (KRT_TARGET_AVX512, VNNI vpdpbusd / vpdpwssd). A call computes rows r0..r1 for all T tokens and
 * writes only y[t*rows + r] for t in [0,T), r in [r0,r1); it reads only rows r0..r1 of w, all of
 * x, and bias[r0..r1). Scratch lives on the stack: about 97 KiB for _avx512, 50 KiB for _avx2.
 *
 * Semantics and exact order of the floating-point operations (identical in every variant, so
 * _ref, _avx2, _avx512 and the Go port give bit-identical results):
 *     acc = 0.0f
 *     for b = 0 .. cols/32-1, in order:
 *         isum = sum_j wq[r,b,j] * xq[t,b,j]             (exact, int32)
 *         s    = fp32(d_w[r,b]) * fp32(d_x[t,b])          (rounded to fp32; NaN if not finite,
 *                                                           krt_scale_poison, every type)
 *         p    = s * (float)isum                          (rounded; isum is exact in fp32)
 *         acc  = acc + p                                  (rounded; no FMA anywhere)
 *     y[t*rows + r] = bias ? acc + bias[r] : acc
 * wq is qs (Q8_0), q-16 (Q5_0), q-8 (Q4_0), kvalues_iq4nl[q] (IQ4_NL). Q5_1 and the K-quants (super-blocks of 256) follow
 * csrc/krt_kdot.h: Q5_1 p = s*(float)isum + m_w*(d_x*(float)sum(x)); Q4_K / Q5_K
 * p = (d*d_x)*(float)isum - (dmin*d_x)*(float)msum with isum = sum_j sc_j*dot_j, msum = sum_j
 * m_j*bsum_j; Q6_K p = (d*d_x)*(float)isum, isum = sum_i sc_i*sum(q-32)*x; every scale product
 * there (d*d_x, dmin*d_x, m_w*(d_x*sum x)) is NaN when not finite. These are the orders
 * of krt_gemv_*_ref, so GEMM(T=1) equals the scalar GEMV bit for bit; the SIMD GEMVs keep
 * per-lane partial sums and FMA, and agree to a few ulp of the magnitude of the rounded terms.
 *
 * Tiling of the SIMD variants: one driver for both (csrc/krt_gemm_drive.inc, included once per
 * variant), with per-variant microkernels (prep_x, pack, register tile) instantiated per type
 * through a compile-time constant (activations are NOT repacked; weights are, on the stack):
 *   token block (128 tokens _avx512, 64 _avx2)
 *     row group (512 rows; the whole slice when one column chunk covers cols)
 *       column chunk (_avx512: <= 32 blocks or 2 super-blocks, _avx2: 8 blocks or 1 super-block;
 *       balanced, so 896 columns = 1 chunk of 28 on _avx512):
 *         per token and block precompute fp32(d_x) and the accumulator start (below)
 *         row tile (32 rows _avx512, 16 _avx2): repack the tile's weights for the chunk so that
 *           one vector holds the same 4 (_avx512) or 2 (_avx2) consecutive weights of 16 (8) rows
 *           (a 16x8 dword transpose), gather fp32(d_w), unpack nibbles / high bits; prefetch the
 *           next tile's rows; then for each group of 4 (_avx512) or 3 (_avx2) tokens run the
 *           register tile (2 row vectors x 4 tokens = 8 int32 + 8 fp32 accumulators) over the
 *           chunk's blocks:
 *             int32 lanes = rows; per block and 4-byte group k, one vector load of the packed
 *             weights and one 4-byte broadcast of x straight from the caller's block feed
 *             vpdpbusd, so isum per (row, token, block) is complete in its lane with no
 *             horizontal reduction; then the fp32 update above (cvt, 2 mul, add).
 *           Partial sums go to y between chunks (stored and reloaded unchanged, so the order is
 *           unaffected; the row group keeps them in L2); bias is added after the last chunk.
 *   So each weight block is read from memory and repacked once per token block and then reused
 *   from L1 by every token of the block. The two fp32 multiplies per (row vector, token, block)
 *   share the FMA pipes with vpdpbusd (8 per block), so the bound is 8/10 of VNNI peak.
 *   Small T pays the repack (about 60 instructions per 16 rows x block) for few tokens: at T = 1
 *   a GEMV is about 2x faster; from T = 3 the GEMM wins.
 * _avx512 uses vpdpbusd (unsigned x signed): the repacked weights are the unsigned operand
 * (Q8_0: qs+128, i.e. qs^0x80; Q5_0 / Q4_0 / Q5_1 / K-quants: q unsigned), x the signed
 * broadcast, and the accumulator starts at the correction -128*sum(x) (Q8_0), -16*sum(x) (Q5_0),
 * -8*sum(x) (Q4_0), -128*sum(x) (IQ4_NL: the table value + 128), 0 (Q5_1, Q4_K, Q5_K) or -32*bsum (Q6_K, per 16-weight sub-block), so the lane
 * ends at the exact isum. Exact for every int8 input, -128 included. K-quants: per sub-block the
 * lane sum is multiplied by the row's scale (vpmulld) and added; Q4_K / Q5_K mins x bsum pairs by
 * 4 vpdpwssd of int16 pairs.
 * _avx2 widens both sides to int16 (vpmaddwd; weights repacked as int16 pairs, x widened once
 * per token block), which is exact with no saturation, so no correction is needed; K-quant
 * weights are pre-multiplied by their sub-block scale (|sc*(q-32)| <= 4096 fits int16).
 * GEMM throughput (1 thread, this Zen 4, csrc/tests/bench_gemm ... new, T = 128): _avx512 Q8_0
 * 131, Q4_0 142, Q5_1 123, Q4_K 126-139, Q5_K 133-142, Q6_K 138 GMAC/s; _avx2 55-75.
 */
#include "krt_kdot.h"

/* ------------------------------------------------------------------------------------------ */
/* _ref: the definition. */

void krt_gemm_q8_0_ref(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x, const float *bias,
                       int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK;
    for (int64_t t = 0; t < T; t++) {
        const krt_block_q8_0 *xt = x + t * nb;
        for (int64_t r = r0; r < r1; r++) {
            const krt_block_q8_0 *wr = w + r * nb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                int32_t isum = 0;
                for (int j = 0; j < KRT_QK; j++) {
                    isum += (int32_t)wr[b].qs[j] * (int32_t)xt[b].qs[j];
                }
                float s = krt_scale_poison(krt_fp16_to_fp32(wr[b].d) * krt_fp16_to_fp32(xt[b].d));
                float p = s * (float)isum;
                acc = acc + p;
            }
            if (bias) {
                acc = acc + bias[r];
            }
            y[t * rows + r] = acc;
        }
    }
}

void krt_gemm_q5_0_ref(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x, const float *bias,
                       int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK;
    for (int64_t t = 0; t < T; t++) {
        const krt_block_q8_0 *xt = x + t * nb;
        for (int64_t r = r0; r < r1; r++) {
            const krt_block_q5_0 *wr = w + r * nb;
            float acc = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                uint32_t qh = (uint32_t)wr[b].qh[0] | (uint32_t)wr[b].qh[1] << 8 |
                              (uint32_t)wr[b].qh[2] << 16 | (uint32_t)wr[b].qh[3] << 24;
                int32_t isum = 0;
                for (int j = 0; j < KRT_QK / 2; j++) {
                    int32_t lo = (int32_t)((wr[b].qs[j] & 0x0f) | ((qh >> j) & 1u) << 4) - 16;
                    int32_t hi = (int32_t)((wr[b].qs[j] >> 4) | ((qh >> (j + 16)) & 1u) << 4) - 16;
                    isum += lo * (int32_t)xt[b].qs[j] + hi * (int32_t)xt[b].qs[j + KRT_QK / 2];
                }
                float s = krt_scale_poison(krt_fp16_to_fp32(wr[b].d) * krt_fp16_to_fp32(xt[b].d));
                float p = s * (float)isum;
                acc = acc + p;
            }
            if (bias) {
                acc = acc + bias[r];
            }
            y[t * rows + r] = acc;
        }
    }
}

/* Q4_0, Q5_1 and the K-quants: krt_kdot.h defines the per-block arithmetic and its order. */
#define KRT_GEMM_REF(T, XT, QK)                                                                       \
    void krt_gemm_##T##_ref(float *y, const krt_block_##T *w, const krt_block_##XT *x, const float *bias, \
                            int64_t rows, int64_t cols, int64_t T_, int64_t r0, int64_t r1) {        \
        const int64_t nb = cols / (QK);                                                               \
        for (int64_t t = 0; t < T_; t++) {                                                            \
            for (int64_t r = r0; r < r1; r++) {                                                       \
                float acc = krt_kd_##T(w + r * nb, x + t * nb, nb);                                   \
                if (bias) {                                                                           \
                    acc = acc + bias[r];                                                              \
                }                                                                                     \
                y[t * rows + r] = acc;                                                                \
            }                                                                                         \
        }                                                                                             \
    }

KRT_GEMM_REF(q4_0, q8_0, KRT_QK)
KRT_GEMM_REF(iq4_nl, q8_0, KRT_QK)
KRT_GEMM_REF(q5_1, q8_0, KRT_QK)
KRT_GEMM_REF(q4_K, q8_K, KRT_QK_K)
KRT_GEMM_REF(q5_K, q8_K, KRT_QK_K)
KRT_GEMM_REF(q6_K, q8_K, KRT_QK_K)
#undef KRT_GEMM_REF

#ifdef KRT_X86

/* ------------------------------------------------------------------------------------------ */
/* Types, as compile-time constants of the shared driver and microkernels. */

#define KRT_GT_Q8_0 0
#define KRT_GT_Q5_0 1
#define KRT_GT_Q4_0 2
#define KRT_GT_Q5_1 3
#define KRT_GT_Q4_K 4
#define KRT_GT_Q5_K 5
#define KRT_GT_Q6_K 6
#define KRT_GT_IQ4_NL 7 /* Q4_0's layout; the nibble indexes kvalues_iq4nl (krt_iquant.h) */
#define KRT_GT_K(TY) ((TY) >= KRT_GT_Q4_K && (TY) <= KRT_GT_Q6_K) /* super-blocks, Q8_K activations */
#define KRT_GT_NIB4(TY) ((TY) == KRT_GT_Q4_0 || (TY) == KRT_GT_IQ4_NL) /* 18-byte blocks, qs at 2, no qh */
/* Non-finite scales (krt_kdot.h, krt_common.h krt_scale_poison): the 32-weight types poison
 * fp32(d_w), fp32(m_w) (Q5_1) and fp32(d_x) when they are gathered, outside the register tile:
 * the product of two finite fp16 values is finite, so s = d_w * d_x (and Q5_1's m_w * (d_x *
 * sum x)) is NaN exactly when _ref's poisoned product is, and bit-identical otherwise. The
 * K-quants' d_x is fp32, whose finite product with d / dmin can overflow: they poison the
 * products themselves in the tile (one add + one sub each per row vector, token and super-block,
 * on the FP add pipes beside the vpdpbusd stream). */
#define KRT_GT_POISON(TY) (!KRT_GT_K(TY))
#define KRT_GT_K45(TY) ((TY) == KRT_GT_Q4_K || (TY) == KRT_GT_Q5_K)
#define KRT_GT_QB(TY) (KRT_GT_K(TY) ? KRT_QK_K : KRT_QK)     /* weights per block */
#define KRT_GT_BS(TY) ((TY) == KRT_GT_Q8_0 ? 34 : (TY) == KRT_GT_Q5_0 ? 22 : KRT_GT_NIB4(TY) ? 18 : \
                       (TY) == KRT_GT_Q5_1 ? 24 : (TY) == KRT_GT_Q4_K ? 144 : (TY) == KRT_GT_Q5_K ? 176 : 210)
#define KRT_GT_XBS(TY) (KRT_GT_K(TY) ? (int)sizeof(krt_block_q8_K) : (int)sizeof(krt_block_q8_0))
#define KRT_GT_XQ(TY) (KRT_GT_K(TY) ? 4 : 2)                 /* offset of the activation quants */
#define KRT_GT_NSUB(TY) ((TY) == KRT_GT_Q6_K ? 16 : KRT_GT_K(TY) ? 8 : 1) /* integer-scaled sub-blocks */
/* AVX-512: the unsigned weight byte is q + CORR (Q8_0: qs ^ 0x80) and the accumulator starts at
 * -CORR * sum4(x) (Q6_K: -32 * bsum per 16-weight sub-block; Q4_K / Q5_K: 0). */
#define KRT_GT_CORR(TY) ((TY) == KRT_GT_Q8_0 || (TY) == KRT_GT_IQ4_NL ? 128 : (TY) == KRT_GT_Q5_0 ? 16 : (TY) == KRT_GT_Q4_0 ? 8 : 0)

/* Prefetches rows r..r+rn of blocks b0..b0+bn of a weight matrix (bsz bytes per block) into L2
 * while the current row tile computes: the packer reads 32 short row segments, a pattern the
 * hardware prefetchers do not follow well from L3/DRAM. */
KRT_INLINE void krt_gemm_prefetch_rows(const uint8_t *w, int64_t bsz, int64_t nb, int64_t r, int64_t rn, int64_t b0,
                                       int64_t bn) {
#ifdef KRT_GEMM_NO_PREFETCH
    return;
#endif
    for (int64_t i = 0; i < rn; i++) {
        const uint8_t *p = w + ((r + i) * nb + b0) * bsz;
        for (int64_t o = 0; o < bn * bsz; o += 64) _mm_prefetch((const char *)(p + o), _MM_HINT_T1);
        _mm_prefetch((const char *)(p + bn * bsz - 1), _MM_HINT_T1);
    }
}

/* Prefetches the y lines of tokens t..t+n, rows r..r+rn (rn <= 32) of the next register tiles. */
KRT_INLINE void krt_gemm_prefetch_y(const float *y, int64_t rows, int64_t t, int64_t n, int64_t r, int64_t rn) {
#ifdef KRT_GEMM_NO_PREFETCH
    return;
#endif
    for (int64_t i = 0; i < n; i++) {
        const float *p = y + (t + i) * rows + r;
        _mm_prefetch((const char *)p, _MM_HINT_T0);
        _mm_prefetch((const char *)(p + rn - 1), _MM_HINT_T0);
        if (rn > 16) _mm_prefetch((const char *)(p + 16), _MM_HINT_T0);
    }
}

KRT_INLINE uint16_t krt_gt_ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* One K-quant super-block's 256 quants as unsigned bytes in element order (Q4_K 0..15, Q5_K 0..31,
 * Q6_K 0..63), AVX2 (also inlined into the AVX-512 packer). */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm_unpack_k(uint8_t *dst, const uint8_t *blk, const int TY) {
    const __m256i c0f = _mm256_set1_epi8(0x0f);
    if (TY == KRT_GT_Q6_K) {
        const __m256i c30 = _mm256_set1_epi8(0x30);
        for (int h = 0; h < 2; h++) {
            const __m256i qh = _mm256_loadu_si256((const __m256i *)(blk + 128 + 32 * h));
            const __m256i l0 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h));
            const __m256i l1 = _mm256_loadu_si256((const __m256i *)(blk + 64 * h + 32));
            uint8_t *o = dst + 128 * h;
            _mm256_storeu_si256((__m256i *)(o + 0), _mm256_or_si256(_mm256_and_si256(l0, c0f), _mm256_and_si256(_mm256_slli_epi16(qh, 4), c30)));
            _mm256_storeu_si256((__m256i *)(o + 32), _mm256_or_si256(_mm256_and_si256(l1, c0f), _mm256_and_si256(_mm256_slli_epi16(qh, 2), c30)));
            _mm256_storeu_si256((__m256i *)(o + 64), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l0, 4), c0f), _mm256_and_si256(qh, c30)));
            _mm256_storeu_si256((__m256i *)(o + 96), _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l1, 4), c0f),
                                                                   _mm256_and_si256(_mm256_srli_epi16(qh, 2), c30)));
        }
        return;
    }
    const uint8_t *qs = blk + (TY == KRT_GT_Q4_K ? 16 : 48);
    const __m256i qh = TY == KRT_GT_Q5_K ? _mm256_loadu_si256((const __m256i *)(blk + 16)) : _mm256_setzero_si256();
    for (int c = 0; c < 4; c++) {
        const __m256i r = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m256i lo = _mm256_and_si256(r, c0f), hi = _mm256_and_si256(_mm256_srli_epi16(r, 4), c0f);
        if (TY == KRT_GT_Q5_K) { /* bit 2c (2c+1) of qh[l]: 5th bit of element l of sub-block 2c (2c+1) */
            const __m256i h = _mm256_srli_epi16(qh, 2 * c), c10 = _mm256_set1_epi8(0x10);
            lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_slli_epi16(h, 4), c10));
            hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_slli_epi16(h, 3), c10));
        }
        _mm256_storeu_si256((__m256i *)(dst + 64 * c), lo);
        _mm256_storeu_si256((__m256i *)(dst + 64 * c + 32), hi);
    }
}

/* A K-quant super-block's sub-block scales (sc[0..NSUB)) and Q4_K / Q5_K mins (m[0..8)). */
KRT_INLINE void krt_gemm_scales_k(int32_t *sc, int32_t *m, const uint8_t *blk, const int TY) {
    if (TY == KRT_GT_Q6_K) {
        for (int i = 0; i < 16; i++) sc[i] = (int8_t)blk[192 + i];
        return;
    }
    for (int j = 0; j < 8; j++) {
        uint8_t s, mm;
        krt_kq_scale_min(j, blk + 4, &s, &mm);
        sc[j] = s;
        m[j] = mm;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* _avx512 microkernels */

#define KRT_G5_TB 128  /* tokens per token block */
#define KRT_G5_KC 32   /* 32-weight blocks per column chunk (896 columns: one chunk) */
#define KRT_G5_KCK 2   /* K-quant super-blocks per column chunk */
#ifndef KRT_G5_RV
#define KRT_G5_RV 2    /* row vectors (of 16 rows) per register tile */
#endif
#define KRT_G5_RT (16 * KRT_G5_RV) /* rows per row tile */
#ifndef KRT_G5_CT
#define KRT_G5_CT 4    /* tokens per register tile */
#endif
#ifndef KRT_G5_RG
#define KRT_G5_RG 512  /* rows per row group when cols needs several chunks: the group's y
                        * partial sums (512 x 128 tokens x 4 B = 256 KiB) stay in L2 */
#endif
#define KRT_G5_NXC 32  /* corrections per token and chunk: 32 blocks, or 2 x 16 Q6_K sub-blocks */

/* Scratch of one call. wq[b][g][row]: weights 4g..4g+3 of block b for the tile's rows (4-byte
 * groups, so vector (b, g, half) is 64 contiguous bytes). */
typedef struct {
    int32_t xc[KRT_G5_TB * KRT_G5_NXC]; /* [t][unit] accumulator start (offset correction) */
    float xd[KRT_G5_TB * KRT_G5_KC];    /* [t][b] fp32(d_x) */
    union {
        float xs[KRT_G5_TB * KRT_G5_KC];        /* Q5_1: [t][b] fp32(d_x) * sum(x) */
        int32_t xb[KRT_G5_TB * KRT_G5_KCK * 4]; /* Q4_K / Q5_K: [t][b][p] bsum pairs 2p, 2p+1 (int16 x2) */
    } u;
    uint8_t wq[KRT_G5_KC * 8 * KRT_G5_RT * 4] __attribute__((aligned(64)));
    float wd[KRT_G5_KC * KRT_G5_RT] __attribute__((aligned(64)));  /* [b][row] fp32(d_w) */
    float wd2[KRT_G5_KC * KRT_G5_RT] __attribute__((aligned(64))); /* [b][row] Q5_1 m, K dmin */
    int32_t wsc[KRT_G5_KCK * 16 * KRT_G5_RT] __attribute__((aligned(64))); /* [b][sub][row] K scales */
    int32_t wm2[KRT_G5_KCK * 4 * KRT_G5_RT] __attribute__((aligned(64)));  /* [b][p][row] K min pairs */
} krt_gemm_scratch_avx512;

#define KRT_G5_KCT(TY) (KRT_GT_K(TY) ? KRT_G5_KCK : KRT_G5_KC)

/* Transposes 16 rows of 8 dwords (z[i] = row i in the low 256 bits, row i+8 in the high 256)
 * into out[k] = dword k of rows 0..15. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_transpose_avx512(const __m512i z[8], __m512i out[8]) {
    __m512i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm512_unpacklo_epi32(z[2 * i], z[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_epi32(z[2 * i], z[2 * i + 1]);
    }
    /* u[k]: dword k (128-bit lanes 0, 2) and k+4 (lanes 1, 3) of rows 0-3 / 8-11;
     * u[k+4] the same for rows 4-7 / 12-15. */
    for (int h = 0; h < 2; h++) {
        u[0 + 4 * h] = _mm512_unpacklo_epi64(t[0 + 4 * h], t[2 + 4 * h]);
        u[1 + 4 * h] = _mm512_unpackhi_epi64(t[0 + 4 * h], t[2 + 4 * h]);
        u[2 + 4 * h] = _mm512_unpacklo_epi64(t[1 + 4 * h], t[3 + 4 * h]);
        u[3 + 4 * h] = _mm512_unpackhi_epi64(t[1 + 4 * h], t[3 + 4 * h]);
    }
    const __m512i ilo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    const __m512i ihi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    for (int k = 0; k < 4; k++) {
        out[k] = _mm512_permutex2var_epi64(u[k], ilo, u[k + 4]);
        out[k + 4] = _mm512_permutex2var_epi64(u[k], ihi, u[k + 4]);
    }
}

#ifndef KRT_GEMM512_GATHER_MAX
#define KRT_GEMM512_GATHER_MAX (0x7fffffff / 16) /* tests define it 0 to run the scalar path */
#endif

/* The 16 dwords at byte offsets 0, stride, .., 15*stride from p (lanes past n are 0): one masked
 * gather (every dword read lies inside its block). Rows longer than 2^31/16 bytes (cols > 120M)
 * overflow the gather's int32 offsets and take a scalar loop. */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_gemm_gather32_avx512(const void *p, int64_t stride, int64_t n) {
    const __mmask16 m = n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
    if (stride <= KRT_GEMM512_GATHER_MAX) {
        const __m512i idx = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                                               _mm512_set1_epi32((int32_t)stride));
        return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), m, idx, p, 1);
    }
    int32_t v[16];
    for (int i = 0; i < 16; i++) {
        v[i] = 0;
        if (i < n) memcpy(&v[i], (const uint8_t *)p + i * stride, 4);
    }
    return _mm512_loadu_si512((const void *)v);
}

/* fp32 of the fp16 values of 16 blocks at byte stride `stride` from d0 (lanes past n are 0). */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_gemm_gather_d_avx512(const void *d0, int64_t stride, int64_t n) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(krt_gemm_gather32_avx512(d0, stride, n)));
}

/* Q8_0: 16 rows' 32 quants transposed as 8 dwords per row, stored qs ^ 0x80 = qs + 128. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_pack_q8_0_avx512(krt_gemm_scratch_avx512 *s, const uint8_t *w, int64_t nb,
                                                           int64_t r, int64_t rn, int64_t b0, int64_t bn) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const int64_t halves = (rn + 15) / 16, bs = 34;
    for (int64_t b = 0; b < bn; b++) {
        for (int64_t h = 0; h < halves; h++) {
            const int64_t rh = r + 16 * h;
            const int64_t n = rn - 16 * h; /* valid rows in this half, 1..16+ */
            __m512i z[8], o[8];
            for (int i = 0; i < 8; i++) {
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
                if (i < n) lo = _mm256_loadu_si256((const __m256i *)(w + ((rh + i) * nb + b0 + b) * bs + 2));
                if (i + 8 < n) hi = _mm256_loadu_si256((const __m256i *)(w + ((rh + i + 8) * nb + b0 + b) * bs + 2));
                z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            }
            krt_gemm_transpose_avx512(z, o);
            uint8_t *dst = s->wq + (b * 8) * (KRT_G5_RT * 4) + h * 64;
            for (int k = 0; k < 8; k++) _mm512_store_si512((__m512i *)(dst + k * (KRT_G5_RT * 4)), _mm512_xor_si512(o[k], flip));
            _mm512_store_ps(s->wd + b * KRT_G5_RT + h * 16,
                            krt_scale_poison_avx512(krt_gemm_gather_d_avx512(w + (rh * nb + b0 + b) * bs, nb * bs, n)));
        }
    }
}

/* Q5_0 / Q4_0 / Q5_1: weights stored as q (0..31 / 0..15, unsigned). The 16 rows' nibbles are
 * transposed first (16 rows x 4 dwords of qs) and unpacked 16 rows at a time: dword k of qs holds
 * elements 4k..4k+3 in its low nibbles and 16+4k.. in its high nibbles; the 5th bits come from
 * one gather of the rows' qh, bits 4k'..4k'+3 spread to 4 bytes with vpshufb + vptestmb. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_pack_nib_avx512(krt_gemm_scratch_avx512 *s, const uint8_t *w, int64_t nb,
                                                          int64_t r, int64_t rn, int64_t b0, int64_t bn, const int TY) {
    const int64_t bs = KRT_GT_BS(TY), stride = nb * bs;
    const int qso = KRT_GT_NIB4(TY) ? 2 : TY == KRT_GT_Q5_0 ? 6 : 8, qho = TY == KRT_GT_Q5_0 ? 2 : 4;
    const int64_t halves = (rn + 15) / 16;
    const __m512i m4 = _mm512_set1_epi8(0x0f);
    const __m512i sixteen = _mm512_set1_epi8(16);
    /* vpshufb index replicating byte j of each dword into its 4 bytes, j = 0..3 (indices are
     * within a 128-bit lane: dword p of the lane starts at byte 4p) */
    const __m512i lanep = _mm512_set4_epi32(0x0c0c0c0c, 0x08080808, 0x04040404, 0x00000000);
    const __m512i rep[4] = {lanep, _mm512_add_epi8(lanep, _mm512_set1_epi8(1)),
                            _mm512_add_epi8(lanep, _mm512_set1_epi8(2)), _mm512_add_epi8(lanep, _mm512_set1_epi8(3))};
    const __m512i bitlo = _mm512_set1_epi32(0x08040201), bithi = _mm512_set1_epi32((int32_t)0x80402010u);
    for (int64_t b = 0; b < bn; b++) {
        for (int64_t h = 0; h < halves; h++) {
            const int64_t rh = r + 16 * h;
            const int64_t n = rn - 16 * h;
            const uint8_t *blk = w + (rh * nb + b0 + b) * bs;
            /* z[i], 128-bit lane j = qs of row 4j + i */
            __m512i z[4];
            for (int i = 0; i < 4; i++) {
                __m128i l[4];
                for (int j = 0; j < 4; j++) {
                    l[j] = 4 * j + i < n ? _mm_loadu_si128((const __m128i *)(blk + (4 * j + i) * stride + qso))
                                         : _mm_setzero_si128();
                }
                z[i] = _mm512_inserti32x4(
                    _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(l[0]), l[1], 1), l[2], 2), l[3], 3);
            }
            __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
            __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
            __m512i q[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                            _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
            __m512i hb = _mm512_setzero_si512();
            if (!KRT_GT_NIB4(TY)) hb = krt_gemm_gather32_avx512(blk + qho, stride, n);
            uint8_t *dst = s->wq + (b * 8) * (KRT_G5_RT * 4) + h * 64;
            for (int k = 0; k < 8; k++) {
                __m512i v = k < 4 ? _mm512_and_si512(q[k], m4) : _mm512_and_si512(_mm512_srli_epi16(q[k - 4], 4), m4);
                if (TY == KRT_GT_IQ4_NL) /* the table value + 128 (vpshufb per 128-bit lane) */
                    v = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(krt_iq4nl_u8()), v);
                if (!KRT_GT_NIB4(TY)) {
                    /* elements 4k..4k+3: bits 4k..4k+3 of qh = nibble (k & 1) of byte k >> 1 */
                    __mmask64 hi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(hb, rep[k >> 1]), (k & 1) ? bithi : bitlo);
                    v = _mm512_mask_add_epi8(v, hi, v, sixteen);
                }
                _mm512_store_si512((__m512i *)(dst + k * (KRT_G5_RT * 4)), v);
            }
            __m512 wd = krt_gemm_gather_d_avx512(blk, stride, n);
            _mm512_store_ps(s->wd + b * KRT_G5_RT + h * 16, krt_scale_poison_avx512(wd));
            if (TY == KRT_GT_Q5_1)
                _mm512_store_ps(s->wd2 + b * KRT_G5_RT + h * 16, krt_scale_poison_avx512(krt_gemm_gather_d_avx512(blk + 2, stride, n)));
        }
    }
}

/* K-quants: each row's super-block unpacked to 256 bytes (element order), then 16 rows x 8 dwords
 * transposed at a time; sub-block scales, mins (as int16 pairs) and d / dmin per row. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_pack_k_avx512(krt_gemm_scratch_avx512 *s, const uint8_t *w, int64_t nb,
                                                        int64_t r, int64_t rn, int64_t b0, int64_t bn, const int TY) {
    const int64_t bs = KRT_GT_BS(TY);
    const int nsub = KRT_GT_NSUB(TY);
    const int64_t halves = (rn + 15) / 16;
    uint8_t u[16][KRT_QK_K];
    for (int64_t b = 0; b < bn; b++) {
        for (int64_t h = 0; h < halves; h++) {
            const int64_t rh = r + 16 * h;
            const int64_t n = rn - 16 * h;
            for (int i = 0; i < 16; i++) {
                const int row = 16 * (int)h + i;
                int32_t sc[16], m[8];
                if (i < n) {
                    const uint8_t *blk = w + ((rh + i) * nb + b0 + b) * bs;
                    krt_gemm_unpack_k(u[i], blk, TY);
                    krt_gemm_scales_k(sc, m, blk, TY);
                    s->wd[b * KRT_G5_RT + row] = krt_fp16_to_fp32(krt_gt_ld16(blk + (TY == KRT_GT_Q6_K ? 208 : 0)));
                    s->wd2[b * KRT_G5_RT + row] = TY == KRT_GT_Q6_K ? 0.0f : krt_fp16_to_fp32(krt_gt_ld16(blk + 2));
                } else {
                    memset(u[i], 0, KRT_QK_K);
                    for (int j = 0; j < 16; j++) sc[j] = 0;
                    for (int j = 0; j < 8; j++) m[j] = 0;
                    s->wd[b * KRT_G5_RT + row] = 0.0f;
                    s->wd2[b * KRT_G5_RT + row] = 0.0f;
                }
                for (int j = 0; j < nsub; j++) s->wsc[(b * 16 + j) * KRT_G5_RT + row] = sc[j];
                if (TY != KRT_GT_Q6_K)
                    for (int p = 0; p < 4; p++)
                        s->wm2[(b * 4 + p) * KRT_G5_RT + row] = (int32_t)((uint32_t)m[2 * p] | ((uint32_t)m[2 * p + 1] << 16));
            }
            for (int gc = 0; gc < 8; gc++) { /* groups 8gc..8gc+7 (elements 32gc..32gc+31) */
                __m512i z[8], o[8];
                for (int i = 0; i < 8; i++)
                    z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(u[i] + 32 * gc))),
                                              _mm256_loadu_si256((const __m256i *)(u[i + 8] + 32 * gc)), 1);
                krt_gemm_transpose_avx512(z, o);
                uint8_t *dst = s->wq + (b * 64 + 8 * gc) * (KRT_G5_RT * 4) + h * 64;
                for (int k = 0; k < 8; k++) _mm512_store_si512((__m512i *)(dst + k * (KRT_G5_RT * 4)), o[k]);
            }
        }
    }
}

KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_pack_avx512(krt_gemm_scratch_avx512 *s, const uint8_t *w, int64_t nb, int64_t r,
                                                      int64_t rn, int64_t b0, int64_t bn, const int TY) {
    if (TY == KRT_GT_Q8_0)
        krt_gemm_pack_q8_0_avx512(s, w, nb, r, rn, b0, bn);
    else if (KRT_GT_K(TY))
        krt_gemm_pack_k_avx512(s, w, nb, r, rn, b0, bn, TY);
    else
        krt_gemm_pack_nib_avx512(s, w, nb, r, rn, b0, bn, TY);
}

/* Sum of a Q8_0 block's 32 quants (SAD of x ^ 0x80 against 0, minus 32 * 128). */
KRT_TARGET_AVX2 KRT_INLINE int32_t krt_gemm_xsum32(const uint8_t *qs) {
    __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)qs), _mm256_set1_epi8((char)0x80));
    __m256i sad = _mm256_sad_epu8(v, _mm256_setzero_si256());
    __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
    s2 = _mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2));
    return _mm_cvtsi128_si32(s2) - 32 * 128;
}

/* Per token t (tn of them from t0) and block b (bn from b0): fp32(d_x), the accumulator starts
 * (xc), and Q5_1's d_x * sum(x) or Q4_K / Q5_K's bsum pairs. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_prep_x_avx512(krt_gemm_scratch_avx512 *s, const uint8_t *x, int64_t nb,
                                                        int64_t t0, int64_t tn, int64_t b0, int64_t bn, const int TY) {
    const int64_t xbs = KRT_GT_XBS(TY);
    for (int64_t t = 0; t < tn; t++) {
        const uint8_t *xt = x + ((t0 + t) * nb + b0) * xbs;
        if (KRT_GT_K(TY)) {
            for (int64_t b = 0; b < bn; b++) {
                const krt_block_q8_K *xk = (const krt_block_q8_K *)(xt + b * xbs);
                s->xd[t * KRT_G5_KC + b] = xk->d;
                if (TY == KRT_GT_Q6_K) {
                    for (int j = 0; j < 16; j++) s->xc[t * KRT_G5_NXC + b * 16 + j] = -32 * (int32_t)xk->bsums[j];
                } else {
                    for (int p = 0; p < 4; p++) {
                        int32_t e = (int32_t)xk->bsums[4 * p] + xk->bsums[4 * p + 1];
                        int32_t o = (int32_t)xk->bsums[4 * p + 2] + xk->bsums[4 * p + 3];
                        s->u.xb[(t * KRT_G5_KCK + b) * 4 + p] = (int32_t)((uint32_t)(uint16_t)e | ((uint32_t)(uint16_t)o << 16));
                    }
                }
            }
            continue;
        }
        int64_t b = 0;
        for (; b + 16 <= bn; b += 16) {
            uint16_t dh[16];
            for (int i = 0; i < 16; i++) dh[i] = krt_gt_ld16(xt + (b + i) * xbs);
            __m512 xd = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh));
            _mm512_storeu_ps(s->xd + t * KRT_G5_KC + b, KRT_GT_POISON(TY) ? krt_scale_poison_avx512(xd) : xd);
        }
        for (; b < bn; b++) {
            const float xd = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(krt_gt_ld16(xt + b * xbs))));
            s->xd[t * KRT_G5_KC + b] = KRT_GT_POISON(TY) ? krt_scale_poison(xd) : xd;
        }
        for (b = 0; b < bn; b++) {
            const int32_t sum = krt_gemm_xsum32(xt + b * xbs + 2);
            s->xc[t * KRT_G5_NXC + b] = -KRT_GT_CORR(TY) * sum;
            if (TY == KRT_GT_Q5_1) s->u.xs[t * KRT_G5_KC + b] = s->xd[t * KRT_G5_KC + b] * (float)sum;
        }
    }
}

/* The register tile: RV row vectors (16 rows each) x C tokens over the chunk's bn blocks.
 * y points at y[t*rows + r] of the tile's first token and row; xt at the first token's block b0.
 * Per block: exact integer sums per (row, token) in the lanes (vpdpbusd; K-quants: per sub-block,
 * times the row's scale with vpmullo, Q4_K / Q5_K min sums with vpdpwssd), then the block's fp32
 * update in krt_kdot.h's order (no FMA). */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_tile_avx512(float *y, int64_t rows, const float *bias, int first, int last,
                                                      const krt_gemm_scratch_avx512 *s, int64_t tx, const uint8_t *xt,
                                                      int64_t nb, int64_t bn, const int RV, const int C,
                                                      const __mmask16 *mk, const int TY) {
    const int64_t xbs = KRT_GT_XBS(TY);
    const int nsub = KRT_GT_NSUB(TY), ng = KRT_GT_QB(TY) / 4, ks = ng / nsub;
    __m512 acc[KRT_G5_RV][KRT_G5_CT];
    for (int c = 0; c < C; c++) {
        for (int v = 0; v < RV; v++) {
            acc[v][c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk[v], y + c * rows + v * 16);
        }
    }
    for (int64_t b = 0; b < bn; b++) {
        __m512i is[KRT_G5_RV][KRT_G5_CT];
        for (int sb = 0; sb < nsub; sb++) {
            __m512i sub[KRT_G5_RV][KRT_G5_CT];
            for (int c = 0; c < C; c++) {
                __m512i cor = _mm512_setzero_si512();
                if (nsub == 1 || TY == KRT_GT_Q6_K)
                    cor = _mm512_set1_epi32(s->xc[(tx + c) * KRT_G5_NXC + b * (nsub == 1 ? 1 : 16) + sb]);
                for (int v = 0; v < RV; v++) sub[v][c] = cor;
            }
            const uint8_t *wq = s->wq + (b * ng + sb * ks) * (KRT_G5_RT * 4);
            for (int k = 0; k < ks; k++) {
                __m512i wv[KRT_G5_RV];
                for (int v = 0; v < RV; v++) wv[v] = _mm512_load_si512((const __m512i *)(wq + k * (KRT_G5_RT * 4) + v * 64));
                for (int c = 0; c < C; c++) {
                    int32_t xv;
                    memcpy(&xv, xt + c * nb * xbs + b * xbs + KRT_GT_XQ(TY) + 4 * (sb * ks + k), 4);
                    __m512i xb = _mm512_set1_epi32(xv);
                    for (int v = 0; v < RV; v++) sub[v][c] = _mm512_dpbusd_epi32(sub[v][c], wv[v], xb);
                }
            }
            if (nsub == 1) {
                for (int c = 0; c < C; c++)
                    for (int v = 0; v < RV; v++) is[v][c] = sub[v][c];
            } else {
                for (int v = 0; v < RV; v++) {
                    __m512i scv = _mm512_load_si512((const __m512i *)(s->wsc + (b * 16 + sb) * KRT_G5_RT + v * 16));
                    for (int c = 0; c < C; c++) {
                        __m512i t = _mm512_mullo_epi32(sub[v][c], scv);
                        is[v][c] = sb == 0 ? t : _mm512_add_epi32(is[v][c], t);
                    }
                }
            }
        }
        for (int c = 0; c < C; c++) {
            __m512 dx = _mm512_set1_ps(s->xd[(tx + c) * KRT_G5_KC + b]);
            for (int v = 0; v < RV; v++) {
                __m512 sc = _mm512_mul_ps(_mm512_load_ps(s->wd + b * KRT_G5_RT + v * 16), dx);
                if (KRT_GT_K(TY)) sc = krt_scale_poison_avx512(sc);
                __m512 p = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(is[v][c]));
                if (TY == KRT_GT_Q5_1) {
                    __m512 q = _mm512_mul_ps(_mm512_load_ps(s->wd2 + b * KRT_G5_RT + v * 16),
                                             _mm512_set1_ps(s->u.xs[(tx + c) * KRT_G5_KC + b]));
                    p = _mm512_add_ps(p, q);
                } else if (KRT_GT_K45(TY)) {
                    __m512i ms = _mm512_setzero_si512();
                    for (int q = 0; q < 4; q++)
                        ms = _mm512_dpwssd_epi32(ms, _mm512_load_si512((const __m512i *)(s->wm2 + (b * 4 + q) * KRT_G5_RT + v * 16)),
                                                 _mm512_set1_epi32(s->u.xb[((tx + c) * KRT_G5_KCK + b) * 4 + q]));
                    __m512 cm = krt_scale_poison_avx512(_mm512_mul_ps(_mm512_load_ps(s->wd2 + b * KRT_G5_RT + v * 16), dx));
                    p = _mm512_sub_ps(p, _mm512_mul_ps(cm, _mm512_cvtepi32_ps(ms)));
                }
                acc[v][c] = _mm512_add_ps(acc[v][c], p);
            }
        }
    }
    for (int c = 0; c < C; c++) {
        for (int v = 0; v < RV; v++) {
            __m512 o = acc[v][c];
            if (last && bias) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(mk[v], bias + v * 16));
            _mm512_mask_storeu_ps(y + c * rows + v * 16, mk[v], o);
        }
    }
}

/* Runs the register tiles of one row tile over the token block (tn tokens from token t0):
 * full tiles of KRT_G5_CT tokens, then one tile for the remaining tokens. */
#define KRT_G5_TILE(RV, C)                                                                                     \
    krt_gemm_tile_avx512(y + (t0 + c) * rows + r, rows, br, first, last, s, c, x + ((t0 + c) * nb + b0) * xbs, nb, bn, \
                         RV, C, mk, TY)
#define KRT_G5_TOKENS(RV)                                                                                 \
    do {                                                                                                  \
        for (; c + KRT_G5_CT <= tn; c += KRT_G5_CT) {                                                     \
            if (c + 2 * KRT_G5_CT <= tn) krt_gemm_prefetch_y(y, rows, t0 + c + KRT_G5_CT, KRT_G5_CT, r, rn); \
            KRT_G5_TILE(RV, KRT_G5_CT);                                                                   \
        }                                                                                                 \
        switch (tn - c) {                                                                                 \
        case 5: KRT_G5_TILE(RV, KRT_G5_CT > 5 ? 5 : 1); break;                                            \
        case 4: KRT_G5_TILE(RV, KRT_G5_CT > 4 ? 4 : 1); break;                                            \
        case 3: KRT_G5_TILE(RV, 3); break;                                                                \
        case 2: KRT_G5_TILE(RV, 2); break;                                                                \
        case 1: KRT_G5_TILE(RV, 1); break;                                                                \
        default: break;                                                                                   \
        }                                                                                                 \
    } while (0)

KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_rowtile_avx512(float *y, const float *bias, int64_t rows, int64_t nb,
                                                         const krt_gemm_scratch_avx512 *s, const uint8_t *x, int64_t t0,
                                                         int64_t tn, int64_t r, int64_t rn, int64_t b0, int64_t bn,
                                                         int first, int last, const int TY) {
    const int64_t xbs = KRT_GT_XBS(TY);
    __mmask16 mk[KRT_G5_RV];
    for (int v = 0; v < KRT_G5_RV; v++) {
        int64_t n = rn - 16 * v;
        mk[v] = n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
    }
    const float *br = bias ? bias + r : bias;
    int64_t c = 0;
#if KRT_G5_RV >= 3
    if (rn > 32) {
        KRT_G5_TOKENS(3);
        return;
    }
#endif
    if (rn > 16) {
        KRT_G5_TOKENS(2);
    } else {
        KRT_G5_TOKENS(1);
    }
}
#undef KRT_G5_TOKENS
#undef KRT_G5_TILE

/* ------------------------------------------------------------------------------------------ */
/* _avx512 Q8_0 streaming path for few tokens (T <= KRT_GEMM_SMALL_T: batched decoding). The tiled
 * path above repacks each weight tile into scratch and prefetches only for >= 16 tokens, so at
 * small T it costs 3-5x the weights' DRAM time. Here each 16-row vector is transposed in
 * registers straight from w and used at once for up to KRT_G5_ST tokens, while the next vector's
 * bytes are prefetched (T1) in step: the weights stream once at about GEMV speed, plus ~8 ns
 * per 16 rows x 32 cols x token of vpdpbusd. Sums run in block order with the products
 * (d_w*d_x)*isum as _ref does, so results are bit-identical; d_w and d_x are poisoned
 * (KRT_GT_POISON). Zen 4, 1 thread, 4864x896 from DRAM (bench_gemm_dram, interleaved): T=2
 * 257 vs 1391 us tiled, T=4 319 vs 1587, T=8 303 vs 990, T=16 575 vs 1044 (GEMV T=1: 174). */

#ifndef KRT_G5_ST
#define KRT_G5_ST 16 /* tokens per pass (8: 15% slower at T=12..16, same at 8) */
#endif
#define KRT_G5_SKC 256 /* blocks per column chunk of the streaming path */
#ifndef KRT_GEMM_SMALL_T
#define KRT_GEMM_SMALL_T 16
#endif
#ifndef KRT_GEMM_PF_HINT
#define KRT_GEMM_PF_HINT _MM_HINT_T1
#endif

typedef struct {
    int32_t xc[16 * KRT_G5_SKC];
    float xd[16 * KRT_G5_SKC];
} krt_gemm_sscratch_avx512;

/* 16 rows' block (row i at blk + i*stride, n valid): dword k of each row in o[k] lane i, stored
 * unsigned (qs ^ 0x80), and fp32(d_w) per lane. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_unit_q8_0_avx512(const uint8_t *blk, int64_t stride, int64_t n, __m512i o[8],
                                                           __m512 *wd, const int FULL) {
    __m512i z[8];
    for (int i = 0; i < 8; i++) {
        __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
        if (FULL || i < n) lo = _mm256_loadu_si256((const __m256i *)(blk + i * stride + 2));
        if (FULL || i + 8 < n) hi = _mm256_loadu_si256((const __m256i *)(blk + (i + 8) * stride + 2));
        z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
    }
    krt_gemm_transpose_avx512(z, o);
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    for (int k = 0; k < 8; k++) o[k] = _mm512_xor_si512(o[k], flip);
    *wd = krt_scale_poison_avx512(krt_gemm_gather_d_avx512(blk, stride, FULL ? 16 : n)); /* KRT_GT_POISON */
}

/* Prefetch state: the next row vector's segments (nr rows of seg bytes at stride), covered
 * linearly in step with the current vector's blocks. */
typedef struct {
    const uint8_t *p;
    int64_t stride, seg, nr, row, off, step;
} krt_gemm_pf;

KRT_INLINE void krt_gemm_pf_step(krt_gemm_pf *pf, int64_t bytes) {
#ifdef KRT_GEMM_NO_PREFETCH
    return;
#endif
    while (bytes > 0 && pf->row < pf->nr) {
        _mm_prefetch((const char *)(pf->p + pf->row * pf->stride + pf->off), KRT_GEMM_PF_HINT);
        pf->off += 64;
        bytes -= 64;
        if (pf->off >= pf->seg) {
            _mm_prefetch((const char *)(pf->p + pf->row * pf->stride + pf->seg - 1), KRT_GEMM_PF_HINT);
            pf->row++;
            pf->off = 0;
        }
    }
}

KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_sprep_q8_0_avx512(krt_gemm_sscratch_avx512 *s, const uint8_t *x, int64_t nb,
                                                            int64_t t0, int64_t tn, int64_t b0, int64_t bn, int64_t ld) {
    for (int64_t t = 0; t < tn; t++) {
        const uint8_t *xt = x + ((t0 + t) * nb + b0) * 34;
        for (int64_t b = 0; b < bn; b++) {
            s->xd[t * ld + b] = krt_scale_poison(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(krt_gt_ld16(xt + b * 34)))));
            s->xc[t * ld + b] = -128 * krt_gemm_xsum32(xt + b * 34 + 2);
        }
    }
}

/* One row vector (16 rows from r, n valid) x C tokens (from t0) over blocks b0..b0+bn. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_svec_q8_0_avx512(float *y, const float *bias, const uint8_t *w, const uint8_t *x,
                                                           const krt_gemm_sscratch_avx512 *s, int64_t rows, int64_t nb,
                                                           int64_t r, int64_t n, int64_t t0, int64_t tc, int64_t b0,
                                                           int64_t bn, int64_t ld, int first, int last, krt_gemm_pf *pf,
                                                           const int C, const int FULL) {
    const __mmask16 mk = FULL ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1u);
    const int64_t stride = nb * 34;
    __m512 acc[KRT_G5_ST];
    for (int c = 0; c < C; c++) acc[c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk, y + (t0 + c) * rows + r);
    const int64_t pfb = pf->step; /* bytes of the next vector per block step */
    const uint8_t *wb = w + (r * nb + b0) * 34;
    for (int64_t b = 0; b < bn; b++) {
        krt_gemm_pf_step(pf, pfb);
        __m512i o[8];
        __m512 wd;
        krt_gemm_unit_q8_0_avx512(wb + b * 34, stride, n, o, &wd, FULL);
        for (int c = 0; c < C; c++) {
            const uint8_t *xb = x + ((t0 + c) * nb + b0 + b) * 34 + 2;
            __m512i is = _mm512_set1_epi32(s->xc[(tc + c) * ld + b]);
            for (int k = 0; k < 8; k++) {
                int32_t xv;
                memcpy(&xv, xb + 4 * k, 4);
                is = _mm512_dpbusd_epi32(is, o[k], _mm512_set1_epi32(xv));
            }
            __m512 sc = _mm512_mul_ps(wd, _mm512_set1_ps(s->xd[(tc + c) * ld + b]));
            acc[c] = _mm512_add_ps(acc[c], _mm512_mul_ps(sc, _mm512_cvtepi32_ps(is)));
        }
    }
    for (int c = 0; c < C; c++) {
        __m512 o = acc[c];
        if (last && bias) o = _mm512_add_ps(o, _mm512_maskz_loadu_ps(mk, bias + r));
        _mm512_mask_storeu_ps(y + (t0 + c) * rows + r, mk, o);
    }
}

KRT_TARGET_AVX512 KRT_INLINE void krt_gemm_stream_q8_0_avx512(float *y, const uint8_t *w, const uint8_t *x, const float *bias,
                                                             int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / 32;
    const int64_t ng = (T + KRT_G5_ST - 1) / KRT_G5_ST; /* token groups, balanced */
    const int64_t kc = ng > 1 ? KRT_G5_SKC / 2 : KRT_G5_SKC;
    const int64_t nch = (nb + kc - 1) / kc;
    krt_gemm_sscratch_avx512 s;
    for (int64_t ci = 0; ci < nch; ci++) {
        const int64_t b0 = ci * nb / nch, bn = (ci + 1) * nb / nch - b0;
        krt_gemm_sprep_q8_0_avx512(&s, x, nb, 0, T, b0, bn, bn);
        const int first = ci == 0, last = ci == nch - 1;
        krt_gemm_pf pf;
        pf.stride = nb * 34;
        pf.seg = bn * 34;
        pf.nr = r1 - r0 < 16 ? r1 - r0 : 16;
        pf.p = w + (r0 * nb + b0) * 34;
        pf.row = pf.nr; /* the first vector is not prefetched */
        pf.off = 0;
        for (int64_t r = r0; r < r1; r += 16) {
            const int64_t n = r1 - r < 16 ? r1 - r : 16;
            const int64_t rn = r + 16 < r1 ? (r1 - (r + 16) < 16 ? r1 - (r + 16) : 16) : 0;
            pf.p = w + ((r + 16) * nb + b0) * 34;
            pf.nr = rn;
            pf.row = 0;
            pf.off = 0;
            pf.seg = bn * 34;
            pf.step = rn * 34;
            if (bn == nb) { pf.seg = rn * bn * 34; pf.nr = rn ? 1 : 0; } /* whole rows: one contiguous run */
            for (int64_t g = 0; g < ng; g++) {
                const int64_t t0 = g * T / ng, tn = (g + 1) * T / ng - t0;
                krt_gemm_pf *p = &pf;
#define KRT_G5_SV(C, FULL) krt_gemm_svec_q8_0_avx512(y, bias, w, x, &s, rows, nb, r, n, t0, t0, b0, bn, bn, first, last, p, C, FULL)
                if (n == 16) {
                    switch (tn) {
                    case 1: KRT_G5_SV(1, 1); break;
                    case 2: KRT_G5_SV(2, 1); break;
                    case 3: KRT_G5_SV(3, 1); break;
                    case 4: KRT_G5_SV(4, 1); break;
                    case 5: KRT_G5_SV(5, 1); break;
                    case 6: KRT_G5_SV(6, 1); break;
                    case 7: KRT_G5_SV(7, 1); break;
#if KRT_G5_ST > 8
                    case 8: KRT_G5_SV(8, 1); break;
                    case 9: KRT_G5_SV(9, 1); break;
                    case 10: KRT_G5_SV(10, 1); break;
                    case 11: KRT_G5_SV(11, 1); break;
                    case 12: KRT_G5_SV(12, 1); break;
                    case 13: KRT_G5_SV(13, 1); break;
                    case 14: KRT_G5_SV(14, 1); break;
                    case 15: KRT_G5_SV(15, 1); break;
                    default: KRT_G5_SV(16, 1); break;
#else
                    default: KRT_G5_SV(8, 1); break;
#endif
                    }
                } else {
                    switch (tn) {
                    case 1: KRT_G5_SV(1, 0); break;
                    case 2: KRT_G5_SV(2, 0); break;
                    case 3: KRT_G5_SV(3, 0); break;
                    case 4: KRT_G5_SV(4, 0); break;
                    case 5: KRT_G5_SV(5, 0); break;
                    case 6: KRT_G5_SV(6, 0); break;
                    case 7: KRT_G5_SV(7, 0); break;
#if KRT_G5_ST > 8
                    case 8: KRT_G5_SV(8, 0); break;
                    case 9: KRT_G5_SV(9, 0); break;
                    case 10: KRT_G5_SV(10, 0); break;
                    case 11: KRT_G5_SV(11, 0); break;
                    case 12: KRT_G5_SV(12, 0); break;
                    case 13: KRT_G5_SV(13, 0); break;
                    case 14: KRT_G5_SV(14, 0); break;
                    case 15: KRT_G5_SV(15, 0); break;
                    default: KRT_G5_SV(16, 0); break;
#else
                    default: KRT_G5_SV(8, 0); break;
#endif
                    }
                }
#undef KRT_G5_SV
            }
        }
    }
}

#define KRT_GD_STREAM(y, w, x, bias, rows, cols, T, r0, r1, TY) if (TY == KRT_GT_Q8_0 && T <= KRT_GEMM_SMALL_T) { krt_gemm_stream_q8_0_avx512(y, w, x, bias, rows, cols, T, r0, r1); return; }
#define KRT_GD_V(name) name##_avx512
#define KRT_GD_TARGET KRT_TARGET_AVX512
#define KRT_GD_TB KRT_G5_TB
#define KRT_GD_KC(TY) KRT_G5_KCT(TY)
#define KRT_GD_RT KRT_G5_RT
#define KRT_GD_RG KRT_G5_RG
#include "krt_gemm_drive.inc"
#undef KRT_GD_V
#undef KRT_GD_TARGET
#undef KRT_GD_TB
#undef KRT_GD_KC
#undef KRT_GD_RT
#undef KRT_GD_RG
#undef KRT_GD_STREAM

/* ------------------------------------------------------------------------------------------ */
/* _avx2 microkernels: both operands widened to int16 (vpmaddwd), exact with no saturation and no
 * correction: Q8_0 qs, Q5_0 q - 16, Q4_0 q - 8, Q5_1 q; K-quants pre-multiplied by the sub-block
 * scale when packing (sc * q, Q6_K sc * (q - 32): |w| <= 128 * 32 fits int16), so a super-block's
 * isum is one run of vpmaddwd over its 128 pairs; Q4_K / Q5_K min sums by 4 more vpmaddwd. */

#ifndef KRT_G2_TB
#define KRT_G2_TB 64 /* tokens per token block */
#endif
#define KRT_G2_KC 8  /* 32-weight blocks per column chunk */
#define KRT_G2_KCK 1 /* K-quant super-blocks per column chunk */
#define KRT_G2_RT 16 /* rows per row tile (2 vectors of 8) */
#ifndef KRT_G2_CT
#define KRT_G2_CT 3  /* tokens per register tile */
#endif
#define KRT_G2_RG 512
#define KRT_G2_NP 128 /* int16 pairs per token and chunk (8 x 16, or 1 x 128) */

/* Scratch of one call. wq[pair][row] and xw[t][pair] hold int16 pairs (elements 2k, 2k+1). */
typedef struct {
    int32_t xw[KRT_G2_TB * KRT_G2_NP] __attribute__((aligned(32)));
    float xd[KRT_G2_TB * KRT_G2_KC];
    union {
        float xs[KRT_G2_TB * KRT_G2_KC];        /* Q5_1: fp32(d_x) * sum(x) */
        int32_t xb[KRT_G2_TB * KRT_G2_KCK * 4]; /* Q4_K / Q5_K bsum pairs */
    } u;
    int32_t wq[KRT_G2_NP * KRT_G2_RT] __attribute__((aligned(32)));
    float wd[KRT_G2_KC * KRT_G2_RT] __attribute__((aligned(32)));
    float wd2[KRT_G2_KC * KRT_G2_RT] __attribute__((aligned(32)));
    int32_t wm2[KRT_G2_KCK * 4 * KRT_G2_RT] __attribute__((aligned(32)));
} krt_gemm_scratch_avx2;

#define KRT_G2_KCT(TY) (KRT_GT_K(TY) ? KRT_G2_KCK : KRT_G2_KC)

/* 8x8 dword transpose: out[k] = dword k of a[0..7]. */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm_transpose_avx2(const __m256i a[8], __m256i out[8]) {
    __m256i t[8], u[8];
    for (int i = 0; i < 4; i++) {
        t[2 * i] = _mm256_unpacklo_epi32(a[2 * i], a[2 * i + 1]);
        t[2 * i + 1] = _mm256_unpackhi_epi32(a[2 * i], a[2 * i + 1]);
    }
    for (int h = 0; h < 2; h++) {
        u[0 + 4 * h] = _mm256_unpacklo_epi64(t[0 + 4 * h], t[2 + 4 * h]);
        u[1 + 4 * h] = _mm256_unpackhi_epi64(t[0 + 4 * h], t[2 + 4 * h]);
        u[2 + 4 * h] = _mm256_unpacklo_epi64(t[1 + 4 * h], t[3 + 4 * h]);
        u[3 + 4 * h] = _mm256_unpackhi_epi64(t[1 + 4 * h], t[3 + 4 * h]);
    }
    for (int k = 0; k < 4; k++) {
        out[k] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x20);
        out[k + 4] = _mm256_permute2x128_si256(u[k], u[k + 4], 0x31);
    }
}

/* One 32-weight block as 32 signed values: Q8_0 qs, Q5_0 q - 16, Q4_0 q - 8, Q5_1 q (ggml's
 * bytes_from_bits trick for the 5th bit). */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gemm_unpack32_avx2(const uint8_t *blk, const int TY) {
    if (TY == KRT_GT_Q8_0) return _mm256_loadu_si256((const __m256i *)(blk + 2));
    const int qso = KRT_GT_NIB4(TY) ? 2 : TY == KRT_GT_Q5_0 ? 6 : 8, qho = TY == KRT_GT_Q5_0 ? 2 : 4;
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m128i v = _mm_loadu_si128((const __m128i *)(blk + qso));
    __m128i lo = _mm_and_si128(v, m4);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
    __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    if (TY == KRT_GT_Q4_0) return _mm256_sub_epi8(q, _mm256_set1_epi8(8));
    if (TY == KRT_GT_IQ4_NL) return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(krt_iq4nl_s8()), q);
    uint32_t qh;
    memcpy(&qh, blk + qho, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)qh), shuf);
    bits = _mm256_or_si256(bits, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL));
    bits = _mm256_cmpeq_epi8(bits, _mm256_set1_epi64x(-1)); /* 0xff where the 5th bit is set */
    if (TY == KRT_GT_Q5_1) return _mm256_or_si256(q, _mm256_and_si256(bits, _mm256_set1_epi8(0x10)));
    /* q - 16 = nibble when the bit is set, nibble - 16 = nibble | 0xf0 when it is clear */
    return _mm256_or_si256(q, _mm256_andnot_si256(bits, _mm256_set1_epi8((char)0xf0)));
}

/* Stores 8 rows of 32 signed bytes (v[i] = row i) as int16 pairs into wq (dst = rows h*8..). */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm_store_rows_avx2(int32_t *dst, const __m256i v[8]) {
    __m256i lo[8], hi[8], o[8];
    for (int i = 0; i < 8; i++) {
        lo[i] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v[i]));       /* pairs 0..7 */
        hi[i] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v[i], 1)); /* pairs 8..15 */
    }
    krt_gemm_transpose_avx2(lo, o);
    for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(dst + k * KRT_G2_RT), o[k]);
    krt_gemm_transpose_avx2(hi, o);
    for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(dst + (k + 8) * KRT_G2_RT), o[k]);
}

/* Repacks blocks b0..b0+bn of rows r..r+rn (rn <= 16) into s->wq / s->wd (/ wd2, wm2); rows past
 * rn are 0. */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm_pack_avx2(krt_gemm_scratch_avx2 *s, const uint8_t *w, int64_t nb, int64_t r,
                                                  int64_t rn, int64_t b0, int64_t bn, const int TY) {
    const int64_t bs = KRT_GT_BS(TY);
    const int64_t halves = (rn + 7) / 8;
    for (int64_t b = 0; b < bn; b++) {
        for (int64_t h = 0; h < halves; h++) {
            const int64_t n = rn - 8 * h;
            if (!KRT_GT_K(TY)) {
                __m256i v[8];
                float d[8], m[8];
                for (int i = 0; i < 8; i++) {
                    const uint8_t *blk = w + ((r + 8 * h + i) * nb + b0 + b) * bs;
                    v[i] = i < n ? krt_gemm_unpack32_avx2(blk, TY) : _mm256_setzero_si256();
                    d[i] = i < n ? _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(krt_gt_ld16(blk)))) : 0.0f;
                    m[i] = i < n && TY == KRT_GT_Q5_1 ? _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(krt_gt_ld16(blk + 2)))) : 0.0f;
                }
                krt_gemm_store_rows_avx2(s->wq + b * 16 * KRT_G2_RT + h * 8, v);
                const __m256 wd = _mm256_loadu_ps(d);
                _mm256_store_ps(s->wd + b * KRT_G2_RT + h * 8, KRT_GT_POISON(TY) ? krt_scale_poison_avx2(wd) : wd);
                if (TY == KRT_GT_Q5_1) _mm256_store_ps(s->wd2 + b * KRT_G2_RT + h * 8, krt_scale_poison_avx2(_mm256_loadu_ps(m)));
                continue;
            }
            /* K-quants: rows' int16 weights sc * q (Q6_K sc * (q - 32)), element order, as pairs */
            int32_t pw[8][KRT_QK_K / 2];
            for (int i = 0; i < 8; i++) {
                const int row = 8 * (int)h + i;
                if (i >= n) {
                    memset(pw[i], 0, sizeof(pw[i]));
                    s->wd[b * KRT_G2_RT + row] = 0.0f;
                    s->wd2[b * KRT_G2_RT + row] = 0.0f;
                    for (int p = 0; p < 4; p++) s->wm2[(b * 4 + p) * KRT_G2_RT + row] = 0;
                    continue;
                }
                const uint8_t *blk = w + ((r + 8 * h + i) * nb + b0 + b) * bs;
                uint8_t u[KRT_QK_K];
                int32_t sc[16], mm[8];
                krt_gemm_unpack_k(u, blk, TY);
                krt_gemm_scales_k(sc, mm, blk, TY);
                for (int e = 0; e < KRT_QK_K; e += 16) {
                    __m256i q = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)(u + e)));
                    if (TY == KRT_GT_Q6_K) q = _mm256_sub_epi16(q, _mm256_set1_epi16(32));
                    const int32_t scale = TY == KRT_GT_Q6_K ? sc[e / 16] : sc[e / 32];
                    _mm256_storeu_si256((__m256i *)(pw[i] + e / 2), _mm256_mullo_epi16(q, _mm256_set1_epi16((short)scale)));
                }
                s->wd[b * KRT_G2_RT + row] = krt_fp16_to_fp32(krt_gt_ld16(blk + (TY == KRT_GT_Q6_K ? 208 : 0)));
                s->wd2[b * KRT_G2_RT + row] = TY == KRT_GT_Q6_K ? 0.0f : krt_fp16_to_fp32(krt_gt_ld16(blk + 2));
                if (TY != KRT_GT_Q6_K)
                    for (int p = 0; p < 4; p++)
                        s->wm2[(b * 4 + p) * KRT_G2_RT + row] = (int32_t)((uint32_t)mm[2 * p] | ((uint32_t)mm[2 * p + 1] << 16));
            }
            for (int pc = 0; pc < KRT_QK_K / 2; pc += 8) {
                __m256i a[8], o[8];
                for (int i = 0; i < 8; i++) a[i] = _mm256_loadu_si256((const __m256i *)(pw[i] + pc));
                krt_gemm_transpose_avx2(a, o);
                for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(s->wq + (b * 128 + pc + k) * KRT_G2_RT + h * 8), o[k]);
            }
        }
    }
}

/* x of tokens t0..t0+tn, blocks b0..b0+bn widened to int16 pairs (xw), fp32(d_x) (xd), Q5_1's
 * d_x * sum(x), Q4_K / Q5_K's bsum pairs. */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm_prep_x_avx2(krt_gemm_scratch_avx2 *s, const uint8_t *x, int64_t nb, int64_t t0,
                                                    int64_t tn, int64_t b0, int64_t bn, const int TY) {
    const int64_t xbs = KRT_GT_XBS(TY), np = KRT_GT_QB(TY) / 2;
    for (int64_t t = 0; t < tn; t++) {
        for (int64_t b = 0; b < bn; b++) {
            const uint8_t *blk = x + ((t0 + t) * nb + b0 + b) * xbs;
            const int8_t *q = (const int8_t *)(blk + KRT_GT_XQ(TY));
            int32_t *dst = s->xw + t * KRT_G2_NP + b * np;
            for (int e = 0; e < KRT_GT_QB(TY); e += 16)
                _mm256_store_si256((__m256i *)(dst + e / 2), _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)(q + e))));
            if (KRT_GT_K(TY)) {
                const krt_block_q8_K *xk = (const krt_block_q8_K *)blk;
                s->xd[t * KRT_G2_KC + b] = xk->d;
                if (TY != KRT_GT_Q6_K)
                    for (int p = 0; p < 4; p++) {
                        int32_t e = (int32_t)xk->bsums[4 * p] + xk->bsums[4 * p + 1];
                        int32_t o = (int32_t)xk->bsums[4 * p + 2] + xk->bsums[4 * p + 3];
                        s->u.xb[(t * KRT_G2_KCK + b) * 4 + p] = (int32_t)((uint32_t)(uint16_t)e | ((uint32_t)(uint16_t)o << 16));
                    }
            } else {
                const float xd = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(krt_gt_ld16(blk))));
                s->xd[t * KRT_G2_KC + b] = KRT_GT_POISON(TY) ? krt_scale_poison(xd) : xd;
                if (TY == KRT_GT_Q5_1) s->u.xs[t * KRT_G2_KC + b] = s->xd[t * KRT_G2_KC + b] * (float)krt_gemm_xsum32(blk + 2);
            }
        }
    }
}

/* Register tile: RV row vectors (8 rows each) x C tokens over the chunk's bn blocks. y points at
 * y[t*rows + r] of the tile's first token and row; tx is its first token within the token block. */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm_tile_avx2(float *y, int64_t rows, const float *bias, int first, int last,
                                                  const krt_gemm_scratch_avx2 *s, int64_t tx, int64_t bn, const int RV,
                                                  const int C, __m256i m0, __m256i m1, int full, const int TY) {
    const int np = KRT_GT_QB(TY) / 2;
    __m256 acc[2][KRT_G2_CT];
    const __m256i mk[2] = {m0, m1};
    for (int c = 0; c < C; c++) {
        for (int v = 0; v < RV; v++) {
            acc[v][c] = first ? _mm256_setzero_ps()
                        : full  ? _mm256_loadu_ps(y + c * rows + v * 8)
                                : _mm256_maskload_ps(y + c * rows + v * 8, mk[v]);
        }
    }
    for (int64_t b = 0; b < bn; b++) {
        __m256i is[2][KRT_G2_CT];
        const int32_t *wq = s->wq + b * np * KRT_G2_RT;
        for (int v = 0; v < RV; v++)
            for (int c = 0; c < C; c++) is[v][c] = _mm256_setzero_si256();
        /* Not fully unrolled: GCC would reassociate the integer sums into a tree and spill. */
#pragma GCC unroll 2
        for (int k = 0; k < np; k++) {
            __m256i wv[2];
            for (int v = 0; v < RV; v++) wv[v] = _mm256_load_si256((const __m256i *)(wq + k * KRT_G2_RT + v * 8));
            for (int c = 0; c < C; c++) {
                __m256i xb = _mm256_set1_epi32(s->xw[(tx + c) * KRT_G2_NP + b * np + k]);
                for (int v = 0; v < RV; v++) {
                    __m256i pr = _mm256_madd_epi16(wv[v], xb);
                    is[v][c] = _mm256_add_epi32(is[v][c], pr);
                }
            }
        }
        for (int c = 0; c < C; c++) {
            __m256 dx = _mm256_set1_ps(s->xd[(tx + c) * KRT_G2_KC + b]);
            for (int v = 0; v < RV; v++) {
                __m256 sc = _mm256_mul_ps(_mm256_load_ps(s->wd + b * KRT_G2_RT + v * 8), dx);
                if (KRT_GT_K(TY)) sc = krt_scale_poison_avx2(sc);
                __m256 p = _mm256_mul_ps(sc, _mm256_cvtepi32_ps(is[v][c]));
                if (TY == KRT_GT_Q5_1) {
                    __m256 q = _mm256_mul_ps(_mm256_load_ps(s->wd2 + b * KRT_G2_RT + v * 8),
                                             _mm256_set1_ps(s->u.xs[(tx + c) * KRT_G2_KC + b]));
                    p = _mm256_add_ps(p, q);
                } else if (KRT_GT_K45(TY)) {
                    __m256i ms = _mm256_setzero_si256();
                    for (int q = 0; q < 4; q++)
                        ms = _mm256_add_epi32(ms, _mm256_madd_epi16(_mm256_load_si256((const __m256i *)(s->wm2 + (b * 4 + q) * KRT_G2_RT + v * 8)),
                                                                    _mm256_set1_epi32(s->u.xb[((tx + c) * KRT_G2_KCK + b) * 4 + q])));
                    __m256 cm = krt_scale_poison_avx2(_mm256_mul_ps(_mm256_load_ps(s->wd2 + b * KRT_G2_RT + v * 8), dx));
                    p = _mm256_sub_ps(p, _mm256_mul_ps(cm, _mm256_cvtepi32_ps(ms)));
                }
                acc[v][c] = _mm256_add_ps(acc[v][c], p);
            }
        }
    }
    for (int c = 0; c < C; c++) {
        for (int v = 0; v < RV; v++) {
            __m256 o = acc[v][c];
            if (full) { /* vmaskmovps stores are microcoded and slow on AMD: only for the tail tile */
                if (last && bias) o = _mm256_add_ps(o, _mm256_loadu_ps(bias + v * 8));
                _mm256_storeu_ps(y + c * rows + v * 8, o);
            } else {
                if (last && bias) o = _mm256_add_ps(o, _mm256_maskload_ps(bias + v * 8, mk[v]));
                _mm256_maskstore_ps(y + c * rows + v * 8, mk[v], o);
            }
        }
    }
}

KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gemm_mask_avx2(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(n < 0 ? 0 : n > 8 ? 8 : n)), idx);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_gemm_rowtile_avx2(float *y, const float *bias, int64_t rows, int64_t nb,
                                                     const krt_gemm_scratch_avx2 *s, const uint8_t *x, int64_t t0,
                                                     int64_t tn, int64_t r, int64_t rn, int64_t b0, int64_t bn,
                                                     int first, int last, const int TY) {
    (void)nb;
    (void)x;
    (void)b0;
    const __m256i m0 = krt_gemm_mask_avx2(rn), m1 = krt_gemm_mask_avx2(rn - 8);
    const float *br = bias ? bias + r : bias;
    int64_t c = 0;
#define KRT_G2_TILE(RV, C) \
    krt_gemm_tile_avx2(y + (t0 + c) * rows + r, rows, br, first, last, s, c, bn, RV, C, m0, m1, rn == 16, TY)
    if (rn > 8) {
        for (; c + KRT_G2_CT <= tn; c += KRT_G2_CT) {
            if (c + 2 * KRT_G2_CT <= tn) krt_gemm_prefetch_y(y, rows, t0 + c + KRT_G2_CT, KRT_G2_CT, r, rn);
            KRT_G2_TILE(2, KRT_G2_CT);
        }
        switch (tn - c) {
        case 3: KRT_G2_TILE(2, KRT_G2_CT > 3 ? 3 : 1); break;
        case 2: KRT_G2_TILE(2, 2); break;
        case 1: KRT_G2_TILE(2, 1); break;
        default: break;
        }
    } else {
        for (; c + KRT_G2_CT <= tn; c += KRT_G2_CT) KRT_G2_TILE(1, KRT_G2_CT);
        switch (tn - c) {
        case 3: KRT_G2_TILE(1, KRT_G2_CT > 3 ? 3 : 1); break;
        case 2: KRT_G2_TILE(1, 2); break;
        case 1: KRT_G2_TILE(1, 1); break;
        default: break;
        }
    }
#undef KRT_G2_TILE
}

#define KRT_GD_V(name) name##_avx2
#define KRT_GD_TARGET KRT_TARGET_AVX2
#define KRT_GD_TB KRT_G2_TB
#define KRT_GD_KC(TY) KRT_G2_KCT(TY)
#define KRT_GD_RT KRT_G2_RT
#define KRT_GD_RG KRT_G2_RG
#include "krt_gemm_drive.inc"
#undef KRT_GD_V
#undef KRT_GD_TARGET
#undef KRT_GD_TB
#undef KRT_GD_KC
#undef KRT_GD_RT
#undef KRT_GD_RG

/* ------------------------------------------------------------------------------------------ */
/* Entry points: one instantiation of the shared driver per type and variant. */

#define KRT_GEMM_ENTRY(T, XT, TY, V, TARGET)                                                                  \
    TARGET void krt_gemm_##T##_##V(float *y, const krt_block_##T *w, const krt_block_##XT *x, const float *bias, \
                                   int64_t rows, int64_t cols, int64_t T_, int64_t r0, int64_t r1) {         \
        krt_gemm_drive_##V(y, (const uint8_t *)w, (const uint8_t *)x, bias, rows, cols, T_, r0, r1, TY);      \
    }
KRT_GEMM_ENTRY(q8_0, q8_0, KRT_GT_Q8_0, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(q5_0, q8_0, KRT_GT_Q5_0, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(q4_0, q8_0, KRT_GT_Q4_0, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(iq4_nl, q8_0, KRT_GT_IQ4_NL, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(q5_1, q8_0, KRT_GT_Q5_1, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(q4_K, q8_K, KRT_GT_Q4_K, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(q5_K, q8_K, KRT_GT_Q5_K, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(q6_K, q8_K, KRT_GT_Q6_K, avx512, KRT_TARGET_AVX512)
KRT_GEMM_ENTRY(q8_0, q8_0, KRT_GT_Q8_0, avx2, KRT_TARGET_AVX2)
KRT_GEMM_ENTRY(q5_0, q8_0, KRT_GT_Q5_0, avx2, KRT_TARGET_AVX2)
KRT_GEMM_ENTRY(q4_0, q8_0, KRT_GT_Q4_0, avx2, KRT_TARGET_AVX2)
KRT_GEMM_ENTRY(iq4_nl, q8_0, KRT_GT_IQ4_NL, avx2, KRT_TARGET_AVX2)
KRT_GEMM_ENTRY(q5_1, q8_0, KRT_GT_Q5_1, avx2, KRT_TARGET_AVX2)
KRT_GEMM_ENTRY(q4_K, q8_K, KRT_GT_Q4_K, avx2, KRT_TARGET_AVX2)
KRT_GEMM_ENTRY(q5_K, q8_K, KRT_GT_Q5_K, avx2, KRT_TARGET_AVX2)
KRT_GEMM_ENTRY(q6_K, q8_K, KRT_GT_Q6_K, avx2, KRT_TARGET_AVX2)
#undef KRT_GEMM_ENTRY

#endif /* KRT_X86 */
