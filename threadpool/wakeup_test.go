package threadpool

import (
	"sync/atomic"
	"testing"
	"time"
)

// shareCounter counts its shares.
type shareCounter struct{ n atomic.Int64 }

func (c *shareCounter) Run(ith, nth int) { c.n.Add(1) }

// Dispatches to workers that fall asleep between them (a 1 µs spin budget) never lose a
// wakeup: before the Dekker stores became exchanges, qemu's arm64 emulation lost one within
// seconds and left a worker and the caller asleep for good (the CI's cross tests hung).
func TestNoLostWakeups(t *testing.T) {
	p, err := New(Options{Threads: 2, NoPin: true, SpinBudget: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	n := 200000
	if testing.Short() {
		n = 20000
	}
	var task shareCounter
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range n {
			p.Dispatch(&task)
		}
	}()
	select {
	case <-done:
	case <-time.After(3 * time.Minute):
		t.Fatalf("%d of %d dispatches done in 3 minutes: a wakeup was lost (stats %+v)", task.n.Load()/2, n, p.Stats())
	}
	if got := task.n.Load(); got != int64(2*n) {
		t.Errorf("%d shares ran, want %d", got, 2*n)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
}
