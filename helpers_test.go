package kernelrt

// Test helpers shared by every kernel test file of package kernelrt: iterating the registered
// backend x variant sets, float64 references, random inputs, NaN-aware comparisons, guard pages
// and allocation checks.

import (
	"errors"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas64"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
	"github.com/kernelrt/kernelrt/internal/testutil"
)

// ---- kernel sets ----

// allSets lists every registered backend x variant this CPU can run, by backend then variant
// (ref first). The generic backend has only its ref variant.
func allSets() []*kern.Set {
	var out []*kern.Set
	for _, b := range kern.Backends() {
		for _, v := range cpu.Supported() {
			if s, err := kern.Lookup(b, v); err == nil {
				out = append(out, s)
			}
		}
	}
	return out
}

// refSet is the set every other set is compared with: the C _ref kernels when cgo is built in
// (the scalar code the SIMD variants were written from), the pure-Go port otherwise.
func refSet() *kern.Set {
	if s, err := kern.Lookup("cgo", cpu.Ref); err == nil {
		return s
	}
	s, err := kern.Lookup("generic", cpu.Ref)
	if err != nil {
		panic("kernelrt tests: no generic backend registered: " + err.Error())
	}
	return s
}

// hasOp reports whether s implements the kernel whose Go name is op (e.g. "GemvQ8_0"). It
// panics on an unknown name, so a typo cannot silently select no set.
func hasOp(s *kern.Set, op string) bool {
	for i, n := range kern.GoNames {
		if n == op {
			return s.K[i] != nil
		}
	}
	panic("kernelrt tests: no kernel named " + op)
}

// hasOps reports whether s implements every op named.
func hasOps(s *kern.Set, ops ...string) bool {
	for _, op := range ops {
		if !hasOp(s, op) {
			return false
		}
	}
	return true
}

// useSet makes s the active kernel set and returns the function restoring the previous one.
// Tests using it must not run in parallel with other kernel tests.
func useSet(s *kern.Set) (restore func()) { return kern.UseSet(s) }

// forEachSet runs fn as a subtest named "backend/variant" (e.g. "cgo/avx512") once per set
// that implements op, with that set active (so the public functions run it).
func forEachSet(t *testing.T, op string, fn func(t *testing.T, s *kern.Set)) {
	t.Helper()
	ran := 0
	for _, s := range allSets() {
		if !hasOp(s, op) {
			t.Logf("%s lacks %s", s.Name(), op)
			continue
		}
		ran++
		t.Run(s.Name(), func(t *testing.T) {
			defer useSet(s)()
			fn(t, s)
		})
	}
	if ran == 0 {
		t.Fatalf("no registered kernel set implements %s", op)
	}
}

// withSet runs fn with s active (for fuzz targets and benchmarks, which have no subtests).
func withSet(s *kern.Set, fn func()) {
	defer useSet(s)()
	fn()
}

// ---- random inputs ----

// newRand returns a deterministic generator: failures reproduce.
func newRand(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15)) }

// randF32 returns n floats uniform in [-scale, scale).
func randF32(rng *rand.Rand, n int, scale float32) []float32 {
	s := make([]float32, n)
	for i := range s {
		s[i] = (2*rng.Float32() - 1) * scale
	}
	return s
}

// randScaledF32 returns n floats whose blocks of 32 have magnitudes spread over 10^-4..10^4,
// so quantizer scales cover a wide fp16 range.
func randScaledF32(rng *rand.Rand, n int) []float32 {
	s := make([]float32, n)
	for b := 0; b < n; b += QK {
		scale := float32(math.Pow(10, 8*rng.Float64()-4))
		for j := b; j < min(n, b+QK); j++ {
			s[j] = (2*rng.Float32() - 1) * scale
		}
	}
	return s
}

// randD returns an fp16 scale with magnitude in [2^-12, 2^-4), random sign: realistic weights.
func randD(rng *rand.Rand) uint16 {
	return FP32ToFP16(float32(math.Ldexp(1+rng.Float64(), -12+rng.IntN(8))) * float32(1-2*rng.IntN(2)))
}

