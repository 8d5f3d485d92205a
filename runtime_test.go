package kernelrt

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

func newTestRuntime(t *testing.T, opts Options) *Runtime {
	t.Helper()
	rt, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	return rt
}

// share must cover [0, n) exactly, in order, with every inner boundary on a granule.
func TestShareBoundaries(t *testing.T) {
	for n := 0; n < 300; n += 7 {
		for _, g := range []int{1, 2, 16, 32} {
			for nth := 1; nth <= 9; nth++ {
				next := 0
				for ith := 0; ith < nth; ith++ {
					lo, hi := share(n, g, ith, nth)
					if lo != next || hi < lo || hi > n {
						t.Fatalf("share(%d, %d, %d, %d) = [%d,%d), want start %d", n, g, ith, nth, lo, hi, next)
					}
					if hi != n && hi%g != 0 {
						t.Fatalf("share(%d, %d, %d, %d) ends at %d, not on a granule", n, g, ith, nth, hi)
					}
					next = hi
				}
				if next != n {
					t.Fatalf("share(%d, %d, *, %d) covers [0,%d), want [0,%d)", n, g, nth, next, n)
				}
			}
		}
	}
}

// A worker boundary never splits a 64-byte line of output: with rows of cols floats, every
// boundary row*cols*4 is a multiple of 64 (for tokens/rows splits) or row*4 (GEMV rows).
func TestGranuleKeepsLinesWhole(t *testing.T) {
	tab := defaultTable()
	for _, cols := range []int{1, 3, 8, 12, 896, 4864, 100} {
		row := &tab[OpRMSNorm]
		s := Shape{Tokens: 97, Cols: cols}
		p := row.decide(s, Prefill, 4)
		for w := 0; w < p.active; w++ {
			_, hi := share(p.units, p.granule, w, p.active)
			if hi != p.units && (hi*cols*4)%64 != 0 {
				t.Fatalf("cols %d: worker %d ends at token %d, byte %d not on a line", cols, w, hi, hi*cols*4)
			}
		}
	}
	p := tab[OpGemvQ8_0].decide(Shape{Rows: 896, Cols: 896, Tokens: 1}, Decode, 2)
	if lo, _ := share(p.units, p.granule, 1, p.active); (lo*4)%64 != 0 {
		t.Fatalf("GEMV worker 1 starts at row %d: y byte %d not on a line", lo, lo*4)
	}
}

func TestDecideActive(t *testing.T) {
	tab := defaultTable()
	row := tab[OpGemvQ8_0]
	row.MinElements = [numModes]int{1000, 1000}
	cases := []struct {
		rows, threads, want int
	}{
		{1, 8, 1},     // one granule: one worker
		{16, 8, 1},    // still one granule
		{17, 8, 2},    // two granules
		{896, 2, 2},   // plenty of work
		{896, 64, 56}, // 896/16 granules
		{4864, 4, 4},  // capped by threads
	}
	for _, c := range cases {
		// cols 1024: every row is enough work, so only granules and threads cap active.
		if got := row.decide(Shape{Rows: c.rows, Cols: 1024, Tokens: 1}, Decode, c.threads).active; got != c.want {
			t.Errorf("rows %d threads %d: active %d, want %d", c.rows, c.threads, got, c.want)
		}
	}
	// elements / MinElements caps active: not all-or-nothing.
	row.MinElements = [numModes]int{896 * 896 / 3, 1}
	if got := row.decide(Shape{Rows: 896, Cols: 896, Tokens: 1}, Decode, 8).active; got != 3 {
		t.Errorf("active = %d, want 3 (elements/MinElements)", got)
	}
	if got := row.decide(Shape{Rows: 896, Cols: 896, Tokens: 2}, Prefill, 8).active; got != 8 {
		t.Errorf("prefill active = %d, want 8 (prefill threshold is 1)", got)
	}
	row.ThreadpoolSafe = false
	if got := row.decide(Shape{Rows: 896, Cols: 896, Tokens: 1}, Decode, 8).active; got != 1 {
		t.Errorf("a row that is not ThreadpoolSafe ran on %d workers", got)
	}
}

