package threadpool

import (
	"testing"
	"time"
)

// sleepingWorkers counts workers that are asleep or committed to sleeping.
func (p *Pool) sleepingWorkers() int {
	k := 0
	for i := 1; i < p.n; i++ {
		if p.workers[i].state.Load() == stateSleeping {
			k++
		}
	}
	return k
}

// waitAllAsleep polls until every worker sleeps. The deadline is generous because a busy
// machine may keep a worker off its core for a long time; it only guards against a hang.
func waitAllAsleep(t testing.TB, p *Pool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for p.sleepingWorkers() < p.n-1 {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d workers asleep after 60 s", p.sleepingWorkers(), p.n-1)
		}
		time.Sleep(200 * time.Microsecond)
	}
}
