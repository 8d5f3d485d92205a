// Command kernelrt runs GGUF language models on kernelrt: text in, text out.
//
//	kernelrt run -model FILE -p TEXT [-chat] [-n 128] [-temp 0.8] [-top-k 40] [-top-p 0.95] [-min-p 0.05]
//	             [-repeat-penalty 1] [-seed S] [-stop S] [-threads N] [-kv f16|f32|q8_0] [-ctx N]
//	kernelrt run -model FILE -tokens 1,17,42 [-n 8] [-logits OUT.json]     (ids in, greedy ids out)
//	kernelrt chat -model FILE [sampling flags]
//	kernelrt tokenize -model FILE (-p TEXT | -f FILE) [-no-special] [-no-bos]
//	kernelrt bench [-model FILE] [-threads N] [-kv f16|f32|q8_0] [-pp 128] [-tg 64] [-r 3] [-json OUT.json]
//	kernelrt bench -depth 0,512,2048,8192 [-model FILE] [-kv f32,f16,q8_0] [-pp 512,2048,8192] [-tg 32]
//	kernelrt serve -model FILE [-addr 127.0.0.1:8080] [-parallel N] [-ctx N] [-queue N] [-threads N] [-kv f16|f32|q8_0] [-drain 30s]
//	kernelrt perplexity -model FILE -f TEXT [-ctx 512] [-chunks N] [-batch N] [-threads N] [-kl-divergence-base OUT] [-json]
//	kernelrt perplexity -model FILE -kl-divergence -kl-divergence-base FILE [-f TEXT] [-json]
//	kernelrt synth -out FILE [-shape tiny|tiny256|qwen2-0.5b|llama-1b|...] [-recipe q8_0|mixed|f16] [-untied] [-seed N] [-ctx N]
//	kernelrt version
//
// run streams the continuation of a prompt (with -chat, the reply to it as a user message,
// through the file's chat template) to stdout and the prompt and generation speeds to
// stderr; with -tokens it takes and prints token ids and decodes greedily, and -logits writes
// every logit that chose a token as JSON. chat is an interactive multi-turn chat: Ctrl-C stops
// the reply being written, Ctrl-D exits. tokenize prints token ids as one JSON array, as
// llama-tokenize --ids does. bench measures prefill (pp) and decode (tg) tokens/s of a model
// file as llama-bench does, against the machine's streaming bandwidth; with -depth, decode
// after long prompts per KV cache type against bandwidth / (weight + KV bytes per token);
// without -model or -depth it runs the synthetic Qwen2-0.5B suite of `make bench`; with -serve
// it measures the HTTP server's aggregate decode tokens/s and latencies at 1 to 16 concurrent
// streams. serve runs an OpenAI-compatible HTTP server (package serve) generating for
// -parallel requests at once in batched steps; SIGTERM drains it. perplexity scores a text
// file as llama-perplexity does (the chunked perplexity, and with -kl-divergence the KL
// divergence of a quantized model from a base run's saved distributions). synth writes a model of random weights
// (with a small byte-level tokenizer) as a GGUF file. version prints the build and the
// kernels this machine runs.
//
// Exit status: 0 on success, 2 for a usage error (bad flags or arguments), 1 for any other
// failure (a file that cannot be loaded, a token outside the vocabulary, ...).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/threadpool"
)

func main() {
	os.Exit(Main(os.Args[1:], os.Stdin, os.Stdout, os.Stderr))
}

// usageError is a mistake in the command line (exit status 2).
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, a ...any) error { return &usageError{fmt.Sprintf(format, a...)} }

const topUsage = `usage: kernelrt <command> [flags]

commands:
  run       generate text from a prompt (or token ids) with a GGUF model
  chat      chat with a GGUF model in the terminal (Ctrl-C stops a reply, Ctrl-D exits)
  tokenize  print the token ids of a text as one JSON array (like llama-tokenize --ids)
  bench     measure prefill and decode tokens/s (of a GGUF model with -model)
  serve     serve a GGUF model over an OpenAI-compatible HTTP API, many users at once
  perplexity score a text file (perplexity, KL divergence), like llama-perplexity
  synth     write a model of random weights as a GGUF file (for tests and demos)
  version   print the build, the CPU and the kernels it runs

"kernelrt <command> -h" describes a command's flags.
`

// Main runs the command line args (without the program name) and returns the exit status.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, topUsage)
		return 2
	}
	var err error
	switch args[0] {
	case "run":
		err = cmdRun(args[1:], stdout, stderr)
	case "chat":
		err = cmdChat(args[1:], stdin, stdout, stderr)
	case "tokenize":
		err = cmdTokenize(args[1:], stdout, stderr)
	case "bench":
		err = cmdBench(args[1:], stdout, stderr)
	case "serve":
		err = cmdServe(args[1:], stdout, stderr)
	case "perplexity":
		err = cmdPerplexity(args[1:], stdout, stderr)
	case "synth":
		err = cmdSynth(args[1:], stdout, stderr)
	case "version":
		err = cmdVersion(args[1:], stdout, stderr)
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

// isSet reports whether flag name was given on the command line.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseTokens parses "1,17,42" (spaces allowed) into ids.
func parseTokens(s string) ([]int32, error) {
	if strings.TrimSpace(s) == "" {
		return nil, usagef("-tokens is empty: give comma-separated token ids, e.g. -tokens 1,17,42")
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

// checkThreads refuses a -threads value no pool takes (threadpool.New checks the machine).
func checkThreads(n int) error {
	if n < 0 || n > threadpool.MaxThreads {
		return usagef("-threads must be 0 (one per usable core) to %d, got %d", threadpool.MaxThreads, n)
	}
	return nil
}

// checkModelFile refuses a -model that is not a regular file before anything is opened (a
// named pipe would block the open).
func checkModelFile(path string) error {
	if path == "" {
		return usagef("-model is required")
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	if !st.Mode().IsRegular() {
		return fmt.Errorf("-model %s is not a regular file (%s)", path, st.Mode().Type())
	}
	return nil
}

// createOutput creates an output file before the work that fills it, so a missing
// directory or a denied write fails at once, and refuses a path that names one of inputs
// (writing -logits over the model file would destroy it).
func createOutput(flagName, path string, inputs ...string) (*os.File, error) {
	if st, err := os.Stat(path); err == nil {
		for _, in := range inputs {
			if ist, err := os.Stat(in); err == nil && os.SameFile(st, ist) {
				return nil, usagef("%s %s is the input file %s: refusing to overwrite it", flagName, path, in)
			}
		}
	}
	if dir := filepath.Dir(path); dir != "" {
		if st, err := os.Stat(dir); err != nil || !st.IsDir() {
			return nil, fmt.Errorf("%s %s: directory %s does not exist", flagName, path, dir)
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", flagName, err)
	}
	return f, nil
}

// newRuntime makes the dispatching Ops for m with threads workers (0 = default).
func newRuntime(m *orchestrator.Model, threads int) (*kernelrt.Runtime, error) {
	c := m.Cfg
	cols := max(c.Hidden, c.Intermediate, c.Heads*c.HeadDim)
	cols = (cols + kernelrt.QK - 1) / kernelrt.QK * kernelrt.QK
	return kernelrt.New(kernelrt.Options{Threads: threads, MaxCols: cols})
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

// mib formats a byte count.
func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }
