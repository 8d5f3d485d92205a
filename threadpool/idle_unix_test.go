//go:build unix

package threadpool

import (
	"runtime/debug"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// processCPU returns the user+system CPU time of the whole process so far.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		t.Fatalf("getrusage: %v", err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestIdleCPU checks that paused workers, and workers idle past their spin budget, use
// no CPU: under 2% of one core over 500 ms, by getrusage.
func TestIdleCPU(t *testing.T) {
	n := testThreads()
	p := newPool(t, Options{Threads: n, SpinBudget: time.Millisecond})
	task := &emptyTask{}
	for _, mode := range []string{"paused", "idle past the spin budget"} {
		for range 1000 {
			p.Dispatch(task)
		}
		if mode == "paused" {
			p.Pause()
		}
		waitAllAsleep(t, p)
		// Settle the rest of the runtime too: a pending GC or scavenge is not the pool's.
		debug.FreeOSMemory()
		before, wall := processCPU(t), time.Now()
		time.Sleep(500 * time.Millisecond)
		used, elapsed := processCPU(t)-before, time.Since(wall)
		t.Logf("%s: %v CPU over %v (%.2f%% of one core)", mode, used, elapsed, 100*float64(used)/float64(elapsed))
		if limit := elapsed / 50; used > limit {
			t.Errorf("%s: process used %v CPU over %v, want < %v (2%%)", mode, used, elapsed, limit)
		}
		if mode == "paused" {
			p.Resume()
		}
	}
}
