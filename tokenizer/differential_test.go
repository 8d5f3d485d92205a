package tokenizer

import (
	"encoding/json"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

var diffN = flag.Int("diff", 0, "TestDifferential: compare this many random texts per vocabulary with node-llama-cpp's llama.cpp (-nlc)")

// TestDifferential compares Encode with the llama.cpp inside node-llama-cpp on random texts
// built from pieces that exercise the pre-tokenizers and special tokens (-diff N; never run
// by make test: it needs node and node-llama-cpp). Run for 4000 texts x 5 vocabularies x
// parse_special on/off: no difference.
func TestDifferential(t *testing.T) {
	if *diffN <= 0 {
		t.Skip("needs -diff N and node-llama-cpp (-nlc)")
	}
	rng := rand.New(rand.NewPCG(11, 12))
	atoms := []string{"a", "B", "z", "é", "É", "ß", "ǅ", "ʰ", "中", "文", "ア", "한", "я", "Ж", "ع", "ש", "न", "ि", "ก", "ั", "1", "23", "٣", "½", "Ⅻ", "①",
		" ", "  ", "\t", "\n", "\r\n", "\r", "\u00a0", "\u3000", "\u2028", "\u0085", "\v", "\f",
		"'", "'s", "'S", "'ll", "'LL", "'Re", "'ve", "'m", "'d", "'t", "’",
		".", ",", "!", "?", "-", "_", "$", "+", "<", "=", ">", "^", "~", "|", "`", "@", "#", "%", "&", "*", "(", ")", "[", "]", "{", "}", "/", "\\", ":", ";", "\"",
		"€", "∑", "©", "🦙", "👋🏽", "\u200d", "\u0301", "\ufe0f", "\x00", "\x1b", "\x7f",
		"<|im_end|>", "<|endoftext|>", "<|eot_id|>", "<|begin_of_text|>", "<s>", "</s>", "<think>", "<|im_start|", "<unk>", "▁", "\u2581\u2581",
		"the", "The", "ing", "tion", "http://x.y/z", "0x1F", "3.14", "1,000"}
	var texts []string
	for range *diffN {
		var b strings.Builder
		for n := rng.IntN(25); n > 0; n-- {
			b.WriteString(atoms[rng.IntN(len(atoms))])
		}
		texts = append(texts, b.String())
	}
	dir := t.TempDir()
	js, _ := json.Marshal(texts)
	tp := filepath.Join(dir, "t.json")
	if err := os.WriteFile(tp, js, 0o644); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(dir, "s.mjs")
	if err := os.WriteFile(script, fmt.Appendf(nil, nlcScript, *nlcModule), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, v := range testVocabs {
		mp := filepath.Join(dir, "m.gguf")
		if err := os.WriteFile(mp, readVocab(t, v), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command("node", script, mp, tp).Output()
		if err != nil {
			t.Fatal(err)
		}
		_, res, _ := strings.Cut(string(out), "RESULT:")
		var ids [][2][]int32
		if err := json.Unmarshal([]byte(res), &ids); err != nil {
			t.Fatal(err)
		}
		tok := loadVocab(t, v)
		bad := 0
		for i, text := range texts {
			for k, ps := range []bool{true, false} {
				got, _ := tok.Encode(text, EncodeOptions{ParseSpecial: ps})
				want := ids[i][k]
				if !slices.Equal(got, want) && !(len(got) == 0 && len(want) == 0) {
					bad++
					if bad <= 5 {
						t.Errorf("%s special=%v %q:\n got  %v\n want %v", v, ps, text, got, want)
					}
				}
			}
		}
		t.Logf("%s: %d texts x 2 modes, %d differ", v, len(texts), bad)
	}
}
