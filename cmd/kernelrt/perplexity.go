package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/perplexity"
	"github.com/kernelrt/kernelrt/tokenizer"
)

// ---- perplexity ----

// cmdPerplexity is llama-perplexity's perplexity and KL-divergence modes (package
// perplexity does the scoring):
//
//   - -f FILE: the text (less one trailing newline) is tokenized whole (BOS first when the vocabulary adds it, special-token
//     text as plain text, as llama-perplexity does), cut into chunks of -ctx tokens, and each
//     chunk, its first token replaced by BOS when the vocabulary adds BOS, is evaluated from
//     an empty cache; its positions ctx/2 .. ctx-2 are scored on the token after them. The
//     running perplexity prints as [1]x,[2]y,... and the final estimate with its +/-.
//     -kl-divergence-base OUT also saves every scored position's log-probabilities in
//     llama-perplexity's base file format (2*(vocab+5) bytes per position).
//   - -kl-divergence -kl-divergence-base FILE: a second model evaluates the base file's tokens
//     (-f, when given, must tokenize to the same tokens) and its distributions are compared
//     with the base's: mean KLD, its percentiles, delta-p, same top token, both PPLs.
//
// Only one chunk's logits are held (the model's buffer of -batch rows).
func cmdPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("perplexity", "-model FILE (-f TEXT [-kl-divergence-base OUT] | -kl-divergence -kl-divergence-base FILE [-f TEXT]) [-ctx 512] [-chunks N] [-batch N] [-threads N] [-kv f16|f32|q8_0] [-json]", stderr)
	model := fs.String("model", "", "GGUF model `FILE`")
	text := fs.String("f", "", "text `FILE` to score (raw bytes)")
	ctx := fs.Int("ctx", 512, "tokens per chunk (with -kl-divergence: the base file's unless given)")
	chunks := fs.Int("chunks", -1, "score at most `N` chunks (-1 = all)")
	batch := fs.Int("batch", 512, "tokens per forward pass (at most -ctx); the logits buffer holds this many rows")
	threads := fs.Int("threads", 0, "worker threads including the caller (0 = one per usable core)")
	kv := fs.String("kv", "f16", "KV cache type: f16 (llama.cpp's default), f32 or q8_0")
	baseFile := fs.String("kl-divergence-base", "", "base `FILE` of log-probabilities: written by a perplexity run, read with -kl-divergence (llama-perplexity's format)")
	kl := fs.Bool("kl-divergence", false, "compare -model with the base model of -kl-divergence-base")
	asJSON := fs.Bool("json", false, "print the figures as one JSON object on stdout (the running figures go to stderr)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if *model == "" {
		return usagef("-model is required")
	}
	if *kl && *baseFile == "" {
		return usagef("-kl-divergence needs -kl-divergence-base FILE (written by a perplexity run of the base model)")
	}
	if !*kl && *text == "" {
		return usagef("-f FILE is required (the text to score)")
	}
	ctxSet := isSet(fs, "ctx")
	if *ctx < perplexity.MinCtx || *ctx > orchestrator.MaxContext {
		return usagef("-ctx must be %d to %d, got %d", perplexity.MinCtx, orchestrator.MaxContext, *ctx)
	}
	if *chunks < -1 {
		return usagef("-chunks must be -1 (all) or a number of chunks, got %d", *chunks)
	}
	if *batch < 1 || *batch > orchestrator.MaxContext {
		return usagef("-batch must be 1 to %d, got %d", orchestrator.MaxContext, *batch)
	}
	if err := checkThreads(*threads); err != nil {
		return err
	}
	kvt, err := orchestrator.ParseKVType(*kv)
	if err != nil {
		return usagef("-kv %q: want f16, f32 or q8_0", *kv)
	}
	if err := checkModelFile(*model); err != nil {
		return err
	}
	limit := max(*chunks, 0)

	// The base file: opened (KL mode) or created before any work (a bad path fails at once).
	var base *perplexity.Base
	var baseOut *os.File
	if *kl {
		if base, err = perplexity.OpenBase(*baseFile); err != nil {
			return err
		}
		defer base.Close()
		if ctxSet && *ctx != base.Ctx {
			return fmt.Errorf("-ctx %d: the base file %s has chunks of %d tokens", *ctx, *baseFile, base.Ctx)
		}
		*ctx = base.Ctx
		if limit > base.Chunks {
			return fmt.Errorf("-chunks %d: the base file %s holds %d chunks", limit, *baseFile, base.Chunks)
		}
	} else if *baseFile != "" {
		inputs := []string{*model, *text}
		if baseOut, err = createOutput("-kl-divergence-base", *baseFile, inputs...); err != nil {
			return err
		}
		defer func() {
			if baseOut != nil { // not completed: no half-written base file
				baseOut.Close()
				os.Remove(*baseFile)
			}
		}()
	}

	t0 := time.Now()
	m, err := orchestrator.LoadGGUF(*model, orchestrator.LoadOptions{MaxCtx: *ctx, MaxBatch: min(*batch, *ctx), AllLogits: true, KV: kvt,
		File: arena.FileOptions{WillNeed: true}})
	if err != nil {
		return fmt.Errorf("-ctx %d: %w", *ctx, err)
	}
	defer m.Close()
	tok, err := tokenizer.FromGGUF(m.File())
	if err != nil {
		return fmt.Errorf("%s: %w", *model, err)
	}
	if tok.VocabSize() != m.Vocab() {
		return fmt.Errorf("%s: the tokenizer has %d tokens but the model's logits %d", *model, tok.VocabSize(), m.Vocab())
	}
	if tok.AddEOS() {
		return fmt.Errorf("%s: the vocabulary adds EOS after a text; perplexity (like llama-perplexity) takes only vocabularies that do not", *model)
	}
	o := perplexity.Options{Ctx: *ctx, Chunks: limit, AddBOS: tok.AddBOS(), BOS: tok.BOS()}
	if o.AddBOS && o.BOS < 0 {
		return fmt.Errorf("%s: the vocabulary adds BOS but names no BOS token", *model)
	}
	rt, err := newRuntime(m, *threads)
	if err != nil {
		return err
	}
	defer rt.Close()
	unpin, _ := rt.PinCaller() // best effort
	defer unpin()
	pm, err := perplexity.FromOrchestrator(m, rt)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "perplexity: loaded %s in %v: %s, vocab %d, add BOS %v; %d threads, kernels %s, kv %s\n", *model,
		time.Since(t0).Round(time.Millisecond), m.Recipe.Name, m.Vocab(), o.AddBOS, rt.Threads(), rt.KernelsSummary(), m.KV())

	var tokens []int32
	if *text != "" {
		b, err := os.ReadFile(*text)
		if err != nil {
			return fmt.Errorf("-f: %w", err)
		}
		if !utf8.Valid(b) {
			fmt.Fprintln(stderr, "perplexity: warning: the text is not valid UTF-8; its bad bytes are tokenized as llama.cpp does")
		}
		t1 := time.Now()
		// llama-perplexity drops one trailing newline of -f's text, then calls
		// common_tokenize(ctx, text, add_special = true, parse_special = false).
		if tokens, err = tok.Encode(strings.TrimSuffix(string(b), "\n"), tokenizer.EncodeOptions{AddSpecial: true}); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "perplexity: tokenized %s into %d tokens in %v\n", *text, len(tokens), time.Since(t1).Round(time.Millisecond))
	}

	runStart := time.Now()
	progress := func(p perplexity.Progress) {
		if p.Chunk == 1 {
			fmt.Fprintf(stderr, "perplexity: %.2f seconds per pass - ETA %.2f minutes\n", p.Elapsed.Seconds(), p.Elapsed.Minutes()*float64(p.Chunks))
		}
	}
	if *kl {
		if tokens != nil {
			if err := base.Match(tokens, *ctx, limit); err != nil {
				return fmt.Errorf("-f %s against -kl-divergence-base %s: %w", *text, *baseFile, err)
			}
		}
		n := base.Chunks
		if limit > 0 {
			n = limit
		}
		fmt.Fprintf(stderr, "perplexity: KL divergence over %d chunks of %d tokens (%d positions) against %s, batch_size=%d\n",
			n, *ctx, n*perplexity.ScoredPositions(*ctx), *baseFile, min(*batch, *ctx))
		table := stdout
		if *asJSON {
			table = stderr
		}
		fmt.Fprintln(table, "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p")
		o.Progress = func(p perplexity.Progress) {
			progress(p)
			s := p.KL
			fmt.Fprintf(table, "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n", p.Chunk,
				s.PPL, s.PPLUnc, s.LogPPLRatio, s.LogPPLRatioUnc, s.KLD, s.KLDUnc, 100*s.DeltaPRMS, 100*s.DeltaPRMSUnc, 100*s.SameTop, 100*s.SameTopUnc)
		}
		s, err := perplexity.KLDivergence(pm, base, o)
		if err != nil {
			return err
		}
		fmt.Fprintf(stderr, "perplexity: %d positions in %v\n", s.Positions, time.Since(runStart).Round(time.Millisecond))
		if *asJSON {
			return writeJSON(stdout, klJSON(*model, *baseFile, *ctx, n, s))
		}
		writeKLText(stdout, s)
		return nil
	}

	var bw io.Writer
	if baseOut != nil {
		bw = baseOut
	}
	o.Base = bw
	n, err := perplexity.ChunkCount(len(tokens), *ctx, limit)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "perplexity: calculating perplexity over %d chunks, n_ctx=%d, batch_size=%d\n", n, *ctx, min(*batch, *ctx))
	running := stdout
	if *asJSON {
		running = stderr
	}
	o.Progress = func(p perplexity.Progress) {
		progress(p)
		fmt.Fprintf(running, "[%d]%.4f,", p.Chunk, p.PPL)
	}
	res, err := perplexity.Perplexity(pm, tokens, o)
	fmt.Fprintln(running)
	if err != nil {
		return err
	}
	if baseOut != nil {
		f := baseOut
		baseOut = nil
		if err := f.Close(); err != nil {
			os.Remove(*baseFile)
			return fmt.Errorf("-kl-divergence-base: %w", err)
		}
		size, _ := perplexity.BaseSize(*ctx, m.Vocab(), res.Chunks)
		fmt.Fprintf(stderr, "perplexity: saved the base log-probabilities to %s (%s)\n", *baseFile, mib(size))
	}
	fmt.Fprintf(stderr, "perplexity: %d positions in %v\n", res.Positions, time.Since(runStart).Round(time.Millisecond))
	if *asJSON {
		return writeJSON(stdout, pplJSON{Mode: "perplexity", Model: *model, Text: *text, Tokens: res.Tokens, Ctx: res.Ctx, Chunks: res.Chunks,
			Positions: res.Positions, AddBOS: o.AddBOS, PPL: num(res.PPL), PPLUnc: num(res.PPLUnc), ChunkPPL: nums(res.ChunkPPL), BaseFile: *baseFile})
	}
	fmt.Fprintf(stdout, "Final estimate: PPL = %.4f +/- %.5f\n", res.PPL, res.PPLUnc)
	return nil
}

