package generic

import (
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// The decoder ops: pure-Go ports of the _ref kernels in csrc/elementwise.c, rope.c,
// attention.c and embed.c, operation for operation. Products are wrapped in explicit float32
// conversions (the Go spec may otherwise fuse x*y+z into an FMA, which the C _ref variant,
// compiled for baseline x86-64 in ISO C mode, never does), so on amd64 the two agree bit for bit.

// negFltMax is -FLT_MAX: silu clamps a -Inf gate to it so that -Inf/(1+Inf) is -0, not NaN.
const negFltMax float32 = -math.MaxFloat32

// silu is krt_ew_silu: g / (1 + e^-g), with g = -Inf giving -0 and NaN staying NaN.
func silu(g float32) float32 {
	e := Expf(-g)
	n := g
	if n < negFltMax {
		n = negFltMax
	}
	return n / (1 + e)
}

// SwiGLU is krt_swiglu_ref: out[i] = silu(gate[i]) * up[i] for i in [i0, i1).
func SwiGLU(out, gate, up kern.P, i0, i1 int) {
	o, g, u := f32(out, i1), f32(gate, i1), f32(up, i1)
	for i := i0; i < i1; i++ {
		o[i] = silu(g[i]) * u[i]
	}
}

// gegluC2 is 2 sqrt(2/pi) and gegluA the cubic coefficient of GELU's tanh form.
const (
	gegluC2 float32 = 1.5957691216057308
	gegluA  float32 = 0.044715
)

// gelu is krt_gg_gelu: x / (1 + e^(-2u)), u = sqrt(2/pi) (x + 0.044715 x^3).
func gelu(x float32) float32 {
	m2u := float32(float32(-gegluC2*x) * float32(1+float32(gegluA*x)*x))
	e := Expf(m2u)
	n := x
	if n < negFltMax {
		n = negFltMax
	}
	return n / (1 + e)
}

// GeGLU is krt_geglu_ref: out[i] = gelu(gate[i]) * up[i] for i in [i0, i1).
func GeGLU(out, gate, up kern.P, i0, i1 int) {
	o, g, u := f32(out, i1), f32(gate, i1), f32(up, i1)
	for i := i0; i < i1; i++ {
		o[i] = gelu(g[i]) * u[i]
	}
}

// Add is krt_add_ref: out[i] = a[i] + b[i] for i in [i0, i1) (out may alias a or b).
func Add(out, a, b kern.P, i0, i1 int) {
	o, x, y := f32(out, i1), f32(a, i1), f32(b, i1)
	for i := i0; i < i1; i++ {
		o[i] = x[i] + y[i]
	}
}

// RopeNeoX is krt_rope_neox_ref: in each head of tokens [t0, t1), element i < head_dim/2
// rotates with element i + head_dim/2 by the table's angle for position pos0 + t.
func RopeNeoX(x, cosTab, sinTab kern.P, stride, nHeads, headDim, pos0, t0, t1 int) {
	half := headDim / 2
	xs := f32(x, (t1-1)*stride+nHeads*headDim)
	ct, st := f32(cosTab, (pos0+t1)*half), f32(sinTab, (pos0+t1)*half)
	for t := t0; t < t1; t++ {
		c := ct[(pos0+t)*half : (pos0+t+1)*half]
		s := st[(pos0+t)*half : (pos0+t+1)*half]
		for h := 0; h < nHeads; h++ {
			xh := xs[t*stride+h*headDim : t*stride+(h+1)*headDim]
			for i := 0; i < half; i++ {
				x0, x1 := xh[i], xh[i+half]
				xh[i] = float32(x0*c[i]) - float32(x1*s[i])
				xh[i+half] = float32(x0*s[i]) + float32(x1*c[i])
			}
		}
	}
}

// RopeNorm is krt_rope_norm_ref: in each head of tokens [t0, t1), element 2i rotates with
// element 2i+1 by the table's angle for position pos0 + t.
func RopeNorm(x, cosTab, sinTab kern.P, stride, nHeads, headDim, pos0, t0, t1 int) {
	half := headDim / 2
	xs := f32(x, (t1-1)*stride+nHeads*headDim)
	ct, st := f32(cosTab, (pos0+t1)*half), f32(sinTab, (pos0+t1)*half)
	for t := t0; t < t1; t++ {
		c := ct[(pos0+t)*half : (pos0+t+1)*half]
		s := st[(pos0+t)*half : (pos0+t+1)*half]
		for h := 0; h < nHeads; h++ {
			xh := xs[t*stride+h*headDim : t*stride+(h+1)*headDim]
			for i := 0; i < half; i++ {
				x0, x1 := xh[2*i], xh[2*i+1]
				xh[2*i] = float32(x0*c[i]) - float32(x1*s[i])
				xh[2*i+1] = float32(x0*s[i]) + float32(x1*c[i])
			}
		}
	}
}

// KVAppend is krt_kv_append_ref: token t of [t0, t1) (src + t*srcStride, nKVHeads rows of
// headDim floats) goes to position pos0 + t of the [kv_head][max_ctx][head_dim] cache.
func KVAppend(cache, src kern.P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int) {
	cs := f32(cache, nKVHeads*maxCtx*headDim)
	ss := f32(src, (t1-1)*srcStride+nKVHeads*headDim)
	for t := t0; t < t1; t++ {
		for h := 0; h < nKVHeads; h++ {
			dst := (h*maxCtx + pos0 + t) * headDim
			s := t*srcStride + h*headDim
			copy(cs[dst:dst+headDim], ss[s:s+headDim])
		}
	}
}

// attnInvSqrt is krt_attn_inv_sqrt: 1/sqrt(n) by six Newton steps in float64 from the
// bit-trick estimate, rounded once to float32.
func attnInvSqrt(n int) float32 {
	x := float64(n)
	y := math.Float64frombits(0x5fe6eb50c7b537a9 - math.Float64bits(x)>>1)
	for k := 0; k < 6; k++ {
		y = y * (1.5 - float64(float64(0.5*x)*y)*y)
	}
	return float32(y)
}

// EmbedQ8_0 is krt_embed_q8_0_ref: out row t = dequantized table row ids[t], t in [t0, t1).
func EmbedQ8_0(out, table, ids kern.P, dim, t0, t1 int) {
	nb := dim / qk
	os := f32(out, t1*dim)
	is := i32s(ids, t1)
	for t := t0; t < t1; t++ {
		row := q8s(unsafe.Add(table, int(is[t])*nb*int(unsafe.Sizeof(blockQ8_0{}))), nb)
		o := os[t*dim : (t+1)*dim]
		for b := range row {
			d := FP16ToFP32(row[b].d)
			for j, qv := range row[b].qs {
				o[b*qk+j] = d * float32(qv)
			}
		}
	}
}