// Every row must describe itself completely: the table is the single source of truth.
func TestTableComplete(t *testing.T) {
	tab := defaultTable()
	for i, row := range tab {
		if row.Op != Op(i) || row.Name() == "" || row.Granule == nil || row.Elements == nil {
			t.Errorf("row %d (%q) is incomplete", i, row.Name())
		}
		if row.ThreadpoolSafe && (row.MinElements[Decode] <= 0 || row.MinElements[Prefill] <= 0) {
			t.Errorf("row %s has non-positive MinElements %v", row.Name(), row.MinElements)
		}
		// The kernel's C signature (a `scratch` parameter) and the row must agree.
		if kern.HasScratch[i] != (row.ScratchBytes != nil) {
			t.Errorf("row %s: ScratchBytes set = %v, but the kernel takes a scratch = %v", row.Name(), row.ScratchBytes != nil, kern.HasScratch[i])
		}
		if op, err := ParseOp(row.Name()); err != nil || op != row.Op {
			t.Errorf("ParseOp(%q) = %v, %v", row.Name(), op, err)
		}
	}
}

func quantRand(t *testing.T, rows, cols int, seed uint64) ([]BlockQ8_0, []float32) {
	r := rand.New(rand.NewPCG(seed, 1))
	f := make([]float32, rows*cols)
	for i := range f {
		f[i] = float32(r.NormFloat64())
	}
	b := make([]BlockQ8_0, rows*cols/QK)
	if err := QuantizeQ8_0(b, f); err != nil {
		t.Fatal(err)
	}
	return b, f
}

// The pooled GEMV must equal the serial one exactly: a row split does not change arithmetic.
func TestRuntimeGemvMatchesSerial(t *testing.T) {
	rt := newTestRuntime(t, Options{Threads: 2, Trace: 64})
	if err := rt.SetMinElements(OpGemvQ8_0, 1, 1); err != nil {
		t.Fatal(err)
	}
	const rows, cols = 896, 896
	w, _ := quantRand(t, rows, cols, 1)
	x, _ := quantRand(t, 1, cols, 2)
	bias := make([]float32, rows)
	for i := range bias {
		bias[i] = float32(i) / 100
	}
	ys, yp := make([]float32, rows), make([]float32, rows)
	if err := GemvQ8_0Bias(ys, w, x, bias, rows, cols); err != nil {
		t.Fatal(err)
	}
	if err := rt.GemvQ8_0Bias(yp, w, x, bias, rows, cols); err != nil {
		t.Fatal(err)
	}
	for i := range ys {
		if ys[i] != yp[i] {
			t.Fatalf("y[%d]: pooled %v != serial %v", i, yp[i], ys[i])
		}
	}
	rep := rt.Report()
	if len(rep) != 1 || rep[0].Op != "gemv_q8_0" || rep[0].Active != rt.Threads() || rep[0].Serial != 0 {
		t.Fatalf("report = %+v, want one pooled gemv_q8_0 call on %d workers", rep, rt.Threads())
	}
}

