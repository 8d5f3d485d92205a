/* csrc/tests/oracle_kquant.c - checks the Q4_0 / Q4_1 / Q5_1 / K-quant / Q8_K quantizers and
 * dequantizers against ggml itself, through an external oracle program (not a ctest: it needs a
 * llama.cpp build). The oracle `qref` runs ggml's reference code:
 *   qref quant TYPE ref|chunk NCOLS < f32 > blocks      qref dequant TYPE < blocks > f32
 * (qref lives outside this project, e.g. /work/oracle/qref/qref, built against llama.cpp c392e509).
 *
 *   cc -O2 -std=c11 -D_GNU_SOURCE -Icsrc csrc/tests/oracle_kquant.c build/c/libkernelrt_c.a -lm -o /tmp/oracle_kquant
 *   /tmp/oracle_kquant /path/to/qref [blocks]
 *
 * For every type: many random and adversarial blocks (zeros, signed zeros, ties, integer grids,
 * constant blocks, all-positive / all-negative, single values, huge, tiny, float subnormals,
 * mixed magnitudes inside a super-block, NaN / Inf). Finite blocks: our bytes must equal ggml's
 * (_ref, _avx2, _avx512). Blocks holding NaN / Inf: ggml's output is not compared (it has no rule);
 * ours must be the poisoned block. Dequantize: our floats for ggml's bytes must equal ggml's, bit for
 * bit, on the same inputs. Exit status 0 = everything matched.
 */
#define _DEFAULT_SOURCE 1
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelrt.h"
#include "kq_inputs.h"

static const char *kname[KQ_NKINDS] = {"random", "outlier", "zero", "negzero", "single", "ties", "grid", "const",
                                       "pos", "neg", "huge", "tiny", "subnormal", "signtie", "mixed", "nan"};

typedef void (*qfn)(void *, const float *, int64_t, int64_t);
typedef void (*dfn)(float *, const void *, int64_t, int64_t);

#define V3(f) {(qfn)f##_ref, (qfn)f##_avx2, (qfn)f##_avx512}
#define D3(f) {(dfn)f##_ref, (dfn)f##_avx2, (dfn)f##_avx512}

static const struct {
    const char *name;
    int qk, bytes;
    qfn q[3];
    dfn d[3];
} types[] = {
    {"q4_0", 32, 18, V3(krt_quantize_q4_0), D3(krt_dequantize_q4_0)},
    {"q4_1", 32, 20, V3(krt_quantize_q4_1), D3(krt_dequantize_q4_1)},
    {"q5_1", 32, 24, V3(krt_quantize_q5_1), D3(krt_dequantize_q5_1)},
    {"q4_K", 256, 144, V3(krt_quantize_q4_K), D3(krt_dequantize_q4_K)},
    {"q5_K", 256, 176, V3(krt_quantize_q5_K), D3(krt_dequantize_q5_K)},
    {"q6_K", 256, 210, V3(krt_quantize_q6_K), D3(krt_dequantize_q6_K)},
    {"q8_K", 256, 292, V3(krt_quantize_q8_K), D3(krt_dequantize_q8_K)},
};
static const char *vname[3] = {"ref", "avx2", "avx512"};

static char *cmd_quant(char *buf, size_t n, const char *qref, const char *type) {
    snprintf(buf, n, "%s quant %s ref", qref, type);
    return buf;
}

static int run(const char *cmd, const void *in, size_t inb, void *out, size_t outb) {
    const char *fi = "/tmp/oracle_kquant.in", *fo = "/tmp/oracle_kquant.out";
    FILE *f = fopen(fi, "wb");
    if (!f || fwrite(in, 1, inb, f) != inb) return -1;
    fclose(f);
    char buf[512];
    snprintf(buf, sizeof buf, "%s < %s > %s", cmd, fi, fo);
    if (system(buf) != 0) return -1;
    f = fopen(fo, "rb");
    if (!f) return -1;
    size_t got = fread(out, 1, outb, f);
    fclose(f);
    return got == outb ? 0 : -1;
}

