package tokenizer

import (
	"fmt"
	"strings"
	"sync"
	"unicode/utf8"
)

// Type is the vocabulary type, tokenizer.ggml.model in the file.
type Type int

const (
	// BPE is byte-level BPE ("gpt2"): GPT-2, Llama 3, Qwen2/2.5/3.
	BPE Type = iota + 1
	// SPM is SentencePiece BPE with byte fallback ("llama"): Llama 2, TinyLlama, Mistral 7B.
	SPM
)

// String is the tokenizer.ggml.model name of the type.
func (t Type) String() string {
	switch t {
	case BPE:
		return "gpt2"
	case SPM:
		return "llama"
	}
	return fmt.Sprintf("Type(%d)", int(t))
}

// Token attributes, llama.cpp's llama_token_attr bits, from tokenizer.ggml.token_type.
const (
	attrUnknown     uint8 = 1 << 0
	attrUnused      uint8 = 1 << 1
	attrNormal      uint8 = 1 << 2
	attrControl     uint8 = 1 << 3
	attrUserDefined uint8 = 1 << 4
	attrByte        uint8 = 1 << 5
)

// Tokenizer converts text to token ids and back as llama.cpp does for the same GGUF
// vocabulary. It is immutable after FromGGUF and safe for concurrent use.
type Tokenizer struct {
	typ     Type
	pre     string
	preInfo preInfo

	tokens []string // token texts (an empty text reads as "[EMPTY_<id>]", as in llama.cpp)
	attrs  []uint8
	scores []float32
	toID   map[string]int32

	bos, eos, eot, eom, unk, sep, pad int32    // -1 when the vocabulary has none
	fim                               [6]int32 // fill-in-the-middle: pre, suf, mid, pad, rep, sep
	addBOS, addEOS, addSpacePrefix    bool
	cleanSpaces                       bool
	eog                               map[int32]struct{}
	eogList                           []int32
	chatTemplate                      string

	special *specialMatcher
	bpe     *bpeModel // BPE only
	// byteToID maps a byte to its byte-fallback token (SPM), -1 if none.
	byteToID [256]int32
	spmPairs []uint64 // SPM: bit a<<8|b is set if some token text contains bytes a, b in a row

	cache wordCache

	pieceBuf []byte   // every token's piece (special tokens rendered), back to back
	pieceOff []uint32 // token i's piece is pieceBuf[pieceOff[i]:pieceOff[i+1]]

	scratch sync.Pool
}

// EncodeOptions are the choices llama_tokenize offers.
type EncodeOptions struct {
	// AddSpecial adds BOS (and EOS) where the vocabulary asks for them
	// (tokenizer.ggml.add_bos_token / add_eos_token, or llama.cpp's default for the type).
	AddSpecial bool
	// ParseSpecial turns the text of control tokens (<|im_start|>, <s>, ...) found in the
	// input into those tokens; without it such text is tokenized as plain text.
	// User-defined tokens are split out either way, as llama.cpp does.
	ParseSpecial bool
	// RejectInvalidUTF8 makes Encode return an *InvalidUTF8Error for input that is not
	// valid UTF-8. Without it such input is tokenized as llama.cpp tokenizes it: for BPE each
	// byte that starts no well-formed sequence reads as U+FFFD; for SPM the bytes go through
	// byte fallback.
	RejectInvalidUTF8 bool
}

// InvalidUTF8Error reports input that is not valid UTF-8 (with RejectInvalidUTF8).
type InvalidUTF8Error struct {
	Offset int // byte offset of the first invalid sequence
}

// Error says where the input stops being UTF-8.
func (e *InvalidUTF8Error) Error() string {
	return fmt.Sprintf("tokenizer: input is not valid UTF-8 (first bad byte at offset %d)", e.Offset)
}

// scratch is the per-call working memory, pooled.
type scratch struct {
	split   splitter
	bpe     bpeScratch
	spm     spmScratch
	frags   []fragment
	occ     []occurrence
	taken   []fragment
	covered []bool
	norm    []byte
	text    []byte
}

func (t *Tokenizer) getScratch() *scratch {
	if sc, ok := t.scratch.Get().(*scratch); ok {
		return sc
	}
	return &scratch{split: splitter{cls: classes()}}
}

