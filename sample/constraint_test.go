package sample

import (
	"errors"
	"strings"
	"testing"
)

// TestSampleAllowed checks that every chain configuration draws only allowed tokens, that
// greedy picks the best allowed one, and the refusals.
func TestSampleAllowed(t *testing.T) {
	const vocab = 1000
	allowed := make([]uint64, (vocab+63)/64)
	ok := map[int32]bool{}
	for _, id := range []int32{3, 64, 65, 500, 999} {
		allowed[id>>6] |= 1 << (id & 63)
		ok[id] = true
	}
	d := DefaultOptions()
	d.Seed = 7
	configs := []Options{{}, d, {Temperature: 1}, {Temperature: 2, TopK: 2}, {Temperature: 1, TopP: 0.5},
		{Temperature: 1.5, MinP: 0.9}, {Temperature: 1, RepeatPenalty: 1.3, FrequencyPenalty: 0.5, PresencePenalty: 0.5, PenaltyLastN: 8},
		{Temperature: 1, LogitBias: map[int32]float32{3: 100, 4: 200}}}
	for _, o := range configs {
		s, err := New(vocab, o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 200 {
			w := row(vocab, uint64(i))
			id, err := s.SampleAllowed(w, allowed)
			if err != nil {
				t.Fatal(err)
			}
			if !ok[id] {
				t.Fatalf("%+v: sampled token %d, which is not allowed", o, id)
			}
			s.Accept(id)
			if o.Greedy() && o.LogitBias == nil {
				best := int32(-1)
				for a := range ok {
					if best < 0 || w[a] > w[best] || (w[a] == w[best] && a < best) {
						best = a
					}
				}
				if id != best {
					t.Fatalf("greedy picked %d, the best allowed is %d", id, best)
				}
			}
		}
	}
	s, _ := New(vocab, d)
	if _, err := s.SampleAllowed(row(vocab, 1), make([]uint64, len(allowed))); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("nothing allowed: %v, want ErrNoCandidate", err)
	}
	if _, err := s.SampleAllowed(row(vocab, 1), allowed[:3]); err == nil || !strings.Contains(err.Error(), "192 bits") {
		t.Errorf("short mask: %v", err)
	}
	banned, _ := New(vocab, Options{LogitBias: map[int32]float32{3: negInf, 64: negInf, 65: negInf, 500: negInf, 999: negInf}})
	if _, err := banned.SampleAllowed(row(vocab, 1), allowed); !errors.Is(err, ErrNoCandidate) {
		t.Errorf("allowed tokens all banned by bias: %v, want ErrNoCandidate", err)
	}
	// Without a mask, Sample is unchanged: the same draws as SampleAllowed with all allowed.
	all := make([]uint64, len(allowed))
	for i := range all {
		all[i] = ^uint64(0)
	}
	a, _ := New(vocab, d)
	b, _ := New(vocab, d)
	for i := range 50 {
		w := row(vocab, uint64(i))
		x, _ := a.Sample(w)
		y, _ := b.SampleAllowed(w, all)
		if x != y {
			t.Fatalf("draw %d: Sample %d, SampleAllowed with all allowed %d", i, x, y)
		}
	}
}
