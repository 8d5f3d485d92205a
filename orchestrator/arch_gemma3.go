package orchestrator

// gemma3 (Gemma 3 text models): token embeddings x sqrt(hidden); per-head q/k RMSNorm
// before RoPE (NeoX); sandwich norms (post_attention_norm, post_ffw_norm before each
// residual add); a GeGLU feed-forward (tanh GELU); five sliding-window layers (RoPE base
// 10000, unscaled, window gemma3.attention.sliding_window) then one global layer
// (rope.freq_base and the file's linear rope scaling); queries scaled by 1/sqrt(head size),
// except the 27B's (62 layers) by 1/sqrt(hidden/heads); output tied to token_embd. The
// converter stores the norms' weights with Gemma's +1 already added, so they are plain
// RMSNorms here. No soft-capping (gemma2's, arch_gemma2.go).
func init() {
	register(&archSpec{name: "gemma3", qkNorm: true, postNorms: true, geglu: true, embedScale: true,
		swaPeriod: 6, swaRopeBase: 10000, wideQueryLayers: 62, ropeBase: 10000})
}
