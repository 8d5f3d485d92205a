package kernelrt

import (
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
	"github.com/kernelrt/kernelrt/threadpool"
)

// Options configures a Runtime.
type Options struct {
	// Threads is the number of workers including the caller; 0 = one per usable physical core.
	Threads int
	// NoPin leaves worker threads locked but not pinned to cores.
	NoPin bool
	// SpinBudget is how long idle workers spin before sleeping; 0 = the pool's default.
	SpinBudget time.Duration
	// MaxCols is the widest GEMV input the fused (FP32-input) GEMV will see; it sizes each
	// worker's private quantization scratch. 0 = 16384.
	MaxCols int
	// MaxCtx is the longest attention context; it sizes each worker's score scratch. 0 = 32768.
	MaxCtx int
	// Thresholds is a calibration JSON file written by Calibrate. "" = the built-in file for
	// this CPU if one matches, else the table defaults; "default" = table defaults only.
	Thresholds string
	// Trace is the capacity of the report ring in dispatch records; 0 = reporting off.
	Trace int
	// Backend and Variant force the kernels ("cgo", "asm", "generic"; "ref", "avx2",
	// "avx512"). Empty = the per-op default for this machine.
	Backend, Variant string
}

// Runtime owns a thread pool, an arena with per-worker scratch and the dispatch table. Its
// methods are the dispatch wrappers: the same signatures as the serial kernels, split over
// the pool as the table decides. A Runtime is used by one goroutine at a time.
type Runtime struct {
	pool    *threadpool.Pool
	arena   *arena.Arena
	scratch [][]byte // per worker, each on its own cache lines
	scrOff  []int    // arena offset of each worker's scratch, for reports
	table   [numOps]OpRow
	sets    [numOps]*kern.Set // for calls split over the pool
	serial  [numOps]*kern.Set // for calls the caller runs alone
	threads int
	thrSrc  string // where the thresholds came from

	rec   *recorder
	epoch time.Time

	jobs jobs
}

