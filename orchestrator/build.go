package orchestrator

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
)

// BuildOptions control how a model's memory is mapped.
type BuildOptions struct {
	// Arena options (huge pages policy, prefault, mlock, guard pages).
	Arena arena.Options
}

// planState adds the activations, KV cache and scratch a config needs to p.
func planState(p *arena.Plan, c Config) {
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
	blk("act.attq", B*qd)
	f32("act.gu", B*2*I, arena.Activations)
	f32("act.h", B*I, arena.Activations)
	blk("act.hq", B*I)
	logitRows := 1
	if c.AllLogits {
		logitRows = B
	}
	f32("act.logits", logitRows*c.Vocab, arena.Activations)
	p.Add(arena.Buffer{Name: "act.ids", ElemSize: 4, Count: B, Region: arena.Activations})
	for l := 0; l < c.Layers; l++ {
		f32(fmt.Sprintf("kv.%d.k", l), c.KVHeads*c.MaxCtx*c.HeadDim, arena.KV)
		f32(fmt.Sprintf("kv.%d.v", l), c.KVHeads*c.MaxCtx*c.HeadDim, arena.KV)
	}
	// The caller's (worker 0's) attention scores; the Runtime's other workers use the
	// per-worker scratch of the Runtime's own arena.
	f32("scratch.attn", c.MaxCtx, arena.Scratch)
}

// bindState points m's activation, KV and scratch slices into the arena.
func (m *Model) bindState() error {
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
	m.attq = getB("act.attq")
	m.gu, m.h = get("act.gu"), get("act.h")
	m.hq = getB("act.hq")
	m.logits = get("act.logits")
	m.attScratch = get("scratch.attn")
	if err == nil {
		m.ids, err = arena.Get[int32](m.arena, m.layout, "act.ids")
	}
	m.kc = make([][]float32, c.Layers)
	m.vc = make([][]float32, c.Layers)
	for l := 0; l < c.Layers; l++ {
		m.kc[l] = get(fmt.Sprintf("kv.%d.k", l))
		m.vc[l] = get(fmt.Sprintf("kv.%d.v", l))
	}
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	m.rope, err = kernelrt.NewRopeTable(c.HeadDim, c.MaxCtx, c.RopeTheta)
	if err != nil {
		return fmt.Errorf("orchestrator: %w", err)
	}
	return nil
}

