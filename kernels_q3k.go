package kernelrt

import "unsafe"

// Q3_K, ggml's 3-bit K-quant (super-blocks of 256): its block type, quantizer, dequantizer, GEMV
// and prefill GEMM (csrc/q3k.c). Its matrices take Q8_K activations, as Q4_K's do, and every call
// checks its arguments as the Q4_K call of the same kind.

// BlockQ3K is byte-identical to ggml's block_q3_K: 16 sub-blocks of 16 weights. Sub-block s has
// the 6-bit scale sc = (Scales[s]&15 for s < 8, Scales[s-8]>>4 otherwise) | ((Scales[8+s%4]>>(2*(s/4)))&3)<<4.
// Element e (h = e/128, j = (e%128)/32, l = e%32) has the quant q = (Qs[32h+l]>>(2j))&3, minus 4
// where bit 4h+j of Hmask[l] is clear (-4..3), and value = (fp16(D)*(sc-32))*q. 110 bytes.
type BlockQ3K struct {
	Hmask  [32]uint8
	Qs     [64]uint8
	Scales [12]uint8
	D      uint16
}

var (
	_ [110 - unsafe.Sizeof(BlockQ3K{})]byte
	_ [unsafe.Sizeof(BlockQ3K{}) - 110]byte
)

// QuantizeQ3K quantizes src (a positive multiple of 256 floats) into len(src)/256 Q3_K blocks.
// Not ggml's byte stream (ggml's dequantizer is the compatibility target): per sub-block of 16 a
// least-squares scale over 8 trial mappings of its largest element, the super-block's D mapping
// the largest scale onto the code -32, each scale rounded to its 6-bit code and the quants
// re-fit (csrc/krt_q3k.h). A block holding NaN or ±Inf gets D = the fp16 NaN. dst must not
// overlap src.
//
//kernelrt:api QuantizeQ3K
func quantizeQ3K(rt *Runtime, dst []BlockQ3K, src []float32) error {
	if err := checkQuantize("QuantizeQ3K", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ3K, Shape{N: len(src), Tokens: 1}, argsQuantizeQ3K(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ3K expands src into len(src)*256 floats, as ggml's dequantize_row_q3_K:
// (fp16(D)*(sc-32))*q per sub-block of 16 (see BlockQ3K). dst must not overlap src.
//
//kernelrt:api DequantizeQ3K
func dequantizeQ3K(rt *Runtime, dst []float32, src []BlockQ3K) error {
	if err := checkDequantize("DequantizeQ3K", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ3K, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ3K(sliceP(dst), sliceP(src)), nil)
}

// GemvQ3K computes y = W x for a rows x cols Q3_K matrix w (row-major, cols/256 super-blocks a
// row) and Q8_K activations x: per super-block (fp32(D)*d_x) * sum_s (sc_s-32) * sum_l q*q_x,
// summed in float32. cols must be a positive multiple of 256. A NaN or ±Inf scale in a block
// makes its row NaN on every backend.
//
//kernelrt:api GemvQ3K
func gemvQ3K(rt *Runtime, y []float32, w []BlockQ3K, x []BlockQ8K, rows, cols int) error {
	if err := checkGemv("GemvQ3K", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ3K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ3K(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ3KBias is GemvQ3K followed by y[r] += bias[r]; a nil bias means none. y must not overlap
// w, x or bias.
//
//kernelrt:api GemvQ3KBias
func gemvQ3KBias(rt *Runtime, y []float32, w []BlockQ3K, x []BlockQ8K, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ3KBias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ3K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ3K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemmQ3K is the prefill GEMM of a Q3_K matrix with Q8_K activations (cols/256 blocks a token):
// y[t*rows+r] = the scalar GEMV of token t, bit-identical on every backend and variant.
//
//kernelrt:api GemmQ3K
func gemmQ3K(rt *Runtime, y []float32, w []BlockQ3K, x []BlockQ8K, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ3K", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ3K, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ3K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}
