/* csrc/iq4xs.c - IQ4_XS (ggml's non-linear 4-bit super-block type: 256 weights, 8 sub-blocks of 32
 * with 6-bit scales): quantize, dequantize, the decode GEMV and the prefill GEMM against Q8_K
 * activations.
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no libm
 * calls and no calls out of a function (helpers are static inline) so that c2goasm can translate
 * the object code. Three variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512
 * (KRT_TARGET_AVX512, VNNI).
 *
 * Quantizer: krt_iq4xs.h (an offline step: the SIMD variants run the scalar definition compiled
 * for their ISA, so every variant gives the same bytes). Dequantizer: ggml's
 * dequantize_row_iq4_xs, (d * (ls - 32)) * kvalue, two roundings per value in every variant (so
 * NaN / Inf scales give the same bits everywhere). GEMV: krt_iq4xs.h's krt_kd_iq4_xs defines the
 * result; the SIMD variants compute each sub-block's integer sum exactly, scale the int32 lanes by
 * ls - 32 exactly and convert them (each below 2^24: exact) for one FMA per row and super-block
 * with d * d_x, so they agree with _ref to a few ulp of the row's magnitude, like the K-quants:
 *   _avx512: the 128 nibble bytes are two loads; per load, low and high nibbles looked up in the
 *     table as unsigned bytes value + 128 (vpshufb), each against its own arrangement of the
 *     activations (elements 32j..32j+15 resp. 32j+16..32j+31 of the load's 4 sub-blocks, prepared
 *     once per call), two vpdpbusd into an accumulator started at -128 * (the sub-block's sum of
 *     x) in one lane of each sub-block's 4: 16 int32 lanes, 4 per sub-block, summing to its exact
 *     dot product. The sub-block scales ls - 32 as int32 lanes (two broadcasts, variable shifts)
 *     and vpmulld. Rows in groups of 4 sharing a table of d * d_x and the linear prefetch of the
 *     next group (Q2_K's driver, csrc/q2k.c).
 *   _avx2: per row and pair of sub-blocks, vpmaddubsw of |value| with sign(x, value) (pairs
 *     <= 32258) and vpmaddwd with the two sub-blocks' scale words: 8 int32 lanes summing to isum.
 * GEMM: for each group of 4 rows, each token and super-block, the exact integer sum of the SIMD
 * GEMV's arithmetic reduced to a scalar, then the term and the accumulation in _ref's order:
 * bit-identical to krt_kd_iq4_xs (so to a GEMV of one token through _ref) in every variant.
 * Non-finite scales: as every K-quant GEMV (krt_kdot.h), a NaN / Inf d or d_x makes the row NaN
 * (krt_scale_poison on the scale product, outside the integer loop).
 */
#include "krt_iq4xs.h"

/* ---------------- scalar ---------------- */

void krt_quantize_iq4_xs_ref(krt_block_iq4_xs *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_ix_quant_ref(dst + b, src + b * KRT_QK_K);
}

void krt_dequantize_iq4_xs_ref(float *dst, const krt_block_iq4_xs *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_fp16_to_fp32(src[b].d);
        float *y = dst + b * KRT_QK_K;
        for (int j = 0; j < 8; j++) {
            const float dl = d * (float)(krt_ix_ls(src + b, j) - 32);
            for (int l = 0; l < 32; l++) y[32 * j + l] = dl * (float)krt_iq4nl_value(krt_ix_nib(src + b, 32 * j + l));
        }
    }
}

void krt_gemv_iq4_xs_ref(float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x, const float *bias,
                         int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r++) {
        const float acc = krt_kd_iq4_xs(w + r * nb, x, nb);
        y[r] = bias ? acc + bias[r] : acc;
    }
}

void krt_gemm_iq4_xs_ref(float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x, const float *bias,
                         int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t r = r0; r < r1; r++) {
            const float acc = krt_kd_iq4_xs(w + r * nb, x + t * nb, nb);
            y[t * rows + r] = bias ? acc + bias[r] : acc;
        }
    }
}

#ifdef KRT_X86

#define KRT_IX_BS 136 /* bytes per super-block */
#define KRT_IX_SB 32  /* super-blocks per column chunk (8192 columns) */
#ifndef KRT_IX_PF_LEAD
#define KRT_IX_PF_LEAD 8192
#endif

