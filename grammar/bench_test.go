package grammar

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"testing"

	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// qwenVocab is the test Qwen3 vocabulary of package tokenizer (151,936 tokens) as a Vocab.
func qwenVocab(b *testing.B) *Vocab {
	raw, err := os.ReadFile("../tokenizer/testdata/qwen3.gguf.gz")
	if err != nil {
		b.Skipf("the Qwen3 test vocabulary: %v", err)
	}
	z, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		b.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		b.Fatal(err)
	}
	f, err := gguf.Parse(data)
	if err != nil {
		b.Fatal(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		b.Fatal(err)
	}
	pieces := make([][]byte, tok.VocabSize())
	for id := range pieces {
		pieces[id] = tok.Piece(int32(id), false)
	}
	v, err := NewVocab(pieces, tok.EOG())
	if err != nil {
		b.Fatal(err)
	}
	return v
}

// BenchmarkMaskInString is one token mask inside a JSON string over the Qwen vocabulary,
// where nearly every token is allowed and the whole trie is walked: cold (a new
// constraint: the automaton's transitions are computed as the walk meets them) and warm
// (transitions known, only the mask is recomputed).
func BenchmarkMaskInString(b *testing.B) {
	v := qwenVocab(b)
	g, err := FromJSONSchema([]byte(`{"type":"object","properties":{"name":{"type":"string"}},"required":["name"]}`))
	if err != nil {
		b.Fatal(err)
	}
	into := func() *Constraint {
		c := NewConstraint(g, v)
		if !c.m.Accept([]byte(`{"name":"`)) {
			b.Fatal("prefix rejected")
		}
		return c
	}
	b.Run("cold", func(b *testing.B) {
		for b.Loop() {
			c := into()
			if _, err := c.Allowed(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("warm", func(b *testing.B) {
		c := into()
		c.Allowed()
		for b.Loop() {
			clear(c.masks)
			if _, err := c.Allowed(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(v.Nodes()), "trie-nodes")
	})
}
