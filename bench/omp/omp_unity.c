//go:build cgo && amd64

#define _GNU_SOURCE /* sched_setaffinity, before any system header */
/* The OpenMP peer: our own C GEMV kernels (a private copy, compiled here with -fopenmp) run
 * under `#pragma omp parallel for` over row chunks, as an OpenMP runtime would split them.
 *
 * The kernelrt binary also links internal/ckernels, which defines the same krt_* symbols, so
 * every external symbol of quant.c and gemv.c is renamed to kbomp_* before inclusion (the
 * KRT_DECLARE token pastes in kernelrt.h are rescanned, so the declarations follow).
 * rename_test.go fails if csrc gains an external function missing from this list. */
#define krt_quantize_q8_0_ref kbomp_quantize_q8_0_ref
#define krt_quantize_q8_0_avx2 kbomp_quantize_q8_0_avx2
#define krt_quantize_q8_0_avx512 kbomp_quantize_q8_0_avx512
#define krt_quantize_q5_0_ref kbomp_quantize_q5_0_ref
#define krt_quantize_q5_0_avx2 kbomp_quantize_q5_0_avx2
#define krt_quantize_q5_0_avx512 kbomp_quantize_q5_0_avx512
#define krt_dequantize_q8_0_ref kbomp_dequantize_q8_0_ref
#define krt_dequantize_q8_0_avx2 kbomp_dequantize_q8_0_avx2
#define krt_dequantize_q8_0_avx512 kbomp_dequantize_q8_0_avx512
#define krt_dequantize_q5_0_ref kbomp_dequantize_q5_0_ref
#define krt_dequantize_q5_0_avx2 kbomp_dequantize_q5_0_avx2
#define krt_dequantize_q5_0_avx512 kbomp_dequantize_q5_0_avx512
#define krt_gemv_q8_0_ref kbomp_gemv_q8_0_ref
#define krt_gemv_q8_0_avx2 kbomp_gemv_q8_0_avx2
#define krt_gemv_q8_0_avx512 kbomp_gemv_q8_0_avx512
#define krt_gemv_q5_0_ref kbomp_gemv_q5_0_ref
#define krt_gemv_q5_0_avx2 kbomp_gemv_q5_0_avx2
#define krt_gemv_q5_0_avx512 kbomp_gemv_q5_0_avx512
#define krt_gemv_q8_0_f32_ref kbomp_gemv_q8_0_f32_ref
#define krt_gemv_q8_0_f32_avx2 kbomp_gemv_q8_0_f32_avx2
#define krt_gemv_q8_0_f32_avx512 kbomp_gemv_q8_0_f32_avx512
#define krt_gemv_q5_0_f32_ref kbomp_gemv_q5_0_f32_ref
#define krt_gemv_q5_0_f32_avx2 kbomp_gemv_q5_0_f32_avx2
#define krt_gemv_q5_0_f32_avx512 kbomp_gemv_q5_0_f32_avx512
#define krt_gemv_f32_ref kbomp_gemv_f32_ref
#define krt_gemv_f32_avx2 kbomp_gemv_f32_avx2
#define krt_gemv_f32_avx512 kbomp_gemv_f32_avx512

#include "../../csrc/quant.c"
#include "../../csrc/gemv.c"

#include <omp.h>
#include <sched.h>
#include "omp_peer.h"

typedef void (*kbomp_q8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t,
                            int64_t, int64_t);
typedef void (*kbomp_q5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t,
                            int64_t, int64_t);

static const kbomp_q8_fn kbomp_q8[3] = {kbomp_gemv_q8_0_ref, kbomp_gemv_q8_0_avx2, kbomp_gemv_q8_0_avx512};
static const kbomp_q5_fn kbomp_q5[3] = {kbomp_gemv_q5_0_ref, kbomp_gemv_q5_0_avx2, kbomp_gemv_q5_0_avx512};

void kbomp_set_threads(int n) { omp_set_num_threads(n); }

int kbomp_max_threads(void) { return omp_get_max_threads(); }

/* An empty parallel region of n threads: makes libgomp create the calling thread's team. */
void kbomp_warm(int n) {
    volatile int sink = 0;
#pragma omp parallel num_threads(n)
    { sink = omp_get_thread_num(); }
    (void)sink;
}

/* Pins thread i of an n-thread team to cpus[i] (the team threads keep it across regions). */
int kbomp_pin(const int *cpus, int n) {
    int fails = 0;
#pragma omp parallel num_threads(n) reduction(+ : fails)
    {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(cpus[omp_get_thread_num()], &set);
        if (sched_setaffinity(0, sizeof set, &set) != 0) fails++;
    }
    return fails;
}

/* Rows [0, rows) in chunks of `chunk` rows, spread over the team with a static schedule. */
void kbomp_gemv(int q5, int variant, float *y, const void *w, const void *x, int64_t rows, int64_t cols,
                int64_t chunk) {
    int64_t n = (rows + chunk - 1) / chunk;
    const krt_block_q8_0 *xq = (const krt_block_q8_0 *)x;
    if (q5) {
        kbomp_q5_fn f = kbomp_q5[variant];
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < n; c++) {
            int64_t r0 = c * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
            f(y, (const krt_block_q5_0 *)w, xq, 0, cols, r0, r1);
        }
    } else {
        kbomp_q8_fn f = kbomp_q8[variant];
#pragma omp parallel for schedule(static)
        for (int64_t c = 0; c < n; c++) {
            int64_t r0 = c * chunk, r1 = r0 + chunk < rows ? r0 + chunk : rows;
            f(y, (const krt_block_q8_0 *)w, xq, 0, cols, r0, r1);
        }
    }
}
