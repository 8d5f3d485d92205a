package kernelrt

// Tests of kernels_attn.go: the F16 / Q8_0 KV appends and attention over F32 / F16 / Q8_0
// caches (AttentionF32/F16/Q8_0, AttnDecode*/AttnMerge), for every backend x variant this CPU
// runs, serially and on a Runtime (chunked decode + merge included).
//
// Accuracy, against an independent float64 reference computed from the values the cache
// stores (F16: the halves widened; Q8_0: d*q, and scores from the query quantized by the
// Q8_0 rule with exact integer block dot products, as the kernels define them):
// |got-ref| <= attnTol * sum_j w_j*|V[j][d]| (the softmax-weighted magnitude of the output
// element). The C banner documents 4e-6 and measures 6.5e-7; 1e-5 leaves room for long caches.

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

const attnTol = 1e-5

var kvKinds = []kvKind{kvF32, kvF16, kvQ8}

func (k kvKind) String() string { return [...]string{"F32", "F16", "Q8_0"}[k] }

// attnCase is one attention problem over a cache of one kind: positions 0..pos0+tokens-1
// filled, the rest NaN (F32, F16) or poisoned blocks (Q8_0), so a kernel reading past the
// causal range poisons its output.
type attnCase struct {
	kind                                                     kvKind
	tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int
	q                                                        []float32
	kf, vf                                                   []float32
	kh, vh                                                   []uint16
	kq, vq                                                   []BlockQ8_0
}

func (c *attnCase) String() string {
	return fmt.Sprintf("%s T=%d pos0=%d heads=%d/%d hd=%d ctx=%d", c.kind, c.tokens, c.pos0, c.nHeads, c.nKVHeads, c.headDim, c.maxCtx)
}

// newAttnCase fills the caches with values uniform in [-1, 1] stored in kind (F16 by
// FP32ToFP16, Q8_0 by the spec quantizer) and q uniform in [-1.5, 1.5).
func newAttnCase(rng *rand.Rand, kind kvKind, tokens, nHeads, nKVHeads, headDim, maxCtx, pos0, qGap int) *attnCase {
	c := &attnCase{kind: kind, tokens: tokens, qStride: nHeads*headDim + qGap, nHeads: nHeads, nKVHeads: nKVHeads,
		headDim: headDim, maxCtx: maxCtx, pos0: pos0}
	c.q = randF32(rng, (tokens-1)*c.qStride+nHeads*headDim, 1.5)
	n := nKVHeads * maxCtx * headDim
	kf, vf := make([]float32, n), make([]float32, n)
	nan := float32(math.NaN())
	for i := range kf {
		if i/headDim%maxCtx < pos0+tokens {
			kf[i], vf[i] = 2*rng.Float32()-1, 2*rng.Float32()-1
		} else {
			kf[i], vf[i] = nan, nan
		}
	}
	c.store(kf, vf)
	return c
}

// store sets the caches from float values, converted to the case's kind.
func (c *attnCase) store(kf, vf []float32) {
	switch c.kind {
	case kvF32:
		c.kf, c.vf = kf, vf
	case kvF16:
		c.kh, c.vh = make([]uint16, len(kf)), make([]uint16, len(vf))
		for i := range kf {
			c.kh[i], c.vh[i] = FP32ToFP16(kf[i]), FP32ToFP16(vf[i])
		}
	case kvQ8:
		c.kq, c.vq = specQ8_0(kf), specQ8_0(vf)
	}
}

// val is the stored value of element d of row (g, j) in float64.
func (c *attnCase) val(v bool, g, j, d int) float64 {
	i := (g*c.maxCtx+j)*c.headDim + d
	switch c.kind {
	case kvF32:
		if v {
			return float64(c.vf[i])
		}
		return float64(c.kf[i])
	case kvF16:
		if v {
			return fp16F64(c.vh[i])
		}
		return fp16F64(c.kh[i])
	}
	bs := c.kq
	if v {
		bs = c.vq
	}
	b := &bs[i/QK]
	return fp16F64(b.D) * float64(b.Qs[i%QK])
}

// score is dot(q row, K[g][j]) as the kind defines it, in float64.
func (c *attnCase) score(q []float32, qq []BlockQ8_0, g, j int) float64 {
	s := 0.0
	if c.kind != kvQ8 {
		for d := 0; d < c.headDim; d++ {
			s += float64(q[d]) * c.val(false, g, j, d)
		}
		return s
	}
	kb := c.kq[(g*c.maxCtx+j)*c.headDim/QK:][:c.headDim/QK]
	for b := range kb {
		isum := 0
		for i := 0; i < QK; i++ {
			isum += int(qq[b].Qs[i]) * int(kb[b].Qs[i])
		}
		s += fp16F64(qq[b].D) * fp16F64(kb[b].D) * float64(isum)
	}
	return s
}

// refF64 is the attention in float64 and, per output element, sum_j w_j*|V[j][d]|. Token t
// sees positions 0..pos0+t (decode: the one token sees 0..pos0).
func (c *attnCase) refF64() (ref, mag []float64) {
	hd := c.headDim
	ref, mag = make([]float64, c.tokens*c.nHeads*hd), make([]float64, c.tokens*c.nHeads*hd)
	scale := 1 / math.Sqrt(float64(hd))
	for t := 0; t < c.tokens; t++ {
		n := c.pos0 + t + 1
		w := make([]float64, n)
		for h := 0; h < c.nHeads; h++ {
			g := h / (c.nHeads / c.nKVHeads)
			q := c.q[t*c.qStride+h*hd:][:hd]
			var qq []BlockQ8_0
			if c.kind == kvQ8 {
				qq = specQ8_0(q)
			}
			m := math.Inf(-1)
			for j := range w {
				w[j] = c.score(q, qq, g, j) * scale
				m = math.Max(m, w[j])
			}
			sum := 0.0
			for j := range w {
				w[j] = math.Exp(w[j] - m)
				sum += w[j]
			}
			o := (t*c.nHeads + h) * hd
			for j := range w {
				wj := w[j] / sum
				for d := 0; d < hd; d++ {
					v := c.val(true, g, j, d)
					ref[o+d] += wj * v
					mag[o+d] += wj * math.Abs(v)
				}
			}
		}
	}
	return ref, mag
}

