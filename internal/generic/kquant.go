package generic

import (
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// Pure-Go ports of csrc/kquant.c's _ref kernels: ggml's reference quantizers and dequantizers for
// Q4_0, Q4_1, Q5_1, Q4_K, Q5_K, Q6_K and the activation type Q8_K (rules in csrc/krt_kquant.h).
// Every float32 product feeding a sum is wrapped in an explicit conversion, which stops the
// compiler from fusing it into an FMA: the results are bit-identical to the C code.

// qkK is the number of weights per K-quant super-block.
const qkK = 256

// blockQ4_0 mirrors krt_block_q4_0 (18 bytes).
type blockQ4_0 struct {
	d  uint16
	qs [qk / 2]uint8
}

// blockQ4_1 mirrors krt_block_q4_1 (20 bytes).
type blockQ4_1 struct {
	d, m uint16
	qs   [qk / 2]uint8
}

// blockQ5_1 mirrors krt_block_q5_1 (24 bytes).
type blockQ5_1 struct {
	d, m uint16
	qh   [4]uint8
	qs   [qk / 2]uint8
}

// blockQ4K mirrors krt_block_q4_K (144 bytes).
type blockQ4K struct {
	d, dmin uint16
	scales  [12]uint8
	qs      [qkK / 2]uint8
}

// blockQ5K mirrors krt_block_q5_K (176 bytes).
type blockQ5K struct {
	d, dmin uint16
	scales  [12]uint8
	qh      [qkK / 8]uint8
	qs      [qkK / 2]uint8
}

// blockQ6K mirrors krt_block_q6_K (210 bytes).
type blockQ6K struct {
	ql     [qkK / 2]uint8
	qh     [qkK / 4]uint8
	scales [qkK / 16]int8
	d      uint16
}

// blockQ8K mirrors krt_block_q8_K (292 bytes).
type blockQ8K struct {
	d     float32
	qs    [qkK]int8
	bsums [qkK / 16]int16
}

// Compile-time layout checks: the Go views must match the C structs byte for byte.
var (
	_ [18 - unsafe.Sizeof(blockQ4_0{})]byte
	_ [unsafe.Sizeof(blockQ4_0{}) - 18]byte
	_ [20 - unsafe.Sizeof(blockQ4_1{})]byte
	_ [unsafe.Sizeof(blockQ4_1{}) - 20]byte
	_ [24 - unsafe.Sizeof(blockQ5_1{})]byte
	_ [unsafe.Sizeof(blockQ5_1{}) - 24]byte
	_ [144 - unsafe.Sizeof(blockQ4K{})]byte
	_ [unsafe.Sizeof(blockQ4K{}) - 144]byte
	_ [176 - unsafe.Sizeof(blockQ5K{})]byte
	_ [unsafe.Sizeof(blockQ5K{}) - 176]byte
	_ [210 - unsafe.Sizeof(blockQ6K{})]byte
	_ [unsafe.Sizeof(blockQ6K{}) - 210]byte
	_ [292 - unsafe.Sizeof(blockQ8K{})]byte
	_ [unsafe.Sizeof(blockQ8K{}) - 292]byte
)

func q40s(p kern.P, n int) []blockQ4_0 { return unsafe.Slice((*blockQ4_0)(p), n) }
func q41s(p kern.P, n int) []blockQ4_1 { return unsafe.Slice((*blockQ4_1)(p), n) }
func q51s(p kern.P, n int) []blockQ5_1 { return unsafe.Slice((*blockQ5_1)(p), n) }
func q4Ks(p kern.P, n int) []blockQ4K  { return unsafe.Slice((*blockQ4K)(p), n) }
func q5Ks(p kern.P, n int) []blockQ5K  { return unsafe.Slice((*blockQ5K)(p), n) }
func q6Ks(p kern.P, n int) []blockQ6K  { return unsafe.Slice((*blockQ6K)(p), n) }
func q8Ks(p kern.P, n int) []blockQ8K  { return unsafe.Slice((*blockQ8K)(p), n) }

// nearestInt is ggml's nearest_int: the low 23 bits of f + 1.5*2^23, minus 2^22 (round half to
// even for |f| <= 2^22, defined bits beyond).
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// cvtt is x86's cvttss2si, the way ggml's x86 build converts float to int8/uint8: truncation,
// and INT32_MIN for NaN or values outside int32.
func cvtt(v float32) int32 {
	if v >= -2147483648 && v < 2147483648 {
		return int32(v)
	}
	return math.MinInt32
}

// poisoned reports whether any value is NaN or +-Inf.
func poisoned(x []float32) bool {
	for _, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return true
		}
	}
	return false
}

