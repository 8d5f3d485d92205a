// Package generate is kernelrt's text-in, text-out entry point: it tokenizes a prompt (or
// renders a conversation with the model's chat template), prefills it, samples tokens and
// streams the decoded text as it is generated.
//
//	g, err := generate.New(model, ops, tok)
//	for piece, err := range g.Stream(ctx, "Once upon a time", generate.Options{MaxTokens: 64}) {
//		...
//	}
//
// A Generator keeps the tokens its model's KV cache holds. A new request computes the longest
// common prefix with them, truncates the cache to it and prefills only the rest, so a
// multi-turn chat does not prefill the whole history again.
package generate

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/grammar"
	"github.com/kernelrt/kernelrt/sample"
)

// Ops runs the model's kernels: kernelrt.Serial{} or a *kernelrt.Runtime.
type Ops = kernelrt.Ops

// Model is what generation needs from a decoder with a KV cache.
type Model interface {
	// Prefill runs ids at the current position and returns the logits of the last one (a
	// longer result is taken as one row per token; its last row is used).
	Prefill(ops Ops, ids []int32) ([]float32, error)
	// Decode runs one token at the current position and returns its logits.
	Decode(ops Ops, id int32) ([]float32, error)
	// Pos is the number of tokens in the KV cache.
	Pos() int
	// Truncate keeps the first n <= Pos() tokens of the KV cache. Truncate(0) and
	// Truncate(Pos()) must succeed; a model that cannot cut elsewhere returns an error
	// wrapping errors.ErrUnsupported, and the Generator then prefills from position 0.
	Truncate(n int) error
	// MaxCtx is the number of positions the KV cache holds.
	MaxCtx() int
	// Vocab is the length of a logit row.
	Vocab() int
}

// Tokenizer turns text into token ids and back.
type Tokenizer interface {
	// Encode tokenizes text. addSpecial adds the BOS/EOS tokens the model asks for;
	// parseSpecial turns special-token text (such as "<|im_end|>") into its token.
	Encode(text string, addSpecial, parseSpecial bool) ([]int32, error)
	// NewDecoder returns a streaming decoder.
	NewDecoder() Decoder
	// IsEOG reports whether id ends generation (EOS, EOT, <|im_end|>, ...).
	IsEOG(id int32) bool
}

// Decoder turns a stream of token ids into text without splitting a UTF-8 character.
type Decoder interface {
	// Write adds a token and returns the text that became complete (possibly none). The
	// result may alias the decoder's memory until the next call.
	Write(id int32) []byte
	// Flush returns what is held back (an incomplete character at the end) and resets.
	Flush() []byte
}

// ChatTemplater is implemented by a Tokenizer that knows the model's chat template (the
// GGUF's tokenizer.chat_template) and the text of its BOS and EOS tokens, which the
// template sees. Without it, or with an empty template, Chat uses ChatML, as llama.cpp
// does.
type ChatTemplater interface {
	ChatTemplate() (src, bos, eos string)
}

// Options configure one generation. The zero value generates greedily until an
// end-of-generation token or a full context.
type Options struct {
	// MaxTokens is the most tokens to generate; 0 means no limit but the context.
	MaxTokens int
	// Stop strings end generation where they first appear in the text; they are never
	// emitted, and text that could be the start of one is held back until it cannot.
	Stop []string
	// Sampling is the sampler chain, its Seed included (the zero value is greedy).
	Sampling sample.Options
	// Grammar, if set, constrains the text to the grammar (package grammar; a JSON schema
	// compiles to one): every sampled token keeps it a prefix of a sentence of the
	// grammar, and an end-of-generation token comes only once the text is a complete
	// sentence. The Tokenizer must implement TokenBytes. MaxTokens, a stop string or a
	// full context can still cut the text short.
	Grammar *grammar.Grammar
	// NoBOS does not add the BOS/EOS tokens the model asks for around the prompt.
	NoBOS bool
	// NoSpecial treats special-token text in the prompt as plain text.
	NoSpecial bool
	// ChatVars are extra chat-template variables (Chat only), e.g. enable_thinking.
	ChatVars map[string]any
}

// StopReason says why a generation ended.
type StopReason int

