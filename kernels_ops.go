package kernelrt

import (
	"math"
)

// ---- decoder ops: SwiGLU, residual add, RoPE, F32 KV-cache append, embedding ----
// (attention and the F16 / Q8_0 caches: kernels_attn.go)
//
// Each binder below (//kernelrt:api Name) checks every argument, then hands the packed kernel
// arguments to run; tools/opgen makes it the package function, Serial and Runtime method.
// The semantics are those of llama.cpp's qwen2 graph; csrc/elementwise.c, rope.c, attention.c and embed.c hold
// the kernels and document their numerics.

// SwiGLU computes out[i] = silu(gate[i]) * up[i] with silu(g) = g / (1 + e^-g), the gated
// activation of the Qwen2/Llama MLP (ggml_swiglu). All three slices have the same positive
// length. Extremes never give a spurious NaN: g <= -88.38 (e^-g overflows; |silu| < 4e-37)
// and g = -Inf give -0, g = +Inf gives +Inf*up; a NaN gate gives NaN. out may be gate or up
// exactly (in place) but must not partially overlap either.
//
//kernelrt:api SwiGLU
func swiGLU(rt *Runtime, out, gate, up []float32) error {
	if err := checkSwiGLU("SwiGLU", out, gate, up); err != nil {
		return err
	}
	return rt.run(OpSwiGLU, Shape{N: len(out), Tokens: 1}, argsSwiGLU(sliceP(out), sliceP(gate), sliceP(up)), nil)
}

// Add computes out[i] = a[i] + b[i] (the residual add). All three slices have the same
// positive length; out may be a or b exactly (x = x + y in place) but must not partially
// overlap either.
//
//kernelrt:api Add
func add(rt *Runtime, out, a, b []float32) error {
	if err := checkAdd("Add", out, a, b); err != nil {
		return err
	}
	return rt.run(OpAdd, Shape{N: len(out), Tokens: 1}, argsAdd(sliceP(out), sliceP(a), sliceP(b)), nil)
}

// GeGLU computes out[i] = gelu(gate[i]) * up[i], the gated activation of the Gemma MLP
// (ggml_geglu), with GELU in ggml's tanh form: gelu(g) = 0.5 g (1 + tanh(sqrt(2/pi) (g +
// 0.044715 g^3))), evaluated as g / (1 + e^(-2 sqrt(2/pi) (g + 0.044715 g^3))). Extremes as
// SwiGLU's: very negative and -Inf gates give -0, +Inf gives +Inf*up, NaN gives NaN. out may
// be gate or up exactly but must not partially overlap either.
//
//kernelrt:api GeGLU
func geGLU(rt *Runtime, out, gate, up []float32) error {
	if err := checkElementwise("GeGLU", out, "gate", gate, "up", up); err != nil {
		return err
	}
	return rt.run(OpGeGLU, Shape{N: len(out), Tokens: 1}, argsGeGLU(sliceP(out), sliceP(gate), sliceP(up)), nil)
}

// checkSwiGLU checks SwiGLU's arguments (fn names the caller in errors).
func checkSwiGLU(fn string, out, gate, up []float32) error {
	return checkElementwise(fn, out, "gate", gate, "up", up)
}

// checkAdd checks Add's arguments (fn names the caller in errors).
func checkAdd(fn string, out, a, b []float32) error {
	return checkElementwise(fn, out, "a", a, "b", b)
}

func checkElementwise(fn string, out []float32, an string, a []float32, bn string, b []float32) error {
	if out == nil {
		return argErr(fn, "out", "is nil")
	}
	n := len(out)
	if n == 0 {
		return argErr(fn, "out", "is empty, want at least 1 float")
	}
	if err := checkLenF(fn, an, a, "len(out)", n, "floats"); err != nil {
		return err
	}
	if err := checkLenF(fn, bn, b, "len(out)", n, "floats"); err != nil {
		return err
	}
	if err := checkSameOrDisjoint(fn, "out", an, out, a); err != nil {
		return err
	}
	return checkSameOrDisjoint(fn, "out", bn, out, b)
}

