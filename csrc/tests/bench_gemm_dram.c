/* csrc/tests/bench_gemm_dram.c - quantized GEMM with the weights streamed from DRAM, for the
 * token counts of batched decoding and prefill, on 1 or 2 threads.
 *
 *   build/c/bench_gemm_dram [-t threads] [-v avx512|avx2] [-types q8_0,q4_K,..] [-shapes qwen|llama|all|RxC]
 *                           [-T 1,2,4,8,16,32,128] [-reps N] [-cached] [-nohuge]
 *
 * Each case allocates as many copies of the weight matrix as make >= 160 MiB (5x this Zen 4's
 * 32 MiB L3; at least 2) and each call uses the next copy, so the weights come from DRAM as in a
 * decode step (-cached: one copy, called back to back). The copies are on transparent huge pages
 * (MADV_HUGEPAGE, as the runtime's arena; -nohuge: 4 KiB pages). Rows are split over the threads as the
 * runtime does (whole 16-row granules), on a spinning pthread pool pinned to CPUs 0..t-1.
 * Columns: median time of the calls (us), weight GB/s (bytes of w / time), GMAC/s (rows*cols*T
 * / time). T = 1 also times the GEMV (krt_gemv_*), the decode kernel.
 *
 * Before/after in one run: build the old csrc/gemm.c with its functions renamed (the
 * csrc/tests/bench_gemm_old.h header) and link it in; its rows ("old") are timed interleaved
 * with the current kernel's ("gemm"), call by call, so both see the same machine load:
 *   git show REV:csrc/gemm.c > /tmp/old/gemm.c; git show REV:csrc/krt_gemm_drive.inc > /tmp/old/krt_gemm_drive.inc
 *   CC="clang-14 -O3 -std=c11 -ffp-contract=off -mllvm -inline-threshold=1000 -Icsrc"   # asm/'s compiler
 *   $CC -include csrc/tests/bench_gemm_old.h -c /tmp/old/gemm.c -o /tmp/old/gemm_old.o
 *   $CC csrc/tests/bench_gemm_dram.c csrc/gemm.c csrc/gemv.c csrc/gemv_k.c csrc/quant.c csrc/kquant.c \
 *       /tmp/old/gemm_old.o -lpthread -o bench_gemm_dram
 * Without the old object the "old" rows are left out (its symbols are weak).
 */
#include "bench_util.h" /* first: it sets _GNU_SOURCE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelrt.h"
#include "krt_common.h"

typedef void (*gemm_fn)(float *, const void *, const void *, const float *, int64_t, int64_t, int64_t, int64_t,
                        int64_t);
typedef void (*gemv_fn)(float *, const void *, const void *, const float *, int64_t, int64_t, int64_t);

#define OLD_DECL(t, xt)                                                                                          \
    void krt_gemm_old_##t##_avx2(float *, const krt_block_##t *, const krt_block_##xt *, const float *, int64_t,   \
                                 int64_t, int64_t, int64_t, int64_t) __attribute__((weak));                       \
    void krt_gemm_old_##t##_avx512(float *, const krt_block_##t *, const krt_block_##xt *, const float *, int64_t, \
                                   int64_t, int64_t, int64_t, int64_t) __attribute__((weak));
OLD_DECL(q8_0, q8_0)
OLD_DECL(q5_0, q8_0)
OLD_DECL(q4_0, q8_0)
OLD_DECL(q5_1, q8_0)
OLD_DECL(q4_K, q8_K)
OLD_DECL(q5_K, q8_K)
OLD_DECL(q6_K, q8_K)

#define FNS(t) {(gemm_fn)krt_gemm_##t##_avx2, (gemm_fn)krt_gemm_##t##_avx512}
#define OLDFNS(t) {(gemm_fn)krt_gemm_old_##t##_avx2, (gemm_fn)krt_gemm_old_##t##_avx512}
#define GVFNS(t) {(gemv_fn)krt_gemv_##t##_avx2, (gemv_fn)krt_gemv_##t##_avx512}

