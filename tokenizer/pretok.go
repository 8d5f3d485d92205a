package tokenizer

// Pre-tokenizers split text (as code points) into words before BPE, reproducing the splits
// llama.cpp makes for each tokenizer.ggml.pre name. llama.cpp runs hand-written matchers for
// the GPT-2 and Llama 3 expressions and std::regex over a "collapsed" text (one byte per code
// point standing for its class) for the others; both are written here as small state machines
// over code point classes. Go's regexp cannot do it: the expressions use lookahead.
//
// Every splitter appends the end index (in code points, absolute) of each word of
// cpts[lo:hi] to ends; words never cross lo or hi.

// preKind selects the splitting rules.
type preKind int

const (
	preDefault preKind = iota // llama.cpp's LLAMA_VOCAB_PRE_TYPE_DEFAULT: four passes
	preGPT2                   // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
	preLlama3                 // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
	preQwen2                  // as preLlama3 with \p{N} (single digits)
)

// preInfo is what a tokenizer.ggml.pre name means to llama.cpp's loader.
type preInfo struct {
	kind         preKind
	ignoreMerges bool // a word that is itself a token is emitted whole
	addBOS       bool // default of add_bos when the file does not say
	cleanSpaces  bool // detokenize removes the space before ?!., and some apostrophes
}

