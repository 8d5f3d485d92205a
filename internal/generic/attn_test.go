package generic

import (
	"fmt"
	"math"
	"math/rand"
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// The attention ports against an independent float64 reference computed from the values the
// cache holds (the C kernels have the same checks in csrc/tests/test_attn.c).

const attnTol = 4e-6 // |out - ref| <= attnTol * sum_j w_j |V_j[d]|, as the C banner states

func p32(s []float32) kern.P { return kern.P(unsafe.Pointer(&s[0])) }

// half64 decodes an IEEE half exactly, without the package's converter.
func half64(h uint16) float64 {
	e, m := int(h>>10&0x1f), float64(h&0x3ff)
	var v float64
	switch {
	case e == 0x1f && m != 0:
		v = math.NaN()
	case e == 0x1f:
		v = math.Inf(1)
	case e == 0:
		v = math.Ldexp(m, -24)
	default:
		v = math.Ldexp(1024+m, e-25)
	}
	if h&0x8000 != 0 {
		v = -v
	}
	return v
}

// testCache holds one cache in its stored bytes plus what it decodes to.
type testCache struct {
	typ           kvType
	nkv, hd, mctx int
	k, v          []byte
	appendFn      func(cache, src kern.P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int)
}

func rowBytes(typ kvType, hd int) int {
	switch typ {
	case kvF32:
		return 4 * hd
	case kvF16:
		return 2 * hd
	}
	return hd / qk * 34
}

func newTestCache(typ kvType, nkv, hd, mctx int) *testCache {
	c := &testCache{typ: typ, nkv: nkv, hd: hd, mctx: mctx}
	n := rowBytes(typ, hd)*nkv*mctx + 64
	c.k, c.v = make([]byte, n), make([]byte, n)
	c.appendFn = map[kvType]func(kern.P, kern.P, int, int, int, int, int, int, int){kvF32: KVAppend, kvF16: KVAppendF16, kvQ8: KVAppendQ8_0}[typ]
	return c
}

func (c *testCache) kp() kern.P { return kern.P(unsafe.Pointer(&c.k[0])) }
func (c *testCache) vp() kern.P { return kern.P(unsafe.Pointer(&c.v[0])) }

// fill appends random rows at positions [p0, p1) of every KV head.
func (c *testCache) fill(rng *rand.Rand, p0, p1 int) {
	w := c.nkv * c.hd
	src := make([]float32, w*(p1-p0))
	for i := range src {
		src[i] = rng.Float32()*2 - 1
	}
	c.appendFn(c.kp(), p32(src), w, c.nkv, c.hd, c.mctx, p0, 0, p1-p0)
	for i := range src {
		src[i] = rng.Float32()*2 - 1
	}
	c.appendFn(c.vp(), p32(src), w, c.nkv, c.hd, c.mctx, p0, 0, p1-p0)
}

// set stores one value (row r = g*mctx + j, element d) as an append of the changed row would.
func (c *testCache) set(k bool, r, d int, val float32) {
	buf := c.v
	if k {
		buf = c.k
	}
	row := make([]float32, c.hd)
	for i := range row {
		row[i] = float32(c.val(buf, r, i))
	}
	row[d] = val
	rb := rowBytes(c.typ, c.hd)
	c.appendFn(kern.P(unsafe.Pointer(&buf[r*rb])), p32(row), 0, 1, c.hd, 1, 0, 0, 1)
}

func (c *testCache) val(buf []byte, r, d int) float64 {
	rb := rowBytes(c.typ, c.hd)
	row := buf[r*rb : (r+1)*rb]
	switch c.typ {
	case kvF32:
		return float64(math.Float32frombits(uint32(row[4*d]) | uint32(row[4*d+1])<<8 | uint32(row[4*d+2])<<16 | uint32(row[4*d+3])<<24))
	case kvF16:
		return half64(uint16(row[2*d]) | uint16(row[2*d+1])<<8)
	}
	b := row[d/qk*34:]
	return half64(uint16(b[0])|uint16(b[1])<<8) * float64(int8(b[2+d%qk]))
}

// ref is the float64 reference of one query row of KV head g over keys [0, n): IEEE values and
// the scale sum_j w_j |V_j[d]| of each element.
func (c *testCache) ref(q []float32, g, n int) (o, mag []float64) {
	hd := c.hd
	scale := 1 / math.Sqrt(float64(hd))
	s := make([]float64, n)
	var qq []blockQ8_0
	if c.typ == kvQ8 {
		qq = make([]blockQ8_0, hd/qk)
		for b := range qq {
			quantizeQ8_0Block(&qq[b], q[b*qk:])
		}
	}
	m := -float64(math.MaxFloat32)
	for j := 0; j < n; j++ {
		r := g*c.mctx + j
		var sum float64
		if c.typ == kvQ8 {
			rb := rowBytes(kvQ8, hd)
			row := c.k[r*rb:]
			for b := range qq {
				var isum int64
				for i := 0; i < qk; i++ {
					isum += int64(qq[b].qs[i]) * int64(int8(row[b*34+2+i]))
				}
				sum += half64(qq[b].d) * half64(uint16(row[b*34])|uint16(row[b*34+1])<<8) * float64(isum)
			}
		} else {
			for d := 0; d < hd; d++ {
				sum += float64(q[d]) * c.val(c.k, r, d)
			}
		}
		s[j] = sum * scale
		if attnSoftcap != 0 {
			c := float64(attnSoftcap)
			s[j] = c * math.Tanh(s[j]/c)
		}
		if s[j] > m {
			m = s[j]
		}
	}
	o, mag = make([]float64, hd), make([]float64, hd)
	var l float64
	for j := 0; j < n; j++ {
		e := math.Exp(s[j] - m)
		l += e
		for d := 0; d < hd; d++ {
			v := c.val(c.v, g*c.mctx+j, d)
			o[d] += e * v
			if x := e * math.Abs(v); !math.IsNaN(x) && !math.IsInf(x, 0) {
				mag[d] += x
			}
		}
	}
	for d := range o {
		o[d] *= 1 / l
		mag[d] /= l
	}
	return o, mag
}

// checkRow reports elements whose class (NaN, +-Inf, finite) or value differ from the reference.
func checkRow(t *testing.T, what string, got []float32, o, mag []float64) {
	t.Helper()
	for d, w := range o {
		g := float64(got[d])
		switch {
		case math.IsNaN(w):
			if !math.IsNaN(g) {
				t.Errorf("%s d=%d: got %g, want NaN", what, d, g)
				return
			}
		case math.IsInf(w, 0):
			if g != w {
				t.Errorf("%s d=%d: got %g, want %g", what, d, g, w)
				return
			}
		default:
			if math.IsNaN(g) || math.IsInf(g, 0) || math.Abs(g-w) > attnTol*mag[d]+1e-30 {
				t.Errorf("%s d=%d: got %.9g, want %.9g (scale %.3g)", what, d, g, w, mag[d])
				return
			}
		}
	}
}

// attnSoftcap is the soft-cap the decode and prefill port tests run with (0: off), and
// testCache.ref applies.
var attnSoftcap float32

// decodePort and prefillPort adapt a port to the tests' (nh, nkv) parameters, with attnSoftcap.
func decodePort(f func(out, part, q, k, v, scratch kern.P, sc float32, heads, hd, mctx, nctx, chunk, u0, u1 int)) func(out, part, q, k, v, scratch kern.P, nh, nkv, hd, mctx, nctx, chunk, u0, u1 int) {
	return func(out, part, q, k, v, scratch kern.P, nh, nkv, hd, mctx, nctx, chunk, u0, u1 int) {
		f(out, part, q, k, v, scratch, attnSoftcap, nh<<32|nkv, hd, mctx, nctx, chunk, u0, u1)
	}
}

func prefillPort(f func(out, q, k, v, scratch kern.P, sc float32, heads, hd, mctx, qs, pos0, T, u0, u1 int)) func(out, q, k, v, scratch kern.P, nh, nkv, hd, mctx, qs, pos0, T, u0, u1 int) {
	return func(out, q, k, v, scratch kern.P, nh, nkv, hd, mctx, qs, pos0, T, u0, u1 int) {
		f(out, q, k, v, scratch, attnSoftcap, nh<<32|nkv, hd, mctx, qs, pos0, T, u0, u1)
	}
}

var attnDecodes = map[kvType]func(out, part, q, k, v, scratch kern.P, nh, nkv, hd, mctx, nctx, chunk, u0, u1 int){
	kvF32: decodePort(AttnDecodeF32), kvF16: decodePort(AttnDecodeF16), kvQ8: decodePort(AttnDecodeQ8_0),
}
var attnPrefills = map[kvType]func(out, q, k, v, scratch kern.P, nh, nkv, hd, mctx, qs, pos0, T, u0, u1 int){
	kvF32: prefillPort(AttnPrefillF32), kvF16: prefillPort(AttnPrefillF16), kvQ8: prefillPort(AttnPrefillQ8_0),
}
var kvNames = map[kvType]string{kvF32: "f32", kvF16: "f16", kvQ8: "q8_0"}

// decodeAll runs decode over every unit (two slices) and, when chunked, the merge.
func decodeAll(c *testCache, nh int, q []float32, nctx, chunk int) []float32 {
	nch := (nctx + chunk - 1) / chunk
	out := make([]float32, nh*c.hd)
	part := make([]float32, nh*nch*attnPartStride(c.hd)+1)
	scratch := make([]float32, 2048)
	u := c.nkv * nch
	f := attnDecodes[c.typ]
	f(p32(out), p32(part), p32(q), c.kp(), c.vp(), p32(scratch), nh, c.nkv, c.hd, c.mctx, nctx, chunk, 0, u/2)
	f(p32(out), p32(part), p32(q), c.kp(), c.vp(), p32(scratch), nh, c.nkv, c.hd, c.mctx, nctx, chunk, u/2, u)
	if nch > 1 {
		AttnMerge(p32(out), p32(part), nh, c.hd, nch, 0, nh)
	}
	return out
}

func TestAttnDecodePorts(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	shapes := []struct{ nh, nkv, hd int }{{14, 2, 64}, {4, 4, 32}, {6, 1, 128}}
	for _, typ := range []kvType{kvF32, kvF16, kvQ8} {
		for _, sh := range shapes {
			for _, n := range []int{1, 2, 17, 64, 65, 300, 1000} {
				c := newTestCache(typ, sh.nkv, sh.hd, n+3)
				c.fill(rng, 0, n)
				q := make([]float32, sh.nh*sh.hd)
				for i := range q {
					q[i] = rng.Float32()*3 - 1.5
				}
				for _, chunk := range []int{n, 64, 17, 1} {
					if chunk > n || (chunk == 1 && n > 65) {
						continue
					}
					out := decodeAll(c, sh.nh, q, n, chunk)
					for h := 0; h < sh.nh; h++ {
						o, mag := c.ref(q[h*sh.hd:(h+1)*sh.hd], h/(sh.nh/sh.nkv), n)
						checkRow(t, fmt.Sprintf("%s decode %v n=%d chunk=%d head %d", kvNames[typ], sh, n, chunk, h), out[h*sh.hd:(h+1)*sh.hd], o, mag)
					}
				}
			}
		}
	}
}

func TestAttnPrefillPorts(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	for _, typ := range []kvType{kvF32, kvF16, kvQ8} {
		for _, tc := range []struct{ nh, nkv, hd, pos0, T int }{{14, 2, 64, 0, 1}, {14, 2, 64, 0, 37}, {4, 2, 32, 100, 20}, {6, 3, 64, 5, 16}} {
			c := newTestCache(typ, tc.nkv, tc.hd, tc.pos0+tc.T+1)
			c.fill(rng, 0, tc.pos0+tc.T)
			qs := tc.nh*tc.hd + 3
			q := make([]float32, tc.T*qs)
			for i := range q {
				q[i] = rng.Float32()*3 - 1.5
			}
			out := make([]float32, tc.T*tc.nh*tc.hd)
			for i := range out {
				out[i] = 12345
			}
			scratch := make([]float32, 2048)
			ntiles := (tc.T + attnQTile - 1) / attnQTile
			u := tc.nkv * ntiles
			f := attnPrefills[typ]
			// a slice first: only its units' rows change
			f(p32(out), p32(q), c.kp(), c.vp(), p32(scratch), tc.nh, tc.nkv, tc.hd, c.mctx, qs, tc.pos0, tc.T, u-1, u)
			g := (u - 1) / ntiles
			tile := attnZigzag((u-1)%ntiles, ntiles)
			for tt := 0; tt < tc.T; tt++ {
				for h := 0; h < tc.nh; h++ {
					in := h/(tc.nh/tc.nkv) == g && tt/attnQTile == tile
					if written := out[(tt*tc.nh+h)*tc.hd] != 12345; written != in {
						t.Errorf("%s prefill %+v slice [%d,%d): token %d head %d written=%v", kvNames[typ], tc, u-1, u, tt, h, written)
					}
				}
			}
			f(p32(out), p32(q), c.kp(), c.vp(), p32(scratch), tc.nh, tc.nkv, tc.hd, c.mctx, qs, tc.pos0, tc.T, 0, u-1)
			for tt := 0; tt < tc.T; tt++ {
				for h := 0; h < tc.nh; h++ {
					o, mag := c.ref(q[tt*qs+h*tc.hd:tt*qs+(h+1)*tc.hd], h/(tc.nh/tc.nkv), tc.pos0+tt+1)
					checkRow(t, fmt.Sprintf("%s prefill %+v token %d head %d", kvNames[typ], tc, tt, h), out[(tt*tc.nh+h)*tc.hd:(tt*tc.nh+h+1)*tc.hd], o, mag)
				}
			}
		}
	}
}

// NaN in an attended key makes its KV head's rows NaN, NaN in V one element, and NaN in
// positions no row sees changes nothing.
func TestAttnPortsNaN(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	nan := float32(math.NaN())
	for _, typ := range []kvType{kvF32, kvF16, kvQ8} {
		const nh, nkv, hd, n = 6, 2, 64, 150
		c := newTestCache(typ, nkv, hd, n+10)
		c.fill(rng, 0, n+10)
		q := make([]float32, nh*hd)
		for i := range q {
			q[i] = rng.Float32()*2 - 1
		}
		clean := decodeAll(c, nh, q, n, n)
		for j := n; j < n+10; j++ { // unseen positions
			c.set(true, 1*c.mctx+j, 3, nan)
			c.set(false, 0*c.mctx+j, 60, nan)
		}
		for _, chunk := range []int{n, 64} {
			if got := decodeAll(c, nh, q, n, chunk); chunk == n {
				for i := range got {
					if math.Float32bits(got[i]) != math.Float32bits(clean[i]) {
						t.Fatalf("%s: NaN past n_ctx changed element %d: %g vs %g", kvNames[typ], i, got[i], clean[i])
					}
				}
			}
		}
		c.set(true, 1*c.mctx+77, 9, nan) // key of KV head 1
		c.set(false, 0*c.mctx+0, 5, nan) // value of KV head 0, dim 5
		for _, chunk := range []int{n, 64, 17} {
			out := decodeAll(c, nh, q, n, chunk)
			for h := 0; h < nh; h++ {
				o, mag := c.ref(q[h*hd:(h+1)*hd], h/3, n)
				checkRow(t, fmt.Sprintf("%s NaN chunk=%d head %d", kvNames[typ], chunk, h), out[h*hd:(h+1)*hd], o, mag)
				for d := 0; d < hd; d++ {
					wantNaN := h >= 3 || d == 5 || (typ == kvQ8 && h < 3 && d < 32) // Q8_0: the poisoned block
					if isNaN := math.IsNaN(float64(out[h*hd+d])); isNaN != wantNaN {
						t.Fatalf("%s chunk=%d head %d d %d: NaN=%v, want %v", kvNames[typ], chunk, h, d, isNaN, wantNaN)
					}
				}
			}
		}
	}
}

func TestKVAppendPorts(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	const nkv, hd, mctx, pos0, T = 2, 64, 12, 3, 6
	stride := nkv*hd + 5
	src := make([]float32, T*stride)
	for i := range src {
		src[i] = rng.Float32()*4 - 2
	}
	src[1*stride+0], src[1*stride+1], src[1*stride+2] = float32(math.NaN()), float32(math.Inf(1)), 70000
	for _, typ := range []kvType{kvF16, kvQ8} {
		c := newTestCache(typ, nkv, hd, mctx)
		for i := range c.k {
			c.k[i] = 0xab
		}
		c.appendFn(c.kp(), p32(src), stride, nkv, hd, mctx, pos0, 1, 4)
		rb := rowBytes(typ, hd)
		for g := 0; g < nkv; g++ {
			for p := 0; p < mctx; p++ {
				tt := p - pos0
				row := c.k[(g*mctx+p)*rb : (g*mctx+p+1)*rb]
				if tt < 1 || tt >= 4 {
					for _, b := range row {
						if b != 0xab {
							t.Fatalf("%s: row (%d,%d) written outside the slice", kvNames[typ], g, p)
						}
					}
					continue
				}
				s := src[tt*stride+g*hd : tt*stride+(g+1)*hd]
				for d := 0; d < hd; d++ {
					got := c.val(c.k, g*mctx+p, d)
					switch {
					case typ == kvF16 && math.IsNaN(float64(s[d])):
						if !math.IsNaN(got) {
							t.Errorf("f16: NaN stored as %g", got)
						}
					case typ == kvF16 && math.Abs(float64(s[d])) >= 65520:
						if !math.IsInf(got, 1) {
							t.Errorf("f16: %g stored as %g, want +Inf", s[d], got)
						}
					case typ == kvF16:
						if math.Abs(got-float64(s[d])) > math.Abs(float64(s[d]))/2048+3e-8 {
							t.Errorf("f16: %g stored as %g", s[d], got)
						}
					case tt == 1 && g == 0 && d < qk: // the block holding NaN/Inf: poisoned
						if !math.IsNaN(got) {
							t.Errorf("q8_0: poisoned block reads %g", got)
						}
					default:
						var amax float64
						for _, v := range s[d/qk*qk : d/qk*qk+qk] {
							amax = math.Max(amax, math.Abs(float64(v)))
						}
						if math.Abs(got-float64(s[d])) > amax/127*0.5001+amax*1e-3 {
							t.Errorf("q8_0: %g stored as %g", s[d], got)
						}
					}
				}
			}
		}
	}
}

// TestTanhRef checks the soft-cap's tanh (krt_at_tanh_ref's port) against math.Tanh over
// the whole range, both sides of the 0.625 switch, and on the special values.
func TestTanhRef(t *testing.T) {
	worst := 0.0
	for x := float32(-30); x <= 30; x += 0.00123 {
		for _, v := range []float32{x, x * 1e-3} {
			want := math.Tanh(float64(v))
			if want == 0 {
				continue
			}
			if rel := math.Abs(float64(TanhRef(v))-want) / math.Abs(want); rel > worst {
				worst = rel
			}
		}
	}
	if worst > 4e-7 {
		t.Errorf("TanhRef: worst relative error %.3g, want <= 4e-7", worst)
	}
	t.Logf("TanhRef worst relative error %.3g", worst)
	inf := float32(math.Inf(1))
	if TanhRef(inf) != 1 || TanhRef(-inf) != -1 || TanhRef(0) != 0 || !math.IsNaN(float64(TanhRef(float32(math.NaN())))) {
		t.Errorf("TanhRef specials: +Inf %g, -Inf %g, 0 %g, NaN %g", TanhRef(inf), TanhRef(-inf), TanhRef(0), TanhRef(float32(math.NaN())))
	}
}

// TestAttnSoftcapPorts runs the decode (chunked and not) and prefill ports with soft-caps that
// bend most scores (1.5) and only the large ones (5) against the float64 reference with
// math.Tanh.
func TestAttnSoftcapPorts(t *testing.T) {
	defer func() { attnSoftcap = 0 }()
	rng := rand.New(rand.NewSource(3))
	for _, sc := range []float32{1.5, 5} {
		attnSoftcap = sc
		for _, typ := range []kvType{kvF32, kvF16, kvQ8} {
			const nh, nkv, hd, n = 8, 2, 64, 130
			c := newTestCache(typ, nkv, hd, n+3)
			c.fill(rng, 0, n)
			q := make([]float32, nh*hd)
			for i := range q {
				q[i] = rng.Float32()*12 - 6
			}
			for _, chunk := range []int{n, 64} {
				out := decodeAll(c, nh, q, n, chunk)
				for h := 0; h < nh; h++ {
					o, mag := c.ref(q[h*hd:(h+1)*hd], h/(nh/nkv), n)
					checkRow(t, fmt.Sprintf("softcap %g %s decode chunk=%d head %d", sc, kvNames[typ], chunk, h), out[h*hd:(h+1)*hd], o, mag)
				}
			}
			const T, pos0 = 20, n - 20
			qs := make([]float32, T*nh*hd)
			for i := range qs {
				qs[i] = rng.Float32()*12 - 6
			}
			out := make([]float32, T*nh*hd)
			scratch := make([]float32, 2048)
			u := nkv * ((T + attnQTile - 1) / attnQTile)
			attnPrefills[typ](p32(out), p32(qs), c.kp(), c.vp(), p32(scratch), nh, nkv, hd, c.mctx, nh*hd, pos0, T, 0, u)
			for tok := 0; tok < T; tok++ {
				for h := 0; h < nh; h++ {
					r := (tok*nh + h) * hd
					o, mag := c.ref(qs[r:r+hd], h/(nh/nkv), pos0+tok+1)
					checkRow(t, fmt.Sprintf("softcap %g %s prefill token %d head %d", sc, kvNames[typ], tok, h), out[r:r+hd], o, mag)
				}
			}
		}
	}
}
