package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// Limits of FromJSONSchema.
const (
	// MaxSchema is the largest schema accepted, in bytes.
	MaxSchema = 1 << 20
	// MaxSchemaDepth is the deepest nesting of JSON values in a schema.
	MaxSchemaDepth = 64
)

// FromJSONSchema compiles a JSON schema into a grammar of the JSON texts that validate
// against it (see JSONSchemaGBNF for what is supported).
func FromJSONSchema(schema []byte) (*Grammar, error) {
	src, err := JSONSchemaGBNF(schema)
	if err != nil {
		return nil, err
	}
	g, err := Parse(src)
	if err != nil {
		return nil, fmt.Errorf("grammar: the schema compiles to a grammar that is refused: %w", err)
	}
	return g, nil
}

// JSONObject is the grammar of any JSON object (OpenAI's response_format json_object). It
// is compiled once; a Grammar is immutable, so every caller shares it.
func JSONObject() *Grammar { return jsonObject() }

var jsonObject = sync.OnceValue(func() *Grammar {
	g, err := FromJSONSchema([]byte(`{"type":"object"}`))
	if err != nil {
		panic(err) // a constant schema that compiles
	}
	return g
})

// JSONSchemaGBNF compiles a JSON schema into GBNF. It covers what OpenAI's strict
// structured outputs use and what applications send: type (one or a list), object with
// properties (emitted in the order given), required and additionalProperties, string with
// minLength, maxLength, pattern (a regular expression subset, see regexGBNF) and the
// formats date, time, date-time and uuid (other formats are annotations and not enforced,
// as the JSON Schema specification allows), number, integer, boolean, null, integer ranges
// (minimum, maximum, exclusiveMinimum, exclusiveMaximum; for numbers only minimum 0), array
// with items, prefixItems, minItems and maxItems, enum, const, anyOf, oneOf (as anyOf: the
// alternatives should not overlap), allOf with one schema, $ref into the document ("#",
// "#/$defs/...", "#/definitions/...", recursive references included), and the annotations
// (title, description, default, examples, ...), which are ignored. Keywords that would
// restrict validity and are not implemented (multipleOf, uniqueItems, contains, not, if,
// ...) are refused with an error naming them and their location, rather than ignored.
//
// The grammar generates a subset of the valid documents: only the declared properties of
// an object (an object without properties takes any members), at most 16 digits before
// and after the decimal point and two exponent digits in numbers, whitespace of a space or
// a newline and up to 20 spaces or tabs between tokens.
func JSONSchemaGBNF(schema []byte) (string, error) {
	if len(schema) > MaxSchema {
		return "", fmt.Errorf("grammar: the schema is %d bytes, more than the limit of %d", len(schema), MaxSchema)
	}
	root, err := parseJSON(schema)
	if err != nil {
		return "", fmt.Errorf("grammar: the schema is not valid JSON: %w", err)
	}
	c := &compiler{root: root, refs: map[string]string{}, used: map[string]bool{"root": true}, prims: map[string]bool{}}
	name, err := c.compile(root, "#", "root")
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "root ::= %s\n", name)
	for _, r := range c.rules {
		fmt.Fprintf(&b, "%s ::= %s\n", r.name, r.body)
	}
	prims := make([]string, 0, len(c.prims))
	for p := range c.prims {
		prims = append(prims, p)
	}
	sort.Strings(prims)
	for _, p := range prims {
		fmt.Fprintf(&b, "%s ::= %s\n", p, primitives[p])
	}
	return b.String(), nil
}

