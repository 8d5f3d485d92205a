package orchestrator

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt"
)

func tinyConfig() Config {
	return Config{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 1000, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 96, MaxBatch: 16}
}

func newTiny(t *testing.T, r Recipe) *Model { return newTinyKV(t, r, KVF16) }

// newTinyKV is newTiny with a cache of type kv.
func newTinyKV(t *testing.T, r Recipe, kv KVType) *Model {
	t.Helper()
	c := tinyConfig()
	c.KV = kv
	m, err := NewSynthetic(c, r, 7, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

func newRT(t *testing.T) *kernelrt.Runtime {
	t.Helper()
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	// Split every op, however small, so the pooled path really runs on both workers.
	for op := kernelrt.Op(0); op < kernelrt.Op(kernelrt.NumOps); op++ {
		if err := rt.SetMinElements(op, 1, 1); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

// TestSyntheticLlama: a synthetic llama model (no biases, RoPE on adjacent pairs) runs
// pooled exactly as serially, and its GGUF round trip loads as llama.
func TestSyntheticLlama(t *testing.T) {
	c := tinyConfig()
	c.Arch = "llama"
	ms, err := NewSynthetic(c, RecipeMixed(), 3, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer ms.Close()
	if ms.Layers[0].QKVBias != nil {
		t.Fatal("a llama model got q/k/v biases")
	}
	mp, _ := NewSynthetic(c, RecipeMixed(), 3, BuildOptions{})
	defer mp.Close()
	prompt := []int32{3, 1, 4, 1, 5}
	ls, err := ms.Prefill(kernelrt.Serial{}, prompt)
	if err != nil {
		t.Fatal(err)
	}
	lp, err := mp.Prefill(newRT(t), prompt)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(ls, lp); d > 1e-4 {
		t.Fatalf("llama pooled vs serial: %g", d)
	}
}

// The pooled forward pass is the serial one split by rows/tokens/heads: the logits agree,
// for every KV cache type.
func TestPooledMatchesSerial(t *testing.T) {
	for _, r := range []Recipe{RecipeQ8_0(), RecipeMixed()} {
		for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
			t.Run(r.Name+"/"+kv.String(), func(t *testing.T) {
				ms, mp := newTinyKV(t, r, kv), newTinyKV(t, r, kv)
				rt := newRT(t)
				prompt := []int32{3, 1, 4, 1, 5, 9, 2}
				ls, err := ms.Prefill(kernelrt.Serial{}, prompt)
				if err != nil {
					t.Fatal(err)
				}
				want := slices.Clone(ls)
				lp, err := mp.Prefill(rt, prompt)
				if err != nil {
					t.Fatal(err)
				}
				if d := maxDiff(want, lp); d > 1e-3 {
					t.Fatalf("prefill logits differ by %g", d)
				}
				for step := 0; step < 4; step++ {
					ls, err = ms.Decode(kernelrt.Serial{}, int32(10+step))
					if err != nil {
						t.Fatal(err)
					}
					want = append(want[:0], ls...)
					lp, err = mp.Decode(rt, int32(10+step))
					if err != nil {
						t.Fatal(err)
					}
					if d := maxDiff(want, lp); d > 1e-3 {
						t.Fatalf("decode step %d logits differ by %g", step, d)
					}
				}
				for _, v := range lp {
					if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
						t.Fatalf("non-finite logit %v", v)
					}
				}
			})
		}
	}
}

// Prefilling T tokens at once equals decoding them one by one (the causal mask and the KV
// cache make the last position's logits the same), up to the GEMM/GEMV summation order and
// the prefill and decode attention kernels' orders, for every KV cache type, serially and on
// a Runtime. 70 tokens: several 16-token prefill tiles, 64-key blocks and MaxBatch chunks.
func TestPrefillEqualsDecodes(t *testing.T) {
	prompt := make([]int32, 70)
	for i := range prompt {
		prompt[i] = int32((i*37 + 11) % 1000)
	}
	for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
		for _, e := range []kernelrt.Ops{kernelrt.Serial{}, newRT(t)} {
			a, b := newTinyKV(t, RecipeQ8_0(), kv), newTinyKV(t, RecipeQ8_0(), kv)
			la, err := a.Prefill(e, prompt)
			if err != nil {
				t.Fatal(err)
			}
			var lb []float32
			for _, id := range prompt {
				if lb, err = b.Decode(e, id); err != nil {
					t.Fatal(err)
				}
			}
			scale := 0.0
			for _, v := range lb {
				scale = math.Max(scale, math.Abs(float64(v)))
			}
			if d := maxDiff(la, lb); d > 1e-3*math.Max(1, scale) {
				t.Errorf("kv %s %T: prefill vs token-by-token decode: logits differ by %g (scale %g)", kv, e, d, scale)
			}
		}
	}
}

func TestDecodeZeroAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	m := newTiny(t, RecipeMixed())
	rt := newRT(t)
	if _, err := m.Decode(rt, 1); err != nil { // warm-up
		t.Fatal(err)
	}
	tok := int32(0)
	n := testing.AllocsPerRun(50, func() {
		tok++
		if _, err := m.Decode(rt, tok); err != nil {
			t.Fatal(err)
		}
	})
	if n != 0 {
		t.Fatalf("%v heap allocations per decoded token, want 0", n)
	}
}

// Decoding past MaxCtx is an error and leaves the cache as it was.
func TestMaxContext(t *testing.T) {
	m := newTiny(t, RecipeQ8_0())
	prompt := make([]int32, m.Cfg.MaxCtx-1)
	for i := range prompt {
		prompt[i] = int32(i % m.Cfg.Vocab)
	}
	if _, err := m.Prefill(kernelrt.Serial{}, prompt); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Decode(kernelrt.Serial{}, 5); err != nil {
		t.Fatalf("last position: %v", err)
	}
	kc := m.kv.layerK(0)
	pos := m.Pos()
	if _, err := m.Decode(kernelrt.Serial{}, 6); err == nil || !strings.Contains(err.Error(), "MaxCtx") {
		t.Fatalf("decode past MaxCtx: err = %v", err)
	}
	if _, err := m.Prefill(kernelrt.Serial{}, []int32{1, 2}); err == nil {
		t.Fatal("prefill past MaxCtx succeeded")
	}
	if m.Pos() != pos || !slices.Equal(kc, m.kv.layerK(0)) {
		t.Fatal("a refused decode changed the KV cache")
	}
	m.Reset()
	if _, err := m.Decode(kernelrt.Serial{}, 6); err != nil {
		t.Fatalf("after Reset: %v", err)
	}
}

func TestBadInput(t *testing.T) {
	m := newTiny(t, RecipeQ8_0())
	if _, err := m.Decode(kernelrt.Serial{}, int32(m.Cfg.Vocab)); err == nil || !strings.Contains(err.Error(), "vocabulary") {
		t.Fatalf("token == vocab: err = %v", err)
	}
	if _, err := m.Prefill(kernelrt.Serial{}, nil); err == nil {
		t.Fatal("empty prefill succeeded")
	}
	bad := tinyConfig()
	bad.Heads = 3
	if _, err := NewSynthetic(bad, RecipeQ8_0(), 1, BuildOptions{}); err == nil {
		t.Fatal("heads not a multiple of KV heads accepted")
	}
	bad = tinyConfig()
	bad.Hidden = 100
	if err := bad.Validate(); err == nil || !strings.Contains(err.Error(), "Hidden") {
		t.Fatalf("hidden 100: err = %v", err)
	}
}

func TestWeightBytesQwen2(t *testing.T) {
	// 0.5B at Q8_0 reads about 525 MB per token (../shared/formats.md); computed without
	// building the model: every matrix's blocks plus the tied head.
	c := Qwen2_0_5B()
	qd, kd, vd := c.qkvDims()
	per := ((qd+kd+vd)*c.Hidden + c.Hidden*qd + 2*c.Intermediate*c.Hidden + c.Hidden*c.Intermediate) / 32 * 34
	total := c.Layers*per + c.Vocab*c.Hidden/32*34
	if total < 520e6 || total > 530e6 {
		t.Fatalf("Qwen2-0.5B Q8_0 weight bytes = %d, want about 525 MB", total)
	}
}

// TestConfigLimits: sizes that cannot be planned (or would overflow) are errors, not a
// silent overflow or an attempt to map petabytes.
func TestConfigLimits(t *testing.T) {
	for _, tc := range []struct {
		name string
		mod  func(*Config)
		want string
	}{
		{"MaxCtx near MaxInt", func(c *Config) { c.MaxCtx = math.MaxInt - 3 }, "MaxCtx"},
		{"MaxCtx 2^24+1", func(c *Config) { c.MaxCtx = 1<<24 + 1 }, "MaxCtx"},
		{"MaxBatch huge", func(c *Config) { c.MaxBatch = 1 << 30 }, "MaxBatch"},
		{"KV cache over 1 TiB", func(c *Config) { c.Layers, c.MaxCtx = 4096, 1<<24 }, "KV cache"},
	} {
		c := Qwen2_0_5B()
		tc.mod(&c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Validate = %v, want an error naming %s", tc.name, err, tc.want)
		}
		if _, err := NewSynthetic(c, RecipeQ8_0(), 1, BuildOptions{}); err == nil {
			t.Errorf("%s: NewSynthetic succeeded", tc.name)
		}
	}
}

// layerK returns a copy of layer l's key cache bytes (every slot), in any cache type.
func (kv *kvCache) layerK(l int) []byte {
	switch kv.typ {
	case KVF32:
		return slices.Clone(bytesOf(kv.f32[l][0]))
	case KVF16:
		return slices.Clone(bytesOf(kv.f16[l][0]))
	}
	return slices.Clone(bytesOf(kv.q8[l][0]))
}
