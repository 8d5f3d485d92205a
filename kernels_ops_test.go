package kernelrt

// Tests of the decoder ops (kernels_ops.go): SwiGLU, Add, RopeNeoX, KVAppend and EmbedQ8_0,
// for every registered backend x variant this CPU runs (attention: kernels_attn_test.go).
//
// Accuracy, against independent float64 references:
//   - SwiGLU: |got-ref| <= 1e-6*|ref| + 1e-34 (the floor only matters where silu underflows:
//     g below about -87, where the kernels give -0 for values under 4e-37);
//   - Add: |got-ref| <= 1e-6*|ref| (in practice exact);
//   - RoPE: |got-ref| <= 1e-6*(|x0|+|x1|), the magnitude of the two products of each rotated
//     pair (a rotation that cancels to ~0 cannot be more accurate than its terms); the reference
//     uses float64 cos/sin of its own, not the table;
//   - KV append and the embedding: exact;

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

const (
	opsSentinel  = float32(-12345.5)
	swigluTol    = 1e-6
	swigluFloor  = 1e-34
	ropeTol      = 1e-6
	qwenHeads    = 14
	qwenKVHeads  = 2
	qwenHeadDim  = 64
	qwenHidden   = 896
	qwenInter    = 4864
	qwenQKVWidth = 1152 // q 896 + k 128 + v 128, the fused QKV row
)

// ---- references ----

// swigluF64 is silu(g)*u in float64; g = -Inf gives 0, an overflowing product ±Inf.
func swigluF64(g, u float32) float64 {
	gd := float64(g)
	if math.IsInf(gd, -1) {
		return 0 * float64(u)
	}
	r := gd / (1 + math.Exp(-gd)) * float64(u)
	if math.Abs(r) > math.MaxFloat32 && !math.IsInf(r, 0) {
		r = math.Inf(int(math.Copysign(1, r)))
	}
	return r
}

// ropeF64 returns the rotated x in float64 (elements outside the heads unchanged) and, per
// element, the magnitude |x0|+|x1| of its pair (0 for untouched elements: exact).
func ropeF64(x []float32, theta float64, tokens, nHeads, headDim, stride, pos0 int) (ref, mag []float64) {
	ref, mag = f64s(x), make([]float64, len(x))
	half := headDim / 2
	for t := 0; t < tokens; t++ {
		p := float64(pos0 + t)
		for h := 0; h < nHeads; h++ {
			base := t*stride + h*headDim
			for i := 0; i < half; i++ {
				ang := p * math.Pow(theta, -2*float64(i)/float64(headDim))
				c, s := math.Cos(ang), math.Sin(ang)
				x0, x1 := float64(x[base+i]), float64(x[base+i+half])
				ref[base+i] = x0*c - x1*s
				ref[base+i+half] = x0*s + x1*c
				mag[base+i] = math.Abs(x0) + math.Abs(x1)
				mag[base+i+half] = mag[base+i]
			}
		}
	}
	return ref, mag
}

// embedCase is a random Q8_0 table and token ids (including the first and last row).
type embedCase struct {
	dim, vocab int
	table      []BlockQ8_0
	ids        []int32
}

func newEmbedCase(rng *rand.Rand, dim, vocab, tokens int) *embedCase {
	c := &embedCase{dim: dim, vocab: vocab, table: randQ8_0(rng, vocab*dim/QK), ids: make([]int32, tokens)}
	for i := range c.ids {
		c.ids[i] = int32(rng.IntN(vocab))
	}
	c.ids[0] = int32(vocab - 1)
	if tokens > 1 {
		c.ids[1] = 0
	}
	return c
}

// want is out row t for every t, exactly (d has 11 significant bits, q 8: the product is exact).
func (c *embedCase) want() []float32 {
	nb := c.dim / QK
	out := make([]float32, 0, len(c.ids)*c.dim)
	for _, id := range c.ids {
		for _, v := range dequantQ8_0F64(c.table[int(id)*nb : (int(id)+1)*nb]) {
			out = append(out, float32(v))
		}
	}
	return out
}

// ---- SwiGLU and Add ----

// swigluInputs returns gate and up of n floats, gate spanning [-30, 30] with the special
// values (±Inf, NaN, saturation boundaries, huge) in the first slots.
func swigluInputs(rng *rand.Rand, n int) (gate, up []float32) {
	gate, up = randF32(rng, n, 30), randF32(rng, n, 3)
	special := []float32{float32(math.Inf(-1)), float32(math.Inf(1)), float32(math.NaN()), 0, -100, 100,
		-88.5, 88.5, -87.3, -1e38, 3e38, -3e38, 1e-20, -1e-3, -88.3762626647949, float32(math.Copysign(0, -1))}
	copy(gate, special[:min(n, len(special))])
	return gate, up
}

