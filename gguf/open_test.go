package gguf

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/arena"
)

func TestOpenMapsFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "model.gguf")
	want := buildSample(t, 3, 32)
	must(t, os.WriteFile(path, want, 0o644))
	f, err := OpenWith(path, arena.FileOptions{WillNeed: true})
	if err != nil {
		t.Fatal(err)
	}
	m := f.Mapping()
	if m == nil || !bytes.Equal(m.Bytes(), want) {
		t.Fatal("Mapping does not hold the file")
	}
	if s, _ := f.GetString("general.architecture"); s != "qwen2" {
		t.Errorf("architecture %q", s)
	}
	for i, st := range sampleTensors() {
		b, err := f.TensorData(st.name)
		if err != nil || !bytes.Equal(b, st.data) {
			t.Fatalf("tensor %s: %v / data differs", st.name, err)
		}
		if len(b) > 0 && &b[0] != &m.Bytes()[f.DataOffset+int(f.Tensors[i].Offset)] {
			t.Errorf("tensor %s is not read in place from the mapping", st.name)
		}
		// A mapping is page-aligned, so alignment-32 tensors suit any element type.
		must(t, f.CheckAligned(&f.Tensors[i], 32))
	}
	must(t, f.Close())
	if f.Mapping() != nil {
		t.Error("Mapping after Close is not nil")
	}
	if m.Bytes() != nil {
		t.Error("Close did not unmap the file")
	}
	if _, err := f.TensorData("scalar"); !errors.Is(err, ErrClosed) {
		t.Errorf("TensorData after Close: %v", err)
	}
	must(t, f.Close())

	g, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if len(g.Tensors) != len(sampleTensors()) {
		t.Errorf("Open: %d tensors", len(g.Tensors))
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	empty := filepath.Join(dir, "empty.gguf")
	must(t, os.WriteFile(empty, nil, 0o644))
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), empty+": gguf: at offset 0: unexpected end of file: need 4 bytes for the magic, have 0") {
		t.Errorf("empty file: %v", err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	data := buildSample(t, 3, 32)
	must(t, os.WriteFile(bad, data[:len(data)/2], 0o644))
	_, err := Open(bad)
	var fe *FormatError
	if !errors.As(err, &fe) || !strings.HasPrefix(err.Error(), bad+": ") {
		t.Errorf("truncated file: %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
}

// TestStreamToFile writes a multi-megabyte model straight to a file with generated tensors, as
// the loader's synthetic-model tests will, and reads it back through Open.
func TestStreamToFile(t *testing.T) {
	const rows, cols = 1024, 896 // 1024 x 896 Q8_0: ~0.95 MB per tensor
	b := NewBuilder()
	must(t, b.AddKV("general.architecture", String("qwen2")))
	row := make([]byte, cols/32*34)
	for l := range 4 {
		name := fmt.Sprintf("blk.%d.ffn_up.weight", l)
		must(t, b.AddTensorFunc(name, TypeQ8_0, []uint64{cols, rows}, func(w io.Writer) error {
			for r := range rows {
				for i := range row {
					row[i] = byte(r + i + l)
				}
				if _, err := w.Write(row); err != nil {
					return err
				}
			}
			return nil
		}))
	}
	path := filepath.Join(t.TempDir(), "big.gguf")
	out, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	n, err := b.WriteTo(out)
	must(t, err)
	must(t, out.Close())
	if _, size := b.Layout(); n != size {
		t.Fatalf("wrote %d bytes, layout says %d", n, size)
	}
	f, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for l, ti := range f.Tensors {
		d, err := f.TensorData(ti.Name)
		must(t, err)
		if ti.Rows() != rows || ti.Cols() != cols || len(d) != rows*len(row) {
			t.Fatalf("%s: %dx%d, %d bytes", ti.Name, ti.Rows(), ti.Cols(), len(d))
		}
		if r := 1000; d[r*len(row)+5] != byte(r+5+l) {
			t.Fatalf("%s: row %d byte 5 = %d", ti.Name, r, d[r*len(row)+5])
		}
	}
}
