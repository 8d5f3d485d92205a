package serve

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure a Server. The zero value works.
type Options struct {
	// MaxBodyBytes bounds a request body; a larger one gets 413. 0 = DefaultMaxBodyBytes.
	MaxBodyBytes int64
	// RetryAfter is what 429 and 503 answers tell a client to wait; 0 = 1 s.
	RetryAfter time.Duration
}

// DefaultMaxBodyBytes is the default request body limit: far more than a prompt that fits
// a context of tens of thousands of tokens needs.
const DefaultMaxBodyBytes = 4 << 20

// Server is the HTTP API over an Engine. It is an http.Handler.
type Server struct {
	e        *Engine
	o        Options
	mux      *http.ServeMux
	reg      *prometheus.Registry
	requests *prometheus.CounterVec
	created  int64
	draining atomic.Bool
}

// New returns the API over e. Shutdown drains it; the caller closes e afterwards.
func New(e *Engine, o Options) *Server {
	if o.MaxBodyBytes <= 0 {
		o.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	s := &Server{e: e, o: o, mux: http.NewServeMux(), reg: prometheus.NewRegistry(), created: time.Now().Unix()}
	s.requests = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kernelrt", Name: "http_requests_total",
		Help: "HTTP requests by route and status code (499: the client went away first)."}, []string{"route", "code"})
	// The Go runtime's and the process's own gauges (go_goroutines,
	// process_resident_memory_bytes, open descriptors): what an operator or a soak watches
	// for leaks. In the Server's registry, not the Engine's, so a program that gathers the
	// engine beside its own runtime collectors gets no duplicates.
	s.reg.MustRegister(s.requests, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := promhttp.HandlerFor(prometheus.Gatherers{s.reg, e.Metrics()}, promhttp.HandlerOpts{})
	route := func(path, method string, h http.HandlerFunc) {
		s.mux.Handle(path, s.count(path, func(w http.ResponseWriter, r *http.Request) {
			if r.Method != method && !(method == http.MethodGet && r.Method == http.MethodHead) {
				w.Header().Set("Allow", method)
				writeError(w, &apiError{status: http.StatusMethodNotAllowed, Type: "invalid_request_error",
					Message: r.Method + " " + path + ": method not allowed (use " + method + ")", Code: strp("method_not_allowed")})
				return
			}
			h(w, r)
		}))
	}
	route("/v1/completions", http.MethodPost, s.completions)
	route("/v1/chat/completions", http.MethodPost, s.chatCompletions)
	route("/v1/embeddings", http.MethodPost, s.embeddings)
	route("/v1/models", http.MethodGet, s.models)
	route("/health", http.MethodGet, s.health)
	route("/metrics", http.MethodGet, metrics.ServeHTTP)
	s.mux.Handle("/", s.count("other", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, &apiError{status: http.StatusNotFound, Type: "invalid_request_error",
			Message: "no route " + r.Method + " " + r.URL.Path, Code: strp("not_found")})
	}))
	return s
}

// ServeHTTP serves the API.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

// Shutdown stops taking generations (new ones get 503 with Retry-After, /health says 503)
// and waits for the queued and running ones to end, or for ctx (then it returns ctx's
// error; closing the Engine ends the rest). Pair it with http.Server.Shutdown, which stops
// accepting connections and waits for the handlers.
func (s *Server) Shutdown(ctx context.Context) error {
	s.draining.Store(true)
	return s.e.Shutdown(ctx)
}

// statusWriter records the status code for the request counter.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's Flush.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// count wraps h to count its requests by route and code.
func (s *Server) count(route string, h http.HandlerFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		h(sw, r)
		code := sw.code
		if r.Context().Err() != nil && code == 0 {
			code = 499
		} else if code == 0 {
			code = http.StatusOK
		}
		s.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	})
}

// writeError writes e as OpenAI's error body.
func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(e.status)
	json.NewEncoder(w).Encode(struct {
		Error *apiError `json:"error"`
	}{e})
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	if s.draining.Load() {
		w.Header().Set("Retry-After", s.retryAfter())
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":"draining"}`+"\n")
		return
	}
	st := s.e.Stats()
	writeJSON(w, map[string]any{"status": "ok", "slots_idle": st.Slots - st.Running, "slots_processing": st.Running, "queued": st.Waiting})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	type model struct {
		ID      string `json:"id"`
		Object  string `json:"object"`
		Created int64  `json:"created"`
		OwnedBy string `json:"owned_by"`
	}
	writeJSON(w, map[string]any{"object": "list", "data": []model{{ID: s.e.Name(), Object: "model", Created: s.created, OwnedBy: "kernelrt"}}})
}

func (s *Server) retryAfter() string {
	return strconv.Itoa(max(1, int((s.o.RetryAfter+time.Second-1)/time.Second)))
}