func checkSwiGLUOut(t *testing.T, what string, out, gate, up []float32) {
	t.Helper()
	bad := 0
	for i, got := range out {
		ref := swigluF64(gate[i], up[i])
		ok := false
		switch {
		case math.IsNaN(ref):
			ok = isNaN32(got)
		case math.IsInf(ref, 0):
			ok = float64(got) == ref
		default:
			ok = math.Abs(float64(got)-ref) <= swigluTol*math.Abs(ref)+swigluFloor
		}
		if !ok {
			if bad++; bad <= 3 {
				t.Errorf("%s: out[%d] = %g for gate %g up %g, want %g", what, i, got, gate[i], up[i], ref)
			}
		}
	}
}

func TestSwiGLU(t *testing.T) {
	rng := newRand(101)
	forEachSet(t, "SwiGLU", func(t *testing.T, s *kern.Set) {
		for _, n := range []int{1, 7, 8, 15, 16, 17, 31, 33, 64, 100, qwenHidden, qwenInter} {
			gate, up := swigluInputs(rng, n)
			out := make([]float32, n)
			mustOK(t, SwiGLU(out, gate, up))
			checkSwiGLUOut(t, fmt.Sprintf("n=%d", n), out, gate, up)
			// In place, out = gate and out = up.
			g2 := append([]float32(nil), gate...)
			mustOK(t, SwiGLU(g2, g2, up))
			mustSame(t, fmt.Sprintf("n=%d in place (gate)", n), g2, out)
			u2 := append([]float32(nil), up...)
			mustOK(t, SwiGLU(u2, gate, u2))
			mustSame(t, fmt.Sprintf("n=%d in place (up)", n), u2, out)
		}
		// -Inf and huge negative gates give exactly 0, never NaN.
		gate := []float32{float32(math.Inf(-1)), -1e38, -89, -3e38}
		out := make([]float32, len(gate))
		mustOK(t, SwiGLU(out, gate, []float32{2, 2, 2, 2}))
		for i, v := range out {
			if v != 0 {
				t.Errorf("silu(%g)*2 = %g, want 0", gate[i], v)
			}
		}
	})
}

func TestAdd(t *testing.T) {
	rng := newRand(102)
	forEachSet(t, "Add", func(t *testing.T, s *kern.Set) {
		for _, n := range []int{1, 7, 8, 9, 16, 31, 63, 64, 65, 129, qwenHidden, 128 * qwenHidden} {
			a, b := randF32(rng, n, 100), randF32(rng, n, 1)
			if n >= 4 {
				a[0], a[1], b[2], a[3] = float32(math.Inf(1)), float32(math.NaN()), float32(math.Inf(-1)), 3e38
				b[3] = 3e38
			}
			out := make([]float32, n)
			mustOK(t, Add(out, a, b))
			for i, got := range out {
				ref := float64(a[i]) + float64(b[i])
				if math.Abs(ref) > math.MaxFloat32 && !math.IsInf(ref, 0) {
					ref = math.Inf(1)
				}
				if !within(got, ref, 1e-6, math.Abs(ref)) {
					t.Fatalf("n=%d: out[%d] = %g, want %g", n, i, got, ref)
				}
			}
			x := append([]float32(nil), a...)
			mustOK(t, Add(x, x, b))
			mustSame(t, fmt.Sprintf("n=%d x = x + b", n), x, out)
			y := append([]float32(nil), b...)
			mustOK(t, Add(y, a, y))
			mustSame(t, fmt.Sprintf("n=%d y = a + y", n), y, out)
		}
	})
}

// ---- RoPE ----

func TestNewRopeTable(t *testing.T) {
	tab, err := NewRopeTable(qwenHeadDim, 4096, 1e6)
	mustOK(t, err)
	if tab.HeadDim() != 64 || tab.MaxPos() != 4096 || tab.Theta() != 1e6 {
		t.Fatalf("accessors: %d %d %g", tab.HeadDim(), tab.MaxPos(), tab.Theta())
	}
	for _, p := range []int{0, 1, 17, 4095} {
		for i := 0; i < 32; i++ {
			ang := float64(p) * math.Pow(1e6, -float64(2*i)/64)
			c, s := tab.cos[p*32+i], tab.sin[p*32+i]
			if c != float32(math.Cos(ang)) || s != float32(math.Sin(ang)) {
				t.Errorf("pos %d i %d: cos/sin %g %g, want %g %g", p, i, c, s, math.Cos(ang), math.Sin(ang))
			}
		}
	}
}

