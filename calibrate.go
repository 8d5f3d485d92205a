package kernelrt

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/kernelrt/kernelrt/internal/cpu"
)

// CalibrationSafety is how many dispatch costs of work a worker must get before waking it
// pays: with 3, two workers finish in at most (w+d)/(2w) <= 2/3 of the serial time.
const CalibrationSafety = 3

// CalibrationMinShareNs is the least time a worker's share of a memory-bound op must take,
// whatever the dispatch cost: a second core needs about a microsecond to get its memory stream going, so a tiny
// memory-bound call does not speed up when split (measured: a 128x896 Q5_0 GEMV ran 2.6 us
// serial and 4.2 us split over 2 threads, with a 0.11 us dispatch).
const CalibrationMinShareNs = 2000

// emptyTask is the task whose dispatch cost Calibrate measures.
type emptyTask struct{}

func (*emptyTask) Run(int, int) {}

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

// calibCase is one op's representative call at decode size, with its work measure.
type calibCase struct {
	op    Op
	shape Shape
	call  func() error
}

// Calibrate measures this machine's dispatch cost (an empty dispatch to every worker, back
// to back) and every op's serial cost per element at decode sizes, sets each row's
// MinElements to CalibrationSafety dispatch costs of work (and, for memory-bound rows, at
// least CalibrationMinShareNs of it), and returns the data so it can be
// saved (WriteJSON) and loaded by New (Options.Thresholds). It takes about a second.
func (rt *Runtime) Calibrate() (*Thresholds, error) {
	if err := rt.checkOpen("Calibrate"); err != nil {
		return nil, err
	}
	th := &Thresholds{CPU: cpu.Model(), Threads: rt.threads, Kernels: rt.sets[OpGemvQ8_0].Name(),
		Measured: time.Now().UTC().Format(time.RFC3339), Ops: map[string]OpCalibration{}}
	if rt.threads > 1 {
		var t emptyTask
		for i := 0; i < 1000; i++ { // warm up: workers spinning, caches hot
			rt.pool.Dispatch(&t)
		}
		th.DispatchNs = medianNs(4001, func() { rt.pool.Dispatch(&t) })
	}
	cases, err := rt.calibCases()
	if err != nil {
		return nil, err
	}
	saved := rt.table
	for i := range rt.table { // force serial while measuring per-element cost
		rt.table[i].MinElements = [numModes]int{math.MaxInt, math.MaxInt}
	}
	for _, c := range cases {
		if err := c.call(); err != nil {
			rt.table = saved
			return nil, fmt.Errorf("kernelrt: calibrating %s: %w", c.op, err)
		}
		ns := medianNs(51, func() { _ = c.call() })
		el := rt.table[c.op].Elements(c.shape)
		per := ns / float64(max(el, 1))
		minEl := 1 << 30
		if th.DispatchNs > 0 && per > 0 {
			share := CalibrationSafety * th.DispatchNs
			if rt.table[c.op].MemoryBound {
				share = max(share, CalibrationMinShareNs)
			}
			minEl = max(1024, int(math.Ceil(share/per)))
		}
		th.Ops[c.op.String()] = OpCalibration{NsPerElement: per,
			MinElements: map[string]int{"decode": minEl, "prefill": minEl}}
	}
	rt.table = saved
	if err := rt.applyThresholds(th); err != nil {
		return nil, err
	}
	rt.thrSrc = "Calibrate at " + th.Measured
	return th, nil
}

