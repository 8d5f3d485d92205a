package orchestrator

import (
	"fmt"
	"strings"

	"github.com/kernelrt/kernelrt"
	"github.com/kernelrt/kernelrt/arena"
)

// KVType is the storage type of the KV cache. Attention reads the cache in its stored type
// (kernelrt.AttentionF32/F16/Q8_0): a smaller type means fewer bytes read per decoded token.
type KVType int

// KV cache types. The zero value is KVF16, llama.cpp's default (-ctk f16 -ctv f16), for
// LoadGGUF and NewSynthetic alike; ask for KVF32 where results must not round the cache.
const (
	// KVF16 stores keys and values as IEEE fp16 (rounded to nearest even): half of F32.
	KVF16 KVType = iota
	// KVF32 stores them as float32.
	KVF32
	// KVQ8_0 stores them as Q8_0 blocks of 32 values (34 bytes), as llama.cpp's
	// -ctk q8_0 -ctv q8_0: 53% of F16. It needs a head size that is a multiple of 32.
	KVQ8_0
	numKVTypes
)

// String returns "f16", "f32" or "q8_0".
func (k KVType) String() string {
	switch k {
	case KVF16:
		return "f16"
	case KVF32:
		return "f32"
	case KVQ8_0:
		return "q8_0"
	}
	return fmt.Sprintf("KVType(%d)", int(k))
}

// ParseKVType parses "f32", "f16" or "q8_0" (as llama.cpp's -ctk spells them); "" is the
// default, KVF16.
func ParseKVType(s string) (KVType, error) {
	switch strings.ToLower(s) {
	case "f16", "":
		return KVF16, nil
	case "f32":
		return KVF32, nil
	case "q8_0":
		return KVQ8_0, nil
	}
	return 0, fmt.Errorf("orchestrator: KV cache type %q: want f32, f16 or q8_0", s)
}

// valid reports whether k is one of the KV types.
func (k KVType) valid() bool { return k >= 0 && k < numKVTypes }

// bytesPer is the cache bytes of n values (n a multiple of 32 for Q8_0).
func (k KVType) bytesPer(n int) int {
	switch k {
	case KVF32:
		return 4 * n
	case KVQ8_0:
		return n / kernelrt.QK * 34
	}
	return 2 * n
}

// elems is how many cache elements hold n values (Q8_0: blocks).
func (k KVType) elems(n int) int {
	if k == KVQ8_0 {
		return n / kernelrt.QK
	}
	return n
}

// elemSize is the size of one cache element.
func (k KVType) elemSize() int {
	switch k {
	case KVF32:
		return 4
	case KVQ8_0:
		return 34
	}
	return 2
}

// kvCache is every layer's keys and values for each slot (sequence), in the cache's type,
// laid out [slot][kv head][rows][head dim] per layer: one region per slot. A global layer
// has MaxCtx rows, position p in row p. A sliding-window layer needs only the last window
// of positions, so when the model has them and a context longer than ring rows, those
// layers get ring rows (window-1 + max(window, MaxBatch)) holding positions base.. of the
// slot in rows 0..: when a step would write past the last row, the window's last
// window-1 positions move to the front first (compact). Attention then always reads
// contiguous rows, and the move costs about one row per generated token.
type kvCache struct {
	typ    KVType
	rows   []int // per layer: rows per KV head (MaxCtx, or ring on a sliding layer)
	per    []int // per layer: elements of one slot: KVHeads*rows*HeadDim values in typ
	ring   int   // rows of the sliding layers' cache, 0 when they hold all MaxCtx
	window int   // the sliding window, when ring > 0
	base   []int // per slot: the position in row 0 of the ring layers
	f32    [][2][]float32
	f16    [][2][]uint16
	q8     [][2][]kernelrt.BlockQ8_0
	scrF   []float32 // the caller's attention scratch (kernelrt.AttnScratchFloats)
}