type ropeShape struct{ tokens, nHeads, headDim, stride, pos0 int }

func ropeShapes() []ropeShape {
	return []ropeShape{
		{1, qwenHeads, qwenHeadDim, qwenHidden, 0},       // decode q
		{1, qwenHeads, qwenHeadDim, qwenQKVWidth, 511},   // decode q in a fused QKV row
		{1, qwenKVHeads, qwenHeadDim, qwenQKVWidth, 100}, // decode k in a fused QKV row
		{128, qwenHeads, qwenHeadDim, qwenQKVWidth, 0},   // prefill q
		{128, qwenKVHeads, qwenHeadDim, 128, 300},        // prefill k, contiguous
		{5, 3, 10, 37, 2}, // half = 5: masked tails
		{3, 2, 48, 100, 7},
		{2, 2, 128, 256, 1},
		{4, 1, 2, 3, 0},
	}
}

func TestRopeNeoX(t *testing.T) {
	rng := newRand(103)
	tabs := map[int]*RopeTable{}
	for _, sh := range ropeShapes() {
		if tabs[sh.headDim] == nil {
			tab, err := NewRopeTable(sh.headDim, 600, 1e6)
			mustOK(t, err)
			tabs[sh.headDim] = tab
		}
	}
	forEachSet(t, "RopeNeoX", func(t *testing.T, s *kern.Set) {
		for _, sh := range ropeShapes() {
			what := fmt.Sprintf("%+v", sh)
			x := randF32(rng, (sh.tokens-1)*sh.stride+sh.nHeads*sh.headDim, 3)
			ref, mag := ropeF64(x, 1e6, sh.tokens, sh.nHeads, sh.headDim, sh.stride, sh.pos0)
			mustOK(t, RopeNeoX(x, tabs[sh.headDim], sh.tokens, sh.nHeads, sh.headDim, sh.stride, sh.pos0))
			checkRope(t, what, x, ref, mag)
		}
	})
}

func checkRope(t *testing.T, what string, x []float32, ref, mag []float64) {
	t.Helper()
	for i, got := range x {
		if math.Abs(float64(got)-ref[i]) > ropeTol*mag[i] {
			t.Errorf("%s: x[%d] = %.9g, want %.9g (|x0|+|x1| = %g)", what, i, got, ref[i], mag[i])
			return
		}
	}
}

// ---- KV append ----

func TestKVAppend(t *testing.T) {
	rng := newRand(104)
	type kvShape struct{ tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int }
	shapes := []kvShape{
		{1, qwenQKVWidth, qwenKVHeads, qwenHeadDim, 512, 0},
		{1, 128, qwenKVHeads, qwenHeadDim, 512, 511}, // the last free position
		{128, qwenQKVWidth, qwenKVHeads, qwenHeadDim, 512, 100},
		{6, 40, 3, 12, 9, 3}, // fills the cache to the end
		{4, 72, 1, 72, 4, 0},
		{3, 7, 1, 5, 10, 2},
	}
	forEachSet(t, "KVAppend", func(t *testing.T, s *kern.Set) {
		for _, sh := range shapes {
			cache := make([]float32, sh.nKVHeads*sh.maxCtx*sh.headDim)
			for i := range cache {
				cache[i] = opsSentinel
			}
			src := randF32(rng, (sh.tokens-1)*sh.srcStride+sh.nKVHeads*sh.headDim, 1)
			mustOK(t, KVAppend(cache, src, sh.tokens, sh.srcStride, sh.nKVHeads, sh.headDim, sh.maxCtx, sh.pos0))
			checkKV(t, fmt.Sprintf("%+v", sh), cache, src, sh.srcStride, sh.nKVHeads, sh.headDim, sh.maxCtx, sh.pos0, 0, sh.tokens)
		}
	})
}

// checkKV checks that cache holds src's tokens [t0, t1) at pos0+t and sentinels elsewhere.
func checkKV(t *testing.T, what string, cache, src []float32, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int) {
	t.Helper()
	for h := 0; h < nKVHeads; h++ {
		for p := 0; p < maxCtx; p++ {
			for d := 0; d < headDim; d++ {
				want := opsSentinel
				if tk := p - pos0; tk >= t0 && tk < t1 {
					want = src[tk*srcStride+h*headDim+d]
				}
				if got := cache[(h*maxCtx+p)*headDim+d]; got != want {
					t.Errorf("%s: cache[head %d][pos %d][%d] = %g, want %g", what, h, p, d, got, want)
					return
				}
			}
		}
	}
}

