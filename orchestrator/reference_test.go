package orchestrator

// A float64 reference forward pass of the qwen2 graph, written independently of the optimized
// path: it reads the GGUF file itself, decodes every weight to float64 with its own fp16 and
// block decoders, and follows llama.cpp's qwen2 graph op by op. The only place it rounds on
// purpose is where ggml does by design: activations are quantized to Q8_0 before a Q8_0/Q5_0
// matmul and rounded to fp16 before an F16 matmul (ggml converts the right-hand side to the
// weights' vec_dot type), and keys/values are rounded to fp16 for an F16 KV cache.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/gguf"
)

// ---- fp16, independently of kernelrt ----

// refFP16 decodes an IEEE half.
func refFP16(h uint16) float64 {
	sign := 1.0
	if h&0x8000 != 0 {
		sign = -1
	}
	exp := int(h>>10) & 0x1f
	man := float64(h & 0x3ff)
	switch exp {
	case 0:
		return sign * man * math.Pow(2, -24)
	case 31:
		if man != 0 {
			return math.NaN()
		}
		return sign * math.Inf(1)
	}
	return sign * (1 + man/1024) * math.Pow(2, float64(exp-15))
}

// refRoundFP16 rounds x to the nearest fp16 value (ties to even), saturating to ±Inf.
func refRoundFP16(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	a := math.Abs(x)
	e := math.Floor(math.Log2(a))
	if math.Pow(2, e) > a { // Log2 rounding at exact powers
		e--
	} else if math.Pow(2, e+1) <= a {
		e++
	}
	e = math.Max(e, -14) // subnormals share the smallest normal exponent's spacing
	ulp := math.Pow(2, e-10)
	r := math.RoundToEven(a/ulp) * ulp
	if r > 65504 {
		r = math.Inf(1)
	}
	return math.Copysign(r, x)
}

// ---- weights ----

// refTensor decodes a tensor to float64 (row-major [rows][cols]).
func refTensor(t *testing.T, f *gguf.File, name string) (w []float64, rows, cols int, typ gguf.GGMLType) {
	t.Helper()
	info, ok := f.Tensor(name)
	if !ok {
		t.Fatalf("reference: no tensor %q", name)
	}
	data, err := f.TensorData(name)
	if err != nil {
		t.Fatal(err)
	}
	n := info.Elements()
	w = make([]float64, n)
	switch info.Type {
	case gguf.TypeF32:
		for i := range w {
			w[i] = float64(math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:])))
		}
	case gguf.TypeF16:
		for i := range w {
			w[i] = refFP16(binary.LittleEndian.Uint16(data[2*i:]))
		}
	case gguf.TypeQ8_0:
		for b := 0; b < n/32; b++ {
			blk := data[34*b : 34*b+34]
			d := refFP16(binary.LittleEndian.Uint16(blk))
			for j := 0; j < 32; j++ {
				w[32*b+j] = d * float64(int8(blk[2+j]))
			}
		}
	case gguf.TypeQ5_0:
		for b := 0; b < n/32; b++ {
			blk := data[22*b : 22*b+22]
			d := refFP16(binary.LittleEndian.Uint16(blk))
			qh := binary.LittleEndian.Uint32(blk[2:])
			for j := 0; j < 32; j++ {
				lo := blk[6+j%16] & 0xf
				if j >= 16 {
					lo = blk[6+j%16] >> 4
				}
				q := int(lo) | int((qh>>uint(j))&1)<<4
				w[32*b+j] = d * float64(q-16)
			}
		}
	case gguf.TypeBF16:
		for i := range w {
			w[i] = float64(math.Float32frombits(uint32(binary.LittleEndian.Uint16(data[2*i:])) << 16))
		}
	default:
		if !refBlocks(w, data, info.Type) {
			t.Fatalf("reference: tensor %q: type %s", name, info.Type)
		}
	}
	return w, info.Rows(), info.Cols(), info.Type
}

// refNibble is element j (0..31) of a block of 32 whose 16 bytes hold elements 0..15 in the
// low nibbles and 16..31 in the high ones (Q4_0, Q4_1, Q5_0, Q5_1).
func refNibble(qs []byte, j int) int {
	if j < 16 {
		return int(qs[j] & 0xf)
	}
	return int(qs[j-16] >> 4)
}

// refScaleMin is sub-block s's 6-bit scale and min in a Q4_K/Q5_K block's 12 scale bytes.
func refScaleMin(sc []byte, s int) (float64, float64) {
	if s < 4 {
		return float64(sc[s] & 63), float64(sc[s+4] & 63)
	}
	return float64(sc[s+4]&0xf | sc[s-4]>>6<<4), float64(sc[s+4]>>4 | sc[s]>>6<<4)
}

