package kernelrt

import "unsafe"

// The block types of Q4_0, Q4_1, Q5_1 and the K-quants (ggml's super-blocks of 256 weights),
// their quantizers, dequantizers, GEMVs and prefill GEMMs (csrc/kquant.c, gemv_k.c, gemm.c).
// Q4_0 and Q5_1 matrices take Q8_0 activations like Q8_0 and Q5_0; the K-quant matrices take
// Q8_K activations (QuantizeQ8K), and their cols must be a multiple of QKK.

// QKK is the number of weights in one K-quant super-block (Q4_K, Q5_K, Q6_K, Q8_K).
const QKK = 256

// BlockQ4_0 is byte-identical to ggml's block_q4_0: value[j] = fp16(D) * (q[j] - 8), where
// q[j] is the low nibble of Qs[j] for j < 16 and the high nibble of Qs[j-16] otherwise. 18 bytes.
type BlockQ4_0 struct {
	D  uint16
	Qs [16]uint8
}

// BlockQ4_1 is byte-identical to ggml's block_q4_1: value[j] = fp16(D) * q[j] + fp16(M), q[j]
// the nibbles of Qs as in BlockQ4_0 (0..15). 20 bytes.
type BlockQ4_1 struct {
	D, M uint16
	Qs   [16]uint8
}

// BlockQ5_1 is byte-identical to ggml's block_q5_1: value[j] = fp16(D) * q[j] + fp16(M), where
// q[j] (0..31) is the nibble of Qs as in BlockQ4_0 | bit j of Qh (little-endian) << 4. 24 bytes.
type BlockQ5_1 struct {
	D, M uint16
	Qh   [4]uint8
	Qs   [16]uint8
}

// BlockQ4K is byte-identical to ggml's block_q4_K: 8 sub-blocks of 32 weights, sub-block s
// having a 6-bit scale sc and min m packed in Scales (s < 4: sc = Scales[s] & 63, m =
// Scales[s+4] & 63; s >= 4: sc = Scales[s+4]&15 | Scales[s-4]>>6<<4, m = Scales[s+4]>>4 |
// Scales[s]>>6<<4). Element l of sub-block s is q = the low nibble of Qs[32*(s/2)+l] for even s,
// the high nibble for odd s, and value = fp16(D)*sc*q - fp16(Dmin)*m. 144 bytes.
type BlockQ4K struct {
	D, Dmin uint16
	Scales  [12]uint8
	Qs      [128]uint8
}

// BlockQ5K is byte-identical to ggml's block_q5_K: BlockQ4K's layout plus a fifth bit per
// weight, bit s of Qh[l] for element l of sub-block s, so q is 0..31 and value =
// fp16(D)*sc*q - fp16(Dmin)*m. 176 bytes.
type BlockQ5K struct {
	D, Dmin uint16
	Scales  [12]uint8
	Qh      [32]uint8
	Qs      [128]uint8
}

// BlockQ6K is byte-identical to ggml's block_q6_K: 16 sub-blocks of 16 weights with int8 scales,
// value[e] = fp16(D) * Scales[e/16] * (q[e] - 32), q 6-bit. For half h (elements 128h..128h+127),
// k = 0..3 and l < 32, element 128h+32k+l takes its low 4 bits from Ql[64h+l+32(k&1)] (the low
// nibble for k < 2, the high one otherwise) and its top 2 bits from Qh[32h+l] >> 2k. 210 bytes.
type BlockQ6K struct {
	Ql     [128]uint8
	Qh     [64]uint8
	Scales [16]int8
	D      uint16
}

// BlockQ8K is byte-identical to ggml's block_q8_K, the activations of the K-quant GEMV and
// GEMM: value[j] = D * Qs[j] (D is float32, not fp16), and Bsums[i] is the sum of
// Qs[16i..16i+15], which the kernels use for the min terms. 292 bytes.
type BlockQ8K struct {
	D     float32
	Qs    [256]int8
	Bsums [16]int16
}

