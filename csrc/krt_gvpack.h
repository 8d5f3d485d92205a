/*
 * krt_gvpack.h - the AVX-512 GEMV driver shared by the 32-weight nibble block types Q4_0, Q5_0 and
 * Q5_1 (activations Q8_0): written once, instantiated per type through a compile-time constant
 * (every helper is static inline, always inlined; c2goasm-friendly: no calls, no globals).
 * Included by csrc/gemv.c (Q5_0, also inside the fused krt_gemv_q5_0_f32) and csrc/gemv_k.c.
 *
 * Why this shape (Zen 4 executes a zmm op as two 256-bit halves: shifts, shuffles, vpdpbusd,
 * conversions and FMAs each sustain about one zmm op per cycle, only adds / logic / blends two;
 * a 32-weight block of 18-24 bytes must cost about 2 cycles to keep up with DRAM, so every
 * per-block operation counts):
 *  - A step covers 4 consecutive blocks of 4 rows (16 row-blocks). Row i's 4 blocks are 4*BS
 *    contiguous bytes: one 64-byte load plus one masked load (the rest of the step), and one
 *    vpermt2w gathers their 4 x 16 nibble bytes into Z_i = [qs_b | qs_b+1 | qs_b+2 | qs_b+3].
 *  - Low nibbles (elements 0..15) and high nibbles (16..31) of a block share dword lanes:
 *    vpdpbusd(vpdpbusd(corr, lo, XL), hi, XH) leaves 4 exact int32 partial sums per row-block,
 *    with XL / XH the activations arranged the same way. Weights are the unsigned operand
 *    (nibble, +16 for a set Q5 high bit via a masked vpaddb whose 64-bit mask is assembled from
 *    the qh words in general-purpose registers); the offset (-8 for Q4_0, -16 for Q5_0 and Q5_1)
 *    is the accumulator's start value corr = offset * sum4(x) per lane.
 *  - The 4 lanes of a row-block fit int16 (|sum of 8 products| <= 16 * 127 * 8), so two rounds of
 *    vpackssdw + vpmaddwd(1) fold the 4 rows' 64 lanes into one vector with one exact int32 per
 *    row-block (lane 4k + i = row i, block b + k): one cvt, one FMA and one vcvtph2ps of 16
 *    gathered scales per 16 row-blocks instead of 4 of each.
 *  - The activation side of every step (XL, XH, corr, d_x per lane, and for Q5_1 d_x * sum x) is
 *    prepared once per call into a stack table (column chunks of 256 blocks bound it to 20 KiB)
 *    and shared by all row groups.
 *  - The next row group's bytes (contiguous) are prefetched linearly into L2 (T1), 8 KiB ahead,
 *    while a group computes (T0 / 2-4 KiB ahead streamed 10-30% slower from DRAM here).
 * Q5_1 (value d*q + m, q in 0..31) runs as Q5_0 with q - 16 and adds (16 d + m) * d_x * sum x.
 * Rounding: exact integer sums per block; the fp32 order differs from _ref (lane-wise FMA, then a
 * 16-lane sum), within a few ulp of the row's magnitude (csrc/tests/test_gemv_k.c bounds it).
 */
#ifndef KRT_GVPACK_H
#define KRT_GVPACK_H

#include "krt_common.h"
#include "krt_iquant.h"

#ifdef KRT_X86

#define KRT_GP_Q4_0 0
#define KRT_GP_Q5_0 1
#define KRT_GP_Q5_1 2
#define KRT_GP_IQ4_NL 3 /* IQ4_NL: Q4_0's layout, the nibble indexes the int8 table kvalues_iq4nl */
#define KRT_GP_NIB4(T) ((T) == KRT_GP_Q4_0 || (T) == KRT_GP_IQ4_NL) /* 18-byte blocks, no qh */
#define KRT_GP_BS(T) (KRT_GP_NIB4(T) ? 18 : (T) == KRT_GP_Q5_0 ? 22 : 24) /* block bytes */
#define KRT_GP_QS(T) (KRT_GP_NIB4(T) ? 2 : (T) == KRT_GP_Q5_0 ? 6 : 8)    /* qs offset */
#define KRT_GP_QH(T) ((T) == KRT_GP_Q5_0 ? 2 : 4)                        /* qh offset */
/* The unsigned weight byte is q + OFF (IQ4_NL: the table value + 128) and the accumulator starts
 * at -OFF * sum4(x). */
