//go:build noasm

package kernelrt

import (
	"strings"
	"testing"
)

// TestNoasmTagRefused: -tags noasm switches off klauspost/cpuid, so the default kernels
// would silently be scalar; the first call says so instead.
func TestNoasmTagRefused(t *testing.T) {
	if _, err := DefaultKernels(); err == nil || !strings.Contains(err.Error(), "purego") {
		t.Fatalf("DefaultKernels() with -tags noasm: %v, want an error pointing at purego", err)
	}
	if err := Add(make([]float32, 1), make([]float32, 1), make([]float32, 1)); err == nil {
		t.Fatal("a kernel call with -tags noasm succeeded")
	}
}
