package orchestrator

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/kernelrt/kernelrt/gguf"
)

// TestSynthOptions checks SyntheticGGUFWith's options on a two-layer f16 file: codebook rows
// (at most Codebook distinct 256-value rows in the layers, distinct embedding rows), layers
// sharing layer 0's bytes, a scaled output norm, and the options' argument checks.
func TestSynthOptions(t *testing.T) {
	cfg := Config{Arch: "qwen3", Layers: 2, Hidden: 256, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 300,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}
	write := func(o SynthOptions) *gguf.File {
		t.Helper()
		b := gguf.NewBuilder()
		if err := SyntheticGGUFWith(b, cfg, RecipeF16(), 3, o); err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if _, err := b.WriteTo(&buf); err != nil {
			t.Fatal(err)
		}
		f, err := gguf.Parse(buf.Bytes())
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	data := func(f *gguf.File, name string) []byte {
		t.Helper()
		b, err := f.TensorData(name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	rows := func(b []byte) int {
		seen := map[string]bool{}
		for i := 0; i < len(b); i += 512 {
			seen[string(b[i:i+512])] = true
		}
		return len(seen)
	}
	plain := write(SynthOptions{})
	f := write(SynthOptions{Codebook: 4, SharedLayers: true, OutputNormScale: 6})
	for _, n := range []string{"attn_q", "attn_k", "ffn_up", "ffn_down"} {
		a, b := data(f, "blk.0."+n+".weight"), data(f, "blk.1."+n+".weight")
		if !bytes.Equal(a, b) {
			t.Errorf("%s: layers 0 and 1 differ with SharedLayers", n)
		}
		if r := rows(a); r > 4 || r < 2 {
			t.Errorf("%s: %d distinct rows with a codebook of 4", n, r)
		}
		if r := rows(data(plain, "blk.0."+n+".weight")); r != len(a)/512 {
			t.Errorf("%s without options: %d distinct rows of %d", n, r, len(a)/512)
		}
	}
	if r := rows(data(f, "token_embd.weight")); r != cfg.Vocab {
		t.Errorf("token_embd: %d distinct rows of %d (the embedding is not drawn from the codebook)", r, cfg.Vocab)
	}
	if bytes.Equal(data(plain, "blk.0.attn_q.weight"), data(plain, "blk.1.attn_q.weight")) {
		t.Error("layers 0 and 1 are equal without SharedLayers")
	}
	n0, n1 := data(plain, "output_norm.weight"), data(f, "output_norm.weight")
	a, b := math.Float32frombits(binary.LittleEndian.Uint32(n0)), math.Float32frombits(binary.LittleEndian.Uint32(n1))
	if d := b - 6*a; d > 1e-5 || d < -1e-5 {
		t.Errorf("output_norm[0] %v with OutputNormScale 6, %v without", b, a)
	}
	for _, o := range []SynthOptions{{Codebook: -1}, {OutputNormScale: -2}} {
		if err := SyntheticGGUFWith(gguf.NewBuilder(), cfg, RecipeF16(), 3, o); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
	if err := SyntheticGGUFWith(gguf.NewBuilder(), cfg, RecipeQ8_0(), 3, SynthOptions{Codebook: 4}); err == nil {
		t.Error("a codebook of Q8_0 weights accepted")
	}
}
