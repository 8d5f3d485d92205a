package generate

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/kern"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/sample"
)

// tinyModel is a synthetic Qwen2-shaped model over byteTok's vocabulary. Its KV cache is F32:
// the ref and SIMD variants' logits differ in the last bit (2.4e-7 here, with any cache
// type), and with this seed an F16 cache happens to put one temperature-1.2 draw of
// TestSyntheticModel on such a near-tie, so that its texts differ by variant.
func tinyModel(t *testing.T) *orchestrator.Model {
	t.Helper()
	cfg := orchestrator.Config{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2,
		HeadDim: 32, Vocab: byteVocab, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 128, MaxBatch: 16, KV: orchestrator.KVF32}
	m, err := orchestrator.NewSynthetic(cfg, orchestrator.RecipeQ8_0(), 11, orchestrator.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// generateOn runs a seeded sampled generation and a greedy one on a fresh tiny model with
// the given executor, twice each (the second reuses the cached prompt).
func generateOn(t *testing.T, ops Ops) string {
	t.Helper()
	g, err := New(tinyModel(t), ops, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	o := sample.DefaultOptions()
	o.Temperature = 1.2
	o.RepeatPenalty = 1.1
	o.Seed = 1234
	var out []string
	for _, so := range []sample.Options{o, {}} {
		for range 2 {
			text, err := g.Generate(context.Background(), "The quick brown fox", Options{MaxTokens: 40, Sampling: so})
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%q/%v", text, g.Stats().Stop))
		}
	}
	return strings.Join(out, " | ")
}

// TestSyntheticModel streams from the real decoder and checks that one seed gives one text
// with the serial kernels, a Runtime at 1 and 2 threads, and every kernel backend and
// variant this machine runs. The backends give bit-identical logits per variant, but the
// ref, avx2 and avx512 variants differ in the last bit (up to 1.2e-7 here): the text is the
// same because the sampler's draw does not depend on the order of near-ties.
func TestSyntheticModel(t *testing.T) {
	g, err := New(tinyModel(t), kernelrt.Serial{}, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for piece, err := range g.Stream(context.Background(), "Hello", Options{MaxTokens: 16, Sampling: sample.Options{Temperature: 1, Seed: 5}}) {
		if err != nil {
			t.Fatal(err)
		}
		n += len(piece)
	}
	if st := g.Stats(); st.GeneratedTokens == 0 || st.PromptTokens != 6 || n == 0 {
		t.Fatalf("stats %+v, %d bytes of text", st, n)
	}

	want := generateOn(t, kernelrt.Serial{})
	t.Logf("serial: %s", want)
	for _, threads := range []int{1, 2} {
		rt, err := kernelrt.New(kernelrt.Options{Threads: threads, NoPin: true})
		if err != nil {
			t.Fatal(err)
		}
		if got := generateOn(t, rt); got != want {
			t.Errorf("Runtime with %d threads:\n got %s\nwant %s", threads, got, want)
		}
		rt.Close()
	}
	for _, backend := range kernelrt.Backends() {
		for _, variant := range kernelrt.Variants() {
			restore, err := kern.Use(backend, variant)
			if err != nil {
				t.Logf("%s/%s: %v", backend, variant, err)
				continue
			}
			got := generateOn(t, kernelrt.Serial{})
			restore()
			if got != want {
				t.Errorf("kernels %s/%s:\n got %s\nwant %s", backend, variant, got, want)
			}
		}
	}
}