#define KRT_GP_OFF(T) ((T) == KRT_GP_Q4_0 ? 8 : (T) == KRT_GP_IQ4_NL ? 128 : 16)
#define KRT_GP_STEPS 64  /* steps (4 blocks) per column chunk */
#ifndef KRT_GP_PF_LEAD
#define KRT_GP_PF_LEAD 8192
#endif
#define KRT_GP_PF_LEAD_AVX2 2048 /* AVX2: 18-24 bytes per row and step, into L1 */
#ifndef KRT_GP_PF_HINT
#define KRT_GP_PF_HINT _MM_HINT_T1
#endif
#define KRT_GP_W2(a, b) ((int)((a) | ((b) << 16)))

/* The activation side of one step (4 blocks). */
typedef struct {
    __m512i xl, xh; /* chunk k: elements 0..15 / 16..31 of block b+k */
    __m512i cr;     /* per lane: offset * (sum of the lane's 4 low + 4 high activations) */
    __m512 dx;      /* lane 4k+i: fp32(d_x of block b+k) */
    __m512 xs;      /* Q5_1: lane 4k+i: fp32(d_x) * sum(x) of block b+k */
} krt_gp_xstep;

KRT_TARGET_AVX512 KRT_INLINE void krt_gp_prep_avx512(krt_gp_xstep *st, const krt_block_q8_0 *x, int n, const int T) {
    __m128i l[4], h[4];
    uint16_t d[4] = {0, 0, 0, 0};
    float sx[4] = {0, 0, 0, 0};
    for (int k = 0; k < 4; k++) {
        if (k < n) {
            l[k] = _mm_loadu_si128((const __m128i *)x[k].qs);
            h[k] = _mm_loadu_si128((const __m128i *)(x[k].qs + 16));
            d[k] = x[k].d;
            if (T == KRT_GP_Q5_1) {
                /* sum of the 32 quants: SAD of (q ^ 0x80) against 0, minus 32 * 128 */
                __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)x[k].qs), _mm256_set1_epi8((char)0x80));
                __m256i sad = _mm256_sad_epu8(v, _mm256_setzero_si256());
                __m128i s2 = _mm_add_epi64(_mm256_castsi256_si128(sad), _mm256_extracti128_si256(sad, 1));
                s2 = _mm_add_epi64(s2, _mm_unpackhi_epi64(s2, s2));
                sx[k] = (float)(_mm_cvtsi128_si32(s2) - 32 * 128);
            }
        } else {
            l[k] = h[k] = _mm_setzero_si128();
        }
    }
    st->xl = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(l[0]), l[1], 1), l[2], 2), l[3], 3);
    st->xh = _mm512_inserti32x4(_mm512_inserti32x4(_mm512_inserti32x4(_mm512_castsi128_si512(h[0]), h[1], 1), h[2], 2), h[3], 3);
    const __m512i off = _mm512_set1_epi8((char)KRT_GP_OFF(T));
    st->cr = _mm512_sub_epi32(_mm512_setzero_si512(),
                              _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), off, st->xl), off, st->xh));
    const __m512i rep = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m128 df = _mm_cvtph_ps(_mm_setr_epi16((short)d[0], (short)d[1], (short)d[2], (short)d[3], 0, 0, 0, 0));
    st->dx = _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(df));
    st->xs = _mm512_permutexvar_ps(rep, _mm512_castps128_ps512(_mm_mul_ps(df, _mm_loadu_ps(sx))));
}

