//go:build cgo && amd64

package ckernels

// Bindings for the kernels of csrc/elementwise.c, rope.c, attention.c and embed.c: SwiGLU,
// residual add, RoPE (NeoX), KV-cache append, attention and the Q8_0 embedding lookup.
//
// Every C function is declared noescape (it keeps no pointer after returning) and nocallback
// (it never calls Go), so a call neither forces its arguments to the heap nor pays for callback
// bookkeeping.

/*
#cgo noescape krt_swiglu_ref
#cgo nocallback krt_swiglu_ref
#cgo noescape krt_swiglu_avx2
#cgo nocallback krt_swiglu_avx2
#cgo noescape krt_swiglu_avx512
#cgo nocallback krt_swiglu_avx512
#cgo noescape krt_add_ref
#cgo nocallback krt_add_ref
#cgo noescape krt_add_avx2
#cgo nocallback krt_add_avx2
#cgo noescape krt_add_avx512
#cgo nocallback krt_add_avx512
#cgo noescape krt_rope_neox_ref
#cgo nocallback krt_rope_neox_ref
#cgo noescape krt_rope_neox_avx2
#cgo nocallback krt_rope_neox_avx2
#cgo noescape krt_rope_neox_avx512
#cgo nocallback krt_rope_neox_avx512
#cgo noescape krt_kv_append_ref
#cgo nocallback krt_kv_append_ref
#cgo noescape krt_kv_append_avx2
#cgo nocallback krt_kv_append_avx2
#cgo noescape krt_kv_append_avx512
#cgo nocallback krt_kv_append_avx512
#cgo noescape krt_attention_ref
#cgo nocallback krt_attention_ref
#cgo noescape krt_attention_avx2
#cgo nocallback krt_attention_avx2
#cgo noescape krt_attention_avx512
#cgo nocallback krt_attention_avx512
#cgo noescape krt_embed_q8_0_ref
#cgo nocallback krt_embed_q8_0_ref
#cgo noescape krt_embed_q8_0_avx2
#cgo nocallback krt_embed_q8_0_avx2
#cgo noescape krt_embed_q8_0_avx512
#cgo nocallback krt_embed_q8_0_avx512
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

	ref.SwiGLU = func(out, gate, up kern.P, i0, i1 int) {
		C.krt_swiglu_ref((*C.float)(out), (*C.float)(gate), (*C.float)(up), C.int64_t(i0), C.int64_t(i1))
	}
	avx2.SwiGLU = func(out, gate, up kern.P, i0, i1 int) {
		C.krt_swiglu_avx2((*C.float)(out), (*C.float)(gate), (*C.float)(up), C.int64_t(i0), C.int64_t(i1))
	}
	avx512.SwiGLU = func(out, gate, up kern.P, i0, i1 int) {
		C.krt_swiglu_avx512((*C.float)(out), (*C.float)(gate), (*C.float)(up), C.int64_t(i0), C.int64_t(i1))
	}

	ref.Add = func(out, a, b kern.P, i0, i1 int) {
		C.krt_add_ref((*C.float)(out), (*C.float)(a), (*C.float)(b), C.int64_t(i0), C.int64_t(i1))
	}
	avx2.Add = func(out, a, b kern.P, i0, i1 int) {
		C.krt_add_avx2((*C.float)(out), (*C.float)(a), (*C.float)(b), C.int64_t(i0), C.int64_t(i1))
	}
	avx512.Add = func(out, a, b kern.P, i0, i1 int) {
		C.krt_add_avx512((*C.float)(out), (*C.float)(a), (*C.float)(b), C.int64_t(i0), C.int64_t(i1))
	}

	ref.RopeNeox = func(x, cosTab, sinTab kern.P, stride, nHeads, headDim, pos0, t0, t1 int) {
		C.krt_rope_neox_ref((*C.float)(x), (*C.float)(cosTab), (*C.float)(sinTab), C.int64_t(stride), C.int64_t(nHeads), C.int64_t(headDim), C.int64_t(pos0), C.int64_t(t0), C.int64_t(t1))
	}
	avx2.RopeNeox = func(x, cosTab, sinTab kern.P, stride, nHeads, headDim, pos0, t0, t1 int) {
		C.krt_rope_neox_avx2((*C.float)(x), (*C.float)(cosTab), (*C.float)(sinTab), C.int64_t(stride), C.int64_t(nHeads), C.int64_t(headDim), C.int64_t(pos0), C.int64_t(t0), C.int64_t(t1))
	}
	avx512.RopeNeox = func(x, cosTab, sinTab kern.P, stride, nHeads, headDim, pos0, t0, t1 int) {
		C.krt_rope_neox_avx512((*C.float)(x), (*C.float)(cosTab), (*C.float)(sinTab), C.int64_t(stride), C.int64_t(nHeads), C.int64_t(headDim), C.int64_t(pos0), C.int64_t(t0), C.int64_t(t1))
	}

	ref.KVAppend = func(cache, src kern.P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int) {
		C.krt_kv_append_ref((*C.float)(cache), (*C.float)(src), C.int64_t(srcStride), C.int64_t(nKVHeads), C.int64_t(headDim), C.int64_t(maxCtx), C.int64_t(pos0), C.int64_t(t0), C.int64_t(t1))
	}
	avx2.KVAppend = func(cache, src kern.P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int) {
		C.krt_kv_append_avx2((*C.float)(cache), (*C.float)(src), C.int64_t(srcStride), C.int64_t(nKVHeads), C.int64_t(headDim), C.int64_t(maxCtx), C.int64_t(pos0), C.int64_t(t0), C.int64_t(t1))
	}
	avx512.KVAppend = func(cache, src kern.P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int) {
		C.krt_kv_append_avx512((*C.float)(cache), (*C.float)(src), C.int64_t(srcStride), C.int64_t(nKVHeads), C.int64_t(headDim), C.int64_t(maxCtx), C.int64_t(pos0), C.int64_t(t0), C.int64_t(t1))
	}

	ref.Attention = func(out, q, k, v, scratch kern.P, nHeads, nKVHeads, headDim, maxCtx, qStride, pos0, T, h0, h1 int) {
		C.krt_attention_ref((*C.float)(out), (*C.float)(q), (*C.float)(k), (*C.float)(v), (*C.float)(scratch), C.int64_t(nHeads), C.int64_t(nKVHeads), C.int64_t(headDim), C.int64_t(maxCtx), C.int64_t(qStride), C.int64_t(pos0), C.int64_t(T), C.int64_t(h0), C.int64_t(h1))
	}
	avx2.Attention = func(out, q, k, v, scratch kern.P, nHeads, nKVHeads, headDim, maxCtx, qStride, pos0, T, h0, h1 int) {
		C.krt_attention_avx2((*C.float)(out), (*C.float)(q), (*C.float)(k), (*C.float)(v), (*C.float)(scratch), C.int64_t(nHeads), C.int64_t(nKVHeads), C.int64_t(headDim), C.int64_t(maxCtx), C.int64_t(qStride), C.int64_t(pos0), C.int64_t(T), C.int64_t(h0), C.int64_t(h1))
	}
	avx512.Attention = func(out, q, k, v, scratch kern.P, nHeads, nKVHeads, headDim, maxCtx, qStride, pos0, T, h0, h1 int) {
		C.krt_attention_avx512((*C.float)(out), (*C.float)(q), (*C.float)(k), (*C.float)(v), (*C.float)(scratch), C.int64_t(nHeads), C.int64_t(nKVHeads), C.int64_t(headDim), C.int64_t(maxCtx), C.int64_t(qStride), C.int64_t(pos0), C.int64_t(T), C.int64_t(h0), C.int64_t(h1))
	}

	ref.EmbedQ8_0 = func(out, table, ids kern.P, dim, t0, t1 int) {
		C.krt_embed_q8_0_ref((*C.float)(out), (*C.krt_block_q8_0)(table), (*C.int32_t)(ids), C.int64_t(dim), C.int64_t(t0), C.int64_t(t1))
	}
	avx2.EmbedQ8_0 = func(out, table, ids kern.P, dim, t0, t1 int) {
		C.krt_embed_q8_0_avx2((*C.float)(out), (*C.krt_block_q8_0)(table), (*C.int32_t)(ids), C.int64_t(dim), C.int64_t(t0), C.int64_t(t1))
	}
	avx512.EmbedQ8_0 = func(out, table, ids kern.P, dim, t0, t1 int) {
		C.krt_embed_q8_0_avx512((*C.float)(out), (*C.krt_block_q8_0)(table), (*C.int32_t)(ids), C.int64_t(dim), C.int64_t(t0), C.int64_t(t1))
	}
}
