package grammar

import (
	"encoding/binary"
	"errors"
	"slices"
	"unsafe"
)

// Limits of a Matcher.
const (
	// MaxStackDepth is the deepest nesting of rules a Matcher follows (JSON nested this deep
	// is not generated); a deeper path is dropped as if the grammar rejected it.
	MaxStackDepth = 1024
	// MaxStacks is the most parses a Matcher follows at once; a grammar so ambiguous that a
	// byte leaves more is refused (ErrTooComplex).
	MaxStacks = 4096
	// maxStates is how many automaton states a Matcher keeps between bytes before it
	// forgets them all (they are rebuilt as needed).
	maxStates = 1 << 14
	// hardStates is the most automaton states a Matcher makes while one token mask is
	// computed; past it the grammar is refused as too complex (ErrTooComplex).
	hardStates = 1 << 15
	// maxExpand bounds the work of expanding one set of stacks.
	maxExpand = 1 << 16
)

// ErrTooComplex is returned when a grammar is so ambiguous that following it exceeds
// MaxStacks parses or the expansion budget.
var ErrTooComplex = errors.New("grammar: the grammar is too ambiguous to follow (more than the limit of simultaneous parses)")

// stackNode is an interned stack: its top position (an index into elems) and the rest.
// Stack 0 is the empty stack (the grammar is complete).
type stackNode struct {
	pos    int32
	parent int32
	depth  int32
}

// partial UTF-8 state of an automaton state: 0 when at a character boundary, else the bits
// so far (value), the bytes still needed (rem) and the character's length (n).
type utf8State uint32

func (u utf8State) rem() uint32 { return uint32(u) >> 30 }
func (u utf8State) n() uint32   { return (uint32(u) >> 28) & 3 }
func (u utf8State) value() rune { return rune(uint32(u) & 0x1FFFFF) }
func mkUTF8(v rune, rem, n uint32) utf8State {
	return utf8State(rem<<30 | (n&3)<<28 | uint32(v))
}

// state is an automaton state: a set of stacks (sorted ids) and a partial character.
type state struct {
	stacks   []int32
	partial  utf8State
	complete bool
	next     *[256]int32 // state id + 1 for each byte, 0 not yet computed; nil until needed
}

// automaton interns stacks and states and caches transitions.
type automaton struct {
	g       *Grammar
	nodes   []stackNode
	nodeIDs map[[2]int32]int32
	states  []state
	ids     map[string]int32
	err     error // ErrTooComplex once hit
	epoch   int   // incremented on every flush; state ids of an older epoch are invalid
	scratch []int32
	keyBuf  []byte
	work    int
}

// dead is the id of the state without stacks: every byte is rejected.
const dead = 0

func newAutomaton(g *Grammar) *automaton {
	a := &automaton{g: g}
	a.reset()
	return a
}

func (a *automaton) reset() {
	a.nodes = append(a.nodes[:0], stackNode{pos: -1, parent: -1})
	a.nodeIDs = map[[2]int32]int32{}
	a.states = a.states[:0]
	a.ids = map[string]int32{}
	a.intern(nil, 0) // the dead state, id 0
	a.epoch++
}

// push returns the stack with pos on top of parent, or -1 when too deep.
func (a *automaton) push(parent, pos int32) int32 {
	k := [2]int32{pos, parent}
	if id, ok := a.nodeIDs[k]; ok {
		return id
	}
	d := a.nodes[parent].depth + 1
	if d > MaxStackDepth {
		return -1
	}
	id := int32(len(a.nodes))
	a.nodes = append(a.nodes, stackNode{pos: pos, parent: parent, depth: d})
	a.nodeIDs[k] = id
	return id
}

// expand adds to out the stacks that stack s leads to whose top is a character set (or
// the empty stack): a rule reference on top is replaced by each of its alternatives.
func (a *automaton) expand(s int32, out []int32) []int32 {
	if a.work++; a.work > maxExpand {
		a.err = ErrTooComplex
		return out
	}
	if s == 0 {
		return append(out, 0)
	}
	n := a.nodes[s]
	e := a.g.elems[n.pos]
	if e.kind == kChar {
		return append(out, s)
	}
	// A reference: continue after it (unless it ends the alternative: a tail call keeps
	// the stack flat), under each alternative of the rule.
	base := n.parent
	if a.g.elems[n.pos+1].kind != kEnd {
		if base = a.push(base, n.pos+1); base < 0 {
			return out
		}
	}
	for _, alt := range a.g.rules[e.arg] {
		if a.g.elems[alt].kind == kEnd {
			out = a.expand(base, out)
			continue
		}
		if t := a.push(base, alt); t >= 0 {
			out = a.expand(t, out)
		}
	}
	return out
}

