package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// regexGBNF translates a JSON-schema pattern (an ECMA-262 regular expression) into a GBNF
// expression for the JSON string contents (between the quotes) of strings it matches:
// characters JSON must escape are written escaped. A pattern is searched for anywhere in
// a string, so a string it matches whole also matches; the grammar generates those (a
// leading ^ and a trailing $ change nothing then). Supported: literals and escapes,
// classes ([a-z], [^...], \d \w \s and their negations, .), groups ((...), (?:...),
// (?<name>...)), alternation and the quantifiers * + ? {n} {n,} {n,m} (lazy or not).
// Refused with an error: lookaround, backreferences, word boundaries, anchors elsewhere,
// Unicode property escapes and other escapes of letters.
func regexGBNF(pattern string) (string, error) {
	if !utf8.ValidString(pattern) {
		return "", fmt.Errorf("the pattern is not valid UTF-8")
	}
	src, base := pattern, 0
	if strings.HasPrefix(src, "^") {
		src, base = src[1:], 1
	}
	if strings.HasSuffix(src, "$") && !escapedAt(src, len(src)-1) {
		src = src[:len(src)-1]
	}
	r := &rxParser{src: src, base: base}
	expr, err := r.alt(0)
	if err != nil {
		return "", err
	}
	if r.pos < len(r.src) {
		return "", r.errf("unexpected %q", r.src[r.pos:r.pos+1])
	}
	return expr, nil
}

// escapedAt reports whether the byte at i is escaped by an odd run of backslashes.
func escapedAt(s string, i int) bool {
	n := 0
	for j := i - 1; j >= 0 && s[j] == '\\'; j-- {
		n++
	}
	return n%2 == 1
}

type rxParser struct {
	src  string
	pos  int
	base int // the offset of src in the pattern (1 after a leading ^)
}

func (r *rxParser) errf(format string, a ...any) error {
	return fmt.Errorf("pattern at offset %d: %s", r.base+r.pos, fmt.Sprintf(format, a...))
}

func (r *rxParser) alt(depth int) (string, error) {
	if depth > MaxNesting {
		return "", r.errf("groups nested more than %d deep", MaxNesting)
	}
	var alts []string
	for {
		seq, err := r.seq(depth)
		if err != nil {
			return "", err
		}
		alts = append(alts, seq)
		if r.pos < len(r.src) && r.src[r.pos] == '|' {
			r.pos++
			continue
		}
		return strings.Join(alts, " | "), nil
	}
}

func (r *rxParser) seq(depth int) (string, error) {
	var items []string
	for r.pos < len(r.src) {
		c := r.src[r.pos]
		if c == '|' || c == ')' {
			break
		}
		atom, err := r.atom(depth)
		if err != nil {
			return "", err
		}
		if atom, err = r.quantifier(atom); err != nil {
			return "", err
		}
		items = append(items, atom)
	}
	if len(items) == 0 {
		return `""`, nil
	}
	return strings.Join(items, " "), nil
}

// Character sets of the class escapes and ".".
var (
	rxDigit = []runeRange{{'0', '9'}}
	rxWord  = []runeRange{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}
	rxSpace = []runeRange{{'\t', '\r'}, {' ', ' '}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
		{0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}}
	rxNotLine = newCharSet([]runeRange{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}, true).ranges
)

func (r *rxParser) atom(depth int) (string, error) {
	c := r.src[r.pos]
	switch c {
	case '(':
		r.pos++
		if strings.HasPrefix(r.src[r.pos:], "?:") {
			r.pos += 2
		} else if strings.HasPrefix(r.src[r.pos:], "?<") && !strings.HasPrefix(r.src[r.pos:], "?<=") && !strings.HasPrefix(r.src[r.pos:], "?<!") {
			end := strings.IndexByte(r.src[r.pos:], '>')
			if end < 0 {
				return "", r.errf("unterminated group name")
			}
			r.pos += end + 1
		} else if r.pos < len(r.src) && r.src[r.pos] == '?' {
			return "", r.errf("lookaround and other (?...) groups are not supported")
		}
		inner, err := r.alt(depth + 1)
		if err != nil {
			return "", err
		}
		if r.pos >= len(r.src) || r.src[r.pos] != ')' {
			return "", r.errf("unclosed (")
		}
		r.pos++
		return "(" + inner + ")", nil
	case '[':
		return r.class()
	case '.':
		r.pos++
		return setExpr(rxNotLine, false)
	case '\\':
		rs, negated, single, err := r.escape(false)
		if err != nil {
			return "", err
		}
		if single >= 0 {
			return Quote(jsonEscape(single)), nil
		}
		return setExpr(rs, negated)
	case '^', '$':
		return "", r.errf("the anchor %c is only supported at the start (^) or end ($) of the pattern", c)
	case '*', '+', '?':
		return "", r.errf("nothing to repeat before %c", c)
	case '{':
		if _, _, ok := r.braces(); ok {
			return "", r.errf("nothing to repeat before {")
		}
	}
	ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
	r.pos += n
	return Quote(jsonEscape(ch)), nil
}

