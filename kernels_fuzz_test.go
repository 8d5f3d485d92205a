package kernelrt

import (
	"bytes"
	"encoding/binary"
	"math"
	"testing"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// Fuzz targets: each decodes the fuzz bytes into kernel inputs (floats including NaN, Inf,
// subnormals and extremes; raw blocks with arbitrary fp16 scales) and compares every
// registered backend/variant with the reference set (cgo/ref, or generic/ref without cgo).

// fuzzBytes cycles through data, so any input, even a short one, decodes to full arguments.
type fuzzBytes struct {
	data []byte
	pos  int
}

func (f *fuzzBytes) byte() byte {
	if len(f.data) == 0 {
		return 0
	}
	b := f.data[f.pos%len(f.data)]
	f.pos++
	return b
}

func (f *fuzzBytes) u16() uint16 { return uint16(f.byte()) | uint16(f.byte())<<8 }
func (f *fuzzBytes) u32() uint32 { return uint32(f.u16()) | uint32(f.u16())<<16 }

// fuzzSpecials are the floats quantizers find hardest: signed zeros, NaN and Inf, the edges of
// the fp16 and float32 ranges, and values around the fp16-d overflow of Q8_0.
var fuzzSpecials = []float32{
	0, float32(math.Copysign(0, -1)), float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.MaxFloat32, -math.MaxFloat32, math.SmallestNonzeroFloat32, 1.1754944e-38, 1e-37, 1e-36,
	65504, 65504 * 127, 65520 * 127, 6.1e-5, 5.96e-8, 0.5, -0.5, 1, -1, 127, -16, 16,
}

// float decodes one float from a class byte and, for most classes, 4 more bytes.
func (f *fuzzBytes) float(prev float32) float32 {
	c := f.byte()
	switch c % 8 {
	case 0, 1, 2: // any bits: NaN payloads, subnormals, huge values
		return math.Float32frombits(f.u32())
	case 3, 4: // ordinary values, a 16-bit mantissa scaled by 2^(-24..39)
		return float32(math.Ldexp(float64(int16(f.u16())), int(c>>3)-40))
	case 5: // exact halves at a power-of-two scale: rounding ties once scaled by 1/d
		return float32(math.Ldexp(float64(int8(f.byte()))+0.5, int(c>>5)-2))
	case 6:
		return fuzzSpecials[int(c>>3)%len(fuzzSpecials)]
	}
	if c&0x80 != 0 { // magnitude ties: repeat the previous value, maybe negated
		return -prev
	}
	return prev
}

// floats decodes nb blocks of floats.
func (f *fuzzBytes) floats(nb int) []float32 {
	x := make([]float32, nb*QK)
	prev := float32(0)
	for i := range x {
		x[i] = f.float(prev)
		prev = x[i]
	}
	return x
}

// scale decodes an fp16 d: usually raw bits (any class), sometimes a special.
func (f *fuzzBytes) scale() uint16 {
	c := f.byte()
	if c < 0xc0 {
		return f.u16()
	}
	return specialDs[int(c)%len(specialDs)]
}

// q8Blocks decodes raw Q8_0 blocks; activations (act) keep their quants in -127..127, the range
// every quantizer produces and the GEMV kernels assume.
func (f *fuzzBytes) q8Blocks(n int, act bool) []BlockQ8_0 {
	b := make([]BlockQ8_0, n)
	for i := range b {
		b[i].D = f.scale()
		for j := range b[i].Qs {
			b[i].Qs[j] = int8(f.byte())
			if act && b[i].Qs[j] == -128 {
				b[i].Qs[j] = -127
			}
		}
	}
	return b
}

// q5Blocks decodes raw Q5_0 blocks.
func (f *fuzzBytes) q5Blocks(n int) []BlockQ5_0 {
	b := make([]BlockQ5_0, n)
	for i := range b {
		b[i].D = f.scale()
		binary.LittleEndian.PutUint32(b[i].Qh[:], f.u32())
		for j := range b[i].Qs {
			b[i].Qs[j] = f.byte()
		}
	}
	return b
}

// fuzzSeeds are shared by every target: empty, tiny, patterned and special-heavy inputs.
func fuzzSeeds(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte{0})
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9})
	f.Add(bytes.Repeat([]byte{0x06, 0x0e, 0x16, 0x1e, 0x26}, 40))  // specials
	f.Add(bytes.Repeat([]byte{0x05, 0x7f, 0x25, 0x81, 0x87}, 64))  // ties and repeats
	f.Add(bytes.Repeat([]byte{0x00, 0x00, 0x00, 0xc0, 0x7f}, 30))  // NaNs
	f.Add(bytes.Repeat([]byte{0xff, 0x7b, 0x01, 0x00, 0x80}, 100)) // fp16 extremes
	seq := make([]byte, 512)
	for i := range seq {
		seq[i] = byte(i*37 + i>>3)
	}
	f.Add(seq)
}

