package parity

import (
	"hash/fnv"
	"math"
	"unsafe"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

func lookup(backend, variant string) (*kern.Set, error) {
	v, err := cpu.ParseVariant(variant)
	if err != nil {
		return nil, err
	}
	return kern.Lookup(backend, v)
}

// rng is splitmix64 seeded from a label, so every case's inputs are fixed whatever runs
// before it.
type rng struct{ s uint64 }

func newRng(label string) *rng {
	h := fnv.New64a()
	h.Write([]byte(label))
	return &rng{h.Sum64()}
}

func (r *rng) next() uint64 {
	r.s += 0x9E3779B97F4A7C15
	z := r.s
	z = (z ^ z>>30) * 0xBF58476D1CE4E5B9
	z = (z ^ z>>27) * 0x94D049BB133111EB
	return z ^ z>>31
}

// unit is uniform in [0, 1).
func (r *rng) unit() float64 { return float64(r.next()>>11) / (1 << 53) }

// uni is uniform in [lo, hi).
func (r *rng) uni(lo, hi float64) float32 { return float32(lo + (hi-lo)*r.unit()) }

func (r *rng) fill(dst []float32, lo, hi float64) {
	for i := range dst {
		dst[i] = r.uni(lo, hi)
	}
}

// fillBytes fills b with random bytes, 8 at a time.
func (r *rng) fillBytes(b []byte) {
	n8 := len(b) / 8
	if n8 > 0 {
		w := unsafe.Slice((*uint64)(unsafe.Pointer(unsafe.SliceData(b))), n8)
		for i := range w {
			w[i] = r.next()
		}
	}
	for i := n8 * 8; i < len(b); i++ {
		b[i] = byte(r.next())
	}
}

// fillActs fills x with activation-like floats: uniform in +-1 times a per-32-block
// magnitude spread over three decades, so block scales differ.
func (r *rng) fillActs(x []float32) {
	for b := 0; b < len(x); b += 32 {
		m := math.Pow(10, -2+3*r.unit())
		for j := b; j < min(b+32, len(x)); j++ {
			x[j] = float32(m * (2*r.unit() - 1))
		}
	}
}

func bytesOf[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	var z T
	return unsafe.Slice((*byte)(unsafe.Pointer(unsafe.SliceData(s))), len(s)*int(unsafe.Sizeof(z)))
}

// randQ8 makes rows x cols random Q8_0 weights: every int8 quant, scales 0.0005..0.0025.
func randQ8(r *rng, rows, cols int) []kernelrt.BlockQ8_0 {
	w := make([]kernelrt.BlockQ8_0, rows*cols/32)
	r.fillBytes(bytesOf(w))
	for i := range w {
		w[i].D = toF16(float32(0.0005 + 0.002*r.unit()))
	}
	return w
}

// fillNaN poisons an output so that an element a kernel fails to write shows.
func fillNaN(x []float32) {
	nan := float32(math.NaN())
	for i := range x {
		x[i] = nan
	}
}

func fillByte(b []byte, v byte) {
	for i := range b {
		b[i] = v
	}
}
