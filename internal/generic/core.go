package generic

import (
	"math"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// The core ops: pure-Go ports of the _ref kernels in csrc/quant.c, gemv.c, norm.c and
// stream.c. Products are wrapped in explicit float32 conversions because the Go spec lets the
// compiler fuse x*y+z into an FMA otherwise, and the C _ref variant (compiled for baseline
// x86-64) rounds every product: the conversions keep the two bit-identical.

// fp16NaN is the scale of a poisoned block: a block holding any NaN or Inf gets d = NaN and
// quants that decode to 0, so every dequantized value and every dot product touching it is NaN.
const fp16NaN = 0x7e00

// amaxBits returns the largest |x[j]| as float bits (ordering the bits of non-negative floats
// orders the values) and the first element of that magnitude, sign kept. amaxBits >= 0x7f800000
// means the block holds a NaN or an Inf.
func amaxBits(x []float32) (uint32, float32) {
	amax, vmax := uint32(0), float32(0)
	for _, v := range x {
		if a := math.Float32bits(v) & 0x7fffffff; a > amax { // strict: the first one wins
			amax, vmax = a, v
		}
	}
	return amax, vmax
}

// inv is 1/d, 0 for d = 0 and also 0 when 1/d overflows (|d| < ~2^-128, where the stored fp16
// d is 0 anyway), so the quants stay finite: krt_qz_inv.
func inv(d float32) float32 {
	if d == 0 {
		return 0
	}
	id := 1 / d
	if math.IsInf(float64(id), 0) {
		return 0
	}
	return id
}

// round127 is C roundf (half away from zero, exact for every float32) clamped to [-127, 127]:
// krt_qz_round127. The clamp matters only when d is a float32 subnormal.
func round127(v float32) int8 {
	return int8(max(-127, min(127, math.Round(float64(v)))))
}

// quantizeQ8_0Block quantizes 32 floats into one Q8_0 block the way krt_qz_q8_0_ref does.
func quantizeQ8_0Block(dst *blockQ8_0, x []float32) {
	x = x[:qk]
	amax, _ := amaxBits(x)
	if amax >= 0x7f800000 {
		*dst = blockQ8_0{d: fp16NaN}
		return
	}
	d := math.Float32frombits(amax) / 127
	id := inv(d)
	dst.d = FP32ToFP16(d)
	for j, v := range x {
		dst.qs[j] = round127(float32(v * id))
	}
}

// quantizeQ5_0Block quantizes 32 floats into one Q5_0 block the way krt_qz_q5_0_ref does.
func quantizeQ5_0Block(dst *blockQ5_0, x []float32) {
	x = x[:qk]
	amax, vmax := amaxBits(x)
	if amax >= 0x7f800000 {
		// q = 16 everywhere: low nibbles 0, every high bit set, so each value is NaN*0 = NaN.
		*dst = blockQ5_0{d: fp16NaN, qh: [4]uint8{0xff, 0xff, 0xff, 0xff}}
		return
	}
	d := vmax / -16 // an all-zero block gives -0, stored as 0x8000 like ggml
	id := inv(d)
	dst.d = FP32ToFP16(d)
	var qh uint32
	for j := 0; j < qk/2; j++ {
		q0 := q5Of(float32(x[j]*id) + 16.5)
		q1 := q5Of(float32(x[j+qk/2]*id) + 16.5)
		dst.qs[j] = uint8(q0&0x0f) | uint8(q1&0x0f)<<4
		qh |= uint32(q0>>4&1)<<uint(j) | uint32(q1>>4&1)<<uint(j+qk/2)
	}
	dst.qh = [4]uint8{uint8(qh), uint8(qh >> 8), uint8(qh >> 16), uint8(qh >> 24)}
}

// q5Of truncates v = x*id + 16.5 to a quant, clamped to [0, 31] (ggml clamps only at 31; v < 0
// needs a subnormal d).
func q5Of(v float32) int32 {
	switch {
	case v < 0:
		return 0
	case v >= 31:
		return 31
	}
	return int32(v)
}

// QuantizeQ8_0 is krt_quantize_q8_0_ref: blocks [b0, b1) of src into dst.
func QuantizeQ8_0(dst, src kern.P, b0, b1 int) {
	d, s := q8s(dst, b1), f32(src, b1*qk)
	for b := b0; b < b1; b++ {
		quantizeQ8_0Block(&d[b], s[b*qk:])
	}
}

// QuantizeQ5_0 is krt_quantize_q5_0_ref: blocks [b0, b1) of src into dst.
func QuantizeQ5_0(dst, src kern.P, b0, b1 int) {
	d, s := q5s(dst, b1), f32(src, b1*qk)
	for b := b0; b < b1; b++ {
		quantizeQ5_0Block(&d[b], s[b*qk:])
	}
}

// DequantizeQ8_0 is krt_dequantize_q8_0_ref: blocks [b0, b1) of src into dst.
func DequantizeQ8_0(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qk), q8s(src, b1)
	for b := b0; b < b1; b++ {
		scale := FP16ToFP32(s[b].d)
		for j, q := range s[b].qs {
			d[b*qk+j] = scale * float32(q)
		}
	}
}