// attention makes the AttentionF32/F16/Q8_0 call of the case on e.
func (c *attnCase) attention(e Ops, out, scratch []float32) error {
	switch c.kind {
	case kvF32:
		return e.AttentionF32(out, c.q, c.kf, c.vf, scratch, c.tokens, c.qStride, c.nHeads, c.nKVHeads, c.headDim, c.maxCtx, c.pos0, 0)
	case kvF16:
		return e.AttentionF16(out, c.q, c.kh, c.vh, scratch, c.tokens, c.qStride, c.nHeads, c.nKVHeads, c.headDim, c.maxCtx, c.pos0, 0)
	}
	return e.AttentionQ8_0(out, c.q, c.kq, c.vq, scratch, c.tokens, c.qStride, c.nHeads, c.nKVHeads, c.headDim, c.maxCtx, c.pos0, 0)
}

// decode makes the AttnDecode* call of a one-token case (nCtx = pos0+1) with the given chunk.
func (c *attnCase) decode(e Ops, out, part, scratch []float32, chunk int) error {
	n := c.pos0 + 1
	switch c.kind {
	case kvF32:
		return e.AttnDecodeF32(out, part, c.q, c.kf, c.vf, scratch, c.nHeads, c.nKVHeads, c.headDim, c.maxCtx, n, chunk, 0)
	case kvF16:
		return e.AttnDecodeF16(out, part, c.q, c.kh, c.vh, scratch, c.nHeads, c.nKVHeads, c.headDim, c.maxCtx, n, chunk, 0)
	}
	return e.AttnDecodeQ8_0(out, part, c.q, c.kq, c.vq, scratch, c.nHeads, c.nKVHeads, c.headDim, c.maxCtx, n, chunk, 0)
}

// caches returns the caches' base pointers.
func (c *attnCase) caches() (kern.P, kern.P) {
	switch c.kind {
	case kvF32:
		return sliceP(c.kf), sliceP(c.vf)
	case kvF16:
		return sliceP(c.kh), sliceP(c.vh)
	}
	return sliceP(c.kq), sliceP(c.vq)
}

// runUnits calls the kernel of set s directly on units [u0, u1): decode (one chunk) for one
// token, prefill otherwise.
func (c *attnCase) runUnits(s *kern.Set, out, scratch []float32, u0, u1 int) {
	kc, vc := c.caches()
	if c.tokens == 1 {
		op := attnDecodeOps[c.kind]
		s.K[op](argsAttnDecodeF32(sliceP(out), nil, sliceP(c.q), kc, vc, 0, attnHeads(c.nHeads, c.nKVHeads), c.headDim, c.maxCtx, c.pos0+1, c.pos0+1), sliceP(scratch), u0, u1)
		return
	}
	op := attnPrefillOps[c.kind]
	s.K[op](argsAttnPrefillF32(sliceP(out), sliceP(c.q), kc, vc, 0, attnHeads(c.nHeads, c.nKVHeads), c.headDim, c.maxCtx, c.qStride, c.pos0, c.tokens), sliceP(scratch), u0, u1)
}

// checkAttnOut compares out with the reference; rows outside want (token, head) hold
// sentinels. It returns the worst error relative to mag.
func checkAttnOut(t *testing.T, what string, c *attnCase, out []float32, ref, mag []float64, want func(tok, h int) bool) float64 {
	t.Helper()
	worst, bad := 0.0, 0
	for i, got := range out {
		tok, h := i/c.headDim/c.nHeads, i/c.headDim%c.nHeads
		if want != nil && !want(tok, h) {
			if got != opsSentinel {
				t.Errorf("%s: wrote out[%d] (token %d head %d) outside its units", what, i, tok, h)
				return worst
			}
			continue
		}
		e := math.Abs(float64(got)-ref[i]) / mag[i]
		if !(e <= attnTol) {
			if bad++; bad <= 3 {
				t.Errorf("%s: out[%d] = %g, want %g (error %.3g of sum w|v| = %g)", what, i, got, ref[i], e, mag[i])
			}
		}
		if !(e <= worst) {
			worst = e
		}
	}
	return worst
}

// attnShapes are decode and prefill problems over every kind: Qwen2-0.5B's heads (14/2, 64),
// group sizes 1..20, head sizes 16..256, contexts crossing 64-key blocks and 16-token tiles.
func attnShapes(rng *rand.Rand, kind kvKind) []*attnCase {
	hd16 := 48 // a multiple of 16 but not 32: Q8_0 needs 32
	if kind == kvQ8 {
		hd16 = 96
	}
	return []*attnCase{
		newAttnCase(rng, kind, 1, qwenHeads, qwenKVHeads, qwenHeadDim, 64, 0, 0),
		newAttnCase(rng, kind, 1, qwenHeads, qwenKVHeads, qwenHeadDim, 512, 16, 0),
		newAttnCase(rng, kind, 1, qwenHeads, qwenKVHeads, qwenHeadDim, 512, 511, 256),
		newAttnCase(rng, kind, 128, qwenHeads, qwenKVHeads, qwenHeadDim, 128, 0, 256),
		newAttnCase(rng, kind, 5, qwenHeads, qwenKVHeads, qwenHeadDim, 200, 100, 0),
		newAttnCase(rng, kind, 37, 4, 4, 32, 300, 150, 3),
		newAttnCase(rng, kind, 3, 6, 2, hd16, 90, 65, 0),
		newAttnCase(rng, kind, 2, 2, 1, 128, 100, 70, 0),
		newAttnCase(rng, kind, 1, 2, 1, 256, 300, 260, 0),
		newAttnCase(rng, kind, 17, 20, 1, 32, 80, 50, 0), // a group of 20 heads: several register blocks
	}
}

