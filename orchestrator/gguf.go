package orchestrator

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strings"
	"sync"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/threadpool"
)

// Loading a Qwen2 model from a GGUF file.
//
// The config comes from the qwen2.* metadata, the tensors are found by name (never by file
// order) and checked against it: a missing, unexpected or misshapen tensor, a type the
// decoder cannot compute with, a missing or ill-typed metadata key are each an error naming
// the key or tensor and the numbers involved.
//
// Memory: Q8_0 and Q5_0 matrices (and F32 ones) are used in place, as typed views of the
// file's read-only mapping: loading reads no weight bytes and copies none; pages come from the
// page cache on first touch. Only small tensors are copied into the model's arena (norms, the
// q|k|v biases, which the decoder wants concatenated), plus F16 matrices, which are converted
// once to float32 (the one case where weights are copied, at twice the file's bytes), and any
// tensor whose data is not aligned for its type (possible only with general.alignment < 4).
// Activations, KV cache and scratch come from the same arena plan as NewSynthetic's.

// KVType is the storage type of the KV cache.
type KVType int

// KV cache types.
const (
	// KVF32 stores keys and values as float32 (the default).
	KVF32 KVType = iota
	// KVF16 stores them as IEEE fp16 (rounded to nearest even), halving the cache. Attention
	// reads them back as float32: each layer's cache is expanded into one float32 buffer
	// (shared by all layers) before the attention kernel runs.
	KVF16
)

// String returns "f32" or "f16".
func (k KVType) String() string {
	if k == KVF16 {
		return "f16"
	}
	return "f32"
}

// ParseKVType parses "f32" or "f16".
func ParseKVType(s string) (KVType, error) {
	switch strings.ToLower(s) {
	case "f32", "":
		return KVF32, nil
	case "f16":
		return KVF16, nil
	}
	return 0, fmt.Errorf("orchestrator: KV cache type %q: want f32 or f16", s)
}

// DefaultMaxCtx is the KV cache length LoadGGUF uses when LoadOptions.MaxCtx is 0 and the
// model's context_length is longer.
const DefaultMaxCtx = 4096

// LoadOptions control how a GGUF model is loaded.
type LoadOptions struct {
	// MaxCtx is the number of KV cache positions; 0 = min(context_length, DefaultMaxCtx).
	// More than the model's context_length is an error.
	MaxCtx int
	// MaxBatch is the most tokens one forward call takes (longer prompts are prefilled in
	// chunks); 0 = 128.
	MaxBatch int
	// AllLogits makes Prefill return the logits of every prompt position.
	AllLogits bool
	// KV is the KV cache type.
	KV KVType
	// File is how LoadGGUF maps the file (WillNeed to read ahead, Mlock).
	File arena.FileOptions
	// Build controls the arena (activations, KV cache, copied tensors).
	Build BuildOptions
}

// Limits on metadata values (a hostile file must not make the loader allocate without bound;
// every dimension is also checked against tensors whose bytes are in the file).
const maxMetaDim = 1 << 24

// LoadGGUF maps the GGUF file at path and builds a Qwen2 model on it. The model owns the
// mapping: Close unmaps it.
func LoadGGUF(path string, opts LoadOptions) (*Model, error) {
	f, err := gguf.OpenWith(path, opts.File)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	m, err := NewFromGGUF(f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("orchestrator: %s: %w", path, trimPrefix(err))
	}
	m.file = f
	return m, nil
}

// trimPrefix drops a leading "orchestrator: " so a wrapped error says it once.
func trimPrefix(err error) error {
	if s, ok := strings.CutPrefix(err.Error(), "orchestrator: "); ok {
		return &prefixed{msg: s, err: err}
	}
	return err
}

type prefixed struct {
	msg string
	err error
}

func (p *prefixed) Error() string { return p.msg }
func (p *prefixed) Unwrap() error { return p.err }

// ErrModel is wrapped by every error that describes a problem with the model file's content
// (metadata or tensors), as opposed to an I/O or memory failure.
var ErrModel = errors.New("bad model")

func modelErr(format string, a ...any) error {
	return fmt.Errorf("orchestrator: %w: %s", ErrModel, fmt.Sprintf(format, a...))
}

