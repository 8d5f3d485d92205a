package generate

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Token ids of byteTok: 0..255 are bytes, then the specials.
const (
	tBOS     = 256 + iota // "<s>"
	tEOS                  // "</s>", end of generation
	tIMStart              // "<|im_start|>"
	tIMEnd                // "<|im_end|>", end of generation
	byteVocab
)

var specialText = map[int32]string{tBOS: "<s>", tEOS: "</s>", tIMStart: "<|im_start|>", tIMEnd: "<|im_end|>"}

// byteTok is a byte-level tokenizer with four special tokens and a ChatML template.
type byteTok struct{ noTemplate bool }

func (byteTok) Encode(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	if !utf8.ValidString(text) {
		return nil, errors.New("byteTok: invalid UTF-8")
	}
	var ids []int32
	if addSpecial {
		ids = append(ids, tBOS)
	}
outer:
	for i := 0; i < len(text); {
		if parseSpecial {
			for id := int32(tBOS); id < byteVocab; id++ {
				if strings.HasPrefix(text[i:], specialText[id]) {
					ids = append(ids, id)
					i += len(specialText[id])
					continue outer
				}
			}
		}
		ids = append(ids, int32(text[i]))
		i++
	}
	return ids, nil
}

func (byteTok) NewDecoder() Decoder { return &byteDec{} }
func (byteTok) IsEOG(id int32) bool { return id == tEOS || id == tIMEnd }

func (t byteTok) ChatTemplate() (string, string, string) {
	if t.noTemplate {
		return "", "<s>", "</s>"
	}
	return `{% for m in messages %}{{ '<|im_start|>' + m.role + '\n' + m.content + '<|im_end|>\n' }}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}`, "<s>", "</s>"
}

// byteDec holds bytes until they end on a complete UTF-8 character; special tokens decode
// to nothing (as llama.cpp renders control tokens by default).
type byteDec struct{ buf, out []byte }

func (d *byteDec) Write(id int32) []byte {
	if id >= 256 {
		return nil
	}
	d.buf = append(d.buf, byte(id))
	n := completePrefix(d.buf)
	d.out = append(d.out[:0], d.buf[:n]...)
	d.buf = append(d.buf[:0], d.buf[n:]...)
	return d.out
}

func (d *byteDec) Flush() []byte {
	d.out = append(d.out[:0], d.buf...)
	d.buf = d.buf[:0]
	return d.out
}

// completePrefix is the length of b without a trailing incomplete (but so far valid) UTF-8
// sequence.
func completePrefix(b []byte) int {
	for k := 1; k <= 3 && k <= len(b); k++ {
		c := b[len(b)-k]
		if c < 0x80 {
			return len(b)
		}
		if c >= 0xC0 { // the lead byte of the last character, k bytes from the end
			need := 2
			if c >= 0xE0 {
				need = 3
			}
			if c >= 0xF0 {
				need = 4
			}
			if need > k {
				return len(b) - k
			}
			return len(b)
		}
	}
	return len(b)
}

// fakeModel replies with a script: the k-th token after a Prefill is reply[k] (then EOS),
// or, with logits set, returns those. It counts the tokens it prefills and decodes.
type fakeModel struct {
	vocab, maxCtx int
	reply         []int32
	k             int
	toks          []int32 // the KV cache
	prefilled     int
	decoded       int
	noTruncate    bool // partial truncation unsupported
	failDecode    int  // fail the n-th decode (1-based), 0 = never
	rows          []float32
}

func newFake(reply string) *fakeModel {
	m := &fakeModel{vocab: byteVocab, maxCtx: 256, rows: make([]float32, byteVocab)}
	for i := 0; i < len(reply); i++ {
		m.reply = append(m.reply, int32(reply[i]))
	}
	return m
}

func (m *fakeModel) logits() []float32 {
	clear(m.rows)
	next := int32(tEOS)
	if m.k < len(m.reply) {
		next = m.reply[m.k]
	}
	m.rows[next] = 10
	return m.rows
}

func (m *fakeModel) Prefill(_ Ops, ids []int32) ([]float32, error) {
	if len(m.toks)+len(ids) > m.maxCtx {
		return nil, fmt.Errorf("fake: prefill past the context")
	}
	m.toks = append(m.toks, ids...)
	m.prefilled += len(ids)
	m.k = 0
	return m.logits(), nil
}

func (m *fakeModel) Decode(_ Ops, id int32) ([]float32, error) {
	m.decoded++
	if m.failDecode == m.decoded {
		return nil, errors.New("fake: decode failed")
	}
	if len(m.toks)+1 > m.maxCtx {
		return nil, fmt.Errorf("fake: decode past the context")
	}
	m.toks = append(m.toks, id)
	m.k++
	return m.logits(), nil
}

func (m *fakeModel) Pos() int    { return len(m.toks) }
func (m *fakeModel) MaxCtx() int { return m.maxCtx }
func (m *fakeModel) Vocab() int  { return m.vocab }

func (m *fakeModel) Truncate(n int) error {
	if n < 0 || n > len(m.toks) {
		return fmt.Errorf("fake: Truncate(%d) of %d", n, len(m.toks))
	}
	if m.noTruncate && n != 0 && n != len(m.toks) {
		return fmt.Errorf("fake: %w", errors.ErrUnsupported)
	}
	m.toks = m.toks[:n]
	return nil
}
