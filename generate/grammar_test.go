package generate

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/grammar"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/sample"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// TokenBytes makes byteTok usable with a grammar: bytes are themselves, specials nothing.
func (byteTok) TokenBytes(id int32) []byte {
	if id < 256 {
		return []byte{byte(id)}
	}
	return nil
}

// grammarModel is tinyModel with room for long constrained generations.
func grammarModel(t testing.TB) *orchestrator.Model {
	t.Helper()
	cfg := orchestrator.Config{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2,
		HeadDim: 32, Vocab: byteVocab, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 1024, MaxBatch: 16, KV: orchestrator.KVF32}
	m, err := orchestrator.NewSynthetic(cfg, orchestrator.RecipeQ8_0(), 11, orchestrator.BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// Schemas the random-weight model must fill validly. Strings and arrays are bounded so a
// random model ends them within the token budget.
var testSchemas = []string{
	`{"type":"object","properties":{"name":{"type":"string","maxLength":8},"age":{"type":"integer"},"ok":{"type":"boolean"},"none":{"type":"null"}},"required":["name","age","ok","none"],"additionalProperties":false}`,
	`{"type":"object","properties":{"color":{"enum":["red","green","blue"]},"tags":{"type":"array","items":{"type":"string","maxLength":4},"minItems":1,"maxItems":3},"score":{"type":"number"}},"required":["color","tags","score"]}`,
	`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string","const":"fixed"},"c":{"anyOf":[{"type":"integer"},{"type":"string","maxLength":3}]}},"required":["b"]}`,
	`{"$defs":{"item":{"type":"object","properties":{"id":{"type":"integer"},"next":{"anyOf":[{"$ref":"#/$defs/item"},{"type":"null"}]}},"required":["id","next"]}},"type":"array","items":{"$ref":"#/$defs/item"},"maxItems":2}`,
	`{"type":"array","items":{"oneOf":[{"type":"boolean"},{"type":"object","properties":{"d":{"type":"string","format":"date"}},"required":["d"]}]},"maxItems":4}`,
	`{"type":["string","null"],"minLength":2,"maxLength":6}`,
	`{"type":"object","properties":{"code":{"type":"string","pattern":"^[A-Z]{2}-\\d{3}$"},"w":{"type":"string","pattern":"^(\\w{1,8} ?){1,3}$"}},"required":["code","w"]}`,
	`{"type":"array","prefixItems":[{"type":"integer","minimum":-9,"maximum":9},{"enum":["x","y"]}],"items":{"type":"boolean"},"maxItems":4}`,
	`{"type":"object","properties":{"age":{"type":"integer","minimum":18,"maximum":99},"n":{"type":"integer","exclusiveMinimum":-3,"maximum":0},"x":{"type":"number","minimum":0}},"required":["age","n","x"]}`,
}

// TestGrammarSchemaOutput generates from a random-weight model under each schema with
// several seeds and sampler settings: every output must end at an end-of-generation
// token, parse with encoding/json and validate against the schema.
func TestGrammarSchemaOutput(t *testing.T) {
	g, err := New(grammarModel(t), kernelrt.Serial{}, byteTok{})
	if err != nil {
		t.Fatal(err)
	}
	d := sample.DefaultOptions()
	samplers := []sample.Options{{Temperature: 1}, {Temperature: 1.5, TopK: 40}, d, {}}
	for i, schema := range testSchemas {
		gr, err := grammar.FromJSONSchema([]byte(schema))
		if err != nil {
			t.Fatal(err)
		}
		var s any
		if err := json.Unmarshal([]byte(schema), &s); err != nil {
			t.Fatal(err)
		}
		for j, so := range samplers {
			so.Seed = uint64(100*i + j)
			text, err := g.Generate(context.Background(), "JSON:", Options{MaxTokens: 900, Grammar: gr, Sampling: so})
			if err != nil {
				t.Fatal(err)
			}
			if st := g.Stats().Stop; st != StopEOG {
				t.Fatalf("schema %d, sampler %d: stopped by %v after %d tokens: %q", i, j, st, g.Stats().GeneratedTokens, text)
			}
			var v any
			dec := json.NewDecoder(strings.NewReader(text))
			dec.UseNumber()
			if err := dec.Decode(&v); err != nil || dec.More() {
				t.Fatalf("schema %d, sampler %d: %q does not parse: %v", i, j, text, err)
			}
			if err := validate(s, v, s, "#"); err != nil {
				t.Fatalf("schema %d, sampler %d: %q: %v", i, j, text, err)
			}
			if j == 0 {
				t.Logf("schema %d: %q", i, text)
			}
		}
	}
}

// TestGrammarNoEOG checks the end of a constrained generation over a vocabulary without an
// end-of-generation token that the grammar can take: once the grammar is complete nothing
// is allowed and the generation ends without an error.
func TestGrammarNoEOG(t *testing.T) {
	gr, err := grammar.Parse(`root ::= "ok"`)
	if err != nil {
		t.Fatal(err)
	}
	m := newFake("xyz") // the model wants "xyz"; the grammar forces "ok"
	g, _ := New(m, kernelrt.Serial{}, byteTok{})
	bias := map[int32]float32{tEOS: float32(math.Inf(-1)), tIMEnd: float32(math.Inf(-1))}
	text, err := g.Generate(context.Background(), "p", Options{Grammar: gr, Sampling: sample.Options{LogitBias: bias}})
	if err != nil || text != "ok" || g.Stats().Stop != StopEOG {
		t.Fatalf("got %q, %v, stop %v; want \"ok\" ended by the grammar", text, err, g.Stats().Stop)
	}
	// A tokenizer without TokenBytes cannot take a grammar.
	if _, err := NewSequence(noBytesTok{}, byteVocab, Options{Grammar: gr}, func(string) bool { return true }); err == nil || !strings.Contains(err.Error(), "TokenBytes") {
		t.Fatalf("tokenizer without TokenBytes: %v", err)
	}
}

// noBytesTok is byteTok without TokenBytes.
type noBytesTok struct{}

func (noBytesTok) Encode(text string, a, p bool) ([]int32, error) {
	return byteTok{}.Encode(text, a, p)
}
func (noBytesTok) NewDecoder() Decoder { return &byteDec{} }
func (noBytesTok) IsEOG(id int32) bool { return byteTok{}.IsEOG(id) }

// validate checks value v (decoded with UseNumber) against schema s for the subset of
// JSON Schema that package grammar compiles; root resolves $ref.
func validate(s, v, root any, path string) error {
	if b, ok := s.(bool); ok {
		if !b {
			return fmt.Errorf("%s: schema false", path)
		}
		return nil
	}
	m := s.(map[string]any)
	if ref, ok := m["$ref"].(string); ok {
		target := root
		for _, p := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
			target = target.(map[string]any)[p]
		}
		return validate(target, v, root, path)
	}
	if alts, ok := m["anyOf"].([]any); ok {
		for _, a := range alts {
			if validate(a, v, root, path) == nil {
				return nil
			}
		}
		return fmt.Errorf("%s: %v matches no anyOf", path, v)
	}
	if alts, ok := m["oneOf"].([]any); ok {
		n := 0
		for _, a := range alts {
			if validate(a, v, root, path) == nil {
				n++
			}
		}
		if n != 1 {
			return fmt.Errorf("%s: %v matches %d of oneOf", path, v, n)
		}
		return nil
	}
	if c, ok := m["const"]; ok && !jsonEqual(c, v) {
		return fmt.Errorf("%s: %v is not the const %v", path, v, c)
	}
	if e, ok := m["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || jsonEqual(x, v)
		}
		if !found {
			return fmt.Errorf("%s: %v is not in the enum", path, v)
		}
	}
	if t, ok := m["type"]; ok {
		types, ok := t.([]any)
		if !ok {
			types = []any{t}
		}
		match := false
		for _, t := range types {
			match = match || typeOf(t.(string), v)
		}
		if !match {
			return fmt.Errorf("%s: %v is not of type %v", path, v, t)
		}
	}
	switch x := v.(type) {
	case json.Number:
		f, _ := x.Float64()
		if lo, ok := m["minimum"].(float64); ok && f < lo {
			return fmt.Errorf("%s: %v is below the minimum %v", path, x, lo)
		}
		if hi, ok := m["maximum"].(float64); ok && f > hi {
			return fmt.Errorf("%s: %v is above the maximum %v", path, x, hi)
		}
		if lo, ok := m["exclusiveMinimum"].(float64); ok && f <= lo {
			return fmt.Errorf("%s: %v is not above %v", path, x, lo)
		}
		if hi, ok := m["exclusiveMaximum"].(float64); ok && f >= hi {
			return fmt.Errorf("%s: %v is not below %v", path, x, hi)
		}
	case string:
		n := utf8.RuneCountInString(x)
		if lo, ok := m["minLength"].(float64); ok && n < int(lo) {
			return fmt.Errorf("%s: %q is shorter than %v", path, x, lo)
		}
		if hi, ok := m["maxLength"].(float64); ok && n > int(hi) {
			return fmt.Errorf("%s: %q is longer than %v", path, x, hi)
		}
		if p, ok := m["pattern"].(string); ok && !regexp.MustCompile(p).MatchString(x) {
			return fmt.Errorf("%s: %q does not match %s", path, x, p)
		}
		if f, _ := m["format"].(string); f == "date" {
			if _, err := time.Parse("2006-01-02", x); err != nil && !strings.Contains(err.Error(), "day out of range") {
				return fmt.Errorf("%s: %q is not a date: %v", path, x, err)
			}
		}
	case []any:
		if lo, ok := m["minItems"].(float64); ok && len(x) < int(lo) {
			return fmt.Errorf("%s: %d items, fewer than %v", path, len(x), lo)
		}
		if hi, ok := m["maxItems"].(float64); ok && len(x) > int(hi) {
			return fmt.Errorf("%s: %d items, more than %v", path, len(x), hi)
		}
		prefix := asList(m["prefixItems"])
		for i, e := range x {
			var sub any = true
			if i < len(prefix) {
				sub = prefix[i]
			} else if it, ok := m["items"]; ok {
				sub = it
			}
			if err := validate(sub, e, root, fmt.Sprintf("%s/%d", path, i)); err != nil {
				return err
			}
		}
	case map[string]any:
		props, _ := m["properties"].(map[string]any)
		for _, r := range asList(m["required"]) {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("%s: required property %q missing", path, r)
			}
		}
		for k, e := range x {
			ps, ok := props[k]
			if !ok {
				if ap, ok := m["additionalProperties"].(bool); ok && !ap {
					return fmt.Errorf("%s: property %q not allowed", path, k)
				}
				continue
			}
			if err := validate(ps, e, root, path+"/"+k); err != nil {
				return err
			}
		}
	}
	return nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

