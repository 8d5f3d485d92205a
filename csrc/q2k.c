/* csrc/q2k.c - Q2_K (ggml's 2-bit K-quant, super-blocks of 256): quantize, dequantize, the decode
 * GEMV and the prefill GEMM against Q8_K activations.
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no libm
 * calls and no calls out of a function (helpers are static inline) so that c2goasm can translate
 * the object code. Three variants per kernel: _ref (scalar), _avx2 (KRT_TARGET_AVX2), _avx512
 * (KRT_TARGET_AVX512, VNNI).
 *
 * Quantizer: krt_q2k.h (an offline step: the SIMD variants run the scalar definition compiled for
 * their ISA, so every variant gives the same bytes). Dequantizer: ggml's dequantize_row_q2_K,
 * (d * sc) * q - dmin * m, two roundings per value in every variant (so NaN / Inf scales give the
 * same bits everywhere). GEMV: krt_q2k.h's krt_kd_q2_K defines the result; the SIMD variants
 * split the integer sums exactly, scale them lane-wise with FMA and agree with _ref to a few ulp
 * of the row's magnitude, like the other K-quants (gemv_k.c):
 *   _avx512: per row and super-block the 64 quant bytes are one load and one shift by 4: q & 3
 *     and q & 12 of both give the four vectors of 64 unsigned quants (shifts 0, 2, 4, 6; those of
 *     2 and 6 in place, as 4q), each against its own arrangement of the activations (elements
 *     32j.. of both halves, prepared once per call); vpdpbusd leaves int32 lanes of 4 products
 *     (<= 6096, int16), vpackssdw pairs two vectors and vpmaddwd multiplies by the sub-block
 *     scale words (4 sc for the unshifted quants, sc for the 4q ones: one vpermt2w each) while
 *     summing pairs: 16 int32 lanes summing to 4 isum, exact. The mins: vpmaddwd of the 16 min
 *     words with the activation's 16 bsums. Then one cvt and one FMA per row and super-block with
 *     d * d_x / 4 (dmin * d_x) from a 4-row table, rows in groups of 4 sharing it and the linear
 *     prefetch of the next group (gemv_k.c's K-quant driver).
 *   _avx2: per row and half, 4 x 32 quants the same way (one shift): vpmaddubsw with the
 *     activations (pairs <= 3048), vpmaddwd with the two sub-block scale words (4 sc or sc, one
 *     vpshufb), into 8 int32 lanes summing to 4 isum.
 * GEMM: for each group of 4 rows, each token and super-block, the exact integer sums of the SIMD
 * GEMV's arithmetic, the 4 rows' reduced together (a vphaddd tree), then krt_q2_term's steps and
 * the accumulation in _ref's order, lane-wise for the 4 rows: bit-identical to krt_kd_q2_K (so to
 * a GEMV of one token through _ref) in every variant. The 4 rows' weights stay in L1 while the
 * tokens pass; _avx512 unpacks a super-block of the 4 rows once for a tile of 8 tokens.
 * Non-finite scales: as every K-quant GEMV (krt_kdot.h), a NaN / Inf d, dmin or d_x makes the row
 * NaN (krt_scale_poison on the scale products, outside the integer loop).
 *
 * Speed (csrc/tests/bench_quant -cpuclock, 1 thread, 2 vCPU Zen 4 shared with other jobs, so only
 * same-run ratios mean much; GB/s of weight bytes over the same run's streaming read, median of
 * 5 rounds, shapes 896x4864, 2048x2048, 8192x2048, 2048x8192), Q4_K in the same runs:
 *   from DRAM     Q2_K _avx512 75-79% (a busier run: 63-65%)   Q4_K _avx512 77-94% (68-78%)
 *                 Q2_K _avx2   55-57% (48-52%)                  Q4_K _avx2   72-78% (62-71%)
 *   L2-resident   Q2_K _avx512 84-93%, _avx2 48-55%             Q4_K _avx512 126-130%, _avx2 64-72%
 * so Q2_K is compute-bound: 256 weights in 84 bytes are 1.7x Q4_K's work per byte, and its
 * _avx512 computes at about the stream's rate (the in-place 4q quants above made it 8% faster
 * than three shifts, L2-resident, both in one binary; _avx2 unchanged), which from DRAM, where
 * loads and compute do not overlap perfectly, ends below the 80% that Q4_K's 1.3x leaves; _avx2
 * is compute-bound at half the stream.
 */
