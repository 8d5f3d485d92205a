/* csrc/tests/test_attn.c - C tests of the F32 / F16 / Q8_0 KV-cache appends and of the decode,
 * merge and prefill attention kernels, every variant this CPU runs:
 *   - against a float64 reference computed from the values the cache holds (F16 widened, Q8_0
 *     dequantized; Q8_0 scores from the query quantized with krt_quantize_q8_0_ref), at depths
 *     1 .. 16384, several GQA shapes and head sizes;
 *   - chunked + merged == unchunked within the same tolerance;
 *   - a slice of units writes exactly its rows (sentinels everywhere else), appends write only
 *     their tokens, SIMD appends are bit-identical to _ref;
 *   - NaN / Inf: the reference is IEEE float64 arithmetic of the same formula (max skipping NaN,
 *     starting at -FLT_MAX), and each output element must have the reference's class (NaN,
 *     the same infinity, or finite and within tolerance); garbage (NaN) in cache positions a row
 *     does not see must not change a single bit of the result.
 * No libm: exp and 1/sqrt in double are computed here. Build: see CMakeLists.txt (ctest).
 */
#include <math.h>
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

#define TOL 4e-6 /* |out - ref| <= TOL * sum_j w_j |V_j[d]| */

/* ---- deterministic random numbers ---- */
static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint32_t rnd32(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (uint32_t)(rng_state >> 16);
}
static float rndf(float lo, float hi) { return lo + (hi - lo) * (float)(rnd32() & 0xffffff) / 16777216.0f; }

/* ---- float / double helpers without libm ---- */
static float fbits(uint32_t b) {
    float f;
    memcpy(&f, &b, 4);
    return f;
}
static uint32_t bitsf(float f) {
    uint32_t b;
    memcpy(&b, &f, 4);
    return b;
}
#define F_NAN fbits(0x7fc00000u)
#define F_INF fbits(0x7f800000u)
static int is_nan(double x) { return x != x; }
static int is_inf(double x) { return x == (double)F_INF || x == -(double)F_INF; }
static double dabs(double x) { return x < 0 ? -x : x; }
static double dexp(double x) {
    if (x != x) return x;
    if (x < -745.0) return 0.0;
    if (x > 709.0) return (double)F_INF;
    const double ln2 = 0.6931471805599453094;
    double kf = x / ln2;
    int64_t k = (int64_t)(kf < 0 ? kf - 0.5 : kf + 0.5);
    double r = x - (double)k * ln2, term = 1.0, sum = 1.0;
    for (int i = 1; i < 20; i++) {
        term *= r / i;
        sum += term;
    }
    while (k > 0) { sum *= 2.0; k--; }
    while (k < 0) { sum *= 0.5; k++; }
    return sum;
}
static double dinvsqrt(double x) {
    double y = 1.0;
    while (y * y * x > 1.0) y *= 0.5;
    while (y * y * x < 0.25) y *= 2.0;
    for (int i = 0; i < 60; i++) y = y * (1.5 - 0.5 * x * y * y);
    return y;
}
static double h2d(uint16_t h) { /* IEEE half -> double, exact */
    int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double v;
    if (e == 0x1f) v = m ? (double)F_NAN : (double)F_INF;
    else {
        v = e ? (1.0 + m / 1024.0) : m / 1024.0;
        int sh = e ? e - 15 : -14;
        while (sh > 0) { v *= 2; sh--; }
        while (sh < 0) { v *= 0.5; sh++; }
    }
    return (h & 0x8000) ? -v : v;
}

static float h2f[65536]; /* exact, built once from h2d */
static void init_h2f(void) {
    for (uint32_t i = 0; i < 65536; i++) h2f[i] = (float)h2d((uint16_t)i);
}

/* ---- kernels by type and variant ---- */
enum { KF32, KF16, KQ8, NKV };
static const char *kvname[NKV] = {"f32", "f16", "q8_0"};

