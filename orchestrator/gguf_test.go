package orchestrator

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/gguf"
)

// tensorBytes is the data size of a tensor of typ and dims.
func tensorBytes(typ gguf.GGMLType, dims []uint64) int {
	n := 1
	for _, d := range dims {
		n *= int(d)
	}
	return n / typ.BlockSize() * typ.TypeSize()
}

// retype returns an editTensor that gives tensor name a new type and/or dims (nil = keep),
// with zero data of the right size.
func retype(name string, typ gguf.GGMLType, dims []uint64) func(string, *gguf.GGMLType, *[]uint64, *[]byte) bool {
	return func(n string, t *gguf.GGMLType, d *[]uint64, data *[]byte) bool {
		if n != name {
			return true
		}
		if typ != 0xffff {
			*t = typ
		}
		if dims != nil {
			*d = dims
		}
		*data = make([]byte, tensorBytes(*t, *d))
		return true
	}
}

func drop(name string) func(string, *gguf.GGMLType, *[]uint64, *[]byte) bool {
	return func(n string, _ *gguf.GGMLType, _ *[]uint64, _ *[]byte) bool { return n != name }
}

func setKV(key string, v gguf.Value) func(map[string]gguf.Value, *[]string) {
	return func(kv map[string]gguf.Value, order *[]string) {
		if _, ok := kv[key]; !ok {
			*order = append(*order, key)
		}
		kv[key] = v
	}
}

func delKV(key string) func(map[string]gguf.Value, *[]string) {
	return func(kv map[string]gguf.Value, _ *[]string) { delete(kv, key) }
}

