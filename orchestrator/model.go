package orchestrator

import (
	"errors"
	"fmt"
	"math"
	"sync"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/gguf"
)

// ErrClosed is returned by a Model's methods after Close (test with errors.Is).
var ErrClosed = errors.New("orchestrator: model is closed")

// Matrix is a rows x cols weight tensor in one type: row-major blocks in the slice of its
// type (Q8 for Q8_0, Q5 for Q5_0, Q4 for Q4_0, IQ4NL for IQ4_NL, Q51 for Q5_1 and for Q4_1,
// which is held as Q5_1, Q2K, Q3K, Q4K, Q5K, Q6K for the K-quants, IQ4XS for IQ4_XS),
// or row-major floats in F32 (for Type F32, and for F16 and BF16 after their conversion at
// load).
type Matrix struct {
	Name       string
	Type       QType
	Rows, Cols int
	Q8         []kernelrt.BlockQ8_0
	Q5         []kernelrt.BlockQ5_0
	Q4         []kernelrt.BlockQ4_0
	IQ4NL      []kernelrt.BlockIQ4_NL
	Q51        []kernelrt.BlockQ5_1
	Q4K        []kernelrt.BlockQ4K
	Q5K        []kernelrt.BlockQ5K
	Q6K        []kernelrt.BlockQ6K
	Q2K        []kernelrt.BlockQ2K
	Q3K        []kernelrt.BlockQ3K
	IQ4XS      []kernelrt.BlockIQ4_XS
	F32        []float32
	// Mapped says the blocks are a view of the model file's read-only mapping
	// (LoadOptions.MapWeights), not of the model's arena.
	Mapped bool
}

// Bytes is the weight memory one full pass reads.
func (m *Matrix) Bytes() int { return m.Rows * m.Cols / m.Type.blockLen() * m.Type.blockBytes() }

// Layer is one decoder block's weights. QKV is one fused matrix when q, k and v share a
// type (one GEMV instead of three); otherwise Q, K and V are separate. GateUp likewise.
type Layer struct {
	AttnNorm, FFNNorm []float32
	QKV, Q, K, V      *Matrix
	QKVBias           []float32 // q, then k, then v biases
	QNorm, KNorm      []float32 // per-head RMSNorm weights of q and k (HeadDim each; qwen3, gemma3)
	// PostAttnNorm and PostFFNNorm normalise the attention and FFN outputs before their
	// residual adds (gemma's sandwich norms); nil otherwise.
	PostAttnNorm, PostFFNNorm []float32
	O                         *Matrix
	GateUp, Gate, Up          *Matrix
	Down                      *Matrix
}

// Model is a decoder with its weights, activations and KV cache in one arena. Its methods
// are safe for concurrent use (they take turns: a model holds one sequence's state); every
// method either succeeds or leaves Pos and the cache's valid positions as they were.
type Model struct {
	Cfg     Config
	Recipe  Recipe
	Layers  []Layer
	Embed   *Matrix // vocab x hidden; also the output head when Output == Embed
	Output  *Matrix
	OutNorm []float32

	mu     sync.Mutex
	closed bool
	spec   *archSpec // Cfg.Arch's choices

	rope        *kernelrt.RopeTable // global layers' (every layer's without sliding windows)
	ropeLocal   *kernelrt.RopeTable // sliding-window layers' (= rope when the architecture has none)
	ropeFactors []float32           // rope_freqs (llama 3.1+), nil if the model has none
	arena       *arena.Arena
	layout      *arena.Layout
	file        *gguf.File // the GGUF mapping the weights are viewed in (LoadGGUF), closed by Close

	// activations, sized for MaxBatch tokens
	x, xn, tmp []float32
	xq         []kernelrt.BlockQ8_0
	qkv        []float32
	qkn        []float32 // q and k normalised per head (architectures with qkNorm)
	att        []float32
	attq       []kernelrt.BlockQ8_0
	gu, h      []float32
	hq         []kernelrt.BlockQ8_0
	logits     []float32
	ids        []int32
	xr         []float32           // fp16- or bf16-rounded activations of F16/BF16 matmuls (GGUF models with such weights)
	xq8k       []kernelrt.BlockQ8K // Q8_K activations of K-quant matmuls (GGUF models with K-quants)
	// What xq8k and xr hold: the activations at acts (their first element; nil: nothing) as
	// Q8_K when q8kOK, rounded as xrKind in xr when xrKind is actF16 or actBF16. See mm.
	acts   *float32
	q8kOK  bool
	xrKind actKind
	// streamRT is the Runtime streamOK (streamGemm) was computed for.
	streamRT *kernelrt.Runtime
	streamOK bool

	kv   kvCache
	pos  int    // tokens in slot 0's cache (Prefill/Decode), the position its next token gets
	one  [1]Seq // the single sequence of Prefill and Decode, reused
	outs []int  // rows of x whose logits head computes, reused
}

// Seq is one sequence's part of a ForwardBatch step: the next N tokens of the batch, to be
// cached in Slot at positions Pos..Pos+N-1 (Pos is how many tokens the slot holds).
type Seq struct {
	Slot, Pos, N int
	// Logits asks for the logits of the sequence's last token.
	Logits bool
}

// qkvDims returns the widths of q, k and v per token.
func (c Config) qkvDims() (int, int, int) {
	return c.Heads * c.HeadDim, c.KVHeads * c.HeadDim, c.KVHeads * c.HeadDim
}