const (
	// StopNone: the generation has not ended, or ended with an error.
	StopNone StopReason = iota
	// StopEOG: the model produced an end-of-generation token.
	StopEOG
	// StopString: a stop string appeared.
	StopString
	// StopMaxTokens: Options.MaxTokens tokens were generated.
	StopMaxTokens
	// StopContext: the KV cache is full.
	StopContext
	// StopConsumer: the caller stopped iterating.
	StopConsumer
	// StopCancelled: the context was cancelled.
	StopCancelled
)

// String names the reason.
func (r StopReason) String() string {
	return [...]string{"none", "eog", "stop-string", "max-tokens", "context-full", "consumer", "cancelled"}[r]
}

// Stats describe the last generation.
type Stats struct {
	PromptTokens    int           // tokens in the prompt
	ReusedTokens    int           // prompt tokens already in the KV cache (not prefilled)
	GeneratedTokens int           // tokens sampled (the end-of-generation token included)
	PrefillTime     time.Duration // prefilling the new prompt tokens
	GenerateTime    time.Duration // sampling and decoding
	Stop            StopReason
}

// prefillChunk is how many prompt tokens one Prefill call takes, so cancellation is seen
// between chunks of a long prompt.
const prefillChunk = 256

// Generator runs generations on one model and its KV cache. It is not safe for concurrent
// use; a second stream started while one runs gets an error.
type Generator struct {
	model Model
	ops   Ops
	tok   Tokenizer
	chat  *ChatRenderer

	cache []int32        // the tokens in the model's KV cache, positions 0..len-1
	owned []func() error // what Close releases (Open's Runtime and model)
	busy  atomic.Bool
	stats Stats
}

// New returns a Generator. The chat template comes from tok if it is a ChatTemplater.
func New(model Model, ops Ops, tok Tokenizer) (*Generator, error) {
	if model == nil || ops == nil || tok == nil {
		return nil, errors.New("generate: New needs a model, an executor and a tokenizer")
	}
	r, err := NewChatRenderer(tok)
	if err != nil {
		return nil, err
	}
	return &Generator{model: model, ops: ops, tok: tok, chat: r}, nil
}

// ChatRenderer turns a conversation into prompt text with a tokenizer's chat template and
// the text of its BOS and EOS tokens. It is safe for concurrent use (chat.Template is), so a
// server renders requests on their own goroutines.
type ChatRenderer struct {
	tmpl     *chat.Template
	bos, eos string
}

// NewChatRenderer uses tok's template if it is a ChatTemplater with one, else ChatML, as
// llama.cpp does for a model without a template.
func NewChatRenderer(tok Tokenizer) (*ChatRenderer, error) {
	r := &ChatRenderer{}
	src := ""
	if ct, ok := tok.(ChatTemplater); ok {
		src, r.bos, r.eos = ct.ChatTemplate()
	}
	var err error
	if r.tmpl, err = chat.Parse(src); errors.Is(err, chat.ErrNoTemplate) {
		r.tmpl, err = chat.Builtin(chat.ChatML)
	}
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	return r, nil
}

// Render renders msgs ending with the opening of the assistant's turn; vars are extra
// template variables (Options.ChatVars).
func (r *ChatRenderer) Render(msgs []chat.Message, vars map[string]any) (string, error) {
	return r.RenderTools(msgs, nil, vars)
}

// RenderTools is Render with the functions the model may call shown by the template (as
// llama.cpp's --jinja does); the reply's calls are in the convention ToolFormat names.
func (r *ChatRenderer) RenderTools(msgs []chat.Message, tools []chat.Tool, vars map[string]any) (string, error) {
	s, err := r.tmpl.Render(msgs, chat.Options{AddGenerationPrompt: true, BOS: r.bos, EOS: r.eos, Vars: vars, Tools: tools})
	if err != nil {
		return "", fmt.Errorf("generate: %w", err)
	}
	return s, nil
}

// ToolFormat is the tool-call convention of the template (chat.NoTools if it shows none).
func (r *ChatRenderer) ToolFormat() chat.ToolFormat { return r.tmpl.ToolFormat() }

// Model is the model the Generator runs.
func (g *Generator) Model() Model { return g.model }

// Ops is the executor the Generator runs the model on.
func (g *Generator) Ops() Ops { return g.ops }

// SetTemplate replaces the chat template Chat uses.
func (g *Generator) SetTemplate(t *chat.Template) {
	g.chat = &ChatRenderer{tmpl: t, bos: g.chat.bos, eos: g.chat.eos}
}

