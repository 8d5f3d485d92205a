// Package orchestrator runs decoder-only transformers (prefill and decode) of the qwen2 and
// llama families on kernelrt: every op through a kernelrt.Ops (a Runtime, or the serial
// kernels), every byte from one arena laid out by a plan before it is mapped. NewSynthetic
// builds one with random weights; LoadGGUF builds one from a GGUF file, whose quantized
// weights are used in place from the file's read-only mapping (load.go, bind.go).
package orchestrator

import (
	"fmt"

	"github.com/kernelrt/kernelrt"
)

// Config is the shape of a decoder.
type Config struct {
	// Arch is the architecture (general.architecture): "qwen2" (the default when empty) or
	// "llama"; see Architectures.
	Arch         string
	Layers       int
	Hidden       int
	Intermediate int
	Heads        int
	KVHeads      int
	HeadDim      int
	Vocab        int
	RopeTheta    float64
	Eps          float32
	// MaxCtx is the number of KV-cache positions; decoding past it is an error.
	MaxCtx int
	// MaxBatch is the most tokens one forward call takes; activation buffers are sized for it
	// and longer prompts are prefilled in chunks.
	MaxBatch int
	// AllLogits makes Prefill compute logits for every prompt position (as a GGUF runner
	// comparing with llama.cpp needs), not only the last one.
	AllLogits bool
	// Slots is the number of sequences the KV cache holds at once (ForwardBatch decodes
	// them together); 0 means 1. Prefill and Decode use slot 0.
	Slots int
	// KV is the KV cache's storage type; the zero value is KVF16 (llama.cpp's default).
	KV KVType
}

// slots is Slots with 0 meaning 1.
func (c Config) slots() int { return max(c.Slots, 1) }

// Qwen2_0_5B is the shape of Qwen2-0.5B (../shared/formats.md) with a 2048-token cache and
// 128-token prefill batches.
func Qwen2_0_5B() Config {
	return Config{Arch: "qwen2", Layers: 24, Hidden: 896, Intermediate: 4864, Heads: 14, KVHeads: 2, HeadDim: 64,
		Vocab: 151936, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 2048, MaxBatch: 128}
}

// Limits of a Config: beyond them the model's memory could not be planned on any machine
// (and sizes computed from them could overflow int).
const (
	// MaxContext bounds MaxCtx (16 Mi positions) and every other dimension.
	MaxContext = 1 << 24
	// MaxBatchTokens bounds MaxBatch.
	MaxBatchTokens = 1 << 16
	// MaxLayers bounds Layers.
	MaxLayers = 1 << 12
	// MaxStateBytes bounds the activations plus the KV cache a config implies (1 TiB).
	MaxStateBytes = 1 << 40
)

// mulCap multiplies non-negative factors and reports whether the product stays <= limit.
func mulCap(limit int, fs ...int) (int, bool) {
	p := 1
	for _, f := range fs {
		if f != 0 && p > limit/f {
			return 0, false
		}
		p *= f
	}
	return p, p <= limit
}

// Llama1B is the shape of Llama 3.2 1B (and of other 2048-wide llama models such as
// SmolLM2-1.7B's width) with a 2048-token cache and 128-token prefill batches: 16 layers,
// hidden 2048, FFN 8192, 32 query heads over 8 KV heads of 64, vocabulary 128256, RoPE base
// 500000.
func Llama1B() Config {
	return Config{Arch: "llama", Layers: 16, Hidden: 2048, Intermediate: 8192, Heads: 32, KVHeads: 8, HeadDim: 64,
		Vocab: 128256, RopeTheta: 500000, Eps: 1e-5, MaxCtx: 2048, MaxBatch: 128}
}