#include "krt_q2k.h"

/* ---------------- scalar ---------------- */

void krt_quantize_q2_K_ref(krt_block_q2_K *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_q2_quant_ref(dst + b, src + b * KRT_QK_K);
}

void krt_dequantize_q2_K_ref(float *dst, const krt_block_q2_K *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_fp16_to_fp32(src[b].d), dmin = krt_fp16_to_fp32(src[b].dmin);
        float *y = dst + b * KRT_QK_K;
        for (int i = 0; i < 16; i++) {
            const float dl = d * (float)(src[b].scales[i] & 15), ml = dmin * (float)(src[b].scales[i] >> 4);
            for (int l = 0; l < 16; l++) y[16 * i + l] = dl * (float)krt_q2_q(src + b, 16 * i + l) - ml;
        }
    }
}

void krt_gemv_q2_K_ref(float *y, const krt_block_q2_K *w, const krt_block_q8_K *x, const float *bias, int64_t cols,
                       int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r++) {
        const float acc = krt_kd_q2_K(w + r * nb, x, nb);
        y[r] = bias ? acc + bias[r] : acc;
    }
}

void krt_gemm_q2_K_ref(float *y, const krt_block_q2_K *w, const krt_block_q8_K *x, const float *bias, int64_t rows,
                       int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t r = r0; r < r1; r++) {
            const float acc = krt_kd_q2_K(w + r * nb, x + t * nb, nb);
            y[t * rows + r] = bias ? acc + bias[r] : acc;
        }
    }
}

#ifdef KRT_X86

#define KRT_Q2_BS 84   /* bytes per super-block */
#define KRT_Q2_SB 32   /* super-blocks per column chunk (8192 columns) */
#ifndef KRT_Q2_PF_LEAD
#define KRT_Q2_PF_LEAD 8192
#endif

/* The scale words (sc, low nibbles) and min words (m, high nibbles) of one super-block. */
KRT_TARGET_AVX2 KRT_INLINE void krt_q2_scm(const uint8_t *blk, __m256i *sc, __m256i *mn) {
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)blk));
    *sc = _mm256_and_si256(w, _mm256_set1_epi16(0x0f));
    *mn = _mm256_srli_epi16(w, 4);
}

/* ---------------- AVX2 ---------------- */

/* Word j of the 128-bit source in the low lane, word k in the high lane, each broadcast 8 times. */
#define KRT_Q2_WSEL(j, k)                                                                                         \
    _mm256_setr_epi8(2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1,     \
                     2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1, 2 * (j), 2 * (j) + 1,     \
                     2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1,     \
                     2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1, 2 * (k), 2 * (k) + 1)

