/* csrc/gemm.c - quantized GEMM for prefill: Q8_0 / Q5_0 weights x T tokens of Q8_0 activations.
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (every helper is static inline; the only
 * library functions used are memset/memcpy) so that c2goasm can translate the object code.
 * Three variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512
 * (KRT_TARGET_AVX512, VNNI vpdpbusd). A call computes rows r0..r1 for all T tokens and writes
 * only y[t*rows + r] for t in [0,T), r in [r0,r1); it reads only rows r0..r1 of w, all of x,
 * and bias[r0..r1). Scratch lives on the stack: 68 KiB for _avx512, 44 KiB for _avx2.
 *
 * Semantics and exact order of the floating-point operations (identical in every variant, so
 * _ref, _avx2, _avx512 and the Go port give bit-identical results):
 *     acc = 0.0f
 *     for b = 0 .. cols/32-1, in order:
 *         isum = sum_j wq[r,b,j] * xq[t,b,j]             (exact, int32)
 *         s    = fp32(d_w[r,b]) * fp32(d_x[t,b])          (rounded to fp32)
 *         p    = s * (float)isum                          (rounded; isum is exact in fp32)
 *         acc  = acc + p                                  (rounded; no FMA anywhere)
 *     y[t*rows + r] = bias ? acc + bias[r] : acc
 * wq is qs (Q8_0) or q-16 (Q5_0). This is the order of krt_gemv_*_ref, so GEMM(T=1) equals the
 * scalar GEMV bit for bit; the SIMD GEMVs keep per-lane partial sums and FMA, and agree to a few
 * ulp of sum_b |s * isum|.
 *
 * Tiling of the SIMD variants (activations are NOT repacked; weights are, on the stack):
 *   token block (128 tokens _avx512, 64 _avx2)
 *     row group (512 rows; the whole slice when one column chunk covers cols)
 *       column chunk (<= 32 blocks _avx512, 8 _avx2; balanced, so 896 columns = 1 chunk of 28):
 *         per token and block precompute fp32(d_x) and the offset correction (below)
 *         row tile (32 rows _avx512, 16 _avx2): repack the tile's weights for the chunk so that
 *           one vector holds the same 4 (_avx512) or 2 (_avx2) consecutive weights of 16 (8) rows
 *           (a 16x8 dword transpose), gather fp32(d_w), and for Q5_0 unpack to 5-bit values;
 *           prefetch the next tile's rows; then for each group of 4 (_avx512) or 3 (_avx2)
 *           tokens run the register tile (2 row vectors x 4 tokens = 8 int32 + 8 fp32
 *           accumulators) over the chunk's blocks:
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
 * (Q8_0: qs+128, i.e. qs^0x80; Q5_0: q in 0..31), x the signed broadcast, and the accumulator
 * starts at the correction -128*sum(x) (Q8_0) or -16*sum(x) (Q5_0) of that token's block, so the
 * lane ends at the exact isum. Exact for every int8 input, -128 included.
 * _avx2 widens both sides to int16 (vpmaddwd; weights repacked as int16 pairs, x widened once
 * per token block), which is exact with no saturation, so no correction is needed.
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
                float s = krt_fp16_to_fp32(wr[b].d) * krt_fp16_to_fp32(xt[b].d);
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
                float s = krt_fp16_to_fp32(wr[b].d) * krt_fp16_to_fp32(xt[b].d);
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
KRT_GEMM_REF(q5_1, q8_0, KRT_QK)
KRT_GEMM_REF(q4_K, q8_K, KRT_QK_K)
KRT_GEMM_REF(q5_K, q8_K, KRT_QK_K)
KRT_GEMM_REF(q6_K, q8_K, KRT_QK_K)
#undef KRT_GEMM_REF

#ifdef KRT_X86
/* Placeholders until the shared SIMD driver covers these types: the definition per ISA. */
#define KRT_GEMM_PLACEHOLDER(T, XT, QK, V, TARGET)                                                    \
    TARGET void krt_gemm_##T##_##V(float *y, const krt_block_##T *w, const krt_block_##XT *x, const float *bias, \
                                   int64_t rows, int64_t cols, int64_t T_, int64_t r0, int64_t r1) { \
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
KRT_GEMM_PLACEHOLDER(q4_0, q8_0, KRT_QK, avx2, KRT_TARGET_AVX2)
KRT_GEMM_PLACEHOLDER(q5_1, q8_0, KRT_QK, avx2, KRT_TARGET_AVX2)
KRT_GEMM_PLACEHOLDER(q4_K, q8_K, KRT_QK_K, avx2, KRT_TARGET_AVX2)
KRT_GEMM_PLACEHOLDER(q5_K, q8_K, KRT_QK_K, avx2, KRT_TARGET_AVX2)
KRT_GEMM_PLACEHOLDER(q6_K, q8_K, KRT_QK_K, avx2, KRT_TARGET_AVX2)
KRT_GEMM_PLACEHOLDER(q4_0, q8_0, KRT_QK, avx512, KRT_TARGET_AVX512)
KRT_GEMM_PLACEHOLDER(q5_1, q8_0, KRT_QK, avx512, KRT_TARGET_AVX512)
KRT_GEMM_PLACEHOLDER(q4_K, q8_K, KRT_QK_K, avx512, KRT_TARGET_AVX512)
KRT_GEMM_PLACEHOLDER(q5_K, q8_K, KRT_QK_K, avx512, KRT_TARGET_AVX512)
KRT_GEMM_PLACEHOLDER(q6_K, q8_K, KRT_QK_K, avx512, KRT_TARGET_AVX512)
#undef KRT_GEMM_PLACEHOLDER
#endif

#ifdef KRT_X86

/* ------------------------------------------------------------------------------------------ */
/* _avx512 */

#define KRT_GEMM512_TB 128 /* tokens per token block */
#ifndef KRT_GEMM512_KC
#define KRT_GEMM512_KC 32  /* max blocks per column chunk (896 columns: one chunk) */
#endif
#ifndef KRT_GEMM512_RV
#define KRT_GEMM512_RV 2   /* row vectors (of 16 rows) per register tile */
#endif
#define KRT_GEMM512_RT (16 * KRT_GEMM512_RV) /* rows per row tile */
#ifndef KRT_GEMM512_CT
#define KRT_GEMM512_CT 4   /* tokens per register tile */
#endif
#ifndef KRT_GEMM512_RG
#define KRT_GEMM512_RG 512 /* rows per row group when cols needs several chunks: the group's y
                            * partial sums (512 x 128 tokens x 4 B = 256 KiB) stay in L2 */
#endif

/* Scratch of one call. wq[b][k][row] holds weights 4k..4k+3 of block b for the tile's 32 rows
 * (row-major 4-byte groups, so vector (b, k, half) is 64 contiguous bytes). */
typedef struct {
    int32_t xc[KRT_GEMM512_TB * KRT_GEMM512_KC]; /* [t][b] offset correction */
    float xd[KRT_GEMM512_TB * KRT_GEMM512_KC];   /* [t][b] fp32(d_x) */
    uint8_t wq[KRT_GEMM512_KC * 8 * KRT_GEMM512_RT * 4] __attribute__((aligned(64)));
    float wd[KRT_GEMM512_KC * KRT_GEMM512_RT] __attribute__((aligned(64))); /* [b][row] fp32(d_w) */
} krt_gemm512_scratch;

/* Transposes 16 rows of 8 dwords (zl[i] = row i in the low 256 bits, row i+8 in the high 256)
 * into out[k] = dword k of rows 0..15. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm512_transpose(const __m512i z[8], __m512i out[8]) {
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
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_gemm512_gather32(const void *p, int64_t stride, int64_t n) {
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

/* fp32 of the fp16 scales of 16 blocks at byte stride `stride` from d0 (lanes past n are 0). */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_gemm512_gather_d(const void *d0, int64_t stride, int64_t n) {
    return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(krt_gemm512_gather32(d0, stride, n)));
}

