/* csrc/tests/test_ops.c - C tests of the elementwise, RoPE, KV-append, attention and embedding
 * kernels: every variant this CPU runs against a double-precision reference, slice bounds
 * (sentinels around and between the slice), and SwiGLU's special values.
 * No libm: the reference exp and 1/sqrt are computed here in double.
 * Build alone: gcc -O2 -std=c11 -Icsrc csrc/tests/test_ops.c csrc/elementwise.c csrc/rope.c \
 *              csrc/attention.c csrc/embed.c -o /tmp/test_ops && /tmp/test_ops
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernelrt.h"

#define SENT 12345.678f

static int failures;

#define CHECK(cond, ...)                                      \
    do {                                                      \
        if (!(cond)) {                                        \
            if (failures < 30) {                              \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
                fprintf(stderr, __VA_ARGS__);                 \
                fprintf(stderr, "\n");                        \
            }                                                 \
            failures++;                                       \
        }                                                     \
    } while (0)

/* ---- deterministic random numbers ---- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() & 0xffffff) / 16777216.0f; }

/* ---- double helpers without libm ---- */
static float f_inf(void) {
    uint32_t b = 0x7f800000u;
    float f;
    memcpy(&f, &b, 4);
    return f;
}

static double dabs(double x) { return x < 0 ? -x : x; }
static double dexp(double x) {
    if (x < -745.0) return 0.0;
    if (x > 709.0) return (double)f_inf();
    const double ln2 = 0.6931471805599453094;
    double kf = x / ln2;
    int64_t k = (int64_t)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double r = x - (double)k * ln2;
    double term = 1.0, sum = 1.0;
    for (int i = 1; i < 30; i++) {
        term *= r / i;
        sum += term;
    }
    while (k > 0) { sum *= 2.0; k--; }
    while (k < 0) { sum *= 0.5; k++; }
    return sum;
}
static double dinvsqrt(double x) {
    double y = 1.0;
    while (y * y * x > 1.0) y *= 0.5; /* y*y*x in (0.25, 1]: Newton converges from below */
    while (y * y * x < 0.25) y *= 2.0;
    for (int i = 0; i < 60; i++) y = y * (1.5 - 0.5 * x * y * y);
    return y;
}
static int is_nan(float x) { return x != x; }
/* ---- variants ---- */
typedef void (*swiglu_fn)(float *, const float *, const float *, int64_t, int64_t);
typedef void (*add_fn)(float *, const float *, const float *, int64_t, int64_t);
typedef void (*rope_fn)(float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*kv_fn)(float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*attn_fn)(float *, const float *, const float *, const float *, float *, int64_t, int64_t, int64_t,
                        int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*embed_fn)(float *, const krt_block_q8_0 *, const int32_t *, int64_t, int64_t, int64_t);

typedef struct {
    const char *name;
    int supported;
    swiglu_fn swiglu;
    add_fn add;
    rope_fn rope;
    kv_fn kv;
    attn_fn attn;
    embed_fn embed;
} variant;

static variant variants[3];

static void init_variants(void) {
    int avx2 = 0, avx512 = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
#endif
    variants[0] = (variant){"ref", 1, krt_swiglu_ref, krt_add_ref, krt_rope_neox_ref, krt_kv_append_ref,
                            krt_attention_ref, krt_embed_q8_0_ref};
    variants[1] = (variant){"avx2", avx2, krt_swiglu_avx2, krt_add_avx2, krt_rope_neox_avx2, krt_kv_append_avx2,
                            krt_attention_avx2, krt_embed_q8_0_avx2};
    variants[2] = (variant){"avx512", avx512, krt_swiglu_avx512, krt_add_avx512, krt_rope_neox_avx512,
                            krt_kv_append_avx512, krt_attention_avx512, krt_embed_q8_0_avx512};
}