// refBlocks decodes the blocks of Q4_0, Q4_1, Q5_1 and the K-quants from ggml's layouts
// (ggml-common.h, ../shared/formats.md) into w, exactly (in float64); false for another type.
func refBlocks(w []float64, data []byte, typ gguf.GGMLType) bool {
	h := func(b []byte) float64 { return refFP16(binary.LittleEndian.Uint16(b)) }
	n := len(w)
	switch typ {
	case gguf.TypeQ4_0:
		for b := 0; b < n/32; b++ {
			blk := data[18*b : 18*b+18]
			for j := 0; j < 32; j++ {
				w[32*b+j] = h(blk) * float64(refNibble(blk[2:], j)-8)
			}
		}
	case gguf.TypeIQ4_NL: // ggml's kvalues_iq4nl, written out independently of kernelrt
		kv := [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
		for b := 0; b < n/32; b++ {
			blk := data[18*b : 18*b+18]
			for j := 0; j < 32; j++ {
				w[32*b+j] = h(blk) * kv[refNibble(blk[2:], j)]
			}
		}
	case gguf.TypeQ4_1:
		for b := 0; b < n/32; b++ {
			blk := data[20*b : 20*b+20]
			for j := 0; j < 32; j++ {
				w[32*b+j] = h(blk)*float64(refNibble(blk[4:], j)) + h(blk[2:])
			}
		}
	case gguf.TypeQ5_1:
		for b := 0; b < n/32; b++ {
			blk := data[24*b : 24*b+24]
			qh := binary.LittleEndian.Uint32(blk[4:])
			for j := 0; j < 32; j++ {
				q := refNibble(blk[8:], j) | int(qh>>uint(j)&1)<<4
				w[32*b+j] = h(blk)*float64(q) + h(blk[2:])
			}
		}
	case gguf.TypeQ4_K, gguf.TypeQ5_K:
		size := 144
		if typ == gguf.TypeQ5_K {
			size = 176
		}
		for b := 0; b < n/256; b++ {
			blk := data[size*b : size*b+size]
			d, dmin, sc := h(blk), h(blk[2:]), blk[4:16]
			qs := blk[16:]
			if typ == gguf.TypeQ5_K {
				qs = blk[48:]
			}
			for s := 0; s < 8; s++ { // sub-blocks of 32: pairs share 32 bytes, low then high nibbles
				scale, mn := refScaleMin(sc, s)
				for l := 0; l < 32; l++ {
					q := int(qs[32*(s/2)+l])
					if s%2 == 0 {
						q &= 0xf
					} else {
						q >>= 4
					}
					if typ == gguf.TypeQ5_K {
						q |= int(blk[16+l]>>uint(s)&1) << 4 // qh[l], bit s
					}
					w[256*b+32*s+l] = d*scale*float64(q) - dmin*mn
				}
			}
		}
	case gguf.TypeIQ4_XS: // ggml's dequantize_row_iq4_xs: d*(ls-32) exactly, in float64
		kv := [16]float64{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}
		for b := 0; b < n/256; b++ {
			blk := data[136*b : 136*b+136]
			sh := int(binary.LittleEndian.Uint16(blk[2:]))
			for j := 0; j < 8; j++ {
				ls := int(blk[4+j/2]>>(4*(j%2))&0xf) | (sh>>(2*j)&3)<<4
				dl := h(blk) * float64(ls-32)
				for e := 0; e < 32; e++ {
					w[256*b+32*j+e] = dl * kv[refNibble(blk[8+16*j:], e)]
				}
			}
		}
	case gguf.TypeQ2_K: // ggml's dequantize_row_q2_K, element by element
		for b := 0; b < n/256; b++ {
			blk := data[84*b : 84*b+84]
			sc, qs, d, dmin := blk[:16], blk[16:80], h(blk[80:]), h(blk[82:])
			for e := 0; e < 256; e++ { // e = 128*half + 32*j + l, sub-block e/16
				half, j, l := e/128, e%128/32, e%32
				q := int(qs[32*half+l] >> uint(2*j) & 3)
				w[256*b+e] = d*float64(sc[e/16]&0xf)*float64(q) - dmin*float64(sc[e/16]>>4)
			}
		}
	case gguf.TypeQ3_K: // ggml's dequantize_row_q3_K, element by element
		for b := 0; b < n/256; b++ {
			blk := data[110*b : 110*b+110]
			hm, qs, sc, d := blk[:32], blk[32:96], blk[96:108], h(blk[108:])
			for e := 0; e < 256; e++ { // e = 128*half + 32*j + 16*k + l, sub-block e/16
				half, j, k, l, s := e/128, e%128/32, e%32/16, e%16, e/16
				low := int(sc[s%8] & 0xf)
				if s >= 8 {
					low = int(sc[s%8] >> 4)
				}
				scale := low | int(sc[8+s%4]>>uint(2*(s/4))&3)<<4
				q := int(qs[32*half+16*k+l] >> uint(2*j) & 3)
				if hm[16*k+l]&(1<<uint(4*half+j)) == 0 {
					q -= 4
				}
				w[256*b+e] = d * float64(scale-32) * float64(q)
			}
		}
	case gguf.TypeQ6_K:
		for b := 0; b < n/256; b++ {
			blk := data[210*b : 210*b+210]
			ql, qh, sc, d := blk[:128], blk[128:192], blk[192:208], h(blk[208:])
			for e := 0; e < 256; e++ { // element e = 128*half + 32*k + l
				half, k, l := e/128, e%128/32, e%32
				lo := ql[64*half+l+32*(k&1)]
				if k >= 2 {
					lo >>= 4
				}
				q := int(lo&0xf) | int(qh[32*half+l]>>uint(2*k)&3)<<4
				w[256*b+e] = d * float64(int8(sc[e/16])) * float64(q-32)
			}
		}
	default:
		return false
	}
	return true
}

// refMatrix is a decoded weight and the type that decides how activations are rounded.
type refMatrix struct {
	w          []float64
	rows, cols int
	typ        gguf.GGMLType
}

// refQuantQ8 returns x as ggml's quantize_row_q8_0 leaves it: per 32 values,
// d = amax/127, q = round half away from zero (x/d), value = fp16(d) * q.
func refQuantQ8(x []float64) []float64 {
	out := make([]float64, len(x))
	for b := 0; b < len(x); b += 32 {
		amax := 0.0
		for _, v := range x[b : b+32] {
			amax = math.Max(amax, math.Abs(v))
		}
		d := amax / 127
		id := 0.0
		if d != 0 {
			id = 1 / d
		}
		dh := refRoundFP16(d)
		for j, v := range x[b : b+32] {
			out[b+j] = dh * math.Round(v*id) // math.Round: half away from zero, as roundf
		}
	}
	return out
}

// refQuantQ8K returns x as ggml's quantize_row_q8_K leaves it: per 256 values, m = the value
// of largest magnitude (sign kept), iscale = -127/m, q = min(127, round half to even
// (iscale*x)), value = float32(1/iscale) * q (the scale is stored as a float32).
func refQuantQ8K(x []float64) []float64 {
	out := make([]float64, len(x))
	for b := 0; b < len(x); b += 256 {
		mx, amax := 0.0, 0.0
		for _, v := range x[b : b+256] {
			if math.Abs(v) > amax {
				amax, mx = math.Abs(v), v
			}
		}
		if amax == 0 {
			continue
		}
		iscale := -127 / mx
		d := float64(float32(1 / iscale))
		for j, v := range x[b : b+256] {
			out[b+j] = d * math.Min(127, math.RoundToEven(iscale*v))
		}
	}
	return out
}

// refRoundBF16 rounds x to the nearest bfloat16 (8 significant bits, ties to even).
func refRoundBF16(x float64) float64 {
	if x == 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return x
	}
	fr, e := math.Frexp(x) // x = fr * 2^e, 0.5 <= |fr| < 1
	return math.Ldexp(math.RoundToEven(fr*256), e-8)
}

// apply computes W x (+bias) with ggml's activation rounding for the weight type: Q8_0
// blocks for the blocks of 32 (Q8_1 for Q4_1/Q5_1 in ggml, the same values), Q8_K for the
// K-quants, fp16/bf16 for F16/BF16.
func (m *refMatrix) apply(x, bias []float64) []float64 {
	switch m.typ {
	case gguf.TypeQ8_0, gguf.TypeQ5_0, gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_1, gguf.TypeIQ4_NL:
		x = refQuantQ8(x)
	case gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K, gguf.TypeQ3_K, gguf.TypeQ2_K, gguf.TypeIQ4_XS:
		x = refQuantQ8K(x)
	case gguf.TypeF16, gguf.TypeBF16:
		// ggml rounds a float32 activation: a value whose float32 rounding lands exactly
		// on a midpoint between two fp16 (bf16) values rounds to even from there, while the
		// float64 value just beside the midpoint would round the other way (1 in 2^13
		// elements for fp16, 2^16 for bf16: often enough to matter here).
		r := make([]float64, len(x))
		for i, v := range x {
			if m.typ == gguf.TypeF16 {
				r[i] = refRoundFP16(float64(float32(v)))
			} else {
				r[i] = refRoundBF16(float64(float32(v)))
			}
		}
		x = r
	}
	y := make([]float64, m.rows)
	for r := range y {
		s := 0.0
		row := m.w[r*m.cols : (r+1)*m.cols]
		for c, v := range row {
			s += v * x[c]
		}
		if bias != nil {
			s += bias[r]
		}
		y[r] = s
	}
	return y
}

type refLayer struct {
	attnNorm, ffnNorm []float64
	qNorm, kNorm      []float64 // per-head RMSNorm of q and k (qwen3, gemma3), nil if absent
	postAttn, postFFN []float64 // gemma's sandwich norms, nil if absent
	q, k, v, o        *refMatrix
	bq, bk, bv        []float64
	gate, up, down    *refMatrix
}

// refModel is a qwen2 or llama model read from a GGUF file in float64.
type refModel struct {
	hidden, heads, kvHeads, headDim, vocab int
	theta, eps                             float64
	ropeNorm                               bool      // llama: rotate adjacent pairs
	ropeFactors                            []float64 // rope_freqs, nil if absent
	embd                                   []float64
	layers                                 []refLayer
	outNorm                                []float64
	output                                 *refMatrix
	kv                                     KVType // the cache rounds k and v as this type stores them
	// ropeScale divides positions on the global layers (rope.scaling.factor, linear).
	ropeScale float64
	// gemma3: embeddings x sqrt(hidden), GELU (tanh) gating, and every layer il with
	// (il+1)%6 != 0 attending only to the last window positions, with RoPE base 10000 and
	// no scaling.
	gemma3 bool
	window int
	// gemma2: gemma3's embeddings, GELU and sandwich norms without q/k norms; layers il with
	// il%2 == 0 attend to the last window positions (RoPE unchanged); scores soft-capped at
	// attnCap after scaling and the logits at finalCap, c*tanh(x/c).
	gemma2            bool
	attnCap, finalCap float64
	// scoreScale multiplies q.k: 1/sqrt(headDim), except Gemma 3 27B's (62 layers),
	// 1/sqrt(hidden/heads) (its query_pre_attn_scalar).
	scoreScale float64
}