typedef void (*append_fn)(void *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*decode_fn)(float *, float *, const float *, const void *, const void *, float *, const float *, int64_t,
                          int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*prefill_fn)(float *, const float *, const void *, const void *, float *, const float *, int64_t, int64_t,
                           int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
typedef void (*merge_fn)(float *, const float *, int64_t, int64_t, int64_t, int64_t, int64_t);

typedef struct {
    const char *name;
    int supported;
    append_fn append[NKV];
    decode_fn decode[NKV];
    prefill_fn prefill[NKV];
    merge_fn merge;
} variant;
static variant variants[3];

#define FILL_VARIANT(i, nm, sup, sfx)                                                                              \
    variants[i] = (variant){nm,                                                                                    \
                            sup,                                                                                   \
                            {(append_fn)krt_kv_append_##sfx, (append_fn)krt_kv_append_f16_##sfx,                   \
                             (append_fn)krt_kv_append_q8_0_##sfx},                                                 \
                            {(decode_fn)krt_attn_decode_f32_##sfx, (decode_fn)krt_attn_decode_f16_##sfx,           \
                             (decode_fn)krt_attn_decode_q8_0_##sfx},                                               \
                            {(prefill_fn)krt_attn_prefill_f32_##sfx, (prefill_fn)krt_attn_prefill_f16_##sfx,       \
                             (prefill_fn)krt_attn_prefill_q8_0_##sfx},                                             \
                            krt_attn_merge_##sfx}

static void init_variants(void) {
    int avx2 = 0, avx512 = 0;
#if defined(__x86_64__)
    __builtin_cpu_init();
    avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    avx512 = avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
             __builtin_cpu_supports("avx512vnni");
#endif
    FILL_VARIANT(0, "ref", 1, ref);
    FILL_VARIANT(1, "avx2", avx2, avx2);
    FILL_VARIANT(2, "avx512", avx512, avx512);
}

/* ---- a KV cache of one type ---- */
typedef struct {
    int kv;
    int64_t nkv, hd, max_ctx;
    size_t bytes;
    void *k, *v;
    float *kf, *vf; /* the stored values widened (exact in float for every type) */
} cache;

static size_t row_bytes(int kv, int64_t hd) { return kv == KF32 ? hd * 4 : kv == KF16 ? hd * 2 : hd / 32 * 34; }

static cache cache_new(int kv, int64_t nkv, int64_t hd, int64_t max_ctx) {
    cache c = {kv, nkv, hd, max_ctx, row_bytes(kv, hd) * nkv * max_ctx, 0, 0, 0, 0};
    c.k = malloc(c.bytes);
    c.v = malloc(c.bytes);
    c.kf = malloc(sizeof(float) * (size_t)(nkv * max_ctx * hd));
    c.vf = malloc(sizeof(float) * (size_t)(nkv * max_ctx * hd));
    memset(c.k, 0xAB, c.bytes);
    memset(c.v, 0xAB, c.bytes);
    return c;
}
static void cache_free(cache *c) {
    free(c->k);
    free(c->v);
    free(c->kf);
    free(c->vf);
}

static void *row_ptr(const cache *c, const void *base, int64_t g, int64_t j) {
    return (char *)base + row_bytes(c->kv, c->hd) * (size_t)(g * c->max_ctx + j);
}

/* Stored value (g, j, d) of K or V, decoded from the raw bytes. */
static float raw_val(const cache *c, const void *base, int64_t g, int64_t j, int64_t d) {
    const void *r = row_ptr(c, base, g, j);
    if (c->kv == KF32) return ((const float *)r)[d];
    if (c->kv == KF16) return h2f[((const uint16_t *)r)[d]];
    const krt_block_q8_0 *b = (const krt_block_q8_0 *)r + d / 32;
    return h2f[b->d] * (float)b->qs[d % 32]; /* 11 x 8 significant bits: exact */
}

static uint64_t cache_gen; /* bumped on every change of any cache (memoized references) */

/* Refresh the widened copies of positions [p0, p1). */
static void cache_sync(cache *c, int64_t p0, int64_t p1) {
    cache_gen++;
    for (int64_t g = 0; g < c->nkv; g++)
        for (int64_t j = p0; j < p1; j++)
            for (int64_t d = 0; d < c->hd; d++) {
                c->kf[(g * c->max_ctx + j) * c->hd + d] = raw_val(c, c->k, g, j, d);
                c->vf[(g * c->max_ctx + j) * c->hd + d] = raw_val(c, c->v, g, j, d);
            }
}

static inline double cval(const cache *c, const void *base, int64_t g, int64_t j, int64_t d) {
    return (base == c->k ? c->kf : c->vf)[(g * c->max_ctx + j) * c->hd + d];
}

/* Fill positions [p0, p1) of every KV head with random rows (stored via the _ref append). */
static void cache_fill(cache *c, int64_t p0, int64_t p1, float amp) {
    const int64_t w = c->nkv * c->hd;
    float *src = malloc(sizeof(float) * (size_t)w * (size_t)(p1 - p0) * 2 + 4);
    float *srcv = src + w * (p1 - p0);
    for (int64_t i = 0; i < w * (p1 - p0); i++) {
        src[i] = rndf(-amp, amp);
        srcv[i] = rndf(-1, 1);
    }
    variants[0].append[c->kv](c->k, src, w, c->nkv, c->hd, c->max_ctx, p0, 0, p1 - p0);
    variants[0].append[c->kv](c->v, srcv, w, c->nkv, c->hd, c->max_ctx, p0, 0, p1 - p0);
    cache_sync(c, p0, p1);
    free(src);
}

/* Store one value (g, j, d) exactly as an append of that row with the value changed would. */
static void cache_poke(cache *c, void *base, int64_t g, int64_t j, int64_t d, float val) {
    float row[256];
    for (int64_t i = 0; i < c->hd; i++) row[i] = raw_val(c, base, g, j, i);
    row[d] = val;
    void *dst = row_ptr(c, base, g, j);
    if (c->kv == KF32) memcpy(dst, row, 4 * c->hd);
    else if (c->kv == KF16) krt_kv_append_f16_ref((uint16_t *)dst, row, 0, 1, c->hd, 1, 0, 0, 1);
    else krt_kv_append_q8_0_ref((krt_block_q8_0 *)dst, row, 0, 1, c->hd, 1, 0, 0, 1);
    cache_sync(c, j, j + 1); /* (both K and V of this position: cheap) */
}

/* ---- float64 reference of one query row over keys [0, n) of KV head g ----
 * o[d]: IEEE float64 value of the formula; mag[d] = sum_j w_j |V_j[d]| (finite parts). */
static double *ref_s;
/* The soft-cap every kernel call and ref_row use (0: off); changing it bumps cache_gen. */
static float g_cap;
static void ref_row(const cache *c, int64_t g, const float *q, int64_t n, double *o, double *mag) {
    const int64_t hd = c->hd;
    const double scale = (double)dinvsqrt((double)hd);
    krt_block_q8_0 qq[8];
    if (c->kv == KQ8) krt_quantize_q8_0_ref(qq, q, 0, hd / 32);
    double m = -3.40282346638528859812e+38;
    for (int64_t j = 0; j < n; j++) {
        double s = 0;
        if (c->kv == KQ8) {
            const krt_block_q8_0 *kb = (const krt_block_q8_0 *)row_ptr(c, c->k, g, j);
            for (int64_t b = 0; b < hd / 32; b++) {
                int64_t isum = 0;
                for (int i = 0; i < 32; i++) isum += (int64_t)qq[b].qs[i] * kb[b].qs[i];
                s += h2d(qq[b].d) * h2d(kb[b].d) * (double)isum;
            }
        } else {
            const float *kr = c->kf + (g * c->max_ctx + j) * hd;
            for (int64_t d = 0; d < hd; d++) s += (double)q[d] * kr[d];
        }
        ref_s[j] = s * scale;
        if (g_cap != 0) ref_s[j] = g_cap * tanh(ref_s[j] / g_cap);
        if (ref_s[j] > m) m = ref_s[j];
    }
    double l = 0;
    for (int64_t d = 0; d < hd; d++) o[d] = mag[d] = 0;
    for (int64_t j = 0; j < n; j++) {
        double e = dexp(ref_s[j] - m);
        l += e;
        const float *vr = c->vf + (g * c->max_ctx + j) * hd;
        for (int64_t d = 0; d < hd; d++) {
            double v = vr[d];
            o[d] += e * v;
            if (!is_nan(e * v) && !is_inf(e * v)) mag[d] += e * dabs(v);
        }
    }
    double inv = 1.0 / l;
    for (int64_t d = 0; d < hd; d++) {
        o[d] *= inv;
        mag[d] *= inv;
        if (is_nan(mag[d]) || is_inf(mag[d])) mag[d] = 0;
    }
}

/* Compare one output row with the reference; returns the worst relative error. */
static double check_row(const char *what, const float *out, const double *o, const double *mag, int64_t hd) {
    double worst = 0;
    for (int64_t d = 0; d < hd; d++) {
        if (is_nan(o[d])) {
            CHECK(is_nan(out[d]), "%s d=%lld: got %g, want NaN", what, (long long)d, out[d]);
        } else if (is_inf(o[d])) {
            CHECK((double)out[d] == o[d], "%s d=%lld: got %g, want %g", what, (long long)d, out[d], o[d]);
        } else {
            double err = dabs((double)out[d] - o[d]), rel = err / (mag[d] + 1e-30);
            CHECK(!is_nan(out[d]) && !is_inf(out[d]) && err <= TOL * mag[d] + 1e-30,
                  "%s d=%lld: got %.9g want %.9g (rel %.3g)", what, (long long)d, out[d], o[d], rel);
            if (rel > worst && !is_nan(rel)) worst = rel;
        }
    }
    return worst;
}

static float *scratch_buf(int64_t hd) {
    return malloc(sizeof(float) * (size_t)KRT_ATTN_SCRATCH_FLOATS(hd));
}

#define SENT 12345.678f

/* ---- decode ---- */
typedef struct {
    int64_t nh, nkv, hd;
} shape;

/* Run decode over all units in three slices (and merge in two), check every head. */
static double run_decode(const variant *v, const cache *c, const shape *sh, const float *q, int64_t n_ctx,
                         int64_t chunk, float *out, int check_ref, const char *tag) {
    const int64_t nch = (n_ctx + chunk - 1) / chunk, U = sh->nkv * nch, ps = KRT_ATTN_PART_STRIDE(sh->hd);
    float *part = nch > 1 ? malloc(sizeof(float) * (size_t)(sh->nh * nch * ps)) : NULL;
    float *ws = scratch_buf(sh->hd);
    for (int64_t i = 0; i < sh->nh * sh->hd; i++) out[i] = SENT;
    if (part)
        for (int64_t i = 0; i < sh->nh * nch * ps; i++) part[i] = SENT;
    const int64_t cuts[4] = {0, U / 3, (2 * U) / 3, U};
    for (int s = 0; s < 3; s++) v->decode[c->kv](out, part, q, c->k, c->v, ws, &g_cap, KRT_ATTN_HEADS(sh->nh, sh->nkv), sh->hd, c->max_ctx,
                                                 n_ctx, chunk, cuts[s], cuts[s + 1]);
    if (part) {
        /* every record written, nothing else touched */
        for (int64_t i = 0; i < sh->nh * sh->hd; i++) CHECK(out[i] == SENT, "%s: decode wrote out with %lld chunks", tag, (long long)nch);
        v->merge(out, part, sh->nh, sh->hd, nch, 0, sh->nh / 2);
        v->merge(out, part, sh->nh, sh->hd, nch, sh->nh / 2, sh->nh);
    }
    double worst = 0;
    if (check_ref) {
        /* the reference depends only on (cache contents, q, n_ctx): reuse it across chunkings */
        static const void *memo_c, *memo_q;
        static uint64_t memo_gen = ~0ull;
        static int64_t memo_n;
        static double *memo_o, *memo_m;
        if (memo_c != c || memo_q != q || memo_n != n_ctx || memo_gen != cache_gen) {
            free(memo_o);
            free(memo_m);
            memo_o = malloc(sizeof(double) * (size_t)(sh->nh * sh->hd));
            memo_m = malloc(sizeof(double) * (size_t)(sh->nh * sh->hd));
            for (int64_t h = 0; h < sh->nh; h++)
                ref_row(c, h / (sh->nh / sh->nkv), q + h * sh->hd, n_ctx, memo_o + h * sh->hd, memo_m + h * sh->hd);
            memo_c = c;
            memo_q = q;
            memo_n = n_ctx;
            memo_gen = cache_gen;
        }
        for (int64_t h = 0; h < sh->nh; h++) {
            char what[300];
            snprintf(what, sizeof what, "%s head %lld", tag, (long long)h);
            double w = check_row(what, out + h * sh->hd, memo_o + h * sh->hd, memo_m + h * sh->hd, sh->hd);
            if (w > worst) worst = w;
        }
    }
    free(part);
    free(ws);
    return worst;
}

/* A slice [u0, u1) writes exactly the rows/records of its units. */
static void decode_slice_check(const variant *v, const cache *c, const shape *sh, const float *q, int64_t n_ctx,
                               int64_t chunk, const char *tag) {
    const int64_t nch = (n_ctx + chunk - 1) / chunk, U = sh->nkv * nch, ps = KRT_ATTN_PART_STRIDE(sh->hd);
    const int64_t G = sh->nh / sh->nkv;
    const int64_t u0 = U > 2 ? 1 : 0, u1 = U > 2 ? U - 1 : 1;
    float *out = malloc(sizeof(float) * (size_t)(sh->nh * sh->hd));
    float *part = malloc(sizeof(float) * (size_t)(sh->nh * nch * ps));
    float *ws = scratch_buf(sh->hd);
    for (int64_t i = 0; i < sh->nh * sh->hd; i++) out[i] = SENT;
    for (int64_t i = 0; i < sh->nh * nch * ps; i++) part[i] = SENT;
    v->decode[c->kv](out, part, q, c->k, c->v, ws, &g_cap, KRT_ATTN_HEADS(sh->nh, sh->nkv), sh->hd, c->max_ctx, n_ctx, chunk, u0, u1);
    for (int64_t h = 0; h < sh->nh; h++) {
        for (int64_t ci = 0; ci < nch; ci++) {
            const int64_t u = (h / G) * nch + ci;
            const int in = u >= u0 && u < u1;
            if (nch == 1) {
                for (int64_t d = 0; d < sh->hd; d++)
                    CHECK((out[h * sh->hd + d] != SENT) == in, "%s slice [%lld,%lld): head %lld written=%d", tag,
                          (long long)u0, (long long)u1, (long long)h, !in);
            } else {
                const float *rec = part + (h * nch + ci) * ps;
                CHECK((rec[0] != SENT && rec[1] != SENT) == in, "%s slice: record (%lld,%lld) header", tag, (long long)h,
                      (long long)ci);
                for (int64_t i = 2; i < 16; i++) CHECK(rec[i] == SENT, "%s slice: record pad written", tag);
                for (int64_t d = 0; d < sh->hd; d++)
                    CHECK((rec[16 + d] != SENT) == in, "%s slice: record (%lld,%lld) acc", tag, (long long)h, (long long)ci);
            }
        }
    }
    if (nch > 1)
        for (int64_t i = 0; i < sh->nh * sh->hd; i++) CHECK(out[i] == SENT, "%s slice wrote out", tag);
    free(out);
    free(part);
    free(ws);
}

static double worst_dec[3][NKV], worst_pre[3][NKV];
#define FOR_VARIANTS(vi, v) \
    for (int vi = 0; vi < 3; vi++) \
        for (const variant *v = &variants[vi]; v && v->supported; v = NULL)

static void test_decode(int kv, shape sh, int64_t n_ctx, const int64_t *chunks, int nchunks, float qamp) {
    const int64_t max_ctx = n_ctx + 3;
    cache c = cache_new(kv, sh.nkv, sh.hd, max_ctx);
    cache_fill(&c, 0, n_ctx, 1.0f);
    float *q = malloc(sizeof(float) * (size_t)(sh.nh * sh.hd));
    for (int64_t i = 0; i < sh.nh * sh.hd; i++) q[i] = rndf(-qamp, qamp);
    float *o1 = malloc(sizeof(float) * (size_t)(sh.nh * sh.hd)), *o2 = malloc(sizeof(float) * (size_t)(sh.nh * sh.hd));
    FOR_VARIANTS(vi, v) {
        char tag[200];
        snprintf(tag, sizeof tag, "%s decode %s nh=%lld nkv=%lld hd=%lld n=%lld", v->name, kvname[kv],
                 (long long)sh.nh, (long long)sh.nkv, (long long)sh.hd, (long long)n_ctx);
        double worst = run_decode(v, &c, &sh, q, n_ctx, n_ctx, o1, 1, tag);
        for (int i = 0; i < nchunks; i++) {
            if (chunks[i] >= n_ctx) continue;
            char t2[240];
            snprintf(t2, sizeof t2, "%s chunk=%lld", tag, (long long)chunks[i]);
            double w = run_decode(v, &c, &sh, q, n_ctx, chunks[i], o2, 1, t2);
            if (w > worst) worst = w;
            /* chunked + merged vs unchunked (the same tolerance, relative to the values' scale) */
            for (int64_t k = 0; k < sh.nh * sh.hd; k++)
                CHECK(dabs((double)o1[k] - o2[k]) <= 2 * TOL, "%s: chunked %.9g vs unchunked %.9g", t2, o2[k], o1[k]);
            decode_slice_check(v, &c, &sh, q, n_ctx, chunks[i], t2);
        }
        decode_slice_check(v, &c, &sh, q, n_ctx, n_ctx, tag);
        if (worst > worst_dec[vi][kv]) worst_dec[vi][kv] = worst;
    }
    free(q);
    free(o1);
    free(o2);
    cache_free(&c);
}

/* ---- prefill ---- */
static int64_t unit_of_token(int64_t t, int64_t g, int64_t ntiles) {
    const int64_t tile = t / KRT_ATTN_QTILE;
    for (int64_t k = 0; k < ntiles; k++) {
        int64_t z = (k & 1) ? ntiles - 1 - k / 2 : k / 2;
        if (z == tile) return g * ntiles + k;
    }
    return -1;
}

static void test_prefill(int kv, shape sh, int64_t pos0, int64_t T, float qamp) {
    const int64_t max_ctx = pos0 + T + 2, G = sh.nh / sh.nkv, hd = sh.hd;
    const int64_t qs = sh.nh * hd + 5;
    cache c = cache_new(kv, sh.nkv, hd, max_ctx);
    cache_fill(&c, 0, pos0 + T, 1.0f);
    float *q = malloc(sizeof(float) * (size_t)(T * qs));
    for (int64_t i = 0; i < T * qs; i++) q[i] = rndf(-qamp, qamp);
    float *out = malloc(sizeof(float) * (size_t)(T * sh.nh * hd));
    double *ro = malloc(sizeof(double) * (size_t)(T * sh.nh * hd)), *rm = malloc(sizeof(double) * (size_t)(T * sh.nh * hd));
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < sh.nh; h++)
            ref_row(&c, h / G, q + t * qs + h * hd, pos0 + t + 1, ro + (t * sh.nh + h) * hd, rm + (t * sh.nh + h) * hd);
    float *ws = scratch_buf(hd);
    const int64_t ntiles = (T + KRT_ATTN_QTILE - 1) / KRT_ATTN_QTILE, U = sh.nkv * ntiles;
    FOR_VARIANTS(vi, v) {
        char tag[200];
        snprintf(tag, sizeof tag, "%s prefill %s nh=%lld nkv=%lld hd=%lld pos0=%lld T=%lld", v->name, kvname[kv],
                 (long long)sh.nh, (long long)sh.nkv, (long long)hd, (long long)pos0, (long long)T);
        /* a middle slice first: only its units' rows are written */
        for (int64_t i = 0; i < T * sh.nh * hd; i++) out[i] = SENT;
        const int64_t su0 = U / 3, su1 = (2 * U) / 3 + 1;
        v->prefill[kv](out, q, c.k, c.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, qs, pos0, T, su0, su1);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < sh.nh; h++) {
                int64_t u = unit_of_token(t, h / G, ntiles);
                int in = u >= su0 && u < su1;
                const float *o = out + (t * sh.nh + h) * hd;
                int written = 0;
                for (int64_t d = 0; d < hd; d++) written |= o[d] != SENT;
                CHECK(written == in, "%s: slice [%lld,%lld) token %lld head %lld written=%d", tag, (long long)su0,
                      (long long)su1, (long long)t, (long long)h, written);
            }
        /* the rest, in two more slices */
        v->prefill[kv](out, q, c.k, c.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, qs, pos0, T, 0, su0);
        v->prefill[kv](out, q, c.k, c.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, qs, pos0, T, su1, U);
        double worst = 0;
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < sh.nh; h++) {
                char what[300];
                snprintf(what, sizeof what, "%s token %lld head %lld", tag, (long long)t, (long long)h);
                const int64_t k = (t * sh.nh + h) * hd;
                double w = check_row(what, out + k, ro + k, rm + k, hd);
                if (w > worst) worst = w;
            }
        if (worst > worst_pre[vi][kv]) worst_pre[vi][kv] = worst;
    }
    free(q);
    free(out);
    free(ro);
    free(rm);
    free(ws);
    cache_free(&c);
}

/* ---- NaN / Inf ----
 * One scenario: a clean cache and queries, one poisoned value placed somewhere; the reference
 * (IEEE float64) decides what each output element must be. Run through decode (unchunked and
 * chunked) and prefill (the last T rows of the context). */
enum { P_Q, P_K, P_V };
typedef struct {
    const char *name;
    int where;          /* P_Q, P_K or P_V */
    int64_t j, d, head; /* position (K/V), dim, query head (Q) or KV head (K/V) */
    float val;
} poison;

static void nan_case(int kv, shape sh, int64_t n_ctx, const poison *p, int boost_j) {
    const int64_t hd = sh.hd, G = sh.nh / sh.nkv, max_ctx = n_ctx + 40;
    cache c = cache_new(kv, sh.nkv, hd, max_ctx);
    cache_fill(&c, 0, n_ctx, 1.0f);
    float *q = malloc(sizeof(float) * (size_t)(sh.nh * hd));
    for (int64_t i = 0; i < sh.nh * hd; i++) q[i] = rndf(-1, 1);
    if (boost_j >= 0) /* make key boost_j the clear maximum of every head of KV head p->head */
        for (int64_t h = p->head * G; h < (p->head + 1) * G; h++) {
            float row[256];
            for (int64_t d = 0; d < hd; d++) row[d] = 0.0f;
            for (int64_t d = 0; d < hd; d++) q[h * hd + d] = (d % 2) ? 1.0f : -1.0f;
            for (int64_t d = 0; d < hd; d++) row[d] = (d % 2) ? 1.0f : -1.0f;
            for (int64_t d = 0; d < hd; d++) cache_poke(&c, c.k, p->head, boost_j, d, row[d]);
        }
    if (p->where == P_Q) q[p->head * hd + p->d] = p->val;
    else cache_poke(&c, p->where == P_K ? c.k : c.v, p->head, p->j, p->d, p->val);
    /* garbage past the context must not matter */
    for (int64_t g = 0; g < sh.nkv; g++)
        for (int64_t j = n_ctx; j < max_ctx; j++)
            for (int64_t d = 0; d < hd; d += 7) {
                cache_poke(&c, c.k, g, j, d, F_NAN);
                cache_poke(&c, c.v, g, j, d, F_NAN);
            }
    char tag[240];
    float *out = malloc(sizeof(float) * (size_t)(sh.nh * hd));
    const int64_t chunks[3] = {n_ctx, 64, 17};
    /* prefill: the same query as the last token of a prompt ending at n_ctx */
    const int64_t T = n_ctx < 20 ? n_ctx : 20, pos0 = n_ctx - T;
    float *qt = malloc(sizeof(float) * (size_t)(T * sh.nh * hd));
    float *ot = malloc(sizeof(float) * (size_t)(T * sh.nh * hd));
    double *ro = malloc(sizeof(double) * (size_t)(T * sh.nh * hd)), *rm = malloc(sizeof(double) * (size_t)(T * sh.nh * hd));
    for (int64_t i = 0; i < (T - 1) * sh.nh * hd; i++) qt[i] = rndf(-1, 1);
    memcpy(qt + (T - 1) * sh.nh * hd, q, sizeof(float) * (size_t)(sh.nh * hd));
    for (int64_t t = 0; t < T; t++)
        for (int64_t h = 0; h < sh.nh; h++)
            ref_row(&c, h / G, qt + (t * sh.nh + h) * hd, pos0 + t + 1, ro + (t * sh.nh + h) * hd, rm + (t * sh.nh + h) * hd);
    float *ws = scratch_buf(hd);
    const int64_t U = sh.nkv * ((T + KRT_ATTN_QTILE - 1) / KRT_ATTN_QTILE);
    FOR_VARIANTS(vi, v) {
        for (int ci = 0; ci < 3; ci++) {
            if (ci > 0 && chunks[ci] >= n_ctx) continue;
            snprintf(tag, sizeof tag, "%s %s NaN/Inf '%s' decode n=%lld chunk=%lld", v->name, kvname[kv], p->name,
                     (long long)n_ctx, (long long)chunks[ci]);
            run_decode(v, &c, &sh, q, n_ctx, chunks[ci], out, 1, tag);
        }
        v->prefill[kv](ot, qt, c.k, c.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, sh.nh * hd, pos0, T, 0, U);
        for (int64_t t = 0; t < T; t++)
            for (int64_t h = 0; h < sh.nh; h++) {
                snprintf(tag, sizeof tag, "%s %s NaN/Inf '%s' prefill token %lld head %lld", v->name, kvname[kv],
                         p->name, (long long)t, (long long)h);
                const int64_t k = (t * sh.nh + h) * hd;
                check_row(tag, ot + k, ro + k, rm + k, hd);
            }
    }
    free(qt);
    free(ot);
    free(ro);
    free(rm);
    free(ws);
    free(q);
    free(out);
    cache_free(&c);
}

/* Bits of the result must not depend on anything outside the causal range. */
static void masked_case(const variant *v, int kv, shape sh, int64_t pos0, int64_t T) {
    const int64_t hd = sh.hd, max_ctx = pos0 + T + 70, qs = sh.nh * hd;
    cache c = cache_new(kv, sh.nkv, hd, max_ctx);
    cache_fill(&c, 0, pos0 + T, 1.0f);
    float *q = malloc(sizeof(float) * (size_t)(T * qs));
    for (int64_t i = 0; i < T * qs; i++) q[i] = rndf(-1, 1);
    float *a = malloc(sizeof(float) * (size_t)(T * qs)), *b = malloc(sizeof(float) * (size_t)(T * qs));
    float *da = malloc(sizeof(float) * (size_t)qs), *db = malloc(sizeof(float) * (size_t)qs);
    float *ws = scratch_buf(hd);
    const int64_t U = sh.nkv * ((T + KRT_ATTN_QTILE - 1) / KRT_ATTN_QTILE);
    v->prefill[kv](a, q, c.k, c.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, qs, pos0, T, 0, U);
    /* decode of token 0 of the prompt (it sees pos0 + 1 positions) */
    v->decode[kv](da, NULL, q, c.k, c.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, pos0 + 1, pos0 + 1, 0, sh.nkv);
    /* rewrite the future: each token's later positions (and everything past the prompt) get NaN
     * in K and V; prefill token t must not see positions > pos0 + t */
    cache c2 = cache_new(kv, sh.nkv, hd, max_ctx);
    memcpy(c2.k, c.k, c.bytes);
    memcpy(c2.v, c.v, c.bytes);
    cache_sync(&c2, 0, max_ctx);
    for (int64_t t = T - 1; t >= 0; t--) {
        /* run token t alone with everything after it poisoned */
        for (int64_t g = 0; g < sh.nkv; g++)
            for (int64_t j = pos0 + t + 1; j < max_ctx; j++) {
                cache_poke(&c2, c2.k, g, j, 0, F_NAN);
                cache_poke(&c2, c2.v, g, j, hd - 1, F_NAN);
            }
        v->prefill[kv](b, q, c2.k, c2.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, qs, pos0, T, 0, U);
        for (int64_t i = 0; i < qs; i++)
            CHECK(bitsf(a[t * qs + i]) == bitsf(b[t * qs + i]),
                  "%s %s prefill pos0=%lld T=%lld token %lld elem %lld changed with NaN in unseen positions: %g vs %g",
                  v->name, kvname[kv], (long long)pos0, (long long)T, (long long)t, (long long)i, b[t * qs + i],
                  a[t * qs + i]);
        if (t == 0) {
            v->decode[kv](db, NULL, q, c2.k, c2.v, ws, &g_cap, KRT_ATTN_HEADS(sh.nh, sh.nkv), hd, max_ctx, pos0 + 1, pos0 + 1, 0, sh.nkv);
            for (int64_t i = 0; i < qs; i++)
                CHECK(bitsf(da[i]) == bitsf(db[i]), "%s %s decode n=%lld elem %lld changed with NaN past n_ctx", v->name,
                      kvname[kv], (long long)(pos0 + 1), (long long)i);
        }
    }
    free(q);
    free(a);
    free(b);
    free(da);
    free(db);
    free(ws);
    cache_free(&c);
    cache_free(&c2);
}

static void test_nan(int kv) {
    const shape sh = {6, 2, 64};
    const int64_t n = 150; /* blocks of 64: 64 + 64 + 22 */
    const poison cases[] = {
        {"NaN in q, dim 0", P_Q, 0, 0, 1, F_NAN},
        {"NaN in q, last dim", P_Q, 0, 63, 4, F_NAN},
        {"+Inf in q", P_Q, 0, 17, 2, F_INF},
        {"-Inf in q", P_Q, 0, 40, 5, -F_INF},
        {"NaN in K, first position", P_K, 0, 0, 0, F_NAN},
        {"NaN in K, last position", P_K, n - 1, 63, 1, F_NAN},
        {"NaN in K, last lane of a block", P_K, 63, 31, 0, F_NAN},
        {"NaN in K, first lane of a block", P_K, 64, 32, 1, F_NAN},
        {"NaN in K, tail lane", P_K, 129, 5, 0, F_NAN},
        {"+Inf in K", P_K, 77, 9, 1, F_INF},
        {"-Inf in K", P_K, 100, 50, 0, -F_INF},
        {"NaN in V, first position", P_V, 0, 0, 0, F_NAN},
        {"NaN in V, last position, last dim", P_V, n - 1, 63, 1, F_NAN},
        {"NaN in V, block edge", P_V, 64, 15, 0, F_NAN},
    };
    for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) nan_case(kv, sh, n, &cases[i], -1);
    /* an infinite V element on the maximum-weight key: +-Inf out (F32/F16), NaN (Q8_0 poison) */
    const poison vinf[] = {{"+Inf in V at the max key", P_V, 90, 20, 1, F_INF},
                           {"-Inf in V at the max key", P_V, 3, 63, 0, -F_INF}};
    for (unsigned i = 0; i < 2; i++) nan_case(kv, sh, n, &vinf[i], (int)vinf[i].j);
    /* every score -Inf for one KV head: q = e_0 (other dims 0), K[.][0] = -Inf -> NaN rows */
    {
        poison none = {"all scores -Inf", P_Q, 0, 0, 0, 0.0f};
        const int64_t hd = sh.hd, G = sh.nh / sh.nkv;
        cache c = cache_new(kv, sh.nkv, hd, n + 2);
        cache_fill(&c, 0, n, 1.0f);
        for (int64_t j = 0; j < n; j++) cache_poke(&c, c.k, 1, j, 0, -F_INF);
        float q[6 * 64], out[6 * 64];
        for (int64_t i = 0; i < sh.nh * hd; i++) q[i] = rndf(-1, 1);
        for (int64_t h = G; h < 2 * G; h++)
            for (int64_t d = 0; d < hd; d++) q[h * hd + d] = d == 0 ? 1.0f : 0.0f;
        char tag[200];
        const int64_t chunks[2] = {n, 40};
        FOR_VARIANTS(vi, v) {
            for (int ci = 0; ci < 2; ci++) {
                snprintf(tag, sizeof tag, "%s %s '%s' chunk=%lld", v->name, kvname[kv], none.name, (long long)chunks[ci]);
                run_decode(v, &c, &sh, q, n, chunks[ci], out, 1, tag);
                if (kv != KQ8)
                    for (int64_t h = G; h < 2 * G; h++) CHECK(is_nan(out[h * hd]), "%s: head %lld not NaN", tag, (long long)h);
            }
        }
        cache_free(&c);
    }
    FOR_VARIANTS(vi, v) {
        masked_case(v, kv, sh, 70, 40);
        masked_case(v, kv, (shape){14, 2, 64}, 0, 33);
    }
}

/* ---- KV appends: slices, bit-identity with _ref, special values ---- */
static void test_append(const variant *v, int kv, int64_t hd, int64_t nkv, int64_t max_ctx, int64_t pos0, int64_t T,
                        int64_t t0, int64_t t1) {
    const int64_t stride = nkv * hd + 3;
    float *src = malloc(sizeof(float) * (size_t)(T * stride));
    for (int64_t i = 0; i < T * stride; i++) src[i] = rndf(-2, 2);
    /* special values in the first token of the slice */
    float *s0 = src + t0 * stride;
    s0[0] = F_NAN;
    s0[1] = F_INF;
    s0[2] = -F_INF;
    s0[3] = 70000.0f;      /* F16 overflow -> Inf */
    s0[4] = 65519.0f;      /* rounds to 65504 */
    s0[5] = 1e-8f;         /* F16 subnormal */
    s0[6] = fbits(0x7f800001u); /* signalling NaN */
    if (hd > 40) s0[40] = -0.0f;
    cache a = cache_new(kv, nkv, hd, max_ctx), r = cache_new(kv, nkv, hd, max_ctx);
    v->append[kv](a.k, src, stride, nkv, hd, max_ctx, pos0, t0, t1);
    variants[0].append[kv](r.k, src, stride, nkv, hd, max_ctx, pos0, t0, t1);
    CHECK(memcmp(a.k, r.k, a.bytes) == 0, "%s append %s hd=%lld: not bit-identical to _ref", v->name, kvname[kv],
          (long long)hd);
    /* only rows pos0+t0 .. pos0+t1-1 written; values as specified */
    const size_t rb = row_bytes(kv, hd);
    for (int64_t g = 0; g < nkv; g++)
        for (int64_t p = 0; p < max_ctx; p++) {
            const unsigned char *row = (const unsigned char *)row_ptr(&a, a.k, g, p);
            int64_t t = p - pos0;
            int in = t >= t0 && t < t1;
            int untouched = 1;
            for (size_t i = 0; i < rb; i++) untouched &= row[i] == 0xAB;
            CHECK(untouched == !in, "%s append %s: row (%lld,%lld) written=%d", v->name, kvname[kv], (long long)g,
                  (long long)p, !untouched);
            if (!in) continue;
            const float *s = src + t * stride + g * hd;
            for (int64_t d = 0; d < hd; d++) {
                double got = raw_val(&a, a.k, g, p, d), x = s[d];
                if (kv == KF32) {
                    CHECK(bitsf((float)got) == bitsf(s[d]) || (is_nan(got) && is_nan(x)), "%s append f32 bits", v->name);
                } else if (kv == KF16) {
                    if (is_nan(x)) CHECK(is_nan(got), "%s append f16: NaN lost", v->name);
                    else if (dabs(x) >= 65520.0) CHECK(got == (x > 0 ? (double)F_INF : -(double)F_INF), "%s append f16 overflow: %g", v->name, got);
                    else CHECK(dabs(got - x) <= dabs(x) * (1.0 / 2048) + 3e-8, "%s append f16: %g for %g", v->name, got, x);
                } else {
                    /* poisoned block (NaN/Inf inside) reads back NaN; else |err| <= d/2 */
                    int64_t b0 = d / 32 * 32;
                    int poisoned = 0;
                    double amax = 0;
                    for (int64_t i = b0; i < b0 + 32; i++) {
                        poisoned |= is_nan(s[i]) || is_inf(s[i]);
                        amax = dabs(s[i]) > amax ? dabs(s[i]) : amax;
                    }
                    if (poisoned) CHECK(is_nan(got), "%s append q8_0: poisoned block reads %g", v->name, got);
                    else CHECK(dabs(got - x) <= amax / 127 * 0.5001 + amax * 1e-3, "%s append q8_0: %g for %g", v->name, got, x);
                }
            }
        }
    free(src);
    cache_free(&a);
    cache_free(&r);
}

int main(int argc, char **argv) {
    int quick = argc > 1 && !strcmp(argv[1], "-q");
    init_variants();
    init_h2f();
    ref_s = malloc(sizeof(double) * 20000);
    const shape shapes[] = {{14, 2, 64}, {12, 2, 128}, {4, 4, 32}, {16, 1, 64}, {2, 1, 96}, {8, 8, 256}, {130, 1, 32}};
    const int64_t depths[] = {1, 2, 15, 16, 17, 63, 64, 65, 255, 256, 4096, 16384};
    const int64_t chunks[] = {1, 17, 64, 256, 1000};
    for (int vi = 0; vi < 3; vi++)
        if (!variants[vi].supported) printf("test_attn: %s not supported by this CPU, skipped\n", variants[vi].name);
    for (int kv = 0; kv < NKV; kv++) {
        FOR_VARIANTS(vi, v) {
            test_append(v, kv, 64, 2, 20, 3, 5, 0, 5);
            test_append(v, kv, 64, 2, 20, 19, 1, 0, 1);
            test_append(v, kv, 32, 3, 9, 2, 6, 2, 4);
            test_append(v, kv, 128, 1, 4, 0, 4, 1, 4);
        }
        for (unsigned di = 0; di < sizeof depths / sizeof depths[0]; di++) {
            const int64_t n = depths[di];
            if (quick && n > 4096) continue;
            test_decode(kv, shapes[0], n, chunks + (n > 1000 ? 2 : 0), n > 1000 ? 3 : 5, 1.5f);
            if (n <= 4096) test_decode(kv, shapes[1], n, chunks + 2, 2, 3.0f);
        }
        for (unsigned si = 2; si < sizeof shapes / sizeof shapes[0]; si++) test_decode(kv, shapes[si], 300, chunks + 1, 3, 2.0f);
        const int64_t pre[][2] = {{0, 1}, {0, 16}, {0, 17}, {0, 100}, {5, 33}, {255, 20}, {4096, 40}, {16360, 24}};
        for (unsigned pi = 0; pi < sizeof pre / sizeof pre[0]; pi++) {
            if (quick && pre[pi][0] > 4096) continue;
            test_prefill(kv, shapes[0], pre[pi][0], pre[pi][1], 1.5f);
        }
        for (unsigned si = 1; si < sizeof shapes / sizeof shapes[0]; si++) test_prefill(kv, shapes[si], 7, 37, 2.0f);
        test_nan(kv);
        FOR_VARIANTS(vi, v)
            printf("test_attn: %-6s %-4s worst error: decode %.2g, prefill %.2g of sum w|v| (tolerance %.0e)\n", v->name,
                   kvname[kv], worst_dec[vi][kv], worst_pre[vi][kv], TOL);
    }
    /* soft-capped attention (gemma2's c = 50 on scores of a few tens): scores of std ~qamp/3 here
     * (at qamp 40 float32 rounding of the dot products alone passes TOL), so smaller caps that
     * bend most of them: 1.5 and 5 */
    const float caps[] = {1.5f, 5.0f};
    memset(worst_dec, 0, sizeof worst_dec);
    memset(worst_pre, 0, sizeof worst_pre);
    for (unsigned ci = 0; ci < 2; ci++) {
        g_cap = caps[ci];
        cache_gen++;
        for (int kv = 0; kv < NKV; kv++) {
            test_decode(kv, shapes[0], 300, chunks + 2, 2, 3.0f);
            test_decode(kv, shapes[1], 65, chunks + 2, 1, 12.0f);
            test_prefill(kv, shapes[0], 5, 33, 3.0f);
            test_prefill(kv, shapes[5], 7, 37, 12.0f);
        }
    }
    g_cap = 0;
    FOR_VARIANTS(vi, v)
        for (int kv = 0; kv < NKV; kv++)
            printf("test_attn: %-6s %-4s worst error with soft-caps: decode %.2g, prefill %.2g\n", v->name, kvname[kv],
                   worst_dec[vi][kv], worst_pre[vi][kv]);
    free(ref_s);
    if (failures) {
        printf("test_attn: %d failures\n", failures);
        return 1;
    }
    printf("test_attn: all passed\n");
    return 0;
}
