package kernelrt

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
	"github.com/kernelrt/kernelrt/threadpool"
)

// Options configures a Runtime.
type Options struct {
	// Threads is the number of workers including the caller; 0 = one per usable physical core
	// (the affinity mask and the cgroup CPU quota count).
	Threads int
	// NoPin leaves worker threads locked but not pinned to cores.
	NoPin bool
	// SpinBudget is how long idle workers spin before sleeping; 0 = the pool's default.
	SpinBudget time.Duration
	// MaxCols is the widest GEMV input the fused (FP32-input) GEMV will see; it sizes each
	// worker's private quantization scratch, and the decode attention's partial sums (a query
	// of nHeads*headDim <= MaxCols floats can always be split into one cache chunk per
	// worker; a wider one gets fewer chunks). 0 = 16384.
	MaxCols int
	// MaxCtx is validated (>= 0) and otherwise ignored.
	//
	// Deprecated: the attention kernels' scratch no longer grows with the context
	// (AttnScratchFloats); nothing needs it.
	MaxCtx int
	// Thresholds is a calibration JSON file (see package calibrate). "" = the built-in file
	// for this CPU and thread count if one matches, else the table defaults; "default" =
	// table defaults only.
	Thresholds string
	// Trace is the capacity of the report ring in dispatch records; 0 = reporting off. At most
	// MaxTrace.
	Trace int
	// Backend and Variant force the kernels ("cgo", "asm", "generic"; "ref", "avx2",
	// "avx512") for every op. Empty = the per-op default for this machine: the row's preferred
	// backends and its calibrated variant (OpRow.Variant), else the CPU's best variant.
	Backend, Variant string
}

// Limits on Options: beyond them New returns an *OptionError instead of exhausting memory.
const (
	// MaxTrace bounds Options.Trace (each record holds two stamps per worker).
	MaxTrace = 1 << 22
	// MaxScratchBytes bounds the per-worker scratch MaxCols and MaxCtx imply.
	MaxScratchBytes = 1 << 30
)

// Runtime owns a thread pool, an arena with per-worker scratch and the dispatch table. Its
// methods are the ops (the Ops interface) with the signatures of the package functions,
// split over the pool as the table decides.
//
// A Runtime is safe for concurrent use: calls the table runs on the caller alone proceed in
// parallel, calls split over the pool take turns (the pool has one dispatch slot), and with
// reporting on (Options.Trace) every call takes its turn. Close waits for running calls; a
// call after Close returns an error wrapping ErrClosed.
type Runtime struct {
	life     sync.RWMutex // calls hold it shared, Close exclusively
	closed   bool
	dispatch sync.Mutex // one pooled dispatch (or traced call) at a time

	pool     *threadpool.Pool
	arena    *arena.Arena
	scratch  []kern.P  // per worker, each on its own cache lines
	part     []float32 // the decode attention's partial sums (AttnPartFloats), used under dispatch
	scrBytes int       // bytes of each worker's scratch
	scrOff   []int     // arena offset of each worker's scratch, for reports
	table    [numOps]OpRow
	sets     [numOps]*kern.Set // for calls split over the pool
	serial   [numOps]*kern.Set // for calls the caller runs alone
	threads  int
	thrSrc   string // where the thresholds came from

	forceBackend, forceVariant string // Options.Backend / Variant, which override the table

	rec   *recorder
	epoch time.Time

	job job // the one dispatch adapter, reused (under dispatch) so a call allocates nothing
}

