package generic

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// Pure-Go ports of csrc/iq4xs.c's _ref kernels, of its quantizer and of the IQ4_XS row dot
// product (csrc/krt_iq4xs.h). Every float32 product feeding a sum is wrapped in an explicit
// conversion so that it is never fused into an FMA: bit-identical to C.

// blockIQ4XS mirrors krt_block_iq4_xs (136 bytes).
type blockIQ4XS struct {
	d, scalesH uint16
	scalesL    [4]uint8
	qs         [128]uint8
}

var (
	_ [136 - unsafe.Sizeof(blockIQ4XS{})]byte
	_ [unsafe.Sizeof(blockIQ4XS{}) - 136]byte
)

func iq4xss(p kern.P, n int) []blockIQ4XS { return unsafe.Slice((*blockIQ4XS)(p), n) }

// ls is krt_ix_ls: the 6-bit scale of sub-block j.
func (b *blockIQ4XS) ls(j int) int32 {
	return int32(b.scalesL[j/2]>>(4*(j%2))&15) | int32(b.scalesH>>(2*j)&3)<<4
}

// nib is krt_ix_nib: the table index of element e.
func (b *blockIQ4XS) nib(e int) int {
	j, l := e/32, e%32
	if l < 16 {
		return int(b.qs[16*j+l] & 15)
	}
	return int(b.qs[16*j+l-16] >> 4)
}

// fitIQ4XS32 is krt_ix_fit32: IQ4_NL's scale search for one sub-block of 32.
func fitIQ4XS32(x []float32) float32 {
	x = x[:32]
	amax, max := float32(0), float32(0)
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	if amax < 1e-15 {
		return 0
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
	return d
}

// quantizeIQ4XSBlock is krt_ix_quant_ref.
func quantizeIQ4XSBlock(y *blockIQ4XS, x []float32) {
	x = x[:qkK]
	*y = blockIQ4XS{}
	if poisoned(x) {
		y.d = fp16NaN
		return
	}
	var s [8]float32
	sm := float32(0)
	for j := range s {
		s[j] = fitIQ4XS32(x[32*j:])
		if abs32(s[j]) > abs32(sm) {
			sm = s[j]
		}
	}
	if sm == 0 {
		return
	}
	y.d = FP32ToFP16(-sm / 32)
	d := FP16ToFP32(y.d)
	if d == 0 {
		y.d = 0
		return
	}
	sl := uint32(0)
	for j := range s {
		l := nearestInt(s[j] / d)
		l = min(max(l, -32), 31)
		ls := uint32(l + 32)
		sl |= (ls & 15) << (4 * j)
		y.scalesH |= uint16(ls>>4) << (2 * j)
		dl := float32(d * float32(l))
		idl := float32(0)
		if dl != 0 {
			idl = 1 / dl
		}
		for k := 0; k < 16; k++ {
			lo, hi := 8, 8
			if dl != 0 {
				lo = iq4nlNearest(float32(idl * x[32*j+k]))
				hi = iq4nlNearest(float32(idl * x[32*j+16+k]))
			}
			y.qs[16*j+k] = uint8(lo | hi<<4)
		}
	}
	for i := range y.scalesL {
		y.scalesL[i] = uint8(sl >> (8 * i))
	}
}

// QuantizeIQ4_XS is krt_quantize_iq4_xs_ref: super-blocks [b0, b1) of src into dst.
func QuantizeIQ4_XS(dst, src kern.P, b0, b1 int) {
	d, s := iq4xss(dst, b1), f32(src, b1*qkK)
	for b := b0; b < b1; b++ {
		quantizeIQ4XSBlock(&d[b], s[b*qkK:])
	}
}

// DequantizeIQ4_XS is krt_dequantize_iq4_xs_ref: super-blocks [b0, b1) of src into dst.
func DequantizeIQ4_XS(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qkK), iq4xss(src, b1)
	for b := b0; b < b1; b++ {
		x := &s[b]
		dd := FP16ToFP32(x.d)
		for j := 0; j < 8; j++ {
			dl := float32(dd * float32(x.ls(j)-32))
			for l := 0; l < 32; l++ {
				d[b*qkK+32*j+l] = float32(dl * float32(kvaluesIQ4NL[x.nib(32*j+l)]))
			}
		}
	}
}

// dotIQ4XS is krt_kd_iq4_xs: acc += (d*d_x) * sum_j (ls_j-32) * sum_l kvalue*x per super-block.
func dotIQ4XS(w []blockIQ4XS, x []blockQ8K) float32 {
	acc := float32(0)
	for b := range x {
		isum := int32(0)
		for j := 0; j < 8; j++ {
			dot := int32(0)
			for e := 32 * j; e < 32*j+32; e++ {
				dot += kvaluesIQ4NL[w[b].nib(e)] * int32(x[b].qs[e])
			}
			isum += (w[b].ls(j) - 32) * dot
		}
		a := scalePoison(float32(FP16ToFP32(w[b].d) * x[b].d))
		acc = acc + float32(a*float32(isum))
	}
	return acc
}

// GemvIQ4_XS is krt_gemv_iq4_xs_ref: rows [r0, r1).
func GemvIQ4_XS(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qkK
	ws, xs := iq4xss(w, r1*nb), q8Ks(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotIQ4XS(ws[r*nb:(r+1)*nb], xs) })
}

// GemmIQ4_XS is krt_gemm_iq4_xs_ref: rows [r0, r1) of every token.
func GemmIQ4_XS(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qkK
	ws, xs := iq4xss(w, rows*nb), q8Ks(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotIQ4XS(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}
