package orchestrator

import (
	"bytes"
	"encoding/binary"
	"math"
	"strings"
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/gguf"
)

// testQuantIQ4XS stores v (a multiple of 256 floats) as ggml's block_iq4_xs with kernelrt's
// IQ4_XS quantizer (not ggml's; its bytes are ggml's layout).
func testQuantIQ4XS(t testing.TB, v []float32) []byte {
	t.Helper()
	q := make([]kernelrt.BlockIQ4_XS, len(v)/256)
	if err := kernelrt.QuantizeIQ4_XS(q, v); err != nil {
		t.Fatal(err)
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&q[0])), len(q)*136)
}

// randBytes returns n xorshift bytes.
func randBytes(n int, s uint64) []byte {
	raw := make([]byte, n)
	for i := range raw {
		s ^= s << 13
		s ^= s >> 7
		s ^= s << 17
		raw[i] = byte(s)
	}
	return raw
}

// TestIQ4XSDequantizeMatchesReference: random super-blocks (random scales and nibbles, d from
// fp16 subnormals to the largest fp16), NaN and infinite d, dequantize through kernelrt's IQ4_XS
// kernel (used in place at load) to exactly ggml's values, d*(ls-32) in float64 times the table
// value (the independent decoder of the float64 reference), NaN where that is NaN (Inf*0 for
// ls = 32 included).
func TestIQ4XSDequantizeMatchesReference(t *testing.T) {
	ds := []uint16{1, 0x0400, kernelrt.FP32ToFP16(1e-3), kernelrt.FP32ToFP16(0.5), kernelrt.FP32ToFP16(7.77),
		kernelrt.FP32ToFP16(2047), 0x7bff, 0xfbff, 0x7e00, 0x7c00}
	raw := randBytes(len(ds)*136, 11)
	for b, d := range ds {
		binary.LittleEndian.PutUint16(raw[136*b:], d)
	}
	raw[136*9+2], raw[136*9+3], raw[136*9+4] = 0xaa, 0xaa, 0 // +Inf d: sub-blocks 0 and 1 have ls = 32
	got := make([]float32, len(ds)*256)
	if err := kernelrt.DequantizeIQ4_XS(got, unsafe.Slice((*kernelrt.BlockIQ4_XS)(unsafe.Pointer(&raw[0])), len(ds))); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, len(ds)*256)
	if !refBlocks(want, raw, gguf.TypeIQ4_XS) {
		t.Fatal("no reference decoder for IQ4_XS")
	}
	nan := 0
	for e, w := range want {
		g := float64(got[e])
		if math.IsNaN(w) {
			nan++
			if !math.IsNaN(g) {
				t.Fatalf("weight %d = %g, want NaN", e, g)
			}
			continue
		}
		if g != w {
			t.Fatalf("weight %d (super-block %d) = %g, want %g", e, e/256, g, w)
		}
	}
	if nan < 256+64 {
		t.Errorf("%d NaN weights, want the NaN-d super-block's 256 and the Inf-d one's 64 of ls 32", nan)
	}
}

// iq4XSRecipe is a synthetic IQ4_XS file's mix as llama.cpp's quantizer writes one: IQ4_XS
// matrices, an IQ4_NL v (its fallback type), a Q8_0 head.
func iq4XSRecipe() Recipe {
	return Recipe{Name: "iq4_xs", Q: IQ4_XS, K: IQ4_XS, V: IQ4_NL, O: IQ4_XS, Gate: IQ4_XS, Up: IQ4_XS, Down: IQ4_XS,
		Embedded: IQ4_XS, Untied: true, Output: Q8_0}
}

var iq4XSConfig = Config{Arch: "qwen2", Layers: 2, Hidden: 256, Intermediate: 512, Heads: 4, KVHeads: 2, HeadDim: 64, Vocab: 300,
	RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}