// New creates a Runtime: it starts the pool, maps the scratch arena and loads thresholds.
// A bad option is an *OptionError.
func New(opts Options) (*Runtime, error) {
	if opts.Threads < 0 || opts.Threads > threadpool.MaxThreads {
		return nil, optErr("Threads", opts.Threads, fmt.Sprintf("must be 0 (automatic) or 1..%d", threadpool.MaxThreads))
	}
	if opts.MaxCols == 0 {
		opts.MaxCols = 16384
	}
	if opts.MaxCtx == 0 {
		opts.MaxCtx = 32768
	}
	if opts.MaxCols < 0 || opts.MaxCols%QK != 0 {
		return nil, optErr("MaxCols", opts.MaxCols, fmt.Sprintf("must be a positive multiple of %d", QK))
	}
	if opts.MaxCtx < 0 {
		return nil, optErr("MaxCtx", opts.MaxCtx, "must be >= 0")
	}
	if opts.Trace < 0 || opts.Trace > MaxTrace {
		return nil, optErr("Trace", opts.Trace, fmt.Sprintf("must be 0..%d records", MaxTrace))
	}
	if opts.SpinBudget < 0 {
		return nil, optErr("SpinBudget", opts.SpinBudget, "must be >= 0")
	}
	rt := &Runtime{table: defaultTable(), epoch: time.Now()}
	// Workspace is declared, never discovered: the largest private scratch any row needs at
	// the declared maximum shapes, one slice per worker, planned before mapping.
	per := 64
	maxShape := Shape{Cols: opts.MaxCols, Ctx: opts.MaxCtx, HeadD: AttnMaxHeadDim}
	for i := range rt.table {
		if f := rt.table[i].ScratchBytes; f != nil {
			if b := f(maxShape); b > MaxScratchBytes || b < 0 || opts.MaxCtx > MaxScratchBytes || opts.MaxCols > MaxScratchBytes {
				return nil, optErr("MaxCtx", fmt.Sprintf("MaxCtx=%d MaxCols=%d", opts.MaxCtx, opts.MaxCols),
					fmt.Sprintf("%s would need more than %d bytes of scratch per worker", rt.table[i].Name(), MaxScratchBytes))
			} else {
				per = max(per, b)
			}
		}
	}
	rt.forceBackend, rt.forceVariant = opts.Backend, opts.Variant
	if err := rt.resolveKernels(); err != nil {
		return nil, err
	}
	pool, err := threadpool.New(threadpool.Options{Threads: opts.Threads, NoPin: opts.NoPin, SpinBudget: opts.SpinBudget})
	if err != nil {
		return nil, fmt.Errorf("kernelrt.New: %w", err)
	}
	rt.pool = pool
	rt.threads = pool.Threads()
	// Thresholds are measured for a thread count: pick them once the pool says how many.
	if rt.thrSrc, err = rt.loadThresholds(opts.Thresholds); err != nil {
		pool.Close()
		return nil, err
	}
	var plan arena.Plan
	plan.AddPerWorker("scratch", 1, per, rt.threads, arena.Scratch)
	if rt.threads > 1 {
		// One chunk per worker for a query of MaxCols floats: nHeads*(headDim+16) <= 2*MaxCols.
		plan.Add(arena.Buffer{Name: "attn.part", ElemSize: 4, Count: rt.threads * 2 * opts.MaxCols, Region: arena.Scratch})
	}
	layout, err := plan.Layout()
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("kernelrt.New: scratch plan: %w", err)
	}
	a, err := arena.NewFromLayout(layout, arena.Options{})
	if err != nil {
		pool.Close()
		return nil, fmt.Errorf("kernelrt.New: scratch arena: %w", err)
	}
	rt.arena = a
	scr, err := arena.GetPerWorker[byte](a, layout, "scratch")
	if err != nil {
		rt.Close()
		return nil, fmt.Errorf("kernelrt.New: scratch: %w", err)
	}
	rt.scrBytes = per
	if rt.threads > 1 {
		if rt.part, err = arena.Get[float32](a, layout, "attn.part"); err != nil {
			rt.Close()
			return nil, fmt.Errorf("kernelrt.New: attention partial sums: %w", err)
		}
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(scr[0])))
	off0 := 0
	if e, ok := layout.Lookup("scratch"); ok {
		off0 = e.Offset
	}
	for _, s := range scr {
		p := unsafe.Pointer(unsafe.SliceData(s))
		rt.scratch = append(rt.scratch, p)
		rt.scrOff = append(rt.scrOff, off0+int(uintptr(p)-base))
	}
	if opts.Trace > 0 {
		rt.rec = newRecorder(opts.Trace, rt.threads)
	}
	rt.job.rt = rt
	return rt, nil
}

