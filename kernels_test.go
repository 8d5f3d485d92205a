package kernelrt

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/generic"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// Tolerances from the issue: GEMV within 1e-5 of a float64 reference (relative to
// sum_j |w_j x_j|, so cancellation cannot make it meaningless), RMSNorm and softmax within 1e-6
// per element.
const (
	gemvTol = 1e-5
	elemTol = 1e-6
)

// ---- fp16 ----

func TestFP16ToFP32Exhaustive(t *testing.T) {
	for h := 0; h < 1<<16; h++ {
		got, want := FP16ToFP32(uint16(h)), fp16F64(uint16(h))
		if math.IsNaN(want) {
			// NaN keeps its sign and payload, shifted into the float32 mantissa.
			if b := math.Float32bits(got); !isNaN32(got) || b>>31 != uint32(h)>>15 || b&0x7fffff != uint32(h&0x3ff)<<13 {
				t.Fatalf("FP16ToFP32(%#04x) = %#08x, want NaN with payload %#x", h, b, h&0x3ff)
			}
			continue
		}
		if float64(got) != want || math.Signbit(float64(got)) != math.Signbit(want) {
			t.Fatalf("FP16ToFP32(%#04x) = %g, want %g", h, got, want)
		}
		if back := FP32ToFP16(got); back != uint16(h) {
			t.Fatalf("FP32ToFP16(FP16ToFP32(%#04x)) = %#04x", h, back)
		}
	}
}

// TestFP32ToFP16Nearest checks round-to-nearest-even against the two neighbouring halves.
func TestFP32ToFP16Nearest(t *testing.T) {
	rng := newRand(1)
	check := func(f float32) {
		h := FP32ToFP16(f)
		got := fp16F64(h)
		x := float64(f)
		switch {
		case math.IsNaN(x):
			if !math.IsNaN(got) || h&0x8000 != uint16(math.Float32bits(f)>>16)&0x8000 {
				t.Fatalf("FP32ToFP16(NaN %#08x) = %#04x", math.Float32bits(f), h)
			}
			return
		case math.Abs(x) >= 65520:
			if !math.IsInf(got, 0) || math.Signbit(got) != math.Signbit(x) {
				t.Fatalf("FP32ToFP16(%g) = %#04x, want Inf", f, h)
			}
			return
		}
		if math.Signbit(got) != math.Signbit(x) {
			t.Fatalf("FP32ToFP16(%g) = %#04x: sign lost", f, h)
		}
		// The neighbours of h in magnitude: neither may be strictly closer, and a tie must
		// have picked the even mantissa.
		mag := h & 0x7fff
		for _, nb := range []uint16{mag - 1, mag + 1} {
			if mag == 0 && nb == 0xffff || nb > 0x7bff {
				continue
			}
			dn, dh := math.Abs(math.Abs(x)-fp16F64(nb)), math.Abs(math.Abs(x)-math.Abs(got))
			if dn < dh || dn == dh && h&1 != 0 {
				t.Fatalf("FP32ToFP16(%g) = %#04x (%g), but %#04x (%g) is nearer or even", f, h, got, nb, fp16F64(nb))
			}
		}
	}
	for i := 0; i < 200000; i++ {
		check(math.Float32frombits(rng.Uint32()))
		check(float32(math.Ldexp(rng.Float64(), -26+rng.IntN(44))))
	}
	for _, f := range []float32{0, 65504, 65519.99, 65520, 1.0 / (1 << 24), 1.0 / (1 << 25), 1.5 / (1 << 25), 6.1e-5, 1 + 1.0/2048, 1 + 3.0/2048} {
		check(f)
		check(-f)
	}
}

func TestExpf(t *testing.T) {
	worst := 0.0
	for x := float32(-87.3); x <= 88.3; x += 0.0037 {
		got, want := generic.Expf(x), math.Exp(float64(x))
		if e := relErr(got, want); e > worst {
			worst = e
		}
	}
	if worst > 3e-7 {
		t.Errorf("Expf max relative error %.3g, want <= 3e-7", worst)
	}
	if got := generic.Expf(-100); got != 0 {
		t.Errorf("Expf(-100) = %g, want 0", got)
	}
	if got := generic.Expf(100); !math.IsInf(float64(got), 1) {
		t.Errorf("Expf(100) = %g, want +Inf", got)
	}
	if got := generic.Expf(float32(math.NaN())); !isNaN32(got) {
		t.Errorf("Expf(NaN) = %g, want NaN", got)
	}
	if got := generic.Expf(0); got != 1 {
		t.Errorf("Expf(0) = %g, want 1", got)
	}
}

// ---- quantization ----

// specQ8_0 is ggml's reference Q8_0 quantizer written literally, plus the documented edge
// rules (poisoned blocks; 1/d overflowing to Inf treated as 0; quants clamped to ±127).
func specQ8_0(x []float32) []BlockQ8_0 {
	out := make([]BlockQ8_0, len(x)/QK)
	for b := range out {
		xs := x[b*QK : (b+1)*QK]
		amax := float32(0)
		for _, v := range xs {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				amax = float32(math.NaN())
				break
			}
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		if isNaN32(amax) {
			out[b] = BlockQ8_0{D: 0x7e00}
			continue
		}
		d := amax / 127
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		if math.IsInf(float64(id), 0) {
			id = 0
		}
		out[b].D = FP32ToFP16(d)
		for j, v := range xs {
			out[b].Qs[j] = int8(max(-127, min(127, math.Round(float64(float32(v*id))))))
		}
	}
	return out
}

// specQ5_0 is ggml's reference Q5_0 quantizer written literally, plus the edge rules.
func specQ5_0(x []float32) []BlockQ5_0 {
	out := make([]BlockQ5_0, len(x)/QK)
	for b := range out {
		xs := x[b*QK : (b+1)*QK]
		amax, vmax, poisoned := float32(0), float32(0), false
		for _, v := range xs {
			if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
				poisoned = true
			}
			if a := float32(math.Abs(float64(v))); amax < a {
				amax, vmax = a, v
			}
		}
		if poisoned {
			out[b] = BlockQ5_0{D: 0x7e00, Qh: [4]uint8{0xff, 0xff, 0xff, 0xff}}
			continue
		}
		d := vmax / -16
		id := float32(0)
		if d != 0 {
			id = 1 / d
		}
		if math.IsInf(float64(id), 0) {
			id = 0
		}
		out[b].D = FP32ToFP16(d)
		var qh uint32
		for j := 0; j < 16; j++ {
			q := [2]int{}
			for k, v := range []float32{xs[j], xs[j+16]} {
				f := float32(v*id) + 16.5
				q[k] = int(max(0, min(31, math.Trunc(float64(f)))))
			}
			out[b].Qs[j] = uint8(q[0]&15 | (q[1]&15)<<4)
			qh |= uint32(q[0]>>4)<<j | uint32(q[1]>>4)<<(j+16)
		}
		out[b].Qh = [4]uint8{uint8(qh), uint8(qh >> 8), uint8(qh >> 16), uint8(qh >> 24)}
	}
	return out
}