// intern returns the id of the state of the given stacks (sorted, deduplicated here) and
// partial character, making it if new.
func (a *automaton) intern(stacks []int32, partial utf8State) int32 {
	slices.Sort(stacks)
	stacks = slices.Compact(stacks)
	if len(stacks) == 0 {
		if len(a.states) > 0 {
			return dead
		}
		partial = 0
	}
	if len(stacks) > MaxStacks {
		a.err = ErrTooComplex
		return dead
	}
	k := binary.LittleEndian.AppendUint32(a.keyBuf[:0], uint32(partial))
	for _, s := range stacks {
		k = binary.LittleEndian.AppendUint32(k, uint32(s))
	}
	a.keyBuf = k
	if id, ok := a.ids[unsafe.String(unsafe.SliceData(k), len(k))]; ok {
		return id
	}
	id := int32(len(a.states))
	st := state{stacks: slices.Clone(stacks), partial: partial}
	st.complete = partial == 0 && len(stacks) > 0 && stacks[0] == 0
	a.states = append(a.states, st)
	a.ids[string(k)] = id
	return id
}

// start is the state before any byte: the root rule expanded.
func (a *automaton) start() int32 {
	a.work = 0
	out := a.scratch[:0]
	for _, alt := range a.g.rules[a.g.root] {
		if a.g.elems[alt].kind == kEnd {
			out = append(out, 0)
			continue
		}
		if t := a.push(0, alt); t >= 0 {
			out = a.expand(t, out)
		}
	}
	a.scratch = out
	return a.intern(out, 0)
}

// step returns the state after byte b from state s (dead if b is rejected).
func (a *automaton) step(s int32, b byte) int32 {
	st := &a.states[s]
	if st.next != nil {
		if n := st.next[b]; n != 0 {
			return n - 1
		}
	}
	if len(a.states) >= hardStates {
		a.err = ErrTooComplex
		return dead
	}
	n := a.compute(s, b)
	st = &a.states[s] // compute may have grown the slice
	if st.next == nil {
		st.next = new([256]int32)
	}
	st.next[b] = n + 1
	return n
}

// compute works out the transition of s on b.
func (a *automaton) compute(s int32, b byte) int32 {
	if s == dead {
		return dead
	}
	st := a.states[s]
	a.work = 0
	p := st.partial
	if p.rem() == 0 {
		switch {
		case b < 0x80:
			return a.advance(st.stacks, rune(b))
		case b >= 0xC2 && b <= 0xDF:
			return a.filter(st.stacks, mkUTF8(rune(b&0x1F), 1, 2))
		case b >= 0xE0 && b <= 0xEF:
			return a.filter(st.stacks, mkUTF8(rune(b&0x0F), 2, 3))
		case b >= 0xF0 && b <= 0xF4:
			return a.filter(st.stacks, mkUTF8(rune(b&0x07), 3, 0)) // n 0 stands for 4
		}
		return dead
	}
	if b&0xC0 != 0x80 {
		return dead
	}
	v := p.value()<<6 | rune(b&0x3F)
	if rem := p.rem() - 1; rem > 0 {
		return a.filter(st.stacks, mkUTF8(v, rem, p.n()))
	}
	if v < minRune(p.n()) || v > maxRune || (v >= 0xD800 && v <= 0xDFFF) {
		return dead
	}
	return a.advance(st.stacks, v)
}

// minRune is the smallest code point of an encoding of n bytes (0 stands for 4), below
// which the encoding is overlong.
func minRune(n uint32) rune {
	switch n {
	case 2:
		return 0x80
	case 3:
		return 0x800
	}
	return 0x10000
}

// filter keeps the stacks whose top set has a code point starting with the partial
// character p.
func (a *automaton) filter(stacks []int32, p utf8State) int32 {
	bits := 6 * p.rem()
	lo := p.value() << bits
	hi := lo | (1<<bits - 1)
	lo = max(lo, minRune(p.n()))
	hi = min(hi, maxRune)
	if lo > hi || (lo >= 0xD800 && hi <= 0xDFFF) { // overlong, too large, or a surrogate
		return dead
	}
	out := a.scratch[:0]
	uniform := true // every set has all non-ASCII characters or none
	for _, s := range stacks {
		if s == 0 {
			continue
		}
		set := &a.g.sets[a.g.elems[a.nodes[s].pos].arg]
		uniform = uniform && set.high != highMixed
		if set.overlaps(lo, hi) {
			out = append(out, s)
		}
	}
	a.scratch = out
	if len(out) == 0 {
		return dead
	}
	// When no set tells non-ASCII characters apart, which one this is does not matter once
	// its prefix is known to be valid UTF-8: one representative prefix stands for all, so a
	// string state has a few dozen partial states instead of one per prefix in the vocabulary.
	whole := lo == p.value()<<bits && hi == p.value()<<bits|(1<<bits-1) // nothing clamped
	if uniform && whole && (hi < 0xD800 || lo > 0xDFFF) {
		p = mkUTF8(canonicalPrefix(p.rem(), p.n()), p.rem(), p.n())
	}
	return a.intern(out, p)
}

