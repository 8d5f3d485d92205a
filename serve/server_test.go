package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// newTestServer serves an engine of slots sequences over the tiny model.
func newTestServer(t testing.TB, slots int, eo EngineOptions, o Options) (*httptest.Server, *Server, *Engine) {
	t.Helper()
	m, tok := loadTiny(t, slots)
	e := newTestEngine(t, m, tok, eo)
	s := New(e, o)
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return ts, s, e
}

func post(t testing.TB, url, body string) (*http.Response, []byte) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

// errorBody is OpenAI's error shape.
type errorBody struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

// Bad requests get 400 (413 for a large body) with an OpenAI error naming the field.
func TestServerBadRequests(t *testing.T) {
	ts, _, e := newTestServer(t, 1, EngineOptions{}, Options{MaxBodyBytes: 1 << 12})
	long := strings.Repeat("word ", 300)
	for _, c := range []struct {
		path, body string
		status     int
		param      string
	}{
		{"/v1/completions", `{"prompt": "hi"`, 400, ""},
		{"/v1/completions", `[1, 2]`, 400, "body"},
		{"/v1/completions", `{"prompt": "hi", "temperature": "hot"}`, 400, "temperature"},
		{"/v1/completions", `{"prompt": "hi", "max_tokens": "ten"}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt": "hi", "stream": 1}`, 400, "stream"},
		{"/v1/completions", `{"prompt": "hi", "n": 2}`, 400, "n"},
		{"/v1/completions", `{"prompt": "hi", "echo": true}`, 400, "echo"},
		{"/v1/completions", `{"prompt": "hi", "max_tokens": 100000}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt": "hi", "max_tokens": 0}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt": "hi", "temperature": 3}`, 400, "temperature"},
		{"/v1/completions", `{"prompt": "hi", "top_p": -0.5}`, 400, "top_p"},
		{"/v1/completions", `{"prompt": "hi", "logit_bias": {"x": 1}}`, 400, "logit_bias"},
		{"/v1/completions", `{"prompt": "hi", "logit_bias": {"99999": 1}}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": "hi", "stop": 5}`, 400, "stop"},
		{"/v1/completions", `{"prompt": "hi", "stop": ["a","b","c","d","e"]}`, 400, "stop"},
		{"/v1/completions", `{"prompt": ["a", "b"]}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": ""}`, 400, "prompt"},
		{"/v1/completions", `{}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": [99999]}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": "` + long + `"}`, 400, "prompt"},
		{"/v1/completions", `{"prompt": "` + strings.Repeat("x", 1<<12) + `"}`, 413, ""},
		{"/v1/chat/completions", `{"messages": []}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": 7}]}`, 400, "messages[0].content"},
		{"/v1/chat/completions", `{"messages": [{"content": "hi"}]}`, 400, "messages[0].role"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}`, 400, "messages[0].content[0].type"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "hi"}], "tools": [{}]}`, 400, "tools[0].type"},
		{"/v1/chat/completions", `{"messages": "hi"}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages": [{"role": "user", "content": "` + long + `"}]}`, 400, "messages"},
	} {
		resp, b := post(t, ts.URL+c.path, c.body)
		var eb errorBody
		if err := json.Unmarshal(b, &eb); err != nil || resp.StatusCode != c.status || eb.Error.Message == "" || eb.Error.Type == "" {
			t.Errorf("%s %.60s: %d %s", c.path, c.body, resp.StatusCode, b)
			continue
		}
		if c.param != "" && (eb.Error.Param == nil || *eb.Error.Param != c.param) {
			t.Errorf("%s %.60s: param %v, want %q (%s)", c.path, c.body, eb.Error.Param, c.param, eb.Error.Message)
		}
	}
	for _, c := range []struct{ method, path string }{{"GET", "/v1/completions"}, {"POST", "/v1/models"}, {"GET", "/nope"}} {
		req, _ := http.NewRequest(c.method, ts.URL+c.path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb errorBody
		if json.Unmarshal(b, &eb) != nil || resp.StatusCode < 404 || resp.StatusCode > 405 {
			t.Errorf("%s %s: %d %s", c.method, c.path, resp.StatusCode, b)
		}
	}
	if st := e.Stats(); st.Submitted != 0 {
		t.Errorf("bad requests reached the engine: %+v", st)
	}
}

// sseData reads a server-sent event stream's data lines up to [DONE].
func sseData(t testing.TB, r io.Reader) []string {
	t.Helper()
	var out []string
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		d, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			t.Fatalf("not a data line: %q", line)
		}
		if d == "[DONE]" {
			return out
		}
		out = append(out, d)
	}
	t.Fatalf("stream ended without [DONE]: %v", sc.Err())
	return nil
}