// blockBytes views blocks as raw bytes, for byte-identity checks.
func blockBytes[B block](s []B) []byte {
	var z B
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// quantInputs are the float inputs every quantizer test runs: random at several scales and
// block counts, plus the edge cases.
func quantInputs() map[string][]float32 {
	rng := newRand(2)
	in := map[string][]float32{}
	for _, nb := range []int{1, 2, 3, 5, 7, 16, 17, 33} {
		in[fmt.Sprintf("uniform/%d", nb)] = randF32(rng, nb*QK, 1)
	}
	in["scaled/37"] = randScaledF32(rng, 37*QK)
	in["zeros"] = make([]float32, 3*QK)
	// Values exactly on .5 after scaling: amax 127 gives d = id = 1.
	ties := make([]float32, QK)
	for j := range ties {
		ties[j] = float32(j) - 15.5
	}
	ties[31] = 127
	in["ties"] = ties
	// d = 65504, the largest finite fp16; and larger, where d is stored as Inf (as in ggml).
	in["d65504"] = scaledRamp(65504 * 127)
	in["dInf"] = scaledRamp(65600 * 127)
	in["q5d65504"] = scaledRamp(65504 * 16) // Q5_0's d = max/-16 = 65504 (max is x[0] < 0)
	in["q5dTiny"] = scaledRamp(1e-38)       // Q5_0's 1/d overflows too
	// fp16-subnormal d (2^-20), d below fp16 range (1e-9), float32-subnormal d (1/d = Inf).
	in["dSubnormal"] = scaledRamp(127 * math.Ldexp(1, -20))
	in["dUnderflow"] = scaledRamp(127e-9)
	in["dF32Subnormal"] = scaledRamp(1e-36)
	in["dTiny"] = scaledRamp(1e-37)
	in["denormals"] = scaledRamp(1e-44)
	// Poisoned blocks among clean ones: NaN, +Inf, -Inf at the first, a middle, the last element.
	special := randF32(rng, 6*QK, 2)
	special[QK] = float32(math.NaN())
	special[2*QK+17] = float32(math.Inf(1))
	special[4*QK-1] = float32(math.Inf(-1))
	special[5*QK+5] = math.Float32frombits(0xffc00001) // negative NaN with payload
	in["poisoned"] = special
	// Largest-magnitude ties with opposite signs (Q5_0 keeps the first).
	signTie := randF32(rng, 2*QK, 1)
	signTie[3], signTie[9] = -5, 5
	signTie[QK+1], signTie[QK+2] = 7, -7
	in["signTie"] = signTie
	return in
}

// scaledRamp is one block ramping from -amax to amax (amax exactly at the end).
func scaledRamp(amax float64) []float32 {
	x := make([]float32, QK)
	for j := range x {
		x[j] = float32(amax * float64(2*j-31) / 31)
	}
	return x
}

func TestQuantizeQ8_0(t *testing.T) {
	inputs := quantInputs()
	ref := map[string][]BlockQ8_0{}
	withSet(refSet(), func() {
		for name, x := range inputs {
			ref[name] = make([]BlockQ8_0, len(x)/QK)
			if err := QuantizeQ8_0(ref[name], x); err != nil {
				t.Fatal(err)
			}
		}
	})
	forEachSet(t, "QuantizeQ8_0", func(t *testing.T, s *kern.Set) {
		for name, x := range inputs {
			got := make([]BlockQ8_0, len(x)/QK)
			if err := QuantizeQ8_0(got, x); err != nil {
				t.Fatal(err)
			}
			if want := specQ8_0(x); !bytes.Equal(blockBytes(got), blockBytes(want)) {
				t.Errorf("%s: differs from ggml's rules:\n got  %v\n want %v", name, got, want)
			}
			if !bytes.Equal(blockBytes(got), blockBytes(ref[name])) {
				t.Errorf("%s: differs from %s:\n got  %v\n want %v", name, refSet().Name(), got, ref[name])
			}
			checkQ8_0Error(t, name, x, got)
		}
		// Ties round away from zero: x = j - 15.5 with d = 1.
		got := make([]BlockQ8_0, 1)
		if err := QuantizeQ8_0(got, inputs["ties"]); err != nil {
			t.Fatal(err)
		}
		if got[0].D != 0x3c00 {
			t.Errorf("ties: d = %#04x, want 0x3c00 (1.0)", got[0].D)
		}
		for j := 0; j < 31; j++ {
			want := int8(j - 15)
			if j < 16 {
				want = int8(j - 16)
			}
			if got[0].Qs[j] != want {
				t.Errorf("ties: %g quantized to %d, want %d (half away from zero)", inputs["ties"][j], got[0].Qs[j], want)
			}
		}
		// The stored scale at the fp16 edges; when 1/d overflows the quants are all 0.
		for name, wantD := range map[string]uint16{"d65504": 0x7bff, "dInf": 0x7c00, "dSubnormal": 0x0010, "dUnderflow": 0, "dTiny": 0} {
			if err := QuantizeQ8_0(got, inputs[name]); err != nil {
				t.Fatal(err)
			}
			if got[0].D != wantD {
				t.Errorf("%s: d = %#04x, want %#04x", name, got[0].D, wantD)
			}
			if name == "d65504" && (got[0].Qs[31] != 127 || got[0].Qs[0] != -127) {
				t.Errorf("%s: the extremes quantized to %d and %d, want -127 and 127", name, got[0].Qs[0], got[0].Qs[31])
			}
			if name == "dTiny" && got[0].Qs != [32]int8{} {
				t.Errorf("%s: quants %v, want all 0 (1/d overflows)", name, got[0].Qs)
			}
		}
		// Poisoned blocks: d = fp16 NaN, quants 0, neighbours untouched.
		p := make([]BlockQ8_0, 6)
		if err := QuantizeQ8_0(p, inputs["poisoned"]); err != nil {
			t.Fatal(err)
		}
		for b, poisoned := range []bool{false, true, true, true, false, true} {
			isP := p[b].D == 0x7e00 && p[b].Qs == [32]int8{}
			if isP != poisoned {
				t.Errorf("poisoned: block %d = %v, want poisoned=%v", b, p[b], poisoned)
			}
		}
	})
}

// checkQ8_0Error checks every dequantized value is within half a quantization step of its
// input, plus what storing d as fp16 costs (|q| * |d - fp16(d)|).
func checkQ8_0Error(t *testing.T, name string, x []float32, q []BlockQ8_0) {
	t.Helper()
	deq := dequantQ8_0F64(q)
	for b := range q {
		amax := 0.0
		for _, v := range x[b*QK : (b+1)*QK] {
			amax = math.Max(amax, math.Abs(float64(v)))
		}
		d := float64(float32(amax) / 127)
		d16 := fp16F64(q[b].D)
		if math.IsNaN(amax) || math.IsInf(amax, 0) || math.IsInf(d16, 0) || d < math.Ldexp(1, -14) {
			continue // poisoned, fp16-overflowed or fp16-subnormal d: covered by the byte checks
		}
		for j := 0; j < QK; j++ {
			i := b*QK + j
			bound := 0.5*d + math.Abs(float64(q[b].Qs[j]))*math.Abs(d-d16) + 1e-6*d
			if e := math.Abs(float64(x[i]) - deq[i]); e > bound {
				t.Errorf("%s: x[%d] = %g dequantizes to %g: error %g > %g", name, i, x[i], deq[i], e, bound)
			}
		}
	}
}

func TestQuantizeQ5_0(t *testing.T) {
	inputs := quantInputs()
	ref := map[string][]BlockQ5_0{}
	withSet(refSet(), func() {
		for name, x := range inputs {
			ref[name] = make([]BlockQ5_0, len(x)/QK)
			if err := QuantizeQ5_0(ref[name], x); err != nil {
				t.Fatal(err)
			}
		}
	})
	forEachSet(t, "QuantizeQ5_0", func(t *testing.T, s *kern.Set) {
		for name, x := range inputs {
			got := make([]BlockQ5_0, len(x)/QK)
			if err := QuantizeQ5_0(got, x); err != nil {
				t.Fatal(err)
			}
			if want := specQ5_0(x); !bytes.Equal(blockBytes(got), blockBytes(want)) {
				t.Errorf("%s: differs from ggml's rules:\n got  %v\n want %v", name, got, want)
			}
			if !bytes.Equal(blockBytes(got), blockBytes(ref[name])) {
				t.Errorf("%s: differs from %s:\n got  %v\n want %v", name, refSet().Name(), got, ref[name])
			}
			checkQ5_0Error(t, name, x, got)
		}
		// Truncation after +16.5, and the clamp at 31: with max = 16, d = -1 and id = -1.
		x := make([]float32, QK)
		x[0] = 16
		x[1], x[2], x[3], x[4] = 3.7, -3.7, 0.49, -15.9
		want := []int{0, 12, 20, 16, 31}
		got := make([]BlockQ5_0, 1)
		if err := QuantizeQ5_0(got, x); err != nil {
			t.Fatal(err)
		}
		if got[0].D != 0xbc00 {
			t.Errorf("truncation: d = %#04x, want 0xbc00 (-1.0)", got[0].D)
		}
		for j, w := range want {
			if q := q5Quant(&got[0], j); q != w {
				t.Errorf("truncation: x = %g quantized to q = %d, want %d", x[j], q, w)
			}
		}
		// The first element of largest magnitude sets the sign of d.
		if err := QuantizeQ5_0(got, inputs["signTie"][:QK]); err != nil {
			t.Fatal(err)
		}
		if d := FP16ToFP32(got[0].D); d != 5.0/16 {
			t.Errorf("signTie: d = %g, want %g (max = -5, the first)", d, 5.0/16)
		}
		// All zeros: d = -0 (0x8000, like ggml), every q = 16.
		if err := QuantizeQ5_0(got, make([]float32, QK)); err != nil {
			t.Fatal(err)
		}
		if got[0] != (BlockQ5_0{D: 0x8000, Qh: [4]uint8{0xff, 0xff, 0xff, 0xff}}) {
			t.Errorf("zeros: got %v, want d = 0x8000 and q = 16 everywhere", got[0])
		}
		// The stored scale at the fp16 edges (max is the first element, -amax: d > 0).
		for name, wantD := range map[string]uint16{"q5d65504": 0x7bff, "dInf": 0x7c00, "dUnderflow": 0, "q5dTiny": 0} {
			if err := QuantizeQ5_0(got, inputs[name]); err != nil {
				t.Fatal(err)
			}
			if got[0].D != wantD {
				t.Errorf("%s: d = %#04x, want %#04x", name, got[0].D, wantD)
			}
			if name == "q5dTiny" && got[0] != (BlockQ5_0{Qh: [4]uint8{0xff, 0xff, 0xff, 0xff}}) {
				t.Errorf("%s: %v, want q = 16 everywhere (1/d overflows)", name, got[0])
			}
		}
		// Poisoned blocks: d = fp16 NaN and q = 16 everywhere.
		p := make([]BlockQ5_0, 6)
		if err := QuantizeQ5_0(p, inputs["poisoned"]); err != nil {
			t.Fatal(err)
		}
		poison := BlockQ5_0{D: 0x7e00, Qh: [4]uint8{0xff, 0xff, 0xff, 0xff}}
		for b, poisoned := range []bool{false, true, true, true, false, true} {
			if (p[b] == poison) != poisoned {
				t.Errorf("poisoned: block %d = %v, want poisoned=%v", b, p[b], poisoned)
			}
		}
	})
}

// checkQ5_0Error checks |x - dequantized| <= d/2 + fp16 rounding of d, except for elements
// clamped at q = 31 (x/d + 16.5 >= 32: at most the block's max over 16 steps away).
func checkQ5_0Error(t *testing.T, name string, x []float32, q []BlockQ5_0) {
	t.Helper()
	deq := dequantQ5_0F64(q)
	for b := range q {
		vmax, amax := 0.0, 0.0
		for _, v := range x[b*QK : (b+1)*QK] {
			if a := math.Abs(float64(v)); a > amax {
				amax, vmax = a, float64(v)
			}
		}
		d := math.Abs(float64(float32(vmax) / -16))
		d16 := math.Abs(fp16F64(q[b].D))
		if math.IsNaN(amax) || math.IsInf(amax, 0) || math.IsInf(d16, 0) || d < math.Ldexp(1, -14) {
			continue
		}
		for j := 0; j < QK; j++ {
			i := b*QK + j
			qq := q5Quant(&q[b], j)
			if qq == 31 && math.Abs(float64(x[i])) > 15*d {
				continue // the clamp: only the sign opposite to max reaches 16 steps
			}
			bound := d + math.Abs(float64(qq-16))*math.Abs(d-d16) + 1e-6*d
			if e := math.Abs(float64(x[i]) - deq[i]); e > bound {
				t.Errorf("%s: x[%d] = %g dequantizes to %g: error %g > %g", name, i, x[i], deq[i], e, bound)
			}
		}
	}
}

// specialDs are fp16 scales at the edges: zeros, subnormals, the largest finite, Inf, NaN.
var specialDs = []uint16{0x0000, 0x8000, 0x0001, 0x03ff, 0x0400, 0x3c00, 0x7bff, 0xfbff, 0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00}

func TestDequantize(t *testing.T) {
	rng := newRand(3)
	q8 := randQ8_0(rng, 40)
	q5 := randQ5_0(rng, 40)
	for i, d := range specialDs {
		q8[i].D, q5[i].D = d, d
	}
	for i := len(specialDs); i < 30; i++ { // arbitrary bits, including every class
		q8[i].D, q5[i].D = uint16(rng.Uint32()), uint16(rng.Uint32())
	}
	forEachSet(t, "DequantizeQ8_0", func(t *testing.T, s *kern.Set) {
		for _, nb := range []int{1, 2, 3, 7, 17, 40} {
			got := make([]float32, nb*QK)
			if err := DequantizeQ8_0(got, q8[:nb]); err != nil {
				t.Fatal(err)
			}
			for i, want := range dequantQ8_0F64(q8[:nb]) {
				if !sameFloat(got[i], float32(want)) {
					t.Fatalf("Q8_0 %d blocks: [%d] (d %#04x, q %d) = %g, want %g", nb, i, q8[i/QK].D, q8[i/QK].Qs[i%QK], got[i], want)
				}
			}
		}
	})
	forEachSet(t, "DequantizeQ5_0", func(t *testing.T, s *kern.Set) {
		for _, nb := range []int{1, 2, 3, 7, 17, 40} {
			got := make([]float32, nb*QK)
			if err := DequantizeQ5_0(got, q5[:nb]); err != nil {
				t.Fatal(err)
			}
			for i, want := range dequantQ5_0F64(q5[:nb]) {
				if !sameFloat(got[i], float32(want)) {
					t.Fatalf("Q5_0 %d blocks: [%d] (d %#04x, q %d) = %g, want %g", nb, i, q5[i/QK].D, q5Quant(&q5[i/QK], i%QK), got[i], want)
				}
			}
		}
	})
	// Round trip: quantize then dequantize keeps the block's poison and the quantizer's values.
	forEachSet(t, "DequantizeQ5_0", func(t *testing.T, s *kern.Set) {
		x := quantInputs()["poisoned"]
		b := make([]BlockQ5_0, len(x)/QK)
		y := make([]float32, len(x))
		if err := QuantizeQ5_0(b, x); err != nil {
			t.Fatal(err)
		}
		if err := DequantizeQ5_0(y, b); err != nil {
			t.Fatal(err)
		}
		for i, v := range y {
			if poisoned := b[i/QK].D == 0x7e00; isNaN32(v) != poisoned {
				t.Fatalf("round trip: y[%d] = %g, block poisoned=%v", i, v, poisoned)
			}
		}
	})
}

// ---- GEMV ----

// gemvShapes are rows x cols: every row count 1..17 (SIMD kernels unroll by 2, 4 or 8 rows),
// then odd and model-sized ones.
func gemvShapes() [][2]int {
	var s [][2]int
	for r := 1; r <= 17; r++ {
		s = append(s, [2]int{r, 32 * (1 + r%4)})
	}
	return append(s, [2]int{33, 96}, [2]int{127, 160}, [2]int{128, 896}, [2]int{24, 4864})
}

// checkGemvResult compares y with the float64 reference: |y - ref| <= tol*mag always, and the
// plain relative error |y - ref|/|ref| <= tol where the row does not cancel (|ref| >= mag/4).
func checkGemvResult(t *testing.T, what string, y []float32, ref, mag []float64) {
	t.Helper()
	for r := range y {
		if !within(y[r], ref[r], gemvTol, mag[r]) {
			t.Errorf("%s: y[%d] = %g, want %g (error %.3g of sum|w*x| %g)", what, r, y[r], ref[r], math.Abs(float64(y[r])-ref[r])/mag[r], mag[r])
			return
		}
		if math.Abs(ref[r]) >= mag[r]/4 && relErr(y[r], ref[r]) > gemvTol {
			t.Errorf("%s: y[%d] = %g, want %g: relative error %.3g", what, r, y[r], ref[r], relErr(y[r], ref[r]))
			return
		}
	}
}

// nonNegative makes blocks' scales positive and quants >= 0 (Q5_0: q >= 16), so rows do not
// cancel and the plain relative error check applies to every row.
func nonNegativeQ8_0(bs []BlockQ8_0) {
	for i := range bs {
		bs[i].D &^= 0x8000
		for j, q := range bs[i].Qs {
			if q < 0 {
				bs[i].Qs[j] = -q
			}
		}
	}
}

func nonNegativeQ5_0(bs []BlockQ5_0) {
	for i := range bs {
		bs[i].D &^= 0x8000
		bs[i].Qh = [4]uint8{0xff, 0xff, 0xff, 0xff}
	}
}

func TestGemvQ8_0(t *testing.T) {
	rng := newRand(4)
	forEachSet(t, "GemvQ8_0", func(t *testing.T, s *kern.Set) {
		for i, sh := range gemvShapes() {
			rows, cols := sh[0], sh[1]
			w, x := randQ8_0(rng, rows*cols/QK), randQ8_0(rng, cols/QK)
			if i%3 == 0 {
				nonNegativeQ8_0(w)
				nonNegativeQ8_0(x)
			}
			var bias []float32
			if i%2 == 1 {
				bias = randF32(rng, rows, 1)
			}
			name := fmt.Sprintf("%dx%d bias=%v", rows, cols, bias != nil)
			y := make([]float32, rows)
			if err := GemvQ8_0Bias(y, w, x, bias, rows, cols); err != nil {
				t.Fatal(err)
			}
			var bias64 []float64
			if bias != nil {
				bias64 = f64s(bias)
			}
			ref, mag := gemvF64(dequantQ8_0F64(w), dequantQ8_0F64(x), bias64, rows, cols)
			checkGemvResult(t, name, y, ref, mag)
			// Against the reference kernel set.
			yr := make([]float32, rows)
			withSet(refSet(), func() {
				if err := GemvQ8_0Bias(yr, w, x, bias, rows, cols); err != nil {
					t.Fatal(err)
				}
			})
			wantRefBits(t, s, name, y, yr)
			for r := range y {
				if !within(y[r], float64(yr[r]), gemvTol, mag[r]) {
					t.Errorf("%s: y[%d] = %g, %s gives %g", name, r, y[r], refSet().Name(), yr[r])
					break
				}
			}
			// Without bias the plain entry point gives the same.
			if bias == nil {
				y2 := make([]float32, rows)
				if err := GemvQ8_0(y2, w, x, rows, cols); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(f32Bytes(y2), f32Bytes(y)) {
					t.Errorf("%s: GemvQ8_0 and GemvQ8_0Bias(nil) differ", name)
				}
			}
			checkFusedQ8_0(t, name, w, bias, rng, rows, cols)
		}
	})
}

func TestGemvQ5_0(t *testing.T) {
	rng := newRand(5)
	forEachSet(t, "GemvQ5_0", func(t *testing.T, s *kern.Set) {
		for i, sh := range gemvShapes() {
			rows, cols := sh[0], sh[1]
			w, x := randQ5_0(rng, rows*cols/QK), randQ8_0(rng, cols/QK)
			if i%3 == 0 {
				nonNegativeQ5_0(w)
				nonNegativeQ8_0(x)
			}
			var bias []float32
			if i%2 == 1 {
				bias = randF32(rng, rows, 1)
			}
			name := fmt.Sprintf("%dx%d bias=%v", rows, cols, bias != nil)
			y := make([]float32, rows)
			if err := GemvQ5_0Bias(y, w, x, bias, rows, cols); err != nil {
				t.Fatal(err)
			}
			var bias64 []float64
			if bias != nil {
				bias64 = f64s(bias)
			}
			ref, mag := gemvF64(dequantQ5_0F64(w), dequantQ8_0F64(x), bias64, rows, cols)
			checkGemvResult(t, name, y, ref, mag)
			yr := make([]float32, rows)
			withSet(refSet(), func() {
				if err := GemvQ5_0Bias(yr, w, x, bias, rows, cols); err != nil {
					t.Fatal(err)
				}
			})
			wantRefBits(t, s, name, y, yr)
			for r := range y {
				if !within(y[r], float64(yr[r]), gemvTol, mag[r]) {
					t.Errorf("%s: y[%d] = %g, %s gives %g", name, r, y[r], refSet().Name(), yr[r])
					break
				}
			}
			if bias == nil {
				y2 := make([]float32, rows)
				if err := GemvQ5_0(y2, w, x, rows, cols); err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(f32Bytes(y2), f32Bytes(y)) {
					t.Errorf("%s: GemvQ5_0 and GemvQ5_0Bias(nil) differ", name)
				}
			}
			checkFusedQ5_0(t, name, w, bias, rng, rows, cols)
		}
	})
}

// f32Bytes views floats as bytes (bit-identity checks that also tell NaN payloads apart).
func f32Bytes(s []float32) []byte {
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), 4*len(s))
}

