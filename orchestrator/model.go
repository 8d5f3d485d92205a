package orchestrator

import (
	"fmt"
	"io"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
)

// Exec is what the decoder needs from kernelrt: the serial kernels (Serial) and the
// Runtime's dispatch wrappers both provide it, with the same signatures.
type Exec interface {
	RMSNorm(out, x, weight []float32, tokens, dim int, eps float32) error
	QuantizeQ8_0(dst []kernelrt.BlockQ8_0, src []float32) error
	GemvQ8_0Bias(y []float32, w []kernelrt.BlockQ8_0, x []kernelrt.BlockQ8_0, bias []float32, rows, cols int) error
	GemvQ5_0Bias(y []float32, w []kernelrt.BlockQ5_0, x []kernelrt.BlockQ8_0, bias []float32, rows, cols int) error
	GemmQ8_0(y []float32, w []kernelrt.BlockQ8_0, x []kernelrt.BlockQ8_0, bias []float32, rows, cols, tokens int) error
	GemmQ5_0(y []float32, w []kernelrt.BlockQ5_0, x []kernelrt.BlockQ8_0, bias []float32, rows, cols, tokens int) error
	RopeNeoX(x []float32, tab *kernelrt.RopeTable, tokens, nHeads, headDim, stride, pos0 int) error
	KVAppend(cache, src []float32, tokens, srcStride, nKVHeads, headDim, maxCtx, pos0 int) error
	Attention(out, q, kcache, vcache, scratch []float32, tokens, qStride, nHeads, nKVHeads, headDim, maxCtx, pos0 int) error
	Add(out, a, b []float32) error
	SwiGLU(out, gate, up []float32) error
	EmbedQ8_0(out []float32, table []kernelrt.BlockQ8_0, ids []int32, dim, vocab int) error
}

// Matrix is a rows x cols weight tensor in one type: row-major blocks in Q8 or Q5, or
// row-major floats in F32 (for Type F32, and for Type F16 after its conversion at load).
type Matrix struct {
	Name       string
	Type       QType
	Rows, Cols int
	Q8         []kernelrt.BlockQ8_0
	Q5         []kernelrt.BlockQ5_0
	F32        []float32
}

// Bytes is the weight memory one full pass reads.
func (m *Matrix) Bytes() int { return m.Rows * m.Cols / kernelrt.QK * m.Type.blockBytes() }

// matmul computes y = W x (+bias) for T tokens of Q8_0 activations: a GEMV for one token
// (bandwidth-bound), the tiled GEMM for more (compute-bound).
func (m *Matrix) matmul(e Exec, y []float32, x []kernelrt.BlockQ8_0, bias []float32, T int) error {
	y = y[:T*m.Rows]
	x = x[:T*m.Cols/kernelrt.QK]
	if T == 1 {
		if m.Type == Q5_0 {
			return e.GemvQ5_0Bias(y, m.Q5, x, bias, m.Rows, m.Cols)
		}
		return e.GemvQ8_0Bias(y, m.Q8, x, bias, m.Rows, m.Cols)
	}
	if m.Type == Q5_0 {
		return e.GemmQ5_0(y, m.Q5, x, bias, m.Rows, m.Cols, T)
	}
	return e.GemmQ8_0(y, m.Q8, x, bias, m.Rows, m.Cols, T)
}

// mm computes y = W x (+bias) for T tokens: a Q8_0/Q5_0 matrix multiplies the Q8_0
// activations xq, an F32/F16 one (GGUF models) the float activations xf.
func (m *Model) mm(e Exec, w *Matrix, y, xf []float32, xq []kernelrt.BlockQ8_0, bias []float32, T int) error {
	if w.Type.quantized() {
		return w.matmul(e, y, xq, bias, T)
	}
	return m.matmulF32(e, w, y, xf, bias, T)
}

// Layer is one decoder block's weights. QKV is one fused matrix when q, k and v share a
// type (one GEMV instead of three); otherwise Q, K and V are separate. GateUp likewise.
type Layer struct {
	AttnNorm, FFNNorm []float32
	QKV, Q, K, V      *Matrix
	QKVBias           []float32 // q, then k, then v biases
	O                 *Matrix
	GateUp, Gate, Up  *Matrix
	Down              *Matrix
}

// Model is a decoder with its weights, activations and KV cache in one arena.
type Model struct {
	Cfg     Config
	Recipe  Recipe
	Layers  []Layer
	Embed   *Matrix // vocab x hidden, Q8_0; also the output head when Output == Embed
	Output  *Matrix
	OutNorm []float32

	rope   *kernelrt.RopeTable
	arena  *arena.Arena
	layout *arena.Layout

	// activations, sized for MaxBatch tokens
	x, xn, tmp []float32
	xq         []kernelrt.BlockQ8_0
	qkv        []float32
	att        []float32
	attq       []kernelrt.BlockQ8_0
	gu, h      []float32
	hq         []kernelrt.BlockQ8_0
	logits     []float32
	attScratch []float32
	ids        []int32
	kc, vc     [][]float32 // per layer, [kv_head][MaxCtx][head_dim]

	pos int // tokens in the KV cache

	// GGUF models (gguf.go): the file whose mapping the weights are viewed in (closed by
	// Close), the fp16-rounded activations of F16 matmuls, and the F16 KV cache (kc and vc
	// then hold one layer: the F32 copy attention reads).
	file       io.Closer
	xr         []float32
	kv16       bool
	kc16, vc16 [][]uint16
	expand     expandTask
}

