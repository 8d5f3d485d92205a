package tokenizer

// Byte-level BPE (tokenizer.ggml.model "gpt2"). A word is the UTF-8 of a pre-tokenizer piece;
// each of its bytes starts as one symbol (its character in GPT-2's byte alphabet), then the
// adjacent pair with the lowest merge rank is merged, leftmost first on ties, until no pair
// has a rank: the order llama.cpp's priority queue produces.
//
// Strings are interned: every token text and every string a merge names gets an id (a token's
// id is its token id), so a merge is a map lookup on two int32s.

// mergeResult is what merging a pair gives.
type mergeResult struct {
	rank   int32 // position in tokenizer.ggml.merges; lower merges first
	result int32 // interned id of the concatenation
}

// bpeModel is the merge table.
type bpeModel struct {
	merges   map[uint64]mergeResult
	byteSym  [256]int32 // interned id of each byte's alphabet character, -1 if none
	nTokens  int32      // interned ids below this are token ids
	extra    []string   // text of interned ids >= nTokens (merge parts that are not tokens)
	rawToID  map[string]int32
	ignoreMg bool
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// bpeSym is one symbol of a word being merged.
type bpeSym struct {
	id         int32 // interned id, -1 if the text is no known string
	prev, next int32 // neighbours, -1 at the ends
	start, end int32 // bytes of the word it covers
}

// bpeScratch is reused across words (from a sync.Pool) so steady-state encoding allocates
// only the output.
type bpeScratch struct {
	syms  []bpeSym
	queue bpeQueue
}

// bpeCand is a candidate merge of syms[left] with syms[right].
type bpeCand struct {
	rank        int32
	left, right int32
	lid, rid    int32 // ids when queued; a changed id means the candidate is stale
}

// bpeQueue is a binary min-heap of candidates by (rank, left). It is typed rather than a
// container/heap so pushing does not box (allocate) every candidate.
type bpeQueue []bpeCand

func (c bpeCand) less(d bpeCand) bool {
	return c.rank < d.rank || c.rank == d.rank && c.left < d.left
}

func (q *bpeQueue) push(c bpeCand) {
	h := append(*q, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].less(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	*q = h
}

func (q *bpeQueue) pop() bpeCand {
	h := *q
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].less(h[m]) {
			m = l
		}
		if r := l + 1; r < n && h[r].less(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	*q = h
	return top
}

// smallWord is the length up to which a quadratic scan beats the heap.
const smallWord = 48

// encodeWord appends the tokens of word (raw bytes of one pre-tokenizer piece).
func (t *Tokenizer) encodeWord(word string, sc *bpeScratch, out []int32) []int32 {
	if ids, ok := t.cache.get(word); ok {
		return append(out, ids...)
	}
	start := len(out)
	out = t.encodeWordUncached(word, sc, out)
	t.cache.put(word, out[start:])
	return out
}

func (t *Tokenizer) encodeWordUncached(word string, sc *bpeScratch, out []int32) []int32 {
	m := t.bpe
	if m.ignoreMg {
		if id, ok := m.rawToID[word]; ok {
			return append(out, id)
		}
	}
	syms := sc.syms[:0]
	for i := 0; i < len(word); i++ {
		syms = append(syms, bpeSym{id: m.byteSym[word[i]], prev: int32(i - 1), next: int32(i + 1), start: int32(i), end: int32(i + 1)})
	}
	syms[len(syms)-1].next = -1
	if len(syms) <= smallWord {
		m.mergeSmall(syms)
	} else {
		sc.queue = m.mergeHeap(syms, sc.queue[:0])
	}
	sc.syms = syms
	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		if s.id >= 0 && s.id < m.nTokens {
			out = append(out, s.id)
			continue
		}
		out = t.bpeFallback(word[s.start:s.end], out)
	}
	return out
}

// bpeFallback handles a final symbol that is no token: llama.cpp then looks up each byte of
// the symbol's alphabet text as a one-byte token text and drops bytes that are none.
func (t *Tokenizer) bpeFallback(raw string, out []int32) []int32 {
	var buf [4]byte
	for i := 0; i < len(raw); i++ {
		enc := appendCpt(buf[:0], uint32(byteEnc[raw[i]]))
		for _, b := range enc {
			if id, ok := t.toID[string([]byte{b})]; ok {
				out = append(out, id)
			}
		}
	}
	return out
}

// rankOf is the merge of syms a and b, if any.
func (m *bpeModel) rankOf(a, b *bpeSym) (mergeResult, bool) {
	if a.id < 0 || b.id < 0 {
		return mergeResult{}, false
	}
	r, ok := m.merges[pairKey(a.id, b.id)]
	return r, ok
}

// mergeSmall merges by scanning the pair ranks, each cached per left symbol.
func (m *bpeModel) mergeSmall(syms []bpeSym) {
	var rankBuf [smallWord]mergeResult
	ranks := rankBuf[:len(syms)] // ranks[i]: merge of i with its next; rank -1 if none
	for i := range syms {
		ranks[i].rank = -1
		if n := syms[i].next; n >= 0 {
			if r, ok := m.rankOf(&syms[i], &syms[n]); ok {
				ranks[i] = r
			}
		}
	}
	for {
		best := int32(-1)
		for i := int32(0); i >= 0; i = syms[i].next {
			if r := ranks[i].rank; r >= 0 && (best < 0 || r < ranks[best].rank) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		r := syms[best].next
		syms[best].id = ranks[best].result
		syms[best].end = syms[r].end
		syms[best].next = syms[r].next
		if n := syms[r].next; n >= 0 {
			syms[n].prev = best
		}
		ranks[best].rank = -1
		if n := syms[best].next; n >= 0 {
			if mr, ok := m.rankOf(&syms[best], &syms[n]); ok {
				ranks[best] = mr
			}
		}
		if p := syms[best].prev; p >= 0 {
			ranks[p].rank = -1
			if mr, ok := m.rankOf(&syms[p], &syms[best]); ok {
				ranks[p] = mr
			}
		}
	}
}

// mergeHeap merges long words with a priority queue of candidates (stale ones skipped), so
// a megabyte of spaces costs n log n, not n².
func (m *bpeModel) mergeHeap(syms []bpeSym, q bpeQueue) bpeQueue {
	push := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		if mr, ok := m.rankOf(&syms[l], &syms[r]); ok {
			q.push(bpeCand{rank: mr.rank, left: l, right: r, lid: syms[l].id, rid: syms[r].id})
		}
	}
	for i := 1; i < len(syms); i++ {
		push(int32(i-1), int32(i))
	}
	for len(q) > 0 {
		c := q.pop()
		l, r := &syms[c.left], &syms[c.right]
		if l.next != c.right || l.id != c.lid || r.id != c.rid || l.end == l.start || r.end == r.start {
			continue
		}
		mr, _ := m.rankOf(l, r)
		l.id = mr.result
		l.end = r.end
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		r.start, r.end = 0, 0
		push(l.prev, c.left)
		push(c.left, l.next)
	}
	return q
}

// byteEnc is GPT-2's byte alphabet; byteDec inverts it (-1 for other runes).
var byteEnc = bytesToUnicode()

var byteDec = func() map[rune]byte {
	d := make(map[rune]byte, 256)
	for b, r := range byteEnc {
		d[r] = byte(b)
	}
	return d
}()
