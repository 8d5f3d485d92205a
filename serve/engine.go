package serve

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/grammar"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// Model is what the engine needs of a decoder with a multi-slot KV cache:
// *orchestrator.Model, loaded with Slots > 1.
type Model interface {
	// ForwardBatch runs one step of several sequences (see orchestrator.Model.ForwardBatch)
	// and returns one row of logits per Seq with Logits, in order. On an error no slot's
	// valid positions change.
	ForwardBatch(ops kernelrt.Ops, tokens []int32, seqs []orchestrator.Seq) ([]float32, error)
	// MaxCtx is the number of positions each slot holds.
	MaxCtx() int
	// Vocab is the length of a row of logits.
	Vocab() int
	// Slots is the number of sequences the cache holds.
	Slots() int
	// MaxBatch is the most tokens one ForwardBatch takes.
	MaxBatch() int
}

// EngineOptions configure an Engine. The zero value works.
type EngineOptions struct {
	// Name is the model's name in responses and /v1/models; "" = "kernelrt".
	Name string
	// PrefillChunk caps the prompt tokens one step takes, all waiting prompts together, so a
	// long prompt delays the running streams by at most one chunk per token they generate;
	// 0 = DefaultPrefillChunk. A step never takes more than the model's MaxBatch tokens.
	PrefillChunk int
	// QueueSize is how many requests may wait for a free slot; one more gets ErrQueueFull.
	// 0 = DefaultQueueSize; negative = no waiting at all (a request needs a free slot).
	QueueSize int
	// NoPrefixReuse prefills every prompt in full, never reusing a slot's cached prefix.
	NoPrefixReuse bool
	// PrefixCacheBytes is the RAM budget of the prefix cache (0 = none): a free slot's
	// cached tokens that a new request is about to overwrite are first copied there, off
	// the Go heap, and a later prompt sharing a longer prefix with a copy than with any
	// free slot starts from the copy instead of prefilling it. The least recently used
	// copies go when the budget is full. It needs a Model with PrefixSaver.
	PrefixCacheBytes int
}

// Defaults of EngineOptions.
const (
	DefaultPrefillChunk = 64
	DefaultQueueSize    = 64
)

// Errors Submit returns (test with errors.Is).
var (
	// ErrQueueFull: every slot is busy and QueueSize requests already wait. Retry later.
	ErrQueueFull = errors.New("serve: the request queue is full")
	// ErrDraining: Shutdown has begun; no new requests are taken.
	ErrDraining = errors.New("serve: the engine is shutting down")
	// ErrClosed: the engine is closed.
	ErrClosed = errors.New("serve: the engine is closed")
	// ErrMaxTokens: the prompt plus MaxTokens does not fit the context of a slot.
	ErrMaxTokens = errors.New("the prompt plus max_tokens exceeds the context")
	// ErrTools: the request's Tools or ToolChoice cannot be used with it or this model.
	ErrTools = errors.New("serve: tools")
)

// Request is one generation. Exactly one of Prompt, Messages and Tokens gives the prompt.
type Request struct {
	// Prompt is text, tokenized as Options says (NoBOS, NoSpecial).
	Prompt string
	// Messages is a conversation, rendered with the model's chat template (ending with the
	// opening of the assistant's turn), then tokenized as a Prompt.
	Messages []chat.Message
	// Tokens is a prompt of token ids, used as they are.
	Tokens []int32
	// Options are the generation's limits, stop strings and sampler (package generate).
	Options generate.Options
	// IgnoreEOS bans the end-of-generation tokens, so the generation runs to MaxTokens or
	// the context (llama.cpp's ignore_eos; for benchmarks of equal lengths).
	IgnoreEOS bool
	// Logprobs reports each generated token's log-probability (Stream.NextLogprobs), every
	// sampled token but an end-of-generation one, whose text is not in the output.
	Logprobs bool
	// TopLogprobs (0..MaxTopLogprobs, with Logprobs) adds that many of the most likely
	// tokens at each position.
	TopLogprobs int
	// Tools are functions the model may call, shown to it by its chat template (Messages
	// only); the reply's calls come back in the template's convention (Engine.ToolFormat,
	// chat.ParseToolCalls).
	Tools []chat.Tool
	// ToolChoice is OpenAI's: "" or "auto" (the model decides), "none" (Tools are not
	// shown), "required" (decoding is constrained to calls of Tools, with arguments valid
	// for their parameters; to require one function, pass only it).
	ToolChoice string
	// SingleToolCall limits a required reply to one call (parallel_tool_calls: false).
	SingleToolCall bool
}

