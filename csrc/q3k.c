/* csrc/q3k.c - Q3_K (ggml's 3-bit K-quant, super-blocks of 256): quantize, dequantize, the decode
 * GEMV and the prefill GEMM against Q8_K activations, used in place (until this file, Q3_K was
 * converted at load to Q6_K, 1.9x its bytes).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no libm
 * calls and no calls out of a function (helpers are static inline) so that c2goasm can translate
 * the object code. Three variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512
 * (KRT_TARGET_AVX512, VNNI).
 *
 * Quantizer: krt_q3k.h (an offline step: the SIMD variants run the scalar definition compiled for
 * their ISA, so every variant gives the same bytes). Dequantizer: ggml's dequantize_row_q3_K,
 * (d * (sc - 32)) * q, two roundings per value in every variant. GEMV: krt_q3k.h's krt_kd_q3_K
 * defines the result; the SIMD variants split the integer sum exactly and scale it lane-wise with
 * FMA, agreeing with _ref to a few ulp of the row's magnitude, like the other K-quants:
 *   both take the quants unsigned, u = q + 4 in 0..7 (the two qs bits, and the hmask bit moved to
 *   bit 2 by one shift and mask per vector), so isum = sum_s (sc_s - 32) (sum u x - 4 bsums[s]):
 *   the bsums term is one vpmaddwd of the 16 scale words with the activation's 16 bsums.
 *   _avx512: the 64 qs bytes are one load (4 shifts give the vectors of quants 32j.. of both
 *     halves, against the activations arranged to match once per call, as Q2_K's); vpdpbusd
 *     leaves int32 lanes of 4 products (<= 3556), vpackssdw pairs two vectors and vpmaddwd
 *     multiplies by the sub-block scale words (one vpermw each) while summing pairs. Rows in
 *     groups of 4 sharing a table of d * d_x and the linear prefetch of the next group (Q2_K's
 *     driver, csrc/q2k.c).
 *   _avx2: per row and half, 4 x 32 quants: vpmaddubsw with the activations (pairs <= 1778),
 *     vpmaddwd with the two sub-blocks' scale words (one vpshufb).
 *   The 16 scales are decoded with one 64-bit and one 32-bit load: the low nibbles by two masks,
 *   the high bit pairs by a variable shift of the broadcast 32 bits.
 * GEMM: for each group of 4 rows, each token and super-block, the exact integer sum of the SIMD
 * GEMV's arithmetic reduced to a scalar, then the term and the accumulation in _ref's order:
 * bit-identical to krt_kd_q3_K (so to a GEMV of one token through _ref) in every variant.
 * Non-finite scales: as every K-quant GEMV (krt_kdot.h), a NaN / Inf d or d_x makes the row NaN
 * (krt_scale_poison on the scale product, outside the integer loop).
 */
#include "krt_q3k.h"

/* ---------------- scalar ---------------- */

void krt_quantize_q3_K_ref(krt_block_q3_K *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_q3_quant_ref(dst + b, src + b * KRT_QK_K);
}

void krt_dequantize_q3_K_ref(float *dst, const krt_block_q3_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_fp16_to_fp32(src[b].d);
        float *y = dst + b * KRT_QK_K;
        for (int s = 0; s < 16; s++) {
            const float dl = d * (float)(krt_q3_sc(src + b, s) - 32);
            for (int l = 0; l < 16; l++) y[16 * s + l] = dl * (float)krt_q3_q(src + b, 16 * s + l);
        }
    }
}

void krt_gemv_q3_K_ref(float *y, const krt_block_q3_K *w, const krt_block_q8_K *x, const float *bias, int64_t cols,
                       int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r++) {
        const float acc = krt_kd_q3_K(w + r * nb, x, nb);
        y[r] = bias ? acc + bias[r] : acc;
    }
}

void krt_gemm_q3_K_ref(float *y, const krt_block_q3_K *w, const krt_block_q8_K *x, const float *bias, int64_t rows,
                       int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t r = r0; r < r1; r++) {
            const float acc = krt_kd_q3_K(w + r * nb, x + t * nb, nb);
            y[t * rows + r] = bias ? acc + bias[r] : acc;
        }
    }
}

#ifdef KRT_X86

#define KRT_Q3_BS 110 /* bytes per super-block */
#define KRT_Q3_SB 32  /* super-blocks per column chunk (8192 columns) */
#ifndef KRT_Q3_PF_LEAD
#define KRT_Q3_PF_LEAD 8192
#endif

