package orchestrator

// qwen3 (dense Qwen3): qwen2 without the q/k/v biases and with q and k RMS-normalised per
// head before RoPE (NeoX); the head size comes from qwen3.attention.key_length and need not
// be embedding_length/head_count (Qwen3-0.6B: hidden 1024, 16 heads of 128).
func init() {
	register(&archSpec{name: "qwen3", qkNorm: true, ropeBase: 10000})
}
