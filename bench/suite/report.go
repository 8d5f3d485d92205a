package suite

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/kernelrt/kernelrt/orchestrator"
)

// Report is everything one Run measured. It serialises to JSON as is (encoding/json); every
// number is finite, and 0 means "not measured" where a field says it can be absent.
type Report struct {
	Tool      string        `json:"tool"`
	Started   time.Time     `json:"started"`
	Seconds   float64       `json:"seconds"`
	Settings  Settings      `json:"settings"`
	Machine   Machine       `json:"machine"`
	Bandwidth Bandwidth     `json:"bandwidth"`
	Dispatch  []Latency     `json:"dispatch"`
	Gemv      Gemv          `json:"gemv"`
	Ops       []OpTiming    `json:"ops"`
	Models    []ModelResult `json:"models"`
	Breakdown []Breakdown   `json:"breakdown"`
	Depth     *Depth        `json:"depth,omitempty"` // decode at depth per KV cache type; nil: not run
	Notes     []string      `json:"notes"`
}

// Machine describes where and how the run happened.
type Machine struct {
	CPU         string      `json:"cpu"`
	Features    string      `json:"features"`
	Kernels     string      `json:"kernels"`      // kernel set in use, backend/variant
	GemvKernels string      `json:"gemv_kernels"` // what the Runtime uses for gemv_q8_0
	Backends    []string    `json:"backends"`
	Variants    []string    `json:"variants"`
	Go          string      `json:"go"`
	GOMAXPROCS  int         `json:"gomaxprocs"`
	NumCPU      int         `json:"num_cpu"`
	L3Bytes     int         `json:"l3_bytes"`
	Threads     int         `json:"threads"` // the "all threads" count
	Pool        string      `json:"pool"`    // threadpool Describe of the all-threads pool
	Pinned      bool        `json:"pinned"`
	SpinUs      float64     `json:"spin_budget_us"`
	Thresholds  string      `json:"thresholds"`
	THP         string      `json:"thp"` // /sys/kernel/mm/transparent_hugepage/enabled
	Arenas      []ArenaInfo `json:"arenas"`
	LoadStart   string      `json:"loadavg_start"`
	LoadEnd     string      `json:"loadavg_end"`
	OpenMP      string      `json:"openmp"`
}

// ArenaInfo is the page backing of one big buffer of the run.
type ArenaInfo struct {
	Name       string `json:"name"`
	Bytes      int    `json:"bytes"`
	PageKind   string `json:"page_kind"`
	HugeBacked int    `json:"huge_backed_bytes"`
}

// Bandwidth is the streaming-read bandwidth of the machine, measured in the run.
type Bandwidth struct {
	Bytes   int           `json:"bytes"`
	Passes  int           `json:"passes"`
	Kernels string        `json:"kernels"`
	Results []BandwidthAt `json:"results"`
}

// BandwidthAt is the bandwidth at one thread count, median of the passes, measured two
// ways: each thread reading its share as one sequential stream (StreamRead over the whole
// share), and as 8 interleaved streams (StreamRead over 64 KiB blocks taken in turn from 8
// sub-ranges), which is closer to a GEMV reading several rows at once and reaches more of
// the memory system on some CPUs. GBs, the figure every "% of bandwidth" uses, is the
// higher of the two medians.
type BandwidthAt struct {
	Threads       int       `json:"threads"`
	MedianGBs     float64   `json:"median_gbs"`
	MinGBs        float64   `json:"min_gbs"`
	MaxGBs        float64   `json:"max_gbs"`
	Samples       []float64 `json:"samples_gbs"`
	MultiGBs      float64   `json:"multi_stream_median_gbs"`
	MultiMinGBs   float64   `json:"multi_stream_min_gbs"`
	MultiMaxGBs   float64   `json:"multi_stream_max_gbs"`
	MultiSamples  []float64 `json:"multi_stream_samples_gbs"`
	GBs           float64   `json:"gbs"`
	StreamsPerThr int       `json:"multi_streams_per_thread"`
}