// preNames lists the names this package implements, with llama.cpp's settings for each.
var preNames = map[string]preInfo{
	"default": {kind: preDefault, cleanSpaces: true},

	"gpt-2":        {kind: preGPT2, cleanSpaces: true},
	"phi-2":        {kind: preGPT2, cleanSpaces: true},
	"mpt":          {kind: preGPT2, cleanSpaces: true},
	"olmo":         {kind: preGPT2, cleanSpaces: true},
	"jais":         {kind: preGPT2, cleanSpaces: true},
	"gigachat":     {kind: preGPT2, cleanSpaces: true},
	"jina-es":      {kind: preGPT2, cleanSpaces: true},
	"jina-de":      {kind: preGPT2, cleanSpaces: true},
	"jina-v2-es":   {kind: preGPT2, cleanSpaces: true},
	"jina-v2-de":   {kind: preGPT2, cleanSpaces: true},
	"exaone4":      {kind: preGPT2, cleanSpaces: true},
	"a.x-4.0":      {kind: preGPT2, cleanSpaces: true},
	"mellum":       {kind: preGPT2, cleanSpaces: true},
	"trillion":     {kind: preGPT2},
	"modern-bert":  {kind: preGPT2, cleanSpaces: true},
	"roberta-bpe":  {kind: preGPT2, cleanSpaces: true},
	"jina-v1-en":   {kind: preGPT2, cleanSpaces: true},
	"jina-v2-code": {kind: preGPT2, cleanSpaces: true},

	"llama3":       {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"llama-v3":     {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"llama-bpe":    {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"falcon3":      {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"falcon-h1":    {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"pixtral":      {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"midm-2.0":     {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"lfm2":         {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"jina-v5-nano": {kind: preLlama3, ignoreMerges: true, addBOS: true, cleanSpaces: true},
	"dbrx":         {kind: preLlama3, cleanSpaces: true},
	"smaug-bpe":    {kind: preLlama3, cleanSpaces: true},

	"qwen2":            {kind: preQwen2},
	"deepseek-r1-qwen": {kind: preQwen2},
	"kormo":            {kind: preQwen2},
	"f2llmv2":          {kind: preQwen2},
	"hunyuan":          {kind: preQwen2},
	"solar-open":       {kind: preQwen2},
	"megrez":           {kind: preQwen2, cleanSpaces: true},
	"stablelm2":        {kind: preQwen2, cleanSpaces: true},
}

const outOfRange = 0xFFFFFFFF

// splitter holds the code points of one text fragment and collects word ends.
type splitter struct {
	cls  []uint8
	cpts []uint32
	ends []int32
	tmp  []int32
}

func (s *splitter) class(p, hi int) uint8 {
	if p < hi {
		return s.cls[s.cpts[p]]
	}
	return 0
}

func (s *splitter) cpt(p, hi int) uint32 {
	if p < hi {
		return s.cpts[p]
	}
	return outOfRange
}

// split appends the word ends of cpts[0:n] for kind.
func (s *splitter) split(kind preKind) {
	n := len(s.cpts)
	switch kind {
	case preGPT2:
		s.splitGPT2(0, n)
	case preLlama3:
		s.splitLlama3(0, n, 3)
	case preQwen2:
		s.splitLlama3(0, n, 1)
	default:
		s.splitDefault(n)
	}
}

// lowerASCII folds A-Z; llama.cpp lower-cases with the full Unicode map, but no other code
// point lower-cases to one of the letters the contraction rule compares with.
func lowerASCII(c uint32) uint32 {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// contraction reports the length (2 or 3) of 's 't 'm 'd 're 've 'll at pos, or 0. fold
// makes the letters case-insensitive (Llama 3 and Qwen2; GPT-2 is case-sensitive).
func (s *splitter) contraction(pos, hi int, fold bool) int {
	if s.cpts[pos] != '\'' || pos+1 >= hi {
		return 0
	}
	c1 := s.cpts[pos+1]
	if fold {
		c1 = lowerASCII(c1)
	}
	if c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd' {
		return 2
	}
	if pos+2 < hi {
		c2 := s.cpts[pos+2]
		if fold {
			c2 = lowerASCII(c2)
		}
		if c1 == 'r' && c2 == 'e' || c1 == 'v' && c2 == 'e' || c1 == 'l' && c2 == 'l' {
			return 3
		}
	}
	return 0
}

// whitespace handles a run of white space starting at pos for the GPT-2 family
// (nl=false: \s+(?!\S)|\s+) and the Llama 3 family (nl=true: \s*[\r\n]+ first). It returns
// the end of the word, or pos if there is no white space at pos.
func (s *splitter) whitespace(pos, hi int, nl bool) int {
	n, lastNL := 0, 0
	for s.class(pos+n, hi)&fSpace != 0 {
		if c := s.cpts[pos+n]; nl && (c == '\r' || c == '\n') {
			lastNL = pos + n + 1
		}
		n++
	}
	switch {
	case lastNL > 0:
		return lastNL
	case n > 1 && pos+n < hi: // \s+(?!\S): leave the last space to the next word
		return pos + n - 1
	}
	return pos + n
}

// splitLlama3 is the Llama 3 expression; digits is the length of digit groups (3; Qwen2: 1).
func (s *splitter) splitLlama3(lo, hi, digits int) {
	for pos := lo; pos < hi; {
		c, f := s.cpts[pos], s.cls[s.cpts[pos]]
		if n := s.contraction(pos, hi, true); n > 0 {
			pos += n
			s.ends = append(s.ends, int32(pos))
			continue
		}
		// [^\r\n\p{L}\p{N}]?\p{L}+
		if c != '\r' && c != '\n' && f&fNumber == 0 && (f&fLetter != 0 || s.class(pos+1, hi)&fLetter != 0) {
			pos++
			for s.class(pos, hi)&fLetter != 0 {
				pos++
			}
			s.ends = append(s.ends, int32(pos))
			continue
		}
		// \p{N}{1,digits}
		if f&fNumber != 0 {
			start := pos
			for s.class(pos, hi)&fNumber != 0 && pos-start < digits {
				pos++
			}
			s.ends = append(s.ends, int32(pos))
			continue
		}
		// ' ?[^\s\p{L}\p{N}]+[\r\n]*'. f is never 0 inside the fragment, so only the class
		// after a space can stop the rule before it starts.
		f2 := f
		if c == ' ' {
			f2 = s.class(pos+1, hi)
		}
		if f2&(fSpace|fLetter|fNumber) == 0 {
			if c == ' ' {
				pos++
			}
			for f2&(fSpace|fLetter|fNumber) == 0 && f2 != 0 {
				pos++
				f2 = s.class(pos, hi)
			}
			for c2 := s.cpt(pos, hi); c2 == '\r' || c2 == '\n'; c2 = s.cpt(pos, hi) {
				pos++
			}
			s.ends = append(s.ends, int32(pos))
			continue
		}
		if end := s.whitespace(pos, hi, true); end > pos {
			pos = end
		} else {
			pos++ // no rule matches (unreachable: every class is covered)
		}
		s.ends = append(s.ends, int32(pos))
	}
}

// splitGPT2 is the GPT-2 expression.
func (s *splitter) splitGPT2(lo, hi int) {
	for pos := lo; pos < hi; {
		c, f := s.cpts[pos], s.cls[s.cpts[pos]]
		if n := s.contraction(pos, hi, false); n > 0 {
			pos += n
			s.ends = append(s.ends, int32(pos))
			continue
		}
		f2 := f
		if c == ' ' {
			f2 = s.class(pos+1, hi)
		}
		var run uint8 // the class a ' ?X+' rule continues with
		switch {
		case f2&fLetter != 0:
			run = fLetter
		case f2&fNumber != 0:
			run = fNumber
		case f2&(fSpace|fLetter|fNumber) == 0 && f2 != 0:
			run = 0
		default:
			if end := s.whitespace(pos, hi, false); end > pos {
				pos = end
			} else {
				pos++
			}
			s.ends = append(s.ends, int32(pos))
			continue
		}
		if c == ' ' {
			pos++
		}
		if run != 0 {
			for s.class(pos, hi)&run != 0 {
				pos++
			}
		} else {
			for g := s.class(pos, hi); g&(fSpace|fLetter|fNumber) == 0 && g != 0; g = s.class(pos, hi) {
				pos++
			}
		}
		s.ends = append(s.ends, int32(pos))
	}
}

// splitDefault is llama.cpp's fallback for BPE vocabularies without a known pre-tokenizer:
// four expressions applied in turn, each splitting every piece the previous ones left into
// matches and the gaps between them:
//
//	[\p{P}\$\+<=>\^~\|]+    (through std::regex over collapsed text)
//	the GPT-2 expression
//	\p{N}+                  (collapsed)
//	[0-9][0-9][0-9]         (std::wregex)
func (s *splitter) splitDefault(n int) {
	s.ends = s.ends[:0]
	if n == 0 {
		return
	}
	s.ends = append(s.ends, int32(n))
	// Pass 1: runs of ASCII punctuation (but not `), $+<=>^~| and non-ASCII \p{P}.
	s.regexPass(func(c uint32) bool {
		if c < 0x80 {
			return asciiPunctDefault[c]
		}
		f := s.cls[c]
		return f&fSpace == 0 && f&fPunct != 0
	}, false)
	// Pass 2: GPT-2 on each piece.
	s.tmp = append(s.tmp[:0], s.ends...)
	s.ends = s.ends[:0]
	lo := 0
	for _, hi := range s.tmp {
		s.splitGPT2(lo, int(hi))
		lo = int(hi)
	}
	// Pass 3: runs of ASCII digits and non-ASCII \p{N}.
	s.regexPass(func(c uint32) bool {
		if c < 0x80 {
			return c >= '0' && c <= '9'
		}
		f := s.cls[c]
		return f&fSpace == 0 && f&fNumber != 0
	}, false)
	// Pass 4: ASCII digit triples, leftmost first.
	s.regexPass(func(c uint32) bool { return c >= '0' && c <= '9' }, true)
}

// asciiPunctDefault is the ASCII part of [\p{P}\$\+<=>\^~\|] as llama.cpp collapses it.
var asciiPunctDefault = func() (t [128]bool) {
	for _, c := range "!\"#%&'()*,-./:;?@[\\]_{}$+<=>^~|" {
		t[c] = true
	}
	return t
}()

// regexPass re-splits every piece in s.ends into the matches of in+ (or, with triples, of
// exactly three in-characters) and the gaps between them.
func (s *splitter) regexPass(in func(uint32) bool, triples bool) {
	s.tmp = append(s.tmp[:0], s.ends...)
	s.ends = s.ends[:0]
	lo := 0
	for _, hi32 := range s.tmp {
		hi := int(hi32)
		gap := lo // start of the text not yet emitted
		for p := lo; p < hi; {
			if !in(s.cpts[p]) {
				p++
				continue
			}
			e := p
			if triples {
				if p+3 > hi || !in(s.cpts[p+1]) || !in(s.cpts[p+2]) {
					p++
					continue
				}
				e = p + 3
			} else {
				for e < hi && in(s.cpts[e]) {
					e++
				}
			}
			if p > gap {
				s.ends = append(s.ends, int32(p))
			}
			s.ends = append(s.ends, int32(e))
			gap, p = e, e
		}
		if gap < hi {
			s.ends = append(s.ends, int32(hi))
		}
		lo = hi
	}
}
