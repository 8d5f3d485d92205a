package parity

import (
	"fmt"
	"io"
	"math"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// exec is what the checks call: kernelrt.Serial or a *kernelrt.Runtime (possibly wrapped by
// a test that breaks a kernel on purpose).
type exec = kernelrt.Ops

// Case is one call of one op on one shape with fixed, seeded inputs.
type Case struct {
	Op    kernelrt.Op
	Fn    string         // the function (serial name = Runtime method name)
	Shape string         // as printed
	S     kernelrt.Shape // the Shape the dispatch wrapper hands the table
	Calib bool           // the op's representative decode-size call (calibration, benchmarks)
	Heavy bool           // quick mode runs it on SIMD variants only
	Full  bool           // full mode only
	Cost  int            // rough work, to pick the smallest cases
	Tol   float64        // max_rel_ref limit (0: exact)
	// SplitTol, when positive, lets the Runtime's result differ from Serial's by up to this
	// much (max |wrapper - serial|): for calls whose split changes the arithmetic (the chunked
	// decode attention merges partial softmax sums). 0: the split must not change a bit.
	SplitTol float64
	// Metric says what max_rel_ref measures for this case (the legend prints it per op).
	Metric string

	plan  func()                   // register the case with the shared data it uses (before any setup)
	setup func()                   // allocate and fill inputs, compute the reference
	run   func(e exec) error       // prepare outputs / in-place inputs and make the call
	outF  func() []float32         // the float output (or nil)
	outB  func() []byte            // the byte output (quantizers)
	check func() (float64, string) // metric of the current output vs the reference, and a note
	free  func()
}

// Row is one line of the report.
type Row struct {
	Op, Fn, Shape   string
	Threads, Active string
	Kernels         string
	MaxAbs, MaxRel  float64 // NaN: not applicable
	Status          string  // PASS, FAIL, SKIP
	Note            string
}

// kset is one backend/variant; set is nil when the backend does not register that variant.
type kset struct {
	backend, variant string
	set              *kern.Set
	err              error
}

func (k kset) name() string { return k.backend + "/" + k.variant }

// slow says the set is scalar (generic Go, or the C/asm ref variant).
func (k kset) slow() bool { return k.variant == "ref" || k.backend == "generic" }

// lacks says why the set cannot run op ("" if it can): the SKIP reason.
func (k kset) lacks(op kernelrt.Op) string {
	if k.set == nil {
		return fmt.Sprintf("%s lacks the variant: %v", k.name(), k.err)
	}
	if k.set.K[op] == nil {
		return fmt.Sprintf("%s lacks the %s kernel (run make asm)", k.name(), op)
	}
	return ""
}

// lacksAny is lacks for every kernel (the model uses most of them).
func (k kset) lacksAny() string {
	if k.set == nil {
		return fmt.Sprintf("%s lacks the variant: %v", k.name(), k.err)
	}
	if m := k.set.Missing(); len(m) > 0 {
		return fmt.Sprintf("%s lacks kernels %v (run make asm)", k.name(), m)
	}
	return ""
}

// SetNames lists the backend/variant sets the suite runs, as "backend/variant".
func (s *Suite) SetNames() []string {
	var out []string
	for _, k := range s.sets {
		out = append(out, k.name())
	}
	return out
}

// Config selects what a Suite runs.
type Config struct {
	Quick        bool
	Threads      []int    // thread counts for the op checks (Options.Threads)
	ModelThreads []int    // thread counts for the model check
	Backends     []string // nil: every built-in backend
	Filter       func(c *Case) bool
	Model        bool
	// WrapSerial and WrapPooled, when set, wrap the serial and the pooled exec (tests use
	// them to break a kernel on purpose).
	WrapSerial, WrapPooled func(exec) exec
	Progress               io.Writer // nil: no progress
}

// Suite runs the checks and collects rows.
type Suite struct {
	cfg  Config
	sets []kset
	rts  map[string]*rtEntry
	Rows []Row

	serF []float32 // the serial output of the current case and set (reused)
	serB []byte

	// beat is the time (UnixNano) the current call started and what it is, for the hang
	// watchdog.
	beatAt   atomic.Int64
	beatWhat atomic.Pointer[string]
}

// beat records that a call is starting.
func (s *Suite) beat(what string) {
	s.beatWhat.Store(&what)
	s.beatAt.Store(time.Now().UnixNano())
}

// idle records that no call is running.
func (s *Suite) idle() { s.beatAt.Store(0) }

// Stalled reports how long the current call has run and what it is.
func (s *Suite) Stalled() (time.Duration, string) {
	at := s.beatAt.Load()
	if at == 0 {
		return 0, ""
	}
	w := s.beatWhat.Load()
	if w == nil {
		return 0, ""
	}
	return time.Since(time.Unix(0, at)), *w
}

type rtEntry struct {
	rt    *kernelrt.Runtime
	table []kernelrt.OpRow
	min0  [kernelrt.NumOps][2]int // MinElements at creation (decode, prefill)
}

// NewSuite resolves the backend/variant sets to run.
func NewSuite(cfg Config) (*Suite, error) {
	s := &Suite{cfg: cfg, rts: map[string]*rtEntry{}}
	backends := cfg.Backends
	if backends == nil {
		backends = kernelrt.Backends()
	}
	have := map[string]bool{}
	for _, b := range kernelrt.Backends() {
		have[b] = true
	}
	for _, b := range backends {
		if !have[b] {
			return nil, fmt.Errorf("parity: backend %q is not built in (have %v)", b, kernelrt.Backends())
		}
		variants := kernelrt.Variants()
		if b == "generic" {
			variants = []string{"ref"}
		}
		for _, v := range variants {
			set, err := lookup(b, v)
			s.sets = append(s.sets, kset{b, v, set, err}) // a missing variant SKIPs every case
		}
	}
	return s, nil
}

// Close stops every runtime the suite started.
func (s *Suite) Close() {
	for _, e := range s.rts {
		e.rt.Close()
	}
	s.rts = map[string]*rtEntry{}
}

func (s *Suite) progress(format string, a ...any) {
	if s.cfg.Progress != nil {
		fmt.Fprintf(s.cfg.Progress, format, a...)
	}
}

// runtime returns the (cached) Runtime of set k with threads workers.
func (s *Suite) runtime(k kset, threads int) (*rtEntry, error) {
	key := k.name() + "/" + strconv.Itoa(threads)
	if e := s.rts[key]; e != nil {
		return e, nil
	}
	rt, err := kernelrt.New(kernelrt.Options{Threads: threads, Backend: k.backend, Variant: k.variant,
		MaxCols: maxCols, MaxCtx: maxCtx, Trace: 8192})
	if err != nil {
		return nil, err
	}
	if got := rt.Threads(); got != threads {
		rt.Close()
		return nil, fmt.Errorf("parity: kernelrt.New(Threads: %d) made %d threads", threads, got)
	}
	e := &rtEntry{rt: rt, table: rt.Table()}
	for i, row := range e.table {
		e.min0[i] = [2]int{row.MinElements[kernelrt.Decode], row.MinElements[kernelrt.Prefill]}
	}
	for op := 0; op < kernelrt.NumOps; op++ {
		if pooled, serial := rt.KernelsFor(kernelrt.Op(op)); pooled != k.name() || serial != k.name() {
			rt.Close()
			return nil, fmt.Errorf("parity: runtime for %s runs %s (pooled) / %s (serial) kernels for %s", k.name(), pooled, serial, kernelrt.Op(op))
		}
	}
	s.rts[key] = e
	return e, nil
}

// restoreThresholds puts back the MinElements the runtime was created with.
func (e *rtEntry) restoreThresholds() {
	for op := 0; op < kernelrt.NumOps; op++ {
		e.rt.SetMinElements(kernelrt.Op(op), e.min0[op][0], e.min0[op][1])
	}
}

// force makes the table pick exactly `want` active workers for case c, checked with Decide.
// ok is false when the shape cannot be split that many ways (fewer granules or elements);
// err describes a Decide answer that contradicts the table row.
func (e *rtEntry) force(c *Case, want, threads int) (ok bool, err error) {
	row := &e.table[c.Op]
	units := row.Units(c.S)
	g := max(row.Granule(c.S), 1)
	ngr := (units + g - 1) / g
	el := row.Elements(c.S)
	if want > ngr || want > el || want > threads {
		return false, nil
	}
	n := max(el/want, 1)
	for el/n > want {
		n++
	}
	expect := 1
	if threads > 1 && row.ThreadpoolSafe {
		expect = min(threads, ngr, max(el/n, 1))
	}
	if expect != want {
		return false, nil
	}
	if err := e.rt.SetMinElements(c.Op, n, n); err != nil {
		return false, err
	}
	mode := kernelrt.Decode
	if c.S.Tokens > 1 {
		mode = kernelrt.Prefill
	}
	active, ranges := e.rt.Decide(c.Op, c.S, mode)
	if active != want {
		return true, fmt.Errorf("Decide gives %d active for MinElements %d, want %d", active, n, want)
	}
	if len(ranges) != active {
		return true, fmt.Errorf("Decide gives %d ranges for %d active", len(ranges), active)
	}
	lo := 0
	for i, r := range ranges {
		if r[0] != lo || r[1] <= r[0] || (i < len(ranges)-1 && r[1]%g != 0) {
			return true, fmt.Errorf("Decide ranges %v do not partition [0,%d) on granule %d", ranges, units, g)
		}
		lo = r[1]
	}
	if lo != units {
		return true, fmt.Errorf("Decide ranges %v do not cover [0,%d)", ranges, units)
	}
	return true, nil
}

// lastActive reads the active worker count of the call's dispatch of op's row, which must
// have run exactly once (a call may also dispatch other rows: a chunked decode attention is
// followed by its merge).
func lastActive(rt *kernelrt.Runtime, op kernelrt.Op) (int, error) {
	rep := rt.Report()
	for _, r := range rep {
		if r.Op == op.String() {
			if r.Calls != 1 {
				return 0, fmt.Errorf("table row %s dispatched %d times in one call, want 1", op, r.Calls)
			}
			return r.Active, nil
		}
	}
	names := make([]string, len(rep))
	for i, r := range rep {
		names[i] = r.Op
	}
	return 0, fmt.Errorf("call ran on table rows %v, want %s", names, op)
}

// call runs f, turning a panic into an error (a kernel fault with SetPanicOnFault, a pool
// task panic).
func call(f func() error) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return f()
}

