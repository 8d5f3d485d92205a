package tokenizer

// SentencePiece BPE (tokenizer.ggml.model "llama") as llama.cpp runs it: the text, spaces
// escaped as ▁ (U+2581), is split into characters by lead byte; then the adjacent pair whose
// concatenation is a token with the highest score is merged (leftmost first on equal
// scores), until no adjacent pair forms a token. A final piece that is no token (a character
// outside the vocabulary) is written as byte tokens <0xXX>.

// spmSym is one symbol: bytes [start, start+n) of the text; n == 0 once merged away.
type spmSym struct {
	start, n   int32
	prev, next int32
}

// spmCand is a candidate merge of syms[left] and syms[right] into a token of the given score.
type spmCand struct {
	score       float32
	left, right int32
	size        int32 // bytes of the merged text; a different sum means the candidate is stale
}

func (c spmCand) before(d spmCand) bool {
	return c.score > d.score || c.score == d.score && c.left < d.left
}

type spmScratch struct {
	syms  []spmSym
	queue []spmCand
}

func (sc *spmScratch) push(c spmCand) {
	h := append(sc.queue, c)
	for i := len(h) - 1; i > 0; {
		p := (i - 1) / 2
		if !h[i].before(h[p]) {
			break
		}
		h[i], h[p] = h[p], h[i]
		i = p
	}
	sc.queue = h
}

func (sc *spmScratch) pop() spmCand {
	h := sc.queue
	top := h[0]
	n := len(h) - 1
	h[0] = h[n]
	h = h[:n]
	for i := 0; ; {
		l, m := 2*i+1, i
		if l < n && h[l].before(h[m]) {
			m = l
		}
		if r := l + 1; r < n && h[r].before(h[m]) {
			m = r
		}
		if m == i {
			break
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
	sc.queue = h
	return top
}

// llama.cpp runs one merge queue over the whole fragment, which for a long text means a
// queue of a million candidates. A merge joins two adjacent symbols into a token, so it can
// only cross a character boundary if some token contains the two bytes around it; the text
// is cut at every boundary no token spans and the pieces are merged separately, with the
// same result (merges in different pieces never compete for a symbol) at a fraction of the
// cost.

// buildSPMPairs records every adjacent byte pair found inside a token text.
func (t *Tokenizer) buildSPMPairs() {
	t.spmPairs = make([]uint64, 1<<16/64)
	for _, s := range t.tokens {
		for j := 0; j+1 < len(s); j++ {
			k := int(s[j])<<8 | int(s[j+1])
			t.spmPairs[k/64] |= 1 << (k % 64)
		}
	}
}

func (t *Tokenizer) pairInToken(a, b byte) bool {
	k := int(a)<<8 | int(b)
	return t.spmPairs[k/64]&(1<<(k%64)) != 0
}

// spmEncode appends the tokens of text, which already has its spaces escaped.
func (t *Tokenizer) spmEncode(text string, sc *spmScratch, out []int32) []int32 {
	start := 0
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		if off > start && !t.pairInToken(text[off-1], text[off]) {
			out = t.spmEncodeCached(text[start:off], sc, out)
			start = off
		}
		off += n
	}
	return t.spmEncodeCached(text[start:], sc, out)
}

// spmEncodeCached is spmEncodePiece through the word cache.
func (t *Tokenizer) spmEncodeCached(text string, sc *spmScratch, out []int32) []int32 {
	if ids, ok := t.cache.get(text); ok {
		return append(out, ids...)
	}
	start := len(out)
	out = t.spmEncodePiece(text, sc, out)
	t.cache.put(text, out[start:])
	return out
}

// spmEncodePiece runs llama.cpp's merge loop on one piece of the text.
func (t *Tokenizer) spmEncodePiece(text string, sc *spmScratch, out []int32) []int32 {
	if len(text) == 0 {
		return out
	}
	syms := sc.syms[:0]
	for off := 0; off < len(text); {
		n := min(utf8Len(text[off]), len(text)-off)
		i := int32(len(syms))
		syms = append(syms, spmSym{start: int32(off), n: int32(n), prev: i - 1, next: i + 1})
		off += n
	}
	syms[len(syms)-1].next = -1
	sc.syms = syms
	sc.queue = sc.queue[:0]

	tryAdd := func(l, r int32) {
		if l < 0 || r < 0 {
			return
		}
		size := syms[l].n + syms[r].n
		id, ok := t.toID[text[syms[l].start:syms[l].start+size]]
		if !ok {
			return
		}
		sc.push(spmCand{score: t.scores[id], left: l, right: r, size: size})
	}
	for i := 1; i < len(syms); i++ {
		tryAdd(int32(i-1), int32(i))
	}
	for len(sc.queue) > 0 {
		c := sc.pop()
		l, r := &syms[c.left], &syms[c.right]
		if l.n == 0 || r.n == 0 || l.n+r.n != c.size {
			continue
		}
		l.n += r.n
		r.n = 0
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = c.left
		}
		tryAdd(l.prev, c.left)
		tryAdd(c.left, l.next)
	}
	for i := int32(0); i >= 0; i = syms[i].next {
		s := syms[i]
		piece := text[s.start : s.start+s.n]
		if id, ok := t.toID[piece]; ok {
			out = append(out, id)
			continue
		}
		// Merged symbols are always tokens, so this is one character outside the
		// vocabulary (or a stray byte of invalid UTF-8): byte fallback.
		for j := 0; j < len(piece); j++ {
			if id := t.byteToID[piece[j]]; id >= 0 {
				out = append(out, id)
			} else if t.unk >= 0 {
				// llama.cpp aborts (std::out_of_range) on a vocabulary without byte tokens;
				// the unknown token is the graceful reading.
				out = append(out, t.unk)
			}
		}
	}
	return out
}
