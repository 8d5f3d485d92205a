/* csrc/attention.c - grouped-query causal attention over an F32 KV cache (slice: query heads h0..h1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline, exp is krt_expf,
 * 1/sqrt(head_dim) is computed inline by Newton's method - no sqrt call) so that c2goasm can
 * translate the object code. Three variants: _ref (scalar), _avx2 (KRT_TARGET_AVX2),
 * _avx512 (KRT_TARGET_AVX512). A call writes only out rows (t, h) for h in [h0, h1), every t,
 * and scratch[0 .. pos0+T); it reads cache rows 0 .. pos0+T-1 only.
 *
 * For query head h, token t (position p = pos0 + t), kv head g = h / (n_heads / n_kv_heads):
 *   s[j]  = dot(q[t,h], K[g][j]) * (1/sqrt(head_dim))     j = 0..p (causal, inclusive)
 *   w[j]  = exp(s[j] - max s) / sum_j exp(s[j] - max s)
 *   out[t,h] = sum_j w[j] * V[g][j]
 * which is llama.cpp's qwen2 graph (kq, soft_max_ext with scale and causal mask, kqv) up to
 * summation order: the exponentials are summed, V is accumulated with the unnormalised
 * weights and the result is multiplied by 1/sum once.
 *
 * The SIMD variants are tuned for decode (T = 1, thousands of positions, head_dim 64): the
 * query heads sharing a KV head walk the cache together block by block (see below), scores for
 * 16 (AVX-512) or 8 (AVX2) keys are computed at once and reduced with a transpose tree instead
 * of one horizontal sum per key, and V is accumulated in registers (4 zmm x 2 for head_dim 64).
 * Other head sizes take a generic masked path.
 */
#include "krt_common.h"

#define KRT_ATTN_NEG_BIG (-3.40282346638528859812e+38f)

/* 1/sqrt(n) for n >= 1: bit-trick start, then Newton steps in double (quadratic convergence,
 * 6 steps reach double precision from the ~3.5% start), rounded once to float. */
KRT_INLINE float krt_attn_inv_sqrt(int64_t n) {
    double x = (double)n;
    uint64_t bits;
    memcpy(&bits, &x, 8);
    bits = 0x5fe6eb50c7b537a9ull - (bits >> 1);
    double y;
    memcpy(&y, &bits, 8);
    for (int k = 0; k < 6; k++) y = y * (1.5 - 0.5 * x * y * y);
    return (float)y;
}

void krt_attention_ref(float *out, const float *q, const float *kcache, const float *vcache,
                       float *scratch, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                       int64_t max_ctx, int64_t q_stride, int64_t pos0, int64_t T, int64_t h0, int64_t h1) {
    const int64_t group = n_heads / n_kv_heads;
    const float scale = krt_attn_inv_sqrt(head_dim);
    for (int64_t h = h0; h < h1; h++) {
        const int64_t g = h / group;
        const float *K = kcache + g * max_ctx * head_dim;
        const float *V = vcache + g * max_ctx * head_dim;
        for (int64_t t = 0; t < T; t++) {
            const float *qv = q + t * q_stride + h * head_dim;
            float *o = out + (t * n_heads + h) * head_dim;
            const int64_t n = pos0 + t + 1;
            float mx = KRT_ATTN_NEG_BIG;
            for (int64_t j = 0; j < n; j++) {
                const float *k = K + j * head_dim;
                float s = 0.0f;
                for (int64_t d = 0; d < head_dim; d++) s += qv[d] * k[d];
                s *= scale;
                scratch[j] = s;
                if (s > mx) mx = s;
            }
            float sum = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                float e = krt_expf(scratch[j] - mx);
                scratch[j] = e;
                sum += e;
            }
            const float inv = 1.0f / sum;
            for (int64_t d = 0; d < head_dim; d++) o[d] = scratch[0] * V[d]; /* n >= 1; no memset */
            for (int64_t j = 1; j < n; j++) {
                const float w = scratch[j];
                const float *v = V + j * head_dim;
                for (int64_t d = 0; d < head_dim; d++) o[d] += w * v[d];
            }
            for (int64_t d = 0; d < head_dim; d++) o[d] *= inv;
        }
    }
}

