package serve

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/sample"
)

var testPrompts = []string{
	"The quick brown fox",
	"Once upon a time there was",
	"In the beginning",
	"To be or not to be, that is the question",
	"Hello",
	"A long time ago in a galaxy far, far away",
}

// checkIdle fails unless the engine has nothing queued or running and its counters add up.
func checkIdle(t testing.TB, e *Engine) Stats {
	t.Helper()
	st := e.Stats()
	if st.Running != 0 || st.Waiting != 0 {
		t.Errorf("engine not idle: %+v", st)
	}
	if st.Submitted != st.Completed+st.Cancelled+st.Failed {
		t.Errorf("counters do not add up: %+v", st)
	}
	if st.Failed+st.Cancelled == 0 && st.PromptTokens != st.ReusedTokens+st.PrefilledTokens {
		t.Errorf("prompt tokens %d != reused %d + prefilled %d", st.PromptTokens, st.ReusedTokens, st.PrefilledTokens)
	}
	return st
}

// More requests than slots, submitted at once, batched together and queued: each gets the
// text it gets alone from generate.Generator (each sequence sees only its own slot), and
// the usage counts agree; greedy, and sampled with a seed of its own (a varied text).
func TestEngineMatchesGenerate(t *testing.T) {
	for _, sampled := range []bool{false, true} {
		t.Run(fmt.Sprint("sampled=", sampled), func(t *testing.T) {
			m, tok := loadTiny(t, 4)
			e := newTestEngine(t, m, tok, EngineOptions{PrefillChunk: 8, NoPrefixReuse: true})
			opts := func(i int) generate.Options {
				o := greedy(20)
				if sampled {
					o.Sampling = sample.Options{Temperature: 1.5, Seed: uint64(i)}
				}
				return o
			}
			want := make([]string, len(testPrompts))
			wantStats := make([]generate.Stats, len(testPrompts))
			for i, p := range testPrompts {
				want[i], wantStats[i] = soloText(t, p, opts(i))
			}
			var wg sync.WaitGroup
			got := make([]string, len(testPrompts))
			res := make([]Result, len(testPrompts))
			for i, p := range testPrompts {
				st, err := e.Submit(context.Background(), Request{Prompt: p, Options: opts(i)})
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					var err error
					if got[i], res[i], err = st.Text(context.Background()); err != nil {
						t.Error(err)
					}
				}()
			}
			wg.Wait()
			for i := range testPrompts {
				if got[i] != want[i] {
					t.Errorf("prompt %d: engine %q, generate %q", i, got[i], want[i])
				}
				ws := wantStats[i]
				if res[i].PromptTokens != ws.PromptTokens || res[i].GeneratedTokens != ws.GeneratedTokens || res[i].Stop != ws.Stop {
					t.Errorf("prompt %d: result %+v, generate's stats %+v", i, res[i], ws)
				}
			}
			st := checkIdle(t, e)
			if st.Completed != uint64(len(testPrompts)) || st.Steps == 0 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// A request whose prompt extends an earlier one's takes that slot and prefills only the
// rest; the text is the same as without reuse.
func TestPrefixReuse(t *testing.T) {
	m, tok := loadTiny(t, 2)
	e := newTestEngine(t, m, tok, EngineOptions{})
	run := func(prompt string) (string, Result) {
		t.Helper()
		return complete(t, e, Request{Prompt: prompt, Options: greedy(6)})
	}
	const a = "The quick brown fox jumps over"
	_, r1 := run(a)
	if r1.ReusedTokens != 0 {
		t.Fatalf("first request reused %d tokens", r1.ReusedTokens)
	}
	text, r2 := run(a + " the lazy dog")
	if r2.ReusedTokens != r1.PromptTokens {
		t.Errorf("reused %d tokens, want the first prompt's %d", r2.ReusedTokens, r1.PromptTokens)
	}
	if want, _ := soloText(t, a+" the lazy dog", greedy(6)); text != want {
		t.Errorf("with reuse %q, alone %q", text, want)
	}
	// The same prompt again reuses all but its last token.
	if _, r3 := run(a + " the lazy dog"); r3.ReusedTokens != r3.PromptTokens-1 {
		t.Errorf("repeat reused %d of %d", r3.ReusedTokens, r3.PromptTokens)
	}
	if st := checkIdle(t, e); st.ReusedTokens != uint64(r2.ReusedTokens+r1.PromptTokens+r2.PromptTokens-2+1) && st.ReusedTokens == 0 {
		t.Errorf("stats %+v", st)
	}
}

// Chat messages are rendered with the file's template (ChatML) and stop at <|im_end|>.
func TestChat(t *testing.T) {
	m, tok := loadTiny(t, 2)
	e := newTestEngine(t, m, tok, EngineOptions{})
	msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi there"}}
	text, res := complete(t, e, Request{Messages: msgs, Options: greedy(12)})
	gm, gtok := loadTiny(t, 1)
	g, _ := generate.New(gm, kernelrt.Serial{}, gtok)
	var want string
	for p, err := range g.Chat(context.Background(), msgs, greedy(12)) {
		if err != nil {
			t.Fatal(err)
		}
		want += p
	}
	if text != want || res.PromptTokens != g.Stats().PromptTokens {
		t.Errorf("engine %q (%d prompt tokens), generate %q (%d)", text, res.PromptTokens, want, g.Stats().PromptTokens)
	}
}

// IgnoreEOS runs to MaxTokens; stop strings end early with "stop".
func TestIgnoreEOSAndStop(t *testing.T) {
	m, tok := loadTiny(t, 2)
	e := newTestEngine(t, m, tok, EngineOptions{})
	for _, p := range testPrompts {
		text, res := complete(t, e, Request{Prompt: p, Options: greedy(40), IgnoreEOS: true})
		if res.GeneratedTokens != 40 || res.FinishReason() != "length" {
			t.Errorf("%q: %+v", p, res)
		}
		if len(text) < 4 {
			continue
		}
		stop := text[2:4]
		want := text[:strings.Index(text, stop)]
		got, res := complete(t, e, Request{Prompt: p, Options: generate.Options{MaxTokens: 40, Stop: []string{stop}}, IgnoreEOS: true})
		if res.FinishReason() != "stop" || got != want {
			t.Errorf("stop %q: %q %+v, want %q", stop, got, res, want)
		}
	}
}

// A cancelled request ends with its context's error and frees its slot at the next step;
// a queued one is dropped without running.
func TestCancel(t *testing.T) {
	m, tok := loadTiny(t, 1)
	pm := &poisonModel{Model: m, poison: -1, gate: make(chan struct{})}
	e := newTestEngine(t, pm, tok, EngineOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	st, err := e.Submit(ctx, Request{Prompt: "Hello", Options: greedy(0), IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	queued, err := e.Submit(ctx, Request{Prompt: "World", Options: greedy(0)})
	if err != nil {
		t.Fatal(err)
	}
	pm.gate <- struct{}{}                                    // one step: the prompt and the first token
	if _, err := st.Next(context.Background()); err != nil { // generation under way
		t.Fatal(err)
	}
	cancel()
	close(pm.gate)
	for _, s := range []*Stream{st, queued} {
		for {
			_, err := s.Next(context.Background())
			if err == nil {
				continue
			}
			if !errors.Is(err, context.Canceled) {
				t.Errorf("stream ended with %v", err)
			}
			break
		}
	}
	if r := queued.Result(); r.GeneratedTokens != 0 || r.Stop != generate.StopCancelled {
		t.Errorf("queued result %+v", r)
	}
	// The slot is free again: a new request runs.
	st, err = e.Submit(context.Background(), Request{Prompt: "Again", Options: greedy(3)})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := st.Text(context.Background()); err != nil {
		t.Fatal(err)
	}
	if s := checkIdle(t, e); s.Cancelled != 2 || s.Completed != 1 {
		t.Errorf("stats %+v", s)
	}
}

// poisonModel fails any step that holds its poison token, as a model whose activations
// went non-finite for one sequence's input does.
type poisonModel struct {
	*orchestrator.Model
	poison int32
	mu     sync.Mutex
	gate   chan struct{} // when non-nil, every step waits for a value
}

func (p *poisonModel) ForwardBatch(ops kernelrt.Ops, toks []int32, seqs []orchestrator.Seq) ([]float32, error) {
	if p.gate != nil {
		<-p.gate
	}
	if slices.Contains(toks, p.poison) {
		return nil, &orchestrator.NonFiniteError{Step: "layer 0 attention block"}
	}
	return p.Model.ForwardBatch(ops, toks, seqs)
}

// A forward error fails only the requests whose tokens caused it; the others, batched with
// them, complete with the text they get alone, and the engine goes on.
func TestForwardErrorFailsOnlyAffected(t *testing.T) {
	m, tok := loadTiny(t, 4)
	poison, _ := tok.Encode("#", false, false)
	pm := &poisonModel{Model: m, poison: poison[0]}
	e := newTestEngine(t, pm, tok, EngineOptions{NoPrefixReuse: true})
	prompts := []string{"Good one", "Bad # one", "Another good one"}
	var streams []*Stream
	for _, p := range prompts {
		st, err := e.Submit(context.Background(), Request{Prompt: p, Options: greedy(8), IgnoreEOS: true})
		if err != nil {
			t.Fatal(err)
		}
		streams = append(streams, st)
	}
	for i, st := range streams {
		text, _, err := st.Text(context.Background())
		var nf *orchestrator.NonFiniteError
		if i == 1 {
			if !errors.As(err, &nf) {
				t.Errorf("poisoned request: %q, %v", text, err)
			}
			continue
		}
		if err != nil {
			t.Errorf("request %d failed: %v", i, err)
		}
	}
	st, _ := e.Submit(context.Background(), Request{Prompt: "After", Options: greedy(3)})
	if _, _, err := st.Text(context.Background()); err != nil {
		t.Fatalf("engine unusable after a failed step: %v", err)
	}
	if s := checkIdle(t, e); s.Failed != 1 || s.Completed != 3 {
		t.Errorf("stats %+v", s)
	}
}

// A full queue refuses with ErrQueueFull; Shutdown refuses new requests with ErrDraining,
// lets the running and queued ones finish, and returns once they have.
func TestQueueFullAndShutdown(t *testing.T) {
	m, tok := loadTiny(t, 1)
	pm := &poisonModel{Model: m, poison: -1, gate: make(chan struct{})}
	e := newTestEngine(t, pm, tok, EngineOptions{QueueSize: 1})
	a, err := e.Submit(context.Background(), Request{Prompt: "A", Options: greedy(2), IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := e.Submit(context.Background(), Request{Prompt: "B", Options: greedy(2), IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: "C", Options: greedy(2)}); !errors.Is(err, ErrQueueFull) {
		t.Fatalf("third request: %v, want ErrQueueFull", err)
	}
	done := make(chan error)
	go func() { done <- e.Shutdown(context.Background()) }()
	for e.Stats().Rejected == 1 { // wait until Shutdown has begun
		if _, err := e.Submit(context.Background(), Request{Prompt: "D", Options: greedy(2)}); errors.Is(err, ErrDraining) {
			break
		}
	}
	close(pm.gate) // let the steps run
	for _, s := range []*Stream{a, b} {
		if text, res, err := s.Text(context.Background()); err != nil || res.GeneratedTokens != 2 {
			t.Errorf("drained request: %q %+v %v", text, res, err)
		}
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if _, err := e.Submit(context.Background(), Request{Prompt: "E", Options: greedy(2)}); !errors.Is(err, ErrDraining) {
		t.Errorf("after Shutdown: %v", err)
	}
	e.Close()
	if _, err := e.Submit(context.Background(), Request{Prompt: "F", Options: greedy(2)}); !errors.Is(err, ErrClosed) {
		t.Errorf("after Close: %v", err)
	}
	checkIdle(t, e)
}

// Close fails what is queued and running with ErrClosed.
func TestCloseFailsRunning(t *testing.T) {
	m, tok := loadTiny(t, 1)
	pm := &poisonModel{Model: m, poison: -1, gate: make(chan struct{})}
	e := newTestEngine(t, pm, tok, EngineOptions{})
	st, err := e.Submit(context.Background(), Request{Prompt: "Hello", Options: greedy(0), IgnoreEOS: true})
	if err != nil {
		t.Fatal(err)
	}
	q, err := e.Submit(context.Background(), Request{Prompt: "Queued", Options: greedy(0)})
	if err != nil {
		t.Fatal(err)
	}
	pm.gate <- struct{}{} // one step: the prompt, and the first token
	st.Next(context.Background())
	closed := make(chan error)
	go func() { closed <- e.Close() }()
	for { // Close has begun once Submit says so; only then may the steps go on
		if _, err := e.Submit(context.Background(), Request{Prompt: "x"}); errors.Is(err, ErrClosed) {
			break
		}
	}
	close(pm.gate)
	<-closed
	for _, s := range []*Stream{st, q} {
		if _, _, err := s.Text(context.Background()); !errors.Is(err, ErrClosed) {
			t.Errorf("after Close: %v", err)
		}
	}
	checkIdle(t, e)
}

// Requests refused before they run: prompt and option errors wrap what the server maps to
// 400s.
func TestSubmitErrors(t *testing.T) {
	m, tok := loadTiny(t, 1)
	e := newTestEngine(t, m, tok, EngineOptions{})
	long := make([]int32, e.MaxCtx())
	for _, c := range []struct {
		r    Request
		want error
	}{
		{Request{Tokens: long}, generate.ErrPromptTooLong},
		{Request{Prompt: "hi", Options: generate.Options{MaxTokens: e.MaxCtx()}}, ErrMaxTokens},
		{Request{Tokens: []int32{}}, generate.ErrEmptyPrompt},
		{Request{Prompt: "hi", Options: generate.Options{Sampling: sample.Options{TopK: -1}}}, nil},
		{Request{Prompt: "hi", Tokens: []int32{1}}, nil},
		{Request{Tokens: []int32{1 << 20}}, nil},
	} {
		_, err := e.Submit(context.Background(), c.r)
		if err == nil || c.want != nil && !errors.Is(err, c.want) {
			t.Errorf("%+v: %v, want %v", c.r.Options, err, c.want)
		}
	}
	if s := e.Stats(); s.Submitted != 0 || s.Rejected != 0 {
		t.Errorf("stats %+v", s)
	}
}

// Stream.Next returns once per token when the reader keeps up (a token of no text is an
// empty piece) and joins the pieces of the tokens produced while the reader was away.
func TestStreamJoins(t *testing.T) {
	s := newStream()
	s.tick() // a token that completed no text
	if got, err := s.Next(context.Background()); got != "" || err != nil {
		t.Fatalf("%q %v", got, err)
	}
	for i := range 5 {
		s.push(fmt.Sprint(i))
		s.tick()
	}
	s.finish(Result{Stop: generate.StopMaxTokens})
	if got, err := s.Next(context.Background()); got != "01234" || err != nil {
		t.Fatalf("%q %v", got, err)
	}
	if _, err := s.Next(context.Background()); err != io.EOF {
		t.Fatalf("%v", err)
	}
}