// Result is how a generation ended.
type Result struct {
	// Stop says why: StopEOG or StopString (OpenAI's "stop"), StopMaxTokens or StopContext
	// ("length"), StopCancelled (the request's context), StopNone with Err.
	Stop generate.StopReason
	// PromptTokens is the prompt's length; ReusedTokens of them were already in the slot's
	// cache or the prefix cache (a common prefix with an earlier request) and not computed
	// again.
	PromptTokens, ReusedTokens int
	// GeneratedTokens counts the tokens sampled, an end-of-generation token included.
	GeneratedTokens int
	// Err is why the generation failed (a model error, the context's error), or nil.
	Err error
}

// FinishReason is OpenAI's finish_reason: "stop", "length", or "" for a failed or cancelled
// generation.
func (r Result) FinishReason() string {
	switch r.Stop {
	case generate.StopEOG, generate.StopString, generate.StopConsumer:
		return "stop"
	case generate.StopMaxTokens, generate.StopContext:
		return "length"
	}
	return ""
}

// Stats are an Engine's counters. Submitted = Completed + Cancelled + Failed + Waiting +
// Running at any moment the engine is between steps.
type Stats struct {
	Submitted, Rejected              uint64 // accepted by Submit; refused (queue full, draining)
	Completed, Cancelled, Failed     uint64 // ended normally, by their context, by an error
	Waiting, Running, Slots          int    // queued, in a slot, slots in all
	PromptTokens, ReusedTokens       uint64 // prompt tokens of started requests; of them, found cached
	PrefilledTokens, GeneratedTokens uint64 // prompt tokens computed; tokens sampled
	Steps                            uint64 // forward passes
	EmbeddedTokens                   uint64 // tokens run for embeddings (Embed)
	PrefixCacheHits, RestoredTokens  uint64 // prompts started from the prefix cache; positions restored
	PrefixCacheEntries               int    // copies the prefix cache holds
	PrefixCacheBytes                 int64  // their memory
}

// Engine runs many generations on one model: a goroutine owns the model and runs steps,
// each one forward pass over one token of every decoding sequence and chunks of waiting
// prompts (continuous batching: requests join and leave between steps). Each sequence has a
// slot of the model's KV cache; a slot remembers the tokens it holds, and a new request
// takes the free slot sharing the longest prefix with its prompt and prefills only the
// rest. Its methods are safe for concurrent use.
type Engine struct {
	model    Model
	ops      kernelrt.Ops
	tok      generate.Tokenizer
	chat     *generate.ChatRenderer
	opts     EngineOptions
	vocab    int
	maxCtx   int
	maxBatch int
	eog      []int32 // the end-of-generation tokens, banned by IgnoreEOS
	metrics  *engineMetrics
	pieces   pieceTable     // token texts, for logprob responses
	owned    []func() error // what Close releases (OpenEngine's runtime and model)

	mu       sync.Mutex
	queue    []*request
	inflight int  // queued + running
	draining bool // Shutdown called: Submit refuses
	closed   bool // Close called: the loop fails everything and exits
	drained  chan struct{}
	wake     chan struct{} // cap 1: a request arrived or Close was called
	done     chan struct{} // closed when the loop has exited

	// Owned by the loop goroutine.
	slots    []slot
	active   []*request   // in slots, in admission order
	clock    uint64       // steps run, for least-recently-used slot choice
	pc       *prefixCache // nil without EngineOptions.PrefixCacheBytes
	reuse    reusable     // the model, when its cache cannot continue from every prefix
	toks     []int32
	seqs     []orchestrator.Seq
	parts    []*request
	lp       logprobScratch
	maskTodo []*request // prepareMasks' list

	submitted, rejected, completed, cancelled, failed   atomic.Uint64
	promptToks, reusedToks, prefilled, generated, steps atomic.Uint64
	running                                             atomic.Int64
	kvUsed                                              atomic.Int64  // positions the running requests hold in their slots
	embedded                                            atomic.Uint64 // tokens run for embeddings
	pcHits, pcRestored                                  atomic.Uint64 // prefix cache: restores, positions restored
	pcEntries, pcBytes                                  atomic.Int64  // prefix cache: entries, bytes
}