func TestAttention(t *testing.T) {
	for _, kind := range kvKinds {
		rng := newRand(105 + uint64(kind))
		cases := attnShapes(rng, kind)
		refs := make([][2][]float64, len(cases))
		for i, c := range cases {
			refs[i][0], refs[i][1] = c.refF64()
		}
		t.Run(kind.String(), func(t *testing.T) {
			forEachSet(t, attnOpName(kind), func(t *testing.T, s *kern.Set) {
				worst := 0.0
				for i, c := range cases {
					out := sentinels(c.tokens * c.nHeads * c.headDim)
					mustOK(t, c.attention(Serial{}, out, make([]float32, AttnScratchFloats(c.headDim))))
					worst = max(worst, checkAttnOut(t, c.String(), c, out, refs[i][0], refs[i][1], nil))
				}
				t.Logf("worst error %.2g of sum_j w_j|v_j|", worst)
			})
		})
	}
}

// attnOpName is the kern name of the decode kernel of kind (forEachSet skips sets without it).
func attnOpName(k kvKind) string { return kern.GoNames[attnDecodeOps[k]] }

// TestAttnDecodeChunks: the decode kernel split into chunks of every size, then merged, gives
// the reference within the bound, and the chunked units write only their own records.
func TestAttnDecodeChunks(t *testing.T) {
	for _, kind := range kvKinds {
		rng := newRand(115 + uint64(kind))
		c := newAttnCase(rng, kind, 1, 8, 2, 64, 1100, 1049, 0)
		ref, mag := c.refF64()
		t.Run(kind.String(), func(t *testing.T) {
			forEachSet(t, attnOpName(kind), func(t *testing.T, s *kern.Set) {
				scr := make([]float32, AttnScratchFloats(c.headDim))
				for _, chunk := range []int{1, 63, 64, 256, 1000, 1049, 1050, 5000} {
					nch := (c.pos0 + chunk) / chunk
					part := make([]float32, AttnPartFloats(c.nHeads, c.headDim, nch))
					out := sentinels(c.nHeads * c.headDim)
					mustOK(t, c.decode(Serial{}, out, part, scr, chunk))
					if nch > 1 {
						mustOK(t, AttnMerge(out, part, c.nHeads, c.headDim, nch))
					}
					checkAttnOut(t, fmt.Sprintf("%v chunk %d (%d chunks)", c, chunk, nch), c, out, ref, mag, nil)
				}
			})
		})
	}
}

// TestAttentionRuntime: on a Runtime of 2 and 3 workers every path (decode unchunked,
// chunked + merged, prefill) meets the reference, and a merged decode stays within the bound
// of Serial's unchunked result.
func TestAttentionRuntime(t *testing.T) {
	for _, threads := range []int{2, 3} {
		rt := newTestRuntime(t, Options{Threads: threads})
		for _, op := range []Op{OpAttnDecodeF32, OpAttnDecodeF16, OpAttnDecodeQ8_0, OpAttnPrefillF32, OpAttnPrefillF16, OpAttnPrefillQ8_0, OpAttnMerge} {
			mustOK(t, rt.SetMinElements(op, 1, 1)) // split whenever units allow
		}
		for _, kind := range kvKinds {
			rng := newRand(125 + uint64(kind))
			for _, c := range []*attnCase{
				newAttnCase(rng, kind, 1, 8, 1, 64, 2048, 2000, 0),  // 1 KV head: chunks + merge
				newAttnCase(rng, kind, 1, 14, 2, 64, 1024, 700, 0),  // 2 KV heads
				newAttnCase(rng, kind, 1, 4, 4, 128, 600, 599, 0),   // 4 KV heads
				newAttnCase(rng, kind, 1, 8, 1, 32, 300, 100, 0),    // too short to chunk
				newAttnCase(rng, kind, 40, 8, 1, 64, 300, 200, 0),   // prefill, 3 tiles
				newAttnCase(rng, kind, 5, 14, 2, 64, 300, 290, 128), // prefill, 1 tile per KV head
			} {
				ref, mag := c.refF64()
				scr := make([]float32, AttnScratchFloats(c.headDim))
				ser := make([]float32, c.tokens*c.nHeads*c.headDim)
				mustOK(t, c.attention(Serial{}, ser, scr))
				out := sentinels(len(ser))
				mustOK(t, c.attention(rt, out, scr))
				what := fmt.Sprintf("threads=%d %v", threads, c)
				checkAttnOut(t, what, c, out, ref, mag, nil)
				for i := range out {
					if d := math.Abs(float64(out[i]) - float64(ser[i])); !(d <= 2*attnTol*mag[i]) {
						t.Errorf("%s: out[%d] = %g, Serial gives %g", what, i, out[i], ser[i])
						break
					}
				}
			}
		}
	}
}

