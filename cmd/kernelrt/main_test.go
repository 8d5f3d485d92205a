package main

import (
	"bytes"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/bench/suite"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// tinyModel writes a small synthetic qwen2 GGUF file (vocab 300, context 64).
func tinyModel(t *testing.T) string {
	t.Helper()
	cfg := orchestrator.Config{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 4, KVHeads: 2, HeadDim: 16, Vocab: 300,
		RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}
	return writeSynthetic(t, cfg, orchestrator.RecipeMixed(), 3)
}

// writeSynthetic writes a synthetic GGUF model of shape cfg into the test's directory.
func writeSynthetic(t *testing.T, cfg orchestrator.Config, r orchestrator.Recipe, seed uint64) string {
	t.Helper()
	b := gguf.NewBuilder()
	if err := orchestrator.SyntheticGGUF(b, cfg, r, seed); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.WriteTo(f); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return p
}

func run(args ...string) (code int, stdout, stderr string) {
	var o, e bytes.Buffer
	code = Main(args, strings.NewReader(""), &o, &e)
	return code, o.String(), e.String()
}

func TestUsageErrors(t *testing.T) {
	model := tinyModel(t)
	cases := []struct {
		args []string
		code int
		want string // in stderr
	}{
		{nil, 2, "usage: kernelrt <command>"},
		{[]string{"frobnicate"}, 2, `unknown command "frobnicate"`},
		{[]string{"run"}, 2, "-model is required"},
		{[]string{"run", "-model", model}, 2, "exactly one of -p TEXT and -tokens IDS"},
		{[]string{"run", "-model", model, "-p", "x", "-tokens", "1"}, 2, "exactly one of -p TEXT and -tokens IDS"},
		{[]string{"run", "-model", model, "-tokens", ""}, 2, "-tokens is empty"},
		{[]string{"run", "-model", model, "-p", "x", "-logits", "o.json"}, 2, "-logits needs -tokens"},
		{[]string{"run", "-model", model, "-tokens", "1", "-chat"}, 2, "-chat needs -p"},
		{[]string{"run", "-model", model, "-p", "x", "-top-p", "2"}, 2, "TopP"},
		{[]string{"run", "-model", model, "-p", "x", "-temp", "NaN"}, 2, "Temperature"},
		{[]string{"run", "-model", model, "-tokens", "1", "-n", "9223372036854775807"}, 2, "-n must be 0 to 16777216"},
		{[]string{"run", "-model", model, "-tokens", "1", "-threads", "12000"}, 2, "-threads must be 0 (one per usable core) to 1024"},
		{[]string{"run", "-model", model, "-tokens", "1", "-logits", model}, 2, "refusing to overwrite"},
		{[]string{"run", "-model", model, "-tokens", "1", "-logits", filepath.Join(t.TempDir(), "no", "dir", "x.json")}, 1, "does not exist"},
		{[]string{"synth", "-out", filepath.Join(t.TempDir(), "x.gguf"), "-ctx", "5000000000"}, 2, "-ctx must be 1 to 16777216"},
		{[]string{"synth", "-out", "x.gguf", "-shape", "huge"}, 2, `-shape "huge"`},
		{[]string{"chat", "-model", model, "-n", "-3"}, 2, "-n must be >= 0"},
		{[]string{"run", "-model", model, "-tokens", "1,x,3"}, 2, `item 2 ("x") is not a token id`},
		{[]string{"run", "-model", model, "-tokens", "1,-3"}, 2, `item 2 ("-3")`},
		{[]string{"run", "-model", model, "-tokens", "1", "-n", "-2"}, 2, "-n must be 0 to"},
		{[]string{"run", "-model", model, "-tokens", "1", "-kv", "q8"}, 2, `-kv "q8": want f16, f32 or q8_0`},
		{[]string{"run", "-model", model, "-tokens", "1", "-threads", "-2"}, 2, "-threads must be 0 (one per usable core) to"},
		{[]string{"run", "-model", model, "-tokens", "1", "extra"}, 2, "unexpected arguments"},
		{[]string{"run", "-bogus"}, 2, "flag provided but not defined: -bogus"},
		{[]string{"run", "-model", filepath.Join(t.TempDir(), "none.gguf"), "-tokens", "1"}, 1, "no such file"},
		{[]string{"run", "-model", model, "-tokens", "1,300"}, 1, "id 300 (item 2) is outside the vocabulary of 300 tokens"},
		{[]string{"run", "-model", model, "-tokens", "1,2,3", "-n", "70"}, 1, "exceeds the model's context_length = 64"},
		{[]string{"bench", "-kv", "f16"}, 2, "-kv applies to -model and -depth benchmarks only"},
		{[]string{"bench", "-model", model, "-suite", "-pp", "8"}, 2, "-pp does not apply to -suite"},
		{[]string{"bench", "-model", model, "-pp", "0"}, 2, `-pp: item 1 ("0") must be an integer >= 1`},
		{[]string{"bench", "-model", model, "-pp", "8,16"}, 2, "-kv and -pp take one value without -depth"},
		{[]string{"bench", "-depth", "0,x"}, 2, `-depth: item 2 ("x") must be an integer >= 0`},
		{[]string{"bench", "-depth", "8", "-suite", "-model", model}, 2, "-depth does not apply to -suite"},
		{[]string{"bench", "-depth", "8", "-model", model, "-kv", "f16,q4"}, 2, `-kv "q4"`},
		{[]string{"bench", "-depth", "8", "-pp", "8", "-model", model, "-kv", "q8_0", "-stream-mb", "8"}, 1, "a q8_0 KV cache needs a multiple of 32"},
		{[]string{"synth"}, 2, "-out is required"},
		{[]string{"synth", "-out", "x.gguf", "-recipe", "q4"}, 2, `-recipe "q4"`},
	}
	for _, c := range cases {
		code, _, stderr := run(c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("kernelrt %q: exit %d, stderr %q; want exit %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
	if code, out, _ := run("help"); code != 0 || !strings.Contains(out, "commands:") {
		t.Errorf("help: exit %d, %q", code, out)
	}
	if code, _, stderr := run("run", "-h"); code != 0 || !strings.Contains(stderr, "-logits") {
		t.Errorf("run -h: exit %d, %q", code, stderr)
	}
}

type logitsJSON struct {
	PromptIDs     []int32     `json:"prompt_ids"`
	PrefillLogits [][]float32 `json:"prefill_logits"`
	DecodeIDs     []int32     `json:"decode_ids"`
	DecodeLogits  [][]float32 `json:"decode_logits"`
}

func TestRun(t *testing.T) {
	model := tinyModel(t)
	dir := t.TempDir()
	for _, kv := range []string{"f32", "f16"} {
		out := filepath.Join(dir, kv+".json")
		code, stdout, stderr := run("run", "-model", model, "-tokens", "1, 17,42", "-n", "5", "-threads", "2", "-kv", kv, "-logits", out)
		if code != 0 {
			t.Fatalf("kv %s: exit %d: %s", kv, code, stderr)
		}
		ids := strings.Split(strings.TrimSpace(stdout), ",")
		if len(ids) != 5 {
			t.Fatalf("kv %s: stdout %q: want 5 ids", kv, stdout)
		}
		raw, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		var j logitsJSON
		if err := json.Unmarshal(raw, &j); err != nil {
			t.Fatalf("kv %s: -logits is not JSON: %v", kv, err)
		}
		if len(j.PromptIDs) != 3 || j.PromptIDs[1] != 17 || len(j.PrefillLogits) != 3 || len(j.DecodeIDs) != 5 || len(j.DecodeLogits) != 5 {
			t.Fatalf("kv %s: JSON shape: %d prompt ids, %d prefill rows, %d decode ids, %d decode rows",
				kv, len(j.PromptIDs), len(j.PrefillLogits), len(j.DecodeIDs), len(j.DecodeLogits))
		}
		for _, row := range append(j.PrefillLogits, j.DecodeLogits...) {
			if len(row) != 300 {
				t.Fatalf("a logits row has %d values, want 300", len(row))
			}
		}
		for i, id := range j.DecodeIDs {
			if got := argmax(j.DecodeLogits[i]); got != id {
				t.Errorf("decode id %d = %d, but its logits' argmax is %d", i, id, got)
			}
			if ids[i] != strconv.Itoa(int(id)) {
				t.Errorf("stdout id %d is %q, JSON says %d", i, ids[i], id)
			}
		}
		if !slicesEqual(j.DecodeLogits[0], j.PrefillLogits[2]) {
			t.Error("the first decode id is not chosen by the last prompt position's logits")
		}
		// The prompt's logits agree with a direct run of the model (serial kernels).
		kvt, _ := orchestrator.ParseKVType(kv)
		m, err := orchestrator.LoadGGUF(model, orchestrator.LoadOptions{AllLogits: true, MaxBatch: 3, KV: kvt})
		if err != nil {
			t.Fatal(err)
		}
		want, err := m.Prefill(kernelrt.Serial{}, j.PromptIDs)
		if err != nil {
			t.Fatal(err)
		}
		for p := range j.PrefillLogits {
			for i, g := range j.PrefillLogits[p] {
				if w := want[p*300+i]; math.Abs(float64(g-w)) > 1e-4*(1+math.Abs(float64(w))) {
					t.Fatalf("prompt position %d logit %d: %v from the CLI, %v from a serial run", p, i, g, w)
				}
			}
		}
		_ = m.Close()
	}
}

func slicesEqual(a, b []float32) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestRunNoLogits(t *testing.T) {
	model := tinyModel(t)
	code, stdout, stderr := run("run", "-model", model, "-tokens", "5", "-n", "1")
	if code != 0 || len(strings.Split(strings.TrimSpace(stdout), ",")) != 1 {
		t.Fatalf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	code, stdout, stderr = run("run", "-model", model, "-tokens", "5,6", "-n", "0")
	if code != 0 || strings.TrimSpace(stdout) != "" {
		t.Fatalf("-n 0: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
}

// TestBenchDepth: decode at depth per KV type and prefill, with the limit and target lines.
func TestBenchDepth(t *testing.T) {
	model := tinyModel(t)
	js := filepath.Join(t.TempDir(), "depth.json")
	code, stdout, stderr := run("bench", "-model", model, "-depth", "0,20", "-pp", "8,24", "-tg", "4", "-r", "2", "-kv", "f32,f16",
		"-stream-mb", "16", "-threads", "2", "-json", js)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"| f32   | tg4 @ d20 ", "| f16   | tg4 @ d0 ", "| f16   | pp24 ", "limit t/s", "best %", "best % med", "target: f16",
		"best streaming-read sample"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var d suite.Depth
	if err := json.Unmarshal(raw, &d); err != nil {
		t.Fatal(err)
	}
	if len(d.Decode) != 4 || len(d.Prefill) != 4 || d.BandwidthGBs <= 0 || len(d.BandwidthSamples) < 4 {
		t.Fatalf("JSON %+v", d)
	}
	for _, r := range d.Decode {
		// The median sample is at most the best one, so its limit is at most the best one's.
		if r.TokS <= 0 || r.BestTokS < r.TokS || len(r.Samples) != 2 || r.LimitTokS <= 0 || r.KVBytes <= 0 || r.MedBWPctLimit < r.BestPctLimit {
			t.Errorf("decode row %+v", r)
		}
	}
	t.Log("\n" + stdout)
}

func TestBenchModel(t *testing.T) {
	model := tinyModel(t)
	js := filepath.Join(t.TempDir(), "bench.json")
	code, stdout, stderr := run("bench", "-model", model, "-pp", "8", "-tg", "4", "-r", "2", "-stream-mb", "16", "-threads", "2", "-json", js)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, w := range []string{"| pp8 ", "| tg4 ", "% of limit", "bandwidth:"} {
		if !strings.Contains(stdout, w) {
			t.Errorf("output lacks %q:\n%s", w, stdout)
		}
	}
	raw, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	var r benchResult
	if err := json.Unmarshal(raw, &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Tests) != 2 || r.Tests[1].TokS <= 0 || len(r.Tests[1].Samples) != 2 || r.BandwidthGBs <= 0 {
		t.Errorf("JSON %+v", r)
	}
	t.Log("\n" + stdout)
}