// NewSynthetic builds a model of shape cfg with seeded random weights stored as recipe
// says, every byte (weights, activations, KV cache, scratch) in one arena laid out first.
// Weights are random blocks with a per-block scale near 0.02*sqrt(3)/127 (uniform weights of
// standard deviation ~0.02, like trained checkpoints), norms near 1 and small biases.
func NewSynthetic(cfg Config, recipe Recipe, seed uint64, opts BuildOptions) (*Model, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if recipe.Embedded != Q8_0 {
		return nil, fmt.Errorf("orchestrator: the embedding must be Q8_0 (EmbedQ8_0), recipe %q says %s", recipe.Name, recipe.Embedded)
	}
	c := cfg
	H, I := c.Hidden, c.Intermediate
	qd, kd, vd := c.qkvDims()
	var p arena.Plan
	p.Guard = opts.Arena.Guard
	type matSpec struct {
		name       string
		t          QType
		rows, cols int
	}
	fuseQKV := recipe.Q == recipe.K && recipe.K == recipe.V
	fuseGU := recipe.Gate == recipe.Up
	var mats []matSpec
	for l := 0; l < c.Layers; l++ {
		pre := fmt.Sprintf("blk.%d.", l)
		if fuseQKV {
			mats = append(mats, matSpec{pre + "attn_qkv", recipe.Q, qd + kd + vd, H})
		} else {
			mats = append(mats, matSpec{pre + "attn_q", recipe.Q, qd, H}, matSpec{pre + "attn_k", recipe.K, kd, H},
				matSpec{pre + "attn_v", recipe.V, vd, H})
		}
		mats = append(mats, matSpec{pre + "attn_output", recipe.O, H, qd})
		if fuseGU {
			mats = append(mats, matSpec{pre + "ffn_gate_up", recipe.Gate, 2 * I, H})
		} else {
			mats = append(mats, matSpec{pre + "ffn_gate", recipe.Gate, I, H}, matSpec{pre + "ffn_up", recipe.Up, I, H})
		}
		mats = append(mats, matSpec{pre + "ffn_down", recipe.Down, H, I})
		p.Add(arena.Buffer{Name: pre + "attn_norm", ElemSize: 4, Count: H, Region: arena.Weights})
		p.Add(arena.Buffer{Name: pre + "ffn_norm", ElemSize: 4, Count: H, Region: arena.Weights})
		p.Add(arena.Buffer{Name: pre + "attn_qkv.bias", ElemSize: 4, Count: qd + kd + vd, Region: arena.Weights})
	}
	mats = append(mats, matSpec{"token_embd", Q8_0, c.Vocab, H})
	for _, ms := range mats {
		p.Add(arena.Buffer{Name: ms.name, ElemSize: ms.t.blockBytes(), Count: ms.rows * ms.cols / kernelrt.QK, Region: arena.Weights})
	}
	p.Add(arena.Buffer{Name: "output_norm", ElemSize: 4, Count: H, Region: arena.Weights})
	planState(&p, c)
	layout, err := p.Layout()
	if err != nil {
		return nil, fmt.Errorf("orchestrator: plan: %w", err)
	}
	a, err := arena.NewFromLayout(layout, opts.Arena)
	if err != nil {
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	m := &Model{Cfg: c, Recipe: recipe, arena: a, layout: layout, Layers: make([]Layer, c.Layers)}
	fail := func(err error) (*Model, error) {
		a.Close()
		return nil, fmt.Errorf("orchestrator: %w", err)
	}
	rng := seed*0x9E3779B97F4A7C15 + 1
	byName := map[string]*Matrix{}
	for _, ms := range mats {
		mat := &Matrix{Name: ms.name, Type: ms.t, Rows: ms.rows, Cols: ms.cols}
		var raw []byte
		if ms.t == Q5_0 {
			mat.Q5, err = arena.Get[kernelrt.BlockQ5_0](a, layout, ms.name)
			raw = bytesOf(mat.Q5)
		} else {
			mat.Q8, err = arena.Get[kernelrt.BlockQ8_0](a, layout, ms.name)
			raw = bytesOf(mat.Q8)
		}
		if err != nil {
			return fail(err)
		}
		fillBlocks(raw, ms.t, 0.02*math.Sqrt(3), &rng)
		byName[ms.name] = mat
	}
	floats := func(name string, center, spread float32) ([]float32, error) {
		s, err := arena.Get[float32](a, layout, name)
		for i := range s {
			s[i] = center + spread*(2*uniform(&rng)-1)
		}
		return s, err
	}
	for l := range m.Layers {
		pre := fmt.Sprintf("blk.%d.", l)
		ly := &m.Layers[l]
		if ly.AttnNorm, err = floats(pre+"attn_norm", 1, 0.1); err != nil {
			return fail(err)
		}
		if ly.FFNNorm, err = floats(pre+"ffn_norm", 1, 0.1); err != nil {
			return fail(err)
		}
		if ly.QKVBias, err = floats(pre+"attn_qkv.bias", 0, 0.02); err != nil {
			return fail(err)
		}
		ly.QKV, ly.Q, ly.K, ly.V = byName[pre+"attn_qkv"], byName[pre+"attn_q"], byName[pre+"attn_k"], byName[pre+"attn_v"]
		ly.O = byName[pre+"attn_output"]
		ly.GateUp, ly.Gate, ly.Up = byName[pre+"ffn_gate_up"], byName[pre+"ffn_gate"], byName[pre+"ffn_up"]
		ly.Down = byName[pre+"ffn_down"]
	}
	m.Embed = byName["token_embd"]
	m.Output = m.Embed
	if m.OutNorm, err = floats("output_norm", 1, 0.1); err != nil {
		return fail(err)
	}
	if err := m.bindState(); err != nil {
		a.Close()
		return nil, err
	}
	return m, nil
}

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
	bb := t.blockBytes()
	levels := 127.0
	if t == Q5_0 {
		levels = 16
	}
	for off := 0; off+bb <= len(raw); off += bb {
		// Vary the scale by block (0.5x..1.5x) from the block's own first quant byte.
		f := 0.5 + float64(raw[off+2])/255
		binary.LittleEndian.PutUint16(raw[off:], kernelrt.FP32ToFP16(float32(amp*f/levels)))
	}
}
