/* csrc/tests/test_gemv_k.c - GEMV and GEMM of Q4_0, Q5_1 (x: Q8_0) and Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS (x: Q8_K),
 * every variant the CPU runs (ctest).
 *
 *  - GEMV against float64: every weight and activation value is exact in double (fp16 scale times
 *    small integers), so y_exact = sum_e w_e * x_e. Bound: |y - y_exact| <= 1e-5 * M + |bias|-part,
 *    M = sum_e (|scale part of w_e| + |min part of w_e|) * |x_e| (the terms the kernels round, which
 *    can be far larger than |y| when the min term cancels the scale term);
 *  - GEMM: _ref within the same bound, every SIMD variant bit-identical to _ref (the GEMM contract:
 *    one operation order, csrc/krt_kdot.h), and GEMM of one token bit-identical to GEMV _ref;
 *  - shapes: rows 1..259 (not multiples of any tile), cols from one block / super-block (256) up,
 *    slices r0..r1 not aligned to tiles, T = 1..133 tokens; sentinels outside the slice; guard
 *    pages right after the weights and the activations (no over-read);
 *  - extreme blocks (every quant at its maximum, activations +-127, scales 63 / -128) for integer
 *    overflow and saturation; zero activation blocks; NaN scales in weights or activations give NaN
 *    exactly where the reference is NaN.
 */
#include "kq_test.h" /* first: defines _DEFAULT_SOURCE */
#include <math.h>

#include "krt_kdot.h"
#include "krt_q2k.h"

typedef void (*gemv_fn)(float *, const void *, const void *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemm_fn)(float *, const void *, const void *, const float *, int64_t, int64_t, int64_t, int64_t,
                        int64_t);

enum { T_Q4_0, T_Q5_1, T_Q4_K, T_Q5_K, T_Q6_K, T_Q5_0, T_Q8_0, T_IQ4_NL, T_Q2_K, T_IQ4_XS, T_Q3_K, NT };
static const struct {
    const char *name;
    int qk, bytes, xk; /* xk: activation type is Q8_K */
    void *gemv[NV], *gemm[NV];
} T[NT] = {
    {"q4_0", 32, 18, 0, KQ_VARIANTS(krt_gemv_q4_0), KQ_VARIANTS(krt_gemm_q4_0)},
    {"q5_1", 32, 24, 0, KQ_VARIANTS(krt_gemv_q5_1), KQ_VARIANTS(krt_gemm_q5_1)},
    {"q4_K", 256, 144, 1, KQ_VARIANTS(krt_gemv_q4_K), KQ_VARIANTS(krt_gemm_q4_K)},
    {"q5_K", 256, 176, 1, KQ_VARIANTS(krt_gemv_q5_K), KQ_VARIANTS(krt_gemm_q5_K)},
    {"q6_K", 256, 210, 1, KQ_VARIANTS(krt_gemv_q6_K), KQ_VARIANTS(krt_gemm_q6_K)},
    {"q5_0", 32, 22, 0, KQ_VARIANTS(krt_gemv_q5_0), KQ_VARIANTS(krt_gemm_q5_0)},
    {"q8_0", 32, 34, 0, KQ_VARIANTS(krt_gemv_q8_0), KQ_VARIANTS(krt_gemm_q8_0)},
    {"iq4_nl", 32, 18, 0, KQ_VARIANTS(krt_gemv_iq4_nl), KQ_VARIANTS(krt_gemm_iq4_nl)},
    {"q2_K", 256, 84, 1, KQ_VARIANTS(krt_gemv_q2_K), KQ_VARIANTS(krt_gemm_q2_K)},
    {"iq4_xs", 256, 136, 1, KQ_VARIANTS(krt_gemv_iq4_xs), KQ_VARIANTS(krt_gemm_iq4_xs)},
    {"q3_K", 256, 110, 1, KQ_VARIANTS(krt_gemv_q3_K), KQ_VARIANTS(krt_gemm_q3_K)},
};

