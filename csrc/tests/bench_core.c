/* csrc/tests/bench_core.c - single-thread bandwidth of krt_stream_read and of the GEMV kernels.
 *
 *   build/c/bench_core [-q] [-ref] [-cached] [-fused] [-cpuclock] [-reps N] [-shape RxC]...
 *
 * -q: fewer repeats; -ref: also the scalar variant; -cpuclock: time with the thread's CPU clock
 * (less noise from preemption on a shared machine; wall clock otherwise).
 * Columns: median time, its GB/s and % of the streaming read, and the GB/s of the fastest
 * repeat ("best", for comparing kernels on a noisy machine). The streaming read is measured
 * before and after the GEMVs; the higher median is the baseline.
 * stream: krt_stream_read over a 1 GiB buffer (DRAM) and an 8 MiB one (L3), median GB/s.
 * GEMV "dram": a 1 GiB arena holds as many copies of the weight matrix as fit (at least 2); each
 * call uses the next copy, so weights come from DRAM as in a decode step. "cached" (-cached):
 * one copy, called back to back (L2/L3 resident). Medians of the repeats; GB/s counts weight
 * bytes; "%str" is the GEMV bandwidth over the DRAM streaming-read bandwidth.
 * Activations are pre-quantized (krt_gemv_q*_0); -fused also times krt_gemv_q*_0_f32.
 */
#include "bench_util.h" /* first: it sets _GNU_SOURCE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "krt_common.h"

enum { V_REF, V_AVX2, V_AVX512, NV };
static const char *vname[NV] = {"ref", "avx2", "avx512"};

typedef void (*gemv8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemv5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemv8f_fn)(float *, const krt_block_q8_0 *, const float *, krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemv5f_fn)(float *, const krt_block_q5_0 *, const float *, krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*stream_fn)(float *, const float *, int64_t, int64_t);
static const gemv8_fn gemv8[NV] = {krt_gemv_q8_0_ref, krt_gemv_q8_0_avx2, krt_gemv_q8_0_avx512};
static const gemv5_fn gemv5[NV] = {krt_gemv_q5_0_ref, krt_gemv_q5_0_avx2, krt_gemv_q5_0_avx512};
static const gemv8f_fn gemv8f[NV] = {krt_gemv_q8_0_f32_ref, krt_gemv_q8_0_f32_avx2, krt_gemv_q8_0_f32_avx512};
static const gemv5f_fn gemv5f[NV] = {krt_gemv_q5_0_f32_ref, krt_gemv_q5_0_f32_avx2, krt_gemv_q5_0_f32_avx512};
static const stream_fn streamr[NV] = {krt_stream_read_ref, krt_stream_read_avx2, krt_stream_read_avx512};

#define ARENA_BYTES ((size_t)1 << 30)

static uint8_t *arena;

/* Fill the arena with valid random blocks of the given size (d a small normal fp16). */
static void fill_arena(size_t bsz) {
    size_t n = ARENA_BYTES / bsz;
    for (size_t i = 0; i < n; i++) {
        uint8_t *b = arena + i * bsz;
        uint64_t r = rnd();
        uint16_t d = (uint16_t)(0x2000 + (r & 0x0fff));
        memcpy(b, &d, 2);
        for (size_t j = 2; j < bsz; j += 8) {
            uint64_t v = rnd();
            memcpy(b + j, &v, bsz - j < 8 ? bsz - j : 8);
        }
    }
}