#ifdef KRT_X86

/* The SIMD variants walk the cache in blocks of KRT_ATTN_BLOCK positions and, inside a block,
 * over every query head of the slice that shares the block's KV head (at most KRT_ATTN_MAXG at a
 * time): a block of K and V (64 positions x 64 floats x 2 = 32 KiB) is read from memory once and
 * from L1 by the group's other heads, instead of once per query head (Qwen2-0.5B: 7 heads per
 * KV head). The softmax is the streaming ("online") form: per head a running max m, a running
 * sum l and the unnormalised output (kept in the head's out row) are rescaled by exp(m_old -
 * m_new) when a block raises the max; scratch[j0 .. j0+block) holds one head's block of scores
 * at a time. Algebraically this is the two-pass softmax of _ref. */
#define KRT_ATTN_BLOCK 64
#define KRT_ATTN_MAXG 16

/* ------------------------------------------------------------------ AVX2 (8 lanes) */

KRT_TARGET_AVX2 KRT_INLINE __m256i krt_attn_tailmask_avx2(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

KRT_TARGET_AVX2 KRT_INLINE float krt_attn_hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KRT_TARGET_AVX2 KRT_INLINE float krt_attn_hmax_avx2(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lane i of the result = sum of the lanes of v[i]. */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_attn_hsum8_avx2(const __m256 *v) {
    __m256 s0123 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    __m256 s4567 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    return _mm256_add_ps(_mm256_permute2f128_ps(s0123, s4567, 0x20), _mm256_permute2f128_ps(s0123, s4567, 0x31));
}

/* Lane-wise partial products of dot(q, k) over hd floats (sum the lanes for the dot). */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_attn_dotv_avx2(const float *q, const float *k, int64_t hd) {
    __m256 acc = _mm256_setzero_ps();
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) acc = _mm256_fmadd_ps(_mm256_loadu_ps(q + d), _mm256_loadu_ps(k + d), acc);
    if (d < hd) {
        __m256i m = krt_attn_tailmask_avx2(hd - d);
        acc = _mm256_fmadd_ps(_mm256_maskload_ps(q + d, m), _mm256_maskload_ps(k + d, m), acc);
    }
    return acc;
}

KRT_TARGET_AVX2 KRT_INLINE __m256 krt_attn_dot64_avx2(const float *q, const float *k) {
    __m256 a = _mm256_mul_ps(_mm256_loadu_ps(q), _mm256_loadu_ps(k));
    __m256 b = _mm256_mul_ps(_mm256_loadu_ps(q + 8), _mm256_loadu_ps(k + 8));
    a = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16), _mm256_loadu_ps(k + 16), a);
    b = _mm256_fmadd_ps(_mm256_loadu_ps(q + 24), _mm256_loadu_ps(k + 24), b);
    a = _mm256_fmadd_ps(_mm256_loadu_ps(q + 32), _mm256_loadu_ps(k + 32), a);
    b = _mm256_fmadd_ps(_mm256_loadu_ps(q + 40), _mm256_loadu_ps(k + 40), b);
    a = _mm256_fmadd_ps(_mm256_loadu_ps(q + 48), _mm256_loadu_ps(k + 48), a);
    b = _mm256_fmadd_ps(_mm256_loadu_ps(q + 56), _mm256_loadu_ps(k + 56), b);
    return _mm256_add_ps(a, b);
}

