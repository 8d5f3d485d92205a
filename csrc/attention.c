/* csrc/attention.c - grouped-query causal attention over F32, F16 and Q8_0 KV caches, read in
 * their stored type: decode (one token, split by KV head and cache chunk, plus a merge of the
 * partial softmax sums), prefill (flash-style tiles, no T x T score matrix) and the legacy
 * krt_attention (F32 cache, slice of query heads).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no
 * libm calls and no calls out of a function (every helper is static inline and always inlined,
 * exp is krt_expf / krt_expf_ieee_*, 1/sqrt(head_dim) is computed inline by Newton's method) so
 * that c2goasm can translate the object code. Three variants: _ref (scalar, plain loops: it
 * defines the semantics), _avx2 (KRT_TARGET_AVX2) and _avx512 (KRT_TARGET_AVX512). The two
 * SIMD variants share one driver, csrc/attention_driver.inc, included once per variant; only
 * the microkernels (tile staging, score tile, streaming-softmax step, P*V tile) are written
 * per ISA below. Helpers are prefixed krt_at_ (csrc/ is also built as one unity TU).
 *
 * ---- Semantics (every variant; _ref is the plain statement of it) ----
 * Query head h uses KV head g = h / (n_heads / n_kv_heads). A query row (token t, head h) sees
 * keys j in [0, n) (decode: n = n_ctx; prefill: n = pos0 + t + 1) and
 *   s_j = score(q, K_j) * scale,  scale = krt_attn_inv_sqrt(head_dim)   (1/sqrt(hd) rounded once)
 *   m   = max_j s_j (NaN scores skipped by the comparison; starts at -FLT_MAX)
 *   e_j = exp(s_j - m),  l = sum_j e_j,  out = (sum_j e_j * V_j) * (1 / l)
 * which is llama.cpp's soft_max_ext(kq, scale, causal mask) followed by kqv, up to summation
 * order. score() is the float dot product of q with the key row for F32 and F16 caches (F16
 * values widened exactly). For a Q8_0 cache the query row is first quantized to Q8_0 with the
 * krt_quantize_q8_0 rule (per 32 values, as llama.cpp does for a q8_0 K cache: Q is converted to
 * K's vec_dot_type), and score = sum_b (fp32(d_q,b) * fp32(d_k,b)) * isum_b with isum_b the exact
 * int8 dot product of block b. V values are fp32(d)*qs for Q8_0, the widened half for F16.
 * The SIMD variants compute the same quantities with an online softmax over blocks of
 * KRT_ATTN_KB keys (running max m, running sum l, the unnormalised output rescaled by
 * exp(m_old - m_new) when the max grows), the chunked decode with one (m, l, acc) record per
 * chunk merged by krt_attn_merge; algebraically all of these equal the formula above.
 *
 * Accuracy (csrc/tests/test_attn.c, against float64 on the same stored values, depths 1..16384):
 *   |out - ref| <= 4e-6 * sum_j w_j |V_j| per element, every type and variant (measured worst:
 *   6.5e-7); chunked + merged vs unchunked: the same bound. Q8_0 scores are exact integers
 *   times scales, so Q8_0 is no less accurate than F32 on the values it stores.
 *
 * NaN / Inf (identical classes in every variant, chunked or not; tested in test_attn.c):
 *   - a NaN score (NaN in q or in an attended key row, Inf*0 or Inf-Inf inside the dot) or a
 *     +Inf score makes the whole output row NaN (exp(NaN) / exp(Inf - Inf) is NaN, and so is l);
 *   - -Inf scores get weight exactly 0 (their V rows are still multiplied: 0 * NaN is NaN);
 *     when every attended score is -Inf the row is NaN (l = 0, 0 * (1/0)), as float64 gives;
 *   - NaN in an attended V element makes that output element NaN;
 *   - +-Inf in an attended V element makes that output element non-finite: +-Inf when its weight
 *     is > 0 and no infinity of the other sign meets it, NaN otherwise; where a weight is within
 *     rounding of underflowing, whether it is 0 (NaN) or tiny (Inf) may differ between variants;
 *   - Q8_0: a K or V block holding NaN/Inf was stored "poisoned" (d = NaN, see csrc/quant.c), so
 *     it gives NaN (never Inf): K -> the row is NaN, V -> the block's 32 output elements are NaN;
 *     a query row with NaN/Inf quantizes to a poisoned block -> the row is NaN;
 *   - entries outside the causal range (future or unwritten cache positions) are never read
 *     into a result: garbage or NaN there has no effect.
 *
 * ---- Work units (the slice u0..u1) and what the Go side passes ----
 * Decode: units n_kv_heads * n_chunks (n_chunks = ceil(n_ctx / chunk)), u = g * n_chunks + c.
 *   A unit walks positions [c*chunk, min(n_ctx, (c+1)*chunk)) of KV head g once, with all the
 *   n_heads/n_kv_heads query heads of g together (each K/V byte is read from memory once).
 *   n_chunks == 1: out rows written directly; else each (h, c) writes its partial record
 *   part[(h*n_chunks + c) * KRT_ATTN_PART_STRIDE(hd)] = {m, l, 14 unused, acc[hd]} and a second
 *   dispatch of krt_attn_merge (slice: query heads) writes out.
 * Prefill: units n_kv_heads * ceil(T / KRT_ATTN_QTILE), u = g * n_tiles + k, tile zigzag(k).
 * Scratch: KRT_ATTN_SCRATCH_FLOATS(hd) floats per worker (private; any alignment works, 64 bytes
 * is best); krt_attention needs none beyond its legacy argument: its SIMD variants keep their
 * workspace (S and the key tile, 66 KiB) on the stack.
 * Performance notes (measured, Zen 4): see attention_driver.inc and docs/attention-design.md.
 * Requirements (checked by the Go side): head_dim % 16 == 0 and <= 256 (Q8_0: % 32), n_heads a
 * multiple of n_kv_heads, n_ctx <= max_ctx, pos0 + T <= max_ctx, chunk >= 1. krt_attention
 * takes any head_dim <= 256.
 */
#include "krt_common.h"
#include "krt_quant.h"

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

/* Soft-capping (gemma2's attn_logit_softcapping): s -> c * tanh(s * (1/c)), c = *softcap > 0;
 * c == 0 leaves the scores alone (the kernels test it once per call / key block, so uncapped
 * attention runs the same code and gives the same bits as without the option).
 * tanh without libm: |x| < 0.625 an odd polynomial (Cephes tanhf's minimax coefficients),
 * else sign(x) * (1 - 2 / (exp(2|x|) + 1)) with krt_expf; relative error 1.2e-7 at worst
 * against float64 tanh (internal/generic's TestTanhRef, on the op-for-op Go port). tanh(+-Inf) = +-1 (exp overflows to Inf),
 * tanh(NaN) = NaN, so with a cap a +-Inf score becomes +-c and only a NaN score poisons a row. */
#define KRT_AT_TANH_SMALL 0.625f
#define KRT_AT_TANH_C0 (-5.70498872745e-3f)
#define KRT_AT_TANH_C1 2.06390887954e-2f
#define KRT_AT_TANH_C2 (-5.37397155531e-2f)
#define KRT_AT_TANH_C3 1.33314422036e-1f
#define KRT_AT_TANH_C4 (-3.33332819422e-1f)

KRT_INLINE float krt_at_tanh_ref(float x) {
    const float ax = x < 0.0f ? -x : x;
    if (ax < KRT_AT_TANH_SMALL) {
        const float z = x * x;
        float p = KRT_AT_TANH_C0;
        p = p * z + KRT_AT_TANH_C1;
        p = p * z + KRT_AT_TANH_C2;
        p = p * z + KRT_AT_TANH_C3;
        p = p * z + KRT_AT_TANH_C4;
        return p * z * x + x;
    }
    const float t = 1.0f - 2.0f / (krt_expf(ax + ax) + 1.0f); /* NaN stays NaN */
    return x < 0.0f ? -t : t;
}

enum { KRT_AT_F32 = 0, KRT_AT_F16 = 1, KRT_AT_Q8 = 2 };

/* Address of key/value row j of one KV head's cache, by type. */
KRT_INLINE const void *krt_at_row_ptr(int kv, const void *c, int64_t j, int64_t hd) {
    if (kv == KRT_AT_F32) return (const float *)c + j * hd;
    if (kv == KRT_AT_F16) return (const uint16_t *)c + j * hd;
    return (const krt_block_q8_0 *)c + j * (hd / KRT_QK);
}

/* Query tile k of n (0-based) in zigzag order: 0, n-1, 1, n-2, ... */
KRT_INLINE int64_t krt_at_zigzag(int64_t k, int64_t n) { return (k & 1) ? n - 1 - k / 2 : k / 2; }

/* ================================================================== _ref */

/* Dequantized element d of a Q8_0 / F16 / F32 row. */
KRT_INLINE float krt_at_val_ref(int kv, const void *row, int64_t d) {
    if (kv == KRT_AT_F32) return ((const float *)row)[d];
    if (kv == KRT_AT_F16) return krt_fp16_to_fp32(((const uint16_t *)row)[d]);
    const krt_block_q8_0 *b = (const krt_block_q8_0 *)row + d / KRT_QK;
    return krt_fp16_to_fp32(b->d) * (float)b->qs[d % KRT_QK];
}