// checkFusedQ8_0 checks GemvQ8_0F32 is exactly QuantizeQ8_0 followed by GemvQ8_0Bias, and
// leaves the quantized activations in scratch.
func checkFusedQ8_0(t *testing.T, name string, w []BlockQ8_0, bias []float32, rng *rand.Rand, rows, cols int) {
	t.Helper()
	xf := randF32(rng, cols, 3)
	xq := make([]BlockQ8_0, cols/QK)
	want := make([]float32, rows)
	if err := QuantizeQ8_0(xq, xf); err != nil {
		t.Fatal(err)
	}
	if err := GemvQ8_0Bias(want, w, xq, bias, rows, cols); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows)
	scratch := make([]BlockQ8_0, cols/QK+3) // longer than needed is allowed
	if err := GemvQ8_0F32(got, w, xf, bias, scratch, rows, cols); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f32Bytes(got), f32Bytes(want)) {
		t.Errorf("%s fused: GemvQ8_0F32 = %v, Quantize+Gemv = %v", name, got, want)
	}
	if !bytes.Equal(blockBytes(scratch[:cols/QK]), blockBytes(xq)) || scratch[cols/QK] != (BlockQ8_0{}) {
		t.Errorf("%s fused: scratch does not hold exactly QuantizeQ8_0(x)", name)
	}
}