// TestAttentionRuntimeSplit: the decode chunk rule as the Runtime applies it, seen in the
// report: 1 KV head on 2 workers gives 2 chunks and a merge; 2 KV heads give 1 chunk each.
func TestAttentionRuntimeSplit(t *testing.T) {
	rt := newTestRuntime(t, Options{Threads: 2, Trace: 64})
	rng := newRand(131)
	for _, tc := range []struct {
		nKV, pos0        int
		decode, merge    int // active workers; 0 = not run
		wantChunk, wantN int
	}{
		{1, 2047, 2, 1, 1024, 2}, // the merge of 8 heads x 2 chunks is below its MinElements: one worker
		{2, 2047, 2, 0, 2048, 1},
		{1, 300, 1, 0, 320, 1}, // 301 positions: fewer than 2 x 256
	} {
		chunk, n := AttnDecodeChunk(tc.pos0+1, tc.nKV, 2)
		if chunk != tc.wantChunk || n != tc.wantN {
			t.Errorf("AttnDecodeChunk(%d, %d, 2) = %d, %d; want %d, %d", tc.pos0+1, tc.nKV, chunk, n, tc.wantChunk, tc.wantN)
		}
		c := newAttnCase(rng, kvF16, 1, 8, tc.nKV, 64, 2048, tc.pos0, 0)
		mustOK(t, rt.SetMinElements(OpAttnDecodeF16, 1, 1))
		rt.ResetReport()
		mustOK(t, c.attention(rt, make([]float32, c.nHeads*c.headDim), make([]float32, AttnScratchFloats(64))))
		got := map[string]int{}
		for _, r := range rt.Report() {
			got[r.Op] = r.Active
		}
		if got["attn_decode_f16"] != tc.decode || got["attn_merge"] != tc.merge {
			t.Errorf("nKV=%d ctx=%d: report %v, want decode on %d workers, merge on %d", tc.nKV, tc.pos0+1, got, tc.decode, tc.merge)
		}
	}
}

// TestAttentionSkewed makes the block-wise (online) softmax of the SIMD variants rescale hard:
// scores that rise along the cache (each new block holds the max, and earlier blocks' weights
// shrink by up to e^-40), fall along it, or peak in the middle, over 2000 positions; decode
// unchunked and in chunks of 256.
func TestAttentionSkewed(t *testing.T) {
	for _, kind := range kvKinds {
		rng := newRand(111 + uint64(kind))
		var cases []*attnCase
		for _, shape := range []func(j, n int) float64{
			func(j, n int) float64 { return 40 * float64(j) / float64(n) },
			func(j, n int) float64 { return -40 * float64(j) / float64(n) },
			func(j, n int) float64 { return 30 * math.Exp(-math.Pow(float64(j-n/2)/50, 2)) },
		} {
			c := newAttnCase(rng, kvF32, 1, qwenHeads, qwenKVHeads, qwenHeadDim, 2000, 1999, 0)
			// K[g][j] = unit(q of the group's first head) * target score * sqrt(hd) + small noise.
			for g := 0; g < c.nKVHeads; g++ {
				q := c.q[g*(c.nHeads/c.nKVHeads)*c.headDim:][:c.headDim]
				qq := 0.0
				for _, v := range q {
					qq += float64(v) * float64(v)
				}
				for j := 0; j < c.maxCtx; j++ {
					want := shape(j, c.maxCtx) * math.Sqrt(float64(c.headDim)) / qq
					for d := range q {
						c.kf[(g*c.maxCtx+j)*c.headDim+d] = float32(want*float64(q[d])) + (2*rng.Float32()-1)*0.01
					}
				}
			}
			c.kind = kind
			c.store(c.kf, c.vf)
			cases = append(cases, c)
		}
		t.Run(kind.String(), func(t *testing.T) {
			forEachSet(t, attnOpName(kind), func(t *testing.T, s *kern.Set) {
				for i, c := range cases {
					ref, mag := c.refF64()
					scr := make([]float32, AttnScratchFloats(c.headDim))
					out := make([]float32, c.nHeads*c.headDim)
					mustOK(t, c.attention(Serial{}, out, scr))
					checkAttnOut(t, fmt.Sprintf("shape %d %v", i, c), c, out, ref, mag, nil)
					part := make([]float32, AttnPartFloats(c.nHeads, c.headDim, 8))
					mustOK(t, c.decode(Serial{}, out, part, scr, 256))
					mustOK(t, AttnMerge(out, part, c.nHeads, c.headDim, 8))
					checkAttnOut(t, fmt.Sprintf("shape %d %v, chunks of 256", i, c), c, out, ref, mag, nil)
				}
			})
		})
	}
}

// ---- KV appends ----

