package orchestrator

import (
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt"
)

// newSlots builds the tiny model with a cache of n slots.
func newSlots(t *testing.T, r Recipe, n int) *Model {
	t.Helper()
	c := tinyConfig()
	c.Slots = n
	m, err := NewSynthetic(c, r, 7, BuildOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// slotFile writes a small GGUF model once per test (head size 32), to load with any cache type.
func slotFile(t *testing.T) string {
	t.Helper()
	return testModel{shape: testShapes[4], types: testTypeSets[3], seed: 5}.write(t, t.TempDir())
}

// slidingModelFile writes a 7-layer gemma3 model with a window of 3 (head size 32, two KV
// heads), for the sliding-window cache tests.
func slidingModelFile(t *testing.T) string {
	t.Helper()
	return testModel{shape: testShape{"h128-l7", 128, 7, 128, 4, 2, 60, 48, 1e6}, types: testTypeSets[3], seed: 5,
		arch: "gemma3", headDim: 32, window: 3}.write(t, t.TempDir())
}

// loadSlots loads path with a cache of n slots of type kv.
func loadSlots(t *testing.T, path string, kv KVType, n int) *Model {
	t.Helper()
	m, err := LoadGGUF(path, LoadOptions{KV: kv, Slots: n})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// closeTo fails unless a and b agree to the GEMM-vs-GEMV summation tolerance.
func closeTo(t *testing.T, what string, a, b []float32) {
	t.Helper()
	if len(a) != len(b) {
		t.Fatalf("%s: %d logits, want %d", what, len(a), len(b))
	}
	scale := 0.0
	for _, v := range b {
		scale = math.Max(scale, math.Abs(float64(v)))
	}
	if d := maxDiff(a, b); d > 1e-3*math.Max(1, scale) {
		t.Fatalf("%s: logits differ by %g (scale %g)", what, d, scale)
	}
}

// Sequences batched together in one ForwardBatch get the logits each would get alone: each
// attends only to its own slot, at its own positions, prefill chunks and decode steps mixed.
func TestForwardBatchMatchesSeparate(t *testing.T) {
	path := slotFile(t)
	for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
		t.Run(kv.String(), func(t *testing.T) {
			prompts := [][]int32{{3, 1, 4, 1, 5}, {9, 2, 6}, {5}}
			slot := []int{2, 0, 3} // not in order, and slot 1 stays empty
			batched := loadSlots(t, path, kv, 4)
			alone := make([]*Model, len(prompts))
			want := make([][]float32, len(prompts))
			for i, p := range prompts {
				alone[i] = loadSlots(t, path, kv, 1)
				l, err := alone[i].Prefill(kernelrt.Serial{}, p)
				if err != nil {
					t.Fatal(err)
				}
				want[i] = slices.Clone(l)
			}
			rt := newRT(t)
			var toks []int32
			var seqs []Seq
			for i, p := range prompts {
				toks = append(toks, p...)
				seqs = append(seqs, Seq{Slot: slot[i], Pos: 0, N: len(p), Logits: true})
			}
			got, err := batched.ForwardBatch(rt, toks, seqs)
			if err != nil {
				t.Fatal(err)
			}
			V := batched.Vocab()
			for i := range prompts {
				closeTo(t, "prefill of seq "+string(rune('A'+i)), got[i*V:(i+1)*V], want[i])
			}
			pos := []int{5, 3, 1}
			for step := 0; step < 4; step++ {
				toks, seqs = toks[:0], seqs[:0]
				for i := range prompts {
					id := int32(20 + 7*i + step)
					l, err := alone[i].Decode(kernelrt.Serial{}, id)
					if err != nil {
						t.Fatal(err)
					}
					want[i] = append(want[i][:0], l...)
					toks = append(toks, id)
					seqs = append(seqs, Seq{Slot: slot[i], Pos: pos[i], N: 1, Logits: true})
					pos[i]++
				}
				got, err := batched.ForwardBatch(rt, toks, seqs)
				if err != nil {
					t.Fatal(err)
				}
				for i := range prompts {
					closeTo(t, "decode", got[i*V:(i+1)*V], want[i])
				}
			}
		})
	}
}

// Only sequences asking for logits get a row, in order; a batch asking for none returns none.
func TestForwardBatchLogitsRows(t *testing.T) {
	m := newSlots(t, RecipeQ8_0(), 3)
	ref := newSlots(t, RecipeQ8_0(), 1)
	want, err := ref.Prefill(kernelrt.Serial{}, []int32{7, 8})
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.ForwardBatch(kernelrt.Serial{}, []int32{1, 2, 3, 7, 8}, []Seq{{Slot: 0, N: 3}, {Slot: 1, N: 2, Logits: true}})
	if err != nil {
		t.Fatal(err)
	}
	closeTo(t, "the one row asked for", got, want)
	got, err = m.ForwardBatch(kernelrt.Serial{}, []int32{4}, []Seq{{Slot: 2, N: 1}})
	if err != nil || len(got) != 0 {
		t.Fatalf("no logits asked: got %d floats, err %v", len(got), err)
	}
}

// Every malformed batch is refused with an error naming the field, and changes nothing: the
// next valid step gives what it would have given without the failed one.
func TestForwardBatchErrors(t *testing.T) {
	m := newSlots(t, RecipeQ8_0(), 2)
	ref := newSlots(t, RecipeQ8_0(), 2)
	c := m.Cfg
	for _, tc := range []struct {
		name string
		toks []int32
		seqs []Seq
		want string
	}{
		{"empty", nil, nil, "ForwardBatch of 0 tokens"},
		{"too many tokens", make([]int32, c.MaxBatch+1), []Seq{{N: c.MaxBatch + 1}}, "MaxBatch"},
		{"slot out of range", []int32{1}, []Seq{{Slot: 2, N: 1}}, "seqs[0].Slot = 2"},
		{"negative slot", []int32{1}, []Seq{{Slot: -1, N: 1}}, "seqs[0].Slot = -1"},
		{"no tokens", []int32{1}, []Seq{{N: 0}, {Slot: 1, N: 1}}, "seqs[0].N = 0"},
		{"duplicate slot", []int32{1, 2}, []Seq{{N: 1}, {N: 1}}, "seqs[1].Slot = 0 appears twice"},
		{"past the cache", []int32{1, 2}, []Seq{{Pos: c.MaxCtx - 1, N: 2}}, "MaxCtx"},
		{"negative position", []int32{1}, []Seq{{Pos: -1, N: 1}}, "position -1"},
		{"count mismatch", []int32{1, 2, 3}, []Seq{{N: 2}}, "hold 2 tokens, the batch 3"},
		{"bad token", []int32{1, int32(c.Vocab)}, []Seq{{N: 2}}, "1000"},
	} {
		_, err := m.ForwardBatch(kernelrt.Serial{}, tc.toks, tc.seqs)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one containing %q", tc.name, err, tc.want)
		}
	}
	seqs := []Seq{{Slot: 1, N: 2, Logits: true}}
	got, err := m.ForwardBatch(kernelrt.Serial{}, []int32{5, 6}, seqs)
	if err != nil {
		t.Fatal(err)
	}
	want, err := ref.ForwardBatch(kernelrt.Serial{}, []int32{5, 6}, seqs)
	if err != nil {
		t.Fatal(err)
	}
	if d := maxDiff(got, want); d != 0 {
		t.Fatalf("after refused batches the logits differ by %g", d)
	}
	m.Close()
	if _, err := m.ForwardBatch(kernelrt.Serial{}, []int32{1}, []Seq{{N: 1}}); err != ErrClosed {
		t.Fatalf("closed model: %v, want ErrClosed", err)
	}
}

// A config with a negative slot count is refused.
func TestSlotsValidate(t *testing.T) {
	c := tinyConfig()
	c.Slots = -1
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "Slots") {
		t.Fatalf("Slots = -1: %v", err)
	}
}

