package kernelrt

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"unsafe"
)

// Benchmarks of the serial kernels, one sub-benchmark per backend/variant and shape, e.g.
// BenchmarkGemvQ8_0/cgo/avx512/4864x896. GEMV weights rotate through enough copies to exceed
// rotateBytes, so each call streams its weights from DRAM as in a real decode step (the L3 is
// 32 MiB); GB/s counts weight bytes. Big buffers are allocated only by the benchmarks that use
// them, on first use.

const (
	rotateBytes = 128 << 20 // weights rotated per GEMV shape: 4x the L3
	streamBytes = 1 << 30   // StreamRead buffer: 32x the L3
)

// gemvBenchShapes are Qwen2-0.5B's decode GEMVs: q/o, gate/up, down, logits.
var gemvBenchShapes = [][2]int{{896, 896}, {4864, 896}, {896, 4864}, {151936, 896}}

// reportGBs adds a GB/s metric for bytesPerOp moved per iteration.
func reportGBs(b *testing.B, bytesPerOp int) {
	if s := b.Elapsed().Seconds(); s > 0 {
		b.ReportMetric(float64(bytesPerOp)*float64(b.N)/s/1e9, "GB/s")
	}
}

// forEachBenchSet runs fn as a sub-benchmark "backend/variant" per set implementing op.
func forEachBenchSet(b *testing.B, op string, fn func(b *testing.B)) {
	for _, s := range allSets() {
		if !hasOp(s, op) {
			continue
		}
		b.Run(s.Name(), func(b *testing.B) {
			defer useSet(s)()
			fn(b)
		})
	}
}

// randomBytes fills p with fast pseudo-random bytes.
func randomBytes(p []byte, seed uint64) {
	var key [32]byte
	key[0] = byte(seed)
	rand.NewChaCha8(key).Read(p)
}

// rotation holds copies of one weight matrix laid end to end; copy(i) returns copy i mod n.
type rotation[B block] struct {
	all    []B
	blocks int // blocks per copy
}

func (r *rotation[B]) copies() int { return len(r.all) / r.blocks }
func (r *rotation[B]) copy(i int) []B {
	n := i % r.copies()
	return r.all[n*r.blocks : (n+1)*r.blocks]
}

// newRotation builds ceil(rotateBytes / matrix bytes) copies (at least one) of a random rows x
// cols matrix, scales giving each block sane fp16 scales instead of random bits.
func newRotation[B block](rows, cols int, scales func(*B, *rand.Rand)) *rotation[B] {
	var z B
	size := int(unsafe.Sizeof(z))
	blocks := rows * cols / blockWeights[B]()
	n := max(1, (rotateBytes+blocks*size-1)/(blocks*size))
	all := make([]B, n*blocks)
	raw := unsafe.Slice((*byte)(unsafe.Pointer(&all[0])), len(all)*size)
	randomBytes(raw[:blocks*size], uint64(rows^cols))
	rng := newRand(uint64(rows))
	for i := range all[:blocks] {
		scales(&all[i], rng)
	}
	for c := 1; c < n; c++ {
		copy(all[c*blocks:(c+1)*blocks], all[:blocks])
	}
	return &rotation[B]{all: all, blocks: blocks}
}

// benchGemv runs one quantized GEMV per shape and set, the weights rotating through DRAM and
// the activations quantized to A (Q8_0 for blocks of 32, Q8_K for super-blocks of 256).
func benchGemv[B block, A actBlock](b *testing.B, op string, shapes [][2]int, scales func(*B, *rand.Rand),
	quantize func([]A, []float32) error, gemv func(y []float32, w []B, x []A, rows, cols int) error) {
	cache := map[[2]int]*rotation[B]{} // shared by the sets, built on first use
	forEachBenchSet(b, op, func(b *testing.B) {
		for _, sh := range shapes {
			rows, cols := sh[0], sh[1]
			b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
				rot := cache[sh]
				if rot == nil {
					rot = newRotation(rows, cols, scales)
					cache[sh] = rot
				}
				x := make([]A, cols/blockWeights[A]())
				if err := quantize(x, randF32(newRand(1), cols, 1)); err != nil {
					b.Fatal(err)
				}
				y := make([]float32, rows)
				var z B
				bytes := rows * cols / blockWeights[B]() * int(unsafe.Sizeof(z))
				b.SetBytes(int64(bytes))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := gemv(y, rot.copy(i), x, rows, cols); err != nil {
						b.Fatal(err)
					}
				}
				reportGBs(b, bytes)
			})
		}
	})
}

// kquantBenchShapes are the K-quant GEMVs (cols a multiple of 256): Qwen2-0.5B's down
// projection and Llama-style 2048/8192.
var kquantBenchShapes = [][2]int{{896, 4864}, {2048, 2048}, {8192, 2048}}

func BenchmarkGemvQ8_0(b *testing.B) {
	benchGemv(b, "GemvQ8_0", gemvBenchShapes, func(w *BlockQ8_0, r *rand.Rand) { w.D = randD(r) }, QuantizeQ8_0, GemvQ8_0)
}

func BenchmarkGemvQ5_0(b *testing.B) {
	benchGemv(b, "GemvQ5_0", gemvBenchShapes, func(w *BlockQ5_0, r *rand.Rand) { w.D = randD(r) }, QuantizeQ8_0, GemvQ5_0)
}

