package perplexity_test

import (
	"fmt"

	"github.com/kernelrt/kernelrt/perplexity"
)

// The perplexity of three positions from their logits: probabilities 1/4, 1/2 and 1 give
// exp(mean(-log p)) = 2.
func ExamplePPL() {
	var p perplexity.PPL
	p.Add([]float32{0, 0, 0, 0}, 2)       // four equal logits: p = 1/4
	p.Add([]float32{0, 0, -200, -200}, 1) // two of them: p = 1/2
	p.Add([]float32{3, -197, -197}, 0)    // one: p = 1
	fmt.Printf("PPL = %.4f +/- %.4f over %d positions\n", p.Value(), p.Uncertainty(), p.Count())
	// Output: PPL = 2.0000 +/- 0.8004 over 3 positions
}

// Comparing a model's distribution at one position with a base model's.
func ExampleComparePosition() {
	baseLogits := []float32{2, 1, 0, -1}
	base := make([]float32, 4)
	perplexity.LogProbs(base, baseLogits) // or DecodeRow of a base file's row

	var k perplexity.KLD
	for _, logits := range [][]float32{{2, 1, 0, -1}, {1.5, 1.2, 0, -1}} {
		pos, err := perplexity.ComparePosition(base, logits, make([]float32, 4), 1)
		if err != nil {
			panic(err)
		}
		fmt.Printf("KLD %.5f, same top token %v\n", pos.KLD, pos.SameTop)
		k.Add(pos)
	}
	s := k.Final()
	fmt.Printf("mean KLD %.5f, same top p %.0f%%, median KLD %.5f\n", s.KLD, 100*s.SameTop, s.KLDPercentiles[5].Value)
	// Output:
	// KLD 0.00000, same top token true
	// KLD 0.05029, same top token true
	// mean KLD 0.02515, same top p 100%, median KLD 0.02515
}