// num is a float that JSON writes as null when it is not finite (a correlation of two
// constant series, say).
type num float64

func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

func nums(v []float64) []num {
	out := make([]num, len(v))
	for i, x := range v {
		out[i] = num(x)
	}
	return out
}

// pplJSON is the -json object of a perplexity run.
type pplJSON struct {
	Mode      string `json:"mode"`
	Model     string `json:"model"`
	Text      string `json:"text"`
	Tokens    int    `json:"tokens"`
	Ctx       int    `json:"ctx"`
	Chunks    int    `json:"chunks"`
	Positions int    `json:"positions"`
	AddBOS    bool   `json:"add_bos"`
	PPL       num    `json:"ppl"`
	PPLUnc    num    `json:"ppl_uncertainty"`
	ChunkPPL  []num  `json:"chunk_ppl"`
	BaseFile  string `json:"kl_divergence_base,omitempty"`
}

// point is a percentile in the -json output.
type point struct {
	P     float64 `json:"p"`
	Value num     `json:"value"`
}

// klOut is the -json object of a KL-divergence run.
type klOut struct {
	Mode              string  `json:"mode"`
	Model             string  `json:"model"`
	BaseFile          string  `json:"kl_divergence_base"`
	Ctx               int     `json:"ctx"`
	Chunks            int     `json:"chunks"`
	Positions         int     `json:"positions"`
	PPL               num     `json:"ppl"`
	PPLUnc            num     `json:"ppl_uncertainty"`
	BasePPL           num     `json:"base_ppl"`
	BasePPLUnc        num     `json:"base_ppl_uncertainty"`
	LogPPLCorrelation num     `json:"log_ppl_correlation"`
	LogPPLRatio       num     `json:"log_ppl_ratio"`
	LogPPLRatioUnc    num     `json:"log_ppl_ratio_uncertainty"`
	PPLRatio          num     `json:"ppl_ratio"`
	PPLRatioUnc       num     `json:"ppl_ratio_uncertainty"`
	PPLDiff           num     `json:"ppl_diff"`
	PPLDiffUnc        num     `json:"ppl_diff_uncertainty"`
	KLD               num     `json:"kld"`
	KLDUnc            num     `json:"kld_uncertainty"`
	KLDPercentiles    []point `json:"kld_percentiles"`
	DeltaP            num     `json:"delta_p"`
	DeltaPUnc         num     `json:"delta_p_uncertainty"`
	DeltaPPercentiles []point `json:"delta_p_percentiles"`
	DeltaPRMS         num     `json:"delta_p_rms"`
	DeltaPRMSUnc      num     `json:"delta_p_rms_uncertainty"`
	SameTop           num     `json:"same_top"`
	SameTopUnc        num     `json:"same_top_uncertainty"`
}

