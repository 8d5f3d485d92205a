package grammar

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Parse reads a GBNF grammar, llama.cpp's notation:
//
//	root   ::= object              # the start rule is named root
//	object ::= "{" ws ( pair ( "," ws pair )* )? "}"
//	pair   ::= [a-z]+ ":" ws [0-9]{1,3}
//	ws     ::= [ \t\n]*
//
// A rule is a name ([A-Za-z0-9_-]+), "::=" and alternatives separated by "|"; an
// alternative is a sequence of string literals ("..."), character classes ([a-z0-9_],
// [^"\\] negated), "." (any character), rule names and parenthesised groups, each
// optionally followed by *, +, ?, {m}, {m,} or {m,n}. Escapes: \n \r \t \\ \" \[ \] \- \^
// \xHH \uHHHH \UHHHHHHHH. "#" starts a comment to the end of the line. A rule ends where the
// next "name ::=" begins, so rules may span lines.
//
// An error names the line and column (1-based, columns in bytes) of the problem: a syntax
// error, an undefined or twice-defined rule, no root rule, left recursion (which a
// pushdown matcher cannot run), or a grammar over the package's limits.
func Parse(src string) (*Grammar, error) {
	if len(src) > MaxSource {
		return nil, fmt.Errorf("grammar: the grammar is %d bytes, more than the limit of %d", len(src), MaxSource)
	}
	if !utf8.ValidString(src) {
		i := 0
		for i < len(src) {
			r, n := utf8.DecodeRuneInString(src[i:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			i += n
		}
		p := &parser{src: src}
		return nil, p.errAt(i, "invalid UTF-8")
	}
	p := &parser{src: src, ids: map[string]int32{}}
	if err := p.parse(); err != nil {
		return nil, err
	}
	return p.build()
}

// parser builds rules as lists of alternatives, each a list of elements.
type parser struct {
	src   string
	pos   int
	depth int

	ids     map[string]int32 // rule name -> id
	names   []string
	alts    [][][]elem // rule id -> alternatives
	defined []int      // rule id -> source offset of its definition, -1 if not (yet) defined
	usedAt  []int      // rule id -> source offset of its first reference
	made    []bool     // rule id -> made for a group or repetition (renamed if the grammar uses its name)
	nElems  int
	sets    []charSet
	setIDs  map[string]int32
}

// errAt is an error at byte offset off of the source.
func (p *parser) errAt(off int, format string, a ...any) error {
	line, col := p.lineCol(off)
	return fmt.Errorf("grammar: line %d, column %d: %s", line, col, fmt.Sprintf(format, a...))
}

// lineCol is the 1-based line and byte column of offset off.
func (p *parser) lineCol(off int) (line, col int) {
	line, col = 1, 1
	for i := 0; i < off && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}

func (p *parser) errf(format string, a ...any) error { return p.errAt(p.pos, format, a...) }

// skip passes over spaces, tabs, newlines and comments.
func (p *parser) skip() {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		default:
			return
		}
	}
}

