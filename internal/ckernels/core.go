//go:build cgo && amd64

package ckernels

// Bindings for the core kernels of csrc/quant.c, gemv.c, norm.c and stream.c.
//
// Every C function is declared noescape (it keeps no pointer after returning) and nocallback
// (it never calls Go). noescape is what keeps a Go local whose address is passed, such as
// RMSNorm's eps, on the stack: without it cgo makes every pointer argument escape, and each
// call would allocate. nocallback lets cgo skip the callback bookkeeping.

/*
#cgo noescape krt_quantize_q8_0_ref
#cgo nocallback krt_quantize_q8_0_ref
#cgo noescape krt_quantize_q8_0_avx2
#cgo nocallback krt_quantize_q8_0_avx2
#cgo noescape krt_quantize_q8_0_avx512
#cgo nocallback krt_quantize_q8_0_avx512
#cgo noescape krt_quantize_q5_0_ref
#cgo nocallback krt_quantize_q5_0_ref
#cgo noescape krt_quantize_q5_0_avx2
#cgo nocallback krt_quantize_q5_0_avx2
#cgo noescape krt_quantize_q5_0_avx512
#cgo nocallback krt_quantize_q5_0_avx512
#cgo noescape krt_dequantize_q8_0_ref
#cgo nocallback krt_dequantize_q8_0_ref
#cgo noescape krt_dequantize_q8_0_avx2
#cgo nocallback krt_dequantize_q8_0_avx2
#cgo noescape krt_dequantize_q8_0_avx512
#cgo nocallback krt_dequantize_q8_0_avx512
#cgo noescape krt_dequantize_q5_0_ref
#cgo nocallback krt_dequantize_q5_0_ref
#cgo noescape krt_dequantize_q5_0_avx2
#cgo nocallback krt_dequantize_q5_0_avx2
#cgo noescape krt_dequantize_q5_0_avx512
#cgo nocallback krt_dequantize_q5_0_avx512
#cgo noescape krt_gemv_q8_0_ref
#cgo nocallback krt_gemv_q8_0_ref
#cgo noescape krt_gemv_q8_0_avx2
#cgo nocallback krt_gemv_q8_0_avx2
#cgo noescape krt_gemv_q8_0_avx512
#cgo nocallback krt_gemv_q8_0_avx512
#cgo noescape krt_gemv_q5_0_ref
#cgo nocallback krt_gemv_q5_0_ref
#cgo noescape krt_gemv_q5_0_avx2
#cgo nocallback krt_gemv_q5_0_avx2
#cgo noescape krt_gemv_q5_0_avx512
#cgo nocallback krt_gemv_q5_0_avx512
#cgo noescape krt_gemv_q8_0_f32_ref
#cgo nocallback krt_gemv_q8_0_f32_ref
#cgo noescape krt_gemv_q8_0_f32_avx2
#cgo nocallback krt_gemv_q8_0_f32_avx2
#cgo noescape krt_gemv_q8_0_f32_avx512
#cgo nocallback krt_gemv_q8_0_f32_avx512
#cgo noescape krt_gemv_q5_0_f32_ref
#cgo nocallback krt_gemv_q5_0_f32_ref
#cgo noescape krt_gemv_q5_0_f32_avx2
#cgo nocallback krt_gemv_q5_0_f32_avx2
#cgo noescape krt_gemv_q5_0_f32_avx512
#cgo nocallback krt_gemv_q5_0_f32_avx512
#cgo noescape krt_gemv_f32_ref
#cgo nocallback krt_gemv_f32_ref
#cgo noescape krt_gemv_f32_avx2
#cgo nocallback krt_gemv_f32_avx2
#cgo noescape krt_gemv_f32_avx512
#cgo nocallback krt_gemv_f32_avx512
#cgo noescape krt_rmsnorm_ref
#cgo nocallback krt_rmsnorm_ref
#cgo noescape krt_rmsnorm_avx2
#cgo nocallback krt_rmsnorm_avx2
#cgo noescape krt_rmsnorm_avx512
#cgo nocallback krt_rmsnorm_avx512
#cgo noescape krt_softmax_ref
#cgo nocallback krt_softmax_ref
#cgo noescape krt_softmax_avx2
#cgo nocallback krt_softmax_avx2
#cgo noescape krt_softmax_avx512
#cgo nocallback krt_softmax_avx512
#cgo noescape krt_stream_read_ref
#cgo nocallback krt_stream_read_ref
#cgo noescape krt_stream_read_avx2
#cgo nocallback krt_stream_read_avx2
#cgo noescape krt_stream_read_avx512
#cgo nocallback krt_stream_read_avx512
#include "kernelrt.h"
*/
import "C"

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// Pointers cross as unsafe.Pointer (kern.P) converted to the C parameter type, integers as
// int64_t. A nil bias/valid pointer reaches C as NULL, which the kernels treat as "none".