/* score(q, key row) before scaling; qq holds q quantized to Q8_0 (Q8_0 cache only). */
KRT_INLINE float krt_at_score_ref(int kv, const float *q, const krt_block_q8_0 *qq, const void *krow, int64_t hd) {
    float s = 0.0f;
    if (kv == KRT_AT_Q8) {
        const krt_block_q8_0 *kb = (const krt_block_q8_0 *)krow;
        for (int64_t b = 0; b < hd / KRT_QK; b++) {
            int32_t isum = 0;
            for (int i = 0; i < KRT_QK; i++) isum += (int32_t)qq[b].qs[i] * (int32_t)kb[b].qs[i];
            s += (krt_fp16_to_fp32(qq[b].d) * krt_fp16_to_fp32(kb[b].d)) * (float)isum;
        }
        return s;
    }
    for (int64_t d = 0; d < hd; d++) s += q[d] * krt_at_val_ref(kv, krow, d);
    return s;
}

/* One query row over keys [j0, j1) of one KV head, two passes (the scores are recomputed
 * rather than stored): o = sum_j exp(s_j - m) V_j (unnormalised), *m_out = m, *l_out = l. */
KRT_INLINE void krt_at_row_ref(int kv, float *o, float *m_out, float *l_out, const float *q, krt_block_q8_0 *qq,
                               const void *K, const void *V, int64_t hd, int64_t j0, int64_t j1, float scale,
                               float cap) {
    const float icap = cap != 0.0f ? 1.0f / cap : 0.0f;
    if (kv == KRT_AT_Q8)
        for (int64_t b = 0; b < hd / KRT_QK; b++) krt_qz_q8_0_ref(&qq[b], q + b * KRT_QK);
    float m = KRT_ATTN_NEG_BIG;
    for (int64_t j = j0; j < j1; j++) {
        float s = krt_at_score_ref(kv, q, qq, krt_at_row_ptr(kv, K, j, hd), hd) * scale;
        if (cap != 0.0f) s = cap * krt_at_tanh_ref(s * icap);
        if (s > m) m = s;
    }
    float l = 0.0f;
    for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
    for (int64_t j = j0; j < j1; j++) {
        float s = krt_at_score_ref(kv, q, qq, krt_at_row_ptr(kv, K, j, hd), hd) * scale;
        if (cap != 0.0f) s = cap * krt_at_tanh_ref(s * icap);
        float e = krt_expf(s - m);
        l += e;
        const void *vrow = krt_at_row_ptr(kv, V, j, hd);
        for (int64_t d = 0; d < hd; d++) o[d] += e * krt_at_val_ref(kv, vrow, d);
    }
    *m_out = m;
    *l_out = l;
}

KRT_INLINE void krt_at_decode_ref(int kv, float *out, float *part, const float *q, const void *kc, const void *vc,
                                  float *scratch, float cap, int64_t n_heads, int64_t n_kv_heads, int64_t hd, int64_t max_ctx,
                                  int64_t n_ctx, int64_t chunk, int64_t u0, int64_t u1) {
    const int64_t G = n_heads / n_kv_heads;
    const int64_t nch = (n_ctx + chunk - 1) / chunk;
    const float scale = krt_attn_inv_sqrt(hd);
    krt_block_q8_0 *qq = (krt_block_q8_0 *)scratch;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t g = u / nch, c = u % nch;
        const int64_t j0 = c * chunk, j1 = j0 + chunk < n_ctx ? j0 + chunk : n_ctx;
        const void *K = krt_at_row_ptr(kv, kc, g * max_ctx, hd);
        const void *V = krt_at_row_ptr(kv, vc, g * max_ctx, hd);
        for (int64_t h = g * G; h < (g + 1) * G; h++) {
            float m, l;
            if (nch == 1) {
                float *o = out + h * hd;
                krt_at_row_ref(kv, o, &m, &l, q + h * hd, qq, K, V, hd, j0, j1, scale, cap);
                const float inv = 1.0f / l;
                for (int64_t d = 0; d < hd; d++) o[d] *= inv;
            } else {
                float *rec = part + (h * nch + c) * KRT_ATTN_PART_STRIDE(hd);
                krt_at_row_ref(kv, rec + 16, &m, &l, q + h * hd, qq, K, V, hd, j0, j1, scale, cap);
                rec[0] = m;
                rec[1] = l;
            }
        }
    }
}

KRT_INLINE void krt_at_prefill_ref(int kv, float *out, const float *q, const void *kc, const void *vc, float *scratch,
                                   float cap, int64_t n_heads, int64_t n_kv_heads, int64_t hd, int64_t max_ctx, int64_t q_stride,
                                   int64_t pos0, int64_t T, int64_t u0, int64_t u1) {
    const int64_t G = n_heads / n_kv_heads;
    const int64_t ntiles = (T + KRT_ATTN_QTILE - 1) / KRT_ATTN_QTILE;
    const float scale = krt_attn_inv_sqrt(hd);
    krt_block_q8_0 *qq = (krt_block_q8_0 *)scratch;
    for (int64_t u = u0; u < u1; u++) {
        const int64_t g = u / ntiles, tile = krt_at_zigzag(u % ntiles, ntiles);
        const int64_t ta = tile * KRT_ATTN_QTILE, tb = ta + KRT_ATTN_QTILE < T ? ta + KRT_ATTN_QTILE : T;
        const void *K = krt_at_row_ptr(kv, kc, g * max_ctx, hd);
        const void *V = krt_at_row_ptr(kv, vc, g * max_ctx, hd);
        for (int64_t t = ta; t < tb; t++) {
            for (int64_t h = g * G; h < (g + 1) * G; h++) {
                float m, l;
                float *o = out + (t * n_heads + h) * hd;
                krt_at_row_ref(kv, o, &m, &l, q + t * q_stride + h * hd, qq, K, V, hd, 0, pos0 + t + 1, scale, cap);
                const float inv = 1.0f / l;
                for (int64_t d = 0; d < hd; d++) o[d] *= inv;
            }
        }
    }
}

void krt_attn_decode_f32_ref(float *out, float *part, const float *q, const float *kcache, const float *vcache,
                             float *scratch, const float *softcap, int64_t heads, int64_t head_dim, int64_t max_ctx,
                             int64_t n_ctx, int64_t chunk, int64_t u0, int64_t u1) {
    krt_at_decode_ref(KRT_AT_F32, out, part, q, kcache, vcache, scratch, *softcap, KRT_ATTN_NH(heads), KRT_ATTN_NKV(heads), head_dim, max_ctx, n_ctx,
                      chunk, u0, u1);
}
void krt_attn_decode_f16_ref(float *out, float *part, const float *q, const uint16_t *kcache, const uint16_t *vcache,
                             float *scratch, const float *softcap, int64_t heads, int64_t head_dim, int64_t max_ctx,
                             int64_t n_ctx, int64_t chunk, int64_t u0, int64_t u1) {
    krt_at_decode_ref(KRT_AT_F16, out, part, q, kcache, vcache, scratch, *softcap, KRT_ATTN_NH(heads), KRT_ATTN_NKV(heads), head_dim, max_ctx, n_ctx,
                      chunk, u0, u1);
}
void krt_attn_decode_q8_0_ref(float *out, float *part, const float *q, const krt_block_q8_0 *kcache,
                              const krt_block_q8_0 *vcache, float *scratch, const float *softcap, int64_t heads,
                              int64_t head_dim, int64_t max_ctx, int64_t n_ctx, int64_t chunk, int64_t u0, int64_t u1) {
    krt_at_decode_ref(KRT_AT_Q8, out, part, q, kcache, vcache, scratch, *softcap, KRT_ATTN_NH(heads), KRT_ATTN_NKV(heads), head_dim, max_ctx, n_ctx,
                      chunk, u0, u1);
}
void krt_attn_prefill_f32_ref(float *out, const float *q, const float *kcache, const float *vcache, float *scratch, const float *softcap,
                              int64_t heads, int64_t head_dim, int64_t max_ctx, int64_t q_stride,
                              int64_t pos0, int64_t T, int64_t u0, int64_t u1) {
    krt_at_prefill_ref(KRT_AT_F32, out, q, kcache, vcache, scratch, *softcap, KRT_ATTN_NH(heads), KRT_ATTN_NKV(heads), head_dim, max_ctx, q_stride,
                       pos0, T, u0, u1);
}
void krt_attn_prefill_f16_ref(float *out, const float *q, const uint16_t *kcache, const uint16_t *vcache,
                              float *scratch, const float *softcap, int64_t heads, int64_t head_dim, int64_t max_ctx,
                              int64_t q_stride, int64_t pos0, int64_t T, int64_t u0, int64_t u1) {
    krt_at_prefill_ref(KRT_AT_F16, out, q, kcache, vcache, scratch, *softcap, KRT_ATTN_NH(heads), KRT_ATTN_NKV(heads), head_dim, max_ctx, q_stride,
                       pos0, T, u0, u1);
}
void krt_attn_prefill_q8_0_ref(float *out, const float *q, const krt_block_q8_0 *kcache, const krt_block_q8_0 *vcache,
                               float *scratch, const float *softcap, int64_t heads, int64_t head_dim, int64_t max_ctx,
                               int64_t q_stride, int64_t pos0, int64_t T, int64_t u0, int64_t u1) {
    krt_at_prefill_ref(KRT_AT_Q8, out, q, kcache, vcache, scratch, *softcap, KRT_ATTN_NH(heads), KRT_ATTN_NKV(heads), head_dim, max_ctx, q_stride,
                       pos0, T, u0, u1);
}

