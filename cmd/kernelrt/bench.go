package main

import (
	"cmp"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/bench/suite"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/threadpool"
)

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "[-model FILE] [-depth N,...] [-threads N] [-kv f16|f32|q8_0[,...]] [-pp 128[,...]] [-tg 64] [-r 3] [-json OUT.json] [-quick] [-suite]\n"+
		"       kernelrt bench -serve [-model FILE] [-streams 1,2,4,8,16] [-n 64] [-r 3] [-llama-server PATH] [-threads N] [-json OUT.json]", stderr)
	model := fs.String("model", "", "GGUF model `FILE`; without it (and without -depth), the synthetic Qwen2-0.5B suite of `make bench` runs")
	depth := fs.String("depth", "", "decode tokens/s after prompts of these lengths (`N,N,...`, llama-bench's -d), per KV type,\n"+
		"against bandwidth / (weight + KV bytes per token), and prefill tokens/s at -pp; the model is -model or,\n"+
		"without it, the synthetic Qwen2-0.5B Q8_0 one")
	threads := fs.Int("threads", 0, "worker threads including the caller (0 = one per physical core)")
	kv := fs.String("kv", "", "KV cache type(s) with -model or -depth: f16 (the default), f32, q8_0; -depth takes a list (default all three)")
	pp := fs.String("pp", "", "prompt tokens of the prefill test (llama-bench pp; default 128); -depth takes a list (default 512,2048,8192)")
	tg := fs.Int("tg", 0, "tokens of each decode test (default 64 from an empty cache, llama-bench tg64; with -depth 32)")
	reps := fs.Int("r", 3, "repetitions of each test with -model or -depth (mean and standard deviation, or the median, are reported)")
	jsonOut := fs.String("json", "", "also write the results as JSON to `FILE`")
	quick := fs.Bool("quick", false, "smoke run: one repetition, a smaller bandwidth buffer (and the suite's quick mode)")
	full := fs.Bool("suite", false, "with -model: run the whole benchmark suite with the model in its whole-model section")
	streamMB := fs.Int("stream-mb", 0, "bandwidth buffer in MiB with -model or -depth (0 = 1024, -depth 512, quick 256)")
	serveMode := fs.Bool("serve", false, "benchmark the HTTP server (package serve) under concurrent streams; without -model, on the synthetic Qwen2-0.5B Q8_0")
	streams := fs.String("streams", "1,2,4,8,16", "with -serve: the concurrent stream counts to measure")
	genN := fs.Int("n", 64, "with -serve: tokens each stream generates")
	prompt := fs.String("prompt", "The quick brown fox jumps over the lazy dog. Once upon a time", "with -serve: the prompt of every stream")
	llama := fs.String("llama-server", "", "with -serve: also run llama.cpp's llama-server `binary` on the same file with the same load")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *threads < 0 {
		return usagef("-threads must be >= 0, got %d", *threads)
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	for _, name := range []string{"streams", "n", "prompt", "llama-server"} {
		if set[name] && !*serveMode {
			return usagef("-%s applies to -serve only", name)
		}
	}
	if *serveMode {
		for _, name := range []string{"pp", "tg", "suite", "stream-mb", "quick", "depth"} {
			if set[name] {
				return usagef("-%s does not apply to -serve", name)
			}
		}
		kvt, err := orchestrator.ParseKVType(*kv)
		if err != nil {
			return usagef("-kv %q: want f16, f32 or q8_0", *kv)
		}
		return cmdBenchServe(*model, *threads, kvt, *streams, *genN, *reps, *prompt, *llama, *jsonOut, stdout, stderr)
	}
	if *depth != "" && *full {
		return usagef("-depth does not apply to -suite (the suite measures depth with its own settings)")
	}
	if (*model == "" && *depth == "") || *full {
		for _, name := range []string{"kv", "pp", "tg", "r", "stream-mb"} {
			if set[name] {
				if *model == "" {
					return usagef("-%s applies to -model and -depth benchmarks only", name)
				}
				return usagef("-%s does not apply to -suite (the suite has its own settings)", name)
			}
		}
		opts := suite.Options{Quick: *quick, Threads: *threads}
		if *model != "" {
			path := *model
			opts.Model = func(build orchestrator.BuildOptions) (*orchestrator.Model, string, error) {
				m, err := orchestrator.LoadGGUF(path, orchestrator.LoadOptions{Build: build,
					File: arena.FileOptions{WillNeed: true}})
				return m, path, err
			}
		}
		return runSuite(opts, *jsonOut, stdout, stderr)
	}
	var kvs []orchestrator.KVType
	if *kv != "" {
		for _, name := range strings.Split(*kv, ",") {
			t, err := orchestrator.ParseKVType(strings.TrimSpace(name))
			if err != nil {
				return usagef("-kv %q: want f16, f32 or q8_0", name)
			}
			kvs = append(kvs, t)
		}
	}
	var pps []int
	if *pp != "" {
		var err error
		if pps, err = parseInts("-pp", *pp, 1); err != nil {
			return err
		}
	}
	if *tg < 0 || *reps <= 0 || (set["tg"] && *tg == 0) {
		return usagef("-pp, -tg and -r must be positive (got %s, %d, %d)", *pp, *tg, *reps)
	}
	if *streamMB < 0 {
		return usagef("-stream-mb must be >= 0, got %d", *streamMB)
	}
	if *depth != "" {
		depths, err := parseInts("-depth", *depth, 0)
		if err != nil {
			return err
		}
		return benchDepth(depthFlags{model: *model, threads: *threads, kvs: kvs, depths: depths, pps: pps, tg: *tg,
			reps: *reps, quick: *quick, streamMB: *streamMB}, *jsonOut, stdout, stderr)
	}
	if len(kvs) > 1 || len(pps) > 1 {
		return usagef("-kv and -pp take one value without -depth")
	}
	bo := benchOptions{path: *model, threads: *threads, pp: 128, tg: 64, reps: *reps, streamMB: *streamMB}
	if len(kvs) == 1 {
		bo.kv = kvs[0]
	}
	if len(pps) == 1 {
		bo.pp = pps[0]
	}
	if *tg > 0 {
		bo.tg = *tg
	}
	if *quick {
		bo.reps = 1
		if bo.streamMB == 0 {
			bo.streamMB = 256
		}
	}
	if bo.streamMB == 0 {
		bo.streamMB = 1024
	}
	res, err := benchModel(bo, stderr)
	if err != nil {
		return err
	}
	res.writeText(stdout)
	if *jsonOut != "" {
		return writeJSONFile(*jsonOut, res)
	}
	return nil
}

