package serve

import (
	"math"
	"sync"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/generate"
)

// MaxTopLogprobs is the most alternatives a token's log-probability comes with, as OpenAI's
// top_logprobs allows.
const MaxTopLogprobs = 20

// TopLogprob is one of the most likely tokens at a position.
type TopLogprob struct {
	Token   int32
	Logprob float32
}

// TokenLogprob is a generated token's log-probability and the Request.TopLogprobs most
// likely tokens at its position, most likely first (ties: lower id first, as the greedy
// sampler picks). Log-probabilities are the log-softmax of the model's raw logits: before
// logit bias, penalties, temperature and the truncating samplers, as llama.cpp's server
// reports them by default (post_sampling_probs false) and as OpenAI's API describes them
// (the model's distribution, whatever was sampled from it).
type TokenLogprob struct {
	Token   int32
	Logprob float32
	Top     []TopLogprob
}

// logprobScratch is the engine goroutine's buffers: the top tokens of one row, and a copy
// of the row for the softmax (made on the first request with logprobs).
type logprobScratch struct {
	top [MaxTopLogprobs]TopLogprob
	row []float32
}

// logprobOf computes id's log-probability in the row logits and fills top (at most
// MaxTopLogprobs long) with the len(top) most likely tokens, most likely first. One scalar
// pass finds the maximum and selects the top; the log of the softmax's normaliser comes
// from ops' Softmax of a copy of the row in scratch (vectorised: a 152k-token row in a
// fraction of the scalar loop's time), as lse = max - log(p(max)); with ops nil, or if the
// op fails, a float64 scalar sum gives it. It allocates nothing; the logits are finite here
// (the sampler refused the row otherwise).
func logprobOf(ops kernelrt.Ops, logits, scratch []float32, id int32, top []TopLogprob) float32 {
	best, mx := 0, logits[0]
	n, thr := 0, float32(math.Inf(-1)) // entries in top; the last one's logit once full
	for i, x := range logits {
		if x > mx { // not max(): the builtin's NaN handling costs several times this loop
			best, mx = i, x
		}
		if len(top) == 0 || n == len(top) && !(x > thr) {
			continue // ties keep the lower id, which came first
		}
		// Insert (i, x) into the sorted top[:n], dropping the last when full.
		j := min(n, len(top)-1)
		for j > 0 && x > top[j-1].Logprob {
			top[j] = top[j-1]
			j--
		}
		top[j] = TopLogprob{Token: int32(i), Logprob: x}
		n = min(n+1, len(top))
		thr = top[n-1].Logprob
	}
	lse := math.NaN()
	if ops != nil && len(scratch) == len(logits) {
		copy(scratch, logits)
		if ops.Softmax(scratch, 1, len(scratch)) == nil && scratch[best] > 0 {
			lse = float64(mx) - math.Log(float64(scratch[best]))
		}
	}
	if math.IsNaN(lse) {
		var sum float64
		for _, x := range logits {
			sum += math.Exp(float64(x - mx))
		}
		lse = float64(mx) + math.Log(sum)
	}
	for i := range top {
		top[i].Logprob = float32(min(float64(top[i].Logprob)-lse, 0))
	}
	return float32(min(float64(logits[id])-lse, 0))
}

// pieceTable is the text of every token for logprob responses: its bytes, the bytes as a
// string, and that string's length in characters (text_offset counts them, as Python's
// str does). Built once, on the first request that asks for logprobs.
type pieceTable struct {
	once   sync.Once
	pieces []string
	runes  []int32
}

// piecer is implemented by a tokenizer that gives a token's text directly
// (tokenizer.Tokenizer.Piece); special tokens are rendered.
type piecer interface {
	Piece(id int32, renderSpecial bool) []byte
}

// tokenByter is implemented by generate's GGUF tokenizer: a token's text as the output
// shows it (control tokens' text dropped).
type tokenByter interface {
	TokenBytes(id int32) []byte
}

