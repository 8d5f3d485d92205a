package generate

import (
	"errors"
	"fmt"
	"reflect"
	"sync"

	"github.com/kernelrt/kernelrt/grammar"
	"github.com/kernelrt/kernelrt/sample"
)

// TokenBytes is implemented by a Tokenizer that can tell the bytes each token adds to the
// text, which a grammar (Options.Grammar) needs to know which tokens may come next.
type TokenBytes interface {
	// TokenBytes is the bytes token id adds to the text: empty for a control token.
	TokenBytes(id int32) []byte
}

// TokenBytes is the token's piece as the stream decoder writes it (control tokens empty).
func (g ggufTok) TokenBytes(id int32) []byte { return g.t.Piece(id, false) }

// vocabCache keeps the grammar vocabularies (token tries) of the last few tokenizers, so a
// trie is built once per vocabulary, not per generation.
var vocabCache struct {
	sync.Mutex
	entries []vocabEntry
}

type vocabEntry struct {
	tok Tokenizer
	n   int
	v   *grammar.Vocab
}

const vocabCacheSize = 4

// VocabFor returns the grammar vocabulary of tok's first n tokens (the model's logit row),
// built once and cached for a comparable tokenizer (such as the one Load returns).
func VocabFor(tok Tokenizer, n int) (*grammar.Vocab, error) {
	tb, ok := tok.(TokenBytes)
	if !ok {
		return nil, errors.New("generate: a grammar needs a tokenizer that implements TokenBytes")
	}
	if n <= 0 {
		return nil, fmt.Errorf("generate: vocabulary size must be positive, got %d", n)
	}
	cacheable := reflect.TypeOf(tok).Comparable()
	vocabCache.Lock()
	defer vocabCache.Unlock()
	if cacheable {
		for i, e := range vocabCache.entries {
			if sameTok(e.tok, tok) && e.n == n {
				// Move to the front: the least recently used is dropped first.
				copy(vocabCache.entries[1:i+1], vocabCache.entries[:i])
				vocabCache.entries[0] = e
				return e.v, nil
			}
		}
	}
	pieces := make([][]byte, n)
	var eog []int32
	for id := range int32(n) {
		pieces[id] = tb.TokenBytes(id)
		if tok.IsEOG(id) {
			eog = append(eog, id)
		}
	}
	v, err := grammar.NewVocab(pieces, eog)
	if err != nil {
		return nil, fmt.Errorf("generate: %w", err)
	}
	if cacheable {
		vocabCache.entries = append([]vocabEntry{{tok, n, v}}, vocabCache.entries...)
		if len(vocabCache.entries) > vocabCacheSize {
			vocabCache.entries = vocabCache.entries[:vocabCacheSize]
		}
	}
	return v, nil
}

// sameTok compares two tokenizers of comparable types; a comparable struct can still hold
// an interface whose dynamic value is not comparable, and == then panics: such a
// tokenizer is never found in the cache.
func sameTok(a, b Tokenizer) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// constrain makes the sequence follow g over a vocabulary of n tokens.
func (s *Sequence) constrain(g *grammar.Grammar, n int) error {
	v, err := VocabFor(s.tok, n)
	if err != nil {
		return err
	}
	s.con = grammar.NewConstraint(g, v)
	s.eog = -1
	if e := v.EOG(); len(e) > 0 {
		s.eog = e[0]
	}
	return nil
}

// sample draws the next token: from the tokens the grammar allows, if there is one. ended
// reports that nothing is allowed (the grammar is complete and the vocabulary has no
// end-of-generation token, or the bias bans what the grammar allows): id is then the
// end-of-generation token (-1 without one) and the generation ends.
func (s *Sequence) sample(logits []float32) (id int32, ended bool, err error) {
	if s.con == nil {
		id, err = s.smp.Sample(logits)
		return id, false, err
	}
	mask, err := s.con.Allowed()
	if err != nil {
		return 0, false, err
	}
	id, err = s.smp.SampleAllowed(logits, mask)
	if errors.Is(err, sample.ErrNoCandidate) {
		return s.eog, true, nil
	}
	if err != nil {
		return 0, false, err
	}
	if err := s.con.Accept(id); err != nil { // cannot happen: id was allowed
		return 0, false, err
	}
	return id, false, nil
}

// PrepareMask computes the mask of the tokens Options.Grammar allows next, which Next then
// finds cached: a caller running many sequences can compute their masks in parallel, each
// Sequence on one goroutine at a time. Without a grammar it does nothing. An error here
// comes back from Next too.
func (s *Sequence) PrepareMask() error {
	if s.con == nil {
		return nil
	}
	_, err := s.con.Allowed()
	return err
}

// Constrained reports whether the sequence samples under Options.Grammar.
func (s *Sequence) Constrained() bool { return s.con != nil }

// GrammarComplete reports whether the text generated so far is a complete sentence of
// Options.Grammar (false without a grammar).
func (s *Sequence) GrammarComplete() bool { return s.con != nil && s.con.Complete() }