// ConfigFromGGUF reads a Qwen2 config from f's metadata: general.architecture must be
// "qwen2"; qwen2.embedding_length, block_count, feed_forward_length, attention.head_count,
// attention.layer_norm_rms_epsilon and context_length are required; attention.head_count_kv
// defaults to head_count and rope.freq_base to 10000 (as llama.cpp does); the vocabulary size
// is qwen2.vocab_size or else the length of tokenizer.ggml.tokens. MaxCtx is context_length
// (the trained context), MaxBatch 128.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	arch, ok := f.GetString("general.architecture")
	if !ok {
		if _, present := f.Get("general.architecture"); present {
			return Config{}, modelErr("metadata key %q is not a string", "general.architecture")
		}
		return Config{}, modelErr("missing metadata key %q", "general.architecture")
	}
	if arch != "qwen2" {
		return Config{}, modelErr("general.architecture is %q; only qwen2 is supported", arch)
	}
	var err error
	u := func(key string, def int) int {
		if err != nil {
			return 0
		}
		var v int
		v, err = metaUint(f, "qwen2."+key, def)
		return v
	}
	fl := func(key string, def float64) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = metaFloat(f, "qwen2."+key, def)
		return v
	}
	c := Config{MaxBatch: 128}
	c.Hidden = u("embedding_length", -1)
	c.Layers = u("block_count", -1)
	c.Intermediate = u("feed_forward_length", -1)
	c.Heads = u("attention.head_count", -1)
	c.KVHeads = u("attention.head_count_kv", 0)
	c.MaxCtx = u("context_length", -1)
	c.RopeTheta = fl("rope.freq_base", 10000)
	eps := fl("attention.layer_norm_rms_epsilon", -1)
	if err != nil {
		return Config{}, err
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	if c.Hidden%c.Heads != 0 {
		return Config{}, modelErr("qwen2.embedding_length = %d is not a multiple of qwen2.attention.head_count = %d", c.Hidden, c.Heads)
	}
	if c.Heads%c.KVHeads != 0 {
		return Config{}, modelErr("qwen2.attention.head_count = %d is not a multiple of qwen2.attention.head_count_kv = %d", c.Heads, c.KVHeads)
	}
	c.HeadDim = c.Hidden / c.Heads
	for _, key := range []string{"attention.key_length", "attention.value_length"} {
		if _, present := f.Get("qwen2." + key); !present {
			continue
		}
		v, err := metaUint(f, "qwen2."+key, -1)
		if err != nil {
			return Config{}, err
		}
		if v != c.HeadDim {
			return Config{}, modelErr("qwen2.%s = %d differs from embedding_length/head_count = %d; only equal head sizes are supported", key, v, c.HeadDim)
		}
	}
	if !(eps > 0) || eps > 1 {
		return Config{}, modelErr("qwen2.attention.layer_norm_rms_epsilon = %g is not in (0, 1]", eps)
	}
	c.Eps = float32(eps)
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		return Config{}, modelErr("qwen2.rope.freq_base = %g must be finite and > 1", c.RopeTheta)
	}
	// The vocabulary: qwen2.vocab_size, else the token list.
	if _, present := f.Get("qwen2.vocab_size"); present {
		if c.Vocab, err = metaUint(f, "qwen2.vocab_size", -1); err != nil {
			return Config{}, err
		}
	} else if v, present := f.Get("tokenizer.ggml.tokens"); present {
		a, ok := v.AsArray()
		if !ok {
			return Config{}, modelErr("metadata key %q is %s, want an array of strings", "tokenizer.ggml.tokens", v.Type())
		}
		if a.Len() == 0 {
			return Config{}, modelErr("tokenizer.ggml.tokens is empty")
		}
		c.Vocab = a.Len()
	} else {
		return Config{}, modelErr("no vocabulary size: neither qwen2.vocab_size nor tokenizer.ggml.tokens is present")
	}
	if err := c.Validate(); err != nil {
		return Config{}, modelErr("the metadata describe an unsupported shape: %s", strings.TrimPrefix(err.Error(), "orchestrator: "))
	}
	return c, nil
}

// metaUint reads a positive integer key; def < 0 makes it required, def >= 0 is its default.
func metaUint(f *gguf.File, key string, def int) (int, error) {
	v, ok := f.Get(key)
	if !ok {
		if def < 0 {
			return 0, modelErr("missing metadata key %q", key)
		}
		return def, nil
	}
	if v.Type() == gguf.ValueArray {
		return 0, modelErr("metadata key %q is an array (per-layer values are not supported), want an integer", key)
	}
	n, ok := v.AsUint()
	if !ok {
		return 0, modelErr("metadata key %q is %s %v, want a non-negative integer", key, v.Type(), v)
	}
	if n == 0 || n > maxMetaDim {
		return 0, modelErr("metadata key %q = %d is out of range 1..%d", key, n, maxMetaDim)
	}
	return int(n), nil
}

// metaFloat reads a float key (float32 or float64); def < 0 makes it required.
func metaFloat(f *gguf.File, key string, def float64) (float64, error) {
	v, ok := f.Get(key)
	if !ok {
		if def < 0 {
			return 0, modelErr("missing metadata key %q", key)
		}
		return def, nil
	}
	x, ok := v.AsFloat()
	if !ok {
		return 0, modelErr("metadata key %q is %s %v, want a float", key, v.Type(), v)
	}
	return x, nil
}

// tensorKind says which types a tensor may have and how it is held.
type tensorKind int

const (
	kindMatrix tensorKind = iota // Q8_0, Q5_0, F16, F32
	kindVector                   // F32, F16: copied to the arena as float32
)

// tensorSpec is one tensor a model needs: its name and dims in ggml order (row length first).
type tensorSpec struct {
	name string
	dims []int
	kind tensorKind
}

