package perplexity

import (
	"bytes"
	"testing"
)

// FuzzReadBase feeds arbitrary bytes to the base file reader: it must return an error or a
// base whose every row reads and decodes without a panic.
func FuzzReadBase(f *testing.F) {
	var valid bytes.Buffer
	if _, err := Perplexity(&fakeModel{vocab: 9}, testTokens(2*MinCtx, 9), Options{Ctx: MinCtx, Base: &valid}); err != nil {
		f.Fatal(err)
	}
	f.Add(valid.Bytes())
	f.Add([]byte(baseMagic))
	f.Add(append([]byte(baseMagic), 6, 0, 0, 0, 1, 0, 0, 0, 0xff, 0xff, 0xff, 0x7f))
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := ReadBase(bytes.NewReader(data), int64(len(data)))
		if err != nil {
			return
		}
		row := make([]byte, 2*RowLen(b.Vocab))
		lp := make([]float32, b.Vocab)
		for c := range b.Chunks {
			for j := range ScoredPositions(b.Ctx) {
				if err := b.ReadRow(c, j, row); err != nil {
					t.Fatalf("row %d of chunk %d of a base file that opened: %v", j, c, err)
				}
				DecodeRow(lp, row)
			}
		}
		if err := b.Match(b.Tokens, b.Ctx, 0); err != nil {
			t.Fatalf("a base file does not match its own tokens: %v", err)
		}
	})
}
