/* csrc/tests/test_nan.c - NaN and Inf mean the same in every variant (issue 12, item 1).
 * For softmax, rmsnorm, RoPE, SwiGLU, add, embedding and the legacy F32 attention: special
 * values (NaN, +Inf, -Inf) at every interesting position - first element, last full-vector lane,
 * first tail lane, last element, masked entries - and in every operand. Each SIMD variant must
 * give, element by element, the class _ref gives (NaN / +Inf / -Inf / finite, finite values
 * within 1e-5 relative), and the documented rule (the banners of csrc/norm.c, elementwise.c,
 * rope.c, embed.c, attention.c) is checked explicitly where it is short to state.
 * Q8_0 / Q5_0 GEMV and GEMM: a non-finite block scale gives NaN in every variant.
 * (Attention over F32/F16/Q8_0 caches and the KV appends: csrc/tests/test_attn.c.)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernelrt.h"

static int failures;
#define CHECK(cond, ...)                                                  \
    do {                                                                  \
        if (!(cond)) {                                                    \
            if (failures < 40) {                                          \
                fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__);      \
                fprintf(stderr, __VA_ARGS__);                             \
                fprintf(stderr, "\n");                                    \
            }                                                             \
            failures++;                                                   \
        }                                                                 \
    } while (0)

static float fbits(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}
#define F_NAN fbits(0x7fc00000u)
#define F_INF fbits(0x7f800000u)
static int is_nan(float x) { return x != x; }

/* 0 finite, 1 NaN, 2 +Inf, 3 -Inf */
static int cls(float x) { return is_nan(x) ? 1 : x == F_INF ? 2 : x == -F_INF ? 3 : 0; }
static const char *clsname[4] = {"finite", "NaN", "+Inf", "-Inf"};

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static float rndf(float lo, float hi) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}

/* ---- variants ---- */
typedef void (*softmax_fn)(float *, const int32_t *, int64_t, int64_t, int64_t);
typedef void (*rmsnorm_fn)(float *, const float *, const float *, const float *, int64_t, int64_t, int64_t);
typedef void (*rope_fn)(float *, const float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*ew_fn)(float *, const float *, const float *, int64_t, int64_t);
typedef void (*embed_fn)(float *, const krt_block_q8_0 *, const int32_t *, int64_t, int64_t, int64_t);
typedef void (*attn_fn)(float *, const float *, const float *, const float *, float *, int64_t, int64_t, int64_t,
                        int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef struct {
    const char *name;
    int supported;
    softmax_fn softmax;
    rmsnorm_fn rmsnorm;
    rope_fn rope;
    ew_fn swiglu, add;
    embed_fn embed;
    attn_fn attn;
} variant;
static variant V[3];

static void init_variants(void) {
    int avx2 = 0, avx512 = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
#endif
    V[0] = (variant){"ref", 1, krt_softmax_ref, krt_rmsnorm_ref, krt_rope_neox_ref, krt_swiglu_ref, krt_add_ref,
                     krt_embed_q8_0_ref, krt_attention_ref};
    V[1] = (variant){"avx2", avx2, krt_softmax_avx2, krt_rmsnorm_avx2, krt_rope_neox_avx2, krt_swiglu_avx2,
                     krt_add_avx2, krt_embed_q8_0_avx2, krt_attention_avx2};
    V[2] = (variant){"avx512", avx512, krt_softmax_avx512, krt_rmsnorm_avx512, krt_rope_neox_avx512,
                     krt_swiglu_avx512, krt_add_avx512, krt_embed_q8_0_avx512, krt_attention_avx512};
}

/* Each element of got has the class of want; finite values agree to 1e-5 relative (plus abs_tol:
 * RoPE's SIMD variants fuse one product, which matters only where the pair cancels). */
static float abs_tol = 1e-30f;
static void same(const char *what, const variant *v, const float *got, const float *want, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        int cg = cls(got[i]), cw = cls(want[i]);
        CHECK(cg == cw, "%s %s element %lld: %s (%g), _ref gives %s (%g)", v->name, what, (long long)i, clsname[cg],
              got[i], clsname[cw], want[i]);
        if (cg == 0 && cw == 0) {
            float d = got[i] - want[i], a = want[i] < 0 ? -want[i] : want[i];
            if (d < 0) d = -d;
            CHECK(d <= 1e-5f * a + abs_tol, "%s %s element %lld: %.9g vs _ref %.9g", v->name, what, (long long)i, got[i],
                  want[i]);
        }
    }
}

