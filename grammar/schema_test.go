package grammar

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

func mustSchema(t *testing.T, schema string) *Grammar {
	t.Helper()
	g, err := FromJSONSchema([]byte(schema))
	if err != nil {
		t.Fatalf("FromJSONSchema(%s): %v", schema, err)
	}
	return g
}

// TestSchemaKeywords compiles a schema per keyword and checks documents it must accept and
// reject.
func TestSchemaKeywords(t *testing.T) {
	cases := []struct {
		schema  string
		yes, no []string
	}{
		{`{"type":"string"}`, []string{`"abc"`, `""`, `"a\"b\\c\u00e9\n"`, `"日本"`}, []string{`abc`, `"a`, "\"a\nb\"", `"\x"`, `1`}},
		{`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"abc"`, `"日本"`, `"\n\t"`}, []string{`"a"`, `"abcd"`}},
		{`{"type":"string","enum":["red","green"]}`, []string{`"red"`, `"green"`}, []string{`"blue"`, `"re"`}},
		{`{"type":"string","const":"x<y"}`, []string{`"x<y"`}, []string{`"x\u003cy"`, `"x"`}},
		{`{"type":"number"}`, []string{`0`, `-1.5`, `3e10`, `2.25E-3`, `123456`}, []string{`01`, `1.`, `.5`, `+1`, `"1"`, `1e`}},
		{`{"type":"integer"}`, []string{`0`, `-7`, `42`}, []string{`1.0`, `-`, `007`}},
		{`{"type":"boolean"}`, []string{`true`, `false`}, []string{`True`, `1`}},
		{`{"type":"null"}`, []string{`null`}, []string{`nil`, `""`}},
		{`{"type":["integer","null"]}`, []string{`1`, `null`}, []string{`"1"`}},
		{`{"enum":[1,"a",null,true,{"k":[1,2]}]}`, []string{`1`, `"a"`, `null`, `true`, `{"k":[1,2]}`}, []string{`2`, `false`}},
		{`{"const":{"a":1}}`, []string{`{"a":1}`}, []string{`{"a":2}`}},
		{ // strict-mode object: all required, in order, no extras
			`{"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`,
			[]string{`{"name":"Al","age":3}`, `{ "name" : "Al" ,"age":3 }`, "{\n  \"name\": \"Al\",\n  \"age\": 3\n}"},
			[]string{`{"age":3,"name":"Al"}`, `{"name":"Al"}`, `{"name":"Al","age":3,"x":1}`, `{}`},
		},
		{ // optional properties, in order, any subset
			`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"integer"},"c":{"type":"integer"}},"required":["b"]}`,
			[]string{`{"b":1}`, `{"a":1,"b":2}`, `{"b":1,"c":2}`, `{"a":1,"b":2,"c":3}`},
			[]string{`{}`, `{"a":1}`, `{"a":1,"c":3}`, `{"b":1,}`, `{,"b":1}`, `{"c":1,"b":2}`},
		},
		{`{"type":"object","properties":{"a":{"type":"integer"}}}`, []string{`{}`, `{"a":1}`}, []string{`{"b":1}`}},
		{`{"type":"object"}`, []string{`{}`, `{"x":[1,{"y":null}],"z":"s"}`}, []string{`[]`, `{"x"}`, `{x:1}`}},
		{`{"type":"object","additionalProperties":{"type":"integer"}}`, []string{`{}`, `{"a":1,"b":2}`}, []string{`{"a":"s"}`}},
		{`{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":3}`, []string{`[1]`, `[1,2,3]`, `[ 1 , 2 ]`}, []string{`[]`, `[1,2,3,4]`, `["a"]`, `[1,]`}},
		{`{"type":"array","items":{"type":"boolean"}}`, []string{`[]`, `[true,false,true]`}, []string{`[1]`}},
		{`{"type":"array","maxItems":0}`, []string{`[]`}, []string{`[1]`}},
		{`{"type":"array"}`, []string{`[]`, `[1,"a",[{}]]`}, nil},
		{`{"type":"array","items":false}`, []string{`[]`}, []string{`[1]`}},
		{ // a tuple, as pydantic writes tuple[int, str]
			`{"type":"array","prefixItems":[{"type":"integer"},{"type":"string"}],"minItems":2,"maxItems":2}`,
			[]string{`[1,"a"]`, `[ 1 , "a" ]`}, []string{`[1]`, `["a",1]`, `[1,"a",2]`},
		},
		{`{"prefixItems":[{"type":"boolean"}],"items":{"type":"integer"},"maxItems":3}`, []string{`[true]`, `[true,1,2]`}, []string{`[true,1,2,3]`, `[1]`}},
		{`{"prefixItems":[{"type":"null"}],"minItems":2}`, []string{`[null,{}]`, `[null,1]`}, []string{`[null]`}},
		{`{"anyOf":[{"type":"integer"},{"type":"string","maxLength":1}]}`, []string{`1`, `"a"`}, []string{`"ab"`, `true`}},
		{`{"oneOf":[{"type":"boolean"},{"type":"null"}]}`, []string{`true`, `null`}, []string{`1`}},
		{`{"allOf":[{"type":"integer"}],"description":"n"}`, []string{`1`}, []string{`"1"`}},
		{`{"type":"string","format":"date"}`, []string{`"2024-02-29"`}, []string{`"2024-13-01"`, `"24-01-01"`}},
		{`{"type":"string","format":"date-time"}`, []string{`"2024-02-29T12:30:00Z"`, `"2024-02-29T23:59:59.123+02:00"`}, []string{`"2024-02-29 12:30:00Z"`}},
		{`{"type":"string","format":"uuid"}`, []string{`"123e4567-e89b-12d3-a456-426614174000"`}, []string{`"123e4567"`}},
		{`{"type":"string","format":"email"}`, []string{`"anything"`}, nil}, // an annotation
		{ // $defs and definitions, non-recursive
			`{"$defs":{"pt":{"type":"object","properties":{"x":{"type":"integer"}},"required":["x"]}},"definitions":{"n":{"type":"null"}},
			  "type":"object","properties":{"p":{"$ref":"#/$defs/pt"},"q":{"$ref":"#/definitions/n"}},"required":["p","q"]}`,
			[]string{`{"p":{"x":1},"q":null}`}, []string{`{"p":{},"q":null}`},
		},
		{ // recursive: a tree
			`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v","kids"]}},"$ref":"#/$defs/node"}`,
			[]string{`{"v":1,"kids":[]}`, `{"v":1,"kids":[{"v":2,"kids":[{"v":3,"kids":[]}]}]}`}, []string{`{"v":1}`, `{"v":1,"kids":[{}]}`},
		},
		{ // recursion through the root
			`{"type":"object","properties":{"next":{"anyOf":[{"$ref":"#"},{"type":"null"}]}},"required":["next"]}`,
			[]string{`{"next":null}`, `{"next":{"next":null}}`}, []string{`{}`},
		},
		{`{"properties":{"a~b/c":{"type":"integer"}},"required":["a~b/c"]}`, []string{`{"a~b/c":1}`}, nil},
		{`true`, []string{`1`, `{"a":[]}`}, nil},
		{`{}`, []string{`"x"`, `null`}, nil},
		// Keywords of one type without a type generate that type (a subset of the valid).
		{`{"minimum":3}`, []string{`3`, `40`}, []string{`2`, `"a"`, `3.5`}},
		{`{"maxLength":1}`, []string{`"a"`}, []string{`"ab"`, `1`}},
	}
	for _, c := range cases {
		g := mustSchema(t, c.schema)
		for _, s := range c.yes {
			if !json.Valid([]byte(s)) {
				t.Fatalf("test bug: %s is not JSON", s)
			}
			if !accepts(g, s) {
				src, _ := JSONSchemaGBNF([]byte(c.schema))
				t.Errorf("%s: rejects %s\n%s", c.schema, s, src)
			}
		}
		for _, s := range c.no {
			if accepts(g, s) {
				t.Errorf("%s: accepts %s", c.schema, s)
			}
		}
	}
}

