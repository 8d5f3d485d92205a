package serve

import (
	"context"
	"io"
	"strings"
	"sync"
)

// Stream is the text of one generation as the engine produces it. The engine never waits
// for a reader: text accumulates until Next takes it, so a slow client slows only itself.
// One goroutine reads a Stream.
type Stream struct {
	mu     sync.Mutex
	text   strings.Builder
	tokens int            // tokens sampled since the last Next
	lps    []TokenLogprob // Request.Logprobs: those tokens' entries
	tops   []TopLogprob   // backing of their Top slices (appended to, never rewritten)
	lp     bool           // Request.Logprobs: NextLogprobs returns non-nil entries
	ended  bool
	res    Result
	notify chan struct{} // cap 1: text arrived or the stream ended
}

func newStream() *Stream { return &Stream{notify: make(chan struct{}, 1)} }

// push appends generated text (the engine's goroutine). The reader is woken by the tick
// of the token that made the text, or by finish, so a token's text and the token arrive
// together.
func (s *Stream) push(text string) bool {
	s.mu.Lock()
	s.text.WriteString(text)
	s.mu.Unlock()
	return true
}

// pushLogprob records a sampled token's log-probability and top alternatives (the
// engine's goroutine; top is the engine's scratch, copied).
func (s *Stream) pushLogprob(id int32, lp float32, top []TopLogprob) {
	s.mu.Lock()
	n := len(s.tops)
	s.tops = append(s.tops, top...)
	s.lps = append(s.lps, TokenLogprob{Token: id, Logprob: lp, Top: s.tops[n:len(s.tops):len(s.tops)]})
	s.mu.Unlock()
}

// tick counts a sampled token (the engine's goroutine), whether or not it completed text.
func (s *Stream) tick() {
	s.mu.Lock()
	s.tokens++
	s.mu.Unlock()
	s.signal()
}

// finish ends the stream with res (the engine's goroutine).
func (s *Stream) finish(res Result) {
	s.mu.Lock()
	s.ended, s.res = true, res
	s.mu.Unlock()
	s.signal()
}

func (s *Stream) signal() {
	select {
	case s.notify <- struct{}{}:
	default:
	}
}

// Next waits for the next token and returns the text that arrived since the last call:
// possibly none (a token that completes no character, or one held back as the possible
// start of a stop string; a streaming server still sends it, as OpenAI's and llama.cpp's
// do, one chunk per token), and the text of several tokens joined when the reader fell
// behind, so it catches up in one write. At the end it returns io.EOF, or the generation's
// error (Result().Err); when ctx is done first, ctx's error (the generation is cancelled
// only through the context given to Submit).
func (s *Stream) Next(ctx context.Context) (string, error) {
	t, _, err := s.NextLogprobs(ctx)
	return t, err
}

// NextLogprobs is Next that also returns the log-probabilities of the tokens sampled since
// the last call, in order (nil unless the Request asked for Logprobs, then never nil). The
// entries are the caller's.
func (s *Stream) NextLogprobs(ctx context.Context) (string, []TokenLogprob, error) {
	for {
		s.mu.Lock()
		if s.tokens > 0 || s.text.Len() > 0 {
			t, lps := s.text.String(), s.lps
			if lps == nil && s.lp {
				lps = []TokenLogprob{} // tokens with no entry (an end-of-generation token)
			}
			s.text.Reset()
			s.tokens, s.lps, s.tops = 0, nil, nil
			s.mu.Unlock()
			return t, lps, nil
		}
		ended, err := s.ended, s.res.Err
		s.mu.Unlock()
		if ended {
			if err != nil {
				return "", nil, err
			}
			return "", nil, io.EOF
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return "", nil, ctx.Err()
		}
	}
}

// Result is how the generation ended; valid once Next has returned io.EOF or an error that
// is not ctx's.
func (s *Stream) Result() Result {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.res
}

// Text reads the stream to its end and returns all its text and its Result.
func (s *Stream) Text(ctx context.Context) (string, Result, error) {
	t, _, res, err := s.TextLogprobs(ctx)
	return t, res, err
}

// TextLogprobs is Text that also returns every token's log-probability entry
// (Request.Logprobs), in order.
func (s *Stream) TextLogprobs(ctx context.Context) (string, []TokenLogprob, Result, error) {
	var b strings.Builder
	var all []TokenLogprob
	if s.lp {
		all = []TokenLogprob{}
	}
	for {
		t, lps, err := s.NextLogprobs(ctx)
		if err == io.EOF {
			return b.String(), all, s.Result(), nil
		}
		if err != nil {
			return b.String(), all, s.Result(), err
		}
		b.WriteString(t)
		all = append(all, lps...)
	}
}
