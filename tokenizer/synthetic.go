package tokenizer

import (
	"fmt"

	"github.com/kernelrt/kernelrt/gguf"
)

// syntheticMerges are the byte pairs a synthetic vocabulary merges (common English bigrams),
// so its text encodes to fewer tokens than bytes, as a real BPE vocabulary's does.
var syntheticMerges = []string{
	"t h", "h e", "i n", "e r", "a n", "r e", "o n", "a t", "e n", "n d", "t i", "e s", "o r", "t e",
	"o f", "e d", "i s", "i t", "a l", "a r", "s t", "t o", "n t", "n g", "s e", "h a", "a s", "o u",
	"i o", "l e", "v e", "c o", "m e", "d e", "h i", "r i", "r o", "i c", "n e", "e a", "r a", "c e",
	"Ġ t", "Ġ a", "Ġ s", "Ġ o", "Ġ w", "Ġ c", "Ġ b", "Ġ f", "Ġ i", "Ġ m", "Ġ p", "Ġ d", "Ġ h", "Ġ l",
}

// Special tokens of a synthetic vocabulary (ChatML, as Qwen2 uses).
const (
	SyntheticEOT       = "<|endoftext|>"
	SyntheticIMStart   = "<|im_start|>"
	SyntheticIMEnd     = "<|im_end|>"
	syntheticChatML    = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
	syntheticFixedSize = 256 + 3
)

// SyntheticVocabMin is the smallest vocabulary AddSynthetic can write: the 256 byte tokens,
// the three special tokens and one merge (a gpt2 vocabulary needs one).
const SyntheticVocabMin = syntheticFixedSize + 1

// AddSynthetic adds to b the tokenizer.ggml.* metadata of a small byte-level BPE vocabulary
// of exactly vocab tokens (gpt2 model, qwen2 pre-tokenizer): the 256 byte tokens, as many
// merges of common English bigrams as fit, <|endoftext|> (EOS), <|im_start|>, <|im_end|>
// (end of turn) and padding tokens "[PAD<i>]" up to vocab, as llama.cpp's converter pads;
// plus a ChatML chat template. Synthetic models (kernelrt synth) carry it so that text goes
// in and out of them like any downloaded model; the text of random weights is noise.
func AddSynthetic(b *gguf.Builder, vocab int) error {
	if vocab < SyntheticVocabMin {
		return fmt.Errorf("tokenizer: a synthetic vocabulary needs at least %d tokens, got %d", SyntheticVocabMin, vocab)
	}
	enc := bytesToUnicode()
	tokens := make([]string, 0, vocab)
	types := make([]int32, 0, vocab)
	have := map[string]bool{}
	for c := 0; c < 256; c++ {
		s := string(enc[c])
		tokens, types = append(tokens, s), append(types, typeNormal)
		have[s] = true
	}
	var merges []string
	for _, m := range syntheticMerges {
		if len(tokens)+3 >= vocab {
			break
		}
		var l, r string
		fmt.Sscan(m, &l, &r)
		if !have[l] || !have[r] || have[l+r] {
			continue
		}
		tokens, types = append(tokens, l+r), append(types, typeNormal)
		have[l+r] = true
		merges = append(merges, m)
	}
	eos := int32(len(tokens))
	tokens = append(tokens, SyntheticEOT, SyntheticIMStart, SyntheticIMEnd)
	types = append(types, typeControl, typeControl, typeControl)
	for i := 0; len(tokens) < vocab; i++ {
		tokens, types = append(tokens, fmt.Sprintf("[PAD%d]", i)), append(types, typeUnused)
	}
	if len(merges) == 0 { // a gpt2 vocabulary needs merges: trade a padding token for one
		tokens[eos+3], types[eos+3] = "th", typeNormal
		merges = append(merges, "t h")
	}
	for _, kv := range []struct {
		k string
		v gguf.Value
	}{
		{keyModel, gguf.String("gpt2")},
		{keyPre, gguf.String("qwen2")},
		{keyTokens, gguf.ArrayValue(gguf.NewArray(tokens))},
		{keyTokenType, gguf.ArrayValue(gguf.NewArray(types))},
		{keyMerges, gguf.ArrayValue(gguf.NewArray(merges))},
		{"tokenizer.ggml.bos_token_id", gguf.Uint32(uint32(eos))},
		{"tokenizer.ggml.eos_token_id", gguf.Uint32(uint32(eos))},
		{"tokenizer.ggml.eot_token_id", gguf.Uint32(uint32(eos + 2))},
		{"tokenizer.ggml.padding_token_id", gguf.Uint32(uint32(eos))},
		{keyAddBOS, gguf.Bool(false)},
		{"tokenizer.chat_template", gguf.String(syntheticChatML)},
	} {
		if err := b.AddKV(kv.k, kv.v); err != nil {
			return err
		}
	}
	return nil
}