// qwen2Tensors lists every tensor of a Qwen2 model of shape c; the output head is listed
// only when present in the file (absent = tied to token_embd).
func qwen2Tensors(c Config, untied bool) []tensorSpec {
	H, I, V := c.Hidden, c.Intermediate, c.Vocab
	qd, kd, vd := c.qkvDims()
	s := []tensorSpec{{"token_embd.weight", []int{H, V}, kindMatrix}}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		s = append(s,
			tensorSpec{p + "attn_norm.weight", []int{H}, kindVector},
			tensorSpec{p + "attn_q.weight", []int{H, qd}, kindMatrix},
			tensorSpec{p + "attn_q.bias", []int{qd}, kindVector},
			tensorSpec{p + "attn_k.weight", []int{H, kd}, kindMatrix},
			tensorSpec{p + "attn_k.bias", []int{kd}, kindVector},
			tensorSpec{p + "attn_v.weight", []int{H, vd}, kindMatrix},
			tensorSpec{p + "attn_v.bias", []int{vd}, kindVector},
			tensorSpec{p + "attn_output.weight", []int{qd, H}, kindMatrix},
			tensorSpec{p + "ffn_norm.weight", []int{H}, kindVector},
			tensorSpec{p + "ffn_gate.weight", []int{H, I}, kindMatrix},
			tensorSpec{p + "ffn_up.weight", []int{H, I}, kindMatrix},
			tensorSpec{p + "ffn_down.weight", []int{I, H}, kindMatrix},
		)
	}
	s = append(s, tensorSpec{"output_norm.weight", []int{H}, kindVector})
	if untied {
		s = append(s, tensorSpec{"output.weight", []int{H, V}, kindMatrix})
	}
	return s
}

// qtypeOf maps a GGUF type to the decoder's, for the types it computes with.
func qtypeOf(t gguf.GGMLType) (QType, bool) {
	switch t {
	case gguf.TypeQ8_0:
		return Q8_0, true
	case gguf.TypeQ5_0:
		return Q5_0, true
	case gguf.TypeF32:
		return F32, true
	case gguf.TypeF16:
		return F16, true
	}
	return 0, false
}

// effectiveDims drops trailing dims of 1 (a [896] vector may be written as [896, 1]).
func effectiveDims(d []uint64) []uint64 {
	for len(d) > 1 && d[len(d)-1] == 1 {
		d = d[:len(d)-1]
	}
	return d
}

// checkTensor checks a present tensor's dims and type against its spec.
func checkTensor(t *gguf.TensorInfo, s tensorSpec, c Config) error {
	got := effectiveDims(t.Dims)
	want := make([]uint64, len(s.dims))
	for i, d := range s.dims {
		want[i] = uint64(d)
	}
	want = effectiveDims(want)
	same := len(got) == len(want)
	for i := 0; same && i < len(got); i++ {
		same = got[i] == want[i]
	}
	if !same {
		return modelErr("tensor %q has dims %v, want %v (ggml order, row length first) for embedding_length=%d feed_forward_length=%d head_count=%d head_count_kv=%d vocab=%d",
			t.Name, t.Dims, s.dims, c.Hidden, c.Intermediate, c.Heads, c.KVHeads, c.Vocab)
	}
	if s.kind == kindVector {
		if t.Type != gguf.TypeF32 && t.Type != gguf.TypeF16 {
			return modelErr("tensor %q has type %s; norms and biases must be F32 or F16", t.Name, t.Type)
		}
		return nil
	}
	if _, ok := qtypeOf(t.Type); !ok {
		return modelErr("tensor %q has type %s; supported weight types are Q8_0, Q5_0, F16 and F32", t.Name, t.Type)
	}
	return nil
}

// NewFromGGUF builds a Qwen2 model on an open GGUF file (from gguf.Open, or gguf.Parse of
// bytes that stay valid). Quantized and F32 weights are views of the file's bytes: f must
// stay open while the model is used and is not closed by the model's Close (LoadGGUF's is).
func NewFromGGUF(f *gguf.File, opts LoadOptions) (*Model, error) {
	c, err := ConfigFromGGUF(f)
	if err != nil {
		return nil, err
	}
	trained := c.MaxCtx
	switch {
	case opts.MaxCtx < 0:
		return nil, fmt.Errorf("orchestrator: LoadOptions.MaxCtx = %d is negative", opts.MaxCtx)
	case opts.MaxCtx == 0:
		c.MaxCtx = min(trained, DefaultMaxCtx)
	case opts.MaxCtx > trained:
		return nil, fmt.Errorf("orchestrator: LoadOptions.MaxCtx = %d exceeds the model's context_length = %d", opts.MaxCtx, trained)
	default:
		c.MaxCtx = opts.MaxCtx
	}
	switch {
	case opts.MaxBatch < 0:
		return nil, fmt.Errorf("orchestrator: LoadOptions.MaxBatch = %d is negative", opts.MaxBatch)
	case opts.MaxBatch > 0:
		c.MaxBatch = opts.MaxBatch
	}
	c.AllLogits = opts.AllLogits
	if opts.KV != KVF32 && opts.KV != KVF16 {
		return nil, fmt.Errorf("orchestrator: LoadOptions.KV = %d is not a KV type", int(opts.KV))
	}
	if c.Layers > len(f.Tensors) { // every layer has 12 tensors: bound before allocating
		return nil, modelErr("qwen2.block_count = %d but the file has only %d tensors", c.Layers, len(f.Tensors))
	}
	// Tensors, by name: all present, of the right shape and type, and nothing else.
	_, untied := f.Tensor("output.weight")
	specs := qwen2Tensors(c, untied)
	infos := make(map[string]*gguf.TensorInfo, len(specs))
	for _, s := range specs {
		t, ok := f.Tensor(s.name)
		if !ok {
			return nil, modelErr("missing tensor %q (qwen2.block_count = %d)", s.name, c.Layers)
		}
		if err := checkTensor(t, s, c); err != nil {
			return nil, err
		}
		infos[s.name] = t
	}
	for i := range f.Tensors {
		if _, ok := infos[f.Tensors[i].Name]; !ok {
			return nil, modelErr("unexpected tensor %q: not part of a qwen2 model with block_count = %d", f.Tensors[i].Name, c.Layers)
		}
	}
	return buildFromGGUF(f, c, opts, specs, infos)
}

