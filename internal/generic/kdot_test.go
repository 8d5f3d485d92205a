package generic

import (
	"math"
	"math/rand/v2"
	"testing"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/kern"
)

// kdCase describes one weight type of the Q4_0 / Q5_1 / K-quant GEMV and GEMM ports.
type kdCase struct {
	name       string
	blk, bytes int
	xk         bool // activations are Q8_K (else Q8_0)
	gemv       func(y, w, x, bias kern.P, cols, r0, r1 int)
	gemm       func(y, w, x, bias kern.P, rows, cols, T, r0, r1 int)
	// val returns weight e of a block as a - b, both exact in float64 (scale part, min part).
	val func(p unsafe.Pointer, e int) (a, b float64)
}

var kdCases = []kdCase{
	{"q4_0", qk, 18, false, GemvQ4_0, GemmQ4_0, func(p unsafe.Pointer, e int) (float64, float64) {
		b := (*blockQ4_0)(p)
		return float64(FP16ToFP32(b.d)) * float64(nib(&b.qs, e)-8), 0
	}},
	{"q5_1", qk, 24, false, GemvQ5_1, GemmQ5_1, func(p unsafe.Pointer, e int) (float64, float64) {
		b := (*blockQ5_1)(p)
		return float64(FP16ToFP32(b.d)) * float64(b.q5(e)), -float64(FP16ToFP32(b.m))
	}},
	{"q4_K", qkK, 144, true, GemvQ4K, GemmQ4K, func(p unsafe.Pointer, e int) (float64, float64) {
		b := (*blockQ4K)(p)
		sc, m := scaleMinK4(e/32, &b.scales)
		return float64(FP16ToFP32(b.d)) * float64(sc) * float64(b.q(e)), float64(FP16ToFP32(b.dmin)) * float64(m)
	}},
	{"q5_K", qkK, 176, true, GemvQ5K, GemmQ5K, func(p unsafe.Pointer, e int) (float64, float64) {
		b := (*blockQ5K)(p)
		sc, m := scaleMinK4(e/32, &b.scales)
		return float64(FP16ToFP32(b.d)) * float64(sc) * float64(b.q(e)), float64(FP16ToFP32(b.dmin)) * float64(m)
	}},
	{"q6_K", qkK, 210, true, GemvQ6K, GemmQ6K, func(p unsafe.Pointer, e int) (float64, float64) {
		b := (*blockQ6K)(p)
		return float64(FP16ToFP32(b.d)) * float64(b.scales[e/16]) * float64(b.q(e)-32), 0
	}},
}

// randWeights fills n blocks with random bytes and small random fp16 scales at the type's
// scale offsets.
func randWeights(c kdCase, n int, r *rand.Rand) []byte {
	w := make([]byte, n*c.bytes)
	for i := range w {
		w[i] = byte(r.Uint32())
	}
	for b := 0; b < n; b++ {
		blk := w[b*c.bytes:]
		d := FP32ToFP16(float32(r.Float64()-0.5) * 0.04)
		m := FP32ToFP16(float32(r.Float64()-0.5) * 0.1)
		off := 0
		if c.name == "q6_K" {
			off = 208
		}
		blk[off], blk[off+1] = byte(d), byte(d>>8)
		if c.name != "q4_0" && c.name != "q6_K" {
			blk[2], blk[3] = byte(m), byte(m>>8)
		}
	}
	return w
}

// TestKGemvGemm checks the GEMV and GEMM ports against float64 over the exact quantized values:
// |y - y_exact| <= 1e-5 * M, M = sum_e (|a_e| + |b_e|)|x_e| (+ |bias|), the magnitude of the terms
// the kernels round. GEMM of T tokens equals T GEMVs bit for bit; slices write only their rows.
func TestKGemvGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, c := range kdCases {
		for _, shape := range [][3]int{{1, 1, 1}, {7, 2, 3}, {33, 3, 2}, {64, 1, 5}} {
			rows, nblk, T := shape[0], shape[1], shape[2]
			cols := nblk * c.blk
			w := randWeights(c, rows*nblk, r)
			xf := make([]float32, T*cols)
			for i := range xf {
				xf[i] = float32(r.NormFloat64())
			}
			var x []byte
			xbytes, xblk := 34, qk
			if c.xk {
				xbytes, xblk = 292, qkK
				x = make([]byte, T*cols/qkK*292)
				QuantizeQ8K(ptr(x), ptr(xf), 0, T*cols/qkK)
			} else {
				x = make([]byte, T*cols/qk*34)
				QuantizeQ8_0(ptr(x), ptr(xf), 0, T*cols/qk)
			}
			bias := make([]float32, rows)
			for i := range bias {
				bias[i] = float32(r.NormFloat64())
			}
			r0, r1 := 0, rows
			if rows > 4 {
				r0, r1 = 1, rows-2
			}
			const sent = -12345
			yv := make([]float32, T*rows)
			for i := range yv {
				yv[i] = sent
			}
			for tk := 0; tk < T; tk++ {
				c.gemv(ptr(yv[tk*rows:]), ptr(w), ptr(x[tk*cols/xblk*xbytes:]), ptr(bias), cols, r0, r1)
			}
			ym := make([]float32, T*rows)
			for i := range ym {
				ym[i] = sent
			}
			c.gemm(ptr(ym), ptr(w), ptr(x), ptr(bias), rows, cols, T, r0, r1)
			for tk := 0; tk < T; tk++ {
				for row := 0; row < rows; row++ {
					got := yv[tk*rows+row]
					if math.Float32bits(ym[tk*rows+row]) != math.Float32bits(got) {
						t.Fatalf("%s: gemm != gemv at t=%d r=%d: %g %g", c.name, tk, row, ym[tk*rows+row], got)
					}
					if row < r0 || row >= r1 {
						if got != sent {
							t.Fatalf("%s: wrote row %d outside the slice", c.name, row)
						}
						continue
					}
					want, mag := float64(bias[row]), math.Abs(float64(bias[row]))
					for e := 0; e < cols; e++ {
						xb := unsafe.Pointer(&x[(tk*cols+e)/xblk*xbytes])
						var xv float64
						if c.xk {
							q := (*blockQ8K)(xb)
							xv = float64(q.d) * float64(q.qs[e%xblk])
						} else {
							q := (*blockQ8_0)(xb)
							xv = float64(FP16ToFP32(q.d)) * float64(q.qs[e%xblk])
						}
						a, b := c.val(unsafe.Pointer(&w[(row*nblk+e/c.blk)*c.bytes]), e%c.blk)
						want += (a - b) * xv
						mag += (math.Abs(a) + math.Abs(b)) * math.Abs(xv)
					}
					if d := math.Abs(float64(got) - want); d > 1e-5*mag+1e-30 {
						t.Errorf("%s %dx%d t=%d r=%d: got %.9g want %.9g (err %.3g, bound %.3g)", c.name, rows, cols, tk, row, got, want, d, 1e-5*mag)
					}
				}
			}
		}
	}
}
