package orchestrator

import (
	"fmt"
	"unsafe"
)

// PrefixBytes is the size of a saved copy of n positions of one slot's cache (SavePrefix):
// every layer's keys and values, n positions of every KV head, in the cache's type.
func (m *Model) PrefixBytes(n int) int {
	c := &m.Cfg
	return 2 * c.Layers * c.KVHeads * c.KV.bytesPer(n*c.HeadDim)
}

// SavePrefix copies the keys and values of positions 0..n-1 of slot's cache into dst,
// which must be PrefixBytes(n) long, so that RestorePrefix can put them back into a slot
// later (a prefix cache that outlives the slot's next request). The copy is laid out
// [layer][K, V][KV head][n positions]. It fails, changing nothing, on a closed model,
// arguments out of range, or when the sliding-window layers of the model no longer hold
// every one of the positions (they keep a window and a batch: Reusable).
func (m *Model) SavePrefix(slot, n int, dst []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkPrefix("SavePrefix", slot, n, n, len(dst)); err != nil {
		return err
	}
	if kv := &m.kv; kv.ring > 0 && (kv.base[slot] > 0 || n > kv.ring) {
		return fmt.Errorf("orchestrator: SavePrefix: %d positions of slot %d: its sliding-window layers hold %d from position %d", n, slot, kv.ring, kv.base[slot])
	}
	m.kv.copyPrefix(&m.Cfg, slot, n, n, dst, true)
	return nil
}

// RestorePrefix copies the first m positions of a SavePrefix copy of n positions (src,
// PrefixBytes(n) long) into positions 0..m-1 of slot, 0 <= m <= n. The slot's positions from
// m on are left as they were: the caller continues the sequence at position m. It fails,
// changing nothing, on a closed model or arguments out of range.
func (m *Model) RestorePrefix(slot int, src []byte, n, mm int) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.checkPrefix("RestorePrefix", slot, n, mm, len(src)); err != nil {
		return err
	}
	if kv := &m.kv; kv.ring > 0 && n > kv.ring {
		return fmt.Errorf("orchestrator: RestorePrefix: a copy of %d positions: the sliding-window layers hold %d", n, kv.ring)
	}
	m.kv.copyPrefix(&m.Cfg, slot, n, mm, src, false)
	if m.kv.ring > 0 {
		m.kv.base[slot] = 0
	}
	return nil
}

// checkPrefix checks the arguments of SavePrefix and RestorePrefix (m.mu held).
func (m *Model) checkPrefix(op string, slot, n, mm, size int) error {
	c := &m.Cfg
	switch {
	case m.closed:
		return ErrClosed
	case slot < 0 || slot >= c.slots():
		return fmt.Errorf("orchestrator: %s: slot %d: want 0..%d", op, slot, c.slots()-1)
	case n < 0 || n > c.MaxCtx:
		return fmt.Errorf("orchestrator: %s: %d positions: want 0..MaxCtx = %d", op, n, c.MaxCtx)
	case mm < 0 || mm > n:
		return fmt.Errorf("orchestrator: %s: %d positions of a copy of %d", op, mm, n)
	case size != m.PrefixBytes(n):
		return fmt.Errorf("orchestrator: %s: buffer of %d bytes: %d positions take %d", op, size, n, m.PrefixBytes(n))
	}
	return nil
}

// copyPrefix copies, per layer, K and V and KV head, the first mm of n positions between the
// slot's cache and buf (a SavePrefix layout of n positions): out of the cache when save.
func (kv *kvCache) copyPrefix(c *Config, slot, n, mm int, buf []byte, save bool) {
	row := kv.typ.bytesPer(c.HeadDim) // bytes of one position of one head
	off := 0
	for li, rows := range kv.rows {
		for j := 0; j < 2; j++ {
			layer := kv.layerBytes(li, j)[slot*kv.per[li]*kv.typ.elemSize():]
			for h := 0; h < c.KVHeads; h++ {
				cache := layer[h*rows*row:]
				if save {
					copy(buf[off:off+n*row], cache[:n*row])
				} else {
					copy(cache[:mm*row], buf[off:off+mm*row])
				}
				off += n * row
			}
		}
	}
}

// asBytes views a slice of a pointer-free element type as its bytes.
func asBytes[T any](s []T) []byte {
	if len(s) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&s[0])), len(s)*int(unsafe.Sizeof(s[0])))
}