// TestLoadErrors feeds the loader bad files, one problem each, and checks that each is an
// error naming the problem (never a panic).
func TestLoadErrors(t *testing.T) {
	s := testShapes[0] // hidden 64, 2 layers, inter 96, heads 4, kv 2 (head_dim 16), vocab 100
	base := testModel{shape: s, types: testTypeSets[3], seed: 3}
	const keep = gguf.GGMLType(0xffff)
	cases := []struct {
		name    string
		edit    func(*testModel)
		raw     func([]byte) []byte // applied to the file's bytes
		opts    LoadOptions
		want    []string
		content bool // errors.Is(err, ErrModel)
	}{
		{name: "missing weight", edit: func(m *testModel) { m.editTensor = drop("blk.1.ffn_up.weight") },
			want: []string{`missing tensor "blk.1.ffn_up.weight"`}, content: true},
		{name: "missing bias", edit: func(m *testModel) { m.editTensor = drop("blk.0.attn_k.bias") },
			want: []string{`missing tensor "blk.0.attn_k.bias"`}, content: true},
		{name: "missing output_norm", edit: func(m *testModel) { m.editTensor = drop("output_norm.weight") },
			want: []string{`missing tensor "output_norm.weight"`}, content: true},
		{name: "missing embedding", edit: func(m *testModel) { m.editTensor = drop("token_embd.weight") },
			want: []string{`missing tensor "token_embd.weight"`}, content: true},
		{name: "duplicate tensor", edit: func(m *testModel) {
			m.extra = func(b *gguf.Builder) error {
				return b.AddTensor("blk.0.attn_q.weighX", gguf.TypeF32, []uint64{4}, make([]byte, 16))
			}
		}, raw: func(b []byte) []byte {
			return bytes.Replace(b, []byte("blk.0.attn_q.weighX"), []byte("blk.0.attn_q.weight"), 1)
		}, want: []string{"duplicate", "blk.0.attn_q.weight"}},
		{name: "wrong k rows", edit: func(m *testModel) {
			m.editTensor = retype("blk.0.attn_k.weight", keep, []uint64{64, 64})
		}, want: []string{`"blk.0.attn_k.weight" has dims [64 64], want [64 32]`, "head_count_kv=2"}, content: true},
		{name: "transposed down", edit: func(m *testModel) {
			m.editTensor = retype("blk.1.ffn_down.weight", keep, []uint64{64, 96})
		}, want: []string{`"blk.1.ffn_down.weight" has dims [64 96], want [96 64]`}, content: true},
		{name: "3-d weight", edit: func(m *testModel) {
			m.editTensor = retype("blk.1.ffn_gate.weight", keep, []uint64{64, 48, 2})
		}, want: []string{`"blk.1.ffn_gate.weight" has dims [64 48 2], want [64 96]`}, content: true},
		{name: "norm length", edit: func(m *testModel) {
			m.editTensor = retype("blk.0.ffn_norm.weight", keep, []uint64{32})
		}, want: []string{`"blk.0.ffn_norm.weight" has dims [32], want [64]`}, content: true},
		{name: "vocab disagrees with embedding", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.vocab_size", gguf.Uint32(99))
		}, want: []string{`"token_embd.weight" has dims [64 100], want [64 99]`}, content: true},
		{name: "output rows", edit: func(m *testModel) {
			m.types.output = gguf.TypeQ8_0
			m.editTensor = retype("output.weight", keep, []uint64{64, 101})
		}, want: []string{`"output.weight" has dims [64 101], want [64 100]`}, content: true},
		{name: "unsupported weight type", edit: func(m *testModel) {
			m.editTensor = retype("blk.0.ffn_down.weight", gguf.TypeMXFP4, nil)
		}, want: []string{`"blk.0.ffn_down.weight" has type MXFP4`, "Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, BF16"}, content: true},
		{name: "k-quant of other k-quants", edit: func(m *testModel) {
			m.shape.hidden, m.shape.heads, m.shape.kvHeads, m.shape.inter = 256, 4, 2, 256
			m.editTensor = retype("blk.1.attn_v.weight", gguf.TypeIQ2_XXS, nil)
		}, want: []string{`"blk.1.attn_v.weight" has type IQ2_XXS`, "cannot compute with"}, content: true},
		{name: "activation type as weights", edit: func(m *testModel) {
			m.shape.hidden, m.shape.heads, m.shape.kvHeads, m.shape.inter = 256, 4, 2, 256
			m.editTensor = retype("token_embd.weight", gguf.TypeQ8_K, nil)
		}, want: []string{`"token_embd.weight" has type Q8_K`}, content: true},
		{name: "quantized norm", edit: func(m *testModel) {
			m.editTensor = retype("blk.1.attn_norm.weight", gguf.TypeQ8_0, nil)
		}, want: []string{`"blk.1.attn_norm.weight" has type Q8_0`, "must be F32, F16 or BF16"}, content: true},
		{name: "no architecture", edit: func(m *testModel) { m.editKV = delKV("general.architecture") },
			want: []string{`missing metadata key "general.architecture"`}, content: true},
		{name: "gemma architecture", edit: func(m *testModel) { m.editKV = setKV("general.architecture", gguf.String("gemma")) },
			want: []string{`"gemma"`, "not supported (supported: gemma2, gemma3, llama, qwen2, qwen3)"}, content: true},
		{name: "gemma3 without sliding_window", edit: func(m *testModel) {
			m.arch, m.headDim, m.editKV = "gemma3", 32, delKV("gemma3.attention.sliding_window")
		}, want: []string{`missing metadata key "gemma3.attention.sliding_window"`}, content: true},
		{name: "gemma2 negative soft-cap", edit: func(m *testModel) {
			m.arch, m.headDim, m.window, m.finalCap = "gemma2", 32, 3, -2
		}, want: []string{"gemma2.final_logit_softcapping = -2 must be positive and finite"}, content: true},
		{name: "yarn rope scaling", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.rope.scaling.type", gguf.String("yarn"))
			m.ropeScale = 4
		}, want: []string{`qwen2.rope.scaling.type = "yarn" with factor 4: only linear RoPE scaling is supported`}, content: true},
		{name: "rope scaling type not a string", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.rope.scaling.type", gguf.Uint32(1))
		}, want: []string{`metadata key "qwen2.rope.scaling.type" is uint32, want a string`}, content: true},
		{name: "qwen2 keys under llama", edit: func(m *testModel) { m.editKV = setKV("general.architecture", gguf.String("llama")) },
			want: []string{`missing metadata key "llama.embedding_length"`}, content: true},
		{name: "no block_count", edit: func(m *testModel) { m.editKV = delKV("qwen2.block_count") },
			want: []string{`missing metadata key "qwen2.block_count"`}, content: true},
		{name: "no embedding_length", edit: func(m *testModel) { m.editKV = delKV("qwen2.embedding_length") },
			want: []string{`missing metadata key "qwen2.embedding_length"`}, content: true},
		{name: "no feed_forward_length", edit: func(m *testModel) { m.editKV = delKV("qwen2.feed_forward_length") },
			want: []string{`missing metadata key "qwen2.feed_forward_length"`}, content: true},
		{name: "no head_count", edit: func(m *testModel) { m.editKV = delKV("qwen2.attention.head_count") },
			want: []string{`missing metadata key "qwen2.attention.head_count"`}, content: true},
		{name: "no rms epsilon", edit: func(m *testModel) { m.editKV = delKV("qwen2.attention.layer_norm_rms_epsilon") },
			want: []string{`missing metadata key "qwen2.attention.layer_norm_rms_epsilon"`}, content: true},
		{name: "no context_length", edit: func(m *testModel) { m.editKV = delKV("qwen2.context_length") },
			want: []string{`missing metadata key "qwen2.context_length"`}, content: true},
		{name: "string embedding_length", edit: func(m *testModel) { m.editKV = setKV("qwen2.embedding_length", gguf.String("64")) },
			want: []string{`"qwen2.embedding_length" is string`, "want a non-negative integer"}, content: true},
		{name: "negative head_count", edit: func(m *testModel) { m.editKV = setKV("qwen2.attention.head_count", gguf.Int32(-4)) },
			want: []string{`"qwen2.attention.head_count" is int32 -4`}, content: true},
		{name: "per-layer head_count_kv", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.attention.head_count_kv", gguf.ArrayValue(gguf.NewArray([]uint32{2, 2})))
		}, want: []string{`"qwen2.attention.head_count_kv" is an array`}, content: true},
		{name: "zero context_length", edit: func(m *testModel) { m.editKV = setKV("qwen2.context_length", gguf.Uint32(0)) },
			want: []string{`"qwen2.context_length" = 0 is out of range`}, content: true},
		{name: "integer rope base", edit: func(m *testModel) { m.editKV = setKV("qwen2.rope.freq_base", gguf.Uint32(10000)) },
			want: []string{`"qwen2.rope.freq_base" is uint32`, "want a float"}, content: true},
		{name: "zero epsilon", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.attention.layer_norm_rms_epsilon", gguf.Float32(0))
		}, want: []string{"layer_norm_rms_epsilon = 0"}, content: true},
		{name: "head_count does not divide embedding_length", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.attention.head_count", gguf.Uint32(3))
		}, want: []string{"qwen2.embedding_length = 64 is not a multiple of qwen2.attention.head_count = 3"}, content: true},
		{name: "head_count_kv does not divide head_count", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.attention.head_count_kv", gguf.Uint32(3))
		}, want: []string{"qwen2.attention.head_count = 4 is not a multiple of qwen2.attention.head_count_kv = 3"}, content: true},
		{name: "head size not blockable", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.attention.head_count", gguf.Uint32(64)) // head_dim 1
		}, want: []string{"unsupported shape"}, content: true},
		{name: "key_length makes q wider than the tensors", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.attention.key_length", gguf.Uint32(32))
		}, want: []string{`tensor "blk.0.attn_q.weight" has dims [64 64], want [64 128]`}, content: true},
		{name: "value_length differs", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.attention.value_length", gguf.Uint32(32))
		}, want: []string{"qwen2.attention.value_length = 32 differs from the head size 16"}, content: true},
		{name: "partial rope", edit: func(m *testModel) {
			m.editKV = setKV("qwen2.rope.dimension_count", gguf.Uint32(8))
		}, want: []string{"qwen2.rope.dimension_count = 8 differs from the head size 16"}, content: true},
		{name: "no vocabulary", edit: func(m *testModel) { m.editKV = delKV("tokenizer.ggml.tokens") },
			want: []string{"neither qwen2.vocab_size nor tokenizer.ggml.tokens"}, content: true},
		{name: "block_count too large", edit: func(m *testModel) { m.editKV = setKV("qwen2.block_count", gguf.Uint32(3)) },
			want: []string{`missing tensor "blk.2.attn_norm.weight"`}, content: true},
		{name: "block_count absurd", edit: func(m *testModel) { m.editKV = setKV("qwen2.block_count", gguf.Uint32(1<<24)) },
			want: []string{"Config.Layers = 16777216 exceeds the limit 4096"}, content: true},
		{name: "block_count too small", edit: func(m *testModel) { m.editKV = setKV("qwen2.block_count", gguf.Uint32(1)) },
			want: []string{`unexpected tensor "blk.1.attn_norm.weight"`}, content: true},
		{name: "extra tensor", edit: func(m *testModel) {
			m.extra = func(b *gguf.Builder) error {
				return b.AddTensor("rope_freqs.weight", gguf.TypeF32, []uint64{8}, make([]byte, 32))
			}
		}, want: []string{`unexpected tensor "rope_freqs.weight"`}, content: true},
		{name: "truncated file", raw: func(b []byte) []byte { return b[:len(b)-100] },
			want: []string{"gguf:"}},
		{name: "not gguf", raw: func(b []byte) []byte { return []byte("GGML and then some bytes that are not a gguf file at all") },
			want: []string{"gguf:"}},
		{name: "MaxCtx beyond context_length", opts: LoadOptions{MaxCtx: 65},
			want: []string{"MaxCtx = 65 exceeds the model's context_length = 64"}},
		{name: "negative MaxBatch", opts: LoadOptions{MaxBatch: -1}, want: []string{"MaxBatch = -1"}},
		{name: "bad KV type", opts: LoadOptions{KV: 7}, want: []string{"LoadOptions.KV = 7"}},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm := base
			if c.edit != nil {
				c.edit(&tm)
			}
			data := tm.bytes(t)
			if c.raw != nil {
				data = c.raw(data)
			}
			path := filepath.Join(dir, fmt.Sprintf("bad%d.gguf", i))
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			m, err := LoadGGUF(path, c.opts)
			if err == nil {
				m.Close()
				t.Fatalf("loaded; want an error containing %q", c.want)
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q\n does not contain %q", err, w)
				}
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if c.content && !errors.Is(err, ErrModel) {
				t.Errorf("error %q is not ErrModel", err)
			}
			// The same through Parse + NewFromGGUF (no file, no mapping).
			if f, perr := gguf.Parse(data); perr == nil {
				m, err := NewFromGGUF(f, c.opts)
				if err == nil {
					m.Close()
					t.Errorf("NewFromGGUF loaded what LoadGGUF refused")
				} else if !strings.Contains(err.Error(), c.want[0]) {
					t.Errorf("NewFromGGUF error %q does not contain %q", err, c.want[0])
				}
			}
		})
	}
}

