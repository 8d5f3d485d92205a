package orchestrator

import (
	"fmt"
	"strings"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
)

// KVType is the storage type of the KV cache.
type KVType int

// KV cache types.
const (
	// KVF32 stores keys and values as float32 (the default).
	KVF32 KVType = iota
	// KVF16 stores them as IEEE fp16 (rounded to nearest even), halving the cache.
	KVF16
)

// String returns "f32" or "f16".
func (k KVType) String() string {
	if k == KVF16 {
		return "f16"
	}
	return "f32"
}

// ParseKVType parses "f32" or "f16".
func ParseKVType(s string) (KVType, error) {
	switch strings.ToLower(s) {
	case "f32", "":
		return KVF32, nil
	case "f16":
		return KVF16, nil
	}
	return 0, fmt.Errorf("orchestrator: KV cache type %q: want f32 or f16", s)
}

// kvCache is every layer's keys and values for each slot (sequence), laid out
// [slot][kv head][MaxCtx][head dim] per layer. An F16 cache keeps fp16 rows and, for
// attention, expands the layer and slot it attends into one float32 buffer shared by all.
type kvCache struct {
	typ      KVType
	per      int         // values of one slot of one layer: KVHeads*MaxCtx*HeadDim
	k, v     [][]float32 // F32: per layer; F16: one slot's float32 copy in k[0], v[0]
	k16, v16 [][]uint16  // F16: per layer
}

// planKV adds the cache of c to p.
func planKV(p *arena.Plan, c Config, typ KVType) {
	n := c.KVHeads * c.MaxCtx * c.HeadDim * c.slots()
	f32Layers := c.Layers
	if typ == KVF16 {
		f32Layers = 1
		for l := 0; l < c.Layers; l++ {
			p.Add(arena.Buffer{Name: fmt.Sprintf("kv16.%d.k", l), ElemSize: 2, Count: n, Region: arena.KV})
			p.Add(arena.Buffer{Name: fmt.Sprintf("kv16.%d.v", l), ElemSize: 2, Count: n, Region: arena.KV})
		}
	}
	if typ == KVF16 {
		n = c.KVHeads * c.MaxCtx * c.HeadDim // the expansion holds one slot
	}
	for l := 0; l < f32Layers; l++ {
		p.Add(arena.Buffer{Name: fmt.Sprintf("kv.%d.k", l), ElemSize: 4, Count: n, Region: arena.KV})
		p.Add(arena.Buffer{Name: fmt.Sprintf("kv.%d.v", l), ElemSize: 4, Count: n, Region: arena.KV})
	}
}

// bind points the cache into the arena.
func (kv *kvCache) bind(a *arena.Arena, l *arena.Layout, c Config, typ KVType) error {
	kv.typ = typ
	kv.per = c.KVHeads * c.MaxCtx * c.HeadDim
	f32Layers := c.Layers
	if typ == KVF16 {
		f32Layers = 1
		kv.k16, kv.v16 = make([][]uint16, c.Layers), make([][]uint16, c.Layers)
		for i := 0; i < c.Layers; i++ {
			var err error
			if kv.k16[i], err = arena.Get[uint16](a, l, fmt.Sprintf("kv16.%d.k", i)); err != nil {
				return err
			}
			if kv.v16[i], err = arena.Get[uint16](a, l, fmt.Sprintf("kv16.%d.v", i)); err != nil {
				return err
			}
		}
	}
	kv.k, kv.v = make([][]float32, f32Layers), make([][]float32, f32Layers)
	for i := 0; i < f32Layers; i++ {
		var err error
		if kv.k[i], err = arena.Get[float32](a, l, fmt.Sprintf("kv.%d.k", i)); err != nil {
			return err
		}
		if kv.v[i], err = arena.Get[float32](a, l, fmt.Sprintf("kv.%d.v", i)); err != nil {
			return err
		}
	}
	return nil
}

// attend stores the T tokens' keys and values of layer li in slot at positions pos0.. and
// runs attention over the slot's positions 0..pos0+T-1 into att.
func (kv *kvCache) attend(e kernelrt.Ops, m *Model, li, slot, pos0 int, att, qv, kvals, vvals []float32, T, qs, ks, vs int) error {
	c := &m.Cfg
	hd, nkv, ctx := c.HeadDim, c.KVHeads, c.MaxCtx
	lo, hi := slot*kv.per, (slot+1)*kv.per
	if kv.typ == KVF32 {
		kc, vc := kv.k[li][lo:hi], kv.v[li][lo:hi]
		if err := e.KVAppend(kc, kvals, T, ks, nkv, hd, ctx, pos0); err != nil {
			return err
		}
		if err := e.KVAppend(vc, vvals, T, vs, nkv, hd, ctx, pos0); err != nil {
			return err
		}
		return e.Attention(att, qv, kc, vc, m.attScratch, T, qs, c.Heads, nkv, hd, ctx, pos0)
	}
	k16, v16 := kv.k16[li][lo:hi], kv.v16[li][lo:hi]
	for t := 0; t < T; t++ {
		for g := 0; g < nkv; g++ {
			dst := (g*ctx + pos0 + t) * hd
			toFP16(k16[dst:dst+hd], kvals[t*ks+g*hd:t*ks+(g+1)*hd])
			toFP16(v16[dst:dst+hd], vvals[t*vs+g*hd:t*vs+(g+1)*hd])
		}
	}
	kf, vf := kv.k[0], kv.v[0]
	tab := fp16Table()
	n := (pos0 + T) * hd
	for g := 0; g < nkv; g++ {
		a, b := g*ctx*hd, g*ctx*hd+n
		fromFP16(kf[a:b], k16[a:b], tab)
		fromFP16(vf[a:b], v16[a:b], tab)
	}
	return e.Attention(att, qv, kf, vf, m.attScratch, T, qs, c.Heads, nkv, hd, ctx, pos0)
}

func toFP16(dst []uint16, src []float32) {
	for i, v := range src[:len(dst)] {
		dst[i] = kernelrt.FP32ToFP16(v)
	}
}

func fromFP16(dst []float32, src []uint16, tab *[1 << 16]float32) {
	dst = dst[:len(src)]
	for i, h := range src {
		dst[i] = tab[h]
	}
}

// KV is the model's KV cache type.
func (m *Model) KV() KVType { return m.kv.typ }

// KVBytes is the memory of the KV cache proper (every layer's keys and values); an F16
// cache also uses one layer's float32 buffer, counted in KVScratchBytes.
func (m *Model) KVBytes() int {
	c := &m.Cfg
	per := 2 * c.Layers * c.KVHeads * c.MaxCtx * c.HeadDim * c.slots()
	if m.kv.typ == KVF16 {
		return per * 2
	}
	return per * 4
}

// KVScratchBytes is the float32 buffer an F16 cache is expanded into (0 for an F32 cache).
func (m *Model) KVScratchBytes() int {
	if m.kv.typ != KVF16 {
		return 0
	}
	c := &m.Cfg
	return 2 * c.KVHeads * c.MaxCtx * c.HeadDim * 4
}
