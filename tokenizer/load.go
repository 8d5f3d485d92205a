package tokenizer

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/kernelrt/kernelrt/gguf"
)

// GGUF token types (tokenizer.ggml.token_type), llama.cpp's llama_token_type.
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

// Metadata keys read by FromGGUF.
const (
	keyModel        = "tokenizer.ggml.model"
	keyPre          = "tokenizer.ggml.pre"
	keyTokens       = "tokenizer.ggml.tokens"
	keyScores       = "tokenizer.ggml.scores"
	keyTokenType    = "tokenizer.ggml.token_type"
	keyMerges       = "tokenizer.ggml.merges"
	keyAddBOS       = "tokenizer.ggml.add_bos_token"
	keyAddEOS       = "tokenizer.ggml.add_eos_token"
	keyAddPrefix    = "tokenizer.ggml.add_space_prefix"
	keyChatTemplate = "tokenizer.chat_template"
)

// FromGGUF builds the tokenizer described by a GGUF file's tokenizer.ggml.* metadata, the way
// llama.cpp's llama_vocab::load reads it (defaults, special-token detection by text, the
// end-of-generation set). Only the metadata is used: a vocabulary-only file is enough.
//
// Supported: tokenizer.ggml.model "gpt2" with the pre-tokenizers qwen2, llama-bpe (Llama 3),
// gpt-2, default and their llama.cpp aliases, and "llama" (SentencePiece). Anything else, and
// any malformed tokenizer metadata, is an error naming the key; nothing in a file can make
// FromGGUF panic.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	model, err := getString(f, keyModel, true)
	if err != nil {
		return nil, err
	}
	t := &Tokenizer{bos: -1, eos: -1, eot: -1, eom: -1, unk: -1, sep: -1, pad: -1}
	switch model {
	case "gpt2":
		t.typ = BPE
		t.bos, t.eos = 11, 11 // llama.cpp's defaults for BPE vocabularies
	case "llama":
		t.typ = SPM
		t.bos, t.eos, t.unk = 1, 2, 0
		t.addBOS, t.addSpacePrefix = true, true
	case "no_vocab", "none":
		return nil, fmt.Errorf("tokenizer: %s is %q: the file has no vocabulary", keyModel, model)
	default:
		return nil, fmt.Errorf("tokenizer: unsupported %s %q (supported: gpt2, llama)", keyModel, model)
	}

	pre, err := getString(f, keyPre, false)
	if err != nil {
		return nil, err
	}
	if t.typ == BPE {
		if pre == "" {
			pre = "default" // llama.cpp warns and uses its default pre-tokenizer
		}
		info, ok := preNames[pre]
		if !ok {
			return nil, fmt.Errorf("tokenizer: unknown pre-tokenizer %s %q (supported: %s)", keyPre, pre, supportedPre())
		}
		t.preInfo = info
		t.addBOS = info.addBOS
		t.cleanSpaces = info.cleanSpaces
	}
	t.pre = pre

	if err := t.loadTokens(f); err != nil {
		return nil, err
	}
	if err := t.loadSpecialIDs(f); err != nil {
		return nil, err
	}
	if err := t.loadFlags(f); err != nil {
		return nil, err
	}
	t.detectSpecialTokens()
	t.special = newSpecialMatcher(t)
	t.buildPieces()
	if t.typ == BPE {
		if err := t.loadMerges(f); err != nil {
			return nil, err
		}
	} else {
		t.buildByteFallback()
		t.buildSPMPairs()
	}
	if t.chatTemplate, err = getString(f, keyChatTemplate, false); err != nil {
		return nil, err
	}
	return t, nil
}

func supportedPre() string {
	names := make([]string, 0, len(preNames))
	for n := range preNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}

// getString reads a string key; absent gives "" (or an error if required).
func getString(f *gguf.File, key string, required bool) (string, error) {
	v, ok := f.Get(key)
	if !ok {
		if required {
			return "", fmt.Errorf("tokenizer: the file has no %s (not a llama.cpp vocabulary)", key)
		}
		return "", nil
	}
	s, ok := v.AsString()
	if !ok {
		return "", fmt.Errorf("tokenizer: %s has type %v, want string", key, v.Type())
	}
	return s, nil
}