// resolveKernels picks the kernel sets per op: forced by options, else the default set with
// each row's preferred variant and backends where this binary has them. It runs again when
// thresholds set the rows' variants (ApplyThresholds).
func (rt *Runtime) resolveKernels() error {
	backend, variant := rt.forceBackend, rt.forceVariant
	var s *kern.Set
	var err error
	if backend != "" || variant != "" {
		s, err = kern.Resolve(backend, variant)
	} else {
		s, err = kern.Default()
	}
	if err != nil {
		return &OptionError{Option: "Backend/Variant", Value: backend + "/" + variant, Reason: err.Error()}
	}
	if m := s.Missing(); len(m) > 0 {
		return &OptionError{Option: "Backend", Value: s.Name(), Reason: fmt.Sprintf("lacks kernels %v (run make asm)", m)}
	}
	// A row's calibrated variant applies only when nothing narrowed the choice: no option, no
	// KERNELRT_VARIANT, and the default set is the CPU's best variant (not a test's kern.Use).
	free := backend == "" && variant == "" && os.Getenv(kern.EnvVariant) == "" && s.Variant == cpu.Best()
	pick := func(op Op, pref string) *kern.Set {
		base := s
		if v := rt.table[op].Variant; free && v != "" {
			if pv, err := cpu.ParseVariant(v); err == nil && pv != s.Variant && cpu.Supports(pv) {
				if p, err := kern.Lookup(s.Backend, pv); err == nil && p.K[op] != nil {
					base = p
				}
			}
		}
		if backend == "" && pref != "" && pref != base.Backend {
			if p, err := kern.Lookup(pref, base.Variant); err == nil && p.K[op] != nil {
				return p
			}
		}
		return base
	}
	for i := range rt.sets {
		rt.sets[i] = pick(Op(i), rt.table[i].Backend)
		rt.serial[i] = pick(Op(i), rt.table[i].SerialBackend)
	}
	return nil
}

// Threads is the number of workers, including the caller.
func (rt *Runtime) Threads() int { return rt.threads }

// KernelsFor reports the "backend/variant" the runtime uses for op when the call is split
// over the pool (pooled) and when the caller runs it alone.
func (rt *Runtime) KernelsFor(op Op) (pooled, serial string) {
	return rt.sets[op].Name(), rt.serial[op].Name()
}

// KernelsSummary names the kernels the runtime runs: the set most ops use, then the ops that
// differ, e.g. "asm/avx512; serial calls of gemv_q8_0, quantize_q8_0: cgo/avx512".
func (rt *Runtime) KernelsSummary() string {
	count := map[string]int{}
	for i := range rt.sets {
		count[rt.sets[i].Name()]++
		count[rt.serial[i].Name()]++
	}
	main := ""
	for name, n := range count {
		if n > count[main] || n == count[main] && name < main {
			main = name
		}
	}
	pooled, serial := map[string][]string{}, map[string][]string{}
	for i := range rt.sets {
		if n := rt.sets[i].Name(); n != main {
			pooled[n] = append(pooled[n], Op(i).String())
		}
		if n := rt.serial[i].Name(); n != main {
			serial[n] = append(serial[n], Op(i).String())
		}
	}
	out := main
	for _, g := range []struct {
		what string
		m    map[string][]string
	}{{"split calls", pooled}, {"serial calls", serial}} {
		names := make([]string, 0, len(g.m))
		for n := range g.m {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			out += fmt.Sprintf("; %s of %s: %s", g.what, strings.Join(g.m[n], ", "), n)
		}
	}
	return out
}

// ThresholdsSource says where the MinElements in use came from.
func (rt *Runtime) ThresholdsSource() string { return rt.thrSrc }

// PinCaller pins the calling goroutine's thread to worker 0's core for the duration of a
// decode loop; call unpin when done. See threadpool.Pool.PinCaller.
func (rt *Runtime) PinCaller() (unpin func(), err error) {
	if err := rt.checkOpen(); err != nil {
		return func() {}, err
	}
	return rt.pool.PinCaller()
}

