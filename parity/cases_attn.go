package parity

import (
	"fmt"
	"math"

	"github.com/kernelrt/kernelrt"
)

// The checks of the KV caches in F16 / Q8_0 and of attention over F32 / F16 / Q8_0 caches
// (kernelrt's kernels_attn.go): the appends exactly, attention against a float64 reference
// computed here from the values the cache stores, at depths 1..16384.

// kvKind is a KV cache's storage type.
type kvKind int

const (
	kvF32 kvKind = iota
	kvF16
	kvQ8
)

func (k kvKind) String() string { return [...]string{"F32", "F16", "Q8_0"}[k] }

// attnOps are the dispatch rows of the decode and prefill kernels per kind.
var (
	attnDecodeOp  = [...]kernelrt.Op{kernelrt.OpAttnDecodeF32, kernelrt.OpAttnDecodeF16, kernelrt.OpAttnDecodeQ8_0}
	attnPrefillOp = [...]kernelrt.Op{kernelrt.OpAttnPrefillF32, kernelrt.OpAttnPrefillF16, kernelrt.OpAttnPrefillQ8_0}
)

// kvCacheData is one layer's K and V cache of one kind, with the float64 value of every
// stored element (what the reference reads).
type kvCacheData struct {
	kind           kvKind
	kf, vf         []float32
	kh, vh         []uint16
	kq, vq         []kernelrt.BlockQ8_0
	kval, vval     []float64 // [g][pos][d], decoded here
	nkv, hd, maxCx int
}

// newKVCacheData fills positions 0..n-1 of nkv heads with values uniform in [-1, 1] (plus
// special values from special, when given) stored as kind; the positions beyond hold NaN
// (F32, F16) or poisoned blocks (Q8_0), so a kernel reading past the context poisons its
// output.
func newKVCacheData(r *rng, kind kvKind, nkv, hd, maxCtx, n int, special func(k, v []float32)) *kvCacheData {
	c := &kvCacheData{kind: kind, nkv: nkv, hd: hd, maxCx: maxCtx}
	size := nkv * maxCtx * hd
	k, v := make([]float32, size), make([]float32, size)
	fillNaN(k)
	fillNaN(v)
	for g := 0; g < nkv; g++ {
		r.fill(k[g*maxCtx*hd:][:n*hd], -1, 1)
		r.fill(v[g*maxCtx*hd:][:n*hd], -1, 1)
	}
	if special != nil {
		special(k, v)
	}
	c.kval, c.vval = make([]float64, size), make([]float64, size)
	switch kind {
	case kvF32:
		c.kf, c.vf = k, v
		for i := range k {
			c.kval[i], c.vval[i] = float64(k[i]), float64(v[i])
		}
	case kvF16:
		c.kh, c.vh = make([]uint16, size), make([]uint16, size)
		for i := range k {
			c.kh[i], c.vh[i] = toF16(k[i]), toF16(v[i])
			c.kval[i], c.vval[i] = f16(c.kh[i]), f16(c.vh[i])
		}
	case kvQ8:
		c.kq, c.vq = make([]kernelrt.BlockQ8_0, size/32), make([]kernelrt.BlockQ8_0, size/32)
		refQuantQ8(c.kq, k)
		refQuantQ8(c.vq, v)
		for i := range k {
			kb, vb := &c.kq[i/32], &c.vq[i/32]
			c.kval[i] = f16(kb.D) * float64(kb.Qs[i%32])
			c.vval[i] = f16(vb.D) * float64(vb.Qs[i%32])
		}
	}
	return c
}