// The Go block types must be the C structs byte for byte (kernels_quant_test.go checks
// unsafe.Sizeof against csrc/kernelrt.h's sizes too).
var (
	_ [18 - unsafe.Sizeof(BlockQ4_0{})]byte
	_ [unsafe.Sizeof(BlockQ4_0{}) - 18]byte
	_ [292 - unsafe.Sizeof(BlockQ8K{})]byte
	_ [unsafe.Sizeof(BlockQ8K{}) - 292]byte
)

// ---- quantization ----
//
// Poisoning, as for Q8_0: a block (32 values, 256 for the K types) holding any NaN or ±Inf gets
// the NaN scale 0x7e00 (Q8_K: the float32 quiet NaN) and quants encoding zero, so everything it
// dequantizes to and every dot product it enters is NaN (ggml leaves this case undefined).

// QuantizeQ4_0 quantizes src (a positive multiple of 32 floats) into len(src)/32 Q4_0 blocks,
// byte for byte like ggml's quantize_row_q4_0_ref: m = the element of largest magnitude (sign
// kept, first on ties), d = m/-8 stored as fp16, q[j] = min(15, trunc(x[j]/d + 8.5)). A poisoned
// block has nibbles 8. dst must not overlap src.
//
//kernelrt:api QuantizeQ4_0
func quantizeQ4_0(rt *Runtime, dst []BlockQ4_0, src []float32) error {
	if err := checkQuantize("QuantizeQ4_0", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ4_0, Shape{N: len(src), Tokens: 1}, argsQuantizeQ4_0(sliceP(dst), sliceP(src)), nil)
}

// QuantizeQ4_1 quantizes src (a positive multiple of 32 floats) into len(src)/32 Q4_1 blocks,
// byte for byte like ggml's quantize_row_q4_1_ref: m = min, d = (max-min)/15, both stored as
// fp16, q[j] = min(15, trunc((x[j]-min)/d + 0.5)). dst must not overlap src.
//
//kernelrt:api QuantizeQ4_1
func quantizeQ4_1(rt *Runtime, dst []BlockQ4_1, src []float32) error {
	if err := checkQuantize("QuantizeQ4_1", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ4_1, Shape{N: len(src), Tokens: 1}, argsQuantizeQ4_1(sliceP(dst), sliceP(src)), nil)
}

// QuantizeQ5_1 quantizes src (a positive multiple of 32 floats) into len(src)/32 Q5_1 blocks,
// byte for byte like ggml's quantize_row_q5_1_ref: m = min, d = (max-min)/31, both stored as
// fp16, q[j] = trunc((x[j]-min)/d + 0.5). dst must not overlap src.
//
//kernelrt:api QuantizeQ5_1
func quantizeQ5_1(rt *Runtime, dst []BlockQ5_1, src []float32) error {
	if err := checkQuantize("QuantizeQ5_1", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ5_1, Shape{N: len(src), Tokens: 1}, argsQuantizeQ5_1(sliceP(dst), sliceP(src)), nil)
}

// QuantizeQ4K quantizes src (a positive multiple of 256 floats) into len(src)/256 Q4_K
// super-blocks, byte for byte like ggml's quantize_row_q4_K_ref (no importance matrix, as
// llama-quantize without --imatrix): per sub-block of 32 a weighted least-squares scale and min
// (make_qkx2_quants), both coded in 6 bits against the super-block's fp16 D and Dmin. A weight
// quantizer for writing model files: about 100x slower per value than QuantizeQ8K. dst must
// not overlap src.
//
//kernelrt:api QuantizeQ4K
func quantizeQ4K(rt *Runtime, dst []BlockQ4K, src []float32) error {
	if err := checkQuantize("QuantizeQ4K", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ4K, Shape{N: len(src), Tokens: 1}, argsQuantizeQ4K(sliceP(dst), sliceP(src)), nil)
}