/* The activation side of one super-block, arranged as the nibbles are. */
typedef struct {
    int8_t xl[128];  /* at 16j: elements 32j..32j+15 (the low nibbles of sub-block j) */
    int8_t xh[128];  /* at 16j: elements 32j+16..32j+31 (the high nibbles) */
    int32_t nc[32];  /* _avx512: lane 4k of vector v: -128 * the sum of sub-block 4v+k's x; 0 elsewhere */
    float dx;
} krt_ix_xsb;

KRT_TARGET_AVX2 KRT_INLINE void krt_ix_prep(krt_ix_xsb *st, const krt_block_q8_K *x) {
    for (int m = 0; m < 4; m++) {
        const __m256i a = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * m));
        const __m256i b = _mm256_loadu_si256((const __m256i *)(x->qs + 64 * m + 32));
        _mm256_storeu_si256((__m256i *)(st->xl + 32 * m), _mm256_permute2x128_si256(a, b, 0x20));
        _mm256_storeu_si256((__m256i *)(st->xh + 32 * m), _mm256_permute2x128_si256(a, b, 0x31));
    }
    for (int i = 0; i < 32; i++) st->nc[i] = 0;
    for (int j = 0; j < 8; j++)
        st->nc[16 * (j / 4) + 4 * (j % 4)] = -128 * ((int32_t)x->bsums[2 * j] + (int32_t)x->bsums[2 * j + 1]);
    st->dx = x->d;
}

KRT_TARGET_AVX2 KRT_INLINE uint32_t krt_ix_ld32(const uint8_t *p) {
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The 8 sub-block scales ls - 32 as int32 lanes. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_ix_scales_avx2(const uint8_t *blk) {
    const __m256i h = _mm256_set1_epi32((int)krt_ix_ld32(blk)), l = _mm256_set1_epi32((int)krt_ix_ld32(blk + 4));
    const __m256i lo = _mm256_and_si256(_mm256_srlv_epi32(l, _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28)),
                                        _mm256_set1_epi32(15));
    const __m256i hi = _mm256_and_si256(_mm256_srlv_epi32(h, _mm256_setr_epi32(12, 14, 16, 18, 20, 22, 24, 26)),
                                        _mm256_set1_epi32(0x30));
    return _mm256_sub_epi32(_mm256_or_si256(lo, hi), _mm256_set1_epi32(32));
}

KRT_TARGET_AVX2 KRT_INLINE float krt_ix_h2f(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

KRT_TARGET_AVX2 KRT_INLINE int32_t krt_ix_hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* ---------------- AVX2 ---------------- */

/* Word j of the 128-bit source in the low lane, word k in the high lane, each broadcast 8 times. */
#define KRT_IX_WSEL(j, k)                                                                                         \
    _mm256_setr_epi8(2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1,     \
                     2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1,     \
                     2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1,     \
                     2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1)

/* One row's super-block: 8 int32 lanes summing to isum (each below 2^24). */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_ix_sb_avx2(const uint8_t *blk, const krt_ix_xsb *st) {
    const __m256i m4 = _mm256_set1_epi8(0x0f), tab = _mm256_broadcastsi128_si256(krt_iq4nl_s8());
    const __m256i s32 = krt_ix_scales_avx2(blk);
    const __m256i sw = _mm256_broadcastsi128_si256(
        _mm_packs_epi32(_mm256_castsi256_si128(s32), _mm256_extracti128_si256(s32, 1)));
    __m256i acc = _mm256_setzero_si256();
#if defined(__clang__)
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 4
#endif
    for (int m = 0; m < 4; m++) {
        /* lane 0: sub-block 2m, lane 1: sub-block 2m + 1 */
        const __m256i q = _mm256_loadu_si256((const __m256i *)(blk + 8 + 32 * m));
        const __m256i vl = _mm256_shuffle_epi8(tab, _mm256_and_si256(q, m4));
        const __m256i vh = _mm256_shuffle_epi8(tab, _mm256_and_si256(_mm256_srli_epi16(q, 4), m4));
        const __m256i xl = _mm256_loadu_si256((const __m256i *)(st->xl + 32 * m));
        const __m256i xh = _mm256_loadu_si256((const __m256i *)(st->xh + 32 * m));
        const __m256i pl = _mm256_maddubs_epi16(_mm256_abs_epi8(vl), _mm256_sign_epi8(xl, vl));
        const __m256i ph = _mm256_maddubs_epi16(_mm256_abs_epi8(vh), _mm256_sign_epi8(xh, vh));
        const __m256i sc = _mm256_shuffle_epi8(sw, KRT_IX_WSEL(2 * m, 2 * m + 1));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(pl, sc));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(ph, sc));
    }
    return acc;
}

