package suite

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"github.com/kernelrt/kernelrt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/kernelrt/kernelrt/bench/omp"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// tinyConfig is a small Qwen2-like decoder: every shape a multiple of 32, a few layers.
func tinyConfig() orchestrator.Config {
	return orchestrator.Config{Layers: 2, Hidden: 128, Intermediate: 256, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 512, RopeTheta: 1e4, Eps: 1e-6, MaxCtx: 256, MaxBatch: 32}
}

// tinyOptions runs every section of the suite on tiny shapes in a second or two.
func tinyOptions() Options {
	c := tinyConfig()
	return Options{Quick: true, SmallOps: true, Config: &c, StreamBytes: 8 << 20, StreamPasses: 2, RotateBytes: 2 << 20,
		SampleTime: 2 * time.Millisecond, MinSamples: 3, DispatchSamples: 300, ColdSamples: 4, PingPongBatches: 30,
		GemvShapes: allGemvShapes, TypeShapes: [][2]int{{48, 512}}, AttnCtx: []int{64, 200}, DecodeTokens: 6, PrefillTokens: 16, Repeats: 2}
}

// checkFinite fails on any NaN, Inf or negative float64 anywhere in v.
func checkFinite(t *testing.T, path string, v reflect.Value) {
	t.Helper()
	switch v.Kind() {
	case reflect.Float64:
		if f := v.Float(); math.IsNaN(f) || math.IsInf(f, 0) || f < 0 {
			t.Errorf("%s = %v, want finite and >= 0", path, f)
		}
	case reflect.Pointer:
		if !v.IsNil() {
			checkFinite(t, path, v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).IsExported() {
				checkFinite(t, path+"."+v.Type().Field(i).Name, v.Field(i))
			}
		}
	case reflect.Slice, reflect.Array:
		for i := 0; i < v.Len(); i++ {
			checkFinite(t, path+"["+strconv.Itoa(i)+"]", v.Index(i))
		}
	}
}

func positive(t *testing.T, what string, vs ...float64) {
	t.Helper()
	for i, v := range vs {
		if !(v > 0) || math.IsInf(v, 0) {
			t.Errorf("%s: value %d = %v, want finite and positive", what, i, v)
		}
	}
}

