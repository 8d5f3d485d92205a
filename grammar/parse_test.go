package grammar

import (
	"strings"
	"testing"
)

// accepts reports whether g accepts s whole (a complete sentence).
func accepts(g *Grammar, s string) bool {
	m := g.NewMatcher()
	return m.Accept([]byte(s)) && m.Complete()
}

// prefix reports whether s is a prefix of some sentence of g.
func prefix(g *Grammar, s string) bool { return g.NewMatcher().Accept([]byte(s)) }

func mustParse(t *testing.T, src string) *Grammar {
	t.Helper()
	g, err := Parse(src)
	if err != nil {
		t.Fatalf("Parse(%q): %v", src, err)
	}
	return g
}

// TestParseGood parses grammars using every construct and checks the language of each
// against strings it must and must not accept.
func TestParseGood(t *testing.T) {
	cases := []struct {
		src      string
		yes, no  []string
		prefixes []string // incomplete but valid prefixes
	}{
		{src: `root ::= "abc"`, yes: []string{"abc"}, no: []string{"ab", "abcd", "", "abd"}, prefixes: []string{"", "a", "ab"}},
		{src: `root ::= "a" | "b" | "cd"`, yes: []string{"a", "b", "cd"}, no: []string{"c", "ab", "d"}},
		{src: `root ::= [a-c]+ [^a-z\n]`, yes: []string{"aX", "cbaa1", "a "}, no: []string{"a", "X", "ab\n", "abc"}},
		{src: `root ::= ("ab" | "c")* "."`, yes: []string{".", "ab.", "cabc.", "cc."}, no: []string{"a.", "abab"}},
		{src: `root ::= "x"? "y"`, yes: []string{"y", "xy"}, no: []string{"xxy", "x"}},
		{src: `root ::= [0-9]{2,4}`, yes: []string{"12", "123", "1234"}, no: []string{"1", "12345", "a1"}},
		{src: `root ::= "a"{3}`, yes: []string{"aaa"}, no: []string{"aa", "aaaa"}},
		{src: `root ::= "ab"{2,}`, yes: []string{"abab", "ababab"}, no: []string{"ab", "aba"}},
		{src: `root ::= "a" "b"{0} "c"`, yes: []string{"ac"}, no: []string{"abc"}},
		{src: `root ::= .`, yes: []string{"a", "é", "😀", "\n"}, no: []string{"", "ab"}},
		{src: `root ::= "\x41\u00e9\U0001F600\n\t\"\\"`, yes: []string{"Aé😀\n\t\"\\"}},
		{src: `root ::= [\[\]\-\^]+`, yes: []string{"[]-^"}, no: []string{"a"}},
		{src: `root ::= [^"\\]* "\""`, yes: []string{`abc"`, `é"`, `"`}, no: []string{`a\"`}},
		{src: `root ::= [α-ω]+`, yes: []string{"αβγ"}, no: []string{"a"}},
		{ // rules span lines, comments, forward references, recursion
			src: "# a comment\nroot ::= list   # trailing comment\nlist ::= \"[\" (item (\",\" item)*)? \"]\"\n" +
				"item ::=\n  list |\n  [0-9]+\n",
			yes: []string{"[]", "[1,2]", "[[1],[],[[3]]]"},
			no:  []string{"[", "[1,]", "[,1]", "1"},
		},
		{src: "root ::= a b\na ::= \"x\"?\nb ::= \"y\"?", yes: []string{"", "x", "y", "xy"}, no: []string{"yx"}},
		{src: `root ::= "a" root | "b"`, yes: []string{"b", "ab", "aaab"}, no: []string{"a", "ba"}},
		{ // the group's made-up rule would be root-1: the grammar's own root-1 keeps its name
			src: "root ::= (\"a\" | \"b\") root-1 root-2*\nroot-1 ::= \"c\"\nroot-2 ::= \"d\"", yes: []string{"ac", "bcdd"}, no: []string{"a", "ab", "abc"},
		},
		{ // an alternative that can never end is dropped: "(" is not even a prefix
			src: "root ::= \"a\" | \"(\" x \")\"\nx ::= \"[\" x \"]\"", yes: []string{"a"}, no: []string{"(", "([", "()"},
		},
	}
	for _, c := range cases {
		g := mustParse(t, c.src)
		for _, s := range c.yes {
			if !accepts(g, s) {
				t.Errorf("%s: rejects %q", c.src, s)
			}
		}
		for _, s := range c.no {
			if accepts(g, s) {
				t.Errorf("%s: accepts %q", c.src, s)
			}
		}
		for _, s := range c.prefixes {
			if !prefix(g, s) {
				t.Errorf("%s: rejects the prefix %q", c.src, s)
			}
		}
		// The rendered internal form parses to the same language.
		g2, err := Parse(g.String())
		if err != nil {
			t.Errorf("%s: reparsing %q: %v", c.src, g.String(), err)
			continue
		}
		for _, s := range append(c.yes, c.no...) {
			if accepts(g, s) != accepts(g2, s) {
				t.Errorf("%s: the rendered grammar disagrees on %q:\n%s", c.src, s, g.String())
			}
		}
	}
}