// checkSameOrDisjoint accepts an output that is exactly an input (an elementwise kernel reads
// element i before writing it) or shares no memory with it; a shifted overlap is refused.
func checkSameOrDisjoint(fn, outName, inName string, out, in []float32) error {
	if sliceP(out) == sliceP(in) && len(out) == len(in) {
		return nil
	}
	if overlaps(spanOf(out), spanOf(in)) {
		return argErr(fn, outName, "partially overlaps %s in memory; it must be %s exactly or disjoint from it", inName, inName)
	}
	return nil
}

// stridedLen is (tokens-1)*stride + row, the length of tokens rows of row floats that start
// stride floats apart, and whether it fits an int (all arguments positive, stride >= row).
func stridedLen(tokens, stride, row int) (int, bool) {
	n, ok := mulOK(tokens-1, stride)
	if !ok || n > math.MaxInt-row {
		return 0, false
	}
	return n + row, true
}

// checkStride checks stride >= rowName = row (the row already checked to fit an int).
func checkStride(fn, arg string, stride int, rowFormula string, row int) error {
	if stride < row {
		return argErr(fn, arg, "is %d, want at least %s = %d floats", stride, rowFormula, row)
	}
	return nil
}

// checkPositions checks pos0 >= 0 and pos0+tokens <= limit (tokens > 0 already checked).
func checkPositions(fn string, pos0, tokens int, limitName string, limit int) error {
	if pos0 < 0 {
		return argErr(fn, "pos0", "must not be negative, got %d", pos0)
	}
	if pos0 > limit-tokens {
		return argErr(fn, "pos0", "pos0+tokens = %d+%d exceeds %s = %d", pos0, tokens, limitName, limit)
	}
	return nil
}

// checkHeadShape checks heads > 0, headDim > 0 and heads*headDim fitting an int; it returns
// heads*headDim.
func checkHeadShape(fn, headsName string, heads, headDim int) (int, error) {
	if err := checkPositive(fn, headsName, heads); err != nil {
		return 0, err
	}
	if err := checkPositive(fn, "headDim", headDim); err != nil {
		return 0, err
	}
	row, ok := mulOK(heads, headDim)
	if !ok {
		return 0, argErr(fn, headsName, "%s*headDim = %d*%d overflows int", headsName, heads, headDim)
	}
	return row, nil
}

// ---- RoPE ----

// RopeTable holds the cos and sin of every rotary angle pos * theta^(-2i/headDim), for
// positions 0..MaxPos()-1 and i in 0..headDim/2-1, computed once in float64 and rounded to
// float32. It is read-only after NewRopeTable and may be shared by goroutines.
type RopeTable struct {
	headDim, maxPos int
	theta           float64
	cos, sin        []float32 // [pos][headDim/2]
}

// NewRopeTable computes the table for heads of headDim floats (positive, even) and positions
// 0..maxPos-1 (maxPos positive) with base theta (positive and finite; Qwen2 uses 1e6). It
// takes maxPos*headDim floats.
func NewRopeTable(headDim, maxPos int, theta float64) (*RopeTable, error) {
	return NewRopeTableFactors(headDim, maxPos, theta, nil)
}

// NewRopeTableFactors is NewRopeTable with a frequency factor per rotated pair (headDim/2 of
// them, positive and finite): angle = pos * theta^(-2i/headDim) / factors[i], as llama.cpp
// applies a model's rope_freqs tensor (Llama 3.1+ long-context scaling). nil factors are 1.
func NewRopeTableFactors(headDim, maxPos int, theta float64, factors []float32) (*RopeTable, error) {
	const fn = "NewRopeTable"
	if headDim <= 0 || headDim%2 != 0 {
		return nil, argErr(fn, "headDim", "must be positive and even, got %d", headDim)
	}
	if err := checkPositive(fn, "maxPos", maxPos); err != nil {
		return nil, err
	}
	if !(theta > 0) || math.IsInf(theta, 0) {
		return nil, argErr(fn, "theta", "must be positive and finite, got %v", theta)
	}
	half := headDim / 2
	if factors != nil {
		if len(factors) != half {
			return nil, argErr(fn, "factors", "has length %d, want headDim/2 = %d", len(factors), half)
		}
		for i, f := range factors {
			if !(f > 0) || math.IsInf(float64(f), 0) {
				return nil, argErr(fn, "factors", "factors[%d] = %g must be positive and finite", i, f)
			}
		}
	}
	n, ok := mulOK(maxPos, half)
	if !ok {
		return nil, argErr(fn, "maxPos", "maxPos*headDim/2 = %d*%d overflows int", maxPos, half)
	}
	t := &RopeTable{headDim: headDim, maxPos: maxPos, theta: theta, cos: make([]float32, n), sin: make([]float32, n)}
	freq := make([]float64, half)
	for i := range freq {
		freq[i] = math.Pow(theta, -float64(2*i)/float64(headDim))
		if factors != nil {
			freq[i] /= float64(factors[i])
		}
	}
	for p := 0; p < maxPos; p++ {
		for i, f := range freq {
			s, c := math.Sincos(float64(p) * f)
			t.cos[p*half+i] = float32(c)
			t.sin[p*half+i] = float32(s)
		}
	}
	return t, nil
}

