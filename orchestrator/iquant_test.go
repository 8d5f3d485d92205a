package orchestrator

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/gguf"
)

// TestSyntheticGGUFIQ4_NL writes a synthetic model whose matrices are IQ4_NL (an untied IQ4_NL
// head, a Q8_0 v) with SyntheticGGUF, loads it, checks the tensors bound as IQ4_NL, and
// compares prefill (the GEMM: more than gemvTokens tokens) and decode (the GEMV) logits with
// the float64 reference, serially and on a 2-thread Runtime.
func TestSyntheticGGUFIQ4_NL(t *testing.T) {
	cfg := syntheticArchConfigs()[0]
	r := Recipe{Name: "iq4_nl", Q: IQ4_NL, K: IQ4_NL, V: Q8_0, O: IQ4_NL, Gate: IQ4_NL, Up: IQ4_NL, Down: IQ4_NL,
		Embedded: IQ4_NL, Untied: true, Output: IQ4_NL}
	b := gguf.NewBuilder()
	if err := SyntheticGGUF(b, cfg, r, 3); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "iq4_nl.gguf")
	fh, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteTo(fh); err != nil {
		t.Fatal(err)
	}
	if err := fh.Close(); err != nil {
		t.Fatal(err)
	}
	m, err := LoadGGUF(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Recipe.Q != IQ4_NL || m.Recipe.Down != IQ4_NL || m.Recipe.Embedded != IQ4_NL || m.Recipe.V != Q8_0 {
		t.Errorf("loaded recipe %+v, want IQ4_NL matrices and a Q8_0 v", m.Recipe)
	}
	if m.Embed.Type != IQ4_NL || len(m.Embed.IQ4NL) != cfg.Vocab*cfg.Hidden/kernelrt.QK {
		t.Errorf("embedding bound as %s with %d IQ4_NL blocks, want %d", m.Embed.Type, len(m.Embed.IQ4NL), cfg.Vocab*cfg.Hidden/kernelrt.QK)
	}
	m.Close()
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	prompt := []int32{7, 100, 299, 0, 12, 250, 3, 77}
	for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
		worst := runCompare(t, e, p, LoadOptions{KV: KVF32}, prompt, []int32{5, 6}, tolQuantized)
		t.Logf("%T: max relative error %.3g", e, worst)
	}
}

// TestIQ4_NLType: the loader maps GGUF's IQ4_NL to the decoder's type, 32 weights in 18 bytes.
func TestIQ4_NLType(t *testing.T) {
	q, ok := qtypeOf(gguf.TypeIQ4_NL)
	if !ok || q != IQ4_NL {
		t.Fatalf("qtypeOf(IQ4_NL) = %v, %v", q, ok)
	}
	if q.blockLen() != 32 || q.blockBytes() != 18 || q.act() != actQ8_0 || q.String() != "iq4_nl" {
		t.Errorf("IQ4_NL: blockLen %d, blockBytes %d, act %d, name %q", q.blockLen(), q.blockBytes(), q.act(), q)
	}
}