// ---- embedding ----

func TestEmbedQ8_0(t *testing.T) {
	rng := newRand(106)
	forEachSet(t, "EmbedQ8_0", func(t *testing.T, s *kern.Set) {
		for _, sh := range [][3]int{{qwenHidden, 300, 1}, {qwenHidden, 300, 7}, {32, 5, 3}, {96, 40, 17}} {
			c := newEmbedCase(rng, sh[0], sh[1], sh[2])
			out := make([]float32, len(c.ids)*c.dim)
			mustOK(t, EmbedQ8_0(out, c.table, c.ids, c.dim, c.vocab))
			mustSame(t, fmt.Sprintf("dim=%d vocab=%d tokens=%d", sh[0], sh[1], sh[2]), out, c.want())
		}
		// Special scales: zero, subnormal, the largest finite half.
		c := newEmbedCase(rng, 64, 3, 3)
		c.table[0].D, c.table[1].D, c.table[2].D, c.table[3].D = 0, 0x0001, 0x7bff, 0x8000
		c.ids = []int32{0, 1, 0}
		out := make([]float32, 3*64)
		mustOK(t, EmbedQ8_0(out, c.table, c.ids, c.dim, c.vocab))
		mustSame(t, "special scales", out, c.want())
	})
}

// ---- slices: each kernel writes only its range ----

// opsNames are the kern.Set fields of the ops tested here.
var opsNames = []string{"SwiGLU", "Add", "RopeNeoX", "KVAppend", "EmbedQ8_0"}

// skipUnlessAllOps skips a test that exercises every op on a set lacking one of them.
func skipUnlessAllOps(t *testing.T, s *kern.Set) {
	t.Helper()
	for _, op := range opsNames {
		if !hasOp(s, op) {
			t.Skipf("%s lacks %s", s.Name(), op)
		}
	}
}

func sentinels(n int) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = opsSentinel
	}
	return s
}

func TestOpsSlices(t *testing.T) {
	rng := newRand(107)
	forEachSet(t, "EmbedQ8_0", func(t *testing.T, s *kern.Set) {
		skipUnlessAllOps(t, s)
		// SwiGLU and Add over [i0, i1).
		const n = 100
		gate, up := swigluInputs(rng, n)
		a, b := randF32(rng, n, 10), randF32(rng, n, 10)
		for _, r := range [][2]int{{0, n}, {3, 37}, {16, 48}, {17, 18}, {99, 100}, {5, 5}} {
			i0, i1 := r[0], r[1]
			out := sentinels(n)
			s.K[kern.SwiGLU](argsSwiGLU(sliceP(out), sliceP(gate), sliceP(up)), nil, i0, i1)
			checkSwiGLUOut(t, fmt.Sprintf("SwiGLU [%d,%d)", i0, i1), out[i0:i1], gate[i0:i1], up[i0:i1])
			checkSentinels(t, fmt.Sprintf("SwiGLU [%d,%d)", i0, i1), out, i0, i1)
			out = sentinels(n)
			s.K[kern.Add](argsAdd(sliceP(out), sliceP(a), sliceP(b)), nil, i0, i1)
			for i := i0; i < i1; i++ {
				if out[i] != a[i]+b[i] {
					t.Errorf("Add [%d,%d): out[%d] = %g, want %g", i0, i1, i, out[i], a[i]+b[i])
				}
			}
			checkSentinels(t, fmt.Sprintf("Add [%d,%d)", i0, i1), out, i0, i1)
		}
		// RoPE over tokens [t0, t1): the others stay as they were.
		tab, err := NewRopeTable(qwenHeadDim, 64, 1e6)
		mustOK(t, err)
		const T, stride, pos0 = 6, qwenQKVWidth, 9
		x := randF32(rng, (T-1)*stride+qwenHidden, 2)
		for _, r := range [][2]int{{0, 6}, {2, 4}, {5, 6}} {
			t0, t1 := r[0], r[1]
			got := append([]float32(nil), x...)
			s.K[kern.RopeNeoX](argsRopeNeoX(sliceP(got), sliceP(tab.cos), sliceP(tab.sin), stride, qwenHeads, qwenHeadDim, pos0), nil, t0, t1)
			ref, mag := ropeF64(x, 1e6, T, qwenHeads, qwenHeadDim, stride, pos0)
			for i := range ref {
				if tk := i / stride; tk < t0 || tk >= t1 {
					ref[i], mag[i] = float64(x[i]), 0
				}
			}
			checkRope(t, fmt.Sprintf("RopeNeox tokens [%d,%d)", t0, t1), got, ref, mag)
		}
		// KV append over tokens [t0, t1).
		src := randF32(rng, (T-1)*stride+qwenKVHeads*qwenHeadDim, 1)
		for _, r := range [][2]int{{0, 6}, {1, 3}, {5, 6}} {
			cache := sentinels(qwenKVHeads * 32 * qwenHeadDim)
			s.K[kern.KVAppend](argsKVAppend(sliceP(cache), sliceP(src), stride, qwenKVHeads, qwenHeadDim, 32, 20), nil, r[0], r[1])
			checkKV(t, fmt.Sprintf("KVAppend tokens [%d,%d)", r[0], r[1]), cache, src, stride, qwenKVHeads, qwenHeadDim, 32, 20, r[0], r[1])
		}
		// Embedding over tokens [t0, t1).
		e := newEmbedCase(rng, 96, 20, 7)
		want := e.want()
		for _, r := range [][2]int{{0, 7}, {2, 5}, {6, 7}} {
			out := sentinels(len(want))
			s.K[kern.EmbedQ8_0](argsEmbedQ8_0(sliceP(out), sliceP(e.table), sliceP(e.ids), e.dim), nil, r[0], r[1])
			lo, hi := r[0]*e.dim, r[1]*e.dim
			mustSame(t, fmt.Sprintf("EmbedQ8_0 tokens [%d,%d)", r[0], r[1]), out[lo:hi], want[lo:hi])
			checkSentinels(t, fmt.Sprintf("EmbedQ8_0 tokens [%d,%d)", r[0], r[1]), out, lo, hi)
		}
	})
}

