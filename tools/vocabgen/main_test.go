package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// write puts a tokenizer.json and tokenizer_config.json in a new directory.
func write(t *testing.T, tj, cfg any) string {
	t.Helper()
	dir := t.TempDir()
	for name, v := range map[string]any{"tokenizer.json": tj, "tokenizer_config.json": cfg} {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "tokenizer.json")
}

func convert(t *testing.T, o options) (*gguf.File, *tokenizer.Tokenizer) {
	t.Helper()
	o.out = filepath.Join(t.TempDir(), "v.gguf")
	if err := run(o); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(o.out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	return f, tok
}

func TestByteLevel(t *testing.T) {
	vocab := map[string]int{}
	for b, r := range bytesToUnicode() {
		vocab[string(r)] = b
	}
	vocab["he"], vocab["Ġhe"], vocab["hell"] = 256, 257, 258
	tj := map[string]any{
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": [][]string{{"h", "e"}, {"Ġ", "he"}, {"he", "l"}}},
		"added_tokens": []map[string]any{
			{"id": 259, "content": "<|end|>", "special": true},
			{"id": 260, "content": "<think>", "special": false},
			{"id": 261, "content": "<|tool|>", "special": false}, // looks special
		},
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []map[string]any{
			{"type": "Split", "pattern": map[string]any{"Regex": `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`}},
			{"type": "ByteLevel"},
		}},
		"post_processor": map[string]any{"type": "TemplateProcessing", "single": []map[string]any{
			{"SpecialToken": map[string]any{"id": "<|end|>"}}, {"Sequence": map[string]any{"id": "A"}},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
	}
	cfg := map[string]any{"bos_token": "<|end|>", "eos_token": map[string]any{"content": "<|end|>"}, "chat_template": "{{x}}"}
	f, tok := convert(t, options{in: write(t, tj, cfg), vocabSize: 264, eosID: 7})
	if tok.Pre() != "qwen2" || tok.VocabSize() != 264 || tok.BOS() != 259 || tok.EOS() != 259 || !tok.AddBOS() || tok.ChatTemplate() != "{{x}}" {
		t.Errorf("%v: pre %q size %d bos %d eos %d addBOS %v", tok, tok.Pre(), tok.VocabSize(), tok.BOS(), tok.EOS(), tok.AddBOS())
	}
	types, _ := f.GetArray("tokenizer.ggml.token_type")
	ty, _ := types.Int32s()
	tokens, _ := f.GetArray("tokenizer.ggml.tokens")
	tk, _ := tokens.Strings()
	if !slices.Equal(ty[256:], []int32{typeNormal, typeNormal, typeNormal, typeControl, typeUserDefined, typeControl, typeUnused, typeUnused}) || tk[263] != "[PAD263]" {
		t.Errorf("types %v tokens %q", ty[256:], tk[256:])
	}
	if a, _ := f.GetArray("tokenizer.ggml.merges"); a.Len() != 3 || a.Index(1).String() != `"Ġ he"` {
		t.Errorf("merges: %v", a.Index(1))
	}
	ids, _ := tok.Encode(" hello<think>", tokenizer.EncodeOptions{})
	if !slices.Equal(ids, []int32{257, 'l', 'l', 'o', 260}) {
		t.Errorf("ids %v", ids)
	}
}

func TestSentencePiece(t *testing.T) {
	vocab := map[string]int{"<unk>": 0, "<s>": 1, "</s>": 2}
	for b := range 256 {
		vocab[fmt.Sprintf("<0x%02X>", b)] = 3 + b
	}
	// Ids in SentencePiece order; the merge of "▁▁" comes last in the merges list.
	for i, s := range []string{"▁▁", "▁t", "he", "▁the", "▁", "t", "h", "e"} {
		vocab[s] = 259 + i
	}
	tj := map[string]any{
		"model": map[string]any{"type": "BPE", "byte_fallback": true, "unk_token": "<unk>", "vocab": vocab,
			"merges": []string{"▁ t", "h e", "▁t he", "▁ ▁"}},
		"added_tokens": []map[string]any{{"id": 0, "content": "<unk>", "special": true}, {"id": 1, "content": "<s>", "special": true}, {"id": 2, "content": "</s>", "special": true}},
		"decoder":      map[string]any{"type": "Sequence"},
	}
	cfg := map[string]any{"bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>", "add_bos_token": true, "add_eos_token": false}
	f, tok := convert(t, options{in: write(t, tj, cfg)})
	sc, _ := f.GetArray("tokenizer.ggml.scores")
	scores, _ := sc.Float32s()
	if !slices.Equal(scores[259:], []float32{-1e9, -1, -2, -3, -4, -5, -6, -7}) || scores[0] != 0 || scores[100] != 0 {
		t.Errorf("scores %v", scores[259:])
	}
	ty, _ := f.GetArray("tokenizer.ggml.token_type")
	types, _ := ty.Int32s()
	if types[0] != typeUnknown || types[1] != typeControl || types[3] != typeByte || types[260] != typeNormal {
		t.Errorf("types %v", types[:4])
	}
	if tok.Type() != tokenizer.SPM || tok.BOS() != 1 || tok.EOS() != 2 || tok.UNK() != 0 || !tok.AddBOS() {
		t.Errorf("%v", tok)
	}
	ids, _ := tok.Encode("the  th", tokenizer.EncodeOptions{AddSpecial: true})
	if !slices.Equal(ids, []int32{1, 262, 263, 260, 265}) { // <s> ▁the ▁ ▁t h: "▁▁" (-1e9) loses to "▁t"
		t.Errorf("ids %v", ids)
	}
}

// bytesToUnicode is GPT-2's byte alphabet.
func bytesToUnicode() (enc [256]rune) {
	n := 0
	for b := range 256 {
		if b >= '!' && b <= '~' || b >= 0xA1 && b <= 0xAC || b >= 0xAE {
			enc[b] = rune(b)
		} else {
			enc[b] = rune(256 + n)
			n++
		}
	}
	return enc
}

func TestErrors(t *testing.T) {
	for _, tj := range []map[string]any{
		{"model": map[string]any{"type": "Unigram"}},
		{"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0}, "merges": []string{}}, "decoder": map[string]any{"type": "WordPiece"}},
		{"model": map[string]any{"type": "BPE", "vocab": map[string]int{"a": 0}, "merges": []string{}}, "decoder": map[string]any{"type": "ByteLevel"},
			"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []map[string]any{{"type": "Split", "pattern": map[string]any{"Regex": "x"}}}}},
	} {
		if err := run(options{in: write(t, tj, map[string]any{}), out: filepath.Join(t.TempDir(), "x.gguf")}); err == nil {
			t.Errorf("%v: no error", tj)
		}
	}
}