func loadRef(t *testing.T, path string) *refModel {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := f.GetString("general.architecture")
	u := func(k string) int {
		v, ok := f.GetUint(arch + "." + k)
		if !ok {
			t.Fatalf("reference: no %s.%s", arch, k)
		}
		return int(v)
	}
	fl := func(k string) float64 {
		v, ok := f.GetFloat(arch + "." + k)
		if !ok {
			t.Fatalf("reference: no %s.%s", arch, k)
		}
		return v
	}
	r := &refModel{hidden: u("embedding_length"), heads: u("attention.head_count"), kvHeads: u("attention.head_count_kv"),
		theta: fl("rope.freq_base"), eps: fl("attention.layer_norm_rms_epsilon"), ropeNorm: arch == "llama"}
	r.headDim = r.hidden / r.heads
	if v, ok := f.GetUint(arch + ".attention.key_length"); ok {
		r.headDim = int(v)
	}
	r.ropeScale = 1
	if v, ok := f.GetFloat(arch + ".rope.scaling.factor"); ok && v != 0 {
		r.ropeScale = v
	}
	if arch == "gemma3" {
		r.gemma3, r.window = true, u("attention.sliding_window")
	}
	if arch == "gemma2" { // llama.cpp's defaults when absent: window 4096, caps 50 and 30
		r.gemma2, r.window, r.attnCap, r.finalCap = true, 4096, 50, 30
		if v, ok := f.GetUint(arch + ".attention.sliding_window"); ok {
			r.window = int(v)
		}
		if v, ok := f.GetFloat(arch + ".attn_logit_softcapping"); ok {
			r.attnCap = v
		}
		if v, ok := f.GetFloat(arch + ".final_logit_softcapping"); ok {
			r.finalCap = v
		}
	}
	r.scoreScale = 1 / math.Sqrt(float64(r.headDim))
	if r.gemma3 && u("block_count") == 62 || r.gemma2 && u("block_count") == 46 {
		r.scoreScale = 1 / math.Sqrt(float64(r.hidden/r.heads))
	}
	mat := func(name string) *refMatrix {
		w, rows, cols, typ := refTensor(t, f, name)
		return &refMatrix{w: w, rows: rows, cols: cols, typ: typ}
	}
	vec := func(name string) []float64 {
		if _, ok := f.Tensor(name); !ok {
			return nil // a llama model has no q/k/v biases
		}
		w, _, _, _ := refTensor(t, f, name)
		return w
	}
	r.ropeFactors = vec("rope_freqs.weight")
	var rows int
	r.embd, rows, _, _ = refTensor(t, f, "token_embd.weight")
	r.vocab = rows
	for l := 0; l < u("block_count"); l++ {
		p := fmt.Sprintf("blk.%d.", l)
		r.layers = append(r.layers, refLayer{
			attnNorm: vec(p + "attn_norm.weight"), ffnNorm: vec(p + "ffn_norm.weight"),
			q: mat(p + "attn_q.weight"), k: mat(p + "attn_k.weight"), v: mat(p + "attn_v.weight"), o: mat(p + "attn_output.weight"),
			bq: vec(p + "attn_q.bias"), bk: vec(p + "attn_k.bias"), bv: vec(p + "attn_v.bias"),
			qNorm: vec(p + "attn_q_norm.weight"), kNorm: vec(p + "attn_k_norm.weight"),
			postAttn: vec(p + "post_attention_norm.weight"), postFFN: vec(p + "post_ffw_norm.weight"),
			gate: mat(p + "ffn_gate.weight"), up: mat(p + "ffn_up.weight"), down: mat(p + "ffn_down.weight"),
		})
	}
	r.outNorm = vec("output_norm.weight")
	if _, ok := f.Tensor("output.weight"); ok {
		r.output = mat("output.weight")
	} else {
		info, _ := f.Tensor("token_embd.weight")
		r.output = &refMatrix{w: r.embd, rows: r.vocab, cols: r.hidden, typ: info.Type}
	}
	return r
}

func (r *refModel) rmsNorm(x, w []float64) []float64 {
	ss := 0.0
	for _, v := range x {
		ss += v * v
	}
	s := 1 / math.Sqrt(ss/float64(len(x))+r.eps)
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = v * s * w[i]
	}
	return out
}

// headNorm RMS-normalises each headDim-long head of x in place with weights w.
func (r *refModel) headNorm(x, w []float64) {
	for h := 0; h < len(x); h += r.headDim {
		copy(x[h:h+r.headDim], r.rmsNorm(x[h:h+r.headDim], w))
	}
}

// rope rotates each head of x for position pos with base theta: NeoX (qwen2: element i
// pairs with i + headDim/2) or normal (llama: element 2i with 2i+1), the position divided
// by scale (linear scaling) and each pair's frequency by its rope_freqs factor when given.
func (r *refModel) rope(x []float64, heads, pos int, theta, scale float64, factors []float64) {
	hd := r.headDim
	for h := 0; h < heads; h++ {
		v := x[h*hd : (h+1)*hd]
		for i := 0; i < hd/2; i++ {
			a := float64(pos) / scale * math.Pow(theta, -float64(2*i)/float64(hd))
			if factors != nil {
				a /= factors[i]
			}
			s, c := math.Sincos(a)
			i0, i1 := i, i+hd/2
			if r.ropeNorm {
				i0, i1 = 2*i, 2*i+1
			}
			x0, x1 := v[i0], v[i1]
			v[i0], v[i1] = x0*c-x1*s, x0*s+x1*c
		}
	}
}

// forward returns the logits of every position of ids (one causal pass).
func (r *refModel) forward(ids []int32) [][]float64 {
	H, hd := r.hidden, r.headDim
	T := len(ids)
	x := make([][]float64, T)
	for t, id := range ids {
		x[t] = append([]float64(nil), r.embd[int(id)*H:(int(id)+1)*H]...)
		if r.gemma3 || r.gemma2 {
			for i := range x[t] {
				x[t][i] *= math.Sqrt(float64(H))
			}
		}
	}
	for il, l := range r.layers {
		theta, scale, factors, window := r.theta, r.ropeScale, r.ropeFactors, T
		if r.gemma3 && (il+1)%6 != 0 { // a local layer
			theta, scale, factors, window = 10000, 1, nil, r.window
		}
		if r.gemma2 && il%2 == 0 { // a local layer, the same RoPE
			window = r.window
		}
		q := make([][]float64, T)
		k := make([][]float64, T)
		v := make([][]float64, T)
		for t := range x {
			xn := r.rmsNorm(x[t], l.attnNorm)
			q[t] = l.q.apply(xn, l.bq)
			k[t] = l.k.apply(xn, l.bk)
			v[t] = l.v.apply(xn, l.bv)
			if l.qNorm != nil { // per head, before RoPE
				r.headNorm(q[t], l.qNorm)
				r.headNorm(k[t], l.kNorm)
			}
			r.rope(q[t], r.heads, t, theta, scale, factors)
			r.rope(k[t], r.kvHeads, t, theta, scale, factors)
			switch r.kv {
			case KVF16:
				for i := range k[t] {
					k[t][i], v[t][i] = refRoundFP16(k[t][i]), refRoundFP16(v[t][i])
				}
			case KVQ8_0:
				// Stored as Q8_0 blocks; the query is quantized the same way for the
				// scores (llama.cpp converts Q to the K cache's vec_dot type).
				k[t], v[t] = refQuantQ8(k[t]), refQuantQ8(v[t])
				q[t] = refQuantQ8(q[t])
			}
		}
		group := r.heads / r.kvHeads
		for t := range x {
			att := make([]float64, r.heads*hd)
			j0 := max(0, t-window+1) // the window: positions j with t-j < window
			for h := 0; h < r.heads; h++ {
				g := h / group
				qh := q[t][h*hd : (h+1)*hd]
				s := make([]float64, t+1)
				mx := math.Inf(-1)
				for j := j0; j <= t; j++ {
					d := 0.0
					for i, qv := range qh {
						d += qv * k[j][g*hd+i]
					}
					s[j] = d * r.scoreScale
					if r.attnCap != 0 {
						s[j] = r.attnCap * math.Tanh(s[j]/r.attnCap)
					}
					mx = math.Max(mx, s[j])
				}
				sum := 0.0
				for j := j0; j <= t; j++ {
					s[j] = math.Exp(s[j] - mx)
					sum += s[j]
				}
				for j := j0; j <= t; j++ {
					for i := 0; i < hd; i++ {
						att[h*hd+i] += s[j] / sum * v[j][g*hd+i]
					}
				}
			}
			o := l.o.apply(att, nil)
			if l.postAttn != nil {
				o = r.rmsNorm(o, l.postAttn)
			}
			for i := range o {
				x[t][i] += o[i]
			}
			xn := r.rmsNorm(x[t], l.ffnNorm)
			g, u := l.gate.apply(xn, nil), l.up.apply(xn, nil)
			h := make([]float64, len(g))
			for i, gi := range g {
				if r.gemma3 || r.gemma2 { // GELU, tanh form
					h[i] = 0.5 * gi * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(gi+0.044715*gi*gi*gi))) * u[i]
				} else {
					h[i] = gi / (1 + math.Exp(-gi)) * u[i]
				}
			}
			d := l.down.apply(h, nil)
			if l.postFFN != nil {
				d = r.rmsNorm(d, l.postFFN)
			}
			for i := range d {
				x[t][i] += d[i]
			}
		}
	}
	out := make([][]float64, T)
	for t := range x {
		out[t] = r.output.apply(r.rmsNorm(x[t], r.outNorm), nil)
		if r.finalCap != 0 {
			for i, v := range out[t] {
				out[t][i] = r.finalCap * math.Tanh(v/r.finalCap)
			}
		}
	}
	return out
}

