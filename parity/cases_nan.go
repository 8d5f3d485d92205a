package parity

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt"
)

// NaN and Inf (issue 12, item 1): one semantics for every op, backend and variant. Each case
// puts NaN, +Inf and -Inf where they matter (first and last elements, vector tails, every
// operand) and checks each output's class (NaN / +Inf / -Inf / finite) against a float64
// reference that follows the rule the op's csrc banner states; finite outputs are held to
// the op's usual tolerance. The suite also wants every Runtime split to give Serial's bits.

const nanMetric = "outputs whose class (NaN/+Inf/-Inf/finite) breaks the documented rule, or finite and off"

var (
	nan32  = float32(math.NaN())
	inf32  = float32(math.Inf(1))
	ninf32 = float32(math.Inf(-1))
)

// class is 0 finite, 1 NaN, 2 +Inf, 3 -Inf, of v rounded to float32 (a float64 reference of
// a float32 computation overflows where float32 does).
func class(v float64) int {
	f := float64(float32(v))
	switch {
	case f != f:
		return 1
	case math.IsInf(f, 1):
		return 2
	case math.IsInf(f, -1):
		return 3
	}
	return 0
}

var className = [...]string{"finite", "NaN", "+Inf", "-Inf"}

// specialBad counts the outputs whose class differs from the reference's, or that are finite
// and off by more than tol relative to max(scale, floor) (scale nil: |ref|); note names the
// first.
func specialBad(out []float32, ref, scale []float64, tol float64) (float64, string) {
	bad, note := 0, ""
	for i, v := range out {
		rc, oc := class(ref[i]), class(float64(v))
		ok := rc == oc
		if ok && rc == 0 {
			sc := math.Abs(ref[i])
			if scale != nil {
				sc = scale[i]
			}
			ok = relErr(v, ref[i], sc, floor) <= tol
		}
		if !ok {
			if bad == 0 {
				note = fmt.Sprintf("first at %d: got %v (%s), want %.7g (%s)", i, v, className[oc], ref[i], className[rc])
			}
			bad++
		}
	}
	return float64(bad), note
}

// nanCase fills in the parts every NaN/Inf case shares.
func nanCase(op kernelrt.Op, fn, shape string, s kernelrt.Shape, cost int) *Case {
	return &Case{Metric: nanMetric, Op: op, Fn: fn, Shape: "NaN/Inf " + shape, S: s, Cost: cost}
}

// nanSoftmaxCase: rows with NaN, +Inf, -Inf at the first element, a vector boundary, the
// tail and everywhere (csrc/norm.c: NaN or +Inf in the valid part makes the row NaN, -Inf gets
// exactly 0 while any entry is finite, all -Inf is NaN; past valid[r] stays exactly 0 whatever
// it held).
func nanSoftmaxCase(masked bool) *Case {
	const cols = 40 // two 16-float vectors and an 8-float tail
	specials := []map[int]float32{{1: nan32}, {0: nan32}, {39: inf32}, {5: ninf32, 20: ninf32, 39: ninf32}, nil,
		{16: nan32}, {15: ninf32}, {0: inf32, 1: inf32}, {}, {32: ninf32, 33: ninf32, 34: ninf32}}
	rows := len(specials)
	fn := "Softmax"
	if masked {
		fn = "SoftmaxMasked"
	}
	c := nanCase(kernelrt.OpSoftmax, fn, fmt.Sprintf("%dx%d", rows, cols), kernelrt.Shape{Rows: rows, Cols: cols, Tokens: rows}, rows*cols)
	valid := []int32{10, 40, 40, 21, 40, 17, 40, 1, 40, 33}
	if !masked {
		valid = nil
	}
	var x0, x []float32
	var ref []float64
	c.setup = func() {
		r := newRng("nan/" + fn)
		x0, x, ref = make([]float32, rows*cols), make([]float32, rows*cols), make([]float64, rows*cols)
		r.fill(x0, -4, 4)
		for i, sp := range specials {
			row := x0[i*cols : (i+1)*cols]
			if sp == nil {
				for j := range row {
					row[j] = ninf32
				}
			}
			for j, v := range sp {
				row[j] = v
			}
			n := cols
			if masked {
				n = int(valid[i])
			}
			m := math.Inf(-1)
			for _, v := range row[:n] {
				m = math.Max(m, float64(v)) // NaN propagates: the row is NaN
			}
			sum := 0.0
			for j, v := range row[:n] {
				ref[i*cols+j] = math.Exp(float64(v) - m)
				sum += ref[i*cols+j]
			}
			for j := range row[:n] {
				ref[i*cols+j] /= sum
			}
		}
	}
	c.free = func() { x0, x, ref = nil, nil, nil }
	c.run = func(e exec) error {
		copy(x, x0)
		if masked {
			return e.SoftmaxMasked(x, rows, cols, valid)
		}
		return e.Softmax(x, rows, cols)
	}
	c.outF = func() []float32 { return x }
	c.check = func() (float64, string) { return specialBad(x, ref, nil, 1e-6) }
	return c
}

