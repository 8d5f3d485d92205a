package main

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/chat"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/sample"
)

// ---- flags shared by run and chat ----

// stopList collects repeated -stop flags.
type stopList []string

func (s *stopList) String() string     { return strings.Join(*s, ",") }
func (s *stopList) Set(v string) error { *s = append(*s, v); return nil }

// genFlags are the model and sampling flags of run and chat.
type genFlags struct {
	model                  *string
	threads, ctx           *int
	kv                     *string
	temp, topP, minP       *float64
	repeat, freq, presence *float64
	topK, lastN            *int
	seed                   *uint64
	stop                   stopList
	system                 *string
	mapWeights             *bool
	fs                     *flag.FlagSet
}

func addGenFlags(fs *flag.FlagSet) *genFlags {
	d := sample.DefaultOptions()
	g := &genFlags{fs: fs}
	g.model = fs.String("model", "", "GGUF model `FILE` (architecture "+strings.Join(orchestrator.Architectures(), ", ")+")")
	g.threads = fs.Int("threads", 0, "worker threads including the caller (0 = one per usable core)")
	g.ctx = fs.Int("ctx", 0, "context length: KV-cache positions (0 = the model's, at most 4096)")
	g.kv = fs.String("kv", "f16", "KV cache type: f16 (llama.cpp's default), f32, or q8_0 (about half of f16)")
	g.temp = fs.Float64("temp", float64(d.Temperature), "sampling temperature; 0 picks the most likely token (greedy)")
	g.topK = fs.Int("top-k", d.TopK, "keep the K most likely tokens (0 = all)")
	g.topP = fs.Float64("top-p", float64(d.TopP), "keep the most likely tokens up to this total probability (1 = all)")
	g.minP = fs.Float64("min-p", float64(d.MinP), "keep tokens at least this fraction as likely as the best (0 = all)")
	g.repeat = fs.Float64("repeat-penalty", float64(d.RepeatPenalty), "penalise tokens seen in the last -repeat-last-n tokens (1 = off)")
	g.lastN = fs.Int("repeat-last-n", d.PenaltyLastN, "how many recent tokens the penalties look at")
	g.freq = fs.Float64("frequency-penalty", 0, "subtract this per occurrence of a recent token")
	g.presence = fs.Float64("presence-penalty", 0, "subtract this once for every recent token")
	g.seed = fs.Uint64("seed", 0, "random seed (default: a random one, printed to stderr)")
	fs.Var(&g.stop, "stop", "stop where this `TEXT` appears (repeatable; never printed)")
	g.system = fs.String("system", "", "system message for -chat and chat")
	g.mapWeights = fs.Bool("map-weights", false, "use the weights in place from the file mapping (loads at once, less memory) instead of copying them into huge-page memory (faster decode)")
	return g
}

// check validates the flags that need no model.
func (g *genFlags) check() error {
	if err := checkThreads(*g.threads); err != nil {
		return err
	}
	if *g.ctx < 0 || *g.ctx > orchestrator.MaxContext {
		return usagef("-ctx must be 0 to %d, got %d", orchestrator.MaxContext, *g.ctx)
	}
	if _, err := orchestrator.ParseKVType(*g.kv); err != nil {
		return usagef("-kv %q: want f16, f32 or q8_0", *g.kv)
	}
	if _, err := g.sampling(); err != nil {
		return usagef("%v", err)
	}
	return checkModelFile(*g.model)
}

// sampling makes the sampler options (the seed: -seed, else a random one).
func (g *genFlags) sampling() (sample.Options, error) {
	o := sample.Options{Temperature: float32(*g.temp), TopK: *g.topK, TopP: float32(*g.topP), MinP: float32(*g.minP),
		RepeatPenalty: float32(*g.repeat), FrequencyPenalty: float32(*g.freq), PresencePenalty: float32(*g.presence),
		PenaltyLastN: *g.lastN, Seed: *g.seed}
	if !isSet(g.fs, "seed") {
		var b [8]byte
		rand.Read(b[:])
		o.Seed = binary.LittleEndian.Uint64(b[:])
	}
	return o, o.Validate(0)
}