KRT_INLINE uint64_t krt_gp_ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

/* Per-call constants: permute indices (built once, kept in registers). A step's raw bytes of one
 * row are [a: bytes 0..63 | b: bytes 64..4*BS-1]; word w of the pair is a[w] (w < 32) or b[w - 32]. */
typedef struct {
    __m512i iz;          /* Z: chunk k, word j <- word (BS*k + QS)/2 + j */
    __m512i ip01, ip23;  /* scales: word 4k+i (d) and 16+4k+i (Q5_1: m) <- block k of row i */
    __mmask32 inb01, inb23; /* words whose scale sits in the b vectors */
} krt_gp_consts;

KRT_TARGET_AVX512 KRT_INLINE void krt_gp_consts_avx512(krt_gp_consts *c, const int T) {
    const int BS = KRT_GP_BS(T), QS = KRT_GP_QS(T);
    uint16_t iz[32], i01[32], i23[32];
    uint32_t b01 = 0, b23 = 0;
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 8; j++) iz[8 * k + j] = (uint16_t)((BS * k + QS) / 2 + j);
    for (int w = 0; w < 32; w++) i01[w] = i23[w] = 0;
    for (int h = 0; h < (T == KRT_GP_Q5_1 ? 2 : 1); h++) { /* h = 0: d at byte 0; h = 1: m at byte 2 */
        for (int k = 0; k < 4; k++) {
            const int wd = (BS * k + 2 * h) / 2, s = wd & 31, base = 16 * h + 4 * k;
            i01[base + 0] = (uint16_t)s;      /* row 0: first vector of the pair */
            i01[base + 1] = (uint16_t)(32 + s); /* row 1: second vector */
            i23[base + 2] = (uint16_t)s;
            i23[base + 3] = (uint16_t)(32 + s);
            if (wd >= 32) {
                b01 |= 3u << base;
                b23 |= 3u << (base + 2);
            }
        }
    }
    c->iz = _mm512_loadu_si512((const void *)iz);
    c->ip01 = _mm512_loadu_si512((const void *)i01);
    c->ip23 = _mm512_loadu_si512((const void *)i23);
    c->inb01 = (__mmask32)b01;
    c->inb23 = (__mmask32)b23;
}

/* One row of a step: the 4 blocks at p (n valid; n < 4 only in a row's last step). Returns the
 * per-lane partial sums (chunk k: block b+k) and the raw vectors for the scale gather. */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_gp_row_avx512(const uint8_t *p, const krt_gp_xstep *st, const krt_gp_consts *c,
                                                      int n, __m512i *ra, __m512i *rb, const int T) {
    const int BS = KRT_GP_BS(T), QH = KRT_GP_QH(T);
    const __m512i c0f = _mm512_set1_epi8(0x0f);
    __m512i a, b;
    if (n == 4) {
        a = _mm512_loadu_si512((const void *)p);
        b = _mm512_maskz_loadu_epi8((__mmask64)((1ull << (4 * BS - 64)) - 1u), p + 64);
    } else { /* never read past the row */
        const int nbytes = n * BS;
        a = _mm512_maskz_loadu_epi8(nbytes >= 64 ? ~(__mmask64)0 : (__mmask64)((1ull << nbytes) - 1u), p);
        b = _mm512_maskz_loadu_epi8(nbytes > 64 ? (__mmask64)((1ull << (nbytes - 64)) - 1u) : 0, p + 64);
    }
    *ra = a;
    *rb = b;
    __m512i z = _mm512_permutex2var_epi16(a, c->iz, b);
    __m512i lo = _mm512_and_si512(z, c0f);
    __m512i hi = _mm512_and_si512(_mm512_srli_epi16(z, 4), c0f);
    if (T == KRT_GP_IQ4_NL) { /* table lookup (vpshufb within each 128-bit lane): kvalues_iq4nl + 128 */
        const __m512i tbl = _mm512_broadcast_i32x4(krt_iq4nl_u8());
        lo = _mm512_shuffle_epi8(tbl, lo);
        hi = _mm512_shuffle_epi8(tbl, hi);
    }
    if (!KRT_GP_NIB4(T)) { /* 5th bits: k_lo bit 16k+j = qh_{b+k} bit j, k_hi bit 16k+j = bit 16+j */
        uint64_t klo = 0, khi = 0;
        for (int k = 0; k < 4; k++) {
            if (k < n) {
                klo |= krt_gp_ld16(p + BS * k + QH) << (16 * k);
                khi |= krt_gp_ld16(p + BS * k + QH + 2) << (16 * k);
            }
        }
        const __m512i c16 = _mm512_set1_epi8(16);
        lo = _mm512_mask_add_epi8(lo, (__mmask64)klo, lo, c16);
        hi = _mm512_mask_add_epi8(hi, (__mmask64)khi, hi, c16);
    }
    return _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(st->cr, lo, st->xl), hi, st->xh);
}