/* Merge: M = max_c m_c (NaN skipped), w_c = exp(m_c - M), out = (sum_c w_c acc_c) * (1 / sum_c w_c l_c).
 * The same code serves every variant (one record per chunk, a few per head: not worth SIMD). */
KRT_INLINE void krt_at_merge(float *out, const float *part, int64_t hd, int64_t nch, int64_t h0, int64_t h1) {
    const int64_t ps = KRT_ATTN_PART_STRIDE(hd);
    for (int64_t h = h0; h < h1; h++) {
        const float *rec = part + h * nch * ps;
        float M = KRT_ATTN_NEG_BIG;
        for (int64_t c = 0; c < nch; c++)
            if (rec[c * ps] > M) M = rec[c * ps];
        float *o = out + h * hd;
        float L = 0.0f;
        for (int64_t d = 0; d < hd; d++) o[d] = 0.0f;
        for (int64_t c = 0; c < nch; c++) {
            const float w = krt_expf(rec[c * ps] - M);
            L += rec[c * ps + 1] * w;
            for (int64_t d = 0; d < hd; d++) o[d] += rec[c * ps + 16 + d] * w;
        }
        const float inv = 1.0f / L;
        for (int64_t d = 0; d < hd; d++) o[d] *= inv;
    }
}

void krt_attn_merge_ref(float *out, const float *part, int64_t n_heads, int64_t head_dim, int64_t n_chunks, int64_t h0,
                        int64_t h1) {
    (void)n_heads;
    krt_at_merge(out, part, head_dim, n_chunks, h0, h1);
}

/* The legacy F32 kernel (query heads h0..h1 of T tokens): the same row computation. */
void krt_attention_ref(float *out, const float *q, const float *kcache, const float *vcache, float *scratch,
                       int64_t n_heads, int64_t n_kv_heads, int64_t head_dim, int64_t max_ctx, int64_t q_stride,
                       int64_t pos0, int64_t T, int64_t h0, int64_t h1) {
    (void)scratch;
    const int64_t G = n_heads / n_kv_heads;
    const float scale = krt_attn_inv_sqrt(head_dim);
    for (int64_t h = h0; h < h1; h++) {
        const int64_t g = h / G;
        const float *K = kcache + g * max_ctx * head_dim, *V = vcache + g * max_ctx * head_dim;
        for (int64_t t = 0; t < T; t++) {
            float m, l;
            float *o = out + (t * n_heads + h) * head_dim;
            krt_at_row_ref(KRT_AT_F32, o, &m, &l, q + t * q_stride + h * head_dim, 0, K, V, head_dim, 0, pos0 + t + 1,
                           scale, 0.0f);
            const float inv = 1.0f / l;
            for (int64_t d = 0; d < head_dim; d++) o[d] *= inv;
        }
    }
}

#ifdef KRT_X86

/* ================================================================== SIMD microkernels
 * Tiles (all in the caller's scratch, see attention_driver.inc):
 *   kt  keys of the block transposed, kt[d * KB + j] (float; for Q8_0: AVX-512 holds u8 dwords
 *       kt4[(c * KB + j) * 4 + i] = K_j[4c + i] + 128, AVX2 floats of the int8 quants), keys
 *       j >= nk zero;
 *   dk  Q8_0 key scales dk[b * KB + j];
 *   vt  F16/Q8_0 values widened to float, vt[j * hd + d] (F32 reads the cache rows directly);
 *   S   scores of one row block, S[r * KB + j], then the weights e_j (0 beyond a row's keys);
 *   qx  Q8_0 query rows: AVX-512 int8 quants (row stride hdp bytes), AVX2 the same as floats;
 *       qd / qsum: per row and block, the query scale and the sum of its quants.
 */
#define KB KRT_ATTN_KB

/* Prefetch cursor over the next key block's K and V bytes. The microkernels advance it once
 * per inner-loop iteration (pf->per lines each time), so the next block's lines are requested
 * while this block computes. Measured here: a burst of prefetches at the start of a block
 * stalls on the L1 miss buffers, and without prefetches every block start waits on DRAM (the
 * hardware prefetcher idles during the compute); spreading them is what overlaps the two.
 * They go to L2 (T1): into L1 (T0) the next block's 32 KiB (F32) evicts the current tiles and
 * each prefetch holds an L1 miss buffer; T1 took F32 decode at depth 8192 (2 threads, 24 layer
 * caches) from ~530 to ~300 us per layer, 26-29 GB/s of a 33 GB/s streaming read. */
typedef struct {
    const char *p0, *p1;
    int64_t n0, n1;
    int64_t per;
} krt_at_pf;

KRT_INLINE void krt_at_pf_step(krt_at_pf *c) {
    for (int64_t k = 0; k < c->per; k++) {
        if (c->n0 > 0) {
            _mm_prefetch(c->p0, _MM_HINT_T1);
            c->p0 += 64;
            c->n0--;
        } else if (c->n1 > 0) {
            _mm_prefetch(c->p1, _MM_HINT_T1);
            c->p1 += 64;
            c->n1--;
        }
    }
}

/* ------------------------------------------------------------------ AVX-512 */
#define KRT_AT_RB_AVX512 4 /* rows per register block: 4 x 4 zmm accumulators (Zen 4 is
                                   * FMA-bound from 4 rows on; more rows only grow the code) */

KRT_TARGET_AVX512 KRT_INLINE __mmask16 krt_at_mask16(int64_t k) {
    return (__mmask16)(k >= 16 ? 0xffffu : k <= 0 ? 0u : (1u << k) - 1u);
}

/* In-place 16x16 transpose of r[0..15] (r[i] lane j <- r[j] lane i). */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_tr16_avx512(__m512 *r) {
    __m512 t[16];
    for (int p = 0; p < 8; p++) {
        t[2 * p] = _mm512_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm512_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    __m512 b[4][4]; /* b[q][k] 128-bit block L = column 4L+k of rows 4q..4q+3 */
    for (int qd = 0; qd < 4; qd++) {
        __m512d l0 = _mm512_castps_pd(t[4 * qd]), l1 = _mm512_castps_pd(t[4 * qd + 2]);
        __m512d h0 = _mm512_castps_pd(t[4 * qd + 1]), h1 = _mm512_castps_pd(t[4 * qd + 3]);
        b[qd][0] = _mm512_castpd_ps(_mm512_unpacklo_pd(l0, l1));
        b[qd][1] = _mm512_castpd_ps(_mm512_unpackhi_pd(l0, l1));
        b[qd][2] = _mm512_castpd_ps(_mm512_unpacklo_pd(h0, h1));
        b[qd][3] = _mm512_castpd_ps(_mm512_unpackhi_pd(h0, h1));
    }
    for (int k = 0; k < 4; k++) {
        __m512 y0 = _mm512_shuffle_f32x4(b[0][k], b[1][k], _MM_SHUFFLE(1, 0, 1, 0));
        __m512 y1 = _mm512_shuffle_f32x4(b[0][k], b[1][k], _MM_SHUFFLE(3, 2, 3, 2));
        __m512 y2 = _mm512_shuffle_f32x4(b[2][k], b[3][k], _MM_SHUFFLE(1, 0, 1, 0));
        __m512 y3 = _mm512_shuffle_f32x4(b[2][k], b[3][k], _MM_SHUFFLE(3, 2, 3, 2));
        r[k] = _mm512_shuffle_f32x4(y0, y2, _MM_SHUFFLE(2, 0, 2, 0));
        r[4 + k] = _mm512_shuffle_f32x4(y0, y2, _MM_SHUFFLE(3, 1, 3, 1));
        r[8 + k] = _mm512_shuffle_f32x4(y1, y3, _MM_SHUFFLE(2, 0, 2, 0));
        r[12 + k] = _mm512_shuffle_f32x4(y1, y3, _MM_SHUFFLE(3, 1, 3, 1));
    }
}

/* 16 floats of key row j, dims [d, d + 16) (zeros past hd), from an F32 or F16 row. */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_at_load16_avx512(int kv, const void *row, int64_t d, int64_t hd) {
    __mmask16 m = krt_at_mask16(hd - d);
    if (kv == KRT_AT_F16)
        return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)row + d));
    return _mm512_maskz_loadu_ps(m, (const float *)row + d);
}