// escape reads an escape after "\": a class (rs, negated) or one character (single >= 0).
func (r *rxParser) escape(inClass bool) (rs []runeRange, negated bool, single rune, err error) {
	r.pos++ // the backslash
	if r.pos >= len(r.src) {
		return nil, false, -1, r.errf("the pattern ends with \\")
	}
	e, n := utf8.DecodeRuneInString(r.src[r.pos:])
	r.pos += n
	switch e {
	case 'd':
		return rxDigit, false, -1, nil
	case 'D':
		return rxDigit, true, -1, nil
	case 'w':
		return rxWord, false, -1, nil
	case 'W':
		return rxWord, true, -1, nil
	case 's':
		return rxSpace, false, -1, nil
	case 'S':
		return rxSpace, true, -1, nil
	case 't':
		return nil, false, '\t', nil
	case 'n':
		return nil, false, '\n', nil
	case 'r':
		return nil, false, '\r', nil
	case 'f':
		return nil, false, '\f', nil
	case 'v':
		return nil, false, '\v', nil
	case '0':
		return nil, false, 0, nil
	case 'b':
		if inClass {
			return nil, false, '\b', nil
		}
	case 'x', 'u':
		k := 2
		if e == 'u' {
			k = 4
		}
		if r.pos+k <= len(r.src) {
			if v, err := strconv.ParseUint(r.src[r.pos:r.pos+k], 16, 32); err == nil {
				if v >= 0xD800 && v <= 0xDFFF {
					return nil, false, -1, r.errf("the surrogate escape \\u%04X is not supported", v)
				}
				r.pos += k
				return nil, false, rune(v), nil
			}
		}
		return nil, false, -1, r.errf("\\%c needs %d hex digits", e, k)
	}
	if e < 128 && (e >= 'a' && e <= 'z' || e >= 'A' && e <= 'Z' || e >= '1' && e <= '9') {
		return nil, false, -1, r.errf("the escape \\%c (boundary, backreference, property or control) is not supported", e)
	}
	return nil, false, e, nil // an escaped punctuation character is itself
}

func (r *rxParser) class() (string, error) {
	open := r.pos
	r.pos++
	negated := false
	if r.pos < len(r.src) && r.src[r.pos] == '^' {
		negated = true
		r.pos++
	}
	var rs []runeRange
	var subtract []charSet // negated escapes (\D, \W, \S) inside the class
	for {
		if r.pos >= len(r.src) {
			r.pos = open
			return "", r.errf("unterminated character class")
		}
		if r.src[r.pos] == ']' {
			r.pos++
			break
		}
		lo, isSet, err := r.classChar(&rs, &subtract)
		if err != nil {
			return "", err
		}
		if isSet {
			continue
		}
		hi := lo
		if r.pos+1 < len(r.src) && r.src[r.pos] == '-' && r.src[r.pos+1] != ']' {
			r.pos++
			var isSet2 bool
			if hi, isSet2, err = r.classChar(&rs, &subtract); err != nil {
				return "", err
			}
			if isSet2 {
				return "", r.errf("a class escape cannot end a range")
			}
			if hi < lo {
				return "", r.errf("range %q-%q is reversed", lo, hi)
			}
		}
		rs = append(rs, runeRange{lo, hi})
	}
	for _, s := range subtract { // [\D] is the union of the complements
		rs = append(rs, s.ranges...)
	}
	return setExpr(rs, negated)
}