func TestKVAppendF16Q8_0(t *testing.T) {
	rng := newRand(112)
	for _, kind := range []kvKind{kvF16, kvQ8} {
		t.Run(kind.String(), func(t *testing.T) {
			forEachSet(t, kern.GoNames[map[kvKind]Op{kvF16: OpKVAppendF16, kvQ8: OpKVAppendQ8_0}[kind]], func(t *testing.T, s *kern.Set) {
				for _, sh := range [][6]int{{1, 128, 2, 64, 600, 100}, {7, 1152, 2, 64, 50, 17}, {3, 200, 3, 32, 10, 7}, {2, 96, 1, 96, 4, 2}} {
					tokens, stride, nKV, hd, maxCtx, pos0 := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]
					src := randScaledF32(rng, (tokens-1)*stride+nKV*hd)
					src[0], src[len(src)-1] = float32(math.Inf(1)), float32(math.NaN()) // poisoned blocks, Inf/NaN halves
					n := nKV * maxCtx * hd
					what := fmt.Sprintf("%v", sh)
					if kind == kvF16 {
						cache, want := make([]uint16, n), make([]uint16, n)
						for i := range cache {
							cache[i], want[i] = 0x3c00, 0x3c00 // 1.0: untouched
						}
						for tk := 0; tk < tokens; tk++ {
							for g := 0; g < nKV; g++ {
								for d := 0; d < hd; d++ {
									want[(g*maxCtx+pos0+tk)*hd+d] = FP32ToFP16(src[tk*stride+g*hd+d])
								}
							}
						}
						mustOK(t, KVAppendF16(cache, src, tokens, stride, nKV, hd, maxCtx, pos0))
						for i := range cache {
							if cache[i] != want[i] {
								t.Fatalf("%s: cache[%d] = %#04x, want %#04x", what, i, cache[i], want[i])
							}
						}
						continue
					}
					cache, want := make([]BlockQ8_0, n/QK), make([]BlockQ8_0, n/QK)
					for i := range cache {
						cache[i].D, want[i].D = 0x1234, 0x1234
					}
					for tk := 0; tk < tokens; tk++ {
						for g := 0; g < nKV; g++ {
							copy(want[(g*maxCtx+pos0+tk)*hd/QK:], specQ8_0(src[tk*stride+g*hd:][:hd]))
						}
					}
					mustOK(t, KVAppendQ8_0(cache, src, tokens, stride, nKV, hd, maxCtx, pos0))
					for i := range cache {
						if cache[i] != want[i] {
							t.Fatalf("%s: block %d = %+v, want %+v", what, i, cache[i], want[i])
						}
					}
				}
			})
		})
	}
}

// ---- slices: each unit writes only its rows ----

func TestAttnUnits(t *testing.T) {
	rng := newRand(113)
	for _, kind := range kvKinds {
		dec := newAttnCase(rng, kind, 1, 6, 3, 32, 100, 70, 0)
		pre := newAttnCase(rng, kind, 40, 4, 2, 64, 64, 20, 0) // 3 tiles per KV head
		t.Run(kind.String(), func(t *testing.T) {
			forEachSet(t, attnOpName(kind), func(t *testing.T, s *kern.Set) {
				scr := make([]float32, AttnScratchFloats(64))
				ref, mag := dec.refF64()
				for _, r := range [][2]int{{0, 3}, {1, 2}, {2, 3}} {
					out := sentinels(dec.nHeads * dec.headDim)
					dec.runUnits(s, out, scr, r[0], r[1])
					checkAttnOut(t, fmt.Sprintf("decode units [%d,%d)", r[0], r[1]), dec, out, ref, mag,
						func(_, h int) bool { return h/2 >= r[0] && h/2 < r[1] })
				}
				ref, mag = pre.refF64()
				for _, r := range [][2]int{{0, 6}, {0, 1}, {1, 2}, {4, 6}, {2, 3}} {
					out := sentinels(pre.tokens * pre.nHeads * pre.headDim)
					pre.runUnits(s, out, scr, r[0], r[1])
					in := func(tok, h int) bool {
						for u := r[0]; u < r[1]; u++ {
							g, k := u/3, u%3
							tile := k / 2
							if k&1 != 0 {
								tile = 2 - k/2
							}
							if h/2 == g && tok/16 == tile {
								return true
							}
						}
						return false
					}
					checkAttnOut(t, fmt.Sprintf("prefill units [%d,%d)", r[0], r[1]), pre, out, ref, mag, in)
				}
			})
		})
	}
}

// ---- guard pages: nothing read or written outside the arguments ----

func TestAttnGuardPages(t *testing.T) {
	rng := newRand(114)
	places := []struct {
		name string
		f32  func(testing.TB, int) []float32
		u16  func(testing.TB, int) []uint16
		q8   func(testing.TB, int) []BlockQ8_0
	}{
		{"tail", guardTail[float32], guardTail[uint16], guardTail[BlockQ8_0]},
		{"head", guardHead[float32], guardHead[uint16], guardHead[BlockQ8_0]},
	}
	for _, kind := range kvKinds {
		t.Run(kind.String(), func(t *testing.T) {
			forEachSet(t, attnOpName(kind), func(t *testing.T, s *kern.Set) {
				for _, p := range places {
					// Caches full (the last row touches the guard), scratch of exactly
					// AttnScratchFloats, a head size of 32 (the smallest Q8_0 one) and 256.
					for _, c := range []*attnCase{
						newAttnCase(rng, kind, 1, 2, 1, 64, 17, 16, 0),
						newAttnCase(rng, kind, 3, 2, 1, 64, 35, 32, 0),
						newAttnCase(rng, kind, 2, 4, 2, 32, 9, 7, 1),
						newAttnCase(rng, kind, 1, 2, 2, 256, 70, 69, 0),
						newAttnCase(rng, kind, 19, 2, 2, 32, 19, 0, 0),
					} {
						want := make([]float32, c.tokens*c.nHeads*c.headDim)
						mustOK(t, c.attention(Serial{}, want, make([]float32, AttnScratchFloats(c.headDim))))
						gc := *c
						gc.q = guardedCopy(t, c.q, p.f32)
						switch kind {
						case kvF32:
							gc.kf, gc.vf = guardedCopy(t, c.kf, p.f32), guardedCopy(t, c.vf, p.f32)
						case kvF16:
							gc.kh, gc.vh = guardedCopy(t, c.kh, p.u16), guardedCopy(t, c.vh, p.u16)
						case kvQ8:
							gc.kq, gc.vq = guardedCopy(t, c.kq, p.q8), guardedCopy(t, c.vq, p.q8)
						}
						out := p.f32(t, len(want))
						mustOK(t, gc.attention(Serial{}, out, p.f32(t, AttnScratchFloats(c.headDim))))
						mustSame(t, fmt.Sprintf("%s %v", p.name, c), out, want)
						if c.tokens == 1 {
							part := p.f32(t, AttnPartFloats(c.nHeads, c.headDim, 2))
							out = p.f32(t, len(want))
							mustOK(t, gc.decode(Serial{}, out, part, p.f32(t, AttnScratchFloats(c.headDim)), (c.pos0+2)/2))
							mustOK(t, AttnMerge(out, part, c.nHeads, c.headDim, 2))
							for i := range out {
								if d := math.Abs(float64(out[i] - want[i])); !(d <= 1e-5) {
									t.Errorf("%s %v merged: out[%d] = %g, want %g", p.name, c, i, out[i], want[i])
									break
								}
							}
						}
					}
					src := randF32(rng, 70+64, 1)
					for _, pos0 := range []int{0, 3} {
						want := make([]uint16, 64*5)
						mustOK(t, KVAppendF16(want, src, 2, 70, 1, 64, 5, pos0))
						got := p.u16(t, len(want))
						mustOK(t, KVAppendF16(got, guardedCopy(t, src, p.f32), 2, 70, 1, 64, 5, pos0))
						for i := range got {
							if got[i] != want[i] {
								t.Fatalf("%s KVAppendF16 pos0 %d: differs at %d", p.name, pos0, i)
							}
						}
						wq := make([]BlockQ8_0, 64*5/QK)
						mustOK(t, KVAppendQ8_0(wq, src, 2, 70, 1, 64, 5, pos0))
						gq := p.q8(t, len(wq))
						mustOK(t, KVAppendQ8_0(gq, guardedCopy(t, src, p.f32), 2, 70, 1, 64, 5, pos0))
						for i := range gq {
							if gq[i] != wq[i] {
								t.Fatalf("%s KVAppendQ8_0 pos0 %d: differs at block %d", p.name, pos0, i)
							}
						}
					}
				}
			})
		})
	}
}

