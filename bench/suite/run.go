package suite

import (
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/klauspost/cpuid/v2"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/bench/omp"
	"github.com/kernelrt/kernelrt/internal/baselines"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/threadpool"
)

// maxSamples bounds the per-call samples one micro-benchmark keeps.
const maxSamples = 1 << 18

// bench is the state of one Run.
type bench struct {
	s     settings
	r     *Report
	log   io.Writer
	start time.Time
	rt1   *kernelrt.Runtime // one thread
	rtN   *kernelrt.Runtime // all threads
	rtT   *kernelrt.Runtime // all threads with the report ring on, for the decode breakdown
	pool  *threadpool.Pool  // the pool measured on its own (dispatch latency, stream and gonum peers)
	thr   []int             // thread counts measured: 1 and N (once if N == 1)
	buf   []float64         // sample buffer, reused

	ompPinErr error // the OpenMP team could not be pinned
}

// Run runs the whole suite and returns its report. Progress lines go to progress (nil =
// none). On error it returns the sections completed so far with the error.
func Run(opts Options, progress io.Writer) (*Report, error) {
	if progress == nil {
		progress = io.Discard
	}
	if opts.Threads < 0 {
		return nil, fmt.Errorf("bench: Options.Threads must be >= 0, got %d", opts.Threads)
	}
	s := resolve(opts, l3Bytes())
	if err := s.cfg.Validate(); err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	// One OS thread for the whole run: libgomp keeps one OpenMP team per master thread, and
	// the pool's caller (pinned around each measurement) stays the same thread throughout.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b := &bench{s: s, log: progress, start: time.Now(), buf: make([]float64, 0, maxSamples)}
	b.r = &Report{Tool: "kernelrt bench", Started: b.start, Settings: s.export()}
	defer b.close()
	steps := []struct {
		name string
		fn   func() error
	}{
		{"machine", b.machine},
		{"streaming bandwidth", b.bandwidth},
		{"dispatch latency", b.dispatch},
		{"gemv", b.gemv},
		{"gemv by type", b.gemvByType},
		{"ops", b.ops},
		{"whole model", b.models},
		{"decode at depth", b.depth},
	}
	for _, st := range steps {
		if (st.name == "whole model" || st.name == "decode at depth") && s.SkipModels {
			continue
		}
		b.logf("== %s", st.name)
		if err := st.fn(); err != nil {
			b.finish()
			return b.r, fmt.Errorf("bench: %s: %w", st.name, err)
		}
	}
	b.summarize()
	b.finish()
	b.logf("done in %.0f s", b.r.Seconds)
	return b.r, nil
}

// summarize adds notes that help read the numbers.
func (b *bench) summarize() {
	r := b.r
	if bw := r.Bandwidth.GBs(2); bw > 0 && (bw > 18.9*1.25 || bw < 18.6*0.75) {
		b.note("this machine streams %.1f GB/s at 2 threads where peers.md's machine streamed 18.6-18.9 GB/s: ratios against "+
			"peers.md numbers (llama.cpp, ggml) mix the two machines' differences with the software's; the %% of bandwidth "+
			"columns compare like with like", bw)
	}
	over := 0
	for _, g := range r.Gemv.Rows {
		if g.PctBW > 105 {
			over++
		}
	}
	if over > 0 {
		b.note("%d GEMV rows read weights faster than the streaming-read figure at their thread count: the streaming read "+
			"does not reach this machine's limit (or was disturbed; see its min/max), so %% of bandwidth above 100 "+
			"means the limit is underestimated, not exceeded", over)
	}
	if !r.Gemv.OMP {
		b.note("OpenMP peer not measured: %s", r.Gemv.OMPInfo)
	}
}

func (b *bench) finish() {
	b.r.Machine.LoadEnd = loadavg()
	b.r.Seconds = time.Since(b.start).Seconds()
}

func (b *bench) close() {
	for _, rt := range []*kernelrt.Runtime{b.rt1, b.rtN, b.rtT} {
		if rt != nil {
			rt.Close()
		}
	}
	if b.pool != nil {
		b.pool.Close()
	}
}

func (b *bench) logf(format string, a ...any) {
	fmt.Fprintf(b.log, "[%5.1fs] %s\n", time.Since(b.start).Seconds(), fmt.Sprintf(format, a...))
}

func (b *bench) note(format string, a ...any) {
	b.r.Notes = append(b.r.Notes, fmt.Sprintf(format, a...))
}

// rt returns the runtime for a thread count of b.thr.
func (b *bench) rt(threads int) *kernelrt.Runtime {
	if threads == 1 {
		return b.rt1
	}
	return b.rtN
}

// pinned runs fn with the calling goroutine pinned to the pool's caller core (worker 0).
func pinned(rt *kernelrt.Runtime, fn func() error) error {
	unpin, err := rt.PinCaller()
	defer unpin()
	_ = err // pinning is best effort; the pool's Describe says whether it works
	return fn()
}

