// Package chat turns a conversation into a prompt with a model's chat template: the Jinja
// source a GGUF file stores under tokenizer.chat_template, rendered as llama.cpp renders it
// (trim_blocks and lstrip_blocks on; bos_token, eos_token, add_generation_prompt,
// raise_exception and strftime_now defined; a leading BOS and a trailing EOS string cut off,
// because the tokenizer adds those as tokens).
//
// The Jinja engine is github.com/nikolalohinski/gonja/v2. On the Qwen2.5, Qwen3 and Llama 3,
// 3.1 and 3.2 templates its output equals llama.cpp's byte for byte (testdata/). A template
// it cannot parse is recognised as llama.cpp's llm_chat_detect_template would and rendered
// by a built-in ChatML, Llama 3 or Gemma formatter (Gemma 3's template puts a conditional
// expression in parentheses, which gonja cannot parse); anything else is an error.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/nikolalohinski/gonja/v2/builtins"
	"github.com/nikolalohinski/gonja/v2/config"
	"github.com/nikolalohinski/gonja/v2/exec"
	"github.com/nikolalohinski/gonja/v2/loaders"
)

// Message is one turn of a conversation. Role is "system", "user" or "assistant" (templates
// may know others, such as "tool").
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
	// ToolCalls are the calls an assistant turn made (templates see them as OpenAI's
	// tool_calls: {"id", "type": "function", "function": {"name", "arguments": object}}).
	ToolCalls []ToolCall `json:"tool_calls,omitempty"`
	// ToolCallID and Name identify the call a "tool" turn answers.
	ToolCallID string `json:"tool_call_id,omitempty"`
	Name       string `json:"name,omitempty"`
}

// Format is what renders a Template.
type Format int

const (
	// Jinja is the template's own source, run by the Jinja engine.
	Jinja Format = iota
	// ChatML is "<|im_start|>role\ncontent<|im_end|>\n" per message (Qwen, many others).
	ChatML
	// Llama3 is "<|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|>" per message.
	Llama3
	// Gemma is "<start_of_turn>role\ncontent<end_of_turn>\n" per message (gemma.go).
	Gemma
)

// String names the format.
func (f Format) String() string {
	switch f {
	case Jinja:
		return "jinja"
	case ChatML:
		return "chatml"
	case Llama3:
		return "llama3"
	case Gemma:
		return "gemma"
	}
	return fmt.Sprintf("Format(%d)", int(f))
}

// ErrNoTemplate is returned by Parse for an empty source: the model ships no template, and
// the caller picks one (llama.cpp uses ChatML then; see Builtin).
var ErrNoTemplate = errors.New("chat: the model has no chat template")

// Options are the inputs of one rendering besides the messages.
type Options struct {
	// AddGenerationPrompt ends the prompt with the opening of an assistant turn.
	AddGenerationPrompt bool
	// BOS and EOS are the text of the model's begin- and end-of-sequence tokens, which
	// templates see as bos_token and eos_token.
	BOS, EOS string
	// Now is the time strftime_now formats (in Now's location); the zero value means the
	// current local time, as llama.cpp does. Llama 3.2 puts today's date in the prompt.
	Now time.Time
	// Vars are further template variables, such as Qwen3's enable_thinking.
	Vars map[string]any
	// Tools are the functions the model may call, given to the template as its tools
	// variable (as llama.cpp's --jinja does). Only a Jinja template can show them.
	Tools []Tool
}

// Template is a parsed chat template. It is safe for concurrent use.
type Template struct {
	src    string
	format Format
	mu     sync.Mutex // the engine does not promise concurrent execution
	tmpl   *exec.Template
}