/* In-place 16x16 transpose of 16-bit words, r[i] = row i (ymm): 4 stages of 16 ymm shuffles,
 * half the cost of transposing the widened floats in zmm. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_tr16x16w_avx512(__m256i *r) {
    __m256i a[16], b[16], c[16];
    for (int p = 0; p < 8; p++) { /* lane L dword k = (row 2p, row 2p+1) at word 8L+k (lo) / 8L+4+k (hi) */
        a[2 * p] = _mm256_unpacklo_epi16(r[2 * p], r[2 * p + 1]);
        a[2 * p + 1] = _mm256_unpackhi_epi16(r[2 * p], r[2 * p + 1]);
    }
    for (int q = 0; q < 4; q++) { /* b[4q+c] lane L qword m = rows 4q..4q+3 at word 8L+2c+m */
        b[4 * q + 0] = _mm256_unpacklo_epi32(a[4 * q], a[4 * q + 2]);
        b[4 * q + 1] = _mm256_unpackhi_epi32(a[4 * q], a[4 * q + 2]);
        b[4 * q + 2] = _mm256_unpacklo_epi32(a[4 * q + 1], a[4 * q + 3]);
        b[4 * q + 3] = _mm256_unpackhi_epi32(a[4 * q + 1], a[4 * q + 3]);
    }
    for (int h = 0; h < 2; h++) /* c[8h+w] lane L = rows 8h..8h+7 at word 8L+w */
        for (int k = 0; k < 4; k++) {
            c[8 * h + 2 * k] = _mm256_unpacklo_epi64(b[8 * h + k], b[8 * h + 4 + k]);
            c[8 * h + 2 * k + 1] = _mm256_unpackhi_epi64(b[8 * h + k], b[8 * h + 4 + k]);
        }
    for (int w = 0; w < 8; w++) {
        r[w] = _mm256_permute2x128_si256(c[w], c[8 + w], 0x20);
        r[8 + w] = _mm256_permute2x128_si256(c[w], c[8 + w], 0x31);
    }
}

/* kt[d * KB + j] = K_j[d] for j < nk (zeros for nk <= j < KB), F32 or F16 rows. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_stage_kt_avx512(int kv, float *kt, const void *K, int64_t nk, int64_t hd) {
    if (kv == KRT_AT_F16) {
        for (int64_t jg = 0; jg < KB; jg += 16) {
            for (int64_t d0 = 0; d0 < hd; d0 += 16) {
                const __mmask16 m = krt_at_mask16(hd - d0);
                __m256i r[16];
                for (int i = 0; i < 16; i++)
                    r[i] = jg + i < nk ? _mm256_maskz_loadu_epi16(m, (const uint16_t *)K + (jg + i) * hd + d0)
                                       : _mm256_setzero_si256();
                krt_at_tr16x16w_avx512(r);
                const int64_t nd = hd - d0 < 16 ? hd - d0 : 16;
                for (int64_t i = 0; i < nd; i++) _mm512_storeu_ps(kt + (d0 + i) * KB + jg, _mm512_cvtph_ps(r[i]));
            }
        }
        return;
    }
    for (int64_t jg = 0; jg < KB; jg += 16) {
        for (int64_t d0 = 0; d0 < hd; d0 += 16) {
            __m512 r[16];
            for (int i = 0; i < 16; i++)
                r[i] = jg + i < nk ? krt_at_load16_avx512(kv, krt_at_row_ptr(kv, K, jg + i, hd), d0, hd)
                                   : _mm512_setzero_ps();
            krt_at_tr16_avx512(r);
            const int64_t nd = hd - d0 < 16 ? hd - d0 : 16;
            for (int64_t i = 0; i < nd; i++) _mm512_storeu_ps(kt + (d0 + i) * KB + jg, r[i]);
        }
    }
}

/* vt[j * hd + d] = V_j[d] widened, j < nk (F16 or Q8_0). */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_stage_v_avx512(int kv, float *vt, const void *V, int64_t nk, int64_t hd) {
    for (int64_t j = 0; j < nk; j++) {
        float *o = vt + j * hd;
        if (kv == KRT_AT_F16) {
            const uint16_t *v = (const uint16_t *)V + j * hd;
            for (int64_t d = 0; d < hd; d += 16) _mm512_storeu_ps(o + d, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(v + d))));
        } else {
            const krt_block_q8_0 *b = (const krt_block_q8_0 *)V + j * (hd / KRT_QK);
            for (int64_t bi = 0; bi < hd / KRT_QK; bi++) {
                const __m512 dv = _mm512_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(b[bi].d))));
                const __m128i q0 = _mm_loadu_si128((const __m128i *)b[bi].qs);
                const __m128i q1 = _mm_loadu_si128((const __m128i *)(b[bi].qs + 16));
                _mm512_storeu_ps(o + bi * 32, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
                _mm512_storeu_ps(o + bi * 32 + 16, _mm512_mul_ps(dv, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
            }
        }
    }
}

/* Q8_0 keys: kt4 (u8 = q + 128, dword-transposed) and dk[b * KB + j]; zeros for j >= nk. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_stage_kq8_avx512(float *kt, float *dk, const void *K, int64_t nk, int64_t hd) {
    const int64_t nb = hd / KRT_QK;
    const __m512i x80 = _mm512_set1_epi8((char)0x80);
    uint8_t *kt4 = (uint8_t *)kt;
    for (int64_t jg = 0; jg < KB; jg += 16) {
        for (int64_t b0 = 0; b0 < nb; b0 += 2) { /* 2 blocks = 16 dwords per key */
            __m512 r[16];
            for (int i = 0; i < 16; i++) {
                if (jg + i < nk) {
                    const krt_block_q8_0 *kb = (const krt_block_q8_0 *)K + (jg + i) * nb + b0;
                    __m256i lo = _mm256_loadu_si256((const __m256i *)kb[0].qs);
                    __m256i hi = b0 + 1 < nb ? _mm256_loadu_si256((const __m256i *)kb[1].qs) : _mm256_setzero_si256();
                    __m512i v = _mm512_inserti64x4(_mm512_castsi256_si512(lo), hi, 1);
                    r[i] = _mm512_castsi512_ps(_mm512_xor_si512(v, x80));
                } else {
                    r[i] = _mm512_setzero_ps(); /* dk = 0 below makes the value irrelevant */
                }
            }
            krt_at_tr16_avx512(r);
            const int64_t nc = b0 + 1 < nb ? 16 : 8;
            for (int64_t i = 0; i < nc; i++) _mm512_storeu_ps((float *)(kt4 + ((b0 * 8 + i) * KB + jg) * 4), r[i]);
        }
    }
    for (int64_t b = 0; b < nb; b++) { /* 16 scales at a time: gather the halves, widen once */
        for (int64_t jg = 0; jg < KB; jg += 16) {
            uint16_t h[16];
            for (int i = 0; i < 16; i++) h[i] = jg + i < nk ? ((const krt_block_q8_0 *)K)[(jg + i) * nb + b].d : 0;
            _mm512_storeu_ps(dk + b * KB + jg, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)h)));
        }
    }
}