func typeOf(t string, v any) bool {
	switch x := v.(type) {
	case string:
		return t == "string"
	case bool:
		return t == "boolean"
	case nil:
		return t == "null"
	case []any:
		return t == "array"
	case map[string]any:
		return t == "object"
	case json.Number:
		if t == "number" {
			return true
		}
		_, err := x.Int64()
		return t == "integer" && err == nil
	}
	return false
}

// jsonEqual compares a schema value (decoded without UseNumber) and an instance value.
func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	var bb any
	y, _ := json.Marshal(b)
	json.Unmarshal(y, &bb)
	y, _ = json.Marshal(bb)
	return bytes.Equal(x, y)
}

// qwenTokenizer loads the test Qwen3 vocabulary (151,936 tokens) of package tokenizer.
func qwenTokenizer(tb testing.TB) *tokenizer.Tokenizer {
	raw, err := os.ReadFile("../tokenizer/testdata/qwen3.gguf.gz")
	if err != nil {
		tb.Skipf("the Qwen3 test vocabulary: %v", err)
	}
	z, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		tb.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		tb.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// benchSchema is a typical extraction schema. Its strings are bounded so that a random
// model moves through all of it within the benchmark's tokens (a random 150k vocabulary
// rarely closes an unbounded string), and a bounded string is the costly case: every
// length left is a different grammar state with its own full walk of the trie.
const benchSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":16},"age":{"type":"integer","minimum":0,"maximum":150},
"email":{"type":"string","maxLength":32},"tags":{"type":"array","items":{"type":"string","maxLength":10},"maxItems":3},
"address":{"type":"object","properties":{"street":{"type":"string","maxLength":24},"city":{"type":"string","maxLength":16}},"required":["street","city"]}},
"required":["name","age","email","tags","address"],"additionalProperties":false}`

// BenchmarkGrammar150k decodes from a Qwen2-0.5B-shaped random model over the real
// 151,936-token Qwen vocabulary with and without a JSON-schema grammar, interleaved, and
// reports both decode rates and the grammar's overhead.
func BenchmarkGrammar150k(b *testing.B) {
	tk := qwenTokenizer(b)
	tok := FromTokenizer(tk)
	cfg := orchestrator.Config{Layers: 24, Hidden: 896, Intermediate: 4864, Heads: 14, KVHeads: 2, HeadDim: 64,
		Vocab: tk.VocabSize(), RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 512, MaxBatch: 32, KV: orchestrator.KVF16}
	m, err := orchestrator.NewSynthetic(cfg, orchestrator.RecipeQ8_0(), 5, orchestrator.BuildOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	rt, err := kernelrt.New(kernelrt.Options{MaxCols: 4864, MaxCtx: 512})
	if err != nil {
		b.Fatal(err)
	}
	defer rt.Close()
	g, err := New(m, rt, tok)
	if err != nil {
		b.Fatal(err)
	}
	gr, err := grammar.FromJSONSchema([]byte(benchSchema))
	if err != nil {
		b.Fatal(err)
	}
	t0 := time.Now()
	if _, err := VocabFor(tok, tk.VocabSize()); err != nil {
		b.Fatal(err)
	}
	b.Logf("vocabulary trie built in %v", time.Since(t0))
	const n = 64
	var lastText string
	var free, constrained struct {
		toks int
		d    time.Duration
	}
	b.ResetTimer()
	for i := range b.N {
		for _, withGrammar := range []bool{false, true} {
			o := Options{MaxTokens: n, Sampling: sample.Options{Temperature: 1, Seed: uint64(i)}}
			if withGrammar {
				o.Grammar = gr
			}
			if err := g.Reset(); err != nil {
				b.Fatal(err)
			}
			text, err := g.Generate(context.Background(), "Extract the person as JSON:", o)
			if err != nil {
				b.Fatal(err)
			}
			st := g.Stats()
			acc := &free
			if withGrammar {
				acc = &constrained
				lastText = text
			}
			acc.toks += st.GeneratedTokens
			acc.d += st.GenerateTime
		}
	}
	b.StopTimer()
	// The grammar's own cost per token: a fresh constraint (nothing cached) follows the
	// re-tokenized constrained text, computing each token's mask; and one cold mask inside
	// a string, where nearly every token is allowed and the whole trie is walked.
	ids, err := tk.Encode(lastText, tokenizer.EncodeOptions{})
	if err != nil {
		b.Fatal(err)
	}
	v, _ := VocabFor(tok, tk.VocabSize())
	t1 := time.Now()
	c := grammar.NewConstraint(gr, v)
	for _, id := range ids {
		if _, err := c.Allowed(); err != nil {
			b.Fatal(err)
		}
		if err := c.Accept(id); err != nil {
			b.Fatal(err)
		}
	}
	perTok := time.Since(t1) / time.Duration(max(len(ids), 1))
	c = grammar.NewConstraint(gr, v)
	open, _ := tk.Encode(`{"name":"`, tokenizer.EncodeOptions{})
	for _, id := range open { // into the first string
		c.Allowed()
		if err := c.Accept(id); err != nil {
			b.Fatal(err)
		}
	}
	t2 := time.Now()
	mask, _ := c.Allowed()
	walk := time.Since(t2)
	allowed := 0
	for _, w := range mask {
		allowed += bits.OnesCount64(w)
	}
	b.Logf("constrained text %q; cold mask inside the first string: %d of %d tokens allowed (trie of %d nodes), %v", lastText, allowed, tk.VocabSize(), v.Nodes(), walk)
	b.ReportMetric(float64(perTok.Microseconds())/1000, "ms/tok-mask-cold")
	b.ReportMetric(float64(walk.Microseconds())/1000, "ms-full-walk")
	fr := float64(free.toks) / free.d.Seconds()
	cr := float64(constrained.toks) / constrained.d.Seconds()
	b.ReportMetric(fr, "tok/s-free")
	b.ReportMetric(cr, "tok/s-grammar")
	b.ReportMetric(100*(1-cr/fr), "%-slower")
}