// build fills the table from tok: its Piece (special tokens rendered) or TokenBytes when it
// has one, else a fresh decoder per token (which drops control tokens' text, as the output
// does).
func (p *pieceTable) build(tok generate.Tokenizer, vocab int) {
	p.once.Do(func() {
		p.pieces = make([]string, vocab)
		p.runes = make([]int32, vocab)
		pc, isPiecer := tok.(piecer)
		tb, isByter := tok.(tokenByter)
		for id := range int32(vocab) {
			var b []byte
			if isPiecer {
				b = pc.Piece(id, true)
			} else if isByter {
				b = tb.TokenBytes(id)
			} else {
				d := tok.NewDecoder()
				b = append(append([]byte(nil), d.Write(id)...), d.Flush()...)
			}
			p.pieces[id] = string(b)
			p.runes[id] = int32(utf8.RuneCount(b))
		}
	})
}

// The wire formats. Chat: choices[].logprobs.content[] of {token, logprob, bytes,
// top_logprobs[]}. Completions (legacy): parallel arrays tokens, token_logprobs,
// top_logprobs (token text to logprob, the sampled token always included, so up to
// logprobs+1 entries as OpenAI's) and text_offset (each token's start in the completion,
// in characters: the running sum of the token strings' lengths, from 0, as vLLM's).
type (
	chatLogprobs struct {
		Content []chatTokenLogprob `json:"content"`
		Refusal []chatTokenLogprob `json:"refusal"`
	}
	chatTokenLogprob struct {
		Token       string           `json:"token"`
		Logprob     float32          `json:"logprob"`
		Bytes       []int            `json:"bytes"` // integers, as OpenAI's (a []byte would be base64)
		TopLogprobs []chatTopLogprob `json:"top_logprobs"`
	}
	chatTopLogprob struct {
		Token   string  `json:"token"`
		Logprob float32 `json:"logprob"`
		Bytes   []int   `json:"bytes"`
	}
	completionLogprobs struct {
		Tokens        []string             `json:"tokens"`
		TokenLogprobs []float32            `json:"token_logprobs"`
		TopLogprobs   []map[string]float32 `json:"top_logprobs"`
		TextOffset    []int                `json:"text_offset"`
	}
)

// bytesOf is a token's text as OpenAI's bytes array.
func (p *pieceTable) bytesOf(id int32) []int {
	s := p.pieces[id]
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// chatLogprobs is the chat format of lps.
func (p *pieceTable) chatLogprobs(lps []TokenLogprob) *chatLogprobs {
	out := &chatLogprobs{Content: make([]chatTokenLogprob, len(lps))}
	for i, lp := range lps {
		c := chatTokenLogprob{Token: p.pieces[lp.Token], Logprob: lp.Logprob, Bytes: p.bytesOf(lp.Token),
			TopLogprobs: make([]chatTopLogprob, len(lp.Top))}
		for j, t := range lp.Top {
			c.TopLogprobs[j] = chatTopLogprob{Token: p.pieces[t.Token], Logprob: t.Logprob, Bytes: p.bytesOf(t.Token)}
		}
		out.Content[i] = c
	}
	return out
}

// completionLogprobs is the legacy format of lps; *offset is the text_offset of the first
// (the characters of the tokens before, in a stream) and is advanced past the last.
func (p *pieceTable) completionLogprobs(lps []TokenLogprob, offset *int) *completionLogprobs {
	n := len(lps)
	out := &completionLogprobs{Tokens: make([]string, n), TokenLogprobs: make([]float32, n),
		TopLogprobs: make([]map[string]float32, n), TextOffset: make([]int, n)}
	for i, lp := range lps {
		out.Tokens[i], out.TokenLogprobs[i], out.TextOffset[i] = p.pieces[lp.Token], lp.Logprob, *offset
		*offset += int(p.runes[lp.Token])
		m := make(map[string]float32, len(lp.Top)+1)
		for _, t := range lp.Top {
			if _, dup := m[p.pieces[t.Token]]; !dup { // two tokens of one text: the likelier
				m[p.pieces[t.Token]] = t.Logprob
			}
		}
		m[p.pieces[lp.Token]] = lp.Logprob
		out.TopLogprobs[i] = m
	}
	return out
}