// checkFusedQ5_0 is checkFusedQ8_0 for Q5_0 weights.
func checkFusedQ5_0(t *testing.T, name string, w []BlockQ5_0, bias []float32, rng *rand.Rand, rows, cols int) {
	t.Helper()
	xf := randF32(rng, cols, 3)
	xq := make([]BlockQ8_0, cols/QK)
	want := make([]float32, rows)
	if err := QuantizeQ8_0(xq, xf); err != nil {
		t.Fatal(err)
	}
	if err := GemvQ5_0Bias(want, w, xq, bias, rows, cols); err != nil {
		t.Fatal(err)
	}
	got := make([]float32, rows)
	scratch := make([]BlockQ8_0, cols/QK)
	if err := GemvQ5_0F32(got, w, xf, bias, scratch, rows, cols); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(f32Bytes(got), f32Bytes(want)) {
		t.Errorf("%s fused: GemvQ5_0F32 = %v, Quantize+Gemv = %v", name, got, want)
	}
	if !bytes.Equal(blockBytes(scratch), blockBytes(xq)) {
		t.Errorf("%s fused: scratch does not hold exactly QuantizeQ8_0(x)", name)
	}
}

// TestGemvSpecial covers NaN propagation from poisoned blocks, zero activations, and fp16
// extremes in both operands.
func TestGemvSpecial(t *testing.T) {
	rng := newRand(6)
	const rows, cols = 9, 160
	forEachSet(t, "GemvQ8_0", func(t *testing.T, s *kern.Set) {
		w8, w5, x := randQ8_0(rng, rows*cols/QK), randQ5_0(rng, rows*cols/QK), randQ8_0(rng, cols/QK)
		bias := randF32(rng, rows, 1)
		y8, y5 := make([]float32, rows), make([]float32, rows)
		run := func() {
			t.Helper()
			if err := GemvQ8_0Bias(y8, w8, x, bias, rows, cols); err != nil {
				t.Fatal(err)
			}
			if err := GemvQ5_0Bias(y5, w5, x, bias, rows, cols); err != nil {
				t.Fatal(err)
			}
		}
		// A poisoned weight block poisons its row only.
		w8[3*cols/QK+2] = BlockQ8_0{D: 0x7e00}
		w5[5*cols/QK+4] = BlockQ5_0{D: 0x7e00, Qh: [4]uint8{0xff, 0xff, 0xff, 0xff}}
		run()
		for r := 0; r < rows; r++ {
			if isNaN32(y8[r]) != (r == 3) || isNaN32(y5[r]) != (r == 5) {
				t.Errorf("poisoned weight: row %d: Q8_0 %g, Q5_0 %g", r, y8[r], y5[r])
			}
		}
		// A poisoned activation block poisons every row.
		x[1] = BlockQ8_0{D: 0x7e00}
		run()
		for r := 0; r < rows; r++ {
			if !isNaN32(y8[r]) || !isNaN32(y5[r]) {
				t.Errorf("poisoned x: row %d: Q8_0 %g, Q5_0 %g, want NaN", r, y8[r], y5[r])
			}
		}
		// Zero activations give exactly the bias.
		for i := range x {
			x[i] = BlockQ8_0{D: randD(rng)}
		}
		w8[3*cols/QK+2].D = 0x3c00
		w5[5*cols/QK+4].D = 0x3c00
		run()
		for r := 0; r < rows; r++ {
			if y8[r] != bias[r] || y5[r] != bias[r] {
				t.Errorf("zero x: row %d: Q8_0 %g, Q5_0 %g, want bias %g", r, y8[r], y5[r], bias[r])
			}
		}
		// fp16 extremes: the largest finite scale and subnormal scales on both sides.
		for _, pair := range [][2]uint16{{0x7bff, 0x7bff}, {0x0001, 0x03ff}, {0x7bff, 0x0001}, {0x8001, 0x7bff}} {
			for i := range w8 {
				w8[i] = randQ8_0(rng, 1)[0]
				w8[i].D = pair[0]
				w5[i] = randQ5_0(rng, 1)[0]
				w5[i].D = pair[0]
			}
			for i := range x {
				x[i] = randQ8_0(rng, 1)[0]
				x[i].D = pair[1]
			}
			run()
			b64 := f64s(bias)
			ref8, mag8 := gemvF64(dequantQ8_0F64(w8), dequantQ8_0F64(x), b64, rows, cols)
			ref5, mag5 := gemvF64(dequantQ5_0F64(w5), dequantQ8_0F64(x), b64, rows, cols)
			checkGemvResult(t, fmt.Sprintf("Q8_0 d=%#04x,%#04x", pair[0], pair[1]), y8, ref8, mag8)
			checkGemvResult(t, fmt.Sprintf("Q5_0 d=%#04x,%#04x", pair[0], pair[1]), y5, ref5, mag5)
		}
	})
}

