/* csrc/tests/bench_attn.c - attention kernels on this machine (not a test: timings only).
 *
 *   build/c/bench_attn [-q] [-threads N] [-reps N] [-layers N] [-variant ref|avx2|avx512]
 *                      [-shape NH,NKV,HD] [-depths a,b,..] [-prefill a,b,..] [-chunks N] [-cpuclock]
 *
 * decode: one decode step's attention over -layers layer caches (default 24, as Qwen2-0.5B),
 *   so the caches stream from DRAM as in a real step (24 x 16 MiB at depth 16384 F32, far more
 *   than L3). Work is split as the Go side will: units = n_kv_heads x n_chunks shared evenly by
 *   the threads (a spinning pthread pool, one spin barrier per layer, plus the merge and a second
 *   barrier when n_chunks > 1). n_chunks follows the rule in docs/attention-design.md unless
 *   -chunks forces it. GB/s = K+V bytes of the cache read per step / time; "%str" is that over
 *   the streaming read (krt_stream_read over 1 GiB, the same threads) measured in the same run,
 *   before and after (the better of the two is used).
 * prefill: causal attention of T tokens from position 0 (one layer: compute-bound), FLOPs
 *   = 4 * n_heads * head_dim * T(T+1)/2 (QK^T and PV), GFLOP/s.
 * Buffers are mmap'd with MADV_HUGEPAGE, as the Go arena maps the KV cache.
 * Columns: median and best of -reps repeats (wall clock; -cpuclock: the main thread's CPU time,
 * which is less disturbed by a busy machine and exact for -threads 1).
 */
#include "bench_util.h" /* first: it sets _GNU_SOURCE */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelrt.h"

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static float rndf(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

enum { KF32, KF16, KQ8 };
static const char *kvname[3] = {"f32", "f16", "q8_0"};
static size_t row_bytes(int kv, int64_t hd) { return kv == KF32 ? hd * 4 : kv == KF16 ? hd * 2 : hd / 32 * 34; }

typedef void (*decode_fn)(float *, float *, const float *, const void *, const void *, float *, const float *, int64_t,
                          int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*prefill_fn)(float *, const float *, const void *, const void *, float *, const float *, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*merge_fn)(float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*append_fn)(void *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*stream_fn)(float *, const float *, int64_t, int64_t);

static const float nocap = 0.0f; /* plain attention */
static decode_fn decode_of[3][3] = {
    {(decode_fn)krt_attn_decode_f32_ref, (decode_fn)krt_attn_decode_f16_ref, (decode_fn)krt_attn_decode_q8_0_ref},
    {(decode_fn)krt_attn_decode_f32_avx2, (decode_fn)krt_attn_decode_f16_avx2, (decode_fn)krt_attn_decode_q8_0_avx2},
    {(decode_fn)krt_attn_decode_f32_avx512, (decode_fn)krt_attn_decode_f16_avx512,
     (decode_fn)krt_attn_decode_q8_0_avx512}};
static prefill_fn prefill_of[3][3] = {
    {(prefill_fn)krt_attn_prefill_f32_ref, (prefill_fn)krt_attn_prefill_f16_ref, (prefill_fn)krt_attn_prefill_q8_0_ref},
    {(prefill_fn)krt_attn_prefill_f32_avx2, (prefill_fn)krt_attn_prefill_f16_avx2,
     (prefill_fn)krt_attn_prefill_q8_0_avx2},
    {(prefill_fn)krt_attn_prefill_f32_avx512, (prefill_fn)krt_attn_prefill_f16_avx512,
     (prefill_fn)krt_attn_prefill_q8_0_avx512}};
static merge_fn merge_of[3] = {krt_attn_merge_ref, krt_attn_merge_avx2, krt_attn_merge_avx512};
static append_fn append_of[3] = {(append_fn)krt_kv_append_avx512, (append_fn)krt_kv_append_f16_avx512,
                                  (append_fn)krt_kv_append_q8_0_avx512};
static stream_fn stream_of[3] = {krt_stream_read_ref, krt_stream_read_avx2, krt_stream_read_avx512};

/* ---- shared state of the jobs ---- */
static int var = 2, kvt;
static int64_t NH = 14, NKV = 2, HD = 64, MAXCTX, NCTX, CHUNK, NCH, T_PRE;
static int L = 24, cur_layer;
static void *kc[64], *vc[64];
static float *q, *out, *part, *ws[BENCH_MAXT], *stream_buf;
static int64_t stream_n;
static float stream_sink[BENCH_MAXT];

static void job_stream(int ith, int nth) {
    int64_t a = stream_n * ith / nth, b = stream_n * (ith + 1) / nth;
    stream_of[var](&stream_sink[ith], stream_buf, a, b);
}

static void job_decode(int ith, int nth) {
    const int64_t U = NKV * NCH;
    decode_of[var][kvt](out, part, q, kc[cur_layer], vc[cur_layer], ws[ith], &nocap, KRT_ATTN_HEADS(NH, NKV), HD, MAXCTX, NCTX, CHUNK,
                        U * ith / nth, U * (ith + 1) / nth);
}
static void job_merge(int ith, int nth) {
    merge_of[var](out, part, NH, HD, NCH, NH * ith / nth, NH * (ith + 1) / nth);
}
static void job_prefill(int ith, int nth) {
    const int64_t U = NKV * ((T_PRE + KRT_ATTN_QTILE - 1) / KRT_ATTN_QTILE);
    prefill_of[var][kvt](out, q, kc[0], vc[0], ws[ith], &nocap, KRT_ATTN_HEADS(NH, NKV), HD, MAXCTX, NH * HD, 0, T_PRE, U * ith / nth,
                         U * (ith + 1) / nth);
}

static double stream_gbs(int reps, double *best) {
    double t[64];
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        bench_run(job_stream);
        t[r] = now() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmpd);
    *best = stream_n * 4.0 / t[0] / 1e9;
    return stream_n * 4.0 / t[reps / 2] / 1e9;
}

