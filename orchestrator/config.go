// Package orchestrator runs decoder-only transformers (prefill and decode) of the qwen2,
// qwen3, llama and gemma3 families (Architectures) on kernelrt: every op through a
// kernelrt.Ops (a Runtime, or the serial kernels; only scalar multiplies, such as gemma's
// embedding scale, are plain Go loops), every byte from one arena laid out by a plan before
// it is mapped. NewSynthetic builds one with random weights; LoadGGUF builds one from a GGUF
// file, its weights copied into the arena in decode order or (LoadOptions.MapWeights) used in
// place from the file's read-only mapping (load.go, bind.go).
package orchestrator

import (
	"fmt"
	"math"

	"github.com/kernelrt/kernelrt"
)

// Config is the shape of a decoder.
type Config struct {
	// Arch is the architecture (general.architecture): "qwen2" (the default when empty),
	// "qwen3", "llama", "gemma2" or "gemma3"; see Architectures.
	Arch         string
	Layers       int
	Hidden       int
	Intermediate int
	Heads        int
	KVHeads      int
	// HeadDim is the size of a query, key and value head; Heads*HeadDim need not be Hidden
	// (Qwen3-0.6B: 16 heads of 128 over a hidden size of 1024).
	HeadDim   int
	Vocab     int
	RopeTheta float64
	// RopeScale is the linear RoPE scaling factor of the global layers (rope.scaling.factor:
	// positions divided by it); 0 and 1 mean none.
	RopeScale float64
	// SlidingWindow is the number of positions a sliding-window layer attends to (itself
	// and the window-1 before it); required (positive) for architectures with such layers
	// (gemma2, gemma3, which of its layers: the architecture's), 0 otherwise.
	SlidingWindow int
	// AttnSoftcap and FinalSoftcap soft-cap the scaled attention scores and the output
	// logits, x = c*tanh(x/c) (gemma2's attn_logit_softcapping and final_logit_softcapping);
	// required (positive) for architectures that soft-cap, 0 otherwise.
	AttnSoftcap, FinalSoftcap float32
	Eps                       float32
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

// Qwen3_0_6B is the shape of Qwen3-0.6B with a 2048-token cache and 128-token prefill
// batches: 28 layers, hidden 1024, FFN 3072, 16 query heads over 8 KV heads of 128 (q is
// 2048 wide), vocabulary 151936, RoPE base 1e6.
func Qwen3_0_6B() Config {
	return Config{Arch: "qwen3", Layers: 28, Hidden: 1024, Intermediate: 3072, Heads: 16, KVHeads: 8, HeadDim: 128,
		Vocab: 151936, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 2048, MaxBatch: 128}
}

// Gemma2_2B is the shape of Gemma 2 2B with a 2048-token cache and 128-token prefill
// batches: 26 layers, hidden 2304, FFN 9216, 8 query heads over 4 KV heads of 256,
// vocabulary 256000, RoPE base 1e4 on every layer, layers 0, 2, 4, ... sliding over a window
// of 4096, attention scores soft-capped at 50 and logits at 30.
func Gemma2_2B() Config {
	return Config{Arch: "gemma2", Layers: 26, Hidden: 2304, Intermediate: 9216, Heads: 8, KVHeads: 4, HeadDim: 256,
		Vocab: 256000, RopeTheta: 1e4, SlidingWindow: 4096, AttnSoftcap: 50, FinalSoftcap: 30, Eps: 1e-6,
		MaxCtx: 2048, MaxBatch: 128}
}

// Gemma3_1B is the shape of Gemma 3 1B with a 2048-token cache and 128-token prefill
// batches: 26 layers, hidden 1152, FFN 6912, 4 query heads over 1 KV head of 256,
// vocabulary 262144, RoPE base 1e6 on the global layers (every sixth) and 1e4 on the
// sliding-window ones, whose window is 512.
func Gemma3_1B() Config {
	return Config{Arch: "gemma3", Layers: 26, Hidden: 1152, Intermediate: 6912, Heads: 4, KVHeads: 1, HeadDim: 256,
		Vocab: 262144, RopeTheta: 1e6, SlidingWindow: 512, Eps: 1e-6, MaxCtx: 2048, MaxBatch: 128}
}

// ropeScale is RopeScale with 0 meaning 1.
func (c Config) ropeScale() float64 {
	if c.RopeScale == 0 {
		return 1
	}
	return c.RopeScale
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
	if !(c.RopeScale >= 0) || math.IsInf(c.RopeScale, 0) {
		return fmt.Errorf("orchestrator: Config.RopeScale must be finite and >= 0 (0: none), got %g", c.RopeScale)
	}
	switch a := c.arch(); {
	case a.swaPeriod > 0 && (c.SlidingWindow <= 0 || c.SlidingWindow > MaxContext):
		return fmt.Errorf("orchestrator: Config.SlidingWindow = %d: architecture %s needs a window of 1..%d positions", c.SlidingWindow, a.name, MaxContext)
	case a.swaPeriod == 0 && c.SlidingWindow != 0:
		return fmt.Errorf("orchestrator: Config.SlidingWindow = %d: architecture %s has no sliding-window layers (want 0)", c.SlidingWindow, a.name)
	}
	for _, sc := range []struct {
		name string
		v    float32
	}{{"AttnSoftcap", c.AttnSoftcap}, {"FinalSoftcap", c.FinalSoftcap}} {
		switch a := c.arch(); {
		case a.softcaps && (!(sc.v > 0) || sc.v > math.MaxFloat32):
			return fmt.Errorf("orchestrator: Config.%s = %g: architecture %s needs a positive, finite soft-cap", sc.name, sc.v, a.name)
		case !a.softcaps && sc.v != 0:
			return fmt.Errorf("orchestrator: Config.%s = %g: architecture %s does not soft-cap (want 0)", sc.name, sc.v, a.name)
		}
	}
	return nil
}

// QType is a weight storage type.
type QType int

// Weight types the decoder computes with, as GGUF stores them (ggml's blocks, used in place).
// The blocks of 32 (Q8_0, Q5_0, Q4_0, Q4_1, Q5_1, IQ4_NL) multiply Q8_0-quantized activations and the
// K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K) and IQ4_XS (super-blocks of 256, so a matrix's cols must be a
// multiple of 256) Q8_K-quantized ones, as ggml does. F32, F16 and BF16 matrices are held as float32 (F16
// and BF16 converted once at load) and multiply float activations, rounded first to fp16 for
// F16 and to bf16 for BF16, as ggml rounds them to the weights' dot-product type. Q4_1 is
// held as Q5_1 (the same d and m, a zero fifth bit: exact), for which kernels exist. IQ4_XS has
// kernels of its own and is used in place, as the K-quants.
// NewSynthetic builds Q8_0 and Q5_0 only; GGUF models (LoadGGUF) use all of them.
const (
	Q8_0 QType = iota
	Q5_0
	F32
	F16
	Q4_0
	Q4_1
	Q5_1
	Q4_K
	Q5_K
	Q6_K
	BF16
	IQ4_NL
	Q3_K
	IQ4_XS
	Q2_K
	numQTypes
)

var qtypeNames = [numQTypes]string{Q8_0: "q8_0", Q5_0: "q5_0", F32: "f32", F16: "f16", Q4_0: "q4_0", Q4_1: "q4_1",
	Q5_1: "q5_1", Q4_K: "q4_K", Q5_K: "q5_K", Q6_K: "q6_K", BF16: "bf16", IQ4_NL: "iq4_nl", Q3_K: "q3_K",
	IQ4_XS: "iq4_xs", Q2_K: "q2_K"}

func (q QType) String() string {
	if q >= 0 && q < numQTypes {
		return qtypeNames[q]
	}
	return fmt.Sprintf("QType(%d)", int(q))
}

// actKind is the form of the activations a weight type multiplies.
type actKind int

const (
	actQ8_0 actKind = iota // Q8_0 blocks of 32
	actQ8K                 // Q8_K super-blocks of 256
	actF32                 // float32
	actF16                 // float32 rounded to fp16
	actBF16                // float32 rounded to bf16
)

// act is the activation form q multiplies.
func (q QType) act() actKind {
	switch q {
	case Q4_K, Q5_K, Q6_K, Q3_K, Q2_K, IQ4_XS:
		return actQ8K
	case F32:
		return actF32
	case F16:
		return actF16
	case BF16:
		return actBF16
	}
	return actQ8_0
}

// blockLen is the number of weights in one block (256 for the K-quants and IQ4_XS; 32
// otherwise, also for the float types, whose "block" is 32 floats).
func (q QType) blockLen() int {
	if q.act() == actQ8K {
		return kernelrt.QKK
	}
	return kernelrt.QK
}

// blockBytes is the size in memory of one block of blockLen weights (F16 and BF16 are held as
// float32 after load, Q4_1 as Q5_1).
func (q QType) blockBytes() int {
	switch q {
	case IQ4_XS:
		return 136
	case Q8_0:
		return 34
	case Q5_0:
		return 22
	case Q4_0, IQ4_NL:
		return 18
	case Q4_1, Q5_1:
		return 24
	case Q4_K:
		return 144
	case Q5_K:
		return 176
	case Q6_K:
		return 210
	case Q3_K:
		return 110
	case Q2_K:
		return 84
	}
	return 4 * 32
}

// Recipe is the storage type of each weight tensor (for a loaded file, of layer 0's).
type Recipe struct {
	Name                                 string
	Q, K, V, O, Gate, Up, Down, Embedded QType // Embedded: token embedding (= the output head unless Untied)
	// Untied gives the model a separate output head (output.weight) of type Output.
	Untied bool
	Output QType
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
