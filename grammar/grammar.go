// Package grammar constrains generation to a formal language: a llama.cpp-style GBNF grammar
// (Parse) or a JSON schema compiled to one (FromJSONSchema). A Matcher follows the grammar
// over the bytes of the generated text; a Constraint tells, for the Matcher's state, which
// tokens of a vocabulary may come next, so a sampler masks the others and every sampled
// token keeps the output a prefix of a sentence of the grammar.
//
// The grammar is matched on Unicode code points, as llama.cpp does: a token may end in the
// middle of a UTF-8 character, and the Matcher keeps the partial character and accepts only
// bytes that can still complete one the grammar allows. The Matcher is a pushdown recogniser
// (a set of stacks of grammar positions, as llama.cpp's grammar stacks) whose sets of stacks
// are interned as the states of a lazily built automaton, so the transition on a byte is
// computed once per state and then read from a table. A Vocab is a byte trie of the
// vocabulary's tokens in preorder; the Constraint walks it with the automaton, skipping a
// whole subtree at the first byte the grammar rejects, and caches the resulting mask per
// state.
//
// Grammars are bounded (source size, rules, elements, nesting, repetition counts) and the
// Matcher bounds its stacks, so a hostile grammar is refused or stops matching instead of
// exhausting memory.
package grammar

import (
	"fmt"
	"slices"
	"strings"
)

// Limits on a grammar: a source over them is refused with an error naming the limit.
const (
	// MaxSource is the longest grammar text Parse accepts, in bytes.
	MaxSource = 1 << 20
	// MaxRules is the most rules a grammar may have, those made for groups and repetitions
	// included.
	MaxRules = 1 << 15
	// MaxElements is the most elements (character sets and rule references) in all the
	// grammar's alternatives after repetitions are expanded.
	MaxElements = 1 << 18
	// MaxNesting is the deepest nesting of parentheses.
	MaxNesting = 64
	// MaxRepeat is the largest bound of a {m,n} repetition.
	MaxRepeat = 10000
)

// Element kinds.
const (
	kEnd  uint8 = iota // ends an alternative
	kChar              // one code point of a character set (arg: index into sets)
	kRef               // a rule reference (arg: rule id)
)

// elem is one element of an alternative.
type elem struct {
	kind uint8
	arg  int32
}

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// charSet is a set of code points: sorted, disjoint, non-adjacent ranges, plus a bitmap of
// its ASCII members for the common case.
type charSet struct {
	ascii  [2]uint64
	ranges []runeRange
	high   uint8 // highMixed, highNone or highAll: which non-ASCII characters it has
}

// Which of the non-ASCII characters (U+0080 and above, surrogates aside) a set has.
const (
	highMixed uint8 = iota
	highNone
	highAll
)

func (s *charSet) has(c rune) bool {
	if c < 128 {
		return s.ascii[c>>6]&(1<<(c&63)) != 0
	}
	i, _ := slices.BinarySearchFunc(s.ranges, c, func(r runeRange, c rune) int {
		if r.hi < c {
			return -1
		}
		if r.lo > c {
			return 1
		}
		return 0
	})
	return i < len(s.ranges) && s.ranges[i].lo <= c && c <= s.ranges[i].hi
}

// overlaps reports whether the set has a code point in [lo, hi].
func (s *charSet) overlaps(lo, hi rune) bool {
	for _, r := range s.ranges {
		if r.lo <= hi && lo <= r.hi {
			return true
		}
	}
	return false
}

// covers reports whether the set has every code point of [lo, hi].
func (s *charSet) covers(lo, hi rune) bool {
	for _, r := range s.ranges {
		if r.lo <= lo && lo <= r.hi {
			if r.hi >= hi {
				return true
			}
			lo = r.hi + 1
		}
	}
	return false
}

