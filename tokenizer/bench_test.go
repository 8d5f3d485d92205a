package tokenizer

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

var (
	benchOnce sync.Once
	benchStr  string
)

// benchText is about 1 MiB of mixed text, the same on every run: mostly English prose and
// code with numbers, plus Chinese, Russian, Arabic, Hindi and emoji, and the valid UTF-8
// corpus cases. Words are drawn from a seeded generator, so the text has the repetition of
// real text (the word cache hits) without being one paragraph repeated.
func benchText() string {
	benchOnce.Do(func() {
		rng := rand.New(rand.NewPCG(42, 1))
		english := strings.Fields("the of and to in is that for it with as was on be by this are from at or an have not which but all were can has their will more one also its about into than other some these only two time new would may what could after first such most used between over through where however because state each during like both many system under data model language token")
		code := []string{"func", "return", "if", "err", "!=", "nil", "{", "}", "for", "i", ":=", "range", "x[i]", "fmt.Println(x)", "self.value", "def", "import", "->", "&&", "||", "==", "0x1F", "// comment"}
		other := strings.Fields("我想 在 工作 这是 一个 测试 中文 Привет мир язык текст مرحبا بالعالم नमस्ते दुनिया 🦙 👋🏽 ✅ 😶‍🌫️ café naïve")
		var b strings.Builder
		for _, c := range corpus {
			if utf8.ValidString(c.text) {
				b.WriteString(c.text)
				b.WriteString("\n")
			}
		}
		for b.Len() < 1<<20 {
			n := 8 + rng.IntN(20)
			for i := range n {
				if i > 0 {
					b.WriteByte(' ')
				}
				switch r := rng.IntN(100); {
				case r < 70:
					w := english[rng.IntN(len(english))]
					if i == 0 {
						w = strings.ToUpper(w[:1]) + w[1:]
					}
					b.WriteString(w)
				case r < 82:
					b.WriteString(code[rng.IntN(len(code))])
				case r < 90:
					b.WriteString(strconv.Itoa(rng.IntN(100000)))
				default:
					b.WriteString(other[rng.IntN(len(other))])
				}
			}
			b.WriteString([]string{". ", ".\n", "?\n\n", ";\n\t", ", "}[rng.IntN(5)])
		}
		benchStr = b.String()
	})
	return benchStr
}

// BenchmarkEncode measures encoding throughput (MB/s) on one core, with the word cache warm
// as it is in a long-running process.
func BenchmarkEncode(b *testing.B) {
	text := benchText()
	for _, v := range testVocabs {
		b.Run(v, func(b *testing.B) {
			tok := loadVocab(b, v)
			tok.Encode(text, EncodeOptions{ParseSpecial: true})
			b.SetBytes(int64(len(text)))
			b.ResetTimer()
			for range b.N {
				tok.Encode(text, EncodeOptions{ParseSpecial: true})
			}
		})
	}
}

// BenchmarkEncodeCold clears the BPE word cache before every pass: the cost of text whose
// words were never seen.
func BenchmarkEncodeCold(b *testing.B) {
	text := benchText()
	for _, v := range testVocabs[:2] {
		b.Run(v, func(b *testing.B) {
			tok := loadVocab(b, v)
			b.SetBytes(int64(len(text)))
			for range b.N {
				tok.cache.reset()
				tok.Encode(text, EncodeOptions{ParseSpecial: true})
			}
		})
	}
}

// BenchmarkDecodeStream measures StreamDecoder.Write per token; it must not allocate.
func BenchmarkDecodeStream(b *testing.B) {
	text := benchText()[:1<<16]
	for _, v := range testVocabs {
		b.Run(v, func(b *testing.B) {
			tok := loadVocab(b, v)
			ids, _ := tok.Encode(text, EncodeOptions{})
			d := tok.NewStreamDecoder(false)
			for _, id := range ids {
				d.Write(id)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				d.Write(ids[i%len(ids)])
			}
		})
	}
}
