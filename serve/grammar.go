package serve

import (
	"encoding/json"
	"strings"

	"github.com/kernelrt/kernelrt/grammar"
)

// Structured output: response_format (OpenAI's json_object and json_schema) and grammar
// (llama.cpp's server's GBNF string) become generate.Options.Grammar, so every token the
// server samples keeps the reply valid.

// responseFormat is the response_format field.
type responseFormat struct {
	Type       string          `json:"type"`
	JSONSchema *jsonSchemaSpec `json:"json_schema"`
}

// jsonSchemaSpec is response_format.json_schema. The schema is enforced whether or not
// strict is set (OpenAI's non-strict mode only tries).
type jsonSchemaSpec struct {
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Schema      json.RawMessage `json:"schema"`
	Strict      *bool           `json:"strict"`
}

// requestGrammar compiles response_format or grammar (at most one of them) into the grammar
// of the reply; nil when neither asks for one. A bad schema or grammar is a 400 naming the
// field.
func requestGrammar(rf *responseFormat, gbnf *string) (*grammar.Grammar, *apiError) {
	structured := rf != nil && rf.Type != "" && rf.Type != "text"
	if gbnf != nil && *gbnf != "" {
		if structured {
			return nil, badRequest("grammar", "invalid_value", "give at most one of grammar and a response_format of type %q", rf.Type)
		}
		g, err := grammar.Parse(*gbnf)
		if err != nil {
			return nil, badRequest("grammar", "invalid_value", "grammar: %s", strings.TrimPrefix(err.Error(), "grammar: "))
		}
		return g, nil
	}
	if !structured {
		return nil, nil
	}
	switch rf.Type {
	case "json_object":
		return grammar.JSONObject(), nil
	case "json_schema":
		if rf.JSONSchema == nil {
			return nil, badRequest("response_format.json_schema", "missing_required_parameter", "response_format.json_schema is required for type json_schema")
		}
		s := rf.JSONSchema.Schema
		if len(s) == 0 || string(s) == "null" {
			return nil, badRequest("response_format.json_schema.schema", "missing_required_parameter", "response_format.json_schema.schema is required")
		}
		g, err := grammar.FromJSONSchema(s)
		if err != nil {
			return nil, badRequest("response_format.json_schema.schema", "invalid_value", "response_format.json_schema.schema: %s", strings.TrimPrefix(err.Error(), "grammar: "))
		}
		return g, nil
	}
	return nil, badRequest("response_format.type", "unsupported_value", "response_format type %q is not supported (text, json_object or json_schema)", rf.Type)
}