/* The 16 sub-block scales sc - 32 of one super-block as words (scale bytes at sc12). */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_q3_scw(const uint8_t *sc12) {
    uint64_t a;
    uint32_t b;
    memcpy(&a, sc12, 8);
    memcpy(&b, sc12 + 8, 4);
    const __m128i lo = _mm_set_epi64x((long long)((a >> 4) & 0x0f0f0f0f0f0f0f0full), (long long)(a & 0x0f0f0f0f0f0f0f0full));
    const __m128i hb = _mm_and_si128(_mm_srlv_epi32(_mm_set1_epi32((int)b), _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi8(3));
    const __m128i sc = _mm_or_si128(lo, _mm_slli_epi16(hb, 4));
    return _mm256_sub_epi16(_mm256_cvtepu8_epi16(sc), _mm256_set1_epi16(32));
}

KRT_TARGET_AVX2 KRT_INLINE float krt_q3_h2f(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

KRT_TARGET_AVX2 KRT_INLINE int32_t krt_q3_hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* ---------------- AVX2 ---------------- */

/* Word j of the 128-bit source in the low lane, word k in the high lane, each broadcast 8 times. */
#define KRT_Q3_WSEL(j, k)                                                                                         \
    _mm256_setr_epi8(2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1,     \
                     2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1,     \
                     2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1,     \
                     2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1)

/* One row's super-block: 8 int32 lanes summing to sum_s (sc_s - 32) sum u x, and 8 summing to
 * sum_s (sc_s - 32) bsums[s] (*corr): isum = the first - 4 * the second. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_q3_sb_avx2(const uint8_t *blk, const krt_block_q8_K *x, __m256i *corr) {
    const __m256i c3 = _mm256_set1_epi8(3), c4 = _mm256_set1_epi8(4);
    const __m256i sw = krt_q3_scw(blk + 96);
    *corr = _mm256_madd_epi16(sw, _mm256_loadu_si256((const __m256i *)x->bsums));
    const __m256i hm = _mm256_loadu_si256((const __m256i *)blk);
    const __m256i s0 = _mm256_permute2x128_si256(sw, sw, 0x00), s1 = _mm256_permute2x128_si256(sw, sw, 0x11);
    __m256i acc = _mm256_setzero_si256();
#if defined(__clang__)
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 2
#endif
    for (int n = 0; n < 2; n++) {
        const __m256i r = _mm256_loadu_si256((const __m256i *)(blk + 32 + 32 * n));
        const __m256i h = n ? _mm256_srli_epi16(hm, 4) : hm;
        const __m256i s = n ? s1 : s0; /* scales 8n..8n+7 in both lanes */
        const int8_t *xq = x->qs + 128 * n;
        const __m256i u0 = _mm256_or_si256(_mm256_and_si256(r, c3), _mm256_and_si256(_mm256_slli_epi16(h, 2), c4));
        const __m256i u1 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(r, 2), c3),
                                           _mm256_and_si256(_mm256_slli_epi16(h, 1), c4));
        const __m256i u2 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(r, 4), c3), _mm256_and_si256(h, c4));
        const __m256i u3 = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(r, 6), c3),
                                           _mm256_and_si256(_mm256_srli_epi16(h, 1), c4));
        const __m256i p0 = _mm256_maddubs_epi16(u0, _mm256_loadu_si256((const __m256i *)xq));
        const __m256i p1 = _mm256_maddubs_epi16(u1, _mm256_loadu_si256((const __m256i *)(xq + 32)));
        const __m256i p2 = _mm256_maddubs_epi16(u2, _mm256_loadu_si256((const __m256i *)(xq + 64)));
        const __m256i p3 = _mm256_maddubs_epi16(u3, _mm256_loadu_si256((const __m256i *)(xq + 96)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(s, KRT_Q3_WSEL(0, 1))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(s, KRT_Q3_WSEL(2, 3))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p2, _mm256_shuffle_epi8(s, KRT_Q3_WSEL(4, 5))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p3, _mm256_shuffle_epi8(s, KRT_Q3_WSEL(6, 7))));
    }
    return acc;
}

KRT_TARGET_AVX2 void krt_quantize_q3_K_avx2(krt_block_q3_K *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_q3_quant_ref(dst + b, src + b * KRT_QK_K);
}