// kvRows is the rows per KV head of every layer's cache, and the ring rows (0 = none).
func kvRows(c Config, a *archSpec) ([]int, int) {
	rows := make([]int, c.Layers)
	ring := 0
	if w := c.SlidingWindow; w > 0 {
		if r := w - 1 + max(w, c.MaxBatch); r < c.MaxCtx {
			ring = r
		}
	}
	for li := range rows {
		rows[li] = c.MaxCtx
		if ring > 0 && a.sliding(&c, li) {
			rows[li] = ring
		}
	}
	return rows, ring
}

// planKV adds the cache of c (c.KV) and the attention scratch to p.
func planKV(p *arena.Plan, c Config, a *archSpec) {
	rows, _ := kvRows(c, a)
	for l := 0; l < c.Layers; l++ {
		n := c.KV.elems(c.KVHeads * rows[l] * c.HeadDim * c.slots())
		for _, kv := range []string{"k", "v"} {
			p.Add(arena.Buffer{Name: fmt.Sprintf("kv.%d.%s", l, kv), ElemSize: c.KV.elemSize(), Count: n, Region: arena.KV})
		}
	}
	// The caller's (worker 0's) attention scratch; the Runtime's other workers use the
	// per-worker scratch of the Runtime's own arena.
	p.Add(arena.Buffer{Name: "scratch.attn", ElemSize: 4, Count: kernelrt.AttnScratchFloats(c.HeadDim), Region: arena.Scratch})
}

// bind points the cache into the arena.
func (kv *kvCache) bind(a *arena.Arena, l *arena.Layout, c Config, spec *archSpec) error {
	kv.typ = c.KV
	kv.rows, kv.ring = kvRows(c, spec)
	kv.window = c.SlidingWindow
	kv.base = make([]int, c.slots())
	kv.per = make([]int, c.Layers)
	for li, r := range kv.rows {
		kv.per[li] = c.KV.elems(c.KVHeads * r * c.HeadDim)
	}
	var err error
	if kv.scrF, err = arena.Get[float32](a, l, "scratch.attn"); err != nil {
		return err
	}
	switch c.KV {
	case KVF32:
		kv.f32, err = bindLayers[float32](a, l, c.Layers)
	case KVF16:
		kv.f16, err = bindLayers[uint16](a, l, c.Layers)
	default:
		kv.q8, err = bindLayers[kernelrt.BlockQ8_0](a, l, c.Layers)
	}
	return err
}

// continuable reports whether slot can continue at position pos: the ring layers still hold
// the window before it (always true without ring layers, and at position 0).
func (kv *kvCache) continuable(slot, pos int) bool {
	return kv.ring == 0 || pos == 0 || kv.base[slot] == 0 || pos-kv.window+1 >= kv.base[slot]
}

// prepare readies the ring layers for seqs (checked first, then changed): a sequence must
// continue where its ring still holds the window, and one whose tokens would pass the last
// row first moves the window's positions to the front.
func (kv *kvCache) prepare(c *Config, seqs []Seq) error {
	if kv.ring == 0 {
		return nil
	}
	for i, s := range seqs {
		if !kv.continuable(s.Slot, s.Pos) {
			return fmt.Errorf("orchestrator: seqs[%d] continues slot %d at position %d, but its sliding-window layers (window %d) hold positions %d on only",
				i, s.Slot, s.Pos, kv.window, kv.base[s.Slot])
		}
	}
	for _, s := range seqs {
		if s.Pos == 0 {
			kv.base[s.Slot] = 0
		}
		if s.Pos+s.N-kv.base[s.Slot] > kv.ring {
			kv.compact(c, s.Slot, s.Pos)
		}
	}
	return nil
}