func points(ps []perplexity.Point) []point {
	out := make([]point, len(ps))
	for i, p := range ps {
		out[i] = point{p.P, num(p.Value)}
	}
	return out
}

func klJSON(model, baseFile string, ctx, chunks int, s perplexity.KLSummary) klOut {
	return klOut{Mode: "kl-divergence", Model: model, BaseFile: baseFile, Ctx: ctx, Chunks: chunks, Positions: s.Positions,
		PPL: num(s.PPL), PPLUnc: num(s.PPLUnc), BasePPL: num(s.BasePPL), BasePPLUnc: num(s.BasePPLUnc),
		LogPPLCorrelation: num(s.LogPPLCorrelation), LogPPLRatio: num(s.LogPPLRatio), LogPPLRatioUnc: num(s.LogPPLRatioUnc),
		PPLRatio: num(s.PPLRatio), PPLRatioUnc: num(s.PPLRatioUnc), PPLDiff: num(s.PPLDiff), PPLDiffUnc: num(s.PPLDiffUnc),
		KLD: num(s.KLD), KLDUnc: num(s.KLDUnc), KLDPercentiles: points(s.KLDPercentiles),
		DeltaP: num(s.DeltaP), DeltaPUnc: num(s.DeltaPUnc), DeltaPPercentiles: points(s.DeltaPPercentiles),
		DeltaPRMS: num(s.DeltaPRMS), DeltaPRMSUnc: num(s.DeltaPRMSUnc), SameTop: num(s.SameTop), SameTopUnc: num(s.SameTopUnc)}
}

