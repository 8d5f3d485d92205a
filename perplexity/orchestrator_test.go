package perplexity

import (
	"bytes"
	"math"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// TestSyntheticModel runs Perplexity and KLDivergence on a tiny synthetic model and checks
// them against float64 sums over the model's own logits of the same chunks.
func TestSyntheticModel(t *testing.T) {
	const ctx = 24
	cfg := orchestrator.Config{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 96,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: ctx, MaxBatch: 8, AllLogits: true}
	m, err := orchestrator.NewSynthetic(cfg, orchestrator.RecipeMixed(), 5, orchestrator.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e := kernelrt.Serial{}
	pm, err := FromOrchestrator(m, e)
	if err != nil {
		t.Fatal(err)
	}
	tokens := testTokens(3*ctx+4, cfg.Vocab)
	var base bytes.Buffer
	o := Options{Ctx: ctx, AddBOS: true, BOS: 1, Base: &base}
	res, err := Perplexity(pm, tokens, o)
	if err != nil {
		t.Fatal(err)
	}
	// Direct: each chunk (BOS first) prefilled in the same 8-token pieces, every scored
	// position's log-softmax in float64.
	sum, n := 0.0, 0
	for c := range 3 {
		in := append([]int32{1}, tokens[c*ctx+1:(c+1)*ctx]...)
		m.Reset()
		var all []float32
		for s := 0; s < ctx; s += 8 {
			out, err := m.Prefill(e, in[s:s+8])
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, out...)
		}
		V := cfg.Vocab
		for p := ctx / 2; p <= ctx-2; p++ {
			row := all[p*V : (p+1)*V]
			mx := math.Inf(-1)
			for _, v := range row {
				mx = math.Max(mx, float64(v))
			}
			z := 0.0
			for _, v := range row {
				z += math.Exp(float64(v) - mx)
			}
			sum += mx + math.Log(z) - float64(row[tokens[c*ctx+p+1]])
			n++
		}
	}
	want := math.Exp(sum / float64(n))
	if res.Positions != n || math.Abs(res.PPL-want) > 1e-6*want {
		t.Errorf("PPL %v over %d positions, want %v over %d", res.PPL, res.Positions, want, n)
	}
	if !(res.PPL > 1) || !(res.PPLUnc > 0) {
		t.Errorf("PPL %v +/- %v: want > 1 and a positive spread", res.PPL, res.PPLUnc)
	}
	// The model against its own base: KLD at the quantization's level.
	b, err := ReadBase(bytes.NewReader(base.Bytes()), int64(base.Len()))
	if err != nil {
		t.Fatal(err)
	}
	s, err := KLDivergence(pm, b, o)
	if err != nil {
		t.Fatal(err)
	}
	if s.Positions != n || math.Abs(s.KLD) > 1e-5 || s.SameTop != 1 || math.Abs(s.PPL-res.PPL) > 1e-6*res.PPL {
		t.Errorf("self-comparison %+v; PPL %v", s, res.PPL)
	}

	nm, err := orchestrator.NewSynthetic(orchestrator.Config{Layers: 1, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16,
		Vocab: 96, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: ctx, MaxBatch: 8}, orchestrator.RecipeMixed(), 5, orchestrator.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer nm.Close()
	if _, err := FromOrchestrator(nm, e); err == nil {
		t.Error("a model without AllLogits was accepted")
	}
}