func TestGemvF32(t *testing.T) {
	rng := newRand(7)
	// FP32 rows need not be whole blocks: every tail of the 4-, 8- and 16-wide loops.
	shapes := gemvShapes()
	for _, c := range []int{1, 2, 3, 5, 7, 9, 15, 17, 31, 33, 47, 63, 65, 100, 127, 129, 200} {
		shapes = append(shapes, [2]int{1 + c%6, c})
	}
	forEachSet(t, "GemvF32", func(t *testing.T, s *kern.Set) {
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			w, x := randF32(rng, rows*cols, 1), randF32(rng, cols, 1)
			y := make([]float32, rows)
			if err := GemvF32(y, w, x, rows, cols); err != nil {
				t.Fatal(err)
			}
			name := fmt.Sprintf("%dx%d", rows, cols)
			ref, mag := gemvF64(f64s(w), f64s(x), nil, rows, cols)
			checkGemvResult(t, name, y, ref, mag)
			yr := make([]float32, rows)
			withSet(refSet(), func() { mustOK(t, GemvF32(yr, w, x, rows, cols)) })
			wantRefBits(t, s, name, y, yr)
			// gonum's Sgemv is a second, independent float32 reference.
			ys := make([]float32, rows)
			blas32.Gemv(blas.NoTrans, 1, blas32.General{Rows: rows, Cols: cols, Stride: cols, Data: w},
				blas32.Vector{N: cols, Inc: 1, Data: x}, 0, blas32.Vector{N: rows, Inc: 1, Data: ys})
			for r := range y {
				if !within(y[r], float64(ys[r]), gemvTol, mag[r]) {
					t.Errorf("%s: y[%d] = %g, gonum Sgemv gives %g", name, r, y[r], ys[r])
					break
				}
			}
		}
	})
}

// ---- RMSNorm and softmax ----

func TestRMSNorm(t *testing.T) {
	rng := newRand(8)
	forEachSet(t, "RMSNorm", func(t *testing.T, s *kern.Set) {
		for _, c := range []struct {
			tokens, dim int
			eps, scale  float32
		}{
			{1, 1, 1e-6, 4}, {3, 7, 1e-6, 4}, {2, 16, 1e-5, 4}, {5, 33, 1e-6, 4}, {1, 64, 1e-6, 4},
			{4, 100, 1e-6, 4}, {3, 896, 1e-6, 4}, {2, 4864, 1e-6, 4},
			{3, 64, 1e-5, 3e-3}, {2, 896, 1e-6, 1e-3}, // mean(x^2) near eps: eps must count exactly once
		} {
			x := randF32(rng, c.tokens*c.dim, c.scale)
			w := randF32(rng, c.dim, 2)
			if c.tokens > 1 {
				clear(x[c.dim : 2*c.dim]) // an all-zero token: out = 0, not NaN
			}
			out := make([]float32, len(x))
			if err := RMSNorm(out, x, w, c.tokens, c.dim, c.eps); err != nil {
				t.Fatal(err)
			}
			want := make([]float32, len(x))
			withSet(refSet(), func() { mustOK(t, RMSNorm(want, x, w, c.tokens, c.dim, c.eps)) })
			wantRefBits(t, s, fmt.Sprintf("%dx%d", c.tokens, c.dim), out, want)
			ref := rmsnormF64(x, w, c.tokens, c.dim, c.eps)
			worst, at := 0.0, 0
			for i := range out {
				if e := relErr(out[i], ref[i]); e > worst {
					worst, at = e, i
				}
			}
			if worst > elemTol {
				t.Errorf("%dx%d: out[%d] = %g, want %g: relative error %.3g > %g", c.tokens, c.dim, at, out[at], ref[at], worst, elemTol)
			}
		}
	})
}

// softmaxRow returns cols values on a grid of 2^-12 in [-8, 8), so that x - max is exact in
// float32 and the only errors measured are the kernel's exp, sum and division.
func softmaxRow(rng *rand.Rand, cols int) []float32 {
	x := make([]float32, cols)
	for i := range x {
		x[i] = float32(rng.IntN(1<<16)-1<<15) / (1 << 12)
	}
	return x
}

func TestSoftmax(t *testing.T) {
	rng := newRand(9)
	forEachSet(t, "Softmax", func(t *testing.T, s *kern.Set) {
		for _, cols := range []int{1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 896} {
			for _, masked := range []bool{false, true} {
				rows := 1 + cols%4
				x := make([]float32, 0, rows*cols)
				for r := 0; r < rows; r++ {
					x = append(x, softmaxRow(rng, cols)...)
				}
				var valid []int32
				if masked {
					valid = make([]int32, rows)
					for r := range valid {
						valid[r] = int32(1 + rng.IntN(cols))
					}
					valid[0] = int32(cols)
					valid[rows-1] = 1
				}
				in := append([]float32(nil), x...)
				var err error
				if masked {
					err = SoftmaxMasked(x, rows, cols, valid)
				} else {
					err = Softmax(x, rows, cols)
				}
				if err != nil {
					t.Fatal(err)
				}
				want := append([]float32(nil), in...)
				withSet(refSet(), func() {
					if masked {
						mustOK(t, SoftmaxMasked(want, rows, cols, valid))
					} else {
						mustOK(t, Softmax(want, rows, cols))
					}
				})
				wantRefBits(t, s, fmt.Sprintf("cols %d masked=%v", cols, masked), x, want)
				for r := 0; r < rows; r++ {
					n := cols
					if masked {
						n = int(valid[r])
					}
					ref := softmaxF64(in[r*cols:(r+1)*cols], n)
					for i := 0; i < cols; i++ {
						got := x[r*cols+i]
						if i >= n && got != 0 {
							t.Fatalf("cols %d row %d valid %d: x[%d] = %g past the mask, want 0", cols, r, n, i, got)
						}
						if e := relErr(got, ref[i]); e > elemTol {
							t.Fatalf("cols %d row %d masked=%v: x[%d] = %g, want %g: relative error %.3g", cols, r, masked, i, got, ref[i], e)
						}
					}
				}
			}
		}
		// Arbitrary floats over a wide range: x - max is now inexact in float32, and the kernels
		// must recover that rounding error to stay within 1e-6 of float64.
		for _, cols := range []int{5, 64, 333} {
			x := randF32(rng, 2*cols, 40)
			in := append([]float32(nil), x...)
			mustOK(t, Softmax(x, 2, cols))
			want := append([]float32(nil), in...)
			withSet(refSet(), func() { mustOK(t, Softmax(want, 2, cols)) })
			wantRefBits(t, s, fmt.Sprintf("inexact cols %d", cols), x, want)
			for r := 0; r < 2; r++ {
				ref := softmaxF64(in[r*cols:(r+1)*cols], cols)
				for i, v := range x[r*cols : (r+1)*cols] {
					if ref[i] < 1e-30 {
						continue // below float32's normal range only absolute accuracy is promised
					}
					if e := relErr(v, ref[i]); e > elemTol {
						t.Fatalf("inexact cols %d row %d: x[%d] = %g, want %g: relative error %.3g", cols, r, i, v, ref[i], e)
					}
				}
			}
		}
		// A wide range: entries far below the max underflow to 0 instead of going negative or NaN,
		// and -Inf entries (a common mask) give exactly 0.
		x := []float32{0, -10, -50, -100, -1000, float32(math.Inf(-1)), 3, 2.5}
		in := append([]float32(nil), x...)
		if err := Softmax(x, 1, len(x)); err != nil {
			t.Fatal(err)
		}
		ref := softmaxF64(in, len(in))
		for i, got := range x {
			if ref[i] < 1e-30 {
				if got < 0 || got > 1e-30 {
					t.Errorf("wide: x[%d] = %g, want about %g", i, got, ref[i])
				}
				continue
			}
			if e := relErr(got, ref[i]); e > elemTol {
				t.Errorf("wide: x[%d] = %g, want %g: relative error %.3g", i, got, ref[i], e)
			}
		}
	})
}

// ---- StreamRead ----

func TestStreamRead(t *testing.T) {
	rng := newRand(10)
	forEachSet(t, "StreamRead", func(t *testing.T, s *kern.Set) {
		for _, n := range []int{0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 63, 64, 65, 127, 128, 129, 255, 1000, 4099} {
			// Small integers: every partial sum is exact, whatever the kernel's order.
			x, want := make([]float32, n), float32(0)
			for i := range x {
				x[i] = float32(rng.IntN(7) - 3)
				want += x[i]
			}
			if got := streamSum(x); got != want {
				t.Errorf("n=%d: StreamRead = %g, want %g", n, got, want)
			}
			// Non-integers: a ref-variant port must sum in the reference's order.
			y := randF32(rng, n, 1)
			var yr float32
			withSet(refSet(), func() { yr = streamSum(y) })
			wantRefBits(t, s, fmt.Sprintf("n=%d", n), []float32{streamSum(y)}, []float32{yr})
		}
		if got := streamSum(nil); got != 0 {
			t.Errorf("StreamRead(nil) = %g, want 0", got)
		}
	})
}