/* s[j] = dot(q, K[j]) * scale for j in [0, jb); returns max_j s[j]. */
KRT_TARGET_AVX2 KRT_INLINE float krt_attn_scores_avx2(float *s, const float *qv, const float *K, int64_t jb,
                                                      int64_t hd, float scale) {
    const __m256 vscale = _mm256_set1_ps(scale);
    __m256 vmax = _mm256_set1_ps(KRT_ATTN_NEG_BIG);
    int64_t j = 0;
    if (hd == 64) {
        for (; j + 8 <= jb; j += 8) {
            __m256 acc[8];
            for (int u = 0; u < 8; u++) acc[u] = krt_attn_dot64_avx2(qv, K + (j + u) * 64);
            __m256 v = _mm256_mul_ps(krt_attn_hsum8_avx2(acc), vscale);
            _mm256_storeu_ps(s + j, v);
            vmax = _mm256_max_ps(vmax, v);
        }
    } else {
        for (; j + 8 <= jb; j += 8) {
            __m256 acc[8];
            for (int u = 0; u < 8; u++) acc[u] = krt_attn_dotv_avx2(qv, K + (j + u) * hd, hd);
            __m256 v = _mm256_mul_ps(krt_attn_hsum8_avx2(acc), vscale);
            _mm256_storeu_ps(s + j, v);
            vmax = _mm256_max_ps(vmax, v);
        }
    }
    float mx = krt_attn_hmax_avx2(vmax);
    for (; j < jb; j++) {
        float v = krt_attn_hsum_avx2(krt_attn_dotv_avx2(qv, K + j * hd, hd)) * scale;
        s[j] = v;
        if (v > mx) mx = v;
    }
    return mx;
}

/* s[j] = exp(s[j] - m) for j in [0, jb); returns the sum. */
KRT_TARGET_AVX2 KRT_INLINE float krt_attn_exp_avx2(float *s, int64_t jb, float m) {
    const __m256 vm = _mm256_set1_ps(m);
    __m256 vsum = _mm256_setzero_ps();
    int64_t j = 0;
    for (; j + 8 <= jb; j += 8) {
        __m256 e = krt_expf_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + j), vm));
        _mm256_storeu_ps(s + j, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    if (j < jb) {
        __m256i msk = krt_attn_tailmask_avx2(jb - j);
        __m256 e = krt_expf_avx2(_mm256_sub_ps(_mm256_maskload_ps(s + j, msk), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(msk));
        _mm256_maskstore_ps(s + j, msk, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    return krt_attn_hsum_avx2(vsum);
}

/* o = (first ? 0 : o*corr) + sum_{j<jb} w[j] * V[j]. */
KRT_TARGET_AVX2 KRT_INLINE void krt_attn_accum_avx2(float *o, const float *w, const float *V, int64_t jb, int64_t hd,
                                                    float corr, int first) {
    const __m256 vc = _mm256_set1_ps(corr);
    if (hd == 64) {
        __m256 o0, o1, o2, o3, o4, o5, o6, o7;
        if (first) {
            o0 = o1 = o2 = o3 = o4 = o5 = o6 = o7 = _mm256_setzero_ps();
        } else {
            o0 = _mm256_mul_ps(_mm256_loadu_ps(o), vc);
            o1 = _mm256_mul_ps(_mm256_loadu_ps(o + 8), vc);
            o2 = _mm256_mul_ps(_mm256_loadu_ps(o + 16), vc);
            o3 = _mm256_mul_ps(_mm256_loadu_ps(o + 24), vc);
            o4 = _mm256_mul_ps(_mm256_loadu_ps(o + 32), vc);
            o5 = _mm256_mul_ps(_mm256_loadu_ps(o + 40), vc);
            o6 = _mm256_mul_ps(_mm256_loadu_ps(o + 48), vc);
            o7 = _mm256_mul_ps(_mm256_loadu_ps(o + 56), vc);
        }
        for (int64_t j = 0; j < jb; j++) {
            const __m256 wj = _mm256_broadcast_ss(w + j);
            const float *v = V + j * 64;
            o0 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v), o0);
            o1 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 8), o1);
            o2 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 16), o2);
            o3 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 24), o3);
            o4 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 32), o4);
            o5 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 40), o5);
            o6 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 48), o6);
            o7 = _mm256_fmadd_ps(wj, _mm256_loadu_ps(v + 56), o7);
        }
        _mm256_storeu_ps(o, o0);
        _mm256_storeu_ps(o + 8, o1);
        _mm256_storeu_ps(o + 16, o2);
        _mm256_storeu_ps(o + 24, o3);
        _mm256_storeu_ps(o + 32, o4);
        _mm256_storeu_ps(o + 40, o5);
        _mm256_storeu_ps(o + 48, o6);
        _mm256_storeu_ps(o + 56, o7);
        return;
    }
    for (int64_t d = 0; d < hd; d += 8) {
        __m256i m = krt_attn_tailmask_avx2(hd - d < 8 ? hd - d : 8);
        __m256 a = first ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_maskload_ps(o + d, m), vc);
        __m256 b = _mm256_setzero_ps();
        int64_t j = 0;
        for (; j + 2 <= jb; j += 2) {
            a = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j), _mm256_maskload_ps(V + j * hd + d, m), a);
            b = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j + 1), _mm256_maskload_ps(V + (j + 1) * hd + d, m), b);
        }
        if (j < jb) a = _mm256_fmadd_ps(_mm256_broadcast_ss(w + j), _mm256_maskload_ps(V + j * hd + d, m), a);
        _mm256_maskstore_ps(o + d, m, _mm256_add_ps(a, b));
    }
}

