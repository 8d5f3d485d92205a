package grammar

import (
	"bytes"
	"fmt"
	"slices"
)

// Vocab is a vocabulary prepared for constraints: the tokens' bytes in a trie laid out in
// preorder, so that a node's subtree is the run of nodes up to its end index and a walk
// skips a rejected subtree with one jump. Build it once per vocabulary; it is immutable and
// safe for concurrent use by any number of Constraints.
type Vocab struct {
	size int
	// The trie: node 0 is the root (the empty prefix); node i > 0 is reached by byte b[i]
	// from the nearest node before it of depth depth[i]-1.
	b      []byte
	depth  []uint16
	end    []int32 // one past the last node of i's subtree
	tokOff []int32 // the tokens whose bytes end at node i: toks[tokOff[i]:tokOff[i+1]]
	toks   []int32
	eog    []int32
	isEOG  []bool

	pieceOff []int32 // token id -> its bytes, pieces[pieceOff[id]:pieceOff[id+1]]
	pieces   []byte
	maxLen   int
}

// maxPiece is the longest token NewVocab accepts, in bytes.
const maxPiece = 1 << 15

// NewVocab prepares a vocabulary of len(pieces) tokens: pieces[id] is the bytes token id
// adds to the text (empty for a control token, which a constraint never allows), eog the
// end-of-generation tokens, which a constraint allows exactly when the grammar is complete.
func NewVocab(pieces [][]byte, eog []int32) (*Vocab, error) {
	v := &Vocab{size: len(pieces), isEOG: make([]bool, len(pieces)), pieceOff: make([]int32, len(pieces)+1)}
	if len(pieces) == 0 {
		return nil, fmt.Errorf("grammar: the vocabulary is empty")
	}
	for _, id := range eog {
		if id < 0 || int(id) >= len(pieces) {
			return nil, fmt.Errorf("grammar: end-of-generation token %d is outside the vocabulary (0..%d)", id, len(pieces)-1)
		}
		if !v.isEOG[id] {
			v.isEOG[id] = true
			v.eog = append(v.eog, id)
		}
	}
	slices.Sort(v.eog)
	var order []int32
	for id, p := range pieces {
		if len(p) > maxPiece {
			return nil, fmt.Errorf("grammar: token %d is %d bytes long, more than the limit of %d", id, len(p), maxPiece)
		}
		v.pieces = append(v.pieces, p...)
		v.pieceOff[id+1] = int32(len(v.pieces))
		v.maxLen = max(v.maxLen, len(p))
		if len(p) > 0 && !v.isEOG[id] {
			order = append(order, int32(id))
		}
	}
	slices.SortStableFunc(order, func(x, y int32) int { return bytes.Compare(pieces[x], pieces[y]) })

	// Sorted keys visit the trie in preorder: each key shares a prefix with the previous
	// one, the path below it is closed (its subtrees end here) and new nodes follow.
	v.b, v.depth, v.end = []byte{0}, []uint16{0}, []int32{0}
	path := []int32{0} // path[d]: the node of depth d on the current key's path
	tokAt := []int32{} // the node of each token in order, nondecreasing
	var prev []byte
	for _, id := range order {
		p := pieces[id]
		lcp := 0
		for lcp < len(prev) && lcp < len(p) && prev[lcp] == p[lcp] {
			lcp++
		}
		for len(path) > lcp+1 {
			v.end[path[len(path)-1]] = int32(len(v.b))
			path = path[:len(path)-1]
		}
		for d := lcp; d < len(p); d++ {
			node := int32(len(v.b))
			v.b = append(v.b, p[d])
			v.depth = append(v.depth, uint16(d+1))
			v.end = append(v.end, 0)
			path = append(path, node)
		}
		tokAt = append(tokAt, path[len(path)-1])
		prev = p
	}
	for _, n := range path {
		v.end[n] = int32(len(v.b))
	}
	v.tokOff = make([]int32, len(v.b)+1)
	for _, n := range tokAt {
		v.tokOff[n+1]++
	}
	for i := 1; i < len(v.tokOff); i++ {
		v.tokOff[i] += v.tokOff[i-1]
	}
	v.toks = order // in node order already
	return v, nil
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return v.size }

// Nodes is the number of nodes of the trie (the root included).
func (v *Vocab) Nodes() int { return len(v.b) }

// EOG lists the end-of-generation tokens.
func (v *Vocab) EOG() []int32 { return slices.Clone(v.eog) }

// Piece is the bytes of token id (nil outside the vocabulary).
func (v *Vocab) Piece(id int32) []byte {
	if id < 0 || int(id) >= v.size {
		return nil
	}
	return v.pieces[v.pieceOff[id]:v.pieceOff[id+1]]
}

// maxMasks is how many token masks a Constraint caches (one per grammar state met).
const maxMasks = 64