// WeightBytes is the weight memory one decoded token reads: every layer matrix and the
// output head (the embedding lookup reads one row, counted too).
func (m *Model) WeightBytes() int {
	n := m.Embed.Bytes() / m.Embed.Rows
	for _, mat := range m.matrices()[1:] {
		n += mat.Bytes()
	}
	if m.Output == m.Embed { // tied: the head reads the whole table
		n += m.Output.Bytes()
	}
	return n
}

// WeightPlacement is how many bytes of weight matrices the model uses in place from the file
// mapping (LoadOptions.MapWeights) and how many it holds in its arena.
func (m *Model) WeightPlacement() (mapped, inArena int) {
	for _, mat := range m.matrices() {
		if mat.Mapped {
			mapped += mat.Bytes()
		} else {
			inArena += mat.Bytes()
		}
	}
	return mapped, inArena
}

// matrices lists every weight matrix once, in the order a decode step reads them: the
// embedding, each layer's, the output head (when untied).
func (m *Model) matrices() []*Matrix {
	out := []*Matrix{m.Embed}
	for i := range m.Layers {
		l := &m.Layers[i]
		for _, mat := range []*Matrix{l.QKV, l.Q, l.K, l.V, l.O, l.GateUp, l.Gate, l.Up, l.Down} {
			if mat != nil {
				out = append(out, mat)
			}
		}
	}
	if m.Output != m.Embed {
		out = append(out, m.Output)
	}
	return out
}

// Pos is the number of tokens in the KV cache, which is also the position the next token gets.
func (m *Model) Pos() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.pos
}

// Reset empties the KV cache (the weights stay).
func (m *Model) Reset() {
	m.mu.Lock()
	m.pos = 0
	m.mu.Unlock()
}

// Truncate keeps the first n positions of the KV cache and drops the rest, so a new prompt
// sharing those n tokens continues from there (prefix reuse). n must be 0..Pos(), and a
// position whose window the sliding-window layers still hold (Reusable).
func (m *Model) Truncate(n int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if n < 0 || n > m.pos {
		return fmt.Errorf("orchestrator: Truncate(%d): the cache holds %d positions", n, m.pos)
	}
	if !m.kv.continuable(0, n) {
		// ErrUnsupported: a caller falls back to an empty cache (generate does).
		return fmt.Errorf("orchestrator: Truncate(%d): the sliding-window layers hold positions %d on only: %w", n, m.kv.base[0], errors.ErrUnsupported)
	}
	m.pos = n
	return nil
}

// Reusable is how many of the first n positions of slot's cache a sequence can continue
// from: n, or 0 when the sliding-window layers have moved past position n's window (a
// model with such layers keeps only a window and a batch of positions in them).
func (m *Model) Reusable(slot, n int) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	if slot < 0 || slot >= len(m.kv.base) || !m.kv.continuable(slot, n) {
		return 0
	}
	return n
}

// MaxCtx is the number of positions the KV cache holds (Cfg.MaxCtx).
func (m *Model) MaxCtx() int { return m.Cfg.MaxCtx }

// Vocab is the length of a row of logits (Cfg.Vocab).
func (m *Model) Vocab() int { return m.Cfg.Vocab }

// Slots is the number of sequences the KV cache holds (Cfg.Slots, at least 1): the slots
// ForwardBatch takes.
func (m *Model) Slots() int { return m.Cfg.slots() }

// MaxBatch is the most tokens one ForwardBatch takes (Cfg.MaxBatch).
func (m *Model) MaxBatch() int { return m.Cfg.MaxBatch }

// File is the GGUF file the model was loaded from (LoadGGUF; nil for synthetic models), for
// reading more of its metadata (the tokenizer). It is closed by Close.
func (m *Model) File() *gguf.File { return m.file }

// Layout is the arena plan the model was built from (for reports).
func (m *Model) Layout() *arena.Layout { return m.layout }

// Arena is the model's memory.
func (m *Model) Arena() *arena.Arena { return m.arena }

// Close unmaps the model's memory (and its file, for LoadGGUF). Later calls return
// ErrClosed; Close is idempotent.
func (m *Model) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil
	}
	m.closed = true
	var err error
	if m.arena != nil {
		err = m.arena.Close()
		m.arena = nil
	}
	if m.file != nil {
		if ferr := m.file.Close(); err == nil {
			err = ferr
		}
		m.file = nil
	}
	return err
}

// checkTokens refuses ids outside the vocabulary, naming the index in the caller's slice.
func (m *Model) checkTokens(tokens []int32) error {
	for i, id := range tokens {
		if id < 0 || int(id) >= m.Cfg.Vocab {
			return fmt.Errorf("orchestrator: token %d at index %d is outside the vocabulary (0..%d)", id, i, m.Cfg.Vocab-1)
		}
	}
	return nil
}

// Prefill runs tokens through the model at the current position (in MaxBatch chunks) and
// returns the logits of the last token (of every token when Cfg.AllLogits, row-major). The
// returned slice aliases model memory and is valid until the next call. Every id is checked
// before any work; a failure leaves Pos where it was.
func (m *Model) Prefill(e kernelrt.Ops, tokens []int32) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("orchestrator: Prefill of no tokens")
	}
	if len(tokens) > m.Cfg.MaxCtx-m.pos {
		return nil, fmt.Errorf("orchestrator: prefill of %d tokens at position %d would pass MaxCtx = %d", len(tokens), m.pos, m.Cfg.MaxCtx)
	}
	if m.Cfg.AllLogits && len(tokens) > m.Cfg.MaxBatch {
		return nil, fmt.Errorf("orchestrator: AllLogits prefill of %d tokens exceeds MaxBatch = %d", len(tokens), m.Cfg.MaxBatch)
	}
	if err := m.checkTokens(tokens); err != nil {
		return nil, err
	}
	start := m.pos
	var out []float32
	for len(tokens) > 0 {
		n := min(len(tokens), m.Cfg.MaxBatch)
		m.one[0] = Seq{Slot: 0, Pos: m.pos, N: n, Logits: true}
		var err error
		if out, err = m.forward(e, tokens[:n], m.one[:], m.Cfg.AllLogits); err != nil {
			m.pos = start
			if !m.kv.continuable(0, start) {
				// Earlier chunks moved the sliding-window layers past start's window.
				m.pos = 0
			}
			return nil, err
		}
		m.pos += n
		tokens = tokens[n:]
	}
	return out, nil
}