func abs32(v float32) float32 { return math.Float32frombits(math.Float32bits(v) & 0x7fffffff) }

func sqrt32(v float32) float32 { return float32(math.Sqrt(float64(v))) } // correctly rounded

// quantizeQ4_0Block is krt_kq_q4_0_ref.
func quantizeQ4_0Block(y *blockQ4_0, x []float32) {
	x = x[:qk]
	if poisoned(x) {
		*y = blockQ4_0{d: fp16NaN}
		for j := range y.qs {
			y.qs[j] = 0x88
		}
		return
	}
	amax, vmax := float32(0), float32(0)
	for _, v := range x {
		if amax < abs32(v) {
			amax, vmax = abs32(v), v
		}
	}
	d := vmax / -8
	id := float32(0)
	if d != 0 {
		id = 1 / d
	}
	y.d = FP32ToFP16(d)
	for j := 0; j < qk/2; j++ {
		a := int32(int8(cvtt(float32(x[j]*id) + 8.5)))
		b := int32(int8(cvtt(float32(x[j+qk/2]*id) + 8.5)))
		y.qs[j] = uint8(min(a, 15)) | uint8(min(b, 15))<<4
	}
}

// minMax is ggml's sequential min / max scan (the first element of the extreme value wins, which
// decides the sign of a zero).
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

// quantizeQ4_1Block is krt_kq_q4_1_ref.
func quantizeQ4_1Block(y *blockQ4_1, x []float32) {
	x = x[:qk]
	if poisoned(x) {
		*y = blockQ4_1{d: fp16NaN}
		return
	}
	mn, mx := minMax(x)
	d := (mx - mn) / 15
	id := float32(0)
	if d != 0 {
		id = 1 / d
	}
	y.d, y.m = FP32ToFP16(d), FP32ToFP16(mn)
	for j := 0; j < qk/2; j++ {
		a := int32(int8(cvtt(float32((x[j]-mn)*id) + 0.5)))
		b := int32(int8(cvtt(float32((x[j+qk/2]-mn)*id) + 0.5)))
		y.qs[j] = uint8(min(a, 15)) | uint8(min(b, 15))<<4
	}
}

// quantizeQ5_1Block is krt_kq_q5_1_ref.
func quantizeQ5_1Block(y *blockQ5_1, x []float32) {
	x = x[:qk]
	if poisoned(x) {
		*y = blockQ5_1{d: fp16NaN}
		return
	}
	mn, mx := minMax(x)
	d := (mx - mn) / 31
	id := float32(0)
	if d != 0 {
		id = 1 / d
	}
	y.d, y.m = FP32ToFP16(d), FP32ToFP16(mn)
	var qh uint32
	for j := 0; j < qk/2; j++ {
		a := uint32(uint8(cvtt(float32((x[j]-mn)*id) + 0.5)))
		b := uint32(uint8(cvtt(float32((x[j+qk/2]-mn)*id) + 0.5)))
		y.qs[j] = uint8(a&0x0f | (b&0x0f)<<4)
		qh |= (a&0x10)>>4<<uint(j) | (b&0x10)>>4<<uint(j+qk/2)
	}
	y.qh = [4]uint8{uint8(qh), uint8(qh >> 8), uint8(qh >> 16), uint8(qh >> 24)}
}

// quantizeQ8KBlock is krt_kq_q8_K_ref.
func quantizeQ8KBlock(y *blockQ8K, x []float32) {
	x = x[:qkK]
	if poisoned(x) {
		*y = blockQ8K{d: math.Float32frombits(0x7fc00000)}
		return
	}
	vmax, amax := float32(0), float32(0)
	for _, v := range x {
		if ax := abs32(v); ax > amax {
			amax, vmax = ax, v
		}
	}
	if amax == 0 {
		*y = blockQ8K{}
		return
	}
	iscale := -127 / vmax
	for j, v := range x {
		y.qs[j] = int8(min(nearestInt(float32(iscale*v)), 127))
	}
	for j := range y.bsums {
		sum := int32(0)
		for _, q := range y.qs[16*j : 16*j+16] {
			sum += int32(q)
		}
		y.bsums[j] = int16(sum)
	}
	y.d = 1 / iscale
}