/* Repacks blocks b0..b0+bn of rows r..r+rn (rn <= 32) of a Q8_0 matrix into s->wq / s->wd.
 * Rows past rn are zero. Weights are stored as qs ^ 0x80 = qs + 128 (unsigned). */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm512_pack_q8_0(krt_gemm512_scratch *s, const krt_block_q8_0 *w,
                                                        int64_t nb, int64_t r, int64_t rn, int64_t b0,
                                                        int64_t bn) {
    const __m512i flip = _mm512_set1_epi8((char)0x80);
    const int64_t halves = (rn + 15) / 16;
    for (int64_t b = 0; b < bn; b++) {
        for (int64_t h = 0; h < halves; h++) {
            const int64_t rh = r + 16 * h;
            const int64_t n = rn - 16 * h; /* valid rows in this half, 1..16+ */
            __m512i z[8], o[8];
            for (int i = 0; i < 8; i++) {
                __m256i lo = _mm256_setzero_si256(), hi = _mm256_setzero_si256();
                if (i < n) {
                    lo = _mm256_loadu_si256((const __m256i *)w[(rh + i) * nb + b0 + b].qs);
                }
                if (i + 8 < n) {
                    hi = _mm256_loadu_si256((const __m256i *)w[(rh + i + 8) * nb + b0 + b].qs);
                }
                z[i] = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
            }
            krt_gemm512_transpose(z, o);
            uint8_t *dst = s->wq + (b * 8) * (KRT_GEMM512_RT * 4) + h * 64;
            for (int k = 0; k < 8; k++) {
                _mm512_store_si512((__m512i *)(dst + k * (KRT_GEMM512_RT * 4)), _mm512_xor_si512(o[k], flip));
            }
            _mm512_store_ps(s->wd + b * KRT_GEMM512_RT + h * 16,
                            krt_gemm512_gather_d(&w[rh * nb + b0 + b].d, nb * (int64_t)sizeof(*w), n));
        }
    }
}

