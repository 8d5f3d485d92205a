/* csrc/tests/test_kquant.c - quantize / dequantize of Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K, Q8_K
 * (every variant the CPU runs; ctest).
 *
 *  - ggml equality: each _ref quantizer's bytes on a fixed, libm-free input set (kq_inputs.h:
 *    ties, signed zeros, grids, constant / one-signed blocks, huge, tiny, subnormal, mixed
 *    sub-blocks) hash to the checksum of ggml's own bytes on the same set, obtained from ggml's
 *    reference code with csrc/tests/oracle_kquant.c (which also compares block by block);
 *  - every SIMD quantizer byte-identical to _ref on all inputs, NaN / Inf blocks included;
 *  - poisoned blocks (NaN / Inf input) dequantize to NaN everywhere; Q8_K bsums are the sums of
 *    their 16 quants; quants stay in range;
 *  - dequantize: every variant bit-identical to the value formula of the block layout, evaluated
 *    here element by element from csrc/kernelrt.h's description (random bytes, random fp16
 *    scales), including the rounding steps ggml uses ((d*sc)*q - dmin*m: two roundings);
 *  - slices: quantize / dequantize of blocks b0..b1 write nothing else; no read past the input
 *    (guard pages).
 */
#include "kq_test.h" /* first: defines _DEFAULT_SOURCE */
#include "kq_inputs.h"

typedef void (*qfn)(void *, const float *, int64_t, int64_t);
typedef void (*dfn)(float *, const void *, int64_t, int64_t);

enum { T_Q4_0, T_Q4_1, T_Q5_1, T_Q4_K, T_Q5_K, T_Q6_K, T_Q8_K, NT };
static const struct {
    const char *name;
    int qk, bytes;
    uint64_t golden; /* FNV-1a of ggml's bytes on kq_golden(), finite blocks (oracle_kquant.c) */
    void *q[NV], *d[NV];
} T[NT] = {
    {"q4_0", 32, 18, 0x84ee2e39dde60ca0ull, KQ_VARIANTS(krt_quantize_q4_0), KQ_VARIANTS(krt_dequantize_q4_0)},
    {"q4_1", 32, 20, 0x177d61fc0cdf8d40ull, KQ_VARIANTS(krt_quantize_q4_1), KQ_VARIANTS(krt_dequantize_q4_1)},
    {"q5_1", 32, 24, 0x565c26a5b8fd4a0aull, KQ_VARIANTS(krt_quantize_q5_1), KQ_VARIANTS(krt_dequantize_q5_1)},
    {"q4_K", 256, 144, 0xa7831d6dd3a33293ull, KQ_VARIANTS(krt_quantize_q4_K), KQ_VARIANTS(krt_dequantize_q4_K)},
    {"q5_K", 256, 176, 0x071072e08ad2be68ull, KQ_VARIANTS(krt_quantize_q5_K), KQ_VARIANTS(krt_dequantize_q5_K)},
    {"q6_K", 256, 210, 0x83755d346ea9a4d2ull, KQ_VARIANTS(krt_quantize_q6_K), KQ_VARIANTS(krt_dequantize_q6_K)},
    {"q8_K", 256, 292, 0x56d5e275b0bc9f66ull, KQ_VARIANTS(krt_quantize_q8_K), KQ_VARIANTS(krt_dequantize_q8_K)},
};

