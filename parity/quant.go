package parity

import (
	"fmt"
	"math"

	"github.com/kernelrt/kernelrt"
)

// The quantizer cases. Q8_0, Q5_0, Q4_0, Q4_1, Q5_1 and Q8_K are simple enough to follow
// ggml's reference C statement by statement here (in float32, every product rounded), so their
// output must equal these bytes, then meet a half-step bound. The K-quant weight quantizers
// (Q4_K, Q5_K, Q6_K: iterative least-squares fits) are proven byte-identical to ggml by the C
// tests (csrc/tests/test_kquant.c embeds ggml's checksums) and every variant equal to the
// serial one by the suite; here they must meet a quality bound. IQ4_NL's, IQ4_XS's, Q2_K's and
// Q3_K's quantizers are ours (csrc/krt_iquant.h, csrc/krt_iq4xs.h, csrc/krt_q2k.h, csrc/krt_q3k.h): every variant equal to the serial one, and a
// quality bound.

// cvtt is x86's cvttss2si, the way ggml's x86 build turns a float into int8/uint8 before
// keeping the low byte: truncation, INT32_MIN for NaN or out of range (Go leaves out-of-range
// conversions to the implementation, so it is spelt out).
func cvtt(v float32) int32 {
	if v >= -2147483648 && v < 2147483648 {
		return int32(v)
	}
	return math.MinInt32
}

// refQuantQ4_0 is ggml's quantize_row_q4_0_ref in float32.
func refQuantQ4_0(dst []kernelrt.BlockQ4_0, src []float32) {
	for b := range dst {
		x := src[b*32 : b*32+32]
		var amax, mx float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax, mx = a, v
			}
		}
		d := mx / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		dst[b].D = toF16(d)
		for j := 0; j < 16; j++ {
			xi0 := min(15, int32(int8(cvtt(float32(x[j]*id)+8.5))))
			xi1 := min(15, int32(int8(cvtt(float32(x[16+j]*id)+8.5))))
			dst[b].Qs[j] = uint8(xi0) | uint8(xi1<<4)
		}
	}
}

// minMax is ggml's sequential scan for Q4_1 / Q5_1.
func minMax(x []float32) (float32, float32) {
	mn, mx := float32(math.MaxFloat32), float32(-math.MaxFloat32)
	for _, v := range x {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	return mn, mx
}

// refQuantQ4_1 is ggml's quantize_row_q4_1_ref in float32.
func refQuantQ4_1(dst []kernelrt.BlockQ4_1, src []float32) {
	for b := range dst {
		x := src[b*32 : b*32+32]
		mn, mx := minMax(x)
		d := (mx - mn) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		dst[b].D, dst[b].M = toF16(d), toF16(mn)
		for j := 0; j < 16; j++ {
			xi0 := min(15, int32(int8(cvtt(float32((x[j]-mn)*id)+0.5))))
			xi1 := min(15, int32(int8(cvtt(float32((x[16+j]-mn)*id)+0.5))))
			dst[b].Qs[j] = uint8(xi0) | uint8(xi1<<4)
		}
	}
}

// refQuantQ5_1 is ggml's quantize_row_q5_1_ref in float32.
func refQuantQ5_1(dst []kernelrt.BlockQ5_1, src []float32) {
	for b := range dst {
		x := src[b*32 : b*32+32]
		mn, mx := minMax(x)
		d := (mx - mn) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		dst[b].D, dst[b].M = toF16(d), toF16(mn)
		var qh uint32
		for j := 0; j < 16; j++ {
			xi0 := uint32(uint8(cvtt(float32((x[j]-mn)*id) + 0.5)))
			xi1 := uint32(uint8(cvtt(float32((x[16+j]-mn)*id) + 0.5)))
			dst[b].Qs[j] = uint8(xi0&15 | (xi1&15)<<4)
			qh |= (xi0 & 0x10) >> 4 << j
			qh |= (xi1 & 0x10) >> 4 << (j + 16)
		}
		dst[b].Qh = [4]uint8{uint8(qh), uint8(qh >> 8), uint8(qh >> 16), uint8(qh >> 24)}
	}
}

// refQuantQ8K is ggml's quantize_row_q8_K_ref in float32 (nearest_int rounds half to even),
// with zero bsums for an all-zero block, which ggml leaves unwritten.
func refQuantQ8K(dst []kernelrt.BlockQ8K, src []float32) {
	for b := range dst {
		x := src[b*256 : b*256+256]
		var amax, mx float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax, mx = a, v
			}
		}
		dst[b] = kernelrt.BlockQ8K{}
		if amax == 0 {
			continue
		}
		iscale := -127 / mx
		for j, v := range x {
			q := math.RoundToEven(float64(float32(iscale * v)))
			dst[b].Qs[j] = int8(min(127, q))
		}
		for i := 0; i < 16; i++ {
			s := 0
			for _, q := range dst[b].Qs[16*i : 16*i+16] {
				s += int(q)
			}
			dst[b].Bsums[i] = int16(s)
		}
		dst[b].D = 1 / iscale
	}
}

