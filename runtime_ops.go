package kernelrt

import "github.com/kernelrt/kernelrt/internal/kern"

// The dispatch wrappers: every op of the table as a Runtime method with the same signature
// as its serial function. Each checks its arguments with the serial function's own check,
// fills the op's preallocated job and hands it to run, which asks the table row how many
// workers to wake.

// QuantizeQ8_0 is the dispatch wrapper of QuantizeQ8_0 (split over blocks).
func (rt *Runtime) QuantizeQ8_0(dst []BlockQ8_0, src []float32) error {
	if err := rt.checkOpen("QuantizeQ8_0"); err != nil {
		return err
	}
	if err := checkQuantize("QuantizeQ8_0", dst, src); err != nil {
		return err
	}
	j := &rt.jobs.quant
	j.dst, j.src, j.q5 = sliceP(dst), sliceP(src), false
	rt.run(OpQuantizeQ8_0, Shape{N: len(src), Tokens: 1}, j)
	return nil
}

// QuantizeQ5_0 is the dispatch wrapper of QuantizeQ5_0 (split over blocks, on the
// quantize_q8_0 row: the same kind of work).
func (rt *Runtime) QuantizeQ5_0(dst []BlockQ5_0, src []float32) error {
	if err := rt.checkOpen("QuantizeQ5_0"); err != nil {
		return err
	}
	if err := checkQuantize("QuantizeQ5_0", dst, src); err != nil {
		return err
	}
	j := &rt.jobs.quant
	j.dst, j.src, j.q5 = sliceP(dst), sliceP(src), true
	rt.run(OpQuantizeQ8_0, Shape{N: len(src), Tokens: 1}, j)
	return nil
}

func (rt *Runtime) gemv(op Op, y []float32, w, x, bias, xq0 kern.P, rows, cols int) {
	j := &rt.jobs.gemv
	j.op, j.y, j.w, j.x, j.bias, j.xq0, j.cols = op, sliceP(y), w, x, bias, xq0, cols
	rt.run(op, Shape{Rows: rows, Cols: cols, Tokens: 1}, j)
}

// GemvQ8_0 is the dispatch wrapper of GemvQ8_0 (split over rows).
func (rt *Runtime) GemvQ8_0(y []float32, w []BlockQ8_0, x []BlockQ8_0, rows, cols int) error {
	return rt.GemvQ8_0Bias(y, w, x, nil, rows, cols)
}