// ggufMatrix is how one weight matrix is held: a view of the file, or an arena buffer.
type ggufMatrix struct {
	spec  tensorSpec
	info  *gguf.TensorInfo
	qt    QType
	copy  bool   // false: a view of the file's bytes
	plan  string // arena buffer name when copied
	bytes []byte // the tensor's data in the file
}

func buildFromGGUF(f *gguf.File, c Config, opts LoadOptions, specs []tensorSpec, infos map[string]*gguf.TensorInfo) (*Model, error) {
	H := c.Hidden
	qd, kd, vd := c.qkvDims()
	var p arena.Plan
	p.Guard = opts.Build.Arena.Guard
	var mats []*ggufMatrix
	anyF16 := false
	for _, s := range specs {
		if s.kind != kindMatrix {
			continue
		}
		t := infos[s.name]
		data, err := f.TensorData(s.name)
		if err != nil {
			return nil, fmt.Errorf("orchestrator: tensor %q: %w", s.name, err)
		}
		qt, _ := qtypeOf(t.Type)
		gm := &ggufMatrix{spec: s, info: t, qt: qt, bytes: data, plan: "w." + s.name}
		elem, count := qt.blockBytes(), t.Elements()/kernelrt.QK
		switch qt {
		case Q8_0, Q5_0:
			gm.copy = addrOf(data)%2 != 0
		case F32:
			gm.copy = addrOf(data)%4 != 0
			elem, count = 4, t.Elements()
		case F16:
			gm.copy = true
			anyF16 = true
			elem, count = 4, t.Elements()
		}
		if gm.copy {
			p.Add(arena.Buffer{Name: gm.plan, ElemSize: elem, Count: count, Region: arena.Weights})
		}
		mats = append(mats, gm)
	}
	vec := func(name string, n int) {
		p.Add(arena.Buffer{Name: name, ElemSize: 4, Count: n, Region: arena.Weights})
	}
	for l := 0; l < c.Layers; l++ {
		pre := fmt.Sprintf("blk.%d.", l)
		vec(pre+"attn_norm", H)
		vec(pre+"ffn_norm", H)
		vec(pre+"attn_qkv.bias", qd+kd+vd)
	}
	vec("output_norm", H)
	// State: activations and scratch as NewSynthetic plans them. An F16 cache plans the
	// float32 cache of one layer (the buffer attention reads, refilled for each layer) and
	// the fp16 caches of every layer.
	sc := c
	if opts.KV == KVF16 {
		sc.Layers = 1
	}
	planState(&p, sc)
	if opts.KV == KVF16 {
		for l := 0; l < c.Layers; l++ {
			for _, kv := range []string{"k", "v"} {
				p.Add(arena.Buffer{Name: fmt.Sprintf("kv16.%d.%s", l, kv), ElemSize: 2, Count: c.KVHeads * c.MaxCtx * c.HeadDim, Region: arena.KV})
			}
		}
	}
	if anyF16 {
		p.Add(arena.Buffer{Name: "act.xr", ElemSize: 4, Count: c.MaxBatch * max(H, qd, c.Intermediate), Region: arena.Activations})
	}
	layout, err := p.Layout()
	if err != nil {
		return nil, fmt.Errorf("orchestrator: plan: %w", err)
	}
	a, err := arena.NewFromLayout(layout, opts.Build.Arena)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	m := &Model{Cfg: sc, arena: a, layout: layout, Layers: make([]Layer, c.Layers)}
	fail := func(err error) (*Model, error) {
		a.Close()
		return nil, err
	}
	byName := map[string]*Matrix{}
	for _, gm := range mats {
		mat, err := gm.matrix(f, a, layout)
		if err != nil {
			return fail(fmt.Errorf("orchestrator: tensor %q: %w", gm.spec.name, err))
		}
		byName[gm.spec.name] = mat
	}
	// Vectors: copied as float32 (biases concatenated q|k|v).
	vector := func(dst []float32, names ...string) error {
		for _, n := range names {
			t := infos[n]
			data, err := f.TensorData(n)
			if err != nil {
				return err
			}
			k := t.Elements()
			decodeFloats(dst[:k], data, t.Type)
			dst = dst[k:]
		}
		return nil
	}
	get := func(name string, srcs ...string) ([]float32, error) {
		s, err := arena.Get[float32](a, layout, name)
		if err != nil {
			return nil, err
		}
		return s, vector(s, srcs...)
	}
	for l := range m.Layers {
		pre := fmt.Sprintf("blk.%d.", l)
		ly := &m.Layers[l]
		if ly.AttnNorm, err = get(pre+"attn_norm", pre+"attn_norm.weight"); err != nil {
			return fail(fmt.Errorf("orchestrator: %w", err))
		}
		if ly.FFNNorm, err = get(pre+"ffn_norm", pre+"ffn_norm.weight"); err != nil {
			return fail(fmt.Errorf("orchestrator: %w", err))
		}
		if ly.QKVBias, err = get(pre+"attn_qkv.bias", pre+"attn_q.bias", pre+"attn_k.bias", pre+"attn_v.bias"); err != nil {
			return fail(fmt.Errorf("orchestrator: %w", err))
		}
		ly.Q, ly.K, ly.V = byName[pre+"attn_q.weight"], byName[pre+"attn_k.weight"], byName[pre+"attn_v.weight"]
		ly.O = byName[pre+"attn_output.weight"]
		ly.Gate, ly.Up, ly.Down = byName[pre+"ffn_gate.weight"], byName[pre+"ffn_up.weight"], byName[pre+"ffn_down.weight"]
	}
	if m.OutNorm, err = get("output_norm", "output_norm.weight"); err != nil {
		return fail(fmt.Errorf("orchestrator: %w", err))
	}
	m.Embed = byName["token_embd.weight"]
	m.Output = m.Embed
	if out, ok := byName["output.weight"]; ok {
		m.Output = out
	}
	m.Recipe = ggufRecipe(m)
	if err := m.bindState(); err != nil {
		return fail(err)
	}
	m.Cfg = c
	if anyF16 {
		if m.xr, err = arena.Get[float32](a, layout, "act.xr"); err != nil {
			return fail(fmt.Errorf("orchestrator: %w", err))
		}
	}
	if opts.KV == KVF16 {
		m.kv16 = true
		m.kc16, m.vc16 = make([][]uint16, c.Layers), make([][]uint16, c.Layers)
		for l := 0; l < c.Layers; l++ {
			if m.kc16[l], err = arena.Get[uint16](a, layout, fmt.Sprintf("kv16.%d.k", l)); err == nil {
				m.vc16[l], err = arena.Get[uint16](a, layout, fmt.Sprintf("kv16.%d.v", l))
			}
			if err != nil {
				return fail(fmt.Errorf("orchestrator: %w", err))
			}
		}
	}
	return m, nil
}