func writeJSON(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// writeKLText prints the summary as llama-perplexity's KL mode does.
func writeKLText(w io.Writer, s perplexity.KLSummary) {
	fmt.Fprintf(w, "\n====== Perplexity statistics ======\n")
	fmt.Fprintf(w, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", s.PPL, s.PPLUnc)
	fmt.Fprintf(w, "Mean PPL(base)                : %10.6f ± %10.6f\n", s.BasePPL, s.BasePPLUnc)
	fmt.Fprintf(w, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100*s.LogPPLCorrelation)
	fmt.Fprintf(w, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", s.LogPPLRatio, s.LogPPLRatioUnc)
	fmt.Fprintf(w, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", s.PPLRatio, s.PPLRatioUnc)
	fmt.Fprintf(w, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", s.PPLDiff, s.PPLDiffUnc)
	fmt.Fprintf(w, "\n====== KL divergence statistics ======\n")
	fmt.Fprintf(w, "Mean    KLD: %10.6f ± %10.6f\n", s.KLD, s.KLDUnc)
	label := func(p float64) string {
		switch p {
		case 100:
			return "Maximum"
		case 50:
			return "Median "
		case 0:
			return "Minimum"
		}
		return fmt.Sprintf("%4.1f%%  ", p)
	}
	for _, p := range s.KLDPercentiles {
		fmt.Fprintf(w, "%s KLD: %10.6f\n", label(p.P), p.Value)
	}
	fmt.Fprintf(w, "\n====== Token probability statistics ======\n")
	fmt.Fprintf(w, "Mean    Δp: %6.3f ± %5.3f %%\n", 100*s.DeltaP, 100*s.DeltaPUnc)
	for _, p := range s.DeltaPPercentiles {
		fmt.Fprintf(w, "%s Δp: %6.3f%%\n", label(p.P), 100*p.Value)
	}
	fmt.Fprintf(w, "RMS Δp    : %6.3f ± %5.3f %%\n", 100*s.DeltaPRMS, 100*s.DeltaPRMSUnc)
	fmt.Fprintf(w, "Same top p: %6.3f ± %5.3f %%\n", 100*s.SameTop, 100*s.SameTopUnc)
}
