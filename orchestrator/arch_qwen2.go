package orchestrator

// qwen2 (Qwen2, Qwen2.5): biases on q, k and v; NeoX RoPE (rotating halves of each head).
func init() {
	register(&archSpec{name: "qwen2", qkvBias: true, ropeBase: 10000})
}
