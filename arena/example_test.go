package arena_test

import (
	"fmt"

	"github.com/kernelrt/kernelrt/arena"
)

// Plan every buffer first, then map one region (huge pages where the OS gives them) and take
// typed slices of it: memory the garbage collector never scans or moves.
func ExamplePlan() {
	var p arena.Plan
	p.Add(arena.Buffer{Name: "weights", ElemSize: 4, Count: 1 << 16, Region: arena.Weights})
	p.Add(arena.Buffer{Name: "acts", ElemSize: 4, Count: 4096, Region: arena.Activations})
	p.AddPerWorker("scratch", 4, 256, 2, arena.Scratch) // one cache-line-aligned slice per worker
	l, err := p.Layout()
	if err != nil {
		panic(err)
	}
	a, err := arena.NewFromLayout(l, arena.Options{})
	if err != nil {
		panic(err)
	}
	defer a.Close()
	w, _ := arena.Get[float32](a, l, "weights")
	scr, _ := arena.GetPerWorker[float32](a, l, "scratch")
	w[0] = 1.5
	fmt.Println(len(w), w[0], len(scr), len(scr[1]))
	// Output: 65536 1.5 2 256
}