// Validate reports the first field that cannot work.
func (c Config) Validate() error {
	if _, err := archOf(c.Arch); err != nil {
		return fmt.Errorf("orchestrator: Config.Arch: %w", err)
	}
	pos := func(name string, v int) error {
		if v <= 0 {
			return fmt.Errorf("orchestrator: Config.%s must be positive, got %d", name, v)
		}
		return nil
	}
	for _, f := range []struct {
		n string
		v int
	}{{"Layers", c.Layers}, {"Hidden", c.Hidden}, {"Intermediate", c.Intermediate}, {"Heads", c.Heads},
		{"KVHeads", c.KVHeads}, {"HeadDim", c.HeadDim}, {"Vocab", c.Vocab}, {"MaxCtx", c.MaxCtx},
		{"MaxBatch", c.MaxBatch}} {
		if err := pos(f.n, f.v); err != nil {
			return err
		}
	}
	for _, f := range []struct {
		n string
		v int
	}{{"Hidden", c.Hidden}, {"Intermediate", c.Intermediate}, {"Heads*HeadDim", c.Heads * c.HeadDim},
		{"KVHeads*HeadDim", c.KVHeads * c.HeadDim}} {
		if f.v%kernelrt.QK != 0 {
			return fmt.Errorf("orchestrator: Config.%s = %d is not a multiple of %d (quantized blocks)", f.n, f.v, kernelrt.QK)
		}
	}
	for _, f := range []struct {
		n      string
		v, max int
	}{{"Layers", c.Layers, MaxLayers}, {"Hidden", c.Hidden, MaxContext}, {"Intermediate", c.Intermediate, MaxContext},
		{"Heads", c.Heads, MaxContext}, {"HeadDim", c.HeadDim, MaxContext}, {"Vocab", c.Vocab, MaxContext},
		{"MaxCtx", c.MaxCtx, MaxContext}, {"MaxBatch", c.MaxBatch, MaxBatchTokens}, {"Slots", c.slots(), MaxBatchTokens}} {
		if f.v > f.max {
			return fmt.Errorf("orchestrator: Config.%s = %d exceeds the limit %d", f.n, f.v, f.max)
		}
	}
	if c.Heads%c.KVHeads != 0 {
		return fmt.Errorf("orchestrator: Config.Heads = %d is not a multiple of KVHeads = %d", c.Heads, c.KVHeads)
	}
	// The KV cache (float32 keys and values of every layer) and the widest activations.
	if c.Slots < 0 {
		return fmt.Errorf("orchestrator: Config.Slots must be >= 0, got %d", c.Slots)
	}
	if kv, ok := mulCap(MaxStateBytes, 8, c.Layers, c.KVHeads, c.HeadDim, c.MaxCtx, c.slots()); !ok {
		return fmt.Errorf("orchestrator: a KV cache of %d slots x %d layers x %d positions x %d floats needs more than %d bytes (%d)",
			c.slots(), c.Layers, c.MaxCtx, 2*c.KVHeads*c.HeadDim, MaxStateBytes, kv)
	}
	if _, ok := mulCap(MaxStateBytes, 4, max(c.MaxBatch, c.slots()), max(c.Vocab, 2*c.Intermediate, c.Heads*c.HeadDim)); !ok {
		return fmt.Errorf("orchestrator: activations of MaxBatch = %d tokens need more than %d bytes", c.MaxBatch, MaxStateBytes)
	}
	if !c.KV.valid() {
		return fmt.Errorf("orchestrator: Config.KV = %d is not a KV type", int(c.KV))
	}
	// The attention kernels: head sizes in whole 16-float vectors (Q8_0: 32-value blocks).
	if c.HeadDim%16 != 0 || c.HeadDim > kernelrt.AttnMaxHeadDim {
		return fmt.Errorf("orchestrator: Config.HeadDim = %d: attention needs a multiple of 16 up to %d", c.HeadDim, kernelrt.AttnMaxHeadDim)
	}
	if c.KV == KVQ8_0 && c.HeadDim%kernelrt.QK != 0 {
		return fmt.Errorf("orchestrator: Config.HeadDim = %d: a q8_0 KV cache needs a multiple of %d", c.HeadDim, kernelrt.QK)
	}
	if !(c.Eps > 0) {
		return fmt.Errorf("orchestrator: Config.Eps must be positive, got %g", c.Eps)
	}
	if !(c.RopeTheta > 1) {
		return fmt.Errorf("orchestrator: Config.RopeTheta must be > 1, got %g", c.RopeTheta)
	}
	return nil
}

// QType is a weight storage type.
type QType int

// Weight types the decoder computes with. Q8_0 and Q5_0 multiply Q8_0-quantized activations
// (as ggml does); F32 and F16 matrices are held as float32 (an F16 matrix is converted once at
// load) and multiply float activations, rounded to fp16 first for F16 as ggml does.
// NewSynthetic builds Q8_0 and Q5_0 only; GGUF models (LoadGGUF) use all four.
const (
	Q8_0 QType = iota
	Q5_0
	F32
	F16
)

func (q QType) String() string {
	switch q {
	case Q5_0:
		return "q5_0"
	case F32:
		return "f32"
	case F16:
		return "f16"
	}
	return "q8_0"
}

// quantized reports whether q multiplies Q8_0 activations (Q8_0, Q5_0).
func (q QType) quantized() bool { return q == Q8_0 || q == Q5_0 }

// blockBytes is the size in memory of 32 weights (F16 is held as float32 after load).
func (q QType) blockBytes() int {
	switch q {
	case Q5_0:
		return 22
	case F32, F16:
		return 4 * 32
	}
	return 34
}

// Recipe is the storage type of each weight tensor.
type Recipe struct {
	Name                                 string
	Q, K, V, O, Gate, Up, Down, Embedded QType // Embedded: token embedding = tied output head
}

// RecipeQ8_0 stores every tensor as Q8_0.
func RecipeQ8_0() Recipe {
	return Recipe{Name: "q8_0"}
}

// RecipeF16 stores every matrix as F16: the unquantized file llama.cpp's quantizer takes
// as input (SyntheticGGUF only; NewSynthetic builds quantized models).
func RecipeF16() Recipe {
	return Recipe{Name: "f16", Q: F16, K: F16, V: F16, O: F16, Gate: F16, Up: F16, Down: F16, Embedded: F16}
}

// RecipeMixed is llama.cpp's Q5_0 mix: Q5_0 for q/k/o/gate/up/down, Q8_0 for v and the tied
// embedding/output.
func RecipeMixed() Recipe {
	return Recipe{Name: "mixed-q5_0", Q: Q5_0, K: Q5_0, V: Q8_0, O: Q5_0, Gate: Q5_0, Up: Q5_0, Down: Q5_0, Embedded: Q8_0}
}
