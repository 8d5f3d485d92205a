package sample

import "fmt"

// SampleAllowed is Sample restricted to the tokens set in allowed, a bitset (bit id%64 of
// word id/64, at least one bit per token): the others get logit -Inf before the chain (bias,
// penalties, top-k, top-p, min-p, temperature), so whatever the chain keeps and draws is
// allowed. A grammar constraint (package grammar) gives such masks. When nothing allowed
// is left (or bias bans what is), the error is ErrNoCandidate.
func (s *Sampler) SampleAllowed(logits []float32, allowed []uint64) (int32, error) {
	if len(allowed)*64 < s.vocab {
		return 0, fmt.Errorf("sample: the mask of allowed tokens has %d bits, the vocabulary %d tokens", len(allowed)*64, s.vocab)
	}
	return s.sample(logits, allowed)
}

// ban sets the logits of the tokens not in allowed to -Inf and returns the first maximum
// of what is left (max -Inf if nothing is). A word of the mask with no bit set (most of
// them outside a string) bans its 64 tokens without testing each.
func ban(w []float32, allowed []uint64) (best int, max float32) {
	best, max = 0, negInf
	for base := 0; base < len(w); base += 64 {
		word, end := allowed[base>>6], min(base+64, len(w))
		if word == 0 {
			for i := base; i < end; i++ {
				w[i] = negInf
			}
			continue
		}
		for i := base; i < end; i++ {
			if word&(1<<(i-base)) == 0 {
				w[i] = negInf
			} else if x := w[i]; x > max {
				best, max = i, x
			}
		}
	}
	return best, max
}
