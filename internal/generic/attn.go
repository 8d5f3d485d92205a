package generic

import (
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// Pure-Go ports of the attention and KV-append _ref kernels of csrc/attention.c and
// csrc/rope.c for F32, F16 and Q8_0 KV caches, operation for operation (every product wrapped
// in float32() so Go cannot fuse it into an FMA, which the C _ref never does), registered by
// register_gen.go under the manifest's Go names. Parameter order and meaning are the C ones; the
// layouts, work units and NaN/Inf rules are in the csrc/attention.c banner.

// attnKB and attnQTile mirror KRT_ATTN_KB and KRT_ATTN_QTILE.
const (
	attnKB    = 64
	attnQTile = 16
)

// attnPartStride is KRT_ATTN_PART_STRIDE: floats per partial record (m, l, 14 unused, acc).
func attnPartStride(headDim int) int { return headDim + 16 }

// negFltMaxAttn is KRT_ATTN_NEG_BIG, the running max's starting value (-FLT_MAX).
const negFltMaxAttn = negFltMax

// kvType selects how a cache row is stored.
type kvType int

const (
	kvF32 kvType = iota
	kvF16
	kvQ8
)

// kvView is one KV cache ([kv_head][max_ctx] rows of headDim values) in its stored type.
type kvView struct {
	typ kvType
	hd  int
	f   []float32
	h   []uint16
	b   []blockQ8_0
}

// newKV views the cache at p: nRows rows of hd values of the given type.
func newKV(typ kvType, p kern.P, nRows, hd int) kvView {
	v := kvView{typ: typ, hd: hd}
	switch typ {
	case kvF32:
		v.f = f32(p, nRows*hd)
	case kvF16:
		v.h = unsafe.Slice((*uint16)(p), nRows*hd)
	default:
		v.b = q8s(p, nRows*hd/qk)
	}
	return v
}

// val is krt_at_val_ref: element d of row r as float32.
func (c kvView) val(r, d int) float32 {
	switch c.typ {
	case kvF32:
		return c.f[r*c.hd+d]
	case kvF16:
		return FP16ToFP32(c.h[r*c.hd+d])
	}
	b := &c.b[(r*c.hd+d)/qk]
	return float32(FP16ToFP32(b.d) * float32(b.qs[d%qk]))
}

// score is krt_at_score_ref: the dot product of q with row r before scaling; for Q8_0 from
// the quantized query qq, block by block with exact int32 sums.
func (c kvView) score(q []float32, qq []blockQ8_0, r int) float32 {
	var s float32
	if c.typ == kvQ8 {
		kb := c.b[r*c.hd/qk : (r+1)*c.hd/qk]
		for b := range kb {
			var isum int32
			for i := 0; i < qk; i++ {
				isum += int32(qq[b].qs[i]) * int32(kb[b].qs[i])
			}
			s += float32(float32(FP16ToFP32(qq[b].d)*FP16ToFP32(kb[b].d)) * float32(isum))
		}
		return s
	}
	for d := 0; d < c.hd; d++ {
		s += float32(q[d] * c.val(r, d))
	}
	return s
}

// Tanh coefficients and threshold of krt_at_tanh_ref (Cephes tanhf's minimax polynomial).
const (
	tanhSmall = 0.625
	tanhC0    = -5.70498872745e-3
	tanhC1    = 2.06390887954e-2
	tanhC2    = -5.37397155531e-2
	tanhC3    = 1.33314422036e-1
	tanhC4    = -3.33332819422e-1
)

// TanhRef is krt_at_tanh_ref, operation for operation: an odd polynomial below |x| = 0.625,
// sign(x) * (1 - 2/(exp(2|x|)+1)) above (Expf: NaN stays NaN, +-Inf gives +-1).
func TanhRef(x float32) float32 {
	ax := x
	if x < 0 {
		ax = -x
	}
	if ax < tanhSmall {
		z := float32(x * x)
		p := float32(tanhC0)
		p = float32(p*z) + tanhC1
		p = float32(p*z) + tanhC2
		p = float32(p*z) + tanhC3
		p = float32(p*z) + tanhC4
		return float32(float32(p*z)*x) + x
	}
	t := 1 - 2/(Expf(ax+ax)+1)
	if x < 0 {
		return -t
	}
	return t
}

// attnScore is one scaled score of attnRow, soft-capped when cap != 0 (icap = 1/cap).
func attnScore(k kvView, q []float32, qq []blockQ8_0, r int, scale, cap, icap float32) float32 {
	s := float32(k.score(q, qq, r) * scale)
	if cap != 0 {
		s = float32(cap * TanhRef(float32(s*icap)))
	}
	return s
}

// attnRow is krt_at_row_ref: one query row over rows [r0+j0, r0+j1) of K and V (r0: the KV
// head's first row), two passes, scores recomputed (and soft-capped by cap != 0); o gets the
// unnormalised output.
func attnRow(k, v kvView, o, q []float32, qq []blockQ8_0, r0, j0, j1 int, scale, cap float32) (m, l float32) {
	hd := k.hd
	var icap float32
	if cap != 0 {
		icap = 1 / cap
	}
	if k.typ == kvQ8 {
		for b := 0; b < hd/qk; b++ {
			quantizeQ8_0Block(&qq[b], q[b*qk:])
		}
	}
	m = negFltMaxAttn
	for j := j0; j < j1; j++ {
		if s := attnScore(k, q, qq, r0+j, scale, cap, icap); s > m {
			m = s
		}
	}
	for d := range o[:hd] {
		o[d] = 0
	}
	for j := j0; j < j1; j++ {
		e := Expf(attnScore(k, q, qq, r0+j, scale, cap, icap) - m)
		l += e
		for d := 0; d < hd; d++ {
			o[d] += float32(e * v.val(r0+j, d))
		}
	}
	return m, l
}

// scaleRow is o *= 1/l, as _ref writes it (a multiply by the rounded reciprocal).
func scaleRow(o []float32, l float32) {
	inv := 1 / l
	for d := range o {
		o[d] *= inv
	}
}

// attnZigzag is krt_at_zigzag: query tile k of n in the order 0, n-1, 1, n-2, ...
func attnZigzag(k, n int) int {
	if k&1 != 0 {
		return n - 1 - k/2
	}
	return k / 2
}

func attnDecode(typ kvType, out, part, q, kcache, vcache, scratch kern.P, cap float32, heads, headDim, maxCtx, nCtx, chunk, u0, u1 int) {
	nHeads, nKVHeads := heads>>32, heads&0xffffffff
	g0 := nHeads / nKVHeads
	nch := (nCtx + chunk - 1) / chunk
	scale := attnInvSqrt(headDim)
	k := newKV(typ, kcache, nKVHeads*maxCtx, headDim)
	v := newKV(typ, vcache, nKVHeads*maxCtx, headDim)
	qs := f32(q, nHeads*headDim)
	var qq []blockQ8_0
	if typ == kvQ8 {
		qq = q8s(scratch, headDim/qk)
	}
	ps := attnPartStride(headDim)
	for u := u0; u < u1; u++ {
		g, c := u/nch, u%nch
		j0, j1 := c*chunk, min(c*chunk+chunk, nCtx)
		for h := g * g0; h < (g+1)*g0; h++ {
			qv := qs[h*headDim : (h+1)*headDim]
			if nch == 1 {
				o := f32(out, nHeads*headDim)[h*headDim : (h+1)*headDim]
				_, l := attnRow(k, v, o, qv, qq, g*maxCtx, j0, j1, scale, cap)
				scaleRow(o, l)
			} else {
				rec := f32(part, nHeads*nch*ps)[(h*nch+c)*ps : (h*nch+c+1)*ps]
				m, l := attnRow(k, v, rec[16:], qv, qq, g*maxCtx, j0, j1, scale, cap)
				rec[0], rec[1] = m, l
			}
		}
	}
}

func attnPrefill(typ kvType, out, q, kcache, vcache, scratch kern.P, cap float32, heads, headDim, maxCtx, qStride, pos0, T, u0, u1 int) {
	nHeads, nKVHeads := heads>>32, heads&0xffffffff
	g0 := nHeads / nKVHeads
	ntiles := (T + attnQTile - 1) / attnQTile
	scale := attnInvSqrt(headDim)
	k := newKV(typ, kcache, nKVHeads*maxCtx, headDim)
	v := newKV(typ, vcache, nKVHeads*maxCtx, headDim)
	qs := f32(q, (T-1)*qStride+nHeads*headDim)
	os := f32(out, T*nHeads*headDim)
	var qq []blockQ8_0
	if typ == kvQ8 {
		qq = q8s(scratch, headDim/qk)
	}
	for u := u0; u < u1; u++ {
		g, tile := u/ntiles, attnZigzag(u%ntiles, ntiles)
		ta, tb := tile*attnQTile, min(tile*attnQTile+attnQTile, T)
		for t := ta; t < tb; t++ {
			for h := g * g0; h < (g+1)*g0; h++ {
				o := os[(t*nHeads+h)*headDim : (t*nHeads+h+1)*headDim]
				_, l := attnRow(k, v, o, qs[t*qStride+h*headDim:t*qStride+(h+1)*headDim], qq, g*maxCtx, 0, pos0+t+1, scale, cap)
				scaleRow(o, l)
			}
		}
	}
}

// AttnDecodeF32 is krt_attn_decode_f32_ref: decode attention over an F32 cache, units u0..u1
// (KV head x cache chunk); one chunk writes out, several write partial records to part.
// heads packs nHeads<<32 | nKVHeads (KRT_ATTN_HEADS); softcap != 0 soft-caps the scores.
func AttnDecodeF32(out, part, q, kcache, vcache, scratch kern.P, softcap float32, heads, headDim, maxCtx, nCtx, chunk, u0, u1 int) {
	attnDecode(kvF32, out, part, q, kcache, vcache, scratch, softcap, heads, headDim, maxCtx, nCtx, chunk, u0, u1)
}

// AttnDecodeF16 is krt_attn_decode_f16_ref (F16 cache, values widened exactly).
func AttnDecodeF16(out, part, q, kcache, vcache, scratch kern.P, softcap float32, heads, headDim, maxCtx, nCtx, chunk, u0, u1 int) {
	attnDecode(kvF16, out, part, q, kcache, vcache, scratch, softcap, heads, headDim, maxCtx, nCtx, chunk, u0, u1)
}

// AttnDecodeQ8_0 is krt_attn_decode_q8_0_ref (Q8_0 cache; the query is quantized to Q8_0 in
// scratch for the scores).
func AttnDecodeQ8_0(out, part, q, kcache, vcache, scratch kern.P, softcap float32, heads, headDim, maxCtx, nCtx, chunk, u0, u1 int) {
	attnDecode(kvQ8, out, part, q, kcache, vcache, scratch, softcap, heads, headDim, maxCtx, nCtx, chunk, u0, u1)
}

// AttnPrefillF32 is krt_attn_prefill_f32_ref: causal attention of T tokens (positions
// pos0..pos0+T-1), units u0..u1 (KV head x query tile in zigzag order).
func AttnPrefillF32(out, q, kcache, vcache, scratch kern.P, softcap float32, heads, headDim, maxCtx, qStride, pos0, T, u0, u1 int) {
	attnPrefill(kvF32, out, q, kcache, vcache, scratch, softcap, heads, headDim, maxCtx, qStride, pos0, T, u0, u1)
}

// AttnPrefillF16 is krt_attn_prefill_f16_ref.
func AttnPrefillF16(out, q, kcache, vcache, scratch kern.P, softcap float32, heads, headDim, maxCtx, qStride, pos0, T, u0, u1 int) {
	attnPrefill(kvF16, out, q, kcache, vcache, scratch, softcap, heads, headDim, maxCtx, qStride, pos0, T, u0, u1)
}

// AttnPrefillQ8_0 is krt_attn_prefill_q8_0_ref.
func AttnPrefillQ8_0(out, q, kcache, vcache, scratch kern.P, softcap float32, heads, headDim, maxCtx, qStride, pos0, T, u0, u1 int) {
	attnPrefill(kvQ8, out, q, kcache, vcache, scratch, softcap, heads, headDim, maxCtx, qStride, pos0, T, u0, u1)
}

// AttnMerge is krt_attn_merge_ref: for query heads h0..h1, M = max of the chunk maxima (NaN
// skipped), w_c = exp(m_c - M), out = (sum_c w_c acc_c) * (1 / sum_c w_c l_c).
func AttnMerge(out, part kern.P, nHeads, headDim, nChunks, h0, h1 int) {
	ps := attnPartStride(headDim)
	all := f32(part, nHeads*nChunks*ps)
	os := f32(out, nHeads*headDim)
	for h := h0; h < h1; h++ {
		rec := all[h*nChunks*ps : (h+1)*nChunks*ps]
		m := negFltMaxAttn
		for c := 0; c < nChunks; c++ {
			if rec[c*ps] > m {
				m = rec[c*ps]
			}
		}
		o := os[h*headDim : (h+1)*headDim]
		clear(o)
		var l float32
		for c := 0; c < nChunks; c++ {
			w := Expf(rec[c*ps] - m)
			l += float32(rec[c*ps+1] * w)
			acc := rec[c*ps+16 : c*ps+16+headDim]
			for d := range o {
				o[d] += float32(acc[d] * w)
			}
		}
		scaleRow(o, l)
	}
}

// KVAppendF16 is krt_kv_append_f16_ref: token t of [t0, t1) goes to position pos0 + t of the
// F16 cache, each value rounded to nearest even.
func KVAppendF16(cache, src kern.P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int) {
	cs := unsafe.Slice((*uint16)(cache), nKVHeads*maxCtx*headDim)
	ss := f32(src, (t1-1)*srcStride+nKVHeads*headDim)
	for t := t0; t < t1; t++ {
		for h := 0; h < nKVHeads; h++ {
			dst := cs[(h*maxCtx+pos0+t)*headDim:]
			s := ss[t*srcStride+h*headDim:]
			for d := 0; d < headDim; d++ {
				dst[d] = FP32ToFP16(s[d])
			}
		}
	}
}

// KVAppendQ8_0 is krt_kv_append_q8_0_ref: like KVAppendF16, each 32 values quantized to one
// Q8_0 block (a block holding NaN or Inf is stored poisoned and reads back as NaN).
func KVAppendQ8_0(cache, src kern.P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int) {
	nb := headDim / qk
	cs := q8s(cache, nKVHeads*maxCtx*nb)
	ss := f32(src, (t1-1)*srcStride+nKVHeads*headDim)
	for t := t0; t < t1; t++ {
		for h := 0; h < nKVHeads; h++ {
			dst := cs[(h*maxCtx+pos0+t)*nb:]
			s := ss[t*srcStride+h*headDim:]
			for b := 0; b < nb; b++ {
				quantizeQ8_0Block(&dst[b], s[b*qk:])
			}
		}
	}
}
