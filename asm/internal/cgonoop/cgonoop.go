//go:build cgo

package cgonoop

/*
#cgo noescape krt_cgo_noop_args
#cgo nocallback krt_cgo_noop_args
#cgo nocallback krt_cgo_noop
#include <stdint.h>
static void krt_cgo_noop(void) {}
static void krt_cgo_noop_args(float *out, const float *a, const float *b, int64_t n, int64_t i0, int64_t i1) {
	(void)a; (void)b; (void)n; (void)i1;
	out[0] = (float)i0;
}
*/
import "C"

import "unsafe"

// Noop calls an empty C function.
func Noop() { C.krt_cgo_noop() }

// NoopArgs calls a C function taking six arguments like a small kernel; it stores i0 to
// out[0], like asm's _krt_noop_args.
func NoopArgs(out, a, b unsafe.Pointer, n, i0, i1 int) {
	C.krt_cgo_noop_args((*C.float)(out), (*C.float)(a), (*C.float)(b), C.int64_t(n), C.int64_t(i0), C.int64_t(i1))
}