// readBody reads the size-limited body.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.o.MaxBodyBytes))
	var mbe *http.MaxBytesError
	switch {
	case errors.As(err, &mbe):
		return nil, &apiError{status: http.StatusRequestEntityTooLarge, Type: "invalid_request_error", Code: strp("request_too_large"),
			Message: "the request body exceeds " + strconv.FormatInt(mbe.Limit, 10) + " bytes"}
	case err != nil:
		return nil, badRequest("", "invalid_body", "reading the request body: %v", err)
	}
	return b, nil
}

// submit hands req to the engine, mapping its refusals to API errors; promptParam names
// the field holding the prompt ("prompt" or "messages").
func (s *Server) submit(r *http.Request, req Request, promptParam string) (*Stream, *apiError) {
	if s.draining.Load() {
		return nil, s.unavailable()
	}
	st, err := s.e.Submit(r.Context(), req)
	switch {
	case err == nil:
		return st, nil
	case errors.Is(err, ErrQueueFull):
		return nil, &apiError{status: http.StatusTooManyRequests, Type: "rate_limit_error", Code: strp("queue_full"),
			Message: "every slot is busy and the queue is full: retry later"}
	case errors.Is(err, ErrDraining), errors.Is(err, ErrClosed):
		return nil, s.unavailable()
	case errors.Is(err, ErrMaxTokens):
		return nil, badRequest("max_tokens", "context_length_exceeded", "%v", err)
	case errors.Is(err, ErrTools):
		return nil, badRequest("tools", "invalid_value", "%v", err)
	case errors.Is(err, generate.ErrPromptTooLong):
		return nil, badRequest(promptParam, "context_length_exceeded", "%v", err)
	case errors.Is(err, generate.ErrEmptyPrompt):
		return nil, badRequest(promptParam, "invalid_value", "%v", err)
	}
	return nil, badRequest(promptParam, "invalid_value", "%v", err)
}

func (s *Server) unavailable() *apiError {
	return &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("shutting_down"),
		Message: "the server is shutting down: retry on another instance or later"}
}

// fail writes e, with Retry-After on 429 and 503.
func (s *Server) fail(w http.ResponseWriter, e *apiError) {
	if e.status == http.StatusTooManyRequests || e.status == http.StatusServiceUnavailable {
		w.Header().Set("Retry-After", s.retryAfter())
	}
	writeError(w, e)
}

// generationError is a failed generation's error body (500).
func generationError(err error) *apiError {
	return &apiError{status: http.StatusInternalServerError, Type: "server_error", Code: strp("generation_failed"), Message: err.Error()}
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}

// accept reads a request body of type B, maps it onto a Request and submits it; on any
// refusal it writes the error and returns a nil Stream. promptParam names the prompt field.
func accept[B any, P interface {
	*B
	request() (Request, *apiError)
}](s *Server, w http.ResponseWriter, r *http.Request, promptParam string) (P, *Stream) {
	c := P(new(B))
	body, aerr := s.readBody(w, r)
	if aerr == nil {
		aerr = decodeJSON(body, c)
	}
	var req Request
	if aerr == nil {
		req, aerr = c.request()
	}
	var st *Stream
	if aerr == nil {
		st, aerr = s.submit(r, req, promptParam)
	}
	if aerr != nil {
		s.fail(w, aerr)
		return nil, nil
	}
	return c, st
}