// ---- quality bounds ----

// stepCheckSym is the half-step rule of the symmetric types (Q5_0: half = 16, Q4_0: half = 8):
// d = m/-half with m the signed element of largest magnitude, quant x/d rounded half up and
// clamped to half-1, so an element near -m (x/d above half-0.5) is allowed its distance to
// half-1 steps instead of half a step. bound = steps*|d| + |d16 - d|*|q| (d is stored as fp16)
// + a float32 rounding allowance; <= 1 passes.
func stepCheckSym(typ *qtype, half float64, quant func(blk []byte, j int) int, out []byte, src []float32) float64 {
	worst := 0.0
	sv, ov := make([]float64, 32), make([]float64, 32)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		blk := out[b*typ.size : (b+1)*typ.size]
		typ.decode(blk, sv, ov)
		d16 := f16(le16(blk))
		amax, m := 0.0, 0.0
		for _, v := range x {
			if a := math.Abs(float64(v)); amax < a {
				amax, m = a, float64(v)
			}
		}
		d := m / -half
		for j, v := range x {
			q := float64(quant(blk, j))
			err := math.Abs(sv[j] - float64(v))
			steps := 0.5
			if d != 0 {
				if t := float64(v) / d; t > half-0.5 {
					steps = t - (half - 1)
				}
			}
			bound := steps*math.Abs(d)*(1+1e-6) + math.Abs(d16-d)*math.Abs(q)
			worst = math.Max(worst, ratio(err, bound))
		}
	}
	return worst
}

// stepCheckMin is the half-step rule of Q4_1 / Q5_1: d = (max-min)/nmax, q = (x-min)/d rounded
// half up, so |deq - x| <= d/2 + |d16 - d|*q + |m16 - min| (d and min are stored as fp16) + a
// float32 rounding allowance; <= 1 passes.
func stepCheckMin(typ *qtype, nmax float64, quant func(blk []byte, j int) int, out []byte, src []float32) float64 {
	worst := 0.0
	sv, ov := make([]float64, 32), make([]float64, 32)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		blk := out[b*typ.size : (b+1)*typ.size]
		typ.decode(blk, sv, ov)
		d16, m16 := f16(le16(blk)), f16(le16(blk[2:]))
		mn, mx := minMax(x)
		d := (float64(mx) - float64(mn)) / nmax
		for j, v := range x {
			q := float64(quant(blk, j))
			err := math.Abs(sv[j] + ov[j] - float64(v))
			bound := 0.5*d*(1+1e-6) + math.Abs(d16-d)*q + math.Abs(m16-float64(mn)) + 1e-7*math.Abs(float64(v))
			worst = math.Max(worst, ratio(err, bound))
		}
	}
	return worst
}