/* One row's super-block: 8 int32 lanes summing to 4 * isum, and 8 summing to msum (*mins).
 * The quants of shifts 2 and 6 are taken in place (bits 2..3: 4q) to save two shifts per half;
 * their products carry a factor 4 (pairs <= 3048), and the other two are scaled by 4 sc instead. */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_q2_sb_avx2(const uint8_t *blk, const krt_block_q8_K *x, __m256i *mins) {
    const __m256i c3 = _mm256_set1_epi8(3), cc = _mm256_set1_epi8(0x0c);
    __m256i sc, mn;
    krt_q2_scm(blk, &sc, &mn);
    *mins = _mm256_madd_epi16(mn, _mm256_loadu_si256((const __m256i *)x->bsums));
    const __m256i sc4 = _mm256_slli_epi16(sc, 2);
    __m256i acc = _mm256_setzero_si256();
#if defined(__clang__)
#pragma clang loop unroll(full)
#else
#pragma GCC unroll 2
#endif
    for (int n = 0; n < 2; n++) {
        const __m256i r = _mm256_loadu_si256((const __m256i *)(blk + 16 + 32 * n));
        const __m256i r4 = _mm256_srli_epi16(r, 4);
        /* scales 8n..8n+7 as words, in both lanes (s4: times 4) */
        const __m256i s = n == 0 ? _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc))
                                 : _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc, 1));
        const __m256i s4 = n == 0 ? _mm256_broadcastsi128_si256(_mm256_castsi256_si128(sc4))
                                  : _mm256_broadcastsi128_si256(_mm256_extracti128_si256(sc4, 1));
        /* elements 128n + 32j + l, l < 16: sub-block 8n + 2j (low lane); l >= 16: 8n + 2j + 1 */
        const __m256i q0 = _mm256_and_si256(r, c3);  /* j = 0 */
        const __m256i q1 = _mm256_and_si256(r, cc);  /* j = 1, times 4 */
        const __m256i q2 = _mm256_and_si256(r4, c3); /* j = 2 */
        const __m256i q3 = _mm256_and_si256(r4, cc); /* j = 3, times 4 */
        const int8_t *xq = x->qs + 128 * n;
        const __m256i p0 = _mm256_maddubs_epi16(q0, _mm256_loadu_si256((const __m256i *)(xq + 0)));
        const __m256i p1 = _mm256_maddubs_epi16(q1, _mm256_loadu_si256((const __m256i *)(xq + 32)));
        const __m256i p2 = _mm256_maddubs_epi16(q2, _mm256_loadu_si256((const __m256i *)(xq + 64)));
        const __m256i p3 = _mm256_maddubs_epi16(q3, _mm256_loadu_si256((const __m256i *)(xq + 96)));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p0, _mm256_shuffle_epi8(s4, KRT_Q2_WSEL(0, 1))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p1, _mm256_shuffle_epi8(s, KRT_Q2_WSEL(2, 3))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p2, _mm256_shuffle_epi8(s4, KRT_Q2_WSEL(4, 5))));
        acc = _mm256_add_epi32(acc, _mm256_madd_epi16(p3, _mm256_shuffle_epi8(s, KRT_Q2_WSEL(6, 7))));
    }
    return acc;
}

KRT_TARGET_AVX2 KRT_INLINE int32_t krt_q2_hsum_avx2(__m256i v) {
    __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4e));
    s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xb1));
    return _mm_cvtsi128_si32(s);
}

/* fp16 -> fp32 through F16C (exact, as krt_fp16_to_fp32). */
KRT_TARGET_AVX2 KRT_INLINE float krt_q2_h2f(uint16_t h) { return _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(h))); }

KRT_TARGET_AVX2 void krt_quantize_q2_K_avx2(krt_block_q2_K *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_q2_quant_ref(dst + b, src + b * KRT_QK_K);
}

KRT_TARGET_AVX2 void krt_dequantize_q2_K_avx2(float *dst, const krt_block_q2_K *src, int64_t b0, int64_t b1) {
    const __m128i c3 = _mm_set1_epi8(3);
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_q2_h2f(src[b].d), dmin = krt_q2_h2f(src[b].dmin);
        float *y = dst + b * KRT_QK_K;
        for (int n = 0; n < 2; n++) {
            for (int h = 0; h < 2; h++) {
                const __m128i r = _mm_loadu_si128((const __m128i *)(src[b].qs + 32 * n + 16 * h));
                for (int j = 0; j < 4; j++) {
                    const int i = 8 * n + 2 * j + h; /* sub-block: elements 128n + 32j + 16h .. +16 */
                    const __m128i q = _mm_and_si128(_mm_srl_epi16(r, _mm_cvtsi32_si128(2 * j)), c3);
                    const __m256 dl = _mm256_set1_ps(d * (float)(src[b].scales[i] & 15));
                    const __m256 ml = _mm256_set1_ps(dmin * (float)(src[b].scales[i] >> 4));
                    const __m256 f0 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(q));
                    const __m256 f1 = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_srli_si128(q, 8)));
                    _mm256_storeu_ps(y + 16 * i, _mm256_sub_ps(_mm256_mul_ps(dl, f0), ml));
                    _mm256_storeu_ps(y + 16 * i + 8, _mm256_sub_ps(_mm256_mul_ps(dl, f1), ml));
                }
            }
        }
    }
}

