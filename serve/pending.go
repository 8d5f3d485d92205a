package serve

import (
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"
)

// Pending is the handler of a server whose model is still loading: a program listens at
// once, so readiness probes get a 503 instead of a refused connection, loads, and hands
// Pending the Server with Ready. Until then /health answers 503 {"status":"loading"} and
// every other route 503 with Retry-After and an OpenAI error body; from then on Pending
// serves the Server. The zero value is ready to use; it is safe for concurrent use.
type Pending struct {
	s atomic.Pointer[Server]
	// RetryAfter is what the 503 answers tell a client to wait; 0 = 1 s.
	RetryAfter time.Duration
}

// Ready makes p serve s from now on.
func (p *Pending) Ready(s *Server) { p.s.Store(s) }

// ServeHTTP serves the Server once Ready was called, else answers 503.
func (p *Pending) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s := p.s.Load(); s != nil {
		s.ServeHTTP(w, r)
		return
	}
	w.Header().Set("Retry-After", strconv.Itoa(max(1, int((p.RetryAfter+time.Second-1)/time.Second))))
	if r.URL.Path == "/health" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"status":"loading"}`+"\n")
		return
	}
	writeError(w, &apiError{status: http.StatusServiceUnavailable, Type: "server_error", Code: strp("loading"),
		Message: "the model is loading: retry later"})
}