// nanRMSCase: NaN or +-Inf in a row of x (NaN: the row is NaN; +-Inf: scale 1/sqrt(Inf) = 0,
// the infinite elements NaN, the others +-0), or in the weight (elementwise: NaN, or +-Inf
// times x*scale, NaN where that is 0).
func nanRMSCase(inWeight bool) *Case {
	const dim, T = 40, 4
	what := "x"
	if inWeight {
		what = "weight"
	}
	c := nanCase(kernelrt.OpRMSNorm, "RMSNorm", fmt.Sprintf("T=%d dim=%d in %s", T, dim, what), kernelrt.Shape{Tokens: T, Cols: dim}, T*dim)
	var x, w, out []float32
	var ref []float64
	c.setup = func() {
		r := newRng("nan/rms/" + what)
		x, w, out, ref = make([]float32, T*dim), make([]float32, dim), make([]float32, T*dim), make([]float64, T*dim)
		r.fill(x, -2, 2)
		r.fill(w, 0.5, 1.5)
		if inWeight {
			w[5], w[6], w[39] = nan32, inf32, ninf32
			x[2*dim+6] = 0 // 0 * Inf
		} else {
			x[1] = nan32
			x[dim+17] = inf32
			x[2*dim], x[2*dim+39] = ninf32, inf32
			x[3*dim+16] = nan32
		}
		for t := 0; t < T; t++ {
			ss := 0.0
			for _, v := range x[t*dim : (t+1)*dim] {
				ss += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(ss/dim+float64(epsNorm))
			for i := 0; i < dim; i++ {
				ref[t*dim+i] = float64(x[t*dim+i]) * inv * float64(w[i])
			}
		}
	}
	c.free = func() { x, w, out, ref = nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(out); return e.RMSNorm(out, x, w, T, dim, epsNorm) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, nil, 1e-6) }
	return c
}

// nanGLUCase: every special gate against every special up (csrc/elementwise.c, geglu.c:
// NaN gives NaN; gate -Inf, or so negative that exp overflows, gives -0; +Inf gives +Inf; the
// product with up is IEEE, so -0 * Inf and Inf * 0 are NaN).
func nanGLUCase(geglu bool) *Case {
	gates := []float32{nan32, inf32, ninf32, -100, -89, -87, -20, 0, float32(math.Copysign(0, -1)), 1.5, -1.5, 30}
	ups := []float32{nan32, inf32, ninf32, 0, float32(math.Copysign(0, -1)), 2, -3}
	n := len(gates) * len(ups)
	op, fn := kernelrt.OpSwiGLU, "SwiGLU"
	if geglu {
		op, fn = kernelrt.OpGeGLU, "GeGLU"
	}
	c := nanCase(op, fn, fmt.Sprintf("N=%d", n), kernelrt.Shape{N: n, Tokens: 1}, n)
	var g, u, out []float32
	var ref []float64
	c.setup = func() {
		g, u, out, ref = make([]float32, n), make([]float32, n), make([]float32, n), make([]float64, n)
		for i := range g {
			g[i], u[i] = gates[i/len(ups)], ups[i%len(ups)]
			x := float64(g[i])
			var act float64
			switch {
			case math.IsNaN(x):
				act = x
			case math.IsInf(x, 1):
				act = x
			case geglu:
				m2u := -2 * math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
				if math.IsInf(x, -1) || m2u > 88.3762626647949 {
					act = math.Copysign(0, -1)
				} else {
					act = x / (1 + math.Exp(m2u))
				}
			default:
				if math.IsInf(x, -1) || x <= -88.3762626647949 {
					act = math.Copysign(0, -1)
				} else {
					act = x / (1 + math.Exp(-x))
				}
			}
			ref[i] = act * float64(u[i])
		}
	}
	c.free = func() { g, u, out, ref = nil, nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(out)
		if geglu {
			return e.GeGLU(out, g, u)
		}
		return e.SwiGLU(out, g, u)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, nil, 1e-6) }
	return c
}

// nanAddCase: IEEE sums of every pair of specials (and a float32 overflow to +Inf).
func nanAddCase() *Case {
	vals := []float32{nan32, inf32, ninf32, 1, float32(math.Copysign(0, -1)), 3.4e38, -2}
	n := len(vals) * len(vals)
	c := nanCase(kernelrt.OpAdd, "Add", fmt.Sprintf("N=%d", n), kernelrt.Shape{N: n, Tokens: 1}, n)
	var a, b, out []float32
	var ref []float64
	c.setup = func() {
		a, b, out, ref = make([]float32, n), make([]float32, n), make([]float32, n), make([]float64, n)
		for i := range a {
			a[i], b[i] = vals[i/len(vals)], vals[i%len(vals)]
			ref[i] = float64(a[i]) + float64(b[i])
		}
	}
	c.free = func() { a, b, out, ref = nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(out); return e.Add(out, a, b) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, nil, 0) }
	return c
}