// parseInts parses a comma-separated list of integers >= least for flag name.
func parseInts(name, s string, least int) ([]int, error) {
	var out []int
	for i, p := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil || v < least {
			return nil, usagef("%s: item %d (%q) must be an integer >= %d", name, i+1, p, least)
		}
		out = append(out, v)
	}
	return out, nil
}

// depthFlags are the settings of `kernelrt bench -depth`.
type depthFlags struct {
	model       string
	threads     int
	kvs         []orchestrator.KVType
	depths, pps []int
	tg, reps    int
	quick       bool
	streamMB    int
}

// benchDepth runs suite.MeasureDepth on the -model file (or the synthetic Qwen2-0.5B Q8_0
// model) with one model per KV cache type.
func benchDepth(f depthFlags, jsonOut string, stdout, stderr io.Writer) error {
	o := suite.DepthOptions{KV: f.kvs, Depths: f.depths, Prefill: f.pps, DecodeTokens: f.tg, Repeats: f.reps,
		StreamBytes: f.streamMB << 20}
	if f.quick {
		o.Repeats = 1
		if f.streamMB == 0 {
			o.StreamBytes = 256 << 20
		}
	}
	var shape orchestrator.Config
	open := func(kv orchestrator.KVType, maxCtx, batch int) (*orchestrator.Model, error) {
		if f.model == "" {
			c := orchestrator.Qwen2_0_5B()
			c.KV, c.MaxCtx, c.MaxBatch = kv, maxCtx, batch
			fmt.Fprintf(stderr, "building the synthetic Qwen2-0.5B q8_0 model, kv %s, %d positions\n", kv, maxCtx)
			m, err := orchestrator.NewSynthetic(c, orchestrator.RecipeQ8_0(), 1, orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}})
			if err == nil {
				shape = m.Cfg
			}
			return m, err
		}
		fmt.Fprintf(stderr, "loading %s, kv %s, %d positions\n", f.model, kv, maxCtx)
		m, err := orchestrator.LoadGGUF(f.model, orchestrator.LoadOptions{KV: kv, MaxCtx: maxCtx, MaxBatch: batch,
			File: arena.FileOptions{WillNeed: true}, Build: orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}}})
		if err == nil {
			shape = m.Cfg
		}
		return m, err
	}
	// The runtime is sized for the shape; load it once to learn it.
	probe, err := open(orchestrator.KVF16, 16, 16)
	if err != nil {
		return err
	}
	rt, err := newRuntime(probe, f.threads)
	probe.Close()
	if err != nil {
		return err
	}
	defer rt.Close()
	d, err := suite.MeasureDepth(open, rt, o, stderr)
	if err != nil {
		return err
	}
	if f.model != "" {
		d.Model = f.model + " (" + d.Model + ")"
	}
	fmt.Fprintf(stdout, "shape: %d layers, hidden %d, heads %d/%d x %d\n", shape.Layers, shape.Hidden, shape.Heads, shape.KVHeads, shape.HeadDim)
	d.WriteText(stdout)
	if jsonOut != "" {
		return writeJSONFile(jsonOut, d)
	}
	return nil
}