// randQ8_0 returns n Q8_0 blocks with realistic scales and quants in -127..127.
func randQ8_0(rng *rand.Rand, n int) []BlockQ8_0 {
	b := make([]BlockQ8_0, n)
	for i := range b {
		b[i].D = randD(rng)
		for j := range b[i].Qs {
			b[i].Qs[j] = int8(rng.IntN(255) - 127)
		}
	}
	return b
}

// randQ5_0 returns n Q5_0 blocks with realistic scales and random quants.
func randQ5_0(rng *rand.Rand, n int) []BlockQ5_0 {
	b := make([]BlockQ5_0, n)
	for i := range b {
		b[i].D = randD(rng)
		for j := range b[i].Qh {
			b[i].Qh[j] = uint8(rng.Uint32())
		}
		for j := range b[i].Qs {
			b[i].Qs[j] = uint8(rng.Uint32())
		}
	}
	return b
}

// ---- float64 references ----

// q5Quant returns the 5-bit quant q (0..31) of element j of a Q5_0 block.
func q5Quant(b *BlockQ5_0, j int) int {
	qh := uint32(b.Qh[0]) | uint32(b.Qh[1])<<8 | uint32(b.Qh[2])<<16 | uint32(b.Qh[3])<<24
	lo := b.Qs[j%16] & 0x0f
	if j >= 16 {
		lo = b.Qs[j-16] >> 4
	}
	return int(lo) | int(qh>>uint(j)&1)<<4
}

// fp16F64 decodes an fp16 independently of the code under test: sign * 2^(e-15) * 1.m, or
// sign * m * 2^-24 for subnormals.
func fp16F64(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	switch {
	case e == 0x1f && m == 0:
		return math.Inf(int(sign))
	case e == 0x1f:
		return math.NaN()
	case e == 0:
		return sign * math.Ldexp(m, -24)
	}
	return sign * math.Ldexp(1+m/1024, e-15)
}

// dequantQ8_0F64 expands Q8_0 blocks in float64 (exact: d has 11 bits, the quants 8).
func dequantQ8_0F64(bs []BlockQ8_0) []float64 {
	out := make([]float64, 0, len(bs)*QK)
	for i := range bs {
		d := fp16F64(bs[i].D)
		for _, q := range bs[i].Qs {
			out = append(out, d*float64(q))
		}
	}
	return out
}

// dequantQ5_0F64 expands Q5_0 blocks in float64.
func dequantQ5_0F64(bs []BlockQ5_0) []float64 {
	out := make([]float64, 0, len(bs)*QK)
	for i := range bs {
		d := fp16F64(bs[i].D)
		for j := 0; j < QK; j++ {
			out = append(out, d*float64(q5Quant(&bs[i], j)-16))
		}
	}
	return out
}

// f64s widens float32s.
func f64s(s []float32) []float64 {
	out := make([]float64, len(s))
	for i, v := range s {
		out[i] = float64(v)
	}
	return out
}

// gemvF64 returns y = W x (+ bias) in float64 through gonum's blas64, and mag[r] =
// sum_j |W[r][j] x[j]| (+ |bias[r]|): the scale rounding errors are measured against, which
// stays meaningful when the dot product cancels to nearly 0.
func gemvF64(w, x, bias []float64, rows, cols int) (ref, mag []float64) {
	ref = make([]float64, rows)
	if bias != nil {
		copy(ref, bias)
	}
	a := blas64.General{Rows: rows, Cols: cols, Stride: cols, Data: w}
	blas64.Gemv(blas.NoTrans, 1, a, blas64.Vector{N: cols, Inc: 1, Data: x}, 1, blas64.Vector{N: rows, Inc: 1, Data: ref})
	mag = make([]float64, rows)
	for r := range mag {
		for j := 0; j < cols; j++ {
			mag[r] += math.Abs(w[r*cols+j] * x[j])
		}
		if bias != nil {
			mag[r] += math.Abs(bias[r])
		}
	}
	return ref, mag
}

// rmsnormF64 is RMSNorm in float64.
func rmsnormF64(x, weight []float32, tokens, dim int, eps float32) []float64 {
	out := make([]float64, tokens*dim)
	for t := 0; t < tokens; t++ {
		ss := 0.0
		for i := 0; i < dim; i++ {
			v := float64(x[t*dim+i])
			ss += v * v
		}
		scale := 1 / math.Sqrt(ss/float64(dim)+float64(eps))
		for i := 0; i < dim; i++ {
			out[t*dim+i] = float64(x[t*dim+i]) * scale * float64(weight[i])
		}
	}
	return out
}

