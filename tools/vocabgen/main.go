// Command vocabgen converts a Hugging Face tokenizer.json (with its tokenizer_config.json)
// into a vocabulary-only GGUF file: the tokenizer.ggml.* metadata llama.cpp's
// convert_hf_to_gguf.py writes for the same tokenizer, and no tensors (like llama.cpp's
// models/ggml-vocab-*.gguf). The tokenizer package's test fixtures are made with it.
//
//	vocabgen -in DIR/tokenizer.json -out vocab.gguf.gz [-vocab-size N] [-bos-id N] [-eos-id N]
//	         [-pre NAME] [-arch NAME] [-name NAME]
//
// tokenizer_config.json is read from the same directory. A -out ending in .gz is written
// gzip-compressed. -vocab-size, -bos-id and -eos-id stand in for the model's config.json
// (vocab_size, bos_token_id, eos_token_id), which tokenizer packages do not ship.
//
// Byte-level BPE (model.type BPE without byte_fallback, ByteLevel decoder) becomes
// tokenizer.ggml.model "gpt2" as convert_hf_to_gguf.py's get_vocab_base does: tokens by id,
// ids without a token filled with "[PAD<id>]" of type unused up to -vocab-size, added tokens
// control when special (or when they look special: <|...|>) and user-defined otherwise,
// merges as "left right", the pre-tokenizer name (inferred from the split regex unless -pre
// is given), special token ids and add_*_token flags as gguf-py's SpecialVocab reads them,
// and the chat template.
//
// SentencePiece BPE stored as BPE with byte_fallback (Llama 2, Mistral, TinyLlama) becomes
// tokenizer.ggml.model "llama" with scores and token types. tokenizer.json carries no
// SentencePiece scores, and llama.cpp's converter writes -1000 for every token in this case
// (gguf-py's LlamaHfVocab), which makes its SPM merge in text order instead of the model's.
// vocabgen reconstructs the scores SentencePiece would have: a normal token's score is
// -(id - first normal id), the order SentencePiece assigns ids in, except tokens whose merge
// comes out of that order in the merges list, which Hugging Face's converter puts last because
// their score is the lowest; they get -1e9 (for Llama 2 these are the runs of ▁). The unknown
// token is typed unknown, other special tokens control, <0xXX> tokens byte, as
// convert_hf_to_gguf.py's SentencePiece path types them.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/kernelrt/kernelrt/gguf"
)

// GGUF token types (gguf-py's TokenType).
const (
	typeNormal      = 1
	typeUnknown     = 2
	typeControl     = 3
	typeUserDefined = 4
	typeUnused      = 5
	typeByte        = 6
)

type addedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized bool   `json:"normalized"`
}

type tokenizerJSON struct {
	AddedTokens []addedToken `json:"added_tokens"`
	Model       struct {
		Type         string          `json:"type"`
		Vocab        map[string]int  `json:"vocab"`
		Merges       json.RawMessage `json:"merges"`
		ByteFallback bool            `json:"byte_fallback"`
		UnkToken     *string         `json:"unk_token"`
	} `json:"model"`
	PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
	PostProcessor json.RawMessage `json:"post_processor"`
	Decoder       struct {
		Type string `json:"type"`
	} `json:"decoder"`
}

type options struct {
	in, out, pre, arch, name string
	vocabSize, bosID, eosID  int
}