// getBool reads an optional bool key into *dst.
func getBool(f *gguf.File, key string, dst *bool) error {
	v, ok := f.Get(key)
	if !ok {
		return nil
	}
	b, ok := v.AsBool()
	if !ok {
		return fmt.Errorf("tokenizer: %s has type %v, want bool", key, v.Type())
	}
	*dst = b
	return nil
}

func (t *Tokenizer) loadTokens(f *gguf.File) error {
	v, ok := f.Get(keyTokens)
	if !ok {
		return fmt.Errorf("tokenizer: the file has no %s", keyTokens)
	}
	arr, ok := v.AsArray()
	if !ok {
		return fmt.Errorf("tokenizer: %s has type %v, want an array of strings", keyTokens, v.Type())
	}
	tokens, ok := arr.Strings()
	if !ok {
		return fmt.Errorf("tokenizer: %s is an array of %v, want strings", keyTokens, arr.Elem())
	}
	n := len(tokens)
	if n == 0 {
		return fmt.Errorf("tokenizer: %s is empty", keyTokens)
	}
	if n > 1<<30 {
		return fmt.Errorf("tokenizer: %s has %d tokens, more than token ids can address", keyTokens, n)
	}

	t.scores = make([]float32, n)
	if v, ok := f.Get(keyScores); ok {
		arr, ok := v.AsArray()
		if !ok || arr.Len() < n {
			return fmt.Errorf("tokenizer: %s must be an array of at least %d float32 or int32", keyScores, n)
		}
		if fs, ok := arr.Float32s(); ok {
			copy(t.scores, fs[:n])
		} else if is, ok := arr.Int32s(); ok {
			for i := range n {
				t.scores[i] = float32(is[i])
			}
		} else {
			return fmt.Errorf("tokenizer: %s is an array of %v, want float32 or int32", keyScores, arr.Elem())
		}
	}

	t.attrs = make([]uint8, n)
	var types []int32
	if v, ok := f.Get(keyTokenType); ok {
		arr, ok := v.AsArray()
		if ok {
			types, ok = arr.Int32s()
		}
		if !ok || len(types) < n {
			return fmt.Errorf("tokenizer: %s must be an array of at least %d int32", keyTokenType, n)
		}
	}
	for i := range n {
		if types == nil {
			t.attrs[i] = attrNormal
			continue
		}
		switch types[i] {
		case typeNormal:
			t.attrs[i] = attrNormal
		case typeUnknown:
			t.attrs[i] = attrUnknown
		case typeControl:
			t.attrs[i] = attrControl
		case typeUserDefined:
			t.attrs[i] = attrUserDefined
		case typeUnused:
			t.attrs[i] = attrUnused
		case typeByte:
			t.attrs[i] = attrByte
		} // anything else: undefined, no attribute (renders as nothing)
	}

	t.tokens = make([]string, n)
	t.toID = make(map[string]int32, n)
	for i, s := range tokens {
		if s == "" {
			s = "[EMPTY_" + strconv.Itoa(i) + "]"
		}
		if j, dup := t.toID[s]; dup {
			return fmt.Errorf("tokenizer: duplicate token %q in %s (ids %d and %d)", s, keyTokens, j, i)
		}
		t.toID[s] = int32(i)
		t.tokens[i] = s
	}
	return nil
}