// primitives are the rules of JSON's lexical parts, added to a grammar as it uses them.
var primitives = map[string]string{
	"space":       `| " " | "\n" [ \t]{0,20}`,
	"json-string": `"\"" json-char* "\""`,
	"json-char":   `[^"\\\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})`,
	"json-int":    `"-"? ("0" | [1-9] [0-9]{0,15})`,
	"json-number": `json-int ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?`,
	"json-bool":   `"true" | "false"`,
	"json-null":   `"null"`,
	"json-value":  `json-object | json-array | json-string | json-number | json-bool | json-null`,
	"json-object": `"{" space (json-string space ":" space json-value space ("," space json-string space ":" space json-value space)*)? "}"`,
	"json-array":  `"[" space (json-value space ("," space json-value space)*)? "]"`,
	"json-date":   `[0-9]{4} "-" ("0" [1-9] | "1" [0-2]) "-" ("0" [1-9] | [12] [0-9] | "3" [01])`,
	"json-time":   `([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9] ":" [0-5] [0-9] ("." [0-9]{1,6})? ("Z" | [+-] ([01] [0-9] | "2" [0-3]) ":" [0-5] [0-9])`,
	"json-uuid":   `[0-9a-fA-F]{8} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{4} "-" [0-9a-fA-F]{12}`,
}

// primitive dependencies: using one uses these.
var primDeps = map[string][]string{
	"json-string": {"json-char"}, "json-number": {"json-int"},
	"json-value":  {"json-object", "json-array", "json-string", "json-number", "json-bool", "json-null"},
	"json-object": {"space", "json-string", "json-value"}, "json-array": {"space", "json-value"},
}

// rule is a generated rule.
type rule struct{ name, body string }

type compiler struct {
	root  *jv
	rules []rule
	refs  map[string]string // $ref target -> its rule
	used  map[string]bool   // rule names taken
	prims map[string]bool
}

// prim marks a primitive (and what it uses) as needed and returns its name.
func (c *compiler) prim(name string) string {
	if !c.prims[name] {
		c.prims[name] = true
		for _, d := range primDeps[name] {
			c.prim(d)
		}
	}
	return name
}

// newName returns a unique rule name made from hint.
func (c *compiler) newName(hint string) string {
	var b strings.Builder
	for _, r := range hint {
		if r < 128 && isNameChar(byte(r)) && r != '_' {
			b.WriteRune(r)
		} else {
			b.WriteByte('-')
		}
	}
	base := strings.Trim(b.String(), "-")
	if base == "" || strings.HasPrefix(base, "json-") || base == "space" {
		base = "s-" + base
	}
	name := base
	for i := 2; c.used[name]; i++ {
		name = base + "-" + strconv.Itoa(i)
	}
	c.used[name] = true
	return name
}

func (c *compiler) add(name, body string) string {
	c.rules = append(c.rules, rule{name, body})
	return name
}

// Keywords by what compile does with them.
var (
	annotations = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
		"$schema": true, "$id": true, "$comment": true, "deprecated": true, "readOnly": true, "writeOnly": true,
		"$defs": true, "definitions": true, "format": true}
	handled = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
		"items": true, "minItems": true, "maxItems": true, "enum": true, "const": true, "anyOf": true, "oneOf": true,
		"allOf": true, "$ref": true, "minLength": true, "maxLength": true, "uniqueItems": true,
		"minimum": true, "maximum": true, "exclusiveMinimum": true, "exclusiveMaximum": true, "prefixItems": true, "pattern": true}
)

// schemaErr is an error about the schema at path (a JSON pointer).
func schemaErr(path, format string, a ...any) error {
	return fmt.Errorf("grammar: schema at %s: %s", path, fmt.Sprintf(format, a...))
}