func init() {
	ref := sets[cpu.Ref]
	avx2 := sets[cpu.AVX2]
	avx512 := sets[cpu.AVX512]

	ref.QuantizeQ8_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_quantize_q8_0_ref((*C.krt_block_q8_0)(dst), (*C.float)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx2.QuantizeQ8_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_quantize_q8_0_avx2((*C.krt_block_q8_0)(dst), (*C.float)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx512.QuantizeQ8_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_quantize_q8_0_avx512((*C.krt_block_q8_0)(dst), (*C.float)(src), C.int64_t(b0), C.int64_t(b1))
	}

	ref.QuantizeQ5_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_quantize_q5_0_ref((*C.krt_block_q5_0)(dst), (*C.float)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx2.QuantizeQ5_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_quantize_q5_0_avx2((*C.krt_block_q5_0)(dst), (*C.float)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx512.QuantizeQ5_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_quantize_q5_0_avx512((*C.krt_block_q5_0)(dst), (*C.float)(src), C.int64_t(b0), C.int64_t(b1))
	}

	ref.DequantizeQ8_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_dequantize_q8_0_ref((*C.float)(dst), (*C.krt_block_q8_0)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx2.DequantizeQ8_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_dequantize_q8_0_avx2((*C.float)(dst), (*C.krt_block_q8_0)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx512.DequantizeQ8_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_dequantize_q8_0_avx512((*C.float)(dst), (*C.krt_block_q8_0)(src), C.int64_t(b0), C.int64_t(b1))
	}

	ref.DequantizeQ5_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_dequantize_q5_0_ref((*C.float)(dst), (*C.krt_block_q5_0)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx2.DequantizeQ5_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_dequantize_q5_0_avx2((*C.float)(dst), (*C.krt_block_q5_0)(src), C.int64_t(b0), C.int64_t(b1))
	}
	avx512.DequantizeQ5_0 = func(dst, src kern.P, b0, b1 int) {
		C.krt_dequantize_q5_0_avx512((*C.float)(dst), (*C.krt_block_q5_0)(src), C.int64_t(b0), C.int64_t(b1))
	}

	ref.GemvQ8_0 = func(y, w, x, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q8_0_ref((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.GemvQ8_0 = func(y, w, x, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q8_0_avx2((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.GemvQ8_0 = func(y, w, x, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q8_0_avx512((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}

	ref.GemvQ5_0 = func(y, w, x, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q5_0_ref((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.GemvQ5_0 = func(y, w, x, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q5_0_avx2((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.GemvQ5_0 = func(y, w, x, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q5_0_avx512((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.krt_block_q8_0)(x), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}

	ref.GemvQ8_0F32 = func(y, w, x, xq, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q8_0_f32_ref((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.float)(x), (*C.krt_block_q8_0)(xq), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.GemvQ8_0F32 = func(y, w, x, xq, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q8_0_f32_avx2((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.float)(x), (*C.krt_block_q8_0)(xq), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.GemvQ8_0F32 = func(y, w, x, xq, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q8_0_f32_avx512((*C.float)(y), (*C.krt_block_q8_0)(w), (*C.float)(x), (*C.krt_block_q8_0)(xq), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}

	ref.GemvQ5_0F32 = func(y, w, x, xq, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q5_0_f32_ref((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.float)(x), (*C.krt_block_q8_0)(xq), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.GemvQ5_0F32 = func(y, w, x, xq, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q5_0_f32_avx2((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.float)(x), (*C.krt_block_q8_0)(xq), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.GemvQ5_0F32 = func(y, w, x, xq, bias kern.P, cols, r0, r1 int) {
		C.krt_gemv_q5_0_f32_avx512((*C.float)(y), (*C.krt_block_q5_0)(w), (*C.float)(x), (*C.krt_block_q8_0)(xq), (*C.float)(bias), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}

	ref.GemvF32 = func(y, w, x kern.P, cols, r0, r1 int) {
		C.krt_gemv_f32_ref((*C.float)(y), (*C.float)(w), (*C.float)(x), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.GemvF32 = func(y, w, x kern.P, cols, r0, r1 int) {
		C.krt_gemv_f32_avx2((*C.float)(y), (*C.float)(w), (*C.float)(x), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.GemvF32 = func(y, w, x kern.P, cols, r0, r1 int) {
		C.krt_gemv_f32_avx512((*C.float)(y), (*C.float)(w), (*C.float)(x), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}

	ref.RMSNorm = func(out, x, weight kern.P, eps float32, dim, t0, t1 int) {
		C.krt_rmsnorm_ref((*C.float)(out), (*C.float)(x), (*C.float)(weight), (*C.float)(unsafe.Pointer(&eps)), C.int64_t(dim), C.int64_t(t0), C.int64_t(t1))
	}
	avx2.RMSNorm = func(out, x, weight kern.P, eps float32, dim, t0, t1 int) {
		C.krt_rmsnorm_avx2((*C.float)(out), (*C.float)(x), (*C.float)(weight), (*C.float)(unsafe.Pointer(&eps)), C.int64_t(dim), C.int64_t(t0), C.int64_t(t1))
	}
	avx512.RMSNorm = func(out, x, weight kern.P, eps float32, dim, t0, t1 int) {
		C.krt_rmsnorm_avx512((*C.float)(out), (*C.float)(x), (*C.float)(weight), (*C.float)(unsafe.Pointer(&eps)), C.int64_t(dim), C.int64_t(t0), C.int64_t(t1))
	}

	ref.Softmax = func(x, valid kern.P, cols, r0, r1 int) {
		C.krt_softmax_ref((*C.float)(x), (*C.int32_t)(valid), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx2.Softmax = func(x, valid kern.P, cols, r0, r1 int) {
		C.krt_softmax_avx2((*C.float)(x), (*C.int32_t)(valid), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}
	avx512.Softmax = func(x, valid kern.P, cols, r0, r1 int) {
		C.krt_softmax_avx512((*C.float)(x), (*C.int32_t)(valid), C.int64_t(cols), C.int64_t(r0), C.int64_t(r1))
	}

	ref.StreamRead = func(out, src kern.P, n int) {
		C.krt_stream_read_ref((*C.float)(out), (*C.float)(src), C.int64_t(n))
	}
	avx2.StreamRead = func(out, src kern.P, n int) {
		C.krt_stream_read_avx2((*C.float)(out), (*C.float)(src), C.int64_t(n))
	}
	avx512.StreamRead = func(out, src kern.P, n int) {
		C.krt_stream_read_avx512((*C.float)(out), (*C.float)(src), C.int64_t(n))
	}
}
