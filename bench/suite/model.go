package suite

import (
	"cmp"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
	"github.com/kernelrt/kernelrt/orchestrator"
)

// traceCap is the report ring of the breakdown runtime: one decode token of a 24-layer model
// is about 500 dispatches.
const traceCap = 1 << 14

// models measures decode and prefill of each model (the two synthetic recipes, or the
// hook's model) and breaks one decode token down per op.
func (b *bench) models() error {
	s := &b.s
	build := orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}}
	type source struct {
		name, src string
		open      func() (*orchestrator.Model, error)
	}
	var srcs []source
	if s.Model != nil {
		srcs = append(srcs, source{name: "model from hook", src: "hook", open: func() (*orchestrator.Model, error) {
			m, label, err := s.Model(build)
			if err != nil {
				return nil, err
			}
			if m == nil {
				return nil, fmt.Errorf("the model hook returned no model")
			}
			srcs[0].name, srcs[0].src = label, label
			return m, nil
		}})
	} else {
		for _, rc := range []orchestrator.Recipe{orchestrator.RecipeQ8_0(), orchestrator.RecipeMixed()} {
			rc := rc
			srcs = append(srcs, source{name: "synthetic " + rc.Name, src: "synthetic", open: func() (*orchestrator.Model, error) {
				return orchestrator.NewSynthetic(s.cfg, rc, s.Seed, build)
			}})
		}
	}
	rtT := b.rtT
	for i := range srcs {
		b.logf("building model %s", srcs[i].name)
		t0 := time.Now()
		m, err := srcs[i].open()
		if err != nil {
			return fmt.Errorf("model %s: %w", srcs[i].name, err)
		}
		res := ModelResult{Name: srcs[i].name, Source: srcs[i].src, Recipe: m.Recipe.Name, Config: describeConfig(m.Cfg),
			WeightBytes: m.WeightBytes(), BuildSeconds: time.Since(t0).Seconds()}
		if res.Name == "" {
			res.Name = "model " + m.Recipe.Name
		}
		res.Arena = b.arenaInfo("model "+res.Name, m.Arena())
		b.logf("built in %.1f s: %s weights per token, %s pages, %s huge-backed", res.BuildSeconds,
			mib(res.WeightBytes), res.Arena.PageKind, mib(res.Arena.HugeBacked))
		err = b.measureModel(m, &res)
		if err == nil {
			err = b.breakdown(m, rtT, res.Name)
		}
		m.Close()
		if err != nil {
			return fmt.Errorf("model %s: %w", res.Name, err)
		}
		b.r.Models = append(b.r.Models, res)
	}
	return nil
}

// tokens returns n random token ids of the model's vocabulary.
func (b *bench) tokens(m *orchestrator.Model, n int) []int32 {
	r := rand.New(rand.NewPCG(b.s.Seed, 17))
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(r.IntN(m.Cfg.Vocab))
	}
	return ids
}

// decodeRun decodes n tokens one at a time from an empty cache (llama-bench tg: no prompt)
// and returns tokens/s.
func decodeRun(m *orchestrator.Model, e kernelrt.Ops, ids []int32) (float64, error) {
	m.Reset()
	t0 := time.Now()
	for _, id := range ids {
		if _, err := m.Decode(e, id); err != nil {
			return 0, err
		}
	}
	return float64(len(ids)) / time.Since(t0).Seconds(), nil
}

// prefillRun prefills ids from an empty cache (llama-bench pp) and returns tokens/s.
func prefillRun(m *orchestrator.Model, e kernelrt.Ops, ids []int32) (float64, error) {
	m.Reset()
	t0 := time.Now()
	if _, err := m.Prefill(e, ids); err != nil {
		return 0, err
	}
	return float64(len(ids)) / time.Since(t0).Seconds(), nil
}