/* o *= f over hd floats. */
KRT_TARGET_AVX2 KRT_INLINE void krt_attn_scale_avx2(float *o, int64_t hd, float f) {
    const __m256 vf = _mm256_set1_ps(f);
    int64_t d = 0;
    for (; d + 8 <= hd; d += 8) _mm256_storeu_ps(o + d, _mm256_mul_ps(_mm256_loadu_ps(o + d), vf));
    if (d < hd) {
        __m256i m = krt_attn_tailmask_avx2(hd - d);
        _mm256_maskstore_ps(o + d, m, _mm256_mul_ps(_mm256_maskload_ps(o + d, m), vf));
    }
}

KRT_TARGET_AVX2 void krt_attention_avx2(float *out, const float *q, const float *kcache, const float *vcache,
                                        float *scratch, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                        int64_t max_ctx, int64_t q_stride, int64_t pos0, int64_t T, int64_t h0, int64_t h1) {
    const int64_t group = n_heads / n_kv_heads;
    const float scale = krt_attn_inv_sqrt(head_dim);
    float mh[KRT_ATTN_MAXG], lh[KRT_ATTN_MAXG];
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = pos0 + t + 1;
        for (int64_t ha = h0; ha < h1;) {
            const int64_t g = ha / group;
            int64_t hb = (g + 1) * group;
            if (hb > h1) hb = h1;
            if (hb > ha + KRT_ATTN_MAXG) hb = ha + KRT_ATTN_MAXG;
            const float *K = kcache + g * max_ctx * head_dim;
            const float *V = vcache + g * max_ctx * head_dim;
            for (int64_t j0 = 0; j0 < n; j0 += KRT_ATTN_BLOCK) {
                const int64_t jb = n - j0 < KRT_ATTN_BLOCK ? n - j0 : KRT_ATTN_BLOCK;
                const int first = j0 == 0;
                for (int64_t h = ha; h < hb; h++) {
                    float *s = scratch + j0;
                    float bm = krt_attn_scores_avx2(s, q + t * q_stride + h * head_dim, K + j0 * head_dim, jb, head_dim, scale);
                    float m = bm, corr = 0.0f;
                    if (!first) {
                        m = mh[h - ha] > bm ? mh[h - ha] : bm;
                        corr = krt_expf(mh[h - ha] - m);
                    }
                    float bl = krt_attn_exp_avx2(s, jb, m);
                    lh[h - ha] = first ? bl : lh[h - ha] * corr + bl;
                    mh[h - ha] = m;
                    krt_attn_accum_avx2(out + (t * n_heads + h) * head_dim, s, V + j0 * head_dim, jb, head_dim, corr, first);
                }
            }
            for (int64_t h = ha; h < hb; h++) krt_attn_scale_avx2(out + (t * n_heads + h) * head_dim, head_dim, 1.0f / lh[h - ha]);
            ha = hb;
        }
    }
}

/* ------------------------------------------------------------------ AVX-512 (16 lanes) */