// TestSyntheticGGUFIQ4XS writes a synthetic IQ4_XS model with SyntheticGGUF, loads it (IQ4_XS
// used as stored, computed by the IQ4_XS kernels against Q8_K activations), checks the binding
// and the reported recipe, and compares prefill (GEMM) and decode (GEMV) logits with the float64
// reference, which decodes the file's IQ4_XS blocks itself (ggml's exact d*(ls-32)), serially
// and on a 2-thread Runtime, within tolQuantized.
func TestSyntheticGGUFIQ4XS(t *testing.T) {
	cfg, r := iq4XSConfig, iq4XSRecipe()
	p := writeSynthetic(t, cfg, r, 7, "iq4_xs.gguf")
	for _, mw := range []bool{false, true} {
		m, err := LoadGGUF(p, LoadOptions{MapWeights: mw})
		if err != nil {
			t.Fatal(err)
		}
		if m.Recipe.Q != IQ4_XS || m.Recipe.Down != IQ4_XS || m.Recipe.Embedded != IQ4_XS || m.Recipe.V != IQ4_NL || m.Recipe.Output != Q8_0 {
			t.Errorf("loaded recipe %+v, want IQ4_XS matrices, an IQ4_NL v, a Q8_0 head", m.Recipe)
		}
		if !strings.Contains(m.Recipe.Name, "iq4_xsx12") || !strings.Contains(m.Recipe.Name, "embd iq4_xs") {
			t.Errorf("recipe name %q, want iq4_xs counted", m.Recipe.Name)
		}
		if m.Embed.Type != IQ4_XS || len(m.Embed.IQ4XS) != cfg.Vocab*cfg.Hidden/kernelrt.QKK || m.Embed.Mapped != mw {
			t.Errorf("embedding bound as %s with %d IQ4_XS blocks (mapped %v), want %d, mapped %v", m.Embed.Type, len(m.Embed.IQ4XS), m.Embed.Mapped, cfg.Vocab*cfg.Hidden/kernelrt.QKK, mw)
		}
		if d := m.Layers[1].Down; d.Type != IQ4_XS || d.Bytes() != cfg.Hidden*cfg.Intermediate/256*136 {
			t.Errorf("ffn_down bound as %s, %d bytes", d.Type, d.Bytes())
		}
		m.Close()
	}
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

// TestIQ4XSLargeScaleLoad: a super-block with the largest fp16 d and a sub-block scale code of
// -32 (scale -32*65504, beyond fp16, which the former load-time conversion to IQ4_NL refused)
// loads, and its row dequantizes to ggml's finite values.
func TestIQ4XSLargeScaleLoad(t *testing.T) {
	b := gguf.NewBuilder()
	if err := SyntheticGGUF(b, iq4XSConfig, iq4XSRecipe(), 7); err != nil {
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
	data, err := f.TensorData("token_embd.weight")
	if err != nil {
		t.Fatal(err)
	}
	blk := data[136*3:] // super-block 3: d = 65504, sub-block 0's ls = 0 (scale -32*65504)
	blk[0], blk[1], blk[2], blk[4] = 0xff, 0x7b, blk[2]&^3, blk[4]&^15
	m, err := NewFromGGUF(f, LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := make([]float32, 256)
	if err := kernelrt.DequantizeIQ4_XS(got, m.Embed.IQ4XS[3:4]); err != nil {
		t.Fatal(err)
	}
	want := make([]float64, 256)
	refBlocks(want, blk[:136], gguf.TypeIQ4_XS)
	for e := range got {
		if float64(got[e]) != want[e] || math.IsInf(want[e], 0) {
			t.Fatalf("weight %d = %g, want %g (finite)", e, got[e], want[e])
		}
	}
}

// TestIQ4XSType: GGUF's IQ4_XS maps to the decoder's IQ4_XS, super-blocks of 256 in ggml's
// 136 bytes, multiplying Q8_K activations.
func TestIQ4XSType(t *testing.T) {
	q, ok := qtypeOf(gguf.TypeIQ4_XS)
	if !ok || q != IQ4_XS {
		t.Fatalf("qtypeOf(IQ4_XS) = %v, %v", q, ok)
	}
	if q.blockLen() != 256 || q.blockBytes() != 136 || q.act() != actQ8K || q.String() != "iq4_xs" {
		t.Errorf("IQ4_XS: blockLen %d, blockBytes %d, act %d, name %q", q.blockLen(), q.blockBytes(), q.act(), q)
	}
}

// TestReferenceForwardIQ4XSMixes: files in the type mixes llama.cpp's quantizer writes for
// IQ4_XS (IQ4_XS matrices; Q5_K for attn_v when GQA >= 4 and for the first layers' ffn_down;
// IQ4_NL where a row is not a multiple of 256; a Q6_K or Q8_0 head; F32 norms) load and match
// the float64 reference, serially and on a Runtime, within the K-quant mixes' tolerance.
func TestReferenceForwardIQ4XSMixes(t *testing.T) {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	iq4xs := gguf.TypeIQ4_XS
	sets := []testTypes{
		{"iq4_xs-like-untied-q6_k", iq4xs, iq4xs, iq4xs, q5k, iq4xs, iq4xs, iq4xs, q5k, q6k},
		{"iq4_xs-iq4_nl-q8-tied", iq4xs, iq4nl, iq4xs, q8, iq4xs, iq4xs, iq4nl, iq4xs, tied},
		{"iq4_xs-untied-q8", iq4xs, iq4xs, iq4xs, iq4xs, iq4xs, iq4xs, iq4xs, iq4xs, q8},
	}
	dir := t.TempDir()
	for ti, ty := range sets {
		for _, arch := range []string{"qwen2", "llama"} {
			if arch == "llama" && (ti > 0 || testing.Short()) {
				continue // llama's layout once, and not in the race run
			}
			t.Run(arch+"/"+ty.name, func(t *testing.T) {
				tm := testModel{shape: kTestShape, types: ty, seed: uint64(50 + ti), arch: arch}
				path := tm.write(t, dir)
				m, err := LoadGGUF(path, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if m.Recipe.Embedded != IQ4_XS || m.Recipe.K != IQ4_XS || m.Embed.Type != IQ4_XS {
					t.Errorf("recipe %+v, embedding bound as %s: want IQ4_XS", m.Recipe, m.Embed.Type)
				}
				m.Close()
				for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
					worst := runCompare(t, e, path, LoadOptions{}, []int32{3, 70, 11, 0, 41, 29}, []int32{8, 64, 1}, tolQuantizedWide)
					t.Logf("%T: max relative error %.3g", e, worst)
				}
			})
		}
	}
}