// TestVocabFor checks that a vocabulary's trie is built once per tokenizer and size, and
// that a tokenizer of a non-comparable type still works, uncached.
func TestVocabFor(t *testing.T) {
	a, err := VocabFor(byteTok{}, byteVocab)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := VocabFor(byteTok{}, byteVocab)
	c, _ := VocabFor(byteTok{noTemplate: true}, byteVocab)
	if a != b || a == c || a.Size() != byteVocab || len(a.EOG()) != 2 {
		t.Fatalf("cache: %p %p %p, size %d, EOG %v", a, b, c, a.Size(), a.EOG())
	}
	x, err := VocabFor(sliceTok{byteTok: byteTok{}, extra: []int{1}}, byteVocab)
	y, _ := VocabFor(sliceTok{byteTok: byteTok{}, extra: []int{1}}, byteVocab)
	if err != nil || x == nil || x == y {
		t.Fatalf("non-comparable tokenizer: %v, %p %p", err, x, y)
	}
	// A comparable type holding a value that is not: == would panic.
	p, err := VocabFor(ifaceTok{byteTok{}, []int{1}}, byteVocab)
	q, _ := VocabFor(ifaceTok{byteTok{}, []int{1}}, byteVocab)
	if err != nil || p == nil || p == q {
		t.Fatalf("tokenizer holding a slice in an interface: %v, %p %p", err, p, q)
	}
	if _, err := VocabFor(byteTok{}, 0); err == nil {
		t.Error("size 0 accepted")
	}
}