// attnRef computes attention in float64 for T query tokens at q + t*qStride (token t sees
// positions 0..pos0+t), and per element the scale sum_j p_j|v_j|. For a Q8_0 cache each
// query row is first quantized to Q8_0 (as llama.cpp converts Q for a q8_0 K cache) and the
// score is sum_b d_q d_k (exact int dot); the other kinds use the float query.
func attnRef(c *kvCacheData, q []float32, T, qStride, nHeads, pos0 int, softcap float64) (ref, scale []float64) {
	hd := c.hd
	ref, scale = make([]float64, T*nHeads*hd), make([]float64, T*nHeads*hd)
	p := make([]float64, pos0+T)
	qv := make([]float64, hd)
	qb := make([]kernelrt.BlockQ8_0, hd/32)
	group := nHeads / c.nkv
	inv := 1 / math.Sqrt(float64(hd))
	for t := 0; t < T; t++ {
		np := pos0 + t + 1
		for h := 0; h < nHeads; h++ {
			g := h / group
			qr := q[t*qStride+h*hd:][:hd]
			if c.kind == kvQ8 {
				refQuantQ8(qb, qr)
				for d := range qv {
					qv[d] = f16(qb[d/32].D) * float64(qb[d/32].Qs[d%32])
				}
			} else {
				for d := range qv {
					qv[d] = float64(qr[d])
				}
			}
			// The kernels' running max starts at -FLT_MAX and skips NaN scores (a NaN or +Inf
			// score still makes the row NaN through exp; all -Inf gives l = 0 and NaN).
			m := -math.MaxFloat32
			for j := 0; j < np; j++ {
				kv := c.kval[(g*c.maxCx+j)*hd:][:hd]
				s := 0.0
				for d := range qv {
					s += qv[d] * kv[d]
				}
				p[j] = s * inv
				if softcap != 0 { // gemma2's attention soft-cap
					p[j] = softcap * math.Tanh(p[j]/softcap)
				}
				if p[j] > m {
					m = p[j]
				}
			}
			sum := 0.0
			for j := 0; j < np; j++ {
				p[j] = math.Exp(p[j] - m)
				sum += p[j]
			}
			o := (t*nHeads + h) * hd
			for j := 0; j < np; j++ {
				pj := p[j] / sum
				vv := c.vval[(g*c.maxCx+j)*hd:][:hd]
				for d := range vv {
					ref[o+d] += pj * vv[d]
					scale[o+d] += pj * math.Abs(vv[d])
				}
			}
		}
	}
	return ref, scale
}

// attention makes the AttentionF32/F16/Q8_0 call on the cache.
func (c *kvCacheData) attention(e exec, out, q, scr []float32, T, qStride, nHeads, pos0 int, softcap float32) error {
	switch c.kind {
	case kvF32:
		return e.AttentionF32(out, q, c.kf, c.vf, scr, T, qStride, nHeads, c.nkv, c.hd, c.maxCx, pos0, softcap)
	case kvF16:
		return e.AttentionF16(out, q, c.kh, c.vh, scr, T, qStride, nHeads, c.nkv, c.hd, c.maxCx, pos0, softcap)
	}
	return e.AttentionQ8_0(out, q, c.kq, c.vq, scr, T, qStride, nHeads, c.nkv, c.hd, c.maxCx, pos0, softcap)
}

// decode makes the AttnDecode* call (one token, nCtx positions, the given chunk).
func (c *kvCacheData) decode(e exec, out, part, q, scr []float32, nHeads, nCtx, chunk int, softcap float32) error {
	switch c.kind {
	case kvF32:
		return e.AttnDecodeF32(out, part, q, c.kf, c.vf, scr, nHeads, c.nkv, c.hd, c.maxCx, nCtx, chunk, softcap)
	case kvF16:
		return e.AttnDecodeF16(out, part, q, c.kh, c.vh, scr, nHeads, c.nkv, c.hd, c.maxCx, nCtx, chunk, softcap)
	}
	return e.AttnDecodeQ8_0(out, part, q, c.kq, c.vq, scr, nHeads, c.nkv, c.hd, c.maxCx, nCtx, chunk, softcap)
}

// attnMetric is what every attention case measures.
const attnMetric = "max |out-ref| / sum_j p_j|v_j|, ref from the stored values (Q8_0: Q quantized too)"

// attnSplitTol bounds |Runtime - Serial| where the Runtime's decode splits the cache into
// chunks that a merge combines (outputs are O(1): V in [-1, 1]); the documented bound of
// either result against float64 is 4e-6 * sum_j p_j|v_j|.
const attnSplitTol = 1e-5

// attnCaseKV is AttentionF32/F16/Q8_0 of T tokens at positions pos0.. (T = 1: the decode
// kernel, else prefill) with nHeads/nKV heads of 64, over a cache holding pos0+T positions.
// chunks is the decode chunk count the Runtime's rule gives two workers (for Shape.Chunks).
func attnCaseKV(kind kvKind, T, pos0, nHeads, nKV int, full bool) *Case {
	return attnCaseCap(kind, T, pos0, nHeads, nKV, full, 0)
}

