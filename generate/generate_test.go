package generate

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/sample"
)

// collect runs a stream and returns its pieces and its error.
func collect(t *testing.T, g *Generator, ctx context.Context, prompt string, o Options) ([]string, error) {
	t.Helper()
	var pieces []string
	for p, err := range g.Stream(ctx, prompt, o) {
		if err != nil {
			return pieces, err
		}
		if p == "" {
			t.Error("an empty piece was yielded")
		}
		if !utf8.ValidString(p) {
			t.Errorf("piece %q is not valid UTF-8", p)
		}
		pieces = append(pieces, p)
	}
	return pieces, nil
}

func newGen(t *testing.T, m Model) *Generator {
	t.Helper()
	g, err := New(m, kernelrt.Serial{}, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// TestStreamUTF8 streams a reply whose multi-byte characters arrive one byte (token) at a
// time: each comes out whole, and the end-of-generation token is not text.
func TestStreamUTF8(t *testing.T) {
	const reply = "Grüße, 世界 🙂!"
	m := newFake(reply)
	g := newGen(t, m)
	pieces, err := collect(t, g, context.Background(), "Hi", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(pieces, ""); got != reply {
		t.Fatalf("text %q, want %q", got, reply)
	}
	if !slices.Contains(pieces, "🙂") || !slices.Contains(pieces, "ü") {
		t.Errorf("multi-byte characters not streamed whole: %q", pieces)
	}
	st := g.Stats()
	if st.Stop != StopEOG || st.PromptTokens != 3 || st.GeneratedTokens != len(reply)+1 {
		t.Errorf("stats %+v", st)
	}
	if m.prefilled != 3 || m.decoded != len(reply) {
		t.Errorf("prefilled %d decoded %d", m.prefilled, m.decoded)
	}
}

func TestMaxTokens(t *testing.T) {
	m := newFake("abcdefghij")
	g := newGen(t, m)
	got, err := g.Generate(context.Background(), "x", Options{MaxTokens: 4})
	if err != nil || got != "abcd" || g.Stats().Stop != StopMaxTokens {
		t.Fatalf("%q, %v, %v", got, err, g.Stats().Stop)
	}
	if m.decoded != 3 { // the last token is not decoded: nothing would use its logits
		t.Errorf("decoded %d tokens for 4 generated", m.decoded)
	}
	// MaxTokens cut inside a character: the incomplete bytes end as U+FFFD.
	g = newGen(t, newFake("a🙂"))
	if got, _ := g.Generate(context.Background(), "x", Options{MaxTokens: 3}); got != "a\uFFFD" {
		t.Errorf("cut character: %q", got)
	}
}

func TestStopStrings(t *testing.T) {
	for _, tc := range []struct {
		reply string
		stops []string
		want  string
		stop  StopReason
	}{
		{"abc STOP def", []string{"STOP"}, "abc ", StopString},
		{"xST yz", []string{"STOP"}, "xST yz", StopEOG},         // a held prefix is released
		{"abST", []string{"STOP"}, "abST", StopEOG},             // and flushed at the end
		{"one\n\ntwo", []string{"\n\n", "one"}, "", StopString}, // the earliest match wins
		{"a, b; c", []string{";", ", b"}, "a", StopString},
		{"héé!", []string{"é!"}, "hé", StopString},
		{"no stop", []string{"xyz", "stopp"}, "no stop", StopEOG},
	} {
		g := newGen(t, newFake(tc.reply))
		var all []string
		for p, err := range g.Stream(context.Background(), "p", Options{Stop: tc.stops}) {
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tc.stops {
				if strings.Contains(p, s) {
					t.Errorf("%q: piece %q contains stop %q", tc.reply, p, s)
				}
			}
			all = append(all, p)
		}
		if got := strings.Join(all, ""); got != tc.want || g.Stats().Stop != tc.stop {
			t.Errorf("reply %q stops %q: %q (%v), want %q (%v)", tc.reply, tc.stops, got, g.Stats().Stop, tc.want, tc.stop)
		}
	}
	// A stop string split across tokens is never emitted in part: with "STOP" held, the
	// pieces before it never end with "S", "ST" or "STO".
	g := newGen(t, newFake("aSTObSTOP"))
	pieces, _ := collect(t, g, context.Background(), "p", Options{Stop: []string{"STOP"}})
	if strings.Join(pieces, "") != "aSTOb" {
		t.Fatalf("pieces %q", pieces)
	}
	for _, p := range pieces[:len(pieces)-1] {
		if strings.HasSuffix(p, "S") || strings.HasSuffix(p, "ST") || strings.HasSuffix(p, "STO") {
			t.Errorf("piece %q ends with a stop prefix while more text was to come", p)
		}
	}
}

// TestChatReusesPrefix runs a three-turn chat and counts prefilled tokens: each turn
// prefills only what follows the tokens the cache already holds.
func TestChatReusesPrefix(t *testing.T) {
	m := newFake("Hello!")
	g := newGen(t, m)
	ctx := context.Background()
	var msgs []chat.Message
	total := 0
	for turn, user := range []string{"hi", "how are you?", "bye"} {
		msgs = append(msgs, chat.Message{Role: "user", Content: user})
		before := m.prefilled
		var b strings.Builder
		for p, err := range g.Chat(ctx, msgs, Options{}) {
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(p)
		}
		if b.String() != "Hello!" {
			t.Fatalf("turn %d reply %q", turn, b.String())
		}
		prompt, _ := g.chat.Render(msgs, nil)
		ids, _ := byteTok{}.Encode(prompt, true, true)
		st := g.Stats()
		wantReused := 0
		if turn > 0 {
			// Everything up to the previous reply (whose <|im_end|> was sampled, not
			// decoded) is reused.
			wantReused = total
		}
		if st.ReusedTokens != wantReused || m.prefilled-before != len(ids)-wantReused {
			t.Errorf("turn %d: reused %d prefilled %d of %d; want reused %d", turn, st.ReusedTokens, m.prefilled-before, len(ids), wantReused)
		}
		total = len(ids) + len("Hello!") // prompt + reply tokens now in the cache
		msgs = append(msgs, chat.Message{Role: "assistant", Content: b.String()})
	}
	if m.Pos() != total {
		t.Errorf("cache %d tokens, want %d", m.Pos(), total)
	}
}

func TestPrefixCases(t *testing.T) {
	ctx := context.Background()
	m := newFake("ok")
	g := newGen(t, m)
	run := func(prompt string) {
		t.Helper()
		if _, err := g.Generate(ctx, prompt, Options{}); err != nil {
			t.Fatal(err)
		}
	}
	run("abcdef")
	n := m.prefilled
	run("abcdef") // the same prompt: only its last token runs again, for its logits
	if got := m.prefilled - n; got != 1 || g.Stats().ReusedTokens != 6 {
		t.Errorf("same prompt: prefilled %d, reused %d", got, g.Stats().ReusedTokens)
	}
	n = m.prefilled
	run("abcXYZ") // diverges after <s>abc: truncated there
	if got := m.prefilled - n; got != 3 || g.Stats().ReusedTokens != 4 {
		t.Errorf("divergent prompt: prefilled %d, reused %d", got, g.Stats().ReusedTokens)
	}
	if string(bytesOf(m.toks[1:7])) != "abcXYZ" {
		t.Errorf("cache holds %q", bytesOf(m.toks))
	}
	// A model that cannot cut its cache: divergence means a full prefill, extension not.
	m.noTruncate = true
	n = m.prefilled
	run("abcXYZok more")
	if got := m.prefilled - n; got != len(" more") {
		t.Errorf("extension without Truncate: prefilled %d", got)
	}
	n = m.prefilled
	run("zzz")
	if got := m.prefilled - n; got != 4 || g.Stats().ReusedTokens != 0 {
		t.Errorf("divergence without Truncate: prefilled %d, reused %d", got, g.Stats().ReusedTokens)
	}
	// Someone else moved the model: the Generator trusts nothing it remembered.
	m.noTruncate = false
	m.toks = append(m.toks, 'q')
	n = m.prefilled
	run("zzz")
	if got := m.prefilled - n; got != 4 {
		t.Errorf("after outside use: prefilled %d", got)
	}
	if err := g.Reset(); err != nil || m.Pos() != 0 {
		t.Errorf("Reset: %v, pos %d", err, m.Pos())
	}
}

func bytesOf(ids []int32) []byte {
	var b []byte
	for _, id := range ids {
		b = append(b, byte(id))
	}
	return b
}

func TestCancel(t *testing.T) {
	m := newFake(strings.Repeat("x", 100))
	g := newGen(t, m)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var got []string
	var err error
	for p, e := range g.Stream(ctx, "p", Options{}) {
		if e != nil {
			err = e
			break
		}
		got = append(got, p)
		if len(got) == 3 {
			cancel()
		}
	}
	if !errors.Is(err, context.Canceled) || len(got) != 3 || g.Stats().Stop != StopCancelled {
		t.Fatalf("after cancel: %d pieces, err %v, stop %v", len(got), err, g.Stats().Stop)
	}
	if m.decoded != 3 {
		t.Errorf("decoded %d tokens, want 3: cancellation is checked before each token", m.decoded)
	}
	// Cancelled before the start: no model work.
	m2 := newFake("x")
	g2 := newGen(t, m2)
	if _, err := g2.Generate(ctx, "prompt", Options{}); !errors.Is(err, context.Canceled) || m2.prefilled != 0 {
		t.Errorf("cancelled context: %v, prefilled %d", err, m2.prefilled)
	}
}

func TestConsumerStops(t *testing.T) {
	m := newFake("abcdef")
	g := newGen(t, m)
	for p, err := range g.Stream(context.Background(), "p", Options{}) {
		if err != nil || p != "a" {
			t.Fatal(p, err)
		}
		break
	}
	if g.Stats().Stop != StopConsumer {
		t.Errorf("stop %v", g.Stats().Stop)
	}
	if got, err := g.Generate(context.Background(), "p", Options{}); err != nil || got != "abcdef" {
		t.Errorf("next stream after a break: %q, %v", got, err)
	}
}

// TestBadInput checks that bad prompts and options fail before any model work.
func TestBadInput(t *testing.T) {
	for _, tc := range []struct {
		name, prompt string
		o            Options
		want         string
	}{
		{"too long", strings.Repeat("a", 300), Options{}, "context holds 256"},
		{"fills the context", strings.Repeat("a", 255), Options{}, "context holds 256"},
		{"empty", "", Options{NoBOS: true}, "empty"},
		{"bad utf8", "a\xff", Options{}, "invalid UTF-8"},
		{"max tokens", "a", Options{MaxTokens: -1}, "MaxTokens"},
		{"empty stop", "a", Options{Stop: []string{""}}, "stop string"},
		{"sampling", "a", Options{Sampling: sampleOpts(-1)}, "TopK"},
	} {
		m := newFake("x")
		g := newGen(t, m)
		_, err := g.Generate(context.Background(), tc.prompt, tc.o)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want one containing %q", tc.name, err, tc.want)
		}
		if m.prefilled != 0 || m.decoded != 0 {
			t.Errorf("%s: the model ran", tc.name)
		}
	}
}

func TestModelFailures(t *testing.T) {
	m := newFake("abcdef")
	m.failDecode = 2
	g := newGen(t, m)
	got, err := g.Generate(context.Background(), "p", Options{})
	if err == nil || !strings.Contains(err.Error(), "decode failed") || got != "ab" {
		t.Fatalf("%q, %v", got, err)
	}
	// The context fills: generation stops there, without an error.
	m = newFake(strings.Repeat("y", 50))
	m.maxCtx = 10
	g = newGen(t, m)
	got, err = g.Generate(context.Background(), "abc", Options{})
	if err != nil || g.Stats().Stop != StopContext || len(got) != 7 || m.Pos() != 10 {
		t.Fatalf("full context: %q, %v, %v, pos %d", got, err, g.Stats().Stop, m.Pos())
	}
}

func TestOneStreamAtATime(t *testing.T) {
	g := newGen(t, newFake("abc"))
	for _, err := range g.Stream(context.Background(), "p", Options{}) {
		if err != nil {
			t.Fatal(err)
		}
		_, err := g.Generate(context.Background(), "q", Options{})
		if err == nil || !strings.Contains(err.Error(), "already running") {
			t.Fatalf("nested stream: %v", err)
		}
	}
}

func TestChatTemplateChoice(t *testing.T) {
	// No template in the tokenizer: ChatML, as llama.cpp.
	g, err := New(newFake("x"), kernelrt.Serial{}, byteTok{noTemplate: true})
	if err != nil || g.chat.tmpl.Format() != chat.ChatML {
		t.Fatalf("%v %v", g, err)
	}
	if _, err := New(nil, kernelrt.Serial{}, byteTok{}); err == nil {
		t.Error("New without a model succeeded")
	}
	// A template error surfaces from Chat.
	tmpl, _ := chat.Parse("{{ raise_exception('no') }}")
	g.SetTemplate(tmpl)
	for _, err := range g.Chat(context.Background(), []chat.Message{{Role: "user", Content: "x"}}, Options{}) {
		if err == nil || !strings.Contains(err.Error(), "no") {
			t.Fatalf("template error: %v", err)
		}
	}
}

func sampleOpts(topK int) sample.Options { return sample.Options{TopK: topK} }