// Fused GEMV workers each quantize into private scratch; the result equals the serial one.
func TestRuntimeFusedGemvPrivateScratch(t *testing.T) {
	rt := newTestRuntime(t, Options{Threads: 3, MaxCols: 4864, MaxCtx: 64})
	if err := rt.SetMinElements(OpGemvQ8_0F32, 1, 1); err != nil {
		t.Fatal(err)
	}
	const rows, cols = 200, 4864
	w, _ := quantRand(t, rows, cols, 3)
	_, xf := quantRand(t, 1, cols, 4)
	scr := make([]BlockQ8_0, cols/QK)
	ys, yp := make([]float32, rows), make([]float32, rows)
	if err := GemvQ8_0F32(ys, w, xf, nil, scr, rows, cols); err != nil {
		t.Fatal(err)
	}
	if err := rt.GemvQ8_0F32(yp, w, xf, nil, scr, rows, cols); err != nil {
		t.Fatal(err)
	}
	for i := range ys {
		if ys[i] != yp[i] {
			t.Fatalf("y[%d]: pooled %v != serial %v", i, yp[i], ys[i])
		}
	}
	// A shape wider than the planned scratch is an error, not an overrun. (The per-worker
	// scratch is the largest any row needs: attention's, 288 KiB at head size 256, holds a
	// fused GEMV of 270,000 columns; MaxCols 4864 plans less.)
	const wide = 1 << 19
	big := make([]float32, wide)
	wb := make([]BlockQ8_0, wide/QK)
	if err := rt.GemvQ8_0F32(make([]float32, 1), wb, big, nil, make([]BlockQ8_0, wide/QK), 1, wide); err == nil ||
		!strings.Contains(err.Error(), "MaxCols") {
		t.Fatalf("oversized fused GEMV: err = %v, want a MaxCols error", err)
	}
}

func TestRuntimeNoAllocs(t *testing.T) {
	for _, trace := range []int{0, 16} {
		rt := newTestRuntime(t, Options{Threads: 2, Trace: trace})
		rt.SetMinElements(OpGemvQ8_0, 1, 1)
		w, _ := quantRand(t, 64, 256, 5)
		x, _ := quantRand(t, 1, 256, 6)
		y := make([]float32, 64)
		src := make([]float32, 256)
		norm := make([]float32, 256)
		for i := range norm {
			norm[i] = 1
		}
		out := make([]float32, 256)
		n := testing.AllocsPerRun(200, func() {
			if err := rt.GemvQ8_0(y, w, x, 64, 256); err != nil {
				t.Fatal(err)
			}
			if err := rt.RMSNorm(out, src, norm, 1, 256, 1e-6); err != nil {
				t.Fatal(err)
			}
		})
		if n != 0 {
			t.Errorf("trace=%d: %v allocations per dispatch pair, want 0", trace, n)
		}
	}
}

func TestRuntimeClosed(t *testing.T) {
	rt, err := New(Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatal(err)
	}
	if err := rt.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	err = rt.GemvQ8_0(make([]float32, 1), make([]BlockQ8_0, 1), make([]BlockQ8_0, 1), 1, 32)
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("GemvQ8_0 after Close: %v, want an error wrapping ErrClosed", err)
	}
	var nilRT *Runtime
	if err := nilRT.Add(make([]float32, 1), make([]float32, 1), make([]float32, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Add on a nil Runtime: %v, want an error wrapping ErrClosed", err)
	}
}

func TestRuntimeChecksArgs(t *testing.T) {
	rt := newTestRuntime(t, Options{Threads: 2})
	err := rt.GemvQ8_0(make([]float32, 3), make([]BlockQ8_0, 28), make([]BlockQ8_0, 28), 1, 896)
	var ae *ArgError
	if err == nil || !asArgErr(err, &ae) || ae.Arg != "y" {
		t.Fatalf("wrong y length: err = %v, want an ArgError naming y", err)
	}
	if _, err := New(Options{Threads: -1}); err == nil {
		t.Fatal("New accepted Threads = -1")
	}
	if _, err := New(Options{MaxCols: 33}); err == nil {
		t.Fatal("New accepted MaxCols = 33")
	}
	if _, err := New(Options{Backend: "nope"}); err == nil {
		t.Fatal("New accepted an unknown backend")
	}
}

func asArgErr(err error, target **ArgError) bool {
	ae, ok := err.(*ArgError)
	if ok {
		*target = ae
	}
	return ok
}