/* positions worth poisoning in a row of n: ends, vector edges (8, 16), the middle */
static int positions(int64_t n, int64_t *p) {
    int64_t cand[] = {0, 1, 7, 8, 15, 16, 17, n / 2, n - 2, n - 1};
    int k = 0;
    for (unsigned i = 0; i < sizeof cand / sizeof cand[0]; i++) {
        if (cand[i] < 0 || cand[i] >= n) continue;
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= p[j] == cand[i];
        if (!dup) p[k++] = cand[i];
    }
    return k;
}

static float special(int s) { return s == 0 ? F_NAN : s == 1 ? F_INF : -F_INF; }
static const char *sname[3] = {"NaN", "+Inf", "-Inf"};

/* ---- softmax ---- */
static void test_softmax(void) {
    const int64_t lens[] = {1, 3, 4, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100};
    for (unsigned li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        const int64_t n = lens[li], cols = n + 5;
        int64_t pos[16];
        const int np = positions(n, pos);
        float base[128], want[128], got[128];
        for (int64_t i = 0; i < cols; i++) base[i] = rndf(-4, 4);
        for (int pi = 0; pi < np; pi++)
            for (int s = 0; s < 3; s++) {
                char what[96];
                snprintf(what, sizeof what, "softmax n=%lld %s at %lld", (long long)n, sname[s], (long long)pos[pi]);
                float x[128];
                memcpy(x, base, sizeof x);
                x[pos[pi]] = special(s);
                int32_t valid = (int32_t)n;
                /* the rule, on _ref */
                memcpy(want, x, sizeof x);
                V[0].softmax(want, &valid, cols, 0, 1);
                for (int64_t i = 0; i < n; i++) {
                    if (s < 2 || n == 1) CHECK(is_nan(want[i]), "ref %s: element %lld = %g, want NaN", what, (long long)i, want[i]);
                    else if (i == pos[pi]) CHECK(want[i] == 0.0f, "ref %s: -Inf entry gives %g, want 0", what, want[i]);
                    else CHECK(cls(want[i]) == 0, "ref %s: element %lld = %g, want finite", what, (long long)i, want[i]);
                }
                for (int64_t i = n; i < cols; i++) CHECK(want[i] == 0.0f, "ref %s: masked element %lld not 0", what, (long long)i);
                for (int vi = 1; vi < 3; vi++) {
                    if (!V[vi].supported) continue;
                    memcpy(got, x, sizeof x);
                    V[vi].softmax(got, &valid, cols, 0, 1);
                    same(what, &V[vi], got, want, cols);
                    float want2[128]; /* and with valid == NULL over exactly n columns */
                    memcpy(got, x, sizeof x);
                    V[vi].softmax(got, NULL, n, 0, 1);
                    memcpy(want2, x, sizeof x);
                    V[0].softmax(want2, NULL, n, 0, 1);
                    same(what, &V[vi], got, want2, n);
                }
            }
        /* all -Inf -> NaN; NaN/Inf in masked entries are ignored */
        float x[128];
        for (int64_t i = 0; i < cols; i++) x[i] = -F_INF;
        int32_t valid = (int32_t)n;
        for (int vi = 0; vi < 3; vi++) {
            if (!V[vi].supported) continue;
            memcpy(got, x, sizeof x);
            V[vi].softmax(got, &valid, cols, 0, 1);
            for (int64_t i = 0; i < n; i++) CHECK(is_nan(got[i]), "%s softmax n=%lld all -Inf: element %lld = %g, want NaN", V[vi].name, (long long)n, (long long)i, got[i]);
        }
        if (n >= 3) {
            memcpy(x, base, sizeof base);
            int32_t vm = (int32_t)(n - 2);
            x[n - 2] = F_NAN;
            x[n - 1] = F_INF;
            x[n] = F_NAN;
            memcpy(want, x, sizeof x);
            V[0].softmax(want, &vm, cols, 0, 1);
            for (int vi = 0; vi < 3; vi++) {
                if (!V[vi].supported) continue;
                memcpy(got, x, sizeof x);
                V[vi].softmax(got, &vm, cols, 0, 1);
                double sum = 0;
                for (int64_t i = 0; i < vm; i++) {
                    CHECK(cls(got[i]) == 0, "%s softmax masked NaN leaked into element %lld", V[vi].name, (long long)i);
                    sum += got[i];
                }
                for (int64_t i = vm; i < cols; i++) CHECK(got[i] == 0.0f, "%s softmax masked element %lld = %g", V[vi].name, (long long)i, got[i]);
                CHECK(sum > 0.99999 && sum < 1.00001, "%s softmax with masked NaN: sum %g", V[vi].name, sum);
                if (vi) same("softmax masked NaN/Inf", &V[vi], got, want, cols);
            }
        }
    }
}

