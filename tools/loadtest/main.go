// Command loadtest holds `kernelrt serve` under load and abuse (issue 23, item 6). It builds
// cmd/kernelrt, writes a synthetic model (`kernelrt synth`), starts the server as a
// subprocess on a free 127.0.0.1 port and, once /health says 200:
//
//   - load mode: many concurrent clients send one streamed chat request each; some leave
//     after their first chunk. Every answer must be a finished stream ([DONE]) or a 429
//     with Retry-After: anything else counts as lost and fails the run. Meanwhile an
//     oversized body must get 413, and slow-loris clients (headers, or a body, trickled a
//     byte a second) must be cut off by the server. Afterwards no slot may stay running and
//     no request queued, and the server's open descriptors must return to the idle count.
//   - soak mode: a bounded pool of looping clients (streamed, whole, logprobs, embeddings,
//     dropped) for -duration, sampling the server's RSS every -sample; it fails when the RSS
//     grew by more than -rss-growth after warm-up or the server did not return to idle.
//
// Leaks are seen three ways: the server's goroutines (go_goroutines on /metrics: a handler
// or stream that never ends keeps one), and from /proc its open descriptors (each
// connection is one) and OS threads.
//
//	go run ./tools/loadtest -mode load -shape qwen2-0.5b -clients 256
//	go run ./tools/loadtest -mode soak -duration 10m
//
// Every loop is bounded in count and time; all traffic goes to 127.0.0.1. It is not part
// of make test (make loadtest, make soak).
package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// config is the command line.
type config struct {
	mode, shape, recipe, bin, jsonOut string
	clients, tokens, parallel, queue  int
	threads, ctx                      int
	dropEvery                         int
	duration, sample, warmup          time.Duration
	bodyTimeout                       time.Duration
	maxBody                           int64
	rssGrowth                         float64
}

func main() {
	var c config
	flag.StringVar(&c.mode, "mode", "load", "load (one burst of concurrent requests plus abuse) or soak (looping clients for -duration)")
	flag.StringVar(&c.shape, "shape", "", "synthetic model shape for `kernelrt synth` (default: qwen2-0.5b for load, tiny for soak)")
	flag.StringVar(&c.recipe, "recipe", "q8_0", "synthetic model recipe")
	flag.StringVar(&c.bin, "kernelrt", "", "kernelrt binary to run (default: go build ./cmd/kernelrt into a temporary directory)")
	flag.IntVar(&c.clients, "clients", 0, "concurrent clients (default: 256 for load, 64 for soak)")
	flag.IntVar(&c.tokens, "tokens", 16, "tokens each generation asks for (max_tokens, ignore_eos)")
	flag.IntVar(&c.parallel, "parallel", 8, "server -parallel (slots)")
	flag.IntVar(&c.queue, "queue", 64, "server -queue (requests that may wait; more get 429)")
	flag.IntVar(&c.threads, "threads", 0, "server -threads (0 = one per core)")
	flag.IntVar(&c.ctx, "ctx", 512, "server -ctx (per sequence)")
	flag.IntVar(&c.dropEvery, "drop-every", 8, "in load mode every Nth client leaves after its first chunk (0 = none)")
	flag.DurationVar(&c.duration, "duration", 10*time.Minute, "soak: how long the clients loop")
	flag.DurationVar(&c.sample, "sample", 10*time.Second, "soak: how often the server's RSS is sampled")
	flag.DurationVar(&c.warmup, "warmup", 0, "soak: samples before this are warm-up; the RSS bound is against the first after it (default: a tenth of -duration, at least -sample)")
	flag.DurationVar(&c.bodyTimeout, "body-timeout", 5*time.Second, "server -body-timeout, which the slow-loris body client must hit")
	flag.Int64Var(&c.maxBody, "max-body", 1<<20, "server -max-body; the oversized request sends twice this")
	flag.Float64Var(&c.rssGrowth, "rss-growth", 0.25, "soak: most relative RSS growth from the first sample after warm-up to the end")
	flag.StringVar(&c.jsonOut, "json", "", "also write the report as JSON to this `file` (- = stdout)")
	flag.Parse()
	if err := c.check(); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(2)
	}
	rep, err := run(c)
	if rep != nil {
		rep.print(os.Stdout)
		if c.jsonOut != "" {
			if werr := rep.writeJSON(c.jsonOut); werr != nil && err == nil {
				err = werr
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "loadtest: FAIL:", err)
		os.Exit(1)
	}
	fmt.Println("PASS")
}

