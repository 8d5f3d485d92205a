package serve

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// waitFor polls cond until it holds, failing the test when ctx ends first: it waits for a
// state, it asserts nothing about how long that takes.
func waitFor(ctx context.Context, t *testing.T, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		case <-time.After(time.Millisecond):
		}
	}
}

// getBody is GET url's status and body.
func getBody(t *testing.T, url string) (int, http.Header, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// Before Ready, Pending answers /health and every route 503 with Retry-After; after it,
// the Server answers.
func TestPending(t *testing.T) {
	p := &Pending{RetryAfter: 3 * time.Second}
	ts := httptest.NewServer(p)
	defer ts.Close()
	code, h, b := getBody(t, ts.URL+"/health")
	if code != 503 || h.Get("Retry-After") != "3" || !strings.Contains(b, `"status":"loading"`) {
		t.Errorf("health while loading: %d %q %s", code, h.Get("Retry-After"), b)
	}
	resp, body := post(t, ts.URL+"/v1/completions", `{"prompt": "Hi"}`)
	var eb errorBody
	if resp.StatusCode != 503 || json.Unmarshal(body, &eb) != nil || eb.Error.Code == nil || *eb.Error.Code != "loading" {
		t.Errorf("completions while loading: %d %s", resp.StatusCode, body)
	}
	m, tok := loadTiny(t, 1)
	p.Ready(New(newTestEngine(t, m, tok, EngineOptions{}), Options{}))
	if code, _, b := getBody(t, ts.URL+"/health"); code != 200 || !strings.Contains(b, `"status":"ok"`) {
		t.Errorf("health once ready: %d %s", code, b)
	}
	if resp, body := post(t, ts.URL+"/v1/completions", `{"prompt": "Hi", "max_tokens": 2}`); resp.StatusCode != 200 {
		t.Errorf("completions once ready: %d %s", resp.StatusCode, body)
	}
}

// metricValue is the value of the sample line starting with name (and its labels) in a
// Prometheus text exposition, or "".
func metricValue(text, name string) string {
	for _, line := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return ""
}

// The gateway's metrics, under kernelrt's names and vLLM's: running requests, queue depth
// and KV-cache usage, which counts the positions a running request holds over every slot's
// context, and falls back to 0 when the request ends.
func TestGatewayMetrics(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, tok := loadTiny(t, 2)
	pm := &poisonModel{Model: m, poison: -1, gate: make(chan struct{})}
	e := newTestEngine(t, pm, tok, EngineOptions{Name: "tiny"})
	ts := httptest.NewServer(New(e, Options{}))
	defer ts.Close()
	metrics := func() string { _, _, b := getBody(t, ts.URL+"/metrics"); return b }

	const P = 10 // prompt tokens, all prefilled in the first step
	resp, err := http.Post(ts.URL+"/v1/completions", "application/json", strings.NewReader(
		`{"prompt": [1,2,3,4,5,6,7,8,9,10], "max_tokens": 5, "temperature": 0, "ignore_eos": true, "stream": true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil { // the opening chunk: the request is in
		t.Fatal(err)
	}
	pm.gate <- struct{}{} // the prefill step; the next one waits at the gate
	want := fmt.Sprint(float64(P) / float64(2*e.MaxCtx()))
	waitFor(ctx, t, "the KV cache usage after the prefill", func() bool {
		return metricValue(metrics(), "kernelrt_kv_cache_usage_ratio") == want
	})
	text := metrics()
	for name, v := range map[string]string{
		"kernelrt_running_sequences": "1", "kernelrt_queue_depth": "0",
		`vllm:num_requests_running{model_name="tiny"}`: "1", `vllm:num_requests_waiting{model_name="tiny"}`: "0",
		`vllm:kv_cache_usage_perc{model_name="tiny"}`: want, `vllm:gpu_cache_usage_perc{model_name="tiny"}`: want,
	} {
		if got := metricValue(text, name); got != v {
			t.Errorf("%s = %q, want %s", name, got, v)
		}
	}
	close(pm.gate)
	if rest, _ := io.ReadAll(br); !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("stream: %s", rest)
	}
	waitFor(ctx, t, "the KV cache usage after the request", func() bool {
		return metricValue(metrics(), "kernelrt_kv_cache_usage_ratio") == "0"
	})
	if v := metricValue(metrics(), `vllm:num_requests_running{model_name="tiny"}`); v != "0" {
		t.Errorf("running after the end: %s", v)
	}
}

// A client that disconnects mid-stream frees its slot at the engine's next step: the
// steps are held at a gate until the server has seen the disconnect, then run freely; the
// request ends cancelled after at most the step under way (3 tokens in all), though it
// had 200 tokens to go.
func TestDisconnectFreesSlot(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	m, tok := loadTiny(t, 1)
	pm := &poisonModel{Model: m, poison: -1, gate: make(chan struct{})}
	e := newTestEngine(t, pm, tok, EngineOptions{})
	s := New(e, Options{})
	gone := make(chan struct{})
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.ServeHTTP(w, r)
		if r.Context().Err() != nil {
			close(gone) // the handler returned because its client went away
		}
	}))
	defer ts.Close()
	cctx, disconnect := context.WithCancel(ctx)
	req, _ := http.NewRequestWithContext(cctx, "POST", ts.URL+"/v1/completions", strings.NewReader(
		`{"prompt": "Once upon a time", "max_tokens": 200, "ignore_eos": true, "stream": true}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	pm.gate <- struct{}{} // prefill and the first token
	pm.gate <- struct{}{} // a second token: the engine now waits at the gate for a third
	disconnect()
	resp.Body.Close()
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("the handler did not see the disconnect")
	}
	close(pm.gate) // steps run freely now: the next admission must drop the request
	waitFor(ctx, t, "the slot to be freed", func() bool { st := e.Stats(); return st.Running == 0 && st.Cancelled == 1 })
	if st := e.Stats(); st.GeneratedTokens > 3 {
		t.Errorf("the abandoned request generated %d tokens", st.GeneratedTokens)
	}
	if resp, b := post(t, ts.URL+"/v1/completions", `{"prompt": "Next", "max_tokens": 2}`); resp.StatusCode != 200 {
		t.Errorf("the next request: %d %s", resp.StatusCode, b)
	}
	checkIdle(t, e)
}