// ---- test models ----

// testShape is a small qwen2 shape.
type testShape struct {
	name                                              string
	hidden, layers, inter, heads, kvHeads, vocab, ctx int
	theta                                             float64
}

var testShapes = []testShape{
	{"h64-gqa2", 64, 2, 96, 4, 2, 100, 64, 1e6},
	{"h128-hd64-mqa", 128, 1, 64, 2, 1, 37, 32, 1e4},
	{"h96-mha", 96, 3, 160, 6, 6, 64, 48, 5e5},
	{"h32-1head", 32, 2, 32, 1, 1, 50, 40, 1e6},
	{"h128-hd32-gqa2", 128, 2, 128, 4, 2, 60, 48, 1e6}, // a Q8_0 KV cache needs head size % 32
}

// testTypes is the type of each weight role; output 0xffff = tied (no output tensor).
type testTypes struct {
	name                                     string
	embd, q, k, v, o, gate, up, down, output gguf.GGMLType
}

const tied = gguf.GGMLType(0xffff)

var (
	f32, f16, q8, q5 = gguf.TypeF32, gguf.TypeF16, gguf.TypeQ8_0, gguf.TypeQ5_0
	bf16             = gguf.TypeBF16
	q4_0, q4_1, q5_1 = gguf.TypeQ4_0, gguf.TypeQ4_1, gguf.TypeQ5_1
	q4k, q5k, q6k    = gguf.TypeQ4_K, gguf.TypeQ5_K, gguf.TypeQ6_K
	iq4nl, q3k       = gguf.TypeIQ4_NL, gguf.TypeQ3_K
	iq4xs            = gguf.TypeIQ4_XS
	testTypeSets     = []testTypes{
		{"f32-untied", f32, f32, f32, f32, f32, f32, f32, f32, f32},
		{"f32-tied", f32, f32, f32, f32, f32, f32, f32, f32, tied},
		{"f16-tied", f16, f16, f16, f16, f16, f16, f16, f16, tied},
		{"q8_0-tied", q8, q8, q8, q8, q8, q8, q8, q8, tied},
		{"q5_0-untied-q8", q5, q5, q5, q5, q5, q5, q5, q5, q8},
		{"mixed-f16embd-untied-f32", f16, q5, q5, q8, q5, q8, q5, f16, f32},
		{"mixed-q5embd-tied", q5, f32, q8, f16, q8, q5, f32, q5, tied},
		{"q4_0-tied", q4_0, q4_0, q4_0, q4_0, q4_0, q4_0, q4_0, q4_0, tied},
		{"q4_1-untied-q5_1", q4_1, q4_1, q4_1, q4_1, q4_1, q4_1, q4_1, q4_1, q5_1},
		{"q5_1-tied", q5_1, q5_1, q5_1, q5_1, q5_1, q5_1, q5_1, q5_1, tied},
		{"bf16-tied", bf16, bf16, bf16, bf16, bf16, bf16, bf16, bf16, tied},
		{"mixed-32blocks-untied-q4_0", q5_1, q4_0, q8, q4_1, bf16, q5, q5_1, q4_0, q4_0},
		{"iq4_nl-tied", iq4nl, iq4nl, iq4nl, iq4nl, iq4nl, iq4nl, iq4nl, iq4nl, tied},
	}
	// kTestShape is a qwen2 shape whose widths are multiples of 256, so every matrix can be a
	// K-quant (ggml's super-blocks of 256 run along a row).
	kTestShape = testShape{"h256-kquant", 256, 2, 512, 4, 2, 72, 48, 1e6}
	// kTypeSets use the K-quants, alone and mixed with the other types as llama.cpp's
	// quantizer mixes them (Q4_K_M: Q6_K for attn_v, ffn_down and the head).
	kTypeSets = []testTypes{
		{"q4_k-tied", q4k, q4k, q4k, q4k, q4k, q4k, q4k, q4k, tied},
		{"q5_k-untied-q6_k", q5k, q5k, q5k, q5k, q5k, q5k, q5k, q5k, q6k},
		{"q6_k-tied", q6k, q6k, q6k, q6k, q6k, q6k, q6k, q6k, tied},
		{"q4_k_m-like-untied", q4k, q4k, q4k, q6k, q4k, q4k, q4k, q6k, q6k},
		{"q5_k_m-like-tied-q6_k", q6k, q5k, q5k, q6k, q5k, q5k, q5k, q6k, tied},
		{"k-and-32blocks-tied-q8", q8, q5, q4k, q5_1, q6k, q4_0, q5k, q4_1, tied},
		{"k-and-floats-untied-q4_0", bf16, bf16, f16, q4k, f32, q6k, bf16, q5k, q4_0},
		{"q3_k_m-like-untied", q3k, q3k, q3k, q5k, q3k, q3k, q3k, q4k, q6k},
		{"q3_k-tied", q3k, q3k, q3k, q3k, q3k, q3k, q3k, q3k, tied},
	}
)

// quantized reports whether the types include matmuls of quantized activations (different
// tolerance).
func (tt testTypes) quantized() bool {
	for _, t := range []gguf.GGMLType{tt.embd, tt.q, tt.k, tt.v, tt.o, tt.gate, tt.up, tt.down, tt.output} {
		if t != f32 && t != f16 && t != bf16 && t != tied {
			return true
		}
	}
	return false
}

func (tt testTypes) hasF16() bool {
	for _, t := range []gguf.GGMLType{tt.embd, tt.q, tt.k, tt.v, tt.o, tt.gate, tt.up, tt.down, tt.output} {
		if t == f16 || t == bf16 {
			return true
		}
	}
	return false
}

