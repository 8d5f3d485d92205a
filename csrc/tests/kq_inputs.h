/* csrc/tests/kq_inputs.h - deterministic quantizer test inputs without libm (bit-exact on every
 * platform), shared by test_kquant.c and oracle_kquant.c so that checksums of ggml's output on
 * them can be embedded in the ctest.
 *
 * kq_fill(x, n, kind, st) writes n floats of one kind from the xorshift state st: random
 * magnitudes over many decades, outliers, signed zeros, exact ties, integer grids, constant,
 * all-positive / all-negative, huge (including overflow to Inf), tiny, float subnormals, sign ties
 * of the largest magnitude, NaN / Inf, and mixed kinds per 16 values. Every random draw is its
 * own statement (C leaves the order of operands unsequenced), so any compiler and the Go port
 * (internal/generic) produce the same floats.
 */
#ifndef KQ_INPUTS_H
#define KQ_INPUTS_H

#include <stdint.h>
#include <string.h>

enum { KQ_RANDOM, KQ_OUTLIER, KQ_ZERO, KQ_NEGZERO, KQ_SINGLE, KQ_TIES, KQ_GRID, KQ_CONST, KQ_POS, KQ_NEG,
       KQ_HUGE, KQ_TINY, KQ_SUBN, KQ_SIGNTIE, KQ_MIXED, KQ_NAN, KQ_NKINDS };

