package serve

import (
	"context"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// logprobOf against a float64 log-softmax: values, the top entries in order (ties to the
// lower id), every value <= 0.
func TestLogprobOf(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	row := make([]float32, 1000)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 4)
	}
	row[7], row[500] = 30, 30 // a tie at the top: 7 first
	var sum float64
	mx := 30.0
	for _, x := range row {
		sum += math.Exp(float64(x) - mx)
	}
	lse := mx + math.Log(sum)
	for _, ops := range []kernelrt.Ops{nil, kernelrt.Serial{}} { // the scalar sum, the Softmax op
		scratch := make([]float32, len(row))
		top := make([]TopLogprob, MaxTopLogprobs)
		for _, id := range []int32{0, 7, 500, 999} {
			lp := logprobOf(ops, row, scratch, id, top)
			if want := float64(row[id]) - lse; math.Abs(float64(lp)-want) > 1e-5 || lp > 0 {
				t.Errorf("ops %v: logprob of %d: %v, want %v", ops, id, lp, want)
			}
		}
		if top[0].Token != 7 || top[1].Token != 500 || top[0].Logprob != top[1].Logprob {
			t.Errorf("tie order: %+v", top[:2])
		}
		for i := 1; i < len(top); i++ {
			if top[i].Logprob > top[i-1].Logprob || top[i].Logprob > 0 {
				t.Errorf("top not sorted at %d: %+v", i, top[i-1:i+1])
			}
			if want := float64(row[top[i].Token]) - lse; math.Abs(float64(top[i].Logprob)-want) > 1e-5 {
				t.Errorf("top %d: %v, want %v", i, top[i].Logprob, want)
			}
		}
		// Every token not in top is at most the last entry.
		in := map[int32]bool{}
		for _, e := range top {
			in[e.Token] = true
		}
		for i, x := range row {
			if !in[int32(i)] && x > row[top[len(top)-1].Token] {
				t.Fatalf("token %d (%v) beats the last top entry %+v", i, x, top[len(top)-1])
			}
		}
		if lp := logprobOf(ops, row, scratch, 3, nil); lp > 0 { // no alternatives asked
			t.Errorf("logprob %v", lp)
		}
	}
}

// checkTopLogprobs checks one token's entry under greedy decoding: a value <= 0, the
// sampled token is the first alternative with the same value, alternatives sorted, their
// probabilities summing to at most 1.
func checkTopLogprobs(t *testing.T, i int, token string, lp float64, tops []openai.ChatCompletionTokenLogprobTopLogprob, n int) {
	t.Helper()
	if lp > 0 || len(tops) != n {
		t.Fatalf("entry %d: logprob %v, %d alternatives (want %d)", i, lp, len(tops), n)
	}
	if tops[0].Token != token || tops[0].Logprob != lp {
		t.Errorf("entry %d: sampled %q %v, first alternative %q %v", i, token, lp, tops[0].Token, tops[0].Logprob)
	}
	var p float64
	for j, tp := range tops {
		if j > 0 && tp.Logprob > tops[j-1].Logprob || tp.Logprob > 0 {
			t.Errorf("entry %d: alternatives unsorted at %d: %+v", i, j, tops)
		}
		p += math.Exp(tp.Logprob)
	}
	if p > 1+1e-5 {
		t.Errorf("entry %d: alternatives' probabilities sum to %v", i, p)
	}
}

