package orchestrator

import (
	"fmt"
	"sort"
	"strings"
)

// An architecture is what distinguishes one decoder family from another. Every family here
// is a pre-norm transformer (RMSNorm; attention with RoPE and grouped-query heads; a gated
// feed-forward; a tied or separate output head), and an archSpec holds its choices as
// capabilities: the build, the loader and the decoder steps branch on these fields, never on
// a family's name. Each family is one file (arch_<name>.go) whose init registers its spec,
// so adding a family whose choices are already capabilities is that one file.
type archSpec struct {
	name string
	// ropeNorm: RoPE rotates adjacent pairs (llama.cpp's normal mode) instead of halves
	// (NeoX, qwen2).
	ropeNorm bool
	// qkvBias: the attention's q, k and v projections have biases (attn_q.bias, ...).
	qkvBias bool
	// ropeFreqs: the model may carry rope_freqs.weight, a frequency factor per rotated pair
	// (Llama 3.1+ long-context scaling).
	ropeFreqs bool
	// ropeBase is rope.freq_base when the file does not say (llama.cpp's default).
	ropeBase float64
	// qkNorm: q and k are RMS-normalised per head (attn_q_norm, attn_k_norm: HeadDim
	// weights each) after the projections, before RoPE (qwen3, gemma3).
	qkNorm bool
	// postNorms: the attention and FFN outputs are RMS-normalised (post_attention_norm,
	// post_ffw_norm) before their residual adds (gemma's sandwich norms).
	postNorms bool
	// geglu: the FFN gate goes through GELU (tanh form) instead of SiLU.
	geglu bool
	// embedScale: token embeddings are multiplied by sqrt(Hidden).
	embedScale bool
	// swaPeriod > 0 makes every layer il with (il+1) % swaPeriod != 0 a sliding-window layer
	// (attending to the last Config.SlidingWindow positions; the file's
	// attention.sliding_window is required) and the others global.
	swaPeriod int
	// swaRopeBase, when > 0, is the RoPE base of the sliding layers, which are then never
	// scaled; global layers use RopeTheta, RopeScale and rope_freqs. 0: every layer uses the
	// global RoPE (gemma2).
	swaRopeBase float64
	// swaDefault, when > 0, is the window when the file has no attention.sliding_window
	// (llama.cpp's default for gemma2: 4096); 0 makes the key required.
	swaDefault int
	// softcaps: scaled attention scores are soft-capped, s = c*tanh(s/c), with
	// Config.AttnSoftcap, and the output logits with Config.FinalSoftcap (gemma2).
	softcaps bool
	// wideQueryLayers, when a model has that many layers, scales queries by
	// 1/sqrt(Hidden/Heads) instead of 1/sqrt(HeadDim) (llama.cpp tells Gemma 3 27B, whose
	// query_pre_attn_scalar is hidden/heads, by its 62 layers).
	wideQueryLayers int
}

// sliding reports whether layer il of a model of config c attends through a sliding window.
func (a *archSpec) sliding(c *Config, il int) bool {
	return a.swaPeriod > 0 && c.SlidingWindow > 0 && (il+1)%a.swaPeriod != 0
}

// windowDefault is metaUint's default for attention.sliding_window: swaDefault, or -1
// (required) when the architecture has none.
func (a *archSpec) windowDefault() int {
	if a.swaDefault > 0 {
		return a.swaDefault
	}
	return -1
}

// archs holds every registered family by general.architecture.
var archs = map[string]*archSpec{}

// register adds a family's spec (from its file's init).
func register(a *archSpec) {
	if _, dup := archs[a.name]; dup {
		panic("orchestrator: architecture " + a.name + " registered twice")
	}
	archs[a.name] = a
}

// Architectures lists the supported general.architecture values.
func Architectures() []string {
	var out []string
	for k := range archs {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// archOf returns the spec of name ("" is qwen2).
func archOf(name string) (*archSpec, error) {
	if name == "" {
		name = "qwen2"
	}
	a, ok := archs[name]
	if !ok {
		return nil, fmt.Errorf("architecture %q is not supported (supported: %s)", name, strings.Join(Architectures(), ", "))
	}
	return a, nil
}

// arch is the config's architecture (Validate has checked it exists).
func (c Config) arch() *archSpec {
	a, err := archOf(c.Arch)
	if err != nil {
		panic("orchestrator: unvalidated Config: " + err.Error())
	}
	return a
}

// tensorSpecs lists every tensor of a model of config c in the file's names: the output head
// only when untied, rope_freqs only when present.
func (c Config) tensorSpecs(untied, ropeFreqs bool) []tensorSpec {
	a := c.arch()
	H, I, V := c.Hidden, c.Intermediate, c.Vocab
	qd, kd, vd := c.qkvDims()
	mat := func(name string, cols, rows int) tensorSpec {
		return tensorSpec{name: name, dims: []int{cols, rows}, kind: kindMatrix}
	}
	vec := func(name string, n int) tensorSpec { return tensorSpec{name: name, dims: []int{n}, kind: kindVector} }
	s := []tensorSpec{mat("token_embd.weight", H, V)}
	for l := 0; l < c.Layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		s = append(s, vec(p+"attn_norm.weight", H),
			mat(p+"attn_q.weight", H, qd), mat(p+"attn_k.weight", H, kd), mat(p+"attn_v.weight", H, vd))
		if a.qkvBias {
			s = append(s, vec(p+"attn_q.bias", qd), vec(p+"attn_k.bias", kd), vec(p+"attn_v.bias", vd))
		}
		if a.qkNorm {
			s = append(s, vec(p+"attn_q_norm.weight", c.HeadDim), vec(p+"attn_k_norm.weight", c.HeadDim))
		}
		if a.postNorms {
			s = append(s, vec(p+"post_attention_norm.weight", H), vec(p+"post_ffw_norm.weight", H))
		}
		s = append(s, mat(p+"attn_output.weight", qd, H), vec(p+"ffn_norm.weight", H),
			mat(p+"ffn_gate.weight", H, I), mat(p+"ffn_up.weight", H, I), mat(p+"ffn_down.weight", I, H))
	}
	s = append(s, vec("output_norm.weight", H))
	if untied {
		s = append(s, mat("output.weight", H, V))
	}
	if ropeFreqs && a.ropeFreqs {
		s = append(s, vec("rope_freqs.weight", c.HeadDim/2))
	}
	return s
}
