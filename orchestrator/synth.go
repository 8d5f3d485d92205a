package orchestrator

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// Synthetic models: seeded random weights in the arena (NewSynthetic) or streamed into a
// GGUF file (SyntheticGGUF), for tests, benchmarks and demos without a download.

// NewSynthetic builds a model of shape cfg with seeded random weights stored as recipe
// says, every byte (weights, activations, KV cache, scratch) in one arena laid out first.
// Weights are random blocks with a per-block scale near 0.02*sqrt(3)/127 (uniform weights of
// standard deviation ~0.02, like trained checkpoints), norms near 1 and small biases. q, k, v
// (and gate, up) are fused into one matrix when they share a type. The KV cache is of type
// cfg.KV (the zero value: F16).
func NewSynthetic(cfg Config, recipe Recipe, seed uint64, opts BuildOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	for _, t := range recipe.types() {
		if t != Q8_0 && t != Q5_0 {
			return nil, fmt.Errorf("orchestrator: synthetic weights are Q8_0 or Q5_0, recipe %q has %s", recipe.Name, t)
		}
	}
	return build(cfg, syntheticTensors(cfg, recipe), &synthSource{seed: seed, r: recipe}, opts)
}

// syntheticTensors lists a synthetic model's tensors, fusing q|k|v and gate|up when their
// types agree (one GEMV instead of three).
func syntheticTensors(c Config, r Recipe) []tensorSpec {
	H, I, V := c.Hidden, c.Intermediate, c.Vocab
	qd, kd, vd := c.qkvDims()
	mat := func(name string, t QType, rows, cols int) tensorSpec {
		return tensorSpec{name: name, dims: []int{cols, rows}, kind: kindMatrix, typ: t}
	}
	s := []tensorSpec{mat("token_embd.weight", r.Embedded, V, H)}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		if r.Q == r.K && r.K == r.V {
			s = append(s, mat(p+"attn_qkv.weight", r.Q, qd+kd+vd, H))
		} else {
			s = append(s, mat(p+"attn_q.weight", r.Q, qd, H), mat(p+"attn_k.weight", r.K, kd, H), mat(p+"attn_v.weight", r.V, vd, H))
		}
		s = append(s, mat(p+"attn_output.weight", r.O, H, qd))
		if r.Gate == r.Up {
			s = append(s, mat(p+"ffn_gate_up.weight", r.Gate, 2*I, H))
		} else {
			s = append(s, mat(p+"ffn_gate.weight", r.Gate, I, H), mat(p+"ffn_up.weight", r.Up, I, H))
		}
		s = append(s, mat(p+"ffn_down.weight", r.Down, H, I))
	}
	if r.Untied {
		s = append(s, mat("output.weight", r.Output, V, H))
	}
	return s
}

// types lists the recipe's matrix types (the output head's when untied).
func (r Recipe) types() []QType {
	t := []QType{r.Q, r.K, r.V, r.O, r.Gate, r.Up, r.Down, r.Embedded}
	if r.Untied {
		t = append(t, r.Output)
	}
	return t
}

// synthSource generates every tensor from the seed and its name, so a tensor's values do
// not depend on the others.
type synthSource struct {
	seed uint64
	r    Recipe
}

func (s *synthSource) stream(name string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(name))
	return (s.seed*0x9E3779B97F4A7C15 ^ h.Sum64()) | 1
}

func (s *synthSource) plan(p *arena.Plan, specs []tensorSpec) error {
	for _, t := range specs {
		p.Add(arena.Buffer{Name: "w." + t.name, ElemSize: t.typ.blockBytes(), Count: t.rows() * t.cols() / kernelrt.QK, Region: arena.Weights})
	}
	return nil
}