// sample times fn(i) for i = 0, 1, ... (after `warm` untimed calls) until it has at least
// MinSamples calls and SampleTime has passed, or maxSamples calls.
func (b *bench) sample(warm int, fn func(i int) error) (Timing, error) {
	for i := 0; i < warm; i++ {
		if err := fn(i); err != nil {
			return Timing{}, err
		}
	}
	s := b.buf[:0]
	budget := int64(b.s.SampleTime)
	t0 := baselines.Now()
	for i := warm; len(s) < maxSamples; i++ {
		a := baselines.Now()
		if err := fn(i); err != nil {
			return Timing{}, err
		}
		e := baselines.Now()
		s = append(s, float64(e-a))
		if len(s) >= b.s.MinSamples && e-t0 >= budget {
			break
		}
	}
	b.buf = s
	return timing(s), nil
}

// timing summarises ns samples (sorting them in place).
func timing(ns []float64) Timing {
	if len(ns) == 0 {
		return Timing{}
	}
	slices.Sort(ns)
	return Timing{MedianUs: rank(ns, 50) / 1e3, P99Us: rank(ns, 99) / 1e3, MinUs: ns[0] / 1e3, Samples: len(ns)}
}

// rank is the p-th percentile (nearest rank) of sorted xs.
func rank(sorted []float64, p float64) float64 {
	i := int(math.Ceil(p/100*float64(len(sorted)))) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	return rank(slices.Sorted(slices.Values(xs)), 50)
}

func mean(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	t := 0.0
	for _, x := range xs {
		t += x
	}
	return t / float64(len(xs))
}

// ---- machine ----

func (b *bench) machine() error {
	m := &b.r.Machine
	m.LoadStart = loadavg()
	var err error
	if b.rt1, err = kernelrt.New(kernelrt.Options{Threads: 1}); err != nil {
		return err
	}
	if b.rtN, err = kernelrt.New(kernelrt.Options{Threads: b.s.Threads}); err != nil {
		return err
	}
	n := b.rtN.Threads()
	if !b.s.SkipModels {
		if b.rtT, err = kernelrt.New(kernelrt.Options{Threads: b.s.Threads, Trace: traceCap}); err != nil {
			return err
		}
		if t := b.rtT.Threads(); t != n {
			b.note("the traced runtime of the decode breakdown got %d threads where the measured one got %d: "+
				"the thread pool read a pinned main-thread affinity mask (%s)", t, n, b.rtT.Describe())
		}
	}
	b.thr = []int{1}
	if n > 1 {
		b.thr = append(b.thr, n)
	}
	// The pool on its own, with the runtimes' thread count and pinning: what dispatch latency
	// and the stream and gonum peers run on (a Runtime runs only ops).
	if b.pool, err = threadpool.New(threadpool.Options{Threads: n}); err != nil {
		return err
	}
	pool := b.pool
	f := cpu.Detected()
	var feats []string
	for _, x := range []struct {
		on   bool
		name string
	}{{f.AVX2, "avx2"}, {f.FMA, "fma"}, {f.F16C, "f16c"}, {f.AVX512F, "avx512f"}, {f.AVX512BW, "avx512bw"},
		{f.AVX512VL, "avx512vl"}, {f.AVX512DQ, "avx512dq"}, {f.AVX512VNNI, "avx512vnni"}} {
		if x.on {
			feats = append(feats, x.name)
		}
	}
	pooledK, serialK := b.rtN.KernelsFor(kernelrt.OpGemvQ8_0)
	*m = Machine{
		CPU: cpu.Model(), Features: strings.Join(feats, " "), Kernels: defaultKernels(),
		GemvKernels: pooledK + " pooled, " + serialK + " serial", Backends: kernelrt.Backends(), Variants: kernelrt.Variants(),
		Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH, GOMAXPROCS: runtime.GOMAXPROCS(0),
		NumCPU: runtime.NumCPU(), L3Bytes: b.s.l3, Threads: n, Pool: b.rtN.Describe(), Pinned: pool.Pinned(),
		SpinUs: float64(pool.SpinBudget()) / 1e3, Thresholds: b.rtN.ThresholdsSource(), THP: thpSetting(),
		LoadStart: m.LoadStart, OpenMP: omp.Info(),
	}
	if m.CPU == "" {
		m.CPU = "unknown"
	}
	b.logf("%s; kernels %s; %s", m.CPU, m.Kernels, m.Pool)
	b.logf("load average %s", m.LoadStart)
	if la := strings.Fields(m.LoadStart); len(la) > 0 {
		if v, err := strconv.ParseFloat(la[0], 64); err == nil && v > 0.5 {
			b.note("the machine was busy at the start (load average %s): timings are noisy; rerun on a quiet machine for final numbers", m.LoadStart)
		}
	}
	return nil
}