// Describe is a one-paragraph account of the pool (threads, cores, pinning, spin budget).
func (rt *Runtime) Describe() string {
	if err := rt.checkOpen(); err != nil {
		return err.Error()
	}
	return rt.pool.Describe()
}

// Cores returns the logical CPU each worker is pinned to (index 0: the caller).
func (rt *Runtime) Cores() []int {
	if rt.checkOpen() != nil {
		return nil
	}
	return rt.pool.Cores()
}

// PoolStats returns the pool's counters (dispatches, sleeps, wake-ups).
func (rt *Runtime) PoolStats() threadpool.Stats {
	if rt.checkOpen() != nil {
		return threadpool.Stats{}
	}
	return rt.pool.Stats()
}

// checkOpen refuses calls on a nil or closed runtime.
func (rt *Runtime) checkOpen() error {
	if rt == nil {
		return fmt.Errorf("kernelrt: nil Runtime: %w", ErrClosed)
	}
	rt.life.RLock()
	defer rt.life.RUnlock()
	if rt.closed {
		return fmt.Errorf("kernelrt: Runtime: %w", ErrClosed)
	}
	return nil
}

// Close stops the pool and unmaps the arena, after the calls running now return. It is
// idempotent; later calls return an error wrapping ErrClosed.
func (rt *Runtime) Close() error {
	if rt == nil {
		return nil
	}
	rt.life.Lock()
	defer rt.life.Unlock()
	if rt.closed {
		return nil
	}
	rt.closed = true
	err := rt.pool.Close()
	if rt.arena != nil {
		if e := rt.arena.Close(); err == nil {
			err = e
		}
	}
	rt.pool, rt.arena, rt.scratch = nil, nil, nil
	return err
}

// builtinTable is the table the serial functions (Serial, package functions) read their
// split dimension from: they always run the whole range.
var builtinTable = defaultTable()

// run executes op on shape s with the packed arguments a and the caller's private scratch
// (nil for kernels without one): serially in this goroutine when rt is nil, else as rt's
// table row decides. Arguments were checked by the caller (a binder).
func (rt *Runtime) run(op Op, s Shape, a kern.Args, scratch kern.P) error {
	if rt == nil {
		set, err := kern.Default()
		if err != nil {
			return fmt.Errorf("kernelrt: %s: %w", op, err)
		}
		k := set.K[op]
		if k == nil {
			return fmt.Errorf("kernelrt: %s: kernel set %s lacks the kernel (run make asm)", op, set.Name())
		}
		k(a, scratch, 0, builtinTable[op].Split.units(s))
		return nil
	}
	rt.life.RLock()
	defer rt.life.RUnlock()
	if rt.closed {
		return fmt.Errorf("kernelrt: %s: %w", op, ErrClosed)
	}
	row := &rt.table[op]
	if err := rt.checkScratch(op, s); err != nil {
		return err
	}
	p := row.decide(s, modeOf(s), rt.threads)
	if p.active <= 1 && rt.rec == nil {
		// The caller runs it alone: nothing shared is touched, so concurrent calls need no turn.
		rt.serial[op].K[op](a, scratch, 0, p.units)
		return nil
	}
	rt.dispatch.Lock()
	defer rt.dispatch.Unlock()
	rt.dispatchLocked(op, s, a, scratch, p)
	return nil
}

// runThen runs op1, then op2, in one turn of the dispatch slot: no other call dispatches in
// between, so op2 may read what op1 left in the runtime's shared buffers (the chunked decode
// attention's partial sums in rt.part, merged by op2). The dispatch of op2 after op1's
// completion is the barrier. op2 takes no scratch. Arguments were checked by the caller.
func (rt *Runtime) runThen(op1 Op, s1 Shape, a1 kern.Args, scratch kern.P, op2 Op, s2 Shape, a2 kern.Args) error {
	rt.life.RLock()
	defer rt.life.RUnlock()
	if rt.closed {
		return fmt.Errorf("kernelrt: %s: %w", op1, ErrClosed)
	}
	if err := rt.checkScratch(op1, s1); err != nil {
		return err
	}
	rt.dispatch.Lock()
	defer rt.dispatch.Unlock()
	rt.dispatchLocked(op1, s1, a1, scratch, rt.table[op1].decide(s1, modeOf(s1), rt.threads))
	rt.dispatchLocked(op2, s2, a2, nil, rt.table[op2].decide(s2, modeOf(s2), rt.threads))
	return nil
}