static inline uint64_t kq_rnd(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static inline float kq_bitsf(uint32_t u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* m * 2^e for |m| < 2^24 (exact: built from bits, no libm). */
static inline float kq_ldexp(int32_t m, int e) {
    if (m == 0) return 0.0f;
    uint32_t sign = m < 0 ? 0x80000000u : 0;
    uint32_t a = (uint32_t)(m < 0 ? -m : m);
    int sh = 0;
    while (a >= (1u << 24)) { a >>= 1; sh++; }
    while (a < (1u << 23)) { a <<= 1; sh--; }
    int be = 127 + 23 + sh + e;
    if (be >= 255) return kq_bitsf(sign | 0x7f800000u);
    if (be <= 0) { /* subnormal: shift right (truncating: inputs only) */
        int r = 1 - be;
        a = r > 24 ? 0 : a >> r;
        return kq_bitsf(sign | a);
    }
    return kq_bitsf(sign | ((uint32_t)be << 23) | (a & 0x7fffffu));
}

/* A roughly normal number (sum of 4 uniforms, centred) with 20-bit mantissa, times 2^e. */
static inline float kq_norm(uint64_t *s, int e) {
    int32_t v = 0;
    for (int i = 0; i < 4; i++) v += (int32_t)(kq_rnd(s) & 0x3ffff);
    v -= 2 * 0x3ffff;
    return kq_ldexp(v, e - 18);
}

static inline int kq_irand(uint64_t *s, int a, int b) { return a + (int)(kq_rnd(s) % (uint64_t)(b - a + 1)); }

static void kq_fill(float *x, int n, int kind, uint64_t *s) {
    switch (kind) {
    case KQ_RANDOM: {
        int e = kq_irand(s, -14, 14);
        for (int j = 0; j < n; j++) x[j] = kq_norm(s, e);
        break;
    }
    case KQ_OUTLIER:
        for (int j = 0; j < n; j++) x[j] = kq_norm(s, 0);
        for (int t = 0; t < 3; t++) {
            int i = kq_irand(s, 0, n - 1);
            x[i] = kq_norm(s, 7);
        }
        break;
    case KQ_ZERO: for (int j = 0; j < n; j++) x[j] = 0.0f; break;
    case KQ_NEGZERO: for (int j = 0; j < n; j++) x[j] = kq_rnd(s) & 1 ? -0.0f : 0.0f; break;
    case KQ_SINGLE:
        for (int j = 0; j < n; j++) x[j] = kq_rnd(s) & 1 ? -0.0f : 0.0f;
        {
            int i = kq_irand(s, 0, n - 1);
            x[i] = kq_norm(s, 0);
        }
        break;
    case KQ_TIES: {
        int e = kq_irand(s, -20, 20), m = 1 << kq_irand(s, 1, 7);
        for (int j = 0; j < n; j++) {
            int k = kq_irand(s, -m, m);
            int h = (int)(kq_rnd(s) & 1);
            x[j] = kq_ldexp(2 * k + h, e - 1);
        }
        break;
    }
    case KQ_GRID: {
        int m = kq_irand(s, 1, 40);
        for (int j = 0; j < n; j++) x[j] = (float)kq_irand(s, -m, m);
        break;
    }
    case KQ_CONST: {
        float v = kq_norm(s, 0);
        for (int j = 0; j < n; j++) x[j] = v;
        break;
    }
    case KQ_POS: for (int j = 0; j < n; j++) x[j] = kq_ldexp((int32_t)(kq_rnd(s) & 0xfffff) + 0x80000, -20); break;
    case KQ_NEG: for (int j = 0; j < n; j++) x[j] = -kq_ldexp((int32_t)(kq_rnd(s) & 0xfffff) + 0x80000, -20); break;
    case KQ_HUGE: {
        int e = kq_irand(s, 50, 126);
        for (int j = 0; j < n; j++) x[j] = kq_norm(s, e);
        if (kq_rnd(s) & 1) {
            int i = kq_irand(s, 0, n - 1);
            x[i] = kq_rnd(s) & 1 ? 3.4e38f : -3.4e38f;
        }
        break;
    }
    case KQ_TINY: {
        int e = kq_irand(s, -100, -14);
        for (int j = 0; j < n; j++) x[j] = kq_norm(s, e);
        break;
    }
    case KQ_SUBN:
        for (int j = 0; j < n; j++) x[j] = kq_bitsf((uint32_t)(kq_rnd(s) & 0x807fffffu));
        if (kq_rnd(s) & 1) {
            int i = kq_irand(s, 0, n - 1);
            x[i] = kq_rnd(s) & 1 ? 1e-37f : 3e-38f;
        }
        break;
    case KQ_SIGNTIE: {
        float m = kq_ldexp((int32_t)(kq_rnd(s) & 0xfffff) + 0x100000, -19);
        for (int j = 0; j < n; j++) x[j] = kq_norm(s, -2) * m;
        for (int t = 0; t < 4; t++) {
            int i = kq_irand(s, 0, n - 1);
            x[i] = kq_rnd(s) & 1 ? m : -m;
        }
        break;
    }
    case KQ_MIXED:
        for (int j = 0; j < n; j += 16) {
            int k = kq_irand(s, 0, KQ_SIGNTIE);
            kq_fill(x + j, n - j < 16 ? n - j : 16, k, s);
        }
        break;
    case KQ_NAN:
        for (int j = 0; j < n; j++) x[j] = kq_norm(s, 0);
        {
            uint32_t k = (uint32_t)(kq_rnd(s) % 3);
            int i = kq_irand(s, 0, n - 1);
            x[i] = kq_bitsf(k == 0 ? 0x7fc00000u : k == 1 ? 0x7f800000u : 0xff800000u);
        }
        break;
    }
}

/* 1 if any of the n floats is NaN or +-Inf. */
static inline int kq_nonfinite(const float *x, int n) {
    for (int j = 0; j < n; j++) {
        uint32_t u;
        memcpy(&u, &x[j], 4);
        if ((u & 0x7f800000u) == 0x7f800000u) return 1;
    }
    return 0;
}

/* The golden input set: nb blocks of qk values, kind b % KQ_NKINDS for the first 4*KQ_NKINDS
 * blocks, then random kinds; seed fixed. */
__attribute__((unused)) static void kq_golden(float *x, int nb, int qk, int *kind) {
    uint64_t s = 0x9E3779B97F4A7C15ull ^ (uint64_t)qk;
    for (int b = 0; b < nb; b++) {
        int k = b < 4 * KQ_NKINDS ? b % KQ_NKINDS : kq_irand(&s, 0, KQ_NKINDS - 1);
        if (kind) kind[b] = k;
        kq_fill(x + (size_t)b * qk, qk, k, &s);
    }
}

/* FNV-1a 64 of the finite blocks' bytes (poisoned blocks have no ggml counterpart). */
__attribute__((unused)) static uint64_t kq_hash(const uint8_t *q, const float *x, int nb, int qk, int bytes) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (int b = 0; b < nb; b++) {
        if (kq_nonfinite(x + (size_t)b * qk, qk)) continue;
        for (int i = 0; i < bytes; i++) h = (h ^ q[(size_t)b * bytes + i]) * 0x100000001b3ull;
    }
    return h;
}

#endif /* KQ_INPUTS_H */