KRT_TARGET_AVX2 void krt_gemv_q2_K_avx2(float *y, const krt_block_q2_K *w, const krt_block_q8_K *x, const float *bias,
                                        int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K, rs = nb * KRT_Q2_BS, pend = r1 * rs;
    const uint8_t *wb = (const uint8_t *)w;
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_Q2_SB) {
        const int64_t cn = nb - c0 < KRT_Q2_SB ? nb - c0 : KRT_Q2_SB;
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r++) {
            const uint8_t *p = wb + r * rs + c0 * KRT_Q2_BS;
            const int64_t pf = (r + 1) * rs + c0 * KRT_Q2_BS + KRT_Q2_PF_LEAD;
            __m256 acc = _mm256_setzero_ps(), accm = _mm256_setzero_ps();
            for (int64_t b = 0; b < cn; b++) {
                const int64_t q = pf + b * KRT_Q2_BS;
                if (q < pend) {
                    _mm_prefetch((const char *)wb + q, _MM_HINT_T1);
                    _mm_prefetch((const char *)wb + q + 64, _MM_HINT_T1);
                }
                const uint8_t *blk = p + b * KRT_Q2_BS;
                uint32_t dd;
                memcpy(&dd, blk + 80, 4);
                /* d * d_x / 4 (the lanes sum to 4 isum), dmin * d_x; poisoned before the exact / 4 */
                const __m128 f = _mm_mul_ps(
                    krt_scale_poison_sse(_mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)dd)), _mm_set1_ps(x[c0 + b].d))),
                    _mm_setr_ps(0.25f, 1.0f, 1.0f, 1.0f));
                __m256i mins;
                const __m256i v = krt_q2_sb_avx2(blk, x + c0 + b, &mins);
                acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), _mm256_broadcastss_ps(f), acc);
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

/* The 4 rows' [isum_i] and [msum_i] from their 8-lane partial sums (vphaddd tree, exact). */
KRT_TARGET_AVX2 KRT_INLINE void krt_q2_sums4_avx2(const __m256i u[4], const __m256i m[4], __m128i *is, __m128i *ms) {
    const __m256i gi = _mm256_hadd_epi32(_mm256_hadd_epi32(u[0], u[1]), _mm256_hadd_epi32(u[2], u[3]));
    const __m256i gm = _mm256_hadd_epi32(_mm256_hadd_epi32(m[0], m[1]), _mm256_hadd_epi32(m[2], m[3]));
    *is = _mm_srai_epi32(_mm_add_epi32(_mm256_castsi256_si128(gi), _mm256_extracti128_si256(gi, 1)), 2); /* 4 isum -> isum */
    *ms = _mm_add_epi32(_mm256_castsi256_si128(gm), _mm256_extracti128_si256(gm, 1));
}

/* The 4 rows' terms a * isum - c * msum (a, c the poisoned d * d_x, dmin * d_x), lane-wise with
 * krt_q2_term's roundings. */
KRT_TARGET_AVX2 KRT_INLINE __m128 krt_q2_terms4(__m128 d4, __m128 m4, float dx, __m128i is, __m128i ms) {
    const __m128 x = _mm_set1_ps(dx);
    const __m128 a = krt_scale_poison_sse(_mm_mul_ps(d4, x)), c = krt_scale_poison_sse(_mm_mul_ps(m4, x));
    return _mm_sub_ps(_mm_mul_ps(a, _mm_cvtepi32_ps(is)), _mm_mul_ps(c, _mm_cvtepi32_ps(ms)));
}

