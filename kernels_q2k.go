package kernelrt

import "unsafe"

// Q2_K, ggml's 2-bit K-quant (super-blocks of 256): its block type, quantizer, dequantizer, GEMV
// and prefill GEMM (csrc/q2k.c). Its matrices take Q8_K activations, as Q4_K's do, and every call
// checks its arguments as the Q4_K call of the same kind.

// BlockQ2K is byte-identical to ggml's block_q2_K: 16 sub-blocks of 16 weights, sub-block i
// having the 4-bit scale sc = Scales[i]&15 and the 4-bit min m = Scales[i]>>4. Element e (half
// n = e/128, j = (e%128)/32, l = e%32) has the 2-bit quant q = Qs[32n+l]>>(2j)&3, and value =
// (fp16(D)*sc)*q - fp16(Dmin)*m. 84 bytes.
type BlockQ2K struct {
	Scales  [16]uint8
	Qs      [64]uint8
	D, Dmin uint16
}

var (
	_ [84 - unsafe.Sizeof(BlockQ2K{})]byte
	_ [unsafe.Sizeof(BlockQ2K{}) - 84]byte
)

// QuantizeQ2K quantizes src (a positive multiple of 256 floats) into len(src)/256 Q2_K blocks.
// Not ggml's byte stream (ggml's dequantizer is the compatibility target): per sub-block of 16 a
// least-squares fit of scale and min over 16 candidate grids, both then rounded to 4-bit
// multiples of the fp16 D and Dmin and the quants re-fit to them (csrc/krt_q2k.h). A block
// holding NaN or ±Inf gets D = the fp16 NaN. dst must not overlap src.
//
//kernelrt:api QuantizeQ2K
func quantizeQ2K(rt *Runtime, dst []BlockQ2K, src []float32) error {
	if err := checkQuantize("QuantizeQ2K", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ2K, Shape{N: len(src), Tokens: 1}, argsQuantizeQ2K(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ2K expands src into len(src)*256 floats, as ggml's dequantize_row_q2_K:
// (fp16(D)*sc)*q - fp16(Dmin)*m per sub-block of 16 (see BlockQ2K). dst must not overlap src.
//
//kernelrt:api DequantizeQ2K
func dequantizeQ2K(rt *Runtime, dst []float32, src []BlockQ2K) error {
	if err := checkDequantize("DequantizeQ2K", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ2K, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ2K(sliceP(dst), sliceP(src)), nil)
}

// GemvQ2K computes y = W x for a rows x cols Q2_K matrix w (row-major, cols/256 super-blocks a
// row) and Q8_K activations x: per super-block (fp32(D)*d_x) * sum_i sc_i * sum_l q*q_x -
// (fp32(Dmin)*d_x) * sum_i m_i * Bsums[i], summed in float32. cols must be a positive multiple
// of 256. A NaN or ±Inf scale in a block makes its row NaN on every backend.
//
//kernelrt:api GemvQ2K
func gemvQ2K(rt *Runtime, y []float32, w []BlockQ2K, x []BlockQ8K, rows, cols int) error {
	if err := checkGemv("GemvQ2K", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ2K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ2K(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ2KBias is GemvQ2K followed by y[r] += bias[r]; a nil bias means none. y must not overlap
// w, x or bias.
//
//kernelrt:api GemvQ2KBias
func gemvQ2KBias(rt *Runtime, y []float32, w []BlockQ2K, x []BlockQ8K, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ2KBias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ2K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ2K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemmQ2K is the prefill GEMM of a Q2_K matrix with Q8_K activations (cols/256 blocks a token):
// y[t*rows+r] = the scalar GEMV of token t, bit-identical on every backend and variant.
//
//kernelrt:api GemmQ2K
func gemmQ2K(rt *Runtime, y []float32, w []BlockQ2K, x []BlockQ8K, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ2K", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ2K, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ2K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}