// compile makes a rule for schema s at path and returns its name.
func (c *compiler) compile(s *jv, path, hint string) (string, error) {
	if s.kind == 'b' {
		if !s.b {
			return "", schemaErr(path, "the schema false matches nothing")
		}
		return c.prim("json-value"), nil
	}
	if s.kind != 'o' {
		return "", schemaErr(path, "a schema must be an object or a boolean, got %s", s.kindName())
	}
	for _, m := range s.obj {
		if !annotations[m.key] && !handled[m.key] {
			return "", schemaErr(path, "keyword %q is not supported", m.key)
		}
	}
	if u := s.get("uniqueItems"); u != nil && !(u.kind == 'b' && !u.b) {
		return "", schemaErr(path, "keyword \"uniqueItems\" is not supported (only false)")
	}
	validation := func(except ...string) string {
		for _, m := range s.obj {
			if handled[m.key] && !contains(except, m.key) {
				return m.key
			}
		}
		return ""
	}
	if ref := s.get("$ref"); ref != nil {
		if k := validation("$ref"); k != "" {
			return "", schemaErr(path, "keyword %q next to $ref is not supported", k)
		}
		return c.ref(ref, path)
	}
	for _, key := range []string{"anyOf", "oneOf", "allOf"} {
		alts := s.get(key)
		if alts == nil {
			continue
		}
		if k := validation(key); k != "" {
			return "", schemaErr(path, "keyword %q next to %s is not supported", k, key)
		}
		if alts.kind != 'a' || len(alts.arr) == 0 {
			return "", schemaErr(path+"/"+key, "must be a non-empty array of schemas")
		}
		if key == "allOf" && len(alts.arr) != 1 {
			return "", schemaErr(path+"/allOf", "allOf of %d schemas is not supported (only one)", len(alts.arr))
		}
		name := c.newName(hint)
		var parts []string
		for i, a := range alts.arr {
			p, err := c.compile(a, fmt.Sprintf("%s/%s/%d", path, key, i), fmt.Sprintf("%s-%d", hint, i))
			if err != nil {
				return "", err
			}
			parts = append(parts, p)
		}
		return c.add(name, strings.Join(parts, " | ")), nil
	}
	types, err := typesOf(s, path)
	if err != nil {
		return "", err
	}
	if k := s.get("const"); k != nil {
		if !typeAllows(types, k) {
			return "", schemaErr(path, "const %s is not of the schema's type", k.json())
		}
		return c.add(c.newName(hint), Quote(k.json())), nil
	}
	if e := s.get("enum"); e != nil {
		if e.kind != 'a' || len(e.arr) == 0 {
			return "", schemaErr(path+"/enum", "must be a non-empty array")
		}
		var parts []string
		for _, v := range e.arr {
			if typeAllows(types, v) {
				parts = append(parts, Quote(v.json()))
			}
		}
		if len(parts) == 0 {
			return "", schemaErr(path+"/enum", "no value is of the schema's type")
		}
		return c.add(c.newName(hint), strings.Join(parts, " | ")), nil
	}
	name := c.newName(hint)
	if types == nil {
		return c.add(name, c.prim("json-value")), nil
	}
	var parts []string
	for _, t := range types {
		var p string
		var err error
		switch t {
		case "string":
			p, err = c.str(s, path, name)
		case "number":
			p, err = c.number(s, path)
		case "integer":
			p, err = c.integer(s, path)
		case "boolean":
			p = c.prim("json-bool")
		case "null":
			p = c.prim("json-null")
		case "object":
			p, err = c.object(s, path, name)
		case "array":
			p, err = c.array(s, path, name)
		}
		if err != nil {
			return "", err
		}
		parts = append(parts, p)
	}
	return c.add(name, strings.Join(parts, " | ")), nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// typesOf reads "type" (a name or a list). Without it, the keywords of one type make the
// schema generate that type (object, array, string, integer: a subset of what validates),
// and otherwise nil means any type.
func typesOf(s *jv, path string) ([]string, error) {
	valid := map[string]bool{"string": true, "number": true, "integer": true, "boolean": true, "null": true, "object": true, "array": true}
	t := s.get("type")
	var types []string
	switch {
	case t == nil:
		if s.get("properties") != nil || s.get("additionalProperties") != nil || s.get("required") != nil {
			return []string{"object"}, nil
		}
		if s.get("items") != nil || s.get("prefixItems") != nil || s.get("minItems") != nil || s.get("maxItems") != nil {
			return []string{"array"}, nil
		}
		if s.get("minLength") != nil || s.get("maxLength") != nil || s.get("pattern") != nil {
			return []string{"string"}, nil
		}
		for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
			if s.get(k) != nil {
				return []string{"integer"}, nil
			}
		}
		return nil, nil
	case t.kind == 's':
		types = []string{t.str}
	case t.kind == 'a' && len(t.arr) > 0:
		for _, x := range t.arr {
			if x.kind != 's' {
				return nil, schemaErr(path+"/type", "must be a type name or a list of them")
			}
			if !contains(types, x.str) {
				types = append(types, x.str)
			}
		}
	default:
		return nil, schemaErr(path+"/type", "must be a type name or a non-empty list of them")
	}
	for _, x := range types {
		if !valid[x] {
			return nil, schemaErr(path+"/type", "unknown type %q", x)
		}
	}
	return types, nil
}

