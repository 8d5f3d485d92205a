package main

import (
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// pplText is prose long enough for a few chunks of 32 tokens of the synthetic vocabulary.
const pplText = `It was a bright cold day in the harbour town, and the boats were coming in one after another
with the morning catch. The old man at the end of the pier counted them as he always did,
naming each one under his breath, and when the last of them had tied up he closed his book
and walked slowly back along the sea wall to the inn, where the fire was already lit.
`

type pplOut struct {
	Tokens    int       `json:"tokens"`
	Ctx       int       `json:"ctx"`
	Chunks    int       `json:"chunks"`
	Positions int       `json:"positions"`
	AddBOS    bool      `json:"add_bos"`
	PPL       float64   `json:"ppl"`
	PPLUnc    float64   `json:"ppl_uncertainty"`
	ChunkPPL  []float64 `json:"chunk_ppl"`
}

type klJSONOut struct {
	Positions      int     `json:"positions"`
	PPL            float64 `json:"ppl"`
	BasePPL        float64 `json:"base_ppl"`
	KLD            float64 `json:"kld"`
	KLDUnc         float64 `json:"kld_uncertainty"`
	SameTop        float64 `json:"same_top"`
	KLDPercentiles []struct {
		P     float64 `json:"p"`
		Value float64 `json:"value"`
	} `json:"kld_percentiles"`
	DeltaPPercentiles []struct {
		P     float64 `json:"p"`
		Value float64 `json:"value"`
	} `json:"delta_p_percentiles"`
}

// directPPL computes the perplexity of the first chunks chunks of ctx tokens of text in
// float64 from the model's logits, each chunk prefilled in pieces of batch tokens.
func directPPL(t *testing.T, model, text string, ctx, chunks, batch int) float64 {
	t.Helper()
	m, err := orchestrator.LoadGGUF(model, orchestrator.LoadOptions{MaxCtx: ctx, MaxBatch: batch, AllLogits: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(m.File())
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tok.Encode(strings.TrimSuffix(text, "\n"), tokenizer.EncodeOptions{AddSpecial: true})
	if err != nil {
		t.Fatal(err)
	}
	rt, err := newRuntime(m, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	V := m.Vocab()
	sum, n := 0.0, 0
	for c := range chunks {
		in := append([]int32(nil), ids[c*ctx:(c+1)*ctx]...)
		if tok.AddBOS() {
			in[0] = tok.BOS()
		}
		m.Reset()
		var all []float32
		for s := 0; s < ctx; s += batch {
			out, err := m.Prefill(rt, in[s:min(s+batch, ctx)])
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, out...)
		}
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
			sum += mx + math.Log(z) - float64(row[ids[c*ctx+p+1]])
			n++
		}
	}
	return math.Exp(sum / float64(n))
}

func TestPerplexityCommand(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(dir, "text.txt")
	if err := os.WriteFile(text, []byte(pplText), 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := orchestrator.Config{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 300,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}
	modelA := writeSynthetic(t, cfg, orchestrator.RecipeQ8_0(), 3)
	modelB := writeSynthetic(t, cfg, orchestrator.RecipeMixed(), 3)

	code, stdout, stderr := run("perplexity", "-model", modelA, "-f", text, "-ctx", "32", "-chunks", "4", "-batch", "8", "-threads", "1", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var res pplOut
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	want := directPPL(t, modelA, pplText, 32, 4, 8)
	if res.Ctx != 32 || res.Chunks != 4 || res.Positions != 4*15 || len(res.ChunkPPL) != 4 || res.AddBOS {
		t.Errorf("result %+v: want ctx 32, 4 chunks of 15 positions, no BOS", res)
	}
	if math.Abs(res.PPL-want) > 1e-6*want || res.ChunkPPL[3] != res.PPL || !(res.PPLUnc > 0) {
		t.Errorf("PPL %v +/- %v (running %v), want %v from the model's logits in float64", res.PPL, res.PPLUnc, res.ChunkPPL, want)
	}
	if !strings.Contains(stderr, "[1]") || !strings.Contains(stderr, "seconds per pass") {
		t.Errorf("stderr lacks the running PPL or the timing: %q", stderr)
	}

	// Text output, and the base file of the KL divergence.
	base := filepath.Join(dir, "base.kld")
	code, stdout, stderr = run("perplexity", "-model", modelA, "-f", text, "-ctx", "32", "-chunks", "4", "-batch", "8", "-threads", "1", "-kl-divergence-base", base)
	if code != 0 || !strings.HasPrefix(stdout, "[1]") || !strings.Contains(stdout, "[4]") || !strings.Contains(stdout, "Final estimate: PPL = ") {
		t.Fatalf("exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	if st, err := os.Stat(base); err != nil || st.Size() != 20+4*4*32+4*15*2*(300+4) {
		t.Fatalf("base file: %v, %v", st, err)
	}

	// Model B against A's base: its PPL is its own perplexity run's, the base PPL A's.
	code, stdout, stderr = run("perplexity", "-model", modelB, "-f", text, "-ctx", "32", "-chunks", "4", "-batch", "8", "-threads", "1", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var resB pplOut
	json.Unmarshal([]byte(stdout), &resB)
	code, stdout, stderr = run("perplexity", "-model", modelB, "-kl-divergence", "-kl-divergence-base", base, "-f", text, "-chunks", "4", "-batch", "8", "-threads", "1", "-json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	var kl klJSONOut
	if err := json.Unmarshal([]byte(stdout), &kl); err != nil {
		t.Fatalf("stdout %q: %v", stdout, err)
	}
	if kl.Positions != 60 || math.Abs(kl.PPL-resB.PPL) > 1e-6*resB.PPL || math.Abs(kl.BasePPL-res.PPL) > 1e-3*res.PPL {
		t.Errorf("KL run: %d positions, PPL %v, base PPL %v; want 60, %v (B's run), %v (A's run)", kl.Positions, kl.PPL, kl.BasePPL, resB.PPL, res.PPL)
	}
	if !(kl.KLD > 1e-4) || !(kl.KLDUnc > 0) || kl.SameTop <= 0 || kl.SameTop > 1 || len(kl.KLDPercentiles) != 10 || len(kl.DeltaPPercentiles) != 13 {
		t.Errorf("KL figures %+v", kl)
	}
	// A against its own base: KLD at the 16-bit quantization's level.
	code, stdout, stderr = run("perplexity", "-model", modelA, "-kl-divergence", "-kl-divergence-base", base, "-batch", "8", "-threads", "1")
	if code != 0 || !strings.Contains(stdout, "Mean    KLD:") || !strings.Contains(stdout, "Same top p: 100.000") {
		t.Errorf("self-comparison: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}

	// Refusals: another text, another context, too few tokens.
	other := filepath.Join(dir, "other.txt")
	os.WriteFile(other, []byte(strings.Repeat("a different text altogether, ", 40)), 0o644)
	short := filepath.Join(dir, "short.txt")
	os.WriteFile(short, []byte("Too short a text."), 0o644)
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-model", modelB, "-kl-divergence", "-kl-divergence-base", base, "-f", other, "-chunks", "4"}, 1, "token 0 of this run's 128 tokens"},
		{[]string{"-model", modelB, "-kl-divergence", "-kl-divergence-base", base, "-f", text}, 1, "but the base file holds 128 tokens (4 chunks of 32)"},
		{[]string{"-model", modelB, "-kl-divergence", "-kl-divergence-base", base, "-ctx", "16"}, 1, "-ctx 16: the base file"},
		{[]string{"-model", modelB, "-kl-divergence", "-kl-divergence-base", base, "-chunks", "5"}, 1, "-chunks 5: the base file"},
		{[]string{"-model", modelB, "-kl-divergence", "-kl-divergence-base", text}, 1, "not a base file"},
		{[]string{"-model", modelA, "-f", short, "-ctx", "32"}, 1, "at least 64 tokens to evaluate perplexity with a context of 32; the text tokenizes to only"},
		{[]string{"-model", modelA, "-f", text, "-ctx", "128"}, 1, "exceeds the model's context_length = 64"},
		{[]string{"-model", modelA, "-f", text, "-ctx", "2"}, 2, "-ctx must be 6 to"},
		{[]string{"-model", modelA}, 2, "-f FILE is required"},
		{[]string{"-f", text}, 2, "-model is required"},
		{[]string{"-model", modelA, "-kl-divergence"}, 2, "-kl-divergence needs -kl-divergence-base"},
		{[]string{"-model", modelA, "-f", text, "-chunks", "-2"}, 2, "-chunks must be -1"},
		{[]string{"-model", modelA, "-f", text, "-kl-divergence-base", text}, 2, "refusing to overwrite"},
	} {
		code, _, stderr := run(append([]string{"perplexity", "-threads", "1"}, c.args...)...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("perplexity %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if _, err := os.Stat(base); err != nil {
		t.Errorf("a refused run removed the base file: %v", err)
	}
}
