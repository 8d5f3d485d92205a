/* csrc/tests/test_gemm.c - tests of krt_gemm_q8_0 / krt_gemm_q5_0 (all variants the CPU runs).
 *
 * Checks, for many shapes (T = 1..130 tokens, rows not a multiple of the tiles, slices r0..r1
 * not aligned to them, cols across the column-chunk boundary):
 *   - _ref against a double-precision reference: |y - ref| <= 1e-5 * sum_j |w_j x_j| (+ |bias|);
 *   - _avx2 and _avx512 bit-identical to _ref (the kernels share one operation order), including
 *     blocks holding -128, the int8 value the sign trick of other kernels gets wrong;
 *   - only y[t*rows + r] for r in [r0, r1) is written (sentinels elsewhere);
 *   - bias and no bias.
 * Standalone (no test framework): exit status 0 = pass. Build by hand with
 *   gcc -O2 -std=c11 -Icsrc csrc/tests/test_gemm.c csrc/gemm.c -o test_gemm
 * (or link against the library that CMake builds from csrc/).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cpuid.h>

#include "kernelrt.h"
#include "krt_common.h"

typedef void (*gemm_q8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t,
                           int64_t, int64_t, int64_t, int64_t);
typedef void (*gemm_q5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t,
                           int64_t, int64_t, int64_t, int64_t);

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 11);
}
/* uniform in [-1, 1) */
static float rndf(void) { return (float)(rnd() & 0xffffff) / 8388608.0f - 1.0f; }

/* A random fp16 scale in about [2^-8, 2^-4] (fp16 normal range, no Inf). */
static uint16_t rnd_scale(void) { return krt_fp32_to_fp16((0.5f + 0.5f * (rndf() + 1.0f)) * (1.0f / 64.0f)); }

static void fill_q8(krt_block_q8_0 *b, int64_t n, int extreme) {
    for (int64_t i = 0; i < n; i++) {
        b[i].d = rnd_scale();
        for (int j = 0; j < KRT_QK; j++) {
            b[i].qs[j] = (int8_t)(int32_t)(rnd() % 255u) - 127;
            if (extreme && (rnd() & 7u) == 0) b[i].qs[j] = (rnd() & 1u) ? -128 : 127;
        }
    }
}

static void fill_q5(krt_block_q5_0 *b, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        b[i].d = rnd_scale();
        uint32_t qh = rnd();
        memcpy(b[i].qh, &qh, 4);
        for (int j = 0; j < KRT_QK / 2; j++) b[i].qs[j] = (uint8_t)rnd();
    }
}

static int q5_val(const krt_block_q5_0 *b, int j) {
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    int lo = j < 16 ? (b->qs[j] & 0x0f) : (b->qs[j - 16] >> 4);
    return (lo | (int)((qh >> j) & 1u) << 4) - 16;
}

static int failures = 0;

#define SENTINEL (-12345.0f)

/* Checks y (slice r0..r1 of T x rows) against a double reference; wq(r,b,j) gives weights. */
static void check_ref(const char *what, const float *y, const void *w, int q5, const krt_block_q8_0 *x,
                      const float *bias, int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1) {
    const int64_t nb = cols / KRT_QK;
    for (int64_t t = 0; t < T; t++) {
        for (int64_t r = 0; r < rows; r++) {
            float got = y[t * rows + r];
            if (r < r0 || r >= r1) {
                if (got != SENTINEL) {
                    if (failures++ < 10) printf("FAIL %s: wrote outside slice t=%ld r=%ld\n", what, (long)t, (long)r);
                }
                continue;
            }
            double ref = 0, mag = 0;
            for (int64_t b = 0; b < nb; b++) {
                const krt_block_q8_0 *xb = &x[t * nb + b];
                double dw;
                double s = 0, m = 0;
                if (q5) {
                    const krt_block_q5_0 *wb = (const krt_block_q5_0 *)w + r * nb + b;
                    dw = krt_fp16_to_fp32(wb->d);
                    for (int j = 0; j < KRT_QK; j++) {
                        s += (double)q5_val(wb, j) * xb->qs[j];
                        m += abs(q5_val(wb, j) * xb->qs[j]);
                    }
                } else {
                    const krt_block_q8_0 *wb = (const krt_block_q8_0 *)w + r * nb + b;
                    dw = krt_fp16_to_fp32(wb->d);
                    for (int j = 0; j < KRT_QK; j++) {
                        s += (double)wb->qs[j] * xb->qs[j];
                        m += abs(wb->qs[j] * xb->qs[j]);
                    }
                }
                double d = dw * (double)krt_fp16_to_fp32(xb->d);
                ref += d * s;
                mag += d * m;
            }
            if (bias) {
                ref += bias[r];
                mag += bias[r] < 0 ? -bias[r] : bias[r];
            }
            double err = got - ref;
            if (err < 0) err = -err;
            if (err > 1e-5 * mag + 1e-30) {
                if (failures++ < 10)
                    printf("FAIL %s: t=%ld r=%ld got %.9g want %.9g (err %.3g, bound %.3g)\n", what, (long)t, (long)r,
                           got, ref, err, 1e-5 * mag);
            }
        }
    }
}

static int cpu_f16c(void) { /* clang 14's __builtin_cpu_supports has no "f16c" */
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c >> 29 & 1u);
}
static int cpu_avx2(void) {
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && cpu_f16c();
}
static int cpu_avx512(void) {
    return cpu_avx2() && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
           __builtin_cpu_supports("avx512vnni");
}