// typeAllows reports whether value v is of one of types (nil: any).
func typeAllows(types []string, v *jv) bool {
	if types == nil {
		return true
	}
	for _, t := range types {
		switch {
		case t == "string" && v.kind == 's', t == "boolean" && v.kind == 'b', t == "null" && v.kind == 'z',
			t == "object" && v.kind == 'o', t == "array" && v.kind == 'a', t == "number" && v.kind == 'n':
			return true
		case t == "integer" && v.kind == 'n':
			if _, err := strconv.ParseInt(string(v.num), 10, 64); err == nil {
				return true
			}
		}
	}
	return false
}

// count reads a non-negative integer keyword (-1 if absent).
func count(s *jv, key, path string) (int, error) {
	v := s.get(key)
	if v == nil {
		return -1, nil
	}
	n, err := strconv.Atoi(string(v.num))
	if v.kind != 'n' || err != nil || n < 0 {
		return 0, schemaErr(path+"/"+key, "must be a non-negative integer")
	}
	if n > MaxRepeat {
		return 0, schemaErr(path+"/"+key, "%d is over the limit of %d", n, MaxRepeat)
	}
	return n, nil
}

// maxInt is the largest magnitude of a generated integer (json-int's 16 digits).
const maxInt = 1e16 - 1

// bounds reads minimum, maximum, exclusiveMinimum and exclusiveMaximum (numbers; the
// draft-4 boolean forms are refused) as an integer range, clamped to ±maxInt. ok is false
// when none is given.
func bounds(s *jv, path string) (lo, hi int64, ok bool, err error) {
	lo, hi = -maxInt, maxInt
	for _, k := range []string{"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		v := s.get(k)
		if v == nil {
			continue
		}
		ok = true
		if v.kind != 'n' {
			return 0, 0, false, schemaErr(path+"/"+k, "must be a number")
		}
		f, perr := strconv.ParseFloat(string(v.num), 64)
		if perr != nil {
			return 0, 0, false, schemaErr(path+"/"+k, "must be a number")
		}
		f = math.Max(math.Min(f, maxInt+1), -maxInt-1)
		switch k {
		case "minimum":
			lo = max(lo, int64(math.Ceil(f)))
		case "maximum":
			hi = min(hi, int64(math.Floor(f)))
		case "exclusiveMinimum":
			lo = max(lo, int64(math.Floor(f))+1)
		case "exclusiveMaximum":
			hi = min(hi, int64(math.Ceil(f))-1)
		}
	}
	return lo, hi, ok, nil
}

// integer compiles an integer schema, with its range if it has one.
func (c *compiler) integer(s *jv, path string) (string, error) {
	lo, hi, ok, err := bounds(s, path)
	if err != nil || !ok {
		return c.prim("json-int"), err
	}
	if lo > hi {
		return "", schemaErr(path, "no integer is in the range [%d, %d]", lo, hi)
	}
	return intRange(lo, hi), nil
}

// number compiles a number schema; of the range keywords only minimum 0 (no minus sign) is
// supported.
func (c *compiler) number(s *jv, path string) (string, error) {
	for _, k := range []string{"maximum", "exclusiveMinimum", "exclusiveMaximum"} {
		if s.get(k) != nil {
			return "", schemaErr(path, "keyword %q is not supported for numbers (only for integers)", k)
		}
	}
	if m := s.get("minimum"); m != nil {
		if f, err := strconv.ParseFloat(string(m.num), 64); m.kind != 'n' || err != nil || f != 0 {
			return "", schemaErr(path, "minimum %s is not supported for numbers (only 0, or integers)", m.json())
		}
		c.prim("json-number")
		return `("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})?`, nil
	}
	return c.prim("json-number"), nil
}

