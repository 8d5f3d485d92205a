package tokenizer

import (
	"fmt"
	"unicode/utf8"
)

// StreamDecoder turns tokens into text as they are generated. A UTF-8 character can be split
// across tokens (byte-fallback tokens, byte-level BPE pieces of a CJK character or an emoji):
// Write holds back an incomplete character until the token that completes it arrives, so
// every chunk it returns is whole characters. Bytes that can never become a valid character
// are passed through as they are, so the chunks concatenated always equal the pieces
// concatenated: nothing is lost or replaced.
//
// In steady state Write allocates nothing. A StreamDecoder is not safe for concurrent use.
type StreamDecoder struct {
	t      *Tokenizer
	render bool
	buf    []byte
	tail   [utf8.UTFMax]byte // bytes of an incomplete character held back
	ntail  int
}

// NewStreamDecoder returns a decoder; renderSpecial writes the text of control tokens
// (<|im_end|>, ...), which are otherwise dropped.
func (t *Tokenizer) NewStreamDecoder(renderSpecial bool) *StreamDecoder {
	return &StreamDecoder{t: t, render: renderSpecial, buf: make([]byte, 0, 64)}
}

// Write adds token id and returns the text that is now complete. The slice is the decoder's
// memory, valid until the next call. An id outside the vocabulary is an error.
func (d *StreamDecoder) Write(id int32) ([]byte, error) {
	if id < 0 || int(id) >= len(d.t.tokens) {
		return nil, fmt.Errorf("tokenizer: token id %d outside the vocabulary (size %d)", id, len(d.t.tokens))
	}
	b := append(d.buf[:0], d.tail[:d.ntail]...)
	b = append(b, d.t.Piece(id, d.render)...)
	d.buf = b
	cut := completePrefix(b)
	d.ntail = copy(d.tail[:], b[cut:])
	return b[:cut], nil
}

// Flush returns the bytes held back (an incomplete character at the end of the stream) and
// empties the decoder.
func (d *StreamDecoder) Flush() []byte {
	b := append(d.buf[:0], d.tail[:d.ntail]...)
	d.buf = b
	d.ntail = 0
	return b
}

// Reset drops anything held back.
func (d *StreamDecoder) Reset() { d.ntail = 0 }

// completePrefix is the length of b without a trailing incomplete UTF-8 sequence: one whose
// lead byte is among the last three bytes and that a further byte could still complete.
func completePrefix(b []byte) int {
	for i := len(b) - 1; i >= 0 && i >= len(b)-utf8.UTFMax+1; i-- {
		if utf8.RuneStart(b[i]) {
			if !utf8.FullRune(b[i:]) {
				return i
			}
			break
		}
	}
	return len(b)
}
