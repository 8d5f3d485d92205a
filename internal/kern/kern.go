// Package kern defines the raw kernel interface every backend (cgo, asm, generic) fills in,
// and the registry the public API picks from.
//
// A Set's functions take base pointers and a slice (r0..r1, t0..t1, ...), exactly like the
// C kernels in csrc/kernelrt.h. They do no checking: package kernelrt validates every argument
// before any of them runs. Pointers must point at memory holding no Go pointers.
package kern

import (
	"fmt"
	"sort"
	"sync"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
)

// P is a raw pointer to kernel memory.
type P = unsafe.Pointer

// Set is one backend's kernels for one variant. A nil field means the backend lacks that op.
type Set struct {
	Backend string      // "cgo", "asm" or "generic"
	Variant cpu.Variant // which C variant the code came from

	QuantizeQ8_0   func(dst, src P, b0, b1 int)
	QuantizeQ5_0   func(dst, src P, b0, b1 int)
	DequantizeQ8_0 func(dst, src P, b0, b1 int)
	DequantizeQ5_0 func(dst, src P, b0, b1 int)

	GemvQ8_0    func(y, w, x, bias P, cols, r0, r1 int)
	GemvQ5_0    func(y, w, x, bias P, cols, r0, r1 int)
	GemvQ8_0F32 func(y, w, x, xq, bias P, cols, r0, r1 int)
	GemvQ5_0F32 func(y, w, x, xq, bias P, cols, r0, r1 int)
	GemvF32     func(y, w, x P, cols, r0, r1 int)
	GemmQ8_0    func(y, w, x, bias P, rows, cols, T, r0, r1 int)
	GemmQ5_0    func(y, w, x, bias P, rows, cols, T, r0, r1 int)

	RMSNorm func(out, x, weight P, eps float32, dim, t0, t1 int)
	Softmax func(x, valid P, cols, r0, r1 int)

	SwiGLU    func(out, gate, up P, i0, i1 int)
	Add       func(out, a, b P, i0, i1 int)
	RopeNeox  func(x, cosTab, sinTab P, stride, nHeads, headDim, pos0, t0, t1 int)
	KVAppend  func(cache, src P, srcStride, nKVHeads, headDim, maxCtx, pos0, t0, t1 int)
	Attention func(out, q, k, v, scratch P, nHeads, nKVHeads, headDim, maxCtx, qStride, pos0, T, h0, h1 int)
	EmbedQ8_0 func(out, table, ids P, dim, t0, t1 int)

	StreamRead func(out, src P, n int)
}

// Name is "backend/variant", as shown in reports.
func (s *Set) Name() string { return s.Backend + "/" + s.Variant.String() }

var (
	mu       sync.Mutex
	registry = map[string]map[cpu.Variant]*Set{}
)

// Register makes s available. Backends call it from init.
func Register(s *Set) {
	mu.Lock()
	defer mu.Unlock()
	m := registry[s.Backend]
	if m == nil {
		m = map[cpu.Variant]*Set{}
		registry[s.Backend] = m
	}
	m[s.Variant] = s
}

// Lookup returns the set of backend for variant v.
func Lookup(backend string, v cpu.Variant) (*Set, error) {
	mu.Lock()
	defer mu.Unlock()
	m := registry[backend]
	if m == nil {
		return nil, fmt.Errorf("kern: backend %q is not built in (have %v)", backend, backendsLocked())
	}
	s := m[v]
	if s == nil {
		return nil, fmt.Errorf("kern: backend %q has no %s variant", backend, v)
	}
	return s, nil
}

// Backends lists the registered backend names, sorted.
func Backends() []string {
	mu.Lock()
	defer mu.Unlock()
	return backendsLocked()
}

func backendsLocked() []string {
	out := make([]string, 0, len(registry))
	for k := range registry {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