// runSuite runs bench/suite (the synthetic benchmark, or the whole suite on a hook model).
func runSuite(opts suite.Options, jsonOut string, stdout, stderr io.Writer) error {
	rep, err := suite.Run(opts, stderr)
	if rep != nil {
		if werr := rep.WriteText(stdout); werr != nil {
			err = errors.Join(err, werr)
		}
		if jsonOut != "" {
			f, ferr := os.Create(jsonOut)
			if ferr == nil {
				ferr = rep.WriteJSON(f)
				if cerr := f.Close(); ferr == nil {
					ferr = cerr
				}
			}
			err = errors.Join(err, ferr)
		}
	}
	return err
}

func writeJSONFile(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

type benchOptions struct {
	path         string
	threads      int
	kv           orchestrator.KVType
	pp, tg, reps int
	streamMB     int
}

// benchTest is one llama-bench row.
type benchTest struct {
	Test      string    `json:"test"` // "pp128", "tg64"
	Tokens    int       `json:"tokens"`
	TokS      float64   `json:"tok_s"` // mean
	StdDev    float64   `json:"tok_s_stddev"`
	Samples   []float64 `json:"tok_s_samples"`
	LimitTokS float64   `json:"bandwidth_limit_tok_s"` // streaming bandwidth / bytes read per token
	// PctLimit is the mean over repetitions of each one's tokens/s against the limit of the
	// streaming read measured just before it (the machine's bandwidth drifts between them).
	PctLimit float64 `json:"pct_of_limit"`
}

// benchResult is what `kernelrt bench -model` reports.
type benchResult struct {
	Model         string  `json:"model"`
	FileBytes     int64   `json:"file_bytes"`
	Recipe        string  `json:"recipe"`
	Shape         string  `json:"shape"`
	Params        int64   `json:"params"`
	WeightBytes   int     `json:"weight_bytes_per_token"`
	LoadSeconds   float64 `json:"load_seconds"`
	Threads       int     `json:"threads"`
	Kernels       string  `json:"kernels"`
	KV            string  `json:"kv"`
	BandwidthGBs  float64 `json:"bandwidth_gb_s"` // mean of the per-repetition streaming reads, all threads
	BandwidthNote string  `json:"bandwidth_note"`
	// BandwidthSamples are the streaming reads measured before each repetition (GB/s).
	BandwidthSamples []float64   `json:"bandwidth_samples_gb_s"`
	Tests            []benchTest `json:"tests"`
}

// streamTask reads a buffer once, split over the pool's threads.
type streamTask struct {
	buf  []float32
	sink [64 * 16]float32
}

func (t *streamTask) Run(ith, nth int) {
	n := len(t.buf)
	lo, hi := (n*ith/nth)&^15, (n*(ith+1)/nth)&^15
	if ith == nth-1 {
		hi = n
	}
	t.sink[(ith%64)*16], _ = kernelrt.StreamRead(t.buf[lo:hi])
}

// streamer measures the streaming-read bandwidth: a prefaulted buffer read by a pool of its
// own, pinned threads.
type streamer struct {
	pool *threadpool.Pool
	a    *arena.Arena
	task *streamTask
}

func newStreamer(threads, mb int) (*streamer, error) {
	pool, err := threadpool.New(threadpool.Options{Threads: threads})
	if err != nil {
		return nil, err
	}
	a, err := arena.New(mb<<20, arena.Options{Prefault: true})
	if err != nil {
		pool.Close()
		return nil, err
	}
	buf, err := arena.Alloc[float32](a, mb<<18)
	if err != nil {
		a.Close()
		pool.Close()
		return nil, err
	}
	for i := 0; i < len(buf); i += 1024 {
		buf[i] = 1
	}
	return &streamer{pool: pool, a: a, task: &streamTask{buf: buf}}, nil
}

func (s *streamer) Close() {
	s.a.Close()
	s.pool.Close()
}

// gbs is the median GB/s of passes reads after a warm-up.
func (s *streamer) gbs(passes int) float64 {
	var gbs []float64
	for p := -1; p < passes; p++ {
		t0 := time.Now()
		s.pool.Dispatch(s.task)
		if dt := time.Since(t0); p >= 0 {
			gbs = append(gbs, float64(len(s.task.buf)*4)/float64(dt.Nanoseconds()))
		}
	}
	slices.Sort(gbs)
	return gbs[len(gbs)/2]
}

func meanSD(xs []float64) (float64, float64) {
	m := 0.0
	for _, x := range xs {
		m += x
	}
	m /= float64(len(xs))
	if len(xs) < 2 {
		return m, 0
	}
	v := 0.0
	for _, x := range xs {
		v += (x - m) * (x - m)
	}
	return m, math.Sqrt(v / float64(len(xs)-1))
}

// benchModel loads the model and measures pp and tg as llama-bench does: a warm-up, then
// reps repetitions of a prefill of pp tokens and a decode of tg tokens, each from an empty
// cache.
func benchModel(o benchOptions, log io.Writer) (*benchResult, error) {
	st, err := os.Stat(o.path)
	if err != nil {
		return nil, err
	}
	t0 := time.Now()
	m, err := orchestrator.LoadGGUF(o.path, orchestrator.LoadOptions{MaxCtx: max(o.pp, o.tg), MaxBatch: o.pp, KV: o.kv,
		File: arena.FileOptions{WillNeed: true}, Build: orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}}})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	loadTime := time.Since(t0)
	rt, err := newRuntime(m, o.threads)
	if err != nil {
		return nil, err
	}
	defer rt.Close()
	unpin, _ := rt.PinCaller() // best effort
	defer unpin()
	c := m.Cfg
	res := &benchResult{Model: o.path, FileBytes: st.Size(), Recipe: m.Recipe.Name, WeightBytes: m.WeightBytes(),
		LoadSeconds: loadTime.Seconds(), Threads: rt.Threads(), Kernels: rt.KernelsSummary(), KV: m.KV().String(),
		Shape:  fmt.Sprintf("%s %d layers, hidden %d, ffn %d, heads %d/%d, vocab %d", cmp.Or(c.Arch, "qwen2"), c.Layers, c.Hidden, c.Intermediate, c.Heads, c.KVHeads, c.Vocab),
		Params: params(m)}
	fmt.Fprintf(log, "loaded %s in %v: %s\n", o.path, loadTime.Round(time.Millisecond), res.Recipe)
	st2, err := newStreamer(rt.Threads(), o.streamMB)
	if err != nil {
		return nil, err
	}
	defer st2.Close()
	res.BandwidthNote = fmt.Sprintf("streaming read of %d MiB over %d threads, median of 5 passes before each repetition, mean over repetitions", o.streamMB, rt.Threads())

	r := rand.New(rand.NewPCG(1, 17))
	ids := make([]int32, max(o.pp, o.tg))
	for i := range ids {
		ids[i] = int32(r.IntN(c.Vocab))
	}
	decode := func(n int) (float64, error) {
		m.Reset()
		t := time.Now()
		for _, id := range ids[:n] {
			if _, err := m.Decode(rt, id); err != nil {
				return 0, err
			}
		}
		return float64(n) / time.Since(t).Seconds(), nil
	}
	prefill := func(n int) (float64, error) {
		m.Reset()
		t := time.Now()
		if _, err := m.Prefill(rt, ids[:n]); err != nil {
			return 0, err
		}
		return float64(n) / time.Since(t).Seconds(), nil
	}
	// Warm-up (touches every weight page): a short prompt and a few tokens.
	if _, err := prefill(min(o.pp, 16)); err != nil {
		return nil, err
	}
	if _, err := decode(min(o.tg, 4)); err != nil {
		return nil, err
	}
	// The machine's bandwidth drifts (other tenants, vCPU placement): each repetition is
	// compared with a streaming read measured just before it.
	var ppS, tgS []float64
	wb := float64(res.WeightBytes)
	for i := 0; i < o.reps; i++ {
		bw := st2.gbs(5)
		p, err := prefill(o.pp)
		if err != nil {
			return nil, err
		}
		g, err := decode(o.tg)
		if err != nil {
			return nil, err
		}
		ppS, tgS = append(ppS, p), append(tgS, g)
		res.BandwidthSamples = append(res.BandwidthSamples, bw)
		fmt.Fprintf(log, "run %d/%d: streaming read %.1f GB/s, pp%d %.1f t/s, tg%d %.2f t/s (%.0f%% of its limit)\n", i+1, o.reps, bw, o.pp, p, o.tg, g,
			100*g/(bw*1e9/wb))
	}
	m.Reset()
	res.BandwidthGBs, _ = meanSD(res.BandwidthSamples)
	row := func(name string, n int, s []float64, perTok float64) benchTest {
		mean, sd := meanSD(s)
		pct := 0.0
		for i, v := range s {
			pct += 100 * v / (res.BandwidthSamples[i] * 1e9 / perTok) / float64(len(s))
		}
		return benchTest{Test: fmt.Sprintf("%s%d", name, n), Tokens: n, TokS: mean, StdDev: sd, Samples: s,
			LimitTokS: res.BandwidthGBs * 1e9 / perTok, PctLimit: pct}
	}
	res.Tests = []benchTest{row("pp", o.pp, ppS, wb/float64(o.pp)), row("tg", o.tg, tgS, wb)}
	return res, nil
}