// makeQKX2 is ggml's make_qkx2_quants with use_mad = false for 32 values: krt_kq_qkx2.
func makeQKX2(nmax int32, x, weights []float32, L, laux []uint8, rmin, rdelta float32, nstep int) (scale, theMin float32) {
	x, weights, L, laux = x[:32], weights[:32], L[:32], laux[:32]
	mn, mx := x[0], x[0]
	sumW := weights[0]
	sumX := float32(sumW * x[0])
	for i := 1; i < 32; i++ {
		if x[i] < mn {
			mn = x[i]
		}
		if x[i] > mx {
			mx = x[i]
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		clear(L)
		return 0, -mn
	}
	clamp := func(l int32) uint8 { return uint8(max(0, min(nmax, l))) }
	iscale := float32(nmax) / (mx - mn)
	scale = 1 / iscale
	bestMad := float32(0)
	for i, v := range x {
		L[i] = clamp(nearestInt(float32(iscale * (v - mn))))
		diff := float32(float32(scale*float32(L[i]))+mn) - v
		diff = float32(diff * diff)
		bestMad += float32(weights[i] * diff)
	}
	for is := 0; is <= nstep; is++ {
		iscale = (float32(rmin+float32(rdelta*float32(is))) + float32(nmax)) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := clamp(nearestInt(float32(iscale * (v - mn))))
			laux[i] = l
			w, fl := weights[i], float32(l)
			sumL += float32(w * fl)
			sumL2 += float32(float32(w*fl) * fl)
			sumXL += float32(float32(w*fl) * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			mad := float32(0)
			for i, v := range x {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - v
				diff = float32(diff * diff)
				mad += float32(weights[i] * diff)
			}
			if mad < bestMad {
				copy(L, laux)
				bestMad, scale, mn = mad, thisScale, thisMin
			}
		}
	}
	return scale, -mn
}

// scaleMinK4 is ggml's get_scale_min_k4: the 6-bit scale and min of sub-block j of a Q4_K / Q5_K.
func scaleMinK4(j int, q *[12]uint8) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xf | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// quantizeK45 is the shared part of ggml's Q4_K / Q5_K reference quantizers: krt_kq_k45_ref.
func quantizeK45(dd, dmin *uint16, scales12 *[12]uint8, L []uint8, x []float32, nmax int32, rmin float32, nstep int) {
	var laux [32]uint8
	var weights [32]float32
	var mins, scales [8]float32
	maxScale, maxMin := float32(0), float32(0)
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		sumX2 := float32(0)
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2(nmax, xs, weights[:], L[32*j:], laux[:], rmin, 0.1, nstep)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	invScale, invMin := float32(0), float32(0)
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxMin > 0 {
		invMin = 63 / maxMin
	}
	*scales12 = [12]uint8{}
	for j := 0; j < 8; j++ {
		ls := min(uint8(nearestInt(float32(invScale*scales[j]))), 63)
		lm := min(uint8(nearestInt(float32(invMin*mins[j]))), 63)
		if j < 4 {
			scales12[j], scales12[j+4] = ls, lm
		} else {
			scales12[j+4] = ls&0xf | (lm&0xf)<<4
			scales12[j-4] |= (ls >> 4) << 6
			scales12[j] |= (lm >> 4) << 6
		}
	}
	*dd = FP32ToFP16(maxScale / 63)
	*dmin = FP32ToFP16(maxMin / 63)
	for j := 0; j < 8; j++ {
		sc, m := scaleMinK4(j, scales12)
		d := float32(FP16ToFP32(*dd) * float32(sc))
		if d == 0 {
			continue
		}
		dm := float32(FP16ToFP32(*dmin) * float32(m))
		for ii := 0; ii < 32; ii++ {
			l := nearestInt((x[32*j+ii] + dm) / d)
			L[32*j+ii] = uint8(max(0, min(nmax, l)))
		}
	}
}

// quantizeQ4KBlock is krt_kq_q4_K_ref.
func quantizeQ4KBlock(y *blockQ4K, x []float32) {
	x = x[:qkK]
	if poisoned(x) {
		*y = blockQ4K{d: fp16NaN}
		return
	}
	var L [qkK]uint8
	quantizeK45(&y.d, &y.dmin, &y.scales, L[:], x, 15, -1, 20)
	for j := 0; j < qkK; j += 64 {
		for l := 0; l < 32; l++ {
			y.qs[j/2+l] = L[j+l] | L[j+l+32]<<4
		}
	}
}

// quantizeQ5KBlock is krt_kq_q5_K_ref.
func quantizeQ5KBlock(y *blockQ5K, x []float32) {
	x = x[:qkK]
	if poisoned(x) {
		*y = blockQ5K{d: fp16NaN}
		return
	}
	var L [qkK]uint8
	quantizeK45(&y.d, &y.dmin, &y.scales, L[:], x, 31, -0.5, 15)
	y.qh = [qkK / 8]uint8{}
	m1, m2 := uint8(1), uint8(2)
	for n := 0; n < qkK; n += 64 {
		for j := 0; j < 32; j++ {
			l1, l2 := L[n+j], L[n+j+32]
			if l1 > 15 {
				l1 -= 16
				y.qh[j] |= m1
			}
			if l2 > 15 {
				l2 -= 16
				y.qh[j] |= m2
			}
			y.qs[n/2+j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
	}
}

// makeQX16 is ggml's make_qx_quants for n = 16, nmax = 32, rmse_type = 1: krt_kq_qx16.
func makeQX16(x []float32, L []int8) float32 {
	const nmax = 32
	x, L = x[:16], L[:16]
	vmax, amax := float32(0), float32(0)
	for _, v := range x {
		if ax := abs32(v); ax > amax {
			amax, vmax = ax, v
		}
	}
	if amax < 1e-15 {
		clear(L)
		return 0
	}
	clampL := func(l int32) int32 { return max(-nmax, min(nmax-1, l)) }
	sums := func(iscale float32) (sumlx, suml2 float32) {
		for _, v := range x {
			l := float32(clampL(nearestInt(float32(iscale * v))))
			w := float32(v * v)
			sumlx += float32(float32(w*v) * l)
			suml2 += float32(float32(w*l) * l)
		}
		return sumlx, suml2
	}
	iscale := float32(-nmax) / vmax
	for i, v := range x {
		L[i] = int8(clampL(nearestInt(float32(iscale*v))) + nmax)
	}
	sumlx, suml2 := sums(iscale)
	scale := float32(0)
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := float32(scale * sumlx)
	for is := -9; is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / vmax
		sumlx, suml2 = sums(iscale)
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			for i, v := range x {
				L[i] = int8(nmax + clampL(nearestInt(float32(iscale*v))))
			}
			scale = sumlx / suml2
			best = float32(scale * sumlx)
		}
	}
	return scale
}

// quantizeQ6KBlock is krt_kq_q6_K_ref.
func quantizeQ6KBlock(y *blockQ6K, x []float32) {
	x = x[:qkK]
	if poisoned(x) {
		*y = blockQ6K{d: fp16NaN}
		for j := range y.qh {
			y.qh[j] = 0xaa // q = 32
		}
		return
	}
	var L [qkK]int8
	var scales [16]float32
	maxScale, maxAbsScale := float32(0), float32(0)
	for ib := 0; ib < 16; ib++ {
		scales[ib] = makeQX16(x[16*ib:], L[16*ib:])
		if a := abs32(scales[ib]); a > maxAbsScale {
			maxAbsScale, maxScale = a, scales[ib]
		}
	}
	if maxAbsScale < 1e-15 {
		*y = blockQ6K{}
		return
	}
	iscale := -128 / maxScale
	y.d = FP32ToFP16(1 / iscale)
	for ib := range y.scales {
		y.scales[ib] = int8(min(nearestInt(float32(iscale*scales[ib])), 127))
	}
	for j := 0; j < 16; j++ {
		d := float32(FP16ToFP32(y.d) * float32(y.scales[j]))
		if d == 0 {
			continue
		}
		for ii := 0; ii < 16; ii++ {
			l := max(-32, min(31, nearestInt(x[16*j+ii]/d)))
			L[16*j+ii] = int8(l + 32)
		}
	}
	for j := 0; j < qkK; j += 128 {
		ql, qh := y.ql[j/2:], y.qh[j/4:]
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := uint8(L[j+l]), uint8(L[j+l+32]), uint8(L[j+l+64]), uint8(L[j+l+96])
			ql[l] = q1&0xf | (q3&0xf)<<4
			ql[l+32] = q2&0xf | (q4&0xf)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}

// QuantizeQ4_0 is krt_quantize_q4_0_ref: blocks [b0, b1) of src into dst.
func QuantizeQ4_0(dst, src kern.P, b0, b1 int) {
	d, s := q40s(dst, b1), f32(src, b1*qk)
	for b := b0; b < b1; b++ {
		quantizeQ4_0Block(&d[b], s[b*qk:])
	}
}

// QuantizeQ4_1 is krt_quantize_q4_1_ref: blocks [b0, b1) of src into dst.
func QuantizeQ4_1(dst, src kern.P, b0, b1 int) {
	d, s := q41s(dst, b1), f32(src, b1*qk)
	for b := b0; b < b1; b++ {
		quantizeQ4_1Block(&d[b], s[b*qk:])
	}
}

// QuantizeQ5_1 is krt_quantize_q5_1_ref: blocks [b0, b1) of src into dst.
func QuantizeQ5_1(dst, src kern.P, b0, b1 int) {
	d, s := q51s(dst, b1), f32(src, b1*qk)
	for b := b0; b < b1; b++ {
		quantizeQ5_1Block(&d[b], s[b*qk:])
	}
}

// QuantizeQ4K is krt_quantize_q4_K_ref: super-blocks [b0, b1) of src into dst.
func QuantizeQ4K(dst, src kern.P, b0, b1 int) {
	d, s := q4Ks(dst, b1), f32(src, b1*qkK)
	for b := b0; b < b1; b++ {
		quantizeQ4KBlock(&d[b], s[b*qkK:])
	}
}

// QuantizeQ5K is krt_quantize_q5_K_ref: super-blocks [b0, b1) of src into dst.
func QuantizeQ5K(dst, src kern.P, b0, b1 int) {
	d, s := q5Ks(dst, b1), f32(src, b1*qkK)
	for b := b0; b < b1; b++ {
		quantizeQ5KBlock(&d[b], s[b*qkK:])
	}
}

// QuantizeQ6K is krt_quantize_q6_K_ref: super-blocks [b0, b1) of src into dst.
func QuantizeQ6K(dst, src kern.P, b0, b1 int) {
	d, s := q6Ks(dst, b1), f32(src, b1*qkK)
	for b := b0; b < b1; b++ {
		quantizeQ6KBlock(&d[b], s[b*qkK:])
	}
}

// QuantizeQ8K is krt_quantize_q8_K_ref: super-blocks [b0, b1) of src into dst.
func QuantizeQ8K(dst, src kern.P, b0, b1 int) {
	d, s := q8Ks(dst, b1), f32(src, b1*qkK)
	for b := b0; b < b1; b++ {
		quantizeQ8KBlock(&d[b], s[b*qkK:])
	}
}

// nib returns quant j (0..31) of 16 nibble bytes: low nibbles are 0..15, high nibbles 16..31.
func nib(qs *[qk / 2]uint8, j int) int32 {
	if j < qk/2 {
		return int32(qs[j] & 0x0f)
	}
	return int32(qs[j-qk/2] >> 4)
}

// q5_1 returns the 5-bit quant j of a Q5_1 block.
func (b *blockQ5_1) q5(j int) int32 {
	qh := uint32(b.qh[0]) | uint32(b.qh[1])<<8 | uint32(b.qh[2])<<16 | uint32(b.qh[3])<<24
	return nib(&b.qs, j) | int32(qh>>uint(j)&1)<<4
}

// q returns the 4-bit (Q4_K) quant e of the super-block.
func (b *blockQ4K) q(e int) int32 {
	v := b.qs[32*(e/64)+e%32]
	if e/32&1 == 1 {
		return int32(v >> 4)
	}
	return int32(v & 0x0f)
}

// q returns the 5-bit (Q5_K) quant e of the super-block.
func (b *blockQ5K) q(e int) int32 {
	v := b.qs[32*(e/64)+e%32]
	lo := int32(v & 0x0f)
	if e/32&1 == 1 {
		lo = int32(v >> 4)
	}
	return lo | int32(b.qh[e%32]>>uint(e/32)&1)<<4
}

// q returns the 6-bit (Q6_K) quant e (0..63) of the super-block.
func (b *blockQ6K) q(e int) int32 {
	h, k, l := e/128, e%128/32, e%32
	lb := b.ql[64*h+l+32*(k&1)]
	lo := lb & 0x0f
	if k >= 2 {
		lo = lb >> 4
	}
	return int32(lo) | int32(b.qh[32*h+l]>>uint(2*k)&3)<<4
}

// DequantizeQ4_0 is krt_dequantize_q4_0_ref: blocks [b0, b1) of src into dst.
func DequantizeQ4_0(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qk), q40s(src, b1)
	for b := b0; b < b1; b++ {
		scale := FP16ToFP32(s[b].d)
		for j := 0; j < qk; j++ {
			d[b*qk+j] = float32(nib(&s[b].qs, j)-8) * scale
		}
	}
}

// DequantizeQ4_1 is krt_dequantize_q4_1_ref: blocks [b0, b1) of src into dst.
func DequantizeQ4_1(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qk), q41s(src, b1)
	for b := b0; b < b1; b++ {
		scale, m := FP16ToFP32(s[b].d), FP16ToFP32(s[b].m)
		for j := 0; j < qk; j++ {
			d[b*qk+j] = float32(float32(nib(&s[b].qs, j))*scale) + m
		}
	}
}

