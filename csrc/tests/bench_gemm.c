/* csrc/tests/bench_gemm.c - single-thread GMAC/s of krt_gemm_q8_0/q5_0 for the Qwen2-0.5B
 * shapes, T = 128, 7, 3, 2, 1, against T calls of the GEMV (when gemv.c provides it).
 * Not a ctest test (the name does not start with test_). Build by hand:
 *   gcc -O2 -std=c11 -Icsrc csrc/tests/bench_gemm.c csrc/gemm.c csrc/gemv.c csrc/quant.c -o bench_gemm
 *   ./bench_gemm [variant: avx512|avx2|ref] [min seconds per case, default 0.3] [new]
 * "new": instead, the GEMMs of Q4_0, Q5_1 (x: Q8_0) and Q4_K, Q5_K, Q6_K (x: Q8_K), plus Q8_0 for
 * reference, at T = 128 and 7.
 */
#define _POSIX_C_SOURCE 199309L
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernelrt.h"
#include "krt_common.h"

/* GEMV symbols are weak so that this bench links while gemv.c is still a placeholder. */
#define WEAK_GEMV(v)                                                                                          \
    void krt_gemv_q8_0_##v(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t,  \
                           int64_t, int64_t) __attribute__((weak));                                           \
    void krt_gemv_q5_0_##v(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t,  \
                           int64_t, int64_t) __attribute__((weak));
WEAK_GEMV(ref)
WEAK_GEMV(avx2)
WEAK_GEMV(avx512)

typedef void (*gemm_q8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t,
                           int64_t, int64_t, int64_t, int64_t);
typedef void (*gemm_q5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t,
                           int64_t, int64_t, int64_t, int64_t);
typedef void (*gemv_q8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t,
                           int64_t, int64_t);
typedef void (*gemv_q5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t,
                           int64_t, int64_t);

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static uint32_t rs = 12345;
static uint32_t rnd(void) {
    rs = rs * 1664525u + 1013904223u;
    return rs >> 8;
}

typedef void (*gemm_any_fn)(float *, const void *, const void *, const float *, int64_t, int64_t, int64_t, int64_t,
                            int64_t);
#define GV3(f) {(gemm_any_fn)f##_ref, (gemm_any_fn)f##_avx2, (gemm_any_fn)f##_avx512}