/* As krt_gemm512_pack_q8_0 for Q5_0: weights stored as q in 0..31 (unsigned). The 16 rows'
 * nibbles are transposed first (16 rows x 4 dwords of qs) and unpacked 16 rows at a time: dword k
 * of qs holds elements 4k..4k+3 in its low nibbles and 16+4k.. in its high nibbles; the 5th bits
 * come from one gather of the rows' qh, bits 4k'..4k'+3 spread to 4 bytes with vpshufb + vptestmb. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm512_pack_q5_0(krt_gemm512_scratch *s, const krt_block_q5_0 *w,
                                                        int64_t nb, int64_t r, int64_t rn, int64_t b0,
                                                        int64_t bn) {
    const int64_t halves = (rn + 15) / 16;
    const int64_t stride = nb * (int64_t)sizeof(*w);
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
            const krt_block_q5_0 *blk = &w[rh * nb + b0 + b];
            /* z[i], 128-bit lane j = qs of row 4j + i */
            __m512i z[4];
            for (int i = 0; i < 4; i++) {
                __m128i l[4];
                for (int j = 0; j < 4; j++) {
                    l[j] = 4 * j + i < n ? _mm_loadu_si128((const __m128i *)blk[(4 * j + i) * nb].qs)
                                         : _mm_setzero_si128();
                }
                z[i] = _mm512_inserti32x4(
                    _mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(l[0]), l[1], 1), l[2], 2), l[3], 3);
            }
            __m512i t0 = _mm512_unpacklo_epi32(z[0], z[1]), t1 = _mm512_unpackhi_epi32(z[0], z[1]);
            __m512i t2 = _mm512_unpacklo_epi32(z[2], z[3]), t3 = _mm512_unpackhi_epi32(z[2], z[3]);
            __m512i q[4] = {_mm512_unpacklo_epi64(t0, t2), _mm512_unpackhi_epi64(t0, t2),
                            _mm512_unpacklo_epi64(t1, t3), _mm512_unpackhi_epi64(t1, t3)};
            __m512i hb = krt_gemm512_gather32(blk->qh, stride, n);
            uint8_t *dst = s->wq + (b * 8) * (KRT_GEMM512_RT * 4) + h * 64;
            for (int k = 0; k < 8; k++) {
                __m512i v = k < 4 ? _mm512_and_si512(q[k], m4) : _mm512_and_si512(_mm512_srli_epi16(q[k - 4], 4), m4);
                /* elements 4k..4k+3: bits 4k..4k+3 of qh = nibble (k & 1) of byte k >> 1 */
                __mmask64 hi = _mm512_test_epi8_mask(_mm512_shuffle_epi8(hb, rep[k >> 1]), (k & 1) ? bithi : bitlo);
                v = _mm512_mask_add_epi8(v, hi, v, sixteen);
                _mm512_store_si512((__m512i *)(dst + k * (KRT_GEMM512_RT * 4)), v);
            }
            _mm512_store_ps(s->wd + b * KRT_GEMM512_RT + h * 16, krt_gemm512_gather_d(&blk->d, stride, n));
        }
    }
}

/* Per token t (tn of them from x0) and block b (bn from b0): xd = fp32(d_x) and
 * xc = -corr * sum_j qs_x[j] (corr = 128 for Q8_0 weights stored +128, 16 for Q5_0's q). */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm512_prep_x(krt_gemm512_scratch *s, const krt_block_q8_0 *x0,
                                                     int64_t nb, int64_t tn, int64_t b0, int64_t bn,
                                                     int32_t corr) {
    const __m256i flip = _mm256_set1_epi8((char)0x80);
    for (int64_t t = 0; t < tn; t++) {
        const krt_block_q8_0 *xt = x0 + t * nb + b0;
        int64_t b = 0;
        for (; b + 16 <= bn; b += 16) {
            uint16_t dh[16];
            for (int i = 0; i < 16; i++) dh[i] = xt[b + i].d;
            _mm512_storeu_ps(s->xd + t * KRT_GEMM512_KC + b, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)dh)));
        }
        for (; b < bn; b++) {
            s->xd[t * KRT_GEMM512_KC + b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(xt[b].d)));
        }
        for (b = 0; b < bn; b++) {
            /* sum of (x+128) over 32 bytes via SAD, minus 32*128 */
            __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)xt[b].qs), flip);
            __m256i sad = _mm256_sad_epu8(v, _mm256_setzero_si256());
            __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
            s2 = _mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2));
            int32_t sum = _mm_cvtsi128_si32(s2) - 32 * 128;
            s->xc[t * KRT_GEMM512_KC + b] = -corr * sum;
        }
    }
}

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