// QuantizeQ5K is QuantizeQ4K for Q5_K (5-bit quants), byte for byte like ggml's
// quantize_row_q5_K_ref. dst must not overlap src.
//
//kernelrt:api QuantizeQ5K
func quantizeQ5K(rt *Runtime, dst []BlockQ5K, src []float32) error {
	if err := checkQuantize("QuantizeQ5K", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ5K, Shape{N: len(src), Tokens: 1}, argsQuantizeQ5K(sliceP(dst), sliceP(src)), nil)
}

// QuantizeQ6K quantizes src (a positive multiple of 256 floats) into len(src)/256 Q6_K
// super-blocks, byte for byte like ggml's quantize_row_q6_K_ref: per sub-block of 16 a scale
// from make_qx_quants, coded as int8 against the super-block's fp16 D. dst must not overlap src.
//
//kernelrt:api QuantizeQ6K
func quantizeQ6K(rt *Runtime, dst []BlockQ6K, src []float32) error {
	if err := checkQuantize("QuantizeQ6K", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ6K, Shape{N: len(src), Tokens: 1}, argsQuantizeQ6K(sliceP(dst), sliceP(src)), nil)
}

// QuantizeQ8K quantizes activations src (a positive multiple of 256 floats) into len(src)/256
// Q8_K super-blocks for the K-quant GEMV and GEMM, byte for byte like ggml's
// quantize_row_q8_K_ref: m = the element of largest magnitude (sign kept), iscale = -127/m,
// Qs[j] = min(127, round-half-even(iscale*x[j])), D = 1/iscale, and the 16 Bsums; an all-zero
// block gets D = 0 and zero sums. dst must not overlap src.
//
//kernelrt:api QuantizeQ8K
func quantizeQ8K(rt *Runtime, dst []BlockQ8K, src []float32) error {
	if err := checkQuantize("QuantizeQ8K", dst, src); err != nil {
		return err
	}
	return rt.run(OpQuantizeQ8K, Shape{N: len(src), Tokens: 1}, argsQuantizeQ8K(sliceP(dst), sliceP(src)), nil)
}

// ---- dequantization: ggml's dequantize_row_<t>, every product and sum rounded to float32 ----

