package main

import (
	"bufio"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/serve"
)

// `kernelrt bench -serve`: the HTTP server under concurrent streams. One load generator
// drives kernelrt's server and, with -llama-server, llama.cpp's on the same file with the
// same requests: c streams at once, each a streamed /v1/completions of the same short
// prompt and exactly n tokens (ignore_eos), greedy. It reports the aggregate tokens/s (all
// generated tokens over the round's wall time, median of the repetitions), its ratio to one
// stream, and the time to first token and the gaps between tokens as each client saw them
// (percentiles over every request of every repetition).

// serveBenchOptions are the settings of a serve benchmark.
type serveBenchOptions struct {
	model   string
	threads int
	streams []int
	n, reps int
	prompt  string
	llama   string // llama-server binary, or ""
	kv      orchestrator.KVType
}

// serveBenchRow is one server at one concurrency.
type serveBenchRow struct {
	Server      string    `json:"server"`
	Streams     int       `json:"streams"`
	TokS        float64   `json:"tok_s"` // median over repetitions
	TokSSamples []float64 `json:"tok_s_samples"`
	Speedup     float64   `json:"speedup_vs_1_stream"`
	TTFTp50     float64   `json:"ttft_p50_ms"`
	TTFTp99     float64   `json:"ttft_p99_ms"`
	ITLp50      float64   `json:"itl_p50_ms"`
	ITLp99      float64   `json:"itl_p99_ms"`
	Tokens      int       `json:"tokens_per_stream"`
	Chunks      int       `json:"token_chunks"` // all repetitions; fewer than tokens when a client fell behind
}

type serveBenchResult struct {
	Model   string          `json:"model"`
	Threads int             `json:"threads"`
	Prompt  string          `json:"prompt"`
	N       int             `json:"tokens_per_stream"`
	Reps    int             `json:"repetitions"`
	Rows    []serveBenchRow `json:"rows"`
	Notes   []string        `json:"notes"`
}

// parseStreams parses "1,2,4,8,16".
func parseStreams(s string) ([]int, error) {
	var out []int
	for _, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < 1 || v > 1024 {
			return nil, usagef("-streams: %q is not a stream count (1..1024)", p)
		}
		out = append(out, v)
	}
	return out, nil
}

// writeSyntheticQwen writes the synthetic Qwen2-0.5B Q8_0 file (as `kernelrt synth`
// does) into dir, for -serve without -model.
func writeSyntheticQwen(dir string) (string, error) {
	b := gguf.NewBuilder()
	if err := orchestrator.SyntheticGGUF(b, synthShapes["qwen2-0.5b"](), orchestrator.RecipeQ8_0(), 1); err != nil {
		return "", err
	}
	p := filepath.Join(dir, "qwen2-0.5b-q8_0.gguf")
	f, err := os.Create(p)
	if err != nil {
		return "", err
	}
	if _, err := b.WriteTo(f); err != nil {
		f.Close()
		return "", err
	}
	return p, f.Close()
}

// benchServe runs the benchmark against kernelrt's server, then llama-server's.
func benchServe(o serveBenchOptions, log io.Writer) (*serveBenchResult, error) {
	if o.model == "" {
		dir, err := os.MkdirTemp("", "kernelrt-bench-serve")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(dir)
		if o.model, err = writeSyntheticQwen(dir); err != nil {
			return nil, err
		}
		fmt.Fprintf(log, "wrote the synthetic Qwen2-0.5B Q8_0 model to %s\n", o.model)
	}
	maxStreams := slices.Max(o.streams)
	ctx := 256 // per sequence: the prompt and n tokens, rounded up
	for ctx < o.n+256 {
		ctx *= 2
	}
	res := &serveBenchResult{Model: o.model, Prompt: o.prompt, N: o.n, Reps: o.reps}
	e, err := serve.OpenEngine(o.model, serve.OpenOptions{
		Model: generate.OpenOptions{Runtime: kernelrt.Options{Threads: o.threads},
			Load: orchestrator.LoadOptions{MaxCtx: ctx, KV: o.kv, Slots: maxStreams, MaxBatch: max(128, maxStreams),
				File: arena.FileOptions{WillNeed: true},
				// The KV cache's pages are touched at load, not by the first step that reaches them.
				Build: orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}}}},
	})
	if err != nil {
		return nil, err
	}
	rt := e.Ops().(*kernelrt.Runtime)
	res.Threads = rt.Threads()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.Close()
		return nil, err
	}
	srv := &http.Server{Handler: serve.New(e, serve.Options{})}
	go srv.Serve(ln)
	fmt.Fprintf(log, "kernelrt: %s, %d threads (%s), %d slots of %d tokens, kv %s\n", o.model, rt.Threads(), rt.KernelsSummary(), maxStreams, ctx, o.kv)
	rows, err := runLoad("kernelrt", "http://"+ln.Addr().String(), o, log)
	srv.Close()
	e.Close()
	if err != nil {
		return nil, err
	}
	res.Rows = append(res.Rows, rows...)
	res.Notes = append(res.Notes, "kernelrt: in-process server (package serve) on loopback, -parallel "+strconv.Itoa(maxStreams))
	if o.llama != "" {
		rows, note, err := runLlamaServer(o, maxStreams, ctx, res.Threads, log)
		if err != nil {
			res.Notes = append(res.Notes, "llama-server: "+err.Error())
			fmt.Fprintf(log, "llama-server: %v\n", err)
		} else {
			res.Rows = append(res.Rows, rows...)
			res.Notes = append(res.Notes, note)
		}
	}
	return res, nil
}

