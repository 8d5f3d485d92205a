/* csrc/tests/test_core.c - tests of quant.c, gemv.c, norm.c, stream.c (run by ctest).
 *
 * Every variant this CPU supports (__builtin_cpu_supports, here in the test only) is checked:
 *  - quantizers: _ref byte-identical to a transcription of ggml's reference quantizers (with
 *    libm roundf/fabsf) on defined inputs, every SIMD variant byte-identical to _ref on all
 *    inputs (random, rounding ties, all-zero / -0 blocks, sign ties, huge and tiny values,
 *    NaN/Inf poisoning); slices write only their blocks;
 *  - dequantize: every variant bit-identical to d * q computed here;
 *  - GEMV: against a float64 reference over the exact quantized values. Measure:
 *      |y - y_ref| <= 1e-5 * M,  M = sum_b |d_w d_x| * sum_j |q_w,j q_x,j| + |bias|,
 *    i.e. relative to the magnitude sum |w||x| (relative to |y| is meaningless under
 *    cancellation; float summation error is bounded by ~n*eps*M). NaN where the reference is
 *    NaN (poisoned blocks). Odd and unaligned row counts, slices r0..r1 with sentinels, guard
 *    pages right after the weight and activation buffers (no over-read), zero blocks,
 *    d = 65504, subnormal d, -128 weights;
 *  - rmsnorm / softmax: every output within 1e-6 relative of float64 (absolute floor 1e-37,
 *    below float's normal range); masked softmax tail exactly 0; rows outside the slice untouched.
 * Prints one PASS line per check; exits 1 on any failure.
 */
#define _DEFAULT_SOURCE 1 /* mmap MAP_ANONYMOUS, sysconf */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "krt_common.h"

enum { V_REF, V_AVX2, V_AVX512, NV };
static const char *vname[NV] = {"ref", "avx2", "avx512"};
static int have[NV];

static int g_fail = 0;
static int g_check_fail = 0;
#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            if (g_check_fail < 10) {                          \
                printf("  FAIL %s:%d: ", __FILE__, __LINE__); \
                printf(__VA_ARGS__);                          \
                printf("\n");                                 \
            }                                                 \
            g_check_fail++;                                   \
        }                                                     \
    } while (0)

static void report(const char *what, const char *variant) {
    if (g_check_fail) {
        printf("FAIL %-44s %-7s (%d mismatches)\n", what, variant, g_check_fail);
        g_fail++;
    } else {
        printf("PASS %-44s %s\n", what, variant);
    }
    g_check_fail = 0;
}

/* ---- random numbers ---- */
static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double urand(void) { return (double)(rnd() >> 11) * (1.0 / 9007199254740992.0); }
static float nrand(void) {
    double u = urand() + 1e-300, v = urand();
    return (float)(sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v));
}
static int irand(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }

static uint32_t fbits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }
static float bitsf(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }

/* ---- guarded buffers: the buffer ends exactly at a PROT_NONE page ---- */
typedef struct { void *base; size_t len; } gbuf;
static void *galloc(gbuf *g, size_t n) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = (n + ps - 1) / ps * ps;
    g->len = data + 2 * ps;
    g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->base == MAP_FAILED) { perror("mmap"); exit(2); }
    mprotect(g->base, ps, PROT_NONE);
    mprotect((char *)g->base + ps + data, ps, PROT_NONE);
    return (char *)g->base + ps + data - n;
}
static void gfree(gbuf *g) { munmap(g->base, g->len); }

/* ---- variant tables ---- */
typedef void (*quant8_fn)(krt_block_q8_0 *, const float *, int64_t, int64_t);
typedef void (*quant5_fn)(krt_block_q5_0 *, const float *, int64_t, int64_t);
typedef void (*deq8_fn)(float *, const krt_block_q8_0 *, int64_t, int64_t);
typedef void (*deq5_fn)(float *, const krt_block_q5_0 *, int64_t, int64_t);
typedef void (*gemv8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemv5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemv8f_fn)(float *, const krt_block_q8_0 *, const float *, krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemv5f_fn)(float *, const krt_block_q5_0 *, const float *, krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemvf_fn)(float *, const float *, const float *, int64_t, int64_t, int64_t);
typedef void (*rms_fn)(float *, const float *, const float *, const float *, int64_t, int64_t, int64_t);
typedef void (*smax_fn)(float *, const int32_t *, int64_t, int64_t, int64_t);
typedef void (*stream_fn)(float *, const float *, int64_t, int64_t);

#define VARIANTS(f) {f##_ref, f##_avx2, f##_avx512}
static const quant8_fn quant8[NV] = VARIANTS(krt_quantize_q8_0);
static const quant5_fn quant5[NV] = VARIANTS(krt_quantize_q5_0);
static const deq8_fn deq8[NV] = VARIANTS(krt_dequantize_q8_0);
static const deq5_fn deq5[NV] = VARIANTS(krt_dequantize_q5_0);
static const gemv8_fn gemv8[NV] = VARIANTS(krt_gemv_q8_0);
static const gemv5_fn gemv5[NV] = VARIANTS(krt_gemv_q5_0);
static const gemv8f_fn gemv8f[NV] = VARIANTS(krt_gemv_q8_0_f32);
static const gemv5f_fn gemv5f[NV] = VARIANTS(krt_gemv_q5_0_f32);
static const gemvf_fn gemvf[NV] = VARIANTS(krt_gemv_f32);
static const rms_fn rmsn[NV] = VARIANTS(krt_rmsnorm);
static const smax_fn smax[NV] = VARIANTS(krt_softmax);
static const stream_fn streamr[NV] = VARIANTS(krt_stream_read);

