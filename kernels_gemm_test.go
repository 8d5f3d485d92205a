package kernelrt

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// Tests of GemmQ8_0 / GemmQ5_0 for every registered backend x variant: a float64 reference,
// bit-identity with the reference set (every variant shares one operation order), T GEMVs,
// slices r0..r1, guard pages, poisoned blocks, argument errors and allocations.

const gemmTol = 1e-5 // relative to sum_j |w_j x_j| (+ |bias|), so cancellation cannot hide errors

// gemmCase is one GEMM problem with its inputs (both weight formats share x and bias).
type gemmCase struct {
	rows, cols, tokens int
	w8                 []BlockQ8_0
	w5                 []BlockQ5_0
	x                  []BlockQ8_0
	bias               []float32 // nil: no bias
}

func newGemmCase(rng *rand.Rand, rows, cols, tokens int, withBias bool) *gemmCase {
	c := &gemmCase{rows: rows, cols: cols, tokens: tokens,
		w8: randQ8_0(rng, rows*cols/QK), w5: randQ5_0(rng, rows*cols/QK), x: randQ8_0(rng, tokens*cols/QK)}
	if withBias {
		c.bias = randF32(rng, rows, 1)
	}
	return c
}

func (c *gemmCase) String() string {
	return fmt.Sprintf("%dx%d/T%d/bias=%v", c.rows, c.cols, c.tokens, c.bias != nil)
}

// run computes y with the active kernels through the public function.
func (c *gemmCase) run(q5 bool, y []float32) error {
	if q5 {
		return GemmQ5_0(y, c.w5, c.x, c.bias, c.rows, c.cols, c.tokens)
	}
	return GemmQ8_0(y, c.w8, c.x, c.bias, c.rows, c.cols, c.tokens)
}

// runSet computes rows r0..r1 of y by calling set s's kernel directly.
func (c *gemmCase) runSet(s *kern.Set, q5 bool, y []float32, r0, r1 int) {
	if q5 {
		s.K[kern.GemmQ5_0](argsGemmQ5_0(sliceP(y), sliceP(c.w5), sliceP(c.x), sliceP(c.bias), c.rows, c.cols, c.tokens), nil, r0, r1)
	} else {
		s.K[kern.GemmQ8_0](argsGemmQ8_0(sliceP(y), sliceP(c.w8), sliceP(c.x), sliceP(c.bias), c.rows, c.cols, c.tokens), nil, r0, r1)
	}
}

// refF64 returns y in float64 from the dequantized blocks, and the magnitude sum |w x| (+|bias|)
// per output.
func (c *gemmCase) refF64(q5 bool) (ref, mag []float64) {
	var w []float64
	if q5 {
		w = dequantQ5_0F64(c.w5)
	} else {
		w = dequantQ8_0F64(c.w8)
	}
	x := dequantQ8_0F64(c.x)
	ref = make([]float64, c.tokens*c.rows)
	mag = make([]float64, c.tokens*c.rows)
	for t := 0; t < c.tokens; t++ {
		xt := x[t*c.cols : (t+1)*c.cols]
		for r := 0; r < c.rows; r++ {
			wr := w[r*c.cols : (r+1)*c.cols]
			s, m := 0.0, 0.0
			for j, wv := range wr {
				p := wv * xt[j]
				s += p
				m += math.Abs(p)
			}
			if c.bias != nil {
				s += float64(c.bias[r])
				m += math.Abs(float64(c.bias[r]))
			}
			ref[t*c.rows+r], mag[t*c.rows+r] = s, m
		}
	}
	return ref, mag
}

// refSetY is y from the reference set (C _ref, or the Go port without cgo).
func (c *gemmCase) refSetY(q5 bool) []float32 {
	y := make([]float32, c.tokens*c.rows)
	c.runSet(refSet(), q5, y, 0, c.rows)
	return y
}

func gemmOp(q5 bool) string {
	if q5 {
		return "GemmQ5_0"
	}
	return "GemmQ8_0"
}

func gemvOp(q5 bool) string {
	if q5 {
		return "GemvQ5_0"
	}
	return "GemvQ8_0"
}

// gemmShapes are the problems every set runs: T = 1, 7, 32, 128 (+ odd ones), rows not a
// multiple of any tile (16/32), cols across the kernels' column chunks (8 and 16 blocks).
func gemmShapes(s *kern.Set) [][3]int {
	shapes := [][3]int{
		{1, 32, 1}, {5, 64, 7}, {17, 96, 3}, {33, 544, 9}, {16, 256, 32}, {48, 512, 4},
		{31, 128, 128}, {70, 1056, 33}, {37, 896, 7}, {96, 896, 130},
	}
	if s.Backend == "generic" || s.Variant == cpu.Ref {
		return shapes[:8] // the scalar kernels are slow; these still cover every tail
	}
	return shapes
}

