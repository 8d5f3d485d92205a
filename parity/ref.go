package parity

// The independent float64 references. Nothing here calls code under test: fp16 is decoded
// and encoded by hand, blocks are dequantized here, the quantizers follow ggml's reference C
// (quantize_row_q8_0_ref, quantize_row_q5_0_ref) statement by statement in float32.

import (
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt"
)

// f16 decodes an IEEE half to float64 (exact).
func f16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e := int(h>>10) & 0x1f
	m := int(h & 0x3ff)
	switch e {
	case 0:
		return sign * math.Ldexp(float64(m), -24)
	case 31:
		if m == 0 {
			return math.Inf(int(sign))
		}
		return math.NaN()
	}
	return sign * math.Ldexp(float64(1024+m), e-25)
}

// toF16 encodes f as the nearest IEEE half, ties to even (F16C's _cvtss_sh(x, 0) and ggml's
// scalar GGML_FP32_TO_FP16): from 65520 up it is Inf, NaN gives the quiet NaN 0x7e00.
func toF16(f float32) uint16 {
	a := math.Abs(float64(f))
	var sign uint16
	if math.Signbit(float64(f)) {
		sign = 0x8000
	}
	switch {
	case a != a:
		return 0x7e00
	case a >= 65520:
		return sign | 0x7c00
	case a < 0x1p-14: // subnormal half (or zero): units of 2^-24; 1024 carries into exp 1
		return sign | uint16(math.RoundToEven(a*0x1p24))
	}
	_, ex := math.Frexp(a) // a = fr * 2^ex, fr in [0.5, 1)
	e := ex - 1            // a in [2^e, 2^(e+1))
	m := math.RoundToEven(math.Ldexp(a, 10-e))
	return sign | uint16((e+15)<<10+int(m)-1024) // m = 2048 carries into the exponent
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// refQuantQ8 is ggml's quantize_row_q8_0_ref in float32, with the edge rules csrc/krt_quant.h
// adds: a block holding NaN or +-Inf is poisoned (d = fp16 NaN 0x7e00, quants 0), 1/d
// overflowing to Inf counts as 0, quants are clamped to +-127.
func refQuantQ8(dst []kernelrt.BlockQ8_0, src []float32) {
	for b := range dst {
		x := src[b*32 : b*32+32]
		var amax float32
		poisoned := false
		for _, v := range x {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				poisoned = true
			}
			if a := abs32(v); a > amax {
				amax = a
			}
		}
		if poisoned {
			dst[b] = kernelrt.BlockQ8_0{D: 0x7e00}
			continue
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		if math.IsInf(float64(id), 0) {
			id = 0
		}
		dst[b].D = toF16(d)
		for j, v := range x {
			x0 := float32(v * id)
			dst[b].Qs[j] = int8(max(-127, min(127, math.Round(float64(x0))))) // roundf: half away from zero
		}
	}
}

// refQuantQ5 is ggml's quantize_row_q5_0_ref in float32, with krt_quant.h's poisoned blocks
// (NaN or +-Inf among the inputs: d = fp16 NaN 0x7e00 and every q = 16, i.e. nibbles 0 and
// every qh bit set).
func refQuantQ5(dst []kernelrt.BlockQ5_0, src []float32) {
	for b := range dst {
		x := src[b*32 : b*32+32]
		poisoned := false
		for _, v := range x {
			poisoned = poisoned || math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
		}
		if poisoned {
			dst[b] = kernelrt.BlockQ5_0{D: 0x7e00, Qh: [4]uint8{0xff, 0xff, 0xff, 0xff}}
			continue
		}
		var amax, mx float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax, mx = a, v
			}
		}
		d := mx / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		dst[b].D = toF16(d)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := float32(x[j] * id)
			x1 := float32(x[16+j] * id)
			xi0 := min(31, int(int8(float32(x0+16.5)))) // (int8_t) truncates
			xi1 := min(31, int(int8(float32(x1+16.5))))
			dst[b].Qs[j] = uint8(xi0&0xf) | uint8(xi1&0xf)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		dst[b].Qh = [4]uint8{uint8(qh), uint8(qh >> 8), uint8(qh >> 16), uint8(qh >> 24)}
	}
}

