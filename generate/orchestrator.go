package generate

import (
	"errors"
	"fmt"

	"github.com/kernelrt/kernelrt/orchestrator"
)

// FromOrchestrator adapts an orchestrator.Model to Model. orchestrator.Model can only empty
// its cache (Reset), so Truncate succeeds for n = 0 and n = Pos() and otherwise returns
// errors.ErrUnsupported: a prompt that extends the cached tokens reuses them, one that
// diverges is prefilled from the start. (Once orchestrator.Model has Truncate, MaxCtx and
// Vocab methods it satisfies Model itself and this adapter can go.)
func FromOrchestrator(m *orchestrator.Model) Model { return orchModel{m} }

type orchModel struct{ m *orchestrator.Model }

func (o orchModel) Prefill(ops Ops, ids []int32) ([]float32, error) { return o.m.Prefill(ops, ids) }
func (o orchModel) Decode(ops Ops, id int32) ([]float32, error)     { return o.m.Decode(ops, id) }
func (o orchModel) Pos() int                                        { return o.m.Pos() }
func (o orchModel) MaxCtx() int                                     { return o.m.Cfg.MaxCtx }
func (o orchModel) Vocab() int                                      { return o.m.Cfg.Vocab }

func (o orchModel) Truncate(n int) error {
	switch {
	case n == o.m.Pos():
		return nil
	case n == 0:
		o.m.Reset()
		return nil
	case n < 0 || n > o.m.Pos():
		return fmt.Errorf("generate: Truncate(%d) with %d tokens in the cache", n, o.m.Pos())
	}
	return fmt.Errorf("generate: orchestrator.Model cannot keep %d of its %d cached tokens: %w", n, o.m.Pos(), errors.ErrUnsupported)
}
