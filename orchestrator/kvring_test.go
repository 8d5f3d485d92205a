package orchestrator

import (
	"slices"
	"strings"
	"testing"
)

// The sliding-window layers keep a ring of window-1+max(window, MaxBatch) rows, not MaxCtx:
// sequences far longer than the ring, run in chunks and decode steps over several slots,
// get the float64 reference's logits at every step, in every cache type (every step past
// the ring moves the window's rows to the front).
func TestSlidingRingCache(t *testing.T) {
	path := slidingModelFile(t)
	ref := loadRef(t, path)
	rt := newRT(t)
	for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
		t.Run(kv.String(), func(t *testing.T) {
			ref.kv = kv
			tol := tolKV(tolQuantized, kv)
			m, err := LoadGGUF(path, LoadOptions{KV: kv, Slots: 2, MaxBatch: 4, MaxCtx: 48})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			if m.kv.ring != 3-1+4 {
				t.Fatalf("ring of %d rows, want 6", m.kv.ring)
			}
			full := 2 * 7 * 2 * m.Cfg.KV.bytesPer(m.Cfg.KVHeads*48*m.Cfg.HeadDim)
			if got := m.KVBytes(); got >= full/2 {
				t.Errorf("KVBytes %d: the sliding layers' rings should make it far less than %d", got, full)
			}
			seqs := [2][]int32{}
			chunk := []int{3, 1, 2, 1, 1, 3, 1, 1, 1, 2, 1, 1, 1, 1, 2, 1}
			for step, n := range chunk {
				var toks []int32
				var ss []Seq
				for i := range seqs {
					nn := n
					if i == 1 {
						nn = 4 - n // the two together fill MaxBatch
						if nn == 0 {
							continue
						}
					}
					ss = append(ss, Seq{Slot: i, Pos: len(seqs[i]), N: nn, Logits: true})
					for j := 0; j < nn; j++ {
						id := int32(3 + (step*11+j*5+i*17)%50)
						seqs[i] = append(seqs[i], id)
						toks = append(toks, id)
					}
				}
				got, err := m.ForwardBatch(rt, toks, ss)
				if err != nil {
					t.Fatal(err)
				}
				V := m.Vocab()
				for r, s := range ss {
					want := ref.forward(seqs[s.Slot])
					if e := relErr(got[r*V:(r+1)*V], want[len(want)-1]); !(e <= tol) {
						t.Fatalf("step %d, slot %d at %d tokens: relative error %.3g > %g", step, s.Slot, len(seqs[s.Slot]), e, tol)
					}
				}
			}
			if len(seqs[0]) < 3*m.kv.ring || len(seqs[1]) < 3*m.kv.ring {
				t.Fatalf("sequences of %d and %d tokens: the test should run past the ring (%d) several times", len(seqs[0]), len(seqs[1]), m.kv.ring)
			}
			// Slot 0 can continue where the ring holds the window, not before it, and
			// from position 0 again.
			n := len(seqs[0])
			if got := m.Reusable(0, n); got != n {
				t.Errorf("Reusable(0, %d) = %d", n, got)
			}
			if got := m.Reusable(0, n-m.kv.ring); got != 0 {
				t.Errorf("Reusable(0, %d) = %d: those positions' window is gone", n-m.kv.ring, got)
			}
			_, err = m.ForwardBatch(rt, []int32{5}, []Seq{{Slot: 0, Pos: n - m.kv.ring, N: 1, Logits: true}})
			if err == nil || !strings.Contains(err.Error(), "sliding-window") {
				t.Errorf("continuing before the ring's window: err = %v", err)
			}
			if err := m.SavePrefix(0, 4, make([]byte, m.PrefixBytes(4))); err == nil {
				t.Error("SavePrefix of positions the ring has dropped succeeded")
			}
			fresh := []int32{7, 8, 9}
			got, err := m.ForwardBatch(rt, fresh, []Seq{{Slot: 0, Pos: 0, N: 3, Logits: true}})
			if err != nil {
				t.Fatal(err)
			}
			want := ref.forward(fresh)
			if e := relErr(slices.Clone(got), want[2]); !(e <= tol) {
				t.Errorf("a new sequence in the slot: relative error %.3g > %g", e, tol)
			}
		})
	}
}