// TestSchemaErrors checks that unsupported or malformed schemas are refused, naming the
// keyword and where it is.
func TestSchemaErrors(t *testing.T) {
	cases := []struct{ schema, want string }{
		{`{"type":"string","pattern":"^(?=a)b"}`, `schema at #/pattern: pattern at offset 2: lookaround`},
		{`{"type":"string","pattern":"(a)\\1"}`, `backreference`},
		{`{"type":"string","pattern":"a\\b"}`, `boundary`},
		{`{"type":"string","pattern":"a^b"}`, `anchor ^`},
		{`{"type":"string","pattern":"[a"}`, `unterminated character class`},
		{`{"type":"string","pattern":"a**"}`, `nothing to repeat`},
		{`{"type":"string","pattern":"(a"}`, `unclosed (`},
		{`{"type":"string","pattern":"a{3,1}"}`, `maximum below its minimum`},
		{`{"type":"string","pattern":"a","maxLength":3}`, `maxLength with pattern`},
		{`{"type":"string","pattern":"\\ud83d\\ude00"}`, `surrogate escape \uD83D`},
		{`{"type":"object","properties":{"n":{"type":"integer","multipleOf":2}}}`, `schema at #/properties/n: keyword "multipleOf" is not supported`},
		{`{"type":"array","uniqueItems":true}`, `uniqueItems`},
		{`{"type":"array","contains":{}}`, `"contains" is not supported`},
		{`{"prefixItems":[{},{}],"maxItems":1}`, `maxItems 1 below the 2 prefixItems`},
		{`{"prefixItems":[{}],"items":false,"minItems":2}`, `items is false`},
		{`{"items":false,"minItems":1}`, `matches nothing`},
		{`{"not":{}}`, `"not" is not supported`},
		{`{"allOf":[{},{}]}`, `allOf of 2 schemas`},
		{`{"type":"strng"}`, `unknown type "strng"`},
		{`{"type":[]}`, `non-empty list`},
		{`{"$ref":"#/$defs/missing"}`, `does not resolve`},
		{`{"$ref":"http://x/y.json"}`, `only references into the schema itself`},
		{`{"$ref":"#/$defs/a","type":"string"}`, `"type" next to $ref`},
		{`{"anyOf":[]}`, `non-empty array`},
		{`{"anyOf":[{"type":"integer"}],"type":"integer"}`, `next to anyOf`},
		{`{"enum":[]}`, `non-empty array`},
		{`{"type":"string","enum":[1,2]}`, `no value is of the schema's type`},
		{`{"type":"integer","const":"a"}`, `const "a" is not of the schema's type`},
		{`{"type":"array","minItems":-1}`, `minItems: must be a non-negative integer`},
		{`{"type":"array","minItems":3,"maxItems":2}`, `maxItems 2 is below minItems 3`},
		{`{"type":"array","maxItems":100000}`, `over the limit`},
		{`{"type":"string","minLength":1.5}`, `minLength: must be a non-negative integer`},
		{`{"type":"object","additionalProperties":1}`, `additionalProperties: must be a boolean or a schema`},
		{`false`, `matches nothing`},
		{`[1]`, `must be an object or a boolean`},
		{`{"type":"string"`, `not valid JSON`},
		{`{"a":1,"a":2}`, `duplicate key`},
		{`{"type":"object"} x`, `not valid JSON`},
		{strings.Repeat(`{"items":`, 70) + `{}` + strings.Repeat(`}`, 70), `nested more than 64 deep`},
		{ // no finite instance: a required recursion
			`{"type":"object","properties":{"c":{"$ref":"#"}},"required":["c"]}`, `no finite text`,
		},
	}
	for _, c := range cases {
		_, err := FromJSONSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("FromJSONSchema(%.80s) = %v, want an error containing %q", c.schema, err, c.want)
		}
	}
}

