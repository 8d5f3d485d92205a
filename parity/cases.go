package parity

import (
	"fmt"
	"math"
	"strings"

	"github.com/kernelrt/kernelrt"
)

// Qwen2-0.5B shapes.
const (
	hidden    = 896
	inter     = 4864
	nHeads    = 14
	nKVHeads  = 2
	headDim   = 64
	qkvStride = (nHeads + 2*nKVHeads) * headDim // a fused QKV row: 1152 floats
	vocabFull = 151936
	vocabQuik = 8192
	maxCtx    = 512  // KV cache positions of the op checks; Options.MaxCtx
	maxCols   = 4864 // widest fused-GEMV input; Options.MaxCols
	ropeTheta = 1e6
	epsNorm   = float32(1e-6)
	floor     = 1e-30 // relative errors divide by max(|ref|, floor)
)

// shared is input data several cases use (a weight matrix, an embedding table): made by the
// first case that needs it, dropped after the last one selected.
type shared struct {
	users int
	made  bool
	gen   func()
	drop  func()
}

func (s *shared) plan() { s.users++ }

func (s *shared) acquire() {
	if !s.made {
		s.gen()
		s.made = true
	}
}

func (s *shared) release() {
	s.users--
	if s.users <= 0 && s.made {
		s.drop()
		s.made = false
	}
}

// matGroup is one weight matrix of one quantized type with its activations (tmax tokens:
// FP32, and quantized to Q8_0 or Q8_K as the type takes them), bias and the float64 reference
// products, shared by the GEMV and GEMM cases of that matrix.
type matGroup struct {
	shared
	typ        *qtype
	rows, cols int
	tmax       int

	w          []byte    // rows*cols/qk blocks
	xf         []float32 // tmax*cols floats
	x          acts      // xf quantized by the reference quantizer
	bias       []float32
	ref, scale []float64 // tmax*rows, without bias
	y          []float32
	scratch    []kernelrt.BlockQ8_0
}

func (g *matGroup) name() string { return fmt.Sprintf("mat/%s/%dx%d", g.typ.name, g.rows, g.cols) }

func newMatGroup(typ *qtype, rows, cols int) *matGroup {
	g := &matGroup{typ: typ, rows: rows, cols: cols}
	g.gen = func() {
		r := newRng(g.name())
		g.w = make([]byte, rows*cols/typ.qk*typ.size)
		typ.randBlocks(r, g.w)
		g.xf = make([]float32, g.tmax*cols)
		r.fillActs(g.xf)
		g.x = refActs(typ, g.xf)
		g.bias = make([]float32, rows)
		r.fill(g.bias, -0.1, 0.1)
		g.ref = make([]float64, g.tmax*rows)
		g.scale = make([]float64, g.tmax*rows)
		gemvRef(g.ref, g.scale, typ, g.w, rows, cols, g.x, g.tmax)
		g.y = make([]float32, g.tmax*rows)
		g.scratch = make([]kernelrt.BlockQ8_0, cols/32)
	}
	g.drop = func() {
		g.w, g.xf, g.x, g.bias, g.ref, g.scale, g.y, g.scratch = nil, nil, acts{}, nil, nil, nil, nil, nil
		g.tmax = 0
	}
	return g
}

// xTokens is the first T tokens of the quantized activations.
func (g *matGroup) xTokens(T int) acts {
	if g.typ.k {
		return acts{k: g.x.k[:T*g.cols/256]}
	}
	return acts{q8: g.x.q8[:T*g.cols/32]}
}

// use registers a case needing tokens activations.
func (g *matGroup) use(tokens int) {
	g.plan()
	g.tmax = max(g.tmax, tokens)
}

// checkY measures y (tokens x rows) against the reference, adding the bias when given.
func (g *matGroup) checkY(y []float32, tokens int, bias []float32) float64 {
	worst := 0.0
	for t := 0; t < tokens; t++ {
		for r := 0; r < g.rows; r++ {
			i := t*g.rows + r
			ref, sc := g.ref[i], g.scale[i]
			if bias != nil {
				ref += float64(bias[r])
				sc += math.Abs(float64(bias[r]))
			}
			worst = math.Max(worst, relErr(y[i], ref, sc, floor))
		}
	}
	return worst
}

func biasName(b bool) string {
	if b {
		return "+bias"
	}
	return "nil-bias"
}

// matMetric is what the GEMV and GEMM cases measure.
const matMetric = "max |y-ref| / (sum|w||x| + |bias|), w and x dequantized here"

