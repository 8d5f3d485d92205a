package omp

import (
	"math"
	"testing"
)

// TestGemvMatchesScalar runs a tiny Q8_0 and Q5_0 GEMV through the peer (ref variant, two
// threads, odd chunks) and checks it against a Go computation.
func TestGemvMatchesScalar(t *testing.T) {
	if !Available() {
		if err := Gemv(false, Ref, make([]float32, 1), make([]byte, 34), make([]byte, 34), 1, 32, 1); err == nil {
			t.Fatal("stub Gemv returned no error")
		}
		t.Skip(Unavailable())
	}
	const rows, cols = 37, 64
	x := make([]byte, cols/32*34)
	xs := make([]int8, cols)
	for b := 0; b < cols/32; b++ {
		x[b*34], x[b*34+1] = 0x00, 0x3c // d = 1.0
		for j := 0; j < 32; j++ {
			v := int8((b*32+j)%11 - 5)
			xs[b*32+j] = v
			x[b*34+2+j] = byte(v)
		}
	}
	SetThreads(2)
	defer SetThreads(1)
	for _, q5 := range []bool{false, true} {
		bb := 34
		if q5 {
			bb = 22
		}
		w := make([]byte, rows*cols/32*bb)
		want := make([]float32, rows)
		for r := 0; r < rows; r++ {
			for b := 0; b < cols/32; b++ {
				blk := w[(r*cols/32+b)*bb:]
				blk[0], blk[1] = 0x00, 0x38 // d = 0.5
				for j := 0; j < 32; j++ {
					q := (r+j+b)%16 - 8
					if q5 {
						u := q + 16 // 0..31 stored: low nibble in qs, bit 4 in qh
						if j < 16 {
							blk[6+j] |= byte(u & 15)
						} else {
							blk[6+j-16] |= byte(u&15) << 4
						}
						if u&16 != 0 {
							blk[2+j/8] |= 1 << (j % 8)
						}
					} else {
						blk[2+j] = byte(int8(q))
					}
					want[r] += 0.5 * float32(q) * float32(xs[b*32+j])
				}
			}
		}
		y := make([]float32, rows)
		if err := Gemv(q5, Ref, y, w, x, rows, cols, 5); err != nil {
			t.Fatal(err)
		}
		for r := range y {
			if math.Abs(float64(y[r]-want[r])) > 1e-3 {
				t.Fatalf("q5=%v row %d: got %v want %v", q5, r, y[r], want[r])
			}
		}
	}
	if err := Gemv(false, Ref, make([]float32, 1), make([]byte, 1), x, 1, 64, 1); err == nil {
		t.Error("short w: no error")
	}
}