KRT_TARGET_AVX2 void krt_gemm_q2_K_avx2(float *y, const krt_block_q2_K *w, const krt_block_q8_K *x, const float *bias,
                                        int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    for (int64_t r = r0; r < r1; r += 4) {
        const int rn = r1 - r < 4 ? (int)(r1 - r) : 4;
        const krt_block_q2_K *wr[4]; /* the last row repeated past r1: its lanes are not stored */
        for (int i = 0; i < 4; i++) wr[i] = w + (r + (i < rn ? i : rn - 1)) * nb;
        for (int64_t t = 0; t < T; t++) {
            const krt_block_q8_K *xt = x + t * nb;
            __m128 acc = _mm_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                __m256i u[4], mins[4];
                for (int i = 0; i < 4; i++) u[i] = krt_q2_sb_avx2((const uint8_t *)(wr[i] + b), xt + b, &mins[i]);
                __m128i is, ms;
                krt_q2_sums4_avx2(u, mins, &is, &ms);
                const __m128 d4 = _mm_setr_ps(krt_q2_h2f(wr[0][b].d), krt_q2_h2f(wr[1][b].d), krt_q2_h2f(wr[2][b].d),
                                              krt_q2_h2f(wr[3][b].d));
                const __m128 m4 = _mm_setr_ps(krt_q2_h2f(wr[0][b].dmin), krt_q2_h2f(wr[1][b].dmin),
                                              krt_q2_h2f(wr[2][b].dmin), krt_q2_h2f(wr[3][b].dmin));
                acc = _mm_add_ps(acc, krt_q2_terms4(d4, m4, xt[b].d, is, ms));
            }
            float o[4];
            _mm_storeu_ps(o, acc);
            for (int i = 0; i < rn; i++) y[t * rows + r + i] = bias ? o[i] + bias[r + i] : o[i];
        }
    }
}

/* ---------------- AVX-512 ---------------- */

/* The activation side of one super-block. */
typedef struct {
    __m512i x[4]; /* vector j: elements 32j..32j+31 | 128+32j..128+32j+31 */
    __m256i bs;   /* the 16 bsums */
    float dx;
} krt_q2_xsb;

KRT_TARGET_AVX512 KRT_INLINE void krt_q2_prep_avx512(krt_q2_xsb *st, const krt_block_q8_K *x) {
    for (int j = 0; j < 4; j++)
        st->x[j] = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(x->qs + 32 * j))),
                                      _mm256_loadu_si256((const __m256i *)(x->qs + 128 + 32 * j)), 1);
    st->bs = _mm256_loadu_si256((const __m256i *)x->bsums);
    st->dx = x->d;
}

/* One row's super-block: 16 int32 lanes summing to 4 * isum, 8 summing to msum (*mins). As in
 * _avx2, the quants of shifts 2 and 6 are taken in place (4q: one shift per row and super-block
 * instead of three) and the others meet 4 sc. */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_q2_sb_avx512(const uint8_t *blk, const krt_q2_xsb *st, __m256i *mins) {
    const __m512i c3 = _mm512_set1_epi8(3), cc = _mm512_set1_epi8(0x0c);
    const __m512i r = _mm512_loadu_si512((const void *)(blk + 16));
    const __m512i r4 = _mm512_srli_epi16(r, 4);
    /* byte 32n + l of vector j: element 128n + 32j + l */
    const __m512i q0 = _mm512_and_si512(r, c3);  /* j = 0 */
    const __m512i q1 = _mm512_and_si512(r, cc);  /* j = 1, times 4: lanes <= 6096 */
    const __m512i q2 = _mm512_and_si512(r4, c3); /* j = 2 */
    const __m512i q3 = _mm512_and_si512(r4, cc); /* j = 3, times 4 */
    const __m512i z = _mm512_setzero_si512();
    const __m512i d0 = _mm512_dpbusd_epi32(z, q0, st->x[0]), d1 = _mm512_dpbusd_epi32(z, q1, st->x[1]);
    const __m512i d2 = _mm512_dpbusd_epi32(z, q2, st->x[2]), d3 = _mm512_dpbusd_epi32(z, q3, st->x[3]);
    __m256i sc, mn;
    krt_q2_scm(blk, &sc, &mn);
    *mins = _mm256_madd_epi16(mn, st->bs);
    /* vpackssdw(d_j, d_j+1), 128-bit chunk c: 4 words of d_j's chunk c, then 4 of d_j+1's; chunk c of
     * vector j is sub-block 2j (c = 0), 2j + 1, 8 + 2j, 9 + 2j (c = 3). Words of d_0 / d_2 take
     * 4 sc (first source, index sb), words of d_1 / d_3 sc (second source, index 32 + sb). */
    const __m512i i01 = _mm512_setr_epi32(0, 0, 0x220022, 0x220022, 0x10001, 0x10001, 0x230023, 0x230023, 0x80008,
                                          0x80008, 0x2a002a, 0x2a002a, 0x90009, 0x90009, 0x2b002b, 0x2b002b);
    const __m512i i23 = _mm512_add_epi16(i01, _mm512_set1_epi16(4));
    const __m512i scz = _mm512_castsi256_si512(sc), sc4z = _mm512_castsi256_si512(_mm256_slli_epi16(sc, 2));
    const __m512i a = _mm512_madd_epi16(_mm512_packs_epi32(d0, d1), _mm512_permutex2var_epi16(sc4z, i01, scz));
    const __m512i b = _mm512_madd_epi16(_mm512_packs_epi32(d2, d3), _mm512_permutex2var_epi16(sc4z, i23, scz));
    return _mm512_add_epi32(a, b);
}

