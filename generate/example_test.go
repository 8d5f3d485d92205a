package generate_test

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/generate"
)

// scriptModel stands in for a real model (an *orchestrator.Model for an
// orchestrator.Model): after each prompt it predicts the bytes of a fixed reply, then the
// end-of-sequence token.
type scriptModel struct {
	reply  string
	k, pos int
	row    []float32
}

func (m *scriptModel) logits() []float32 {
	clear(m.row)
	if m.k < len(m.reply) {
		m.row[m.reply[m.k]] = 1
	} else {
		m.row[eos] = 1
	}
	return m.row
}

func (m *scriptModel) Prefill(_ generate.Ops, ids []int32) ([]float32, error) {
	m.pos += len(ids)
	m.k = 0
	return m.logits(), nil
}

func (m *scriptModel) Decode(_ generate.Ops, id int32) ([]float32, error) {
	m.pos++
	m.k++
	return m.logits(), nil
}

func (m *scriptModel) Pos() int             { return m.pos }
func (m *scriptModel) Truncate(n int) error { m.pos = n; return nil }
func (m *scriptModel) MaxCtx() int          { return 4096 }
func (m *scriptModel) Vocab() int           { return 257 }

// byteTokenizer stands in for the GGUF tokenizer: one token per byte, and 256 ends a
// sequence.
type byteTokenizer struct{}

const eos = 256

func (byteTokenizer) Encode(text string, addSpecial, parseSpecial bool) ([]int32, error) {
	ids := make([]int32, len(text))
	for i := range len(text) {
		ids[i] = int32(text[i])
	}
	return ids, nil
}

func (byteTokenizer) NewDecoder() generate.Decoder { return &byteDecoder{} }
func (byteTokenizer) IsEOG(id int32) bool          { return id == eos }

// byteDecoder emits bytes once they form whole UTF-8 characters.
type byteDecoder struct{ buf []byte }

func (d *byteDecoder) Write(id int32) []byte {
	d.buf = append(d.buf, byte(id))
	if !utf8.Valid(d.buf) && len(d.buf) < utf8.UTFMax {
		return nil // an incomplete character: wait for its next byte
	}
	out := d.buf
	d.buf = nil
	return out
}

func (d *byteDecoder) Flush() []byte {
	out := d.buf
	d.buf = nil
	return out
}

// Streaming a reply: pieces arrive as the tokens are generated, a stop string ends the
// stream without being printed, and Stats tells why it ended.
func Example() {
	model := &scriptModel{reply: "Hello, wörld!<END> more", row: make([]float32, 257)}
	g, err := generate.New(model, kernelrt.Serial{}, byteTokenizer{})
	if err != nil {
		panic(err)
	}
	opts := generate.Options{MaxTokens: 64, Stop: []string{"<END>"}}
	var pieces []string
	for piece, err := range g.Stream(context.Background(), "Say hello.", opts) {
		if err != nil {
			panic(err)
		}
		pieces = append(pieces, piece) // a real program prints each as it comes
	}
	fmt.Printf("%q\n", pieces)
	st := g.Stats()
	fmt.Println(st.PromptTokens, "prompt tokens,", st.GeneratedTokens, "generated, stopped by", st.Stop)
	// Output:
	// ["H" "e" "l" "l" "o" "," " " "w" "ö" "r" "l" "d" "!"]
	// 10 prompt tokens, 19 generated, stopped by stop-string
}