/* The 16 quants q (-4..3) of sub-block 8h + 2j + k as bytes. */
KRT_TARGET_AVX2 KRT_INLINE __m128i krt_q3_sub16(const krt_block_q3_K *b, int h, int j, int k) {
    const __m128i r = _mm_loadu_si128((const __m128i *)(b->qs + 32 * h + 16 * k));
    const __m128i m = _mm_loadu_si128((const __m128i *)(b->hmask + 16 * k));
    const __m128i q = _mm_and_si128(_mm_srl_epi16(r, _mm_cvtsi32_si128(2 * j)), _mm_set1_epi8(3));
    const __m128i hb = _mm_and_si128(_mm_srl_epi16(m, _mm_cvtsi32_si128(4 * h + j)), _mm_set1_epi8(1));
    return _mm_sub_epi8(_mm_or_si128(q, _mm_slli_epi16(hb, 2)), _mm_set1_epi8(4));
}

KRT_TARGET_AVX2 void krt_dequantize_q3_K_avx2(float *dst, const krt_block_q3_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_q3_h2f(src[b].d);
        float *y = dst + b * KRT_QK_K;
        for (int s = 0; s < 16; s++) {
            const __m256 dl = _mm256_set1_ps(d * (float)(krt_q3_sc(src + b, s) - 32));
            const __m128i q = krt_q3_sub16(src + b, s / 8, (s % 8) / 2, s % 2);
            _mm256_storeu_ps(y + 16 * s, _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q))));
            _mm256_storeu_ps(y + 16 * s + 8,
                             _mm256_mul_ps(dl, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q, 8)))));
        }
    }
}

KRT_TARGET_AVX2 void krt_gemv_q3_K_avx2(float *y, const krt_block_q3_K *w, const krt_block_q8_K *x, const float *bias,
                                        int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K, rs = nb * KRT_Q3_BS, pend = r1 * rs;
    const uint8_t *wb = (const uint8_t *)w;
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_Q3_SB) {
        const int64_t cn = nb - c0 < KRT_Q3_SB ? nb - c0 : KRT_Q3_SB;
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *p = wb + r * rs + c0 * KRT_Q3_BS;
            const int64_t pf = (r + 1) * rs + c0 * KRT_Q3_BS + KRT_Q3_PF_LEAD;
            __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
            for (int64_t b = 0; b < cn; b++) {
                const int64_t q = pf + b * KRT_Q3_BS;
                if (q < pend) {
                    _mm_prefetch((const char *)wb + q, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + q + 64, _MM_HINT_T1);
                }
                const uint8_t *blk = p + b * KRT_Q3_BS;
                uint16_t dh;
                memcpy(&dh, blk + 108, 2);
                const float s = krt_scale_poison(krt_q3_h2f(dh) * x[c0 + b].d);
                __m256i corr;
                const __m256i v = krt_q3_sb_avx2(blk, x + c0 + b, &corr);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_set1_ps(s), acc);
                accm = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(4.0f * s), accm);
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

KRT_TARGET_AVX2 void krt_gemm_q3_K_avx2(float *y, const krt_block_q3_K *w, const krt_block_q8_K *x, const float *bias,
                                        int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r += 4) {
        const int rn = r1 - r < 4 ? (int)(r1 - r) : 4;
        for (int64_t t = 0; t < T; t++) {
            const krt_block_q8_K *xt = x + t * nb;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t b = 0; b < nb; b++) {
                for (int i = 0; i < rn; i++) {
                    const krt_block_q3_K *blk = w + (r + i) * nb + b;
                    __m256i corr;
                    const __m256i v = krt_q3_sb_avx2((const uint8_t *)blk, xt + b, &corr);
                    const float a = krt_scale_poison(krt_q3_h2f(blk->d) * xt[b].d);
                    acc[i] = acc[i] + a * (float)(krt_q3_hsum_avx2(v) - 4 * krt_q3_hsum_avx2(corr));
                }
            }
            for (int i = 0; i < rn; i++) y[t * rows + r + i] = bias ? acc[i] + bias[r + i] : acc[i];
        }
    }
}

/* ---------------- AVX-512 ---------------- */

/* The activation side of one super-block. */
typedef struct {
    __m512i x[4]; /* vector j: elements 32j..32j+31 | 128+32j..128+32j+31 */
    __m256i bs;   /* the 16 bsums */
    float dx;
} krt_q3_xsb;

