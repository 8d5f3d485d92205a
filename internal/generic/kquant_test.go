package generic

import (
	"math"
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// The quantizer inputs of csrc/tests/kq_inputs.h, ported draw for draw (no libm: bit-exact), so
// the checksums of ggml's own bytes that csrc/tests/test_kquant.c embeds hold here too.

const (
	kqRandom = iota
	kqOutlier
	kqZero
	kqNegZero
	kqSingle
	kqTies
	kqGrid
	kqConst
	kqPos
	kqNeg
	kqHuge
	kqTiny
	kqSubn
	kqSignTie
	kqMixed
	kqNaN
	kqNKinds
)

type kqRNG uint64

func (s *kqRNG) rnd() uint64 {
	*s ^= *s << 13
	*s ^= *s >> 7
	*s ^= *s << 17
	return uint64(*s)
}

func (s *kqRNG) irand(a, b int) int { return a + int(s.rnd()%uint64(b-a+1)) }

// kqLdexp is m * 2^e built from bits (truncating into the subnormal range, like kq_ldexp).
func kqLdexp(m int32, e int) float32 {
	if m == 0 {
		return 0
	}
	sign := uint32(0)
	if m < 0 {
		sign, m = 0x80000000, -m
	}
	a, sh := uint32(m), 0
	for a >= 1<<24 {
		a >>= 1
		sh++
	}
	for a < 1<<23 {
		a <<= 1
		sh--
	}
	be := 127 + 23 + sh + e
	if be >= 255 {
		return math.Float32frombits(sign | 0x7f800000)
	}
	if be <= 0 {
		r := 1 - be
		if r > 24 {
			a = 0
		} else {
			a >>= uint(r)
		}
		return math.Float32frombits(sign | a)
	}
	return math.Float32frombits(sign | uint32(be)<<23 | a&0x7fffff)
}

func (s *kqRNG) norm(e int) float32 {
	v := int32(0)
	for i := 0; i < 4; i++ {
		v += int32(s.rnd() & 0x3ffff)
	}
	v -= 2 * 0x3ffff
	return kqLdexp(v, e-18)
}

func (s *kqRNG) sz() float32 {
	if s.rnd()&1 != 0 {
		return float32(math.Copysign(0, -1))
	}
	return 0
}

func kqFill(x []float32, kind int, s *kqRNG) {
	n := len(x)
	switch kind {
	case kqRandom:
		e := s.irand(-14, 14)
		for j := range x {
			x[j] = s.norm(e)
		}
	case kqOutlier:
		for j := range x {
			x[j] = s.norm(0)
		}
		for t := 0; t < 3; t++ {
			i := s.irand(0, n-1)
			x[i] = s.norm(7)
		}
	case kqZero:
		clear(x)
	case kqNegZero:
		for j := range x {
			x[j] = s.sz()
		}
	case kqSingle:
		for j := range x {
			x[j] = s.sz()
		}
		i := s.irand(0, n-1)
		x[i] = s.norm(0)
	case kqTies:
		e := s.irand(-20, 20)
		m := 1 << s.irand(1, 7)
		for j := range x {
			k := s.irand(-m, m)
			h := int(s.rnd() & 1)
			x[j] = kqLdexp(int32(2*k+h), e-1)
		}
	case kqGrid:
		m := s.irand(1, 40)
		for j := range x {
			x[j] = float32(s.irand(-m, m))
		}
	case kqConst:
		v := s.norm(0)
		for j := range x {
			x[j] = v
		}
	case kqPos, kqNeg:
		for j := range x {
			x[j] = kqLdexp(int32(s.rnd()&0xfffff)+0x80000, -20)
			if kind == kqNeg {
				x[j] = -x[j]
			}
		}
	case kqHuge:
		e := s.irand(50, 126)
		for j := range x {
			x[j] = s.norm(e)
		}
		if s.rnd()&1 != 0 {
			i := s.irand(0, n-1)
			x[i] = 3.4e38
			if s.rnd()&1 == 0 {
				x[i] = -3.4e38
			}
		}
	case kqTiny:
		e := s.irand(-100, -14)
		for j := range x {
			x[j] = s.norm(e)
		}
	case kqSubn:
		for j := range x {
			x[j] = math.Float32frombits(uint32(s.rnd() & 0x807fffff))
		}
		if s.rnd()&1 != 0 {
			i := s.irand(0, n-1)
			x[i] = 3e-38
			if s.rnd()&1 != 0 {
				x[i] = 1e-37
			}
		}
	case kqSignTie:
		m := kqLdexp(int32(s.rnd()&0xfffff)+0x100000, -19)
		for j := range x {
			x[j] = s.norm(-2) * m
		}
		for t := 0; t < 4; t++ {
			i := s.irand(0, n-1)
			x[i] = -m
			if s.rnd()&1 != 0 {
				x[i] = m
			}
		}
	case kqMixed:
		for j := 0; j < n; j += 16 {
			k := s.irand(0, kqSignTie)
			kqFill(x[j:min(n, j+16)], k, s)
		}
	case kqNaN:
		for j := range x {
			x[j] = s.norm(0)
		}
		k := s.rnd() % 3
		i := s.irand(0, n-1)
		x[i] = math.Float32frombits([3]uint32{0x7fc00000, 0x7f800000, 0xff800000}[k])
	}
}

func kqGolden(nb, blk int) []float32 {
	x := make([]float32, nb*blk)
	s := kqRNG(0x9E3779B97F4A7C15 ^ uint64(blk))
	for b := 0; b < nb; b++ {
		k := b % kqNKinds
		if b >= 4*kqNKinds {
			k = s.irand(0, kqNKinds-1)
		}
		kqFill(x[b*blk:(b+1)*blk], k, &s)
	}
	return x
}

func kqHash(q []byte, x []float32, nb, blk, bytes int) uint64 {
	h := uint64(0xcbf29ce484222325)
	for b := 0; b < nb; b++ {
		if poisoned(x[b*blk : (b+1)*blk]) {
			continue
		}
		for _, c := range q[b*bytes : (b+1)*bytes] {
			h = (h ^ uint64(c)) * 0x100000001b3
		}
	}
	return h
}

type kqType struct {
	name       string
	blk, bytes int
	golden     uint64
	quant      func(dst, src kern.P, b0, b1 int)
	dequant    func(dst, src kern.P, b0, b1 int)
}

var kqTypes = []kqType{
	{"q4_0", qk, 18, 0x84ee2e39dde60ca0, QuantizeQ4_0, DequantizeQ4_0},
	{"q4_1", qk, 20, 0x177d61fc0cdf8d40, QuantizeQ4_1, DequantizeQ4_1},
	{"q5_1", qk, 24, 0x565c26a5b8fd4a0a, QuantizeQ5_1, DequantizeQ5_1},
	{"q4_K", qkK, 144, 0xa7831d6dd3a33293, QuantizeQ4K, DequantizeQ4K},
	{"q5_K", qkK, 176, 0x071072e08ad2be68, QuantizeQ5K, DequantizeQ5K},
	{"q6_K", qkK, 210, 0x83755d346ea9a4d2, QuantizeQ6K, DequantizeQ6K},
	{"q8_K", qkK, 292, 0x56d5e275b0bc9f66, QuantizeQ8K, DequantizeQ8K},
}

func ptr[T any](s []T) kern.P { return unsafe.Pointer(&s[0]) }

// TestQuantizersMatchGGML checks every quantizer against the checksum of ggml's reference bytes
// on the golden input set (the same constant as csrc/tests/test_kquant.c), and that poisoned
// blocks (NaN / Inf input) dequantize to NaN everywhere.
func TestQuantizersMatchGGML(t *testing.T) {
	for _, ty := range kqTypes {
		nb := 4096
		if ty.blk == qkK {
			nb = 512
		}
		x := kqGolden(nb, ty.blk)
		q := make([]byte, nb*ty.bytes)
		ty.quant(ptr(q), ptr(x), 0, nb)
		if h := kqHash(q, x, nb, ty.blk, ty.bytes); h != ty.golden {
			t.Errorf("%s: checksum %#x, ggml's %#x", ty.name, h, ty.golden)
		}
		y := make([]float32, nb*ty.blk)
		ty.dequant(ptr(y), ptr(q), 0, nb)
		for b := 0; b < nb; b++ {
			if !poisoned(x[b*ty.blk : (b+1)*ty.blk]) {
				continue
			}
			for j, v := range y[b*ty.blk : (b+1)*ty.blk] {
				if v == v {
					t.Errorf("%s: poisoned block %d value %d = %g, want NaN", ty.name, b, j, v)
					break
				}
			}
		}
	}
}

// TestDequantizeRoundTrip checks dequantize(quantize(x)) against x in float64: within the
// quantization step of each block (a loose bound; exactness is what the C tests and the
// checksums pin down), and that slices write only their blocks.
func TestDequantizeRoundTrip(t *testing.T) {
	s := kqRNG(12345)
	for _, ty := range kqTypes {
		const nb = 64
		x := make([]float32, nb*ty.blk)
		for b := 0; b < nb; b++ {
			kqFill(x[b*ty.blk:(b+1)*ty.blk], kqRandom, &s)
		}
		q := make([]byte, nb*ty.bytes)
		ty.quant(ptr(q), ptr(x), 0, nb)
		y := make([]float32, nb*ty.blk)
		for i := range y {
			y[i] = -1234
		}
		ty.dequant(ptr(y), ptr(q), 1, nb-1)
		for b := 0; b < nb; b++ {
			xb, yb := x[b*ty.blk:(b+1)*ty.blk], y[b*ty.blk:(b+1)*ty.blk]
			amax := 0.0
			for _, v := range xb {
				amax = math.Max(amax, math.Abs(float64(v)))
			}
			// 4-bit K-quants: scale and min steps are also quantized; allow a few levels.
			bound := amax / 3
			switch ty.name {
			case "q8_K":
				bound = amax / 127
			case "q6_K":
				bound = amax / 8 // small sub-block scales are coarse (int8 relative to the largest)
			}
			for j := range xb {
				if b == 0 || b == nb-1 {
					if yb[j] != -1234 {
						t.Fatalf("%s: dequantize wrote outside its slice (block %d)", ty.name, b)
					}
					continue
				}
				if d := math.Abs(float64(yb[j]) - float64(xb[j])); d > bound {
					t.Fatalf("%s: block %d value %d: %g -> %g (error %g > %g)", ty.name, b, j, xb[j], yb[j], d, bound)
				}
			}
		}
	}
}

// TestQ8KBsums checks that Q8_K bsums are the sums of their 16 quants and quants stay in
// [-127, 127].
func TestQ8KBsums(t *testing.T) {
	x := kqGolden(256, qkK)
	q := make([]blockQ8K, 256)
	QuantizeQ8K(ptr(q), ptr(x), 0, 256)
	for b := range q {
		for g := 0; g < 16; g++ {
			s := 0
			for _, v := range q[b].qs[16*g : 16*g+16] {
				if v < -127 {
					t.Fatalf("block %d: quant -128", b)
				}
				s += int(v)
			}
			if s != int(q[b].bsums[g]) {
				t.Fatalf("block %d bsums[%d] = %d, want %d", b, g, q[b].bsums[g], s)
			}
		}
	}
}