// Tokenizer is the tokenizer the Generator encodes and decodes with.
func (g *Generator) Tokenizer() Tokenizer { return g.tok }

// Stats returns the statistics of the last generation.
func (g *Generator) Stats() Stats { return g.stats }

// Reset empties the KV cache, so the next prompt is prefilled from the start.
func (g *Generator) Reset() error {
	g.cache = g.cache[:0]
	return g.model.Truncate(0)
}

// Chat renders msgs with the chat template (ending with the opening of the assistant's
// turn) and streams the reply as Stream does.
func (g *Generator) Chat(ctx context.Context, msgs []chat.Message, o Options) iter.Seq2[string, error] {
	prompt, err := g.chat.Render(msgs, o.ChatVars)
	if err != nil {
		return func(yield func(string, error) bool) { yield("", err) }
	}
	return g.Stream(ctx, prompt, o)
}

// Generate runs Stream to the end and returns the text.
func (g *Generator) Generate(ctx context.Context, prompt string, o Options) (string, error) {
	var b strings.Builder
	for piece, err := range g.Stream(ctx, prompt, o) {
		if err != nil {
			return b.String(), err
		}
		b.WriteString(piece)
	}
	return b.String(), nil
}

// Stream generates a continuation of prompt and yields it in pieces of valid UTF-8 as the
// tokens come. It ends at an end-of-generation token, a stop string, MaxTokens, a full
// context, when the caller stops iterating, or with one error (bad options, a prompt
// longer than the context, cancellation, a model failure). Errors in the prompt or options
// come before any model work.
func (g *Generator) Stream(ctx context.Context, prompt string, o Options) iter.Seq2[string, error] {
	return func(yield func(string, error) bool) {
		if !g.busy.CompareAndSwap(false, true) {
			yield("", errors.New("generate: a stream is already running on this Generator"))
			return
		}
		defer g.busy.Store(false)
		g.stats = Stats{}
		if err := g.run(ctx, prompt, o, yield); err != nil {
			yield("", err)
		}
	}
}

// run is one generation; an error it returns is yielded by Stream.
func (g *Generator) run(ctx context.Context, prompt string, o Options, yield func(string, error) bool) error {
	vocab, maxCtx := g.model.Vocab(), g.model.MaxCtx()
	seq, err := NewSequence(g.tok, vocab, o, func(s string) bool { return yield(s, nil) })
	if err != nil {
		return err
	}
	ids, err := EncodePrompt(g.tok, prompt, o, vocab, maxCtx)
	if err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		g.stats.Stop = StopCancelled
		return err
	}
	g.stats.PromptTokens = len(ids)

	start := time.Now()
	logits, err := g.prefill(ctx, ids)
	g.stats.PrefillTime = time.Since(start)
	if err != nil {
		return err
	}
	seq.Prompt(ids)

	start = time.Now()
	defer func() {
		g.stats.GenerateTime = time.Since(start)
		g.stats.GeneratedTokens = seq.Generated()
	}()
	for n := 0; ; n++ {
		if err := ctx.Err(); err != nil {
			g.stats.Stop = StopCancelled
			return err
		}
		id, stop, err := seq.Next(logits)
		if err != nil {
			return err
		}
		if stop != StopNone {
			g.stats.Stop = stop
			return nil
		}
		if g.model.Pos() >= maxCtx {
			g.stats.Stop = StopContext
			seq.Flush()
			return nil
		}
		if logits, err = g.model.Decode(g.ops, id); err != nil {
			g.cache = g.cache[:0]
			return fmt.Errorf("generate: decoding token %d: %w", n, err)
		}
		g.cache = append(g.cache, id)
		if logits, err = lastRow(logits, vocab); err != nil {
			return err
		}
	}
}

// ErrPromptTooLong is wrapped by EncodePrompt's error for a prompt that leaves no room in
// the context for a generated token.
var ErrPromptTooLong = errors.New("the prompt does not fit the context")

// ErrEmptyPrompt is wrapped by EncodePrompt's error for a prompt of no tokens.
var ErrEmptyPrompt = errors.New("the prompt is empty (no tokens)")