func (c *config) check() error {
	switch c.mode {
	case "load":
		if c.shape == "" {
			c.shape = "qwen2-0.5b"
		}
		if c.clients == 0 {
			c.clients = 256
		}
	case "soak":
		if c.shape == "" {
			c.shape = "tiny"
		}
		if c.clients == 0 {
			c.clients = 64
		}
	default:
		return fmt.Errorf("-mode %q: want load or soak", c.mode)
	}
	switch {
	case c.clients < 1 || c.clients > 4096:
		return fmt.Errorf("-clients must be 1 to 4096, got %d", c.clients)
	case c.tokens < 1 || c.tokens > 1024:
		return fmt.Errorf("-tokens must be 1 to 1024, got %d", c.tokens)
	case c.parallel < 1 || c.queue < 0 || c.threads < 0:
		return fmt.Errorf("-parallel must be >= 1 (got %d), -queue and -threads >= 0 (got %d, %d)", c.parallel, c.queue, c.threads)
	case c.ctx < c.tokens+64:
		return fmt.Errorf("-ctx %d must hold the prompt and -tokens %d (at least %d)", c.ctx, c.tokens, c.tokens+64)
	case c.dropEvery < 0:
		return fmt.Errorf("-drop-every must be >= 0, got %d", c.dropEvery)
	case c.duration <= 0 || c.duration > 24*time.Hour:
		return fmt.Errorf("-duration must be in (0, 24h], got %v", c.duration)
	case c.sample < time.Second:
		return fmt.Errorf("-sample must be at least 1s, got %v", c.sample)
	case c.bodyTimeout < time.Second || c.bodyTimeout > time.Minute:
		return fmt.Errorf("-body-timeout must be 1s to 1m, got %v", c.bodyTimeout)
	case c.maxBody < 1024 || c.maxBody > 64<<20:
		return fmt.Errorf("-max-body must be 1 KiB to 64 MiB, got %d", c.maxBody)
	case c.rssGrowth <= 0:
		return fmt.Errorf("-rss-growth must be positive, got %v", c.rssGrowth)
	}
	if c.warmup == 0 {
		c.warmup = max(c.duration/10, c.sample)
	}
	return nil
}

// server is the kernelrt serve subprocess.
type server struct {
	cmd    *exec.Cmd
	url    string
	logf   string
	client *http.Client
	tr     *http.Transport
}

// procSample is what /proc and /metrics say about the server at one moment.
type procSample struct {
	At      string  `json:"at"`
	Seconds float64 `json:"seconds"`
	RSSMiB  float64 `json:"rss_mib"`
	Threads int     `json:"threads"`
	FDs     int     `json:"fds"`
	// Goroutines is the server's go_goroutines.
	Goroutines int     `json:"goroutines"`
	Running    float64 `json:"running"`
	Queued     float64 `json:"queued"`
	Requests   int64   `json:"requests_done,omitempty"`
}

// report is the run's result.
type report struct {
	Mode      string         `json:"mode"`
	Shape     string         `json:"shape"`
	Recipe    string         `json:"recipe"`
	Clients   int            `json:"clients"`
	Tokens    int            `json:"tokens"`
	Parallel  int            `json:"parallel"`
	Queue     int            `json:"queue"`
	Duration  string         `json:"duration,omitempty"`
	Served    int            `json:"served"`
	Rejected  int            `json:"rejected_429"`
	Dropped   int            `json:"dropped_by_client"`
	Lost      int            `json:"lost"`
	LostWhy   []string       `json:"lost_reasons,omitempty"`
	ByKind    map[string]int `json:"served_by_kind,omitempty"`
	TTFTp50ms float64        `json:"ttft_p50_ms"`
	TTFTp99ms float64        `json:"ttft_p99_ms"`
	Elapsed   float64        `json:"elapsed_s"`
	Samples   []procSample   `json:"samples"`
	Abuse     []abuseCheck   `json:"abuse,omitempty"`
	Checks    []string       `json:"failed_checks,omitempty"`
}