// TestParseErrors checks that bad grammars are refused with the line and column of the
// problem.
func TestParseErrors(t *testing.T) {
	cases := []struct{ src, want string }{
		{``, "no rules"},
		{`item ::= "a"`, "no rule named root"},
		{"root ::= item\n", `line 1, column 10: rule "item" is used but not defined`},
		{"root ::= \"a\"\nroot ::= \"b\"", `line 2, column 1: rule "root" is defined twice (first at line 1, column 1)`},
		{`root ::= "abc`, "line 1, column 10: unterminated string literal"},
		{`root ::= [abc`, "line 1, column 10: unterminated character class"},
		{`root ::= [z-a]`, "line 1, column 11: character range 'z'-'a' is reversed"},
		{`root ::= []`, "empty character class"},
		{`root ::= ("a"`, "line 1, column 10: unclosed ("},
		{`root ::= "a" )`, "line 1, column 14: unexpected \")\""},
		{`root ::= "\q"`, `line 1, column 11: unknown escape \q`},
		{`root ::= "\x4"`, `\x needs 2 hex digits`},
		{`root ::= "\U00110000"`, "beyond U+10FFFF"},
		{`root ::= "a\uD800"`, "line 1, column 12: the surrogate code point U+D800"},
		{`root ::= [\uD800-\uDBFF]`, "line 1, column 10: the character class matches no character"},
		{`root ::= "a"{3,1}`, "maximum below its minimum"},
		{`root ::= "a"{`, "expected a number after {"},
		{`root ::= "a"{2`, "expected } to close"},
		{`root ::= "a"{99999}`, "over the limit of 10000"},
		{"root ::= \"a\"\n  ::= \"b\"", `line 2, column 3: unexpected ":"`},
		{`root = "a"`, `expected ::= after rule name "root"`},
		{"root ::= root \"a\" | \"b\"", `rule "root" is left-recursive`},
		{"root ::= a\na ::= b? a \"x\" | \"z\"\nb ::= \"y\"", `rule "a" is left-recursive`},
		{"root ::= \"(\" root \")\"", `line 1, column 1: the root rule matches no finite text`},
		{"root ::= " + strings.Repeat("(", MaxNesting+1) + `"a"` + strings.Repeat(")", MaxNesting+1), "nested more than 64 deep"},
		{"root ::= \"\xff\"", "line 1, column 11: invalid UTF-8"},
		{"root ::= " + strings.Repeat(`"a"{10000} `, 30), "more than 262144 elements"},
		{"root ::= " + strings.Repeat(`"ab"{0,10000} `, 4), "more than 32768 rules"},
		{`root ::= ("a"?)*`, "left-recursive"}, // the star of a nullable group, as llama.cpp
		{"root ::= " + strings.Repeat("x", MaxSource), "more than the limit"},
	}
	for _, c := range cases {
		_, err := Parse(c.src)
		if err == nil {
			t.Errorf("Parse(%.60q) succeeded, want an error containing %q", c.src, c.want)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "grammar: ") {
			t.Errorf("Parse(%.60q) = %v, want an error containing %q", c.src, err, c.want)
		}
	}
}

// TestMatcherUTF8 checks partial characters: a prefix of a character the grammar allows is
// accepted, a byte that cannot complete one (or invalid UTF-8) is not.
func TestMatcherUTF8(t *testing.T) {
	g := mustParse(t, `root ::= [a-zé]+`)
	m := g.NewMatcher()
	if !m.Accept([]byte{0xC3}) || m.Complete() {
		t.Fatal("0xC3 (the lead byte of é) rejected, or complete")
	}
	if m.Accept([]byte{0xA8}) { // è, not é
		t.Fatal("accepted è")
	}
	if !m.Accept([]byte{0xA9}) || !m.Complete() {
		t.Fatal("é not accepted")
	}
	for _, bad := range [][]byte{{0xE4}, {0xC0, 0x80}, {0x80}, {0xF5}} {
		if g.NewMatcher().Accept(bad) {
			t.Errorf("accepted %x", bad)
		}
	}
	// Any character: invalid UTF-8, overlong forms and surrogates are refused.
	any := mustParse(t, `root ::= .*`)
	for _, bad := range [][]byte{{0xED, 0xA0}, {0xE0, 0x80}, {0xC1}, {0xF4, 0x90}, {0xFF}, {0xF0, 0x8F}, {0xE1, 0x41},
		{0xED, 0xBF, 0xBF}, {0xE1, 0x80, 0x80, 0x80}, {0xF1, 0x80, 0x80, 0xC0}} {
		if any.NewMatcher().Accept(bad) {
			t.Errorf(". accepted %x", bad)
		}
	}
	for _, good := range []string{"日本語", "😀x", "\u007f\u0080\u07ff\u0800\uffff\U00010000\U0010ffff", "\ud7ff\ue000\u0fff\u1000\U0003ffff\U00040000"} {
		if !accepts(any, good) {
			t.Errorf(". rejected %q", good)
		}
	}
}