// compact moves the ring layers' rows of positions pos-window+1..pos-1 of slot to the front.
func (kv *kvCache) compact(c *Config, slot, pos int) {
	nb := pos - kv.window + 1
	from, n := nb-kv.base[slot], kv.window-1
	row := kv.typ.bytesPer(c.HeadDim)
	for li, r := range kv.rows {
		if r != kv.ring {
			continue
		}
		for j := 0; j < 2; j++ {
			layer := kv.layerBytes(li, j)[slot*kv.per[li]*kv.typ.elemSize():]
			for h := 0; h < c.KVHeads; h++ {
				head := layer[h*r*row : (h+1)*r*row]
				copy(head[:n*row], head[from*row:(from+n)*row])
			}
		}
	}
	kv.base[slot] = nb
}

// layerBytes is layer li's K (j = 0) or V (j = 1) cache, every slot, as bytes.
func (kv *kvCache) layerBytes(li, j int) []byte {
	switch kv.typ {
	case KVF32:
		return asBytes(kv.f32[li][j])
	case KVF16:
		return asBytes(kv.f16[li][j])
	}
	return asBytes(kv.q8[li][j])
}

// bindLayers returns every layer's K and V buffers as T.
func bindLayers[T any](a *arena.Arena, l *arena.Layout, layers int) ([][2][]T, error) {
	out := make([][2][]T, layers)
	for i := range out {
		for j, kv := range []string{"k", "v"} {
			s, err := arena.Get[T](a, l, fmt.Sprintf("kv.%d.%s", i, kv))
			if err != nil {
				return nil, err
			}
			out[i][j] = s
		}
	}
	return out, nil
}

// attend stores the T tokens' keys and values of layer li in slot at positions pos0.. and
// runs attention over the slot's positions into att, reading the cache in its stored type:
// token t (position p = pos0+t) attends to positions 0..p, or with window > 0 (a
// sliding-window layer) only to the last window of them, p-window+1..p (llama.cpp masks a
// position k when p-k >= window). The attention ops attend to positions 0..p of the cache
// they are given, so a window is a view of each KV head's rows from p-window+1 on, one query
// token at a time; tokens whose window still starts at 0 share one call.
func (kv *kvCache) attend(e kernelrt.Ops, m *Model, li, slot, pos0, window int, att, qv, kvals, vvals []float32, T, qs, ks, vs int) error {
	c := &m.Cfg
	hd, nkv, ctx := c.HeadDim, c.KVHeads, kv.rows[li]
	lo, hi := slot*kv.per[li], (slot+1)*kv.per[li]
	if ctx != c.MaxCtx {
		// A ring layer: positions from base on, in rows from 0 (prepare made room).
		pos0 -= kv.base[slot]
	}
	var err error
	switch kv.typ {
	case KVF32:
		kc, vc := kv.f32[li][0][lo:hi], kv.f32[li][1][lo:hi]
		if err = e.KVAppend(kc, kvals, T, ks, nkv, hd, ctx, pos0); err == nil {
			err = e.KVAppend(vc, vvals, T, vs, nkv, hd, ctx, pos0)
		}
	case KVF16:
		kc, vc := kv.f16[li][0][lo:hi], kv.f16[li][1][lo:hi]
		if err = e.KVAppendF16(kc, kvals, T, ks, nkv, hd, ctx, pos0); err == nil {
			err = e.KVAppendF16(vc, vvals, T, vs, nkv, hd, ctx, pos0)
		}
	default:
		kc, vc := kv.q8[li][0][lo:hi], kv.q8[li][1][lo:hi]
		if err = e.KVAppendQ8_0(kc, kvals, T, ks, nkv, hd, ctx, pos0); err == nil {
			err = e.KVAppendQ8_0(vc, vvals, T, vs, nkv, hd, ctx, pos0)
		}
	}
	if err != nil {
		return err
	}
	qd := c.Heads * hd
	// Tokens at positions below window see every earlier position: one call for them.
	t0 := T
	if window > 0 {
		t0 = min(T, max(0, window-pos0))
	}
	if t0 > 0 {
		if err := kv.run(e, li, slot, att[:t0*qd], qv[:(t0-1)*qs+qd], t0, qs, c.Heads, nkv, 0, 0, pos0, hd, ctx, c.AttnSoftcap); err != nil {
			return err
		}
	}
	group := c.Heads / nkv
	gw := group * hd // one KV head's query heads
	for t := t0; t < T; t++ {
		p := pos0 + t
		first := p - window + 1
		for g := 0; g < nkv; g++ {
			out := att[t*qd+g*gw : t*qd+(g+1)*gw]
			q := qv[t*qs+g*gw : t*qs+(g+1)*gw]
			if err := kv.run(e, li, slot, out, q, 1, gw, group, 1, g, first, p, hd, ctx, c.AttnSoftcap); err != nil {
				return err
			}
		}
	}
	return nil
}