// Parse compiles a chat template. A source the Jinja engine cannot parse falls back to the
// built-in format Detect recognises; if there is none, the error says so.
func Parse(src string) (*Template, error) {
	if strings.TrimSpace(src) == "" {
		return nil, ErrNoTemplate
	}
	t, err := compile(src)
	if err == nil {
		return &Template{src: src, format: Jinja, tmpl: t}, nil
	}
	if f := Detect(src); f != Jinja {
		return &Template{src: src, format: f}, nil
	}
	return nil, fmt.Errorf("chat: unknown chat template: the Jinja engine cannot parse it (%v) and it is neither ChatML, Llama 3 nor Gemma", err)
}

// Builtin returns the built-in renderer of a format (ChatML, Llama3 or Gemma).
func Builtin(f Format) (*Template, error) {
	if f != ChatML && f != Llama3 && f != Gemma {
		return nil, fmt.Errorf("chat: no built-in renderer for format %v", f)
	}
	return &Template{format: f}, nil
}

// Detect recognises a template's format by its marker tokens, as llama.cpp's
// llm_chat_detect_template does for the formats kernelrt has built in; Jinja means neither.
func Detect(src string) Format {
	switch {
	case strings.Contains(src, "<|im_start|>"):
		return ChatML
	case strings.Contains(src, "<|start_header_id|>") && strings.Contains(src, "<|end_header_id|>"):
		return Llama3
	case strings.Contains(src, "<start_of_turn>"):
		return Gemma
	}
	return Jinja
}

// Format reports what renders the template.
func (t *Template) Format() Format { return t.format }

// Source returns the template's Jinja source ("" for a Builtin).
func (t *Template) Source() string { return t.src }

// Render returns the prompt for msgs. As in llama.cpp, a leading o.BOS and a trailing o.EOS
// are removed from the template's output: the tokenizer adds BOS itself when the model
// wants it, and a prompt never ends a sequence.
func (t *Template) Render(msgs []Message, o Options) (string, error) {
	var out string
	if len(o.Tools) > 0 && t.format != Jinja {
		return "", fmt.Errorf("chat: the %v format cannot show tools: the model needs a Jinja template that renders them", t.format)
	}
	switch t.format {
	case ChatML:
		out = renderChatML(msgs, o.AddGenerationPrompt)
	case Llama3:
		out = renderLlama3(msgs, o.AddGenerationPrompt)
	case Gemma:
		out = renderGemma(msgs, o.AddGenerationPrompt)
	default:
		var err error
		if out, err = t.renderJinja(msgs, o); err != nil {
			return "", err
		}
	}
	if o.BOS != "" {
		out = strings.TrimPrefix(out, o.BOS)
	}
	if o.EOS != "" {
		out = strings.TrimSuffix(out, o.EOS)
	}
	return out, nil
}