// calibCases builds every op's decode-size call on buffers of its own (Qwen2-0.5B shapes).
func (rt *Runtime) calibCases() ([]calibCase, error) {
	const H, I, heads, kvh, hd, ctx = 896, 4864, 14, 2, 64, 512
	rnd := uint32(1)
	fill := func(s []float32) []float32 {
		for i := range s {
			rnd = rnd*1664525 + 1013904223
			s[i] = float32(int32(rnd>>8)-(1<<23)) / (1 << 23)
		}
		return s
	}
	f := func(n int) []float32 { return fill(make([]float32, n)) }
	w8 := make([]BlockQ8_0, H*H/QK)
	w5 := make([]BlockQ5_0, H*H/QK)
	if err := QuantizeQ8_0(w8, f(H*H)); err != nil {
		return nil, err
	}
	if err := QuantizeQ5_0(w5, f(H*H)); err != nil {
		return nil, err
	}
	const T = 32
	xf := f(T * H)
	xq := make([]BlockQ8_0, T*H/QK)
	if err := QuantizeQ8_0(xq, xf); err != nil {
		return nil, err
	}
	y := make([]float32, T*H)
	wf := f(H * H)
	scr := make([]BlockQ8_0, H/QK)
	gate, up, hb := f(I), f(I), make([]float32, I)
	tab, err := NewRopeTable(hd, ctx, 1e6)
	if err != nil {
		return nil, err
	}
	q := f(heads * hd)
	kc, vc := f(kvh*ctx*hd), f(kvh*ctx*hd)
	att := make([]float32, heads*hd)
	ascr := make([]float32, ctx)
	sm := f(heads * ctx)
	norm := f(H)
	ids := []int32{7}
	return []calibCase{
		{OpQuantizeQ8_0, Shape{N: I, Tokens: 1}, func() error { return rt.QuantizeQ8_0(xq[:I/QK], xf[:I]) }},
		{OpGemvQ8_0, Shape{Rows: H, Cols: H, Tokens: 1}, func() error { return rt.GemvQ8_0(y[:H], w8, xq[:H/QK], H, H) }},
		{OpGemvQ5_0, Shape{Rows: H, Cols: H, Tokens: 1}, func() error { return rt.GemvQ5_0(y[:H], w5, xq[:H/QK], H, H) }},
		{OpGemvQ8_0F32, Shape{Rows: H, Cols: H, Tokens: 1}, func() error { return rt.GemvQ8_0F32(y[:H], w8, xf[:H], nil, scr, H, H) }},
		{OpGemvQ5_0F32, Shape{Rows: H, Cols: H, Tokens: 1}, func() error { return rt.GemvQ5_0F32(y[:H], w5, xf[:H], nil, scr, H, H) }},
		{OpGemvF32, Shape{Rows: H, Cols: H, Tokens: 1}, func() error { return rt.GemvF32(y[:H], wf, xf[:H], H, H) }},
		{OpGemmQ8_0, Shape{Rows: H, Cols: H, Tokens: T}, func() error { return rt.GemmQ8_0(y, w8, xq, nil, H, H, T) }},
		{OpGemmQ5_0, Shape{Rows: H, Cols: H, Tokens: T}, func() error { return rt.GemmQ5_0(y, w5, xq, nil, H, H, T) }},
		{OpRMSNorm, Shape{Tokens: 4, Cols: H}, func() error { return rt.RMSNorm(y[:4*H], xf[:4*H], norm, 4, H, 1e-6) }},
		{OpSoftmax, Shape{Rows: heads, Cols: ctx, Tokens: heads}, func() error { return rt.Softmax(sm, heads, ctx) }},
		{OpSwiGLU, Shape{N: I, Tokens: 1}, func() error { return rt.SwiGLU(hb, gate, up) }},
		{OpAdd, Shape{N: I, Tokens: 1}, func() error { return rt.Add(hb, gate, up) }},
		{OpRope, Shape{Tokens: 1, Heads: heads, HeadD: hd}, func() error { return rt.RopeNeoX(q, tab, 1, heads, hd, heads*hd, 100) }},
		{OpKVAppend, Shape{Tokens: 1, KVHeads: kvh, HeadD: hd}, func() error { return rt.KVAppend(kc, q[:kvh*hd], 1, kvh*hd, kvh, hd, ctx, 100) }},
		{OpAttention, Shape{Tokens: 1, Heads: heads, KVHeads: kvh, HeadD: hd, Ctx: ctx},
			func() error { return rt.Attention(att, q, kc, vc, ascr, 1, heads*hd, heads, kvh, hd, ctx, ctx-1) }},
		{OpEmbed, Shape{Tokens: 1, Cols: H}, func() error { return rt.EmbedQ8_0(y[:H], w8, ids, H, H) }},
	}, nil
}

// CaseTiming is one op's representative decode-size call timed under the current table.
type CaseTiming struct {
	Op     string
	Shape  Shape
	Active int
	Ns     float64 // median
}

// TimeCases times every op's representative decode-size call (the ones Calibrate measures)
// with the thresholds in use, so the effect of a calibration can be shown before and after.
func (rt *Runtime) TimeCases() ([]CaseTiming, error) {
	if err := rt.checkOpen("TimeCases"); err != nil {
		return nil, err
	}
	cases, err := rt.calibCases()
	if err != nil {
		return nil, err
	}
	out := make([]CaseTiming, 0, len(cases))
	for _, c := range cases {
		if err := c.call(); err != nil {
			return nil, fmt.Errorf("kernelrt: timing %s: %w", c.op, err)
		}
		mode := Decode
		if c.shape.Tokens > 1 {
			mode = Prefill
		}
		active, _ := rt.Decide(c.op, c.shape, mode)
		out = append(out, CaseTiming{Op: c.op.String(), Shape: c.shape, Active: active,
			Ns: medianNs(201, func() { _ = c.call() })})
	}
	return out, nil
}