func (s *Suite) add(r Row) {
	s.Rows = append(s.Rows, r)
}

// maxAbsF is max |a-b|; NaN matches NaN, NaN against a number is +Inf.
func maxAbsF(a, b []float32) float64 {
	m := 0.0
	for i := range a {
		x, y := a[i], b[i]
		if math.Float32bits(x) == math.Float32bits(y) {
			continue
		}
		if x != x || y != y {
			if x != x && y != y {
				continue
			}
			return math.Inf(1)
		}
		m = math.Max(m, math.Abs(float64(x)-float64(y)))
	}
	return m
}

// diffB is the number of differing bytes.
func diffB(a, b []byte) int {
	n := 0
	for i := range a {
		if a[i] != b[i] {
			n++
		}
	}
	return n
}

// Run runs every case of cases (after the config's filter) and, when configured, the model.
func (s *Suite) Run(cases []*Case) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	var sel []*Case
	for _, c := range cases {
		if c.Full && s.cfg.Quick {
			continue
		}
		if s.cfg.Filter != nil && !s.cfg.Filter(c) {
			continue
		}
		sel = append(sel, c)
	}
	for _, c := range sel {
		if c.plan != nil {
			c.plan()
		}
	}
	for i, c := range sel {
		t0 := time.Now()
		s.progress("[%d/%d] %s %s %s ...", i+1, len(sel), c.Op, c.Fn, c.Shape)
		s.runCase(c)
		s.progress(" %.2fs\n", time.Since(t0).Seconds())
	}
	if s.cfg.Model {
		s.runModels()
	}
}