func main() {
	var o options
	flag.StringVar(&o.in, "in", "", "tokenizer.json to convert (tokenizer_config.json is read beside it)")
	flag.StringVar(&o.out, "out", "", "GGUF file to write (.gz: gzip-compressed)")
	flag.StringVar(&o.pre, "pre", "", "tokenizer.ggml.pre (default: inferred from the pre-tokenizer regex)")
	flag.StringVar(&o.arch, "arch", "", "general.architecture (default: qwen2 for qwen2 pre-tokenizers, else llama)")
	flag.StringVar(&o.name, "name", "", "general.name (default: the input directory's name)")
	flag.IntVar(&o.vocabSize, "vocab-size", 0, "config.json vocab_size: pad the vocabulary to this many tokens")
	flag.IntVar(&o.bosID, "bos-id", -1, "config.json bos_token_id, if any")
	flag.IntVar(&o.eosID, "eos-id", -1, "config.json eos_token_id, if any")
	flag.Parse()
	if o.in == "" || o.out == "" {
		fmt.Fprintln(os.Stderr, "usage: vocabgen -in tokenizer.json -out vocab.gguf[.gz] [flags]")
		flag.PrintDefaults()
		os.Exit(2)
	}
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "vocabgen:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	raw, err := os.ReadFile(o.in)
	if err != nil {
		return err
	}
	var tj tokenizerJSON
	if err := json.Unmarshal(raw, &tj); err != nil {
		return fmt.Errorf("%s: %v", o.in, err)
	}
	var cfg map[string]any
	if b, err := os.ReadFile(filepath.Join(filepath.Dir(o.in), "tokenizer_config.json")); err == nil {
		if err := json.Unmarshal(b, &cfg); err != nil {
			return fmt.Errorf("tokenizer_config.json: %v", err)
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if o.name == "" {
		o.name = filepath.Base(filepath.Dir(o.in))
	}
	b := gguf.NewBuilder()
	if tj.Model.Type != "BPE" {
		return fmt.Errorf("model type %q: only BPE tokenizers are supported", tj.Model.Type)
	}
	if tj.Model.ByteFallback {
		err = spmVocab(b, &tj, cfg, &o)
	} else {
		if tj.Decoder.Type != "ByteLevel" {
			return fmt.Errorf("BPE without byte fallback needs a ByteLevel decoder, have %q", tj.Decoder.Type)
		}
		err = bpeVocab(b, &tj, cfg, &o)
	}
	if err != nil {
		return err
	}
	if err := specialVocab(b, &tj, cfg, &o); err != nil {
		return err
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		return err
	}
	data := buf.Bytes()
	if strings.HasSuffix(o.out, ".gz") {
		var z bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
		if _, err := zw.Write(data); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		data = z.Bytes()
	}
	return os.WriteFile(o.out, data, 0o644)
}

// header writes general.* metadata; llama.cpp loads a vocabulary-only file of a known
// architecture without further hyperparameters.
func header(b *gguf.Builder, o *options) error {
	return addKVs(b,
		"general.architecture", gguf.String(o.arch),
		"general.type", gguf.String("vocab"),
		"general.name", gguf.String(o.name),
	)
}

func addKVs(b *gguf.Builder, kv ...any) error {
	for i := 0; i < len(kv); i += 2 {
		if err := b.AddKV(kv[i].(string), kv[i+1].(gguf.Value)); err != nil {
			return err
		}
	}
	return nil
}

// reverseVocab is the token text of every id of the vocabulary and the added tokens
// (Hugging Face's tokenizer.vocab includes both).
func reverseVocab(tj *tokenizerJSON) (map[int]string, int) {
	rev := make(map[int]string, len(tj.Model.Vocab)+len(tj.AddedTokens))
	maxID := -1
	for s, id := range tj.Model.Vocab {
		rev[id] = s
		maxID = max(maxID, id)
	}
	for _, a := range tj.AddedTokens {
		rev[a.ID] = a.Content
		maxID = max(maxID, a.ID)
	}
	return rev, maxID
}

// looksSpecial is convert_hf_to_gguf.py's does_token_look_special.
func looksSpecial(s string) bool {
	switch s {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>") ||
		strings.HasPrefix(s, "<｜") && strings.HasSuffix(s, "｜>") ||
		strings.HasPrefix(s, "<unused") && strings.HasSuffix(s, ">")
}

// Split regexes of the pre-tokenizers vocabgen recognises (convert_hf_to_gguf.py instead
// hashes the ids of a probe text; the regex identifies these families as well).
var knownPre = map[string]string{
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`: "llama-bpe",
	`(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`:      "qwen2",
	`'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`:                                          "gpt-2",
}

func inferPre(tj *tokenizerJSON) (string, error) {
	var pt struct {
		Type          string `json:"type"`
		Pretokenizers []struct {
			Type    string `json:"type"`
			Pattern struct {
				Regex string `json:"Regex"`
			} `json:"pattern"`
		} `json:"pretokenizers"`
	}
	if err := json.Unmarshal(tj.PreTokenizer, &pt); err != nil {
		return "", fmt.Errorf("pre_tokenizer: %v", err)
	}
	for _, p := range pt.Pretokenizers {
		if p.Type == "Split" {
			if name, ok := knownPre[p.Pattern.Regex]; ok {
				return name, nil
			}
			return "", fmt.Errorf("unknown pre-tokenizer regex %q: name it with -pre", p.Pattern.Regex)
		}
	}
	if pt.Type == "ByteLevel" {
		return "gpt-2", nil
	}
	return "", errors.New("cannot infer the pre-tokenizer: name it with -pre")
}

func parseMerges(raw json.RawMessage) ([]string, error) {
	var asStrings []string
	if err := json.Unmarshal(raw, &asStrings); err == nil {
		return asStrings, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, fmt.Errorf("model.merges: neither strings nor pairs: %v", err)
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("model.merges[%d] has %d parts", i, len(p))
		}
		// gguf-py writes a space inside a part as U+0120, the byte-level alphabet's space.
		out[i] = strings.ReplaceAll(p[0], " ", "Ġ") + " " + strings.ReplaceAll(p[1], " ", "Ġ")
	}
	return out, nil
}

func bpeVocab(b *gguf.Builder, tj *tokenizerJSON, cfg map[string]any, o *options) error {
	rev, maxID := reverseVocab(tj)
	n := max(o.vocabSize, maxID+1)
	if o.vocabSize > 0 && o.vocabSize <= maxID {
		return fmt.Errorf("-vocab-size %d is not above the largest token id %d", o.vocabSize, maxID)
	}
	added := map[int]addedToken{}
	for _, a := range tj.AddedTokens {
		added[a.ID] = a
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	for i := range n {
		s, ok := rev[i]
		switch a, isAdded := added[i]; {
		case !ok:
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), typeUnused
		case isAdded && (a.Special || looksSpecial(s)):
			tokens[i], types[i] = s, typeControl
		case isAdded:
			tokens[i], types[i] = strings.ReplaceAll(s, "▁", " "), typeUserDefined
		default:
			tokens[i], types[i] = s, typeNormal
		}
	}
	merges, err := parseMerges(tj.Model.Merges)
	if err != nil {
		return err
	}
	if o.pre == "" {
		if o.pre, err = inferPre(tj); err != nil {
			return err
		}
	}
	if o.arch == "" {
		o.arch = "llama"
		if o.pre == "qwen2" {
			o.arch = "qwen2"
		}
	}
	if err := header(b, o); err != nil {
		return err
	}
	return addKVs(b,
		"tokenizer.ggml.model", gguf.String("gpt2"),
		"tokenizer.ggml.pre", gguf.String(o.pre),
		"tokenizer.ggml.tokens", gguf.ArrayValue(gguf.NewArray(tokens)),
		"tokenizer.ggml.token_type", gguf.ArrayValue(gguf.NewArray(types)),
		"tokenizer.ggml.merges", gguf.ArrayValue(gguf.NewArray(merges)),
	)
}

var byteToken = regexp.MustCompile(`^<0x[0-9A-Fa-f]{2}>$`)

func spmVocab(b *gguf.Builder, tj *tokenizerJSON, cfg map[string]any, o *options) error {
	if tj.Decoder.Type != "Sequence" {
		return fmt.Errorf("BPE with byte fallback needs a Sequence decoder (SentencePiece style), have %q", tj.Decoder.Type)
	}
	rev, maxID := reverseVocab(tj)
	n := max(o.vocabSize, maxID+1)
	special := map[int]bool{}
	for _, a := range tj.AddedTokens {
		if a.Special {
			special[a.ID] = true
		}
	}
	unk := ""
	if tj.Model.UnkToken != nil {
		unk = *tj.Model.UnkToken
	}
	merges, err := parseMerges(tj.Model.Merges)
	if err != nil {
		return err
	}
	// The position of each token's first merge, to find tokens Hugging Face ordered last.
	firstMerge := map[string]int{}
	for r, m := range merges {
		if l, rt, ok := strings.Cut(m, " "); ok {
			if _, seen := firstMerge[l+rt]; !seen {
				firstMerge[l+rt] = r
			}
		}
	}
	tokens := make([]string, n)
	types := make([]int32, n)
	scores := make([]float32, n)
	firstNormal := -1
	for i := range n {
		s, ok := rev[i]
		switch {
		case !ok:
			tokens[i], types[i] = fmt.Sprintf("[PAD%d]", i), typeUnused
			continue
		case s == unk:
			types[i] = typeUnknown
		case special[i]:
			types[i] = typeControl
		case byteToken.MatchString(s):
			types[i] = typeByte
		default:
			types[i] = typeNormal
			if firstNormal < 0 {
				firstNormal = i
			}
			scores[i] = -float32(i - firstNormal)
		}
		tokens[i] = s
	}
	// Tokens by first merge: those breaking the id order are the lowest-scored ones.
	type mt struct{ rank, id int }
	var byRank []mt
	for s, r := range firstMerge {
		if id, ok := tj.Model.Vocab[s]; ok {
			byRank = append(byRank, mt{r, id})
		}
	}
	slices.SortFunc(byRank, func(a, b mt) int { return a.rank - b.rank })
	maxSeen := -1
	for _, m := range byRank {
		if m.id < maxSeen && types[m.id] == typeNormal {
			scores[m.id] = -1e9
		}
		maxSeen = max(maxSeen, m.id)
	}
	if o.arch == "" {
		o.arch = "llama"
	}
	if o.pre == "" {
		o.pre = "default"
	}
	if err := header(b, o); err != nil {
		return err
	}
	return addKVs(b,
		"tokenizer.ggml.model", gguf.String("llama"),
		"tokenizer.ggml.pre", gguf.String(o.pre),
		"tokenizer.ggml.tokens", gguf.ArrayValue(gguf.NewArray(tokens)),
		"tokenizer.ggml.scores", gguf.ArrayValue(gguf.NewArray(scores)),
		"tokenizer.ggml.token_type", gguf.ArrayValue(gguf.NewArray(types)),
	)
}

// specialVocab writes special token ids, add_*_token flags and the chat template as gguf-py's
// SpecialVocab does: ids of the tokens tokenizer_config.json names (looked up among the added
// tokens), add_<typ>_token flags from tokenizer_config.json or a TemplateProcessing
// post-processor, then -bos-id / -eos-id for ids still unset.
func specialVocab(b *gguf.Builder, tj *tokenizerJSON, cfg map[string]any, o *options) error {
	ids := map[string]int{}
	var order []string
	set := func(typ string, id int) {
		if _, ok := ids[typ]; ok || id < 0 {
			return
		}
		ids[typ] = id
		order = append(order, typ)
	}
	add := map[string]bool{}
	var addOrder []string
	setAdd := func(typ string, v bool) {
		if _, ok := add[typ]; !ok {
			addOrder = append(addOrder, typ)
		}
		add[typ] = v
	}
	cfgToken := func(typ string) string {
		switch v := cfg[typ+"_token"].(type) {
		case string:
			return v
		case map[string]any:
			s, _ := v["content"].(string)
			return s
		}
		return ""
	}
	// TemplateProcessing: a leading special token that is BOS means add_bos.
	var pp struct {
		Type   string `json:"type"`
		Single []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
		} `json:"single"`
	}
	if len(tj.PostProcessor) > 0 && json.Unmarshal(tj.PostProcessor, &pp) == nil && pp.Type == "TemplateProcessing" && len(pp.Single) > 1 {
		if st := pp.Single[0].SpecialToken; st != nil {
			setAdd("bos", st.ID == cfgToken("bos"))
		}
		if st := pp.Single[len(pp.Single)-1].SpecialToken; st != nil {
			setAdd("eos", st.ID == cfgToken("eos"))
		}
	}
	for _, typ := range []string{"bos", "eos", "unk", "sep", "pad", "cls", "mask"} {
		if v, ok := cfg["add_"+typ+"_token"].(bool); ok {
			setAdd(typ, v)
		}
		content := cfgToken(typ)
		if content == "" {
			continue
		}
		for _, a := range tj.AddedTokens {
			if a.Content == content {
				set(typ, a.ID)
				break
			}
		}
	}
	set("bos", o.bosID)
	set("eos", o.eosID)
	keys := map[string]string{
		"bos": "tokenizer.ggml.bos_token_id", "eos": "tokenizer.ggml.eos_token_id",
		"unk": "tokenizer.ggml.unknown_token_id", "sep": "tokenizer.ggml.seperator_token_id",
		"pad": "tokenizer.ggml.padding_token_id", "cls": "tokenizer.ggml.cls_token_id",
		"mask": "tokenizer.ggml.mask_token_id",
	}
	for _, typ := range order {
		if err := b.AddKV(keys[typ], gguf.Uint32(uint32(ids[typ]))); err != nil {
			return err
		}
	}
	for _, typ := range addOrder {
		if typ != "bos" && typ != "eos" && typ != "sep" {
			continue // gguf-py has writers for these three only
		}
		if err := b.AddKV("tokenizer.ggml.add_"+typ+"_token", gguf.Bool(add[typ])); err != nil {
			return err
		}
	}
	if tmpl, ok := cfg["chat_template"].(string); ok {
		if err := b.AddKV("tokenizer.chat_template", gguf.String(tmpl)); err != nil {
			return err
		}
	}
	return nil
}