/* ---- ggml's reference quantizers, transcribed (libm allowed here) ---- */
static void ggml_quantize_q8_0(krt_block_q8_0 *y, const float *x) {
    float amax = 0.0f;
    for (int j = 0; j < 32; j++) {
        float v = fabsf(x[j]);
        amax = amax > v ? amax : v;
    }
    const float d = amax / 127.0f;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = krt_fp32_to_fp16(d);
    for (int j = 0; j < 32; j++) y->qs[j] = (int8_t)roundf(x[j] * id);
}

static void ggml_quantize_q5_0(krt_block_q5_0 *y, const float *x) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 32; j++) {
        const float v = x[j];
        if (amax < fabsf(v)) { amax = fabsf(v); max = v; }
    }
    const float d = max / -16.0f;
    const float id = d ? 1.0f / d : 0.0f;
    y->d = krt_fp32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < 16; j++) {
        const float x0 = x[j] * id;
        const float x1 = x[16 + j] * id;
        int a = (int8_t)(x0 + 16.5f), b = (int8_t)(x1 + 16.5f);
        const uint8_t xi0 = (uint8_t)(a < 31 ? a : 31);
        const uint8_t xi1 = (uint8_t)(b < 31 ? b : 31);
        y->qs[j] = (uint8_t)((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
        qh |= ((xi0 & 0x10u) >> 4) << (j + 0);
        qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    memcpy(y->qh, &qh, 4);
}

/* ---- test data for the quantizers: nb blocks of assorted kinds ---- */
enum { QK_RANDOM, QK_TIES8, QK_TIES5, QK_ZERO, QK_NEGZERO, QK_SIGNTIE, QK_HUGE, QK_TINY, QK_SUBN, QK_NAN, QK_SINGLE, QK_NKINDS };

static int fill_block(float *x, int kind) {
    int defined = 1; /* inputs on which ggml's reference is well defined */
    switch (kind) {
    case QK_RANDOM: {
        float sc = (float)pow(10.0, urand() * 8 - 4);
        for (int j = 0; j < 32; j++) x[j] = nrand() * sc;
        break;
    }
    case QK_TIES8: { /* d = 2^e exactly, x*id = k + 0.5 exactly */
        float s = ldexpf(1.0f, irand(-20, 20));
        for (int j = 0; j < 32; j++) x[j] = ((float)irand(-127, 126) + 0.5f) * s;
        x[irand(0, 31)] = (rnd() & 1 ? 127.0f : -127.0f) * s;
        break;
    }
    case QK_TIES5: { /* d = 2^e exactly, x*id + 16.5 an integer or k + 0.5 +- tiny */
        float s = ldexpf(1.0f, irand(-20, 20));
        for (int j = 0; j < 32; j++) {
            float v = (float)irand(-16, 15) + (rnd() & 1 ? 0.5f : 0.0f);
            if (rnd() % 4 == 0) v = nextafterf(v, rnd() & 1 ? 100.0f : -100.0f);
            if (v > 16.0f) v = 16.0f;
            if (v < -16.0f) v = -16.0f;
            x[j] = v * s;
        }
        x[irand(0, 31)] = (rnd() & 1 ? 16.0f : -16.0f) * s;
        break;
    }
    case QK_ZERO: for (int j = 0; j < 32; j++) x[j] = 0.0f; break;
    case QK_NEGZERO: for (int j = 0; j < 32; j++) x[j] = rnd() & 1 ? -0.0f : 0.0f; break;
    case QK_SIGNTIE: { /* several elements of the largest magnitude with both signs */
        float m = nrand() * 3.0f + 0.1f;
        for (int j = 0; j < 32; j++) x[j] = nrand() * 0.5f * m;
        for (int t = 0; t < 4; t++) x[irand(0, 31)] = rnd() & 1 ? m : -m;
        break;
    }
    case QK_HUGE: { /* d beyond fp16 range (Inf) or near 65504 */
        float sc = (float)pow(10.0, 5.0 + urand() * 25);
        for (int j = 0; j < 32; j++) x[j] = nrand() * sc;
        break;
    }
    case QK_TINY: { /* fp16 subnormal / zero d */
        float sc = (float)pow(10.0, -12.0 + urand() * 8);
        for (int j = 0; j < 32; j++) x[j] = nrand() * sc;
        break;
    }
    case QK_SUBN: { /* float-subnormal inputs: ggml's quants are undefined here (1/d overflows) */
        for (int j = 0; j < 32; j++) x[j] = bitsf((uint32_t)(rnd() & 0x807fffffu));
        if (rnd() & 1) x[0] = 1e-37f;
        defined = 0;
        break;
    }
    case QK_NAN: {
        for (int j = 0; j < 32; j++) x[j] = nrand();
        int p = irand(0, 31);
        int k = irand(0, 2);
        x[p] = k == 0 ? NAN : (k == 1 ? INFINITY : -INFINITY);
        defined = 0;
        break;
    }
    case QK_SINGLE:
        for (int j = 0; j < 32; j++) x[j] = 0.0f;
        x[irand(0, 31)] = nrand();
        break;
    }
    return defined;
}

__attribute__((target("f16c"))) static void test_fp16_f16c(void) {
    for (int i = 0; i < 200000; i++) {
        float f = i < 100000 ? bitsf((uint32_t)rnd()) : nrand() * (float)pow(2.0, irand(-30, 20));
        if (f != f) continue;
        uint16_t a = krt_fp32_to_fp16(f);
        uint16_t b = (uint16_t)_cvtss_sh(f, 0);
        CHECK(a == b, "fp16(%g) = %04x, F16C %04x", f, a, b);
        float back = krt_fp16_to_fp32(a);
        CHECK(fbits(back) == fbits(_cvtsh_ss(a)), "fp16->fp32 %04x", a);
    }
    report("krt_fp32_to_fp16 / fp16_to_fp32 == F16C", "");
}

static void test_quantize(void) {
    const int nb = 32768;
    float *x = malloc(sizeof(float) * 32 * nb);
    int *defined = malloc(sizeof(int) * nb), *kind = malloc(sizeof(int) * nb);
    for (int b = 0; b < nb; b++) {
        kind[b] = b < QK_NKINDS * 64 ? b % QK_NKINDS : QK_RANDOM;
        defined[b] = fill_block(x + 32 * b, kind[b]);
    }
    krt_block_q8_0 *q8r = calloc(nb, sizeof *q8r), *q8v = calloc(nb + 2, sizeof *q8v), *g8 = calloc(nb, sizeof *g8);
    krt_block_q5_0 *q5r = calloc(nb, sizeof *q5r), *q5v = calloc(nb + 2, sizeof *q5v), *g5 = calloc(nb, sizeof *g5);

    /* the fp16 converter everything relies on agrees with F16C (vcvtps2ph, imm 0) */
    if (have[V_AVX2]) test_fp16_f16c();

    /* _ref against the ggml transcription */
    quant8[V_REF](q8r, x, 0, nb);
    quant5[V_REF](q5r, x, 0, nb);
    int ndef = 0;
    for (int b = 0; b < nb; b++) {
        if (!defined[b]) continue;
        ndef++;
        ggml_quantize_q8_0(g8 + b, x + 32 * b);
        ggml_quantize_q5_0(g5 + b, x + 32 * b);
        CHECK(memcmp(g8 + b, q8r + b, sizeof *g8) == 0, "q8_0 ref != ggml, block %d kind %d", b, kind[b]);
        CHECK(memcmp(g5 + b, q5r + b, sizeof *g5) == 0, "q5_0 ref != ggml, block %d kind %d", b, kind[b]);
    }
    char what[96];
    snprintf(what, sizeof what, "quantize q8_0/q5_0 ref == ggml (%d blocks)", ndef);
    report(what, "ref");

    /* specific expectations */
    {
        float t[32];
        for (int j = 0; j < 32; j++) t[j] = 0.0f;
        t[0] = 127.0f; t[1] = 2.5f; t[2] = -2.5f; t[3] = 0.5f; t[4] = -0.5f; t[5] = 126.5f; t[6] = -126.5f;
        krt_block_q8_0 b8;
        quant8[V_REF](&b8, t, 0, 1);
        CHECK(b8.d == 0x3c00 && b8.qs[1] == 3 && b8.qs[2] == -3 && b8.qs[3] == 1 && b8.qs[4] == -1 &&
                  b8.qs[5] == 127 && b8.qs[6] == -127, "q8_0 ties round half away from zero");
        for (int j = 0; j < 32; j++) t[j] = 0.0f;
        t[0] = -16.0f; t[1] = 3.0f; t[2] = -3.0f; /* max = -16: d = 1, id = 1 */
        krt_block_q5_0 b5;
        quant5[V_REF](&b5, t, 0, 1);
        uint32_t qh;
        memcpy(&qh, b5.qh, 4);
        CHECK(b5.d == 0x3c00, "q5_0 d = 1 (%04x)", b5.d);
        /* q = trunc(x*id + 16.5) with id = 1: 3 -> 19, -3 -> 13, -16 -> 0, 0 -> 16 */
        CHECK((b5.qs[1] & 15) == (19 & 15) && ((qh >> 1) & 1) == 1, "q5_0 q(3)");
        CHECK((b5.qs[2] & 15) == 13 && ((qh >> 2) & 1) == 0, "q5_0 q(-3)");
        CHECK((b5.qs[0] & 15) == 0 && (qh & 1) == 0, "q5_0 q(-16)");
        CHECK((b5.qs[3] & 15) == 0 && ((qh >> 3) & 1) == 1, "q5_0 q(0)");
        float z[32];
        for (int j = 0; j < 32; j++) z[j] = 0.0f;
        quant5[V_REF](&b5, z, 0, 1);
        memcpy(&qh, b5.qh, 4);
        CHECK(b5.d == 0x8000 && qh == 0xffffffffu && b5.qs[0] == 0, "q5_0 zero block: d=-0, q=16");
        float s[32];
        for (int j = 0; j < 32; j++) s[j] = 0.25f;
        s[7] = -2.0f; s[9] = 2.0f;
        quant5[V_REF](&b5, s, 0, 1);
        CHECK(b5.d == krt_fp32_to_fp16(-2.0f / -16.0f), "q5_0 sign tie: first wins");
        z[5] = NAN;
        quant8[V_REF](&b8, z, 0, 1);
        quant5[V_REF](&b5, z, 0, 1);
        memcpy(&qh, b5.qh, 4);
        int allz = 1;
        for (int j = 0; j < 32; j++) allz &= b8.qs[j] == 0;
        for (int j = 0; j < 16; j++) allz &= b5.qs[j] == 0;
        CHECK(b8.d == 0x7e00 && b5.d == 0x7e00 && qh == 0xffffffffu && allz, "poisoned block layout");
        report("quantize ties / zero / sign tie / poison layout", "ref");
    }

    for (int v = V_AVX2; v < NV; v++) {
        if (!have[v]) continue;
        memset(q8v, 0xa5, sizeof *q8v * (nb + 2));
        memset(q5v, 0xa5, sizeof *q5v * (nb + 2));
        quant8[v](q8v + 1, x, 0, nb);
        quant5[v](q5v + 1, x, 0, nb);
        for (int b = 0; b < nb; b++) {
            CHECK(memcmp(q8v + 1 + b, q8r + b, sizeof *q8r) == 0, "q8_0 %s != ref, block %d kind %d", vname[v], b, kind[b]);
            CHECK(memcmp(q5v + 1 + b, q5r + b, sizeof *q5r) == 0, "q5_0 %s != ref, block %d kind %d", vname[v], b, kind[b]);
        }
        const uint8_t *g0 = (const uint8_t *)q8v, *g1 = (const uint8_t *)(q8v + nb + 1);
        for (size_t i = 0; i < sizeof *q8v; i++) CHECK(g0[i] == 0xa5 && g1[i] == 0xa5, "q8_0 wrote outside");
        /* a slice writes only its blocks */
        memset(q8v, 0xa5, sizeof *q8v * (nb + 2));
        memset(q5v, 0xa5, sizeof *q5v * (nb + 2));
        quant8[v](q8v + 1, x, 100, 233);
        quant5[v](q5v + 1, x, 100, 233);
        for (int b = 0; b < nb + 2; b++) {
            int in = b - 1 >= 100 && b - 1 < 233;
            if (in) {
                CHECK(memcmp(q8v + b, q8r + b - 1, sizeof *q8r) == 0, "slice q8 %d", b);
                CHECK(memcmp(q5v + b, q5r + b - 1, sizeof *q5r) == 0, "slice q5 %d", b);
            } else {
                const uint8_t *p8 = (const uint8_t *)(q8v + b), *p5 = (const uint8_t *)(q5v + b);
                for (size_t i = 0; i < sizeof *q8v; i++) CHECK(p8[i] == 0xa5, "slice q8 wrote block %d", b);
                for (size_t i = 0; i < sizeof *q5v; i++) CHECK(p5[i] == 0xa5, "slice q5 wrote block %d", b);
            }
        }
        snprintf(what, sizeof what, "quantize q8_0/q5_0 byte-identical to ref (%d)", nb);
        report(what, vname[v]);
    }

    /* dequantize: bit-identical to d * q, for all variants; includes NaN (poisoned) blocks */
    float *dq = malloc(sizeof(float) * 32 * (nb + 2));
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        for (int t = 0; t < 2; t++) {
            for (int i = 0; i < 32 * (nb + 2); i++) dq[i] = 12345.0f;
            int b0 = t ? 7 : 0, b1 = t ? 1000 : nb;
            if (t == 0) deq8[v](dq + 32, q8r, b0, b1); else deq5[v](dq + 32, q5r, b0, b1);
            for (int b = -1; b <= nb; b++) {
                for (int j = 0; j < 32; j++) {
                    float got = dq[32 + 32 * b + j];
                    if (b < b0 || b >= b1) { CHECK(got == 12345.0f, "dequant wrote outside b=%d", b); continue; }
                    float want;
                    if (t == 0) {
                        want = krt_fp16_to_fp32(q8r[b].d) * (float)q8r[b].qs[j];
                    } else {
                        uint32_t qh;
                        memcpy(&qh, q5r[b].qh, 4);
                        int nib = j < 16 ? (q5r[b].qs[j] & 15) : (q5r[b].qs[j - 16] >> 4);
                        int q = nib | (int)(((qh >> j) & 1u) << 4);
                        want = krt_fp16_to_fp32(q5r[b].d) * (float)(q - 16);
                    }
                    CHECK(fbits(got) == fbits(want) || (got != got && want != want), "dequant %s b=%d j=%d: %g vs %g",
                          t ? "q5" : "q8", b, j, got, want);
                    if (kind[b] == QK_NAN) CHECK(got != got, "poisoned block dequantizes to NaN");
                }
            }
        }
        report("dequantize q8_0/q5_0 exact (slices, NaN blocks)", vname[v]);
    }
    free(dq);
    free(x); free(defined); free(kind);
    free(q8r); free(q8v); free(g8); free(q5r); free(q5v); free(g5);
}

/* ---- GEMV ---- */

static uint16_t rand_d(void) {
    int k = irand(0, 99);
    if (k < 3) return 0x7bff;                          /* 65504 */
    if (k < 6) return (uint16_t)irand(1, 0x3ff);       /* subnormal */
    if (k < 8) return 0;
    float f = (float)pow(2.0, -14.0 + urand() * 20.0) * (rnd() & 1 ? 1.0f : -1.0f);
    return krt_fp32_to_fp16(f);
}

static void fill_w8(krt_block_q8_0 *w, int64_t n, int special) {
    for (int64_t i = 0; i < n; i++) {
        w[i].d = krt_fp32_to_fp16((float)pow(2.0, -12.0 + urand() * 6.0));
        for (int j = 0; j < 32; j++) w[i].qs[j] = (int8_t)(rnd() & 0xff); /* full range incl. -128 */
        if (special) {
            int k = irand(0, 19);
            if (k == 0) { w[i].d = 0; memset(w[i].qs, 0, 32); }
            else if (k == 1) w[i].d = rand_d();
            else if (k == 2) for (int j = 0; j < 32; j++) w[i].qs[j] = rnd() & 1 ? -128 : 127;
        }
    }
}

static void fill_w5(krt_block_q5_0 *w, int64_t n, int special) {
    for (int64_t i = 0; i < n; i++) {
        w[i].d = krt_fp32_to_fp16((float)pow(2.0, -12.0 + urand() * 6.0));
        uint32_t qh = (uint32_t)rnd();
        memcpy(w[i].qh, &qh, 4);
        for (int j = 0; j < 16; j++) w[i].qs[j] = (uint8_t)rnd();
        if (special) {
            int k = irand(0, 19);
            if (k == 0) { w[i].d = 0; }
            else if (k == 1) w[i].d = rand_d();
            else if (k == 2) { memset(w[i].qs, rnd() & 1 ? 0 : 0xff, 16); memset(w[i].qh, rnd() & 1 ? 0 : 0xff, 4); }
        }
    }
}

/* activations as the quantizer makes them: quants in [-127, 127] */
static void fill_x8(krt_block_q8_0 *x, int64_t n, int special) {
    for (int64_t i = 0; i < n; i++) {
        x[i].d = krt_fp32_to_fp16((float)pow(2.0, -8.0 + urand() * 6.0));
        for (int j = 0; j < 32; j++) x[i].qs[j] = (int8_t)irand(-127, 127);
        if (special) {
            int k = irand(0, 9);
            if (k == 0) { x[i].d = 0; memset(x[i].qs, 0, 32); }
            else if (k == 1) x[i].d = rand_d();
            else if (k == 2) for (int j = 0; j < 32; j++) x[i].qs[j] = rnd() & 1 ? -127 : 127;
        }
    }
}

static int w5q(const krt_block_q5_0 *b, int j) {
    uint32_t qh;
    memcpy(&qh, b->qh, 4);
    int nib = j < 16 ? (b->qs[j] & 15) : (b->qs[j - 16] >> 4);
    return (nib | (int)(((qh >> j) & 1u) << 4)) - 16;
}

/* float64 reference: y and magnitude M */
static void ref_gemv(double *y, double *mag, const void *w, int is5, const krt_block_q8_0 *x, const float *bias,
                     int64_t cols, int64_t rows) {
    int64_t nb = cols / 32;
    for (int64_t r = 0; r < rows; r++) {
        double acc = 0.0, m = 0.0;
        for (int64_t b = 0; b < nb; b++) {
            int64_t isum = 0, iabs = 0;
            uint16_t dw;
            if (is5) {
                const krt_block_q5_0 *wb = (const krt_block_q5_0 *)w + r * nb + b;
                dw = wb->d;
                for (int j = 0; j < 32; j++) {
                    int p = w5q(wb, j) * x[b].qs[j];
                    isum += p; iabs += p < 0 ? -p : p;
                }
            } else {
                const krt_block_q8_0 *wb = (const krt_block_q8_0 *)w + r * nb + b;
                dw = wb->d;
                for (int j = 0; j < 32; j++) {
                    int p = wb->qs[j] * x[b].qs[j];
                    isum += p; iabs += p < 0 ? -p : p;
                }
            }
            double s = (double)krt_fp16_to_fp32(dw) * (double)krt_fp16_to_fp32(x[b].d);
            acc += s * (double)isum;
            m += fabs(s) * (double)iabs;
        }
        if (bias) { acc += bias[r]; m += fabs(bias[r]); }
        y[r] = acc;
        mag[r] = m;
    }
}

static int close_gemv(float got, double want, double mag) {
    if (want != want) return got != got;
    return fabs((double)got - want) <= 1e-5 * mag + 1e-30;
}

static void test_gemv_shape(int v, int is5, int64_t rows, int64_t cols, int special, int use_bias) {
    int64_t nb = cols / 32;
    size_t wbytes = (size_t)(rows * nb) * (is5 ? sizeof(krt_block_q5_0) : sizeof(krt_block_q8_0));
    gbuf gw, gx, gf, gq;
    void *w = galloc(&gw, wbytes);
    krt_block_q8_0 *x = galloc(&gx, sizeof(krt_block_q8_0) * nb);
    if (is5) fill_w5(w, rows * nb, special); else fill_w8(w, rows * nb, special);
    fill_x8(x, nb, special);
    float *bias = NULL;
    if (use_bias) {
        bias = malloc(sizeof(float) * rows);
        for (int64_t r = 0; r < rows; r++) bias[r] = nrand();
    }
    double *yr = malloc(sizeof(double) * rows), *mag = malloc(sizeof(double) * rows);
    ref_gemv(yr, mag, w, is5, x, bias, cols, rows);
    float *y = malloc(sizeof(float) * (rows + 2));
    /* whole range, then random slices */
    for (int t = 0; t < 4; t++) {
        int64_t r0 = 0, r1 = rows;
        if (t > 0) {
            r0 = irand(0, (int)rows - 1);
            r1 = irand((int)r0 + 1, (int)rows);
        }
        for (int64_t i = 0; i < rows + 2; i++) y[i] = -777.0f;
        if (is5) gemv5[v](y + 1, w, x, bias, cols, r0, r1);
        else gemv8[v](y + 1, w, x, bias, cols, r0, r1);
        for (int64_t i = -1; i <= rows; i++) {
            float got = y[1 + i];
            if (i < r0 || i >= r1) { CHECK(got == -777.0f, "gemv wrote row %lld outside [%lld,%lld)", (long long)i, (long long)r0, (long long)r1); continue; }
            CHECK(close_gemv(got, yr[i], mag[i]), "%s %lldx%lld row %lld: got %.9g want %.9g (M %.3g)", is5 ? "q5" : "q8",
                  (long long)rows, (long long)cols, (long long)i, got, yr[i], mag[i]);
        }
    }
    /* fused: quantize random floats, then GEMV */
    float *xf = galloc(&gf, sizeof(float) * cols);
    for (int64_t i = 0; i < cols; i++) xf[i] = nrand() * (i % 97 == 0 ? 8.0f : 1.0f);
    krt_block_q8_0 *xq = galloc(&gq, sizeof(krt_block_q8_0) * nb);
    krt_block_q8_0 *xq_ref = malloc(sizeof(krt_block_q8_0) * nb);
    quant8[V_REF](xq_ref, xf, 0, nb);
    ref_gemv(yr, mag, w, is5, xq_ref, bias, cols, rows);
    int64_t r0 = rows > 3 ? 1 : 0, r1 = rows;
    for (int64_t i = 0; i < rows + 2; i++) y[i] = -777.0f;
    if (is5) gemv5f[v](y + 1, w, xf, xq, bias, cols, r0, r1);
    else gemv8f[v](y + 1, w, xf, xq, bias, cols, r0, r1);
    CHECK(memcmp(xq, xq_ref, sizeof(krt_block_q8_0) * nb) == 0, "fused: xq differs from ref quantization");
    for (int64_t i = -1; i <= rows; i++) {
        float got = y[1 + i];
        if (i < r0 || i >= r1) { CHECK(got == -777.0f, "fused gemv wrote outside"); continue; }
        CHECK(close_gemv(got, yr[i], mag[i]), "fused %s row %lld: got %.9g want %.9g", is5 ? "q5" : "q8", (long long)i, got, yr[i]);
    }
    gfree(&gw); gfree(&gx); gfree(&gf); gfree(&gq);
    free(bias); free(yr); free(mag); free(y); free(xq_ref);
}

static void test_gemv_poison(int v, int is5) {
    const int64_t rows = 11, cols = 128, nb = 4;
    krt_block_q8_0 w8[44];
    krt_block_q5_0 w5[44];
    krt_block_q8_0 x[4];
    fill_w8(w8, rows * nb, 0);
    fill_w5(w5, rows * nb, 0);
    fill_x8(x, nb, 0);
    float y[11];
    /* poisoned weight block in row 6 (as the quantizer writes it) */
    float xs[32];
    for (int j = 0; j < 32; j++) xs[j] = 1.0f;
    xs[3] = NAN;
    quant8[V_REF](&w8[6 * nb + 2], xs, 0, 1);
    quant5[V_REF](&w5[6 * nb + 2], xs, 0, 1);
    if (is5) gemv5[v](y, w5, x, NULL, cols, 0, rows); else gemv8[v](y, w8, x, NULL, cols, 0, rows);
    for (int r = 0; r < rows; r++) CHECK((r == 6) == (y[r] != y[r]), "poisoned weight: row %d = %g", r, y[r]);
    /* poisoned activation block: every row NaN */
    quant8[V_REF](&x[1], xs, 0, 1);
    if (is5) gemv5[v](y, w5, x, NULL, cols, 0, rows); else gemv8[v](y, w8, x, NULL, cols, 0, rows);
    for (int r = 0; r < rows; r++) CHECK(y[r] != y[r], "poisoned activation: row %d = %g", r, y[r]);
    /* fused with an Inf in x */
    float xf[128];
    for (int i = 0; i < 128; i++) xf[i] = nrand();
    xf[77] = -INFINITY;
    krt_block_q8_0 xq[4];
    if (is5) gemv5f[v](y, w5, xf, xq, NULL, cols, 0, rows); else gemv8f[v](y, w8, xf, xq, NULL, cols, 0, rows);
    for (int r = 0; r < rows; r++) CHECK(y[r] != y[r], "fused Inf activation: row %d = %g", r, y[r]);
}

static void test_gemv(void) {
    static const int64_t rows_list[] = {1, 2, 3, 4, 5, 7, 8, 9, 13, 16, 17, 31, 64, 67};
    static const int64_t cols_list[] = {32, 64, 96, 160, 896};
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        for (int is5 = 0; is5 < 2; is5++) {
            for (int rep = 0; rep < 3; rep++)
                for (size_t a = 0; a < sizeof rows_list / sizeof rows_list[0]; a++)
                    for (size_t c = 0; c < sizeof cols_list / sizeof cols_list[0]; c++)
                        test_gemv_shape(v, is5, rows_list[a], cols_list[c], (int)((a + c + rep) % 2),
                                        (int)((a + c + rep) % 3 != 0));
            test_gemv_shape(v, is5, 37, 4864, 1, 1);
            test_gemv_shape(v, is5, 9, 9728, 0, 0);
            char what[96];
            snprintf(what, sizeof what, "gemv %s (+fused) vs float64, 212 shapes, slices", is5 ? "q5_0" : "q8_0");
            report(what, vname[v]);
            test_gemv_poison(v, is5);
            snprintf(what, sizeof what, "gemv %s NaN/Inf blocks propagate", is5 ? "q5_0" : "q8_0");
            report(what, vname[v]);
        }
        /* FP32 GEMV */
        static const int64_t fc[] = {1, 7, 16, 33, 100, 896};
        for (size_t c = 0; c < sizeof fc / sizeof fc[0]; c++) {
            for (int64_t rows = 1; rows <= 11; rows += 2) {
                int64_t cols = fc[c];
                gbuf gw, gx;
                float *w = galloc(&gw, sizeof(float) * rows * cols);
                float *x = galloc(&gx, sizeof(float) * cols);
                for (int64_t i = 0; i < rows * cols; i++) w[i] = nrand();
                for (int64_t i = 0; i < cols; i++) x[i] = nrand();
                float y[13];
                for (int i = 0; i < 13; i++) y[i] = -777.0f;
                int64_t r0 = rows > 2 ? 1 : 0;
                gemvf[v](y + 1, w, x, cols, r0, rows);
                for (int64_t r = -1; r <= rows; r++) {
                    if (r < r0 || r >= rows) { CHECK(y[1 + r] == -777.0f, "f32 gemv wrote outside"); continue; }
                    double s = 0, m = 0;
                    for (int64_t i = 0; i < cols; i++) {
                        s += (double)w[r * cols + i] * x[i];
                        m += fabs((double)w[r * cols + i] * x[i]);
                    }
                    CHECK(fabs(y[1 + r] - s) <= 1e-5 * m + 1e-30, "f32 gemv %lldx%lld row %lld", (long long)rows, (long long)cols, (long long)r);
                }
                gfree(&gw); gfree(&gx);
            }
        }
        report("gemv f32 vs float64, slices", vname[v]);
    }
}