func (s *Suite) runCase(c *Case) {
	ready := false // setup runs only if some set runs the case
	defer c.free() // safe without setup: it also lets go of shared data
	for _, k := range s.sets {
		base := Row{Op: c.Op.String(), Fn: c.Fn, Shape: c.Shape, Threads: "-", Active: "-", Kernels: k.name(),
			MaxAbs: math.NaN(), MaxRel: math.NaN()}
		if why := k.lacks(c.Op); why != "" {
			base.Status, base.Note = "SKIP", why
			s.add(base)
			continue
		}
		if c.Heavy && s.cfg.Quick && k.slow() {
			base.Status, base.Note = "SKIP", "quick mode: large shape on a scalar variant (runs in full mode)"
			s.add(base)
			continue
		}
		if !ready {
			t0 := time.Now()
			c.setup()
			s.progress(" (inputs+reference %.2fs)", time.Since(t0).Seconds())
			ready = true
		}
		s.runSet(c, k, base)
	}
}

func (s *Suite) runSet(c *Case, k kset, base Row) {
	fail := func(r Row, format string, a ...any) {
		r.Status, r.Note = "FAIL", fmt.Sprintf(format, a...)
		s.add(r)
	}
	defer kern.UseSet(k.set)()
	if got, err := kernelrt.DefaultKernels(); got != k.name() {
		fail(base, "kern.UseSet selected %s (%v)", got, err)
		return
	}
	var serial exec = kernelrt.Serial{}
	if s.cfg.WrapSerial != nil {
		serial = s.cfg.WrapSerial(serial)
	}
	s.beat(fmt.Sprintf("%s %s on %s, serial", c.Fn, c.Shape, k.name()))
	err := call(func() error { return c.run(serial) })
	s.idle()
	if err != nil {
		fail(base, "serial: %v", err)
		return
	}
	serRel, serNote := c.check()
	if c.outF != nil {
		s.serF = append(s.serF[:0], c.outF()...)
	} else {
		s.serB = append(s.serB[:0], c.outB()...)
	}
	for _, th := range s.cfg.Threads {
		e, err := s.runtime(k, th)
		if err != nil {
			r := base
			r.Threads = strconv.Itoa(th)
			fail(r, "kernelrt.New: %v", err)
			continue
		}
		var pooled exec = e.rt
		if s.cfg.WrapPooled != nil {
			pooled = s.cfg.WrapPooled(pooled)
		}
		for a := 1; a <= th; a++ {
			r := base
			r.Threads, r.Active = strconv.Itoa(th), strconv.Itoa(a)
			ok, err := e.force(c, a, th)
			if !ok {
				continue // the shape has fewer granules (or elements) than a
			}
			if err != nil {
				fail(r, "%v", err)
				continue
			}
			e.rt.ResetReport()
			s.beat(fmt.Sprintf("%s %s on %s, wrapper threads=%d active=%d", c.Fn, c.Shape, k.name(), th, a))
			err = call(func() error { return c.run(pooled) })
			s.idle()
			if err != nil {
				fail(r, "wrapper: %v", err)
				continue
			}
			if got, err := lastActive(e.rt, c.Op); err != nil || got != a {
				fail(r, "dispatch ran %d workers, want %d (%v)", got, a, err)
				continue
			}
			var note []string
			if c.outF != nil {
				r.MaxAbs = maxAbsF(c.outF(), s.serF)
			} else if n := diffB(c.outB(), s.serB); n > 0 {
				r.MaxAbs = math.Inf(1)
				note = append(note, fmt.Sprintf("%d bytes differ from serial", n))
			} else {
				r.MaxAbs = 0
			}
			rel, relNote := c.check()
			r.MaxRel = math.Max(rel, serRel)
			for _, n := range []string{serNote, relNote} {
				if n != "" {
					note = append(note, n)
				}
			}
			r.Status = "PASS"
			switch {
			case !(r.MaxAbs <= 1e-3):
				r.Status = "FAIL"
				note = append(note, "wrapper vs serial > 1e-3")
			case c.SplitTol > 0 && r.MaxAbs != 0:
				if !(r.MaxAbs <= c.SplitTol) {
					r.Status = "FAIL"
					note = append(note, fmt.Sprintf("wrapper vs serial > %g (the split's rounding)", c.SplitTol))
				} else {
					note = append(note, "split rounding (merged chunks)")
				}
			case r.MaxAbs != 0:
				r.Status = "FAIL"
				note = append(note, "wrapper != serial (the split must not change the arithmetic)")
			}
			if !(r.MaxRel <= c.Tol) {
				r.Status = "FAIL"
				if rel > serRel {
					note = append(note, fmt.Sprintf("wrapper vs reference above %g", c.Tol))
				} else {
					note = append(note, fmt.Sprintf("serial vs reference above %g", c.Tol))
				}
			}
			r.Note = strings.Join(note, "; ")
			s.add(r)
		}
	}
}

// Counts returns passed, failed and skipped rows.
func (s *Suite) Counts() (pass, fail, skip int) {
	for _, r := range s.Rows {
		switch r.Status {
		case "PASS":
			pass++
		case "FAIL":
			fail++
		default:
			skip++
		}
	}
	return
}

func fmtNum(v float64) string {
	switch {
	case v != v:
		return "-"
	case v == 0:
		return "0"
	case math.IsInf(v, 0):
		return "inf"
	}
	return strconv.FormatFloat(v, 'e', 2, 64)
}

// WriteTable prints the rows with text/tabwriter.
func (s *Suite) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "op\tfn\tshape\tthreads\tactive\tbackend/variant\tmax_abs\tmax_rel_ref\tstatus\tnote")
	for _, r := range s.Rows {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Op, r.Fn, r.Shape, r.Threads, r.Active,
			r.Kernels, fmtNum(r.MaxAbs), fmtNum(r.MaxRel), r.Status, r.Note)
	}
	return tw.Flush()
}