/* Q8_0 query rows: qx (int8, row stride hdp bytes), qd[r * 8 + b], qsum[r * 8 + b]. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_prep_q8_avx512(float *qx, float *qd, int32_t *qsum, const float *const *qrow,
                                                        int64_t nr, int64_t hd, int64_t hdp) {
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t b = 0; b < hd / KRT_QK; b++) {
            krt_block_q8_0 blk;
            krt_qz_q8_0_avx512(&blk, qrow[r] + b * KRT_QK);
            memcpy((int8_t *)qx + r * hdp + b * KRT_QK, blk.qs, KRT_QK);
            qd[r * 8 + b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(blk.d)));
            __m512i w = _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)blk.qs));
            w = _mm512_add_epi32(w, _mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(blk.qs + 16))));
            qsum[r * 8 + b] = _mm512_reduce_add_epi32(w);
        }
    }
}

/* S[r * KB + j] = scale * dot(q_r, K_j), R rows, all KB keys, from the transposed tile. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_scores_f32_avx512(float *S, const float *const *qrow, const int R,
                                                           const float *kt, int64_t hd, float scale, krt_at_pf *pf) {
    __m512 acc[KRT_AT_RB_AVX512][4];
    for (int r = 0; r < R; r++)
        for (int v = 0; v < 4; v++) acc[r][v] = _mm512_setzero_ps();
    for (int64_t d = 0; d < hd; d++) {
        krt_at_pf_step(pf);
        const float *k = kt + d * KB;
        const __m512 k0 = _mm512_loadu_ps(k), k1 = _mm512_loadu_ps(k + 16);
        const __m512 k2 = _mm512_loadu_ps(k + 32), k3 = _mm512_loadu_ps(k + 48);
        for (int r = 0; r < R; r++) {
            const __m512 qb = _mm512_set1_ps(qrow[r][d]);
            acc[r][0] = _mm512_fmadd_ps(qb, k0, acc[r][0]);
            acc[r][1] = _mm512_fmadd_ps(qb, k1, acc[r][1]);
            acc[r][2] = _mm512_fmadd_ps(qb, k2, acc[r][2]);
            acc[r][3] = _mm512_fmadd_ps(qb, k3, acc[r][3]);
        }
    }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < 4; v++) _mm512_storeu_ps(S + r * KB + v * 16, _mm512_mul_ps(acc[r][v], vs));
}

/* Q8_0 scores with VNNI: per block b, isum = dpbusd(K + 128, q) - 128 * qsum, exact. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_scores_q8_avx512(float *S, const float *qx, const float *qd,
                                                          const int32_t *qsum, const int R, const float *kt,
                                                          const float *dk, int64_t hd, int64_t hdp, float scale,
                                                          krt_at_pf *pf) {
    const uint8_t *kt4 = (const uint8_t *)kt;
    for (int64_t b = 0; b < hd / KRT_QK; b++) {
        __m512i acc[KRT_AT_RB_AVX512][4];
        for (int r = 0; r < R; r++)
            for (int v = 0; v < 4; v++) acc[r][v] = _mm512_setzero_si512();
        for (int64_t c = b * 8; c < b * 8 + 8; c++) {
            krt_at_pf_step(pf);
            const uint8_t *k = kt4 + c * KB * 4;
            const __m512i k0 = _mm512_loadu_si512(k), k1 = _mm512_loadu_si512(k + 64);
            const __m512i k2 = _mm512_loadu_si512(k + 128), k3 = _mm512_loadu_si512(k + 192);
            for (int r = 0; r < R; r++) {
                int32_t qw;
                memcpy(&qw, (const int8_t *)qx + r * hdp + c * 4, 4);
                const __m512i qb = _mm512_set1_epi32(qw);
                acc[r][0] = _mm512_dpbusd_epi32(acc[r][0], k0, qb);
                acc[r][1] = _mm512_dpbusd_epi32(acc[r][1], k1, qb);
                acc[r][2] = _mm512_dpbusd_epi32(acc[r][2], k2, qb);
                acc[r][3] = _mm512_dpbusd_epi32(acc[r][3], k3, qb);
            }
        }
        for (int r = 0; r < R; r++) {
            const __m512i off = _mm512_set1_epi32(128 * qsum[r * 8 + b]);
            const __m512 dq = _mm512_set1_ps(qd[r * 8 + b]);
            for (int v = 0; v < 4; v++) {
                __m512 isum = _mm512_cvtepi32_ps(_mm512_sub_epi32(acc[r][v], off));
                __m512 w = _mm512_mul_ps(dq, _mm512_loadu_ps(dk + b * KB + v * 16));
                float *s = S + r * KB + v * 16;
                _mm512_storeu_ps(s, b == 0 ? _mm512_mul_ps(w, isum) : _mm512_add_ps(_mm512_loadu_ps(s), _mm512_mul_ps(w, isum)));
            }
        }
    }
    const __m512 vs = _mm512_set1_ps(scale);
    for (int r = 0; r < R; r++)
        for (int v = 0; v < 4; v++) _mm512_storeu_ps(S + r * KB + v * 16, _mm512_mul_ps(_mm512_loadu_ps(S + r * KB + v * 16), vs));
}

/* krt_expf_ieee_avx512 for x <= 0 or NaN (all the softmax step feeds it: s - max(s)): no
 * overflow side, and 2^n applied with VSCALEFPS. Same results as krt_expf_ieee_avx512 there. */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_at_exp_le0_avx512(__m512 x) {
    const __m512 lo = _mm512_set1_ps(KRT_EXP_LO);
    const __mmask16 lo_mask = _mm512_cmp_ps_mask(x, lo, _CMP_LT_OQ);
    const __m512 xc = _mm512_max_ps(lo, x); /* NaN x passes through */
    const __m512 n = _mm512_roundscale_ps(_mm512_fmadd_ps(xc, _mm512_set1_ps(KRT_LOG2E), _mm512_set1_ps(0.5f)),
                                          _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
    __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KRT_LN2_HI), xc);
    r = _mm512_fnmadd_ps(n, _mm512_set1_ps(KRT_LN2_LO), r);
    __m512 p = _mm512_set1_ps(KRT_EXP_P0);
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P1));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P2));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P3));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P4));
    p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(KRT_EXP_P5));
    p = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
    return _mm512_maskz_scalef_ps((__mmask16)~lo_mask, p, n);
}

/* Streaming-softmax step of one row over its first n (1..KB) scores: the block max, the new
 * running max, e_j = exp(s_j - m) written over s (0 for j >= n); returns the block's sum of e
 * and the new max in *m. */
KRT_TARGET_AVX512 KRT_INLINE float krt_at_softmax_step_avx512(float *s, int64_t n, float *m) {
    __m512 vmax = _mm512_set1_ps(KRT_ATTN_NEG_BIG);
    for (int v = 0; v < 4; v++)
        vmax = _mm512_mask_max_ps(vmax, krt_at_mask16(n - v * 16), vmax, _mm512_loadu_ps(s + v * 16));
    const float bm = _mm512_reduce_max_ps(vmax);
    const float mn = bm > *m ? bm : *m;
    const __m512 vm = _mm512_set1_ps(mn);
    __m512 vsum = _mm512_setzero_ps();
    for (int v = 0; v < 4; v++) {
        __m512 e = krt_at_exp_le0_avx512(_mm512_sub_ps(_mm512_loadu_ps(s + v * 16), vm));
        e = _mm512_maskz_mov_ps(krt_at_mask16(n - v * 16), e);
        _mm512_storeu_ps(s + v * 16, e);
        vsum = _mm512_add_ps(vsum, e);
    }
    *m = mn;
    return _mm512_reduce_add_ps(vsum);
}

/* o_r = (first_r ? 0 : o_r * corr_r) + sum_{j < nj} P[r * KB + j] * V_j, R rows, V rows at
 * stride hd (F32 cache rows or the widened tile). */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_at_ldvm_avx512(const int vh, __mmask16 m, const void *V, int64_t off) {
    return vh ? _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, (const uint16_t *)V + off))
              : _mm512_maskz_loadu_ps(m, (const float *)V + off);
}

/* vh: V rows are F16 cache rows, widened here (cheaper than staging them: F16 V is read once
 * per row block, and the conversions run beside the FMAs), else floats. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_pv_avx512(float *const *orow, const float *P, const int R, const int vh,
                                                   const void *V, int64_t nj, int64_t hd, const float *corr,
                                                   const int *first, krt_at_pf *pf) {
    for (int64_t d0 = 0; d0 < hd; d0 += 64) {
        __mmask16 mk[4];
        for (int v = 0; v < 4; v++) mk[v] = krt_at_mask16(hd - d0 - v * 16);
        __m512 acc[KRT_AT_RB_AVX512][4];
        for (int r = 0; r < R; r++) {
            const __m512 c = _mm512_set1_ps(corr[r]);
            for (int v = 0; v < 4; v++)
                acc[r][v] = first[r] ? _mm512_setzero_ps() : _mm512_mul_ps(_mm512_maskz_loadu_ps(mk[v], orow[r] + d0 + v * 16), c);
        }
        for (int64_t j = 0; j < nj; j++) { /* masked loads: full masks cost nothing here */
            krt_at_pf_step(pf);
            __m512 vv[4];
            for (int v = 0; v < 4; v++) vv[v] = krt_at_ldvm_avx512(vh, mk[v], V, j * hd + d0 + v * 16);
            for (int r = 0; r < R; r++) {
                const __m512 w = _mm512_set1_ps(P[r * KB + j]);
                for (int v = 0; v < 4; v++) acc[r][v] = _mm512_fmadd_ps(w, vv[v], acc[r][v]);
            }
        }
        for (int r = 0; r < R; r++)
            for (int v = 0; v < 4; v++) _mm512_mask_storeu_ps(orow[r] + d0 + v * 16, mk[v], acc[r][v]);
    }
}

/* o += sum_{j0 <= j < j1} p[j] * V_j (one row's keys past the block's common prefix). */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_pv_tail_avx512(float *o, const float *p, const int vh, const void *V, int64_t j0,
                                                        int64_t j1, int64_t hd) {
    for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 mk = krt_at_mask16(hd - d);
        __m512 a = _mm512_maskz_loadu_ps(mk, o + d);
        for (int64_t j = j0; j < j1; j++) a = _mm512_fmadd_ps(_mm512_set1_ps(p[j]), krt_at_ldvm_avx512(vh, mk, V, j * hd + d), a);
        _mm512_mask_storeu_ps(o + d, mk, a);
    }
}

/* o *= f over hd floats. */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_scale_avx512(float *o, int64_t hd, float f) {
    const __m512 vf = _mm512_set1_ps(f);
    for (int64_t d = 0; d < hd; d += 16) {
        const __mmask16 mk = krt_at_mask16(hd - d);
        _mm512_mask_storeu_ps(o + d, mk, _mm512_mul_ps(_mm512_maskz_loadu_ps(mk, o + d), vf));
    }
}