// encode stores float32 values as typ.
func encode(t testing.TB, v []float32, typ gguf.GGMLType) []byte {
	t.Helper()
	switch typ {
	case f32:
		return append([]byte(nil), bytesOf(v)...)
	case f16:
		out := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], kernelrt.FP32ToFP16(x))
		}
		return out
	case q8:
		b := make([]kernelrt.BlockQ8_0, len(v)/32)
		if err := kernelrt.QuantizeQ8_0(b, v); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), bytesOf(b)...)
	case q5:
		b := make([]kernelrt.BlockQ5_0, len(v)/32)
		if err := kernelrt.QuantizeQ5_0(b, v); err != nil {
			t.Fatal(err)
		}
		return append([]byte(nil), bytesOf(b)...)
	case bf16:
		out := make([]byte, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(out[2*i:], uint16(math.Float32bits(roundBF16(x))>>16))
		}
		return out
	case q4_0:
		return quantBytes(t, v, kernelrt.QuantizeQ4_0)
	case iq4nl:
		return quantBytes(t, v, kernelrt.QuantizeIQ4_NL)
	case q3k:
		return testQuantQ3K(v)
	case iq4xs:
		return testQuantIQ4XS(t, v)
	case q4_1:
		return quantBytes(t, v, kernelrt.QuantizeQ4_1)
	case q5_1:
		return quantBytes(t, v, kernelrt.QuantizeQ5_1)
	case q4k:
		return quantBytes(t, v, kernelrt.QuantizeQ4K)
	case q5k:
		return quantBytes(t, v, kernelrt.QuantizeQ5K)
	case q6k:
		return quantBytes(t, v, kernelrt.QuantizeQ6K)
	}
	t.Fatalf("encode: type %s", typ)
	return nil
}

// quantBytes quantizes v with kernelrt's ggml-identical quantizer for block type B.
func quantBytes[B any](t testing.TB, v []float32, quantize func([]B, []float32) error) []byte {
	t.Helper()
	var z B
	per := 32
	if unsafe.Sizeof(z) > 100 { // the K-quants' super-blocks
		per = 256
	}
	b := make([]B, len(v)/per)
	if err := quantize(b, v); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), bytesOf(b)...)
}

// testModel describes a file to write: a shape, types, metadata and tensor overrides.
type testModel struct {
	shape testShape
	types testTypes
	seed  uint64
	arch  string // "" = qwen2
	// headDim, when set, is the head size (written as attention.key_length/value_length);
	// else hidden/heads.
	headDim int
	// window is gemma3's attention.sliding_window; ropeScale, when set, is written as
	// rope.scaling.type linear with that factor.
	window    int
	ropeScale float64
	// attnCap and finalCap, when set, are written as gemma2's attn_logit_softcapping and
	// final_logit_softcapping.
	attnCap, finalCap float64
	// ropeFreqs writes a rope_freqs.weight tensor (llama only).
	ropeFreqs bool
	// edit, when set, changes the builder's inputs before writing (for bad-file tests).
	editKV     func(kv map[string]gguf.Value, order *[]string)
	editTensor func(name string, typ *gguf.GGMLType, dims *[]uint64, data *[]byte) bool // false drops it
	extra      func(b *gguf.Builder) error
	alignment  int
}