/* ---- rmsnorm ---- */
static void test_rmsnorm(void) {
    const int64_t dims[] = {1, 7, 8, 9, 16, 17, 33, 64, 100, 896};
    for (unsigned di = 0; di < sizeof dims / sizeof dims[0]; di++) {
        const int64_t dim = dims[di];
        static float x[2 * 896], w[896], want[2 * 896], got[2 * 896];
        for (int64_t i = 0; i < 2 * dim; i++) x[i] = rndf(-3, 3);
        for (int64_t i = 0; i < dim; i++) w[i] = rndf(0.5f, 1.5f);
        const float eps = 1e-6f;
        int64_t pos[16];
        const int np = positions(dim, pos);
        for (int pi = 0; pi < np; pi++)
            for (int s = 0; s < 3; s++)
                for (int where = 0; where < 2; where++) { /* 0: in x (row 1), 1: in weight */
                    char what[96];
                    snprintf(what, sizeof what, "rmsnorm dim=%lld %s in %s at %lld", (long long)dim, sname[s],
                             where ? "weight" : "x", (long long)pos[pi]);
                    float xs[2 * 896], ws[896];
                    memcpy(xs, x, sizeof(float) * (size_t)(2 * dim));
                    memcpy(ws, w, sizeof(float) * (size_t)dim);
                    if (where) ws[pos[pi]] = special(s);
                    else xs[dim + pos[pi]] = special(s);
                    V[0].rmsnorm(want, xs, ws, &eps, dim, 0, 2);
                    for (int64_t i = 0; i < dim; i++) {
                        float r0 = want[i], r1 = want[dim + i];
                        if (where == 0) {
                            CHECK(cls(r0) == 0, "ref %s: row 0 element %lld = %g", what, (long long)i, r0);
                            if (s == 0) CHECK(is_nan(r1), "ref %s: element %lld = %g, want NaN", what, (long long)i, r1);
                            else if (i == pos[pi]) CHECK(is_nan(r1), "ref %s: the Inf element gives %g, want NaN", what, r1);
                            else CHECK(r1 == 0.0f, "ref %s: element %lld = %g, want 0", what, (long long)i, r1);
                        } else if (i == pos[pi]) {
                            CHECK(cls(r0) == (s == 0 ? 1 : 0) || cls(r0) >= 2, "ref %s: weight special gives %g", what, r0);
                        } else {
                            CHECK(cls(r0) == 0 && cls(r1) == 0, "ref %s: element %lld not finite", what, (long long)i);
                        }
                    }
                    for (int vi = 1; vi < 3; vi++) {
                        if (!V[vi].supported) continue;
                        V[vi].rmsnorm(got, xs, ws, &eps, dim, 0, 2);
                        same(what, &V[vi], got, want, 2 * dim);
                    }
                }
        /* eps NaN: every row NaN */
        const float en = F_NAN;
        for (int vi = 0; vi < 3; vi++) {
            if (!V[vi].supported) continue;
            V[vi].rmsnorm(got, x, w, &en, dim, 0, 2);
            for (int64_t i = 0; i < 2 * dim; i++) CHECK(is_nan(got[i]), "%s rmsnorm eps NaN: element %lld = %g", V[vi].name, (long long)i, got[i]);
        }
    }
}