func TestGemmQ8_0(t *testing.T) { testGemm(t, false) }
func TestGemmQ5_0(t *testing.T) { testGemm(t, true) }

func testGemm(t *testing.T, q5 bool) {
	forEachSet(t, gemmOp(q5), func(t *testing.T, s *kern.Set) {
		for i, sh := range gemmShapes(s) {
			c := newGemmCase(newRand(uint64(100+i)), sh[0], sh[1], sh[2], i%2 == 0)
			t.Run(c.String(), func(t *testing.T) {
				y := make([]float32, c.tokens*c.rows)
				if err := c.run(q5, y); err != nil {
					t.Fatal(err)
				}
				// 1. float64 reference
				ref, mag := c.refF64(q5)
				bad := 0
				for i := range y {
					if !within(y[i], ref[i], gemmTol, mag[i]) {
						if bad++; bad <= 5 {
							t.Errorf("y[t=%d][r=%d] = %g, want %g (tol %.3g)", i/c.rows, i%c.rows, y[i], ref[i], gemmTol*mag[i])
						}
					}
				}
				// 2. bit-identical to the reference set (same operation order everywhere)
				want := c.refSetY(q5)
				for i := range y {
					if !sameFloat(y[i], want[i]) {
						t.Fatalf("y[t=%d][r=%d] = %g (%#08x), reference set %s gives %g (%#08x)", i/c.rows, i%c.rows,
							y[i], math.Float32bits(y[i]), refSet().Name(), want[i], math.Float32bits(want[i]))
					}
				}
				// 3. T GEMVs of the same set: identical for the scalar variant (same per-block
				// order), within the GEMV tolerance for SIMD GEMVs (they keep lane partial sums).
				if !hasOp(s, gemvOp(q5)) {
					return
				}
				nb := c.cols / QK
				yv := make([]float32, c.rows)
				for tk := 0; tk < c.tokens; tk++ {
					var err error
					if q5 {
						err = GemvQ5_0Bias(yv, c.w5, c.x[tk*nb:(tk+1)*nb], c.bias, c.rows, c.cols)
					} else {
						err = GemvQ8_0Bias(yv, c.w8, c.x[tk*nb:(tk+1)*nb], c.bias, c.rows, c.cols)
					}
					if err != nil {
						t.Fatal(err)
					}
					for r, v := range yv {
						g := y[tk*c.rows+r]
						if s.Variant == cpu.Ref && !sameFloat(g, v) {
							t.Fatalf("token %d row %d: GEMM %g != scalar GEMV %g", tk, r, g, v)
						}
						if !within(g, float64(v), gemmTol, mag[tk*c.rows+r]) {
							t.Fatalf("token %d row %d: GEMM %g, GEMV %g (tol %.3g)", tk, r, g, v, gemmTol*mag[tk*c.rows+r])
						}
					}
				}
			})
		}
	})
}

// TestGemmExtremeQuants puts -128 and 127 in weights and activations (the int8 values that a
// sign-trick kernel gets wrong) and checks every set against the float64 reference and the
// reference set bit for bit.
func TestGemmExtremeQuants(t *testing.T) {
	rng := newRand(7)
	c := newGemmCase(rng, 37, 288, 11, true)
	for _, bs := range [][]BlockQ8_0{c.w8, c.x} {
		for i := range bs {
			for j := range bs[i].Qs {
				switch rng.IntN(4) {
				case 0:
					bs[i].Qs[j] = -128
				case 1:
					bs[i].Qs[j] = 127
				}
			}
		}
	}
	for _, q5 := range []bool{false, true} {
		ref, mag := c.refF64(q5)
		want := c.refSetY(q5)
		forEachSet(t, gemmOp(q5), func(t *testing.T, s *kern.Set) {
			y := make([]float32, c.tokens*c.rows)
			if err := c.run(q5, y); err != nil {
				t.Fatal(err)
			}
			for i := range y {
				if !within(y[i], ref[i], gemmTol, mag[i]) || !sameFloat(y[i], want[i]) {
					t.Fatalf("%s y[t=%d][r=%d] = %g, want %g (reference set %g)", gemmOp(q5), i/c.rows, i%c.rows, y[i], ref[i], want[i])
				}
			}
		})
	}
}