func checkSentinels(t *testing.T, what string, out []float32, i0, i1 int) {
	t.Helper()
	for i, v := range out {
		if (i < i0 || i >= i1) && v != opsSentinel {
			t.Errorf("%s: wrote out[%d] = %g outside the slice", what, i, v)
			return
		}
	}
}

// ---- guard pages: no op reads or writes one byte outside its arguments ----

func TestOpsGuardPages(t *testing.T) {
	rng := newRand(108)
	type placer struct {
		name string
		f32  func(testing.TB, int) []float32
		q8   func(testing.TB, int) []BlockQ8_0
		i32  func(testing.TB, int) []int32
	}
	placers := []placer{
		{"tail", guardTail[float32], guardTail[BlockQ8_0], guardTail[int32]},
		{"head", guardHead[float32], guardHead[BlockQ8_0], guardHead[int32]},
	}
	forEachSet(t, "EmbedQ8_0", func(t *testing.T, s *kern.Set) {
		skipUnlessAllOps(t, s)
		for _, p := range placers {
			g := func(x []float32) []float32 { return guardedCopy(t, x, p.f32) }
			for _, n := range []int{1, 5, 8, 13, 16, 17, 31, 33, 65, 100} {
				gate, up := swigluInputs(rng, n)
				want := make([]float32, n)
				mustOK(t, SwiGLU(want, gate, up))
				out := p.f32(t, n)
				mustOK(t, SwiGLU(out, g(gate), g(up)))
				mustSame(t, fmt.Sprintf("%s SwiGLU n=%d", p.name, n), out, want)
				mustOK(t, Add(want, gate, up))
				out = p.f32(t, n)
				mustOK(t, Add(out, g(gate), g(up)))
				mustSame(t, fmt.Sprintf("%s Add n=%d", p.name, n), out, want)
			}
			for _, sh := range []ropeShape{{1, 3, 10, 30, 4}, {2, 2, 64, 128, 3}, {3, 1, 6, 6, 0}, {2, 1, 34, 40, 1}} {
				tab, err := NewRopeTable(sh.headDim, sh.pos0+sh.tokens, 1e6) // the last table row is used
				mustOK(t, err)
				x := randF32(rng, (sh.tokens-1)*sh.stride+sh.nHeads*sh.headDim, 2)
				want := append([]float32(nil), x...)
				mustOK(t, RopeNeoX(want, tab, sh.tokens, sh.nHeads, sh.headDim, sh.stride, sh.pos0))
				gtab := *tab
				gtab.cos, gtab.sin = g(tab.cos), g(tab.sin)
				gx := g(x)
				mustOK(t, RopeNeoX(gx, &gtab, sh.tokens, sh.nHeads, sh.headDim, sh.stride, sh.pos0))
				mustSame(t, fmt.Sprintf("%s RopeNeoX %+v", p.name, sh), gx, want)
			}
			for _, sh := range [][6]int{{2, 20, 2, 10, 5, 3}, {1, 64, 1, 64, 3, 0}, {1, 64, 1, 64, 3, 2}, {3, 17, 1, 17, 3, 0}} {
				tokens, srcStride, nKV, hd, maxCtx, pos0 := sh[0], sh[1], sh[2], sh[3], sh[4], sh[5]
				src := randF32(rng, (tokens-1)*srcStride+nKV*hd, 1)
				want := make([]float32, nKV*maxCtx*hd)
				mustOK(t, KVAppend(want, src, tokens, srcStride, nKV, hd, maxCtx, pos0))
				cache := p.f32(t, len(want))
				mustOK(t, KVAppend(cache, g(src), tokens, srcStride, nKV, hd, maxCtx, pos0))
				mustSame(t, fmt.Sprintf("%s KVAppend %v", p.name, sh), cache, want)
			}
			for _, sh := range [][3]int{{32, 3, 2}, {96, 5, 4}, {64, 1, 1}} {
				e := newEmbedCase(rng, sh[0], sh[1], sh[2])
				out := p.f32(t, len(e.ids)*e.dim)
				mustOK(t, EmbedQ8_0(out, guardedCopy(t, e.table, p.q8), guardedCopy(t, e.ids, p.i32), e.dim, e.vocab))
				mustSame(t, fmt.Sprintf("%s EmbedQ8_0 %v", p.name, sh), out, e.want())
			}
		}
	})
}