// HeadDim is the head size the table was built for.
func (t *RopeTable) HeadDim() int { return t.headDim }

// MaxPos is the number of positions the table covers (0..MaxPos()-1).
func (t *RopeTable) MaxPos() int { return t.maxPos }

// Theta is the frequency base the table was built with.
func (t *RopeTable) Theta() float64 { return t.theta }

// RopeNeoX rotates, in place, the nHeads heads of headDim floats of each of tokens tokens of x
// (token t's heads start at x[t*stride]; its position is pos0+t) NeoX style, as llama.cpp's
// GGML_ROPE_TYPE_NEOX used by qwen2: within each head, element i < headDim/2 pairs with element
// i+headDim/2 and the pair (x0, x1) becomes (x0*cos - x1*sin, x0*sin + x1*cos) for the angle
// (pos0+t) * theta^(-2i/headDim) read from tab. headDim must equal tab.HeadDim(),
// stride >= nHeads*headDim, pos0+tokens <= tab.MaxPos(), and len(x) must be exactly
// (tokens-1)*stride + nHeads*headDim (the floats between one token's heads and the next
// token are left untouched, e.g. the K and V parts of a fused QKV row).
//
//kernelrt:api RopeNeoX
func ropeNeoX(rt *Runtime, x []float32, tab *RopeTable, tokens, nHeads, headDim, stride, pos0 int) error {
	if err := checkRopeNeoX("RopeNeoX", x, tab, tokens, nHeads, headDim, stride, pos0); err != nil {
		return err
	}
	return rt.run(OpRopeNeoX, Shape{Tokens: tokens, Heads: nHeads, HeadD: headDim}, argsRopeNeoX(sliceP(x), sliceP(tab.cos), sliceP(tab.sin), stride, nHeads, headDim, pos0), nil)
}

// RopeNorm is RopeNeoX in the "normal" mode of llama.cpp's llama architecture
// (GGML_ROPE_TYPE_NORM): within each head, element 2i pairs with element 2i+1, rotated by the
// same angle (pos0+t) * theta^(-2i/headDim) (divided by the table's frequency factor, if it
// has them) read from tab. The arguments are RopeNeoX's.
//
//kernelrt:api RopeNorm
func ropeNorm(rt *Runtime, x []float32, tab *RopeTable, tokens, nHeads, headDim, stride, pos0 int) error {
	if err := checkRopeNeoX("RopeNorm", x, tab, tokens, nHeads, headDim, stride, pos0); err != nil {
		return err
	}
	return rt.run(OpRopeNorm, Shape{Tokens: tokens, Heads: nHeads, HeadD: headDim}, argsRopeNorm(sliceP(x), sliceP(tab.cos), sliceP(tab.sin), stride, nHeads, headDim, pos0), nil)
}

// checkRopeNeoX checks RopeNeoX's and RopeNorm's arguments (fn names the caller in errors).
func checkRopeNeoX(fn string, x []float32, tab *RopeTable, tokens, nHeads, headDim, stride, pos0 int) error {
	if tab == nil {
		return argErr(fn, "tab", "is nil (build one with NewRopeTable)")
	}
	if err := checkPositive(fn, "tokens", tokens); err != nil {
		return err
	}
	row, err := checkHeadShape(fn, "nHeads", nHeads, headDim)
	if err != nil {
		return err
	}
	if headDim != tab.headDim {
		return argErr(fn, "headDim", "is %d but the RopeTable was built for headDim %d", headDim, tab.headDim)
	}
	if err := checkStride(fn, "stride", stride, "nHeads*headDim", row); err != nil {
		return err
	}
	if err := checkPositions(fn, pos0, tokens, "tab.MaxPos()", tab.maxPos); err != nil {
		return err
	}
	n, ok := stridedLen(tokens, stride, row)
	if !ok {
		return argErr(fn, "stride", "(tokens-1)*stride + nHeads*headDim = (%d-1)*%d + %d overflows int", tokens, stride, row)
	}
	return checkLenF(fn, "x", x, "(tokens-1)*stride + nHeads*headDim", n, "floats")
}