func TestRunTiny(t *testing.T) {
	var progress bytes.Buffer
	opts := tinyOptions()
	start := time.Now()
	r, err := Run(opts, &progress)
	if err != nil {
		t.Fatalf("Run: %v\nprogress:\n%s", err, progress.String())
	}
	t.Logf("tiny run took %v", time.Since(start))
	checkFinite(t, "Report", reflect.ValueOf(r).Elem())

	m := r.Machine
	if m.CPU == "" || m.Kernels == "" || m.Pool == "" || m.Threads < 1 || m.GOMAXPROCS < 1 || m.L3Bytes <= 0 ||
		m.LoadStart == "" || m.LoadEnd == "" || m.OpenMP == "" || m.THP == "" {
		t.Errorf("machine section incomplete: %+v", m)
	}
	if want := 6 + len(gemvTypes); len(m.Arenas) != want { // stream, 2 gemv pools, gonum, 2 models, a pool per type
		t.Errorf("%d arenas recorded, want %d: %+v", len(m.Arenas), want, m.Arenas)
	}
	for _, a := range m.Arenas {
		if a.Bytes <= 0 || a.PageKind == "" {
			t.Errorf("arena %+v", a)
		}
	}
	thr := []int{1}
	if m.Threads > 1 {
		thr = append(thr, m.Threads)
	}

	if len(r.Bandwidth.Results) != len(thr) {
		t.Fatalf("bandwidth: %d results, want %d", len(r.Bandwidth.Results), len(thr))
	}
	for _, b := range r.Bandwidth.Results {
		positive(t, "bandwidth", b.MedianGBs, b.MinGBs, b.MaxGBs, b.MultiGBs, b.GBs)
		if len(b.Samples) != opts.StreamPasses || len(b.MultiSamples) != opts.StreamPasses {
			t.Errorf("bandwidth samples %d/%d, want %d", len(b.Samples), len(b.MultiSamples), opts.StreamPasses)
		}
	}

	names := map[string]bool{}
	for _, l := range r.Dispatch {
		names[l.Name] = true
		if strings.HasPrefix(l.Name, "clock") {
			continue // two clock reads may be one tick apart or none
		}
		positive(t, "dispatch "+l.Name, l.MedianUs, l.P99Us, l.MeanUs)
	}
	want := []string{"pool, hot (back to back)", "pool, cold (after idle gap)", "goroutines + sync.WaitGroup",
		"persistent workers + channels", "channels, workers locked to threads"}
	if m.Threads > 1 {
		want = append(want, "ping-pong floor (one cache line)")
	}
	for _, n := range want {
		if !names[n] {
			t.Errorf("dispatch: no %q row", n)
		}
	}

	if got, want := len(r.Gemv.Rows), len(allGemvShapes)*2*len(thr); got != want {
		t.Errorf("gemv: %d rows, want %d", got, want)
	}
	for _, g := range r.Gemv.Rows {
		positive(t, "gemv "+g.Shape+" "+g.Type, g.Ours.MedianUs, g.Ours.P99Us, g.GBs, g.PctBW, g.Serial.MedianUs, g.Speedup,
			float64(g.Active), float64(g.Copies), float64(g.WeightBytes))
		if (g.OMP != nil) != omp.Available() {
			t.Errorf("gemv %s %s: OpenMP result present = %v, peer available = %v", g.Shape, g.Type, g.OMP != nil, omp.Available())
		}
		if g.OMP != nil {
			positive(t, "gemv omp "+g.Shape, g.OMP.MedianUs, g.OMPGBs, g.VsOMP)
		}
		if g.GGMLUs != 0 {
			t.Errorf("gemv %s: peers.md numbers shown for a non-Qwen2 shape", g.Shape)
		}
	}
	simd := 0
	for _, v := range kernelrt.Variants() {
		if v != "ref" {
			simd++
		}
	}
	simd = max(simd, 1) // without SIMD variants the section measures ref
	if got, want := len(r.Gemv.Types), len(gemvTypes)*simd*len(opts.TypeShapes); got != want {
		t.Errorf("gemv by type: %d rows, want %d", got, want)
	}
	for _, g := range r.Gemv.Types {
		positive(t, "gemv "+g.Type+" "+g.Variant, g.Timing.MedianUs, g.GBs, g.PctBW, float64(g.Copies), float64(g.WeightBytes))
		if !strings.HasSuffix(g.Kernels, "/"+g.Variant) {
			t.Errorf("gemv %s %s ran kernels %s", g.Type, g.Variant, g.Kernels)
		}
	}
	if len(r.Gemv.Gonum) == 0 {
		t.Error("gonum: no rows")
	}
	for _, g := range r.Gemv.Gonum {
		positive(t, "gonum "+g.Shape, g.Timing.MedianUs, g.GBs, g.OursQ8Us, g.VsOurs)
	}

	if got, want := len(r.Ops), (kernelrt.NumOps+2+2+len(opts.AttnCtx)+1)*len(thr); got != want {
		t.Errorf("ops: %d rows, want %d", got, want)
	}
	for _, o := range r.Ops {
		positive(t, "op "+o.Op+" "+o.Shape, o.Timing.MedianUs, float64(o.Active))
	}

	if len(r.Models) != 2 {
		t.Fatalf("models: %d, want 2", len(r.Models))
	}
	for _, mr := range r.Models {
		positive(t, "model "+mr.Name, float64(mr.WeightBytes), float64(mr.Arena.Bytes))
		if len(mr.Runs) != len(thr) {
			t.Errorf("model %s: %d runs, want %d", mr.Name, len(mr.Runs), len(thr))
		}
		for _, run := range mr.Runs {
			positive(t, "model run "+mr.Name, run.DecodeTokS, run.DecodeLimit, run.DecodePct, run.PrefillTokS,
				run.PrefillLimit, run.PrefillPct, run.BandwidthGBs, run.DecodeWeightGB)
			if len(run.DecodeSamples) != opts.Repeats || len(run.PrefillSamples) != opts.Repeats {
				t.Errorf("model %s: %d/%d samples, want %d", mr.Name, len(run.DecodeSamples), len(run.PrefillSamples), opts.Repeats)
			}
			if run.LlamaDecode != 0 {
				t.Errorf("model %s: llama.cpp numbers shown for a non-Qwen2 shape", mr.Name)
			}
		}
	}
	if len(r.Breakdown) != 2 {
		t.Fatalf("breakdown: %d, want 2", len(r.Breakdown))
	}
	for _, b := range r.Breakdown {
		positive(t, "breakdown "+b.Model, b.TokenUs, b.OpsUs)
		if len(b.Ops) == 0 {
			t.Errorf("breakdown %s: no ops", b.Model)
		}
		sum := 0.0
		for _, o := range b.Ops {
			positive(t, "breakdown op "+o.Op, o.TotalUs, o.MeanUs, float64(o.Calls))
			sum += o.Pct
		}
		if sum <= 0 || sum > 100.5 {
			t.Errorf("breakdown %s: op percentages sum to %.1f", b.Model, sum)
		}
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not read back: %v", err)
	}
	if len(back.Gemv.Rows) != len(r.Gemv.Rows) || back.Machine.CPU != r.Machine.CPU {
		t.Error("JSON round trip lost data")
	}
	var txt bytes.Buffer
	if err := r.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"== Machine", "== Streaming read bandwidth", "== Dispatch latency", "== GEMV", "gonum blas32",
		"== GEMV by weight type and kernel variant",
		"== Other ops", "== Whole model", "== One decode token"} {
		if !strings.Contains(txt.String(), h) {
			t.Errorf("text report has no %q section", h)
		}
	}
	if !strings.Contains(progress.String(), "== gemv") {
		t.Error("no progress output")
	}
	// The charts: well-formed XML, one bar per GEMV row, one line per model and phase.
	var gsvg, msvg bytes.Buffer
	if err := r.WriteGemvSVG(&gsvg); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteModelSVG(&msvg); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{"gemv": gsvg.Bytes(), "model": msvg.Bytes()} {
		d := xml.NewDecoder(bytes.NewReader(b))
		for {
			if _, err := d.Token(); err == io.EOF {
				break
			} else if err != nil {
				t.Fatalf("%s.svg is not well-formed: %v", name, err)
			}
		}
	}
	if n := strings.Count(gsvg.String(), "<rect x="); n < len(r.Gemv.Rows)+len(r.Gemv.Types) {
		t.Errorf("gemv.svg has %d bars for %d rows", n, len(r.Gemv.Rows)+len(r.Gemv.Types))
	}
	if n := strings.Count(msvg.String(), "<polyline"); n != 2*len(r.Models) {
		t.Errorf("model.svg has %d lines for %d models", n, len(r.Models))
	}
}

