package threadpool

import (
	"math"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// emptyTask is the payload of the dispatch benchmarks: the cost measured is the pool's.
type emptyTask struct{}

func (*emptyTask) Run(ith, nth int) {}

// Medians of the sub-benchmarks of the current run, so that pingpong (which runs last)
// can report the ratios measured side by side.
var benchMedians sync.Map // name -> float64 ns

// benchThreads is the thread count the dispatch benchmarks compare at: the pool's default,
// and at least 2 so that there is a handoff to measure.
func benchThreads() (n int, cores []int) {
	cores, _ = UsableCores()
	return max(2, len(cores)), cores
}

// BenchmarkDispatch compares an empty dispatch through the pool with the naive Go ways of
// running n goroutines and with the physical floor of any handoff.
func BenchmarkDispatch(b *testing.B) {
	b.Run("pool-hot", benchPoolHot)
	b.Run("pool-cold", benchPoolCold)
	b.Run("waitgroup", benchWaitGroup)
	b.Run("channels", benchChannels)
	b.Run("pingpong", benchPingPong)
}

// timeBatches runs op b.N times in batches of 64 and reports the median of the batch
// means: robust against the preemptions a shared machine inflicts on single samples.
func timeBatches(b *testing.B, name, unit string, op func()) float64 {
	const batch = 64
	samples := make([]float64, 0, b.N/batch+1)
	b.ResetTimer()
	for done := 0; done < b.N; {
		k := min(batch, b.N-done)
		t0 := nanotime()
		for range k {
			op()
		}
		samples = append(samples, float64(nanotime()-t0)/float64(k))
		done += k
	}
	b.StopTimer()
	med := median(samples)
	b.ReportMetric(med, "ns/"+unit)
	benchMedians.Store(name, med)
	return med
}

func median(s []float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	s = slices.Clone(s)
	slices.Sort(s)
	return s[len(s)/2]
}

func percentile(s []float64, q float64) float64 {
	s = slices.Clone(s)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func benchPoolHot(b *testing.B) {
	n, _ := benchThreads()
	p, err := New(Options{Threads: n})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	unpin, _ := p.PinCaller()
	defer unpin()
	task := &emptyTask{}
	for range 1000 { // warm: workers spinning, lines in place
		p.Dispatch(task)
	}
	timeBatches(b, "pool-hot", "dispatch", func() { p.Dispatch(task) })
}

// benchPoolCold times single dispatches that each follow an idle gap long enough for
// every worker to have fallen asleep: the price of a futex wake.
func benchPoolCold(b *testing.B) {
	n, _ := benchThreads()
	p, err := New(Options{Threads: n})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	unpin, _ := p.PinCaller()
	defer unpin()
	task := &emptyTask{}
	samples := make([]float64, 0, b.N)
	b.ResetTimer()
	for range b.N {
		b.StopTimer()
		time.Sleep(p.SpinBudget())
		for p.sleepingWorkers() < n-1 {
			time.Sleep(p.SpinBudget()/4 + time.Microsecond)
		}
		b.StartTimer()
		t0 := nanotime()
		p.Dispatch(task)
		samples = append(samples, float64(nanotime()-t0))
	}
	b.StopTimer()
	med := median(samples)
	b.ReportMetric(med, "ns/dispatch")
	b.ReportMetric(percentile(samples, 0.9), "p90-ns")
	benchMedians.Store("pool-cold", med)
}

// benchWaitGroup is the naive Go way: spawn n-1 goroutines per dispatch and join them.
func benchWaitGroup(b *testing.B) {
	n, _ := benchThreads()
	task := &emptyTask{}
	var wg sync.WaitGroup
	timeBatches(b, "waitgroup", "dispatch", func() {
		wg.Add(n - 1)
		for i := 1; i < n; i++ {
			go func() {
				task.Run(i, n)
				wg.Done()
			}()
		}
		task.Run(0, n)
		wg.Wait()
	})
}

// benchChannels feeds persistent (unlocked) worker goroutines through channels.
func benchChannels(b *testing.B) {
	n, _ := benchThreads()
	task := &emptyTask{}
	in := make([]chan Task, n)
	done := make(chan struct{}, n)
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		in[i] = make(chan Task)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for t := range in[i] {
				t.Run(i, n)
				done <- struct{}{}
			}
		}()
	}
	timeBatches(b, "channels", "dispatch", func() {
		for i := 1; i < n; i++ {
			in[i] <- task
		}
		task.Run(0, n)
		for i := 1; i < n; i++ {
			<-done
		}
	})
	for i := 1; i < n; i++ {
		close(in[i])
	}
	wg.Wait()
}