static double bench_gemv(int v, int is5, int fused, int64_t rows, int64_t cols, int cached, int reps,
                         krt_block_q8_0 *x, float *xf, krt_block_q8_0 *xq, float *y, double *best) {
    size_t bsz = is5 ? sizeof(krt_block_q5_0) : sizeof(krt_block_q8_0);
    size_t mbytes = (size_t)rows * (size_t)(cols / 32) * bsz;
    size_t copies = cached ? 1 : ARENA_BYTES / mbytes;
    if (copies < 1) return -1;
    double *t = malloc(sizeof(double) * (size_t)reps);
    size_t c = 0;
    for (int i = -2; i < reps; i++) {
        const void *w = arena + c * mbytes;
        c = (c + 1) % copies;
        double t0 = now();
        if (is5) {
            if (fused) gemv5f[v](y, w, xf, xq, NULL, cols, 0, rows);
            else gemv5[v](y, w, x, NULL, cols, 0, rows);
        } else {
            if (fused) gemv8f[v](y, w, xf, xq, NULL, cols, 0, rows);
            else gemv8[v](y, w, x, NULL, cols, 0, rows);
        }
        double dt = now() - t0;
        if (i >= 0) t[i] = dt;
    }
    double m = median(t, reps);
    *best = t[0]; /* sorted by median() */
    free(t);
    return m;
}

static double stream_bench(const int *have, int quick) {
    double bw = 0;
    for (int v = V_AVX2; v < NV; v++) {
        if (!have[v]) continue;
        int reps = quick ? 5 : 11;
        double t[16];
        float o;
        for (int i = -1; i < reps; i++) {
            double t0 = now();
            streamr[v](&o, (const float *)arena, 0, (int64_t)(ARENA_BYTES / 4));
            if (i >= 0) t[i] = now() - t0;
        }
        double gbs = (double)ARENA_BYTES / median(t, reps) / 1e9;
        if (gbs > bw) bw = gbs;
        printf("%-8s %-14s %10.2f\n", "1GiB", vname[v], gbs);
        size_t l3 = (size_t)8 << 20;
        double tl[64];
        for (int i = -2; i < 41; i++) {
            double t0 = now();
            streamr[v](&o, (const float *)arena, 0, (int64_t)(l3 / 4));
            if (i >= 0) tl[i] = now() - t0;
        }
        printf("%-8s %-14s %10.2f\n", "8MiB", vname[v], (double)l3 / median(tl, 41) / 1e9);
    }
    return bw;
}

