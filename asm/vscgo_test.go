//go:build cgo && amd64 && !purego

package asm_test

import (
	"math"
	"os"
	"sort"
	"testing"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/parity"
)

// TestVsCgo is a noise-resistant comparison of the asm and cgo backends (best variant) on
// every op's representative call, for machines shared with other work where plain benchmarks
// swing by tens of percent: it alternates short bursts of asm and cgo calls and reports, per
// op, the fastest burst of each (ns per call) and the median of the per-round ratios asm/cgo.
// The dispatch table's per-op backend preferences come from it. It only runs when asked:
//
//	KRT_ASM_VS_CGO=1 go test -run TestVsCgo -v ./asm/
func TestVsCgo(t *testing.T) {
	if os.Getenv("KRT_ASM_VS_CGO") == "" {
		t.Skip("set KRT_ASM_VS_CGO=1 to run")
	}
	v := cpu.Best()
	a, c := runtimeFor(t, "asm", v), runtimeFor(t, "cgo", v)
	const rounds = 25
	t.Logf("%-44s %12s %12s %10s", "op ("+v.String()+")", "asm ns/call", "cgo ns/call", "asm/cgo")
	for _, pc := range parity.Cases(true) {
		if !pc.Calib {
			continue
		}
		pc.Prepare()
		burst := func(rt *kernelrt.Runtime, n int) float64 {
			st := time.Now()
			for i := 0; i < n; i++ {
				pc.Call(rt)
			}
			return float64(time.Since(st).Nanoseconds()) / float64(n)
		}
		n := 1 // burst length: about 200 µs of work
		for burst(a, n)*float64(n) < 200e3 && n < 1<<20 {
			n *= 2
		}
		minA, minC := math.Inf(1), math.Inf(1)
		var ratios []float64
		for r := 0; r < rounds; r++ {
			var ta, tc float64
			if r%2 == 0 {
				ta, tc = burst(a, n), burst(c, n)
			} else {
				tc, ta = burst(c, n), burst(a, n)
			}
			minA, minC = math.Min(minA, ta), math.Min(minC, tc)
			ratios = append(ratios, ta/tc)
		}
		sort.Float64s(ratios)
		t.Logf("%-44s %12.1f %12.1f %10.3f", pc.Fn+" "+pc.Shape, minA, minC, ratios[len(ratios)/2])
		pc.Release()
	}
}