// DequantizeQ4_0 expands src into len(src)*32 floats: dst[32b+j] = fp16(d_b) * (q_b[j] - 8).
// dst must not overlap src.
//
//kernelrt:api DequantizeQ4_0
func dequantizeQ4_0(rt *Runtime, dst []float32, src []BlockQ4_0) error {
	if err := checkDequantize("DequantizeQ4_0", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ4_0, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ4_0(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ4_1 expands src into len(src)*32 floats: dst[32b+j] = q_b[j]*fp16(d_b) + fp16(m_b).
// dst must not overlap src.
//
//kernelrt:api DequantizeQ4_1
func dequantizeQ4_1(rt *Runtime, dst []float32, src []BlockQ4_1) error {
	if err := checkDequantize("DequantizeQ4_1", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ4_1, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ4_1(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ5_1 expands src into len(src)*32 floats: dst[32b+j] = q_b[j]*fp16(d_b) + fp16(m_b).
// dst must not overlap src.
//
//kernelrt:api DequantizeQ5_1
func dequantizeQ5_1(rt *Runtime, dst []float32, src []BlockQ5_1) error {
	if err := checkDequantize("DequantizeQ5_1", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ5_1, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ5_1(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ4K expands src into len(src)*256 floats: (fp16(D)*sc)*q - fp16(Dmin)*m per
// sub-block of 32 (see BlockQ4K). dst must not overlap src.
//
//kernelrt:api DequantizeQ4K
func dequantizeQ4K(rt *Runtime, dst []float32, src []BlockQ4K) error {
	if err := checkDequantize("DequantizeQ4K", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ4K, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ4K(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ5K expands src into len(src)*256 floats: (fp16(D)*sc)*q - fp16(Dmin)*m per
// sub-block of 32 (see BlockQ5K). dst must not overlap src.
//
//kernelrt:api DequantizeQ5K
func dequantizeQ5K(rt *Runtime, dst []float32, src []BlockQ5K) error {
	if err := checkDequantize("DequantizeQ5K", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ5K, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ5K(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ6K expands src into len(src)*256 floats: (fp16(D)*Scales[i])*(q-32) per sub-block
// of 16 (see BlockQ6K). dst must not overlap src.
//
//kernelrt:api DequantizeQ6K
func dequantizeQ6K(rt *Runtime, dst []float32, src []BlockQ6K) error {
	if err := checkDequantize("DequantizeQ6K", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ6K, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ6K(sliceP(dst), sliceP(src)), nil)
}

// DequantizeQ8K expands src into len(src)*256 floats: dst[256b+j] = D_b * Qs_b[j]. dst must not
// overlap src.
//
//kernelrt:api DequantizeQ8K
func dequantizeQ8K(rt *Runtime, dst []float32, src []BlockQ8K) error {
	if err := checkDequantize("DequantizeQ8K", dst, src); err != nil {
		return err
	}
	return rt.run(OpDequantizeQ8K, Shape{N: len(dst), Tokens: 1}, argsDequantizeQ8K(sliceP(dst), sliceP(src)), nil)
}

// ---- GEMV (decode) ----
//
// Per row, the blocks are summed in order in float32 as csrc/krt_kdot.h defines; the SIMD
// variants split the integer sums and accumulate lane-wise with FMA, so they agree with the
// scalar definition to a few ulp of the row's magnitude. Activations must be what the
// quantizers write: Q8_0 quants in -127..127 (see GemvQ8_0), Q8_K quants in -127..127 with
// Bsums the sums of their 16-quant groups (the kernels take the min terms from Bsums); checking
// would cost a pass over x per call, so neither is checked. y must not overlap w, x or bias.

// GemvQ4_0 computes y = W x for a rows x cols Q4_0 matrix w (row-major, cols/32 blocks a row)
// and Q8_0 activations x (cols/32 blocks): y[r] = sum_b (fp32(d_w)*fp32(d_x)) * sum_j
// (q_w[j]-8)*q_x[j], summed in float32. cols must be a positive multiple of 32.
//
//kernelrt:api GemvQ4_0
func gemvQ4_0(rt *Runtime, y []float32, w []BlockQ4_0, x []BlockQ8_0, rows, cols int) error {
	if err := checkGemv("GemvQ4_0", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ4_0, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ4_0(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ4_0Bias is GemvQ4_0 followed by y[r] += bias[r]; a nil bias means none. y must not
// overlap bias.
//
//kernelrt:api GemvQ4_0Bias
func gemvQ4_0Bias(rt *Runtime, y []float32, w []BlockQ4_0, x []BlockQ8_0, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ4_0Bias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ4_0, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ4_0(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemvQ5_1 is GemvQ4_0 with Q5_1 weights: per block (fp32(d_w)*fp32(d_x)) * sum_j q_w[j]*q_x[j]
// + fp32(m_w) * (fp32(d_x) * sum_j q_x[j]). (ggml pairs Q5_1 with Q8_1 activations, whose stored
// sum is rounded to fp16; the min term here uses the exact sum.)
//
//kernelrt:api GemvQ5_1
func gemvQ5_1(rt *Runtime, y []float32, w []BlockQ5_1, x []BlockQ8_0, rows, cols int) error {
	if err := checkGemv("GemvQ5_1", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ5_1, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ5_1(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ5_1Bias is GemvQ5_1 followed by y[r] += bias[r]; a nil bias means none. y must not
// overlap bias.
//
//kernelrt:api GemvQ5_1Bias
func gemvQ5_1Bias(rt *Runtime, y []float32, w []BlockQ5_1, x []BlockQ8_0, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ5_1Bias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ5_1, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ5_1(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemvQ4K computes y = W x for a rows x cols Q4_K matrix w (row-major, cols/256 super-blocks a
// row) and Q8_K activations x (cols/256 super-blocks, from QuantizeQ8K): per super-block
// (fp32(D)*d_x) * sum_s sc_s * sum_l q*q_x - (fp32(Dmin)*d_x) * sum_s m_s * (Bsums of s), summed
// in float32. cols must be a positive multiple of 256.
//
//kernelrt:api GemvQ4K
func gemvQ4K(rt *Runtime, y []float32, w []BlockQ4K, x []BlockQ8K, rows, cols int) error {
	if err := checkGemv("GemvQ4K", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ4K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ4K(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ4KBias is GemvQ4K followed by y[r] += bias[r]; a nil bias means none. y must not overlap
// bias.
//
//kernelrt:api GemvQ4KBias
func gemvQ4KBias(rt *Runtime, y []float32, w []BlockQ4K, x []BlockQ8K, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ4KBias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ4K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ4K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemvQ5K is GemvQ4K with Q5_K weights (q in 0..31).
//
//kernelrt:api GemvQ5K
func gemvQ5K(rt *Runtime, y []float32, w []BlockQ5K, x []BlockQ8K, rows, cols int) error {
	if err := checkGemv("GemvQ5K", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ5K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ5K(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ5KBias is GemvQ5K followed by y[r] += bias[r]; a nil bias means none. y must not overlap
// bias.
//
//kernelrt:api GemvQ5KBias
func gemvQ5KBias(rt *Runtime, y []float32, w []BlockQ5K, x []BlockQ8K, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ5KBias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ5K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ5K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// GemvQ6K computes y = W x for a rows x cols Q6_K matrix w (cols/256 super-blocks a row) and
// Q8_K activations x: per super-block (fp32(D)*d_x) * sum_i Scales[i] * sum_l (q-32)*q_x, summed
// in float32. cols must be a positive multiple of 256.
//
//kernelrt:api GemvQ6K
func gemvQ6K(rt *Runtime, y []float32, w []BlockQ6K, x []BlockQ8K, rows, cols int) error {
	if err := checkGemv("GemvQ6K", y, w, x, nil, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ6K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ6K(sliceP(y), sliceP(w), sliceP(x), nil, cols), nil)
}

// GemvQ6KBias is GemvQ6K followed by y[r] += bias[r]; a nil bias means none. y must not overlap
// bias.
//
//kernelrt:api GemvQ6KBias
func gemvQ6KBias(rt *Runtime, y []float32, w []BlockQ6K, x []BlockQ8K, bias []float32, rows, cols int) error {
	if err := checkGemv("GemvQ6KBias", y, w, x, bias, rows, cols); err != nil {
		return err
	}
	return rt.run(OpGemvQ6K, Shape{Rows: rows, Cols: cols, Tokens: 1}, argsGemvQ6K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), cols), nil)
}

// ---- GEMM (prefill) ----
//
// As GemmQ8_0: y[t*rows+r] for tokens t of activations x (token t's blocks at x[t*cols/qk:]),
// each weight block repacked once per block of tokens. Every variant follows csrc/krt_kdot.h's
// operation order exactly, so every backend and variant returns the same bits, equal to the
// scalar GEMV of each token. A nil bias means none. y must not overlap w, x or bias.

// GemmQ4_0 is the prefill GEMM of a Q4_0 matrix with Q8_0 activations (cols/32 blocks a token).
//
//kernelrt:api GemmQ4_0
func gemmQ4_0(rt *Runtime, y []float32, w []BlockQ4_0, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ4_0", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ4_0, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ4_0(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}

// GemmQ5_1 is the prefill GEMM of a Q5_1 matrix with Q8_0 activations (cols/32 blocks a token).
//
//kernelrt:api GemmQ5_1
func gemmQ5_1(rt *Runtime, y []float32, w []BlockQ5_1, x []BlockQ8_0, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ5_1", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ5_1, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ5_1(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}

// GemmQ4K is the prefill GEMM of a Q4_K matrix with Q8_K activations (cols/256 super-blocks a
// token); cols must be a positive multiple of 256.
//
//kernelrt:api GemmQ4K
func gemmQ4K(rt *Runtime, y []float32, w []BlockQ4K, x []BlockQ8K, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ4K", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ4K, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ4K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}

// GemmQ5K is the prefill GEMM of a Q5_K matrix with Q8_K activations (cols/256 super-blocks a
// token); cols must be a positive multiple of 256.
//
//kernelrt:api GemmQ5K
func gemmQ5K(rt *Runtime, y []float32, w []BlockQ5K, x []BlockQ8K, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ5K", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ5K, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ5K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}

// GemmQ6K is the prefill GEMM of a Q6_K matrix with Q8_K activations (cols/256 super-blocks a
// token); cols must be a positive multiple of 256.
//
//kernelrt:api GemmQ6K
func gemmQ6K(rt *Runtime, y []float32, w []BlockQ6K, x []BlockQ8K, bias []float32, rows, cols, tokens int) error {
	if err := checkGemm("GemmQ6K", y, w, x, bias, rows, cols, tokens); err != nil {
		return err
	}
	return rt.run(OpGemmQ6K, Shape{Rows: rows, Cols: cols, Tokens: tokens}, argsGemmQ6K(sliceP(y), sliceP(w), sliceP(x), sliceP(bias), rows, cols, tokens), nil)
}

// ---- what the shared checks know about each block type ----

// block is any quantized block type; actBlock the activation types (Q8_0 for blocks of 32,
// Q8_K for super-blocks of 256).
type (
	block interface {
		BlockQ8_0 | BlockQ5_0 | BlockQ4_0 | BlockQ4_1 | BlockQ5_1 | BlockQ4K | BlockQ5K | BlockQ6K | BlockQ8K |
			BlockIQ4_NL | BlockQ2K | BlockIQ4_XS | BlockQ3K
	}
	actBlock interface{ BlockQ8_0 | BlockQ8K }
)

// blockWeights is the number of values one block of B holds: QKK for the K types, else QK. The
// switch is on a nil pointer type, so it costs no allocation.
func blockWeights[B block]() int {
	switch any((*B)(nil)).(type) {
	case *BlockQ4K, *BlockQ5K, *BlockQ6K, *BlockQ8K, *BlockQ2K, *BlockIQ4_XS, *BlockQ3K:
		return QKK
	}
	return QK
}

// formulas are the length formulas the check messages print for one block size. They are
// constants: building them per call would allocate on the hot path.
type formulas struct {
	srcDiv, srcMul, w, xGemv, xGemm, scratch string
}

var (
	formulas32  = formulas{"len(src)/32", "len(src)*32", "rows*cols/32", "cols/32", "tokens*cols/32", "cols/32"}
	formulas256 = formulas{"len(src)/256", "len(src)*256", "rows*cols/256", "cols/256", "tokens*cols/256", "cols/256"}
)

// formulasFor returns the formulas of blocks of qk values.
func formulasFor(qk int) *formulas {
	if qk == QKK {
		return &formulas256
	}
	return &formulas32
}

// blockLineGranule is the fewest blocks of blockBytes bytes that fill whole 64-byte lines:
// 64/gcd(blockBytes, 64) (Q8_0's 34 bytes: 32 blocks = 17 lines; Q4_K's 144: 4 blocks = 9).
func blockLineGranule(blockBytes int) int {
	a, b := blockBytes, 64
	for b != 0 {
		a, b = b, a%b
	}
	if a <= 0 {
		return 1
	}
	return 64 / a
}
