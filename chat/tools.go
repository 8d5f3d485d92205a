package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/nikolalohinski/gonja/v2/exec"
)

// Tool is a function the model may call, as OpenAI's API and Hugging Face templates describe
// it: {"type":"function","function":{"name":...,"description":...,"parameters":{schema}}}.
// Templates see it as decoded JSON (Options.Tools), so they print it with their own tojson.
type Tool struct {
	Type     string       `json:"type"`
	Function ToolFunction `json:"function"`
}

// ToolFunction is a Tool's function: its name, description and JSON-schema parameters.
type ToolFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// ToolCall is one call the assistant made: the function's name and its arguments as a JSON
// object (OpenAI's wire format carries the arguments as a string of JSON).
type ToolCall struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ToolFormat is how a model family writes tool calls in its reply.
type ToolFormat int

const (
	// NoTools: the template shows no tool-call convention kernelrt can parse.
	NoTools ToolFormat = iota
	// Hermes is Qwen2.5/Qwen3's (and Hermes 2 Pro's) convention: each call a JSON object
	// {"name": ..., "arguments": {...}} between <tool_call> and </tool_call> lines.
	Hermes
	// Llama3JSON is Llama 3.1-3.3's convention for custom tools: the whole reply is one JSON
	// object {"name": ..., "parameters": {...}}, optionally after <|python_tag|>.
	Llama3JSON
)

// String names the format.
func (f ToolFormat) String() string {
	switch f {
	case NoTools:
		return "none"
	case Hermes:
		return "hermes"
	case Llama3JSON:
		return "llama3-json"
	}
	return fmt.Sprintf("ToolFormat(%d)", int(f))
}

// ToolFormat reports the tool-call convention of the template, recognised by what its
// source prints for tools (as llama.cpp's common_chat_templates pick a parser).
func (t *Template) ToolFormat() ToolFormat {
	return DetectToolFormat(t.src, t.format)
}

// DetectToolFormat recognises a template source's tool-call convention; f is the format that
// renders it (a built-in ChatML is taken as Hermes, the convention of the ChatML families
// that call tools; a built-in Llama 3 as Llama3JSON).
func DetectToolFormat(src string, f Format) ToolFormat {
	switch {
	case strings.Contains(src, "<tool_call>"):
		return Hermes
	case strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, `"parameters"`):
		return Llama3JSON
	case src == "" && f == ChatML:
		return Hermes
	case src == "" && f == Llama3:
		return Llama3JSON
	}
	return NoTools
}

// Limits on what the parsers accept: a reply is bounded by the server's max tokens, but a
// parser must not trust that.
const (
	// MaxToolCalls bounds the calls parsed from one reply.
	MaxToolCalls = 64
	// MaxToolCallBytes bounds the JSON text of one call.
	MaxToolCallBytes = 1 << 20
)

const (
	hermesOpen  = "<tool_call>"
	hermesClose = "</tool_call>"
	pythonTag   = "<|python_tag|>"
)

// ErrToolCall is wrapped by the errors of ParseToolCalls: the reply contains a tool call
// that is not a JSON object with a string name and an object of arguments.
var ErrToolCall = errors.New("chat: malformed tool call")

// ParseToolCalls splits a finished assistant reply into its text and the tool calls it
// makes in format f. A reply without calls comes back whole as content. A reply whose call
// markup is present but malformed is an error (the caller may then return the text as is).
// The returned Arguments are compact JSON objects.
func ParseToolCalls(f ToolFormat, reply string) (content string, calls []ToolCall, err error) {
	switch f {
	case Hermes:
		return parseHermes(reply)
	case Llama3JSON:
		return parseLlama3(reply)
	}
	return reply, nil, nil
}

// parseHermes takes every <tool_call>...</tool_call> block out of the reply; the text
// outside them is the content. An unclosed last block is taken to the end of the reply (a
// model stopped by its end-of-turn token right after the JSON often omits the close tag).
func parseHermes(reply string) (string, []ToolCall, error) {
	var content strings.Builder
	var calls []ToolCall
	rest := reply
	for {
		i := strings.Index(rest, hermesOpen)
		if i < 0 {
			content.WriteString(rest)
			break
		}
		content.WriteString(rest[:i])
		rest = rest[i+len(hermesOpen):]
		body := rest
		if j := strings.Index(rest, hermesClose); j >= 0 {
			body, rest = rest[:j], rest[j+len(hermesClose):]
		} else {
			rest = ""
		}
		if len(calls) == MaxToolCalls {
			return "", nil, fmt.Errorf("%w: more than %d calls", ErrToolCall, MaxToolCalls)
		}
		c, err := parseCallJSON(body, "arguments")
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, c)
	}
	return strings.TrimSpace(content.String()), calls, nil
}

