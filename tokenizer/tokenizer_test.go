package tokenizer

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt/gguf"
)

func encode(t *testing.T, tok *Tokenizer, text string, opts EncodeOptions) []int32 {
	t.Helper()
	ids, err := tok.Encode(text, opts)
	if err != nil {
		t.Fatal(err)
	}
	return ids
}

func TestVocabularies(t *testing.T) {
	cases := []struct {
		name               string
		typ                Type
		pre                string
		size               int
		bos, eos           int32
		addBOS             bool
		eog, notEOG        []string
		eot                string
		controlText, plain string
	}{
		{"qwen3", BPE, "qwen2", 151936, 151643, 151645, false,
			[]string{"<|im_end|>", "<|endoftext|>", "<|fim_pad|>", "<|repo_name|>", "<|file_sep|>"}, []string{"<|im_start|>", "<think>", "Hello"},
			"<|im_end|>", "<|im_start|>", "<think>"},
		{"llama3", BPE, "llama-bpe", 128256, 128000, 128001, true,
			[]string{"<|end_of_text|>", "<|eot_id|>"}, []string{"<|begin_of_text|>", "<|start_header_id|>"},
			"<|eot_id|>", "<|begin_of_text|>", ""},
		{"llama2", SPM, "default", 32000, 1, 2, true,
			[]string{"</s>"}, []string{"<s>", "<unk>"},
			"", "<s>", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tok := loadVocab(t, c.name)
			if tok.Type() != c.typ || tok.Pre() != c.pre || tok.VocabSize() != c.size {
				t.Errorf("type %v pre %q size %d, want %v %q %d", tok.Type(), tok.Pre(), tok.VocabSize(), c.typ, c.pre, c.size)
			}
			if tok.BOS() != c.bos || tok.EOS() != c.eos || tok.AddBOS() != c.addBOS || tok.AddEOS() {
				t.Errorf("bos %d eos %d addBOS %v addEOS %v, want %d %d %v false", tok.BOS(), tok.EOS(), tok.AddBOS(), tok.AddEOS(), c.bos, c.eos, c.addBOS)
			}
			id := func(s string) int32 {
				i, ok := tok.ID(s)
				if !ok {
					t.Fatalf("no token %q", s)
				}
				return i
			}
			for _, s := range c.eog {
				if !tok.IsEOG(id(s)) {
					t.Errorf("%q is not end-of-generation", s)
				}
			}
			if !tok.IsEOG(tok.EOS()) || !slices.Contains(tok.EOG(), tok.EOS()) {
				t.Error("EOS is not end-of-generation")
			}
			for _, s := range c.notEOG {
				if tok.IsEOG(id(s)) {
					t.Errorf("%q is end-of-generation", s)
				}
			}
			if c.eot != "" && tok.EOT() != id(c.eot) {
				t.Errorf("EOT %d, want %q", tok.EOT(), c.eot)
			}
			cid := id(c.controlText)
			if !tok.IsControl(cid) || string(tok.Piece(cid, true)) != c.controlText || len(tok.Piece(cid, false)) != 0 {
				t.Errorf("%q: control %v, pieces %q %q", c.controlText, tok.IsControl(cid), tok.Piece(cid, true), tok.Piece(cid, false))
			}
			if c.plain != "" { // user-defined: split out even without ParseSpecial, always rendered
				pid := id(c.plain)
				if got := encode(t, tok, "a"+c.plain, EncodeOptions{}); got[len(got)-1] != pid {
					t.Errorf("user-defined %q not split out: %v", c.plain, got)
				}
				if string(tok.Piece(pid, false)) != c.plain {
					t.Errorf("user-defined %q renders as %q", c.plain, tok.Piece(pid, false))
				}
			}
			if tok.Piece(-1, true) != nil || tok.Piece(int32(c.size), true) != nil || tok.Token(int32(c.size)) != "" {
				t.Error("out-of-range id gives a piece")
			}
			if !strings.Contains(tok.String(), c.typ.String()) {
				t.Errorf("String() = %q", tok.String())
			}
		})
	}
}

