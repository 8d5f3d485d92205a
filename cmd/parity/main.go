// Command parity checks every op of the dispatch table, for every backend and variant, for
// thread counts 1..NumCPU (up to 2*NumCPU without -quick) and every active worker count the
// table can pick: the dispatch wrapper (Runtime method) against the serial kernel (bit for
// bit), both against an independent float64 reference, and the whole Qwen2-shaped model
// pooled against serial. It prints a table and "parity: N passed, N failed, N skipped", and
// exits non-zero on any failure.
//
//	go run ./cmd/parity          # full: Qwen2-0.5B shapes, 151936-row vocab, threads up to 2*NumCPU
//	go run ./cmd/parity -quick   # the subset `make test` runs (well under a minute on 2 cores)
//
// The cases, references and the suite are package parity; adding an op adds its cases there.
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/parity"
)

func main() {
	quick := flag.Bool("quick", false, "quick subset: threads 1..NumCPU, big shapes on SIMD variants only, small model")
	backends := flag.String("backends", "", "comma-separated backends to check (default: all built in)")
	ops := flag.String("ops", "", "comma-separated table op names to check, or \"model\" (default: all)")
	hang := flag.Duration("hang", 3*time.Minute, "fail (exit 3, goroutine dump) when one call runs longer than this")
	flag.Parse()

	ncpu := runtime.NumCPU()
	cfg := parity.Config{Quick: *quick, Model: true, Progress: os.Stderr}
	maxT := 2 * ncpu
	if *quick {
		maxT = ncpu
	}
	for t := 1; t <= maxT; t++ {
		cfg.Threads = append(cfg.Threads, t)
	}
	if *quick {
		cfg.ModelThreads = cfg.Threads
	} else {
		cfg.ModelThreads = []int{ncpu, 2 * ncpu}
	}
	if *backends != "" {
		cfg.Backends = strings.Split(*backends, ",")
	}
	if *ops != "" {
		want := map[string]bool{}
		for _, o := range strings.Split(*ops, ",") {
			if o != "model" {
				if _, err := kernelrt.ParseOp(o); err != nil {
					fmt.Fprintln(os.Stderr, "parity:", err)
					os.Exit(2)
				}
			}
			want[o] = true
		}
		cfg.Filter = func(c *parity.Case) bool { return want[c.Op.String()] }
		cfg.Model = want["model"]
	}
	s, err := parity.NewSuite(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	go watchdog(s, *hang)
	t0 := time.Now()
	cases := parity.Cases(*quick)
	s.Run(cases)
	s.Close()

	mode := "full"
	if *quick {
		mode = "quick"
	}
	names := s.SetNames()
	fmt.Printf("parity (%s): %d CPUs, threads %v (model %v), kernels %s, %s\n", mode, ncpu, cfg.Threads,
		cfg.ModelThreads, strings.Join(names, " "), time.Since(t0).Round(time.Millisecond))
	fmt.Print(legendHead + parity.Legend(cases) + legendModel)
	if *quick {
		fmt.Println("quick mode: GEMV 9728x896 / 151936x896 and GemvF32 9728x896 run on SIMD variants only (SKIP on ref/generic);")
		fmt.Println("            GEMM T=128 and the 9728x896 / 896x4864 GEMMs, Qwen2-0.5B and the 151936-row embedding run in full mode only")
	}
	fmt.Println()
	s.WriteTable(os.Stdout)
	pass, fail, skip := s.Counts()
	missing, quickSkips := 0, 0
	for _, r := range s.Rows {
		if r.Status == "SKIP" {
			if strings.Contains(r.Note, "lacks") {
				missing++
			} else {
				quickSkips++
			}
		}
	}
	fmt.Printf("\nskipped: %d for kernels a backend lacks, %d for quick-mode limits\n", missing, quickSkips)
	fmt.Println(summary(pass, fail, skip))
	if fail > 0 {
		os.Exit(1)
	}
}

const legendHead = `columns: threads = Options.Threads; active = workers the table picked (forced with SetMinElements, checked with
  Decide and the dispatch report); max_abs = wrapper vs serial kernel of the same backend/variant (must be 0: every
  split keeps the arithmetic; quantizers compared byte for byte); max_rel_ref = worst of wrapper and serial vs the
  float64 reference, per op:
`

const legendModel = `  model            logits of prefill(7) + 4 decodes, pooled vs serial (active: table thresholds, or all = every
                   op split as far as it goes); max_abs <= 1e-3
`

// summary is the last line of the output.
func summary(pass, fail, skip int) string {
	return fmt.Sprintf("parity: %d passed, %d failed, %d skipped", pass, fail, skip)
}

// watchdog turns a hung call (a lost wake-up in the pool, a kernel looping) into a failure
// with every goroutine's stack instead of a CI job that never ends.
func watchdog(s *parity.Suite, limit time.Duration) {
	for range time.Tick(time.Second) {
		if d, what := s.Stalled(); d > limit {
			fmt.Fprintf(os.Stderr, "\nparity: %s has run for %s (limit -hang=%s): probable hang; goroutines:\n", what, d.Round(time.Millisecond), limit)
			pprof.Lookup("goroutine").WriteTo(os.Stderr, 2)
			fmt.Println("parity: FAIL: hang in", what)
			os.Exit(3)
		}
	}
}
