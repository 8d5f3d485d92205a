package gguf

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/kernelrt/kernelrt/arena"
)

// heapDuring returns the bytes f allocated on the Go heap.
func heapDuring(f func()) int {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return int(b.TotalAlloc - a.TotalAlloc)
}

// metadataHeavy returns files built from the encodings that cost the most memory per file
// byte once parsed (measured: many small KVs 5.4x, empty nested arrays 4.7x, tensor infos
// 3.9x, empty strings 3.0x), n items each.
func metadataHeavy(n int) map[string][]byte {
	emptyArrs, emptyStrs := make([][]byte, n), make([][]byte, n)
	var kvs, infos [][]byte
	for i := range n {
		emptyArrs[i], emptyStrs[i] = arr(ValueUint8, 0), str("")
		kvs = append(kvs, kv(fmt.Sprintf("%x", i), ValueUint8, []byte{1}))
		infos = append(infos, info(fmt.Sprintf("%x", i), nil, uint32(TypeF32), uint64(32*i)))
	}
	return map[string][]byte{
		"small kvs":     cat(header(0, uint64(n)), cat(kvs...)),
		"empty arrays":  cat(header(0, 1), kv("k", ValueArray, arr(ValueArray, uint64(n), emptyArrs...))),
		"empty strings": cat(header(0, 1), kv("k", ValueArray, arr(ValueString, uint64(n), emptyStrs...))),
		"tensor infos":  tensorFile(nil, infos, 32, 32*n),
	}
}

// TestMetadataLimit: hostile metadata used to take up to 5.4x the file size with no cap. A
// cap is now enforced before allocating, and the estimate it is checked against tracks the
// real allocation.
func TestMetadataLimit(t *testing.T) {
	const n = 20000
	for name, in := range metadataHeavy(n) {
		t.Run(name, func(t *testing.T) {
			r := &reader{b: in, max: -1}
			var err error
			heap := heapDuring(func() { _, err = r.parse() })
			if err != nil {
				t.Fatal(err)
			}
			if ratio := float64(r.used) / float64(heap); ratio < 0.8 || ratio > 1.25 {
				t.Errorf("estimate %d bytes, allocated %d (%.2f): the estimate is off", r.used, heap, ratio)
			}
			t.Logf("file %d bytes, heap %d (%.1fx), estimate %d", len(in), heap, float64(heap)/float64(len(in)), r.used)

			// Half the need: refused, with the error allocating far less than the cap.
			limit := r.used / 2
			heap = heapDuring(func() { _, err = ParseLimited(in, Limits{MaxMetadataBytes: limit}) })
			var fe *FormatError
			if !errors.Is(err, ErrMetadataLimit) || !errors.As(err, &fe) ||
				!strings.Contains(err.Error(), fmt.Sprint(limit)) || !strings.Contains(err.Error(), "Limits.MaxMetadataBytes") {
				t.Fatalf("limit %d: got %v, want a *FormatError wrapping ErrMetadataLimit naming the limit", limit, err)
			}
			if heap > limit+64<<10 {
				t.Errorf("limit %d: the refused parse allocated %d bytes", limit, heap)
			}
			// Enough: parses, with the same result as Parse under the default cap.
			if _, err := ParseLimited(in, Limits{MaxMetadataBytes: r.used}); err != nil {
				t.Errorf("limit = estimate %d: %v", r.used, err)
			}
			if _, err := Parse(in); err != nil {
				t.Errorf("Parse with the default limit: %v", err)
			}
		})
	}
}

// TestOpenLimited checks that the limit reaches Open's parse, and that an error found while
// parsing the KVs keeps its sentinel when wrapped with the key's name.
func TestOpenLimited(t *testing.T) {
	path := filepath.Join(t.TempDir(), "meta.gguf")
	data := cat(header(0, 1), kv("tokenizer.ggml.tokens", ValueArray, arr(ValueString, 2, str("hello"), str("world"))))
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	r := &reader{b: data, max: -1}
	if _, err := r.parse(); err != nil {
		t.Fatal(err)
	}
	// One byte short: the last charge, the strings' bytes, is refused.
	_, err := OpenLimited(path, arena.FileOptions{}, Limits{MaxMetadataBytes: r.used - 1})
	if !errors.Is(err, ErrMetadataLimit) || !strings.Contains(err.Error(), `key "tokenizer.ggml.tokens"`) ||
		!strings.Contains(err.Error(), "meta.gguf") {
		t.Fatalf("got %v", err)
	}
	f, err := OpenLimited(path, arena.FileOptions{}, Limits{MaxMetadataBytes: -1})
	if err != nil {
		t.Fatal(err)
	}
	if s, _ := f.Metadata[0].Value.AsArray(); s == nil {
		t.Error("no array")
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}
