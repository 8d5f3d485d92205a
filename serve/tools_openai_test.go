package serve

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// qwenTok is the tiny model's tokenizer with Qwen2.5's chat template, which shows tools
// and reads calls in the Hermes convention.
type qwenTok struct {
	generate.Tokenizer
	src string
}

func (q qwenTok) ChatTemplate() (string, string, string) { return q.src, "", "<|im_end|>" }

func (q qwenTok) TokenBytes(id int32) []byte { return q.Tokenizer.(generate.TokenBytes).TokenBytes(id) }

func newToolServer(t *testing.T) (string, *Engine) {
	t.Helper()
	src, err := os.ReadFile("../chat/testdata/templates/qwen2.5.jinja")
	if err != nil {
		t.Fatal(err)
	}
	// The byte-level tokenizer makes the tools' prompt ~800 tokens: a longer cache than
	// the other tests' model has.
	cfg := tinyConfig()
	cfg.MaxCtx = 2048
	path := testModelFile(t, "tools.gguf", cfg)
	m, rt, tok, err := generate.Load(path, generate.OpenOptions{Load: orchestrator.LoadOptions{Slots: 2}})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	t.Cleanup(func() { m.Close() })
	e := newTestEngine(t, m, qwenTok{tok, string(src)}, EngineOptions{})
	if e.ToolFormat() != chat.Hermes {
		t.Fatalf("ToolFormat = %v", e.ToolFormat())
	}
	ts := httptest.NewServer(New(e, Options{}))
	t.Cleanup(ts.Close)
	return ts.URL, e
}

// checkWeatherArgs: the arguments are a JSON object with the schema's required members.
func checkWeatherArgs(t *testing.T, args string) {
	t.Helper()
	var a map[string]any
	if err := json.Unmarshal([]byte(args), &a); err != nil {
		t.Fatalf("arguments %q: %v", args, err)
	}
	if _, ok := a["city"].(string); !ok {
		t.Errorf("arguments %q: no string city", args)
	}
	if u, ok := a["unit"].(string); !ok || u != "c" && u != "f" {
		t.Errorf("arguments %q: unit not c or f", args)
	}
}

// The official OpenAI Go client gets tool calls from a random-weight model: with
// tool_choice "required" or a named function, decoding is constrained to valid calls, which
// come back as tool_calls (finish_reason "tool_calls"), streamed and not.
func TestToolCallsOpenAIClient(t *testing.T) {
	url, _ := newToolServer(t)
	client := openai.NewClient(option.WithBaseURL(url+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	ctx := context.Background()
	var tools []openai.ChatCompletionToolUnionParam
	var raw []chat.Tool
	if err := json.Unmarshal([]byte(weatherTools), &raw); err != nil {
		t.Fatal(err)
	}
	for _, tl := range raw {
		var p shared.FunctionParameters
		if err := json.Unmarshal(tl.Function.Parameters, &p); err != nil {
			t.Fatal(err)
		}
		tools = append(tools, openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{Name: tl.Function.Name, Parameters: p}))
	}
	for _, c := range []struct {
		name   string
		choice openai.ChatCompletionToolChoiceOptionUnionParam
		want   string // the function, "" for any
	}{
		{"required", openai.ChatCompletionToolChoiceOptionUnionParam{OfAuto: openai.String("required")}, ""},
		{"named", openai.ToolChoiceOptionFunctionToolChoice(openai.ChatCompletionNamedToolChoiceFunctionParam{Name: "get_weather"}), "get_weather"},
	} {
		for seed := range int64(3) {
			params := openai.ChatCompletionNewParams{Model: "m", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Weather in Paris?")},
				Tools: tools, ToolChoice: c.choice, MaxTokens: openai.Int(400), Temperature: openai.Float(1), Seed: openai.Int(seed),
				ParallelToolCalls: openai.Bool(false)}
			r, err := client.Chat.Completions.New(ctx, params)
			if err != nil {
				var ae *openai.Error
				if errors.As(err, &ae) {
					t.Fatalf("%s: %s", ae.Error(), ae.RawJSON())
				}
				t.Fatal(err)
			}
			ch := r.Choices[0]
			if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 {
				t.Fatalf("%s seed %d: finish %q, %d calls, content %q", c.name, seed, ch.FinishReason, len(ch.Message.ToolCalls), ch.Message.Content)
			}
			if raw := ch.Message.RawJSON(); !strings.Contains(raw, `"content":null`) {
				t.Errorf("%s seed %d: a reply of only calls must carry content null, as OpenAI's: %s", c.name, seed, raw)
			}
			call := ch.Message.ToolCalls[0]
			if c.want != "" && call.Function.Name != c.want || call.Function.Name != "get_weather" && call.Function.Name != "get_time" ||
				!strings.HasPrefix(call.ID, "call_") || call.Type != "function" {
				t.Errorf("%s seed %d: call %+v", c.name, seed, call)
			}
			if call.Function.Name == "get_weather" {
				checkWeatherArgs(t, call.Function.Arguments)
			}
			// The same request streamed: the accumulated calls are the same.
			s := client.Chat.Completions.NewStreaming(ctx, params)
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				acc.AddChunk(s.Current())
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			sc := acc.Choices[0]
			if sc.FinishReason != "tool_calls" || len(sc.Message.ToolCalls) != 1 || sc.Message.ToolCalls[0].Function.Name != call.Function.Name ||
				sc.Message.ToolCalls[0].Function.Arguments != call.Function.Arguments {
				t.Errorf("%s seed %d: streamed %+v, whole %+v", c.name, seed, sc.Message, ch.Message)
			}
		}
	}
}

// A conversation carrying an earlier call and its result is accepted; tool_choice none and
// auto answer without constraint; misuse is a 400 naming the field.
func TestToolsRequests(t *testing.T) {
	url, _ := newToolServer(t)
	history := `"messages":[{"role":"user","content":"Weather?"},
	 {"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Oslo\",\"unit\":\"c\"}"}}]},
	 {"role":"tool","tool_call_id":"call_1","content":"{\"temp\": 3}"}]`
	for _, choice := range []string{`"auto"`, `"none"`} {
		resp, body := post(t, url+"/v1/chat/completions", `{"model":"m","max_tokens":8,"temperature":0,"tools":`+weatherTools+`,"tool_choice":`+choice+`,`+history+`}`)
		if resp.StatusCode != http.StatusOK {
			t.Errorf("%s: %d %s", choice, resp.StatusCode, body)
		}
	}
	for body, param := range map[string]string{
		`{"messages":[{"role":"user","content":"x"}],"tools":` + weatherTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}}`:     "tool_choice.function.name",
		`{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object","not":{}}}}]}`: "tools[0].function.parameters",
		`{"messages":[{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{"}}]}]}`:                                               "messages[0].tool_calls[0].function.arguments",
	} {
		resp, b := post(t, url+"/v1/chat/completions", body)
		var e errorBody
		json.Unmarshal(b, &e)
		if resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != param {
			t.Errorf("%s: %d %s, want a 400 on %s", body, resp.StatusCode, b, param)
		}
	}
}

// A model whose template shows no tools refuses a request with tools (a 400 on tools), not
// a reply that silently ignores them.
func TestToolsWithoutConvention(t *testing.T) {
	ts, _, _ := newTestServer(t, 1, EngineOptions{}, Options{})
	resp, b := post(t, ts.URL+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":`+weatherTools+`}`)
	var e errorBody
	json.Unmarshal(b, &e)
	if resp.StatusCode != http.StatusBadRequest || e.Error.Param == nil || *e.Error.Param != "tools" {
		t.Errorf("%d %s", resp.StatusCode, b)
	}
}