// attnCaseCap is attnCaseKV with the scores soft-capped by softcap (gemma2; 0: off).
func attnCaseCap(kind kvKind, T, pos0, nHeads, nKV int, full bool, softcap float32) *Case {
	ctx := pos0 + T
	maxCtx := ctx + 7 // a few unwritten (NaN) positions past the context
	shape := fmt.Sprintf("T=%d ctx=%d heads=%d/%d hd=%d", T, ctx, nHeads, nKV, headDim)
	if softcap != 0 {
		shape += fmt.Sprintf(" softcap=%g", softcap)
	}
	c := &Case{Metric: attnMetric, Fn: "Attention" + kind.String(), Full: full,
		Shape: shape,
		S:     kernelrt.Shape{Tokens: T, Heads: nHeads, KVHeads: nKV, HeadD: headDim, Ctx: ctx},
		Cost:  T * nHeads * ctx * headDim, Tol: 1e-5, Heavy: T*ctx >= 1<<20}
	if T == 1 {
		c.Op = attnDecodeOp[kind]
		_, c.S.Chunks = kernelrt.AttnDecodeChunk(ctx, nKV, 2)
		if c.S.Chunks > 1 {
			c.SplitTol = attnSplitTol
		}
	} else {
		c.Op = attnPrefillOp[kind]
	}
	qStride := nHeads*headDim + 2*nKV*headDim // q in fused QKV rows
	var cache *kvCacheData
	var q, out, scr []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("attn/" + c.Fn + "/" + c.Shape)
		cache = newKVCacheData(r, kind, nKV, headDim, maxCtx, ctx, nil)
		q = make([]float32, (T-1)*qStride+nHeads*headDim)
		r.fill(q, -2, 2)
		out, scr = make([]float32, T*nHeads*headDim), make([]float32, kernelrt.AttnScratchFloats(headDim))
		ref, scale = attnRef(cache, q, T, qStride, nHeads, pos0, float64(softcap))
	}
	c.free = func() { cache, q, out, scr, ref, scale = nil, nil, nil, nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(out)
		return cache.attention(e, out, q, scr, T, qStride, nHeads, pos0, softcap)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstVs(out, ref, scale, floor), "" }
	return c
}

// attnChunkedCase is AttnDecode* with an explicit chunk (every chunk count the caller may
// pick), then AttnMerge: the decode row's split (KV heads x chunks) must not change a bit.
func attnChunkedCase(kind kvKind, ctx, chunk int, full bool) *Case {
	nch := (ctx + chunk - 1) / chunk
	c := &Case{Metric: attnMetric, Op: attnDecodeOp[kind], Fn: "AttnDecode" + kind.String() + "+AttnMerge", Full: full,
		Shape: fmt.Sprintf("ctx=%d chunk=%d heads=%d/%d hd=%d", ctx, chunk, nHeads, nKVHeads, headDim),
		S:     kernelrt.Shape{Tokens: 1, Heads: nHeads, KVHeads: nKVHeads, HeadD: headDim, Ctx: ctx, Chunks: nch},
		Cost:  nHeads * ctx * headDim, Tol: 1e-5}
	var cache *kvCacheData
	var q, out, part, scr []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("attnchunk/" + c.Fn + "/" + c.Shape)
		cache = newKVCacheData(r, kind, nKVHeads, headDim, ctx, ctx, nil)
		q = make([]float32, nHeads*headDim)
		r.fill(q, -2, 2)
		out, scr = make([]float32, nHeads*headDim), make([]float32, kernelrt.AttnScratchFloats(headDim))
		part = make([]float32, kernelrt.AttnPartFloats(nHeads, headDim, nch))
		ref, scale = attnRef(cache, q, 1, nHeads*headDim, nHeads, ctx-1, 0)
	}
	c.free = func() { cache, q, out, part, scr, ref, scale = nil, nil, nil, nil, nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(out)
		fillNaN(part)
		if err := cache.decode(e, out, part, q, scr, nHeads, ctx, chunk, 0); err != nil {
			return err
		}
		return e.AttnMerge(out, part, nHeads, headDim, nch)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstVs(out, ref, scale, floor), "" }
	return c
}

