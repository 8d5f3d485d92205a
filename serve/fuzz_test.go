package serve

import (
	"testing"
)

// FuzzDecodeRequest feeds arbitrary bodies to the request decoders of both generation
// endpoints and of /v1/embeddings: they answer a Request or an error naming a field, never
// panic, and what they accept keeps the limits the engine relies on.
func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"hi"}],"max_tokens":4,"logprobs":true,"top_logprobs":3}`,
		`{"prompt":"x","logprobs":5,"stop":["a","b"],"temperature":0.5,"top_p":0.9,"seed":1}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"tools":` + weatherTools + `,"tool_choice":"required"}`,
		`{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
		`{"prompt":[1,2,3],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object"}}}}`,
		`{"prompt":"x","grammar":"root ::= \"a\"+"}`,
		`{"input":["a","b"],"encoding_format":"base64"}`,
		`{"input":[[1,2],[3]]}`,
		`{"messages":[],"logit_bias":{"1":-100}}`,
		`[1,2]`, `null`, `{"max_tokens":-1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var c chatRequest
		if decodeJSON(body, &c) == nil {
			if r, err := c.request(); err == nil {
				checkAccepted(t, r, body)
				if len(r.Messages) == 0 {
					t.Fatalf("%q: a chat request without messages was accepted", body)
				}
			} else if err.status != 400 {
				t.Fatalf("%q: status %d", body, err.status)
			}
		}
		var p completionRequest
		if decodeJSON(body, &p) == nil {
			if r, err := p.request(); err == nil {
				checkAccepted(t, r, body)
				if r.Prompt == "" && len(r.Tokens) == 0 {
					t.Fatalf("%q: a completion without a prompt was accepted", body)
				}
			} else if err.status != 400 {
				t.Fatalf("%q: status %d", body, err.status)
			}
		}
		var e embeddingRequest
		_ = decodeJSON(body, &e) // must not panic; inputs need a tokenizer, tested elsewhere
	})
}

func checkAccepted(t *testing.T, r Request, body []byte) {
	t.Helper()
	if r.TopLogprobs < 0 || r.TopLogprobs > MaxTopLogprobs || r.TopLogprobs > 0 && !r.Logprobs {
		t.Fatalf("%q: TopLogprobs %d (Logprobs %v) accepted", body, r.TopLogprobs, r.Logprobs)
	}
	if r.Options.MaxTokens < 0 {
		t.Fatalf("%q: MaxTokens %d accepted", body, r.Options.MaxTokens)
	}
	if len(r.Tools) > MaxTools {
		t.Fatalf("%q: %d tools accepted", body, len(r.Tools))
	}
	switch r.ToolChoice {
	case "", "auto", "none", "required":
	default:
		t.Fatalf("%q: ToolChoice %q accepted", body, r.ToolChoice)
	}
}