// EncodePrompt tokenizes prompt as o says (BOS/EOS added unless NoBOS, special-token text
// parsed unless NoSpecial) and checks the ids with CheckPrompt.
func EncodePrompt(tok Tokenizer, prompt string, o Options, vocab, maxCtx int) ([]int32, error) {
	ids, err := tok.Encode(prompt, !o.NoBOS, !o.NoSpecial)
	if err != nil {
		return nil, fmt.Errorf("generate: tokenizing the prompt: %w", err)
	}
	return ids, CheckPrompt(ids, vocab, maxCtx)
}

// CheckPrompt refuses a prompt of no tokens (ErrEmptyPrompt), one that leaves no position of
// a maxCtx context for a generated token (ErrPromptTooLong), or one holding an id outside
// the vocabulary.
func CheckPrompt(ids []int32, vocab, maxCtx int) error {
	if len(ids) == 0 {
		return fmt.Errorf("generate: %w", ErrEmptyPrompt)
	}
	if len(ids) >= maxCtx {
		return fmt.Errorf("generate: %w: it is %d tokens, the context holds %d (and one more is needed to generate)", ErrPromptTooLong, len(ids), maxCtx)
	}
	for i, id := range ids {
		if id < 0 || int(id) >= vocab {
			return fmt.Errorf("generate: prompt token %d at index %d is outside the model's vocabulary (%d)", id, i, vocab)
		}
	}
	return nil
}

// Sequence is one generation's state from the logits after its prompt on: the sampler, the
// streaming text with its stop strings, and the count against MaxTokens. It owns no model:
// Generator drives one with a model of one sequence, and a batching server drives many,
// one Next each per forward pass over all of them. A Sequence is not safe for concurrent use.
type Sequence struct {
	tok Tokenizer
	smp *sample.Sampler
	con *grammar.Constraint // Options.Grammar over the vocabulary, nil without
	eog int32               // the token ending a constrained generation nothing can continue (-1: none)
	out textOut
	max int // Options.MaxTokens
	n   int // tokens sampled
}

// NewSequence checks o (MaxTokens, stop strings, the sampler's options for rows of vocab
// logits) and returns a Sequence whose text goes to emit, in pieces of valid UTF-8, as it
// becomes final; emit returning false ends the generation (StopConsumer).
func NewSequence(tok Tokenizer, vocab int, o Options, emit func(string) bool) (*Sequence, error) {
	if o.MaxTokens < 0 {
		return nil, fmt.Errorf("generate: MaxTokens must be >= 0 (0 = no limit), got %d", o.MaxTokens)
	}
	for _, s := range o.Stop {
		if s == "" {
			return nil, errors.New("generate: an empty stop string would stop before the first token")
		}
	}
	smp, err := sample.New(vocab, o.Sampling)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	seq := &Sequence{tok: tok, smp: smp, max: o.MaxTokens, out: textOut{dec: tok.NewDecoder(), stops: o.Stop, out: emit}}
	if o.Grammar != nil {
		if err := seq.constrain(o.Grammar, vocab); err != nil {
			return nil, err
		}
	}
	return seq, nil
}

// Prompt records the prompt's tokens for the penalties, which see the prompt as in
// llama.cpp's server.
func (s *Sequence) Prompt(ids []int32) {
	for _, id := range ids {
		s.smp.Accept(id)
	}
}

// Next samples the token that follows logits (one row), records it and emits the text it
// completes. It returns the token and StopNone when the generation goes on (the caller runs
// the token through the model and calls Next with the logits that gives), or why it ended:
// StopEOG, StopString, StopMaxTokens or StopConsumer, with all text emitted.
func (s *Sequence) Next(logits []float32) (int32, StopReason, error) {
	id, ended, err := s.sample(logits)
	if err != nil {
		return 0, StopNone, fmt.Errorf("generate: sampling token %d: %w", s.n, err)
	}
	if ended { // the grammar allows no token: end as with an end-of-generation token
		s.n++
		s.out.flush()
		return id, StopEOG, nil
	}
	s.smp.Accept(id)
	s.n++
	if s.tok.IsEOG(id) {
		s.out.flush()
		return id, StopEOG, nil
	}
	switch s.out.write(id) {
	case stopString:
		return id, StopString, nil
	case stopConsumer:
		return id, StopConsumer, nil
	}
	if s.max > 0 && s.n >= s.max {
		s.out.flush()
		return id, StopMaxTokens, nil
	}
	return id, StopNone, nil
}