// slot is one sequence's region of the KV cache.
type slot struct {
	cache []int32  // the tokens whose keys and values it holds, positions 0..len-1
	req   *request // the request using it, or nil
	used  uint64   // clock when it was last released
}

// request is a submitted generation.
type request struct {
	ctx     context.Context
	ids     []int32
	seq     *generate.Sequence
	stream  *Stream
	slot    int
	pos     int     // tokens in the slot's cache
	prefill []int32 // prompt tokens not yet run
	next    int32   // the token to decode next (when decoding)
	decode  bool    // the prompt is done; next is valid
	reused  int
	emb     *embedJob // an embedding request (Embed), not a generation
	lp      bool      // Request.Logprobs
	top     int       // Request.TopLogprobs
	start   time.Time // Submit
	last    time.Time // the previous token's sampling
	done    bool
}

// NewEngine starts an engine running model on ops (kernelrt.Serial{} or a
// *kernelrt.Runtime) with tok's vocabulary and chat template. The engine does not own them:
// Close the engine before them.
func NewEngine(model Model, ops kernelrt.Ops, tok generate.Tokenizer, o EngineOptions) (*Engine, error) {
	if model == nil || ops == nil || tok == nil {
		return nil, errors.New("serve: NewEngine needs a model, an executor and a tokenizer")
	}
	if o.PrefillChunk < 0 {
		return nil, fmt.Errorf("serve: EngineOptions.PrefillChunk must be >= 0, got %d", o.PrefillChunk)
	}
	if o.PrefillChunk == 0 {
		o.PrefillChunk = DefaultPrefillChunk
	}
	if o.QueueSize == 0 {
		o.QueueSize = DefaultQueueSize
	}
	if o.PrefixCacheBytes < 0 {
		return nil, fmt.Errorf("serve: EngineOptions.PrefixCacheBytes must be >= 0, got %d", o.PrefixCacheBytes)
	}
	var pc *prefixCache
	if o.PrefixCacheBytes > 0 && !o.NoPrefixReuse {
		ps, ok := model.(PrefixSaver)
		if !ok {
			return nil, fmt.Errorf("serve: EngineOptions.PrefixCacheBytes: the model (%T) cannot copy its KV cache (PrefixSaver)", model)
		}
		pc = &prefixCache{m: ps, budget: o.PrefixCacheBytes}
	}
	if o.Name == "" {
		o.Name = "kernelrt"
	}
	slots, maxBatch := model.Slots(), model.MaxBatch()
	if slots < 1 || maxBatch < slots {
		return nil, fmt.Errorf("serve: the model has %d slots and takes %d tokens a step: a step must fit one token of every slot", slots, maxBatch)
	}
	cr, err := generate.NewChatRenderer(tok)
	if err != nil {
		return nil, err
	}
	e := &Engine{model: model, ops: ops, tok: tok, chat: cr, opts: o, vocab: model.Vocab(), maxCtx: model.MaxCtx(),
		maxBatch: maxBatch, slots: make([]slot, slots), wake: make(chan struct{}, 1), done: make(chan struct{}),
		drained: make(chan struct{}), pc: pc}
	e.reuse, _ = model.(reusable)
	for id := range int32(e.vocab) {
		if tok.IsEOG(id) {
			e.eog = append(e.eog, id)
		}
	}
	e.metrics = newEngineMetrics(e)
	go e.loop()
	return e, nil
}

// OpenOptions configure OpenEngine.
type OpenOptions struct {
	// Model loads the file and starts the Runtime (Load.Slots is the number of concurrent
	// sequences, at least 1; Load.MaxBatch is raised to hold one token of each).
	Model generate.OpenOptions
	// Engine configures the scheduler; Name "" = the file's base name.
	Engine EngineOptions
}

