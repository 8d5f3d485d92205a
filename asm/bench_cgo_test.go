//go:build cgo && amd64 && !noasm

package asm

import (
	"math"
	"math/rand/v2"
	"os"
	"sort"
	"testing"
	"time"
	"unsafe"

	"github.com/kernelrt/kernelrt/asm/internal/cgonoop"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/internal/kern"
)

func init() {
	cgoCalls = append(cgoCalls,
		callBench{"cgo-noop", func(_, _, _ unsafe.Pointer, _, _, _ int) { cgonoop.Noop() }},
		callBench{"cgo-noop-args", cgonoop.NoopArgs},
	)
}

// TestVsCgo is a noise-resistant comparison of the asm and cgo backends (best variant) for
// every op of BenchmarkOps, for machines shared with other work where plain benchmarks swing
// by tens of percent. It alternates short bursts of asm and cgo calls and reports, per op,
// the fastest burst of each (ns per call) and the median of the per-round ratios asm/cgo.
// It only runs when asked:
//
//	KRT_ASM_VS_CGO=1 go test -run TestVsCgo -v ./asm/
func TestVsCgo(t *testing.T) {
	if os.Getenv("KRT_ASM_VS_CGO") == "" {
		t.Skip("set KRT_ASM_VS_CGO=1 to run")
	}
	v := cpu.Best()
	a, err1 := kern.Lookup("asm", v)
	c, err2 := kern.Lookup("cgo", v)
	if err1 != nil || err2 != nil {
		t.Skip("needs both backends")
	}
	const rounds = 25
	t.Logf("%-34s %12s %12s %10s", "op ("+v.String()+")", "asm ns/call", "cgo ns/call", "asm/cgo")
	for _, ob := range opBenches() {
		run, has, _ := ob.setup(rand.New(rand.NewPCG(3, 4)))
		if !has(a) || !has(c) {
			continue
		}
		// burst length: about 200 µs of work
		n := 1
		for {
			st := time.Now()
			for i := 0; i < n; i++ {
				run(a)
			}
			if time.Since(st) > 200*time.Microsecond || n > 1<<20 {
				break
			}
			n *= 2
		}
		burst := func(s *kern.Set) float64 {
			st := time.Now()
			for i := 0; i < n; i++ {
				run(s)
			}
			return float64(time.Since(st).Nanoseconds()) / float64(n)
		}
		minA, minC := math.Inf(1), math.Inf(1)
		var ratios []float64
		for r := 0; r < rounds; r++ {
			var ta, tc float64
			if r%2 == 0 {
				ta, tc = burst(a), burst(c)
			} else {
				tc, ta = burst(c), burst(a)
			}
			minA, minC = math.Min(minA, ta), math.Min(minC, tc)
			ratios = append(ratios, ta/tc)
		}
		sort.Float64s(ratios)
		t.Logf("%-34s %12.1f %12.1f %10.3f", ob.name, minA, minC, ratios[len(ratios)/2])
	}
}
