package serve

import (
	"context"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/gguf"
	"github.com/kernelrt/kernelrt/orchestrator"
	"github.com/kernelrt/kernelrt/sample"
)

// tinyConfig is a synthetic qwen2 model small enough that a forward step costs
// microseconds: the tests exercise scheduling, not arithmetic.
func tinyConfig() orchestrator.Config {
	return orchestrator.Config{Layers: 2, Hidden: 64, Intermediate: 128, Heads: 2, KVHeads: 1, HeadDim: 32,
		Vocab: 320, RopeTheta: 1e4, Eps: 1e-6, MaxCtx: 256, MaxBatch: 64}
}

var (
	modelOnce sync.Once
	modelPath string
	modelErr  error
)

// writeModel writes the synthetic GGUF of cfg (Q8_0, byte-level tokenizer, ChatML template)
// to path.
func writeModel(path string, cfg orchestrator.Config) error {
	b := gguf.NewBuilder()
	if err := orchestrator.SyntheticGGUF(b, cfg, orchestrator.RecipeQ8_0(), 3); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := b.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// testModelFile writes cfg's synthetic model into the test's temporary directory.
func testModelFile(t *testing.T, name string, cfg orchestrator.Config) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := writeModel(path, cfg); err != nil {
		t.Fatal(err)
	}
	return path
}

// tinyFile writes the synthetic GGUF of tinyConfig once per test binary.
func tinyFile(t testing.TB) string {
	t.Helper()
	modelOnce.Do(func() {
		dir, err := os.MkdirTemp("", "serve-test")
		if err != nil {
			modelErr = err
			return
		}
		modelPath = filepath.Join(dir, "tiny.gguf")
		modelErr = writeModel(modelPath, tinyConfig())
	})
	if modelErr != nil {
		t.Fatal(modelErr)
	}
	return modelPath
}

func TestMain(m *testing.M) {
	code := m.Run()
	if modelPath != "" {
		os.RemoveAll(filepath.Dir(modelPath))
	}
	os.Exit(code)
}

// loadTiny loads the tiny model with slots sequences, on the serial kernels.
func loadTiny(t testing.TB, slots int) (*orchestrator.Model, generate.Tokenizer) {
	t.Helper()
	m, rt, tok, err := generate.Load(tinyFile(t), generate.OpenOptions{Load: orchestrator.LoadOptions{Slots: slots}})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	t.Cleanup(func() { m.Close() })
	return m, tok
}

// newTestEngine starts an engine over m on the serial kernels, closed at the end of the test.
func newTestEngine(t testing.TB, m Model, tok generate.Tokenizer, o EngineOptions) *Engine {
	t.Helper()
	e, err := NewEngine(m, kernelrt.Serial{}, tok, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e
}

// complete submits r and waits for its whole text and result, failing the test on an error.
func complete(t testing.TB, e *Engine, r Request) (string, Result) {
	t.Helper()
	st, err := e.Submit(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	text, res, err := st.Text(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return text, res
}

// greedy is a request's options for greedy decoding of n tokens.
func greedy(n int) generate.Options {
	return generate.Options{MaxTokens: n, Sampling: sample.Options{}}
}

// soloText generates prompt greedily with generate.Generator on a one-slot model of the
// same file: what the engine must produce for the same request.
func soloText(t testing.TB, prompt string, o generate.Options) (string, generate.Stats) {
	t.Helper()
	m, tok := loadTiny(t, 1)
	g, err := generate.New(m, kernelrt.Serial{}, tok)
	if err != nil {
		t.Fatal(err)
	}
	text, err := g.Generate(context.Background(), prompt, o)
	if err != nil {
		t.Fatal(err)
	}
	return text, g.Stats()
}