/* ---- SwiGLU and Add ---- */
#define EN 203
static void test_elementwise(const variant *v) {
    static float gate[EN], up[EN], out[EN + 2], a[EN], b[EN];
    for (int i = 0; i < EN; i++) {
        gate[i] = rndf(-30.0f, 30.0f);
        up[i] = rndf(-4.0f, 4.0f);
        a[i] = rndf(-100.0f, 100.0f);
        b[i] = rndf(-100.0f, 100.0f);
    }
    const float inf = f_inf();
    gate[0] = -inf; gate[1] = inf; gate[2] = -100.0f; gate[3] = 100.0f; gate[4] = 0.0f;
    gate[5] = -88.5f; gate[6] = 88.5f; gate[7] = -87.0f; gate[8] = 1e-20f; gate[9] = -1e-3f;
    gate[10] = -1e38f; gate[11] = -88.3762626647949f; gate[12] = -88.3f; gate[13] = 3e38f; gate[14] = -3e38f;
    up[0] = 2.0f; up[1] = 2.0f;
    int bounds[][2] = {{0, EN}, {3, 100}, {17, 18}, {5, 5}, {1, 200}};
    for (unsigned bi = 0; bi < sizeof bounds / sizeof bounds[0]; bi++) {
        int i0 = bounds[bi][0], i1 = bounds[bi][1];
        for (int i = 0; i < EN + 2; i++) out[i] = SENT;
        v->swiglu(out + 1, gate, up, i0, i1);
        for (int i = 0; i < EN; i++) {
            float o = out[i + 1];
            if (i < i0 || i >= i1) {
                CHECK(o == SENT, "%s swiglu [%d,%d) wrote element %d", v->name, i0, i1, i);
                continue;
            }
            double g = gate[i], ref;
            if (g == -(double)inf) ref = 0.0;
            else if (g == (double)inf) ref = inf;
            else ref = g / (1.0 + dexp(-g)) * up[i];
            float reff = (float)ref; /* overflow of the product: the kernel must give the same Inf */
            if (g == (double)inf || reff == inf || reff == -inf) {
                CHECK(o == reff, "%s swiglu g=%g up=%g: got %g want %g", v->name, g, up[i], o, reff);
            } else {
                CHECK(!is_nan(o) && dabs(o - ref) <= 1e-6 * dabs(ref) + 1e-34, /* |silu| < 1e-35 saturates to 0 */
                      "%s swiglu g=%g up=%g: got %.9g want %.9g", v->name, g, up[i], o, ref);
            }
        }
        CHECK(out[0] == SENT && out[EN + 1] == SENT, "%s swiglu wrote outside the buffer", v->name);

        for (int i = 0; i < EN + 2; i++) out[i] = SENT;
        v->add(out + 1, a, b, i0, i1);
        for (int i = 0; i < EN; i++) {
            float want = (i < i0 || i >= i1) ? SENT : a[i] + b[i];
            CHECK(out[i + 1] == want, "%s add [%d,%d) element %d: got %g want %g", v->name, i0, i1, i, out[i + 1], want);
        }
        CHECK(out[0] == SENT && out[EN + 1] == SENT, "%s add wrote outside the buffer", v->name);
    }
    /* in place: out aliases a */
    float x[EN];
    memcpy(x, a, sizeof x);
    v->add(x, x, b, 0, EN);
    for (int i = 0; i < EN; i++) CHECK(x[i] == a[i] + b[i], "%s add in place element %d", v->name, i);
    /* NaN propagates */
    float gn[16], un[16], on[16];
    for (int i = 0; i < 16; i++) { gn[i] = 1.0f; un[i] = 1.0f; }
    uint32_t nanb = 0x7fc00000u;
    memcpy(&gn[3], &nanb, 4);
    v->swiglu(on, gn, un, 0, 16);
    CHECK(is_nan(on[3]), "%s swiglu(NaN) = %g, want NaN", v->name, on[3]);
}

/* ---- RoPE ---- */
static void make_tables(float *c, float *s, int64_t hd, int64_t maxpos, double theta) {
    int64_t half = hd / 2;
    for (int64_t i = 0; i < half; i++) {
        /* any angles exercise the kernel; the Go tests use the real theta^(-2i/hd) table */
        double freq = theta / (theta * (double)(1 + i * 7));
        for (int64_t p = 0; p < maxpos; p++) {
            double ang = (double)p * freq;
            /* reduce to [-pi, pi] and use Taylor series */
            const double pi = 3.14159265358979323846;
            while (ang > pi) ang -= 2 * pi;
            double cs = 0, sn = 0, term = 1;
            for (int k = 0; k < 40; k++) {
                if (k > 0) term *= ang / k;
                switch (k % 4) {
                case 0: cs += term; break;
                case 1: sn += term; break;
                case 2: cs -= term; break;
                case 3: sn -= term; break;
                }
            }
            c[p * half + i] = (float)cs;
            s[p * half + i] = (float)sn;
        }
    }
}