// gemvCase is one GEMV call on g: plain (quantized activations) or fused (FP32 activations,
// for the types that have a fused GEMV).
func gemvCase(g *matGroup, fused, withBias bool) *Case {
	c := &Case{Metric: matMetric, Shape: fmt.Sprintf("%dx%d %s", g.rows, g.cols, biasName(withBias)),
		S: kernelrt.Shape{Rows: g.rows, Cols: g.cols, Tokens: 1}, Cost: g.rows * g.cols, Tol: 1e-5,
		Heavy: g.rows*g.cols >= 9728*896}
	c.Op, c.Fn = g.typ.gemvOp, g.typ.gemvFn
	if fused {
		c.Op, c.Fn = g.typ.fusedOp, g.typ.fusedFn
	} else if withBias {
		c.Fn += "Bias"
	}
	c.plan = func() { g.use(1) }
	c.setup = g.acquire
	c.free = g.release
	rows, cols := g.rows, g.cols
	c.run = func(e exec) error {
		y := g.y[:rows]
		fillNaN(y)
		var bias []float32
		if withBias {
			bias = g.bias
		}
		if fused {
			return g.typ.fused(e, y, g.w, g.xf[:cols], bias, g.scratch, rows, cols)
		}
		return g.typ.gemv(e, y, g.w, g.xTokens(1), bias, rows, cols)
	}
	c.outF = func() []float32 { return g.y[:rows] }
	c.check = func() (float64, string) {
		var bias []float32
		if withBias {
			bias = g.bias
		}
		return g.checkY(g.y[:rows], 1, bias), ""
	}
	return c
}

// gemmCase is one GEMM call on g with T tokens.
func gemmCase(g *matGroup, T int, withBias, full bool) *Case {
	c := &Case{Metric: matMetric, Shape: fmt.Sprintf("%dx%d T=%d %s", g.rows, g.cols, T, biasName(withBias)),
		S: kernelrt.Shape{Rows: g.rows, Cols: g.cols, Tokens: T}, Cost: g.rows * g.cols * T, Tol: 1e-5, Full: full}
	c.Op, c.Fn = g.typ.gemmOp, g.typ.gemmFn
	c.plan = func() { g.use(T) }
	c.setup = g.acquire
	c.free = g.release
	rows, cols := g.rows, g.cols
	c.run = func(e exec) error {
		y := g.y[:T*rows]
		fillNaN(y)
		var bias []float32
		if withBias {
			bias = g.bias
		}
		return g.typ.gemm(e, y, g.w, g.xTokens(T), bias, rows, cols, T)
	}
	c.outF = func() []float32 { return g.y[:T*rows] }
	c.check = func() (float64, string) {
		var bias []float32
		if withBias {
			bias = g.bias
		}
		return g.checkY(g.y[:T*rows], T, bias), ""
	}
	return c
}

// gemvF32Case is the float32 GEMV (any cols: the odd shape exercises the kernels' tails).
func gemvF32Case(rows, cols int, heavy bool) *Case {
	c := &Case{Metric: "max |y-ref| / sum|w||x|", Op: kernelrt.OpGemvF32, Fn: "GemvF32", Shape: fmt.Sprintf("%dx%d", rows, cols),
		S: kernelrt.Shape{Rows: rows, Cols: cols, Tokens: 1}, Cost: rows * cols,
		Tol: 1e-5, Heavy: heavy}
	var w, x, y []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("gemv_f32/" + c.Shape)
		w, x, y = make([]float32, rows*cols), make([]float32, cols), make([]float32, rows)
		r.fill(w, -1, 1)
		r.fill(x, -1, 1)
		ref, scale = make([]float64, rows), make([]float64, rows)
		for i := 0; i < rows; i++ {
			var s, a float64
			for j, wv := range w[i*cols : (i+1)*cols] {
				p := float64(wv) * float64(x[j])
				s += p
				a += math.Abs(p)
			}
			ref[i], scale[i] = s, a
		}
	}
	c.free = func() { w, x, y, ref, scale = nil, nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(y); return e.GemvF32(y, w, x, rows, cols) }
	c.outF = func() []float32 { return y }
	c.check = func() (float64, string) { return worstVs(y, ref, scale, floor), "" }
	return c
}

// rmsCase normalises T tokens of dim floats (magnitudes spread over three decades).
func rmsCase(T, dim int) *Case {
	c := &Case{Metric: "max |y-ref| / max(|ref|, 1e-30)", Op: kernelrt.OpRMSNorm, Fn: "RMSNorm", Shape: fmt.Sprintf("T=%d dim=%d", T, dim),
		S: kernelrt.Shape{Tokens: T, Cols: dim}, Cost: T * dim, Tol: 1e-6}
	var x, w, out []float32
	var ref []float64
	c.setup = func() {
		r := newRng("rmsnorm/" + c.Shape)
		x, w, out, ref = make([]float32, T*dim), make([]float32, dim), make([]float32, T*dim), make([]float64, T*dim)
		for t := 0; t < T; t++ {
			m := math.Pow(10, -2+3*r.unit())
			for i := 0; i < dim; i++ {
				x[t*dim+i] = float32(m * (2*r.unit() - 1))
			}
		}
		r.fill(w, -1.5, 1.5)
		for t := 0; t < T; t++ {
			ss := 0.0
			for _, v := range x[t*dim : (t+1)*dim] {
				ss += float64(v) * float64(v)
			}
			inv := 1 / math.Sqrt(ss/float64(dim)+float64(epsNorm))
			for i := 0; i < dim; i++ {
				ref[t*dim+i] = float64(x[t*dim+i]) * inv * float64(w[i])
			}
		}
	}
	c.free = func() { x, w, out, ref = nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(out); return e.RMSNorm(out, x, w, T, dim, epsNorm) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstSelf(out, ref), "" }
	return c
}