KRT_TARGET_AVX2 void krt_quantize_iq4_xs_avx2(krt_block_iq4_xs *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_ix_quant_ref(dst + b, src + b * KRT_QK_K);
}

KRT_TARGET_AVX2 void krt_dequantize_iq4_xs_avx2(float *dst, const krt_block_iq4_xs *src, int64_t b0, int64_t b1) {
    const __m128i m4 = _mm_set1_epi8(0x0f), tab = krt_iq4nl_s8();
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_ix_h2f(src[b].d);
        float *y = dst + b * KRT_QK_K;
        for (int j = 0; j < 8; j++) {
            const __m256 dl = _mm256_set1_ps(d * (float)(krt_ix_ls(src + b, j) - 32));
            const __m128i q = _mm_loadu_si128((const __m128i *)(src[b].qs + 16 * j));
            const __m128i v[2] = {_mm_shuffle_epi8(tab, _mm_and_si128(q, m4)),
                                  _mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(q, 4), m4))};
            for (int h = 0; h < 2; h++) {
                const __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(v[h]));
                const __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(v[h], 8)));
                _mm256_storeu_ps(y + 32 * j + 16 * h, _mm256_mul_ps(dl, f0));
                _mm256_storeu_ps(y + 32 * j + 16 * h + 8, _mm256_mul_ps(dl, f1));
            }
        }
    }
}

KRT_TARGET_AVX2 void krt_gemv_iq4_xs_avx2(float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x,
                                          const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K, rs = nb * KRT_IX_BS, pend = r1 * rs;
    const uint8_t *wb = (const uint8_t *)w;
    krt_ix_xsb xs[KRT_IX_SB];
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_IX_SB) {
        const int64_t cn = nb - c0 < KRT_IX_SB ? nb - c0 : KRT_IX_SB;
        for (int64_t b = 0; b < cn; b++) krt_ix_prep(&xs[b], x + c0 + b);
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *p = wb + r * rs + c0 * KRT_IX_BS;
            const int64_t pf = (r + 1) * rs + c0 * KRT_IX_BS + KRT_IX_PF_LEAD;
            __m256 acc = _mm256_setzero_ps();
            for (int64_t b = 0; b < cn; b++) {
                const int64_t q = pf + b * KRT_IX_BS;
                if (q < pend) {
                    _mm_prefetch((const char *)wb + q, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + q + 64, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + q + 128, _MM_HINT_T1);
                }
                const uint8_t *blk = p + b * KRT_IX_BS;
                uint16_t dh;
                memcpy(&dh, blk, 2);
                const float s = krt_scale_poison(krt_ix_h2f(dh) * xs[b].dx);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(krt_ix_sb_avx2(blk, &xs[b])), _mm256_set1_ps(s), acc);
            }
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

KRT_TARGET_AVX2 void krt_gemm_iq4_xs_avx2(float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x,
                                          const float *bias, int64_t rows, int64_t cols, int64_t T, int64_t r0,
                                          int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r += 4) {
        const int rn = r1 - r < 4 ? (int)(r1 - r) : 4;
        for (int64_t t = 0; t < T; t++) {
            const krt_block_q8_K *xt = x + t * nb;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t b = 0; b < nb; b++) {
                krt_ix_xsb st;
                krt_ix_prep(&st, xt + b);
                for (int i = 0; i < rn; i++) {
                    const krt_block_iq4_xs *blk = w + (r + i) * nb + b;
                    const float a = krt_scale_poison(krt_ix_h2f(blk->d) * st.dx);
                    acc[i] = acc[i] + a * (float)krt_ix_hsum_avx2(krt_ix_sb_avx2((const uint8_t *)blk, &st));
                }
            }
            for (int i = 0; i < rn; i++) y[t * rows + r + i] = bias ? acc[i] + bias[r + i] : acc[i];
        }
    }
}

