package orchestrator

import (
	"fmt"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
)

// One build path for every model: the architecture lists the tensors a config needs (GGUF
// names), a weight source (synthetic weights, or a GGUF file) says how each is held, and
// build plans one arena for the copied weights, the activations and the KV cache, maps it,
// binds every slice and assembles the layers by tensor name.

// BuildOptions control how a model's memory is mapped.
type BuildOptions struct {
	// Arena options (huge pages policy, prefault, mlock, guard pages).
	Arena arena.Options
}

// tensorKind says which types a tensor may have and how it is held.
type tensorKind int

const (
	kindMatrix tensorKind = iota // a weight matrix: Q8_0, Q5_0, F16, F32
	kindVector                   // a norm or bias: F32, F16, held as float32 in the arena
)

// tensorSpec is one tensor a model needs: its GGUF name and dims in ggml order (row length
// first), and for synthetic weights its type.
type tensorSpec struct {
	name string
	dims []int
	kind tensorKind
	typ  QType
}

// rows and cols of a matrix spec.
func (s tensorSpec) rows() int { return s.dims[len(s.dims)-1] }
func (s tensorSpec) cols() int { return s.dims[0] }

// weightSource provides a model's tensors.
type weightSource interface {
	// plan adds the arena buffers the source needs (weights it copies or generates).
	plan(p *arena.Plan, specs []tensorSpec) error
	// matrix returns the weights of s: a view of a file, or its arena buffer filled now.
	matrix(s tensorSpec, a *arena.Arena, l *arena.Layout) (*Matrix, error)
	// vectors fills dst with the named vector tensors' values, one after the other.
	vectors(dst []float32, names ...string) error
	// recipe describes the weight types of the built model.
	recipe(m *Model) Recipe
}