/* The 4 rows' scales of the step as fp16 words 4k + i (row i, block b+k); Q5_1: m in words 16..31. */
KRT_TARGET_AVX512 KRT_INLINE __m512i krt_gp_scales_avx512(const __m512i ra[4], const __m512i rb[4],
                                                         const krt_gp_consts *c) {
    __m512i d01 = _mm512_permutex2var_epi16(ra[0], c->ip01, ra[1]);
    __m512i d23 = _mm512_permutex2var_epi16(ra[2], c->ip23, ra[3]);
    if (c->inb01) {
        d01 = _mm512_mask_blend_epi16(c->inb01, d01, _mm512_permutex2var_epi16(rb[0], c->ip01, rb[1]));
        d23 = _mm512_mask_blend_epi16(c->inb23, d23, _mm512_permutex2var_epi16(rb[2], c->ip23, rb[3]));
    }
    return _mm512_mask_blend_epi16((__mmask32)0xccccccccu, d01, d23);
}

/* y[r] (+ bias) for rows r0..r1 of a Q4_0 / Q5_0 / Q5_1 matrix (w: rows of cols/32 blocks). */
KRT_TARGET_AVX512 KRT_INLINE void krt_gp_gemv_avx512(float *y, const uint8_t *w, const krt_block_q8_0 *x,
                                                    const float *bias, int64_t cols, int64_t r0, int64_t r1,
                                                    const int T) {
    const int BS = KRT_GP_BS(T);
    const int64_t nb = cols / KRT_QK, rs = nb * BS;
    const int64_t pend = r1 * rs;
    const __m512i ones = _mm512_set1_epi16(1);
    krt_gp_xstep xs[KRT_GP_STEPS];
    krt_gp_consts cst;
    krt_gp_consts_avx512(&cst, T);
    for (int64_t c0 = 0; c0 < nb; c0 += 4 * KRT_GP_STEPS) {
        const int64_t cn = nb - c0 < 4 * KRT_GP_STEPS ? nb - c0 : 4 * KRT_GP_STEPS;
        const int64_t nfull = cn / 4, nrem = cn % 4;
        for (int64_t s = 0; s < (cn + 3) / 4; s++)
            krt_gp_prep_avx512(&xs[s], x + c0 + 4 * s, (int)(cn - 4 * s < 4 ? cn - 4 * s : 4), T);
        const int last = c0 + cn == nb;
        for (int64_t r = r0; r < r1; r += 4) {
            const uint8_t *p[4];
            for (int i = 0; i < 4; i++) p[i] = w + (r + i < r1 ? r + i : r1 - 1) * rs + c0 * BS;
            const int64_t pf = (r + 4) * rs + c0 * BS + KRT_GP_PF_LEAD; /* the next group, linearly */
            __m512 acc = _mm512_setzero_ps();
            for (int64_t s = 0; s < nfull + (nrem ? 1 : 0); s++) {
                const int n = s < nfull ? 4 : (int)nrem;
                const int64_t o = 4 * BS * s;
                const int64_t q = pf + 4 * o; /* 4 rows x 4*BS bytes per step */
                if (q < pend) {
                    for (int l = 0; l < 4 * BS * 4; l += 64) _mm_prefetch((const char *)w + q + l, KRT_GP_PF_HINT);
                }
                __m512i ra[4], rb[4], is[4];
                for (int i = 0; i < 4; i++) is[i] = krt_gp_row_avx512(p[i] + o, &xs[s], &cst, n, &ra[i], &rb[i], T);
                __m512 sum;
                if (T == KRT_GP_IQ4_NL) { /* lanes up to 8 * 127 * 127: fold in int32, same lane order */
                    __m512i t01 = _mm512_add_epi32(_mm512_unpacklo_epi32(is[0], is[1]), _mm512_unpackhi_epi32(is[0], is[1]));
                    __m512i t23 = _mm512_add_epi32(_mm512_unpacklo_epi32(is[2], is[3]), _mm512_unpackhi_epi32(is[2], is[3]));
                    sum = _mm512_cvtepi32_ps(_mm512_add_epi32(_mm512_unpacklo_epi64(t01, t23), _mm512_unpackhi_epi64(t01, t23)));
                } else {
                    __m512i m01 = _mm512_madd_epi16(_mm512_packs_epi32(is[0], is[1]), ones);
                    __m512i m23 = _mm512_madd_epi16(_mm512_packs_epi32(is[2], is[3]), ones);
                    sum = _mm512_cvtepi32_ps(_mm512_madd_epi16(_mm512_packs_epi32(m01, m23), ones));
                }
                const __m512i sc = krt_gp_scales_avx512(ra, rb, &cst);
                __m512 dw = _mm512_cvtph_ps(_mm512_castsi512_si256(sc));
                __m512 sd = _mm512_mul_ps(dw, xs[s].dx);
                sd = krt_scale_poison_avx512(sd); /* krt_kdot.h: a non-finite scale product -> NaN */
                acc = _mm512_fmadd_ps(sum, sd, acc);
                if (T == KRT_GP_Q5_1) { /* + (16 d + m) * d_x * sum(x); NaN if m is not finite */
                    __m512 mw = _mm512_cvtph_ps(_mm512_extracti64x4_epi64(sc, 1));
                    __m512 dm = krt_scale_poison_avx512(_mm512_fmadd_ps(dw, _mm512_set1_ps(16.0f), mw));
                    acc = _mm512_fmadd_ps(dm, xs[s].xs, acc);
                }
            }
            /* row i = lanes i, 4+i, 8+i, 12+i */
            __m256 a8 = _mm256_add_ps(_mm512_castps512_ps256(acc), _mm512_extractf32x8_ps(acc, 1));
            __m128 a4 = _mm_add_ps(_mm256_castps256_ps128(a8), _mm256_extractf128_ps(a8, 1));
            const __mmask8 m = r + 4 <= r1 ? (__mmask8)0x0f : (__mmask8)((1u << (r1 - r)) - 1u);
            if (c0 > 0) a4 = _mm_add_ps(_mm_maskz_loadu_ps(m, y + r), a4);
            if (last && bias) a4 = _mm_add_ps(a4, _mm_maskz_loadu_ps(m, bias + r));
            _mm_mask_storeu_ps(y + r, m, a4);
        }
    }
}

