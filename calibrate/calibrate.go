// Package calibrate measures a machine's dispatch cost and every op's cost per element, and
// sets a Runtime's thresholds (OpRow.MinElements) from them: a call is split over the pool
// only when each worker's share is worth several dispatches. The result is a
// kernelrt.Thresholds, which kernelrt.New loads from a file (Options.Thresholds) or from the
// built-in calibration/ folder for a known CPU. `make calibrate` runs cmd/calibrate.
//
// Every op is measured on its representative decode-size call, the Calib case of package
// parity, so a new op is calibrated without a line here. The same call picks each op's kernel
// variant: where AVX-512 instructions run as two 256-bit halves an AVX-512 kernel can lose to
// the AVX2 one, and the Runtime then runs AVX2 for that op.
package calibrate

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/cpu"
	"github.com/kernelrt/kernelrt/parity"
	"github.com/kernelrt/kernelrt/threadpool"
)

// Safety is how many dispatch costs (plus the op's own start-up cost when split) of work a
// worker must get before waking it pays: with 3, two workers finish in at most
// (w+d)/(2w) <= 2/3 of the serial time.
const Safety = 3

// medianNs runs f reps times and returns the median duration in ns.
func medianNs(reps int, f func()) float64 {
	d := make([]float64, reps)
	for i := range d {
		t := time.Now()
		f()
		d[i] = float64(time.Since(t).Nanoseconds())
	}
	sort.Float64s(d)
	return d[reps/2]
}

type emptyTask struct{}

func (*emptyTask) Run(int, int) {}

// DispatchNs measures an empty dispatch to threads workers, back to back, on a pool of its
// own (pinned like a Runtime's): the cost every split call pays.
func DispatchNs(threads int) (float64, error) {
	if threads <= 1 {
		return 0, nil
	}
	p, err := threadpool.New(threadpool.Options{Threads: threads})
	if err != nil {
		return 0, err
	}
	defer p.Close()
	var t emptyTask
	for i := 0; i < 1000; i++ { // warm up: workers spinning, caches hot
		p.Dispatch(&t)
	}
	return medianNs(4001, func() { p.Dispatch(&t) }), nil
}

// Run measures this machine and sets rt's thresholds. Per op it times the representative
// call serially (cost c per element) and split over every worker; what the split costs
// beyond c*E/n and a dispatch is the op's start-up cost x (a second core's memory stream
// needs about a microsecond to get going, so small memory-bound calls do not speed up). A
// worker must then get Safety*(dispatch + x)/c elements. It takes a few seconds; rt must
// not be used meanwhile.
func Run(rt *kernelrt.Runtime) (_ *kernelrt.Thresholds, err error) {
	threads := rt.Threads()
	th := &kernelrt.Thresholds{CPU: cpu.Model(), Threads: threads, Kernels: kernelsOf(rt),
		Measured: time.Now().UTC().Format(time.RFC3339), Ops: map[string]kernelrt.OpCalibration{}}
	d, err := DispatchNs(threads)
	if err != nil {
		return nil, err
	}
	th.DispatchNs = d
	table := rt.Table()
	defer func() { // leave rt with the measured thresholds, or on error with its own
		if err == nil {
			err = rt.ApplyThresholds(th)
		}
		if err != nil {
			rt.ApplyThresholds(thresholdsOf(table))
		}
	}()
	// Variants first, so the thresholds are measured on the kernels that will run.
	if err := pickVariants(rt, th); err != nil {
		return nil, err
	}
	if err := rt.ApplyThresholds(th); err != nil {
		return nil, err
	}
	for _, c := range parity.Cases(true) {
		if !c.Calib {
			continue
		}
		row := table[c.Op]
		c.Prepare()
		call := func() { _ = c.Call(rt) }
		rt.SetMinElements(c.Op, math.MaxInt, math.MaxInt) // serial
		if err := c.Call(rt); err != nil {
			c.Release()
			return nil, fmt.Errorf("calibrate: %s: %w", c.Op, err)
		}
		serial := medianNs(51, call)
		el := max(row.Elements(c.S), 1)
		per := serial / float64(el)
		minEl := 1 << 30
		if threads > 1 && row.ThreadpoolSafe && per > 0 {
			rt.SetMinElements(c.Op, 1, 1) // split as far as the shape allows
			active, _ := rt.Decide(c.Op, c.S, kernelrt.Decode)
			extra := 0.0
			if active > 1 {
				split := medianNs(51, call)
				extra = max(0, split-serial/float64(active)-d)
			}
			minEl = max(1024, int(math.Ceil(Safety*(d+extra)/per)))
		}
		c.Release()
		oc := th.Ops[c.Op.String()]
		oc.NsPerElement, oc.MinElements = per, map[string]int{"decode": minEl, "prefill": minEl}
		th.Ops[c.Op.String()] = oc
	}
	return th, nil
}