static void run_case(int q5, int64_t rows, int64_t cols, int64_t T, int64_t r0, int64_t r1, int with_bias, int extreme) {
    const int64_t nb = cols / KRT_QK;
    void *w = q5 ? malloc(sizeof(krt_block_q5_0) * rows * nb) : malloc(sizeof(krt_block_q8_0) * rows * nb);
    krt_block_q8_0 *x = malloc(sizeof(krt_block_q8_0) * T * nb);
    float *bias = with_bias ? malloc(sizeof(float) * rows) : NULL;
    float *yr = malloc(sizeof(float) * T * rows);
    float *yv = malloc(sizeof(float) * T * rows);
    if (q5) fill_q5(w, rows * nb);
    else fill_q8(w, rows * nb, extreme);
    fill_q8(x, T * nb, extreme);
    if (bias)
        for (int64_t r = 0; r < rows; r++) bias[r] = rndf();

    char what[160];
    const char *names[3] = {"ref", "avx2", "avx512"};
    gemm_q8_fn f8[3] = {krt_gemm_q8_0_ref, krt_gemm_q8_0_avx2, krt_gemm_q8_0_avx512};
    gemm_q5_fn f5[3] = {krt_gemm_q5_0_ref, krt_gemm_q5_0_avx2, krt_gemm_q5_0_avx512};
    int ok[3] = {1, cpu_avx2(), cpu_avx512()};

    for (int64_t i = 0; i < T * rows; i++) yr[i] = SENTINEL;
    if (q5) f5[0](yr, w, x, bias, rows, cols, T, r0, r1);
    else f8[0](yr, w, x, bias, rows, cols, T, r0, r1);
    snprintf(what, sizeof what, "%s ref rows=%ld cols=%ld T=%ld r=[%ld,%ld) bias=%d", q5 ? "q5_0" : "q8_0",
             (long)rows, (long)cols, (long)T, (long)r0, (long)r1, with_bias);
    check_ref(what, yr, w, q5, x, bias, rows, cols, T, r0, r1);

    for (int v = 1; v < 3; v++) {
        if (!ok[v]) continue;
        for (int64_t i = 0; i < T * rows; i++) yv[i] = SENTINEL;
        if (q5) f5[v](yv, w, x, bias, rows, cols, T, r0, r1);
        else f8[v](yv, w, x, bias, rows, cols, T, r0, r1);
        if (memcmp(yv, yr, sizeof(float) * T * rows) != 0) {
            for (int64_t i = 0; i < T * rows; i++) {
                if (memcmp(&yv[i], &yr[i], 4) != 0) {
                    if (failures++ < 10)
                        printf("FAIL %s %s rows=%ld cols=%ld T=%ld r=[%ld,%ld) bias=%d: y[t=%ld][r=%ld] = %.9g, ref %.9g\n",
                               q5 ? "q5_0" : "q8_0", names[v], (long)rows, (long)cols, (long)T, (long)r0, (long)r1,
                               with_bias, (long)(i / rows), (long)(i % rows), yv[i], yr[i]);
                    break;
                }
            }
        }
    }
    free(w);
    free(x);
    free(bias);
    free(yr);
    free(yv);
}

int main(void) {
    printf("test_gemm: avx2 %s, avx512+vnni %s\n", cpu_avx2() ? "yes" : "no (skipped)",
           cpu_avx512() ? "yes" : "no (skipped)");
    static const int64_t Ts[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 31, 33, 64, 129, 130};
    static const int64_t Rs[] = {1, 5, 16, 17, 31, 32, 33, 48, 70};
    static const int64_t Cs[] = {32, 64, 96, 256, 512, 544, 1056};
    int cases = 0;
    for (int q5 = 0; q5 < 2; q5++) {
        for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
            for (size_t ri = 0; ri < sizeof Rs / sizeof Rs[0]; ri++) {
                int64_t T = Ts[ti], rows = Rs[ri];
                int64_t cols = Cs[(ti + ri) % (sizeof Cs / sizeof Cs[0])];
                if (T > 64 && cols > 512) cols = 96;
                /* full range, then an unaligned interior slice */
                run_case(q5, rows, cols, T, 0, rows, (int)((ti + ri) & 1), (int)(ri & 1));
                int64_t r0 = rows / 3, r1 = rows - rows / 5;
                if (r1 > r0) run_case(q5, rows, cols, T, r0, r1, (int)((ti + ri + 1) & 1), 1);
                cases += 2;
            }
        }
    }
    /* model-like shape, a few tokens */
    run_case(0, 96, 896, 7, 16, 80, 1, 0);
    run_case(1, 96, 896, 7, 0, 96, 1, 0);
    run_case(0, 40, 4864, 5, 3, 40, 0, 1);
    run_case(1, 40, 4864, 5, 3, 40, 0, 0);
    /* the few-token streaming path (_avx512, T <= 16): several column chunks, one or two token
     * groups, partial last row vector */
    run_case(0, 40, 4864, 12, 3, 37, 1, 1);
    run_case(0, 23, 4864, 16, 0, 23, 0, 0);
    run_case(0, 19, 8224, 3, 1, 19, 1, 1);
    run_case(0, 19, 8224, 11, 0, 19, 0, 0);
    cases += 8;
    if (failures) {
        printf("test_gemm: %d failures in %d cases\n", failures, cases);
        return 1;
    }
    printf("test_gemm: %d cases OK\n", cases);
    return 0;
}