// nanRopeCase: NaN / +-Inf in rotated pairs at positions 0 (sin exactly 0: Inf * 0 is NaN), 1
// and 2 (cos(2) < 0) (csrc/rope.c: IEEE arithmetic on each pair).
func nanRopeCase(norm bool) *Case {
	const T, heads, stride = 3, 2, 2 * headDim
	fn := "RopeNeoX"
	op := kernelrt.OpRopeNeoX
	if norm {
		fn, op = "RopeNorm", kernelrt.OpRopeNorm
	}
	c := nanCase(op, fn, fmt.Sprintf("T=%d heads=%d hd=%d pos0=0", T, heads, headDim), kernelrt.Shape{Tokens: T, Heads: heads, HeadD: headDim}, T*stride)
	pair := func(t, h, i int) (int, int) {
		base := t*stride + h*headDim
		if norm {
			return base + 2*i, base + 2*i + 1
		}
		return base + i, base + i + headDim/2
	}
	var x0, x []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("nan/" + fn)
		x0, x = make([]float32, T*stride), make([]float32, T*stride)
		r.fill(x0, -2, 2)
		set := func(t, h, i int, a, b float32) {
			i0, i1 := pair(t, h, i)
			x0[i0], x0[i1] = a, b
		}
		set(0, 0, 0, inf32, 0.5)
		set(0, 0, 1, 0.25, nan32)
		set(0, 1, 3, ninf32, inf32)
		set(1, 0, 0, inf32, -1)
		set(1, 1, 5, inf32, inf32)
		set(1, 1, 31, nan32, 2)
		set(2, 0, 0, inf32, 1)
		set(2, 1, 17, -3, ninf32)
		ref, scale = ropeRef(x0, T, heads, stride, 0, norm)
	}
	c.free = func() { x0, x, ref, scale = nil, nil, nil, nil }
	c.run = func(e exec) error {
		copy(x, x0)
		if norm {
			return e.RopeNorm(x, ropeTab, T, heads, headDim, stride, 0)
		}
		return e.RopeNeoX(x, ropeTab, T, heads, headDim, stride, 0)
	}
	c.outF = func() []float32 { return x }
	c.check = func() (float64, string) { return specialBad(x, ref, scale, 1e-6) }
	return c
}

// specialBlocksQ8 sets special fp16 scales on Q8_0 blocks: NaN, +Inf with some zero quants
// (Inf * 0 = NaN), -Inf.
func specialBlocksQ8(bs []kernelrt.BlockQ8_0, nanAt, infAt, ninfAt int) {
	bs[nanAt].D = 0x7e00
	bs[infAt].D = 0x7c00
	bs[infAt].Qs[0], bs[infAt].Qs[17], bs[infAt].Qs[31] = 0, 0, 0
	bs[ninfAt].D = 0xfc00
}

// nanEmbedCase: table rows with NaN and +-Inf scales (csrc/embed.c: a NaN scale gives 32
// NaNs, an infinite one +-Inf and NaN where the quant is 0).
func nanEmbedCase() *Case {
	const vocab, dim = 5, 64
	ids := []int32{0, 1, 2, 3, 1, 4}
	c := nanCase(kernelrt.OpEmbedQ8_0, "EmbedQ8_0", fmt.Sprintf("vocab=%d dim=%d T=%d", vocab, dim, len(ids)),
		kernelrt.Shape{Tokens: len(ids), Cols: dim}, len(ids)*dim)
	var table []kernelrt.BlockQ8_0
	var out []float32
	var ref []float64
	c.setup = func() {
		table = randQ8(newRng("nan/embed"), vocab, dim)
		specialBlocksQ8(table, 0, 3, 4) // row 0 block 0 NaN, row 1 block 1 +Inf, row 2 block 0 -Inf
		out, ref = make([]float32, len(ids)*dim), make([]float64, len(ids)*dim)
		for t, id := range ids {
			for j := 0; j < dim; j++ {
				b := &table[int(id)*dim/32+j/32]
				ref[t*dim+j] = f16(b.D) * float64(b.Qs[j%32])
			}
		}
	}
	c.free = func() { table, out, ref = nil, nil, nil }
	c.run = func(e exec) error { fillNaN(out); return e.EmbedQ8_0(out, table, ids, dim, vocab) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, nil, 0) }
	return c
}

// nanDequantCase: blocks with NaN and +-Inf scales, elementwise IEEE d * q (Q5_0: d * (q-16)).
func nanDequantCase(q5 bool) *Case {
	const n = 256
	op, fn := kernelrt.OpDequantizeQ8_0, "DequantizeQ8_0"
	if q5 {
		op, fn = kernelrt.OpDequantizeQ5_0, "DequantizeQ5_0"
	}
	c := nanCase(op, fn, fmt.Sprintf("N=%d", n), kernelrt.Shape{N: n, Tokens: 1}, n)
	var w8 []kernelrt.BlockQ8_0
	var w5 []kernelrt.BlockQ5_0
	var out []float32
	var ref []float64
	c.setup = func() {
		r := newRng("nan/" + fn)
		out, ref = make([]float32, n), make([]float64, n)
		if q5 {
			w5 = randQ5(r, 1, n)
			w5[0].D, w5[3].D, w5[7].D = 0x7e00, 0x7c00, 0xfc00
			w5[3].Qs[0] = 0x00 // q = 16 at 0 and 16 where qh bit 4 is set: value 0, Inf*0 = NaN
			w5[3].Qh[0] |= 0x01
			w5[3].Qh[2] |= 0x01
			var q [32]int32
			for b := range w5 {
				unpackQ5(&w5[b], &q)
				for j := range q {
					ref[b*32+j] = f16(w5[b].D) * float64(q[j])
				}
			}
		} else {
			w8 = randQ8(r, 1, n)
			specialBlocksQ8(w8, 0, 3, 7)
			for b := range w8 {
				for j, v := range w8[b].Qs {
					ref[b*32+j] = f16(w8[b].D) * float64(v)
				}
			}
		}
	}
	c.free = func() { w8, w5, out, ref = nil, nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(out)
		if q5 {
			return e.DequantizeQ5_0(out, w5)
		}
		return e.DequantizeQ8_0(out, w8)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, nil, 0) }
	return c
}