// write builds the model's GGUF bytes.
func (tm testModel) bytes(t testing.TB) []byte {
	t.Helper()
	s, ty := tm.shape, tm.types
	rng := rand.New(rand.NewPCG(tm.seed, 0x5eed))
	uni := func(n int, center, spread float64) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(center + spread*(2*rng.Float64()-1))
		}
		return v
	}
	b := gguf.NewBuilder()
	if tm.alignment != 0 {
		if err := b.SetAlignment(tm.alignment); err != nil {
			t.Fatal(err)
		}
	}
	arch := tm.arch
	if arch == "" {
		arch = "qwen2"
	}
	p := arch + "."
	kv := map[string]gguf.Value{
		"general.architecture":                 gguf.String(arch),
		p + "block_count":                      gguf.Uint32(uint32(s.layers)),
		p + "context_length":                   gguf.Uint32(uint32(s.ctx)),
		p + "embedding_length":                 gguf.Uint32(uint32(s.hidden)),
		p + "feed_forward_length":              gguf.Uint32(uint32(s.inter)),
		p + "attention.head_count":             gguf.Uint32(uint32(s.heads)),
		p + "attention.head_count_kv":          gguf.Uint32(uint32(s.kvHeads)),
		p + "rope.freq_base":                   gguf.Float32(float32(s.theta)),
		p + "attention.layer_norm_rms_epsilon": gguf.Float32(1e-6),
	}
	order := []string{"general.architecture", p + "block_count", p + "context_length", p + "embedding_length",
		p + "feed_forward_length", p + "attention.head_count", p + "attention.head_count_kv", p + "rope.freq_base",
		p + "attention.layer_norm_rms_epsilon"}
	if tm.headDim != 0 {
		kv[p+"attention.key_length"] = gguf.Uint32(uint32(tm.headDim))
		kv[p+"attention.value_length"] = gguf.Uint32(uint32(tm.headDim))
		order = append(order, p+"attention.key_length", p+"attention.value_length")
	}
	if tm.window != 0 {
		kv[p+"attention.sliding_window"] = gguf.Uint32(uint32(tm.window))
		order = append(order, p+"attention.sliding_window")
	}
	if tm.attnCap != 0 {
		kv[p+"attn_logit_softcapping"] = gguf.Float32(float32(tm.attnCap))
		order = append(order, p+"attn_logit_softcapping")
	}
	if tm.finalCap != 0 {
		kv[p+"final_logit_softcapping"] = gguf.Float32(float32(tm.finalCap))
		order = append(order, p+"final_logit_softcapping")
	}
	if tm.ropeScale != 0 {
		kv[p+"rope.scaling.type"] = gguf.String("linear")
		kv[p+"rope.scaling.factor"] = gguf.Float32(float32(tm.ropeScale))
		order = append(order, p+"rope.scaling.type", p+"rope.scaling.factor")
	}
	toks := make([]string, s.vocab)
	for i := range toks {
		toks[i] = fmt.Sprintf("<t%d>", i)
	}
	kv["tokenizer.ggml.tokens"] = gguf.ArrayValue(gguf.NewArray(toks))
	order = append(order, "tokenizer.ggml.tokens")
	if tm.editKV != nil {
		tm.editKV(kv, &order)
	}
	for _, k := range order {
		if v, ok := kv[k]; ok {
			if err := b.AddKV(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	add := func(name string, typ gguf.GGMLType, dims []uint64, v []float32) {
		data := encode(t, v, typ)
		if tm.editTensor != nil && !tm.editTensor(name, &typ, &dims, &data) {
			return
		}
		if err := b.AddTensor(name, typ, dims, data); err != nil {
			t.Fatal(err)
		}
	}
	H, I := s.hidden, s.inter
	hd := H / s.heads
	if tm.headDim != 0 {
		hd = tm.headDim
	}
	qd, kd := s.heads*hd, s.kvHeads*hd
	mat := func(name string, typ gguf.GGMLType, rows, cols int) {
		add(name, typ, []uint64{uint64(cols), uint64(rows)}, uni(rows*cols, 0, math.Sqrt(3/float64(cols))))
	}
	add("token_embd.weight", ty.embd, []uint64{uint64(H), uint64(s.vocab)}, uni(s.vocab*H, 0, 1))
	for l := 0; l < s.layers; l++ {
		p := fmt.Sprintf("blk.%d.", l)
		add(p+"attn_norm.weight", f32, []uint64{uint64(H)}, uni(H, 1, 0.2))
		mat(p+"attn_q.weight", ty.q, qd, H)
		if arch == "qwen2" {
			add(p+"attn_q.bias", f32, []uint64{uint64(qd)}, uni(qd, 0, 0.3))
		}
		mat(p+"attn_k.weight", ty.k, kd, H)
		if arch == "qwen2" {
			add(p+"attn_k.bias", f32, []uint64{uint64(kd)}, uni(kd, 0, 0.3))
		}
		mat(p+"attn_v.weight", ty.v, kd, H)
		if arch == "qwen2" {
			add(p+"attn_v.bias", f32, []uint64{uint64(kd)}, uni(kd, 0, 0.3))
		}
		if arch == "qwen3" || arch == "gemma3" {
			add(p+"attn_q_norm.weight", f32, []uint64{uint64(hd)}, uni(hd, 1, 0.2))
			add(p+"attn_k_norm.weight", f32, []uint64{uint64(hd)}, uni(hd, 1, 0.2))
		}
		if arch == "gemma3" || arch == "gemma2" {
			add(p+"post_attention_norm.weight", f32, []uint64{uint64(H)}, uni(H, 1, 0.2))
			add(p+"post_ffw_norm.weight", f32, []uint64{uint64(H)}, uni(H, 1, 0.2))
		}
		mat(p+"attn_output.weight", ty.o, H, qd)
		add(p+"ffn_norm.weight", f32, []uint64{uint64(H)}, uni(H, 1, 0.2))
		mat(p+"ffn_gate.weight", ty.gate, I, H)
		mat(p+"ffn_up.weight", ty.up, I, H)
		mat(p+"ffn_down.weight", ty.down, H, I)
	}
	add("output_norm.weight", f32, []uint64{uint64(H)}, uni(H, 1, 0.2))
	if tm.ropeFreqs {
		add("rope_freqs.weight", f32, []uint64{uint64(hd / 2)}, uni(hd/2, 2.5, 1.5)) // factors in [1, 4]
	}
	if ty.output != tied {
		mat("output.weight", ty.output, s.vocab, H)
	}
	if tm.extra != nil {
		if err := tm.extra(b); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := b.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// write writes the model to a file in dir and returns its path.
func (tm testModel) write(t testing.TB, dir string) string {
	t.Helper()
	p := filepath.Join(dir, fmt.Sprintf("%s-%s-%s-%v-%d.gguf", tm.arch, tm.shape.name, tm.types.name, tm.ropeFreqs, tm.headDim))
	if err := os.WriteFile(p, tm.bytes(t), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// ---- comparison ----

// relErr is max |got-ref| / max |ref| over one position's logits.
func relErr(got []float32, ref []float64) float64 {
	num, den := 0.0, 0.0
	for i, r := range ref {
		num = math.Max(num, math.Abs(float64(got[i])-r))
		den = math.Max(den, math.Abs(r))
	}
	if den == 0 {
		return num
	}
	return num / den
}

// Tolerances (relative to the largest logit of a position; see relErr).
//
// F32 weights: the 1e-3. Both sides compute the same math, the optimized path in
// float32 with its own summation orders, so the error is float32 rounding (observed <= 4e-7).
//
// F16 weights: 5e-3. Both round activations to fp16 before the matmul (as ggml does), so
// they agree to float32 rounding except where a float32 activation lands on the other side of
// an fp16 rounding boundary than the float64 one: that element then differs by one fp16 ulp
// (2^-10 relative to it). In these small models (hidden 32..128) one element is a sizable part
// of each dot product, and a flip in a key or value reaches every later position; observed
// up to 4e-4 (against ~1e-7 where no flip happens).
//
// Q8_0/Q5_0 weights: 1e-2. Weights are decoded exactly on both sides, and both quantize the
// activations to Q8_0 with ggml's rule, so the paths agree to float32 rounding (~1e-7) except
// where an activation x/d lies within float32 error of a .5 rounding tie: there the two sides
// pick neighbouring quants and that element differs by one step d = amax/127, up to 0.8% of
// the block's largest value. A flip is one term of a dot product, so it moves outputs by well
// under 1%; observed up to 3e-3. Any real error (a wrong scale, a swapped nibble, a wrong RoPE
// pairing or KV head) gives errors of order 1.
//
// Quantized activations in the 256-wide shape (kTestShape): 3e-2. The same flips, but a wider
// model quantizes more activations per token (2.5x the elements of hidden 96), so a run meets
// several; observed up to 1.5e-2 over 12 seeds x 9 type sets (Q8_K's round-half-to-even ties
// behave like Q8_0's), while every position before the first flip agrees to ~1e-7.
const (
	tolFloat         = 1e-3
	tolF16           = 5e-3
	tolQuantized     = 1e-2
	tolQuantizedWide = 3e-2
)

// tolFor is the tolerance of a model with the given weight types.
func tolFor(ty testTypes) float64 {
	switch {
	case ty.quantized():
		return tolQuantized
	case ty.hasF16():
		return tolF16
	}
	return tolFloat
}

// KV cache rounding: the reference rounds k and v as the cache stores them (fp16; Q8_0
// blocks, and then the query to Q8_0 too), so both sides agree to float32 rounding except
// where a float32 value and its float64 counterpart land on different sides of a rounding
// boundary: one fp16 ulp (2^-11 relative) or one Q8_0 step (up to 0.8% of the block's largest
// value) in one element, as for activations. An F16 cache therefore gets at least tolF16 and
// a Q8_0 cache tolQuantized. With quantized weights an fp16 flip in K or V moves the attention
// output by ~1e-4, which then flips Q8_0 activation roundings far more often than float32
// rounding alone does: observed up to 1.01e-2 (h96-mha, q8_0 weights), so 2*tolQuantized.
// (Q8_0 caches stay near 1e-7 here: their blocks' rounding flips are as rare as the
// activations'.)
func tolKV(tol float64, kv KVType) float64 {
	switch {
	case kv == KVF16 && tol >= tolQuantized:
		return 2 * tolQuantized
	case kv == KVF16:
		return math.Max(tol, tolF16)
	case kv == KVQ8_0:
		return math.Max(tol, tolQuantized)
	}
	return tol
}

// kvTypesFor lists the KV types a shape's head size allows (Q8_0 needs a multiple of 32).
func kvTypesFor(s testShape) []KVType {
	if s.hidden/s.heads%32 == 0 {
		return []KVType{KVF32, KVF16, KVQ8_0}
	}
	return []KVType{KVF32, KVF16}
}

// runCompare loads path with opts (opts.KV: the cache type the reference rounds to), prefills
// prompt (every position's logits), decodes dec one token at a time, and compares every
// position with the reference. It returns the largest relative error seen.
func runCompare(t *testing.T, e kernelrt.Ops, path string, opts LoadOptions, prompt, dec []int32, tol float64) float64 {
	t.Helper()
	opts.AllLogits = true
	m, err := LoadGGUF(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	ref := loadRef(t, path)
	ref.kv = opts.KV
	want := ref.forward(append(append([]int32(nil), prompt...), dec...))
	worst := 0.0
	check := func(pos int, got []float32) {
		t.Helper()
		if len(got) != ref.vocab {
			t.Fatalf("position %d: %d logits, want %d", pos, len(got), ref.vocab)
		}
		r := relErr(got, want[pos])
		if os.Getenv("DBG") != "" {
			t.Logf("pos %d err %.3g", pos, r)
		}
		worst = math.Max(worst, r)
		if !(r <= tol) {
			t.Errorf("position %d: relative error %.3g > %g (logit 0: got %v, want %v)", pos, r, tol, got[0], want[pos][0])
		}
	}
	logits, err := m.Prefill(e, prompt)
	if err != nil {
		t.Fatal(err)
	}
	V := m.Cfg.Vocab
	for p := range prompt {
		check(p, logits[p*V:(p+1)*V])
	}
	for i, id := range dec {
		logits, err := m.Decode(e, id)
		if err != nil {
			t.Fatal(err)
		}
		check(len(prompt)+i, logits)
	}
	return worst
}

// TestReferenceForward loads models of several shapes and every weight type (tied and
// untied heads) and compares prefill and decode logits with the float64 reference, for each
// KV cache type the shape's head size allows.
func TestReferenceForward(t *testing.T) {
	dir := t.TempDir()
	for si, s := range testShapes {
		for ti, ty := range testTypeSets {
			t.Run(s.name+"/"+ty.name, func(t *testing.T) {
				tm := testModel{shape: s, types: ty, seed: uint64(100*si + ti + 1)}
				path := tm.write(t, dir)
				rng := rand.New(rand.NewPCG(uint64(si), uint64(ti)))
				prompt := make([]int32, 5+rng.IntN(4))
				for i := range prompt {
					prompt[i] = int32(rng.IntN(s.vocab))
				}
				dec := []int32{int32(rng.IntN(s.vocab)), int32(rng.IntN(s.vocab)), int32(rng.IntN(s.vocab))}
				for _, kv := range kvTypesFor(s) {
					tol := tolKV(tolFor(ty), kv)
					worst := runCompare(t, kernelrt.Serial{}, path, LoadOptions{KV: kv}, prompt, dec, tol)
					t.Logf("kv %s: max relative error %.3g (tolerance %g)", kv, worst, tol)
				}
			})
		}
	}
}

// TestReferenceForwardLlama: the llama architecture (no q/k/v biases, RoPE on adjacent
// pairs, rope_freqs factors, tied and untied heads, GQA, MHA and MQA) against the float64
// reference, serially and on a Runtime.
func TestReferenceForwardLlama(t *testing.T) {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := t.TempDir()
	for si, s := range testShapes {
		for _, ti := range []int{0, 3, 4, 6} {
			ty := testTypeSets[ti]
			for _, freqs := range []bool{false, true} {
				t.Run(fmt.Sprintf("%s/%s/freqs=%v", s.name, ty.name, freqs), func(t *testing.T) {
					tm := testModel{shape: s, types: ty, seed: uint64(1000*si + ti), arch: "llama", ropeFreqs: freqs}
					path := tm.write(t, dir)
					prompt := []int32{1, int32(s.vocab - 1), 7, 3, int32(s.vocab / 2)}
					for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
						worst := runCompare(t, e, path, LoadOptions{KV: KVF32}, prompt, []int32{2, 5}, tolFor(ty))
						t.Logf("%T: max relative error %.3g", e, worst)
					}
				})
			}
		}
	}
}

// TestReferenceForwardQwen3: the qwen3 architecture (per-head q/k RMSNorm before RoPE, no
// biases, a head size from attention.key_length that is not hidden/heads, so q is wider or
// narrower than the hidden state) against the float64 reference, serially and on a Runtime,
// with each KV cache type the head size allows.
func TestReferenceForwardQwen3(t *testing.T) {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := t.TempDir()
	cases := []struct {
		shape   testShape
		headDim int
	}{
		{testShapes[0], 32},  // hidden 64, 4 heads of 32 over 2: q 128 wide
		{testShapes[1], 0},   // hidden 128, 2 heads of 64 (no key_length), MQA
		{testShapes[2], 16},  // hidden 96, 6 heads of 16: q 96 wide, MHA
		{testShapes[3], 128}, // hidden 32, 1 head of 128
	}
	for ci, cs := range cases {
		for _, ti := range []int{0, 3, 5, 11} {
			ty := testTypeSets[ti]
			t.Run(fmt.Sprintf("%s-hd%d/%s", cs.shape.name, cs.headDim, ty.name), func(t *testing.T) {
				tm := testModel{shape: cs.shape, types: ty, seed: uint64(3000 + 10*ci + ti), arch: "qwen3", headDim: cs.headDim}
				path := tm.write(t, dir)
				prompt := []int32{2, int32(cs.shape.vocab - 1), 9, 4, int32(cs.shape.vocab / 3)}
				hd := cs.headDim
				if hd == 0 {
					hd = cs.shape.hidden / cs.shape.heads
				}
				for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
					if kv == KVQ8_0 && hd%32 != 0 {
						continue
					}
					tol := tolKV(tolFor(ty), kv)
					for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
						worst := runCompare(t, e, path, LoadOptions{KV: kv}, prompt, []int32{3, 1}, tol)
						t.Logf("kv %s %T: max relative error %.3g (tolerance %g)", kv, e, worst, tol)
					}
				}
			})
		}
	}
}

// TestReferenceForwardGemma3: the gemma3 architecture (scaled embeddings, q/k norms, sandwich
// norms, GeGLU, five sliding-window layers with RoPE base 1e4 then a global one with the
// file's base and linear scaling) against the float64 reference: prompts longer than the
// window in one batch and in chunks that start inside and past the window, decoding on past
// it, serially and on a Runtime, with each KV cache type.
func TestReferenceForwardGemma3(t *testing.T) {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := t.TempDir()
	cases := []struct {
		shape           testShape
		headDim, window int
		ropeScale       float64
	}{
		// 7 layers: 0-4 and 6 sliding, 5 global. One KV head of 32 (q 128 wide), window 3.
		{testShape{"h64-l7-mqa", 64, 7, 96, 4, 1, 90, 64, 1e6}, 32, 3, 0},
		// 6 layers (the last global, scaled x4), 2 KV heads of 16, window 5.
		{testShape{"h64-l6-gqa2", 64, 6, 64, 4, 2, 70, 64, 1e6}, 16, 5, 4},
		// 62 layers, as Gemma 3 27B: queries scaled by 1/sqrt(hidden/heads) = 1/4, not
		// 1/sqrt(32). (Float weights and an F32 cache only: over 62 layers rounding flips
		// add up beyond the small models' tolerances; not with -short, which the race run uses.)
		{testShape{"h64-l62", 64, 62, 32, 4, 1, 40, 64, 1e6}, 32, 4, 0},
	}
	for ci, cs := range cases {
		for _, ti := range []int{1, 0, 3, 6} {
			ty := testTypeSets[ti]
			if cs.shape.layers == 62 && (ti != 1 || testing.Short()) {
				continue
			}
			t.Run(fmt.Sprintf("%s-w%d/%s", cs.shape.name, cs.window, ty.name), func(t *testing.T) {
				tm := testModel{shape: cs.shape, types: ty, seed: uint64(4000 + 10*ci + ti), arch: "gemma3",
					headDim: cs.headDim, window: cs.window, ropeScale: cs.ropeScale}
				path := tm.write(t, dir)
				V := cs.shape.vocab
				prompt := []int32{2, int32(V - 1), 9, 4, int32(V / 3), 11, 0, 7, int32(V / 2)}
				dec := []int32{3, 1, 5}
				for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
					if kv == KVQ8_0 && cs.headDim%32 != 0 || cs.shape.layers == 62 && kv != KVF32 {
						continue
					}
					tol := tolKV(tolFor(ty), kv)
					for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
						worst := runCompare(t, e, path, LoadOptions{KV: kv}, prompt, dec, tol)
						t.Logf("kv %s %T: max relative error %.3g (tolerance %g)", kv, e, worst, tol)
					}
				}
				// Chunks of 2: batches at positions inside, across and past the window.
				m, err := LoadGGUF(path, LoadOptions{KV: KVF32, MaxBatch: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				// Decode reads a sliding layer's window only: layers 5, 11, ... are global.
				n, global := 20, cs.shape.layers/6
				wantRead := 2 * 4 * cs.shape.kvHeads * cs.headDim * ((cs.shape.layers-global)*cs.window + global*n)
				if got := m.KVReadBytes(n); got != wantRead {
					t.Errorf("KVReadBytes(%d) = %d, want %d", n, got, wantRead)
				}
				ref := loadRef(t, path)
				ref.kv = KVF32
				want := ref.forward(append(append([]int32(nil), prompt...), dec...))
				tol := tolFor(ty)
				checkChunkedThenDecode(t, m, rt, prompt, dec, want, tol)
			})
		}
	}
}

// TestReferenceForwardGemma2: the gemma2 architecture (scaled embeddings, sandwich norms,
// GeGLU, layers 0, 2, ... sliding and the odd ones global with the same RoPE, attention
// scores and logits soft-capped) against the float64 reference (which soft-caps with
// math.Tanh): small caps that bend most scores and logits, the defaults (window 4096 and
// caps 50/30 when the file has no keys), and 46 layers (Gemma 2 27B's query scale), serially
// and on a Runtime, with each KV cache type, then in chunks across the window.
func TestReferenceForwardGemma2(t *testing.T) {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := t.TempDir()
	cases := []struct {
		shape             testShape
		headDim, window   int
		attnCap, finalCap float64
	}{
		// 4 layers: 0 and 2 slide over 3 positions; caps 0.7 and 2 bend most values.
		{testShape{"h64-l4-gqa2", 64, 4, 96, 4, 2, 90, 64, 1e4}, 32, 3, 0.7, 2},
		// 3 layers, MQA, window 5, no keys for the caps: 50 and 30.
		{testShape{"h64-l3-mqa", 64, 3, 64, 4, 1, 70, 64, 1e4}, 32, 5, 0, 0},
		// no sliding_window key: the 4096 default (wider than the prompt: every layer global).
		{testShape{"h64-l2-nowindow", 64, 2, 64, 4, 2, 50, 64, 1e4}, 32, 0, 1.5, 3},
		// 46 layers, as Gemma 2 27B: queries scaled by 1/sqrt(hidden/heads) = 1/4, not
		// 1/sqrt(32) (float weights and an F32 cache only; not with -short).
		{testShape{"h64-l46", 64, 46, 32, 4, 1, 40, 64, 1e4}, 32, 4, 1, 5},
	}
	for ci, cs := range cases {
		for _, ti := range []int{1, 3, 6} {
			ty := testTypeSets[ti]
			if cs.shape.layers == 46 && (ti != 1 || testing.Short()) {
				continue
			}
			t.Run(fmt.Sprintf("%s-w%d/%s", cs.shape.name, cs.window, ty.name), func(t *testing.T) {
				tm := testModel{shape: cs.shape, types: ty, seed: uint64(5100 + 10*ci + ti), arch: "gemma2",
					headDim: cs.headDim, window: cs.window, attnCap: cs.attnCap, finalCap: cs.finalCap}
				path := tm.write(t, dir)
				V := cs.shape.vocab
				prompt := []int32{2, int32(V - 1), 9, 4, int32(V / 3), 11, 0, 7, int32(V / 2)}
				dec := []int32{3, 1, 5}
				for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
					if kv == KVQ8_0 && cs.headDim%32 != 0 || cs.shape.layers == 46 && kv != KVF32 {
						continue
					}
					tol := tolKV(tolFor(ty), kv)
					for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
						worst := runCompare(t, e, path, LoadOptions{KV: kv}, prompt, dec, tol)
						t.Logf("kv %s %T: max relative error %.3g (tolerance %g)", kv, e, worst, tol)
					}
				}
				m, err := LoadGGUF(path, LoadOptions{KV: KVF32, MaxBatch: 2})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				wantCfg := [3]float64{float64(cs.window), float64(float32(cs.attnCap)), float64(float32(cs.finalCap))}
				for i, d := range [3]float64{4096, 50, 30} {
					if wantCfg[i] == 0 {
						wantCfg[i] = d
					}
				}
				if got := [3]float64{float64(m.Cfg.SlidingWindow), float64(m.Cfg.AttnSoftcap), float64(m.Cfg.FinalSoftcap)}; got != wantCfg {
					t.Errorf("window, soft-caps = %v, want %v", got, wantCfg)
				}
				// Decode reads a sliding layer's window only: the odd layers are global.
				n, global := 20, cs.shape.layers/2
				wantRead := 2 * 4 * cs.shape.kvHeads * cs.headDim * ((cs.shape.layers-global)*min(n, m.Cfg.SlidingWindow) + global*n)
				if got := m.KVReadBytes(n); got != wantRead {
					t.Errorf("KVReadBytes(%d) = %d, want %d", n, got, wantRead)
				}
				// Chunks of 2: batches at positions inside, across and past the window.
				ref := loadRef(t, path)
				ref.kv = KVF32
				want := ref.forward(append(append([]int32(nil), prompt...), dec...))
				tol := tolFor(ty)
				checkChunkedThenDecode(t, m, rt, prompt, dec, want, tol)
			})
		}
	}
}

// checkChunkedThenDecode prefills prompt (in MaxBatch chunks) and decodes dec on m, checking
// every step's logits against the reference's want (one row per position).
func checkChunkedThenDecode(t *testing.T, m *Model, rt kernelrt.Ops, prompt, dec []int32, want [][]float64, tol float64) {
	t.Helper()
	got, err := m.Prefill(rt, prompt)
	if err != nil {
		t.Fatal(err)
	}
	if r := relErr(got, want[len(prompt)-1]); !(r <= tol) {
		t.Errorf("chunked prefill: relative error %.3g > %g", r, tol)
	}
	for i, id := range dec {
		got, err := m.Decode(rt, id)
		if err != nil {
			t.Fatal(err)
		}
		if r := relErr(got, want[len(prompt)+i]); !(r <= tol) {
			t.Errorf("decode %d after a chunked prefill: relative error %.3g > %g", i, r, tol)
		}
	}
}

// TestReferenceForwardChunked prefills a prompt longer than MaxBatch (several forward calls)
// through the Runtime's dispatch wrappers, with each KV cache type.
func TestReferenceForwardChunked(t *testing.T) {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := t.TempDir()
	for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
		for _, ty := range []testTypes{testTypeSets[0], testTypeSets[3], testTypeSets[5]} {
			t.Run(kv.String()+"/"+ty.name, func(t *testing.T) {
				tm := testModel{shape: testShapes[4], types: ty, seed: 7} // head size 32: every KV type
				path := tm.write(t, dir)
				tol := tolKV(tolFor(ty), kv)
				prompt := make([]int32, 11)
				for i := range prompt {
					prompt[i] = int32((i*37 + 3) % tm.shape.vocab)
				}
				// AllLogits needs the prompt in one batch: compare a one-batch prefill, then
				// prefill more tokens in chunks of 4 and compare through decode.
				worst := runCompare(t, rt, path, LoadOptions{KV: kv}, prompt, []int32{5, 9, 1, 0}, tol)
				t.Logf("max relative error %.3g", worst)

				m, err := LoadGGUF(path, LoadOptions{KV: kv, MaxBatch: 4})
				if err != nil {
					t.Fatal(err)
				}
				defer m.Close()
				ref := loadRef(t, path)
				ref.kv = kv
				want := ref.forward(prompt)
				got, err := m.Prefill(rt, prompt)
				if err != nil {
					t.Fatal(err)
				}
				if r := relErr(got, want[len(prompt)-1]); !(r <= tol) {
					t.Errorf("chunked prefill (MaxBatch 4): relative error %.3g > %g", r, tol)
				}
			})
		}
	}
}

// TestReferenceForwardKQuants: files holding the K-quants (alone, in llama.cpp-like mixes,
// beside the blocks of 32 and the float types; tied and untied heads of every kind) in a
// 256-wide shape, qwen2 and llama, serially and on a Runtime, against the float64 reference.
func TestReferenceForwardKQuants(t *testing.T) {
	rt, err := kernelrt.New(kernelrt.Options{Threads: 2, NoPin: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rt.Close()
	dir := t.TempDir()
	for ti, ty := range kTypeSets {
		for _, arch := range []string{"qwen2", "llama"} {
			t.Run(arch+"/"+ty.name, func(t *testing.T) {
				tm := testModel{shape: kTestShape, types: ty, seed: uint64(50 + ti), arch: arch}
				path := tm.write(t, dir)
				prompt := []int32{3, 70, 11, 0, 41, 29}
				tol := tolFor(ty)
				if ty.quantized() {
					tol = tolQuantizedWide
				}
				for _, e := range []kernelrt.Ops{kernelrt.Serial{}, rt} {
					worst := runCompare(t, e, path, LoadOptions{}, prompt, []int32{8, 64, 1}, tol)
					t.Logf("%T: max relative error %.3g", e, worst)
				}
			})
		}
	}
}
