package parity

import (
	"fmt"
	"math"
	"strconv"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/internal/kern"
	"github.com/kernelrt/kernelrt/orchestrator"
)

const (
	promptLen   = 7
	decodeSteps = 4
	modelSeed   = 20240601
)

// smallConfig is the quick run's Qwen2-shaped model: 2 layers, hidden 128, 4 heads over 2 KV
// heads of 32, vocab 1000.
func smallConfig() orchestrator.Config {
	return orchestrator.Config{Layers: 2, Hidden: 128, Intermediate: 384, Heads: 4, KVHeads: 2, HeadDim: 32,
		Vocab: 1000, RopeTheta: 1e6, Eps: 1e-6, MaxCtx: 64, MaxBatch: 16}
}

func modelConfig(quick bool) (orchestrator.Config, string) {
	if quick {
		c := smallConfig()
		return c, fmt.Sprintf("%dL h%d %d/%dx%d v%d p%d+d%d", c.Layers, c.Hidden, c.Heads, c.KVHeads, c.HeadDim, c.Vocab, promptLen, decodeSteps)
	}
	c := orchestrator.Qwen2_0_5B()
	c.MaxCtx = 64
	return c, fmt.Sprintf("qwen2-0.5b %dL h%d v%d p%d+d%d", c.Layers, c.Hidden, c.Vocab, promptLen, decodeSteps)
}

// tokens returns the fixed prompt and decode tokens.
func modelTokens(vocab int) (prompt, next []int32) {
	r := newRng("model/tokens")
	for i := 0; i < promptLen; i++ {
		prompt = append(prompt, int32(r.next()%uint64(vocab)))
	}
	for i := 0; i < decodeSteps; i++ {
		next = append(next, int32(r.next()%uint64(vocab)))
	}
	return prompt, next
}

// forward runs the prompt and the decode steps from position 0, copying every step's logits
// (prefill's last token, then each decode) into dst.
func forward(m *orchestrator.Model, e kernelrt.Ops, prompt, next []int32, dst []float32) error {
	v := m.Cfg.Vocab
	m.Reset()
	logits, err := m.Prefill(e, prompt)
	if err != nil {
		return err
	}
	copy(dst[:v], logits)
	for i, tok := range next {
		if logits, err = m.Decode(e, tok); err != nil {
			return err
		}
		copy(dst[(i+1)*v:][:v], logits)
	}
	return nil
}

// runModels compares, per recipe and backend/variant, the pooled forward pass (Runtime) with
// the serial one (kernelrt.Serial): with the table's thresholds and with every op forced to
// split as far as it goes.
func (s *Suite) runModels() {
	cfg, shape := modelConfig(s.cfg.Quick)
	prompt, next := modelTokens(cfg.Vocab)
	ser := make([]float32, (1+decodeSteps)*cfg.Vocab)
	pool := make([]float32, len(ser))
	for _, recipe := range []orchestrator.Recipe{orchestrator.RecipeQ8_0(), orchestrator.RecipeMixed()} {
		s.progress("model %s %s: building ...", recipe.Name, shape)
		m, err := orchestrator.NewSynthetic(cfg, recipe, modelSeed, orchestrator.BuildOptions{})
		s.progress(" done\n")
		base := Row{Op: "model", Fn: recipe.Name, Shape: shape, Threads: "-", Active: "-", MaxAbs: math.NaN(), MaxRel: math.NaN()}
		if err != nil {
			r := base
			r.Status, r.Note = "FAIL", fmt.Sprintf("NewSynthetic: %v", err)
			s.add(r)
			continue
		}
		for _, k := range s.sets {
			s.progress("model %s %s ...\n", recipe.Name, k.name())
			s.modelSet(m, k, base, prompt, next, ser, pool)
		}
		m.Close()
	}
}

func (s *Suite) modelSet(m *orchestrator.Model, k kset, base Row, prompt, next []int32, ser, pool []float32) {
	base.Kernels = k.name()
	if why := k.lacksAny(); why != "" {
		base.Status, base.Note = "SKIP", why
		s.add(base)
		return
	}
	fail := func(r Row, format string, a ...any) {
		r.Status, r.Note = "FAIL", fmt.Sprintf(format, a...)
		s.add(r)
	}
	defer kern.UseSet(k.set)()
	var serial exec = kernelrt.Serial{}
	if s.cfg.WrapSerial != nil {
		serial = s.cfg.WrapSerial(serial)
	}
	s.beat(fmt.Sprintf("model %s on %s, serial", base.Fn, k.name()))
	err := call(func() error { return forward(m, serial, prompt, next, ser) })
	s.idle()
	if err != nil {
		fail(base, "serial forward: %v", err)
		return
	}
	for i, v := range ser {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			fail(base, "serial logits[%d] = %v", i, v)
			return
		}
	}
	for _, th := range s.cfg.ModelThreads {
		e, err := s.runtime(k, th)
		if err != nil {
			r := base
			r.Threads = strconv.Itoa(th)
			fail(r, "kernelrt.New: %v", err)
			continue
		}
		var pooled exec = e.rt
		if s.cfg.WrapPooled != nil {
			pooled = s.cfg.WrapPooled(pooled)
		}
		for _, split := range []string{"table", "all"} {
			r := base
			r.Threads, r.Active = strconv.Itoa(th), split
			e.restoreThresholds()
			if split == "all" {
				for op := 0; op < kernelrt.NumOps; op++ {
					e.rt.SetMinElements(kernelrt.Op(op), 1, 1)
				}
			}
			e.rt.ResetReport()
			s.beat(fmt.Sprintf("model %s on %s, pooled threads=%d split=%s", base.Fn, k.name(), th, split))
			err := call(func() error { return forward(m, pooled, prompt, next, pool) })
			s.idle()
			e.restoreThresholds()
			if err != nil {
				fail(r, "pooled forward: %v", err)
				continue
			}
			calls, nsplit := 0, 0
			for _, o := range e.rt.Report() {
				calls += o.Calls
				nsplit += o.Calls - o.Serial
			}
			r.MaxAbs = maxAbsF(pool, ser)
			r.Status = "PASS"
			r.Note = fmt.Sprintf("%d of %d recorded dispatches split", nsplit, calls)
			if !(r.MaxAbs <= 1e-3) {
				r.Status = "FAIL"
				r.Note += "; logits differ by more than 1e-3"
			} else if r.MaxAbs != 0 {
				r.Note += "; logits not bit-identical"
			}
			s.add(r)
		}
	}
}
