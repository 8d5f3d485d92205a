/* csrc/embed.c - token embedding lookup from a Q8_0 table (slice: tokens t0..t1).
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state,
 * no libm calls and no calls out of a function (helpers are static inline) so that c2goasm
 * can translate the object code. Three variants: _ref (scalar), _avx2 (KRT_TARGET_AVX2, fp16
 * scale via F16C), _avx512 (KRT_TARGET_AVX512). A call writes only out[t0*dim .. t1*dim) and
 * reads only table rows ids[t0..t1) (the Go side has checked every id against the vocabulary).
 *
 * out[t*dim + 32b + j] = fp32(table[ids[t]*dim/32 + b].d) * qs[j]: exactly ggml's
 * dequantize_row_q8_0 (one float multiply per element, so the variants are bit-identical for every non-NaN scale).
 * NaN / Inf (every variant): a NaN scale gives 32 NaNs (NaN * 0 included); an infinite scale
 * gives +-Inf, and NaN where the quant is 0 (Inf * 0), as IEEE does (csrc/tests/test_nan.c).
 */
#include "krt_common.h"

void krt_embed_q8_0_ref(float *out, const krt_block_q8_0 *table, const int32_t *ids, int64_t dim,
                        int64_t t0, int64_t t1) {
    const int64_t nb = dim / KRT_QK;
    for (int64_t t = t0; t < t1; t++) {
        const krt_block_q8_0 *row = table + (int64_t)ids[t] * nb;
        float *o = out + t * dim;
        for (int64_t b = 0; b < nb; b++) {
            const float d = krt_fp16_to_fp32(row[b].d);
            for (int j = 0; j < KRT_QK; j++) o[b * KRT_QK + j] = d * (float)row[b].qs[j];
        }
    }
}

#ifdef KRT_X86

KRT_TARGET_AVX2 void krt_embed_q8_0_avx2(float *out, const krt_block_q8_0 *table, const int32_t *ids, int64_t dim,
                                         int64_t t0, int64_t t1) {
    const int64_t nb = dim / KRT_QK;
    for (int64_t t = t0; t < t1; t++) {
        const krt_block_q8_0 *row = table + (int64_t)ids[t] * nb;
        float *o = out + t * dim;
        for (int64_t b = 0; b < nb; b++) {
            const __m256 d = _mm256_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(row[b].d))));
            const __m128i q0 = _mm_loadu_si128((const __m128i *)row[b].qs);
            const __m128i q1 = _mm_loadu_si128((const __m128i *)(row[b].qs + 16));
            float *ob = o + b * KRT_QK;
            _mm256_storeu_ps(ob, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q0))));
            _mm256_storeu_ps(ob + 8, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q0, 8)))));
            _mm256_storeu_ps(ob + 16, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(q1))));
            _mm256_storeu_ps(ob + 24, _mm256_mul_ps(d, _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_srli_si128(q1, 8)))));
        }
    }
}

KRT_TARGET_AVX512 void krt_embed_q8_0_avx512(float *out, const krt_block_q8_0 *table, const int32_t *ids, int64_t dim,
                                             int64_t t0, int64_t t1) {
    const int64_t nb = dim / KRT_QK;
    for (int64_t t = t0; t < t1; t++) {
        const krt_block_q8_0 *row = table + (int64_t)ids[t] * nb;
        float *o = out + t * dim;
        for (int64_t b = 0; b < nb; b++) {
            const __m512 d = _mm512_set1_ps(_mm_cvtss_f32(_mm_cvtph_ps(_mm_cvtsi32_si128(row[b].d))));
            const __m128i q0 = _mm_loadu_si128((const __m128i *)row[b].qs);
            const __m128i q1 = _mm_loadu_si128((const __m128i *)(row[b].qs + 16));
            float *ob = o + b * KRT_QK;
            _mm512_storeu_ps(ob, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q0))));
            _mm512_storeu_ps(ob + 16, _mm512_mul_ps(d, _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(q1))));
        }
    }
}

#else /* !KRT_X86: the SIMD names still exist so the API links everywhere. */

void krt_embed_q8_0_avx2(float *out, const krt_block_q8_0 *table, const int32_t *ids, int64_t dim, int64_t t0,
                         int64_t t1) {
    krt_embed_q8_0_ref(out, table, ids, dim, t0, t1);
}
void krt_embed_q8_0_avx512(float *out, const krt_block_q8_0 *table, const int32_t *ids, int64_t dim, int64_t t0,
                           int64_t t1) {
    krt_embed_q8_0_ref(out, table, ids, dim, t0, t1);
}

#endif /* KRT_X86 */
