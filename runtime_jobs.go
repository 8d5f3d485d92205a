package kernelrt

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// The worker adapters: one typed job struct per op family, allocated once per Runtime, so
// a dispatch allocates nothing. Run(ith, nth) computes the worker's share from the plan the
// table made (share with the row's granule) and makes one kernel call on it.

// jobs holds one adapter per op family.
type jobs struct {
	quant    quantJob
	gemv     gemvJob
	gemvF32  gemvF32Job
	gemm     gemmJob
	rmsnorm  rmsnormJob
	softmax  softmaxJob
	eltwise  eltwiseJob
	rope     ropeJob
	kvAppend kvAppendJob
	attn     attentionJob
	embed    embedJob
}

type quantJob struct {
	jobBase
	dst, src kern.P
	q5       bool
}

func (j *quantJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		if j.q5 {
			j.set.QuantizeQ5_0(j.dst, j.src, lo, hi)
		} else {
			j.set.QuantizeQ8_0(j.dst, j.src, lo, hi)
		}
	}
	j.end(ith)
}

// gemvJob runs the quantized GEMVs, plain (Q8_0 activations) or fused (FP32 activations
// quantized by each worker into its private scratch).
type gemvJob struct {
	jobBase
	op            Op
	y, w, x, bias kern.P
	xq0           kern.P // the caller's scratch for worker 0 (fused ops)
	cols          int
}

func (j *gemvJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		switch j.op {
		case OpGemvQ8_0:
			j.set.GemvQ8_0(j.y, j.w, j.x, j.bias, j.cols, lo, hi)
		case OpGemvQ5_0:
			j.set.GemvQ5_0(j.y, j.w, j.x, j.bias, j.cols, lo, hi)
		case OpGemvQ8_0F32, OpGemvQ5_0F32:
			xq := j.xq0
			if ith > 0 || xq == nil {
				xq = unsafe.Pointer(unsafe.SliceData(j.rt.scratch[ith]))
			}
			if j.op == OpGemvQ8_0F32 {
				j.set.GemvQ8_0F32(j.y, j.w, j.x, xq, j.bias, j.cols, lo, hi)
			} else {
				j.set.GemvQ5_0F32(j.y, j.w, j.x, xq, j.bias, j.cols, lo, hi)
			}
		}
	}
	j.end(ith)
}

type gemvF32Job struct {
	jobBase
	y, w, x kern.P
	cols    int
}

func (j *gemvF32Job) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		j.set.GemvF32(j.y, j.w, j.x, j.cols, lo, hi)
	}
	j.end(ith)
}

type gemmJob struct {
	jobBase
	q5                 bool
	y, w, x, bias      kern.P
	rows, cols, tokens int
}

func (j *gemmJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		if j.q5 {
			j.set.GemmQ5_0(j.y, j.w, j.x, j.bias, j.rows, j.cols, j.tokens, lo, hi)
		} else {
			j.set.GemmQ8_0(j.y, j.w, j.x, j.bias, j.rows, j.cols, j.tokens, lo, hi)
		}
	}
	j.end(ith)
}

type rmsnormJob struct {
	jobBase
	out, x, w kern.P
	eps       float32
	dim       int
}

func (j *rmsnormJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		j.set.RMSNorm(j.out, j.x, j.w, j.eps, j.dim, lo, hi)
	}
	j.end(ith)
}

type softmaxJob struct {
	jobBase
	x, valid kern.P
	cols     int
}

func (j *softmaxJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		j.set.Softmax(j.x, j.valid, j.cols, lo, hi)
	}
	j.end(ith)
}

// eltwiseJob runs the elementwise ops (SwiGLU, residual add).
type eltwiseJob struct {
	jobBase
	swiglu    bool
	out, a, b kern.P
}

func (j *eltwiseJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		if j.swiglu {
			j.set.SwiGLU(j.out, j.a, j.b, lo, hi)
		} else {
			j.set.Add(j.out, j.a, j.b, lo, hi)
		}
	}
	j.end(ith)
}

type ropeJob struct {
	jobBase
	x, cos, sin                  kern.P
	stride, heads, headDim, pos0 int
}

func (j *ropeJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		j.set.RopeNeox(j.x, j.cos, j.sin, j.stride, j.heads, j.headDim, j.pos0, lo, hi)
	}
	j.end(ith)
}

type kvAppendJob struct {
	jobBase
	cache, src                                kern.P
	srcStride, kvHeads, headDim, maxCtx, pos0 int
}

func (j *kvAppendJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		j.set.KVAppend(j.cache, j.src, j.srcStride, j.kvHeads, j.headDim, j.maxCtx, j.pos0, lo, hi)
	}
	j.end(ith)
}

// attentionJob splits query heads; each worker scores into its private scratch (worker 0
// uses the caller's scratch when one was given).
type attentionJob struct {
	jobBase
	out, q, k, v, scr0                                 kern.P
	heads, kvHeads, headDim, maxCtx, qStride, pos0, tk int
}

func (j *attentionJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		scr := j.scr0
		if ith > 0 || scr == nil {
			scr = unsafe.Pointer(unsafe.SliceData(j.rt.scratch[ith]))
		}
		j.set.Attention(j.out, j.q, j.k, j.v, scr, j.heads, j.kvHeads, j.headDim, j.maxCtx, j.qStride, j.pos0, j.tk, lo, hi)
	}
	j.end(ith)
}

type embedJob struct {
	jobBase
	out, table, ids kern.P
	dim             int
}

func (j *embedJob) Run(ith, nth int) {
	j.begin(ith)
	if lo, hi := j.rng(ith, nth); lo < hi {
		j.set.EmbedQ8_0(j.out, j.table, j.ids, j.dim, lo, hi)
	}
	j.end(ith)
}
