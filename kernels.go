// Package kernelrt runs the hot path of CPU LLM inference from Go: SIMD kernels for
// ggml-compatible quantized GEMV/GEMM and the other decoder ops, a pinned thread pool
// (threadpool/), a GC-free arena (arena/) and a dispatch table that decides per op whether
// and how to split work across the pool.
//
// Every op exists three ways with one signature: as a package function and a Serial method
// (run in the calling goroutine) and as a Runtime method (split over the Runtime's pinned
// workers as its dispatch table decides); the Ops interface covers both, so a model written
// against Ops runs either way. Each call checks every argument before any C or assembly runs
// and returns an *ArgError naming the argument and the numbers; none panics on bad input.
//
// The kernels come from one C source (csrc/) in three variants (scalar, AVX2, AVX-512 with
// VNNI) picked at run time, reached through Go assembly generated from it (no cgo needed),
// through cgo, or through a pure-Go port (other architectures, -tags purego). The environment
// variables KERNELRT_BACKEND (asm, cgo, generic) and KERNELRT_VARIANT (ref, avx2, avx512)
// force the default kernels; a bad value is reported by the first call.
package kernelrt

import (
	"math"
	"sync"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// QK is the number of weights in one quantized block (Q8_0, Q5_0, Q4_0, Q4_1, Q5_1); the
// K-quants' super-blocks hold QKK.
const QK = 32

// BlockQ8_0 is byte-identical to ggml's block_q8_0: value[j] = fp16(D) * Qs[j]. 34 bytes.
type BlockQ8_0 struct {
	D  uint16
	Qs [32]int8
}

// BlockQ5_0 is byte-identical to ggml's block_q5_0: value[j] = fp16(D) * (q[j] - 16), where
// q[j] = low nibble (Qs[j] for j < 16, Qs[j-16]>>4 otherwise) | bit j of Qh << 4. 22 bytes.
type BlockQ5_0 struct {
	D  uint16
	Qh [4]uint8
	Qs [16]uint8
}

// Backends lists the kernel backends built into this binary ("asm", "cgo", "generic").
func Backends() []string { return kern.Backends() }

// Variants lists the kernel variants this CPU can run, slowest first ("ref", "avx2", "avx512").
func Variants() []string {
	var out []string
	for _, v := range cpu.Supported() {
		out = append(out, v.String())
	}
	return out
}

// DefaultKernels reports the kernel set serial calls use, as "backend/variant"
// ("asm/avx512"), or the error a bad KERNELRT_BACKEND / KERNELRT_VARIANT causes.
func DefaultKernels() (string, error) {
	s, err := kern.Default()
	if err != nil {
		return "", err
	}
	return s.Name(), nil
}

// ---- core kernels: quantization, GEMV, RMSNorm, softmax ----
//
// Each binder below (//kernelrt:api Name) checks every argument, then hands the packed
// kernel arguments to run: tools/opgen makes it the package function, the Serial method and
// the Runtime method Name, all with its signature and doc.

// QuantizeQ8_0 quantizes src (a positive multiple of 32 floats) into len(src)/32 Q8_0 blocks,
// byte for byte like ggml's reference quantizer: d = max|x|/127 stored as fp16 (round to
// nearest even), qs[j] = x[j]/d rounded half away from zero (C roundf), all zeros when d is 0.
//
// NaN/Inf rule: a block holding any NaN or ±Inf is poisoned: d = 0x7e00 (fp16 NaN) and every
// quant 0, so every value it dequantizes to, and every dot product it enters, is NaN, as in
// float math. (ggml leaves this case undefined.) dst must not overlap src.
//
//kernelrt:api QuantizeQ8_0
func quantizeQ8_0(rt *Runtime, dst []BlockQ8_0, src []float32) error {
	if err := checkQuantize("QuantizeQ8_0", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ8_0, Shape{N: len(src), Tokens: 1}, argsQuantizeQ8_0(sliceP(dst), sliceP(src)), nil)
}

// QuantizeQ5_0 quantizes src (a positive multiple of 32 floats) into len(src)/32 Q5_0 blocks,
// byte for byte like ggml's reference quantizer: m = the element of largest magnitude (sign
// kept, first one on ties), d = m/-16 stored as fp16, q[j] = min(31, trunc(x[j]/d + 16.5)).
//
// NaN/Inf rule: a block holding any NaN or ±Inf is poisoned: d = 0x7e00 (fp16 NaN) and every
// quant q = 16 (qs all 0, qh all ones), so every value it dequantizes to, d*(q-16) = NaN*0, and
// every dot product it enters is NaN, as in float math. dst must not overlap src.
//
//kernelrt:api QuantizeQ5_0
func quantizeQ5_0(rt *Runtime, dst []BlockQ5_0, src []float32) error {
	if err := checkQuantize("QuantizeQ5_0", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ5_0, Shape{N: len(src), Tokens: 1}, argsQuantizeQ5_0(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ8_0 expands src into len(src)*32 floats: dst[32b+j] = fp16(d_b) * qs_b[j].
// dst must not overlap src.
//
//kernelrt:api DequantizeQ8_0
func dequantizeQ8_0(rt *Runtime, dst []float32, src []BlockQ8_0) error {
	if err := checkDequantize("DequantizeQ8_0", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ8_0, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ8_0(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ5_0 expands src into len(src)*32 floats: dst[32b+j] = fp16(d_b) * (q_b[j] - 16).
// dst must not overlap src.
//
//kernelrt:api DequantizeQ5_0
func dequantizeQ5_0(rt *Runtime, dst []float32, src []BlockQ5_0) error {
	if err := checkDequantize("DequantizeQ5_0", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ5_0, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ5_0(sliceP(dst), sliceP(src)), nil)
}

// GemvQ8_0 computes y = W x for a rows x cols Q8_0 matrix w (row-major, cols/32 blocks a row)
// and Q8_0 activations x (cols/32 blocks): y[r] = sum over blocks b of
// (fp32(d_w)*fp32(d_x)) * (exact integer dot of the quants), summed in float32. cols must be a
// positive multiple of 32; y must not overlap w or x.
//
// Weights may use every int8 quant; activation quants must lie in -127..127, as every
// quantizer (ours and ggml's) produces them: the AVX2 kernels' sign trick cannot represent
// +128, and checking would cost a pass over x per call, so -128 is not refused. A poisoned
// block (fp16 NaN scale) makes its rows NaN in every variant; a block with an fp16 Inf scale
// makes them Inf or NaN, which of the two may differ between variants.
//
//kernelrt:api GemvQ8_0
func gemvQ8_0(rt *Runtime, y []float32, w []BlockQ8_0, x []BlockQ8_0, rows, cols int) error {
	if err := checkGemv("GemvQ8_0", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ8_0, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ8_0(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ8_0Bias is GemvQ8_0 followed by y[r] += bias[r]; a nil bias means none. y must not
// overlap bias either (not even exactly: a kernel may add the bias in a second pass).
//
//kernelrt:api GemvQ8_0Bias
func gemvQ8_0Bias(rt *Runtime, y []float32, w []BlockQ8_0, x []BlockQ8_0, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ8_0Bias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ8_0, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ8_0(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemvQ5_0 is GemvQ8_0 with Q5_0 weights, whose quants count as q-16.
//
//kernelrt:api GemvQ5_0
func gemvQ5_0(rt *Runtime, y []float32, w []BlockQ5_0, x []BlockQ8_0, rows, cols int) error {
	if err := checkGemv("GemvQ5_0", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ5_0, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ5_0(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ5_0Bias is GemvQ5_0 followed by y[r] += bias[r]; a nil bias means none. y must not
// overlap bias.
//
//kernelrt:api GemvQ5_0Bias
func gemvQ5_0Bias(rt *Runtime, y []float32, w []BlockQ5_0, x []BlockQ8_0, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ5_0Bias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ5_0, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ5_0(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemvQ8_0F32 is the fused GEMV for FP32 activations: it quantizes x (cols floats) to Q8_0
// into the caller-owned scratch (at least cols/32 blocks; only the first cols/32 are written),
// then computes y = W xq (+ bias unless bias is nil). The result is exactly QuantizeQ8_0 then
// GemvQ8_0Bias. y must not overlap w, x, bias or scratch; scratch must not overlap w, x or bias.
//
//kernelrt:api GemvQ8_0F32
func gemvQ8_0F32(rt *Runtime, y []float32, w []BlockQ8_0, x []float32, bias []float32, scratch []BlockQ8_0, rows, cols int) error {
	if err := checkGemvFused("GemvQ8_0F32", y, w, x, bias, scratch, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ8_0F32, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ8_0F32(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), sliceP(scratch))
}

// GemvQ5_0F32 is GemvQ8_0F32 with Q5_0 weights.
//
//kernelrt:api GemvQ5_0F32
func gemvQ5_0F32(rt *Runtime, y []float32, w []BlockQ5_0, x []float32, bias []float32, scratch []BlockQ8_0, rows, cols int) error {
	if err := checkGemvFused("GemvQ5_0F32", y, w, x, bias, scratch, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ5_0F32, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ5_0F32(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), sliceP(scratch))
}

// GemvF32 computes y = W x in float32 for a row-major rows x cols matrix w: y[r] is the dot of
// row r with x, for any positive cols. y must not overlap w or x.
//
//kernelrt:api GemvF32
func gemvF32(rt *Runtime, y, w, x []float32, rows, cols int) error {
	if err := checkGemvF32("GemvF32", y, w, x, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvF32, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvF32(sliceP(y), sliceP(w), sliceP(x), cols), nil)
}

// RMSNorm normalises tokens rows of dim floats: out[t][i] = x[t][i] / sqrt(mean_i(x[t][i]^2) +
// eps) * weight[i]. eps must be positive and finite. out must not overlap x or weight (the
// kernels do not promise to work in place).
//
//kernelrt:api RMSNorm
func rmsNorm(rt *Runtime, out, x, weight []float32, tokens, dim int, eps float32) error {
	if err := checkRMSNorm("RMSNorm", out, x, weight, tokens, dim, eps); err != nil {
		return err
	}
	return rt.run(OpRMSNorm, Shape{Tokens: tokens, Cols: dim}, argsRMSNorm(sliceP(out), sliceP(x), sliceP(weight), eps, dim), nil)
}

// Softmax replaces each of the rows rows of cols floats in x by its softmax, in place:
// x[i] = exp(x[i]-max) / sum_j exp(x[j]-max), exp being krt_expf (about 2 ulp).
//
//kernelrt:api Softmax
func softmax(rt *Runtime, x []float32, rows, cols int) error {
	if err := checkSoftmax("Softmax", x, rows, cols, nil); err != nil {
		return err
	}
	// Softmax rows are independent tokens' scores: prefill thresholds apply when many.
	return rt.run(OpSoftmax, Shape{Rows: rows, Cols: cols, Tokens: rows}, argsSoftmax(sliceP(x), nil, cols), nil)
}

// SoftmaxMasked is Softmax where row r uses only its first valid[r] entries (1..cols) and gets
// zeros in the rest, as causal attention needs. valid must hold rows entries and not overlap x.
//
//kernelrt:api SoftmaxMasked
func softmaxMasked(rt *Runtime, x []float32, rows, cols int, valid []int32) error {
	if err := checkSoftmax("SoftmaxMasked", x, rows, cols, valid); err != nil {
		return err
	}
	return rt.run(OpSoftmax, Shape{Rows: rows, Cols: cols, Tokens: rows}, argsSoftmax(sliceP(x), sliceP(valid), cols), nil)
}

// streamOut lends StreamRead a heap cell for the kernel's result: a local's address packed
// into the kernel arguments would escape and cost an allocation per call.
var streamOut = sync.Pool{New: func() any { return new(float32) }}

// StreamRead returns the sum of src, read once from start to end with the widest loads the
// kernel variant has: the memory-bandwidth baseline the GEMV benchmarks are compared with. The
// summation order is the kernel's own, so only use the value to keep the read alive.
//
//kernelrt:api StreamRead
func streamRead(rt *Runtime, src []float32) (float32, error) {
	if len(src) == 0 {
		return 0, nil
	}
	out := streamOut.Get().(*float32)
	err := rt.run(OpStreamRead, Shape{N: len(src), Tokens: 1}, argsStreamRead(unsafe.Pointer(out), sliceP(src)), nil)
	s := *out
	streamOut.Put(out)
	return s, err
}

// ---- argument checks (shared with the Runtime's dispatch wrappers) ----

// checkQuantize checks a quantization of src into dst (blocks of 32 or 256 values, as B holds).
func checkQuantize[B block](fn string, dst []B, src []float32) error {
	qk := blockWeights[B]()
	f := formulasFor(qk)
	if src == nil {
		return argErr(fn, "src", "is nil, want a positive multiple of %d floats", qk)
	}
	if len(src) == 0 || len(src)%qk != 0 {
		return argErr(fn, "src", "has length %d, want a positive multiple of %d floats", len(src), qk)
	}
	if err := checkLenF(fn, "dst", dst, f.srcDiv, len(src)/qk, "blocks"); err != nil {
		return err
	}
	return checkNoOverlap(fn, "dst", "src", spanOf(dst), spanOf(src))
}

// checkDequantize checks a dequantization of src into dst.
func checkDequantize[B block](fn string, dst []float32, src []B) error {
	qk := blockWeights[B]()
	f := formulasFor(qk)
	if src == nil {
		return argErr(fn, "src", "is nil, want at least 1 block")
	}
	if len(src) == 0 {
		return argErr(fn, "src", "is empty, want at least 1 block")
	}
	n, ok := mulOK(len(src), qk)
	if !ok {
		return argErr(fn, "src", "has %d blocks: %s overflows int", len(src), f.srcMul)
	}
	if err := checkLenF(fn, "dst", dst, f.srcMul, n, "floats"); err != nil {
		return err
	}
	return checkNoOverlap(fn, "dst", "src", spanOf(dst), spanOf(src))
}

// checkGemv checks y = W x (+ bias) with quantized w and activations x; bias may be nil. It is
// checkMatmul for one token, with the formulas a GEMV caller knows.
func checkGemv[B block, X actBlock](fn string, y []float32, w []B, x []X, bias []float32, rows, cols int) error {
	return checkMatmul(fn, y, w, x, bias, rows, cols, 1, false)
}

// checkGemvFused checks the fused GEMV: FP32 x quantized into scratch, then y = W xq (+ bias).
func checkGemvFused[B BlockQ8_0 | BlockQ5_0](fn string, y []float32, w []B, x, bias []float32, scratch []BlockQ8_0, rows, cols int) error {
	n, err := checkMatrix(fn, rows, cols, QK)
	if err != nil {
		return err
	}
	if err := checkLenF(fn, "y", y, "rows", rows, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, "w", w, "rows*cols/32", n/QK, "blocks"); err != nil {
		return err
	}
	if err := checkLenF(fn, "x", x, "cols", cols, "floats"); err != nil {
		return err
	}
	if err := checkOptLenF(fn, "bias", bias, "rows", rows, "floats"); err != nil {
		return err
	}
	if err := checkMinLenF(fn, "scratch", scratch, "cols/32", cols/QK, "blocks"); err != nil {
		return err
	}
	ys, ss := spanOf(y), spanOf(scratch[:cols/QK])
	for _, c := range []struct {
		out, in string
		a, b    span
	}{
		{"y", "w", ys, spanOf(w)},
		{"y", "x", ys, spanOf(x)},
		{"y", "bias", ys, spanOf(bias)},
		{"y", "scratch", ys, ss},
		{"scratch", "w", ss, spanOf(w)},
		{"scratch", "x", ss, spanOf(x)},
		{"scratch", "bias", ss, spanOf(bias)},
	} {
		if err := checkNoOverlap(fn, c.out, c.in, c.a, c.b); err != nil {
			return err
		}
	}
	return nil
}

// checkGemvF32 checks y = W x in float32 (any positive cols: the kernels handle tails).
func checkGemvF32(fn string, y, w, x []float32, rows, cols int) error {
	if err := checkPositive(fn, "rows", rows); err != nil {
		return err
	}
	if err := checkPositive(fn, "cols", cols); err != nil {
		return err
	}
	n, ok := mulOK(rows, cols)
	if !ok {
		return argErr(fn, "rows", "rows*cols = %d*%d overflows int", rows, cols)
	}
	if err := checkLenF(fn, "y", y, "rows", rows, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, "w", w, "rows*cols", n, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, "x", x, "cols", cols, "floats"); err != nil {
		return err
	}
	ys := spanOf(y)
	if err := checkNoOverlap(fn, "y", "w", ys, spanOf(w)); err != nil {
		return err
	}
	return checkNoOverlap(fn, "y", "x", ys, spanOf(x))
}

// checkRMSNorm checks RMSNorm of tokens rows of dim floats.
func checkRMSNorm(fn string, out, x, weight []float32, tokens, dim int, eps float32) error {
	if err := checkPositive(fn, "tokens", tokens); err != nil {
		return err
	}
	if err := checkPositive(fn, "dim", dim); err != nil {
		return err
	}
	n, ok := mulOK(tokens, dim)
	if !ok {
		return argErr(fn, "tokens", "tokens*dim = %d*%d overflows int", tokens, dim)
	}
	if !(eps > 0) || eps > math.MaxFloat32 {
		return argErr(fn, "eps", "must be positive and finite, got %g", eps)
	}
	if err := checkLenF(fn, "out", out, "tokens*dim", n, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, "x", x, "tokens*dim", n, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, "weight", weight, "dim", dim, "floats"); err != nil {
		return err
	}
	outs := spanOf(out)
	if err := checkNoOverlap(fn, "out", "x", outs, spanOf(x)); err != nil {
		return err
	}
	return checkNoOverlap(fn, "out", "weight", outs, spanOf(weight))
}

// checkSoftmax checks a row-wise softmax of rows x cols floats; valid may be nil.
func checkSoftmax(fn string, x []float32, rows, cols int, valid []int32) error {
	if err := checkPositive(fn, "rows", rows); err != nil {
		return err
	}
	if err := checkPositive(fn, "cols", cols); err != nil {
		return err
	}
	n, ok := mulOK(rows, cols)
	if !ok {
		return argErr(fn, "rows", "rows*cols = %d*%d overflows int", rows, cols)
	}
	if err := checkLenF(fn, "x", x, "rows*cols", n, "floats"); err != nil {
		return err
	}
	if valid == nil {
		return nil
	}
	if err := checkLenF(fn, "valid", valid, "rows", rows, "entries"); err != nil {
		return err
	}
	for r, v := range valid {
		if v < 1 || int(v) > cols {
			return argErr(fn, "valid", "valid[%d] = %d, want 1..cols = 1..%d", r, v, cols)
		}
	}
	return checkNoOverlap(fn, "x", "valid", spanOf(x), spanOf(valid))
}