// TestGemmPoisoned checks that a NaN scale poisons exactly the outputs whose sums touch it
// (its weight row for every token; its token for every row), the same in every set.
func TestGemmPoisoned(t *testing.T) {
	c := newGemmCase(newRand(8), 20, 96, 6, false)
	c.w8[5*3+1].D = 0x7e00 // row 5, block 1
	c.w5[9*3+2].D = 0x7e00 // row 9, block 2
	c.x[4*3+0].D = 0x7e00  // token 4, block 0
	for _, q5 := range []bool{false, true} {
		badRow := 5
		if q5 {
			badRow = 9
		}
		forEachSet(t, gemmOp(q5), func(t *testing.T, s *kern.Set) {
			y := make([]float32, c.tokens*c.rows)
			if err := c.run(q5, y); err != nil {
				t.Fatal(err)
			}
			for i, v := range y {
				tk, r := i/c.rows, i%c.rows
				if nan := tk == 4 || r == badRow; nan != isNaN32(v) {
					t.Fatalf("y[t=%d][r=%d] = %g, want NaN: %v", tk, r, v, nan)
				}
			}
		})
	}
}

// TestGemmSlice calls each set's kernel on slices r0..r1 (as the Runtime's workers do) and
// checks that only those rows are written, with the values of the whole call.
func TestGemmSlice(t *testing.T) {
	const sentinel = 0x7fc0dead // a NaN no kernel produces
	c := newGemmCase(newRand(9), 70, 544, 9, true)
	ranges := [][2]int{{0, 70}, {0, 1}, {3, 19}, {16, 48}, {17, 70}, {69, 70}, {5, 37}, {32, 64}, {10, 10}}
	for _, q5 := range []bool{false, true} {
		full := c.refSetY(q5)
		forEachSet(t, gemmOp(q5), func(t *testing.T, s *kern.Set) {
			y := make([]float32, c.tokens*c.rows)
			for _, rg := range ranges {
				for i := range y {
					y[i] = math.Float32frombits(sentinel)
				}
				c.runSet(s, q5, y, rg[0], rg[1])
				for i, v := range y {
					r := i % c.rows
					if r >= rg[0] && r < rg[1] {
						if !sameFloat(v, full[i]) || math.Float32bits(v) == sentinel {
							t.Fatalf("%s rows [%d,%d): y[t=%d][r=%d] = %g, want %g", gemmOp(q5), rg[0], rg[1], i/c.rows, r, v, full[i])
						}
					} else if math.Float32bits(v) != sentinel {
						t.Fatalf("%s rows [%d,%d): wrote y[t=%d][r=%d] outside the slice", gemmOp(q5), rg[0], rg[1], i/c.rows, r)
					}
				}
			}
		})
	}
}

// TestGemmGuardPages runs every set with each buffer ending at (then starting after) a
// PROT_NONE page, with odd rows and tokens, so any access past a buffer faults.
func TestGemmGuardPages(t *testing.T) {
	base := newGemmCase(newRand(10), 37, 224, 5, true)
	for _, q5 := range []bool{false, true} {
		want := base.refSetY(q5)
		forEachSet(t, gemmOp(q5), func(t *testing.T, s *kern.Set) {
			for _, place := range []struct {
				name string
				f8   func(testing.TB, int) []BlockQ8_0
				f5   func(testing.TB, int) []BlockQ5_0
				f32  func(testing.TB, int) []float32
			}{
				{"tail", guardTail[BlockQ8_0], guardTail[BlockQ5_0], guardTail[float32]},
				{"head", guardHead[BlockQ8_0], guardHead[BlockQ5_0], guardHead[float32]},
			} {
				for _, withBias := range []bool{true, false} {
					c := *base
					c.w8 = guardedCopy(t, base.w8, place.f8)
					c.w5 = guardedCopy(t, base.w5, place.f5)
					c.x = guardedCopy(t, base.x, place.f8)
					c.bias = nil
					exp := want
					if withBias {
						c.bias = guardedCopy(t, base.bias, place.f32)
					} else {
						cb := *base
						cb.bias = nil
						exp = cb.refSetY(q5)
					}
					y := place.f32(t, c.tokens*c.rows)
					if err := c.run(q5, y); err != nil {
						t.Fatal(err)
					}
					for i := range y {
						if !sameFloat(y[i], exp[i]) {
							t.Fatalf("%s %s bias=%v: y[%d] = %g, want %g", gemmOp(q5), place.name, withBias, i, y[i], exp[i])
						}
					}
				}
			}
		})
	}
}

