package tokenizer

import (
	"bytes"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt/gguf"
)

// exercise runs every entry point over a few texts (and with allIDs every id); a fuzz
// failure is a panic or a broken invariant.
func exercise(t *testing.T, tok *Tokenizer, allIDs bool, texts ...string) {
	for _, text := range texts {
		for _, opts := range []EncodeOptions{{}, {AddSpecial: true, ParseSpecial: true}} {
			ids, err := tok.Encode(text, opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, id := range ids {
				if id < 0 || int(id) >= tok.VocabSize() {
					t.Fatalf("Encode(%q) gave id %d outside the vocabulary (%d)", text, id, tok.VocabSize())
				}
			}
			if _, err := tok.DecodeWith(ids, DecodeOptions{RemoveSpecial: true, RenderSpecial: true}); err != nil {
				t.Fatal(err)
			}
			d := tok.NewStreamDecoder(true)
			var streamed []byte
			for _, id := range ids {
				c, err := d.Write(id)
				if err != nil {
					t.Fatal(err)
				}
				streamed = append(streamed, c...)
			}
			streamed = append(streamed, d.Flush()...)
			var pieces []byte
			for _, id := range ids {
				pieces = append(pieces, tok.Piece(id, true)...)
			}
			if !bytes.Equal(streamed, pieces) {
				t.Fatalf("stream %q != pieces %q", streamed, pieces)
			}
		}
	}
	for id := int32(-1); allIDs && id <= int32(tok.VocabSize()); id++ {
		tok.Piece(id, true)
		tok.IsEOG(id)
		tok.IsControl(id)
		tok.Token(id)
	}
}

// FuzzFromGGUF feeds mutated vocabulary files (seeds: small gpt2 and llama vocabularies
// built here, and the files in testdata/fuzz/FuzzFromGGUF) to FromGGUF: it must return an
// error or a tokenizer whose every entry point works.
func FuzzFromGGUF(f *testing.F) {
	f.Add(vocabBuilder("gpt2"))
	f.Add(vocabBuilder("gpt2", keyPre, gguf.String("llama-bpe")))
	f.Add(vocabBuilder("gpt2", keyPre, gguf.String("gpt-2")))
	f.Add(vocabBuilder("gpt2", keyPre, gguf.String("default")))
	f.Add(vocabBuilder("llama"))
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := gguf.Parse(data)
		if err != nil {
			return
		}
		tok, err := FromGGUF(g)
		if err != nil {
			return
		}
		if tok.VocabSize() > 4096 {
			return // keep iterations fast; the loops above are linear in the vocabulary
		}
		exercise(t, tok, true, "", "a", "ab ab\n\n 12345 <|im_end|><x><s>", "\xff\xe4\xb8 é🦙", "  \t'S 'll")
	})
}

// FuzzEncode feeds arbitrary text to the real vocabularies: no panic, ids in range, stream
// equal to pieces, and for valid UTF-8 without clean-up, decoding gives the text back.
func FuzzEncode(f *testing.F) {
	for _, c := range corpus {
		f.Add(c.text)
	}
	f.Fuzz(func(t *testing.T, text string) {
		for _, v := range testVocabs {
			tok := loadVocab(t, v)
			exercise(t, tok, false, text)
			// Clean-up changes the text on purpose; SentencePiece reads a literal ▁ as space.
			if !utf8.ValidString(text) || tok.cleanSpaces || tok.typ == SPM && strings.Contains(text, "\u2581") {
				continue
			}
			ids, _ := tok.Encode(text, EncodeOptions{})
			got, err := tok.DecodeWith(ids, DecodeOptions{RenderSpecial: true})
			if err != nil {
				t.Fatal(err)
			}
			if got != text {
				t.Fatalf("%s: %q decodes to %q", v, text, got)
			}
		}
	})
}
