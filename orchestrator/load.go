package orchestrator

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/gguf"
)

// Loading a model from a GGUF file.
//
// The config comes from the <arch>.* metadata, the tensors are found by name (never by file
// order) and checked against it: a missing, unexpected or misshapen tensor, a type the
// decoder cannot compute with, a missing or ill-typed metadata key are each an error naming
// the key or tensor and the numbers involved. The model is then built as every model is
// (build.go), with the file as its weight source (bind.go).

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
	// Slots is the number of sequences the KV cache holds (Config.Slots); 0 = 1.
	Slots int
	// KV is the KV cache type (Config.KV); the zero value is KVF16, as llama.cpp's default.
	KV KVType
	// File is how LoadGGUF maps the file (WillNeed to read ahead, Mlock).
	File arena.FileOptions
	// Limits bound what parsing the file's metadata may allocate (a hostile file's); the
	// zero value is gguf's default cap.
	Limits gguf.Limits
	// Build controls the arena (activations, KV cache, copied tensors).
	Build BuildOptions
	// MapWeights uses the weight matrices in place, through the read-only file mapping, where
	// their bytes are usable as stored (F16, BF16 and Q4_1 are converted into the arena
	// anyway): pages load lazily as the first tokens touch them and are shared with other
	// processes mapping the file. By default every matrix is copied into the model's arena
	// instead, and the file's pages are then released from the process's resident set. The
	// copy costs load time and anonymous memory the size of the weights, but lays the
	// matrices out in the order a decode step reads them, on huge pages where the system has
	// them: on a Zen 4 VM (THP, ext4) one-thread decode of a Qwen2-0.5B Q8_0 file went from
	// 36-38 to 47-48 tok/s, a third of that from the order and two thirds from huge pages.
	MapWeights bool
}

// Limits on metadata values (a hostile file must not make the loader allocate without bound;
// every dimension is also checked against tensors whose bytes are in the file).
const maxMetaDim = 1 << 24