KRT_TARGET_AVX512 void krt_quantize_q2_K_avx512(krt_block_q2_K *dst, const float *src, int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; b++) krt_q2_quant_ref(dst + b, src + b * KRT_QK_K);
}

KRT_TARGET_AVX512 void krt_dequantize_q2_K_avx512(float *dst, const krt_block_q2_K *src, int64_t b0, int64_t b1) {
    const __m128i c3 = _mm_set1_epi8(3);
    for (int64_t b = b0; b < b1; b++) {
        const float d = krt_q2_h2f(src[b].d), dmin = krt_q2_h2f(src[b].dmin);
        float *y = dst + b * KRT_QK_K;
        for (int n = 0; n < 2; n++) {
            for (int h = 0; h < 2; h++) {
                const __m128i r = _mm_loadu_si128((const __m128i *)(src[b].qs + 32 * n + 16 * h));
                for (int j = 0; j < 4; j++) {
                    const int i = 8 * n + 2 * j + h;
                    const __m128i q = _mm_and_si128(_mm_srl_epi16(r, _mm_cvtsi32_si128(2 * j)), c3);
                    const __m512 dl = _mm512_set1_ps(d * (float)(src[b].scales[i] & 15));
                    const __m512 ml = _mm512_set1_ps(dmin * (float)(src[b].scales[i] >> 4));
                    _mm512_storeu_ps(y + 16 * i,
                                     _mm512_sub_ps(_mm512_mul_ps(dl, _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(q))), ml));
                }
            }
        }
    }
}

KRT_TARGET_AVX512 void krt_gemv_q2_K_avx512(float *y, const krt_block_q2_K *w, const krt_block_q8_K *x,
                                            const float *bias, int64_t cols, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK_K, rs = nb * KRT_Q2_BS, pend = r1 * rs;
    const uint8_t *wb = (const uint8_t *)w;
    krt_q2_xsb xs[KRT_Q2_SB];
    float sd[8]; /* per row i: d * d_x at 2i, dmin * d_x at 2i + 1 */
    for (int64_t c0 = 0; c0 < nb; c0 += KRT_Q2_SB) {
        const int64_t cn = nb - c0 < KRT_Q2_SB ? nb - c0 : KRT_Q2_SB;
        for (int64_t b = 0; b < cn; b++) krt_q2_prep_avx512(&xs[b], x + c0 + b);
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r += 4) {
            const uint8_t *p[4];
            for (int i = 0; i < 4; i++) p[i] = wb + (r + i < r1 ? r + i : r1 - 1) * rs + c0 * KRT_Q2_BS;
            const int64_t pf = (r + 4) * rs + c0 * KRT_Q2_BS + KRT_Q2_PF_LEAD; /* the next group, linearly */
            __m512 acc[4];
            __m256 accm[4];
            for (int i = 0; i < 4; i++) {
                acc[i] = _mm512_setzero_ps();
                accm[i] = _mm256_setzero_ps();
            }
            for (int64_t b = 0; b < cn; b++) {
                const int64_t o = b * KRT_Q2_BS;
                const int64_t q = pf + 4 * o; /* 4 rows x 84 bytes per super-block */
                if (q < pend) {
                    for (int l = 0; l < 4 * KRT_Q2_BS; l += 64) _mm_prefetch((const char *)wb + q + l, _MM_HINT_T1);
                }
                uint32_t dd[4];
                for (int i = 0; i < 4; i++) memcpy(&dd[i], p[i] + o + 80, 4);
                const __m256 f = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dd));
                /* d * d_x / 4 (the lanes sum to 4 isum) and dmin * d_x, poisoned before the exact / 4 */
                _mm256_storeu_ps(sd, _mm256_mul_ps(krt_scale_poison_avx2(_mm256_mul_ps(f, _mm256_set1_ps(xs[b].dx))),
                                                   _mm256_setr_ps(0.25f, 1, 0.25f, 1, 0.25f, 1, 0.25f, 1)));
                __asm__ volatile("" ::: "memory"); /* keep sd in memory: the FMAs broadcast from it */
                for (int i = 0; i < 4; i++) {
                    __m256i mins;
                    const __m512i v = krt_q2_sb_avx512(p[i] + o, &xs[b], &mins);
                    acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(v), _mm512_set1_ps(sd[2 * i]), acc[i]);
                    accm[i] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(mins), _mm256_set1_ps(sd[2 * i + 1]), accm[i]);
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