/* ---- rmsnorm / softmax ---- */

static int close_rel(float got, double want, double rel) {
    if (want != want) return got != got;
    return fabs((double)got - want) <= rel * fabs(want) + 1e-37;
}

static void test_norm(void) {
    static const int64_t dims[] = {1, 7, 16, 31, 33, 128, 896, 1000, 4864};
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        for (size_t di = 0; di < sizeof dims / sizeof dims[0]; di++) {
            int64_t dim = dims[di], T = 5;
            float *x = malloc(sizeof(float) * dim * T), *w = malloc(sizeof(float) * dim);
            float *o = malloc(sizeof(float) * dim * (T + 2));
            for (int64_t t = 0; t < T; t++) {
                float sc = (float)pow(10.0, (double)irand(-4, 4));
                for (int64_t i = 0; i < dim; i++) x[t * dim + i] = nrand() * sc;
            }
            for (int64_t i = 0; i < dim; i++) w[i] = nrand();
            float eps = 1e-6f;
            for (int64_t i = 0; i < dim * (T + 2); i++) o[i] = -777.0f;
            rmsn[v](o + dim, x, w, &eps, dim, 1, 4);
            for (int64_t t = -1; t <= T; t++) {
                for (int64_t i = 0; i < dim; i++) {
                    float got = o[dim + t * dim + i];
                    if (t < 1 || t >= 4) { CHECK(got == -777.0f, "rmsnorm wrote outside"); continue; }
                    double ss = 0;
                    for (int64_t k = 0; k < dim; k++) ss += (double)x[t * dim + k] * x[t * dim + k];
                    double want = (double)x[t * dim + i] * w[i] / sqrt(ss / dim + (double)eps);
                    CHECK(close_rel(got, want, 1e-6), "rmsnorm dim %lld t %lld i %lld: %.9g vs %.9g", (long long)dim,
                          (long long)t, (long long)i, got, want);
                }
            }
            free(x); free(w); free(o);
        }
        report("rmsnorm vs float64 (1e-6 rel), slices", vname[v]);

        static const int64_t cl[] = {1, 5, 16, 17, 64, 100, 896, 2048, 4099};
        for (size_t ci = 0; ci < sizeof cl / sizeof cl[0]; ci++) {
            int64_t cols = cl[ci], R = 6;
            float *x = malloc(sizeof(float) * cols * R), *o = malloc(sizeof(float) * cols * (R + 2));
            int32_t *valid = malloc(sizeof(int32_t) * (R + 2));
            for (int masked = 0; masked < 2; masked++) {
                for (int64_t r = 0; r < R; r++) {
                    float sc = r == 0 ? 1.0f : (r == 1 ? 5.0f : (r == 2 ? 30.0f : (float)(urand() * 10)));
                    for (int64_t i = 0; i < cols; i++) {
                        x[r * cols + i] = nrand() * sc + 3.0f;
                        if (r == 3 && i % 5 == 1) x[r * cols + i] = -INFINITY; /* masked-out entries */
                    }
                }
                for (int64_t r = 0; r < R + 2; r++) valid[r] = (int32_t)irand(1, (int)cols);
                for (int64_t i = 0; i < cols * (R + 2); i++) o[i] = -777.0f;
                memcpy(o + cols, x, sizeof(float) * cols * R);
                const int32_t *vp = masked ? valid + 1 : NULL;
                smax[v](o + cols, vp, cols, 1, R - 1);
                for (int64_t r = -1; r <= R; r++) {
                    const float *orow = o + cols + r * cols;
                    if (r < 1 || r >= R - 1) {
                        for (int64_t i = 0; i < cols; i++) {
                            float want = (r < 0 || r >= R) ? -777.0f : x[r * cols + i];
                            CHECK(fbits(orow[i]) == fbits(want), "softmax touched row %lld", (long long)r);
                        }
                        continue;
                    }
                    int64_t n = vp ? vp[r] : cols;
                    double m = -INFINITY, s = 0;
                    for (int64_t i = 0; i < n; i++) m = x[r * cols + i] > m ? x[r * cols + i] : m;
                    for (int64_t i = 0; i < n; i++) s += exp((double)x[r * cols + i] - m);
                    for (int64_t i = 0; i < cols; i++) {
                        if (i >= n) { CHECK(fbits(orow[i]) == 0, "softmax tail not 0"); continue; }
                        double want = exp((double)x[r * cols + i] - m) / s;
                        CHECK(close_rel(orow[i], want, 1e-6), "softmax cols %lld r %lld i %lld (n %lld): %.9g vs %.9g",
                              (long long)cols, (long long)r, (long long)i, (long long)n, orow[i], want);
                    }
                }
            }
            free(x); free(o); free(valid);
        }
        report("softmax vs float64 (1e-6 rel), masked tails", vname[v]);
    }
}

