/* csrc/tests/bench_quant.c - single-thread GEMV bandwidth of every quantized weight type
 * (Q8_0, Q5_0, Q4_0, Q5_1, Q4_K, Q5_K, Q6_K, IQ4_NL, Q2_K, IQ4_XS, Q3_K) against the same run's streaming read (a benchmark,
 * not a test).
 *
 *   build/c/bench_quant [-rounds R] [-reps N] [-cached] [-cpuclock] [-arena MiB]
 *                       [-types q4_0,q4_K,...] [-variants ref,avx2,avx512] [-shape RxC]...
 *
 * Weights: an arena (default 512 MiB, >= 256 MiB) holds as many copies of the weight matrix as
 * fit; each call uses the next copy, so weights stream from DRAM as in a decode step ("dram").
 * -cached: one copy called back to back (L2/L3 resident; compute-bound view). Each round measures
 * krt_stream_read over the whole arena (best variant, median of 5), then every type x shape x
 * variant (median of N calls); a cell's "%str" is its GB/s over that round's stream bandwidth.
 * The table shows the median over rounds of GB/s and of %str, and the best round's GB/s.
 * GB/s counts weight bytes only. Activations are pre-quantized (Q8_0 or Q8_K as the type needs).
 * Default shapes: Qwen2-0.5B (896x896, 4864x896, 896x4864, 151936x896) and Llama-style
 * (2048x2048, 8192x2048, 2048x8192); K-quants skip shapes whose cols are not a multiple of 256.
 * -cpuclock: time with the thread's CPU clock (less noise from preemption on a shared machine).
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

typedef void (*gemv_fn)(float *, const void *, const void *, const float *, int64_t, int64_t, int64_t);
#define G3(f) {(gemv_fn)f##_ref, (gemv_fn)f##_avx2, (gemv_fn)f##_avx512}

static const struct {
    const char *name;
    int qk, bytes, xk;      /* xk: activations Q8_K */
    int doff[2];            /* byte offsets of fp16 scales to keep sane (-1: none) */
    gemv_fn f[NV];
} T[] = {
    {"q8_0", 32, 34, 0, {0, -1}, G3(krt_gemv_q8_0)},
    {"q5_0", 32, 22, 0, {0, -1}, G3(krt_gemv_q5_0)},
    {"q4_0", 32, 18, 0, {0, -1}, G3(krt_gemv_q4_0)},
    {"q5_1", 32, 24, 0, {0, 2}, G3(krt_gemv_q5_1)},
    {"q4_K", 256, 144, 1, {0, 2}, G3(krt_gemv_q4_K)},
    {"q5_K", 256, 176, 1, {0, 2}, G3(krt_gemv_q5_K)},
    {"q6_K", 256, 210, 1, {208, -1}, G3(krt_gemv_q6_K)},
    {"iq4_nl", 32, 18, 0, {0, -1}, G3(krt_gemv_iq4_nl)},
    {"q2_K", 256, 84, 1, {80, 82}, G3(krt_gemv_q2_K)},
    {"iq4_xs", 256, 136, 1, {0, -1}, G3(krt_gemv_iq4_xs)},
    {"q3_K", 256, 110, 1, {108, -1}, G3(krt_gemv_q3_K)},
};
#define NT ((int)(sizeof T / sizeof T[0]))

static uint8_t *arena;
static size_t arena_bytes = (size_t)512 << 20;

/* Random blocks with small normal fp16 scales (no NaN / Inf / subnormal products). */
static void fill_arena(int t) {
    const size_t bsz = (size_t)T[t].bytes, n = arena_bytes / bsz;
    for (size_t i = 0; i < n; i++) {
        uint8_t *b = arena + i * bsz;
        for (size_t j = 0; j < bsz; j += 8) {
            uint64_t v = rnd();
            memcpy(b + j, &v, bsz - j < 8 ? bsz - j : 8);
        }
        for (int k = 0; k < 2; k++) {
            if (T[t].doff[k] < 0) continue;
            uint16_t d = (uint16_t)(0x2000 + (rnd() & 0x0fff));
            memcpy(b + T[t].doff[k], &d, 2);
        }
    }
}