// sameAs runs fn under the reference set and then under every set implementing op, handing
// both results to cmp.
func sameAs[T any](t *testing.T, op string, fn func() T, cmp func(s *kern.Set, got, want T)) {
	var want T
	withSet(refSet(), func() { want = fn() })
	for _, s := range allSets() {
		if !hasOp(s, op) {
			continue
		}
		var got T
		withSet(s, func() { got = fn() })
		cmp(s, got, want)
	}
}

func FuzzQuantizeQ8_0(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data: data}
		x := in.floats(1 + int(in.byte()%9))
		spec := specQ8_0(x)
		sameAs(t, "QuantizeQ8_0", func() []BlockQ8_0 {
			q := make([]BlockQ8_0, len(x)/QK)
			if err := QuantizeQ8_0(q, x); err != nil {
				t.Fatal(err)
			}
			return q
		}, func(s *kern.Set, got, want []BlockQ8_0) {
			if !bytes.Equal(blockBytes(got), blockBytes(want)) || !bytes.Equal(blockBytes(got), blockBytes(spec)) {
				t.Fatalf("%s: QuantizeQ8_0(%v)\n got  %v\n ref  %v\n spec %v", s.Name(), x, got, want, spec)
			}
		})
	})
}

func FuzzQuantizeQ5_0(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data: data}
		x := in.floats(1 + int(in.byte()%9))
		spec := specQ5_0(x)
		sameAs(t, "QuantizeQ5_0", func() []BlockQ5_0 {
			q := make([]BlockQ5_0, len(x)/QK)
			if err := QuantizeQ5_0(q, x); err != nil {
				t.Fatal(err)
			}
			return q
		}, func(s *kern.Set, got, want []BlockQ5_0) {
			if !bytes.Equal(blockBytes(got), blockBytes(want)) || !bytes.Equal(blockBytes(got), blockBytes(spec)) {
				t.Fatalf("%s: QuantizeQ5_0(%v)\n got  %v\n ref  %v\n spec %v", s.Name(), x, got, want, spec)
			}
		})
	})
}

// checkDequant compares dequantized floats with the reference set and the float64 rule
// (exact: one product of an 11-bit scale and a small integer). NaN payloads may differ.
func checkDequant(t *testing.T, s *kern.Set, got, want []float32, spec []float64) {
	t.Helper()
	for i := range got {
		if !sameFloat(got[i], want[i]) || !sameFloat(got[i], float32(spec[i])) {
			t.Fatalf("%s: element %d = %g, reference set %g, float64 %g", s.Name(), i, got[i], want[i], spec[i])
		}
	}
}

func FuzzDequantizeQ8_0(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data: data}
		b := in.q8Blocks(1+int(in.byte()%9), false)
		spec := dequantQ8_0F64(b)
		sameAs(t, "DequantizeQ8_0", func() []float32 {
			y := make([]float32, len(b)*QK)
			if err := DequantizeQ8_0(y, b); err != nil {
				t.Fatal(err)
			}
			return y
		}, func(s *kern.Set, got, want []float32) { checkDequant(t, s, got, want, spec) })
	})
}

func FuzzDequantizeQ5_0(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data: data}
		b := in.q5Blocks(1 + int(in.byte()%9))
		spec := dequantQ5_0F64(b)
		sameAs(t, "DequantizeQ5_0", func() []float32 {
			y := make([]float32, len(b)*QK)
			if err := DequantizeQ5_0(y, b); err != nil {
				t.Fatal(err)
			}
			return y
		}, func(s *kern.Set, got, want []float32) { checkDequant(t, s, got, want, spec) })
	})
}

// gemvCase is one decoded GEMV problem with the float64 magnitude of each row.
type gemvCase struct {
	rows, cols int
	bias       []float32
	mag        []float64 // sum_j |w_j x_j| + |bias|, over finite terms
	infD       []bool    // the row meets an fp16 Inf scale (in w or x)
}

