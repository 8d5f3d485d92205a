// Package sample picks the next token from a row of logits with llama.cpp's sampler chain:
// logit bias, repetition / frequency / presence penalties over the last N tokens, top-k,
// top-p, min-p, temperature, then the most likely token (temperature <= 0) or a seeded
// random draw.
//
// A Sampler is deterministic: the same logits, history (Accept) and Seed give the same token
// on every platform, because the random numbers come from the package's own SplitMix64
// generator and the probabilities from its own exp, written so the compiler cannot fuse its
// arithmetic; and the draw walks the candidates in id order, so logits that differ in the
// last bit (SIMD and scalar kernels) give the same tokens unless a random number lands
// within that difference of a boundary. It allocates nothing per token: its work buffers
// are sized once, top-k selects with a bounded heap and top-p without top-k with a
// histogram, neither sorting the vocabulary. A Sampler is not safe for concurrent use.
package sample

import (
	"errors"
	"fmt"
	"math"
	"slices"
)

// ErrNoCandidate is returned when bias bans every token, so nothing can be sampled.
var ErrNoCandidate = errors.New("sample: every token is banned (logit -Inf after bias)")

// nBuckets is how finely nucleusAll divides the 60 nats below the maximum logit.
const nBuckets = 1024

// cand is a token and its (biased, penalised) logit.
type cand struct {
	logit float32
	id    int32
}

// better is the chain's total order: higher logit first, then lower id, so every selection
// method ends with the same candidates in the same order.
func better(a, b cand) bool { return a.logit > b.logit || (a.logit == b.logit && a.id < b.id) }

// Sampler applies one Options to successive logit rows. Create it with New.
type Sampler struct {
	o     Options
	vocab int
	bias  []cand // LogitBias sorted by id: deterministic order, no map walk per token
	rng   rng

	w          []float32         // the logits being worked on (a copy: the caller's row is never written)
	cands      []cand            // candidates (len vocab, or TopK when top-k always bounds them)
	probs      []float64         // their unnormalised probabilities, parallel to cands
	bucketMass [nBuckets]float64 // nucleusAll's histogram

	ring   []int32 // last PenaltyLastN accepted tokens, a ring
	head   int     // next slot to write in ring
	n      int     // tokens in ring
	counts []int32 // occurrences of each token in ring (nil without penalties)
}

// New returns a Sampler for rows of vocab logits, or the error Options.Validate reports.
func New(vocab int, o Options) (*Sampler, error) {
	if vocab <= 0 {
		return nil, fmt.Errorf("sample: vocabulary size must be positive, got %d", vocab)
	}
	if err := o.Validate(vocab); err != nil {
		return nil, err
	}
	s := &Sampler{o: o, vocab: vocab, w: make([]float32, vocab)}
	for id, b := range o.LogitBias {
		s.bias = append(s.bias, cand{b, id})
	}
	slices.SortFunc(s.bias, func(a, b cand) int { return int(a.id) - int(b.id) })
	if !o.Greedy() {
		nc := vocab
		if o.TopK > 0 && o.TopK < vocab {
			nc = o.TopK
		}
		s.cands = make([]cand, nc)
		s.probs = make([]float64, nc)
	}
	if o.penalties() {
		s.ring = make([]int32, o.PenaltyLastN)
		s.counts = make([]int32, vocab)
	}
	s.Reset()
	return s, nil
}

// Options returns the options the Sampler was made with.
func (s *Sampler) Options() Options { return s.o }

// Reset forgets the accepted tokens and restarts the random sequence from Seed, so the
// Sampler behaves as if new.
func (s *Sampler) Reset() {
	s.rng = newRNG(s.o.Seed)
	for s.n > 0 {
		s.evict()
	}
	s.head = 0
}

// Accept records a token as generated (or as part of the prompt) for the penalties. Ids
// outside the vocabulary are ignored.
func (s *Sampler) Accept(id int32) {
	if s.counts == nil || id < 0 || int(id) >= s.vocab {
		return
	}
	if s.n == len(s.ring) {
		s.evict()
	}
	s.ring[s.head] = id
	s.head = (s.head + 1) % len(s.ring)
	s.n++
	s.counts[id]++
}

// evict drops the oldest token of the ring.
func (s *Sampler) evict() {
	old := (s.head - s.n + len(s.ring)) % len(s.ring)
	s.counts[s.ring[old]]--
	s.n--
}

// Sample returns the next token for a row of logits (len vocab), which it only reads. A NaN
// or infinite logit is an error, so a broken model row is never silently sampled. Sample does
// not record the token: call Accept with the token actually used.
func (s *Sampler) Sample(logits []float32) (int32, error) { return s.sample(logits, nil) }