/* The newer types: one table, random blocks with sane scales, activations quantized from floats. */
static int bench_new(int v, double mins) {
    static const struct {
        const char *name;
        int qk, bytes, xk, doff[2];
        gemm_any_fn f[3];
    } T[] = {
        {"q8_0", 32, 34, 0, {0, -1}, GV3(krt_gemm_q8_0)}, {"q4_0", 32, 18, 0, {0, -1}, GV3(krt_gemm_q4_0)},
        {"q5_1", 32, 24, 0, {0, 2}, GV3(krt_gemm_q5_1)},  {"q4_K", 256, 144, 1, {0, 2}, GV3(krt_gemm_q4_K)},
        {"q5_K", 256, 176, 1, {0, 2}, GV3(krt_gemm_q5_K)}, {"q6_K", 256, 210, 1, {208, -1}, GV3(krt_gemm_q6_K)},
    };
    static const int64_t shapes[][2] = {{2048, 2048}, {896, 4864}};
    static const int64_t Ts[] = {128, 7};
    printf("%-5s %-11s %4s %10s %9s\n", "type", "rows x cols", "T", "gemm us", "GMAC/s");
    for (size_t ty = 0; ty < sizeof T / sizeof T[0]; ty++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            const int64_t rows = shapes[si][0], cols = shapes[si][1], nb = cols / T[ty].qk;
            const size_t wbytes = (size_t)(rows * nb) * (size_t)T[ty].bytes;
            uint8_t *w = malloc(wbytes);
            for (size_t i = 0; i < wbytes; i++) w[i] = (uint8_t)rnd();
            for (int64_t i = 0; i < rows * nb; i++)
                for (int k = 0; k < 2; k++)
                    if (T[ty].doff[k] >= 0) {
                        uint16_t d = krt_fp32_to_fp16(0.01f);
                        memcpy(w + i * T[ty].bytes + T[ty].doff[k], &d, 2);
                    }
            float *xf = malloc(sizeof(float) * 128 * cols);
            for (int64_t i = 0; i < 128 * cols; i++) xf[i] = (float)((int)(rnd() % 2001) - 1000) * 0.001f;
            void *x = malloc(sizeof(krt_block_q8_K) * 128 * (cols / 256 + 1) + sizeof(krt_block_q8_0) * 128 * (cols / 32));
            if (T[ty].xk) krt_quantize_q8_K_ref(x, xf, 0, 128 * cols / 256);
            else krt_quantize_q8_0_ref(x, xf, 0, 128 * cols / 32);
            float *y = malloc(sizeof(float) * 128 * rows);
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                const int64_t Tn = Ts[ti];
                double best = 1e30, t0 = now();
                do {
                    double a = now();
                    T[ty].f[v](y, w, x, NULL, rows, cols, Tn, 0, rows);
                    double e = now() - a;
                    if (e < best) best = e;
                } while (now() - t0 < mins);
                char shape[32];
                snprintf(shape, sizeof shape, "%ldx%ld", (long)rows, (long)cols);
                printf("%-5s %-11s %4ld %10.1f %9.1f\n", T[ty].name, shape, (long)Tn, best * 1e6,
                       (double)rows * cols * Tn / best * 1e-9);
                fflush(stdout);
            }
            free(w);
            free(xf);
            free(x);
            free(y);
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    const char *var = argc > 1 ? argv[1] : "avx512";
    double mins = argc > 2 ? atof(argv[2]) : 0.3;
    if (argc > 3 && !strcmp(argv[3], "new"))
        return bench_new(!strcmp(var, "ref") ? 0 : !strcmp(var, "avx2") ? 1 : 2, mins);
    gemm_q8_fn g8;
    gemm_q5_fn g5;
    gemv_q8_fn v8;
    gemv_q5_fn v5;
    if (!strcmp(var, "ref")) {
        g8 = krt_gemm_q8_0_ref, g5 = krt_gemm_q5_0_ref, v8 = krt_gemv_q8_0_ref, v5 = krt_gemv_q5_0_ref;
    } else if (!strcmp(var, "avx2")) {
        g8 = krt_gemm_q8_0_avx2, g5 = krt_gemm_q5_0_avx2, v8 = krt_gemv_q8_0_avx2, v5 = krt_gemv_q5_0_avx2;
    } else {
        g8 = krt_gemm_q8_0_avx512, g5 = krt_gemm_q5_0_avx512, v8 = krt_gemv_q8_0_avx512, v5 = krt_gemv_q5_0_avx512;
    }
    static const int64_t shapes[][2] = {{896, 896}, {1152, 896}, {9728, 896}, {896, 4864}};
    static const int64_t Ts[] = {128, 7, 3, 2, 1};
    printf("variant %s, 1 thread; GMAC/s = rows*cols*T / time (median-free best-of, %.2fs per case)\n", var, mins);
    printf("%-5s %-11s %4s %10s %9s %14s %9s\n", "type", "rows x cols", "T", "gemm us", "GMAC/s", "T x gemv us", "GMAC/s");
    for (int q5 = 0; q5 < 2; q5++) {
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
            int64_t rows = shapes[si][0], cols = shapes[si][1], nb = cols / 32;
            size_t wbytes = (size_t)rows * nb * (q5 ? sizeof(krt_block_q5_0) : sizeof(krt_block_q8_0));
            uint8_t *w = malloc(wbytes);
            for (size_t i = 0; i < wbytes; i++) w[i] = (uint8_t)rnd();
            /* sane fp16 scales */
            for (int64_t i = 0; i < rows * nb; i++) {
                uint16_t d = krt_fp32_to_fp16(0.01f);
                memcpy(w + i * (q5 ? sizeof(krt_block_q5_0) : sizeof(krt_block_q8_0)), &d, 2);
            }
            krt_block_q8_0 *x = malloc(sizeof(krt_block_q8_0) * 128 * nb);
            for (int64_t i = 0; i < 128 * nb; i++) {
                x[i].d = krt_fp32_to_fp16(0.02f);
                for (int j = 0; j < 32; j++) x[i].qs[j] = (int8_t)(rnd() % 255 - 127);
            }
            float *y = malloc(sizeof(float) * 128 * rows);
            for (size_t ti = 0; ti < sizeof Ts / sizeof Ts[0]; ti++) {
                int64_t T = Ts[ti];
                double best = 1e30, bestv = 1e30;
                double t0 = now();
                do {
                    double a = now();
                    if (q5) g5(y, (const krt_block_q5_0 *)w, x, NULL, rows, cols, T, 0, rows);
                    else g8(y, (const krt_block_q8_0 *)w, x, NULL, rows, cols, T, 0, rows);
                    double e = now() - a;
                    if (e < best) best = e;
                } while (now() - t0 < mins);
                if ((q5 && v5) || (!q5 && v8)) {
                    t0 = now();
                    do {
                        double a = now();
                        for (int64_t t = 0; t < T; t++) {
                            if (q5) v5(y + t * rows, (const krt_block_q5_0 *)w, x + t * nb, NULL, cols, 0, rows);
                            else v8(y + t * rows, (const krt_block_q8_0 *)w, x + t * nb, NULL, cols, 0, rows);
                        }
                        double e = now() - a;
                        if (e < bestv) bestv = e;
                    } while (now() - t0 < mins);
                }
                double macs = (double)rows * cols * T;
                char shape[32];
                snprintf(shape, sizeof shape, "%ldx%ld", (long)rows, (long)cols);
                if (bestv < 1e30)
                    printf("%-5s %-11s %4ld %10.1f %9.1f %14.1f %9.1f\n", q5 ? "q5_0" : "q8_0", shape, (long)T,
                           best * 1e6, macs / best * 1e-9, bestv * 1e6, macs / bestv * 1e-9);
                else
                    printf("%-5s %-11s %4ld %10.1f %9.1f %14s %9s\n", q5 ? "q5_0" : "q8_0", shape, (long)T, best * 1e6,
                           macs / best * 1e-9, "-", "-");
                fflush(stdout);
            }
            free(w);
            free(x);
            free(y);
        }
    }
    return 0;
}
