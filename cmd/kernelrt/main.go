// Command kernelrt runs Qwen2 GGUF models on kernelrt.
//
//	kernelrt run -model FILE -tokens 1,17,42 [-n 8] [-threads N] [-kv f32|f16] [-logits OUT.json]
//	kernelrt bench [-model FILE] [-threads N] [-kv f32|f16] [-pp 128] [-tg 64] [-r 3] [-json OUT.json]
//	kernelrt synth -out FILE [-recipe q8_0|mixed] [-seed N]
//	kernelrt tokenize -model FILE (-p TEXT | -f FILE) [-no-special] [-no-bos]
//
// run prefills the prompt ids in one batch, then decodes greedily, and prints the generated
// ids; -logits writes every logit that chose a token as JSON. bench measures prefill (pp) and
// decode (tg) tokens/s of a model file as llama-bench does, against the machine's streaming
// bandwidth; without -model it runs the synthetic Qwen2-0.5B suite of `make bench`. synth
// writes the synthetic Qwen2-0.5B as a GGUF file.
//
// Exit status: 0 on success, 2 for a usage error (bad flags or arguments), 1 for any other
// failure (a file that cannot be loaded, a token outside the vocabulary, ...).
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/orchestrator"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

const topUsage = `usage: kernelrt <command> [flags]

commands:
  run     run a prompt through a GGUF model and decode greedily
  bench   measure prefill and decode tokens/s (of a GGUF model with -model)
  synth   write the synthetic Qwen2-0.5B as a GGUF file
  tokenize  print the token ids of a text as one JSON array (like llama-tokenize --ids)

"kernelrt <command> -h" describes a command's flags.
`

// Main runs the command line args (without the program name) and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(args[1:], stdout, stderr)
	case "bench":
		err = cmdBench(args[1:], stdout, stderr)
	case "synth":
		err = cmdSynth(args[1:], stdout, stderr)
	case "tokenize":
		err = cmdTokenize(args[1:], stdout, stderr)
	case "help", "-h", "-help", "--help":
		fmt.Fprint(stdout, topUsage)
		return 0
	default:
		fmt.Fprintf(stderr, "kernelrt: unknown command %q\n\n%s", args[0], topUsage)
		return 2
	}
	var ue *usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "kernelrt %s: %v\n", args[0], err)
		return 2
	}
	fmt.Fprintf(stderr, "kernelrt %s: %v\n", args[0], err)
	return 1
}

// newFlags makes a subcommand's flag set; parse errors are usage errors.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet("kernelrt "+name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: kernelrt %s %s\n\nflags:\n", name, synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parse parses args; a flag error (already printed with the usage) becomes a usage error.
func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return usagef("%v", err)
	}
	if fs.NArg() > 0 {
		return usagef("unexpected arguments %q (flags go before them? every input is a flag)", fs.Args())
	}
	return nil
}

// parseTokens parses "1,17,42" (spaces allowed) into ids.
func parseTokens(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usagef("-tokens is required: comma-separated token ids, e.g. -tokens 1,17,42")
	}
	parts := strings.Split(s, ",")
	ids := make([]int32, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		v, err := strconv.ParseInt(p, 10, 32)
		if err != nil || v < 0 {
			return nil, usagef("-tokens: item %d (%q) is not a token id (a non-negative integer)", i+1, p)
		}
		ids = append(ids, int32(v))
	}
	return ids, nil
}

// newRuntime makes the dispatching Exec for m with threads workers (0 = default).
func newRuntime(m *orchestrator.Model, threads int) (*kernelrt.Runtime, error) {
	c := m.Cfg
	cols := max(c.Hidden, c.Intermediate, c.Heads*c.HeadDim)
	cols = (cols + kernelrt.QK - 1) / kernelrt.QK * kernelrt.QK
	return kernelrt.New(kernelrt.Options{Threads: threads, MaxCols: cols, MaxCtx: c.MaxCtx})
}

// argmax is the index of the largest logit (NaN never wins; the first of equals does).
func argmax(l []float32) int32 {
	best, bi := float32(math.Inf(-1)), 0
	for i, v := range l {
		if v > best {
			best, bi = v, i
		}
	}
	return int32(bi)
}