// specialIDKeys are the id keys llama.cpp reads, in its order (later deprecated FIM keys
// override earlier ones).
var specialIDKeys = []struct {
	key string
	id  func(t *Tokenizer, fim *[6]int32) *int32
}{
	{"tokenizer.ggml.bos_token_id", func(t *Tokenizer, _ *[6]int32) *int32 { return &t.bos }},
	{"tokenizer.ggml.eos_token_id", func(t *Tokenizer, _ *[6]int32) *int32 { return &t.eos }},
	{"tokenizer.ggml.eot_token_id", func(t *Tokenizer, _ *[6]int32) *int32 { return &t.eot }},
	{"tokenizer.ggml.eom_token_id", func(t *Tokenizer, _ *[6]int32) *int32 { return &t.eom }},
	{"tokenizer.ggml.unknown_token_id", func(t *Tokenizer, _ *[6]int32) *int32 { return &t.unk }},
	{"tokenizer.ggml.seperator_token_id", func(t *Tokenizer, _ *[6]int32) *int32 { return &t.sep }},
	{"tokenizer.ggml.padding_token_id", func(t *Tokenizer, _ *[6]int32) *int32 { return &t.pad }},
	{"tokenizer.ggml.fim_pre_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[0] }},
	{"tokenizer.ggml.fim_suf_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[1] }},
	{"tokenizer.ggml.fim_mid_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[2] }},
	{"tokenizer.ggml.fim_pad_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[3] }},
	{"tokenizer.ggml.fim_rep_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[4] }},
	{"tokenizer.ggml.fim_sep_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[5] }},
	{"tokenizer.ggml.prefix_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[0] }},
	{"tokenizer.ggml.suffix_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[1] }},
	{"tokenizer.ggml.middle_token_id", func(_ *Tokenizer, fim *[6]int32) *int32 { return &fim[2] }},
}

// loadSpecialIDs reads the special token ids over the type's defaults. An id beyond the
// vocabulary is ignored with the default kept, as llama.cpp does (it warns).
func (t *Tokenizer) loadSpecialIDs(f *gguf.File) error {
	n := int64(len(t.tokens))
	fim := [6]int32{-1, -1, -1, -1, -1, -1}
	for _, k := range specialIDKeys {
		p := k.id(t, &fim)
		if int64(*p) >= n { // a default beyond a small vocabulary is disabled
			*p = -1
		}
		v, ok := f.Get(k.key)
		if !ok {
			continue
		}
		id, ok := v.AsUint()
		if !ok {
			return fmt.Errorf("tokenizer: %s is %v, want a non-negative integer", k.key, v)
		}
		if id < uint64(n) { // out of range: llama.cpp warns and keeps the default
			*p = int32(id)
		}
	}
	t.fim = fim
	return nil
}

func (t *Tokenizer) loadFlags(f *gguf.File) error {
	if err := getBool(f, keyAddPrefix, &t.addSpacePrefix); err != nil {
		return err
	}
	if err := getBool(f, keyAddBOS, &t.addBOS); err != nil {
		return err
	}
	if err := getBool(f, keyAddEOS, &t.addEOS); err != nil {
		return err
	}
	if t.addBOS && t.bos < 0 {
		return fmt.Errorf("tokenizer: %s is true but the vocabulary has no BOS token", keyAddBOS)
	}
	if t.addEOS && t.eos < 0 {
		return fmt.Errorf("tokenizer: %s is true but the vocabulary has no EOS token", keyAddEOS)
	}
	return nil
}

// Texts llama.cpp recognises (llama_vocab::impl::load) when the file does not name the
// tokens; each list is in order of preference here (llama.cpp takes whichever its hash map
// yields first).
var (
	eotTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>",
		"<|end_of_text|>", "<EOT>", "_<EOT>", "[EOT]", "<｜end▁of▁sentence｜>", "<end_of_utterance>"}
	eomTexts = []string{"<|eom_id|>"}
	fimTexts = [6][]string{
		{"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>", "<|code_prefix|>", "<|prefix|>"},
		{"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>", "<|code_suffix|>", "<|suffix|>"},
		{"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>", "<|code_middle|>", "<|middle|>"},
		{"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
		{"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
		{"<|file_sep|>"},
	}
	eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>",
		"<|calls|>", "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]",
		"[EOS]", "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
		"<｜end▁of▁sentence｜>", "[e~["}
)

// detectSpecialTokens does what llama.cpp does after reading the ids: finds EOT, EOM and FIM
// tokens by text (marking them control), marks control tokens named "unused" as unused, and
// builds the end-of-generation set.
func (t *Tokenizer) detectSpecialTokens() {
	find := func(id *int32, texts []string) {
		if *id >= 0 {
			return
		}
		for _, s := range texts {
			if i, ok := t.toID[s]; ok {
				*id = i
				t.attrs[i] |= attrControl
				return
			}
		}
	}
	find(&t.eot, eotTexts)
	find(&t.eom, eomTexts)
	for k := range t.fim {
		find(&t.fim[k], fimTexts[k])
	}
	for i, a := range t.attrs {
		if a&attrControl != 0 && strings.Contains(t.tokens[i], "unused") {
			t.attrs[i] |= attrUnused
		}
	}
	t.eog = map[int32]struct{}{}
	for _, id := range t.fim[3:] { // pad, rep, sep
		if id >= 0 {
			t.eog[id] = struct{}{}
		}
	}
	for _, s := range eogTexts {
		if i, ok := t.toID[s]; ok {
			t.eog[i] = struct{}{}
			t.attrs[i] |= attrControl
		}
	}
	// gpt-oss: these look special but are plain text to render.
	for _, s := range []string{"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"} {
		if i, ok := t.toID[s]; ok {
			t.attrs[i] = attrUserDefined
		}
	}
	for _, id := range []int32{t.eos, t.eot, t.eom} {
		if id >= 0 {
			t.eog[id] = struct{}{}
		}
	}
	// o200k_harmony and solar-open: <|end|> ends a message, not the generation.
	has := func(s string) bool { i, ok := t.toID[s]; _, e := t.eog[i]; return ok && e }
	if end, ok := t.toID["<|end|>"]; ok && has("<|end|>") &&
		(has("<|return|>") && has("<|call|>") || has("<|calls|>") && has("<|flush|>")) {
		delete(t.eog, end)
		t.attrs[end] = attrUserDefined
	}
	// Gemma 4 and PaddleOCR: </s> is no end of generation next to <|tool_response>.
	if s, ok := t.toID["</s>"]; ok && has("<|tool_response>") && has("</s>") {
		delete(t.eog, s)
		t.attrs[s] = attrNormal
	}
	for id := range t.eog {
		t.eogList = append(t.eogList, id)
	}
	slices.Sort(t.eogList)
}

// buildPieces renders every token once (llama.cpp's token_to_piece cache, special = true).
func (t *Tokenizer) buildPieces() {
	size := 0
	for _, s := range t.tokens {
		size += len(s)
	}
	buf := make([]byte, 0, size)
	off := make([]uint32, len(t.tokens)+1)
	for i, s := range t.tokens {
		a := t.attrs[i]
		switch {
		case a&(attrUnknown|attrControl|attrUserDefined) != 0:
			buf = append(buf, s...)
		case a&attrNormal != 0:
			if t.typ == SPM {
				buf = append(buf, strings.ReplaceAll(s, "\u2581", " ")...)
			} else {
				buf = appendByteLevelDecoded(buf, s)
			}
		case a&attrByte != 0:
			buf = append(buf, byteTokenValue(s))
		}
		off[i+1] = uint32(len(buf))
	}
	t.pieceBuf, t.pieceOff = buf, off
}

// appendByteLevelDecoded maps each character of a GPT-2 byte-level token text back to its
// byte. A character outside the alphabet comes out as llama.cpp's llama_decode_text writes
// it: "[UNK_BYTE_0x<hex of its UTF-8>" followed by the whole token text and "]".
func appendByteLevelDecoded(buf []byte, s string) []byte {
	for i := 0; i < len(s); {
		c, n := decodeCpt(s, i)
		i += n
		if b, ok := byteDec[rune(c)]; ok && c < maxCodePoint {
			buf = append(buf, b)
			continue
		}
		buf = append(buf, "[UNK_BYTE_0x"...)
		for _, u := range appendCpt(nil, c) {
			buf = append(buf, "0123456789abcdef"[u>>4], "0123456789abcdef"[u&15])
		}
		buf = append(buf, s...)
		buf = append(buf, ']')
	}
	return buf
}

// byteTokenValue reads the byte of a byte token "<0xXX>" as llama.cpp does (strtol on the two
// characters after "<0x"; hex digits up to the first other character, 0 if none).
func byteTokenValue(s string) byte {
	if len(s) < 3 {
		return 0
	}
	s = s[3:min(5, len(s))]
	var v byte
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			v = v<<4 | (c - '0')
		case c >= 'a' && c <= 'f':
			v = v<<4 | (c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			v = v<<4 | (c - 'A' + 10)
		default:
			return v
		}
	}
	return v
}

// buildByteFallback finds the token of every byte for SPM byte fallback: "<0xXX>", else the
// byte itself as a one-byte token text (llama.cpp's byte_to_token).
func (t *Tokenizer) buildByteFallback() {
	for b := range 256 {
		t.byteToID[b] = -1
		if id, ok := t.toID[fmt.Sprintf("<0x%02X>", b)]; ok {
			t.byteToID[b] = id
		} else if id, ok := t.toID[string([]byte{byte(b)})]; ok {
			t.byteToID[b] = id
		}
	}
}

// loadMerges builds the BPE merge table from tokenizer.ggml.merges ("left right", split at
// the first space after the first byte, as llama.cpp splits them).
func (t *Tokenizer) loadMerges(f *gguf.File) error {
	v, ok := f.Get(keyMerges)
	if !ok {
		return fmt.Errorf("tokenizer: the gpt2 vocabulary has no %s (BPE needs its merges)", keyMerges)
	}
	arr, ok := v.AsArray()
	var merges []string
	if ok {
		merges, ok = arr.Strings()
	}
	if !ok {
		return fmt.Errorf("tokenizer: %s has type %v, want an array of strings", keyMerges, v.Type())
	}
	m := &bpeModel{
		merges:   make(map[uint64]mergeResult, len(merges)),
		nTokens:  int32(len(t.tokens)),
		ignoreMg: t.preInfo.ignoreMerges,
	}
	extra := map[string]int32{}
	intern := func(s string) int32 {
		if id, ok := t.toID[s]; ok {
			return id
		}
		if id, ok := extra[s]; ok {
			return id
		}
		id := m.nTokens + int32(len(extra))
		extra[s] = id
		return id
	}
	var cat []byte
	for rank, s := range merges {
		if len(s) < 2 {
			continue
		}
		sp := strings.IndexByte(s[1:], ' ')
		if sp < 0 {
			continue // llama.cpp stores it as the pair ("", ""), which nothing matches
		}
		left, right := s[:sp+1], s[sp+2:]
		if right == "" {
			continue
		}
		key := pairKey(intern(left), intern(right))
		if _, dup := m.merges[key]; dup {
			continue // the first (lowest) rank wins
		}
		cat = append(append(cat[:0], left...), right...)
		res, ok := t.toID[string(cat)]
		if !ok {
			res = intern(string(cat))
		}
		m.merges[key] = mergeResult{rank: int32(rank), result: res}
	}
	for b := range 256 {
		s := string(byteEnc[b])
		m.byteSym[b] = -1
		if id, ok := t.toID[s]; ok {
			m.byteSym[b] = id
		} else if id, ok := extra[s]; ok {
			m.byteSym[b] = id
		}
	}
	if m.ignoreMg {
		m.rawToID = make(map[string]int32, len(t.tokens))
		var raw []byte
		for id, s := range t.tokens {
			if r, ok := byteLevelRaw(raw[:0], s); ok {
				raw = r
				m.rawToID[string(r)] = int32(id)
			}
		}
	}
	t.bpe = m
	return nil
}

// byteLevelRaw decodes a token text written in GPT-2's byte alphabet to the raw bytes it
// stands for; false if a character is outside the alphabet.
func byteLevelRaw(dst []byte, s string) ([]byte, bool) {
	for _, r := range s {
		b, ok := byteDec[r]
		if !ok {
			return dst, false
		}
		dst = append(dst, b)
	}
	return dst, true
}
