package serve

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// Embedder is what embeddings need of the Model beyond generation: *orchestrator.Model
// has it (see its EmbedChunk).
type Embedder interface {
	// EmbedChunk runs tokens as one sequence in slot at positions pos.. and adds their
	// pooled final hidden states to acc (EmbeddingSize floats).
	EmbedChunk(ops kernelrt.Ops, slot, pos int, tokens []int32, pool orchestrator.Pooling, acc []float32) error
	// EmbeddingSize is the length of an embedding.
	EmbeddingSize() int
	// PoolingType is the pooling the model file asks for.
	PoolingType() orchestrator.Pooling
}

// ErrNoEmbeddings is returned by Embed when the model cannot give embeddings: it is not an
// Embedder, or its file asks for a pooling that gives no single vector (none, rank).
var ErrNoEmbeddings = errors.New("serve: the model gives no embeddings")

// MaxEmbedInputs bounds the inputs of one Embed call, as OpenAI's API does.
const MaxEmbedInputs = 2048

// embedJob is an Embed call's work: its inputs run one after the other in the request's
// slot, one chunk per engine step, so generations batched beside it keep their pace.
type embedJob struct {
	em     Embedder
	pool   orchestrator.Pooling
	inputs [][]int32
	out    [][]float32
	i, pos int // the input running, and how many of its tokens have run
}

// embedder is the model as an Embedder with a pooling that gives one vector per input.
func (e *Engine) embedder() (Embedder, orchestrator.Pooling, error) {
	em, ok := e.model.(Embedder)
	if !ok {
		return nil, 0, fmt.Errorf("%w: the model has no hidden-state access", ErrNoEmbeddings)
	}
	switch p := em.PoolingType(); p {
	case orchestrator.PoolMean, orchestrator.PoolCLS, orchestrator.PoolLast:
		return em, p, nil
	default:
		return nil, 0, fmt.Errorf("%w: its file asks for pooling %v", ErrNoEmbeddings, p)
	}
}

// EmbeddingSize is the length of the model's embeddings (0: it gives none).
func (e *Engine) EmbeddingSize() int {
	if em, _, err := e.embedder(); err == nil {
		return em.EmbeddingSize()
	}
	return 0
}

// Embed returns the embedding of each input (token ids, 1 to MaxCtx of them): the model's
// final hidden states after the output norm, pooled as the model file's pooling_type says
// (last token when it names none, as for a decoder LM) and L2-normalised. The inputs run in
// one slot of the engine, taking their turn in its queue like a generation (the same
// errors: ErrQueueFull, ErrDraining, ErrClosed), one chunk of PrefillChunk tokens per step
// beside the running generations. The same input gives the same vector whatever else runs:
// its chunks are its own forward passes. Cancelling ctx cancels the work.
func (e *Engine) Embed(ctx context.Context, inputs [][]int32) ([][]float32, error) {
	em, pool, err := e.embedder()
	if err != nil {
		return nil, err
	}
	if len(inputs) == 0 || len(inputs) > MaxEmbedInputs {
		return nil, fmt.Errorf("serve: Embed of %d inputs: want 1 to %d", len(inputs), MaxEmbedInputs)
	}
	for i, in := range inputs {
		if len(in) == 0 || len(in) > e.maxCtx {
			return nil, fmt.Errorf("serve: input %d has %d tokens: want 1 to %d (the context)", i, len(in), e.maxCtx)
		}
		for j, id := range in {
			if id < 0 || int(id) >= e.vocab {
				return nil, fmt.Errorf("serve: input %d: token %d at index %d is outside the vocabulary (%d)", i, id, j, e.vocab)
			}
		}
	}
	job := &embedJob{em: em, pool: pool, inputs: inputs, out: make([][]float32, len(inputs))}
	n := em.EmbeddingSize()
	flat := make([]float32, n*len(inputs))
	for i := range job.out {
		job.out[i] = flat[i*n : (i+1)*n : (i+1)*n]
	}
	st := newStream()
	if err := e.enqueue(&request{ctx: ctx, stream: st, emb: job, start: time.Now()}); err != nil {
		return nil, err
	}
	for {
		// An embedding's stream carries no text: Next returns at its end.
		if _, err := st.Next(ctx); err == io.EOF {
			return job.out, nil
		} else if err != nil {
			return nil, err
		}
	}
}

// embedStep runs one chunk of every embedding request in a slot (the loop's goroutine).
func (e *Engine) embedStep() {
	for _, r := range e.active {
		j := r.emb
		if j == nil || r.done {
			continue
		}
		in := j.inputs[j.i]
		n := min(len(in)-j.pos, e.opts.PrefillChunk, e.maxBatch)
		// The slot's cache is not a prompt prefix any more: nothing in it is reusable.
		e.slots[r.slot].cache = e.slots[r.slot].cache[:0]
		if err := j.em.EmbedChunk(e.ops, r.slot, j.pos, in[j.pos:j.pos+n], j.pool, j.out[j.i]); err != nil {
			e.finish(r, generate.StopNone, fmt.Errorf("serve: input %d: %w", j.i, err))
			continue
		}
		e.embedded.Add(uint64(n))
		e.metrics.embedded.Add(float64(n))
		j.pos += n
		r.pos = j.pos
		if j.pos < len(in) {
			continue
		}
		if err := orchestrator.FinishEmbedding(j.pool, len(in), j.out[j.i]); err != nil {
			e.finish(r, generate.StopNone, err)
			continue
		}
		j.i, j.pos, r.pos = j.i+1, 0, 0
		if j.i == len(j.inputs) {
			e.finish(r, generate.StopNone, nil)
		}
	}
}