// DequantizeQ5_0 is krt_dequantize_q5_0_ref: blocks [b0, b1) of src into dst.
func DequantizeQ5_0(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qk), q5s(src, b1)
	for b := b0; b < b1; b++ {
		scale := FP16ToFP32(s[b].d)
		for j := 0; j < qk; j++ {
			d[b*qk+j] = scale * float32(s[b].q5(j)-16)
		}
	}
}

// dotQ8_0 is one row of the Q8_0 x Q8_0 GEMV: per block (fp32(dw)*fp32(dx))*isum, summed in
// float32 in block order.
func dotQ8_0(w, x []blockQ8_0) float32 {
	sum := float32(0)
	for b := range x {
		isum := int32(0)
		for j := 0; j < qk; j++ {
			isum += int32(w[b].qs[j]) * int32(x[b].qs[j])
		}
		sum += float32(scalePoison(float32(FP16ToFP32(w[b].d)*FP16ToFP32(x[b].d))) * float32(isum))
	}
	return sum
}

// dotQ5_0 is dotQ8_0 with Q5_0 weights, whose quants are q-16.
func dotQ5_0(w []blockQ5_0, x []blockQ8_0) float32 {
	sum := float32(0)
	for b := range x {
		isum := int32(0)
		for j := 0; j < qk; j++ {
			isum += (w[b].q5(j) - 16) * int32(x[b].qs[j])
		}
		sum += float32(scalePoison(float32(FP16ToFP32(w[b].d)*FP16ToFP32(x[b].d))) * float32(isum))
	}
	return sum
}

// GemvQ8_0 is krt_gemv_q8_0_ref: rows [r0, r1) of y = W x (+ bias).
func GemvQ8_0(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qk
	ys, ws, xs := f32(y, r1), q8s(w, r1*nb), q8s(x, nb)
	for r := r0; r < r1; r++ {
		ys[r] = dotQ8_0(ws[r*nb:(r+1)*nb], xs)
	}
	addBias(ys, bias, r0, r1)
}

// GemvQ5_0 is krt_gemv_q5_0_ref: rows [r0, r1) of y = W x (+ bias).
func GemvQ5_0(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qk
	ys, ws, xs := f32(y, r1), q5s(w, r1*nb), q8s(x, nb)
	for r := r0; r < r1; r++ {
		ys[r] = dotQ5_0(ws[r*nb:(r+1)*nb], xs)
	}
	addBias(ys, bias, r0, r1)
}

// addBias adds bias[r] to y[r] for r in [r0, r1) unless bias is nil.
func addBias(y []float32, bias kern.P, r0, r1 int) {
	if bias == nil {
		return
	}
	bs := f32(bias, r1)
	for r := r0; r < r1; r++ {
		y[r] += bs[r]
	}
}

// GemvQ8_0F32 is krt_gemv_q8_0_f32_ref: x quantized into scratch, then GemvQ8_0.
func GemvQ8_0F32(y, w, x, scratch, bias kern.P, cols, r0, r1 int) {
	QuantizeQ8_0(scratch, x, 0, cols/qk)
	GemvQ8_0(y, w, scratch, bias, cols, r0, r1)
}

// GemvQ5_0F32 is krt_gemv_q5_0_f32_ref: x quantized into scratch, then GemvQ5_0.
func GemvQ5_0F32(y, w, x, scratch, bias kern.P, cols, r0, r1 int) {
	QuantizeQ8_0(scratch, x, 0, cols/qk)
	GemvQ5_0(y, w, scratch, bias, cols, r0, r1)
}

// GemvF32 is krt_gemv_f32_ref: rows [r0, r1) of y = W x in float32.
func GemvF32(y, w, x kern.P, cols, r0, r1 int) {
	ys, ws, xs := f32(y, r1), f32(w, r1*cols), f32(x, cols)
	for r := r0; r < r1; r++ {
		row := ws[r*cols : (r+1)*cols]
		// Four partial sums in the order of krt_gemv_f32_ref.
		var a0, a1, a2, a3 float32
		i := 0
		for ; i+4 <= cols; i += 4 {
			a0 += float32(row[i] * xs[i])
			a1 += float32(row[i+1] * xs[i+1])
			a2 += float32(row[i+2] * xs[i+2])
			a3 += float32(row[i+3] * xs[i+3])
		}
		for ; i < cols; i++ {
			a0 += float32(row[i] * xs[i])
		}
		ys[r] = (a0 + a1) + (a2 + a3)
	}
}