// nanQuantCase: blocks holding NaN, +Inf or -Inf at their first, last or a middle element are
// stored poisoned (d = fp16 NaN, quants encoding 0), byte for byte as refQuantQ8/Q5 say.
func nanQuantCase(q5 bool) *Case {
	const n = 256
	op, fn := kernelrt.OpQuantizeQ8_0, "QuantizeQ8_0"
	if q5 {
		op, fn = kernelrt.OpQuantizeQ5_0, "QuantizeQ5_0"
	}
	c := &Case{Metric: "bytes differing from the reference quantizer with poisoned blocks (exact)", Op: op, Fn: fn,
		Shape: fmt.Sprintf("NaN/Inf N=%d", n), S: kernelrt.Shape{N: n, Tokens: 1}, Cost: n}
	var src []float32
	var out8, ref8 []kernelrt.BlockQ8_0
	var out5, ref5 []kernelrt.BlockQ5_0
	c.setup = func() {
		src = make([]float32, n)
		newRng("nan/"+fn).fill(src, -3, 3)
		src[0], src[63], src[64+15], src[96+16] = nan32, inf32, ninf32, nan32
		src[160], src[161] = inf32, ninf32
		if q5 {
			out5, ref5 = make([]kernelrt.BlockQ5_0, n/32), make([]kernelrt.BlockQ5_0, n/32)
			refQuantQ5(ref5, src)
		} else {
			out8, ref8 = make([]kernelrt.BlockQ8_0, n/32), make([]kernelrt.BlockQ8_0, n/32)
			refQuantQ8(ref8, src)
		}
	}
	c.free = func() { src, out8, ref8, out5, ref5 = nil, nil, nil, nil, nil }
	c.run = func(e exec) error {
		if q5 {
			fillByte(bytesOf(out5), 0xa5)
			return e.QuantizeQ5_0(out5, src)
		}
		fillByte(bytesOf(out8), 0xa5)
		return e.QuantizeQ8_0(out8, src)
	}
	c.outB = func() []byte {
		if q5 {
			return bytesOf(out5)
		}
		return bytesOf(out8)
	}
	c.check = func() (float64, string) {
		if q5 {
			return float64(diffB(bytesOf(out5), bytesOf(ref5))), ""
		}
		return float64(diffB(bytesOf(out8), bytesOf(ref8))), ""
	}
	return c
}

// gemvSpecialRef is a GEMV's reference under the rule of csrc/krt_quant.h: a block whose
// fp16 scale (weight or activation) is NaN or +-Inf makes every output it meets NaN, else
// sum_b d_w d_x isum_b (+ bias, IEEE).
func gemvSpecialRef(w *weights, x []kernelrt.BlockQ8_0, bias []float32, rows, cols, tokens int) (ref, scale []float64) {
	nb := cols / 32
	ref, scale = make([]float64, tokens*rows), make([]float64, tokens*rows)
	var q [32]int32
	for t := 0; t < tokens; t++ {
		for r := 0; r < rows; r++ {
			var s, a float64
			for b := 0; b < nb; b++ {
				xb := &x[t*nb+b]
				var dw float64
				if w.q5 != nil {
					wb := &w.q5[r*nb+b]
					dw = f16(wb.D)
					unpackQ5(wb, &q)
				} else {
					wb := &w.q8[r*nb+b]
					dw = f16(wb.D)
					for j, v := range wb.Qs {
						q[j] = int32(v)
					}
				}
				d := dw * f16(xb.D)
				if math.IsNaN(d) || math.IsInf(d, 0) {
					s = math.NaN()
					continue
				}
				isum := 0
				for j := range q {
					isum += int(q[j]) * int(xb.Qs[j])
				}
				s += d * float64(isum)
				a += math.Abs(d * float64(isum))
			}
			if bias != nil {
				s += float64(bias[r])
				a += math.Abs(float64(bias[r]))
			}
			ref[t*rows+r], scale[t*rows+r] = s, a
		}
	}
	return ref, scale
}