// stepCheckQ8K is the half-step rule of Q8_K: q = iscale*x rounded to nearest, d = 1/iscale,
// so |d*q - x| <= |d|/2 (+ float32 rounding of iscale*x and of d); <= 1 passes.
func stepCheckQ8K(out []byte, src []float32) float64 {
	worst := 0.0
	sv, ov := make([]float64, 256), make([]float64, 256)
	for b := 0; b < len(src)/256; b++ {
		typeQ8K.decode(out[b*292:(b+1)*292], sv, ov)
		d := math.Abs(float64(blocks[kernelrt.BlockQ8K](out[b*292 : (b+1)*292])[0].D))
		for j, v := range src[b*256 : b*256+256] {
			err := math.Abs(sv[j] - float64(v))
			worst = math.Max(worst, ratio(err, 0.5*d*(1+1e-5)+1e-6*math.Abs(float64(v))))
		}
	}
	return worst
}

// kQuality is the K-quant weight quantizers' bound: per super-block, the worst |deq - x| in
// units of the super-block's range (max - min, zero included as the quantizers' mins are) over
// 2*nmax, i.e. half a step of a code spanning the whole super-block. The least-squares fits may
// clip an outlier and the 6-bit scale and min codes cost precision, so this exceeds 1: the worst
// of 32768 super-blocks of uniform, Gaussian and heavy-tailed inputs measured 1.92 (Q4_K), 2.25
// (Q5_K), 1.64 (Q6_K); Q2_K's and Q3_K's quantizers (ours, nmax 3 and 7: Q3_K's -4..3 span
// 7 steps) measured 1.47 and 1.66 on this suite's inputs;
// Tol is 3. One wrong quant, scale or min bit costs a step of its sub-block or more, 2*nmax
// (6..126) of these units for a full-range sub-block.
func kQuality(typ *qtype, nmax float64, out []byte, src []float32) float64 {
	worst := 0.0
	sv, ov := make([]float64, 256), make([]float64, 256)
	for b := 0; b < len(src)/256; b++ {
		x := src[b*256 : b*256+256]
		typ.decode(out[b*typ.size:(b+1)*typ.size], sv, ov)
		lo, hi := 0.0, 0.0
		for _, v := range x {
			lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
		}
		halfStep := (hi - lo) / (2 * nmax)
		for j, v := range x {
			worst = math.Max(worst, ratio(math.Abs(sv[j]+ov[j]-float64(v)), halfStep*(1+1e-6)))
		}
	}
	return worst
}

// The quants of one block of 32, read from its bytes (centred for the symmetric types).
func quantQ5_0(b []byte, j int) int { return nib32(b[6:], j) | int(le32(b[2:])>>j&1)<<4 - 16 }
func quantQ4_0(b []byte, j int) int { return nib32(b[2:], j) - 8 }
func quantQ4_1(b []byte, j int) int { return nib32(b[4:], j) }