// The wire format of completions and chat, streamed and not: the streamed text equals the
// whole, usage counts agree, include_usage adds the usage chunk with no choices.
func TestServerWireFormat(t *testing.T) {
	ts, _, _ := newTestServer(t, 2, EngineOptions{}, Options{})
	const n = 12
	resp, b := post(t, ts.URL+"/v1/completions", fmt.Sprintf(`{"model": "any", "prompt": "Hello there", "max_tokens": %d, "temperature": 0, "ignore_eos": true}`, n))
	var whole completionBody
	if err := json.Unmarshal(b, &whole); err != nil || resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	if whole.Object != "text_completion" || whole.Model != "kernelrt" || len(whole.Choices) != 1 ||
		*whole.Choices[0].FinishReason != "length" || whole.Usage.CompletionTokens != n ||
		whole.Usage.TotalTokens != whole.Usage.PromptTokens+n || whole.Usage.PromptTokens != 9 {
		t.Errorf("body %s", b)
	}
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(fmt.Sprintf(
		`{"prompt": "Hello there", "max_tokens": %d, "temperature": 0, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}}`, n)))
	if err != nil {
		t.Fatal(err)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	chunks := sseData(t, resp.Body)
	resp.Body.Close()
	var text strings.Builder
	var last completionBody
	for i, c := range chunks {
		var cb completionBody
		if err := json.Unmarshal([]byte(c), &cb); err != nil {
			t.Fatal(err)
		}
		if i < len(chunks)-1 {
			if len(cb.Choices) != 1 || cb.Usage != nil {
				t.Fatalf("chunk %d: %s", i, c)
			}
			text.WriteString(cb.Choices[0].Text)
			if fr := cb.Choices[0].FinishReason; (fr != nil) != (i == len(chunks)-2) {
				t.Errorf("chunk %d finish_reason %v", i, fr)
			}
		}
		last = cb
	}
	if text.String() != whole.Choices[0].Text || len(last.Choices) != 0 || last.Usage == nil || last.Usage.CompletionTokens != n ||
		last.Usage.PromptTokensDetails.CachedTokens != whole.Usage.PromptTokens-1 {
		t.Errorf("streamed %q, whole %q; last chunk %+v", text.String(), whole.Choices[0].Text, last)
	}

	// Chat: the first chunk carries the role; no include_usage means no usage chunk.
	body := `{"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8, "temperature": 0}`
	_, b = post(t, ts.URL+"/v1/chat/completions", body)
	var cw chatBody
	if err := json.Unmarshal(b, &cw); err != nil || cw.Object != "chat.completion" || cw.Choices[0].Message.Role != "assistant" || cw.Usage == nil {
		t.Fatalf("%s", b)
	}
	resp, err = http.Post(ts.URL+"/v1/chat/completions", "application/json", strings.NewReader(strings.Replace(body, "{", `{"stream": true, `, 1)))
	if err != nil {
		t.Fatal(err)
	}
	chunks = sseData(t, resp.Body)
	resp.Body.Close()
	text.Reset()
	for i, c := range chunks {
		var cb chatBody
		if err := json.Unmarshal([]byte(c), &cb); err != nil || cb.Object != "chat.completion.chunk" || len(cb.Choices) != 1 || cb.Usage != nil {
			t.Fatalf("chunk %d: %s", i, c)
		}
		if d := cb.Choices[0].Delta; d.Content != nil {
			text.WriteString(*d.Content)
		}
		if (cb.Choices[0].Delta.Role == "assistant") != (i == 0) {
			t.Errorf("chunk %d: %s", i, c)
		}
	}
	if text.String() != *cw.Choices[0].Message.Content {
		t.Errorf("streamed %q, whole %q", text.String(), *cw.Choices[0].Message.Content)
	}
}