static qfn QF(int t, int v) { return (qfn)T[t].q[v]; }
static dfn DF(int t, int v) { return (dfn)T[t].d[v]; }

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* 6-bit scale / min j of a Q4_K / Q5_K scales[12] (formats.md). */
static void sm6(const uint8_t *s, int j, int *sc, int *m) {
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Value e of block blk, from the layout description (independent of csrc/kquant.c). */
static float value(int t, const uint8_t *blk, int e) {
    switch (t) {
    case T_Q4_0: {
        int q = e < 16 ? blk[2 + e] & 15 : blk[2 + e - 16] >> 4;
        return (float)(q - 8) * krt_fp16_to_fp32(ld16(blk));
    }
    case T_Q4_1: {
        int q = e < 16 ? blk[4 + e] & 15 : blk[4 + e - 16] >> 4;
        return (float)q * krt_fp16_to_fp32(ld16(blk)) + krt_fp16_to_fp32(ld16(blk + 2));
    }
    case T_Q5_1: {
        uint32_t qh = (uint32_t)blk[4] | (uint32_t)blk[5] << 8 | (uint32_t)blk[6] << 16 | (uint32_t)blk[7] << 24;
        int q = (e < 16 ? blk[8 + e] & 15 : blk[8 + e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
        return (float)q * krt_fp16_to_fp32(ld16(blk)) + krt_fp16_to_fp32(ld16(blk + 2));
    }
    case T_Q4_K:
    case T_Q5_K: {
        const int j = e / 32, l = e % 32;
        const uint8_t *qs = blk + (t == T_Q4_K ? 16 : 48);
        int sc, m;
        sm6(blk + 4, j, &sc, &m);
        int q = j & 1 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 15;
        if (t == T_Q5_K) q |= ((blk[16 + l] >> j) & 1) << 4;
        float d1 = krt_fp16_to_fp32(ld16(blk)) * (float)sc, m1 = krt_fp16_to_fp32(ld16(blk + 2)) * (float)m;
        return d1 * (float)q - m1;
    }
    case T_Q6_K: {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t lb = blk[64 * h + l + 32 * (k & 1)];
        int q = (k < 2 ? lb & 15 : lb >> 4) | ((blk[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
        float d = krt_fp16_to_fp32(ld16(blk + 208));
        return d * (float)(int8_t)blk[192 + e / 16] * (float)(q - 32);
    }
    case T_Q8_K: {
        float d;
        memcpy(&d, blk, 4);
        return d * (float)(int8_t)blk[4 + e];
    }
    }
    return 0;
}

/* A random block: random bytes, then sane random fp16 scales (or occasionally any 16 bits). */
static void rand_block(int t, uint8_t *b) {
    for (int i = 0; i < T[t].bytes; i++) b[i] = (uint8_t)rnd();
    int wild = (rnd() & 15) == 0;
    uint16_t h1 = wild ? (uint16_t)rnd() : krt_fp32_to_fp16(frand() * 0.01f);
    uint16_t h2 = wild ? (uint16_t)rnd() : krt_fp32_to_fp16(frand() * 0.01f);
    switch (t) {
    case T_Q6_K: memcpy(b + 208, &h1, 2); break;
    case T_Q8_K: {
        float d = frand() * 0.01f;
        memcpy(b, &d, 4);
        break;
    }
    default:
        memcpy(b, &h1, 2);
        if (t != T_Q4_0) memcpy(b + 2, &h2, 2);
    }
}

static void test_golden(void) {
    for (int t = 0; t < NT; t++) {
        const int qk = T[t].qk, bytes = T[t].bytes, nb = qk == 32 ? 4096 : 512;
        float *x = malloc(sizeof(float) * (size_t)nb * qk);
        uint8_t *q = malloc((size_t)nb * bytes);
        kq_golden(x, nb, qk, NULL);
        for (int v = 0; v < NV; v++) {
            if (!have[v]) continue;
            memset(q, 0x5a, (size_t)nb * bytes);
            QF(t, v)(q, x, 0, nb);
            uint64_t h = kq_hash(q, x, nb, qk, bytes);
            CHECK(h == T[t].golden, "%s: checksum %016llx, ggml's %016llx", T[t].name, (unsigned long long)h,
                  (unsigned long long)T[t].golden);
            char what[80];
            snprintf(what, sizeof what, "quantize %s == ggml (checksum, %d blocks)", T[t].name, nb);
            report(what, vname[v]);
        }
        free(x);
        free(q);
    }
}

static void test_variants(void) {
    for (int t = 0; t < NT; t++) {
        const int qk = T[t].qk, bytes = T[t].bytes, nb = qk == 32 ? 20000 : 2500;
        gbuf gx;
        float *x = galloc(&gx, sizeof(float) * (size_t)nb * qk);
        uint8_t *qr = malloc((size_t)nb * bytes), *qv = malloc((size_t)(nb + 2) * bytes);
        float *dr = malloc(sizeof(float) * (size_t)nb * qk);
        uint64_t st = 0x51ed270b27e3f4c1ull + (uint64_t)t;
        for (int b = 0; b < nb; b++) kq_fill(x + (size_t)b * qk, qk, kq_irand(&st, 0, KQ_NKINDS - 1), &st);
        QF(t, V_REF)(qr, x, 0, nb);
        /* poisoned blocks dequantize to NaN; Q8_K: bsums and range */
        DF(t, V_REF)(dr, qr, 0, nb);
        for (int b = 0; b < nb; b++) {
            if (kq_nonfinite(x + (size_t)b * qk, qk))
                for (int j = 0; j < qk; j++) CHECK(dr[(size_t)b * qk + j] != dr[(size_t)b * qk + j], "%s poisoned block %d value %d not NaN", T[t].name, b, j);
            if (t == T_Q8_K) {
                const krt_block_q8_K *y = (const krt_block_q8_K *)qr + b;
                for (int g = 0; g < 16; g++) {
                    int s = 0;
                    for (int i = 0; i < 16; i++) {
                        s += y->qs[16 * g + i];
                        CHECK(y->qs[16 * g + i] >= -127, "q8_K quant -128");
                    }
                    CHECK(s == y->bsums[g], "q8_K bsums[%d] of block %d: %d != %d", g, b, y->bsums[g], s);
                }
            }
        }
        char what[80];
        snprintf(what, sizeof what, "quantize %s poisoned blocks, bsums (%d blocks)", T[t].name, nb);
        report(what, "ref");
        for (int v = V_AVX2; v < NV; v++) {
            if (!have[v]) continue;
            memset(qv, 0xa5, (size_t)(nb + 2) * bytes);
            int b0 = 1 + (int)(rnd() % 7), b1 = nb - (int)(rnd() % 7);
            QF(t, v)(qv + bytes, x, b0, b1); /* dst shifted by one block: slice writes only b0..b1 */
            for (int b = 0; b < nb + 2; b++) {
                const uint8_t *p = qv + (size_t)b * bytes;
                if (b >= b0 + 1 && b < b1 + 1) {
                    CHECK(memcmp(p, qr + (size_t)(b - 1) * bytes, bytes) == 0, "%s %s block %d != ref", T[t].name, vname[v], b - 1);
                } else {
                    for (int i = 0; i < bytes; i++) CHECK(p[i] == 0xa5, "%s %s wrote outside the slice (block %d)", T[t].name, vname[v], b - 1);
                }
            }
            QF(t, v)(qv, x, 0, nb);
            CHECK(memcmp(qv, qr, (size_t)nb * bytes) == 0, "%s %s full range != ref", T[t].name, vname[v]);
            snprintf(what, sizeof what, "quantize %s byte-identical to ref, slices", T[t].name);
            report(what, vname[v]);
        }
        gfree(&gx);
        free(qr);
        free(qv);
        free(dr);
    }
}

static void test_dequant(void) {
    for (int t = 0; t < NT; t++) {
        const int qk = T[t].qk, bytes = T[t].bytes, nb = qk == 32 ? 4000 : 500;
        gbuf gq;
        uint8_t *q = galloc(&gq, (size_t)nb * bytes);
        float *want = malloc(sizeof(float) * (size_t)nb * qk), *got = malloc(sizeof(float) * (size_t)(nb + 2) * qk);
        for (int b = 0; b < nb; b++) rand_block(t, q + (size_t)b * bytes);
        for (int b = 0; b < nb; b++)
            for (int e = 0; e < qk; e++) want[(size_t)b * qk + e] = value(t, q + (size_t)b * bytes, e);
        for (int v = 0; v < NV; v++) {
            if (!have[v]) continue;
            const float sent = -12345.0f;
            for (size_t i = 0; i < (size_t)(nb + 2) * qk; i++) got[i] = sent;
            int b0 = (int)(rnd() % 5), b1 = nb - (int)(rnd() % 5);
            DF(t, v)(got + qk, q, b0, b1); /* shifted by one block */
            for (int b = -1; b < nb + 1; b++) {
                for (int e = 0; e < qk; e++) {
                    float g = got[(size_t)(b + 1) * qk + e];
                    if (b >= b0 && b < b1) {
                        float w = want[(size_t)b * qk + e];
                        CHECK(same_float(g, w), "%s %s block %d value %d: %.9g != %.9g", T[t].name, vname[v], b, e, g, w);
                    } else {
                        CHECK(fbits(g) == fbits(sent), "%s %s wrote outside the slice (block %d)", T[t].name, vname[v], b);
                    }
                }
            }
            char what[80];
            snprintf(what, sizeof what, "dequantize %s == layout formula, slices", T[t].name);
            report(what, vname[v]);
        }
        gfree(&gq);
        free(want);
        free(got);
    }
}

/* A few hand-computed blocks: the layouts' bit positions and ggml's tie and sign rules. */
static void test_known(void) {
    float x[256];
    /* Q4_0: max = -8 -> d = 1, q = trunc(x + 8.5) clamped at 15: -8 -> 0, 7 -> 15, 7.49 -> 15, 0 -> 8 */
    for (int j = 0; j < 32; j++) x[j] = 0.0f;
    x[0] = -8.0f; x[1] = 7.0f; x[17] = 3.0f; x[18] = -3.5f;
    krt_block_q4_0 b4;
    krt_quantize_q4_0_ref(&b4, x, 0, 1);
    CHECK(b4.d == 0x3c00 && b4.qs[0] == (0 | 8 << 4) && b4.qs[1] == (15 | 11 << 4) && b4.qs[2] == (8 | 5 << 4),
          "q4_0 known block: d %04x qs %02x %02x %02x", b4.d, b4.qs[0], b4.qs[1], b4.qs[2]);
    /* Q5_1: min -1, max 30 -> d = 1, m = -1; q = trunc(x + 1 + 0.5) */
    for (int j = 0; j < 32; j++) x[j] = 0.0f;
    x[0] = -1.0f; x[1] = 30.0f; x[16] = 14.5f; x[20] = 15.0f;
    krt_block_q5_1 b5;
    krt_quantize_q5_1_ref(&b5, x, 0, 1);
    uint32_t qh;
    memcpy(&qh, b5.qh, 4);
    CHECK(b5.d == 0x3c00 && b5.m == 0xbc00 && (b5.qs[0] & 15) == 0 && (b5.qs[1] & 15) == (31 & 15) && (qh & 2) &&
              (b5.qs[0] >> 4) == 0 && ((qh >> 16) & 1) == 1 && (b5.qs[4] >> 4) == 0 && ((qh >> 20) & 1) == 1,
          "q5_1 known block: d %04x m %04x qh %08x", b5.d, b5.m, qh);
    /* Q5_1 zero sign: the first zero decides m's sign */
    for (int j = 0; j < 32; j++) x[j] = 1.0f;
    x[3] = -0.0f; x[9] = 0.0f;
    krt_quantize_q5_1_ref(&b5, x, 0, 1);
    CHECK(b5.m == 0x8000, "q5_1 min -0 first: m %04x", b5.m);
    /* Q8_K: iscale = -127/max; max = 2 -> d = -2/127; x = 1 -> -63.5 -> -64 (nearest even) */
    for (int j = 0; j < 256; j++) x[j] = 0.0f;
    x[5] = 2.0f; x[6] = 1.0f; x[7] = -2.0f; x[40] = 0.5f;
    krt_block_q8_K b8;
    krt_quantize_q8_K_ref(&b8, x, 0, 1);
    CHECK(b8.qs[5] == -127 && b8.qs[6] == -64 && b8.qs[7] == 127 && b8.qs[40] == -32 && b8.bsums[0] == -64 &&
              b8.bsums[2] == -32 && b8.d == 1.0f / (-127.0f / 2.0f),
          "q8_K known block: qs %d %d %d %d bsums %d %d", b8.qs[5], b8.qs[6], b8.qs[7], b8.qs[40], b8.bsums[0], b8.bsums[2]);
    /* Q4_K / Q5_K / Q6_K: an all-zero super-block is all-zero bytes (d = dmin = 0) */
    for (int j = 0; j < 256; j++) x[j] = 0.0f;
    krt_block_q4_K k4;
    krt_block_q5_K k5;
    krt_block_q6_K k6;
    krt_quantize_q4_K_ref(&k4, x, 0, 1);
    krt_quantize_q5_K_ref(&k5, x, 0, 1);
    krt_quantize_q6_K_ref(&k6, x, 0, 1);
    int nz = 0;
    for (size_t i = 0; i < sizeof k4; i++) nz += ((uint8_t *)&k4)[i] != 0;
    for (size_t i = 0; i < sizeof k5; i++) nz += ((uint8_t *)&k5)[i] != 0;
    for (size_t i = 0; i < sizeof k6; i++) nz += ((uint8_t *)&k6)[i] != 0;
    CHECK(nz == 0, "zero super-blocks: %d non-zero bytes", nz);
    /* A ramp quantized then dequantized stays within half a step of the input (sanity) */
    for (int j = 0; j < 256; j++) x[j] = (float)(j - 128) / 64.0f;
    float y[256];
    krt_quantize_q4_K_ref(&k4, x, 0, 1);
    krt_dequantize_q4_K_ref(y, &k4, 0, 1);
    float err = 0;
    for (int j = 0; j < 256; j++) err = err > y[j] - x[j] ? (err > x[j] - y[j] ? err : x[j] - y[j]) : y[j] - x[j];
    CHECK(err < 0.07f, "q4_K ramp error %g", err); /* half of 2/15: the positive sub-blocks have min 0 */
    krt_quantize_q6_K_ref(&k6, x, 0, 1);
    krt_dequantize_q6_K_ref(y, &k6, 0, 1);
    err = 0;
    for (int j = 0; j < 256; j++) err = err > y[j] - x[j] ? (err > x[j] - y[j] ? err : x[j] - y[j]) : y[j] - x[j];
    CHECK(err < 0.032f, "q6_K ramp error %g", err); /* half of 2/32 */
    report("hand-computed blocks (layouts, ties, signs)", "ref");
}

int main(void) {
    detect_variants();
    test_known();
    test_golden();
    test_variants();
    test_dequant();
    return finish("test_kquant");
}
