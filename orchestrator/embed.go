package orchestrator

import (
	"errors"
	"fmt"
	"math"

	"github.com/kernelrt/kernelrt"
)

// Pooling says how one embedding is made of a sequence's final hidden states (after the
// output norm). The values are llama.cpp's (enum llama_pooling_type), as GGUF files store
// them under <arch>.pooling_type.
type Pooling int

// Pooling types.
const (
	// PoolNone keeps one vector per token: not one embedding, so Embedding refuses it.
	PoolNone Pooling = 0
	// PoolMean averages every token's hidden state.
	PoolMean Pooling = 1
	// PoolCLS takes the first token's.
	PoolCLS Pooling = 2
	// PoolLast takes the last token's: what a decoder LM's embedding is by default (the
	// only position that has seen the whole input, under causal attention).
	PoolLast Pooling = 3
)

// String names the pooling as llama.cpp's --pooling option does.
func (p Pooling) String() string {
	switch p {
	case PoolNone:
		return "none"
	case PoolMean:
		return "mean"
	case PoolCLS:
		return "cls"
	case PoolLast:
		return "last"
	case 4:
		return "rank"
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// ErrPooling is wrapped by the errors for a pooling Embedding cannot do (none, rank, unknown).
var ErrPooling = errors.New("unsupported pooling")

func (p Pooling) check() error {
	if p != PoolMean && p != PoolCLS && p != PoolLast {
		return fmt.Errorf("orchestrator: pooling %v (%d): %w (mean, cls and last give one vector per input)", p, int(p), ErrPooling)
	}
	return nil
}

// PoolingType is the pooling the model file asks for (<arch>.pooling_type, as llama.cpp's
// converter writes it for embedding models), or PoolLast when it names none: a decoder LM.
func (m *Model) PoolingType() Pooling {
	if m.file == nil {
		return PoolLast
	}
	arch, ok := m.file.GetString("general.architecture")
	if !ok {
		return PoolLast
	}
	v, ok := m.file.GetInt(arch + ".pooling_type")
	if !ok || v < 0 || v > math.MaxInt32 {
		return PoolLast
	}
	return Pooling(v)
}

// EmbeddingSize is the length of an embedding: the hidden size.
func (m *Model) EmbeddingSize() int { return m.Cfg.Hidden }

// EmbedChunk runs tokens through the model as one sequence in slot at positions pos.. (its
// keys and values cached there, as ForwardBatch does; the caller owns the slot and its
// positions) and adds their final hidden states, normalised by the output norm, to acc
// (EmbeddingSize floats) as pool says: PoolMean adds every row, PoolCLS copies the row at
// position 0, PoolLast copies the chunk's last row. An input longer than MaxBatch runs as
// consecutive chunks into one acc; FinishEmbedding then makes the embedding. Everything is
// checked first; on an error acc may hold a partial sum.
func (m *Model) EmbedChunk(e kernelrt.Ops, slot, pos int, tokens []int32, pool Pooling, acc []float32) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	c := &m.Cfg
	T, H := len(tokens), c.Hidden
	switch {
	case pool.check() != nil:
		return pool.check()
	case len(acc) != H:
		return fmt.Errorf("orchestrator: EmbedChunk: acc has %d floats, the hidden size is %d", len(acc), H)
	case T == 0 || T > c.MaxBatch:
		return fmt.Errorf("orchestrator: EmbedChunk of %d tokens: want 1..MaxBatch = %d", T, c.MaxBatch)
	case slot < 0 || slot >= c.slots():
		return fmt.Errorf("orchestrator: EmbedChunk: slot %d: the cache has slots 0..%d", slot, c.slots()-1)
	case pos < 0 || pos > c.MaxCtx-T:
		return fmt.Errorf("orchestrator: EmbedChunk: %d tokens at position %d would pass MaxCtx = %d", T, pos, c.MaxCtx)
	}
	if err := m.checkTokens(tokens); err != nil {
		return err
	}
	m.one[0] = Seq{Slot: slot, Pos: pos, N: T} // no logits: forward leaves the final hidden states in x
	if _, err := m.forward(e, tokens, m.one[:], false); err != nil {
		return err
	}
	lo, hi := 0, T
	switch pool {
	case PoolCLS:
		if pos > 0 {
			return nil
		}
		hi = 1
	case PoolLast:
		lo = T - 1
	}
	n := hi - lo
	xn := m.xn[:n*H]
	// The output norm, as head applies it before the output matrix. xn is the layers'
	// scratch; what mm derived from it is stale now.
	m.acts = nil
	if err := e.RMSNorm(xn, m.x[lo*H:hi*H], m.OutNorm, n, H, c.Eps); err != nil {
		return err
	}
	if pool != PoolMean {
		copy(acc, xn)
	} else {
		for i := range n {
			for j, v := range xn[i*H : (i+1)*H] {
				acc[j] += v
			}
		}
	}
	return checkFinite(e, acc, func() string { return "embedding (output_norm)" })
}

// FinishEmbedding turns what EmbedChunk accumulated for an input of n tokens into the
// embedding: the mean for PoolMean, then L2-normalised in place (a zero vector stays zero,
// as llama.cpp's normalisation leaves it).
func FinishEmbedding(pool Pooling, n int, v []float32) error {
	if err := pool.check(); err != nil {
		return err
	}
	if n < 1 {
		return fmt.Errorf("orchestrator: FinishEmbedding of %d tokens", n)
	}
	if pool == PoolMean {
		for i := range v {
			v[i] /= float32(n)
		}
	}
	var ss float64
	for _, x := range v {
		ss += float64(x) * float64(x)
	}
	if ss == 0 {
		return nil
	}
	inv := 1 / math.Sqrt(ss)
	for i, x := range v {
		v[i] = float32(float64(x) * inv)
	}
	return nil
}

// Embedding computes the embedding of tokens (1..MaxCtx of them) into out (EmbeddingSize
// floats): the model run over them in slot 0 in MaxBatch chunks, the final hidden states
// pooled as pool says and L2-normalised. It overwrites slot 0's cache: Pos is 0 afterwards,
// so a Prefill that follows starts from an empty cache. A batching caller that owns the
// slots uses EmbedChunk and FinishEmbedding instead.
func (m *Model) Embedding(e kernelrt.Ops, tokens []int32, pool Pooling, out []float32) error {
	if err := pool.check(); err != nil {
		return err
	}
	if len(tokens) == 0 || len(tokens) > m.Cfg.MaxCtx {
		return fmt.Errorf("orchestrator: Embedding of %d tokens: want 1..MaxCtx = %d", len(tokens), m.Cfg.MaxCtx)
	}
	if len(out) != m.Cfg.Hidden {
		return fmt.Errorf("orchestrator: Embedding: out has %d floats, the hidden size is %d", len(out), m.Cfg.Hidden)
	}
	m.mu.Lock()
	m.pos = 0
	m.mu.Unlock()
	clear(out)
	for pos := 0; pos < len(tokens); pos += m.Cfg.MaxBatch {
		chunk := tokens[pos:min(pos+m.Cfg.MaxBatch, len(tokens))]
		if err := m.EmbedChunk(e, 0, pos, chunk, pool, out); err != nil {
			return err
		}
	}
	return FinishEmbedding(pool, len(tokens), out)
}