// softmaxF64 is the softmax of row[:n] in float64 (zeros after n).
func softmaxF64(row []float32, n int) []float64 {
	out := make([]float64, len(row))
	m := math.Inf(-1)
	for _, v := range row[:n] {
		m = math.Max(m, float64(v))
	}
	sum := 0.0
	for i, v := range row[:n] {
		out[i] = math.Exp(float64(v) - m)
		sum += out[i]
	}
	for i := range out[:n] {
		out[i] /= sum
	}
	return out
}

// ---- comparisons ----

// isNaN32 reports whether f is a NaN.
func isNaN32(f float32) bool { return f != f }

// sameFloat reports a == b, counting any two NaNs as equal (payloads may differ between
// variants: x86 keeps the first NaN operand's payload).
func sameFloat(a, b float32) bool { return a == b || (isNaN32(a) && isNaN32(b)) }

// within reports whether got is within tol*scale of want, with NaN == NaN and equal
// infinities (including NaN handling for want = ±Inf).
func within(got float32, want, tol, scale float64) bool {
	g := float64(got)
	switch {
	case math.IsNaN(want) || math.IsNaN(g):
		return math.IsNaN(want) && math.IsNaN(g)
	case math.IsInf(want, 0) || math.IsInf(g, 0):
		return g == want
	}
	return math.Abs(g-want) <= tol*scale
}

// relErr is |got-want|/|want| (0 when both are 0, +Inf when only want is).
func relErr(got float32, want float64) float64 {
	d := math.Abs(float64(got) - want)
	if d == 0 {
		return 0
	}
	return d / math.Abs(want)
}

// ---- argument errors ----

// wantArgErr fails unless err is an *ArgError from fn about arg whose message contains every
// string in parts (the numbers and formula the caller needs to fix the call).
func wantArgErr(t testing.TB, err error, fn, arg string, parts ...string) {
	t.Helper()
	var ae *ArgError
	if !errors.As(err, &ae) {
		t.Errorf("%s: got error %v, want *ArgError about %s", fn, err, arg)
		return
	}
	if ae.Func != fn || ae.Arg != arg {
		t.Errorf("%s: error %q names %s/%s, want %s/%s", fn, err, ae.Func, ae.Arg, fn, arg)
	}
	msg := err.Error()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("%s: error %q does not mention %q", fn, msg, p)
		}
	}
}

// ---- guard pages ----

// guardTail returns n zeroed elements of T ending exactly before a PROT_NONE page: reading or
// writing one byte past the end faults. The mapping is freed at the end of the test.
func guardTail[T any](tb testing.TB, n int) []T {
	tb.Helper()
	g, err := testutil.NewGuarded(guardBytes[T](n))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return testutil.TailOf[T](g, n)
}

// guardHead returns n zeroed elements of T starting exactly after a PROT_NONE page.
func guardHead[T any](tb testing.TB, n int) []T {
	tb.Helper()
	g, err := testutil.NewGuarded(guardBytes[T](n))
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { g.Close() })
	return testutil.HeadOf[T](g, n)
}

func guardBytes[T any](n int) int {
	var z T
	return n * int(unsafe.Sizeof(z))
}

// guardedCopy returns a copy of s placed by place (guardTail or guardHead).
func guardedCopy[T any](tb testing.TB, s []T, place func(testing.TB, int) []T) []T {
	out := place(tb, len(s))
	copy(out, s)
	return out
}

// ---- allocations ----

// wantNoAllocs fails if fn allocates on the heap.
func wantNoAllocs(t *testing.T, name string, fn func()) {
	t.Helper()
	if n := testing.AllocsPerRun(20, fn); n != 0 {
		t.Errorf("%s: %v allocations per call, want 0", name, n)
	}
}

// streamSum is StreamRead for inputs that cannot fail.
func streamSum(x []float32) float32 {
	v, err := StreamRead(x)
	if err != nil {
		panic(err)
	}
	return v
}