// intRange is a GBNF expression for the canonical decimal integers in [lo, hi] (no leading
// zeros, no "-0").
func intRange(lo, hi int64) string {
	var alts []string
	if lo < 0 { // the negatives: "-" and the magnitudes in [max(1, -hi), -lo]
		alts = append(alts, `"-" (`+natRange(max(1, -hi), -lo)+`)`)
	}
	if hi >= 0 {
		alts = append(alts, natRange(max(0, lo), hi))
	}
	return "(" + strings.Join(alts, " | ") + ")"
}

// natRange is the canonical decimal numbers in [lo, hi], 0 <= lo <= hi: one run of
// alternatives per number of digits.
func natRange(lo, hi int64) string {
	var alts []string
	for n := len(strconv.FormatInt(lo, 10)); n <= len(strconv.FormatInt(hi, 10)); n++ {
		first, last := int64(math.Pow10(n-1)), int64(math.Pow10(n))-1
		if n == 1 {
			first = 0
		}
		a, b := max(lo, first), min(hi, last)
		if a > b {
			continue
		}
		alts = append(alts, sameLength(strconv.FormatInt(a, 10), strconv.FormatInt(b, 10)))
	}
	return strings.Join(alts, " | ")
}

// sameLength is the digit strings from lo to hi, both of the same length.
func sameLength(lo, hi string) string {
	n := len(lo)
	if n == 0 {
		return `""`
	}
	if strings.Trim(lo[1:], "0") == "" && strings.Trim(hi[1:], "9") == "" {
		return digits(lo[0], hi[0]) + anyDigits(n-1)
	}
	if lo[0] == hi[0] {
		return `"` + lo[:1] + `" (` + sameLength(lo[1:], hi[1:]) + `)`
	}
	alts := []string{`"` + lo[:1] + `" (` + sameLength(lo[1:], strings.Repeat("9", n-1)) + `)`}
	if lo[0]+1 <= hi[0]-1 {
		alts = append(alts, digits(lo[0]+1, hi[0]-1)+anyDigits(n-1))
	}
	alts = append(alts, `"`+hi[:1]+`" (`+sameLength(strings.Repeat("0", n-1), hi[1:])+`)`)
	return strings.Join(alts, " | ")
}

func digits(a, b byte) string {
	if a == b {
		return `"` + string(a) + `"`
	}
	return "[" + string(a) + "-" + string(b) + "]"
}

func anyDigits(n int) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" [0-9]{%d}", n)
}

// str compiles a string schema.
func (c *compiler) str(s *jv, path, name string) (string, error) {
	lo, err := count(s, "minLength", path)
	if err != nil {
		return "", err
	}
	hi, err := count(s, "maxLength", path)
	if err != nil {
		return "", err
	}
	if pat := s.get("pattern"); pat != nil {
		if pat.kind != 's' {
			return "", schemaErr(path+"/pattern", "must be a string")
		}
		if lo >= 0 || hi >= 0 {
			return "", schemaErr(path, "minLength or maxLength with pattern is not supported")
		}
		if f := s.get("format"); f != nil && f.kind == 's' && contains([]string{"date", "time", "date-time", "uuid"}, f.str) {
			return "", schemaErr(path, "format %q with pattern is not supported", f.str)
		}
		expr, err := regexGBNF(pat.str)
		if err != nil {
			return "", schemaErr(path+"/pattern", "%v", err)
		}
		return `"\"" (` + expr + `) "\""`, nil
	}
	if f := s.get("format"); f != nil && f.kind == 's' {
		var p string
		switch f.str {
		case "date":
			p = c.prim("json-date")
		case "time":
			p = c.prim("json-time")
		case "date-time":
			c.prim("json-date")
			p = "json-date \"T\" " + c.prim("json-time")
		case "uuid":
			p = c.prim("json-uuid")
		}
		if p != "" {
			if lo >= 0 || hi >= 0 {
				return "", schemaErr(path, "minLength or maxLength with format %q is not supported", f.str)
			}
			return `"\"" ` + p + ` "\""`, nil
		}
	}
	if lo < 0 && hi < 0 {
		return c.prim("json-string"), nil
	}
	lo = max(lo, 0)
	if hi >= 0 && hi < lo {
		return "", schemaErr(path, "maxLength %d is below minLength %d", hi, lo)
	}
	c.prim("json-char")
	if hi < 0 {
		return fmt.Sprintf(`"\"" json-char{%d,} "\""`, lo), nil
	}
	return fmt.Sprintf(`"\"" json-char{%d,%d} "\""`, lo, hi), nil
}