// classChar reads one class member: a character (returned), or a class escape added to rs
// (isSet true).
func (r *rxParser) classChar(rs *[]runeRange, subtract *[]charSet) (c rune, isSet bool, err error) {
	if r.src[r.pos] != '\\' {
		ch, n := utf8.DecodeRuneInString(r.src[r.pos:])
		r.pos += n
		return ch, false, nil
	}
	set, negated, single, err := r.escape(true)
	if err != nil {
		return 0, false, err
	}
	if single >= 0 {
		return single, false, nil
	}
	if negated {
		*subtract = append(*subtract, newCharSet(set, true))
	} else {
		*rs = append(*rs, set...)
	}
	return 0, true, nil
}

// braces reads {n}, {n,} or {n,m} at pos (ok false, pos unchanged, if it is not one).
func (r *rxParser) braces() (lo, hi int, ok bool) {
	s := r.src[r.pos:]
	end := strings.IndexByte(s, '}')
	if !strings.HasPrefix(s, "{") || end < 0 {
		return 0, 0, false
	}
	body := s[1:end]
	a, b, comma := strings.Cut(body, ",")
	lo, err := strconv.Atoi(a)
	if err != nil || lo < 0 {
		return 0, 0, false
	}
	hi = lo
	if comma {
		hi = -1
		if b != "" {
			if hi, err = strconv.Atoi(b); err != nil || hi < 0 {
				return 0, 0, false
			}
		}
	}
	r.pos += end + 1
	return lo, hi, true
}

func (r *rxParser) quantifier(atom string) (string, error) {
	if r.pos >= len(r.src) {
		return atom, nil
	}
	var q string
	switch c := r.src[r.pos]; c {
	case '*', '+', '?':
		r.pos++
		q = string(c)
	case '{':
		at := r.pos
		lo, hi, ok := r.braces()
		if !ok {
			return atom, nil // a literal {, read as the next atom
		}
		if lo > MaxRepeat || hi > MaxRepeat {
			r.pos = at
			return "", r.errf("repetition count over the limit of %d", MaxRepeat)
		}
		if hi >= 0 && hi < lo {
			r.pos = at
			return "", r.errf("repetition {%d,%d} has its maximum below its minimum", lo, hi)
		}
		switch {
		case hi == lo:
			q = fmt.Sprintf("{%d}", lo)
		case hi < 0:
			q = fmt.Sprintf("{%d,}", lo)
		default:
			q = fmt.Sprintf("{%d,%d}", lo, hi)
		}
	default:
		return atom, nil
	}
	if r.pos < len(r.src) && r.src[r.pos] == '?' { // lazy: the same strings
		r.pos++
	}
	if r.pos < len(r.src) && strings.ContainsRune("*+?{", rune(r.src[r.pos])) {
		if _, _, ok := r.braces(); ok || r.src[r.pos] != '{' {
			return "", r.errf("nothing to repeat before %c", r.src[r.pos])
		}
	}
	return "(" + atom + ")" + q, nil
}

// setExpr is GBNF for one character of the set (complemented if negated) as JSON string
// contents: the characters JSON writes as they are in a class, the others escaped.
func setExpr(rs []runeRange, negated bool) (string, error) {
	s := newCharSet(rs, negated)
	safe := newCharSet([]runeRange{{0x20, '"' - 1}, {'"' + 1, '\\' - 1}, {'\\' + 1, maxRune}}, false)
	var inter []runeRange
	for _, a := range s.ranges {
		for _, b := range safe.ranges {
			if lo, hi := max(a.lo, b.lo), min(a.hi, b.hi); lo <= hi {
				inter = append(inter, runeRange{lo, hi})
			}
		}
	}
	var alts []string
	if len(inter) > 0 {
		set := newCharSet(inter, false)
		var b strings.Builder
		writeSet(&b, &set)
		alts = append(alts, b.String())
	}
	for c := rune(0); c < 0x20; c++ {
		if s.has(c) {
			alts = append(alts, Quote(jsonEscape(c)))
		}
	}
	for _, c := range []rune{'"', '\\'} {
		if s.has(c) {
			alts = append(alts, Quote(jsonEscape(c)))
		}
	}
	if len(alts) == 0 {
		return "", fmt.Errorf("pattern: a character class matches nothing")
	}
	return "(" + strings.Join(alts, " | ") + ")", nil
}

// jsonEscape is c as it appears inside a JSON string.
func jsonEscape(c rune) string {
	switch {
	case c == '"':
		return `\"`
	case c == '\\':
		return `\\`
	case c < 0x20:
		return fmt.Sprintf(`\u%04x`, c)
	}
	return string(c)
}