KRT_TARGET_AVX512 KRT_INLINE void krt_q3_prep_avx512(krt_q3_xsb *st, const krt_block_q8_K *x) {
    for (int j = 0; j < 4; j++)
        st->x[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x->qs + 32 * j))),
                                      _mm256_loadu_si256((const __m256i *)(x->qs + 128 + 32 * j)), 1);
    st->bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    st->dx = x->d;
}

/* One row's super-block: 16 int32 lanes summing to sum_s (sc_s - 32) sum u x, 8 summing to
 * sum_s (sc_s - 32) bsums[s] (*corr). */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_q3_sb_avx512(const uint8_t *blk, const krt_q3_xsb *st, __m256i *corr) {
    const __m512i c3 = _mm512_set1_epi8(3), c4 = _mm512_set1_epi8(4);
    const __m512i r = _mm512_loadu_si512((const void *)(blk + 32));
    const __m256i hm = _mm256_loadu_si256((const __m256i *)blk);
    /* byte 32n + l: hmask[l] >> 4n (bits 0..3 valid) */
    const __m512i h = _mm512_inserti64x4(_mm512_castsi256_si512(hm), _mm256_srli_epi16(hm, 4), 1);
    /* byte 32n + l of vector j: element 128n + 32j + l, u = q + 4 */
    const __m512i u0 = _mm512_or_si512(_mm512_and_si512(r, c3), _mm512_and_si512(_mm512_slli_epi16(h, 2), c4));
    const __m512i u1 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r, 2), c3),
                                       _mm512_and_si512(_mm512_slli_epi16(h, 1), c4));
    const __m512i u2 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r, 4), c3), _mm512_and_si512(h, c4));
    const __m512i u3 = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(r, 6), c3),
                                       _mm512_and_si512(_mm512_srli_epi16(h, 1), c4));
    const __m512i z = _mm512_setzero_si512();
    const __m512i d0 = _mm512_dpbusd_epi32(z, u0, st->x[0]), d1 = _mm512_dpbusd_epi32(z, u1, st->x[1]);
    const __m512i d2 = _mm512_dpbusd_epi32(z, u2, st->x[2]), d3 = _mm512_dpbusd_epi32(z, u3, st->x[3]);
    const __m256i sw = krt_q3_scw(blk + 96);
    *corr = _mm256_madd_epi16(sw, st->bs);
    /* vpackssdw(d_j, d_j+1), 128-bit chunk c: 4 words of d_j's chunk c, then 4 of d_j+1's; chunk c of
     * vector j is sub-block 2j (c = 0), 2j + 1, 8 + 2j, 9 + 2j (c = 3). */
    const __m512i i01 = _mm512_setr_epi32(0, 0, 0x20002, 0x20002, 0x10001, 0x10001, 0x30003, 0x30003, 0x80008,
                                          0x80008, 0xa000a, 0xa000a, 0x90009, 0x90009, 0xb000b, 0xb000b);
    const __m512i i23 = _mm512_add_epi16(i01, _mm512_set1_epi16(4));
    const __m512i swz = _mm512_castsi256_si512(sw);
    const __m512i a = _mm512_madd_epi16(_mm512_packs_epi32(d0, d1), _mm512_permutexvar_epi16(i01, swz));
    const __m512i b = _mm512_madd_epi16(_mm512_packs_epi32(d2, d3), _mm512_permutexvar_epi16(i23, swz));
    return _mm512_add_epi32(a, b);
}

KRT_TARGET_AVX512 void krt_quantize_q3_K_avx512(krt_block_q3_K *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_q3_quant_ref(dst + b, src + b * KRT_QK_K);
}

KRT_TARGET_AVX512 void krt_dequantize_q3_K_avx512(float *dst, const krt_block_q3_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_q3_h2f(src[b].d);
        float *y = dst + b * KRT_QK_K;
        for (int s = 0; s < 16; s++) {
            const __m512 dl = _mm512_set1_ps(d * (float)(krt_q3_sc(src + b, s) - 32));
            const __m128i q = krt_q3_sub16(src + b, s / 8, (s % 8) / 2, s % 2);
            _mm512_storeu_ps(y + 16 * s, _mm512_mul_ps(dl, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q))));
        }
    }
}

