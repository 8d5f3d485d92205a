package orchestrator

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/kernelrt/kernelrt"
)

// TestModelConcurrentUse: one Model and one Runtime used from 8 goroutines, each running
// its own prompt from an empty cache and checking the logits against the serial run of that
// prompt. The model's methods take turns, so every result is exact; under -race the
// detector watches the model's state.
func TestModelConcurrentUse(t *testing.T) {
	m := newTiny(t, RecipeQ8_0())
	rt := newRT(t)
	const goroutines = 8
	calls := 40
	if testing.Short() {
		calls = 10
	}
	prompts := make([][]int32, goroutines)
	want := make([][]float32, goroutines)
	for g := range prompts {
		prompts[g] = []int32{int32(g + 1), int32(3 * g), 7}
		m.Reset()
		l, err := m.Prefill(kernelrt.Serial{}, prompts[g])
		if err != nil {
			t.Fatal(err)
		}
		want[g] = slices.Clone(l)
	}
	var mu sync.Mutex // one sequence at a time: Reset + Prefill must not interleave
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for g := 0; g < goroutines; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < calls; i++ {
				mu.Lock()
				m.Reset()
				l, err := m.Prefill(rt, prompts[g])
				var d float64
				if err == nil {
					d = maxDiff(l, want[g])
				}
				mu.Unlock()
				if err != nil {
					errs <- err
					return
				}
				if d > 1e-3 {
					errs <- fmt.Errorf("goroutine %d call %d: logits differ by %g", g, i, d)
					return
				}
				// Methods without the outer lock interleave freely and must stay consistent.
				if p := m.Pos(); p < 0 || p > m.Cfg.MaxCtx {
					errs <- fmt.Errorf("Pos() = %d", p)
					return
				}
			}
		}(g)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// TestAllOrNothing: a Prefill whose later chunk holds a bad id is refused before any work,
// naming the id's index in the caller's slice, and leaves Pos and the cached positions as
// they were; so does a Decode past the vocabulary.
func TestAllOrNothing(t *testing.T) {
	m := newTiny(t, RecipeMixed()) // MaxBatch 16: a 40-token prompt is three chunks
	if _, err := m.Prefill(kernelrt.Serial{}, []int32{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	kc := m.kv.layerK(0)
	prompt := make([]int32, 40)
	for i := range prompt {
		prompt[i] = int32(i)
	}
	prompt[37] = int32(m.Cfg.Vocab) // in the third chunk
	_, err := m.Prefill(kernelrt.Serial{}, prompt)
	if err == nil || !errContains(err, "index 37") {
		t.Fatalf("Prefill with a bad id at index 37: %v, want an error naming index 37", err)
	}
	if m.Pos() != 3 || !slices.Equal(kc, m.kv.layerK(0)) {
		t.Fatalf("after the refused Prefill: Pos %d (want 3), cache changed %v", m.Pos(), !slices.Equal(kc, m.kv.layerK(0)))
	}
	if _, err := m.Decode(kernelrt.Serial{}, -1); err == nil || m.Pos() != 3 {
		t.Fatalf("Decode(-1): err %v, Pos %d", err, m.Pos())
	}
	if err := m.Truncate(4); err == nil {
		t.Fatal("Truncate past Pos succeeded")
	}
	if err := m.Truncate(1); err != nil || m.Pos() != 1 {
		t.Fatalf("Truncate(1): %v, Pos %d", err, m.Pos())
	}
}

// TestClosedModel: every method after Close returns ErrClosed (it used to fault).
func TestClosedModel(t *testing.T) {
	m, err := NewSynthetic(tinyConfig(), RecipeQ8_0(), 7, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := m.Prefill(kernelrt.Serial{}, []int32{1}); !errors.Is(err, ErrClosed) {
		t.Errorf("Prefill after Close: %v", err)
	}
	if _, err := m.Decode(kernelrt.Serial{}, 1); !errors.Is(err, ErrClosed) {
		t.Errorf("Decode after Close: %v", err)
	}
	if err := m.Truncate(0); !errors.Is(err, ErrClosed) {
		t.Errorf("Truncate after Close: %v", err)
	}
}

// TestNonFiniteLogits: a NaN fp16 scale in one weight block makes the forward pass return a
// *NonFiniteError naming the first block whose output went non-finite, and leaves Pos as it
// was. (A GGUF file with one NaN scale used to print logits of 0 and exit 0.)
func TestNonFiniteLogits(t *testing.T) {
	for _, tc := range []struct {
		name, step string
		poison     func(m *Model)
	}{
		{"attn_output layer 1", "layer 1 attention block", func(m *Model) { m.Layers[1].O.Q8[5].D = 0x7e00 }},
		{"ffn_down layer 0", "layer 0 feed-forward block", func(m *Model) { m.Layers[0].Down.Q8[0].D = 0x7c00 }}, // +Inf
		{"output head", "output head", func(m *Model) { m.Output.Q8[m.Output.Cols/32*99].D = 0x7e00 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTiny(t, RecipeQ8_0())
			if _, err := m.Prefill(kernelrt.Serial{}, []int32{4}); err != nil {
				t.Fatal(err)
			}
			tc.poison(m)
			for _, e := range []kernelrt.Ops{kernelrt.Serial{}, newRT(t)} {
				_, err := m.Decode(e, 17) // the head (tied to the embedding) has a poisoned block in row 99
				var nf *NonFiniteError
				if !errors.As(err, &nf) || !errContains(err, tc.step) {
					t.Fatalf("%T: Decode = %v, want a NonFiniteError naming %q", e, err, tc.step)
				}
				if m.Pos() != 1 {
					t.Fatalf("Pos %d after the failed decode, want 1", m.Pos())
				}
			}
		})
	}
}

func errContains(err error, s string) bool { return err != nil && strings.Contains(err.Error(), s) }
