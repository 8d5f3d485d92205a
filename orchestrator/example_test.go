package orchestrator_test

import (
	"fmt"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// Build a small Qwen2-shaped model with random weights, prefill a prompt and decode one
// token greedily, on the serial kernels (a *kernelrt.Runtime works the same way).
func Example() {
	cfg := orchestrator.Config{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 100, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 32, MaxBatch: 8}
	m, err := orchestrator.NewSynthetic(cfg, orchestrator.RecipeQ8_0(), 1, orchestrator.BuildOptions{})
	if err != nil {
		panic(err)
	}
	defer m.Close()
	logits, err := m.Prefill(kernelrt.Serial{}, []int32{1, 2, 3})
	if err != nil {
		panic(err)
	}
	next := 0
	for i, v := range logits {
		if v > logits[next] {
			next = i
		}
	}
	if _, err := m.Decode(kernelrt.Serial{}, int32(next)); err != nil {
		panic(err)
	}
	fmt.Println(len(logits), m.Pos())
	// Output: 100 4
}