// checkScratch refuses a shape whose private scratch exceeds what New planned per worker.
func (rt *Runtime) checkScratch(op Op, s Shape) error {
	if f := rt.table[op].ScratchBytes; f != nil {
		if need := f(s); need > rt.scrBytes {
			return argErr(op.String(), "shape", "needs %d bytes of private scratch per worker, the runtime planned %d (raise Options.MaxCols)", need, rt.scrBytes)
		}
	}
	return nil
}

// workersByWork is how many workers the table would give op's call of shape s if the split
// dimension had units enough: min(threads, elements/MinElements), at least 1 (1 for a nil
// runtime: Serial). The decode attention picks its cache chunks from it.
func (rt *Runtime) workersByWork(op Op, s Shape) int {
	if rt == nil || rt.threads <= 1 || !rt.table[op].ThreadpoolSafe {
		return 1
	}
	row := &rt.table[op]
	a := rt.threads
	if me := row.MinElements[modeOf(s)]; me > 0 {
		a = min(a, row.Elements(s)/me)
	}
	return max(a, 1)
}

// dispatchLocked runs one call as plan p decided, holding the dispatch slot: over the pool
// (active > 1) or on the caller, recording it when reporting is on.
func (rt *Runtime) dispatchLocked(op Op, s Shape, a kern.Args, scratch kern.P, p plan) {
	row := &rt.table[op]
	j := &rt.job
	set := rt.sets[op]
	if p.active <= 1 {
		set = rt.serial[op]
	}
	j.k, j.a, j.scr0, j.priv, j.p = set.K[op], a, scratch, row.ScratchBytes != nil, p
	if rt.rec == nil {
		if p.active <= 1 {
			j.Run(0, 1)
		} else {
			rt.pool.DispatchN(p.active, j)
		}
		return
	}
	r := rt.rec.next()
	r.op, r.mode, r.shape, r.active, r.units, r.granule, r.set = op, modeOf(s), s, p.active, p.units, p.granule, set
	j.rec = r
	r.start = rt.now()
	if p.active <= 1 {
		j.Run(0, 1)
	} else {
		rt.pool.DispatchN(p.active, j)
	}
	r.end = rt.now()
	j.rec = nil
}

// job is the one worker adapter: every op's call is a kernel, its packed arguments and the
// plan the table made. Run(ith, nth) computes the worker's share (share with the row's
// granule) and makes one kernel call on it; a kernel with a private scratch gets the caller's
// on worker 0 and the runtime's arena buffer on the others.
type job struct {
	rt   *Runtime
	k    kern.Kernel
	a    kern.Args
	scr0 kern.P
	priv bool
	p    plan
	rec  *record
}

// Run is worker ith's part of the current call.
func (j *job) Run(ith, nth int) {
	if j.rec != nil {
		j.rec.wstart[ith] = j.rt.now()
	}
	if lo, hi := share(j.p.units, j.p.granule, ith, nth); lo < hi {
		scr := j.scr0
		if j.priv && (ith > 0 || scr == nil) {
			scr = j.rt.scratch[ith]
		}
		j.k(j.a, scr, lo, hi)
	}
	if j.rec != nil {
		j.rec.wend[ith] = j.rt.now()
	}
}

func (rt *Runtime) now() int64 { return int64(time.Since(rt.epoch)) }

// optErr builds an *OptionError for option name with value v.
func optErr(name string, v any, reason string) error {
	return &OptionError{Option: name, Value: fmt.Sprint(v), Reason: reason}
}