KRT_TARGET_AVX512 void krt_gemv_q3_K_avx512(float *y, const krt_block_q3_K *w, const krt_block_q8_K *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K, rs = nb * KRT_Q3_BS, pend = r1 * rs;
    const uint8_t *wb = (const uint8_t *)w;
    krt_q3_xsb xs[KRT_Q3_SB];
    float sd[4];
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_Q3_SB) {
        const int64_t cn = nb - c0 < KRT_Q3_SB ? nb - c0 : KRT_Q3_SB;
        for (int64_t b = 0; b < cn; b++) krt_q3_prep_avx512(&xs[b], x + c0 + b);
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r += 4) {
            const uint8_t *p[4];
            for (int i = 0; i < 4; i++) p[i] = wb + (r + i < r1 ? r + i : r1 - 1) * rs + c0 * KRT_Q3_BS;
            const int64_t pf = (r + 4) * rs + c0 * KRT_Q3_BS + KRT_Q3_PF_LEAD; /* the next group, linearly */
            __m512 acc[4];
            __m256 accm[4];
            for (int i = 0; i < 4; i++) {
                acc[i] = _mm512_setzero_ps();
                accm[i] = _mm256_setzero_ps();
            }
            for (int64_t b = 0; b < cn; b++) {
                const int64_t o = b * KRT_Q3_BS;
                const int64_t q = pf + 4 * o; /* 4 rows x 110 bytes per super-block */
                if (q < pend) {
                    for (int l = 0; l < 4 * KRT_Q3_BS; l += 64) _mm_prefetch((const char *)wb + q + l, _MM_HINT_T1);
                }
                uint16_t dd[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (int i = 0; i < 4; i++) memcpy(&dd[i], p[i] + o + 108, 2);
                const __m128 f = _mm_cvtph_ps(_mm_loadu_si128((const __m128i *)dd));
                _mm_storeu_ps(sd, krt_scale_poison_sse(_mm_mul_ps(f, _mm_set1_ps(xs[b].dx))));
                __asm__ volatile("" ::: "memory"); /* keep sd in memory: the FMAs broadcast from it */
                for (int i = 0; i < 4; i++) {
                    __m256i corr;
                    const __m512i v = krt_q3_sb_avx512(p[i] + o, &xs[b], &corr);
                    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(sd[i]), acc[i]);
                    accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(corr), _mm256_set1_ps(4.0f * sd[i]), accm[i]);
                }
            }
            float o4[4];
            for (int i = 0; i < 4; i++) {
                __m128 m = _mm_add_ps(_mm256_castps256_ps128(accm[i]), _mm256_extractf128_ps(accm[i], 1));
                m = _mm_add_ps(m, _mm_movehl_ps(m, m));
                m = _mm_add_ss(m, _mm_movehdup_ps(m));
                o4[i] = _mm512_reduce_add_ps(acc[i]) - _mm_cvtss_f32(m);
            }
            __m128 a4 = _mm_loadu_ps(o4);
            const __mmask8 m = r + 4 <= r1 ? (__mmask8)0x0f : (__mmask8)((1u << (r1 - r)) - 1u);
            if (c0 > 0) a4 = _mm_add_ps(_mm_maskz_loadu_ps(m, y + r), a4);
            if (last && bias) a4 = _mm_add_ps(a4, _mm_maskz_loadu_ps(m, bias + r));
            _mm_mask_storeu_ps(y + r, m, a4);
        }
    }
}

KRT_TARGET_AVX512 void krt_gemm_q3_K_avx512(float *y, const krt_block_q3_K *w, const krt_block_q8_K *x,
                                            const float *bias, int64_t rows, int64_t cols, int64_t T, int64_t r0,
                                            int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r += 4) {
        const int rn = r1 - r < 4 ? (int)(r1 - r) : 4;
        for (int64_t t = 0; t < T; t++) {
            const krt_block_q8_K *xt = x + t * nb;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t b = 0; b < nb; b++) {
                krt_q3_xsb st;
                krt_q3_prep_avx512(&st, xt + b);
                for (int i = 0; i < rn; i++) {
                    const krt_block_q3_K *blk = w + (r + i) * nb + b;
                    __m256i corr;
                    const __m512i v = krt_q3_sb_avx512((const uint8_t *)blk, &st, &corr);
                    const float a = krt_scale_poison(krt_q3_h2f(blk->d) * st.dx);
                    acc[i] = acc[i] + a * (float)(_mm512_reduce_add_epi32(v) - 4 * krt_q3_hsum_avx2(corr));
                }
            }
            for (int i = 0; i < rn; i++) y[t * rows + r + i] = bias ? acc[i] + bias[r + i] : acc[i];
        }
    }
}

#endif /* KRT_X86 */
