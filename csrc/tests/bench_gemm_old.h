/* csrc/tests/bench_gemm_old.h - renames the GEMM entry points to krt_gemm_old_* so that an older
 * csrc/gemm.c can be linked beside the current one (force-included with -include when compiling
 * the old file; see csrc/tests/bench_gemm_dram.c). */
#define krt_gemm_q8_0_ref krt_gemm_old_q8_0_ref
#define krt_gemm_q8_0_avx2 krt_gemm_old_q8_0_avx2
#define krt_gemm_q8_0_avx512 krt_gemm_old_q8_0_avx512
#define krt_gemm_q5_0_ref krt_gemm_old_q5_0_ref
#define krt_gemm_q5_0_avx2 krt_gemm_old_q5_0_avx2
#define krt_gemm_q5_0_avx512 krt_gemm_old_q5_0_avx512
#define krt_gemm_q4_0_ref krt_gemm_old_q4_0_ref
#define krt_gemm_q4_0_avx2 krt_gemm_old_q4_0_avx2
#define krt_gemm_q4_0_avx512 krt_gemm_old_q4_0_avx512
#define krt_gemm_q5_1_ref krt_gemm_old_q5_1_ref
#define krt_gemm_q5_1_avx2 krt_gemm_old_q5_1_avx2
#define krt_gemm_q5_1_avx512 krt_gemm_old_q5_1_avx512
#define krt_gemm_q4_K_ref krt_gemm_old_q4_K_ref
#define krt_gemm_q4_K_avx2 krt_gemm_old_q4_K_avx2
#define krt_gemm_q4_K_avx512 krt_gemm_old_q4_K_avx512
#define krt_gemm_q5_K_ref krt_gemm_old_q5_K_ref
#define krt_gemm_q5_K_avx2 krt_gemm_old_q5_K_avx2
#define krt_gemm_q5_K_avx512 krt_gemm_old_q5_K_avx512
#define krt_gemm_q6_K_ref krt_gemm_old_q6_K_ref
#define krt_gemm_q6_K_avx2 krt_gemm_old_q6_K_avx2
#define krt_gemm_q6_K_avx512 krt_gemm_old_q6_K_avx512