// ---- the generic port agrees with the C _ref kernels bit for bit ----

func TestOpsGenericMatchesCRef(t *testing.T) {
	gen, err1 := kern.Lookup("generic", cpu.Ref)
	cref, err2 := kern.Lookup("cgo", cpu.Ref)
	if err1 != nil || err2 != nil {
		t.Skip("needs both the generic and the cgo backend")
	}
	rng := newRand(109)
	both := func(what string, run func(s *kern.Set) []float32) {
		t.Helper()
		mustSame(t, what, run(gen), run(cref))
	}
	gate, up := swigluInputs(rng, 999)
	both("SwiGLU", func(s *kern.Set) []float32 {
		out := make([]float32, len(gate))
		s.K[kern.SwiGLU](argsSwiGLU(sliceP(out), sliceP(gate), sliceP(up)), nil, 0, len(out))
		return out
	})
	both("Add", func(s *kern.Set) []float32 {
		out := make([]float32, len(gate))
		s.K[kern.Add](argsAdd(sliceP(out), sliceP(gate), sliceP(up)), nil, 0, len(out))
		return out
	})
	tab, err := NewRopeTable(qwenHeadDim, 200, 1e6)
	mustOK(t, err)
	x := randF32(rng, 9*qwenQKVWidth+qwenHidden, 3)
	both("RopeNeoX", func(s *kern.Set) []float32 {
		out := append([]float32(nil), x...)
		s.K[kern.RopeNeoX](argsRopeNeoX(sliceP(out), sliceP(tab.cos), sliceP(tab.sin), qwenQKVWidth, qwenHeads, qwenHeadDim, 150), nil, 0, 10)
		return out
	})
	e := newEmbedCase(rng, qwenHidden, 50, 9)
	both("EmbedQ8_0", func(s *kern.Set) []float32 {
		out := make([]float32, len(e.ids)*e.dim)
		s.K[kern.EmbedQ8_0](argsEmbedQ8_0(sliceP(out), sliceP(e.table), sliceP(e.ids), e.dim), nil, 0, len(e.ids))
		return out
	})
}

// ---- argument errors ----