// ---- the generic ports agree with the C _ref kernels bit for bit ----

func TestAttnGenericMatchesCRef(t *testing.T) {
	gen, err1 := kern.Lookup("generic", cpu.Ref)
	cref, err2 := kern.Lookup("cgo", cpu.Ref)
	if err1 != nil || err2 != nil {
		t.Skip("needs both the generic and the cgo backend")
	}
	for _, kind := range kvKinds {
		rng := newRand(116 + uint64(kind))
		for _, c := range attnShapes(rng, kind) {
			var outs [2][]float32
			for i, s := range []*kern.Set{gen, cref} {
				withSet(s, func() {
					outs[i] = make([]float32, c.tokens*c.nHeads*c.headDim)
					mustOK(t, c.attention(Serial{}, outs[i], make([]float32, AttnScratchFloats(c.headDim))))
					if c.tokens == 1 && c.pos0 >= 64 {
						part := make([]float32, AttnPartFloats(c.nHeads, c.headDim, 3))
						merged := make([]float32, len(outs[i]))
						mustOK(t, c.decode(Serial{}, merged, part, make([]float32, AttnScratchFloats(c.headDim)), (c.pos0+3)/3))
						mustOK(t, AttnMerge(merged, part, c.nHeads, c.headDim, 3))
						outs[i] = append(outs[i], merged...)
					}
				})
			}
			mustSame(t, c.String(), outs[0], outs[1])
		}
		src := randScaledF32(rng, 3*128)
		src[5] = float32(math.NaN())
		var q8 [2][]BlockQ8_0
		var h16 [2][]uint16
		for i, s := range []*kern.Set{gen, cref} {
			withSet(s, func() {
				q8[i], h16[i] = make([]BlockQ8_0, 2*4*64/QK), make([]uint16, 2*4*64)
				mustOK(t, KVAppendQ8_0(q8[i], src, 3, 128, 2, 64, 4, 1))
				mustOK(t, KVAppendF16(h16[i], src, 3, 128, 2, 64, 4, 1))
			})
		}
		for i := range q8[0] {
			if q8[0][i] != q8[1][i] {
				t.Fatalf("KVAppendQ8_0: block %d differs", i)
			}
		}
		for i := range h16[0] {
			if h16[0][i] != h16[1][i] {
				t.Fatalf("KVAppendF16: element %d differs", i)
			}
		}
	}
}

// ---- argument errors ----

