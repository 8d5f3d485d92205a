/* csrc/tests/kq_test.h - the small harness shared by the Q4_0 / Q5_1 / K-quant tests:
 * CPU variant detection, CHECK / report, guarded buffers (the buffer ends exactly at a PROT_NONE
 * page, so reading past the end faults), random numbers, and variant tables of every new kernel. */
#ifndef KQ_TEST_H
#define KQ_TEST_H

#define _DEFAULT_SOURCE 1 /* mmap MAP_ANONYMOUS, sysconf */
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

static void detect_variants(void) {
    __builtin_cpu_init();
    have[V_REF] = 1;
    have[V_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    have[V_AVX512] = have[V_AVX2] && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                     __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                     __builtin_cpu_supports("avx512vnni");
    printf("variants: ref%s%s\n", have[V_AVX2] ? " avx2" : "", have[V_AVX512] ? " avx512" : "");
}

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
        printf("FAIL %-52s %-7s (%d mismatches)\n", what, variant, g_check_fail);
        g_fail++;
    } else {
        printf("PASS %-52s %s\n", what, variant);
    }
    g_check_fail = 0;
}

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
__attribute__((unused)) static int irand(int lo, int hi) { return lo + (int)(rnd() % (uint64_t)(hi - lo + 1)); }
/* uniform in [-1, 1) */
__attribute__((unused)) static float frand(void) { return (float)(int32_t)(rnd() >> 40) / 8388608.0f; }

static uint32_t fbits(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Equal bits, or both NaN. */
__attribute__((unused)) static int same_float(float a, float b) { return fbits(a) == fbits(b) || (a != a && b != b); }

typedef struct {
    void *base;
    size_t len;
} gbuf;
__attribute__((unused)) static void *galloc(gbuf *g, size_t n) {
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    size_t data = (n + ps - 1) / ps * ps;
    g->len = data + 2 * ps;
    g->base = mmap(NULL, g->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (g->base == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    mprotect(g->base, ps, PROT_NONE);
    mprotect((char *)g->base + ps + data, ps, PROT_NONE);
    return (char *)g->base + ps + data - n;
}
__attribute__((unused)) static void gfree(gbuf *g) { munmap(g->base, g->len); }

#define KQ_VARIANTS(f) {(void *)f##_ref, (void *)f##_avx2, (void *)f##_avx512}

static int finish(const char *name) {
    if (g_fail) {
        printf("%s: %d check(s) FAILED\n", name, g_fail);
        return 1;
    }
    printf("%s: all checks passed\n", name);
    return 0;
}

#endif /* KQ_TEST_H */