// parseLlama3 takes a reply that is one JSON call object (after optional whitespace and
// <|python_tag|>); anything else is plain content, as in llama.cpp's Llama 3.x parser.
func parseLlama3(reply string) (string, []ToolCall, error) {
	s := strings.TrimSpace(reply)
	s = strings.TrimSpace(strings.TrimPrefix(s, pythonTag))
	if !looksLikeLlama3Call(s) {
		return reply, nil, nil
	}
	var calls []ToolCall
	// Llama 3.x emits one call a turn; a few fine-tunes separate several with ";".
	dec := json.NewDecoder(strings.NewReader(s))
	for {
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return "", nil, fmt.Errorf("%w: %v", ErrToolCall, err)
		}
		if len(calls) == MaxToolCalls {
			return "", nil, fmt.Errorf("%w: more than %d calls", ErrToolCall, MaxToolCalls)
		}
		c, err := parseCallJSON(string(raw), "parameters", "arguments")
		if err != nil {
			return "", nil, err
		}
		calls = append(calls, c)
		tail := strings.TrimLeft(s[dec.InputOffset():], " \t\r\n;")
		if tail == "" {
			break
		}
		if !looksLikeLlama3Call(tail) {
			return "", nil, fmt.Errorf("%w: text after the call: %.40q", ErrToolCall, tail)
		}
		s, dec = tail, json.NewDecoder(strings.NewReader(tail))
	}
	return "", calls, nil
}

// looksLikeLlama3Call reports whether s starts as a call object: `{` then (optionally
// "type": "function",) a "name" key, as llama.cpp's detection regex requires, so that a
// reply which merely is JSON (structured output) is not taken for a call.
func looksLikeLlama3Call(s string) bool {
	if !strings.HasPrefix(s, "{") {
		return false
	}
	d := json.NewDecoder(strings.NewReader(s))
	if _, err := d.Token(); err != nil { // {
		return false
	}
	for range 2 {
		k, err := d.Token()
		if err != nil {
			return false
		}
		switch k {
		case "name":
			return true
		case "type":
			if v, err := d.Token(); err != nil || v != "function" {
				return false
			}
		default:
			return false
		}
	}
	return false
}