// ggufRecipe describes a loaded model's weight types.
func ggufRecipe(m *Model) Recipe {
	l := &m.Layers[0]
	r := Recipe{Q: l.Q.Type, K: l.K.Type, V: l.V.Type, O: l.O.Type, Gate: l.Gate.Type, Up: l.Up.Type, Down: l.Down.Type, Embedded: m.Embed.Type}
	count := map[QType]int{}
	for i := range m.Layers {
		ly := &m.Layers[i]
		for _, mt := range []*Matrix{ly.Q, ly.K, ly.V, ly.O, ly.Gate, ly.Up, ly.Down} {
			count[mt.Type]++
		}
	}
	// A file that stores exactly a built-in recipe takes its name (the benchmark suite compares
	// those with llama.cpp's numbers).
	tiedAs := func(want Recipe) bool {
		if m.Output != m.Embed || m.Embed.Type != want.Embedded {
			return false
		}
		for i := range m.Layers {
			ly := &m.Layers[i]
			if ly.Q.Type != want.Q || ly.K.Type != want.K || ly.V.Type != want.V || ly.O.Type != want.O ||
				ly.Gate.Type != want.Gate || ly.Up.Type != want.Up || ly.Down.Type != want.Down {
				return false
			}
		}
		return true
	}
	for _, want := range []Recipe{RecipeQ8_0(), RecipeMixed()} {
		if tiedAs(want) {
			return want
		}
	}
	var parts []string
	for _, t := range []QType{Q8_0, Q5_0, F16, F32} {
		if count[t] > 0 {
			parts = append(parts, fmt.Sprintf("%sx%d", t, count[t]))
		}
	}
	r.Name = "gguf " + strings.Join(parts, "+") + ", embd " + m.Embed.Type.String()
	if m.Output != m.Embed {
		r.Name += ", output " + m.Output.Type.String()
	} else {
		r.Name += " (tied)"
	}
	return r
}