/* ---- rope ---- */
static void test_rope(void) {
    const int64_t hds[] = {64, 10, 48, 128};
    enum { MAXPOS = 8 };
    for (unsigned hi = 0; hi < sizeof hds / sizeof hds[0]; hi++) {
        const int64_t hd = hds[hi], half = hd / 2, nh = 3, stride = nh * hd + 3, T = 2;
        float ct[MAXPOS * 64], st[MAXPOS * 64];
        for (int64_t p = 0; p < MAXPOS; p++)
            for (int64_t i = 0; i < half; i++) {
                ct[p * half + i] = p == 0 ? 1.0f : rndf(-1, 1);
                st[p * half + i] = p == 0 ? 0.0f : rndf(-1, 1);
            }
        float x[2 * (3 * 128 + 3)], want[2 * (3 * 128 + 3)], got[2 * (3 * 128 + 3)];
        for (int64_t i = 0; i < T * stride; i++) x[i] = rndf(-2, 2);
        int64_t pos[16];
        const int np = positions(nh * hd, pos);
        for (int64_t pos0 = 0; pos0 < 2; pos0++) /* position 0: sin is exactly 0, 0 * Inf = NaN */
            for (int pi = 0; pi < np; pi++)
                for (int s = 0; s < 3; s++) {
                    char what[96];
                    snprintf(what, sizeof what, "rope hd=%lld pos0=%lld %s at %lld", (long long)hd, (long long)pos0,
                             sname[s], (long long)pos[pi]);
                    float xs[2 * (3 * 128 + 3)];
                    memcpy(xs, x, sizeof(float) * (size_t)(T * stride));
                    xs[stride + pos[pi]] = special(s);
                    memcpy(want, xs, sizeof(float) * (size_t)(T * stride));
                    V[0].rope(want, ct, st, stride, nh, hd, pos0, 0, T);
                    /* rule: only the poisoned pair is affected; NaN -> both NaN */
                    const int64_t h = pos[pi] / hd, e = pos[pi] % hd, k = e % half;
                    for (int64_t i = 0; i < stride; i++) {
                        const int64_t ii = stride + i;
                        const int in_pair = i < nh * hd && i / hd == h && (i % hd) % half == k;
                        if (!in_pair) CHECK(cls(want[ii]) == 0, "ref %s: element %lld = %g", what, (long long)i, want[ii]);
                        else if (s == 0) CHECK(is_nan(want[ii]), "ref %s: pair element %lld = %g, want NaN", what, (long long)i, want[ii]);
                    }
                    abs_tol = 1e-6f; /* |x| <= 2, |cos|, |sin| <= 1 */
                    for (int vi = 1; vi < 3; vi++) {
                        if (!V[vi].supported) continue;
                        memcpy(got, xs, sizeof(float) * (size_t)(T * stride));
                        V[vi].rope(got, ct, st, stride, nh, hd, pos0, 0, T);
                        same(what, &V[vi], got, want, T * stride);
                    }
                    abs_tol = 1e-30f;
                }
    }
}