// whole reads st to its end for a non-streamed answer; on a failure it writes the error
// (nothing when the client has gone) and returns false.
func (s *Server) whole(w http.ResponseWriter, r *http.Request, st *Stream) (string, []TokenLogprob, Result, bool) {
	text, lps, res, err := st.TextLogprobs(r.Context())
	if err != nil {
		if r.Context().Err() == nil {
			s.fail(w, generationError(err))
		}
		return "", nil, res, false
	}
	return text, lps, res, true
}

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	c, st := accept[completionRequest](s, w, r, "prompt")
	if st == nil {
		return
	}
	id, created := newID("cmpl-"), time.Now().Unix()
	offset := 0 // text_offset of the next token
	body1 := func(text string, lps []TokenLogprob, finish *string, u *usage, choices bool) completionBody {
		b := completionBody{ID: id, Object: "text_completion", Created: created, Model: s.e.Name(), Usage: u, Choices: []completionChoice{}}
		if choices {
			ch := completionChoice{Text: text, FinishReason: finish}
			if lps != nil {
				ch.Logprobs = s.e.pieces.completionLogprobs(lps, &offset)
			}
			b.Choices = append(b.Choices, ch)
		}
		return b
	}
	if !c.Stream {
		text, lps, res, ok := s.whole(w, r, st)
		if !ok {
			return
		}
		fr := res.FinishReason()
		writeJSON(w, body1(text, lps, &fr, usageOf(res), true))
		return
	}
	s.stream(w, r, st, c.StreamOptions, func(text string, lps []TokenLogprob) any { return body1(text, lps, nil, nil, true) },
		func(res Result) []any { fr := res.FinishReason(); return []any{body1("", nil, &fr, nil, true)} },
		func(res Result) any { return body1("", nil, nil, usageOf(res), false) })
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	c, st := accept[chatRequest](s, w, r, "messages")
	if st == nil {
		return
	}
	id, created := newID("chatcmpl-"), time.Now().Unix()
	chunk := func(d *chatDelta, lps []TokenLogprob, finish *string, u *usage, choices bool) chatBody {
		b := chatBody{ID: id, Object: "chat.completion.chunk", Created: created, Model: s.e.Name(), Usage: u, Choices: []chatChoice{}}
		if choices {
			ch := chatChoice{Delta: d, FinishReason: finish}
			if lps != nil {
				ch.Logprobs = s.e.pieces.chatLogprobs(lps)
			}
			b.Choices = append(b.Choices, ch)
		}
		return b
	}
	if !c.Stream {
		text, lps, res, ok := s.whole(w, r, st)
		if !ok {
			return
		}
		fr := res.FinishReason()
		msg := &replyMessage{Role: "assistant", Content: &text}
		if c.tools {
			// A reply whose call markup does not parse is returned as text, as llama.cpp does.
			if content, calls, err := chat.ParseToolCalls(s.e.ToolFormat(), text); err == nil && len(calls) > 0 {
				msg.Content, msg.ToolCalls = nil, toolCallsOut(calls, false)
				if content != "" {
					msg.Content = &content
				}
				if fr == "stop" {
					fr = "tool_calls"
				}
			}
		}
		ch := chatChoice{Message: msg, FinishReason: &fr}
		if lps != nil {
			ch.Logprobs = s.e.pieces.chatLogprobs(lps)
		}
		writeJSON(w, chatBody{ID: id, Object: "chat.completion", Created: created, Model: s.e.Name(), Usage: usageOf(res),
			Choices: []chatChoice{ch}})
		return
	}
	first := true
	// With tools, text that may open a call is held back; the calls go out at the end.
	ts := chat.NewToolStream(chat.NoTools)
	if c.tools {
		ts = chat.NewToolStream(s.e.ToolFormat())
	}
	s.stream(w, r, st, c.StreamOptions, func(text string, lps []TokenLogprob) any {
		text = ts.Write(text)
		d := &chatDelta{Content: &text}
		if first { // the first chunk carries the role, as OpenAI's do
			d.Role, first = "assistant", false
		}
		return chunk(d, lps, nil, nil, true)
	}, func(res Result) []any {
		fr := res.FinishReason()
		var out []any
		content, calls, err := ts.Finish()
		if err != nil { // malformed call markup: the held-back text, as text
			content, calls = ts.Text(), nil
		}
		if content != "" {
			out = append(out, chunk(&chatDelta{Content: &content}, nil, nil, nil, true))
		}
		if len(calls) > 0 {
			out = append(out, chunk(&chatDelta{ToolCalls: toolCallsOut(calls, true)}, nil, nil, nil, true))
			if fr == "stop" {
				fr = "tool_calls"
			}
		}
		return append(out, chunk(&chatDelta{}, nil, &fr, nil, true))
	}, func(res Result) any { return chunk(nil, nil, nil, usageOf(res), false) })
}

// stream writes st as server-sent events: an opening chunk with no text (so a client sees
// the stream start before the prompt is prefilled), a chunk per batch of text, a final
// chunk with the finish reason, the usage chunk when asked, and "data: [DONE]". A failed
// generation ends with an error event instead; a client that leaves ends the handler (its
// request context cancels the generation).
func (s *Server) stream(w http.ResponseWriter, r *http.Request, st *Stream, so *streamOptions,
	text func(string, []TokenLogprob) any, final func(Result) []any, usageChunk func(Result) any) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	send := func(v any) bool {
		b, err := json.Marshal(v)
		if err != nil {
			return false
		}
		buf := make([]byte, 0, len(b)+8)
		buf = append(append(append(buf, "data: "...), b...), "\n\n"...)
		if _, err := w.Write(buf); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	if !send(text("", nil)) {
		return
	}
	ctx := r.Context()
	for {
		piece, lps, err := st.NextLogprobs(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			if ctx.Err() == nil {
				send(struct {
					Error *apiError `json:"error"`
				}{generationError(err)})
			}
			return
		}
		if !send(text(piece, lps)) {
			return
		}
	}
	res := st.Result()
	for _, c := range final(res) {
		if !send(c) {
			return
		}
	}
	if so != nil && so.IncludeUsage && !send(usageChunk(res)) {
		return
	}
	io.WriteString(w, "data: [DONE]\n\n")
	rc.Flush()
}