// runLlamaServer starts llama-server on the model with maxStreams slots of ctx tokens each
// and runs the same load against it.
func runLlamaServer(o serveBenchOptions, maxStreams, ctx, threads int, log io.Writer) ([]serveBenchRow, string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // a free port, released for the server
	if err != nil {
		return nil, "", err
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	kv := "f32"
	if o.kv == orchestrator.KVF16 {
		kv = "f16"
	}
	args := []string{"-m", o.model, "--host", "127.0.0.1", "--port", strconv.Itoa(port), "-np", strconv.Itoa(maxStreams),
		"-c", strconv.Itoa(ctx * maxStreams), "--cont-batching", "-t", strconv.Itoa(threads), "-tb", strconv.Itoa(threads),
		"-ctk", kv, "-ctv", kv}
	cmd := exec.Command(o.llama, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return nil, "", err
	}
	defer func() {
		cmd.Process.Kill()
		cmd.Wait()
	}()
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	ready := false
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cmd.ProcessState != nil {
			break
		}
		resp, err := http.Get(url + "/health")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				ready = true
				break
			}
		}
	}
	if !ready {
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		return nil, "", fmt.Errorf("did not become ready: %s", strings.Join(lines[max(0, len(lines)-5):], " | "))
	}
	fmt.Fprintf(log, "llama-server: %s %s\n", o.llama, strings.Join(args, " "))
	rows, err := runLoad("llama-server", url, o, log)
	return rows, "llama-server: " + filepath.Base(o.llama) + " " + strings.Join(args, " "), err
}

// streamTiming is what one client saw of one streamed request.
type streamTiming struct {
	ttft   time.Duration   // to the first token's chunk
	gaps   []time.Duration // between consecutive token chunks
	tokens int             // token chunks
	length bool            // the stream ended with finish_reason "length": all n tokens
	end    time.Time
}

// oneStream sends one streamed completion and times its token chunks. kernelrt's server
// opens a stream with a chunk of no text before the first token; then both send a chunk
// per token (possibly of no text), kernelrt's joining the tokens a client has not yet read
// into one. Chunks with a finish_reason end the stream and
// carry no token.
func oneStream(client *http.Client, server, url string, o serveBenchOptions) (streamTiming, error) {
	body, _ := json.Marshal(map[string]any{"model": "bench", "prompt": o.prompt, "max_tokens": o.n, "temperature": 0,
		"ignore_eos": true, "stream": true})
	t0 := time.Now()
	resp, err := client.Post(url+"/v1/completions", "application/json", strings.NewReader(string(body)))
	if err != nil {
		return streamTiming{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return streamTiming{}, fmt.Errorf("%s: %d %s", server, resp.StatusCode, b)
	}
	var st streamTiming
	var last time.Time
	first := true
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		d, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok {
			continue
		}
		now := time.Now()
		if d == "[DONE]" {
			break
		}
		var c struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(d), &c); err != nil {
			return st, fmt.Errorf("%s: chunk %q: %v", server, d, err)
		}
		isFirst := first
		first = false
		if len(c.Choices) == 0 || isFirst && server == "kernelrt" {
			continue
		}
		if fr := c.Choices[0].FinishReason; fr != nil {
			st.length = *fr == "length"
			continue
		}
		if st.tokens == 0 {
			st.ttft = now.Sub(t0)
		} else {
			st.gaps = append(st.gaps, now.Sub(last))
		}
		last = now
		st.tokens++
	}
	st.end = time.Now()
	return st, sc.Err()
}

