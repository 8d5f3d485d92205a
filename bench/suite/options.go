// Package suite is kernelrt's benchmark suite, the body of `make bench` and `kernelrt bench`:
// one run measures the machine's streaming bandwidth, dispatch latency of the pool and of
// the baselines, every Qwen2 GEMV shape against the bandwidth and against peers (OpenMP over
// the same C kernels, gonum), the other decoder ops, and whole-model decode and prefill of a
// Qwen2-0.5B-shaped model, and reports it all as text and JSON.
//
// Numbers measured in the run are labelled as such; numbers from ../shared/peers.md
// (llama.cpp, ggml) were measured elsewhere and are labelled "peers.md".
package suite

import (
	"time"

	"github.com/kernelrt/kernelrt/orchestrator"
)

// ModelHook supplies a model for the whole-model section in place of the synthetic ones
// (the GGUF path behind -model FILE). It is called once with the build options the suite
// wants (prefaulted arena) and returns the model and a label for the report (e.g. the file
// name); the suite closes the model when done. A model whose Recipe.Name is "q8_0" or
// "mixed-q5_0" and whose shape is Qwen2-0.5B is compared with llama.cpp's numbers.
type ModelHook func(build orchestrator.BuildOptions) (m *orchestrator.Model, label string, err error)

// Options configures Run. The zero value is the full run on this machine's default thread
// count; Quick is the CI smoke run. Every size and count below has a default (0 = default
// for the mode); tests shrink them to run the whole suite in seconds.
type Options struct {
	// Quick shrinks repetitions, sampling time and the GEMV shape list; every section runs.
	Quick bool
	// Threads is the "all threads" count: 0 = one per usable physical core (the pool's
	// default). The "1 thread" column is always measured as well.
	Threads int
	// Model, when set, replaces the two synthetic models (see ModelHook).
	Model ModelHook

	// Config is the decoder shape the GEMV and op shapes and the synthetic models follow;
	// nil = orchestrator.Qwen2_0_5B().
	Config *orchestrator.Config
	// Seed seeds every random weight and input; 0 = 1.
	Seed uint64

	// StreamBytes is the size of the streaming-read buffer (default 1 GiB, quick too).
	StreamBytes int
	// StreamPasses is the number of timed passes per thread count (default 7, quick 3).
	StreamPasses int
	// RotateBytes is the least total size of the weight copies a GEMV rotates through
	// (default 4x the L3 cache, so every call streams its weights from DRAM).
	RotateBytes int
	// SampleTime is how long one micro-benchmark (one GEMV shape, one op) keeps sampling
	// after MinSamples (default 300 ms, quick 60 ms).
	SampleTime time.Duration
	// MinSamples is the least number of timed calls per micro-benchmark (default 7, quick 3).
	MinSamples int
	// DispatchSamples is the number of timed hot dispatches per mechanism (default 20000,
	// quick 4000); ColdSamples the number of dispatches after an idle gap (default 200,
	// quick 40); PingPongBatches the number of ping-pong samples (default 2000, quick 400).
	DispatchSamples, ColdSamples, PingPongBatches int
	// SmallOps times each op's smallest parity case instead of its decode-size one (smoke
	// runs on slow kernels, e.g. the pure-Go port under emulation).
	SmallOps bool
	// GemvShapes names the GEMV shapes to run (q, k/v, o, gate+up, gate, down, logits);
	// nil = all (quick: q, k/v, gate+up, down, logits).
	GemvShapes []string
	// TypeShapes are the rows x cols shapes of the one-thread GEMV of every weight type and
	// kernel variant; cols must be multiples of 256 (the K-quants' super-blocks). nil = Qwen2's
	// down projection 896x4864 and Llama's 2048x2048, 8192x2048, 2048x8192 (quick: the first
	// two).
	TypeShapes [][2]int
	// GonumMaxWeights is the largest rows*cols run through gonum's FP32 Sgemv (default
	// 4864*896: the larger shapes take too long in FP32 and are skipped).
	GonumMaxWeights int
	// AttnCtx are the cache lengths of the decode attention timings (default 128, 512, 2048,
	// capped at Config.MaxCtx).
	AttnCtx []int
	// DecodeTokens is the decode length from an empty cache (default 64, as llama-bench
	// tg64); PrefillTokens the prompt length (default 128, as pp128; also the token count
	// of the prefill-shaped op timings).
	DecodeTokens, PrefillTokens int
	// Repeats is how many times each whole-model measurement runs; the median is reported
	// (default 3, quick 1).
	Repeats int
	// SkipModels leaves out the whole-model section, the decode breakdown and decode at
	// depth.
	SkipModels bool
	// Depths are the prompt lengths of the decode-at-depth section (default 0, 512, 2048,
	// 8192; quick 0, 512) and DepthPrefill its prefill lengths from an empty cache (default
	// 512, 2048; quick 512; `kernelrt bench -depth` also times 8192). The section builds the
	// synthetic Q8_0 model once per KV cache type (f32, f16, q8_0); see MeasureDepth.
	Depths, DepthPrefill []int
}