// ---- KV cache ----

// KVAppend stores tokens tokens' keys (or values) in an F32 cache laid out
// [kv head][maxCtx][headDim]: token t's nKVHeads*headDim floats, at src[t*srcStride], go to
// position pos0+t of each KV head. len(cache) must be nKVHeads*maxCtx*headDim, len(src)
// exactly (tokens-1)*srcStride + nKVHeads*headDim, srcStride >= nKVHeads*headDim, and
// pos0+tokens <= maxCtx: a full cache is an error, never a write past it. cache must not
// overlap src.
//
//kernelrt:api KVAppend
func kvAppend(rt *Runtime, cache, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error {
	if err := checkKVAppend("KVAppend", cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0); err != nil {
		return err
	}
	return rt.run(OpKVAppend, Shape{Tokens: tokens, KVHeads: nKVHeads, HeadD: headDim}, argsKVAppend(sliceP(cache), sliceP(src), srcStride, nKVHeads, headDim, maxCtx, pos0), nil)
}

// checkKVAppend checks KVAppend's arguments (fn names the caller in errors).
func checkKVAppend(fn string, cache, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error {
	return checkKVAppendKind(fn, kvF32, cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0)
}

// ---- embedding ----

// EmbedQ8_0 looks up tokens in a Q8_0 embedding table of vocab rows of dim floats (dim a
// positive multiple of 32, each row dim/32 blocks, as GGUF stores token_embd): out row t is the
// dequantized row ids[t], exactly as ggml's dequantize_row_q8_0 gives it. len(table) must be
// vocab*dim/32, len(out) len(ids)*dim, ids non-empty; every id is checked against vocab first
// (an id outside 0..vocab-1 is an error naming its index and value, never a read outside the
// table). out must not overlap table or ids.
//
//kernelrt:api EmbedQ8_0
func embedQ8_0(rt *Runtime, out []float32, table []BlockQ8_0, ids []int32, dim, vocab int) error {
	if err := checkEmbedQ8_0("EmbedQ8_0", out, table, ids, dim, vocab); err != nil {
		return err
	}
	return rt.run(OpEmbedQ8_0, Shape{Tokens: len(ids), Cols: dim}, argsEmbedQ8_0(sliceP(out), sliceP(table), sliceP(ids), dim), nil)
}

// checkEmbedQ8_0 checks EmbedQ8_0's arguments (fn names the caller in errors).
func checkEmbedQ8_0(fn string, out []float32, table []BlockQ8_0, ids []int32, dim, vocab int) error {
	if err := checkCols(fn, "dim", dim, QK); err != nil {
		return err
	}
	if err := checkPositive(fn, "vocab", vocab); err != nil {
		return err
	}
	if ids == nil {
		return argErr(fn, "ids", "is nil")
	}
	if len(ids) == 0 {
		return argErr(fn, "ids", "is empty, want at least 1 token")
	}
	nb, ok := mulOK(vocab, dim/QK)
	if !ok {
		return argErr(fn, "vocab", "vocab*dim/32 = %d*%d overflows int", vocab, dim/QK)
	}
	if err := checkLenF(fn, "table", table, "vocab*dim/32", nb, "blocks"); err != nil {
		return err
	}
	on, ok := mulOK(len(ids), dim)
	if !ok {
		return argErr(fn, "ids", "len(ids)*dim = %d*%d overflows int", len(ids), dim)
	}
	if err := checkLenF(fn, "out", out, "len(ids)*dim", on, "floats"); err != nil {
		return err
	}
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return argErr(fn, "ids", "ids[%d] = %d is outside the vocabulary 0..%d", i, id, vocab-1)
		}
	}
	if err := checkNoOverlap(fn, "out", "table", spanOf(out), spanOf(table)); err != nil {
		return err
	}
	return checkNoOverlap(fn, "out", "ids", spanOf(out), spanOf(ids))
}