// mergeCase is AttnMerge alone on random partial records {m, l, acc} of nHeads heads x
// nChunks chunks: out = sum_c e^(m_c-M) acc_c / sum_c e^(m_c-M) l_c, M = max m_c.
func mergeCase(nChunks int) *Case {
	ps := headDim + 16
	c := &Case{Metric: "max |out-ref| / (sum_c w_c|acc_c| / sum_c w_c l_c)", Op: kernelrt.OpAttnMerge, Fn: "AttnMerge",
		Shape: fmt.Sprintf("heads=%d hd=%d chunks=%d", nHeads, headDim, nChunks),
		S:     kernelrt.Shape{Tokens: 1, Heads: nHeads, HeadD: headDim, Chunks: nChunks},
		Cost:  nHeads * nChunks * headDim, Tol: 1e-6}
	var part, out []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("merge/" + c.Shape)
		part = make([]float32, kernelrt.AttnPartFloats(nHeads, headDim, nChunks))
		fillNaN(part) // the 14 unused floats of each record stay NaN: never read
		out, ref, scale = make([]float32, nHeads*headDim), make([]float64, nHeads*headDim), make([]float64, nHeads*headDim)
		for h := 0; h < nHeads; h++ {
			M := math.Inf(-1)
			for ch := 0; ch < nChunks; ch++ {
				rec := part[(h*nChunks+ch)*ps:][:ps]
				rec[0] = r.uni(-8, 8)
				rec[1] = r.uni(1, 64)
				r.fill(rec[16:], -float64(rec[1]), float64(rec[1]))
				M = math.Max(M, float64(rec[0]))
			}
			l := 0.0
			for ch := 0; ch < nChunks; ch++ {
				rec := part[(h*nChunks+ch)*ps:][:ps]
				w := math.Exp(float64(rec[0]) - M)
				l += w * float64(rec[1])
				for d := 0; d < headDim; d++ {
					ref[h*headDim+d] += w * float64(rec[16+d])
					scale[h*headDim+d] += w * math.Abs(float64(rec[16+d]))
				}
			}
			for d := 0; d < headDim; d++ {
				ref[h*headDim+d] /= l
				scale[h*headDim+d] /= l
			}
		}
	}
	c.free = func() { part, out, ref, scale = nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(out); return e.AttnMerge(out, part, nHeads, headDim, nChunks) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstVs(out, ref, scale, floor), "" }
	return c
}

// kvAppendCase appends T tokens' keys (the K part of fused QKV rows) at pos0 to an F16 or
// Q8_0 cache: the stored bytes must be the reference conversion's (toF16, refQuantQ8), and
// every other byte unchanged. The source holds a NaN and an Inf (poisoned Q8_0 blocks).
func kvAppendCase(kind kvKind, T, pos0 int) *Case {
	c := &Case{Metric: "bytes differing from the reference conversion (exact)", Op: kernelrt.OpKVAppendF16, Fn: "KVAppendF16",
		Shape: fmt.Sprintf("T=%d kvheads=%d hd=%d pos0=%d ctx=%d", T, nKVHeads, headDim, pos0, maxCtx),
		S:     kernelrt.Shape{Tokens: T, KVHeads: nKVHeads, HeadD: headDim}, Cost: T * nKVHeads * headDim}
	if kind == kvQ8 {
		c.Op, c.Fn = kernelrt.OpKVAppendQ8_0, "KVAppendQ8_0"
	}
	row := nKVHeads * headDim
	n := nKVHeads * maxCtx * headDim
	var src []float32
	var h0, h, hRef []uint16
	var b0, b, bRef []kernelrt.BlockQ8_0
	c.setup = func() {
		r := newRng("kvappend/" + c.Fn + "/" + c.Shape)
		src = make([]float32, (T-1)*qkvStride+row)
		r.fill(src, -3, 3)
		src[5] = float32(math.NaN())
		src[len(src)-1] = float32(math.Inf(-1))
		src[40] = 70000 // overflows a half
		if kind == kvF16 {
			h0, h, hRef = make([]uint16, n), make([]uint16, n), make([]uint16, n)
			for i := range h0 {
				h0[i] = uint16(r.next())
			}
			copy(hRef, h0)
		} else {
			b0, b, bRef = make([]kernelrt.BlockQ8_0, n/32), make([]kernelrt.BlockQ8_0, n/32), make([]kernelrt.BlockQ8_0, n/32)
			r.fillBytes(bytesOf(b0))
			copy(bRef, b0)
		}
		for t := 0; t < T; t++ {
			for g := 0; g < nKVHeads; g++ {
				s := src[t*qkvStride+g*headDim:][:headDim]
				at := (g*maxCtx + pos0 + t) * headDim
				if kind == kvF16 {
					for d, v := range s {
						hRef[at+d] = toF16(v)
					}
				} else {
					refQuantQ8(bRef[at/32:at/32+headDim/32], s)
				}
			}
		}
	}
	c.free = func() { src, h0, h, hRef, b0, b, bRef = nil, nil, nil, nil, nil, nil, nil }
	c.run = func(e exec) error {
		if kind == kvF16 {
			copy(h, h0)
			return e.KVAppendF16(h, src, T, qkvStride, nKVHeads, headDim, maxCtx, pos0)
		}
		copy(b, b0)
		return e.KVAppendQ8_0(b, src, T, qkvStride, nKVHeads, headDim, maxCtx, pos0)
	}
	c.outB = func() []byte {
		if kind == kvF16 {
			return bytesOf(h)
		}
		return bytesOf(b)
	}
	c.check = func() (float64, string) {
		var d int
		if kind == kvF16 {
			d = diffB(bytesOf(h), bytesOf(hRef))
		} else {
			d = diffB(bytesOf(b), bytesOf(bRef))
		}
		return float64(d), ""
	}
	return c
}