// settings are Options with every default filled in.
type settings struct {
	Options
	cfg orchestrator.Config
	l3  int
}

// Settings is the resolved configuration of a run, recorded in the report.
type Settings struct {
	Quick           bool     `json:"quick"`
	StreamBytes     int      `json:"stream_bytes"`
	StreamPasses    int      `json:"stream_passes"`
	RotateBytes     int      `json:"rotate_bytes"`
	SampleTimeMs    float64  `json:"sample_time_ms"`
	MinSamples      int      `json:"min_samples"`
	DispatchSamples int      `json:"dispatch_samples"`
	ColdSamples     int      `json:"cold_samples"`
	PingPongBatches int      `json:"pingpong_batches"`
	GemvShapes      []string `json:"gemv_shapes"`
	TypeShapes      [][2]int `json:"type_shapes"`
	GonumMaxWeights int      `json:"gonum_max_weights"`
	AttnCtx         []int    `json:"attn_ctx"`
	DecodeTokens    int      `json:"decode_tokens"`
	PrefillTokens   int      `json:"prefill_tokens"`
	Repeats         int      `json:"repeats"`
	Depths          []int    `json:"depths"`
	DepthPrefill    []int    `json:"depth_prefill"`
	Seed            uint64   `json:"seed"`
	Config          string   `json:"config"`
}

// allGemvShapes is the order shapes are reported in.
var allGemvShapes = []string{"q", "k/v", "o", "gate+up", "gate", "down", "logits"}

func resolve(o Options, l3 int) settings {
	s := settings{Options: o, l3: l3}
	if o.Config != nil {
		s.cfg = *o.Config
	} else {
		s.cfg = orchestrator.Qwen2_0_5B()
	}
	def := func(v *int, full, quick int) {
		if *v <= 0 {
			if o.Quick {
				*v = quick
			} else {
				*v = full
			}
		}
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	def(&s.StreamBytes, 1<<30, 1<<30)
	def(&s.StreamPasses, 7, 3)
	def(&s.RotateBytes, 4*l3, 4*l3)
	if s.SampleTime <= 0 {
		s.SampleTime = 300 * time.Millisecond
		if o.Quick {
			s.SampleTime = 60 * time.Millisecond
		}
	}
	def(&s.MinSamples, 7, 3)
	def(&s.DispatchSamples, 20000, 4000)
	def(&s.ColdSamples, 200, 40)
	def(&s.PingPongBatches, 2000, 400)
	if s.GemvShapes == nil {
		if o.Quick {
			s.GemvShapes = []string{"q", "k/v", "gate+up", "down", "logits"}
		} else {
			s.GemvShapes = allGemvShapes
		}
	}
	if s.TypeShapes == nil {
		s.TypeShapes = [][2]int{{896, 4864}, {2048, 2048}, {8192, 2048}, {2048, 8192}}
		if o.Quick {
			s.TypeShapes = s.TypeShapes[:2]
		}
	}
	def(&s.GonumMaxWeights, 4864*896, 4864*896)
	if s.AttnCtx == nil {
		s.AttnCtx = []int{128, 512, 2048}
	}
	var ctx []int
	for _, c := range s.AttnCtx {
		if c > 0 && c <= s.cfg.MaxCtx {
			ctx = append(ctx, c)
		}
	}
	if len(ctx) == 0 {
		ctx = []int{s.cfg.MaxCtx}
	}
	s.AttnCtx = ctx
	def(&s.DecodeTokens, 64, 64)
	def(&s.PrefillTokens, 128, 128)
	s.DecodeTokens = min(s.DecodeTokens, s.cfg.MaxCtx-1)
	s.PrefillTokens = min(s.PrefillTokens, s.cfg.MaxCtx, s.cfg.MaxBatch)
	def(&s.Repeats, 3, 1)
	if s.Depths == nil {
		s.Depths = []int{0, 512, 2048, 8192}
		if o.Quick {
			s.Depths = []int{0, 512}
		}
	}
	if s.DepthPrefill == nil {
		s.DepthPrefill = []int{512, 2048}
		if o.Quick {
			s.DepthPrefill = []int{512}
		}
	}
	return s
}

func (s *settings) export() Settings {
	c := s.cfg
	return Settings{Quick: s.Quick, StreamBytes: s.StreamBytes, StreamPasses: s.StreamPasses,
		RotateBytes: s.RotateBytes, SampleTimeMs: float64(s.SampleTime) / 1e6, MinSamples: s.MinSamples,
		DispatchSamples: s.DispatchSamples, ColdSamples: s.ColdSamples, PingPongBatches: s.PingPongBatches,
		GemvShapes: s.GemvShapes, TypeShapes: s.TypeShapes, GonumMaxWeights: s.GonumMaxWeights, AttnCtx: s.AttnCtx,
		DecodeTokens: s.DecodeTokens, PrefillTokens: s.PrefillTokens, Repeats: s.Repeats, Depths: s.Depths,
		DepthPrefill: s.DepthPrefill, Seed: s.Seed,
		Config: describeConfig(c)}
}