/* ---------------------------------------------------------------------------------------- */
/* AVX2 (+FMA, F16C): 4 rows per step share one activation block. Per row and block: 32 quants  */
/* as bytes (nibbles, + 16 where the Q5 high bit is set: vpshufb + vpcmpeqb of the broadcast qh), */
/* vpmaddubsw with the block's activations (pairs, no saturation: q <= 31, |x| <= 127), minus   */
/* the offset's pair sums (Q4_0: 8, Q5_0 / Q5_1: 16 times the activation pairs, once per block), */
/* vpmaddwd by 1 -> 8 int32 lanes; a vphaddd tree folds the 4 rows into [r0..r3 | r0..r3], one    */
/* cvt and one FMA with [s0..s3 | s0..s3] (s = d_w * d_x, 4 fp16 d_w in one GPR, one vcvtph2ps). */
/* Q5_1 adds (16 d_w + m_w) * d_x * sum(x) per row. The next 4 rows are prefetched linearly.    */
/* ---------------------------------------------------------------------------------------- */

/* Row i's block as 32 quant bytes; qh4 holds the 4 rows' qh dwords (Q5: one vpshufb spreads row i's). */
KRT_TARGET_AVX2 KRT_INLINE __m256i krt_gp_q_avx2(const uint8_t *blk, __m256i qh4, int i, const int T) {
    const int QS = KRT_GP_QS(T);
    /* [qs | qs] & [0x0f.. | 0xf0..], then the high lane's dwords >> 4: each high nibble drops into
     * its own byte's low nibble (no bits cross bytes), so q = [low nibbles | high nibbles] */
    __m256i v = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(blk + QS)));
    __m256i q = _mm256_srlv_epi32(_mm256_and_si256(v, _mm256_setr_epi64x(0x0f0f0f0f0f0f0f0fll, 0x0f0f0f0f0f0f0f0fll,
                                                                         (long long)0xf0f0f0f0f0f0f0f0ull,
                                                                         (long long)0xf0f0f0f0f0f0f0f0ull)),
                                  _mm256_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4));
    if (T == KRT_GP_IQ4_NL) return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(krt_iq4nl_s8()), q); /* signed values */
    if (!KRT_GP_NIB4(T)) {
        /* byte j of the result <- byte j/8 of row i's qh, then test bit j%8 */
        const __m256i shuf = _mm256_add_epi8(_mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2,
                                                              2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3),
                                             _mm256_set1_epi8((char)(4 * i)));
        const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
        __m256i hb = _mm256_and_si256(_mm256_shuffle_epi8(qh4, shuf), bits);
        q = _mm256_or_si256(q, _mm256_and_si256(_mm256_cmpeq_epi8(hb, bits), _mm256_set1_epi8(0x10)));
    }
    return q;
}