// A batched-decode step on a Runtime allocates nothing: mm's choice between the Q8_0 GEMM
// and per-token GEMVs is made once per Runtime, not per matmul.
func TestForwardBatchNoAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under the race detector")
	}
	m := newSlots(t, RecipeQ8_0(), 3)
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	seqs := []Seq{{Slot: 0, N: 1, Logits: true}, {Slot: 1, N: 1, Logits: true}, {Slot: 2, N: 1, Logits: true}}
	toks := []int32{1, 2, 3}
	step := func() {
		if _, err := m.ForwardBatch(rt, toks, seqs); err != nil {
			t.Fatal(err)
		}
		for i := range seqs {
			seqs[i].Pos++
		}
	}
	step()
	if n := testing.AllocsPerRun(20, step); n != 0 {
		t.Errorf("ForwardBatch of 3 one-token sequences: %v allocations per step, want 0", n)
	}
}

// Sequences of a gemma3 model batched in cache slots past the sliding window (3 positions,
// two KV heads: each slot's window is a view of that slot's rows) get the float64
// reference's logits for their own tokens, prefill and decode, with every KV cache type.
// (Against separately run models the batch differs only where a Q8_0 rounding flips, which
// this model's scaled embeddings make larger than TestForwardBatchMatchesSeparate allows.)
func TestForwardBatchSlidingWindow(t *testing.T) {
	path := slidingModelFile(t)
	ref := loadRef(t, path)
	rt := newRT(t)
	for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
		t.Run(kv.String(), func(t *testing.T) {
			ref.kv = kv
			tol := tolKV(tolQuantized, kv)
			m := loadSlots(t, path, kv, 4)
			prompts := [][]int32{{3, 1, 4, 1, 5}, {9, 2, 6}, {5}}
			slot := []int{2, 0, 3} // not in order, and slot 1 stays empty
			var toks []int32
			var seqs []Seq
			for i, p := range prompts {
				toks = append(toks, p...)
				seqs = append(seqs, Seq{Slot: slot[i], Pos: 0, N: len(p), Logits: true})
			}
			for step := 0; step < 5; step++ {
				got, err := m.ForwardBatch(rt, toks, seqs)
				if err != nil {
					t.Fatal(err)
				}
				V := m.Vocab()
				toks = toks[:0]
				for i := range prompts {
					want := ref.forward(prompts[i])
					if r := relErr(got[i*V:(i+1)*V], want[len(want)-1]); !(r <= tol) {
						t.Errorf("step %d, sequence %d (slot %d, %d tokens): relative error %.3g > %g", step, i, slot[i], len(prompts[i]), r, tol)
					}
					id := int32(20 + 7*i + step)
					seqs[i] = Seq{Slot: slot[i], Pos: len(prompts[i]), N: 1, Logits: true}
					prompts[i] = append(prompts[i], id)
					toks = append(toks, id)
				}
			}
		})
	}
}