KRT_TARGET_AVX512 KRT_INLINE __mmask16 krt_attn_mask16(int64_t k) {
    return (__mmask16)(k >= 16 ? 0xffffu : (1u << k) - 1u);
}

/* Lane i of the result = sum of the lanes of v[i]: a transpose tree, 15 adds for 16 sums. */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_attn_hsum16_avx512(const __m512 *v) {
    __m512 a[8], b[4], c[2];
    for (int i = 0; i < 8; i++)
        a[i] = _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
    for (int i = 0; i < 4; i++)
        b[i] = _mm512_add_ps(_mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                             _mm512_shuffle_ps(a[2 * i], a[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
    for (int i = 0; i < 2; i++)
        c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(2, 0, 2, 0)),
                             _mm512_shuffle_f32x4(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(2, 0, 2, 0)),
                         _mm512_shuffle_f32x4(c[0], c[1], _MM_SHUFFLE(3, 1, 3, 1)));
}

KRT_TARGET_AVX512 KRT_INLINE __m512 krt_attn_dotv_avx512(const float *q, const float *k, int64_t hd) {
    __m512 acc = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d += 16) {
        __mmask16 m = krt_attn_mask16(hd - d);
        acc = _mm512_fmadd_ps(_mm512_maskz_loadu_ps(m, q + d), _mm512_maskz_loadu_ps(m, k + d), acc);
    }
    return acc;
}

/* s[j] = dot(q, K[j]) * scale for j in [0, jb); returns max_j s[j]. */
KRT_TARGET_AVX512 KRT_INLINE float krt_attn_scores_avx512(float *s, const float *qv, const float *K, int64_t jb,
                                                          int64_t hd, float scale) {
    const __m512 vscale = _mm512_set1_ps(scale);
    __m512 vmax = _mm512_set1_ps(KRT_ATTN_NEG_BIG);
    int64_t j = 0;
    if (hd == 64) {
        const __m512 q0 = _mm512_loadu_ps(qv), q1 = _mm512_loadu_ps(qv + 16);
        const __m512 q2 = _mm512_loadu_ps(qv + 32), q3 = _mm512_loadu_ps(qv + 48);
        for (; j + 16 <= jb; j += 16) {
            __m512 acc[16];
            for (int u = 0; u < 16; u++) {
                const float *k = K + (j + u) * 64;
                __m512 a = _mm512_mul_ps(q0, _mm512_loadu_ps(k));
                __m512 b = _mm512_mul_ps(q1, _mm512_loadu_ps(k + 16));
                a = _mm512_fmadd_ps(q2, _mm512_loadu_ps(k + 32), a);
                b = _mm512_fmadd_ps(q3, _mm512_loadu_ps(k + 48), b);
                acc[u] = _mm512_add_ps(a, b);
            }
            __m512 v = _mm512_mul_ps(krt_attn_hsum16_avx512(acc), vscale);
            _mm512_storeu_ps(s + j, v);
            vmax = _mm512_max_ps(vmax, v);
        }
        for (; j < jb; j++) {
            const float *k = K + j * 64;
            __m512 a = _mm512_mul_ps(q0, _mm512_loadu_ps(k));
            __m512 b = _mm512_mul_ps(q1, _mm512_loadu_ps(k + 16));
            a = _mm512_fmadd_ps(q2, _mm512_loadu_ps(k + 32), a);
            b = _mm512_fmadd_ps(q3, _mm512_loadu_ps(k + 48), b);
            float v = _mm512_reduce_add_ps(_mm512_add_ps(a, b)) * scale;
            s[j] = v;
            vmax = _mm512_max_ps(vmax, _mm512_set1_ps(v));
        }
    } else {
        for (; j + 16 <= jb; j += 16) {
            __m512 acc[16];
            for (int u = 0; u < 16; u++) acc[u] = krt_attn_dotv_avx512(qv, K + (j + u) * hd, hd);
            __m512 v = _mm512_mul_ps(krt_attn_hsum16_avx512(acc), vscale);
            _mm512_storeu_ps(s + j, v);
            vmax = _mm512_max_ps(vmax, v);
        }
        for (; j < jb; j++) {
            float v = _mm512_reduce_add_ps(krt_attn_dotv_avx512(qv, K + j * hd, hd)) * scale;
            s[j] = v;
            vmax = _mm512_max_ps(vmax, _mm512_set1_ps(v));
        }
    }
    return _mm512_reduce_max_ps(vmax);
}