// VariantMargin is how much faster (relative) another variant must be than the CPU's best
// before an op switches to it: closer timings are noise between runs.
const VariantMargin = 0.03

// pickVariants times every op's representative call serially, on one thread, with each SIMD
// variant the CPU runs (in the backend rt's serial calls of the op use) and records the fastest
// in th: the CPU's best variant unless another is VariantMargin faster. The calls run on hot
// caches, so they compare the kernels' instruction throughput, which is what differs.
func pickVariants(rt *kernelrt.Runtime, th *kernelrt.Thresholds) error {
	var vs []string
	for _, v := range kernelrt.Variants() {
		if v != "ref" {
			vs = append(vs, v)
		}
	}
	if len(vs) < 2 {
		return nil // nothing to choose between
	}
	best := vs[len(vs)-1] // Variants lists the slowest first
	rts := map[string]*kernelrt.Runtime{}
	defer func() {
		for _, r := range rts {
			r.Close()
		}
	}()
	one := func(backend, variant string) (*kernelrt.Runtime, error) {
		key := backend + "/" + variant
		if r := rts[key]; r != nil {
			return r, nil
		}
		r, err := kernelrt.New(kernelrt.Options{Threads: 1, NoPin: true, Backend: backend, Variant: variant, Thresholds: "default"})
		if err != nil {
			return nil, err
		}
		rts[key] = r
		return r, nil
	}
	for _, c := range parity.Cases(true) {
		if !c.Calib {
			continue
		}
		_, serial := rt.KernelsFor(c.Op)
		backend, _, _ := strings.Cut(serial, "/")
		c.Prepare()
		ns := map[string]float64{}
		for _, v := range vs {
			r, err := one(backend, v)
			if err != nil {
				c.Release()
				return fmt.Errorf("calibrate: %s: %w", c.Op, err)
			}
			if err := c.Call(r); err != nil {
				c.Release()
				return fmt.Errorf("calibrate: %s on %s/%s: %w", c.Op, backend, v, err)
			}
			ns[v] = medianNs(31, func() { _ = c.Call(r) })
		}
		c.Release()
		win := best
		for _, v := range vs {
			if ns[v] < ns[win]*(1-VariantMargin) && ns[v] < ns[best]*(1-VariantMargin) {
				win = v
			}
		}
		oc := th.Ops[c.Op.String()]
		oc.Variant, oc.VariantNs = win, ns
		th.Ops[c.Op.String()] = oc
	}
	return nil
}

// thresholdsOf is the calibration a table holds: its MinElements and variants.
func thresholdsOf(table []kernelrt.OpRow) *kernelrt.Thresholds {
	th := &kernelrt.Thresholds{Ops: map[string]kernelrt.OpCalibration{}}
	for _, row := range table {
		if row.MinElements[kernelrt.Decode] <= 0 || row.MinElements[kernelrt.Prefill] <= 0 {
			th.Ops[row.Name()] = kernelrt.OpCalibration{Variant: row.Variant}
			continue
		}
		th.Ops[row.Name()] = kernelrt.OpCalibration{Variant: row.Variant,
			MinElements: map[string]int{"decode": row.MinElements[kernelrt.Decode], "prefill": row.MinElements[kernelrt.Prefill]}}
	}
	return th
}

// kernelsOf names the kernels rt's split GEMVs run.
func kernelsOf(rt *kernelrt.Runtime) string {
	pooled, _ := rt.KernelsFor(kernelrt.OpGemvQ8_0)
	return pooled
}

// CaseTiming is one op's representative decode-size call timed under the current table.
type CaseTiming struct {
	Op     string
	Shape  kernelrt.Shape
	Active int
	Ns     float64 // median
}

// Time times every op's representative call with rt's thresholds, so the effect of a
// calibration can be shown before and after.
func Time(rt *kernelrt.Runtime) ([]CaseTiming, error) {
	var out []CaseTiming
	for _, c := range parity.Cases(true) {
		if !c.Calib {
			continue
		}
		c.Prepare()
		if err := c.Call(rt); err != nil {
			c.Release()
			return nil, fmt.Errorf("calibrate: timing %s: %w", c.Op, err)
		}
		mode := kernelrt.Decode
		if c.S.Tokens > 1 {
			mode = kernelrt.Prefill
		}
		active, _ := rt.Decide(c.Op, c.S, mode)
		out = append(out, CaseTiming{Op: c.Op.String(), Shape: c.S, Active: active,
			Ns: medianNs(201, func() { _ = c.Call(rt) })})
		c.Release()
	}
	return out, nil
}
