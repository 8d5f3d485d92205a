package serve

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"

	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/grammar"
)

// Limits on a request's tools (the body limit bounds them too; these keep the prompt and the
// call grammar small enough to build per request).
const (
	// MaxTools is the most functions one request may offer.
	MaxTools = 128
	// maxToolName is the longest function name (OpenAI's limit is 64).
	maxToolName = 64
)

// toolChoice is what a chat request's tools and tool_choice ask for.
type toolChoice struct {
	tools []chat.Tool
	// mode is "none", "auto" or "required"; a named function is "required" over name.
	mode     string
	name     string
	parallel bool
}

// parseToolChoice reads tools, tool_choice and parallel_tool_calls. No tools is nil.
func parseToolChoice(rawTools, rawChoice json.RawMessage, parallel *bool) (*toolChoice, *apiError) {
	null := func(r json.RawMessage) bool { return len(r) == 0 || string(r) == "null" }
	if null(rawTools) || string(rawTools) == "[]" {
		if !null(rawChoice) {
			var s string
			if json.Unmarshal(rawChoice, &s) != nil || (s != "none" && s != "auto") {
				return nil, badRequest("tool_choice", "invalid_value", "tool_choice needs tools")
			}
		}
		return nil, nil
	}
	t := &toolChoice{mode: "auto", parallel: parallel == nil || *parallel}
	if err := json.Unmarshal(rawTools, &t.tools); err != nil {
		return nil, badRequest("tools", "invalid_type", "tools must be an array of {\"type\": \"function\", \"function\": {...}}: %v", err)
	}
	if len(t.tools) > MaxTools {
		return nil, badRequest("tools", "invalid_value", "tools holds %d functions, more than the limit of %d", len(t.tools), MaxTools)
	}
	seen := map[string]bool{}
	for i, tl := range t.tools {
		p := fmt.Sprintf("tools[%d]", i)
		if tl.Type != "function" {
			return nil, badRequest(p+".type", "invalid_value", "%s.type must be \"function\", got %q", p, tl.Type)
		}
		n := tl.Function.Name
		if n == "" || len(n) > maxToolName || strings.ContainsFunc(n, func(r rune) bool {
			return !(r == '_' || r == '-' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9')
		}) {
			return nil, badRequest(p+".function.name", "invalid_value", "%s.function.name must be 1 to %d of a-z, A-Z, 0-9, _ and -, got %q", p, maxToolName, n)
		}
		if seen[n] {
			return nil, badRequest(p+".function.name", "invalid_value", "function %q is listed twice", n)
		}
		seen[n] = true
		if len(tl.Function.Parameters) > 0 && string(tl.Function.Parameters) != "null" {
			if _, err := grammar.JSONSchemaGBNF(tl.Function.Parameters); err != nil {
				return nil, badRequest(p+".function.parameters", "invalid_value", "%s.function.parameters: %v", p, err)
			}
		}
	}
	if null(rawChoice) {
		return t, nil
	}
	var s string
	if json.Unmarshal(rawChoice, &s) == nil {
		switch s {
		case "none", "auto", "required":
			t.mode = s
			return t, nil
		}
		return nil, badRequest("tool_choice", "invalid_value", "tool_choice must be \"none\", \"auto\", \"required\" or {\"type\": \"function\", \"function\": {\"name\": ...}}, got %q", s)
	}
	var named struct {
		Type     string `json:"type"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if err := json.Unmarshal(rawChoice, &named); err != nil || named.Type != "function" {
		return nil, badRequest("tool_choice", "invalid_type", "tool_choice must be a string or {\"type\": \"function\", \"function\": {\"name\": ...}}")
	}
	if !seen[named.Function.Name] {
		return nil, badRequest("tool_choice.function.name", "invalid_value", "tool_choice names %q, which is not in tools", named.Function.Name)
	}
	t.mode, t.name = "required", named.Function.Name
	return t, nil
}

// offered returns the tools the template is shown: none for "none" (the model is not told
// of them, as llama.cpp's server does), only the named one for a named choice.
func (t *toolChoice) offered() []chat.Tool {
	switch {
	case t == nil || t.mode == "none":
		return nil
	case t.name != "":
		for _, tl := range t.tools {
			if tl.Function.Name == t.name {
				return []chat.Tool{tl}
			}
		}
	}
	return t.tools
}

// toolCallGBNF writes the grammar of a reply that calls tools: a JSON schema for the call
// object (anyOf over the functions: {"name": const, <args key>: parameters}) compiled by
// package grammar, its root wrapped in the format's markup.
func toolCallGBNF(f chat.ToolFormat, tools []chat.Tool, parallel bool) (string, error) {
	var argsKey string
	switch f {
	case chat.Hermes:
		argsKey = "arguments"
	case chat.Llama3JSON:
		argsKey = "parameters"
	default:
		return "", fmt.Errorf("serve: the model's template has no tool-call convention kernelrt knows")
	}
	if len(tools) == 0 {
		return "", fmt.Errorf("serve: a required tool call needs tools")
	}
	alts := make([]map[string]any, len(tools))
	for i, tl := range tools {
		params := json.RawMessage(`{"type":"object"}`)
		if len(tl.Function.Parameters) > 0 && string(tl.Function.Parameters) != "null" {
			params = tl.Function.Parameters
		}
		alts[i] = map[string]any{
			"type": "object",
			// Property order is the emitted order: the name first, as the templates show it.
			"properties":           orderedProps{{"name", map[string]any{"const": tl.Function.Name}}, {argsKey, params}},
			"required":             []string{"name", argsKey},
			"additionalProperties": false,
		}
	}
	schema, err := json.Marshal(map[string]any{"anyOf": alts})
	if err != nil {
		return "", err
	}
	src, err := grammar.JSONSchemaGBNF(schema)
	if err != nil {
		return "", err
	}
	// The compiler's first line is "root ::= <call>"; the rest are its rules.
	first, rest, _ := strings.Cut(src, "\n")
	call, ok := strings.CutPrefix(first, "root ::= ")
	if !ok {
		return "", fmt.Errorf("serve: unexpected grammar head %q", first)
	}
	// Rules without groups: the parser names a group's rule after its parent ("root-N"),
	// which the compiler's rules already use.
	var head string
	switch f {
	case chat.Hermes:
		const tag = "call-tag ::= \"<tool_call>\\n\" call-obj \"\\n</tool_call>\"\n"
		head = "root ::= call-tag\n" + tag
		if parallel {
			head = "root ::= call-tag call-more\ncall-more ::= | \"\\n\" call-tag call-more\n" + tag
		}
	default: // Llama3JSON
		head = "root ::= call-obj\n" // Llama 3.x makes one call a turn
	}
	return head + "call-obj ::= " + call + "\n" + rest, nil
}

// orderedProps marshals as a JSON object with its keys in the given order.
type orderedProps []struct {
	k string
	v any
}

// MarshalJSON writes the pairs in order.
func (o orderedProps) MarshalJSON() ([]byte, error) {
	b := []byte{'{'}
	for i, p := range o {
		if i > 0 {
			b = append(b, ',')
		}
		k, err := json.Marshal(p.k)
		if err != nil {
			return nil, err
		}
		v, err := json.Marshal(p.v)
		if err != nil {
			return nil, err
		}
		b = append(append(append(b, k...), ':'), v...)
	}
	return append(b, '}'), nil
}

// toolCallOut is a call in a response: message.tool_calls[] (Index nil) or a chunk's
// delta.tool_calls[].
type toolCallOut struct {
	Index    *int   `json:"index,omitempty"`
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// toolCallsOut gives each parsed call an id and OpenAI's shape; indexed for stream chunks.
func toolCallsOut(calls []chat.ToolCall, indexed bool) []toolCallOut {
	out := make([]toolCallOut, len(calls))
	for i, c := range calls {
		out[i].ID, out[i].Type = newCallID(), "function"
		out[i].Function.Name, out[i].Function.Arguments = c.Name, c.Arguments
		if indexed {
			out[i].Index = &i
		}
	}
	return out
}

// newCallID is "call_" and 24 random letters and digits, as OpenAI's ids look.
func newCallID() string {
	const digits = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := []byte("call_")
	for range 24 {
		b = append(b, digits[rand.IntN(len(digits))])
	}
	return string(b)
}

// messageToolCalls reads an assistant message's tool_calls for the template.
func messageToolCalls(raw json.RawMessage, param string) ([]chat.ToolCall, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var in []toolCallOut // the wire shape is the one responses carry
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, badRequest(param, "invalid_type", "%s must be an array of {\"id\", \"type\": \"function\", \"function\": {\"name\", \"arguments\"}}: %v", param, err)
	}
	if len(in) > chat.MaxToolCalls {
		return nil, badRequest(param, "invalid_value", "%s holds %d calls, more than %d", param, len(in), chat.MaxToolCalls)
	}
	out := make([]chat.ToolCall, len(in))
	for i, c := range in {
		p := fmt.Sprintf("%s[%d].function", param, i)
		if c.Function.Name == "" {
			return nil, badRequest(p+".name", "missing_required_parameter", "%s.name is required", p)
		}
		args := c.Function.Arguments
		if args == "" {
			args = "{}"
		}
		if !json.Valid([]byte(args)) {
			return nil, badRequest(p+".arguments", "invalid_value", "%s.arguments is not JSON", p)
		}
		out[i] = chat.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: args}
	}
	return out, nil
}
