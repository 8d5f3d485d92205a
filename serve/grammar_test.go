package serve

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/grammar"
	"github.com/kernelrt/kernelrt/sample"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// The reply's shape in TestStructuredOutput's schema.
type structuredReply struct {
	Name  *string `json:"name"`
	Count *int    `json:"count"`
	Kind  *string `json:"kind"`
	OK    *bool   `json:"ok"`
}

const structuredSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":5},
"count":{"type":"integer","minimum":0,"maximum":99},"kind":{"enum":["a","b"]},"ok":{"type":"boolean"}},
"required":["name","count","kind","ok"],"additionalProperties":false}`

// checkStructured decodes text as structuredReply, refusing unknown fields, and checks the
// schema's constraints.
func checkStructured(t *testing.T, text string) {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(text))
	dec.DisallowUnknownFields()
	var r structuredReply
	if err := dec.Decode(&r); err != nil || dec.More() {
		t.Fatalf("%q is not one JSON object of the schema: %v", text, err)
	}
	if r.Name == nil || len([]rune(*r.Name)) > 5 || r.Count == nil || *r.Count < 0 || *r.Count > 99 ||
		r.Kind == nil || (*r.Kind != "a" && *r.Kind != "b") || r.OK == nil {
		t.Fatalf("%q does not validate against the schema", text)
	}
}

// The official OpenAI client asks for a strict json_schema reply from the random-weight
// model, streaming and not: the text validates against the schema. json_object and a
// GBNF grammar constrain /v1/completions too.
func TestStructuredOutput(t *testing.T) {
	ts, _, _ := newTestServer(t, 2, EngineOptions{}, Options{})
	client := openai.NewClient(option.WithBaseURL(ts.URL+"/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0))
	var schema map[string]any
	if err := json.Unmarshal([]byte(structuredSchema), &schema); err != nil {
		t.Fatal(err)
	}
	params := openai.ChatCompletionNewParams{
		Model:    "whatever",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Describe a thing as JSON.")},
		ResponseFormat: openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
			JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{Name: "thing", Schema: schema, Strict: openai.Bool(true)}}},
		Temperature: openai.Float(1),
		MaxTokens:   openai.Int(200),
	}
	ctx := context.Background()
	for seed := range int64(3) {
		params.Seed = openai.Int(seed)
		c, err := client.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].FinishReason != "stop" {
			t.Fatalf("seed %d: %+v", seed, c.Choices)
		}
		checkStructured(t, c.Choices[0].Message.Content)
		if seed == 0 {
			t.Logf("reply: %q", c.Choices[0].Message.Content)
		}
	}
	s := client.Chat.Completions.NewStreaming(ctx, params)
	var text strings.Builder
	for s.Next() {
		for _, ch := range s.Current().Choices {
			text.WriteString(ch.Delta.Content)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	checkStructured(t, text.String())

	// /v1/completions: json_object gives any JSON object, grammar a GBNF language.
	for _, tc := range []struct{ body, want string }{
		{`{"prompt":"JSON:","max_tokens":200,"seed":2,"temperature":0.5,"response_format":{"type":"json_object"}}`, "object"},
		{`{"prompt":"Q:","max_tokens":20,"seed":1,"grammar":"root ::= \"answer: \" (\"yes\" | \"no\")"}`, "answer"},
	} {
		resp, body := post(t, ts.URL+"/v1/completions", tc.body)
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", tc.body, resp.StatusCode, body)
		}
		var out struct {
			Choices []struct {
				Text         string `json:"text"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &out); err != nil || len(out.Choices) != 1 {
			t.Fatalf("%s: %s", tc.body, body)
		}
		text, finish := out.Choices[0].Text, out.Choices[0].FinishReason
		switch tc.want {
		case "object":
			var m map[string]any
			if finish == "stop" && json.Unmarshal([]byte(text), &m) != nil {
				t.Errorf("json_object: %q is not a JSON object", text)
			}
			if finish != "stop" && !strings.HasPrefix(strings.TrimSpace(text), "{") {
				t.Errorf("json_object cut by the length: %q does not begin an object", text)
			}
		case "answer":
			if finish != "stop" || (text != "answer: yes" && text != "answer: no") {
				t.Errorf("grammar: %q (%s)", text, finish)
			}
		}
	}
}

// Bad structured-output fields are 400s naming the field.
func TestStructuredOutputErrors(t *testing.T) {
	ts, _, _ := newTestServer(t, 1, EngineOptions{}, Options{})
	for _, c := range []struct{ path, body, param, msg string }{
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"integer","multipleOf":2}}}}`,
			"response_format.json_schema.schema", `response_format.json_schema.schema: schema at #: keyword "multipleOf" is not supported`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}}`, "response_format.json_schema", "required"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "response_format.json_schema.schema", "required"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}`, "response_format.type", `"xml" is not supported`},
		{"/v1/completions", `{"prompt":"x","grammar":"root ::= [a-"}`, "grammar", "grammar: line 1, column 10: unterminated character class"},
		{"/v1/completions", `{"prompt":"x","grammar":"root ::= \"a\"","response_format":{"type":"json_object"}}`, "grammar", "at most one"},
		{"/v1/completions", `{"prompt":"x","response_format":{"type":"json_schema","json_schema":{"schema":{"type":"object","properties":{"a":{"$ref":"#/nowhere"}}}}}}`,
			"response_format.json_schema.schema", "does not resolve"},
	} {
		resp, body := post(t, ts.URL+c.path, c.body)
		var eb errorBody
		json.Unmarshal(body, &eb)
		if resp.StatusCode != 400 || eb.Error.Param == nil || *eb.Error.Param != c.param || !strings.Contains(eb.Error.Message, c.msg) {
			t.Errorf("%s: %d %s; want 400 naming %s with %q", c.body, resp.StatusCode, bytes.TrimSpace(body), c.param, c.msg)
		}
	}
}

// Constrained sequences sampling in the same step get their masks computed in parallel
// (prepareMasks): every reply validates, and the replies are the same as when the engine
// runs them again (the masks do not depend on which goroutine computed them).
func TestParallelGrammarMasks(t *testing.T) {
	g, err := grammar.FromJSONSchema([]byte(structuredSchema))
	if err != nil {
		t.Fatal(err)
	}
	m, tok := loadTiny(t, 4)
	e := newTestEngine(t, m, tok, EngineOptions{})
	run := func() []string {
		var streams []*Stream
		for i := range 4 {
			o := greedy(120)
			o.Sampling = sample.Options{Temperature: 1, Seed: uint64(i + 1)}
			o.Grammar = g
			st, err := e.Submit(context.Background(), Request{Prompt: fmt.Sprintf("Thing %d as JSON:", i), Options: o})
			if err != nil {
				t.Fatal(err)
			}
			streams = append(streams, st)
		}
		var out []string
		for _, st := range streams {
			text, _, err := st.Text(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			checkStructured(t, text)
			out = append(out, text)
		}
		return out
	}
	first, again := run(), run()
	if !slices.Equal(first, again) {
		t.Errorf("the same requests gave different replies:\n%q\n%q", first, again)
	}
	checkIdle(t, e)
}