/* One row's super-block prepared for several tokens (the GEMM): the four quant vectors, the two
 * scale-word vectors, the min words and the fp32 scales. */
typedef struct {
    __m512i q[4], p01, p23;
    __m256i mn;
    float d, dmin;
} krt_q2_wrow;

KRT_TARGET_AVX512 KRT_INLINE void krt_q2_wprep_avx512(krt_q2_wrow *o, const krt_block_q2_K *blk) {
    const __m512i c3 = _mm512_set1_epi8(3), cc = _mm512_set1_epi8(0x0c);
    const __m512i r = _mm512_loadu_si512((const void *)blk->qs), r4 = _mm512_srli_epi16(r, 4);
    o->q[0] = _mm512_and_si512(r, c3);
    o->q[1] = _mm512_and_si512(r, cc);
    o->q[2] = _mm512_and_si512(r4, c3);
    o->q[3] = _mm512_and_si512(r4, cc);
    __m256i sc, mn;
    krt_q2_scm((const uint8_t *)blk, &sc, &mn);
    const __m512i i01 = _mm512_setr_epi32(0, 0, 0x220022, 0x220022, 0x10001, 0x10001, 0x230023, 0x230023, 0x80008,
                                          0x80008, 0x2a002a, 0x2a002a, 0x90009, 0x90009, 0x2b002b, 0x2b002b);
    const __m512i i23 = _mm512_add_epi16(i01, _mm512_set1_epi16(4));
    const __m512i scz = _mm512_castsi256_si512(sc), sc4z = _mm512_castsi256_si512(_mm256_slli_epi16(sc, 2));
    o->p01 = _mm512_permutex2var_epi16(sc4z, i01, scz);
    o->p23 = _mm512_permutex2var_epi16(sc4z, i23, scz);
    o->mn = mn;
    o->d = krt_q2_h2f(blk->d);
    o->dmin = krt_q2_h2f(blk->dmin);
}

#define KRT_Q2_GT 8 /* tokens per GEMM tile */

/* The GEMM: per group of 4 rows (the last row repeated past r1; those lanes are not stored) and
 * tile of 8 tokens, each super-block of the 4 rows is unpacked once; per token the 4 rows' 16-lane
 * isum and 8-lane msum vectors are reduced together (vphaddd tree: [4 isum_i], [msum_i], exact),
 * and the 4 rows' terms a * isum - c * msum and sums are computed lane-wise with the scalar
 * definition's roundings (no FMA): bit-identical to krt_kd_q2_K. */