func (s *synthSource) matrix(t tensorSpec, a *arena.Arena, l *arena.Layout) (*Matrix, error) {
	mat := &Matrix{Name: t.name, Type: t.typ, Rows: t.rows(), Cols: t.cols()}
	var raw []byte
	var err error
	if t.typ == Q5_0 {
		mat.Q5, err = arena.Get[kernelrt.BlockQ5_0](a, l, "w."+t.name)
		raw = bytesOf(mat.Q5)
	} else {
		mat.Q8, err = arena.Get[kernelrt.BlockQ8_0](a, l, "w."+t.name)
		raw = bytesOf(mat.Q8)
	}
	if err != nil {
		return nil, err
	}
	rng := s.stream(t.name)
	fillBlocks(raw, t.typ, 0.02*math.Sqrt(3), &rng)
	return mat, nil
}

// vectors fills norms near 1 and biases near 0.
func (s *synthSource) vectors(dst []float32, names ...string) error {
	n := len(dst) / len(names)
	for i, name := range names {
		center, spread := float32(1), float32(0.1)
		if len(name) > 5 && name[len(name)-5:] == ".bias" {
			center, spread = 0, 0.02
		}
		rng := s.stream(name)
		for j := range dst[i*n : (i+1)*n] {
			dst[i*n+j] = center + spread*(2*uniform(&rng)-1)
		}
	}
	return nil
}

func (s *synthSource) recipe(*Model) Recipe { return s.r }

// uniform returns a float in [0, 1) from a xorshift64 state.
func uniform(s *uint64) float32 {
	*s ^= *s << 13
	*s ^= *s >> 7
	*s ^= *s << 17
	return float32(*s>>40) / (1 << 24)
}

// fillBlocks writes random quants (every bit pattern is a valid quant) and then a scale per
// block so that values spread over about [-amp, amp].
func fillBlocks(raw []byte, t QType, amp float64, s *uint64) {
	// 8 bytes at a time: the weight region of a 0.5B model is half a gigabyte.
	n8 := len(raw) / 8
	words := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(raw))), n8)
	x := *s
	for i := range words {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		words[i] = x
	}
	for i := n8 * 8; i < len(raw); i++ {
		raw[i] = byte(x >> (i & 7 * 8))
	}
	*s = x
	bb, dOff := fileBlock(t)
	levels := 127.0
	switch t {
	case Q5_0:
		levels = 16
	case IQ4_XS: // values d*(ls-32)*kvalue with |ls-32| <= 32
		levels = 127 * 32
	case Q2_K: // values d*sc*q - dmin*m, sc and m 0..15, q 0..3
		levels = 30
	}
	for off := 0; off+bb <= len(raw); off += bb {
		// Vary the scale by block (0.5x..1.5x) from the block's own first quant byte.
		f := 0.5 + float64(raw[off+2])/255
		binary.LittleEndian.PutUint16(raw[off+dOff:], kernelrt.FP32ToFP16(float32(amp*f/levels)))
		if t == Q2_K { // dmin = 1.5 d: the mean min term cancels the mean scaled quant (11.25 d)
			binary.LittleEndian.PutUint16(raw[off+dOff+2:], kernelrt.FP32ToFP16(float32(1.5*amp*f/levels)))
		}
	}
}

// fileBlock is the size of one block of t as a GGUF file stores it and the offset of its fp16
// scale: Q3_K is ggml's 110-byte block_q3_K with d last, IQ4_XS ggml's 136-byte block_iq4_xs
// with d first; their random scales, quant bits and nibbles are all valid.
func fileBlock(t QType) (size, dOff int) {
	switch t {
	case Q3_K:
		return 110, 108
	case IQ4_XS:
		return 136, 0
	case Q2_K: // ggml's block_q2_K: scales, qs, then d and dmin
		return 84, 80
	}
	return t.blockBytes(), 0
}

