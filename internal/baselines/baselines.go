// Package baselines holds the reference handoff mechanisms the benchmark suite compares the
// thread pool with: a dispatch that spawns goroutines and joins them with a sync.WaitGroup,
// persistent workers fed by channels, and the ping-pong floor of any handoff (two threads
// pinned to two cores bouncing one cache line). None of it is used on the inference path.
package baselines

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	_ "unsafe" // for go:linkname
)

// Now is the runtime's monotonic clock in nanoseconds: cheaper than time.Now (which also
// reads the wall clock), so per-call samples of sub-microsecond operations stay honest.
//
//go:linkname Now runtime.nanotime
func Now() int64

// Task is one parallel job: Run is called once per thread with ith in [0, nth). It has the
// method set of threadpool.Task, so the same value runs on the pool and on every baseline.
type Task interface {
	Run(ith, nth int)
}

// Dispatcher runs a Task on a fixed number of threads, the caller being thread 0, and
// returns when every share has finished.
type Dispatcher interface {
	Threads() int
	Dispatch(t Task)
	Close()
}

// WaitGroup dispatches by starting threads-1 goroutines per call and joining them with a
// sync.WaitGroup: the idiomatic Go fan-out, whose cost is goroutine creation, scheduling
// and the wake of the waiting caller.
type WaitGroup struct {
	n  int
	wg sync.WaitGroup
}

// NewWaitGroup returns a WaitGroup dispatcher for threads threads (at least 1).
func NewWaitGroup(threads int) *WaitGroup { return &WaitGroup{n: max(1, threads)} }

// Threads is the number of shares per dispatch.
func (d *WaitGroup) Threads() int { return d.n }

// Dispatch runs t.Run(i, n) on n-1 new goroutines and on the caller, then waits.
func (d *WaitGroup) Dispatch(t Task) {
	n := d.n
	d.wg.Add(n - 1)
	for i := 1; i < n; i++ {
		go func(i int) {
			t.Run(i, n)
			d.wg.Done()
		}(i)
	}
	t.Run(0, n)
	d.wg.Wait()
}

// Close does nothing: the goroutines end with each dispatch.
func (d *WaitGroup) Close() {}

// Channels dispatches to threads-1 persistent worker goroutines, each fed by its own
// channel; completions come back on one buffered channel.
type Channels struct {
	n      int
	work   []chan Task
	done   chan struct{}
	exited sync.WaitGroup
	closed bool
}

// NewChannels starts threads-1 workers. With lockWorkers each worker goroutine is locked to
// its OS thread (runtime.LockOSThread), which makes every channel wake a thread handoff.
func NewChannels(threads int, lockWorkers bool) *Channels {
	n := max(1, threads)
	d := &Channels{n: n, work: make([]chan Task, n), done: make(chan struct{}, n)}
	ready := make(chan struct{})
	d.exited.Add(n - 1)
	for i := 1; i < n; i++ {
		d.work[i] = make(chan Task, 1)
		go func(i int, in <-chan Task) {
			defer d.exited.Done()
			if lockWorkers {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
			}
			ready <- struct{}{}
			for t := range in {
				t.Run(i, n)
				d.done <- struct{}{}
			}
		}(i, d.work[i])
		<-ready
	}
	return d
}

// Threads is the number of shares per dispatch.
func (d *Channels) Threads() int { return d.n }

// Dispatch sends t to every worker, runs share 0 and waits for n-1 completions.
func (d *Channels) Dispatch(t Task) {
	for i := 1; i < d.n; i++ {
		d.work[i] <- t
	}
	t.Run(0, d.n)
	for i := 1; i < d.n; i++ {
		<-d.done
	}
}

// Close stops the workers; it is idempotent.
func (d *Channels) Close() {
	if d.closed {
		return
	}
	d.closed = true
	for i := 1; i < d.n; i++ {
		close(d.work[i])
	}
	d.exited.Wait()
}

// PingPongResult is the round-trip time of one cache line bounced between two threads.
type PingPongResult struct {
	Cores    [2]int
	Pinned   bool      // both threads were pinned to their cores
	PerBatch int       // round trips timed together per sample
	Samples  []float64 // ns per round trip, one per batch
	MedianNs float64
	P99Ns    float64
}

// line is one 64-byte cache line with nothing else on it (128-byte padding on each side:
// the adjacent-line prefetcher fetches lines in pairs).
type line struct {
	_ [128]byte
	v atomic.Uint64
	_ [120]byte
}

// PingPong measures the floor of any handoff: two goroutines locked to OS threads pinned to
// cores[0] and cores[1] bounce one cache line (A stores an odd value and spins until B
// answers with the next even one). Each sample is the mean over perBatch round trips, so
// the clock is read once per batch; batches samples are taken after a warm-up. Pinning is
// best effort: if the affinity calls fail the result says Pinned=false. It needs
// GOMAXPROCS >= 2, since both threads spin at once.
func PingPong(cores [2]int, batches, perBatch int) (PingPongResult, error) {
	res := PingPongResult{Cores: cores, PerBatch: perBatch}
	if batches <= 0 || perBatch <= 0 {
		return res, fmt.Errorf("baselines: PingPong(batches=%d, perBatch=%d): both must be positive", batches, perBatch)
	}
	if runtime.GOMAXPROCS(0) < 2 {
		return res, fmt.Errorf("baselines: PingPong needs GOMAXPROCS >= 2, have %d", runtime.GOMAXPROCS(0))
	}
	const quit = ^uint64(0)
	l := new(line)
	pinned := make(chan error, 2)
	// Both sides run on fresh goroutines that lock their thread and never unlock it: when
	// they end, the runtime retires the thread instead of reusing one with our affinity.
	go func() {
		runtime.LockOSThread()
		pinned <- pinThread(cores[1])
		for {
			x := l.v.Load()
			if x == quit {
				return
			}
			if x&1 == 1 {
				l.v.Store(x + 1)
			}
		}
	}()
	out := make(chan PingPongResult)
	go func() {
		runtime.LockOSThread()
		pinned <- pinThread(cores[0])
		r := res
		k := uint64(0)
		bounce := func(n int) {
			for j := 0; j < n; j++ {
				k += 2
				l.v.Store(k - 1)
				for l.v.Load() != k {
				}
			}
		}
		bounce(20000) // warm-up: both threads running, the line in play
		r.Samples = make([]float64, batches)
		for b := range r.Samples {
			t0 := Now()
			bounce(perBatch)
			r.Samples[b] = float64(Now()-t0) / float64(perBatch)
		}
		l.v.Store(quit)
		out <- r
	}()
	e1, e2 := <-pinned, <-pinned
	res = <-out
	res.Pinned = e1 == nil && e2 == nil
	res.MedianNs = Percentile(res.Samples, 50)
	res.P99Ns = Percentile(res.Samples, 99)
	return res, nil
}

// Percentile returns the p-th percentile (0..100, nearest rank) of xs without reordering
// xs; 0 for an empty slice.
func Percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(math.Ceil(p/100*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}