// matrix makes the Matrix of gm: a view of the file, or its arena copy filled now.
func (gm *ggufMatrix) matrix(f *gguf.File, a *arena.Arena, l *arena.Layout) (*Matrix, error) {
	t := gm.info
	mat := &Matrix{Name: gm.spec.name, Type: gm.qt, Rows: t.Rows(), Cols: t.Cols()}
	n := t.Elements()
	var err error
	switch gm.qt {
	case Q8_0:
		if gm.copy {
			if mat.Q8, err = arena.Get[kernelrt.BlockQ8_0](a, l, gm.plan); err == nil {
				copy(bytesOf(mat.Q8), gm.bytes)
			}
		} else {
			mat.Q8, err = fileView[kernelrt.BlockQ8_0](f, t, gm.bytes, n/kernelrt.QK)
		}
	case Q5_0:
		if gm.copy {
			if mat.Q5, err = arena.Get[kernelrt.BlockQ5_0](a, l, gm.plan); err == nil {
				copy(bytesOf(mat.Q5), gm.bytes)
			}
		} else {
			mat.Q5, err = fileView[kernelrt.BlockQ5_0](f, t, gm.bytes, n/kernelrt.QK)
		}
	case F32, F16:
		if gm.copy {
			if mat.F32, err = arena.Get[float32](a, l, gm.plan); err == nil {
				decodeFloats(mat.F32, gm.bytes, t.Type)
			}
		} else {
			mat.F32, err = fileView[float32](f, t, gm.bytes, n)
		}
	}
	return mat, err
}

// fileView views a tensor's data as n values of T in place: through the file mapping when f
// has one (gguf.Open), else over the parsed bytes. The caller has checked the alignment.
func fileView[T any](f *gguf.File, t *gguf.TensorInfo, data []byte, n int) ([]T, error) {
	if fm := f.Mapping(); fm != nil {
		return arena.FileView[T](fm, f.DataOffset+int(t.Offset), n)
	}
	var z T
	if len(data) != n*int(unsafe.Sizeof(z)) {
		return nil, fmt.Errorf("%d bytes do not hold %d values of %d bytes", len(data), n, unsafe.Sizeof(z))
	}
	if n == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(data))), n), nil
}

func addrOf(b []byte) uintptr { return uintptr(unsafe.Pointer(unsafe.SliceData(b))) }

// decodeFloats writes the F32 or F16 little-endian values of src into dst (len(dst) values).
func decodeFloats(dst []float32, src []byte, t gguf.GGMLType) {
	if t == gguf.TypeF16 {
		tab := fp16Table()
		for i := range dst {
			dst[i] = tab[uint16(src[2*i])|uint16(src[2*i+1])<<8]
		}
		return
	}
	for i := range dst {
		b := src[4*i : 4*i+4]
		dst[i] = math.Float32frombits(uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24)
	}
}

var (
	fp16Once sync.Once
	fp16Tab  *[1 << 16]float32
)

// fp16Table is every fp16 value as float32 (256 KiB, made once).
func fp16Table() *[1 << 16]float32 {
	fp16Once.Do(func() {
		t := new([1 << 16]float32)
		for i := range t {
			t[i] = kernelrt.FP16ToFP32(uint16(i))
		}
		fp16Tab = t
	})
	return fp16Tab
}

// ---- the forward pass's GGUF-only paths (model.go calls them) ----

// gemvF32er is the optional float GEMV of an Exec (Serial and Runtime both have it).
type gemvF32er interface {
	GemvF32(y, w, x []float32, rows, cols int) error
}

// gemvF32 is e's GemvF32 if it has one, else the serial kernel.
func gemvF32(e Exec, y, w, x []float32, rows, cols int) error {
	if g, ok := e.(gemvF32er); ok {
		return g.GemvF32(y, w, x, rows, cols)
	}
	return kernelrt.GemvF32(y, w, x, rows, cols)
}

// f32RowBlock is the weight bytes a float matmul of several tokens keeps in cache at once.
const f32RowBlock = 512 << 10

// matmulF32 computes y = W x (+bias) for T tokens of float activations x and an F32 (or
// converted F16) matrix. For F16 the activations are first rounded to fp16, as ggml converts
// them to the weights' vec_dot type before the dot products. Several tokens go block of rows
// by block of rows, each block multiplying every token while it is in cache.
func (m *Model) matmulF32(e Exec, w *Matrix, y, x, bias []float32, T int) error {
	R, C := w.Rows, w.Cols
	y, x = y[:T*R], x[:T*C]
	if w.Type == F16 {
		if len(m.xr) < len(x) {
			return fmt.Errorf("orchestrator: %s: no fp16 activation buffer for %d floats", w.Name, len(x))
		}
		r := m.xr[:len(x)]
		for i, v := range x {
			r[i] = kernelrt.FP16ToFP32(kernelrt.FP32ToFP16(v))
		}
		x = r
	}
	if T == 1 {
		if err := gemvF32(e, y, w.F32, x, R, C); err != nil {
			return err
		}
	} else {
		rb := max(1, f32RowBlock/(4*C))
		for r0 := 0; r0 < R; r0 += rb {
			r1 := min(R, r0+rb)
			for t := 0; t < T; t++ {
				if err := gemvF32(e, y[t*R+r0:t*R+r1], w.F32[r0*C:r1*C], x[t*C:(t+1)*C], r1-r0, C); err != nil {
					return err
				}
			}
		}
	}
	if bias != nil {
		for t := 0; t < T; t++ {
			yt := y[t*R : (t+1)*R]
			for i, b := range bias[:R] {
				yt[i] += b
			}
		}
	}
	return nil
}

