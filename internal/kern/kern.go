// Package kern defines the raw kernel interface every backend (cgo, asm, generic) fills in,
// the registry of backends, and the process-wide default kernel set the serial API uses.
//
// A Kernel takes its C parameters packed in an Args (pointers, int64_t values and float
// scalars in C parameter order, without the slice range and the private scratch), the
// worker's private scratch, and the slice [lo, hi) of its work. Kernels do no checking:
// package kernelrt validates every argument before any of them runs. Pointers must point at
// memory holding no Go pointers. The kernel indices (kern.GemvQ8_0, ...), Names, NumP/NumI/
// NumF and the backends' thunks are generated from the op list by tools/opgen and
// tools/asmgen.
package kern

import (
	"fmt"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/kernelrt/kernelrt/internal/cpu"
)

// P is a raw pointer to kernel memory.
type P = unsafe.Pointer

// Args holds one kernel call's parameters but the slice range and the scratch. It is passed
// by value: a kernel keeps nothing of it, and a value never makes the caller's data escape.
type Args struct {
	P [NumP]P
	I [NumI]int
	F [NumF]float32
}

// Kernel runs one kernel on the slice [lo, hi) of its work (rows, tokens, heads, elements
// or blocks, as the kernel's C declaration says). scratch is the caller's private scratch
// for kernels that take one (HasScratch), nil otherwise.
type Kernel func(a Args, scratch P, lo, hi int)

// Set is one backend's kernels for one variant. A nil entry means the backend lacks that
// kernel (only possible for asm before `make asm` regenerated it).
type Set struct {
	Backend string      // "cgo", "asm" or "generic"
	Variant cpu.Variant // which C variant the code came from
	K       [NumKernels]Kernel
}

// Name is "backend/variant", as shown in reports.
func (s *Set) Name() string { return s.Backend + "/" + s.Variant.String() }

// Missing lists the kernels s lacks, by table name.
func (s *Set) Missing() []string {
	var out []string
	for i, k := range s.K {
		if k == nil {
			out = append(out, Names[i])
		}
	}
	return out
}

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

// Lookup returns the set of backend for variant v ("generic" has only cpu.Ref and answers
// that for any v).
func Lookup(backend string, v cpu.Variant) (*Set, error) {
	mu.Lock()
	defer mu.Unlock()
	m := registry[backend]
	if m == nil {
		return nil, fmt.Errorf("kernel backend %q is not built into this binary (have %v)", backend, backendsLocked())
	}
	if backend == "generic" {
		v = cpu.Ref
	}
	s := m[v]
	if s == nil {
		return nil, fmt.Errorf("kernel backend %q has no %s variant", backend, v)
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

// PreferredBackend is the backend used when nothing forces one: asm (a plain Go call, and the
// goroutine never leaves the scheduler, which matters for pooled calls), then cgo, then generic.
func PreferredBackend() string {
	have := Backends()
	for _, b := range []string{"asm", "cgo", "generic"} {
		for _, h := range have {
			if h == b {
				return b
			}
		}
	}
	return "generic"
}

// Resolve picks the set for a backend and variant name, either of which may be empty (the
// preferred backend, the best variant this CPU runs).
func Resolve(backend, variant string) (*Set, error) {
	if backend == "" {
		backend = PreferredBackend()
	}
	v := cpu.Best()
	if cpu.DetectionOff() && variant == "" && backend != "generic" {
		return nil, fmt.Errorf("built with -tags noasm, which switches off klauspost/cpuid's CPU feature detection: only scalar kernels could run (6x slower); build with -tags purego for the pure-Go kernels, without noasm for the SIMD ones, or set %s=ref to accept scalar kernels", EnvVariant)
	}
	if variant != "" {
		pv, err := cpu.ParseVariant(variant)
		if err != nil {
			return nil, err
		}
		v = pv
	}
	if !cpu.Supports(v) {
		return nil, fmt.Errorf("this CPU cannot run the %s kernel variant", v)
	}
	return Lookup(backend, v)
}

// The process default: chosen from KERNELRT_BACKEND / KERNELRT_VARIANT at first use, so a bad
// value is an error returned by the first kernel call, not a panic at package init.
var (
	defOnce sync.Once
	defErr  error
	def     atomic.Pointer[Set]
)

// EnvBackend and EnvVariant name the environment variables that force the default kernels.
const (
	EnvBackend = "KERNELRT_BACKEND"
	EnvVariant = "KERNELRT_VARIANT"
)

// Default returns the kernel set serial calls use: the preferred backend and best variant,
// unless the environment or Use says otherwise.
func Default() (*Set, error) {
	if s := def.Load(); s != nil {
		return s, nil
	}
	defOnce.Do(func() {
		s, err := Resolve(os.Getenv(EnvBackend), os.Getenv(EnvVariant))
		if err != nil {
			defErr = fmt.Errorf("%s=%q %s=%q: %w", EnvBackend, os.Getenv(EnvBackend), EnvVariant, os.Getenv(EnvVariant), err)
			return
		}
		def.CompareAndSwap(nil, s)
	})
	if s := def.Load(); s != nil {
		return s, nil
	}
	return nil, defErr
}

// Use makes backend/variant the default set until restore is called. It is a hook for tests
// and benchmarks and must not race with running kernels.
func Use(backend, variant string) (restore func(), err error) {
	s, err := Resolve(backend, variant)
	if err != nil {
		return func() {}, err
	}
	Default() // settle the environment's choice first, so restore returns to it
	prev := def.Swap(s)
	return func() { def.Store(prev) }, nil
}

// UseSet makes s the default set until restore is called: Use for a set in hand (tests).
func UseSet(s *Set) (restore func()) {
	Default()
	prev := def.Swap(s)
	return func() { def.Store(prev) }
}
