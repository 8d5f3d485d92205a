package arena

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unsafe"
)

func writeTemp(t *testing.T, data []byte) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "weights.bin")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestMapFile(t *testing.T) {
	const n = 3000 // not a whole number of pages
	data := make([]byte, 4*n)
	for i := 0; i < n; i++ {
		binary.LittleEndian.PutUint32(data[4*i:], uint32(i*7+1))
	}
	path := writeTemp(t, data)
	for _, opts := range []FileOptions{{}, {WillNeed: true}, {WillNeed: true, Mlock: true}} {
		m, err := MapFile(path, opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		if m.Size() != len(data) || !bytes.Equal(m.Bytes(), data) || m.Path() != path {
			t.Fatalf("%+v: size %d, contents equal %v", opts, m.Size(), bytes.Equal(m.Bytes(), data))
		}
		// Typed, in place: the view aliases the mapping.
		v, err := FileView[uint32](m, 8, n-2)
		if err != nil {
			t.Fatal(err)
		}
		if len(v) != n-2 || v[0] != 2*7+1 || v[n-3] != uint32((n-1)*7+1) {
			t.Fatalf("FileView: len %d, v[0] %d, v[last] %d", len(v), v[0], v[n-3])
		}
		if addr(v) != addr(m.Bytes())+8 {
			t.Fatal("FileView copied instead of aliasing the mapping")
		}
		// Read-only: a write faults.
		p := unsafe.Pointer(&m.Bytes()[100])
		if _, faulted := faultAt(func() { poke(p) }); !faulted {
			t.Fatal("writing a read-only file mapping did not fault")
		}
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		if err := m.Close(); err != nil {
			t.Fatalf("second Close: %v", err)
		}
		if m.Bytes() != nil {
			t.Fatal("Bytes after Close is not nil")
		}
		_, err = FileView[uint32](m, 0, 1)
		wantErr(t, err, ErrClosed)
	}
	// The file itself is unchanged.
	back, err := os.ReadFile(path)
	if err != nil || !bytes.Equal(back, data) {
		t.Fatalf("file changed: %v", err)
	}
}

func TestMapFileEmptyAndErrors(t *testing.T) {
	path := writeTemp(t, nil)
	m, err := MapFile(path, FileOptions{WillNeed: true, Mlock: true})
	if err != nil {
		t.Fatalf("empty file: %v", err)
	}
	if b := m.Bytes(); b == nil || len(b) != 0 || m.Size() != 0 {
		t.Fatalf("empty file: Bytes %v (nil %v), Size %d", b, b == nil, m.Size())
	}
	if v, err := FileView[float32](m, 0, 0); err != nil || len(v) != 0 {
		t.Fatalf("empty view: %v", err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}

	missing := filepath.Join(t.TempDir(), "missing.gguf")
	_, err = MapFile(missing, FileOptions{})
	wantErr(t, err, os.ErrNotExist, "missing.gguf")
	_, err = MapFile(t.TempDir(), FileOptions{})
	wantErr(t, err, ErrMap, "not a regular file")

	m, err = MapFile(writeTemp(t, make([]byte, 64)), FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	_, err = FileView[uint32](m, 4, 16)
	wantErr(t, err, ErrBadSize, "FileView[uint32]", "offset=4, n=16", "64-byte file")
	_, err = FileView[uint32](m, 65, 0)
	wantErr(t, err, ErrBadSize)
	_, err = FileView[uint32](m, -4, 1)
	wantErr(t, err, ErrBadSize, "negative")
	_, err = FileView[uint32](m, 0, 1<<62)
	wantErr(t, err, ErrBadSize)
	_, err = FileView[uint32](m, 2, 1)
	wantErr(t, err, ErrBadAlign, "aligned to 4")
	_, err = FileView[string](m, 0, 1)
	wantErr(t, err, ErrHasPointers, "string")
	if v, err := FileView[q8Block](m, 2, 1); err != nil || len(v) != 1 {
		t.Fatalf("a 2-byte-aligned block at offset 2: %v", err)
	}
}

// TestMapFileFIFO: a named pipe is refused at once (opening it would block until a writer
// appears: a FIFO given as -model used to hang forever).
func TestMapFileFIFO(t *testing.T) {
	p := filepath.Join(t.TempDir(), "fifo")
	if err := mkfifo(p); err != nil {
		t.Skipf("no FIFOs here: %v", err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := MapFile(p, FileOptions{})
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !errors.Is(err, ErrMap) || !strings.Contains(err.Error(), "not a regular file") {
			t.Fatalf("MapFile(fifo) = %v, want a not-a-regular-file error", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("MapFile(fifo) blocked")
	}
}

// TestFileRelease: Release checks its range and state, and the bytes read after it are the
// file's (the pages fault back in).
func TestFileRelease(t *testing.T) {
	data := make([]byte, 5*os.Getpagesize()+123)
	for i := range data {
		data[i] = byte(i * 7)
	}
	m, err := MapFile(writeTemp(t, data), FileOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b := m.Bytes()
	sum := func() (s int) {
		for _, v := range b {
			s += int(v)
		}
		return s
	}
	want := sum()
	for _, r := range [][2]int{{0, len(data)}, {100, 3 * os.Getpagesize()}, {len(data), 0}, {1, 1}} {
		if err := m.Release(r[0], r[1]); err != nil {
			t.Fatalf("Release(%d, %d): %v", r[0], r[1], err)
		}
		if got := sum(); got != want {
			t.Fatalf("after Release(%d, %d): checksum %d, want %d", r[0], r[1], got, want)
		}
	}
	for _, r := range [][2]int{{-1, 10}, {0, len(data) + 1}, {len(data) + 1, 0}, {10, -1}} {
		if err := m.Release(r[0], r[1]); !errors.Is(err, ErrBadSize) {
			t.Errorf("Release(%d, %d) = %v, want ErrBadSize", r[0], r[1], err)
		}
	}
	m.Close()
	if err := m.Release(0, 1); !errors.Is(err, ErrMap) {
		t.Errorf("Release after Close = %v, want ErrMap", err)
	}
}