// qkvDims returns the widths of q, k and v per token.
func (c Config) qkvDims() (int, int, int) {
	return c.Heads * c.HeadDim, c.KVHeads * c.HeadDim, c.KVHeads * c.HeadDim
}

// WeightBytes is the weight memory one decoded token reads: every layer matrix and the
// output head (the embedding lookup reads one row, counted too).
func (m *Model) WeightBytes() int {
	n := m.Output.Bytes() + m.Embed.Bytes()/m.Embed.Rows
	for i := range m.Layers {
		l := &m.Layers[i]
		for _, mat := range []*Matrix{l.QKV, l.Q, l.K, l.V, l.O, l.GateUp, l.Gate, l.Up, l.Down} {
			if mat != nil {
				n += mat.Bytes()
			}
		}
	}
	return n
}

// Pos is the number of tokens in the KV cache, which is also the position the next token gets.
func (m *Model) Pos() int { return m.pos }

// Reset empties the KV cache (the weights stay).
func (m *Model) Reset() { m.pos = 0 }

// Layout is the arena plan the model was built from (for reports).
func (m *Model) Layout() *arena.Layout { return m.layout }

// Arena is the model's memory.
func (m *Model) Arena() *arena.Arena { return m.arena }

// Close unmaps the model's memory; the model must not be used afterwards.
func (m *Model) Close() error {
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

// Prefill runs tokens through the model at the current position (in MaxBatch chunks) and
// returns the logits of the last token (of every token when Cfg.AllLogits, row-major). The
// returned slice aliases model memory and is valid until the next call.
func (m *Model) Prefill(e Exec, tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("orchestrator: Prefill of no tokens")
	}
	if m.pos+len(tokens) > m.Cfg.MaxCtx {
		return nil, fmt.Errorf("orchestrator: prefill of %d tokens at position %d would pass MaxCtx = %d", len(tokens), m.pos, m.Cfg.MaxCtx)
	}
	if m.Cfg.AllLogits && len(tokens) > m.Cfg.MaxBatch {
		return nil, fmt.Errorf("orchestrator: AllLogits prefill of %d tokens exceeds MaxBatch = %d", len(tokens), m.Cfg.MaxBatch)
	}
	var out []float32
	for len(tokens) > 0 {
		n := min(len(tokens), m.Cfg.MaxBatch)
		var err error
		if out, err = m.forward(e, tokens[:n]); err != nil {
			return nil, err
		}
		tokens = tokens[n:]
	}
	return out, nil
}

// Decode runs one token at the current position and returns its logits (valid until the
// next call). Past MaxCtx it returns an error and leaves the cache untouched.
func (m *Model) Decode(e Exec, token int32) ([]float32, error) {
	if m.pos+1 > m.Cfg.MaxCtx {
		return nil, fmt.Errorf("orchestrator: decode at position %d would pass MaxCtx = %d", m.pos, m.Cfg.MaxCtx)
	}
	m.ids[0] = token
	return m.forward(e, m.ids[:1])
}