// SyntheticGGUF adds to b the metadata and tensors of a model of shape cfg (its Arch) with
// seeded random weights stored as recipe says (q, k, v and gate, up as separate tensors, as
// GGUF stores them; an output.weight head when recipe.Untied), streamed while b writes: a
// 0.5B model is written without being held in memory. A vocabulary of at least
// tokenizer.SyntheticVocabMin tokens also gets a byte-level tokenizer with a ChatML template
// (tokenizer.AddSynthetic). Norms are near 1, biases small, quantized blocks random with
// scales as NewSynthetic's. cfg.MaxCtx becomes context_length.
func SyntheticGGUF(b *gguf.Builder, cfg Config, recipe Recipe, seed uint64) error {
	return SyntheticGGUFWith(b, cfg, recipe, seed, SynthOptions{})
}

// SyntheticGGUFWith is SyntheticGGUF with options (SynthOptions); its zero value writes
// exactly SyntheticGGUF's file.
func SyntheticGGUFWith(b *gguf.Builder, cfg Config, recipe Recipe, seed uint64, o SynthOptions) error {
	if err := cfg.Validate(); err != nil {
		return err
	}
	if err := o.check(recipe); err != nil {
		return err
	}
	for _, t := range recipe.types() {
		if t != Q8_0 && t != Q5_0 && t != F16 && t != IQ4_NL && t != Q3_K && t != IQ4_XS && t != Q2_K {
			return fmt.Errorf("orchestrator: SyntheticGGUF writes Q8_0, Q5_0, IQ4_NL, Q2_K, Q3_K, IQ4_XS and F16 weights, recipe %q has %s", recipe.Name, t)
		}
	}
	c := cfg
	arch := c.arch()
	p := arch.name + "."
	kvs := []struct {
		k string
		v gguf.Value
	}{
		{"general.architecture", gguf.String(arch.name)},
		{"general.name", gguf.String("kernelrt synthetic " + arch.name + " " + recipe.Name)},
		{p + "block_count", gguf.Uint32(uint32(c.Layers))},
		{p + "context_length", gguf.Uint32(uint32(c.MaxCtx))},
		{p + "embedding_length", gguf.Uint32(uint32(c.Hidden))},
		{p + "feed_forward_length", gguf.Uint32(uint32(c.Intermediate))},
		{p + "attention.head_count", gguf.Uint32(uint32(c.Heads))},
		{p + "attention.head_count_kv", gguf.Uint32(uint32(c.KVHeads))},
		{p + "rope.freq_base", gguf.Float32(float32(c.RopeTheta))},
		{p + "attention.layer_norm_rms_epsilon", gguf.Float32(c.Eps)},
		{p + "vocab_size", gguf.Uint32(uint32(c.Vocab))},
	}
	for _, kv := range kvs {
		if err := b.AddKV(kv.k, kv.v); err != nil {
			return err
		}
	}
	var more []error
	if c.Heads*c.HeadDim != c.Hidden { // else llama.cpp's default, embedding_length/head_count
		more = append(more, b.AddKV(p+"attention.key_length", gguf.Uint32(uint32(c.HeadDim))),
			b.AddKV(p+"attention.value_length", gguf.Uint32(uint32(c.HeadDim))))
	}
	if c.SlidingWindow > 0 {
		more = append(more, b.AddKV(p+"attention.sliding_window", gguf.Uint32(uint32(c.SlidingWindow))))
	}
	if c.arch().softcaps {
		more = append(more, b.AddKV(p+"attn_logit_softcapping", gguf.Float32(c.AttnSoftcap)),
			b.AddKV(p+"final_logit_softcapping", gguf.Float32(c.FinalSoftcap)))
	}
	if c.ropeScale() != 1 {
		more = append(more, b.AddKV(p+"rope.scaling.type", gguf.String("linear")),
			b.AddKV(p+"rope.scaling.factor", gguf.Float32(float32(c.RopeScale))))
	}
	for _, err := range more {
		if err != nil {
			return err
		}
	}
	// A byte-level vocabulary, so text goes in and out as with a downloaded model (and
	// llama.cpp, which refuses a file without tokenizer.ggml.*, loads it too).
	if c.Vocab >= tokenizer.SyntheticVocabMin {
		if err := tokenizer.AddSynthetic(b, c.Vocab); err != nil {
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
	ggml := map[QType]gguf.GGMLType{Q8_0: gguf.TypeQ8_0, Q5_0: gguf.TypeQ5_0, F16: gguf.TypeF16, IQ4_NL: gguf.TypeIQ4_NL, Q3_K: gguf.TypeQ3_K,
		IQ4_XS: gguf.TypeIQ4_XS, Q2_K: gguf.TypeQ2_K}
	streams := o.streams(next)
	cb := o.codebook(seed)
	matrix := func(name string, t QType, rows, cols int) error {
		if cols%t.blockLen() != 0 {
			return fmt.Errorf("orchestrator: SyntheticGGUF: %s of type %s has rows of %d values, not a multiple of its block of %d", name, t, cols, t.blockLen())
		}
		s := streams(name)
		return b.AddTensorFunc(name, ggml[t], []uint64{uint64(cols), uint64(rows)}, func(w io.Writer) error {
			if t == F16 && cb != nil && name != "token_embd.weight" && name != "output.weight" {
				return writeF16Codebook(w, cb, rows, cols, s)
			}
			if t == F16 {
				return writeF16(w, rows*cols, s)
			}
			return writeBlocks(w, t, rows*cols/t.blockLen(), s)
		})
	}
	vector := func(name string, n int, center, spread float32) error {
		s := streams(name)
		if name == "output_norm.weight" && o.OutputNormScale != 0 {
			center, spread = center*o.OutputNormScale, spread*o.OutputNormScale
		}
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
		errs := []error{
			vector(p+"attn_norm.weight", H, 1, 0.1),
			matrix(p+"attn_q.weight", recipe.Q, qd, H),
			matrix(p+"attn_k.weight", recipe.K, kd, H),
			matrix(p+"attn_v.weight", recipe.V, vd, H),
		}
		if arch.qkvBias {
			errs = append(errs, vector(p+"attn_q.bias", qd, 0, 0.02), vector(p+"attn_k.bias", kd, 0, 0.02),
				vector(p+"attn_v.bias", vd, 0, 0.02))
		}
		if arch.qkNorm {
			errs = append(errs, vector(p+"attn_q_norm.weight", c.HeadDim, 1, 0.1), vector(p+"attn_k_norm.weight", c.HeadDim, 1, 0.1))
		}
		if arch.postNorms {
			errs = append(errs, vector(p+"post_attention_norm.weight", H, 1, 0.1), vector(p+"post_ffw_norm.weight", H, 1, 0.1))
		}
		errs = append(errs,
			matrix(p+"attn_output.weight", recipe.O, H, qd),
			vector(p+"ffn_norm.weight", H, 1, 0.1),
			matrix(p+"ffn_gate.weight", recipe.Gate, I, H),
			matrix(p+"ffn_up.weight", recipe.Up, I, H),
			matrix(p+"ffn_down.weight", recipe.Down, H, I))
		for _, err := range errs {
			if err != nil {
				return err
			}
		}
	}
	if err := vector("output_norm.weight", H, 1, 0.1); err != nil {
		return err
	}
	if recipe.Untied {
		return matrix("output.weight", recipe.Output, c.Vocab, H)
	}
	return nil
}

// writeF16 streams n fp16 weights uniform over the synthetic blocks' range (standard
// deviation ~0.02): the unquantized source llama.cpp's quantizer turns into any file type.
func writeF16(w io.Writer, n int, seed uint64) error {
	const per = 128 << 10
	buf := make([]byte, 2*min(n, per))
	s, amp := seed, float32(0.02*math.Sqrt(3))
	for n > 0 {
		k := min(n, per)
		for i := range k {
			binary.LittleEndian.PutUint16(buf[2*i:], kernelrt.FP32ToFP16(amp*(2*uniform(&s)-1)))
		}
		if _, err := w.Write(buf[:2*k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// writeBlocks streams n random blocks of type t (as NewSynthetic's fillBlocks makes them).
func writeBlocks(w io.Writer, t QType, n int, seed uint64) error {
	bb, _ := fileBlock(t)
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