// GBs returns the bandwidth used for % figures at threads, or 0 if not measured.
func (b *Bandwidth) GBs(threads int) float64 {
	for _, r := range b.Results {
		if r.Threads == threads {
			return r.GBs
		}
	}
	return 0
}

// Latency is one dispatch mechanism's round trip.
type Latency struct {
	Name     string  `json:"name"`
	Threads  int     `json:"threads"`
	MedianUs float64 `json:"median_us"`
	P99Us    float64 `json:"p99_us"`
	MeanUs   float64 `json:"mean_us"`
	Samples  int     `json:"samples"`
	Note     string  `json:"note,omitempty"`
}

// Timing summarises per-call samples.
type Timing struct {
	MedianUs float64 `json:"median_us"`
	P99Us    float64 `json:"p99_us"`
	MinUs    float64 `json:"min_us"`
	Samples  int     `json:"samples"`
}

// Gemv is the GEMV section.
type Gemv struct {
	RotateBytes int        `json:"rotate_bytes"`
	Kernels     string     `json:"kernels"`
	OMP         bool       `json:"omp_available"`
	OMPInfo     string     `json:"omp_info"`
	OMPVariant  string     `json:"omp_variant"`
	Rows        []GemvRow  `json:"rows"`
	Gonum       []GonumRow `json:"gonum"`
	GonumNote   string     `json:"gonum_note"`
	// Types is every weight type x SIMD variant x shape on one thread (gemvByType).
	Types     []GemvTypeRow `json:"types"`
	TypesNote string        `json:"types_note"`
}

// GemvTypeRow is one weight type's one-thread GEMV with one kernel variant on one shape,
// weights streamed from DRAM.
type GemvTypeRow struct {
	Type        string  `json:"type"`
	Variant     string  `json:"variant"`
	Kernels     string  `json:"kernels"` // backend/variant the call ran
	Shape       string  `json:"shape"`
	Rows        int     `json:"rows"`
	Cols        int     `json:"cols"`
	WeightBytes int     `json:"weight_bytes"`
	Copies      int     `json:"copies"`
	Timing      Timing  `json:"timing"`
	GBs         float64 `json:"gbs"`
	PctBW       float64 `json:"pct_bandwidth"`
}

// GemvRow is one shape x type x thread count.
type GemvRow struct {
	Shape       string  `json:"shape"`
	Rows        int     `json:"rows"`
	Cols        int     `json:"cols"`
	Type        string  `json:"type"`
	WeightBytes int     `json:"weight_bytes"`
	Copies      int     `json:"copies"`
	Threads     int     `json:"threads"`
	Active      int     `json:"active"` // workers the dispatch table wakes for this shape
	Ours        Timing  `json:"ours"`
	GBs         float64 `json:"gbs"`
	PctBW       float64 `json:"pct_bandwidth"`
	Serial      Timing  `json:"serial"`
	Speedup     float64 `json:"speedup_vs_serial"`
	OMP         *Timing `json:"omp,omitempty"`
	OMPGBs      float64 `json:"omp_gbs,omitempty"`
	VsOMP       float64 `json:"omp_us_over_ours,omitempty"` // > 1: ours faster
	GGMLUs      float64 `json:"ggml_peers_us,omitempty"`    // peers.md, measured elsewhere
	VsGGML      float64 `json:"ggml_us_over_ours,omitempty"`
}

// GonumRow is gonum's FP32 Sgemv on one shape.
type GonumRow struct {
	Shape       string  `json:"shape"`
	Rows        int     `json:"rows"`
	Cols        int     `json:"cols"`
	Threads     int     `json:"threads"`
	WeightBytes int     `json:"weight_bytes"` // FP32
	Timing      Timing  `json:"timing"`
	GBs         float64 `json:"gbs"`
	OursQ8Us    float64 `json:"ours_q8_0_us"`
	VsOurs      float64 `json:"gonum_us_over_ours_q8_0"`
}

// OpTiming is one decoder op through the Runtime.
type OpTiming struct {
	Op      string `json:"op"`
	Shape   string `json:"shape"`
	Threads int    `json:"threads"`
	Active  int    `json:"active"`
	Timing  Timing `json:"timing"`
}