// OpenEngine loads a GGUF model with its tokenizer, starts a Runtime for it and an Engine
// over both; Close releases all three.
func OpenEngine(path string, o OpenOptions) (*Engine, error) {
	lo := &o.Model.Load
	lo.Slots = max(lo.Slots, 1)
	if lo.MaxBatch == 0 {
		lo.MaxBatch = 128
	}
	lo.MaxBatch = max(lo.MaxBatch, lo.Slots)
	m, rt, tok, err := generate.Load(path, o.Model)
	if err != nil {
		return nil, err
	}
	if o.Engine.Name == "" {
		o.Engine.Name = strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
	}
	e, err := NewEngine(m, rt, tok, o.Engine)
	if err != nil {
		rt.Close()
		m.Close()
		return nil, err
	}
	e.owned = []func() error{rt.Close, m.Close}
	return e, nil
}

// Name is the model's name (EngineOptions.Name).
func (e *Engine) Name() string { return e.opts.Name }

// MaxCtx is the context of one sequence: prompt plus generated tokens.
func (e *Engine) MaxCtx() int { return e.maxCtx }

// Ops is the executor the engine runs the model on.
func (e *Engine) Ops() kernelrt.Ops { return e.ops }

// Tokenizer is the tokenizer prompts are encoded with.
func (e *Engine) Tokenizer() generate.Tokenizer { return e.tok }

// ToolFormat is the tool-call convention of the model's chat template (chat.NoTools when
// it shows tools in no way kernelrt can parse back).
func (e *Engine) ToolFormat() chat.ToolFormat { return e.chat.ToolFormat() }

// toolOptions renders nothing: it checks r's tools and returns the tools to show and, for
// a required choice, o with the call grammar as its constraint.
func (e *Engine) toolOptions(r Request, o generate.Options) ([]chat.Tool, generate.Options, error) {
	switch r.ToolChoice {
	case "", "auto", "none", "required":
	default:
		return nil, o, fmt.Errorf("%w: ToolChoice %q is not \"auto\", \"none\" or \"required\"", ErrTools, r.ToolChoice)
	}
	if len(r.Tools) == 0 || r.ToolChoice == "none" {
		if r.ToolChoice == "required" {
			return nil, o, fmt.Errorf("%w: ToolChoice \"required\" needs Tools", ErrTools)
		}
		return nil, o, nil
	}
	if r.Messages == nil {
		return nil, o, fmt.Errorf("%w: Tools need Messages (a chat template shows them)", ErrTools)
	}
	f := e.ToolFormat()
	if f == chat.NoTools {
		return nil, o, fmt.Errorf("%w: the model's chat template shows tools in no convention kernelrt can parse (Hermes <tool_call> or Llama 3.x JSON)", ErrTools)
	}
	if r.ToolChoice == "required" {
		if o.Grammar != nil {
			return nil, o, fmt.Errorf("%w: a required tool call and a grammar (response_format) cannot both constrain one reply", ErrTools)
		}
		src, err := toolCallGBNF(f, r.Tools, !r.SingleToolCall)
		if err != nil {
			return nil, o, fmt.Errorf("%w: %v", ErrTools, err)
		}
		if o.Grammar, err = grammar.Parse(src); err != nil {
			return nil, o, fmt.Errorf("%w: the call grammar: %v", ErrTools, err)
		}
	}
	return r.Tools, o, nil
}