static uint16_t ld16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* Value e of a weight block as (scale part, min part): w_e = a - b, both exact in double. */
static void wval(int t, const uint8_t *blk, int e, double *a, double *b) {
    *a = 0;
    *b = 0;
    switch (t) {
    case T_Q4_0: {
        int q = e < 16 ? blk[2 + e] & 15 : blk[2 + e - 16] >> 4;
        *a = (double)krt_fp16_to_fp32(ld16(blk)) * (q - 8);
        return;
    }
    case T_IQ4_NL: { /* ggml's kvalues_iq4nl, written out here independently of krt_iquant.h */
        static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        int q = e < 16 ? blk[2 + e] & 15 : blk[2 + e - 16] >> 4;
        *a = (double)krt_fp16_to_fp32(ld16(blk)) * kv[q];
        return;
    }
    case T_IQ4_XS: { /* ggml's block_iq4_xs: d, scales_h, scales_l[4], qs[128]; the same table */
        static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
        const int j = e / 32, l = e % 32;
        const int ls = ((blk[4 + j / 2] >> (4 * (j % 2))) & 15) | ((ld16(blk + 2) >> (2 * j)) & 3) << 4;
        const int q = l < 16 ? blk[8 + 16 * j + l] & 15 : blk[8 + 16 * j + l - 16] >> 4;
        *a = (double)krt_fp16_to_fp32(ld16(blk)) * (ls - 32) * kv[q];
        return;
    }
    case T_Q3_K: { /* ggml's block_q3_K: hmask[32], qs[64], scales[12], d */
        const int h = e / 128, j = (e % 128) / 32, l = e % 32, s = e / 16;
        const int lo = s < 8 ? blk[96 + s] & 15 : blk[96 + s - 8] >> 4;
        const int sc = lo | ((blk[104 + s % 4] >> (2 * (s / 4))) & 3) << 4;
        const int q = ((blk[32 + 32 * h + l] >> (2 * j)) & 3) - ((blk[l] >> (4 * h + j)) & 1 ? 0 : 4);
        *a = (double)krt_fp16_to_fp32(ld16(blk + 108)) * (sc - 32) * q;
        return;
    }
    case T_Q5_1: {
        uint32_t qh = (uint32_t)blk[4] | (uint32_t)blk[5] << 8 | (uint32_t)blk[6] << 16 | (uint32_t)blk[7] << 24;
        int q = (e < 16 ? blk[8 + e] & 15 : blk[8 + e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
        *a = (double)krt_fp16_to_fp32(ld16(blk)) * q;
        *b = -(double)krt_fp16_to_fp32(ld16(blk + 2));
        return;
    }
    case T_Q4_K:
    case T_Q5_K: {
        const int j = e / 32, l = e % 32;
        const uint8_t *s = blk + 4, *qs = blk + (t == T_Q4_K ? 16 : 48);
        int sc, m;
        if (j < 4) {
            sc = s[j] & 63;
            m = s[j + 4] & 63;
        } else {
            sc = (s[j + 4] & 15) | ((s[j - 4] >> 6) << 4);
            m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
        }
        int q = j & 1 ? qs[32 * (j / 2) + l] >> 4 : qs[32 * (j / 2) + l] & 15;
        if (t == T_Q5_K) q |= ((blk[16 + l] >> j) & 1) << 4;
        *a = (double)krt_fp16_to_fp32(ld16(blk)) * sc * q;
        *b = (double)krt_fp16_to_fp32(ld16(blk + 2)) * m;
        return;
    }
    case T_Q5_0: {
        uint32_t qh = (uint32_t)blk[2] | (uint32_t)blk[3] << 8 | (uint32_t)blk[4] << 16 | (uint32_t)blk[5] << 24;
        int q = (e < 16 ? blk[6 + e] & 15 : blk[6 + e - 16] >> 4) | (int)((qh >> e) & 1) << 4;
        *a = (double)krt_fp16_to_fp32(ld16(blk)) * (q - 16);
        return;
    }
    case T_Q8_0:
        *a = (double)krt_fp16_to_fp32(ld16(blk)) * (int8_t)blk[2 + e];
        return;
    case T_Q2_K: { /* ggml's block_q2_K: scales[16], qs[64], d, dmin */
        const int q = (blk[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3, sc = blk[e / 16];
        *a = (double)krt_fp16_to_fp32(ld16(blk + 80)) * (sc & 15) * q;
        *b = (double)krt_fp16_to_fp32(ld16(blk + 82)) * (sc >> 4);
        return;
    }
    case T_Q6_K: {
        const int h = e / 128, k = (e % 128) / 32, l = e % 32;
        const uint8_t lb = blk[64 * h + l + 32 * (k & 1)];
        int q = (k < 2 ? lb & 15 : lb >> 4) | ((blk[128 + 32 * h + l] >> (2 * k)) & 3) << 4;
        *a = (double)krt_fp16_to_fp32(ld16(blk + 208)) * (int8_t)blk[192 + e / 16] * (q - 32);
        return;
    }
    }
}

/* Activation value e of block blk (Q8_0 or Q8_K). */
static double xval(int xk, const uint8_t *blk, int e) {
    if (xk) {
        float d;
        memcpy(&d, blk, 4);
        return (double)d * (int8_t)blk[4 + e];
    }
    return (double)krt_fp16_to_fp32(ld16(blk)) * (int8_t)blk[2 + e];
}

/* Random weight blocks: random bytes, sane fp16 scales; mode 1: every quant and scale at its
 * maximum; mode 2: a NaN scale in ~1/50 blocks. */
static void fill_w(int t, uint8_t *w, int64_t n, int mode) {
    const int bytes = T[t].bytes;
    for (int64_t i = 0; i < n; i++) {
        uint8_t *b = w + i * bytes;
        for (int k = 0; k < bytes; k++) b[k] = mode == 1 ? 0xff : (uint8_t)rnd();
        uint16_t d = krt_fp32_to_fp16((0.5f + 0.5f * frand()) * (rnd() & 1 ? 0.02f : -0.02f));
        uint16_t m = krt_fp32_to_fp16(frand() * 0.05f);
        if (mode == 1) {
            d = 0x2000;
            m = 0x2000;
        }
        if (mode == 2 && rnd() % 50 == 0) d = 0x7e00;
        switch (t) {
        case T_Q6_K:
            memcpy(b + 208, &d, 2);
            if (mode == 1)
                for (int s = 0; s < 16; s++) b[192 + s] = (uint8_t)(s & 1 ? 0x80 : 0x7f); /* -128 / 127 */
            break;
        case T_Q4_0:
        case T_IQ4_NL:
        case T_IQ4_XS:
        case T_Q5_0:
        case T_Q8_0: memcpy(b, &d, 2); break;
        case T_Q3_K: memcpy(b + 108, &d, 2); break;
        case T_Q2_K:
            memcpy(b + 80, &d, 2);
            memcpy(b + 82, &m, 2);
            break;
        default:
            memcpy(b, &d, 2);
            memcpy(b + 2, &m, 2);
        }
    }
}

/* Activations: n blocks quantized from random floats (mode 1: all +-127 of one sign per block;
 * some all-zero blocks; mode 2: a NaN block ~1/40). */
static void fill_x(int xk, uint8_t *x, int64_t n, int mode) {
    const int qk = xk ? 256 : 32;
    float v[256];
    for (int64_t i = 0; i < n; i++) {
        int kind = (int)(rnd() % 16);
        for (int j = 0; j < qk; j++) v[j] = kind == 0 ? 0.0f : frand() * (1 + kind);
        if (mode == 1) {
            float s = rnd() & 1 ? 1.0f : -1.0f;
            for (int j = 0; j < qk; j++) v[j] = s;
        }
        if (mode == 2 && rnd() % 40 == 0) v[rnd() % qk] = NAN;
        if (xk)
            krt_quantize_q8_K_ref((krt_block_q8_K *)x + i, v, 0, 1);
        else
            krt_quantize_q8_0_ref((krt_block_q8_0 *)x + i, v, 0, 1);
    }
}

#define SENT (-12345.0f)

/* Float64 reference of y[t*rows + r] for rows r0..r1; NaN when a block's scale is NaN. */
static void reference(int t, const uint8_t *w, const uint8_t *x, const float *bias, int64_t rows, int64_t cols,
                      int64_t Tn, int64_t r0, int64_t r1, double *ref, double *mag) {
    const int qk = T[t].qk, bytes = T[t].bytes, xk = T[t].xk, xbytes = xk ? 292 : 34, xq = xk ? 256 : 32;
    const int64_t nb = cols / qk;
    for (int64_t tk = 0; tk < Tn; tk++)
        for (int64_t r = r0; r < r1; r++) {
            double s = 0, m = 0;
            for (int64_t b = 0; b < nb; b++) {
                const uint8_t *wb = w + (r * nb + b) * bytes;
                for (int e = 0; e < qk; e++) {
                    int64_t xe = b * qk + e;
                    double xv = xval(xk, x + (tk * (cols / xq) + xe / xq) * xbytes, (int)(xe % xq));
                    double a, c;
                    wval(t, wb, e, &a, &c);
                    s += (a - c) * xv;
                    m += (fabs(a) + fabs(c)) * fabs(xv);
                }
            }
            if (bias) {
                s += bias[r];
                m += fabs(bias[r]);
            }
            ref[tk * rows + r] = s;
            mag[tk * rows + r] = m;
        }
}

static void check_ref(const char *what, const float *y, const double *ref, const double *mag, int64_t rows,
                      int64_t Tn, int64_t r0, int64_t r1) {
    for (int64_t tk = 0; tk < Tn; tk++)
        for (int64_t r = 0; r < rows; r++) {
            float got = y[tk * rows + r];
            if (r < r0 || r >= r1) {
                CHECK(fbits(got) == fbits(SENT), "%s: wrote outside the slice t=%ld r=%ld", what, (long)tk, (long)r);
                continue;
            }
            double want = ref[tk * rows + r], bound = 1e-5 * mag[tk * rows + r] + 1e-30;
            if (want != want || mag[tk * rows + r] != mag[tk * rows + r]) {
                CHECK(got != got, "%s: t=%ld r=%ld got %g, want NaN", what, (long)tk, (long)r, got);
                continue;
            }
            CHECK(fabs(got - want) <= bound, "%s: t=%ld r=%ld got %.9g want %.9g (err %.3g bound %.3g)", what,
                  (long)tk, (long)r, got, want, fabs(got - want), bound);
        }
}

static void run_case(int t, int64_t rows, int64_t cols, int64_t Tn, int64_t r0, int64_t r1, int wmode, int xmode,
                     int with_bias, int do_gemm) {
    const int qk = T[t].qk, bytes = T[t].bytes, xk = T[t].xk, xbytes = xk ? 292 : 34, xq = xk ? 256 : 32;
    const int64_t nb = cols / qk;
    gbuf gw, gx;
    uint8_t *w = galloc(&gw, (size_t)(rows * nb * bytes));
    uint8_t *x = galloc(&gx, (size_t)(Tn * (cols / xq) * xbytes));
    fill_w(t, w, rows * nb, wmode);
    fill_x(xk, x, Tn * (cols / xq), xmode);
    float *bias = NULL;
    if (with_bias) {
        bias = malloc(sizeof(float) * (size_t)rows);
        for (int64_t r = 0; r < rows; r++) bias[r] = frand();
    }
    double *ref = malloc(sizeof(double) * (size_t)(Tn * rows)), *mag = malloc(sizeof(double) * (size_t)(Tn * rows));
    float *y = malloc(sizeof(float) * (size_t)(Tn * rows)), *yr = malloc(sizeof(float) * (size_t)(Tn * rows));
    reference(t, w, x, bias, rows, cols, Tn, r0, r1, ref, mag);
    char what[128];
    /* GEMV, token by token */
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        for (int64_t i = 0; i < Tn * rows; i++) y[i] = SENT;
        for (int64_t tk = 0; tk < Tn; tk++)
            ((gemv_fn)T[t].gemv[v])(y + tk * rows, w, x + tk * (cols / xq) * xbytes, bias, cols, r0, r1);
        snprintf(what, sizeof what, "gemv %s %s %ldx%ld", T[t].name, vname[v], (long)rows, (long)cols);
        check_ref(what, y, ref, mag, rows, Tn, r0, r1);
        if (v == V_REF) memcpy(yr, y, sizeof(float) * (size_t)(Tn * rows));
    }
    if (do_gemm) {
        /* GEMM: ref within the bound and equal to GEMV ref (one token at a time) bit for bit */
        float *g = malloc(sizeof(float) * (size_t)(Tn * rows));
        for (int64_t i = 0; i < Tn * rows; i++) g[i] = SENT;
        ((gemm_fn)T[t].gemm[V_REF])(g, w, x, bias, rows, cols, Tn, r0, r1);
        snprintf(what, sizeof what, "gemm %s ref %ldx%ld T=%ld", T[t].name, (long)rows, (long)cols, (long)Tn);
        check_ref(what, g, ref, mag, rows, Tn, r0, r1);
        for (int64_t i = 0; i < Tn * rows; i++)
            CHECK(same_float(g[i], yr[i]), "%s: gemm ref != gemv ref at %ld (%.9g %.9g)", T[t].name, (long)i, g[i], yr[i]);
        for (int v = V_AVX2; v < NV; v++) {
            if (!have[v]) continue;
            for (int64_t i = 0; i < Tn * rows; i++) y[i] = SENT;
            ((gemm_fn)T[t].gemm[v])(y, w, x, bias, rows, cols, Tn, r0, r1);
            for (int64_t i = 0; i < Tn * rows; i++)
                CHECK(same_float(y[i], g[i]), "gemm %s %s %ldx%ld T=%ld [%ld] %.9g != ref %.9g", T[t].name, vname[v],
                      (long)rows, (long)cols, (long)Tn, (long)i, y[i], g[i]);
        }
        free(g);
    }
    gfree(&gw);
    gfree(&gx);
    free(bias);
    free(ref);
    free(mag);
    free(y);
    free(yr);
}

static void test_type(int t) {
    const int qk = T[t].qk;
    static const int64_t rows_list[] = {1, 2, 3, 5, 8, 13, 16, 17, 31, 33, 64, 100, 259};
    const int64_t cols32[] = {32, 64, 96, 256, 896, 1024}, colsK[] = {256, 512, 768, 2048, 4864};
    const int64_t *cl = qk == 32 ? cols32 : colsK;
    const int ncl = qk == 32 ? 6 : 5;
    int n = 0;
    for (size_t ri = 0; ri < sizeof rows_list / sizeof rows_list[0]; ri++) {
        for (int ci = 0; ci < ncl; ci++) {
            int64_t rows = rows_list[ri], cols = cl[ci];
            if (rows * cols > 300000) continue;
            int64_t r0 = rows > 4 ? (int64_t)(rnd() % 4) : 0, r1 = rows > 8 ? rows - (int64_t)(rnd() % 4) : rows;
            int64_t Tn = rows * cols > 100000 ? 1 + (int64_t)(rnd() % 4) : 1 + (int64_t)(rnd() % 9);
            int wmode = (int)(rnd() % 8), xmode = (int)(rnd() % 8);
            wmode = wmode > 2 ? 0 : wmode;
            xmode = xmode > 2 ? 0 : xmode;
            run_case(t, rows, cols, Tn, r0, r1, wmode, xmode, (int)(rnd() & 1), 1);
            n++;
        }
    }
    /* long rows: several column chunks of the AVX-512 drivers, partial last step */
    run_case(t, 5, qk == 32 ? 8192 + 32 * 5 : 8192 + 256 * 3, 1, 1, 5, 0, 0, 1, 0);
    run_case(t, 3, qk == 32 ? 16384 + 32 * 2 : 16384 + 256, 1, 0, 3, 2, 2, 0, 0);
    n += 2;
    /* GEMM token counts across the SIMD variants' token blocks and register tiles */
    static const int64_t Ts[] = {2, 3, 4, 5, 7, 16, 33, 64, 65, 129, 133};
    for (size_t i = 0; i < sizeof Ts / sizeof Ts[0]; i++) {
        int64_t cols = qk == 32 ? 64 * (1 + (int64_t)(rnd() % 3)) : 256 * (1 + (int64_t)(rnd() % 2));
        int64_t rows = 1 + (int64_t)(rnd() % 70);
        run_case(t, rows, cols, Ts[i], rows > 3 ? 1 : 0, rows, (int)(rnd() % 3), (int)(rnd() % 3), (int)(rnd() & 1), 1);
        n++;
    }
    char what[96];
    snprintf(what, sizeof what, "gemv+gemm %s vs float64, %d shapes, slices", T[t].name, n);
    report(what, "all");
}

int main(void) {
    detect_variants();
    for (int t = 0; t < NT; t++) test_type(t);
    return finish("test_gemv_k");
}