// TestLoadVariants covers files the loader must accept: vocab_size instead of the token
// list, defaults for head_count_kv and rope.freq_base, 1-byte alignment (tensors copied),
// trailing unit dims.
func TestLoadVariants(t *testing.T) {
	dir := t.TempDir()
	s := testShapes[0]
	ref := testModel{shape: s, types: testTypeSets[5], seed: 11}
	refLogits := func(t *testing.T, path string) []float32 {
		m, err := LoadGGUF(path, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		l, err := m.Prefill(kernelrt.Serial{}, []int32{1, 2, 3, 4})
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), l...)
	}
	want := refLogits(t, ref.write(t, dir))
	same := func(t *testing.T, got []float32) {
		for i := range want {
			if got[i] != want[i] {
				t.Fatalf("logit %d = %v, want %v (bit-identical to the plain file)", i, got[i], want[i])
			}
		}
	}
	t.Run("vocab_size", func(t *testing.T) {
		tm := ref
		tm.editKV = func(kv map[string]gguf.Value, order *[]string) {
			delete(kv, "tokenizer.ggml.tokens")
			setKV("qwen2.vocab_size", gguf.Uint64(100))(kv, order)
		}
		p := filepath.Join(dir, "vocab.gguf")
		os.WriteFile(p, tm.bytes(t), 0o644)
		same(t, refLogits(t, p))
	})
	t.Run("unit dims", func(t *testing.T) {
		tm := ref
		tm.editTensor = func(name string, _ *gguf.GGMLType, dims *[]uint64, _ *[]byte) bool {
			if strings.HasSuffix(name, "_norm.weight") || strings.HasSuffix(name, ".bias") {
				*dims = append(*dims, 1)
			}
			return true
		}
		p := filepath.Join(dir, "unit.gguf")
		os.WriteFile(p, tm.bytes(t), 0o644)
		same(t, refLogits(t, p))
	})
	t.Run("alignment 1", func(t *testing.T) {
		p := filepath.Join(dir, "align1.gguf")
		odd := 0
		for pad := 1; pad <= 2 && odd == 0; pad++ { // a name of the length that makes offsets odd
			tm := ref
			tm.alignment = 1
			tm.editKV = setKV("general.name", gguf.String(strings.Repeat("x", pad)))
			os.WriteFile(p, tm.bytes(t), 0o644)
			f, err := gguf.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			for i := range f.Tensors {
				if (f.DataOffset+int(f.Tensors[i].Offset))%2 != 0 {
					odd++
				}
			}
			f.Close()
		}
		if odd == 0 {
			t.Fatal("no tensor at an odd offset: the test does not exercise the copy path")
		}
		same(t, refLogits(t, p))
	})
	t.Run("defaults", func(t *testing.T) {
		tm := ref
		tm.shape.kvHeads = tm.shape.heads // MHA: head_count_kv defaults to head_count
		tm.shape.theta = 10000            // rope.freq_base defaults to 10000
		tm.editKV = func(kv map[string]gguf.Value, _ *[]string) {
			delete(kv, "qwen2.attention.head_count_kv")
			delete(kv, "qwen2.rope.freq_base")
		}
		p := filepath.Join(dir, "defaults.gguf")
		os.WriteFile(p, tm.bytes(t), 0o644)
		m, err := LoadGGUF(p, LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		if m.Cfg.KVHeads != 4 || m.Cfg.RopeTheta != 10000 {
			t.Fatalf("KVHeads %d RopeTheta %g, want 4 and 10000", m.Cfg.KVHeads, m.Cfg.RopeTheta)
		}
	})
}