func TestOpsArgErrors(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	tab, err := NewRopeTable(64, 10, 1e6)
	mustOK(t, err)
	x := f(100)

	// NewRopeTable
	_, err = NewRopeTable(63, 10, 1e6)
	wantArgErr(t, err, "NewRopeTable", "headDim", "positive and even", "63")
	_, err = NewRopeTable(0, 10, 1e6)
	wantArgErr(t, err, "NewRopeTable", "headDim", "0")
	_, err = NewRopeTable(64, 0, 1e6)
	wantArgErr(t, err, "NewRopeTable", "maxPos", "positive")
	_, err = NewRopeTable(64, 10, math.NaN())
	wantArgErr(t, err, "NewRopeTable", "theta", "NaN")
	_, err = NewRopeTable(64, 10, -1)
	wantArgErr(t, err, "NewRopeTable", "theta", "-1")
	_, err = NewRopeTable(64, 10, math.Inf(1))
	wantArgErr(t, err, "NewRopeTable", "theta", "finite")
	_, err = NewRopeTable(64, math.MaxInt/2, 1e6)
	wantArgErr(t, err, "NewRopeTable", "maxPos", "overflows")

	// SwiGLU / Add
	wantArgErr(t, SwiGLU(nil, x, x), "SwiGLU", "out", "nil")
	wantArgErr(t, SwiGLU(f(0), f(0), f(0)), "SwiGLU", "out", "empty")
	wantArgErr(t, SwiGLU(f(10), f(9), f(10)), "SwiGLU", "gate", "9", "len(out) = 10")
	wantArgErr(t, SwiGLU(f(10), f(10), nil), "SwiGLU", "up", "nil", "10")
	wantArgErr(t, SwiGLU(x[1:11], x[:10], f(10)), "SwiGLU", "out", "partially overlaps gate")
	wantArgErr(t, Add(f(10), f(10), f(11)), "Add", "b", "11", "len(out) = 10")
	wantArgErr(t, Add(x[:10], f(10), x[5:15]), "Add", "out", "partially overlaps b")
	wantArgErr(t, Add(nil, nil, nil), "Add", "out", "nil")
	if err := Add(x[:10], x[:10], x[:10]); err != nil {
		t.Errorf("Add fully in place: %v", err)
	}

	// RopeNeoX(x, tab, tokens, nHeads, headDim, stride, pos0)
	wantArgErr(t, RopeNeoX(f(128), nil, 1, 2, 64, 128, 0), "RopeNeoX", "tab", "nil")
	wantArgErr(t, RopeNeoX(f(128), tab, 0, 2, 64, 128, 0), "RopeNeoX", "tokens", "positive", "0")
	wantArgErr(t, RopeNeoX(f(128), tab, 1, 0, 64, 128, 0), "RopeNeoX", "nHeads", "positive")
	wantArgErr(t, RopeNeoX(f(128), tab, 1, 2, 0, 128, 0), "RopeNeoX", "headDim", "positive")
	wantArgErr(t, RopeNeoX(f(64), tab, 1, 2, 32, 64, 0), "RopeNeoX", "headDim", "32", "64")
	wantArgErr(t, RopeNeoX(f(128), tab, 1, 2, 64, 100, 0), "RopeNeoX", "stride", "100", "nHeads*headDim = 128")
	wantArgErr(t, RopeNeoX(f(128), tab, 1, 2, 64, 128, -1), "RopeNeoX", "pos0", "negative", "-1")
	wantArgErr(t, RopeNeoX(f(3*200+128), tab, 4, 2, 64, 200, 7), "RopeNeoX", "pos0", "7+4", "tab.MaxPos() = 10")
	wantArgErr(t, RopeNeoX(f(700), tab, 4, 2, 64, 200, 0), "RopeNeoX", "x", "700", "(tokens-1)*stride + nHeads*headDim = 728")
	wantArgErr(t, RopeNeoX(nil, tab, 1, 2, 64, 128, 0), "RopeNeoX", "x", "nil", "128")
	wantArgErr(t, RopeNeoX(f(128), tab, 1, math.MaxInt/2, 64, 128, 0), "RopeNeoX", "nHeads", "overflows")
	wantArgErr(t, RopeNeoX(f(128), tab, 3, 2, 64, math.MaxInt/2, 0), "RopeNeoX", "stride", "overflows")

	// KVAppend(cache, src, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0)
	cache := f(2 * 8 * 4)
	wantArgErr(t, KVAppend(cache, f(8), 1, 8, 2, 4, 8, 8), "KVAppend", "pos0", "8+1", "maxCtx = 8")
	wantArgErr(t, KVAppend(cache, f(3*8+8), 4, 8, 2, 4, 8, 5), "KVAppend", "pos0", "5+4", "maxCtx = 8")
	wantArgErr(t, KVAppend(cache, f(8), 1, 8, 2, 4, 8, -1), "KVAppend", "pos0", "negative")
	wantArgErr(t, KVAppend(cache, f(8), 0, 8, 2, 4, 8, 0), "KVAppend", "tokens", "positive")
	wantArgErr(t, KVAppend(cache, f(8), 1, 8, 0, 4, 8, 0), "KVAppend", "nKVHeads", "positive")
	wantArgErr(t, KVAppend(cache, f(8), 1, 8, 2, 4, 0, 0), "KVAppend", "maxCtx", "positive")
	wantArgErr(t, KVAppend(cache, f(8), 1, 7, 2, 4, 8, 0), "KVAppend", "srcStride", "7", "nKVHeads*headDim = 8")
	wantArgErr(t, KVAppend(f(63), f(8), 1, 8, 2, 4, 8, 0), "KVAppend", "cache", "63", "nKVHeads*maxCtx*headDim = 64")
	wantArgErr(t, KVAppend(cache, f(9), 1, 8, 2, 4, 8, 0), "KVAppend", "src", "9", "(tokens-1)*srcStride + nKVHeads*headDim = 8")
	wantArgErr(t, KVAppend(cache, cache[:8], 1, 8, 2, 4, 8, 0), "KVAppend", "cache", "overlaps src")
	wantArgErr(t, KVAppend(cache, f(8), 1, 8, 2, 4, math.MaxInt/4, 0), "KVAppend", "maxCtx", "overflows")

	// EmbedQ8_0(out, table, ids, dim, vocab)
	table := make([]BlockQ8_0, 10*2)
	if err := EmbedQ8_0(f(64), table, []int32{3}, 64, 10); err != nil {
		t.Errorf("EmbedQ8_0 valid call: %v", err)
	}
	wantArgErr(t, EmbedQ8_0(f(128), table, []int32{3, 10}, 64, 10), "EmbedQ8_0", "ids", "ids[1] = 10", "0..9")
	wantArgErr(t, EmbedQ8_0(f(192), table, []int32{3, 4, -2}, 64, 10), "EmbedQ8_0", "ids", "ids[2] = -2")
	wantArgErr(t, EmbedQ8_0(f(64), table, nil, 64, 10), "EmbedQ8_0", "ids", "nil")
	wantArgErr(t, EmbedQ8_0(f(0), table, []int32{}, 64, 10), "EmbedQ8_0", "ids", "empty")
	wantArgErr(t, EmbedQ8_0(f(64), table, []int32{3}, 60, 10), "EmbedQ8_0", "dim", "multiple of 32", "60")
	wantArgErr(t, EmbedQ8_0(f(64), table, []int32{3}, 64, 0), "EmbedQ8_0", "vocab", "positive")
	wantArgErr(t, EmbedQ8_0(f(64), table[:19], []int32{3}, 64, 10), "EmbedQ8_0", "table", "19", "vocab*dim/32 = 20")
	wantArgErr(t, EmbedQ8_0(f(63), table, []int32{3}, 64, 10), "EmbedQ8_0", "out", "63", "len(ids)*dim = 64")
	wantArgErr(t, EmbedQ8_0(f(96), table, []int32{3}, 96, math.MaxInt/2), "EmbedQ8_0", "vocab", "overflows")
}