// object compiles an object schema: the declared properties in order, the required ones
// always and the others optionally, with commas between those present.
func (c *compiler) object(s *jv, path, name string) (string, error) {
	props := s.get("properties")
	if props != nil && props.kind != 'o' {
		return "", schemaErr(path+"/properties", "must be an object")
	}
	req := map[string]bool{}
	var reqOrder []string
	if r := s.get("required"); r != nil {
		if r.kind != 'a' {
			return "", schemaErr(path+"/required", "must be an array of property names")
		}
		for _, x := range r.arr {
			if x.kind != 's' {
				return "", schemaErr(path+"/required", "must be an array of property names")
			}
			if !req[x.str] {
				req[x.str] = true
				reqOrder = append(reqOrder, x.str)
			}
		}
	}
	type prop struct {
		key, rule string
		required  bool
	}
	var ps []prop
	declared := map[string]bool{}
	if props != nil {
		for _, m := range props.obj {
			r, err := c.compile(m.val, path+"/properties/"+pointerEscape(m.key), name+"-"+m.key)
			if err != nil {
				return "", err
			}
			ps = append(ps, prop{m.key, r, req[m.key]})
			declared[m.key] = true
		}
	}
	for _, k := range reqOrder { // required but not declared: any value
		if !declared[k] {
			ps = append(ps, prop{k, c.prim("json-value"), true})
		}
	}
	ap := s.get("additionalProperties")
	if ap != nil && ap.kind != 'b' && ap.kind != 'o' {
		return "", schemaErr(path+"/additionalProperties", "must be a boolean or a schema")
	}
	if len(ps) == 0 {
		if ap != nil && ap.kind == 'o' { // a map of one value schema
			v, err := c.compile(ap, path+"/additionalProperties", name+"-value")
			if err != nil {
				return "", err
			}
			c.prim("space")
			c.prim("json-string")
			kv := fmt.Sprintf(`json-string space ":" space %s space`, v)
			return fmt.Sprintf(`"{" space (%s ("," space %s)*)? "}"`, kv, kv), nil
		}
		if ap != nil && ap.kind == 'b' && !ap.b {
			return `"{" ` + c.prim("space") + ` "}"`, nil
		}
		return c.prim("json-object"), nil
	}
	c.prim("space")
	kv := make([]string, len(ps))
	for i, p := range ps {
		kv[i] = fmt.Sprintf(`%s space ":" space %s space`, Quote(jsonString(p.key)), p.rule)
	}
	allReq := true
	for _, p := range ps {
		allReq = allReq && p.required
	}
	if allReq {
		return `"{" space ` + strings.Join(kv, ` "," space `) + ` "}"`, nil
	}
	// first_i: no property written yet, at i; rest_i: one written, at i.
	n := len(ps)
	first := make([]string, n+1)
	rest := make([]string, n+1)
	first[n] = c.add(c.newName(name+"-end"), "")
	rest[n] = first[n]
	for i := n - 1; i >= 0; i-- {
		r := fmt.Sprintf(`"," space %s %s`, kv[i], rest[i+1])
		f := fmt.Sprintf(`%s %s`, kv[i], rest[i+1])
		if !ps[i].required {
			r += " | " + rest[i+1]
			f += " | " + first[i+1]
		}
		rest[i] = c.add(c.newName(fmt.Sprintf("%s-rest-%d", name, i)), r)
		first[i] = c.add(c.newName(fmt.Sprintf("%s-first-%d", name, i)), f)
	}
	return `"{" space ` + first[0] + ` "}"`, nil
}