// open loads the model, its tokenizer and a Runtime, and says on log what loading did.
func (g *genFlags) open(log io.Writer) (*generate.Generator, *orchestrator.Model, error) {
	kvt, _ := orchestrator.ParseKVType(*g.kv)
	t0 := time.Now()
	gen, err := generate.Open(*g.model, generate.OpenOptions{
		Runtime: kernelrt.Options{Threads: *g.threads},
		Load:    orchestrator.LoadOptions{MaxCtx: *g.ctx, KV: kvt, MaxBatch: 256, File: arena.FileOptions{WillNeed: true}, MapWeights: *g.mapWeights},
	})
	if err != nil {
		return nil, nil, err
	}
	m := gen.Model().(*orchestrator.Model)
	c := m.Cfg
	fmt.Fprintf(log, "loaded %s in %v: %d layers, hidden %d, %d/%d heads, vocab %d, context %d, %s\n",
		*g.model, time.Since(t0).Round(time.Millisecond), c.Layers, c.Hidden, c.Heads, c.KVHeads, c.Vocab, c.MaxCtx, m.Recipe.Name)
	fmt.Fprintf(log, "%s; %s arena (%s pages) for them, the activations and the %s KV cache; %s\n",
		weightsNote(m), mib(int64(m.Arena().Cap())), m.Arena().PageKind(), m.KV(), gen.Ops().(*kernelrt.Runtime).KernelsSummary())
	return gen, m, nil
}

// weightsNote says where m's weight matrices are: used in place from the file mapping, or
// copied into the model's arena (LoadOptions.MapWeights).
func weightsNote(m *orchestrator.Model) string {
	mapped, copied := m.WeightPlacement()
	if mapped == 0 {
		return fmt.Sprintf("copied %s of weights into the arena in decode order", mib(int64(copied)))
	}
	s := fmt.Sprintf("mapped %s of weights read-only (pages become resident as the first tokens touch them)", mib(int64(mapped)))
	if copied > 0 {
		s += fmt.Sprintf(", %s converted into the arena", mib(int64(copied)))
	}
	return s
}

// ---- run ----

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "-model FILE (-p TEXT [-chat] | -tokens 1,17,42) [-n N] [sampling flags] [-threads N] [-kv f16|f32|q8_0] [-ctx N] [-logits OUT.json] [-json-schema FILE | -grammar FILE]", stderr)
	g := addGenFlags(fs)
	prompt := fs.String("p", "", "prompt `TEXT`: its continuation is streamed to stdout")
	asChat := fs.Bool("chat", false, "send -p as a user message through the model's chat template; stream the reply")
	tokens := fs.String("tokens", "", "prompt token `ids`, comma-separated: prints the greedily generated ids (no tokenizer)")
	n := fs.Int("n", -1, "tokens to generate (default 128 with -p, 8 with -tokens)")
	logits := fs.String("logits", "", "with -tokens: write prompt and decode logits as JSON to `OUT.json`")
	gf := addGrammarFlags(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if *g.model == "" {
		return usagef("-model is required")
	}
	textMode := isSet(fs, "p")
	if textMode == isSet(fs, "tokens") {
		return usagef("give the prompt with exactly one of -p TEXT and -tokens IDS")
	}
	if *n == -1 {
		*n = 128
		if !textMode {
			*n = 8
		}
	}
	if *n < 0 || *n > orchestrator.MaxContext {
		return usagef("-n must be 0 to %d (tokens to generate), got %d", orchestrator.MaxContext, *n)
	}
	if textMode && *logits != "" {
		return usagef("-logits needs -tokens")
	}
	if !textMode && *asChat {
		return usagef("-chat needs -p")
	}
	if !textMode && gf.set() {
		return usagef("-json-schema and -grammar need -p")
	}
	gr, err := gf.load()
	if err != nil {
		return err
	}
	if err := g.check(); err != nil {
		return err
	}
	if !textMode {
		ids, err := parseTokens(*tokens)
		if err != nil {
			return err
		}
		return runIDs(g, ids, *n, *logits, stdout, stderr)
	}
	so, _ := g.sampling()
	gen, _, err := g.open(stderr)
	if err != nil {
		return err
	}
	defer gen.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	o := generate.Options{MaxTokens: *n, Stop: g.stop, Sampling: so, Grammar: gr}
	stream := gen.Stream(ctx, *prompt, o)
	if *asChat {
		msgs := []chat.Message{{Role: "user", Content: *prompt}}
		if *g.system != "" {
			msgs = append([]chat.Message{{Role: "system", Content: *g.system}}, msgs...)
		}
		stream = gen.Chat(ctx, msgs, o)
	}
	for piece, err := range stream {
		if err != nil {
			return err
		}
		if _, err := io.WriteString(stdout, piece); err != nil {
			return err
		}
	}
	fmt.Fprintln(stdout)
	writeStats(stderr, gen.Stats(), so)
	return nil
}