KRT_TARGET_AVX2 KRT_INLINE void krt_gp_gemv_avx2(float *y, const uint8_t *w, const krt_block_q8_0 *x,
                                                 const float *bias, int64_t cols, int64_t r0, int64_t r1, const int T) {
    const int BS = KRT_GP_BS(T);
    const int64_t nb = cols / KRT_QK, rs = nb * BS, pend = r1 * rs;
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i off = _mm256_set1_epi8(T == KRT_GP_Q4_0 ? 8 : 16); /* IQ4_NL: unused */
    for (int64_t r = r0; r < r1; r += 4) {
        const uint8_t *p[4];
        for (int i = 0; i < 4; i++) p[i] = w + (r + i < r1 ? r + i : r1 - 1) * rs;
        const int64_t pf = (r + 4) * rs + KRT_GP_PF_LEAD_AVX2;
        __m256 acc = _mm256_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const int64_t o = b * BS, q = pf + 4 * o;
            if (q < pend) {
                _mm_prefetch((const char *)w + q, _MM_HINT_T0);
                _mm_prefetch((const char *)w + q + 64, _MM_HINT_T0);
            }
            const __m256i xv = _mm256_loadu_si256((const __m256i *)x[b].qs);
            const __m256i xo = _mm256_maddubs_epi16(off, xv); /* offset * (x_2i + x_2i+1) */
            __m256i qh4 = _mm256_setzero_si256();
            if (!KRT_GP_NIB4(T)) { /* the 4 rows' qh dwords in both 128-bit lanes */
                const int QH = KRT_GP_QH(T);
                uint32_t h[4];
                for (int i = 0; i < 4; i++) memcpy(&h[i], p[i] + o + QH, 4);
                qh4 = _mm256_broadcastsi128_si256(_mm_setr_epi32((int)h[0], (int)h[1], (int)h[2], (int)h[3]));
            }
            __m256i is[4], h;
            if (T == KRT_GP_IQ4_NL) {
                /* signed x signed: |w| x sign(x, w) with vpmaddubsw (pairs <= 2 * 127 * 127, no
                 * saturation), as Q8_0; lanes of 4 products exceed int16, so a vphaddd tree folds them */
                for (int i = 0; i < 4; i++) {
                    const __m256i wq = krt_gp_q_avx2(p[i] + o, qh4, i, T);
                    is[i] = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_sign_epi8(wq, wq), _mm256_sign_epi8(xv, wq)), ones);
                }
                h = _mm256_hadd_epi32(_mm256_hadd_epi32(is[0], is[1]), _mm256_hadd_epi32(is[2], is[3]));
            } else {
                for (int i = 0; i < 4; i++)
                    is[i] = _mm256_madd_epi16(_mm256_sub_epi16(_mm256_maddubs_epi16(krt_gp_q_avx2(p[i] + o, qh4, i, T), xv), xo),
                                              ones);
                /* fold: lane sums fit int16 (|8 products| <= 8128), so vpackssdw + vpmaddwd(1) twice gives
                 * [r0 r1 r2 r3 | r0 r1 r2 r3] (each half: that half's 16 quants) */
                __m256i m01 = _mm256_madd_epi16(_mm256_packs_epi32(is[0], is[1]), ones);
                __m256i m23 = _mm256_madd_epi16(_mm256_packs_epi32(is[2], is[3]), ones);
                h = _mm256_madd_epi16(_mm256_packs_epi32(m01, m23), ones);
            }
            uint64_t dw = krt_gp_ld16(p[0] + o) | krt_gp_ld16(p[1] + o) << 16 | krt_gp_ld16(p[2] + o) << 32 |
                          krt_gp_ld16(p[3] + o) << 48;
            const __m256 dx = _mm256_cvtph_ps(_mm_set1_epi16((short)x[b].d));
            const __m256 dwv = _mm256_cvtph_ps(_mm_set1_epi64x((long long)dw));
            __m256 sd = _mm256_mul_ps(dwv, dx);
            sd = krt_scale_poison_avx2(sd); /* krt_kdot.h: a non-finite scale product -> NaN */
            acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(h), sd, acc);
            if (T == KRT_GP_Q5_1) { /* + (16 d + m) * d_x * sum(x), half in each 128-bit lane */
                uint64_t mw = krt_gp_ld16(p[0] + o + 2) | krt_gp_ld16(p[1] + o + 2) << 16 |
                              krt_gp_ld16(p[2] + o + 2) << 32 | krt_gp_ld16(p[3] + o + 2) << 48;
                const __m256i sx = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(1), xv), ones);
                __m256 xs = _mm256_mul_ps(dx, _mm256_cvtepi32_ps(_mm256_hadd_epi32(_mm256_hadd_epi32(sx, sx), _mm256_hadd_epi32(sx, sx))));
                /* xs: every lane of a 128-bit half holds the half's sum; the two halves add up */
                __m256 t = krt_scale_poison_avx2(
                    _mm256_fmadd_ps(dwv, _mm256_set1_ps(16.0f), _mm256_cvtph_ps(_mm_set1_epi64x((long long)mw))));
                acc = _mm256_fmadd_ps(t, xs, acc);
            }
        }
        __m128 s4 = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
        float o4[4];
        _mm_storeu_ps(o4, s4);
        for (int i = 0; i < 4 && r + i < r1; i++) y[r + i] = bias ? o4[i] + bias[r + i] : o4[i];
    }
}

#endif /* KRT_X86 */
#endif /* KRT_GVPACK_H */
