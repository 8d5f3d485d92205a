package serve

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/sample"
)

// The OpenAI wire format: request bodies, their checks and their mapping onto a Request,
// and the response and chunk bodies. Fields the API has and kernelrt does not implement
// (n > 1, echo, best_of > 1, suffix, tools) are refused with a 400 naming them,
// so a client never gets an answer that silently ignored what it asked for; fields that do
// not change the answer (user, metadata, ...) are accepted and ignored.

// apiError is an OpenAI-style error: the body {"error": {...}} with an HTTP status.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func strp(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

// badRequest is a 400 invalid_request_error naming param (the JSON field) and code.
func badRequest(param, code, format string, a ...any) *apiError {
	return &apiError{status: 400, Message: fmt.Sprintf(format, a...), Type: "invalid_request_error", Param: strp(param), Code: strp(code)}
}

// samplingParams are the sampling fields both endpoints share; top_k, min_p,
// repeat_penalty and ignore_eos are llama.cpp's server's extensions.
type samplingParams struct {
	Model            string             `json:"model"`
	MaxTokens        *int               `json:"max_tokens"`
	Temperature      *float64           `json:"temperature"`
	TopP             *float64           `json:"top_p"`
	N                *int               `json:"n"`
	Stream           bool               `json:"stream"`
	StreamOptions    *streamOptions     `json:"stream_options"`
	Stop             json.RawMessage    `json:"stop"`
	Seed             *int64             `json:"seed"`
	PresencePenalty  *float64           `json:"presence_penalty"`
	FrequencyPenalty *float64           `json:"frequency_penalty"`
	LogitBias        map[string]float64 `json:"logit_bias"`
	User             string             `json:"user"`
	TopK             *int               `json:"top_k"`
	MinP             *float64           `json:"min_p"`
	RepeatPenalty    *float64           `json:"repeat_penalty"`
	RepeatLastN      *int               `json:"repeat_last_n"`
	IgnoreEOS        bool               `json:"ignore_eos"`
	// Structured output (grammar.go): OpenAI's response_format, llama.cpp's grammar.
	ResponseFormat *responseFormat `json:"response_format"`
	Grammar        *string         `json:"grammar"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// completionRequest is POST /v1/completions.
type completionRequest struct {
	samplingParams
	Prompt   json.RawMessage `json:"prompt"`
	Echo     bool            `json:"echo"`
	Logprobs *int            `json:"logprobs"`
	BestOf   *int            `json:"best_of"`
	Suffix   *string         `json:"suffix"`
}

// chatRequest is POST /v1/chat/completions.
type chatRequest struct {
	samplingParams
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Tools               json.RawMessage `json:"tools"`
	ToolChoice          json.RawMessage `json:"tool_choice"`
	ParallelToolCalls   *bool           `json:"parallel_tool_calls"`
	// tools: request() found tools the template shows, so the reply is parsed for calls.
	tools bool
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCalls  json.RawMessage `json:"tool_calls"`
	ToolCallID string          `json:"tool_call_id"`
	Name       string          `json:"name"`
}

// decodeJSON reads one JSON object into v; errors name the field of a wrong type.
func decodeJSON(body []byte, v any) *apiError {
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		var te *json.UnmarshalTypeError
		var se *json.SyntaxError
		switch {
		case errors.As(err, &te):
			field := strings.TrimPrefix(te.Field, "samplingParams.") // the embedded struct's fields are the body's
			if field == "" {
				field = "body"
			}
			return badRequest(field, "invalid_type", "%s: expected %s, got JSON %s", field, jsonType(te.Type.String()), te.Value)
		case errors.As(err, &se):
			return badRequest("", "invalid_json", "the request body is not valid JSON: %v (at byte %d)", err, se.Offset)
		}
		return badRequest("", "invalid_json", "the request body is not a JSON object: %v", err)
	}
	if dec.More() {
		return badRequest("", "invalid_json", "the request body holds more than one JSON value")
	}
	return nil
}

// jsonType names a Go type as the JSON a client should have sent.
func jsonType(goType string) string {
	switch {
	case strings.HasPrefix(goType, "*"):
		return jsonType(goType[1:])
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "int") || strings.HasPrefix(goType, "uint"):
		return "an integer"
	case strings.HasPrefix(goType, "float"):
		return "a number"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "map") || strings.Contains(goType, "struct") || strings.Contains(goType, "."):
		return "an object"
	}
	return goType
}

// options maps the sampling fields onto generate.Options, checking each against the
// OpenAI API's ranges. Unset fields take llama.cpp's server defaults (sample.DefaultOptions:
// temperature 0.8, top_k 40, top_p 0.95, min_p 0.05); temperature 0 is greedy. maxTokens is
// max_tokens (or chat's max_completion_tokens), defMax the value when it is unset (0 = up to
// the context).
func (p *samplingParams) options(maxTokens *int, defMax int) (generate.Options, *apiError) {
	var o generate.Options
	if p.N != nil && *p.N != 1 {
		return o, badRequest("n", "unsupported_value", "n = %d: only n = 1 is supported", *p.N)
	}
	o.MaxTokens = defMax
	if maxTokens != nil {
		if *maxTokens < 1 {
			return o, badRequest("max_tokens", "invalid_value", "max_tokens must be at least 1, got %d", *maxTokens)
		}
		o.MaxTokens = *maxTokens
	}
	s := sample.DefaultOptions()
	rangeErr := func(name string, v, lo, hi float64) *apiError {
		if math.IsNaN(v) || v < lo || v > hi {
			return badRequest(name, "invalid_value", "%s must be between %g and %g, got %g", name, lo, hi, v)
		}
		return nil
	}
	if p.Temperature != nil {
		if err := rangeErr("temperature", *p.Temperature, 0, 2); err != nil {
			return o, err
		}
		s.Temperature = float32(*p.Temperature)
	}
	if p.TopP != nil {
		if err := rangeErr("top_p", *p.TopP, 0, 1); err != nil {
			return o, err
		}
		s.TopP = float32(*p.TopP)
	}
	if p.MinP != nil {
		if err := rangeErr("min_p", *p.MinP, 0, 1); err != nil {
			return o, err
		}
		s.MinP = float32(*p.MinP)
	}
	if p.TopK != nil {
		if *p.TopK < 0 {
			return o, badRequest("top_k", "invalid_value", "top_k must be >= 0 (0 keeps every token), got %d", *p.TopK)
		}
		s.TopK = *p.TopK
	}
	if p.PresencePenalty != nil {
		if err := rangeErr("presence_penalty", *p.PresencePenalty, -2, 2); err != nil {
			return o, err
		}
		s.PresencePenalty = float32(*p.PresencePenalty)
	}
	if p.FrequencyPenalty != nil {
		if err := rangeErr("frequency_penalty", *p.FrequencyPenalty, -2, 2); err != nil {
			return o, err
		}
		s.FrequencyPenalty = float32(*p.FrequencyPenalty)
	}
	if p.RepeatPenalty != nil {
		if err := rangeErr("repeat_penalty", *p.RepeatPenalty, 0, 10); err != nil {
			return o, err
		}
		s.RepeatPenalty = float32(*p.RepeatPenalty)
	}
	if p.RepeatLastN != nil {
		if *p.RepeatLastN < 0 || *p.RepeatLastN > 1<<16 {
			return o, badRequest("repeat_last_n", "invalid_value", "repeat_last_n must be 0 to 65536, got %d", *p.RepeatLastN)
		}
		s.PenaltyLastN = *p.RepeatLastN
	}
	if len(p.LogitBias) > 0 {
		s.LogitBias = make(map[int32]float32, len(p.LogitBias))
		for k, v := range p.LogitBias {
			id, err := strconv.ParseInt(k, 10, 32)
			if err != nil || id < 0 {
				return o, badRequest("logit_bias", "invalid_value", "logit_bias key %q is not a token id", k)
			}
			if err := rangeErr("logit_bias", v, -100, 100); err != nil {
				return o, err
			}
			b := float32(v)
			if v <= -100 { // OpenAI: -100 "should result in a ban"
				b = float32(math.Inf(-1))
			}
			s.LogitBias[int32(id)] = b
		}
	}
	if p.Seed != nil {
		s.Seed = uint64(*p.Seed)
	} else {
		s.Seed = rand.Uint64()
	}
	o.Sampling = s
	stops, err := parseStop(p.Stop)
	if err != nil {
		return o, err
	}
	o.Stop = stops
	if o.Grammar, err = requestGrammar(p.ResponseFormat, p.Grammar); err != nil {
		return o, err
	}
	return o, nil
}

// parseStop reads stop: null, a string, or an array of up to 4 strings; empty strings stop
// nothing and are dropped.
func parseStop(raw json.RawMessage) ([]string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var one string
	if json.Unmarshal(raw, &one) == nil {
		if one == "" {
			return nil, nil
		}
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(raw, &many); err != nil {
		return nil, badRequest("stop", "invalid_type", "stop must be a string or an array of strings")
	}
	if len(many) > 4 {
		return nil, badRequest("stop", "invalid_value", "stop holds %d strings, at most 4 are allowed", len(many))
	}
	var out []string
	for _, s := range many {
		if s != "" {
			out = append(out, s)
		}
	}
	return out, nil
}

// request maps a completions body onto a Request (max_tokens defaults to 16, as the OpenAI
// API's does).
func (c *completionRequest) request() (Request, *apiError) {
	var r Request
	switch {
	case c.Echo:
		return r, badRequest("echo", "unsupported_value", "echo is not supported")
	case c.Logprobs != nil && (*c.Logprobs < 0 || *c.Logprobs > MaxTopLogprobs):
		return r, badRequest("logprobs", "invalid_value", "logprobs must be 0 to %d, got %d", MaxTopLogprobs, *c.Logprobs)
	case c.BestOf != nil && *c.BestOf != 1:
		return r, badRequest("best_of", "unsupported_value", "best_of = %d: only 1 is supported", *c.BestOf)
	case c.Suffix != nil && *c.Suffix != "":
		return r, badRequest("suffix", "unsupported_value", "suffix (insertion) is not supported")
	}
	o, err := c.options(c.MaxTokens, 16)
	if err != nil {
		return r, err
	}
	r.Options, r.IgnoreEOS = o, c.IgnoreEOS
	if c.Logprobs != nil {
		r.Logprobs, r.TopLogprobs = true, *c.Logprobs
	}
	if r.Prompt, r.Tokens, err = parsePrompt(c.Prompt); err != nil {
		return r, err
	}
	return r, nil
}

// parsePrompt reads prompt: a string, an array of one string, an array of token ids, or an
// array of one array of token ids (several prompts in one request are not supported).
func parsePrompt(raw json.RawMessage) (string, []int32, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil, badRequest("prompt", "missing_required_parameter", "prompt is required")
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s == "" {
			return "", nil, badRequest("prompt", "invalid_value", "prompt is empty")
		}
		return s, nil, nil
	}
	var ids []int32
	if json.Unmarshal(raw, &ids) == nil {
		if len(ids) == 0 {
			return "", nil, badRequest("prompt", "invalid_value", "prompt is empty")
		}
		return "", ids, nil
	}
	var list []json.RawMessage
	if err := json.Unmarshal(raw, &list); err != nil {
		return "", nil, badRequest("prompt", "invalid_type", "prompt must be a string, an array of token ids, or an array of one of those")
	}
	if len(list) != 1 {
		return "", nil, badRequest("prompt", "unsupported_value", "prompt holds %d prompts: one prompt per request is supported", len(list))
	}
	if json.Unmarshal(list[0], &s) == nil {
		if s == "" {
			return "", nil, badRequest("prompt", "invalid_value", "prompt is empty")
		}
		return s, nil, nil
	}
	if json.Unmarshal(list[0], &ids) == nil && len(ids) > 0 {
		return "", ids, nil
	}
	return "", nil, badRequest("prompt", "invalid_type", "prompt[0] must be a string or a non-empty array of token ids")
}

// request maps a chat body onto a Request (no max_tokens: up to the context).
func (c *chatRequest) request() (Request, *apiError) {
	var r Request
	switch {
	case c.TopLogprobs != nil && (*c.TopLogprobs < 0 || *c.TopLogprobs > MaxTopLogprobs):
		return r, badRequest("top_logprobs", "invalid_value", "top_logprobs must be 0 to %d, got %d", MaxTopLogprobs, *c.TopLogprobs)
	case c.TopLogprobs != nil && *c.TopLogprobs > 0 && (c.Logprobs == nil || !*c.Logprobs):
		return r, badRequest("top_logprobs", "invalid_value", "top_logprobs needs logprobs: true")
	case len(c.Messages) == 0:
		return r, badRequest("messages", "missing_required_parameter", "messages is required and must not be empty")
	}
	maxTok := c.MaxCompletionTokens
	if maxTok == nil {
		maxTok = c.MaxTokens
	}
	o, err := c.options(maxTok, 0)
	if err != nil {
		return r, err
	}
	r.Options, r.IgnoreEOS = o, c.IgnoreEOS
	if c.Logprobs != nil && *c.Logprobs {
		r.Logprobs = true
		if c.TopLogprobs != nil {
			r.TopLogprobs = *c.TopLogprobs
		}
	}
	r.Messages = make([]chat.Message, len(c.Messages))
	for i, m := range c.Messages {
		param := fmt.Sprintf("messages[%d]", i)
		if m.Role == "" {
			return r, badRequest(param+".role", "missing_required_parameter", "%s.role is required", param)
		}
		role := m.Role
		if role == "developer" { // OpenAI's newer name for the system role
			role = "system"
		}
		text, err := messageText(m.Content, param+".content")
		if err != nil {
			return r, err
		}
		calls, err := messageToolCalls(m.ToolCalls, param+".tool_calls")
		if err != nil {
			return r, err
		}
		r.Messages[i] = chat.Message{Role: role, Content: text, ToolCalls: calls, ToolCallID: m.ToolCallID, Name: m.Name}
	}
	tc, err := parseToolChoice(c.Tools, c.ToolChoice, c.ParallelToolCalls)
	if err != nil {
		return r, err
	}
	if tc != nil {
		r.Tools, r.ToolChoice, r.SingleToolCall = tc.offered(), tc.mode, !tc.parallel
		c.tools = len(r.Tools) > 0
	}
	return r, nil
}

// messageText reads a message's content: a string, null, or an array of text parts.
func messageText(raw json.RawMessage, param string) (string, *apiError) {
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", badRequest(param, "invalid_type", "%s must be a string or an array of content parts", param)
	}
	var b strings.Builder
	for j, p := range parts {
		if p.Type != "text" {
			return "", badRequest(fmt.Sprintf("%s[%d].type", param, j), "unsupported_value", "content part type %q is not supported (only text)", p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), nil
}

// usage is OpenAI's token counts; cached_tokens are the prompt tokens reused from a slot.
type usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageOf(r Result) *usage {
	u := &usage{PromptTokens: r.PromptTokens, CompletionTokens: r.GeneratedTokens, TotalTokens: r.PromptTokens + r.GeneratedTokens}
	u.PromptTokensDetails.CachedTokens = r.ReusedTokens
	return u
}

// Response and chunk bodies. finish_reason is null until the end (a *string).
type (
	completionChoice struct {
		Text         string  `json:"text"`
		Index        int     `json:"index"`
		Logprobs     any     `json:"logprobs"`
		FinishReason *string `json:"finish_reason"`
	}
	completionBody struct {
		ID      string             `json:"id"`
		Object  string             `json:"object"`
		Created int64              `json:"created"`
		Model   string             `json:"model"`
		Choices []completionChoice `json:"choices"`
		Usage   *usage             `json:"usage,omitempty"`
	}
	chatDelta struct {
		Role      string        `json:"role,omitempty"`
		Content   *string       `json:"content,omitempty"`
		ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
	}
	// replyMessage is a whole reply's message: unlike a stream chunk's delta it always has
	// content, null when the reply is only tool calls, as OpenAI's schema has it.
	replyMessage struct {
		Role      string        `json:"role"`
		Content   *string       `json:"content"`
		ToolCalls []toolCallOut `json:"tool_calls,omitempty"`
	}
	chatChoice struct {
		Index        int           `json:"index"`
		Message      *replyMessage `json:"message,omitempty"`
		Delta        *chatDelta    `json:"delta,omitempty"`
		Logprobs     any           `json:"logprobs"`
		FinishReason *string       `json:"finish_reason"`
	}
	chatBody struct {
		ID      string       `json:"id"`
		Object  string       `json:"object"`
		Created int64        `json:"created"`
		Model   string       `json:"model"`
		Choices []chatChoice `json:"choices"`
		Usage   *usage       `json:"usage,omitempty"`
	}
)