static void test_stream(void) {
    int64_t n = 100003;
    float *a = malloc(sizeof(float) * n);
    double s = 0;
    for (int64_t i = 0; i < n; i++) { a[i] = (float)(i % 7) - 3.0f; s += a[i]; }
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        for (int64_t k = 0; k < 40; k++) {
            float o = -1.0f;
            double sk = 0;
            for (int64_t i = 0; i < k; i++) sk += a[i];
            streamr[v](&o, a, 0, k);
            CHECK(o == (float)sk, "stream_read n=%lld", (long long)k);
        }
        float o;
        streamr[v](&o, a, 0, n);
        CHECK(o == (float)s, "stream_read n=%lld: %g vs %g", (long long)n, o, s);
        report("stream_read sum", vname[v]);
    }
    free(a);
}

int main(void) {
    __builtin_cpu_init();
    have[V_REF] = 1;
    have[V_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    have[V_AVX512] = have[V_AVX2] && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vnni");
    printf("variants: ref%s%s\n", have[V_AVX2] ? " avx2" : "", have[V_AVX512] ? " avx512" : "");
    test_quantize();
    test_gemv();
    test_norm();
    test_stream();
    if (g_fail) {
        printf("test_core: %d check(s) FAILED\n", g_fail);
        return 1;
    }
    printf("test_core: all checks passed\n");
    return 0;
}