/* The register tile: RV row vectors (16 rows each) x C tokens over the chunk's bn blocks.
 * y points at y[t*rows + r] of the tile's first token and row; xt at the first token's block b0. */
KRT_TARGET_AVX512 KRT_INLINE void krt_gemm512_tile(float *y, int64_t rows, const float *bias, int first, int last,
                                                  const krt_gemm512_scratch *s, int64_t tx, const krt_block_q8_0 *xt,
                                                  int64_t nb, int64_t bn, const int RV, const int C,
                                                  const __mmask16 *mk) {
    __m512 acc[KRT_GEMM512_RV][KRT_GEMM512_CT];
    for (int c = 0; c < C; c++) {
        for (int v = 0; v < RV; v++) {
            acc[v][c] = first ? _mm512_setzero_ps() : _mm512_maskz_loadu_ps(mk[v], y + c * rows + v * 16);
        }
    }
    for (int64_t b = 0; b < bn; b++) {
        __m512i is[KRT_GEMM512_RV][KRT_GEMM512_CT];
        for (int c = 0; c < C; c++) {
            __m512i cor = _mm512_set1_epi32(s->xc[(tx + c) * KRT_GEMM512_KC + b]);
            for (int v = 0; v < RV; v++) is[v][c] = cor;
        }
        const uint8_t *wq = s->wq + b * 8 * (KRT_GEMM512_RT * 4);
        for (int k = 0; k < 8; k++) {
            __m512i wv[KRT_GEMM512_RV];
            for (int v = 0; v < RV; v++) wv[v] = _mm512_load_si512((const __m512i *)(wq + k * (KRT_GEMM512_RT * 4) + v * 64));
            for (int c = 0; c < C; c++) {
                int32_t xv;
                memcpy(&xv, xt[c * nb + b].qs + 4 * k, 4);
                __m512i xb = _mm512_set1_epi32(xv);
                for (int v = 0; v < RV; v++) is[v][c] = _mm512_dpbusd_epi32(is[v][c], wv[v], xb);
            }
        }
        for (int c = 0; c < C; c++) {
            __m512 dx = _mm512_set1_ps(s->xd[(tx + c) * KRT_GEMM512_KC + b]);
            for (int v = 0; v < RV; v++) {
                __m512 sc = _mm512_mul_ps(_mm512_load_ps(s->wd + b * KRT_GEMM512_RT + v * 16), dx);
                __m512 p = _mm512_mul_ps(sc, _mm512_cvtepi32_ps(is[v][c]));
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
 * full tiles of KRT_GEMM512_CT tokens, then one tile for the remaining tokens. */
#define KRT_GEMM512_TILE(RV, C) \
    krt_gemm512_tile(y + (t0 + c) * rows + r, rows, br, first, last, s, c, x + (t0 + c) * nb + b0, nb, bn, RV, C, mk)
#define KRT_GEMM512_TOKENS(RV)                                                                             \
    do {                                                                                                   \
        for (; c + KRT_GEMM512_CT <= tn; c += KRT_GEMM512_CT) {                                            \
            if (c + 2 * KRT_GEMM512_CT <= tn)                                                              \
                krt_gemm_prefetch_y(y, rows, t0 + c + KRT_GEMM512_CT, KRT_GEMM512_CT, r, rn);              \
            KRT_GEMM512_TILE(RV, KRT_GEMM512_CT);                                                          \
        }                                                                                                  \
        switch (tn - c) {                                                                                  \
        case 5: KRT_GEMM512_TILE(RV, KRT_GEMM512_CT > 5 ? 5 : 1); break;                                   \
        case 4: KRT_GEMM512_TILE(RV, KRT_GEMM512_CT > 4 ? 4 : 1); break;                                   \
        case 3: KRT_GEMM512_TILE(RV, 3); break;                                                            \
        case 2: KRT_GEMM512_TILE(RV, 2); break;                                                            \
        case 1: KRT_GEMM512_TILE(RV, 1); break;                                                            \
        default: break;                                                                                    \
        }                                                                                                  \
    } while (0)

KRT_TARGET_AVX512 KRT_INLINE void krt_gemm512_rowtile(float *y, const float *bias, int64_t rows, int64_t nb,
                                                     const krt_gemm512_scratch *s, const krt_block_q8_0 *x,
                                                     int64_t t0, int64_t tn, int64_t r, int64_t rn, int64_t b0,
                                                     int64_t bn, int first, int last) {
    __mmask16 mk[KRT_GEMM512_RV];
    for (int v = 0; v < KRT_GEMM512_RV; v++) {
        int64_t n = rn - 16 * v;
        mk[v] = n >= 16 ? (__mmask16)0xffff : n <= 0 ? (__mmask16)0 : (__mmask16)((1u << n) - 1u);
    }
    const float *br = bias ? bias + r : bias;
    int64_t c = 0;
#if KRT_GEMM512_RV >= 3
    if (rn > 32) {
        KRT_GEMM512_TOKENS(3);
        return;
    }
#endif
    if (rn > 16) {
        KRT_GEMM512_TOKENS(2);
    } else {
        KRT_GEMM512_TOKENS(1);
    }
}
#undef KRT_GEMM512_TOKENS
#undef KRT_GEMM512_TILE

/* Column chunks are balanced: ceil(nb / KC) chunks of nearly equal size (896 columns = 28 blocks
 * is one chunk of 28 when KC >= 28, not 16 + 12). */
#define KRT_GEMM512_BODY(PACK, CORR)                                                                          \
    const int64_t nb = cols / KRT_QK;                                                                         \
    const int64_t nch = (nb + KRT_GEMM512_KC - 1) / KRT_GEMM512_KC;                                           \
    const int64_t rg = nch > 1 ? KRT_GEMM512_RG : r1 - r0; /* one chunk: no partial sums to keep */          \
    krt_gemm512_scratch s;                                                                                    \
    const int64_t ntb = (T + KRT_GEMM512_TB - 1) / KRT_GEMM512_TB; /* balanced token blocks */                \
    for (int64_t ti = 0; ti < ntb; ti++) {                                                                    \
        const int64_t t0 = ti * T / ntb, tn = (ti + 1) * T / ntb - t0;                                        \
        for (int64_t g0 = r0; g0 < r1; g0 += rg) {                                                            \
            const int64_t g1 = r1 - g0 < rg ? r1 : g0 + rg;                                                   \
            for (int64_t ci = 0; ci < nch; ci++) {                                                            \
                const int64_t b0 = ci * nb / nch, bn = (ci + 1) * nb / nch - b0;                              \
                krt_gemm512_prep_x(&s, x + t0 * nb, nb, tn, b0, bn, CORR);                                    \
                for (int64_t r = g0; r < g1; r += KRT_GEMM512_RT) {                                           \
                    const int64_t rn = g1 - r < KRT_GEMM512_RT ? g1 - r : KRT_GEMM512_RT;                     \
                    PACK(&s, w, nb, r, rn, b0, bn);                                                           \
                    if (tn >= 16 && r + rn < g1) /* small T: too little compute to hide it */          \
                        krt_gemm_prefetch_rows((const uint8_t *)w, sizeof(*w), nb, r + rn,                    \
                                               g1 - (r + rn) < KRT_GEMM512_RT ? g1 - (r + rn) : KRT_GEMM512_RT, \
                                               b0, bn);                                                       \
                    krt_gemm512_rowtile(y, bias, rows, nb, &s, x, t0, tn, r, rn, b0, bn, ci == 0, ci == nch - 1); \
                }                                                                                             \
            }                                                                                                 \
        }                                                                                                     \
    }

KRT_TARGET_AVX512 void krt_gemm_q8_0_avx512(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x,
                                            const float *bias, int64_t rows, int64_t cols, int64_t T, int64_t r0,
                                            int64_t r1) {
    KRT_GEMM512_BODY(krt_gemm512_pack_q8_0, 128)
}

KRT_TARGET_AVX512 void krt_gemm_q5_0_avx512(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x,
                                            const float *bias, int64_t rows, int64_t cols, int64_t T, int64_t r0,
                                            int64_t r1) {
    KRT_GEMM512_BODY(krt_gemm512_pack_q5_0, 16)
}

/* ------------------------------------------------------------------------------------------ */
/* _avx2 */

#ifndef KRT_GEMM256_TB
#define KRT_GEMM256_TB 64 /* tokens per token block */
#endif
#ifndef KRT_GEMM256_KC
#define KRT_GEMM256_KC 8  /* blocks per column chunk */
#endif
#define KRT_GEMM256_RT 16 /* rows per row tile (2 vectors of 8) */
#ifndef KRT_GEMM256_CT
#define KRT_GEMM256_CT 3  /* tokens per register tile */
#endif

/* Scratch of one call. Both operands are int16: wq[b][k][row] and xw[t][b][k] hold the int16
 * pair (element 2k, element 2k+1) of a block as one dword. */
typedef struct {
    int32_t xw[KRT_GEMM256_TB * KRT_GEMM256_KC * 16] __attribute__((aligned(32)));
    float xd[KRT_GEMM256_TB * KRT_GEMM256_KC];
    int32_t wq[KRT_GEMM256_KC * 16 * KRT_GEMM256_RT] __attribute__((aligned(32)));
    float wd[KRT_GEMM256_KC * KRT_GEMM256_RT] __attribute__((aligned(32)));
} krt_gemm256_scratch;

/* 8x8 dword transpose: out[k] = dword k of a[0..7]. */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm256_transpose(const __m256i a[8], __m256i out[8]) {
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

/* One Q5_0 block as 32 signed values q-16 (ggml's bytes_from_bits trick for the 5th bit). */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gemm256_unpack_q5(const krt_block_q5_0 *blk) {
    const __m128i m4 = _mm_set1_epi8(0x0f);
    __m128i v = _mm_loadu_si128((const __m128i *)blk->qs);
    __m128i lo = _mm_and_si128(v, m4);
    __m128i hi = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
    __m256i q = _mm256_inserti128_si256(_mm256_castsi128_si256(lo), hi, 1);
    uint32_t qh;
    memcpy(&qh, blk->qh, 4);
    const __m256i shuf = _mm256_set_epi64x(0x0303030303030303LL, 0x0202020202020202LL, 0x0101010101010101LL, 0);
    __m256i bits = _mm256_shuffle_epi8(_mm256_set1_epi32((int32_t)qh), shuf);
    bits = _mm256_or_si256(bits, _mm256_set1_epi64x(0x7fbfdfeff7fbfdfeLL));
    bits = _mm256_cmpeq_epi8(bits, _mm256_set1_epi64x(-1)); /* 0xff where the 5th bit is set */
    /* q - 16 = nibble when the bit is set, nibble - 16 = nibble | 0xf0 when it is clear */
    return _mm256_or_si256(q, _mm256_andnot_si256(bits, _mm256_set1_epi8((char)0xf0)));
}

/* Stores 8 rows of 32 signed bytes (v[i] = row i) as int16 pairs into wq (dst = rows h*8..). */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm256_store_rows(int32_t *dst, const __m256i v[8]) {
    __m256i lo[8], hi[8], o[8];
    for (int i = 0; i < 8; i++) {
        lo[i] = _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v[i]));       /* pairs 0..7 */
        hi[i] = _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v[i], 1)); /* pairs 8..15 */
    }
    krt_gemm256_transpose(lo, o);
    for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(dst + k * KRT_GEMM256_RT), o[k]);
    krt_gemm256_transpose(hi, o);
    for (int k = 0; k < 8; k++) _mm256_store_si256((__m256i *)(dst + (k + 8) * KRT_GEMM256_RT), o[k]);
}

