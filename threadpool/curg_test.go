package threadpool

import "testing"

// TestCurg checks that curg tells goroutines apart on every architecture (the misuse
// diagnostics name the worker by it) and is stable within one goroutine.
func TestCurg(t *testing.T) {
	a, a2 := curg(), curg()
	other := make(chan uintptr)
	go func() { other <- curg() }()
	b := <-other
	if a == 0 || b == 0 || a != a2 || a == b {
		t.Fatalf("curg: this goroutine %#x then %#x, another %#x: want equal non-zero, then different", a, a2, b)
	}
}