/* ---------------- AVX-512 ---------------- */

/* One row's super-block: 16 int32 lanes summing to isum (each below 2^24). */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_ix_sb_avx512(const uint8_t *blk, const krt_ix_xsb *st) {
    const __m512i m4 = _mm512_set1_epi8(0x0f), tab = _mm512_broadcast_i32x4(krt_iq4nl_u8());
    const __m512i h = _mm512_set1_epi32((int)krt_ix_ld32(blk)), l = _mm512_set1_epi32((int)krt_ix_ld32(blk + 4));
    const __m512i c15 = _mm512_set1_epi32(15), c48 = _mm512_set1_epi32(0x30), c32 = _mm512_set1_epi32(32);
    __m512i acc = _mm512_setzero_si512();
#if defined(__clang__)
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 2
#endif
    for (int v = 0; v < 2; v++) {
        /* 128-bit lane k: sub-block 4v + k */
        const __m512i q = _mm512_loadu_si512((const void *)(blk + 8 + 64 * v));
        const __m512i ul = _mm512_shuffle_epi8(tab, _mm512_and_si512(q, m4));
        const __m512i uh = _mm512_shuffle_epi8(tab, _mm512_and_si512(_mm512_srli_epi16(q, 4), m4));
        __m512i dt = _mm512_loadu_si512((const void *)(st->nc + 16 * v));
        dt = _mm512_dpbusd_epi32(dt, ul, _mm512_loadu_si512((const void *)(st->xl + 64 * v)));
        dt = _mm512_dpbusd_epi32(dt, uh, _mm512_loadu_si512((const void *)(st->xh + 64 * v)));
        /* lanes 4k..4k+3: sub-block j = 4v + k, shifts 4j (scales_l) and 12 + 2j (d | scales_h << 16) */
        const __m512i sh = _mm512_set_epi32(12 + 16 * v, 12 + 16 * v, 12 + 16 * v, 12 + 16 * v, 8 + 16 * v, 8 + 16 * v,
                                            8 + 16 * v, 8 + 16 * v, 4 + 16 * v, 4 + 16 * v, 4 + 16 * v, 4 + 16 * v,
                                            16 * v, 16 * v, 16 * v, 16 * v);
        const __m512i shh = _mm512_add_epi32(_mm512_srli_epi32(sh, 1), _mm512_set1_epi32(12));
        const __m512i s = _mm512_sub_epi32(_mm512_or_si512(_mm512_and_si512(_mm512_srlv_epi32(l, sh), c15),
                                                           _mm512_and_si512(_mm512_srlv_epi32(h, shh), c48)),
                                           c32);
        acc = _mm512_add_epi32(acc, _mm512_mullo_epi32(dt, s));
    }
    return acc;
}

KRT_TARGET_AVX512 void krt_quantize_iq4_xs_avx512(krt_block_iq4_xs *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_ix_quant_ref(dst + b, src + b * KRT_QK_K);
}

KRT_TARGET_AVX512 void krt_dequantize_iq4_xs_avx512(float *dst, const krt_block_iq4_xs *src, int64_t b0,
                                                    int64_t b1) {
    const __m128i m4 = _mm_set1_epi8(0x0f), tab = krt_iq4nl_s8();
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_ix_h2f(src[b].d);
        float *y = dst + b * KRT_QK_K;
        for (int j = 0; j < 8; j++) {
            const __m512 dl = _mm512_set1_ps(d * (float)(krt_ix_ls(src + b, j) - 32));
            const __m128i q = _mm_loadu_si128((const __m128i *)(src[b].qs + 16 * j));
            const __m128i lo = _mm_shuffle_epi8(tab, _mm_and_si128(q, m4));
            const __m128i hi = _mm_shuffle_epi8(tab, _mm_and_si128(_mm_srli_epi16(q, 4), m4));
            _mm512_storeu_ps(y + 32 * j, _mm512_mul_ps(dl, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(lo))));
            _mm512_storeu_ps(y + 32 * j + 16, _mm512_mul_ps(dl, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(hi))));
        }
    }
}