// GemvQ8_0Bias is the dispatch wrapper of GemvQ8_0Bias (split over rows).
func (rt *Runtime) GemvQ8_0Bias(y []float32, w []BlockQ8_0, x []BlockQ8_0, bias []float32, rows, cols int) error {
	if err := rt.checkOpen("GemvQ8_0Bias"); err != nil {
		return err
	}
	if err := checkGemv("GemvQ8_0Bias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	rt.gemv(OpGemvQ8_0, y, sliceP(w), sliceP(x), sliceP(bias), nil, rows, cols)
	return nil
}

// GemvQ5_0 is the dispatch wrapper of GemvQ5_0 (split over rows).
func (rt *Runtime) GemvQ5_0(y []float32, w []BlockQ5_0, x []BlockQ8_0, rows, cols int) error {
	return rt.GemvQ5_0Bias(y, w, x, nil, rows, cols)
}

// GemvQ5_0Bias is the dispatch wrapper of GemvQ5_0Bias (split over rows).
func (rt *Runtime) GemvQ5_0Bias(y []float32, w []BlockQ5_0, x []BlockQ8_0, bias []float32, rows, cols int) error {
	if err := rt.checkOpen("GemvQ5_0Bias"); err != nil {
		return err
	}
	if err := checkGemv("GemvQ5_0Bias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	rt.gemv(OpGemvQ5_0, y, sliceP(w), sliceP(x), sliceP(bias), nil, rows, cols)
	return nil
}

// GemvQ8_0F32 is the dispatch wrapper of GemvQ8_0F32 (split over rows; every worker
// quantizes x into its private scratch: the caller's for worker 0, the arena's for others).
func (rt *Runtime) GemvQ8_0F32(y []float32, w []BlockQ8_0, x []float32, bias []float32, scratch []BlockQ8_0, rows, cols int) error {
	if err := rt.checkOpen("GemvQ8_0F32"); err != nil {
		return err
	}
	if err := checkGemvFused("GemvQ8_0F32", y, w, x, bias, scratch, rows, cols); err != nil {
		return err
	}
	if err := rt.checkScratch("GemvQ8_0F32", OpGemvQ8_0F32, Shape{Rows: rows, Cols: cols}); err != nil {
		return err
	}
	rt.gemv(OpGemvQ8_0F32, y, sliceP(w), sliceP(x), sliceP(bias), sliceP(scratch), rows, cols)
	return nil
}

// GemvQ5_0F32 is the dispatch wrapper of GemvQ5_0F32.
func (rt *Runtime) GemvQ5_0F32(y []float32, w []BlockQ5_0, x []float32, bias []float32, scratch []BlockQ8_0, rows, cols int) error {
	if err := rt.checkOpen("GemvQ5_0F32"); err != nil {
		return err
	}
	if err := checkGemvFused("GemvQ5_0F32", y, w, x, bias, scratch, rows, cols); err != nil {
		return err
	}
	if err := rt.checkScratch("GemvQ5_0F32", OpGemvQ5_0F32, Shape{Rows: rows, Cols: cols}); err != nil {
		return err
	}
	rt.gemv(OpGemvQ5_0F32, y, sliceP(w), sliceP(x), sliceP(bias), sliceP(scratch), rows, cols)
	return nil
}

// GemvF32 is the dispatch wrapper of GemvF32 (split over rows).
func (rt *Runtime) GemvF32(y, w, x []float32, rows, cols int) error {
	if err := rt.checkOpen("GemvF32"); err != nil {
		return err
	}
	if err := checkGemvF32("GemvF32", y, w, x, rows, cols); err != nil {
		return err
	}
	j := &rt.jobs.gemvF32
	j.y, j.w, j.x, j.cols = sliceP(y), sliceP(w), sliceP(x), cols
	rt.run(OpGemvF32, Shape{Rows: rows, Cols: cols, Tokens: 1}, j)
	return nil
}

// RMSNorm is the dispatch wrapper of RMSNorm (split over tokens).
func (rt *Runtime) RMSNorm(out, x, weight []float32, tokens, dim int, eps float32) error {
	if err := rt.checkOpen("RMSNorm"); err != nil {
		return err
	}
	if err := checkRMSNorm("RMSNorm", out, x, weight, tokens, dim, eps); err != nil {
		return err
	}
	j := &rt.jobs.rmsnorm
	j.out, j.x, j.w, j.eps, j.dim = sliceP(out), sliceP(x), sliceP(weight), eps, dim
	rt.run(OpRMSNorm, Shape{Tokens: tokens, Cols: dim}, j)
	return nil
}

// Softmax is the dispatch wrapper of Softmax (split over rows).
func (rt *Runtime) Softmax(x []float32, rows, cols int) error {
	return rt.softmax("Softmax", x, rows, cols, nil)
}

// SoftmaxMasked is the dispatch wrapper of SoftmaxMasked (split over rows).
func (rt *Runtime) SoftmaxMasked(x []float32, rows, cols int, valid []int32) error {
	return rt.softmax("SoftmaxMasked", x, rows, cols, valid)
}

func (rt *Runtime) softmax(fn string, x []float32, rows, cols int, valid []int32) error {
	if err := rt.checkOpen(fn); err != nil {
		return err
	}
	if err := checkSoftmax(fn, x, rows, cols, valid); err != nil {
		return err
	}
	j := &rt.jobs.softmax
	j.x, j.valid, j.cols = sliceP(x), sliceP(valid), cols
	// Softmax rows are independent tokens' scores: prefill thresholds apply when many.
	rt.run(OpSoftmax, Shape{Rows: rows, Cols: cols, Tokens: rows}, j)
	return nil
}

// checkScratch refuses a shape whose private scratch exceeds what the runtime planned.
func (rt *Runtime) checkScratch(fn string, op Op, s Shape) error {
	need := rt.table[op].ScratchBytes(s)
	if have := len(rt.scratch[0]); need > have {
		return argErr(fn, "shape", "needs %d bytes of private scratch per worker, the runtime planned %d (raise Options.MaxCols / MaxCtx)", need, have)
	}
	return nil
}

// GemmQ8_0 is the dispatch wrapper of GemmQ8_0 (split over weight rows, all tokens).
func (rt *Runtime) GemmQ8_0(y []float32, w []BlockQ8_0, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	if err := rt.checkOpen("GemmQ8_0"); err != nil {
		return err
	}
	if err := checkGemm("GemmQ8_0", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	rt.gemm(OpGemmQ8_0, false, y, sliceP(w), x, bias, rows, cols, tokens)
	return nil
}

// GemmQ5_0 is the dispatch wrapper of GemmQ5_0 (split over weight rows, all tokens).
func (rt *Runtime) GemmQ5_0(y []float32, w []BlockQ5_0, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	if err := rt.checkOpen("GemmQ5_0"); err != nil {
		return err
	}
	if err := checkGemm("GemmQ5_0", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	rt.gemm(OpGemmQ5_0, true, y, sliceP(w), x, bias, rows, cols, tokens)
	return nil
}

func (rt *Runtime) gemm(op Op, q5 bool, y []float32, w kern.P, x []BlockQ8_0, bias []float32, rows, cols, tokens int) {
	j := &rt.jobs.gemm
	j.q5, j.y, j.w, j.x, j.bias = q5, sliceP(y), w, sliceP(x), sliceP(bias)
	j.rows, j.cols, j.tokens = rows, cols, tokens
	rt.run(op, Shape{Rows: rows, Cols: cols, Tokens: tokens}, j)
}

// SwiGLU is the dispatch wrapper of SwiGLU (split over elements).
func (rt *Runtime) SwiGLU(out, gate, up []float32) error {
	if err := rt.checkOpen("SwiGLU"); err != nil {
		return err
	}
	if err := checkSwiGLU("SwiGLU", out, gate, up); err != nil {
		return err
	}
	return rt.eltwise(OpSwiGLU, true, out, gate, up)
}

// Add is the dispatch wrapper of Add (split over elements).
func (rt *Runtime) Add(out, a, b []float32) error {
	if err := rt.checkOpen("Add"); err != nil {
		return err
	}
	if err := checkAdd("Add", out, a, b); err != nil {
		return err
	}
	return rt.eltwise(OpAdd, false, out, a, b)
}

func (rt *Runtime) eltwise(op Op, swiglu bool, out, a, b []float32) error {
	j := &rt.jobs.eltwise
	j.swiglu, j.out, j.a, j.b = swiglu, sliceP(out), sliceP(a), sliceP(b)
	rt.run(op, Shape{N: len(out), Tokens: 1}, j)
	return nil
}

// RopeNeoX is the dispatch wrapper of RopeNeoX (split over tokens).
func (rt *Runtime) RopeNeoX(x []float32, tab *RopeTable, tokens, nHeads, headDim, stride, pos0 int) error {
	if err := rt.checkOpen("RopeNeoX"); err != nil {
		return err
	}
	if err := checkRopeNeoX("RopeNeoX", x, tab, tokens, nHeads, headDim, stride, pos0); err != nil {
		return err
	}
	j := &rt.jobs.rope
	j.x, j.cos, j.sin = sliceP(x), sliceP(tab.cos), sliceP(tab.sin)
	j.stride, j.heads, j.headDim, j.pos0 = stride, nHeads, headDim, pos0
	rt.run(OpRope, Shape{Tokens: tokens, Heads: nHeads, HeadD: headDim}, j)
	return nil
}

// KVAppend is the dispatch wrapper of KVAppend (split over tokens).
func (rt *Runtime) KVAppend(cache, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error {
	if err := rt.checkOpen("KVAppend"); err != nil {
		return err
	}
	if err := checkKVAppend("KVAppend", cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0); err != nil {
		return err
	}
	j := &rt.jobs.kvAppend
	j.cache, j.src = sliceP(cache), sliceP(src)
	j.srcStride, j.kvHeads, j.headDim, j.maxCtx, j.pos0 = srcStride, nKVHeads, headDim, maxCtx, pos0
	rt.run(OpKVAppend, Shape{Tokens: tokens, KVHeads: nKVHeads, HeadD: headDim}, j)
	return nil
}

// Attention is the dispatch wrapper of Attention (split over query heads; worker 0 scores
// into the caller's scratch, the others into their private arena scratch).
func (rt *Runtime) Attention(out, q, kcache, vcache, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int) error {
	if err := rt.checkOpen("Attention"); err != nil {
		return err
	}
	if err := checkAttention("Attention", out, q, kcache, vcache, scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0); err != nil {
		return err
	}
	s := Shape{Tokens: tokens, Heads: nHeads, KVHeads: nKVHeads, HeadD: headDim, Ctx: pos0 + tokens}
	if err := rt.checkScratch("Attention", OpAttention, Shape{Ctx: maxCtx}); err != nil {
		return err
	}
	j := &rt.jobs.attn
	j.out, j.q, j.k, j.v, j.scr0 = sliceP(out), sliceP(q), sliceP(kcache), sliceP(vcache), sliceP(scratch)
	j.heads, j.kvHeads, j.headDim, j.maxCtx, j.qStride, j.pos0, j.tk = nHeads, nKVHeads, headDim, maxCtx, qStride, pos0, tokens
	rt.run(OpAttention, s, j)
	return nil
}

// EmbedQ8_0 is the dispatch wrapper of EmbedQ8_0 (split over tokens).
func (rt *Runtime) EmbedQ8_0(out []float32, table []BlockQ8_0, ids []int32, dim, vocab int) error {
	if err := rt.checkOpen("EmbedQ8_0"); err != nil {
		return err
	}
	if err := checkEmbedQ8_0("EmbedQ8_0", out, table, ids, dim, vocab); err != nil {
		return err
	}
	j := &rt.jobs.embed
	j.out, j.table, j.ids, j.dim = sliceP(out), sliceP(table), sliceP(ids), dim
	rt.run(OpEmbed, Shape{Tokens: len(ids), Cols: dim}, j)
	return nil
}
