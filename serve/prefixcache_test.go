package serve

import (
	"slices"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/generate"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// runTokens submits a greedy prompt of token ids and waits for its text and result.
func runTokens(t *testing.T, e *Engine, prompt []int32, n int) (string, Result) {
	t.Helper()
	return complete(t, e, Request{Tokens: prompt, Options: greedy(n)})
}

// ids is a prompt of n token ids, different for each seed.
func ids(seed, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(10 + (seed*37+i*7+i*i)%290)
	}
	return out
}

// A slot's tokens survive another request that overwrites the slot: the prefix cache keeps a
// copy, and a later prompt extending them starts from it, with the same text as without.
func TestPrefixCacheSurvivesEviction(t *testing.T) {
	a, b := ids(1, 60), ids(2, 50)
	extend := func(p []int32, more ...int32) []int32 { return append(append([]int32(nil), p...), more...) }
	var want string
	for _, budget := range []int{0, 1 << 20} {
		m, tok := loadTiny(t, 1)
		e := newTestEngine(t, m, tok, EngineOptions{PrefixCacheBytes: budget})
		_, r1 := runTokens(t, e, extend(a, 5), 4)
		runTokens(t, e, b, 4) // one slot: this overwrites the first prompt's tokens
		text, r3 := runTokens(t, e, extend(a, 6, 7), 4)
		st := checkIdle(t, e)
		if r1.ReusedTokens != 0 {
			t.Errorf("first request reused %d", r1.ReusedTokens)
		}
		if budget == 0 {
			want = text
			if r3.ReusedTokens != 0 || st.PrefixCacheHits != 0 || st.PrefixCacheEntries != 0 {
				t.Fatalf("no prefix cache: reused %d, stats %+v", r3.ReusedTokens, st)
			}
			continue
		}
		if r3.ReusedTokens != len(a) {
			t.Errorf("reused %d of %d prompt tokens, want the shared %d", r3.ReusedTokens, r3.PromptTokens, len(a))
		}
		if st.PrefixCacheHits != 1 || st.RestoredTokens != uint64(r3.ReusedTokens) {
			t.Errorf("stats: %d hits, %d restored; want 1, %d", st.PrefixCacheHits, st.RestoredTokens, r3.ReusedTokens)
		}
		if st.PrefixCacheEntries < 1 || st.PrefixCacheBytes <= 0 || st.PrefixCacheBytes > int64(budget) {
			t.Errorf("stats: %d entries of %d bytes, budget %d", st.PrefixCacheEntries, st.PrefixCacheBytes, budget)
		}
		if text != want {
			t.Errorf("from the prefix cache %q, computed %q", text, want)
		}
	}
}

// The budget bounds the copies' memory: the least recently used go first.
func TestPrefixCacheBudget(t *testing.T) {
	m, tok := loadTiny(t, 1)
	per := m.PrefixBytes(1)
	budget := 150 * per // two copies of ~65 positions, not three
	e := newTestEngine(t, m, tok, EngineOptions{PrefixCacheBytes: budget})
	prompts := [][]int32{ids(1, 60), ids(2, 60), ids(3, 60), ids(4, 60)}
	for _, p := range prompts {
		runTokens(t, e, p, 4)
		if st := e.Stats(); st.PrefixCacheBytes > int64(budget) {
			t.Fatalf("the prefix cache holds %d bytes, budget %d", st.PrefixCacheBytes, budget)
		}
	}
	// Saved so far: 1, 2, 3 (each overwritten by the next); 1 went first, for 3.
	if _, r := runTokens(t, e, append(prompts[0], 1), 1); r.ReusedTokens != 0 {
		t.Errorf("prompt 1 reused %d tokens: it should have been evicted", r.ReusedTokens)
	}
	if _, r := runTokens(t, e, append(prompts[2], 1), 1); r.ReusedTokens != len(prompts[2]) {
		t.Errorf("prompt 3 reused %d tokens, want its %d", r.ReusedTokens, len(prompts[2]))
	}
	st := checkIdle(t, e)
	if st.PrefixCacheEntries > 2 || st.PrefixCacheBytes > int64(budget) || st.PrefixCacheHits != 1 {
		t.Errorf("%d entries of %d bytes (budget %d), %d hits", st.PrefixCacheEntries, st.PrefixCacheBytes, budget, st.PrefixCacheHits)
	}
}

// A model that cannot copy its cache cannot have a prefix cache; a negative budget is an error.
func TestPrefixCacheOptions(t *testing.T) {
	m, tok := loadTiny(t, 1)
	type plain struct{ Model }
	if _, err := NewEngine(plain{m}, kernelrt.Serial{}, tok, EngineOptions{PrefixCacheBytes: 1 << 20}); err == nil || !strings.Contains(err.Error(), "PrefixSaver") {
		t.Errorf("model without PrefixSaver: err = %v", err)
	}
	if _, err := NewEngine(m, kernelrt.Serial{}, tok, EngineOptions{PrefixCacheBytes: -1}); err == nil || !strings.Contains(err.Error(), "-1") {
		t.Errorf("negative budget: err = %v", err)
	}
}

// slidingFile writes a synthetic gemma3 model whose sliding-window layers keep a ring far
// shorter than the context (window 4, batch 8: 11 rows of 128).
func slidingFile(t *testing.T) string {
	t.Helper()
	c := tinyConfig()
	c.Arch, c.Layers, c.SlidingWindow, c.MaxCtx, c.MaxBatch = "gemma3", 7, 4, 128, 8
	return testModelFile(t, "sliding.gguf", c)
}

// With sliding-window layers, a slot's cached prefix is reused only where their ring still
// holds its window; otherwise the prompt runs in full, with the same text either way, and
// the prefix cache keeps only what the ring holds whole.
func TestPrefixReuseSlidingWindow(t *testing.T) {
	path := slidingFile(t)
	for _, budget := range []int{0, 1 << 20} {
		m, tok := loadSliding(t, path)
		e := newTestEngine(t, m, tok, EngineOptions{PrefixCacheBytes: budget})
		long := ids(5, 40)
		runTokens(t, e, long, 4)
		// 10 shared tokens: the ring moved past them long ago.
		text, r := runTokens(t, e, append(slices.Clone(long[:10]), 1, 2), 4)
		if r.ReusedTokens != 0 {
			t.Errorf("reused %d tokens whose window the ring no longer holds", r.ReusedTokens)
		}
		one, tok1 := loadSliding(t, path)
		fresh := newTestEngine(t, one, tok1, EngineOptions{NoPrefixReuse: true})
		if want, _ := runTokens(t, fresh, append(slices.Clone(long[:10]), 1, 2), 4); text != want {
			t.Errorf("after the ring moved: %q, alone %q", text, want)
		}
		// The whole previous prompt (short, in the ring) is reused.
		short := ids(6, 5)
		runTokens(t, e, short, 1)
		if _, r := runTokens(t, e, append(slices.Clone(short), 9), 1); r.ReusedTokens != len(short) {
			t.Errorf("reused %d of the %d tokens the ring holds", r.ReusedTokens, len(short))
		}
		checkIdle(t, e)
	}
}

// loadSliding loads path with one slot.
func loadSliding(t *testing.T, path string) (*orchestrator.Model, generate.Tokenizer) {
	t.Helper()
	m, rt, tok, err := generate.Load(path, generate.OpenOptions{Load: orchestrator.LoadOptions{Slots: 1, MaxBatch: 8}})
	if err != nil {
		t.Fatal(err)
	}
	rt.Close()
	t.Cleanup(func() { m.Close() })
	return m, tok
}