func TestAttnArgErrors(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	const nh, nkv, hd, ctx = 4, 2, 32, 16
	scrN := AttnScratchFloats(hd)
	q, kc, vc, out, scr := f(nh*hd), f(nkv*ctx*hd), f(nkv*ctx*hd), f(nh*hd), f(scrN)
	att := AttentionF32
	mustOK(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, ctx-1, 0))
	wantArgErr(t, att(out, q, kc, vc, scr, 0, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "tokens", "positive")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, 0, nkv, hd, ctx, 0, 0), "AttentionF32", "nHeads", "positive")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, 0, hd, ctx, 0, 0), "AttentionF32", "nKVHeads", "positive")
	wantArgErr(t, att(out, q, f(3*ctx*hd), f(3*ctx*hd), scr, 1, nh*hd, nh, 3, hd, ctx, 0, 0), "AttentionF32", "nKVHeads", "nHeads = 4", "nKVHeads = 3")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, nkv, 0, ctx, 0, 0), "AttentionF32", "headDim", "positive")
	wantArgErr(t, att(f(nh*24), f(nh*24), f(nkv*ctx*24), f(nkv*ctx*24), scr, 1, nh*24, nh, nkv, 24, ctx, 0, 0), "AttentionF32", "headDim", "24", "multiple of 16")
	wantArgErr(t, att(f(nh*272), f(nh*272), f(nkv*ctx*272), f(nkv*ctx*272), f(AttnScratchFloats(272)), 1, nh*272, nh, nkv, 272, ctx, 0, 0), "AttentionF32", "headDim", "272", "up to 256")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, 0, 0, 0), "AttentionF32", "maxCtx", "positive")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd-1, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "qStride", "127", "nHeads*headDim = 128")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, ctx, 0), "AttentionF32", "pos0", "16+1", "maxCtx = 16")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, -3, 0), "AttentionF32", "pos0", "negative", "-3")
	wantArgErr(t, att(f(127), q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "out", "127", "tokens*nHeads*headDim = 128")
	wantArgErr(t, att(f(256), q, kc, vc, scr, 2, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "q", "128", "(tokens-1)*qStride + nHeads*headDim = 256")
	wantArgErr(t, att(out, q, f(5), vc, scr, 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "kcache", "5", "nKVHeads*maxCtx*headDim = 1024 floats")
	wantArgErr(t, att(out, q, kc, nil, scr, 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "vcache", "nil", "1024")
	wantArgErr(t, att(out, q, kc, vc, f(scrN-1), 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "scratch", fmt.Sprint(scrN-1), fmt.Sprintf("AttnScratchFloats(headDim) = %d", scrN))
	wantArgErr(t, att(out, q, kc, vc, nil, 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "scratch", "nil")
	wantArgErr(t, att(kc[:nh*hd], q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "out", "overlaps kcache")
	wantArgErr(t, att(q, q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "out", "overlaps q")
	big := f(scrN + nh*hd)
	wantArgErr(t, att(big[:nh*hd], q, kc, vc, big[nh*hd-1:], 1, nh*hd, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "out", "overlaps scratch")
	wantArgErr(t, att(f(3*nh*hd), q, kc, vc, scr, 3, math.MaxInt/2, nh, nkv, hd, ctx, 0, 0), "AttentionF32", "qStride", "overflows")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, 0, -1), "AttentionF32", "softcap", "-1")
	wantArgErr(t, att(out, q, kc, vc, scr, 1, nh*hd, nh, nkv, hd, ctx, 0, float32(math.Inf(1))), "AttentionF32", "softcap", "+Inf")
	wantArgErr(t, AttnDecodeF32(out, nil, q, kc, vc, scr, nh, nkv, hd, ctx, ctx, ctx, float32(math.NaN())), "AttnDecodeF32", "softcap", "NaN")

	// The other kinds: cache lengths in their units, Q8_0's head size.
	h := func(n int) []uint16 { return make([]uint16, n) }
	b := func(n int) []BlockQ8_0 { return make([]BlockQ8_0, n) }
	mustOK(t, AttentionF16(out, q, h(nkv*ctx*hd), h(nkv*ctx*hd), scr, 1, nh*hd, nh, nkv, hd, ctx, 3, 0))
	wantArgErr(t, AttentionF16(out, q, h(nkv*ctx*hd-1), h(nkv*ctx*hd), scr, 1, nh*hd, nh, nkv, hd, ctx, 3, 0), "AttentionF16", "kcache", "1023", "1024 halves")
	mustOK(t, AttentionQ8_0(out, q, b(nkv*ctx), b(nkv*ctx), scr, 1, nh*hd, nh, nkv, hd, ctx, 3, 0))
	wantArgErr(t, AttentionQ8_0(out, q, b(nkv*ctx), b(nkv*ctx+1), scr, 1, nh*hd, nh, nkv, hd, ctx, 3, 0), "AttentionQ8_0", "vcache", "33", "nKVHeads*maxCtx*headDim/32 = 32 blocks")
	wantArgErr(t, AttentionQ8_0(f(nh*48), f(nh*48), b(nkv*ctx*48/32), b(nkv*ctx*48/32), scr, 1, nh*48, nh, nkv, 48, ctx, 0, 0), "AttentionQ8_0", "headDim", "48", "multiple of 32")

	// AttnDecode*(out, part, q, kcache, vcache, scratch, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk)
	part := f(AttnPartFloats(nh, hd, 2))
	mustOK(t, AttnDecodeF32(out, part, q, kc, vc, scr, nh, nkv, hd, ctx, ctx, 8, 0))
	mustOK(t, AttnDecodeF32(out, nil, q, kc, vc, scr, nh, nkv, hd, ctx, ctx, ctx, 0))
	wantArgErr(t, AttnDecodeF32(out, part, q, kc, vc, scr, nh, nkv, hd, ctx, 0, 8, 0), "AttnDecodeF32", "nCtx", "0", "1..16")
	wantArgErr(t, AttnDecodeF32(out, part, q, kc, vc, scr, nh, nkv, hd, ctx, ctx+1, 8, 0), "AttnDecodeF32", "nCtx", "17")
	wantArgErr(t, AttnDecodeF32(out, part, q, kc, vc, scr, nh, nkv, hd, ctx, ctx, 0, 0), "AttnDecodeF32", "chunk", "positive")
	wantArgErr(t, AttnDecodeF32(out, nil, q, kc, vc, scr, nh, nkv, hd, ctx, ctx, 8, 0), "AttnDecodeF32", "part", "nil", "AttnPartFloats(nHeads, headDim, nChunks) = 384")
	wantArgErr(t, AttnDecodeF32(out, part[:300], q, kc, vc, scr, nh, nkv, hd, ctx, ctx, 8, 0), "AttnDecodeF32", "part", "300")
	mustOK(t, AttnDecodeF32(out, nil, q, kc, vc, scr, nh, nkv, hd, ctx, ctx, math.MaxInt, 0)) // one chunk
	wantArgErr(t, AttnDecodeF32(out, kc[:384], q, kc, vc, scr, nh, nkv, hd, ctx, ctx, 8, 0), "AttnDecodeF32", "part", "overlaps kcache")
	wantArgErr(t, AttnDecodeF32(part[:nh*hd], part, q, kc, vc, scr, nh, nkv, hd, ctx, ctx, 8, 0), "AttnDecodeF32", "out", "overlaps part")
	wantArgErr(t, AttnDecodeF32(out, part, f(nh*hd+1), kc, vc, scr, nh, nkv, hd, ctx, ctx, 8, 0), "AttnDecodeF32", "q", "129", "nHeads*headDim = 128")
	wantArgErr(t, AttnDecodeF16(out, part, q, h(5), h(nkv*ctx*hd), scr, nh, nkv, hd, ctx, ctx, 8, 0), "AttnDecodeF16", "kcache", "5", "halves")
	wantArgErr(t, AttnDecodeQ8_0(out, part, q, b(nkv*ctx), b(nkv*ctx), f(10), nh, nkv, hd, ctx, ctx, 8, 0), "AttnDecodeQ8_0", "scratch", "10")

	// AttnMerge(out, part, nHeads, headDim, nChunks)
	mustOK(t, AttnMerge(out, part, nh, hd, 2))
	wantArgErr(t, AttnMerge(out, part, nh, hd, 3), "AttnMerge", "part", "384", "AttnPartFloats(nHeads, headDim, nChunks) = 576")
	wantArgErr(t, AttnMerge(out, part, nh, hd, 0), "AttnMerge", "nChunks", "positive")
	wantArgErr(t, AttnMerge(out, part, nh, 40, 1), "AttnMerge", "headDim", "40")
	wantArgErr(t, AttnMerge(f(nh*hd-1), part, nh, hd, 2), "AttnMerge", "out", "127")
	wantArgErr(t, AttnMerge(part[10:10+nh*hd], part, nh, hd, 2), "AttnMerge", "out", "overlaps part")
	wantArgErr(t, AttnMerge(out, part, nh, hd, math.MaxInt/8), "AttnMerge", "nChunks", "overflows")

	// KVAppendF16 / KVAppendQ8_0(cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0)
	wantArgErr(t, KVAppendF16(h(2*8*4), f(8), 1, 8, 2, 4, 8, 8), "KVAppendF16", "pos0", "8+1", "maxCtx = 8")
	wantArgErr(t, KVAppendF16(h(63), f(8), 1, 8, 2, 4, 8, 0), "KVAppendF16", "cache", "63", "nKVHeads*maxCtx*headDim = 64 halves")
	wantArgErr(t, KVAppendF16(h(64), f(9), 1, 8, 2, 4, 8, 0), "KVAppendF16", "src", "9")
	wantArgErr(t, KVAppendQ8_0(b(15), f(128), 1, 128, 2, 64, 4, 0), "KVAppendQ8_0", "cache", "15", "nKVHeads*maxCtx*headDim/32 = 16 blocks")
	wantArgErr(t, KVAppendQ8_0(b(8), f(32), 1, 32, 2, 16, 8, 0), "KVAppendQ8_0", "headDim", "16", "multiple of 32")
	wantArgErr(t, KVAppendQ8_0(b(16), f(128), 1, 127, 2, 64, 4, 0), "KVAppendQ8_0", "srcStride", "127")
	wantArgErr(t, KVAppendQ8_0(b(16), f(128), 0, 128, 2, 64, 4, 0), "KVAppendQ8_0", "tokens", "positive")
}

// ---- allocations ----

func TestAttnNoAllocs(t *testing.T) {
	rng := newRand(117)
	rt := newTestRuntime(t, Options{Threads: 2})
	for _, op := range []Op{OpAttnDecodeF32, OpAttnDecodeF16, OpAttnDecodeQ8_0, OpAttnMerge} {
		mustOK(t, rt.SetMinElements(op, 1, 1))
	}
	for _, kind := range kvKinds {
		dec := newAttnCase(rng, kind, 1, 8, 1, 64, 1024, 1000, 0) // chunked + merged on rt
		pre := newAttnCase(rng, kind, 20, 8, 1, 64, 64, 10, 0)
		out := make([]float32, 20*8*64)
		scr := make([]float32, AttnScratchFloats(64))
		part := make([]float32, AttnPartFloats(8, 64, 4))
		src := randF32(rng, 64, 1)
		h, b := make([]uint16, 64*64), make([]BlockQ8_0, 64*64/QK)
		for _, e := range []Ops{Serial{}, rt} {
			name := fmt.Sprintf("%s %T", kind, e)
			wantNoAllocs(t, name+" decode", func() { _ = dec.attention(e, out[:8*64], scr) })
			wantNoAllocs(t, name+" prefill", func() { _ = pre.attention(e, out, scr) })
			wantNoAllocs(t, name+" AttnDecode+AttnMerge", func() {
				_ = dec.decode(e, out[:8*64], part, scr, 256)
				_ = e.AttnMerge(out[:8*64], part, 8, 64, 4)
			})
			wantNoAllocs(t, name+" KVAppendF16", func() { _ = e.KVAppendF16(h, src, 1, 64, 1, 64, 64, 5) })
			wantNoAllocs(t, name+" KVAppendQ8_0", func() { _ = e.KVAppendQ8_0(b, src, 1, 64, 1, 64, 64, 5) })
		}
	}
}