// Submit checks and tokenizes r (on the caller's goroutine) and queues it. The generation
// runs until it ends or ctx is done (then it is cancelled at the next step and its slot
// freed); its text arrives on the returned Stream. Errors: a bad request (prompt errors
// wrap generate.ErrEmptyPrompt / ErrPromptTooLong, ErrMaxTokens, option errors),
// ErrQueueFull, ErrDraining, ErrClosed.
func (e *Engine) Submit(ctx context.Context, r Request) (*Stream, error) {
	o := r.Options
	if r.IgnoreEOS && len(e.eog) > 0 {
		bias := make(map[int32]float32, len(o.Sampling.LogitBias)+len(e.eog))
		maps.Copy(bias, o.Sampling.LogitBias)
		for _, id := range e.eog {
			bias[id] = float32(math.Inf(-1))
		}
		o.Sampling.LogitBias = bias
	}
	tools, o, err := e.toolOptions(r, o)
	if err != nil {
		return nil, err
	}
	st := newStream()
	st.lp = r.Logprobs
	seq, err := generate.NewSequence(e.tok, e.vocab, o, st.push)
	if err != nil {
		return nil, err
	}
	var ids []int32
	switch {
	case (r.Prompt != "") && (r.Messages != nil || r.Tokens != nil), r.Messages != nil && r.Tokens != nil:
		return nil, errors.New("serve: a request has one prompt: Prompt, Messages or Tokens")
	case r.Messages != nil:
		text, err := e.chat.RenderTools(r.Messages, tools, o.ChatVars)
		if err != nil {
			return nil, err
		}
		ids, err = generate.EncodePrompt(e.tok, text, o, e.vocab, e.maxCtx)
		if err != nil {
			return nil, err
		}
	case r.Tokens != nil:
		ids = r.Tokens
		if err := generate.CheckPrompt(ids, e.vocab, e.maxCtx); err != nil {
			return nil, err
		}
	default:
		if ids, err = generate.EncodePrompt(e.tok, r.Prompt, o, e.vocab, e.maxCtx); err != nil {
			return nil, err
		}
	}
	if o.MaxTokens > 0 && len(ids)+o.MaxTokens > e.maxCtx {
		return nil, fmt.Errorf("serve: %w: %d prompt tokens + %d > %d", ErrMaxTokens, len(ids), o.MaxTokens, e.maxCtx)
	}
	if r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs || r.TopLogprobs > 0 && !r.Logprobs {
		return nil, fmt.Errorf("serve: TopLogprobs must be 0 to %d, with Logprobs; got %d (Logprobs %v)", MaxTopLogprobs, r.TopLogprobs, r.Logprobs)
	}
	if r.Logprobs {
		e.pieces.build(e.tok, e.vocab)
	}
	seq.Prompt(ids)
	req := &request{ctx: ctx, ids: ids, seq: seq, stream: st, start: time.Now(), lp: r.Logprobs, top: r.TopLogprobs}
	if err := e.enqueue(req); err != nil {
		return nil, err
	}
	return st, nil
}

// enqueue queues req for a slot, or refuses it: closed, draining, or a full queue.
func (e *Engine) enqueue(req *request) error {
	var err error
	e.mu.Lock()
	switch {
	case e.closed:
		err = ErrClosed
	case e.draining:
		err = ErrDraining
	case len(e.queue) >= max(e.opts.QueueSize, 0)+e.freeSlotsLocked():
		err = ErrQueueFull
	}
	if err != nil {
		e.mu.Unlock()
		e.rejected.Add(1)
		return err
	}
	e.queue = append(e.queue, req)
	e.inflight++
	e.submitted.Add(1)
	e.mu.Unlock()
	select {
	case e.wake <- struct{}{}:
	default:
	}
	return nil
}

// freeSlotsLocked is the number of slots the loop has not handed out, counting queued
// requests it has not yet seen as taking one each (e.mu held).
func (e *Engine) freeSlotsLocked() int {
	return max(len(e.slots)-(e.inflight-len(e.queue)), 0)
}

// Stats returns the engine's counters.
func (e *Engine) Stats() Stats {
	e.mu.Lock()
	waiting := len(e.queue)
	e.mu.Unlock()
	return Stats{
		Submitted: e.submitted.Load(), Rejected: e.rejected.Load(),
		Completed: e.completed.Load(), Cancelled: e.cancelled.Load(), Failed: e.failed.Load(),
		Waiting: waiting, Running: int(e.running.Load()), Slots: len(e.slots),
		PromptTokens: e.promptToks.Load(), ReusedTokens: e.reusedToks.Load(),
		PrefilledTokens: e.prefilled.Load(), GeneratedTokens: e.generated.Load(), Steps: e.steps.Load(),
		EmbeddedTokens: e.embedded.Load(), PrefixCacheHits: e.pcHits.Load(), RestoredTokens: e.pcRestored.Load(),
		PrefixCacheEntries: int(e.pcEntries.Load()), PrefixCacheBytes: e.pcBytes.Load(),
	}
}