static const struct {
    const char *name;
    int qk, bytes, xk, doff[2];
    gemm_fn gemm[2], old[2];
    gemv_fn gemv[2];
} types[] = {
    {"q8_0", 32, 34, 0, {0, -1}, FNS(q8_0), OLDFNS(q8_0), GVFNS(q8_0)},
    {"q5_0", 32, 22, 0, {0, -1}, FNS(q5_0), OLDFNS(q5_0), GVFNS(q5_0)},
    {"q4_0", 32, 18, 0, {0, -1}, FNS(q4_0), OLDFNS(q4_0), GVFNS(q4_0)},
    {"q5_1", 32, 24, 0, {0, 2}, FNS(q5_1), OLDFNS(q5_1), GVFNS(q5_1)},
    {"q4_K", 256, 144, 1, {0, 2}, FNS(q4_K), OLDFNS(q4_K), GVFNS(q4_K)},
    {"q5_K", 256, 176, 1, {0, 2}, FNS(q5_K), OLDFNS(q5_K), GVFNS(q5_K)},
    {"q6_K", 256, 210, 1, {208, -1}, FNS(q6_K), OLDFNS(q6_K), GVFNS(q6_K)},
};
#define NTYPES (int)(sizeof types / sizeof types[0])

static const int64_t qwen[][2] = {{896, 896}, {4864, 896}, {9728, 896}, {896, 4864}, {151936, 896}};
static const int64_t llama[][2] = {{2048, 2048}, {8192, 2048}, {2048, 8192}};

/* ---- the call being timed ---- */
static struct {
    gemm_fn gemm;
    gemv_fn gemv;
    float *y;
    const uint8_t *w;
    const void *x;
    int64_t rows, cols, T;
} call;

/* Rows lo..hi of thread ith: whole 16-row granules, as the runtime's share(). */
static void share(int64_t rows, int ith, int nth, int64_t *lo, int64_t *hi) {
    const int64_t g = (rows + 15) / 16;
    *lo = g * ith / nth * 16;
    *hi = g * (ith + 1) / nth * 16;
    if (*hi > rows) *hi = rows;
    if (*lo > rows) *lo = rows;
}

static void job_call(int ith, int nth) {
    int64_t lo, hi;
    share(call.rows, ith, nth, &lo, &hi);
    if (lo >= hi) return;
    if (call.gemv) call.gemv(call.y, call.w, call.x, NULL, call.cols, lo, hi);
    else call.gemm(call.y, call.w, call.x, NULL, call.rows, call.cols, call.T, lo, hi);
}

#define ARENA_MIN ((size_t)160 << 20)