// nanGemvCase: quantized GEMV / GEMM with weight blocks of NaN, +Inf (with and without a
// zero integer dot), -Inf and mixed +-Inf scales, a NaN bias, and (when acts) an activation
// with a NaN or Inf (the fused kernels' quantizer poisons the block: every row NaN; GEMM: one
// token's block has a NaN scale). fused: FP32 activations (GemvQ8_0F32/Q5_0F32).
func nanGemvCase(q5, fused, acts bool, tokens int) *Case {
	const rows, cols = 48, 128
	t := "q8_0"
	if q5 {
		t = "q5_0"
	}
	var op kernelrt.Op
	var fn string
	switch {
	case tokens > 1 && q5:
		op, fn = kernelrt.OpGemmQ5_0, "GemmQ5_0"
	case tokens > 1:
		op, fn = kernelrt.OpGemmQ8_0, "GemmQ8_0"
	case fused && q5:
		op, fn = kernelrt.OpGemvQ5_0F32, "GemvQ5_0F32"
	case fused:
		op, fn = kernelrt.OpGemvQ8_0F32, "GemvQ8_0F32"
	case q5:
		op, fn = kernelrt.OpGemvQ5_0, "GemvQ5_0Bias"
	default:
		op, fn = kernelrt.OpGemvQ8_0, "GemvQ8_0Bias"
	}
	where := "in weights"
	if acts {
		where = "in weights and activations"
	}
	c := nanCase(op, fn, fmt.Sprintf("%s %dx%d T=%d %s", t, rows, cols, tokens, where), kernelrt.Shape{Rows: rows, Cols: cols, Tokens: tokens}, rows*cols*tokens)
	c.Tol = 0
	var w weights
	var xf, bias, y []float32
	var xq, scr []kernelrt.BlockQ8_0
	var ref, scale []float64
	c.setup = func() {
		r := newRng("nan/gemv/" + c.Fn + c.Shape)
		w = weights{rows: rows, cols: cols}
		nb := cols / 32
		if q5 {
			w.q5 = randQ5(r, rows, cols)
			w.q5[0*nb+0].D = 0x7e00 // row 0: NaN
			w.q5[1*nb+1].D = 0x7c00 // row 1: +Inf
			w.q5[2*nb+2].D = 0x7c00 // row 2: +Inf on a zero integer dot (every q = 16)
			w.q5[2*nb+2].Qs, w.q5[2*nb+2].Qh = [16]uint8{}, [4]uint8{0xff, 0xff, 0xff, 0xff}
			w.q5[3*nb+0].D, w.q5[3*nb+1].D = 0xfc00, 0x7c00 // row 3: -Inf and +Inf
			w.q5[rows*nb-1].D = 0xfc00                      // the last row's last block
		} else {
			w.q8 = randQ8(r, rows, cols)
			w.q8[0*nb+0].D = 0x7e00
			w.q8[1*nb+1].D = 0x7c00
			w.q8[2*nb+2].D, w.q8[2*nb+2].Qs = 0x7c00, [32]int8{}
			w.q8[3*nb+0].D, w.q8[3*nb+1].D = 0xfc00, 0x7c00
			w.q8[rows*nb-1].D = 0xfc00
		}
		xf = make([]float32, tokens*cols)
		r.fillActs(xf)
		if acts && fused {
			xf[37] = inf32 // block 1 poisoned: every row NaN
		}
		xq = make([]kernelrt.BlockQ8_0, tokens*nb)
		refQuantQ8(xq, xf)
		if acts && !fused {
			xq[(tokens-1)*nb+2].D = 0x7e00 // the last token's block 2: NaN scale
			if tokens > 1 {
				xq[0*nb+1].D = 0x7c00 // the first token's block 1: +Inf scale
			}
		}
		bias = make([]float32, rows)
		r.fill(bias, -0.1, 0.1)
		bias[9] = nan32
		y, scr = make([]float32, tokens*rows), make([]kernelrt.BlockQ8_0, nb)
		b := bias
		if fused {
			b = nil
		}
		ref, scale = gemvSpecialRef(&w, xq, b, rows, cols, tokens)
	}
	c.free = func() { w, xf, bias, y, xq, scr, ref, scale = weights{}, nil, nil, nil, nil, nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(y)
		switch {
		case tokens > 1 && q5:
			return e.GemmQ5_0(y, w.q5, xq, bias, rows, cols, tokens)
		case tokens > 1:
			return e.GemmQ8_0(y, w.q8, xq, bias, rows, cols, tokens)
		case fused && q5:
			return e.GemvQ5_0F32(y, w.q5, xf, nil, scr, rows, cols)
		case fused:
			return e.GemvQ8_0F32(y, w.q8, xf, nil, scr, rows, cols)
		case q5:
			return e.GemvQ5_0Bias(y, w.q5, xq, bias, rows, cols)
		}
		return e.GemvQ8_0Bias(y, w.q8, xq, bias, rows, cols)
	}
	c.outF = func() []float32 { return y }
	c.check = func() (float64, string) { return specialBad(y, ref, scale, 1e-5) }
	return c
}

// nanGemvF32Case: the FP32 GEMV with +Inf and -Inf activations and a NaN weight: IEEE dot
// products (the class does not depend on the summation order: +Inf and -Inf meeting is NaN
// in any order, Inf * 0 is NaN).
func nanGemvF32Case() *Case {
	const rows, cols = 40, 77
	c := nanCase(kernelrt.OpGemvF32, "GemvF32", fmt.Sprintf("%dx%d", rows, cols), kernelrt.Shape{Rows: rows, Cols: cols, Tokens: 1}, rows*cols)
	var w, x, y []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("nan/gemv_f32")
		w, x, y = make([]float32, rows*cols), make([]float32, cols), make([]float32, rows)
		r.fill(w, -1, 1)
		r.fill(x, -1, 1)
		x[3], x[76] = inf32, ninf32
		w[0*cols+3] = 0 // 0 * Inf
		w[5*cols+40] = nan32
		ref, scale = make([]float64, rows), make([]float64, rows)
		for i := 0; i < rows; i++ {
			for j, wv := range w[i*cols : (i+1)*cols] {
				p := float64(wv) * float64(x[j])
				ref[i] += p
				scale[i] += math.Abs(p)
			}
		}
	}
	c.free = func() { w, x, y, ref, scale = nil, nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(y); return e.GemvF32(y, w, x, rows, cols) }
	c.outF = func() []float32 { return y }
	c.check = func() (float64, string) { return specialBad(y, ref, scale, 1e-5) }
	return c
}