// abuseCheck is one abusive client's outcome.
type abuseCheck struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

func run(c config) (*report, error) {
	dir, err := os.MkdirTemp("", "kernelrt-loadtest")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	bin := c.bin
	if bin == "" {
		bin = filepath.Join(dir, "kernelrt")
		fmt.Fprintln(os.Stderr, "loadtest: building ./cmd/kernelrt")
		b := exec.Command("go", "build", "-o", bin, "./cmd/kernelrt")
		b.Stdout, b.Stderr = os.Stderr, os.Stderr
		if err := b.Run(); err != nil {
			return nil, fmt.Errorf("go build ./cmd/kernelrt (run from the repository root): %w", err)
		}
	}
	model := filepath.Join(dir, c.shape+".gguf")
	fmt.Fprintf(os.Stderr, "loadtest: kernelrt synth -shape %s -recipe %s\n", c.shape, c.recipe)
	if out, err := exec.Command(bin, "synth", "-shape", c.shape, "-recipe", c.recipe, "-out", model).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("kernelrt synth: %v: %s", err, out)
	}
	s, err := startServer(c, bin, model, dir)
	if err != nil {
		return nil, err
	}
	defer s.stop()
	rep := &report{Mode: c.mode, Shape: c.shape, Recipe: c.recipe, Clients: c.clients, Tokens: c.tokens,
		Parallel: c.parallel, Queue: c.queue, ByKind: map[string]int{}}
	if c.mode == "load" {
		err = runLoad(c, s, rep)
	} else {
		err = runSoak(c, s, rep)
	}
	if err == nil && len(rep.Checks) > 0 {
		err = errors.New(strings.Join(rep.Checks, "; "))
	}
	if err != nil {
		if b, rerr := os.ReadFile(s.logf); rerr == nil && len(b) > 0 {
			fmt.Fprintf(os.Stderr, "server log (last 2 KB):\n%s\n", b[max(0, len(b)-2048):])
		}
	}
	return rep, err
}

func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

func startServer(c config, bin, model, dir string) (*server, error) {
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	logf := filepath.Join(dir, "server.log")
	lf, err := os.Create(logf)
	if err != nil {
		return nil, err
	}
	defer lf.Close()
	cmd := exec.Command(bin, "serve", "-model", model, "-addr", addr, "-parallel", strconv.Itoa(c.parallel),
		"-queue", strconv.Itoa(c.queue), "-threads", strconv.Itoa(c.threads), "-ctx", strconv.Itoa(c.ctx),
		"-body-timeout", c.bodyTimeout.String(), "-max-body", strconv.FormatInt(c.maxBody, 10), "-drain-timeout", "10s")
	cmd.Stdout, cmd.Stderr = lf, lf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	tr := &http.Transport{MaxIdleConns: c.clients + 16, MaxIdleConnsPerHost: c.clients + 16, DisableCompression: true}
	s := &server{cmd: cmd, url: "http://" + addr, logf: logf, tr: tr, client: &http.Client{Transport: tr}}
	deadline := time.Now().Add(5 * time.Minute) // a large model's prefault on a busy machine
	for {
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("the server did not answer /health 200 within 5 minutes (log %s)", logf)
		}
		if cmd.ProcessState != nil {
			return nil, errors.New("the server exited during startup")
		}
		resp, err := s.client.Get(s.url + "/health")
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	fmt.Fprintf(os.Stderr, "loadtest: server pid %d ready on %s\n", cmd.Process.Pid, s.url)
	return s, nil
}

