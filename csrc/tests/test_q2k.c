/* csrc/tests/test_q2k.c - Q2_K quantize / dequantize, every variant the CPU runs (ctest).
 * (The Q2_K GEMV and GEMM are checked with the other types in test_gemv_k.c.)
 *
 *  - dequantize: every variant bit-identical to (d * sc) * q - dmin * m computed here from ggml's
 *    block_q2_K layout (written out independently of krt_q2k.h), NaN / Inf / subnormal d and dmin
 *    included; slices write only their blocks;
 *  - quantize: every variant byte-identical to _ref; the round trip error on Gaussian-like data is
 *    below a plain min/max 2-bit code's (a fit better than rounding) and within 0.45 of each
 *    sub-block's range; zero blocks give zeros; a NaN / Inf anywhere in a block gives
 *    d = 0x7e00 (NaN on dequant).
 */
#include "kq_test.h" /* first: defines _DEFAULT_SOURCE */
#include <math.h>

typedef void (*quant_fn)(void *, const float *, int64_t, int64_t);
typedef void (*dequant_fn)(float *, const void *, int64_t, int64_t);

static void *const QF[NV] = KQ_VARIANTS(krt_quantize_q2_K);
static void *const DF[NV] = KQ_VARIANTS(krt_dequantize_q2_K);

/* Element e of a block, from ggml's layout: scales[16] at 0, qs[64] at 16, d at 80, dmin at 82. */
static float q2_value(const uint8_t *b, int e) {
    const float d = krt_fp16_to_fp32((uint16_t)(b[80] | b[81] << 8)), m = krt_fp16_to_fp32((uint16_t)(b[82] | b[83] << 8));
    const int q = (b[16 + 32 * (e / 128) + e % 32] >> (2 * ((e % 128) / 32))) & 3, sc = b[e / 16];
    return d * (float)(sc & 15) * (float)q - m * (float)(sc >> 4);
}

/* Roughly Gaussian: the sum of 4 uniforms. */
static float grand(void) { return (frand() + frand() + frand() + frand()) * 0.5f; }

static void test_dequant(void) {
    enum { NB = 19 };
    static krt_block_q2_K w[NB];
    for (int b = 0; b < NB; b++) {
        uint8_t *p = (uint8_t *)&w[b];
        for (int j = 0; j < 80; j++) p[j] = (uint8_t)rnd();
        w[b].d = krt_fp32_to_fp16(frand() * 0.1f);
        w[b].dmin = krt_fp32_to_fp16(frand() * 0.1f);
    }
    w[3].d = 0x7e00;    /* NaN */
    w[5].dmin = 0x7c00; /* +Inf min */
    w[6].d = 0xfc00;    /* -Inf */
    w[7].d = 0x0001;    /* smallest subnormal */
    w[8].dmin = 0x0003;
    static float want[NB * 256], got[NB * 256 + 512];
    for (int b = 0; b < NB; b++)
        for (int e = 0; e < 256; e++) want[256 * b + e] = q2_value((const uint8_t *)&w[b], e);
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        for (int i = 0; i < NB * 256 + 512; i++) got[i] = -777.0f;
        ((dequant_fn)DF[v])(got, w, 2, NB - 1);
        for (int i = 0; i < NB * 256 + 512; i++) {
            const int in = i >= 512 && i < (NB - 1) * 256;
            if (in)
                CHECK(same_float(got[i], want[i]), "value %d: got %g want %g", i, got[i], want[i]);
            else
                CHECK(got[i] == -777.0f, "wrote outside the slice at %d", i);
        }
        report("dequantize_q2_K vs layout, NaN/Inf/subnormal d and dmin, slice", vname[v]);
    }
}

static void test_quant(void) {
    enum { NB = 64 };
    static float x[NB * 256], back[NB * 256];
    static krt_block_q2_K ref[NB], got[NB];
    for (int b = 0; b < NB; b++) {
        const float scale = b % 7 == 0 ? 1e-3f : b % 11 == 0 ? 1e4f : 1.0f;
        for (int j = 0; j < 256; j++) x[256 * b + j] = grand() * scale + (b % 5 == 0 ? 0.7f * scale : 0.0f);
        if (b % 13 == 0) x[256 * b + (int)(rnd() % 256)] *= 8.0f; /* an outlier */
    }
    for (int j = 0; j < 256; j++) x[256 * 1 + j] = 0.0f; /* zero block */
    x[256 * 2 + 5] = NAN;
    x[256 * 4 + 255] = INFINITY;
    x[256 * 9 + 0] = -INFINITY;
    krt_quantize_q2_K_ref(ref, x, 0, NB);
    for (int v = 1; v < NV; v++) {
        if (!have[v]) continue;
        memset(got, 0xa5, sizeof got);
        ((quant_fn)QF[v])(got, x, 0, NB);
        CHECK(memcmp(got, ref, sizeof ref) == 0, "bytes differ from _ref");
        report("quantize_q2_K bytes == _ref", vname[v]);
    }
    CHECK(ref[2].d == 0x7e00 && ref[4].d == 0x7e00 && ref[9].d == 0x7e00, "poisoned blocks: d %#x %#x %#x", ref[2].d,
          ref[4].d, ref[9].d);
    krt_dequantize_q2_K_ref(back, ref, 0, NB);
    for (int j = 0; j < 256; j++) {
        CHECK(back[256 + j] == 0.0f, "zero block dequantizes to %g", back[256 + j]);
        CHECK(back[512 + j] != back[512 + j], "poisoned block dequantizes to NaN (%g)", back[512 + j]);
    }
    double e_fit = 0, e_rtn = 0, s2 = 0;
    for (int b = 0; b < NB; b++) {
        if (b == 2 || b == 4 || b == 9) continue;
        for (int i = 0; i < 16; i++) {
            const float *xs = x + 256 * b + 16 * i;
            float mn = 0, mx = xs[0];
            for (int l = 0; l < 16; l++) {
                mn = fminf(mn, xs[l]);
                mx = fmaxf(mx, xs[l]);
            }
            const double step = ((double)mx - mn) / 3;
            for (int l = 0; l < 16; l++) {
                const double d1 = (double)back[256 * b + 16 * i + l] - xs[l];
                const double q = step > 0 ? floor((xs[l] - mn) / step + 0.5) : 0;
                const double d2 = mn + q * step - xs[l]; /* plain min/max code, exact scale and min */
                e_fit += d1 * d1;
                e_rtn += d2 * d2;
                s2 += (double)xs[l] * xs[l];
                CHECK(fabs(d1) <= 0.45 * ((double)mx - mn) + 1e-30, "block %d sub-block %d: error %g of range %g", b, i,
                      fabs(d1), (double)mx - mn);
            }
        }
    }
    printf("  round trip relative RMS error: Q2_K %.4f, plain min/max 2-bit code %.4f\n", sqrt(e_fit / s2),
           sqrt(e_rtn / s2));
    CHECK(e_fit < e_rtn, "Q2_K error %g not below the plain code's %g", e_fit, e_rtn);
    report("quantize_q2_K round trip, zero and poisoned blocks", "ref");
}

int main(void) {
    detect_variants();
    test_dequant();
    test_quant();
    return finish("test_q2k");
}
