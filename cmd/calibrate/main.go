// Command calibrate measures this machine's dispatch cost and every op's per-element cost,
// writes the thresholds as JSON (by default into calibration/, where kernelrt.New finds them
// for this CPU), and prints the effect: each op's decode-size call before and after.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"text/tabwriter"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/calibrate"
)

func main() {
	out := flag.String("o", "", "output file (default calibration/<cpu>-<threads>t.json)")
	threads := flag.Int("threads", 0, "threads (0 = one per usable core)")
	flag.Parse()
	if err := run(*out, *threads); err != nil {
		fmt.Fprintln(os.Stderr, "calibrate:", err)
		os.Exit(1)
	}
}

func run(out string, threads int) error {
	rt, err := kernelrt.New(kernelrt.Options{Threads: threads, Thresholds: "default"})
	if err != nil {
		return err
	}
	defer rt.Close()
	unpin, err := rt.PinCaller()
	if err == nil {
		defer unpin()
	}
	before, err := calibrate.Time(rt)
	if err != nil {
		return err
	}
	th, err := calibrate.Run(rt)
	if err != nil {
		return err
	}
	after, err := calibrate.Time(rt)
	if err != nil {
		return err
	}
	if out == "" {
		out = filepath.Join("calibration", kernelrt.CalibrationFile(th.CPU, th.Threads))
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	if err := th.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	fmt.Printf("cpu %q, %d threads, kernels %s, dispatch %.0f ns; wrote %s\n\n", th.CPU, th.Threads, th.Kernels, th.DispatchNs, out)
	tw := tabwriter.NewWriter(os.Stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tvariant\tavx2/avx512\tns/element\tmin_elements\tactive before\tµs before\tactive after\tµs after\tspeedup\t")
	for i, b := range before {
		a := after[i]
		oc := th.Ops[b.Op]
		ratio := "-"
		if n2, n5 := oc.VariantNs["avx2"], oc.VariantNs["avx512"]; n2 > 0 && n5 > 0 {
			ratio = fmt.Sprintf("%.2f", n2/n5)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%.4f\t%d\t%d\t%.2f\t%d\t%.2f\t%.2fx\t\n", b.Op, oc.Variant, ratio, oc.NsPerElement,
			oc.MinElements["decode"], b.Active, b.Ns/1e3, a.Active, a.Ns/1e3, b.Ns/a.Ns)
	}
	return tw.Flush()
}