// The report and the Chrome trace of a GEMV + RMSNorm sequence: one track per worker.
func TestReportAndTrace(t *testing.T) {
	rt := newTestRuntime(t, Options{Threads: 2, Trace: 128})
	rt.SetMinElements(OpGemvQ8_0, 1, 1)
	rt.SetMinElements(OpRMSNorm, 1, 1)
	w, _ := quantRand(t, 256, 256, 7)
	x, xf := quantRand(t, 4, 256, 8)
	y := make([]float32, 256)
	norm := make([]float32, 256)
	for i := range norm {
		norm[i] = 1
	}
	out := make([]float32, 4*256)
	for i := 0; i < 3; i++ {
		if err := rt.GemvQ8_0(y, w, x[:256/QK], 256, 256); err != nil {
			t.Fatal(err)
		}
		if err := rt.RMSNorm(out, xf, norm, 4, 256, 1e-6); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if err := rt.WriteReport(&buf); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"gemv_q8_0", "rmsnorm", "0:[0,128)", "1:[128,256)", "0:[0,2)"} {
		if !strings.Contains(buf.String(), want) {
			t.Errorf("report lacks %q:\n%s", want, buf.String())
		}
	}
	buf.Reset()
	if err := rt.WriteTrace(&buf); err != nil {
		t.Fatal(err)
	}
	var tr struct {
		TraceEvents []struct {
			Name string  `json:"name"`
			Ph   string  `json:"ph"`
			Tid  int     `json:"tid"`
			Dur  float64 `json:"dur"`
		} `json:"traceEvents"`
	}
	if err := json.Unmarshal(buf.Bytes(), &tr); err != nil {
		t.Fatalf("trace is not JSON: %v", err)
	}
	tracks := map[int]int{}
	for _, e := range tr.TraceEvents {
		if e.Ph == "X" {
			tracks[e.Tid]++
		}
	}
	if tracks[0] != 6 || tracks[1] != 6 {
		t.Fatalf("trace events per worker = %v, want 6 on each of 2 tracks", tracks)
	}
	if os.Getenv("KERNELRT_TRACE_OUT") != "" {
		os.WriteFile(filepath.Clean(os.Getenv("KERNELRT_TRACE_OUT")), buf.Bytes(), 0o644)
	}
}