/* ---- swiglu and add ---- */
static void test_elementwise(void) {
    enum { N = 203 };
    float g[N], u[N], want[N], got[N];
    for (int i = 0; i < N; i++) {
        g[i] = rndf(-10, 10);
        u[i] = rndf(-3, 3);
    }
    const int64_t sizes[] = {1, 7, 8, 9, 16, 17, 33, 64, 65, N};
    for (unsigned si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        const int64_t n = sizes[si];
        int64_t pos[16];
        const int np = positions(n, pos);
        for (int pi = 0; pi < np; pi++)
            for (int s = 0; s < 3; s++)
                for (int op = 0; op < 2; op++) /* poisoned operand: gate/a or up/b */
                    for (int k = 0; k < 2; k++) { /* k = 0 swiglu, 1 add */
                        char what[96];
                        snprintf(what, sizeof what, "%s n=%lld %s in operand %d at %lld", k ? "add" : "swiglu",
                                 (long long)n, sname[s], op, (long long)pos[pi]);
                        float a[N], b[N];
                        memcpy(a, g, sizeof g);
                        memcpy(b, u, sizeof u);
                        (op ? b : a)[pos[pi]] = special(s);
                        (k ? V[0].add : V[0].swiglu)(want, a, b, 0, n);
                        if (s == 0) CHECK(is_nan(want[pos[pi]]), "ref %s: got %g, want NaN", what, want[pos[pi]]);
                        for (int64_t i = 0; i < n; i++)
                            if (i != pos[pi]) CHECK(cls(want[i]) == 0, "ref %s: element %lld not finite", what, (long long)i);
                        for (int vi = 1; vi < 3; vi++) {
                            if (!V[vi].supported) continue;
                            (k ? V[vi].add : V[vi].swiglu)(got, a, b, 0, n);
                            same(what, &V[vi], got, want, n);
                        }
                    }
    }
    /* swiglu's documented special cases: gate -Inf -> -0 * up, +Inf -> +Inf * up */
    for (int vi = 0; vi < 3; vi++) {
        if (!V[vi].supported) continue;
        float a[16], b[16], o[16];
        for (int i = 0; i < 16; i++) {
            a[i] = i % 2 ? F_INF : -F_INF;
            b[i] = 2.0f;
        }
        V[vi].swiglu(o, a, b, 0, 16);
        for (int i = 0; i < 16; i++) {
            if (i % 2) CHECK(o[i] == F_INF, "%s swiglu(+Inf) * 2 = %g", V[vi].name, o[i]);
            else {
                uint32_t ob;
                memcpy(&ob, &o[i], 4);
                CHECK(ob == 0x80000000u, "%s swiglu(-Inf) * 2 = %g, want -0", V[vi].name, o[i]);
            }
        }
    }
}

/* ---- embedding: NaN / Inf scales ---- */
static void test_embed(void) {
    const int64_t dim = 96, nb = dim / 32;
    krt_block_q8_0 table[4 * 3];
    for (int64_t b = 0; b < 4 * nb; b++) {
        table[b].d = 0x2c00; /* 2^-4 */
        for (int j = 0; j < 32; j++) table[b].qs[j] = (int8_t)((j * 7 + (int)b) % 255 - 127);
        table[b].qs[5] = 0;
    }
    table[1 * nb + 0].d = 0x7e00; /* NaN */
    table[2 * nb + 1].d = 0x7c00; /* +Inf: +-Inf, and NaN where the quant is 0 */
    table[3 * nb + 2].d = 0xfc00; /* -Inf */
    int32_t ids[4] = {0, 1, 2, 3};
    float want[4 * 96], got[4 * 96];
    V[0].embed(want, table, ids, dim, 0, 4);
    for (int64_t j = 0; j < 32; j++) {
        CHECK(is_nan(want[1 * dim + j]), "ref embed: NaN scale gives %g", want[1 * dim + j]);
        const int8_t qv = table[2 * nb + 1].qs[j];
        CHECK(cls(want[2 * dim + 32 + j]) == (qv == 0 ? 1 : qv > 0 ? 2 : 3), "ref embed: Inf scale * %d gives %g", qv,
              want[2 * dim + 32 + j]);
    }
    for (int vi = 1; vi < 3; vi++) {
        if (!V[vi].supported) continue;
        V[vi].embed(got, table, ids, dim, 0, 4);
        same("embed", &V[vi], got, want, 4 * dim);
    }
}