// attnCases are the cases of the F16/Q8_0 appends and of attention over each cache type:
// decode at depths 1..16384 (the Qwen2-0.5B heads, 14/2 x 64; 8/1 heads where two workers
// split the cache into chunks and merge), prefill from 7 to 128 tokens at depths up to 16384,
// every chunk count through AttnDecode*+AttnMerge, and AttnMerge alone. Full marks the long
// ones (the quick run keeps depths up to 2048).
func attnCases() []*Case {
	var cs []*Case
	for _, kind := range []kvKind{kvF16, kvQ8} {
		cs = append(cs, kvAppendCase(kind, 1, 16), kvAppendCase(kind, 7, 17), kvAppendCase(kind, 128, 0))
	}
	for _, kind := range []kvKind{kvF32, kvF16, kvQ8} {
		for _, depth := range []int{1, 17, 65, 512, 2048, 8192, 16384} {
			cs = append(cs, attnCaseKV(kind, 1, depth-1, nHeads, nKVHeads, depth > 2048))
		}
		cs = append(cs, attnCaseKV(kind, 1, 2047, 8, 1, false), attnCaseKV(kind, 1, 16383, 8, 1, true))
		cs = append(cs, attnCaseKV(kind, 7, 17, nHeads, nKVHeads, false), attnCaseKV(kind, 128, 0, nHeads, nKVHeads, false),
			attnCaseKV(kind, 40, 300, 8, 1, false), attnCaseKV(kind, 128, 2048, nHeads, nKVHeads, true),
			attnCaseKV(kind, 64, 8128, nHeads, nKVHeads, true), attnCaseKV(kind, 16, 16368, nHeads, nKVHeads, true))
		// gemma2's soft-capped scores: a cap of 1.5 bends most of these scores (q in [-2, 2]);
		// decode unsplit and split into merged chunks, prefill
		cs = append(cs, attnCaseCap(kind, 1, 511, nHeads, nKVHeads, false, 1.5), attnCaseCap(kind, 1, 2047, 8, 1, false, 1.5),
			attnCaseCap(kind, 40, 300, 8, 1, false, 1.5))
		cs = append(cs, attnChunkedCase(kind, 2048, 256, false), attnChunkedCase(kind, 1000, 64, false),
			attnChunkedCase(kind, 16384, 1024, true))
	}
	cs = append(cs, mergeCase(2), mergeCase(8), mergeCase(1))
	return cs
}

// attnCalib are the representative calls calibration and the op benchmarks time.
var attnCalib = map[string]bool{
	"KVAppendF16 T=1 kvheads=2 hd=64 pos0=16 ctx=512": true, "KVAppendQ8_0 T=1 kvheads=2 hd=64 pos0=16 ctx=512": true,
	"AttentionF32 T=1 ctx=512 heads=14/2 hd=64": true, "AttentionF16 T=1 ctx=512 heads=14/2 hd=64": true,
	"AttentionQ8_0 T=1 ctx=512 heads=14/2 hd=64": true, "AttnMerge heads=14 hd=64 chunks=2": true,
	"AttentionF32 T=128 ctx=128 heads=14/2 hd=64": true, "AttentionF16 T=128 ctx=128 heads=14/2 hd=64": true,
	"AttentionQ8_0 T=128 ctx=128 heads=14/2 hd=64": true,
}