/* The uniform microkernel interface the driver calls (kv is a compile-time constant there). */
KRT_TARGET_AVX512 KRT_INLINE void krt_at_stage_k_avx512(int kv, float *kt, float *dk, const void *K, int64_t nk,
                                                        int64_t hd) {
    if (kv == KRT_AT_Q8)
        krt_at_stage_kq8_avx512(kt, dk, K, nk, hd);
    else
        krt_at_stage_kt_avx512(kv, kt, K, nk, hd);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_at_scores_avx512(int kv, float *S, const float *const *qrow, const float *qx,
                                                       const float *qd, const int32_t *qsum, int64_t ra, const int R,
                                                       const float *kt, const float *dk, int64_t hd, int64_t hdp,
                                                       float scale, krt_at_pf *pf) {
    if (kv == KRT_AT_Q8)
        krt_at_scores_q8_avx512(S, (const float *)((const int8_t *)qx + ra * hdp), qd + ra * 8, qsum + ra * 8, R, kt, dk,
                                hd, hdp, scale, pf);
    else
        krt_at_scores_f32_avx512(S, qrow, R, kt, hd, scale, pf);
}

/* Inner-loop iterations (prefetch slots) of one row block's scores + P*V over nj keys. */
#define KRT_AT_PF_SLOTS_AVX512(kv, hd, nj) (((kv) == KRT_AT_Q8 ? (hd) / 4 : (hd)) + ((hd) + 63) / 64 * (nj))

/* Dispatch on the row count so that every register block has a compile-time R. */
#define KRT_AT_SWITCH_R4(R, CALL) \
    switch (R) {                  \
    case 1: CALL(1); break;       \
    case 2: CALL(2); break;       \
    case 3: CALL(3); break;       \
    default: CALL(4); break;      \
    }

/* tanh of 16 lanes (krt_at_tanh_ref's formula; FMA instead of separate rounding), and the
 * soft-cap of R score rows of one key block: S = c * tanh(S * (1/c)). */
KRT_TARGET_AVX512 KRT_INLINE __m512 krt_at_tanh_avx512(__m512 x) {
    const __m512 sgn = _mm512_set1_ps(-0.0f);
    const __m512 ax = _mm512_andnot_ps(sgn, x);
    const __m512 z = _mm512_mul_ps(x, x);
    __m512 p = _mm512_set1_ps(KRT_AT_TANH_C0);
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(KRT_AT_TANH_C1));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(KRT_AT_TANH_C2));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(KRT_AT_TANH_C3));
    p = _mm512_fmadd_ps(p, z, _mm512_set1_ps(KRT_AT_TANH_C4));
    p = _mm512_fmadd_ps(_mm512_mul_ps(p, z), x, x);
    const __m512 e = krt_expf_ieee_avx512(_mm512_add_ps(ax, ax));
    __m512 t = _mm512_sub_ps(_mm512_set1_ps(1.0f), _mm512_div_ps(_mm512_set1_ps(2.0f), _mm512_add_ps(e, _mm512_set1_ps(1.0f))));
    t = _mm512_or_ps(t, _mm512_and_ps(x, sgn));
    const __mmask16 small = _mm512_cmp_ps_mask(ax, _mm512_set1_ps(KRT_AT_TANH_SMALL), _CMP_LT_OQ); /* NaN: large */
    return _mm512_mask_mov_ps(t, small, p);
}

KRT_TARGET_AVX512 KRT_INLINE void krt_at_softcap_avx512(float *S, const int R, float cap) {
    const __m512 c = _mm512_set1_ps(cap), ic = _mm512_set1_ps(1.0f / cap);
    for (int64_t i = 0; i < (int64_t)R * KB; i += 16)
        _mm512_storeu_ps(S + i, _mm512_mul_ps(c, krt_at_tanh_avx512(_mm512_mul_ps(_mm512_loadu_ps(S + i), ic))));
}

#define KRT_AV(name) name##_avx512
#define KRT_AV_TARGET KRT_TARGET_AVX512
#define KRT_AV_RB KRT_AT_RB_AVX512
#define KRT_AV_SWITCH_R KRT_AT_SWITCH_R4
#define KRT_AV_PF_SLOTS KRT_AT_PF_SLOTS_AVX512
#include "attention_driver.inc"
#undef KRT_AV
#undef KRT_AV_TARGET
#undef KRT_AV_RB
#undef KRT_AV_SWITCH_R
#undef KRT_AV_PF_SLOTS

/* ------------------------------------------------------------------ AVX2 (8 lanes, 16 registers) */
#define KRT_AT_RB_AVX2 4 /* rows per register block: 4 rows x 2 ymm */

KRT_TARGET_AVX2 KRT_INLINE __m256i krt_at_mask8(int64_t k) {
    return _mm256_cmpgt_epi32(_mm256_set1_epi32((int32_t)(k > 8 ? 8 : k < 0 ? 0 : k)),
                              _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

/* In-place 8x8 transpose of r[0..7]. */
KRT_TARGET_AVX2 KRT_INLINE void krt_at_tr8_avx2(__m256 *r) {
    __m256 t[8], b[8];
    for (int p = 0; p < 4; p++) {
        t[2 * p] = _mm256_unpacklo_ps(r[2 * p], r[2 * p + 1]);
        t[2 * p + 1] = _mm256_unpackhi_ps(r[2 * p], r[2 * p + 1]);
    }
    for (int qd = 0; qd < 2; qd++) { /* b[4q + k]: column 4L+k of rows 4q..4q+3 in lane L */
        b[4 * qd + 0] = _mm256_shuffle_ps(t[4 * qd], t[4 * qd + 2], _MM_SHUFFLE(1, 0, 1, 0));
        b[4 * qd + 1] = _mm256_shuffle_ps(t[4 * qd], t[4 * qd + 2], _MM_SHUFFLE(3, 2, 3, 2));
        b[4 * qd + 2] = _mm256_shuffle_ps(t[4 * qd + 1], t[4 * qd + 3], _MM_SHUFFLE(1, 0, 1, 0));
        b[4 * qd + 3] = _mm256_shuffle_ps(t[4 * qd + 1], t[4 * qd + 3], _MM_SHUFFLE(3, 2, 3, 2));
    }
    for (int k = 0; k < 4; k++) {
        r[k] = _mm256_permute2f128_ps(b[k], b[4 + k], 0x20);
        r[4 + k] = _mm256_permute2f128_ps(b[k], b[4 + k], 0x31);
    }
}

/* 8 floats of a row, dims [d, d + 8), zeros past hd: F32, F16, or the int8 quants of Q8_0. */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_at_load8_avx2(int kv, const void *row, int64_t d, int64_t hd) {
    if (kv == KRT_AT_F32) return _mm256_maskload_ps((const float *)row + d, krt_at_mask8(hd - d));
    if (kv == KRT_AT_F16) {
        if (hd - d >= 8) return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)row + d)));
        uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
        for (int64_t i = 0; i < hd - d; i++) tmp[i] = ((const uint16_t *)row)[d + i];
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
    }
    const krt_block_q8_0 *b = (const krt_block_q8_0 *)row + d / KRT_QK;
    return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + d % KRT_QK))));
}

/* kt[d * KB + j] = K_j[d] (Q8_0: the int8 quant as float) and, for Q8_0, dk[b * KB + j]. */
KRT_TARGET_AVX2 KRT_INLINE void krt_at_stage_k_avx2(int kv, float *kt, float *dk, const void *K, int64_t nk, int64_t hd) {
    for (int64_t jg = 0; jg < KB; jg += 8) {
        for (int64_t d0 = 0; d0 < hd; d0 += 8) {
            __m256 r[8];
            for (int i = 0; i < 8; i++)
                r[i] = jg + i < nk ? krt_at_load8_avx2(kv, krt_at_row_ptr(kv, K, jg + i, hd), d0, hd) : _mm256_setzero_ps();
            krt_at_tr8_avx2(r);
            const int64_t nd = hd - d0 < 8 ? hd - d0 : 8;
            for (int64_t i = 0; i < nd; i++) _mm256_storeu_ps(kt + (d0 + i) * KB + jg, r[i]);
        }
    }
    if (kv == KRT_AT_Q8) {
        const int64_t nb = hd / KRT_QK;
        for (int64_t j = 0; j < KB; j++)
            for (int64_t b = 0; b < nb; b++)
                dk[b * KB + j] = j < nk ? _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(((const krt_block_q8_0 *)K)[j * nb + b].d))) : 0.0f;
    }
}

/* vt[j * hd + d] = V_j[d] widened, j < nk (F16 or Q8_0). */
KRT_TARGET_AVX2 KRT_INLINE void krt_at_stage_v_avx2(int kv, float *vt, const void *V, int64_t nk, int64_t hd) {
    for (int64_t j = 0; j < nk; j++) {
        float *o = vt + j * hd;
        if (kv == KRT_AT_F16) {
            const uint16_t *v = (const uint16_t *)V + j * hd;
            for (int64_t d = 0; d < hd; d += 8) _mm256_storeu_ps(o + d, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(v + d))));
        } else {
            const krt_block_q8_0 *b = (const krt_block_q8_0 *)V + j * (hd / KRT_QK);
            for (int64_t bi = 0; bi < hd / KRT_QK; bi++) {
                const __m256 dv = _mm256_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(b[bi].d))));
                for (int k = 0; k < 4; k++) {
                    __m256 x = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b[bi].qs + 8 * k))));
                    _mm256_storeu_ps(o + bi * 32 + 8 * k, _mm256_mul_ps(dv, x));
                }
            }
        }
    }
}

