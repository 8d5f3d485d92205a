//go:build cgo && amd64

package ckernels

// Bindings for the prefill GEMM kernels of csrc/gemm.c (krt_gemm_q8_0, krt_gemm_q5_0).
//
// Every C function is declared noescape (it keeps no pointer after returning) and nocallback
// (it never calls Go), so a call neither allocates nor pays for callback bookkeeping. The
// kernels use about 36 KiB of stack (their repacked weight tile and per-token scales), which
// the cgo call runs on the thread's system stack.

/*
#cgo noescape krt_gemm_q8_0_ref
#cgo nocallback krt_gemm_q8_0_ref
#cgo noescape krt_gemm_q8_0_avx2
#cgo nocallback krt_gemm_q8_0_avx2
#cgo noescape krt_gemm_q8_0_avx512
#cgo nocallback krt_gemm_q8_0_avx512
#cgo noescape krt_gemm_q5_0_ref
#cgo nocallback krt_gemm_q5_0_ref
#cgo noescape krt_gemm_q5_0_avx2
#cgo nocallback krt_gemm_q5_0_avx2
#cgo noescape krt_gemm_q5_0_avx512
#cgo nocallback krt_gemm_q5_0_avx512
#include "kernelrt.h"
*/
import "C"

import (
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

func init() {
	ref := sets[cpu.Ref]
	avx2 := sets[cpu.AVX2]
	avx512 := sets[cpu.AVX512]

	ref.GemmQ8_0 = func(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
		C.krt_gemm_q8_0_ref((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias),
			C.int64_t(rows), C.int64_t(cols), C.int64_t(T), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.GemmQ8_0 = func(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
		C.krt_gemm_q8_0_avx2((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias),
			C.int64_t(rows), C.int64_t(cols), C.int64_t(T), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.GemmQ8_0 = func(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
		C.krt_gemm_q8_0_avx512((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias),
			C.int64_t(rows), C.int64_t(cols), C.int64_t(T), C.int64_t(r0), C.int64_t(r1))
	}

	ref.GemmQ5_0 = func(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
		C.krt_gemm_q5_0_ref((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias),
			C.int64_t(rows), C.int64_t(cols), C.int64_t(T), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.GemmQ5_0 = func(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
		C.krt_gemm_q5_0_avx2((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias),
			C.int64_t(rows), C.int64_t(cols), C.int64_t(T), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.GemmQ5_0 = func(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
		C.krt_gemm_q5_0_avx512((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias),
			C.int64_t(rows), C.int64_t(cols), C.int64_t(T), C.int64_t(r0), C.int64_t(r1))
	}
}