// run is one attention call over layer li's cache of slot: tokens query tokens of nHeads
// heads (q at stride qStride) over KV heads g0..g0+nKVHeads-1, positions first..pos0+t for
// token t. The cache it passes is the heads' rows from first on: a view with maxCtx - first
// positions per head (the ops locate head g at g*maxCtx rows), so the op's positions are
// shifted by first. first > 0 needs nKVHeads == 1. softcap soft-caps the scores (0: off).
func (kv *kvCache) run(e kernelrt.Ops, li, slot int, out, q []float32, tokens, qStride, nHeads, nKVHeads, g0, first, pos0, hd, ctx int, softcap float32) error {
	n := ctx - first // positions in the view, per head
	a := kv.typ.elems((g0*ctx + first) * hd)
	b := a + kv.typ.elems(((nKVHeads-1)*ctx+n)*hd)
	base := slot * kv.per[li]
	switch kv.typ {
	case KVF32:
		return e.AttentionF32(out, q, kv.f32[li][0][base+a:base+b], kv.f32[li][1][base+a:base+b], kv.scrF, tokens, qStride, nHeads, nKVHeads, hd, n, pos0-first, softcap)
	case KVF16:
		return e.AttentionF16(out, q, kv.f16[li][0][base+a:base+b], kv.f16[li][1][base+a:base+b], kv.scrF, tokens, qStride, nHeads, nKVHeads, hd, n, pos0-first, softcap)
	}
	return e.AttentionQ8_0(out, q, kv.q8[li][0][base+a:base+b], kv.q8[li][1][base+a:base+b], kv.scrF, tokens, qStride, nHeads, nKVHeads, hd, n, pos0-first, softcap)
}

// KV is the model's KV cache type.
func (m *Model) KV() KVType { return m.kv.typ }

// KVBytes is the memory of the KV cache: every layer's keys and values for every slot,
// 2*Slots*KVHeads*rows*HeadDim values per layer in the cache's type, rows being MaxCtx, or
// on a sliding-window layer the ring's rows when they are fewer.
func (m *Model) KVBytes() int {
	c := &m.Cfg
	n := 0
	for _, r := range m.kv.rows {
		n += 2 * c.slots() * c.KV.bytesPer(c.KVHeads*r*c.HeadDim)
	}
	return n
}

// KVReadBytes is what one decoded token's attention reads from the cache of a sequence that
// holds ctx positions: keys and values of every layer, ctx positions each, or the window's
// on a sliding-window layer (decode reads each KV head's rows once for its whole group of
// query heads).
func (m *Model) KVReadBytes(ctx int) int {
	c := &m.Cfg
	n := 0
	for li := 0; li < c.Layers; li++ {
		p := ctx
		if m.spec.sliding(c, li) {
			p = min(ctx, c.SlidingWindow)
		}
		n += 2 * c.KV.bytesPer(c.KVHeads*p*c.HeadDim)
	}
	return n
}

// KVScratchBytes is the memory attention uses beside the cache: the caller's attention
// scratch, kernelrt.AttnScratchFloats(HeadDim) floats (72 KiB at head size 64), the same for
// every cache type and context (attention reads the cache in its stored type; nothing is
// expanded).
func (m *Model) KVScratchBytes() int { return 4 * len(m.kv.scrF) }