// BenchmarkGemvQ2K, BenchmarkGemvIQ4XS and BenchmarkGemvQ3K are BenchmarkGemvQ8_0 for the
// newer super-block types (Q8_K activations) at the K-quant shapes. Compare their GB/s with
// BenchmarkStreamRead's in the same run:
//
//	go test -run '^$' -bench 'StreamRead|GemvQ2K|GemvIQ4XS|GemvQ3K' -benchtime 20x .
func BenchmarkGemvQ2K(b *testing.B) {
	benchGemv(b, "GemvQ2K", kquantBenchShapes, func(w *BlockQ2K, r *rand.Rand) { w.D, w.Dmin = randD(r), randD(r) }, QuantizeQ8K, GemvQ2K)
}

func BenchmarkGemvIQ4XS(b *testing.B) {
	benchGemv(b, "GemvIQ4_XS", kquantBenchShapes, func(w *BlockIQ4_XS, r *rand.Rand) { w.D = randD(r) }, QuantizeQ8K, GemvIQ4_XS)
}

func BenchmarkGemvQ3K(b *testing.B) {
	benchGemv(b, "GemvQ3K", kquantBenchShapes, func(w *BlockQ3K, r *rand.Rand) { w.D = randD(r) }, QuantizeQ8K, GemvQ3K)
}

// BenchmarkGemvQ8_0F32 is the fused path the decoder uses (quantize x, GEMV, bias) at the
// attention-projection and MLP shapes, weights rotating as above.
func BenchmarkGemvQ8_0F32(b *testing.B) {
	cache := map[[2]int]*rotation[BlockQ8_0]{}
	forEachBenchSet(b, "GemvQ8_0F32", func(b *testing.B) {
		for _, sh := range gemvBenchShapes[:3] {
			rows, cols := sh[0], sh[1]
			b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
				rot := cache[sh]
				if rot == nil {
					rot = newRotation(rows, cols, func(w *BlockQ8_0, r *rand.Rand) { w.D = randD(r) })
					cache[sh] = rot
				}
				rng := newRand(2)
				x, bias := randF32(rng, cols, 1), randF32(rng, rows, 1)
				y, scratch := make([]float32, rows), make([]BlockQ8_0, cols/QK)
				bytes := rows * cols / QK * int(unsafe.Sizeof(BlockQ8_0{}))
				b.SetBytes(int64(bytes))
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if err := GemvQ8_0F32(y, rot.copy(i), x, bias, scratch, rows, cols); err != nil {
						b.Fatal(err)
					}
				}
				reportGBs(b, bytes)
			})
		}
	})
}

// BenchmarkGemvF32 is the FP32 GEMV at 896x896 with the matrix cached (3.2 MB), the shape
// gonum's Sgemv was measured at (144-155 µs on this kind of machine).
func BenchmarkGemvF32(b *testing.B) {
	const rows, cols = 896, 896
	rng := newRand(3)
	w, x, y := randF32(rng, rows*cols, 1), randF32(rng, cols, 1), make([]float32, rows)
	forEachBenchSet(b, "GemvF32", func(b *testing.B) {
		b.SetBytes(rows * cols * 4)
		for i := 0; i < b.N; i++ {
			if err := GemvF32(y, w, x, rows, cols); err != nil {
				b.Fatal(err)
			}
		}
		reportGBs(b, rows*cols*4)
	})
}

// BenchmarkStreamRead reads a 1 GiB buffer per iteration: the DRAM bandwidth one core gets,
// the ceiling for the GEMV numbers above.
func BenchmarkStreamRead(b *testing.B) {
	var buf []float32
	forEachBenchSet(b, "StreamRead", func(b *testing.B) {
		if buf == nil {
			buf = make([]float32, streamBytes/4)
			for i := range buf { // touch every page: untouched pages would all read the zero page
				buf[i] = 1
			}
		}
		b.SetBytes(streamBytes)
		b.ResetTimer()
		var sink float32
		for i := 0; i < b.N; i++ {
			sink += streamSum(buf)
		}
		reportGBs(b, streamBytes)
		if !(sink > 0) {
			b.Fatalf("StreamRead of a buffer of ones summed to %g", sink)
		}
	})
}

// BenchmarkRMSNorm runs one token and a 128-token prefill batch at hidden size 896.
func BenchmarkRMSNorm(b *testing.B) {
	forEachBenchSet(b, "RMSNorm", func(b *testing.B) {
		for _, tokens := range []int{1, 128} {
			const dim = 896
			b.Run(fmt.Sprintf("%dx%d", tokens, dim), func(b *testing.B) {
				rng := newRand(4)
				x, w, out := randF32(rng, tokens*dim, 2), randF32(rng, dim, 1), make([]float32, tokens*dim)
				b.SetBytes(int64(tokens * dim * 4))
				for i := 0; i < b.N; i++ {
					if err := RMSNorm(out, x, w, tokens, dim, 1e-6); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
}

// BenchmarkSoftmax runs one row and 128 rows of 896 scores, in place.
func BenchmarkSoftmax(b *testing.B) {
	forEachBenchSet(b, "Softmax", func(b *testing.B) {
		for _, rows := range []int{1, 128} {
			const cols = 896
			b.Run(fmt.Sprintf("%dx%d", rows, cols), func(b *testing.B) {
				x := randF32(newRand(5), rows*cols, 8)
				b.SetBytes(int64(rows * cols * 4))
				for i := 0; i < b.N; i++ {
					// Softmax is idempotent enough to rerun on its own output: values stay in (0, 1].
					if err := Softmax(x, rows, cols); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	})
}