static void test_rope(const variant *v, int64_t hd, int64_t nh, int64_t stride, int64_t T, int64_t pos0,
                      int64_t t0, int64_t t1) {
    enum { MAXPOS = 40, MAXN = 4096 };
    static float ct[MAXPOS * 64], st[MAXPOS * 64], x[MAXN], orig[MAXN];
    const int64_t half = hd / 2;
    make_tables(ct, st, hd, MAXPOS, 1e6);
    int64_t n = T * stride;
    for (int64_t i = 0; i < n; i++) x[i] = orig[i] = rndf(-3.0f, 3.0f);
    v->rope(x, ct, st, stride, nh, hd, pos0, t0, t1);
    for (int64_t t = 0; t < T; t++) {
        for (int64_t e = 0; e < stride; e++) {
            int64_t i = t * stride + e;
            int inside = t >= t0 && t < t1 && e < nh * hd;
            if (!inside) {
                CHECK(x[i] == orig[i], "%s rope hd=%lld touched token %lld elem %lld", v->name, (long long)hd,
                      (long long)t, (long long)e);
                continue;
            }
            int64_t hh = e / hd, k = e % hd, kk = k % half;
            const float *c = ct + (pos0 + t) * half, *s = st + (pos0 + t) * half;
            double x0 = orig[t * stride + hh * hd + kk], x1 = orig[t * stride + hh * hd + kk + half];
            double ref = k < half ? x0 * c[kk] - x1 * s[kk] : x0 * s[kk] + x1 * c[kk];
            CHECK(dabs(x[i] - ref) <= 1e-6 * (dabs(x0) + dabs(x1)), "%s rope hd=%lld t=%lld e=%lld: got %.9g want %.9g",
                  v->name, (long long)hd, (long long)t, (long long)e, x[i], ref);
        }
    }
}

/* ---- KV append ---- */
static void test_kv(const variant *v, int64_t hd, int64_t nkv, int64_t maxctx, int64_t stride, int64_t pos0, int64_t T,
                    int64_t t0, int64_t t1) {
    enum { MAXN = 8192 };
    static float cache[MAXN], src[MAXN];
    for (int64_t i = 0; i < nkv * maxctx * hd; i++) cache[i] = SENT;
    for (int64_t i = 0; i < T * stride; i++) src[i] = rndf(-1, 1);
    v->kv(cache, src, stride, nkv, hd, maxctx, pos0, t0, t1);
    for (int64_t h = 0; h < nkv; h++)
        for (int64_t p = 0; p < maxctx; p++)
            for (int64_t d = 0; d < hd; d++) {
                int64_t t = p - pos0;
                float want = (t >= t0 && t < t1) ? src[t * stride + h * hd + d] : SENT;
                CHECK(cache[(h * maxctx + p) * hd + d] == want, "%s kv_append h=%lld p=%lld d=%lld", v->name,
                      (long long)h, (long long)p, (long long)d);
            }
}

/* ---- attention ---- */
static double attn_check(const variant *v, int64_t nh, int64_t nkv, int64_t hd, int64_t maxctx, int64_t pos0, int64_t T,
                         int64_t h0, int64_t h1) {
    enum { MAXC = 1600 * 2 * 64, MAXQ = 130 * 14 * 64 };
    static float kc[MAXC], vc[MAXC], q[MAXQ], out[MAXQ], scratch[2048];
    static double sc[2048];
    const int64_t qstride = nh * hd + 5; /* a gap between tokens */
    for (int64_t i = 0; i < nkv * maxctx * hd; i++) {
        kc[i] = rndf(-1, 1);
        vc[i] = rndf(-1, 1);
    }
    for (int64_t i = 0; i < T * qstride; i++) q[i] = rndf(-1.5f, 1.5f);
    for (int64_t i = 0; i < T * nh * hd; i++) out[i] = SENT;
    v->attn(out, q, kc, vc, scratch, nh, nkv, hd, maxctx, qstride, pos0, T, h0, h1);
    const double scale = dinvsqrt((double)hd);
    double worst = 0;
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < nh; h++) {
            const float *o = out + (t * nh + h) * hd;
            if (h < h0 || h >= h1) {
                for (int64_t d = 0; d < hd; d++) CHECK(o[d] == SENT, "%s attention wrote head %lld", v->name, (long long)h);
                continue;
            }
            int64_t g = h / (nh / nkv), n = pos0 + t + 1;
            const float *qv = q + t * qstride + h * hd, *K = kc + g * maxctx * hd, *V = vc + g * maxctx * hd;
            double mx = -1e300, sum = 0;
            for (int64_t j = 0; j < n; j++) {
                double s = 0;
                for (int64_t d = 0; d < hd; d++) s += (double)qv[d] * K[j * hd + d];
                sc[j] = s * scale;
                if (sc[j] > mx) mx = sc[j];
            }
            for (int64_t j = 0; j < n; j++) { sc[j] = dexp(sc[j] - mx); sum += sc[j]; }
            for (int64_t d = 0; d < hd; d++) {
                double ref = 0, mag = 0;
                for (int64_t j = 0; j < n; j++) {
                    ref += sc[j] / sum * V[j * hd + d];
                    mag += sc[j] / sum * dabs(V[j * hd + d]);
                }
                double rel = dabs(o[d] - ref) / mag;
                if (!(rel <= worst)) worst = rel; /* NaN sticks */
            }
        }
    CHECK(worst <= 1e-5, "%s attention nh=%lld nkv=%lld hd=%lld pos0=%lld T=%lld: worst error %.3g of sum|w v|",
          v->name, (long long)nh, (long long)nkv, (long long)hd, (long long)pos0, (long long)T, worst);
    return worst;
}

