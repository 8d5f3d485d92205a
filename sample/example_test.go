package sample_test

import (
	"fmt"

	"github.com/kernelrt/kernelrt/sample"
)

// A greedy sampler (the zero Options) with a repeat penalty: the token just generated loses
// to the runner-up the second time.
func Example() {
	s, err := sample.New(4, sample.Options{RepeatPenalty: 1.5, PenaltyLastN: 16})
	if err != nil {
		panic(err)
	}
	logits := []float32{0.5, 3, 2.5, -1}
	for range 2 {
		id, err := s.Sample(logits)
		if err != nil {
			panic(err)
		}
		s.Accept(id)
		fmt.Println(id)
	}
	// Output:
	// 1
	// 2
}

// Seeded sampling with llama.cpp's defaults: the same seed draws the same tokens.
func ExampleSampler_Sample() {
	o := sample.DefaultOptions()
	o.Seed = 42
	draw := func() []int32 {
		s, _ := sample.New(3, o)
		var ids []int32
		for range 8 {
			id, _ := s.Sample([]float32{1, 1.2, 0.9})
			ids = append(ids, id)
		}
		return ids
	}
	fmt.Println(draw())
	fmt.Println(draw())
	// Output:
	// [2 0 0 1 0 2 0 2]
	// [2 0 0 1 0 2 0 2]
}

// Bad options are reported before any sampling.
func ExampleOptions_Validate() {
	o := sample.Options{Temperature: 0.7, TopP: 1.5}
	fmt.Println(o.Validate(32000))
	// Output:
	// sample: TopP must be in [0, 1] (0 turns it off), got 1.5
}