// forward runs T <= MaxBatch tokens at positions pos..pos+T-1 through every layer.
func (m *Model) forward(e Exec, tokens []int32) ([]float32, error) {
	c := &m.Cfg
	T := len(tokens)
	H, I := c.Hidden, c.Intermediate
	qd, kd, vd := c.qkvDims()
	pos0 := m.pos
	for i, id := range tokens {
		if id < 0 || int(id) >= c.Vocab {
			return nil, fmt.Errorf("orchestrator: token %d at index %d is outside the vocabulary (0..%d)", id, i, c.Vocab-1)
		}
	}
	if &tokens[0] != &m.ids[0] {
		copy(m.ids, tokens)
	}
	x, xn, tmp := m.x[:T*H], m.xn[:T*H], m.tmp[:T*H]
	xq := m.xq[:T*H/kernelrt.QK]
	if m.Embed.Type == Q8_0 {
		if err := e.EmbedQ8_0(x, m.Embed.Q8, m.ids[:T], H, c.Vocab); err != nil {
			return nil, err
		}
	} else if err := m.embedRows(x, m.ids[:T]); err != nil {
		return nil, err
	}
	for li := range m.Layers {
		l := &m.Layers[li]
		if err := e.RMSNorm(xn, x, l.AttnNorm, T, H, c.Eps); err != nil {
			return nil, err
		}
		if err := e.QuantizeQ8_0(xq, xn); err != nil {
			return nil, err
		}
		// q, k, v views: fused rows give one [T][qd+kd+vd] buffer; separate matrices write
		// three consecutive [T][d] buffers.
		var qv, kv, vv []float32
		var qs, ks, vs int
		if l.QKV != nil {
			w := qd + kd + vd
			buf := m.qkv[:T*w]
			if err := m.mm(e, l.QKV, buf, xn, xq, l.QKVBias, T); err != nil {
				return nil, err
			}
			qv, kv, vv = buf, buf[qd:], buf[qd+kd:]
			qs, ks, vs = w, w, w
		} else {
			qv, kv, vv = m.qkv[:T*qd], m.qkv[T*qd:T*(qd+kd)], m.qkv[T*(qd+kd):T*(qd+kd+vd)]
			qs, ks, vs = qd, kd, vd
			if err := m.mm(e, l.Q, qv, xn, xq, l.QKVBias[:qd], T); err != nil {
				return nil, err
			}
			if err := m.mm(e, l.K, kv, xn, xq, l.QKVBias[qd:qd+kd], T); err != nil {
				return nil, err
			}
			if err := m.mm(e, l.V, vv, xn, xq, l.QKVBias[qd+kd:], T); err != nil {
				return nil, err
			}
		}
		qv, kv, vv = qv[:(T-1)*qs+qd], kv[:(T-1)*ks+kd], vv[:(T-1)*vs+vd]
		if err := e.RopeNeoX(qv, m.rope, T, c.Heads, c.HeadDim, qs, pos0); err != nil {
			return nil, err
		}
		if err := e.RopeNeoX(kv, m.rope, T, c.KVHeads, c.HeadDim, ks, pos0); err != nil {
			return nil, err
		}
		att := m.att[:T*qd]
		if m.kv16 {
			if err := m.attendF16(e, li, att, qv, kv, vv, T, qs, ks, vs, pos0); err != nil {
				return nil, err
			}
		} else {
			if err := e.KVAppend(m.kc[li], kv, T, ks, c.KVHeads, c.HeadDim, c.MaxCtx, pos0); err != nil {
				return nil, err
			}
			if err := e.KVAppend(m.vc[li], vv, T, vs, c.KVHeads, c.HeadDim, c.MaxCtx, pos0); err != nil {
				return nil, err
			}
			if err := e.Attention(att, qv, m.kc[li], m.vc[li], m.attScratch, T, qs, c.Heads, c.KVHeads, c.HeadDim, c.MaxCtx, pos0); err != nil {
				return nil, err
			}
		}
		attq := m.attq[:T*qd/kernelrt.QK]
		if err := e.QuantizeQ8_0(attq, att); err != nil {
			return nil, err
		}
		if err := m.mm(e, l.O, tmp, att, attq, nil, T); err != nil {
			return nil, err
		}
		if err := e.Add(x, x, tmp); err != nil {
			return nil, err
		}
		if err := e.RMSNorm(xn, x, l.FFNNorm, T, H, c.Eps); err != nil {
			return nil, err
		}
		if err := e.QuantizeQ8_0(xq, xn); err != nil {
			return nil, err
		}
		h := m.h[:T*I]
		if l.GateUp != nil {
			gu := m.gu[:T*2*I]
			if err := m.mm(e, l.GateUp, gu, xn, xq, nil, T); err != nil {
				return nil, err
			}
			for t := 0; t < T; t++ { // gate and up interleave per token
				if err := e.SwiGLU(h[t*I:(t+1)*I], gu[t*2*I:t*2*I+I], gu[t*2*I+I:(t+1)*2*I]); err != nil {
					return nil, err
				}
			}
		} else {
			g, u := m.gu[:T*I], m.gu[T*I:2*T*I]
			if err := m.mm(e, l.Gate, g, xn, xq, nil, T); err != nil {
				return nil, err
			}
			if err := m.mm(e, l.Up, u, xn, xq, nil, T); err != nil {
				return nil, err
			}
			if err := e.SwiGLU(h, g, u); err != nil {
				return nil, err
			}
		}
		hq := m.hq[:T*I/kernelrt.QK]
		if err := e.QuantizeQ8_0(hq, h); err != nil {
			return nil, err
		}
		if err := m.mm(e, l.Down, tmp, h, hq, nil, T); err != nil {
			return nil, err
		}
		if err := e.Add(x, x, tmp); err != nil {
			return nil, err
		}
	}
	m.pos += T
	// The head: every position's logits, or only the last token's.
	first, n := T-1, 1
	if c.AllLogits {
		first, n = 0, T
	}
	xs := x[first*H : (first+n)*H]
	if err := e.RMSNorm(xn[:n*H], xs, m.OutNorm, n, H, c.Eps); err != nil {
		return nil, err
	}
	if err := e.QuantizeQ8_0(xq[:n*H/kernelrt.QK], xn[:n*H]); err != nil {
		return nil, err
	}
	logits := m.logits[:n*c.Vocab]
	if err := m.mm(e, m.Output, logits, xn[:n*H], xq, nil, n); err != nil {
		return nil, err
	}
	return logits, nil
}

// bytesOf views a slice of pointer-free values as its bytes.
func bytesOf[T any](s []T) []byte {
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}
