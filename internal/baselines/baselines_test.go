package baselines

import (
	"sync/atomic"
	"testing"
)

type countTask struct {
	hits [8]atomic.Int32
	nth  atomic.Int32
}

func (t *countTask) Run(ith, nth int) {
	t.hits[ith].Add(1)
	t.nth.Store(int32(nth))
}

func TestDispatchersRunEveryShareOnce(t *testing.T) {
	for _, n := range []int{1, 2, 4} {
		for name, d := range map[string]Dispatcher{
			"waitgroup":       NewWaitGroup(n),
			"channels":        NewChannels(n, false),
			"channels-locked": NewChannels(n, true),
		} {
			task := &countTask{}
			const rounds = 100
			for i := 0; i < rounds; i++ {
				d.Dispatch(task)
			}
			d.Close()
			d.Close()
			if d.Threads() != n || int(task.nth.Load()) != n {
				t.Errorf("%s(%d): Threads=%d, task saw nth=%d", name, n, d.Threads(), task.nth.Load())
			}
			for i := 0; i < n; i++ {
				if got := task.hits[i].Load(); got != rounds {
					t.Errorf("%s(%d): share %d ran %d times, want %d", name, n, i, got, rounds)
				}
			}
		}
	}
}

func TestPingPong(t *testing.T) {
	r, err := PingPong([2]int{0, 1}, 20, 100)
	if err != nil {
		t.Skip(err)
	}
	if len(r.Samples) != 20 || !(r.MedianNs > 0) || r.P99Ns < r.MedianNs {
		t.Fatalf("bad result: %+v", r)
	}
	if _, err := PingPong([2]int{0, 1}, 0, 1); err == nil {
		t.Error("PingPong with 0 batches: no error")
	}
}

func TestPercentile(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	if got := Percentile(xs, 50); got != 3 {
		t.Errorf("median = %v, want 3", got)
	}
	if got := Percentile(xs, 100); got != 5 {
		t.Errorf("p100 = %v, want 5", got)
	}
	if got := Percentile(xs, 0); got != 1 {
		t.Errorf("p0 = %v, want 1", got)
	}
	if xs[0] != 5 {
		t.Error("Percentile reordered its input")
	}
	if Percentile(nil, 50) != 0 {
		t.Error("Percentile(nil) != 0")
	}
}