// decodeGemvShape reads rows (1..20, crossing every unroll), cols (32..192) and maybe a bias.
func decodeGemvShape(in *fuzzBytes) gemvCase {
	c := gemvCase{rows: 1 + int(in.byte()%20), cols: QK * (1 + int(in.byte()%6))}
	if in.byte()&1 != 0 {
		c.bias = make([]float32, c.rows)
		for i := range c.bias {
			c.bias[i] = float32(int16(in.u16())) / 256
		}
	}
	return c
}

// measure fills mag and infD from dequantized weights and activations.
func (c *gemvCase) measure(w []float64, wd []uint16, x []float64, xd []uint16) {
	nb := c.cols / QK
	xInf := false
	for _, d := range xd {
		xInf = xInf || d&0x7fff == 0x7c00
	}
	c.mag, c.infD = make([]float64, c.rows), make([]bool, c.rows)
	for r := 0; r < c.rows; r++ {
		c.infD[r] = xInf
		for b := 0; b < nb; b++ {
			c.infD[r] = c.infD[r] || wd[r*nb+b]&0x7fff == 0x7c00
		}
		for j := 0; j < c.cols; j++ {
			if p := math.Abs(w[r*c.cols+j] * x[j]); !math.IsNaN(p) && !math.IsInf(p, 0) {
				c.mag[r] += p
			}
		}
		if c.bias != nil {
			c.mag[r] += math.Abs(float64(c.bias[r]))
		}
	}
}

// check compares one set's y with the reference set's: NaN where the reference is NaN, finite
// values within gemvTol of the row magnitude. Where an Inf scale meets the row, the SIMD
// kernels' split integer sums may turn the reference's Inf into NaN (Inf*a + Inf*(-b)), so
// there only "both non-finite, and NaN stays NaN" is required.
func (c *gemvCase) check(t *testing.T, s *kern.Set, got, want []float32) {
	t.Helper()
	for r := range got {
		g, w := got[r], want[r]
		gBad := isNaN32(g) || math.IsInf(float64(g), 0)
		wBad := isNaN32(w) || math.IsInf(float64(w), 0)
		ok := true
		switch {
		case gBad != wBad:
			ok = false
		case wBad && c.infD[r]:
			ok = isNaN32(g) || !isNaN32(w) && g == w
		case wBad:
			ok = sameFloat(g, w)
		default:
			ok = within(g, float64(w), gemvTol, c.mag[r])
		}
		if !ok {
			t.Fatalf("%s: %dx%d row %d = %g, reference set %g (row magnitude %g, Inf scale %v)", s.Name(), c.rows, c.cols, r, g, w, c.mag[r], c.infD[r])
		}
	}
}

func scales[B block](bs []B) []uint16 {
	out := make([]uint16, len(bs))
	for i := range bs {
		switch b := any(&bs[i]).(type) {
		case *BlockQ8_0:
			out[i] = b.D
		case *BlockQ5_0:
			out[i] = b.D
		}
	}
	return out
}

func FuzzGemvQ8_0(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data: data}
		c := decodeGemvShape(in)
		w := in.q8Blocks(c.rows*c.cols/QK, false)
		x := in.q8Blocks(c.cols/QK, true)
		c.measure(dequantQ8_0F64(w), scales(w), dequantQ8_0F64(x), scales(x))
		sameAs(t, "GemvQ8_0", func() []float32 {
			y := make([]float32, c.rows)
			if err := GemvQ8_0Bias(y, w, x, c.bias, c.rows, c.cols); err != nil {
				t.Fatal(err)
			}
			return y
		}, func(s *kern.Set, got, want []float32) { c.check(t, s, got, want) })
	})
}

func FuzzGemvQ5_0(f *testing.F) {
	fuzzSeeds(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := &fuzzBytes{data: data}
		c := decodeGemvShape(in)
		w := in.q5Blocks(c.rows * c.cols / QK)
		x := in.q8Blocks(c.cols/QK, true)
		c.measure(dequantQ5_0F64(w), scales(w), dequantQ8_0F64(x), scales(x))
		sameAs(t, "GemvQ5_0", func() []float32 {
			y := make([]float32, c.rows)
			if err := GemvQ5_0Bias(y, w, x, c.bias, c.rows, c.cols); err != nil {
				t.Fatal(err)
			}
			return y
		}, func(s *kern.Set, got, want []float32) { c.check(t, s, got, want) })
	})
}