// canonicalPrefix is the smallest valid prefix value of a character of n bytes (0 stands for
// 4) with rem bytes still to come: its completions are all valid, non-surrogate characters.
func canonicalPrefix(rem, n uint32) rune {
	switch {
	case n == 2:
		return 0x02 // C2
	case n == 3 && rem == 2:
		return 0x01 // E1
	case n == 3:
		return 0x20 // E0 A0
	case rem == 3:
		return 0x01 // F1
	case rem == 2:
		return 0x10 // F0 90
	}
	return 0x400 // F0 90 80
}

// advance matches code point c against the top of every stack.
func (a *automaton) advance(stacks []int32, c rune) int32 {
	out := a.scratch[:0]
	for _, s := range stacks {
		if s == 0 {
			continue
		}
		n := a.nodes[s]
		if !a.g.sets[a.g.elems[n.pos].arg].has(c) {
			continue
		}
		rest := n.parent
		if a.g.elems[n.pos+1].kind != kEnd {
			if rest = a.push(rest, n.pos+1); rest < 0 {
				continue
			}
		}
		out = a.expand(rest, out)
	}
	a.scratch = out
	if a.err != nil {
		return dead
	}
	return a.intern(out, 0)
}

// stacksOf returns state s's stacks as position lists (bottom first), to carry the state
// over a reset.
func (a *automaton) stacksOf(s int32) ([][]int32, utf8State) {
	st := a.states[s]
	out := make([][]int32, 0, len(st.stacks))
	for _, id := range st.stacks {
		var ps []int32
		for ; id != 0; id = a.nodes[id].parent {
			ps = append(ps, a.nodes[id].pos)
		}
		slices.Reverse(ps)
		out = append(out, ps)
	}
	return out, st.partial
}

// restore interns a state from position lists after a reset.
func (a *automaton) restore(stacks [][]int32, partial utf8State) int32 {
	var ids []int32
	for _, ps := range stacks {
		id := int32(0)
		for _, p := range ps {
			id = a.push(id, p)
		}
		ids = append(ids, id)
	}
	return a.intern(ids, partial)
}

// Matcher follows a Grammar over the bytes of a text. It is not safe for concurrent use.
type Matcher struct {
	a   *automaton
	cur int32
}

// NewMatcher returns a Matcher at the start of the grammar.
func (g *Grammar) NewMatcher() *Matcher {
	m := &Matcher{a: newAutomaton(g)}
	m.cur = m.a.start()
	return m
}

// Reset goes back to the start of the grammar.
func (m *Matcher) Reset() {
	m.a.reset()
	m.a.err = nil
	m.cur = m.a.start()
}

// Accept advances over b if the grammar allows it (as a continuation of what was accepted
// so far) and reports whether it did; on false the Matcher is unchanged.
func (m *Matcher) Accept(b []byte) bool {
	m.compact()
	s := m.cur
	for _, c := range b {
		if s = m.a.step(s, c); s == dead {
			return false
		}
	}
	m.cur = s
	return true
}

// Complete reports whether the text accepted so far is a sentence of the grammar.
func (m *Matcher) Complete() bool { return m.a.states[m.cur].complete }

// Alive reports whether some byte can continue the text accepted so far.
func (m *Matcher) Alive() bool {
	st := &m.a.states[m.cur]
	for _, s := range st.stacks {
		if s != 0 {
			return true
		}
	}
	return false
}

// Err is ErrTooComplex if the grammar was too ambiguous to follow at some byte (which was
// then rejected), else nil.
func (m *Matcher) Err() error { return m.a.err }

// compact forgets the automaton's states when there are too many, keeping the current one.
func (m *Matcher) compact() {
	if len(m.a.states) <= maxStates && len(m.a.nodes) <= 4*maxStates {
		return
	}
	stacks, partial := m.a.stacksOf(m.cur)
	err := m.a.err
	m.a.reset()
	m.a.err = err
	m.cur = m.a.restore(stacks, partial)
}