func TestGemmArgErrors(t *testing.T) {
	const rows, cols, tokens = 4, 64, 3
	w8 := make([]BlockQ8_0, rows*cols/QK)
	w5 := make([]BlockQ5_0, rows*cols/QK)
	x := make([]BlockQ8_0, tokens*cols/QK)
	y := make([]float32, tokens*rows)
	bias := make([]float32, rows)
	big := math.MaxInt/2 + 1
	shared := make([]float32, tokens*rows+rows)
	type call struct {
		name             string
		y                []float32
		w8               []BlockQ8_0
		w5               []BlockQ5_0
		x                []BlockQ8_0
		bias             []float32
		rows, cols, toks int
		arg              string
		parts            []string
	}
	calls := []call{
		{"rows 0", y, w8, w5, x, bias, 0, cols, tokens, "rows", []string{"positive", "0"}},
		{"rows <0", y, w8, w5, x, bias, -3, cols, tokens, "rows", []string{"-3"}},
		{"cols 0", y, w8, w5, x, bias, rows, 0, tokens, "cols", []string{"multiple of 32", "0"}},
		{"cols 48", y, w8, w5, x, bias, rows, 48, tokens, "cols", []string{"multiple of 32", "48"}},
		{"tokens 0", y, w8, w5, x, bias, rows, cols, 0, "tokens", []string{"positive", "0"}},
		{"tokens <0", y, w8, w5, x, bias, rows, cols, -1, "tokens", []string{"-1"}},
		{"rows*cols overflow", y, w8, w5, x, bias, big, 64, tokens, "rows", []string{"overflows"}},
		{"tokens*rows overflow", y, w8, w5, x, bias, rows, cols, big, "tokens", []string{"tokens*rows", "overflows"}},
		{"tokens*cols overflow", y, w8, w5, x, bias, 1, 1 << 20, big / 2, "tokens", []string{"tokens*cols/32", "overflows"}},
		{"y nil", nil, w8, w5, x, bias, rows, cols, tokens, "y", []string{"nil", "tokens*rows = 12"}},
		{"y short", y[:11], w8, w5, x, bias, rows, cols, tokens, "y", []string{"length 11", "tokens*rows = 12"}},
		{"y long", make([]float32, 13), w8, w5, x, bias, rows, cols, tokens, "y", []string{"length 13", "12"}},
		{"w nil", y, nil, nil, x, bias, rows, cols, tokens, "w", []string{"nil", "rows*cols/32 = 8"}},
		{"w short", y, w8[:7], w5[:7], x, bias, rows, cols, tokens, "w", []string{"length 7", "rows*cols/32 = 8"}},
		{"x nil", y, w8, w5, nil, bias, rows, cols, tokens, "x", []string{"nil", "tokens*cols/32 = 6"}},
		{"x short", y, w8, w5, x[:2], bias, rows, cols, tokens, "x", []string{"length 2", "tokens*cols/32 = 6"}},
		{"bias short", y, w8, w5, x, bias[:3], rows, cols, tokens, "bias", []string{"length 3", "rows = 4"}},
		{"bias empty", y, w8, w5, x, []float32{}, rows, cols, tokens, "bias", []string{"length 0", "rows = 4"}},
		{"y overlaps bias", shared[:tokens*rows], w8, w5, x, shared[tokens*rows-1 : tokens*rows-1+rows], rows, cols, tokens, "y", []string{"overlaps bias"}},
	}
	for _, c := range calls {
		t.Run(c.name, func(t *testing.T) {
			wantArgErr(t, GemmQ8_0(c.y, c.w8, c.x, c.bias, c.rows, c.cols, c.toks), "GemmQ8_0", c.arg, c.parts...)
			wantArgErr(t, GemmQ5_0(c.y, c.w5, c.x, c.bias, c.rows, c.cols, c.toks), "GemmQ5_0", c.arg, c.parts...)
		})
	}
	// a valid call with and without bias succeeds
	if err := GemmQ8_0(y, w8, x, nil, rows, cols, tokens); err != nil {
		t.Errorf("valid GemmQ8_0 without bias: %v", err)
	}
	if err := GemmQ5_0(y, w5, x, bias, rows, cols, tokens); err != nil {
		t.Errorf("valid GemmQ5_0 with bias: %v", err)
	}
}

func TestGemmNoAllocs(t *testing.T) {
	c := newGemmCase(newRand(11), 33, 96, 5, true)
	y := make([]float32, c.tokens*c.rows)
	for _, q5 := range []bool{false, true} {
		forEachSet(t, gemmOp(q5), func(t *testing.T, s *kern.Set) {
			wantNoAllocs(t, gemmOp(q5), func() {
				if err := c.run(q5, y); err != nil {
					t.Fatal(err)
				}
			})
		})
	}
}