// nanStreamCase: the sum of a buffer holding +Inf (then -Inf: NaN) is IEEE.
func nanStreamCase(both bool) *Case {
	const n = 1000
	what := "+Inf"
	if both {
		what = "+Inf -Inf"
	}
	c := nanCase(kernelrt.OpStreamRead, "StreamRead", fmt.Sprintf("N=%d %s", n, what), kernelrt.Shape{N: n, Tokens: 1}, n)
	var x, out []float32
	var ref []float64
	c.setup = func() {
		x, out, ref = make([]float32, n), make([]float32, 1), make([]float64, 1)
		newRng("nan/stream").fill(x, -1, 1)
		x[999] = inf32
		if both {
			x[0] = ninf32
		}
		for _, v := range x {
			ref[0] += float64(v)
		}
	}
	c.free = func() { x, out, ref = nil, nil, nil }
	c.run = func(e exec) error {
		v, err := e.StreamRead(x)
		out[0] = v
		return err
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, nil, 0) }
	return c
}

// nanAttnCase: attention over a cache of kind with NaN / -Inf in attended keys, NaN / +Inf in
// attended values, a NaN or +Inf query element, and NaN in positions a token does not see
// (csrc/attention.c: a NaN or +Inf score makes the row NaN, -Inf scores weigh exactly 0, NaN
// or Inf in V reaches its element; Q8_0 stores a block holding NaN/Inf poisoned, so there it
// is NaN in the row (K) or the 32 elements (V); unseen positions never matter). T = 1 is
// decode (chunk 0: the Runtime's choice via AttentionX; chunk > 0: AttnDecode* with that
// chunk and AttnMerge), T > 1 prefill from pos0 = 40.
func nanAttnCase(kind kvKind, T, chunk int) *Case {
	const nh, nkv, hd = 4, 2, headDim
	pos0 := 199
	if T > 1 {
		pos0 = 40
	}
	ctx := pos0 + T
	fn := "Attention" + kind.String()
	op := attnDecodeOp[kind]
	nch := 1
	if T > 1 {
		op = attnPrefillOp[kind]
	} else if chunk > 0 {
		fn = "AttnDecode" + kind.String() + "+AttnMerge"
		nch = (ctx + chunk - 1) / chunk
	}
	c := nanCase(op, fn, fmt.Sprintf("T=%d ctx=%d heads=%d/%d hd=%d chunk=%d", T, ctx, nh, nkv, hd, chunk),
		kernelrt.Shape{Tokens: T, Heads: nh, KVHeads: nkv, HeadD: hd, Ctx: ctx, Chunks: nch}, T*nh*ctx*hd)
	qStride := nh * hd
	var cache *kvCacheData
	var q, out, part, scr []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("nan/attn/" + fn + c.Shape)
		maxCtx := ctx + 3
		special := func(k, v []float32) {
			at := func(g, j, d int) int { return (g*maxCtx+j)*hd + d }
			k[at(1, 10, 7)] = ninf32  // group 1: score -Inf (q[7] = 0.5 below), weight exactly 0
			v[at(1, 45, 5)] = nan32   // group 1 rows that see 45: element 5 NaN
			v[at(0, 30, 40)] = inf32  // group 0 rows that see 30: element 40 +Inf
			v[at(1, 20, 63)] = ninf32 // group 1 rows that see 20: element 63 -Inf
			v[at(1, ctx, 9)] = inf32  // past the context: never seen
			k[at(0, ctx+1, 0)] = inf32
			if T > 1 || chunk > 0 {
				k[at(0, 50, 3)] = nan32 // group 0 rows that see 50: NaN
			}
		}
		cache = newKVCacheData(r, kind, nkv, hd, maxCtx, ctx, special)
		q = make([]float32, (T-1)*qStride+nh*hd)
		r.fill(q, -2, 2)
		for t := 0; t < T; t++ {
			for h := 2; h < 4; h++ {
				q[t*qStride+h*hd+7] = 0.5
			}
		}
		if T > 1 {
			q[5*qStride+0*hd+0] = nan32 // token 5, head 0
			q[7*qStride+3*hd+2] = inf32 // token 7, head 3
		} else {
			q[1*hd+2] = inf32 // head 1: +Inf scores
		}
		out, scr = make([]float32, T*nh*hd), make([]float32, kernelrt.AttnScratchFloats(hd))
		part = make([]float32, kernelrt.AttnPartFloats(nh, hd, nch))
		ref, scale = attnRef(cache, q, T, qStride, nh, pos0, 0)
	}
	c.free = func() { cache, q, out, part, scr, ref, scale = nil, nil, nil, nil, nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(out)
		if chunk == 0 || T > 1 {
			return cache.attention(e, out, q, scr, T, qStride, nh, pos0, 0)
		}
		fillNaN(part)
		if err := cache.decode(e, out, part, q, scr, nh, ctx, chunk, 0); err != nil {
			return err
		}
		return e.AttnMerge(out, part, nh, hd, nch)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, scale, 1e-5) }
	return c
}