func TestModelHook(t *testing.T) {
	opts := tinyOptions()
	opts.GemvShapes = []string{"k/v"}
	opts.AttnCtx = []int{64}
	opts.Repeats = 1
	called := 0
	opts.Model = func(build orchestrator.BuildOptions) (*orchestrator.Model, string, error) {
		called++
		if !build.Arena.Prefault {
			t.Error("hook: build options do not prefault")
		}
		m, err := orchestrator.NewSynthetic(tinyConfig(), orchestrator.RecipeQ8_0(), 5, build)
		return m, "tiny.gguf", err
	}
	r, err := Run(opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	if called != 1 || len(r.Models) != 1 || r.Models[0].Source != "tiny.gguf" || r.Models[0].Name != "tiny.gguf" {
		t.Fatalf("hook called %d times; models %+v", called, r.Models)
	}
}

func TestRunRejectsBadOptions(t *testing.T) {
	if _, err := Run(Options{Threads: -1}, nil); err == nil {
		t.Error("Threads -1: no error")
	}
	opts := tinyOptions()
	opts.GemvShapes = []string{"nope"}
	opts.SkipModels = true
	if _, err := Run(opts, nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Errorf("unknown GEMV shape: err = %v", err)
	}
	opts = tinyOptions()
	opts.GemvShapes = []string{"k/v"}
	opts.TypeShapes = [][2]int{{64, 96}}
	opts.SkipModels = true
	if _, err := Run(opts, nil); err == nil || !strings.Contains(err.Error(), "64x96") {
		t.Errorf("type shape with cols %% 256 != 0: err = %v", err)
	}
	bad := tinyConfig()
	bad.Hidden = 100
	if _, err := Run(Options{Config: &bad}, nil); err == nil {
		t.Error("invalid config: no error")
	}
}

func TestPeersOnlyForQwen2(t *testing.T) {
	if !isQwen2_0_5B(orchestrator.Qwen2_0_5B()) || isQwen2_0_5B(tinyConfig()) {
		t.Fatal("isQwen2_0_5B")
	}
	if tg, pp := llamaTokS("q8_0", 2); tg != 22.3 || pp != 115 {
		t.Errorf("llama.cpp q8_0 2 threads = %v/%v", tg, pp)
	}
	if ggmlUs("q8_0", 896, 896, 1) != 126.8 || ggmlUs("q8_0", 896, 896, 3) != 0 {
		t.Error("ggmlUs")
	}
}