// embedRows looks tokens up in a Q5_0, F32 or F16 embedding table (Q8_0 goes through the
// EmbedQ8_0 kernel), one row per token.
func (m *Model) embedRows(out []float32, ids []int32) error {
	t := m.Embed
	H := t.Cols
	for i, id := range ids {
		if id < 0 || int(id) >= t.Rows {
			return fmt.Errorf("orchestrator: token %d at index %d is outside the vocabulary (0..%d)", id, i, t.Rows-1)
		}
		row := out[i*H : (i+1)*H]
		switch t.Type {
		case Q5_0:
			nb := H / kernelrt.QK
			if err := kernelrt.DequantizeQ5_0(row, t.Q5[int(id)*nb:(int(id)+1)*nb]); err != nil {
				return err
			}
		case F32, F16:
			copy(row, t.F32[int(id)*H:(int(id)+1)*H])
		default:
			return fmt.Errorf("orchestrator: embedding %s of type %s has no row lookup", t.Name, t.Type)
		}
	}
	return nil
}

// attendF16 is the attention step over an F16 KV cache: it stores the T tokens' keys and
// values of layer li as fp16, expands the layer's cache (positions 0..pos0+T-1) into the one
// float32 cache, and runs the attention kernel on it.
func (m *Model) attendF16(e Exec, li int, att, qv, kv, vv []float32, T, qs, ks, vs, pos0 int) error {
	c := &m.Cfg
	hd, nkv, ctx := c.HeadDim, c.KVHeads, c.MaxCtx
	if pos0+T > ctx {
		return fmt.Errorf("orchestrator: KV append of %d tokens at position %d would pass MaxCtx = %d", T, pos0, ctx)
	}
	kc, vc := m.kc16[li], m.vc16[li]
	for t := 0; t < T; t++ {
		for g := 0; g < nkv; g++ {
			dst := (g*ctx + pos0 + t) * hd
			toFP16(kc[dst:dst+hd], kv[t*ks+g*hd:t*ks+(g+1)*hd])
			toFP16(vc[dst:dst+hd], vv[t*vs+g*hd:t*vs+(g+1)*hd])
		}
	}
	kf, vf := m.kc[0], m.vc[0]
	m.expand = expandTask{k16: kc, v16: vc, k: kf, v: vf, nkv: nkv, span: ctx * hd, n: (pos0 + T) * hd, tab: fp16Table()}
	if p, ok := e.(pooled); ok && m.expand.nkv*m.expand.n >= expandParallelMin {
		p.Pool().Dispatch(&m.expand)
	} else {
		m.expand.Run(0, 1)
	}
	return e.Attention(att, qv, kf, vf, m.attScratch, T, qs, c.Heads, nkv, hd, ctx, pos0)
}

// expandParallelMin is the fewest values an F16 cache expansion splits over the pool for.
var expandParallelMin = 1 << 15

// pooled is an Exec with a thread pool (the Runtime), which expands an F16 cache in parallel.
type pooled interface {
	Pool() *threadpool.Pool
}

// expandTask converts the first n values of each of nkv spans (one per KV head) of the
// fp16 caches into the float32 ones; worker ith of nth takes a share of every span.
type expandTask struct {
	k16, v16 []uint16
	k, v     []float32
	nkv      int
	span, n  int
	tab      *[1 << 16]float32
}

func (x *expandTask) Run(ith, nth int) {
	lo, hi := x.n*ith/nth, x.n*(ith+1)/nth
	for g := 0; g < x.nkv; g++ {
		a, b := g*x.span+lo, g*x.span+hi
		fromFP16(x.k[a:b], x.k16[a:b], x.tab)
		fromFP16(x.v[a:b], x.v16[a:b], x.tab)
	}
}

func toFP16(dst []uint16, src []float32) {
	for i, v := range src[:len(dst)] {
		dst[i] = kernelrt.FP32ToFP16(v)
	}
}

func fromFP16(dst []float32, src []uint16, tab *[1 << 16]float32) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = tab[h]
	}
}

// KV is the model's KV cache type.
func (m *Model) KV() KVType {
	if m.kv16 {
		return KVF16
	}
	return KVF32
}

// KVBytes is the memory of the KV cache proper (every layer's keys and values); an F16
// cache also uses one layer's float32 cache, counted in KVScratchBytes.
func (m *Model) KVBytes() int {
	c := &m.Cfg
	per := 2 * c.Layers * c.KVHeads * c.MaxCtx * c.HeadDim
	if m.kv16 {
		return per * 2
	}
	return per * 4
}

