package kernelrt

import (
	"fmt"
	"testing"
	"unsafe"
)

// BenchmarkGemvQ3K is BenchmarkGemvQ8_0 for Q3_K weights (Q8_K activations) at the K-quant
// shapes (cols a multiple of 256: the down projection and Llama-style 2048/8192), the weights
// rotating through rotateBytes of copies so each call streams them from DRAM. Compare its GB/s
// with BenchmarkStreamRead's in the same run:
//
//	go test -run '^$' -bench 'StreamRead|GemvQ3K' -benchtime 20x .
func BenchmarkGemvQ3K(b *testing.B) {
	const bs = int(unsafe.Sizeof(BlockQ3K{}))
	cache := map[[2]int]*rotation[BlockQ3K]{}
	forEachBenchSet(b, "GemvQ3K", func(b *testing.B) {
		for _, sh := range [][2]int{{896, 4864}, {2048, 2048}, {8192, 2048}} {
			rows, cols := sh[0], sh[1]
			b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
				blocks := rows * cols / QKK
				rot := cache[sh]
				if rot == nil {
					n := max(1, (rotateBytes+blocks*bs-1)/(blocks*bs))
					all := make([]BlockQ3K, n*blocks)
					raw := unsafe.Slice((*byte)(unsafe.Pointer(&all[0])), len(all)*bs)
					randomBytes(raw[:blocks*bs], uint64(rows^cols))
					rng := newRand(uint64(rows))
					for i := range all[:blocks] { // sane scales instead of random bits
						all[i].D = randD(rng)
					}
					for c := 1; c < n; c++ {
						copy(all[c*blocks:(c+1)*blocks], all[:blocks])
					}
					rot = &rotation[BlockQ3K]{all: all, blocks: blocks}
					cache[sh] = rot
				}
				x := make([]BlockQ8K, cols/QKK)
				if err := QuantizeQ8K(x, randF32(newRand(1), cols, 1)); err != nil {
					b.Fatal(err)
				}
				y := make([]float32, rows)
				b.SetBytes(int64(blocks * bs))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := GemvQ3K(y, rot.copy(i), x, rows, cols); err != nil {
						b.Fatal(err)
					}
				}
				reportGBs(b, blocks*bs)
			})
		}
	})
}