// ---- argument checks ----

func TestArgErrors(t *testing.T) {
	f := func(n int) []float32 { return make([]float32, n) }
	q8 := func(n int) []BlockQ8_0 { return make([]BlockQ8_0, n) }
	q5 := func(n int) []BlockQ5_0 { return make([]BlockQ5_0, n) }
	const big = math.MaxInt/32 + 1
	// Overlapping views of one buffer.
	buf := f(4096)
	q8at := func(off, n int) []BlockQ8_0 { return unsafe.Slice((*BlockQ8_0)(unsafe.Pointer(&buf[off])), n) }
	q5at := func(off, n int) []BlockQ5_0 { return unsafe.Slice((*BlockQ5_0)(unsafe.Pointer(&buf[off])), n) }
	i32at := func(off, n int) []int32 { return unsafe.Slice((*int32)(unsafe.Pointer(&buf[off])), n) }
	nan := float32(math.NaN())
	overlapValid := i32at(6, 2)
	overlapValid[0], overlapValid[1] = 2, 3 // in range, so the overlap is what gets refused

	cases := []struct {
		err      error
		fn, arg  string
		contains []string
	}{
		{QuantizeQ8_0(q8(1), nil), "QuantizeQ8_0", "src", []string{"nil", "multiple of 32"}},
		{QuantizeQ8_0(q8(1), f(0)), "QuantizeQ8_0", "src", []string{"length 0", "multiple of 32"}},
		{QuantizeQ8_0(q8(1), f(33)), "QuantizeQ8_0", "src", []string{"length 33", "multiple of 32"}},
		{QuantizeQ8_0(nil, f(64)), "QuantizeQ8_0", "dst", []string{"nil", "len(src)/32 = 2 blocks"}},
		{QuantizeQ8_0(q8(3), f(64)), "QuantizeQ8_0", "dst", []string{"length 3", "len(src)/32 = 2 blocks"}},
		{QuantizeQ8_0(q8at(16, 2), buf[:64]), "QuantizeQ8_0", "dst", []string{"overlaps src"}},
		{QuantizeQ5_0(q5(1), f(31)), "QuantizeQ5_0", "src", []string{"length 31", "multiple of 32"}},
		{QuantizeQ5_0(q5(1), f(64)), "QuantizeQ5_0", "dst", []string{"length 1", "len(src)/32 = 2 blocks"}},
		{QuantizeQ5_0(q5at(0, 1), buf[:32]), "QuantizeQ5_0", "dst", []string{"overlaps src"}},

		{DequantizeQ8_0(f(32), nil), "DequantizeQ8_0", "src", []string{"nil"}},
		{DequantizeQ8_0(f(32), q8(0)), "DequantizeQ8_0", "src", []string{"empty"}},
		{DequantizeQ8_0(nil, q8(2)), "DequantizeQ8_0", "dst", []string{"nil", "len(src)*32 = 64 floats"}},
		{DequantizeQ8_0(f(63), q8(2)), "DequantizeQ8_0", "dst", []string{"length 63", "len(src)*32 = 64 floats"}},
		{DequantizeQ8_0(buf[:64], q8at(40, 2)), "DequantizeQ8_0", "dst", []string{"overlaps src"}},
		{DequantizeQ5_0(f(33), q5(1)), "DequantizeQ5_0", "dst", []string{"length 33", "len(src)*32 = 32 floats"}},
		{DequantizeQ5_0(buf[:32], q5at(0, 1)), "DequantizeQ5_0", "dst", []string{"overlaps src"}},

		{GemvQ8_0(f(2), q8(2), q8(1), 0, 32), "GemvQ8_0", "rows", []string{"positive", "got 0"}},
		{GemvQ8_0(f(2), q8(2), q8(1), -3, 32), "GemvQ8_0", "rows", []string{"positive", "got -3"}},
		{GemvQ8_0(f(2), q8(2), q8(1), 2, 0), "GemvQ8_0", "cols", []string{"multiple of 32", "got 0"}},
		{GemvQ8_0(f(2), q8(2), q8(1), 2, 48), "GemvQ8_0", "cols", []string{"multiple of 32", "got 48"}},
		{GemvQ8_0(f(2), q8(2), q8(1), 2, -32), "GemvQ8_0", "cols", []string{"multiple of 32", "got -32"}},
		{GemvQ8_0(f(2), q8(2), q8(1), big, 64), "GemvQ8_0", "rows", []string{"overflows", fmt.Sprint(big)}},
		{GemvQ8_0(nil, q8(2), q8(1), 2, 32), "GemvQ8_0", "y", []string{"nil", "rows = 2 floats"}},
		{GemvQ8_0(f(3), q8(2), q8(1), 2, 32), "GemvQ8_0", "y", []string{"length 3", "rows = 2 floats"}},
		{GemvQ8_0(f(2), nil, q8(1), 2, 32), "GemvQ8_0", "w", []string{"nil", "rows*cols/32 = 2 blocks"}},
		{GemvQ8_0(f(896), q8(100), q8(28), 896, 896), "GemvQ8_0", "w", []string{"length 100", "rows*cols/32 = 25088 blocks"}},
		{GemvQ8_0(f(2), q8(4), q8(1), 2, 64), "GemvQ8_0", "x", []string{"length 1", "cols/32 = 2 blocks"}},
		{GemvQ8_0(buf[:2], q8at(0, 2), q8(1), 2, 32), "GemvQ8_0", "y", []string{"overlaps w"}},
		{GemvQ8_0(buf[8:10], q8(2), q8at(0, 1), 2, 32), "GemvQ8_0", "y", []string{"overlaps x"}},
		{GemvQ8_0Bias(f(2), q8(2), q8(1), f(3), 2, 32), "GemvQ8_0Bias", "bias", []string{"length 3", "rows = 2 floats"}},
		{GemvQ8_0Bias(buf[:2], q8(2), q8(1), buf[:2], 2, 32), "GemvQ8_0Bias", "y", []string{"overlaps bias"}},
		{GemvQ5_0(f(2), q5(3), q8(1), 2, 32), "GemvQ5_0", "w", []string{"length 3", "rows*cols/32 = 2 blocks"}},
		{GemvQ5_0(f(2), q5(2), q8(1), 2, 33), "GemvQ5_0", "cols", []string{"multiple of 32", "got 33"}},
		{GemvQ5_0(buf[:2], q5at(0, 2), q8(1), 2, 32), "GemvQ5_0", "y", []string{"overlaps w"}},
		{GemvQ5_0Bias(f(2), q5(2), q8(1), f(1), 2, 32), "GemvQ5_0Bias", "bias", []string{"length 1", "rows = 2 floats"}},

		{GemvQ8_0F32(f(2), q8(2), f(32), nil, q8(1), 0, 32), "GemvQ8_0F32", "rows", []string{"got 0"}},
		{GemvQ8_0F32(f(2), q8(2), f(32), nil, q8(1), 2, 40), "GemvQ8_0F32", "cols", []string{"got 40"}},
		{GemvQ8_0F32(f(2), q8(2), f(33), nil, q8(1), 2, 32), "GemvQ8_0F32", "x", []string{"length 33", "cols = 32 floats"}},
		{GemvQ8_0F32(f(2), q8(2), f(32), nil, nil, 2, 32), "GemvQ8_0F32", "scratch", []string{"nil", "at least cols/32 = 1 blocks"}},
		{GemvQ8_0F32(f(2), q8(4), f(64), nil, q8(1), 2, 64), "GemvQ8_0F32", "scratch", []string{"length 1", "at least cols/32 = 2 blocks"}},
		{GemvQ8_0F32(f(2), q8(2), f(32), f(1), q8(1), 2, 32), "GemvQ8_0F32", "bias", []string{"length 1", "rows = 2 floats"}},
		{GemvQ8_0F32(f(2), q8(3), f(32), nil, q8(1), 2, 32), "GemvQ8_0F32", "w", []string{"length 3", "rows*cols/32 = 2 blocks"}},
		{GemvQ8_0F32(buf[:2], q8(2), buf[:32], nil, q8(1), 2, 32), "GemvQ8_0F32", "y", []string{"overlaps x"}},
		{GemvQ8_0F32(buf[100:102], q8(2), f(32), nil, q8at(95, 1), 2, 32), "GemvQ8_0F32", "y", []string{"overlaps scratch"}},
		{GemvQ8_0F32(f(2), q8(2), buf[:32], nil, q8at(20, 1), 2, 32), "GemvQ8_0F32", "scratch", []string{"overlaps x"}},
		{GemvQ8_0F32(f(2), q8at(0, 2), f(32), nil, q8at(10, 1), 2, 32), "GemvQ8_0F32", "scratch", []string{"overlaps w"}},
		{GemvQ8_0F32(f(2), q8(2), f(32), buf[:2], q8at(0, 1), 2, 32), "GemvQ8_0F32", "scratch", []string{"overlaps bias"}},
		{GemvQ5_0F32(f(2), q5(2), f(32), nil, q8(0), 2, 32), "GemvQ5_0F32", "scratch", []string{"length 0", "at least cols/32 = 1 blocks"}},
		{GemvQ5_0F32(f(2), q5at(0, 2), f(32), nil, q8at(4, 1), 2, 32), "GemvQ5_0F32", "scratch", []string{"overlaps w"}},

		{GemvF32(f(2), f(64), f(32), 2, 0), "GemvF32", "cols", []string{"positive", "got 0"}},
		{GemvF32(f(2), f(34), f(16), 2, 16), "GemvF32", "w", []string{"length 34", "rows*cols = 32 floats"}},
		{GemvF32(f(2), f(64), f(32), -1, 32), "GemvF32", "rows", []string{"got -1"}},
		{GemvF32(f(2), f(64), f(32), big, 64), "GemvF32", "rows", []string{"overflows"}},
		{GemvF32(f(2), f(63), f(32), 2, 32), "GemvF32", "w", []string{"length 63", "rows*cols = 64 floats"}},
		{GemvF32(f(2), f(64), nil, 2, 32), "GemvF32", "x", []string{"nil", "cols = 32 floats"}},
		{GemvF32(f(1), f(64), f(32), 2, 32), "GemvF32", "y", []string{"length 1", "rows = 2 floats"}},
		{GemvF32(buf[:2], buf[:64], f(32), 2, 32), "GemvF32", "y", []string{"overlaps w"}},
		{GemvF32(buf[:2], f(64), buf[1:33], 2, 32), "GemvF32", "y", []string{"overlaps x"}},

		{RMSNorm(f(8), f(8), f(4), 0, 4, 1e-6), "RMSNorm", "tokens", []string{"got 0"}},
		{RMSNorm(f(8), f(8), f(4), 2, -4, 1e-6), "RMSNorm", "dim", []string{"got -4"}},
		{RMSNorm(f(8), f(8), f(4), big, 64, 1e-6), "RMSNorm", "tokens", []string{"overflows"}},
		{RMSNorm(f(8), f(8), f(4), 2, 4, 0), "RMSNorm", "eps", []string{"positive", "got 0"}},
		{RMSNorm(f(8), f(8), f(4), 2, 4, -1e-6), "RMSNorm", "eps", []string{"positive", "got -1e-06"}},
		{RMSNorm(f(8), f(8), f(4), 2, 4, nan), "RMSNorm", "eps", []string{"got NaN"}},
		{RMSNorm(f(8), f(8), f(4), 2, 4, float32(math.Inf(1))), "RMSNorm", "eps", []string{"finite", "got +Inf"}},
		{RMSNorm(f(7), f(8), f(4), 2, 4, 1e-6), "RMSNorm", "out", []string{"length 7", "tokens*dim = 8 floats"}},
		{RMSNorm(f(8), nil, f(4), 2, 4, 1e-6), "RMSNorm", "x", []string{"nil", "tokens*dim = 8 floats"}},
		{RMSNorm(f(8), f(8), f(5), 2, 4, 1e-6), "RMSNorm", "weight", []string{"length 5", "dim = 4 floats"}},
		{RMSNorm(buf[:8], buf[:8], f(4), 2, 4, 1e-6), "RMSNorm", "out", []string{"overlaps x"}},
		{RMSNorm(buf[:8], f(8), buf[7:11], 2, 4, 1e-6), "RMSNorm", "out", []string{"overlaps weight"}},

		{Softmax(f(8), 0, 8), "Softmax", "rows", []string{"got 0"}},
		{Softmax(f(8), 1, -8), "Softmax", "cols", []string{"got -8"}},
		{Softmax(f(8), big, 64), "Softmax", "rows", []string{"overflows"}},
		{Softmax(nil, 1, 8), "Softmax", "x", []string{"nil", "rows*cols = 8 floats"}},
		{Softmax(f(9), 1, 8), "Softmax", "x", []string{"length 9", "rows*cols = 8 floats"}},
		{SoftmaxMasked(f(8), 2, 4, []int32{1}), "SoftmaxMasked", "valid", []string{"length 1", "rows = 2 entries"}},
		{SoftmaxMasked(f(8), 2, 4, []int32{1, 0}), "SoftmaxMasked", "valid", []string{"valid[1] = 0", "1..cols = 1..4"}},
		{SoftmaxMasked(f(8), 2, 4, []int32{5, 1}), "SoftmaxMasked", "valid", []string{"valid[0] = 5", "1..cols = 1..4"}},
		{SoftmaxMasked(f(8), 2, 4, []int32{-1, 1}), "SoftmaxMasked", "valid", []string{"valid[0] = -1"}},
		{SoftmaxMasked(buf[:8], 2, 4, overlapValid), "SoftmaxMasked", "x", []string{"overlaps valid"}},
	}
	for i, c := range cases {
		if c.err == nil {
			t.Errorf("case %d (%s %s): no error", i, c.fn, c.arg)
			continue
		}
		wantArgErr(t, c.err, c.fn, c.arg, c.contains...)
	}
}