// TestMatcherAmbiguity checks that an ambiguous grammar is followed without blowing up,
// and that one beyond the limits fails with ErrTooComplex.
func TestMatcherAmbiguity(t *testing.T) {
	g := mustParse(t, `root ::= ("a" | "a" "a" | "a"+)* "b"`)
	if !accepts(g, strings.Repeat("a", 200)+"b") {
		t.Error("rejects a^200 b")
	}
	// After n a's the parses are the 2^n sequences of pending closers: past MaxStacks the
	// grammar is refused.
	h := mustParse(t, "root ::= s\ns ::= \"a\" s \"b\" | \"a\" s \"c\" | \"\"")
	if !accepts(h, "aaacbb") || accepts(h, "aab") {
		t.Error("wrong language")
	}
	m := h.NewMatcher()
	if !m.Accept([]byte(strings.Repeat("a", 10))) || m.Err() != nil {
		t.Fatalf("rejects a^10 (about %d parses): %v", 3<<10, m.Err())
	}
	if m.Accept([]byte("aa")) || m.Err() != ErrTooComplex {
		t.Fatalf("a^12 (about %d parses): err %v, want ErrTooComplex", 3<<12, m.Err())
	}
	deep := mustParse(t, `root ::= "(" root ")" | "x"`)
	s := strings.Repeat("(", MaxStackDepth+10)
	if prefix(deep, s) {
		t.Errorf("accepted nesting deeper than %d", MaxStackDepth)
	}
	if !accepts(deep, strings.Repeat("(", 100)+"x"+strings.Repeat(")", 100)) {
		t.Error("rejects nesting 100 deep")
	}
}

// TestMatcherCompact runs a Matcher through more states than it keeps and checks that it
// still follows the grammar after forgetting them.
func TestMatcherCompact(t *testing.T) {
	g := mustParse(t, `root ::= "a"{0,10000} "b" "a"{0,10000}`)
	m := g.NewMatcher()
	epoch := m.a.epoch
	for i := range 9000 {
		if !m.Accept([]byte("a")) {
			t.Fatalf("rejected a %d", i)
		}
	}
	if !m.Accept([]byte("b")) {
		t.Fatal("rejected b")
	}
	for i := range 9000 {
		if !m.Accept([]byte("a")) {
			t.Fatalf("rejected a %d after b", i)
		}
	}
	if m.a.epoch == epoch {
		t.Fatalf("%d states and no compaction", len(m.a.states))
	}
	if !m.Complete() || !m.Accept([]byte(strings.Repeat("a", 1000))) || !m.Complete() || m.Accept([]byte("a")) {
		t.Fatal("wrong language after compaction")
	}
}

// FuzzParseGrammar checks that Parse never panics, and that a grammar it accepts renders
// to one that parses and that a Matcher can run on.
func FuzzParseGrammar(f *testing.F) {
	for _, s := range []string{
		`root ::= "a"`, `root ::= [^a-z]* | "x"{2,5} ("y" | z)?` + "\nz ::= .",
		"root ::= value\nvalue ::= \"[\" (value (\",\" value)*)? \"]\" | [0-9]+ # c",
		`root ::= "\u00e9\x41\U0001F600" [\]\[-]`, `root ::= (("a"))+ "b"{0,}`, `root ::= root`,
		`root ::= [`, `root ::= "a" | `, "root ::= a\na ::= b\nb ::= a",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		g, err := Parse(src)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "grammar: ") {
				t.Fatalf("error without the package prefix: %v", err)
			}
			return
		}
		if _, err := Parse(g.String()); err != nil {
			t.Fatalf("the rendered grammar does not parse: %v\n%s", err, g.String())
		}
		m := g.NewMatcher()
		m.Accept([]byte(src[:min(len(src), 64)]))
		m.Complete()
	})
}