// l3Bytes is the L3 size from cpuid, or 32 MiB if unknown.
func l3Bytes() int {
	if l3 := cpuid.CPU.Cache.L3; l3 > 0 {
		return l3
	}
	return 32 << 20
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func thpSetting() string {
	b, err := os.ReadFile("/sys/kernel/mm/transparent_hugepage/enabled")
	if err != nil {
		return "unknown"
	}
	s := strings.TrimSpace(string(b))
	if i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']'); i >= 0 && j > i {
		return s[i+1:j] + " (" + s + ")"
	}
	return s
}

// arenaInfo records an arena's page backing.
func (b *bench) arenaInfo(name string, a *arena.Arena) ArenaInfo {
	hb, err := a.HugeBacked()
	if err != nil {
		hb = 0
	}
	info := ArenaInfo{Name: name, Bytes: a.Cap(), PageKind: a.PageKind().String(), HugeBacked: hb}
	b.r.Machine.Arenas = append(b.r.Machine.Arenas, info)
	return info
}

// ---- streaming bandwidth ----

// streamStreams is the number of interleaved streams per thread of the multi-stream pass;
// streamBlock the floats each StreamRead call of that pass reads (64 KiB).
const (
	streamStreams = 8
	streamBlock   = 16384
)

// streamTask sums an equal, line-aligned share of buf per worker, as one stream or as
// streamStreams interleaved ones.
type streamTask struct {
	buf   []float32
	multi bool
	sink  [64 * 16]float32 // one line per worker
}

func (t *streamTask) Run(ith, nth int) {
	n := len(t.buf)
	lo := (n * ith / nth) &^ 15
	hi := (n * (ith + 1) / nth) &^ 15
	if ith == nth-1 {
		hi = n
	}
	share := t.buf[lo:hi]
	if !t.multi {
		t.sink[(ith%64)*16] = streamSum(share)
		return
	}
	var sum float32
	per := len(share) / streamStreams / streamBlock * streamBlock
	for off := 0; off < per; off += streamBlock {
		for s := 0; s < streamStreams; s++ {
			sum += streamSum(share[s*per+off : s*per+off+streamBlock])
		}
	}
	sum += streamSum(share[streamStreams*per:]) // the tail, if any
	t.sink[(ith%64)*16] = sum
}