// ---- allocations ----

func TestNoAllocs(t *testing.T) {
	rng := newRand(11)
	const rows, cols = 5, 96
	xf := randF32(rng, cols, 1)
	w8, w5, x := randQ8_0(rng, rows*cols/QK), randQ5_0(rng, rows*cols/QK), randQ8_0(rng, cols/QK)
	bias, y, scratch := randF32(rng, rows, 1), make([]float32, rows), make([]BlockQ8_0, cols/QK)
	q8, q5, deq := make([]BlockQ8_0, cols/QK), make([]BlockQ5_0, cols/QK), make([]float32, cols)
	wf, norm, sm := randF32(rng, rows*cols, 1), make([]float32, rows*cols), randF32(rng, rows*cols, 1)
	valid := []int32{1, 2, 96, 50, 7}
	forEachSet(t, "QuantizeQ8_0", func(t *testing.T, s *kern.Set) {
		for _, c := range []struct {
			name, op string // the public function and the kern.Set field it runs
			fn       func()
		}{
			{"QuantizeQ8_0", "QuantizeQ8_0", func() { QuantizeQ8_0(q8, xf) }},
			{"QuantizeQ5_0", "QuantizeQ5_0", func() { QuantizeQ5_0(q5, xf) }},
			{"DequantizeQ8_0", "DequantizeQ8_0", func() { DequantizeQ8_0(deq, q8) }},
			{"DequantizeQ5_0", "DequantizeQ5_0", func() { DequantizeQ5_0(deq, q5) }},
			{"GemvQ8_0", "GemvQ8_0", func() { GemvQ8_0(y, w8, x, rows, cols) }},
			{"GemvQ8_0Bias", "GemvQ8_0", func() { GemvQ8_0Bias(y, w8, x, bias, rows, cols) }},
			{"GemvQ5_0", "GemvQ5_0", func() { GemvQ5_0(y, w5, x, rows, cols) }},
			{"GemvQ5_0Bias", "GemvQ5_0", func() { GemvQ5_0Bias(y, w5, x, bias, rows, cols) }},
			{"GemvQ8_0F32", "GemvQ8_0F32", func() { GemvQ8_0F32(y, w8, xf, bias, scratch, rows, cols) }},
			{"GemvQ5_0F32", "GemvQ5_0F32", func() { GemvQ5_0F32(y, w5, xf, nil, scratch, rows, cols) }},
			{"GemvF32", "GemvF32", func() { GemvF32(y, wf, xf, rows, cols) }},
			{"RMSNorm", "RMSNorm", func() { RMSNorm(norm, wf, xf, rows, cols, 1e-6) }},
			{"Softmax", "Softmax", func() { Softmax(sm, rows, cols) }},
			{"SoftmaxMasked", "Softmax", func() { SoftmaxMasked(sm, rows, cols, valid) }},
			{"StreamRead", "StreamRead", func() { streamSum(wf) }},
		} {
			if hasOp(s, c.op) {
				wantNoAllocs(t, c.name, c.fn)
			}
		}
	})
}

// ---- guard pages ----