static double stream_once(const int *have) {
    double bw = 0;
    for (int v = V_AVX2; v < NV; v++) {
        if (!have[v]) continue;
        double t[5];
        float o;
        for (int i = -1; i < 5; i++) {
            double t0 = now();
            if (v == V_AVX2) krt_stream_read_avx2(&o, (const float *)arena, 0, (int64_t)(arena_bytes / 4));
            else krt_stream_read_avx512(&o, (const float *)arena, 0, (int64_t)(arena_bytes / 4));
            if (i >= 0) t[i] = now() - t0;
        }
        double g = (double)arena_bytes / median(t, 5) / 1e9;
        if (g > bw) bw = g;
    }
    return bw;
}

/* Median seconds of one GEMV over reps calls (each on the next copy unless cached). */
static double time_gemv(gemv_fn f, int64_t rows, int64_t cols, size_t mbytes, int cached, int reps,
                        const void *x, float *y) {
    size_t copies = cached ? 1 : arena_bytes / mbytes;
    double *t = malloc(sizeof(double) * (size_t)reps);
    size_t c = (size_t)(rnd() % copies);
    for (int i = -2; i < reps; i++) {
        const void *w = arena + c * mbytes;
        c = (c + 1) % copies;
        double t0 = now();
        f(y, w, x, NULL, cols, 0, rows);
        double dt = now() - t0;
        if (i >= 0) t[i] = dt;
    }
    double m = median(t, reps);
    free(t);
    return m;
}