// Decode runs one token at the current position and returns its logits (valid until the
// next call). Past MaxCtx it returns an error and leaves the cache untouched.
func (m *Model) Decode(e kernelrt.Ops, token int32) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	if m.pos+1 > m.Cfg.MaxCtx {
		return nil, fmt.Errorf("orchestrator: decode at position %d would pass MaxCtx = %d", m.pos, m.Cfg.MaxCtx)
	}
	m.ids[0] = token
	if err := m.checkTokens(m.ids[:1]); err != nil {
		return nil, err
	}
	m.one[0] = Seq{Slot: 0, Pos: m.pos, N: 1, Logits: true}
	out, err := m.forward(e, m.ids[:1], m.one[:], false)
	if err == nil {
		m.pos++
	}
	return out, err
}

// ForwardBatch runs one step of several sequences at once: tokens holds each Seq's N tokens
// one sequence after the other, and every weight matrix is read once for all of them (the
// GEMM over the batch), which is how decoding B sequences costs little more than one. Each
// sequence attends only to its own slot's cache, positions 0..Pos+N-1. It returns the logits
// of the last token of every Seq with Logits, one row of Vocab floats each, in order (valid
// until the next call). The caller owns the slots' positions; Prefill and Decode use slot 0
// and track it themselves (Pos), so a caller mixing both keeps slot 0 for them. Everything
// is checked first; on an error no slot's valid positions change.
func (m *Model) ForwardBatch(e kernelrt.Ops, tokens []int32, seqs []Seq) ([]float32, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	c := &m.Cfg
	if len(tokens) == 0 || len(tokens) > c.MaxBatch {
		return nil, fmt.Errorf("orchestrator: ForwardBatch of %d tokens: want 1..MaxBatch = %d", len(tokens), c.MaxBatch)
	}
	total := 0
	var used [64]uint64 // slots seen, as a bitset for up to 4096 slots; more are checked pairwise
	for i, s := range seqs {
		switch {
		case s.Slot < 0 || s.Slot >= c.slots():
			return nil, fmt.Errorf("orchestrator: seqs[%d].Slot = %d: the cache has slots 0..%d", i, s.Slot, c.slots()-1)
		case s.N < 1:
			return nil, fmt.Errorf("orchestrator: seqs[%d].N = %d: want at least 1 token", i, s.N)
		case s.Pos < 0 || s.Pos > c.MaxCtx-s.N:
			return nil, fmt.Errorf("orchestrator: seqs[%d]: %d tokens at position %d would pass MaxCtx = %d", i, s.N, s.Pos, c.MaxCtx)
		}
		if s.Slot < 64*64 {
			if used[s.Slot/64]&(1<<(s.Slot%64)) != 0 {
				return nil, fmt.Errorf("orchestrator: seqs[%d].Slot = %d appears twice in one batch", i, s.Slot)
			}
			used[s.Slot/64] |= 1 << (s.Slot % 64)
		} else {
			for _, o := range seqs[:i] {
				if o.Slot == s.Slot {
					return nil, fmt.Errorf("orchestrator: seqs[%d].Slot = %d appears twice in one batch", i, s.Slot)
				}
			}
		}
		total += s.N
	}
	if total != len(tokens) {
		return nil, fmt.Errorf("orchestrator: the seqs hold %d tokens, the batch %d", total, len(tokens))
	}
	if err := m.checkTokens(tokens); err != nil {
		return nil, err
	}
	return m.forward(e, tokens, seqs, false)
}

// NonFiniteError reports a forward pass that produced a NaN or an infinity, naming the first
// step whose output was not finite. The model state is left as before the call.
type NonFiniteError struct {
	Step string // e.g. "layer 3 attention", "output head"
}

func (e *NonFiniteError) Error() string {
	return fmt.Sprintf("orchestrator: the %s produced a non-finite value (NaN or Inf): the model's weights or inputs hold NaN/Inf", e.Step)
}

// checkFinite returns a *NonFiniteError naming step when x holds a NaN or an infinity. The
// sum is one streaming pass (an op, at memory speed); only a sum that overflowed from finite
// values needs the element scan.
func checkFinite(e kernelrt.Ops, x []float32, step func() string) error {
	s, err := e.StreamRead(x)
	if err != nil {
		return err
	}
	if !math.IsNaN(float64(s)) && !math.IsInf(float64(s), 0) {
		return nil
	}
	for _, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return &NonFiniteError{Step: step()}
		}
	}
	return nil
}