// New creates a Runtime: it starts the pool, maps the scratch arena and loads thresholds.
func New(opts Options) (*Runtime, error) {
	if opts.Threads < 0 {
		return nil, fmt.Errorf("kernelrt.New: Options.Threads must be >= 0, got %d", opts.Threads)
	}
	if opts.MaxCols == 0 {
		opts.MaxCols = 16384
	}
	if opts.MaxCtx == 0 {
		opts.MaxCtx = 32768
	}
	if opts.MaxCols < 0 || opts.MaxCols%QK != 0 {
		return nil, fmt.Errorf("kernelrt.New: Options.MaxCols must be a positive multiple of %d, got %d", QK, opts.MaxCols)
	}
	if opts.MaxCtx < 0 {
		return nil, fmt.Errorf("kernelrt.New: Options.MaxCtx must be >= 0, got %d", opts.MaxCtx)
	}
	if opts.Trace < 0 {
		return nil, fmt.Errorf("kernelrt.New: Options.Trace must be >= 0, got %d", opts.Trace)
	}
	rt := &Runtime{table: defaultTable(), epoch: time.Now()}
	if err := rt.resolveKernels(opts.Backend, opts.Variant); err != nil {
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

	// Workspace is declared, never discovered: the largest private scratch any row needs at
	// the declared maximum shapes, one slice per worker, planned before mapping.
	per := 64
	maxShape := Shape{Cols: opts.MaxCols, Ctx: opts.MaxCtx}
	for i := range rt.table {
		if rt.table[i].NeedsPrivateScratch {
			per = max(per, rt.table[i].ScratchBytes(maxShape))
		}
	}
	var plan arena.Plan
	plan.AddPerWorker("scratch", 1, per, rt.threads, arena.Scratch)
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
	if rt.scratch, err = arena.GetPerWorker[byte](a, layout, "scratch"); err != nil {
		rt.Close()
		return nil, fmt.Errorf("kernelrt.New: scratch: %w", err)
	}
	base := uintptr(unsafe.Pointer(unsafe.SliceData(rt.scratch[0])))
	for _, s := range rt.scratch {
		rt.scrOff = append(rt.scrOff, scratchOffset(layout)+int(uintptr(unsafe.Pointer(unsafe.SliceData(s)))-base))
	}
	if opts.Trace > 0 {
		rt.rec = newRecorder(opts.Trace, rt.threads)
	}
	return rt, nil
}

// scratchOffset is the arena offset of the first worker's scratch.
func scratchOffset(l *arena.Layout) int {
	if e, ok := l.Lookup("scratch"); ok {
		return e.Offset
	}
	return 0
}

// resolveKernels picks the kernel set per op: forced by options, else the current default.
func (rt *Runtime) resolveKernels(backend, variant string) error {
	s := ks()
	if backend != "" || variant != "" {
		b, v := s.Backend, s.Variant
		if backend != "" {
			b = backend
		}
		if variant != "" {
			pv, err := cpu.ParseVariant(variant)
			if err != nil {
				return fmt.Errorf("kernelrt.New: %w", err)
			}
			v = pv
		}
		if !cpu.Supports(v) {
			return fmt.Errorf("kernelrt.New: this CPU cannot run the %s variant", v)
		}
		if b == "generic" {
			v = cpu.Ref
		}
		var err error
		if s, err = kern.Lookup(b, v); err != nil {
			return fmt.Errorf("kernelrt.New: %w", err)
		}
	}
	pick := func(pref string) *kern.Set {
		if backend == "" && pref != "" && pref != s.Backend {
			if p, err := kern.Lookup(pref, s.Variant); err == nil {
				return p
			}
		}
		return s
	}
	// With nothing forced, each op takes the backends its row prefers, in the same variant,
	// when this binary has them (no cgo: the asm or generic set stays).
	for i := range rt.sets {
		rt.sets[i] = pick(rt.table[i].Backend)
		rt.serial[i] = pick(rt.table[i].SerialBackend)
	}
	return nil
}

// Threads is the number of workers, including the caller.
func (rt *Runtime) Threads() int { return rt.threads }

// Pool returns the runtime's thread pool (for pinning the caller and reading its stats).
func (rt *Runtime) Pool() *threadpool.Pool { return rt.pool }

// KernelsFor reports the "backend/variant" the runtime uses for op when the call is split
// over the pool (pooled) and when the caller runs it alone.
func (rt *Runtime) KernelsFor(op Op) (pooled, serial string) {
	return rt.sets[op].Name(), rt.serial[op].Name()
}

// ThresholdsSource says where the MinElements in use came from.
func (rt *Runtime) ThresholdsSource() string { return rt.thrSrc }

// errClosed is returned by every wrapper after Close.
var errClosed = errors.New("kernelrt: Runtime is closed")

// Close stops the pool and unmaps the arena. It is idempotent.
func (rt *Runtime) Close() error {
	if rt == nil || rt.pool == nil {
		return nil
	}
	err := rt.pool.Close()
	if rt.arena != nil {
		if e := rt.arena.Close(); err == nil {
			err = e
		}
	}
	rt.pool, rt.arena, rt.scratch = nil, nil, nil
	return err
}

// jobBase is embedded in every worker adapter: the plan of the current call and, when
// reporting is on, the record workers stamp their start and end times into.
type jobBase struct {
	rt  *Runtime
	set *kern.Set
	p   plan
	rec *record
}

// rng is worker ith's share of the current call.
func (b *jobBase) rng(ith, nth int) (int, int) { return share(b.p.units, b.p.granule, ith, nth) }

// stamp records a worker's start or end when reporting is on.
func (b *jobBase) begin(ith int) {
	if b.rec != nil {
		b.rec.wstart[ith] = b.rt.now()
	}
}

func (b *jobBase) end(ith int) {
	if b.rec != nil {
		b.rec.wend[ith] = b.rt.now()
	}
}

func (rt *Runtime) now() int64 { return int64(time.Since(rt.epoch)) }

// runner is a worker adapter: a typed job struct the pool runs as Run(ith, nth).
type runner interface {
	threadpool.Task
	base() *jobBase
}

func (b *jobBase) base() *jobBase { return b }

// run applies the table row of op to shape s and executes j serially or on the pool.
func (rt *Runtime) run(op Op, s Shape, j runner) {
	row := &rt.table[op]
	mode := Decode
	if s.Tokens > 1 {
		mode = Prefill
	}
	b := j.base()
	b.rt = rt
	b.p = row.decide(s, mode, rt.threads)
	if b.p.active <= 1 {
		b.set = rt.serial[op]
	} else {
		b.set = rt.sets[op]
	}
	if rt.rec == nil {
		if b.p.active <= 1 {
			j.Run(0, 1)
		} else {
			rt.pool.DispatchN(b.p.active, j)
		}
		return
	}
	r := rt.rec.next()
	r.op, r.mode, r.shape, r.active, r.units, r.granule = op, mode, s, b.p.active, b.p.units, b.p.granule
	b.rec = r
	r.start = rt.now()
	if b.p.active <= 1 {
		j.Run(0, 1)
	} else {
		rt.pool.DispatchN(b.p.active, j)
	}
	r.end = rt.now()
	b.rec = nil
}

// checkOpen refuses calls on a closed runtime.
func (rt *Runtime) checkOpen(fn string) error {
	if rt == nil || rt.pool == nil {
		return fmt.Errorf("kernelrt.Runtime.%s: %w", fn, errClosed)
	}
	return nil
}