// sliceTok is a tokenizer whose type is not comparable.
type sliceTok struct {
	byteTok
	extra []int
}

// ifaceTok is of a comparable type, but its value is not comparable.
type ifaceTok struct {
	byteTok
	v any
}

// TestSequenceGrammar drives a Sequence by hand: whatever the logits prefer, the tokens
// follow the grammar, and GrammarComplete says when the text is a sentence.
func TestSequenceGrammar(t *testing.T) {
	gr, err := grammar.Parse(`root ::= "a" [0-9]`)
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	seq, err := NewSequence(byteTok{}, byteVocab, Options{Grammar: gr}, func(s string) bool { text.WriteString(s); return true })
	if err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, byteVocab)
	logits['z'], logits['7'], logits[tEOS] = 9, 5, 8 // greedy: z, else EOS, else 7
	var ids []int32
	for range 5 {
		id, stop, err := seq.Next(logits)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
		if stop != StopNone {
			if stop != StopEOG || !seq.GrammarComplete() {
				t.Fatalf("stop %v, complete %v", stop, seq.GrammarComplete())
			}
			break
		}
		if seq.GrammarComplete() != (len(ids) == 2) {
			t.Fatalf("after %v: complete %v", ids, seq.GrammarComplete())
		}
	}
	if text.String() != "a7" || len(ids) != 3 || ids[2] != tEOS {
		t.Fatalf("text %q, ids %v; want \"a7\" then EOS", text.String(), ids)
	}
}
