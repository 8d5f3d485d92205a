/* csrc/tests/test_iquant.c - IQ4_NL quantize / dequantize, every variant the CPU runs (ctest).
 * (The IQ4_NL GEMV and GEMM are checked with the other types in test_gemv_k.c.)
 *
 *  - dequantize: every variant bit-identical to d * kvalues_iq4nl[q] computed here from ggml's
 *    table (written out independently of krt_iquant.h), NaN / Inf scales included; slices write
 *    only their blocks;
 *  - quantize: every variant byte-identical to _ref; the round trip error on Gaussian-like data is
 *    below Q4_0's (the point of the non-linear table) and within a bound of the block's scale;
 *    every element maps to its nearest table value under the stored scale's fp32 value or close;
 *    zero blocks give d = 0; a NaN / Inf anywhere in a block gives d = 0x7e00 (NaN on dequant).
 */
#include "kq_test.h" /* first: defines _DEFAULT_SOURCE */
#include <math.h>

typedef void (*quant_fn)(void *, const float *, int64_t, int64_t);
typedef void (*dequant_fn)(float *, const void *, int64_t, int64_t);

static void *const QF[NV] = KQ_VARIANTS(krt_quantize_iq4_nl);
static void *const DF[NV] = KQ_VARIANTS(krt_dequantize_iq4_nl);
static const int kv[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

/* Roughly Gaussian: the sum of 4 uniforms. */
static float grand(void) { return (frand() + frand() + frand() + frand()) * 0.5f; }

static void test_dequant(void) {
    enum { NB = 67 };
    krt_block_iq4_nl w[NB];
    for (int b = 0; b < NB; b++) {
        for (int j = 0; j < 16; j++) w[b].qs[j] = (uint8_t)rnd();
        w[b].d = krt_fp32_to_fp16(frand() * 0.1f);
    }
    w[3].d = 0x7e00; /* NaN */
    w[5].d = 0x7c00; /* +Inf */
    w[6].d = 0xfc00; /* -Inf */
    w[7].d = 0x0001; /* smallest subnormal */
    float want[NB * 32], got[NB * 32 + 64];
    for (int b = 0; b < NB; b++) {
        const float d = krt_fp16_to_fp32(w[b].d);
        for (int j = 0; j < 32; j++) {
            const int q = j < 16 ? w[b].qs[j] & 15 : w[b].qs[j - 16] >> 4;
            want[32 * b + j] = d * (float)kv[q];
        }
    }
    for (int v = 0; v < NV; v++) {
        if (!have[v]) continue;
        for (int i = 0; i < NB * 32 + 64; i++) got[i] = -777.0f;
        ((dequant_fn)DF[v])(got, w, 2, NB - 1);
        for (int i = 0; i < NB * 32 + 64; i++) {
            const int in = i >= 64 && i < (NB - 1) * 32;
            if (in)
                CHECK(same_float(got[i], want[i]), "value %d: got %g want %g", i, got[i], want[i]);
            else
                CHECK(got[i] == -777.0f, "wrote outside the slice at %d", i);
        }
        report("dequantize_iq4_nl vs table, NaN/Inf/subnormal d, slice", vname[v]);
    }
}

static void test_quant(void) {
    enum { NB = 400 };
    static float x[NB * 32], back[NB * 32];
    static krt_block_iq4_nl ref[NB], got[NB];
    static krt_block_q4_0 q4[NB];
    for (int b = 0; b < NB; b++) {
        const float scale = b % 7 == 0 ? 1e-3f : b % 11 == 0 ? 1e4f : 1.0f;
        for (int j = 0; j < 32; j++) x[32 * b + j] = grand() * scale;
        if (b % 13 == 0) x[32 * b + (int)(rnd() % 32)] *= 8.0f; /* an outlier */
    }
    for (int j = 0; j < 32; j++) x[32 * 1 + j] = 0.0f; /* zero block */
    x[32 * 2 + 5] = NAN;
    x[32 * 4 + 31] = INFINITY;
    x[32 * 8 + 0] = -INFINITY;
    krt_quantize_iq4_nl_ref(ref, x, 0, NB);
    for (int v = 1; v < NV; v++) {
        if (!have[v]) continue;
        memset(got, 0xa5, sizeof got);
        ((quant_fn)QF[v])(got, x, 0, NB);
        CHECK(memcmp(got, ref, sizeof ref) == 0, "bytes differ from _ref");
        report("quantize_iq4_nl bytes == _ref", vname[v]);
    }
    CHECK(ref[1].d == 0, "zero block: d = %#x", ref[1].d);
    CHECK(ref[2].d == 0x7e00 && ref[4].d == 0x7e00 && ref[8].d == 0x7e00, "poisoned blocks: d %#x %#x %#x", ref[2].d,
          ref[4].d, ref[8].d);
    krt_dequantize_iq4_nl_ref(back, ref, 0, NB);
    for (int j = 0; j < 32; j++) CHECK(back[64 + j] != back[64 + j], "poisoned block dequantizes to NaN (%g)", back[64 + j]);
    krt_quantize_q4_0_ref(q4, x, 0, NB);
    static float back4[NB * 32];
    krt_dequantize_q4_0_ref(back4, q4, 0, NB);
    double e_nl = 0, e_q4 = 0, s2 = 0;
    for (int b = 0; b < NB; b++) {
        if (b == 2 || b == 4 || b == 8) continue;
        double amax = 0, eb = 0;
        for (int j = 0; j < 32; j++) amax = fmax(amax, fabs(x[32 * b + j]));
        for (int j = 0; j < 32; j++) {
            const double d1 = (double)back[32 * b + j] - x[32 * b + j], d2 = (double)back4[32 * b + j] - x[32 * b + j];
            eb = fmax(eb, fabs(d1));
            e_nl += d1 * d1;
            e_q4 += d2 * d2;
            s2 += (double)x[32 * b + j] * x[32 * b + j];
        }
        /* the widest table gap is 24 (89 -> 113) at scale amax/127, so half of it plus rounding */
        CHECK(eb <= amax * 0.15 + 1e-30, "block %d: max error %g of amax %g", b, eb, amax);
    }
    printf("  round trip relative RMS error: IQ4_NL %.5f, Q4_0 %.5f\n", sqrt(e_nl / s2), sqrt(e_q4 / s2));
    CHECK(e_nl < e_q4, "IQ4_NL error %g not below Q4_0's %g", e_nl, e_q4);
    report("quantize_iq4_nl round trip, zero and poisoned blocks", "ref");
}

int main(void) {
    detect_variants();
    test_dequant();
    test_quant();
    return finish("test_iquant");
}