// array compiles an array schema. With prefixItems it writes every prefix item (a shorter
// array would be valid too), then as many further items as minItems needs and, if items
// gives their schema, maxItems allows.
func (c *compiler) array(s *jv, path, name string) (string, error) {
	var prefix []string
	if p := s.get("prefixItems"); p != nil {
		if p.kind != 'a' {
			return "", schemaErr(path+"/prefixItems", "must be an array of schemas")
		}
		for i, x := range p.arr {
			r, err := c.compile(x, fmt.Sprintf("%s/prefixItems/%d", path, i), fmt.Sprintf("%s-%d", name, i))
			if err != nil {
				return "", err
			}
			prefix = append(prefix, r)
		}
	}
	item, noMore := c.prim("json-value"), false
	it := s.get("items")
	if it != nil {
		if it.kind == 'b' && !it.b {
			noMore = true
		} else {
			var err error
			if item, err = c.compile(it, path+"/items", name+"-item"); err != nil {
				return "", err
			}
		}
	}
	lo, err := count(s, "minItems", path)
	if err != nil {
		return "", err
	}
	hi, err := count(s, "maxItems", path)
	if err != nil {
		return "", err
	}
	lo = max(lo, 0)
	if hi >= 0 && hi < lo {
		return "", schemaErr(path, "maxItems %d is below minItems %d", hi, lo)
	}
	c.prim("space")
	rep := func(lo, hi int) string {
		if hi < 0 {
			return fmt.Sprintf("{%d,}", lo)
		}
		return fmt.Sprintf("{%d,%d}", lo, hi)
	}
	more := `("," space ` + item + ` space)`
	if n := len(prefix); n > 0 {
		if hi >= 0 && hi < n {
			return "", schemaErr(path, "maxItems %d below the %d prefixItems is not supported", hi, n)
		}
		restLo, restHi := max(0, lo-n), -1
		if hi >= 0 {
			restHi = hi - n
		}
		if noMore || it == nil { // no further items unless minItems asks for them
			if noMore && restLo > 0 {
				return "", schemaErr(path, "minItems %d needs more than the %d prefixItems and items is false", lo, n)
			}
			restHi = restLo
		}
		body := `"[" space ` + strings.Join(prefix, ` space "," space `) + ` space`
		if restHi != 0 {
			body += " " + more + rep(restLo, restHi)
		}
		return body + ` "]"`, nil
	}
	if hi == 0 || noMore {
		if lo > 0 {
			return "", schemaErr(path, "minItems %d with items false matches nothing", lo)
		}
		return `"[" space "]"`, nil
	}
	hiMore := -1
	if hi > 0 {
		hiMore = hi - 1
	}
	if lo == 0 {
		return fmt.Sprintf(`"[" space (%s space %s%s)? "]"`, item, more, rep(0, hiMore)), nil
	}
	return fmt.Sprintf(`"[" space %s space %s%s "]"`, item, more, rep(lo-1, hiMore)), nil
}

// ref compiles a $ref to a location in the document, once per target (so a recursive
// reference becomes a recursive rule).
func (c *compiler) ref(ref *jv, path string) (string, error) {
	if ref.kind != 's' {
		return "", schemaErr(path+"/$ref", "must be a string")
	}
	target := ref.str
	if name, ok := c.refs[target]; ok {
		return name, nil
	}
	if !strings.HasPrefix(target, "#") {
		return "", schemaErr(path+"/$ref", "only references into the schema itself (#...) are supported, got %q", target)
	}
	frag, err := url.PathUnescape(target[1:])
	if err != nil {
		return "", schemaErr(path+"/$ref", "bad reference %q", target)
	}
	s := c.root
	hint := "root"
	if frag != "" {
		if !strings.HasPrefix(frag, "/") {
			return "", schemaErr(path+"/$ref", "only JSON-pointer references are supported, got %q", target)
		}
		for _, tok := range strings.Split(frag[1:], "/") {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			switch s.kind {
			case 'o':
				s = s.get(tok)
			case 'a':
				i, err := strconv.Atoi(tok)
				if err != nil || i < 0 || i >= len(s.arr) {
					s = nil
				} else {
					s = s.arr[i]
				}
			default:
				s = nil
			}
			if s == nil {
				return "", schemaErr(path+"/$ref", "reference %q does not resolve", target)
			}
			hint = tok
		}
	}
	// Name the target before compiling it, so a reference inside it resolves to this rule.
	name := c.newName("ref-" + hint)
	c.refs[target] = name
	body, err := c.compile(s, target, hint)
	if err != nil {
		return "", err
	}
	return c.add(name, body), nil
}

func pointerEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}

// jsonString is s as a JSON string literal (without HTML escaping).
func jsonString(s string) string {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	e.Encode(s)
	return strings.TrimSuffix(b.String(), "\n")
}

// jv is a JSON value that keeps the order of object members.
type jv struct {
	kind byte // 'o' object, 'a' array, 's' string, 'n' number, 'b' boolean, 'z' null
	obj  []member
	arr  []*jv
	str  string
	num  json.Number
	b    bool
}

type member struct {
	key string
	val *jv
}

func (v *jv) get(k string) *jv {
	for _, m := range v.obj {
		if m.key == k {
			return m.val
		}
	}
	return nil
}

func (v *jv) kindName() string {
	return map[byte]string{'o': "an object", 'a': "an array", 's': "a string", 'n': "a number", 'b': "a boolean", 'z': "null"}[v.kind]
}

// json renders v compactly, members in order.
func (v *jv) json() string {
	var b strings.Builder
	v.write(&b)
	return b.String()
}

func (v *jv) write(b *strings.Builder) {
	switch v.kind {
	case 'o':
		b.WriteByte('{')
		for i, m := range v.obj {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(jsonString(m.key))
			b.WriteByte(':')
			m.val.write(b)
		}
		b.WriteByte('}')
	case 'a':
		b.WriteByte('[')
		for i, x := range v.arr {
			if i > 0 {
				b.WriteByte(',')
			}
			x.write(b)
		}
		b.WriteByte(']')
	case 's':
		b.WriteString(jsonString(v.str))
	case 'n':
		b.WriteString(string(v.num))
	case 'b':
		b.WriteString(strconv.FormatBool(v.b))
	case 'z':
		b.WriteString("null")
	}
}

// parseJSON reads one JSON value keeping member order, refusing duplicate keys and
// nesting deeper than MaxSchemaDepth.
func parseJSON(data []byte) (*jv, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	v, err := readValue(d, 0)
	if err != nil {
		return nil, err
	}
	if _, err := d.Token(); err != io.EOF {
		return nil, errors.New("data after the schema")
	}
	return v, nil
}

func readValue(d *json.Decoder, depth int) (*jv, error) {
	if depth > MaxSchemaDepth {
		return nil, fmt.Errorf("nested more than %d deep", MaxSchemaDepth)
	}
	t, err := d.Token()
	if err != nil {
		if err == io.EOF {
			return nil, io.ErrUnexpectedEOF
		}
		return nil, err
	}
	switch x := t.(type) {
	case json.Delim:
		switch x {
		case '{':
			v := &jv{kind: 'o'}
			seen := map[string]bool{}
			for d.More() {
				kt, err := d.Token()
				if err != nil {
					return nil, err
				}
				k := kt.(string)
				if seen[k] {
					return nil, fmt.Errorf("duplicate key %q", k)
				}
				seen[k] = true
				val, err := readValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				v.obj = append(v.obj, member{k, val})
			}
			_, err := d.Token()
			return v, err
		case '[':
			v := &jv{kind: 'a'}
			for d.More() {
				val, err := readValue(d, depth+1)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, val)
			}
			_, err := d.Token()
			return v, err
		}
	case string:
		return &jv{kind: 's', str: x}, nil
	case json.Number:
		return &jv{kind: 'n', num: x}, nil
	case bool:
		return &jv{kind: 'b', b: x}, nil
	case nil:
		return &jv{kind: 'z'}, nil
	}
	return nil, fmt.Errorf("unexpected %v", t)
}