/* Repacks blocks b0..b0+bn of rows r..r+rn (rn <= 16) into s->wq / s->wd; rows past rn are 0. */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm256_pack_q8_0(krt_gemm256_scratch *s, const krt_block_q8_0 *w, int64_t nb,
                                                      int64_t r, int64_t rn, int64_t b0, int64_t bn) {
    const int64_t halves = (rn + 7) / 8;
    for (int64_t b = 0; b < bn; b++) {
        for (int64_t h = 0; h < halves; h++) {
            const int64_t n = rn - 8 * h;
            __m256i v[8];
            float d[8];
            for (int i = 0; i < 8; i++) {
                const krt_block_q8_0 *blk = &w[(r + 8 * h + i) * nb + b0 + b];
                v[i] = i < n ? _mm256_loadu_si256((const __m256i *)blk->qs) : _mm256_setzero_si256();
                d[i] = i < n ? _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(blk->d))) : 0.0f;
            }
            krt_gemm256_store_rows(s->wq + b * 16 * KRT_GEMM256_RT + h * 8, v);
            _mm256_store_ps(s->wd + b * KRT_GEMM256_RT + h * 8, _mm256_loadu_ps(d));
        }
    }
}

KRT_TARGET_AVX2 KRT_INLINE void krt_gemm256_pack_q5_0(krt_gemm256_scratch *s, const krt_block_q5_0 *w, int64_t nb,
                                                      int64_t r, int64_t rn, int64_t b0, int64_t bn) {
    const int64_t halves = (rn + 7) / 8;
    for (int64_t b = 0; b < bn; b++) {
        for (int64_t h = 0; h < halves; h++) {
            const int64_t n = rn - 8 * h;
            __m256i v[8];
            float d[8];
            for (int i = 0; i < 8; i++) {
                const krt_block_q5_0 *blk = &w[(r + 8 * h + i) * nb + b0 + b];
                v[i] = i < n ? krt_gemm256_unpack_q5(blk) : _mm256_setzero_si256();
                d[i] = i < n ? _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(blk->d))) : 0.0f;
            }
            krt_gemm256_store_rows(s->wq + b * 16 * KRT_GEMM256_RT + h * 8, v);
            _mm256_store_ps(s->wd + b * KRT_GEMM256_RT + h * 8, _mm256_loadu_ps(d));
        }
    }
}

