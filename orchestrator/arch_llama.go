package orchestrator

// llama (Llama 2/3, SmolLM, ...): no attention biases; RoPE on adjacent pairs; Llama 3.1+
// files may carry rope_freqs.weight (a frequency divisor per rotated pair).
func init() {
	register(&archSpec{name: "llama", ropeNorm: true, ropeFreqs: true, ropeBase: 10000})
}