// stop sends SIGTERM, then SIGKILL if the server has not exited within 20 s.
func (s *server) stop() {
	if s.cmd.Process == nil {
		return
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}

// sample reads the server's RSS, threads and descriptors from /proc and its running and
// queued requests from /metrics.
func (s *server) sample(t0 time.Time, label string) (procSample, error) {
	p := procSample{At: label, Seconds: time.Since(t0).Seconds()}
	pid := s.cmd.Process.Pid
	st, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return p, fmt.Errorf("reading the server's /proc status: %w", err)
	}
	for _, line := range strings.Split(string(st), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "VmRSS:":
			kb, _ := strconv.ParseFloat(f[1], 64)
			p.RSSMiB = kb / 1024
		case "Threads:":
			p.Threads, _ = strconv.Atoi(f[1])
		}
	}
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return p, fmt.Errorf("reading the server's descriptors: %w", err)
	}
	p.FDs = len(fds)
	m, err := s.metrics()
	if err != nil {
		return p, err
	}
	p.Running, p.Queued = m["kernelrt_running_sequences"], m["kernelrt_queue_depth"]
	p.Goroutines = int(m["go_goroutines"])
	return p, nil
}

// metrics reads the unlabelled samples of /metrics.
func (s *server) metrics() (map[string]float64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.url+"/metrics", nil)
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /metrics: status %d", resp.StatusCode)
	}
	m := map[string]float64{}
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 1<<20))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 2 && !strings.HasPrefix(f[0], "#") {
			if v, err := strconv.ParseFloat(f[1], 64); err == nil {
				m[f[0]] = v
			}
		}
	}
	return m, sc.Err()
}

// outcome is one request's result.
type outcome struct {
	kind    string
	status  int
	retryOK bool // a 429 carried a positive integer Retry-After
	done    bool // the stream ended with [DONE], or a whole answer decoded
	dropped bool // the client left on purpose
	ttft    time.Duration
	err     error
}

// class sorts an outcome: served, rejected (429 with Retry-After), dropped, or lost.
func (o outcome) class() string {
	switch {
	case o.dropped && o.err == nil:
		return "dropped"
	case o.status == http.StatusOK && o.done && o.err == nil:
		return "served"
	case o.status == http.StatusTooManyRequests && o.retryOK:
		return "rejected"
	}
	return "lost"
}

func (o outcome) why() string {
	if o.err != nil {
		return fmt.Sprintf("%s: status %d: %v", o.kind, o.status, o.err)
	}
	return fmt.Sprintf("%s: status %d, done %v, retry-after ok %v", o.kind, o.status, o.done, o.retryOK)
}

func chatBody(tokens int, stream, logprobs bool, i int) []byte {
	m := map[string]any{
		"model":      "x",
		"messages":   []map[string]string{{"role": "user", "content": fmt.Sprintf("Load test request %d: say something.", i)}},
		"max_tokens": tokens, "ignore_eos": true, "temperature": 0, "stream": stream,
	}
	if logprobs {
		m["logprobs"], m["top_logprobs"] = true, 3
	}
	b, _ := json.Marshal(m)
	return b
}

