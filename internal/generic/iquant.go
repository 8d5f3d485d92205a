package generic

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// Pure-Go ports of csrc/iquant.c's _ref kernels and of the IQ4_NL row dot product of
// csrc/krt_kdot.h (the quantizer is csrc/krt_iquant.h's). Every float32 product feeding a sum is
// wrapped in an explicit conversion so that it is never fused into an FMA: bit-identical to C.

// blockIQ4NL mirrors krt_block_iq4_nl (18 bytes).
type blockIQ4NL struct {
	d  uint16
	qs [qk / 2]uint8
}

var (
	_ [18 - unsafe.Sizeof(blockIQ4NL{})]byte
	_ [unsafe.Sizeof(blockIQ4NL{}) - 18]byte
)

func iq4nls(p kern.P, n int) []blockIQ4NL { return unsafe.Slice((*blockIQ4NL)(p), n) }

// kvaluesIQ4NL is ggml's kvalues_iq4nl, the values the 4-bit indices of IQ4_NL stand for.
var kvaluesIQ4NL = [16]int32{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// iq4nlNearest is krt_iq4nl_nearest: the index of the table value nearest to v, the lower on a tie.
func iq4nlNearest(v float32) int {
	if v <= -127 {
		return 0
	}
	if v >= 113 {
		return 15
	}
	i := 0
	for i < 14 && v >= float32(kvaluesIQ4NL[i+1]) {
		i++
	}
	lo, hi := float32(kvaluesIQ4NL[i]), float32(kvaluesIQ4NL[i+1])
	if float32(v-lo) <= float32(hi-v) {
		return i
	}
	return i + 1
}

// quantizeIQ4NLBlock is krt_iq_q4nl_ref.
func quantizeIQ4NLBlock(y *blockIQ4NL, x []float32) {
	x = x[:qk]
	if poisoned(x) {
		*y = blockIQ4NL{d: fp16NaN}
		for j := range y.qs {
			y.qs[j] = 0x88
		}
		return
	}
	amax, max := float32(0), float32(0)
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	if amax < 1e-15 {
		*y = blockIQ4NL{}
		return
	}
	ia := 1 / amax
	d, best, found := float32(0), float32(0), false
	for t := -7; t <= 7; t++ {
		id := float32(t-127) / max
		sumqx, sumq2 := float32(0), float32(0)
		for _, v := range x {
			q := float32(kvaluesIQ4NL[iq4nlNearest(float32(id*v))])
			xn := float32(v * ia)
			w := float32(xn * xn)
			wq := float32(w * q)
			sumqx = sumqx + float32(wq*v)
			sumq2 = sumq2 + float32(wq*q)
		}
		if sumq2 > 0 && (!found || float32(sumqx*sumqx) > float32(best*sumq2)) {
			d = sumqx / sumq2
			best = float32(d * sumqx)
			found = true
		}
	}
	id := float32(0)
	if d != 0 {
		id = 1 / d
	}
	y.d = FP32ToFP16(d)
	for j := 0; j < qk/2; j++ {
		lo := iq4nlNearest(float32(id * x[j]))
		hi := iq4nlNearest(float32(id * x[j+qk/2]))
		y.qs[j] = uint8(lo | hi<<4)
	}
}

// QuantizeIQ4_NL is krt_quantize_iq4_nl_ref: blocks [b0, b1) of src into dst.
func QuantizeIQ4_NL(dst, src kern.P, b0, b1 int) {
	d, s := iq4nls(dst, b1), f32(src, b1*qk)
	for b := b0; b < b1; b++ {
		quantizeIQ4NLBlock(&d[b], s[b*qk:])
	}
}

// DequantizeIQ4_NL is krt_dequantize_iq4_nl_ref: blocks [b0, b1) of src into dst.
func DequantizeIQ4_NL(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qk), iq4nls(src, b1)
	for b := b0; b < b1; b++ {
		scale := FP16ToFP32(s[b].d)
		for j := 0; j < qk; j++ {
			d[b*qk+j] = scale * float32(kvaluesIQ4NL[nib(&s[b].qs, j)])
		}
	}
}

// dotIQ4NL is krt_kd_iq4_nl: acc += (d_w*d_x) * sum_j kvalues[q_j]*x_j per block.
func dotIQ4NL(w []blockIQ4NL, x []blockQ8_0) float32 {
	acc := float32(0)
	for b := range x {
		isum := int32(0)
		for j := 0; j < qk; j++ {
			isum += kvaluesIQ4NL[nib(&w[b].qs, j)] * int32(x[b].qs[j])
		}
		s := scalePoison(float32(FP16ToFP32(w[b].d) * FP16ToFP32(x[b].d)))
		acc = acc + float32(s*float32(isum))
	}
	return acc
}

// GemvIQ4_NL is krt_gemv_iq4_nl_ref: rows [r0, r1).
func GemvIQ4_NL(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qk
	ws, xs := iq4nls(w, r1*nb), q8s(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotIQ4NL(ws[r*nb:(r+1)*nb], xs) })
}

// GemmIQ4_NL is krt_gemm_iq4_nl_ref: rows [r0, r1) of every token.
func GemmIQ4_NL(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qk
	ws, xs := iq4nls(w, r1*nb), q8s(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotIQ4NL(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}