// nanCases are the NaN/Inf checks of every op where the values matter.
func nanCases() []*Case {
	var cs []*Case
	for _, q5 := range []bool{false, true} {
		cs = append(cs, nanQuantCase(q5), nanDequantCase(q5))
		for _, acts := range []bool{false, true} {
			cs = append(cs, nanGemvCase(q5, false, acts, 1), nanGemvCase(q5, true, acts, 1), nanGemvCase(q5, false, acts, 3))
		}
	}
	cs = append(cs, nanGemvF32Case(), nanRMSCase(false), nanRMSCase(true), nanSoftmaxCase(false), nanSoftmaxCase(true),
		nanGLUCase(false), nanGLUCase(true), nanAddCase(), nanRopeCase(false), nanRopeCase(true), nanEmbedCase(),
		nanStreamCase(false), nanStreamCase(true))
	for _, kind := range []kvKind{kvF32, kvF16, kvQ8} {
		cs = append(cs, nanAttnCase(kind, 1, 0), nanAttnCase(kind, 1, 64), nanAttnCase(kind, 24, 0))
	}
	return append(cs, nanQCases()...)
}

// weights is a quantized matrix of the NaN GEMV cases, Q8_0 or Q5_0 (exactly one of q8, q5
// set).
type weights struct {
	q8   []kernelrt.BlockQ8_0
	q5   []kernelrt.BlockQ5_0
	rows int
	cols int
}

// randQ5 makes rows x cols random Q5_0 weights as typeQ5_0 does.
func randQ5(r *rng, rows, cols int) []kernelrt.BlockQ5_0 {
	w := make([]kernelrt.BlockQ5_0, rows*cols/32)
	typeQ5_0.randBlocks(r, bytesOf(w))
	return w
}

// unpackQ5 writes a Q5_0 block's centred quants q-16 (-16..15) into out.
func unpackQ5(b *kernelrt.BlockQ5_0, out *[32]int32) {
	for j := 0; j < 32; j++ {
		out[j] = int32(quantQ5_0(bytesOf(unsafe.Slice(b, 1)), j))
	}
}

// scaleOffs are the byte offsets of a block's fp16 scale d and min (m / dmin; -1: none), as
// ggml's block layouts place them.
func scaleOffs(t *qtype) (d, m int) {
	switch t {
	case typeQ4_1, typeQ5_1, typeQ4K, typeQ5K:
		return 0, 2
	case typeQ6K:
		return 208, -1
	case typeQ2K:
		return 80, 82
	case typeQ3K:
		return 108, -1
	}
	return 0, -1
}

// blockBad is whether block i of w (type t) has a non-finite fp16 scale or min.
func blockBad(t *qtype, w []byte, i int) bool {
	d, m := scaleOffs(t)
	b := w[i*t.size:]
	bad := func(h uint16) bool { return h&0x7c00 == 0x7c00 }
	return bad(le16(b[d:])) || m >= 0 && bad(le16(b[m:]))
}

// nanQCase: GEMV (with a bias, T = 1) or GEMM (T = 3) of a Q4_0 / Q5_1 / K-quant type whose
// weight blocks carry NaN / +Inf / -Inf in d and in the min (m, dmin), one with every integer
// term 0, and (acts) activation blocks with a NaN or +Inf scale (Q8_0 fp16 d, Q8_K fp32 d).
// csrc/krt_kdot.h: every output such a block meets is NaN, in every variant; the rest are the
// usual dot products.
func nanQCase(t *qtype, tokens int, acts bool) *Case {
	const rows = 40
	cols := 480 // 15 blocks: a partial 4-block step in the AVX-512 GEMV
	if t.k {
		cols = 512
	}
	op, fn := t.gemvOp, t.gemvFn+"Bias"
	if tokens > 1 {
		op, fn = t.gemmOp, t.gemmFn
	}
	where := "in weights"
	if acts {
		where = "in weights and activations"
	}
	c := nanCase(op, fn, fmt.Sprintf("%s %dx%d T=%d %s", t.name, rows, cols, tokens, where),
		kernelrt.Shape{Rows: rows, Cols: cols, Tokens: tokens}, rows*cols*tokens)
	c.Tol = 0
	var w []byte
	var x actsT
	var bias, y []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("nan/q/" + c.Fn + c.Shape)
		nb := cols / t.qk
		w = make([]byte, rows*nb*t.size)
		t.randBlocks(r, w)
		dOff, mOff := scaleOffs(t)
		set := func(row, b, off int, h uint16) { put16(w[(row*nb+b)*t.size+off:], h) }
		minOr := func(h, alt uint16) (int, uint16) {
			if mOff >= 0 {
				return mOff, h
			}
			return dOff, alt
		}
		set(0, 0, dOff, 0x7e00) // row 0: NaN d
		set(1, 1, dOff, 0x7c00) // row 1: +Inf d
		o, h := minOr(0x7c00, 0xfc00)
		set(2, 0, o, h)            // row 2: +Inf min (no min: -Inf d)
		set(3, nb-1, dOff, 0xfc00) // row 3: -Inf d in the last block
		o, h = minOr(0xfc00, 0x7c00)
		set(4, nb-1, o, h) // row 4: -Inf min in the last block
		// row 5: +Inf d on a block whose integer terms are all 0
		blk := w[5*nb*t.size : 5*nb*t.size+t.size]
		put16(blk[dOff:], 0x7c00)
		switch t {
		case typeQ4_0:
			for i := 2; i < 18; i++ {
				blk[i] = 0x88
			}
		// IQ4_NL has no zero value: its row 5 block keeps random (non-zero) quants.
		case typeQ5_1:
			clear(blk[4:24])
		case typeQ4K, typeQ5K:
			clear(blk[4:16])
		case typeQ6K:
			clear(blk[192:208])
		case typeQ2K:
			clear(blk[0:16])
		case typeIQ4_XS: // every sub-block scale ls = 32: (ls-32) = 0
			blk[2], blk[3] = 0xaa, 0xaa
			clear(blk[4:8])
		case typeQ3K: // every sub-block scale sc = 32: (sc-32) = 0
			clear(blk[96:104])
			for i := 104; i < 108; i++ {
				blk[i] = 0xaa
			}
		}
		xf := make([]float32, tokens*cols)
		r.fillActs(xf)
		x = refActs(t, xf)
		badX := make([]bool, tokens)
		if acts {
			lastB := (tokens-1)*(cols/t.qk) + 1 // the last token's block 1
			if t.k {
				x.k[lastB].D = nan32
				if tokens > 1 {
					x.k[0].D = inf32
				}
			} else {
				x.q8[lastB].D = 0x7c00
				if tokens > 1 {
					x.q8[0].D = 0x7e00
				}
			}
			badX[tokens-1], badX[0] = true, true
		}
		bias = make([]float32, rows)
		r.fill(bias, -0.1, 0.1)
		bias[9] = nan32
		y = make([]float32, tokens*rows)
		ref, scale = make([]float64, tokens*rows), make([]float64, tokens*rows)
		gemvRef(ref, scale, t, w, rows, cols, x, tokens)
		for tk := 0; tk < tokens; tk++ {
			for row := 0; row < rows; row++ {
				i := tk*rows + row
				bad := badX[tk]
				for b := 0; b < nb; b++ {
					bad = bad || blockBad(t, w, row*nb+b)
				}
				if bad {
					ref[i] = math.NaN()
				}
				ref[i] += float64(bias[row])
				scale[i] += math.Abs(float64(bias[row]))
			}
		}
	}
	c.free = func() { w, x, bias, y, ref, scale = nil, actsT{}, nil, nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(y)
		if tokens > 1 {
			return t.gemm(e, y, w, x, bias, rows, cols, tokens)
		}
		return t.gemv(e, y, w, x, bias, rows, cols)
	}
	c.outF = func() []float32 { return y }
	c.check = func() (float64, string) { return specialBad(y, ref, scale, 1e-5) }
	return c
}