// parseCallJSON decodes {"name": string, <argsKey>: object} (the first of argsKeys present).
func parseCallJSON(body string, argsKeys ...string) (ToolCall, error) {
	body = strings.TrimSpace(body)
	if len(body) > MaxToolCallBytes {
		return ToolCall{}, fmt.Errorf("%w: %d bytes (limit %d)", ErrToolCall, len(body), MaxToolCallBytes)
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal([]byte(body), &obj); err != nil {
		return ToolCall{}, fmt.Errorf("%w: %v", ErrToolCall, err)
	}
	var c ToolCall
	if err := json.Unmarshal(obj["name"], &c.Name); err != nil || c.Name == "" {
		return ToolCall{}, fmt.Errorf("%w: no function name", ErrToolCall)
	}
	args := json.RawMessage("{}")
	for _, k := range argsKeys {
		if a, ok := obj[k]; ok {
			args = a
			break
		}
	}
	// Some models write the arguments as a string holding the JSON object.
	var str string
	if json.Unmarshal(args, &str) == nil {
		args = json.RawMessage(str)
	}
	var check map[string]any
	if err := json.Unmarshal(args, &check); err != nil || check == nil {
		return ToolCall{}, fmt.Errorf("%w: the arguments of %q are not a JSON object", ErrToolCall, c.Name)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, args); err != nil {
		return ToolCall{}, fmt.Errorf("%w: %v", ErrToolCall, err)
	}
	c.Arguments = buf.String()
	return c, nil
}

// ToolStream splits a streamed reply into content deltas as they come, holding back only
// the text that may be the start of a tool call, whose calls ParseToolCalls reads at the end.
// In Hermes format the text before the first <tool_call> streams as content; in Llama3JSON
// format a reply that starts as a call object is held whole. The zero value is unusable: use
// NewToolStream.
type ToolStream struct {
	f       ToolFormat
	buf     strings.Builder // everything seen
	emitted int             // bytes of buf already given out as content
	inCall  bool            // a call has started: the rest is held for Finish
}

// NewToolStream returns a splitter for replies in format f (NoTools passes text through).
func NewToolStream(f ToolFormat) *ToolStream { return &ToolStream{f: f} }

// Write takes the next piece of the reply and returns the content that can be shown now.
func (s *ToolStream) Write(piece string) string {
	s.buf.WriteString(piece)
	if s.inCall {
		return ""
	}
	all := s.buf.String()
	pending := all[s.emitted:]
	switch s.f {
	case NoTools:
		s.emitted = len(all)
		return pending
	case Hermes:
		if i := strings.Index(pending, hermesOpen); i >= 0 {
			s.inCall = true
			s.emitted += i
			return pending[:i]
		}
		// Hold back a tail that could grow into "<tool_call>".
		keep := partialSuffix(pending, hermesOpen)
		out := pending[:len(pending)-keep]
		s.emitted += len(out)
		return out
	case Llama3JSON:
		// The decision waits for the first non-space text: a call starts with "{" or the tag.
		t := strings.TrimLeft(all, " \t\r\n")
		if t == "" {
			return ""
		}
		if strings.HasPrefix(t, "{") || strings.HasPrefix(t, pythonTag) || strings.HasPrefix(pythonTag, t) {
			if strings.HasPrefix(pythonTag, t) && len(t) < len(pythonTag) {
				return "" // could still become the tag
			}
			s.inCall = true
			return ""
		}
		s.emitted = len(all)
		return pending
	}
	return ""
}

// Finish parses what was held back. content is the text not yet returned by Write that is
// not part of a call (a held-back call prefix that turned out to be text, or a Llama 3
// object that is not a call); calls are the reply's tool calls.
func (s *ToolStream) Finish() (content string, calls []ToolCall, err error) {
	all := s.buf.String()
	rest := all[s.emitted:]
	if !s.inCall {
		s.emitted = len(all)
		return rest, nil, nil
	}
	c, calls, err := ParseToolCalls(s.f, rest)
	if err != nil {
		return "", nil, err
	}
	s.emitted = len(all)
	return c, calls, nil
}

// Text is the part of the reply Write has not returned (all of it held back, as text).
func (s *ToolStream) Text() string { return s.buf.String()[s.emitted:] }

// partialSuffix returns the length of the longest suffix of s that is a proper prefix of
// tag (text that may still become the tag), never splitting a UTF-8 sequence.
func partialSuffix(s, tag string) int {
	for n := min(len(s), len(tag)-1); n > 0; n-- {
		if strings.HasPrefix(tag, s[len(s)-n:]) && utf8.ValidString(s[len(s)-n:]) {
			return n
		}
	}
	return 0
}

// toJSON is the tojson filter with Python's json.dumps separators (", " and ": "), as
// Hugging Face's and llama.cpp's template engines print tools and arguments; gonja's own
// writes compact JSON. Object keys come out sorted (Go maps keep no order; Jinja2's own
// tojson sorts too). Text is not escaped beyond JSON's rules (HF's ensure_ascii=False).
func toJSON(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if in.IsError() {
		return in
	}
	indent := -1
	if v, ok := params.KwArgs["indent"]; ok && !v.IsNil() {
		if !v.IsInteger() {
			return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("tojson: indent must be an integer, got %s", v.String())))
		}
		indent = v.Integer()
	} else if len(params.Args) > 0 && params.Args[0].IsInteger() {
		indent = params.Args[0].Integer()
	}
	// Round-trip through encoding/json to reach plain maps, slices and scalars.
	b, err := json.Marshal(in.Interface())
	if err != nil {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("tojson: %v", err)))
	}
	var v any
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	if err := d.Decode(&v); err != nil {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("tojson: %v", err)))
	}
	var out strings.Builder
	writePyJSON(&out, v, indent, 0)
	return exec.AsSafeValue(out.String())
}

// writePyJSON writes v as Python's json.dumps(v, indent=indent, ensure_ascii=False) would
// (indent < 0: on one line), keys sorted.
func writePyJSON(w *strings.Builder, v any, indent, depth int) {
	nl := func(d int) {
		if indent >= 0 {
			w.WriteByte('\n')
			w.WriteString(strings.Repeat(" ", indent*d))
		}
	}
	sep := ", "
	if indent >= 0 {
		sep = ","
	}
	switch x := v.(type) {
	case map[string]any:
		if len(x) == 0 {
			w.WriteString("{}")
			return
		}
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				w.WriteString(sep)
			}
			nl(depth + 1)
			writePyString(w, k)
			w.WriteString(": ")
			writePyJSON(w, x[k], indent, depth+1)
		}
		nl(depth)
		w.WriteByte('}')
	case []any:
		if len(x) == 0 {
			w.WriteString("[]")
			return
		}
		w.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				w.WriteString(sep)
			}
			nl(depth + 1)
			writePyJSON(w, e, indent, depth+1)
		}
		nl(depth)
		w.WriteByte(']')
	case string:
		writePyString(w, x)
	case json.Number:
		w.WriteString(x.String())
	case bool:
		w.WriteString(strconv.FormatBool(x))
	case nil:
		w.WriteString("null")
	default:
		fmt.Fprint(w, x)
	}
}

// writePyString quotes s as JSON without HTML escaping (Python escapes only '"', '\\' and
// control characters when ensure_ascii is off).
func writePyString(w *strings.Builder, s string) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	_ = e.Encode(s) // a string always encodes
	w.Write(bytes.TrimSuffix(b.Bytes(), []byte("\n")))
}