// /v1/models, /health and /metrics.
func TestServerInfoRoutes(t *testing.T) {
	ts, _, _ := newTestServer(t, 2, EngineOptions{Name: "tiny-model"}, Options{})
	post(t, ts.URL+"/v1/completions", `{"prompt": "Hello", "max_tokens": 3}`)
	get := func(path string) (int, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, b := get("/v1/models"); code != 200 || !strings.Contains(b, `"id":"tiny-model"`) || !strings.Contains(b, `"object":"list"`) {
		t.Errorf("models: %d %s", code, b)
	}
	if code, b := get("/health"); code != 200 || !strings.Contains(b, `"status":"ok"`) {
		t.Errorf("health: %d %s", code, b)
	}
	code, b := get("/metrics")
	for _, want := range []string{
		`kernelrt_http_requests_total{code="200",route="/v1/completions"} 1`,
		"kernelrt_prompt_tokens_total 5", "kernelrt_generated_tokens_total", "kernelrt_prompt_tokens_reused_total 0",
		"kernelrt_batch_sequences_bucket", "kernelrt_batch_tokens_count", "kernelrt_queue_depth 0", "kernelrt_running_sequences 0",
		"kernelrt_time_to_first_token_seconds_count 1", "kernelrt_inter_token_seconds_bucket",
		`kernelrt_requests_ended_total{outcome="completed"} 1`, "go_goroutines ", "process_resident_memory_bytes ",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	if code != 200 || t.Failed() {
		t.Logf("%s", b)
	}
}

// A full queue answers 429 and a draining server 503, both with Retry-After; Shutdown
// lets the running stream finish.
func TestServerBusyAndDrain(t *testing.T) {
	m, tok := loadTiny(t, 1)
	pm := &poisonModel{Model: m, poison: -1, gate: make(chan struct{})}
	e := newTestEngine(t, pm, tok, EngineOptions{QueueSize: -1})
	s := New(e, Options{RetryAfter: 2 * time.Second})
	ts := httptest.NewServer(s)
	defer ts.Close()
	running, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(`{"prompt": "Hi", "max_tokens": 3, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer running.Body.Close()
	br := bufio.NewReader(running.Body)
	if _, err := br.ReadString('\n'); err != nil { // the opening chunk: the request holds the slot
		t.Fatal(err)
	}
	resp, b := post(t, ts.URL+"/v1/completions", `{"prompt": "Hi"}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(b), `"code":"queue_full"`) {
		t.Errorf("busy: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	done := make(chan error)
	go func() { done <- s.Shutdown(context.Background()) }()
	for {
		resp, b = post(t, ts.URL+"/v1/completions", `{"prompt": "Hi"}`)
		if resp.StatusCode == 503 {
			break
		}
	}
	if resp.Header.Get("Retry-After") != "2" || !strings.Contains(string(b), `"code":"shutting_down"`) {
		t.Errorf("draining: %d %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), b)
	}
	if r, err := http.Get(ts.URL + "/health"); err != nil || r.StatusCode != 503 {
		t.Errorf("health while draining: %v %v", r.StatusCode, err)
	}
	close(pm.gate)
	rest, _ := io.ReadAll(br)
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Errorf("drained stream: %s", rest)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// No goroutine or slot leaks after 10,000 requests of every kind: streamed and not,
// completions and chat, and streams the client abandons after the first chunk (their
// generations are cancelled). Nothing here depends on timing: waits are for states.
func TestServerNoLeaks(t *testing.T) {
	total := 10000
	if testing.Short() {
		total = 1000
	}
	ts, _, e := newTestServer(t, 4, EngineOptions{}, Options{})
	const clients = 16
	tr := &http.Transport{MaxIdleConnsPerHost: clients}
	client := &http.Client{Transport: tr}
	runtime.GC()
	base := runtime.NumGoroutine()
	var (
		wg        sync.WaitGroup
		mu        sync.Mutex
		abandoned int
		failures  []string
	)
	fail := func(format string, a ...any) {
		mu.Lock()
		failures = append(failures, fmt.Sprintf(format, a...))
		mu.Unlock()
	}
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < total; i += clients {
				path, body := "/v1/completions", fmt.Sprintf(`{"prompt": "Request %d says", "max_tokens": %d`, i%97, 1+i%3)
				if i%2 == 1 {
					path, body = "/v1/chat/completions", fmt.Sprintf(`{"messages": [{"role": "user", "content": "Message %d"}], "max_tokens": %d`, i%89, 1+i%3)
				}
				kind := i % 3 // 0: whole body, 1: stream, 2: stream abandoned after the opening chunk
				if kind > 0 {
					body += `, "stream": true`
				}
				ctx, cancel := context.WithCancel(context.Background())
				req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+path, strings.NewReader(body+"}"))
				resp, err := client.Do(req)
				if err != nil {
					cancel()
					fail("request %d: %v", i, err)
					continue
				}
				if resp.StatusCode != 200 {
					b, _ := io.ReadAll(resp.Body)
					fail("request %d: %d %s", i, resp.StatusCode, b)
				} else if kind == 2 {
					bufio.NewReader(resp.Body).ReadString('\n')
					mu.Lock()
					abandoned++
					mu.Unlock()
				} else {
					b, _ := io.ReadAll(resp.Body)
					if kind == 1 && !strings.HasSuffix(string(b), "data: [DONE]\n\n") || kind == 0 && !strings.Contains(string(b), `"usage"`) {
						fail("request %d: %s", i, b)
					}
				}
				cancel()
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	for _, f := range failures[:min(len(failures), 10)] {
		t.Error(f)
	}
	// The abandoned requests end at the engine's next step; the server's connection
	// goroutines end when the client's idle connections close.
	tr.CloseIdleConnections()
	for {
		st := e.Stats()
		if st.Running == 0 && st.Waiting == 0 && st.Submitted == uint64(total) && st.Completed+st.Cancelled+st.Failed == st.Submitted {
			break
		}
		time.Sleep(time.Millisecond)
	}
	n := runtime.NumGoroutine()
	for n > base {
		time.Sleep(time.Millisecond)
		n = runtime.NumGoroutine()
	}
	st := checkIdle(t, e)
	if st.Failed != 0 || st.Rejected != 0 || st.Cancelled > uint64(abandoned) || st.Completed < uint64(total-abandoned) {
		t.Errorf("stats %+v (%d abandoned)", st, abandoned)
	}
	t.Logf("%d requests: %+v; goroutines %d, baseline %d", total, st, n, base)
}
