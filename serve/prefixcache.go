package serve

import (
	"slices"

	"github.com/kernelrt/kernelrt/arena"
)

// PrefixSaver is what the prefix cache (EngineOptions.PrefixCacheBytes) needs of a Model:
// copies of a slot's keys and values out and back in. *orchestrator.Model has it.
type PrefixSaver interface {
	// PrefixBytes is the size of a copy of n positions.
	PrefixBytes(n int) int
	// SavePrefix copies positions 0..n-1 of slot into dst (PrefixBytes(n) long).
	SavePrefix(slot, n int, dst []byte) error
	// RestorePrefix copies the first m positions of a copy of n into slot.
	RestorePrefix(slot int, src []byte, n, m int) error
}

const (
	// minSavedPrefix: a shorter cache is not worth a copy (a chat template's header alone
	// is about this long).
	minSavedPrefix = 16
	// maxPrefixEntries bounds the entries (each match scans them all) whatever the budget.
	maxPrefixEntries = 256
	// restoreGain: a restore of m positions must save at least m/restoreGain positions of
	// prefill. Copying a position's keys and values costs far less than computing them,
	// but not nothing: a huge copy for a few tokens would lose.
	restoreGain = 64
)

// prefixCache keeps copies of slots' caches, off the Go heap, within a RAM budget: a slot
// whose cached tokens are about to be overwritten by another request is copied here first,
// and a later prompt that shares more of its prefix with a copy than with any free slot
// gets the copy's keys and values restored instead of prefilled. Least recently used
// copies go first when the budget is full. It is owned by the engine's loop goroutine.
type prefixCache struct {
	m       PrefixSaver
	budget  int
	used    int
	clock   uint64
	entries []*prefixEntry
}

// prefixEntry is one saved copy.
type prefixEntry struct {
	toks []int32 // the tokens whose keys and values kv holds, positions 0..len-1
	mem  *arena.Arena
	kv   []byte
	used uint64 // clock of the last save or restore
}

// match returns the entry sharing the longest prefix with ids, at most limit tokens, and
// that length (nil, 0 when none does).
func (c *prefixCache) match(ids []int32, limit int) (*prefixEntry, int) {
	var best *prefixEntry
	n := 0
	for _, p := range c.entries {
		k := 0
		for k < len(p.toks) && k < limit && p.toks[k] == ids[k] {
			k++
		}
		if k > n {
			best, n = p, k
		}
	}
	return best, n
}

// save copies the first tokens of slot's cache (toks), as many as the budget holds. It
// reports the entry or nil when it saved nothing: too short, already held, or out of memory.
func (c *prefixCache) save(slot int, toks []int32) *prefixEntry {
	c.clock++
	n := len(toks)
	if per := c.m.PrefixBytes(1); per > 0 {
		n = min(n, c.budget/per)
	}
	if n < minSavedPrefix {
		return nil
	}
	toks = toks[:n]
	kept := c.entries[:0]
	for _, p := range c.entries {
		if len(p.toks) >= n && slices.Equal(p.toks[:n], toks) {
			// An entry holds these positions already (and maybe more).
			p.used = c.clock
			return nil
		}
		if len(p.toks) < n && slices.Equal(toks[:len(p.toks)], p.toks) {
			c.free(p) // the new copy holds all of it
			continue
		}
		kept = append(kept, p)
	}
	clear(c.entries[len(kept):])
	c.entries = kept
	size := c.m.PrefixBytes(n)
	for len(c.entries) > 0 && (c.used+size > c.budget || len(c.entries) >= maxPrefixEntries) {
		c.evict()
	}
	mem, err := arena.New(size, arena.Options{})
	if err != nil {
		return nil
	}
	kv, err := arena.Alloc[byte](mem, size)
	if err == nil {
		err = c.m.SavePrefix(slot, n, kv)
	}
	if err != nil {
		mem.Close()
		return nil
	}
	p := &prefixEntry{toks: slices.Clone(toks), mem: mem, kv: kv, used: c.clock}
	c.entries = append(c.entries, p)
	c.used += size
	return p
}

// restore copies the first n positions of p into slot.
func (c *prefixCache) restore(p *prefixEntry, slot, n int) error {
	c.touch(p)
	return c.m.RestorePrefix(slot, p.kv, len(p.toks), n)
}

// touch makes p the most recently used entry.
func (c *prefixCache) touch(p *prefixEntry) {
	c.clock++
	p.used = c.clock
}

// evict drops the least recently used entry.
func (c *prefixCache) evict() {
	lru := 0
	for i, p := range c.entries {
		if p.used < c.entries[lru].used {
			lru = i
		}
	}
	c.free(c.entries[lru])
	c.entries = slices.Delete(c.entries, lru, lru+1)
}

// free gives back p's memory (the caller removes it from entries).
func (c *prefixCache) free(p *prefixEntry) {
	c.used -= len(p.kv)
	p.mem.Close()
	p.mem, p.kv = nil, nil
}

// close frees every entry.
func (c *prefixCache) close() {
	for _, p := range c.entries {
		c.free(p)
	}
	c.entries = nil
}