// build makes a model of config c (MaxCtx, MaxBatch, AllLogits, Slots, KV set) with tensors
// specs from src.
func build(c Config, specs []tensorSpec, src weightSource, opts BuildOptions) (*Model, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	H := c.Hidden
	qd, kd, vd := c.qkvDims()
	a := c.arch()
	var p arena.Plan
	p.Guard = opts.Arena.Guard
	if err := src.plan(&p, specs); err != nil {
		return nil, err
	}
	vec := func(name string, n int) {
		p.Add(arena.Buffer{Name: name, ElemSize: 4, Count: n, Region: arena.Weights})
	}
	for l := 0; l < c.Layers; l++ {
		pre := fmt.Sprintf("blk.%d.", l)
		vec(pre+"attn_norm", H)
		vec(pre+"ffn_norm", H)
		if a.qkvBias {
			vec(pre+"attn_qkv.bias", qd+kd+vd)
		}
		if a.qkNorm {
			vec(pre+"attn_q_norm", c.HeadDim)
			vec(pre+"attn_k_norm", c.HeadDim)
		}
		if a.postNorms {
			vec(pre+"post_attention_norm", H)
			vec(pre+"post_ffw_norm", H)
		}
	}
	vec("output_norm", H)
	anyF16, ropeFreqs, kCols := false, false, 0 // anyF16: some matmul rounds its activations (F16, BF16)
	for _, s := range specs {
		if s.kind == kindMatrix {
			anyF16 = anyF16 || s.typ.act() == actF16 || s.typ.act() == actBF16
			if s.typ.act() == actQ8K {
				kCols = max(kCols, s.cols())
			}
		}
		ropeFreqs = ropeFreqs || s.name == "rope_freqs.weight"
	}
	if ropeFreqs {
		vec("rope_freqs", c.HeadDim/2)
	}
	planState(&p, c, a, anyF16)
	if kCols > 0 { // the Q8_K activations of the widest K-quant matmul, for MaxBatch tokens
		p.Add(arena.Buffer{Name: "act.xq8k", ElemSize: int(unsafe.Sizeof(kernelrt.BlockQ8K{})), Count: c.MaxBatch * kCols / kernelrt.QKK, Region: arena.Activations})
	}
	planKV(&p, c, a)
	layout, err := p.Layout()
	if err != nil {
		return nil, fmt.Errorf("orchestrator: plan: %w", err)
	}
	ar, err := arena.NewFromLayout(layout, opts.Arena)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	m := &Model{Cfg: c, spec: a, arena: ar, layout: layout, Layers: make([]Layer, c.Layers)}
	if err := m.bindWeights(specs, src); err != nil {
		ar.Close()
		return nil, err
	}
	if err := m.bindState(anyF16); err != nil {
		ar.Close()
		return nil, err
	}
	if kCols > 0 {
		if m.xq8k, err = arena.Get[kernelrt.BlockQ8K](ar, layout, "act.xq8k"); err != nil {
			ar.Close()
			return nil, fmt.Errorf("orchestrator: %w", err)
		}
	}
	if err := m.kv.bind(ar, layout, c, a); err != nil {
		ar.Close()
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	m.Recipe = src.recipe(m)
	return m, nil
}

// bindWeights makes every matrix and fills the norms and biases, assembling the layers by
// tensor name: fused attn_qkv / ffn_gate_up when the source has them, separate matrices
// otherwise, and output.weight when present (else the head is tied to token_embd).
func (m *Model) bindWeights(specs []tensorSpec, src weightSource) error {
	byName := map[string]*Matrix{}
	for _, s := range specs {
		if s.kind != kindMatrix {
			continue
		}
		mat, err := src.matrix(s, m.arena, m.layout)
		if err != nil {
			return fmt.Errorf("orchestrator: tensor %q: %w", s.name, err)
		}
		byName[s.name] = mat
	}
	get := func(name string, srcs ...string) ([]float32, error) {
		v, err := arena.Get[float32](m.arena, m.layout, name)
		if err != nil {
			return nil, fmt.Errorf("orchestrator: %w", err)
		}
		if err := src.vectors(v, srcs...); err != nil {
			return nil, fmt.Errorf("orchestrator: %s: %w", name, err)
		}
		return v, nil
	}
	var err error
	for l := range m.Layers {
		pre := fmt.Sprintf("blk.%d.", l)
		ly := &m.Layers[l]
		if ly.AttnNorm, err = get(pre+"attn_norm", pre+"attn_norm.weight"); err != nil {
			return err
		}
		if ly.FFNNorm, err = get(pre+"ffn_norm", pre+"ffn_norm.weight"); err != nil {
			return err
		}
		if m.spec.qkvBias {
			if ly.QKVBias, err = get(pre+"attn_qkv.bias", pre+"attn_q.bias", pre+"attn_k.bias", pre+"attn_v.bias"); err != nil {
				return err
			}
		}
		if m.spec.qkNorm {
			if ly.QNorm, err = get(pre+"attn_q_norm", pre+"attn_q_norm.weight"); err != nil {
				return err
			}
			if ly.KNorm, err = get(pre+"attn_k_norm", pre+"attn_k_norm.weight"); err != nil {
				return err
			}
		}
		if m.spec.postNorms {
			if ly.PostAttnNorm, err = get(pre+"post_attention_norm", pre+"post_attention_norm.weight"); err != nil {
				return err
			}
			if ly.PostFFNNorm, err = get(pre+"post_ffw_norm", pre+"post_ffw_norm.weight"); err != nil {
				return err
			}
		}
		ly.QKV, ly.Q, ly.K, ly.V = byName[pre+"attn_qkv.weight"], byName[pre+"attn_q.weight"], byName[pre+"attn_k.weight"], byName[pre+"attn_v.weight"]
		ly.O = byName[pre+"attn_output.weight"]
		ly.GateUp, ly.Gate, ly.Up = byName[pre+"ffn_gate_up.weight"], byName[pre+"ffn_gate.weight"], byName[pre+"ffn_up.weight"]
		ly.Down = byName[pre+"ffn_down.weight"]
	}
	if m.OutNorm, err = get("output_norm", "output_norm.weight"); err != nil {
		return err
	}
	for _, s := range specs {
		if s.name == "rope_freqs.weight" {
			if m.ropeFactors, err = get("rope_freqs", "rope_freqs.weight"); err != nil {
				return err
			}
		}
	}
	m.Embed = byName["token_embd.weight"]
	m.Output = m.Embed
	if out, ok := byName["output.weight"]; ok {
		m.Output = out
	}
	return nil
}

// planState adds the activations a config needs to p (the KV cache and attention scratch:
// planKV).
func planState(p *arena.Plan, c Config, a *archSpec, fp16Acts bool) {
	H, I, B := c.Hidden, c.Intermediate, c.MaxBatch
	qd, kd, vd := c.qkvDims()
	f32 := func(name string, n int, r arena.Region) {
		p.Add(arena.Buffer{Name: name, ElemSize: 4, Count: n, Region: r})
	}
	blk := func(name string, n int) {
		p.Add(arena.Buffer{Name: name, ElemSize: 34, Count: n / kernelrt.QK, Region: arena.Activations})
	}
	f32("act.x", B*H, arena.Activations)
	f32("act.xn", B*H, arena.Activations)
	f32("act.tmp", B*H, arena.Activations)
	blk("act.xq", B*H)
	f32("act.qkv", B*(qd+kd+vd), arena.Activations)
	f32("act.att", B*qd, arena.Activations)
	if a.qkNorm { // the normalised q and k of a batch, [T][qd] then [T][kd]
		f32("act.qkn", B*(qd+kd), arena.Activations)
	}
	blk("act.attq", B*qd)
	f32("act.gu", B*2*I, arena.Activations)
	f32("act.h", B*I, arena.Activations)
	blk("act.hq", B*I)
	logitRows := c.slots() // one per sequence of a batch
	if c.AllLogits {
		logitRows = max(logitRows, B)
	}
	f32("act.logits", logitRows*c.Vocab, arena.Activations)
	p.Add(arena.Buffer{Name: "act.ids", ElemSize: 4, Count: B, Region: arena.Activations})
	if fp16Acts {
		f32("act.xr", B*max(H, qd, I), arena.Activations)
	}
}

// bindState points m's activation and scratch slices into the arena.
func (m *Model) bindState(fp16Acts bool) error {
	c := &m.Cfg
	var err error
	get := func(name string) []float32 {
		if err != nil {
			return nil
		}
		var s []float32
		s, err = arena.Get[float32](m.arena, m.layout, name)
		return s
	}
	getB := func(name string) []kernelrt.BlockQ8_0 {
		if err != nil {
			return nil
		}
		var s []kernelrt.BlockQ8_0
		s, err = arena.Get[kernelrt.BlockQ8_0](m.arena, m.layout, name)
		return s
	}
	m.x, m.xn, m.tmp = get("act.x"), get("act.xn"), get("act.tmp")
	m.xq = getB("act.xq")
	m.qkv, m.att = get("act.qkv"), get("act.att")
	if m.spec.qkNorm {
		m.qkn = get("act.qkn")
	}
	m.attq = getB("act.attq")
	m.gu, m.h = get("act.gu"), get("act.h")
	m.hq = getB("act.hq")
	m.logits = get("act.logits")
	if fp16Acts {
		m.xr = get("act.xr")
	}
	if err == nil {
		m.ids, err = arena.Get[int32](m.arena, m.layout, "act.ids")
	}
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	// Global layers: RopeTheta, with rope_freqs and the linear scaling as per-pair divisors
	// (llama.cpp divides a pair's angle by both). Sliding layers: their own base, unscaled.
	factors := m.ropeFactors
	if sc := c.ropeScale(); sc != 1 {
		factors = make([]float32, c.HeadDim/2)
		for i := range factors {
			factors[i] = float32(sc)
			if m.ropeFactors != nil {
				factors[i] *= m.ropeFactors[i]
			}
		}
	}
	if m.rope, err = kernelrt.NewRopeTableFactors(c.HeadDim, c.MaxCtx, c.RopeTheta, factors); err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	m.ropeLocal = m.rope
	if m.spec.swaPeriod > 0 && m.spec.swaRopeBase > 0 {
		if m.ropeLocal, err = kernelrt.NewRopeTable(c.HeadDim, c.MaxCtx, m.spec.swaRopeBase); err != nil {
			return fmt.Errorf("orchestrator: %w", err)
		}
	}
	return nil
}