// TestRoundTrip: decoding what was encoded gives the text back (valid UTF-8).
func TestRoundTrip(t *testing.T) {
	for _, v := range testVocabs {
		tok := loadVocab(t, v)
		for _, c := range corpus {
			if !utf8.ValidString(c.text) || strings.ContainsRune(c.text, 0) {
				continue
			}
			for _, special := range []bool{false, true} {
				if special && tok.typ == SPM {
					continue // SentencePiece puts a space after every special token
				}
				ids := encode(t, tok, c.text, EncodeOptions{ParseSpecial: special})
				got, err := tok.DecodeWith(ids, DecodeOptions{RenderSpecial: true})
				if err != nil {
					t.Fatal(err)
				}
				want := c.text
				if tok.cleanSpaces {
					want = string(cleanSpaces([]byte(want)))
				}
				if got != want {
					t.Errorf("%s %q (special %v): decoded %q", v, c.name, special, got)
				}
			}
		}
	}
}

func TestDecode(t *testing.T) {
	tok := loadVocab(t, "llama2")
	ids := encode(t, tok, "Hello world", EncodeOptions{AddSpecial: true})
	// llama.cpp drops the space SentencePiece adds only when the first token is text.
	for _, c := range []struct {
		ids  []int32
		opts DecodeOptions
		want string
	}{
		{ids[1:], DecodeOptions{}, "Hello world"},
		{ids, DecodeOptions{}, " Hello world"},
		{ids, DecodeOptions{RemoveSpecial: true}, " Hello world"},
		{ids, DecodeOptions{RenderSpecial: true}, "<s> Hello world"},
		{append(ids, tok.EOS()), DecodeOptions{RenderSpecial: true}, "<s> Hello world</s>"},
	} {
		got, err := tok.DecodeWith(c.ids, c.opts)
		if err != nil || got != c.want {
			t.Errorf("DecodeWith(%v, %+v) = %q, %v; want %q", c.ids, c.opts, got, err, c.want)
		}
	}
	if _, err := tok.Decode([]int32{5, 32000}); err == nil || !strings.Contains(err.Error(), "32000") {
		t.Errorf("out-of-range id: %v", err)
	}
	l3 := loadVocab(t, "llama3")
	ids = encode(t, l3, "Hello , world . It 's", EncodeOptions{})
	if got, _ := l3.Decode(ids); got != "Hello, world. It's" {
		t.Errorf("llama3 clean-up of spaces: %q", got)
	}
}

