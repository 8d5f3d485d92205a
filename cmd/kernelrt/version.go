package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/cpu"
)

// ---- version ----

// cmdVersion prints the module version and commit, the Go toolchain, the CPU with the
// features the kernels use, and which kernels this machine runs (per op for a Runtime).
func cmdVersion(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("version", "", stderr)
	if err := parse(fs, args); err != nil {
		return err
	}
	mod, rev := "(devel)", "unknown"
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			mod = bi.Main.Version
		}
		dirty := ""
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = " (modified)"
				}
			}
		}
		rev += dirty
	}
	fmt.Fprintf(stdout, "kernelrt %s, commit %s\n", mod, rev)
	fmt.Fprintf(stdout, "go: %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	f := cpu.Detected()
	var feats []string
	for _, x := range []struct {
		on   bool
		name string
	}{{f.AVX2, "avx2"}, {f.FMA, "fma"}, {f.F16C, "f16c"}, {f.AVX512F, "avx512f"}, {f.AVX512BW, "avx512bw"},
		{f.AVX512VL, "avx512vl"}, {f.AVX512DQ, "avx512dq"}, {f.AVX512VNNI, "avx512vnni"}} {
		if x.on {
			feats = append(feats, x.name)
		}
	}
	model := cpu.Model()
	if model == "" {
		model = "unknown CPU"
	}
	fmt.Fprintf(stdout, "cpu: %s, %d logical CPUs; features: %s\n", model, runtime.NumCPU(), strings.Join(feats, " "))
	fmt.Fprintf(stdout, "kernel backends built in: %s; variants this CPU runs: %s\n",
		strings.Join(kernelrt.Backends(), " "), strings.Join(kernelrt.Variants(), " "))
	def, err := kernelrt.DefaultKernels()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "serial kernels: %s\n", def)
	rt, err := kernelrt.New(kernelrt.Options{})
	if err != nil {
		return err
	}
	defer rt.Close()
	fmt.Fprintf(stdout, "runtime: %d threads; kernels %s; thresholds: %s\n", rt.Threads(), rt.KernelsSummary(), rt.ThresholdsSource())
	return nil
}