// TestZeroCopy checks that with MapWeights quantized and F32 weights are views of the file
// mapping, F16 ones converted into the arena, and that the config and options come through.
func TestZeroCopy(t *testing.T) {
	dir := t.TempDir()
	tm := testModel{shape: testShapes[0], types: testTypeSets[5], seed: 5} // f16 embd, q5/q8/f16 weights, f32 output
	path := tm.write(t, dir)
	m, err := LoadGGUF(path, LoadOptions{MaxCtx: 32, MaxBatch: 8, MapWeights: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	f := m.File()
	file := f.Mapping().Bytes()
	lo, hi := uintptr(unsafe.Pointer(&file[0])), uintptr(unsafe.Pointer(&file[0]))+uintptr(len(file))
	inFile := func(p unsafe.Pointer) bool { return uintptr(p) >= lo && uintptr(p) < hi }
	for _, mat := range []*Matrix{m.Layers[0].Q, m.Layers[0].V, m.Layers[1].Gate, m.Output, m.Embed, m.Layers[0].Down} {
		if want := mat.Type != F16; inFile(matrixData(mat)) != want {
			t.Errorf("%s (%s): in the file mapping = %v, want %v", mat.Name, mat.Type, inFile(matrixData(mat)), want)
		}
	}
	// Every block type is viewed in place; Q4_1 (held as Q5_1) and BF16 (as float32) are copied.
	tm3 := testModel{shape: kTestShape, types: testTypes{"all-types", q4_1, q4_0, q5_1, q4k, q5k, q6k, bf16, q8, q5}, seed: 5}
	m3, err := LoadGGUF(tm3.write(t, dir), LoadOptions{MapWeights: true})
	if err != nil {
		t.Fatal(err)
	}
	defer m3.Close()
	file3 := m3.File().Mapping().Bytes()
	lo3, hi3 := uintptr(unsafe.Pointer(&file3[0])), uintptr(unsafe.Pointer(&file3[0]))+uintptr(len(file3))
	l0 := &m3.Layers[0]
	for _, mat := range []*Matrix{m3.Embed, l0.Q, l0.K, l0.V, l0.O, l0.Gate, l0.Up, l0.Down, m3.Output} {
		p := uintptr(matrixData(mat))
		if in, want := p >= lo3 && p < hi3, mat.Type != Q4_1 && mat.Type != BF16; in != want {
			t.Errorf("%s (%s): in the file mapping = %v, want %v", mat.Name, mat.Type, in, want)
		}
		// Bytes is what a pass reads: the file's bytes, or the held form's.
		info, _ := m3.File().Tensor(mat.Name)
		want := int(info.Size)
		switch mat.Type {
		case Q4_1:
			want = want / 20 * 24
		case BF16:
			want *= 2
		}
		if mat.Bytes() != want {
			t.Errorf("%s (%s): Bytes() = %d, want %d", mat.Name, mat.Type, mat.Bytes(), want)
		}
	}
	if got, want := m3.Recipe.Name, "gguf q8_0x2+q4_0x2+q5_1x2+q4_Kx2+q5_Kx2+q6_Kx2+bf16x2, embd q4_1, output q5_0"; got != want {
		t.Errorf("recipe %q, want %q", got, want)
	}
	c := m.Cfg
	if c.Hidden != 64 || c.Layers != 2 || c.Intermediate != 96 || c.Heads != 4 || c.KVHeads != 2 || c.HeadDim != 16 ||
		c.Vocab != 100 || c.MaxCtx != 32 || c.MaxBatch != 8 || c.RopeTheta != 1e6 || c.Eps != 1e-6 {
		t.Errorf("config %+v", c)
	}
	if m.Output == m.Embed {
		t.Error("untied output: Output is Embed")
	}
	t.Logf("recipe %q, weight bytes/token %d", m.Recipe.Name, m.WeightBytes())
	// Tied: no output tensor, the head is the embedding.
	tm2 := testModel{shape: testShapes[0], types: testTypeSets[3], seed: 5}
	m2, err := LoadGGUF(tm2.write(t, dir), LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m2.Close()
	if m2.Output != m2.Embed {
		t.Error("tied model: Output is not Embed")
	}
	if m2.Cfg.MaxCtx != 64 {
		t.Errorf("MaxCtx %d, want context_length 64", m2.Cfg.MaxCtx)
	}
}

// TestCopyWeights: by default every matrix is copied into the arena, in the order a decode
// step reads them, WeightPlacement says so, and the logits are bit-identical to those of the
// same file used in place (MapWeights).
func TestCopyWeights(t *testing.T) {
	dir := t.TempDir()
	tm := testModel{shape: kTestShape, types: testTypes{"all-types", q4_1, q4_0, q5_1, q4k, q5k, q6k, bf16, q8, q5}, seed: 7}
	path := tm.write(t, dir)
	logits := func(opts LoadOptions) ([]float32, *Model) {
		m, err := LoadGGUF(path, opts)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		if _, err := m.Prefill(kernelrt.Serial{}, []int32{3, 1, 4, 1, 5}); err != nil {
			t.Fatal(err)
		}
		out, err := m.Decode(kernelrt.Serial{}, 9)
		if err != nil {
			t.Fatal(err)
		}
		return append([]float32(nil), out...), m
	}
	copied, mc := logits(LoadOptions{MaxCtx: 32})
	mapped, mm := logits(LoadOptions{MaxCtx: 32, MapWeights: true})
	for i := range copied {
		if math.Float32bits(copied[i]) != math.Float32bits(mapped[i]) {
			t.Fatalf("logit %d: copied %v, mapped %v", i, copied[i], mapped[i])
		}
	}
	total := 0
	for _, mat := range mc.matrices() {
		total += mat.Bytes()
	}
	if mp, in := mc.WeightPlacement(); mp != 0 || in != total {
		t.Errorf("copied model: WeightPlacement = %d mapped, %d in the arena; want 0, %d", mp, in, total)
	}
	if mp, in := mm.WeightPlacement(); mp == 0 || in == 0 || mp+in != total {
		t.Errorf("mapped model: WeightPlacement = %d mapped, %d in the arena; want both > 0 (Q4_1, BF16 converted), sum %d", mp, in, total)
	}
	file := mc.File().Mapping().Bytes()
	lo, hi := uintptr(unsafe.Pointer(&file[0])), uintptr(unsafe.Pointer(&file[0]))+uintptr(len(file))
	prev := uintptr(0)
	for _, mat := range mc.matrices() { // embedding, then each layer's in decode order
		p := uintptr(matrixData(mat))
		if p >= lo && p < hi || mat.Mapped {
			t.Errorf("%s (%s): in the file mapping, want copied", mat.Name, mat.Type)
		}
		if p <= prev {
			t.Errorf("%s: at %#x, not after the matrix before it (%#x): not in decode order", mat.Name, p, prev)
		}
		prev = p
	}
}

// matrixData is the address of a matrix's first weight, whatever its type.
func matrixData(m *Matrix) unsafe.Pointer {
	switch {
	case m.Q8 != nil:
		return unsafe.Pointer(&m.Q8[0])
	case m.Q5 != nil:
		return unsafe.Pointer(&m.Q5[0])
	case m.Q4 != nil:
		return unsafe.Pointer(&m.Q4[0])
	case m.Q51 != nil:
		return unsafe.Pointer(&m.Q51[0])
	case m.Q4K != nil:
		return unsafe.Pointer(&m.Q4K[0])
	case m.Q5K != nil:
		return unsafe.Pointer(&m.Q5K[0])
	case m.Q6K != nil:
		return unsafe.Pointer(&m.Q6K[0])
	}
	return unsafe.Pointer(&m.F32[0])
}

// TestKVMemory checks the KV cache's bytes per type (F16 half of F32, Q8_0 34/64 of F16),
// that the arena's kv region holds exactly the cache (nothing is expanded), and that the
// attention scratch does not depend on the type.
func TestKVMemory(t *testing.T) {
	dir := t.TempDir()
	tm := testModel{shape: testShapes[4], types: testTypeSets[3], seed: 9} // head size 32
	path := tm.write(t, dir)
	kvBytes := func(kv KVType) (int, int, int) {
		m, err := LoadGGUF(path, LoadOptions{KV: kv, Slots: 3})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		region := 0
		for _, r := range m.Layout().Regions {
			if r.Region.String() == "kv" {
				region = r.Bytes
			}
		}
		if m.KV() != kv {
			t.Errorf("KV() = %s, want %s", m.KV(), kv)
		}
		return m.KVBytes(), m.KVScratchBytes(), region
	}
	c32, s32, r32 := kvBytes(KVF32)
	c16, s16, r16 := kvBytes(KVF16)
	c8, s8, r8 := kvBytes(KVQ8_0)
	// 2 layers x 2 (k, v) x 3 slots x 2 KV heads x 48 positions x 32 values.
	if n := 2 * 2 * 3 * 2 * 48 * 32; c32 != 4*n || c16 != 2*n || c8 != n/32*34 {
		t.Errorf("cache bytes f32 %d, f16 %d, q8_0 %d; want %d, %d, %d", c32, c16, c8, 4*n, 2*n, n/32*34)
	}
	if s32 != s16 || s16 != s8 || s32 != 4*kernelrt.AttnScratchFloats(32) {
		t.Errorf("attention scratch f32 %d, f16 %d, q8_0 %d; want %d", s32, s16, s8, 4*kernelrt.AttnScratchFloats(32))
	}
	// The region rounds each of the 4 layer buffers up to whole pages, at most.
	for _, c := range [][2]int{{r32, c32}, {r16, c16}, {r8, c8}} {
		if c[0] < c[1] || c[0] > c[1]+4*4096 {
			t.Errorf("kv region %d bytes for a cache of %d", c[0], c[1])
		}
	}
	t.Logf("KV region: f32 %d bytes, f16 %d, q8_0 %d; attention scratch %d", r32, r16, r8, s32)
}

// syntheticArchConfigs are small shapes of each architecture SyntheticGGUF writes: qwen2's
// head size is hidden/heads, qwen3's, gemma3's and gemma2's are not (q is twice the hidden width, as in
// Qwen3-0.6B).
func syntheticArchConfigs() []Config {
	qwen2 := Config{Arch: "qwen2", Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 300,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}
	qwen3 := qwen2
	qwen3.Arch, qwen3.HeadDim = "qwen3", 32
	// gemma3: 7 layers (layer 5 global, scaled x8 as the 4B+ are), 1 KV head, window 3.
	gemma3 := qwen3
	gemma3.Arch, gemma3.Layers, gemma3.KVHeads, gemma3.SlidingWindow, gemma3.RopeScale = "gemma3", 7, 1, 3, 8
	// gemma2: 4 layers (0 and 2 sliding over 3 positions), 2 KV heads, soft-caps small
	// enough to bend the scores and logits.
	gemma2 := qwen3
	gemma2.Arch, gemma2.Layers, gemma2.SlidingWindow, gemma2.AttnSoftcap, gemma2.FinalSoftcap, gemma2.RopeTheta = "gemma2", 4, 3, 0.8, 2.5, 1e4
	return []Config{qwen2, qwen3, gemma3, gemma2}
}

// TestSyntheticGGUF writes a synthetic model of each architecture with SyntheticGGUF and runs
// it: the loaded model has the written shape and recipe, and agrees with the float64
// reference; NewSynthetic builds the same shape in memory.
func TestSyntheticGGUF(t *testing.T) {
	cfg := syntheticArchConfigs()[0]
	for _, ac := range syntheticArchConfigs() {
		for _, r := range []Recipe{RecipeQ8_0(), RecipeMixed(), RecipeF16()} {
			t.Run(ac.arch().name+"/"+r.Name, func(t *testing.T) {
				p := writeSynthetic(t, ac, r, 1, "syn.gguf")
				m, err := LoadGGUF(p, LoadOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if m.Recipe != r {
					t.Errorf("loaded recipe %+v, want %+v (a file storing a built-in recipe takes its name)", m.Recipe, r)
				}
				got := m.Cfg
				got.KV, got.MaxBatch, got.MaxCtx = ac.KV, ac.MaxBatch, ac.MaxCtx
				if want := ac; got != want {
					t.Errorf("loaded config %+v, want %+v", got, want)
				}
				m.Close()
				tol := tolQuantized
				if r.Q == F16 {
					tol = tolF16
				}
				worst := runCompare(t, kernelrt.Serial{}, p, LoadOptions{KV: KVF32}, []int32{7, 100, 299, 0}, []int32{5, 6}, tol)
				t.Logf("max relative error %.3g", worst)
				if r.Q != F16 {
					ms, err := NewSynthetic(ac, r, 1, BuildOptions{})
					if err != nil {
						t.Fatal(err)
					}
					defer ms.Close()
					if _, err := ms.Prefill(kernelrt.Serial{}, []int32{1, 2, 3}); err != nil {
						t.Fatal(err)
					}
				}
			})
		}
	}
	if err := SyntheticGGUF(gguf.NewBuilder(), cfg, Recipe{Name: "f32", Q: F32}, 1); err == nil {
		t.Error("SyntheticGGUF accepted an F32 recipe")
	}
	if _, err := NewSynthetic(cfg, RecipeF16(), 1, BuildOptions{}); err == nil {
		t.Error("NewSynthetic accepted an F16 recipe (it builds quantized models only)")
	}
}

// procStatus returns VmRSS, RssAnon and RssFile in KiB.
func procStatus(t *testing.T) (rss, anon, file int) {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		t.Skip(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		v, _ := strconv.Atoi(fields[1])
		switch fields[0] {
		case "VmRSS:":
			rss = v
		case "RssAnon:":
			anon = v
		case "RssFile:":
			file = v
		}
	}
	return
}

// TestBigFileZeroCopy (KERNELRT_BIG=1) writes the synthetic Qwen2-0.5B (Q8_0, ~530 MB) as a
// GGUF file with the streaming writer, loads it and reports load time and resident memory
// before and after loading and after a decode step: loading maps the weights without reading
// or copying them; the first decode step touches them (file-backed pages, shared with the
// page cache), and anonymous memory grows only by the arena (activations, KV cache).
// KERNELRT_BIG_FILE=path keeps the file there (for kernelrt bench -model).
func TestBigFileZeroCopy(t *testing.T) {
	if os.Getenv("KERNELRT_BIG") == "" {
		t.Skip("set KERNELRT_BIG=1 to write, load and run a 0.5B model file")
	}
	cfg := Qwen2_0_5B()
	cfg.MaxCtx = 32768 // context_length in the file; the model maps DefaultMaxCtx
	path := os.Getenv("KERNELRT_BIG_FILE")
	if path == "" {
		path = filepath.Join(t.TempDir(), "qwen2-0.5b-synthetic-q8_0.gguf")
	}
	if st, err := os.Stat(path); err != nil || st.Size() < 400<<20 {
		b := gguf.NewBuilder()
		if err := SyntheticGGUF(b, cfg, RecipeQ8_0(), 1); err != nil {
			t.Fatal(err)
		}
		fh, err := os.Create(path)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		n, err := b.WriteTo(fh)
		if err != nil {
			t.Fatal(err)
		}
		if err := fh.Close(); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s: %d bytes in %v", path, n, time.Since(start))
	}
	runtime.GC()
	debug.FreeOSMemory()
	rss0, anon0, file0 := procStatus(t)
	start := time.Now()
	m, err := LoadGGUF(path, LoadOptions{MaxCtx: 512, MapWeights: true})
	if err != nil {
		t.Fatal(err)
	}
	loadTime := time.Since(start)
	defer m.Close()
	rss1, anon1, file1 := procStatus(t)
	st, _ := os.Stat(path)
	t.Logf("file %d MB, weights read per token %d MB, arena %d MB", st.Size()>>20, m.WeightBytes()>>20, m.Layout().Total>>20)
	t.Logf("load: %v", loadTime)
	t.Logf("RSS before load: %d MB (anon %d, file %d)", rss0>>10, anon0>>10, file0>>10)
	t.Logf("RSS after load:  %d MB (anon %d, file %d)", rss1>>10, anon1>>10, file1>>10)
	if d := (rss1 - rss0) << 10; d > 64<<20 {
		t.Errorf("loading grew RSS by %d MB: the weights were read or copied", d>>20)
	}
	start = time.Now()
	if _, err := m.Decode(kernelrt.Serial{}, 42); err != nil {
		t.Fatal(err)
	}
	first := time.Since(start)
	rss2, anon2, file2 := procStatus(t)
	t.Logf("RSS after one decode step (%v): %d MB (anon %d, file %d)", first, rss2>>10, anon2>>10, file2>>10)
	if d := (anon2 - anon0) << 10; d > int(m.Layout().Total)+64<<20 {
		t.Errorf("anonymous memory grew by %d MB, more than the %d MB arena: weights were copied", d>>20, m.Layout().Total>>20)
	}
	start = time.Now()
	if _, err := m.Decode(kernelrt.Serial{}, 43); err != nil {
		t.Fatal(err)
	}
	t.Logf("second decode step (serial): %v", time.Since(start))
}

// TestLoadCorruptNoPanic flips random bytes of a valid file's header and metadata: the loader
// must return an error or a working model, never panic.
func TestLoadCorruptNoPanic(t *testing.T) {
	tm := testModel{shape: testShapes[3], types: testTypeSets[6], seed: 2}
	good := tm.bytes(t)
	f, err := gguf.Parse(good)
	if err != nil {
		t.Fatal(err)
	}
	header := f.DataOffset
	rng := rand.New(rand.NewPCG(4, 2))
	loaded, refused := 0, 0
	for i := 0; i < 400; i++ {
		data := append([]byte(nil), good...)
		for k := 0; k < 1+rng.IntN(3); k++ {
			data[rng.IntN(header)] ^= byte(1 << rng.IntN(8))
		}
		f, err := gguf.Parse(data)
		if err != nil {
			refused++
			continue
		}
		m, err := NewFromGGUF(f, LoadOptions{MaxCtx: 8})
		if err != nil {
			refused++
			continue
		}
		loaded++
		if _, err := m.Prefill(kernelrt.Serial{}, []int32{0, 1}); err != nil {
			t.Logf("corrupt file %d loaded but prefill failed: %v", i, err)
		}
		m.Close()
	}
	t.Logf("%d corrupted files refused, %d loaded (a flipped bit in a name or an unused key)", refused, loaded)
}

// TestDecodeNoAllocs: a decode step of a GGUF model allocates nothing, whatever its weight
// types and KV cache type.
func TestDecodeNoAllocs(t *testing.T) {
	if testing.Short() {
		t.Skip("short")
	}
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := t.TempDir()
	type model struct {
		shape testShape
		types testTypes
	}
	var models []model
	for _, ty := range []testTypes{testTypeSets[3], testTypeSets[5], testTypeSets[6], testTypeSets[11]} {
		models = append(models, model{testShapes[4], ty}) // head size 32: every KV type
	}
	for _, ty := range []testTypes{kTypeSets[3], kTypeSets[5], kTypeSets[6]} { // K-quants: Q8_K activations
		models = append(models, model{kTestShape, ty})
	}
	for _, mo := range models {
		ty := mo.types
		for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
			tm := testModel{shape: mo.shape, types: ty, seed: 1}
			m, err := LoadGGUF(tm.write(t, dir), LoadOptions{KV: kv})
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
				m.Reset()
				if _, err := m.Decode(e, 1); err != nil {
					t.Fatal(err)
				}
				n := testing.AllocsPerRun(20, func() {
					if _, err := m.Decode(e, 2); err != nil {
						t.Fatal(err)
					}
				})
				if n != 0 {
					t.Errorf("%s kv %s exec %T: %v allocations per decode step", ty.name, kv, e, n)
				}
			}
			m.Close()
		}
	}
}

// writeSynthetic writes SyntheticGGUF(cfg, r, seed) to name in the test's temporary
// directory and returns its path.
func writeSynthetic(t testing.TB, cfg Config, r Recipe, seed uint64, name string) string {
	t.Helper()
	b := gguf.NewBuilder()
	if err := SyntheticGGUF(b, cfg, r, seed); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), name)
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
	return p
}
