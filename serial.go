package kernelrt

// Serial offers the serial kernels as methods with the same signatures as the Runtime's
// dispatch wrappers, so code written against one interface (the orchestrator's Exec, the
// parity suite) runs either way. The zero value is ready to use.
type Serial struct{}

// QuantizeQ8_0 is the package function QuantizeQ8_0.
func (Serial) QuantizeQ8_0(dst []BlockQ8_0, src []float32) error { return QuantizeQ8_0(dst, src) }

// QuantizeQ5_0 is the package function QuantizeQ5_0.
func (Serial) QuantizeQ5_0(dst []BlockQ5_0, src []float32) error { return QuantizeQ5_0(dst, src) }

// GemvQ8_0 is the package function GemvQ8_0.
func (Serial) GemvQ8_0(y []float32, w []BlockQ8_0, x []BlockQ8_0, rows, cols int) error {
	return GemvQ8_0(y, w, x, rows, cols)
}

// GemvQ8_0Bias is the package function GemvQ8_0Bias.
func (Serial) GemvQ8_0Bias(y []float32, w []BlockQ8_0, x []BlockQ8_0, bias []float32, rows, cols int) error {
	return GemvQ8_0Bias(y, w, x, bias, rows, cols)
}

// GemvQ5_0 is the package function GemvQ5_0.
func (Serial) GemvQ5_0(y []float32, w []BlockQ5_0, x []BlockQ8_0, rows, cols int) error {
	return GemvQ5_0(y, w, x, rows, cols)
}

// GemvQ5_0Bias is the package function GemvQ5_0Bias.
func (Serial) GemvQ5_0Bias(y []float32, w []BlockQ5_0, x []BlockQ8_0, bias []float32, rows, cols int) error {
	return GemvQ5_0Bias(y, w, x, bias, rows, cols)
}

// GemvQ8_0F32 is the package function GemvQ8_0F32.
func (Serial) GemvQ8_0F32(y []float32, w []BlockQ8_0, x []float32, bias []float32, scratch []BlockQ8_0, rows, cols int) error {
	return GemvQ8_0F32(y, w, x, bias, scratch, rows, cols)
}

// GemvQ5_0F32 is the package function GemvQ5_0F32.
func (Serial) GemvQ5_0F32(y []float32, w []BlockQ5_0, x []float32, bias []float32, scratch []BlockQ8_0, rows, cols int) error {
	return GemvQ5_0F32(y, w, x, bias, scratch, rows, cols)
}

// GemvF32 is the package function GemvF32.
func (Serial) GemvF32(y, w, x []float32, rows, cols int) error { return GemvF32(y, w, x, rows, cols) }

// GemmQ8_0 is the package function GemmQ8_0.
func (Serial) GemmQ8_0(y []float32, w []BlockQ8_0, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	return GemmQ8_0(y, w, x, bias, rows, cols, tokens)
}

// GemmQ5_0 is the package function GemmQ5_0.
func (Serial) GemmQ5_0(y []float32, w []BlockQ5_0, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	return GemmQ5_0(y, w, x, bias, rows, cols, tokens)
}

// RMSNorm is the package function RMSNorm.
func (Serial) RMSNorm(out, x, weight []float32, tokens, dim int, eps float32) error {
	return RMSNorm(out, x, weight, tokens, dim, eps)
}

// Softmax is the package function Softmax.
func (Serial) Softmax(x []float32, rows, cols int) error { return Softmax(x, rows, cols) }

// SoftmaxMasked is the package function SoftmaxMasked.
func (Serial) SoftmaxMasked(x []float32, rows, cols int, valid []int32) error {
	return SoftmaxMasked(x, rows, cols, valid)
}

// SwiGLU is the package function SwiGLU.
func (Serial) SwiGLU(out, gate, up []float32) error { return SwiGLU(out, gate, up) }

// Add is the package function Add.
func (Serial) Add(out, a, b []float32) error { return Add(out, a, b) }

// RopeNeoX is the package function RopeNeoX.
func (Serial) RopeNeoX(x []float32, tab *RopeTable, tokens, nHeads, headDim, stride, pos0 int) error {
	return RopeNeoX(x, tab, tokens, nHeads, headDim, stride, pos0)
}

// KVAppend is the package function KVAppend.
func (Serial) KVAppend(cache, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error {
	return KVAppend(cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0)
}

// Attention is the package function Attention.
func (Serial) Attention(out, q, kcache, vcache, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int) error {
	return Attention(out, q, kcache, vcache, scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0)
}

// EmbedQ8_0 is the package function EmbedQ8_0.
func (Serial) EmbedQ8_0(out []float32, table []BlockQ8_0, ids []int32, dim, vocab int) error {
	return EmbedQ8_0(out, table, ids, dim, vocab)
}