// ---- allocations ----

func TestOpsNoAllocs(t *testing.T) {
	rng := newRand(110)
	gate, up := randF32(rng, qwenInter, 5), randF32(rng, qwenInter, 1)
	out := make([]float32, qwenInter)
	tab, err := NewRopeTable(qwenHeadDim, 600, 1e6)
	mustOK(t, err)
	x := randF32(rng, qwenHidden, 1)
	cache := make([]float32, qwenKVHeads*600*qwenHeadDim)
	e := newEmbedCase(rng, qwenHidden, 10, 2)
	emb := make([]float32, 2*qwenHidden)
	forEachSet(t, "EmbedQ8_0", func(t *testing.T, s *kern.Set) {
		skipUnlessAllOps(t, s)
		wantNoAllocs(t, "SwiGLU", func() { _ = SwiGLU(out, gate, up) })
		wantNoAllocs(t, "Add", func() { _ = Add(out, gate, up) })
		wantNoAllocs(t, "RopeNeoX", func() { _ = RopeNeoX(x, tab, 1, qwenHeads, qwenHeadDim, qwenHidden, 100) })
		wantNoAllocs(t, "KVAppend", func() {
			_ = KVAppend(cache, x[:qwenKVHeads*qwenHeadDim], 1, 128, qwenKVHeads, qwenHeadDim, 600, 100)
		})
		wantNoAllocs(t, "EmbedQ8_0", func() { _ = EmbedQ8_0(emb, e.table, e.ids, e.dim, e.vocab) })
	})
}