KRT_TARGET_AVX512 void krt_gemm_q2_K_avx512(float *y, const krt_block_q2_K *w, const krt_block_q8_K *x,
                                            const float *bias, int64_t rows, int64_t cols, int64_t T, int64_t r0,
                                            int64_t r1) {
    const int64_t nb = cols / KRT_QK_K;
    const __m512i z = _mm512_setzero_si512();
    krt_q2_wrow wr[4];
    for (int64_t r = r0; r < r1; r += 4) {
        const int rn = r1 - r < 4 ? (int)(r1 - r) : 4;
        const __mmask8 m = (__mmask8)((1u << rn) - 1u);
        const __m128 b4 = bias ? _mm_maskz_loadu_ps(m, bias + r) : _mm_setzero_ps();
        for (int64_t t0 = 0; t0 < T; t0 += KRT_Q2_GT) {
            const int tn = T - t0 < KRT_Q2_GT ? (int)(T - t0) : KRT_Q2_GT;
            __m128 acc[KRT_Q2_GT];
            for (int t = 0; t < KRT_Q2_GT; t++) acc[t] = _mm_setzero_ps();
            for (int64_t b = 0; b < nb; b++) {
                for (int i = 0; i < 4; i++) krt_q2_wprep_avx512(&wr[i], w + (r + (i < rn ? i : rn - 1)) * nb + b);
                const __m128 d4 = _mm_setr_ps(wr[0].d, wr[1].d, wr[2].d, wr[3].d);
                const __m128 m4 = _mm_setr_ps(wr[0].dmin, wr[1].dmin, wr[2].dmin, wr[3].dmin);
                for (int t = 0; t < tn; t++) {
                    krt_q2_xsb st;
                    krt_q2_prep_avx512(&st, x + (t0 + t) * nb + b);
                    __m256i u[4], mins[4];
                    for (int i = 0; i < 4; i++) {
                        const krt_q2_wrow *o = &wr[i];
                        const __m512i d0 = _mm512_dpbusd_epi32(z, o->q[0], st.x[0]);
                        const __m512i d1 = _mm512_dpbusd_epi32(z, o->q[1], st.x[1]);
                        const __m512i d2 = _mm512_dpbusd_epi32(z, o->q[2], st.x[2]);
                        const __m512i d3 = _mm512_dpbusd_epi32(z, o->q[3], st.x[3]);
                        const __m512i v = _mm512_add_epi32(_mm512_madd_epi16(_mm512_packs_epi32(d0, d1), o->p01),
                                                           _mm512_madd_epi16(_mm512_packs_epi32(d2, d3), o->p23));
                        u[i] = _mm256_add_epi32(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
                        mins[i] = _mm256_madd_epi16(o->mn, st.bs);
                    }
                    const __m256i gi = _mm256_hadd_epi32(_mm256_hadd_epi32(u[0], u[1]), _mm256_hadd_epi32(u[2], u[3]));
                    const __m256i gm =
                        _mm256_hadd_epi32(_mm256_hadd_epi32(mins[0], mins[1]), _mm256_hadd_epi32(mins[2], mins[3]));
                    /* [4 isum_i] (exact: the lanes sum to 4 isum) and [msum_i] */
                    const __m128i is = _mm_srai_epi32(_mm_add_epi32(_mm256_castsi256_si128(gi), _mm256_extracti128_si256(gi, 1)), 2);
                    const __m128i ms = _mm_add_epi32(_mm256_castsi256_si128(gm), _mm256_extracti128_si256(gm, 1));
                    const __m128 dx = _mm_set1_ps(st.dx);
                    const __m128 a = krt_scale_poison_sse(_mm_mul_ps(d4, dx)), c = krt_scale_poison_sse(_mm_mul_ps(m4, dx));
                    const __m128 term = _mm_sub_ps(_mm_mul_ps(a, _mm_cvtepi32_ps(is)), _mm_mul_ps(c, _mm_cvtepi32_ps(ms)));
                    acc[t] = _mm_add_ps(acc[t], term);
                }
            }
            for (int t = 0; t < tn; t++)
                _mm_mask_storeu_ps(y + (t0 + t) * rows + r, m, bias ? _mm_add_ps(acc[t], b4) : acc[t]);
        }
    }
}

#endif /* KRT_X86 */