// ModelResult is one whole model's decode and prefill speed.
type ModelResult struct {
	Name         string     `json:"name"`
	Source       string     `json:"source"` // "synthetic" or the hook's label
	Recipe       string     `json:"recipe"`
	Config       string     `json:"config"`
	WeightBytes  int        `json:"weight_bytes_per_token"`
	Arena        ArenaInfo  `json:"arena"`
	BuildSeconds float64    `json:"build_seconds"`
	Runs         []ModelRun `json:"runs"`
}

// ModelRun is a model at one thread count. Samples are tokens/s of each repetition.
type ModelRun struct {
	Threads        int       `json:"threads"`
	BandwidthGBs   float64   `json:"bandwidth_gbs"`
	DecodeTokens   int       `json:"decode_tokens"`
	DecodeTokS     float64   `json:"decode_tok_s"`
	DecodeSamples  []float64 `json:"decode_samples"`
	DecodeLimit    float64   `json:"decode_limit_tok_s"`
	DecodePct      float64   `json:"decode_pct_limit"`
	DecodeWeightGB float64   `json:"decode_weight_gbs"`
	PrefillTokens  int       `json:"prefill_tokens"`
	PrefillTokS    float64   `json:"prefill_tok_s"`
	PrefillSamples []float64 `json:"prefill_samples"`
	PrefillLimit   float64   `json:"prefill_limit_tok_s"`
	PrefillPct     float64   `json:"prefill_pct_limit"`
	LlamaDecode    float64   `json:"llama_cpp_decode_tok_s,omitempty"` // peers.md, measured elsewhere
	LlamaPrefill   float64   `json:"llama_cpp_prefill_tok_s,omitempty"`
	VsLlamaDecode  float64   `json:"decode_vs_llama_cpp,omitempty"`
	VsLlamaPrefill float64   `json:"prefill_vs_llama_cpp,omitempty"`
}

// Breakdown is the per-op time of one decode token from the Runtime's report.
type Breakdown struct {
	Model    string `json:"model"`
	Threads  int    `json:"threads"`
	Position int    `json:"position"`
	// Candidates is the number of single tokens recorded; the one of median time is shown.
	Candidates int           `json:"candidates"`
	TokenUs    float64       `json:"token_us"`
	OpsUs      float64       `json:"ops_us"`
	OutsideUs  float64       `json:"outside_ops_us"`
	Ops        []BreakdownOp `json:"ops"`
}