// KVScratchBytes is the float32 buffer an F16 cache is expanded into (0 for an F32 cache).
func (m *Model) KVScratchBytes() int {
	if !m.kv16 {
		return 0
	}
	c := &m.Cfg
	return 2 * c.KVHeads * c.MaxCtx * c.HeadDim * 4
}

// ---- writing GGUF files ----

// SyntheticGGUF adds to b the metadata and tensors of a Qwen2 model of shape cfg with seeded
// random weights stored as recipe says (q, k, v and gate, up as separate tensors, as GGUF
// stores them), streamed while b writes: a 0.5B model is written without being held in
// memory. Norms are near 1, biases small, quantized blocks random with scales as
// NewSynthetic's. cfg.MaxCtx becomes context_length.
func SyntheticGGUF(b *gguf.Builder, cfg Config, recipe Recipe, seed uint64) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	for _, t := range []QType{recipe.Q, recipe.K, recipe.V, recipe.O, recipe.Gate, recipe.Up, recipe.Down, recipe.Embedded} {
		if !t.quantized() {
			return fmt.Errorf("orchestrator: SyntheticGGUF writes Q8_0 and Q5_0 weights, recipe %q has %s", recipe.Name, t)
		}
	}
	c := cfg
	kvs := []struct {
		k string
		v gguf.Value
	}{
		{"general.architecture", gguf.String("qwen2")},
		{"general.name", gguf.String("kernelrt synthetic " + recipe.Name)},
		{"qwen2.block_count", gguf.Uint32(uint32(c.Layers))},
		{"qwen2.context_length", gguf.Uint32(uint32(c.MaxCtx))},
		{"qwen2.embedding_length", gguf.Uint32(uint32(c.Hidden))},
		{"qwen2.feed_forward_length", gguf.Uint32(uint32(c.Intermediate))},
		{"qwen2.attention.head_count", gguf.Uint32(uint32(c.Heads))},
		{"qwen2.attention.head_count_kv", gguf.Uint32(uint32(c.KVHeads))},
		{"qwen2.rope.freq_base", gguf.Float32(float32(c.RopeTheta))},
		{"qwen2.attention.layer_norm_rms_epsilon", gguf.Float32(c.Eps)},
		{"qwen2.vocab_size", gguf.Uint32(uint32(c.Vocab))},
	}
	for _, kv := range kvs {
		if err := b.AddKV(kv.k, kv.v); err != nil {
			return err
		}
	}
	rng := seed*0x9E3779B97F4A7C15 + 1
	next := func() uint64 { // a distinct stream per tensor, made when the tensor is added
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return rng | 1
	}
	ggml := map[QType]gguf.GGMLType{Q8_0: gguf.TypeQ8_0, Q5_0: gguf.TypeQ5_0}
	matrix := func(name string, t QType, rows, cols int) error {
		s := next()
		return b.AddTensorFunc(name, ggml[t], []uint64{uint64(cols), uint64(rows)}, func(w io.Writer) error {
			return writeBlocks(w, t, rows*cols/kernelrt.QK, s)
		})
	}
	vector := func(name string, n int, center, spread float32) error {
		s := next()
		v := make([]float32, n)
		for i := range v {
			v[i] = center + spread*(2*uniform(&s)-1)
		}
		return b.AddTensor(name, gguf.TypeF32, []uint64{uint64(n)}, bytesOf(v))
	}
	qd, kd, vd := c.qkvDims()
	H, I := c.Hidden, c.Intermediate
	if err := matrix("token_embd.weight", recipe.Embedded, c.Vocab, H); err != nil {
		return err
	}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		for _, err := range []error{
			vector(p+"attn_norm.weight", H, 1, 0.1),
			matrix(p+"attn_q.weight", recipe.Q, qd, H),
			vector(p+"attn_q.bias", qd, 0, 0.02),
			matrix(p+"attn_k.weight", recipe.K, kd, H),
			vector(p+"attn_k.bias", kd, 0, 0.02),
			matrix(p+"attn_v.weight", recipe.V, vd, H),
			vector(p+"attn_v.bias", vd, 0, 0.02),
			matrix(p+"attn_output.weight", recipe.O, H, qd),
			vector(p+"ffn_norm.weight", H, 1, 0.1),
			matrix(p+"ffn_gate.weight", recipe.Gate, I, H),
			matrix(p+"ffn_up.weight", recipe.Up, I, H),
			matrix(p+"ffn_down.weight", recipe.Down, H, I),
		} {
			if err != nil {
				return err
			}
		}
	}
	return vector("output_norm.weight", H, 1, 0.1)
}

// writeBlocks streams n random blocks of type t (as NewSynthetic's fillBlocks makes them).
func writeBlocks(w io.Writer, t QType, n int, seed uint64) error {
	bb := t.blockBytes()
	per := max(1, (256<<10)/bb)
	buf := make([]byte, per*bb)
	s := seed
	for n > 0 {
		k := min(n, per)
		chunk := buf[:k*bb]
		fillBlocks(chunk, t, 0.02*math.Sqrt(3), &s)
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		n -= k
	}
	return nil
}