static int64_t gcd(int64_t a, int64_t b) { return b ? gcd(b, a % b) : a; }

/* The chunk rule of docs/attention-design.md. */
static int64_t n_chunks_for(int64_t n_ctx, int64_t n_kv, int threads) {
    if (threads <= 1) return 1;
    int64_t c = threads / gcd(n_kv, threads);
    int64_t cmax = n_ctx / 256 > 1 ? n_ctx / 256 : 1;
    return c < cmax ? c : cmax;
}

static void parse_list(const char *s, int64_t *v, int *n) {
    *n = 0;
    while (*s && *n < 32) {
        v[(*n)++] = strtoll(s, (char **)&s, 10);
        if (*s == ',') s++;
    }
}

int main(int argc, char **argv) {
    int reps = 9, quick = 0, force_chunks = 0, nd = 6, np = 3;
    int64_t depths[32] = {512, 1024, 2048, 4096, 8192, 16384}, pre[32] = {512, 2048, 8192};
    nthreads = 2; /* default: both cores of the machine kind CI runs on */
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-q")) quick = 1, reps = 5;
        else if (!strcmp(argv[i], "-cpuclock")) bench_clock = CLOCK_THREAD_CPUTIME_ID;
        else if (!strcmp(argv[i], "-threads") && i + 1 < argc) nthreads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-layers") && i + 1 < argc) L = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-chunks") && i + 1 < argc) force_chunks = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-depths") && i + 1 < argc) parse_list(argv[++i], depths, &nd);
        else if (!strcmp(argv[i], "-prefill") && i + 1 < argc) parse_list(argv[++i], pre, &np);
        else if (!strcmp(argv[i], "-variant") && i + 1 < argc) {
            ++i;
            var = !strcmp(argv[i], "ref") ? 0 : !strcmp(argv[i], "avx2") ? 1 : 2;
        } else if (!strcmp(argv[i], "-shape") && i + 1 < argc) {
            int64_t v[3];
            int n;
            parse_list(argv[++i], v, &n);
            if (n == 3) NH = v[0], NKV = v[1], HD = v[2];
        } else {
            fprintf(stderr, "usage: %s [-q] [-threads N] [-reps N] [-layers N] [-variant ref|avx2|avx512] "
                            "[-shape NH,NKV,HD] [-depths a,b,..] [-prefill a,b,..] [-chunks N] [-cpuclock]\n", argv[0]);
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > BENCH_MAXT || L < 1 || L > 64 || reps < 1 || reps > 64) return 2;
    if (quick) L = L > 8 ? 8 : L;
    __builtin_cpu_init();
    if (var == 2 && !__builtin_cpu_supports("avx512vnni")) var = 1;
    if (var >= 1 && !__builtin_cpu_supports("avx2")) var = 0;
    static const char *vname[3] = {"ref", "avx2", "avx512"};
    bench_pool_start(nthreads);
    for (int i = 0; i < nthreads; i++) ws[i] = aligned_alloc(64, sizeof(float) * (size_t)KRT_ATTN_SCRATCH_FLOATS(HD));

    int64_t maxd = 0;
    for (int i = 0; i < nd; i++) maxd = depths[i] > maxd ? depths[i] : maxd;
    for (int i = 0; i < np; i++) maxd = pre[i] > maxd ? pre[i] : maxd;
    MAXCTX = maxd;
    stream_n = (int64_t)1 << 28; /* 1 GiB */
    stream_buf = big_alloc((size_t)stream_n * 4);
    for (int64_t i = 0; i < stream_n; i++) stream_buf[i] = 1.0f;
    const int64_t qn = (maxd > 1 ? maxd : 1) * NH * HD;
    q = aligned_alloc(64, sizeof(float) * (size_t)qn);
    out = aligned_alloc(64, sizeof(float) * (size_t)qn);
    for (int64_t i = 0; i < qn; i++) q[i] = rndf();
    part = aligned_alloc(64, sizeof(float) * (size_t)(NH * 1024 * KRT_ATTN_PART_STRIDE(HD)));

    printf("bench_attn: variant %s, %d threads, shape %lld heads / %lld kv heads / head_dim %lld, %d layers\n",
           vname[var], nthreads, (long long)NH, (long long)NKV, (long long)HD, L);
    double sbest0, s0 = stream_gbs(reps, &sbest0);
    printf("stream read 1 GiB: median %.1f GB/s, best %.1f\n\n", s0, sbest0);

    /* ---- decode ---- */
    double dec_best[3][32];
    printf("%-5s %7s %6s %9s %9s %9s %6s %9s\n", "kv", "depth", "chunks", "us/step", "us/layer", "GB/s", "%str",
           "best GB/s");
    const int64_t src_w = NKV * HD;
    float *src = malloc(sizeof(float) * (size_t)(src_w * 1024));
    for (int64_t i = 0; i < src_w * 1024; i++) src[i] = rndf();
    for (kvt = 0; kvt < 3; kvt++) {
        const size_t bytes = row_bytes(kvt, HD) * (size_t)(NKV * MAXCTX);
        for (int l = 0; l < L; l++) {
            kc[l] = big_alloc(bytes);
            vc[l] = big_alloc(bytes);
            for (int64_t p = 0; p < MAXCTX; p += 1024) {
                int64_t n = MAXCTX - p < 1024 ? MAXCTX - p : 1024;
                append_of[kvt](kc[l], src, src_w, NKV, HD, MAXCTX, p, 0, n);
                append_of[kvt](vc[l], src, src_w, NKV, HD, MAXCTX, p, 0, n);
            }
        }
        for (int di = 0; di < nd; di++) {
            NCTX = depths[di];
            NCH = force_chunks > 0 ? force_chunks : n_chunks_for(NCTX, NKV, nthreads);
            if (NCH > 1024) NCH = 1024;
            CHUNK = (NCTX + NCH - 1) / NCH;
            CHUNK = (CHUNK + 63) / 64 * 64;
            NCH = (NCTX + CHUNK - 1) / CHUNK;
            double t[64];
            for (int r = 0; r < reps; r++) {
                double t0 = now();
                for (cur_layer = 0; cur_layer < L; cur_layer++) {
                    bench_run(job_decode);
                    if (NCH > 1) bench_run(job_merge);
                }
                t[r] = now() - t0;
            }
            qsort(t, (size_t)reps, sizeof t[0], cmpd);
            const double gb = 2.0 * row_bytes(kvt, HD) * (double)(NKV * NCTX) * L / 1e9;
            dec_best[kvt][di] = gb / t[0];
            printf("%-5s %7lld %6lld %9.1f %9.2f %9.2f %5.0f%% %9.2f\n", kvname[kvt], (long long)NCTX, (long long)NCH,
                   t[reps / 2] * 1e6, t[reps / 2] * 1e6 / L, gb / t[reps / 2], 100.0 * gb / t[reps / 2] / sbest0,
                   gb / t[0]);
        }
        for (int l = 0; l < L; l++) {
            big_free(kc[l], bytes);
            big_free(vc[l], bytes);
        }
    }
    double sbest1, s1 = stream_gbs(reps, &sbest1);
    const double sbest = sbest0 > sbest1 ? sbest0 : sbest1;
    printf("\nstream read again: median %.1f GB/s, best %.1f\n", s1, sbest1);
    printf("best decode GB/s as %% of the best stream read (%.1f GB/s):\n%-7s", sbest, "depth");
    for (int di = 0; di < nd; di++) printf(" %7lld", (long long)depths[di]);
    printf("\n");
    for (int k = 0; k < 3; k++) {
        printf("%-7s", kvname[k]);
        for (int di = 0; di < nd; di++) printf(" %6.0f%%", 100.0 * dec_best[k][di] / sbest);
        printf("\n");
    }

    /* ---- prefill ---- */
    printf("\n%-5s %7s %10s %9s %9s\n", "kv", "T", "ms", "GFLOP/s", "best");
    for (kvt = 0; kvt < 3; kvt++) {
        const size_t bytes = row_bytes(kvt, HD) * (size_t)(NKV * MAXCTX);
        kc[0] = big_alloc(bytes);
        vc[0] = big_alloc(bytes);
        for (int64_t p = 0; p < MAXCTX; p += 1024) {
            int64_t n = MAXCTX - p < 1024 ? MAXCTX - p : 1024;
            append_of[kvt](kc[0], src, src_w, NKV, HD, MAXCTX, p, 0, n);
            append_of[kvt](vc[0], src, src_w, NKV, HD, MAXCTX, p, 0, n);
        }
        for (int pi = 0; pi < np; pi++) {
            T_PRE = pre[pi];
            const int rr = T_PRE >= 8192 ? (reps < 3 ? reps : 3) : reps;
            double t[64];
            for (int r = 0; r < rr; r++) {
                double t0 = now();
                bench_run(job_prefill);
                t[r] = now() - t0;
            }
            qsort(t, (size_t)rr, sizeof t[0], cmpd);
            const double flop = 4.0 * NH * HD * (double)T_PRE * (double)(T_PRE + 1) / 2.0;
            printf("%-5s %7lld %10.2f %9.1f %9.1f\n", kvname[kvt], (long long)T_PRE, t[rr / 2] * 1e3,
                   flop / t[rr / 2] / 1e9, flop / t[0] / 1e9);
        }
        big_free(kc[0], bytes);
        big_free(vc[0], bytes);
    }
    bench_pool_stop();
    return 0;
}