// writeStats prints a generation's speeds and why it stopped.
func writeStats(w io.Writer, st generate.Stats, so sample.Options) {
	rate := func(n int, d time.Duration) string {
		if n == 0 || d <= 0 {
			return "-"
		}
		return strconv.FormatFloat(float64(n)/d.Seconds(), 'f', 1, 64)
	}
	fmt.Fprintf(w, "prompt: %d tokens (%d reused from the cache) in %v, %s tok/s; generated %d tokens in %v, %s tok/s; stop: %s; seed %d\n",
		st.PromptTokens, st.ReusedTokens, st.PrefillTime.Round(time.Microsecond), rate(st.PromptTokens-st.ReusedTokens, st.PrefillTime),
		st.GeneratedTokens, st.GenerateTime.Round(time.Microsecond), rate(st.GeneratedTokens, st.GenerateTime), st.Stop, so.Seed)
}

// runIDs prefills ids in one batch, decodes n tokens greedily and prints their ids.
func runIDs(g *genFlags, prompt []int32, n int, logits string, stdout, stderr io.Writer) error {
	kvt, _ := orchestrator.ParseKVType(*g.kv)
	var lf *os.File
	if logits != "" {
		var err error
		if lf, err = createOutput("-logits", logits, *g.model); err != nil {
			return err
		}
		defer lf.Close()
	}
	opts := orchestrator.LoadOptions{KV: kvt, MaxCtx: len(prompt) + max(n-1, 0), File: arena.FileOptions{WillNeed: true}, MapWeights: *g.mapWeights}
	if *g.ctx > 0 {
		opts.MaxCtx = *g.ctx
	}
	if lf != nil {
		opts.AllLogits, opts.MaxBatch = true, len(prompt)
	} else {
		opts.MaxBatch = min(len(prompt), 256)
	}
	t0 := time.Now()
	m, err := orchestrator.LoadGGUF(*g.model, opts)
	if err != nil {
		return err
	}
	defer m.Close()
	loadTime := time.Since(t0)
	for i, id := range prompt {
		if int(id) >= m.Cfg.Vocab {
			return fmt.Errorf("-tokens: id %d (item %d) is outside the vocabulary of %d tokens", id, i+1, m.Cfg.Vocab)
		}
	}
	rt, err := newRuntime(m, *g.threads)
	if err != nil {
		return err
	}
	defer rt.Close()
	unpin, _ := rt.PinCaller() // best effort
	defer unpin()

	res := runResult{PromptIDs: prompt, DecodeIDs: []int32{}, PrefillLogits: [][]float32{}, DecodeLogits: [][]float32{}}
	keep := lf != nil
	V := m.Cfg.Vocab
	t1 := time.Now()
	out, err := m.Prefill(rt, prompt)
	if err != nil {
		return err
	}
	prefillTime := time.Since(t1)
	last := out[len(out)-V:]
	if keep {
		for p := range prompt {
			res.PrefillLogits = append(res.PrefillLogits, append([]float32(nil), out[p*V:(p+1)*V]...))
		}
	}
	t2 := time.Now()
	for i := 0; i < n; i++ {
		id := argmax(last)
		res.DecodeIDs = append(res.DecodeIDs, id)
		if keep {
			res.DecodeLogits = append(res.DecodeLogits, append([]float32(nil), last...))
		}
		if i == n-1 {
			break // the last id needs no logits of its own
		}
		if last, err = m.Decode(rt, id); err != nil {
			return err
		}
	}
	decodeTime := time.Since(t2)
	strs := make([]string, len(res.DecodeIDs))
	for i, id := range res.DecodeIDs {
		strs[i] = strconv.Itoa(int(id))
	}
	fmt.Fprintln(stdout, strings.Join(strs, ","))
	fmt.Fprintf(stderr, "%s: %s; loaded in %v (%s); prefill %d tokens in %v (%.1f t/s)",
		*g.model, m.Recipe.Name, loadTime.Round(time.Millisecond), weightsNote(m),
		len(prompt), prefillTime.Round(time.Microsecond), float64(len(prompt))/prefillTime.Seconds())
	if steps := max(n-1, 0); steps > 0 {
		fmt.Fprintf(stderr, "; %d decode steps in %v (%.1f t/s)", steps, decodeTime.Round(time.Microsecond), float64(steps)/decodeTime.Seconds())
	}
	fmt.Fprintf(stderr, "; %d threads, kernels %s, kv %s\n", rt.Threads(), rt.KernelsSummary(), m.KV())
	if keep {
		if err := writeLogits(lf, &res); err != nil {
			return err
		}
	}
	return nil
}