// LoadGGUF maps the GGUF file at path and builds the model it holds (see Architectures). The
// model owns the mapping: Close unmaps it.
func LoadGGUF(path string, opts LoadOptions) (*Model, error) {
	f, err := gguf.OpenLimited(path, opts.File, opts.Limits)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	m, err := NewFromGGUF(f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("orchestrator: %s: %w", path, trimPrefix(err))
	}
	m.file = f
	if fm := f.Mapping(); fm != nil && !opts.MapWeights {
		// Every tensor is in the arena now: the file's pages need not stay in the process's
		// resident set (they stay in the page cache, and refault if metadata is read again).
		if err := fm.Release(f.DataOffset, fm.Size()-f.DataOffset); err != nil {
			m.Close()
			return nil, fmt.Errorf("orchestrator: %s: %w", path, err)
		}
	}
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

// ConfigFromGGUF reads a config from f's metadata. general.architecture names the family
// (Architectures) and prefixes every key, as in llama.cpp: <arch>.embedding_length,
// block_count, feed_forward_length, attention.head_count, attention.layer_norm_rms_epsilon
// and context_length are required; attention.head_count_kv defaults to head_count and
// rope.freq_base to 10000; the head size is attention.key_length, else embedding_length /
// head_count, and attention.value_length and rope.dimension_count, when present, must equal
// it; rope.scaling.factor (linear scaling) is read as llama.cpp reads it;
// attention.sliding_window is required where the architecture has sliding-window layers; the
// vocabulary size is <arch>.vocab_size or else the length of tokenizer.ggml.tokens. MaxCtx
// is context_length (the trained context), MaxBatch 128.
func ConfigFromGGUF(f *gguf.File) (Config, error) {
	arch, ok := f.GetString("general.architecture")
	if !ok {
		if _, present := f.Get("general.architecture"); present {
			return Config{}, modelErr("metadata key %q is not a string", "general.architecture")
		}
		return Config{}, modelErr("missing metadata key %q", "general.architecture")
	}
	spec, err := archOf(arch)
	if err != nil {
		return Config{}, modelErr("general.architecture: %v", err)
	}
	pre := arch + "."
	u := func(key string, def int) int {
		if err != nil {
			return 0
		}
		var v int
		v, err = metaUint(f, pre+key, def)
		return v
	}
	fl := func(key string, def float64) float64 {
		if err != nil {
			return 0
		}
		var v float64
		v, err = metaFloat(f, pre+key, def)
		return v
	}
	c := Config{Arch: arch, MaxBatch: 128}
	c.Hidden = u("embedding_length", -1)
	c.Layers = u("block_count", -1)
	c.Intermediate = u("feed_forward_length", -1)
	c.Heads = u("attention.head_count", -1)
	c.KVHeads = u("attention.head_count_kv", 0)
	c.MaxCtx = u("context_length", -1)
	c.RopeTheta = fl("rope.freq_base", spec.ropeBase)
	eps := fl("attention.layer_norm_rms_epsilon", -1)
	if err != nil {
		return Config{}, err
	}
	if c.KVHeads == 0 {
		c.KVHeads = c.Heads
	}
	// The head size, as llama.cpp reads it: attention.key_length, else embedding_length /
	// head_count. value_length (default: the same) must equal it, and RoPE must rotate the
	// whole head (rope.dimension_count, default: the head size).
	if _, present := f.Get(pre + "attention.key_length"); present {
		if c.HeadDim, err = metaUint(f, pre+"attention.key_length", -1); err != nil {
			return Config{}, err
		}
	} else {
		if c.Hidden%c.Heads != 0 {
			return Config{}, modelErr("%sembedding_length = %d is not a multiple of %sattention.head_count = %d (and %sattention.key_length is absent)", pre, c.Hidden, pre, c.Heads, pre)
		}
		c.HeadDim = c.Hidden / c.Heads
	}
	if c.Heads%c.KVHeads != 0 {
		return Config{}, modelErr("%sattention.head_count = %d is not a multiple of %sattention.head_count_kv = %d", pre, c.Heads, pre, c.KVHeads)
	}
	for _, key := range []string{"attention.value_length", "rope.dimension_count"} {
		if _, present := f.Get(pre + key); !present {
			continue
		}
		v, err := metaUint(f, pre+key, -1)
		if err != nil {
			return Config{}, err
		}
		if v != c.HeadDim {
			return Config{}, modelErr("%s%s = %d differs from the head size %d; only equal key and value head sizes (and RoPE over the whole head) are supported", pre, key, v, c.HeadDim)
		}
	}
	if !(eps > 0) || eps > 1 {
		return Config{}, modelErr("%sattention.layer_norm_rms_epsilon = %g is not in (0, 1]", pre, eps)
	}
	c.Eps = float32(eps)
	if !(c.RopeTheta > 1) || math.IsInf(c.RopeTheta, 0) {
		return Config{}, modelErr("%srope.freq_base = %g must be finite and > 1", pre, c.RopeTheta)
	}
	if c.RopeScale, err = ropeScaling(f, pre); err != nil {
		return Config{}, err
	}
	if spec.swaPeriod > 0 {
		if c.SlidingWindow, err = metaUint(f, pre+"attention.sliding_window", spec.windowDefault()); err != nil {
			return Config{}, err
		}
	}
	if spec.softcaps {
		if c.AttnSoftcap, c.FinalSoftcap, err = readSoftcaps(f, pre); err != nil {
			return Config{}, err
		}
	}
	// The vocabulary: <arch>.vocab_size, else the token list.
	if _, present := f.Get(pre + "vocab_size"); present {
		if c.Vocab, err = metaUint(f, pre+"vocab_size", -1); err != nil {
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
		return Config{}, modelErr("no vocabulary size: neither %svocab_size nor tokenizer.ggml.tokens is present", pre)
	}
	if err := c.Validate(); err != nil {
		return Config{}, modelErr("the metadata describe an unsupported shape: %s", strings.TrimPrefix(err.Error(), "orchestrator: "))
	}
	return c, nil
}

// ropeScaling reads the linear RoPE scaling factor as llama.cpp does: rope.scaling.factor
// (else the older rope.scale_linear; absent or 0: none), applied when rope.scaling.type is
// "linear" (the default); "none" ignores it. YaRN and LongRoPE are not implemented: a file
// asking for them with a factor other than 1 is refused rather than run unscaled.
func ropeScaling(f *gguf.File, pre string) (float64, error) {
	key := pre + "rope.scaling.factor"
	if _, ok := f.Get(key); !ok {
		key = pre + "rope.scale_linear"
	}
	factor, err := metaFloat(f, key, 0)
	if err != nil {
		return 0, err
	}
	if factor < 0 || math.IsNaN(factor) || math.IsInf(factor, 0) {
		return 0, modelErr("%s = %g must be finite and >= 0", key, factor)
	}
	typ := "linear"
	if v, ok := f.Get(pre + "rope.scaling.type"); ok {
		if typ, ok = v.AsString(); !ok {
			return 0, modelErr("metadata key %q is %s, want a string", pre+"rope.scaling.type", v.Type())
		}
	}
	switch {
	case typ == "none":
		return 0, nil
	case typ == "linear", factor == 0 || factor == 1:
		return factor, nil
	}
	return 0, modelErr("%srope.scaling.type = %q with factor %g: only linear RoPE scaling is supported", pre, typ, factor)
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

// ggmlTypes maps the GGUF types the decoder computes with to its own.
var ggmlTypes = map[gguf.GGMLType]QType{
	gguf.TypeQ8_0: Q8_0, gguf.TypeQ5_0: Q5_0, gguf.TypeQ4_0: Q4_0, gguf.TypeQ4_1: Q4_1, gguf.TypeQ5_1: Q5_1,
	gguf.TypeQ3_K: Q3_K, gguf.TypeQ4_K: Q4_K, gguf.TypeQ5_K: Q5_K, gguf.TypeQ6_K: Q6_K, gguf.TypeIQ4_NL: IQ4_NL,
	gguf.TypeIQ4_XS: IQ4_XS, gguf.TypeF32: F32, gguf.TypeF16: F16, gguf.TypeBF16: BF16, gguf.TypeQ2_K: Q2_K,
}

// qtypeOf maps a GGUF type to the decoder's, for the types it computes with.
func qtypeOf(t gguf.GGMLType) (QType, bool) {
	q, ok := ggmlTypes[t]
	return q, ok
}

// supportedTypes lists the GGUF weight types the decoder computes with, for errors.
func supportedTypes() string {
	var names []string
	for t := range gguf.GGMLType(64) {
		if _, ok := ggmlTypes[t]; ok {
			names = append(names, t.String())
		}
	}
	return strings.Join(names, ", ")
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
		if t.Type != gguf.TypeF32 && t.Type != gguf.TypeF16 && t.Type != gguf.TypeBF16 {
			return modelErr("tensor %q has type %s; norms and biases must be F32, F16 or BF16", t.Name, t.Type)
		}
		return nil
	}
	q, ok := qtypeOf(t.Type)
	if !ok {
		return modelErr("tensor %q has type %s, which kernelrt cannot compute with; supported weight types are %s", t.Name, t.Type, supportedTypes())
	}
	if n := q.blockLen(); t.Cols()%n != 0 {
		return modelErr("tensor %q of type %s has rows of %d values, not a multiple of its block of %d", t.Name, t.Type, t.Cols(), n)
	}
	return nil
}

// NewFromGGUF builds the model of an open GGUF file (from gguf.Open, or gguf.Parse of
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
	c.Slots = opts.Slots
	if !opts.KV.valid() {
		return nil, fmt.Errorf("orchestrator: LoadOptions.KV = %d is not a KV type", int(opts.KV))
	}
	c.KV = opts.KV
	if c.Layers > len(f.Tensors) { // every layer has 12 tensors: bound before allocating
		return nil, modelErr("%s.block_count = %d but the file has only %d tensors", c.Arch, c.Layers, len(f.Tensors))
	}
	// Tensors, by name: all present, of the right shape and type, and nothing else.
	_, untied := f.Tensor("output.weight")
	_, ropeFreqs := f.Tensor("rope_freqs.weight")
	specs := c.tensorSpecs(untied, ropeFreqs)
	src := &fileSource{f: f, infos: make(map[string]*gguf.TensorInfo, len(specs)), mapWeights: opts.MapWeights}
	for i, s := range specs {
		t, ok := f.Tensor(s.name)
		if !ok {
			return nil, modelErr("missing tensor %q (%s.block_count = %d)", s.name, c.Arch, c.Layers)
		}
		if err := checkTensor(t, s, c); err != nil {
			return nil, err
		}
		src.infos[s.name] = t
		if s.kind == kindMatrix {
			specs[i].typ, _ = qtypeOf(t.Type)
		}
	}
	for i := range f.Tensors {
		if _, ok := src.infos[f.Tensors[i].Name]; !ok {
			return nil, modelErr("unexpected tensor %q: not part of a %s model with block_count = %d", f.Tensors[i].Name, c.Arch, c.Layers)
		}
	}
	return build(c, specs, src, opts.Build)
}
