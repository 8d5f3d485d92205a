/* tools/asmgen/c/noop.c - trivial functions for the per-call overhead benchmarks of package asm.
 * Not kernels: they measure what a call into generated assembly costs. */
#include <stdint.h>

/* Does nothing. */
void krt_noop(void);
void krt_noop(void) {}

/* Takes six arguments like a small kernel and stores one value, so the call is not free of
 * argument traffic. */
void krt_noop_args(float *out, const float *a, const float *b, int64_t n, int64_t i0, int64_t i1);
void krt_noop_args(float *out, const float *a, const float *b, int64_t n, int64_t i0, int64_t i1) {
    (void)a;
    (void)b;
    (void)n;
    (void)i1;
    out[0] = (float)i0;
}