// TestGuardPages runs every op with each input and output placed directly before a PROT_NONE
// page ("tail") and directly after one ("head"): a kernel reading or writing one byte outside
// its arguments (a wide SIMD load past the end of a 34-byte block row, a masked tail done
// wrong) faults. Results must also equal those from ordinary memory.
func TestGuardPages(t *testing.T) {
	rng := newRand(12)
	type placer struct {
		name string
		f32  func(testing.TB, int) []float32
		q8   func(testing.TB, int) []BlockQ8_0
		q5   func(testing.TB, int) []BlockQ5_0
		i32  func(testing.TB, int) []int32
	}
	placers := []placer{
		{"tail", guardTail[float32], guardTail[BlockQ8_0], guardTail[BlockQ5_0], guardTail[int32]},
		{"head", guardHead[float32], guardHead[BlockQ8_0], guardHead[BlockQ5_0], guardHead[int32]},
	}
	forEachSet(t, "QuantizeQ8_0", func(t *testing.T, s *kern.Set) {
		for _, p := range placers {
			// Quantize / dequantize, 1..5 and 9 blocks.
			for _, nb := range []int{1, 2, 3, 4, 5, 9} {
				if !hasOps(s, "QuantizeQ8_0", "QuantizeQ5_0", "DequantizeQ8_0", "DequantizeQ5_0") {
					break
				}
				x := randScaledF32(rng, nb*QK)
				want8, want5 := make([]BlockQ8_0, nb), make([]BlockQ5_0, nb)
				mustOK(t, QuantizeQ8_0(want8, x))
				mustOK(t, QuantizeQ5_0(want5, x))
				gx := guardedCopy(t, x, p.f32)
				g8, g5 := p.q8(t, nb), p.q5(t, nb)
				mustOK(t, QuantizeQ8_0(g8, gx))
				mustOK(t, QuantizeQ5_0(g5, gx))
				if !bytes.Equal(blockBytes(g8), blockBytes(want8)) || !bytes.Equal(blockBytes(g5), blockBytes(want5)) {
					t.Errorf("%s: quantize %d blocks differs in guarded memory", p.name, nb)
				}
				want := make([]float32, nb*QK)
				gd := p.f32(t, nb*QK)
				mustOK(t, DequantizeQ8_0(want, want8))
				mustOK(t, DequantizeQ8_0(gd, guardedCopy(t, want8, p.q8)))
				mustSame(t, p.name+" DequantizeQ8_0", gd, want)
				mustOK(t, DequantizeQ5_0(want, want5))
				mustOK(t, DequantizeQ5_0(gd, guardedCopy(t, want5, p.q5)))
				mustSame(t, p.name+" DequantizeQ5_0", gd, want)
			}
			// GEMV: row counts around every unroll factor, odd block counts.
			for _, sh := range [][2]int{{1, 32}, {2, 96}, {3, 160}, {4, 32}, {5, 64}, {7, 96}, {8, 32}, {9, 224}, {17, 32}, {33, 96}} {
				if !hasOps(s, "GemvQ8_0", "GemvQ5_0", "GemvQ8_0F32", "GemvQ5_0F32", "GemvF32") {
					break
				}
				rows, cols := sh[0], sh[1]
				w8, w5, x := randQ8_0(rng, rows*cols/QK), randQ5_0(rng, rows*cols/QK), randQ8_0(rng, cols/QK)
				xf, bias, wf := randF32(rng, cols, 1), randF32(rng, rows, 1), randF32(rng, rows*cols, 1)
				gw8, gw5, gx := guardedCopy(t, w8, p.q8), guardedCopy(t, w5, p.q5), guardedCopy(t, x, p.q8)
				gxf, gbias, gwf := guardedCopy(t, xf, p.f32), guardedCopy(t, bias, p.f32), guardedCopy(t, wf, p.f32)
				gy, gscr := p.f32(t, rows), p.q8(t, cols/QK)
				want, scr := make([]float32, rows), make([]BlockQ8_0, cols/QK)
				name := fmt.Sprintf("%s %dx%d", p.name, rows, cols)

				mustOK(t, GemvQ8_0Bias(want, w8, x, bias, rows, cols))
				mustOK(t, GemvQ8_0Bias(gy, gw8, gx, gbias, rows, cols))
				mustSame(t, name+" GemvQ8_0Bias", gy, want)
				mustOK(t, GemvQ8_0(want, w8, x, rows, cols))
				mustOK(t, GemvQ8_0(gy, gw8, gx, rows, cols))
				mustSame(t, name+" GemvQ8_0", gy, want)
				mustOK(t, GemvQ5_0Bias(want, w5, x, bias, rows, cols))
				mustOK(t, GemvQ5_0Bias(gy, gw5, gx, gbias, rows, cols))
				mustSame(t, name+" GemvQ5_0Bias", gy, want)
				mustOK(t, GemvQ8_0F32(want, w8, xf, bias, scr, rows, cols))
				mustOK(t, GemvQ8_0F32(gy, gw8, gxf, gbias, gscr, rows, cols))
				mustSame(t, name+" GemvQ8_0F32", gy, want)
				mustOK(t, GemvQ5_0F32(want, w5, xf, nil, scr, rows, cols))
				mustOK(t, GemvQ5_0F32(gy, gw5, gxf, nil, gscr, rows, cols))
				mustSame(t, name+" GemvQ5_0F32", gy, want)
				mustOK(t, GemvF32(want, wf, xf, rows, cols))
				mustOK(t, GemvF32(gy, gwf, gxf, rows, cols))
				mustSame(t, name+" GemvF32", gy, want)
			}
			// GemvF32 with row lengths that are not whole vectors: masked or scalar tails.
			for _, sh := range [][2]int{{1, 1}, {3, 5}, {5, 17}, {2, 33}, {4, 100}, {7, 129}, {9, 15}} {
				if !hasOp(s, "GemvF32") {
					break
				}
				rows, cols := sh[0], sh[1]
				w, x := randF32(rng, rows*cols, 1), randF32(rng, cols, 1)
				want, got := make([]float32, rows), p.f32(t, rows)
				mustOK(t, GemvF32(want, w, x, rows, cols))
				mustOK(t, GemvF32(got, guardedCopy(t, w, p.f32), guardedCopy(t, x, p.f32), rows, cols))
				mustSame(t, fmt.Sprintf("%s GemvF32 %dx%d", p.name, rows, cols), got, want)
			}
			// RMSNorm and softmax with dims that leave every possible SIMD tail.
			for _, dim := range []int{1, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 65, 100} {
				if !hasOps(s, "RMSNorm", "Softmax") {
					break
				}
				tokens := 1 + dim%3
				x, w := randF32(rng, tokens*dim, 2), randF32(rng, dim, 1)
				want, got := make([]float32, tokens*dim), p.f32(t, tokens*dim)
				mustOK(t, RMSNorm(want, x, w, tokens, dim, 1e-6))
				mustOK(t, RMSNorm(got, guardedCopy(t, x, p.f32), guardedCopy(t, w, p.f32), tokens, dim, 1e-6))
				mustSame(t, fmt.Sprintf("%s RMSNorm dim %d", p.name, dim), got, want)

				sm := softmaxRow(rng, tokens*dim)
				valid := make([]int32, tokens)
				for r := range valid {
					valid[r] = int32(1 + rng.IntN(dim))
				}
				want = append(want[:0], sm...)
				got = guardedCopy(t, sm, p.f32)
				mustOK(t, Softmax(want, tokens, dim))
				mustOK(t, Softmax(got, tokens, dim))
				mustSame(t, fmt.Sprintf("%s Softmax cols %d", p.name, dim), got, want)
				want = append(want[:0], sm...)
				got = guardedCopy(t, sm, p.f32)
				mustOK(t, SoftmaxMasked(want, tokens, dim, valid))
				mustOK(t, SoftmaxMasked(got, tokens, dim, guardedCopy(t, valid, p.i32)))
				mustSame(t, fmt.Sprintf("%s SoftmaxMasked cols %d", p.name, dim), got, want)
			}
			// StreamRead: every tail length of the widest unroll (128 floats).
			for _, n := range []int{1, 2, 5, 15, 16, 17, 33, 64, 127, 128, 129, 200, 255, 257} {
				if !hasOp(s, "StreamRead") {
					break
				}
				x := randF32(rng, n, 1)
				if got, want := streamSum(guardedCopy(t, x, p.f32)), streamSum(x); got != want {
					t.Errorf("%s StreamRead n=%d: %g in guarded memory, %g otherwise", p.name, n, got, want)
				}
			}
		}
	})
}

// wantRefBits requires a ref-variant set (cgo/ref, generic/ref: scalar code ported operation for
// operation from the same C) to give exactly the reference set's bits. SIMD variants sum in
// other orders and are held to the tolerances instead.
func wantRefBits(t *testing.T, s *kern.Set, what string, got, want []float32) {
	t.Helper()
	if s.Variant != cpu.Ref {
		return
	}
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(isNaN32(got[i]) && isNaN32(want[i])) {
			t.Errorf("%s: [%d] = %g (%#08x), %s gives %g (%#08x): a ref port must match bit for bit",
				what, i, got[i], math.Float32bits(got[i]), refSet().Name(), want[i], math.Float32bits(want[i]))
			return
		}
	}
}

func mustOK(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// mustSame fails unless got and want are identical (NaN == NaN).
func mustSame(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if !sameFloat(got[i], want[i]) {
			t.Errorf("%s: [%d] = %g, want %g", what, i, got[i], want[i])
			return
		}
	}
}
