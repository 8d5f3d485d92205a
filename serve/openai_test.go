package serve

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// soloChat is generate.Generator's greedy reply to msgs on a one-slot model of the file.
func soloChat(t *testing.T, msgs []chat.Message, o generate.Options) (string, generate.Stats) {
	t.Helper()
	m, tok := loadTiny(t, 1)
	g, err := generate.New(m, kernelrt.Serial{}, tok)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for p, err := range g.Chat(context.Background(), msgs, o) {
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(p)
	}
	return b.String(), g.Stats()
}

// The official OpenAI Go client, streaming and not, completions and chat, against the
// server: the text is what generate.Generator produces for the same greedy request, and
// the usage counts are its prompt and generated tokens.
func TestOpenAIClient(t *testing.T) {
	ts, _, e := newTestServer(t, 4, EngineOptions{}, Options{})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	const n = 16

	t.Run("completions", func(t *testing.T) {
		const prompt = "The quick brown fox"
		want, ws := soloText(t, prompt, greedy(n))
		params := openai.CompletionNewParams{Model: "whatever", Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String(prompt)},
			MaxTokens: openai.Int(n), Temperature: openai.Float(0)}
		c, err := client.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Text != want || string(c.Choices[0].FinishReason) != finishOf(ws.Stop) {
			t.Errorf("got %+v, want %q (%v)", c.Choices, want, ws.Stop)
		}
		if c.Usage.PromptTokens != int64(ws.PromptTokens) || c.Usage.CompletionTokens != int64(ws.GeneratedTokens) ||
			c.Usage.TotalTokens != int64(ws.PromptTokens+ws.GeneratedTokens) || c.Model != e.Name() {
			t.Errorf("usage %+v model %q, want %d + %d", c.Usage, c.Model, ws.PromptTokens, ws.GeneratedTokens)
		}
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		var finish string
		var u openai.CompletionUsage
		for s.Next() {
			ch := s.Current()
			for _, c := range ch.Choices {
				text.WriteString(c.Text)
				if c.FinishReason != "" {
					finish = string(c.FinishReason)
				}
			}
			if ch.Usage.TotalTokens > 0 {
				u = ch.Usage
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if text.String() != want || finish != finishOf(ws.Stop) || u.CompletionTokens != int64(ws.GeneratedTokens) ||
			u.PromptTokens != int64(ws.PromptTokens) || u.PromptTokensDetails.CachedTokens != int64(ws.PromptTokens-1) {
			t.Errorf("streamed %q (%s, usage %+v), want %q", text.String(), finish, u, want)
		}
	})

	t.Run("chat", func(t *testing.T) {
		msgs := []chat.Message{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Name a colour."}}
		want, ws := soloChat(t, msgs, greedy(n))
		params := openai.ChatCompletionNewParams{Model: "whatever", MaxTokens: openai.Int(n), Temperature: openai.Float(0),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage(msgs[0].Content), openai.UserMessage(msgs[1].Content)}}
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].Message.Content != want || c.Choices[0].FinishReason != finishOf(ws.Stop) ||
			c.Usage.PromptTokens != int64(ws.PromptTokens) || c.Usage.CompletionTokens != int64(ws.GeneratedTokens) {
			t.Errorf("got %+v usage %+v, want %q %+v", c.Choices, c.Usage, want, ws)
		}
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Chat.Completions.NewStreaming(ctx, params)
		acc := openai.ChatCompletionAccumulator{}
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != want || acc.Choices[0].Message.Role != "assistant" ||
			acc.Usage.CompletionTokens != int64(ws.GeneratedTokens) || acc.Usage.PromptTokens != int64(ws.PromptTokens) {
			t.Errorf("streamed %+v usage %+v, want %q", acc.Choices, acc.Usage, want)
		}
	})

	// Several clients at once: batched together, each gets its own reply.
	t.Run("concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		for i, p := range testPrompts {
			want, _ := soloChat(t, []chat.Message{{Role: "user", Content: p}}, greedy(n))
			wg.Add(1)
			go func() {
				defer wg.Done()
				s := client.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "m", MaxTokens: openai.Int(n),
					Temperature: openai.Float(0), Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(p)}})
				var b strings.Builder
				for s.Next() {
					for _, c := range s.Current().Choices {
						b.WriteString(c.Delta.Content)
					}
				}
				if err := s.Err(); err != nil || b.String() != want {
					t.Errorf("stream %d: %q, %v; want %q", i, b.String(), err, want)
				}
			}()
		}
		wg.Wait()
	})

	// An error reaches the client as an API error with the status and the field.
	t.Run("error", func(t *testing.T) {
		_, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "m", N: openai.Int(3),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("x")}})
		var ae *openai.Error
		if !asAPIError(err, &ae) || ae.StatusCode != 400 || ae.Param != "n" {
			t.Errorf("%v", err)
		}
	})
	checkIdle(t, e)
}

func asAPIError(err error, target **openai.Error) bool {
	e, ok := err.(*openai.Error)
	if ok {
		*target = e
	}
	return ok
}

// finishOf is OpenAI's finish_reason for a generate stop reason.
func finishOf(r generate.StopReason) string { return Result{Stop: r}.FinishReason() }
