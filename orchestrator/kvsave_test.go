package orchestrator

import (
	"slices"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt"
)

// A prefix saved from one slot and restored into another continues exactly as the original
// sequence does, in every cache type, for a full and a partial restore.
func TestSaveRestorePrefix(t *testing.T) {
	path := slotFile(t)
	prompt := []int32{3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3}
	other := []int32{2, 7, 1, 8, 2, 8, 1, 8, 2, 8, 4, 5, 9, 0, 4, 5}
	for _, kv := range []KVType{KVF32, KVF16, KVQ8_0} {
		t.Run(kv.String(), func(t *testing.T) {
			m := loadSlots(t, path, kv, 3)
			var ops kernelrt.Serial
			run := func(slot, pos int, toks []int32) []float32 {
				t.Helper()
				l, err := m.ForwardBatch(ops, toks, []Seq{{Slot: slot, Pos: pos, N: len(toks), Logits: true}})
				if err != nil {
					t.Fatal(err)
				}
				return slices.Clone(l)
			}
			n := len(prompt)
			run(0, 0, prompt)
			buf := make([]byte, m.PrefixBytes(n))
			if err := m.SavePrefix(0, n, buf); err != nil {
				t.Fatal(err)
			}
			for _, keep := range []int{n, 10} {
				// What slot 0 gives for the next tokens after keep positions...
				want := run(0, keep, other[:4])
				// ...slot 1, holding another sequence, gives after the restore.
				run(1, 0, other)
				if err := m.RestorePrefix(1, buf, n, keep); err != nil {
					t.Fatal(err)
				}
				if got := run(1, keep, other[:4]); !slices.Equal(got, want) {
					t.Fatalf("keep %d: logits after the restore differ by %g", keep, maxDiff(got, want))
				}
			}
		})
	}
}

// Bad arguments are errors that name them, and change nothing.
func TestSaveRestorePrefixErrors(t *testing.T) {
	m := loadSlots(t, slotFile(t), KVF16, 2)
	good := make([]byte, m.PrefixBytes(4))
	for _, c := range []struct {
		name string
		err  error
		want string
	}{
		{"slot", m.SavePrefix(2, 4, good), "slot 2"},
		{"negative slot", m.RestorePrefix(-1, good, 4, 4), "slot -1"},
		{"positions", m.SavePrefix(0, m.MaxCtx()+1, make([]byte, m.PrefixBytes(m.MaxCtx()+1))), "positions"},
		{"size", m.SavePrefix(0, 4, good[:len(good)-1]), "bytes"},
		{"restore more than saved", m.RestorePrefix(0, good, 4, 5), "5 positions of a copy of 4"},
		{"nil", m.RestorePrefix(0, nil, 4, 4), "0 bytes"},
	} {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: err = %v, want one naming %q", c.name, c.err, c.want)
		}
	}
	m.Close()
	if err := m.SavePrefix(0, 4, good); err != ErrClosed {
		t.Errorf("after Close: %v, want ErrClosed", err)
	}
}
