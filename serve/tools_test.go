package serve

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/grammar"
)

const weatherTools = `[{"type":"function","function":{"name":"get_weather","description":"Weather now.",
 "parameters":{"type":"object","properties":{"city":{"type":"string","maxLength":8},"unit":{"enum":["c","f"]}},"required":["city","unit"],"additionalProperties":false}}},
 {"type":"function","function":{"name":"get_time","parameters":{"type":"object","properties":{},"additionalProperties":false}}}]`

func TestParseToolChoice(t *testing.T) {
	raw := json.RawMessage(weatherTools)
	for _, c := range []struct {
		tools, choice string
		mode, name    string
		param         string // "" = accepted
	}{
		{"", "", "", "", ""},
		{"[]", `"auto"`, "", "", ""},
		{"", `"required"`, "", "", "tool_choice"},
		{weatherTools, "", "auto", "", ""},
		{weatherTools, `"none"`, "none", "", ""},
		{weatherTools, `"required"`, "required", "", ""},
		{weatherTools, `{"type":"function","function":{"name":"get_time"}}`, "required", "get_time", ""},
		{weatherTools, `{"type":"function","function":{"name":"nope"}}`, "", "", "tool_choice.function.name"},
		{weatherTools, `"sometimes"`, "", "", "tool_choice"},
		{`[{"type":"retrieval"}]`, "", "", "", "tools[0].type"},
		{`[{"type":"function","function":{"name":"a b"}}]`, "", "", "", "tools[0].function.name"},
		{`[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"a"}}]`, "", "", "", "tools[1].function.name"},
		{`[{"type":"function","function":{"name":"a","parameters":{"type":"integer","multipleOf":2}}}]`, "", "", "", "tools[0].function.parameters"},
		{`{"a":1}`, "", "", "", "tools"},
	} {
		tc, err := parseToolChoice(json.RawMessage(c.tools), json.RawMessage(c.choice), nil)
		if c.param != "" {
			if err == nil || err.Param == nil || *err.Param != c.param {
				t.Errorf("%s / %s: err %v, want param %s", c.tools, c.choice, err, c.param)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s / %s: %v", c.tools, c.choice, err)
			continue
		}
		if c.mode == "" {
			if tc != nil {
				t.Errorf("%s / %s: %+v, want no tools", c.tools, c.choice, tc)
			}
			continue
		}
		if tc.mode != c.mode || tc.name != c.name {
			t.Errorf("%s / %s: mode %q name %q", c.tools, c.choice, tc.mode, tc.name)
		}
	}
	tc, _ := parseToolChoice(raw, json.RawMessage(`{"type":"function","function":{"name":"get_time"}}`), nil)
	if o := tc.offered(); len(o) != 1 || o[0].Function.Name != "get_time" {
		t.Errorf("named choice offers %+v", o)
	}
	tc, _ = parseToolChoice(raw, json.RawMessage(`"none"`), nil)
	if o := tc.offered(); o != nil {
		t.Errorf("none offers %+v", o)
	}
}

// TestToolCallGrammar: under "required" only well-formed calls of offered functions, with
// arguments valid for their schema, are complete sentences of the grammar.
func TestToolCallGrammar(t *testing.T) {
	f := false
	for _, c := range []struct {
		f        chat.ToolFormat
		choice   string
		parallel *bool
		good     []string
		bad      []string
	}{
		{chat.Hermes, `"required"`, nil,
			[]string{
				"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>",
				"<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>",
			},
			[]string{
				"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
				"<tool_call>\n{\"name\": \"set_weather\", \"arguments\": {}}\n</tool_call>",
				"{\"name\": \"get_time\", \"arguments\": {}}",
				"Sure!",
			}},
		{chat.Hermes, `"required"`, &f, nil,
			[]string{"<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>\n<tool_call>\n{\"name\":\"get_time\",\"arguments\":{}}\n</tool_call>"}},
		{chat.Hermes, `{"type":"function","function":{"name":"get_time"}}`, nil,
			[]string{"<tool_call>\n{\"name\": \"get_time\", \"arguments\": {}}\n</tool_call>"},
			[]string{"<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}}\n</tool_call>"}},
		{chat.Llama3JSON, `"required"`, nil,
			[]string{`{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "f"}}`},
			[]string{`{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "f"}}`, `{"name": "get_weather", "parameters": {"city": "Oslo", "unit": "k"}}`}},
	} {
		tc, aerr := parseToolChoice(json.RawMessage(weatherTools), json.RawMessage(c.choice), c.parallel)
		if aerr != nil {
			t.Fatal(aerr)
		}
		src, err := toolCallGBNF(c.f, tc.offered(), tc.parallel)
		if err != nil {
			t.Fatalf("%v %s: %v", c.f, c.choice, err)
		}
		g, err := grammar.Parse(src)
		if err != nil {
			t.Fatalf("%v %s: %v\n%s", c.f, c.choice, err, src)
		}
		for _, s := range c.good {
			m := g.NewMatcher()
			if !m.Accept([]byte(s)) || !m.Complete() {
				t.Errorf("%v %s: refused %q", c.f, c.choice, s)
			}
			// What the grammar makes must parse back into the calls.
			_, calls, err := chat.ParseToolCalls(c.f, s)
			if err != nil || len(calls) == 0 {
				t.Errorf("%v: %q parses to %+v, %v", c.f, s, calls, err)
			}
		}
		for _, s := range c.bad {
			m := g.NewMatcher()
			if m.Accept([]byte(s)) && m.Complete() {
				t.Errorf("%v %s: accepted %q", c.f, c.choice, s)
			}
		}
	}
	if _, err := toolCallGBNF(chat.NoTools, nil, true); err == nil || !strings.Contains(err.Error(), "convention") {
		t.Errorf("required without a convention: %v", err)
	}
}

func TestMessageToolCalls(t *testing.T) {
	calls, err := messageToolCalls(json.RawMessage(`[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]`), "messages[1].tool_calls")
	if err != nil || len(calls) != 1 || calls[0] != (chat.ToolCall{ID: "call_1", Name: "f", Arguments: `{"a":1}`}) {
		t.Errorf("%+v %v", calls, err)
	}
	for raw, param := range map[string]string{
		`[{"function":{"arguments":"{}"}}]`:           "messages[1].tool_calls[0].function.name",
		`[{"function":{"name":"f","arguments":"{"}}]`: "messages[1].tool_calls[0].function.arguments",
		`{"a":1}`: "messages[1].tool_calls",
	} {
		if _, err := messageToolCalls(json.RawMessage(raw), "messages[1].tool_calls"); err == nil || *err.Param != param {
			t.Errorf("%s: %v, want param %s", raw, err, param)
		}
	}
	out := toolCallsOut([]chat.ToolCall{{Name: "f", Arguments: "{}"}, {Name: "g", Arguments: "{}"}}, true)
	if len(out) != 2 || *out[1].Index != 1 || !strings.HasPrefix(out[0].ID, "call_") || len(out[0].ID) != 29 || out[0].ID == out[1].ID {
		t.Errorf("%+v", out)
	}
}