// sample is Sample over the tokens allowed (a bitset; nil allows all), the others banned
// before the chain as a -Inf bias would.
func (s *Sampler) sample(logits []float32, allowed []uint64) (int32, error) {
	if len(logits) != s.vocab {
		return 0, fmt.Errorf("sample: logit row has %d entries, the vocabulary %d", len(logits), s.vocab)
	}
	// One pass copies, checks and finds the maximum; the few tokens bias and penalties then
	// change are compared afterwards, instead of a second pass over the vocabulary.
	w := s.w[:len(logits)]
	best, max := 0, logits[0]
	for i, x := range logits {
		if math.Float32bits(x)&0x7f800000 == 0x7f800000 { // NaN or ±Inf
			return 0, fmt.Errorf("sample: logit of token %d is %v", i, x)
		}
		w[i] = x
		if x > max {
			best, max = i, x
		}
	}
	if allowed != nil {
		best, max = ban(w, allowed)
	}
	for _, b := range s.bias {
		w[b.id] += b.logit
	}
	if s.counts != nil && s.n > 0 {
		s.penalise(w)
	}
	if len(s.bias) > 0 || (s.counts != nil && s.n > 0) {
		best, max = s.remax(w, best, max)
	}
	if max == negInf {
		return 0, ErrNoCandidate
	}
	if s.o.Greedy() {
		return int32(best), nil
	}
	return s.draw(w, max), nil
}

// remax updates the first maximum (best, max) of the copied row after bias and penalties
// changed a few entries: if the old maximum itself went down it rescans, else only the
// changed tokens can take over.
func (s *Sampler) remax(w []float32, best int, max float32) (int, float32) {
	if w[best] != max {
		best, max = 0, w[0]
		for i, x := range w {
			if x > max {
				best, max = i, x
			}
		}
		return best, max
	}
	take := func(id int32) {
		if x := w[id]; x > max || (x == max && int(id) < best) {
			best, max = int(id), x
		}
	}
	for _, b := range s.bias {
		take(b.id)
	}
	start := s.head - s.n + len(s.ring)
	for i := 0; i < s.n; i++ {
		take(s.ring[(start+i)%len(s.ring)])
	}
	return best, max
}

// penalise applies llama.cpp's penalties once to each distinct token of the ring: the
// repeat penalty divides a positive logit and multiplies a non-positive one, then the
// frequency penalty times the count and the presence penalty are subtracted. Counts are
// negated to mark a token done, then restored, instead of keeping a visited set.
func (s *Sampler) penalise(w []float32) {
	rep, freq, pres := s.o.RepeatPenalty, s.o.FrequencyPenalty, s.o.PresencePenalty
	if rep == 0 {
		rep = 1
	}
	start := s.head - s.n + len(s.ring)
	for i := 0; i < s.n; i++ {
		id := s.ring[(start+i)%len(s.ring)]
		c := s.counts[id]
		if c <= 0 {
			continue
		}
		s.counts[id] = -c
		x := w[id]
		if x <= 0 {
			x *= rep
		} else {
			x /= rep
		}
		w[id] = x - float32(c)*freq - pres
	}
	for i := 0; i < s.n; i++ {
		id := s.ring[(start+i)%len(s.ring)]
		if c := s.counts[id]; c < 0 {
			s.counts[id] = -c
		}
	}
}

