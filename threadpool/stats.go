package threadpool

import (
	"time"
	_ "unsafe" // for go:linkname
)

// nanotime is the runtime's monotonic clock: cheaper than time.Now, which also reads the
// wall clock, and it is read on every dispatch for busy time and spin budgets.
//
//go:linkname nanotime runtime.nanotime
func nanotime() int64

// Stats is a snapshot of a pool's counters. They are always on: the dispatch count is
// the published epoch, the others are uncontended atomic adds on lines their writers own
// (sleeps and wakes only on the slow path), and busy time is one time-stamp-counter pair
// per thread per dispatch, a worker's first read taken by the spin iteration that found
// the dispatch.
type Stats struct {
	// Dispatches counts Dispatch and DispatchN calls that ran.
	Dispatches uint64
	// Sleeps counts futex sleeps: idle workers past their spin budget or paused, the
	// caller waiting past its budget, threads waiting at a barrier.
	Sleeps uint64
	// Wakeups counts futex wakes sent to a sleeping worker, caller or barrier.
	Wakeups uint64
	// Busy is, per thread (0 = the caller's own share), the time spent running tasks. A
	// worker's count starts at the spin iteration that found the dispatch, so it may
	// include up to one iteration (tens of ns) of waiting per dispatch.
	Busy []time.Duration
}

// ReadStats fills s, reusing s.Busy when it has room, so that polling allocates nothing.
func (p *Pool) ReadStats(s *Stats) {
	c := p.ctl.Load()
	s.Dispatches = c>>epochShift + p.solo.Load()
	if c&quitBit != 0 {
		s.Dispatches-- // Close's epoch
	}
	s.Sleeps = p.callerSleeps.Load() + p.barSleeps.Load()
	s.Wakeups = p.wakeups.Load() + p.barWakeups.Load()
	if cap(s.Busy) < p.n {
		s.Busy = make([]time.Duration, p.n)
	}
	s.Busy = s.Busy[:p.n]
	for i := range p.workers {
		w := &p.workers[i]
		s.Sleeps += w.sleeps.Load()
		s.Wakeups += w.wakeups.Load()
		s.Busy[i] = p.ticksToDuration(w.busyTicks.Load())
	}
}

// clockPair reads cputicks and nanotime as close to the same instant as it can: the tick
// read is bracketed by two nanotime reads and the tightest of a few tries is kept. A
// goroutine preempted between two unbracketed reads skews the pair by the preemption
// (100 µs and more on a busy VM), which on a pool a few milliseconds old was a 5% error
// in Busy.
func clockPair() (ticks, nanos int64) {
	best := int64(-1)
	for range 8 {
		n1 := nanotime()
		t := cputicks()
		n2 := nanotime()
		if d := n2 - n1; best < 0 || d < best {
			best, ticks, nanos = d, t, n1+d/2
			if d < 1000 {
				break
			}
		}
	}
	return ticks, nanos
}

// ticksToDuration converts cputicks to time using the rate measured since New: with an
// invariant TSC the two clocks move in fixed proportion, so no calibration pause is needed.
func (p *Pool) ticksToDuration(ticks int64) time.Duration {
	t1, n1 := clockPair()
	dt, dn := t1-p.ticks0, n1-p.nanos0
	if dt <= 0 || dn <= 0 {
		return time.Duration(ticks)
	}
	return time.Duration(float64(ticks) * float64(dn) / float64(dt))
}

// Stats returns a snapshot of the counters.
func (p *Pool) Stats() Stats {
	var s Stats
	p.ReadStats(&s)
	return s
}
