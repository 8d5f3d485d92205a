package perplexity

import (
	"fmt"
	"io"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// MinCtx is the shortest chunk the drivers take: two scored positions (the second half of
// the chunk but its last token), so that one chunk has a spread.
const MinCtx = 6

// Model is a language model the drivers score.
type Model interface {
	// Vocab is the length of a row of logits.
	Vocab() int
	// Eval runs tokens (one chunk) from an empty context and calls row with the logits of
	// every position p >= from, in increasing p; a row is valid only during its call. An
	// error from row stops Eval and is returned.
	Eval(tokens []int32, from int, row func(p int, logits []float32) error) error
}

// Options control Perplexity and KLDivergence.
type Options struct {
	// Ctx is the number of tokens per chunk (llama-perplexity's -c; its default is 512).
	// KLDivergence takes the base file's when Ctx is 0.
	Ctx int
	// Chunks limits the number of chunks (0 = every whole chunk of the text).
	Chunks int
	// AddBOS replaces the first token of every chunk by BOS before evaluating it, as
	// llama-perplexity does for a vocabulary that adds BOS.
	AddBOS bool
	BOS    int32
	// Base, for Perplexity, also writes the base file of the run (the KL divergence base).
	Base io.Writer
	// Progress, if set, is called after every chunk.
	Progress func(Progress)
}

// Progress reports a finished chunk.
type Progress struct {
	// Chunk is the number of chunks done (1-based), of Chunks.
	Chunk, Chunks int
	// Elapsed is the time since the first chunk started.
	Elapsed time.Duration
	// PPL is the running perplexity over the chunks so far (Perplexity).
	PPL float64
	// KL is the running KL summary without percentiles (KLDivergence).
	KL *KLSummary
}

// Result is a perplexity run's figures.
type Result struct {
	// Tokens is the length of the tokenized text; Ctx the chunk length; Chunks the number of
	// chunks scored; Positions the number of positions scored (Chunks*ScoredPositions(Ctx)).
	Tokens, Ctx, Chunks, Positions int
	// PPL is the final estimate and PPLUnc its "+/-".
	PPL, PPLUnc float64
	// ChunkPPL is the running perplexity after each chunk (llama-perplexity's [1]x,[2]y,...).
	ChunkPPL []float64
}

// ChunkCount is the number of chunks of ctx tokens a text of nTokens tokens gives, at most
// limit when limit > 0. Like llama-perplexity it wants at least 2*ctx tokens.
func ChunkCount(nTokens, ctx, limit int) (int, error) {
	if ctx < MinCtx || ctx > maxBaseCtx {
		return 0, fmt.Errorf("perplexity: a context of %d tokens: want %d..%d", ctx, MinCtx, maxBaseCtx)
	}
	if limit < 0 {
		return 0, fmt.Errorf("perplexity: a limit of %d chunks is negative", limit)
	}
	if nTokens < 2*ctx {
		return 0, fmt.Errorf("perplexity: you need at least %d tokens to evaluate perplexity with a context of %d; the text tokenizes to only %d", 2*ctx, ctx, nTokens)
	}
	n := nTokens / ctx
	if limit > 0 {
		n = min(n, limit)
	}
	return n, nil
}

// chunkInput copies chunk i of tokens into buf, its first token replaced by BOS when asked.
func chunkInput(buf, tokens []int32, i, ctx int, o Options) []int32 {
	buf = append(buf[:0], tokens[i*ctx:(i+1)*ctx]...)
	if o.AddBOS {
		buf[0] = o.BOS
	}
	return buf
}

// checkModel checks the model's vocabulary and the BOS id.
func checkModel(m Model, o Options) (int, error) {
	if m == nil {
		return 0, fmt.Errorf("perplexity: no model")
	}
	v := m.Vocab()
	if v < 1 || v > maxRow {
		return 0, fmt.Errorf("perplexity: the model's vocabulary of %d is out of range 1..%d", v, maxRow)
	}
	if o.AddBOS && (o.BOS < 0 || int(o.BOS) >= v) {
		return 0, fmt.Errorf("perplexity: BOS token %d is outside the vocabulary of %d", o.BOS, v)
	}
	return v, nil
}

// Perplexity scores tokens as llama-perplexity does: chunk i is tokens[i*Ctx:(i+1)*Ctx]
// (first token replaced by BOS when AddBOS), evaluated from an empty context, and the
// positions Ctx/2 .. Ctx-2 predict the tokens after them. With o.Base it also writes the
// base file of the KL divergence (the tokens, then every scored position's quantized
// log-probabilities).
func Perplexity(m Model, tokens []int32, o Options) (Result, error) {
	V, err := checkModel(m, o)
	if err != nil {
		return Result{}, err
	}
	n, err := ChunkCount(len(tokens), o.Ctx, o.Chunks)
	if err != nil {
		return Result{}, err
	}
	ctx, first := o.Ctx, o.Ctx/2
	for i, t := range tokens[:n*ctx] {
		if t < 0 || int(t) >= V {
			return Result{}, fmt.Errorf("perplexity: token %d is %d, outside the vocabulary of %d", i, t, V)
		}
	}
	var bw *BaseWriter
	if o.Base != nil {
		if bw, err = NewBaseWriter(o.Base, ctx, V, tokens[:n*ctx]); err != nil {
			return Result{}, err
		}
	}
	res := Result{Tokens: len(tokens), Ctx: ctx, Chunks: n}
	var acc PPL
	buf := make([]int32, 0, ctx)
	t0 := time.Now()
	for i := range n {
		in := chunkInput(buf, tokens, i, ctx, o)
		err := m.Eval(in, first, func(p int, logits []float32) error {
			if p < first || p > ctx-2 {
				return nil // the last position predicts the next chunk's first token: not scored
			}
			if len(logits) != V {
				return fmt.Errorf("perplexity: the model returned %d logits, its vocabulary is %d", len(logits), V)
			}
			if err := acc.Add(logits, tokens[i*ctx+p+1]); err != nil {
				return err
			}
			if bw != nil {
				return bw.WriteRow(logits)
			}
			return nil
		})
		if err != nil {
			return Result{}, fmt.Errorf("perplexity: chunk %d of %d: %w", i+1, n, err)
		}
		if acc.Count() != (i+1)*ScoredPositions(ctx) {
			return Result{}, fmt.Errorf("perplexity: chunk %d of %d: the model gave %d of the chunk's %d scored positions", i+1, n, acc.Count()-i*ScoredPositions(ctx), ScoredPositions(ctx))
		}
		res.ChunkPPL = append(res.ChunkPPL, acc.Value())
		if o.Progress != nil {
			o.Progress(Progress{Chunk: i + 1, Chunks: n, Elapsed: time.Since(t0), PPL: acc.Value()})
		}
	}
	if bw != nil {
		if err := bw.Flush(); err != nil {
			return Result{}, err
		}
	}
	res.Positions, res.PPL, res.PPLUnc = acc.Count(), acc.Value(), acc.Uncertainty()
	return res, nil
}

// KLDivergence evaluates the base file's chunks (at most o.Chunks of them when > 0) with m
// and compares every scored position's distribution with the base's. o.Ctx, when not 0,
// must equal the base's chunk length; the caller checks its own text against the base's
// tokens with Base.Match.
func KLDivergence(m Model, base *Base, o Options) (KLSummary, error) {
	V, err := checkModel(m, o)
	if err != nil {
		return KLSummary{}, err
	}
	if base == nil {
		return KLSummary{}, fmt.Errorf("perplexity: no base file")
	}
	if V != base.Vocab {
		return KLSummary{}, fmt.Errorf("perplexity: the model's vocabulary has %d tokens, the base file's %d", V, base.Vocab)
	}
	if o.Ctx != 0 && o.Ctx != base.Ctx {
		return KLSummary{}, fmt.Errorf("perplexity: this run uses chunks of %d tokens, the base file chunks of %d", o.Ctx, base.Ctx)
	}
	if o.Chunks < 0 {
		return KLSummary{}, fmt.Errorf("perplexity: a limit of %d chunks is negative", o.Chunks)
	}
	ctx, first := base.Ctx, base.Ctx/2
	n := base.Chunks
	if o.Chunks > 0 {
		n = min(n, o.Chunks)
	}
	var acc KLD
	row := make([]byte, 2*RowLen(V))
	lb := make([]float32, V)
	scratch := make([]float32, V)
	buf := make([]int32, 0, ctx)
	t0 := time.Now()
	for i := range n {
		in := chunkInput(buf, base.Tokens, i, ctx, o)
		before := acc.Count()
		err := m.Eval(in, first, func(p int, logits []float32) error {
			if p < first || p > ctx-2 {
				return nil
			}
			if len(logits) != V {
				return fmt.Errorf("perplexity: the model returned %d logits, its vocabulary is %d", len(logits), V)
			}
			if err := base.ReadRow(i, p-first, row); err != nil {
				return err
			}
			if err := DecodeRow(lb, row); err != nil {
				return fmt.Errorf("%w (row %d of chunk %d)", err, p-first, i+1)
			}
			pos, err := ComparePosition(lb, logits, scratch, base.Tokens[i*ctx+p+1])
			if err != nil {
				return err
			}
			acc.Add(pos)
			return nil
		})
		if err != nil {
			return KLSummary{}, fmt.Errorf("perplexity: chunk %d of %d: %w", i+1, n, err)
		}
		if got := acc.Count() - before; got != ScoredPositions(ctx) {
			return KLSummary{}, fmt.Errorf("perplexity: chunk %d of %d: the model gave %d of the chunk's %d scored positions", i+1, n, got, ScoredPositions(ctx))
		}
		if o.Progress != nil {
			s := acc.Means()
			o.Progress(Progress{Chunk: i + 1, Chunks: n, Elapsed: time.Since(t0), PPL: s.PPL, KL: &s})
		}
	}
	return acc.Final(), nil
}

// orchModel is an orchestrator model as a Model.
type orchModel struct {
	m *orchestrator.Model
	e kernelrt.Ops
}

// FromOrchestrator adapts a model built with AllLogits (LoadOptions.AllLogits) and a
// context of at least the chunk length to Model; it prefills each chunk in pieces of the
// model's MaxBatch tokens, so its logits buffer (MaxBatch rows) is all the logits it holds.
func FromOrchestrator(m *orchestrator.Model, e kernelrt.Ops) (Model, error) {
	if m == nil || e == nil {
		return nil, fmt.Errorf("perplexity: FromOrchestrator needs a model and its Ops")
	}
	if !m.Cfg.AllLogits {
		return nil, fmt.Errorf("perplexity: the model was built without AllLogits: it returns only the last position's logits")
	}
	return orchModel{m, e}, nil
}

func (o orchModel) Vocab() int { return o.m.Vocab() }

func (o orchModel) Eval(tokens []int32, from int, row func(int, []float32) error) error {
	if len(tokens) > o.m.MaxCtx() {
		return fmt.Errorf("perplexity: a chunk of %d tokens is longer than the model's context of %d", len(tokens), o.m.MaxCtx())
	}
	o.m.Reset()
	V, B := o.m.Vocab(), o.m.MaxBatch()
	for s := 0; s < len(tokens); s += B {
		n := min(B, len(tokens)-s)
		out, err := o.m.Prefill(o.e, tokens[s:s+n])
		if err != nil {
			return err
		}
		if len(out) != n*V {
			return fmt.Errorf("perplexity: Prefill of %d tokens returned %d logits, want %d", n, len(out), n*V)
		}
		for t := max(from-s, 0); t < n; t++ {
			if err := row(s+t, out[t*V:(t+1)*V]); err != nil {
				return err
			}
		}
	}
	return nil
}
