package kernelrt

import "unsafe"

// IQ4_XS, ggml's non-linear 4-bit super-block type (256 weights, 8 sub-blocks of 32 with 6-bit
// scales, IQ4_NL's value table): its block type, quantizer, dequantizer, GEMV and prefill GEMM
// (csrc/iq4xs.c). Its matrices take Q8_K activations, as ggml's IQ4_XS dot product does, and
// every call checks its arguments as the Q4_K call of the same kind.

// BlockIQ4_XS is byte-identical to ggml's block_iq4_xs: 8 sub-blocks of 32 weights. Sub-block j
// has the 6-bit scale ls = (ScalesL[j/2]>>(4*(j%2)))&15 | ((ScalesH>>(2j))&3)<<4 and its 16
// nibble bytes Qs[16j:16j+16] in IQ4_NL's layout (element l < 16 the low nibble of byte l,
// element l+16 its high nibble); value = (fp16(D)*(ls-32)) * kvalues_iq4nl[nibble]. 136 bytes.
type BlockIQ4_XS struct {
	D, ScalesH uint16
	ScalesL    [4]uint8
	Qs         [128]uint8
}

var (
	_ [136 - unsafe.Sizeof(BlockIQ4_XS{})]byte
	_ [unsafe.Sizeof(BlockIQ4_XS{}) - 136]byte
)

// QuantizeIQ4_XS quantizes src (a positive multiple of 256 floats) into len(src)/256 IQ4_XS
// blocks. Not ggml's byte stream (ggml's dequantizer is the compatibility target): each sub-block
// of 32 gets IQ4_NL's weighted least-squares scale, the super-block's D maps the largest of them
// onto the code -32, each sub-block's scale is rounded to its 6-bit code and its values re-mapped
// to the nearest table entries (csrc/krt_iq4xs.h). A block holding NaN or ±Inf gets D = the fp16
// NaN. dst must not overlap src.
//
//kernelrt:api QuantizeIQ4_XS
func quantizeIQ4_XS(rt *Runtime, dst []BlockIQ4_XS, src []float32) error {
	if err := checkQuantize("QuantizeIQ4_XS", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeIQ4_XS, Shape{N: len(src), Tokens: 1}, argsQuantizeIQ4_XS(sliceP(dst), sliceP(src)), nil)
}

// DequantizeIQ4_XS expands src into len(src)*256 floats, as ggml's dequantize_row_iq4_xs:
// (fp16(D)*(ls-32)) * kvalues_iq4nl[nibble] per sub-block of 32 (see BlockIQ4_XS). dst must not
// overlap src.
//
//kernelrt:api DequantizeIQ4_XS
func dequantizeIQ4_XS(rt *Runtime, dst []float32, src []BlockIQ4_XS) error {
	if err := checkDequantize("DequantizeIQ4_XS", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeIQ4_XS, Shape{N: len(dst), Tokens: 1}, argsDequantizeIQ4_XS(sliceP(dst), sliceP(src)), nil)
}

// GemvIQ4_XS computes y = W x for a rows x cols IQ4_XS matrix w (row-major, cols/256
// super-blocks a row) and Q8_K activations x: per super-block (fp32(D)*d_x) * sum_j (ls_j-32) *
// sum_l kvalue*q_x, summed in float32. cols must be a positive multiple of 256. A NaN or ±Inf
// scale in a block makes its row NaN on every backend.
//
//kernelrt:api GemvIQ4_XS
func gemvIQ4_XS(rt *Runtime, y []float32, w []BlockIQ4_XS, x []BlockQ8K, rows, cols int) error {
	if err := checkGemv("GemvIQ4_XS", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvIQ4_XS, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvIQ4_XS(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvIQ4_XSBias is GemvIQ4_XS followed by y[r] += bias[r]; a nil bias means none. y must not
// overlap w, x or bias.
//
//kernelrt:api GemvIQ4_XSBias
func gemvIQ4_XSBias(rt *Runtime, y []float32, w []BlockIQ4_XS, x []BlockQ8K, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvIQ4_XSBias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvIQ4_XS, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvIQ4_XS(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemmIQ4_XS is the prefill GEMM of an IQ4_XS matrix with Q8_K activations (cols/256 blocks a
// token): y[t*rows+r] = the scalar GEMV of token t, bit-identical on every backend and variant.
//
//kernelrt:api GemmIQ4_XS
func gemmIQ4_XS(rt *Runtime, y []float32, w []BlockIQ4_XS, x []BlockQ8K, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmIQ4_XS", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmIQ4_XS, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmIQ4_XS(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}