func (b *bench) measureModel(m *orchestrator.Model, res *ModelResult) error {
	s := &b.s
	nd := min(s.DecodeTokens, m.Cfg.MaxCtx-1)
	np := min(s.PrefillTokens, m.Cfg.MaxCtx)
	ids := b.tokens(m, max(nd, np))
	runs := make([]ModelRun, len(b.thr))
	peers := isQwen2_0_5B(m.Cfg)
	for i, thr := range b.thr {
		r := &runs[i]
		r.Threads, r.DecodeTokens, r.PrefillTokens = thr, nd, np
		r.BandwidthGBs = b.r.Bandwidth.GBs(thr)
		// Warm-up, as llama-bench does: a short prompt and a few decoded tokens.
		if err := pinned(b.rt(thr), func() error {
			if _, err := prefillRun(m, b.rt(thr), ids[:min(np, 16)]); err != nil {
				return err
			}
			_, err := decodeRun(m, b.rt(thr), ids[:min(nd, 4)])
			return err
		}); err != nil {
			return err
		}
	}
	// Repetitions interleave thread counts so that drifting machine load hits all alike.
	for rep := 0; rep < s.Repeats; rep++ {
		for i, thr := range b.thr {
			r := &runs[i]
			rt := b.rt(thr)
			err := pinned(rt, func() error {
				tg, err := decodeRun(m, rt, ids[:nd])
				if err != nil {
					return err
				}
				pp, err := prefillRun(m, rt, ids[:np])
				if err != nil {
					return err
				}
				r.DecodeSamples = append(r.DecodeSamples, tg)
				r.PrefillSamples = append(r.PrefillSamples, pp)
				b.logf("%s thr %d run %d/%d: tg%d %.2f tok/s, pp%d %.1f tok/s", res.Name, thr, rep+1, s.Repeats, nd, tg, np, pp)
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	m.Reset()
	wb := float64(res.WeightBytes)
	for i := range runs {
		r := &runs[i]
		r.DecodeTokS, r.PrefillTokS = median(r.DecodeSamples), median(r.PrefillSamples)
		r.DecodeLimit = r.BandwidthGBs * 1e9 / wb
		r.DecodePct = pct(r.DecodeTokS, r.DecodeLimit)
		r.DecodeWeightGB = r.DecodeTokS * wb / 1e9
		r.PrefillLimit = r.BandwidthGBs * 1e9 / (wb / float64(np))
		r.PrefillPct = pct(r.PrefillTokS, r.PrefillLimit)
		if peers {
			r.LlamaDecode, r.LlamaPrefill = llamaTokS(res.Recipe, r.Threads)
			r.VsLlamaDecode = ratio(r.DecodeTokS, r.LlamaDecode)
			r.VsLlamaPrefill = ratio(r.PrefillTokS, r.LlamaPrefill)
		}
	}
	res.Runs = runs
	if !peers {
		b.note("%s: not Qwen2-0.5B-shaped, so no llama.cpp comparison", res.Name)
	} else if nd != 64 || np != 128 {
		b.note("%s: measured tg%d/pp%d, llama.cpp's peers.md numbers are tg64/pp128", res.Name, nd, np)
	}
	return nil
}

// breakdown decodes a few tokens on the traced runtime, then records several single tokens
// (report ring reset before each) and keeps the one of median duration, so that one token
// disturbed by the machine does not stand for all.
func (b *bench) breakdown(m *orchestrator.Model, rt *kernelrt.Runtime, name string) error {
	warm := max(0, min(8, m.Cfg.MaxCtx-1))
	cands := 5
	if b.s.Quick {
		cands = 3
	}
	cands = max(1, min(cands, m.Cfg.MaxCtx-warm))
	ids := b.tokens(m, warm+cands)
	type cand struct {
		pos int
		us  float64
		rep []kernelrt.OpReport
	}
	var cs []cand
	err := pinned(rt, func() error {
		m.Reset()
		for _, id := range ids[:warm] {
			if _, err := m.Decode(rt, id); err != nil {
				return err
			}
		}
		for i := 0; i < cands; i++ {
			rt.ResetReport()
			t0 := time.Now()
			if _, err := m.Decode(rt, ids[warm+i]); err != nil {
				return err
			}
			us := float64(time.Since(t0).Nanoseconds()) / 1e3
			cs = append(cs, cand{warm + i, us, rt.Report()})
		}
		return nil
	})
	m.Reset()
	if err != nil {
		return err
	}
	slices.SortFunc(cs, func(a, b cand) int { return cmp.Compare(a.us, b.us) })
	c := cs[(len(cs)-1)/2]
	bd := Breakdown{Model: name, Threads: rt.Threads(), Position: c.pos, TokenUs: c.us, Candidates: len(cs)}
	for _, o := range c.rep {
		op := BreakdownOp{Op: o.Op, Mode: o.Mode, Kernels: o.Kernels, Calls: o.Calls, Serial: o.Serial, Active: o.Active,
			TotalUs: float64(o.TotalNs) / 1e3, MeanUs: o.MeanNs / 1e3, DispatchUs: o.DispatchNs / 1e3}
		op.Pct = pct(op.TotalUs, bd.TokenUs)
		bd.OpsUs += op.TotalUs
		bd.Ops = append(bd.Ops, op)
	}
	bd.OutsideUs = max(0, bd.TokenUs-bd.OpsUs)
	b.r.Breakdown = append(b.r.Breakdown, bd)
	b.logf("breakdown %s: token %.0f µs (median of %d), %d ops", name, bd.TokenUs, len(cs), len(bd.Ops))
	return nil
}

// depth measures decode at depth and long prefills of the synthetic Q8_0 model with each KV
// cache type on all threads (MeasureDepth). A model hook's model is not rebuilt per cache
// type: `kernelrt bench -model FILE -depth ...` measures a file.
func (b *bench) depth() error {
	s := &b.s
	if s.Model != nil {
		b.note("decode at depth: measured on the synthetic model only (kernelrt bench -model FILE -depth N,... for a file)")
		return nil
	}
	open := func(kv orchestrator.KVType, maxCtx, batch int) (*orchestrator.Model, error) {
		c := s.cfg
		c.KV, c.MaxCtx, c.MaxBatch = kv, maxCtx, batch
		b.logf("building synthetic q8_0 model, kv %s, %d positions", kv, maxCtx)
		return orchestrator.NewSynthetic(c, orchestrator.RecipeQ8_0(), s.Seed, orchestrator.BuildOptions{Arena: arena.Options{Prefault: true}})
	}
	o := DepthOptions{Depths: s.Depths, Prefill: s.DepthPrefill, Repeats: s.Repeats,
		DecodeTokens: min(32, s.DecodeTokens), Batch: min(512, max(s.cfg.MaxBatch, 16))}
	if s.Quick {
		o.StreamBytes = min(s.StreamBytes, 256<<20)
	}
	d, err := MeasureDepth(open, b.rtN, o, logWriter{b})
	if err != nil {
		return err
	}
	b.r.Depth = d
	return nil
}

// logWriter sends MeasureDepth's progress lines to the suite's log.
type logWriter struct{ b *bench }

func (w logWriter) Write(p []byte) (int, error) {
	w.b.logf("%s", strings.TrimRight(string(p), "\n"))
	return len(p), nil
}
