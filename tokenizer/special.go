package tokenizer

import (
	"cmp"
	"slices"
)

// Special-token partitioning, as llama.cpp's tokenizer_st_partition does it: the special
// tokens (control, user-defined and unknown types) are taken longest text first; each splits
// every piece of raw text left so far at its leftmost non-overlapping occurrences. Control
// and unknown tokens take part only with ParseSpecial; user-defined tokens always do (as in
// Hugging Face tokenizers, where added non-special tokens are split out before
// pre-tokenization).
//
// Rather than rescanning the text once per special token (Llama 3 has 256), one pass over a
// trie of the token texts finds every occurrence; replaying the occurrences token by token in
// llama.cpp's order then gives the same partition.

// specialMatcher finds occurrences of special token texts.
type specialMatcher struct {
	first [256]bool        // bytes a special token text can start with
	edges map[uint64]int32 // node<<8 | byte -> child node
	term  []int32          // node -> index into toks of the token ending there, or -1
	toks  []int32          // special token ids, in llama.cpp's order: longest text first
	lens  []int32          // text length of toks[i]
	plain []bool           // toks[i] takes part without ParseSpecial (user-defined)
}

func newSpecialMatcher(t *Tokenizer) *specialMatcher {
	m := &specialMatcher{edges: map[uint64]int32{}, term: []int32{-1}}
	for id, a := range t.attrs {
		if a&(attrControl|attrUserDefined|attrUnknown) != 0 {
			m.toks = append(m.toks, int32(id))
		}
	}
	// llama.cpp sorts by length with std::sort (unstable); ties go by id here. Only two
	// equal-length special texts overlapping in the input could tell the difference.
	slices.SortStableFunc(m.toks, func(a, b int32) int {
		return cmp.Compare(len(t.tokens[b]), len(t.tokens[a]))
	})
	for i, id := range m.toks {
		text := t.tokens[id]
		m.lens = append(m.lens, int32(len(text)))
		m.plain = append(m.plain, t.attrs[id]&(attrControl|attrUnknown) == 0)
		m.first[text[0]] = true
		node := int32(0)
		for j := 0; j < len(text); j++ {
			k := uint64(node)<<8 | uint64(text[j])
			child, ok := m.edges[k]
			if !ok {
				child = int32(len(m.term))
				m.term = append(m.term, -1)
				m.edges[k] = child
			}
			node = child
		}
		m.term[node] = int32(i) // token texts are unique
	}
	return m
}

// occurrence is special token toks[tok] found at byte pos of the text.
type occurrence struct{ pos, tok int32 }

// fragment is a piece of the partitioned text: raw text [start, end) or a token (id >= 0).
type fragment struct {
	id         int32
	start, end int32
}

// partition appends the fragments of text to frags.
func (m *specialMatcher) partition(text string, parseSpecial bool, sc *scratch) []fragment {
	frags := sc.frags[:0]
	occ := sc.occ[:0]
	if len(m.toks) > 0 {
		for i := 0; i < len(text); i++ {
			if !m.first[text[i]] {
				continue
			}
			node := int32(0)
			for j := i; j < len(text); j++ {
				child, ok := m.edges[uint64(node)<<8|uint64(text[j])]
				if !ok {
					break
				}
				node = child
				if k := m.term[node]; k >= 0 && (parseSpecial || m.plain[k]) {
					occ = append(occ, occurrence{int32(i), k})
				}
			}
		}
	}
	sc.occ = occ
	if len(occ) == 0 {
		if len(text) > 0 {
			frags = append(frags, fragment{id: -1, start: 0, end: int32(len(text))})
		}
		sc.frags = frags
		return frags
	}
	slices.SortFunc(occ, func(a, b occurrence) int {
		if a.tok != b.tok {
			return cmp.Compare(a.tok, b.tok)
		}
		return cmp.Compare(a.pos, b.pos)
	})
	// Replay: token by token, an occurrence is taken if it starts after the token's previous
	// match and lies inside text no earlier (longer) token took.
	if cap(sc.covered) < len(text) {
		sc.covered = make([]bool, len(text))
	}
	covered := sc.covered[:len(text)]
	clear(covered)
	taken := sc.taken[:0]
	lastTok, lastEnd := int32(-1), int32(-1)
	for _, o := range occ {
		if o.tok != lastTok {
			lastTok, lastEnd = o.tok, -1
		}
		end := o.pos + m.lens[o.tok]
		if o.pos < lastEnd || slices.Contains(covered[o.pos:end], true) {
			continue
		}
		for i := o.pos; i < end; i++ {
			covered[i] = true
		}
		taken = append(taken, fragment{id: m.toks[o.tok], start: o.pos, end: end})
		lastEnd = end
	}
	slices.SortFunc(taken, func(a, b fragment) int { return cmp.Compare(a.start, b.start) })
	sc.taken = taken
	at := int32(0)
	for _, f := range taken {
		if f.start > at {
			frags = append(frags, fragment{id: -1, start: at, end: f.start})
		}
		frags = append(frags, f)
		at = f.end
	}
	if int(at) < len(text) {
		frags = append(frags, fragment{id: -1, start: at, end: int32(len(text))})
	}
	sc.frags = frags
	return frags
}