int main(int argc, char **argv) {
    const char *qref = argc > 1 ? argv[1] : "/work/oracle/qref/qref";
    const int nsb = argc > 2 ? atoi(argv[2]) : 4096; /* super-blocks of 256 values */
    __builtin_cpu_init();
    int have[3] = {1, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"), 0};
    have[2] = have[1] && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
              __builtin_cpu_supports("avx512vnni");
    int fails = 0;
    const int n = nsb * 256;
    float *x = malloc(sizeof(float) * n), *dg = malloc(sizeof(float) * n), *dk = malloc(sizeof(float) * n);
    int *bad = malloc(sizeof(int) * n / 32), *kind = malloc(sizeof(int) * n / 32);
    uint8_t *g = malloc((size_t)nsb * 292 * 8), *k = malloc((size_t)nsb * 292 * 8), *gc = malloc((size_t)nsb * 292 * 8);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        const int qk = types[t].qk, bytes = types[t].bytes, nb = n / qk;
        uint64_t st = 0x243F6A8885A308D3ull + t;
        for (int b = 0; b < nb; b++) {
            kind[b] = b < 64 * KQ_NKINDS ? b % KQ_NKINDS : kq_irand(&st, 0, KQ_NKINDS - 1);
            kq_fill(x + (size_t)b * qk, qk, kind[b], &st);
            bad[b] = kq_nonfinite(x + (size_t)b * qk, qk); /* NaN / Inf, also from overflowed huge values */
        }
        char cmd[300];
        snprintf(cmd, sizeof cmd, "%s quant %s ref", qref, types[t].name);
        if (run(cmd, x, sizeof(float) * n, g, (size_t)nb * bytes)) {
            printf("%s: oracle failed\n", types[t].name);
            return 2;
        }
        int chunk_ok = -1; /* llama-quantize's path (ggml_quantize_chunk, no imatrix) equals _ref */
        if (strcmp(types[t].name, "q8_K")) {
            snprintf(cmd, sizeof cmd, "%s quant %s chunk %d", qref, types[t].name, qk * 8);
            chunk_ok = run(cmd, x, sizeof(float) * n, gc, (size_t)nb * bytes) == 0;
            for (int b = 0; b < nb && chunk_ok; b++)
                if (!bad[b] && memcmp(g + (size_t)b * bytes, gc + (size_t)b * bytes, bytes)) chunk_ok = 0;
        }
        int nfinite = 0;
        for (int b = 0; b < nb; b++) nfinite += !bad[b];
        for (int v = 0; v < 3; v++) {
            if (!have[v]) continue;
            memset(k, 0x5a, (size_t)nb * bytes);
            types[t].q[v](k, x, 0, nb);
            int diff = 0, pois = 0;
            types[t].d[0](dk, (const void *)k, 0, nb);
            for (int b = 0; b < nb; b++) {
                const uint8_t *kb = k + (size_t)b * bytes, *gb = g + (size_t)b * bytes;
                if (bad[b]) { /* poisoned: the dequantized block must be all NaN */
                    for (int j = 0; j < qk; j++)
                        if (dk[(size_t)b * qk + j] == dk[(size_t)b * qk + j]) {
                            pois++;
                            break;
                        }
                    continue;
                }
                if (memcmp(kb, gb, bytes)) {
                    if (diff++ < 5) {
                        printf("  %s %s block %d (%s) differs:", types[t].name, vname[v], b, kname[kind[b]]);
                        for (int i = 0; i < bytes; i++)
                            if (kb[i] != gb[i]) {
                                printf(" [%d] %02x!=%02x", i, kb[i], gb[i]);
                                if (i > 40) break;
                            }
                        printf("\n");
                    }
                }
            }
            printf("%-5s quantize %-6s: %d/%d finite blocks byte-identical to ggml, %d poisoned blocks %s%s\n",
                   types[t].name, vname[v], nfinite - diff, nfinite, nb - nfinite, pois ? "NOT all NaN" : "all NaN",
                   v == 0 && chunk_ok >= 0 ? (chunk_ok ? " (ggml chunk == ggml ref)" : " (ggml chunk != ref!)") : "");
            fails += diff + pois;
        }
        { /* the checksum of ggml's bytes on the golden set that test_kquant.c embeds */
            const int gnb = qk == 32 ? 4096 : 512;
            kq_golden(x, gnb, qk, NULL);
            if (run(cmd_quant(cmd, sizeof cmd, qref, types[t].name), x, sizeof(float) * gnb * qk, gc, (size_t)gnb * bytes)) {
                printf("%s: oracle failed\n", types[t].name);
                return 2;
            }
            printf("%-5s golden checksum of ggml's bytes (%d blocks): 0x%016llxull\n", types[t].name, gnb,
                   (unsigned long long)kq_hash(gc, x, gnb, qk, bytes));
            st = 0x243F6A8885A308D3ull + t; /* regenerate the main set for the dequantize check */
            for (int b = 0; b < nb; b++) {
                kind[b] = b < 64 * KQ_NKINDS ? b % KQ_NKINDS : kq_irand(&st, 0, KQ_NKINDS - 1);
                kq_fill(x + (size_t)b * qk, qk, kind[b], &st);
            }
        }
        /* dequantize ggml's bytes */
        snprintf(cmd, sizeof cmd, "%s dequant %s", qref, types[t].name);
        if (run(cmd, g, (size_t)nb * bytes, dg, sizeof(float) * n)) {
            printf("%s: oracle dequant failed\n", types[t].name);
            return 2;
        }
        for (int v = 0; v < 3; v++) {
            if (!have[v]) continue;
            types[t].d[v](dk, (const void *)g, 0, nb);
            int diff = 0;
            for (int i = 0; i < n; i++) {
                if (bad[i / qk]) continue;
                if (memcmp(&dk[i], &dg[i], 4) && !(dk[i] != dk[i] && dg[i] != dg[i])) {
                    if (diff++ < 3) printf("  %s %s dequant [%d] %.9g != %.9g\n", types[t].name, vname[v], i, dk[i], dg[i]);
                }
            }
            printf("%-5s dequant  %-6s: %s (%d values differ)\n", types[t].name, vname[v], diff ? "FAIL" : "ok", diff);
            fails += diff;
        }
    }
    printf(fails ? "FAIL\n" : "PASS\n");
    return fails ? 1 : 0;
}
