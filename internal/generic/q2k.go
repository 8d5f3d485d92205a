package generic

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// Pure-Go ports of csrc/q2k.c's _ref kernels, of its quantizer and of the Q2_K row dot product
// (csrc/krt_q2k.h). Every float32 product feeding a sum is wrapped in an explicit conversion so
// that it is never fused into an FMA: bit-identical to C.

// blockQ2K mirrors krt_block_q2_K (84 bytes).
type blockQ2K struct {
	scales  [16]uint8
	qs      [64]uint8
	d, dmin uint16
}

var (
	_ [84 - unsafe.Sizeof(blockQ2K{})]byte
	_ [unsafe.Sizeof(blockQ2K{}) - 84]byte
)

func q2Ks(p kern.P, n int) []blockQ2K { return unsafe.Slice((*blockQ2K)(p), n) }

// q is krt_q2_q: quant e (0..255).
func (b *blockQ2K) q(e int) int32 {
	return int32(b.qs[32*(e/128)+e%32] >> (2 * ((e % 128) / 32)) & 3)
}

func clampQ2(v, hi int32) int32 {
	if v < 0 {
		return 0
	}
	if v > hi {
		return hi
	}
	return v
}

// fitQ2 is krt_q2_fit16: one sub-block of 16, its scale (returned), min and quants.
func fitQ2(x []float32, L []uint8) (scale, min float32) {
	x, L = x[:16], L[:16]
	mn, mx := x[0], x[0]
	for _, v := range x[1:] {
		if v < mn {
			mn = v
		}
		if v > mx {
			mx = v
		}
	}
	if mn > 0 {
		mn = 0
	}
	clear(L)
	if !(mx > mn) {
		return 0, -mn
	}
	rng := mx - mn
	bestS, bestO, bestE := rng/3, mn, float32(0)
	found := false
	var l [16]uint8
	for k := 0; k < 16; k++ {
		iscale := float32(2.5+float32(0.1*float32(k))) / rng
		sl, sl2, sx, sxl := float32(0), float32(0), float32(0), float32(0)
		for i, v := range x {
			l[i] = uint8(clampQ2(nearestInt(float32(iscale*float32(v-mn))), 3))
			q := float32(l[i])
			sl = sl + q
			sl2 = sl2 + float32(q*q)
			sx = sx + v
			sxl = sxl + float32(q*v)
		}
		D := float32(16*sl2) - float32(sl*sl)
		if !(D > 0) {
			continue
		}
		s := (float32(16*sxl) - float32(sx*sl)) / D
		o := (float32(sl2*sx) - float32(sl*sxl)) / D
		if o > 0 {
			o = 0
			s = sxl / sl2
		}
		if !(s >= 0) {
			continue
		}
		e := float32(0)
		for i, v := range x {
			dv := float32(float32(s*float32(l[i]))+o) - v
			e = e + float32(dv*dv)
		}
		if !found || e < bestE {
			found, bestE, bestS, bestO = true, e, s, o
			copy(L, l[:])
		}
	}
	return bestS, -bestO
}

// quantizeQ2KBlock is krt_q2_quant_ref.
func quantizeQ2KBlock(y *blockQ2K, x []float32) {
	x = x[:qkK]
	*y = blockQ2K{}
	if poisoned(x) {
		y.d = fp16NaN
		return
	}
	var L [qkK]uint8
	var sc, mn [16]float32
	maxS, maxM := float32(0), float32(0)
	for i := range sc {
		sc[i], mn[i] = fitQ2(x[16*i:], L[16*i:])
		if sc[i] > maxS {
			maxS = sc[i]
		}
		if mn[i] > maxM {
			maxM = mn[i]
		}
	}
	y.d = FP32ToFP16(maxS / 15)
	y.dmin = FP32ToFP16(maxM / 15)
	d, dm := FP16ToFP32(y.d), FP16ToFP32(y.dmin)
	for i := range sc {
		ls, lm := int32(0), int32(0)
		if d > 0 {
			ls = clampQ2(nearestInt(sc[i]/d), 15)
		}
		if dm > 0 {
			lm = clampQ2(nearestInt(mn[i]/dm), 15)
		}
		y.scales[i] = uint8(ls | lm<<4)
		dl, ml := float32(d*float32(ls)), float32(dm*float32(lm))
		for l := 0; l < 16; l++ {
			e := 16*i + l
			q := int32(0)
			if dl > 0 {
				q = clampQ2(nearestInt((x[e]+ml)/dl), 3)
			}
			y.qs[32*(e/128)+e%32] |= uint8(q << (2 * ((e % 128) / 32)))
		}
	}
}

// QuantizeQ2K is krt_quantize_q2_K_ref: super-blocks [b0, b1) of src into dst.
func QuantizeQ2K(dst, src kern.P, b0, b1 int) {
	d, s := q2Ks(dst, b1), f32(src, b1*qkK)
	for b := b0; b < b1; b++ {
		quantizeQ2KBlock(&d[b], s[b*qkK:])
	}
}

// DequantizeQ2K is krt_dequantize_q2_K_ref: super-blocks [b0, b1) of src into dst.
func DequantizeQ2K(dst, src kern.P, b0, b1 int) {
	d, s := f32(dst, b1*qkK), q2Ks(src, b1)
	for b := b0; b < b1; b++ {
		x := &s[b]
		dd, dmin := FP16ToFP32(x.d), FP16ToFP32(x.dmin)
		for e := 0; e < qkK; e++ {
			sc := x.scales[e/16]
			dl, ml := float32(dd*float32(sc&15)), float32(dmin*float32(sc>>4))
			d[b*qkK+e] = float32(dl*float32(x.q(e))) - ml
		}
	}
}

// dotQ2K is krt_kd_q2_K: acc += (d*d_x)*isum - (dmin*d_x)*msum per super-block.
func dotQ2K(w []blockQ2K, x []blockQ8K) float32 {
	acc := float32(0)
	for b := range x {
		isum, msum := int32(0), int32(0)
		for i := 0; i < 16; i++ {
			dot := int32(0)
			for e := 16 * i; e < 16*i+16; e++ {
				dot += w[b].q(e) * int32(x[b].qs[e])
			}
			isum += int32(w[b].scales[i]&15) * dot
			msum += int32(w[b].scales[i]>>4) * int32(x[b].bsums[i])
		}
		a := scalePoison(float32(FP16ToFP32(w[b].d) * x[b].d))
		c := scalePoison(float32(FP16ToFP32(w[b].dmin) * x[b].d))
		acc = acc + (float32(a*float32(isum)) - float32(c*float32(msum)))
	}
	return acc
}

// GemvQ2K is krt_gemv_q2_K_ref: rows [r0, r1).
func GemvQ2K(y, w, x, bias kern.P, cols, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q2Ks(w, r1*nb), q8Ks(x, nb)
	rowsGemv(y, bias, r0, r1, func(r int) float32 { return dotQ2K(ws[r*nb:(r+1)*nb], xs) })
}

// GemmQ2K is krt_gemm_q2_K_ref: rows [r0, r1) of every token.
func GemmQ2K(y, w, x, bias kern.P, rows, cols, T, r0, r1 int) {
	nb := cols / qkK
	ws, xs := q2Ks(w, rows*nb), q8Ks(x, T*nb)
	rowsGemm(y, bias, rows, T, r0, r1, func(t, r int) float32 { return dotQ2K(ws[r*nb:(r+1)*nb], xs[t*nb:(t+1)*nb]) })
}