// logprobs and top_logprobs through the official OpenAI Go client, chat and completions,
// streamed and not, under greedy decoding: the checks above on every entry, the first
// token's value equal to a float64 log-softmax of a one-sequence model's prompt logits,
// bytes equal to the token's text, and the streamed entries equal to the whole answer's.
func TestLogprobsOpenAIClient(t *testing.T) {
	ts, _, e := newTestServer(t, 2, EngineOptions{}, Options{})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const n, ntop = 10, 5

	t.Run("chat", func(t *testing.T) {
		params := openai.ChatCompletionNewParams{Model: "m", MaxTokens: openai.Int(n), Temperature: openai.Float(0),
			Logprobs: openai.Bool(true), TopLogprobs: openai.Int(ntop),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Name a colour.")}}
		c, err := client.Chat.Completions.New(ctx, params, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		content := c.Choices[0].Logprobs.Content
		if len(content) != n || int64(len(content)) != c.Usage.CompletionTokens {
			t.Fatalf("%d entries for %d tokens", len(content), c.Usage.CompletionTokens)
		}
		var text []byte
		for i, lp := range content {
			checkTopLogprobs(t, i, lp.Token, lp.Logprob, lp.TopLogprobs, ntop)
			b := make([]byte, len(lp.Bytes))
			for j, x := range lp.Bytes {
				b[j] = byte(x)
			}
			if utf8.Valid(b) && string(b) != lp.Token {
				t.Errorf("entry %d: bytes %v, token %q", i, b, lp.Token)
			}
			text = append(text, b...)
		}
		if string(text) != c.Choices[0].Message.Content {
			t.Errorf("entries spell %q, the reply is %q", text, c.Choices[0].Message.Content)
		}
		s := client.Chat.Completions.NewStreaming(ctx, params, option.WithJSONSet("ignore_eos", true))
		var streamed []openai.ChatCompletionTokenLogprob
		for s.Next() {
			for _, ch := range s.Current().Choices {
				streamed = append(streamed, ch.Logprobs.Content...)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(streamed) != len(content) {
			t.Fatalf("streamed %d entries, whole %d", len(streamed), len(content))
		}
		for i := range streamed {
			a, b := streamed[i], content[i]
			same := a.Token == b.Token && a.Logprob == b.Logprob && len(a.TopLogprobs) == len(b.TopLogprobs)
			for j := 0; same && j < len(a.TopLogprobs); j++ {
				same = a.TopLogprobs[j].Token == b.TopLogprobs[j].Token && a.TopLogprobs[j].Logprob == b.TopLogprobs[j].Logprob
			}
			if !same {
				t.Errorf("entry %d: streamed %+v, whole %+v", i, a, b)
			}
		}
		// Without logprobs: no logprobs object.
		params.Logprobs, params.TopLogprobs = openai.Bool(false), openai.Int(0)
		c, err = client.Chat.Completions.New(ctx, params)
		if err != nil || c.Choices[0].Logprobs.JSON.Content.Valid() {
			t.Errorf("logprobs false: %v %s", err, c.Choices[0].Logprobs.RawJSON())
		}
	})

	t.Run("completions", func(t *testing.T) {
		m, tok := loadTiny(t, 1)
		ids, err := tok.Encode("The quick brown fox", true, true)
		if err != nil {
			t.Fatal(err)
		}
		logits, err := m.Prefill(kernelrt.Serial{}, ids)
		if err != nil {
			t.Fatal(err)
		}
		mx := float64(logits[0])
		for _, x := range logits {
			mx = max(mx, float64(x))
		}
		var sum float64
		for _, x := range logits {
			sum += math.Exp(float64(x) - mx)
		}
		lse := mx + math.Log(sum)

		prompt := make([]int64, len(ids))
		for i, id := range ids {
			prompt[i] = int64(id)
		}
		params := openai.CompletionNewParams{Model: "m", Prompt: openai.CompletionNewParamsPromptUnion{OfArrayOfTokens: prompt},
			MaxTokens: openai.Int(n), Temperature: openai.Float(0), Logprobs: openai.Int(ntop)}
		c, err := client.Completions.New(ctx, params, option.WithJSONSet("ignore_eos", true))
		if err != nil {
			t.Fatal(err)
		}
		lp := c.Choices[0].Logprobs
		if len(lp.Tokens) != n || len(lp.TokenLogprobs) != n || len(lp.TopLogprobs) != n || len(lp.TextOffset) != n {
			t.Fatalf("logprobs %+v", lp)
		}
		first := e.pieces.pieces // the server's token texts, to find the first token's id
		id0 := -1
		for id, s := range first {
			if s == lp.Tokens[0] {
				id0 = id
				break
			}
		}
		if id0 < 0 || math.Abs(lp.TokenLogprobs[0]-(float64(logits[id0])-lse)) > 1e-3 {
			t.Errorf("first token %q (%d): logprob %v, the prompt's logits give %v", lp.Tokens[0], id0, lp.TokenLogprobs[0], float64(logits[max(id0, 0)])-lse)
		}
		offset := int64(0)
		for i := range lp.Tokens {
			if lp.TokenLogprobs[i] > 0 || lp.TextOffset[i] != offset || len(lp.TopLogprobs[i]) < ntop || len(lp.TopLogprobs[i]) > ntop+1 {
				t.Errorf("entry %d: %q %v offset %d (want %d), %d alternatives", i, lp.Tokens[i], lp.TokenLogprobs[i], lp.TextOffset[i], offset, len(lp.TopLogprobs[i]))
			}
			best := math.Inf(-1)
			for _, v := range lp.TopLogprobs[i] {
				best = max(best, v)
			}
			if v, ok := lp.TopLogprobs[i][lp.Tokens[i]]; !ok || v != lp.TokenLogprobs[i] || v != best {
				t.Errorf("entry %d: %q %v not the best of %v", i, lp.Tokens[i], lp.TokenLogprobs[i], lp.TopLogprobs[i])
			}
			offset += int64(utf8.RuneCountInString(lp.Tokens[i]))
		}
		if strings.Join(lp.Tokens, "") != c.Choices[0].Text {
			t.Errorf("tokens %q, text %q", lp.Tokens, c.Choices[0].Text)
		}
		s := client.Completions.NewStreaming(ctx, params, option.WithJSONSet("ignore_eos", true))
		var toks []string
		var lps []float64
		var offs []int64
		for s.Next() {
			for _, ch := range s.Current().Choices {
				toks = append(toks, ch.Logprobs.Tokens...)
				lps = append(lps, ch.Logprobs.TokenLogprobs...)
				offs = append(offs, ch.Logprobs.TextOffset...)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if strings.Join(toks, "\x00") != strings.Join(lp.Tokens, "\x00") || len(lps) != n || len(offs) != n {
			t.Fatalf("streamed %q, whole %q", toks, lp.Tokens)
		}
		for i := range lps {
			if lps[i] != lp.TokenLogprobs[i] || offs[i] != lp.TextOffset[i] {
				t.Errorf("entry %d: streamed %v @%d, whole %v @%d", i, lps[i], offs[i], lp.TokenLogprobs[i], lp.TextOffset[i])
			}
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, c := range []struct{ path, body, param string }{
			{"/v1/completions", `{"prompt": "hi", "logprobs": 21}`, "logprobs"},
			{"/v1/completions", `{"prompt": "hi", "logprobs": -1}`, "logprobs"},
			{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "logprobs": true, "top_logprobs": 21}`, "top_logprobs"},
			{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2}`, "top_logprobs"},
		} {
			resp, b := post(t, ts.URL+c.path, c.body)
			if resp.StatusCode != 400 || !strings.Contains(string(b), `"param":"`+c.param+`"`) {
				t.Errorf("%s: %d %s", c.body, resp.StatusCode, b)
			}
		}
	})
	checkIdle(t, e)
}

// BenchmarkLogprobOf is the per-token cost of logprobs on a Qwen2-sized vocabulary row with
// 20 alternatives, on the serial kernels (it allocates nothing).
func BenchmarkLogprobOf(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	row := make([]float32, 151936)
	for i := range row {
		row[i] = float32(r.NormFloat64() * 3)
	}
	top, scratch := make([]TopLogprob, MaxTopLogprobs), make([]float32, len(row))
	b.ReportAllocs()
	for b.Loop() {
		logprobOf(kernelrt.Serial{}, row, scratch, 17, top)
	}
}