// kvaluesIQ4NL is ggml's kvalues_iq4nl (ggml-quants.c).
var kvaluesIQ4NL = [16]int{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

func quantIQ4_NL(b []byte, j int) int { return kvaluesIQ4NL[nib32(b[2:], j)] }

// iq4nlQuality: per block of 32, max |deq-x| / (0.15 * the block's max |x|). The fitted scale
// maps the largest element near one end of the table, so |d| is at most about max|x|/100, and the
// widest gap of the table (89 -> 113, 24 steps of d) bounds the nearest-value error by 12|d|
// (measured worst on this suite's uniform blocks: 0.13 max|x|); storing d as fp16 moves each
// value by at most 127 times d's rounding error (relative 2^-11, or 2^-25 absolute where d is
// subnormal in fp16 or underflows to 0). An all-zero block must give exact zeros.
func iq4nlQuality(out []byte, src []float32) float64 {
	worst := 0.0
	sv, ov := make([]float64, 32), make([]float64, 32)
	for b := 0; b < len(src)/32; b++ {
		x := src[b*32 : b*32+32]
		typeIQ4_NL.decode(out[b*18:(b+1)*18], sv, ov)
		amax := 0.0
		for _, v := range x {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		bound := 0.15*amax + 127*math.Max(amax/100*0x1p-11, 0x1p-25)
		for j, v := range x {
			worst = math.Max(worst, ratio(math.Abs(sv[j]-float64(v)), bound))
		}
	}
	return worst
}

// iq4xsQuality: per sub-block of 32, max |deq-x| / (0.15 * the sub-block's max |x| + 96 |d| +
// 127*32*2^-25), d the super-block's stored scale. IQ4_NL's bound (iq4nlQuality) for the
// sub-block's own fitted scale, plus what the 6-bit code of that scale costs: it moves by at most
// half a step of d, each value by at most 127 times that (a sub-block far below the super-block's
// largest may round to the code 0 and lose all its values, which that term covers), and the
// table's widest gap at the moved scale adds 12 |d|/2; d's own fp16 rounding is relative 2^-11
// (a few |d| at most), or absolute below 2^-25 where it underflows. One wrong nibble or scale
// bit of a full-range sub-block costs hundreds of |d|.
func iq4xsQuality(out []byte, src []float32) float64 {
	worst := 0.0
	sv, ov := make([]float64, 256), make([]float64, 256)
	for b := 0; b < len(src)/256; b++ {
		blk := out[b*136 : (b+1)*136]
		typeIQ4_XS.decode(blk, sv, ov)
		d := math.Abs(f16(le16(blk)))
		for j := 0; j < 8; j++ {
			x := src[256*b+32*j : 256*b+32*j+32]
			amax := 0.0
			for _, v := range x {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			bound := 0.15*amax + 96*d + 127*32*0x1p-25
			for l, v := range x {
				worst = math.Max(worst, ratio(math.Abs(sv[32*j+l]-float64(v)), bound))
			}
		}
	}
	return worst
}

func quantQ5_1(b []byte, j int) int { return nib32(b[8:], j) | int(le32(b[4:])>>j&1)<<4 }

// ---- the cases ----

// quantSpec is one quantizer as its case needs it.
type quantSpec struct {
	typ    *qtype // the output's decoder and block size
	op     kernelrt.Op
	fn     string
	call   func(e exec, out []byte, src []float32) error
	ref    func(out []byte, src []float32) // parity's reference quantizer; nil: none
	check  func(out []byte, src []float32) float64
	metric string
	tol    float64
}

var quantSpecs = []*quantSpec{
	{typ: typeQ8_0, op: kernelrt.OpQuantizeQ8_0, fn: "QuantizeQ8_0",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ8_0(blocks[kernelrt.BlockQ8_0](out), src)
		},
		ref:    func(out []byte, src []float32) { refQuantQ8(blocks[kernelrt.BlockQ8_0](out), src) },
		check:  func(out []byte, src []float32) float64 { return stepCheckQ8(blocks[kernelrt.BlockQ8_0](out), src) },
		metric: "ggml reference bytes (else inf), then max |deq-x| / (half a step + fp16 rounding of d); ties reach 1", tol: 1},
	{typ: typeQ5_0, op: kernelrt.OpQuantizeQ5_0, fn: "QuantizeQ5_0",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ5_0(blocks[kernelrt.BlockQ5_0](out), src)
		},
		ref:    func(out []byte, src []float32) { refQuantQ5(blocks[kernelrt.BlockQ5_0](out), src) },
		check:  func(out []byte, src []float32) float64 { return stepCheckSym(typeQ5_0, 16, quantQ5_0, out, src) },
		metric: "ggml reference bytes (else inf), then max |deq-x| / (half a step + fp16 rounding of d); ties reach 1", tol: 1},
	{typ: typeQ4_0, op: kernelrt.OpQuantizeQ4_0, fn: "QuantizeQ4_0",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ4_0(blocks[kernelrt.BlockQ4_0](out), src)
		},
		ref:    func(out []byte, src []float32) { refQuantQ4_0(blocks[kernelrt.BlockQ4_0](out), src) },
		check:  func(out []byte, src []float32) float64 { return stepCheckSym(typeQ4_0, 8, quantQ4_0, out, src) },
		metric: "ggml reference bytes (else inf), then max |deq-x| / (half a step + fp16 rounding of d); ties reach 1", tol: 1},
	{typ: typeQ4_1, op: kernelrt.OpQuantizeQ4_1, fn: "QuantizeQ4_1",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ4_1(blocks[kernelrt.BlockQ4_1](out), src)
		},
		ref:    func(out []byte, src []float32) { refQuantQ4_1(blocks[kernelrt.BlockQ4_1](out), src) },
		check:  func(out []byte, src []float32) float64 { return stepCheckMin(typeQ4_1, 15, quantQ4_1, out, src) },
		metric: "ggml reference bytes (else inf), then max |deq-x| / (half a step + fp16 rounding of d and m); ties reach 1", tol: 1},
	{typ: typeQ5_1, op: kernelrt.OpQuantizeQ5_1, fn: "QuantizeQ5_1",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ5_1(blocks[kernelrt.BlockQ5_1](out), src)
		},
		ref:    func(out []byte, src []float32) { refQuantQ5_1(blocks[kernelrt.BlockQ5_1](out), src) },
		check:  func(out []byte, src []float32) float64 { return stepCheckMin(typeQ5_1, 31, quantQ5_1, out, src) },
		metric: "ggml reference bytes (else inf), then max |deq-x| / (half a step + fp16 rounding of d and m); ties reach 1", tol: 1},
	{typ: typeIQ4_NL, op: kernelrt.OpQuantizeIQ4_NL, fn: "QuantizeIQ4_NL",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeIQ4_NL(blocks[kernelrt.BlockIQ4_NL](out), src)
		},
		check:  iq4nlQuality,
		metric: "max |deq-x| per block of 32 / (0.15 * its max |x|): the table's widest gap at the fitted scale", tol: 1},
	{typ: typeQ4K, op: kernelrt.OpQuantizeQ4K, fn: "QuantizeQ4K",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ4K(blocks[kernelrt.BlockQ4K](out), src)
		},
		check:  func(out []byte, src []float32) float64 { return kQuality(typeQ4K, 15, out, src) },
		metric: kMetric, tol: 3},
	{typ: typeQ5K, op: kernelrt.OpQuantizeQ5K, fn: "QuantizeQ5K",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ5K(blocks[kernelrt.BlockQ5K](out), src)
		},
		check:  func(out []byte, src []float32) float64 { return kQuality(typeQ5K, 31, out, src) },
		metric: kMetric, tol: 3},
	{typ: typeQ6K, op: kernelrt.OpQuantizeQ6K, fn: "QuantizeQ6K",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ6K(blocks[kernelrt.BlockQ6K](out), src)
		},
		check:  func(out []byte, src []float32) float64 { return kQuality(typeQ6K, 63, out, src) },
		metric: kMetric, tol: 3},
	{typ: typeQ2K, op: kernelrt.OpQuantizeQ2K, fn: "QuantizeQ2K",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ2K(blocks[kernelrt.BlockQ2K](out), src)
		},
		check:  func(out []byte, src []float32) float64 { return kQuality(typeQ2K, 3, out, src) },
		metric: kMetric, tol: 3},
	{typ: typeIQ4_XS, op: kernelrt.OpQuantizeIQ4_XS, fn: "QuantizeIQ4_XS",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeIQ4_XS(blocks[kernelrt.BlockIQ4_XS](out), src)
		},
		check:  iq4xsQuality,
		metric: "max |deq-x| per sub-block of 32 / (0.15 * its max |x| + 96 |d| + 127*32*2^-25): the table's widest gap, a 6-bit scale code step", tol: 1},
	{typ: typeQ3K, op: kernelrt.OpQuantizeQ3K, fn: "QuantizeQ3K",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ3K(blocks[kernelrt.BlockQ3K](out), src)
		},
		check:  func(out []byte, src []float32) float64 { return kQuality(typeQ3K, 7, out, src) },
		metric: kMetric, tol: 3},
	{typ: typeQ8K, op: kernelrt.OpQuantizeQ8K, fn: "QuantizeQ8K",
		call: func(e exec, out []byte, src []float32) error {
			return e.QuantizeQ8K(blocks[kernelrt.BlockQ8K](out), src)
		},
		ref:    func(out []byte, src []float32) { refQuantQ8K(blocks[kernelrt.BlockQ8K](out), src) },
		check:  stepCheckQ8K,
		metric: "ggml reference bytes (else inf), then max |deq-x| / (half a step + float32 rounding)", tol: 1},
}

