package gguf

import (
	"bytes"
	"testing"
)

// FuzzParse checks that Parse never panics and that whatever it accepts is consistent: every
// tensor's data lies inside the input, at an aligned offset, without overlap, and TensorData
// returns exactly those bytes; and the accepted file re-encodes with the Builder to a file that
// parses to the same metadata and tensors (so reader and writer agree on the rules).
func FuzzParse(f *testing.F) {
	for _, v := range []uint32{2, 3} {
		for _, a := range []int{1, 32, 64} {
			f.Add(buildSample(f, v, a))
		}
	}
	small := NewBuilder()
	must(f, small.AddKV("general.architecture", String("llama")))
	must(f, small.AddTensor("w", TypeQ8_0, []uint64{32, 1}, pattern(34, 0)))
	must(f, small.AddTensor("b", TypeBF16, []uint64{3}, pattern(6, 1)))
	var buf bytes.Buffer
	if _, err := small.WriteTo(&buf); err != nil {
		f.Fatal(err)
	}
	f.Add(buf.Bytes())
	f.Add(header(0, 0))
	f.Add(cat(header(0, 1), kv("k", ValueArray, nestedArrayBytes(3))))
	f.Add(tensorFile(nil, [][]byte{info("a", []uint64{16}, 0, 0), info("b", []uint64{8}, 0, 32)}, 32, 96))
	f.Add(tensorFile([][]byte{kv(AlignmentKey, ValueUint32, le32(8))}, [][]byte{info("t", []uint64{2}, uint32(TypeF32), 8)}, 8, 16))

	f.Fuzz(func(t *testing.T, data []byte) {
		pf, err := Parse(data)
		if err != nil {
			if _, ok := err.(*FormatError); !ok {
				t.Fatalf("error %T is not a *FormatError: %v", err, err)
			}
			return
		}
		if pf.DataOffset < 0 || pf.DataOffset > len(data) {
			t.Fatalf("data offset %d outside %d bytes", pf.DataOffset, len(data))
		}
		type rng struct{ lo, hi int }
		var used []rng
		for i := range pf.Tensors {
			ti := &pf.Tensors[i]
			if ti.Offset%uint64(pf.Alignment) != 0 {
				t.Fatalf("tensor %q offset %d not aligned to %d", ti.Name, ti.Offset, pf.Alignment)
			}
			lo := uint64(pf.DataOffset) + ti.Offset
			hi := lo + ti.Size
			if lo < ti.Offset || hi < lo || hi > uint64(len(data)) {
				t.Fatalf("tensor %q [%d, %d) outside %d bytes", ti.Name, lo, hi, len(data))
			}
			if uint64(ti.RowBytes())*uint64(ti.Rows()) != ti.Size {
				t.Fatalf("tensor %q: rows %d x row bytes %d != size %d", ti.Name, ti.Rows(), ti.RowBytes(), ti.Size)
			}
			b, err := pf.TensorData(ti.Name)
			if err != nil || uint64(len(b)) != ti.Size || (len(b) > 0 && &b[0] != &data[lo]) {
				t.Fatalf("tensor %q: TensorData len %d err %v, want %d bytes at %d", ti.Name, len(b), err, ti.Size, lo)
			}
			for _, u := range used {
				if ti.Size > 0 && int(lo) < u.hi && u.lo < int(hi) {
					t.Fatalf("tensor %q [%d, %d) overlaps [%d, %d)", ti.Name, lo, hi, u.lo, u.hi)
				}
			}
			if ti.Size > 0 {
				used = append(used, rng{int(lo), int(hi)})
			}
		}

		// Re-encode and compare.
		b := NewBuilder()
		if err := b.SetVersion(pf.Version); err != nil {
			t.Fatal(err)
		}
		for _, e := range pf.Metadata {
			if err := b.AddKV(e.Key, e.Value); err != nil {
				t.Fatalf("Builder refuses a KV Parse accepted: %v", err)
			}
		}
		for _, ti := range pf.Tensors {
			d, _ := pf.TensorData(ti.Name)
			if err := b.AddTensor(ti.Name, ti.Type, ti.Dims, d); err != nil {
				t.Fatalf("Builder refuses a tensor Parse accepted: %v", err)
			}
		}
		var out bytes.Buffer
		if _, err := b.WriteTo(&out); err != nil {
			t.Fatal(err)
		}
		rf, err := Parse(out.Bytes())
		if err != nil {
			t.Fatalf("re-encoded file does not parse: %v", err)
		}
		if rf.Alignment != pf.Alignment || len(rf.Metadata) != len(pf.Metadata) || len(rf.Tensors) != len(pf.Tensors) {
			t.Fatalf("re-encoded: alignment %d, %d KVs, %d tensors; want %d, %d, %d",
				rf.Alignment, len(rf.Metadata), len(rf.Tensors), pf.Alignment, len(pf.Metadata), len(pf.Tensors))
		}
		for i, e := range pf.Metadata {
			if rf.Metadata[i].Key != e.Key || !equalValue(rf.Metadata[i].Value, e.Value) {
				t.Fatalf("re-encoded kv %d: %s = %v, want %s = %v", i, rf.Metadata[i].Key, rf.Metadata[i].Value, e.Key, e.Value)
			}
		}
		for _, ti := range pf.Tensors {
			x, _ := pf.TensorData(ti.Name)
			y, err := rf.TensorData(ti.Name)
			if err != nil || !bytes.Equal(x, y) {
				t.Fatalf("re-encoded tensor %q differs (%v)", ti.Name, err)
			}
		}
	})
}
