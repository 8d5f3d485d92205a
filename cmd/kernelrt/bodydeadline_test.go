package main

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestBodyDeadlineCutsSlowBody: a client trickling its body slower than the deadline is cut
// off (its read fails and the server answers and closes), instead of holding the handler.
func TestBodyDeadlineCutsSlowBody(t *testing.T) {
	readErr := make(chan error, 1)
	srv := httptest.NewServer(bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, err := io.ReadAll(r.Body)
		readErr <- err
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
		}
	}), 200*time.Millisecond))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	answered := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(conn).ReadString('\n')
		answered <- line
	}()
	// At most 200 bytes a 50 ms apart: the body of 1000 never completes by itself.
	for i := 0; i < 200; i++ {
		select {
		case line := <-answered:
			if err := <-readErr; err == nil {
				t.Fatalf("the handler read the whole body; answer %q", line)
			}
			if !strings.Contains(line, "400") {
				t.Fatalf("answer %q, want 400 after the failed body read", line)
			}
			return
		case <-time.After(50 * time.Millisecond):
		}
		if _, err := conn.Write([]byte{'a'}); err != nil {
			return // the server closed the connection: cut off
		}
	}
	t.Fatal("a body trickled for 10 s was not cut off by a 200 ms body deadline")
}

// TestBodyDeadlineSparesStreams: an answer streamed for longer than the deadline, after
// the body was read, is neither cancelled nor cut.
func TestBodyDeadlineSparesStreams(t *testing.T) {
	srv := httptest.NewServer(bodyDeadline(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.ReadAll(r.Body); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		rc := http.NewResponseController(w)
		for i := 0; i < 8; i++ { // 8 x 50 ms: four times the deadline
			select {
			case <-r.Context().Done():
				return
			case <-time.After(50 * time.Millisecond):
			}
			io.WriteString(w, "x")
			rc.Flush()
		}
		io.WriteString(w, "done")
	}), 100*time.Millisecond))
	defer srv.Close()
	resp, err := http.Post(srv.URL, "text/plain", strings.NewReader("a body"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "xxxxxxxxdone" || resp.StatusCode != http.StatusOK {
		t.Fatalf("status %d, body %q, err %v: want the whole stream", resp.StatusCode, b, err)
	}
}