const kMetric = "max |deq-x| per super-block / (its max-min range / (2*nmax)): half a step of a whole-range code"

// quantCase quantizes n floats with q. The input starts with hand-made blocks of 32: all zeros,
// exact .5 ties, the clamped top code of Q5_0, a scale that is subnormal in fp16 and one that
// underflows it, large values; for the 256-value types the second super-block is all zeros; the
// rest are random over five decades, a magnitude per block of 32.
func quantCase(q *quantSpec, n int) *Case {
	c := &Case{Metric: q.metric, Op: q.op, Fn: q.fn, Shape: fmt.Sprintf("N=%d", n),
		S: kernelrt.Shape{N: n, Tokens: 1}, Cost: n, Tol: q.tol}
	typ := q.typ
	var src []float32
	var out, ref []byte
	c.setup = func() {
		r := newRng(c.Fn + "/" + c.Shape)
		src = make([]float32, n)
		for b := 0; b < n; b += 32 {
			m := math.Pow(10, -3+5*r.unit())
			for j := b; j < b+32; j++ {
				src[j] = float32(m * (2*r.unit() - 1))
			}
		}
		special := [][]float32{
			make([]float32, 32), // all zero
			{127, 2.5, -2.5, 0.5, -0.5, 1.5, -1.5, 126.5, -126.5, 3.5, -3.5, 63.5, -63.5, 0.25, -0.75}, // Q8_0 ties (d = 1)
			{-16, 0.5, -0.5, 1.5, -1.5, 15.5, 16, 15.75, 14.5, -15.5, 7.5, -7.5, 0.25, -0.25},          // Q5_0 ties, clamp (d = 1)
			{16, -16, 15.9, -15.9, 8, -8, 0.5, -0.5},                                                   // Q5_0: +max, -max clamps
			{1e-5, -3e-6, 2e-6},                                                                        // fp16-subnormal scale
			{1e-6, -3e-7, 5e-8},                                                                        // scale below half the smallest fp16 subnormal: stored as 0
			{3e4, -1e4, 2e3, -5},                                                                       // large values
		}
		for i, blk := range special {
			if (i+1)*32 > n {
				break
			}
			copy(src[i*32:(i+1)*32], append(blk, make([]float32, 32-len(blk))...))
		}
		if typ.qk == 256 && n >= 512 {
			clear(src[256:512])
		}
		out = make([]byte, n/typ.qk*typ.size)
		if q.ref != nil {
			ref = make([]byte, len(out))
			q.ref(ref, src)
		}
	}
	c.free = func() { src, out, ref = nil, nil, nil }
	c.run = func(e exec) error {
		fillByte(out, 0xa5)
		return q.call(e, out, src)
	}
	c.outB = func() []byte { return out }
	c.check = func() (float64, string) {
		if ref != nil {
			if d := diffB(out, ref); d > 0 {
				first := 0
				for out[first] == ref[first] {
					first++
				}
				return math.Inf(1), fmt.Sprintf("%d bytes differ from the ggml reference quantizer, first in block %d", d, first/typ.size)
			}
		}
		return q.check(out, src), ""
	}
	return c
}
