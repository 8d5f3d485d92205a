//go:build linux

package threadpool

import (
	"fmt"
	"runtime"
	"slices"
	"testing"
)

// affinityTask records each thread's CPU mask from inside its share.
type affinityTask struct {
	masks [][]int
	errs  []error
}

func (t *affinityTask) Run(ith, nth int) {
	t.masks[ith], t.errs[ith] = threadAffinity()
}

// TestWorkersPinned checks from inside a task that each worker runs pinned to its core,
// and that NoPin leaves workers unpinned.
func TestWorkersPinned(t *testing.T) {
	n := testThreads()
	process, err := processAffinity()
	if err != nil {
		t.Fatal(err)
	}
	for _, noPin := range []bool{false, true} {
		p := newPool(t, Options{Threads: n, NoPin: noPin})
		task := &affinityTask{masks: make([][]int, n), errs: make([]error, n)}
		p.Dispatch(task)
		for i := 1; i < n; i++ {
			if task.errs[i] != nil {
				t.Fatalf("worker %d: %v", i, task.errs[i])
			}
			want := []int{p.Cores()[i]}
			if noPin {
				want = process
			}
			if !slices.Equal(task.masks[i], want) {
				t.Errorf("NoPin=%v: worker %d runs on %v, want %v", noPin, i, task.masks[i], want)
			}
		}
		if !noPin && !p.Pinned() {
			t.Errorf("Pinned() = false: %s", p.Describe())
		}
	}
}

// TestPinCaller checks that PinCaller pins the calling thread to worker 0's core, or only
// locks it with NoPin, and that unpin restores the old mask.
func TestPinCaller(t *testing.T) {
	for _, noPin := range []bool{false, true} {
		t.Run(fmt.Sprintf("NoPin=%v", noPin), func(t *testing.T) {
			p := newPool(t, Options{Threads: testThreads(), NoPin: noPin})
			runtime.LockOSThread() // so that "before" and "after" read the same thread
			defer runtime.UnlockOSThread()
			before, err := threadAffinity()
			if err != nil {
				t.Fatal(err)
			}
			unpin, err := p.PinCaller()
			if err != nil {
				unpin()
				t.Fatalf("PinCaller: %v", err)
			}
			during, _ := threadAffinity()
			want := []int{p.Cores()[0]}
			if noPin {
				want = before
			}
			// A task on the caller sees the same mask: the share runs on this thread.
			task := &affinityTask{masks: make([][]int, p.Threads()), errs: make([]error, p.Threads())}
			p.Dispatch(task)
			unpin()
			after, _ := threadAffinity()
			if !slices.Equal(during, want) || !slices.Equal(task.masks[0], want) {
				t.Errorf("while pinned: thread mask %v, caller's share %v, want %v", during, task.masks[0], want)
			}
			if !slices.Equal(after, before) {
				t.Errorf("after unpin: mask %v, want %v", after, before)
			}
		})
	}
}
