package kernelrt

import (
	"fmt"
	"testing"

	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

// Single-thread GEMM throughput on the Qwen2-0.5B prefill shapes, reported as GMAC/s
// (rows*cols*T multiply-adds per op), next to T calls of the same set's GEMV on the same data:
//
//	go test -run '^$' -bench 'Gemm' -benchtime 20x
//
// Sub-benchmarks: backend/variant/rowsxcols/T<n>/{gemm,gemv_xT}. The scalar sets (C ref and the
// generic Go port) run T <= 7 only: at T = 128 one op takes them seconds.

var gemmBenchShapes = [][2]int{{896, 896}, {1152, 896}, {9728, 896}, {896, 4864}}

func BenchmarkGemmQ8_0(b *testing.B) { benchGemm(b, false) }
func BenchmarkGemmQ5_0(b *testing.B) { benchGemm(b, true) }

func benchGemm(b *testing.B, q5 bool) {
	for _, s := range allSets() {
		if !hasOp(s, gemmOp(q5)) {
			continue
		}
		for _, sh := range gemmBenchShapes {
			rows, cols := sh[0], sh[1]
			c := newGemmCase(newRand(1), rows, cols, 128, false)
			y := make([]float32, 128*rows)
			for _, T := range []int{128, 7, 1} {
				if T > 7 && (s.Backend == "generic" || s.Variant == cpu.Ref) {
					continue
				}
				ct := *c
				ct.tokens = T
				ct.x = c.x[:T*cols/QK]
				macs := float64(rows) * float64(cols) * float64(T)
				name := fmt.Sprintf("%s/%dx%d/T%d", s.Name(), rows, cols, T)
				b.Run(name+"/gemm", func(b *testing.B) {
					withSet(s, func() {
						yt := y[:T*rows]
						b.SetBytes(int64(len(ct.w8)) * 34)
						if q5 {
							b.SetBytes(int64(len(ct.w5)) * 22)
						}
						for i := 0; i < b.N; i++ {
							if err := ct.run(q5, yt); err != nil {
								b.Fatal(err)
							}
						}
						b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()*1e-9, "GMAC/s")
					})
				})
				if !hasOp(s, gemvOp(q5)) {
					continue
				}
				b.Run(name+"/gemv_xT", func(b *testing.B) { benchGemvTimesT(b, s, &ct, q5, y, macs) })
			}
		}
	}
}

// benchGemvTimesT runs T GEMVs (one per token) with set s: what prefill costs without a GEMM.
func benchGemvTimesT(b *testing.B, s *kern.Set, c *gemmCase, q5 bool, y []float32, macs float64) {
	withSet(s, func() {
		nb := c.cols / QK
		for i := 0; i < b.N; i++ {
			for t := 0; t < c.tokens; t++ {
				var err error
				yt, xt := y[t*c.rows:(t+1)*c.rows], c.x[t*nb:(t+1)*nb]
				if q5 {
					err = GemvQ5_0(yt, c.w5, xt, c.rows, c.cols)
				} else {
					err = GemvQ8_0(yt, c.w8, xt, c.rows, c.cols)
				}
				if err != nil {
					b.Fatal(err)
				}
			}
		}
		b.ReportMetric(macs*float64(b.N)/b.Elapsed().Seconds()*1e-9, "GMAC/s")
	})
}
