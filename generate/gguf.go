package generate

import (
	"errors"
	"fmt"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// FromTokenizer adapts a GGUF tokenizer (package tokenizer) to Tokenizer and ChatTemplater:
// special tokens added and parsed as the Options say, control tokens not rendered in the
// text, the file's chat template with its BOS and EOS text.
func FromTokenizer(t *tokenizer.Tokenizer) Tokenizer { return ggufTok{t} }

type ggufTok struct{ t *tokenizer.Tokenizer }

func (g ggufTok) Encode(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	return g.t.Encode(text, tokenizer.EncodeOptions{AddSpecial: addSpecial, ParseSpecial: parseSpecial})
}

func (g ggufTok) NewDecoder() Decoder { return ggufDec{g.t.NewStreamDecoder(false)} }

func (g ggufTok) IsEOG(id int32) bool { return g.t.IsEOG(id) }

func (g ggufTok) ChatTemplate() (src, bos, eos string) {
	if id := g.t.BOS(); id >= 0 {
		bos = g.t.Token(id)
	}
	if id := g.t.EOS(); id >= 0 {
		eos = g.t.Token(id)
	}
	return g.t.ChatTemplate(), bos, eos
}

// ggufDec is a StreamDecoder as a Decoder; the model only produces ids of its vocabulary,
// which the model's tokenizer holds, so Write's out-of-range error cannot happen here.
type ggufDec struct{ d *tokenizer.StreamDecoder }

func (d ggufDec) Write(id int32) []byte {
	b, _ := d.d.Write(id)
	return b
}

func (d ggufDec) Flush() []byte { return d.d.Flush() }

// OpenOptions configure Open.
type OpenOptions struct {
	// Runtime configures the kernels' thread pool (Threads 0 = one per usable core).
	Runtime kernelrt.Options
	// Load configures the model (context length, KV cache type, ...).
	Load orchestrator.LoadOptions
}

// Open loads a GGUF model and its tokenizer and starts a Runtime for it: the shortest path
// from a file to text. Close the Generator to release all three.
//
//	g, err := generate.Open("qwen2.5-0.5b-instruct-q8_0.gguf", generate.OpenOptions{})
//	...
//	defer g.Close()
//	for piece, err := range g.Chat(ctx, []chat.Message{{Role: "user", Content: "Hi"}}, generate.Options{MaxTokens: 64}) { ... }
func Open(path string, o OpenOptions) (*Generator, error) {
	m, rt, tok, err := Load(path, o)
	if err != nil {
		return nil, err
	}
	g, err := New(m, rt, tok)
	if err != nil {
		rt.Close()
		m.Close()
		return nil, err
	}
	g.owned = []func() error{rt.Close, m.Close}
	return g, nil
}

// Load is Open's work for a caller that drives the model itself (a batching server): it
// loads the GGUF model and its tokenizer (checked to agree on the vocabulary) and starts a
// Runtime sized for the model. The caller closes the Runtime and the model.
func Load(path string, o OpenOptions) (*orchestrator.Model, *kernelrt.Runtime, Tokenizer, error) {
	m, err := orchestrator.LoadGGUF(path, o.Load)
	if err != nil {
		return nil, nil, nil, err
	}
	tk, err := tokenizer.FromGGUF(m.File())
	if err != nil {
		m.Close()
		return nil, nil, nil, fmt.Errorf("generate: %s: %w", path, err)
	}
	if tk.VocabSize() != m.Vocab() {
		m.Close()
		return nil, nil, nil, fmt.Errorf("generate: %s: the tokenizer has %d tokens but the model's logits %d", path, tk.VocabSize(), m.Vocab())
	}
	ro := o.Runtime
	c := m.Cfg
	if ro.MaxCols == 0 {
		ro.MaxCols = (max(c.Hidden, c.Intermediate, c.Heads*c.HeadDim) + kernelrt.QK - 1) / kernelrt.QK * kernelrt.QK
	}
	if ro.MaxCtx == 0 {
		ro.MaxCtx = c.MaxCtx
	}
	rt, err := kernelrt.New(ro)
	if err != nil {
		m.Close()
		return nil, nil, nil, err
	}
	return m, rt, FromTokenizer(tk), nil
}

// Close releases what Open made (the Runtime and the model); a Generator from New owns
// nothing and Close does nothing.
func (g *Generator) Close() error {
	var errs []error
	for _, c := range g.owned {
		errs = append(errs, c())
	}
	g.owned = nil
	return errors.Join(errs...)
}