// unmarshalAs decodes raw as a T.
func unmarshalAs[T any](raw json.RawMessage) (T, bool) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		var zero T
		return zero, false
	}
	return v, true
}

// embeddingRequest is POST /v1/embeddings.
type embeddingRequest struct {
	Model          string          `json:"model"`
	Input          json.RawMessage `json:"input"`
	EncodingFormat string          `json:"encoding_format"`
	Dimensions     *int            `json:"dimensions"`
	User           string          `json:"user"`
}

// inputs reads input: a string, an array of strings, an array of token ids, or an array of
// arrays of token ids; strings are tokenized as prompts are (BOS/EOS as the model asks,
// special-token text parsed).
func (c *embeddingRequest) inputs(tok generate.Tokenizer) ([][]int32, *apiError) {
	raw := c.Input
	if len(raw) == 0 || string(raw) == "null" {
		return nil, badRequest("input", "missing_required_parameter", "input is required")
	}
	// Each form is tried on fresh variables: a failed Unmarshal may leave a partial result.
	var texts []string
	var idss [][]int32
	if one, ok := unmarshalAs[string](raw); ok {
		texts = []string{one}
	} else if many, ok := unmarshalAs[[]string](raw); ok {
		texts = many
	} else if ids, ok := unmarshalAs[[]int32](raw); ok {
		idss = [][]int32{ids}
	} else if idss, ok = unmarshalAs[[][]int32](raw); !ok {
		return nil, badRequest("input", "invalid_type", "input must be a string, an array of strings, an array of token ids or an array of those")
	}
	if texts != nil {
		idss = make([][]int32, len(texts))
		for i, t := range texts {
			var err error
			if idss[i], err = tok.Encode(t, true, true); err != nil {
				return nil, badRequest(fmt.Sprintf("input[%d]", i), "invalid_value", "tokenizing input %d: %v", i, err)
			}
		}
	}
	if len(idss) == 0 || len(idss) > MaxEmbedInputs {
		return nil, badRequest("input", "invalid_value", "input holds %d items: want 1 to %d", len(idss), MaxEmbedInputs)
	}
	for i, in := range idss {
		if len(in) == 0 {
			return nil, badRequest(fmt.Sprintf("input[%d]", i), "invalid_value", "input %d is empty (no tokens)", i)
		}
	}
	return idss, nil
}

type (
	embeddingData struct {
		Object    string `json:"object"`
		Index     int    `json:"index"`
		Embedding any    `json:"embedding"` // []float32, or a base64 string of little-endian float32s
	}
	embeddingBody struct {
		Object string          `json:"object"`
		Data   []embeddingData `json:"data"`
		Model  string          `json:"model"`
		Usage  struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
)

// base64Floats is v as little-endian float32 bytes in standard base64, OpenAI's
// encoding_format "base64".
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

func (s *Server) embeddings(w http.ResponseWriter, r *http.Request) {
	var c embeddingRequest
	body, aerr := s.readBody(w, r)
	if aerr == nil {
		aerr = decodeJSON(body, &c)
	}
	var inputs [][]int32
	if aerr == nil {
		switch size := s.e.EmbeddingSize(); {
		case c.EncodingFormat != "" && c.EncodingFormat != "float" && c.EncodingFormat != "base64":
			aerr = badRequest("encoding_format", "invalid_value", "encoding_format %q: want float or base64", c.EncodingFormat)
		case size == 0:
			_, _, err := s.e.embedder()
			aerr = badRequest("model", "unsupported_model", "%v", err)
		case c.Dimensions != nil && *c.Dimensions != size:
			aerr = badRequest("dimensions", "unsupported_value", "dimensions = %d: this model's embeddings have %d", *c.Dimensions, size)
		default:
			inputs, aerr = c.inputs(s.e.Tokenizer())
		}
	}
	for i := 0; aerr == nil && i < len(inputs); i++ {
		if len(inputs[i]) > s.e.MaxCtx() {
			aerr = badRequest(fmt.Sprintf("input[%d]", i), "context_length_exceeded", "input %d is %d tokens, the context holds %d", i, len(inputs[i]), s.e.MaxCtx())
		}
		for j, id := range inputs[i] {
			if aerr == nil && (id < 0 || int(id) >= s.e.vocab) {
				aerr = badRequest(fmt.Sprintf("input[%d]", i), "invalid_value", "input %d: token %d at index %d is outside the vocabulary (%d)", i, id, j, s.e.vocab)
			}
		}
	}
	if aerr == nil && s.draining.Load() {
		aerr = s.unavailable()
	}
	if aerr != nil {
		s.fail(w, aerr)
		return
	}
	vecs, err := s.e.Embed(r.Context(), inputs)
	switch {
	case err == nil:
	case r.Context().Err() != nil:
		return // the client has gone
	case errors.Is(err, ErrQueueFull):
		s.fail(w, &apiError{status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: strp("queue_full"),
			Message: "every slot is busy and the queue is full: retry later"})
		return
	case errors.Is(err, ErrDraining), errors.Is(err, ErrClosed):
		s.fail(w, s.unavailable())
		return
	default:
		s.fail(w, &apiError{status: http.StatusInternalServerError, Type: "server_error", Code: strp("embedding_failed"), Message: err.Error()})
		return
	}
	out := embeddingBody{Object: "list", Model: s.e.Name(), Data: make([]embeddingData, len(vecs))}
	for i, v := range vecs {
		out.Data[i] = embeddingData{Object: "embedding", Index: i, Embedding: v}
		if c.EncodingFormat == "base64" {
			out.Data[i].Embedding = base64Floats(v)
		}
		out.Usage.PromptTokens += len(inputs[i])
	}
	out.Usage.TotalTokens = out.Usage.PromptTokens
	writeJSON(w, out)
}