// rsqrt64 is krt_nm_rsqrt_ref: 1/sqrt(s) in float64 from a bit-trick seed and six Newton
// steps (full double precision), ported step for step so the float32 scale matches _ref.
func rsqrt64(s float64) float64 {
	switch {
	case s != s:
		return s
	case s == 0:
		return math.Inf(1)
	case s < 0:
		return math.NaN()
	case s > math.MaxFloat64:
		return 0
	}
	scale := 1.0
	// Bring s into [2^-500, 2^500] so the seed trick and the products cannot under/overflow.
	for s > 0x1p500 {
		s *= 0x1p-500
		scale *= 0x1p-250
	}
	for s < 0x1p-500 {
		s *= 0x1p500
		scale *= 0x1p250
	}
	y := math.Float64frombits(0x5fe6eb50c7b537a9 - math.Float64bits(s)>>1)
	for k := 0; k < 6; k++ {
		y = float64(y * float64(1.5-float64(float64(float64(0.5*s)*y)*y)))
	}
	return y * scale
}

// RMSNorm is krt_rmsnorm_ref: the sum of squares in float64 (each square exact), the scale
// rounded once to float32, then out = (x*scale)*weight in float32.
func RMSNorm(out, x, weight kern.P, eps float32, dim, t0, t1 int) {
	os, xs, ws := f32(out, t1*dim), f32(x, t1*dim), f32(weight, dim)
	for t := t0; t < t1; t++ {
		row, o := xs[t*dim:(t+1)*dim], os[t*dim:(t+1)*dim]
		ss := 0.0
		for _, v := range row {
			ss += float64(float64(v) * float64(v))
		}
		scale := float32(rsqrt64(ss/float64(dim) + float64(eps)))
		for i, v := range row {
			o[i] = float32(v*scale) * ws[i]
		}
	}
}

// expDiff is krt_nm_exp_diff_ref: e^(x-m) with the rounding error of the float32 subtraction
// (recovered exactly by TwoSum) applied to first order, so tiny probabilities stay accurate.
func expDiff(x, m float32) float32 {
	s := x - m
	bb := s - x
	err := (x - (s - bb)) + (-m - bb)
	if err != err { // x or m infinite
		err = 0
	}
	e := Expf(s)
	return e + float32(e*err)
}

// Softmax is krt_softmax_ref: max of the valid part, e = expDiff, the sum in float64, then
// e * float32(1/sum); entries past valid[r] become 0.
func Softmax(x, valid kern.P, cols, r0, r1 int) {
	xs := f32(x, r1*cols)
	var vs []int32
	if valid != nil {
		vs = i32s(valid, r1)
	}
	for r := r0; r < r1; r++ {
		row := xs[r*cols : (r+1)*cols]
		n := cols
		if vs != nil {
			n = int(vs[r])
		}
		m := row[0]
		for _, v := range row[1:n] {
			if v > m { // not max(): a NaN element makes its own e, and the sum, NaN anyway
				m = v
			}
		}
		sum := 0.0
		for i := 0; i < n; i++ {
			e := expDiff(row[i], m)
			row[i] = e
			sum += float64(e)
		}
		inv := float32(1 / sum)
		for i := 0; i < n; i++ {
			row[i] *= inv
		}
		clear(row[n:])
	}
}

// StreamRead is krt_stream_read_ref: *out = the sum of src[i0..i1).
func StreamRead(out, src kern.P, i0, i1 int) {
	s := f32(src, i1)[i0:]
	n := len(s)
	// Four partial sums in the order of krt_stream_read_ref, so both return the same bits.
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += s[i]
		s1 += s[i+1]
		s2 += s[i+2]
		s3 += s[i+3]
	}
	for ; i < n; i++ {
		s0 += s[i]
	}
	*(*float32)(out) = (s0 + s1) + (s2 + s3)
}

// scalePoison is krt_scale_poison: s for a finite block-scale product, NaN for +-Inf or NaN
// (so a block with a non-finite fp16 scale makes the Q8_0 / Q5_0 GEMV and GEMM outputs it
// meets NaN, as in every C variant).
func scalePoison(s float32) float32 { return s + (s - s) }