// Encode tokenizes text. The result equals llama.cpp's llama_tokenize with add_special =
// opts.AddSpecial and parse_special = opts.ParseSpecial. The only error is an
// *InvalidUTF8Error when opts.RejectInvalidUTF8 is set.
func (t *Tokenizer) Encode(text string, opts EncodeOptions) ([]int32, error) {
	if opts.RejectInvalidUTF8 && !utf8.ValidString(text) {
		off := 0
		for off < len(text) {
			r, n := utf8.DecodeRuneInString(text[off:])
			if r == utf8.RuneError && n == 1 {
				break
			}
			off += n
		}
		return nil, &InvalidUTF8Error{Offset: off}
	}
	sc := t.getScratch()
	defer t.scratch.Put(sc)

	out := make([]int32, 0, len(text)/4+2)
	if opts.AddSpecial && t.addBOS {
		out = append(out, t.bos)
	}
	frags := t.special.partition(text, opts.ParseSpecial, sc)
	prevSpecial := true // SPM: the first raw fragment gets the space prefix
	for _, f := range frags {
		if f.id >= 0 {
			out = append(out, f.id)
			prevSpecial = true
			continue
		}
		raw := text[f.start:f.end]
		if t.typ == SPM {
			b := sc.text[:0]
			if t.addSpacePrefix && prevSpecial {
				b = append(b, "\u2581"...)
			}
			for i := 0; i < len(raw); i++ {
				if raw[i] == ' ' {
					b = append(b, "\u2581"...)
				} else {
					b = append(b, raw[i])
				}
			}
			sc.text = b
			out = t.spmEncode(string(b), &sc.spm, out)
		} else {
			out = t.bpeEncodeText(raw, sc, out)
		}
		prevSpecial = false
	}
	if opts.AddSpecial && t.addEOS {
		out = append(out, t.eos)
	}
	return out, nil
}

// bpeEncodeText pre-tokenizes one raw fragment and BPE-encodes each word.
func (t *Tokenizer) bpeEncodeText(s string, sc *scratch, out []int32) []int32 {
	sp := &sc.split
	cpts := sp.cpts[:0]
	changed := false // whether re-encoding the code points changes the bytes
	for i := 0; i < len(s); {
		if s[i] < 0x80 {
			cpts = append(cpts, uint32(s[i]))
			i++
			continue
		}
		c, n := decodeCpt(s, i)
		if cptLen(c) != n {
			changed = true
		}
		cpts = append(cpts, c)
		i += n
	}
	sp.cpts = cpts
	if changed {
		// llama.cpp re-encodes the code points: U+FFFD for bad bytes, overlong forms
		// shortened. Words are cut from that text.
		norm := sc.norm[:0]
		for _, c := range cpts {
			norm = appendCpt(norm, c)
		}
		sc.norm = norm
		s = string(norm)
	}
	sp.ends = sp.ends[:0]
	sp.split(t.preInfo.kind)
	pos, k := 0, 0
	for _, e := range sp.ends {
		start := pos
		for ; k < int(e); k++ {
			pos += cptLen(cpts[k])
		}
		out = t.encodeWord(s[start:pos], &sc.bpe, out)
	}
	return out
}

// DecodeOptions are the choices llama_detokenize offers.
type DecodeOptions struct {
	// RemoveSpecial drops a leading BOS and a trailing EOS the vocabulary adds itself.
	RemoveSpecial bool
	// RenderSpecial writes the text of control tokens; without it they produce nothing.
	RenderSpecial bool
}

// Decode turns ids back into text with special tokens not rendered; see DecodeWith.
func (t *Tokenizer) Decode(ids []int32) (string, error) {
	return t.DecodeWith(ids, DecodeOptions{})
}

// DecodeWith turns ids back into text as llama_detokenize does: the pieces concatenated, the
// space SentencePiece puts before the first word removed (when the first token is not a
// kept BOS), and for vocabularies that ask for it (GPT-2, Llama 3) llama.cpp's clean-up of
// spaces before punctuation. Invalid UTF-8 in the pieces is kept as is. An id outside the
// vocabulary is an error.
func (t *Tokenizer) DecodeWith(ids []int32, opts DecodeOptions) (string, error) {
	removeSpace := t.addSpacePrefix
	if opts.RemoveSpecial && t.addBOS && len(ids) > 0 && ids[0] == t.bos {
		removeSpace = false
		ids = ids[1:]
	}
	if opts.RemoveSpecial && t.addEOS && len(ids) > 0 && ids[len(ids)-1] == t.eos {
		ids = ids[:len(ids)-1]
	}
	var b []byte
	for _, id := range ids {
		if id < 0 || int(id) >= len(t.tokens) {
			return "", fmt.Errorf("tokenizer: token id %d outside the vocabulary (size %d)", id, len(t.tokens))
		}
		p := t.Piece(id, opts.RenderSpecial)
		if removeSpace && len(p) > 0 && p[0] == ' ' {
			p = p[1:]
		}
		removeSpace = false
		b = append(b, p...)
	}
	if t.cleanSpaces {
		b = cleanSpaces(b)
	}
	return string(b), nil
}