func TestCleanSpaces(t *testing.T) {
	for in, want := range map[string]string{
		"":                "",
		"a , b . c ! d ?": "a, b. c! d?",
		"x ' y":           "x'y",
		"it 's I 'm we 're you 've he 'll I 'd don 't": "it's I'm we're you've he 'll I 'd don 't",
		" ' ' x": "'' x", // the first " ' " pass overwrites what the next test reads
		"'":      "'",
	} {
		if got := string(cleanSpaces([]byte(in))); got != want {
			t.Errorf("cleanSpaces(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestInvalidUTF8 pins the behaviour on bad input that the llama.cpp corpus cannot cover.
func TestInvalidUTF8(t *testing.T) {
	for _, v := range testVocabs {
		tok := loadVocab(t, v)
		_, err := tok.Encode("ok\xffbad", EncodeOptions{RejectInvalidUTF8: true})
		var ue *InvalidUTF8Error
		if !errors.As(err, &ue) || ue.Offset != 2 {
			t.Errorf("%s: RejectInvalidUTF8: %v", v, err)
		}
		if _, err := tok.Encode("ok \u00e9", EncodeOptions{RejectInvalidUTF8: true}); err != nil {
			t.Errorf("%s: valid text rejected: %v", v, err)
		}
		if tok.Type() == BPE {
			// Above U+10FFFF llama.cpp aborts; here every byte reads as U+FFFD.
			a := encode(t, tok, "x\xf4\x90\x80\x80y", EncodeOptions{})
			b := encode(t, tok, "x\ufffd\ufffd\ufffd\ufffdy", EncodeOptions{})
			if !slices.Equal(a, b) {
				t.Errorf("%s: %v != %v", v, a, b)
			}
		} else {
			// SentencePiece: byte fallback of the raw bytes.
			got := encode(t, tok, "\xff", EncodeOptions{})
			want := []int32{tok.byteToID[' '], tok.byteToID[0xff]}
			if id, ok := tok.ID("\u2581"); ok {
				want[0] = id
			}
			if !slices.Equal(got, want) {
				t.Errorf("%s: %v, want %v", v, got, want)
			}
		}
	}
}

func TestPieces(t *testing.T) {
	sp := loadVocab(t, "llama2")
	if id, _ := sp.ID("<0x0A>"); string(sp.Piece(id, false)) != "\n" {
		t.Errorf("byte token <0x0A> piece %q", sp.Piece(id, false))
	}
	if id, _ := sp.ID("\u2581the"); string(sp.Piece(id, false)) != " the" {
		t.Errorf("▁the piece %q", sp.Piece(id, false))
	}
	q := loadVocab(t, "qwen3")
	if id, _ := q.ID("\u0120world"); string(q.Piece(id, false)) != " world" { // Ġworld
		t.Errorf("Ġworld piece %q", q.Piece(id, false))
	}
	if id, _ := q.ID("[PAD151900]"); len(q.Piece(id, true)) != 0 {
		t.Errorf("unused token renders as %q", q.Piece(id, true))
	}
	for in, want := range map[string]byte{"<0x41>": 0x41, "<0xfe>": 0xfe, "<0xZZ>": 0, "<0x": 0, "ab": 0, "<0x7": 7} {
		if got := byteTokenValue(in); got != want {
			t.Errorf("byteTokenValue(%q) = %#x, want %#x", in, got, want)
		}
	}
	if got := appendByteLevelDecoded(nil, "a\u4e00"); string(got) != "a[UNK_BYTE_0xe4b880a\u4e00]" {
		t.Errorf("character outside the byte alphabet: %q", got)
	}
}

func TestStreamDecoder(t *testing.T) {
	for _, v := range testVocabs {
		tok := loadVocab(t, v)
		text := "🦙 Llamas 👨‍👩‍👧 say 你好, 世界 — ok"
		ids := encode(t, tok, text, EncodeOptions{AddSpecial: true})
		d := tok.NewStreamDecoder(false)
		var got []byte
		for _, id := range ids {
			chunk, err := d.Write(id)
			if err != nil {
				t.Fatal(err)
			}
			if !utf8.Valid(chunk) {
				t.Errorf("%s: chunk %q is not whole UTF-8", v, chunk)
			}
			got = append(got, chunk...)
		}
		got = append(got, d.Flush()...)
		var want []byte
		for _, id := range ids {
			want = append(want, tok.Piece(id, false)...)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s: stream %q, pieces %q", v, got, want)
		}
		if _, err := d.Write(-1); err == nil {
			t.Error("Write(-1) succeeded")
		}
	}
	// A character split over byte-fallback tokens comes out once, when complete.
	sp := loadVocab(t, "llama2")
	d := sp.NewStreamDecoder(false)
	var chunks []string
	for _, b := range []byte("🦙") {
		c, _ := d.Write(sp.byteToID[b])
		chunks = append(chunks, string(c))
	}
	if !slices.Equal(chunks, []string{"", "", "", "🦙"}) {
		t.Errorf("chunks %q", chunks)
	}
	// Bytes that can never complete are not held back; Flush returns a dangling lead byte.
	c1, _ := d.Write(sp.byteToID[0xff])
	s1 := string(c1) // c1 is valid only until the next Write
	c2, _ := d.Write(sp.byteToID[0xe4])
	if s1 != "\xff" || len(c2) != 0 || string(d.Flush()) != "\xe4" || len(d.Flush()) != 0 {
		t.Errorf("invalid bytes: %q %q", s1, c2)
	}
	d.Write(sp.byteToID[0xe4])
	d.Reset()
	if c, _ := d.Write(sp.byteToID['a']); string(c) != "a" {
		t.Errorf("after Reset: %q", c)
	}
}

func TestStreamDecoderAllocs(t *testing.T) {
	tok := loadVocab(t, "qwen3")
	ids := encode(t, tok, corpus[len(corpus)-1].text+" 你好世界 🦙", EncodeOptions{})
	d := tok.NewStreamDecoder(true)
	for _, id := range ids { // warm up the buffer
		d.Write(id)
	}
	i := 0
	allocs := testing.AllocsPerRun(1000, func() {
		d.Write(ids[i%len(ids)])
		i++
	})
	if allocs != 0 {
		t.Errorf("Write allocates %.1f times per token", allocs)
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := loadVocab(t, "llama3")
	want := make([][]int32, len(corpus))
	for i, c := range corpus {
		want[i] = encode(t, tok, c.text, EncodeOptions{ParseSpecial: true})
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := range 3 * len(corpus) {
				i := (k + g*7) % len(corpus)
				got, _ := tok.Encode(corpus[i].text, EncodeOptions{ParseSpecial: true})
				if !slices.Equal(got, want[i]) {
					t.Errorf("goroutine %d case %q differs", g, corpus[i].name)
					return
				}
			}
		}()
	}
	wg.Wait()
}

// TestMergeHeapMatchesSmall: the two merge loops agree on random words.
func TestMergeHeapMatchesSmall(t *testing.T) {
	tok := loadVocab(t, "qwen3")
	m := tok.bpe
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []string{"a", "b", "e", "t", "h", "in", "er", " ", "the", "ing", "ä", "中", "\n", "1"}
	var q bpeQueue
	for range 2000 {
		var w strings.Builder
		for n := 1 + rng.IntN(20); n > 0; n-- {
			w.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		word := w.String()
		if len(word) > smallWord {
			word = word[:smallWord]
		}
		mk := func() []bpeSym {
			syms := make([]bpeSym, len(word))
			for i := range syms {
				syms[i] = bpeSym{id: m.byteSym[word[i]], prev: int32(i - 1), next: int32(i + 1), start: int32(i), end: int32(i + 1)}
			}
			syms[len(syms)-1].next = -1
			return syms
		}
		a, b := mk(), mk()
		m.mergeSmall(a)
		q = m.mergeHeap(b, q[:0])
		var ra, rb []int32
		for i := int32(0); i >= 0; i = a[i].next {
			ra = append(ra, a[i].id)
		}
		for i := int32(0); i >= 0; i = b[i].next {
			rb = append(rb, b[i].id)
		}
		if !slices.Equal(ra, rb) {
			t.Fatalf("%q: small %v heap %v", word, ra, rb)
		}
	}
}

// TestLongInput: long runs of one character class (one pre-tokenizer word, one merge queue)
// finish; a quadratic merge loop would take minutes here.
func TestLongInput(t *testing.T) {
	for _, v := range testVocabs {
		tok := loadVocab(t, v)
		for _, s := range []string{strings.Repeat(" ", 1<<17), strings.Repeat("a", 1<<16), strings.Repeat("<|im_end|>", 1<<12)} {
			ids := encode(t, tok, s, EncodeOptions{ParseSpecial: true})
			if len(ids) == 0 {
				t.Errorf("%s: no tokens", v)
			}
		}
	}
}

// ---- metadata errors ----

// vocabBuilder makes a small vocabulary: the byte alphabet, a few merges, special tokens.
func vocabBuilder(model string, kv ...any) []byte {
	b := gguf.NewBuilder()
	b.AddKV("general.architecture", gguf.String("llama"))
	var tokens []string
	var types []int32
	if model == "llama" {
		tokens = []string{"<unk>", "<s>", "</s>"}
		types = []int32{typeUnknown, typeControl, typeControl}
		for i := range 256 {
			tokens = append(tokens, fmt.Sprintf("<0x%02X>", i))
			types = append(types, typeByte)
		}
		for _, s := range []string{"\u2581", "a", "b", "\u2581a", "ab", "\u2581ab"} {
			tokens = append(tokens, s)
			types = append(types, typeNormal)
		}
	} else {
		for _, r := range byteEnc {
			tokens = append(tokens, string(r))
			types = append(types, typeNormal)
		}
		tokens = append(tokens, "ab", "Ġa", "<|endoftext|>", "<|im_end|>", "<x>")
		types = append(types, typeNormal, typeNormal, typeControl, typeControl, typeUserDefined)
	}
	defaults := map[string]gguf.Value{
		keyModel:     gguf.String(model),
		keyTokens:    gguf.ArrayValue(gguf.NewArray(tokens)),
		keyTokenType: gguf.ArrayValue(gguf.NewArray(types)),
		keyMerges:    gguf.ArrayValue(gguf.NewArray([]string{"a b", "Ġ a", "x", "Ġa b", "a b"})),
		keyPre:       gguf.String("qwen2"),
	}
	if model == "llama" {
		scores := make([]float32, len(tokens))
		for i := range scores {
			scores[i] = -float32(i)
		}
		defaults[keyScores] = gguf.ArrayValue(gguf.NewArray(scores))
		delete(defaults, keyMerges)
		defaults[keyPre] = gguf.String("whatever: ignored for SPM")
	}
	for i := 0; i < len(kv); i += 2 {
		k := kv[i].(string)
		if kv[i+1] == nil {
			delete(defaults, k)
			continue
		}
		defaults[k] = kv[i+1].(gguf.Value)
	}
	if model == "" {
		delete(defaults, keyModel)
	}
	keys := make([]string, 0, len(defaults))
	for k := range defaults {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b.AddKV(k, defaults[k])
	}
	var buf bytes.Buffer
	b.WriteTo(&buf)
	return buf.Bytes()
}

func fromBytes(data []byte) (*Tokenizer, error) {
	f, err := gguf.Parse(data)
	if err != nil {
		return nil, err
	}
	return FromGGUF(f)
}

func TestSmallVocabularies(t *testing.T) {
	tok, err := fromBytes(vocabBuilder("gpt2"))
	if err != nil {
		t.Fatal(err)
	}
	// "ab ab" -> ab, Ġ a -> Ġa, Ġa b is ranked after a b... merges apply by rank.
	ab, _ := tok.ID("ab")
	if got := encode(t, tok, "ab", EncodeOptions{}); !slices.Equal(got, []int32{ab}) {
		t.Errorf("ab -> %v", got)
	}
	x, _ := tok.ID("<x>")
	end, _ := tok.ID("<|im_end|>")
	got := encode(t, tok, "a<x><|im_end|>", EncodeOptions{ParseSpecial: true})
	if !slices.Equal(got[1:], []int32{x, end}) {
		t.Errorf("specials: %v", got)
	}
	if !tok.IsEOG(end) || tok.EOT() != end {
		t.Errorf("<|im_end|> EOG %v, EOT %d", tok.IsEOG(end), tok.EOT())
	}
	// Defaults without ids: BOS/EOS 11 for BPE; no BOS added (qwen2).
	if tok.BOS() != 11 || tok.EOS() != 11 || tok.AddBOS() {
		t.Errorf("defaults: bos %d eos %d addBOS %v", tok.BOS(), tok.EOS(), tok.AddBOS())
	}

	sp, err := fromBytes(vocabBuilder("llama", keyAddEOS, gguf.Bool(true)))
	if err != nil {
		t.Fatal(err)
	}
	ids := encode(t, sp, "ab a", EncodeOptions{AddSpecial: true})
	if ids[0] != 1 || ids[len(ids)-1] != 2 {
		t.Errorf("SPM BOS/EOS: %v", ids)
	}
	if s, _ := sp.DecodeWith(ids, DecodeOptions{RemoveSpecial: true}); s != " ab a" {
		t.Errorf("SPM decode %q", s)
	}
	// Byte fallback for a character outside the vocabulary.
	if got := encode(t, sp, "é", EncodeOptions{}); len(got) != 3 || got[1] != sp.byteToID[0xc3] {
		t.Errorf("byte fallback: %v", got)
	}
}

func TestMetadataErrors(t *testing.T) {
	cases := []struct {
		data []byte
		want string
	}{
		{vocabBuilder(""), "has no tokenizer.ggml.model"},
		{vocabBuilder("wordpiece"), `unsupported tokenizer.ggml.model "wordpiece"`},
		{vocabBuilder("none"), "has no vocabulary"},
		{vocabBuilder("gpt2", keyModel, gguf.Uint32(1)), "tokenizer.ggml.model has type"},
		{vocabBuilder("gpt2", keyPre, gguf.String("starcoder")), `unknown pre-tokenizer tokenizer.ggml.pre "starcoder"`},
		{vocabBuilder("gpt2", keyMerges, nil), "has no tokenizer.ggml.merges"},
		{vocabBuilder("gpt2", keyMerges, gguf.ArrayValue(gguf.NewArray([]int32{1}))), "want an array of strings"},
		{vocabBuilder("gpt2", keyTokens, nil), "has no tokenizer.ggml.tokens"},
		{vocabBuilder("gpt2", keyTokens, gguf.ArrayValue(gguf.NewArray([]string{}))), "is empty"},
		{vocabBuilder("gpt2", keyTokens, gguf.String("x")), "want an array of strings"},
		{vocabBuilder("gpt2", keyTokens, gguf.ArrayValue(gguf.NewArray([]string{"a", "b", "a"}))), `duplicate token "a"`},
		{vocabBuilder("gpt2", keyTokenType, gguf.ArrayValue(gguf.NewArray([]int32{1}))), "token_type must be an array of at least"},
		{vocabBuilder("llama", keyScores, gguf.ArrayValue(gguf.NewArray([]string{"x"}))), "scores must be an array"},
		{vocabBuilder("llama", keyScores, gguf.ArrayValue(gguf.NewArray([]int8{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127}))), "scores must be an array"},
		{vocabBuilder("gpt2", "tokenizer.ggml.bos_token_id", gguf.String("1")), "bos_token_id is"},
		{vocabBuilder("gpt2", "tokenizer.ggml.eos_token_id", gguf.Int32(-1)), "want a non-negative integer"},
		{vocabBuilder("gpt2", keyAddBOS, gguf.Uint8(1)), "add_bos_token has type"},
		{vocabBuilder("gpt2", keyChatTemplate, gguf.Uint8(1)), "chat_template has type"},
		{vocabBuilder("gpt2", keyTokens, gguf.ArrayValue(gguf.NewArray([]string{"a"})), keyTokenType, nil, keyAddBOS, gguf.Bool(true)), "has no BOS token"},
		{vocabBuilder("gpt2", keyTokens, gguf.ArrayValue(gguf.NewArray([]string{"a"})), keyTokenType, nil, keyAddEOS, gguf.Bool(true)), "has no EOS token"},
	}
	for _, c := range cases {
		_, err := fromBytes(c.data)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("error %v, want it to contain %q", err, c.want)
		}
	}
	// Tolerated as llama.cpp tolerates them: a missing pre-tokenizer (default), an id
	// beyond the vocabulary (ignored), an empty token text, an unknown token type.
	tok, err := fromBytes(vocabBuilder("gpt2", keyPre, nil, "tokenizer.ggml.bos_token_id", gguf.Uint32(1<<30),
		keyTokens, gguf.ArrayValue(gguf.NewArray(append([]string{""}, make([]string, 0)...))), keyTokenType, gguf.ArrayValue(gguf.NewArray([]int32{99})), keyMerges, gguf.ArrayValue(gguf.NewArray([]string{}))))
	if err != nil {
		t.Fatal(err)
	}
	if tok.Pre() != "default" || tok.BOS() != -1 || tok.Token(0) != "[EMPTY_0]" {
		t.Errorf("pre %q bos %d token %q", tok.Pre(), tok.BOS(), tok.Token(0))
	}
	if got := encode(t, tok, "[EMPTY_0] abc", EncodeOptions{AddSpecial: true, ParseSpecial: true}); len(got) != 0 {
		t.Errorf("tokens without a byte alphabet: %v", got)
	}
}

// TestSPMPieces: cutting the text where no token spans the boundary gives the ids of one
// merge queue over the whole text, as llama.cpp runs it.
func TestSPMPieces(t *testing.T) {
	tok := loadVocab(t, "llama2")
	rng := rand.New(rand.NewPCG(3, 4))
	texts := []string{benchText()[:20000]}
	for _, c := range corpus {
		texts = append(texts, c.text)
	}
	alphabet := []string{"\u2581", "a", "e", "t", "th", "in", " ", "\n", "é", "中", "🦙", "\xff", "1", ".", "<s>"}
	for range 300 {
		var b strings.Builder
		for n := rng.IntN(40); n > 0; n-- {
			b.WriteString(alphabet[rng.IntN(len(alphabet))])
		}
		texts = append(texts, b.String())
	}
	var sc spmScratch
	for _, text := range texts {
		text = strings.ReplaceAll(" "+text, " ", "\u2581")
		whole := tok.spmEncodePiece(text, &sc, nil)
		cut := tok.spmEncode(text, &sc, nil)
		if !slices.Equal(whole, cut) {
			t.Fatalf("%q: whole %v, cut %v", trunc(text), whole, cut)
		}
	}
}

// TestClasses pins code point classes where Go's tables alone would differ from llama.cpp's
// (Unicode 15.1 additions) and a few that matter to the splitters. The whole table was
// compared once against llama.cpp's src/unicode-data.cpp: equal for all 0x110000 code points.
func TestClasses(t *testing.T) {
	cls := classes()
	for c, want := range map[rune]uint8{
		'a': fLetter, '7': fNumber, ' ': fSep | fSpace, '\n': fControl | fSpace, '\'': fPunct, '$': fSymbol,
		0x0085: fControl | fSpace, 0x00A0: fSep | fSpace, 0x0301: fMark, 0x0378: fControl, 0xD800: fControl,
		0x2FFC: fSymbol, 0x31EF: fSymbol, 0x2EBF0: fLetter, 0x2EE5D: fLetter, 0x2EE5E: fControl, 0x10FFFF: fControl,
	} {
		if cls[c] != want {
			t.Errorf("U+%04X: class %#x, want %#x", c, cls[c], want)
		}
	}
}