// actsT is the acts type under another name (nanQCase's parameter acts shadows it).
type actsT = acts

// nanQDequantCase: dequantize blocks with NaN / +Inf / -Inf in d and in the min, on blocks
// with and without zero quants: elementwise IEEE (csrc/kquant.c), value = float32(s) +
// float32(o) of the type's decoder, whose class the kernels must give exactly.
func nanQDequantCase(t *qtype) *Case {
	nb := 8
	if t.k {
		nb = 3
	}
	n := nb * t.qk
	c := nanCase(t.deqOp, t.deqFn, fmt.Sprintf("%s N=%d", t.name, n), kernelrt.Shape{N: n, Tokens: 1}, n)
	var w []byte
	var out []float32
	var ref []float64
	c.setup = func() {
		r := newRng("nan/" + c.Fn)
		w = make([]byte, nb*t.size)
		t.randBlocks(r, w)
		if t == typeQ8K {
			put16(w[0:], 0)
			put16(w[2:], 0x7fc0) // fp32 NaN
			put16(w[t.size:], 0)
			put16(w[t.size+2:], 0x7f80) // +Inf
			put16(w[2*t.size:], 0)
			put16(w[2*t.size+2:], 0xff80) // -Inf
			w[2*t.size+4] = 0             // Inf * 0
		} else {
			dOff, mOff := scaleOffs(t)
			put16(w[0*t.size+dOff:], 0x7e00)
			put16(w[1*t.size+dOff:], 0x7c00)
			put16(w[(nb-1)*t.size+dOff:], 0xfc00)
			if mOff >= 0 {
				put16(w[1*t.size+mOff:], 0xfc00) // +Inf d and -Inf min
				put16(w[2*t.size+mOff:], 0x7e00)
			}
		}
		out, ref = make([]float32, n), make([]float64, n)
		s, o := make([]float64, t.qk), make([]float64, t.qk)
		for b := 0; b < nb; b++ {
			t.decode(w[b*t.size:(b+1)*t.size], s, o)
			for j := range s {
				ref[b*t.qk+j] = float64(float32(s[j]) + float32(o[j]))
			}
		}
	}
	c.free = func() { w, out, ref = nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(out)
		return t.deq(e, out, w)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return specialBad(out, ref, nil, 0) }
	return c
}

// nanQCases are the NaN/Inf rows of the Q4_0, Q4_1, Q5_1, K-quant (Q2_K and Q3_K included),
// Q8_K, IQ4_NL and IQ4_XS types.
func nanQCases() []*Case {
	var cs []*Case
	for _, t := range []*qtype{typeQ4_0, typeQ4_1, typeQ5_1, typeQ4K, typeQ5K, typeQ6K, typeQ8K, typeIQ4_NL, typeQ2K, typeIQ4_XS, typeQ3K} {
		cs = append(cs, nanQDequantCase(t))
		if t.gemv == nil {
			continue
		}
		for _, a := range []bool{false, true} {
			cs = append(cs, nanQCase(t, 1, a), nanQCase(t, 3, a))
		}
	}
	return cs
}
