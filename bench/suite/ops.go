package suite

import (
	"fmt"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/parity"
)

// ops times every op of the dispatch table through the Runtime at 1 and all threads, on
// its representative decode-size call (parity's Calib case, so a new op is measured without
// a line here), then RMSNorm, softmax and attention at prefill and long-context sizes.
func (b *bench) ops() error {
	cases := parity.Cases(true)
	if b.s.SmallOps {
		cases = parity.Smallest(cases)
	}
	for _, pc := range cases {
		if !pc.Calib && !b.s.SmallOps {
			continue
		}
		pc.Prepare()
		for _, thr := range b.thr {
			rt := b.rt(thr)
			var t Timing
			err := pinned(rt, func() (err error) {
				t, err = b.sample(10, func(int) error { return pc.Call(rt) })
				return err
			})
			if err != nil {
				pc.Release()
				return fmt.Errorf("%s %s: %w", pc.Op, pc.Shape, err)
			}
			mode := kernelrt.Decode
			if pc.S.Tokens > 1 {
				mode = kernelrt.Prefill
			}
			active, _ := rt.Decide(pc.Op, pc.S, mode)
			b.r.Ops = append(b.r.Ops, OpTiming{Op: pc.Op.String(), Shape: pc.Shape, Threads: thr, Active: active, Timing: t})
			b.logf("%-15s %-40s thr %d (active %d): %9.2f µs", pc.Op, pc.Shape, thr, active, t.MedianUs)
		}
		pc.Release()
	}
	return b.opSizes()
}

// opSizes times RMSNorm, softmax and attention at prefill and long-context sizes.
func (b *bench) opSizes() error {
	s := &b.s
	c := s.cfg
	H, T := c.Hidden, s.PrefillTokens
	qd := c.Heads * c.HeadDim
	maxCtx := T
	for _, n := range s.AttnCtx {
		maxCtx = max(maxCtx, n)
	}
	seed := s.Seed + 11
	rmsX := randFloats(T*H, seed, 2)
	rmsW := randFloats(H, seed+1, 1)
	rmsOut := make([]float32, T*H)
	smCols := []int{512, 4096}
	sm := randFloats(c.Heads*smCols[1], seed+2, 4)
	// Attention over an F16 cache, the default type (kernelrt bench -depth times every type
	// in a whole model).
	kc := toHalves(randFloats(c.KVHeads*maxCtx*c.HeadDim, seed+3, 1))
	vc := toHalves(randFloats(c.KVHeads*maxCtx*c.HeadDim, seed+4, 1))
	q := randFloats(T*qd, seed+5, 1)
	out := make([]float32, T*qd)
	scr := make([]float32, kernelrt.AttnScratchFloats(c.HeadDim))

	type opCase struct {
		op    string
		shape string
		kop   kernelrt.Op
		ks    kernelrt.Shape
		mode  kernelrt.Mode
		run   func(rt *kernelrt.Runtime) error
	}
	mode := func(tokens int) kernelrt.Mode {
		if tokens > 1 {
			return kernelrt.Prefill
		}
		return kernelrt.Decode
	}
	var cases []opCase
	for _, tk := range []int{1, T} {
		tk := tk
		cases = append(cases, opCase{"rmsnorm", fmt.Sprintf("%dx%d", tk, H), kernelrt.OpRMSNorm,
			kernelrt.Shape{Tokens: tk, Cols: H}, mode(tk), func(rt *kernelrt.Runtime) error {
				return rt.RMSNorm(rmsOut[:tk*H], rmsX[:tk*H], rmsW, tk, H, c.Eps)
			}})
	}
	for _, cols := range smCols {
		cols := cols
		rows := c.Heads
		cases = append(cases, opCase{"softmax", fmt.Sprintf("%dx%d", rows, cols), kernelrt.OpSoftmax,
			kernelrt.Shape{Rows: rows, Cols: cols, Tokens: rows}, mode(rows), func(rt *kernelrt.Runtime) error {
				return rt.Softmax(sm[:rows*cols], rows, cols)
			}})
	}
	attn := func(tokens, pos0 int) func(rt *kernelrt.Runtime) error {
		return func(rt *kernelrt.Runtime) error {
			return rt.AttentionF16(out[:tokens*qd], q[:tokens*qd], kc, vc, scr, tokens, qd, c.Heads, c.KVHeads, c.HeadDim, maxCtx, pos0, 0)
		}
	}
	for _, ctx := range s.AttnCtx {
		cases = append(cases, opCase{"attention", fmt.Sprintf("f16 decode T=1 ctx %d", ctx), kernelrt.OpAttnDecodeF16,
			kernelrt.Shape{Tokens: 1, Heads: c.Heads, KVHeads: c.KVHeads, HeadD: c.HeadDim, Ctx: ctx}, kernelrt.Decode, attn(1, ctx-1)})
	}
	cases = append(cases, opCase{"attention", fmt.Sprintf("f16 prefill T=%d", T), kernelrt.OpAttnPrefillF16,
		kernelrt.Shape{Tokens: T, Heads: c.Heads, KVHeads: c.KVHeads, HeadD: c.HeadDim, Ctx: T}, mode(T), attn(T, 0)})

	for _, oc := range cases {
		for _, thr := range b.thr {
			rt := b.rt(thr)
			var t Timing
			err := pinned(rt, func() (err error) {
				t, err = b.sample(10, func(int) error { return oc.run(rt) })
				return err
			})
			if err != nil {
				return fmt.Errorf("%s %s: %w", oc.op, oc.shape, err)
			}
			active, _ := rt.Decide(oc.kop, oc.ks, oc.mode)
			b.r.Ops = append(b.r.Ops, OpTiming{Op: oc.op, Shape: oc.shape, Threads: thr, Active: active, Timing: t})
			b.logf("%-9s %-22s thr %d (active %d): %9.2f µs", oc.op, oc.shape, thr, active, t.MedianUs)
		}
	}
	return nil
}

// toHalves rounds floats to IEEE halves (an F16 KV cache).
func toHalves(x []float32) []uint16 {
	h := make([]uint16, len(x))
	for i, v := range x {
		h[i] = kernelrt.FP32ToFP16(v)
	}
	return h
}