int main(int argc, char **argv) {
    int v = 1, reps = 15, cached = 0, huge = 1, shapes = 1; /* 1 qwen, 2 llama, 3 all, 4 one RxC */
    long one[2] = {0, 0};
    const char *tlist = "q8_0";
    int64_t Ts[16] = {1, 2, 4, 8, 16, 32, 128};
    int nT = 7;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-t") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-v") && i + 1 < argc) v = !strcmp(argv[++i], "avx2") ? 0 : 1;
        else if (!strcmp(argv[i], "-types") && i + 1 < argc) tlist = argv[++i];
        else if (!strcmp(argv[i], "-shapes") && i + 1 < argc) {
            const char *s = argv[++i];
            shapes = !strcmp(s, "llama") ? 2 : !strcmp(s, "all") ? 3 : !strcmp(s, "qwen") ? 1 : 4;
            if (shapes == 4 && sscanf(s, "%ldx%ld", &one[0], &one[1]) != 2) shapes = 1;
        } else if (!strcmp(argv[i], "-T") && i + 1 < argc) {
            char *p = argv[++i];
            nT = 0;
            while (*p && nT < 16) {
                Ts[nT++] = strtol(p, &p, 10);
                if (*p == ',') p++;
            }
        } else if (!strcmp(argv[i], "-reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-cached")) cached = 1;
        else if (!strcmp(argv[i], "-nohuge")) huge = 0;
        else {
            fprintf(stderr, "usage: %s [-t n] [-v avx512|avx2] [-types a,b] [-shapes qwen|llama|all|RxC] [-T 1,2,..] [-reps n] [-cached] [-nohuge]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > BENCH_MAXT) nthreads = 1;
    if (reps < 3) reps = 3;
    __builtin_cpu_init();
    if (v == 1 && !(__builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vnni"))) {
        fprintf(stderr, "no AVX-512 VNNI: use -v avx2\n");
        return 1;
    }
    bench_pool_start(nthreads);

    int64_t maxT = 1;
    for (int i = 0; i < nT; i++) maxT = Ts[i] > maxT ? Ts[i] : maxT;
    printf("variant %s, %d thread(s), weights %s; median of %d calls; old = the kernel linked from "
           "bench_gemm_old.h, timed interleaved\n",
           v ? "avx512" : "avx2", nthreads, cached ? "cached (one copy)" : "from DRAM (>= 160 MiB of copies)", reps);
    printf("%-5s %-12s %4s %-5s %10s %8s %8s\n", "type", "rows x cols", "T", "kern", "us", "GB/s", "GMAC/s");
    for (int ty = 0; ty < NTYPES; ty++) {
        if (!strstr(tlist, types[ty].name) && strcmp(tlist, "all")) continue;
        for (int sh = 0; sh < 8; sh++) {
            int64_t rows, cols;
            if (shapes == 4) {
                if (sh) continue;
                rows = one[0], cols = one[1];
            } else if (shapes & 1 && sh < 5) rows = qwen[sh][0], cols = qwen[sh][1];
            else if (shapes & 2 && sh >= 5) rows = llama[sh - 5][0], cols = llama[sh - 5][1];
            else continue;
            if (cols % types[ty].qk) continue;
            const int64_t nb = cols / types[ty].qk;
            const size_t mbytes = (size_t)(rows * nb) * (size_t)types[ty].bytes;
            size_t copies = cached ? 1 : (ARENA_MIN + mbytes - 1) / mbytes;
            if (!cached && copies < 2) copies = 2;
            const size_t wlen = (mbytes * copies + (2u << 20) - 1) & ~(size_t)((2u << 20) - 1);
            uint8_t *w = aligned_alloc((size_t)2 << 20, wlen);
            if (w && huge) madvise(w, wlen, MADV_HUGEPAGE); /* as the runtime's arena (THP) */
            if (!w) {
                fprintf(stderr, "out of memory\n");
                return 1;
            }
            for (size_t i = 0; i < mbytes * copies; i += 8) {
                uint64_t r = rnd();
                memcpy(w + i, &r, mbytes * copies - i < 8 ? mbytes * copies - i : 8);
            }
            for (size_t i = 0; i < (size_t)rows * (size_t)nb * copies; i++)
                for (int k = 0; k < 2; k++)
                    if (types[ty].doff[k] >= 0) {
                        uint16_t d = krt_fp32_to_fp16(0.001f + 0.01f * (float)(rnd() % 100) / 100.0f);
                        memcpy(w + i * (size_t)types[ty].bytes + types[ty].doff[k], &d, 2);
                    }
            float *xf = malloc(sizeof(float) * (size_t)(maxT * cols));
            for (int64_t i = 0; i < maxT * cols; i++) xf[i] = (float)((int)(rnd() % 2001) - 1000) * 0.001f;
            void *x = malloc(sizeof(krt_block_q8_K) * (size_t)(maxT * (cols / 256 + 1)) +
                             sizeof(krt_block_q8_0) * (size_t)(maxT * (cols / 32)));
            if (types[ty].xk) krt_quantize_q8_K_ref(x, xf, 0, maxT * cols / 256);
            else krt_quantize_q8_0_ref(x, xf, 0, maxT * cols / 32);
            float *y = malloc(sizeof(float) * (size_t)(maxT * rows));
            char shape[32];
            snprintf(shape, sizeof shape, "%ldx%ld", (long)rows, (long)cols);
            size_t c = 0;
            for (int ti = 0; ti < nT; ti++) {
                const int64_t T = Ts[ti];
                /* kernels: 0 gemv (T = 1 only), 1 gemm, 2 old gemm */
                const int have[3] = {T == 1, 1, types[ty].old[v] != NULL};
                double *t[3];
                for (int k = 0; k < 3; k++) t[k] = malloc(sizeof(double) * (size_t)reps);
                for (int i = -2; i < reps; i++) {
                    for (int kk = 0; kk < 3; kk++) {
                        const int k = (i & 1) ? 2 - kk : kk; /* alternate the order */
                        if (!have[k]) continue;
                        call.gemm = k == 2 ? types[ty].old[v] : types[ty].gemm[v];
                        call.gemv = k == 0 ? types[ty].gemv[v] : NULL;
                        call.y = y, call.x = x, call.rows = rows, call.cols = cols, call.T = T;
                        call.w = w + c * mbytes;
                        c = (c + 1) % copies;
                        double t0 = now();
                        bench_run(job_call);
                        double dt = now() - t0;
                        if (i >= 0) t[k][i] = dt;
                    }
                }
                static const char *kn[3] = {"gemv", "gemm", "old"};
                for (int k = 0; k < 3; k++) {
                    if (!have[k]) continue;
                    const double m = median(t[k], reps);
                    printf("%-5s %-12s %4ld %-5s %10.1f %8.2f %8.1f\n", types[ty].name, shape, (long)T, kn[k], m * 1e6,
                           (double)mbytes / m * 1e-9, (double)rows * (double)cols * (double)T / m * 1e-9);
                }
                fflush(stdout);
                for (int k = 0; k < 3; k++) free(t[k]);
            }
            free(w);
            free(xf);
            free(x);
            free(y);
        }
    }
    return 0;
}