/* Q8_0 query rows: qx (the int8 quants as floats, row stride hdp), qd[r * 8 + b]. */
KRT_TARGET_AVX2 KRT_INLINE void krt_at_prep_q8_avx2(float *qx, float *qd, int32_t *qsum, const float *const *qrow,
                                                    int64_t nr, int64_t hd, int64_t hdp) {
    (void)qsum;
    for (int64_t r = 0; r < nr; r++) {
        for (int64_t b = 0; b < hd / KRT_QK; b++) {
            krt_block_q8_0 blk;
            krt_qz_q8_0_avx2(&blk, qrow[r] + b * KRT_QK);
            for (int k = 0; k < 4; k++)
                _mm256_storeu_ps(qx + r * hdp + b * KRT_QK + 8 * k,
                                 _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(blk.qs + 8 * k)))));
            qd[r * 8 + b] = _mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(blk.d)));
        }
    }
}

/* Dot products of R rows with 16 keys over dims [d0, d1) of the transposed tile. */
#define KRT_AT_DOT16_AVX2(R, qrow, kt, jg, d0, d1, acc, pf)                         \
    do {                                                                            \
        for (int r_ = 0; r_ < (R); r_++) acc[r_][0] = acc[r_][1] = _mm256_setzero_ps(); \
        for (int64_t d_ = (d0); d_ < (d1); d_++) {                                  \
            krt_at_pf_step(pf);                                                     \
            const __m256 k0_ = _mm256_loadu_ps((kt) + d_ * KB + (jg));              \
            const __m256 k1_ = _mm256_loadu_ps((kt) + d_ * KB + (jg) + 8);          \
            for (int r_ = 0; r_ < (R); r_++) {                                      \
                const __m256 qb_ = _mm256_broadcast_ss((qrow)[r_] + d_);            \
                acc[r_][0] = _mm256_fmadd_ps(qb_, k0_, acc[r_][0]);                 \
                acc[r_][1] = _mm256_fmadd_ps(qb_, k1_, acc[r_][1]);                 \
            }                                                                       \
        }                                                                           \
    } while (0)

/* S[r * KB + j] = scale * dot(q_r, K_j), R rows, all KB keys, 16 keys at a time. */
KRT_TARGET_AVX2 KRT_INLINE void krt_at_scores_f32_avx2(float *S, const float *const *qrow, const int R, const float *kt,
                                                       int64_t hd, float scale, krt_at_pf *pf) {
    const __m256 vs = _mm256_set1_ps(scale);
    for (int64_t jg = 0; jg < KB; jg += 16) {
        __m256 acc[KRT_AT_RB_AVX2][2];
        KRT_AT_DOT16_AVX2(R, qrow, kt, jg, 0, hd, acc, pf);
        for (int r = 0; r < R; r++) {
            _mm256_storeu_ps(S + r * KB + jg, _mm256_mul_ps(acc[r][0], vs));
            _mm256_storeu_ps(S + r * KB + jg + 8, _mm256_mul_ps(acc[r][1], vs));
        }
    }
}

/* Q8_0 scores without VNNI: the int8 quants held as floats, so each block's dot product is an
 * exact integer in float (|isum| <= 32*127*127 < 2^24), then scaled as in _ref. */
KRT_TARGET_AVX2 KRT_INLINE void krt_at_scores_q8_avx2(float *S, const float *qx, const float *qd, const int R,
                                                      const float *kt, const float *dk, int64_t hd, int64_t hdp,
                                                      float scale, krt_at_pf *pf) {
    const __m256 vs = _mm256_set1_ps(scale);
    const float *qrow[KRT_AT_RB_AVX2];
    for (int r = 0; r < R; r++) qrow[r] = qx + r * hdp;
    for (int64_t jg = 0; jg < KB; jg += 16) {
        __m256 s[KRT_AT_RB_AVX2][2];
        for (int r = 0; r < R; r++) s[r][0] = s[r][1] = _mm256_setzero_ps();
        for (int64_t b = 0; b < hd / KRT_QK; b++) {
            __m256 acc[KRT_AT_RB_AVX2][2];
            KRT_AT_DOT16_AVX2(R, qrow, kt, jg, b * KRT_QK, (b + 1) * KRT_QK, acc, pf);
            for (int r = 0; r < R; r++) {
                const __m256 dq = _mm256_set1_ps(qd[r * 8 + b]);
                for (int v = 0; v < 2; v++) {
                    __m256 t = _mm256_mul_ps(_mm256_mul_ps(dq, _mm256_loadu_ps(dk + b * KB + jg + 8 * v)), acc[r][v]);
                    s[r][v] = _mm256_add_ps(s[r][v], t);
                }
            }
        }
        for (int r = 0; r < R; r++) {
            _mm256_storeu_ps(S + r * KB + jg, _mm256_mul_ps(s[r][0], vs));
            _mm256_storeu_ps(S + r * KB + jg + 8, _mm256_mul_ps(s[r][1], vs));
        }
    }
}

KRT_TARGET_AVX2 KRT_INLINE float krt_at_hmax_avx2(__m256 v) {
    __m128 s = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_max_ps(s, _mm_movehl_ps(s, s));
    s = _mm_max_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

KRT_TARGET_AVX2 KRT_INLINE float krt_at_hsum_avx2(__m256 v) {
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Streaming-softmax step (see krt_at_softmax_step_avx512). */
KRT_TARGET_AVX2 KRT_INLINE float krt_at_softmax_step_avx2(float *s, int64_t n, float *m) {
    __m256 vmax = _mm256_set1_ps(KRT_ATTN_NEG_BIG);
    for (int v = 0; v < 8; v++) {
        const __m256 mk = _mm256_castsi256_ps(krt_at_mask8(n - v * 8));
        vmax = _mm256_max_ps(vmax, _mm256_blendv_ps(_mm256_set1_ps(KRT_ATTN_NEG_BIG), _mm256_loadu_ps(s + v * 8), mk));
    }
    const float bm = krt_at_hmax_avx2(vmax);
    const float mn = bm > *m ? bm : *m;
    const __m256 vm = _mm256_set1_ps(mn);
    __m256 vsum = _mm256_setzero_ps();
    for (int v = 0; v < 8; v++) {
        __m256 e = krt_expf_ieee_avx2(_mm256_sub_ps(_mm256_loadu_ps(s + v * 8), vm));
        e = _mm256_and_ps(e, _mm256_castsi256_ps(krt_at_mask8(n - v * 8)));
        _mm256_storeu_ps(s + v * 8, e);
        vsum = _mm256_add_ps(vsum, e);
    }
    *m = mn;
    return krt_at_hsum_avx2(vsum);
}

/* P * V for R rows (see krt_at_pv_avx512), 16 output dims at a time. */
/* 8 floats of V at element offset off: F16 rows widened (vh) or floats; masked (m) variant. */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_at_ldv_avx2(const int vh, const void *V, int64_t off) {
    return vh ? _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)((const uint16_t *)V + off)))
              : _mm256_loadu_ps((const float *)V + off);
}
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_at_ldvm_avx2(const int vh, __m256i m, int64_t left, const void *V, int64_t off) {
    if (!vh) return _mm256_maskload_ps((const float *)V + off, m);
    if (left >= 8) return krt_at_ldv_avx2(1, V, off);
    uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (int64_t i = 0; i < left; i++) tmp[i] = ((const uint16_t *)V)[off + i];
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
}

KRT_TARGET_AVX2 KRT_INLINE void krt_at_pv_avx2(float *const *orow, const float *P, const int R, const int vh,
                                               const void *V, int64_t nj, int64_t hd, const float *corr,
                                               const int *first, krt_at_pf *pf) {
    for (int64_t d0 = 0; d0 < hd; d0 += 16) {
        const __m256i m0 = krt_at_mask8(hd - d0), m1 = krt_at_mask8(hd - d0 - 8);
        __m256 acc[KRT_AT_RB_AVX2][2];
        for (int r = 0; r < R; r++) {
            const __m256 c = _mm256_set1_ps(corr[r]);
            acc[r][0] = first[r] ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_maskload_ps(orow[r] + d0, m0), c);
            acc[r][1] = first[r] ? _mm256_setzero_ps() : _mm256_mul_ps(_mm256_maskload_ps(orow[r] + d0 + 8, m1), c);
        }
        if (hd - d0 >= 16) {
            for (int64_t j = 0; j < nj; j++) {
                krt_at_pf_step(pf);
                const __m256 v0 = krt_at_ldv_avx2(vh, V, j * hd + d0), v1 = krt_at_ldv_avx2(vh, V, j * hd + d0 + 8);
                for (int r = 0; r < R; r++) {
                    const __m256 w = _mm256_broadcast_ss(P + r * KB + j);
                    acc[r][0] = _mm256_fmadd_ps(w, v0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(w, v1, acc[r][1]);
                }
            }
        } else {
            for (int64_t j = 0; j < nj; j++) {
                krt_at_pf_step(pf);
                const __m256 v0 = krt_at_ldvm_avx2(vh, m0, hd - d0, V, j * hd + d0);
                const __m256 v1 = krt_at_ldvm_avx2(vh, m1, hd - d0 - 8, V, j * hd + d0 + 8);
                for (int r = 0; r < R; r++) {
                    const __m256 w = _mm256_broadcast_ss(P + r * KB + j);
                    acc[r][0] = _mm256_fmadd_ps(w, v0, acc[r][0]);
                    acc[r][1] = _mm256_fmadd_ps(w, v1, acc[r][1]);
                }
            }
        }
        for (int r = 0; r < R; r++) {
            _mm256_maskstore_ps(orow[r] + d0, m0, acc[r][0]);
            _mm256_maskstore_ps(orow[r] + d0 + 8, m1, acc[r][1]);
        }
    }
}

