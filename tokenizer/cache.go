package tokenizer

import "sync"

// wordCache remembers the tokens of words (BPE pre-tokenizer pieces, SentencePiece pieces)
// already encoded: text repeats its words, and a map lookup costs a fraction of merging
// (about 3x on the benchmark text). It is shared by all goroutines using the tokenizer.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

// The cache is cleared when full, which bounds its memory on adversarial input while
// ordinary text (a few thousand distinct words) stays cached; long words are not kept.
const (
	maxCacheWords   = 1 << 16
	maxCacheWordLen = 64
)

func (c *wordCache) get(word string) ([]int32, bool) {
	if len(word) > maxCacheWordLen {
		return nil, false
	}
	c.mu.RLock()
	ids, ok := c.m[word]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(word string, ids []int32) {
	if len(word) > maxCacheWordLen {
		return
	}
	ids = append([]int32(nil), ids...)
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCacheWords {
		c.m = make(map[string][]int32)
	}
	c.m[word] = ids
	c.mu.Unlock()
}

// reset empties the cache (benchmarks of cold encoding).
func (c *wordCache) reset() {
	c.mu.Lock()
	c.m = nil
	c.mu.Unlock()
}
