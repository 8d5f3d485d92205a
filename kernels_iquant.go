package kernelrt

import "unsafe"

// IQ4_NL, ggml's non-linear 4-bit type (blocks of 32): its block type, quantizer, dequantizer,
// GEMV and prefill GEMM (csrc/iquant.c, csrc/gemm.c). Its matrices take Q8_0 activations, as
// Q4_0's do, and every call checks its arguments as the Q4_0 call of the same kind.

// KValuesIQ4NL is ggml's kvalues_iq4nl: the value each 4-bit index of an IQ4_NL block stands for.
var KValuesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// BlockIQ4_NL is byte-identical to ggml's block_iq4_nl: value[j] = fp16(D) *
// KValuesIQ4NL[q[j]], where q[j] is the low nibble of Qs[j] for j < 16 and the high nibble of
// Qs[j-16] otherwise. 18 bytes.
type BlockIQ4_NL struct {
	D  uint16
	Qs [16]uint8
}

var (
	_ [18 - unsafe.Sizeof(BlockIQ4_NL{})]byte
	_ [unsafe.Sizeof(BlockIQ4_NL{}) - 18]byte
)

// QuantizeIQ4_NL quantizes src (a positive multiple of 32 floats) into len(src)/32 IQ4_NL blocks.
// Not ggml's byte stream (ggml's dequantizer is the compatibility target), but its method: a
// weighted least-squares scale (weights x^2) chosen among 15 trial scales that map the
// largest-magnitude element onto the table's end, each element then taking the nearest table
// value; its round-trip error on Gaussian data is within 0.3% of ggml's quantize_iq4_nl
// (csrc/krt_iquant.h). A block holding NaN or ±Inf gets D = the fp16 NaN. dst must not overlap
// src.
//
//kernelrt:api QuantizeIQ4_NL
func quantizeIQ4_NL(rt *Runtime, dst []BlockIQ4_NL, src []float32) error {
	if err := checkQuantize("QuantizeIQ4_NL", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeIQ4_NL, Shape{N: len(src), Tokens: 1}, argsQuantizeIQ4_NL(sliceP(dst), sliceP(src)), nil)
}

// DequantizeIQ4_NL expands src into len(src)*32 floats, as ggml's dequantize_row_iq4_nl:
// dst[32b+j] = fp16(d_b) * KValuesIQ4NL[q_b[j]].
//
//kernelrt:api DequantizeIQ4_NL
func dequantizeIQ4_NL(rt *Runtime, dst []float32, src []BlockIQ4_NL) error {
	if err := checkDequantize("DequantizeIQ4_NL", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeIQ4_NL, Shape{N: len(dst), Tokens: 1}, argsDequantizeIQ4_NL(sliceP(dst), sliceP(src)), nil)
}

// GemvIQ4_NL computes y = W x for a rows x cols IQ4_NL matrix w (row-major, cols/32 blocks a row)
// and Q8_0 activations x (cols/32 blocks): per block (fp32(d_w)*fp32(d_x)) * sum_j
// KValuesIQ4NL[q_w[j]]*q_x[j], summed in float32. A NaN or ±Inf scale in a block makes its row
// NaN on every backend.
//
//kernelrt:api GemvIQ4_NL
func gemvIQ4_NL(rt *Runtime, y []float32, w []BlockIQ4_NL, x []BlockQ8_0, rows, cols int) error {
	if err := checkGemv("GemvIQ4_NL", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvIQ4_NL, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvIQ4_NL(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvIQ4_NLBias is GemvIQ4_NL followed by y[r] += bias[r]; a nil bias means none. y must not
// overlap w, x or bias.
//
//kernelrt:api GemvIQ4_NLBias
func gemvIQ4_NLBias(rt *Runtime, y []float32, w []BlockIQ4_NL, x []BlockQ8_0, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvIQ4_NLBias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvIQ4_NL, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvIQ4_NL(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemmIQ4_NL is the prefill GEMM of an IQ4_NL matrix with Q8_0 activations (cols/32 blocks a
// token): y[t*rows+r] = GEMV of token t, bit-identical on every backend and variant.
//
//kernelrt:api GemmIQ4_NL
func gemmIQ4_NL(rt *Runtime, y []float32, w []BlockIQ4_NL, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmIQ4_NL", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmIQ4_NL, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmIQ4_NL(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}
