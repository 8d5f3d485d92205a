package orchestrator

import (
	"fmt"
	"testing"

	"github.com/kernelrt/kernelrt"
)

// BenchmarkForwardBatchStep times one batched-decode step (T sequences, one token each) of
// the synthetic Qwen2-0.5B Q8_0 on 2 threads, with mm's small-T matmuls as GEMVs over cached
// row blocks (gemv: up to gemvTokens) and as the GEMM (gemm), one after the other (use -count
// to repeat them in turn). The weights (~500 MB) come from DRAM each step.
func BenchmarkForwardBatchStep(b *testing.B) {
	cfg := Qwen2_0_5B()
	cfg.MaxCtx, cfg.Slots = 256, 8
	m, err := NewSynthetic(cfg, RecipeQ8_0(), 1, BuildOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	defer func() { noStreamGemm = false }()
	for _, T := range []int{1, 2, 4, 8} {
		for _, path := range []string{"gemv", "gemm"} {
			b.Run(fmt.Sprintf("T=%d/%s", T, path), func(b *testing.B) {
				noStreamGemm = path == "gemv"
				toks := make([]int32, T)
				seqs := make([]Seq, T)
				for i := range seqs {
					toks[i] = int32(10 + i)
					seqs[i] = Seq{Slot: i, N: 1, Logits: true}
				}
				for i := 0; b.Loop(); i++ {
					for j := range seqs {
						seqs[j].Pos = i % 200
					}
					if _, err := m.ForwardBatch(rt, toks, seqs); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}