// worstSelf is the worst |y-ref|/max(|ref|, floor): for ops whose error is relative to each
// output (products and quotients, no cancellation).
func worstSelf(y []float32, ref []float64) float64 {
	worst := 0.0
	for i, v := range y {
		worst = math.Max(worst, relErr(v, ref[i], math.Abs(ref[i]), floor))
	}
	return worst
}

// softmaxCase is Softmax on rows x cols scores, or SoftmaxMasked with a causal mask
// (row r keeps r+1 entries, the rest must come out exactly 0).
func softmaxCase(rows, cols int, masked bool, lo, hi float64) *Case {
	c := &Case{Metric: "max |y-ref| / max(|ref|, 1e-30)", Op: kernelrt.OpSoftmax, Fn: "Softmax", Shape: fmt.Sprintf("%dx%d", rows, cols),
		S: kernelrt.Shape{Rows: rows, Cols: cols, Tokens: rows}, Cost: rows * cols, Tol: 1e-6}
	if masked {
		c.Fn, c.Shape = "SoftmaxMasked", c.Shape+" causal"
	}
	var x0, x []float32
	var valid []int32
	var ref []float64
	c.setup = func() {
		r := newRng("softmax/" + c.Fn + c.Shape)
		x0, x, ref = make([]float32, rows*cols), make([]float32, rows*cols), make([]float64, rows*cols)
		r.fill(x0, lo, hi)
		valid = make([]int32, rows)
		for i := range valid {
			valid[i] = int32(cols)
			if masked {
				valid[i] = int32(i%cols + 1)
			}
		}
		for i := 0; i < rows; i++ {
			row := x0[i*cols : (i+1)*cols]
			n := int(valid[i])
			m := math.Inf(-1)
			for _, v := range row[:n] {
				m = math.Max(m, float64(v))
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
	c.free = func() { x0, x, valid, ref = nil, nil, nil, nil }
	c.run = func(e exec) error {
		copy(x, x0)
		if masked {
			return e.SoftmaxMasked(x, rows, cols, valid)
		}
		return e.Softmax(x, rows, cols)
	}
	c.outF = func() []float32 { return x }
	c.check = func() (float64, string) { return worstSelf(x, ref), "" }
	return c
}

// swigluCase is SwiGLU on n elements; a few gates sit at the extremes (exp overflow).
func swigluCase(n int) *Case {
	c := &Case{Metric: "max |y-ref| / max(|ref|, 1e-30) (gates <= -88.38 give -0: |ref| < 1e-36)", Op: kernelrt.OpSwiGLU, Fn: "SwiGLU", Shape: fmt.Sprintf("N=%d", n),
		S: kernelrt.Shape{N: n, Tokens: 1}, Cost: n, Tol: 1e-6}
	var g, u, out []float32
	var ref []float64
	c.setup = func() {
		r := newRng("swiglu/" + c.Shape)
		g, u, out, ref = make([]float32, n), make([]float32, n), make([]float32, n), make([]float64, n)
		r.fill(g, -8, 8)
		r.fill(u, -2, 2)
		for i, v := range []float32{-100, -88.5, -87, -30, 0, 30, 88.5, 100} {
			if 7*i+3 < n {
				g[7*i+3] = v
			}
		}
		for i := range g {
			gv := float64(g[i])
			ref[i] = gv / (1 + math.Exp(-gv)) * float64(u[i])
		}
	}
	c.free = func() { g, u, out, ref = nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(out); return e.SwiGLU(out, g, u) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstSelf(out, ref), "" }
	return c
}

// gegluCase is GeGLU on n elements; a few gates sit at the extremes (exp overflow). The
// exponent -2u is rounded to float32 before exp, and exp amplifies that rounding by |2u|
// (up to 88): the result is held to 2e-5 relative, not SwiGLU's 1e-6.
func gegluCase(n int) *Case {
	c := &Case{Metric: "max |y-ref| / max(|ref|, 1e-30) (exp's argument rounded to float32)", Op: kernelrt.OpGeGLU, Fn: "GeGLU", Shape: fmt.Sprintf("N=%d", n),
		S: kernelrt.Shape{N: n, Tokens: 1}, Cost: n, Tol: 2e-5}
	var g, u, out []float32
	var ref []float64
	c.setup = func() {
		r := newRng("geglu/" + c.Shape)
		g, u, out, ref = make([]float32, n), make([]float32, n), make([]float32, n), make([]float64, n)
		r.fill(g, -6, 6)
		r.fill(u, -2, 2)
		for i, v := range []float32{-100, -12, -9.5, -4, 0, 4, 12, 100} {
			if 7*i+3 < n {
				g[7*i+3] = v
			}
		}
		for i := range g {
			// 0.5 x (1 + tanh(v)) = x / (1 + e^-2v): the second form keeps its relative
			// accuracy where 1 + tanh(v) cancels to 0 in float64.
			x := float64(g[i])
			v := math.Sqrt(2/math.Pi) * (x + 0.044715*x*x*x)
			ref[i] = x / (1 + math.Exp(-2*v)) * float64(u[i])
		}
	}
	c.free = func() { g, u, out, ref = nil, nil, nil, nil }
	c.run = func(e exec) error { fillNaN(out); return e.GeGLU(out, g, u) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstSelf(out, ref), "" }
	return c
}

// addCase is the residual add, into a separate output or in place (out == a).
func addCase(n int, inPlace bool) *Case {
	c := &Case{Metric: "max |y-ref| / (|a|+|b|)", Op: kernelrt.OpAdd, Fn: "Add", Shape: fmt.Sprintf("N=%d", n),
		S: kernelrt.Shape{N: n, Tokens: 1}, Cost: n, Tol: 1e-6}
	if inPlace {
		c.Shape += " in-place"
	}
	var a0, a, b, out []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("add/" + c.Shape)
		a0, a, b, ref, scale = make([]float32, n), make([]float32, n), make([]float32, n), make([]float64, n), make([]float64, n)
		r.fill(a0, -4, 4)
		r.fill(b, -1, 1)
		for i := range ref {
			ref[i] = float64(a0[i]) + float64(b[i])
			scale[i] = math.Abs(float64(a0[i])) + math.Abs(float64(b[i]))
		}
		out = a
		if !inPlace {
			out = make([]float32, n)
		}
	}
	c.free = func() { a0, a, b, out, ref, scale = nil, nil, nil, nil, nil, nil }
	c.run = func(e exec) error {
		copy(a, a0)
		if inPlace {
			return e.Add(a, a, b)
		}
		fillNaN(out)
		return e.Add(out, a, b)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstVs(out, ref, scale, floor), "" }
	return c
}

var ropeTab *kernelrt.RopeTable

// ropeCase rotates heads heads of T tokens in a fused-QKV-strided buffer, NeoX style (element
// i with i+headDim/2) or normal (norm: element 2i with 2i+1); the floats between the rotated
// heads and the next token must stay untouched.
func ropeCase(T, heads, pos0 int, norm bool) *Case {
	c := &Case{Metric: "max |y-ref| / (|x0 cos|+|x1 sin|), angles computed here; unrotated floats exact", Op: kernelrt.OpRopeNeoX, Fn: "RopeNeoX", Shape: fmt.Sprintf("T=%d heads=%d hd=%d pos0=%d", T, heads, headDim, pos0),
		S: kernelrt.Shape{Tokens: T, Heads: heads, HeadD: headDim}, Cost: T * heads * headDim, Tol: 1e-6}
	if norm {
		c.Op, c.Fn = kernelrt.OpRopeNorm, "RopeNorm"
	}
	n := (T-1)*qkvStride + heads*headDim
	var x0, x []float32
	var ref, scale []float64
	c.setup = func() {
		if ropeTab == nil {
			var err error
			if ropeTab, err = kernelrt.NewRopeTable(headDim, maxCtx, ropeTheta); err != nil {
				panic(err)
			}
		}
		r := newRng("rope/" + c.Shape)
		x0, x = make([]float32, n), make([]float32, n)
		r.fill(x0, -2, 2)
		ref, scale = ropeRef(x0, T, heads, qkvStride, pos0, norm)
	}
	c.free = func() { x0, x, ref, scale = nil, nil, nil, nil }
	c.run = func(e exec) error {
		copy(x, x0)
		if norm {
			return e.RopeNorm(x, ropeTab, T, heads, headDim, qkvStride, pos0)
		}
		return e.RopeNeoX(x, ropeTab, T, heads, headDim, qkvStride, pos0)
	}
	c.outF = func() []float32 { return x }
	c.check = func() (float64, string) {
		worst := 0.0
		for i, v := range x {
			if scale[i] == 0 { // not rotated: exact
				worst = math.Max(worst, relErr(v, ref[i], 0, 0))
				continue
			}
			worst = math.Max(worst, relErr(v, ref[i], scale[i], floor))
		}
		return worst, ""
	}
	return c
}

// ropeRef is the float64 rotation of the heads of x0 (T tokens at stride floats, heads heads
// of headDim from position pos0; NeoX halves, or adjacent pairs when norm), and each rotated
// element's magnitude scale |a cos| + |b sin|. Floats between the heads keep x0's value, with
// scale 0: they must come out exact.
func ropeRef(x0 []float32, T, heads, stride, pos0 int, norm bool) (ref, scale []float64) {
	ref, scale = make([]float64, len(x0)), make([]float64, len(x0))
	for i, v := range x0 {
		ref[i] = float64(v)
	}
	half := headDim / 2
	for t := 0; t < T; t++ {
		for h := 0; h < heads; h++ {
			base := t*stride + h*headDim
			for i := 0; i < half; i++ {
				sn, cs := math.Sincos(float64(pos0+t) * math.Pow(ropeTheta, -float64(2*i)/float64(headDim)))
				i0, i1 := base+i, base+i+half // NeoX: rotate halves
				if norm {
					i0, i1 = base+2*i, base+2*i+1 // normal: rotate adjacent pairs
				}
				a, b := float64(x0[i0]), float64(x0[i1])
				ref[i0], ref[i1] = a*cs-b*sn, a*sn+b*cs
				scale[i0] = math.Abs(a*cs) + math.Abs(b*sn)
				scale[i1] = math.Abs(a*sn) + math.Abs(b*cs)
			}
		}
	}
	return ref, scale
}

// exactCheck is the max |y - ref| (0 required).
func exactCheck(y []float32, ref []float32) float64 { return maxAbsF(y, ref) }

// kvCase appends T tokens' keys (the K part of fused QKV rows) at pos0; every other cache
// float must keep its value.
func kvCase(T, pos0 int) *Case {
	c := &Case{Metric: "max |y-ref| (exact; the rest of the cache unchanged)", Op: kernelrt.OpKVAppend, Fn: "KVAppend", Shape: fmt.Sprintf("T=%d kvheads=%d hd=%d pos0=%d ctx=%d", T, nKVHeads, headDim, pos0, maxCtx),
		S: kernelrt.Shape{Tokens: T, KVHeads: nKVHeads, HeadD: headDim}, Cost: T * nKVHeads * headDim}
	row := nKVHeads * headDim
	var src, cache0, cache, ref []float32
	c.setup = func() {
		r := newRng("kv/" + c.Shape)
		src = make([]float32, (T-1)*qkvStride+row)
		r.fill(src, -1, 1)
		n := nKVHeads * maxCtx * headDim
		cache0, cache, ref = make([]float32, n), make([]float32, n), make([]float32, n)
		r.fill(cache0, 10, 11)
		copy(ref, cache0)
		for t := 0; t < T; t++ {
			for g := 0; g < nKVHeads; g++ {
				copy(ref[(g*maxCtx+pos0+t)*headDim:][:headDim], src[t*qkvStride+g*headDim:][:headDim])
			}
		}
	}
	c.free = func() { src, cache0, cache, ref = nil, nil, nil, nil }
	c.run = func(e exec) error {
		copy(cache, cache0)
		return e.KVAppend(cache, src, T, qkvStride, nKVHeads, headDim, maxCtx, pos0)
	}
	c.outF = func() []float32 { return cache }
	c.check = func() (float64, string) { return exactCheck(cache, ref), "" }
	return c
}

// embedGroup is the Q8_0 embedding table the embedding cases share.
type embedGroup struct {
	shared
	vocab int
	table []kernelrt.BlockQ8_0
}

func newEmbedGroup(vocab int) *embedGroup {
	g := &embedGroup{vocab: vocab}
	g.gen = func() { g.table = randQ8(newRng(fmt.Sprintf("embed/%d", vocab)), vocab, hidden) }
	g.drop = func() { g.table = nil }
	return g
}

// embedCase looks up T ids (the first and last vocabulary rows among them).
func embedCase(g *embedGroup, T int) *Case {
	c := &Case{Metric: "max |y-ref| (exact)", Op: kernelrt.OpEmbedQ8_0, Fn: "EmbedQ8_0", Shape: fmt.Sprintf("vocab=%d dim=%d T=%d", g.vocab, hidden, T),
		S: kernelrt.Shape{Tokens: T, Cols: hidden}, Cost: T * hidden}
	var ids []int32
	var out, ref []float32
	c.plan = g.plan
	c.setup = func() {
		g.acquire()
		r := newRng("embed/" + c.Shape)
		ids = make([]int32, T)
		for i := range ids {
			ids[i] = int32(r.next() % uint64(g.vocab))
		}
		ids[0] = int32(g.vocab - 1)
		if T > 1 {
			ids[T-1] = 0
		}
		out, ref = make([]float32, T*hidden), make([]float32, T*hidden)
		nb := hidden / 32
		for t, id := range ids {
			for b := 0; b < nb; b++ {
				blk := &g.table[int(id)*nb+b]
				d := f16(blk.D)
				for j, qv := range blk.Qs {
					ref[t*hidden+b*32+j] = float32(d * float64(qv)) // exact: 11 x 8 bits
				}
			}
		}
	}
	c.free = func() { ids, out, ref = nil, nil, nil; g.release() }
	c.run = func(e exec) error { fillNaN(out); return e.EmbedQ8_0(out, g.table, ids, hidden, g.vocab) }
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return exactCheck(out, ref), "" }
	return c
}

// dequantCase expands n floats' worth of random blocks of typ (every quant, scales of either
// sign where the type allows): exact. Each value is a scaled quant s plus, for types with a
// min, an offset o, both exact in float32; the kernels round s + o once, as ggml does.
func dequantCase(typ *qtype, n int) *Case {
	c := &Case{Metric: "max |y-ref| (exact: ref = float32(s) + float32(o), the one rounding ggml's sum has)", Op: typ.deqOp, Fn: typ.deqFn,
		Shape: fmt.Sprintf("N=%d", n), S: kernelrt.Shape{N: n, Tokens: 1}, Cost: n}
	var w []byte
	var out, ref []float32
	c.setup = func() {
		r := newRng(c.Fn + "/" + c.Shape)
		out, ref = make([]float32, n), make([]float32, n)
		w = make([]byte, n/typ.qk*typ.size)
		typ.randBlocks(r, w)
		sv, ov := make([]float64, typ.qk), make([]float64, typ.qk)
		for b := 0; b < n/typ.qk; b++ {
			typ.decode(w[b*typ.size:(b+1)*typ.size], sv, ov)
			for j := range sv {
				ref[b*typ.qk+j] = float32(sv[j]) + float32(ov[j])
			}
		}
	}
	c.free = func() { w, out, ref = nil, nil, nil }
	c.run = func(e exec) error {
		fillNaN(out)
		return typ.deq(e, out, w)
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return exactCheck(out, ref), "" }
	return c
}

// streamCase is the bandwidth baseline's sum of n floats: any summation order, so it is held
// to float32 rounding of a sum of n terms relative to sum|x|.
func streamCase(n int) *Case {
	c := &Case{Metric: "|sum-ref| / sum|x| (any summation order)", Op: kernelrt.OpStreamRead, Fn: "StreamRead", Shape: fmt.Sprintf("N=%d", n),
		S: kernelrt.Shape{N: n, Tokens: 1}, Cost: n, Tol: 1e-4}
	var x, out []float32
	var ref, scale []float64
	c.setup = func() {
		r := newRng("stream/" + c.Shape)
		x, out = make([]float32, n), make([]float32, 1)
		r.fill(x, -1, 1)
		ref, scale = make([]float64, 1), make([]float64, 1)
		for _, v := range x {
			ref[0] += float64(v)
			scale[0] += math.Abs(float64(v))
		}
	}
	c.free = func() { x, out, ref, scale = nil, nil, nil, nil }
	c.run = func(e exec) error {
		v, err := e.StreamRead(x)
		out[0] = v
		return err
	}
	c.outF = func() []float32 { return out }
	c.check = func() (float64, string) { return worstVs(out, ref, scale, floor), "" }
	return c
}

// Prepare makes the case's inputs and float64 reference, for using one case outside a Suite
// (calibration, benchmarks); Release frees them.
func (c *Case) Prepare() {
	if c.plan != nil {
		c.plan()
	}
	c.setup()
}

// Call makes the case's call on e, overwriting its outputs.
func (c *Case) Call(e kernelrt.Ops) error { return c.run(e) }

// Check measures the last call's output against the float64 reference: the worst error
// relative to the case's scale (the case passes when it is at most Tol) and a note.
func (c *Case) Check() (float64, string) { return c.check() }

// Output is the last call's output as bytes (floats or quantized blocks).
func (c *Case) Output() []byte {
	if c.outF != nil {
		return bytesOf(c.outF())
	}
	return c.outB()
}

// Release frees what Prepare made.
func (c *Case) Release() { c.free() }

// Legend describes, per op of cases, what max_rel_ref measures and its limit.
func Legend(cases []*Case) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, c := range cases {
		k := fmt.Sprintf("%s\x00%s\x00%g", c.Op, c.Metric, c.Tol)
		if seen[k] {
			continue
		}
		seen[k] = true
		lim := fmt.Sprintf("<= %g", c.Tol)
		if c.Tol == 0 {
			lim = "== 0"
		}
		fmt.Fprintf(&b, "  %-16s %-96s %s\n", c.Op, c.Metric, lim)
	}
	return b.String()
}