// renderJinja runs the template with llama.cpp's variables.
func (t *Template) renderJinja(msgs []Message, o Options) (string, error) {
	list := make([]any, len(msgs))
	for i, m := range msgs {
		mm := map[string]any{"role": m.Role, "content": m.Content}
		// Keys only when set: Llama 3.1's template tests `'tool_calls' in message`.
		if len(m.ToolCalls) > 0 {
			calls := make([]any, len(m.ToolCalls))
			for j, c := range m.ToolCalls {
				var args any
				if err := json.Unmarshal([]byte(c.Arguments), &args); err != nil {
					return "", fmt.Errorf("chat: message %d: tool call %d (%q): arguments are not JSON: %v", i, j, c.Name, err)
				}
				calls[j] = map[string]any{"id": c.ID, "type": "function",
					"function": map[string]any{"name": c.Name, "arguments": args}}
			}
			mm["tool_calls"] = calls
		}
		if m.ToolCallID != "" {
			mm["tool_call_id"] = m.ToolCallID
		}
		if m.Name != "" {
			mm["name"] = m.Name
		}
		list[i] = mm
	}
	now := o.Now
	if now.IsZero() {
		now = time.Now()
	}
	vars := map[string]any{
		"messages":              list,
		"add_generation_prompt": o.AddGenerationPrompt,
		"bos_token":             o.BOS,
		"eos_token":             o.EOS,
		"raise_exception": func(msg string) (string, error) {
			return "", fmt.Errorf("chat: the template raised: %s", msg)
		},
		"strftime_now": func(format string) string { return strftime(now, format) },
	}
	if len(o.Tools) > 0 {
		// The template prints tools with its own tojson: give it decoded JSON, not structs.
		b, err := json.Marshal(o.Tools)
		if err != nil {
			return "", fmt.Errorf("chat: tools: %w", err)
		}
		var tools []any
		if err := json.Unmarshal(b, &tools); err != nil {
			return "", fmt.Errorf("chat: tools: %w", err)
		}
		vars["tools"] = tools
	}
	for k, v := range o.Vars {
		vars[k] = v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	s, err := t.tmpl.ExecuteToString(exec.NewContext(vars))
	if err != nil {
		return "", fmt.Errorf("chat: rendering the template: %w", err)
	}
	return s, nil
}

// compile parses src with Hugging Face's and llama.cpp's whitespace options: a block tag
// swallows the newline after it and the indentation before it.
func compile(src string) (t *exec.Template, err error) {
	defer func() { // a parser bug must not take the program down: report it as an error
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("parser panic: %v", r)
		}
	}()
	cfg := config.New()
	cfg.TrimBlocks = true
	cfg.LeftStripBlocks = true
	cfg.KeepTrailingNewline = false
	root, err := loaders.NewFileSystemLoader("")
	if err != nil {
		return nil, err
	}
	const name = "chat_template"
	loader, err := loaders.NewShiftedLoader(name, strings.NewReader(src), root)
	if err != nil {
		return nil, err
	}
	filters := exec.NewFilterSet(map[string]exec.FilterFunction{}).Update(builtins.Filters)
	if err := filters.Replace("trim", trim); err != nil {
		return nil, err
	}
	if err := filters.Replace("tojson", toJSON); err != nil {
		return nil, err
	}
	env := &exec.Environment{
		Context:           exec.EmptyContext().Update(builtins.GlobalFunctions).Update(builtins.GlobalVariables),
		Filters:           filters,
		Tests:             builtins.Tests,
		ControlStructures: builtins.ControlStructures,
		Methods:           builtins.Methods,
	}
	return exec.NewTemplate(name, cfg, loader, env)
}

// trim is the trim filter as llama.cpp's engine (minja) has it: without an argument it
// strips " \t\n\r" only, where Python's str.strip (and gonja's) also strips Unicode spaces
// such as U+00A0. The Llama 3.x templates trim every message, so this decides whether a
// message starting with a no-break space tokenizes as in llama.cpp.
func trim(_ *exec.Evaluator, in *exec.Value, params *exec.VarArgs) *exec.Value {
	if !in.IsString() {
		return exec.AsValue(exec.ErrInvalidCall(fmt.Errorf("trim: %s is not a string", in.String())))
	}
	chars := " \t\n\r"
	if len(params.Args) > 0 {
		chars = params.Args[0].String()
	} else if v, ok := params.KwArgs["chars"]; ok {
		chars = v.String()
	}
	return exec.AsValue(strings.Trim(in.String(), chars))
}

// renderChatML is llama.cpp's built-in ChatML.
func renderChatML(msgs []Message, addGen bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|im_start|>" + m.Role + "\n" + m.Content + "<|im_end|>\n")
	}
	if addGen {
		b.WriteString("<|im_start|>assistant\n")
	}
	return b.String()
}

// renderLlama3 is llama.cpp's built-in Llama 3 format (content trimmed of C isspace
// characters, no BOS: the tokenizer adds it).
func renderLlama3(msgs []Message, addGen bool) string {
	var b strings.Builder
	for _, m := range msgs {
		b.WriteString("<|start_header_id|>" + m.Role + "<|end_header_id|>\n\n" + strings.Trim(m.Content, " \t\n\v\f\r") + "<|eot_id|>")
	}
	if addGen {
		b.WriteString("<|start_header_id|>assistant<|end_header_id|>\n\n")
	}
	return b.String()
}