// BreakdownOp is one op (and mode) of the token.
type BreakdownOp struct {
	Op         string  `json:"op"`
	Mode       string  `json:"mode"`
	Kernels    string  `json:"kernels"`
	Calls      int     `json:"calls"`
	Serial     int     `json:"serial_calls"`
	Active     int     `json:"active"`
	TotalUs    float64 `json:"total_us"`
	MeanUs     float64 `json:"mean_us"`
	Pct        float64 `json:"pct_token"`
	DispatchUs float64 `json:"dispatch_us"`
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText prints the report as tables.
func (r *Report) WriteText(w io.Writer) error {
	ew := &errWriter{w: w}
	p := func(format string, a ...any) { fmt.Fprintf(ew, format, a...) }
	table := func(header string, rows func(tw io.Writer)) {
		tw := tabwriter.NewWriter(ew, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, header)
		rows(tw)
		tw.Flush()
	}
	m := &r.Machine
	mode := "full"
	if r.Settings.Quick {
		mode = "quick"
	}
	p("kernelrt benchmark report (%s run, %s, %.0f s)\n", mode, r.Started.Format(time.RFC3339), r.Seconds)
	p("Every number is measured in this run unless labelled \"peers.md\" (measured elsewhere, on a\n")
	p("2-vCPU Cascade Lake VM: see ../shared/peers.md).\n\n")

	p("== Machine\n")
	p("cpu:        %s (%s)\n", m.CPU, m.Features)
	p("kernels:    %s in use (gemv via Runtime: %s); backends %v, variants %v\n", m.Kernels, m.GemvKernels, m.Backends, m.Variants)
	p("threads:    %d; pool: %s\n", m.Threads, m.Pool)
	p("thresholds: %s\n", m.Thresholds)
	p("go:         %s, GOMAXPROCS=%d, NumCPU=%d, L3 %s\n", m.Go, m.GOMAXPROCS, m.NumCPU, mib(m.L3Bytes))
	p("huge pages: THP %s\n", m.THP)
	for _, a := range m.Arenas {
		p("            %-28s %9s  pages %-12s huge-backed %s (%.0f%%)\n", a.Name, mib(a.Bytes), a.PageKind, mib(a.HugeBacked), pct(float64(a.HugeBacked), float64(a.Bytes)))
	}
	p("load avg:   %s at start, %s at end (1/5/15 min; above ~0.1 the numbers are noisy)\n", m.LoadStart, m.LoadEnd)
	p("openmp:     %s\n", m.OpenMP)
	p("settings:   %s; stream %s x %d passes; rotate >= %s; sample %.0f ms (min %d calls); model reps %d\n\n",
		r.Settings.Config, mib(r.Settings.StreamBytes), r.Settings.StreamPasses, mib(r.Settings.RotateBytes),
		r.Settings.SampleTimeMs, r.Settings.MinSamples, r.Settings.Repeats)

	p("== Streaming read bandwidth (StreamRead over %s, %s; median of %d passes; GB/s used for %% figures = the higher median)\n",
		mib(r.Bandwidth.Bytes), r.Bandwidth.Kernels, r.Bandwidth.Passes)
	table("threads\t1 stream/thread\tmin\tmax\t8 streams/thread\tmin\tmax\tused\tpeers.md (DRAM, measured elsewhere)\t", func(tw io.Writer) {
		for _, b := range r.Bandwidth.Results {
			peer := "-"
			if v, ok := peerStream[b.Threads]; ok {
				peer = v
			}
			fmt.Fprintf(tw, "%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t\n", b.Threads, b.MedianGBs, b.MinGBs, b.MaxGBs,
				b.MultiGBs, b.MultiMinGBs, b.MultiMaxGBs, b.GBs, peer)
		}
	})
	p("\n== Dispatch latency (empty task, round trip to completion)\n")
	table("mechanism\tthreads\tmedian µs\tp99 µs\tmean µs\tsamples\tnote\t", func(tw io.Writer) {
		for _, l := range r.Dispatch {
			fmt.Fprintf(tw, "%s\t%d\t%.3f\t%.3f\t%.3f\t%d\t%s\t\n", l.Name, l.Threads, l.MedianUs, l.P99Us, l.MeanUs, l.Samples, l.Note)
		}
	})
	p("peers.md (measured elsewhere): C-Kernel-Engine pool 0.47-0.54 µs hot, 4.6-5 µs cold; ping-pong floor 0.21-0.25 µs;\n")
	p("goroutines+WaitGroup 0.74-0.91 µs; channels 0.52-0.60 µs (4.6-12 µs locked).\n\n")

	g := &r.Gemv
	p("== GEMV (weights rotated through copies totalling >= %s so every call reads DRAM; median of per-call times)\n", mib(g.RotateBytes))
	p("kernels: %s; %%BW = GB/s of weight bytes / streaming bandwidth at the same thread count;\n", g.Kernels)
	p("x serial = speedup over the serial kernel; OpenMP = the same C kernels (%s) under omp parallel for;\n", g.OMPVariant)
	p("ggml = peers.md streaming column (measured elsewhere). Ratios > 1 mean ours is faster.\n")
	p("OpenMP peer: %s\n", g.OMPInfo)
	table("shape\trows x cols\ttype\tMB\tcopies\tthr\tactive\tµs\tp99\tGB/s\t%BW\tx serial\tOpenMP µs\tvs omp\tggml µs\tvs ggml\t", func(tw io.Writer) {
		for _, row := range g.Rows {
			omp, vs := "-", "-"
			if row.OMP != nil {
				omp, vs = fmt.Sprintf("%.1f", row.OMP.MedianUs), fmt.Sprintf("%.2f", row.VsOMP)
			}
			gg, vg := "-", "-"
			if row.GGMLUs > 0 {
				gg, vg = fmt.Sprintf("%.1f", row.GGMLUs), fmt.Sprintf("%.2f", row.VsGGML)
			}
			fmt.Fprintf(tw, "%s\t%dx%d\t%s\t%.2f\t%d\t%d\t%d\t%.1f\t%.1f\t%.2f\t%.0f%%\t%.2f\t%s\t%s\t%s\t%s\t\n",
				row.Shape, row.Rows, row.Cols, row.Type, float64(row.WeightBytes)/1e6, row.Copies, row.Threads, row.Active,
				row.Ours.MedianUs, row.Ours.P99Us, row.GBs, row.PctBW, row.Speedup, omp, vs, gg, vg)
		}
	})
	p("\ngonum blas32 Sgemv, FP32 weights (%s)\n", g.GonumNote)
	table("shape\trows x cols\tthr\tMB fp32\tµs\tp99\tGB/s\tours q8_0 µs\tgonum/ours\t", func(tw io.Writer) {
		for _, row := range g.Gonum {
			fmt.Fprintf(tw, "%s\t%dx%d\t%d\t%.2f\t%.1f\t%.1f\t%.2f\t%.1f\t%.2f\t\n", row.Shape, row.Rows, row.Cols, row.Threads,
				float64(row.WeightBytes)/1e6, row.Timing.MedianUs, row.Timing.P99Us, row.GBs, row.OursQ8Us, row.VsOurs)
		}
	})
	if len(g.Types) > 0 {
		p("\n== GEMV by weight type and kernel variant (%s)\n", g.TypesNote)
		var shapes []string
		seen := map[string]bool{}
		for _, row := range g.Types {
			if !seen[row.Shape] {
				seen[row.Shape] = true
				shapes = append(shapes, row.Shape)
			}
		}
		table("type\tvariant\tkernels\t"+strings.Join(shapes, "\t%BW\t")+"\t%BW\t", func(tw io.Writer) {
			type key struct{ typ, variant, kernels string }
			var keys []key
			cells := map[key]map[string]GemvTypeRow{}
			for _, row := range g.Types {
				k := key{row.Type, row.Variant, row.Kernels}
				if cells[k] == nil {
					cells[k] = map[string]GemvTypeRow{}
					keys = append(keys, k)
				}
				cells[k][row.Shape] = row
			}
			for _, k := range keys {
				fmt.Fprintf(tw, "%s\t%s\t%s\t", k.typ, k.variant, k.kernels)
				for _, sh := range shapes {
					if row, ok := cells[k][sh]; ok {
						fmt.Fprintf(tw, "%.1f GB/s\t%.0f%%\t", row.GBs, row.PctBW)
					} else {
						fmt.Fprint(tw, "-\t-\t")
					}
				}
				fmt.Fprintln(tw)
			}
		})
	}
	p("\n== Other ops through the Runtime (data cache-resident; median of per-call times)\n")
	table("op\tshape\tthr\tactive\tµs\tp99\tsamples\t", func(tw io.Writer) {
		for _, o := range r.Ops {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%d\t\n", o.Op, o.Shape, o.Threads, o.Active, o.Timing.MedianUs, o.Timing.P99Us, o.Timing.Samples)
		}
	})
	if len(r.Models) > 0 {
		p("\n== Whole model (median of %d runs; limit = measured bandwidth at that thread count / weight bytes per token;\n", r.Settings.Repeats)
		p("   prefill limit counts one weight pass per %d-token batch; llama.cpp = peers.md, measured elsewhere)\n", r.Settings.PrefillTokens)
		for _, mr := range r.Models {
			p("%s: %s, %s of weights per token, arena %s pages, %s huge-backed, built in %.1f s\n", mr.Name, mr.Config,
				mib(mr.WeightBytes), mr.Arena.PageKind, mib(mr.Arena.HugeBacked), mr.BuildSeconds)
			table("thr\tBW GB/s\ttg tok/s\truns\tlimit\t%limit\tweights GB/s\tllama.cpp tg\tvs llama\tpp tok/s\truns\tlimit\t%limit\tllama.cpp pp\tvs llama\t", func(tw io.Writer) {
				for _, run := range mr.Runs {
					fmt.Fprintf(tw, "%d\t%.2f\ttg%d %.2f\t%s\t%.1f\t%.0f%%\t%.2f\t%s\t%s\tpp%d %.1f\t%s\t%.0f\t%.1f%%\t%s\t%s\t\n",
						run.Threads, run.BandwidthGBs, run.DecodeTokens, run.DecodeTokS, spread(run.DecodeSamples),
						run.DecodeLimit, run.DecodePct, run.DecodeWeightGB, opt(run.LlamaDecode, "%.1f"), opt(run.VsLlamaDecode, "%.2f"),
						run.PrefillTokens, run.PrefillTokS, spread(run.PrefillSamples), run.PrefillLimit, run.PrefillPct,
						opt(run.LlamaPrefill, "%.1f"), opt(run.VsLlamaPrefill, "%.2f"))
				}
			})
		}
	}
	for _, b := range r.Breakdown {
		p("\n== One decode token, per op (%s, %d threads, position %d, the median of %d traced tokens):\n", b.Model, b.Threads, b.Position, b.Candidates)
		p("   token %.0f µs = ops %.0f µs + outside dispatched ops (Go code, orchestration) %.0f µs (%.1f%%)\n",
			b.TokenUs, b.OpsUs, b.OutsideUs, pct(b.OutsideUs, b.TokenUs))
		table("op\tmode\tkernels\tcalls\tserial\tactive\tmean µs\ttotal µs\t% token\tdispatch µs\t", func(tw io.Writer) {
			for _, o := range b.Ops {
				d := "-"
				if o.DispatchUs > 0 {
					d = fmt.Sprintf("%.2f", o.DispatchUs)
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%.2f\t%.1f\t%.1f%%\t%s\t\n", o.Op, o.Mode, o.Kernels, o.Calls, o.Serial, o.Active, o.MeanUs, o.TotalUs, o.Pct, d)
			}
		})
	}
	if r.Depth != nil {
		p("\n== Decode at depth and long prefill, per KV cache type (median of %d runs)\n", r.Settings.Repeats)
		r.Depth.WriteText(ew)
	}
	if len(r.Notes) > 0 {
		p("\n== Notes\n")
		for _, n := range r.Notes {
			p("- %s\n", n)
		}
	}
	return ew.err
}

// peerStream is peers.md's DRAM streaming bandwidth.
var peerStream = map[int]string{1: "9.5", 2: "18.6-18.9"}

type errWriter struct {
	w   io.Writer
	err error
}

func (e *errWriter) Write(p []byte) (int, error) {
	if e.err != nil {
		return 0, e.err
	}
	n, err := e.w.Write(p)
	e.err = err
	return n, err
}

func mib(b int) string {
	switch {
	case b >= 1<<30 && b%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", b>>30)
	case b >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20))
	default:
		return fmt.Sprintf("%.1f KiB", float64(b)/1024)
	}
}

func pct(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * a / b
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func opt(v float64, f string) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf(f, v)
}

// spread formats the range of repeated samples.
func spread(xs []float64) string {
	if len(xs) < 2 {
		return "1 run"
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = min(lo, x), max(hi, x)
	}
	return fmt.Sprintf("%.1f-%.1f", lo, hi)
}

// describeConfig formats a decoder shape.
func describeConfig(c orchestrator.Config) string {
	name := "custom"
	if isQwen2_0_5B(c) {
		name = "Qwen2-0.5B"
	}
	return fmt.Sprintf("%s shape (%d layers, hidden %d, ffn %d, %d/%d heads x %d, vocab %d, ctx %d)",
		name, c.Layers, c.Hidden, c.Intermediate, c.Heads, c.KVHeads, c.HeadDim, c.Vocab, c.MaxCtx)
}