// forward runs the checked batch (T <= MaxBatch tokens, seqs covering them in order)
// through every layer and returns the logits of the last token of each Seq with Logits, or
// of every token when all (one Seq, AllLogits).
func (m *Model) forward(e kernelrt.Ops, tokens []int32, seqs []Seq, all bool) ([]float32, error) {
	T := len(tokens)
	if err := m.kv.prepare(&m.Cfg, seqs); err != nil {
		return nil, err
	}
	if &tokens[0] != &m.ids[0] {
		copy(m.ids, tokens)
	}
	m.acts = nil // the last step's head left xn's derived activations (see mm)
	if err := m.embed(e, T); err != nil {
		return nil, err
	}
	for li := range m.Layers {
		if err := m.attention(e, li, T, seqs); err != nil {
			return nil, err
		}
		if err := checkFinite(e, m.x[:T*m.Cfg.Hidden], func() string { return fmt.Sprintf("layer %d attention block", li) }); err != nil {
			return nil, err
		}
		if err := m.ffn(e, li, T); err != nil {
			return nil, err
		}
		if err := checkFinite(e, m.x[:T*m.Cfg.Hidden], func() string { return fmt.Sprintf("layer %d feed-forward block", li) }); err != nil {
			return nil, err
		}
	}
	m.outs = m.outs[:0]
	off := 0
	for _, s := range seqs {
		if all {
			for t := 0; t < s.N; t++ {
				m.outs = append(m.outs, off+t)
			}
		} else if s.Logits {
			m.outs = append(m.outs, off+s.N-1)
		}
		off += s.N
	}
	if len(m.outs) == 0 {
		return m.logits[:0], nil
	}
	logits, err := m.head(e, m.outs)
	if err != nil {
		return nil, err
	}
	if err := checkFinite(e, logits, func() string { return "output head (output_norm, output)" }); err != nil {
		return nil, err
	}
	if m.spec.softcaps { // after the check: the cap would turn an overflow into +-c
		softcapLogits(logits, m.Cfg.FinalSoftcap)
	}
	return logits, nil
}

// embed writes the T tokens' embeddings to x: a Q8_0 table through its gather op, other
// quantized types row by row through their dequantizers (ggml's get_rows dequantizes the
// same way), float tables by copy.
func (m *Model) embed(e kernelrt.Ops, T int) error {
	H := m.Cfg.Hidden
	x, ids := m.x[:T*H], m.ids[:T]
	if err := m.embedRows(e, x, ids); err != nil {
		return err
	}
	if m.spec.embedScale {
		// gemma: x sqrt(hidden), as ggml_scale by sqrtf(n_embd) (no op for a scalar product:
		// T*H multiplies, once per step).
		s := float32(math.Sqrt(float64(H)))
		for i := range x {
			x[i] *= s
		}
	}
	return nil
}

