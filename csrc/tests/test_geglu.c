/* csrc/tests/test_geglu.c - C test of krt_geglu: every variant this CPU runs against a
 * double-precision reference (x / (1 + e^-2v), v = sqrt(2/pi)(x + 0.044715 x^3)), slice bounds
 * (sentinels around the slice) and the special values. No libm: exp is computed here.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "kernelrt.h"

#define SENT 12345.678f
#define N 515

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

static double dexp(double x) {
    if (x < -745.0) return 0.0;
    if (x > 709.0) return 1e308 * 10.0;
    const double ln2 = 0.6931471805599453094;
    double kf = x / ln2;
    int64_t k = (int64_t)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double r = x - (double)k * ln2, term = 1.0, sum = 1.0;
    for (int i = 1; i < 30; i++) {
        term *= r / i;
        sum += term;
    }
    while (k > 0) { sum *= 2.0; k--; }
    while (k < 0) { sum *= 0.5; k++; }
    return sum;
}

static double ref(double x) {
    double v = 0.7978845608028654 * (x + 0.044715 * x * x * x);
    return x / (1.0 + dexp(-2.0 * v));
}

static float bits(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}

typedef void (*geglu_fn)(float *, const float *, const float *, int64_t, int64_t);

static int cpu_has(const char *f) {
    if (strcmp(f, "avx2") == 0) return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vnni");
}

int main(void) {
    __builtin_cpu_init();
    struct {
        const char *name;
        int ok;
        geglu_fn fn;
    } vs[3] = {{"ref", 1, krt_geglu_ref}, {"avx2", cpu_has("avx2"), krt_geglu_avx2}, {"avx512", cpu_has("avx512"), krt_geglu_avx512}};
    static float gate[N], up[N], out[N + 2];
    uint64_t s = 0x9E3779B97F4A7C15ull;
    for (int i = 0; i < N; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        gate[i] = -8.0f + 16.0f * (float)((s >> 40) & 0xffffff) / 16777216.0f;
        up[i] = -2.0f + 4.0f * (float)((s >> 16) & 0xffffff) / 16777216.0f;
    }
    const float special[] = {-100.0f, -12.0f, -9.5f, 0.0f, 12.0f, 100.0f};
    for (int i = 0; i < 6; i++) gate[11 * i + 5] = special[i];
    for (int v = 0; v < 3; v++) {
        if (!vs[v].ok) {
            printf("geglu %-6s skipped (CPU lacks it)\n", vs[v].name);
            continue;
        }
        const int bounds[][2] = {{0, N}, {3, 7}, {5, 21}, {16, 48}, {100, 101}, {7, 7}};
        for (int b = 0; b < 6; b++) {
            int i0 = bounds[b][0], i1 = bounds[b][1];
            for (int i = 0; i < N + 2; i++) out[i] = SENT;
            vs[v].fn(out + 1, gate, up, i0, i1);
            for (int i = 0; i < N; i++) {
                float o = out[i + 1];
                if (i < i0 || i >= i1) {
                    CHECK(o == SENT, "%s [%d,%d) wrote element %d", vs[v].name, i0, i1, i);
                    continue;
                }
                double r = ref(gate[i]) * up[i], d = o - r, a = r < 0 ? -r : r;
                CHECK((d < 0 ? -d : d) <= 2e-5 * a + 1e-37, "%s g=%g up=%g: got %.9g want %.9g", vs[v].name, gate[i], up[i], o, r);
            }
            CHECK(out[0] == SENT && out[N + 1] == SENT, "%s wrote outside the buffer", vs[v].name);
        }
        /* special values: -Inf and very negative give -0, +Inf gives +Inf, NaN stays NaN */
        float g4[4] = {bits(0xff800000u), bits(0x7f800000u), bits(0x7fc00000u), -200.0f}, u4[4] = {3, 2, 1, 1}, o4[4];
        vs[v].fn(o4, g4, u4, 0, 4);
        uint32_t ob[4];
        memcpy(ob, o4, sizeof ob);
        CHECK(ob[0] == 0x80000000u, "%s gelu(-Inf)*3 = %#x, want -0", vs[v].name, ob[0]);
        CHECK(ob[1] == 0x7f800000u, "%s gelu(+Inf)*2 = %#x, want +Inf", vs[v].name, ob[1]);
        CHECK((ob[2] & 0x7fffffffu) > 0x7f800000u, "%s gelu(NaN) = %#x, want NaN", vs[v].name, ob[2]);
        CHECK(ob[3] == 0x80000000u, "%s gelu(-200) = %#x, want -0", vs[v].name, ob[3]);
        printf("geglu %-6s ok\n", vs[v].name);
    }
    if (failures) {
        fprintf(stderr, "%d failures\n", failures);
        return 1;
    }
    return 0;
}