func isNameChar(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

// name reads a rule name at pos ("" if there is none).
func (p *parser) name() string {
	start := p.pos
	for p.pos < len(p.src) && isNameChar(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// atRuleStart reports whether "name ::=" begins at pos.
func (p *parser) atRuleStart() bool {
	save := p.pos
	defer func() { p.pos = save }()
	if p.name() == "" {
		return false
	}
	p.skip()
	return strings.HasPrefix(p.src[p.pos:], "::=")
}

// rule returns the id of name, making it if new.
func (p *parser) rule(name string) (int32, error) {
	if id, ok := p.ids[name]; ok {
		if !p.made[id] {
			return id, nil
		}
		// A rule made for a group took a name the grammar itself uses: rename the made one.
		fresh := name + "_"
		for _, taken := p.ids[fresh]; taken; _, taken = p.ids[fresh] {
			fresh += "_"
		}
		p.names[id] = fresh
		p.ids[fresh] = id
		delete(p.ids, name)
	}
	return p.add(name)
}

// add makes a rule called name.
func (p *parser) add(name string) (int32, error) {
	if len(p.names) >= MaxRules {
		return 0, p.errf("more than %d rules (groups and repetitions make rules too)", MaxRules)
	}
	id := int32(len(p.names))
	p.ids[name] = id
	p.names = append(p.names, name)
	p.alts = append(p.alts, nil)
	p.defined = append(p.defined, -1)
	p.usedAt = append(p.usedAt, -1)
	p.made = append(p.made, false)
	return id, nil
}

// newRule makes a rule for a group or repetition, named after the rule it appears in.
func (p *parser) newRule(base string, alts [][]elem) (int32, error) {
	name := fmt.Sprintf("%s-%d", base, len(p.names))
	for _, taken := p.ids[name]; taken; _, taken = p.ids[name] {
		name += "_"
	}
	id, err := p.add(name)
	if err != nil {
		return 0, err
	}
	p.made[id] = true
	p.alts[id] = alts
	p.defined[id] = p.pos
	return id, p.count(alts)
}

// count adds the elements of alts (and their end markers) to the budget.
func (p *parser) count(alts [][]elem) error {
	for _, a := range alts {
		p.nElems += len(a) + 1
	}
	if p.nElems > MaxElements {
		return p.errf("the grammar expands to more than %d elements", MaxElements)
	}
	return nil
}

func (p *parser) parse() error {
	for {
		p.skip()
		if p.pos >= len(p.src) {
			break
		}
		start := p.pos
		name := p.name()
		if name == "" {
			return p.errf("expected a rule name, found %q", p.peekRune())
		}
		p.skip()
		if !strings.HasPrefix(p.src[p.pos:], "::=") {
			return p.errf("expected ::= after rule name %q", name)
		}
		p.pos += 3
		id, err := p.rule(name)
		if err != nil {
			return err
		}
		if d := p.defined[id]; d >= 0 {
			l, c := p.lineCol(d)
			return p.errAt(start, "rule %q is defined twice (first at line %d, column %d)", name, l, c)
		}
		p.defined[id] = start
		alts, err := p.alternates(name)
		if err != nil {
			return err
		}
		p.alts[id] = alts
		if err := p.count(alts); err != nil {
			return err
		}
		p.skip()
		if p.pos < len(p.src) && !p.atRuleStart() {
			return p.errf("unexpected %q (expected a new rule)", p.peekRune())
		}
	}
	return nil
}

func (p *parser) peekRune() string {
	if p.pos >= len(p.src) {
		return "end of grammar"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	return string(r)
}

// alternates reads sequences separated by "|" (inside rule base).
func (p *parser) alternates(base string) ([][]elem, error) {
	var alts [][]elem
	for {
		seq, err := p.sequence(base)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		p.skip()
		if p.pos < len(p.src) && p.src[p.pos] == '|' {
			p.pos++
			continue
		}
		return alts, nil
	}
}

// sequence reads items up to "|", ")", the end, or the start of the next rule.
func (p *parser) sequence(base string) ([]elem, error) {
	var seq []elem
	for {
		p.skip()
		if p.pos >= len(p.src) {
			return seq, nil
		}
		c := p.src[p.pos]
		if c == '|' || c == ')' || p.atRuleStart() {
			return seq, nil
		}
		start := p.pos
		atom, err := p.atom(base)
		if err != nil {
			return nil, err
		}
		if atom, err = p.postfix(base, atom, start); err != nil {
			return nil, err
		}
		seq = append(seq, atom...)
		if len(seq) > MaxElements {
			return nil, p.errf("the grammar expands to more than %d elements", MaxElements)
		}
	}
}

// atom reads a literal, class, ".", name or group.
func (p *parser) atom(base string) ([]elem, error) {
	switch c := p.src[p.pos]; {
	case c == '"':
		return p.literal()
	case c == '[':
		return p.class()
	case c == '.':
		p.pos++
		return []elem{p.set([]runeRange{{0, maxRune}}, false)}, nil
	case c == '(':
		open := p.pos
		p.pos++
		if p.depth++; p.depth > MaxNesting {
			return nil, p.errAt(open, "parentheses nested more than %d deep", MaxNesting)
		}
		alts, err := p.alternates(base)
		if err != nil {
			return nil, err
		}
		p.depth--
		p.skip()
		if p.pos >= len(p.src) || p.src[p.pos] != ')' {
			return nil, p.errAt(open, "unclosed (")
		}
		p.pos++
		id, err := p.newRule(base, alts)
		if err != nil {
			return nil, err
		}
		return []elem{{kRef, id}}, nil
	case isNameChar(c):
		at := p.pos
		id, err := p.rule(p.name())
		if err != nil {
			return nil, err
		}
		if p.usedAt[id] < 0 {
			p.usedAt[id] = at
		}
		return []elem{{kRef, id}}, nil
	}
	return nil, p.errf("unexpected %q", p.peekRune())
}

// set interns a character set and returns the element matching one of its code points.
func (p *parser) set(rs []runeRange, negated bool) elem {
	s := newCharSet(rs, negated)
	var key strings.Builder
	for _, r := range s.ranges {
		fmt.Fprintf(&key, "%x-%x,", r.lo, r.hi)
	}
	if p.setIDs == nil {
		p.setIDs = map[string]int32{}
	}
	id, ok := p.setIDs[key.String()]
	if !ok {
		id = int32(len(p.sets))
		p.sets = append(p.sets, s)
		p.setIDs[key.String()] = id
	}
	return elem{kChar, id}
}

// char reads one (possibly escaped) character of a literal or class.
func (p *parser) char() (rune, error) {
	if p.pos >= len(p.src) {
		return 0, p.errf("unexpected end of grammar")
	}
	if p.src[p.pos] != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	at := p.pos
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errAt(at, "unexpected end of grammar after \\")
	}
	e := p.src[p.pos]
	p.pos++
	switch e {
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case '\\', '"', '[', ']', '-', '^', '/', '\'':
		return rune(e), nil
	case 'x', 'u', 'U':
		n := map[byte]int{'x': 2, 'u': 4, 'U': 8}[e]
		if p.pos+n > len(p.src) {
			return 0, p.errAt(at, "\\%c needs %d hex digits", e, n)
		}
		v, err := strconv.ParseUint(p.src[p.pos:p.pos+n], 16, 32)
		if err != nil {
			return 0, p.errAt(at, "\\%c needs %d hex digits, got %q", e, n, p.src[p.pos:p.pos+n])
		}
		if v > maxRune {
			return 0, p.errAt(at, "code point %#x is beyond U+10FFFF", v)
		}
		p.pos += n
		return rune(v), nil
	}
	return 0, p.errAt(at, "unknown escape \\%c", e)
}

func (p *parser) literal() ([]elem, error) {
	open := p.pos
	p.pos++
	var seq []elem
	for {
		if p.pos >= len(p.src) {
			return nil, p.errAt(open, "unterminated string literal")
		}
		if p.src[p.pos] == '"' {
			p.pos++
			return seq, nil
		}
		at := p.pos
		c, err := p.char()
		if err != nil {
			return nil, err
		}
		if c >= 0xD800 && c <= 0xDFFF {
			return nil, p.errAt(at, "the surrogate code point %U is not a character of UTF-8 text", c)
		}
		seq = append(seq, p.set([]runeRange{{c, c}}, false))
		if len(seq) > MaxElements {
			return nil, p.errAt(open, "the literal is longer than %d characters", MaxElements)
		}
	}
}

func (p *parser) class() ([]elem, error) {
	open := p.pos
	p.pos++
	negated := false
	if p.pos < len(p.src) && p.src[p.pos] == '^' {
		negated = true
		p.pos++
	}
	var rs []runeRange
	for {
		if p.pos >= len(p.src) {
			return nil, p.errAt(open, "unterminated character class")
		}
		if p.src[p.pos] == ']' {
			p.pos++
			break
		}
		at := p.pos
		lo, err := p.char()
		if err != nil {
			return nil, err
		}
		hi := lo
		if p.pos+1 < len(p.src) && p.src[p.pos] == '-' && p.src[p.pos+1] != ']' {
			p.pos++
			if hi, err = p.char(); err != nil {
				return nil, err
			}
			if hi < lo {
				return nil, p.errAt(at, "character range %q-%q is reversed", lo, hi)
			}
		}
		rs = append(rs, runeRange{lo, hi})
	}
	if len(rs) == 0 && !negated {
		return nil, p.errAt(open, "empty character class [] matches nothing")
	}
	e := p.set(rs, negated)
	if set := &p.sets[e.arg]; !set.overlaps(0, 0xD7FF) && !set.overlaps(0xE000, maxRune) {
		return nil, p.errAt(open, "the character class matches no character (surrogates are not characters of UTF-8 text)")
	}
	return []elem{e}, nil
}

// postfix applies the repetition operators after an atom (which starts at offset start).
func (p *parser) postfix(base string, atom []elem, start int) ([]elem, error) {
	for p.pos < len(p.src) {
		c := p.src[p.pos]
		if c != '*' && c != '+' && c != '?' && c != '{' {
			return atom, nil
		}
		op := p.pos
		p.pos++
		lo, hi := 0, -1 // hi -1: unbounded
		switch c {
		case '+':
			lo = 1
		case '?':
			hi = 1
		case '{':
			var err error
			if lo, hi, err = p.braces(op); err != nil {
				return nil, err
			}
		}
		// Repeat a single element: a multi-element atom (a literal) becomes a rule first.
		if len(atom) != 1 {
			id, err := p.newRule(base, [][]elem{atom})
			if err != nil {
				return nil, err
			}
			atom = []elem{{kRef, id}}
		}
		var err error
		if atom, err = p.repeat(base, atom[0], lo, hi, op); err != nil {
			return nil, err
		}
	}
	return atom, nil
}

// braces reads {m}, {m,} or {m,n} after the "{" at op.
func (p *parser) braces(op int) (int, int, error) {
	num := func() (int, bool, error) {
		p.skip()
		s := p.pos
		for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
			p.pos++
		}
		if s == p.pos {
			return 0, false, nil
		}
		v, err := strconv.Atoi(p.src[s:p.pos])
		if err != nil || v > MaxRepeat {
			return 0, false, p.errAt(s, "repetition count %s is over the limit of %d", p.src[s:p.pos], MaxRepeat)
		}
		p.skip()
		return v, true, nil
	}
	lo, ok, err := num()
	if err != nil {
		return 0, 0, err
	}
	if !ok {
		return 0, 0, p.errAt(op, "expected a number after {")
	}
	hi := lo
	if p.pos < len(p.src) && p.src[p.pos] == ',' {
		p.pos++
		v, ok, err := num()
		if err != nil {
			return 0, 0, err
		}
		hi = -1
		if ok {
			hi = v
		}
	}
	if p.pos >= len(p.src) || p.src[p.pos] != '}' {
		return 0, 0, p.errAt(op, "expected } to close the repetition")
	}
	p.pos++
	if hi >= 0 && hi < lo {
		return 0, 0, p.errAt(op, "repetition {%d,%d} has its maximum below its minimum", lo, hi)
	}
	return lo, hi, nil
}

// repeat expands x{lo,hi} (hi -1: unbounded) into elements, as llama.cpp does: lo copies of
// x, then either a rule r ::= x r | (empty) for the unbounded tail, or a chain of hi-lo
// nested optional rules.
func (p *parser) repeat(base string, x elem, lo, hi, op int) ([]elem, error) {
	if p.nElems+lo+2*max(hi-lo, 0) > MaxElements {
		return nil, p.errAt(op, "the repetition expands to more than %d elements", MaxElements)
	}
	seq := make([]elem, 0, lo+1)
	for range lo {
		seq = append(seq, x)
	}
	p.nElems += lo
	if hi < 0 {
		id, err := p.newRule(base, nil)
		if err != nil {
			return nil, err
		}
		p.alts[id] = [][]elem{{x, {kRef, id}}, {}}
		if err := p.count(p.alts[id]); err != nil {
			return nil, err
		}
		return append(seq, elem{kRef, id}), nil
	}
	if hi == lo {
		if len(seq) == 0 { // x{0}: matches only the empty string
			id, err := p.newRule(base, [][]elem{{}})
			if err != nil {
				return nil, err
			}
			return []elem{{kRef, id}}, nil
		}
		return seq, nil
	}
	var tail []elem // the optional chain, innermost first
	for range hi - lo {
		id, err := p.newRule(base, [][]elem{append([]elem{x}, tail...), {}})
		if err != nil {
			return nil, err
		}
		tail = []elem{{kRef, id}}
	}
	return append(seq, tail...), nil
}

// build checks the rules (all defined, a root, no left recursion) and flattens them.
func (p *parser) build() (*Grammar, error) {
	if len(p.names) == 0 {
		return nil, p.errAt(0, "the grammar has no rules")
	}
	for id, d := range p.defined {
		if d < 0 {
			return nil, p.errAt(p.usedAt[id], "rule %q is used but not defined", p.names[id])
		}
	}
	root, ok := p.ids["root"]
	if !ok {
		return nil, p.errAt(0, "the grammar has no rule named root")
	}
	if !p.prune()[root] {
		return nil, p.errAt(p.defined[root], "the root rule matches no finite text (every alternative recurses forever)")
	}
	if err := p.leftRecursion(); err != nil {
		return nil, err
	}
	g := &Grammar{names: p.names, sets: p.sets, root: root, rules: make([][]int32, len(p.alts))}
	g.elems = make([]elem, 0, p.nElems)
	for id, alts := range p.alts {
		for _, a := range alts {
			g.rules[id] = append(g.rules[id], int32(len(g.elems)))
			g.elems = append(g.elems, a...)
			g.elems = append(g.elems, elem{kind: kEnd})
		}
	}
	return g, nil
}

// prune drops the alternatives that reference a rule matching no finite text (one whose
// every alternative recurses), so a matcher never follows a path that cannot end; it
// returns which rules match some finite text.
func (p *parser) prune() []bool {
	productive := make([]bool, len(p.alts))
	for changed := true; changed; {
		changed = false
		for id, alts := range p.alts {
			if productive[id] {
				continue
			}
			for _, a := range alts {
				if allProductive(a, productive) {
					productive[id], changed = true, true
					break
				}
			}
		}
	}
	for id, alts := range p.alts {
		kept := alts[:0]
		for _, a := range alts {
			if allProductive(a, productive) {
				kept = append(kept, a)
			}
		}
		p.alts[id] = kept
	}
	return productive
}

// allProductive reports whether every rule alternative a references is productive (matches some
// finite text).
func allProductive(a []elem, productive []bool) bool {
	for _, e := range a {
		if e.kind == kRef && !productive[e.arg] {
			return false
		}
	}
	return true
}

// leftRecursion refuses a rule that can reach itself without consuming a character: the
// matcher would expand it forever.
func (p *parser) leftRecursion() error {
	n := len(p.alts)
	nullable := make([]bool, n)
	for changed := true; changed; {
		changed = false
		for id, alts := range p.alts {
			if nullable[id] {
				continue
			}
			for _, a := range alts {
				all := true
				for _, e := range a {
					if e.kind != kRef || !nullable[e.arg] {
						all = false
						break
					}
				}
				if all {
					nullable[id], changed = true, true
					break
				}
			}
		}
	}
	// first[id]: the rules id can begin with.
	first := make([][]int32, n)
	for id, alts := range p.alts {
		for _, a := range alts {
			for _, e := range a {
				if e.kind != kRef {
					break
				}
				first[id] = append(first[id], e.arg)
				if !nullable[e.arg] {
					break
				}
			}
		}
	}
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, n)
	type frame struct{ id, next int32 }
	for start := range n {
		if color[start] != white {
			continue
		}
		stack := []frame{{int32(start), 0}}
		color[start] = grey
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			if int(f.next) == len(first[f.id]) {
				color[f.id] = black
				stack = stack[:len(stack)-1]
				continue
			}
			c := first[f.id][f.next]
			f.next++
			switch color[c] {
			case grey:
				at := p.defined[c]
				return p.errAt(at, "rule %q is left-recursive (it can reach itself without matching a character)", p.names[c])
			case white:
				color[c] = grey
				stack = append(stack, frame{c, 0})
			}
		}
	}
	return nil
}