// do sends one request of kind streamed, dropped, whole, logprobs or embeddings; every
// request is bounded by timeout.
func (s *server) do(kind string, tokens, i int, timeout time.Duration) outcome {
	o := outcome{kind: kind}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	path, body := "/v1/chat/completions", chatBody(tokens, kind == "streamed" || kind == "dropped", kind == "logprobs", i)
	if kind == "embeddings" {
		path = "/v1/embeddings"
		body, _ = json.Marshal(map[string]any{"model": "x", "input": []string{fmt.Sprintf("embedding %d", i), "a second input"}})
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	t0 := time.Now()
	resp, err := s.client.Do(req)
	if err != nil {
		o.err = err
		return o
	}
	defer resp.Body.Close()
	o.status = resp.StatusCode
	if resp.StatusCode != http.StatusOK {
		ra, _ := strconv.Atoi(resp.Header.Get("Retry-After"))
		o.retryOK = ra > 0
		io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		return o
	}
	if kind != "streamed" && kind != "dropped" {
		var v struct {
			Choices []json.RawMessage `json:"choices"`
			Data    []json.RawMessage `json:"data"`
		}
		if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&v); err != nil {
			o.err = fmt.Errorf("decoding the answer: %w", err)
			return o
		}
		o.done = len(v.Choices) == 1 || (kind == "embeddings" && len(v.Data) == 2)
		if !o.done {
			o.err = fmt.Errorf("%d choices, %d embeddings", len(v.Choices), len(v.Data))
		}
		return o
	}
	r := bufio.NewReader(resp.Body)
	opened := false
	for n := 0; n < 4*tokens+64; n++ { // a chunk per token at most, plus the opening and closing ones
		line, err := r.ReadString('\n')
		if err != nil {
			o.err = fmt.Errorf("stream ended without [DONE]: %w", err)
			return o
		}
		line = strings.TrimSpace(line)
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok {
			continue
		}
		if data == "[DONE]" {
			o.done = true
			return o
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Error json.RawMessage `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			o.err = fmt.Errorf("bad chunk %q: %w", data, err)
			return o
		}
		if ch.Error != nil {
			o.err = fmt.Errorf("error event: %s", ch.Error)
			return o
		}
		if !opened { // the server's opening chunk, sent before the prompt is prefilled
			opened = true
			continue
		}
		// A generated piece may be empty text (a random model's bytes that are not yet
		// whole UTF-8): the first chunk after the opening one carrying content counts.
		if o.ttft == 0 && len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != nil {
			o.ttft = time.Since(t0)
			if kind == "dropped" {
				o.dropped = true
				return o // the deferred cancel closes the connection mid-stream
			}
		}
	}
	o.err = errors.New("more chunks than tokens asked for")
	return o
}

// tally adds outcomes to the report and returns the TTFTs of streams.
func (rep *report) tally(outs []outcome) []time.Duration {
	var ttft []time.Duration
	for _, o := range outs {
		switch o.class() {
		case "served":
			rep.Served++
			rep.ByKind[o.kind]++
		case "rejected":
			rep.Rejected++
		case "dropped":
			rep.Dropped++
		default:
			rep.Lost++
			if len(rep.LostWhy) < 10 {
				rep.LostWhy = append(rep.LostWhy, o.why())
			}
		}
		if o.ttft > 0 {
			ttft = append(ttft, o.ttft)
		}
	}
	return ttft
}

func percentile(d []time.Duration, p float64) float64 {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := min(len(d)-1, int(p*float64(len(d))))
	return float64(d[i]) / 1e6
}

// settle closes the client's idle connections and waits (at most 60 s) for the server to
// have no request running or queued and no more descriptors than idle; it returns the last
// sample.
func (s *server) settle(t0 time.Time, idle procSample, label string) (procSample, error) {
	var last procSample
	var err error
	for i := 0; i < 60; i++ {
		s.tr.CloseIdleConnections()
		last, err = s.sample(t0, label)
		if err == nil && last.Running == 0 && last.Queued == 0 && last.FDs <= idle.FDs && last.Goroutines <= idle.Goroutines {
			return last, nil
		}
		time.Sleep(time.Second)
	}
	return last, err
}

func (rep *report) checkIdle(idle, after procSample) {
	if after.Running != 0 || after.Queued != 0 {
		rep.Checks = append(rep.Checks, fmt.Sprintf("after the load %v requests still running and %v queued", after.Running, after.Queued))
	}
	if after.FDs > idle.FDs {
		rep.Checks = append(rep.Checks, fmt.Sprintf("the server holds %d descriptors after the load, %d when idle before it (connections or handlers leaked)", after.FDs, idle.FDs))
	}
	if after.Goroutines > idle.Goroutines {
		rep.Checks = append(rep.Checks, fmt.Sprintf("the server runs %d goroutines after the load, %d when idle before it (handlers or streams leaked)", after.Goroutines, idle.Goroutines))
	}
}

func runLoad(c config, s *server, rep *report) error {
	t0 := time.Now()
	s.tr.CloseIdleConnections()
	idle, err := s.sample(t0, "idle before")
	if err != nil {
		return err
	}
	rep.Samples = append(rep.Samples, idle)
	// The abuse runs alongside the load.
	var abuse sync.WaitGroup
	abuseOut := make([]abuseCheck, 3)
	abuse.Add(3)
	go func() { defer abuse.Done(); abuseOut[0] = oversized(s, c.maxBody) }()
	go func() { defer abuse.Done(); abuseOut[1] = slowHeaders(s) }()
	go func() { defer abuse.Done(); abuseOut[2] = slowBody(s, c.bodyTimeout) }()

	// Peak: sample every second while the clients run.
	stopPeak := make(chan struct{})
	peakDone := make(chan procSample)
	go func() {
		var peak procSample
		tk := time.NewTicker(time.Second)
		defer tk.Stop()
		for {
			select {
			case <-stopPeak:
				peakDone <- peak
				return
			case <-tk.C:
				if p, err := s.sample(t0, "peak under load"); err == nil && p.FDs > peak.FDs {
					peak = p
				}
			}
		}
	}()
	outs := make([]outcome, c.clients)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			kind := "streamed"
			if c.dropEvery > 0 && i%c.dropEvery == c.dropEvery-1 {
				kind = "dropped"
			}
			<-start
			outs[i] = s.do(kind, c.tokens, i, 10*time.Minute)
		}()
	}
	tl := time.Now()
	close(start)
	wg.Wait()
	rep.Elapsed = time.Since(tl).Seconds()
	close(stopPeak)
	peak := <-peakDone
	abuse.Wait()
	rep.Abuse = abuseOut
	for _, a := range abuseOut {
		if !a.OK {
			rep.Checks = append(rep.Checks, a.Name+": "+a.Detail)
		}
	}
	ttft := rep.tally(outs)
	rep.TTFTp50ms, rep.TTFTp99ms = percentile(ttft, 0.5), percentile(ttft, 0.99)
	for _, o := range outs {
		if o.kind == "dropped" && o.status == http.StatusOK && !o.dropped {
			rep.Checks = append(rep.Checks, "a client meant to leave mid-stream saw no generated chunk to leave after")
			break
		}
	}
	if peak.At != "" {
		rep.Samples = append(rep.Samples, peak)
	}
	after, err := s.settle(t0, idle, "after")
	if err != nil {
		return err
	}
	rep.Samples = append(rep.Samples, after)
	rep.checkIdle(idle, after)
	if rep.Lost > 0 {
		rep.Checks = append(rep.Checks, fmt.Sprintf("%d requests lost (neither finished nor a 429 with Retry-After)", rep.Lost))
	}
	return nil
}

// oversized sends a body of twice the server's limit: it must get 413.
func oversized(s *server, limit int64) abuseCheck {
	a := abuseCheck{Name: "oversized body"}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	body := append([]byte(`{"model":"x","messages":[{"role":"user","content":"`), bytes.Repeat([]byte("a"), int(2*limit))...)
	body = append(body, `"}]}`...)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.url+"/v1/chat/completions", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	// A connection of its own: the server closes it after refusing the body.
	cl := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	t0 := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		a.Detail = fmt.Sprintf("%d bytes (limit %d): no answer: %v", len(body), limit, err)
		return a
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	a.OK = resp.StatusCode == http.StatusRequestEntityTooLarge
	a.Detail = fmt.Sprintf("%d bytes (limit %d): status %d in %v", len(body), limit, resp.StatusCode, time.Since(t0).Round(time.Millisecond))
	return a
}

// trickle writes head at once, then one byte of rest a second, until the server closes the
// connection (or answers) or limit passes; it returns how long the connection lasted and
// whether the server ended it, with its answer's first line if any.
func trickle(s *server, head, rest string, limit time.Duration) (time.Duration, bool, string) {
	conn, err := net.DialTimeout("tcp", strings.TrimPrefix(s.url, "http://"), 10*time.Second)
	if err != nil {
		return 0, false, "dial: " + err.Error()
	}
	defer conn.Close()
	t0 := time.Now()
	closed := make(chan string, 1)
	go func() { // the server's answer or close
		conn.SetReadDeadline(t0.Add(limit + 10*time.Second))
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil && line == "" {
			line = err.Error()
		}
		closed <- strings.TrimSpace(line)
	}()
	if _, err := io.WriteString(conn, head); err != nil {
		return time.Since(t0), true, "write: " + err.Error()
	}
	for i := 0; time.Since(t0) < limit; i++ {
		select {
		case why := <-closed:
			return time.Since(t0), !strings.Contains(why, "timeout"), why
		case <-time.After(time.Second):
		}
		if _, err := conn.Write([]byte{rest[i%len(rest)]}); err != nil {
			return time.Since(t0), true, "write: " + err.Error()
		}
	}
	return time.Since(t0), false, "still open"
}

// slowHeaders sends a request line and then trickles header bytes: the server's
// ReadHeaderTimeout (10 s) must cut it off.
func slowHeaders(s *server) abuseCheck {
	a := abuseCheck{Name: "slow-loris headers"}
	d, cut, why := trickle(s, "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\n", "X-Slow: abcdefgh", 40*time.Second)
	a.OK = cut
	a.Detail = fmt.Sprintf("cut off: %v after %v (%s)", cut, d.Round(100*time.Millisecond), why)
	return a
}

// slowBody sends whole headers, then trickles the body: -body-timeout must cut it off.
func slowBody(s *server, timeout time.Duration) abuseCheck {
	a := abuseCheck{Name: "slow-loris body"}
	head := "POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n"
	d, cut, why := trickle(s, head, `{"model":"x"     `, timeout+30*time.Second)
	a.OK = cut
	a.Detail = fmt.Sprintf("cut off: %v after %v with -body-timeout %v (%s)", cut, d.Round(100*time.Millisecond), timeout, why)
	return a
}

var soakKinds = []string{"streamed", "whole", "logprobs", "embeddings", "dropped"}

func runSoak(c config, s *server, rep *report) error {
	rep.Duration = c.duration.String()
	t0 := time.Now()
	s.tr.CloseIdleConnections()
	idle, err := s.sample(t0, "idle before")
	if err != nil {
		return err
	}
	rep.Samples = append(rep.Samples, idle)
	end := time.Now().Add(c.duration)
	var done atomic.Int64
	var mu sync.Mutex
	var outs []outcome
	var ttft []time.Duration
	var wg sync.WaitGroup
	for w := 0; w < c.clients; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []outcome
			for i := 0; time.Now().Before(end) && i < 1<<20; i++ {
				o := s.do(soakKinds[(w+i)%len(soakKinds)], c.tokens, w*1000+i, 5*time.Minute)
				if o.class() == "rejected" {
					time.Sleep(time.Second) // as Retry-After asks
				}
				done.Add(1)
				if o.class() == "lost" || len(mine) < 1<<16 {
					mine = append(mine, o)
				}
			}
			mu.Lock()
			outs = append(outs, mine...)
			mu.Unlock()
		}()
	}
	var warm procSample
	tk := time.NewTicker(c.sample)
	for time.Now().Before(end) {
		<-tk.C
		p, err := s.sample(t0, "load")
		if err != nil {
			tk.Stop()
			return err
		}
		p.Requests = done.Load()
		if warm.At == "" && p.Seconds >= c.warmup.Seconds() {
			p.At, warm = "after warm-up", p
		}
		rep.Samples = append(rep.Samples, p)
		fmt.Fprintf(os.Stderr, "loadtest: %5.0fs rss %.1f MiB, %d goroutines, %d threads, %d fds, %d requests\n", p.Seconds, p.RSSMiB, p.Goroutines, p.Threads, p.FDs, p.Requests)
	}
	tk.Stop()
	last, err := s.sample(t0, "end of load")
	if err != nil {
		return err
	}
	last.Requests = done.Load()
	rep.Samples = append(rep.Samples, last)
	wg.Wait() // each client finishes its last request (bounded by its timeout)
	rep.Elapsed = time.Since(t0).Seconds()
	ttft = rep.tally(outs)
	rep.TTFTp50ms, rep.TTFTp99ms = percentile(ttft, 0.5), percentile(ttft, 0.99)
	after, err := s.settle(t0, idle, "idle after")
	if err != nil {
		return err
	}
	rep.Samples = append(rep.Samples, after)
	rep.checkIdle(idle, after)
	if warm.At == "" {
		rep.Checks = append(rep.Checks, fmt.Sprintf("no sample after the warm-up of %v: make -duration longer", c.warmup))
	} else if growth := last.RSSMiB/warm.RSSMiB - 1; growth > c.rssGrowth {
		rep.Checks = append(rep.Checks, fmt.Sprintf("RSS grew %.0f%% (%.1f to %.1f MiB) after warm-up, more than %.0f%%",
			100*growth, warm.RSSMiB, last.RSSMiB, 100*c.rssGrowth))
	}
	if rep.Lost > 0 {
		rep.Checks = append(rep.Checks, fmt.Sprintf("%d requests lost", rep.Lost))
	}
	return nil
}

func (rep *report) print(w io.Writer) {
	fmt.Fprintf(w, "kernelrt serve %s test: synthetic %s %s, -parallel %d -queue %d, %d clients, %d tokens each",
		rep.Mode, rep.Shape, rep.Recipe, rep.Parallel, rep.Queue, rep.Clients, rep.Tokens)
	if rep.Duration != "" {
		fmt.Fprintf(w, ", %s", rep.Duration)
	}
	fmt.Fprintf(w, "\n\nserved %d, 429 with Retry-After %d, dropped by the client %d, lost %d (in %.1f s)\n",
		rep.Served, rep.Rejected, rep.Dropped, rep.Lost, rep.Elapsed)
	if len(rep.ByKind) > 0 && rep.Mode == "soak" {
		var ks []string
		for k, n := range rep.ByKind {
			ks = append(ks, fmt.Sprintf("%s %d", k, n))
		}
		slices.Sort(ks)
		fmt.Fprintf(w, "served by kind: %s\n", strings.Join(ks, ", "))
	}
	fmt.Fprintf(w, "TTFT of streams (client side): p50 %.0f ms, p99 %.0f ms\n", rep.TTFTp50ms, rep.TTFTp99ms)
	for _, why := range rep.LostWhy {
		fmt.Fprintf(w, "  lost: %s\n", why)
	}
	fmt.Fprintf(w, "\n%-16s %8s %9s %10s %8s %5s %8s %7s %9s\n", "sample", "t (s)", "RSS MiB", "goroutines", "threads", "fds", "running", "queued", "requests")
	for _, p := range rep.Samples {
		fmt.Fprintf(w, "%-16s %8.0f %9.1f %10d %8d %5d %8.0f %7.0f %9d\n", p.At, p.Seconds, p.RSSMiB, p.Goroutines, p.Threads, p.FDs, p.Running, p.Queued, p.Requests)
	}
	if len(rep.Abuse) > 0 {
		fmt.Fprintln(w)
		for _, a := range rep.Abuse {
			ok := "ok  "
			if !a.OK {
				ok = "FAIL"
			}
			fmt.Fprintf(w, "%s %-20s %s\n", ok, a.Name, a.Detail)
		}
	}
	for _, c := range rep.Checks {
		fmt.Fprintf(w, "FAIL %s\n", c)
	}
}

func (rep *report) writeJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	b = append(b, '\n')
	if path == "-" {
		_, err = os.Stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}