// params counts the model's weights (matrices, embedding, norms and biases).
func params(m *orchestrator.Model) int64 {
	n := int64(m.Embed.Rows * m.Embed.Cols)
	if m.Output != m.Embed {
		n += int64(m.Output.Rows * m.Output.Cols)
	}
	for _, l := range m.Layers {
		for _, mat := range []*orchestrator.Matrix{l.QKV, l.Q, l.K, l.V, l.O, l.GateUp, l.Gate, l.Up, l.Down} {
			if mat != nil {
				n += int64(mat.Rows * mat.Cols)
			}
		}
		n += int64(len(l.AttnNorm) + len(l.FFNNorm) + len(l.QKVBias))
	}
	return n + int64(len(m.OutNorm))
}

func (r *benchResult) writeText(w io.Writer) {
	fmt.Fprintf(w, "model:     %s (%.1f MiB, %.2f B params)\n", r.Model, float64(r.FileBytes)/(1<<20), float64(r.Params)/1e9)
	fmt.Fprintf(w, "shape:     %s\n", r.Shape)
	fmt.Fprintf(w, "weights:   %s; %.1f MiB read per decoded token\n", r.Recipe, float64(r.WeightBytes)/(1<<20))
	fmt.Fprintf(w, "runtime:   %d threads, kernels %s, kv %s; loaded in %.3f s (mapped, not read)\n", r.Threads, r.Kernels, r.KV, r.LoadSeconds)
	fmt.Fprintf(w, "bandwidth: %.1f GB/s (%s)\n\n", r.BandwidthGBs, r.BandwidthNote)
	fmt.Fprintf(w, "| %-7s | %-20s | %-12s | %-10s |\n", "test", "t/s", "limit t/s", "% of limit")
	fmt.Fprintf(w, "| %s | %s | %s | %s |\n", "-------", "--------------------", "------------", "----------")
	for _, t := range r.Tests {
		fmt.Fprintf(w, "| %-7s | %20s | %12.1f | %9.1f%% |\n", t.Test, fmt.Sprintf("%.2f ± %.2f", t.TokS, t.StdDev), t.LimitTokS, t.PctLimit)
	}
	fmt.Fprintf(w, "\nlimit t/s = bandwidth / weight bytes read per token (pp reads the weights once per %d-token batch,\n"+
		"so it is compute-bound far below its limit; tg is bandwidth-bound). %% of limit compares each repetition\n"+
		"with the streaming read just before it (%s GB/s).\n", r.Tests[0].Tokens, fmtSamples(r.BandwidthSamples))
}

// fmtSamples lists GB/s samples as "22.1, 23.0, 21.7".
func fmtSamples(s []float64) string {
	var parts []string
	for _, v := range s {
		parts = append(parts, fmt.Sprintf("%.1f", v))
	}
	return strings.Join(parts, ", ")
}
