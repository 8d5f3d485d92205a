package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// ---- synth ----

// synthShapes are the model shapes synth writes.
var synthShapes map[string]func() orchestrator.Config

func init() { synthShapes = shapes() }

func shapes() map[string]func() orchestrator.Config {
	var s map[string]func() orchestrator.Config
	s = map[string]func() orchestrator.Config{
		// tiny: about 1 MB at Q8_0, for tests and a first run in seconds.
		"tiny": func() orchestrator.Config {
			return orchestrator.Config{Layers: 2, Hidden: 128, Intermediate: 384, Heads: 4, KVHeads: 2, HeadDim: 32,
				Vocab: 1024, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 2048, MaxBatch: 128}
		},
		// tiny-llama: the tiny shape in the llama architecture (RoPE on adjacent pairs, no biases).
		"tiny-llama": func() orchestrator.Config {
			c := s["tiny"]()
			c.Arch = "llama"
			return c
		},
		// tiny-qwen3: the tiny shape in the qwen3 architecture (q/k norms, no biases) with heads
		// of 64, so q is twice the hidden width as in Qwen3-0.6B.
		"tiny-qwen3": func() orchestrator.Config {
			c := s["tiny"]()
			c.Arch, c.HeadDim = "qwen3", 64
			return c
		},
		// tiny-gemma3: a small gemma3 (7 layers, so layer 5 is global; the others slide over a
		// window of 64), 4 heads of 64 over 1 KV head.
		"tiny-gemma3": func() orchestrator.Config {
			c := s["tiny"]()
			c.Arch, c.Layers, c.HeadDim, c.KVHeads, c.SlidingWindow = "gemma3", 7, 64, 1, 64
			return c
		},
		// tiny-gemma2: a small gemma2 (4 layers: 0 and 2 slide over a window of 64, 1 and 3
		// are global), 4 heads of 64 over 2 KV heads, scores soft-capped at 50, logits at 30.
		"tiny-gemma2": func() orchestrator.Config {
			c := s["tiny"]()
			c.Arch, c.Layers, c.HeadDim, c.SlidingWindow, c.AttnSoftcap, c.FinalSoftcap = "gemma2", 4, 64, 64, 50, 30
			return c
		},
		// tiny256: the smallest shape whose matrices can all be K-quants (rows of 256): one
		// layer, 4 heads of 64 over 2 KV heads, the smallest synthetic vocabulary. About 0.3 MB
		// as Q4_K_M: the compatibility fixtures (orchestrator/testdata/llamacpp).
		"tiny256": func() orchestrator.Config {
			return orchestrator.Config{Layers: 1, Hidden: 256, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 64,
				Vocab: tokenizer.SyntheticVocabMin, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 2048, MaxBatch: 128}
		},
		"tiny256-llama": func() orchestrator.Config {
			c := s["tiny256"]()
			c.Arch, c.RopeTheta, c.Eps = "llama", 500000, 1e-5
			return c
		},
		// tiny256-qwen3, tiny256-gemma2, tiny256-gemma3: tiny256 in those architectures, for
		// the ik_llama.cpp oracle fixtures (perplexity/testdata/ik): qwen3 with 2 layers;
		// gemma2 with 26 (ik_llama.cpp builds gemma2 only for 26, 42 or 46 layers), soft-caps
		// 50 and 30; gemma3 with 6 (layer 5 global); both sliding over a window of 16.
		"tiny256-qwen3": func() orchestrator.Config {
			c := s["tiny256"]()
			c.Arch, c.Layers = "qwen3", 2
			return c
		},
		"tiny256-gemma2": func() orchestrator.Config {
			c := s["tiny256"]()
			c.Arch, c.Layers, c.SlidingWindow, c.AttnSoftcap, c.FinalSoftcap = "gemma2", 26, 16, 50, 30
			return c
		},
		"tiny256-gemma3": func() orchestrator.Config {
			c := s["tiny256"]()
			c.Arch, c.Layers, c.SlidingWindow = "gemma3", 6, 16
			return c
		},
		// llama-1b: Llama 3.2 1B's shape (16 layers, hidden 2048, 32/8 heads, vocab 128256).
		"llama-1b": func() orchestrator.Config {
			c := orchestrator.Llama1B()
			c.MaxCtx = 32768
			return c
		},
		// qwen3-0.6b: Qwen3-0.6B's shape (28 layers, hidden 1024, 16/8 heads of 128).
		"qwen3-0.6b": func() orchestrator.Config {
			c := orchestrator.Qwen3_0_6B()
			c.MaxCtx = 40960
			return c
		},
		// gemma2-2b: Gemma 2 2B's shape (26 layers, hidden 2304, FFN 9216, 8/4 heads of 256,
		// window 4096, vocab 256000, soft-caps 50 and 30).
		"gemma2-2b": func() orchestrator.Config {
			c := orchestrator.Gemma2_2B()
			c.MaxCtx = 8192
			return c
		},
		// gemma3-1b: Gemma 3 1B's shape (26 layers, hidden 1152, 4/1 heads of 256, window
		// 512, vocab 262144).
		"gemma3-1b": func() orchestrator.Config {
			c := orchestrator.Gemma3_1B()
			c.MaxCtx = 32768
			return c
		},
		"qwen2-0.5b": func() orchestrator.Config {
			c := orchestrator.Qwen2_0_5B()
			c.MaxCtx = 32768
			return c
		},
	}
	return s
}

