package chat

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"unicode/utf8"
)

// toolCase reads testdata/tools/case.json as OpenAI's wire format has it.
func toolCase(t *testing.T) ([]Message, []Tool) {
	t.Helper()
	b, err := os.ReadFile("testdata/tools/case.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Tools    []Tool `json:"tools"`
		Messages []struct {
			Role       string `json:"role"`
			Content    string `json:"content"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID       string `json:"id"`
				Function struct {
					Name      string `json:"name"`
					Arguments string `json:"arguments"`
				} `json:"function"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	var msgs []Message
	for _, m := range c.Messages {
		msg := Message{Role: m.Role, Content: m.Content, ToolCallID: m.ToolCallID}
		for _, tc := range m.ToolCalls {
			msg.ToolCalls = append(msg.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
		}
		msgs = append(msgs, msg)
	}
	return msgs, c.Tools
}

// TestToolsMatchJinja2: a conversation with tools, a call and its answer renders as Python
// Jinja2 with Hugging Face's tojson renders it (tools/chatref/jinja2_tools.py), on the
// Qwen2.5, Qwen3 and Llama 3.1 templates.
func TestToolsMatchJinja2(t *testing.T) {
	msgs, tools := toolCase(t)
	for _, name := range []string{"qwen2.5", "qwen3", "llama3.1"} {
		src, err := os.ReadFile("testdata/templates/" + name + ".jinja")
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile("testdata/tools/" + name + ".txt")
		if err != nil {
			t.Fatal(err)
		}
		tmpl, err := Parse(string(src))
		if err != nil {
			t.Fatal(err)
		}
		bos, eos := specials(name)
		got, err := tmpl.Render(msgs, Options{AddGenerationPrompt: true, BOS: bos, EOS: eos, Tools: tools,
			Vars: map[string]any{"date_string": "26 Jul 2024"}})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got != string(want) {
			t.Errorf("%s: got\n%s\nwant\n%s", name, got, want)
		}
		if f := tmpl.ToolFormat(); name == "llama3.1" && f != Llama3JSON || name != "llama3.1" && f != Hermes {
			t.Errorf("%s: ToolFormat = %v", name, f)
		}
	}
	// A built-in format cannot show tools: an error, not a prompt without them.
	b, _ := Builtin(ChatML)
	if _, err := b.Render(msgs, Options{Tools: tools}); err == nil {
		t.Error("built-in ChatML rendered tools")
	}
	// Arguments that are not JSON are refused before the template runs.
	bad := []Message{{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: "{"}}}}
	tmpl, _ := Parse("{% for m in messages %}{{ m.role }}{% endfor %}")
	if _, err := tmpl.Render(bad, Options{}); err == nil || !strings.Contains(err.Error(), "arguments are not JSON") {
		t.Errorf("bad arguments: %v", err)
	}
}

func TestParseToolCalls(t *testing.T) {
	for _, c := range []struct {
		f       ToolFormat
		reply   string
		content string
		calls   []ToolCall
		err     bool
	}{
		{Hermes, "Just text.", "Just text.", nil, false},
		{Hermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>", "",
			[]ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, false},
		{Hermes, "Let me check.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>\n<tool_call>\n{\"name\": \"b\", \"arguments\": {\"x\": [1, 2]}}\n</tool_call>",
			"Let me check.", []ToolCall{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"x":[1,2]}`}}, false},
		// Unclosed last call (the end-of-turn token came first), arguments as a string.
		{Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": \"{\\\"k\\\": 1}\"}", "",
			[]ToolCall{{Name: "a", Arguments: `{"k":1}`}}, false},
		{Hermes, "<tool_call>\n{\"name\": \"a\", \"arguments\": {\"k\": </tool_call>", "", nil, true},
		{Hermes, "<tool_call>{\"arguments\": {}}</tool_call>", "", nil, true},
		{Hermes, "<tool_call>{\"name\": \"a\", \"arguments\": [1]}</tool_call>", "", nil, true},
		{Llama3JSON, `{"name": "get_weather", "parameters": {"city": "Paris"}}`, "",
			[]ToolCall{{Name: "get_weather", Arguments: `{"city":"Paris"}`}}, false},
		{Llama3JSON, "<|python_tag|>{\"type\": \"function\", \"name\": \"f\", \"parameters\": {}}", "",
			[]ToolCall{{Name: "f", Arguments: `{}`}}, false},
		{Llama3JSON, `{"name": "a", "parameters": {}}; {"name": "b", "parameters": {"y": true}}`, "",
			[]ToolCall{{Name: "a", Arguments: `{}`}, {Name: "b", Arguments: `{"y":true}`}}, false},
		// JSON that is not a call (structured output) and plain text stay content.
		{Llama3JSON, `{"answer": 4}`, `{"answer": 4}`, nil, false},
		{Llama3JSON, "The answer is 4.", "The answer is 4.", nil, false},
		{Llama3JSON, `{"name": "a", "parameters": {}} trailing words`, "", nil, true},
		{NoTools, "<tool_call>{}</tool_call>", "<tool_call>{}</tool_call>", nil, false},
	} {
		content, calls, err := ParseToolCalls(c.f, c.reply)
		if c.err {
			if err == nil || !errors.Is(err, ErrToolCall) {
				t.Errorf("%v %q: err = %v, want ErrToolCall", c.f, c.reply, err)
			}
			continue
		}
		if err != nil || content != c.content || !equalCalls(calls, c.calls) {
			t.Errorf("%v %q: got %q %+v %v, want %q %+v", c.f, c.reply, content, calls, err, c.content, c.calls)
		}
	}
}

func equalCalls(a, b []ToolCall) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// streamed feeds reply to a ToolStream in pieces of n bytes and returns the content it gave
// and the calls Finish parsed.
func streamed(f ToolFormat, reply string, n int) (string, []ToolCall, error) {
	s := NewToolStream(f)
	var content strings.Builder
	for i := 0; i < len(reply); i += n {
		content.WriteString(s.Write(reply[i:min(i+n, len(reply))]))
	}
	c, calls, err := s.Finish()
	content.WriteString(c)
	return content.String(), calls, err
}

// TestToolStream: content before a call streams as it comes; pieces of any size give the
// calls ParseToolCalls finds in the whole reply.
func TestToolStream(t *testing.T) {
	reply := "Checking now.\n<tool_call>\n{\"name\": \"a\", \"arguments\": {\"q\": \"<tool\"}}\n</tool_call>"
	s := NewToolStream(Hermes)
	if got := s.Write("Checking now.\n<tool"); got != "Checking now.\n" {
		t.Errorf("before the tag: %q", got)
	}
	if got := s.Write("_call>\n{\"name\""); got != "" {
		t.Errorf("inside the call: %q", got)
	}
	for _, f := range []ToolFormat{Hermes, Llama3JSON, NoTools} {
		for _, r := range []string{reply, `{"name": "b", "parameters": {"x": 1}}`, "plain <tool text", " <|python_tag|>{\"name\": \"c\", \"parameters\": {}}"} {
			_, wantCalls, wantErr := ParseToolCalls(f, r)
			for _, n := range []int{1, 2, 3, 7, len(r)} {
				content, calls, err := streamed(f, r, n)
				if (err != nil) != (wantErr != nil) || !equalCalls(calls, wantCalls) {
					t.Errorf("%v %q by %d: %+v %v, want %+v %v", f, r, n, calls, err, wantCalls, wantErr)
				}
				if len(calls) == 0 && err == nil && content != r && strings.TrimSpace(content) != strings.TrimSpace(r) {
					t.Errorf("%v %q by %d: content %q", f, r, n, content)
				}
			}
		}
	}
}

func FuzzParseToolCalls(f *testing.F) {
	for _, s := range []string{
		"<tool_call>\n{\"name\": \"a\", \"arguments\": {}}\n</tool_call>",
		`{"name": "a", "parameters": {"b": [1, {"c": null}]}}`,
		"text <tool_call>{\"name\":\"x\",\"arguments\":\"{}\"}",
		"<|python_tag|>{\"type\": \"function\", \"name\": \"f\"}",
		"<tool_call></tool_call><tool_call>",
	} {
		f.Add(s, 3)
	}
	f.Fuzz(func(t *testing.T, reply string, n int) {
		for _, fm := range []ToolFormat{Hermes, Llama3JSON} {
			_, calls, err := ParseToolCalls(fm, reply)
			for _, c := range calls {
				if c.Name == "" || !json.Valid([]byte(c.Arguments)) || !strings.HasPrefix(c.Arguments, "{") {
					t.Fatalf("%v: bad call %+v from %q", fm, c, reply)
				}
			}
			if n < 1 || n > 64 {
				n = 5
			}
			_, scalls, serr := streamed(fm, reply, n)
			if (err == nil) != (serr == nil) && utf8.ValidString(reply) {
				// A stream decides on a prefix; it must agree with the whole-reply parse.
				t.Fatalf("%v %q: stream err %v, whole err %v", fm, reply, serr, err)
			}
			if err == nil && serr == nil && !equalCalls(calls, scalls) {
				t.Fatalf("%v %q: stream %+v, whole %+v", fm, reply, scalls, calls)
			}
		}
	})
}