func TestThresholdsRoundTrip(t *testing.T) {
	th := &Thresholds{CPU: "test", Threads: 2, Ops: map[string]OpCalibration{}}
	for op := Op(0); op < numOps; op++ {
		th.Ops[op.String()] = OpCalibration{NsPerElement: 0.5, MinElements: map[string]int{"decode": 1000 + int(op), "prefill": 2000 + int(op)}}
	}
	path := filepath.Join(t.TempDir(), "th.json")
	f, _ := os.Create(path)
	if err := th.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rt2 := newTestRuntime(t, Options{Threads: 2, Thresholds: path})
	for name, oc := range th.Ops {
		op, _ := ParseOp(name)
		if got := rt2.table[op].MinElements[Decode]; got != oc.MinElements["decode"] {
			t.Errorf("%s: loaded MinElements %d, want %d", name, got, oc.MinElements["decode"])
		}
	}
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"ops":{"nope":{"min_elements":{"decode":1}}}}`), 0o644)
	if _, err := New(Options{Thresholds: bad}); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown op in thresholds: err = %v", err)
	}
}

// The built-in calibration is measured for a thread count and only applies to that count.
func TestBuiltinCalibrationMatchesThreads(t *testing.T) {
	rt2 := newTestRuntime(t, Options{Threads: 2})
	rt1 := newTestRuntime(t, Options{Threads: 1})
	name := CalibrationFile(cpu.Model(), 2)
	if _, err := builtinCalibration.ReadFile("calibration/" + name); err == nil {
		if !strings.Contains(rt2.ThresholdsSource(), name) {
			t.Errorf("2 threads: thresholds from %q, want the built-in %s", rt2.ThresholdsSource(), name)
		}
	}
	if strings.Contains(rt1.ThresholdsSource(), "-2t.json") && !strings.Contains(rt1.ThresholdsSource(), "no built-in") {
		t.Errorf("1 thread loaded 2-thread thresholds: %s", rt1.ThresholdsSource())
	}
}

// A calibration file can prefer another variant for one op (an AVX-512 kernel that loses to
// AVX2 on this CPU): the Runtime runs that op, and only that op, with it, unless the options
// force the kernels.
func TestCalibratedVariantPerOp(t *testing.T) {
	best := cpu.Best()
	if best == cpu.Ref || os.Getenv(kern.EnvVariant) != "" || os.Getenv(kern.EnvBackend) != "" {
		t.Skip("needs a SIMD CPU and no KERNELRT_VARIANT / KERNELRT_BACKEND")
	}
	other := cpu.Ref
	if best == cpu.AVX512 && cpu.Supports(cpu.AVX2) {
		other = cpu.AVX2
	}
	def, err := kern.Default()
	if err != nil {
		t.Fatal(err)
	}
	if def.Variant != best {
		t.Skipf("the default kernels are %s, not the CPU's best", def.Name())
	}
	path := filepath.Join(t.TempDir(), "th.json")
	th := &Thresholds{CPU: "test", Threads: 1, Ops: map[string]OpCalibration{
		"gemv_q4_K": {NsPerElement: 0.01, MinElements: map[string]int{"decode": 1 << 20, "prefill": 1 << 20}, Variant: other.String()},
		"gemv_q8_0": {NsPerElement: 0.01, MinElements: map[string]int{"decode": 1 << 20, "prefill": 1 << 20}, Variant: best.String()},
	}}
	f, _ := os.Create(path)
	if err := th.WriteJSON(f); err != nil {
		t.Fatal(err)
	}
	f.Close()

	rt := newTestRuntime(t, Options{Threads: 2, Thresholds: path})
	for _, c := range []struct {
		op   Op
		want cpu.Variant
	}{{OpGemvQ4K, other}, {OpGemvQ8_0, best}, {OpGemmQ4K, best}, {OpRMSNorm, best}} {
		pooled, serial := rt.KernelsFor(c.op)
		if !strings.HasSuffix(pooled, "/"+c.want.String()) || !strings.HasSuffix(serial, "/"+c.want.String()) {
			t.Errorf("%s: kernels %s (pooled) / %s (serial), want variant %s", c.op, pooled, serial, c.want)
		}
	}
	if !strings.Contains(rt.KernelsSummary(), "gemv_q4_K") {
		t.Errorf("KernelsSummary %q does not name gemv_q4_K", rt.KernelsSummary())
	}
	// The call runs that variant's kernel: the same bits as a runtime forced to it.
	const rows, cols = 64, 512
	rng := newRand(5)
	w, x := make([]BlockQ4K, rows*cols/QKK), make([]BlockQ8K, cols/QKK)
	mustOK(t, QuantizeQ4K(w, randF32(rng, rows*cols, 1)))
	mustOK(t, QuantizeQ8K(x, randF32(rng, cols, 1)))
	got, want := make([]float32, rows), make([]float32, rows)
	mustOK(t, rt.GemvQ4K(got, w, x, rows, cols))
	forced := newTestRuntime(t, Options{Threads: 1, Variant: other.String(), Thresholds: "default"})
	mustOK(t, forced.GemvQ4K(want, w, x, rows, cols))
	mustSame(t, "GemvQ4K with the calibrated variant", got, want)

	// Options force one variant for every op.
	rtF := newTestRuntime(t, Options{Threads: 2, Variant: best.String(), Thresholds: path})
	if pooled, serial := rtF.KernelsFor(OpGemvQ4K); !strings.HasSuffix(pooled, "/"+best.String()) || !strings.HasSuffix(serial, "/"+best.String()) {
		t.Errorf("Options.Variant %s: gemv_q4_K runs %s / %s", best, pooled, serial)
	}
	// A variant name that does not exist is an error naming the op.
	bad := filepath.Join(t.TempDir(), "bad.json")
	os.WriteFile(bad, []byte(`{"ops":{"gemv_q4_K":{"min_elements":{"decode":1},"variant":"sse9"}}}`), 0o644)
	if _, err := New(Options{Thresholds: bad}); err == nil || !strings.Contains(err.Error(), "gemv_q4_K") {
		t.Fatalf("unknown variant in thresholds: err = %v", err)
	}
}
