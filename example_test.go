package kernelrt_test

import (
	"errors"
	"fmt"

	"github.com/kernelrt/kernelrt"
)

// Quantize a weight matrix and activations to Q8_0 (ggml's block_q8_0, byte for byte) and
// multiply them: y = W x with the serial kernel.
func Example_gemv() {
	const rows, cols = 2, 64
	wf := make([]float32, rows*cols)
	x := make([]float32, cols)
	for i := range wf {
		wf[i] = float32(1 + i/cols) // row 0 all 1, row 1 all 2
	}
	for i := range x {
		x[i] = 0.5
	}
	w := make([]kernelrt.BlockQ8_0, rows*cols/kernelrt.QK)
	xq := make([]kernelrt.BlockQ8_0, cols/kernelrt.QK)
	if err := kernelrt.QuantizeQ8_0(w, wf); err != nil {
		panic(err)
	}
	if err := kernelrt.QuantizeQ8_0(xq, x); err != nil {
		panic(err)
	}
	y := make([]float32, rows)
	if err := kernelrt.GemvQ8_0(y, w, xq, rows, cols); err != nil {
		panic(err)
	}
	fmt.Printf("%.1f %.1f\n", y[0], y[1])
	// Output: 32.0 64.0
}

// Every argument is checked before a kernel runs: a wrong length is an *ArgError naming
// the argument and the numbers, never a crash.
func ExampleArgError() {
	y := make([]float32, 3) // should be 2
	err := kernelrt.GemvQ8_0(y, make([]kernelrt.BlockQ8_0, 4), make([]kernelrt.BlockQ8_0, 2), 2, 64)
	var ae *kernelrt.ArgError
	fmt.Println(errors.As(err, &ae), ae.Arg)
	fmt.Println(err)
	// Output:
	// true y
	// kernelrt.GemvQ8_0: y: has length 3, want rows = 2 floats
}

// A Runtime runs the same ops split over a pinned pool as its dispatch table decides; code
// written against kernelrt.Ops runs on either.
func ExampleRuntime() {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		panic(err)
	}
	defer rt.Close()
	a := make([]float32, 1<<16)
	b := make([]float32, 1<<16)
	for i := range a {
		a[i], b[i] = 1, 2
	}
	for _, ops := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
		out := make([]float32, len(a))
		if err := ops.Add(out, a, b); err != nil {
			panic(err)
		}
		fmt.Println(out[0], out[len(out)-1])
	}
	active, _ := rt.Decide(kernelrt.OpAdd, kernelrt.Shape{N: 1 << 16, Tokens: 1}, kernelrt.Decode)
	fmt.Println("workers for a 65536-float add:", active)
	// Output:
	// 3 3
	// 3 3
	// workers for a 65536-float add: 2
}