/* ---- embedding ---- */
static void test_embed(const variant *v, int64_t dim, int64_t vocab) {
    enum { MAXB = 64 * 8 };
    static krt_block_q8_0 table[MAXB];
    static float out[6 * 256 + 2];
    int64_t nb = dim / KRT_QK;
    for (int64_t b = 0; b < vocab * nb; b++) {
        /* fp16 in (2^-10 .. 2^2), plus a subnormal and a zero scale */
        table[b].d = (uint16_t)(((rnd32() % 12) + 5) << 10 | (rnd32() & 0x3ff));
        if (b == 1) table[b].d = 0x0003;
        if (b == 2) table[b].d = 0x8000;
        for (int j = 0; j < KRT_QK; j++) table[b].qs[j] = (int8_t)(rnd32() & 0xff);
    }
    int32_t ids[6] = {3, 0, (int32_t)(vocab - 1), 3, 1, 2};
    for (int i = 0; i < 6 * 256 + 2; i++) out[i] = SENT;
    v->embed(out + 1, table, ids, dim, 1, 5);
    for (int64_t t = 0; t < 6; t++)
        for (int64_t e = 0; e < dim; e++) {
            float got = out[1 + t * dim + e], want = SENT;
            if (t >= 1 && t < 5) {
                const krt_block_q8_0 *blk = &table[ids[t] * nb + e / KRT_QK];
                /* fp16 -> double by hand */
                uint16_t hb = blk->d;
                int ex = (hb >> 10) & 0x1f, man = hb & 0x3ff;
                double dv = ex ? (1.0 + man / 1024.0) : man / 1024.0;
                int sh = ex ? ex - 15 : -14;
                while (sh > 0) { dv *= 2; sh--; }
                while (sh < 0) { dv *= 0.5; sh++; }
                if (hb & 0x8000) dv = -dv;
                want = (float)(dv * blk->qs[e % KRT_QK]);
            }
            CHECK(got == want, "%s embed t=%lld e=%lld: got %g want %g", v->name, (long long)t, (long long)e, got, want);
        }
    CHECK(out[0] == SENT && out[1 + 6 * dim] == SENT, "%s embed wrote outside its rows", v->name);
}

int main(void) {
    init_variants();
    for (int vi = 0; vi < 3; vi++) {
        const variant *v = &variants[vi];
        if (!v->supported) {
            printf("test_ops: %s not supported by this CPU, skipped\n", v->name);
            continue;
        }
        test_elementwise(v);
        test_rope(v, 64, 14, 14 * 64, 3, 5, 0, 3);
        test_rope(v, 64, 2, 2 * 64 + 7, 4, 30, 1, 3);
        test_rope(v, 10, 3, 37, 5, 0, 2, 5);
        test_rope(v, 48, 2, 96, 2, 1, 0, 2);
        test_kv(v, 64, 2, 20, 1152, 3, 5, 0, 5);
        test_kv(v, 64, 2, 20, 128, 19, 1, 0, 1);
        test_kv(v, 12, 3, 9, 40, 2, 6, 2, 4);
        test_kv(v, 72, 1, 4, 72, 0, 4, 1, 4);
        double w = 0, x;
        x = attn_check(v, 14, 2, 64, 520, 0, 1, 0, 14); w = x > w ? x : w;
        x = attn_check(v, 14, 2, 64, 520, 16, 1, 3, 9); w = x > w ? x : w;
        x = attn_check(v, 14, 2, 64, 520, 511, 1, 0, 14); w = x > w ? x : w;
        x = attn_check(v, 14, 2, 64, 130, 0, 128, 0, 14); w = x > w ? x : w;
        x = attn_check(v, 14, 2, 64, 1600, 1500, 1, 2, 12); w = x > w ? x : w; /* 24 blocks */
        x = attn_check(v, 14, 2, 64, 1600, 1400, 3, 6, 8); w = x > w ? x : w;
        x = attn_check(v, 4, 4, 40, 50, 7, 9, 1, 4); w = x > w ? x : w;
        x = attn_check(v, 6, 2, 24, 50, 33, 3, 0, 6); w = x > w ? x : w;
        x = attn_check(v, 2, 1, 128, 100, 70, 2, 0, 2); w = x > w ? x : w;
        test_embed(v, 64, 8);
        test_embed(v, 256, 4);
        printf("test_ops: %s done (attention worst error %.2g of sum|w*v|)\n", v->name, w);
    }
    if (failures) {
        printf("test_ops: %d failures\n", failures);
        return 1;
    }
    printf("test_ops: all passed\n");
    return 0;
}