KRT_TARGET_AVX2 KRT_INLINE void krt_at_pv_tail_avx2(float *o, const float *p, const int vh, const void *V, int64_t j0,
                                                    int64_t j1, int64_t hd) {
    for (int64_t d = 0; d < hd; d += 8) {
        const __m256i mk = krt_at_mask8(hd - d);
        __m256 a = _mm256_maskload_ps(o + d, mk);
        for (int64_t j = j0; j < j1; j++)
            a = _mm256_fmadd_ps(_mm256_broadcast_ss(p + j), krt_at_ldvm_avx2(vh, mk, hd - d, V, j * hd + d), a);
        _mm256_maskstore_ps(o + d, mk, a);
    }
}

KRT_TARGET_AVX2 KRT_INLINE void krt_at_scale_avx2(float *o, int64_t hd, float f) {
    const __m256 vf = _mm256_set1_ps(f);
    for (int64_t d = 0; d < hd; d += 8) {
        const __m256i mk = krt_at_mask8(hd - d);
        _mm256_maskstore_ps(o + d, mk, _mm256_mul_ps(_mm256_maskload_ps(o + d, mk), vf));
    }
}

KRT_TARGET_AVX2 KRT_INLINE void krt_at_scores_avx2(int kv, float *S, const float *const *qrow, const float *qx,
                                                   const float *qd, const int32_t *qsum, int64_t ra, const int R,
                                                   const float *kt, const float *dk, int64_t hd, int64_t hdp,
                                                   float scale, krt_at_pf *pf) {
    (void)qsum;
    if (kv == KRT_AT_Q8)
        krt_at_scores_q8_avx2(S, qx + ra * hdp, qd + ra * 8, R, kt, dk, hd, hdp, scale, pf);
    else
        krt_at_scores_f32_avx2(S, qrow, R, kt, hd, scale, pf);
}

/* Inner-loop iterations (prefetch slots) of one row block's scores + P*V over nj keys. */
#define KRT_AT_PF_SLOTS_AVX2(kv, hd, nj) (4 * (hd) + ((hd) + 15) / 16 * (nj))

/* tanh of 8 lanes and the soft-cap of R score rows (see krt_at_tanh_avx512). */
KRT_TARGET_AVX2 KRT_INLINE __m256 krt_at_tanh_avx2(__m256 x) {
    const __m256 sgn = _mm256_set1_ps(-0.0f);
    const __m256 ax = _mm256_andnot_ps(sgn, x);
    const __m256 z = _mm256_mul_ps(x, x);
    __m256 p = _mm256_set1_ps(KRT_AT_TANH_C0);
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(KRT_AT_TANH_C1));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(KRT_AT_TANH_C2));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(KRT_AT_TANH_C3));
    p = _mm256_fmadd_ps(p, z, _mm256_set1_ps(KRT_AT_TANH_C4));
    p = _mm256_fmadd_ps(_mm256_mul_ps(p, z), x, x);
    const __m256 e = krt_expf_ieee_avx2(_mm256_add_ps(ax, ax));
    __m256 t = _mm256_sub_ps(_mm256_set1_ps(1.0f), _mm256_div_ps(_mm256_set1_ps(2.0f), _mm256_add_ps(e, _mm256_set1_ps(1.0f))));
    t = _mm256_or_ps(t, _mm256_and_ps(x, sgn));
    const __m256 small = _mm256_cmp_ps(ax, _mm256_set1_ps(KRT_AT_TANH_SMALL), _CMP_LT_OQ); /* NaN: large */
    return _mm256_blendv_ps(t, p, small);
}

KRT_TARGET_AVX2 KRT_INLINE void krt_at_softcap_avx2(float *S, const int R, float cap) {
    const __m256 c = _mm256_set1_ps(cap), ic = _mm256_set1_ps(1.0f / cap);
    for (int64_t i = 0; i < (int64_t)R * KB; i += 8)
        _mm256_storeu_ps(S + i, _mm256_mul_ps(c, krt_at_tanh_avx2(_mm256_mul_ps(_mm256_loadu_ps(S + i), ic))));
}

#define KRT_AV(name) name##_avx2
#define KRT_AV_TARGET KRT_TARGET_AVX2
#define KRT_AV_RB KRT_AT_RB_AVX2
#define KRT_AV_SWITCH_R KRT_AT_SWITCH_R4
#define KRT_AV_PF_SLOTS KRT_AT_PF_SLOTS_AVX2
#include "attention_driver.inc"
#undef KRT_AV
#undef KRT_AV_TARGET
#undef KRT_AV_RB
#undef KRT_AV_SWITCH_R
#undef KRT_AV_PF_SLOTS

#undef KB

#else /* !KRT_X86: the SIMD names still exist so the API links everywhere. */

#define KRT_AT_FALLBACK(sfx)                                                                                          \
    void krt_attn_decode_f32_##sfx(float *out, float *part, const float *q, const float *kc, const float *vc,         \
                                   float *scratch, const float *sc, int64_t heads, int64_t hd, int64_t mc, int64_t n,        \
                                   int64_t ch, int64_t u0, int64_t u1) {                                               \
        krt_attn_decode_f32_ref(out, part, q, kc, vc, scratch, sc, heads, hd, mc, n, ch, u0, u1);                       \
    }                                                                                                                 \
    void krt_attn_decode_f16_##sfx(float *out, float *part, const float *q, const uint16_t *kc, const uint16_t *vc,   \
                                   float *scratch, const float *sc, int64_t heads, int64_t hd, int64_t mc, int64_t n,        \
                                   int64_t ch, int64_t u0, int64_t u1) {                                               \
        krt_attn_decode_f16_ref(out, part, q, kc, vc, scratch, sc, heads, hd, mc, n, ch, u0, u1);                       \
    }                                                                                                                 \
    void krt_attn_decode_q8_0_##sfx(float *out, float *part, const float *q, const krt_block_q8_0 *kc,                \
                                    const krt_block_q8_0 *vc, float *scratch, const float *sc, int64_t heads, int64_t hd,    \
                                    int64_t mc, int64_t n, int64_t ch, int64_t u0, int64_t u1) {                      \
        krt_attn_decode_q8_0_ref(out, part, q, kc, vc, scratch, sc, heads, hd, mc, n, ch, u0, u1);                      \
    }                                                                                                                 \
    void krt_attn_merge_##sfx(float *out, const float *part, int64_t nh, int64_t hd, int64_t nch, int64_t h0,         \
                              int64_t h1) {                                                                           \
        krt_attn_merge_ref(out, part, nh, hd, nch, h0, h1);                                                           \
    }                                                                                                                 \
    void krt_attn_prefill_f32_##sfx(float *out, const float *q, const float *kc, const float *vc, float *scratch, const float *sc,     \
                                    int64_t heads, int64_t hd, int64_t mc, int64_t qs, int64_t p0,          \
                                    int64_t T, int64_t u0, int64_t u1) {                                              \
        krt_attn_prefill_f32_ref(out, q, kc, vc, scratch, sc, heads, hd, mc, qs, p0, T, u0, u1);                        \
    }                                                                                                                 \
    void krt_attn_prefill_f16_##sfx(float *out, const float *q, const uint16_t *kc, const uint16_t *vc,               \
                                    float *scratch, const float *sc, int64_t heads, int64_t hd, int64_t mc, int64_t qs,      \
                                    int64_t p0, int64_t T, int64_t u0, int64_t u1) {                                  \
        krt_attn_prefill_f16_ref(out, q, kc, vc, scratch, sc, heads, hd, mc, qs, p0, T, u0, u1);                        \
    }                                                                                                                 \
    void krt_attn_prefill_q8_0_##sfx(float *out, const float *q, const krt_block_q8_0 *kc, const krt_block_q8_0 *vc, \
                                     float *scratch, const float *sc, int64_t heads, int64_t hd, int64_t mc, int64_t qs,     \
                                     int64_t p0, int64_t T, int64_t u0, int64_t u1) {                                 \
        krt_attn_prefill_q8_0_ref(out, q, kc, vc, scratch, sc, heads, hd, mc, qs, p0, T, u0, u1);                       \
    }                                                                                                                 \
    void krt_attention_##sfx(float *out, const float *q, const float *kc, const float *vc, float *scratch,            \
                             int64_t nh, int64_t nkv, int64_t hd, int64_t mc, int64_t qs, int64_t p0, int64_t T,      \
                             int64_t h0, int64_t h1) {                                                                \
        krt_attention_ref(out, q, kc, vc, scratch, nh, nkv, hd, mc, qs, p0, T, h0, h1);                               \
    }
KRT_AT_FALLBACK(avx2)
KRT_AT_FALLBACK(avx512)

#endif /* KRT_X86 */
