package parity

import (
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// quickThreads is 1..NumCPU, as the quick run uses.
func quickThreads() []int {
	var t []int
	for i := 1; i <= runtime.NumCPU(); i++ {
		t = append(t, i)
	}
	return t
}

// pick selects the case with the given function and shape.
func pick(fn, shape string) func(*Case) bool {
	return func(c *Case) bool { return c.Fn == fn && c.Shape == shape }
}

// ---- deliberately broken execs ----

// ulpGemv moves one GEMV output by one ulp: the reference check cannot see it, the
// wrapper-vs-serial check must.
type ulpGemv struct{ exec }

func (p ulpGemv) GemvQ8_0(y []float32, w, x []kernelrt.BlockQ8_0, rows, cols int) error {
	err := p.exec.GemvQ8_0(y, w, x, rows, cols)
	y[5] = math.Nextafter32(y[5], float32(math.Inf(1)))
	return err
}

// offGemv is off by 1e-3 relative on one output: wrong against the float64 reference.
type offGemv struct{ exec }

func (p offGemv) GemvQ8_0(y []float32, w, x []kernelrt.BlockQ8_0, rows, cols int) error {
	err := p.exec.GemvQ8_0(y, w, x, rows, cols)
	y[rows-1] += 1e-3 * float32(math.Abs(float64(y[rows-1]))+1e-3)
	return err
}

// flipQuant changes one quant of the last block.
type flipQuant struct{ exec }

func (p flipQuant) QuantizeQ8_0(dst []kernelrt.BlockQ8_0, src []float32) error {
	err := p.exec.QuantizeQ8_0(dst, src)
	dst[len(dst)-1].Qs[31] ^= 1
	return err
}

// holeAttention leaves one output unwritten (the poison NaN shows through).
type holeAttention struct{ exec }

func (p holeAttention) AttentionF16(out, q []float32, kc, vc []uint16, scr []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int, softcap float32) error {
	err := p.exec.AttentionF16(out, q, kc, vc, scr, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0, softcap)
	out[len(out)-1] = float32(math.NaN())
	return err
}

// badAdd corrupts the residual stream of the model.
type badAdd struct{ exec }

func (p badAdd) Add(out, a, b []float32) error {
	err := p.exec.Add(out, a, b)
	out[0] += 1
	return err
}

func runSuite(t *testing.T, cfg Config) *Suite {
	t.Helper()
	s, err := NewSuite(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s.Run(Cases(true))
	return s
}

// TestBrokenKernelFails runs the checker on wrappers broken on purpose and wants every
// checked row reported FAIL, for the reason expected.
func TestBrokenKernelFails(t *testing.T) {
	for _, tc := range []struct {
		name         string
		filter       func(*Case) bool
		model        bool
		serial, pool func(exec) exec
		wantNote     string
	}{
		{"one ulp in the wrapper", pick("GemvQ8_0", "128x896 nil-bias"), false,
			nil, func(e exec) exec { return ulpGemv{e} }, "wrapper != serial"},
		{"serial and wrapper both off vs reference", pick("GemvQ8_0", "128x896 nil-bias"), false,
			func(e exec) exec { return offGemv{e} }, func(e exec) exec { return offGemv{e} }, "serial vs reference"},
		{"one quant bit", pick("QuantizeQ8_0", "N=4864"), false,
			nil, func(e exec) exec { return flipQuant{e} }, "bytes differ from serial"},
		{"unwritten attention output", pick("AttentionF16", "T=1 ctx=17 heads=14/2 hd=64"), false,
			nil, func(e exec) exec { return holeAttention{e} }, "wrapper vs serial > 1e-3"},
		{"model residual corrupted", func(*Case) bool { return false }, true,
			nil, func(e exec) exec { return badAdd{e} }, "logits differ"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := runSuite(t, Config{Quick: true, Threads: []int{1, 2}, ModelThreads: []int{2}, Backends: []string{"generic"},
				Filter: tc.filter, Model: tc.model, WrapSerial: tc.serial, WrapPooled: tc.pool})
			checked := 0
			for _, r := range s.Rows {
				if r.Status == "SKIP" {
					continue
				}
				checked++
				if r.Status != "FAIL" || !strings.Contains(r.Note, tc.wantNote) {
					t.Errorf("%s %s %s threads=%s active=%s: %s (%q), want FAIL with %q", r.Op, r.Shape, r.Kernels,
						r.Threads, r.Active, r.Status, r.Note, tc.wantNote)
				}
			}
			if checked == 0 {
				t.Fatal("no case was checked")
			}
			if _, fail, _ := s.Counts(); fail != checked {
				t.Errorf("Counts: %d failed, want %d", fail, checked)
			}
		})
	}
}

// TestSmallestCasesPass runs the cheapest case of every op and function of the quick suite
// on every backend/variant and wants each to PASS (SKIP only for a kernel a backend lacks).
func TestSmallestCasesPass(t *testing.T) {
	smallest := map[string]*Case{}
	for _, c := range Cases(true) {
		if c.Full {
			continue
		}
		k := c.Op.String() + "/" + c.Fn
		if o := smallest[k]; o == nil || c.Cost < o.Cost {
			smallest[k] = c
		}
	}
	if len(smallest) < kernelrt.NumOps {
		t.Fatalf("only %d op/function pairs among the cases, want at least the %d table rows", len(smallest), kernelrt.NumOps)
	}
	ops := map[kernelrt.Op]bool{}
	for _, c := range smallest {
		ops[c.Op] = true
	}
	if len(ops) != kernelrt.NumOps {
		t.Fatalf("cases cover %d table rows, want all %d", len(ops), kernelrt.NumOps)
	}
	s := runSuite(t, Config{Quick: true, Threads: quickThreads(),
		Filter: func(c *Case) bool { // Cases makes new values: match by name
			m := smallest[c.Op.String()+"/"+c.Fn]
			return m != nil && m.Shape == c.Shape
		}})
	pass, fail, skip := s.Counts()
	t.Logf("%d cases on %d backend/variants: %d passed, %d failed, %d skipped", len(smallest), len(s.sets), pass, fail, skip)
	passed := map[string]bool{}
	for _, r := range s.Rows {
		switch {
		case r.Status == "PASS":
			passed[r.Op+"/"+r.Fn+"/"+r.Kernels] = true
		case r.Status == "SKIP" && strings.Contains(r.Note, "lacks"):
			t.Logf("SKIP %s %s %s: %s", r.Op, r.Fn, r.Kernels, r.Note)
			passed[r.Op+"/"+r.Fn+"/"+r.Kernels] = true
		default:
			t.Errorf("%s %s %s %s threads=%s active=%s: %s %s (max_abs %g, max_rel_ref %g)", r.Op, r.Fn, r.Shape,
				r.Kernels, r.Threads, r.Active, r.Status, r.Note, r.MaxAbs, r.MaxRel)
		}
	}
	for k := range smallest {
		for _, set := range s.sets {
			if !passed[k+"/"+set.name()] {
				t.Errorf("%s on %s: no row passed", k, set.name())
			}
		}
	}
}

// TestReferences pins the hand-written fp16 codec and reference quantizers to known values.
func TestReferences(t *testing.T) {
	for _, c := range []struct {
		h uint16
		f float64
	}{{0x3c00, 1}, {0xc000, -2}, {0x0001, 0x1p-24}, {0x0400, 0x1p-14}, {0x7bff, 65504}, {0x3555, 0.333251953125}} {
		if got := f16(c.h); got != c.f {
			t.Errorf("f16(%#04x) = %v, want %v", c.h, got, c.f)
		}
		if got := toF16(float32(c.f)); got != c.h {
			t.Errorf("toF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	for _, c := range []struct {
		f float32
		h uint16
	}{{65520, 0x7c00}, {65519, 0x7bff}, {0x1p-25, 0}, {0x1.8p-25, 1}, {1 + 0x1p-11, 0x3c00}, {1 + 0x3p-11, 0x3c02}} {
		if got := toF16(c.f); got != c.h {
			t.Errorf("toF16(%v) = %#04x, want %#04x", c.f, got, c.h)
		}
	}
	src := make([]float32, 32)
	src[0], src[1], src[2], src[3] = 127, 2.5, -2.5, 0.49
	var q8 [1]kernelrt.BlockQ8_0
	refQuantQ8(q8[:], src)
	if q8[0].D != 0x3c00 || q8[0].Qs[0] != 127 || q8[0].Qs[1] != 3 || q8[0].Qs[2] != -3 || q8[0].Qs[3] != 0 {
		t.Errorf("refQuantQ8: d %#04x qs %v", q8[0].D, q8[0].Qs[:4])
	}
	src[0], src[1], src[2], src[3] = -16, 0.5, -0.5, 16
	var q5b [1]kernelrt.BlockQ5_0
	refQuantQ5(q5b[:], src)
	// d = -16/-16 = 1: q = trunc(x + 16.5) clamped to 31.
	if q5b[0].D != 0x3c00 || q5(&q5b[0], 0) != 0 || q5(&q5b[0], 1) != 17 || q5(&q5b[0], 2) != 16 || q5(&q5b[0], 3) != 31 || q5(&q5b[0], 4) != 16 {
		t.Errorf("refQuantQ5: d %#04x q %d %d %d %d %d", q5b[0].D, q5(&q5b[0], 0), q5(&q5b[0], 1), q5(&q5b[0], 2), q5(&q5b[0], 3), q5(&q5b[0], 4))
	}
}

// TestMissingKernelSkips gives the suite a kernel set without GemvF32 and wants that op
// reported SKIP, naming the field, and never run.
func TestMissingKernelSkips(t *testing.T) {
	s, err := NewSuite(Config{Quick: true, Threads: []int{1}, Backends: []string{"generic"},
		Filter: func(c *Case) bool { return c.Fn == "GemvF32" && c.Shape == "200x77" }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	lacking := *s.sets[0].set
	lacking.K[kern.GemvF32] = nil
	s.sets[0].set = &lacking
	s.Run(Cases(true))
	if len(s.Rows) != 1 || s.Rows[0].Status != "SKIP" || !strings.Contains(s.Rows[0].Note, "lacks the gemv_f32 kernel") {
		t.Fatalf("rows %+v, want one SKIP naming the gemv_f32 kernel", s.Rows)
	}
}

// slowAdd stands in for a hung kernel.
type slowAdd struct{ exec }

func (p slowAdd) Add(out, a, b []float32) error {
	time.Sleep(300 * time.Millisecond)
	return p.exec.Add(out, a, b)
}

// TestStallVisible checks the hang watchdog's input: a call that does not return shows in
// Stalled with its name, and nothing shows once the suite is done.
func TestStallVisible(t *testing.T) {
	s, err := NewSuite(Config{Quick: true, Threads: []int{1}, Backends: []string{"generic"},
		Filter: pick("Add", "N=896"), WrapPooled: func(e exec) exec { return slowAdd{e} }})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	seen := make(chan string, 1)
	go func() {
		for i := 0; i < 200; i++ {
			if d, what := s.Stalled(); d > 100*time.Millisecond {
				seen <- what
				return
			}
			time.Sleep(5 * time.Millisecond)
		}
		seen <- ""
	}()
	s.Run(Cases(true))
	if what := <-seen; !strings.Contains(what, "Add N=896 on generic/ref, wrapper") {
		t.Errorf("Stalled named %q during a slow wrapper call", what)
	}
	if d, what := s.Stalled(); d != 0 {
		t.Errorf("Stalled after the run: %s in %q", d, what)
	}
}

// TestOneCalibCasePerOp: calibration and the op benchmarks time each op's Calib case, so
// every table row needs exactly one (per vocabulary size for the embedding).
func TestOneCalibCasePerOp(t *testing.T) {
	for _, quick := range []bool{true, false} {
		n := map[kernelrt.Op]int{}
		for _, c := range Cases(quick) {
			if c.Calib {
				n[c.Op]++
			}
		}
		for op := kernelrt.Op(0); int(op) < kernelrt.NumOps; op++ {
			if n[op] != 1 {
				t.Errorf("quick=%v: %s has %d Calib cases, want 1", quick, op, n[op])
			}
		}
	}
}

// TestReferencesNewTypes pins parity's Q4_0, Q4_1, Q5_1 and Q8_K reference quantizers and the
// decoders to hand-computed values.
func TestReferencesNewTypes(t *testing.T) {
	src := make([]float32, 256)
	src[0], src[1], src[2], src[3], src[4] = -8, 0.5, -0.5, 7.6, 8
	var q40 [1]kernelrt.BlockQ4_0
	refQuantQ4_0(q40[:], src[:32])
	// d = -8/-8 = 1: q = min(15, trunc(x + 8.5)); value = q - 8.
	got := []int{quantQ4_0(bytesOf(q40[:]), 0), quantQ4_0(bytesOf(q40[:]), 1), quantQ4_0(bytesOf(q40[:]), 2), quantQ4_0(bytesOf(q40[:]), 3), quantQ4_0(bytesOf(q40[:]), 4)}
	if q40[0].D != 0x3c00 || fmt.Sprint(got) != "[-8 1 0 7 7]" {
		t.Errorf("refQuantQ4_0: d %#04x q-8 %v", q40[0].D, got)
	}
	src2 := make([]float32, 32)
	for j := range src2 {
		src2[j] = float32(j) - 1 // min -1, max 30: Q5_1 d = 1, q = x + 1
	}
	var q51 [1]kernelrt.BlockQ5_1
	refQuantQ5_1(q51[:], src2)
	s, o := make([]float64, 32), make([]float64, 32)
	typeQ5_1.decode(bytesOf(q51[:]), s, o)
	for j := range s {
		if s[j]+o[j] != float64(src2[j]) {
			t.Errorf("refQuantQ5_1 + decode: value %d = %v, want %v", j, s[j]+o[j], src2[j])
		}
	}
	var q41 [1]kernelrt.BlockQ4_1
	refQuantQ4_1(q41[:], src2) // d = 31/15, m = -1
	if f16(q41[0].M) != -1 || quantQ4_1(bytesOf(q41[:]), 31) != 15 || quantQ4_1(bytesOf(q41[:]), 0) != 0 {
		t.Errorf("refQuantQ4_1: m %v q[0] %d q[31] %d", f16(q41[0].M), quantQ4_1(bytesOf(q41[:]), 0), quantQ4_1(bytesOf(q41[:]), 31))
	}
	src[5] = -127 // the largest magnitude, negative: iscale = 1, d = 1
	var q8k [1]kernelrt.BlockQ8K
	refQuantQ8K(q8k[:], src)
	// 0.5 and -0.5 round to even (0), 7.6 to 8.
	if q8k[0].D != 1 || q8k[0].Qs[0] != -8 || q8k[0].Qs[1] != 0 || q8k[0].Qs[2] != 0 || q8k[0].Qs[3] != 8 || q8k[0].Bsums[0] != -8+8+8-127 {
		t.Errorf("refQuantQ8K: d %v qs %v bsums[0] %d", q8k[0].D, q8k[0].Qs[:6], q8k[0].Bsums[0])
	}
}