// TestJSONObject checks the json_object grammar.
func TestJSONObject(t *testing.T) {
	g := JSONObject()
	for _, s := range []string{`{}`, `{"a":{"b":[1,2.5,-3e2,true,null,"x"]}}`} {
		if !accepts(g, s) {
			t.Errorf("rejects %s", s)
		}
	}
	for _, s := range []string{`[]`, `"a"`, `{"a":1}}`, `{'a':1}`} {
		if accepts(g, s) {
			t.Errorf("accepts %s", s)
		}
	}
}

// FuzzSchemaCompile checks that compiling never panics and that a schema that compiles
// gives a grammar a Matcher runs on.
func FuzzSchemaCompile(f *testing.F) {
	for _, s := range []string{
		`{"type":"object","properties":{"a":{"type":"string","maxLength":4},"b":{"type":"array","items":{"type":"integer"},"maxItems":2}},"required":["a"]}`,
		`{"$defs":{"n":{"anyOf":[{"type":"null"},{"type":"object","properties":{"n":{"$ref":"#/$defs/n"}},"required":["n"]}]}},"$ref":"#/$defs/n"}`,
		`{"enum":["a",1,null,[true]]}`, `{"type":["string","null"],"format":"date"}`, `true`, `{"type":"object"}`,
		`{"type":"string","pattern":"x"}`, `{"type":"string","pattern":"^(?:[a-z]\\d|\\s*)+[^\\w]{2,4}?$"}`, `{"$ref":"#"}`, `{"properties":{"\"":{"const":"\\\u0000"}}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, schema string) {
		g, err := FromJSONSchema([]byte(schema))
		if err != nil {
			if !strings.HasPrefix(err.Error(), "grammar: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		m := g.NewMatcher()
		m.Accept([]byte(`{"a":"b","c":[1,2],"d":null}`))
	})
}

// TestSchemaIntegerRange checks integer ranges exhaustively around their edges: the
// grammar accepts exactly the canonical decimal integers in the range.
func TestSchemaIntegerRange(t *testing.T) {
	cases := []struct {
		bounds string
		lo, hi int64
	}{
		{`"minimum":0`, 0, 1e16 - 1},
		{`"minimum":1,"maximum":12`, 1, 12},
		{`"minimum":-5,"maximum":5`, -5, 5},
		{`"minimum":-120,"maximum":-17`, -120, -17},
		{`"minimum":7,"maximum":1234`, 7, 1234},
		{`"exclusiveMinimum":99,"exclusiveMaximum":1000`, 100, 999},
		{`"minimum":0.5,"maximum":3.7`, 1, 3},
		{`"maximum":10`, -1e16 + 1, 10},
		{`"minimum":305,"maximum":305`, 305, 305},
	}
	for _, c := range cases {
		g := mustSchema(t, `{"type":"integer",`+c.bounds+`}`)
		for x := int64(-1300); x <= 1300; x++ {
			in := x >= c.lo && x <= c.hi
			if got := accepts(g, fmt.Sprint(x)); got != in {
				t.Fatalf("%s: %d accepted %v, want %v", c.bounds, x, got, in)
			}
		}
		for _, x := range []int64{c.lo, c.hi} {
			if !accepts(g, fmt.Sprint(x)) {
				t.Errorf("%s: rejects the bound %d", c.bounds, x)
			}
		}
		for _, s := range []string{"-0", "007", "01", "+1", "1.0"} {
			if accepts(g, s) {
				t.Errorf("%s: accepts %s", c.bounds, s)
			}
		}
	}
	g := mustSchema(t, `{"type":"number","minimum":0}`)
	if !accepts(g, "0.5") || !accepts(g, "12e-3") || accepts(g, "-1") {
		t.Error("number minimum 0")
	}
	for _, bad := range []string{`{"type":"integer","minimum":5,"maximum":4}`, `{"type":"number","maximum":1}`,
		`{"type":"number","minimum":1}`, `{"type":"integer","minimum":"1"}`} {
		if _, err := FromJSONSchema([]byte(bad)); err == nil {
			t.Errorf("%s compiled", bad)
		}
	}
}

// TestSchemaPattern checks pattern against Go's regexp on every short string over a small
// alphabet: the grammar accepts the JSON text of exactly the strings the pattern matches
// whole, each of which the pattern (searching) matches.
func TestSchemaPattern(t *testing.T) {
	patterns := []string{
		`^abc$`, `^[a-c]+$`, `^a*b?$`, `^(ab|b)+$`, `^[^ab]{1,2}$`, `^\d{2,}$`, `^\w+\s?$`, `^\D\W$`,
		`^.b.$`, `^(?:a|"){2}$`, `^[\\"]+$`, `^a.*$`, `ab`, `^(?<x>a|0)1?$`, `^[\d_-]*$`, `^[^\s]{3}$`,
		`^a{2}b{0,1}$`, `^\.\-\(\)$`, `^[a\-]+$`, `^\x61\u0062$`, `^a+?b*?$`, `^\n|\t$`, `^[\S]+$`,
	}
	alphabet := []rune{'a', 'b', '0', '1', '_', ' ', '"', '\\', '\n', '.', 'é'}
	var strs []string
	var gen func(prefix string, n int)
	gen = func(prefix string, n int) {
		strs = append(strs, prefix)
		if n == 0 {
			return
		}
		for _, c := range alphabet {
			gen(prefix+string(c), n-1)
		}
	}
	gen("", 3)
	for _, p := range patterns {
		schema, _ := json.Marshal(map[string]any{"type": "string", "pattern": p})
		g, err := FromJSONSchema(schema)
		if err != nil {
			t.Fatalf("pattern %s: %v", p, err)
		}
		goP := regexp.MustCompile(`\\u([0-9a-fA-F]{4})`).ReplaceAllString(p, `\x{$1}`) // Go's syntax
		stripped := strings.TrimSuffix(strings.TrimPrefix(goP, "^"), "$")
		whole := regexp.MustCompile(`^(?:` + stripped + `)$`)
		search := regexp.MustCompile(goP)
		for _, s := range strs {
			var b strings.Builder
			b.WriteByte('"')
			for _, c := range s {
				b.WriteString(jsonEscape(c))
			}
			b.WriteByte('"')
			got := accepts(g, b.String())
			if want := whole.MatchString(s); got != want {
				t.Fatalf("pattern %s: %q (as %s) accepted %v, want %v", p, s, b.String(), got, want)
			}
			if got && !search.MatchString(s) {
				t.Fatalf("pattern %s: accepted %q, which it does not match", p, s)
			}
		}
	}
}