int main(int argc, char **argv) {
    int rounds = 3, reps_arg = 0, cached = 0;
    int64_t shapes[16][2];
    int nshapes = 0;
    int want_t[16], want_v[NV] = {0, 1, 1};
    for (int t = 0; t < NT; t++) want_t[t] = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-reps") && i + 1 < argc) reps_arg = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-cached")) cached = 1;
        else if (!strcmp(argv[i], "-cpuclock")) bench_clock = CLOCK_THREAD_CPUTIME_ID;
        else if (!strcmp(argv[i], "-arena") && i + 1 < argc) arena_bytes = (size_t)atoi(argv[++i]) << 20;
        else if (!strcmp(argv[i], "-types") && i + 1 < argc) {
            const char *s = argv[++i];
            for (int t = 0; t < NT; t++) want_t[t] = strstr(s, T[t].name) != NULL;
        } else if (!strcmp(argv[i], "-variants") && i + 1 < argc) {
            const char *s = argv[++i];
            for (int v = 0; v < NV; v++) want_v[v] = strstr(s, vname[v]) != NULL;
        } else if (!strcmp(argv[i], "-shape") && i + 1 < argc && nshapes < 16) {
            long long r, c;
            if (sscanf(argv[++i], "%lldx%lld", &r, &c) == 2) {
                shapes[nshapes][0] = r;
                shapes[nshapes][1] = c;
                nshapes++;
            }
        } else {
            fprintf(stderr, "usage: %s [-rounds R] [-reps N] [-cached] [-cpuclock] [-arena MiB] [-types a,b] "
                            "[-variants ref,avx2,avx512] [-shape RxC]...\n", argv[0]);
            return 2;
        }
    }
    if (nshapes == 0) {
        static const int64_t def[7][2] = {{896, 896}, {4864, 896}, {896, 4864}, {151936, 896},
                                          {2048, 2048}, {8192, 2048}, {2048, 8192}};
        for (int i = 0; i < 7; i++) {
            shapes[i][0] = def[i][0];
            shapes[i][1] = def[i][1];
        }
        nshapes = 7;
    }
    if (rounds < 1) rounds = 1;
    __builtin_cpu_init();
    int have[NV] = {1, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), 0};
    have[V_AVX512] = have[V_AVX2] && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vnni");
    arena = aligned_alloc(4096, arena_bytes);
    if (!arena) {
        fprintf(stderr, "no memory\n");
        return 1;
    }
    memset(arena, 1, arena_bytes);

    int64_t maxcols = 0, maxrows = 0;
    for (int s = 0; s < nshapes; s++) {
        if (shapes[s][1] > maxcols) maxcols = shapes[s][1];
        if (shapes[s][0] > maxrows) maxrows = shapes[s][0];
    }
    float *xf = malloc(sizeof(float) * (size_t)maxcols);
    for (int64_t i = 0; i < maxcols; i++) xf[i] = (float)((int)(rnd() % 2001) - 1000) * 0.001f;
    krt_block_q8_0 *x8 = malloc(sizeof(krt_block_q8_0) * (size_t)(maxcols / 32 + 1));
    krt_block_q8_K *xK = malloc(sizeof(krt_block_q8_K) * (size_t)(maxcols / 256 + 1));
    krt_quantize_q8_0_ref(x8, xf, 0, maxcols / 32);
    krt_quantize_q8_K_ref(xK, xf, 0, maxcols / 256);
    float *y = malloc(sizeof(float) * (size_t)maxrows);

    /* cells[t][s][v][round] */
    enum { MAXR = 64 };
    static double gbs[16][16][NV][MAXR], pct[16][16][NV][MAXR];
    double streams[MAXR];
    if (rounds > MAXR) rounds = MAXR;
    for (int rd = 0; rd < rounds; rd++) {
        double bw = stream_once(have);
        streams[rd] = bw;
        fprintf(stderr, "round %d: stream %.2f GB/s\n", rd + 1, bw);
        for (int t = 0; t < NT; t++) {
            if (!want_t[t]) continue;
            fill_arena(t);
            for (int s = 0; s < nshapes; s++) {
                int64_t rows = shapes[s][0], cols = shapes[s][1];
                if (cols % T[t].qk) continue;
                size_t mbytes = (size_t)rows * (size_t)(cols / T[t].qk) * (size_t)T[t].bytes;
                if (mbytes > arena_bytes / 2) continue;
                for (int v = 0; v < NV; v++) {
                    if (!have[v] || !want_v[v]) continue;
                    int reps = reps_arg ? reps_arg : (int)(4e8 / (double)mbytes);
                    if (v == V_REF) reps /= 20;
                    if (reps < 5) reps = 5;
                    if (reps > 1001) reps = 1001;
                    double sec = time_gemv(T[t].f[v], rows, cols, mbytes, cached, reps, T[t].xk ? (const void *)xK : x8, y);
                    gbs[t][s][v][rd] = (double)mbytes / sec / 1e9;
                    pct[t][s][v][rd] = 100.0 * gbs[t][s][v][rd] / bw;
                }
            }
        }
    }
    double st[MAXR];
    memcpy(st, streams, sizeof(double) * (size_t)rounds);
    printf("stream read (%zu MiB arena): median %.2f GB/s over %d rounds%s\n", arena_bytes >> 20, median(st, rounds),
           rounds, cached ? "; GEMV weights cached" : "");
    printf("%-5s %-12s %-7s %9s %7s %9s\n", "type", "shape", "variant", "GB/s", "%str", "best GB/s");
    for (int t = 0; t < NT; t++) {
        if (!want_t[t]) continue;
        for (int s = 0; s < nshapes; s++) {
            int64_t rows = shapes[s][0], cols = shapes[s][1];
            size_t mbytes = (size_t)rows * (size_t)(cols / T[t].qk) * (size_t)T[t].bytes;
            if (cols % T[t].qk || mbytes > arena_bytes / 2) continue;
            for (int v = 0; v < NV; v++) {
                if (!have[v] || !want_v[v]) continue;
                double g[MAXR], p[MAXR], best = 0;
                for (int rd = 0; rd < rounds; rd++) {
                    g[rd] = gbs[t][s][v][rd];
                    p[rd] = pct[t][s][v][rd];
                    if (g[rd] > best) best = g[rd];
                }
                char shp[32];
                snprintf(shp, sizeof shp, "%lldx%lld", (long long)rows, (long long)cols);
                printf("%-5s %-12s %-7s %9.2f %6.0f%% %9.2f\n", T[t].name, shp, vname[v], median(g, rounds),
                       median(p, rounds), best);
            }
        }
    }
    free(xf);
    free(x8);
    free(xK);
    free(y);
    free(arena);
    return 0;
}
