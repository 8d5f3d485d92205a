package threadpool_test

import (
	"fmt"

	"github.com/kernelrt/kernelrt/threadpool"
)

// sumTask sums its share of xs into one slot per worker (each on its own cache line).
type sumTask struct {
	xs   []int
	part [4 * 8]int
}

func (t *sumTask) Run(ith, nth int) {
	lo, hi := len(t.xs)*ith/nth, len(t.xs)*(ith+1)/nth
	s := 0
	for _, x := range t.xs[lo:hi] {
		s += x
	}
	t.part[ith*8] = s
}

// A pool of persistent workers: the dispatching goroutine is worker 0 and runs its share
// inline; Dispatch returns when every worker has finished.
func Example() {
	p, err := threadpool.New(threadpool.Options{Threads: 2, NoPin: true})
	if err != nil {
		panic(err)
	}
	defer p.Close()
	t := &sumTask{xs: make([]int, 1000)}
	for i := range t.xs {
		t.xs[i] = i
	}
	p.Dispatch(t)
	fmt.Println(p.Threads(), t.part[0]+t.part[8])
	// Output: 2 499500
}