// q5 is quant j (0..31) of a Q5_0 block: quantQ5_0 (the one Q5_0 decoder) before centring.
func q5(b *kernelrt.BlockQ5_0, j int) int { return quantQ5_0(bytesOf(unsafe.Slice(b, 1)), j) + 16 }

// stepCheckQ8 measures the half-step rule for the Q8_0 blocks q of src: the worst over all
// elements of |deq - x| / bound, bound = d/2 (a quant is x/d rounded) + |d16 - d|*|q| (d is
// stored as fp16) + a float32 rounding allowance. <= 1 passes.
func stepCheckQ8(q []kernelrt.BlockQ8_0, src []float32) float64 {
	worst := 0.0
	for b := range q {
		x := src[b*32 : b*32+32]
		amax := 0.0
		for _, v := range x {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		d := amax / 127
		d16 := f16(q[b].D)
		for j, v := range x {
			qj := float64(q[b].Qs[j])
			err := math.Abs(d16*qj - float64(v))
			bound := 0.5*d*(1+1e-6) + math.Abs(d16-d)*math.Abs(qj)
			worst = math.Max(worst, ratio(err, bound))
		}
	}
	return worst
}

// ratio is err/bound, with 0/0 = 0 and x/0 = +Inf.
func ratio(err, bound float64) float64 {
	if err != err {
		return math.Inf(1)
	}
	if err == 0 {
		return 0
	}
	if bound == 0 {
		return math.Inf(1)
	}
	return err / bound
}

// relErr is |y - ref| / max(scale, floor), NaN anywhere giving +Inf.
func relErr(y float32, ref, scale, floor float64) float64 {
	if y != y || ref != ref {
		if y != y && ref != ref {
			return 0
		}
		return math.Inf(1)
	}
	return ratio(math.Abs(float64(y)-ref), math.Max(scale, floor))
}

// ---- GEMV / GEMM ----

// refActs quantizes activations as typ's GEMV takes them: Q8_0 (refQuantQ8) or Q8_K (refQuantQ8K).
func refActs(typ *qtype, xf []float32) acts {
	if typ.k {
		x := make([]kernelrt.BlockQ8K, len(xf)/256)
		refQuantQ8K(x, xf)
		return acts{k: x}
	}
	x := make([]kernelrt.BlockQ8_0, len(xf)/32)
	refQuantQ8(x, xf)
	return acts{q8: x}
}

// gemvRef computes, for tokens rows of quantized activations x (cols values each), the float64
// ref[t*rows+r] = sum_j w[r,j]*x[t,j] and scale = sum_j |w[r,j]*x[t,j]|, with the rows x cols
// weights w (blocks of typ) and x decoded here. Every w and x value is exact in float64; only
// the products and the sum round (about 1e-16 relative to scale).
func gemvRef(ref, scale []float64, typ *qtype, w []byte, rows, cols int, x acts, tokens int) {
	xv := make([]float64, tokens*cols)
	actValues(x, xv)
	wr := make([]float64, cols)
	rowBytes := cols / typ.qk * typ.size
	for r := 0; r < rows; r++ {
		typ.decodeAll(w[r*rowBytes:(r+1)*rowBytes], wr)
		for t := 0; t < tokens; t++ {
			xt := xv[t*cols : (t+1)*cols]
			var s, a float64
			for j, wv := range wr {
				p := wv * xt[j]
				s += p
				a += math.Abs(p)
			}
			ref[t*rows+r], scale[t*rows+r] = s, a
		}
	}
}

// worstVs is max_i relErr(y[i], ref[i], scale[i], floor).
func worstVs(y []float32, ref, scale []float64, floor float64) float64 {
	worst := 0.0
	for i, v := range y {
		worst = math.Max(worst, relErr(v, ref[i], scale[i], floor))
	}
	return worst
}