// benchPingPong bounces one cache line between two threads pinned to two cores: the
// floor of any dispatch that must hear back from a worker.
//
// The hypervisor may move the two vCPUs between a near placement (one core complex, a
// ~55 ns round trip here) and a far one (~420 ns) in the middle of a run, so the
// hot/pingpong ratio is not taken from the separate sub-benchmarks: it is the median of
// ratios of adjacent short blocks of ping-pong and pool dispatches on the same cores.
func benchPingPong(b *testing.B) {
	_, cores := benchThreads()
	c0, c1 := cores[0], cores[1%len(cores)]
	var line struct {
		_ pad
		v atomic.Uint64
		_ pad
	}
	const (
		stop    = math.MaxUint64
		park    = math.MaxUint64 - 1
		parked  = math.MaxUint64 - 2
		resumed = 0 // the caller restarts the count after a park
	)
	exited, resume := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(exited)
		runtime.LockOSThread() // never unlocked: the pinned thread ends with the goroutine
		_ = setThreadAffinity([]int{c1})
		for want := uint64(1); ; want += 2 {
			for {
				v := line.v.Load()
				if v == want {
					break
				}
				switch v {
				case stop:
					return
				case park: // get off the core while a pool block runs there
					line.v.Store(parked)
					<-resume
					want = 1
					continue
				}
				cpuPause()
			}
			line.v.Store(want + 1)
		}
	}()
	runtime.LockOSThread()
	old, err := threadAffinity()
	if err == nil {
		_ = setThreadAffinity([]int{c0})
	}
	next := uint64(0)
	roundTrip := func() {
		next += 2
		line.v.Store(next - 1)
		for line.v.Load() != next {
			cpuPause()
		}
	}
	timeBatches(b, "pingpong", "roundtrip", roundTrip)

	// Paired blocks for the ratio. The pool's worker shares core c1 with the responder,
	// so each side sleeps while the other runs.
	p, perr := New(Options{Threads: 2})
	if perr != nil {
		b.Fatal(perr)
	}
	task := &emptyTask{}
	blockMedian := func(op func()) float64 {
		const batches, batch = 32, 64
		s := make([]float64, batches)
		for i := range s {
			t0 := nanotime()
			for range batch {
				op()
			}
			s[i] = float64(nanotime()-t0) / batch
		}
		return median(s)
	}
	var ratios []float64
	for range 9 {
		ping := blockMedian(roundTrip)
		line.v.Store(park)
		for line.v.Load() != parked {
			cpuPause()
		}
		p.Resume()
		p.Dispatch(task)
		hot := blockMedian(func() { p.Dispatch(task) })
		p.Pause()
		waitAllAsleep(b, p)
		next = resumed
		line.v.Store(resumed)
		resume <- struct{}{}
		ratios = append(ratios, hot/ping)
	}
	_ = p.Close()
	line.v.Store(stop)
	<-exited
	if err == nil {
		_ = setThreadAffinity(old)
	}
	runtime.UnlockOSThread()
	b.ReportMetric(median(ratios), "hot/pingpong")
	if hot, ok := benchMedians.Load("pool-hot"); ok {
		if wg, ok := benchMedians.Load("waitgroup"); ok {
			b.ReportMetric(wg.(float64)/hot.(float64), "waitgroup/hot")
		}
	}
}

// barrierTask calls the barrier rounds times.
type barrierTask struct {
	p      *Pool
	rounds int
}

func (t *barrierTask) Run(ith, nth int) {
	for range t.rounds {
		t.p.Barrier()
	}
}

// BenchmarkBarrier measures one barrier among all threads, inside a dispatch.
func BenchmarkBarrier(b *testing.B) {
	n, _ := benchThreads()
	p, err := New(Options{Threads: n})
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	unpin, _ := p.PinCaller()
	defer unpin()
	const rounds = 100
	task := &barrierTask{p: p, rounds: rounds}
	p.Dispatch(task)
	med := timeBatches(b, "barrier", "dispatch", func() {
		p.Dispatch(task)
	})
	b.ReportMetric(med/rounds, "ns/barrier")
}
