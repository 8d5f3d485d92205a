/* csrc/tests/test_rope_norm.c - C test of krt_rope_norm: every variant this CPU runs against a
 * double-precision rotation of adjacent pairs, head sizes with SIMD tails, strided tokens whose
 * gaps must stay untouched, and a token slice. The cos/sin tables are made here in double
 * (sin and cos by Taylor series: no libm). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernelrt.h"

static int failures;
#define CHECK(cond, ...)                                                     \
    do {                                                                     \
        if (!(cond)) {                                                       \
            if (failures < 30) {                                             \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);         \
                fprintf(stderr, __VA_ARGS__);                                \
                fprintf(stderr, "\n");                                       \
            }                                                                \
            failures++;                                                      \
        }                                                                    \
    } while (0)

static double reduce(double a) { /* to [-pi, pi] */
    const double tau = 6.283185307179586;
    long k = (long)(a / tau);
    a -= (double)k * tau;
    if (a > 3.141592653589793) a -= tau;
    if (a < -3.141592653589793) a += tau;
    return a;
}
static void dsincos(double a, double *s, double *c) {
    a = reduce(a);
    double term = a, sum = a;
    for (int i = 1; i < 30; i++) {
        term *= -a * a / ((2 * i) * (2 * i + 1));
        sum += term;
    }
    *s = sum;
    term = 1, sum = 1;
    for (int i = 1; i < 30; i++) {
        term *= -a * a / ((2 * i - 1) * (2 * i));
        sum += term;
    }
    *c = sum;
}

typedef void (*rope_fn)(float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);

static int cpu_has(int avx512) {
    if (!avx512) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

#define MAXPOS 64
#define MAXHALF 64

int main(void) {
    __builtin_cpu_init();
    struct {
        const char *name;
        int ok;
        rope_fn fn;
    } vs[3] = {{"ref", 1, krt_rope_norm_ref}, {"avx2", cpu_has(0), krt_rope_norm_avx2}, {"avx512", cpu_has(1), krt_rope_norm_avx512}};
    const int64_t dims[] = {2, 6, 16, 18, 64, 128};
    static float cosT[MAXPOS * MAXHALF], sinT[MAXPOS * MAXHALF], x0[8 * 1024], x[8 * 1024];
    static double ref[8 * 1024];
    for (int di = 0; di < 6; di++) {
        int64_t hd = dims[di], half = hd / 2, heads = 3, stride = heads * hd + 5, T = 4, pos0 = 37;
        /* angles: pos * w_i with w_i = 1/(1 + i) (any distinct frequencies test the indexing) */
        for (int64_t p = 0; p < MAXPOS; p++) {
            for (int64_t i = 0; i < half; i++) {
                double s, c;
                dsincos((double)p / (1.0 + (double)i), &s, &c);
                cosT[p * half + i] = (float)c;
                sinT[p * half + i] = (float)s;
            }
        }
        uint64_t st = 0x9E3779B97F4A7C15ull;
        for (int64_t i = 0; i < T * stride; i++) {
            st ^= st << 13, st ^= st >> 7, st ^= st << 17;
            x0[i] = -2.0f + 4.0f * (float)((st >> 40) & 0xffffff) / 16777216.0f;
        }
        for (int64_t i = 0; i < T * stride; i++) ref[i] = x0[i];
        for (int64_t t = 1; t < 3; t++) { /* the slice [1, 3) */
            for (int64_t h = 0; h < heads; h++) {
                for (int64_t i = 0; i < half; i++) {
                    int64_t b = t * stride + h * hd + 2 * i;
                    double c = cosT[(pos0 + t) * half + i], s = sinT[(pos0 + t) * half + i];
                    double a0 = x0[b], a1 = x0[b + 1];
                    ref[b] = a0 * c - a1 * s;
                    ref[b + 1] = a0 * s + a1 * c;
                }
            }
        }
        for (int v = 0; v < 3; v++) {
            if (!vs[v].ok) continue;
            memcpy(x, x0, sizeof(float) * (size_t)(T * stride));
            vs[v].fn(x, cosT, sinT, stride, heads, hd, pos0, 1, 3);
            for (int64_t i = 0; i < T * stride; i++) {
                double d = x[i] - ref[i];
                if (d < 0) d = -d;
                CHECK(d <= 1e-6 * 4.0, "%s hd=%lld: x[%lld] = %.9g, want %.9g", vs[v].name, (long long)hd, (long long)i, x[i], ref[i]);
            }
        }
    }
    for (int v = 0; v < 3; v++) printf("rope_norm %-6s %s\n", vs[v].name, vs[v].ok ? "ok" : "skipped (CPU lacks it)");
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    return 0;
}