/* s[j] = exp(s[j] - m) for j in [0, jb); returns the sum. */
KRT_TARGET_AVX512 KRT_INLINE float krt_attn_exp_avx512(float *s, int64_t jb, float m) {
    const __m512 vm = _mm512_set1_ps(m);
    __m512 vsum = _mm512_setzero_ps();
    for (int64_t j = 0; j < jb; j += 16) {
        __mmask16 msk = krt_attn_mask16(jb - j);
        __m512 e = krt_expf_avx512(_mm512_sub_ps(_mm512_maskz_loadu_ps(msk, s + j), vm));
        _mm512_mask_storeu_ps(s + j, msk, e);
        vsum = _mm512_mask_add_ps(vsum, msk, vsum, e);
    }
    return _mm512_reduce_add_ps(vsum);
}

/* o = (first ? 0 : o*corr) + sum_{j<jb} w[j] * V[j]; two accumulator sets hide FMA latency. */
KRT_TARGET_AVX512 KRT_INLINE void krt_attn_accum_avx512(float *o, const float *w, const float *V, int64_t jb,
                                                        int64_t hd, float corr, int first) {
    const __m512 vc = _mm512_set1_ps(corr);
    if (hd == 64) {
        __m512 a0, a1, a2, a3;
        __m512 b0 = _mm512_setzero_ps(), b1 = _mm512_setzero_ps(), b2 = _mm512_setzero_ps(), b3 = _mm512_setzero_ps();
        if (first) {
            a0 = a1 = a2 = a3 = _mm512_setzero_ps();
        } else {
            a0 = _mm512_mul_ps(_mm512_loadu_ps(o), vc);
            a1 = _mm512_mul_ps(_mm512_loadu_ps(o + 16), vc);
            a2 = _mm512_mul_ps(_mm512_loadu_ps(o + 32), vc);
            a3 = _mm512_mul_ps(_mm512_loadu_ps(o + 48), vc);
        }
        int64_t j = 0;
        for (; j + 2 <= jb; j += 2) {
            const __m512 wa = _mm512_set1_ps(w[j]), wb = _mm512_set1_ps(w[j + 1]);
            const float *v = V + j * 64;
            a0 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v + 48), a3);
            b0 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(v + 64), b0);
            b1 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(v + 80), b1);
            b2 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(v + 96), b2);
            b3 = _mm512_fmadd_ps(wb, _mm512_loadu_ps(v + 112), b3);
        }
        if (j < jb) {
            const __m512 wa = _mm512_set1_ps(w[j]);
            const float *v = V + j * 64;
            a0 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v), a0);
            a1 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v + 16), a1);
            a2 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v + 32), a2);
            a3 = _mm512_fmadd_ps(wa, _mm512_loadu_ps(v + 48), a3);
        }
        _mm512_storeu_ps(o, _mm512_add_ps(a0, b0));
        _mm512_storeu_ps(o + 16, _mm512_add_ps(a1, b1));
        _mm512_storeu_ps(o + 32, _mm512_add_ps(a2, b2));
        _mm512_storeu_ps(o + 48, _mm512_add_ps(a3, b3));
        return;
    }
    for (int64_t d = 0; d < hd; d += 16) {
        __mmask16 m = krt_attn_mask16(hd - d);
        __m512 a = first ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + d), vc);
        __m512 b = _mm512_setzero_ps();
        int64_t j = 0;
        for (; j + 2 <= jb; j += 2) {
            a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_maskz_loadu_ps(m, V + j * hd + d), a);
            b = _mm512_fmadd_ps(_mm512_set1_ps(w[j + 1]), _mm512_maskz_loadu_ps(m, V + (j + 1) * hd + d), b);
        }
        if (j < jb) a = _mm512_fmadd_ps(_mm512_set1_ps(w[j]), _mm512_maskz_loadu_ps(m, V + j * hd + d), a);
        _mm512_mask_storeu_ps(o + d, m, _mm512_add_ps(a, b));
    }
}