// Smallest returns, per op of cs in order of first appearance, its cheapest case that is
// neither Full nor Heavy: one quick call of every op, for tests and smoke runs that must
// reach each kernel (the GEMMs' representative cases are large).
func Smallest(cs []*Case) []*Case {
	idx := map[kernelrt.Op]int{}
	var out []*Case
	for _, c := range cs {
		if c.Full || c.Heavy {
			continue
		}
		i, ok := idx[c.Op]
		switch {
		case !ok:
			idx[c.Op] = len(out)
			out = append(out, c)
		case c.Cost < out[i].Cost:
			out[i] = c
		}
	}
	return out
}

// Cases returns every op check, in table order. quick selects the smaller embedding table;
// Case.Full marks the cases only the full run makes.
func Cases(quick bool) []*Case {
	var cs []*Case
	for _, q := range quantSpecs {
		sizes := []int{hidden, inter, 128 * hidden}
		if q.typ.qk == 256 {
			sizes = []int{2048, inter, 128 * hidden} // 896 is not a multiple of 256
		}
		for _, n := range sizes {
			c := quantCase(q, n)
			// The K-quant weight quantizers' least-squares fits are ~50x the work per value.
			c.Heavy = n > inter && q.typ.qk == 256 && q.ref == nil
			cs = append(cs, c)
		}
	}
	for _, typ := range []*qtype{typeQ8_0, typeQ5_0, typeQ4_0, typeQ4_1, typeQ5_1, typeQ4K, typeQ5K, typeQ6K, typeQ8K, typeIQ4_NL, typeQ2K, typeIQ4_XS, typeQ3K} {
		sizes := []int{hidden, inter}
		if typ.qk == 256 {
			sizes = []int{2048, inter}
		}
		for _, n := range sizes {
			cs = append(cs, dequantCase(typ, n))
		}
	}
	type groupKey struct {
		typ        *qtype
		rows, cols int
	}
	groups := map[groupKey]*matGroup{}
	group := func(typ *qtype, rows, cols int) *matGroup {
		k := groupKey{typ, rows, cols}
		if groups[k] == nil {
			groups[k] = newMatGroup(typ, rows, cols)
		}
		return groups[k]
	}
	// GEMV shapes: Qwen2-0.5B's (q, o: 896x896, gate/up 4864x896 padded to 9728 for the fused
	// pair, down 896x4864, the vocabulary head) for the types of Qwen2 files; the K-quants need
	// cols % 256 == 0, so the down projection and Llama shapes (2048 hidden, 8192 FFN).
	shapes32 := [][2]int{{896, 896}, {128, 896}, {9728, 896}, {896, 4864}}
	shapesK := [][2]int{{896, 4864}, {128, 2048}, {2048, 2048}, {8192, 2048}, {2048, 8192}}
	for _, typ := range []*qtype{typeQ8_0, typeQ5_0, typeQ4_0, typeQ5_1, typeQ4K, typeQ5K, typeQ6K, typeIQ4_NL, typeQ2K, typeIQ4_XS, typeQ3K} {
		var shapes [][2]int
		switch typ {
		case typeQ8_0, typeQ5_0:
			shapes = append(shapes32, [2]int{vocabFull, 896})
		case typeQ4_0, typeQ5_1, typeIQ4_NL:
			shapes = append(shapes32, [2]int{2048, 2048})
		default:
			shapes = shapesK
		}
		for _, fused := range []bool{false, true} {
			if fused && typ.fused == nil {
				continue
			}
			for _, sh := range shapes {
				for _, b := range []bool{false, true} {
					cs = append(cs, gemvCase(group(typ, sh[0], sh[1]), fused, b))
				}
			}
		}
	}
	// Table order: gemv_q8_0, gemv_q5_0, gemv_q4_0 ... gemv_q8_0_f32, gemv_q5_0_f32.
	sortByOp(cs)
	for _, sh := range [][2]int{{896, 896}, {128, 896}, {200, 77}} {
		cs = append(cs, gemvF32Case(sh[0], sh[1], false))
	}
	cs = append(cs, gemvF32Case(9728, 896, true))
	for _, typ := range []*qtype{typeQ8_0, typeQ5_0, typeQ4_0, typeQ5_1, typeQ4K, typeQ5K, typeQ6K, typeIQ4_NL, typeQ2K, typeIQ4_XS, typeQ3K} {
		small, large := [][2]int{{896, 896}, {128, 896}}, [][2]int{{9728, 896}, {896, 4864}}
		if typ.k {
			small, large = [][2]int{{128, 2048}}, [][2]int{{2048, 2048}}
			// The K-quants' representative prefill call (Calib): the down projection.
			cs = append(cs, gemmCase(group(typ, 896, 4864), 32, false, false))
		}
		for _, sh := range small {
			for _, T := range []int{1, 7, 32, 128} {
				for _, b := range []bool{false, true} {
					cs = append(cs, gemmCase(group(typ, sh[0], sh[1]), T, b, T == 128))
				}
			}
		}
		for _, sh := range large {
			cs = append(cs, gemmCase(group(typ, sh[0], sh[1]), 128, true, true))
		}
	}
	cs = append(cs, rmsCase(1, hidden), rmsCase(128, hidden))
	cs = append(cs, softmaxCase(nHeads, 512, false, -4, 4), softmaxCase(128, 128, true, -4, 4))
	cs = append(cs, swigluCase(inter), swigluCase(128*inter))
	cs = append(cs, gegluCase(inter), gegluCase(1000))
	cs = append(cs, addCase(hidden, false), addCase(hidden, true), addCase(128*hidden, true))
	for _, norm := range []bool{false, true} {
		for _, heads := range []int{nHeads, nKVHeads} {
			cs = append(cs, ropeCase(1, heads, 300, norm), ropeCase(128, heads, 17, norm))
		}
	}
	cs = append(cs, kvCase(1, 16), kvCase(7, 17), kvCase(128, 0))
	vocab := vocabFull
	if quick {
		vocab = vocabQuik
	}
	eg := newEmbedGroup(vocab)
	for _, T := range []int{1, 7, 128} {
		cs = append(cs, embedCase(eg, T))
	}
	cs = append(cs, streamCase(1000), streamCase(1<<16))
	cs = append(cs, attnCases()...) // F16/Q8_0 caches and attention over each (cases_attn.go)
	cs = append(cs, nanCases()...)  // NaN/Inf rules of every op (cases_nan.go)
	// The representative decode-size call of each op (Qwen2-0.5B shapes), which calibration
	// and the op benchmarks time.
	calib := map[string]bool{
		"QuantizeQ8_0 N=4864": true, "QuantizeQ5_0 N=4864": true, "QuantizeQ4_0 N=4864": true,
		"QuantizeQ4_1 N=4864": true, "QuantizeQ5_1 N=4864": true, "QuantizeQ4K N=4864": true,
		"QuantizeQ5K N=4864": true, "QuantizeQ6K N=4864": true, "QuantizeQ8K N=4864": true,
		"DequantizeQ8_0 N=4864": true, "DequantizeQ5_0 N=4864": true, "DequantizeQ4_0 N=4864": true,
		"DequantizeQ4_1 N=4864": true, "DequantizeQ5_1 N=4864": true, "DequantizeQ4K N=4864": true,
		"DequantizeQ5K N=4864": true, "DequantizeQ6K N=4864": true, "DequantizeQ8K N=4864": true,
		"GemvQ8_0 896x896 nil-bias": true, "GemvQ5_0 896x896 nil-bias": true,
		"GemvQ4_0 896x896 nil-bias": true, "GemvQ5_1 896x896 nil-bias": true,
		"GemvQ4K 896x4864 nil-bias": true, "GemvQ5K 896x4864 nil-bias": true, "GemvQ6K 896x4864 nil-bias": true,
		"GemmQ4_0 896x896 T=32 nil-bias": true, "GemmQ5_1 896x896 T=32 nil-bias": true,
		"GemmQ4K 896x4864 T=32 nil-bias": true, "GemmQ5K 896x4864 T=32 nil-bias": true, "GemmQ6K 896x4864 T=32 nil-bias": true,
		"GemvQ8_0F32 896x896 nil-bias": true, "GemvQ5_0F32 896x896 nil-bias": true,
		"QuantizeIQ4_NL N=4864": true, "DequantizeIQ4_NL N=4864": true,
		"GemvIQ4_NL 896x896 nil-bias": true, "GemmIQ4_NL 896x896 T=32 nil-bias": true,
		"QuantizeQ2K N=4864": true, "DequantizeQ2K N=4864": true,
		"GemvQ2K 896x4864 nil-bias": true, "GemmQ2K 896x4864 T=32 nil-bias": true,
		"QuantizeIQ4_XS N=4864": true, "DequantizeIQ4_XS N=4864": true,
		"GemvIQ4_XS 896x4864 nil-bias": true, "GemmIQ4_XS 896x4864 T=32 nil-bias": true,
		"QuantizeQ3K N=4864": true, "DequantizeQ3K N=4864": true,
		"GemvQ3K 896x4864 nil-bias": true, "GemmQ3K 896x4864 T=32 nil-bias": true,
		"GemvF32 896x896": true, "GemmQ8_0 896x896 T=32 nil-bias": true, "GemmQ5_0 896x896 T=32 nil-bias": true,
		"RMSNorm T=1 dim=896": true, "Softmax 14x512": true, "SwiGLU N=4864": true, "GeGLU N=4864": true, "Add N=896": true,
		"RopeNeoX T=1 heads=14 hd=64 pos0=300": true, "RopeNorm T=1 heads=14 hd=64 pos0=300": true, "KVAppend T=1 kvheads=2 hd=64 pos0=16 ctx=512": true,
		"EmbedQ8_0 vocab=8192 dim=896 T=1":   true,
		"EmbedQ8_0 vocab=151936 dim=896 T=1": true, "StreamRead N=65536": true,
	}
	for _, c := range cs {
		c.Calib = calib[c.Fn+" "+c.Shape] || attnCalib[c.Fn+" "+c.Shape]
	}
	sortByOp(cs)
	return cs
}

// sortByOp orders cases by table row, keeping the order within a row.
func sortByOp(cs []*Case) {
	for i := 1; i < len(cs); i++ {
		for j := i; j > 0 && cs[j].Op < cs[j-1].Op; j-- {
			cs[j], cs[j-1] = cs[j-1], cs[j]
		}
	}
}