/* ---- the legacy F32 attention: one NaN key (the 3.6e-38 / +Inf report) ---- */
static void test_attention(void) {
    const int64_t nh = 14, nkv = 2, hd = 64, mc = 300, n = 257;
    float *k = malloc(sizeof(float) * (size_t)(nkv * mc * hd)), *v = malloc(sizeof(float) * (size_t)(nkv * mc * hd));
    float q[14 * 64], want[14 * 64], got[14 * 64], scratch[300];
    for (int64_t i = 0; i < nkv * mc * hd; i++) {
        k[i] = rndf(-1, 1);
        v[i] = rndf(-1, 1);
    }
    for (int64_t i = 0; i < nh * hd; i++) q[i] = rndf(-1, 1);
    const int64_t js[] = {0, 15, 16, 63, 64, 200, n - 1};
    for (unsigned ji = 0; ji < sizeof js / sizeof js[0]; ji++)
        for (int s = 0; s < 3; s++)
            for (int inv = 0; inv < 2; inv++) {
                float *c = inv ? v : k;
                const int64_t idx = (1 * mc + js[ji]) * hd + 5; /* KV head 1 */
                const float keep = c[idx];
                c[idx] = special(s);
                char what[96];
                snprintf(what, sizeof what, "attention %s in %s at position %lld", sname[s], inv ? "V" : "K",
                         (long long)js[ji]);
                V[0].attn(want, q, k, v, scratch, nh, nkv, hd, mc, nh * hd, n - 1, 1, 0, nh);
                for (int64_t h = 0; h < nh; h++)
                    for (int64_t d = 0; d < hd; d++) {
                        float o = want[h * hd + d];
                        if (h < 7) CHECK(cls(o) == 0, "ref %s: head %lld (other KV head) not finite", what, (long long)h);
                        else if (!inv && s == 0) CHECK(is_nan(o), "ref %s: head %lld d %lld = %g, want NaN", what, (long long)h, (long long)d, o);
                        else if (inv && s == 0 && d == 5) CHECK(is_nan(o), "ref %s: want NaN in that element", what);
                        else if (inv && d != 5) CHECK(cls(o) == 0, "ref %s: element %lld not finite", what, (long long)d);
                    }
                abs_tol = 4e-6f; /* the attention tolerance: 4e-6 of sum w|v| <= 1 */
                for (int vi = 1; vi < 3; vi++) {
                    if (!V[vi].supported) continue;
                    V[vi].attn(got, q, k, v, scratch, nh, nkv, hd, mc, nh * hd, n - 1, 1, 0, nh);
                    same(what, &V[vi], got, want, nh * hd);
                }
                abs_tol = 1e-30f;
                c[idx] = keep;
            }
    free(k);
    free(v);
}

/* ---- Q8_0 / Q5_0 GEMV and GEMM: a block with a non-finite fp16 scale (weights or activations)
 * makes every output it meets NaN, in every variant (krt_common.h krt_scale_poison). Rows: 0 NaN
 * scale, 1 +Inf, 2 +Inf on a zero integer dot, 3 -Inf and +Inf, 4 -Inf in the last block, the
 * rest finite; then the same with an activation block's scale +Inf (every row NaN). ---- */
typedef void (*gemv8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemv5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t);
typedef void (*gemm8_fn)(float *, const krt_block_q8_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t,
                         int64_t, int64_t);
typedef void (*gemm5_fn)(float *, const krt_block_q5_0 *, const krt_block_q8_0 *, const float *, int64_t, int64_t, int64_t,
                         int64_t, int64_t);