// runLoad measures every concurrency of o.streams, o.reps times each, after a warm-up.
func runLoad(server, url string, o serveBenchOptions, log io.Writer) ([]serveBenchRow, error) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1024, DisableCompression: true}}
	defer client.CloseIdleConnections()
	if _, err := oneStream(client, server, url, o); err != nil { // warm-up: pages in the weights
		return nil, err
	}
	var rows []serveBenchRow
	for _, c := range o.streams {
		row := serveBenchRow{Server: server, Streams: c, Tokens: o.n}
		var ttfts, gaps []float64
		for r := 0; r < o.reps; r++ {
			var wg sync.WaitGroup
			timings := make([]streamTiming, c)
			errs := make([]error, c)
			start := time.Now()
			for i := range c {
				wg.Add(1)
				go func() {
					defer wg.Done()
					timings[i], errs[i] = oneStream(client, server, url, o)
				}()
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				return nil, err
			}
			tokens, end := 0, start
			for _, t := range timings {
				tokens += t.tokens
				if t.end.After(end) {
					end = t.end
				}
				ttfts = append(ttfts, float64(t.ttft)/1e6)
				for _, g := range t.gaps {
					gaps = append(gaps, float64(g)/1e6)
				}
			}
			for i, t := range timings {
				if !t.length || t.tokens == 0 || t.tokens > o.n {
					return nil, fmt.Errorf("%s: stream %d of %d: %d token chunks, finish_reason length %v: want %d tokens", server, i, c, t.tokens, t.length, o.n)
				}
			}
			row.Chunks += tokens
			tokens = c * o.n // ignore_eos and finish_reason "length": every stream generated n
			tps := float64(tokens) / end.Sub(start).Seconds()
			row.TokSSamples = append(row.TokSSamples, tps)
			fmt.Fprintf(log, "%s: %d streams, run %d/%d: %.1f tok/s\n", server, c, r+1, o.reps, tps)
		}
		if row.Chunks < o.reps*c*o.n {
			fmt.Fprintf(log, "%s: %d streams: %d token chunks for %d tokens (a client fell behind and got tokens joined: its gaps span several)\n",
				server, c, row.Chunks, o.reps*c*o.n)
		}
		row.TokS = median(row.TokSSamples)
		row.TTFTp50, row.TTFTp99 = percentile(ttfts, 50), percentile(ttfts, 99)
		row.ITLp50, row.ITLp99 = percentile(gaps, 50), percentile(gaps, 99)
		rows = append(rows, row)
	}
	for i := range rows {
		rows[i].Speedup = rows[i].TokS / rows[0].TokS
	}
	return rows, nil
}

func median(xs []float64) float64 { return percentile(xs, 50) }

// percentile is the nearest-rank percentile p of xs (0 for none).
func percentile(xs []float64, p float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.5) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func (r *serveBenchResult) writeText(w io.Writer) {
	fmt.Fprintf(w, "model:   %s\n", r.Model)
	fmt.Fprintf(w, "load:    streamed /v1/completions, prompt %q, %d tokens each (ignore_eos, greedy), %d repetitions; %d threads\n\n",
		r.Prompt, r.N, r.Reps, r.Threads)
	byServer := map[string]map[int]serveBenchRow{}
	var servers []string
	for _, row := range r.Rows {
		if byServer[row.Server] == nil {
			byServer[row.Server] = map[int]serveBenchRow{}
			servers = append(servers, row.Server)
		}
		byServer[row.Server][row.Streams] = row
	}
	fmt.Fprintf(w, "| %-12s | %7s | %9s | %7s | %9s | %9s | %8s | %8s |", "server", "streams", "tok/s", "speedup", "TTFT p50", "TTFT p99", "ITL p50", "ITL p99")
	if len(servers) > 1 {
		fmt.Fprintf(w, " %s |", "tok/s vs llama-server")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s | %s | %s |", strings.Repeat("-", 12), "-------", "---------", "-------", "---------", "---------", "--------", "--------")
	if len(servers) > 1 {
		fmt.Fprintf(w, " %s |", strings.Repeat("-", 21))
	}
	fmt.Fprintln(w)
	for _, row := range r.Rows {
		fmt.Fprintf(w, "| %-12s | %7d | %9.1f | %6.2fx | %6.0f ms | %6.0f ms | %5.1f ms | %5.1f ms |", row.Server, row.Streams, row.TokS, row.Speedup,
			row.TTFTp50, row.TTFTp99, row.ITLp50, row.ITLp99)
		if len(servers) > 1 {
			if l, ok := byServer["llama-server"][row.Streams]; ok && row.Server == "kernelrt" {
				fmt.Fprintf(w, " %20.2fx |", row.TokS/l.TokS)
			} else {
				fmt.Fprintf(w, " %21s |", "")
			}
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w)
	for _, n := range r.Notes {
		fmt.Fprintln(w, n)
	}
	fmt.Fprintln(w, "tok/s: all streams' tokens over the round's wall time (median of repetitions); speedup: over 1 stream;")
	fmt.Fprintln(w, "TTFT: request sent to first token chunk; ITL: gap between token chunks, as the client saw them (all repetitions).")
}

// cmdBenchServe is `kernelrt bench -serve`.
func cmdBenchServe(model string, threads int, kv orchestrator.KVType, streams string, n, reps int, prompt, llama, jsonOut string, stdout, stderr io.Writer) error {
	ss, err := parseStreams(streams)
	if err != nil {
		return err
	}
	if n < 2 || reps < 1 {
		return usagef("-n must be at least 2 and -r at least 1 with -serve (got %d, %d)", n, reps)
	}
	if model != "" {
		if err := checkModelFile(model); err != nil {
			return err
		}
	}
	if llama != "" {
		if _, err := exec.LookPath(llama); err != nil {
			return fmt.Errorf("-llama-server %s: %w", llama, err)
		}
	}
	res, err := benchServe(serveBenchOptions{model: model, threads: threads, streams: ss, n: n, reps: reps, prompt: prompt, llama: llama, kv: kv}, stderr)
	if err != nil {
		return err
	}
	res.writeText(stdout)
	if jsonOut != "" {
		return writeJSONFile(jsonOut, res)
	}
	return nil
}