// Shutdown stops taking requests (Submit returns ErrDraining) and waits until every queued
// and running generation has ended, or ctx is done (then it returns ctx's error and the
// generations go on; Close ends them).
func (e *Engine) Shutdown(ctx context.Context) error {
	e.mu.Lock()
	if !e.draining {
		e.draining = true
		if e.inflight == 0 {
			close(e.drained)
		}
	}
	e.mu.Unlock()
	select {
	case <-e.drained:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends every queued and running generation with ErrClosed, stops the engine's
// goroutine, and releases what OpenEngine opened. It is idempotent.
func (e *Engine) Close() error {
	e.mu.Lock()
	first := !e.closed
	e.closed = true
	e.mu.Unlock()
	if !first {
		<-e.done
		return nil
	}
	select {
	case e.wake <- struct{}{}:
	default:
	}
	<-e.done
	var errs []error
	for _, c := range e.owned {
		errs = append(errs, c())
	}
	return errors.Join(errs...)
}

// loop is the engine's goroutine: admit, step, repeat.
func (e *Engine) loop() {
	defer close(e.done)
	if e.pc != nil {
		defer e.pc.close()
	}
	// The Runtime's caller is its worker 0: keep it on one thread, pinned when it can be.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if p, ok := e.ops.(interface{ PinCaller() (func(), error) }); ok {
		if unpin, err := p.PinCaller(); err == nil {
			defer unpin()
		}
	}
	for e.admit() {
		e.step()
	}
}

// admit drops cancelled requests, moves queued ones into free slots, and waits while there
// is nothing to run. It returns false when the engine is closed (everything failed).
func (e *Engine) admit() bool {
	for _, r := range e.active {
		if err := r.ctx.Err(); err != nil {
			e.finish(r, generate.StopCancelled, err)
		}
	}
	e.compact()
	e.mu.Lock()
	for {
		if e.closed {
			queued := e.queue
			e.queue = nil
			e.mu.Unlock()
			for _, r := range queued {
				e.finish(r, generate.StopNone, ErrClosed)
			}
			for _, r := range e.active {
				e.finish(r, generate.StopNone, ErrClosed)
			}
			e.active = nil
			return false
		}
		kept := e.queue[:0]
		var cancelled []*request
		for _, r := range e.queue {
			if r.ctx.Err() != nil {
				cancelled = append(cancelled, r)
			} else {
				kept = append(kept, r)
			}
		}
		clear(e.queue[len(kept):])
		e.queue = kept
		n := 0
		for n < len(e.queue) && len(e.active) < len(e.slots) {
			e.place(e.queue[n])
			n++
		}
		rest := copy(e.queue, e.queue[n:])
		clear(e.queue[rest:])
		e.queue = e.queue[:rest]
		if len(cancelled) > 0 {
			e.mu.Unlock()
			for _, r := range cancelled {
				e.finish(r, generate.StopCancelled, r.ctx.Err())
			}
			e.mu.Lock()
		}
		e.updateUsage()
		if len(e.active) > 0 {
			e.mu.Unlock()
			return true
		}
		e.mu.Unlock()
		<-e.wake
		e.mu.Lock()
	}
}

// reusable is a Model whose cache cannot continue from every cached prefix
// (orchestrator.Model.Reusable: sliding-window layers keep only a window and a batch).
type reusable interface {
	Reusable(slot, n int) int
}

// place puts r into the free slot that shares the longest prefix with its prompt (at most
// all but the last token, which must run to give logits), the least recently used among
// equals, and keeps that prefix of the slot's cache.
func (e *Engine) place(r *request) {
	best, keep := -1, -1
	for i := range e.slots {
		s := &e.slots[i]
		if s.req != nil {
			continue
		}
		k := 0
		if !e.opts.NoPrefixReuse {
			for k < len(s.cache) && k < len(r.ids)-1 && s.cache[k] == r.ids[k] {
				k++
			}
			if e.reuse != nil && k > 0 {
				k = e.reuse.Reusable(i, k)
			}
		}
		if k > keep || k == keep && s.used < e.slots[best].used {
			best, keep = i, k
		}
	}
	s := &e.slots[best]
	if pc := e.pc; pc != nil {
		if len(s.cache) > keep {
			// The slot's tokens past keep are about to be overwritten: copy them first,
			// keeping the copy this prompt wants out of the evictions.
			if p, _ := pc.match(r.ids, len(r.ids)-1); p != nil {
				pc.touch(p)
			}
			pc.save(best, s.cache)
		}
		p, m := pc.match(r.ids, len(r.ids)-1)
		if m > keep && (m-keep)*restoreGain >= m && pc.restore(p, best, m) == nil {
			s.cache = append(s.cache[:0], r.ids[:m]...)
			keep = m
			e.pcHits.Add(1)
			e.pcRestored.Add(uint64(m))
			e.metrics.pcHits.Inc()
			e.metrics.pcRestored.Add(float64(m))
		}
		e.pcEntries.Store(int64(len(pc.entries)))
		e.pcBytes.Store(int64(pc.used))
	}
	s.req, s.cache = r, s.cache[:keep]
	r.slot, r.pos, r.reused, r.prefill = best, keep, keep, r.ids[keep:]
	e.active = append(e.active, r)
	e.running.Add(1)
	e.promptToks.Add(uint64(len(r.ids)))
	e.reusedToks.Add(uint64(keep))
	e.metrics.prompt.Add(float64(len(r.ids)))
	e.metrics.reused.Add(float64(keep))
}

// step runs one forward pass: the next token of every decoding sequence, then prompt chunks
// of the others in admission order within the step's budget, and samples every sequence
// whose logits it computed.
func (e *Engine) step() {
	e.toks, e.seqs, e.parts = e.toks[:0], e.seqs[:0], e.parts[:0]
	for _, r := range e.active {
		if r.decode && r.emb == nil {
			e.toks = append(e.toks, r.next)
			e.seqs = append(e.seqs, orchestrator.Seq{Slot: r.slot, Pos: r.pos, N: 1, Logits: true})
			e.parts = append(e.parts, r)
		}
	}
	budget := min(e.maxBatch-len(e.toks), e.opts.PrefillChunk)
	for _, r := range e.active {
		if r.decode || r.emb != nil || budget == 0 {
			continue
		}
		n := min(len(r.prefill), budget)
		budget -= n
		e.toks = append(e.toks, r.prefill[:n]...)
		e.seqs = append(e.seqs, orchestrator.Seq{Slot: r.slot, Pos: r.pos, N: n, Logits: n == len(r.prefill)})
		e.parts = append(e.parts, r)
	}
	e.embedStep()
	if len(e.seqs) == 0 {
		e.compact()
		e.updateUsage()
		return
	}
	e.clock++
	e.steps.Add(1)
	e.metrics.batchSeqs.Observe(float64(len(e.seqs)))
	e.metrics.batchToks.Observe(float64(len(e.toks)))
	logits, err := e.model.ForwardBatch(e.ops, e.toks, e.seqs)
	if err == nil {
		e.advance(e.parts, e.seqs, e.toks, logits)
	} else if len(e.seqs) == 1 || errors.Is(err, orchestrator.ErrClosed) {
		for _, r := range e.parts {
			e.finish(r, generate.StopNone, err)
		}
	} else {
		// One sequence's failure (a non-finite value from its tokens) must not fail the
		// others: the failed step changed no slot, so run each sequence alone.
		off := 0
		for i, r := range e.parts {
			s, toks := e.seqs[i], e.toks[off:off+e.seqs[i].N]
			off += s.N
			one := []orchestrator.Seq{s}
			if l, err := e.model.ForwardBatch(e.ops, toks, one); err != nil {
				e.finish(r, generate.StopNone, err)
			} else {
				e.advance([]*request{r}, one, toks, l)
			}
		}
	}
	e.compact()
	e.updateUsage()
}

// updateUsage publishes the KV-cache positions the running requests hold (the loop's
// goroutine, after each change of them): a free slot's cached prefix counts as free, as
// vLLM counts evictable blocks.
func (e *Engine) updateUsage() {
	n := 0
	for _, r := range e.active {
		n += r.pos
	}
	e.kvUsed.Store(int64(n))
}

// KVCacheUsage is the fraction (0-1) of the KV cache's positions, all slots together, that
// running requests hold.
func (e *Engine) KVCacheUsage() float64 {
	return float64(e.kvUsed.Load()) / float64(len(e.slots)*e.maxCtx)
}

// advance records a successful step: positions, cached tokens, and a sampled token for
// every sequence with logits (one row each, in order).
func (e *Engine) advance(parts []*request, seqs []orchestrator.Seq, toks []int32, logits []float32) {
	e.prepareMasks(parts, seqs)
	off, row := 0, 0
	for i, r := range parts {
		s := seqs[i]
		sl := &e.slots[r.slot]
		sl.cache = append(sl.cache, toks[off:off+s.N]...)
		off += s.N
		r.pos += s.N
		if !r.decode {
			r.prefill = r.prefill[s.N:]
			e.prefilled.Add(uint64(s.N))
		}
		if !s.Logits {
			continue
		}
		e.sample(r, logits[row*e.vocab:(row+1)*e.vocab])
		row++
	}
}

// prepareMasks computes the grammar masks of the constrained sequences about to sample, in
// parallel when there are several: a cold mask walks the vocabulary's trie (milliseconds
// on a 150k vocabulary), and the thread pool is idle between forward passes.
func (e *Engine) prepareMasks(parts []*request, seqs []orchestrator.Seq) {
	todo := e.maskTodo[:0]
	for i, r := range parts {
		if seqs[i].Logits && r.seq.Constrained() {
			todo = append(todo, r)
		}
	}
	e.maskTodo = todo
	if len(todo) < 2 {
		return // Next computes a single mask itself
	}
	var next atomic.Int32
	work := func() {
		for i := int(next.Add(1)) - 1; i < len(todo); i = int(next.Add(1)) - 1 {
			todo[i].seq.PrepareMask() // an error comes back from Next
		}
	}
	var wg sync.WaitGroup
	for range min(len(todo), runtime.GOMAXPROCS(0)) - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	clear(todo)
}

// sample picks r's next token from its logits and ends r when that token ends it.
func (e *Engine) sample(r *request, logits []float32) {
	id, stop, err := r.seq.Next(logits)
	if r.lp && err == nil && stop != generate.StopEOG {
		if e.lp.row == nil {
			e.lp.row = make([]float32, e.vocab)
		}
		top := e.lp.top[:r.top]
		lp := logprobOf(e.ops, logits, e.lp.row, id, top)
		r.stream.pushLogprob(id, lp, top)
	}
	r.stream.tick()
	now := time.Now()
	if r.last.IsZero() {
		e.metrics.ttft.Observe(now.Sub(r.start).Seconds())
	} else {
		e.metrics.itl.Observe(now.Sub(r.last).Seconds())
	}
	r.last = now
	e.generated.Add(1)
	e.metrics.generated.Inc()
	switch {
	case err != nil:
		e.finish(r, generate.StopNone, err)
	case stop != generate.StopNone:
		e.finish(r, stop, nil)
	case r.pos >= e.maxCtx: // no position left to run id in
		r.seq.Flush()
		e.finish(r, generate.StopContext, nil)
	default:
		r.next, r.decode = id, true
	}
}

// finish ends r: its slot (keeping the cached tokens) is free again and its stream ends.
func (e *Engine) finish(r *request, stop generate.StopReason, err error) {
	if r.done {
		return
	}
	r.done = true
	if sl := &e.slots[r.slot]; sl.req == r {
		sl.req, sl.used = nil, e.clock
		e.running.Add(-1)
	}
	switch {
	case stop == generate.StopCancelled:
		e.cancelled.Add(1)
	case err != nil:
		e.failed.Add(1)
	default:
		e.completed.Add(1)
	}
	res := Result{Stop: stop, PromptTokens: len(r.ids), ReusedTokens: r.reused, Err: err}
	if r.seq != nil { // an embedding request has none
		res.GeneratedTokens = r.seq.Generated()
	}
	r.stream.finish(res)
	e.mu.Lock()
	e.inflight--
	if e.draining && e.inflight == 0 {
		close(e.drained)
	}
	e.mu.Unlock()
}

// compact drops ended requests from active.
func (e *Engine) compact() {
	kept := e.active[:0]
	for _, r := range e.active {
		if !r.done {
			kept = append(kept, r)
		}
	}
	clear(e.active[len(kept):])
	e.active = kept
}