/* o *= f over hd floats. */
KRT_TARGET_AVX512 KRT_INLINE void krt_attn_scale_avx512(float *o, int64_t hd, float f) {
    const __m512 vf = _mm512_set1_ps(f);
    for (int64_t d = 0; d < hd; d += 16) {
        __mmask16 m = krt_attn_mask16(hd - d);
        _mm512_mask_storeu_ps(o + d, m, _mm512_mul_ps(_mm512_maskz_loadu_ps(m, o + d), vf));
    }
}

KRT_TARGET_AVX512 void krt_attention_avx512(float *out, const float *q, const float *kcache, const float *vcache,
                                            float *scratch, int64_t n_heads, int64_t n_kv_heads, int64_t head_dim,
                                            int64_t max_ctx, int64_t q_stride, int64_t pos0, int64_t T, int64_t h0, int64_t h1) {
    const int64_t group = n_heads / n_kv_heads;
    const float scale = krt_attn_inv_sqrt(head_dim);
    float mh[KRT_ATTN_MAXG], lh[KRT_ATTN_MAXG];
    for (int64_t t = 0; t < T; t++) {
        const int64_t n = pos0 + t + 1;
        for (int64_t ha = h0; ha < h1;) {
            const int64_t g = ha / group;
            int64_t hb = (g + 1) * group;
            if (hb > h1) hb = h1;
            if (hb > ha + KRT_ATTN_MAXG) hb = ha + KRT_ATTN_MAXG;
            const float *K = kcache + g * max_ctx * head_dim;
            const float *V = vcache + g * max_ctx * head_dim;
            for (int64_t j0 = 0; j0 < n; j0 += KRT_ATTN_BLOCK) {
                const int64_t jb = n - j0 < KRT_ATTN_BLOCK ? n - j0 : KRT_ATTN_BLOCK;
                const int first = j0 == 0;
                for (int64_t h = ha; h < hb; h++) {
                    float *s = scratch + j0;
                    float bm = krt_attn_scores_avx512(s, q + t * q_stride + h * head_dim, K + j0 * head_dim, jb, head_dim, scale);
                    float m = bm, corr = 0.0f;
                    if (!first) {
                        m = mh[h - ha] > bm ? mh[h - ha] : bm;
                        corr = krt_expf(mh[h - ha] - m);
                    }
                    float bl = krt_attn_exp_avx512(s, jb, m);
                    lh[h - ha] = first ? bl : lh[h - ha] * corr + bl;
                    mh[h - ha] = m;
                    krt_attn_accum_avx512(out + (t * n_heads + h) * head_dim, s, V + j0 * head_dim, jb, head_dim, corr, first);
                }
            }
            for (int64_t h = ha; h < hb; h++) krt_attn_scale_avx512(out + (t * n_heads + h) * head_dim, head_dim, 1.0f / lh[h - ha]);
            ha = hb;
        }
    }
}

#else /* !KRT_X86: the SIMD names still exist so the API links everywhere. */

void krt_attention_avx2(float *out, const float *q, const float *kcache, const float *vcache, float *scratch,
                        int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t max_ctx, int64_t q_stride,
                        int64_t pos0, int64_t T, int64_t h0, int64_t h1) {
    krt_attention_ref(out, q, kcache, vcache, scratch, n_heads, n_kv_heads, head_dim, max_ctx, q_stride, pos0, T, h0, h1);
}
void krt_attention_avx512(float *out, const float *q, const float *kcache, const float *vcache, float *scratch,
                          int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t max_ctx, int64_t q_stride,
                          int64_t pos0, int64_t T, int64_t h0, int64_t h1) {
    krt_attention_ref(out, q, kcache, vcache, scratch, n_heads, n_kv_heads, head_dim, max_ctx, q_stride, pos0, T, h0, h1);
}

#endif /* KRT_X86 */