// newCharSet normalises ranges (any order, overlapping) into a set, complemented over all
// code points if negated.
func newCharSet(rs []runeRange, negated bool) charSet {
	rs = slices.Clone(rs)
	slices.SortFunc(rs, func(a, b runeRange) int { return int(a.lo - b.lo) })
	var m []runeRange
	for _, r := range rs {
		if n := len(m); n > 0 && r.lo <= m[n-1].hi+1 {
			m[n-1].hi = max(m[n-1].hi, r.hi)
			continue
		}
		m = append(m, r)
	}
	if negated {
		var c []runeRange
		next := rune(0)
		for _, r := range m {
			if r.lo > next {
				c = append(c, runeRange{next, r.lo - 1})
			}
			next = r.hi + 1
		}
		if next <= maxRune {
			c = append(c, runeRange{next, maxRune})
		}
		m = c
	}
	s := charSet{ranges: m, high: highMixed}
	switch {
	case !s.overlaps(0x80, maxRune):
		s.high = highNone
	case s.covers(0x80, 0xD7FF) && s.covers(0xE000, maxRune):
		s.high = highAll
	}
	for _, r := range m {
		for c := r.lo; c <= r.hi && c < 128; c++ {
			s.ascii[c>>6] |= 1 << (c & 63)
		}
	}
	return s
}

const maxRune = 0x10FFFF

// Grammar is a parsed grammar. It is immutable and safe for concurrent use; each generation
// follows it with its own Matcher.
type Grammar struct {
	elems []elem    // every alternative of every rule, each ended by a kEnd element
	rules [][]int32 // rule id -> the index in elems of each of its alternatives
	names []string  // rule id -> name ("root", "value", "value-3" for a made-up rule)
	sets  []charSet
	root  int32
}

// Rules is the number of rules, those made for groups and repetitions included.
func (g *Grammar) Rules() int { return len(g.rules) }

// Elements is the number of elements of all alternatives (a measure of the grammar's size).
func (g *Grammar) Elements() int { return len(g.elems) }

// String renders the grammar's internal form as GBNF: every rule, groups and repetitions
// expanded into their own rules. Parsing it gives an equivalent grammar.
func (g *Grammar) String() string {
	var b strings.Builder
	for r, alts := range g.rules {
		fmt.Fprintf(&b, "%s ::=", g.names[r])
		for i, a := range alts {
			if i > 0 {
				b.WriteString(" |")
			}
			for p := a; g.elems[p].kind != kEnd; p++ {
				e := g.elems[p]
				b.WriteByte(' ')
				if e.kind == kRef {
					b.WriteString(g.names[e.arg])
				} else {
					writeSet(&b, &g.sets[e.arg])
				}
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func writeSet(b *strings.Builder, s *charSet) {
	if len(s.ranges) == 1 && s.ranges[0].lo == s.ranges[0].hi {
		b.WriteString(Quote(string(s.ranges[0].lo)))
		return
	}
	b.WriteByte('[')
	for _, r := range s.ranges {
		b.WriteString(escapeRune(r.lo, true))
		if r.hi > r.lo {
			b.WriteByte('-')
			b.WriteString(escapeRune(r.hi, true))
		}
	}
	b.WriteByte(']')
}

// Quote returns s as a GBNF string literal.
func Quote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, c := range s {
		b.WriteString(escapeRune(c, false))
	}
	b.WriteByte('"')
	return b.String()
}

// escapeRune writes c for a literal (inClass false) or a character class.
func escapeRune(c rune, inClass bool) string {
	switch c {
	case '"', '\\':
		return `\` + string(c)
	case '\n':
		return `\n`
	case '\r':
		return `\r`
	case '\t':
		return `\t`
	}
	if inClass && (c == ']' || c == '[' || c == '-' || c == '^') {
		return `\` + string(c)
	}
	switch {
	case c < 0x20 || c == 0x7F:
		return fmt.Sprintf(`\x%02X`, c)
	case c >= 0xD800 && c <= 0xDFFF: // not encodable in UTF-8 text
		return fmt.Sprintf(`\u%04X`, c)
	}
	return string(c)
}