// Constraint restricts a generation to a grammar over a vocabulary: Allowed is the set of
// tokens that may come next, Accept records the token that came. It is not safe for
// concurrent use; each generation has its own.
type Constraint struct {
	v     *Vocab
	m     *Matcher
	words int
	masks map[int32][]uint64 // by automaton state, for masks of epoch
	free  [][]uint64         // dropped masks, for reuse
	epoch int
	path  []int32       // the walk's state per trie depth
	tabs  []*[256]int32 // and that state's transitions
	done  bool          // an end-of-generation token was accepted
}

// NewConstraint starts a constraint at the beginning of g.
func NewConstraint(g *Grammar, v *Vocab) *Constraint {
	return &Constraint{v: v, m: g.NewMatcher(), words: (v.size + 63) / 64, masks: map[int32][]uint64{},
		path: make([]int32, v.maxLen+1), tabs: make([]*[256]int32, v.maxLen+1)}
}

// Matcher is the constraint's matcher (for Complete and Alive).
func (c *Constraint) Matcher() *Matcher { return c.m }

// Allowed returns the tokens that may come next as a bitset (bit id%64 of word id/64): the
// tokens whose bytes continue the grammar, and the end-of-generation tokens if the text so
// far is complete. After an end-of-generation token nothing is allowed. The slice is the
// constraint's own and must not be modified; it is valid until the next call of Allowed.
func (c *Constraint) Allowed() ([]uint64, error) {
	a := c.m.a
	c.m.compact()
	if c.epoch != a.epoch {
		c.dropMasks()
		c.epoch = a.epoch
	}
	if c.done {
		return make([]uint64, c.words), nil
	}
	if mask, ok := c.masks[c.m.cur]; ok {
		return mask, nil
	}
	if len(c.masks) >= maxMasks {
		c.dropMasks()
	}
	var mask []uint64
	if n := len(c.free); n > 0 {
		mask, c.free = c.free[n-1], c.free[:n-1]
		clear(mask)
	} else {
		mask = make([]uint64, c.words)
	}
	c.walk(c.m.cur, mask)
	if err := a.err; err != nil {
		return nil, err
	}
	if a.states[c.m.cur].complete {
		for _, id := range c.v.eog {
			mask[id>>6] |= 1 << (id & 63)
		}
	}
	c.masks[c.m.cur] = mask
	return mask, nil
}

// dropMasks forgets the cached masks, keeping their memory for the next ones.
func (c *Constraint) dropMasks() {
	for _, m := range c.masks {
		c.free = append(c.free, m)
	}
	clear(c.masks)
}

// walk sets in mask the tokens whose bytes the automaton accepts from state start: a
// preorder pass over the trie that jumps over the subtree of every rejected byte.
func (c *Constraint) walk(start int32, mask []uint64) {
	v, a := c.v, c.m.a
	path, tabs := c.path, c.tabs
	path[0], tabs[0] = start, a.states[start].next
	for i := 1; i < len(v.b); {
		d := v.depth[i]
		b := v.b[i]
		var s int32
		if nx := tabs[d-1]; nx != nil && nx[b] != 0 {
			s = nx[b] - 1
		} else {
			s = a.step(path[d-1], b)
			tabs[d-1] = a.states[path[d-1]].next // made by step if it was nil
		}
		if s == dead {
			i = int(v.end[i])
			continue
		}
		path[d], tabs[d] = s, a.states[s].next
		for _, t := range v.toks[v.tokOff[i]:v.tokOff[i+1]] {
			mask[t>>6] |= 1 << (t & 63)
		}
		i++
	}
}

// Accept advances over token id, which must be allowed: an error names a token the grammar
// rejects there, or an end-of-generation token before the grammar is complete.
func (c *Constraint) Accept(id int32) error {
	if id < 0 || int(id) >= c.v.size {
		return fmt.Errorf("grammar: token %d is outside the vocabulary (0..%d)", id, c.v.size-1)
	}
	if c.done {
		return fmt.Errorf("grammar: token %d after the end of generation", id)
	}
	if c.v.isEOG[id] {
		if !c.m.Complete() {
			return fmt.Errorf("grammar: end-of-generation token %d before the grammar is complete", id)
		}
		c.done = true
		return nil
	}
	p := c.v.Piece(id)
	if len(p) == 0 {
		return fmt.Errorf("grammar: token %d has no text (a control token) and cannot continue the grammar", id)
	}
	if !c.m.Accept(p) {
		if err := c.m.Err(); err != nil {
			return err
		}
		return fmt.Errorf("grammar: token %d (%q) does not continue the grammar", id, p)
	}
	return nil
}

// Complete reports whether the text accepted so far is a sentence of the grammar.
func (c *Constraint) Complete() bool { return c.m.Complete() }