KRT_TARGET_AVX512 void krt_gemv_iq4_xs_avx512(float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x,
                                              const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K, rs = nb * KRT_IX_BS, pend = r1 * rs;
    const uint8_t *wb = (const uint8_t *)w;
    krt_ix_xsb xs[KRT_IX_SB];
    float sd[4];
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_IX_SB) {
        const int64_t cn = nb - c0 < KRT_IX_SB ? nb - c0 : KRT_IX_SB;
        for (int64_t b = 0; b < cn; b++) krt_ix_prep(&xs[b], x + c0 + b);
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r += 4) {
            const uint8_t *p[4];
            for (int i = 0; i < 4; i++) p[i] = wb + (r + i < r1 ? r + i : r1 - 1) * rs + c0 * KRT_IX_BS;
            const int64_t pf = (r + 4) * rs + c0 * KRT_IX_BS + KRT_IX_PF_LEAD; /* the next group, linearly */
            __m512 acc[4];
            for (int i = 0; i < 4; i++) acc[i] = _mm512_setzero_ps();
            for (int64_t b = 0; b < cn; b++) {
                const int64_t o = b * KRT_IX_BS;
                const int64_t q = pf + 4 * o; /* 4 rows x 136 bytes per super-block */
                if (q < pend) {
                    for (int l = 0; l < 4 * KRT_IX_BS; l += 64) _mm_prefetch((const char *)wb + q + l, _MM_HINT_T1);
                }
                uint16_t dd[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                for (int i = 0; i < 4; i++) memcpy(&dd[i], p[i] + o, 2);
                const __m128 f = _mm_cvtph_ps(_mm_loadu_si128((const __m128i *)dd));
                _mm_storeu_ps(sd, krt_scale_poison_sse(_mm_mul_ps(f, _mm_set1_ps(xs[b].dx))));
                __asm__ volatile("" ::: "memory"); /* keep sd in memory: the FMAs broadcast from it */
                for (int i = 0; i < 4; i++) {
                    const __m512i v = krt_ix_sb_avx512(p[i] + o, &xs[b]);
                    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(sd[i]), acc[i]);
                }
            }
            float o4[4];
            for (int i = 0; i < 4; i++) o4[i] = _mm512_reduce_add_ps(acc[i]);
            __m128 a4 = _mm_loadu_ps(o4);
            const __mmask8 m = r + 4 <= r1 ? (__mmask8)0x0f : (__mmask8)((1u << (r1 - r)) - 1u);
            if (c0 > 0) a4 = _mm_add_ps(_mm_maskz_loadu_ps(m, y + r), a4);
            if (last && bias) a4 = _mm_add_ps(a4, _mm_maskz_loadu_ps(m, bias + r));
            _mm_mask_storeu_ps(y + r, m, a4);
        }
    }
}

KRT_TARGET_AVX512 void krt_gemm_iq4_xs_avx512(float *y, const krt_block_iq4_xs *w, const krt_block_q8_K *x,
                                              const float *bias, int64_t rows, int64_t cols, int64_t T, int64_t r0,
                                              int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r += 4) {
        const int rn = r1 - r < 4 ? (int)(r1 - r) : 4;
        for (int64_t t = 0; t < T; t++) {
            const krt_block_q8_K *xt = x + t * nb;
            float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            for (int64_t b = 0; b < nb; b++) {
                krt_ix_xsb st;
                krt_ix_prep(&st, xt + b);
                for (int i = 0; i < rn; i++) {
                    const krt_block_iq4_xs *blk = w + (r + i) * nb + b;
                    const float a = krt_scale_poison(krt_ix_h2f(blk->d) * st.dx);
                    acc[i] = acc[i] + a * (float)_mm512_reduce_add_epi32(krt_ix_sb_avx512((const uint8_t *)blk, &st));
                }
            }
            for (int i = 0; i < rn; i++) y[t * rows + r + i] = bias ? acc[i] + bias[r + i] : acc[i];
        }
    }
}

#endif /* KRT_X86 */