// cleanSpaces is llama.cpp's clean_up_tokenization_spaces pass, done in place exactly as
// llama_detokenize does it (including its reading of characters it has overwritten).
func cleanSpaces(text []byte) []byte {
	total := len(text)
	if total == 0 {
		return text
	}
	// " ?", " !", " .", " ," lose the space.
	n := total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',') {
			total--
		}
		text[total] = x
		total++
	}
	// " ' " becomes "'".
	n = total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if x == '\'' && i+1 < n && text[i-1] == ' ' && text[i+1] == ' ' {
			total--
			i++
			text[i] = 0
		}
		text[total] = x
		total++
	}
	// " 's", " 'm", " 're", " 've" lose the space.
	n = total
	total = 1
	for i := 1; i < n; i++ {
		x := text[i]
		if text[i-1] == ' ' && x == '\'' && i+1 < n {
			x1 := text[i+1]
			if x1 == 's' || x1 == 'm' {
				total--
			} else if i+2 < n {
				x2 := text[i+2]
				if x1 == 'r' && x2 == 'e' || x1 == 'v' && x2 == 'e' {
					total--
				}
			}
		}
		text[total] = x
		total++
	}
	return text[:total]
}

// Piece is the text of token id: bytes for a byte token, spaces for ▁ (SPM), the byte-level
// alphabet decoded (BPE). Control and unknown tokens give their text with renderSpecial and
// nothing without, as llama_token_to_piece does. The result is the tokenizer's own memory
// (do not modify); nil for an id outside the vocabulary.
func (t *Tokenizer) Piece(id int32, renderSpecial bool) []byte {
	if id < 0 || int(id) >= len(t.tokens) {
		return nil
	}
	if !renderSpecial && t.attrs[id]&(attrControl|attrUnknown) != 0 {
		return t.pieceBuf[0:0:0]
	}
	lo, hi := t.pieceOff[id], t.pieceOff[id+1]
	return t.pieceBuf[lo:hi:hi]
}

// Type is the vocabulary type.
func (t *Tokenizer) Type() Type { return t.typ }

// Pre is the pre-tokenizer name (tokenizer.ggml.pre; "default" if the file has none).
func (t *Tokenizer) Pre() string { return t.pre }

// VocabSize is the number of tokens.
func (t *Tokenizer) VocabSize() int { return len(t.tokens) }

// Token is the text of token id as stored in the vocabulary ("" outside it).
func (t *Tokenizer) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID is the token whose vocabulary text is exactly s.
func (t *Tokenizer) ID(s string) (int32, bool) {
	id, ok := t.toID[s]
	return id, ok
}

// BOS is the beginning-of-sequence token, -1 if none.
func (t *Tokenizer) BOS() int32 { return t.bos }

// EOS is the end-of-sequence token, -1 if none.
func (t *Tokenizer) EOS() int32 { return t.eos }

// EOT is the end-of-turn token (tokenizer.ggml.eot_token_id, else found by text as
// llama.cpp does: <|eot_id|>, <|im_end|>, ...), -1 if none.
func (t *Tokenizer) EOT() int32 { return t.eot }

// EOM is the end-of-message token (<|eom_id|>), -1 if none.
func (t *Tokenizer) EOM() int32 { return t.eom }

// PAD is the padding token, -1 if none.
func (t *Tokenizer) PAD() int32 { return t.pad }

// UNK is the unknown token, -1 if none.
func (t *Tokenizer) UNK() int32 { return t.unk }

// AddBOS reports whether Encode with AddSpecial starts with BOS.
func (t *Tokenizer) AddBOS() bool { return t.addBOS }

// AddEOS reports whether Encode with AddSpecial ends with EOS.
func (t *Tokenizer) AddEOS() bool { return t.addEOS }

// IsEOG reports whether generation should stop at id: EOS, EOT, EOM and the tokens llama.cpp
// treats as end of generation by their text (<|im_end|>, <|eot_id|>, <|endoftext|>, ...).
func (t *Tokenizer) IsEOG(id int32) bool {
	_, ok := t.eog[id]
	return ok
}

// EOG lists the end-of-generation tokens in increasing order.
func (t *Tokenizer) EOG() []int32 { return append([]int32(nil), t.eogList...) }

// IsControl reports whether id is a control or unknown token (<s>, <|im_start|>, ...): one
// whose text ParseSpecial recognises and Piece renders only on request.
func (t *Tokenizer) IsControl(id int32) bool {
	return id >= 0 && int(id) < len(t.attrs) && t.attrs[id]&(attrControl|attrUnknown) != 0
}

// ChatTemplate is tokenizer.chat_template, "" if the file has none.
func (t *Tokenizer) ChatTemplate() string { return t.chatTemplate }

// String describes the tokenizer in one line.
func (t *Tokenizer) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s tokenizer (pre %q), %d tokens, bos %d eos %d", t.typ, t.pre, len(t.tokens), t.bos, t.eos)
	if t.bpe != nil {
		fmt.Fprintf(&b, ", %d merges", len(t.bpe.merges))
	}
	return b.String()
}
