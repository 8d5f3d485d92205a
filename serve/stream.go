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
	tokens int // tokens sampled since the last Next
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
	for {
		s.mu.Lock()
		if s.tokens > 0 || s.text.Len() > 0 {
			t := s.text.String()
			s.text.Reset()
			s.tokens = 0
			s.mu.Unlock()
			return t, nil
		}
		ended, err := s.ended, s.res.Err
		s.mu.Unlock()
		if ended {
			if err != nil {
				return "", err
			}
			return "", io.EOF
		}
		select {
		case <-s.notify:
		case <-ctx.Done():
			return "", ctx.Err()
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
	var b strings.Builder
	for {
		t, err := s.Next(ctx)
		if err == io.EOF {
			return b.String(), s.Result(), nil
		}
		if err != nil {
			return b.String(), s.Result(), err
		}
		b.WriteString(t)
	}
}
