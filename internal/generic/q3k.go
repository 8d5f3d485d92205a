package generic

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// Pure-Go ports of csrc/q3k.c's _ref kernels, of its quantizer and of the Q3_K row dot product
// (csrc/krt_q3k.h). Every float32 product feeding a sum is wrapped in an explicit conversion so
// that it is never fused into an FMA: bit-identical to C.

// blockQ3K mirrors krt_block_q3_K (110 bytes).
type blockQ3K struct {
	hmask  [32]uint8
	qs     [64]uint8
	scales [12]uint8
	d      uint16
}

var (
	_ [110 - unsafe.Sizeof(blockQ3K{})]byte
	_ [unsafe.Sizeof(blockQ3K{}) - 110]byte
)

func q3Ks(p kern.P, n int) []blockQ3K { return unsafe.Slice((*blockQ3K)(p), n) }

// q is krt_q3_q: quant e (0..255), -4..3.
func (b *blockQ3K) q(e int) int32 {
	h, j, l := e/128, e%128/32, e%32
	return int32(b.qs[32*h+l]>>(2*j)&3) - 4 + 4*int32(b.hmask[l]>>(4*h+j)&1)
}

// sc is krt_q3_sc: the 6-bit scale of sub-block s.
func (b *blockQ3K) sc(s int) int32 {
	lo := int32(b.scales[s%8] & 15)
	if s >= 8 {
		lo = int32(b.scales[s-8] >> 4)
	}
	return lo | int32(b.scales[8+s%4]>>(2*(s/4))&3)<<4
}

func clampQ3(v, lo, hi int32) int32 { return min(max(v, lo), hi) }

// fitQ3 is krt_q3_fit16: one sub-block of 16, its fitted scale.
func fitQ3(x []float32) float32 {
	x = x[:16]
	amax, m := float32(0), float32(0)
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, m = a, v
		}
	}
	if amax < 1e-15 {
		return 0
	}
	bestS, bestE, found := float32(0), float32(0), false
	var q [16]int32
	for t := 0; t < 8; t++ {
		v := float32(3) - float32(0.25*float32(t-4))
		if t < 4 {
			v = float32(-4) + float32(0.25*float32(t))
		}
		iscale := v / m
		sqx, sqq := float32(0), float32(0)
		for i, xv := range x {
			q[i] = clampQ3(nearestInt(float32(iscale*xv)), -4, 3)
			sqx = sqx + float32(float32(q[i])*xv)
			sqq = sqq + float32(q[i]*q[i])
		}
		if !(sqq > 0) {
			continue
		}
		s := sqx / sqq
		e := float32(0)
		for i, xv := range x {
			dv := float32(s*float32(q[i])) - xv
			e = e + float32(dv*dv)
		}
		if !found || e < bestE {
			found, bestE, bestS = true, e, s
		}
	}
	return bestS
}

// quantizeQ3KBlock is krt_q3_quant_ref.
func quantizeQ3KBlock(y *blockQ3K, x []float32) {
	x = x[:qkK]
	*y = blockQ3K{}
	if poisoned(x) {
		y.d = fp16NaN
		return
	}
	var s [16]float32
	sm := float32(0)
	for j := range s {
		s[j] = fitQ3(x[16*j:])
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
	for j := range s {
		l := clampQ3(nearestInt(s[j]/d), -32, 31)
		sc := l + 32
		if j < 8 {
			y.scales[j] |= uint8(sc & 15)
		} else {
			y.scales[j-8] |= uint8(sc&15) << 4
		}
		y.scales[8+j%4] |= uint8(sc>>4) << (2 * (j / 4))
		dl := float32(d * float32(l))
		for i := 0; i < 16; i++ {
			e := 16*j + i
			h, jj, ll := e/128, e%128/32, e%32
			q := int32(0)
			if dl != 0 {
				q = clampQ3(nearestInt(x[e]/dl), -4, 3)
			}
			u := q + 4
			y.qs[32*h+ll] |= uint8(u&3) << (2 * jj)
			y.hmask[ll] |= uint8(u>>2) << (4*h + jj)
		}
	}
}

// QuantizeQ3K is krt_quantize_q3_K_ref: super-blocks [b0, b1) of src into dst.
func QuantizeQ3K(dst, src kern.P, b0, b1 int) {
	d, s := q3Ks(dst, b1), f32(src, b1*qkK)
	for b := b0; b < b1; b++ {
		quantizeQ3KBlock(&d[b], s[b*qkK:])
	}
}

// DequantizeQ3K is krt_dequantize_q3_K_ref: super-blocks [b0, b1) of src into dst.
func DequantizeQ3K(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qkK), q3Ks(src, b1)
	for b := b0; b < b1; b++ {
		x := &s[b]
		dd := FP16ToFP32(x.d)
		for sb := 0; sb < 16; sb++ {
			dl := float32(dd * float32(x.sc(sb)-32))
			for l := 0; l < 16; l++ {
				d[b*qkK+16*sb+l] = float32(dl * float32(x.q(16*sb+l)))
			}
		}
	}
}

// dotQ3K is krt_kd_q3_K: acc += (d*d_x) * sum_s (sc_s-32) * sum_l q*x per super-block.
func dotQ3K(w []blockQ3K, x []blockQ8K) float32 {
	acc := float32(0)
	for b := range x {
		isum := int32(0)
		for s := 0; s < 16; s++ {
			dot := int32(0)
			for e := 16 * s; e < 16*s+16; e++ {
				dot += w[b].q(e) * int32(x[b].qs[e])
			}
			isum += (w[b].sc(s) - 32) * dot
		}
		a := scalePoison(float32(FP16ToFP32(w[b].d) * x[b].d))
		acc = acc + float32(a*float32(isum))
	}
	return acc
}

// GemvQ3K is krt_gemv_q3_K_ref: rows [r0, r1).
func GemvQ3K(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q3Ks(w, r1*nb), q8Ks(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotQ3K(ws[r*nb:(r+1)*nb], xs) })
}

// GemmQ3K is krt_gemm_q3_K_ref: rows [r0, r1) of every token.
func GemmQ3K(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q3Ks(w, rows*nb), q8Ks(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotQ3K(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}