/* x of tokens 0..tn (from x0), blocks b0..b0+bn widened to int16 (xw) and fp32(d_x) (xd). */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm256_prep_x(krt_gemm256_scratch *s, const krt_block_q8_0 *x0, int64_t nb,
                                                   int64_t tn, int64_t b0, int64_t bn) {
    for (int64_t t = 0; t < tn; t++) {
        for (int64_t b = 0; b < bn; b++) {
            const krt_block_q8_0 *blk = &x0[t * nb + b0 + b];
            __m256i v = _mm256_loadu_si256((const __m256i *)blk->qs);
            int32_t *dst = s->xw + (t * KRT_GEMM256_KC + b) * 16;
            _mm256_store_si256((__m256i *)dst, _mm256_cvtepi8_epi16(_mm256_castsi256_si128(v)));
            _mm256_store_si256((__m256i *)(dst + 8), _mm256_cvtepi8_epi16(_mm256_extracti128_si256(v, 1)));
            s->xd[t * KRT_GEMM256_KC + b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(blk->d)));
        }
    }
}

/* Register tile: RV row vectors (8 rows each) x C tokens over the chunk's bn blocks. y points at
 * y[t*rows + r] of the tile's first token and row; tx is its first token within the token block. */
KRT_TARGET_AVX2 KRT_INLINE void krt_gemm256_tile(float *y, int64_t rows, const float *bias, int first, int last,
                                                const krt_gemm256_scratch *s, int64_t tx, int64_t bn, const int RV,
                                                const int C, __m256i m0, __m256i m1, int full) {
    __m256 acc[2][KRT_GEMM256_CT];
    const __m256i mk[2] = {m0, m1};
    for (int c = 0; c < C; c++) {
        for (int v = 0; v < RV; v++) {
            acc[v][c] = first ? _mm256_setzero_ps()
                        : full  ? _mm256_loadu_ps(y + c * rows + v * 8)
                                : _mm256_maskload_ps(y + c * rows + v * 8, mk[v]);
        }
    }
    for (int64_t b = 0; b < bn; b++) {
        __m256i is[2][KRT_GEMM256_CT];
        const int32_t *wq = s->wq + b * 16 * KRT_GEMM256_RT;
        for (int v = 0; v < RV; v++)
            for (int c = 0; c < C; c++) is[v][c] = _mm256_setzero_si256();
        /* Not fully unrolled: GCC would reassociate the 16-term integer sums into a tree and spill. */
#pragma GCC unroll 2
        for (int k = 0; k < 16; k++) {
            __m256i wv[2];
            for (int v = 0; v < RV; v++) wv[v] = _mm256_load_si256((const __m256i *)(wq + k * KRT_GEMM256_RT + v * 8));
            for (int c = 0; c < C; c++) {
                __m256i xb = _mm256_set1_epi32(s->xw[((tx + c) * KRT_GEMM256_KC + b) * 16 + k]);
                for (int v = 0; v < RV; v++) {
                    __m256i pr = _mm256_madd_epi16(wv[v], xb);
                    is[v][c] = _mm256_add_epi32(is[v][c], pr);
                }
            }
        }
        for (int c = 0; c < C; c++) {
            __m256 dx = _mm256_set1_ps(s->xd[(tx + c) * KRT_GEMM256_KC + b]);
            for (int v = 0; v < RV; v++) {
                __m256 sc = _mm256_mul_ps(_mm256_load_ps(s->wd + b * KRT_GEMM256_RT + v * 8), dx);
                __m256 p = _mm256_mul_ps(sc, _mm256_cvtepi32_ps(is[v][c]));
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

KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gemm256_mask(int64_t n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(n < 0 ? 0 : n > 8 ? 8 : n)), idx);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_gemm256_rowtile(float *y, const float *bias, int64_t rows,
                                                   const krt_gemm256_scratch *s, int64_t t0, int64_t tn, int64_t r,
                                                   int64_t rn, int64_t bn, int first, int last) {
    const __m256i m0 = krt_gemm256_mask(rn), m1 = krt_gemm256_mask(rn - 8);
    const float *br = bias ? bias + r : bias;
    int64_t c = 0;
#define KRT_GEMM256_TILE(RV, C) \
    krt_gemm256_tile(y + (t0 + c) * rows + r, rows, br, first, last, s, c, bn, RV, C, m0, m1, rn == 16)
    if (rn > 8) {
        for (; c + KRT_GEMM256_CT <= tn; c += KRT_GEMM256_CT) {
            if (c + 2 * KRT_GEMM256_CT <= tn) krt_gemm_prefetch_y(y, rows, t0 + c + KRT_GEMM256_CT, KRT_GEMM256_CT, r, rn);
            KRT_GEMM256_TILE(2, KRT_GEMM256_CT);
        }
        switch (tn - c) {
        case 3: KRT_GEMM256_TILE(2, KRT_GEMM256_CT > 3 ? 3 : 1); break;
        case 2: KRT_GEMM256_TILE(2, 2); break;
        case 1: KRT_GEMM256_TILE(2, 1); break;
        default: break;
        }
    } else {
        for (; c + KRT_GEMM256_CT <= tn; c += KRT_GEMM256_CT) KRT_GEMM256_TILE(1, KRT_GEMM256_CT);
        switch (tn - c) {
        case 3: KRT_GEMM256_TILE(1, KRT_GEMM256_CT > 3 ? 3 : 1); break;
        case 2: KRT_GEMM256_TILE(1, 2); break;
        case 1: KRT_GEMM256_TILE(1, 1); break;
        default: break;
        }
    }
#undef KRT_GEMM256_TILE
}

#define KRT_GEMM256_BODY(PACK)                                                                                     \
    const int64_t nb = cols / KRT_QK;                                                                              \
    krt_gemm256_scratch s;                                                                                         \
    const int64_t ntb = (T + KRT_GEMM256_TB - 1) / KRT_GEMM256_TB; /* balanced token blocks */                     \
    for (int64_t ti = 0; ti < ntb; ti++) {                                                                         \
        const int64_t t0 = ti * T / ntb, tn = (ti + 1) * T / ntb - t0;                                             \
        for (int64_t g0 = r0; g0 < r1; g0 += KRT_GEMM512_RG) {                                                     \
            const int64_t g1 = r1 - g0 < KRT_GEMM512_RG ? r1 : g0 + KRT_GEMM512_RG;                                \
            for (int64_t b0 = 0; b0 < nb; b0 += KRT_GEMM256_KC) {                                                  \
                const int64_t bn = nb - b0 < KRT_GEMM256_KC ? nb - b0 : KRT_GEMM256_KC;                            \
                krt_gemm256_prep_x(&s, x + t0 * nb, nb, tn, b0, bn);                                               \
                for (int64_t r = g0; r < g1; r += KRT_GEMM256_RT) {                                                \
                    const int64_t rn = g1 - r < KRT_GEMM256_RT ? g1 - r : KRT_GEMM256_RT;                          \
                    PACK(&s, w, nb, r, rn, b0, bn);                                                                \
                    if (tn >= 16 && r + rn < g1)                                                                  \
                        krt_gemm_prefetch_rows((const uint8_t *)w, sizeof(*w), nb, r + rn,                         \
                                               g1 - (r + rn) < KRT_GEMM256_RT ? g1 - (r + rn) : KRT_GEMM256_RT,   \
                                               b0, bn);                                                            \
                    krt_gemm256_rowtile(y, bias, rows, &s, t0, tn, r, rn, bn, b0 == 0, b0 + bn == nb);             \
                }                                                                                                  \
            }                                                                                                      \
        }                                                                                                          \
    }

KRT_TARGET_AVX2 void krt_gemm_q8_0_avx2(float *y, const krt_block_q8_0 *w, const krt_block_q8_0 *x, const float *bias,
                                        int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    KRT_GEMM256_BODY(krt_gemm256_pack_q8_0)
}

KRT_TARGET_AVX2 void krt_gemm_q5_0_avx2(float *y, const krt_block_q5_0 *w, const krt_block_q8_0 *x, const float *bias,
                                        int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    KRT_GEMM256_BODY(krt_gemm256_pack_q5_0)
}

#endif /* KRT_X86 */
