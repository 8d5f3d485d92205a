package kernelrt

import (
	"math"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// ---- KV caches in F32 / F16 / Q8_0 and attention that reads them in their stored type ----
//
// csrc/attention.c (its banner: semantics, accuracy, NaN/Inf) and docs/attention-design.md
// (layouts, work units, the chunk rule) describe the kernels. A cache is one layer's keys or
// values laid out [kv head][maxCtx][headDim]:
//
//	F32  []float32    nKVHeads*maxCtx*headDim floats
//	F16  []uint16     nKVHeads*maxCtx*headDim IEEE halves (KVAppendF16 rounds to nearest even)
//	Q8_0 []BlockQ8_0  nKVHeads*maxCtx*headDim/32 blocks (ggml's, as llama.cpp's -ctk q8_0)
//
// AttentionF32/F16/Q8_0 are the calls a model makes: one token runs the decode kernel (split
// over KV heads and, when KV heads are fewer than workers, over cache chunks whose partial
// softmax sums a second dispatch merges), several tokens run the flash-style prefill kernel.
// AttnDecodeF32/F16/Q8_0 and AttnMerge are the decode kernels with the chunk in the caller's
// hands.

// AttnMaxHeadDim is the largest head size the attention kernels take.
const AttnMaxHeadDim = 256

// attnQTile is KRT_ATTN_QTILE, the query tokens of one prefill work unit.
const attnQTile = 16

// AttnScratchFloats is the private scratch (floats) one attention call needs for heads of
// headDim floats, KRT_ATTN_SCRATCH_FLOATS: 272*roundup(headDim, 16) + 4096 (18,432 floats,
// 72 KiB, at headDim 64). It does not depend on the context or the thread count: a Runtime's
// other workers use per-worker buffers of its own. 64-byte aligned is fastest.
func AttnScratchFloats(headDim int) int { return 272*((headDim+15)/16*16) + 4096 }

// AttnPartFloats is the size (floats) of the partial-sum records a chunked decode writes and
// AttnMerge reads: nHeads*nChunks*(headDim+16), one {max, sum, 14 unused, acc[headDim]} record
// per query head and chunk.
func AttnPartFloats(nHeads, headDim, nChunks int) int { return nHeads * nChunks * (headDim + 16) }

// AttnDecodeChunk is the chunk rule of the decode attention (docs/attention-design.md): for a
// context of nCtx positions, nKVHeads KV heads and the workers that will run the call, the
// fewest chunks that give every worker the same number of (KV head, chunk) units, each chunk
// at least 256 positions, rounded to whole 64-key blocks. It returns the chunk length and the
// number of chunks, ceil(nCtx/chunk); one worker (or a short context) gives one chunk, which
// needs no merge. nCtx, nKVHeads and workers must be positive.
func AttnDecodeChunk(nCtx, nKVHeads, workers int) (chunk, nChunks int) {
	return attnChunks(nCtx, nKVHeads, workers, workers)
}

// attnChunks is AttnDecodeChunk with at most maxChunks chunks (what a partial-sum buffer holds).
func attnChunks(nCtx, nKVHeads, workers, maxChunks int) (chunk, nChunks int) {
	n := 1
	if workers > 1 {
		a, b := nKVHeads, workers
		for b != 0 {
			a, b = b, a%b
		}
		n = min(workers/a, max(1, nCtx/256), max(maxChunks, 1))
	}
	chunk = (nCtx + n - 1) / n
	chunk = (chunk + 63) / 64 * 64
	return chunk, (nCtx + chunk - 1) / chunk
}

// kvKind is a KV cache's element type.
type kvKind int

const (
	kvF32 kvKind = iota
	kvF16
	kvQ8
)

// unit names a cache's element in errors.
func (k kvKind) unit() string {
	return [...]string{"floats", "halves", "blocks"}[k]
}

// per is how many cache elements one row of n values takes.
func (k kvKind) per(n int) int {
	if k == kvQ8 {
		return n / QK
	}
	return n
}

// ---- KV appends ----

// KVAppendF16 is KVAppend for an F16 cache ([kv head][maxCtx][headDim] IEEE halves): each
// value is rounded to the nearest half, ties to even (overflow gives +-Inf, NaN stays NaN).
// len(cache) must be nKVHeads*maxCtx*headDim; the other arguments are KVAppend's.
//
//kernelrt:api KVAppendF16
func kvAppendF16(rt *Runtime, cache []uint16, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error {
	if err := checkKVAppendKind("KVAppendF16", kvF16, cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0); err != nil {
		return err
	}
	return rt.run(OpKVAppendF16, Shape{Tokens: tokens, KVHeads: nKVHeads, HeadD: headDim}, argsKVAppendF16(sliceP(cache), sliceP(src), srcStride, nKVHeads, headDim, maxCtx, pos0), nil)
}

// KVAppendQ8_0 is KVAppend for a Q8_0 cache ([kv head][maxCtx][headDim/32] blocks): each 32
// values of a head become one block by QuantizeQ8_0's rule (a block holding NaN or +-Inf is
// stored poisoned and reads back as 32 NaNs). headDim must be a multiple of 32 and
// len(cache) nKVHeads*maxCtx*headDim/32; the other arguments are KVAppend's.
//
//kernelrt:api KVAppendQ8_0
func kvAppendQ8_0(rt *Runtime, cache []BlockQ8_0, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error {
	if err := checkKVAppendKind("KVAppendQ8_0", kvQ8, cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0); err != nil {
		return err
	}
	return rt.run(OpKVAppendQ8_0, Shape{Tokens: tokens, KVHeads: nKVHeads, HeadD: headDim}, argsKVAppendQ8_0(sliceP(cache), sliceP(src), srcStride, nKVHeads, headDim, maxCtx, pos0), nil)
}

// checkKVAppendKind checks the arguments of a KV append into a cache of kind k.
func checkKVAppendKind[T any](fn string, k kvKind, cache []T, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error {
	if err := checkPositive(fn, "tokens", tokens); err != nil {
		return err
	}
	row, err := checkHeadShape(fn, "nKVHeads", nKVHeads, headDim)
	if err != nil {
		return err
	}
	if k == kvQ8 && headDim%QK != 0 {
		return argErr(fn, "headDim", "is %d, want a multiple of %d (one Q8_0 block per 32 values)", headDim, QK)
	}
	if err := checkPositive(fn, "maxCtx", maxCtx); err != nil {
		return err
	}
	if err := checkStride(fn, "srcStride", srcStride, "nKVHeads*headDim", row); err != nil {
		return err
	}
	if err := checkPositions(fn, pos0, tokens, "maxCtx", maxCtx); err != nil {
		return err
	}
	if err := checkCacheLen(fn, "cache", k, cache, row, maxCtx); err != nil {
		return err
	}
	n, ok := stridedLen(tokens, srcStride, row)
	if !ok {
		return argErr(fn, "srcStride", "(tokens-1)*srcStride + nKVHeads*headDim = (%d-1)*%d + %d overflows int", tokens, srcStride, row)
	}
	if err := checkLenF(fn, "src", src, "(tokens-1)*srcStride + nKVHeads*headDim", n, "floats"); err != nil {
		return err
	}
	return checkNoOverlap(fn, "cache", "src", spanOf(cache), spanOf(src))
}

// checkCacheLen checks maxCtx > 0 and len(cache) = the elements of nKVHeads*maxCtx*headDim
// values of kind k, given row = nKVHeads*headDim.
func checkCacheLen[T any](fn, arg string, k kvKind, cache []T, row, maxCtx int) error {
	n, ok := mulOK(row, maxCtx)
	if !ok {
		return argErr(fn, "maxCtx", "nKVHeads*maxCtx*headDim = %d*%d overflows int", row, maxCtx)
	}
	formula := "nKVHeads*maxCtx*headDim"
	if k == kvQ8 {
		formula = "nKVHeads*maxCtx*headDim/32"
	}
	return checkLenF(fn, arg, cache, formula, k.per(n), k.unit())
}

// ---- attention ----

// AttentionF32 computes grouped-query causal attention over F32 KV caches (layout
// [kv head][maxCtx][headDim], positions 0..pos0+tokens-1 already appended): for query head h
// of token t (position p = pos0+t), with KV head g = h / (nHeads/nKVHeads),
//
//	s[j] = dot(q[t,h], K[g][j]) / sqrt(headDim)   for j = 0..p
//	out[t,h] = sum_j softmax(s)[j] * V[g][j]
//
// as llama.cpp's qwen2 graph computes it, up to float32 rounding (csrc/attention.c: within
// 4e-6 of sum_j softmax(s)[j]*|V[g][j]| per element; NaN/Inf as its banner says: a NaN or
// +Inf score makes the row NaN, NaN in an attended V element makes that element NaN, unseen
// positions are never read into a result). Token t's query heads start at q[t*qStride]; out
// is tokens x nHeads x headDim, contiguous.
//
// softcap > 0 soft-caps each scaled score before the softmax, s[j] = softcap *
// tanh(s[j]/softcap) (gemma2's attn_logit_softcapping; tanh approximated within ~2e-7
// relative, so the same bound holds; a +-Inf score then becomes +-softcap); softcap 0 is plain
// attention, the same bits as without the option. It must be 0 or positive and finite.
//
// One token runs the decode kernel: split over KV heads and, on a Runtime whose workers
// outnumber the KV heads, over cache chunks (AttnDecodeChunk) whose partial sums a second
// dispatch merges; a merged result differs from the unsplit one (Serial's) by rounding
// within the same bound. Several tokens run the prefill kernel, split over KV heads and
// 16-token query tiles, with no tokens x context score matrix.
//
// headDim must be a multiple of 16 and at most 256, nHeads a multiple of nKVHeads,
// qStride >= nHeads*headDim, pos0+tokens <= maxCtx, len(q) exactly
// (tokens-1)*qStride + nHeads*headDim, both caches nKVHeads*maxCtx*headDim floats, and scratch
// at least AttnScratchFloats(headDim) floats (private to the call: concurrent calls each need
// their own). out and scratch must not overlap each other or any input.
//
//kernelrt:api AttentionF32
func attentionF32(rt *Runtime, out, q, kcache, vcache, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int, softcap float32) error {
	if err := checkAttn("AttentionF32", kvF32, out, q, kcache, vcache, scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0, softcap); err != nil {
		return err
	}
	return attend(rt, kvF32, out, q, sliceP(kcache), sliceP(vcache), scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0, softcap)
}

// AttentionF16 is AttentionF32 over F16 caches (nKVHeads*maxCtx*headDim IEEE halves each, as
// KVAppendF16 stores them; each value is widened exactly). It reads half the bytes.
//
//kernelrt:api AttentionF16
func attentionF16(rt *Runtime, out, q []float32, kcache, vcache []uint16, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int, softcap float32) error {
	if err := checkAttn("AttentionF16", kvF16, out, q, kcache, vcache, scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0, softcap); err != nil {
		return err
	}
	return attend(rt, kvF16, out, q, sliceP(kcache), sliceP(vcache), scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0, softcap)
}

// AttentionQ8_0 is AttentionF32 over Q8_0 caches (nKVHeads*maxCtx*headDim/32 blocks each, as
// KVAppendQ8_0 stores them), as llama.cpp's -ctk q8_0 -ctv q8_0: each query row is quantized
// to Q8_0 first and a score is sum_b d_q,b*d_k,b*(exact int8 dot product of block b); V is
// d*q. headDim must be a multiple of 32. A poisoned block (NaN/Inf stored) gives NaN: in K the
// row, in V its 32 output elements.
//
//kernelrt:api AttentionQ8_0
func attentionQ8_0(rt *Runtime, out, q []float32, kcache, vcache []BlockQ8_0, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int, softcap float32) error {
	if err := checkAttn("AttentionQ8_0", kvQ8, out, q, kcache, vcache, scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0, softcap); err != nil {
		return err
	}
	return attend(rt, kvQ8, out, q, sliceP(kcache), sliceP(vcache), scratch, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0, softcap)
}

var (
	attnDecodeOps  = [...]Op{kvF32: OpAttnDecodeF32, kvF16: OpAttnDecodeF16, kvQ8: OpAttnDecodeQ8_0}
	attnPrefillOps = [...]Op{kvF32: OpAttnPrefillF32, kvF16: OpAttnPrefillF16, kvQ8: OpAttnPrefillQ8_0}
)

// attend runs checked attention arguments: prefill for several tokens; decode for one, split
// into chunks (and merged) when the workers the call gets outnumber what the KV heads give.
func attend(rt *Runtime, k kvKind, out, q []float32, kc, vc kern.P, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int, softcap float32) error {
	s := Shape{Tokens: tokens, Heads: nHeads, KVHeads: nKVHeads, HeadD: headDim, Ctx: pos0 + tokens}
	if tokens > 1 {
		a := argsAttnPrefillF32(sliceP(out), sliceP(q), kc, vc, softcap, attnHeads(nHeads, nKVHeads), headDim, maxCtx, qStride, pos0, tokens)
		return rt.run(attnPrefillOps[k], s, a, sliceP(scratch))
	}
	op := attnDecodeOps[k]
	nCtx := pos0 + 1
	chunk, nch := nCtx, 1
	if w := rt.workersByWork(op, s); w > 1 {
		chunk, nch = attnChunks(nCtx, nKVHeads, w, len(rt.part)/AttnPartFloats(nHeads, headDim, 1))
	}
	s.Chunks = nch
	var part kern.P
	if nch > 1 {
		part = sliceP(rt.part)
	}
	// The decode packers of the three kinds are the same; F32's packs them all.
	a := argsAttnDecodeF32(sliceP(out), part, sliceP(q), kc, vc, softcap, attnHeads(nHeads, nKVHeads), headDim, maxCtx, nCtx, chunk)
	if nch == 1 {
		return rt.run(op, s, a, sliceP(scratch))
	}
	ms := Shape{Tokens: 1, Heads: nHeads, HeadD: headDim, Chunks: nch}
	return rt.runThen(op, s, a, sliceP(scratch), OpAttnMerge, ms, argsAttnMerge(sliceP(out), part, nHeads, headDim, nch))
}

// attnHeads is KRT_ATTN_HEADS, the kernels' packed (nHeads, nKVHeads) parameter (one
// parameter for two keeps them within c2goasm's 14; both are checked to fit in 31 bits).
func attnHeads(nHeads, nKVHeads int) int { return nHeads<<32 | nKVHeads }

// checkSoftcap checks an attention call's soft-cap: 0 (off) or positive and finite.
func checkSoftcap(fn string, softcap float32) error {
	if !(softcap >= 0) || softcap > math.MaxFloat32 {
		return argErr(fn, "softcap", "must be 0 (off) or positive and finite, got %g", softcap)
	}
	return nil
}

// checkAttnHeads checks the head shape of an attention kernel over a cache of kind k (head
// size a multiple of 16, or 32 for Q8_0, at most AttnMaxHeadDim; nHeads a multiple of
// nKVHeads) and returns nHeads*headDim.
func checkAttnHeads(fn string, k kvKind, nHeads, nKVHeads, headDim int) (int, error) {
	qrow, err := checkHeadShape(fn, "nHeads", nHeads, headDim)
	if err != nil {
		return 0, err
	}
	if nHeads > math.MaxInt32 {
		return 0, argErr(fn, "nHeads", "is %d, want at most %d", nHeads, math.MaxInt32)
	}
	mult := 16
	if k == kvQ8 {
		mult = QK
	}
	if headDim%mult != 0 || headDim > AttnMaxHeadDim {
		return 0, argErr(fn, "headDim", "is %d, want a multiple of %d up to %d", headDim, mult, AttnMaxHeadDim)
	}
	if err := checkPositive(fn, "nKVHeads", nKVHeads); err != nil {
		return 0, err
	}
	if nHeads%nKVHeads != 0 {
		return 0, argErr(fn, "nKVHeads", "nHeads = %d is not a multiple of nKVHeads = %d", nHeads, nKVHeads)
	}
	return qrow, nil
}

// checkAttnScratch checks scratch >= AttnScratchFloats(headDim) (headDim already checked).
func checkAttnScratch(fn string, scratch []float32, headDim int) error {
	return checkMinLenF(fn, "scratch", scratch, "AttnScratchFloats(headDim)", AttnScratchFloats(headDim), "floats")
}

// named is one argument's name and memory, for the overlap checks.
type named struct {
	name string
	s    span
}

// checkDisjoint refuses an output (out) that shares memory with any of ins.
func checkDisjoint(fn, outName string, out span, ins ...named) error {
	for _, in := range ins {
		if err := checkNoOverlap(fn, outName, in.name, out, in.s); err != nil {
			return err
		}
	}
	return nil
}

// checkAttn checks AttentionF32/F16/Q8_0's arguments (fn names the caller in errors).
func checkAttn[T any](fn string, k kvKind, out, q []float32, kcache, vcache []T, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int, softcap float32) error {
	if err := checkSoftcap(fn, softcap); err != nil {
		return err
	}
	if err := checkPositive(fn, "tokens", tokens); err != nil {
		return err
	}
	qrow, err := checkAttnHeads(fn, k, nHeads, nKVHeads, headDim)
	if err != nil {
		return err
	}
	if err := checkPositive(fn, "maxCtx", maxCtx); err != nil {
		return err
	}
	if err := checkStride(fn, "qStride", qStride, "nHeads*headDim", qrow); err != nil {
		return err
	}
	if err := checkPositions(fn, pos0, tokens, "maxCtx", maxCtx); err != nil {
		return err
	}
	on, ok := mulOK(tokens, qrow)
	if !ok {
		return argErr(fn, "tokens", "tokens*nHeads*headDim = %d*%d overflows int", tokens, qrow)
	}
	if err := checkLenF(fn, "out", out, "tokens*nHeads*headDim", on, "floats"); err != nil {
		return err
	}
	qn, ok := stridedLen(tokens, qStride, qrow)
	if !ok {
		return argErr(fn, "qStride", "(tokens-1)*qStride + nHeads*headDim = (%d-1)*%d + %d overflows int", tokens, qStride, qrow)
	}
	if err := checkLenF(fn, "q", q, "(tokens-1)*qStride + nHeads*headDim", qn, "floats"); err != nil {
		return err
	}
	kvrow := nKVHeads * headDim // <= nHeads*headDim: fits
	if err := checkCacheLen(fn, "kcache", k, kcache, kvrow, maxCtx); err != nil {
		return err
	}
	if err := checkCacheLen(fn, "vcache", k, vcache, kvrow, maxCtx); err != nil {
		return err
	}
	if err := checkAttnScratch(fn, scratch, headDim); err != nil {
		return err
	}
	qs, ks, vs, ss := named{"q", spanOf(q)}, named{"kcache", spanOf(kcache)}, named{"vcache", spanOf(vcache)}, named{"scratch", spanOf(scratch)}
	if err := checkDisjoint(fn, "out", spanOf(out), qs, ks, vs, ss); err != nil {
		return err
	}
	return checkDisjoint(fn, "scratch", ss.s, qs, ks, vs)
}

// AttnDecodeF32 is the decode kernel behind AttentionF32 with the cache chunk chosen by the
// caller: one query token (q: nHeads*headDim floats) over positions 0..nCtx-1 of F32 caches,
// split into nChunks = ceil(nCtx/chunk) chunks of chunk positions (AttnDecodeChunk gives the
// runtime's choice). With one chunk it writes out (nHeads*headDim floats; part is unused and
// may be nil); with several it writes each (query head, chunk)'s partial softmax record to
// part (at least AttnPartFloats(nHeads, headDim, nChunks) floats) and AttnMerge then writes
// out. The work splits over nKVHeads*nChunks units; the result does not depend on the split.
// nCtx must be 1..maxCtx and chunk positive; scratch, caches, head shape and softcap as AttentionF32's.
// out, part and scratch must not overlap each other or any input.
//
//kernelrt:api AttnDecodeF32
func attnDecodeF32(rt *Runtime, out, part, q, kcache, vcache, scratch []float32, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk int, softcap float32) error {
	nch, err := checkAttnDecode("AttnDecodeF32", kvF32, out, part, q, kcache, vcache, scratch, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk, softcap)
	if err != nil {
		return err
	}
	return rt.run(OpAttnDecodeF32, Shape{Tokens: 1, Heads: nHeads, KVHeads: nKVHeads, HeadD: headDim, Ctx: nCtx, Chunks: nch},
		argsAttnDecodeF32(sliceP(out), sliceP(part), sliceP(q), sliceP(kcache), sliceP(vcache), softcap, attnHeads(nHeads, nKVHeads), headDim, maxCtx, nCtx, min(chunk, nCtx)), sliceP(scratch))
}

// AttnDecodeF16 is AttnDecodeF32 over F16 caches (AttentionF16's).
//
//kernelrt:api AttnDecodeF16
func attnDecodeF16(rt *Runtime, out, part, q []float32, kcache, vcache []uint16, scratch []float32, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk int, softcap float32) error {
	nch, err := checkAttnDecode("AttnDecodeF16", kvF16, out, part, q, kcache, vcache, scratch, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk, softcap)
	if err != nil {
		return err
	}
	return rt.run(OpAttnDecodeF16, Shape{Tokens: 1, Heads: nHeads, KVHeads: nKVHeads, HeadD: headDim, Ctx: nCtx, Chunks: nch},
		argsAttnDecodeF16(sliceP(out), sliceP(part), sliceP(q), sliceP(kcache), sliceP(vcache), softcap, attnHeads(nHeads, nKVHeads), headDim, maxCtx, nCtx, min(chunk, nCtx)), sliceP(scratch))
}

// AttnDecodeQ8_0 is AttnDecodeF32 over Q8_0 caches (AttentionQ8_0's).
//
//kernelrt:api AttnDecodeQ8_0
func attnDecodeQ8_0(rt *Runtime, out, part, q []float32, kcache, vcache []BlockQ8_0, scratch []float32, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk int, softcap float32) error {
	nch, err := checkAttnDecode("AttnDecodeQ8_0", kvQ8, out, part, q, kcache, vcache, scratch, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk, softcap)
	if err != nil {
		return err
	}
	return rt.run(OpAttnDecodeQ8_0, Shape{Tokens: 1, Heads: nHeads, KVHeads: nKVHeads, HeadD: headDim, Ctx: nCtx, Chunks: nch},
		argsAttnDecodeQ8_0(sliceP(out), sliceP(part), sliceP(q), sliceP(kcache), sliceP(vcache), softcap, attnHeads(nHeads, nKVHeads), headDim, maxCtx, nCtx, min(chunk, nCtx)), sliceP(scratch))
}

// checkAttnDecode checks AttnDecodeF32/F16/Q8_0's arguments and returns the chunk count. (The
// binders pass min(chunk, nCtx): the same single chunk, and the kernel's ceil(nCtx/chunk)
// cannot overflow.)
func checkAttnDecode[T any](fn string, k kvKind, out, part, q []float32, kcache, vcache []T, scratch []float32, nHeads, nKVHeads, headDim, maxCtx, nCtx, chunk int, softcap float32) (int, error) {
	if err := checkSoftcap(fn, softcap); err != nil {
		return 0, err
	}
	qrow, err := checkAttnHeads(fn, k, nHeads, nKVHeads, headDim)
	if err != nil {
		return 0, err
	}
	if err := checkPositive(fn, "maxCtx", maxCtx); err != nil {
		return 0, err
	}
	if nCtx < 1 || nCtx > maxCtx {
		return 0, argErr(fn, "nCtx", "is %d, want 1..maxCtx = 1..%d", nCtx, maxCtx)
	}
	if err := checkPositive(fn, "chunk", chunk); err != nil {
		return 0, err
	}
	nch := (nCtx-1)/chunk + 1
	if err := checkLenF(fn, "out", out, "nHeads*headDim", qrow, "floats"); err != nil {
		return 0, err
	}
	if err := checkLenF(fn, "q", q, "nHeads*headDim", qrow, "floats"); err != nil {
		return 0, err
	}
	kvrow := nKVHeads * headDim
	if err := checkCacheLen(fn, "kcache", k, kcache, kvrow, maxCtx); err != nil {
		return 0, err
	}
	if err := checkCacheLen(fn, "vcache", k, vcache, kvrow, maxCtx); err != nil {
		return 0, err
	}
	if err := checkAttnScratch(fn, scratch, headDim); err != nil {
		return 0, err
	}
	qs, ks, vs, ss := named{"q", spanOf(q)}, named{"kcache", spanOf(kcache)}, named{"vcache", spanOf(vcache)}, named{"scratch", spanOf(scratch)}
	ps := named{"part", span{}}
	if nch > 1 {
		pn, ok := mulOK(nch, qrow+16*nHeads) // nHeads*nChunks*(headDim+16)
		if !ok {
			return 0, argErr(fn, "chunk", "nHeads*nChunks*(headDim+16) overflows int (nChunks = %d)", nch)
		}
		if err := checkMinLenF(fn, "part", part, "AttnPartFloats(nHeads, headDim, nChunks)", pn, "floats"); err != nil {
			return 0, err
		}
		ps.s = spanOf(part)
	}
	if err := checkDisjoint(fn, "out", spanOf(out), qs, ks, vs, ss, ps); err != nil {
		return 0, err
	}
	if err := checkDisjoint(fn, "part", ps.s, qs, ks, vs, ss); err != nil {
		return 0, err
	}
	return nch, checkDisjoint(fn, "scratch", ss.s, qs, ks, vs)
}

// AttnMerge finishes a chunked decode: for each query head it combines the nChunks partial
// softmax records an AttnDecodeF32/F16/Q8_0 call with nChunks > 1 wrote to part (at least
// AttnPartFloats(nHeads, headDim, nChunks) floats) into out (nHeads*headDim floats): with
// M the largest chunk maximum, out = sum_c e^(m_c-M) acc_c / sum_c e^(m_c-M) l_c. headDim as
// the decode's; out must not overlap part. Split over query heads.
//
//kernelrt:api AttnMerge
func attnMerge(rt *Runtime, out, part []float32, nHeads, headDim, nChunks int) error {
	const fn = "AttnMerge"
	qrow, err := checkHeadShape(fn, "nHeads", nHeads, headDim)
	if err != nil {
		return err
	}
	if headDim%16 != 0 || headDim > AttnMaxHeadDim {
		return argErr(fn, "headDim", "is %d, want a multiple of 16 up to %d", headDim, AttnMaxHeadDim)
	}
	if err := checkPositive(fn, "nChunks", nChunks); err != nil {
		return err
	}
	pn, ok := mulOK(nChunks, qrow+16*nHeads)
	if !ok {
		return argErr(fn, "nChunks", "nHeads*nChunks*(headDim+16) overflows int (nChunks = %d)", nChunks)
	}
	if err := checkMinLenF(fn, "part", part, "AttnPartFloats(nHeads, headDim, nChunks)", pn, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, "out", out, "nHeads*headDim", qrow, "floats"); err != nil {
		return err
	}
	if err := checkNoOverlap(fn, "out", "part", spanOf(out), spanOf(part)); err != nil {
		return err
	}
	return rt.run(OpAttnMerge, Shape{Tokens: 1, Heads: nHeads, HeadD: headDim, Chunks: nChunks}, argsAttnMerge(sliceP(out), sliceP(part), nHeads, headDim, nChunks), nil)
}