int main(int argc, char **argv) {
    int quick = 0, with_ref = 0, cached_too = 0, fused_too = 0, reps_arg = 0;
    int64_t shapes[16][2];
    int nshapes = 0;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q")) quick = 1;
        else if (!strcmp(argv[i], "-ref")) with_ref = 1;
        else if (!strcmp(argv[i], "-cached")) cached_too = 1;
        else if (!strcmp(argv[i], "-fused")) fused_too = 1;
        else if (!strcmp(argv[i], "-cpuclock")) bench_clock = CLOCK_THREAD_CPUTIME_ID;
        else if (!strcmp(argv[i], "-reps") && i + 1 < argc) reps_arg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-shape") && i + 1 < argc && nshapes < 16) {
            long long r, c;
            if (sscanf(argv[++i], "%lldx%lld", &r, &c) == 2) {
                shapes[nshapes][0] = r;
                shapes[nshapes][1] = c;
                nshapes++;
            }
        } else {
            fprintf(stderr, "usage: %s [-q] [-ref] [-cached] [-fused] [-cpuclock] [-reps N] [-shape RxC]...\n", argv[0]);
            return 2;
        }
    }
    if (nshapes == 0) {
        static const int64_t def[5][2] = {{896, 896}, {4864, 896}, {896, 4864}, {9728, 896}, {151936, 896}};
        for (int i = 0; i < 5; i++) { shapes[i][0] = def[i][0]; shapes[i][1] = def[i][1]; }
        nshapes = 5;
    }
    __builtin_cpu_init();
    int have[NV] = {with_ref, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), 0};
    have[V_AVX512] = have[V_AVX2] && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vnni");

    arena = aligned_alloc(4096, ARENA_BYTES);
    if (!arena) { fprintf(stderr, "no memory\n"); return 1; }
    memset(arena, 1, ARENA_BYTES);

    /* streaming read baseline */
    printf("%-8s %-14s %10s\n", "stream", "variant", "GB/s");
    double bw_dram = stream_bench(have, quick);
    int64_t maxcols = 0, maxrows = 0;
    for (int s = 0; s < nshapes; s++) {
        if (shapes[s][1] > maxcols) maxcols = shapes[s][1];
        if (shapes[s][0] > maxrows) maxrows = shapes[s][0];
    }
    krt_block_q8_0 *x = malloc(sizeof(krt_block_q8_0) * (size_t)(maxcols / 32));
    krt_block_q8_0 *xq = malloc(sizeof(krt_block_q8_0) * (size_t)(maxcols / 32));
    float *xf = malloc(sizeof(float) * (size_t)maxcols);
    float *y = malloc(sizeof(float) * (size_t)maxrows);
    for (int64_t i = 0; i < maxcols; i++) xf[i] = (float)((int)(rnd() % 2001) - 1000) * 0.001f;
    krt_quantize_q8_0_ref(x, xf, 0, maxcols / 32);

    printf("\n%-6s %-12s %-8s %-6s %10s %8s %6s %8s\n", "type", "shape", "variant", "mode", "us", "GB/s", "%str",
           "best");
    struct { char line[128]; double gbs; } rows_out[256];
    int nout = 0;
    for (int is5 = 0; is5 < 2; is5++) {
        fill_arena(is5 ? sizeof(krt_block_q5_0) : sizeof(krt_block_q8_0));
        for (int s = 0; s < nshapes; s++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            size_t mbytes = (size_t)rows * (size_t)(cols / 32) * (is5 ? 22 : 34);
            for (int mode = 0; mode < (cached_too ? 2 : 1); mode++) {
                if (mode == 1 && mbytes > ((size_t)24 << 20)) continue;
                for (int fused = 0; fused < (fused_too ? 2 : 1); fused++) {
                    for (int v = 0; v < NV; v++) {
                        if (!have[v]) continue;
                        int reps = reps_arg ? reps_arg : (int)(2e8 / (double)mbytes);
                        if (quick) reps /= 4;
                        if (v == V_REF) reps = reps / 20;
                        if (reps < 3) reps = 3;
                        if (reps > 2001) reps = 2001;
                        double best = 0;
                        double t = bench_gemv(v, is5, fused, rows, cols, mode, reps, x, xf, xq, y, &best);
                        char shp[32], vn[16];
                        snprintf(shp, sizeof shp, "%lldx%lld", (long long)rows, (long long)cols);
                        snprintf(vn, sizeof vn, "%s%s", vname[v], fused ? "+f" : "");
                        double gbs = (double)mbytes / t / 1e9;
                        if (nout < 256) {
                            snprintf(rows_out[nout].line, sizeof rows_out[nout].line,
                                     "%-6s %-12s %-8s %-6s %10.1f %8.2f", is5 ? "q5_0" : "q8_0", shp, vn,
                                     mode ? "cached" : "dram", t * 1e6, gbs);
                            rows_out[nout].gbs = gbs;
                            nout++;
                        }
                        printf("%-6s %-12s %-8s %-6s %10.1f %8.2f %5.0f%% %8.2f\n", is5 ? "q5_0" : "q8_0", shp, vn,
                               mode ? "cached" : "dram", t * 1e6, gbs, 100.0 * gbs / bw_dram,
                               (double)mbytes / best / 1e9);
                        fflush(stdout);
                    }
                }
            }
        }
    }
    printf("\nstream again:\n");
    double bw2 = stream_bench(have, quick);
    if (bw2 > bw_dram) {
        printf("(higher than before: %%str above used %.2f GB/s; against %.2f GB/s:)\n", bw_dram, bw2);
        for (int i = 0; i < nout; i++) printf("%s %5.0f%%\n", rows_out[i].line, 100.0 * rows_out[i].gbs / bw2);
    }
    free(x); free(xq); free(xf); free(y);
    free(arena);
    return 0;
}