// embedRows writes the rows of ids of the embedding table to x.
func (m *Model) embedRows(e kernelrt.Ops, x []float32, ids []int32) error {
	H := m.Cfg.Hidden
	t := m.Embed
	if t.Type == Q8_0 {
		return e.EmbedQ8_0(x, t.Q8, ids, H, m.Cfg.Vocab)
	}
	nb := H / t.Type.blockLen()
	for i, id := range ids {
		row := x[i*H : (i+1)*H]
		b0, b1 := int(id)*nb, (int(id)+1)*nb
		var err error
		switch t.Type {
		case Q5_0:
			err = e.DequantizeQ5_0(row, t.Q5[b0:b1])
		case Q4_0:
			err = e.DequantizeQ4_0(row, t.Q4[b0:b1])
		case IQ4_NL:
			err = e.DequantizeIQ4_NL(row, t.IQ4NL[b0:b1])
		case Q4_1, Q5_1:
			err = e.DequantizeQ5_1(row, t.Q51[b0:b1])
		case Q4_K:
			err = e.DequantizeQ4K(row, t.Q4K[b0:b1])
		case Q5_K:
			err = e.DequantizeQ5K(row, t.Q5K[b0:b1])
		case Q6_K:
			err = e.DequantizeQ6K(row, t.Q6K[b0:b1])
		case Q3_K:
			err = e.DequantizeQ3K(row, t.Q3K[b0:b1])
		case Q2_K:
			err = e.DequantizeQ2K(row, t.Q2K[b0:b1])
		case IQ4_XS:
			err = e.DequantizeIQ4_XS(row, t.IQ4XS[b0:b1])
		case F32, F16, BF16:
			copy(row, t.F32[int(id)*H:(int(id)+1)*H])
		default:
			err = fmt.Errorf("orchestrator: embedding %s of type %s has no row lookup", t.Name, t.Type)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// attention is one layer's attention block: x += O(attention(rope(QKV(norm(x))))), with q
// and k normalised per head before RoPE and the output normalised before the add where the
// architecture says so. The projections run over the whole batch; RoPE and attention run per
// sequence, each at its own positions in its own cache slot (a sliding-window layer with its
// own RoPE table, attending only to the window).
func (m *Model) attention(e kernelrt.Ops, li, T int, seqs []Seq) error {
	c := &m.Cfg
	l := &m.Layers[li]
	H := c.Hidden
	qd, kd, vd := c.qkvDims()
	x, xn, tmp := m.x[:T*H], m.xn[:T*H], m.tmp[:T*H]
	xq := m.xq[:T*H/kernelrt.QK]
	if err := e.RMSNorm(xn, x, l.AttnNorm, T, H, c.Eps); err != nil {
		return err
	}
	if err := e.QuantizeQ8_0(xq, xn); err != nil {
		return err
	}
	// q, k, v views: fused rows give one [T][qd+kd+vd] buffer; separate matrices write three
	// consecutive [T][d] buffers.
	var qv, kv, vv []float32
	var qs, ks, vs int
	if l.QKV != nil {
		w := qd + kd + vd
		buf := m.qkv[:T*w]
		if err := m.mm(e, l.QKV, buf, xn, xq, l.QKVBias, T); err != nil {
			return err
		}
		qv, kv, vv = buf, buf[qd:], buf[qd+kd:]
		qs, ks, vs = w, w, w
	} else {
		qv, kv, vv = m.qkv[:T*qd], m.qkv[T*qd:T*(qd+kd)], m.qkv[T*(qd+kd):T*(qd+kd+vd)]
		qs, ks, vs = qd, kd, vd
		var bq, bk, bv []float32 // nil: the architecture has no q/k/v biases
		if l.QKVBias != nil {
			bq, bk, bv = l.QKVBias[:qd], l.QKVBias[qd:qd+kd], l.QKVBias[qd+kd:]
		}
		if err := m.mm(e, l.Q, qv, xn, xq, bq, T); err != nil {
			return err
		}
		if err := m.mm(e, l.K, kv, xn, xq, bk, T); err != nil {
			return err
		}
		if err := m.mm(e, l.V, vv, xn, xq, bv, T); err != nil {
			return err
		}
	}
	if m.spec.qkNorm {
		var err error
		if qv, qs, kv, ks, err = m.normQK(e, l, T, qv, qs, kv, ks); err != nil {
			return err
		}
	}
	att := m.att[:T*qd]
	rope, window := m.rope, 0
	if m.spec.sliding(c, li) {
		rope, window = m.ropeLocal, c.SlidingWindow
	}
	off := 0
	for _, s := range seqs {
		n := s.N
		q := qv[off*qs : off*qs+(n-1)*qs+qd]
		k := kv[off*ks : off*ks+(n-1)*ks+kd]
		v := vv[off*vs : off*vs+(n-1)*vs+vd]
		if err := m.rotate(e, rope, q, n, c.Heads, qs, s.Pos); err != nil {
			return err
		}
		if err := m.rotate(e, rope, k, n, c.KVHeads, ks, s.Pos); err != nil {
			return err
		}
		if qsc := m.queryRescale(); qsc != 1 {
			for t := 0; t < n; t++ {
				for i := range q[t*qs : t*qs+qd] {
					q[t*qs+i] *= qsc
				}
			}
		}
		if err := m.kv.attend(e, m, li, s.Slot, s.Pos, window, att[off*qd:(off+n)*qd], q, k, v, n, qs, ks, vs); err != nil {
			return err
		}
		off += n
	}
	attq := m.attq[:T*qd/kernelrt.QK]
	if err := e.QuantizeQ8_0(attq, att); err != nil {
		return err
	}
	if err := m.mm(e, l.O, tmp, att, attq, nil, T); err != nil {
		return err
	}
	return m.residual(e, x, tmp, xn, l.PostAttnNorm, T)
}

// residual adds a block's output out to x, RMS-normalised first with post (through the free
// buffer scratch) when the architecture has sandwich norms.
func (m *Model) residual(e kernelrt.Ops, x, out, scratch, post []float32, T int) error {
	if post == nil {
		return e.Add(x, x, out)
	}
	if err := e.RMSNorm(scratch, out, post, T, m.Cfg.Hidden, m.Cfg.Eps); err != nil {
		return err
	}
	return e.Add(x, x, scratch)
}

// queryRescale is the factor queries are multiplied by before attention, whose kernels scale
// scores by 1/sqrt(HeadDim): 1, except where the architecture scales queries by
// 1/sqrt(Hidden/Heads) instead (wideQueryLayers).
func (m *Model) queryRescale() float32 {
	c := &m.Cfg
	if m.spec.wideQueryLayers == 0 || c.Layers != m.spec.wideQueryLayers {
		return 1
	}
	return float32(math.Sqrt(float64(c.HeadDim) / float64(c.Hidden/c.Heads)))
}

// normQK RMS-normalises every head of the T tokens' q (token t at qv[t*qs]) and k (at
// kv[t*ks]) with the layer's QNorm and KNorm into qkn, and returns the normalised views and
// their strides (qd, kd).
func (m *Model) normQK(e kernelrt.Ops, l *Layer, T int, qv []float32, qs int, kv []float32, ks int) ([]float32, int, []float32, int, error) {
	c := &m.Cfg
	qd, kd, _ := c.qkvDims()
	qn, kn := m.qkn[:T*qd], m.qkn[T*qd:T*(qd+kd)]
	norm := func(dst, src []float32, stride, heads int, w []float32) error {
		d := heads * c.HeadDim
		if stride == d { // consecutive tokens: one call over every head of the batch
			return e.RMSNorm(dst, src[:T*d], w, T*heads, c.HeadDim, c.Eps)
		}
		for t := 0; t < T; t++ {
			if err := e.RMSNorm(dst[t*d:(t+1)*d], src[t*stride:t*stride+d], w, heads, c.HeadDim, c.Eps); err != nil {
				return err
			}
		}
		return nil
	}
	if err := norm(qn, qv, qs, c.Heads, l.QNorm); err != nil {
		return nil, 0, nil, 0, err
	}
	if err := norm(kn, kv, ks, c.KVHeads, l.KNorm); err != nil {
		return nil, 0, nil, 0, err
	}
	return qn, qd, kn, kd, nil
}

// rotate applies the architecture's RoPE (table rope) to T tokens' heads of x (token t at x[t*stride],
// at position pos+t).
func (m *Model) rotate(e kernelrt.Ops, rope *kernelrt.RopeTable, x []float32, T, heads, stride, pos int) error {
	if m.spec.ropeNorm {
		return e.RopeNorm(x, rope, T, heads, m.Cfg.HeadDim, stride, pos)
	}
	return e.RopeNeoX(x, rope, T, heads, m.Cfg.HeadDim, stride, pos)
}

// ffn is one layer's feed-forward block: x += down(glu(gate(norm(x)), up(norm(x)))), the
// output normalised first where the architecture has sandwich norms.
func (m *Model) ffn(e kernelrt.Ops, li, T int) error {
	c := &m.Cfg
	l := &m.Layers[li]
	H, I := c.Hidden, c.Intermediate
	x, xn, tmp := m.x[:T*H], m.xn[:T*H], m.tmp[:T*H]
	xq := m.xq[:T*H/kernelrt.QK]
	if err := e.RMSNorm(xn, x, l.FFNNorm, T, H, c.Eps); err != nil {
		return err
	}
	if needsQ8_0(l.GateUp, l.Gate, l.Up) {
		if err := e.QuantizeQ8_0(xq, xn); err != nil {
			return err
		}
	}
	h := m.h[:T*I]
	if l.GateUp != nil {
		gu := m.gu[:T*2*I]
		if err := m.mm(e, l.GateUp, gu, xn, xq, nil, T); err != nil {
			return err
		}
		for t := 0; t < T; t++ { // gate and up interleave per token
			if err := m.glu(e, h[t*I:(t+1)*I], gu[t*2*I:t*2*I+I], gu[t*2*I+I:(t+1)*2*I]); err != nil {
				return err
			}
		}
	} else {
		g, u := m.gu[:T*I], m.gu[T*I:2*T*I]
		if err := m.mm(e, l.Gate, g, xn, xq, nil, T); err != nil {
			return err
		}
		if err := m.mm(e, l.Up, u, xn, xq, nil, T); err != nil {
			return err
		}
		if err := m.glu(e, h, g, u); err != nil {
			return err
		}
	}
	hq := m.hq[:T*I/kernelrt.QK]
	if needsQ8_0(l.Down) {
		if err := e.QuantizeQ8_0(hq, h); err != nil {
			return err
		}
	}
	if err := m.mm(e, l.Down, tmp, h, hq, nil, T); err != nil {
		return err
	}
	return m.residual(e, x, tmp, xn, l.PostFFNNorm, T)
}

// glu is the architecture's gated activation: GeGLU (tanh GELU) or SwiGLU.
func (m *Model) glu(e kernelrt.Ops, h, gate, up []float32) error {
	if m.spec.geglu {
		return e.GeGLU(h, gate, up)
	}
	return e.SwiGLU(h, gate, up)
}

// head computes the logits of the rows of x listed in rows: each row normalised into
// consecutive rows of xn (one RMSNorm when the rows are consecutive), then the output
// matrix over all of them.
func (m *Model) head(e kernelrt.Ops, rows []int) ([]float32, error) {
	c := &m.Cfg
	H, n := c.Hidden, len(rows)
	xn, xq := m.xn[:n*H], m.xq[:n*H/kernelrt.QK]
	if rows[n-1]-rows[0] == n-1 {
		if err := e.RMSNorm(xn, m.x[rows[0]*H:(rows[n-1]+1)*H], m.OutNorm, n, H, c.Eps); err != nil {
			return nil, err
		}
	} else {
		for i, r := range rows {
			if err := e.RMSNorm(xn[i*H:(i+1)*H], m.x[r*H:(r+1)*H], m.OutNorm, 1, H, c.Eps); err != nil {
				return nil, err
			}
		}
	}
	if needsQ8_0(m.Output) {
		if err := e.QuantizeQ8_0(xq, xn); err != nil {
			return nil, err
		}
	}
	logits := m.logits[:n*c.Vocab]
	if err := m.mm(e, m.Output, logits, xn, xq, nil, n); err != nil {
		return nil, err
	}
	return logits, nil
}

// needsQ8_0 reports whether any of the matrices (nil: absent) multiplies Q8_0 activations,
// which its caller then quantizes once for all of them.
func needsQ8_0(ws ...*Matrix) bool {
	for _, w := range ws {
		if w != nil && w.Type.act() == actQ8_0 {
			return true
		}
	}
	return false
}

// mm computes y = W x (+bias) for T tokens with the activations in the form the weight type
// multiplies, as ggml does: xq, the caller's Q8_0 blocks of xf, for the blocks of 32; Q8_K
// super-blocks for the K-quants and fp16/bf16-rounded floats for F16/BF16, both made here from
// the float activations xf; xf itself for F32. A quantized matrix is a GEMV for one token
// (bandwidth-bound), GEMVs over cached row blocks for a few (as batched decoding has; the
// GEMM's streaming path instead for Q8_0 where streamGemm holds), the GEMM for more.
//
// The Q8_K and rounded forms are made once per activation, not per matrix: they stay valid
// while consecutive calls pass the same xf (q, k and v; gate and up), and a call with another
// xf, or a new forward step, drops them. So a buffer must not change between two consecutive
// calls that multiply it (the decoder steps never do: each writes a buffer, then multiplies
// it, then multiplies another).
func (m *Model) mm(e kernelrt.Ops, w *Matrix, y, xf []float32, xq []kernelrt.BlockQ8_0, bias []float32, T int) error {
	y = y[:T*w.Rows]
	xf = xf[:T*w.Cols]
	if &xf[0] != m.acts {
		m.acts, m.q8kOK, m.xrKind = &xf[0], false, actF32
	}
	var x8 []kernelrt.BlockQ8_0
	var xk []kernelrt.BlockQ8K
	switch w.Type.act() {
	case actQ8_0:
		x8 = xq[:T*w.Cols/kernelrt.QK]
	case actQ8K:
		nb := len(xf) / kernelrt.QKK
		if len(m.xq8k) < nb {
			return fmt.Errorf("orchestrator: %s: no Q8_K activation buffer for %d floats", w.Name, len(xf))
		}
		xk = m.xq8k[:nb]
		if !m.q8kOK {
			if err := e.QuantizeQ8K(xk, xf); err != nil {
				return err
			}
			m.q8kOK = true
		}
	default:
		return m.matmulF32(e, w, y, xf, bias, T)
	}
	if T == 1 || T <= gemvTokens && !(w.Type == Q8_0 && m.streams(e)) {
		return m.gemvBlocks(e, w, y, x8, xk, bias, T)
	}
	switch w.Type {
	case Q8_0:
		return e.GemmQ8_0(y, w.Q8, x8, bias, w.Rows, w.Cols, T)
	case Q5_0:
		return e.GemmQ5_0(y, w.Q5, x8, bias, w.Rows, w.Cols, T)
	case Q4_0:
		return e.GemmQ4_0(y, w.Q4, x8, bias, w.Rows, w.Cols, T)
	case IQ4_NL:
		return e.GemmIQ4_NL(y, w.IQ4NL, x8, bias, w.Rows, w.Cols, T)
	case Q4_1, Q5_1:
		return e.GemmQ5_1(y, w.Q51, x8, bias, w.Rows, w.Cols, T)
	case Q4_K:
		return e.GemmQ4K(y, w.Q4K, xk, bias, w.Rows, w.Cols, T)
	case Q5_K:
		return e.GemmQ5K(y, w.Q5K, xk, bias, w.Rows, w.Cols, T)
	case Q6_K:
		return e.GemmQ6K(y, w.Q6K, xk, bias, w.Rows, w.Cols, T)
	case Q3_K:
		return e.GemmQ3K(y, w.Q3K, xk, bias, w.Rows, w.Cols, T)
	case Q2_K:
		return e.GemmQ2K(y, w.Q2K, xk, bias, w.Rows, w.Cols, T)
	case IQ4_XS:
		return e.GemmIQ4_XS(y, w.IQ4XS, xk, bias, w.Rows, w.Cols, T)
	}
	return fmt.Errorf("orchestrator: %s: no matmul for type %s", w.Name, w.Type)
}

// Up to gemvTokens tokens, a quantized matmul is one GEMV per token over blocks of about
// gemvBlockBytes of weight rows: the first token's GEMV brings a block from memory, the
// others find it in cache. The tiled GEMM repacks every weight block before its first use,
// and from DRAM that costs more than the GEMVs until about 4 tokens. Q8_0 on the _avx512 C
// kernels is the exception (streamGemm): its GEMM streams the weights once for up to 16
// tokens, so from 2 tokens on it is the GEMM. One ForwardBatch step of the synthetic
// Qwen2-0.5B Q8_0 (2 threads, Zen 4 shared with other work, 20 steps, 3 runs in turn;
// BenchmarkForwardBatchStep) took 18-19 ms at 1 token (GEMV), 20-23 ms with the GEMM against
// 26-46 ms with the GEMVs at 2, 23-25 against 45-48 ms at 4, and 30-34 ms at 8 (the old tiled
// GEMM: 66-127 ms). One token stays a GEMV: bit-identical to Decode, and no slower.
const (
	gemvTokens     = 4
	gemvBlockBytes = 2 << 20
)

// noStreamGemm makes streamGemm false, for benchmarks comparing with gemvBlocks.
var noStreamGemm bool

// streamGemm reports whether e's Q8_0 GEMM is the C kernels' _avx512 one, which streams the
// weights once for up to 16 tokens (csrc/gemm.c) and so beats gemvBlocks from 2 tokens on.
func streamGemm(e kernelrt.Ops) bool {
	if noStreamGemm {
		return false
	}
	var pooled, serial string
	switch k := e.(type) {
	case *kernelrt.Runtime:
		pooled, serial = k.KernelsFor(kernelrt.OpGemmQ8_0)
	case kernelrt.Serial:
		d, err := kernelrt.DefaultKernels()
		if err != nil {
			return false
		}
		pooled, serial = d, d
	default:
		return false
	}
	fast := func(s string) bool { return s == "asm/avx512" || s == "cgo/avx512" }
	return fast(pooled) && fast(serial)
}

// streams is streamGemm(e), remembered for the Runtime mm last ran on: a Runtime's kernels
// are fixed when it is made, and naming them allocates (mm asks for every Q8_0 matmul of a
// batched-decode step).
func (m *Model) streams(e kernelrt.Ops) bool {
	rt, ok := e.(*kernelrt.Runtime)
	if !ok || noStreamGemm {
		return streamGemm(e)
	}
	if rt != m.streamRT {
		m.streamRT, m.streamOK = rt, streamGemm(rt)
	}
	return m.streamOK
}

// gemvBlocks is mm's path for a few tokens of a quantized w: x8 holds the tokens' Q8_0
// activations (the blocks-of-32 types), xk their Q8_K ones (the K-quants).
func (m *Model) gemvBlocks(e kernelrt.Ops, w *Matrix, y []float32, x8 []kernelrt.BlockQ8_0, xk []kernelrt.BlockQ8K, bias []float32, T int) error {
	R := w.Rows
	nb := w.Cols / w.Type.blockLen()
	rb := R
	if T > 1 {
		rb = max(64, gemvBlockBytes/(nb*w.Type.blockBytes())/64*64)
	}
	for r0 := 0; r0 < R; r0 += rb {
		r1 := min(R, r0+rb)
		var b []float32
		if bias != nil {
			b = bias[r0:r1]
		}
		for t := 0; t < T; t++ {
			if err := gemvRows(e, w, y[t*R+r0:t*R+r1], x8, xk, t, b, r0, r1); err != nil {
				return err
			}
		}
	}
	return nil
}

// gemvRows is token t's GEMV over rows [r0, r1) of w.
func gemvRows(e kernelrt.Ops, w *Matrix, y []float32, x8 []kernelrt.BlockQ8_0, xk []kernelrt.BlockQ8K, t int, bias []float32, r0, r1 int) error {
	n, C := r1-r0, w.Cols
	if w.Type.act() == actQ8K {
		nb := C / kernelrt.QKK
		x := xk[t*nb : (t+1)*nb]
		switch w.Type {
		case Q4_K:
			return e.GemvQ4KBias(y, w.Q4K[r0*nb:r1*nb], x, bias, n, C)
		case Q5_K:
			return e.GemvQ5KBias(y, w.Q5K[r0*nb:r1*nb], x, bias, n, C)
		case Q6_K:
			return e.GemvQ6KBias(y, w.Q6K[r0*nb:r1*nb], x, bias, n, C)
		case Q3_K:
			return e.GemvQ3KBias(y, w.Q3K[r0*nb:r1*nb], x, bias, n, C)
		case Q2_K:
			return e.GemvQ2KBias(y, w.Q2K[r0*nb:r1*nb], x, bias, n, C)
		case IQ4_XS:
			return e.GemvIQ4_XSBias(y, w.IQ4XS[r0*nb:r1*nb], x, bias, n, C)
		}
	} else {
		nb := C / kernelrt.QK
		x := x8[t*nb : (t+1)*nb]
		switch w.Type {
		case Q8_0:
			return e.GemvQ8_0Bias(y, w.Q8[r0*nb:r1*nb], x, bias, n, C)
		case Q5_0:
			return e.GemvQ5_0Bias(y, w.Q5[r0*nb:r1*nb], x, bias, n, C)
		case Q4_0:
			return e.GemvQ4_0Bias(y, w.Q4[r0*nb:r1*nb], x, bias, n, C)
		case IQ4_NL:
			return e.GemvIQ4_NLBias(y, w.IQ4NL[r0*nb:r1*nb], x, bias, n, C)
		case Q4_1, Q5_1:
			return e.GemvQ5_1Bias(y, w.Q51[r0*nb:r1*nb], x, bias, n, C)
		}
	}
	return fmt.Errorf("orchestrator: %s: no GEMV for type %s", w.Name, w.Type)
}

// f32RowBlock is the weight bytes a float matmul of several tokens keeps in cache at once.
const f32RowBlock = 512 << 10

// matmulF32 computes y = W x (+bias) for T tokens of float activations x and an F32 (or
// converted F16/BF16) matrix. For F16 (BF16) the activations are first rounded to fp16 (bf16),
// as ggml converts them to the weights' vec_dot type before the dot products. Several tokens
// go block of rows by block of rows, each block multiplying every token while it is in cache.
func (m *Model) matmulF32(e kernelrt.Ops, w *Matrix, y, x, bias []float32, T int) error {
	R, C := w.Rows, w.Cols
	y, x = y[:T*R], x[:T*C]
	if k := w.Type.act(); k == actF16 || k == actBF16 {
		if len(m.xr) < len(x) {
			return fmt.Errorf("orchestrator: %s: no rounded activation buffer for %d floats", w.Name, len(x))
		}
		r := m.xr[:len(x)]
		if m.xrKind != k { // mm keeps it for consecutive calls on the same x
			if k == actF16 {
				for i, v := range x {
					r[i] = kernelrt.FP16ToFP32(kernelrt.FP32ToFP16(v))
				}
			} else {
				for i, v := range x {
					r[i] = roundBF16(v)
				}
			}
			m.xrKind = k
		}
		x = r
	}
	if T == 1 {
		if err := e.GemvF32(y, w.F32, x, R, C); err != nil {
			return err
		}
	} else {
		rb := max(1, f32RowBlock/(4*C))
		for r0 := 0; r0 < R; r0 += rb {
			r1 := min(R, r0+rb)
			for t := 0; t < T; t++ {
				if err := e.GemvF32(y[t*R+r0:t*R+r1], w.F32[r0*C:r1*C], x[t*C:(t+1)*C], r1-r0, C); err != nil {
					return err
				}
			}
		}
	}
	if bias != nil {
		for t := 0; t < T; t++ {
			if err := e.Add(y[t*R:(t+1)*R], y[t*R:(t+1)*R], bias[:R]); err != nil {
				return err
			}
		}
	}
	return nil
}

// roundBF16 rounds v to bfloat16 (nearest, ties to even; a NaN stays a quiet NaN), as ggml's
// fp32-to-bf16 conversion does, and widens it back.
func roundBF16(v float32) float32 {
	u := math.Float32bits(v)
	if u&0x7fffffff > 0x7f800000 {
		return math.Float32frombits((u | 0x400000) &^ 0xffff)
	}
	u = (u + 0x7fff + (u>>16)&1) &^ 0xffff
	return math.Float32frombits(u)
}

// bytesOf views a slice of pointer-free values as its bytes.
func bytesOf[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
