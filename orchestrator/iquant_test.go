package orchestrator

import (
	"math"
	"testing"
	"unsafe"

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
	p := writeSynthetic(t, cfg, r, 3, "iq4_nl.gguf")
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

// testQuantQ3K stores v (a multiple of 256 floats) as ggml's block_q3_K with a plain
// quantizer (not ggml's): per sub-block of 16 a scale a = max|x|/4, the super-block's fp16
// d = max a / 31, 6-bit codes round(a/d) + 32, quants round(x / (d*code)) clamped to -4..3.
func testQuantQ3K(v []float32) []byte {
	out := make([]byte, len(v)/256*110)
	for b := 0; b < len(v)/256; b++ {
		x, blk := v[256*b:256*b+256], out[110*b:110*b+110]
		var a [16]float64
		amax := 0.0
		for s := range a {
			for _, xv := range x[16*s : 16*s+16] {
				a[s] = math.Max(a[s], math.Abs(float64(xv))/4)
			}
			amax = math.Max(amax, a[s])
		}
		d16 := kernelrt.FP32ToFP16(float32(amax / 31))
		d := float64(kernelrt.FP16ToFP32(d16))
		blk[108], blk[109] = byte(d16), byte(d16>>8)
		for s := range a {
			code := 0
			if d > 0 {
				code = int(math.Min(31, math.Round(a[s]/d)))
			}
			c := code + 32
			if s < 8 {
				blk[96+s] |= byte(c & 15)
			} else {
				blk[96+s-8] |= byte(c&15) << 4
			}
			blk[104+s%4] |= byte(c>>4) << (2 * (s / 4))
			for l := 0; l < 16; l++ {
				q := 0
				if code > 0 {
					q = int(math.Max(-4, math.Min(3, math.Round(float64(x[16*s+l])/(d*float64(code))))))
				}
				e := 16*s + l // = 128h + 32j + 16k + l
				h, j, k := e/128, e%128/32, e%32/16
				if q >= 0 { // q = low2 - 4*(1 - hbit): hbit set for q >= 0
					blk[16*k+l] |= 1 << (4*h + j)
				} else {
					q += 4
				}
				blk[32+32*h+16*k+l] |= byte(q) << (2 * j)
			}
		}
	}
	return out
}

// TestQ3KDequantizeMatchesReference: Q3_K super-blocks (random bytes, sane and NaN / Inf d)
// dequantize through kernelrt's Q3_K kernel (used in place at load) to exactly ggml's values
// (the float64 reference decoder), NaN where those are NaN (Inf*0 for a scale code of 32).
func TestQ3KDequantizeMatchesReference(t *testing.T) {
	const n = 6
	raw := make([]byte, n*110)
	s := uint64(9)
	for i := range raw {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		raw[i] = byte(s)
	}
	for b := 0; b < n; b++ { // sane fp16 d (random bytes could be NaN), then NaN and +Inf
		d := kernelrt.FP32ToFP16(0.01 * float32(b+1))
		if b >= 4 {
			d = []uint16{0x7e00, 0x7c00}[b-4]
		}
		raw[110*b+108], raw[110*b+109] = byte(d), byte(d>>8)
	}
	got := make([]float32, n*256)
	if err := kernelrt.DequantizeQ3K(got, unsafe.Slice((*kernelrt.BlockQ3K)(unsafe.Pointer(&raw[0])), n)); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, n*256)
	if !refBlocks(want, raw, gguf.TypeQ3_K) {
		t.Fatal("no reference decoder for Q3_K")
	}
	nan := 0
	for i := range got {
		if math.IsNaN(want[i]) {
			nan++
			if !math.IsNaN(float64(got[i])) {
				t.Fatalf("value %d: %g, want NaN", i, got[i])
			}
			continue
		}
		if float64(got[i]) != want[i] {
			t.Fatalf("value %d: %g, want %g", i, got[i], want[i])
		}
	}
	if nan < 256 {
		t.Errorf("%d NaN values, want at least the NaN-d super-block's 256", nan)
	}
}

// TestSyntheticGGUFQ3K writes a synthetic model with Q3_K matrices (and a Q6_K head) in a
// 256-wide shape with SyntheticGGUF, loads it (Q3_K used as stored, computed by the Q3_K
// kernels) and compares its logits, prefill (GEMM) and decode (GEMV), with the float64
// reference, which decodes the file's Q3_K blocks itself, serially and on 2 threads.
func TestSyntheticGGUFQ3K(t *testing.T) {
	cfg := Config{Arch: "qwen2", Layers: 2, Hidden: 256, Intermediate: 512, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 300,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}
	r := Recipe{Name: "q3_k", Q: Q3_K, K: Q3_K, V: Q3_K, O: Q3_K, Gate: Q3_K, Up: Q3_K, Down: Q3_K, Embedded: Q3_K}
	p := writeSynthetic(t, cfg, r, 5, "q3_k.gguf")
	m, err := LoadGGUF(p, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Recipe.Q != Q3_K || m.Embed.Type != Q3_K || len(m.Embed.Q3K) != cfg.Vocab*cfg.Hidden/kernelrt.QKK ||
		m.Layers[1].Down.Bytes() != cfg.Hidden*cfg.Intermediate/256*110 {
		t.Errorf("loaded recipe %+v, embedding %s with %d Q3_K blocks, ffn_down %d bytes", m.Recipe, m.Embed.Type, len(m.Embed.Q3K), m.Layers[1].Down.Bytes())
	}
	m.Close()
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
		worst := runCompare(t, e, p, LoadOptions{KV: KVF32}, []int32{7, 100, 299, 0, 12, 250, 3, 41, 42, 17}, []int32{5, 6}, tolQuantized)
		t.Logf("%T: max relative error %.3g", e, worst)
	}
}
