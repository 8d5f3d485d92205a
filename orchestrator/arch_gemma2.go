package orchestrator

import (
	"math"

	"github.com/kernelrt/kernelrt/gguf"
)

// gemma2 (Gemma 2 text models) is gemma3 without the q/k norms and with soft-capping: token
// embeddings x sqrt(hidden); RoPE (NeoX) with rope.freq_base on every layer; sandwich norms
// (post_attention_norm, post_ffw_norm before each residual add); a GeGLU feed-forward (tanh
// GELU); layers 0, 2, 4, ... attend through a sliding window (gemma2.attention.sliding_window,
// 4096 when absent, as llama.cpp), the odd ones globally; queries scaled by 1/sqrt(head size),
// except the 27B's (46 layers) by 1/sqrt(hidden/heads); the scaled attention scores
// soft-capped, s = c*tanh(s/c) with c = gemma2.attn_logit_softcapping (50 when absent), before
// the softmax (the attention kernels' softcap), and the output logits with c =
// gemma2.final_logit_softcapping (30 when absent); output tied to token_embd. The converter
// stores the norms' weights with Gemma's +1 already added (plain RMSNorms here). As in
// llama.cpp (src/llama.cpp build_gemma2, llama-model.cpp's hparams), read, not copied.
func init() {
	register(&archSpec{name: "gemma2", postNorms: true, geglu: true, embedScale: true,
		swaPeriod: 2, swaDefault: 4096, wideQueryLayers: 46, ropeBase: 10000, softcaps: true})
}

// Defaults of gemma2's soft-caps when the file does not give them (llama.cpp's hparams).
const (
	gemma2AttnSoftcap  = 50
	gemma2FinalSoftcap = 30
)

// readSoftcaps reads an architecture's attention and final-logit soft-caps (pre is
// "<arch>."): attn_logit_softcapping and final_logit_softcapping, gemma2's defaults when
// absent; each must be positive and finite.
func readSoftcaps(f *gguf.File, pre string) (attn, final float32, err error) {
	for _, k := range []struct {
		key string
		def float64
		dst *float32
	}{{"attn_logit_softcapping", gemma2AttnSoftcap, &attn}, {"final_logit_softcapping", gemma2FinalSoftcap, &final}} {
		v, err := metaFloat(f, pre+k.key, k.def)
		if err != nil {
			return 0, 0, err
		}
		if !(v > 0) || v > math.MaxFloat32 {
			return 0, 0, modelErr("%s%s = %g must be positive and finite", pre, k.key, v)
		}
		*k.dst = float32(v)
	}
	return attn, final, nil
}

// softcapLogits soft-caps logits in place, x = c*tanh(x/c) (c > 0): gemma2's final
// soft-capping, once per token over the vocabulary, in float64 as ggml's scale-tanh-scale.
func softcapLogits(logits []float32, c float32) {
	cf := float64(c)
	for i, x := range logits {
		logits[i] = float32(cf * math.Tanh(float64(x)/cf))
	}
}
