package tokenizer

import (
	"sync"
	"unicode"
)

// Code point classes as llama.cpp's unicode tables define them (src/unicode-data.cpp there,
// Unicode 15.1): the general category of every code point below 0x110000 and the White_Space
// property. llama.cpp marks unassigned code points "undefined", which behaves exactly like C
// (other) in every rule, so they are C here. Go's unicode package (Unicode 15.0) gives the
// same partition once the 627 code points Unicode 15.1 added are patched in; checked against
// llama.cpp's table code point by code point.
const (
	fLetter  uint8 = 1 << iota // \p{L}
	fNumber                    // \p{N}
	fPunct                     // \p{P}
	fSymbol                    // \p{S}
	fMark                      // \p{M}
	fSep                       // \p{Z}
	fControl                   // \p{C}, including unassigned code points
	fSpace                     // White_Space (the \s of Python's regex module)
)

const maxCodePoint = 0x110000

var (
	classOnce  sync.Once
	classTable []uint8 // class bits of every code point below maxCodePoint
)

// classes builds the table on first use (about 1 MiB, a millisecond): walking the category
// tables once is far cheaper than a binary search per code point on the hot path.
func classes() []uint8 {
	classOnce.Do(func() {
		t := make([]uint8, maxCodePoint)
		for i := range t {
			t[i] = fControl
		}
		for _, c := range []struct {
			tab  *unicode.RangeTable
			flag uint8
		}{
			{unicode.L, fLetter}, {unicode.N, fNumber}, {unicode.P, fPunct}, {unicode.S, fSymbol},
			{unicode.M, fMark}, {unicode.Z, fSep},
		} {
			setRanges(t, c.tab, c.flag, true)
		}
		setRanges(t, unicode.White_Space, fSpace, false)
		// Unicode 15.1: ideographic description characters (So) and CJK Extension I (Lo).
		for c := 0x2FFC; c <= 0x2FFF; c++ {
			t[c] = fSymbol
		}
		t[0x31EF] = fSymbol
		for c := 0x2EBF0; c <= 0x2EE5D; c++ {
			t[c] = fLetter
		}
		classTable = t
	})
	return classTable
}

// setRanges marks the code points of tab: replacing the category bits (categories are
// exclusive) or adding a property bit.
func setRanges(t []uint8, tab *unicode.RangeTable, flag uint8, category bool) {
	set := func(c int) {
		if category {
			t[c] = t[c]&fSpace | flag
		} else {
			t[c] |= flag
		}
	}
	for _, r := range tab.R16 {
		for c := int(r.Lo); c <= int(r.Hi); c += int(r.Stride) {
			set(c)
		}
	}
	for _, r := range tab.R32 {
		for c := int(r.Lo); c <= int(r.Hi) && c < maxCodePoint; c += int(r.Stride) {
			set(c)
		}
	}
}

// decodeCpt decodes the code point at s[i] the way llama.cpp's unicode_cpt_from_utf8 does:
// it checks only the lead byte's length and that continuation bytes are 10xxxxxx, so
// overlong forms and surrogates decode to their (odd) values. A byte that starts no such
// sequence decodes to U+FFFD with length 1, as llama.cpp's unicode_cpts_from_utf8 does.
// Unlike llama.cpp, which aborts when it later re-encodes a value above U+10FFFF, such a
// 4-byte sequence is also treated as invalid.
func decodeCpt(s string, i int) (cpt uint32, n int) {
	b0 := s[i]
	switch {
	case b0 < 0x80:
		return uint32(b0), 1
	case b0&0x40 == 0:
		return 0xFFFD, 1
	case b0&0x20 == 0:
		if i+1 < len(s) && s[i+1]&0xC0 == 0x80 {
			return uint32(b0&0x1F)<<6 | uint32(s[i+1]&0x3F), 2
		}
	case b0&0x10 == 0:
		if i+2 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 {
			return uint32(b0&0x0F)<<12 | uint32(s[i+1]&0x3F)<<6 | uint32(s[i+2]&0x3F), 3
		}
	case b0&0x08 == 0:
		if i+3 < len(s) && s[i+1]&0xC0 == 0x80 && s[i+2]&0xC0 == 0x80 && s[i+3]&0xC0 == 0x80 {
			c := uint32(b0&0x07)<<18 | uint32(s[i+1]&0x3F)<<12 | uint32(s[i+2]&0x3F)<<6 | uint32(s[i+3]&0x3F)
			if c < maxCodePoint {
				return c, 4
			}
		}
	}
	return 0xFFFD, 1
}

// cptLen is the length of the encoding appendCpt writes for c.
func cptLen(c uint32) int {
	switch {
	case c < 0x80:
		return 1
	case c < 0x800:
		return 2
	case c < 0x10000:
		return 3
	}
	return 4
}

// appendCpt encodes c as llama.cpp's unicode_cpt_to_utf8 does: plain UTF-8 arithmetic, so a
// surrogate keeps its three bytes (Go's utf8 package would write U+FFFD instead).
func appendCpt(b []byte, c uint32) []byte {
	switch {
	case c < 0x80:
		return append(b, byte(c))
	case c < 0x800:
		return append(b, 0xC0|byte(c>>6), 0x80|byte(c&0x3F))
	case c < 0x10000:
		return append(b, 0xE0|byte(c>>12), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
	}
	return append(b, 0xF0|byte(c>>18), 0x80|byte(c>>12&0x3F), 0x80|byte(c>>6&0x3F), 0x80|byte(c&0x3F))
}

// utf8Len is llama.cpp's unicode_len_utf8: the sequence length announced by a lead byte, by
// its high nibble only (continuation bytes count as 1).
func utf8Len(b byte) int {
	switch b >> 4 {
	case 0xC, 0xD:
		return 2
	case 0xE:
		return 3
	case 0xF:
		return 4
	}
	return 1
}

// bytesToUnicode is GPT-2's byte-level alphabet: printable Latin-1 bytes stand for themselves,
// the other 68 bytes for U+0100 onwards in byte order.
func bytesToUnicode() (enc [256]rune) {
	n := 0
	for b := 0; b < 256; b++ {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			enc[b] = rune(b)
		} else {
			enc[b] = rune(256 + n)
			n++
		}
	}
	return enc
}
