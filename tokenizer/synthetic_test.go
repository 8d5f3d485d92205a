package tokenizer

import (
	"bytes"
	"testing"

	"github.com/kernelrt/kernelrt/gguf"
)

// TestAddSyntheticSmallest: the smallest synthetic vocabulary is written and read back
// (it once ran past its token list when no merge fit), and one token fewer is an error.
func TestAddSyntheticSmallest(t *testing.T) {
	if err := AddSynthetic(gguf.NewBuilder(), SyntheticVocabMin-1); err == nil {
		t.Errorf("AddSynthetic(%d): no error", SyntheticVocabMin-1)
	}
	b := gguf.NewBuilder()
	if err := AddSynthetic(b, SyntheticVocabMin); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	tk, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	ids, err := tk.Encode("the cat", EncodeOptions{})
	if err != nil || len(ids) == 0 {
		t.Fatalf("Encode: %v %v", ids, err)
	}
	for _, id := range ids {
		if id < 0 || int(id) >= SyntheticVocabMin {
			t.Errorf("id %d outside the vocabulary of %d", id, SyntheticVocabMin)
		}
	}
}