// DequantizeQ5_1 is krt_dequantize_q5_1_ref: blocks [b0, b1) of src into dst.
func DequantizeQ5_1(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qk), q51s(src, b1)
	for b := b0; b < b1; b++ {
		scale, m := FP16ToFP32(s[b].d), FP16ToFP32(s[b].m)
		for j := 0; j < qk; j++ {
			d[b*qk+j] = float32(float32(s[b].q5(j))*scale) + m
		}
	}
}

// DequantizeQ4K is krt_dequantize_q4_K_ref: super-blocks [b0, b1) of src into dst.
func DequantizeQ4K(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qkK), q4Ks(src, b1)
	for b := b0; b < b1; b++ {
		x := &s[b]
		dd, dmin := FP16ToFP32(x.d), FP16ToFP32(x.dmin)
		for e := 0; e < qkK; e++ {
			sc, m := scaleMinK4(e/32, &x.scales)
			d1, m1 := float32(dd*float32(sc)), float32(dmin*float32(m))
			d[b*qkK+e] = float32(d1*float32(x.q(e))) - m1
		}
	}
}

// DequantizeQ5K is krt_dequantize_q5_K_ref: super-blocks [b0, b1) of src into dst.
func DequantizeQ5K(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qkK), q5Ks(src, b1)
	for b := b0; b < b1; b++ {
		x := &s[b]
		dd, dmin := FP16ToFP32(x.d), FP16ToFP32(x.dmin)
		for e := 0; e < qkK; e++ {
			sc, m := scaleMinK4(e/32, &x.scales)
			d1, m1 := float32(dd*float32(sc)), float32(dmin*float32(m))
			d[b*qkK+e] = float32(d1*float32(x.q(e))) - m1
		}
	}
}

// DequantizeQ6K is krt_dequantize_q6_K_ref: super-blocks [b0, b1) of src into dst.
func DequantizeQ6K(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qkK), q6Ks(src, b1)
	for b := b0; b < b1; b++ {
		x := &s[b]
		dd := FP16ToFP32(x.d)
		for e := 0; e < qkK; e++ {
			d[b*qkK+e] = float32(dd*float32(x.scales[e/16])) * float32(x.q(e)-32)
		}
	}
}

// DequantizeQ8K is krt_dequantize_q8_K_ref: super-blocks [b0, b1) of src into dst.
func DequantizeQ8K(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qkK), q8Ks(src, b1)
	for b := b0; b < b1; b++ {
		for j, q := range s[b].qs {
			d[b*qkK+j] = s[b].d * float32(q)
		}
	}
}