// Flush emits the text held back (an incomplete character, a possible start of a stop
// string) when the caller ends the generation itself (a full context).
func (s *Sequence) Flush() { s.out.flush() }

// Generated is the number of tokens sampled (an end-of-generation token included).
func (s *Sequence) Generated() int { return s.n }

// prefill brings the KV cache to ids and returns the logits of the last one: it keeps the
// longest common prefix of the cache and ids (at most len(ids)-1 tokens, since the last
// token must run to give logits) and prefills the rest in chunks, checking ctx between them.
func (g *Generator) prefill(ctx context.Context, ids []int32) ([]float32, error) {
	if g.model.Pos() != len(g.cache) { // someone else used the model: trust nothing
		g.cache = g.cache[:0]
	}
	keep := 0
	for keep < len(g.cache) && keep < len(ids)-1 && g.cache[keep] == ids[keep] {
		keep++
	}
	if err := g.model.Truncate(keep); err != nil {
		if !errors.Is(err, errors.ErrUnsupported) {
			g.cache = g.cache[:0]
			return nil, fmt.Errorf("generate: truncating the KV cache to %d tokens: %w", keep, err)
		}
		keep = 0
		if err := g.model.Truncate(0); err != nil {
			g.cache = g.cache[:0]
			return nil, fmt.Errorf("generate: emptying the KV cache: %w", err)
		}
	}
	g.cache = g.cache[:keep]
	g.stats.ReusedTokens = keep
	var logits []float32
	for rest := ids[keep:]; len(rest) > 0; {
		if err := ctx.Err(); err != nil {
			g.stats.Stop = StopCancelled
			return nil, err
		}
		n := min(len(rest), prefillChunk)
		var err error
		if logits, err = g.model.Prefill(g.ops, rest[:n]); err != nil {
			g.cache = g.cache[:0]
			g.model.Truncate(0)
			return nil, fmt.Errorf("generate: prefill: %w", err)
		}
		g.cache = append(g.cache, rest[:n]...)
		rest = rest[n:]
	}
	return lastRow(logits, g.model.Vocab())
}

// lastRow returns the last vocab-long row of logits.
func lastRow(logits []float32, vocab int) ([]float32, error) {
	if len(logits) < vocab || len(logits)%vocab != 0 {
		return nil, fmt.Errorf("generate: the model returned %d logits, not rows of %d", len(logits), vocab)
	}
	return logits[len(logits)-vocab:], nil
}

// outcome of feeding text to a textOut.
type outcome int

const (
	goOn outcome = iota
	stopString
	stopConsumer
)

// textOut turns tokens into yielded text: the decoder makes it valid UTF-8, and text that
// is, or may become, a stop string is held back.
type textOut struct {
	dec   Decoder
	stops []string
	out   func(string) bool
	held  string // decoded, not yet yielded: a suffix that is a prefix of a stop string
}

// write decodes id and yields what can no longer be part of a stop string.
func (t *textOut) write(id int32) outcome {
	b := t.dec.Write(id)
	if len(b) == 0 {
		return goOn
	}
	return t.emit(t.held+strings.ToValidUTF8(string(b), string(utf8.RuneError)), false)
}

// flush yields everything held (the stream ended without a stop string).
func (t *textOut) flush() {
	rest := t.dec.Flush()
	t.emit(t.held+strings.ToValidUTF8(string(rest), string(utf8.RuneError)), true)
}

// emit yields s up to the first stop string, and all of it at the end, else all but its
// longest suffix that begins some stop string.
func (t *textOut) emit(s string, final bool) outcome {
	cut, found := len(s), false
	for _, stop := range t.stops {
		if i := strings.Index(s, stop); i >= 0 && i < cut {
			cut, found = i, true
		}
	}
	keep := 0
	if !found && !final {
		for _, stop := range t.stops {
			// The longest k < len(stop) with stop[:k] a suffix of s.
			for k := min(len(stop)-1, len(s)); k > keep; k-- {
				if strings.HasSuffix(s, stop[:k]) {
					keep = k
					break
				}
			}
		}
		cut = len(s) - keep
	}
	t.held = s[cut:]
	if found {
		t.held = ""
	}
	if cut > 0 && !t.out(s[:cut]) {
		return stopConsumer
	}
	if found {
		return stopString
	}
	return goOn
}