func shapeNames() string {
	var n []string
	for k := range synthShapes {
		n = append(n, k)
	}
	sort.Strings(n)
	return strings.Join(n, "|")
}

func cmdSynth(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("synth", "-out FILE [-shape "+shapeNames()+"] [-recipe q8_0|mixed|f16] [-untied] [-seed N] [-ctx N] [-codebook N] [-shared-layers] [-output-norm-scale X]", stderr)
	out := fs.String("out", "", "write the GGUF file to `FILE`")
	shape := fs.String("shape", "qwen2-0.5b", "model shape: "+shapeNames())
	recipe := fs.String("recipe", "q8_0", "weight types: q8_0 (all Q8_0), mixed (llama.cpp's Q5_0 mix) or f16 (unquantized, for llama-quantize)")
	seed := fs.Uint64("seed", 1, "seed of the random weights")
	ctx := fs.Int("ctx", 0, "context_length written to the file (0 = the shape's)")
	untied := fs.Bool("untied", false, "write a separate output head (output.weight, of the embedding's type) instead of tying it to token_embd")
	var so orchestrator.SynthOptions
	fs.IntVar(&so.Codebook, "codebook", 0, "with -recipe f16: draw every 256-value block of the layers' weights from `N` random blocks (a quantized file then gzips tens of times smaller)")
	fs.BoolVar(&so.SharedLayers, "shared-layers", false, "give every layer layer 0's weights")
	normScale := fs.Float64("output-norm-scale", 0, "multiply output_norm's weights by `X` (wider logits; 0 = 1)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *out == "" {
		return usagef("-out is required")
	}
	mk, ok := synthShapes[*shape]
	if !ok {
		return usagef("-shape %q: want %s", *shape, shapeNames())
	}
	var r orchestrator.Recipe
	switch *recipe {
	case "q8_0":
		r = orchestrator.RecipeQ8_0()
	case "mixed", "mixed-q5_0":
		r = orchestrator.RecipeMixed()
	case "f16":
		r = orchestrator.RecipeF16()
	default:
		return usagef("-recipe %q: want q8_0, mixed or f16", *recipe)
	}
	if *untied {
		r.Untied, r.Output = true, r.Embedded
		r.Name += " untied"
	}
	so.OutputNormScale = float32(*normScale)
	cfg := mk()
	if *ctx != 0 {
		// context_length is a uint32 in the file and the loader takes at most MaxContext.
		if *ctx < 0 || *ctx > orchestrator.MaxContext {
			return usagef("-ctx must be 1 to %d, got %d", orchestrator.MaxContext, *ctx)
		}
		cfg.MaxCtx = *ctx
	}
	b := gguf.NewBuilder()
	if err := orchestrator.SyntheticGGUFWith(b, cfg, r, *seed, so); err != nil {
		return err
	}
	f, err := createOutput("-out", *out)
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
	fmt.Fprintf(stdout, "wrote %s: synthetic %s %s (random weights, byte-level tokenizer), %s in %v\n",
		*out, *shape, r.Name, mib(n), time.Since(t0).Round(time.Millisecond))
	return nil
}