// ---- run ----

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "-model FILE -tokens 1,17,42 [-n 8] [-threads N] [-kv f32|f16] [-logits OUT.json]", stderr)
	model := fs.String("model", "", "GGUF model `FILE` (qwen2 architecture)")
	tokens := fs.String("tokens", "", "prompt token `ids`, comma-separated, prefilled as one batch")
	n := fs.Int("n", 8, "number of tokens to generate greedily")
	threads := fs.Int("threads", 0, "worker threads including the caller (0 = one per physical core)")
	kv := fs.String("kv", "f32", "KV cache type: f32 or f16 (half the memory)")
	logits := fs.String("logits", "", "write prompt and decode logits as JSON to `OUT.json`")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return usagef("-model is required")
	}
	prompt, err := parseTokens(*tokens)
	if err != nil {
		return err
	}
	if *n < 0 {
		return usagef("-n must be >= 0, got %d", *n)
	}
	if *threads < 0 {
		return usagef("-threads must be >= 0, got %d", *threads)
	}
	kvt, err := orchestrator.ParseKVType(*kv)
	if err != nil {
		return usagef("-kv %q: want f32 or f16", *kv)
	}
	opts := orchestrator.LoadOptions{KV: kvt, MaxCtx: len(prompt) + max(*n-1, 0), File: arena.FileOptions{WillNeed: true}}
	if *logits != "" {
		opts.AllLogits, opts.MaxBatch = true, len(prompt)
	} else {
		opts.MaxBatch = min(len(prompt), 256)
	}
	t0 := time.Now()
	m, err := orchestrator.LoadGGUF(*model, opts)
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
	rt, err := newRuntime(m, *threads)
	if err != nil {
		return err
	}
	defer rt.Close()
	unpin, _ := rt.PinCaller() // best effort
	defer unpin()

	res := runResult{PromptIDs: prompt, DecodeIDs: []int32{}, PrefillLogits: [][]float32{}, DecodeLogits: [][]float32{}}
	keep := *logits != ""
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
	for i := 0; i < *n; i++ {
		id := argmax(last)
		res.DecodeIDs = append(res.DecodeIDs, id)
		if keep {
			res.DecodeLogits = append(res.DecodeLogits, append([]float32(nil), last...))
		}
		if i == *n-1 {
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
	fmt.Fprintf(stderr, "%s: %s; load %v; prefill %d tokens in %v (%.1f t/s)", *model, m.Recipe.Name, loadTime.Round(time.Millisecond),
		len(prompt), prefillTime.Round(time.Microsecond), float64(len(prompt))/prefillTime.Seconds())
	if steps := max(*n-1, 0); steps > 0 {
		fmt.Fprintf(stderr, "; %d decode steps in %v (%.1f t/s)", steps, decodeTime.Round(time.Microsecond), float64(steps)/decodeTime.Seconds())
	}
	fmt.Fprintf(stderr, "; %d threads, kernels %s, kv %s\n", rt.Threads(), rt.KernelsSummary(), m.KV())
	if keep {
		if err := writeLogits(*logits, &res); err != nil {
			return err
		}
	}
	return nil
}

// runResult is the -logits JSON: the prompt, the logits of every prompt position, the
// generated ids and, for each, the logits that chose it (the first are the last prompt
// position's; the others come from decoding the previous id).
type runResult struct {
	PromptIDs     []int32
	PrefillLogits [][]float32
	DecodeIDs     []int32
	DecodeLogits  [][]float32
}

// writeLogits writes res as {"prompt_ids":[..], "prefill_logits":[[..]..], "decode_ids":[..],
// "decode_logits":[[..]..]}. Floats are written in the shortest form that reads back as the
// same float32; a non-finite logit (which JSON cannot hold) is written as null.
func writeLogits(path string, res *runResult) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(f, 1<<20)
	var b []byte
	ids := func(key string, v []int32) {
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":[`...)
		for i, id := range v {
			if i > 0 {
				b = append(b, ',')
			}
			b = strconv.AppendInt(b, int64(id), 10)
		}
		b = append(b, ']')
	}
	rows := func(key string, v [][]float32) error {
		b = append(b, '"')
		b = append(b, key...)
		b = append(b, `":[`...)
		for r, row := range v {
			if r > 0 {
				b = append(b, ',')
			}
			b = append(b, '[')
			for i, x := range row {
				if i > 0 {
					b = append(b, ',')
				}
				if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
					b = append(b, "null"...)
				} else {
					b = strconv.AppendFloat(b, float64(x), 'g', -1, 32)
				}
				if len(b) > 1<<16 {
					if _, err := w.Write(b); err != nil {
						return err
					}
					b = b[:0]
				}
			}
			b = append(b, ']')
		}
		b = append(b, ']')
		return nil
	}
	b = append(b, '{')
	ids("prompt_ids", res.PromptIDs)
	b = append(b, ",\n"...)
	err = rows("prefill_logits", res.PrefillLogits)
	if err == nil {
		b = append(b, ",\n"...)
		ids("decode_ids", res.DecodeIDs)
		b = append(b, ",\n"...)
		err = rows("decode_logits", res.DecodeLogits)
	}
	if err == nil {
		b = append(b, "}\n"...)
		_, err = w.Write(b)
	}
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("-logits %s: %w", path, err)
	}
	return nil
}

// ---- synth ----

func cmdSynth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("synth", "-out FILE [-recipe q8_0|mixed] [-seed N]", stderr)
	out := fs.String("out", "", "write the GGUF file to `FILE`")
	recipe := fs.String("recipe", "q8_0", "weight types: q8_0 (all Q8_0) or mixed (llama.cpp's Q5_0 mix)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	ctx := fs.Int("ctx", 32768, "context_length written to the file")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("-out is required")
	}
	var r orchestrator.Recipe
	switch *recipe {
	case "q8_0":
		r = orchestrator.RecipeQ8_0()
	case "mixed", "mixed-q5_0":
		r = orchestrator.RecipeMixed()
	default:
		return usagef("-recipe %q: want q8_0 or mixed", *recipe)
	}
	if *ctx <= 0 {
		return usagef("-ctx must be positive, got %d", *ctx)
	}
	cfg := orchestrator.Qwen2_0_5B()
	cfg.MaxCtx = *ctx
	b := gguf.NewBuilder()
	if err := orchestrator.SyntheticGGUF(b, cfg, r, *seed); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	t0 := time.Now()
	n, err := b.WriteTo(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(*out)
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: synthetic Qwen2-0.5B %s, %d bytes in %v\n", *out, r.Name, n, time.Since(t0).Round(time.Millisecond))
	return nil
}