func (b *bench) bandwidth() error {
	s := &b.s
	a, err := arena.New(s.StreamBytes, arena.Options{Prefault: true})
	if err != nil {
		return err
	}
	defer a.Close()
	buf, err := arena.Alloc[float32](a, s.StreamBytes/4)
	if err != nil {
		return err
	}
	for i := 0; i < len(buf); i += 1024 {
		buf[i] = 1 // pages are prefaulted; this only makes the data not all zero
	}
	b.arenaInfo("stream buffer", a)
	bw := &b.r.Bandwidth
	*bw = Bandwidth{Bytes: len(buf) * 4, Passes: s.StreamPasses, Kernels: defaultKernels()}
	for _, thr := range b.thr {
		rt := b.rt(thr)
		var one, multi []float64
		err := pinned(rt, func() error {
			for p := -1; p < s.StreamPasses; p++ { // pass -1 warms up
				for _, m := range []bool{false, true} {
					task := &streamTask{buf: buf, multi: m}
					t0 := baselines.Now()
					if thr == 1 {
						task.Run(0, 1)
					} else {
						b.pool.Dispatch(task)
					}
					gbs := float64(len(buf)*4) / float64(baselines.Now()-t0)
					if p < 0 {
						continue
					}
					if m {
						multi = append(multi, gbs)
					} else {
						one = append(one, gbs)
					}
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		res := BandwidthAt{Threads: thr, MedianGBs: median(one), MinGBs: slices.Min(one), MaxGBs: slices.Max(one), Samples: one,
			MultiGBs: median(multi), MultiMinGBs: slices.Min(multi), MultiMaxGBs: slices.Max(multi), MultiSamples: multi,
			StreamsPerThr: streamStreams}
		res.GBs = max(res.MedianGBs, res.MultiGBs)
		bw.Results = append(bw.Results, res)
		b.logf("stream read %d thread(s): %.2f GB/s one stream (min %.2f, max %.2f), %.2f GB/s %d streams per thread",
			thr, res.MedianGBs, res.MinGBs, res.MaxGBs, res.MultiGBs, streamStreams)
	}
	return nil
}

// ---- dispatch latency ----

type emptyTask struct{}

func (emptyTask) Run(int, int) {}

// timeEach returns n per-call samples (ns) of fn after warm untimed calls.
func timeEach(warm, n int, fn func()) []float64 {
	for i := 0; i < warm; i++ {
		fn()
	}
	out := make([]float64, n)
	for i := range out {
		t0 := baselines.Now()
		fn()
		out[i] = float64(baselines.Now() - t0)
	}
	return out
}

func latency(name string, threads int, ns []float64, note string) Latency {
	t := timing(ns)
	return Latency{Name: name, Threads: threads, MedianUs: t.MedianUs, P99Us: t.P99Us, MeanUs: mean(ns) / 1e3, Samples: len(ns), Note: note}
}

func (b *bench) dispatch() error {
	s := &b.s
	pool := b.pool
	n := pool.Threads()
	var task emptyTask
	var out []Latency
	add := func(l Latency) {
		out = append(out, l)
		b.logf("%-34s median %.3f µs  p99 %.3f µs", l.Name, l.MedianUs, l.P99Us)
	}
	err := pinned(b.rtN, func() error {
		add(latency("clock read pair (timer overhead)", 1, timeEach(1000, s.DispatchSamples, func() {}), "included in every sample below"))
		add(latency("pool, hot (back to back)", n, timeEach(2000, s.DispatchSamples, func() { pool.DispatchN(n, task) }),
			"caller pinned (PinCaller)"))
		spin := pool.SpinBudget()
		gap := max(2*spin, spin+500*time.Microsecond)
		before := pool.Stats()
		cold := make([]float64, s.ColdSamples)
		for i := range cold {
			time.Sleep(gap)
			t0 := baselines.Now()
			pool.DispatchN(n, task)
			cold[i] = float64(baselines.Now() - t0)
		}
		after := pool.Stats()
		wakes := float64(after.Wakeups-before.Wakeups) / float64(len(cold))
		add(latency("pool, cold (after idle gap)", n, cold,
			fmt.Sprintf("gap %v > spin budget %v; %.2f futex wakes per dispatch", gap, spin, wakes)))
		return nil
	})
	if err != nil {
		return err
	}
	// The Go baselines dispatch from an ordinary goroutine, as Go code would: a caller
	// locked to its thread (as Run's goroutine is) pays a thread handoff at every block.
	time.Sleep(2 * time.Millisecond) // the pool's workers stop spinning
	done := make(chan struct{})
	go func() {
		defer close(done)
		wg := baselines.NewWaitGroup(n)
		add(latency("goroutines + sync.WaitGroup", n, timeEach(2000, s.DispatchSamples, func() { wg.Dispatch(task) }),
			"new goroutines per dispatch; caller an ordinary goroutine"))
		for _, locked := range []bool{false, true} {
			ch := baselines.NewChannels(n, locked)
			name, note := "persistent workers + channels", "caller an ordinary goroutine"
			if locked {
				name, note = "channels, workers locked to threads", "runtime.LockOSThread in each worker"
			}
			samples := s.DispatchSamples
			if locked {
				samples = max(s.DispatchSamples/4, 100) // slow: a thread handoff per worker
			}
			add(latency(name, n, timeEach(200, samples, func() { ch.Dispatch(task) }), note))
			ch.Close()
		}
	}()
	<-done
	time.Sleep(2 * time.Millisecond) // let the pool's workers go to sleep: the ping-pong needs both cores
	// The floor is a property of the machine: with a 1-thread pool, take two usable cores.
	usable := pool.Cores()
	if n < 2 {
		usable, _ = threadpool.UsableCores()
	}
	if len(usable) >= 2 && usable[0] != usable[1] {
		pp, err := baselines.PingPong([2]int{usable[0], usable[1]}, s.PingPongBatches, 64)
		if err != nil {
			b.note("ping-pong floor not measured: %v", err)
		} else {
			note := fmt.Sprintf("cores %d and %d, pinned; mean of %d round trips per sample", pp.Cores[0], pp.Cores[1], pp.PerBatch)
			if !pp.Pinned {
				note = fmt.Sprintf("cores %d and %d requested, pinning FAILED; mean of %d round trips per sample", pp.Cores[0], pp.Cores[1], pp.PerBatch)
			}
			add(Latency{Name: "ping-pong floor (one cache line)", Threads: 2, MedianUs: pp.MedianNs / 1e3, P99Us: pp.P99Ns / 1e3,
				MeanUs: mean(pp.Samples) / 1e3, Samples: len(pp.Samples), Note: note})
		}
	} else {
		b.note("ping-pong floor not measured: it needs two distinct usable cores, found %v", usable)
	}
	b.r.Dispatch = out
	return nil
}

// streamSum is the StreamRead op's sum (the op fails only for a bad KERNELRT_* setting,
// which the runtimes' creation already reported).
func streamSum(x []float32) float32 {
	v, _ := kernelrt.StreamRead(x)
	return v
}

// defaultKernels names the serial calls' kernel set.
func defaultKernels() string {
	k, err := kernelrt.DefaultKernels()
	if err != nil {
		return err.Error()
	}
	return k
}
