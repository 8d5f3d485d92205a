/* csrc/gemv_k.c - GEMV for decode of Q4_0 and Q5_1 (x: Q8_0) and Q4_K, Q5_K, Q6_K (x: Q8_K),
 * slice rows r0..r1.
 *
 * Rules (see kernelrt.h): C11; no malloc, no threads, no OpenMP, no global mutable state, no libm
 * calls and no calls out of a function (helpers are static inline) so that c2goasm can translate
 * the object code. Three variants per kernel: _ref (scalar, the definition in krt_kdot.h),
 * _avx2 (KRT_TARGET_AVX2), _avx512 (KRT_TARGET_AVX512, VNNI). Helpers are prefixed krt_gk_.
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
/* Placeholders until the SIMD kernels land: the scalar definition compiled for each ISA. */
#define KRT_GK_PLACEHOLDER(T, XT, QK, V, TARGET)                                                        \
    TARGET void krt_gemv_##T##_##V(float *y, const krt_block_##T *w, const krt_block_##XT *x, const float *bias, \
                                   int64_t cols, int64_t r0, int64_t r1) {                           \
        const int64_t nb = cols / (QK);                                                              \
        for (int64_t r = r0; r < r1; r++) {                                                          \
            float acc = krt_kd_##T(w + r * nb, x, nb);                                               \
            y[r] = bias ? acc + bias[r] : acc;                                                       \
        }                                                                                            \
    }
KRT_GK_PLACEHOLDER(q4_0, q8_0, KRT_QK, avx2, KRT_TARGET_AVX2)
KRT_GK_PLACEHOLDER(q5_1, q8_0, KRT_QK, avx2, KRT_TARGET_AVX2)
KRT_GK_PLACEHOLDER(q4_K, q8_K, KRT_QK_K, avx2, KRT_TARGET_AVX2)
KRT_GK_PLACEHOLDER(q5_K, q8_K, KRT_QK_K, avx2, KRT_TARGET_AVX2)
KRT_GK_PLACEHOLDER(q6_K, q8_K, KRT_QK_K, avx2, KRT_TARGET_AVX2)
KRT_GK_PLACEHOLDER(q4_K, q8_K, KRT_QK_K, avx512, KRT_TARGET_AVX512)
KRT_GK_PLACEHOLDER(q5_K, q8_K, KRT_QK_K, avx512, KRT_TARGET_AVX512)
KRT_GK_PLACEHOLDER(q6_K, q8_K, KRT_QK_K, avx512, KRT_TARGET_AVX512)
#undef KRT_GK_PLACEHOLDER

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
#endif