static void test_gemv_scales(void) {
    enum { ROWS = 40, COLS = 256, NB = COLS / 32, T = 3 };
    const gemv8_fn g8[3] = {krt_gemv_q8_0_ref, krt_gemv_q8_0_avx2, krt_gemv_q8_0_avx512};
    const gemv5_fn g5[3] = {krt_gemv_q5_0_ref, krt_gemv_q5_0_avx2, krt_gemv_q5_0_avx512};
    const gemm8_fn m8[3] = {krt_gemm_q8_0_ref, krt_gemm_q8_0_avx2, krt_gemm_q8_0_avx512};
    const gemm5_fn m5[3] = {krt_gemm_q5_0_ref, krt_gemm_q5_0_avx2, krt_gemm_q5_0_avx512};
    static krt_block_q8_0 w8[ROWS * NB], x[T * NB];
    static krt_block_q5_0 w5[ROWS * NB];
    for (int i = 0; i < ROWS * NB; i++) {
        w8[i].d = w5[i].d = 0x2000 + (uint16_t)(rng % 512); /* ~0.008 .. 0.016 */
        for (int j = 0; j < 32; j++) w8[i].qs[j] = (int8_t)rndf(-127, 127);
        for (int j = 0; j < 16; j++) w5[i].qs[j] = (uint8_t)rndf(0, 255);
        for (int j = 0; j < 4; j++) w5[i].qh[j] = (uint8_t)rndf(0, 255);
    }
    for (int i = 0; i < T * NB; i++) {
        x[i].d = 0x2400;
        for (int j = 0; j < 32; j++) x[i].qs[j] = (int8_t)rndf(-127, 127);
    }
    w8[0 * NB + 0].d = w5[0 * NB + 0].d = 0x7e00;
    w8[1 * NB + 1].d = w5[1 * NB + 1].d = 0x7c00;
    w8[2 * NB + 2].d = w5[2 * NB + 2].d = 0x7c00;
    memset(w8[2 * NB + 2].qs, 0, 32);
    memset(w5[2 * NB + 2].qs, 0, 16);
    memset(w5[2 * NB + 2].qh, 0xff, 4); /* q = 16: value 0 */
    w8[3 * NB + 0].d = w5[3 * NB + 0].d = 0xfc00;
    w8[3 * NB + 1].d = w5[3 * NB + 1].d = 0x7c00;
    w8[4 * NB + NB - 1].d = w5[4 * NB + NB - 1].d = 0xfc00;
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1) x[(T - 1) * NB + 3].d = 0x7c00; /* the last token's block 3: +Inf */
        for (int vi = 0; vi < 3; vi++) {
            if (!V[vi].supported) continue;
            float y[T * ROWS];
            for (int q5 = 0; q5 < 2; q5++) {
                const char *nm = q5 ? "q5_0" : "q8_0";
                /* GEMV on the last token's activations */
                if (q5)
                    g5[vi](y, w5, x + (T - 1) * NB, NULL, COLS, 0, ROWS);
                else
                    g8[vi](y, w8, x + (T - 1) * NB, NULL, COLS, 0, ROWS);
                for (int r = 0; r < ROWS; r++) {
                    int want = (r < 5 || pass == 1) ? 1 : 0;
                    CHECK(cls(y[r]) == want, "%s gemv_%s pass %d row %d: %s (%g), want %s", V[vi].name, nm, pass, r,
                          clsname[cls(y[r])], y[r], clsname[want]);
                }
                if (q5)
                    m5[vi](y, w5, x, NULL, ROWS, COLS, T, 0, ROWS);
                else
                    m8[vi](y, w8, x, NULL, ROWS, COLS, T, 0, ROWS);
                for (int t = 0; t < T; t++)
                    for (int r = 0; r < ROWS; r++) {
                        int want = (r < 5 || (pass == 1 && t == T - 1)) ? 1 : 0;
                        CHECK(cls(y[t * ROWS + r]) == want, "%s gemm_%s pass %d token %d row %d: %s, want %s", V[vi].name, nm,
                              pass, t, r, clsname[cls(y[t * ROWS + r])], clsname[want]);
                    }
            }
        }
    }
}

int main(void) {
    init_variants();
    for (int vi = 1; vi < 3; vi++)
        if (!V[vi].supported) printf("test_nan: %s not supported by this CPU, skipped\n", V[vi].name);
    test_softmax();
    test_rmsnorm();
    test_rope();
    test_elementwise();
    test_embed();
    test_attention();
    test_gemv_scales();
    if (failures) {
        printf("test_nan: %d failures\n", failures);
        return 1;
    }
    printf("test_nan: all passed\n");
    return 0;
}
