package orchestrator

import (
	"testing"

	"github.com/kernelrt/kernelrt"
)

// TestSyntheticGGUFQ2K writes a synthetic model with every matrix in Q2_K (ggml's 84-byte
// blocks, random quants, scales and mins) with SyntheticGGUF, loads it (Q2_K used as stored,
// computed by the Q2_K kernels) and compares its logits, prefill (GEMM) and decode (GEMV), with
// the float64 reference, which decodes the file's Q2_K blocks itself and multiplies the
// dequantized weights with Q8_K-rounded activations.
func TestSyntheticGGUFQ2K(t *testing.T) {
	cfg := Config{Arch: "qwen2", Layers: 2, Hidden: 256, Intermediate: 512, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 300,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}
	r := Recipe{Name: "q2_k", Q: Q2_K, K: Q2_K, V: Q2_K, O: Q2_K, Gate: Q2_K, Up: Q2_K, Down: Q2_K, Embedded: Q2_K}
	p := writeSynthetic(t, cfg, r, 9, "q2_k.gguf")
	m, err := LoadGGUF(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Recipe.Q != Q2_K || m.Recipe.Down != Q2_K || m.Embed.Type != Q2_K ||
		len(m.Embed.Q2K) != cfg.Vocab*cfg.Hidden/kernelrt.QKK {
		t.Errorf("loaded recipe %+v, embedding %s with %d Q2_K blocks", m.Recipe, m.Embed.Type, len(m.Embed.Q2K))
	}
	m.Close()
	prompt := []int32{7, 100, 299, 0, 12, 250, 3, 41, 42, 17}
	worst := runCompare(t, kernelrt.Serial{}, p, LoadOptions{KV: KVF32}, prompt, []int32{5, 6}, tolQuantizedWide)
	t.Logf("max relative error %.3g", worst)
}

// TestSyntheticGGUFQ2KMix is llama.cpp's Q2_K mix (LLAMA_FTYPE_MOSTLY_Q2_K, no MoE, fewer than 4
// query heads per KV head): Q2_K by default, Q3_K for attn_v, attn_output and ffn_down, and a
// separate output head (llama.cpp's is Q6_K, which SyntheticGGUF does not write: Q8_0 here),
// against the float64 reference on two threads.
func TestSyntheticGGUFQ2KMix(t *testing.T) {
	cfg := Config{Arch: "llama", Layers: 2, Hidden: 256, Intermediate: 768, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 300,
		RopeTheta: 1e4, Eps: 1e-5, MaxCtx: 64, MaxBatch: 16}
	r := Recipe{Name: "q2_k mix", Q: Q2_K, K: Q2_K, V: Q3_K, O: Q3_K, Gate: Q2_K, Up: Q2_K, Down: Q3_K, Embedded: Q2_K,
		Untied: true, Output: Q8_0}
	p := writeSynthetic(t, cfg, r, 11, "q2_k_mix.gguf")
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	worst := runCompare(t, rt, p, LoadOptions{KV: KVF32}, []int32{1, 2, 3, 299, 150, 77, 8, 9}, []int32{4, 5, 6}, tolQuantizedWide)
	t.Logf("max relative error %.3g", worst)
}