// draw runs top-k, top-p, min-p and temperature over w (whose maximum is max, finite) and
// draws one of the remaining tokens in proportion to its probability.
func (s *Sampler) draw(w []float32, max float32) int32 {
	c := s.filter(w, max)
	// Temperature, then the draw: p_i = exp((l_i - max) / T), summed in candidate order.
	invT := 1 / float64(s.o.Temperature)
	p := s.probs[:len(c)]
	sum := 0.0
	for i, x := range c {
		p[i] = exp(float64(float64(x.logit)-float64(max)) * invT)
		sum += p[i]
	}
	r := s.rng.float64() * sum
	acc := 0.0
	for i := range c {
		acc += p[i]
		if r < acc {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

// filter returns the candidates top-k, top-p and min-p keep from w (whose maximum is max),
// in id order. The draw walks them in that order, not by probability: logits that differ
// in their last bits (SIMD and scalar kernels round differently) then change a draw only
// if the random number falls within that difference of a boundary, instead of whenever
// two nearly equal tokens swap places in a sorted list.
func (s *Sampler) filter(w []float32, max float32) []cand {
	o := &s.o
	var c []cand
	topP := o.TopP > 0 && o.TopP < 1
	switch {
	case o.TopK > 0 && o.TopK < s.vocab:
		c = s.topK(w, o.TopK)
		if topP {
			c = s.nucleus(c, float64(o.TopP), s.mass(c))
		}
		slices.SortFunc(c, func(a, b cand) int { return int(a.id) - int(b.id) })
	case topP:
		c = s.nucleusAll(w, float64(max), float64(o.TopP))
	default:
		// Every token but the banned, in id order.
		c = s.cands[:0]
		for i, x := range w {
			if x != negInf {
				c = append(c, cand{x, int32(i)})
			}
		}
	}
	if o.MinP > 0 {
		// p / p_max = exp(l - max) >= MinP: llama.cpp's l >= max + ln(MinP) without a log
		// whose last bits could differ by platform. It always keeps the most likely token.
		k := 0
		for _, x := range c {
			if exp(float64(x.logit)-float64(max)) >= float64(o.MinP) {
				c[k] = x
				k++
			}
		}
		c = c[:k]
	}
	return c
}

// mass returns the unnormalised probabilities exp(l - l0) of sorted candidates into probs
// and their sum (l0 is the first, largest logit).
func (s *Sampler) mass(c []cand) float64 {
	sum := 0.0
	for i, x := range c {
		s.probs[i] = exp(float64(x.logit) - float64(c[0].logit))
		sum += s.probs[i]
	}
	return sum
}

// nucleus keeps the shortest prefix of sorted candidates whose probability (probs / sum)
// reaches p, at least one token, as llama.cpp's top-p does.
func (s *Sampler) nucleus(c []cand, p, sum float64) []cand {
	acc := 0.0
	for i := range c {
		acc += s.probs[i]
		if acc >= p*sum {
			return c[:i+1]
		}
	}
	return c
}

// nucleusAll is top-p over the whole vocabulary without sorting it. One pass computes every
// token's weight exp(l - max) (the normaliser needs them all) and adds it to one of
// nBuckets buckets by max - l; walking the buckets from the top finds the one where the
// cumulative mass crosses p*total. Every token above that bucket is in the nucleus; only
// the crossing bucket's tokens are sorted, to cut it exactly. The result, the nucleus of
// the sorted rule, is in id order.
func (s *Sampler) nucleusAll(w []float32, max, p float64) []cand {
	const scale = nBuckets / 60.0 // exp returns 0 below -60: the last bucket holds the rest
	bucket := func(x float32) int {
		d := max - float64(x)
		if !(d < 60) { // and -Inf
			return nBuckets - 1
		}
		return min(int(float64(d*scale)), nBuckets-1)
	}
	clear(s.bucketMass[:])
	total := 0.0
	for i, x := range w {
		e := exp(float64(x) - max)
		s.probs[i] = e
		s.bucketMass[bucket(x)] += e
		total += e
	}
	goal := p * total
	acc, cut := 0.0, nBuckets-1
	for b, m := range s.bucketMass {
		if acc+m >= goal {
			cut = b
			break
		}
		acc += m
	}
	// Sort the crossing bucket to find the last token of the nucleus, then collect the
	// nucleus in id order: the buckets above, and the crossing bucket down to that token.
	c := s.cands[:0]
	for i, x := range w {
		if x != negInf && bucket(x) == cut {
			c = append(c, cand{x, int32(i)})
		}
	}
	sortCands(c)
	last := c[len(c)-1] // rounding kept acc just below goal: the whole bucket
	for _, x := range c {
		acc += s.probs[x.id]
		if acc >= goal {
			last = x
			break
		}
	}
	c = s.cands[:0]
	for i, x := range w {
		if b := bucket(x); x != negInf && (b < cut || (b == cut && !better(last, cand{x, int32(i)}))) {
			c = append(c, cand{x, int32(i)})
		}
	}
	return c
}

// sortCands sorts by better.
func sortCands(c []cand) {
	slices.SortFunc(c, func(a, b cand) int {
		if better(a, b) {
			return -1
		}
		return 1 // a == b never happens: ids differ
	})
}

// topK returns the k best tokens sorted by better, without banned ones: a min-heap of the
// k best seen so far (its root the worst kept) filters the scan with one compare per token,
// then heapsort orders it. O(V + k log k log V) on typical rows instead of O(V log V).
func (s *Sampler) topK(w []float32, k int) []cand {
	h := s.cands[:k]
	for i := range k {
		h[i] = cand{w[i], int32(i)}
	}
	for i := k/2 - 1; i >= 0; i-- {
		siftDown(h, i)
	}
	thr := h[0].logit
	for i := k; i < len(w); i++ {
		// Ids rise through the scan, so an equal logit never beats the root: > suffices.
		if x := w[i]; x > thr {
			h[0] = cand{x, int32(i)}
			siftDown(h, 0)
			thr = h[0].logit
		}
	}
	// Heapsort: moving the worst to the end each time leaves h best-first.
	for end := k - 1; end > 0; end-- {
		h[0], h[end] = h[end], h[0]
		siftDown(h[:end], 0)
	}
	for k > 0 && h[k-1].logit == negInf {
		k--
	}
	return h[:k]
}

// siftDown restores the min-heap (by better: the root is the worst) below i.
func siftDown(h []cand, i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && better(h[l], h[r]) {
			m = r
		}
		if !better(h[i], h[m]) {
			return
		}
		h[i], h[m] = h[m], h[i]
		i = m
	}
}
